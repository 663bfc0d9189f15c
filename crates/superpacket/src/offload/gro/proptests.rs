//! Property tests of the GRO invariants (offload-rules 9.3): byte
//! conservation and per-flow order across any input, no aggregate above an
//! L3 length of 65535, every delivered frame valid, and no merge across any
//! differing field the spec lists.

use super::tests::{VARIANTS, Variant, flow, refresh};
use super::*;
use crate::packet::Packet;
use crate::traffic::{Flow, Transport};
use crate::validate::{self, Medium};
use crate::wire::{FrameHeaders, L3Kind, TcpFlags};
use proptest::prelude::*;
use std::collections::HashMap;

/// One generated arrival.
#[derive(Debug, Clone)]
struct Ev {
    flow: usize,
    len: usize,
    flags: u8,
    ttl_bump: bool,
    skip: bool,
    corrupt: bool,
    flush: bool,
}

fn ev() -> impl Strategy<Value = Ev> {
    (
        0usize..5,
        prop_oneof![6 => Just(1448usize), 2 => Just(700usize), 2 => 0usize..1500],
        prop_oneof![12 => Just(0u8), 1 => any::<u8>()],
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(flow, len, flags, ttl_bump, skip, corrupt, flush)| Ev {
            flow,
            len,
            flags,
            ttl_bump,
            skip,
            corrupt,
            flush,
        })
}

/// The flows of the property run: TCP and UDP, IPv4 and IPv6, untagged,
/// 802.1Q and QinQ, distinct source ports.
fn flows() -> Vec<Flow> {
    let v = |i: usize| -> &'static Variant { &VARIANTS[i] };
    vec![
        flow(v(0), Transport::Tcp, 0),
        flow(v(5), Transport::Tcp, 1),
        flow(v(1), Transport::Udp, 2),
        flow(v(3), Transport::Udp, 3),
        flow(v(2), Transport::Tcp, 4),
    ]
}

fn configs() -> impl Strategy<Value = GroConfig> {
    prop_oneof![
        Just(GroConfig::forwarder()),
        Just(GroConfig { udp: UdpGroMode::Fraglist, tcp_fraglist: true, ..GroConfig::default() }),
        Just(GroConfig { lro: true, ..GroConfig::forwarder() }),
        Just(GroConfig { trim_padding: false, cwr: CwrRule::Legacy, ..GroConfig::forwarder() }),
        Just(GroConfig { buckets: 1, bucket_depth: 2, ..GroConfig::forwarder() }),
        Just(GroConfig { max_size: 9000, ..GroConfig::forwarder() }),
    ]
}

const FLAG_BITS: [TcpFlags; 7] =
    [TcpFlags::PSH, TcpFlags::FIN, TcpFlags::SYN, TcpFlags::RST, TcpFlags::URG, TcpFlags::CWR, TcpFlags::ECE];

fn tcp_flags(bits: u8) -> TcpFlags {
    let mut f = TcpFlags::empty();
    for (i, b) in FLAG_BITS.iter().enumerate() {
        if bits & (1 << i) != 0 {
            f |= *b;
        }
    }
    f
}

