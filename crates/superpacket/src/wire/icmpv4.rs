//! ICMP for IPv4 (RFC 792), with what a router needs: destination
//! unreachable incl. fragmentation needed (type 3 code 4, next-hop MTU from
//! RFC 1191), time exceeded (type 11, codes 0 and 1), parameter problem
//! (type 12, pointer), echo request/reply.
//!
//! Invariant: after [`Icmpv4Packet::new_checked`] (8 bytes present) every
//! accessor is in bounds. The checksum covers the whole ICMP message, no
//! pseudo-header. Error messages quote the offending datagram: at least its
//! IP header and first 8 payload bytes (RFC 792), by default as much as fits
//! in a 576-byte IP packet (RFC 1812 section 4.3.2.3, as Linux does); see
//! [`icmpv4_quote`].

use std::net::Ipv4Addr;

use super::error::{Result, check_len};
use super::field::be16;
use super::ip::IpProtocol;
use super::ipv4::{IPV4_HEADER_LEN, Ipv4Options, Ipv4Packet, Ipv4Repr};
use super::{put_u16, sub};
use crate::csum;

/// Length of the ICMP header (type, code, checksum, 4 type-specific bytes).
pub const ICMPV4_HEADER_LEN: usize = 8;
/// Largest IP packet carrying an ICMP error (RFC 1812 4.3.2.3).
pub const ICMPV4_ERROR_MAX_IP_LEN: usize = 576;

/// Type 0: echo reply.
pub const TYPE_ECHO_REPLY: u8 = 0;
/// Type 3: destination unreachable.
pub const TYPE_DST_UNREACHABLE: u8 = 3;
/// Type 5: redirect.
pub const TYPE_REDIRECT: u8 = 5;
/// Type 8: echo request.
pub const TYPE_ECHO_REQUEST: u8 = 8;
/// Type 11: time exceeded.
pub const TYPE_TIME_EXCEEDED: u8 = 11;
/// Type 12: parameter problem.
pub const TYPE_PARAM_PROBLEM: u8 = 12;

/// Type 3 code 0: net unreachable.
pub const UNREACH_NET: u8 = 0;
/// Type 3 code 1: host unreachable.
pub const UNREACH_HOST: u8 = 1;
/// Type 3 code 2: protocol unreachable.
pub const UNREACH_PROTOCOL: u8 = 2;
/// Type 3 code 3: port unreachable.
pub const UNREACH_PORT: u8 = 3;
/// Type 3 code 4: fragmentation needed and DF set (carries the next-hop MTU).
pub const UNREACH_FRAG_NEEDED: u8 = 4;
/// Type 3 code 13: communication administratively prohibited (RFC 1812).
pub const UNREACH_ADMIN_PROHIBITED: u8 = 13;
/// Type 11 code 0: TTL exceeded in transit.
pub const TIME_EXCEEDED_TTL: u8 = 0;
/// Type 11 code 1: fragment reassembly time exceeded.
pub const TIME_EXCEEDED_REASSEMBLY: u8 = 1;

/// How much of the offending datagram an error message quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4QuoteLen {
    /// IP header + 8 bytes (RFC 792 minimum).
    Rfc792,
    /// As much as fits in a 576-byte IP packet (RFC 1812; Linux's choice).
    Rfc1812,
}

/// The part of `offending` (an IPv4 datagram starting at its header) that an
/// ICMP error quotes. Bounded by the datagram's total length when readable,
/// so L2 padding is never quoted. Never panics.
pub fn icmpv4_quote(offending: &[u8], how: Icmpv4QuoteLen) -> &[u8] {
    let mut end = offending.len();
    let mut hl = IPV4_HEADER_LEN;
    if offending.len() >= IPV4_HEADER_LEN && offending[0] >> 4 == 4 {
        hl = ((offending[0] & 0x0f) as usize * 4).max(IPV4_HEADER_LEN);
        let total = be16(offending, 2) as usize;
        if total >= hl {
            end = end.min(total);
        }
    }
    let max = match how {
        Icmpv4QuoteLen::Rfc792 => hl + 8,
        Icmpv4QuoteLen::Rfc1812 => ICMPV4_ERROR_MAX_IP_LEN - IPV4_HEADER_LEN - ICMPV4_HEADER_LEN,
    };
    sub(offending, 0, end.min(max))
}

