//! Hostile ingress, live (issue 22 item 5): `superpacket run` on
//! `examples/live-router-nat.toml` (a router with IPv4 and IPv6 addresses
//! between the lab's two TAPs, masquerade out of B) while namespace A, the
//! LAN, writes malformed IPv4 and IPv6 packets into its TAP with an
//! AF_PACKET socket (every byte the test's, Ethernet included), addressed
//! to the router's MAC and routed toward host B, the WAN.
//!
//! Every class Linux's IP input refuses (`ip_rcv_core`, `ipv6_rcv`, the
//! martian checks of route input, the TTL/hop limit check on forward) and
//! a TCP header NAT cannot parse is sent [`ROUNDS`] times. The test checks:
//!
//! - **nothing malformed leaves**: an AF_PACKET socket on B's TAP (inside
//!   namespace B) sees every frame the engine writes there; no frame holds
//!   the marker the malformed packets carry in their payload, while the
//!   well-formed IPv4 (NATed) and IPv6 control packets sent between them
//!   all arrive (the capture works), and the capture lost nothing
//!   (`PACKET_STATISTICS`);
//! - **every drop is counted under its reason**: the per-reason drop
//!   counters (`drops.<reason>` summed over all devices of `superpacket
//!   stats --json`) grow by exactly the number of packets of the classes
//!   that share the reason, and NAT's connection table holds only the
//!   stream's and the IPv4 control flow's connections (no malformed packet
//!   made one);
//! - **the good traffic is untouched**: a kernel TCP stream from A to B
//!   through the NAT runs during the injection (it starts before and ends
//!   after it) and arrives intact (every byte compared with the pattern,
//!   hashes agree).
//!
//! IPv6 is off in the lab's namespaces so that no kernel packet (router
//! solicitations, MLD reports with hop limit 1) moves the counters; the
//! router reaches host B's IPv6 address through a static neighbour entry.
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). Only the namespaces and
//! TAPs the test creates are touched; all are deleted, also on failure.

mod common;

use common::engine::Running;
use common::privileged;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use superpacket::csum;
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket_engine::io::packet_socket::{PacketSocket, PacketSocketConfig};
use superpacket_engine::io::{IoError, NetNs};
use superpacket_lab::flood;
use superpacket_lab::lab::{HOST_A_V4, HOST_A_V6, HOST_B_V4, HOST_B_V6, Lab, TAP_A, TAP_B};
use superpacket_lab::streams::{Limit, TcpConfig, TcpReceiver, TcpSender};

/// Packets of each malformed class (and control packets of each family,
/// plus one more of each at the end).
const ROUNDS: u8 = 3;
/// How long the TCP stream runs; the injection happens in its middle.
const STREAM_SECS: f64 = 3.0;
/// Least the stream must carry.
const STREAM_MIN_BYTES: u64 = 20_000_000;
/// UDP port of the control packets, and of the malformed UDP ones.
const CTL_PORT: u16 = 7001;
const BAD_PORT: u16 = 7002;
/// Longest the capture runs, whatever happens.
const CAPTURE_MAX: Duration = Duration::from_secs(60);
/// TCP port of the stream.
const STREAM_PORT: u16 = 5201;
/// What every malformed packet's payload starts with (then its class index
/// and round); and the control packets' (then the family, 4 or 6, and round).
const BAD_MARK: &[u8; 6] = b"SP-BAD";
const CTL_MARK: &[u8; 6] = b"SP-CTL";

/// The two MACs of A's link: the router's port and host A's TAP.
#[derive(Clone, Copy)]
struct Macs {
    router: [u8; 6],
    host: [u8; 6],
}

/// A malformed packet class: its name, the drop reason the engine must
/// count it under, and its frame around a payload (marker, class, round).
struct Class {
    name: &'static str,
    reason: &'static str,
    frame: fn(&Macs, &[u8]) -> Vec<u8>,
}

/// The payload of malformed class `class`, round `round`.
fn bad_payload(class: usize, round: u8) -> Vec<u8> {
    let mut p = BAD_MARK.to_vec();
    p.extend_from_slice(&[class as u8, round]);
    p.resize(40, 0xa5);
    p
}

fn ctl_payload(family: u8, round: u8) -> Vec<u8> {
    let mut p = CTL_MARK.to_vec();
    p.extend_from_slice(&[family, round]);
    p.resize(40, 0x5a);
    p
}

