//! Bridge tests (MAC learning, ageing, flooding, VLAN filtering with tagged
//! and untagged members, superpackets across the bridge) and router tests
//! (ARP and NDP resolution, IPv6 forwarding, TTL / hop-limit expiry).

use super::features::PacketInfo;
use super::port::MemoryDriver;
use super::topology::load;
use super::vlan::outer_tag;
use super::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use superpacket::packet::Packet;
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::{ArpOperation, ArpPacket, ArpRepr, FrameHeaders, Icmpv6Repr, MacAddr, TcpFlags};

const S: u64 = 1_000_000_000;

fn tx_of(g: &mut Graph, p: DeviceId) -> Vec<Packet> {
    g.driver_mut::<MemoryDriver>(p).unwrap().tx.drain(..).collect()
}

fn mac(last: u8) -> MacAddr {
    MacAddr([0x02, 0xaa, 0, 0, 0, last])
}

/// A small UDP frame from `src` to `dst` carried in `tags`.
fn frame(src: MacAddr, dst: MacAddr, tags: &[(u16, u16)]) -> Packet {
    let mut spec = FlowSpec::new(Transport::Udp, false, 0).with_vlans(tags).unwrap();
    spec.src_mac = src;
    spec.dst_mac = dst;
    Packet::from_frame(&Flow::new(spec).frame(64, TcpFlags::empty()).unwrap())
}

fn counts(g: &mut Graph, ports: &[DeviceId]) -> Vec<usize> {
    ports.iter().map(|p| tx_of(g, *p).len()).collect()
}

// ------------------------------------------------------------------ bridge

#[test]
fn bridge_learns_floods_to_all_but_ingress_and_ages_with_the_graph_clock() {
    let mut g = Graph::new(StackMode::Passthrough);
    let ports: Vec<DeviceId> =
        ["a", "b", "c"].iter().map(|n| g.add_port(n, Box::new(MemoryDriver::full())).unwrap()).collect();
    let (a, b, c) = (ports[0], ports[1], ports[2]);
    let br = g.add_bridge("br0", false).unwrap();
    for p in &ports {
        g.enslave(br, *p).unwrap();
    }
    let (x, y, z) = (mac(1), mac(2), mac(3));

    // Unknown destination: flooded to every port but the ingress, not up to
    // the host (Linux passes unknown unicast up only on a promiscuous bridge).
    g.receive(a, frame(x, y, &[]));
    assert_eq!(counts(&mut g, &ports), [0, 1, 1]);
    assert!(g.take_local(br).is_none(), "unknown unicast stays off the bridge device");
    // Broadcast: flooded, and up to the host.
    g.receive(b, frame(y, MacAddr::BROADCAST, &[]));
    assert_eq!(counts(&mut g, &ports), [1, 0, 1]);
    assert!(g.take_local(br).is_some(), "broadcast reaches the bridge device");
    // Learnt: x on a, y on b -> unicast only.
    g.receive(b, frame(y, x, &[]));
    assert_eq!(counts(&mut g, &ports), [1, 0, 0]);
    g.receive(c, frame(z, y, &[]));
    assert_eq!(counts(&mut g, &ports), [0, 1, 0]);
    // Destination on the ingress port: dropped and counted.
    g.receive(a, frame(mac(9), x, &[]));
    assert_eq!(counts(&mut g, &ports), [0, 0, 0]);
    assert_eq!(g.counters(br).drops.get("same-port"), Some(&1));
    // A station that moves is re-learnt on its new port.
    g.receive(c, frame(x, MacAddr::BROADCAST, &[]));
    let _ = counts(&mut g, &ports);
    g.receive(b, frame(y, x, &[]));
    assert_eq!(counts(&mut g, &ports), [0, 0, 1]);

    // Ageing (300 s by default) with the graph's clock: x was last seen at
    // t=0; at 299 s it is still known, at 301 s frames to it flood.
    g.set_time(299 * S);
    g.receive(b, frame(y, x, &[]));
    assert_eq!(counts(&mut g, &ports), [0, 0, 1]);
    g.set_time(600 * S);
    g.receive(b, frame(y, x, &[]));
    assert_eq!(counts(&mut g, &ports), [1, 0, 1], "aged out: flooded");
    let st = g.kind_as_mut::<super::bridge::Bridge>(br).expect("a bridge");
    st.ageing_ns = 10 * S;
    assert!(st.lookup(y, 0, 600 * S).is_some(), "y was just re-learnt");
    let aged = st.age(700 * S);
    assert!(aged >= 3, "{aged} entries aged out");
    assert!(st.fdb.is_empty());

    // A full table makes room from aged-out entries.
    st.max_entries = 2;
    st.learn(mac(20), 0, a, 0);
    st.learn(mac(21), 0, a, 0);
    st.learn(mac(22), 0, a, 5 * S);
    assert!(st.lookup(mac(22), 0, 5 * S).is_none(), "full, nothing aged yet");
    st.learn(mac(22), 0, a, 20 * S);
    assert_eq!(st.lookup(mac(22), 0, 20 * S), Some(a));
    assert_eq!(st.fdb.len(), 1);
}

