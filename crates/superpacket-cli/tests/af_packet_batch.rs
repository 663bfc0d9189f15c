//! AF_PACKET for the live data path (issue 7): batched I/O (TPACKET_V2 RX
//! ring, `recvmmsg`, `sendmmsg` queue), fanout, gone-and-back for AF_PACKET
//! and TAP ports, QinQ superpackets on a veth, and the measurement that
//! chose the batched paths (`superpacket_engine::io::packet_ring`,
//! `superpacket_engine::io::packet_socket`, `superpacket_engine::device::port_io`).
//!
//! Every privileged test runs as root in namespaces it creates (deleted on
//! drop, also when an assertion fails) with IPv6 off; without privileges
//! they fail with the reason, unless `SUPERPACKET_SKIP_PRIVILEGED=1`.
//!
//! # Measured (`af_packet_path_measurement`)
//!
//! `cargo test --release --test af_packet_batch -- --ignored --nocapture af_packet_path_measurement`
//! (2 vCPU, kernel 6.18; veth between two namespaces; TCP frames of 1514
//! bytes and 64 KB TCPv4 GSO superpackets of 65226 bytes; ranges over three
//! rounds of one run):
//!
//! | direction | path | 1514 B: frames/s (Gbps) | 65226 B: frames/s (Gbps) |
//! |---|---|---|---|
//! | tx | `sendmsg` per frame | 1.61-1.66 M (19.5-20.2) | 439-448 k (229-234) |
//! | tx | `sendmmsg` × 32 | 1.99-2.03 M (24.1-24.6) | 475-482 k (248-252) |
//! | tx | TX ring, kick per 32 | 1.88-1.91 M (22.8-23.1) | 149-161 k (78-84) |
//! | rx-stream | `recvmsg` per frame | 0.73-0.83 M (8.8-10.0) | 102-132 k (53-69) |
//! | rx-stream | `recvmmsg` × 32 | 0.71-0.83 M (8.6-10.0) | 13-67 k (7-35) |
//! | rx-stream | `recvmmsg` × 8 | 0.80-0.82 M (9.7-9.9) | 93-101 k (49-53) |
//! | rx-stream | RX ring, 64 frames | 0.91-1.08 M (11.0-13.1) | 172-197 k (90-103) |
//! | rx-round | `recvmsg` / `recvmmsg` × 32 / × 8 / RX ring | 0.90 / 1.03 / 1.02 / 1.31-1.37 M | 105-117 / 83-86 / 112-121 / 119-125 k |
//!
//! `tx` is the sender's cost only (the peer's stack drops the frames at
//! once; the same frame is sent again and again, so it is cache-hot).
//! `rx-stream`: a second thread sends without pause while the receiver
//! counts for 0.5 s; `rx-round`: 256 frames sent, then drained, both timed.
//! (`recvmmsg` of 32 slots of 128 KiB suffers with superpackets: 4 MiB of
//! slots no longer fit the caches.) The TX ring copies every frame into the
//! ring, which costs more than the kernel's copy from the packet for
//! superpackets; the RX ring moves the copy into the delivering softirq and
//! makes no system call per packet. The port driver therefore receives from
//! an RX ring and sends with `sendmmsg`.

mod common;

use common::{privileged, quiet_ns};

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use superpacket::packet::Packet;
use superpacket::packet::virtio::{
    F_NEEDS_CSUM, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, ImportOptions, VirtioNetHdr,
};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::port_io::{
    IoEndpoint, PACKET_SOCKET_FEATURES, PacketPortOptions, RX_KERNEL_FULL, Received,
};
use superpacket_engine::device::{
    Graph, IoPortDriver, NetdevFeatures, PacketSocketDriver, PortDriver, StackMode, TapDriver,
};
use superpacket_engine::io::packet_ring::{MeasureCase, measure_paths};
use superpacket_engine::io::packet_socket::FrameSource;
use superpacket_engine::io::{IoError, NetNs, PacketSocket, PacketSocketConfig, RecvInfo, VethPair};

const PREFIX: &str = "sp-afpb";
const MSS: u16 = 1448;
/// Source MAC of [`FlowSpec::new`]: captured frames without it are strays.
const FLOW_SRC_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 1];

/// Two namespaces joined by veth `a` (in the first) - `b` (in the second), both up and running.
fn veth_pair(a: &str, b: &str) -> (NetNs, NetNs, VethPair) {
    let ns_a = quiet_ns(PREFIX);
    let ns_b = quiet_ns(PREFIX);
    let veth = VethPair::create(&ns_a, a, &ns_b, b).expect("veth pair");
    common::veth_up_and_running(&ns_a, a, &ns_b, b);
    (ns_a, ns_b, veth)
}

fn capture_cfg() -> PacketSocketConfig {
    PacketSocketConfig {
        incoming_only: true,
        auxdata: true,
        recv_timeout: Some(Duration::from_millis(300)),
        rcvbuf: Some(16 << 20),
        ..PacketSocketConfig::default()
    }
}

/// Every frame of the test flows (by source MAC prefix) until nothing came
/// for the receive timeout.
fn capture_all(sock: &mut PacketSocket) -> Vec<(RecvInfo, Vec<u8>)> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut out = Vec::new();
    loop {
        match sock.recv_info(&mut buf) {
            Ok(info) => {
                if buf[6..11] == FLOW_SRC_MAC[..5] {
                    out.push((info, buf[..info.len].to_vec()));
                }
            }
            Err(e) if e.is_would_block() => return out,
            Err(e) => panic!("capture on {}: {e}", sock.ifname()),
        }
    }
}

/// The frame as it was on the wire: a tag the kernel moved into metadata put back.
fn with_tag(info: &RecvInfo, frame: &[u8]) -> Vec<u8> {
    match info.vlan {
        None => frame.to_vec(),
        Some(v) => {
            let tpid = if v.tpid == 0 { 0x8100 } else { v.tpid };
            let mut out = frame[..12].to_vec();
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&v.tci.to_be_bytes());
            out.extend_from_slice(&frame[12..]);
            out
        }
    }
}

