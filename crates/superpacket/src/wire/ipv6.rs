//! IPv6 fixed header (RFC 8200 section 3), extension headers (RFC 8200
//! section 4: hop-by-hop 0, routing 43, fragment 44, destination options 60;
//! AH 51 from RFC 4302 is skipped by length) and the extension-header walker.
//!
//! [`Ipv6Packet::new_checked`] validates: at least 40 bytes (`Truncated`),
//! version == 6 (`Malformed`), no jumbogram (payload length 0 followed by a
//! hop-by-hop header and more bytes: `Unsupported`, RFC 2675), and
//! `40 + payload_len <= buffer` (`Truncated`). After it succeeds every
//! fixed-field accessor is in bounds and [`Ipv6Packet::payload`] ends at the
//! payload length (L2 padding excluded, see [`Ipv6Packet::padding`]).
//!
//! [`Ipv6Packet::walk_ext_headers`] follows the next-header chain without
//! allocating, at most [`MAX_IPV6_EXT_HEADERS`] headers (more is
//! `Unsupported`), and stops at the first non-extension header or after the
//! Fragment header of a non-first fragment (what follows is fragment data).
//! A hop-by-hop header anywhere but first, or a second Fragment header, is
//! `Malformed` (RFC 8200 section 4.1).

use std::net::Ipv6Addr;

use super::error::{Result, WireError, check_len};
use super::field::{be16, be32};
use super::ip::{Ecn, FragmentInfo, IpProtocol};
use super::{put_u16, put_u32, sub, sub_mut};
use crate::csum;

/// Length of the fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// IPv6 minimum link MTU (RFC 8200 section 5).
pub const IPV6_MIN_MTU: usize = 1280;
/// Most extension headers [`Ipv6Packet::walk_ext_headers`] follows.
pub const MAX_IPV6_EXT_HEADERS: usize = 16;
/// Length of the Fragment extension header.
pub const IPV6_FRAGMENT_HEADER_LEN: usize = 8;

/// Zero-copy view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    view_constructors! {
        /// Wraps without checks; accessors panic on fewer than 40 bytes.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// Runs the validations listed in the module documentation.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_len("ipv6", IPV6_HEADER_LEN, len)?;
        if self.version() != 6 {
            return Err(WireError::malformed("ipv6", "version is not 6"));
        }
        if self.payload_len() == 0 && self.next_header() == IpProtocol::HOP_BY_HOP && len > IPV6_HEADER_LEN {
            return Err(WireError::unsupported("ipv6", "jumbogram (payload length 0)"));
        }
        check_len("ipv6", self.total_len(), len)
    }

    /// The whole underlying buffer.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Version nibble.
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class (DSCP << 2 | ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (be16(self.buffer.as_ref(), 0) >> 4) as u8
    }

    /// DSCP (6 bits).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN bits.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        be32(self.buffer.as_ref(), 0) & 0x000f_ffff
    }

    /// Payload length (everything after the fixed header, extension headers
    /// included).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// `40 + payload_len`.
    #[inline]
    pub fn total_len(&self) -> usize {
        IPV6_HEADER_LEN + self.payload_len() as usize
    }

    /// Next header of the fixed header.
    #[inline]
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[6])
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    /// Source address bytes.
    pub fn src_bytes(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[8..24]);
        a
    }

    /// Destination address bytes.
    pub fn dst_bytes(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.buffer.as_ref()[24..40]);
        a
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.src_bytes())
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.dst_bytes())
    }

    /// The 40-byte fixed header.
    pub fn header(&self) -> &[u8] {
        sub(self.buffer.as_ref(), 0, IPV6_HEADER_LEN)
    }

    /// The payload (extension headers and upper layer), bounded by the
    /// payload length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), IPV6_HEADER_LEN, self.total_len())
    }

    /// Bytes after the packet (L2 padding).
    pub fn padding(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        sub(b, self.total_len(), b.len())
    }

    /// Walks the extension headers (see the module documentation).
    pub fn walk_ext_headers(&self) -> Result<Ipv6ExtInfo> {
        walk(self.next_header(), sub(self.buffer.as_ref(), 0, self.total_len()))
    }

    /// Upper-layer pseudo-header sum for this packet's addresses
    /// (see [`csum::pseudo_header_v6`]).
    pub fn pseudo_header_sum(&self, next_header: IpProtocol, l4_len: u32) -> u16 {
        csum::pseudo_header_v6(self.src_bytes(), self.dst_bytes(), next_header.0, l4_len)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Writes version 6, keeping traffic class and flow label.
    pub fn set_version(&mut self) {
        let b = self.buffer.as_mut();
        b[0] = 0x60 | (b[0] & 0x0f);
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = be16(self.buffer.as_ref(), 0);
        put_u16(self.buffer.as_mut(), 0, (w & 0xf00f) | ((tc as u16) << 4));
    }

    /// Sets the ECN bits, keeping the DSCP.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let tc = self.traffic_class();
        self.set_traffic_class((tc & !3) | ecn.bits());
    }

    /// Sets the flow label (low 20 bits used).
    pub fn set_flow_label(&mut self, fl: u32) {
        let w = be32(self.buffer.as_ref(), 0);
        put_u32(self.buffer.as_mut(), 0, (w & 0xfff0_0000) | (fl & 0x000f_ffff));
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        put_u16(self.buffer.as_mut(), 4, len);
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, nh: IpProtocol) {
        self.buffer.as_mut()[6] = nh.0;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        self.buffer.as_mut()[7] = h;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[8..24].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[24..40].copy_from_slice(&a.octets());
    }

    /// Mutable payload.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        sub_mut(self.buffer.as_mut(), IPV6_HEADER_LEN, end)
    }
}

