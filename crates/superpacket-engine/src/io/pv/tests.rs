//! In-process tests of the pv link: both ends in one process, each with its
//! own mapping of the region, connected by the real handshake.

use super::proto::{self, SeqListener};
use super::ring::{DESC_F_INDIRECT, DESC_F_NEXT, DESC_F_WRITE, DESC_SIZE, Desc, RegionLayout};
use super::rx::RxForm;
use super::tx::{MAX_DIRECT_FRAME, TxError, TxForm, TxStrategy, VNET_HDR_LEN};
use super::*;
use std::sync::atomic::Ordering;
use std::time::Duration;
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;

const T: Duration = Duration::from_secs(5);

/// (engine end, client end).
fn pair(server: PvServerConfig, client: PvClientConfig) -> Result<(PvLink, PvLink), PvError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pv.sock");
    let l = SeqListener::bind(&path).unwrap();
    let p2 = path.clone();
    let t = std::thread::spawn(move || PvLink::connect(&p2, &client));
    let sock = accept_one(&l, T).unwrap();
    let engine = PendingAttach::start(sock, &server).unwrap().complete(&server, T);
    let client = t.join().unwrap();
    Ok((engine?, client?))
}

fn default_pair() -> (PvLink, PvLink) {
    pair(PvServerConfig::default(), PvClientConfig::default()).unwrap()
}

/// Packets as a stack hands them over: partial checksums, some superpackets.
fn packets() -> Vec<Packet> {
    let mut v = Vec::new();
    let mut idx = 0;
    for (t, v6) in [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false), (Transport::Udp, true)] {
        for tags in [&[][..], &[(0x8100, 7)][..], &[(0x88a8, 100), (0x8100, 7)][..]] {
            idx += 1;
            let spec = FlowSpec::new(t, v6, idx).with_vlans(tags).unwrap();
            let mut f = Flow::new(spec);
            for len in [1usize, 64, 1000, 1400, 2000] {
                v.push(f.superpacket(len, 9000, TcpFlags::PSH).unwrap());
            }
            v.push(f.superpacket(30_000, if t == Transport::Tcp { 1448 } else { 1400 }, TcpFlags::PSH).unwrap());
            // A frame whose checksum is already complete.
            let frame = f.frame(200, TcpFlags::PSH).unwrap();
            v.push(Packet::from_frame(&frame));
        }
    }
    v
}

/// The frame the receiver must see: the sent bytes, with the checksum
/// completed when the receiver got it complete.
fn expected(sent: &Packet, got_meta: &OffloadMeta) -> Vec<u8> {
    let mut b = sent.to_vec();
    if let (ChecksumState::Partial { start, offset }, false) =
        (sent.meta.csum, matches!(got_meta.csum, ChecksumState::Partial { .. }))
    {
        superpacket::csum::complete_partial(&mut b, start as usize, offset as usize, offset == 6).unwrap();
    }
    b
}

fn check_received(sent: &Packet, f: &RxFrame, bytes: &[u8]) {
    assert_eq!(bytes, &expected(sent, &f.meta)[..], "bytes differ ({:?})", f.form);
    let mut problems = Vec::new();
    validate_frame(bytes, Medium::Ethernet, &f.meta, false, &mut problems);
    assert!(problems.is_empty(), "{:?} {:?}: {problems:?}", f.form, f.meta);
    assert_eq!(f.meta.gso_size, sent.meta.gso_size);
    assert_eq!(f.meta.gso_type.protocol(), sent.meta.gso_type.protocol());
}

/// Sends `p` from `from`, receives it at `to`, checks it; returns the forms.
fn roundtrip(from: &mut PvLink, to: &mut PvLink, p: &Packet, more: bool) -> (TxForm, RxForm) {
    let before = from.tx_stats().clone();
    from.send_packet(p, more).unwrap();
    from.flush().unwrap();
    let after = from.tx_stats();
    let tx = if after.direct > before.direct {
        TxForm::Direct
    } else if after.direct_offload > before.direct_offload {
        TxForm::DirectOffload
    } else if after.direct_swcsum > before.direct_swcsum {
        TxForm::DirectSwCsum
    } else if after.indirect_swcsum > before.indirect_swcsum {
        TxForm::IndirectSwCsum
    } else if after.indirect_hdr_info > before.indirect_hdr_info {
        TxForm::IndirectHdrInfo
    } else {
        TxForm::Indirect
    };
    let mut buf = Vec::new();
    let f = to.recv(&mut buf).unwrap().expect("frame arrived");
    check_received(p, &f, &buf);
    assert_eq!(to.recv(&mut buf).unwrap(), None);
    (tx, f.form)
}

