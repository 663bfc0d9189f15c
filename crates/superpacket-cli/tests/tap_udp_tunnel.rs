//! UDP tunnel GSO through a TAP against the running kernel (issue 25 item
//! 4, offload-rules 4.2/4.4): the TAP port asks for
//! `TUN_F_UDP_TUNNEL_GSO[_CSUM]` with the 24-byte virtio_net_hdr; where the
//! kernel accepts them a VXLAN superpacket built by the kernel reaches the
//! engine whole (gso_type with UDP_TUNNEL, encapsulation offsets right), and
//! a VXLAN superpacket written by the engine is taken whole and
//! decapsulated by the kernel's VXLAN device. Where the kernel refuses the
//! flags the tests say so loudly and check the fallback (segments, 10-byte
//! header).
//!
//! Setup (one namespace, IPv6 off, deleted on drop with its links): the TAP
//! `sptt0` (10.242.0.1/24, a static neighbour 10.242.0.2 playing the remote
//! VTEP), a kernel VXLAN device `sptvx0` (VNI 42, port 4789, remote
//! 10.242.0.2, lower `sptt0`, 192.168.77.1/24, static neighbour
//! 192.168.77.2). `SUPERPACKET_SKIP_PRIVILEGED=1` skips them without root.

mod common;

use common::{privileged, quiet_ns};

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use superpacket::offload::gso::{TargetCaps, VecSink, segment};
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket::packet::{GsoType, Packet, TunnelKind};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport, TunnelSpec, encapsulate};
use superpacket::wire::{MacAddr, TcpFlags};
use superpacket_engine::device::port_io::TapPortOptions;
use superpacket_engine::device::{NetdevFeatures, PortDriver, TapDriver};
use superpacket_engine::io::NetNs;
use superpacket_engine::io::netlink::VxlanLink;
use superpacket_engine::io::packet_socket::{PacketSocket, PacketSocketConfig};
use superpacket_lab::streams::{Limit, UdpConfig, UdpSender, UdpVerifier};

const PREFIX: &str = "sp-taptnl";
const TAP: &str = "sptt0";
const VXLAN: &str = "sptvx0";
const TAP_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0x01, 0x01];
const VTEP_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0x01, 0x02];
const VXLAN_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0x01, 0x0a];
const INNER_PEER_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0x01, 0x0b];
/// Outer Ethernet + IPv4 + UDP + VXLAN, inner Ethernet + IPv4.
const INNER_L4: usize = 14 + 20 + 8 + 8 + 14 + 20;

/// The namespace, the TAP port driver and whether the kernel accepted
/// UDP tunnel GSO (printed loudly either way).
struct Setup {
    ns: NetNs,
    tap: TapDriver,
    tunnel: bool,
}

fn counter(drv: &TapDriver, name: &str) -> u64 {
    let mut v = None;
    drv.driver_counters(&mut |n, x| {
        if n == name {
            v = Some(x);
        }
    });
    v.unwrap_or_else(|| panic!("driver counter {name}"))
}

fn setup(udp_csum: bool) -> Setup {
    let ns = quiet_ns(PREFIX);
    let tap = TapDriver::open_with(TAP, Some(&ns), &TapPortOptions::default()).expect("TAP port");
    let tunnel = counter(&tap, "udp_tunnel_gso") == 1;
    let accepted = counter(&tap, "offloads_accepted");
    if tunnel {
        eprintln!("tap_udp_tunnel: this kernel ACCEPTS TUN_F_UDP_TUNNEL_GSO[_CSUM] (offloads {accepted:#x})");
    } else {
        eprintln!(
            "\n*** tap_udp_tunnel: this kernel REFUSES TUN_F_UDP_TUNNEL_GSO (offloads {accepted:#x}): \
             testing the fallback (segments, 10-byte header) ***\n"
        );
    }
    ns.set_mac(TAP, TAP_MAC).unwrap();
    ns.add_addr_nodad(TAP, "10.242.0.1/24").unwrap();
    ns.add_neighbour(TAP, "10.242.0.2", VTEP_MAC).unwrap();
    let cfg = VxlanLink {
        vni: 42,
        remote: "10.242.0.2".parse().unwrap(),
        local: "10.242.0.1".parse().unwrap(),
        port: 4789,
        dev: TAP,
        udp_csum,
    };
    ns.netlink().unwrap().add_vxlan(VXLAN, &cfg).expect("vxlan");
    ns.set_mac(VXLAN, VXLAN_MAC).unwrap();
    ns.add_addr_nodad(VXLAN, "192.168.77.1/24").unwrap();
    ns.link_up(VXLAN).unwrap();
    ns.add_neighbour(VXLAN, "192.168.77.2", INNER_PEER_MAC).unwrap();
    Setup { ns, tap, tunnel }
}

