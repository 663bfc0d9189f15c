//! Header information: what a receiver that negotiated
//! [`super::proto::F_GUEST_HDRLEN`] needs with every checksum-offloaded
//! frame, carried in the metadata descriptor of the indirect form after the
//! `virtio_net_hdr_v1`:
//!
//! ```text
//! virtio_net_hdr_v1 (12 bytes) | le16 l2_len | le16 l3_len | le16 l4_len | u8 l3 (4|6) | u8 l4 (6|17)
//! ```
//!
//! The receiver is an "IP checksum" device in the sense of offload-rules
//! 0.3 (`NETIF_F_IP_CSUM` / `NETIF_F_IPV6_CSUM`): it offloads only TCP or UDP
//! over IPv4, or over IPv6 without extension headers, and must be told where
//! the headers are rather than trusting `csum_start` alone. Anything else
//! ([`HdrInfo::from_frame`] returns `None`) gets its checksum completed in
//! software by the sender, as Linux's `skb_csum_hwoffload_help` does for
//! such a device.

use superpacket::packet::virtio::{F_NEEDS_CSUM, VirtioNetHdr};
use superpacket::wire::ethernet::{ETHERNET_HEADER_LEN, parse_tags};
use superpacket::wire::ipv4::IPV4_HEADER_LEN;
use superpacket::wire::ipv6::IPV6_HEADER_LEN;
use superpacket::wire::tcp::TCP_HEADER_LEN;
use superpacket::wire::udp::UDP_HEADER_LEN;
use superpacket::wire::{EtherType, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket};

/// Bytes of the header information after the virtio_net_hdr.
pub const HDR_INFO_LEN: usize = 8;

/// The lengths of a frame's headers and their protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HdrInfo {
    /// Ethernet header with its VLAN tags.
    pub l2_len: u16,
    /// IPv4 header with options, or the 40-byte IPv6 header.
    pub l3_len: u16,
    /// TCP header with options, or the 8-byte UDP header.
    pub l4_len: u16,
    /// 4 or 6.
    pub l3: u8,
    /// 6 (TCP) or 17 (UDP).
    pub l4: u8,
}

/// Why header information was refused by the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HdrInfoError {
    /// The fields name an unsupported protocol or impossible lengths.
    #[error("header information is malformed")]
    Malformed,
    /// The header descriptors are not as long as the information says.
    #[error("header descriptors do not match the header information")]
    DescriptorMismatch,
    /// `hdr_len`, `csum_start` or `csum_offset` disagree with the information.
    #[error("virtio_net_hdr disagrees with the header information")]
    HdrMismatch,
    /// The frame's real headers are not the ones described.
    #[error("the frame's headers are not the ones described")]
    FrameMismatch,
}

impl HdrInfoError {
    /// Short stable name for drop counters.
    pub fn reason(&self) -> &'static str {
        match self {
            HdrInfoError::Malformed => "hdr-info-malformed",
            HdrInfoError::DescriptorMismatch => "hdr-info-desc-mismatch",
            HdrInfoError::HdrMismatch => "hdr-info-hdr-mismatch",
            HdrInfoError::FrameMismatch => "hdr-info-frame-mismatch",
        }
    }
}

impl HdrInfo {
    /// Total header length (the exact `hdr_len`).
    pub fn hdr_len(&self) -> usize {
        self.l2_len as usize + self.l3_len as usize + self.l4_len as usize
    }

    /// Offset of the L4 header (the `csum_start` of an offloaded checksum).
    pub fn l4_offset(&self) -> usize {
        self.l2_len as usize + self.l3_len as usize
    }

    /// Offset of the checksum field from the L4 header (16 TCP, 6 UDP).
    pub fn csum_offset(&self) -> u16 {
        if self.l4 == 6 { 16 } else { 6 }
    }