fn vlan_bridge() -> (Graph, [DeviceId; 5]) {
    let g = load(include_str!("../../../../examples/bridge-vlan-filtering.toml")).unwrap();
    let ids = ["access1", "access2", "trunk", "uplink", "br0"].map(|n| g.id(n).unwrap());
    (g, ids)
}

#[test]
fn bridge_vlan_filtering_with_tagged_and_untagged_members() {
    let (mut g, [acc1, acc2, trunk, uplink, br]) = vlan_bridge();
    let ports = [acc1, acc2, trunk, uplink];
    let br10 = g.id("br0.10").unwrap();
    let tags = |p: &Packet| (PacketInfo::of(p).vlan_tags, outer_tag(p.linear()));

    // Untagged on access1 -> pvid 10: trunk gets it tagged 10, uplink
    // (untagged member of 10) untagged, access2 (VLAN 20 only) nothing; the
    // bridge itself (tagged member of 10) passes it tagged to br0.10.
    g.receive(acc1, frame(mac(1), MacAddr::BROADCAST, &[]));
    let out: Vec<Vec<Packet>> = ports.iter().map(|p| tx_of(&mut g, *p)).collect();
    assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), [0, 0, 1, 1]);
    assert_eq!(tags(&out[2][0]), (1, Some((0x8100, 10))));
    assert_eq!(tags(&out[3][0]).0, 0);
    assert_eq!(g.counters(br10).rx_packets, 1, "the VLAN device on the bridge gets VLAN 10");
    assert!(g.take_local(br).is_none(), "not delivered untagged to the bridge device");

    // Tagged 20 on the trunk: tag stripped towards access2 (untagged
    // member), kept towards uplink (tagged member), nothing to access1.
    g.receive(trunk, frame(mac(2), MacAddr::BROADCAST, &[(0x8100, 20)]));
    let out: Vec<Vec<Packet>> = ports.iter().map(|p| tx_of(&mut g, *p)).collect();
    assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), [0, 1, 0, 1]);
    assert_eq!(tags(&out[1][0]), (0, None));
    assert_eq!(tags(&out[3][0]), (1, Some((0x8100, 20))));
    assert_eq!(g.counters(br10).rx_packets, 1, "the bridge is not in VLAN 20");
    assert!(g.take_local(br).is_none());

    // Learnt per VLAN: mac(1) is in VLAN 10 on access1; a VLAN 10 frame to it
    // from the trunk goes there untagged, a VLAN 20 frame to it floods VLAN 20.
    g.receive(trunk, frame(mac(2), mac(1), &[(0x8100, 10)]));
    assert_eq!(counts(&mut g, &ports), [1, 0, 0, 0]);
    g.receive(trunk, frame(mac(2), mac(1), &[(0x8100, 20)]));
    assert_eq!(counts(&mut g, &ports), [0, 1, 0, 1]);

    // Not allowed: VLAN 30 on the trunk, VLAN 20 tagged on access1 -> dropped, counted.
    let before = g.counters(br).drops.get("vlan-filtered").copied().unwrap_or(0);
    g.receive(trunk, frame(mac(2), MacAddr::BROADCAST, &[(0x8100, 30)]));
    g.receive(acc1, frame(mac(1), MacAddr::BROADCAST, &[(0x8100, 20)]));
    assert_eq!(counts(&mut g, &ports), [0, 0, 0, 0]);
    assert_eq!(g.counters(br).drops.get("vlan-filtered"), Some(&(before + 2)));

    // Untagged on the trunk: native VLAN 1, which no other member carries.
    g.receive(trunk, frame(mac(2), MacAddr::BROADCAST, &[]));
    assert_eq!(counts(&mut g, &ports), [0, 0, 0, 0]);

    // From the host through br0.10: tagged 10 into the bridge, then per port.
    g.transmit(br10, frame(mac(0x10), MacAddr::BROADCAST, &[]));
    let out: Vec<Vec<Packet>> = ports.iter().map(|p| tx_of(&mut g, *p)).collect();
    assert_eq!(out.iter().map(Vec::len).collect::<Vec<_>>(), [1, 0, 1, 1]);
    assert_eq!((tags(&out[0][0]).0, tags(&out[2][0]), tags(&out[3][0]).0), (0, (1, Some((0x8100, 10))), 0));
}

