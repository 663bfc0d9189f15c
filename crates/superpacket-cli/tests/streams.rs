//! Built-in kernel traffic (`superpacket_lab::streams`): TCP and UDP between
//! two namespaces over a veth pair, with every byte checked.
//!
//! The privileged tests create their own namespaces and veth (addresses only
//! on those veths, deleted on drop) and skip with
//! `SUPERPACKET_SKIP_PRIVILEGED=1` when not root. The verifier tests need
//! nothing.
//!
//! Figures are printed (`--nocapture`); they are not asserted beyond "the
//! data moved", since timing is noisy on 2 vCPUs (docs/kernel-oracle.md section 3).

mod common;

use common::privileged;

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use superpacket_engine::io::{NetNs, VethPair};
use superpacket_lab::streams::{
    Limit, Pattern, SEQ_LEN, StreamError, StreamVerifier, TcpConfig, TcpReceiver, TcpSender, UdpConfig, UdpReceiver,
    UdpVerifier, encode_segment, tcp_transfer, udp_transfer,
};

const PREFIX: &str = "sp-streams";

/// Namespaces A and B joined by a veth: A has 10.240.0.1 and fd00:240::1,
/// B has 10.240.0.2 and fd00:240::2 (no DAD, so IPv6 works at once).
struct Pair {
    _veth: VethPair,
    b: NetNs,
    a: NetNs,
}

fn pair() -> Pair {
    let a = NetNs::create(PREFIX).expect("namespace A");
    let b = NetNs::create(PREFIX).expect("namespace B");
    let veth = VethPair::create(&a, "spsa0", &b, "spsb0").expect("veth");
    for (ns, dev, v4, v6) in
        [(&a, "spsa0", "10.240.0.1/24", "fd00:240::1/64"), (&b, "spsb0", "10.240.0.2/24", "fd00:240::2/64")]
    {
        ns.add_addr(dev, v4).expect("IPv4 address");
        ns.add_addr_nodad(dev, v6).expect("IPv6 address");
        ns.link_up(dev).expect("link up");
    }
    Pair { _veth: veth, b, a }
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn tcp_cfg() -> TcpConfig {
    TcpConfig { limit: Limit::Duration(Duration::from_millis(1500)), ..TcpConfig::default() }
}

fn udp_cfg() -> UdpConfig {
    UdpConfig { limit: Limit::Duration(Duration::from_millis(1500)), ..UdpConfig::default() }
}

// ------------------------------------------------------------- verifiers

#[test]
fn stream_verifier_accepts_the_pattern_in_any_chunking() {
    let p = Pattern::new(7);
    let total = 1_000_000u64;
    let mut one = StreamVerifier::new(7);
    let mut other = StreamVerifier::new(7);
    let mut off = 0u64;
    let mut step = 1usize;
    while off < total {
        let len = (step * 7919 % 300_000).max(1).min((total - off) as usize);
        let mut done = 0;
        while done < len {
            let s = p.slice(off + done as u64, len - done);
            one.update(s);
            done += s.len();
        }
        off += len as u64;
        step += 1;
    }
    let mut off = 0;
    while off < total {
        let s = p.slice(off, 65_536.min((total - off) as usize));
        other.update(s);
        off += s.len() as u64;
    }
    assert_eq!(one.bytes(), total);
    assert_eq!(one.hash(), other.hash());
    assert_eq!(one.first_mismatch(), None);
    assert_eq!(other.first_mismatch(), None);
}

#[test]
fn stream_verifier_detects_a_changed_byte() {
    let p = Pattern::new(9);
    let mut good = StreamVerifier::new(9);
    let mut bad = StreamVerifier::new(9);
    let chunk = p.slice(0, 200_000).to_vec();
    let mut corrupt = chunk.clone();
    corrupt[123_456] ^= 0x40;
    good.update(&chunk);
    bad.update(&corrupt);
    assert_eq!(bad.first_mismatch(), Some(123_456));
    assert_ne!(good.hash(), bad.hash());
    // Reordered data (two pieces swapped) is caught as well.
    let mut swapped = StreamVerifier::new(9);
    swapped.update(&chunk[1448..2896]);
    swapped.update(&chunk[..1448]);
    assert_eq!(swapped.first_mismatch(), Some(0));
    // Another seed is another stream.
    let mut other = StreamVerifier::new(10);
    other.update(&chunk);
    assert!(other.first_mismatch().is_some());
}

#[test]
fn udp_verifier_counts_corrupt_duplicate_and_missing_segments() {
    let p = Pattern::new(3);
    let g = 1400;
    let mut dgram = vec![0u8; g * 4];
    for (i, seq) in [0u64, 1, 3, 4].iter().enumerate() {
        assert_eq!(encode_segment(&p, *seq, g, &mut dgram[i * g..]), g);
    }
    let mut v = UdpVerifier::new(3, g);
    v.feed(&dgram, Some(g as u16)); // coalesced: 0, 1, 3, 4 (2 missing)
    let mut single = vec![0u8; g];
    encode_segment(&p, 1, g, &mut single);
    v.feed(&single, None); // duplicate
    let mut bad = single.clone();
    bad[SEQ_LEN + 700] ^= 1;
    v.feed(&bad, None); // payload corrupt
    let mut bad_seq = single.clone();
    bad_seq[0] = 6; // a sequence number whose payload does not match
    v.feed(&bad_seq, None);
    v.feed(&single[..1000], None); // wrong length
    let c = &v.counts;
    assert_eq!((c.datagrams, c.coalesced, c.max_datagram), (5, 1, 4 * g as u64));
    assert_eq!((c.segments, c.unique, c.duplicates, c.corrupt), (8, 4, 1, 3));
    assert_eq!((c.highest, v.gaps()), (5, 1));
    assert_eq!(c.good_bytes, 4 * g as u64);
}

// -------------------------------------------------------------- on a veth

#[test]
fn tcp_ipv4_over_veth_is_intact() {
    if !privileged("tcp_ipv4_over_veth_is_intact") {
        return;
    }
    let p = pair();
    let t = tcp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &tcp_cfg()).expect("TCP transfer");
    eprintln!(
        "TCP/IPv4 veth: {} bytes in {:?}: {:.2} Gbps (sender {:.2}), {} reads, hash {:#x}",
        t.receiver.bytes,
        t.receiver.elapsed,
        t.gbps(),
        t.sender.gbps,
        t.receiver.calls,
        t.receiver.hash
    );
    assert!(t.intact(), "{t:?}");
    assert!(t.receiver.bytes > 10 << 20, "{t:?}");
}

