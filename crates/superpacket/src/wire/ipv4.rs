//! IPv4 header (RFC 791), with options, fragmentation fields and the header
//! checksum (RFC 1071).
//!
//! [`Ipv4Packet::new_checked`] validates, in this order (spec offload-rules
//! 1.2 relies on the same fields):
//! 1. at least 20 bytes (`Truncated`);
//! 2. version == 4 (`Malformed`);
//! 3. IHL >= 5 (`Malformed`);
//! 4. IHL * 4 <= buffer (`Truncated`);
//! 5. total length >= IHL * 4 (`Malformed`);
//! 6. total length <= buffer (`Truncated`).
//!
//! Invariant: after `new_checked` succeeds every accessor is in bounds, and
//! [`Ipv4Packet::payload`] ends at `total_len`, so Ethernet padding after the
//! IP packet (frames shorter than 60 bytes are padded) is never treated as
//! payload; it is available as [`Ipv4Packet::padding`]. Slicing accessors
//! clamp to the buffer, so even a view whose length fields were later changed
//! through a setter cannot panic on them.

use std::net::Ipv4Addr;

use super::error::{Result, WireError, check_len};
use super::field::be16;
use super::ip::{Ecn, FragmentInfo, IpProtocol};
use super::{put_u16, sub, sub_mut};
use crate::csum;

/// Minimum (option-less) IPv4 header length.
pub const IPV4_HEADER_LEN: usize = 20;
/// Maximum IPv4 header length (IHL 15).
pub const IPV4_MAX_HEADER_LEN: usize = 60;
/// Maximum length of the options area.
pub const IPV4_MAX_OPTIONS_LEN: usize = 40;

const FLAG_RESERVED: u16 = 0x8000;
const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;

/// Zero-copy view of an IPv4 packet (header, payload and whatever follows).
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    view_constructors! {
        /// Wraps without checks; fixed-field accessors panic on fewer than 20 bytes.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// Runs the validations listed in the module documentation.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_len("ipv4", IPV4_HEADER_LEN, len)?;
        if self.version() != 4 {
            return Err(WireError::malformed("ipv4", "version is not 4"));
        }
        let hl = self.header_len();
        if hl < IPV4_HEADER_LEN {
            return Err(WireError::malformed("ipv4", "IHL < 5"));
        }
        check_len("ipv4", hl, len)?;
        let total = self.total_len() as usize;
        if total < hl {
            return Err(WireError::malformed("ipv4", "total length shorter than header"));
        }
        check_len("ipv4", total, len)
    }

    /// The whole underlying buffer (including any padding).
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// IHL: header length in 32-bit words.
    #[inline]
    pub fn ihl(&self) -> u8 {
        self.buffer.as_ref()[0] & 0x0f
    }

    /// Header length in bytes (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        self.ihl() as usize * 4
    }

    /// Type-of-service byte (DSCP << 2 | ECN).
    #[inline]
    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN bits.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.tos())
    }

    /// Total length (header + payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    #[inline]
    fn flags_frag(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// The reserved ("evil") flag bit.
    pub fn reserved_flag(&self) -> bool {
        self.flags_frag() & FLAG_RESERVED != 0
    }

    /// Don't Fragment.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags_frag() & FLAG_DF != 0
    }

    /// More Fragments.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.flags_frag() & FLAG_MF != 0
    }

    /// Fragment offset in **bytes** (wire field * 8).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (self.flags_frag() & 0x1fff) << 3
    }

    /// True when MF is set or the offset is non-zero.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags_frag() & (FLAG_MF | 0x1fff) != 0
    }

    /// Offset, MF and ID together.
    pub fn fragment_info(&self) -> FragmentInfo {
        FragmentInfo { offset: self.frag_offset(), more_fragments: self.more_frags(), ident: self.ident() as u32 }
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[8]
    }

    /// Upper-layer protocol.
    #[inline]
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[9])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 10)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(b[12], b[13], b[14], b[15])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = self.buffer.as_ref();
        Ipv4Addr::new(b[16], b[17], b[18], b[19])
    }

    /// Source address as bytes (for [`csum::pseudo_header_v4`]).
    pub fn src_bytes(&self) -> [u8; 4] {
        self.src_addr().octets()
    }

    /// Destination address as bytes.
    pub fn dst_bytes(&self) -> [u8; 4] {
        self.dst_addr().octets()
    }

    /// The header bytes, options included.
    pub fn header(&self) -> &[u8] {
        sub(self.buffer.as_ref(), 0, self.header_len())
    }

    /// The options area (bytes 20 .. IHL * 4); empty when IHL is 5.
    pub fn options(&self) -> &[u8] {
        sub(self.buffer.as_ref(), IPV4_HEADER_LEN, self.header_len())
    }

    /// Payload: from the end of the header to `total_len` (never includes
    /// L2 padding).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), self.header_len(), self.total_len() as usize)
    }

    /// Bytes after `total_len` (Ethernet padding or garbage).
    pub fn padding(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        sub(b, self.total_len() as usize, b.len())
    }

    /// True when the header checksum verifies (the ones' complement sum of
    /// the header, checksum included, is 0xFFFF).
    pub fn verify_checksum(&self) -> bool {
        csum::ones_sum(self.header()) == 0xFFFF
    }

    /// Sum of the TCP/UDP pseudo-header for this packet's addresses, protocol
    /// and payload length (see [`csum::pseudo_header_v4`]).
    pub fn pseudo_header_sum(&self) -> u16 {
        csum::pseudo_header_v4(self.src_bytes(), self.dst_bytes(), self.protocol().0, self.payload().len() as u16)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version (4) and header length in bytes (rounded down to words).
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[0] = 0x40 | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the whole TOS byte.
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[1] = tos;
    }

    /// Sets the DSCP, keeping ECN.
    pub fn set_dscp(&mut self, dscp: u8) {
        let t = self.tos();
        self.set_tos((dscp << 2) | (t & 3));
    }

    /// Sets the ECN bits, keeping DSCP.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let t = self.tos();
        self.set_tos((t & !3) | ecn.bits());
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, len: u16) {
        put_u16(self.buffer.as_mut(), 2, len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, id: u16) {
        put_u16(self.buffer.as_mut(), 4, id);
    }

    fn set_flag(&mut self, bit: u16, on: bool) {
        let v = self.flags_frag();
        put_u16(self.buffer.as_mut(), 6, if on { v | bit } else { v & !bit });
    }

    /// Sets the reserved flag bit.
    pub fn set_reserved_flag(&mut self, on: bool) {
        self.set_flag(FLAG_RESERVED, on);
    }

    /// Sets Don't Fragment.
    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag(FLAG_DF, on);
    }

    /// Sets More Fragments.
    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag(FLAG_MF, on);
    }

    /// Sets the fragment offset, in bytes (must be a multiple of 8; the low
    /// three bits are dropped).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let v = (self.flags_frag() & 0xe000) | (bytes >> 3);
        put_u16(self.buffer.as_mut(), 6, v);
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[8] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[9] = p.0;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put_u16(self.buffer.as_mut(), 10, c);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[12..16].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[16..20].copy_from_slice(&a.octets());
    }

    /// Mutable options area.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        sub_mut(self.buffer.as_mut(), IPV4_HEADER_LEN, hl)
    }

    /// Mutable payload (header end .. total length).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), self.total_len() as usize);
        sub_mut(self.buffer.as_mut(), hl, tl)
    }

    /// Recomputes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = csum::checksum(self.header());
        self.set_checksum(c);
    }
}