#[test]
fn superpackets_cross_the_bridge_whole_or_are_segmented_at_a_port_that_cannot_take_them() {
    for (transport, ipv6) in [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false)] {
        let (mut g, [acc1, _acc2, trunk, uplink, br]) = vlan_bridge();
        let (host1, host_up, sender) = (mac(1), mac(3), mac(2));
        // Learn where the receivers are (VLAN 10).
        g.receive(acc1, frame(host1, MacAddr::BROADCAST, &[]));
        g.receive(uplink, frame(host_up, MacAddr::BROADCAST, &[]));
        for p in [acc1, trunk, uplink] {
            tx_of(&mut g, p);
        }
        g.reset_counters();
        let what = format!("{transport:?} ipv6 {ipv6}");
        let sp = |dst: MacAddr| {
            let mut spec = FlowSpec::new(transport, ipv6, 0).with_vlans(&[(0x8100, 10)]).unwrap();
            spec.src_mac = sender;
            spec.dst_mac = dst;
            Flow::new(spec).superpacket(14000, 1400, TcpFlags::empty()).unwrap()
        };
        // To access1 (full NIC): the superpacket arrives whole, tag stripped.
        g.receive(trunk, sp(host1));
        let out = tx_of(&mut g, acc1);
        assert_eq!(out.len(), 1, "{what}");
        assert!(out[0].meta.is_gso(), "{what}: still a superpacket");
        assert_eq!(PacketInfo::of(&out[0]).vlan_tags, 0, "{what}");
        assert_eq!(out[0].total_len(), sp(host1).total_len() - 4, "{what}: intact but for the tag");
        assert_eq!(g.counters(acc1).tx_passthrough, 1, "{what}");
        // To uplink (no TSO/USO): segmented there, once, valid and untagged.
        g.receive(trunk, sp(host_up));
        let out = tx_of(&mut g, uplink);
        assert_eq!(out.len(), 10, "{what}");
        let c = g.counters(uplink);
        assert_eq!((c.tx_segmented, c.segments_produced), (1, 10), "{what}");
        assert_eq!(g.counters(br).tx_segmented + g.counters(trunk).tx_segmented, 0, "{what}");
        let mut problems = Vec::new();
        let mut payload = 0;
        for (i, f) in out.iter().enumerate() {
            assert!(!f.meta.is_gso(), "{what}");
            let data = f.to_vec();
            problems.clear();
            validate_frame(&data, Medium::Ethernet, &f.meta, false, &mut problems);
            assert!(problems.is_empty(), "{what} segment {i}: {problems:?}");
            assert_eq!(PacketInfo::of(f).vlan_tags, 0, "{what}");
            payload += FrameHeaders::parse(&data).unwrap().payload_len;
        }
        assert_eq!(payload, 14000, "{what}: every byte once");
    }
}

// ------------------------------------------------------------------ router

/// The seed router with no static neighbour; returns (graph, lan, wan, LAN flow spec).
fn router_without_neighbours() -> (Graph, DeviceId, DeviceId, FlowSpec) {
    let (mut g, spec) = crate::device::seed::seed_router(StackMode::Passthrough, MemoryMode::Capture);
    g.router_mut().neighbours.clear();
    let (lan, wan) = (g.id("lan").unwrap(), g.id("wan").unwrap());
    (g, lan, wan, spec)
}

