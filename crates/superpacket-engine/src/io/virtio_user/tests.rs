//! The frontend against the engine's own vhost-user port
//! ([`VhostUserDriver`]) in this process: the real protocol over a real
//! socket (the port's control thread answers), the rings in a shared memfd.

use super::*;
use crate::device::features::NetdevFeatures;
use crate::device::port::PortDriver;
use crate::device::vhost_user::{VhostUserDriver, VhostUserOptions};
use std::time::Instant;
use superpacket::csum::complete_partial;
use superpacket::packet::pool::COPYBREAK;
use superpacket::packet::{ChecksumState, GsoType, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const T: Duration = Duration::from_secs(5);

struct Pair {
    port: VhostUserDriver,
    fe: VirtioUser,
    _dir: tempfile::TempDir,
}

fn pair(features: u64) -> Pair {
    pair_with(|c| c.with_features(features))
}

fn pair_with(cfg: impl FnOnce(VirtioUserConfig) -> VirtioUserConfig) -> Pair {
    pair_with_port(|o| o, cfg)
}

fn pair_with_port(
    port_opts: impl FnOnce(VhostUserOptions) -> VhostUserOptions,
    cfg: impl FnOnce(VirtioUserConfig) -> VirtioUserConfig,
) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("vu.sock");
    let mut port = VhostUserDriver::open(&port_opts(VhostUserOptions::new(&sock))).unwrap();
    let fe = VirtioUser::connect(&cfg(VirtioUserConfig::new(&sock))).unwrap();
    let t0 = Instant::now();
    // The port sees the queues once the daemon handled the first kick.
    while !port.connected() {
        assert!(t0.elapsed() < T, "the port never saw the frontend");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(port.acked_features() & !vf::VHOST_USER_F_PROTOCOL_FEATURES, fe.acked_features());
    Pair { port, fe, _dir: dir }
}

/// The next frame the port takes from the frontend's transmit queue.
fn port_recv(port: &mut VhostUserDriver) -> Packet {
    let t0 = Instant::now();
    loop {
        if let Some(p) = port.recv() {
            return p;
        }
        let mut drops = Vec::new();
        port.take_drops(&mut |r, n| drops.push((r, n)));
        assert!(drops.is_empty(), "port dropped {drops:?}");
        assert!(t0.elapsed() < T, "nothing reached the port");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The next frame the frontend receives.
fn fe_recv(p: &mut Pair, buf: &mut [u8]) -> RxFrame {
    p.port.flush();
    let t0 = Instant::now();
    loop {
        if let Some(f) = p.fe.recv(buf).unwrap() {
            return f;
        }
        assert!(t0.elapsed() < T, "nothing reached the frontend");
        p.fe.wait_rx(Duration::from_millis(10)).unwrap();
    }
}

/// Whether descriptor `fd` has input (a zero-timeout wait of an epoll
/// instance of its own).
fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut ep = crate::io::event::Epoll::new(1).unwrap();
    ep.add(fd, 0).unwrap();
    ep.wait(Duration::ZERO, |_| {}).unwrap() == 1
}

fn counter(port: &VhostUserDriver, name: &str) -> u64 {
    let mut v = None;
    port.driver_counters(&mut |n, x| {
        if n == name {
            v = Some(x);
        }
    });
    v.unwrap()
}

/// What a stack hands a driver: partial checksums, TCP and UDP superpackets.
fn packets() -> Vec<Packet> {
    let mut v = Vec::new();
    for (i, (t, v6)) in
        [(Transport::Udp, false), (Transport::Tcp, false), (Transport::Udp, true), (Transport::Tcp, true)]
            .into_iter()
            .enumerate()
    {
        let mut f = Flow::new(FlowSpec::new(t, v6, i as u32 + 1));
        v.push(f.superpacket(1000, 9000, TcpFlags::PSH).unwrap());
        let mss = if t == Transport::Tcp { 1448 } else { 1400 };
        v.push(f.superpacket(30_000, mss, TcpFlags::PSH).unwrap());
    }
    v
}

fn same_offloads(a: &OffloadMeta, b: &OffloadMeta) {
    assert_eq!(a.gso_type.protocol(), b.gso_type.protocol());
    assert_eq!(a.gso_size, b.gso_size);
    assert_eq!(
        matches!(a.csum, ChecksumState::Partial { .. }),
        matches!(b.csum, ChecksumState::Partial { .. }),
        "{a:?} {b:?}"
    );
}

#[test]
fn frames_and_superpackets_cross_both_ways_whole_in_direct_and_indirect_chains() {
    let mut p = pair(VirtioUserConfig::ALL_FEATURES);
    let hw = p.port.hw_features();
    assert!(hw.contains(NetdevFeatures::TSO | NetdevFeatures::TSO6 | NetdevFeatures::GSO_UDP_L4), "{hw:?}");
    let mut buf = vec![0u8; 70_000];
    for layout in [DescLayout::Direct, DescLayout::Indirect] {
        for sent in packets() {
            let bytes = sent.to_vec();
            let descs = counter(&p.port, "rx_descs");
            p.fe.send_meta(&sent.meta, &bytes, layout, false).unwrap();
            let got = port_recv(&mut p.port);
            assert_eq!(got.to_vec(), bytes, "{layout:?} {:?}", sent.meta);
            same_offloads(&got.meta, &sent.meta);
            let per_chain = if layout == DescLayout::Direct { 1 } else { 2 };
            assert_eq!(counter(&p.port, "rx_descs") - descs, per_chain);
            // And back: the port hands it to a guest that takes every offload.
            p.port.xmit(got).unwrap();
            let f = fe_recv(&mut p, &mut buf);
            assert_eq!(&buf[..f.len], &bytes[..], "{layout:?} {:?}", sent.meta);
            same_offloads(&f.meta(&buf).unwrap(), &sent.meta);
            assert_eq!(f.hdr.num_buffers, f.buffers);
            assert_eq!(usize::from(f.buffers), (bytes.len() + 12).div_ceil(MRG_RX_BUF as usize));
        }
    }
    let s = p.fe.stats();
    assert_eq!((s.tx_direct, s.tx_indirect, s.rx_frames), (8, 8, 16));
    assert_eq!((s.tx_superpackets, s.rx_superpackets), (8, 8));
}

#[test]
fn an_indirect_table_carries_the_frame_in_several_parts() {
    let mut p = pair(VirtioUserConfig::ALL_FEATURES);
    let sent = Flow::new(FlowSpec::new(Transport::Udp, false, 9)).superpacket(3000, 1000, TcpFlags::PSH).unwrap();
    let bytes = sent.to_vec();
    let hdr = VirtioNetHdr::from_meta(&sent.meta, &bytes, false).unwrap();
    let parts = [&bytes[..14], &[][..], &bytes[14..1000], &bytes[1000..]];
    let descs = counter(&p.port, "rx_descs");
    p.fe.send(&hdr, &parts, DescLayout::Indirect, false).unwrap();
    let got = port_recv(&mut p.port);
    assert_eq!(got.to_vec(), bytes);
    assert!(got.meta.gso_type.contains(GsoType::UDP_L4), "{:?}", got.meta);
    // The header and the three non-empty parts.
    assert_eq!(counter(&p.port, "rx_descs") - descs, 4);
    let too_many = [&bytes[..1]; MAX_TX_PARTS + 1];
    assert!(matches!(p.fe.send(&hdr, &too_many, DescLayout::Indirect, false), Err(VirtioUserError::TxTooBig { .. })));
}

#[test]
fn a_frontend_without_guest_offloads_gets_a_port_without_them() {
    let no_guest_offloads = VirtioUserConfig::ALL_FEATURES
        & !(vf::GUEST_USO4 | vf::GUEST_USO6 | vf::GUEST_TSO4 | vf::GUEST_TSO6 | vf::GUEST_ECN);
    let mut p = pair(no_guest_offloads);
    let hw = p.port.hw_features();
    assert!(hw.contains(NetdevFeatures::HW_CSUM));
    assert!(!hw.intersects(NetdevFeatures::TSO | NetdevFeatures::GSO_UDP_L4), "{hw:?}");
    // A superpacket that reaches the port anyway is refused, not handed over.
    let sp = Flow::new(FlowSpec::new(Transport::Udp, false, 3)).superpacket(5000, 1000, TcpFlags::PSH).unwrap();
    let e = p.port.xmit(sp).unwrap_err();
    assert_eq!(e.reason, "vhost-guest-lacks-offload");
}

#[test]
fn without_mrg_rxbuf_a_superpacket_arrives_in_one_large_buffer() {
    let mut p = pair(VirtioUserConfig::ALL_FEATURES & !vf::MRG_RXBUF);
    assert_eq!(p.fe.hdr_len(), 12, "VERSION_1 keeps the 12-byte header");
    let sent = Flow::new(FlowSpec::new(Transport::Tcp, false, 4)).superpacket(60_000, 1448, TcpFlags::PSH).unwrap();
    let bytes = sent.to_vec();
    p.port.xmit(sent).unwrap();
    let mut buf = vec![0u8; 70_000];
    let f = fe_recv(&mut p, &mut buf);
    assert_eq!((f.buffers, &buf[..f.len]), (1, &bytes[..]));
    assert_eq!(f.meta(&buf).unwrap().gso_size, 1448);
}

#[test]
fn indirect_chains_need_indirect_desc_and_the_caller_buffer_must_hold_the_frame() {
    let mut p = pair(VirtioUserConfig::ALL_FEATURES & !vf::INDIRECT_DESC);
    let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 5)).frame(100, TcpFlags::PSH).unwrap();
    let hdr = VirtioNetHdr::default();
    let e = p.fe.send(&hdr, &[&frame], DescLayout::Indirect, false).unwrap_err();
    assert!(matches!(e, VirtioUserError::NotNegotiated("INDIRECT_DESC")), "{e}");
    p.port.xmit(Packet::from_frame(&frame)).unwrap();
    p.port.flush();
    let mut small = [0u8; 16];
    let t0 = Instant::now();
    let e = loop {
        match p.fe.recv(&mut small) {
            Ok(None) => assert!(t0.elapsed() < T, "nothing reached the frontend"),
            other => break other.unwrap_err(),
        }
        p.fe.wait_rx(Duration::from_millis(10)).unwrap();
    };
    assert!(matches!(e, VirtioUserError::RxTooBig { room: 16, .. }), "{e}");
    // The frame was consumed and its buffer posted again: the next one fits.
    p.port.xmit(Packet::from_frame(&frame)).unwrap();
    let mut buf = vec![0u8; 2048];
    let f = fe_recv(&mut p, &mut buf);
    assert_eq!(&buf[..f.len], &frame[..]);
}

