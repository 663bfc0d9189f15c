//! Cross-connect tests: both directions without learning or lookup,
//! superpackets whole (or segmented at a member that cannot take them),
//! the two-member limit in the graph and at topology load, counters.

use super::features::PacketInfo;
use super::port::MemoryDriver;
use super::topology::Topology;
use super::xconnect::Xconnect;
use super::*;
use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};

fn tx_of(g: &mut Graph, p: DeviceId) -> Vec<Packet> {
    g.driver_mut::<MemoryDriver>(p).unwrap().tx.drain(..).collect()
}

/// A small UDP frame from the station ending in `src` to `dst`.
fn frame(src: u8, dst: MacAddr) -> Packet {
    let mut spec = FlowSpec::new(Transport::Udp, false, 0);
    spec.src_mac = MacAddr([0x02, 0xaa, 0, 0, 0, src]);
    spec.dst_mac = dst;
    Packet::from_frame(&Flow::new(spec).frame(64, TcpFlags::empty()).unwrap())
}

/// Ports `a` (every offload) and `b` (`b_hw`) in cross-connect `xc0`.
fn pair(b_hw: NetdevFeatures) -> (Graph, DeviceId, DeviceId, DeviceId) {
    let mut g = Graph::new(StackMode::Passthrough);
    let a = g.add_port("a", Box::new(MemoryDriver::full())).unwrap();
    let b = g.add_port("b", Box::new(MemoryDriver::new(b_hw))).unwrap();
    let xc = g.add_xconnect("xc0").unwrap();
    g.enslave(xc, a).unwrap();
    g.enslave(xc, b).unwrap();
    (g, a, b, xc)
}

#[test]
fn every_frame_leaves_through_the_other_member_in_both_directions() {
    let (mut g, a, b, xc) = pair(NetdevFeatures::FULL_NIC);
    // Whatever the addresses (unicast to either side, broadcast, the same
    // source twice from both sides): no learning, no flooding, no lookup.
    let dsts = [MacAddr([0x02, 0xaa, 0, 0, 0, 2]), MacAddr::BROADCAST, MacAddr([0x02, 0xaa, 0, 0, 0, 1])];
    for (i, dst) in dsts.into_iter().enumerate() {
        let sent = frame(1, dst);
        g.receive(a, sent.clone());
        let out = tx_of(&mut g, b);
        assert_eq!(out.len(), 1, "a -> b, frame {i}");
        assert_eq!(out[0].to_vec(), sent.to_vec(), "a -> b unchanged, frame {i}");
        assert!(tx_of(&mut g, a).is_empty(), "nothing back out of a, frame {i}");
        g.receive(b, frame(1, dst));
        assert_eq!(tx_of(&mut g, a).len(), 1, "b -> a, frame {i}");
        assert!(tx_of(&mut g, b).is_empty(), "nothing back out of b, frame {i}");
    }
    assert!(g.take_local(xc).is_none(), "nothing reaches the cross-connect's host side");
    for p in [a, b] {
        let c = g.counters(p);
        // Forwarded: each received frame's hand-over and each transmit's.
        assert_eq!((c.rx_packets, c.forwarded, c.tx_packets, c.tx_passthrough), (3, 6, 3, 3), "{p:?}");
    }
    assert!(g.counters(xc).drops.is_empty(), "{:?}", g.counters(xc).drops);
}

#[test]
fn superpackets_cross_whole_or_are_segmented_at_the_member_that_cannot_take_them() {
    for (transport, ipv6) in [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false)] {
        let what = format!("{transport:?} ipv6 {ipv6}");
        let sp = Flow::new(FlowSpec::new(transport, ipv6, 0)).superpacket(14000, 1400, TcpFlags::empty()).unwrap();
        // b takes every offload: the superpacket leaves whole.
        let (mut g, a, b, _) = pair(NetdevFeatures::FULL_NIC);
        g.receive(a, sp.clone());
        let out = tx_of(&mut g, b);
        assert_eq!(out.len(), 1, "{what}");
        assert!(out[0].meta.is_gso(), "{what}: still a superpacket");
        assert_eq!(out[0].to_vec(), sp.to_vec(), "{what}: intact");
        assert_eq!((g.counters(b).tx_superpackets, g.counters(b).tx_passthrough), (1, 1), "{what}");
        // b takes no segmentation offload: cut there, once, into 10 frames.
        let (mut g, a, b, xc) = pair(NetdevFeatures::EMPTY);
        g.receive(a, sp.clone());
        let out = tx_of(&mut g, b);
        assert_eq!(out.len(), 10, "{what}");
        assert!(out.iter().all(|f| !f.meta.is_gso() && PacketInfo::of(f).vlan_tags == 0), "{what}");
        let c = g.counters(b);
        assert_eq!((c.tx_segmented, c.segments_produced), (1, 10), "{what}");
        assert_eq!(g.counters(a).tx_segmented + g.counters(xc).tx_segmented, 0, "{what}");
    }
}