/// Flow index of a frame (by source port: 10000 + index).
fn flow_of(frame: &[u8], h: &FrameHeaders) -> usize {
    (u16::from_be_bytes([frame[h.l4_offset], frame[h.l4_offset + 1]]) - 10000) as usize
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Byte conservation, per-flow order, size bound, validity.
    #[test]
    fn conservation_order_and_bounds(events in prop::collection::vec(ev(), 1..220), cfg in configs(), batch in 8usize..80) {
        let mut flows = flows();
        let mut g = Gro::new(cfg);
        let mut sent: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut corrupted: Vec<Vec<u8>> = Vec::new();
        let mut n_in = 0u64;
        for (i, e) in events.iter().enumerate() {
            let f = &mut flows[e.flow];
            if e.ttl_bump {
                f.spec.ttl ^= 1;
            }
            let frame = f.frame(e.len, tcp_flags(e.flags)).unwrap();
            if e.skip {
                continue; // lost on the wire: a sequence gap
            }
            let mut frame = frame;
            if e.corrupt {
                let h = FrameHeaders::parse(&frame).unwrap();
                frame[h.l4_offset + 4] ^= 0x01; // TCP seq / UDP length field changes: checksum breaks
                corrupted.push(frame.clone());
            } else {
                let h = FrameHeaders::parse(&frame).unwrap();
                sent.entry(e.flow).or_default().extend_from_slice(h.payload_bytes(&frame));
            }
            g.receive_frame(&frame);
            n_in += 1;
            if e.flush || (i + 1) % batch == 0 {
                g.flush();
            }
        }
        g.flush();
        let out: Vec<Packet> = g.drain_delivered().collect();
        let c = *g.counters();
        prop_assert_eq!(c.packets_in, n_in);
        prop_assert_eq!(c.packets_out, out.len() as u64);
        let mut got: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut segs_out = 0u64;
        let mut bytes = Vec::new();
        let mut problems = Vec::new();
        for p in &out {
            let meta = capture_bytes(p, Medium::Ethernet, &mut bytes);
            let h = FrameHeaders::parse(&bytes);
            // A corrupted UDP length makes a frame unparsable: it must be one we broke.
            let Ok(h) = h else {
                prop_assert!(corrupted.contains(&bytes), "unparsable output that was not corrupted on input");
                segs_out += 1;
                continue;
            };
            prop_assert!(h.l3_len <= 65535, "L3 length {}", h.l3_len);
            prop_assert!(h.l3_len < cfg.max_size.max(1600), "gro_max_size {} exceeded: {}", cfg.max_size, h.l3_len);
            problems.clear();
            validate::validate_frame(&bytes, Medium::Ethernet, &meta, false, &mut problems);
            segs_out += if meta.is_gso() { meta.gso_segs as u64 } else { 1 };
            if !problems.is_empty() {
                prop_assert!(corrupted.contains(&bytes), "invalid output {:?} that was not corrupted on input", problems);
                continue;
            }
            if meta.is_gso() && h.l4 == crate::wire::L4Kind::Udp {
                prop_assert!(meta.gso_segs as u32 <= UDP_GRO_CNT_MAX);
            }
            got.entry(flow_of(&bytes, &h)).or_default().extend_from_slice(h.payload_bytes(&bytes));
        }
        prop_assert_eq!(segs_out, n_in, "wire segments in = out");
        for (flow, bytes) in &sent {
            let empty = Vec::new();
            let g = got.get(flow).unwrap_or(&empty);
            prop_assert!(g == bytes, "flow {}: {} bytes sent, {} delivered (or reordered)", flow, bytes.len(), g.len());
        }
    }

    /// No merge across any differing field of offload-rules 9.3 ("no merge
    /// across"), for every family and tag stack.
    #[test]
    fn no_merge_across_differing_fields(variant in 0usize..6, field in 0usize..13, len in 1usize..1400) {
        let v = &VARIANTS[variant];
        let mut f = flow(v, Transport::Tcp, 7);
        let a = f.frame(len, TcpFlags::empty()).unwrap();
        let mut b = f.frame(len, TcpFlags::empty()).unwrap();
        let h = FrameHeaders::parse(&b).unwrap();
        let (l3, l4) = (h.l3_offset, h.l4_offset);
        let applicable = match field {
            0 => { b[l4] ^= 1; true }                      // source port
            1 => { b[l4 + 3] ^= 1; true }                  // destination port
            2 => { b[l3 + if v.v6 { 8 } else { 12 }] ^= 1; true } // source address
            3 => { b[0] ^= 0x10; true }                    // MAC header
            4 => { if v.tags.is_empty() { false } else { b[15] ^= 1; true } } // VLAN tag
            5 => { b[l3 + if v.v6 { 7 } else { 8 }] ^= 1; true } // TTL / hop limit
            6 => { if v.v6 { b[l3 + 1] ^= 0x10 } else { b[l3 + 1] ^= 0x01 }; true } // TOS/TC (ECN bit)
            7 => { if v.v6 { false } else { b[l3 + 6] ^= 0x40; true } } // DF
            8 => { if v.v6 { b[l3 + 3] ^= 1; true } else { false } } // flow label
            9 => { b[l4 + 25] ^= 1; true }                 // TCP option (TSval)
            10 => { b[l4 + 11] ^= 1; true }                // ACK number
            11 => { b[l4 + 15] ^= 1; true }                // window
            _ => { b[l4 + 13] |= 0x40; true }              // ECE flag
        };
        prop_assume!(applicable);
        refresh(&mut b);
        let mut g = Gro::default();
        g.receive_frame(&a);
        g.receive_frame(&b);
        g.flush();
        let out: Vec<Packet> = g.drain_delivered().collect();
        prop_assert_eq!(out.len(), 2, "field {} merged", field);
        prop_assert!(out.iter().all(|p| !p.meta.is_gso()));
    }
}

