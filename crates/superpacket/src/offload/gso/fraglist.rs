//! Fraglist GSO (offload-rules 3.2 "TCP fraglist GSO", 3.3 "UDP fraglist
//! GSO", 3.5 `skb_segment_list`).
//!
//! A fraglist aggregate is the first original packet (the head) whose IP
//! length, and for UDP the UDP length, were raised to cover the whole
//! aggregate, plus the other original packets chained on its frag list. A
//! chained packet either holds only its payload (its headers pulled, as
//! Linux and this crate's GRO chain them: see `pulled` below), or is a whole
//! frame (its L2 header is replaced by the head's, as Linux copies the MAC
//! header from the head), or starts at its network header. The head's IP
//! length tells which: it covers the members' bytes exactly when they are
//! payload only.
//!
//! When the target lacks fraglist GSO and the geometry is intact (the head's
//! own payload is exactly `gso_size`), the aggregate splits back into exactly
//! its original packets:
//! - every packet keeps its own network and transport headers and payload;
//!   the head's IP length (and UDP length, reset to 8 + gso_size) shrink back
//!   to its own part;
//! - IPv4 IDs are regenerated as head ID + i and header checksums recomputed
//!   (a visible difference from originals that had fixed IDs, 3.5);
//! - if the head's addresses or ports differ from the second packet's (NAT
//!   rewrote the aggregate after GRO), the head's are copied into every
//!   following packet with incremental TCP/UDP checksum updates (UDP only when
//!   its checksum is non-zero; a 0 result becomes 0xFFFF);
//! - L4 checksums are otherwise the originals' (GRO verified them), so the
//!   outputs carry complete checksums.
//!
//! An altered geometry falls back to ordinary segmentation over the
//! concatenated payloads, with checksums recomputed (3.2, 3.3).

use super::layout::{self, Layout, Medium};
use super::output::PayloadCursor;
use super::{GsoError, GsoOutcome, MAX_HEADER_LEN, MAX_SG_SLICES, SegmentSink, Segmenter, SgFrame, TargetCaps, udp};
use crate::csum::{ones_sum, update_bytes};
use crate::packet::{ChecksumState, GsoProtocol, GsoType, OffloadMeta, Packet};

/// Probes a chained packet's headers into `buf`, deciding from the head
/// (`head_hdr`, whose L3 header starts at `head_l3`) whether it starts with
/// an L2 header.
fn probe_frag(head_hdr: &[u8], head_l3: usize, frag: &Packet, buf: &mut [u8; MAX_HEADER_LEN]) -> Option<Layout> {
    let n = frag.len().min(MAX_HEADER_LEN);
    frag.read_at(0, &mut buf[..n]).ok()?;
    let b = &buf[..n];
    let version = head_hdr.get(head_l3)? >> 4;
    let medium = if head_l3 >= 2
        && b.len() > head_l3
        && b[head_l3 - 2..head_l3] == head_hdr[head_l3 - 2..head_l3]
        && b[head_l3] >> 4 == version
    {
        Medium::Ethernet
    } else if b.first().is_some_and(|x| x >> 4 == version) {
        Medium::Ip
    } else {
        return None;
    };
    layout::parse(b, medium).ok()
}

/// Payload offset of a chained packet of `head`, a packet of `medium` (0 if
/// it does not parse; validated packets always do). Used by the fallback's
/// payload cursor.
pub(crate) fn payload_offset(head: &Packet, frag: &Packet, medium: Medium) -> usize {
    let mut hbuf = [0u8; MAX_HEADER_LEN];
    let n = head.len().min(MAX_HEADER_LEN);
    if head.read_at(0, &mut hbuf[..n]).is_err() {
        return 0;
    }
    let Ok(hl) = layout::parse(&hbuf[..n], medium) else { return 0 };
    let mut fbuf = [0u8; MAX_HEADER_LEN];
    probe_frag(&hbuf[..n], hl.l3_offset, frag, &mut fbuf).map_or(0, |l| l.hdr_len)
}

