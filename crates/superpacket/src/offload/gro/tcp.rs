//! TCP GRO: the merge decision (offload-rules 1.3, `tcp_gro_receive`), TCP
//! fraglist rules (1.6) and completion (1.4, `tcp_gro_complete`).

use super::counters::FlushReason;
use super::flow::Held;
use super::ip;
use super::{CwrRule, Encap, GroConfig, Incoming};
use crate::csum;
use crate::packet::{ChecksumState, GsoType};
use crate::wire::field::{be32, ne32, ne64};

/// TCP flag bits as they sit in the 32-bit word at offset 12 (data offset,
/// reserved/AE, flags, window), network order read as big-endian.
pub const W3_FIN: u32 = 0x0001_0000;
/// SYN in word 3.
pub const W3_SYN: u32 = 0x0002_0000;
/// RST in word 3.
pub const W3_RST: u32 = 0x0004_0000;
/// PSH in word 3.
pub const W3_PSH: u32 = 0x0008_0000;
/// URG in word 3.
pub const W3_URG: u32 = 0x0020_0000;
/// CWR in word 3.
pub const W3_CWR: u32 = 0x0080_0000;
/// Every flag and reserved bit (the bits that are "flags" rather than data
/// offset or window).
pub const W3_FLAG_BITS: u32 = 0x0FFF_0000;

/// Flags that keep a segment from starting an aggregate and close one
/// (offload-rules 1.3 outcome matrix).
pub const W3_CLOSING: u32 = W3_URG | W3_PSH | W3_RST | W3_SYN | W3_FIN;

/// Word 3 of a TCP header.
#[inline]
pub fn word3(tcp: &[u8]) -> u32 {
    be32(tcp, 12)
}

/// Sequence number of a TCP header.
#[inline]
pub fn seq(tcp: &[u8]) -> u32 {
    be32(tcp, 4)
}

/// Byte equality of two equal-length header ranges, 8 bytes at a time, then
/// 4 (TCP options come in 4-byte words), no `memcmp` call. The usual 12
/// bytes of timestamps are one 8-byte and one 4-byte compare on fixed-size
/// views, without the loops' length arithmetic (callgrind: 34 instructions
/// per packet before).
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    if let (Ok(x), Ok(y)) = (<&[u8; 12]>::try_from(a), <&[u8; 12]>::try_from(b)) {
        return (ne64(x, 0) ^ ne64(y, 0)) | u64::from(ne32(x, 8) ^ ne32(y, 8)) == 0;
    }
    let (a8, a_rest) = a.as_chunks::<8>();
    let (b8, b_rest) = b.as_chunks::<8>();
    let mut diff = 0u64;
    for (x, y) in a8.iter().zip(b8) {
        diff |= u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y);
    }
    let (a4, a_tail) = a_rest.as_chunks::<4>();
    let (b4, b_tail) = b_rest.as_chunks::<4>();
    for (x, y) in a4.iter().zip(b4) {
        diff |= (u32::from_ne_bytes(*x) ^ u32::from_ne_bytes(*y)) as u64;
    }
    for (x, y) in a_tail.iter().zip(b_tail) {
        diff |= (x ^ y) as u64;
    }
    diff == 0 && a.len() == b.len()
}

/// Checksum state "kind and level", compared by fraglist GRO (offload-rules 1.6).
#[inline]
pub fn csum_kind(c: ChecksumState) -> (u8, u8) {
    match c {
        ChecksumState::None => (0, 0),
        ChecksumState::Unnecessary { level } => (1, level),
        ChecksumState::Complete { .. } => (2, 0),
        ChecksumState::Partial { .. } => (3, 0),
    }
}