#[test]
fn arp_resolution_holds_packets_until_the_reply_releases_them_in_order() {
    let (mut g, lan, wan, spec) = router_without_neighbours();
    let wan20 = g.id("wan.20").unwrap();
    let router_mac = g.device(wan20).mac;
    let gw = Ipv4Addr::new(203, 0, 113, 254);
    let gw_mac = mac(0xfe);
    let mut flow = Flow::new(spec);
    for len in [100, 200, 300] {
        g.receive(lan, Packet::from_frame(&flow.frame(len, TcpFlags::empty()).unwrap()));
    }
    let mut tcp = spec;
    tcp.transport = Transport::Tcp;
    g.receive(lan, Flow::new(tcp).superpacket(14480, 1448, TcpFlags::empty()).unwrap());
    assert_eq!(g.router_mut().pending(), 4);
    // One ARP request, broadcast in VLAN 20, asking for the gateway.
    let out = tx_of(&mut g, wan);
    assert_eq!(out.len(), 1, "one request for four waiting packets");
    let req = out[0].linear();
    assert_eq!(outer_tag(req), Some((0x8100, 20)));
    assert_eq!((&req[0..6], &req[6..12], &req[16..18]), (&[0xff; 6][..], &router_mac.0[..], &[0x08, 0x06][..]));
    let r = ArpRepr::parse(&ArpPacket::new_checked(&req[18..]).unwrap()).unwrap();
    assert_eq!(r.operation, ArpOperation::Request);
    assert_eq!((r.source_protocol_addr, r.target_protocol_addr), (Ipv4Addr::new(203, 0, 113, 1), gw));

    // The gateway replies; the packets leave in order, addressed to it.
    let reply = ArpRepr::reply_to(&r, gw_mac);
    let mut arp = [0u8; 28];
    reply.emit(&mut ArpPacket::new_unchecked(&mut arp[..])).unwrap();
    let mut f = Vec::new();
    f.extend_from_slice(&router_mac.0);
    f.extend_from_slice(&gw_mac.0);
    f.extend_from_slice(&[0x81, 0x00, 0x00, 20, 0x08, 0x06]);
    f.extend_from_slice(&arp);
    g.receive(wan, Packet::from_frame(&f));
    assert_eq!(g.router_mut().pending(), 0);
    assert_eq!(g.router_mut().neighbours.get(&IpAddr::V4(gw)), Some(&gw_mac));
    let out = tx_of(&mut g, wan);
    assert_eq!(out.len(), 4);
    let mut problems = Vec::new();
    for (i, p) in out.iter().enumerate() {
        let d = p.linear();
        assert_eq!((&d[0..6], &d[6..12]), (&gw_mac.0[..], &router_mac.0[..]), "packet {i}");
        assert_eq!(&d[18 + 12..18 + 16], &[203, 0, 113, 1], "masqueraded");
        problems.clear();
        validate_frame(&p.to_vec(), Medium::Ethernet, &p.meta, false, &mut problems);
        assert!(problems.is_empty(), "packet {i}: {problems:?}");
    }
    let lens: Vec<usize> = out[..3].iter().map(|p| FrameHeaders::parse(p.linear()).unwrap().payload_len).collect();
    assert_eq!(lens, [100, 200, 300], "released in arrival order");
    assert!(out[3].meta.is_gso(), "the superpacket waited whole and left whole");
    // Resolved: the next packet goes straight out.
    g.receive(lan, Packet::from_frame(&flow.frame(50, TcpFlags::empty()).unwrap()));
    assert_eq!(tx_of(&mut g, wan).len(), 1);
}

/// The ARP requests in `out`, as their target addresses.
fn arp_targets(out: &[Packet]) -> Vec<Ipv4Addr> {
    out.iter()
        .filter_map(|p| ArpRepr::parse(&ArpPacket::new_checked(&p.linear()[18..]).ok()?).ok())
        .map(|r| r.target_protocol_addr)
        .collect()
}

