//! Stacked virtual devices with feature negotiation (offload-rules 3.1, 6):
//! ports, 802.1Q/802.1ad VLAN devices, bonds, teams, bridges, cross-connects and an
//! IPv4/IPv6 router with NAT, through which superpackets travel intact and
//! are segmented only at the final port.
//!
//! - [`features`]: the netdev feature sets and their rules (6.1, 6.2, 6.4, 6.5).
//! - [`graph`]: the device graph, transmit and receive paths, counters.
//! - [`port`]: port drivers (in-memory, pcap); [`port_io`]: TAP and AF_PACKET ports;
//!   [`tun_port`]: TUN ports (raw IP, framed as a point-to-point Ethernet link);
//!   [`vhost_user`]: vhost-user-net ports (virtio-net devices for a VMM or
//!   a virtio-user frontend).
//!
//! Each real port driver is built with its cargo feature of this crate
//! (`tap`, `tun`, `af-packet`, `vhost-user`; all on by default); a topology naming a
//! driver that is not built is refused, naming the feature.
//! - [`vlan`], [`bond`], [`team`], [`bridge`], [`xconnect`]: device kinds.
//! - [`udp_tunnel`]: VXLAN and Geneve devices (superpackets encapsulated whole).
//! - [`router`]: IPv4/IPv6 forwarding, ARP/NDP, NAT, local UDP sockets of tunnels;
//!   [`conntrack`]: NAT's connection table, shared by the engine's workers;
//!   [`neighbours`]: the neighbour table the workers share.
//! - [`topology`]: graphs from TOML topology files (`docs/topology.md`).

pub mod bond;
pub mod bridge;
pub mod conntrack;
pub mod features;
pub mod graph;
pub mod ingress;
pub mod nat;
pub mod neighbours;
pub mod netdev;
pub mod port;
#[cfg(any(feature = "tap", feature = "tun", feature = "af-packet"))]
pub mod port_io;
pub mod router;
pub mod seed;
pub mod superpackets;
pub mod tables;
pub mod team;
pub mod topology;
#[cfg(feature = "tun")]
pub mod tun_port;
pub mod udp_tunnel;
#[cfg(feature = "vhost-user")]
pub mod vhost_user;
pub mod vlan;
pub mod xconnect;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_ingress;
#[cfg(test)]
mod tests_l2l3;
#[cfg(test)]
mod tests_netdev;
#[cfg(test)]
mod tests_runs;
#[cfg(test)]
mod tests_topology;
#[cfg(test)]
mod tests_tunnel;
#[cfg(test)]
mod tests_workers;
#[cfg(test)]
mod tests_xconnect;

pub use features::{DeviceFeatures, FeaturesCheck, NetdevFeatures, PacketInfo, StackMode};
pub use graph::{Device, DeviceCounters, DeviceError, DeviceId, Graph};
pub use netdev::{Cx, NetDevice, Run, Verdict};
pub use port::{DriverError, HeldFrame, LinkOutput, MemoryDriver, MemoryMode, PcapDriver, PortDevice, PortDriver};
#[cfg(any(feature = "tap", feature = "tun", feature = "af-packet"))]
pub use port_io::IoPortDriver;
#[cfg(feature = "tap")]
pub use port_io::TapDriver;
#[cfg(any(feature = "tap", feature = "tun"))]
pub use port_io::TapPortOptions;
#[cfg(feature = "af-packet")]
pub use port_io::{PacketPortOptions, PacketSocketDriver};
pub use tables::TableUsage;
pub use topology::{BuildOptions, Topology, TopologyError};
#[cfg(feature = "tun")]
pub use tun_port::TunDriver;
#[cfg(feature = "vhost-user")]
pub use vhost_user::{VhostUserDriver, VhostUserOptions};