/// Decides whether the new segment can be merged into `p` (offload-rules 1.3
/// (a)-(h), all evaluated; the first failing rule names the flush reason).
/// `nl` is the new packet's frame and `n_csum` its checksum state. Returns
/// the IPv4 fixed-ID latch decisions on success: the TCP packet's own IP
/// header, and a tunnel aggregate's outer header (offload-rules 2.6).
#[inline]
pub fn can_merge(
    p: &Held,
    nl: &[u8],
    n_csum: ChecksumState,
    n: &Incoming,
    cfg: &GroConfig,
    e: &impl Encap,
) -> Result<(bool, bool), FlushReason> {
    // The aggregate's side is its first packet's header copy (fixed size).
    let pt = &p.first.tcp;
    let nt = &nl[n.l4..];
    let (wp, wn) = (word3(pt), word3(nt));

    // (a) word 3 outside FIN/PSH (CWR per profile); fraglist: all of it.
    if p.fraglist {
        if wp != wn {
            return Err(if (wp ^ wn) & W3_FLAG_BITS != 0 { FlushReason::Flags } else { FlushReason::Mismatch });
        }
    } else {
        let mut ignore = W3_FIN | W3_PSH;
        if cfg.cwr == CwrRule::Legacy {
            if wn & W3_CWR != 0 {
                return Err(FlushReason::Flags);
            }
            ignore |= W3_CWR;
        }
        let diff = (wp ^ wn) & !ignore;
        if diff != 0 {
            return Err(if diff & W3_FLAG_BITS != 0 { FlushReason::Flags } else { FlushReason::Mismatch });
        }
    }
    size_rule(p, n)?;
    // (b) network header rules.
    let latch = ip::network_flush(p, nl, n.l3, cfg)?;
    let outer_latch = e.outer_flush(p, nl, cfg)?;
    // (c) ACK number and (d) options, byte for byte (same length: the data
    // offset is in word 3); word 3 itself (bytes 12..16) was compared above.
    let hl = p.payload - p.l4;
    if pt[8..12] != nt[8..12] || !same_bytes(&pt[20..hl], &nt[20..hl]) {
        return Err(FlushReason::Mismatch);
    }
    // (f) exact contiguity.
    if seq(nt) != p.next_seq {
        return Err(FlushReason::OutOfOrder);
    }
    // Fraglist extras: same checksum state and level, at most 64 segments.
    if p.fraglist {
        if csum_kind(p.pkt.meta.csum) != csum_kind(n_csum) {
            return Err(FlushReason::Mismatch);
        }
        if p.count >= super::FRAGLIST_MAX_SEGS {
            return Err(FlushReason::SizeLimit);
        }
    }
    append_rule(p, n, cfg)?;
    Ok((latch, outer_latch))
}

/// Rule (e): the payload size is 1..=mss, or a GSO packet has the same gso_size.
#[inline(always)]
fn size_rule(p: &Held, n: &Incoming) -> Result<(), FlushReason> {
    if n.gso_size != 0 {
        if n.gso_size != p.mss {
            return Err(FlushReason::SegmentSize);
        }
    } else if n.payload_len.wrapping_sub(1) >= p.mss as usize {
        return Err(FlushReason::SegmentSize);
    }
    Ok(())
}

/// Rule (h), the append: a flush mark from the IP layer, or the size limit.
#[inline(always)]
pub fn append_rule(p: &Held, n: &Incoming, cfg: &GroConfig) -> Result<(), FlushReason> {
    if n.flush_mark {
        return Err(FlushReason::Mismatch);
    }
    if p.l3_len + n.payload_len >= cfg.max_size {
        return Err(FlushReason::SizeLimit);
    }
    Ok(())
}

