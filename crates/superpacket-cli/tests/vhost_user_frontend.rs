//! TSO and USO superpackets between a virtio-net frontend and the kernel,
//! through `superpacket run`: a vhost-user port bridged with a TAP whose
//! far side is a namespace made by the test. The frontend is
//! [`VirtioUser`] (superpacket's own virtio-user driver, in this process):
//! DPDK 22.11's testpmd has no USO.
//!
//! - frontend to kernel: a USO superpacket reaches a kernel UDP socket, a
//!   TSO superpacket a kernel TCP socket (the frontend answers the
//!   kernel's SYN itself), byte for byte, and the TAP took each as one
//!   write (the engine's TAP `tx_superpackets`, the tap's `rx_packets`);
//! - kernel to frontend: a `UDP_SEGMENT` send and a TCP write arrive at a
//!   frontend that acked `GUEST_USO4`/`GUEST_TSO4` whole, with their GSO
//!   type in the header;
//! - a frontend that did not ack `GUEST_USO4`/`GUEST_USO6` gets the
//!   datagrams one by one (the engine segments before the port);
//! - `bench vhost-tx --quick` (no root needed) runs its three transmit
//!   strategies between this process and a `vhost-peer` process;
//! - two frontends on `examples/live-vhost-user-bridge.toml` (no root
//!   needed) exchange frames of every kind, superpackets whole, with each
//!   transmit strategy; one that leaves has its memory unmapped by the
//!   engine, and the next one on its socket gets traffic again;
//! - across processes (a `vhost-peer` with `--verify`, no root needed):
//!   frames of every kind echoed through a queue of 8 descriptors with
//!   each strategy, past the 16-bit ring index wrap.

mod common;

use common::engine::{Running, counter};
use common::{privileged, quiet_ns};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};
use superpacket::csum::pseudo_header_v4;
use superpacket::packet::virtio::{GSO_NONE, GSO_TCPV4, GSO_UDP_L4};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport, fill_payload};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::{MacAddr, TcpFlags, TcpPacket};
use superpacket_cli::bench::peer_process::{PeerProcess, peer_args, superpacket_binary};
use superpacket_cli::bench::tx_strategies::{DISCARD_PORT, ECHO_PORT, reflect};
use superpacket_engine::device::vhost_user::features as vf;
use superpacket_engine::io::NetNs;
use superpacket_engine::io::tx_policy::TxStrategy;
use superpacket_engine::io::virtio_user::{DescLayout, RxFrame, VirtioUser, VirtioUserConfig};

const FE_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
const FE_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0xf1];
const T: Duration = Duration::from_secs(10);