#[test]
fn every_strategy_delivers_checksum_valid_frames_in_the_forms_of_the_policy() {
    let (mut engine, mut client) = default_pair();
    assert_eq!(engine.features(), proto::ALL_FEATURES);
    for strategy in TxStrategy::ALL {
        client.set_strategy(strategy);
        engine.set_strategy(strategy);
        for p in packets() {
            for more in [false, true] {
                let partial = matches!(p.meta.csum, ChecksumState::Partial { .. });
                let fits = p.len() <= MAX_DIRECT_FRAME;
                let gso = p.meta.is_gso();
                let want = match (strategy, partial, gso, fits, more) {
                    (_, false, _, true, _) => TxForm::Direct,
                    (_, false, _, false, _) => TxForm::Indirect,
                    (TxStrategy::DirectNoCsum, _, true, _, _) => TxForm::Indirect,
                    (TxStrategy::DirectNoCsum, _, _, true, _) => TxForm::DirectOffload,
                    (TxStrategy::DirectNoCsum, _, _, false, _) => TxForm::Indirect,
                    (TxStrategy::SwCsumDirect, _, false, true, false) => TxForm::DirectSwCsum,
                    _ => TxForm::IndirectHdrInfo,
                };
                for dir in 0..2 {
                    let (a, b) = if dir == 0 { (&mut client, &mut engine) } else { (&mut engine, &mut client) };
                    let (tx, rx) = roundtrip(a, b, &p, more);
                    assert_eq!(tx, want, "{strategy:?} partial {partial} gso {gso} fits {fits} more {more}");
                    let want_rx = match tx {
                        TxForm::Direct | TxForm::DirectOffload | TxForm::DirectSwCsum => RxForm::Direct,
                        TxForm::IndirectHdrInfo => RxForm::IndirectHdrInfo,
                        _ => RxForm::Indirect,
                    };
                    assert_eq!(rx, want_rx);
                }
            }
        }
    }
    // Only the unsafe strategy offloaded without the header information.
    let s = engine.rx_stats();
    assert!(s.csum_without_hdr_info > 0);
    assert_eq!(s.csum_without_hdr_info, client.tx_stats().csum_without_hdr_info);
    assert!(s.drops.is_empty(), "{:?}", s.drops);
}

#[test]
fn without_header_info_every_strategy_offloads_direct() {
    let server = PvServerConfig { features: proto::ALL_FEATURES & !proto::F_GUEST_HDRLEN, ..Default::default() };
    let (mut engine, mut client) = pair(server, PvClientConfig::default()).unwrap();
    let p = Flow::new(FlowSpec::new(Transport::Udp, false, 1)).superpacket(64, 9000, TcpFlags::empty()).unwrap();
    for strategy in TxStrategy::ALL {
        client.set_strategy(strategy);
        assert_eq!(roundtrip(&mut client, &mut engine, &p, false), (TxForm::DirectOffload, RxForm::Direct));
    }
    assert_eq!(engine.rx_stats().csum_without_hdr_info, 0, "nothing was required");
}

