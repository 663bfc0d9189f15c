//! The point-to-point framing of TUN ports, without a TUN: [`PointToPoint`]
//! on its own, and [`TunDriver`] over an in-memory queue of raw IP packets
//! as a router interface (ARP and neighbour solicitations answered by the
//! driver, superpackets passed whole or segmented as raw IP).

use super::*;
use crate::device::graph::Graph;
use crate::device::port::MemoryDriver;
use crate::device::{DeviceId, StackMode};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use superpacket::packet::ChecksumState;
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::validate_frame;
use superpacket::wire::{Icmpv6Repr, TcpFlags};

const OWN: MacAddr = MacAddr([0x02, 0xaa, 0, 0, 0, 1]);

/// A flow from `src` to `dst` (IPv4 or IPv6 alike).
fn flow(transport: Transport, src: IpAddr, dst: IpAddr) -> Flow {
    let mut spec = FlowSpec::new(transport, src.is_ipv6(), 0);
    spec.addrs = match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => Addrs::V4 { src, dst },
        (IpAddr::V6(src), IpAddr::V6(dst)) => Addrs::V6 { src, dst },
        _ => panic!("mixed IP versions"),
    };
    spec.tcp_timestamps = false;
    Flow::new(spec)
}

/// The raw IP packet of an Ethernet frame (what a TUN reads), metadata kept.
fn raw(frame: &Packet) -> Packet {
    let mut p = Packet::from_frame(&frame.to_vec()[14..]);
    p.meta = frame.meta;
    if let ChecksumState::Partial { start, offset } = frame.meta.csum {
        p.meta.csum = ChecksumState::Partial { start: start - 14, offset };
    }
    p
}

fn ethernet(dst: MacAddr, src: MacAddr, ethertype: u16, payload: &[u8]) -> Packet {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    Packet::from_frame(&f)
}

#[test]
fn received_raw_ip_gets_an_ethernet_header_in_its_headroom_and_loses_it_on_transmit() {
    let mut link = PointToPoint::default();
    for (src, dst, ethertype) in [
        (IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2)), IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1)), [0x08, 0x00]),
        (IpAddr::V6("fd09::2".parse().unwrap()), IpAddr::V6("fd09::1".parse().unwrap()), [0x86, 0xdd]),
    ] {
        let sp = flow(Transport::Tcp, src, dst).superpacket(4 * 1400, 1400, TcpFlags::PSH).unwrap();
        let p = raw(&sp);
        let (bytes, meta, headroom) = (p.to_vec(), p.meta, p.headroom());
        let ChecksumState::Partial { start, offset } = meta.csum else { panic!("{:?}", meta.csum) };

        let f = link.link_input(p, OWN).unwrap();
        let l = f.linear();
        assert_eq!((&l[..6], &l[6..12], &l[12..14]), (&OWN.0[..], &PEER_MAC.0[..], &ethertype[..]));
        assert_eq!(&f.to_vec()[14..], &bytes[..]);
        assert_eq!(f.headroom(), headroom - 14, "prepended in place");
        assert_eq!(f.meta.csum, ChecksumState::Partial { start: start + 14, offset });
        assert_eq!((f.meta.gso_type, f.meta.gso_size, f.meta.gso_segs), (meta.gso_type, meta.gso_size, meta.gso_segs));

        let LinkOutput::Send(back) = link.link_output(f) else { panic!("an IP frame is sent") };
        assert_eq!((back.to_vec(), back.meta), (bytes, meta));
    }
    assert_eq!(link.link_input(Packet::from_frame(&[0x00; 40]), OWN).unwrap_err(), "tun-not-ip");
    assert_eq!(link.link_input(Packet::from_frame(&[]), OWN).unwrap_err(), "tun-not-ip");
    assert_eq!((link.arp_answered, link.nd_answered), (0, 0));
}