// ------------------------------------------------------------------ frames

fn ethernet(macs: &Macs, ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&macs.router);
    f.extend_from_slice(&macs.host);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// A UDP datagram with its checksum over `pseudo` (the pseudo-header sum).
fn udp(sport: u16, dport: u16, payload: &[u8], pseudo: impl Fn(u16) -> u16) -> Vec<u8> {
    let mut u = flood::udp(sport, dport, payload);
    let len = u.len() as u16;
    let mut c = !csum::ones_add(pseudo(len), csum::ones_sum(&u));
    if c == 0 {
        c = 0xffff;
    }
    u[6..8].copy_from_slice(&c.to_be_bytes());
    u
}

fn udp4(src: Ipv4Addr, dst: Ipv4Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    udp(40_000, dport, payload, |len| csum::pseudo_header_v4(src.octets(), dst.octets(), 17, len))
}

fn udp6(src: Ipv6Addr, dst: Ipv6Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    udp(40_000, dport, payload, |len| csum::pseudo_header_v6(src.octets(), dst.octets(), 17, u32::from(len)))
}

/// Ethernet + a well-formed IPv4 header (valid checksum) + `l4`.
fn ipv4(macs: &Macs, src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = ethernet(macs, 0x0800);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0x5350u16.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = ttl;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    f.extend_from_slice(&ip);
    fix_ipv4_checksum(&mut f);
    f.extend_from_slice(l4);
    f
}

/// The IPv4 header checksum over the 20 bytes after the Ethernet header.
fn fix_ipv4_checksum(f: &mut [u8]) {
    f[24..26].fill(0);
    let c = csum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

/// A UDP packet from host A to host B whose IPv4 header `edit` then
/// changes (the header checksum is computed again afterwards).
fn udp4_edited(macs: &Macs, payload: &[u8], edit: impl Fn(&mut [u8])) -> Vec<u8> {
    udp4_between(macs, HOST_A_V4, HOST_B_V4, 64, payload, edit)
}

fn udp4_between(
    macs: &Macs,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    payload: &[u8],
    edit: impl Fn(&mut [u8]),
) -> Vec<u8> {
    let mut f = ipv4(macs, src, dst, ttl, 17, &udp4(src, dst, BAD_PORT, payload));
    edit(&mut f[14..34]);
    fix_ipv4_checksum(&mut f);
    f
}

/// Ethernet + IPv6 (hop limit `hop`) + UDP.
fn udp6_between(macs: &Macs, src: Ipv6Addr, dst: Ipv6Addr, hop: u8, dport: u16, payload: &[u8]) -> Vec<u8> {
    let u = udp6(src, dst, dport, payload);
    let mut f = ethernet(macs, 0x86DD);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(u.len() as u16).to_be_bytes());
    f.extend_from_slice(&[17, hop]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&u);
    f
}

/// The IPv4 control packet of `round`: well-formed UDP from host A to host B.
fn ctl4(macs: &Macs, round: u8) -> Vec<u8> {
    ipv4(macs, HOST_A_V4, HOST_B_V4, 64, 17, &udp4(HOST_A_V4, HOST_B_V4, CTL_PORT, &ctl_payload(4, round)))
}

fn udp6_bad(macs: &Macs, src: Ipv6Addr, dst: Ipv6Addr, hop: u8, payload: &[u8]) -> Vec<u8> {
    udp6_between(macs, src, dst, hop, BAD_PORT, payload)
}

