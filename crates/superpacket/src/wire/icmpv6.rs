//! ICMP for IPv6 (RFC 4443) and the Neighbor Discovery messages a router
//! needs (RFC 4861 neighbor solicitation 135 / advertisement 136 with the
//! source/target link-layer address options).
//!
//! Invariant: after [`Icmpv6Packet::new_checked`] (8 bytes present) every
//! accessor is in bounds; accessors of longer messages (the ND target) return
//! `Option`. The checksum covers the IPv6 pseudo-header (RFC 8200 8.1, next
//! header 58) and the whole message. Error messages quote as much of the
//! offending packet as fits in a 1280-byte IPv6 packet (RFC 4443 2.4 (c));
//! see [`icmpv6_quote`].

use std::net::Ipv6Addr;

use super::error::{Result, WireError, check_len};
use super::ethernet::MacAddr;
use super::field::{be16, be32};
use super::ip::IpProtocol;
use super::ipv6::{IPV6_HEADER_LEN, IPV6_MIN_MTU, Ipv6Packet, Ipv6Repr};
use super::{put_u16, put_u32, sub};
use crate::csum;

/// Length of the common header plus the 4 type-specific bytes.
pub const ICMPV6_HEADER_LEN: usize = 8;
/// Length of a neighbor solicitation/advertisement without options.
pub const ND_HEADER_LEN: usize = 24;

/// Type 1: destination unreachable.
pub const TYPE_DST_UNREACHABLE: u8 = 1;
/// Type 2: packet too big.
pub const TYPE_PACKET_TOO_BIG: u8 = 2;
/// Type 3: time exceeded.
pub const TYPE_TIME_EXCEEDED: u8 = 3;
/// Type 4: parameter problem.
pub const TYPE_PARAM_PROBLEM: u8 = 4;
/// Type 128: echo request.
pub const TYPE_ECHO_REQUEST: u8 = 128;
/// Type 129: echo reply.
pub const TYPE_ECHO_REPLY: u8 = 129;
/// Type 133: router solicitation.
pub const TYPE_ROUTER_SOLICIT: u8 = 133;
/// Type 134: router advertisement.
pub const TYPE_ROUTER_ADVERT: u8 = 134;
/// Type 135: neighbor solicitation.
pub const TYPE_NEIGHBOR_SOLICIT: u8 = 135;
/// Type 136: neighbor advertisement.
pub const TYPE_NEIGHBOR_ADVERT: u8 = 136;

/// Type 1 code 0: no route to destination.
pub const UNREACH_NO_ROUTE: u8 = 0;
/// Type 1 code 1: administratively prohibited.
pub const UNREACH_ADMIN_PROHIBITED: u8 = 1;
/// Type 1 code 3: address unreachable.
pub const UNREACH_ADDRESS: u8 = 3;
/// Type 1 code 4: port unreachable.
pub const UNREACH_PORT: u8 = 4;
/// Type 3 code 0: hop limit exceeded in transit.
pub const TIME_EXCEEDED_HOP_LIMIT: u8 = 0;
/// Type 3 code 1: fragment reassembly time exceeded.
pub const TIME_EXCEEDED_REASSEMBLY: u8 = 1;
/// Type 4 code 0: erroneous header field.
pub const PARAM_PROBLEM_HEADER_FIELD: u8 = 0;
/// Type 4 code 1: unrecognised next header.
pub const PARAM_PROBLEM_NEXT_HEADER: u8 = 1;
/// Type 4 code 2: unrecognised IPv6 option.
pub const PARAM_PROBLEM_OPTION: u8 = 2;
/// Type 4 code 3: first fragment has an incomplete header chain (RFC 7112).
pub const PARAM_PROBLEM_INCOMPLETE_CHAIN: u8 = 3;

/// NDP option 1: source link-layer address.
pub const NDP_OPT_SOURCE_LLADDR: u8 = 1;
/// NDP option 2: target link-layer address.
pub const NDP_OPT_TARGET_LLADDR: u8 = 2;

const NA_ROUTER: u8 = 0x80;
const NA_SOLICITED: u8 = 0x40;
const NA_OVERRIDE: u8 = 0x20;

