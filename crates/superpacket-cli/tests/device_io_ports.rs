//! Device-graph ports backed by real kernel I/O (`superpacket_engine::device::port_io`):
//! a TAP port and an AF_PACKET port, against the running kernel.
//!
//! Every test runs as root in namespaces it creates (`NetNs`, deleted on drop,
//! also when an assertion fails) with IPv6 off, so nothing but the test's own
//! frames moves; the host's interfaces and routes are never touched. Without
//! privileges the tests fail with the reason, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1` (then they print SKIPPED and pass).
//!
//! What the kernel did is asserted and recorded in each test's doc comment.

mod common;

use common::{privileged, quiet_ns};

use std::time::{Duration, Instant};
use superpacket::packet::virtio::{F_NEEDS_CSUM, GSO_NONE, GSO_TCPV4, ImportOptions, VirtioNetHdr};
use superpacket::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, Problem, validate_frame};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::port_io::{IoEndpoint, IoPortStats, PACKET_SOCKET_FEATURES, Received};
use superpacket_engine::device::vlan::VlanProto;
use superpacket_engine::device::{
    DeviceId, Graph, IoPortDriver, NetdevFeatures, PacketSocketDriver, StackMode, TapDriver, Topology,
};
use superpacket_engine::io::{IoError, NetNs, PacketSocket, PacketSocketConfig, RecvInfo, VethPair};

const PREFIX: &str = "sp-ioport";
const MSS: u16 = 1448;
const SEGS: usize = 20;
/// Frame bytes before the payload (Ethernet 14, IPv4 20, TCP with timestamps 32).
const HLEN: usize = 66;
/// Source MAC of [`FlowSpec::new`]: captured frames without it are strays.
const FLOW_SRC_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 1];

fn capture_cfg() -> PacketSocketConfig {
    PacketSocketConfig {
        incoming_only: true,
        auxdata: true,
        recv_timeout: Some(Duration::from_millis(300)),
        rcvbuf: Some(8 << 20),
        ..PacketSocketConfig::default()
    }
}

/// Captured frames of the test flow (by source MAC) until `want` arrived or
/// nothing came for the receive timeout.
fn capture(sock: &mut PacketSocket, want: usize) -> Vec<(RecvInfo, Vec<u8>)> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut out = Vec::new();
    while out.len() < want {
        match sock.recv_info(&mut buf) {
            Ok(info) => {
                if buf[6..12] == FLOW_SRC_MAC {
                    out.push((info, buf[..info.len].to_vec()));
                }
            }
            Err(e) if e.is_would_block() => break,
            Err(e) => panic!("capture on {}: {e}", sock.ifname()),
        }
    }
    // Anything more of the flow would be a surprise: look briefly.
    if let Ok(Some(info)) = sock.try_recv_info(&mut buf)
        && buf[6..12] == FLOW_SRC_MAC
    {
        out.push((info, buf[..info.len].to_vec()));
    }
    out
}

fn tcp_flow() -> Flow {
    Flow::new(FlowSpec::new(Transport::Tcp, false, 0))
}

/// A TCP/IPv4 superpacket of `SEGS` × `MSS`: 66 bytes of headers (TCP with
/// timestamps), a 29026-byte frame untagged, segments of 1514 bytes (1500 L3).
fn superpacket(flow: &mut Flow) -> Packet {
    flow.superpacket(SEGS * MSS as usize, MSS, TcpFlags::PSH).expect("superpacket")
}

/// Problems of a captured frame, checked with the metadata its virtio header gives.
fn problems(hdr: &VirtioNetHdr, frame: &[u8]) -> Vec<Problem> {
    let meta = hdr.to_meta(frame, &ImportOptions::default()).expect("kernel header imports");
    let mut out = Vec::new();
    validate_frame(frame, Medium::Ethernet, &meta, false, &mut out);
    out
}

/// A graph with a TAP port `tap` (TAP `sptap0` in `ns`) and 802.1Q VLAN 10 on it.
fn tap_graph(ns: &NetNs) -> (Graph, DeviceId, DeviceId) {
    let drv = TapDriver::open("sptap0", Some(ns)).expect("open TAP port");
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("tap", Box::new(drv)).unwrap();
    let vlan = g.add_vlan("tap.10", port, VlanProto::Dot1Q, 10).unwrap();
    (g, port, vlan)
}