#[test]
fn the_transmit_queue_fills_and_empties_again() {
    let mut p = pair_with(|c| VirtioUserConfig { queue_size: 64, ..c });
    let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 6)).frame(64, TcpFlags::PSH).unwrap();
    let hdr = VirtioNetHdr::default();
    for _ in 0..64 {
        p.fe.send(&hdr, &[&frame], DescLayout::Direct, true).unwrap();
    }
    let e = p.fe.send(&hdr, &[&frame], DescLayout::Direct, false).unwrap_err();
    assert!(matches!(e, VirtioUserError::TxFull), "{e}");
    p.fe.flush_tx().unwrap();
    for _ in 0..64 {
        assert_eq!(port_recv(&mut p.port).to_vec(), frame);
    }
    // The port gives chains back per burst: at the end of the engine round
    // (flush) or at an empty poll, not per frame; then the queue has room.
    let e = p.fe.send(&hdr, &[&frame], DescLayout::Direct, false).unwrap_err();
    assert!(matches!(e, VirtioUserError::TxFull), "{e}");
    p.port.flush();
    p.fe.send(&hdr, &[&frame], DescLayout::Direct, false).unwrap();
    assert_eq!(port_recv(&mut p.port).to_vec(), frame);
    assert_eq!(p.fe.stats().tx_frames, 65);
}

