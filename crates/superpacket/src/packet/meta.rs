//! Offload metadata carried with every packet: the GSO description, the
//! checksum state, the RSS hash and the arrival time (offload-rules sections 0.3
//! and 3; Linux `skb_shared_info` and `skb->ip_summed`).

use std::fmt;

/// GSO type bits, as Linux's `SKB_GSO_*` (offload-rules Appendix A). A packet is
/// a superpacket (GSO) iff its type has one of [`GsoType::TCPV4`],
/// [`GsoType::TCPV6`] or [`GsoType::UDP_L4`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GsoType(u32);

impl GsoType {
    /// Not a superpacket.
    pub const NONE: GsoType = GsoType(0);
    /// TCP over IPv4 (TSO4).
    pub const TCPV4: GsoType = GsoType(1 << 0);
    /// From an untrusted source (virtio/tap/AF_PACKET): headers must be
    /// validated and `gso_segs` recomputed before use.
    pub const DODGY: GsoType = GsoType(1 << 1);
    /// TCP with ECN: CWR may be set on the first segment only.
    pub const TCP_ECN: GsoType = GsoType(1 << 2);
    /// TCP over IPv6 (TSO6).
    pub const TCPV6: GsoType = GsoType(1 << 4);
    /// Inside a UDP tunnel (VXLAN, Geneve): the outer UDP length (and IPv4
    /// header) is fixed per segment, the outer UDP checksum left zero
    /// (offload-rules 2.4; Linux `SKB_GSO_UDP_TUNNEL`). Set together with the
    /// inner protocol's bit and [`OffloadMeta::encap`].
    pub const UDP_TUNNEL: GsoType = GsoType(1 << 10);
    /// [`GsoType::UDP_TUNNEL`] whose outer UDP checksum is computed for every
    /// segment (`SKB_GSO_UDP_TUNNEL_CSUM`).
    pub const UDP_TUNNEL_CSUM: GsoType = GsoType(1 << 11);
    /// Segmented only down to the inner L4 by software; the device finishes
    /// (`SKB_GSO_PARTIAL`, offload-rules 3.1).
    pub const PARTIAL: GsoType = GsoType(1 << 12);
    /// UDP L4 segmentation (USO): every datagram `gso_size` long but the last.
    pub const UDP_L4: GsoType = GsoType(1 << 17);
    /// Fraglist aggregate: segments are the original packets, chained.
    pub const FRAGLIST: GsoType = GsoType(1 << 18);
    /// AccECN: CWR copied to every segment.
    pub const TCP_ACCECN: GsoType = GsoType(1 << 19);
    /// IPv4 ID is the same in every segment (outer header).
    pub const TCP_FIXEDID: GsoType = GsoType(1 << 30);
    /// IPv4 ID is the same in every segment (inner header of a tunnel).
    pub const TCP_FIXEDID_INNER: GsoType = GsoType(1 << 31);

    const NAMES: [(GsoType, &'static str); 12] = [
        (GsoType::TCPV4, "tcpv4"),
        (GsoType::DODGY, "dodgy"),
        (GsoType::TCP_ECN, "ecn"),
        (GsoType::TCPV6, "tcpv6"),
        (GsoType::UDP_TUNNEL, "udp_tunnel"),
        (GsoType::UDP_TUNNEL_CSUM, "udp_tunnel_csum"),
        (GsoType::PARTIAL, "partial"),
        (GsoType::UDP_L4, "udp_l4"),
        (GsoType::FRAGLIST, "fraglist"),
        (GsoType::TCP_ACCECN, "accecn"),
        (GsoType::TCP_FIXEDID, "fixedid"),
        (GsoType::TCP_FIXEDID_INNER, "fixedid_inner"),
    ];

    /// Raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }
    /// From raw bits; unknown bits are kept (and make [`GsoType::protocol`] fail).
    pub const fn from_bits(bits: u32) -> GsoType {
        GsoType(bits)
    }
    /// True if every bit of `other` is set.
    pub const fn contains(self, other: GsoType) -> bool {
        self.0 & other.0 == other.0
    }
    /// True if any bit of `other` is set.
    pub const fn intersects(self, other: GsoType) -> bool {
        self.0 & other.0 != 0
    }
    /// Bitwise or.
    pub const fn union(self, other: GsoType) -> GsoType {
        GsoType(self.0 | other.0)
    }
    /// Bitwise and-not.
    pub const fn without(self, other: GsoType) -> GsoType {
        GsoType(self.0 & !other.0)
    }
    /// True if no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The segmentation protocol, if exactly one of TCPV4, TCPV6, UDP_L4 is set.
    pub fn protocol(self) -> Option<GsoProtocol> {
        let base = self.0 & (GsoType::TCPV4.0 | GsoType::TCPV6.0 | GsoType::UDP_L4.0);
        match base {
            b if b == GsoType::TCPV4.0 => Some(GsoProtocol::TcpV4),
            b if b == GsoType::TCPV6.0 => Some(GsoProtocol::TcpV6),
            b if b == GsoType::UDP_L4.0 => Some(GsoProtocol::UdpL4),
            _ => None,
        }
    }
}

impl std::ops::BitOr for GsoType {
    type Output = GsoType;
    fn bitor(self, rhs: GsoType) -> GsoType {
        self.union(rhs)
    }
}

impl std::ops::BitOrAssign for GsoType {
    fn bitor_assign(&mut self, rhs: GsoType) {
        *self = self.union(rhs);
    }
}

impl fmt::Debug for GsoType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let mut rest = self.0;
        let mut first = true;
        for (flag, name) in GsoType::NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
                rest &= !flag.0;
            }
        }
        if rest != 0 {
            if !first {
                f.write_str("|")?;
            }
            write!(f, "{rest:#x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for GsoType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The L3/L4 protocol a superpacket is segmented as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GsoProtocol {
    /// TCP over IPv4.
    TcpV4,
    /// TCP over IPv6.
    TcpV6,
    /// UDP over IPv4 or IPv6 (USO).
    UdpL4,
}

impl GsoProtocol {
    /// The corresponding [`GsoType`] bit.
    pub fn gso_type(self) -> GsoType {
        match self {
            GsoProtocol::TcpV4 => GsoType::TCPV4,
            GsoProtocol::TcpV6 => GsoType::TCPV6,
            GsoProtocol::UdpL4 => GsoType::UDP_L4,
        }
    }
    /// Offset of the checksum field inside the L4 header (offload-rules 0.3).
    pub fn csum_offset(self) -> u16 {
        match self {
            GsoProtocol::TcpV4 | GsoProtocol::TcpV6 => 16,
            GsoProtocol::UdpL4 => 6,
        }
    }
}

/// The UDP tunnel protocol of an encapsulated packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TunnelKind {
    /// VXLAN (RFC 7348): 8-byte header, UDP port 4789 by default.
    Vxlan,
    /// Geneve (RFC 8926): 8-byte header plus options, UDP port 6081 by default.
    Geneve,
}

