//! TCP header (RFC 9293 section 3.1), flags including ECN (RFC 3168) and
//! AccECN's AE bit (RFC 9768, the former NS bit of RFC 3540), options
//! (RFC 9293 3.2, RFC 7323 window scale / timestamps, RFC 2018 SACK) and the
//! checksum over the pseudo-header.
//!
//! Invariant: after [`TcpPacket::new_checked`] succeeds (at least 20 bytes,
//! data offset >= 5, data offset * 4 <= buffer) every accessor is in bounds.
//! TCP has no length field: the view's buffer must be exactly the segment
//! (the IP payload), which is what the checksum helpers sum.
//!
//! The option iterator ([`TcpOptionIter`]) returns a typed error for a
//! malformed option (length < 2, running past the header, wrong length for a
//! known kind) and then stops; it never panics.

use core::fmt;
use core::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not};

use super::error::{Result, WireError, check_len};
use super::field::{be16, be32};
use super::{put_u16, put_u32, sub, sub_mut};
use crate::csum;

/// Minimum TCP header length.
pub const TCP_HEADER_LEN: usize = 20;
/// Maximum TCP header length (data offset 15).
pub const TCP_MAX_HEADER_LEN: usize = 60;
/// Offset of the checksum field (the `csum_offset` of offload-rules 0.3).
pub const TCP_CHECKSUM_OFFSET: usize = 16;

/// The 12 bits after the data offset: 3 reserved bits, AE, CWR, ECE, URG,
/// ACK, PSH, RST, SYN, FIN. A bit set with the usual operators.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(u16);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x001);
    /// Synchronise sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x002);
    /// Reset.
    pub const RST: TcpFlags = TcpFlags(0x004);
    /// Push.
    pub const PSH: TcpFlags = TcpFlags(0x008);
    /// Acknowledgment field significant.
    pub const ACK: TcpFlags = TcpFlags(0x010);
    /// Urgent pointer significant.
    pub const URG: TcpFlags = TcpFlags(0x020);
    /// ECN-Echo.
    pub const ECE: TcpFlags = TcpFlags(0x040);
    /// Congestion window reduced.
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// AccECN bit (RFC 9768), formerly NS (RFC 3540).
    pub const AE: TcpFlags = TcpFlags(0x100);
    /// Alias of [`TcpFlags::AE`] (ECN nonce sum, historic).
    pub const NS: TcpFlags = TcpFlags::AE;
    /// The three remaining reserved bits.
    pub const RESERVED: TcpFlags = TcpFlags(0xe00);

    /// No flag.
    pub const fn empty() -> TcpFlags {
        TcpFlags(0)
    }

    /// Wire bits (low 12 bits of the 16-bit word at offset 12).
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// From wire bits; bits above the 12 low ones are dropped.
    pub const fn from_bits_truncate(bits: u16) -> TcpFlags {
        TcpFlags(bits & 0x0fff)
    }

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when some bit of `other` is set.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// True when no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: TcpFlags) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: TcpFlags) {
        self.0 &= !other.0;
    }

    /// Sets or clears the bits of `other`.
    pub fn set(&mut self, other: TcpFlags, on: bool) {
        if on { self.insert(other) } else { self.remove(other) }
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, r: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | r.0)
    }
}

impl BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, r: TcpFlags) {
        self.0 |= r.0;
    }
}

impl BitAnd for TcpFlags {
    type Output = TcpFlags;
    fn bitand(self, r: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & r.0)
    }
}

impl BitAndAssign for TcpFlags {
    fn bitand_assign(&mut self, r: TcpFlags) {
        self.0 &= r.0;
    }
}

impl Not for TcpFlags {
    type Output = TcpFlags;
    fn not(self) -> TcpFlags {
        TcpFlags(!self.0 & 0x0fff)
    }
}

impl fmt::Display for TcpFlags {
    /// `SYN|ACK` style; `-` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(TcpFlags, &str); 10] = [
            (TcpFlags::FIN, "FIN"),
            (TcpFlags::SYN, "SYN"),
            (TcpFlags::RST, "RST"),
            (TcpFlags::PSH, "PSH"),
            (TcpFlags::ACK, "ACK"),
            (TcpFlags::URG, "URG"),
            (TcpFlags::ECE, "ECE"),
            (TcpFlags::CWR, "CWR"),
            (TcpFlags::AE, "AE"),
            (TcpFlags::RESERVED, "RES"),
        ];
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for (flag, name) in NAMES {
            if self.intersects(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TcpFlags({self})")
    }
}

