//! Tunnel devices (VXLAN, Geneve): encapsulation checked field by field with
//! etherparse as an independent reader, decapsulation of what a second
//! graph encapsulated, FDB learning, superpackets kept whole with their
//! tunnel metadata, and every refusal counted with its reason.

use super::port::MemoryDriver;
use super::udp_tunnel::{SOURCE_PORTS, TunnelConfig, UdpTunnel};
use super::*;
use std::net::IpAddr;
use superpacket::packet::{ChecksumState, GsoType, Packet, TunnelKind};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};

const UNDERLAY_PEER: [u8; 6] = [0x02, 0xee, 0, 0, 0, 2];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Port `a` and tunnel `vx` bridged; the tunnel's underlay leaves through
/// port `u` (10.80.0.1/24, or fd80::1/64) towards the peer endpoint.
struct Lab {
    g: Graph,
    a: DeviceId,
    u: DeviceId,
    vx: DeviceId,
}

fn lab(protocol: TunnelKind, v6: bool, udp_checksum: bool) -> Lab {
    lab_with(protocol, v6, udp_checksum, NetdevFeatures::FULL_NIC)
}

/// [`lab`] with underlay port features `underlay`.
fn lab_with(protocol: TunnelKind, v6: bool, udp_checksum: bool, underlay: NetdevFeatures) -> Lab {
    let mut g = Graph::new(StackMode::Passthrough);
    let a = g.add_port("a", Box::new(MemoryDriver::full())).unwrap();
    let u = g.add_port("u", Box::new(MemoryDriver::new(underlay))).unwrap();
    let (local, remote, len) = if v6 { ("fd80::1", "fd80::2", 64) } else { ("10.80.0.1", "10.80.0.2", 24) };
    g.add_address(u, ip(local), len);
    g.router_mut().add_neighbour(ip(remote), MacAddr(UNDERLAY_PEER));
    let mut cfg = TunnelConfig::new(protocol, 42, ip(local));
    cfg.remote = Some(ip(remote));
    cfg.udp_checksum = udp_checksum;
    let vx = g.add_tunnel("vx", cfg).unwrap();
    let br = g.add_bridge("br", false).unwrap();
    g.enslave(br, a).unwrap();
    g.enslave(br, vx).unwrap();
    Lab { g, a, u, vx }
}

fn tx_of(g: &mut Graph, p: DeviceId) -> Vec<Packet> {
    g.driver_mut::<MemoryDriver>(p).unwrap().tx.drain(..).collect()
}

fn inner_frame(transport: Transport, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(transport, false, 5);
    spec.src_mac = MacAddr([0x02, 0xaa, 0, 0, 0, 1]);
    spec.dst_mac = MacAddr([0x02, 0xbb, 0, 0, 0, 1]);
    Flow::new(spec).frame(payload, TcpFlags::PSH).unwrap()
}

/// The outer headers of an encapsulated frame, read by etherparse.
fn outer(frame: &[u8]) -> (etherparse::SlicedPacket<'_>, u16, u16, u16, u32) {
    let s = etherparse::SlicedPacket::from_ethernet(frame).expect("etherparse reads the outer headers");
    let Some(etherparse::TransportSlice::Udp(udp)) = &s.transport else { panic!("outer UDP") };
    let (sport, dport, check) = (udp.source_port(), udp.destination_port(), udp.checksum());
    let tun = udp.payload();
    let vni = u32::from_be_bytes([0, tun[4], tun[5], tun[6]]);
    (s, sport, dport, check, vni)
}