fn tap_stats(g: &mut Graph, port: DeviceId) -> IoPortStats {
    g.driver_mut::<TapDriver>(port).expect("a TAP driver").stats().clone()
}

/// TAP port, VLAN 10 on it, TSO superpacket (20 × 1448) sent through the
/// VLAN device. The kernel accepted TUN_F CSUM|TSO4|TSO6|TSO_ECN|USO4|USO6
/// (port features HW_CSUM, SG, TSO, TSO6, TSO_ECN, GSO_UDP_L4), the graph
/// handed the tagged superpacket to the driver whole (one 29030-byte write),
/// and AF_PACKET on the TAP inside the namespace received **one** skb:
/// gso_type TCPV4, gso_size 1448, NEEDS_CSUM with csum_start 34 (L4 offset
/// of the untagged frame), 29026 bytes: the kernel moved the 802.1Q tag into
/// skb metadata (`skb_vlan_untag`), reported by PACKET_AUXDATA as TCI 10,
/// TPID 0x8100. The transmit path then makes no heap allocation per packet.
#[test]
fn tap_port_superpacket_through_vlan_arrives_whole() {
    if !privileged("tap_port_superpacket_through_vlan_arrives_whole") {
        return;
    }
    let ns = quiet_ns(PREFIX);
    let (mut g, port, vlan) = tap_graph(&ns);
    let f = g.device(port).feat.features;
    for want in [NetdevFeatures::HW_CSUM, NetdevFeatures::SG, NetdevFeatures::TSO, NetdevFeatures::TSO6] {
        assert!(f.contains(want), "TAP port features {f:?} lack {want:?}");
    }
    let mut sock = PacketSocket::open_in(&ns, "sptap0", &capture_cfg()).expect("capture socket");
    let mut flow = tcp_flow();
    let pkt = superpacket(&mut flow);
    let untagged_len = pkt.len();
    g.transmit(vlan, pkt);

    let c = g.counters(port);
    assert_eq!(c.tx_passthrough, 1, "{c:?}");
    assert_eq!(c.dropped(), 0, "{c:?}");
    let st = tap_stats(&mut g, port);
    assert_eq!((st.tx_frames, st.tx_superpackets, st.tx_bytes), (1, 1, untagged_len as u64 + 4), "{st:?}");

    let got = capture(&mut sock, 1);
    assert_eq!(got.len(), 1, "expected the superpacket whole, got {} frames", got.len());
    let (info, frame) = &got[0];
    assert_eq!(info.hdr.gso_type, GSO_TCPV4, "{info:?}");
    assert_eq!(info.hdr.gso_size, MSS, "{info:?}");
    assert_eq!(info.hdr.flags & F_NEEDS_CSUM, F_NEEDS_CSUM, "{info:?}");
    let vlan_tag = info.vlan.expect("802.1Q tag reported by PACKET_AUXDATA");
    assert_eq!((vlan_tag.tci & 0x0fff, vlan_tag.tpid), (10, 0x8100), "{info:?}");
    assert_eq!(frame.len(), untagged_len, "tag stripped into metadata");
    assert_eq!(info.hdr.csum_start, 34, "{info:?}");
    assert!(problems(&info.hdr, frame).is_empty(), "{:?}", problems(&info.hdr, frame));
    eprintln!("tap whole: {info:?}, {} bytes", frame.len());

    // No heap allocation per packet on the transmit path after warm-up.
    let pkts: Vec<Packet> = (0..8).map(|_| superpacket(&mut flow)).collect();
    let mut pkts = pkts.into_iter();
    g.transmit(vlan, pkts.next().unwrap());
    let rest: Vec<Packet> = pkts.collect();
    let mut rest = rest.into_iter();
    let info = allocation_counter::measure(|| {
        for p in rest.by_ref() {
            g.transmit(vlan, p);
        }
    });
    // Packets are freed inside the measured region; only allocations count.
    assert_eq!(info.count_total, 0, "allocations on TAP transmit: {info:?}");
    assert_eq!(g.counters(port).dropped(), 0, "{:?}", g.counters(port));
    drop(g);
}