/// Where the Fragment header was found and what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Fragment {
    /// Offset of the Fragment header from the start of the IPv6 header (=
    /// length of the unfragmentable part).
    pub header_offset: usize,
    /// The Fragment header's next header.
    pub next_header: IpProtocol,
    /// Offset (bytes), M flag and 32-bit identification.
    pub info: FragmentInfo,
}

/// Result of [`Ipv6Packet::walk_ext_headers`]. Offsets are from the start of
/// the IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6ExtInfo {
    /// Upper-layer protocol (for a non-first fragment: the Fragment header's
    /// next header).
    pub upper_protocol: IpProtocol,
    /// Offset of the upper-layer header (or of the fragment data).
    pub upper_offset: usize,
    /// Number of extension headers walked.
    pub ext_count: u8,
    /// The Fragment header, if one was found.
    pub fragment: Option<Ipv6Fragment>,
}

impl Ipv6ExtInfo {
    /// Bytes of extension headers (`upper_offset - 40`).
    pub const fn ext_len(&self) -> usize {
        self.upper_offset - IPV6_HEADER_LEN
    }

    /// True when a Fragment header describes a real fragment (not atomic).
    pub fn is_fragment(&self) -> bool {
        self.fragment.is_some_and(|f| f.info.is_fragment())
    }
}

fn ext_layer(nh: u8) -> &'static str {
    match nh {
        0 => "ipv6-hopopts",
        43 => "ipv6-route",
        44 => "ipv6-frag",
        51 => "ipv6-ah",
        _ => "ipv6-dstopts",
    }
}