/// Segments (or passes through) a validated-so-far fraglist aggregate whose
/// head headers are in `seg.hdr` with layout `lay`.
pub(crate) fn segment<S: SegmentSink + ?Sized>(
    seg: &mut Segmenter,
    pkt: &Packet,
    caps: &TargetCaps,
    sink: &mut S,
    lay: Layout,
    proto: GsoProtocol,
) -> Result<GsoOutcome, GsoError> {
    let meta = pkt.meta;
    let gso_size = meta.gso_size as usize;
    let head_payload =
        pkt.len().checked_sub(lay.hdr_len).ok_or(GsoError::BadFraglist("head shorter than its headers"))?;
    let pulled_bytes: usize = pkt.frag_list().iter().map(Packet::total_len).sum();
    if !pkt.frag_list().is_empty() && lay.l3_end() == pkt.len() + pulled_bytes {
        return pulled(seg, pkt, caps, sink, lay, proto, head_payload);
    }
    let head_hdr_len = lay.hdr_len;
    let mut fbuf = [0u8; MAX_HEADER_LEN];
    let mut frag_payload = 0usize;
    let mut max_l3 = lay.hdr_len - lay.l3_offset + head_payload;
    for f in pkt.frag_list() {
        if !f.frag_list().is_empty() {
            return Err(GsoError::BadFraglist("chained packet with its own frag list"));
        }
        let fl = probe_frag(&seg.hdr[..head_hdr_len], lay.l3_offset, f, &mut fbuf)
            .ok_or(GsoError::BadFraglist("chained packet headers unreadable"))?;
        if fl.v6 != lay.v6 || fl.l4 != lay.l4 || fl.is_fragment {
            return Err(GsoError::BadFraglist("chained packet of another protocol"));
        }
        if fl.l3_end() != f.len() {
            return Err(GsoError::BadFraglist("chained packet length disagrees with its IP length"));
        }
        if lay.l3_offset + (fl.hdr_len - fl.l3_offset) > MAX_HEADER_LEN {
            return Err(GsoError::HeaderTooLong {
                len: lay.l3_offset + fl.hdr_len - fl.l3_offset,
                max: MAX_HEADER_LEN,
            });
        }
        frag_payload += fl.l3_end() - fl.hdr_len;
        max_l3 = max_l3.max(fl.l3_len);
    }
    if lay.l3_end() != pkt.len() + frag_payload {
        return Err(GsoError::LengthMismatch { ip_end: lay.l3_end(), bytes: pkt.len() + frag_payload });
    }
    let payload_len = head_payload + frag_payload;
    if pkt.frag_list().is_empty() || head_payload != gso_size {
        // Altered geometry (or nothing chained): ordinary segmentation over
        // the concatenated payloads, checksums recomputed (state forced NONE).
        let mut plan = Segmenter::plan(pkt, caps, lay, proto, payload_len, true, false)?;
        plan.partial_in = false;
        let segments = seg.cut(pkt, caps, &plan, sink);
        return Ok(GsoOutcome::Segmented { segments, csum_completed: plan.sw_csum });
    }
    let segs = 1 + pkt.frag_list().len();
    if pass_through_intact(pkt, caps, sink, &lay, proto, segs, max_l3)? {
        return Ok(GsoOutcome::PassedThrough);
    }
    split(seg, pkt, caps, sink, &lay, proto);
    Ok(GsoOutcome::Segmented { segments: segs, csum_completed: false })
}

/// A fraglist aggregate whose members hold only their payload (their
/// headers pulled, as Linux and [`crate::offload::gro`] chain them): the
/// members' headers are the head's (fraglist GRO merges only packets whose
/// headers match but for lengths, IDs, sequence numbers and checksums), so
/// each restored packet gets the head's headers with its own length, IPv4 ID
/// head + i, sequence number advanced by the payload before it, the head's
/// TCP flags (all members had them) and a recomputed L4 checksum, equal to
/// the original's. An altered geometry falls back to ordinary segmentation.
fn pulled<S: SegmentSink + ?Sized>(
    seg: &mut Segmenter,
    pkt: &Packet,
    caps: &TargetCaps,
    sink: &mut S,
    lay: Layout,
    proto: GsoProtocol,
    head_payload: usize,
) -> Result<GsoOutcome, GsoError> {
    let meta = pkt.meta;
    let gso_size = meta.gso_size as usize;
    let frags = pkt.frag_list();
    if frags.iter().any(|f| !f.frag_list().is_empty() || f.is_empty()) {
        return Err(GsoError::BadFraglist("chained packet empty or with its own frag list"));
    }
    let payload_len = lay.l3_end() - lay.hdr_len;
    if head_payload != gso_size {
        let mut plan = Segmenter::plan(pkt, caps, lay, proto, payload_len, false, false)?;
        plan.partial_in = false;
        let segments = seg.cut(pkt, caps, &plan, sink);
        return Ok(GsoOutcome::Segmented { segments, csum_completed: plan.sw_csum });
    }
    let segs = 1 + frags.len();
    let longest = frags.iter().map(Packet::len).max().unwrap_or(0).max(head_payload);
    let max_l3 = lay.hdr_len - lay.l3_offset + longest;
    if pass_through_intact(pkt, caps, sink, &lay, proto, segs, max_l3)? {
        return Ok(GsoOutcome::PassedThrough);
    }
    let mut plan = Segmenter::plan(pkt, caps, lay, proto, payload_len, false, false)?;
    plan.partial_in = false;
    plan.keep_flags = true;
    plan.segs = segs;
    let lengths = std::iter::once(head_payload).chain(frags.iter().map(Packet::len));
    let segments = seg.cut_at(pkt, caps, &plan, sink, lengths);
    Ok(GsoOutcome::Segmented { segments, csum_completed: plan.sw_csum })
}