/// Same TAP + VLAN, the port's TSO turned off in the graph: the graph
/// segmented in software and the driver wrote 20 frames of 1518 bytes
/// (scatter-gather, with NEEDS_CSUM: the port keeps HW_CSUM). AF_PACKET in
/// the namespace got 20 skbs of 1514 bytes (tag in auxdata), gso_type NONE,
/// NEEDS_CSUM with the pseudo-header sum in the field (valid partial
/// checksums). With the port's checksum offload off as well the graph
/// completed every checksum in software: flags 0, every IP and TCP checksum
/// verifies.
#[test]
fn tap_port_without_tso_sends_valid_segments() {
    if !privileged("tap_port_without_tso_sends_valid_segments") {
        return;
    }
    let ns = quiet_ns(PREFIX);
    let (mut g, port, vlan) = tap_graph(&ns);
    let mut sock = PacketSocket::open_in(&ns, "sptap0", &capture_cfg()).expect("capture socket");
    let mut flow = tcp_flow();

    for (n, (case, off, partial)) in [
        ("no TSO", NetdevFeatures::TSO, true),
        ("no TSO, no checksum offload", NetdevFeatures::TSO.union(NetdevFeatures::HW_CSUM), false),
    ]
    .into_iter()
    .enumerate()
    {
        g.set_features(port, NetdevFeatures::EMPTY, off);
        assert!(!g.device(port).feat.features.contains(NetdevFeatures::TSO), "{case}");
        g.reset_counters();
        g.transmit(vlan, superpacket(&mut flow));
        let c = g.counters(port).clone();
        assert_eq!((c.tx_segmented, c.segments_produced), (1, SEGS as u64), "{case}: {c:?}");
        assert_eq!(c.dropped(), 0, "{case}: {c:?}");
        assert_eq!(c.checksums_completed, if partial { 0 } else { SEGS as u64 }, "{case}: {c:?}");
        let st = tap_stats(&mut g, port);
        assert_eq!((st.tx_frames, st.tx_superpackets), (((n + 1) * SEGS) as u64, 0), "{case}: {st:?}");

        let got = capture(&mut sock, SEGS);
        assert_eq!(got.len(), SEGS, "{case}: segments received");
        for (i, (info, frame)) in got.iter().enumerate() {
            assert_eq!(info.hdr.gso_type, GSO_NONE, "{case} #{i}: {info:?}");
            assert_eq!(frame.len(), HLEN + MSS as usize, "{case} #{i}: MTU-sized");
            assert_eq!(info.vlan.map(|v| v.tci & 0xfff), Some(10), "{case} #{i}");
            assert_eq!(info.hdr.flags & F_NEEDS_CSUM != 0, partial, "{case} #{i}: {info:?}");
            let p = problems(&info.hdr, frame);
            assert!(p.is_empty(), "{case} #{i}: {p:?}");
        }
        eprintln!("tap {case}: {} segments, first {:?}", got.len(), got[0].0);
        g.set_features(port, off, NetdevFeatures::EMPTY);
    }
    drop(g);
}

