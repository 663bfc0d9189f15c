//! `virtio_net_hdr`: the offload metadata that TAP (`IFF_VNET_HDR`), AF_PACKET
//! (`PACKET_VNET_HDR`) and virtio-net put in front of every frame
//! (offload-rules section 4).
//!
//! - [`VirtioNetHdr::parse`] / [`VirtioNetHdr::emit`] handle the 10-byte
//!   basic, 12-byte (`mrg_rxbuf` / v1) and 24-byte (`v1_hash_tunnel`, UDP
//!   tunnel GSO) layouts in either byte order.
//! - [`VirtioNetHdr::to_meta`] imports a header written by an untrusted
//!   source, validated as the kernel's `virtio_net_hdr_to_skb` does
//!   (offload-rules 4.2). A bogus header is refused with a typed
//!   [`VirtioHdrError`]; nothing is guessed.
//! - [`VirtioNetHdr::from_meta`] exports a packet's metadata as the kernel's
//!   `virtio_net_hdr_from_skb` does (offload-rules 4.3).
//!
//! UDP tunnel GSO (a VXLAN or Geneve superpacket, offload-rules 4.2 "tunnel
//! variant"; [`GSO_UDP_TUNNEL_IPV4`], [`GSO_UDP_TUNNEL_IPV6`],
//! [`F_UDP_TUNNEL_CSUM`], [`HdrLayout::HashTunnel`]) is imported only when
//! the consumer negotiated it ([`ImportOptions::udp_tunnel`]) and exported
//! from a packet whose [`OffloadMeta::encap`] describes the tunnel.
//!
//! Where superpacket is stricter than the kernel (documented on
//! [`VirtioNetHdr::to_meta`]), it refuses at import what the kernel would
//! refuse later, at segmentation time, so that a bad superpacket never
//! travels through the device stack.
//!
//! A TSO superpacket through a TUN (`IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`),
//! whose offsets count from the IP header:
//!
//! ```
//! use superpacket::packet::virtio::{GSO_TCPV4, HdrByteOrder, HdrLayout, ImportOptions, VirtioNetHdr};
//! use superpacket::traffic::{Flow, FlowSpec, Transport};
//! use superpacket::wire::{Medium, TcpFlags};
//!
//! let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 0)).superpacket(4000, 1448, TcpFlags::empty()).unwrap();
//! let (ip, meta) = (&sp.linear()[14..], sp.meta.shifted(-14).unwrap()); // raw IP, as a TUN has it
//! let hdr = VirtioNetHdr::from_meta_as(&meta, ip, Medium::Ip, false).unwrap(); // export (TUN write)
//! assert_eq!((hdr.gso_type, hdr.gso_size, hdr.csum_start, hdr.hdr_len), (GSO_TCPV4, 1448, 20, 52));
//! let mut bytes = [0u8; 10];
//! hdr.emit(&mut bytes, HdrLayout::Basic, HdrByteOrder::Native).unwrap();
//! // Import (TUN read): parsed, then validated against the packet.
//! let read = VirtioNetHdr::parse(&bytes, HdrLayout::Basic, HdrByteOrder::Native).unwrap();
//! let imported = read.to_meta(ip, &ImportOptions { medium: Medium::Ip, ..Default::default() }).unwrap();
//! assert_eq!((imported.gso_size, imported.gso_segs, imported.csum), (1448, 3, meta.csum));
//! ```

use super::meta::{ChecksumState, Encapsulation, GsoProtocol, GsoType, OffloadMeta, TunnelKind};
pub use crate::wire::Medium;
use crate::wire::ethernet::parse_tags;
use crate::wire::geneve::GENEVE_PROTO_ETHERNET;
use crate::wire::vxlan::VXLAN_FLAG_I;
use crate::wire::{EtherType, FrameHeaders, L3Kind, L4Kind};

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the packet is CHECKSUM_PARTIAL.
pub const F_NEEDS_CSUM: u8 = 0x01;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was verified (receive side).
pub const F_DATA_VALID: u8 = 0x02;
/// `VIRTIO_NET_HDR_F_RSC_INFO`: checksum fields carry RSC information.
pub const F_RSC_INFO: u8 = 0x04;
/// `VIRTIO_NET_HDR_F_UDP_TUNNEL_CSUM`: a UDP tunnel superpacket whose outer
/// UDP checksum is to be computed for every segment (`SKB_GSO_UDP_TUNNEL_CSUM`).
pub const F_UDP_TUNNEL_CSUM: u8 = 0x08;

/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP` (legacy UFO).
pub const GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (USO).
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN` flag.
pub const GSO_ECN: u8 = 0x80;
/// `VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV4`: the inner GSO type (OR-ed in) is
/// carried in a UDP tunnel over outer IPv4.
pub const GSO_UDP_TUNNEL_IPV4: u8 = 0x20;
/// `VIRTIO_NET_HDR_GSO_UDP_TUNNEL_IPV6`: the same over outer IPv6.
pub const GSO_UDP_TUNNEL_IPV6: u8 = 0x40;
/// Both tunnel bits (`VIRTIO_NET_HDR_GSO_UDP_TUNNEL`); exactly one may be set.
pub const GSO_UDP_TUNNEL: u8 = GSO_UDP_TUNNEL_IPV4 | GSO_UDP_TUNNEL_IPV6;

/// `UDP_MAX_SEGMENTS` of current kernels (64 on older ones; offload-rules 9.2).
pub const UDP_MAX_SEGMENTS: usize = 128;
/// `GSO_BY_FRAGS`, a kernel-internal gso_size that userspace may not use.
pub const GSO_BY_FRAGS: u16 = 0xFFFF;

/// Which of the header layouts is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HdrLayout {
    /// `struct virtio_net_hdr`, 10 bytes (TAP and AF_PACKET default).
    #[default]
    Basic,
    /// `struct virtio_net_hdr_mrg_rxbuf` / `virtio_net_hdr_v1`, 12 bytes.
    MrgRxbuf,
    /// `struct virtio_net_hdr_v1_hash_tunnel`, 24 bytes: the v1 header, the
    /// hash report (le32 value, le16 report, le16 padding: written as zeros,
    /// ignored when read, as tun does) and the UDP tunnel offsets (le16
    /// `outer_th_offset`, le16 `inner_nh_offset`). Needed for UDP tunnel GSO
    /// (tun: `TUNSETVNETHDRSZ` 24).
    HashTunnel,
}