/// Everything the TAP port hands the engine within `idle` of quiet.
fn drain(tap: &mut TapDriver, idle: Duration) -> Vec<Packet> {
    let mut out = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < idle {
        match tap.recv() {
            Some(p) => {
                out.push(p);
                last = Instant::now();
            }
            None => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    out
}

/// Only VXLAN frames from the VXLAN device (UDP to 4789, outer IPv4).
fn is_vxlan(p: &Packet) -> bool {
    let f = p.linear();
    f.len() > 42 && f[12..14] == [0x08, 0x00] && f[23] == 17 && f[36..38] == 4789u16.to_be_bytes()
}

/// The frames `p` stands for, cut by our segmenter for a 1500-byte link
/// without offloads (every checksum completed in software).
fn our_segments(p: &Packet) -> Vec<Vec<u8>> {
    let mut sink = VecSink::new();
    segment(p, &TargetCaps::new(1500), &mut sink).expect("segment");
    sink.frames.into_iter().map(|f| f.data).collect()
}

/// Checks the metadata the TAP port imported for a kernel tunnel superpacket.
fn check_tunnel_meta(p: &Packet, inner: GsoType, udp_csum: bool, what: &str) {
    let m = &p.meta;
    assert!(m.is_tunnel_gso(), "{what}: {m:?}");
    assert!(m.gso_type.contains(inner), "{what}: {}", m.gso_type);
    let tbit = if udp_csum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL };
    assert!(m.gso_type.contains(tbit), "{what}: {}", m.gso_type);
    let e = m.encap.expect("encap");
    assert_eq!(e.tunnel, TunnelKind::Vxlan, "{what}");
    assert_eq!(
        (e.outer_transport, e.inner_mac, e.inner_network, e.inner_transport),
        (34, 50, 64, INNER_L4 as u16),
        "{what}"
    );
}

#[test]
fn tap_port_records_what_the_kernel_accepts_for_udp_tunnel_gso() {
    if !privileged("tap_port_records_what_the_kernel_accepts_for_udp_tunnel_gso") {
        return;
    }
    let s = setup(false);
    let f = s.tap.hw_features();
    assert_eq!(f.contains(NetdevFeatures::GSO_UDP_TUNNEL), s.tunnel, "{f:?}");
    assert_eq!(f.contains(NetdevFeatures::GSO_UDP_TUNNEL_CSUM), s.tunnel, "{f:?}");
    assert_eq!(counter(&s.tap, "udp_tunnel_gso_csum") == 1, s.tunnel);
    // The kernel's view: the TAP's netdev features.
    let text = s.ns.offloads(TAP).expect("ethtool -k");
    let on = |name: &str| text.lines().any(|l| l.trim().starts_with(&format!("{name}: on")));
    assert_eq!(on("tx-udp_tnl-segmentation"), s.tunnel, "{text}");
    assert_eq!(on("tx-udp_tnl-csum-segmentation"), s.tunnel, "{text}");
}

/// Kernel UDP (`UDP_SEGMENT`, 44 x 1400 bytes per send) into the VXLAN
/// device: with tunnel GSO each send reaches the engine as one VXLAN
/// superpacket (UDP_TUNNEL[_CSUM] | UDP_L4) and our segmentation of it gives
/// the datagrams intact; without, the kernel's segments arrive.
#[test]
fn kernel_vxlan_udp_superpackets_reach_the_engine_whole() {
    if !privileged("kernel_vxlan_udp_superpackets_reach_the_engine_whole") {
        return;
    }
    const SENDS: u64 = 4;
    for udp_csum in [false, true] {
        let what = format!("udp inner, outer csum {udp_csum}");
        let mut s = setup(udp_csum);
        drain(&mut s.tap, Duration::from_millis(100));
        let cfg = UdpConfig { limit: Limit::Bytes(SENDS * 61_600), gro: false, ..UdpConfig::default() };
        let target: SocketAddr = "192.168.77.2:9000".parse().unwrap();
        let sent = UdpSender::connect_in(&s.ns, target, &cfg).expect("sender").run().expect("send");
        assert_eq!(sent.sends, SENDS, "{what}");
        let frames: Vec<Packet> = drain(&mut s.tap, Duration::from_millis(400)).into_iter().filter(is_vxlan).collect();
        let mut verifier = UdpVerifier::new(cfg.seed, 1400);
        for p in &frames {
            if s.tunnel {
                check_tunnel_meta(p, GsoType::UDP_L4, udp_csum, &what);
                assert_eq!((p.meta.gso_size, p.meta.gso_segs), (1400, 44), "{what}");
                let segs = our_segments(p);
                assert_eq!(segs.len(), 44, "{what}");
                for seg in &segs {
                    assert_eq!(seg.len(), INNER_L4 + 8 + 1400, "{what}");
                    verifier.feed(&seg[INNER_L4 + 8..], None);
                }
            } else {
                assert!(!p.meta.is_gso(), "{what}: {:?}", p.meta);
                verifier.feed(&p.to_vec()[INNER_L4 + 8..], None);
            }
        }
        let c = &verifier.counts;
        eprintln!("{what}: {} frames from the TAP, {} datagrams ({} corrupt)", frames.len(), c.unique, c.corrupt);
        assert_eq!((c.unique, c.corrupt, c.duplicates), (SENDS * 44, 0, 0), "{what}");
        assert_eq!(frames.len() as u64, if s.tunnel { SENDS } else { SENDS * 44 }, "{what}");
    }
}

/// Kernel behaviour noted by this test: a tunnel superpacket built from a
/// DODGY inner skb (AF_PACKET with a virtio_net_hdr into the VXLAN device)
/// is segmented before it reaches the TAP even with tunnel GSO on (the
/// header validation pass of `__skb_udp_tunnel_segment` does not find the
/// tunnel bits in tun's encapsulation features), while superpackets of
/// local sockets cross whole. Recorded, not asserted either way.
#[test]
fn dodgy_inner_superpackets_into_vxlan_are_reported() {
    if !privileged("dodgy_inner_superpackets_into_vxlan_are_reported") {
        return;
    }
    let mut s = setup(false);
    let mut spec = FlowSpec::new(Transport::Tcp, false, 0);
    spec.src_mac = MacAddr(VXLAN_MAC);
    spec.dst_mac = MacAddr(INNER_PEER_MAC);
    spec.addrs = Addrs::V4 { src: Ipv4Addr::new(192, 168, 77, 1), dst: Ipv4Addr::new(192, 168, 77, 2) };
    let inner = Flow::new(spec).superpacket(1400 * 8, 1400, TcpFlags::empty()).unwrap();
    let frame = inner.to_vec();
    let hdr = VirtioNetHdr::from_meta(&inner.meta, &frame, false).unwrap();
    let cfg = PacketSocketConfig { incoming_only: true, auxdata: false, ..PacketSocketConfig::default() };
    let mut tx = PacketSocket::open_in(&s.ns, VXLAN, &cfg).expect("AF_PACKET on the VXLAN device");
    drain(&mut s.tap, Duration::from_millis(100));
    tx.send(&hdr, &[&frame]).expect("send the inner superpacket");
    let frames: Vec<Packet> = drain(&mut s.tap, Duration::from_millis(400)).into_iter().filter(is_vxlan).collect();
    let mut got = Vec::new();
    for p in &frames {
        for seg in if p.meta.is_gso() { our_segments(p) } else { vec![p.to_vec()] } {
            let tcp_len = usize::from(seg[INNER_L4 + 12] >> 4) * 4;
            got.extend_from_slice(&seg[INNER_L4 + tcp_len..]);
        }
    }
    eprintln!("AF_PACKET TSO into VXLAN: {} frame(s) on the TAP (tunnel GSO negotiated: {})", frames.len(), s.tunnel);
    let inner_tcp = usize::from(frame[14 + 20 + 12] >> 4) * 4;
    // Reported only: the kernel's segments carried 11184 of the 11200 bytes
    // by this count on 6.18 (8 frames); not yet understood.
    eprintln!("inner payload bytes seen: {} of {}", got.len(), frame.len() - 14 - 20 - inner_tcp);
}

/// A VXLAN superpacket (inner UDP, USO) written by the engine into the TAP
/// (24-byte header, UDP_TUNNEL[_CSUM] | UDP_L4) is accepted by the kernel,
/// decapsulated by its VXLAN device and delivered to a UDP socket as the
/// datagrams it stands for, intact. Without tunnel GSO the port refuses to
/// write it whole (the engine segments before such a port).
#[test]
fn engine_vxlan_superpackets_are_decapsulated_by_the_kernel() {
    if !privileged("engine_vxlan_superpackets_are_decapsulated_by_the_kernel") {
        return;
    }
    for udp_csum in [false, true] {
        let what = format!("engine -> kernel, outer csum {udp_csum}");
        let mut s = setup(udp_csum);
        let sock =
            s.ns.enter_scoped(|| UdpSocket::bind("192.168.77.1:9000"))
                .expect("enter namespace")
                .expect("bind the inner receiver");
        sock.set_read_timeout(Some(Duration::from_millis(500))).unwrap();

        let mut spec = FlowSpec::new(Transport::Udp, false, 0);
        spec.src_mac = MacAddr(INNER_PEER_MAC);
        spec.dst_mac = MacAddr(VXLAN_MAC);
        spec.addrs = Addrs::V4 { src: Ipv4Addr::new(192, 168, 77, 2), dst: Ipv4Addr::new(192, 168, 77, 1) };
        spec.src_port = 40000;
        spec.dst_port = 9000;
        const SEGS: usize = 20;
        let inner = Flow::new(spec).superpacket(1400 * SEGS, 1400, TcpFlags::empty()).unwrap();
        let mut tunnel = TunnelSpec::new(TunnelKind::Vxlan, false);
        tunnel.outer.src_mac = MacAddr(VTEP_MAC);
        tunnel.outer.dst_mac = MacAddr(TAP_MAC);
        tunnel.outer.addrs = Addrs::V4 { src: Ipv4Addr::new(10, 242, 0, 2), dst: Ipv4Addr::new(10, 242, 0, 1) };
        tunnel.udp_csum = udp_csum;
        let p = encapsulate(&inner, &tunnel).unwrap();
        assert!(p.meta.is_tunnel_gso());
        let payload = inner.to_vec()[14 + 20 + 8..].to_vec();

        let r = s.tap.xmit(p.clone());
        if !s.tunnel {
            let e = r.expect_err("a tunnel superpacket cannot be written without tunnel GSO");
            assert_eq!(e.reason, "tunnel-needs-24-byte-header", "{what}: {e:?}");
            // The fallback: the engine's segments, each an ordinary VXLAN frame.
            let mut sink = VecSink::new();
            segment(&p, &TargetCaps::new(1500), &mut sink).unwrap();
            for f in sink.frames {
                s.tap.xmit(Packet::from_frame(&f.data)).expect("write a segment");
            }
        } else {
            r.expect("write the tunnel superpacket");
            assert_eq!(counter(&s.tap, "tx_superpackets"), 1, "{what}");
        }
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = sock.recv(&mut buf) {
            assert_eq!(n, 1400, "{what}");
            got.extend_from_slice(&buf[..n]);
        }
        let errors = s.ns.link_statistic(TAP, "rx_frame_errors").unwrap_or(0);
        assert_eq!(got.len(), payload.len(), "{what}: datagrams received (TAP rx_frame_errors {errors})");
        assert!(got == payload, "{what}: inner payload differs");
        eprintln!("{what}: {} datagrams decapsulated and delivered intact", got.len() / 1400);
    }
}