#[test]
fn a_silent_neighbour_is_solicited_three_times_then_its_packets_are_dropped_and_counted() {
    use crate::device::router::{MAX_PENDING, SOLICIT_INTERVAL_NS};
    let (mut g, lan, wan, spec) = router_without_neighbours();
    let wan20 = g.id("wan.20").unwrap();
    let gw = Ipv4Addr::new(203, 0, 113, 254);
    let mut flow = Flow::new(spec);
    let sec = SOLICIT_INTERVAL_NS;
    g.set_time(10 * sec);
    for len in [100, 200, 300] {
        g.receive(lan, Packet::from_frame(&flow.frame(len, TcpFlags::empty()).unwrap()));
    }
    assert_eq!(arp_targets(&tx_of(&mut g, wan)), [gw], "first request");
    assert_eq!((g.router_mut().pending(), g.router_mut().resolving()), (3, 1));
    // Retransmitted once per interval, not more often.
    g.housekeeping(10 * sec + sec / 2);
    assert!(tx_of(&mut g, wan).is_empty(), "no retransmission before the interval");
    g.housekeeping(11 * sec);
    assert_eq!(arp_targets(&tx_of(&mut g, wan)), [gw], "second request");
    g.housekeeping(12 * sec);
    assert_eq!(arp_targets(&tx_of(&mut g, wan)), [gw], "third request");
    assert_eq!(g.router_mut().pending(), 3, "still waiting after three requests");
    // No answer to the third: the neighbour is given up, its packets dropped and counted.
    g.housekeeping(13 * sec);
    assert!(tx_of(&mut g, wan).is_empty(), "no fourth request");
    assert_eq!((g.router_mut().pending(), g.router_mut().resolving(), g.router_mut().neighbours_failed), (0, 0, 1));
    assert_eq!(g.device(wan20).counters.drops.get("neighbour-unresolved"), Some(&3));

    // The queue does not stay full of packets for silent hosts: 64 of them
    // fill it, the 65th packet is refused, and once they are given up
    // traffic waits in the queue again.
    let mut silent = spec;
    for i in 0..MAX_PENDING as u32 {
        silent.addrs = Addrs::V4 { src: Ipv4Addr::new(192, 168, 10, 2), dst: Ipv4Addr::from(0xcb00_7100 + 101 + i) };
        g.set_time(20 * sec);
        g.receive(lan, Packet::from_frame(&Flow::new(silent).frame(64, TcpFlags::empty()).unwrap()));
    }
    assert_eq!((g.router_mut().pending(), g.router_mut().resolving()), (MAX_PENDING, MAX_PENDING));
    assert_eq!(arp_targets(&tx_of(&mut g, wan)).len(), MAX_PENDING);
    g.receive(lan, Packet::from_frame(&flow.frame(64, TcpFlags::empty()).unwrap()));
    let router = g.router_id().unwrap();
    assert_eq!(g.counters(router).drops.get("neighbour-queue-full"), Some(&1), "counted on the router");
    for t in 21..=23 {
        g.housekeeping(t * sec);
    }
    assert_eq!(g.router_mut().pending(), 0);
    assert_eq!(g.device(wan20).counters.drops.get("neighbour-unresolved"), Some(&(3 + MAX_PENDING as u64)));
    tx_of(&mut g, wan);
    g.receive(lan, Packet::from_frame(&flow.frame(64, TcpFlags::empty()).unwrap()));
    assert_eq!(g.router_mut().pending(), 1, "the queue takes packets again");
    assert_eq!(arp_targets(&tx_of(&mut g, wan)), [gw], "a fresh resolution starts");
}

/// A datagram that arrived in fragments is reassembled for NAT and cut
/// again; when the neighbour queue has room for only some of its fragments,
/// each refused fragment is a counted drop (not one drop per datagram).
#[test]
fn every_refused_fragment_of_a_refragmented_datagram_is_counted() {
    use crate::device::router::MAX_PENDING;
    use superpacket::offload::frag::{FragmentRequest, Fragmenter};
    let (mut g, lan, wan, spec) = router_without_neighbours();
    // Fill the neighbour queue but one place with packets for silent hosts.
    let mut silent = spec;
    for i in 0..MAX_PENDING as u32 - 1 {
        silent.addrs = Addrs::V4 { src: Ipv4Addr::new(192, 168, 10, 2), dst: Ipv4Addr::from(0xcb00_7100 + 101 + i) };
        g.receive(lan, Packet::from_frame(&Flow::new(silent).frame(64, TcpFlags::empty()).unwrap()));
    }
    tx_of(&mut g, wan);
    // A 3000-byte datagram in three fragments (MTU 1200) for the gateway.
    let mut big = spec;
    big.dont_frag = false;
    let whole = Packet::from_frame(&Flow::new(big).frame(3000, TcpFlags::empty()).unwrap());
    let mut frags = Vec::new();
    Fragmenter::new().fragment(whole, &FragmentRequest::forward(1200), &mut frags).unwrap();
    assert_eq!(frags.len(), 3);
    for f in frags {
        g.receive(lan, f);
    }
    assert_eq!(g.router_mut().pending(), MAX_PENDING, "one fragment took the last place");
    assert_eq!(
        g.counters(g.router_id().unwrap()).drops.get("neighbour-queue-full"),
        Some(&2),
        "both refused fragments counted"
    );
}

