//! Tunnel GSO: segmentation of a superpacket inside a UDP tunnel (VXLAN,
//! Geneve) with inner TSO or USO (offload-rules 3.7; Linux
//! `__skb_udp_tunnel_segment` over `inet_gso_segment`/`ipv6_gso_segment`).
//!
//! # Input (validated before anything is emitted)
//! - `gso_type`: the inner protocol's bit (TCPV4, TCPV6, UDP_L4) plus exactly
//!   one of `UDP_TUNNEL` (outer UDP checksum 0) and `UDP_TUNNEL_CSUM` (outer
//!   UDP checksum computed per segment), optionally DODGY, TCP_ECN,
//!   TCP_ACCECN, TCP_FIXEDID (outer IPv4 ID) and TCP_FIXEDID_INNER (inner
//!   IPv4 ID); no FRAGLIST. Otherwise [`GsoError::BadTunnelGso`].
//! - [`OffloadMeta::encap`](crate::packet::OffloadMeta::encap) present and
//!   agreeing with the bytes: the outer headers parse to UDP at
//!   `outer_transport`; the tunnel header between the outer UDP header and
//!   `inner_mac` has its protocol's length (VXLAN 8; Geneve 8 + its option
//!   length, protocol Transparent Ethernet Bridging); the inner Ethernet
//!   header at `inner_mac` leads to the inner IP header at `inner_network`
//!   and the inner L4 header at `inner_transport`. Otherwise
//!   [`GsoError::BadEncapsulation`].
//! - The inner protocol matches the GSO type ([`GsoError::ProtocolMismatch`]);
//!   the outer IP length, the inner IP length and the outer UDP length all
//!   reach the last byte of the packet ([`GsoError::LengthMismatch`],
//!   [`GsoError::BadEncapsulation`]); a partial checksum starts at the inner
//!   L4 header ([`GsoError::ChecksumStartNotL4`]); the segment count, the
//!   USO limit, `gso_segs` and the per-segment outer L3 length within the
//!   MTU as for plain GSO.
//!
//! # Output
//! Pass-through when the target does tunnel GSO itself: every GSO bit is in
//! both [`TargetCaps::gso`] and [`TargetCaps::enc_gso`] (Linux: the features
//! of an encapsulated packet are `features & hw_enc_features`), the
//! encapsulated checksum offload ([`TargetCaps::csum`] ∩
//! [`TargetCaps::enc_csum`]) covers the **outer** IP version
//! (`harmonize_features` looks at the outer protocol), plus the usual limits.
//!
//! Otherwise each segment is the header block (outer L2, outer IP, outer
//! UDP, tunnel header, inner L2, inner IP, inner L4) with:
//! - inner headers fixed exactly as plain TSO/USO does (inner IPv4 ID + i
//!   unless `TCP_FIXEDID_INNER`, TCP sequence and flags, UDP length, inner
//!   checksum completed, or left partial when the encapsulated checksum
//!   offload covers the inner IP version);
//! - outer IPv4 total length / IPv6 payload length, outer IPv4 ID + i unless
//!   `TCP_FIXEDID`, outer IPv4 header checksum, outer UDP length;
//! - outer UDP checksum: 0 for `UDP_TUNNEL` (Linux leaves the field, which
//!   is 0 in every such packet Linux builds: `udp_set_csum` with no checksum,
//!   or GRO, which marks a packet `UDP_TUNNEL` only when the field is 0);
//!   for `UDP_TUNNEL_CSUM` computed in software with local checksum offload
//!   (LCO: the inner L4 bytes sum to the complement of the inner
//!   pseudo-header, so no payload byte is read for it) and 0 sent as
//!   0xFFFF, or left `CHECKSUM_PARTIAL` (pseudo-header sum in the field)
//!   when the inner checksum was completed in software and the target can
//!   checksum the outer IP version (Linux's `offload_csum`). The outer
//!   pseudo-header is derived from the superpacket's field, which holds the
//!   pseudo-header sum over the whole outer UDP length (Linux:
//!   `partial = uh->check - skb->len`).
//!
//! GSO_PARTIAL output, for a target with the tunnel type in
//! [`TargetCaps::gso_partial`] that cannot take the superpacket whole (and
//! has SG, inner checksum offload and the inner GSO type as an encapsulated
//! feature): one chunk of the largest multiple of `gso_size` (at least two
//! units) plus the remainder; the chunk's IP and UDP lengths state one
//! segment, the remainder's IPv4 IDs are advanced by the chunk's units, the
//! inner checksum is left partial over the chunk's length and the outer UDP
//! checksum is Linux's (pseudo-header of the chunk's real UDP length);
//! offload-rules 3.7 "GSO_PARTIAL output", Linux `skb_segment` with
//! `partial_segs`, `inet_gso_segment`, `__skb_udp_tunnel_segment`.
//!
//! A tunnel superpacket whose payload is not larger than `gso_size` is cut
//! as one segment (lengths and checksums finished); Linux's TCP/UDP
//! segmenters refuse it (EINVAL), but no Linux path builds one.