impl TunnelKind {
    /// The name used in annotations and topology files (`vxlan`, `geneve`).
    pub fn name(self) -> &'static str {
        match self {
            TunnelKind::Vxlan => "vxlan",
            TunnelKind::Geneve => "geneve",
        }
    }
}

/// Where the headers of an encapsulated packet are (Linux
/// `skb->encapsulation` with `inner_mac_header`, `inner_network_header`,
/// `inner_transport_header`): offsets from the first byte of the frame.
///
/// Invariant: `outer_transport + 8 <= inner_mac < inner_network <
/// inner_transport`; the outer header block (L2, outer IP, outer UDP and the
/// tunnel header) is `inner_mac` bytes long. A GSO type or a partial
/// checksum of such a packet applies to the **inner** headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Encapsulation {
    /// The tunnel protocol.
    pub tunnel: TunnelKind,
    /// Offset of the outer UDP header.
    pub outer_transport: u16,
    /// Offset of the inner Ethernet header (after the tunnel header).
    pub inner_mac: u16,
    /// Offset of the inner IP header.
    pub inner_network: u16,
    /// Offset of the inner L4 header.
    pub inner_transport: u16,
}

impl Encapsulation {
    /// The same headers after `by` bytes were put in front of the frame
    /// (`by > 0`) or taken off it (`by < 0`); `None` if an offset leaves 0..=65535.
    pub fn shifted(&self, by: isize) -> Option<Encapsulation> {
        let mv = |o: u16| u16::try_from((o as isize).checked_add(by)?).ok();
        Some(Encapsulation {
            tunnel: self.tunnel,
            outer_transport: mv(self.outer_transport)?,
            inner_mac: mv(self.inner_mac)?,
            inner_network: mv(self.inner_network)?,
            inner_transport: mv(self.inner_transport)?,
        })
    }
}

/// Checksum state of a packet (offload-rules 0.3, Linux `ip_summed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChecksumState {
    /// Nothing verified (RX) / checksum already written (TX).
    #[default]
    None,
    /// `level + 1` consecutive L4 checksums were verified (RX); nothing to do (TX).
    Unnecessary {
        /// Number of additional checksums verified beyond the first (0..=3).
        level: u8,
    },
    /// `sum` is the folded ones' complement sum of the packet from the start of
    /// the network header to the end.
    Complete {
        /// The sum (not complemented).
        sum: u16,
    },
    /// The L4 checksum is still to be computed: sum from `start` (offset from the
    /// start of the frame, i.e. the first L2 byte) to the end, complement, store
    /// at `start + offset`. The field is pre-seeded with the pseudo-header sum.
    Partial {
        /// Offset of the first summed byte from the start of the frame.
        start: u16,
        /// Offset of the checksum field from `start` (16 TCP, 6 UDP).
        offset: u16,
    },
}

