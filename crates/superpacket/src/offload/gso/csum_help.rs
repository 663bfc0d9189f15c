//! Checksum completion in software ("checksum help") and the per-packet
//! offload decisions.
//!
//! - `csum_offloadable`: can the target finish this packet's partial
//!   checksum? (offload-rules 0.3 `skb_csum_hwoffload_help` / "can checksum
//!   protocol", 6.2 steps 5 and 6): `HW_CSUM` takes anything; `IP_CSUM` only
//!   TCP/UDP over IPv4; `IPV6_CSUM` only TCP/UDP over IPv6 with no extension
//!   headers; a packet with two or more VLAN tags keeps only `HW_CSUM` (the
//!   QinQ rule).
//! - `gso_offloadable`: can the target segment this superpacket itself?
//!   (3.1 `skb_gso_ok`, 6.2 `gso_features_check` and `harmonize_features`).
//! - Non-GSO packets (`non_gso`, `skb_checksum_help`): a
//!   `CHECKSUM_PARTIAL` packet the target cannot checksum is summed from
//!   `csum_start` to its end (the field already holds the pseudo-header sum),
//!   and the complement stored, **0 replaced by 0xFFFF** (`CSUM_MANGLED_0`,
//!   for every protocol, as Linux does); the header is rewritten in a copy,
//!   the payload summed from its slices (scatter-gather) or while it is copied
//!   (linear). `COMPLETE` on transmit is simply "done" (becomes `None`).

use super::layout::{self, L4, Layout};
use super::output::PayloadCursor;
use super::{GsoError, GsoOutcome, MAX_HEADER_LEN, MAX_SG_SLICES, Plan, SegmentSink, Segmenter, SgFrame, TargetCaps};
use crate::csum::{ones_add, ones_sum};
use crate::packet::{ChecksumState, GsoType, OffloadMeta, Packet};

/// Whether the target's checksum offload covers a TCP/UDP packet with this
/// layout (offload-rules 0.3, 6.2 step 5: more tags than the target's
/// `max_offload_tags` leave only HW_CSUM).
pub(crate) fn csum_offloadable(caps: &TargetCaps, lay: &Layout) -> bool {
    if caps.csum.hw {
        return true;
    }
    if lay.vlan_count > caps.max_offload_tags as usize || !matches!(lay.l4, L4::Tcp | L4::Udp) {
        return false;
    }
    if lay.v6 { caps.csum.ipv6 && lay.ext_len == 0 } else { caps.csum.ipv4 }
}

/// Whether a validated superpacket can go to the target whole (offload-rules
/// 3.1 `skb_gso_ok`, 6.2): every GSO bit (DODGY aside, which the segmenter
/// has just validated) is a target feature; FIXEDID (MANGLEID) is stripped
/// for a DF=0 IPv4 header; at most `max_offload_tags` VLAN tags; the target checksums this
/// packet; segment count and length within the target's limits; frag list
/// only if the target takes frag lists; checksum state PARTIAL or UNNECESSARY.
pub(crate) fn gso_offloadable(
    caps: &TargetCaps,
    plan: &Plan,
    meta: &OffloadMeta,
    bytes: usize,
    has_frag_list: bool,
) -> bool {
    let need = meta.gso_type.without(GsoType::DODGY);
    let mangleid_stripped = need.contains(GsoType::TCP_FIXEDID) && !plan.lay.v6 && !plan.lay.dont_frag;
    caps.gso.contains(need)
        && !mangleid_stripped
        && plan.lay.vlan_count <= caps.max_offload_tags as usize
        && csum_offloadable(caps, &plan.lay)
        && plan.segs <= caps.max_segs as usize
        && bytes < caps.gso_max_size
        && (!has_frag_list || caps.fraglist)
        && matches!(meta.csum, ChecksumState::Partial { .. } | ChecksumState::Unnecessary { .. })
}