#[test]
fn features_are_negotiated_as_for_a_bridge_over_the_same_ports() {
    for mode in [StackMode::Passthrough, StackMode::Legacy] {
        for b_hw in [NetdevFeatures::FULL_NIC, NetdevFeatures::EMPTY, NetdevFeatures::SG | NetdevFeatures::HW_CSUM] {
            let (mut xg, _, _, xc) = pair(b_hw);
            xg.set_mode(mode);
            let mut bg = Graph::new(mode);
            let a = bg.add_port("a", Box::new(MemoryDriver::full())).unwrap();
            let b = bg.add_port("b", Box::new(MemoryDriver::new(b_hw))).unwrap();
            let br = bg.add_bridge("br0", false).unwrap();
            bg.enslave(br, a).unwrap();
            bg.enslave(br, b).unwrap();
            assert_eq!(xg.device(xc).feat.features, bg.device(br).feat.features, "{mode:?} {b_hw:?}");
            assert_eq!(xg.device(xc).feat.wanted, bg.device(br).feat.wanted, "{mode:?} {b_hw:?}");
        }
    }
}

#[test]
fn a_third_member_is_refused_and_a_lone_member_drops_counted() {
    let (mut g, a, b, xc) = pair(NetdevFeatures::FULL_NIC);
    let c = g.add_port("c", Box::new(MemoryDriver::full())).unwrap();
    let err = g.enslave(xc, c).unwrap_err();
    assert!(matches!(err, DeviceError::TooManyLowers { max: 2, kind: "xconnect", .. }), "{err}");
    assert!(err.to_string().contains("\"xc0\" already has 2 members"), "{err}");
    assert_eq!(g.device(c).master, None);
    assert_eq!(g.device(xc).lowers, vec![a, b]);
    // A frame given to the cross-connect itself: it has no host side.
    g.transmit(xc, frame(1, MacAddr::BROADCAST));
    assert_eq!(g.counters(xc).drops.get("xconnect-no-host"), Some(&1));
    // With b released, a's frames have nowhere to go; c may join.
    g.release(b);
    g.receive(a, frame(1, MacAddr::BROADCAST));
    assert_eq!(g.counters(xc).drops.get("no-peer"), Some(&1));
    assert!(tx_of(&mut g, b).is_empty() && tx_of(&mut g, a).is_empty());
    g.enslave(xc, c).unwrap();
    g.receive(a, frame(1, MacAddr::BROADCAST));
    assert_eq!(tx_of(&mut g, c).len(), 1);
    assert_eq!(g.kind_as::<Xconnect>(xc).unwrap().peer_of(c), Some(a));
}

/// A burst is walked packet by packet in its place, in order; packets
/// without an arrival time get the burst's; the burst is left empty with
/// its capacity. Packets dropped on the way (b's carrier down) give their
/// pool buffers back once the burst is done.
#[test]
fn a_burst_is_walked_in_place_in_order_and_left_empty() {
    use superpacket::packet::pool;
    let (mut g, a, b, _) = pair(NetdevFeatures::FULL_NIC);
    let mut burst = Vec::with_capacity(8);
    for i in 0..6 {
        let mut p = frame(i, MacAddr::BROADCAST);
        if i % 2 == 0 {
            p.meta.arrival_ns = Some(7);
        }
        burst.push(p);
    }
    let sent: Vec<Vec<u8>> = burst.iter().map(Packet::to_vec).collect();
    g.receive_burst(a, &mut burst, &mut Vec::new(), 1000);
    assert!(burst.is_empty() && burst.capacity() >= 8);
    let out = tx_of(&mut g, b);
    assert_eq!(out.iter().map(Packet::to_vec).collect::<Vec<_>>(), sent, "in order, unchanged");
    let arrivals: Vec<Option<u64>> = out.iter().map(|p| p.meta.arrival_ns).collect();
    assert_eq!(arrivals, [Some(7), Some(1000), Some(7), Some(1000), Some(7), Some(1000)]);
    assert_eq!((g.counters(a).rx_packets, g.counters(b).tx_passthrough), (6, 6));

    g.set_carrier(b, false);
    burst.extend((0..5).map(|i| Packet::from_frame_pooled(&frame(i, MacAddr::BROADCAST).to_vec())));
    let idle = pool::stats().idle_small;
    g.receive_burst(a, &mut burst, &mut Vec::new(), 1000);
    assert!(burst.is_empty());
    assert_eq!(g.counters(b).drops.get("no-carrier"), Some(&5));
    assert_eq!(pool::stats().idle_small, idle + 5, "the dropped packets' buffers are back");
}