#[test]
fn the_transmit_policy_picks_the_form_and_the_port_gets_the_same_bytes() {
    let mut p = pair(VirtioUserConfig::ALL_FEATURES);
    let mut flow = Flow::new(FlowSpec::new(Transport::Udp, false, 7));
    let lone = flow.superpacket(200, 9000, TcpFlags::PSH).unwrap();
    let gso = flow.superpacket(5000, 1000, TcpFlags::PSH).unwrap();
    let cases = [
        (TxStrategy::SwCsumDirect, &lone, false, TxForm::DirectSwCsum, 1),
        (TxStrategy::SwCsumDirect, &lone, true, TxForm::IndirectOffload, 2),
        (TxStrategy::SwCsumDirect, &gso, false, TxForm::IndirectOffload, 2),
        (TxStrategy::OffloadIndirect, &lone, false, TxForm::IndirectOffload, 2),
        (TxStrategy::DirectNoCsum, &lone, false, TxForm::DirectOffload, 1),
    ];
    for (strategy, sent, more, form, descs) in cases {
        let mut bytes = sent.to_vec();
        let before = counter(&p.port, "rx_descs");
        assert_eq!(p.fe.send_with(strategy, &mut bytes, &sent.meta, more).unwrap(), form, "{strategy:?}");
        p.fe.flush_tx().unwrap();
        let got = port_recv(&mut p.port);
        assert_eq!(counter(&p.port, "rx_descs") - before, descs, "{strategy:?} {form:?}");
        // What the port took is what was sent, its checksum completed
        // either by the frontend or as the port's partial checksum says.
        let mut expected = sent.to_vec();
        let mut received = got.to_vec();
        for (b, m) in [(&mut expected, &sent.meta), (&mut received, &got.meta)] {
            if let ChecksumState::Partial { start, offset } = m.csum {
                complete_partial(b, usize::from(start), usize::from(offset), offset == 6).unwrap();
            }
        }
        assert_eq!(received, expected, "{strategy:?}");
        assert_eq!(matches!(got.meta.csum, ChecksumState::Partial { .. }), form != TxForm::DirectSwCsum);
    }
}