/// The part of `offending` (an IPv6 packet starting at its header) that an
/// ICMPv6 error quotes: as much as keeps the error within 1280 bytes, and
/// never beyond the packet's payload length (so L2 padding is not quoted).
pub fn icmpv6_quote(offending: &[u8]) -> &[u8] {
    let mut end = offending.len();
    if offending.len() >= IPV6_HEADER_LEN && offending[0] >> 4 == 6 {
        end = end.min(IPV6_HEADER_LEN + be16(offending, 4) as usize);
    }
    sub(offending, 0, end.min(IPV6_MIN_MTU - IPV6_HEADER_LEN - ICMPV6_HEADER_LEN))
}

/// Zero-copy view of an ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
    view_constructors! {
        /// Wraps without checks.
        fn new_unchecked;
        /// Wraps after checking 8 bytes are present.
        fn new_checked;
    }

    /// Ensures 8 bytes are present.
    pub fn check_len(&self) -> Result<()> {
        check_len("icmpv6", ICMPV6_HEADER_LEN, self.buffer.as_ref().len())
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

    /// Bytes 4..8 as a u32 (MTU of packet-too-big, pointer of parameter problem).
    pub fn word1(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }

    /// Packet-too-big MTU.
    pub fn mtu(&self) -> u32 {
        self.word1()
    }

    /// Parameter-problem pointer.
    pub fn pointer(&self) -> u32 {
        self.word1()
    }

    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// Neighbor advertisement flags byte (R, S, O in the top bits).
    pub fn nd_flags(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// ND target address (bytes 8..24), if present.
    pub fn nd_target_addr(&self) -> Option<Ipv6Addr> {
        let b: [u8; 16] = self.buffer.as_ref().get(8..24)?.try_into().ok()?;
        Some(Ipv6Addr::from(b))
    }

    /// NDP options of a solicitation/advertisement (after byte 24).
    pub fn nd_options(&self) -> NdpOptionIter<'_> {
        let b = self.buffer.as_ref();
        NdpOptionIter { data: sub(b, ND_HEADER_LEN, b.len()), failed: false }
    }

    /// Everything after the 8-byte header.
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        sub(b, ICMPV6_HEADER_LEN, b.len())
    }

    /// True when the checksum verifies for this source and destination.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let b = self.buffer.as_ref();
        let ph = csum::pseudo_header_v6(src.octets(), dst.octets(), IpProtocol::ICMPV6.0, b.len() as u32);
        csum::ones_add(ph, csum::ones_sum(b)) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
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
    pub fn set_word1(&mut self, v: u32) {
        put_u32(self.buffer.as_mut(), 4, v);
    }

    /// Computes and stores the checksum (pseudo-header + message).
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let ph = csum::pseudo_header_v6(src.octets(), dst.octets(), IpProtocol::ICMPV6.0, b.len() as u32);
        let c = !csum::ones_add(ph, csum::ones_sum(b));
        self.set_checksum(c);
    }
}

/// One Neighbor Discovery option (RFC 4861 section 4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NdpOption<'a> {
    /// Type 1: source link-layer address (bytes after type and length).
    SourceLinkLayerAddr(&'a [u8]),
    /// Type 2: target link-layer address.
    TargetLinkLayerAddr(&'a [u8]),
    /// Other option: type and data after type and length.
    Unknown {
        /// Option type.
        kind: u8,
        /// Option data.
        data: &'a [u8],
    },
}

impl NdpOption<'_> {
    /// The Ethernet address of a link-layer address option (6 bytes of
    /// address; the option's padding is ignored).
    pub fn mac_addr(&self) -> Option<MacAddr> {
        match self {
            NdpOption::SourceLinkLayerAddr(d) | NdpOption::TargetLinkLayerAddr(d) => MacAddr::from_slice(d),
            NdpOption::Unknown { .. } => None,
        }
    }
}