#[test]
fn vxlan_encapsulates_as_linux_and_decapsulates_what_it_sent() {
    for (v6, udp_checksum) in [(false, false), (false, true), (true, true)] {
        let mut l = lab(TunnelKind::Vxlan, v6, udp_checksum);
        let inner = inner_frame(Transport::Udp, 100);
        l.g.receive(l.a, Packet::from_frame(&inner));
        let out = tx_of(&mut l.g, l.u);
        assert_eq!(out.len(), 1, "v6 {v6}: {:?}", l.g.counters(l.vx));
        let f = out[0].to_vec();
        let (s, sport, dport, check, vni) = outer(&f);
        assert_eq!(&f[..6], &UNDERLAY_PEER, "the router filled the next hop's MAC");
        assert_eq!(dport, 4789);
        assert!((SOURCE_PORTS.0..SOURCE_PORTS.1).contains(&sport));
        assert_eq!(vni, 42);
        assert_eq!(f[f.len() - inner.len() - 8], 0x08, "the I flag");
        assert_eq!(&f[f.len() - inner.len()..], &inner[..], "the inner frame unchanged");
        match &s.net {
            Some(etherparse::InternetSlice::Ipv4(v4)) => {
                let h = v4.header();
                assert_eq!(h.ttl(), 64);
                assert!(!h.dont_fragment(), "Linux's vxlan default: DF clear");
                assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
                assert_eq!(usize::from(h.total_len()), f.len() - 14);
            }
            Some(etherparse::InternetSlice::Ipv6(v6h)) => assert_eq!(v6h.header().hop_limit(), 64),
            other => panic!("{other:?}"),
        }
        if udp_checksum {
            assert_ne!(check, 0);
            let Some(etherparse::TransportSlice::Udp(udp)) = &s.transport else { unreachable!() };
            let expect = match &s.net {
                Some(etherparse::InternetSlice::Ipv4(v4)) => {
                    udp.to_header().calc_checksum_ipv4(&v4.header().to_header(), udp.payload()).unwrap()
                }
                Some(etherparse::InternetSlice::Ipv6(v6h)) => {
                    udp.to_header().calc_checksum_ipv6(&v6h.header().to_header(), udp.payload()).unwrap()
                }
                _ => unreachable!(),
            };
            assert_eq!(check, expect, "outer UDP checksum");
        } else {
            assert_eq!(check, 0, "IPv4 default: no outer checksum");
        }
        // The same flow keeps its source port.
        l.g.receive(l.a, Packet::from_frame(&inner));
        assert_eq!(outer(&tx_of(&mut l.g, l.u)[0].to_vec()).1, sport);

        // The peer sends it back: swap the endpoints (a peer graph would do
        // the same) and deliver to our underlay port.
        let mut back = f.clone();
        back[..6].copy_from_slice(&l.g.device(l.u).mac.0);
        let (s_at, d_at, n) = if v6 { (22, 38, 16) } else { (26, 30, 4) };
        let (src, dst) = (back[s_at..s_at + n].to_vec(), back[d_at..d_at + n].to_vec());
        back[s_at..s_at + n].copy_from_slice(&dst);
        back[d_at..d_at + n].copy_from_slice(&src);
        let mut reply = inner.clone();
        reply[..6].copy_from_slice(&inner[6..12]);
        reply[6..12].copy_from_slice(&inner[..6]);
        let at = back.len() - inner.len();
        back[at..].copy_from_slice(&reply);
        // Addresses swapped: the IPv4 header checksum and the UDP checksum
        // are unchanged by a swap; the inner frame changed only by MAC order.
        l.g.receive(l.u, Packet::from_frame(&back));
        let got = tx_of(&mut l.g, l.a);
        assert_eq!(got.len(), 1, "v6 {v6}: {:?} {:?}", l.g.counters(l.vx), l.g.counters(l.g.router_id().unwrap()));
        assert_eq!(got[0].to_vec(), reply);
        // Learned: the inner source is behind the remote endpoint.
        let t = l.g.kind_as::<UdpTunnel>(l.vx).unwrap();
        assert_eq!(t.remote_for(MacAddr(inner[..6].try_into().unwrap())), t.config().remote);
    }
}

#[test]
fn geneve_round_trip() {
    let mut l = lab(TunnelKind::Geneve, false, true);
    let inner = inner_frame(Transport::Tcp, 200);
    l.g.receive(l.a, Packet::from_frame(&inner));
    let f = tx_of(&mut l.g, l.u)[0].to_vec();
    let (_, _, dport, _, vni) = outer(&f);
    assert_eq!((dport, vni), (6081, 42));
    let tun = &f[f.len() - inner.len() - 8..f.len() - inner.len()];
    assert_eq!(&tun[..4], &[0, 0, 0x65, 0x58], "version 0, no options, Ethernet payload");
}