#[allow(clippy::len_without_is_empty)] // a header layout is never empty
impl HdrLayout {
    /// Size of the header in bytes.
    pub const fn len(self) -> usize {
        match self {
            HdrLayout::Basic => 10,
            HdrLayout::MrgRxbuf => 12,
            HdrLayout::HashTunnel => 24,
        }
    }
    /// The layout for a configured header size (`TUNSETVNETHDRSZ`,
    /// `PACKET_VNET_HDR_SZ`), if it is one superpacket speaks.
    pub fn from_len(len: usize) -> Option<HdrLayout> {
        match len {
            10 => Some(HdrLayout::Basic),
            12 => Some(HdrLayout::MrgRxbuf),
            24 => Some(HdrLayout::HashTunnel),
            _ => None,
        }
    }
}

/// Byte order of the 16-bit fields ("virtio16"): little-endian for virtio 1.0
/// and `TUNSETVNETLE`; host order for legacy TAP and always for AF_PACKET.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HdrByteOrder {
    /// Host byte order (legacy TAP, AF_PACKET).
    #[default]
    Native,
    /// Little-endian (virtio 1.0).
    Little,
    /// Big-endian (`TUNSETVNETBE`).
    Big,
}

impl HdrByteOrder {
    fn read(self, b: [u8; 2]) -> u16 {
        match self {
            HdrByteOrder::Native => u16::from_ne_bytes(b),
            HdrByteOrder::Little => u16::from_le_bytes(b),
            HdrByteOrder::Big => u16::from_be_bytes(b),
        }
    }
    fn write(self, v: u16) -> [u8; 2] {
        match self {
            HdrByteOrder::Native => v.to_ne_bytes(),
            HdrByteOrder::Little => v.to_le_bytes(),
            HdrByteOrder::Big => v.to_be_bytes(),
        }
    }
}

/// Why a virtio_net_hdr (with its frame) was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VirtioHdrError {
    /// Fewer bytes than the header layout needs.
    Truncated {
        /// Header size.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// A frame shorter than an Ethernet header, or (raw IP) an empty packet.
    FrameTooShort {
        /// Frame length.
        len: usize,
        /// How the frame was to start.
        medium: Medium,
    },
    /// `gso_type` is not NONE, TCPV4, TCPV6 or UDP_L4 (with the ECN flag).
    UnknownGsoType(u8),
    /// Legacy UFO (`VIRTIO_NET_HDR_GSO_UDP`) is not accepted.
    UfoUnsupported,
    /// A GSO type with `gso_size` 0.
    ZeroGsoSize {
        /// The raw gso_type.
        gso_type: u8,
    },
    /// `gso_size` equals the kernel-internal `GSO_BY_FRAGS`.
    GsoByFrags,
    /// `hdr_len` (possibly raised to cover the checksum field) passes the frame end.
    HdrLenBeyondFrame {
        /// Effective hdr_len.
        hdr_len: usize,
        /// Frame length.
        frame_len: usize,
    },
    /// `csum_start`/`csum_offset` (plus the L4 header) do not fit inside the frame.
    ChecksumOutsideFrame {
        /// csum_start.
        start: u16,
        /// csum_offset.
        offset: u16,
        /// Frame length.
        frame_len: usize,
    },
    /// The checksum offset does not match the GSO protocol (16 TCP, 6 UDP).
    WrongChecksumOffset {
        /// GSO protocol.
        protocol: GsoProtocol,
        /// csum_offset found.
        offset: u16,
        /// csum_offset required.
        expected: u16,
    },
    /// UDP_L4 without `NEEDS_CSUM`.
    UdpL4WithoutChecksum,
    /// UDP_L4 combined with the ECN flag or another type bit.
    UdpL4ExtraBits(u8),
    /// More UDP segments than `UDP_MAX_SEGMENTS`.
    TooManySegments {
        /// Segments the payload would need.
        segments: usize,
        /// The limit.
        max: usize,
    },
    /// The frame's headers could not be parsed for a GSO packet.
    BadHeaders(crate::wire::WireError),
    /// The frame is not TCP/UDP of the family `gso_type` states.
    ProtocolMismatch {
        /// Decoded gso type.
        gso_type: GsoType,
        /// What the frame holds.
        found: &'static str,
    },
    /// With GSO, `csum_start` must be the L4 header offset.
    ChecksumStartNotL4 {
        /// csum_start.
        start: u16,
        /// Offset of the L4 header.
        l4_offset: usize,
    },
    /// Export: the GSO type has no virtio representation (offload-rules 4.3).
    Unrepresentable(GsoType),
    /// A UDP tunnel GSO type, but the consumer did not negotiate tunnel GSO
    /// (tun: a header size under 24 bytes).
    TunnelNotNegotiated(u8),
    /// `F_UDP_TUNNEL_CSUM` without the outer-checksum variant negotiated.
    TunnelCsumNotNegotiated,
    /// Both `GSO_UDP_TUNNEL_IPV4` and `GSO_UDP_TUNNEL_IPV6`.
    TunnelBothFamilies,
    /// A tunnel GSO type whose inner type is NONE or UFO (the raw gso_type).
    TunnelInnerType(u8),
    /// Tunnel GSO without `NEEDS_CSUM` (the inner checksum must be partial).
    TunnelWithoutChecksum,
    /// Tunnel GSO with `DATA_VALID` (exclusive with `NEEDS_CSUM`).
    TunnelDataValid,
    /// The tunnel offsets are out of order (outer transport before the end
    /// of the minimal outer L2 + L3, inner network inside the outer UDP
    /// header, inner transport before the end of the minimal inner L3).
    TunnelOffsets {
        /// `outer_th_offset`.
        outer_th: u16,
        /// `inner_nh_offset`.
        inner_nh: u16,
        /// `csum_start` (the inner transport header).
        inner_th: u16,
    },
    /// The frame's bytes disagree with the tunnel header (why).
    TunnelHeaders(&'static str),
    /// A tunnel header emitted into a layout without the tunnel offsets.
    TunnelNeedsLayout {
        /// The layout's length.
        layout_len: usize,
    },
    /// Export: a tunnel superpacket whose metadata lacks what the header
    /// needs (why: no encapsulation offsets, no partial inner checksum).
    TunnelMetaIncomplete(&'static str),
}

impl std::fmt::Display for VirtioHdrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VirtioHdrError::Truncated { needed, available } => {
                write!(f, "virtio_net_hdr truncated: need {needed} bytes, have {available}")
            }
            VirtioHdrError::FrameTooShort { len, medium: Medium::Ethernet } => {
                write!(f, "frame of {len} bytes is shorter than an Ethernet header")
            }
            VirtioHdrError::FrameTooShort { len, medium: Medium::Ip } => {
                write!(f, "packet of {len} bytes has no IP header")
            }
            VirtioHdrError::UnknownGsoType(gso_type) => write!(f, "unknown gso_type {gso_type:#04x}"),
            VirtioHdrError::UfoUnsupported => f.write_str("legacy UFO (gso_type 3) is not supported"),
            VirtioHdrError::ZeroGsoSize { gso_type } => write!(f, "gso_type {gso_type:#04x} with gso_size 0"),
            VirtioHdrError::GsoByFrags => f.write_str("gso_size 0xffff (GSO_BY_FRAGS) is reserved"),
            VirtioHdrError::HdrLenBeyondFrame { hdr_len, frame_len } => {
                write!(f, "hdr_len {hdr_len} exceeds the frame length {frame_len}")
            }
            VirtioHdrError::ChecksumOutsideFrame { start, offset, frame_len } => {
                write!(f, "csum_start {start} + csum_offset {offset} lies outside the {frame_len}-byte frame")
            }
            VirtioHdrError::WrongChecksumOffset { protocol, offset, expected } => {
                write!(f, "csum_offset {offset} does not match {protocol:?} (expected {expected})")
            }
            VirtioHdrError::UdpL4WithoutChecksum => f.write_str("UDP_L4 GSO requires NEEDS_CSUM"),
            VirtioHdrError::UdpL4ExtraBits(bits) => write!(f, "UDP_L4 GSO with extra gso_type bits {bits:#04x}"),
            VirtioHdrError::TooManySegments { segments, max } => {
                write!(f, "UDP_L4 superpacket of {segments} segments exceeds the limit of {max}")
            }
            VirtioHdrError::BadHeaders(err) => write!(f, "GSO frame headers unreadable: {err}"),
            VirtioHdrError::ProtocolMismatch { gso_type, found } => {
                write!(f, "gso_type {gso_type} does not match the frame ({found})")
            }
            VirtioHdrError::ChecksumStartNotL4 { start, l4_offset } => {
                write!(f, "csum_start {start} is not the L4 header offset {l4_offset}")
            }
            VirtioHdrError::Unrepresentable(gso_type) => {
                write!(f, "gso_type {gso_type} cannot be expressed in a virtio_net_hdr")
            }
            VirtioHdrError::TunnelNotNegotiated(gso_type) => {
                write!(f, "UDP tunnel gso_type {gso_type:#04x} but tunnel GSO was not negotiated")
            }
            VirtioHdrError::TunnelCsumNotNegotiated => {
                f.write_str("UDP_TUNNEL_CSUM flag but the outer-checksum tunnel GSO was not negotiated")
            }
            VirtioHdrError::TunnelBothFamilies => f.write_str("both UDP_TUNNEL_IPV4 and UDP_TUNNEL_IPV6 are set"),
            VirtioHdrError::TunnelInnerType(gso_type) => {
                write!(f, "UDP tunnel gso_type {gso_type:#04x} without an inner TCP or UDP_L4 type")
            }
            VirtioHdrError::TunnelWithoutChecksum => f.write_str("UDP tunnel GSO requires NEEDS_CSUM"),
            VirtioHdrError::TunnelDataValid => f.write_str("UDP tunnel GSO with DATA_VALID"),
            VirtioHdrError::TunnelOffsets { outer_th, inner_nh, inner_th } => write!(
                f,
                "tunnel offsets out of order: outer transport {outer_th}, inner network {inner_nh}, inner transport {inner_th}"
            ),
            VirtioHdrError::TunnelHeaders(why) => write!(f, "UDP tunnel frame: {why}"),
            VirtioHdrError::TunnelNeedsLayout { layout_len } => {
                write!(f, "a UDP tunnel header needs the 24-byte layout, not {layout_len} bytes")
            }
            VirtioHdrError::TunnelMetaIncomplete(why) => write!(f, "UDP tunnel superpacket: {why}"),
        }
    }
}