#[test]
fn arp_requests_and_neighbour_solicitations_are_answered_by_the_peer_and_the_rest_dropped() {
    let mut link = PointToPoint::default();
    let (me, peer) = (Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 2));
    let mut arp = [0u8; 28];
    ArpRepr::request(OWN, me, peer).emit(&mut ArpPacket::new_unchecked(&mut arp[..])).unwrap();
    let LinkOutput::Reply(reply) = link.link_output(ethernet(MacAddr::BROADCAST, OWN, 0x0806, &arp)) else {
        panic!("an ARP request is answered")
    };
    let l = reply.linear();
    assert_eq!((&l[..6], &l[6..12], &l[12..14]), (&OWN.0[..], &PEER_MAC.0[..], &[0x08, 0x06][..]));
    let r = ArpRepr::parse(&ArpPacket::new_checked(&l[14..]).unwrap()).unwrap();
    assert_eq!(r.operation, ArpOperation::Reply);
    assert_eq!((r.source_hardware_addr, r.source_protocol_addr), (PEER_MAC, peer));
    assert_eq!((r.target_hardware_addr, r.target_protocol_addr), (OWN, me));
    // A reply (or anything but a request) is not for the peer.
    let mut not_a_request = [0u8; 28];
    r.emit(&mut ArpPacket::new_unchecked(&mut not_a_request[..])).unwrap();
    let out = link.link_output(ethernet(PEER_MAC, OWN, 0x0806, &not_a_request));
    assert!(matches!(out, LinkOutput::Drop("tun-arp")), "{out:?}");

    let (me6, peer6): (Ipv6Addr, Ipv6Addr) = ("fd09::1".parse().unwrap(), "fd09::2".parse().unwrap());
    let ns = Icmpv6Repr::NeighborSolicit { target_addr: peer6, source_lladdr: Some(OWN) };
    let mut buf = [0u8; 128];
    let n = ns.emit_ipv6_packet(me6, "ff02::1:ff00:2".parse().unwrap(), 255, &mut buf).unwrap();
    let sol_mac = MacAddr([0x33, 0x33, 0xff, 0, 0, 2]);
    let LinkOutput::Reply(na) = link.link_output(ethernet(sol_mac, OWN, 0x86dd, &buf[..n])) else {
        panic!("a neighbour solicitation is answered")
    };
    let l = na.linear();
    assert_eq!(
        (&l[..6], &l[6..12], &l[22..38], &l[38..54]),
        (&OWN.0[..], &PEER_MAC.0[..], &peer6.octets()[..], &me6.octets()[..])
    );
    assert_eq!(parse_ndp(l), Ok(Ndp::Advert { target: peer6, lladdr: Some(PEER_MAC) }));
    assert_eq!((link.arp_answered, link.nd_answered), (1, 1));

    // Other ICMPv6 goes to the TUN like any IPv6 packet.
    let echo = Icmpv6Repr::EchoRequest { ident: 1, seq_no: 1, data: b"ping" };
    let n = echo.emit_ipv6_packet(me6, peer6, 64, &mut buf).unwrap();
    assert!(matches!(link.link_output(ethernet(PEER_MAC, OWN, 0x86dd, &buf[..n])), LinkOutput::Send(_)));
    // Not IP, or an EtherType the version nibble contradicts: counted drops.
    let lldp = link.link_output(ethernet(PEER_MAC, OWN, 0x88cc, &[0; 46]));
    assert!(matches!(lldp, LinkOutput::Drop("tun-not-ip")), "{lldp:?}");
    let liar = link.link_output(ethernet(PEER_MAC, OWN, 0x0800, &buf[..n]));
    assert!(matches!(liar, LinkOutput::Drop("tun-bad-ip")), "{liar:?}");
    assert!(matches!(link.link_output(Packet::from_frame(&[0; 10])), LinkOutput::Drop("runt")));
    assert_eq!((link.arp_answered, link.nd_answered), (1, 1));
}

/// A router between `t`, a TUN port over an in-memory queue offering `hw`
/// (10.94.0.254/24, fd94::fe/64), and `e`, an Ethernet port (10.95.0.254/24,
/// fd95::fe/64) whose hosts are known neighbours.
fn router(hw: NetdevFeatures) -> (Graph, DeviceId, DeviceId) {
    let mut g = Graph::new(StackMode::Passthrough);
    let t = g.add_port("t", Box::new(TunDriver::new(MemoryDriver::new(hw)))).unwrap();
    let e = g.add_port("e", Box::new(MemoryDriver::full())).unwrap();
    for (dev, addr, len) in [(t, "10.94.0.254", 24), (t, "fd94::fe", 64), (e, "10.95.0.254", 24), (e, "fd95::fe", 64)] {
        g.add_address(dev, addr.parse().unwrap(), len);
    }
    for host in ["10.95.0.2", "fd95::2"] {
        g.router_mut().add_neighbour(host.parse().unwrap(), MacAddr([0x02, 0xee, 0, 0, 0, 2]));
    }
    (g, t, e)
}

fn queue(g: &mut Graph, port: DeviceId) -> &mut MemoryDriver {
    g.driver_mut::<TunDriver<MemoryDriver>>(port).unwrap().io_mut()
}

fn tx_of(g: &mut Graph, port: DeviceId) -> Vec<Packet> {
    g.driver_mut::<MemoryDriver>(port).unwrap().tx.drain(..).collect()
}