/// Warm steady state in both directions, a lone packet and a superpacket
/// with each strategy, batched and not: neither the frontend nor the port
/// allocates (`superpacket::packet::pool`): a frame of at most `COPYBREAK`
/// bytes gets a recycled small buffer, a superpacket a recycled pool
/// buffer.
#[test]
fn steady_state_allocates_nothing() {
    let mut p = pair(VirtioUserConfig::ALL_FEATURES);
    let mut f = Flow::new(FlowSpec::new(Transport::Tcp, false, 4));
    let frames: Vec<(Vec<u8>, OffloadMeta)> =
        [f.superpacket(100, 9000, TcpFlags::PSH), f.superpacket(40_000, 1448, TcpFlags::PSH)]
            .into_iter()
            .map(|sp| {
                let sp = sp.unwrap();
                (sp.to_vec(), sp.meta)
            })
            .collect();
    let mut scratch = Vec::with_capacity(70_000);
    let mut buf = vec![0u8; 70_000];
    let mut run = |p: &mut Pair, s: TxStrategy| {
        for more in [false, true] {
            for (bytes, meta) in &frames {
                scratch.clear();
                scratch.extend_from_slice(bytes);
                p.fe.send_with(s, &mut scratch, meta, more).unwrap();
            }
        }
        p.fe.flush_tx().unwrap();
        for _ in 0..4 {
            let pkt = port_recv(&mut p.port);
            p.port.xmit(pkt).unwrap();
        }
        for _ in 0..4 {
            fe_recv(p, &mut buf);
        }
    };
    let small = frames.iter().filter(|(b, _)| b.len() <= COPYBREAK).count() as u64;
    assert_eq!(small, 1);
    for s in TxStrategy::ALL {
        run(&mut p, s);
        let info = allocation_counter::measure(|| {
            for _ in 0..20 {
                run(&mut p, s);
            }
        });
        assert_eq!(info.count_total, 0, "{s:?}: {info:?}");
    }
}