/// A TCP segment (ACK|PSH) from host A to host B with data offset 4 (16
/// bytes, below the 20-byte minimum) and a correct checksum.
fn tcp_short_offset(macs: &Macs, payload: &[u8]) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&40_001u16.to_be_bytes());
    t[2..4].copy_from_slice(&BAD_PORT.to_be_bytes());
    t[4..8].copy_from_slice(&1u32.to_be_bytes());
    t[8..12].copy_from_slice(&1u32.to_be_bytes());
    t[12] = 4 << 4;
    t[13] = 0x18;
    t[14..16].copy_from_slice(&64_240u16.to_be_bytes());
    t.extend_from_slice(payload);
    let pseudo = csum::pseudo_header_v4(HOST_A_V4.octets(), HOST_B_V4.octets(), 6, t.len() as u16);
    let c = !csum::ones_add(pseudo, csum::ones_sum(&t));
    t[16..18].copy_from_slice(&c.to_be_bytes());
    ipv4(macs, HOST_A_V4, HOST_B_V4, 64, 6, &t)
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// Every malformed class, in sending order.
fn classes() -> Vec<Class> {
    vec![
        Class { name: "IPv4 IHL 0", reason: "ipv4-header-length", frame: |m, p| udp4_edited(m, p, |ip| ip[0] = 0x40) },
        Class { name: "IPv4 IHL 3", reason: "ipv4-header-length", frame: |m, p| udp4_edited(m, p, |ip| ip[0] = 0x43) },
        Class {
            name: "IPv4 total length beyond the frame",
            reason: "ipv4-truncated",
            frame: |m, p| {
                udp4_edited(m, p, |ip| {
                    let tot = u16::from_be_bytes([ip[2], ip[3]]) + 100;
                    ip[2..4].copy_from_slice(&tot.to_be_bytes());
                })
            },
        },
        Class {
            name: "IPv4 total length below the header",
            reason: "ipv4-total-length",
            frame: |m, p| udp4_edited(m, p, |ip| ip[2..4].copy_from_slice(&16u16.to_be_bytes())),
        },
        Class {
            name: "IPv4 wrong header checksum",
            reason: "ipv4-checksum",
            frame: |m, p| {
                let mut f = udp4_edited(m, p, |_| {});
                f[24] ^= 0x5a;
                f
            },
        },
        Class {
            name: "IPv4 source 127.0.0.1",
            reason: "martian-source",
            frame: |m, p| udp4_between(m, Ipv4Addr::LOCALHOST, HOST_B_V4, 64, p, |_| {}),
        },
        Class {
            name: "IPv4 source 0.0.0.1",
            reason: "martian-source",
            frame: |m, p| udp4_between(m, Ipv4Addr::new(0, 0, 0, 1), HOST_B_V4, 64, p, |_| {}),
        },
        Class {
            name: "IPv4 source 224.0.0.5",
            reason: "martian-source",
            frame: |m, p| udp4_between(m, Ipv4Addr::new(224, 0, 0, 5), HOST_B_V4, 64, p, |_| {}),
        },
        Class {
            name: "IPv4 source 255.255.255.255",
            reason: "martian-source",
            frame: |m, p| udp4_between(m, Ipv4Addr::BROADCAST, HOST_B_V4, 64, p, |_| {}),
        },
        Class {
            name: "IPv4 destination 255.255.255.255",
            reason: "broadcast-destination",
            frame: |m, p| udp4_between(m, HOST_A_V4, Ipv4Addr::BROADCAST, 64, p, |_| {}),
        },
        Class {
            name: "IPv4 destination 127.0.0.1",
            reason: "martian-destination",
            frame: |m, p| udp4_between(m, HOST_A_V4, Ipv4Addr::LOCALHOST, 64, p, |_| {}),
        },
        Class {
            name: "IPv4 destination 224.1.2.3",
            reason: "multicast-destination",
            frame: |m, p| udp4_between(m, HOST_A_V4, Ipv4Addr::new(224, 1, 2, 3), 64, p, |_| {}),
        },
        Class { name: "TCP data offset 4 (through NAT)", reason: "nat-invalid-l4", frame: tcp_short_offset },
        Class {
            name: "IPv4 TTL 1",
            reason: "ttl-exceeded",
            frame: |m, p| udp4_between(m, HOST_A_V4, HOST_B_V4, 1, p, |_| {}),
        },
        Class {
            name: "IPv6 payload length beyond the frame",
            reason: "ipv6-truncated",
            frame: |m, p| {
                let mut f = udp6_bad(m, HOST_A_V6, HOST_B_V6, 64, p);
                let plen = u16::from_be_bytes([f[18], f[19]]) + 100;
                f[18..20].copy_from_slice(&plen.to_be_bytes());
                f
            },
        },
        Class {
            name: "IPv6 source ff02::1 (multicast)",
            reason: "martian-source",
            frame: |m, p| udp6_bad(m, v6("ff02::1"), HOST_B_V6, 64, p),
        },
        Class {
            name: "IPv6 source ::1",
            reason: "martian-source",
            frame: |m, p| udp6_bad(m, Ipv6Addr::LOCALHOST, HOST_B_V6, 64, p),
        },
        Class {
            name: "IPv6 destination ::1",
            reason: "martian-destination",
            frame: |m, p| udp6_bad(m, HOST_A_V6, Ipv6Addr::LOCALHOST, 64, p),
        },
        Class {
            name: "version 4 in an IPv6 (0x86DD) frame",
            reason: "ipv6-version",
            frame: |m, p| {
                let mut f = udp6_bad(m, HOST_A_V6, HOST_B_V6, 64, p);
                f[14] = 0x40 | (f[14] & 0x0f);
                f
            },
        },
        Class {
            name: "IPv6 hop limit 1",
            reason: "hop-limit-exceeded",
            frame: |m, p| udp6_bad(m, HOST_A_V6, HOST_B_V6, 1, p),
        },
    ]
}