/// Receive direction: inside the namespace an AF_PACKET socket sends a
/// tagged (VLAN 10) TCP superpacket on the TAP with a GSO virtio header.
/// The TAP has TSO (TUN_F_TSO4 accepted), so `tun_net_xmit` queued the skb
/// whole; the driver read it (gso_type TCPV4, NEEDS_CSUM, csum_start 38 in
/// the tagged frame), imported the header with the kernel's rules, and
/// `Graph::poll` delivered it on `tap.10` with the tag popped: 29026 bytes,
/// gso TCPV4|DODGY, gso_size 1448, 20 segments, partial checksum at 34/16.
/// (A header with gso_size 0 never reaches the driver: the kernel refuses
/// it at `sendmsg` with EINVAL, asserted too.)
#[test]
fn tap_port_receives_superpacket_on_vlan_device() {
    if !privileged("tap_port_receives_superpacket_on_vlan_device") {
        return;
    }
    let ns = quiet_ns(PREFIX);
    let (mut g, port, vlan) = tap_graph(&ns);
    let mut sender = PacketSocket::open_in(&ns, "sptap0", &PacketSocketConfig::default()).expect("sender socket");
    let mut flow = tcp_flow();
    let mut pkt = superpacket(&mut flow);
    pkt.push_vlan_tag(0x8100, 10).unwrap();
    let bytes = pkt.to_vec();
    let hdr = VirtioNetHdr::from_meta(&pkt.meta, &bytes, false).unwrap();
    sender.send(&hdr, &[&bytes]).expect("send the superpacket on the TAP");

    let deadline = Instant::now() + Duration::from_secs(3);
    let got = loop {
        g.poll();
        if let Some(p) = g.take_local(vlan) {
            break p;
        }
        assert!(Instant::now() < deadline, "nothing delivered on tap.10: {:?}", g.counters(port));
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(got.total_len(), bytes.len() - 4);
    assert!(got.meta.gso_type.contains(GsoType::TCPV4), "{:?}", got.meta);
    assert!(got.meta.gso_type.contains(GsoType::DODGY), "{:?}", got.meta);
    assert_eq!((got.meta.gso_size, got.meta.gso_segs), (MSS, SEGS as u16), "{:?}", got.meta);
    assert_eq!(got.meta.csum, ChecksumState::Partial { start: 34, offset: 16 }, "{:?}", got.meta);
    let mut v = Vec::new();
    validate_frame(&got.to_vec(), Medium::Ethernet, &got.meta, false, &mut v);
    assert!(v.is_empty(), "{v:?}");
    let c = g.counters(port).clone();
    assert_eq!((c.rx_packets, c.rx_superpackets), (1, 1), "{c:?}");
    let st = tap_stats(&mut g, port);
    assert_eq!((st.rx_frames, st.rx_superpackets), (1, 1), "{st:?}");
    eprintln!("tap receive: {:?}", got.meta);

    // The kernel refuses a GSO header with gso_size 0 itself.
    let bad = VirtioNetHdr { gso_size: 0, ..hdr };
    let e = sender.send(&bad, &[&bytes]).expect_err("gso_size 0 refused");
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{e}");
    drop(g);
}

/// AF_PACKET port on veth end `spva` (namespace A), capture on the peer
/// `spvb` (namespace B). With the veth's default offloads (TSO on) the
/// kernel passed the superpacket on: the peer received one skb of 29026
/// bytes, gso_type TCPV4, gso_size 1448, NEEDS_CSUM. With `tx off tso off
/// gso off` on `spva` the kernel segmented and checksummed in software: 20
/// frames of 1514 bytes, flags 0, every checksum valid.
#[test]
fn af_packet_port_on_veth_superpacket_or_segments() {
    if !privileged("af_packet_port_on_veth_superpacket_or_segments") {
        return;
    }
    let ns_a = quiet_ns(PREFIX);
    let ns_b = quiet_ns(PREFIX);
    let _veth = VethPair::create(&ns_a, "spva", &ns_b, "spvb").expect("veth pair");
    common::veth_up_and_running(&ns_a, "spva", &ns_b, "spvb");
    let mut cap = PacketSocket::open_in(&ns_b, "spvb", &capture_cfg()).expect("capture socket");
    let drv = PacketSocketDriver::open("spva", Some(&ns_a)).expect("AF_PACKET port");
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("va", Box::new(drv)).unwrap();
    assert!(g.device(port).feat.features.contains(NetdevFeatures::TSO));
    let mut flow = tcp_flow();

    // Offloads on (veth default): one GSO skb.
    g.transmit(port, superpacket(&mut flow));
    assert_eq!(g.counters(port).tx_passthrough, 1, "{:?}", g.counters(port));
    assert_eq!(g.counters(port).dropped(), 0, "{:?}", g.counters(port));
    let got = capture(&mut cap, SEGS);
    assert_eq!(got.len(), 1, "offloads on: one skb expected, got {}", got.len());
    let (info, frame) = &got[0];
    assert_eq!(
        (info.hdr.gso_type, info.hdr.gso_size, frame.len()),
        (GSO_TCPV4, MSS, HLEN + SEGS * MSS as usize),
        "{info:?}"
    );
    assert!(problems(&info.hdr, frame).is_empty());
    eprintln!("veth offloads on: {info:?}");

    // Offloads off on the sending end: software segmentation in the kernel.
    ns_a.set_offloads("spva", &[("tx", "off"), ("tso", "off"), ("gso", "off")]).expect("ethtool -K");
    g.transmit(port, superpacket(&mut flow));
    assert_eq!(g.counters(port).dropped(), 0, "{:?}", g.counters(port));
    let got = capture(&mut cap, SEGS);
    assert_eq!(got.len(), SEGS, "offloads off: segments expected");
    for (i, (info, frame)) in got.iter().enumerate() {
        assert_eq!(info.hdr.gso_type, GSO_NONE, "#{i}: {info:?}");
        assert_eq!(frame.len(), HLEN + MSS as usize, "#{i}");
        let mut v = Vec::new();
        validate_frame(frame, Medium::Ethernet, &OffloadMeta::default(), false, &mut v);
        assert!(v.is_empty(), "#{i}: {v:?}");
    }
    eprintln!("veth offloads off: {} segments, first {:?}", got.len(), got[0].0);
    let st = g.driver_mut::<PacketSocketDriver>(port).unwrap().stats().clone();
    assert_eq!((st.tx_frames, st.tx_superpackets), (2, 2), "{st:?}");
    drop(g);
}

/// A topology file with a TAP port (in a test namespace) and a VLAN on it
/// loads and builds; the TAP exists in the namespace while the graph lives.
/// Opening errors name the line.
#[test]
fn topology_with_tap_port_builds() {
    if !privileged("topology_with_tap_port_builds") {
        return;
    }
    let ns = quiet_ns(PREFIX);
    let src = format!(
        r#"
[[device]]
name = "up"
kind = "port"
driver = {{ kind = "tap", name = "sptopo0", netns = "{}" }}

[[device]]
name = "up.10"
kind = "vlan"
lower = "up"
id = 10
"#,
        ns.name()
    );
    let mut g = Topology::parse(&src).expect("parse").build().expect("build");
    let up = g.id("up").unwrap();
    assert!(g.device(up).feat.features.contains(NetdevFeatures::TSO));
    let drv = g.driver_mut::<TapDriver>(up).expect("a TAP driver");
    assert_eq!(drv.endpoint().name(), "sptopo0");
    let state = ns.link_state("sptopo0").expect("the TAP in the namespace");
    assert!(state.up, "{state:?}");
    drop(g);

    let missing = src.replace(ns.name(), "sp-ioport-no-such-ns");
    let e = Topology::parse(&missing).unwrap().build().unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(e.message.contains("sp-ioport-no-such-ns"), "{e}");

    let no_if = format!(
        "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {{ kind = \"af_packet\", interface = \"spnone0\", netns = \"{}\" }}\n",
        ns.name()
    );
    let e = Topology::parse(&no_if).unwrap().build().unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("spnone0"), "{e}");
    eprintln!("errors: {e}");
}