/// Zero-copy view of a TCP segment (header and payload).
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    view_constructors! {
        /// Wraps without checks; fixed-field accessors panic on fewer than 20 bytes.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// 20 bytes present (`Truncated`), data offset >= 5 (`Malformed`), whole
    /// header present (`Truncated`).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_len("tcp", TCP_HEADER_LEN, len)?;
        let hl = self.header_len();
        if hl < TCP_HEADER_LEN {
            return Err(WireError::malformed("tcp", "data offset < 5"));
        }
        check_len("tcp", hl, len)
    }

    /// The whole segment.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        be32(self.buffer.as_ref(), 8)
    }

    /// Data offset in 32-bit words.
    #[inline]
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[12] >> 4
    }

    /// Header length in bytes (data offset * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        self.data_offset() as usize * 4
    }

    /// All 12 flag bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(be16(self.buffer.as_ref(), 12))
    }

    /// The 32-bit word at offset 12: data offset, flags and window (the word
    /// GRO compares, offload-rules 1.3 (a)).
    pub fn word3(&self) -> u32 {
        be32(self.buffer.as_ref(), 12)
    }

    /// SYN set.
    pub fn syn(&self) -> bool {
        self.flags().contains(TcpFlags::SYN)
    }

    /// ACK set.
    pub fn ack(&self) -> bool {
        self.flags().contains(TcpFlags::ACK)
    }

    /// FIN set.
    pub fn fin(&self) -> bool {
        self.flags().contains(TcpFlags::FIN)
    }

    /// RST set.
    pub fn rst(&self) -> bool {
        self.flags().contains(TcpFlags::RST)
    }

    /// PSH set.
    pub fn psh(&self) -> bool {
        self.flags().contains(TcpFlags::PSH)
    }

    /// Window (unscaled).
    #[inline]
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), 14)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 16)
    }

    /// Urgent pointer.
    pub fn urgent_ptr(&self) -> u16 {
        be16(self.buffer.as_ref(), 18)
    }

    /// Option bytes (20 .. data offset * 4).
    pub fn options(&self) -> &[u8] {
        sub(self.buffer.as_ref(), TCP_HEADER_LEN, self.header_len())
    }

    /// Iterates the options.
    pub fn iter_options(&self) -> TcpOptionIter<'_> {
        TcpOptionIter::new(self.options())
    }

    /// Payload (after the header, to the end of the buffer).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        sub(b, self.header_len(), b.len())
    }

    /// True when the checksum verifies, given the pseudo-header sum
    /// (`csum::pseudo_header_v4/v6` with the segment length).
    pub fn verify_checksum(&self, pseudo_sum: u16) -> bool {
        csum::ones_add(pseudo_sum, csum::ones_sum(self.buffer.as_ref())) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 0, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), 4, v);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), 8, v);
    }

    /// Sets the header length in bytes (stored / 4), keeping the flags.
    pub fn set_header_len(&mut self, len: usize) {
        let b = self.buffer.as_mut();
        b[12] = (((len / 4) as u8) << 4) | (b[12] & 0x0f);
    }

    /// Sets all 12 flag bits, keeping the data offset.
    pub fn set_flags(&mut self, f: TcpFlags) {
        let w = be16(self.buffer.as_ref(), 12);
        put_u16(self.buffer.as_mut(), 12, (w & 0xf000) | f.bits());
    }

    /// Sets the window.
    pub fn set_window(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 14, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 16, v);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_ptr(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 18, v);
    }

    /// Mutable option bytes.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        sub_mut(self.buffer.as_mut(), TCP_HEADER_LEN, hl)
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let b = self.buffer.as_mut();
        let len = b.len();
        sub_mut(b, hl, len)
    }

    /// Computes and stores the checksum over the whole buffer, given the
    /// pseudo-header sum.
    pub fn fill_checksum(&mut self, pseudo_sum: u16) {
        self.set_checksum(0);
        let c = !csum::ones_add(pseudo_sum, csum::ones_sum(self.buffer.as_ref()));
        self.set_checksum(c);
    }
}

/// Up to four SACK blocks (RFC 2018), `(left, right)` edges; fixed capacity,
/// unused slots zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBlocks {
    blocks: [(u32, u32); 4],
    len: u8,
}

