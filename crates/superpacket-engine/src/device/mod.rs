//! Stacked virtual devices with feature negotiation (offload-rules 3.1, 6):
//! ports, 802.1Q/802.1ad VLAN devices, bonds, teams, bridges and an
//! IPv4/IPv6 router with NAT, through which superpackets travel intact and
//! are segmented only at the final port.
//!
//! - [`features`]: the netdev feature sets and their rules (6.1, 6.2, 6.4, 6.5).
//! - [`graph`]: the device graph, transmit and receive paths, counters.
//! - [`port`]: port drivers (in-memory, pcap); [`port_io`]: TAP and AF_PACKET ports;
//!   [`pv_port`]: paravirtual shared-memory ports ([`crate::io::pv`]).
//! - [`vlan`], [`bond`], [`team`], [`bridge`]: device kinds.
//! - [`router`]: IPv4/IPv6 forwarding, ARP/NDP, NAT.
//! - [`topology`]: graphs from TOML topology files (`docs/topology.md`).

pub mod bond;
pub mod bridge;
pub mod features;
pub mod graph;
pub mod nat;
pub mod port;
pub mod port_io;
pub mod pv_port;
pub mod router;
pub mod seed;
pub mod superpackets;
pub mod tables;
pub mod team;
pub mod topology;
pub mod vlan;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_l2l3;
#[cfg(test)]
mod tests_topology;

pub use features::{DeviceFeatures, FeaturesCheck, NetdevFeatures, PacketInfo, StackMode};
pub use graph::{Device, DeviceCounters, DeviceError, DeviceId, DeviceKind, Graph};
pub use port::{DriverError, MemoryDriver, MemoryMode, PcapDriver, PortDriver};
pub use port_io::{IoPortDriver, PacketPortOptions, PacketSocketDriver, TapDriver, TapPortOptions};
pub use pv_port::{PvPortDriver, PvPortOptions};
pub use tables::TableUsage;
pub use topology::{BuildOptions, Topology, TopologyError};