#[test]
fn a_client_without_offloads_gets_software_checksums_and_segments() {
    // The client takes no partial checksums and no GSO from the engine, and
    // offers none: the engine segments and checksums in software.
    let want = proto::ALL_FEATURES & !(proto::F_GUEST_CSUM | proto::F_CSUM);
    let (mut engine, mut client) =
        pair(PvServerConfig::default(), PvClientConfig { features: want, ..Default::default() }).unwrap();
    assert_eq!(client.features() & (proto::F_GUEST_TSO4 | proto::F_HOST_TSO4 | proto::F_GUEST_HDRLEN), 0);
    let mut f = Flow::new(FlowSpec::new(Transport::Tcp, false, 3));
    let sp = f.superpacket(20_000, 1448, TcpFlags::PSH).unwrap();
    engine.send_packet(&sp, false).unwrap();
    let mut buf = Vec::new();
    let mut payload = 0;
    let mut n = 0;
    while let Some(fr) = client.recv(&mut buf).unwrap() {
        let frame = &buf[buf.len() - fr.len..];
        assert!(!fr.meta.is_gso() && !matches!(fr.meta.csum, ChecksumState::Partial { .. }));
        let mut problems = Vec::new();
        validate_frame(frame, Medium::Ethernet, &fr.meta, false, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        payload += superpacket::wire::FrameHeaders::parse(frame).unwrap().payload_len;
        n += 1;
    }
    assert_eq!((n, payload), (20_000usize.div_ceil(1448), 20_000));
    // The other way: a lone partial packet from the client is completed in
    // software whatever the strategy (the engine takes no partial checksums).
    let p = f.superpacket(100, 9000, TcpFlags::PSH).unwrap();
    for strategy in TxStrategy::ALL {
        client.set_strategy(strategy);
        assert_eq!(roundtrip(&mut client, &mut engine, &p, false), (TxForm::DirectSwCsum, RxForm::Direct));
    }
    assert_eq!(client.tx_stats().swcsum_fallback, 3);
}

#[test]
fn negotiation_refusals_reach_the_client() {
    // The engine offers nothing optional; the client cannot ask for more.
    let server = PvServerConfig { features: proto::REQUIRED, ..Default::default() };
    let (engine, client) = pair(server.clone(), PvClientConfig::default()).unwrap();
    assert_eq!((engine.features(), client.features()), (proto::REQUIRED, proto::REQUIRED));
    // A client that does not want indirect descriptors is refused.
    let cfg = PvClientConfig { features: proto::ALL_FEATURES & !proto::F_RING_INDIRECT_DESC, ..Default::default() };
    match pair(PvServerConfig::default(), cfg) {
        Err(PvError::Refused(r)) => assert!(r.contains("RING_INDIRECT_DESC"), "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // A ring size that is not a power of two is refused.
    let cfg = PvClientConfig { ring: Some(100), ..Default::default() };
    match pair(PvServerConfig::default(), cfg) {
        Err(PvError::Refused(r)) => assert!(r.contains("ring size 100"), "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn full_ring_wrap_around_and_notification_suppression() {
    for event_idx in [true, false] {
        let features = if event_idx { proto::ALL_FEATURES } else { proto::ALL_FEATURES & !proto::F_RING_EVENT_IDX };
        let cfg = PvClientConfig { ring: Some(8), features, ..Default::default() };
        let (mut engine, mut client) = pair(PvServerConfig::default(), cfg).unwrap();
        let mut flow = Flow::new(FlowSpec::new(Transport::Udp, false, 9));
        let mut frame = Vec::new();
        flow.frame_into(18, TcpFlags::empty(), &mut frame).unwrap();
        let meta = OffloadMeta::default();
        // Full: 8 frames fit, the 9th does not, one receive makes room.
        for i in 0..8 {
            client.send(&[&frame], &meta, i < 7).unwrap();
        }
        assert_eq!(client.tx_stats().kicks, 1, "one kick for a batch of 8");
        assert!(matches!(client.send(&[&frame], &meta, false), Err(PvError::Tx(TxError::RingFull))));
        assert!(engine.take_rx_kick());
        let mut buf = Vec::new();
        assert!(engine.recv(&mut buf).unwrap().is_some());
        client.send(&[&frame], &meta, false).unwrap();
        while engine.recv(&mut buf).unwrap().is_some() {}
        // Empty: nothing to receive; the engine sleeps with kicks enabled.
        assert_eq!(engine.rx_pending().unwrap(), 0);
        assert!(!engine.enable_rx_kicks().unwrap());
        engine.take_rx_kick();
        // 70000 frames through 8 entries: the 16-bit indices wrap. The
        // engine polls (kicks disabled) while frames keep coming.
        let kicks_before = client.tx_stats().kicks;
        engine.disable_rx_kicks().unwrap();
        let mut sent = 0u32;
        let mut got = 0u32;
        while got < 70_000 {
            while sent < 70_000 {
                frame[50..54].copy_from_slice(&sent.to_be_bytes());
                match client.send(&[&frame], &meta, false) {
                    Ok(_) => sent += 1,
                    Err(PvError::Tx(TxError::RingFull)) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            buf.clear();
            while let Some(f) = engine.recv(&mut buf).unwrap() {
                let fr = &buf[buf.len() - f.len..];
                assert_eq!(u32::from_be_bytes(fr[50..54].try_into().unwrap()), got, "in order");
                got += 1;
            }
        }
        let kicks = client.tx_stats().kicks - kicks_before;
        if event_idx {
            // The engine's avail_event stayed where it last enabled kicks:
            // one kick when the client crossed it, one more when the 16-bit
            // index came round to it again 65536 frames later, no others.
            assert_eq!(kicks, 2);
        } else {
            assert_eq!(kicks, 0, "NO_NOTIFY was set");
        }
        assert!(client.tx_stats().ring_full > 0);
    }
}

#[test]
fn waiting_sleeps_on_the_eventfd_and_wakes_on_a_frame_or_a_hang_up() {
    let (mut engine, mut client) = default_pair();
    assert!(!engine.wait_rx(Duration::from_millis(20), Duration::ZERO).unwrap(), "times out when empty");
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 1)).frame(10, TcpFlags::empty()).unwrap();
        client.send(&[&frame], &OffloadMeta::default(), false).unwrap();
        client
    });
    assert!(engine.wait_rx(T, Duration::ZERO).unwrap(), "the kick woke the engine");
    assert!(engine.take_rx_kick() || engine.stats().notify.kicks_taken > 0);
    let client = t.join().unwrap();
    let mut buf = Vec::new();
    assert!(engine.recv(&mut buf).unwrap().is_some());
    drop(client);
    assert!(matches!(engine.wait_rx(T, Duration::ZERO), Err(PvError::Disconnected)));
    assert!(matches!(engine.check_ctrl(), Err(PvError::Disconnected)));
}

/// Writes descriptor `d` at `i` of queue 0 of the client's mapping and
/// makes head `head` available.
fn inject(client: &mut PvLink, lay: &RegionLayout, i: u16, d: Desc, head: u16, idx: u16) {
    let q = lay.queues[0];
    let shm = client.shm_mut();
    let mut b = [0u8; DESC_SIZE];
    d.encode(&mut b);
    shm.copy_in(q.desc_at(i), &b).unwrap();
    shm.write_u16((q.avail + 4 + 2 * (idx % q.num) as usize) as u64, head).unwrap();
    shm.atomic_u16((q.avail + 2) as u64).unwrap().store(idx.wrapping_add(1), Ordering::Release);
}

#[test]
fn a_malicious_client_gets_drops_with_reasons_not_a_crash() {
    let (mut engine, mut client) =
        pair(PvServerConfig::default(), PvClientConfig { ring: Some(8), ..Default::default() }).unwrap();
    let lay = RegionLayout::new(8).unwrap();
    let q = lay.queues[0];
    let slot = q.slot(0);
    let table = q.table(0);
    // A valid header + frame in slot 0 for the cases that need one.
    let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 1)).frame(30, TcpFlags::empty()).unwrap();
    let mut hb = [0u8; VNET_HDR_LEN];
    VirtioNetHdr::default().emit(&mut hb, HdrLayout::MrgRxbuf, HdrByteOrder::Little).unwrap();
    client.shm_mut().copy_in(slot, &hb).unwrap();
    client.shm_mut().copy_in(slot + VNET_HDR_LEN as u64, &frame).unwrap();
    let good = Desc { addr: slot, len: (VNET_HDR_LEN + frame.len()) as u32, flags: 0, next: 0 };
    let write_table = |client: &mut PvLink, entries: &[Desc]| {
        let mut b = vec![0u8; entries.len() * DESC_SIZE];
        for (i, d) in entries.iter().enumerate() {
            d.encode(&mut b[i * DESC_SIZE..]);
        }
        client.shm_mut().copy_in(table, &b).unwrap();
    };
    let meta_only = Desc { addr: slot, len: VNET_HDR_LEN as u32, flags: DESC_F_NEXT, next: 1 };
    let data = Desc { addr: slot + VNET_HDR_LEN as u64, len: frame.len() as u32, flags: 0, next: 0 };
    let ring_bytes = (q.used, 4u32);
    type Case<'a> = (&'a str, Desc, u16, Option<Vec<Desc>>);
    let cases: Vec<Case> = vec![
        ("rx-bad-head", good, 200, None),
        ("rx-desc-out-of-bounds", Desc { addr: ring_bytes.0 as u64, len: ring_bytes.1, ..good }, 0, None),
        ("rx-desc-out-of-bounds", Desc { addr: q.end as u64 - 8, len: 100, ..good }, 0, None),
        ("rx-desc-out-of-bounds", Desc { addr: u64::MAX - 4, len: 100, ..good }, 0, None),
        ("rx-desc-write-only", Desc { flags: DESC_F_WRITE, ..good }, 0, None),
        ("rx-frame-too-short", Desc { len: 20, ..good }, 0, None),
        ("rx-bad-next", Desc { flags: DESC_F_NEXT, next: 9, ..good }, 0, None),
        ("rx-indirect-bad-len", Desc { addr: table, len: 17, flags: DESC_F_INDIRECT, next: 0 }, 0, None),
        ("rx-indirect-bad-len", Desc { addr: table, len: 0, flags: DESC_F_INDIRECT, next: 0 }, 0, None),
        ("rx-indirect-bad-len", Desc { addr: table, len: 16 * 33, flags: DESC_F_INDIRECT, next: 0 }, 0, None),
        ("rx-desc-out-of-bounds", Desc { addr: table + 8, len: 32, flags: DESC_F_INDIRECT, next: 0 }, 0, None),
        (
            "rx-indirect-with-next",
            Desc { addr: table, len: 32, flags: DESC_F_INDIRECT | DESC_F_NEXT, next: 1 },
            0,
            None,
        ),
        (
            "rx-nested-indirect",
            Desc { addr: table, len: 32, flags: DESC_F_INDIRECT, next: 0 },
            0,
            Some(vec![meta_only, Desc { flags: DESC_F_INDIRECT, ..data }]),
        ),
        (
            "rx-chain-loop",
            Desc { addr: table, len: 32, flags: DESC_F_INDIRECT, next: 0 },
            0,
            Some(vec![meta_only, Desc { flags: DESC_F_NEXT, next: 0, ..data }]),
        ),
        (
            "rx-bad-next",
            Desc { addr: table, len: 32, flags: DESC_F_INDIRECT, next: 0 },
            0,
            Some(vec![meta_only, Desc { flags: DESC_F_NEXT, next: 2, ..data }]),
        ),
    ];
    let mut idx = 0u16;
    let mut buf = Vec::new();
    for (reason, d, head, table_entries) in cases {
        if let Some(t) = table_entries {
            write_table(&mut client, &t);
        }
        inject(&mut client, &lay, 0, d, head, idx);
        idx = idx.wrapping_add(1);
        let before = engine.rx_stats().drops.get(reason).copied().unwrap_or(0);
        assert_eq!(engine.recv(&mut buf).unwrap(), None, "{reason}");
        assert_eq!(
            engine.rx_stats().drops.get(reason).copied().unwrap_or(0),
            before + 1,
            "{reason}: {:?}",
            engine.rx_stats().drops
        );
        assert!(buf.is_empty());
    }
    // Header information that lies about the frame.
    let mut meta = [0u8; 20];
    let lie = VirtioNetHdr { hdr_len: 14 + 20 + 20, ..VirtioNetHdr::default() };
    lie.emit(&mut meta, HdrLayout::MrgRxbuf, HdrByteOrder::Little).unwrap();
    super::hdrinfo::HdrInfo { l2_len: 14, l3_len: 20, l4_len: 20, l3: 4, l4: 6 }.encode(&mut meta[12..]);
    client.shm_mut().copy_in(slot + 1024, &meta).unwrap();
    let f0 = slot + VNET_HDR_LEN as u64;
    write_table(
        &mut client,
        &[
            Desc { addr: slot + 1024, len: 20, flags: DESC_F_NEXT, next: 1 },
            Desc { addr: f0, len: 14, flags: DESC_F_NEXT, next: 2 },
            Desc { addr: f0 + 14, len: 20, flags: DESC_F_NEXT, next: 3 },
            Desc { addr: f0 + 34, len: 20, flags: DESC_F_NEXT, next: 4 },
            Desc { addr: f0 + 54, len: frame.len() as u32 - 54, flags: 0, next: 0 },
        ],
    );
    inject(&mut client, &lay, 0, Desc { addr: table, len: 80, flags: DESC_F_INDIRECT, next: 0 }, 0, idx);
    idx = idx.wrapping_add(1);
    assert_eq!(engine.recv(&mut buf).unwrap(), None);
    assert_eq!(engine.rx_stats().drops.get("hdr-info-frame-mismatch"), Some(&1), "{:?}", engine.rx_stats().drops);
    // After all that, a valid frame still gets through.
    inject(&mut client, &lay, 0, good, 0, idx);
    idx = idx.wrapping_add(1);
    let f = engine.recv(&mut buf).unwrap().expect("the valid frame");
    assert_eq!(&buf[..f.len], &frame[..]);
    // A ring index far ahead is fatal for the link, not for the process.
    client.shm_mut().atomic_u16((q.avail + 2) as u64).unwrap().store(idx.wrapping_add(100), Ordering::Release);
    assert!(matches!(engine.recv(&mut buf), Err(PvError::Ring(_))));
}

