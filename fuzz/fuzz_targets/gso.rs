//! GSO of arbitrary frames with arbitrary metadata for arbitrary targets.
//! The frame is a recipe (a synthetic flow's frame, possibly damaged, or raw
//! bytes), optionally split into payload segments; the metadata is either
//! arbitrary or made consistent with the frame (GSO type of its protocol,
//! `gso_segs` computed, a partial checksum holding the pseudo-header sum),
//! so that valid superpackets are common. Invariants: see
//! `superpacket_fuzz::segment_checked` (errors emit nothing, outcome and
//! counters agree, a valid input gives valid frames within the MTU whose
//! payloads add up to the superpacket's, in order).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use superpacket::offload::gso::Segmenter;
use superpacket::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use superpacket::validate;
use superpacket::wire::{FrameHeaders, L3Kind, L4Kind};
use superpacket_fuzz::{CapsInput, Flows, FrameRecipe, segment_checked, valid_payload};

#[derive(Debug, Arbitrary)]
enum MetaInput {
    /// Made consistent with the frame, with this gso_size and extra GSO bits.
    Consistent { gso_size: u16, extra: u8, partial: bool },
    /// Arbitrary.
    Raw { gso_type: u32, gso_size: u16, gso_segs: u16, csum: u8, start: u16, offset: u16 },
}

#[derive(Debug, Arbitrary)]
struct Input {
    frame: FrameRecipe,
    meta: MetaInput,
    caps: CapsInput,
    /// Payload layout: detach the payload after the headers, then split at these points.
    cuts: Vec<u16>,
    detach: bool,
}

fn meta_for(frame: &mut [u8], m: &MetaInput) -> OffloadMeta {
    let mut meta = OffloadMeta::default();
    match *m {
        MetaInput::Raw { gso_type, gso_size, gso_segs, csum, start, offset } => {
            meta.gso_type = GsoType::from_bits(gso_type);
            meta.gso_size = gso_size;
            meta.gso_segs = gso_segs;
            meta.csum = match csum % 4 {
                0 => ChecksumState::None,
                1 => ChecksumState::Unnecessary { level: csum >> 2 },
                2 => ChecksumState::Complete { sum: start },
                _ => ChecksumState::Partial { start, offset },
            };
        }
        MetaInput::Consistent { gso_size, extra, partial } => {
            let Ok(h) = FrameHeaders::parse(frame) else { return meta };
            let (base, field) = match (h.l3, h.l4) {
                (L3Kind::Ipv4, L4Kind::Tcp) => (GsoType::TCPV4, 16),
                (L3Kind::Ipv6, L4Kind::Tcp) => (GsoType::TCPV6, 16),
                (_, L4Kind::Udp) => (GsoType::UDP_L4, 6),
                _ => return meta,
            };
            let gso_size = usize::from(gso_size % 2000) + 1;
            if h.payload_len > gso_size {
                meta.gso_type = base;
                for (i, b) in
                    [GsoType::DODGY, GsoType::TCP_ECN, GsoType::TCP_FIXEDID, GsoType::TCP_ACCECN].iter().enumerate()
                {
                    if extra & (1 << i) != 0 && (base != GsoType::UDP_L4 || i == 0) {
                        meta.gso_type |= *b;
                    }
                }
                meta.gso_size = gso_size as u16;
                meta.gso_segs = h.payload_len.div_ceil(gso_size).min(65535) as u16;
            }
            if partial && !h.is_fragment {
                if let Some(pseudo) = validate::l4_pseudo_header_sum(frame, &h) {
                    let at = h.l4_offset + field;
                    frame[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
                    meta.csum = ChecksumState::Partial { start: h.l4_offset as u16, offset: field as u16 };
                }
            }
        }
    }
    meta
}

fuzz_target!(|input: Input| {
    if std::env::var_os("SUPERPACKET_FUZZ_DEBUG").is_some() {
        eprintln!("{input:#?}");
    }
    let mut flows = Flows::new();
    let mut frame = flows.build(&input.frame);
    let meta = meta_for(&mut frame, &input.meta);
    let mut pkt = Packet::from_frame(&frame);
    pkt.meta = meta;
    if input.detach {
        let hl = FrameHeaders::parse(&frame).map_or(14, |h| h.payload_offset).min(frame.len());
        if pkt.detach_payload(hl).is_ok() {
            // Cut the payload into segments (no byte copied): split off the
            // tails from the last cut to the first, then append them back in order.
            let mut cuts: Vec<usize> =
                input.cuts.iter().take(6).map(|&c| hl + usize::from(c) % (frame.len() - hl + 1)).collect();
            cuts.sort_unstable_by(|a, b| b.cmp(a));
            cuts.dedup();
            let mut tails = Vec::new();
            for at in cuts {
                if let Ok(t) = pkt.split_off(at) {
                    tails.push(t);
                }
            }
            for t in tails.into_iter().rev() {
                assert!(pkt.append_payload_of(t, 0).is_ok(), "a few segments always fit");
            }
        }
        pkt.meta = meta;
    }
    assert_eq!(superpacket_fuzz::bytes_of(&pkt), frame, "packet layout changed the bytes");
    let caps = input.caps.caps();
    let mut seg = Segmenter::new();
    segment_checked(&mut seg, &pkt, &caps, valid_payload(&frame, &meta));
});