/// A TSO superpacket crosses the bridge and the tunnel as one packet: the
/// GSO type gains UDP_TUNNEL and the encapsulation offsets point at the
/// inner headers. An underlay port with tunnel segmentation takes it whole;
/// one without gets wire segments, each a complete VXLAN packet whose outer
/// and inner headers verify, the payload in order.
#[test]
fn superpacket_is_encapsulated_whole_and_segmented_only_at_the_port() {
    for tunnel_gso in [true, false] {
        let mut hw = NetdevFeatures::FULL_NIC;
        if tunnel_gso {
            hw = hw | NetdevFeatures::GSO_UDP_TUNNEL | NetdevFeatures::GSO_UDP_TUNNEL_CSUM;
        }
        let mut l = lab_with(TunnelKind::Vxlan, false, false, hw);
        let mut spec = FlowSpec::new(Transport::Tcp, false, 7);
        spec.dst_mac = MacAddr([0x02, 0xbb, 0, 0, 0, 1]);
        // MSS 1350: segments fit the tunnel's MTU of 1450 (the kernel would
        // IP-fragment larger ones, DF being clear; the engine drops them as
        // `exceeds-mtu`).
        let sp = Flow::new(spec).superpacket(20 * 1350, 1350, TcpFlags::PSH).unwrap();
        let inner = sp.to_vec();
        l.g.receive(l.a, sp);
        assert_eq!(l.g.counters(l.vx).tx_superpackets, 1, "the tunnel got it whole");
        let out = tx_of(&mut l.g, l.u);
        if tunnel_gso {
            assert_eq!(out.len(), 1, "{:?}", l.g.counters(l.u));
            let p = &out[0];
            assert!(p.meta.gso_type.contains(GsoType::UDP_TUNNEL | GsoType::TCPV4), "{:?}", p.meta.gso_type);
            let e = p.meta.encap.expect("encapsulation recorded");
            assert_eq!((e.outer_transport, e.inner_mac, e.inner_network, e.inner_transport), (34, 50, 64, 84));
            assert_eq!(p.total_len(), inner.len() + 50);
            assert_eq!(p.meta.csum, ChecksumState::Partial { start: 84, offset: 16 });
            assert_eq!(&p.to_vec()[50..], &inner[..]);
        } else {
            assert_eq!(out.len(), 20, "{:?}", l.g.counters(l.u));
            let mut payload = Vec::new();
            let mut ids = Vec::new();
            for seg in &out {
                let f = seg.to_vec();
                assert!(f.len() <= 1514 + 50, "{}", f.len());
                let (s, _, dport, _, vni) = outer(&f);
                assert_eq!((dport, vni), (4789, 42));
                let Some(etherparse::InternetSlice::Ipv4(v4)) = &s.net else { panic!("outer IPv4") };
                ids.push(v4.header().identification());
                let inner_frame = &f[50..];
                let mut problems = Vec::new();
                let meta = superpacket::packet::OffloadMeta { encap: None, ..seg.meta.shifted(-50).unwrap() };
                superpacket::validate::validate_frame(
                    inner_frame,
                    superpacket::validate::Medium::Ethernet,
                    &meta,
                    false,
                    &mut problems,
                );
                assert!(problems.is_empty(), "{problems:?}");
                let doff = usize::from(inner_frame[14 + 20 + 12] >> 4) * 4;
                payload.extend_from_slice(&inner_frame[14 + 20 + doff..]);
            }
            let doff = usize::from(inner[14 + 20 + 12] >> 4) * 4;
            assert_eq!(payload, inner[14 + 20 + doff..], "the payload, in order");
            assert!(ids.windows(2).all(|w| w[1] == w[0].wrapping_add(1)), "outer IDs advance: {ids:?}");
        }
    }
}

