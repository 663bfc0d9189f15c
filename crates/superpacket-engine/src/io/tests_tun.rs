//! TUN queues against the kernel: raw IP with a virtio_net_hdr in both
//! directions, offsets counted from the IP header. The privileged tests
//! start with `require_privileges()` and work in a namespace of their own
//! (deleted on drop, also on failure) with a TUN they create.

use super::tun::*;
use super::*;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use superpacket::csum::{checksum, pseudo_header_v4};
use superpacket::packet::virtio::{
    F_NEEDS_CSUM, GSO_NONE, GSO_UDP_L4, ImportOptions, Medium, UDP_MAX_SEGMENTS, VirtioNetHdr,
};
use superpacket::packet::{ChecksumState, GsoType};

/// The kernel's address on the TUN, and the peer's (the test's) behind it.
const ME: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);

/// `UDP_SEGMENT` (linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;

/// An IPv4 packet from `src` to `dst` (header checksum set, DF, TTL 64).
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = proto;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

/// A UDP datagram from `PEER:sport` to `ME:dport`; its checksum is left to
/// the kernel (`partial`: seeded with the pseudo-header sum, to be finished
/// as `NEEDS_CSUM` asks) or absent (0).
fn udp_to_me(sport: u16, dport: u16, payload: &[u8], partial: bool) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = Vec::with_capacity(len as usize);
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&len.to_be_bytes());
    let seed = if partial { pseudo_header_v4(PEER.octets(), ME.octets(), 17, len) } else { 0 };
    u.extend_from_slice(&seed.to_be_bytes());
    u.extend_from_slice(payload);
    ipv4(PEER, ME, 17, &u)
}

/// A namespace with TUN `sptun0` (nonblocking, 10.9.0.1/24, up), IPv6 off
/// so that nothing but the test's packets moves.
fn tun_in_ns() -> (NetNs, TunDevice) {
    let ns = NetNs::create("sptun").unwrap();
    ns.disable_ipv6().unwrap();
    let tun = TunDevice::open_in(&ns, &TunConfig { nonblocking: true, ..TunConfig::named("sptun0") }).unwrap();
    ns.add_addr("sptun0", &format!("{ME}/24")).unwrap();
    ns.link_up("sptun0").unwrap();
    (ns, tun)
}

/// The next packet the TUN hands over that `want` accepts (others are
/// skipped), waiting up to 2 s.
fn read_until(tun: &mut TunDevice, want: impl Fn(&[u8]) -> bool) -> (VirtioNetHdr, Vec<u8>) {
    let mut buf = vec![0u8; 70000];
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if !tun.poll_readable(Duration::from_millis(50)).unwrap() {
            continue;
        }
        let (hdr, len) = tun.read_packet(&mut buf).unwrap();
        if want(&buf[..len]) {
            return (hdr, buf[..len].to_vec());
        }
    }
    panic!("the TUN handed over no such packet within 2 s");
}

/// Accepts an IPv4 packet to `PEER` of protocol `proto` whose L4 bytes `l4`
/// accepts.
fn to_peer(proto: u8, l4: impl Fn(&[u8]) -> bool) -> impl Fn(&[u8]) -> bool {
    move |p| p.len() >= 24 && p[0] == 0x45 && p[9] == proto && p[16..20] == PEER.octets() && l4(&p[20..])
}

