//! Frame validation: the rules `superpacket pcap check` applies to every
//! frame, in one place.
//!
//! [`validate_frame`] checks one frame against its offload metadata and
//! appends what is wrong to a caller-owned list (reused across frames, so a
//! clean frame costs no allocation):
//!
//! | kind | rule |
//! |---|---|
//! | `truncated`, `malformed`, `unsupported` | headers parse (Ethernet, VLAN stack of any depth up to 8, IPv4 incl. options, IPv6 incl. extension headers, TCP/UDP/ICMP); IP and UDP lengths agree with the frame |
//! | `ipv4-header-checksum` | the IPv4 header sums to 0xFFFF |
//! | `tcp-checksum`, `udp-checksum`, `icmp-checksum` | the L4 checksum verifies over the whole packet (superpackets included); UDP over IPv6 must not be 0 |
//! | `partial-checksum` | with `CHECKSUM_PARTIAL` (`csum=partial`), the field holds exactly the pseudo-header sum and the checksum starts at the L4 header (offload-rules 0.3) |
//! | `gso-mismatch`, `gso-size`, `gso-segs` | GSO metadata names the frame's protocol and family, the payload is larger than `gso_size`, and `gso_segs = ceil(payload / gso_size)` |
//!
//! Not problems: Ethernet padding after the IP packet, unknown EtherTypes and
//! IP protocols (nothing to check), the L4 checksum of IP fragments (it
//! covers the reassembled datagram), and whatever lies beyond the captured
//! bytes of a snapped frame (only the bytes present are checked).

use crate::csum::{self, ones_add, ones_sub, ones_sum};
use crate::packet::{ChecksumState, GsoProtocol, OffloadMeta};
use crate::wire::{EtherType, FrameHeaders, L3Kind, L4Kind, VlanStack, WireError};
use std::fmt;

/// How a frame starts (re-exported here for the validators' callers).
pub use crate::wire::Medium;

/// The class of a problem; [`ProblemKind::name`] is the stable name shown in
/// `pcap check` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// A header is cut short by the end of the frame.
    Truncated,
    /// A header contradicts itself or the frame.
    Malformed,
    /// Something superpacket does not parse (e.g. more than 8 VLAN tags).
    Unsupported,
    /// Bad IPv4 header checksum.
    Ipv4HeaderChecksum,
    /// Bad TCP checksum.
    TcpChecksum,
    /// Bad UDP checksum.
    UdpChecksum,
    /// Bad ICMPv4/ICMPv6 checksum.
    IcmpChecksum,
    /// A `CHECKSUM_PARTIAL` frame whose field is not the pseudo-header sum or
    /// whose checksum start is not the L4 header.
    PartialChecksum,
    /// GSO type does not match the frame's protocol/family.
    GsoMismatch,
    /// GSO payload not larger than `gso_size` (or `gso_size` 0).
    GsoSize,
    /// `gso_segs` disagrees with the payload and `gso_size`.
    GsoSegs,
}

impl ProblemKind {
    /// Stable short name.
    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::Truncated => "truncated",
            ProblemKind::Malformed => "malformed",
            ProblemKind::Unsupported => "unsupported",
            ProblemKind::Ipv4HeaderChecksum => "ipv4-header-checksum",
            ProblemKind::TcpChecksum => "tcp-checksum",
            ProblemKind::UdpChecksum => "udp-checksum",
            ProblemKind::IcmpChecksum => "icmp-checksum",
            ProblemKind::PartialChecksum => "partial-checksum",
            ProblemKind::GsoMismatch => "gso-mismatch",
            ProblemKind::GsoSize => "gso-size",
            ProblemKind::GsoSegs => "gso-segs",
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One problem found in a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its class.
    pub kind: ProblemKind,
    /// What was found and what was expected.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.detail)
    }
}

fn push(out: &mut Vec<Problem>, kind: ProblemKind, detail: String) {
    out.push(Problem { kind, detail });
}

/// Parses a frame's headers as the link layer says ([`Medium::parse`]).
///
/// # Errors
/// As [`FrameHeaders::parse`].
pub fn parse_headers(frame: &[u8], link: Medium) -> Result<FrameHeaders, WireError> {
    link.parse(frame)
}