impl std::error::Error for VirtioHdrError {}

impl VirtioHdrError {
    /// A short stable name for drop counters ("zero-gso-size", ...).
    pub fn reason(&self) -> &'static str {
        match self {
            VirtioHdrError::Truncated { .. } => "header-truncated",
            VirtioHdrError::FrameTooShort { .. } => "frame-too-short",
            VirtioHdrError::UnknownGsoType(_) => "unknown-gso-type",
            VirtioHdrError::UfoUnsupported => "ufo-unsupported",
            VirtioHdrError::ZeroGsoSize { .. } => "zero-gso-size",
            VirtioHdrError::GsoByFrags => "gso-by-frags",
            VirtioHdrError::HdrLenBeyondFrame { .. } => "hdr-len-beyond-frame",
            VirtioHdrError::ChecksumOutsideFrame { .. } => "csum-outside-frame",
            VirtioHdrError::WrongChecksumOffset { .. } => "wrong-csum-offset",
            VirtioHdrError::UdpL4WithoutChecksum => "udp-l4-without-csum",
            VirtioHdrError::UdpL4ExtraBits(_) => "udp-l4-extra-bits",
            VirtioHdrError::TooManySegments { .. } => "too-many-segments",
            VirtioHdrError::BadHeaders(_) => "bad-headers",
            VirtioHdrError::ProtocolMismatch { .. } => "protocol-mismatch",
            VirtioHdrError::ChecksumStartNotL4 { .. } => "csum-start-not-l4",
            VirtioHdrError::Unrepresentable(_) => "unrepresentable-gso-type",
            VirtioHdrError::TunnelNotNegotiated(_) => "tunnel-not-negotiated",
            VirtioHdrError::TunnelCsumNotNegotiated => "tunnel-csum-not-negotiated",
            VirtioHdrError::TunnelBothFamilies => "tunnel-both-families",
            VirtioHdrError::TunnelInnerType(_) => "tunnel-inner-type",
            VirtioHdrError::TunnelWithoutChecksum => "tunnel-without-csum",
            VirtioHdrError::TunnelDataValid => "tunnel-data-valid",
            VirtioHdrError::TunnelOffsets { .. } => "tunnel-bad-offsets",
            VirtioHdrError::TunnelHeaders(_) => "tunnel-bad-headers",
            VirtioHdrError::TunnelNeedsLayout { .. } => "tunnel-needs-24-byte-header",
            VirtioHdrError::TunnelMetaIncomplete(_) => "tunnel-meta-incomplete",
        }
    }
}