/// Iterator over NDP options; yields `Err` once (length 0 or overrun), then ends.
#[derive(Debug, Clone)]
pub struct NdpOptionIter<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for NdpOptionIter<'a> {
    type Item = Result<NdpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.data.is_empty() {
            return None;
        }
        let d = self.data;
        let err = match d {
            [_] => Some("option without length"),
            [_, 0, ..] => Some("option length 0"),
            [_, l, ..] if *l as usize * 8 > d.len() => Some("option runs past the message"),
            _ => None,
        };
        if let Some(reason) = err {
            self.failed = true;
            return Some(Err(WireError::malformed("ndp", reason)));
        }
        let n = d[1] as usize * 8;
        let (opt, rest) = d.split_at(n);
        self.data = rest;
        let body = &opt[2..];
        Some(Ok(match opt[0] {
            NDP_OPT_SOURCE_LLADDR => NdpOption::SourceLinkLayerAddr(body),
            NDP_OPT_TARGET_LLADDR => NdpOption::TargetLinkLayerAddr(body),
            kind => NdpOption::Unknown { kind, data: body },
        }))
    }
}

/// A decoded ICMPv6 message. Variable data is borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv6Repr<'a> {
    /// Type 1.
    DstUnreachable {
        /// Code (`UNREACH_*`).
        code: u8,
        /// Quoted packet.
        quote: &'a [u8],
    },
    /// Type 2.
    PacketTooBig {
        /// MTU of the next hop.
        mtu: u32,
        /// Quoted packet.
        quote: &'a [u8],
    },
    /// Type 3.
    TimeExceeded {
        /// 0 = hop limit, 1 = reassembly.
        code: u8,
        /// Quoted packet.
        quote: &'a [u8],
    },
    /// Type 4.
    ParamProblem {
        /// Code 0..3 (`PARAM_PROBLEM_*`).
        code: u8,
        /// Offset of the offending octet in the quoted packet.
        pointer: u32,
        /// Quoted packet.
        quote: &'a [u8],
    },
    /// Type 128.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Type 129.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Type 135 (options other than source link-layer address are dropped).
    NeighborSolicit {
        /// Address being resolved.
        target_addr: Ipv6Addr,
        /// Sender's MAC (absent for duplicate address detection).
        source_lladdr: Option<MacAddr>,
    },
    /// Type 136 (options other than target link-layer address are dropped).
    NeighborAdvert {
        /// R flag: sender is a router.
        router: bool,
        /// S flag: response to a solicitation.
        solicited: bool,
        /// O flag: override cached entries.
        override_: bool,
        /// Address advertised.
        target_addr: Ipv6Addr,
        /// MAC for the target.
        target_lladdr: Option<MacAddr>,
    },
    /// Any other type (or a known type with non-zero reserved bits), raw.
    Other {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// Everything after the checksum (from byte 4; at least 4 bytes to emit).
        data: &'a [u8],
    },
}