/// The engine, the namespace and its TAP, the frontend.
struct Lab {
    engine: Running,
    ns: NetNs,
    tap: String,
    tap_mac: MacAddr,
    fe: VirtioUser,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn start(tag: &str, features: u64) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("v.sock");
        let ns = quiet_ns(&format!("spvf{tag}"));
        let tap = format!("spvf{tag}{}", std::process::id() % 100_000);
        let topology = common::vhost_user_and_taps_topology(&sock, &[("tap", &tap, ns.name())]);
        let engine = Running::start(&topology);
        ns.add_addr(&tap, &format!("{KERNEL_IP}/24")).unwrap();
        ns.replace_neighbour(&tap, &FE_IP.to_string(), FE_MAC).unwrap();
        let mac = ns.read_sysfs(&tap, "address").unwrap();
        let tap_mac = parse_mac(mac.trim());
        let fe = VirtioUser::connect(&VirtioUserConfig::new(&sock).with_features(features)).unwrap();
        let mut lab = Lab { engine, ns, tap, tap_mac, fe, _dir: dir };
        lab.wait_features(features);
        lab
    }

    /// Waits until the engine's port serves a frontend with `features`.
    fn wait_features(&mut self, features: u64) {
        let t0 = Instant::now();
        loop {
            let s = self.engine.stats();
            let acked = counter(&s, "vp", "driver.features") & !vf::VHOST_USER_F_PROTOCOL_FEATURES;
            if counter(&s, "vp", "driver.connected") == 1 && acked == features & self.fe.acked_features() {
                return;
            }
            assert!(t0.elapsed() < T, "the engine never saw the frontend: {s:#}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The frontend's flow to the kernel.
    fn flow(&self, transport: Transport, dst_port: u16) -> Flow {
        let mut spec = FlowSpec::new(transport, false, 1);
        spec.src_mac = MacAddr(FE_MAC);
        spec.dst_mac = self.tap_mac;
        spec.addrs = Addrs::V4 { src: FE_IP, dst: KERNEL_IP };
        spec.dst_port = dst_port;
        spec.tcp_timestamps = false;
        Flow::new(spec)
    }

    /// The next frame the frontend receives for which `keep` holds.
    fn recv_where(&mut self, keep: impl Fn(&RxFrame, &[u8]) -> bool) -> (RxFrame, Vec<u8>) {
        recv_where(&mut self.fe, &self.engine, keep)
    }

    /// Frames the kernel's TAP took from the engine.
    fn tap_rx(&self) -> u64 {
        self.ns.link_statistic(&self.tap, "rx_packets").unwrap()
    }

    fn udp_socket(&self, port: u16) -> UdpSocket {
        self.ns
            .enter_scoped(|| {
                let s = UdpSocket::bind((KERNEL_IP, port)).unwrap();
                s.set_read_timeout(Some(T)).unwrap();
                s
            })
            .unwrap()
    }
}

/// The next frame `fe` receives for which `keep` holds (others are
/// skipped), with its bytes.
fn recv_where(fe: &mut VirtioUser, engine: &Running, keep: impl Fn(&RxFrame, &[u8]) -> bool) -> (RxFrame, Vec<u8>) {
    let mut buf = vec![0u8; 70_000];
    let t0 = Instant::now();
    loop {
        if let Some(f) = fe.recv(&mut buf).unwrap() {
            if keep(&f, &buf[..f.len]) {
                return (f, buf[..f.len].to_vec());
            }
            continue;
        }
        assert!(t0.elapsed() < T, "the frontend received nothing wanted: {:#}", engine.stats());
        fe.wait_rx(Duration::from_millis(20)).unwrap();
    }
}

/// The engine's counters once `ready` holds (they are published every
/// 100 ms), or after 10 s.
fn wait_stats(engine: &Running, ready: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let s = engine.stats();
        if ready(&s) || t0.elapsed() > T {
            return s;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn parse_mac(s: &str) -> MacAddr {
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(p, 16).unwrap();
    }
    MacAddr(m)
}

/// Offsets of an untagged IPv4 frame: (L4 offset, payload offset).
fn l4_and_payload(frame: &[u8]) -> Option<(usize, usize)> {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let l4 = 14 + usize::from(frame[14] & 0x0f) * 4;
    let payload = match frame[23] {
        17 => l4 + 8,
        6 => l4 + usize::from(frame.get(l4 + 12)? >> 4) * 4,
        _ => return None,
    };
    (payload <= frame.len()).then_some((l4, payload))
}

/// Whether `frame` is IPv4 `protocol` (6 or 17) to port `port`.
fn to_port(frame: &[u8], protocol: u8, port: u16) -> bool {
    l4_and_payload(frame).is_some_and(|(l4, _)| frame[23] == protocol && frame[l4 + 2..l4 + 4] == port.to_be_bytes())
}

/// Reads `n` bytes from `s`.
fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    s.read_exact(&mut v).unwrap();
    v
}

/// The kernel connects to the frontend's port (`flow`'s source port); the
/// frontend answers the SYN from `flow` (no options: no window scaling,
/// the kernel's MSS toward the frontend is 536). Returns the kernel's
/// socket; `flow` gets the kernel's port and the sequence numbers.
fn kernel_connects(lab: &mut Lab, flow: &mut Flow) -> TcpStream {
    let port = flow.spec.src_port;
    let Lab { ns, fe, engine, .. } = lab;
    let ns = &*ns;
    std::thread::scope(|scope| {
        let client = scope.spawn(move || {
            ns.enter_scoped(|| {
                let s = TcpStream::connect_timeout(&(FE_IP, port).into(), T).unwrap();
                s.set_read_timeout(Some(T)).unwrap();
                s
            })
            .unwrap()
        });
        let (_, syn) = recv_where(fe, engine, |_, b| to_port(b, 6, port));
        let (l4, _) = l4_and_payload(&syn).unwrap();
        assert_eq!(syn[l4 + 13] & 0x12, 0x02, "a SYN");
        flow.spec.dst_port = u16::from_be_bytes([syn[l4], syn[l4 + 1]]);
        let isn = u32::from_be_bytes(syn[l4 + 4..l4 + 8].try_into().unwrap());
        flow.ack = isn.wrapping_add(1);
        let mut synack = flow.frame(0, TcpFlags::SYN).unwrap();
        // The generator's window (502) would hold the kernel to one short
        // segment at a time; without window scaling, 65535 is the most.
        let pseudo = pseudo_header_v4(FE_IP.octets(), KERNEL_IP.octets(), 6, (synack.len() - l4) as u16);
        let mut tcp = TcpPacket::new_unchecked(&mut synack[l4..]);
        tcp.set_window(65_535);
        tcp.fill_checksum(pseudo);
        flow.seq = flow.seq.wrapping_add(1);
        fe.send(&Default::default(), &[&synack], DescLayout::Direct, false).unwrap();
        client.join().unwrap()
    })
}

#[test]
fn uso_and_tso_superpackets_from_a_frontend_reach_the_kernel_whole() {
    if !privileged("uso_and_tso_superpackets_from_a_frontend_reach_the_kernel_whole") {
        return;
    }
    let mut lab = Lab::start("a", VirtioUserConfig::ALL_FEATURES);
    let udp = lab.udp_socket(6001);
    // USO: 12 datagrams of 1000 bytes and one of 500, in one superpacket.
    let mut flow = lab.flow(Transport::Udp, 6001);
    let sp = flow.superpacket(12_500, 1000, TcpFlags::PSH).unwrap();
    let bytes = sp.to_vec();
    let (_, payload_at) = l4_and_payload(&bytes).unwrap();
    let before = lab.tap_rx();
    lab.fe.send_meta(&sp.meta, &bytes, DescLayout::Indirect, false).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 2000];
    while got.len() < 12_500 {
        let (n, from) = udp.recv_from(&mut buf).expect("a datagram of the USO superpacket");
        assert_eq!(from, (FE_IP, flow.spec.src_port).into());
        assert_eq!(n, if got.len() < 12_000 { 1000 } else { 500 });
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, bytes[payload_at..], "the datagrams are the superpacket's payload");
    // One write into the TAP, not 13.
    assert_eq!(lab.tap_rx() - before, 1, "the TAP took the superpacket whole");

    // TSO: the kernel connects, the frontend sends 50 000 bytes in two
    // superpackets of 1448-byte segments (within the kernel's window).
    let mut flow = lab.flow(Transport::Tcp, 0);
    let mut stream = kernel_connects(&mut lab, &mut flow);
    let before = lab.tap_rx();
    let mut sent = Vec::new();
    for (len, layout) in [(30_000, DescLayout::Direct), (20_000, DescLayout::Indirect)] {
        let sp = flow.superpacket(len, 1448, TcpFlags::PSH).unwrap();
        let bytes = sp.to_vec();
        let (_, at) = l4_and_payload(&bytes).unwrap();
        sent.extend_from_slice(&bytes[at..]);
        lab.fe.send_meta(&sp.meta, &bytes, layout, false).unwrap();
    }
    assert_eq!(read_exactly(&mut stream, sent.len()), sent, "the kernel's stream is the superpackets' payload");
    assert_eq!(lab.tap_rx() - before, 2, "the TAP took each TSO superpacket whole");
    let s = wait_stats(&lab.engine, |s| counter(s, "tap", "tx_superpackets") >= 3);
    assert_eq!(counter(&s, "tap", "tx_superpackets"), 3, "{s:#}");
    assert_eq!(counter(&s, "tap", "segments_produced"), 0, "{s:#}");
    assert_eq!(counter(&s, "vp", "driver.rx_superpackets"), 3, "{s:#}");
    assert_eq!(counter(&s, "vp", "driver.queue_stopped"), 0, "{s:#}");
}

#[test]
fn kernel_uso_and_tso_superpackets_reach_a_frontend_that_takes_them_whole() {
    if !privileged("kernel_uso_and_tso_superpackets_reach_a_frontend_that_takes_them_whole") {
        return;
    }
    let mut lab = Lab::start("b", VirtioUserConfig::ALL_FEATURES);
    // UDP_SEGMENT: 8000 bytes in 1000-byte datagrams, one send.
    let udp = lab.udp_socket(6002);
    superpacket_engine::io::sys::set_udp_segment(udp.as_fd(), 1000).unwrap();
    let mut data = vec![0u8; 8000];
    fill_payload(&mut data, 7);
    udp.send_to(&data, (FE_IP, 6003)).unwrap();
    let (f, frame) = lab.recv_where(|_, b| to_port(b, 17, 6003));
    assert_eq!(f.hdr.gso_type, GSO_UDP_L4, "{f:?}");
    assert_eq!(f.hdr.gso_size, 1000);
    let (_, at) = l4_and_payload(&frame).unwrap();
    assert_eq!(frame[at..], data[..], "the superpacket's payload is what the kernel sent");
    f.meta(&frame).expect("the header passes the kernel's validation");

    // TCP: one 4000-byte write, 8 segments at the kernel's MSS toward the
    // frontend (536), within its initial window; the kernel cuts the write
    // into TSO superpackets (their size follows its pacing rate, small at
    // the start of a connection), each of which must arrive whole.
    let mut flow = lab.flow(Transport::Tcp, 0);
    let port = flow.spec.src_port;
    let mut stream = kernel_connects(&mut lab, &mut flow);
    let mut data = vec![0u8; 4000];
    fill_payload(&mut data, 11);
    stream.write_all(&data).unwrap();
    let mut got = Vec::new();
    let (mut frames, mut superpackets) = (0, 0);
    while got.len() < data.len() {
        let (f, frame) =
            lab.recv_where(|_, b| to_port(b, 6, port) && l4_and_payload(b).is_some_and(|(_, at)| at < b.len()));
        if f.hdr.gso_type != GSO_NONE {
            assert_eq!(f.hdr.gso_type, GSO_TCPV4, "{f:?}");
            assert_eq!(f.hdr.gso_size, 536);
            superpackets += 1;
        }
        f.meta(&frame).expect("the header passes the kernel's validation");
        let (_, at) = l4_and_payload(&frame).unwrap();
        got.extend_from_slice(&frame[at..]);
        frames += 1;
    }
    assert_eq!(got, data, "the frontend's bytes are the kernel's stream");
    assert!(superpackets >= 1 && frames < 8, "{frames} frames, {superpackets} superpackets for 8 segments");
    let s = wait_stats(&lab.engine, |s| counter(s, "vp", "driver.tx_superpackets") > superpackets);
    assert_eq!(counter(&s, "vp", "driver.tx_superpackets"), 1 + superpackets, "{s:#}");
    assert_eq!(counter(&s, "tap", "rx_superpackets"), 1 + superpackets, "{s:#}");
    assert_eq!(counter(&s, "vp", "segments_produced"), 0, "{s:#}");
    assert!(lab.fe.stats().rx_superpackets >= 2);
}

#[test]
fn a_frontend_without_guest_uso_gets_the_kernels_datagrams_one_by_one() {
    if !privileged("a_frontend_without_guest_uso_gets_the_kernels_datagrams_one_by_one") {
        return;
    }
    let features = VirtioUserConfig::ALL_FEATURES & !(vf::GUEST_USO4 | vf::GUEST_USO6);
    let mut lab = Lab::start("c", features);
    assert_eq!(lab.fe.acked_features() & (vf::GUEST_USO4 | vf::GUEST_USO6), 0);
    let udp = lab.udp_socket(6004);
    superpacket_engine::io::sys::set_udp_segment(udp.as_fd(), 1000).unwrap();
    let mut data = vec![0u8; 7500];
    fill_payload(&mut data, 3);
    udp.send_to(&data, (FE_IP, 6005)).unwrap();
    let mut got = Vec::new();
    while got.len() < data.len() {
        let (f, frame) = lab.recv_where(|_, b| to_port(b, 17, 6005));
        assert_eq!(f.hdr.gso_type, GSO_NONE, "{f:?}");
        f.meta(&frame).expect("the header passes the kernel's validation");
        let (_, at) = l4_and_payload(&frame).unwrap();
        assert_eq!(frame.len() - at, if got.len() < 7000 { 1000 } else { 500 });
        got.extend_from_slice(&frame[at..]);
    }
    assert_eq!(got, data);
    let s = wait_stats(&lab.engine, |s| counter(s, "vp", "driver.tx_frames") >= 8);
    assert_eq!(counter(&s, "tap", "rx_superpackets"), 1, "the TAP read one superpacket: {s:#}");
    assert_eq!(counter(&s, "vp", "driver.tx_superpackets"), 0, "{s:#}");
    assert!(counter(&s, "vp", "segments_produced") >= 8, "{s:#}");
}

/// `bench vhost-tx --quick` end to end: the peer process (the engine's
/// vhost-user port and the echo responder) answered every request and
/// counted every discard, and each strategy sent the forms it stands for.
/// No rate is checked here (speed claims come from `superpacket bench`).
#[test]
fn bench_vhost_tx_runs_the_three_strategies_over_a_real_vhost_user_link() {
    let r = superpacket_cli::bench::vhost_tx::run_with_progress(
        &superpacket_cli::bench::tx_strategies::TxBenchOptions { quick: true },
        &mut |_, _, _| {},
    );
    let text = superpacket_cli::bench::vhost_tx::render_human(&r);
    assert_eq!(r.get("integrity_ok"), Some(1.0), "{text}");
    for (figure, share) in [
        ("swcsum_direct_rr_direct_share", 1.0),
        ("offload_indirect_rr_indirect_share", 1.0),
        ("direct_nocsum_rr_direct_share", 1.0),
        ("swcsum_direct_lone_direct_share", 1.0),
        // The last packet of each batch of 32 is lone.
        ("swcsum_direct_batch_indirect_share", 31.0 / 32.0),
    ] {
        let v = r.get(figure).unwrap_or(f64::NAN);
        assert!((v - share).abs() < 1e-9, "{figure} = {v}, expected {share}:\n{text}");
    }
    for name in ["rr_tps_swcsum_direct", "stream_pps_offload_indirect", "stream_tso_gbps_direct_nocsum"] {
        assert!(r.get(name).is_some_and(|v| v > 0.0), "{name}:\n{text}");
    }
}

const MAC_A: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0b];