/// [`can_merge`] for a segment of a non-fraglist aggregate whose headers are
/// known equal to the aggregate's first packet's wherever the rules want
/// them equal (a header template, offload-rules 1.3, 2.6): word 3 (so no
/// FIN or PSH, which the first packet had not), the ACK number, the options,
/// and TTL, TOS and DF or traffic class and hop limit at each IP level.
/// What is left before the append (h) is evaluated as [`can_merge`] does,
/// in its order: the CWR rule of older kernels, the payload size (e), the
/// IPv4 IDs of the inner header and of the outer one (`outer`: the
/// aggregate's first outer header, its latch, and the new packet's outer
/// header) and contiguity (f). `None` where [`can_merge`] fails (its reason
/// is then found by it). The caller checks the append ([`append_rule`]): a
/// segment that passes these and fails only the append is refused for the
/// size limit ([`FlushReason::SizeLimit`], a flush mark being excluded by
/// the template), so its caller can flush the aggregate for that reason as
/// [`can_merge`] would.
#[inline(always)]
pub fn same_headers_before_append(
    p: &Held,
    nl: &[u8],
    n: &Incoming,
    cfg: &GroConfig,
    outer: Option<(&[u8; 20], bool, &[u8; 20])>,
) -> Option<(bool, bool)> {
    let nt = &nl[n.l4..];
    if cfg.cwr == CwrRule::Legacy && word3(nt) & W3_CWR != 0 {
        return None;
    }
    size_rule(p, n).ok()?;
    // `n.v6` is `p.v6` (equal headers); the callers' copies for one layout
    // have it as a constant, and the test goes.
    let latch = if n.v6 {
        false
    } else {
        ip::id_rule(&p.first.ip, p.fixed_id, p.count, nl.get(n.l3..)?.first_chunk()?, cfg).ok()?
    };
    let outer_latch = match outer {
        Some((a, fixed, b)) => ip::id_rule(a, fixed, p.count, b, cfg).ok()?,
        None => false,
    };
    if seq(nt) != p.next_seq {
        return None;
    }
    Some((latch, outer_latch))
}

/// Completes a merged TCP aggregate (offload-rules 1.4): IP length, the TCP
/// checksum field set to the pseudo-header sum (CHECKSUM_PARTIAL), GSO type,
/// size and segments. Fraglist aggregates only get the head's IP length and
/// become CHECKSUM_UNNECESSARY.
pub fn complete(held: &mut Held) {
    complete_on::<false>(held)
}

/// [`complete`], one copy per path (see [`super::parse::GroHeaders::parse_on`]).
pub fn complete_on<const TUNNEL: bool>(held: &mut Held) {
    let (l3, l4, v6) = (held.l3, held.l4, held.v6);
    let l3_len = held.l3_len;
    let proto = if v6 { GsoType::TCPV6 } else { GsoType::TCPV4 };
    let mut meta = held.pkt.meta;
    meta.gso_size = held.mss;
    meta.gso_segs = held.count.min(u16::MAX as u32) as u16;
    let lin = held.pkt.linear_mut();
    ip::set_l3_len(lin, l3, v6, l3_len);
    if held.fraglist {
        meta.gso_type |= GsoType::FRAGLIST | proto;
        meta.csum = unnecessary(meta.csum);
    } else {
        // The TCP length (below 2^32: a `usize` of an in-memory packet
        // length) added to the flow's address sum, as `ip::pseudo_sum`
        // adds it.
        let l4_len = (l3_len - (l4 - l3)) as u32;
        let pseudo = csum::ones_add(held.pseudo_addrs, csum::fold32(l4_len));
        lin[l4 + 16..l4 + 18].copy_from_slice(&pseudo.to_be_bytes());
        let mut t = meta.gso_type | proto;
        if word3(&lin[l4..]) & W3_CWR != 0 {
            t |= GsoType::TCP_ECN;
        }
        if held.fixed_id && !v6 {
            t |= GsoType::TCP_FIXEDID;
        }
        meta.gso_type = t;
        meta.csum = ChecksumState::Partial { start: l4 as u16, offset: 16 };
    }
    held.pkt.meta = meta;
}

/// The checksum state of a completed fraglist aggregate: verified.
#[inline]
pub fn unnecessary(c: ChecksumState) -> ChecksumState {
    match c {
        ChecksumState::Unnecessary { level } => ChecksumState::Unnecessary { level },
        _ => ChecksumState::Unnecessary { level: 0 },
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;

    #[test]
    fn same_bytes_finds_a_difference_at_every_position_of_every_length() {
        for len in 0..=41 {
            let a: Vec<u8> = (0..len as u8).collect();
            assert!(same_bytes(&a, &a.clone()), "len {len}");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x80;
                assert!(!same_bytes(&a, &b), "len {len}, byte {at}");
            }
        }
    }
}
