//! The seed VLAN NAT router of `examples/seed-vlan-nat.toml` as a graph:
//! the topology `superpacket bench seed-vlan-nat` measures and the device
//! tests forward through.

use super::{BuildOptions, Graph, MemoryMode, StackMode, Topology};
use std::net::Ipv4Addr;
use superpacket::traffic::{Addrs, FlowSpec, Transport};

/// The seed topology (`examples/seed-vlan-nat.toml`), built by
/// `superpacket bench seed-vlan-nat` and the device tests, so that the
/// example is exercised by both.
pub const SEED_TOPOLOGY: &str = include_str!("../../../../examples/seed-vlan-nat.toml");

/// The seed router from [`SEED_TOPOLOGY`]: `lan.10` (192.168.10.1/24) on
/// port `lan`, `wan.20` (203.0.113.1/24, masquerade) on port `wan`, default
/// route via 203.0.113.254. Returns the graph and the LAN host flow spec
/// template.
pub fn seed_router(mode: StackMode, memory_mode: MemoryMode) -> (Graph, FlowSpec) {
    let opts = BuildOptions { mode: Some(mode), memory_mode, ..BuildOptions::default() };
    let g = Topology::parse(SEED_TOPOLOGY).and_then(|t| t.build_with(&opts)).expect("the seed example is valid");
    let lan10 = g.id("lan.10").expect("in the seed example");
    let mut spec = FlowSpec::new(Transport::Udp, false, 0).with_vlans(&[(0x8100, 10)]).expect("one tag");
    spec.addrs = Addrs::V4 { src: Ipv4Addr::new(192, 168, 10, 2), dst: Ipv4Addr::new(198, 51, 100, 7) };
    spec.dst_mac = g.device(lan10).mac;
    (g, spec)
}