/// Extension-header walk over `pkt` (the IPv6 packet bounded by its payload length).
#[inline]
pub(crate) fn walk(first: IpProtocol, pkt: &[u8]) -> Result<Ipv6ExtInfo> {
    let mut nh = first.0;
    let mut off = IPV6_HEADER_LEN;
    let mut count = 0usize;
    let mut fragment = None;
    while matches!(nh, 0 | 43 | 44 | 51 | 60) {
        let layer = ext_layer(nh);
        if nh == 0 && count != 0 {
            return Err(WireError::malformed(layer, "hop-by-hop header not first"));
        }
        if count == MAX_IPV6_EXT_HEADERS {
            return Err(WireError::unsupported("ipv6", "more than 16 extension headers"));
        }
        count += 1;
        if nh == 44 {
            check_len(layer, off + IPV6_FRAGMENT_HEADER_LEN, pkt.len())?;
            if fragment.is_some() {
                return Err(WireError::malformed(layer, "more than one fragment header"));
            }
            let f = Ipv6FragmentHeader::new_unchecked(&pkt[off..off + IPV6_FRAGMENT_HEADER_LEN]);
            let info = f.fragment_info();
            fragment = Some(Ipv6Fragment { header_offset: off, next_header: f.next_header(), info });
            nh = f.next_header().0;
            off += IPV6_FRAGMENT_HEADER_LEN;
            if info.offset != 0 {
                break;
            }
            continue;
        }
        check_len(layer, off + 2, pkt.len())?;
        let hl = if nh == 51 { (pkt[off + 1] as usize + 2) * 4 } else { (pkt[off + 1] as usize + 1) * 8 };
        check_len(layer, off + hl, pkt.len())?;
        nh = pkt[off];
        off += hl;
    }
    Ok(Ipv6ExtInfo { upper_protocol: IpProtocol(nh), upper_offset: off, ext_count: count as u8, fragment })
}

/// A decoded IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Next header of the fixed header.
    pub next_header: IpProtocol,
    /// Payload length (extension headers + upper layer).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Decodes the fixed header.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        p.check_len()?;
        Ok(Ipv6Repr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            next_header: p.next_header(),
            payload_len: p.payload_len() as usize,
            hop_limit: p.hop_limit(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
        })
    }

    /// Always 40.
    pub const fn header_len(&self) -> usize {
        IPV6_HEADER_LEN
    }

    /// `40 + payload_len`.
    pub const fn buffer_len(&self) -> usize {
        IPV6_HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header; the buffer must hold at least 40 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Ipv6Packet<T>) -> Result<()> {
        check_len("ipv6", IPV6_HEADER_LEN, p.buffer.as_ref().len())?;
        let pl = u16::try_from(self.payload_len)
            .map_err(|_| WireError::unsupported("ipv6", "payload over 65535 (jumbogram)"))?;
        if self.flow_label > 0x000f_ffff {
            return Err(WireError::malformed("ipv6", "flow label wider than 20 bits"));
        }
        put_u32(p.buffer.as_mut(), 0, (6 << 28) | ((self.traffic_class as u32) << 20) | self.flow_label);
        p.set_payload_len(pl);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src_addr);
        p.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

/// Zero-copy view of a hop-by-hop (0) or destination options (60) header:
/// `next(1) len(1) options(len*8+6)`.
#[derive(Debug, Clone)]
pub struct Ipv6OptionsHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6OptionsHeader<T> {
    /// Wraps without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6OptionsHeader { buffer }
    }

    /// Wraps after checking that the whole header (`(len + 1) * 8`) is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        let len = h.buffer.as_ref().len();
        check_len("ipv6-opts", 2, len)?;
        check_len("ipv6-opts", h.header_len(), len)?;
        Ok(h)
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[1] as usize + 1) * 8
    }

    /// The options area (TLVs, including padding).
    pub fn options(&self) -> &[u8] {
        sub(self.buffer.as_ref(), 2, self.header_len())
    }

    /// Iterates the TLV options.
    pub fn iter_options(&self) -> Ipv6OptionIter<'_> {
        Ipv6OptionIter { data: self.options(), failed: false }
    }
}

