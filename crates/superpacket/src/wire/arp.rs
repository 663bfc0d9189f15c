//! ARP (RFC 826), with typed access for the Ethernet/IPv4 case.
//!
//! Layout: `htype(2) ptype(2) hlen(1) plen(1) oper(2) sha(hlen) spa(plen)
//! tha(hlen) tpa(plen)`. The view accepts any hardware/protocol lengths
//! (after [`ArpPacket::new_checked`] the four address slices are in bounds);
//! [`ArpRepr`] only represents Ethernet (htype 1, hlen 6) over IPv4 (ptype
//! 0x0800, plen 4) and returns `Unsupported` for anything else.

use std::net::Ipv4Addr;

use super::error::{Result, WireError, check_len};
use super::ethernet::{EtherType, MacAddr};
use super::field::be16;
use super::put_u16;

/// Fixed part of an ARP packet, before the addresses.
pub const ARP_FIXED_LEN: usize = 8;
/// Length of an Ethernet/IPv4 ARP packet.
pub const ARP_ETH_IPV4_LEN: usize = 28;
/// Hardware type for Ethernet.
pub const ARP_HTYPE_ETHERNET: u16 = 1;

/// ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1: who-has.
    Request,
    /// 2: is-at.
    Reply,
    /// Any other code (RARP, InARP, ...).
    Unknown(u16),
}

impl ArpOperation {
    /// Decodes a wire value.
    pub const fn from_u16(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            v => ArpOperation::Unknown(v),
        }
    }

    /// The wire value.
    pub const fn to_u16(self) -> u16 {
        match self {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(v) => v,
        }
    }
}

/// Zero-copy view of an ARP packet.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    view_constructors! {
        /// Wraps without checks; accessors may panic on a short buffer.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// Ensures the fixed part and all four addresses are present.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_len("arp", ARP_FIXED_LEN, len)?;
        check_len("arp", self.packet_len(), len)
    }

    /// Length implied by `hlen` and `plen`: `8 + 2 * (hlen + plen)`.
    pub fn packet_len(&self) -> usize {
        ARP_FIXED_LEN + 2 * (self.hardware_len() as usize + self.protocol_len() as usize)
    }

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Protocol type (an EtherType; 0x0800 = IPv4).
    pub fn protocol_type(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), 2))
    }

    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[4]
    }

    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[5]
    }

    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from_u16(be16(self.buffer.as_ref(), 6))
    }

    fn field(&self, index: usize) -> &[u8] {
        let (h, p) = (self.hardware_len() as usize, self.protocol_len() as usize);
        let start = ARP_FIXED_LEN + [0, h, h + p, 2 * h + p][index];
        let len = if index.is_multiple_of(2) { h } else { p };
        &self.buffer.as_ref()[start..start + len]
    }

    /// Sender hardware address bytes.
    pub fn source_hardware_addr(&self) -> &[u8] {
        self.field(0)
    }

    /// Sender protocol address bytes.
    pub fn source_protocol_addr(&self) -> &[u8] {
        self.field(1)
    }

    /// Target hardware address bytes.
    pub fn target_hardware_addr(&self) -> &[u8] {
        self.field(2)
    }

    /// Target protocol address bytes.
    pub fn target_protocol_addr(&self) -> &[u8] {
        self.field(3)
    }
}

