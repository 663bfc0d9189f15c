//! The paravirtual link between two real processes: this test process is
//! the client ([`PvClient`]), `superpacket pv-peer device` the engine's end
//! (the code a `pv` port runs) with an echo responder. Ring correctness
//! under concurrency (wrap-around of the 16-bit indices, a full ring, an
//! empty ring), notification suppression, feature negotiation, and every
//! frame checksum-valid on the far side whichever form it took.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;
use superpacket_cli::bench::pv_tx::{DISCARD_PORT, ECHO_PORT, PeerProcess, PeerReport, reflect};
use superpacket_engine::io::pv::{PvClient, PvClientConfig, PvError, TxError, TxStrategy, proto};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn peer(dir: &Path, name: &str, args: &[&str]) -> PeerProcess {
    PeerProcess::spawn_with(Path::new(BIN), &dir.join(name), args).unwrap()
}

fn connect(sock: &Path, cfg: PvClientConfig) -> PvClient {
    let mut c = PvClient::connect(sock, &cfg).unwrap();
    c.busy_poll = Duration::from_micros(50);
    c
}

fn socket(p: &PeerProcess) -> PathBuf {
    p.socket.clone()
}

/// Echo requests of every kind: UDP and TCP, IPv4 and IPv6, 0-2 VLAN tags,
/// small to jumbo, and superpackets; all with partial checksums.
fn requests(n: usize) -> Vec<Packet> {
    let mut flows: Vec<(Flow, Transport)> = Vec::new();
    let mut i = 0;
    for t in [Transport::Udp, Transport::Tcp] {
        for v6 in [false, true] {
            for tags in [&[][..], &[(0x8100, 5)][..], &[(0x88a8, 20), (0x8100, 5)][..]] {
                i += 1;
                let mut spec = FlowSpec::new(t, v6, i).with_vlans(tags).unwrap();
                spec.dst_port = ECHO_PORT;
                flows.push((Flow::new(spec), t));
            }
        }
    }
    let sizes = [1usize, 18, 64, 200, 777, 1400, 1472, 2100, 8000];
    (0..n)
        .map(|k| {
            let (f, t) = &mut flows[k % 12];
            if k % 97 == 13 {
                let gso = if *t == Transport::Tcp { 1448 } else { 1400 };
                f.superpacket(20_000 + k % 5000, gso, TcpFlags::empty()).unwrap()
            } else {
                f.superpacket(sizes[k % sizes.len()], 9000, TcpFlags::empty()).unwrap()
            }
        })
        .collect()
}

/// The reply the peer must send for `req`, as received with `got`: the
/// reflected frame, its checksum completed if it arrived complete.
fn expected_reply(req: &Packet, got: &OffloadMeta) -> Vec<u8> {
    let mut b = req.to_vec();
    let meta = reflect(&mut b, &req.meta).expect("a TCP/UDP request");
    if let (ChecksumState::Partial { start, offset }, false) =
        (meta.csum, matches!(got.csum, ChecksumState::Partial { .. }))
    {
        superpacket::csum::complete_partial(&mut b, start as usize, offset as usize, offset == 6).unwrap();
    }
    b
}

fn check_frame(frame: &[u8], meta: &OffloadMeta) {
    let mut problems = Vec::new();
    validate_frame(frame, Medium::Ethernet, meta, false, &mut problems);
    assert!(problems.is_empty(), "{meta:?}: {problems:?}");
}

/// Sends `reqs` in pipelined batches of 1..=`max_batch` (`more` on all but
/// the last of a batch) and checks every reply; returns the batches.
fn echo_all(c: &mut PvClient, reqs: &[Packet], max_batch: usize) -> usize {
    let mut buf = Vec::new();
    let mut at = 0;
    let mut batches = 0;
    while at < reqs.len() {
        let k = (1 + (at * 7 + batches) % max_batch).min(reqs.len() - at);
        for (j, r) in reqs[at..at + k].iter().enumerate() {
            c.send_packet(r, j + 1 < k).unwrap();
        }
        batches += 1;
        for r in &reqs[at..at + k] {
            let f = c.recv_wait(&mut buf, Duration::from_secs(10)).unwrap().expect("a reply");
            assert_eq!(&buf[..f.len], &expected_reply(r, &f.meta)[..], "reply to request {at}");
            check_frame(&buf[..f.len], &f.meta);
            assert_eq!(f.meta.is_gso(), r.meta.is_gso());
        }
        at += k;
    }
    batches
}

fn finish(p: PeerProcess, c: PvClient) -> PeerReport {
    drop(c);
    p.finish().unwrap()
}