/// An ARP request from `host` at `addr` for the router's 192.168.10.1, in VLAN 10.
fn arp_request_to_router(host: MacAddr, addr: Ipv4Addr) -> Packet {
    let req = ArpRepr::request(host, addr, Ipv4Addr::new(192, 168, 10, 1));
    let mut arp = [0u8; 28];
    req.emit(&mut ArpPacket::new_unchecked(&mut arp[..])).unwrap();
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&host.0);
    f.extend_from_slice(&[0x81, 0x00, 0x00, 10, 0x08, 0x06]);
    f.extend_from_slice(&arp);
    Packet::from_frame(&f)
}

#[test]
fn arp_flood_from_spoofed_sources_cannot_grow_the_neighbour_table() {
    use crate::device::router::MAX_NEIGHBOURS;
    let (mut g, lan, _wan, _spec) = router_without_neighbours();
    let flood = MAX_NEIGHBOURS + 500;
    for i in 0..flood {
        let addr = Ipv4Addr::from(0xc0a8_0000u32 + 2 + i as u32);
        g.receive(lan, arp_request_to_router(mac((i % 250) as u8), addr));
        if i % 64 == 0 {
            tx_of(&mut g, lan);
        }
    }
    assert_eq!(g.router_mut().neighbours.len(), MAX_NEIGHBOURS);
    assert_eq!(g.router_mut().neighbours_refused, 500);
    // Every request was still answered.
    let answered = g.counters(lan).tx_packets;
    assert_eq!(answered as usize, flood, "{:?}", g.counters(lan));
}

#[test]
fn router_answers_arp_for_its_address() {
    let (mut g, lan, _wan, _spec) = router_without_neighbours();
    let lan10 = g.id("lan.10").unwrap();
    let host = mac(0x22);
    g.receive(lan, arp_request_to_router(host, Ipv4Addr::new(192, 168, 10, 2)));
    let out = tx_of(&mut g, lan);
    assert_eq!(out.len(), 1);
    let r = ArpRepr::parse(&ArpPacket::new_checked(&out[0].linear()[18..]).unwrap()).unwrap();
    assert_eq!((r.operation, r.source_hardware_addr), (ArpOperation::Reply, g.device(lan10).mac));
    assert_eq!(g.router_mut().neighbours.get(&IpAddr::V4(Ipv4Addr::new(192, 168, 10, 2))), Some(&host));
}

const V6_TOPOLOGY: &str = r#"
[[device]]
name = "a"
kind = "port"
addresses = ["2001:db8:1::1/64"]

[[device]]
name = "b"
kind = "port"
addresses = ["2001:db8:2::1/64"]

[[route]]
to = "2001:db8:99::/48"
via = "2001:db8:2::fe"
dev = "b"
"#;