/// Busy polling (`busy_poll_us`): while the window lasts an empty transmit
/// queue leaves the guest's kicks off and asks the worker to poll again; once
/// it has run out, kicks are on and the worker may sleep. Without it, kicks
/// are on at the first empty poll.
#[test]
fn a_busy_polling_port_keeps_the_guests_kicks_off_until_its_window_runs_out() {
    let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 6)).frame(64, TcpFlags::PSH).unwrap();
    let hdr = VirtioNetHdr::default();
    // Sends one frame; true if the frontend kicked for it.
    let send_kicked = |p: &mut Pair| {
        let before = p.fe.stats().tx_kicks;
        p.fe.send(&hdr, &[&frame], DescLayout::Direct, false).unwrap();
        p.fe.stats().tx_kicks > before
    };
    let window = Duration::from_millis(20);
    let mut p = pair_with_port(|o| VhostUserOptions { busy_poll: window, ..o }, |c| c);
    assert!(send_kicked(&mut p));
    // The kick reaches the port's wake-up descriptor through its control thread.
    let fd = p.port.poll_fd().unwrap();
    let t0 = Instant::now();
    while !readable(fd) {
        assert!(t0.elapsed() < T, "the kick never woke the port");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(port_recv(&mut p.port).to_vec(), frame);
    assert!(p.port.recv().is_none());
    assert!(p.port.wants_poll(), "inside the window the worker polls again");
    // Polling reads no descriptor (no system call per empty poll).
    assert!(readable(fd) && counter(&p.port, "wakeups") == 0, "the wake-up was read while polling");
    assert!(!send_kicked(&mut p), "inside the window the guest does not kick");
    assert_eq!(port_recv(&mut p.port).to_vec(), frame);
    // The window's clock is read at every IDLE_POLLS_PER_CLOCK_READ-th
    // empty poll: the first read starts its timing, and the first read
    // after it has run out ends it.
    let per_read = crate::device::vhost_user::IDLE_POLLS_PER_CLOCK_READ;
    for _ in 0..per_read {
        assert!(p.port.recv().is_none());
        assert!(p.port.wants_poll(), "inside the window the worker polls again");
    }
    std::thread::sleep(window * 3);
    let polls_to_end = (1..=per_read).find(|_| {
        assert!(p.port.recv().is_none());
        !p.port.wants_poll()
    });
    assert_eq!(polls_to_end, Some(per_read), "after the window the worker may sleep, at the next clock read");
    assert!(!readable(fd) && counter(&p.port, "wakeups") == 1, "the window's end takes the wake-up");
    assert!(send_kicked(&mut p), "after the window the guest kicks");
    assert_eq!(port_recv(&mut p.port).to_vec(), frame);

    let mut p = pair_with(|c| c);
    send_kicked(&mut p);
    assert_eq!(port_recv(&mut p.port).to_vec(), frame);
    assert!(p.port.recv().is_none());
    assert!(!p.port.wants_poll());
    assert!(send_kicked(&mut p), "without busy polling kicks are on at the first empty poll");
}

#[test]
fn a_held_burst_is_placed_at_the_flush_in_order_and_a_full_one_at_once() {
    use crate::device::vhost_user::RX_BURST;
    let mut p = pair(VirtioUserConfig::ALL_FEATURES);
    let mut buf = vec![0u8; 70_000];
    let mut flow = Flow::new(FlowSpec::new(Transport::Udp, false, 7));
    // Frames told apart by their length; a superpacket among them.
    let mut sent: Vec<Packet> =
        (0..RX_BURST + 3).map(|i| Packet::from_frame(&flow.frame(64 + i, TcpFlags::PSH).unwrap())).collect();
    sent[5] = flow.superpacket(30_000, 1400, TcpFlags::PSH).unwrap();
    p.port.hold_tx();
    for (i, pkt) in sent.iter().take(RX_BURST).enumerate() {
        p.port.xmit(pkt.clone()).unwrap();
        assert_eq!(counter(&p.port, "tx_frames"), 0, "frame {i} held");
    }
    // One more: the full burst is placed, the new frame held.
    for pkt in &sent[RX_BURST..] {
        p.port.xmit(pkt.clone()).unwrap();
    }
    assert_eq!(counter(&p.port, "tx_frames"), RX_BURST as u64);
    p.port.flush();
    assert_eq!(counter(&p.port, "tx_frames"), sent.len() as u64);
    for (i, pkt) in sent.iter().enumerate() {
        let f = fe_recv(&mut p, &mut buf);
        assert_eq!(&buf[..f.len], &pkt.to_vec()[..], "frame {i} in order");
        same_offloads(&f.meta(&buf).unwrap(), &pkt.meta);
    }
    // After the flush, frames are placed as they come again.
    p.port.xmit(sent[0].clone()).unwrap();
    assert_eq!(counter(&p.port, "tx_frames"), sent.len() as u64 + 1);
    let mut drops = Vec::new();
    p.port.take_drops(&mut |r, n| drops.push((r, n)));
    assert!(drops.is_empty(), "{drops:?}");
}