#[test]
fn hostile_tunnel_packets_are_refused_with_reasons() {
    let mut l = lab(TunnelKind::Vxlan, false, true);
    let inner = inner_frame(Transport::Udp, 64);
    l.g.receive(l.a, Packet::from_frame(&inner));
    let good = tx_of(&mut l.g, l.u)[0].to_vec();
    // Addressed to us, from the peer.
    let mut good_in = good.clone();
    good_in[..6].copy_from_slice(&l.g.device(l.u).mac.0);
    let (src, dst) = (good_in[26..30].to_vec(), good_in[30..34].to_vec());
    good_in[26..30].copy_from_slice(&dst);
    good_in[30..34].copy_from_slice(&src);
    const TUN: usize = 14 + 20 + 8;
    // (reason, byte, xor): a VNI bit, a reserved flag bit (0x08 -> 0x0c),
    // the checksum, the length's high byte (0 -> 0xff).
    let cases = [
        ("vni-mismatch", TUN + 6, 1),
        ("tunnel-header", TUN, 0x04),
        ("udp-checksum", 14 + 20 + 6, 0x55),
        ("udp-length", 14 + 20 + 4, 0xff),
    ];
    for (reason, at, xor) in cases {
        let mut f = good_in.clone();
        if reason != "udp-checksum" {
            // No outer checksum (allowed over IPv4): the check behind it runs.
            f[14 + 20 + 6..14 + 20 + 8].fill(0);
        }
        f[at] ^= xor;
        let before = l.g.counters(l.vx).drops.get(reason).copied().unwrap_or(0);
        l.g.receive(l.u, Packet::from_frame(&f));
        assert!(tx_of(&mut l.g, l.a).is_empty(), "{reason}: nothing reaches the bridge");
        let all = l.g.counters(l.vx).drops.clone();
        assert_eq!(all.get(reason).copied().unwrap_or(0), before + 1, "{reason}: {all:?}");
    }
    // Another UDP port on our address: not a tunnel, not delivered.
    let mut f = good_in.clone();
    f[14 + 20 + 2..14 + 20 + 4].copy_from_slice(&4790u16.to_be_bytes());
    l.g.receive(l.u, Packet::from_frame(&f));
    let r = l.g.router_id().unwrap();
    assert_eq!(l.g.counters(r).drops.get("local-delivery-unsupported"), Some(&1));
    // The untouched packet still goes through.
    l.g.receive(l.u, Packet::from_frame(&good_in));
    assert_eq!(tx_of(&mut l.g, l.a).len(), 1);
    // Conservation on every device.
    for id in [l.a, l.u, l.vx, r] {
        let c = l.g.counters(id);
        assert_eq!(c.rx_packets + c.tx_packets, c.forwarded + c.delivered + c.held + c.refused, "{c:?}");
    }
}

#[test]
fn tunnel_configuration_errors_are_named() {
    let mut g = Graph::new(StackMode::Passthrough);
    let u = g.add_port("u", Box::new(MemoryDriver::full())).unwrap();
    let cfg = TunnelConfig::new(TunnelKind::Vxlan, 1, ip("10.80.0.1"));
    let e = g.add_tunnel("vx", cfg.clone()).unwrap_err().to_string();
    assert!(e.contains("no router"), "{e}");
    g.add_address(u, ip("10.81.0.1"), 24);
    let e = g.add_tunnel("vx", cfg.clone()).unwrap_err().to_string();
    assert!(e.contains("none of the router's"), "{e}");
    g.add_address(u, ip("10.80.0.1"), 24);
    g.add_tunnel("vx", cfg.clone()).unwrap();
    let e = g.add_tunnel("vx2", cfg.clone()).unwrap_err().to_string();
    assert!(e.contains("already bound"), "{e}");
    let e = g.add_tunnel("vx3", TunnelConfig { vni: 1 << 24, ..cfg.clone() }).unwrap_err().to_string();
    assert!(e.contains("24 bits"), "{e}");
    let e = g.add_tunnel("vx4", TunnelConfig { remote: Some(ip("fd00::1")), port: 9, ..cfg }).unwrap_err().to_string();
    assert!(e.contains("different families"), "{e}");
    assert_eq!(g.device(g.id("vx").unwrap()).mtu, 1450);
}

const TOPOLOGY: &str = r#"
[[device]]
name = "a"
kind = "port"