/// The checks both shapes of an intact aggregate share, once its segment
/// count `segs` and its longest segment's L3 length `max_l3` are known: too
/// many UDP segments, a `gso_segs` that disagrees (unless DODGY) or a segment
/// over the MTU is an error. Then, if the target takes the aggregate as it is
/// (fraglist GSO, tag depth, segment count, size), passes it through with
/// DODGY cleared and `gso_segs` set, and returns `true`.
fn pass_through_intact<S: SegmentSink + ?Sized>(
    pkt: &Packet,
    caps: &TargetCaps,
    sink: &mut S,
    lay: &Layout,
    proto: GsoProtocol,
    segs: usize,
    max_l3: usize,
) -> Result<bool, GsoError> {
    let meta = pkt.meta;
    if proto == GsoProtocol::UdpL4 && segs > caps.udp_max_segments as usize {
        return Err(GsoError::TooManySegments { segments: segs, max: caps.udp_max_segments as usize });
    }
    if meta.gso_segs != 0 && meta.gso_segs as usize != segs && !meta.gso_type.contains(GsoType::DODGY) {
        return Err(GsoError::GsoSegsMismatch { found: meta.gso_segs, computed: segs });
    }
    if max_l3 > caps.mtu {
        return Err(GsoError::SegmentExceedsMtu { len: max_l3, mtu: caps.mtu });
    }
    let need = meta.gso_type.without(GsoType::DODGY);
    if caps.gso.contains(need)
        && caps.fraglist
        && lay.vlan_count <= caps.max_offload_tags as usize
        && segs <= caps.max_segs as usize
        && lay.l3_end() < caps.gso_max_size
    {
        let mut out = meta;
        out.gso_type = need;
        out.gso_segs = segs as u16;
        sink.pass_through(pkt, &out);
        return Ok(true);
    }
    Ok(false)
}

/// Address/port bytes that NAT may rewrite: (offset in L3, length) pairs.
fn addr_ranges(v6: bool) -> [(usize, usize); 2] {
    if v6 { [(8, 16), (24, 16)] } else { [(12, 4), (16, 4)] }
}

