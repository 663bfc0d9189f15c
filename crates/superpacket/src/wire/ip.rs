//! Items shared by IPv4 and IPv6: protocol numbers, the IP version and ECN.

use core::fmt;

/// An IP protocol / IPv6 next-header number (IANA "Assigned Internet Protocol
/// Numbers"). A newtype rather than an enum so that every value round-trips.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 Hop-by-Hop Options header (RFC 8200 section 4.3).
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    /// ICMP for IPv4 (RFC 792).
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// IGMP (RFC 3376).
    pub const IGMP: IpProtocol = IpProtocol(2);
    /// IPv4-in-IP encapsulation (RFC 2003).
    pub const IPIP: IpProtocol = IpProtocol(4);
    /// TCP (RFC 9293).
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP (RFC 768).
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6-in-IP encapsulation (RFC 2473).
    pub const IPV6: IpProtocol = IpProtocol(41);
    /// IPv6 Routing header (RFC 8200 section 4.4).
    pub const IPV6_ROUTING: IpProtocol = IpProtocol(43);
    /// IPv6 Fragment header (RFC 8200 section 4.5).
    pub const IPV6_FRAGMENT: IpProtocol = IpProtocol(44);
    /// GRE (RFC 2784).
    pub const GRE: IpProtocol = IpProtocol(47);
    /// Encapsulating Security Payload (RFC 4303).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// Authentication Header (RFC 4302).
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMP for IPv6 (RFC 4443).
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 "No Next Header" (RFC 8200 section 4.7).
    pub const IPV6_NO_NEXT: IpProtocol = IpProtocol(59);
    /// IPv6 Destination Options header (RFC 8200 section 4.6).
    pub const IPV6_DEST_OPTS: IpProtocol = IpProtocol(60);

    /// True for the IPv6 extension headers the walker skips
    /// (hop-by-hop, routing, fragment, destination options, AH).
    pub const fn is_ipv6_extension(self) -> bool {
        matches!(self.0, 0 | 43 | 44 | 51 | 60)
    }

    /// Short lowercase name, or `None` for numbers without a known name.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "hopopts",
            1 => "icmp",
            2 => "igmp",
            4 => "ipip",
            6 => "tcp",
            17 => "udp",
            41 => "ipv6",
            43 => "ipv6-route",
            44 => "ipv6-frag",
            47 => "gre",
            50 => "esp",
            51 => "ah",
            58 => "icmpv6",
            59 => "ipv6-nonxt",
            60 => "ipv6-opts",
            _ => return None,
        })
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "proto-{}", self.0),
        }
    }
}

impl fmt::Debug for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IpProtocol({}={})", self.0, self)
    }
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        IpProtocol(v)
    }
}

impl From<IpProtocol> for u8 {
    fn from(p: IpProtocol) -> u8 {
        p.0
    }
}

/// IP version, where a rule differs between the two (e.g. a zero UDP checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// The two ECN bits of the IPv4 TOS / IPv6 traffic class (RFC 3168 section 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// 00: not ECN-capable transport.
    NotEct,
    /// 10: ECN-capable transport, ECT(0).
    Ect0,
    /// 01: ECN-capable transport, ECT(1).
    Ect1,
    /// 11: congestion experienced.
    Ce,
}

impl Ecn {
    /// Decodes the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit wire value.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// Fragmentation state of an IP packet, IPv4 or IPv6 (from the IPv4 header or
/// the IPv6 Fragment header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FragmentInfo {
    /// Offset of this fragment's data in the original payload, in **bytes**
    /// (the 13-bit wire field times 8).
    pub offset: u16,
    /// The More Fragments flag.
    pub more_fragments: bool,
    /// Identification (IPv4: 16 bits zero-extended; IPv6: 32 bits).
    pub ident: u32,
}

impl FragmentInfo {
    /// True when this is a real fragment (offset != 0 or MF set). An IPv6
    /// "atomic fragment" (RFC 6946: offset 0, M = 0) is not.
    pub const fn is_fragment(&self) -> bool {
        self.offset != 0 || self.more_fragments
    }

    /// True for the first fragment (offset 0) of a fragmented packet, or an
    /// unfragmented one: the only case where the upper-layer header is present.
    pub const fn is_first(&self) -> bool {
        self.offset == 0
    }
}

/// The source and destination ports that begin a TCP or a UDP header, if
/// `l4` holds those first 4 bytes. For flow hashing, which takes the ports
/// even from a header it does not otherwise validate (bonding's layer3+4
/// policy); the header views want their whole fixed header first.
#[inline]
pub fn transport_ports(l4: &[u8]) -> Option<(u16, u16)> {
    let &[s0, s1, d0, d1] = l4.first_chunk::<4>()?;
    Some((u16::from_be_bytes([s0, s1]), u16::from_be_bytes([d0, d1])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_ports_need_four_bytes() {
        assert_eq!(transport_ports(&[0x30, 0x39, 0x00, 0x50, 0xff]), Some((12345, 80)));
        assert_eq!(transport_ports(&[0x30, 0x39, 0x00, 0x50]), Some((12345, 80)));
        assert_eq!(transport_ports(&[0x30, 0x39, 0x00]), None);
        assert_eq!(transport_ports(&[]), None);
    }

    #[test]
    fn protocol_names_and_ecn() {
        assert_eq!(IpProtocol::TCP.to_string(), "tcp");
        assert_eq!(IpProtocol(200).to_string(), "proto-200");
        assert_eq!(format!("{:?}", IpProtocol::UDP), "IpProtocol(17=udp)");
        assert!(IpProtocol::IPV6_FRAGMENT.is_ipv6_extension());
        assert!(!IpProtocol::TCP.is_ipv6_extension());
        for b in 0..4 {
            assert_eq!(Ecn::from_bits(b).bits(), b);
        }
        assert_eq!(Ecn::from_bits(2), Ecn::Ect0);
        let f = FragmentInfo { offset: 0, more_fragments: false, ident: 7 };
        assert!(!f.is_fragment() && f.is_first());
        let f = FragmentInfo { offset: 8, more_fragments: false, ident: 7 };
        assert!(f.is_fragment() && !f.is_first());
    }
}