#[test]
fn ipv6_forwarding_resolves_the_next_hop_with_ndp() {
    let mut g = load(V6_TOPOLOGY).unwrap();
    let (a, b) = (g.id("a").unwrap(), g.id("b").unwrap());
    let (b_mac, gw_mac) = (g.device(b).mac, mac(0xfe));
    let gw: Ipv6Addr = "2001:db8:2::fe".parse().unwrap();
    let me: Ipv6Addr = "2001:db8:2::1".parse().unwrap();
    let mut spec = FlowSpec::new(Transport::Tcp, true, 0);
    spec.addrs = Addrs::V6 { src: "2001:db8:1::2".parse().unwrap(), dst: "2001:db8:99::7".parse().unwrap() };
    spec.dst_mac = g.device(a).mac;
    let sp = Flow::new(spec).superpacket(14000, 1400, TcpFlags::empty()).unwrap();
    let sp_len = sp.total_len();
    g.receive(a, sp);
    // A neighbour solicitation for the gateway, to its solicited-node group.
    let out = tx_of(&mut g, b);
    assert_eq!(out.len(), 1);
    let ns = out[0].linear();
    assert_eq!(&ns[0..6], &[0x33, 0x33, 0xff, 0x00, 0x00, 0xfe]);
    assert_eq!((&ns[12..14], ns[20], ns[54]), (&[0x86, 0xdd][..], 58, 135));
    assert_eq!(&ns[62..78], &gw.octets());
    assert_eq!(g.router_mut().pending(), 1);

    // The advertisement releases the superpacket: whole, hop limit - 1.
    let na = Icmpv6Repr::NeighborAdvert {
        router: true,
        solicited: true,
        override_: true,
        target_addr: gw,
        target_lladdr: Some(gw_mac),
    };
    let mut buf = [0u8; 128];
    let n = na.emit_ipv6_packet(gw, me, 255, &mut buf).unwrap();
    let mut f = Vec::new();
    f.extend_from_slice(&b_mac.0);
    f.extend_from_slice(&gw_mac.0);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&buf[..n]);
    g.receive(b, Packet::from_frame(&f));
    assert_eq!(g.counters(b).dropped(), 0, "{:?}", g.counters(b));
    let out = tx_of(&mut g, b);
    assert_eq!(out.len(), 1);
    let p = &out[0];
    assert!(p.meta.is_gso());
    assert_eq!(p.total_len(), sp_len);
    assert_eq!((&p.linear()[0..6], &p.linear()[6..12]), (&gw_mac.0[..], &b_mac.0[..]));
    assert_eq!(p.linear()[14 + 7], 63, "hop limit decremented");
    let mut problems = Vec::new();
    validate_frame(&p.to_vec(), Medium::Ethernet, &p.meta, false, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn ttl_and_hop_limit_expiry_are_counted_drops() {
    // ICMP time exceeded is not generated: the packet is dropped and counted
    // on the ingress interface.
    let (mut g, spec) = crate::device::seed::seed_router(StackMode::Passthrough, MemoryMode::Capture);
    let (lan, wan) = (g.id("lan").unwrap(), g.id("wan").unwrap());
    for (ttl, forwarded) in [(1u8, false), (0, false), (2, true)] {
        let mut s = spec;
        s.ttl = ttl;
        g.receive(lan, Flow::new(s).superpacket(7000, 1400, TcpFlags::empty()).unwrap());
        let out = tx_of(&mut g, wan);
        assert_eq!(out.len(), usize::from(forwarded), "ttl {ttl}");
        if forwarded {
            assert_eq!(out[0].linear()[18 + 8], 1, "ttl decremented");
        }
    }
    assert_eq!(g.counters(g.router_id().unwrap()).drops.get("ttl-exceeded"), Some(&2));

    let mut g = load(V6_TOPOLOGY).unwrap();
    let (a, b) = (g.id("a").unwrap(), g.id("b").unwrap());
    g.router_mut().add_neighbour("2001:db8:2::fe".parse().unwrap(), mac(0xfe));
    let mut spec = FlowSpec::new(Transport::Udp, true, 0);
    spec.addrs = Addrs::V6 { src: "2001:db8:1::2".parse().unwrap(), dst: "2001:db8:99::7".parse().unwrap() };
    spec.dst_mac = g.device(a).mac;
    for (hl, forwarded) in [(1u8, false), (2, true)] {
        let mut s = spec;
        s.ttl = hl;
        g.receive(a, Packet::from_frame(&Flow::new(s).frame(100, TcpFlags::empty()).unwrap()));
        assert_eq!(tx_of(&mut g, b).len(), usize::from(forwarded), "hop limit {hl}");
    }
    assert_eq!(g.counters(g.router_id().unwrap()).drops.get("hop-limit-exceeded"), Some(&1));
}

/// A flood of new connections through the NAT (random source ports, as a
/// SYN flood) fills the connection table up to its limit and no further;
/// every refused packet is a counted `conntrack-full` drop; a connection
/// established before the flood keeps being forwarded and translated.
#[test]
fn connection_flood_through_nat_stays_within_the_table_and_spares_established_flows() {
    let (mut g, spec) = crate::device::seed::seed_router(StackMode::Passthrough, MemoryMode::Capture);
    let (lan, wan) = (g.id("lan").unwrap(), g.id("wan").unwrap());
    g.router_mut().nat.max_conns = 512;
    let mut established = Flow::new(spec);
    g.receive(lan, Packet::from_frame(&established.frame(100, TcpFlags::empty()).unwrap()));
    assert_eq!(tx_of(&mut g, wan).len(), 1, "the established flow goes out");

    let flood = 5000u32;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..flood {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut s = spec;
        s.transport = Transport::Tcp;
        s.src_port = 1024 + (rng % 60000) as u16;
        s.dst_port = (rng >> 20) as u16 | 1;
        g.receive(lan, Packet::from_frame(&Flow::new(s).frame(0, TcpFlags::SYN).unwrap()));
    }
    let out = tx_of(&mut g, wan).len() as u64;
    assert!(g.router_mut().nat.len() <= 512, "table bound: {}", g.router_mut().nat.len());
    let full: u64 = g.devices().iter().map(|d| d.counters.drops.get("conntrack-full").copied().unwrap_or(0)).sum();
    assert!(full > 0, "drops counted");
    assert_eq!(out + full, u64::from(flood), "every flood packet was forwarded or counted as dropped");

    // The established flow is still translated and forwarded.
    for _ in 0..10 {
        g.receive(lan, Packet::from_frame(&established.frame(200, TcpFlags::empty()).unwrap()));
    }
    let out = tx_of(&mut g, wan);
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|p| p.linear()[18 + 12..18 + 16] == [203, 0, 113, 1]), "masqueraded");
}