/// IPv4 options as a fixed-capacity value (no allocation), at most 40 bytes,
/// a multiple of 4 (the header length is counted in words).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Options {
    bytes: [u8; IPV4_MAX_OPTIONS_LEN],
    len: u8,
}

impl Ipv4Options {
    /// No options.
    pub const NONE: Ipv4Options = Ipv4Options { bytes: [0; IPV4_MAX_OPTIONS_LEN], len: 0 };

    /// Copies raw option bytes; `Malformed` unless the length is a multiple
    /// of 4 and at most 40.
    pub fn new(raw: &[u8]) -> Result<Ipv4Options> {
        if raw.len() > IPV4_MAX_OPTIONS_LEN || !raw.len().is_multiple_of(4) {
            return Err(WireError::malformed("ipv4", "options length not a multiple of 4 up to 40"));
        }
        let mut o = Self::NONE;
        o.bytes[..raw.len()].copy_from_slice(raw);
        o.len = raw.len() as u8;
        Ok(o)
    }

    /// The option bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Length in bytes.
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there are no options.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for Ipv4Options {
    fn default() -> Self {
        Self::NONE
    }
}

impl core::fmt::Debug for Ipv4Options {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Ipv4Options({:02x?})", self.as_slice())
    }
}

/// A decoded IPv4 header.
///
/// Not represented: the reserved flag (emitted as 0; see
/// [`Ipv4Packet::reserved_flag`]) and the checksum (verified with
/// [`Ipv4Packet::verify_checksum`], computed by [`emit`](Self::emit)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Upper-layer protocol.
    pub protocol: IpProtocol,
    /// Payload length (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// TOS byte (DSCP and ECN).
    pub tos: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes (multiple of 8).
    pub frag_offset: u16,
    /// Options.
    pub options: Ipv4Options,
}