impl SackBlocks {
    /// Builds from up to four blocks (`Malformed` beyond).
    pub fn new(blocks: &[(u32, u32)]) -> Result<SackBlocks> {
        if blocks.len() > 4 {
            return Err(WireError::malformed("tcp-options", "more than 4 SACK blocks"));
        }
        let mut s = SackBlocks::default();
        s.blocks[..blocks.len()].copy_from_slice(blocks);
        s.len = blocks.len() as u8;
        Ok(s)
    }

    /// The blocks.
    pub fn as_slice(&self) -> &[(u32, u32)] {
        &self.blocks[..self.len as usize]
    }

    /// Number of blocks.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// True without blocks.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Kind 0: end of option list (the iterator stops after it).
    EndOfList,
    /// Kind 1: no-operation (padding).
    NoOperation,
    /// Kind 2: maximum segment size.
    MaxSegmentSize(u16),
    /// Kind 3: window scale shift.
    WindowScale(u8),
    /// Kind 4: SACK permitted.
    SackPermitted,
    /// Kind 5: SACK blocks.
    Sack(SackBlocks),
    /// Kind 8: timestamps.
    Timestamp {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other kind, with its data (after kind and length).
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

/// Iterator over TCP options; yields one `Err` on a malformed option, then ends.
#[derive(Debug, Clone)]
pub struct TcpOptionIter<'a> {
    data: &'a [u8],
    done: bool,
}

impl<'a> TcpOptionIter<'a> {
    /// Iterates the option bytes `data`.
    pub const fn new(data: &'a [u8]) -> Self {
        TcpOptionIter { data, done: false }
    }

    fn fail(&mut self, reason: &'static str) -> Option<Result<TcpOption<'a>>> {
        self.done = true;
        Some(Err(WireError::malformed("tcp-options", reason)))
    }
}

impl<'a> Iterator for TcpOptionIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (&kind, rest) = self.data.split_first()?;
        match kind {
            0 => {
                self.done = true;
                return Some(Ok(TcpOption::EndOfList));
            }
            1 => {
                self.data = rest;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let Some(&len) = rest.first() else { return self.fail("option without length byte") };
        let len = len as usize;
        if len < 2 {
            return self.fail("option length < 2");
        }
        if len > self.data.len() {
            return self.fail("option runs past the header");
        }
        let (opt, rest) = self.data.split_at(len);
        self.data = rest;
        let data = &opt[2..];
        let o = match (kind, len) {
            (2, 4) => TcpOption::MaxSegmentSize(be16(data, 0)),
            (3, 3) => TcpOption::WindowScale(data[0]),
            (4, 2) => TcpOption::SackPermitted,
            (5, 10 | 18 | 26 | 34) => {
                let mut s = SackBlocks::default();
                for (i, c) in data.chunks_exact(8).enumerate() {
                    s.blocks[i] = (be32(c, 0), be32(c, 4));
                }
                s.len = (data.len() / 8) as u8;
                TcpOption::Sack(s)
            }
            (8, 10) => TcpOption::Timestamp { tsval: be32(data, 0), tsecr: be32(data, 4) },
            (2..=5 | 8, _) => return self.fail("known option with wrong length"),
            (kind, _) => TcpOption::Unknown { kind, data },
        };
        Some(Ok(o))
    }
}

/// The options a TCP stack acts on, decoded. Unknown options are dropped by
/// [`TcpOptionsRepr::parse`]; [`TcpOptionsRepr::emit`] writes a canonical
/// layout (Linux order: MSS, SACK-permitted + timestamps, window scale, SACK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpOptionsRepr {
    /// MSS option.
    pub mss: Option<u16>,
    /// Window scale shift.
    pub window_scale: Option<u8>,
    /// SACK permitted.
    pub sack_permitted: bool,
    /// Timestamps `(tsval, tsecr)`.
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (none when empty).
    pub sack: SackBlocks,
}

impl TcpOptionsRepr {
    /// Decodes option bytes (errors from [`TcpOptionIter`] propagate; a
    /// repeated option keeps the last value).
    pub fn parse(options: &[u8]) -> Result<TcpOptionsRepr> {
        let mut r = TcpOptionsRepr::default();
        for o in TcpOptionIter::new(options) {
            match o? {
                TcpOption::MaxSegmentSize(m) => r.mss = Some(m),
                TcpOption::WindowScale(w) => r.window_scale = Some(w),
                TcpOption::SackPermitted => r.sack_permitted = true,
                TcpOption::Sack(s) => r.sack = s,
                TcpOption::Timestamp { tsval, tsecr } => r.timestamp = Some((tsval, tsecr)),
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
            }
        }
        Ok(r)
    }