#[test]
fn echo_across_processes_in_every_form_with_wrap_around() {
    let dir = tempfile::tempdir().unwrap();
    for peer_strategy in TxStrategy::ALL {
        let p = peer(
            dir.path(),
            &format!("{}.sock", peer_strategy.name()),
            &["--verify", "--ring", "8", "--busy-poll-us", "100", "--strategy", peer_strategy.name()],
        );
        let mut c = connect(&socket(&p), PvClientConfig::default());
        assert_eq!(c.features(), proto::ALL_FEATURES);
        let reqs = requests(600);
        let mut sent = 0;
        for s in TxStrategy::ALL {
            c.set_strategy(s);
            echo_all(&mut c, &reqs, 8);
            sent += reqs.len();
        }
        // Past the 16-bit index wrap: 70000 small echoes through 8 entries.
        let small: Vec<Packet> = requests(12 * 9).into_iter().filter(|r| r.len() < 200 && !r.meta.is_gso()).collect();
        let mut reqs = Vec::new();
        while reqs.len() < 70_000 {
            reqs.extend(small.iter().cloned());
        }
        c.set_strategy(TxStrategy::SwCsumDirect);
        echo_all(&mut c, &reqs, 8);
        sent += reqs.len();
        let st = c.stats();
        assert!(st.tx.direct_swcsum > 0 && st.tx.indirect_hdr_info > 0 && st.tx.direct_offload > 0);
        assert!(st.rx.frames as usize == sent && st.rx.drops.is_empty(), "{:?}", st.rx);
        let r = finish(p, c);
        assert_eq!((r.frames as usize, r.echoed as usize, r.bad_frames), (sent, sent, 0), "{r:?}");
        assert!(r.rx_drops.is_empty(), "{r:?}");
        assert!(r.rx_direct > 0 && r.rx_indirect_hdr_info > 0 && r.rx_csum_without_hdr_info > 0, "{r:?}");
        match peer_strategy {
            TxStrategy::SwCsumDirect => assert!(r.tx_direct_swcsum > 0 && r.tx_indirect_hdr_info > 0),
            TxStrategy::OffloadIndirect => assert!(r.tx_direct_swcsum == 0 && r.tx_direct_offload == 0),
            TxStrategy::DirectNoCsum => assert!(r.tx_direct_offload > 0 && r.tx_indirect_hdr_info == 0),
        }
    }
}

#[test]
fn full_ring_with_a_stopped_peer_and_an_empty_ring() {
    let dir = tempfile::tempdir().unwrap();
    let p = peer(dir.path(), "full.sock", &["--ring", "8"]);
    let mut c = connect(&socket(&p), PvClientConfig { ring: Some(8), ..Default::default() });
    let mut spec = FlowSpec::new(Transport::Udp, false, 1);
    spec.dst_port = DISCARD_PORT;
    let pkt = Flow::new(spec).superpacket(100, 9000, TcpFlags::empty()).unwrap();
    // Empty: nothing to receive, a wait times out.
    let mut buf = Vec::new();
    assert!(c.recv(&mut buf).unwrap().is_none());
    assert!(c.recv_wait(&mut buf, Duration::from_millis(30)).unwrap().is_none());
    // SAFETY: SIGSTOP/SIGCONT to the peer this test started and owns.
    let signal = |sig| assert_eq!(unsafe { libc::kill(p.id() as i32, sig) }, 0);
    signal(libc::SIGSTOP);
    let mut accepted = 0;
    let full = loop {
        match c.link().send_packet(&pkt, false) {
            Ok(()) => accepted += 1,
            Err(e) => break e,
        }
        assert!(accepted <= 8, "more frames than ring entries");
    };
    assert!(matches!(full, PvError::Tx(TxError::RingFull)), "{full}");
    // The peer may have taken a few before it stopped; the ring holds 8.
    assert!(accepted >= 8, "accepted {accepted}");
    signal(libc::SIGCONT);
    // The peer drains the ring and calls: a blocking send gets room.
    for _ in 0..100 {
        c.send_packet(&pkt, false).unwrap();
    }
    let r = finish(p, c);
    assert_eq!(r.discarded, accepted + 100, "{r:?}");
}

#[test]
fn notifications_are_suppressed_while_the_peer_polls() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FlowSpec::new(Transport::Udp, false, 2);
    spec.dst_port = DISCARD_PORT;
    let pkt = Flow::new(spec).superpacket(64, 9000, TcpFlags::empty()).unwrap();
    for (event_idx, busy) in [(true, "2000"), (false, "2000"), (true, "0")] {
        let mut args = vec!["--busy-poll-us", busy];
        if !event_idx {
            args.push("--no-event-idx");
        }
        let p = peer(dir.path(), &format!("n-{event_idx}-{busy}.sock"), &args);
        let mut c = connect(&socket(&p), PvClientConfig::default());
        assert_eq!(c.features() & proto::F_RING_EVENT_IDX != 0, event_idx);
        // Batches of 16: at most one kick per batch, whatever the peer does.
        let batches = 1000;
        for _ in 0..batches {
            for j in 0..16 {
                c.send_packet(&pkt, j < 15).unwrap();
            }
        }
        let kicks_batched = c.stats().tx.kicks;
        assert!(kicks_batched <= batches, "{kicks_batched} kicks for {batches} batches");
        // Lone frames to a peer that polls: it does not ask for kicks.
        let t0 = Instant::now();
        let lone = 20_000;
        for _ in 0..lone {
            c.send_packet(&pkt, false).unwrap();
        }
        let kicks_lone = c.stats().tx.kicks - kicks_batched;
        let elapsed = t0.elapsed();
        let r = finish(p, c);
        assert_eq!(r.discarded, batches * 16 + lone, "{r:?}");
        assert!(r.kicks_taken <= kicks_batched + kicks_lone, "{r:?}");
        if busy != "0" {
            // Each kick needs the peer to have gone idle (>= 2 ms without
            // a frame, or descheduled); a polling peer takes the frames silently.
            let bound = lone / 4;
            assert!(
                kicks_lone < bound,
                "{kicks_lone} kicks for {lone} lone frames in {elapsed:?} (event_idx {event_idx})"
            );
        }
    }
}