impl Ipv4Repr {
    /// Decodes a header (the checksum is not checked; see
    /// [`Ipv4Packet::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Ipv4Repr> {
        p.check_len()?;
        Ok(Ipv4Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.total_len() as usize - p.header_len(),
            ttl: p.ttl(),
            tos: p.tos(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            more_frags: p.more_frags(),
            frag_offset: p.frag_offset(),
            options: Ipv4Options::new(p.options())?,
        })
    }

    /// Header length (20 + options).
    pub const fn header_len(&self) -> usize {
        IPV4_HEADER_LEN + self.options.len()
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the header (checksum included) at the start of the view's
    /// buffer, which must hold at least the header. The payload is not touched.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv4Packet<T>) -> Result<()> {
        let hl = self.header_len();
        check_len("ipv4", hl, p.buffer.as_ref().len())?;
        let total = u16::try_from(hl + self.payload_len)
            .map_err(|_| WireError::malformed("ipv4", "total length exceeds 65535"))?;
        if !self.frag_offset.is_multiple_of(8) {
            return Err(WireError::malformed("ipv4", "fragment offset not a multiple of 8"));
        }
        p.set_header_len(hl);
        p.set_tos(self.tos);
        p.set_total_len(total);
        p.set_ident(self.ident);
        let flags = if self.dont_frag { FLAG_DF } else { 0 } | if self.more_frags { FLAG_MF } else { 0 };
        put_u16(p.buffer.as_mut(), 6, flags | (self.frag_offset >> 3));
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        p.buffer.as_mut()[IPV4_HEADER_LEN..hl].copy_from_slice(self.options.as_slice());
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real header (UDP, 192.168.0.1 -> 192.168.0.199) with checksum 0xb861.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];

    fn packet(total: usize, buf: usize) -> Vec<u8> {
        let mut v = HDR.to_vec();
        v[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        v.resize(buf, 0xee);
        let mut p = Ipv4Packet::new_unchecked(&mut v[..]);
        p.fill_checksum();
        v
    }

    #[test]
    fn known_header() {
        let mut v = HDR.to_vec();
        v.resize(0x73, 0);
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.checksum(), 0xb861);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.payload().len(), 0x73 - 20);
        let r = Ipv4Repr::parse(&p).unwrap();
        let mut out = vec![0u8; 20];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, HDR);
        let mut bad = v.clone();
        bad[8] = 63;
        assert!(!Ipv4Packet::new_checked(&bad[..]).unwrap().verify_checksum());
    }

    #[test]
    fn padding_excluded_from_payload() {
        // 20-byte header + 8 bytes payload in a 46-byte Ethernet payload.
        let v = packet(28, 46);
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
        assert_eq!(p.padding().len(), 18);
    }

    #[test]
    fn options_and_fragments() {
        let mut v = vec![0u8; 32];
        let r = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::TCP,
            payload_len: 8,
            ttl: 1,
            tos: 0xb9,
            ident: 0xbeef,
            dont_frag: false,
            more_frags: true,
            frag_offset: 1480,
            options: Ipv4Options::new(&[0x94, 0x04, 0, 0]).unwrap(), // router alert
        };
        r.emit(&mut Ipv4Packet::new_unchecked(&mut v[..])).unwrap();
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0, 0]);
        assert_eq!(p.dscp(), 0xb9 >> 2);
        assert_eq!(p.ecn(), Ecn::Ect1);
        assert_eq!(p.fragment_info(), FragmentInfo { offset: 1480, more_fragments: true, ident: 0xbeef });
        assert!(p.is_fragment());
        assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
        let mut m = v.clone();
        let mut pm = Ipv4Packet::new_unchecked(&mut m[..]);
        pm.set_reserved_flag(true);
        pm.set_ecn(Ecn::Ce);
        pm.set_dscp(46);
        assert!(pm.reserved_flag() && pm.more_frags());
        assert_eq!(pm.tos(), 46 << 2 | 3);
        assert!(!pm.verify_checksum());
        pm.fill_checksum();
        assert!(pm.verify_checksum());
    }

    #[test]
    fn errors() {
        let v = packet(40, 40);
        assert_eq!(Ipv4Packet::new_checked(&v[..19]).unwrap_err(), WireError::truncated("ipv4", 20, 19));
        let mut w = v.clone();
        w[0] = 0x65;
        assert_eq!(Ipv4Packet::new_checked(&w[..]).unwrap_err(), WireError::malformed("ipv4", "version is not 4"));
        w[0] = 0x44;
        assert_eq!(Ipv4Packet::new_checked(&w[..]).unwrap_err(), WireError::malformed("ipv4", "IHL < 5"));
        w[0] = 0x4f;
        assert_eq!(Ipv4Packet::new_checked(&w[..]).unwrap_err(), WireError::truncated("ipv4", 60, 40));
        let w = packet(19, 40);
        assert_eq!(
            Ipv4Packet::new_checked(&w[..]).unwrap_err(),
            WireError::malformed("ipv4", "total length shorter than header")
        );
        let w = packet(41, 40);
        assert_eq!(Ipv4Packet::new_checked(&w[..]).unwrap_err(), WireError::truncated("ipv4", 41, 40));
        let mut r = Ipv4Repr::parse(&Ipv4Packet::new_checked(&v[..]).unwrap()).unwrap();
        r.payload_len = 65516;
        assert!(r.emit(&mut Ipv4Packet::new_unchecked(&mut [0u8; 20][..])).is_err());
        r.payload_len = 0;
        assert_eq!(
            r.emit(&mut Ipv4Packet::new_unchecked(&mut [0u8; 19][..])),
            Err(WireError::truncated("ipv4", 20, 19))
        );
        assert!(Ipv4Options::new(&[1, 2, 3]).is_err());
    }
}