use super::layout::{self, L4, Layout};
use super::{
    CsumCaps, GsoError, GsoOutcome, MAX_HEADER_LEN, Plan, SegmentSink, Segmenter, TargetCaps, check_protocol,
    csum_help, len_sum,
};
use crate::csum::{ones_add, ones_sub, ones_sum};
use crate::packet::{ChecksumState, Encapsulation, GsoProtocol, GsoType, OffloadMeta, Packet, TunnelKind};
use crate::wire::{Medium, WireError};

/// The two tunnel GSO bits.
pub(crate) const TUNNEL_BITS: GsoType =
    GsoType::from_bits(GsoType::UDP_TUNNEL.bits() | GsoType::UDP_TUNNEL_CSUM.bits());

/// The parsed headers of a tunnel packet: outer layout (from the first byte)
/// and inner layout with **absolute** offsets (from the first byte of the
/// frame, not of the inner frame).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TunnelLayout {
    pub outer: Layout,
    pub inner: Layout,
}

fn bad(why: &'static str) -> GsoError {
    GsoError::BadEncapsulation(why)
}

/// Checks `encap` against the header bytes `hdr` (a copy of the first up
/// to [`MAX_HEADER_LEN`] bytes of the packet) and returns both layouts.
pub(crate) fn parse(hdr: &[u8], medium: Medium, encap: &Encapsulation) -> Result<TunnelLayout, GsoError> {
    let outer = layout::parse(hdr, medium)?;
    if outer.is_fragment || outer.l4 != L4::Udp {
        return Err(bad("the outer headers are not UDP"));
    }
    if outer.l4_offset != encap.outer_transport as usize {
        return Err(bad("outer_transport is not the outer UDP header"));
    }
    let ot = outer.l4_offset;
    let im = encap.inner_mac as usize;
    let tnl_len = im.checked_sub(ot + 8).ok_or(bad("inner_mac lies inside the outer UDP header"))?;
    let truncated = |needed: usize| {
        if needed > MAX_HEADER_LEN {
            GsoError::HeaderTooLong { len: needed, max: MAX_HEADER_LEN }
        } else {
            GsoError::BadHeaders(WireError::truncated("tunnel", needed, hdr.len()))
        }
    };
    match encap.tunnel {
        TunnelKind::Vxlan => {
            if tnl_len != crate::wire::vxlan::VXLAN_HEADER_LEN {
                return Err(bad("the VXLAN header is not 8 bytes"));
            }
        }
        TunnelKind::Geneve => {
            let g = ot + 8;
            if hdr.len() < g + 8 {
                return Err(truncated(g + 8));
            }
            let len = 8 + usize::from(hdr[g] & 0x3f) * 4;
            if tnl_len != len {
                return Err(bad("inner_mac is not after the Geneve header and its options"));
            }
            if u16::from_be_bytes([hdr[g + 2], hdr[g + 3]]) != crate::wire::geneve::GENEVE_PROTO_ETHERNET {
                return Err(bad("the Geneve protocol is not Ethernet (0x6558)"));
            }
        }
    }
    if im + 14 > hdr.len() {
        return Err(truncated(im + 14));
    }
    let inner = layout::parse(&hdr[im..], Medium::Ethernet).map_err(|e| match e {
        GsoError::BadHeaders(WireError::Truncated { needed, .. }) if hdr.len() == MAX_HEADER_LEN => {
            truncated(im + needed)
        }
        GsoError::HeaderTooLong { len, max } => GsoError::HeaderTooLong { len: im + len, max },
        e => e,
    })?;
    let inner = Layout {
        l3_offset: inner.l3_offset + im,
        l4_offset: inner.l4_offset + im,
        hdr_len: inner.hdr_len + im,
        ..inner
    };
    if inner.l3_offset != encap.inner_network as usize {
        return Err(bad("inner_network is not the inner IP header"));
    }
    if inner.l4_offset != encap.inner_transport as usize {
        return Err(bad("inner_transport is not the inner L4 header"));
    }
    if inner.hdr_len > MAX_HEADER_LEN {
        return Err(GsoError::HeaderTooLong { len: inner.hdr_len, max: MAX_HEADER_LEN });
    }
    Ok(TunnelLayout { outer, inner })
}