impl<'a> Icmpv6Repr<'a> {
    /// Decodes a message (checksum not checked; see
    /// [`Icmpv6Packet::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &'a Icmpv6Packet<&'a T>) -> Result<Icmpv6Repr<'a>> {
        p.check_len()?;
        let b = p.buffer.as_ref();
        let data = &b[ICMPV6_HEADER_LEN..];
        let (t, code, w1) = (p.msg_type(), p.code(), p.word1());
        Ok(match t {
            TYPE_DST_UNREACHABLE if w1 == 0 => Icmpv6Repr::DstUnreachable { code, quote: data },
            TYPE_PACKET_TOO_BIG if code == 0 => Icmpv6Repr::PacketTooBig { mtu: w1, quote: data },
            TYPE_TIME_EXCEEDED if w1 == 0 => Icmpv6Repr::TimeExceeded { code, quote: data },
            TYPE_PARAM_PROBLEM => Icmpv6Repr::ParamProblem { code, pointer: w1, quote: data },
            TYPE_ECHO_REQUEST if code == 0 => {
                Icmpv6Repr::EchoRequest { ident: p.echo_ident(), seq_no: p.echo_seq_no(), data }
            }
            TYPE_ECHO_REPLY if code == 0 => {
                Icmpv6Repr::EchoReply { ident: p.echo_ident(), seq_no: p.echo_seq_no(), data }
            }
            TYPE_NEIGHBOR_SOLICIT | TYPE_NEIGHBOR_ADVERT if code == 0 => {
                check_len("icmpv6-nd", ND_HEADER_LEN, b.len())?;
                let target_addr = p.nd_target_addr().unwrap_or(Ipv6Addr::UNSPECIFIED);
                let wanted = if t == TYPE_NEIGHBOR_SOLICIT { NDP_OPT_SOURCE_LLADDR } else { NDP_OPT_TARGET_LLADDR };
                let mut lladdr = None;
                for o in p.nd_options() {
                    let o = o?;
                    let kind = match o {
                        NdpOption::SourceLinkLayerAddr(_) => NDP_OPT_SOURCE_LLADDR,
                        NdpOption::TargetLinkLayerAddr(_) => NDP_OPT_TARGET_LLADDR,
                        NdpOption::Unknown { kind, .. } => kind,
                    };
                    if kind == wanted {
                        lladdr = o.mac_addr();
                    }
                }
                if t == TYPE_NEIGHBOR_SOLICIT {
                    Icmpv6Repr::NeighborSolicit { target_addr, source_lladdr: lladdr }
                } else {
                    let f = p.nd_flags();
                    Icmpv6Repr::NeighborAdvert {
                        router: f & NA_ROUTER != 0,
                        solicited: f & NA_SOLICITED != 0,
                        override_: f & NA_OVERRIDE != 0,
                        target_addr,
                        target_lladdr: lladdr,
                    }
                }
            }
            _ => Icmpv6Repr::Other { msg_type: t, code, data: &b[4..] },
        })
    }

    /// Destination unreachable quoting `offending`.
    pub fn dst_unreachable(code: u8, offending: &'a [u8]) -> Self {
        Icmpv6Repr::DstUnreachable { code, quote: icmpv6_quote(offending) }
    }

    /// Packet too big with the next-hop MTU.
    pub fn packet_too_big(mtu: u32, offending: &'a [u8]) -> Self {
        Icmpv6Repr::PacketTooBig { mtu, quote: icmpv6_quote(offending) }
    }

    /// Time exceeded (code 0 hop limit, 1 reassembly).
    pub fn time_exceeded(code: u8, offending: &'a [u8]) -> Self {
        Icmpv6Repr::TimeExceeded { code, quote: icmpv6_quote(offending) }
    }

    /// Parameter problem (codes 0..3) with a 32-bit pointer.
    pub fn param_problem(code: u8, pointer: u32, offending: &'a [u8]) -> Self {
        Icmpv6Repr::ParamProblem { code, pointer, quote: icmpv6_quote(offending) }
    }

    /// The echo reply answering an echo request.
    pub fn echo_reply_to(&self) -> Option<Icmpv6Repr<'a>> {
        match *self {
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => Some(Icmpv6Repr::EchoReply { ident, seq_no, data }),
            _ => None,
        }
    }

    /// True for error messages (types < 128, RFC 4443 2.1).
    pub fn is_error(&self) -> bool {
        self.msg_type() < 128
    }

    /// The message type.
    pub fn msg_type(&self) -> u8 {
        match self {
            Icmpv6Repr::DstUnreachable { .. } => TYPE_DST_UNREACHABLE,
            Icmpv6Repr::PacketTooBig { .. } => TYPE_PACKET_TOO_BIG,
            Icmpv6Repr::TimeExceeded { .. } => TYPE_TIME_EXCEEDED,
            Icmpv6Repr::ParamProblem { .. } => TYPE_PARAM_PROBLEM,
            Icmpv6Repr::EchoRequest { .. } => TYPE_ECHO_REQUEST,
            Icmpv6Repr::EchoReply { .. } => TYPE_ECHO_REPLY,
            Icmpv6Repr::NeighborSolicit { .. } => TYPE_NEIGHBOR_SOLICIT,
            Icmpv6Repr::NeighborAdvert { .. } => TYPE_NEIGHBOR_ADVERT,
            Icmpv6Repr::Other { msg_type, .. } => *msg_type,
        }
    }

    /// Message length.
    pub fn buffer_len(&self) -> usize {
        match self {
            Icmpv6Repr::DstUnreachable { quote, .. }
            | Icmpv6Repr::PacketTooBig { quote, .. }
            | Icmpv6Repr::TimeExceeded { quote, .. }
            | Icmpv6Repr::ParamProblem { quote, .. } => ICMPV6_HEADER_LEN + quote.len(),
            Icmpv6Repr::EchoRequest { data, .. } | Icmpv6Repr::EchoReply { data, .. } => ICMPV6_HEADER_LEN + data.len(),
            Icmpv6Repr::NeighborSolicit { source_lladdr: l, .. }
            | Icmpv6Repr::NeighborAdvert { target_lladdr: l, .. } => ND_HEADER_LEN + if l.is_some() { 8 } else { 0 },
            Icmpv6Repr::Other { data, .. } => 4 + data.len(),
        }
    }

    /// Writes the message with its checksum (for `src` -> `dst`) into the
    /// first [`buffer_len`](Self::buffer_len) bytes of the view's buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        p: &mut Icmpv6Packet<T>,
    ) -> Result<()> {
        let n = self.buffer_len();
        if n < ICMPV6_HEADER_LEN {
            return Err(WireError::malformed("icmpv6", "message shorter than 8 bytes"));
        }
        let b = p.buffer.as_mut();
        check_len("icmpv6", n, b.len())?;
        let b = &mut b[..n];
        b[0] = self.msg_type();
        b[2] = 0;
        b[3] = 0;
        let echo = |ident: u16, seq: u16| (ident as u32) << 16 | seq as u32;
        let (code, w1, tail): (u8, u32, &[u8]) = match *self {
            Icmpv6Repr::DstUnreachable { code, quote } | Icmpv6Repr::TimeExceeded { code, quote } => (code, 0, quote),
            Icmpv6Repr::PacketTooBig { mtu, quote } => (0, mtu, quote),
            Icmpv6Repr::ParamProblem { code, pointer, quote } => (code, pointer, quote),
            Icmpv6Repr::EchoRequest { ident, seq_no, data } | Icmpv6Repr::EchoReply { ident, seq_no, data } => {
                (0, echo(ident, seq_no), data)
            }
            Icmpv6Repr::NeighborSolicit { target_addr, source_lladdr } => {
                emit_nd(b, 0, target_addr, NDP_OPT_SOURCE_LLADDR, source_lladdr);
                (0, 0, &[])
            }
            Icmpv6Repr::NeighborAdvert { router, solicited, override_, target_addr, target_lladdr } => {
                let f = (router as u8 * NA_ROUTER) | (solicited as u8 * NA_SOLICITED) | (override_ as u8 * NA_OVERRIDE);
                emit_nd(b, f, target_addr, NDP_OPT_TARGET_LLADDR, target_lladdr);
                (0, (f as u32) << 24, &[])
            }
            Icmpv6Repr::Other { code, data, .. } => {
                b[1] = code;
                b[4..].copy_from_slice(data);
                let mut m = Icmpv6Packet::new_unchecked(b);
                m.fill_checksum(src, dst);
                return Ok(());
            }
        };
        b[1] = code;
        put_u32(b, 4, w1);
        if !tail.is_empty() {
            b[ICMPV6_HEADER_LEN..].copy_from_slice(tail);
        }
        Icmpv6Packet::new_unchecked(b).fill_checksum(src, dst);
        Ok(())
    }

    /// Writes a complete IPv6 packet (40-byte header, next header 58)
    /// carrying this message into `buf`; returns its length.
    pub fn emit_ipv6_packet(&self, src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, buf: &mut [u8]) -> Result<usize> {
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::ICMPV6,
            payload_len: self.buffer_len(),
            hop_limit,
            traffic_class: 0,
            flow_label: 0,
        };
        let total = ip.buffer_len();
        check_len("icmpv6", total, buf.len())?;
        ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..total]))?;
        self.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(&mut buf[IPV6_HEADER_LEN..total]))?;
        Ok(total)
    }
}