/// One arrival of [`plain_fast_path_decides_as_the_full_path`].
#[derive(Debug, Clone)]
struct FastEv {
    flow: usize,
    len: usize,
    flags: u8,
    /// 0: as built; 1: TTL changed from here on; 2: lost (a sequence gap);
    /// 3: L4 checksum broken; 4: one header bit flipped (checksums redone);
    /// 5: Ethernet padding; 6: IPv4 header checksum broken; 7: fixed IPv4 ID.
    edit: u8,
    at: usize,
    csum: u8,
    end: bool,
}

fn fast_ev() -> impl Strategy<Value = FastEv> {
    (
        0usize..4,
        prop_oneof![8 => Just(1448usize), 2 => Just(700usize), 1 => 0usize..1500],
        prop_oneof![14 => Just(0u8), 1 => any::<u8>()],
        prop_oneof![12 => Just(0u8), 4 => 1u8..8],
        0usize..96,
        0u8..4,
        prop::bool::weighted(0.04),
    )
        .prop_map(|(flow, len, flags, edit, at, csum, end)| FastEv { flow, len, flags, edit, at, csum, end })
}

fn fast_configs() -> impl Strategy<Value = GroConfig> {
    prop_oneof![
        Just(GroConfig::default()),
        Just(GroConfig { buckets: 64, ..GroConfig::default() }),
        Just(GroConfig::kernel_6_18()),
        Just(GroConfig { buckets: 1, bucket_depth: 2, ..GroConfig::default() }),
        Just(GroConfig { cwr: CwrRule::Legacy, fixed_id: FixedIdRule::Legacy, ..GroConfig::default() }),
        Just(GroConfig { tcp_fraglist: true, ..GroConfig::default() }),
        Just(GroConfig { max_size: 9000, ..GroConfig::forwarder() }),
        Just(GroConfig { lro: true, lro_queue_max: 16, ..GroConfig::forwarder() }),
    ]
}

/// The packets (as captured) and counters an engine delivers for `bursts`,
/// each burst flushed at its end.
fn delivered_by(mut g: Gro, bursts: &[Vec<Packet>]) -> (Vec<(Vec<u8>, OffloadMeta)>, GroCounters) {
    let mut out = Vec::new();
    let mut bytes = Vec::new();
    for burst in bursts {
        let mut pkts = burst.clone();
        g.receive_burst(&mut pkts);
        g.flush();
        for p in g.drain_delivered() {
            let meta = capture_bytes(&p, Medium::Ethernet, &mut bytes);
            out.push((bytes.clone(), meta));
        }
    }
    (out, *g.counters())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// The plain fast path (`Gro::plain_fast`: a TCP segment matched
    /// against its flow's header template) decides as the full path does:
    /// random traffic of four flows (IPv4 and IPv6, untagged and tagged,
    /// UDP among them), random sizes and flags, with TTL changes, gaps,
    /// broken checksums, flipped header bits, padding and fixed IDs, in
    /// every checksum state and with or without receive hashes, under
    /// several configurations (LRO's sorted batches among them): the same
    /// packets and counters with the fast path as without it.
    #[test]
    fn plain_fast_path_decides_as_the_full_path(
        events in prop::collection::vec(fast_ev(), 1..160),
        cfg in fast_configs(),
        rss in prop::bool::ANY,
    ) {
        let v = |i: usize| -> &'static Variant { &VARIANTS[i] };
        let mut flows = [
            flow(v(0), Transport::Tcp, 0),
            flow(v(3), Transport::Tcp, 1),
            flow(v(1), Transport::Tcp, 2),
            flow(v(0), Transport::Udp, 3),
        ];
        let mut bursts: Vec<Vec<Packet>> = vec![Vec::new()];
        for e in &events {
            let f = &mut flows[e.flow];
            if e.edit == 1 {
                f.spec.ttl ^= 1;
            }
            let mut frame = f.frame(e.len, tcp_flags(e.flags)).unwrap();
            let h = FrameHeaders::parse(&frame).unwrap();
            match e.edit {
                2 => continue,
                3 => {
                    let at = h.l4_offset + h.l4.csum_offset().expect("TCP or UDP") as usize;
                    frame[at] ^= 0x01;
                }
                4 => {
                    let at = e.at % h.payload_offset;
                    frame[at] ^= 1 << (e.at % 8);
                    let _ = validate::refresh_checksums(&mut frame);
                }
                5 => frame.extend_from_slice(&[0; 6][..1 + e.at % 6]),
                6 if h.l3 == L3Kind::Ipv4 => frame[h.l3_offset + 10] ^= 0x01,
                7 if h.l3 == L3Kind::Ipv4 => {
                    frame[h.l3_offset + 4..h.l3_offset + 6].copy_from_slice(&[0x12, 0x34]);
                    refresh(&mut frame);
                }
                _ => {}
            }
            let mut p = Packet::from_frame(&frame);
            p.meta.csum = match e.csum {
                0 => ChecksumState::None,
                1 => ChecksumState::Unnecessary { level: 0 },
                2 => ChecksumState::Partial { start: 0, offset: 0 },
                _ => ChecksumState::Unnecessary { level: 1 },
            };
            if rss {
                p.meta.rss_hash = Some(0x9E37_79B9u32.wrapping_mul(e.flow as u32 + 1));
            }
            bursts.last_mut().unwrap().push(p);
            if e.end {
                bursts.push(Vec::new());
            }
        }
        let fast = delivered_by(Gro::new(cfg), &bursts);
        let mut full = Gro::new(cfg);
        full.plain_fast = false;
        let full = delivered_by(full, &bursts);
        prop_assert_eq!(&fast.0, &full.0);
        prop_assert_eq!(fast.1, full.1);
    }
}