/// Recomputes the checksums of an Ethernet frame in place: the IPv4 header
/// checksum and the TCP/UDP checksum (UDP's 0 sent as 0xFFFF), for tools and
/// tests that edit frames. Returns false (frame untouched) when it does not
/// parse; fragments get only their IPv4 header checksum.
pub fn refresh_checksums(frame: &mut [u8]) -> bool {
    let Ok(h) = FrameHeaders::parse(frame) else { return false };
    if h.l3 == L3Kind::Ipv4 {
        let l3 = h.l3_offset;
        frame[l3 + 10..l3 + 12].fill(0);
        let c = csum::checksum(&frame[l3..l3 + h.l3_header_len]);
        frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    if h.is_fragment {
        return true;
    }
    let Some(field) = h.l4.csum_offset() else { return true };
    let at = h.l4_offset + usize::from(field);
    frame[at..at + 2].fill(0);
    let Some(pseudo) = l4_pseudo_header_sum(frame, &h) else { return true };
    let mut c = !ones_add(pseudo, ones_sum(&frame[h.l4_offset..h.l3_end()]));
    if field == 6 && c == 0 {
        c = 0xFFFF;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// The pseudo-header sum for the frame's L4 protocol (TCP, UDP, ICMPv6) over
/// its whole L4 length, or `None` when the L4 checksum has no pseudo-header
/// (ICMPv4) or there is no parsed L4 header.
pub fn l4_pseudo_header_sum(frame: &[u8], h: &FrameHeaders) -> Option<u16> {
    let proto = h.ip_protocol?.0;
    let l4_len = h.l3_offset + h.l3_len - h.l4_offset;
    let ip = &frame[h.l3_offset..];
    match (h.l3, h.l4) {
        (L3Kind::Ipv4, L4Kind::Tcp | L4Kind::Udp) => {
            let (src, dst) = ([ip[12], ip[13], ip[14], ip[15]], [ip[16], ip[17], ip[18], ip[19]]);
            Some(csum::pseudo_header_v4(src, dst, proto, l4_len as u16))
        }
        (L3Kind::Ipv6, L4Kind::Tcp | L4Kind::Udp | L4Kind::Icmpv6) => {
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&ip[8..24]);
            dst.copy_from_slice(&ip[24..40]);
            Some(csum::pseudo_header_v6(src, dst, proto, l4_len as u32))
        }
        _ => None,
    }
}

/// Ones' complement equality: 0x0000 and 0xFFFF are both zero.
fn ones_eq(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xFFFF && (a == 0 || b == 0))
}

/// Checks one frame (see the module documentation for the rules) and appends
/// its problems to `out`. `snapped` says the capture holds fewer bytes than
/// the wire did: then only header parsing and the IPv4 header checksum are
/// checked (and truncation of headers is expected, not a problem).
pub fn validate_frame(frame: &[u8], link: Medium, meta: &OffloadMeta, snapped: bool, out: &mut Vec<Problem>) {
    let h = match parse_headers(frame, link) {
        Ok(h) => h,
        Err(e) => {
            let kind = match e {
                WireError::Truncated { .. } if snapped => {
                    check_snapped_ipv4_header(frame, link, out);
                    return;
                }
                WireError::Truncated { .. } => ProblemKind::Truncated,
                WireError::Malformed { .. } => ProblemKind::Malformed,
                WireError::Unsupported { .. } => ProblemKind::Unsupported,
            };
            push(out, kind, e.to_string());
            return;
        }
    };

    if h.l3 == L3Kind::Ipv4 {
        check_ipv4_header(&frame[h.l3_offset..h.l3_offset + h.l3_header_len], out);
    }
    if snapped {
        return;
    }
    if let Some(encap) = meta.encap {
        check_tunnel(frame, &h, &encap, meta, out);
        return;
    }
    check_l4_checksum(frame, &h, meta, out);
    check_gso(&h, meta, out);
}

/// A UDP tunnel packet (offload-rules 3.7): the outer UDP checksum is 0,
/// the pseudo-header sum of the whole (a `UDP_TUNNEL_CSUM` superpacket), or
/// verifies with the inner checksum taken as completed (LCO: an inner
/// partial checksum field holding its pseudo-header sum); then the inner
/// frame is checked against the inner metadata (problems prefixed `inner:`).
fn check_tunnel(
    frame: &[u8],
    h: &FrameHeaders,
    encap: &crate::packet::Encapsulation,
    meta: &OffloadMeta,
    out: &mut Vec<Problem>,
) {
    use crate::packet::GsoType;
    let (ot, im) = (encap.outer_transport as usize, encap.inner_mac as usize);
    let end = h.l3_offset + h.l3_len;
    if h.l4 != L4Kind::Udp || h.l4_offset != ot || im < ot + 8 || im + 14 > end {
        push(out, ProblemKind::Malformed, format!("tunnel offsets {encap:?} do not fit the outer UDP header"));
        return;
    }
    let inner_frame = &frame[im..end];
    let inner_h = match parse_headers(inner_frame, Medium::Ethernet) {
        Ok(ih) => ih,
        Err(e) => {
            push(out, ProblemKind::Malformed, format!("inner: {e}"));
            return;
        }
    };
    let field = u16::from_be_bytes([frame[ot + 6], frame[ot + 7]]);
    let pseudo = l4_pseudo_header_sum(frame, h).unwrap_or(0);
    let tunnel_gso = meta.is_tunnel_gso();
    if tunnel_gso && meta.gso_type.contains(GsoType::UDP_TUNNEL_CSUM) {
        if !ones_eq(field, pseudo) {
            push(
                out,
                ProblemKind::UdpChecksum,
                format!(
                    "outer UDP checksum field {field:#06x} of a udp_tunnel_csum superpacket, expected the pseudo-header sum {pseudo:#06x}"
                ),
            );
        }
    } else if tunnel_gso && field != 0 {
        push(
            out,
            ProblemKind::UdpChecksum,
            format!("outer UDP checksum {field:#06x} of a udp_tunnel superpacket, expected 0"),
        );
    } else if !tunnel_gso && field != 0 {
        let inner_l4 = im + inner_h.l4_offset;
        let sum = match meta.csum {
            ChecksumState::Partial { start, .. } if start as usize == inner_l4 => {
                let ip = l4_pseudo_header_sum(inner_frame, &inner_h).unwrap_or(0);
                let lco = if (inner_l4 - ot) % 2 == 1 { (!ip).swap_bytes() } else { !ip };
                ones_add(ones_add(pseudo, ones_sum(&frame[ot..inner_l4])), lco)
            }
            _ => ones_add(pseudo, ones_sum(&frame[ot..end])),
        };
        if sum != 0xFFFF {
            push(out, ProblemKind::UdpChecksum, format!("outer UDP checksum {field:#06x} does not verify"));
        }
    }
    let mut inner = *meta;
    inner.encap = None;
    inner.gso_type = meta.gso_type.without(GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM);
    if let ChecksumState::Partial { start, offset } = meta.csum {
        inner.csum = ChecksumState::Partial { start: start.saturating_sub(encap.inner_mac), offset };
    }
    let before = out.len();
    if inner_h.l3 == L3Kind::Ipv4 {
        check_ipv4_header(&inner_frame[inner_h.l3_offset..inner_h.l3_offset + inner_h.l3_header_len], out);
    }
    check_l4_checksum(inner_frame, &inner_h, &inner, out);
    check_gso(&inner_h, &inner, out);
    for p in &mut out[before..] {
        p.detail.insert_str(0, "inner: ");
    }
}

fn check_ipv4_header(header: &[u8], out: &mut Vec<Problem>) {
    let sum = ones_sum(header);
    if sum != 0xFFFF {
        let found = u16::from_be_bytes([header[10], header[11]]);
        let expected = !ones_sub(sum, found);
        push(
            out,
            ProblemKind::Ipv4HeaderChecksum,
            format!("IPv4 header checksum {found:#06x}, expected {expected:#06x}"),
        );
    }
}

/// A snapped frame whose IP packet is cut short still has a checkable IPv4
/// header if the capture holds all of it.
fn check_snapped_ipv4_header(frame: &[u8], link: Medium, out: &mut Vec<Problem>) {
    let l3 = match link {
        Medium::Ip => 0,
        Medium::Ethernet => match frame.get(12..).map(VlanStack::parse) {
            Some(Ok((_, EtherType::IPV4, consumed))) => 12 + consumed,
            _ => return,
        },
    };
    let Some(&first) = frame.get(l3) else { return };
    let header_len = usize::from(first & 0x0F) * 4;
    if first >> 4 == 4
        && header_len >= 20
        && let Some(header) = frame.get(l3..l3 + header_len)
    {
        check_ipv4_header(header, out);
    }
}

fn check_l4_checksum(frame: &[u8], h: &FrameHeaders, meta: &OffloadMeta, out: &mut Vec<Problem>) {
    if h.is_fragment {
        return;
    }
    let (kind, field_at, name) = match h.l4 {
        L4Kind::Tcp => (ProblemKind::TcpChecksum, 16, "TCP"),
        L4Kind::Udp => (ProblemKind::UdpChecksum, 6, "UDP"),
        L4Kind::Icmpv4 | L4Kind::Icmpv6 => (ProblemKind::IcmpChecksum, 2, "ICMP"),
        L4Kind::Other(_) | L4Kind::None => return,
    };
    let l4 = &frame[h.l4_offset..h.l3_offset + h.l3_len];
    let field = u16::from_be_bytes([l4[field_at], l4[field_at + 1]]);
    let pseudo = l4_pseudo_header_sum(frame, h).unwrap_or(0);

    if let ChecksumState::Partial { start, offset } = meta.csum {
        if start as usize != h.l4_offset || offset as usize != field_at {
            push(
                out,
                ProblemKind::PartialChecksum,
                format!(
                    "checksum start {start}+{offset}, but the {name} checksum field is at {}+{field_at}",
                    h.l4_offset
                ),
            );
        } else if !ones_eq(field, pseudo) {
            push(
                out,
                ProblemKind::PartialChecksum,
                format!(
                    "{name} checksum field {field:#06x} with csum=partial, expected the pseudo-header sum {pseudo:#06x}"
                ),
            );
        }
        return;
    }

    if h.l4 == L4Kind::Udp && field == 0 {
        if h.l3 == L3Kind::Ipv6 {
            push(out, kind, "UDP checksum 0 over IPv6 (mandatory there)".to_string());
        }
        return;
    }
    let total = ones_add(pseudo, ones_sum(l4));
    if total != 0xFFFF {
        let mut expected = !ones_sub(total, field);
        if h.l4 == L4Kind::Udp && expected == 0 {
            expected = 0xFFFF;
        }
        push(out, kind, format!("{name} checksum {field:#06x}, expected {expected:#06x}"));
    }
}

fn check_gso(h: &FrameHeaders, meta: &OffloadMeta, out: &mut Vec<Problem>) {
    if meta.gso_type.is_empty() && meta.gso_size == 0 {
        return;
    }
    let Some(protocol) = meta.gso_type.protocol() else {
        push(out, ProblemKind::GsoMismatch, format!("gso_type {} names no single protocol", meta.gso_type));
        return;
    };
    let matches = match protocol {
        GsoProtocol::TcpV4 => h.l3 == L3Kind::Ipv4 && h.l4 == L4Kind::Tcp,
        GsoProtocol::TcpV6 => h.l3 == L3Kind::Ipv6 && h.l4 == L4Kind::Tcp,
        GsoProtocol::UdpL4 => matches!(h.l3, L3Kind::Ipv4 | L3Kind::Ipv6) && h.l4 == L4Kind::Udp,
    };
    if !matches || h.is_fragment {
        let what = if h.is_fragment { "an IP fragment".to_string() } else { format!("{:?}/{:?}", h.l3, h.l4) };
        push(out, ProblemKind::GsoMismatch, format!("gso_type {} on {what}", meta.gso_type));
        return;
    }
    let size = meta.gso_size as usize;
    if size == 0 || h.payload_len <= size {
        push(
            out,
            ProblemKind::GsoSize,
            format!("gso_size {size} with {} payload bytes: not a superpacket", h.payload_len),
        );
        return;
    }
    let segs = h.payload_len.div_ceil(size);
    if segs != meta.gso_segs as usize {
        push(
            out,
            ProblemKind::GsoSegs,
            format!("gso_segs {} but {} payload bytes / gso_size {size} make {segs}", meta.gso_segs, h.payload_len),
        );
    }
}

#[cfg(test)]
mod tests;