/// A run the graph gives in a burst ([`PortDriver::xmit_burst`]): with
/// nothing held it is placed at once, its slots left empty for the caller
/// to drop; behind held frames it is held too; behind a backlog it waits
/// there; without a guest each frame is refused. The frontend gets every
/// frame in the order given.
#[test]
fn a_burst_run_is_placed_at_once_unless_frames_wait_before_it() {
    let mut p = pair_with(|c| VirtioUserConfig { queue_size: 8, ..c });
    let mut buf = vec![0u8; 70_000];
    let mut flow = Flow::new(FlowSpec::new(Transport::Udp, false, 9));
    let frames: Vec<Packet> =
        (0..16).map(|i| Packet::from_frame(&flow.frame(64 + i, TcpFlags::PSH).unwrap())).collect();
    let burst = |p: &mut Pair, pkts: &[Packet]| {
        let mut slots = pkts.to_vec();
        let lens: Vec<usize> = slots.iter().map(Packet::total_len).collect();
        let mut refused = Vec::new();
        p.port.xmit_burst(&mut slots, &lens, &mut |r| refused.push(r));
        assert!(refused.is_empty(), "{refused:?}");
        assert!(slots.iter().all(|s| s.is_empty()), "every slot left without bytes");
    };
    let mut want = Vec::new();
    // Nothing held: placed at once; a frame after it is held to the flush.
    p.port.hold_tx();
    burst(&mut p, &frames[..3]);
    assert_eq!(counter(&p.port, "tx_frames"), 3, "placed at once");
    p.port.xmit(frames[3].clone()).unwrap();
    assert_eq!(counter(&p.port, "tx_frames"), 3);
    want.extend_from_slice(&frames[..4]);
    // Behind a held frame: held with it, in order.
    p.port.xmit(frames[4].clone()).unwrap();
    burst(&mut p, &frames[5..7]);
    assert_eq!(counter(&p.port, "tx_frames"), 3, "held behind the held frames");
    p.port.flush();
    assert_eq!(counter(&p.port, "tx_frames"), 7);
    want.extend_from_slice(&frames[4..7]);
    // The guest's 8 buffers: one left; the rest of a run waits in the
    // backlog, and a later run behind it.
    p.port.hold_tx();
    burst(&mut p, &frames[7..10]);
    assert_eq!((counter(&p.port, "tx_frames"), counter(&p.port, "backlog")), (8, 2));
    burst(&mut p, &frames[10..12]);
    assert_eq!((counter(&p.port, "tx_frames"), counter(&p.port, "backlog")), (8, 4));
    want.extend_from_slice(&frames[7..12]);
    for (i, pkt) in want.iter().enumerate() {
        let f = fe_recv(&mut p, &mut buf);
        assert_eq!(&buf[..f.len], &pkt.to_vec()[..], "frame {i} in order");
    }
    assert_eq!((counter(&p.port, "tx_frames"), counter(&p.port, "backlog")), (12, 0));
    let mut drops = Vec::new();
    p.port.take_drops(&mut |r, n| drops.push((r, n)));
    assert!(drops.is_empty(), "{drops:?}");

    // No guest: each frame refused, as `xmit` refuses it.
    let dir = tempfile::tempdir().unwrap();
    let mut lone = VhostUserDriver::open(&VhostUserOptions::new(dir.path().join("none.sock"))).unwrap();
    lone.hold_tx();
    let mut slots = frames[..2].to_vec();
    let mut refused = Vec::new();
    let lens = [slots[0].total_len(), slots[1].total_len()];
    lone.xmit_burst(&mut slots, &lens, &mut |r| refused.push(r));
    assert_eq!(refused, ["vhost-no-guest"; 2]);
}