/// Options for [`VirtioNetHdr::to_meta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportOptions {
    /// Limit on UDP_L4 segments (128 current Linux, 64 older).
    pub udp_max_segments: usize,
    /// Map `DATA_VALID` to [`ChecksumState::Unnecessary`]. The kernel's helper
    /// ignores it on input (offload-rules 4.2 step 6), so this is off by default.
    pub trust_data_valid: bool,
    /// How the frame starts: Ethernet (TAP) or raw IP (TUN). Offsets in the
    /// header count from the frame's first byte either way.
    pub medium: Medium,
    /// UDP tunnel GSO was negotiated (virtio `VIRTIO_NET_F_*_UDP_TUNNEL_GSO`;
    /// tun: a header of 24 bytes or more): headers with the tunnel bits are
    /// validated, else refused ([`VirtioHdrError::TunnelNotNegotiated`]).
    pub udp_tunnel: bool,
    /// The outer-checksum variant too ([`F_UDP_TUNNEL_CSUM`] accepted).
    pub udp_tunnel_csum: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            udp_max_segments: UDP_MAX_SEGMENTS,
            trust_data_valid: false,
            medium: Medium::Ethernet,
            udp_tunnel: false,
            udp_tunnel_csum: false,
        }
    }
}

impl ImportOptions {
    /// These options with UDP tunnel GSO (both variants) negotiated or not.
    pub fn with_udp_tunnel(self, on: bool) -> ImportOptions {
        ImportOptions { udp_tunnel: on, udp_tunnel_csum: on, ..self }
    }
}

/// The decoded header. Field meanings: offload-rules 4.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VirtioNetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`, `F_RSC_INFO` bits.
    pub flags: u8,
    /// `GSO_*` value, possibly with [`GSO_ECN`].
    pub gso_type: u8,
    /// Length of the headers (a hint).
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Offset from the frame start where checksumming starts.
    pub csum_start: u16,
    /// Offset from `csum_start` of the checksum field.
    pub csum_offset: u16,
    /// Buffers used (12- and 24-byte layouts; 0 otherwise).
    pub num_buffers: u16,
    /// UDP tunnel GSO: offset of the outer UDP header from the frame start
    /// (24-byte layout only, always little-endian; 0 otherwise).
    pub outer_th_offset: u16,
    /// UDP tunnel GSO: offset of the inner IP header from the frame start
    /// (24-byte layout only, always little-endian; 0 otherwise).
    pub inner_nh_offset: u16,
}

impl VirtioNetHdr {
    /// Decodes a header from the start of `bytes`.
    ///
    /// # Errors
    /// [`VirtioHdrError::Truncated`] if `bytes` is shorter than the layout.
    #[inline(always)]
    pub fn parse(bytes: &[u8], layout: HdrLayout, order: HdrByteOrder) -> Result<VirtioNetHdr, VirtioHdrError> {
        if bytes.len() < layout.len() {
            return Err(VirtioHdrError::Truncated { needed: layout.len(), available: bytes.len() });
        }
        let field = |at: usize| order.read([bytes[at], bytes[at + 1]]);
        let le = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let tunnel = layout == HdrLayout::HashTunnel;
        Ok(VirtioNetHdr {
            flags: bytes[0],
            gso_type: bytes[1],
            hdr_len: field(2),
            gso_size: field(4),
            csum_start: field(6),
            csum_offset: field(8),
            num_buffers: if layout == HdrLayout::Basic { 0 } else { field(10) },
            outer_th_offset: if tunnel { le(20) } else { 0 },
            inner_nh_offset: if tunnel { le(22) } else { 0 },
        })
    }

    /// True if `gso_type` has a UDP tunnel bit.
    pub fn is_tunnel(&self) -> bool {
        self.gso_type & GSO_UDP_TUNNEL != 0
    }