/// Checksum offload for the inner headers of an encapsulated packet:
/// Linux's `features & hw_enc_features`.
fn enc_csum(caps: &TargetCaps) -> CsumCaps {
    CsumCaps {
        ipv4: caps.csum.ipv4 && caps.enc_csum.ipv4,
        ipv6: caps.csum.ipv6 && caps.enc_csum.ipv6,
        hw: caps.csum.hw && caps.enc_csum.hw,
    }
}

/// `can_checksum_protocol` for an IP version.
fn can_checksum(c: CsumCaps, v6: bool) -> bool {
    c.hw || if v6 { c.ipv6 } else { c.ipv4 }
}

/// What happens to the outer UDP checksum of each segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OuterCsum {
    /// `UDP_TUNNEL`: 0.
    Zero,
    /// Computed in software (LCO).
    Software,
    /// Left `CHECKSUM_PARTIAL` for the target (pseudo-header sum in the field).
    Partial,
}

/// Per-segment rewriting of the outer headers (offload-rules 3.7), from
/// values read once from the template; the inner headers are the plain
/// [`super::HeaderFixer`]'s.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OuterFixer {
    l3: usize,
    v6: bool,
    ip_id: u16,
    /// Sum of the outer IPv4 header with total length, ID and checksum zeroed.
    ip_base: u16,
    udp: usize,
    inner_l4: usize,
    mode: OuterCsum,
    /// Outer pseudo-header sum without the length.
    addr_sum: u16,
    /// Sum of the outer UDP ports.
    port_sum: u16,
    /// How far the outer IPv4 IDs of consecutive frames lie apart: 0 with
    /// TCP_FIXEDID, else [`Plan::id_stride`].
    id_step: u16,
    /// [`Plan::wire_cap`].
    wire_cap: usize,
}

impl OuterFixer {
    fn new(
        template: &[u8],
        tl: &TunnelLayout,
        bytes: usize,
        fixed_id: bool,
        mode: OuterCsum,
        plan: &Plan,
    ) -> OuterFixer {
        let o = &tl.outer;
        let word = |at: usize| u16::from_be_bytes([template[at], template[at + 1]]);
        let l3 = o.l3_offset;
        let ip_base = if o.v6 {
            0
        } else {
            let s = ones_sum(&template[l3..l3 + o.l3_header_len]);
            ones_sub(ones_sub(ones_sub(s, word(l3 + 2)), word(l3 + 4)), word(l3 + 10))
        };
        let udp = o.l4_offset;
        // The field holds pseudo(addresses, whole outer UDP length) (Linux
        // `partial = uh->check - skb->len`, a 32-bit length).
        let addr_sum = ones_sub(word(udp + 6), len_sum(bytes - udp));
        OuterFixer {
            l3,
            v6: o.v6,
            ip_id: if o.v6 { 0 } else { word(l3 + 4) },
            ip_base,
            udp,
            inner_l4: tl.inner.l4_offset,
            mode,
            addr_sum,
            port_sum: ones_add(word(udp), word(udp + 2)),
            id_step: if fixed_id { 0 } else { plan.id_stride() },
            wire_cap: plan.wire_cap(),
        }
    }