/// Zero-copy view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    view_constructors! {
        /// Wraps without checks.
        fn new_unchecked;
        /// Wraps after checking that the 8-byte header is present.
        fn new_checked;
    }

    /// Ensures 8 bytes are present.
    pub fn check_len(&self) -> Result<()> {
        check_len("icmpv4", ICMPV4_HEADER_LEN, self.buffer.as_ref().len())
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Bytes 4..8 (type specific).
    pub fn rest_of_header(&self) -> [u8; 4] {
        let b = self.buffer.as_ref();
        [b[4], b[5], b[6], b[7]]
    }

    /// Echo identifier (bytes 4..6).
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// Echo sequence number (bytes 6..8).
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// Next-hop MTU of a "fragmentation needed" (bytes 6..8, RFC 1191).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// Parameter-problem pointer (byte 4).
    pub fn pointer(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// Everything after the 8-byte header (echo data or quoted datagram).
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        sub(b, ICMPV4_HEADER_LEN, b.len())
    }

    /// True when the checksum over the whole buffer verifies.
    pub fn verify_checksum(&self) -> bool {
        csum::ones_sum(self.buffer.as_ref()) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Sets the type.
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Sets the code.
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[1] = v;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets bytes 4..8.
    pub fn set_rest_of_header(&mut self, v: [u8; 4]) {
        self.buffer.as_mut()[4..8].copy_from_slice(&v);
    }

    /// Recomputes the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = csum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// A decoded ICMPv4 message. Variable data is borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Type 8.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Type 0.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Echo data.
        data: &'a [u8],
    },
    /// Type 3.
    DstUnreachable {
        /// Code (`UNREACH_*`).
        code: u8,
        /// Next-hop MTU for code 4 (bytes 6..8; 0 for other codes).
        next_hop_mtu: u16,
        /// Quoted datagram.
        quote: &'a [u8],
    },
    /// Type 11.
    TimeExceeded {
        /// 0 = TTL, 1 = fragment reassembly.
        code: u8,
        /// Quoted datagram.
        quote: &'a [u8],
    },
    /// Type 12.
    ParamProblem {
        /// Code (0 = pointer indicates the error).
        code: u8,
        /// Offset of the offending octet in the quoted header.
        pointer: u8,
        /// Quoted datagram.
        quote: &'a [u8],
    },
    /// Any other type, kept raw.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Bytes 4..8.
        rest: [u8; 4],
        /// Bytes after the header.
        data: &'a [u8],
    },
}