/// A UDP socket of the namespace, bound to `ME`.
fn socket(ns: &NetNs) -> UdpSocket {
    let s = ns.enter_scoped(|| UdpSocket::bind((ME, 0))).unwrap().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

#[test]
fn tun_config_flags() {
    assert_eq!(TunConfig::default().iff_flags::<Tun>(), IFF_TUN | IFF_NO_PI | IFF_VNET_HDR);
    let mq = TunConfig { multi_queue: true, ..TunConfig::named("sptun0") };
    assert_eq!(mq.iff_flags::<Tun>(), 0x5101);
    assert_eq!(<Tun as TunTapKind>::MEDIUM, Medium::Ip);
}

/// Kernel -> TUN (UDP, an echo reply) and TUN -> kernel (UDP with and
/// without a partial checksum, an echo request): raw IP from the first
/// byte, checksum offsets from the IP header.
#[test]
fn tun_reads_and_writes_raw_ip_with_a_vnet_header() {
    if !require_privileges() {
        return;
    }
    let (ns, mut tun) = tun_in_ns();
    assert_eq!(tun.negotiate_offload(TUN_F_CSUM).unwrap(), TUN_F_CSUM);
    assert!(tun.features().unwrap() & u32::from(IFF_TUN) != 0);
    let sock = socket(&ns);
    let my_port = sock.local_addr().unwrap().port();

    // Kernel -> TUN: the datagram to the peer, raw, its checksum left to us.
    sock.send_to(b"hello tun", (PEER, 4242)).unwrap();
    let (hdr, p) = read_until(&mut tun, to_peer(17, |u| u[2..4] == 4242u16.to_be_bytes()));
    assert_eq!(&p[28..], b"hello tun");
    assert_eq!((hdr.gso_type, hdr.flags, hdr.csum_start, hdr.csum_offset), (GSO_NONE, F_NEEDS_CSUM, 20, 6));
    let meta = hdr.to_meta(&p, &ImportOptions { medium: Medium::Ip, ..ImportOptions::default() }).unwrap();
    assert_eq!(meta.csum, ChecksumState::Partial { start: 20, offset: 6 });

    // TUN -> kernel: without a checksum, then with NEEDS_CSUM from the IP header.
    for (payload, partial) in [(&b"hello kernel"[..], false), (&b"partial checksum"[..], true)] {
        let pkt = udp_to_me(4242, my_port, payload, partial);
        let hdr = if partial {
            VirtioNetHdr { flags: F_NEEDS_CSUM, csum_start: 20, csum_offset: 6, ..VirtioNetHdr::default() }
        } else {
            VirtioNetHdr::default()
        };
        assert_eq!(tun.write_packet(&hdr, &pkt).unwrap(), pkt.len());
        let mut buf = [0u8; 64];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (payload, SocketAddr::from((PEER, 4242))));
    }

    // An echo request from the peer is answered through the TUN.
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    icmp.extend_from_slice(b"ping over tun");
    let c = checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let pkt = ipv4(PEER, ME, 1, &icmp);
    let (head, rest) = pkt.split_at(20);
    assert_eq!(tun.write_packet_vectored(&VirtioNetHdr::default(), &[head, rest]).unwrap(), pkt.len());
    let (_, reply) = read_until(&mut tun, to_peer(1, |i| i[0] == 0 && i[4..6] == [0x12, 0x34]));
    assert_eq!(&reply[28..], b"ping over tun");
    drop(tun);
    drop(ns);
}

/// With USO accepted, a UDP_SEGMENT send crosses the TUN as one superpacket
/// whose header counts from the IP header; the core imports it as raw IP.
#[test]
fn tun_hands_over_udp_superpackets_whole_when_uso_is_accepted() {
    if !require_privileges() {
        return;
    }
    let (ns, mut tun) = tun_in_ns();
    let accepted = tun.negotiate_offload(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6).unwrap();
    assert!(accepted & TUN_F_CSUM != 0, "{accepted:#x}");
    let sock = socket(&ns);
    let seg: libc::c_int = 1000;
    // SAFETY: setsockopt reads one int from a live local of that size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            (&seg as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
    sock.send_to(&[0x5a; 4000], (PEER, 4243)).unwrap();
    let want = to_peer(17, |u| u[2..4] == 4243u16.to_be_bytes());
    if accepted & (TUN_F_USO4 | TUN_F_USO6) != TUN_F_USO4 | TUN_F_USO6 {
        eprintln!("this kernel refused USO ({accepted:#x}): the datagrams come one by one");
        for _ in 0..4 {
            assert_eq!(read_until(&mut tun, &want).1.len(), 20 + 8 + 1000);
        }
        return;
    }
    let (hdr, p) = read_until(&mut tun, want);
    assert_eq!(p.len(), 20 + 8 + 4000, "one superpacket");
    assert_eq!((hdr.gso_type, hdr.gso_size, hdr.csum_start, hdr.csum_offset), (GSO_UDP_L4, 1000, 20, 6));
    let opts = ImportOptions { medium: Medium::Ip, ..ImportOptions::default() };
    assert_eq!(opts.udp_max_segments, UDP_MAX_SEGMENTS);
    let meta = hdr.to_meta(&p, &opts).unwrap();
    assert!(meta.gso_type.contains(GsoType::UDP_L4) && meta.gso_segs == 4, "{meta:?}");
    // An Ethernet reading of the same bytes is not the same packet.
    assert!(hdr.to_meta(&p, &ImportOptions::default()).is_err());
    drop(ns);
}
