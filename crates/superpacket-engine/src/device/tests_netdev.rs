//! The device interface (`netdev.rs`): a kind defined outside the built-in
//! modules works through the graph unchanged, one packet's trip through a
//! bridge, VLAN devices, the router and a bond visits each device once, and
//! every device's steps add up (`rx + tx = forwarded + delivered + held +
//! refused`).

use super::bond::{BondMode, HashPolicy};
use super::features::{DeviceFeatures, NetdevFeatures, StackMode};
use super::netdev::{Cx, NetDevice, Verdict};
use super::port::MemoryDriver;
use super::vlan::VlanProto;
use super::{DeviceCounters, DeviceId, Graph};
use std::any::Any;
use std::net::{IpAddr, Ipv4Addr};
use superpacket::packet::Packet;
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::{MacAddr, TcpFlags};

/// Checks the step accounting of every device of `g`.
pub(crate) fn assert_steps_add_up(g: &Graph) {
    for d in g.devices() {
        let DeviceCounters { rx_packets, tx_packets, forwarded, delivered, held, refused, .. } = d.counters;
        assert_eq!(
            rx_packets + tx_packets,
            forwarded + delivered + held + refused,
            "{} ({}): {:?}",
            d.name,
            d.kind,
            d.counters
        );
    }
    let refused: u64 = g.devices().iter().map(|d| d.counters.refused).sum();
    let reasons: u64 = g.devices().iter().map(|d| d.counters.dropped()).sum();
    assert!(refused <= reasons, "every refusal has a reason: {refused} refusals, {reasons} reasons");
}

/// A kind this crate does not know: forwards to its one lower and counts
/// what it saw pass in each direction.
#[derive(Debug, Default)]
struct Tally {
    down: u64,
    up: u64,
}

impl NetDevice for Tally {
    fn kind(&self) -> &'static str {
        "tally"
    }
    fn transmit(&mut self, cx: &mut Cx<'_>, _pkt: &mut Packet, len: usize) -> Verdict {
        self.down += 1;
        match cx.dev().lowers.first().copied() {
            Some(lower) => Verdict::Transmit(lower, len),
            None => cx.drop("no-lower"),
        }
    }
    fn receive(&mut self, _cx: &mut Cx<'_>, _from: DeviceId, _pkt: &mut Packet, len: usize) -> Verdict {
        self.up += 1;
        Verdict::Up(len)
    }
    fn compute_features(&self, own: &DeviceFeatures, lowers: &[DeviceFeatures], _mode: StackMode) -> DeviceFeatures {
        let mut f = *own;
        f.features = lowers.first().map_or(NetdevFeatures::EMPTY, |l| l.features);
        f
    }
    fn is_master(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn a_kind_from_outside_the_crate_plugs_into_the_graph() {
    let mut g = Graph::new(StackMode::Passthrough);
    let p = g.add_port("p", Box::new(MemoryDriver::full())).unwrap();
    let t = g.add_device("t0", Box::new(Tally::default()), DeviceFeatures::default()).unwrap();
    g.enslave(t, p).unwrap();
    assert_eq!(g.device(t).feat.features, g.device(p).feat.features, "features come from the lower");
    let spec = FlowSpec::new(Transport::Tcp, false, 0);
    let sp = Flow::new(spec).superpacket(20_000, 1400, TcpFlags::ACK).unwrap();
    g.transmit(t, sp);
    assert_eq!(g.driver_mut::<MemoryDriver>(p).unwrap().tx.len(), 1, "the superpacket reaches the port whole");
    g.receive(p, Packet::from_frame(&Flow::new(spec).frame(100, TcpFlags::ACK).unwrap()));
    assert!(g.take_local(t).is_some(), "the master's receive took the port's frame up");
    let tally = g.kind_as::<Tally>(t).unwrap();
    assert_eq!((tally.down, tally.up), (1, 1));
    assert_eq!(g.device(t).kind, "tally");
    assert_steps_add_up(&g);
}

/// lan (bridge port) -> br0 -> br0.10 (router interface) -> router ->
/// wan.20 (VLAN on bond0) -> bond0 -> p1/p2.
fn trip_graph() -> (Graph, FlowSpec) {
    let mut g = Graph::new(StackMode::Passthrough);
    let lan = g.add_port("lan", Box::new(MemoryDriver::full())).unwrap();
    let br = g.add_bridge("br0", false).unwrap();
    g.enslave(br, lan).unwrap();
    let br10 = g.add_vlan("br0.10", br, VlanProto::Dot1Q, 10).unwrap();
    let p1 = g.add_port("p1", Box::new(MemoryDriver::full())).unwrap();
    let p2 = g.add_port("p2", Box::new(MemoryDriver::full())).unwrap();
    let bond = g.add_bond("bond0", BondMode::ActiveBackup, HashPolicy::Layer2).unwrap();
    g.enslave(bond, p1).unwrap();
    g.enslave(bond, p2).unwrap();
    let wan20 = g.add_vlan("wan.20", bond, VlanProto::Dot1Q, 20).unwrap();
    g.add_address(br10, IpAddr::V4(Ipv4Addr::new(192, 168, 10, 1)), 24);
    g.add_address(wan20, IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)), 24);
    let gw = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 254));
    let r = g.router_mut();
    r.add_route(super::router::Route { prefix: IpAddr::V4(Ipv4Addr::UNSPECIFIED), len: 0, via: Some(gw), dev: wan20 });
    r.add_neighbour(gw, MacAddr([0x02, 0xee, 0, 0, 0, 1]));
    let mut spec = FlowSpec::new(Transport::Udp, false, 0).with_vlans(&[(0x8100, 10)]).unwrap();
    spec.addrs = Addrs::V4 { src: Ipv4Addr::new(192, 168, 10, 2), dst: Ipv4Addr::new(198, 51, 100, 7) };
    spec.dst_mac = g.device(br10).mac;
    (g, spec)
}