// ------------------------------------------------------------------ lab

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).unwrap()
}

fn parse_mac(text: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    let mut parts = text.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next().expect("six octets"), 16).expect("hex octet");
    }
    mac
}

/// Waits until A's kernel has resolved the router's address; its MAC.
fn router_mac(a: &NetNs) -> [u8; 6] {
    let t0 = Instant::now();
    loop {
        if let Some(m) = flood::neighbour_mac(a, Ipv4Addr::new(10, 71, 0, 1)) {
            return m;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "A never resolved the router");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `drops.<reason>` summed over every device.
fn drops(stats: &serde_json::Value, reason: &str) -> u64 {
    let key = format!("drops.{reason}");
    stats["devices"].as_array().unwrap().iter().filter_map(|d| d["counters"][&key].as_u64()).sum()
}

/// Every `drops.*` counter summed over the devices, by reason.
fn all_drops(stats: &serde_json::Value) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for d in stats["devices"].as_array().unwrap() {
        for (k, v) in d["counters"].as_object().unwrap() {
            if let Some(reason) = k.strip_prefix("drops.") {
                *m.entry(reason.to_string()).or_default() += v.as_u64().unwrap();
            }
        }
    }
    m
}

/// Sends one frame, retrying while the TAP's queue is full (`ENOBUFS`
/// with the qdisc bypassed: the frame was not taken).
fn send(sock: &mut PacketSocket, frame: &[u8]) {
    let t0 = Instant::now();
    loop {
        match sock.send(&VirtioNetHdr::default(), &[frame]) {
            Ok(_) => return,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                assert!(t0.elapsed() < Duration::from_secs(5), "A's TAP refused a frame for 5 s");
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => panic!("send on {TAP_A}: {e}"),
        }
    }
}

// ------------------------------------------------------------------ capture

/// What B's TAP received from the engine, as far as markers go.
#[derive(Debug, Default)]
struct Capture {
    frames: u64,
    /// (class index, round) of malformed packets that arrived, with the
    /// frame's first bytes.
    bad: Vec<(usize, u8, Vec<u8>)>,
    /// (family, round) of control packets that arrived.
    ctl: BTreeSet<(u8, u8)>,
    /// `PACKET_STATISTICS` of the capture socket: (received, dropped).
    kernel: (u32, u32),
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads B's TAP (frames the engine wrote, as B's kernel received them)
/// until `stop` is set and the socket is idle.
fn capture(mut sock: PacketSocket, stop: &AtomicBool) -> Result<Capture, IoError> {
    let mut c = Capture::default();
    let mut buf = vec![0u8; superpacket_engine::io::packet_socket::RECV_SLOT];
    let t0 = Instant::now();
    loop {
        match sock.recv_info(&mut buf) {
            Ok(info) => {
                c.frames += 1;
                // Markers sit in the first bytes of small packets; a TCP
                // superpacket of the stream is only searched at its head.
                let f = &buf[..info.len.min(2048)];
                let mut at = 0;
                while let Some(i) = find(&f[at..], BAD_MARK) {
                    let p = at + i + BAD_MARK.len();
                    if let Some(&[class, round]) = f.get(p..p + 2) {
                        c.bad.push((usize::from(class), round, f[..f.len().min(80)].to_vec()));
                    }
                    at = p;
                }
                if let Some(i) = find(f, CTL_MARK) {
                    let p = i + CTL_MARK.len();
                    if let Some(&[family, round]) = f.get(p..p + 2) {
                        c.ctl.insert((family, round));
                    }
                }
            }
            Err(e) if e.is_would_block() => {
                if stop.load(Ordering::Relaxed) || t0.elapsed() > CAPTURE_MAX {
                    break;
                }
            }
            Err(e) => return Err(e),
        }
    }
    c.kernel = sock.take_stats()?;
    Ok(c)
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

// ------------------------------------------------------------------ the test

#[test]
fn malformed_ingress_is_dropped_counted_and_never_forwarded_while_tcp_flows() {
    if !privileged("malformed_ingress_is_dropped_counted_and_never_forwarded_while_tcp_flows") {
        return;
    }
    let t_start = Instant::now();
    let lab = Lab::create("sp-hostile", false).unwrap();
    let host_mac = parse_mac(&lab.a.read_sysfs(TAP_A, "address").unwrap());
    let b_mac = lab.b.read_sysfs(TAP_B, "address").unwrap();
    // IPv6 is off in B: the router finds host B's IPv6 address here.
    let topo = format!(
        "{}\n[[neighbour]]\naddress = \"{HOST_B_V6}\"\nmac = \"{}\"\n",
        lab.localize(&example("live-router-nat.toml")),
        b_mac.trim()
    );
    let engine = Running::start(&topo);

    // B takes the UDP ports (no ICMP port unreachable back into the router).
    let sinks: Vec<UdpSocket> = [CTL_PORT, BAD_PORT]
        .into_iter()
        .map(|p| lab.b.enter_scoped(|| UdpSocket::bind((HOST_B_V4, p))).unwrap().unwrap())
        .collect();
    let cap_cfg = PacketSocketConfig {
        incoming_only: true,
        recv_timeout: Some(Duration::from_millis(50)),
        auxdata: false,
        rcvbuf: Some(64 << 20),
        ..PacketSocketConfig::default()
    };
    let cap_sock = PacketSocket::open_in(&lab.b, TAP_B, &cap_cfg).unwrap();

    let cfg = TcpConfig {
        limit: Limit::Duration(Duration::from_secs_f64(STREAM_SECS)),
        idle_timeout: Duration::from_secs(5),
        ..TcpConfig::default()
    };
    let addr = SocketAddr::new(IpAddr::V4(HOST_B_V4), STREAM_PORT);
    let receiver = TcpReceiver::bind_in(&lab.b, addr, &cfg).unwrap();
    let sender = TcpSender::connect_in(&lab.a, addr, &cfg).unwrap();

    let classes = classes();
    let stop = AtomicBool::new(false);
    let (cap, tcp_rx, tcp_tx, before, injected) = std::thread::scope(|s| {
        // Ends the capture however this closure is left (a panic included:
        // the scope waits for its threads before passing the panic on).
        let _stop = StopOnDrop(&stop);
        let cap = s.spawn(|| capture(cap_sock, &stop));
        let rx = s.spawn(|| receiver.run());
        let tx_started = Instant::now();
        let tx = s.spawn(|| sender.run());

        let macs = Macs { router: router_mac(&lab.a), host: host_mac };
        let mut sock = flood::raw_sender(&lab.a, TAP_A).unwrap();
        // The stream is going (and B's address resolved by the router)
        // before the first counters are read.
        std::thread::sleep(Duration::from_millis(500));
        let before = engine.stats();
        let ctl = |sock: &mut PacketSocket, round: u8| {
            send(sock, &ctl4(&macs, round));
            send(sock, &udp6_between(&macs, HOST_A_V6, HOST_B_V6, 64, CTL_PORT, &ctl_payload(6, round)));
        };
        for round in 0..ROUNDS {
            ctl(&mut sock, round);
            for (i, class) in classes.iter().enumerate() {
                send(&mut sock, &(class.frame)(&macs, &bad_payload(i, round)));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        ctl(&mut sock, ROUNDS);
        let injected = tx_started.elapsed();

        let tcp_tx = tx.join().unwrap();
        let tcp_rx = rx.join().unwrap();
        // Everything the engine wrote into B's TAP has been read once the
        // socket stays idle for a receive timeout.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        (cap.join().unwrap(), tcp_rx, tcp_tx, before, injected)
    });
    drop(sinks);

    // The counters, once the engine has published the last drops.
    let mut expected: BTreeMap<&str, u64> = BTreeMap::new();
    for c in &classes {
        *expected.entry(c.reason).or_default() += u64::from(ROUNDS);
    }
    let delta = |s: &serde_json::Value, reason: &str| drops(s, reason).saturating_sub(drops(&before, reason));
    let t0 = Instant::now();
    let after = loop {
        let s = engine.stats();
        if expected.iter().all(|(r, n)| delta(&s, r) >= *n) || t0.elapsed() > Duration::from_secs(2) {
            // One more publication, so that a count that overshoots shows.
            std::thread::sleep(Duration::from_millis(250));
            break engine.stats();
        }
        std::thread::sleep(Duration::from_millis(50));
    };

    let mut problems = Vec::new();
    // 1. Nothing malformed left the router.
    let cap = cap.expect("capture on B's TAP");
    let mut leaked: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (class, round, head) in &cap.bad {
        leaked.entry(*class).or_default().push(format!("round {round}: {}", hex(head)));
    }
    for (class, frames) in &leaked {
        let name = classes.get(*class).map_or("?", |c| c.name);
        problems.push(format!("forwarded to B: {name} ({} of {ROUNDS}; first: {})", frames.len(), frames[0]));
    }
    // The capture works: every control packet arrived, and it lost nothing.
    for family in [4u8, 6] {
        for round in 0..=ROUNDS {
            if !cap.ctl.contains(&(family, round)) {
                problems.push(format!("control IPv{family} packet of round {round} missing at B"));
            }
        }
    }
    if cap.kernel.1 != 0 {
        problems.push(format!("the capture on B lost {} frames (result inconclusive)", cap.kernel.1));
    }
    // 2. Every class counted under its reason, exactly.
    let engine_deltas: BTreeMap<String, u64> = all_drops(&after)
        .into_iter()
        .map(|(r, n)| {
            let d = n.saturating_sub(all_drops(&before).get(&r).copied().unwrap_or(0));
            (r, d)
        })
        .filter(|(_, d)| *d > 0)
        .collect();
    for (reason, n) in &expected {
        let got = delta(&after, reason);
        if got != *n {
            let who: Vec<&str> = classes.iter().filter(|c| c.reason == *reason).map(|c| c.name).collect();
            problems.push(format!("drops.{reason}: +{got}, expected +{n} ({})", who.join(", ")));
        }
    }
    // NAT made connections for the stream and the IPv4 control flow only.
    let conntrack =
        after["tables"].as_array().unwrap().iter().find(|t| t["name"] == "conntrack").map(|t| t["size"].clone());
    if conntrack != Some(serde_json::json!(2)) {
        problems.push(format!(
            "conntrack holds {conntrack:?} connections, expected 2 (the stream and the control flow): malformed packets \
             created connections"
        ));
    }
    // 3. The stream crossed intact, and was running throughout the injection.
    match (&tcp_tx, &tcp_rx) {
        (Ok(tx), Ok(rx)) => {
            if tx.bytes != rx.bytes || tx.hash != rx.hash || rx.first_mismatch.is_some() {
                problems.push(format!("TCP stream not intact: sent {tx:?}, received {rx:?}"));
            }
            if rx.bytes < STREAM_MIN_BYTES {
                problems.push(format!("TCP stream carried only {} bytes", rx.bytes));
            }
            if tx.elapsed <= injected {
                problems.push(format!("TCP stream ended ({:?}) before the injection did ({injected:?})", tx.elapsed));
            }
        }
        (tx, rx) => problems.push(format!("TCP stream failed: sender {tx:?}, receiver {rx:?}")),
    }

    eprintln!(
        "hostile ingress: {} classes x {ROUNDS}; B captured {} frames ({} control); drops by reason during the test: \
         {engine_deltas:?}; TCP {:?} bytes; {:.1} s",
        classes.len(),
        cap.frames,
        cap.ctl.len(),
        tcp_rx.as_ref().map(|r| r.bytes).ok(),
        t_start.elapsed().as_secs_f64()
    );
    let (code, err) = engine.stop();
    if code != Some(0) {
        problems.push(format!("engine exit {code:?}: {err}"));
    }
    assert!(
        problems.is_empty(),
        "hostile ingress through the router + NAT:\n  {}\ndrops by reason during the test: {engine_deltas:?}",
        problems.join("\n  ")
    );
}
