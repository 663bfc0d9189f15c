//! IPv6 specifics of reassembly (offload-rules 5.3, `reassembly.c`): finding
//! the Fragment header, the rules that answer with a Parameter Problem, and
//! removing the Fragment header from the reassembled datagram.

use super::icmp::{IcmpError, IcmpKind, may_send_error};
use super::reasm::{FragDesc, ecn_bit};
use super::{DropReason, Family};
use crate::wire::icmpv6::{PARAM_PROBLEM_HEADER_FIELD, PARAM_PROBLEM_INCOMPLETE_CHAIN};

/// Extension headers walked (hop-by-hop, routing, fragment, AH, destination options).
const MAX_EXT: usize = 16;

/// What an IPv6 packet is to the reassembler.
#[derive(Debug)]
pub(crate) enum V6Parse {
    /// No Fragment header (or not parsable as IPv6): not ours.
    NotFragment,
    /// Offset 0 and M = 0: processed as unfragmented (RFC 6946).
    Atomic,
    /// A real fragment (described in the `out` argument).
    Fragment,
}

fn drop_with(reason: DropReason, l3: &[u8], code: u8, pointer: usize) -> (DropReason, Option<IcmpError>) {
    let icmp = may_send_error(Family::V6, l3)
        .then(|| IcmpError::new(Family::V6, IcmpKind::ParamProblem { code, pointer: pointer as u32 }, l3));
    (reason, icmp)
}

/// Length of the extension header of type `nh` at `b[off..]`, if it fits in `b`.
fn ext_len(nh: u8, b: &[u8], off: usize) -> Option<usize> {
    if nh == 44 {
        return (off + 8 <= b.len()).then_some(8);
    }
    let l = *b.get(off + 1)? as usize;
    let hl = if nh == 51 { (l + 2) * 4 } else { (l + 1) * 8 };
    (off + hl <= b.len()).then_some(hl)
}

fn is_ext(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 44 | 51 | 60)
}

/// Reads an IPv6 packet at `frame[l3..]` (offload-rules 5.3, in the kernel's order):
/// jumbogram with a Fragment header -> parameter problem; atomic fragment ->
/// not queued; a first fragment must hold the whole header chain through the
/// upper-layer header (code 3, pointer 0); end > 65535 -> parameter problem at
/// the offset field; a non-last fragment not a multiple of 8 long ->
/// parameter problem at the payload length.
#[inline]
pub(crate) fn parse(frame: &[u8], l3: usize, out: &mut FragDesc) -> Result<V6Parse, (DropReason, Option<IcmpError>)> {
    let p = &frame[l3..];
    if p.len() < 40 || p[0] >> 4 != 6 {
        return Ok(V6Parse::NotFragment);
    }
    let payload_len = u16::from_be_bytes([p[4], p[5]]) as usize;
    let jumbo = payload_len == 0;
    let total = if jumbo { p.len() } else { 40 + payload_len };
    if total > p.len() {
        return Ok(V6Parse::NotFragment);
    }
    let pkt = &p[..total];
    // The unfragmentable part: walk to the Fragment header.
    let (mut nh, mut nh_off, mut off) = (p[6], 6usize, 40usize);
    for _ in 0..MAX_EXT {
        if nh == 44 {
            break;
        }
        if !is_ext(nh) {
            return Ok(V6Parse::NotFragment);
        }
        let Some(hl) = ext_len(nh, pkt, off) else { return Ok(V6Parse::NotFragment) };
        nh_off = off;
        nh = pkt[off];
        off += hl;
    }
    if nh != 44 {
        return Ok(V6Parse::NotFragment);
    }
    if off + 8 > total || jumbo {
        let reason = if jumbo {
            DropReason::Jumbogram
        } else {
            DropReason::Malformed(crate::wire::WireError::truncated("ipv6-frag", off + 8, total))
        };
        return Err(drop_with(reason, p, PARAM_PROBLEM_HEADER_FIELD, off));
    }
    let frag_off = u16::from_be_bytes([pkt[off + 2], pkt[off + 3]]);
    let offset = u32::from(frag_off & 0xfff8);
    let more = frag_off & 1 != 0;
    let ident = u32::from_be_bytes([pkt[off + 4], pkt[off + 5], pkt[off + 6], pkt[off + 7]]);
    let frag_nh = pkt[off];
    if offset == 0 && !more {
        return Ok(V6Parse::Atomic);
    }
    let data = off + 8;
    if offset == 0 && !chain_complete(frag_nh, pkt, data) {
        return Err(drop_with(DropReason::IncompleteChain, p, PARAM_PROBLEM_INCOMPLETE_CHAIN, 0));
    }
    let end = offset + (total - data) as u32;
    if end > 65535 {
        return Err(drop_with(DropReason::EndBeyondMax, p, PARAM_PROBLEM_HEADER_FIELD, off + 2));
    }
    if more && end & 7 != 0 {
        return Err(drop_with(DropReason::NotMultipleOf8, p, PARAM_PROBLEM_HEADER_FIELD, 4));
    }
    let mut len_hint = 0;
    if offset == 0 && frag_nh == 17 && total - data >= 8 {
        len_hint = u32::from(u16::from_be_bytes([pkt[data + 4], pkt[data + 5]]));
    }
    let word = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"));
    let addrs = [word(8), word(16), word(24), word(32)];
    let tc = ((u16::from_be_bytes([p[0], p[1]]) >> 4) & 0xff) as u8;
    *out = FragDesc {
        family: Family::V6,
        addrs,
        ident,
        proto: 0,
        l3,
        data_start: l3 + data,
        offset,
        end,
        more,
        ecn: ecn_bit(tc),
        dont_frag: false,
        frag_size: u32::from(total as u16),
        trimmed: l3 + total != frame.len(),
        unfrag_len: off,
        nh_off,
        next_header: frag_nh,
        len_hint,
    };
    Ok(V6Parse::Fragment)
}

/// RFC 8200 4.5: the first fragment holds every header after the Fragment
/// header through the upper-layer header (TCP 20 bytes, UDP 8, ICMPv6 8,
/// anything else at least 1 byte, as `ipv6frag_thdr_truncated`).
fn chain_complete(mut nh: u8, pkt: &[u8], mut off: usize) -> bool {
    for _ in 0..MAX_EXT {
        if !is_ext(nh) {
            let need = match nh {
                6 => 20,
                17 | 58 => 8,
                _ => 1,
            };
            return off + need <= pkt.len();
        }
        let Some(hl) = ext_len(nh, pkt, off) else { return false };
        nh = pkt[off];
        off += hl;
    }
    false
}

/// Turns the first fragment's headers into the datagram's, in
/// `buf[start..]` laid out as `L2 (l3 bytes) | IPv6 + unfragmentable part
/// (unfrag bytes) | Fragment header | payload`: the next-header byte that
/// named the Fragment header gets the Fragment header's next header, the
/// payload length covers the unfragmentable part and the payload, the ECN
/// bits are OR-ed in, and the headers move 8 bytes forward over the
/// Fragment header. Returns the new start.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_header(
    buf: &mut [u8],
    start: usize,
    l3: usize,
    unfrag: usize,
    nh_off: usize,
    next_header: u8,
    payload_len: usize,
    ecn_or: u8,
) -> usize {
    let ip = start + l3;
    buf[ip + nh_off] = next_header;
    let pl = (unfrag - 40 + payload_len) as u16;
    buf[ip + 4..ip + 6].copy_from_slice(&pl.to_be_bytes());
    buf[ip + 1] |= ecn_or << 4;
    buf.copy_within(start..ip + unfrag, start + 8);
    start + 8
}