#[test]
fn tcp_ipv6_over_veth_is_intact() {
    if !privileged("tcp_ipv6_over_veth_is_intact") {
        return;
    }
    let p = pair();
    let t = tcp_transfer(Some(&p.b), Some(&p.a), addr("[fd00:240::2]:0"), &tcp_cfg()).expect("TCP transfer");
    eprintln!(
        "TCP/IPv6 veth: {} bytes in {:?}: {:.2} Gbps (sender {:.2}), {} reads",
        t.receiver.bytes,
        t.receiver.elapsed,
        t.gbps(),
        t.sender.gbps,
        t.receiver.calls
    );
    assert!(t.intact(), "{t:?}");
    assert!(t.receiver.bytes > 10 << 20, "{t:?}");
}

#[test]
fn tcp_byte_limit_is_exact() {
    if !privileged("tcp_byte_limit_is_exact") {
        return;
    }
    let p = pair();
    let cfg = TcpConfig { limit: Limit::Bytes(5_000_017), write_size: 100_000, ..TcpConfig::default() };
    let t = tcp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &cfg).expect("TCP transfer");
    assert!(t.intact(), "{t:?}");
    assert_eq!(t.receiver.bytes, 5_000_017);
}

#[test]
fn udp_gso_with_gro_arrives_coalesced_and_uncorrupted() {
    if !privileged("udp_gso_with_gro_arrives_coalesced_and_uncorrupted") {
        return;
    }
    let p = pair();
    for target in ["10.240.0.2:0", "[fd00:240::2]:0"] {
        let t = udp_transfer(Some(&p.b), Some(&p.a), addr(target), &udp_cfg()).expect("UDP transfer");
        let r = &t.receiver;
        eprintln!(
            "UDP GSO+GRO veth {target}: {:.2} Gbps received (sender {:.2}), {} recvmsg, {:.0} B/recvmsg, \
             {} of {} segments, lost {}, corrupt {}, coalesced {}",
            r.gbps,
            t.sender.gbps,
            r.recv_calls,
            r.avg_bytes_per_recv,
            r.counts.unique,
            t.sender.segments,
            t.lost(),
            r.counts.corrupt,
            r.counts.coalesced
        );
        assert!(t.no_corruption(), "{t:?}");
        assert!(r.counts.unique > 1000, "{t:?}");
        assert!(r.avg_bytes_per_recv > 10.0 * 1400.0, "GSO superpackets should arrive coalesced: {t:?}");
        assert!(r.counts.coalesced > 0, "{t:?}");
    }
}