#[test]
fn negotiation_with_a_peer_that_needs_no_header_info() {
    let dir = tempfile::tempdir().unwrap();
    let p = peer(dir.path(), "nohdr.sock", &["--no-header-info", "--verify"]);
    let mut c = connect(&socket(&p), PvClientConfig::default());
    assert_eq!(c.features() & proto::F_GUEST_HDRLEN, 0);
    let reqs = requests(200);
    for s in TxStrategy::ALL {
        c.set_strategy(s);
        echo_all(&mut c, &reqs, 4);
    }
    let st = c.stats().tx;
    // Offloads go direct without header info; nothing needs the indirect
    // form except frames larger than a slot.
    assert_eq!((st.direct_swcsum, st.indirect_hdr_info, st.csum_without_hdr_info), (0, 0, 0), "{st:?}");
    assert!(st.direct_offload > 0 && st.indirect > 0);
    let r = finish(p, c);
    assert_eq!((r.bad_frames, r.echoed), (0, 600), "{r:?}");

    // A client that refuses checksum offload both ways: software checksums
    // and software segmentation on both sides, still all valid.
    let p = peer(dir.path(), "nocsum.sock", &["--verify"]);
    let want = proto::ALL_FEATURES & !(proto::F_CSUM | proto::F_GUEST_CSUM);
    let mut c = connect(&socket(&p), PvClientConfig { features: want, ..Default::default() });
    assert_eq!(c.features() & (proto::F_CSUM | proto::F_HOST_TSO4 | proto::F_GUEST_TSO4), 0);
    let reqs: Vec<Packet> = requests(200).into_iter().filter(|r| !r.meta.is_gso()).collect();
    echo_all(&mut c, &reqs, 4);
    let r = finish(p, c);
    assert_eq!((r.bad_frames, r.rx_csum_partial), (0, 0), "{r:?}");

    // A ring size that is not a power of two is refused with a reason.
    let p = peer(dir.path(), "refuse.sock", &[]);
    match PvClient::connect(&socket(&p), &PvClientConfig { ring: Some(100), ..Default::default() }) {
        Err(PvError::Refused(r)) => assert!(r.contains("ring size 100"), "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let r = p.finish().unwrap();
    assert!(r.end.contains("attach failed"), "{r:?}");
}

#[test]
fn bench_pv_tx_quick_reports_every_figure_and_what_the_policy_did() {
    // The peer binary is found next to this test's `deps` directory.
    let mut steps = 0;
    let r = superpacket_cli::bench::pv_tx::run_with_progress(
        &superpacket_cli::bench::pv_tx::PvTxBenchOptions { quick: true },
        &mut |_, _, _| steps += 1,
    );
    assert_eq!(r.scenario, "pv-tx");
    assert_eq!(r.get("integrity_ok"), Some(1.0), "{}", r.to_table());
    for s in TxStrategy::ALL {
        for key in ["rr_tps", "rr_notify_tps", "stream_pps", "stream_batch_pps", "stream_tso_gbps"] {
            let v = r.get(&format!("{key}_{}", s.name())).unwrap();
            assert!(v.is_finite() && v > 0.0, "{key}_{}: {v}", s.name());
        }
    }
    for key in ["rr_swcsum_vs_indirect", "rr_swcsum_vs_nocsum", "target_swcsum_vs_indirect_pass"] {
        assert!(r.get(key).is_some(), "{key}");
    }
    // The forms: each strategy did what it says.
    assert_eq!(r.get("swcsum_direct_rr_direct_share"), Some(1.0));
    assert_eq!(r.get("offload_indirect_rr_indirect_share"), Some(1.0));
    assert_eq!(r.get("direct_nocsum_rr_direct_share"), Some(1.0));
    assert_eq!(r.get("swcsum_direct_lone_direct_share"), Some(1.0));
    let batched = r.get("swcsum_direct_batch_indirect_share").unwrap();
    assert!((batched - 31.0 / 32.0).abs() < 1e-9, "{batched}");
    assert!(steps >= 10);
    let text = superpacket_cli::bench::pv_tx::render_human(&r);
    assert!(text.contains("target rr swcsum_vs_indirect >= 1.2x"), "{text}");
}