    /// Bytes [`emit`](Self::emit) writes (a multiple of 4).
    pub const fn len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.timestamp.is_some() {
            n += 12;
        } else if self.sack_permitted {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4;
        }
        if !self.sack.is_empty() {
            n += 4 + 8 * self.sack.len();
        }
        n
    }

    /// True when no option is present.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the options into `buf` (at least [`len`](Self::len) bytes);
    /// `Malformed` if they exceed 40 bytes. Returns the length written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.len();
        if n > TCP_MAX_HEADER_LEN - TCP_HEADER_LEN {
            return Err(WireError::malformed("tcp-options", "options exceed 40 bytes"));
        }
        check_len("tcp-options", n, buf.len())?;
        let mut o = 0;
        if let Some(m) = self.mss {
            buf[o..o + 2].copy_from_slice(&[2, 4]);
            put_u16(buf, o + 2, m);
            o += 4;
        }
        if let Some((tsval, tsecr)) = self.timestamp {
            let lead = if self.sack_permitted { [4, 2] } else { [1, 1] };
            buf[o..o + 4].copy_from_slice(&[lead[0], lead[1], 8, 10]);
            put_u32(buf, o + 4, tsval);
            put_u32(buf, o + 8, tsecr);
            o += 12;
        } else if self.sack_permitted {
            buf[o..o + 4].copy_from_slice(&[1, 1, 4, 2]);
            o += 4;
        }
        if let Some(ws) = self.window_scale {
            buf[o..o + 4].copy_from_slice(&[1, 3, 3, ws]);
            o += 4;
        }
        if !self.sack.is_empty() {
            buf[o..o + 4].copy_from_slice(&[1, 1, 5, 2 + 8 * self.sack.len() as u8]);
            o += 4;
            for &(l, r) in self.sack.as_slice() {
                put_u32(buf, o, l);
                put_u32(buf, o + 4, r);
                o += 8;
            }
        }
        Ok(o)
    }
}

/// A decoded TCP header (the payload is not part of the repr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number (kept even when ACK is clear).
    pub ack_number: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window (unscaled).
    pub window: u16,
    /// Urgent pointer.
    pub urgent_ptr: u16,
    /// Decoded options.
    pub options: TcpOptionsRepr,
}

