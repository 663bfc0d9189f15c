//! superpacket's live data path: a device graph between real ports.
//!
//! The modules follow the data flow: devices ([`device`]: bridge, VLAN,
//! bond, team, router, NAT, and the port devices) -> port I/O ([`io`]: TAP,
//! TUN, AF_PACKET, the virtio-user frontend, namespaces) -> the engine
//! ([`engine`]: workers, statistics, the control socket) that
//! `superpacket run` starts. The offloads themselves are the
//! [`superpacket`] crate's.

pub mod device;
pub mod engine;
pub mod io;
