//! GRO fed an arbitrary sequence of frames (synthetic flows with gaps, flag
//! changes, damage and padding, or raw bytes; batch ends, arrival times and
//! age flushes), under one of several configurations; then GSO of whatever it
//! delivers for an arbitrary target. Invariants:
//! - counters: `packets_in` = frames given; `packets_out` = packets
//!   delivered; every given frame is delivered as exactly one wire segment
//!   (sum of `gso_segs`, or 1, over the delivered packets); nothing is held
//!   or queued after the final flush;
//! - byte conservation: the payload bytes of the valid input frames, per
//!   flow, equal those of the valid delivered packets (GRO drops nothing;
//!   invalid frames are delivered untouched; order within a flow may change
//!   only by a GRO bypass, as in Linux: offload-rules 9.1-4);
//! - every delivered packet that is not an invalid input passed through
//!   passes `pcap check`; no aggregate reaches `gro_max_size`;
//! - GSO of each delivered packet: `superpacket_fuzz::segment_checked`,
//!   and cutting a valid aggregate for the plain MTU-1500 target gives the
//!   aggregate's payload back.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use superpacket::offload::gro::{CwrRule, FixedIdRule, Gro, GroConfig, UdpGroMode, capture_bytes};
use superpacket::offload::gso::{Segmenter, TargetCaps};
use superpacket::packet::Packet;
use superpacket::wire::{FrameHeaders, L3Kind};
use superpacket_fuzz::{CapsInput, Flows, FrameRecipe, is_valid, segment_checked};

#[derive(Debug, Arbitrary)]
struct Event {
    frame: FrameRecipe,
    /// Bit 0: batch end after this frame; bit 1: advance the clock a lot.
    ctl: u8,
    gap_ns: u16,
}

#[derive(Debug, Arbitrary)]
struct Input {
    config: u8,
    events: Vec<Event>,
    caps: CapsInput,
}

fn config(sel: u8) -> GroConfig {
    let base = match sel % 8 {
        0 => GroConfig::default(),
        1 => GroConfig::forwarder(),
        2 => GroConfig { udp: UdpGroMode::Fraglist, tcp_fraglist: true, ..GroConfig::default() },
        3 => GroConfig { lro: true, lro_queue_max: 16, ..GroConfig::forwarder() },
        4 => GroConfig {
            trim_padding: false,
            cwr: CwrRule::Legacy,
            fixed_id: FixedIdRule::Legacy,
            ..GroConfig::forwarder()
        },
        5 => GroConfig { buckets: 1, bucket_depth: 2, ..GroConfig::forwarder() },
        6 => GroConfig { max_size: 9000, flush_age_ns: Some(50_000), ..GroConfig::forwarder() },
        _ => GroConfig::kernel_6_18(),
    };
    if sel & 8 != 0 { GroConfig { vlan: false, ..base } } else { base }
}

/// Flow identity of a valid frame: L2 header and tags, addresses, protocol, ports.
fn flow_key(frame: &[u8], h: &FrameHeaders) -> Vec<u8> {
    let mut k = frame[..h.l3_offset].to_vec();
    let l3 = h.l3_offset;
    match h.l3 {
        L3Kind::Ipv4 => k.extend_from_slice(&frame[l3 + 12..l3 + 20]),
        L3Kind::Ipv6 => k.extend_from_slice(&frame[l3 + 8..l3 + 40]),
        _ => {}
    }
    k.push(h.ip_protocol.map_or(0, |p| p.0));
    if h.l4_header_len >= 4 {
        k.extend_from_slice(&frame[h.l4_offset..h.l4_offset + 4]);
    }
    k
}

/// A multiset of bytes: how many times each byte value occurs, and in all.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ByteCounts {
    per_value: [u64; 256],
    total: u64,
}

impl Default for ByteCounts {
    fn default() -> Self {
        ByteCounts { per_value: [0; 256], total: 0 }
    }
}

impl ByteCounts {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.per_value[usize::from(b)] += 1;
        }
        self.total += bytes.len() as u64;
    }
}