    /// The outer fields and partial sums that depend only on the payload
    /// length `len` of a frame whose header block is `hl` bytes (computed
    /// once per length, as [`super::HeaderFixer::for_len`]).
    ///
    /// For a GSO_PARTIAL chunk the outer IP and UDP lengths state one
    /// segment (`gso_size` payload bytes) while the outer UDP checksum
    /// covers the chunk as it is: Linux writes `uh->len` from `gso_size`
    /// but seeds the checksum with the chunk's length (`skb->len -
    /// udp_offset`) before `gso_make_checksum` (offload-rules 3.7).
    #[inline]
    pub(crate) fn for_len(&self, hl: usize, len: usize) -> OuterLen {
        use crate::csum::fold32;
        let frame_len = hl + len;
        let wire_len = hl + len.min(self.wire_cap);
        let l3_field = if self.v6 { wire_len - self.l3 - 40 } else { wire_len - self.l3 } as u16;
        let udp_len = frame_len - self.udp;
        let udp_field = (wire_len - self.udp) as u16;
        let pseudo = fold32(u32::from(self.addr_sum) + (udp_len >> 16) as u32 + (udp_len & 0xFFFF) as u32);
        OuterLen {
            l3_field,
            ip_sum: fold32(u32::from(self.ip_base) + u32::from(l3_field)),
            udp_field,
            pseudo,
            sw_part: u32::from(pseudo) + u32::from(self.port_sum) + u32::from(udp_field),
        }
    }

    /// Writes the outer fields that depend only on the frame length of `k`
    /// (outer IP length, outer UDP length, and the outer UDP checksum when
    /// it is 0 or the pseudo-header sum) into the template `hdr`, as
    /// [`super::HeaderFixer::write_len`] does for the inner ones.
    ///
    /// # Panics
    /// If `hdr` is shorter than the template's header block (a programming error).
    #[inline]
    pub(crate) fn write_len(&self, hdr: &mut [u8], k: &OuterLen) {
        super::write_ip_len(hdr, self.l3, self.v6, k.l3_field);
        let udp = self.udp;
        hdr[udp + 4..udp + 6].copy_from_slice(&k.udp_field.to_be_bytes());
        let check = match self.mode {
            OuterCsum::Zero => 0,
            OuterCsum::Partial => k.pseudo,
            // Depends on the inner headers of each segment: `fix` writes it.
            OuterCsum::Software => return,
        };
        hdr[udp + 6..udp + 8].copy_from_slice(&check.to_be_bytes());
    }