/// The plain fast path is taken: a TCP flow whose checksums are trusted
/// merges its later segments there, and those of one to verify too (an
/// engine without it gives the same packets).
#[test]
fn plain_fast_path_takes_a_flows_later_segments() {
    for csum in [ChecksumState::Unnecessary { level: 0 }, ChecksumState::None] {
        for v in [&VARIANTS[0], &VARIANTS[3], &VARIANTS[2]] {
            let mut f = flow(v, Transport::Tcp, 5);
            let burst: Vec<Packet> = (0..8)
                .map(|_| {
                    let mut p = Packet::from_frame(&f.frame(1000, TcpFlags::empty()).unwrap());
                    p.meta.csum = csum;
                    p
                })
                .collect();
            let mut g = Gro::default();
            let mut pkts = burst.clone();
            g.receive_burst(&mut pkts);
            assert_eq!(g.plain_fast_merges, 7, "{}: the first segment starts the aggregate", v.name);
            g.flush();
            let mut bytes = Vec::new();
            let fast: Vec<_> = g
                .drain_delivered()
                .map(|p| {
                    let meta = capture_bytes(&p, Medium::Ethernet, &mut bytes);
                    (bytes.clone(), meta)
                })
                .collect();
            assert_eq!(fast.len(), 1);
            assert_eq!(fast[0].1.gso_segs, 8);
            let full = Gro { plain_fast: false, ..Gro::default() };
            let (out, _) = delivered_by(full, &[burst]);
            assert_eq!(out, fast, "{}", v.name);
        }
    }
}

/// A segment that fails only the size limit (offload-rules 1.3 (h)) ends
/// its aggregate and starts the next one on the plain fast path, as the
/// full path would: 100 segments of 1448 bytes make aggregates of 45, 45
/// and 10, the same packets and counters as without the fast path, for
/// trusted checksums and ones to verify, with and without a receive hash.
#[test]
fn plain_fast_path_starts_the_next_aggregate_at_the_size_limit() {
    for csum in [ChecksumState::Unnecessary { level: 0 }, ChecksumState::None] {
        for rss in [None, Some(0x1234_5677)] {
            let mut f = flow(&VARIANTS[0], Transport::Tcp, 5);
            let burst: Vec<Packet> = (0..100)
                .map(|_| {
                    let mut p = Packet::from_frame(&f.frame(1448, TcpFlags::empty()).unwrap());
                    p.meta.csum = csum;
                    p.meta.rss_hash = rss;
                    p
                })
                .collect();
            let mut g = Gro::default();
            g.receive_burst(&mut burst.clone());
            assert_eq!((g.plain_fast_restarts, g.plain_fast_merges), (2, 97), "{csum:?} {rss:?}");
            g.flush();
            let mut bytes = Vec::new();
            let fast: Vec<_> = g
                .drain_delivered()
                .map(|p| {
                    let meta = capture_bytes(&p, Medium::Ethernet, &mut bytes);
                    (bytes.clone(), meta)
                })
                .collect();
            let segs: Vec<u16> = fast.iter().map(|(_, m)| m.gso_segs).collect();
            assert_eq!(segs, [45, 45, 10], "{csum:?} {rss:?}");
            assert_eq!(g.counters().flushed.size_limit, 2);
            let full = Gro { plain_fast: false, ..Gro::default() };
            let (out, counters) = delivered_by(full, &[burst]);
            assert_eq!(out, fast, "{csum:?} {rss:?}");
            assert_eq!(&counters, g.counters(), "{csum:?} {rss:?}");
        }
    }
}

