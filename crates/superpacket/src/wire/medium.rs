//! How a packet starts: with an Ethernet header or with the IP header.
//!
//! A TAP device, an AF_PACKET socket and a pcap of link type 1 hand over
//! Ethernet frames; a TUN device opened with `IFF_NO_PI` (and a pcap of link
//! type 101, 228 or 229) hands over raw IP packets, IPv4 or IPv6 from the
//! first byte. Every offload works on both: GRO, GSO, checksum completion,
//! `virtio_net_hdr` import and export and reassembly read the medium from
//! their configuration (per instance, per port), and every offset they keep
//! counts from the packet's first byte either way, so a raw IP packet is an
//! Ethernet frame without its first 14 bytes (docs/offload-rules.md 4.4).

use super::error::{Result, WireError};
use super::ethernet::{ETHERNET_HEADER_LEN, EtherType};
use super::headers::FrameHeaders;

/// The framing of the packets an offload instance or a port handles.
///
/// ```
/// use superpacket::traffic::{Flow, FlowSpec, Transport};
/// use superpacket::wire::{L4Kind, Medium, TcpFlags};
///
/// let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 0)).frame(100, TcpFlags::empty()).unwrap();
/// let eth = Medium::Ethernet.parse(&frame).unwrap(); // from a TAP
/// let ip = Medium::Ip.parse(&frame[14..]).unwrap(); // the same packet from a TUN
/// assert_eq!((eth.l4_offset, ip.l4_offset), (34, 20)); // offsets count from the first byte
/// assert_eq!((ip.l4, ip.payload_len), (L4Kind::Udp, 100));
/// assert_eq!(Medium::Ip.link_header_len() + 14, Medium::Ethernet.link_header_len());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Medium {
    /// Ethernet frames (no FCS), VLAN tags allowed: TAP, AF_PACKET, pcap
    /// link type 1.
    #[default]
    Ethernet,
    /// Raw IP packets, IPv4 or IPv6 from the first byte: TUN with
    /// `IFF_NO_PI`, pcap link types 101, 228 and 229.
    Ip,
}

impl Medium {
    /// Bytes in front of the IP header of an untagged packet: 14 for
    /// Ethernet, 0 for raw IP.
    pub const fn link_header_len(self) -> usize {
        match self {
            Medium::Ethernet => ETHERNET_HEADER_LEN,
            Medium::Ip => 0,
        }
    }

    /// The name used in messages and statistics: `ethernet` or `ip`.
    pub const fn name(self) -> &'static str {
        match self {
            Medium::Ethernet => "ethernet",
            Medium::Ip => "ip",
        }
    }

    /// Parses a packet of this medium ([`FrameHeaders::parse`] or
    /// [`FrameHeaders::parse_ip`]).
    ///
    /// # Errors
    /// As the parser: truncated or self-contradictory headers.
    pub fn parse(self, packet: &[u8]) -> Result<FrameHeaders> {
        match self {
            Medium::Ethernet => FrameHeaders::parse(packet),
            Medium::Ip => FrameHeaders::parse_ip(packet),
        }
    }

    /// The EtherType of a raw IP packet from its version nibble: IPv4 or
    /// IPv6.
    ///
    /// # Errors
    /// An empty packet, or a version that is neither 4 nor 6.
    #[inline]
    pub fn ip_ethertype(packet: &[u8]) -> Result<EtherType> {
        match packet.first().map(|b| b >> 4) {
            Some(4) => Ok(EtherType::IPV4),
            Some(6) => Ok(EtherType::IPV6),
            Some(_) => Err(WireError::malformed("ip", "version is neither 4 nor 6")),
            None => Err(WireError::truncated("ip", 1, 0)),
        }
    }
}

impl std::fmt::Display for Medium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