fn tcp_flow(index: u32) -> Flow {
    Flow::new(FlowSpec::new(Transport::Tcp, false, index))
}

/// Frame `i` of a run: TCP, 1448 bytes of payload, flow `i % flows`.
fn mtu_frame(flows: &mut [Flow], i: usize) -> Vec<u8> {
    let n = flows.len();
    flows[i % n].frame(MSS as usize, TcpFlags::PSH).unwrap()
}

/// Receives from `drv` until `want` packets came or `timeout` passed.
fn drain(drv: &mut dyn PortDriver, want: usize, timeout: Duration) -> Vec<Packet> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        match drv.recv() {
            Some(p) => out.push(p),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    out
}

// ------------------------------------------------------------ measurement

/// Measures single vs mmsg vs ring, tx and rx, MTU frames and 64 KB
/// superpackets (figures in the module documentation).
#[test]
#[ignore]
fn af_packet_path_measurement() {
    if !privileged("af_packet_path_measurement") {
        return;
    }
    let mut flow = tcp_flow(0);
    let mtu = flow.frame(MSS as usize, TcpFlags::PSH).unwrap();
    let sp = flow.superpacket(45 * MSS as usize, MSS, TcpFlags::PSH).unwrap();
    let sp_bytes = sp.to_vec();
    let sp_hdr = VirtioNetHdr::from_meta(&sp.meta, &sp_bytes, false).unwrap();
    let cases = [
        MeasureCase { hdr: VirtioNetHdr::default(), frame: mtu, frames: 200_000 },
        MeasureCase { hdr: sp_hdr, frame: sp_bytes, frames: 20_000 },
    ];
    for round in 0..3 {
        let figs = measure_paths(&cases).expect("measure");
        for f in &figs {
            println!(
                "round {round} {:>9} {:>6} {:>6} B: {:>9.0} frames/s {:>7.2} Gbps ({} frames, {:.3} s)",
                f.direction,
                f.path,
                f.frame_len,
                f.frames_per_sec(),
                f.gbps(),
                f.frames,
                f.secs
            );
        }
    }
}

// ------------------------------------------------------------ batched I/O

