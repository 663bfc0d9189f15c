//! One-pass header summary of a frame: the hot-path entry point used by
//! `pcap check`, GRO and GSO.
//!
//! [`FrameHeaders::parse`] takes an Ethernet frame (no FCS),
//! [`FrameHeaders::parse_ip`] a packet starting at the IP header (L3 TUN
//! mode). Both return a `Copy` struct of offsets and a few decoded fields; no
//! allocation, no copy of the frame.
//!
//! What is an error and what is only reported:
//! - **error**: anything truncated or self-contradictory in a header that is
//!   parsed (Ethernet, VLAN tags, IPv4/IPv6 including extension headers, ARP
//!   length, the TCP/UDP/ICMP header of an unfragmented packet or first
//!   fragment, a UDP length field that disagrees with the IP length);
//! - **reported**: unknown EtherType ([`L3Kind::Other`]), unknown upper-layer
//!   protocol ([`L4Kind::Other`]), fragments ([`FrameHeaders::is_fragment`];
//!   for non-first fragments no L4 header is parsed, [`L4Kind::None`]),
//!   trailing Ethernet padding ([`FrameHeaders::l2_padding`]).
//!
//! Invariants of a successful parse (property-tested):
//! `l3_offset <= l4_offset <= payload_offset`,
//! `payload_offset + payload_len <= l3_offset + l3_len`,
//! `l3_offset + l3_len + l2_padding == frame.len()`; every offset range is
//! inside the frame.

use super::arp::ArpPacket;
use super::error::{Result, WireError, check_len};
use super::ethernet::{ETHERNET_HEADER_LEN, EtherType, VlanStack, parse_tags};
use super::icmpv4::ICMPV4_HEADER_LEN;
use super::icmpv6::ICMPV6_HEADER_LEN;
use super::ip::{FragmentInfo, IpProtocol};
use super::ipv4::Ipv4Packet;
use super::ipv6::{Ipv6Packet, walk};
use super::tcp::TcpPacket;
use super::udp::{UDP_HEADER_LEN, UdpPacket};

/// Network-layer protocol of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L3Kind {
    /// IPv4 (EtherType 0x0800, or version 4 for `parse_ip`).
    Ipv4,
    /// IPv6 (EtherType 0x86DD, or version 6).
    Ipv6,
    /// ARP (0x0806).
    Arp,
    /// Anything else; not parsed.
    Other(EtherType),
}

/// Transport-layer protocol of a frame, when its header was parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L4Kind {
    /// TCP; `l4_header_len` is the data offset * 4.
    Tcp,
    /// UDP; `l4_header_len` is 8.
    Udp,
    /// ICMP over IPv4; `l4_header_len` is 8.
    Icmpv4,
    /// ICMPv6 over IPv6; `l4_header_len` is 8.
    Icmpv6,
    /// Another protocol over IP (not parsed; `l4_header_len` is 0).
    Other(IpProtocol),
    /// No L4 header parsed: not IP, ARP, or a non-first fragment.
    None,
}

impl L4Kind {
    /// Offset of the checksum field from the start of the L4 header, for the
    /// protocols whose checksum an offload fills in (virtio_net_hdr
    /// `csum_offset`, CHECKSUM_PARTIAL; offload-rules 0.3): TCP 16, UDP 6.
    /// `None` for every other protocol.
    pub fn csum_offset(self) -> Option<u16> {
        match self {
            L4Kind::Tcp => Some(16),
            L4Kind::Udp => Some(6),
            _ => None,
        }
    }
}