/// Frames from `src` to `dst` of every kind, with partial checksums: UDP
/// and TCP over IPv4 and IPv6 with 8 to 1400 bytes of payload, and every
/// tenth a 30 KB TSO or USO superpacket in segments of a 1500-byte MTU.
fn traffic(src: [u8; 6], dst: [u8; 6], n: usize) -> Vec<Packet> {
    let mut flows: Vec<(Flow, Transport)> =
        [(Transport::Udp, false), (Transport::Tcp, false), (Transport::Udp, true), (Transport::Tcp, true)]
            .into_iter()
            .enumerate()
            .map(|(i, (t, v6))| {
                let mut spec = FlowSpec::new(t, v6, 40 + i as u32);
                spec.src_mac = MacAddr(src);
                spec.dst_mac = MacAddr(dst);
                (Flow::new(spec), t)
            })
            .collect();
    (0..n)
        .map(|k| {
            let (f, t) = &mut flows[k % 4];
            if k % 10 == 7 {
                // TCP carries 12 bytes of timestamps.
                let gso = match (*t, k % 4 >= 2) {
                    (Transport::Tcp, false) => 1448,
                    (Transport::Tcp, true) => 1428,
                    _ => 1400,
                };
                f.superpacket(30_000, gso, TcpFlags::empty()).unwrap()
            } else {
                f.superpacket([8usize, 64, 500, 1000, 1400][k % 5], 9000, TcpFlags::empty()).unwrap()
            }
        })
        .collect()
}