    /// Encodes the header into the start of `out` (the 24-byte layout's
    /// hash fields as zeros).
    ///
    /// # Errors
    /// [`VirtioHdrError::Truncated`] if `out` is shorter than the layout;
    /// [`VirtioHdrError::TunnelNeedsLayout`] for tunnel offsets in a layout
    /// without room for them (they would be lost). The bytes of a header
    /// parsed from a shorter layout are written back as they were, tunnel
    /// bits in `gso_type` included: refusing those is import's job
    /// ([`VirtioNetHdr::to_meta`]), as it is the kernel's.
    pub fn emit(&self, out: &mut [u8], layout: HdrLayout, order: HdrByteOrder) -> Result<(), VirtioHdrError> {
        if out.len() < layout.len() {
            return Err(VirtioHdrError::Truncated { needed: layout.len(), available: out.len() });
        }
        let offsets = self.outer_th_offset != 0 || self.inner_nh_offset != 0;
        if offsets && layout != HdrLayout::HashTunnel {
            return Err(VirtioHdrError::TunnelNeedsLayout { layout_len: layout.len() });
        }
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&order.write(self.hdr_len));
        out[4..6].copy_from_slice(&order.write(self.gso_size));
        out[6..8].copy_from_slice(&order.write(self.csum_start));
        out[8..10].copy_from_slice(&order.write(self.csum_offset));
        if layout != HdrLayout::Basic {
            out[10..12].copy_from_slice(&order.write(self.num_buffers));
        }
        if layout == HdrLayout::HashTunnel {
            out[12..20].fill(0);
            out[20..22].copy_from_slice(&self.outer_th_offset.to_le_bytes());
            out[22..24].copy_from_slice(&self.inner_nh_offset.to_le_bytes());
        }
        Ok(())
    }

    /// The shortest frame [`VirtioNetHdr::to_meta`] accepts on `medium`
    /// (its rule 1): a link header, and at least one byte.
    #[inline(always)]
    pub fn shortest_frame(medium: Medium) -> usize {
        medium.link_header_len().max(1)
    }

    /// Validates this header against the `frame` it precedes (an Ethernet
    /// frame, or a raw IP packet with [`ImportOptions::medium`] =
    /// [`Medium::Ip`]; offsets count from its first byte either way) and
    /// returns the packet metadata, following `virtio_net_hdr_to_skb`
    /// (offload-rules 4.2) and the TAP/TUN write path (4.4):
    ///
    /// 1. the frame holds at least an Ethernet header (raw IP: one byte, the
    ///    IP version is checked with the headers); `hdr_len`, raised to
    ///    cover the checksum field when `NEEDS_CSUM`, lies inside the frame;
    /// 2. `gso_type` without ECN is NONE, TCPV4, TCPV6 or UDP_L4 (UFO is
    ///    refused); a GSO type needs a non-zero `gso_size` other than 0xFFFF;
    /// 3. `NEEDS_CSUM`: `csum_start + max(L4 min header, csum_offset + 2)` lies
    ///    inside the frame; the packet becomes [`ChecksumState::Partial`];
    /// 4. UDP_L4 needs `NEEDS_CSUM` with `csum_offset` 6, no extra bits, and at
    ///    most `udp_max_segments` segments; TCP with `NEEDS_CSUM` needs 16;
    /// 5. a GSO frame must be TCP (TCPV4: over IPv4, TCPV6: over IPv6) or UDP
    ///    (UDP_L4) and not an IP fragment, and with `NEEDS_CSUM` its
    ///    `csum_start` must be the L4 header. (The kernel's dissector checks the
    ///    protocol; the exact `csum_start` it checks only at segmentation time,
    ///    offload-rules 3.2/3.3. superpacket refuses at import.);
    /// 6. a GSO packet whose payload (after the full L4 header) is not larger
    ///    than `gso_size` is an ordinary packet; otherwise it is marked DODGY
    ///    (untrusted origin) with `gso_segs` computed.
    ///
    /// # UDP tunnel GSO
    /// A `gso_type` with [`GSO_UDP_TUNNEL_IPV4`] or [`GSO_UDP_TUNNEL_IPV6`]
    /// follows `virtio_net_hdr_tnl_to_skb` (offload-rules 4.2, tunnel
    /// variant), after rule 1:
    ///
    /// - T1: tunnel GSO negotiated ([`ImportOptions::udp_tunnel`]); exactly
    ///   one of the two tunnel bits; the inner type (the rest without ECN)
    ///   TCPV4, TCPV6 or UDP_L4, not NONE or UFO; `NEEDS_CSUM` set
    ///   (`csum_start` is the inner transport header) and `DATA_VALID` clear
    ///   (the virtio-net driver's rule; tun never writes it);
    /// - T2: the offsets in order: `outer_th_offset` ≥ link header + minimal
    ///   outer IP header (20, IPv6 40), `inner_nh_offset` ≥
    ///   `outer_th_offset` + 8, `csum_start` ≥ `inner_nh_offset` + minimal
    ///   inner IP header (40 for TCPV6);
    /// - T3: rules 2 to 4 with the inner type; [`F_UDP_TUNNEL_CSUM`] only
    ///   with [`ImportOptions::udp_tunnel_csum`] (it selects
    ///   [`GsoType::UDP_TUNNEL_CSUM`], else [`GsoType::UDP_TUNNEL`]);
    /// - T4 (superpacket's own, the kernel trusts the offsets): the outer IP
    ///   version is the one the tunnel bit states and `outer_th_offset` is its
    ///   unfragmented UDP header; the tunnel is identified from the bytes
    ///   after it, not from the UDP port (the kernel does not care which
    ///   protocol it is): a Geneve header (version 0, protocol 0x6558) and its
    ///   options, else a VXLAN header (I flag) of 8 bytes, whichever is
    ///   followed by an Ethernet header (VLAN tags allowed) ending exactly at
    ///   `inner_nh_offset`; anything else (VXLAN-GPE, Geneve carrying IP, an
    ///   unknown tunnel) is refused, since [`Encapsulation`] needs an inner
    ///   MAC header and a [`TunnelKind`]; the inner headers then obey rule 5
    ///   with `csum_start` the inner L4 header;
    /// - T5: rule 6 on the inner payload; the metadata gets
    ///   [`OffloadMeta::encap`] (also when the packet is too small to be GSO:
    ///   its partial checksum is the inner one).
    ///
    /// # Errors
    /// The first rule the header breaks, as a [`VirtioHdrError`].
    #[inline(always)]
    pub fn to_meta(&self, frame: &[u8], opts: &ImportOptions) -> Result<OffloadMeta, VirtioHdrError> {
        if frame.len() < Self::shortest_frame(opts.medium) {
            return Err(VirtioHdrError::FrameTooShort { len: frame.len(), medium: opts.medium });
        }
        let needs_csum = self.flags & F_NEEDS_CSUM != 0;
        let mut hdr_len = self.hdr_len as usize;
        if needs_csum {
            hdr_len = hdr_len.max(self.csum_start as usize + self.csum_offset as usize + 2);
        }
        if hdr_len > frame.len() {
            return Err(VirtioHdrError::HdrLenBeyondFrame { hdr_len, frame_len: frame.len() });
        }
        // No flag and no GSO (every small frame a guest sends without a
        // partial checksum): rules 2 to 6 have nothing to check and the
        // metadata is the default, what `base_rules` would return.
        if self.flags == 0 && self.gso_type == 0 {
            return Ok(OffloadMeta::default());
        }
        self.offload_to_meta(frame, opts)
    }

    /// Rules 2 to 6 (and T1 to T5) of [`VirtioNetHdr::to_meta`], for a
    /// header with a flag or a GSO type whose lengths rule 1 accepted: out
    /// of line, so that the plain header's import stays a few compares
    /// where it is inlined.
    fn offload_to_meta(&self, frame: &[u8], opts: &ImportOptions) -> Result<OffloadMeta, VirtioHdrError> {
        let needs_csum = self.flags & F_NEEDS_CSUM != 0;
        if self.is_tunnel() {
            return self.tunnel_to_meta(frame, opts);
        }

        let (protocol, mut meta) = self.base_rules(self.gso_type, frame, opts)?;
        let Some(protocol) = protocol else {
            return Ok(meta);
        };
        let headers = opts.medium.parse(frame).map_err(VirtioHdrError::BadHeaders)?;
        check_l4(protocol, &headers)?;
        if needs_csum && self.csum_start as usize != headers.l4_offset {
            return Err(VirtioHdrError::ChecksumStartNotL4 { start: self.csum_start, l4_offset: headers.l4_offset });
        }
        self.set_gso(&mut meta, protocol, headers.payload_len, protocol.gso_type(), opts)?;
        Ok(meta)
    }

    /// Rules 2 to 4 of [`VirtioNetHdr::to_meta`] for `gso_type` (the tunnel
    /// bits taken off): the GSO protocol (`None`: not GSO) and the metadata
    /// with the checksum state.
    fn base_rules(
        &self,
        gso_type: u8,
        frame: &[u8],
        opts: &ImportOptions,
    ) -> Result<(Option<GsoProtocol>, OffloadMeta), VirtioHdrError> {
        let needs_csum = self.flags & F_NEEDS_CSUM != 0;
        let ecn = gso_type & GSO_ECN != 0;
        let protocol = match gso_type & !GSO_ECN {
            GSO_NONE if !ecn => None,
            GSO_TCPV4 => Some(GsoProtocol::TcpV4),
            GSO_TCPV6 => Some(GsoProtocol::TcpV6),
            GSO_UDP_L4 => Some(GsoProtocol::UdpL4),
            GSO_UDP => return Err(VirtioHdrError::UfoUnsupported),
            _ => return Err(VirtioHdrError::UnknownGsoType(self.gso_type)),
        };
        if protocol.is_some() {
            if self.gso_size == 0 {
                return Err(VirtioHdrError::ZeroGsoSize { gso_type: self.gso_type });
            }
            if self.gso_size == GSO_BY_FRAGS {
                return Err(VirtioHdrError::GsoByFrags);
            }
        }

        let mut meta = OffloadMeta::default();
        if needs_csum {
            let l4_min = match protocol {
                Some(GsoProtocol::TcpV4 | GsoProtocol::TcpV6) => 20,
                Some(GsoProtocol::UdpL4) => 8,
                None => 0,
            };
            let needed = self.csum_start as usize + l4_min.max(self.csum_offset as usize + 2);
            if needed > frame.len() {
                return Err(VirtioHdrError::ChecksumOutsideFrame {
                    start: self.csum_start,
                    offset: self.csum_offset,
                    frame_len: frame.len(),
                });
            }
            meta.csum = ChecksumState::Partial { start: self.csum_start, offset: self.csum_offset };
        } else if self.flags & F_DATA_VALID != 0 && opts.trust_data_valid {
            meta.csum = ChecksumState::Unnecessary { level: 0 };
        }

        let Some(protocol) = protocol else {
            return Ok((None, meta));
        };
        if protocol == GsoProtocol::UdpL4 {
            if !needs_csum {
                return Err(VirtioHdrError::UdpL4WithoutChecksum);
            }
            if ecn {
                return Err(VirtioHdrError::UdpL4ExtraBits(self.gso_type));
            }
        }
        if needs_csum && self.csum_offset != protocol.csum_offset() {
            return Err(VirtioHdrError::WrongChecksumOffset {
                protocol,
                offset: self.csum_offset,
                expected: protocol.csum_offset(),
            });
        }
        Ok((Some(protocol), meta))
    }

    /// Rules 4 (segment limit) and 6 of [`VirtioNetHdr::to_meta`]: marks
    /// `meta` GSO of type `gso_type` (plus DODGY and ECN) if `payload`
    /// exceeds `gso_size`.
    fn set_gso(
        &self,
        meta: &mut OffloadMeta,
        protocol: GsoProtocol,
        payload: usize,
        gso_type: GsoType,
        opts: &ImportOptions,
    ) -> Result<(), VirtioHdrError> {
        let gso_size = self.gso_size as usize;
        if protocol == GsoProtocol::UdpL4 && payload > gso_size * opts.udp_max_segments {
            return Err(VirtioHdrError::TooManySegments {
                segments: payload.div_ceil(gso_size),
                max: opts.udp_max_segments,
            });
        }
        if payload > gso_size {
            meta.gso_type = gso_type | GsoType::DODGY;
            if self.gso_type & GSO_ECN != 0 {
                meta.gso_type |= GsoType::TCP_ECN;
            }
            meta.gso_size = self.gso_size;
            // At most 65535 bytes / 1 byte per segment: fits in u16.
            meta.gso_segs = payload.div_ceil(gso_size).min(u16::MAX as usize) as u16;
        }
        Ok(())
    }

    /// [`VirtioNetHdr::to_meta`] for a header with a UDP tunnel bit (the
    /// rules: [`VirtioNetHdr::to_meta`], "UDP tunnel GSO").
    fn tunnel_to_meta(&self, frame: &[u8], opts: &ImportOptions) -> Result<OffloadMeta, VirtioHdrError> {
        if !opts.udp_tunnel {
            return Err(VirtioHdrError::TunnelNotNegotiated(self.gso_type));
        }
        let tunnel_bits = self.gso_type & GSO_UDP_TUNNEL;
        if tunnel_bits == GSO_UDP_TUNNEL {
            return Err(VirtioHdrError::TunnelBothFamilies);
        }
        let inner_type = self.gso_type & !(GSO_ECN | GSO_UDP_TUNNEL);
        if inner_type == GSO_NONE || inner_type == GSO_UDP {
            return Err(VirtioHdrError::TunnelInnerType(self.gso_type));
        }
        if self.flags & F_NEEDS_CSUM == 0 {
            return Err(VirtioHdrError::TunnelWithoutChecksum);
        }
        if self.flags & F_DATA_VALID != 0 {
            return Err(VirtioHdrError::TunnelDataValid);
        }
        let outer_v6 = tunnel_bits == GSO_UDP_TUNNEL_IPV6;
        let l3_min = |v6: bool| if v6 { 40 } else { 20 };
        let (outer_th, inner_nh, inner_th) =
            (self.outer_th_offset as usize, self.inner_nh_offset as usize, self.csum_start as usize);
        // The inner family is known from the type for TCP; a USO inner IPv6
        // header is checked below, once parsed.
        if outer_th < opts.medium.link_header_len() + l3_min(outer_v6)
            || inner_nh < outer_th + 8
            || inner_th < inner_nh + l3_min(inner_type == GSO_TCPV6)
        {
            return Err(VirtioHdrError::TunnelOffsets {
                outer_th: self.outer_th_offset,
                inner_nh: self.inner_nh_offset,
                inner_th: self.csum_start,
            });
        }
        let (protocol, mut meta) = self.base_rules(self.gso_type & !GSO_UDP_TUNNEL, frame, opts)?;
        let Some(protocol) = protocol else {
            return Err(VirtioHdrError::TunnelInnerType(self.gso_type));
        };
        let tunnel_gso = if self.flags & F_UDP_TUNNEL_CSUM != 0 {
            if !opts.udp_tunnel_csum {
                return Err(VirtioHdrError::TunnelCsumNotNegotiated);
            }
            GsoType::UDP_TUNNEL_CSUM
        } else {
            GsoType::UDP_TUNNEL
        };

        // What the kernel takes on trust, checked against the bytes.
        let outer = opts.medium.parse(frame).map_err(VirtioHdrError::BadHeaders)?;
        match (outer.l3, outer_v6) {
            (L3Kind::Ipv4, false) | (L3Kind::Ipv6, true) => {}
            _ => return Err(VirtioHdrError::TunnelHeaders("the outer IP version is not the one gso_type states")),
        }
        if outer.is_fragment || outer.l4 != L4Kind::Udp || outer.l4_offset != outer_th {
            return Err(VirtioHdrError::TunnelHeaders("outer_th_offset is not an outer UDP header"));
        }
        let (tunnel, inner_mac) = identify_tunnel(frame, outer_th, inner_nh)?;
        let inner = FrameHeaders::parse(&frame[inner_mac..]).map_err(VirtioHdrError::BadHeaders)?;
        check_l4(protocol, &inner)?;
        let l4_offset = inner_mac + inner.l4_offset;
        if inner_th != l4_offset {
            return Err(VirtioHdrError::ChecksumStartNotL4 { start: self.csum_start, l4_offset });
        }
        meta.encap = Some(Encapsulation {
            tunnel,
            outer_transport: self.outer_th_offset,
            inner_mac: inner_mac as u16,
            inner_network: self.inner_nh_offset,
            inner_transport: self.csum_start,
        });
        self.set_gso(&mut meta, protocol, inner.payload_len, protocol.gso_type() | tunnel_gso, opts)?;
        Ok(meta)
    }

    /// Builds the header for handing `frame` with `meta` to a consumer
    /// (offload-rules 4.3): GSO type from TCPV4, TCPV6, UDP_L4 (that priority)
    /// plus ECN; `NEEDS_CSUM` for a partial checksum; `DATA_VALID` for
    /// [`ChecksumState::Unnecessary`] when `allow_data_valid`; `hdr_len` is
    /// the real length of the headers up to the end of the L4 header.
    ///
    /// A UDP tunnel superpacket ([`OffloadMeta::is_tunnel_gso`]) gets the
    /// tunnel header (`virtio_net_hdr_tnl_from_skb`): the inner type plus
    /// [`GSO_UDP_TUNNEL_IPV4`] or [`GSO_UDP_TUNNEL_IPV6`] (the outer IP
    /// version), `NEEDS_CSUM` with the inner partial checksum,
    /// [`F_UDP_TUNNEL_CSUM`] for [`GsoType::UDP_TUNNEL_CSUM`], the offsets of
    /// the outer UDP and inner IP headers from [`OffloadMeta::encap`],
    /// `hdr_len` to the end of the inner L4 header, never `DATA_VALID`. It
    /// needs the 24-byte layout ([`HdrLayout::HashTunnel`]) to be emitted.
    ///
    /// `frame` is an Ethernet frame; [`VirtioNetHdr::from_meta_as`] takes
    /// either medium.
    ///
    /// # Errors
    /// [`VirtioHdrError::Unrepresentable`] for a GSO type virtio cannot carry;
    /// [`VirtioHdrError::BadHeaders`] if a GSO frame's headers do not parse;
    /// [`VirtioHdrError::TunnelMetaIncomplete`] for a tunnel superpacket
    /// without its offsets or a partial inner checksum.
    pub fn from_meta(meta: &OffloadMeta, frame: &[u8], allow_data_valid: bool) -> Result<VirtioNetHdr, VirtioHdrError> {
        VirtioNetHdr::from_meta_as(meta, frame, Medium::Ethernet, allow_data_valid)
    }

    /// [`VirtioNetHdr::from_meta`] for a `frame` of `medium`: a raw IP packet
    /// for a TUN device ([`Medium::Ip`]), whose `csum_start` and `hdr_len`
    /// count from the IP header.
    ///
    /// # Errors
    /// As [`VirtioNetHdr::from_meta`].
    pub fn from_meta_as(
        meta: &OffloadMeta,
        frame: &[u8],
        medium: Medium,
        allow_data_valid: bool,
    ) -> Result<VirtioNetHdr, VirtioHdrError> {
        if meta.is_tunnel_gso() {
            return tunnel_from_meta(meta, frame, medium);
        }
        let mut hdr = VirtioNetHdr::default();
        if meta.is_gso() {
            let t = meta.gso_type;
            hdr.gso_type = if t.contains(GsoType::TCPV4) {
                GSO_TCPV4
            } else if t.contains(GsoType::TCPV6) {
                GSO_TCPV6
            } else if t.contains(GsoType::UDP_L4) {
                GSO_UDP_L4
            } else {
                return Err(VirtioHdrError::Unrepresentable(t));
            };
            if t.contains(GsoType::TCP_ECN) {
                hdr.gso_type |= GSO_ECN;
            }
            hdr.gso_size = meta.gso_size;
            let hdr_end = match medium.parse(frame) {
                Ok(headers) => headers.payload_offset,
                // `frame` may be only the linear area of a packet whose payload
                // lives in segments (a GRO aggregate), so the IP length exceeds
                // it: the L4 header end follows from the partial checksum.
                Err(e) => match meta.csum {
                    ChecksumState::Partial { start, offset } => {
                        l4_header_end(frame, start as usize, offset).ok_or(VirtioHdrError::BadHeaders(e))?
                    }
                    _ => return Err(VirtioHdrError::BadHeaders(e)),
                },
            };
            hdr.hdr_len = u16::try_from(hdr_end).unwrap_or(u16::MAX);
        }
        match meta.csum {
            ChecksumState::Partial { start, offset } => {
                hdr.flags = F_NEEDS_CSUM;
                hdr.csum_start = start;
                hdr.csum_offset = offset;
            }
            ChecksumState::Unnecessary { .. } if allow_data_valid => hdr.flags = F_DATA_VALID,
            _ => {}
        }
        Ok(hdr)
    }
}