/// One hop-by-hop / destination option (RFC 8200 section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6Option<'a> {
    /// Type 0: one byte of padding.
    Pad1,
    /// Type 1: `n` bytes of padding (data length `n - 2`).
    PadN(usize),
    /// Type 5: router alert (RFC 2711) with its value.
    RouterAlert(u16),
    /// Type 0xC2: jumbo payload length (RFC 2675).
    Jumbo(u32),
    /// Anything else: type and data.
    Unknown {
        /// Option type.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

/// Iterator over TLV options; yields `Err` once on malformed data, then ends.
#[derive(Debug, Clone)]
pub struct Ipv6OptionIter<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for Ipv6OptionIter<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let (&kind, rest) = self.data.split_first()?;
        if kind == 0 {
            self.data = rest;
            return Some(Ok(Ipv6Option::Pad1));
        }
        let bad = |s: &mut Self, r| {
            s.failed = true;
            Some(Err(WireError::malformed("ipv6-opts", r)))
        };
        let Some((&len, rest)) = rest.split_first() else { return bad(self, "option without length") };
        let len = len as usize;
        if len > rest.len() {
            return bad(self, "option longer than header");
        }
        let (data, rest) = rest.split_at(len);
        self.data = rest;
        Some(Ok(match kind {
            1 => Ipv6Option::PadN(len + 2),
            5 if len == 2 => Ipv6Option::RouterAlert(be16(data, 0)),
            0xc2 if len == 4 => Ipv6Option::Jumbo(be32(data, 0)),
            5 | 0xc2 => return bad(self, "option of known type with wrong length"),
            kind => Ipv6Option::Unknown { kind, data },
        }))
    }
}

/// A hop-by-hop or destination options header as a value (options borrowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6OptionsRepr<'a> {
    /// Next header.
    pub next_header: IpProtocol,
    /// Option TLVs. [`emit`](Self::emit) appends Pad1/PadN so that the header
    /// is a multiple of 8 bytes.
    pub options: &'a [u8],
}

impl<'a> Ipv6OptionsRepr<'a> {
    /// Decodes a view (options kept raw, padding included).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(h: &'a Ipv6OptionsHeader<&'a T>) -> Result<Self> {
        let b = h.buffer.as_ref();
        check_len("ipv6-opts", 2, b.len())?;
        check_len("ipv6-opts", h.header_len(), b.len())?;
        Ok(Ipv6OptionsRepr { next_header: h.next_header(), options: &b[2..h.header_len()] })
    }

    /// `2 + options` rounded up to 8.
    pub const fn header_len(&self) -> usize {
        (2 + self.options.len()).div_ceil(8) * 8
    }

    /// Writes the header (with padding) into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let hl = self.header_len();
        if hl > 2048 {
            return Err(WireError::malformed("ipv6-opts", "options longer than 2046 bytes"));
        }
        check_len("ipv6-opts", hl, buf.len())?;
        buf[0] = self.next_header.0;
        buf[1] = (hl / 8 - 1) as u8;
        let end = 2 + self.options.len();
        buf[2..end].copy_from_slice(self.options);
        match hl - end {
            0 => {}
            1 => buf[end] = 0,
            n => {
                buf[end] = 1;
                buf[end + 1] = (n - 2) as u8;
                buf[end + 2..hl].fill(0);
            }
        }
        Ok(hl)
    }
}

/// Zero-copy view of a Routing header (43): `next(1) len(1) type(1)
/// segments_left(1) data(len*8+4)`.
#[derive(Debug, Clone)]
pub struct Ipv6RoutingHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6RoutingHeader<T> {
    /// Wraps without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6RoutingHeader { buffer }
    }

    /// Wraps after checking the whole header is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        let len = h.buffer.as_ref().len();
        check_len("ipv6-route", 2, len)?;
        check_len("ipv6-route", h.header_len(), len)?;
        Ok(h)
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[1] as usize + 1) * 8
    }

    /// Routing type.
    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[2]
    }

    /// Segments left.
    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// Type-specific data (from byte 4).
    pub fn data(&self) -> &[u8] {
        sub(self.buffer.as_ref(), 4, self.header_len())
    }
}

/// A Routing header as a value (type-specific data borrowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6RoutingRepr<'a> {
    /// Next header.
    pub next_header: IpProtocol,
    /// Routing type.
    pub routing_type: u8,
    /// Segments left.
    pub segments_left: u8,
    /// Type-specific data; its length must be `8k + 4`.
    pub data: &'a [u8],
}