impl TcpRepr {
    /// Decodes a header (the checksum is not checked; see
    /// [`TcpPacket::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(p: &TcpPacket<T>) -> Result<TcpRepr> {
        p.check_len()?;
        Ok(TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window: p.window(),
            urgent_ptr: p.urgent_ptr(),
            options: TcpOptionsRepr::parse(p.options())?,
        })
    }

    /// 20 + options.
    pub const fn header_len(&self) -> usize {
        TCP_HEADER_LEN + self.options.len()
    }

    /// Header plus `payload_len`.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Writes the header (options included, checksum field zero). Write the
    /// payload, then call [`TcpPacket::fill_checksum`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut TcpPacket<T>) -> Result<()> {
        let hl = self.header_len();
        check_len("tcp", hl, p.buffer.as_ref().len())?;
        self.options.emit(&mut p.buffer.as_mut()[TCP_HEADER_LEN..hl])?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        put_u16(p.buffer.as_mut(), 12, (((hl / 4) as u16) << 12) | self.flags.bits());
        p.set_window(self.window);
        p.set_checksum(0);
        p.set_urgent_ptr(self.urgent_ptr);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A SYN as Linux sends it (MSS, SACK-permitted, timestamps, NOP, window
    /// scale), 192.168.122.1:51234 -> 192.168.122.80:443; the IPv4 header
    /// precedes it. Checksums computed independently (Python RFC 1071 code)
    /// and cross-checked with etherparse in `wire::oracle_tests`.
    pub(crate) const SYN_IPV4: [u8; 60] = [
        0x45, 0x00, 0x00, 0x3c, 0x3b, 0x4e, 0x40, 0x00, 0x40, 0x06, 0x89, 0xcb, 0xc0, 0xa8, 0x7a, 0x01, 0xc0, 0xa8,
        0x7a, 0x50, 0xc8, 0x22, 0x01, 0xbb, 0x6b, 0x8b, 0x45, 0x67, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0,
        0xa4, 0x58, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x9a, 0x3c, 0x1e, 0x07, 0x00, 0x00,
        0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    fn pseudo(len: u16) -> u16 {
        csum::pseudo_header_v4([192, 168, 122, 1], [192, 168, 122, 80], 6, len)
    }

    #[test]
    fn known_syn() {
        let seg = &SYN_IPV4[20..];
        let p = TcpPacket::new_checked(seg).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (51234, 443));
        assert_eq!(p.seq_number(), 0x6b8b4567);
        assert_eq!(p.flags(), TcpFlags::SYN);
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst() && !p.psh());
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.window(), 64240);
        assert_eq!(p.checksum(), 0xa458);
        assert!(p.payload().is_empty());
        assert!(p.verify_checksum(pseudo(40)));
        assert!(!p.verify_checksum(pseudo(41)));
        let opts: Vec<_> = p.iter_options().collect::<Result<_>>().unwrap();
        assert_eq!(
            opts,
            vec![
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamp { tsval: 0x9a3c1e07, tsecr: 0 },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        let r = TcpRepr::parse(&p).unwrap();
        let mut out = [0u8; 40];
        let mut q = TcpPacket::new_unchecked(&mut out[..]);
        r.emit(&mut q).unwrap();
        q.fill_checksum(pseudo(40));
        assert_eq!(&out[..], seg);
    }

    #[test]
    fn flags_bits() {
        let mut f = TcpFlags::SYN | TcpFlags::ACK;
        assert_eq!(f.to_string(), "SYN|ACK");
        f.insert(TcpFlags::NS);
        f.set(TcpFlags::SYN, false);
        assert!(f.contains(TcpFlags::AE | TcpFlags::ACK) && !f.contains(TcpFlags::SYN));
        assert_eq!(TcpFlags::from_bits_truncate(0xffff).bits(), 0x0fff);
        assert_eq!((!TcpFlags::empty()).bits(), 0x0fff);
        assert_eq!(TcpFlags::empty().to_string(), "-");
        let mut h = [0u8; 20];
        h[12] = 0x50;
        let mut p = TcpPacket::new_unchecked(&mut h[..]);
        p.set_flags(TcpFlags::CWR | TcpFlags::ECE | TcpFlags::AE);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.flags().to_string(), "ECE|CWR|AE");
        assert_eq!(h[12..14], [0x51, 0xc0]);
    }

    #[test]
    fn option_errors() {
        let cases: [(&[u8], &str); 5] = [
            (&[2], "option without length byte"),
            (&[2, 1, 0, 0], "option length < 2"),
            (&[8, 10, 0, 0], "option runs past the header"),
            (&[2, 3, 5, 0], "known option with wrong length"),
            (&[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "known option with wrong length"),
        ];
        for (bytes, reason) in cases {
            let mut it = TcpOptionIter::new(bytes);
            assert_eq!(it.next(), Some(Err(WireError::malformed("tcp-options", reason))), "{bytes:?}");
            assert_eq!(it.next(), None);
            assert!(TcpOptionsRepr::parse(bytes).is_err());
        }
        // EOL stops the walk; garbage after it is padding.
        let mut it = TcpOptionIter::new(&[1, 0, 2, 1]);
        assert_eq!(it.next(), Some(Ok(TcpOption::NoOperation)));
        assert_eq!(it.next(), Some(Ok(TcpOption::EndOfList)));
        assert_eq!(it.next(), None);
        let u: Vec<_> = TcpOptionIter::new(&[30, 4, 9, 9]).collect();
        assert_eq!(u, vec![Ok(TcpOption::Unknown { kind: 30, data: &[9, 9] })]);
        let too_many = TcpOptionsRepr {
            mss: Some(1),
            timestamp: Some((1, 2)),
            sack: SackBlocks::new(&[(1, 2), (3, 4), (5, 6)]).unwrap(),
            ..Default::default()
        };
        assert!(too_many.emit(&mut [0u8; 60]).is_err());
        assert!(SackBlocks::new(&[(0, 0); 5]).is_err());
    }

    #[test]
    fn header_errors() {
        let seg = &SYN_IPV4[20..];
        assert_eq!(TcpPacket::new_checked(&seg[..19]).unwrap_err(), WireError::truncated("tcp", 20, 19));
        assert_eq!(TcpPacket::new_checked(&seg[..39]).unwrap_err(), WireError::truncated("tcp", 40, 39));
        let mut m = seg.to_vec();
        m[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&m[..]).unwrap_err(), WireError::malformed("tcp", "data offset < 5"));
    }
}