/// Offsets and key fields of one frame. All offsets are from the start of the
/// buffer given to `parse` / `parse_ip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameHeaders {
    /// VLAN tags, outermost first (always empty for `parse_ip`).
    pub vlans: VlanStack,
    /// The EtherType after the tags (for `parse_ip`: IPv4 or IPv6 by version).
    pub ethertype: EtherType,
    /// Network layer.
    pub l3: L3Kind,
    /// Offset of the L3 header (= L2 header length: 14 + 4 per tag; 0 for `parse_ip`).
    pub l3_offset: usize,
    /// L3 header length: IPv4 IHL * 4; IPv6 40 + extension headers up to the
    /// upper layer (or up to the fragment data); ARP 8 + 2 * (hlen + plen); 0 for other.
    pub l3_header_len: usize,
    /// L3 packet length: IPv4 total length, IPv6 40 + payload length, ARP its
    /// length, other: the rest of the frame.
    pub l3_len: usize,
    /// Fragmentation fields: IPv4: present iff the packet is a fragment;
    /// IPv6: present iff there is a Fragment header (atomic fragments too).
    pub fragment: Option<FragmentInfo>,
    /// True for a real fragment (MF set or offset != 0).
    pub is_fragment: bool,
    /// Upper-layer protocol number from IP (after IPv6 extension headers;
    /// for non-first IPv6 fragments the Fragment header's next header).
    /// `None` for non-IP frames.
    pub ip_protocol: Option<IpProtocol>,
    /// Transport layer, when parsed.
    pub l4: L4Kind,
    /// Offset of the L4 header (= `l3_offset + l3_header_len`; for
    /// non-first fragments the start of the fragment data).
    pub l4_offset: usize,
    /// L4 header length (TCP data offset * 4; UDP and ICMP 8; 0 otherwise).
    pub l4_header_len: usize,
    /// Offset of the payload after the L4 header.
    pub payload_offset: usize,
    /// Payload length, bounded by the IP length (UDP: by the UDP length of
    /// an unfragmented datagram), so Ethernet padding is never counted.
    pub payload_len: usize,
    /// Bytes after the L3 packet (Ethernet padding); non-zero makes a packet
    /// GRO-ineligible (offload-rules 1.2).
    pub l2_padding: usize,
}

impl FrameHeaders {
    /// Parses an Ethernet frame. See the module documentation for what is an
    /// error.
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<FrameHeaders> {
        check_len("ethernet", ETHERNET_HEADER_LEN, frame.len())?;
        let (vlans, ethertype, l3_offset) = parse_tags(frame, 12)?;
        let mut h = FrameHeaders::empty(vlans, ethertype, l3_offset, frame.len());
        match ethertype {
            EtherType::IPV4 => h.parse_ipv4(frame)?,
            EtherType::IPV6 => h.parse_ipv6(frame)?,
            EtherType::ARP => h.parse_arp(frame)?,
            _ => {}
        }
        Ok(h)
    }

    /// Parses a packet that starts at its IPv4 or IPv6 header (TUN mode); the
    /// version nibble decides.
    #[inline]
    pub fn parse_ip(packet: &[u8]) -> Result<FrameHeaders> {
        check_len("ip", 1, packet.len())?;
        let mut h;
        match packet[0] >> 4 {
            4 => {
                h = FrameHeaders::empty(VlanStack::EMPTY, EtherType::IPV4, 0, packet.len());
                h.parse_ipv4(packet)?;
            }
            6 => {
                h = FrameHeaders::empty(VlanStack::EMPTY, EtherType::IPV6, 0, packet.len());
                h.parse_ipv6(packet)?;
            }
            _ => return Err(WireError::malformed("ip", "version is neither 4 nor 6")),
        }
        Ok(h)
    }

    /// The result for an unparsed L3: everything after L2 is "payload".
    #[inline]
    fn empty(vlans: VlanStack, ethertype: EtherType, l3_offset: usize, len: usize) -> FrameHeaders {
        let rest = len - l3_offset;
        FrameHeaders {
            vlans,
            ethertype,
            l3: L3Kind::Other(ethertype),
            l3_offset,
            l3_header_len: 0,
            l3_len: rest,
            fragment: None,
            is_fragment: false,
            ip_protocol: None,
            l4: L4Kind::None,
            l4_offset: l3_offset,
            l4_header_len: 0,
            payload_offset: l3_offset,
            payload_len: rest,
            l2_padding: 0,
        }
    }

    #[inline]
    fn parse_ipv4(&mut self, frame: &[u8]) -> Result<()> {
        let ip = Ipv4Packet::new_checked(&frame[self.l3_offset..])?;
        let hl = ip.header_len();
        self.l3 = L3Kind::Ipv4;
        self.l3_header_len = hl;
        self.l3_len = ip.total_len() as usize;
        self.is_fragment = ip.is_fragment();
        if self.is_fragment {
            self.fragment = Some(ip.fragment_info());
        }
        let first = ip.frag_offset() == 0;
        self.finish_ip(frame, ip.protocol(), hl, first, false)
    }