/// Writes the ND body: flags word, target and the optional lladdr option.
fn emit_nd(b: &mut [u8], flags: u8, target: Ipv6Addr, opt: u8, lladdr: Option<MacAddr>) {
    put_u32(b, 4, (flags as u32) << 24);
    b[8..24].copy_from_slice(&target.octets());
    if let Some(mac) = lladdr {
        b[24] = opt;
        b[25] = 1;
        b[26..32].copy_from_slice(&mac.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs() -> (Ipv6Addr, Ipv6Addr) {
        ("fe80::1".parse().unwrap(), "ff02::1:ff00:2".parse().unwrap())
    }

    /// A neighbor solicitation for fe80::2 from fe80::1 (52:54:00:12:34:56);
    /// checksum computed independently.
    const NS: [u8; 32] = [
        135, 0, 0xf5, 0xdb, 0, 0, 0, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 1, 0x52, 0x54, 0x00,
        0x12, 0x34, 0x56,
    ];

    #[test]
    fn neighbor_solicitation() {
        let (s, d) = addrs();
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        let r = Icmpv6Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv6Repr::NeighborSolicit {
                target_addr: "fe80::2".parse().unwrap(),
                source_lladdr: Some(MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]))
            }
        );
        let mut out = [0u8; 32];
        r.emit(&s, &d, &mut Icmpv6Packet::new_unchecked(&mut out[..])).unwrap();
        assert!(Icmpv6Packet::new_checked(&out[..]).unwrap().verify_checksum(&s, &d));
        assert_eq!(out, NS, "checksum {:02x}{:02x}", out[2], out[3]);
        assert!(p.verify_checksum(&s, &d));
        assert!(!p.verify_checksum(&s, &"ff02::1".parse().unwrap()));
    }

    #[test]
    fn advert_and_errors_round_trip() {
        let (s, d) = addrs();
        let off = vec![0x60u8; 2000];
        let na = Icmpv6Repr::NeighborAdvert {
            router: true,
            solicited: true,
            override_: false,
            target_addr: s,
            target_lladdr: Some(MacAddr([2, 0, 0, 0, 0, 9])),
        };
        for r in [
            na,
            Icmpv6Repr::NeighborSolicit { target_addr: d, source_lladdr: None },
            Icmpv6Repr::dst_unreachable(UNREACH_PORT, &off),
            Icmpv6Repr::packet_too_big(1280, &off),
            Icmpv6Repr::time_exceeded(TIME_EXCEEDED_REASSEMBLY, &off[..100]),
            Icmpv6Repr::param_problem(PARAM_PROBLEM_INCOMPLETE_CHAIN, 0x10002, &off[..48]),
            Icmpv6Repr::EchoRequest { ident: 1, seq_no: 2, data: b"xyz" },
            Icmpv6Repr::Other { msg_type: 200, code: 3, data: &[1, 2, 3, 4, 5] },
        ] {
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&s, &d, &mut Icmpv6Packet::new_unchecked(&mut buf[..])).unwrap();
            let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert!(p.verify_checksum(&s, &d), "{r:?}");
            assert_eq!(Icmpv6Repr::parse(&p).unwrap(), r);
        }
        assert_eq!(Icmpv6Repr::packet_too_big(1280, &off).buffer_len(), 1280 - 40);
    }

    #[test]
    fn quote_and_full_packet() {
        // Offending packet with payload length 100 inside a longer buffer.
        let mut off = vec![0u8; 200];
        off[0] = 0x60;
        off[4..6].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(icmpv6_quote(&off).len(), 140);
        let big = vec![0u8; 3000];
        assert_eq!(icmpv6_quote(&big).len(), 1232);
        let r = Icmpv6Repr::packet_too_big(1400, &big);
        let mut buf = [0u8; 1500];
        let (s, d) = addrs();
        let n = r.emit_ipv6_packet(s, d, 64, &mut buf).unwrap();
        assert_eq!(n, 1280);
        let ip = Ipv6Packet::new_checked(&buf[..n]).unwrap();
        let m = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert!(m.verify_checksum(&s, &d));
        assert_eq!(m.mtu(), 1400);
        assert!(r.is_error() && !Icmpv6Repr::EchoReply { ident: 0, seq_no: 0, data: &[] }.is_error());
    }

    #[test]
    fn malformed_nd() {
        let mut m = NS;
        m[25] = 0; // option length 0
        let p = Icmpv6Packet::new_checked(&m[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(WireError::malformed("ndp", "option length 0")));
        m[25] = 2; // runs past the end
        let p = Icmpv6Packet::new_checked(&m[..]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(WireError::malformed("ndp", "option runs past the message")));
        let p = Icmpv6Packet::new_checked(&NS[..20]).unwrap();
        assert_eq!(Icmpv6Repr::parse(&p), Err(WireError::truncated("icmpv6-nd", 24, 20)));
        assert_eq!(p.nd_target_addr(), None);
        assert_eq!(Icmpv6Packet::new_checked(&NS[..7]).unwrap_err(), WireError::truncated("icmpv6", 8, 7));
    }
}
