//! Rule tables (offload-rules 5.1-5.3, both families), fragmenter tests and
//! the property tests of offload-rules 9.3 "Reassembly".

use super::*;
use crate::packet::{ChecksumState, Packet};
use crate::traffic::{Flow, FlowSpec, Transport};
use crate::validate::{Medium, validate_frame};
use crate::wire::icmpv6::PARAM_PROBLEM_INCOMPLETE_CHAIN;
use crate::wire::{Icmpv4Packet, Icmpv6Packet, TcpFlags};
use proptest::prelude::*;

const S: u64 = 1_000_000_000;

/// An Ethernet UDP datagram with `payload` bytes, DF clear.
fn datagram(v6: bool, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Udp, v6, 3);
    spec.dont_frag = false;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

fn l3_of(frame: &[u8]) -> usize {
    14 + 4 * usize::from(frame[12] == 0x81)
}

/// The fragmenter's fragments of `frame` for an `mtu`.
fn fragments(frame: &[u8], mtu: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut f = Fragmenter::with_ids(Ipv6IdGenerator::with_seed(1));
    f.fragment(Packet::from_frame(frame), &FragmentRequest::local(mtu), &mut out).unwrap();
    out.iter().map(Packet::to_vec).collect()
}

fn bf(frame: &[u8], off: usize, len: usize, more: bool) -> Vec<u8> {
    build_fragment(frame, off, len, more, 0x1234).unwrap()
}

fn engine(cfg: ReasmConfig) -> (Reassembler<ManualClock>, ManualClock) {
    let clock = ManualClock::new(1000 * S);
    (Reassembler::with_clock(cfg, clock.clone()), clock)
}

/// Feeds frames; returns the flattened datagrams and the drop reasons.
fn feed<C: Clock>(r: &mut Reassembler<C>, frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<DropReason>) {
    let (mut out, mut drops) = (Vec::new(), Vec::new());
    for f in frames {
        match r.push(Packet::from_frame(f), Scope::default()) {
            Ok(Verdict::Complete(d)) => {
                let mut v = Vec::new();
                flatten(&d.packet, &mut v);
                out.push(v);
            }
            Ok(Verdict::Pass(p)) => out.push(p.to_vec()),
            Ok(Verdict::Queued | Verdict::NotFragment) => {}
            Err(e) => drops.push(e.reason),
        }
    }
    (out, drops)
}

/// Feeds the same untagged Ethernet frames, their first 14 bytes cut off,
/// to a fresh engine for raw IP; the datagrams come back without their
/// Ethernet header.
fn feed_raw_ip(cfg: ReasmConfig, frames: &[Vec<u8>]) -> (Vec<Vec<u8>>, Vec<DropReason>) {
    let (mut r, _) = engine(ReasmConfig { medium: Medium::Ip, ..cfg });
    let raw: Vec<Vec<u8>> = frames.iter().map(|f| f[14..].to_vec()).collect();
    let (out, drops) = feed(&mut r, &raw);
    for d in &out {
        let mut problems = Vec::new();
        validate_frame(d, Medium::Ip, &Default::default(), false, &mut problems);
        assert!(problems.is_empty(), "raw IP datagram: {problems:?}");
    }
    (out, drops)
}