#[test]
fn garbage_rings_never_panic() {
    use proptest::prelude::*;
    let (engine, client) =
        pair(PvServerConfig::default(), PvClientConfig { ring: Some(8), ..Default::default() }).unwrap();
    let (engine, client) = (std::cell::RefCell::new(engine), std::cell::RefCell::new(client));
    let lay = RegionLayout::new(8).unwrap();
    let q = lay.queues[0];
    let idx = std::cell::Cell::new(0u16);
    let mut runner = proptest::test_runner::TestRunner::default();
    let strat = (
        proptest::collection::vec(any::<u8>(), 16 * 8),
        proptest::collection::vec(any::<u8>(), 512),
        any::<u16>(),
        0u64..(q.end as u64 + 64),
    );
    runner
        .run(&strat, |(descs, table, head, addr_bias)| {
            let mut client = client.borrow_mut();
            let shm = client.shm_mut();
            shm.copy_in(q.desc_at(0), &descs).unwrap();
            shm.copy_in(q.table(0), &table).unwrap();
            // The head's descriptor points somewhere plausible.
            let mut d = Desc::decode(&descs[..16]);
            d.addr = addr_bias;
            inject(&mut client, &lay, head % 8, d, head % 9, idx.get());
            idx.set(idx.get().wrapping_add(1));
            let mut buf = Vec::new();
            let r = engine.borrow_mut().recv(&mut buf);
            prop_assert!(r.is_ok(), "{r:?}");
            Ok(())
        })
        .unwrap();
}