/// `[reassembly]` sets the limits of the router's defragmentation before
/// NAT; a queue limit refuses the datagrams beyond it as counted
/// `reasm-queue-limit` drops, and held fragments stay within it.
#[test]
fn reassembly_limits_come_from_the_topology_and_bound_the_queues() {
    let src =
        "[[device]]\nname = \"v\"\nkind = \"port\"\n\n[reassembly]\nmax_bytes = 1048576\nmax_queues = 2\ntimeout = 5\n";
    let g = load(src).unwrap();
    let cfg = g.router().unwrap().defrag_config.expect("configured");
    assert_eq!((cfg.v4.high_thresh, cfg.v4.low_thresh, cfg.max_queues), (1 << 20, 3 << 18, 2));
    assert_eq!(cfg.v4.timeout_ns, 5 * S);
    assert_eq!(cfg.delivery, superpacket::offload::frag::Delivery::Forward);

    let (mut g, spec) = crate::device::seed::seed_router(StackMode::Passthrough, MemoryMode::Capture);
    let (lan, wan) = (g.id("lan").unwrap(), g.id("wan").unwrap());
    g.router_mut().defrag_config = Some(cfg);
    // First fragments (MF set) of five datagrams: two queues, three refused.
    for id in 0..5u16 {
        let mut f = Flow::new(spec).frame(1000, TcpFlags::empty()).unwrap();
        let l3 = FrameHeaders::parse(&f).unwrap().l3_offset;
        f[l3 + 4..l3 + 6].copy_from_slice(&(0x4000 + id).to_be_bytes());
        f[l3 + 6] = 0x20; // MF, offset 0
        assert!(superpacket::validate::refresh_checksums(&mut f), "the IPv4 header checksum of the fragment");
        g.receive(lan, Packet::from_frame(&f));
    }
    assert!(tx_of(&mut g, wan).is_empty(), "incomplete datagrams are held");
    assert_eq!(g.counters(g.router_id().unwrap()).drops.get("reasm-queue-limit"), Some(&3));
    let mut usage = Vec::new();
    g.router_mut().table_usage(&mut usage);
    let queues = usage.iter().find(|t| t.name == "reasm-queues").expect("reasm-queues in the table usage");
    assert_eq!((queues.size, queues.limit), (2, 2));
}