#[test]
fn udp_without_gro_is_segmented_at_the_socket() {
    if !privileged("udp_without_gro_is_segmented_at_the_socket") {
        return;
    }
    let p = pair();
    let cfg = UdpConfig { gro: false, limit: Limit::Bytes(20 * 61_600), rate_gbps: Some(1.0), ..udp_cfg() };
    let t = udp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &cfg).expect("UDP transfer");
    eprintln!("UDP GSO, no GRO: {:.0} B/recvmsg, lost {}", t.receiver.avg_bytes_per_recv, t.lost());
    assert!(t.no_corruption(), "{t:?}");
    assert_eq!(t.sender.segments, 20 * 44);
    assert_eq!(t.receiver.avg_bytes_per_recv, 1400.0, "{t:?}");
    assert_eq!(t.receiver.counts.coalesced, 0);
}

#[test]
fn receivers_without_a_sender_time_out() {
    if !privileged("receivers_without_a_sender_time_out") {
        return;
    }
    let p = pair();
    let idle = Duration::from_millis(500);
    let tcp =
        TcpReceiver::bind_in(&p.b, addr("10.240.0.2:0"), &TcpConfig { idle_timeout: idle, ..tcp_cfg() }).expect("bind");
    let t0 = Instant::now();
    let err = tcp.run().unwrap_err();
    assert!(matches!(err, StreamError::Timeout { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    let udp =
        UdpReceiver::bind_in(&p.b, addr("10.240.0.2:0"), &UdpConfig { idle_timeout: idle, ..udp_cfg() }).expect("bind");
    let t0 = Instant::now();
    let err = udp.run(&AtomicBool::new(false)).unwrap_err();
    assert!(matches!(err, StreamError::Timeout { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

/// Brings `spsb0` up again and waits until both ends of the veth are
/// operational (the kernel activates a link's queue from its link-watch
/// work, up to a second after `ip link set up`; a SYN sent before that is
/// dropped and retried only after the 500 ms connect timeout).
fn restore_link(p: &Pair) {
    p.b.link_up("spsb0").expect("link up");
    let t0 = Instant::now();
    let up = |ns: &NetNs, dev: &str| ns.link_state(dev).is_ok_and(|s| s.oper_up);
    while !(up(&p.a, "spsa0") && up(&p.b, "spsb0")) {
        assert!(t0.elapsed() < Duration::from_secs(5), "the veth did not come back up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn broken_paths_fail_fast() {
    if !privileged("broken_paths_fail_fast") {
        return;
    }
    let p = pair();
    let cfg = TcpConfig {
        connect_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(700),
        limit: Limit::Duration(Duration::from_secs(5)),
        ..tcp_cfg()
    };
    // First a short transfer, so that the links are up and the neighbours
    // resolved: the break below then happens mid-stream, not during a slow
    // first connect on a loaded machine.
    let warm = TcpConfig { limit: Limit::Bytes(1 << 20), ..tcp_cfg() };
    assert!(tcp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &warm).expect("warm-up").intact());
    // Nobody listens: refused at once (checked while the path is warm: right
    // after a link flap, neighbour resolution can take longer than the
    // connect timeout on a loaded machine).
    let err = TcpSender::connect_in(&p.a, addr("10.240.0.2:9"), &cfg).unwrap_err();
    assert!(matches!(err, StreamError::Io(_)), "{err}");
    // The path breaks mid-stream: both sides stall, the send times out. On a
    // loaded machine the connect may not be done when the link goes down
    // (then nothing moved yet): that attempt does not count, up to 3 tries.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let t0 = Instant::now();
        let err = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                p.b.link_down("spsb0").expect("link down");
            });
            tcp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &cfg).unwrap_err()
        });
        restore_link(&p);
        if matches!(err, StreamError::Timeout { bytes: 0, .. }) && attempts < 3 {
            eprintln!("attempt {attempts}: the link went down before the connect completed ({err}); again");
            continue;
        }
        assert!(matches!(err, StreamError::Timeout { bytes, .. } if bytes > 0), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        break;
    }
    // The peer's link goes down before the connect: it times out (no hang).
    let t0 = Instant::now();
    p.b.link_down("spsb0").expect("link down");
    let err = tcp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &cfg).unwrap_err();
    assert!(matches!(err, StreamError::Timeout { .. } | StreamError::Io(_)), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    // UDP into the void: no datagram, a timeout.
    let ucfg = UdpConfig {
        limit: Limit::Duration(Duration::from_millis(200)),
        idle_timeout: Duration::from_millis(500),
        ..udp_cfg()
    };
    let err = udp_transfer(Some(&p.b), Some(&p.a), addr("10.240.0.2:0"), &ucfg).unwrap_err();
    assert!(matches!(err, StreamError::Timeout { .. }), "{err}");
}