impl<'a> Icmpv4Repr<'a> {
    /// Decodes a message (checksum not checked; see
    /// [`Icmpv4Packet::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &'a Icmpv4Packet<&'a T>) -> Result<Icmpv4Repr<'a>> {
        p.check_len()?;
        let data = &p.buffer.as_ref()[ICMPV4_HEADER_LEN..];
        Ok(match p.msg_type() {
            TYPE_ECHO_REQUEST if p.code() == 0 => {
                Icmpv4Repr::EchoRequest { ident: p.echo_ident(), seq_no: p.echo_seq_no(), data }
            }
            TYPE_ECHO_REPLY if p.code() == 0 => {
                Icmpv4Repr::EchoReply { ident: p.echo_ident(), seq_no: p.echo_seq_no(), data }
            }
            TYPE_DST_UNREACHABLE if p.rest_of_header()[..2] == [0, 0] => {
                Icmpv4Repr::DstUnreachable { code: p.code(), next_hop_mtu: p.next_hop_mtu(), quote: data }
            }
            TYPE_TIME_EXCEEDED if p.rest_of_header() == [0; 4] => {
                Icmpv4Repr::TimeExceeded { code: p.code(), quote: data }
            }
            TYPE_PARAM_PROBLEM if p.rest_of_header()[1..] == [0; 3] => {
                Icmpv4Repr::ParamProblem { code: p.code(), pointer: p.pointer(), quote: data }
            }
            t => Icmpv4Repr::Other { msg_type: t, code: p.code(), rest: p.rest_of_header(), data },
        })
    }

    /// Destination unreachable quoting `offending` (RFC 1812 length).
    pub fn dst_unreachable(code: u8, offending: &'a [u8]) -> Self {
        Icmpv4Repr::DstUnreachable { code, next_hop_mtu: 0, quote: icmpv4_quote(offending, Icmpv4QuoteLen::Rfc1812) }
    }

    /// "Fragmentation needed and DF set" (type 3 code 4) with the next-hop MTU.
    pub fn frag_needed(next_hop_mtu: u16, offending: &'a [u8]) -> Self {
        Icmpv4Repr::DstUnreachable {
            code: UNREACH_FRAG_NEEDED,
            next_hop_mtu,
            quote: icmpv4_quote(offending, Icmpv4QuoteLen::Rfc1812),
        }
    }

    /// Time exceeded (code 0 TTL, 1 reassembly) quoting `offending`.
    pub fn time_exceeded(code: u8, offending: &'a [u8]) -> Self {
        Icmpv4Repr::TimeExceeded { code, quote: icmpv4_quote(offending, Icmpv4QuoteLen::Rfc1812) }
    }

    /// Parameter problem (code 0) pointing at octet `pointer` of `offending`.
    pub fn param_problem(pointer: u8, offending: &'a [u8]) -> Self {
        Icmpv4Repr::ParamProblem { code: 0, pointer, quote: icmpv4_quote(offending, Icmpv4QuoteLen::Rfc1812) }
    }

    /// The echo reply answering an echo request (`None` for anything else).
    pub fn echo_reply_to(&self) -> Option<Icmpv4Repr<'a>> {
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } => Some(Icmpv4Repr::EchoReply { ident, seq_no, data }),
            _ => None,
        }
    }

    /// True for error messages (types 3, 4, 5, 11, 12): never answered with
    /// another error (RFC 1122 3.2.2).
    pub fn is_error(&self) -> bool {
        match self {
            Icmpv4Repr::DstUnreachable { .. } | Icmpv4Repr::TimeExceeded { .. } | Icmpv4Repr::ParamProblem { .. } => {
                true
            }
            Icmpv4Repr::Other { msg_type, .. } => matches!(msg_type, 3 | 4 | 5 | 11 | 12),
            _ => false,
        }
    }

    fn parts(&self) -> (u8, u8, [u8; 4], &'a [u8]) {
        match *self {
            Icmpv4Repr::EchoRequest { ident, seq_no, data } => (TYPE_ECHO_REQUEST, 0, echo_rest(ident, seq_no), data),
            Icmpv4Repr::EchoReply { ident, seq_no, data } => (TYPE_ECHO_REPLY, 0, echo_rest(ident, seq_no), data),
            Icmpv4Repr::DstUnreachable { code, next_hop_mtu, quote } => {
                let m = next_hop_mtu.to_be_bytes();
                (TYPE_DST_UNREACHABLE, code, [0, 0, m[0], m[1]], quote)
            }
            Icmpv4Repr::TimeExceeded { code, quote } => (TYPE_TIME_EXCEEDED, code, [0; 4], quote),
            Icmpv4Repr::ParamProblem { code, pointer, quote } => (TYPE_PARAM_PROBLEM, code, [pointer, 0, 0, 0], quote),
            Icmpv4Repr::Other { msg_type, code, rest, data } => (msg_type, code, rest, data),
        }
    }

    /// Message length: 8 + data.
    pub fn buffer_len(&self) -> usize {
        ICMPV4_HEADER_LEN + self.parts().3.len()
    }

    /// Writes the message and its checksum into the first
    /// [`buffer_len`](Self::buffer_len) bytes of the view's buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Icmpv4Packet<T>) -> Result<()> {
        let (t, code, rest, data) = self.parts();
        let n = ICMPV4_HEADER_LEN + data.len();
        let b = p.buffer.as_mut();
        check_len("icmpv4", n, b.len())?;
        let mut m = Icmpv4Packet::new_unchecked(&mut b[..n]);
        m.set_msg_type(t);
        m.set_code(code);
        m.set_rest_of_header(rest);
        m.buffer[ICMPV4_HEADER_LEN..].copy_from_slice(data);
        m.fill_checksum();
        Ok(())
    }

    /// Writes a complete IPv4 packet (20-byte header, protocol 1, DF clear)
    /// carrying this message into `buf`; returns its length.
    pub fn emit_ipv4_packet(&self, src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, buf: &mut [u8]) -> Result<usize> {
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: IpProtocol::ICMP,
            payload_len: self.buffer_len(),
            ttl,
            tos: 0,
            ident: 0,
            dont_frag: false,
            more_frags: false,
            frag_offset: 0,
            options: Ipv4Options::NONE,
        };
        let total = ip.buffer_len();
        check_len("icmpv4", total, buf.len())?;
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..total]))?;
        self.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[IPV4_HEADER_LEN..total]))?;
        Ok(total)
    }
}