    /// Rewrites the per-segment outer fields of `hdr` (already holding the
    /// fixed inner headers and [`OuterFixer::write_len`] of `k`) for segment
    /// `i`, a frame whose inner L4 pseudo-header sum is `inner_pseudo`:
    /// the outer IPv4 ID and header checksum, and the outer UDP checksum
    /// computed in software.
    ///
    /// # Panics
    /// If `hdr` is shorter than the template's header block (a programming error).
    #[inline(always)]
    pub(crate) fn fix(&self, hdr: &mut [u8], i: usize, k: &OuterLen, inner_pseudo: u16) {
        use crate::csum::fold32;
        let l3 = self.l3;
        if !self.v6 {
            let ip: &mut [u8; 20] = (&mut hdr[l3..l3 + 20]).try_into().expect("outer IPv4 header in the block");
            let id = self.ip_id.wrapping_add((i as u16).wrapping_mul(self.id_step));
            let c = !ones_add(k.ip_sum, id);
            ip[4..6].copy_from_slice(&id.to_be_bytes());
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        if self.mode == OuterCsum::Software {
            // Outer UDP header (checksum field as 0), tunnel header and
            // inner headers up to the inner L4 header, then the inner L4
            // bytes by LCO: they sum to the complement of their pseudo-header.
            let udp = self.udp;
            let lco = !inner_pseudo;
            let lco = if (self.inner_l4 - udp) % 2 == 1 { lco.swap_bytes() } else { lco };
            let sum = fold32(k.sw_part + u32::from(ones_sum(&hdr[udp + 8..self.inner_l4])) + u32::from(lco));
            hdr[udp + 6..udp + 8].copy_from_slice(&super::udp::mangle_zero(!sum).to_be_bytes());
        }
    }
}

/// What [`OuterFixer::for_len`] computes for one payload length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OuterLen {
    /// Outer IPv4 total length or IPv6 payload length.
    l3_field: u16,
    /// Outer IPv4 header sum without the ID, folded: a segment adds its ID
    /// with one end-around carry.
    ip_sum: u16,
    /// The outer UDP length written.
    udp_field: u16,
    /// Outer pseudo-header sum with the frame's real UDP length.
    pseudo: u16,
    /// `pseudo` plus the ports and the UDP length field, unfolded.
    sw_part: u32,
}