/// A batched AF_PACKET port (the defaults: batch 32, RX ring of 128 frames)
/// on veth `spba` (A), a capture socket and a sender on the peer `spbb`
/// (B). Transmit: 100 owned MTU packets are queued and written by
/// `sendmmsg` of 32 when the queue fills (96 reach the peer before the
/// flush, 4 wait), the flush writes the rest; the peer gets all 100 in
/// order, byte for byte; 4 batched calls. Receive: 100 frames sent by the
/// peer (one with an 802.1Q tag, one a TCPv4 superpacket) come out of the
/// ring in order, the tag put back, the superpacket's GSO metadata
/// imported (TCPV4, gso_size 1448, partial checksum), in far fewer
/// refills than packets.
#[test]
fn batched_port_sends_with_sendmmsg_and_receives_from_the_ring() {
    if !privileged("batched_port_sends_with_sendmmsg_and_receives_from_the_ring") {
        return;
    }
    let (ns_a, ns_b, _veth) = veth_pair("spba", "spbb");
    let mut cap = PacketSocket::open_in(&ns_b, "spbb", &capture_cfg()).unwrap();
    let drv = PacketSocketDriver::open_with("spba", Some(&ns_a), &PacketPortOptions::default()).unwrap();
    assert_eq!(drv.batch(), 32);
    assert!(drv.endpoint().has_rx_ring());
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("a", Box::new(drv)).unwrap();

    let mut flows: Vec<Flow> = (0..4).map(tcp_flow).collect();
    let frames: Vec<Vec<u8>> = (0..100).map(|i| mtu_frame(&mut flows, i)).collect();
    for f in &frames {
        g.transmit(port, Packet::from_frame(f));
    }
    let drv = g.driver_mut::<PacketSocketDriver>(port).unwrap();
    assert_eq!(drv.queued(), 4, "100 = 3 × 32 written, 4 queued");
    let before = capture_all(&mut cap);
    assert_eq!(before.len(), 96, "the full batches went out");
    drv.flush();
    assert_eq!(drv.queued(), 0);
    let after = capture_all(&mut cap);
    let got: Vec<Vec<u8>> = before.into_iter().chain(after).map(|(_, f)| f).collect();
    assert_eq!(got.len(), 100);
    assert!(got == frames, "frames differ or are out of order");
    let st = drv.stats().clone();
    assert_eq!((st.tx_frames, st.tx_batches, st.tx_bytes), (100, 4, 100 * 1514), "{st:?}");
    assert_eq!(g.counters(port).dropped(), 0, "{:?}", g.counters(port));

    // Receive through the ring, in bursts of 25 (as an engine round would drain).
    let mut peer = PacketSocket::open_in(&ns_b, "spbb", &PacketSocketConfig::default()).unwrap();
    let mut sent = Vec::new();
    let mut got = Vec::new();
    for i in 0..100 {
        let mut p = if i == 50 {
            tcp_flow(9).superpacket(20 * MSS as usize, MSS, TcpFlags::PSH).unwrap()
        } else {
            Packet::from_frame(&mtu_frame(&mut flows, i))
        };
        if i == 10 {
            p.push_vlan_tag(0x8100, 42).unwrap();
        }
        let bytes = p.to_vec();
        let hdr = VirtioNetHdr::from_meta(&p.meta, &bytes, false).unwrap();
        peer.send(&hdr, &[&bytes]).unwrap();
        sent.push(bytes);
        if i % 25 == 24 {
            let drv = g.driver_mut::<PacketSocketDriver>(port).unwrap();
            got.extend(drain(drv, 25, Duration::from_secs(2)));
        }
    }
    let drv = g.driver_mut::<PacketSocketDriver>(port).unwrap();
    assert_eq!(got.len(), 100, "{:?}", drv.stats());
    for (i, (p, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(&p.to_vec(), s, "packet {i}");
    }
    let sp = &got[50].meta;
    assert_eq!((sp.gso_size, sp.gso_segs, sp.is_gso()), (MSS, 20, true), "{sp:?}");
    let st = drv.stats().clone();
    assert_eq!((st.rx_frames, st.rx_superpackets), (100, 1), "{st:?}");
    assert!(st.rx_batches >= 4 && st.rx_batches < 50, "refills: {st:?}");
    let mut counters = BTreeMap::new();
    drv.driver_counters(&mut |k, v| {
        counters.insert(k, v);
    });
    assert_eq!(counters["rx_kernel_drops"], 0, "{counters:?}");
    assert_eq!(counters["rx_frames"], 100, "{counters:?}");
    eprintln!("batched port: {st:?}");
}

/// Superpackets are lent out of the RX ring instead of copied: the packet
/// holds the first 256 bytes (headers) in its linear area and the rest as a
/// segment pointing into the ring. At most half the ring is lent (then
/// frames are copied), a dropped packet gives its frame back (the ring keeps
/// receiving), MTU frames are always copied, and a lent packet stays valid
/// after its port is closed.
#[test]
fn superpackets_are_lent_from_the_ring_and_given_back() {
    if !privileged("superpackets_are_lent_from_the_ring_and_given_back") {
        return;
    }
    let (ns_a, ns_b, _veth) = veth_pair("spla", "splb");
    let opts = PacketPortOptions { rx_ring_frames: 8, ..PacketPortOptions::default() };
    let mut drv = PacketSocketDriver::open_with("spla", Some(&ns_a), &opts).unwrap();
    let mut peer = PacketSocket::open_in(&ns_b, "splb", &PacketSocketConfig::default()).unwrap();
    let mut flow = tcp_flow(3);
    let mut send = |n: usize, mtu: bool| -> Vec<Vec<u8>> {
        (0..n)
            .map(|_| {
                let p = if mtu {
                    Packet::from_frame(&flow.frame(MSS as usize, TcpFlags::PSH).unwrap())
                } else {
                    flow.superpacket(30 * MSS as usize, MSS, TcpFlags::PSH).unwrap()
                };
                let bytes = p.to_vec();
                let hdr = VirtioNetHdr::from_meta(&p.meta, &bytes, false).unwrap();
                peer.send(&hdr, &[&bytes]).unwrap();
                bytes
            })
            .collect()
    };
    let is_lent = |p: &Packet| p.headlen() == 256 && p.segments().len() == 1;

    // 6 superpackets into a ring of 8: the first 4 are lent, the rest copied.
    let sent = send(6, false);
    let got = drain(&mut drv, 6, Duration::from_secs(2));
    assert_eq!(got.len(), 6, "{:?}", drv.stats());
    for (i, (p, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(&p.to_vec(), s, "superpacket {i}");
        assert!(p.meta.is_gso());
        assert_eq!(is_lent(p), i < 4, "superpacket {i}: headlen {} segments {}", p.headlen(), p.segments().len());
    }
    // While frames 0-3 are lent, the kernel fills frames 6 and 7, then stops
    // at frame 0: of 6 more superpackets, 2 arrive and 4 are dropped, counted.
    let sent2 = send(6, false);
    let got2 = drain(&mut drv, 6, Duration::from_millis(500));
    assert_eq!(got2.len(), 2, "only the free frames could be filled");
    assert!(got2.iter().all(|p| !is_lent(p)), "nothing more is lent while half the ring is out");
    assert_eq!(got2.iter().map(Packet::to_vec).collect::<Vec<_>>(), sent2[..2].to_vec());
    drop(got2);
    let mut counters = BTreeMap::new();
    drv.driver_counters(&mut |k, v| {
        counters.insert(k, v);
    });
    assert_eq!(counters["rx_kernel_drops"], 4, "{counters:?}");
    // The same 4 reach the port's drop counters with their reason, once.
    let mut drops = Vec::new();
    drv.take_drops(&mut |reason, n| drops.push((reason, n)));
    assert_eq!(drops, vec![(RX_KERNEL_FULL, 4)]);
    drv.take_drops(&mut |reason, n| drops.push((reason, n)));
    assert_eq!(drops.len(), 1, "reported once: {drops:?}");

    // Dropping the lent packets gives their frames back: the ring receives 8 again.
    drop(got);
    let sent3 = send(8, false);
    let got3 = drain(&mut drv, 8, Duration::from_secs(2));
    assert_eq!(got3.iter().map(Packet::to_vec).collect::<Vec<_>>(), sent3);
    assert_eq!(got3.iter().filter(|p| is_lent(p)).count(), 4);
    drop(got3);

    // MTU frames are copied, never lent.
    let sent4 = send(5, true);
    let got4 = drain(&mut drv, 5, Duration::from_secs(2));
    assert_eq!(got4.iter().map(Packet::to_vec).collect::<Vec<_>>(), sent4);
    assert!(got4.iter().all(|p| p.segments().is_empty()));

    // A lent packet outlives its port: the mapping is kept until it is dropped.
    let sent5 = send(1, false);
    let mut got5 = drain(&mut drv, 1, Duration::from_secs(2));
    let p = got5.pop().expect("one superpacket");
    assert!(is_lent(&p));
    drop(drv);
    assert_eq!(p.to_vec(), sent5[0]);
}

/// The same port with `rx_ring_frames = 0` receives with `recvmmsg` into
/// preallocated slots: 70 frames (one tagged, one superpacket) arrive in
/// order, the tag restored from `PACKET_AUXDATA`.
#[test]
fn batched_port_without_ring_receives_with_recvmmsg() {
    if !privileged("batched_port_without_ring_receives_with_recvmmsg") {
        return;
    }
    let (ns_a, ns_b, _veth) = veth_pair("spma", "spmb");
    let opts = PacketPortOptions { rx_ring_frames: 0, batch: 16, ..PacketPortOptions::default() };
    let mut drv = PacketSocketDriver::open_with("spma", Some(&ns_a), &opts).unwrap();
    assert!(!drv.endpoint().has_rx_ring());
    let mut peer = PacketSocket::open_in(&ns_b, "spmb", &PacketSocketConfig::default()).unwrap();
    let mut flows: Vec<Flow> = (0..3).map(tcp_flow).collect();
    let mut sent = Vec::new();
    for i in 0..70 {
        let mut p = if i == 33 {
            tcp_flow(7).superpacket(10 * MSS as usize, MSS, TcpFlags::PSH).unwrap()
        } else if i == 5 {
            Packet::from_frame(&flows[0].frame(300, TcpFlags::empty()).unwrap())
        } else {
            Packet::from_frame(&mtu_frame(&mut flows, i))
        };
        if i == 5 {
            p.push_vlan_tag(0x88a8, 7).unwrap();
        }
        let bytes = p.to_vec();
        let hdr = VirtioNetHdr::from_meta(&p.meta, &bytes, false).unwrap();
        peer.send(&hdr, &[&bytes]).unwrap();
        sent.push(bytes);
    }
    let got = drain(&mut drv, 70, Duration::from_secs(3));
    assert_eq!(got.len(), 70, "{:?}", drv.stats());
    for (i, (p, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(&p.to_vec(), s, "packet {i}");
    }
    assert!(got[33].meta.is_gso());
    let st = drv.stats().clone();
    assert!(st.rx_batches >= 5 && st.rx_batches < 70, "{st:?}");
}

/// A batched port whose TSO is off in the graph: the graph segments a
/// 20-segment superpacket; scatter-gather frames are copied into the arena
/// and queued, linear frames (SG off too) are built in the arena directly.
/// After the flush the peer gets 20 valid MTU frames each time, in order
/// (partial checksums completed by the kernel, full ones by the graph),
/// and once warm the transmit path (queue, arena, flush, `sendmmsg`)
/// allocates nothing.
#[test]
fn batched_port_queues_segmenter_output_in_the_arena() {
    if !privileged("batched_port_queues_segmenter_output_in_the_arena") {
        return;
    }
    let (ns_a, ns_b, _veth) = veth_pair("spsa", "spsb");
    let mut cap = PacketSocket::open_in(&ns_b, "spsb", &capture_cfg()).unwrap();
    let drv = PacketSocketDriver::open_with("spsa", Some(&ns_a), &PacketPortOptions::default()).unwrap();
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("a", Box::new(drv)).unwrap();
    let mut flow = tcp_flow(1);
    for (case, off) in [
        ("sg frames", NetdevFeatures::TSO.union(NetdevFeatures::TSO6)),
        ("linear frames", NetdevFeatures::TSO.union(NetdevFeatures::TSO6).union(NetdevFeatures::SG)),
    ] {
        g.set_features(port, NetdevFeatures::EMPTY, off);
        g.reset_counters();
        let sp = flow.superpacket(20 * MSS as usize, MSS, TcpFlags::PSH).unwrap();
        g.transmit(port, sp);
        let c = g.counters(port).clone();
        assert_eq!((c.tx_segmented, c.segments_produced, c.dropped()), (1, 20, 0), "{case}: {c:?}");
        let drv = g.driver_mut::<PacketSocketDriver>(port).unwrap();
        assert_eq!(drv.queued(), 20, "{case}: queued until the flush");
        drv.flush();
        let got = capture_all(&mut cap);
        assert_eq!(got.len(), 20, "{case}");
        let mut seq = None;
        for (i, (info, frame)) in got.iter().enumerate() {
            assert_eq!((info.hdr.gso_type, frame.len()), (GSO_NONE, 1514), "{case} #{i}");
            let meta = info.hdr.to_meta(frame, &ImportOptions::default()).unwrap();
            let mut v = Vec::new();
            validate_frame(frame, Medium::Ethernet, &meta, false, &mut v);
            assert!(v.is_empty(), "{case} #{i}: {v:?}");
            let s = u32::from_be_bytes(frame[38..42].try_into().unwrap());
            if let Some(prev) = seq {
                assert_eq!(s, prev + u32::from(MSS), "{case} #{i}: in order");
            }
            seq = Some(s);
        }
        g.set_features(port, off, NetdevFeatures::EMPTY);
    }

    // Warm: no allocation on transmit + flush (packets are made before, freed inside).
    g.set_features(port, NetdevFeatures::EMPTY, NetdevFeatures::TSO);
    let pkts: Vec<Packet> = (0..70)
        .map(|i| {
            if i % 10 == 0 {
                flow.superpacket(20 * MSS as usize, MSS, TcpFlags::PSH).unwrap()
            } else {
                Packet::from_frame(&flow.frame(MSS as usize, TcpFlags::empty()).unwrap())
            }
        })
        .collect();
    let mut pkts = pkts.into_iter();
    for p in pkts.by_ref().take(35) {
        g.transmit(port, p);
    }
    g.driver_mut::<PacketSocketDriver>(port).unwrap().flush();
    let info = allocation_counter::measure(|| {
        for p in pkts.by_ref() {
            g.transmit(port, p);
        }
        g.driver_mut::<PacketSocketDriver>(port).unwrap().flush();
    });
    assert_eq!(info.count_total, 0, "allocations on batched transmit: {info:?}");
    assert_eq!(g.counters(port).dropped(), 0, "{:?}", g.counters(port));
    let _ = capture_all(&mut cap);
}

/// A scripted batched endpoint: records every batch, fails frames on demand.
#[derive(Debug, Default)]
struct Batched {
    batches: Vec<Vec<(VirtioNetHdr, Vec<u8>)>>,
    /// errno for frames whose first payload byte (offset 66) is this value.
    fail: Option<(u8, i32)>,
}

impl IoEndpoint for Batched {
    const KIND: &'static str = "batched";
    fn ifname(&self) -> &str {
        "batched0"
    }
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError> {
        let frame = parts.concat();
        let n = frame.len();
        self.batches.push(vec![(*hdr, frame)]);
        Ok(n)
    }
    fn read_frame(&mut self, _: &mut [u8]) -> Result<Option<Received>, IoError> {
        Ok(None)
    }
    fn batched(&self) -> bool {
        true
    }
    fn write_frames<'a>(
        &mut self,
        frames: &dyn FrameSource<'a>,
        report: &mut dyn FnMut(usize, Result<usize, IoError>),
    ) -> usize {
        let mut batch = Vec::new();
        for i in 0..frames.len() {
            let mut frame = Vec::new();
            frames.parts(i, &mut |p| frame.extend_from_slice(p));
            if let Some((marker, errno)) = self.fail
                && frame.get(66) == Some(&marker)
            {
                let source = std::io::Error::from_raw_os_error(errno);
                report(i, Err(IoError::Syscall { call: "sendmmsg", what: "batched0".into(), source }));
                continue;
            }
            report(i, Ok(frame.len()));
            batch.push((frames.header(i), frame));
        }
        self.batches.push(batch);
        1
    }
}

/// Without a kernel: a batched driver keeps the order of owned packets and
/// segmenter output, writes a batch when `batch` frames are queued and at
/// each flush; a refused frame is a counted drop (reported to the graph),
/// the others go out; `ENXIO` marks the driver gone (`link-gone`), after
/// which transmissions are refused as `link-gone`, and a driver not opened
/// by name cannot reopen.
#[test]
fn batched_queue_keeps_order_and_counts_failures() {
    let drv = IoPortDriver::with_features(Batched::default(), PACKET_SOCKET_FEATURES, 0).with_batch(4);
    let mut g = Graph::new(StackMode::Passthrough);
    let port = g.add_port("p", Box::new(drv)).unwrap();
    let mut flow = tcp_flow(2);
    let payload = |p: &Packet| p.to_vec()[66];
    let mut order = Vec::new();
    for i in 0..3 {
        let p = Packet::from_frame(&flow.frame(100 + i, TcpFlags::empty()).unwrap());
        order.push(payload(&p));
        g.transmit(port, p);
    }
    // A superpacket segmented by the graph (TSO off): its 5 frames are copied into the arena.
    g.set_features(port, NetdevFeatures::EMPTY, NetdevFeatures::TSO);
    let sp = flow.superpacket(5 * 500, 500, TcpFlags::PSH).unwrap();
    let sp_bytes = sp.to_vec();
    for k in 0..5 {
        order.push(sp_bytes[66 + k * 500]);
    }
    g.transmit(port, sp);
    let drv = g.driver_mut::<IoPortDriver<Batched>>(port).unwrap();
    assert_eq!(drv.endpoint().batches.len(), 2, "two full batches of 4");
    assert_eq!(drv.queued(), 0);
    let p = Packet::from_frame(&flow.frame(300, TcpFlags::empty()).unwrap());
    order.push(payload(&p));
    g.transmit(port, p);
    let drv = g.driver_mut::<IoPortDriver<Batched>>(port).unwrap();
    drv.flush();
    let written: Vec<u8> = drv.endpoint().batches.iter().flatten().map(|(_, f)| f[66]).collect();
    assert_eq!(written, order);
    let sizes: Vec<usize> = drv.endpoint().batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, [4, 4, 1]);
    assert_eq!(drv.stats().tx_batches, 3);

    // A refused frame: counted, the rest of the batch goes out.
    let bad = flow.frame(200, TcpFlags::empty()).unwrap();
    drv.endpoint_mut().fail = Some((bad[66], libc::EINVAL));
    g.transmit(port, Packet::from_frame(&flow.frame(200, TcpFlags::empty()).unwrap()));
    g.transmit(port, Packet::from_frame(&bad));
    let drv = g.driver_mut::<IoPortDriver<Batched>>(port).unwrap();
    drv.flush();
    assert_eq!(drv.endpoint().batches.last().unwrap().len(), 1);
    assert_eq!(drv.stats().drops.get("tx-refused"), Some(&1));
    g.poll();
    assert_eq!(g.counters(port).drops.get("tx-refused"), Some(&1), "{:?}", g.counters(port));

    // The device vanishes.
    let drv = g.driver_mut::<IoPortDriver<Batched>>(port).unwrap();
    drv.endpoint_mut().fail = Some((bad[66], libc::ENXIO));
    g.transmit(port, Packet::from_frame(&bad));
    let drv = g.driver_mut::<IoPortDriver<Batched>>(port).unwrap();
    assert!(!drv.is_gone());
    drv.flush();
    assert!(drv.is_gone());
    let e = drv.xmit(Packet::from_frame(&bad)).unwrap_err();
    assert_eq!(e.reason, "link-gone");
    assert_eq!(drv.reopen().unwrap_err().reason, "reopen-unsupported");
    let mut counters = BTreeMap::new();
    drv.driver_counters(&mut |k, v| {
        counters.insert(k, v);
    });
    for k in ["tx_frames", "tx_bytes", "tx_superpackets", "rx_frames", "rx_bytes", "rx_superpackets", "tx_batches"] {
        assert!(counters.contains_key(k), "{k} missing: {counters:?}");
    }
    assert_eq!(counters["tx_frames"], 10);
    g.poll();
    assert_eq!(g.counters(port).drops.get("link-gone"), Some(&1), "{:?}", g.counters(port));
}

/// Without a kernel: the virtio_net_hdr of a superpacket whose linear area
/// holds only its headers (as GRO builds aggregates: the rest of the
/// payload in segments, the IP and UDP length fields counting all of it) is
/// built as for a linear one, per frame and batched: TCPv4, TCPv6, UDP_L4,
/// QinQ TCPv4 (every GRO'd superpacket written to a port was dropped as
/// `bad-headers` before `VirtioNetHdr::from_meta` took the headers from the
/// linear area alone).
#[test]
fn superpackets_with_paged_payload_get_their_header() {
    let cases = [
        ("tcp4", FlowSpec::new(Transport::Tcp, false, 1), GSO_TCPV4),
        ("tcp6", FlowSpec::new(Transport::Tcp, true, 1), GSO_TCPV6),
        ("udp4", FlowSpec::new(Transport::Udp, false, 1), GSO_UDP_L4),
        (
            "qinq tcp4",
            FlowSpec::new(Transport::Tcp, false, 1).with_vlans(&[(0x88a8, 100), (0x8100, 10)]).unwrap(),
            GSO_TCPV4,
        ),
    ];
    for batch in [1, 4] {
        let mut drv = IoPortDriver::with_features(Batched::default(), PACKET_SOCKET_FEATURES, 0).with_batch(batch);
        for (label, spec, gso) in cases {
            let whole = Flow::new(spec).superpacket(10 * 1000, 1000, TcpFlags::PSH).unwrap();
            let expected = VirtioNetHdr::from_meta(&whole.meta, &whole.to_vec(), false).unwrap();
            let mut paged = whole.clone();
            paged.detach_payload(spec.header_len()).unwrap();
            assert_eq!(paged.linear().len(), spec.header_len(), "{label}");
            drv.xmit(paged).unwrap();
            drv.flush();
            let (hdr, frame) = drv.endpoint().batches.last().unwrap().last().unwrap().clone();
            assert_eq!(hdr, expected, "{label} batch {batch}");
            assert_eq!((hdr.gso_type, hdr.hdr_len as usize), (gso, spec.header_len()), "{label}");
            assert!(frame == whole.to_vec(), "{label}");
        }
        assert!(drv.stats().drops.is_empty(), "{:?}", drv.stats());
    }
}

// ------------------------------------------------------------ fanout

/// Drains every worker, noting each packet's flow (its port pair,
/// direction-free) per worker.
fn receive(workers: &mut [PacketSocketDriver], seen: &mut [BTreeSet<(u16, u16)>], count: &mut [usize]) {
    for (w, drv) in workers.iter_mut().enumerate() {
        while let Some(p) = drv.recv() {
            let f = p.to_vec();
            let (s, d) = (u16::from_be_bytes([f[34], f[35]]), u16::from_be_bytes([f[36], f[37]]));
            seen[w].insert((s.min(d), s.max(d)));
            count[w] += 1;
        }
    }
}

/// Two batched ports in one `PACKET_FANOUT` hash group on veth end `spfb`:
/// 48 TCP flows × 6 frames sent from the peer, plus 2 frames of each flow's
/// reverse direction. Every frame is received exactly once, no flow (in
/// either direction: the hash is symmetric) is seen by both sockets, and
/// both got some.
#[test]
fn fanout_spreads_flows_over_the_group() {
    if !privileged("fanout_spreads_flows_over_the_group") {
        return;
    }
    let (ns_a, ns_b, _veth) = veth_pair("spfa", "spfb");
    let opts = PacketPortOptions { fanout_group: Some(4242), ..PacketPortOptions::default() };
    let mut workers = [
        PacketSocketDriver::open_with("spfb", Some(&ns_b), &opts).unwrap(),
        PacketSocketDriver::open_with("spfb", Some(&ns_b), &opts).unwrap(),
    ];
    assert_eq!(workers[0].endpoint().fanout_group(), Some(4242));
    let mut tx = PacketSocket::open_in(&ns_a, "spfa", &PacketSocketConfig::default()).unwrap();
    let mut seen: Vec<BTreeSet<(u16, u16)>> = vec![BTreeSet::new(), BTreeSet::new()];
    let mut count = [0usize; 2];
    let flows = 48usize;
    let mut total = 0;
    for i in 0..flows {
        let spec = FlowSpec::new(Transport::Tcp, false, i as u32);
        let mut reverse = spec;
        std::mem::swap(&mut reverse.src_mac, &mut reverse.dst_mac);
        std::mem::swap(&mut reverse.src_port, &mut reverse.dst_port);
        if let Addrs::V4 { src, dst } = spec.addrs {
            reverse.addrs = Addrs::V4 { src: dst, dst: src };
        }
        let (mut fwd, mut rev) = (Flow::new(spec), Flow::new(reverse));
        for k in 0..8 {
            let f = if k < 6 { &mut fwd } else { &mut rev };
            let frame = f.frame(200, TcpFlags::empty()).unwrap();
            tx.send(&VirtioNetHdr::default(), &[&frame]).unwrap();
            total += 1;
        }
        // Drain now and then, as the engine would (each worker's ring holds 128 frames).
        if i % 4 == 3 {
            receive(&mut workers, &mut seen, &mut count);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while count.iter().sum::<usize>() < total && Instant::now() < deadline {
        receive(&mut workers, &mut seen, &mut count);
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(50));
    receive(&mut workers, &mut seen, &mut count);
    eprintln!("fanout: frames {count:?}, flows {} + {}", seen[0].len(), seen[1].len());
    assert_eq!(count.iter().sum::<usize>(), total, "every frame exactly once");
    assert_eq!(seen[0].len() + seen[1].len(), flows, "both directions of a flow on one socket");
    assert!(seen[0].is_disjoint(&seen[1]));
    assert!(count[0] > 0 && count[1] > 0, "{count:?}");
}

// ------------------------------------------------------------ gone and back

/// AF_PACKET port on veth end `spga`, per frame and batched (ring): the
/// veth is deleted; the next receive sees `ENETDOWN` (the socket's error)
/// and the port is gone (`link-gone` counted once), transmissions are
/// refused as `link-gone`; `reopen` fails while the interface is missing.
/// The veth is created again under the same names: `reopen` succeeds (a
/// new descriptor), and frames flow both ways again.
#[test]
fn af_packet_port_gone_and_back() {
    if !privileged("af_packet_port_gone_and_back") {
        return;
    }
    for batch in [1, 32] {
        let ns_a = quiet_ns(PREFIX);
        let ns_b = quiet_ns(PREFIX);
        let make = || {
            let v = VethPair::create(&ns_a, "spga", &ns_b, "spgb").unwrap();
            common::veth_up_and_running(&ns_a, "spga", &ns_b, "spgb");
            v
        };
        let veth = make();
        let opts = PacketPortOptions { batch, ..PacketPortOptions::default() };
        let mut drv = PacketSocketDriver::open_with("spga", Some(&ns_a), &opts).unwrap();
        let fd = drv.poll_fd().expect("a descriptor");
        assert!(drv.recv().is_none() && !drv.is_gone());

        drop(veth);
        assert!(drv.recv().is_none());
        assert!(drv.is_gone(), "batch {batch}: {:?}", drv.stats());
        assert_eq!(drv.stats().drops.get("link-gone"), Some(&1));
        let mut flow = tcp_flow(5);
        let frame = flow.frame(MSS as usize, TcpFlags::PSH).unwrap();
        assert_eq!(drv.xmit(Packet::from_frame(&frame)).unwrap_err().reason, "link-gone");
        let e = drv.reopen().unwrap_err();
        assert_eq!(e.reason, "reopen-failed", "{e:?}");
        assert!(e.message.contains("spga"), "{e:?}");

        let _veth = make();
        drv.reopen().expect("reopen after the veth is back");
        assert!(!drv.is_gone());
        assert_eq!(drv.stats().reopens, 1);
        assert!(drv.poll_fd().is_some_and(|f| f != fd), "a new descriptor");
        let mut cap = PacketSocket::open_in(&ns_b, "spgb", &capture_cfg()).unwrap();
        drv.xmit(Packet::from_frame(&frame)).unwrap();
        drv.flush();
        let got = capture_all(&mut cap);
        assert_eq!(got.len(), 1, "batch {batch}: transmit works again");
        assert_eq!(got[0].1, frame);
        let mut peer = PacketSocket::open_in(&ns_b, "spgb", &PacketSocketConfig::default()).unwrap();
        peer.send(&VirtioNetHdr::default(), &[&frame]).unwrap();
        let got = drain(&mut drv, 1, Duration::from_secs(2));
        assert_eq!(got.len(), 1, "batch {batch}: receive works again");
        assert_eq!(got[0].to_vec(), frame);
    }
}

/// TAP port `sptg0`: the TAP netdev is deleted (`ip link del`); reading the
/// detached descriptor gives `EBADFD`, the port is gone (`link-gone`).
/// `reopen` creates the TAP again in the same namespace with the same
/// offloads (the same TUN_F flags accepted) and brings it up; a frame sent
/// on it inside the namespace reaches the driver, and one the driver sends
/// is captured there.
#[test]
fn tap_port_gone_and_back() {
    if !privileged("tap_port_gone_and_back") {
        return;
    }
    let ns = quiet_ns(PREFIX);
    let mut drv = TapDriver::open("sptg0", Some(&ns)).unwrap();
    let offloads = drv.offloads();
    assert!(drv.poll_fd().is_some());
    assert!(drv.recv().is_none() && !drv.is_gone());
    ns.del_link("sptg0").unwrap();
    assert!(drv.recv().is_none());
    assert!(drv.is_gone(), "{:?}", drv.stats());
    assert!(drv.stats().last_error.as_deref().is_some_and(|e| e.contains("readv")), "{:?}", drv.stats());
    let mut flow = tcp_flow(6);
    let frame = flow.frame(MSS as usize, TcpFlags::PSH).unwrap();
    assert_eq!(drv.xmit(Packet::from_frame(&frame)).unwrap_err().reason, "link-gone");

    drv.reopen().expect("reopen the TAP");
    assert!(!drv.is_gone());
    assert_eq!(drv.offloads(), offloads);
    assert!(ns.link_state("sptg0").unwrap().up, "the reopened TAP is up");
    let mut sock = PacketSocket::open_in(&ns, "sptg0", &capture_cfg()).unwrap();
    sock.send(&VirtioNetHdr::default(), &[&frame]).unwrap();
    let got = drain(&mut drv, 1, Duration::from_secs(2));
    assert_eq!(got.len(), 1, "receive works again: {:?}", drv.stats());
    assert_eq!(got[0].to_vec(), frame);
    drv.xmit(Packet::from_frame(&frame)).unwrap();
    let got = capture_all(&mut sock);
    assert_eq!(got.len(), 1, "transmit works again");
    assert_eq!(got[0].1, frame);
}

// ------------------------------------------------------------ QinQ on a veth

/// What the kernel does with QinQ superpackets sent through AF_PACKET with
/// `PACKET_VNET_HDR` on a veth (the shape of `examples/live-qinq-nat.toml`:
/// one namespace, MTU 1600, default offloads), measured on 6.18:
///
/// - sent with `sll_protocol` = the frame's EtherType (0x88a8, what
///   `PacketSocket::send` does), TCPv4, TCPv6 and UDP_L4 superpackets with
///   tags 802.1ad 100 + 802.1Q 10 reach the peer as **one** skb each
///   (gso_type TCPV4/TCPV6/UDP_L4, NEEDS_CSUM, the outer tag in metadata);
///   with the outer tag put back the bytes are the ones sent. No software
///   segmentation: `vlan_features_check` did not apply.
/// - sent with `sll_protocol` = IPv4 (skb->protocol the L3 protocol), the
///   kernel refuses the TCPv4 superpacket with `ENOMEM` (validating the
///   DODGY GSO skb, it parses IPv4 at the network header, which AF_PACKET
///   put right after the Ethernet header: on the 802.1ad tag) and nothing
///   arrives. A "send tagged superpackets with the L3 protocol" mode would
///   break them.
/// - with `tso off` on the sending end the kernel segments the QinQ
///   superpacket in software: 30 frames of 1474 bytes (1470 captured, the
///   outer tag in metadata). (With MSS 1448 the segments are 1522 bytes and
///   a peer at MTU 1500 drops them: `is_skb_forwardable` allows MTU + 18.)
#[test]
fn qinq_superpacket_crosses_veth_whole() {
    if !privileged("qinq_superpacket_crosses_veth_whole") {
        return;
    }
    let ns = quiet_ns(PREFIX);
    ns.add_veth("spq1", "spq2", Some(1600)).unwrap();
    common::links_up_and_running(&ns, &["spq1", "spq2"]);
    let mut cap = PacketSocket::open_in(&ns, "spq2", &capture_cfg()).unwrap();
    let mut tx = PacketSocket::open_in(&ns, "spq1", &PacketSocketConfig::default()).unwrap();
    let qinq = |transport, v6| {
        let spec = FlowSpec::new(transport, v6, 3).with_vlans(&[(0x88a8, 100), (0x8100, 10)]).unwrap();
        let pkt = Flow::new(spec).superpacket(30 * 1400, 1400, TcpFlags::PSH).unwrap();
        let bytes = pkt.to_vec();
        let hdr = VirtioNetHdr::from_meta(&pkt.meta, &bytes, false).unwrap();
        (hdr, bytes)
    };
    for (label, transport, v6, gso) in [
        ("tcp4", Transport::Tcp, false, GSO_TCPV4),
        ("tcp6", Transport::Tcp, true, GSO_TCPV6),
        ("udp4", Transport::Udp, false, GSO_UDP_L4),
    ] {
        let (hdr, bytes) = qinq(transport, v6);
        assert_eq!(&bytes[12..14], &[0x88, 0xa8]);
        tx.send(&hdr, &[&bytes]).unwrap();
        let got = capture_all(&mut cap);
        assert_eq!(got.len(), 1, "{label}: one skb");
        let (info, frame) = &got[0];
        assert_eq!((info.hdr.gso_type, info.hdr.gso_size), (gso, 1400), "{label}: {info:?}");
        assert_eq!(info.hdr.flags & F_NEEDS_CSUM, F_NEEDS_CSUM, "{label}: {info:?}");
        let v = info.vlan.expect("outer tag in metadata");
        assert_eq!((v.tpid, v.tci & 0xfff), (0x88a8, 100), "{label}");
        assert!(with_tag(info, frame) == bytes, "{label}: bytes intact, tags included");
        eprintln!("{label}: {info:?}");
    }

    let (hdr, bytes) = qinq(Transport::Tcp, false);
    let e = tx.send_as(&hdr, &[&bytes], 0x0800).expect_err("L3 protocol refused");
    assert_eq!(e.raw_os_error(), Some(libc::ENOMEM), "{e}");
    assert!(capture_all(&mut cap).is_empty());

    ns.set_offloads("spq1", &[("tso", "off")]).unwrap();
    tx.send(&hdr, &[&bytes]).unwrap();
    let got = capture_all(&mut cap);
    assert_eq!(got.len(), 30, "tso off: segmented");
    assert!(got.iter().all(|(i, f)| i.hdr.gso_type == GSO_NONE && f.len() == 74 - 4 + 1400), "{:?}", got[0].0);
}

/// A blocking receive that a signal interrupts is retried, not reported as
/// an error (a CI run saw `recvmsg (spvb): Interrupted system call` fail a
/// capture). Stopping and continuing a process makes a receive with a
/// timeout (`SO_RCVTIMEO`) fail with EINTR even without a signal handler
/// (signal(7)), so a child shell stops and continues this test process
/// while it waits for a frame sent a second later.
#[test]
fn a_receive_interrupted_by_a_signal_is_retried() {
    if !privileged("a_receive_interrupted_by_a_signal_is_retried") {
        return;
    }
    let (ns_a, ns_b, _veth) = veth_pair("spia", "spib");
    let cfg = PacketSocketConfig { recv_timeout: Some(Duration::from_secs(5)), ..capture_cfg() };
    let mut cap = PacketSocket::open_in(&ns_b, "spib", &cfg).unwrap();
    let mut tx = PacketSocket::open_in(&ns_a, "spia", &PacketSocketConfig::default()).unwrap();
    let frame = mtu_frame(&mut [tcp_flow(0)], 0);
    let pid = std::process::id();
    let mut stopper = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("sleep 0.3; kill -STOP {pid}; sleep 0.2; kill -CONT {pid}"))
        .spawn()
        .expect("sh");
    let sent = frame.clone();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        tx.send(&VirtioNetHdr::default(), &[&sent]).unwrap();
    });
    let t0 = Instant::now();
    let mut buf = vec![0u8; 65536];
    let got = loop {
        match cap.recv_info(&mut buf) {
            Ok(info) if buf[6..11] == FLOW_SRC_MAC[..5] => break buf[..info.len].to_vec(),
            Ok(_) => {}
            Err(e) => panic!("receive across a stop and continue: {e}"),
        }
    };
    assert!(stopper.wait().expect("sh").success(), "the stop/continue shell failed");
    sender.join().unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(900), "the frame came before the stop: nothing was interrupted");
    assert_eq!(got, frame);
}