    #[inline]
    fn parse_ipv6(&mut self, frame: &[u8]) -> Result<()> {
        let ip = Ipv6Packet::new_checked(&frame[self.l3_offset..])?;
        let total = ip.total_len();
        self.l3 = L3Kind::Ipv6;
        self.l3_len = total;
        let nh = ip.next_header();
        let (proto, hl, first) = if nh.is_ipv6_extension() {
            let ext = walk(nh, &frame[self.l3_offset..self.l3_offset + total])?;
            if let Some(f) = ext.fragment {
                self.fragment = Some(f.info);
                self.is_fragment = f.info.is_fragment();
            }
            (ext.upper_protocol, ext.upper_offset, ext.fragment.is_none_or(|f| f.info.offset == 0))
        } else {
            (nh, super::ipv6::IPV6_HEADER_LEN, true)
        };
        self.l3_header_len = hl;
        self.finish_ip(frame, proto, hl, first, true)
    }

    /// Fills the L4 fields once the IP header (`hl` bytes incl. extensions)
    /// and `l3_len` are known.
    #[inline]
    fn finish_ip(&mut self, frame: &[u8], proto: IpProtocol, hl: usize, first: bool, v6: bool) -> Result<()> {
        let l3_end = self.l3_offset + self.l3_len;
        self.l2_padding = frame.len() - l3_end;
        self.ip_protocol = Some(proto);
        self.l4_offset = self.l3_offset + hl;
        let seg = &frame[self.l4_offset..l3_end];
        let (kind, l4_hl, payload_len) = if !first {
            (L4Kind::None, 0, seg.len())
        } else {
            match proto {
                IpProtocol::TCP => {
                    let t = TcpPacket::new_checked(seg)?;
                    (L4Kind::Tcp, t.header_len(), seg.len() - t.header_len())
                }
                IpProtocol::UDP => {
                    check_len("udp", UDP_HEADER_LEN, seg.len())?;
                    if self.is_fragment {
                        (L4Kind::Udp, UDP_HEADER_LEN, seg.len() - UDP_HEADER_LEN)
                    } else {
                        let u = UdpPacket::new_checked(seg)?;
                        (L4Kind::Udp, UDP_HEADER_LEN, u.len() as usize - UDP_HEADER_LEN)
                    }
                }
                IpProtocol::ICMP if !v6 => {
                    check_len("icmpv4", ICMPV4_HEADER_LEN, seg.len())?;
                    (L4Kind::Icmpv4, ICMPV4_HEADER_LEN, seg.len() - ICMPV4_HEADER_LEN)
                }
                IpProtocol::ICMPV6 if v6 => {
                    check_len("icmpv6", ICMPV6_HEADER_LEN, seg.len())?;
                    (L4Kind::Icmpv6, ICMPV6_HEADER_LEN, seg.len() - ICMPV6_HEADER_LEN)
                }
                p => (L4Kind::Other(p), 0, seg.len()),
            }
        };
        self.l4 = kind;
        self.l4_header_len = l4_hl;
        self.payload_offset = self.l4_offset + l4_hl;
        self.payload_len = payload_len;
        Ok(())
    }

    fn parse_arp(&mut self, frame: &[u8]) -> Result<()> {
        let arp = ArpPacket::new_checked(&frame[self.l3_offset..])?;
        let n = arp.packet_len();
        self.l3 = L3Kind::Arp;
        self.l3_header_len = n;
        self.l3_len = n;
        self.l4_offset = self.l3_offset + n;
        self.payload_offset = self.l4_offset;
        self.payload_len = 0;
        self.l2_padding = frame.len() - self.l4_offset;
        Ok(())
    }

    /// True for IPv4 or IPv6.
    pub const fn is_ip(&self) -> bool {
        matches!(self.l3, L3Kind::Ipv4 | L3Kind::Ipv6)
    }

    /// End of the L3 packet (`l3_offset + l3_len`).
    pub const fn l3_end(&self) -> usize {
        self.l3_offset + self.l3_len
    }

    /// L4 segment length (header + payload, bounded by the IP length): the
    /// L4 length of the pseudo-header.
    pub const fn l4_len(&self) -> usize {
        self.l3_end() - self.l4_offset
    }