/// `skb_segment_list` plus the IP-layer fixups, for a validated aggregate.
fn split<S: SegmentSink + ?Sized>(
    seg: &mut Segmenter,
    pkt: &Packet,
    caps: &TargetCaps,
    sink: &mut S,
    lay: &Layout,
    proto: GsoProtocol,
) {
    let gso_size = pkt.meta.gso_size as usize;
    let out_meta = OffloadMeta {
        csum: ChecksumState::None,
        rss_hash: pkt.meta.rss_hash,
        arrival_ns: pkt.meta.arrival_ns,
        ..OffloadMeta::default()
    };
    let l3 = lay.l3_offset;
    let hl = lay.hdr_len;
    let id0 = u16::from_be_bytes([seg.hdr[l3 + 4], seg.hdr[l3 + 5]]);
    let csum_at = proto.csum_offset() as usize;

    // The head: its own lengths back, header checksum recomputed.
    {
        let h = &mut seg.hdr[..hl];
        set_l3_len(h, lay, hl - l3 + gso_size, id0);
        if proto == GsoProtocol::UdpL4 {
            h[lay.l4_offset + 4..lay.l4_offset + 6].copy_from_slice(&((8 + gso_size) as u16).to_be_bytes());
        }
    }
    let cursor = PayloadCursor::new(pkt, hl, false, lay.medium());
    emit(&seg.hdr[..hl], cursor, gso_size, caps, sink, &out_meta);

    // NAT detection against the second packet.
    let mut fbuf = [0u8; MAX_HEADER_LEN];
    let mut out = [0u8; MAX_HEADER_LEN];
    let mut nat = false;
    for (i, f) in pkt.frag_list().iter().enumerate() {
        let Some(fl) = probe_frag(&seg.hdr[..hl], l3, f, &mut fbuf) else { continue };
        let fh_len = fl.hdr_len - fl.l3_offset;
        let n = l3 + fh_len;
        out[..l3].copy_from_slice(&seg.hdr[..l3]);
        out[l3..n].copy_from_slice(&fbuf[fl.l3_offset..fl.hdr_len]);
        let l4 = l3 + (fl.l4_offset - fl.l3_offset);
        if i == 0 {
            nat =
                addr_ranges(lay.v6).iter().any(|&(o, len)| seg.hdr[l3 + o..l3 + o + len] != out[l3 + o..l3 + o + len])
                    || seg.hdr[lay.l4_offset..lay.l4_offset + 4] != out[l4..l4 + 4];
        }
        if nat {
            let check = u16::from_be_bytes([out[l4 + csum_at], out[l4 + csum_at + 1]]);
            let skip_udp = proto == GsoProtocol::UdpL4 && check == 0;
            let mut c = check;
            for (o, len) in addr_ranges(lay.v6) {
                let (old, new) = (l3 + o, l3 + o + len);
                if !skip_udp {
                    c = update_bytes(c, &out[old..new], &seg.hdr[old..new]);
                }
                out[old..new].copy_from_slice(&seg.hdr[old..new]);
            }
            let head_ports = [
                seg.hdr[lay.l4_offset],
                seg.hdr[lay.l4_offset + 1],
                seg.hdr[lay.l4_offset + 2],
                seg.hdr[lay.l4_offset + 3],
            ];
            if !skip_udp {
                c = update_bytes(c, &out[l4..l4 + 4], &head_ports);
            }
            out[l4..l4 + 4].copy_from_slice(&head_ports);
            if !skip_udp {
                let c = if proto == GsoProtocol::UdpL4 { udp::mangle_zero(c) } else { c };
                out[l4 + csum_at..l4 + csum_at + 2].copy_from_slice(&c.to_be_bytes());
            }
        }
        let own_len = fl.l3_len;
        set_l3_len(&mut out[..n], lay, own_len, id0.wrapping_add(i as u16 + 1));
        let cursor = PayloadCursor::new(f, fl.hdr_len, false, fl.medium());
        emit(&out[..n], cursor, fl.l3_end() - fl.hdr_len, caps, sink, &out_meta);
    }
}

/// Writes the L3 length (and for IPv4 the ID and header checksum).
fn set_l3_len(h: &mut [u8], lay: &Layout, l3_len: usize, id: u16) {
    let l3 = lay.l3_offset;
    if lay.v6 {
        h[l3 + 4..l3 + 6].copy_from_slice(&((l3_len - 40) as u16).to_be_bytes());
    } else {
        h[l3 + 2..l3 + 4].copy_from_slice(&(l3_len as u16).to_be_bytes());
        h[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
        h[l3 + 10] = 0;
        h[l3 + 11] = 0;
        let c = !ones_sum(&h[l3..l3 + lay.l3_header_len]);
        h[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
}

/// Emits one restored packet: header + `len` payload bytes from `cursor`.
fn emit<S: SegmentSink + ?Sized>(
    header: &[u8],
    mut cursor: PayloadCursor<'_>,
    len: usize,
    caps: &TargetCaps,
    sink: &mut S,
    meta: &OffloadMeta,
) {
    if caps.sg {
        let mut slices: [&[u8]; MAX_SG_SLICES] = [&[]; MAX_SG_SLICES];
        if let Some((n, _)) = cursor.gather(len, &mut slices, false) {
            sink.sg_frame(&SgFrame { header, payload: &slices[..n], meta: *meta });
            return;
        }
    }
    let hl = header.len();
    let buf = sink.linear_buffer(hl + len);
    buf[..hl].copy_from_slice(header);
    cursor.copy_into(&mut buf[hl..], false);
    sink.linear_frame(hl + len, meta);
}
