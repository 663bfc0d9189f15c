//! IPv4 specifics of reassembly (offload-rules 5.2, `ip_fragment.c`): what a
//! fragment says, and the header of the reassembled datagram.

use super::reasm::{FragDesc, ecn_bit};
use super::{DropReason, Family, MAX_DATAGRAM};
use crate::wire::{IpProtocol, Ipv4Packet};

/// Reads an IPv4 packet at `frame[l3..]`: `Ok(false)` when it is not a
/// fragment (or not parsable: not ours to judge), `Ok(true)` with the
/// fragment's description in `out` otherwise. Rules applied here: offset = field x 8; end = offset + payload
/// (header and options excluded); a non-last fragment's end is rounded down
/// to a multiple of 8 (its checksum state then degrades, 5.2).
#[inline]
pub(crate) fn parse(frame: &[u8], l3: usize, verify_checksum: bool, out: &mut FragDesc) -> Result<bool, DropReason> {
    let Ok(ip) = Ipv4Packet::new_checked(&frame[l3..]) else { return Ok(false) };
    if !ip.is_fragment() {
        return Ok(false);
    }
    if verify_checksum && !header_checksum_ok(ip.header()) {
        return Err(DropReason::BadHeaderChecksum);
    }
    let hl = ip.header_len();
    let total = ip.total_len() as usize;
    let offset = u32::from(ip.frag_offset());
    let more = ip.more_frags();
    let mut end = offset + (total - hl) as u32;
    let mut rounded = false;
    if more && end & 7 != 0 {
        end &= !7;
        rounded = true;
    }
    let data_start = l3 + hl;
    let mut len_hint = 0;
    if offset == 0 && ip.protocol() == IpProtocol::UDP && total - hl >= 8 {
        len_hint = u32::from(u16::from_be_bytes([frame[data_start + 4], frame[data_start + 5]]));
    }
    let addrs = [u64::from(u32::from_le_bytes(ip.src_bytes())), 0, u64::from(u32::from_le_bytes(ip.dst_bytes())), 0];
    *out = FragDesc {
        family: Family::V4,
        addrs,
        ident: u32::from(ip.ident()),
        proto: ip.protocol().0,
        l3,
        data_start,
        offset,
        end: end.max(offset),
        more,
        ecn: ecn_bit(ip.tos()),
        dont_frag: ip.dont_frag(),
        frag_size: u32::from(total as u16),
        trimmed: rounded || data_start + (end.max(offset) - offset) as usize != frame.len(),
        unfrag_len: hl,
        nh_off: 0,
        next_header: ip.protocol().0,
        len_hint,
    };
    Ok(true)
}

/// Largest fragment end that can still make a valid datagram with an
/// `ihl`-byte header (the datagram is at least `ihl + end` bytes).
pub(crate) fn max_end(ihl: usize) -> u32 {
    (MAX_DATAGRAM - ihl) as u32
}

/// Turns the first fragment's header (`ip` starts at the IPv4 header) into
/// the reassembled datagram's: total length, offset 0 and MF clear, DF iff
/// the largest fragment had it, the ECN table's bits OR-ed in, checksum.
pub(crate) fn finish_header(ip: &mut [u8], payload_len: usize, dont_frag: bool, ecn_or: u8) {
    let mut p = Ipv4Packet::new_unchecked(ip);
    let hl = p.header_len();
    p.set_total_len((hl + payload_len) as u16);
    p.set_frag_offset(0);
    p.set_more_frags(false);
    p.set_reserved_flag(false);
    p.set_dont_frag(dont_frag);
    let tos = p.tos();
    p.set_tos(tos | ecn_or);
    p.fill_checksum();
}

/// RFC 1071 check of an IPv4 header (IHL x 4 bytes, at most 60): inline, no
/// dispatch; summed in 32-bit words (5 for a plain header) and folded, which
/// gives the same ones'-complement sum as 16-bit words.
#[inline]
fn header_checksum_ok(h: &[u8]) -> bool {
    let mut sum: u64 = h.chunks_exact(4).map(|w| u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}