/// A scripted endpoint: hands out queued (header, frame) pairs, records writes.
#[derive(Debug, Default)]
struct Scripted {
    rx: std::collections::VecDeque<(VirtioNetHdr, Vec<u8>)>,
    written: Vec<(VirtioNetHdr, Vec<u8>)>,
}

impl IoEndpoint for Scripted {
    const KIND: &'static str = "scripted";
    fn ifname(&self) -> &str {
        "scripted0"
    }
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError> {
        let frame = parts.concat();
        let n = frame.len();
        self.written.push((*hdr, frame));
        Ok(n)
    }
    fn read_frame(&mut self, buf: &mut [u8]) -> Result<Option<Received>, IoError> {
        let Some((hdr, frame)) = self.rx.pop_front() else { return Ok(None) };
        buf[..frame.len()].copy_from_slice(&frame);
        Ok(Some(Received { hdr, len: frame.len(), vlan: None }))
    }
}

/// Without a kernel: a received header the import refuses (gso_size 0 with
/// a GSO type, csum_offset 6 for TCP) is a drop counted on the port with the
/// refusal's reason, the good packet after it is delivered; a frag-list
/// superpacket is written as its chunks, with the GSO header of the whole.
#[test]
fn io_port_counts_refused_headers_and_writes_chunks() {
    let mut flow = tcp_flow();
    let good = superpacket(&mut flow);
    let bytes = good.to_vec();
    let hdr = VirtioNetHdr::from_meta(&good.meta, &bytes, false).unwrap();
    let mut ep = Scripted::default();
    ep.rx.push_back((VirtioNetHdr { gso_size: 0, ..hdr }, bytes.clone()));
    ep.rx.push_back((VirtioNetHdr { csum_offset: 6, ..hdr }, bytes.clone()));
    ep.rx.push_back((hdr, bytes.clone()));
    let drv = IoPortDriver::with_features(ep, PACKET_SOCKET_FEATURES, 0);
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("p", Box::new(drv)).unwrap();
    assert_eq!(g.poll(), 1);
    let c = g.counters(port).clone();
    assert_eq!(c.drops.get("zero-gso-size"), Some(&1), "{c:?}");
    assert_eq!(c.drops.get("wrong-csum-offset"), Some(&1), "{c:?}");
    let p = g.take_local(port).expect("the good packet");
    assert_eq!((p.len(), p.meta.gso_size, p.meta.gso_segs), (bytes.len(), MSS, SEGS as u16));

    // A frag-list packet: written as its chunks, one write, the header of the whole.
    let mut head = superpacket(&mut flow);
    let tail_bytes = vec![0xabu8; 100];
    head.push_frag(Packet::from_frame(&tail_bytes));
    let total = head.total_len();
    g.transmit(port, head);
    let drv = g.driver_mut::<IoPortDriver<Scripted>>(port).unwrap();
    let (whdr, frame) = drv.endpoint().written.last().unwrap();
    assert_eq!(frame.len(), total);
    assert_eq!(&frame[frame.len() - 100..], &tail_bytes[..]);
    assert_eq!((whdr.gso_type, whdr.gso_size), (GSO_TCPV4, MSS));
}