fn assert_valid(frame: &[u8]) {
    let mut problems = Vec::new();
    validate_frame(frame, Medium::Ethernet, &Default::default(), false, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
}

fn assert_idle<C: Clock>(r: &Reassembler<C>) {
    for f in [Family::V4, Family::V6] {
        assert_eq!((r.memory(f), r.queue_count(f)), (0, 0), "{f:?}");
    }
    assert_eq!(r.held_fragments(), 0);
}

#[test]
fn in_order_reverse_and_forward_mode_give_the_datagram_exactly() {
    for v6 in [false, true] {
        let d = datagram(v6, 60000);
        let fr = fragments(&d, 1500);
        assert_eq!(fr.len(), if v6 { 42 } else { 41 }, "60 KB over a 1500 MTU");
        fr.iter().for_each(|f| assert_valid(f));
        for delivery in [Delivery::Local, Delivery::Forward] {
            let (mut r, _) = engine(ReasmConfig { delivery, ..Default::default() });
            let mut rev = fr.clone();
            rev.reverse();
            for set in [&fr, &rev] {
                let (out, drops) = feed(&mut r, set);
                assert!(drops.is_empty(), "{drops:?}");
                assert_eq!(out, vec![d.clone()], "v6={v6} {delivery:?}");
                assert_valid(&out[0]);
                assert_idle(&r);
            }
            let c = r.counters(if v6 { Family::V6 } else { Family::V4 });
            assert_eq!((c.fragments, c.reassembled, c.failed), (2 * fr.len() as u64, 2, 0));
            let cfg = ReasmConfig { delivery, ..Default::default() };
            assert_eq!(feed_raw_ip(cfg, &fr), (vec![d[14..].to_vec()], vec![]), "v6={v6} {delivery:?} raw IP");
        }
    }
}

#[test]
fn forwarding_restores_the_geometry() {
    for v6 in [false, true] {
        let d = datagram(v6, 9000);
        let fr = fragments(&d, 1280);
        let (mut r, _) = engine(ReasmConfig { delivery: Delivery::Forward, ..Default::default() });
        let mut done = None;
        for f in &fr {
            if let Ok(Verdict::Complete(x)) = r.push(Packet::from_frame(f), Scope::default()) {
                done = Some(x);
            }
        }
        let done = done.unwrap();
        assert_eq!(done.packet.frag_list().len(), fr.len() - 1);
        assert_eq!(done.info.max_frag_size as usize, fr[0].len() - 14);
        let mut out = Vec::new();
        let mut fragmenter = Fragmenter::new();
        let req = FragmentRequest::forward_reassembled(1500, &done.info);
        fragmenter.fragment(done.packet, &req, &mut out).unwrap();
        let again: Vec<Vec<u8>> = out.iter().map(Packet::to_vec).collect();
        assert_eq!(again, fr, "v6={v6}: identical fragments on the way out");
        // Geometry larger than the egress MTU: refused.
        let (mut r, _) = engine(ReasmConfig { delivery: Delivery::Forward, ..Default::default() });
        let (_, _) = feed(&mut r, &fr[..fr.len() - 1]);
        let Ok(Verdict::Complete(x)) = r.push(Packet::from_frame(fr.last().unwrap()), Scope::default()) else {
            panic!()
        };
        let err = fragmenter.fragment(x.packet, &FragmentRequest::forward_reassembled(1000, &x.info), &mut out);
        assert!(matches!(err, Err(FragmentError::PacketTooBig { .. }) | Ok(_)), "{err:?}");
    }
}

/// One scenario of the rule table: fragments (offset, len, more) of a
/// 64-byte-payload UDP datagram, in order; expected drop reasons, whether
/// the datagram comes out.
struct Case {
    name: &'static str,
    frags: &'static [(usize, usize, bool)],
    drops: &'static [DropReason],
    delivered: bool,
}

const CASES: &[Case] = &[
    Case { name: "two halves", frags: &[(0, 40, true), (40, 32, false)], drops: &[], delivered: true },
    Case {
        name: "exact duplicate",
        frags: &[(0, 40, true), (0, 40, true), (40, 32, false)],
        drops: &[DropReason::Duplicate],
        delivered: true,
    },
    Case {
        name: "contained in a run",
        frags: &[(0, 40, true), (8, 16, true), (40, 32, false)],
        drops: &[DropReason::Duplicate],
        delivered: true,
    },
    Case {
        name: "overlap at the tail",
        frags: &[(0, 40, true), (32, 40, false)],
        drops: &[DropReason::Overlap],
        delivered: false,
    },
    Case {
        name: "overlap in a hole",
        frags: &[(40, 32, false), (0, 16, true), (8, 40, true)],
        drops: &[DropReason::Overlap],
        delivered: false,
    },
    Case {
        name: "teardrop",
        frags: &[(0, 48, true), (40, 24, false)],
        drops: &[DropReason::Overlap],
        delivered: false,
    },
    Case {
        name: "teardrop inside a run",
        frags: &[(0, 48, true), (16, 8, true), (48, 24, false)],
        drops: &[DropReason::Duplicate],
        delivered: true,
    },
    Case {
        name: "zero length",
        frags: &[(0, 40, true), (40, 0, true)],
        drops: &[DropReason::ZeroLength],
        delivered: false,
    },
    Case {
        name: "two different last fragments",
        frags: &[(40, 32, false), (40, 24, false)],
        drops: &[DropReason::BadLastFragment],
        delivered: false,
    },
    Case {
        name: "last ends before data seen",
        frags: &[(0, 64, true), (40, 16, false)],
        drops: &[DropReason::BadLastFragment],
        delivered: false,
    },
    Case {
        name: "data beyond the end",
        frags: &[(8, 32, false), (40, 8, true)],
        drops: &[DropReason::BeyondEnd],
        delivered: false,
    },
];

#[test]
fn rule_table_both_families() {
    for v6 in [false, true] {
        let d = datagram(v6, 64);
        for c in CASES {
            let (mut r, _) = engine(ReasmConfig::default());
            let frames: Vec<Vec<u8>> = c.frags.iter().map(|&(o, l, m)| bf(&d, o, l, m)).collect();
            let (out, drops) = feed(&mut r, &frames);
            assert_eq!(drops, c.drops, "{} v6={v6}", c.name);
            assert_eq!(out.len(), usize::from(c.delivered), "{} v6={v6}", c.name);
            if c.delivered {
                assert_eq!(out[0], d, "{}", c.name);
            }
            let raw_out: Vec<Vec<u8>> = out.iter().map(|o| o[14..].to_vec()).collect();
            assert_eq!(
                feed_raw_ip(ReasmConfig::default(), &frames),
                (raw_out, c.drops.to_vec()),
                "{} v6={v6} raw IP",
                c.name
            );
            if !c.delivered && r.queue_count(Family::V4) + r.queue_count(Family::V6) == 0 {
                assert_idle(&r);
            }
        }
    }
}

#[test]
fn ipv4_non_last_rounds_down_ipv6_refuses_with_param_problem() {
    let d4 = datagram(false, 64);
    let (mut r, _) = engine(ReasmConfig::default());
    // 13 bytes with MF: only 8 are used; the next fragment starts at 8.
    let (out, drops) = feed(&mut r, &[bf(&d4, 0, 13, true), bf(&d4, 8, 64, false)]);
    assert!(drops.is_empty());
    assert_eq!(out, vec![d4]);

    let d6 = datagram(true, 64);
    let (mut r, _) = engine(ReasmConfig::default());
    let e = r.push(Packet::from_frame(&bf(&d6, 0, 13, true)), Scope::default()).unwrap_err();
    assert_eq!(e.reason, DropReason::NotMultipleOf8);
    let icmp = e.icmp.unwrap();
    assert_eq!(icmp.kind, IcmpKind::ParamProblem { code: 0, pointer: 4 });
    let pkt = icmp.to_ip_packet(None).unwrap();
    let m = Icmpv6Packet::new_checked(&pkt[40..]).unwrap();
    assert_eq!((m.msg_type(), m.code(), m.pointer()), (4, 0, 4));
    assert_eq!(r.queue_count(Family::V6), 0, "no queue for a refused fragment");
    assert_eq!(r.counters(Family::V6).bad_length, 1);
}

#[test]
fn ipv6_end_beyond_65535_incomplete_chain_and_atomic() {
    let d6 = datagram(true, 64);
    let (mut r, _) = engine(ReasmConfig::default());
    let e = r.push(Packet::from_frame(&bf(&d6, 65528, 16, false)), Scope::default()).unwrap_err();
    assert_eq!(e.reason, DropReason::EndBeyondMax);
    assert_eq!(e.icmp.unwrap().kind, IcmpKind::ParamProblem { code: 0, pointer: 42 });
    // First fragment with only 4 bytes of the UDP header.
    let e = r.push(Packet::from_frame(&bf(&d6, 0, 4, true)), Scope::default()).unwrap_err();
    assert_eq!(e.reason, DropReason::IncompleteChain);
    assert_eq!(e.icmp.unwrap().kind, IcmpKind::ParamProblem { code: PARAM_PROBLEM_INCOMPLETE_CHAIN, pointer: 0 });
    // Atomic fragment: passes untouched.
    let atomic = bf(&d6, 0, 72, false);
    match r.push(Packet::from_frame(&atomic), Scope::default()).unwrap() {
        Verdict::Pass(p) => assert_eq!(p.to_vec(), atomic),
        v => panic!("{v:?}"),
    }
    assert_eq!(r.counters(Family::V6).atomic, 1);
    // Non-fragments pass through.
    let d4 = datagram(false, 100);
    assert!(matches!(r.push(Packet::from_frame(&d4), Scope::default()), Ok(Verdict::Pass(_))));
    assert_idle(&r);
}

#[test]
fn oversize_both_families() {
    for v6 in [false, true] {
        let d = datagram(v6, 64);
        let (mut r, _) = engine(ReasmConfig::default());
        // Fragments of 65000 then up to 65536+: the datagram can never fit.
        let mut frames = Vec::new();
        let mut off = 0;
        while off < 65528 {
            frames.push(bf(&d, off, 1480.min(65528 - off), true));
            off += 1480;
        }
        frames.push(bf(&d, 65528, if v6 { 8 } else { 7 }, false));
        let (out, drops) = feed(&mut r, &frames);
        assert!(out.is_empty());
        let want = if v6 { DropReason::EndBeyondMax } else { DropReason::Oversize };
        assert!(drops.contains(&want), "v6={v6} {drops:?}");
        r.clock().advance(61 * S);
        r.expire(&mut Vec::new());
        assert_idle(&r);
    }
}

#[test]
fn ecn_table_and_df_rule() {
    assert_eq!(reasm::ecn_table(0x01), Some(0));
    assert_eq!(reasm::ecn_table(0x08 | 0x04), Some(3));
    assert_eq!(reasm::ecn_table(0x08), Some(0));
    assert_eq!(reasm::ecn_table(0x01 | 0x08), None);
    assert_eq!(reasm::ecn_table(0x01 | 0x02), None);
    let d = datagram(false, 64);
    let set_tos = |f: &mut Vec<u8>, tos: u8, df: bool| {
        let mut p = crate::wire::Ipv4Packet::new_unchecked(&mut f[14..]);
        p.set_tos(tos);
        p.set_dont_frag(df);
        p.fill_checksum();
    };
    // CE + ECT(0): result CE. DF on the larger fragment: result DF.
    let (mut a, mut b) = (bf(&d, 0, 40, true), bf(&d, 40, 32, false));
    set_tos(&mut a, 3, true);
    set_tos(&mut b, 2, false);
    let (mut r, _) = engine(ReasmConfig::default());
    let (out, _) = feed(&mut r, &[a.clone(), b.clone()]);
    let ip = crate::wire::Ipv4Packet::new_checked(&out[0][14..]).unwrap();
    assert_eq!((ip.tos() & 3, ip.dont_frag()), (3, true));
    assert!(ip.verify_checksum());
    // DF only on the smaller fragment: clear.
    set_tos(&mut a, 2, false);
    set_tos(&mut b, 2, true);
    let (out, _) = feed(&mut r, &[a.clone(), b.clone()]);
    assert!(!crate::wire::Ipv4Packet::new_checked(&out[0][14..]).unwrap().dont_frag());
    // Not-ECT mixed with CE: dropped.
    set_tos(&mut a, 0, false);
    set_tos(&mut b, 3, false);
    let (out, drops) = feed(&mut r, &[a, b]);
    assert!(out.is_empty());
    assert_eq!(drops, vec![DropReason::EcnMismatch]);
    assert_idle(&r);
}

#[test]
fn timeout_from_first_fragment_with_icmp() {
    for v6 in [false, true] {
        let fam = if v6 { Family::V6 } else { Family::V4 };
        let timeout = ReasmConfig::default().limits(fam).timeout_ns;
        let d = datagram(v6, 64);
        let (mut r, clock) = engine(ReasmConfig::default());
        let t0 = clock.now_ns();
        feed(&mut r, &[bf(&d, 0, 40, true)]);
        clock.advance(timeout - 1);
        feed(&mut r, &[bf(&d, 40, 8, true)]); // does not extend the timer
        let mut icmp = Vec::new();
        assert_eq!(r.expire(&mut icmp), 0);
        assert_eq!(r.next_deadline(), Some(t0 + timeout));
        clock.set(t0 + timeout);
        assert_eq!(r.expire(&mut icmp), 1);
        assert_idle(&r);
        assert_eq!(icmp.len(), 1);
        let pkt = icmp[0].to_ip_packet(None).unwrap();
        if v6 {
            let m = Icmpv6Packet::new_checked(&pkt[40..]).unwrap();
            assert_eq!((m.msg_type(), m.code()), (3, 1));
        } else {
            let m = Icmpv4Packet::new_checked(&pkt[20..]).unwrap();
            assert_eq!((m.msg_type(), m.code()), (11, 1));
            assert!(m.verify_checksum());
        }
        // Without the first fragment: no ICMP.
        feed(&mut r, &[bf(&d, 40, 8, true)]);
        clock.advance(timeout);
        icmp.clear();
        assert_eq!(r.expire(&mut icmp), 1);
        assert!(icmp.is_empty());
        assert_eq!(r.counters(fam).timeouts, 2);
    }
}

#[test]
fn drop_new_above_high_threshold_and_evict_oldest() {
    let d = datagram(false, 64);
    for policy in [MemoryPolicy::DropNew, MemoryPolicy::EvictOldest] {
        let mut cfg = ReasmConfig { policy, ..Default::default() };
        cfg.v4.high_thresh = 40_000;
        cfg.v4.low_thresh = 20_000;
        cfg.ipv4_max_dist = 0;
        let (mut r, _) = engine(cfg);
        let mut id = 0u16;
        let frag = |off: usize, len: usize, more: bool, id: u16| {
            let mut f = bf(&d, off, len, more);
            let mut p = crate::wire::Ipv4Packet::new_unchecked(&mut f[14..]);
            p.set_ident(id);
            p.fill_checksum();
            f
        };
        while r.memory(Family::V4) <= 40_000 {
            feed(&mut r, &[frag(0, 40, true, id)]);
            id += 1;
        }
        let full = r.memory(Family::V4);
        // A new fragment, even of an existing queue (id 0).
        let (out, drops) = feed(&mut r, &[frag(40, 32, false, 0)]);
        match policy {
            MemoryPolicy::DropNew => {
                assert!(out.is_empty());
                assert_eq!(drops, vec![DropReason::MemoryLimit]);
                assert_eq!(r.memory(Family::V4), full);
                assert_eq!(r.counters(Family::V4).mem_limit, 1);
            }
            MemoryPolicy::EvictOldest => {
                // Queue 0 was the oldest: evicted, so its last fragment starts a new queue.
                assert!(drops.is_empty() && out.is_empty());
                assert!(r.memory(Family::V4) <= 20_000 + 4096, "{}", r.memory(Family::V4));
                assert!(r.counters(Family::V4).evicted > 0);
                // The newest queue still completes.
                let (out, _) = feed(&mut r, &[frag(40, 32, false, id - 1)]);
                assert_eq!(out.len(), 1);
            }
        }
        r.clear();
        assert_idle(&r);
    }
}

#[test]
fn max_dist_reinitialises_a_stale_queue() {
    let d = datagram(false, 64);
    let (mut r, _) = engine(ReasmConfig::default());
    let with_id = |mut f: Vec<u8>, id: u16| {
        let mut p = crate::wire::Ipv4Packet::new_unchecked(&mut f[14..]);
        p.set_ident(id);
        p.fill_checksum();
        f
    };
    feed(&mut r, &[with_id(bf(&d, 0, 40, true), 1)]);
    for i in 0..65u16 {
        feed(&mut r, &[with_id(bf(&d, 0, 40, true), 100 + i)]);
    }
    let (out, _) = feed(&mut r, &[with_id(bf(&d, 40, 32, false), 1)]);
    assert!(out.is_empty(), "queue 1 was re-initialised");
    assert_eq!(r.counters(Family::V4).max_dist_reinit, 1);
}

#[test]
fn scopes_never_share_a_queue() {
    let d = datagram(false, 64);
    let (mut r, _) = engine(ReasmConfig::default());
    r.push(Packet::from_frame(&bf(&d, 0, 40, true)), Scope { port: 1, ..Default::default() }).unwrap();
    let v = r.push(Packet::from_frame(&bf(&d, 40, 32, false)), Scope { port: 2, ..Default::default() }).unwrap();
    assert!(matches!(v, Verdict::Queued));
    assert_eq!(r.queue_count(Family::V4), 2);
}

#[test]
fn vlan_and_checksum_states() {
    let mut spec = FlowSpec::new(Transport::Udp, false, 1).with_vlans(&[(0x8100, 7)]).unwrap();
    spec.dont_frag = false;
    let d = Flow::new(spec).frame(3000, TcpFlags::empty()).unwrap();
    let fr = fragments(&d, 1500);
    let (mut r, _) = engine(ReasmConfig::default());
    let mut last = None;
    for f in &fr {
        let mut p = Packet::from_frame(f);
        p.meta.csum = ChecksumState::Unnecessary { level: 0 };
        if let Verdict::Complete(x) = r.push(p, Scope::default()).unwrap() {
            last = Some(x);
        }
    }
    let x = last.unwrap();
    assert_eq!(x.packet.to_vec(), d);
    assert_eq!(x.packet.meta.csum, ChecksumState::Unnecessary { level: 0 });
    assert_eq!(x.info.l3_offset, 18);
    // COMPLETE sums are combined into the datagram's.
    let (mut r, _) = engine(ReasmConfig::default());
    let mut last = None;
    for f in &fr {
        let mut p = Packet::from_frame(f);
        p.meta.csum = ChecksumState::Complete { sum: crate::csum::ones_sum(&f[l3_of(f)..]) };
        if let Verdict::Complete(x) = r.push(p, Scope::default()).unwrap() {
            last = Some(x);
        }
    }
    let x = last.unwrap();
    assert_eq!(x.packet.meta.csum, ChecksumState::Complete { sum: crate::csum::ones_sum(&d[18..]) });
}

#[test]
fn fragmenter_df_ipv6_router_options_and_validation() {
    let mut spec = FlowSpec::new(Transport::Udp, false, 2);
    spec.dont_frag = true;
    let d = Flow::new(spec).frame(3000, TcpFlags::empty()).unwrap();
    let mut f = Fragmenter::new();
    let mut out = Vec::new();
    let e = f.fragment(Packet::from_frame(&d), &FragmentRequest::forward(1500), &mut out).unwrap_err();
    let FragmentError::FragmentationNeeded { mtu: 1500, icmp: Some(icmp), .. } = e else { panic!("{e:?}") };
    let pkt = icmp.to_ip_packet(None).unwrap();
    let m = Icmpv4Packet::new_checked(&pkt[20..]).unwrap();
    assert_eq!((m.msg_type(), m.code(), m.next_hop_mtu()), (3, 4, 1500));
    assert_eq!(f.counters().frag_needed, 1);

    let d6 = datagram(true, 3000);
    let e = f.fragment(Packet::from_frame(&d6), &FragmentRequest::forward(1500), &mut out).unwrap_err();
    assert!(matches!(e, FragmentError::PacketTooBig { mtu: 1500, icmp: Some(_), .. }));
    // Fits: unchanged.
    assert_eq!(f.fragment(Packet::from_frame(&d6), &FragmentRequest::forward(9000), &mut out), Ok(1));
    assert_eq!(out.pop().unwrap().to_vec(), d6);

    // IPv4 options: copied (0x94 router alert) kept, record route (7) NOP'd in later fragments.
    let mut d4 = datagram(false, 3000);
    let opts = [0x94, 4, 0, 0, 7, 3, 4, 0];
    let ihl_at = 14;
    d4.splice(34..34, opts);
    let tl = u16::from_be_bytes([d4[16], d4[17]]) + 8;
    d4[16..18].copy_from_slice(&tl.to_be_bytes());
    d4[ihl_at] = 0x47;
    crate::wire::Ipv4Packet::new_unchecked(&mut d4[14..]).fill_checksum();
    out.clear();
    let n = f.fragment(Packet::from_frame(&d4), &FragmentRequest::local(1000), &mut out).unwrap();
    assert_eq!(n, 4);
    let frames: Vec<Vec<u8>> = out.iter().map(Packet::to_vec).collect();
    assert_eq!(&frames[0][34..42], &opts);
    assert_eq!(&frames[1][34..42], &[0x94, 4, 0, 0, 1, 1, 1, 0]);
    frames.iter().for_each(|x| assert_valid(x));
    let (mut r, _) = engine(ReasmConfig::default());
    let (got, _) = feed(&mut r, &frames);
    assert_eq!(got, vec![d4]);
}

#[test]
fn garbage_never_panics() {
    let d = datagram(true, 200);
    let (mut r, _) = engine(ReasmConfig::default());
    for cut in 0..d.len() {
        let _ = r.push(Packet::from_frame(&bf(&d, 0, 80, true)[..cut.min(130)]), Scope::default());
        let _ = r.push_ip(Packet::from_frame(&d[14..14 + cut.min(d.len() - 14)]), Scope::default());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any permutation with exact duplicates anywhere yields the datagram exactly once.
    #[test]
    fn permutation_with_duplicates(v6: bool, payload in 2000usize..20000, mtu in 600usize..1500,
                                   order in any::<u64>(), dups in proptest::collection::vec(any::<(u16, u16)>(), 0..6),
                                   forward: bool) {
        let d = datagram(v6, payload);
        let mut fr = fragments(&d, mtu.max(if v6 { 1280 } else { 600 }));
        // Deterministic shuffle.
        let mut s = order | 1;
        for i in (1..fr.len()).rev() {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            fr.swap(i, (s % (i as u64 + 1)) as usize);
        }
        // Copies of any fragment but the one that arrives last (which completes
        // the datagram), inserted anywhere before it.
        let originals = fr.len();
        for (which, at) in dups {
            let f = fr[..fr.len() - 1].iter().filter(|x| **x != fr[fr.len() - 1]).nth(which as usize % (originals - 1)).cloned().unwrap_or_else(|| fr[0].clone());
            // Before the fragment that completes the datagram (the last one):
            // a whole second copy after completion would make a second datagram, as in Linux.
            let at = at as usize % fr.len();
            fr.insert(at, f);
        }
        let delivery = if forward { Delivery::Forward } else { Delivery::Local };
        let (mut r, _) = engine(ReasmConfig { delivery, ..Default::default() });
        let (out, drops) = feed(&mut r, &fr);
        prop_assert!(!out.is_empty());
        prop_assert_eq!(&out[0], &d);
        // Duplicates after completion start a new queue that never completes (as Linux).
        prop_assert!(drops.iter().all(|x| *x == DropReason::Duplicate));
        prop_assert_eq!(out.len(), 1);
        r.clock().advance(61 * S);
        r.expire(&mut Vec::new());
        assert_idle(&r);
    }

    /// A fragment straddling two original fragments, inserted before one of
    /// them, discards the datagram; memory returns to its prior value.
    #[test]
    fn partial_overlap_yields_nothing(v6: bool, payload in 3000usize..12000, k in any::<u16>(), shift in 1usize..16,
                                      pos in any::<u16>()) {
        let d = datagram(v6, payload);
        let fr = fragments(&d, 1280);
        let (mut r, _) = engine(ReasmConfig::default());
        // Prior state: an unrelated incomplete queue.
        let other = datagram(!v6, 500);
        feed(&mut r, &[bf(&other, 0, 64, true)]);
        let prior = (r.memory(Family::V4), r.memory(Family::V6));
        let per = if v6 { 1280 - 40 - 8 } else { 1280 - 20 } & !7;
        let b = 1 + k as usize % (fr.len() - 1); // boundary between fragment b-1 and b
        let ident = if v6 { u32::from_be_bytes(fr[0][14 + 44..14 + 48].try_into().unwrap()) } else { 0 };
        let bad = build_fragment(&d, b * per - shift * 8, 16 * shift, true, ident).unwrap();
        let mut set = fr.clone();
        // Before fragment b-1 or b: anywhere up to the later of the two.
        let at = pos as usize % (b + 1);
        set.insert(at, bad);
        let (out, drops) = feed(&mut r, &set);
        prop_assert!(out.is_empty());
        prop_assert!(drops.contains(&DropReason::Overlap), "{:?}", drops);
        // Later fragments may have opened a new queue; after the timeout all is back.
        r.clock().advance(61 * S);
        let _ = r.expire(&mut Vec::new());
        feed(&mut r, &[bf(&other, 0, 64, true)]);
        prop_assert_eq!((r.memory(Family::V4), r.memory(Family::V6)), prior);
    }

    /// Above the high threshold every new fragment is dropped (DropNew).
    #[test]
    fn above_high_thresh_everything_dropped(n in 1usize..40, high in 2000usize..20000) {
        let mut cfg = ReasmConfig::default();
        cfg.v4.high_thresh = high;
        cfg.ipv4_max_dist = 0;
        let (mut r, _) = engine(cfg);
        let d = datagram(false, 64);
        for i in 0..n as u16 {
            let mut f = bf(&d, (i as usize % 4) * 8, 8, true);
            let mut p = crate::wire::Ipv4Packet::new_unchecked(&mut f[14..]);
            p.set_ident(i / 4);
            p.fill_checksum();
            let over = r.memory(Family::V4) > high;
            let res = r.push(Packet::from_frame(&f), Scope::default());
            if over {
                prop_assert_eq!(res.unwrap_err().reason, DropReason::MemoryLimit);
            } else {
                prop_assert!(res.is_ok());
            }
        }
    }

    /// A queue expires exactly `timeout` after its first fragment, whatever
    /// arrives in between.
    #[test]
    fn expires_exactly_at_timeout(v6: bool, timeout_ms in 1u64..100_000, gaps in proptest::collection::vec(0u64..1000, 1..5)) {
        let mut cfg = ReasmConfig::default();
        cfg.v4.timeout_ns = timeout_ms * 1_000_000;
        cfg.v6.timeout_ns = timeout_ms * 1_000_000;
        let (mut r, clock) = engine(cfg);
        let d = datagram(v6, 200);
        let t0 = clock.now_ns();
        feed(&mut r, &[bf(&d, 0, 64, true)]);
        let timeout = timeout_ms * 1_000_000;
        for (i, g) in gaps.iter().enumerate() {
            let t = t0 + (g * timeout / 1000).min(timeout - 1);
            clock.set(t.max(clock.now_ns()));
            feed(&mut r, &[bf(&d, 64 + 8 * i, 8, true)]);
        }
        clock.set(t0 + timeout - 1);
        prop_assert_eq!(r.expire(&mut Vec::new()), 0);
        clock.set(t0 + timeout);
        prop_assert_eq!(r.expire(&mut Vec::new()), 1);
        assert_idle(&r);
    }

    /// Random mutations of fragments never panic and never leak memory.
    #[test]
    fn mutated_fragments(v6: bool, edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..8), cut in any::<u16>()) {
        let d = datagram(v6, 3000);
        let fr = fragments(&d, 1280);
        let (mut r, _) = engine(ReasmConfig::default());
        for f in &fr {
            let mut f = f.clone();
            for &(at, v) in &edits {
                let i = at as usize % f.len();
                f[i] = v;
            }
            f.truncate(f.len().min(14 + cut as usize));
            let _ = r.push(Packet::from_frame(&f), Scope::default());
        }
        r.clock().advance(61 * S);
        r.expire(&mut Vec::new());
        assert_idle(&r);
    }
}