/// Rule 5 of [`VirtioNetHdr::to_meta`]: `headers` are TCP or UDP of the
/// family `protocol` states, not an IP fragment.
fn check_l4(protocol: GsoProtocol, headers: &FrameHeaders) -> Result<(), VirtioHdrError> {
    let found = match (headers.l3, headers.l4) {
        _ if headers.is_fragment => "an IP fragment",
        (L3Kind::Ipv4, L4Kind::Tcp) if protocol == GsoProtocol::TcpV4 => "",
        (L3Kind::Ipv6, L4Kind::Tcp) if protocol == GsoProtocol::TcpV6 => "",
        (L3Kind::Ipv4 | L3Kind::Ipv6, L4Kind::Udp) if protocol == GsoProtocol::UdpL4 => "",
        (L3Kind::Ipv4, L4Kind::Tcp) => "TCP over IPv4",
        (L3Kind::Ipv6, L4Kind::Tcp) => "TCP over IPv6",
        (L3Kind::Ipv4, L4Kind::Udp) => "UDP over IPv4",
        (L3Kind::Ipv6, L4Kind::Udp) => "UDP over IPv6",
        (L3Kind::Ipv4 | L3Kind::Ipv6, _) => "IP without TCP/UDP",
        _ => "not IP",
    };
    if found.is_empty() {
        Ok(())
    } else {
        Err(VirtioHdrError::ProtocolMismatch { gso_type: protocol.gso_type(), found })
    }
}