/// A scripted endpoint that batches: records the frames of each batched write.
#[derive(Debug, Default)]
struct ScriptedBatches {
    inner: Scripted,
    /// Bytes of every frame, per batched write call.
    batches: Vec<Vec<usize>>,
}

impl IoEndpoint for ScriptedBatches {
    const KIND: &'static str = "scripted-batches";
    fn ifname(&self) -> &str {
        self.inner.ifname()
    }
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError> {
        self.inner.write_frame(hdr, parts)
    }
    fn read_frame(&mut self, buf: &mut [u8]) -> Result<Option<Received>, IoError> {
        self.inner.read_frame(buf)
    }
    fn batched(&self) -> bool {
        true
    }
    fn write_frames<'a>(
        &mut self,
        frames: &dyn superpacket_engine::io::packet_socket::FrameSource<'a>,
        report: &mut dyn FnMut(usize, Result<usize, IoError>),
    ) -> usize {
        let mut sizes = Vec::new();
        for i in 0..frames.len() {
            let mut n = 0;
            frames.parts(i, &mut |p| n += p.len());
            sizes.push(n);
            report(i, Ok(n));
        }
        self.batches.push(sizes);
        1
    }
}

/// A batched port does not wait for `batch` superpackets: its send queue is
/// written once the packets queued by value hold `TX_QUEUE_FLUSH_BYTES`
/// (each pins a receive buffer until then), so no write carries much more
/// than that; every packet is written once, in order.
#[test]
fn batched_port_flushes_queued_superpackets_by_bytes() {
    use superpacket_engine::device::port_io::TX_QUEUE_FLUSH_BYTES;
    let mut flow = tcp_flow();
    let drv = IoPortDriver::with_features(ScriptedBatches::default(), PACKET_SOCKET_FEATURES, 0).with_batch(32);
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("p", Box::new(drv)).unwrap();
    let sent = 32;
    let mut len = 0;
    for _ in 0..sent {
        let p = superpacket(&mut flow);
        len = p.len();
        g.transmit(port, p);
    }
    let drv = g.driver_mut::<IoPortDriver<ScriptedBatches>>(port).unwrap();
    superpacket_engine::device::PortDriver::flush(drv);
    let batches = &drv.endpoint().batches;
    let per_batch = TX_QUEUE_FLUSH_BYTES.div_ceil(len);
    assert!(per_batch < sent, "the test needs more than {per_batch} packets");
    assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), sent, "{batches:?}");
    let (last, full) = batches.split_last().unwrap();
    for b in full {
        assert_eq!(b.len(), per_batch, "{batches:?}");
        assert!(b.iter().sum::<usize>() >= TX_QUEUE_FLUSH_BYTES);
    }
    assert!(last.len() <= per_batch, "{batches:?}");
}