[[device]]
name = "u"
kind = "port"
addresses = ["10.80.0.1/24"]

[[device]]
name = "vx"
kind = "vxlan"
id = 42
underlay = "u"
local = "10.80.0.1"
remote = "10.80.0.2"
fdb = [{ mac = "02:bb:00:00:00:09", remote = "10.80.0.9" }]

[[device]]
name = "br"
kind = "bridge"
ports = ["a", "vx"]

[[neighbour]]
address = "10.80.0.2"
mac = "02:ee:00:00:00:02"
"#;

#[test]
fn topology_builds_tunnels_and_names_mistakes() {
    let mut g = super::topology::Topology::parse(TOPOLOGY).unwrap().build().unwrap();
    let vx = g.id("vx").unwrap();
    assert_eq!(g.device(vx).kind, "vxlan");
    let t = g.kind_as::<UdpTunnel>(vx).unwrap();
    assert_eq!(t.remote_for(MacAddr([0x02, 0xbb, 0, 0, 0, 9])), Some(ip("10.80.0.9")));
    assert_eq!(t.remote_for(MacAddr([0x02, 0xbb, 0, 0, 0, 8])), Some(ip("10.80.0.2")));
    let (a, u) = (g.id("a").unwrap(), g.id("u").unwrap());
    g.receive(a, Packet::from_frame(&inner_frame(Transport::Udp, 50)));
    assert_eq!(tx_of(&mut g, u).len(), 1, "{:?}", g.counters(vx));
    for (from, to, message) in [
        ("local = \"10.80.0.1\"", "local = \"10.80.0.7\"", "is not an address of `u`"),
        ("underlay = \"u\"\n", "", "needs `underlay`"),
        ("id = 42", "id = 16777216", "outside 0..=16777215"),
        ("remote = \"10.80.0.2\"", "remote = \"fd00::2\"", "different families"),
        ("kind = \"vxlan\"", "kind = \"vxlan\"\nvlan_filtering = true", "does not apply to a vxlan device"),
        ("mac = \"02:bb:00:00:00:09\"", "mac = \"02:bb\"", "bad MAC address"),
    ] {
        let src = TOPOLOGY.replacen(from, to, 1);
        let e = match super::topology::Topology::parse(&src).and_then(|t| t.build()) {
            Ok(_) => panic!("{to:?} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(message), "{to:?}: {e}");
    }
}

/// The receive side end to end: VXLAN wire segments (what the peer's
/// segmenter sends) go through GRO configured with the graph's tunnel
/// ports, as the engine's workers configure it, and come out as one tunnel
/// aggregate; the underlay port receives it, the router delivers it to the
/// tunnel, which decapsulates it into one inner superpacket for port `a`,
/// whose bytes are the original superpacket's.
#[test]
fn tunnel_gro_aggregate_is_decapsulated_whole() {
    use superpacket::offload::gro::{Gro, GroConfig};
    // The peer: a graph whose underlay port has neither tunnel GSO nor
    // checksum offload segments and checksums in software (wire frames).
    let mut peer = lab_with(TunnelKind::Vxlan, false, true, NetdevFeatures::SG);
    let mut spec = FlowSpec::new(Transport::Tcp, false, 9);
    spec.dst_mac = MacAddr([0x02, 0xbb, 0, 0, 0, 1]);
    let sp = Flow::new(spec).superpacket(16 * 1350, 1350, TcpFlags::PSH).unwrap();
    let inner = sp.to_vec();
    peer.g.receive(peer.a, sp);
    let wire = tx_of(&mut peer.g, peer.u);
    assert_eq!(wire.len(), 16, "{:?}", peer.g.counters(peer.u));

    // Us: the same lab, seen from the other end (addresses swapped).
    let mut us = lab(TunnelKind::Vxlan, false, true);
    let ports = us.g.tunnel_ports();
    assert_eq!(ports, vec![(4789, TunnelKind::Vxlan)]);
    let cfg = ports.into_iter().fold(GroConfig::forwarder(), |c, (p, k)| c.with_tunnel(p, k));
    let mut gro = Gro::new(cfg);
    let our_mac = us.g.device(us.u).mac.0;
    for seg in &wire {
        let mut f = seg.to_vec();
        f[..6].copy_from_slice(&our_mac);
        let (src, dst) = (f[26..30].to_vec(), f[30..34].to_vec());
        f[26..30].copy_from_slice(&dst);
        f[30..34].copy_from_slice(&src);
        gro.receive_frame(&f);
    }
    gro.flush();
    let agg: Vec<Packet> = gro.drain_delivered().collect();
    assert_eq!(agg.len(), 1, "one tunnel aggregate: {:?}", gro.counters());
    assert!(agg[0].meta.is_tunnel_gso(), "{:?}", agg[0].meta);
    for p in agg {
        us.g.receive(us.u, p);
    }
    let out = tx_of(&mut us.g, us.a);
    assert_eq!(out.len(), 1, "vx: {:?}", us.g.counters(us.vx));
    let p = &out[0];
    assert!(p.meta.is_gso() && p.meta.encap.is_none(), "{:?}", p.meta);
    assert!(!p.meta.gso_type.intersects(GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM));
    assert_eq!(p.meta.gso_size, 1350);
    // Same bytes but the IPv4 ID (GRO keeps the first segment's) and the
    // TCP checksum field (now the pseudo-header seed of a partial checksum).
    let got = p.to_vec();
    assert_eq!(got.len(), inner.len());
    let doff = usize::from(inner[14 + 20 + 12] >> 4) * 4;
    assert_eq!(got[14 + 20 + doff..], inner[14 + 20 + doff..], "payload");
    assert_eq!(got[..18], inner[..18], "MACs, EtherType, IP start");
}

/// Over an IPv6 underlay, a tunnel superpacket whose payload lives in
/// segments (not in the linear area) is encapsulated and, at the other end,
/// decapsulated whole: the IPv6 header is read without asking the linear
/// area to hold the whole datagram.
#[test]
fn ipv6_underlay_superpacket_crosses_both_ends_whole() {
    let tunnel_gso = NetdevFeatures::FULL_NIC | NetdevFeatures::GSO_UDP_TUNNEL | NetdevFeatures::GSO_UDP_TUNNEL_CSUM;
    let mut peer = lab_with(TunnelKind::Vxlan, true, true, tunnel_gso);
    let mut spec = FlowSpec::new(Transport::Tcp, true, 4);
    spec.dst_mac = MacAddr([0x02, 0xbb, 0, 0, 0, 1]);
    let mut sp = Flow::new(spec).superpacket(12 * 1300, 1300, TcpFlags::PSH).unwrap();
    let inner = sp.to_vec();
    // The payload in a segment, as a GRO aggregate or a packet read from a
    // ring has it.
    let headers = superpacket::wire::FrameHeaders::parse(&inner).unwrap().payload_offset;
    sp.detach_payload(headers).unwrap();
    peer.g.receive(peer.a, sp);
    let out = tx_of(&mut peer.g, peer.u);
    assert_eq!(out.len(), 1, "{:?}", peer.g.counters(peer.u));
    let mut p = out.into_iter().next().unwrap();
    assert!(p.meta.is_tunnel_gso() && p.headlen() < p.total_len(), "payload in segments: {}", p.headlen());

    let mut us = lab_with(TunnelKind::Vxlan, true, true, tunnel_gso);
    // From the peer to us: our MAC, the addresses swapped (the UDP and
    // pseudo-header sums do not change).
    let our_mac = us.g.device(us.u).mac.0;
    let b = p.linear_mut();
    b[..6].copy_from_slice(&our_mac);
    let (src, dst) = (b[22..38].to_vec(), b[38..54].to_vec());
    b[22..38].copy_from_slice(&dst);
    b[38..54].copy_from_slice(&src);
    us.g.receive(us.u, p);
    let got = tx_of(&mut us.g, us.a);
    assert_eq!(got.len(), 1, "vx: {:?}", us.g.counters(us.vx));
    assert!(got[0].meta.is_gso() && got[0].meta.encap.is_none(), "{:?}", got[0].meta);
    assert_eq!(got[0].to_vec(), inner);
}