/// The tunnel whose header follows the outer UDP header at `outer_th` and
/// the offset of the inner Ethernet header, which must end (after any VLAN
/// tags) at `inner_nh` (rule T4 of [`VirtioNetHdr::to_meta`]).
fn identify_tunnel(frame: &[u8], outer_th: usize, inner_nh: usize) -> Result<(TunnelKind, usize), VirtioHdrError> {
    let th = outer_th + 8;
    let Some(tnl) = frame.get(th..th + 8) else {
        return Err(VirtioHdrError::TunnelHeaders("the frame ends before the tunnel header"));
    };
    let geneve = (tnl[0] >> 6 == 0 && u16::from_be_bytes([tnl[2], tnl[3]]) == GENEVE_PROTO_ETHERNET)
        .then(|| (TunnelKind::Geneve, th + 8 + usize::from(tnl[0] & 0x3f) * 4));
    let vxlan = (tnl[0] & VXLAN_FLAG_I != 0).then_some((TunnelKind::Vxlan, th + 8));
    for (kind, inner_mac) in [geneve, vxlan].into_iter().flatten() {
        if inner_mac + 14 <= inner_nh && matches!(parse_tags(frame, inner_mac + 12), Ok((_, _, l3)) if l3 == inner_nh) {
            return Ok((kind, inner_mac));
        }
    }
    Err(VirtioHdrError::TunnelHeaders(
        "no VXLAN or Geneve header followed by an Ethernet header ending at inner_nh_offset",
    ))
}