impl<'a> Ipv6RoutingRepr<'a> {
    /// Decodes a view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(h: &'a Ipv6RoutingHeader<&'a T>) -> Result<Self> {
        let b = h.buffer.as_ref();
        check_len("ipv6-route", 2, b.len())?;
        check_len("ipv6-route", h.header_len(), b.len())?;
        Ok(Ipv6RoutingRepr {
            next_header: h.next_header(),
            routing_type: h.routing_type(),
            segments_left: h.segments_left(),
            data: &b[4..h.header_len()],
        })
    }

    /// `4 + data`.
    pub const fn header_len(&self) -> usize {
        4 + self.data.len()
    }

    /// Writes the header; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let hl = self.header_len();
        if !hl.is_multiple_of(8) || hl > 2048 {
            return Err(WireError::malformed("ipv6-route", "data length is not 8k+4 (up to 2044)"));
        }
        check_len("ipv6-route", hl, buf.len())?;
        buf[0] = self.next_header.0;
        buf[1] = (hl / 8 - 1) as u8;
        buf[2] = self.routing_type;
        buf[3] = self.segments_left;
        buf[4..hl].copy_from_slice(self.data);
        Ok(hl)
    }
}

/// Zero-copy view of a Fragment header (44): `next(1) reserved(1)
/// offset(13 bits) res(2) M(1) identification(4)`.
#[derive(Debug, Clone)]
pub struct Ipv6FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6FragmentHeader<T> {
    /// Wraps without checks.
    pub const fn new_unchecked(buffer: T) -> Self {
        Ipv6FragmentHeader { buffer }
    }

    /// Wraps after checking 8 bytes are present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Self::new_unchecked(buffer);
        check_len("ipv6-frag", IPV6_FRAGMENT_HEADER_LEN, h.buffer.as_ref().len())?;
        Ok(h)
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[0])
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        be16(self.buffer.as_ref(), 2) & 0xfff8
    }

    /// M flag.
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), 2) & 1 != 0
    }

    /// Identification.
    pub fn ident(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// Offset, M flag, identification.
    pub fn fragment_info(&self) -> FragmentInfo {
        FragmentInfo { offset: self.frag_offset(), more_fragments: self.more_frags(), ident: self.ident() }
    }
}

/// A Fragment header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6FragmentRepr {
    /// Next header.
    pub next_header: IpProtocol,
    /// Offset in bytes (multiple of 8), M flag, identification.
    pub info: FragmentInfo,
}

impl Ipv6FragmentRepr {
    /// Decodes a view.
    pub fn parse<T: AsRef<[u8]>>(h: &Ipv6FragmentHeader<T>) -> Result<Self> {
        check_len("ipv6-frag", IPV6_FRAGMENT_HEADER_LEN, h.buffer.as_ref().len())?;
        Ok(Ipv6FragmentRepr { next_header: h.next_header(), info: h.fragment_info() })
    }

    /// Always 8.
    pub const fn header_len(&self) -> usize {
        IPV6_FRAGMENT_HEADER_LEN
    }