fuzz_target!(|input: Input| {
    let cfg = config(input.config);
    let mut g = Gro::new(cfg);
    let mut flows = Flows::new();
    let mut now = 1_000_000u64;
    let mut invalid_in: Vec<Vec<u8>> = Vec::new();
    let mut sent: HashMap<Vec<u8>, ByteCounts> = HashMap::new();
    let mut out: Vec<Packet> = Vec::new();
    let n_in = input.events.len().min(300);
    for e in input.events.iter().take(n_in) {
        let frame = flows.build(&e.frame);
        now += u64::from(e.gap_ns) + if e.ctl & 2 != 0 { 1_000_000 } else { 0 };
        if is_valid(&frame, &Default::default()) {
            let h = FrameHeaders::parse(&frame).expect("valid frame parses");
            sent.entry(flow_key(&frame, &h)).or_default().add(h.payload_bytes(&frame));
        } else {
            invalid_in.push(frame.clone());
        }
        let mut pkt = Packet::from_frame(&frame);
        pkt.meta.arrival_ns = Some(now);
        g.receive(pkt);
        if e.ctl & 1 != 0 {
            g.flush();
        }
        if e.ctl & 4 != 0 {
            g.flush_aged(now);
        }
        g.take_delivered_into(&mut out);
    }
    g.flush();
    g.take_delivered_into(&mut out);
    assert_eq!((g.held(), g.queued()), (0, 0), "GRO holds packets after the final flush");
    let c = *g.counters();
    assert_eq!(c.packets_in, n_in as u64);
    assert_eq!(c.packets_out, out.len() as u64);

    let caps = input.caps.caps();
    let mut seg = Segmenter::new();
    let mut seg_mtu = Segmenter::new();
    let plain = TargetCaps::new(16_000);
    let mut got: HashMap<Vec<u8>, ByteCounts> = HashMap::new();
    let mut segs_out = 0u64;
    let mut bytes = Vec::new();
    for p in &out {
        let meta = capture_bytes(p, g.config().medium, &mut bytes);
        segs_out += if meta.is_gso() { u64::from(meta.gso_segs) } else { 1 };
        let valid = is_valid(&bytes, &meta);
        if !valid {
            // Only frames that were invalid on input, untouched (or with their padding trimmed).
            assert!(
                invalid_in.iter().any(|f| f.starts_with(&bytes)),
                "GRO delivered an invalid packet that was not given invalid: {:?}",
                superpacket_fuzz::problems(&bytes, &meta)
            );
            assert!(!meta.is_gso(), "an invalid input became an aggregate");
        }
        let h = FrameHeaders::parse(&bytes).ok();
        if let Some(h) = h.filter(|_| valid) {
            assert!(h.l3_len <= 65535, "L3 length {}", h.l3_len);
            if meta.is_gso() {
                assert!(h.l3_len < cfg.max_size, "aggregate reaches gro_max_size {}: {}", cfg.max_size, h.l3_len);
            }
            got.entry(flow_key(&bytes, &h)).or_default().add(h.payload_bytes(&bytes));
        }
        let payload = h.filter(|_| valid).map(|h| h.payload_bytes(&bytes).to_vec());
        segment_checked(&mut seg, p, &caps, payload.as_deref());
        if meta.is_gso() && valid {
            // Cut in software for a plain target with room for any segment: every aggregate GRO makes is cuttable.
            let frames = segment_checked(&mut seg_mtu, p, &plain, payload.as_deref());
            assert!(!frames.is_empty(), "a valid aggregate was refused by GSO: {:?}", seg_mtu.counters.drops);
        }
    }
    assert_eq!(segs_out, n_in as u64, "wire segments in != out");
    // Per flow, the same payload bytes. Not necessarily in the same order:
    // a packet that bypasses GRO (padding in strict mode, bad checksum, IP
    // options, ...) is delivered at once while older data of its flow may
    // still be held, as in Linux (offload-rules 9.1-4, 9.3).
    // Compared as multisets of bytes: a count per byte value (the same
    // invariant as sorting the bytes, in linear time).
    let nonempty = |m: HashMap<Vec<u8>, ByteCounts>| {
        let mut v: Vec<(Vec<u8>, ByteCounts)> = m.into_iter().filter(|(_, c)| c.total != 0).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let (sent, got) = (nonempty(sent), nonempty(got));
    if got != sent {
        let lens = |m: &[(Vec<u8>, ByteCounts)]| m.iter().map(|(k, c)| (k.clone(), c.total)).collect::<Vec<_>>();
        panic!("payload bytes not conserved per flow ({cfg:?}):\n in  {:?}\n out {:?}", lens(&sent), lens(&got));
    }
});