/// Whether the outer IP header of `frame` (of `medium`) is IPv6 (`false`:
/// IPv4).
fn outer_is_v6(frame: &[u8], medium: Medium) -> Result<bool, VirtioHdrError> {
    let not_ip = VirtioHdrError::TunnelHeaders("the outer header is not IP");
    let ethertype = match medium {
        Medium::Ethernet => parse_tags(frame, 12).map_err(|_| not_ip.clone())?.1,
        Medium::Ip => Medium::ip_ethertype(frame).map_err(|_| not_ip.clone())?,
    };
    match ethertype {
        EtherType::IPV4 => Ok(false),
        EtherType::IPV6 => Ok(true),
        _ => Err(not_ip),
    }
}

/// [`VirtioNetHdr::from_meta_as`] for a UDP tunnel superpacket
/// (`virtio_net_hdr_tnl_from_skb`).
fn tunnel_from_meta(meta: &OffloadMeta, frame: &[u8], medium: Medium) -> Result<VirtioNetHdr, VirtioHdrError> {
    let t = meta.gso_type;
    let encap = meta.encap.ok_or(VirtioHdrError::TunnelMetaIncomplete("no encapsulation offsets"))?;
    let ChecksumState::Partial { start, offset } = meta.csum else {
        return Err(VirtioHdrError::TunnelMetaIncomplete("the inner checksum is not partial"));
    };
    if start != encap.inner_transport {
        return Err(VirtioHdrError::TunnelMetaIncomplete("the partial checksum does not start at the inner L4 header"));
    }
    let mut gso_type = if t.contains(GsoType::TCPV4) {
        GSO_TCPV4
    } else if t.contains(GsoType::TCPV6) {
        GSO_TCPV6
    } else if t.contains(GsoType::UDP_L4) {
        GSO_UDP_L4
    } else {
        return Err(VirtioHdrError::Unrepresentable(t));
    };
    if t.contains(GsoType::TCP_ECN) {
        gso_type |= GSO_ECN;
    }
    gso_type |= if outer_is_v6(frame, medium)? { GSO_UDP_TUNNEL_IPV6 } else { GSO_UDP_TUNNEL_IPV4 };
    let mut flags = F_NEEDS_CSUM;
    if t.contains(GsoType::UDP_TUNNEL_CSUM) {
        flags |= F_UDP_TUNNEL_CSUM;
    }
    let hdr_end = l4_header_end(frame, start as usize, offset)
        .ok_or(VirtioHdrError::TunnelHeaders("the inner L4 header is not inside the frame"))?;
    Ok(VirtioNetHdr {
        flags,
        gso_type,
        hdr_len: u16::try_from(hdr_end).unwrap_or(u16::MAX),
        gso_size: meta.gso_size,
        csum_start: start,
        csum_offset: offset,
        num_buffers: 0,
        outer_th_offset: encap.outer_transport,
        inner_nh_offset: encap.inner_network,
    })
}

/// End of the TCP (checksum at offset 16) or UDP (offset 6) header that
/// starts at `start` in `frame`, if it lies inside `frame`.
fn l4_header_end(frame: &[u8], start: usize, csum_offset: u16) -> Option<usize> {
    let len = match csum_offset {
        16 => usize::from(*frame.get(start + 12)? >> 4) * 4,
        6 => 8,
        _ => return None,
    };
    (len >= 8 && start + len <= frame.len()).then_some(start + len)
}

#[cfg(test)]
mod tests;