fn echo_rest(ident: u16, seq: u16) -> [u8; 4] {
    let (i, s) = (ident.to_be_bytes(), seq.to_be_bytes());
    [i[0], i[1], s[0], s[1]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::WireError;

    // `ping -c1 -p 61` style echo request: id 0x1234 seq 1, 8 data bytes;
    // checksum computed independently.
    const ECHO: [u8; 16] = [8, 0, 0x54, 0x35, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h'];

    #[test]
    fn echo() {
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(r, Icmpv4Repr::EchoRequest { ident: 0x1234, seq_no: 1, data: b"abcdefgh" });
        let mut out = [0u8; 16];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..])).unwrap();
        assert!(Icmpv4Packet::new_checked(&out[..]).unwrap().verify_checksum());
        assert_eq!(out, ECHO, "checksum {:02x}{:02x}", out[2], out[3]);
        let reply = r.echo_reply_to().unwrap();
        assert!(!reply.is_error());
        assert_eq!(reply.buffer_len(), 16);
    }

    fn offending(len: usize, pad: usize) -> Vec<u8> {
        let mut v = vec![0u8; len + pad];
        Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IpProtocol::UDP,
            payload_len: len - 24,
            ttl: 1,
            tos: 0,
            ident: 7,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            options: Ipv4Options::new(&[1, 1, 1, 0]).unwrap(),
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut v[..]))
        .unwrap();
        v
    }

    #[test]
    fn quotes() {
        let big = offending(1500, 0);
        assert_eq!(icmpv4_quote(&big, Icmpv4QuoteLen::Rfc792).len(), 24 + 8);
        assert_eq!(icmpv4_quote(&big, Icmpv4QuoteLen::Rfc1812).len(), 548);
        let small = offending(30, 16); // padded frame: only 30 bytes quoted
        assert_eq!(icmpv4_quote(&small, Icmpv4QuoteLen::Rfc1812).len(), 30);
        assert_eq!(icmpv4_quote(&small, Icmpv4QuoteLen::Rfc792).len(), 30);
        assert_eq!(icmpv4_quote(&[0x4f, 0], Icmpv4QuoteLen::Rfc792).len(), 2);
        let e = Icmpv4Repr::frag_needed(1400, &big);
        let mut buf = [0u8; 600];
        let n = e.emit_ipv4_packet(Ipv4Addr::new(10, 0, 0, 254), Ipv4Addr::new(10, 0, 0, 1), 64, &mut buf).unwrap();
        assert_eq!(n, 576);
        let ip = Ipv4Packet::new_checked(&buf[..n]).unwrap();
        assert!(ip.verify_checksum());
        let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum());
        assert_eq!((icmp.msg_type(), icmp.code(), icmp.next_hop_mtu()), (3, 4, 1400));
        assert_eq!(Icmpv4Repr::parse(&icmp).unwrap(), e);
        assert!(e.is_error());
    }

    #[test]
    fn error_kinds_round_trip() {
        let off = offending(100, 0);
        for r in [
            Icmpv4Repr::dst_unreachable(UNREACH_PORT, &off),
            Icmpv4Repr::time_exceeded(TIME_EXCEEDED_REASSEMBLY, &off),
            Icmpv4Repr::param_problem(20, &off),
            Icmpv4Repr::Other { msg_type: 13, code: 0, rest: [1, 2, 3, 4], data: &[9; 12] },
        ] {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..])).unwrap();
            let p = Icmpv4Packet::new_checked(&buf[..]).unwrap();
            assert!(p.verify_checksum());
            assert_eq!(Icmpv4Repr::parse(&p).unwrap(), r);
        }
        assert_eq!(Icmpv4Packet::new_checked(&[0u8; 7][..]).unwrap_err(), WireError::truncated("icmpv4", 8, 7));
        let r = Icmpv4Repr::time_exceeded(0, &off);
        assert!(r.emit(&mut Icmpv4Packet::new_unchecked(&mut [0u8; 20][..])).is_err());
    }
}