/// Checksum help and linearization for a packet without GSO: `pkt` sent
/// with `meta` (its own, or a GSO packet's with the GSO fields cleared when
/// it is not a superpacket; the caller says which, without a copy).
pub(crate) fn non_gso<S: SegmentSink + ?Sized>(
    seg: &mut Segmenter,
    pkt: &Packet,
    meta: &OffloadMeta,
    caps: &TargetCaps,
    sink: &mut S,
) -> Result<GsoOutcome, GsoError> {
    let mut meta = *meta;
    if matches!(meta.csum, ChecksumState::Complete { .. }) {
        meta.csum = ChecksumState::None;
    }
    meta.gso_size = 0;
    meta.gso_segs = 0;
    let len = pkt.len();
    let chunked = pkt.segments().len() + usize::from(!pkt.frag_list().is_empty()) > 0;
    let frag_ok = pkt.frag_list().is_empty() || caps.fraglist;

    let ChecksumState::Partial { start, offset } = meta.csum else {
        if (caps.sg || !chunked) && frag_ok {
            sink.pass_through(pkt, &meta);
            return Ok(GsoOutcome::PassedThrough);
        }
        // Linearize (no SG) or flatten the frag list (no FRAGLIST).
        emit_one(seg, pkt, caps, sink, 0, None, &meta);
        return Ok(GsoOutcome::Completed { csum_completed: false });
    };
    let total = len + pkt.frag_list().iter().map(Packet::total_len).sum::<usize>();
    let field = start as usize + offset as usize;
    if field + 2 > total || field + 2 > MAX_HEADER_LEN {
        return Err(GsoError::ChecksumOutsidePacket { start, offset, len: total });
    }
    // Probe the headers (for the capability decision and the header block).
    let n = len.min(MAX_HEADER_LEN);
    let _ = pkt.read_at(0, &mut seg.hdr[..n]);
    let lay = layout::parse(&seg.hdr[..n], caps.medium).ok();
    let offloadable = caps.csum.hw
        || lay.as_ref().is_some_and(|l| {
            csum_offloadable(caps, l)
                && l.l4_offset == start as usize
                && matches!((l.l4, offset), (L4::Tcp, 16) | (L4::Udp, 6))
        });
    if offloadable {
        if (caps.sg || !chunked) && frag_ok {
            sink.pass_through(pkt, &meta);
            return Ok(GsoOutcome::PassedThrough);
        }
        emit_one(seg, pkt, caps, sink, 0, None, &meta);
        return Ok(GsoOutcome::Completed { csum_completed: false });
    }
    // Software: the header block covers at least the checksum field.
    let hl = lay.map_or(0, |l| l.hdr_len.min(len)).max(field + 2);
    if hl > len {
        // The field lies beyond the head's bytes (on the frag list): not supported.
        return Err(GsoError::ChecksumOutsidePacket { start, offset, len });
    }
    meta.csum = ChecksumState::None;
    // The checksum covers the L4 bytes up to the end of the IP packet, not
    // Ethernet padding after it: a padded frame (e.g. imported from a
    // virtio_net_hdr peer) is emitted without its padding, as Linux's receive
    // path trims it (`pskb_trim_rcsum` in `ip_rcv`) before any checksum help.
    // Summing the padding gave a wrong checksum (found by fuzz target `gso`).
    let total = len + pkt.frag_list().iter().map(Packet::total_len).sum::<usize>();
    let end = lay.filter(|l| l.l3_len > 0).map_or(total, |l| l.l3_end()).clamp(hl, total); // IP only
    emit_one(seg, pkt, caps, sink, hl, Some((start as usize, field, end)), &meta);
    Ok(GsoOutcome::Completed { csum_completed: true })
}

/// Emits the whole packet as one frame: the first `hl` bytes as the header
/// block (in `seg.hdr`), the rest as payload; with `csum = Some((start,
/// field, end))` only the first `end` bytes are emitted and the checksum from
/// `start` to `end` is completed into `field`.
fn emit_one<S: SegmentSink + ?Sized>(
    seg: &mut Segmenter,
    pkt: &Packet,
    caps: &TargetCaps,
    sink: &mut S,
    hl: usize,
    csum: Option<(usize, usize, usize)>,
    meta: &OffloadMeta,
) {
    let full = pkt.len() + pkt.frag_list().iter().map(Packet::total_len).sum::<usize>();
    let total = csum.map_or(full, |(_, _, end)| end);
    let payload_len = total - hl;
    let _ = pkt.read_at(0, &mut seg.hdr[..hl]);
    let mut cursor = PayloadCursor::new(pkt, hl, false, caps.medium);
    let summing = csum.is_some();
    // Parity of the payload relative to csum_start.
    let odd = csum.is_some_and(|(start, _, _)| (hl - start) % 2 == 1);
    let finish = |hdr: &mut [u8], psum: u16| {
        if let Some((start, field, _)) = csum {
            let psum = if odd { psum.swap_bytes() } else { psum };
            let sum = ones_add(ones_sum(&hdr[start..]), psum);
            let c = super::udp::mangle_zero(!sum);
            hdr[field..field + 2].copy_from_slice(&c.to_be_bytes());
        }
    };
    if caps.sg {
        let mut slices: [&[u8]; MAX_SG_SLICES] = [&[]; MAX_SG_SLICES];
        if let Some((n, psum)) = cursor.gather(payload_len, &mut slices, summing) {
            finish(&mut seg.hdr[..hl], psum);
            sink.sg_frame(&SgFrame { header: &seg.hdr[..hl], payload: &slices[..n], meta: *meta });
            return;
        }
    }
    let buf = sink.linear_buffer(total);
    buf[..hl].copy_from_slice(&seg.hdr[..hl]);
    let psum = cursor.copy_into(&mut buf[hl..], summing);
    finish(&mut buf[..hl], psum);
    sink.linear_frame(total, meta);
}