#[test]
fn a_tun_port_is_a_router_interface_whose_neighbours_the_driver_resolves() {
    let (mut g, t, e) = router(NetdevFeatures::FULL_NIC);
    let t_mac = g.device(t).mac;
    let e_mac = g.device(e).mac;
    for (host, far) in [("10.94.0.1", "10.95.0.2"), ("fd94::1", "fd95::2")] {
        let (host, far): (IpAddr, IpAddr) = (host.parse().unwrap(), far.parse().unwrap());
        // TUN -> Ethernet: framed for the router, forwarded.
        let out = flow(Transport::Udp, host, far).frame(300, TcpFlags::empty()).unwrap();
        let ip = Packet::from_frame(&out[14..]);
        g.receive(t, ip);
        let fwd = tx_of(&mut g, e);
        assert_eq!(fwd.len(), 1, "{host}: {:?}", g.counters(t));
        assert_eq!(&fwd[0].linear()[6..12], &e_mac.0, "{host}");
        assert_eq!(fwd[0].len(), out.len(), "{host}");

        // Ethernet -> TUN: the router solicits the host on the TUN port, the
        // driver answers for the peer, and the packet leaves as raw IP.
        let mut back = flow(Transport::Udp, far, host);
        let mut f = back.frame(200, TcpFlags::empty()).unwrap();
        f[..6].copy_from_slice(&e_mac.0);
        let len = f.len();
        g.receive(e, Packet::from_frame(&f));
        assert_eq!(g.router_mut().pending(), 0, "{host}: resolved at once");
        assert_eq!(g.router_mut().neighbours.get(&host), Some(&PEER_MAC), "{host}");
        let written: Vec<Packet> = queue(&mut g, t).tx.drain(..).collect();
        assert_eq!(written.len(), 1, "{host}: only the packet reached the TUN");
        let w = written[0].to_vec();
        assert_eq!((w[0] >> 4, w.len()), (if host.is_ipv4() { 4 } else { 6 }, len - 14), "{host}: raw IP");
        let ttl_at = if host.is_ipv4() { 8 } else { 7 };
        assert_eq!(w[ttl_at], f[14 + ttl_at] - 1, "{host}: routed");
    }
    assert_eq!(g.counters(t).dropped(), 0, "{:?}", g.counters(t));
    let mut counters = Vec::new();
    g.port_driver_mut(t).unwrap().driver_counters(&mut |k, v| counters.push((k, v)));
    assert!(counters.contains(&("arp_answered", 1)) && counters.contains(&("nd_answered", 1)), "{counters:?}");

    // Frames the link cannot carry are counted drops on the port.
    g.transmit(t, ethernet(PEER_MAC, t_mac, 0x88cc, &[0; 46]));
    assert_eq!(g.counters(t).drops.get("tun-not-ip"), Some(&1));
    assert!(queue(&mut g, t).tx.is_empty());
    // So is a received packet that is not IP.
    g.receive(t, Packet::from_frame(&[0x10; 40]));
    assert_eq!(g.counters(t).drops.get("tun-not-ip"), Some(&2));
}

#[test]
fn superpackets_leave_a_tun_port_whole_or_segmented_as_raw_ip() {
    let no_tso = NetdevFeatures::FULL_NIC.without(NetdevFeatures::TSO | NetdevFeatures::TSO6);
    for (hw, whole) in [(NetdevFeatures::FULL_NIC, true), (no_tso, false)] {
        let (mut g, t, e) = router(hw);
        let e_mac = g.device(e).mac;
        for (host, far) in [("10.94.0.1", "10.95.0.2"), ("fd94::1", "fd95::2")] {
            let (host, far): (IpAddr, IpAddr) = (host.parse().unwrap(), far.parse().unwrap());
            let mut sp = flow(Transport::Tcp, far, host).superpacket(10 * 1400, 1400, TcpFlags::PSH).unwrap();
            sp.linear_mut()[..6].copy_from_slice(&e_mac.0);
            let (payload, l3_len) = (10 * 1400, sp.total_len() - 14);
            g.receive(e, sp);
            let out: Vec<Packet> = queue(&mut g, t).tx.drain(..).collect();
            let mut problems = Vec::new();
            let mut carried = 0;
            for p in &out {
                let b = p.to_vec();
                assert_eq!(b[0] >> 4, if host.is_ipv4() { 4 } else { 6 }, "{host}: raw IP");
                problems.clear();
                validate_frame(&b, Medium::Ip, &p.meta, false, &mut problems);
                assert!(problems.is_empty(), "{host} whole={whole}: {problems:?}");
                let h = Medium::Ip.parse(&b).unwrap();
                carried += h.payload_len;
                if let ChecksumState::Partial { start, .. } = p.meta.csum {
                    assert_eq!(start as usize, h.l4_offset, "{host}: offsets count from the IP header");
                }
            }
            assert_eq!(carried, payload, "{host} whole={whole}");
            if whole {
                assert_eq!(out.len(), 1, "{host}");
                assert!(out[0].meta.is_gso() && out[0].total_len() == l3_len, "{host}");
            } else {
                assert_eq!(out.len(), 10, "{host}: cut at the TUN port, as raw IP");
                assert!(out.iter().all(|p| !p.meta.is_gso() && p.len() <= 1500), "{host}");
            }
            assert_eq!(g.counters(t).dropped(), 0, "{host}: {:?}", g.counters(t));
        }
        let c = g.counters(t);
        assert_eq!((c.tx_superpackets, c.tx_segmented > 0), (2, !whole), "{c:?}");
    }
}