/// A decoded Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request, reply or other.
    pub operation: ArpOperation,
    /// Sender MAC.
    pub source_hardware_addr: MacAddr,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target MAC (zero in a request).
    pub target_hardware_addr: MacAddr,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Decodes an Ethernet/IPv4 ARP packet; other hardware or protocol types
    /// are `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(p: &ArpPacket<T>) -> Result<ArpRepr> {
        p.check_len()?;
        if p.hardware_type() != ARP_HTYPE_ETHERNET || p.hardware_len() != 6 {
            return Err(WireError::unsupported("arp", "hardware type is not Ethernet"));
        }
        if p.protocol_type() != EtherType::IPV4 || p.protocol_len() != 4 {
            return Err(WireError::unsupported("arp", "protocol type is not IPv4"));
        }
        let ip = |s: &[u8]| Ipv4Addr::new(s[0], s[1], s[2], s[3]);
        Ok(ArpRepr {
            operation: p.operation(),
            source_hardware_addr: MacAddr::from_slice(p.source_hardware_addr()).unwrap_or_default(),
            source_protocol_addr: ip(p.source_protocol_addr()),
            target_hardware_addr: MacAddr::from_slice(p.target_hardware_addr()).unwrap_or_default(),
            target_protocol_addr: ip(p.target_protocol_addr()),
        })
    }

    /// A who-has request for `target` (target MAC zero).
    pub fn request(sender_mac: MacAddr, sender_ip: Ipv4Addr, target: Ipv4Addr) -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: sender_mac,
            source_protocol_addr: sender_ip,
            target_hardware_addr: MacAddr::ZERO,
            target_protocol_addr: target,
        }
    }

    /// The reply to `request`, announcing `my_mac` for the requested address.
    pub fn reply_to(request: &ArpRepr, my_mac: MacAddr) -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Reply,
            source_hardware_addr: my_mac,
            source_protocol_addr: request.target_protocol_addr,
            target_hardware_addr: request.source_hardware_addr,
            target_protocol_addr: request.source_protocol_addr,
        }
    }

    /// Always 28.
    pub const fn buffer_len(&self) -> usize {
        ARP_ETH_IPV4_LEN
    }

    /// Writes the 28-byte packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut ArpPacket<T>) -> Result<()> {
        let b = p.buffer.as_mut();
        check_len("arp", ARP_ETH_IPV4_LEN, b.len())?;
        put_u16(b, 0, ARP_HTYPE_ETHERNET);
        put_u16(b, 2, EtherType::IPV4.0);
        b[4] = 6;
        b[5] = 4;
        put_u16(b, 6, self.operation.to_u16());
        b[8..14].copy_from_slice(&self.source_hardware_addr.0);
        b[14..18].copy_from_slice(&self.source_protocol_addr.octets());
        b[18..24].copy_from_slice(&self.target_hardware_addr.0);
        b[24..28].copy_from_slice(&self.target_protocol_addr.octets());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // who-has 192.168.1.1 tell 192.168.1.10, as captured.
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 192, 168, 1, 10, 0, 0, 0,
        0, 0, 0, 192, 168, 1, 1,
    ];

    #[test]
    fn request_reply() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        let r = ArpRepr::parse(&p).unwrap();
        assert_eq!(
            r,
            ArpRepr::request(
                MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
                [192, 168, 1, 10].into(),
                [192, 168, 1, 1].into()
            )
        );
        let mut out = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, REQUEST);
        let reply = ArpRepr::reply_to(&r, MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(reply.operation, ArpOperation::Reply);
        assert_eq!(reply.target_protocol_addr, Ipv4Addr::new(192, 168, 1, 10));
    }

    #[test]
    fn errors() {
        assert_eq!(ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(), WireError::truncated("arp", 28, 27));
        assert_eq!(ArpPacket::new_checked(&REQUEST[..5]).unwrap_err(), WireError::truncated("arp", 8, 5));
        let mut other = REQUEST;
        other[1] = 6; // IEEE 802 hardware type
        let p = ArpPacket::new_checked(&other[..]).unwrap();
        assert!(matches!(ArpRepr::parse(&p), Err(WireError::Unsupported { .. })));
        // A generic packet with zero-length addresses is fine for the view.
        let p = ArpPacket::new_checked(&[0u8, 1, 8, 0, 0, 0, 0, 3][..]).unwrap();
        assert_eq!(p.operation(), ArpOperation::Unknown(3));
        assert!(p.target_protocol_addr().is_empty());
    }
}