#[test]
fn steady_state_send_and_receive_do_not_allocate() {
    let (mut engine, mut client) = default_pair();
    let mut f = Flow::new(FlowSpec::new(Transport::Tcp, false, 4));
    let lone = f.superpacket(100, 9000, TcpFlags::PSH).unwrap();
    let sp = f.superpacket(40_000, 1448, TcpFlags::PSH).unwrap();
    let mut buf = Vec::with_capacity(70_000);
    let run = |client: &mut PvLink, engine: &mut PvLink, buf: &mut Vec<u8>| {
        for more in [false, true] {
            client.send_packet(&lone, more).unwrap();
            client.send_packet(&sp, more).unwrap();
        }
        client.flush().unwrap();
        for _ in 0..4 {
            buf.clear();
            engine.recv(buf).unwrap().unwrap();
        }
    };
    for s in TxStrategy::ALL {
        client.set_strategy(s);
        run(&mut client, &mut engine, &mut buf);
        let info = allocation_counter::measure(|| {
            for _ in 0..20 {
                run(&mut client, &mut engine, &mut buf);
            }
        });
        assert_eq!(info.count_total, 0, "{s:?}: {info:?}");
    }
}

/// Cost of one send + receive of a lone 64-byte partial packet per form, in
/// one process (no cross-CPU traffic): the work each form needs.
#[test]
#[ignore = "measurement: cargo test --release --lib pv_form_costs -- --ignored --nocapture"]
fn pv_form_costs() {
    let (mut engine, mut client) = default_pair();
    for size in [64usize, 1472] {
        let p = Flow::new(FlowSpec::new(Transport::Udp, false, 1)).superpacket(size, 9000, TcpFlags::empty()).unwrap();
        let frame = p.to_vec();
        let mut buf = Vec::with_capacity(4096);
        for round in 0..3 {
            for s in TxStrategy::ALL {
                client.set_strategy(s);
                let n = 200_000;
                let t = std::time::Instant::now();
                for _ in 0..n {
                    client.send(&[&frame], &p.meta, false).unwrap();
                    buf.clear();
                    engine.recv(&mut buf).unwrap().unwrap();
                }
                let ns = t.elapsed().as_nanos() as f64 / n as f64;
                println!("round {round} size {size} {:>16}: {ns:.0} ns per send+recv", s.name());
            }
        }
    }
}
