//! The offload engines: receive coalescing ([`gro`]) and transmit
//! segmentation ([`gso`]), each layered like Linux's per-protocol offload
//! callbacks (the core walks Ethernet/VLAN -> IPv4/IPv6 -> TCP/UDP).

pub mod frag;
pub mod gro;
pub mod gso;