/// The first segment of a flow after its aggregate was delivered (at the
/// end of a burst) starts the next aggregate on the plain fast path, in
/// the slot of the last one, as the full path would: 64 interleaved flows
/// (`bench peers`' workload: each flow's segments in every other burst
/// position), four bursts of 128, IPv4, IPv6 and tagged, trusted and to
/// verify, in Linux's 8 x 8 table (whose buckets overflow: evictions) and
/// in a 64 x 8 one, with and without receive hashes. The same packets and
/// counters as without the fast path.
#[test]
fn plain_fast_path_starts_a_flows_next_aggregate_after_a_burst() {
    for csum in [ChecksumState::Unnecessary { level: 0 }, ChecksumState::None] {
        for v in [&VARIANTS[0], &VARIANTS[3], &VARIANTS[2]] {
            for buckets in [8, 64] {
                for rss in [false, true] {
                    let mut flows: Vec<_> = (0..64).map(|i| flow(v, Transport::Tcp, i)).collect();
                    let bursts: Vec<Vec<Packet>> = (0..4)
                        .map(|_| {
                            (0..128)
                                .map(|i| {
                                    let frame = flows[i % 64].frame(1000, TcpFlags::empty()).unwrap();
                                    let mut p = Packet::from_frame(&frame);
                                    p.meta.csum = csum;
                                    p.meta.rss_hash = rss.then(|| 0x9E37_79B9u32.wrapping_mul(i as u32 % 64 + 1));
                                    p
                                })
                                .collect()
                        })
                        .collect();
                    let cfg = GroConfig { buckets, ..GroConfig::default() };
                    let ctx = format!("{} {csum:?} {buckets} buckets, rss {rss}", v.name);
                    let mut g = Gro::new(cfg);
                    let mut out = Vec::new();
                    let mut bytes = Vec::new();
                    for burst in &bursts {
                        g.receive_burst(&mut burst.clone());
                        g.flush();
                        for p in g.drain_delivered() {
                            let meta = capture_bytes(&p, Medium::Ethernet, &mut bytes);
                            out.push((bytes.clone(), meta));
                        }
                    }
                    // Every burst after the first: each flow's first segment
                    // (unless a hint entry two flows share sends it the full
                    // way, or, in the 8 x 8 table, its slot went to another
                    // flow's aggregate that evicted one).
                    let least = if buckets == 64 { 3 * 48 } else { 48 };
                    assert!(g.plain_fast_starts >= least, "{ctx}: {} starts", g.plain_fast_starts);
                    let full = Gro { plain_fast: false, ..Gro::new(cfg) };
                    let (full_out, counters) = delivered_by(full, &bursts);
                    assert_eq!(out, full_out, "{ctx}");
                    assert_eq!(&counters, g.counters(), "{ctx}");
                }
            }
        }
    }
}

/// The plain fast path starts an aggregate in a free slot only when the
/// flow has none held in the bucket its hash picks: with receive hashes
/// that change between segments of one flow (so it has aggregates in two
/// buckets), a segment whose hint names the slot of the flow's delivered
/// aggregate (ended by PSH) joins the one still held, as on the full path.
#[test]
fn plain_fast_path_starts_no_second_aggregate_of_a_flow_in_a_bucket() {
    let mut f = flow(&VARIANTS[0], Transport::Tcp, 5);
    let burst: Vec<Packet> =
        [(1, TcpFlags::empty()), (2, TcpFlags::empty()), (1, TcpFlags::empty()), (1, TcpFlags::PSH)]
            .into_iter()
            .chain([(2, TcpFlags::empty()); 3])
            .map(|(rss, flags)| {
                let mut p = Packet::from_frame(&f.frame(1000, flags).unwrap());
                p.meta.csum = ChecksumState::Unnecessary { level: 0 };
                p.meta.rss_hash = Some(rss);
                p
            })
            .collect();
    let (fast, fast_counters) = delivered_by(Gro::default(), std::slice::from_ref(&burst));
    let (full, full_counters) = delivered_by(Gro { plain_fast: false, ..Gro::default() }, &[burst]);
    assert_eq!(fast, full);
    assert_eq!(fast_counters, full_counters);
    let segs: Vec<u16> = full.iter().map(|(_, m)| m.gso_segs).collect();
    // The 1st segment (bucket 1) is flushed out of order by the 3rd, which
    // the PSH of the 4th ends; the 2nd (bucket 2) is flushed out of order
    // by the 5th, held while the 4th's slot is free, and the 6th and 7th join it.
    assert_eq!(segs, [0, 2, 0, 3]);
}