/// A port's MTU check allows one 4-byte tag per VLAN tag the frame
/// carries, the same on the path that skips the packet's info (a linear
/// frame without offloads) and on the full validate step (the same bytes
/// with their payload in a segment).
#[test]
fn the_mtu_check_counts_vlan_tags_on_both_validate_paths() {
    let bytes = |len: usize| {
        let mut f = vec![0u8; len];
        f[..12].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0xaa, 0, 0, 0, 1]);
        f[12..16].copy_from_slice(&[0x08, 0x00, 0x45, 0]);
        f
    };
    let packet = |len: usize, tagged: bool, paged: bool| {
        let untagged = bytes(len - 4 * usize::from(tagged));
        let mut p = Packet::from_frame(&untagged[..if paged { 40 } else { untagged.len() }]);
        if paged {
            p.append_segment(untagged[40..].to_vec().into()).unwrap();
        }
        if tagged {
            p.push_vlan_tag(0x8100, 5).unwrap();
        }
        assert_eq!((p.total_len(), PacketInfo::taken_as_is_anywhere(&p)), (len, !paged));
        p
    };
    for paged in [false, true] {
        for (len, tagged, leaves) in [(114, false, true), (115, false, false), (118, true, true), (119, true, false)] {
            let (mut g, a, b, _) = pair(NetdevFeatures::FULL_NIC);
            g.set_mtu(b, 100);
            g.receive(a, packet(len, tagged, paged));
            let what = format!("{len} bytes, tagged {tagged}, paged {paged}");
            assert_eq!(tx_of(&mut g, b).len(), usize::from(leaves), "{what}");
            assert_eq!(g.counters(b).drops.get("exceeds-mtu").copied(), (!leaves).then_some(1), "{what}");
        }
    }
}

const PORTS: &str = "[[device]]\nname = \"p1\"\nkind = \"port\"\n\n[[device]]\nname = \"p2\"\nkind = \"port\"\n\n\
                     [[device]]\nname = \"p3\"\nkind = \"port\"\n\n";

#[test]
fn the_topology_builds_a_cross_connect_of_exactly_two_ports() {
    let src = format!("{PORTS}[[device]]\nname = \"xc0\"\nkind = \"xconnect\"\nports = [\"p1\", \"p2\"]\n");
    let g = Topology::parse(&src).unwrap().build().unwrap();
    let (p1, p2, xc) = (g.id("p1").unwrap(), g.id("p2").unwrap(), g.id("xc0").unwrap());
    assert_eq!(g.kind_as::<Xconnect>(xc).unwrap().peer_of(p1), Some(p2));
    assert_eq!(g.device(p2).master, Some(xc));

    let cases: [(&str, usize, &str); 5] = [
        ("ports = [\"p1\", \"p2\", \"p3\"]", 16, "xconnect `xc0` takes exactly 2 ports; this is a third"),
        ("ports = [\"p1\"]", 16, "xconnect `xc0` takes exactly 2 ports, it names 1"),
        ("", 15, "xconnect `xc0` takes exactly 2 ports, it names 0"),
        ("ports = [\"p1\", { name = \"p2\", pvid = 1 }]", 16, "xconnect ports are device names"),
        ("ports = [\"p1\", \"p2\"]\nvlan_filtering = true", 17, "key `vlan_filtering` does not apply to a xconnect"),
    ];
    for (ports, line, message) in cases {
        let src = format!("{PORTS}[[device]]\nname = \"xc0\"\nkind = \"xconnect\"\n{ports}\n");
        let err = match Topology::parse(&src).and_then(|t| t.build()) {
            Ok(_) => panic!("built:\n{src}"),
            Err(e) => e,
        };
        assert_eq!(err.line, line, "{err}\n{src}");
        assert!(err.to_string().contains(message), "{err}");
    }
}