/// Validates and segments (or passes through) a tunnel superpacket; the
/// caller has checked the GSO type's protocol, known bits and `gso_size`.
pub(crate) fn segment<S: SegmentSink + ?Sized>(
    seg: &mut Segmenter,
    pkt: &Packet,
    caps: &TargetCaps,
    sink: &mut S,
    proto: GsoProtocol,
) -> Result<GsoOutcome, GsoError> {
    let meta = pkt.meta;
    let t = meta.gso_type;
    if !t.intersects(TUNNEL_BITS) {
        return Err(GsoError::BadTunnelGso("encapsulation offsets on a GSO type without UDP_TUNNEL"));
    }
    if t.contains(TUNNEL_BITS) {
        return Err(GsoError::BadTunnelGso("both UDP_TUNNEL and UDP_TUNNEL_CSUM"));
    }
    if t.contains(GsoType::FRAGLIST) {
        return Err(GsoError::BadTunnelGso("FRAGLIST inside a UDP tunnel"));
    }
    let encap = meta.encap.ok_or(GsoError::BadTunnelGso("UDP_TUNNEL without encapsulation offsets"))?;
    let n = pkt.len().min(MAX_HEADER_LEN);
    let _ = pkt.read_at(0, &mut seg.hdr[..n]);
    let tl = parse(&seg.hdr[..n], caps.medium, &encap)?;
    let inner = tl.inner;
    check_protocol(t, proto, &inner)?;
    if let ChecksumState::Partial { start, offset } = meta.csum {
        if start as usize != inner.l4_offset {
            return Err(GsoError::ChecksumStartNotL4 { start, l4_offset: inner.l4_offset });
        }
        if offset != proto.csum_offset() {
            return Err(GsoError::WrongChecksumOffset { offset, expected: proto.csum_offset() });
        }
    }
    let bytes = pkt.len() + pkt.frag_list().iter().map(Packet::total_len).sum::<usize>();
    for end in [tl.outer.l3_end(), inner.l3_end()] {
        if end != bytes {
            return Err(GsoError::LengthMismatch { ip_end: end, bytes });
        }
    }
    let udp = tl.outer.l4_offset;
    if usize::from(u16::from_be_bytes([seg.hdr[udp + 4], seg.hdr[udp + 5]])) != bytes - udp {
        return Err(bad("the outer UDP length does not reach the end of the packet"));
    }
    let payload_len = bytes - inner.hdr_len;
    let gso_size = meta.gso_size as usize;
    let segs = payload_len.div_ceil(gso_size).max(1);
    let max = if proto == GsoProtocol::UdpL4 { caps.udp_max_segments } else { super::GSO_MAX_SEGS } as usize;
    if segs > max {
        return Err(GsoError::TooManySegments { segments: segs, max });
    }
    if meta.gso_segs != 0 && meta.gso_segs as usize != segs && !t.contains(GsoType::DODGY) {
        return Err(GsoError::GsoSegsMismatch { found: meta.gso_segs, computed: segs });
    }
    let seg_l3 = inner.hdr_len - tl.outer.l3_offset + gso_size.min(payload_len);
    if seg_l3 > caps.mtu {
        return Err(GsoError::SegmentExceedsMtu { len: seg_l3, mtu: caps.mtu });
    }
    if tunnel_offloadable(caps, &tl, &meta, proto, segs, bytes, !pkt.frag_list().is_empty()) {
        let mut out = meta;
        out.gso_type = t.without(GsoType::DODGY);
        out.gso_segs = segs as u16;
        sink.pass_through(pkt, &out);
        return Ok(GsoOutcome::PassedThrough);
    }
    // Linux: the inner segmentation runs with `features & hw_enc_features`.
    let enc = enc_csum(caps);
    let inner_offloaded = csum_help::csum_offloadable(&TargetCaps { csum: enc, ..*caps }, &inner);
    let need_csum = t.contains(GsoType::UDP_TUNNEL_CSUM);
    let mode = if !need_csum {
        OuterCsum::Zero
    } else if !inner_offloaded && can_checksum(caps.csum, tl.outer.v6) {
        OuterCsum::Partial
    } else {
        OuterCsum::Software
    };
    let csum = if inner_offloaded {
        ChecksumState::Partial { start: inner.l4_offset as u16, offset: proto.csum_offset() }
    } else if mode == OuterCsum::Partial {
        ChecksumState::Partial { start: udp as u16, offset: 6 }
    } else {
        ChecksumState::None
    };
    let out_meta = OffloadMeta {
        csum,
        rss_hash: meta.rss_hash,
        arrival_ns: meta.arrival_ns,
        encap: inner_offloaded.then_some(encap),
        ..OffloadMeta::default()
    };
    // GSO_PARTIAL (offload-rules 3.7): one chunk of the largest multiple of
    // `gso_size` plus the remainder, for a target that finishes the inner
    // segmentation; only worth it with at least two units in the chunk
    // (Linux `skb_segment`: `partial_segs > 1`).
    let units = payload_len / gso_size;
    let partial = (units > 1
        && units <= usize::from(u16::MAX)
        && inner_offloaded
        && partial_ok(caps, &tl, &meta, proto, segs, bytes, !pkt.frag_list().is_empty()))
    .then(|| {
        let chunk = OffloadMeta {
            gso_type: t.without(GsoType::DODGY) | GsoType::PARTIAL,
            gso_size: meta.gso_size,
            gso_segs: units as u16,
            ..out_meta
        };
        (chunk, units as u16)
    });
    let frames = if partial.is_some() { 1 + usize::from(!payload_len.is_multiple_of(gso_size)) } else { segs };
    let mut plan = Plan {
        lay: inner,
        proto,
        gso_size,
        payload_len,
        segs: frames,
        sw_csum: !inner_offloaded,
        fixed_id: t.contains(GsoType::TCP_FIXEDID_INNER) && proto == GsoProtocol::TcpV4,
        accecn: t.contains(GsoType::TCP_ACCECN),
        keep_flags: false,
        frag_headers: false,
        partial_in: matches!(meta.csum, ChecksumState::Partial { .. }),
        out_meta,
        outer: None,
        partial,
    };
    plan.outer = Some(OuterFixer::new(&seg.hdr, &tl, bytes, t.contains(GsoType::TCP_FIXEDID), mode, &plan));
    let segments = if partial.is_some() {
        let chunk = units * gso_size;
        let rest = payload_len - chunk;
        seg.cut_at(pkt, caps, &plan, sink, [chunk, rest].into_iter().filter(|&n| n > 0))
    } else {
        seg.cut(pkt, caps, &plan, sink)
    };
    Ok(GsoOutcome::Segmented { segments, csum_completed: plan.sw_csum })
}

