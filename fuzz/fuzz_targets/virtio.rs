//! virtio_net_hdr import (`VirtioNetHdr::parse` + `to_meta`, the kernel's
//! `virtio_net_hdr_to_skb` rules) on an arbitrary header in front of an
//! arbitrary frame, then export and GSO of what was accepted.
//! Invariants: parse/emit round-trip the header bytes; an accepted header
//! gives consistent metadata (GSO type set iff `gso_size` set, DODGY on
//! every superpacket, `gso_segs` = ceil(payload / gso_size), a partial
//! checksum inside the frame); the metadata exports (`from_meta`) and
//! re-imports to the same metadata; GSO of the imported packet keeps its
//! contract (`superpacket_fuzz::segment_checked`).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use superpacket::offload::gso::Segmenter;
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, ImportOptions, VirtioNetHdr};
use superpacket::packet::{ChecksumState, GsoType, Packet};
use superpacket::validate;
use superpacket::wire::FrameHeaders;
use superpacket_fuzz::{CapsInput, Flows, FrameRecipe, segment_checked, valid_payload};

#[derive(Debug, Arbitrary)]
struct Input {
    hdr: [u8; 12],
    mrg: bool,
    little: bool,
    /// Make the header agree with the frame (csum_start = L4, field = pseudo-header sum).
    consistent: bool,
    trust_data_valid: bool,
    legacy_udp_segs: bool,
    frame: FrameRecipe,
    caps: CapsInput,
}

fuzz_target!(|input: Input| {
    let layout = if input.mrg { HdrLayout::MrgRxbuf } else { HdrLayout::Basic };
    let order = if input.little { HdrByteOrder::Little } else { HdrByteOrder::Native };
    let mut hdr = VirtioNetHdr::parse(&input.hdr, layout, order).expect("12 bytes are enough");
    let mut back = [0u8; 12];
    hdr.emit(&mut back, layout, order).expect("room");
    assert_eq!(back[..layout.len()], input.hdr[..layout.len()], "emit(parse(b)) != b");

    let mut flows = Flows::new();
    let mut frame = flows.build(&input.frame);
    if input.consistent
        && let Ok(h) = FrameHeaders::parse(&frame)
        && let Some(pseudo) = validate::l4_pseudo_header_sum(&frame, &h)
        && !h.is_fragment
        && let Some(field) = h.l4.csum_offset()
    {
        hdr.flags |= 1; // NEEDS_CSUM
        hdr.csum_start = h.l4_offset as u16;
        hdr.csum_offset = field;
        hdr.hdr_len = h.payload_offset as u16;
        frame[h.l4_offset + field as usize..][..2].copy_from_slice(&pseudo.to_be_bytes());
    }
    let opts = ImportOptions {
        udp_max_segments: if input.legacy_udp_segs { 64 } else { 128 },
        trust_data_valid: input.trust_data_valid,
        ..ImportOptions::default()
    };
    let Ok(meta) = hdr.to_meta(&frame, &opts) else { return };
    assert_eq!(meta.gso_type.is_empty(), meta.gso_size == 0, "{meta:?}");
    if meta.is_gso() {
        assert!(meta.gso_type.contains(GsoType::DODGY), "an imported superpacket is untrusted");
        let h = FrameHeaders::parse(&frame).expect("accepted GSO frame parses");
        assert_eq!(usize::from(meta.gso_segs), h.payload_len.div_ceil(usize::from(meta.gso_size)).min(65535));
        assert!(h.payload_len > usize::from(meta.gso_size));
    }
    if let ChecksumState::Partial { start, offset } = meta.csum {
        assert!(usize::from(start) + usize::from(offset) + 2 <= frame.len());
    }
    // Export and import again: the same metadata.
    let out = VirtioNetHdr::from_meta(&meta, &frame, input.trust_data_valid).expect("accepted metadata exports");
    let again = out.to_meta(&frame, &opts).expect("an exported header imports");
    assert_eq!(again, meta, "import(export(meta)) != meta; exported {out:?}");

    let mut pkt = Packet::from_frame(&frame);
    pkt.meta = meta;
    let mut seg = Segmenter::new();
    segment_checked(&mut seg, &pkt, &input.caps.caps(), valid_payload(&frame, &meta));
});