/// Frame `sent` (its offloads `meta`) as its receiver must see it: the
/// checksum completed unless it arrived partial (`got`).
fn as_received(sent: &[u8], meta: &OffloadMeta, got: &OffloadMeta) -> Vec<u8> {
    let mut b = sent.to_vec();
    if let (ChecksumState::Partial { start, offset }, false) =
        (meta.csum, matches!(got.csum, ChecksumState::Partial { .. }))
    {
        superpacket::csum::complete_partial(&mut b, start as usize, offset as usize, offset == 6).unwrap();
    }
    b
}

/// Sends `frames` from `from` with `strategy` in batches of `batch` (`more`
/// on all but the last of a batch) and checks that `to` receives each one
/// byte for byte, superpackets whole, every checksum valid.
fn exchange(
    engine: &Running,
    from: &mut VirtioUser,
    to: &mut VirtioUser,
    strategy: TxStrategy,
    frames: &[Packet],
    batch: usize,
) {
    let mut problems = Vec::new();
    for chunk in frames.chunks(batch) {
        for (j, p) in chunk.iter().enumerate() {
            let mut frame = p.to_vec();
            from.send_with(strategy, &mut frame, &p.meta, j + 1 < chunk.len()).unwrap();
        }
        for p in chunk {
            let (f, got) = recv_where(to, engine, |_, _| true);
            let meta = f.meta(&got).unwrap();
            assert!(
                got == as_received(&p.to_vec(), &p.meta, &meta),
                "{strategy:?}: {:?} arrived as {meta:?}, changed",
                p.meta
            );
            assert_eq!(meta.is_gso(), p.meta.is_gso(), "{strategy:?}: {:?} arrived as {meta:?}", p.meta);
            problems.clear();
            validate_frame(&got, Medium::Ethernet, &meta, false, &mut problems);
            assert!(problems.is_empty(), "{strategy:?} {meta:?}: {problems:?}");
        }
    }
}