    /// Describes the headers at the start of `frame` (which may end right
    /// after them): Ethernet with any VLAN tags, IPv4 (options allowed, not a
    /// fragment) or IPv6 directly followed by TCP or UDP. `None` for any
    /// other frame (its checksum cannot be offloaded to such a receiver).
    pub fn from_frame(frame: &[u8]) -> Option<HdrInfo> {
        if frame.len() < ETHERNET_HEADER_LEN {
            return None;
        }
        let (_, ethertype, l3) = parse_tags(frame, 12).ok()?;
        let ip = frame.get(l3..)?;
        // Each view is made only once its fixed header is there, so its
        // accessors stay in range.
        let (l3_len, proto) = match ethertype {
            EtherType::IPV4 if ip.len() >= IPV4_HEADER_LEN => {
                let v4 = Ipv4Packet::new_unchecked(ip);
                if v4.version() != 4 || v4.header_len() < IPV4_HEADER_LEN || v4.is_fragment() {
                    return None;
                }
                (v4.header_len(), v4.protocol())
            }
            EtherType::IPV6 if ip.len() >= IPV6_HEADER_LEN => {
                let v6 = Ipv6Packet::new_unchecked(ip);
                if v6.version() != 6 {
                    return None;
                }
                (IPV6_HEADER_LEN, v6.next_header())
            }
            _ => return None,
        };
        let l4 = ip.get(l3_len..)?;
        let l4_len = match proto {
            IpProtocol::TCP if l4.len() >= TCP_HEADER_LEN => {
                // A data offset below 5 is no TCP header (and `decode` would
                // refuse its length): the sender completes such a checksum.
                let hl = TcpPacket::new_unchecked(l4).header_len();
                (hl >= TCP_HEADER_LEN).then_some(hl)?
            }
            IpProtocol::UDP => UDP_HEADER_LEN,
            _ => return None,
        };
        if l4.len() < l4_len {
            return None;
        }
        Some(HdrInfo {
            l2_len: l3 as u16,
            l3_len: l3_len as u16,
            l4_len: l4_len as u16,
            l3: if ethertype == EtherType::IPV4 { 4 } else { 6 },
            l4: proto.0,
        })
    }