/// Offload metadata of one packet: this crate's `skb_shared_info` plus the
/// `sk_buff` fields that travel with it.
///
/// Invariant: `gso_type` is empty iff `gso_size == 0`; when set, `gso_segs` is
/// the number of wire segments the packet stands for (0 only for DODGY packets
/// whose headers were not yet validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OffloadMeta {
    /// GSO type bits ([`GsoType::NONE`] for an ordinary packet).
    pub gso_type: GsoType,
    /// Payload bytes per segment (MSS for TCP, datagram payload for UDP).
    pub gso_size: u16,
    /// Number of segments this superpacket stands for.
    pub gso_segs: u16,
    /// Checksum state.
    pub csum: ChecksumState,
    /// RSS (receive-side scaling) flow hash, if known.
    pub rss_hash: Option<u32>,
    /// Arrival time in nanoseconds (capture or receive clock), if known.
    pub arrival_ns: Option<u64>,
    /// Set when the offloads describe the inner headers of a tunnel packet
    /// (a tunnel superpacket, or an inner partial checksum).
    pub encap: Option<Encapsulation>,
}

impl OffloadMeta {
    /// True if this packet is a superpacket to be segmented.
    pub fn is_gso(&self) -> bool {
        !self.gso_type.is_empty() && self.gso_size != 0
    }

    /// Clears the GSO description (the packet becomes an ordinary one).
    pub fn clear_gso(&mut self) {
        self.gso_type = GsoType::NONE;
        self.gso_size = 0;
        self.gso_segs = 0;
    }

    /// The metadata of the same packet after `by` bytes were put in front of
    /// it (`by > 0`, e.g. an Ethernet header of 14 given to a raw IP packet)
    /// or taken off its front (`by < 0`): only frame offsets move, which is a
    /// partial checksum's start and the tunnel header offsets. `None` if one
    /// would fall before the first byte or past 65535.
    pub fn shifted(&self, by: isize) -> Option<OffloadMeta> {
        let mut meta = *self;
        if let ChecksumState::Partial { start, offset } = self.csum {
            let start = u16::try_from((start as isize).checked_add(by)?).ok()?;
            meta.csum = ChecksumState::Partial { start, offset };
        }
        if let Some(encap) = &self.encap {
            meta.encap = Some(encap.shifted(by)?);
        }
        Some(meta)
    }

    /// True for a superpacket inside a UDP tunnel.
    pub fn is_tunnel_gso(&self) -> bool {
        self.is_gso() && self.gso_type.intersects(GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_type_names_and_protocol() {
        let t = GsoType::TCPV4 | GsoType::TCP_ECN | GsoType::DODGY;
        assert_eq!(format!("{t}"), "tcpv4|dodgy|ecn");
        assert_eq!(t.protocol(), Some(GsoProtocol::TcpV4));
        assert_eq!((GsoType::TCPV4 | GsoType::TCPV6).protocol(), None);
        assert_eq!(GsoType::NONE.protocol(), None);
        assert_eq!(format!("{:?}", GsoType::from_bits(1 << 25)), "0x2000000");
        assert_eq!((GsoType::UDP_L4 | GsoType::FRAGLIST).protocol(), Some(GsoProtocol::UdpL4));
        assert_eq!(GsoProtocol::UdpL4.csum_offset(), 6);
    }

    #[test]
    fn shifted_moves_only_a_partial_checksum_start() {
        let partial = OffloadMeta { csum: ChecksumState::Partial { start: 34, offset: 16 }, ..Default::default() };
        let raw = partial.shifted(-14).unwrap();
        assert_eq!(raw.csum, ChecksumState::Partial { start: 20, offset: 16 });
        assert_eq!(raw.shifted(14), Some(partial));
        assert_eq!(partial.shifted(-35), None);
        assert_eq!(partial.shifted(65535 - 33), None);
        let complete = OffloadMeta { csum: ChecksumState::Complete { sum: 7 }, ..Default::default() };
        assert_eq!(complete.shifted(-14), Some(complete));
        let encap = Encapsulation {
            tunnel: TunnelKind::Vxlan,
            outer_transport: 34,
            inner_mac: 50,
            inner_network: 64,
            inner_transport: 84,
        };
        let tunnel = OffloadMeta { encap: Some(encap), ..partial };
        let moved = tunnel.shifted(4).unwrap();
        assert_eq!(moved.encap.unwrap().inner_transport, 88);
        assert_eq!(moved.encap.unwrap().outer_transport, 38);
        assert_eq!(tunnel.shifted(-35), None);
    }

    #[test]
    fn tunnel_gso_bits_are_named() {
        let t = GsoType::TCPV4 | GsoType::UDP_TUNNEL_CSUM;
        assert_eq!(format!("{t}"), "tcpv4|udp_tunnel_csum");
        assert_eq!(t.protocol(), Some(GsoProtocol::TcpV4));
        let meta = OffloadMeta { gso_type: t, gso_size: 1400, gso_segs: 2, ..Default::default() };
        assert!(meta.is_tunnel_gso());
        assert!(!OffloadMeta { gso_type: GsoType::TCPV4, ..meta }.is_tunnel_gso());
    }
}