/// Mappings of a [`VirtioUser`]'s guest memory (its memfd) in process `pid`.
fn frontend_memory_mappings(pid: u32) -> usize {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines().filter(|l| l.contains("memfd:superpacket-virtio-user")).count()
}

/// Waits until process `pid` maps exactly `want` frontend memories' worth
/// of mappings (the port unmaps in its control thread).
fn wait_mappings(pid: u32, ok: impl Fn(usize) -> bool, what: &str) -> usize {
    let t0 = Instant::now();
    loop {
        let n = frontend_memory_mappings(pid);
        if ok(n) {
            return n;
        }
        assert!(t0.elapsed() < T, "{what}: the engine maps {n} frontend memory regions");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `examples/live-vhost-user-bridge.toml` as shipped (its sockets moved into
/// the test's directory) with two frontends: frames of every kind cross
/// the engine both ways with each transmit strategy, one at a time and in
/// batches, superpackets whole and every frame intact; a frontend that
/// leaves is detached and its memory unmapped (a killed process closes the
/// same socket and descriptors), and the next one on its socket gets
/// traffic again.
#[test]
fn two_frontends_exchange_every_kind_of_frame_through_the_vhost_user_bridge_example() {
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/live-vhost-user-bridge.toml"),
    )
    .unwrap();
    let topology = example.replace("/run/superpacket/", &format!("{}/", dir.path().display()));
    assert_ne!(topology, example, "the example's socket paths moved");
    let engine = Running::start(&topology);
    let pid = engine.pid().unwrap();
    assert_eq!(frontend_memory_mappings(pid), 0, "no frontend, no guest memory");
    let connect = |sock: &str| VirtioUser::connect(&VirtioUserConfig::new(dir.path().join(sock))).unwrap();
    let attached = |port: &str, attaches: u64| {
        let s = wait_stats(&engine, |s| {
            counter(s, port, "driver.connected") == 1 && counter(s, port, "driver.attaches") == attaches
        });
        assert_eq!(counter(&s, port, "driver.connected"), 1, "{port}: {s:#}");
    };
    let mut a = connect("vu-a.sock");
    let mut b = connect("vu-b.sock");
    attached("vua", 1);
    attached("vub", 1);
    let both = wait_mappings(pid, |n| n > 0, "two frontends attached");
    for s in TxStrategy::ALL {
        exchange(&engine, &mut a, &mut b, s, &traffic(MAC_A, MAC_B, 60), 1);
        exchange(&engine, &mut b, &mut a, s, &traffic(MAC_B, MAC_A, 60), 5);
    }
    // Both forms went out, and superpackets crossed whole both ways.
    for (name, fe) in [("a", &a), ("b", &b)] {
        let st = fe.stats();
        assert!(st.tx_direct > 0 && st.tx_indirect > 0 && st.rx_superpackets >= 18, "{name}: {st:?}");
    }

    drop(a);
    let s = wait_stats(&engine, |s| counter(s, "vua", "driver.detaches") == 1);
    assert_eq!(counter(&s, "vua", "driver.connected"), 0, "{s:#}");
    assert_eq!(counter(&s, "vua", "driver.protocol_errors"), 0, "{s:#}");
    wait_mappings(pid, |n| n < both, "the frontend of vua left");
    let mut a = connect("vu-a.sock");
    attached("vua", 2);
    exchange(&engine, &mut a, &mut b, TxStrategy::default(), &traffic(MAC_A, MAC_B, 30), 3);
    drop((a, b));
    wait_stats(&engine, |s| counter(s, "vua", "driver.connected") == 0 && counter(s, "vub", "driver.connected") == 0);
    wait_mappings(pid, |n| n == 0, "both frontends left");
    let (code, err) = engine.stop();
    assert_eq!(code, Some(0), "{err}");
}

/// Echo requests of every kind: UDP and TCP, IPv4 and IPv6, 0-2 VLAN tags,
/// 1 to 1472 bytes of payload; every 97th is a TSO or USO superpacket to
/// the discard port (the peer echoes frames it holds whole in one buffer).
/// All with partial checksums.
fn requests(n: usize) -> Vec<Packet> {
    let mut flows: Vec<(Flow, Transport)> = Vec::new();
    for t in [Transport::Udp, Transport::Tcp] {
        for v6 in [false, true] {
            for tags in [&[][..], &[(0x8100, 5)][..], &[(0x88a8, 20), (0x8100, 5)][..]] {
                let mut spec = FlowSpec::new(t, v6, flows.len() as u32 + 1).with_vlans(tags).unwrap();
                spec.dst_port = ECHO_PORT;
                flows.push((Flow::new(spec), t));
            }
        }
    }
    let sizes = [1usize, 18, 64, 200, 777, 1400, 1472];
    (0..n)
        .map(|k| {
            let (f, t) = &mut flows[k % 12];
            if k % 97 == 13 {
                let mut spec = FlowSpec::new(*t, k % 2 == 1, 100 + k as u32);
                spec.dst_port = DISCARD_PORT;
                let gso = if *t == Transport::Tcp { 1448 } else { 1400 };
                Flow::new(spec).superpacket(20_000 + k % 5000, gso, TcpFlags::empty()).unwrap()
            } else {
                f.superpacket(sizes[k % sizes.len()], 9000, TcpFlags::empty()).unwrap()
            }
        })
        .collect()
}

/// Sends `reqs` with `strategy` in pipelined batches of 1..=`max_batch`
/// (`more` on all but the last of a batch) and checks every reply: the
/// request reflected (the peer hands the checksum back partial), intact
/// and checksum-valid. Returns the requests echoed.
fn echo_all(fe: &mut VirtioUser, strategy: TxStrategy, reqs: &[Packet], max_batch: usize) -> usize {
    let mut buf = vec![0u8; 70_000];
    let mut problems = Vec::new();
    let (mut at, mut batches, mut echoed) = (0, 0, 0);
    while at < reqs.len() {
        let k = (1 + (at * 7 + batches) % max_batch).min(reqs.len() - at);
        for (j, r) in reqs[at..at + k].iter().enumerate() {
            let mut frame = r.to_vec();
            fe.send_with(strategy, &mut frame, &r.meta, j + 1 < k).unwrap();
        }
        batches += 1;
        for r in reqs[at..at + k].iter().filter(|r| !r.meta.is_gso()) {
            let t0 = Instant::now();
            let f = loop {
                if let Some(f) = fe.recv(&mut buf).unwrap() {
                    break f;
                }
                assert!(t0.elapsed() < T, "no reply to request {at} ({:?})", r.meta);
                fe.wait_rx(Duration::from_millis(20)).unwrap();
            };
            let got = &buf[..f.len];
            let meta = f.meta(got).unwrap();
            let mut want = r.to_vec();
            let reply = reflect(&mut want, &r.meta).expect("a TCP/UDP request");
            assert!(matches!(reply.csum, ChecksumState::Partial { .. }));
            assert!(got == &as_received(&want, &reply, &meta)[..], "reply to request {at}");
            problems.clear();
            validate_frame(got, Medium::Ethernet, &meta, false, &mut problems);
            assert!(problems.is_empty(), "{meta:?}: {problems:?}");
            echoed += 1;
        }
        at += k;
    }
    echoed
}

/// A frontend on a queue of 8 descriptors and a `vhost-peer --verify`
/// process (the engine's vhost-user port): requests of every kind with
/// each transmit strategy, then 70000 small ones (past the 16-bit index
/// wrap of both queues); every reply intact, every frame the peer got
/// valid and counted.
#[test]
fn frames_of_every_kind_echo_across_processes_past_the_ring_index_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("echo.sock");
    let args = peer_args(Duration::from_micros(100), true, None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let peer = PeerProcess::spawn_command(&superpacket_binary().unwrap(), &["vhost-peer"], &sock, &args).unwrap();
    let mut fe = VirtioUser::connect(&VirtioUserConfig { queue_size: 8, ..VirtioUserConfig::new(&sock) }).unwrap();
    let want = vf::CSUM | vf::GUEST_CSUM | vf::INDIRECT_DESC | vf::EVENT_IDX;
    assert_eq!(fe.acked_features() & want, want, "{:#x}", fe.acked_features());
    let reqs = requests(600);
    let (mut sent, mut echoed, mut superpackets) = (0, 0, 0);
    for s in TxStrategy::ALL {
        echoed += echo_all(&mut fe, s, &reqs, 8);
        sent += reqs.len();
        superpackets += reqs.iter().filter(|r| r.meta.is_gso()).count();
    }
    let small: Vec<Packet> = requests(12 * 7).into_iter().filter(|r| r.len() < 200 && !r.meta.is_gso()).collect();
    let mut many = Vec::new();
    while many.len() < 70_000 {
        many.extend(small.iter().cloned());
    }
    echoed += echo_all(&mut fe, TxStrategy::SwCsumDirect, &many, 8);
    sent += many.len();
    let st = fe.stats();
    assert!(st.tx_frames as usize == sent && st.tx_frames > 65_536, "{st:?}");
    assert!(st.rx_frames as usize == echoed && st.tx_direct > 0 && st.tx_indirect > 0, "{st:?}");
    drop(fe);
    let r = peer.finish().unwrap();
    assert_eq!((r.frames as usize, r.echoed as usize, r.superpackets as usize), (sent, echoed, superpackets), "{r:?}");
    assert_eq!((r.discarded as usize, r.bad_frames), (superpackets, 0), "{r:?}");
    assert!(r.rx_drops.is_empty() && r.rx_csum_partial > 0, "{r:?}");
}