    /// Encodes into 8 bytes.
    pub fn encode(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&self.l2_len.to_le_bytes());
        b[2..4].copy_from_slice(&self.l3_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.l4_len.to_le_bytes());
        b[6] = self.l3;
        b[7] = self.l4;
    }

    /// Decodes 8 bytes, checking protocols and minimum lengths.
    ///
    /// # Errors
    /// [`HdrInfoError::Malformed`].
    pub fn decode(b: &[u8]) -> Result<HdrInfo, HdrInfoError> {
        if b.len() < HDR_INFO_LEN {
            return Err(HdrInfoError::Malformed);
        }
        let info = HdrInfo {
            l2_len: u16::from_le_bytes([b[0], b[1]]),
            l3_len: u16::from_le_bytes([b[2], b[3]]),
            l4_len: u16::from_le_bytes([b[4], b[5]]),
            l3: b[6],
            l4: b[7],
        };
        let l3_ok = match info.l3 {
            4 => (20..=60).contains(&info.l3_len) && info.l3_len.is_multiple_of(4),
            6 => info.l3_len == 40,
            _ => false,
        };
        let l4_ok = match info.l4 {
            6 => (20..=60).contains(&info.l4_len) && info.l4_len.is_multiple_of(4),
            17 => info.l4_len == 8,
            _ => false,
        };
        let l2_ok = info.l2_len >= 14 && (info.l2_len - 14).is_multiple_of(4) && info.l2_len <= 14 + 4 * 8;
        if !(l2_ok && l3_ok && l4_ok) {
            return Err(HdrInfoError::Malformed);
        }
        Ok(info)
    }

    /// The receiver's checks of a frame that came with this information:
    /// the three header descriptors are exactly `l2_len`, `l3_len` and
    /// `l4_len` long, `hdr_len` is exact, a partial checksum starts at the L4
    /// header with the protocol's offset, and the gathered frame's headers
    /// really are the ones described.
    ///
    /// # Errors
    /// The first check that fails.
    pub fn check(&self, hdr: &VirtioNetHdr, desc_lens: [u32; 3], frame: &[u8]) -> Result<(), HdrInfoError> {
        if desc_lens != [self.l2_len as u32, self.l3_len as u32, self.l4_len as u32] {
            return Err(HdrInfoError::DescriptorMismatch);
        }
        if hdr.hdr_len as usize != self.hdr_len() {
            return Err(HdrInfoError::HdrMismatch);
        }
        if hdr.flags & F_NEEDS_CSUM != 0
            && (hdr.csum_start as usize != self.l4_offset() || hdr.csum_offset != self.csum_offset())
        {
            return Err(HdrInfoError::HdrMismatch);
        }
        if HdrInfo::from_frame(frame) != Some(*self) {
            return Err(HdrInfoError::FrameMismatch);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use superpacket::traffic::{Flow, FlowSpec, Transport};
    use superpacket::wire::TcpFlags;

    #[test]
    fn describes_tcp_and_udp_over_both_families_with_tags() {
        for (t, v6, tags, want) in [
            (Transport::Tcp, false, 0, (14, 20, 32, 4, 6)),
            (Transport::Udp, false, 0, (14, 20, 8, 4, 17)),
            (Transport::Tcp, true, 1, (18, 40, 32, 6, 6)),
            (Transport::Udp, true, 2, (22, 40, 8, 6, 17)),
        ] {
            let tagsv: Vec<(u16, u16)> = [(0x88a8, 100), (0x8100, 10)][2 - tags..].to_vec();
            let spec = FlowSpec::new(t, v6, 1).with_vlans(&tagsv).unwrap();
            let frame = Flow::new(spec).frame(100, TcpFlags::PSH).unwrap();
            let info = HdrInfo::from_frame(&frame).unwrap();
            assert_eq!((info.l2_len, info.l3_len, info.l4_len, info.l3, info.l4), want);
            // A prefix holding just the headers is enough.
            assert_eq!(HdrInfo::from_frame(&frame[..info.hdr_len()]), Some(info));
            assert_eq!(HdrInfo::from_frame(&frame[..info.hdr_len() - 1]), None);
            let mut b = [0u8; 8];
            info.encode(&mut b);
            assert_eq!(HdrInfo::decode(&b), Ok(info));
        }
    }

    #[test]
    fn other_frames_and_bad_encodings_are_refused() {
        let frame = Flow::new(FlowSpec::new(Transport::Udp, false, 1)).frame(10, TcpFlags::empty()).unwrap();
        let mut frag = frame.clone();
        frag[14 + 6] |= 0x20; // MF
        assert_eq!(HdrInfo::from_frame(&frag), None);
        let mut icmp = frame.clone();
        icmp[14 + 9] = 1;
        assert_eq!(HdrInfo::from_frame(&icmp), None);
        assert_eq!(HdrInfo::from_frame(&frame[..13]), None);
        // TCP with a data offset below 5: no header information (it would not decode).
        let tcp = Flow::new(FlowSpec::new(Transport::Tcp, false, 1)).frame(40, TcpFlags::PSH).unwrap();
        for doff in 0..5u8 {
            let mut bad = tcp.clone();
            bad[34 + 12] = doff << 4;
            assert_eq!(HdrInfo::from_frame(&bad), None, "data offset {doff}");
        }
        // IPv4 with IHL below 5, a version that is not the EtherType's, a cut IP header.
        let mut ihl = frame.clone();
        ihl[14] = 0x44;
        assert_eq!(HdrInfo::from_frame(&ihl), None);
        let mut v6 = frame.clone();
        v6[14] = 0x65;
        assert_eq!(HdrInfo::from_frame(&v6), None);
        assert_eq!(HdrInfo::from_frame(&frame[..14 + 19]), None);
        for bad in [[0u8, 0, 20, 0, 8, 0, 4, 17], [14, 0, 20, 0, 8, 0, 5, 17], [14, 0, 40, 0, 9, 0, 6, 6]] {
            assert_eq!(HdrInfo::decode(&bad), Err(HdrInfoError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn receiver_checks_every_field_against_the_frame() {
        let frame = Flow::new(FlowSpec::new(Transport::Tcp, false, 1)).frame(100, TcpFlags::PSH).unwrap();
        let info = HdrInfo::from_frame(&frame).unwrap();
        let hdr = VirtioNetHdr {
            flags: F_NEEDS_CSUM,
            hdr_len: info.hdr_len() as u16,
            csum_start: 34,
            csum_offset: 16,
            ..VirtioNetHdr::default()
        };
        let lens = [14, 20, 32];
        assert_eq!(info.check(&hdr, lens, &frame), Ok(()));
        assert_eq!(info.check(&hdr, [14, 20, 31], &frame), Err(HdrInfoError::DescriptorMismatch));
        let h2 = VirtioNetHdr { hdr_len: 54, ..hdr };
        assert_eq!(info.check(&h2, lens, &frame), Err(HdrInfoError::HdrMismatch));
        let h3 = VirtioNetHdr { csum_offset: 6, ..hdr };
        assert_eq!(info.check(&h3, lens, &frame), Err(HdrInfoError::HdrMismatch));
        let lie = HdrInfo { l4: 17, l4_len: 8, ..info };
        let h4 = VirtioNetHdr { hdr_len: lie.hdr_len() as u16, csum_offset: 6, ..hdr };
        assert_eq!(lie.check(&h4, [14, 20, 8], &frame), Err(HdrInfoError::FrameMismatch));
    }
}