    /// Writes the header; returns 8.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        check_len("ipv6-frag", IPV6_FRAGMENT_HEADER_LEN, buf.len())?;
        if !self.info.offset.is_multiple_of(8) {
            return Err(WireError::malformed("ipv6-frag", "fragment offset not a multiple of 8"));
        }
        buf[0] = self.next_header.0;
        buf[1] = 0;
        put_u16(buf, 2, self.info.offset | self.info.more_fragments as u16);
        put_u32(buf, 4, self.info.ident);
        Ok(IPV6_FRAGMENT_HEADER_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(next: IpProtocol, payload_len: usize) -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "2001:db8::1".parse().unwrap(),
            dst_addr: "2001:db8::2".parse().unwrap(),
            next_header: next,
            payload_len,
            hop_limit: 64,
            traffic_class: 0xb8 | 1,
            flow_label: 0x12345,
        }
    }

    /// Fixed header + HBH(router alert) + routing(type 4, 16 bytes data...) + frag + dstopts + 8 bytes "TCP".
    fn chained(frag_offset: u16) -> Vec<u8> {
        let mut ext = vec![0u8; 200];
        let mut off = 0;
        off += Ipv6OptionsRepr { next_header: IpProtocol::IPV6_ROUTING, options: &[5, 2, 0, 0] }
            .emit(&mut ext[off..])
            .unwrap();
        off += Ipv6RoutingRepr {
            next_header: IpProtocol::IPV6_FRAGMENT,
            routing_type: 4,
            segments_left: 0,
            data: &[7; 20],
        }
        .emit(&mut ext[off..])
        .unwrap();
        off += Ipv6FragmentRepr {
            next_header: IpProtocol::IPV6_DEST_OPTS,
            info: FragmentInfo { offset: frag_offset, more_fragments: true, ident: 0xdeadbeef },
        }
        .emit(&mut ext[off..])
        .unwrap();
        off += Ipv6OptionsRepr { next_header: IpProtocol::TCP, options: &[] }.emit(&mut ext[off..]).unwrap();
        ext.truncate(off + 8);
        let mut v = vec![0u8; 40 + ext.len() + 6]; // + 6 bytes L2 padding
        repr(IpProtocol::HOP_BY_HOP, ext.len()).emit(&mut Ipv6Packet::new_unchecked(&mut v[..])).unwrap();
        v[40..40 + ext.len()].copy_from_slice(&ext);
        v
    }

    #[test]
    fn fixed_header_round_trip() {
        let r = repr(IpProtocol::UDP, 8);
        let mut v = vec![0u8; 48];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut v[..])).unwrap();
        assert_eq!(&v[..8], &[0x6b, 0x91, 0x23, 0x45, 0, 8, 17, 64]);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.ecn(), Ecn::Ect1);
        assert_eq!(p.dscp(), 0xb8 >> 2);
        assert_eq!(Ipv6Repr::parse(&p).unwrap(), r);
        let w = p.walk_ext_headers().unwrap();
        assert_eq!((w.upper_protocol, w.upper_offset, w.ext_count, w.fragment), (IpProtocol::UDP, 40, 0, None));
        let mut m = v.clone();
        let mut pm = Ipv6Packet::new_unchecked(&mut m[..]);
        pm.set_ecn(Ecn::Ce);
        pm.set_flow_label(0xfffff);
        assert_eq!((pm.traffic_class(), pm.flow_label(), pm.version()), (0xbb, 0xfffff, 6));
    }

    #[test]
    fn walker_follows_chain() {
        let v = chained(0);
        let p = Ipv6Packet::new_checked(&v[..]).unwrap();
        assert_eq!(p.padding().len(), 6);
        let w = p.walk_ext_headers().unwrap();
        assert_eq!(w.upper_protocol, IpProtocol::TCP);
        assert_eq!(w.ext_count, 4);
        assert_eq!(w.upper_offset, 40 + 8 + 24 + 8 + 8);
        let f = w.fragment.unwrap();
        assert_eq!(f.header_offset, 40 + 8 + 24);
        assert_eq!(f.info, FragmentInfo { offset: 0, more_fragments: true, ident: 0xdeadbeef });
        assert!(w.is_fragment());
        // The views of each header.
        let h = Ipv6OptionsHeader::new_checked(&v[40..]).unwrap();
        let opts: Vec<_> = h.iter_options().collect::<Result<_>>().unwrap();
        assert_eq!(opts, vec![Ipv6Option::RouterAlert(0), Ipv6Option::PadN(2)]);
        let r = Ipv6RoutingHeader::new_checked(&v[48..]).unwrap();
        assert_eq!((r.routing_type(), r.segments_left(), r.header_len(), r.data().len()), (4, 0, 24, 20));
        let fr = Ipv6FragmentHeader::new_checked(&v[72..]).unwrap();
        assert_eq!(Ipv6FragmentRepr::parse(&fr).unwrap().next_header, IpProtocol::IPV6_DEST_OPTS);
    }

    #[test]
    fn walker_stops_at_non_first_fragment() {
        let v = chained(1448);
        let w = Ipv6Packet::new_checked(&v[..]).unwrap().walk_ext_headers().unwrap();
        assert_eq!(w.upper_protocol, IpProtocol::IPV6_DEST_OPTS);
        assert_eq!(w.upper_offset, 40 + 8 + 24 + 8);
        assert_eq!(w.fragment.unwrap().info.offset, 1448);
    }

    #[test]
    fn walker_errors() {
        // Truncated routing header (payload length cuts it).
        let mut v = chained(0);
        v[4..6].copy_from_slice(&20u16.to_be_bytes());
        let e = Ipv6Packet::new_checked(&v[..]).unwrap().walk_ext_headers().unwrap_err();
        assert_eq!(e, WireError::truncated("ipv6-route", 72, 60));
        // HBH not first.
        let mut v = chained(0);
        v[48] = 0; // routing header's next header -> HBH
        let e = Ipv6Packet::new_checked(&v[..]).unwrap().walk_ext_headers().unwrap_err();
        assert_eq!(e, WireError::malformed("ipv6-hopopts", "hop-by-hop header not first"));
        // 17 destination-options headers.
        let mut v = [0u8; 40 + 17 * 8];
        repr(IpProtocol::IPV6_DEST_OPTS, 17 * 8).emit(&mut Ipv6Packet::new_unchecked(&mut v[..])).unwrap();
        for i in 0..17 {
            v[40 + 8 * i] = if i == 16 { 59 } else { 60 };
        }
        let e = Ipv6Packet::new_checked(&v[..]).unwrap().walk_ext_headers().unwrap_err();
        assert!(matches!(e, WireError::Unsupported { .. }), "{e}");
        v[40 + 8 * 15] = 59;
        let w = Ipv6Packet::new_checked(&v[..]).unwrap().walk_ext_headers().unwrap();
        assert_eq!((w.ext_count, w.upper_protocol), (16, IpProtocol::IPV6_NO_NEXT));
        // Two fragment headers.
        let mut v = [0u8; 56];
        repr(IpProtocol::IPV6_FRAGMENT, 16).emit(&mut Ipv6Packet::new_unchecked(&mut v[..])).unwrap();
        v[40] = 44;
        v[48] = 6;
        let e = Ipv6Packet::new_checked(&v[..]).unwrap().walk_ext_headers().unwrap_err();
        assert_eq!(e, WireError::malformed("ipv6-frag", "more than one fragment header"));
    }

    #[test]
    fn header_errors() {
        let mut v = vec![0u8; 48];
        repr(IpProtocol::UDP, 8).emit(&mut Ipv6Packet::new_unchecked(&mut v[..])).unwrap();
        assert_eq!(Ipv6Packet::new_checked(&v[..39]).unwrap_err(), WireError::truncated("ipv6", 40, 39));
        assert_eq!(Ipv6Packet::new_checked(&v[..47]).unwrap_err(), WireError::truncated("ipv6", 48, 47));
        let mut w = v.clone();
        w[0] = 0x45;
        assert_eq!(Ipv6Packet::new_checked(&w[..]).unwrap_err(), WireError::malformed("ipv6", "version is not 6"));
        let mut w = v.clone();
        w[4] = 0;
        w[5] = 0;
        w[6] = 0;
        assert!(matches!(Ipv6Packet::new_checked(&w[..]), Err(WireError::Unsupported { .. })));
        let bad = [5u8, 3, 0, 0];
        let mut it = Ipv6OptionIter { data: &bad, failed: false };
        assert!(it.next().unwrap().is_err());
        assert!(it.next().is_none());
        assert!(
            Ipv6RoutingRepr { next_header: IpProtocol::TCP, routing_type: 0, segments_left: 0, data: &[0; 5] }
                .emit(&mut [0u8; 16])
                .is_err()
        );
    }
}