#[test]
fn a_packet_visits_each_device_of_its_path_once() {
    let (mut g, spec) = trip_graph();
    let id = |g: &Graph, n: &str| g.id(n).unwrap();
    let sp = Flow::new(spec).superpacket(30_000, 1400, TcpFlags::empty()).unwrap();
    g.receive(id(&g, "lan"), sp);
    let out: Vec<Packet> = g.driver_mut::<MemoryDriver>(id(&g, "p1")).unwrap().tx.drain(..).collect();
    assert_eq!(out.len(), 1, "one routed superpacket on the active slave");
    assert!(out[0].meta.is_gso(), "still a superpacket");
    let rx = |g: &Graph, n: &str| g.counters(g.id(n).unwrap()).rx_packets;
    let tx = |g: &Graph, n: &str| g.counters(g.id(n).unwrap()).tx_packets;
    // Received once each on the way up, transmitted once each on the way down.
    for n in ["lan", "br0", "br0.10", "router"] {
        assert_eq!((rx(&g, n), tx(&g, n)), (1, 0), "{n}");
    }
    for n in ["wan.20", "bond0", "p1"] {
        assert_eq!((rx(&g, n), tx(&g, n)), (0, 1), "{n}");
    }
    assert_eq!((rx(&g, "p2"), tx(&g, "p2")), (0, 0), "the backup slave");
    assert_steps_add_up(&g);
    let mut problems = Vec::new();
    validate_frame(&out[0].to_vec(), Medium::Ethernet, &out[0].meta, false, &mut problems);
    assert!(problems.is_empty(), "the routed superpacket is valid: {problems:?}");
}

#[test]
fn refusals_are_counted_once_with_their_reason_on_every_path() {
    let (mut g, spec) = trip_graph();
    let lan = g.id("lan").unwrap();
    let mut f = Flow::new(spec);
    // Good, TTL expired, to a host the bridge does not know, a runt.
    g.receive(lan, Packet::from_frame(&f.frame(200, TcpFlags::empty()).unwrap()));
    let mut expired = spec;
    expired.ttl = 1;
    g.receive(lan, Packet::from_frame(&Flow::new(expired).frame(200, TcpFlags::empty()).unwrap()));
    let mut elsewhere = spec;
    elsewhere.dst_mac = MacAddr([0x02, 0x77, 0, 0, 0, 9]);
    g.receive(lan, Packet::from_frame(&Flow::new(elsewhere).frame(200, TcpFlags::empty()).unwrap()));
    g.receive(lan, Packet::from_frame(&[0u8; 10]));
    let p1 = g.id("p1").unwrap();
    g.set_carrier(p1, false);
    let p2 = g.id("p2").unwrap();
    g.set_carrier(p2, false);
    g.receive(lan, Packet::from_frame(&f.frame(200, TcpFlags::empty()).unwrap()));
    assert_steps_add_up(&g);
    let router = g.router_id().unwrap();
    assert_eq!(g.counters(router).drops.get("ttl-exceeded"), Some(&1));
    let bond = g.id("bond0").unwrap();
    assert_eq!(g.counters(bond).drops.get("no-slave"), Some(&1), "no usable slave left");
    let br = g.id("br0").unwrap();
    assert_eq!(g.counters(br).drops.get("runt"), Some(&1));
    assert_eq!(g.counters(br).drops.get("no-flood-member"), Some(&1), "unknown unicast with nowhere to go");
}