    /// The L3 packet inside `frame` (clamped: never panics, even for another frame).
    pub fn l3_bytes<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        super::sub(frame, self.l3_offset, self.l3_end())
    }

    /// The L4 segment (header + payload) inside `frame`.
    pub fn l4_bytes<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        super::sub(frame, self.l4_offset, self.l3_end())
    }

    /// The payload inside `frame`.
    pub fn payload_bytes<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        super::sub(frame, self.payload_offset, self.payload_offset + self.payload_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ethernet::{EthernetFrame, EthernetRepr, MacAddr, VlanTag};
    use crate::wire::ipv4::{Ipv4Options, Ipv4Repr};
    use crate::wire::ipv6::{Ipv6FragmentRepr, Ipv6OptionsRepr, Ipv6Repr};
    use crate::wire::tcp::TCP_HEADER_LEN;

    fn eth(vlans: &[u16], ethertype: EtherType, l3: &[u8], pad: usize) -> Vec<u8> {
        let tags: Vec<_> =
            vlans.iter().map(|&vid| VlanTag { tpid: EtherType::VLAN, pcp: 0, dei: false, vid }).collect();
        let r = EthernetRepr {
            dst_addr: MacAddr([2, 0, 0, 0, 0, 2]),
            src_addr: MacAddr([2, 0, 0, 0, 0, 1]),
            vlans: VlanStack::from_tags(&tags).unwrap(),
            ethertype,
        };
        let mut f = vec![0u8; r.buffer_len(l3.len()) + pad];
        r.emit(&mut EthernetFrame::new_unchecked(&mut f[..])).unwrap();
        f[r.header_len()..r.header_len() + l3.len()].copy_from_slice(l3);
        f
    }

    fn ipv4(proto: IpProtocol, l4: &[u8], mf: bool, off: u16) -> Vec<u8> {
        let r = Ipv4Repr {
            src_addr: [10, 0, 0, 1].into(),
            dst_addr: [10, 0, 0, 2].into(),
            protocol: proto,
            payload_len: l4.len(),
            ttl: 64,
            tos: 0,
            ident: 9,
            dont_frag: false,
            more_frags: mf,
            frag_offset: off,
            options: Ipv4Options::NONE,
        };
        let mut v = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut v[..])).unwrap();
        v[20..].copy_from_slice(l4);
        v
    }

    fn tcp(payload: usize) -> Vec<u8> {
        let mut t = vec![0u8; TCP_HEADER_LEN + payload];
        t[0..4].copy_from_slice(&[0x30, 0x39, 0, 80]);
        t[12] = 0x50;
        t
    }

    #[test]
    fn tcp_ipv4_padded_with_vlan() {
        let f = eth(&[100], EtherType::IPV4, &ipv4(IpProtocol::TCP, &tcp(2), false, 0), 6);
        let h = FrameHeaders::parse(&f).unwrap();
        assert_eq!(h.vlans.outer().unwrap().vid, 100);
        assert_eq!((h.l3, h.l3_offset, h.l3_header_len, h.l3_len), (L3Kind::Ipv4, 18, 20, 42));
        assert_eq!((h.l4, h.l4_offset, h.l4_header_len), (L4Kind::Tcp, 38, 20));
        assert_eq!((h.payload_offset, h.payload_len, h.l2_padding), (58, 2, 6));
        assert_eq!(h.ip_protocol, Some(IpProtocol::TCP));
        assert!(!h.is_fragment && h.fragment.is_none());
        assert_eq!(h.l4_len(), 22);
        assert_eq!(h.payload_bytes(&f).len(), 2);
        // Same packet in TUN mode.
        let p = FrameHeaders::parse_ip(&f[18..]).unwrap();
        assert_eq!((p.l3_offset, p.l4_offset, p.payload_len, p.l2_padding), (0, 20, 2, 6));
        assert_eq!(p.ethertype, EtherType::IPV4);
    }

    #[test]
    fn ipv4_fragments() {
        let first =
            eth(&[], EtherType::IPV4, &ipv4(IpProtocol::UDP, &[0, 1, 0, 2, 0x05, 0xdc, 0, 0, 1, 2], true, 0), 0);
        let h = FrameHeaders::parse(&first).unwrap();
        assert!(h.is_fragment);
        assert_eq!(h.fragment, Some(FragmentInfo { offset: 0, more_fragments: true, ident: 9 }));
        // UDP length 1500 is not checked against a fragment.
        assert_eq!((h.l4, h.l4_header_len, h.payload_len), (L4Kind::Udp, 8, 2));
        let later = eth(&[], EtherType::IPV4, &ipv4(IpProtocol::TCP, &[7; 5], false, 1480), 0);
        let h = FrameHeaders::parse(&later).unwrap();
        assert_eq!((h.l4, h.l4_offset, h.l4_header_len, h.payload_len), (L4Kind::None, 34, 0, 5));
        assert_eq!(h.ip_protocol, Some(IpProtocol::TCP));
    }

    #[test]
    fn ipv6_ext_and_icmp() {
        let mut ext = vec![0u8; 16];
        Ipv6OptionsRepr { next_header: IpProtocol::IPV6_FRAGMENT, options: &[1, 4, 0, 0, 0, 0] }
            .emit(&mut ext)
            .unwrap();
        Ipv6FragmentRepr {
            next_header: IpProtocol::ICMPV6,
            info: FragmentInfo { offset: 0, more_fragments: false, ident: 77 },
        }
        .emit(&mut ext[8..])
        .unwrap();
        ext.extend_from_slice(&[128, 0, 0, 0, 0, 1, 0, 1, 0xaa]);
        let r = Ipv6Repr {
            src_addr: "::1".parse().unwrap(),
            dst_addr: "::2".parse().unwrap(),
            next_header: IpProtocol::HOP_BY_HOP,
            payload_len: ext.len(),
            hop_limit: 1,
            traffic_class: 0,
            flow_label: 0,
        };
        let mut ip = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut ip[..])).unwrap();
        ip[40..].copy_from_slice(&ext);
        let f = eth(&[1, 2], EtherType::IPV6, &ip, 0);
        let h = FrameHeaders::parse(&f).unwrap();
        assert_eq!(h.vlans.len(), 2);
        assert_eq!((h.l3, h.l3_offset, h.l3_header_len), (L3Kind::Ipv6, 22, 56));
        assert_eq!(h.fragment, Some(FragmentInfo { offset: 0, more_fragments: false, ident: 77 }));
        assert!(!h.is_fragment, "atomic fragment");
        assert_eq!((h.l4, h.l4_offset, h.payload_offset, h.payload_len), (L4Kind::Icmpv6, 78, 86, 1));
    }

    #[test]
    fn arp_and_other() {
        let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
        arp.resize(28, 0);
        let f = eth(&[], EtherType::ARP, &arp, 18);
        let h = FrameHeaders::parse(&f).unwrap();
        assert_eq!((h.l3, h.l3_len, h.l2_padding, h.l4, h.ip_protocol), (L3Kind::Arp, 28, 18, L4Kind::None, None));
        let f = eth(&[5], EtherType(0x88cc), &[1, 2, 3], 0);
        let h = FrameHeaders::parse(&f).unwrap();
        assert_eq!((h.l3, h.payload_offset, h.payload_len), (L3Kind::Other(EtherType(0x88cc)), 18, 3));
        // Unknown IP protocol: reported, not an error.
        let f = eth(&[], EtherType::IPV4, &ipv4(IpProtocol(253), &[1, 2, 3], false, 0), 0);
        let h = FrameHeaders::parse(&f).unwrap();
        assert_eq!((h.l4, h.payload_len), (L4Kind::Other(IpProtocol(253)), 3));
        // ICMP inside IPv6 is "other".
        assert_eq!(FrameHeaders::parse_ip(&ipv4(IpProtocol::ICMP, &[0; 8], false, 0)).unwrap().l4, L4Kind::Icmpv4);
    }

    #[test]
    fn errors() {
        assert_eq!(FrameHeaders::parse(&[0; 13]), Err(WireError::truncated("ethernet", 14, 13)));
        let f = eth(&[], EtherType::IPV4, &ipv4(IpProtocol::TCP, &tcp(0)[..19], false, 0), 0);
        assert_eq!(FrameHeaders::parse(&f), Err(WireError::truncated("tcp", 20, 19)));
        let mut u = ipv4(IpProtocol::UDP, &[0, 1, 0, 2, 0, 9, 0, 0], false, 0);
        assert_eq!(FrameHeaders::parse_ip(&u), Err(WireError::truncated("udp", 9, 8)));
        u[25] = 4;
        assert_eq!(FrameHeaders::parse_ip(&u), Err(WireError::malformed("udp", "length field < 8")));
        let f = eth(&[], EtherType::IPV4, &ipv4(IpProtocol::ICMP, &[0; 7], false, 0), 0);
        assert_eq!(FrameHeaders::parse(&f), Err(WireError::truncated("icmpv4", 8, 7)));
        let f = eth(&[], EtherType::IPV6, &[0x60, 0, 0], 0);
        assert_eq!(FrameHeaders::parse(&f), Err(WireError::truncated("ipv6", 40, 3)));
        assert_eq!(FrameHeaders::parse_ip(&[]), Err(WireError::truncated("ip", 1, 0)));
        assert_eq!(FrameHeaders::parse_ip(&[0x50]), Err(WireError::malformed("ip", "version is neither 4 nor 6")));
        let f = eth(&[], EtherType::ARP, &[0, 1, 8, 0, 6, 4, 0, 1], 0);
        assert_eq!(FrameHeaders::parse(&f), Err(WireError::truncated("arp", 28, 8)));
    }
}