/// Whether the target takes this tunnel superpacket as GSO_PARTIAL output
/// (Linux `__skb_gso_segment` keeps `NETIF_F_GSO_PARTIAL` only if
/// `skb_gso_ok(skb, features | dev->features & gso_partial_features)`;
/// `skb_segment` uses it only with SG and the inner checksum offloaded,
/// which the caller checked): the tunnel bit in [`TargetCaps::gso_partial`],
/// every other GSO bit a feature for inner headers, and the limits and
/// outer-checksum rule of pass-through (`gso_features_check` and
/// `harmonize_features` strip GSO_PARTIAL with the other GSO features).
fn partial_ok(
    caps: &TargetCaps,
    tl: &TunnelLayout,
    meta: &OffloadMeta,
    proto: GsoProtocol,
    segs: usize,
    bytes: usize,
    has_frag_list: bool,
) -> bool {
    let tunnel = GsoType::from_bits(meta.gso_type.bits() & TUNNEL_BITS.bits());
    let with_partial = TargetCaps { gso: caps.gso | tunnel, enc_gso: caps.enc_gso | tunnel, ..*caps };
    caps.sg
        && caps.gso_partial.contains(tunnel)
        && tunnel_features_ok(&with_partial, tl, meta, proto, segs, bytes, has_frag_list)
}

/// Whether the target segments this tunnel superpacket itself (offload-rules
/// 3.7; Linux `netif_skb_features` with `skb->encapsulation`: the features
/// are `features & hw_enc_features`, then `skb_gso_ok` and
/// `harmonize_features` on the outer protocol).
fn tunnel_offloadable(
    caps: &TargetCaps,
    tl: &TunnelLayout,
    meta: &OffloadMeta,
    proto: GsoProtocol,
    segs: usize,
    bytes: usize,
    has_frag_list: bool,
) -> bool {
    tunnel_features_ok(caps, tl, meta, proto, segs, bytes, has_frag_list)
        && matches!(meta.csum, ChecksumState::Partial { .. } | ChecksumState::Unnecessary { .. })
}

/// [`tunnel_offloadable`] without the checksum-state condition (which
/// decides between the target's GSO and software GSO, not whether
/// software GSO may leave GSO_PARTIAL output).
fn tunnel_features_ok(
    caps: &TargetCaps,
    tl: &TunnelLayout,
    meta: &OffloadMeta,
    proto: GsoProtocol,
    segs: usize,
    bytes: usize,
    has_frag_list: bool,
) -> bool {
    let mut need = meta.gso_type.without(GsoType::DODGY);
    if need.contains(GsoType::TCP_FIXEDID_INNER) {
        // Both FIXEDID bits need TSO_MANGLEID (TargetCaps' TCP_FIXEDID).
        need = need.without(GsoType::TCP_FIXEDID_INNER) | GsoType::TCP_FIXEDID;
    }
    // gso_features_check: MANGLEID is dropped when the (inner) IPv4 header of
    // a TCPv4 superpacket may be fragmented (DF clear).
    let mangleid_stripped = need.contains(GsoType::TCP_FIXEDID) && proto == GsoProtocol::TcpV4 && !tl.inner.dont_frag;
    let features = GsoType::from_bits(caps.gso.bits() & caps.enc_gso.bits());
    features.contains(need)
        && !mangleid_stripped
        && tl.outer.vlan_count <= caps.max_offload_tags as usize
        && can_checksum(enc_csum(caps), tl.outer.v6)
        && segs <= caps.max_segs as usize
        && bytes < caps.gso_max_size
        && (!has_frag_list || caps.fraglist)
}
