//! `virtio_net_hdr`: the offload metadata that TAP (`IFF_VNET_HDR`), AF_PACKET
//! (`PACKET_VNET_HDR`) and virtio-net put in front of every frame
//! (offload-rules section 4).
//!
//! - [`VirtioNetHdr::parse`] / [`VirtioNetHdr::emit`] handle the 10-byte
//!   basic and 12-byte (`mrg_rxbuf` / v1) layouts in either byte order.
//! - [`VirtioNetHdr::to_meta`] imports a header written by an untrusted
//!   source, validated as the kernel's `virtio_net_hdr_to_skb` does
//!   (offload-rules 4.2). A bogus header is refused with a typed
//!   [`VirtioHdrError`]; nothing is guessed.
//! - [`VirtioNetHdr::from_meta`] exports a packet's metadata as the kernel's
//!   `virtio_net_hdr_from_skb` does (offload-rules 4.3).
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

use super::meta::{ChecksumState, GsoProtocol, GsoType, OffloadMeta};
pub use crate::wire::Medium;
use crate::wire::{L3Kind, L4Kind};

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the packet is CHECKSUM_PARTIAL.
pub const F_NEEDS_CSUM: u8 = 0x01;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was verified (receive side).
pub const F_DATA_VALID: u8 = 0x02;
/// `VIRTIO_NET_HDR_F_RSC_INFO`: checksum fields carry RSC information.
pub const F_RSC_INFO: u8 = 0x04;

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
}

#[allow(clippy::len_without_is_empty)] // a header layout is never empty
impl HdrLayout {
    /// Size of the header in bytes.
    pub const fn len(self) -> usize {
        match self {
            HdrLayout::Basic => 10,
            HdrLayout::MrgRxbuf => 12,
        }
    }
    /// The layout for a configured header size (`TUNSETVNETHDRSZ`,
    /// `PACKET_VNET_HDR_SZ`), if it is one superpacket speaks.
    pub fn from_len(len: usize) -> Option<HdrLayout> {
        match len {
            10 => Some(HdrLayout::Basic),
            12 => Some(HdrLayout::MrgRxbuf),
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
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { udp_max_segments: UDP_MAX_SEGMENTS, trust_data_valid: false, medium: Medium::Ethernet }
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
    /// Buffers used (12-byte layout only; 0 otherwise).
    pub num_buffers: u16,
}

impl VirtioNetHdr {
    /// Decodes a header from the start of `bytes`.
    ///
    /// # Errors
    /// [`VirtioHdrError::Truncated`] if `bytes` is shorter than the layout.
    pub fn parse(bytes: &[u8], layout: HdrLayout, order: HdrByteOrder) -> Result<VirtioNetHdr, VirtioHdrError> {
        if bytes.len() < layout.len() {
            return Err(VirtioHdrError::Truncated { needed: layout.len(), available: bytes.len() });
        }
        let field = |at: usize| order.read([bytes[at], bytes[at + 1]]);
        Ok(VirtioNetHdr {
            flags: bytes[0],
            gso_type: bytes[1],
            hdr_len: field(2),
            gso_size: field(4),
            csum_start: field(6),
            csum_offset: field(8),
            num_buffers: if layout == HdrLayout::MrgRxbuf { field(10) } else { 0 },
        })
    }

    /// Encodes the header into the start of `out`.
    ///
    /// # Errors
    /// [`VirtioHdrError::Truncated`] if `out` is shorter than the layout.
    pub fn emit(&self, out: &mut [u8], layout: HdrLayout, order: HdrByteOrder) -> Result<(), VirtioHdrError> {
        if out.len() < layout.len() {
            return Err(VirtioHdrError::Truncated { needed: layout.len(), available: out.len() });
        }
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&order.write(self.hdr_len));
        out[4..6].copy_from_slice(&order.write(self.gso_size));
        out[6..8].copy_from_slice(&order.write(self.csum_start));
        out[8..10].copy_from_slice(&order.write(self.csum_offset));
        if layout == HdrLayout::MrgRxbuf {
            out[10..12].copy_from_slice(&order.write(self.num_buffers));
        }
        Ok(())
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
    /// # Errors
    /// The first rule the header breaks, as a [`VirtioHdrError`].
    pub fn to_meta(&self, frame: &[u8], opts: &ImportOptions) -> Result<OffloadMeta, VirtioHdrError> {
        if frame.len() < opts.medium.link_header_len().max(1) {
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

        let ecn = self.gso_type & GSO_ECN != 0;
        let protocol = match self.gso_type & !GSO_ECN {
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
            return Ok(meta);
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

        let headers = opts.medium.parse(frame).map_err(VirtioHdrError::BadHeaders)?;
        let gso_type = protocol.gso_type();
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
        if !found.is_empty() {
            return Err(VirtioHdrError::ProtocolMismatch { gso_type, found });
        }
        if needs_csum && self.csum_start as usize != headers.l4_offset {
            return Err(VirtioHdrError::ChecksumStartNotL4 { start: self.csum_start, l4_offset: headers.l4_offset });
        }

        let payload = headers.payload_len;
        let gso_size = self.gso_size as usize;
        if protocol == GsoProtocol::UdpL4 && payload > gso_size * opts.udp_max_segments {
            return Err(VirtioHdrError::TooManySegments {
                segments: payload.div_ceil(gso_size),
                max: opts.udp_max_segments,
            });
        }
        if payload > gso_size {
            meta.gso_type = gso_type | GsoType::DODGY;
            if ecn {
                meta.gso_type |= GsoType::TCP_ECN;
            }
            meta.gso_size = self.gso_size;
            // At most 65535 bytes / 1 byte per segment: fits in u16.
            meta.gso_segs = payload.div_ceil(gso_size).min(u16::MAX as usize) as u16;
        }
        Ok(meta)
    }

    /// Builds the header for handing `frame` with `meta` to a consumer
    /// (offload-rules 4.3): GSO type from TCPV4, TCPV6, UDP_L4 (that priority)
    /// plus ECN; `NEEDS_CSUM` for a partial checksum; `DATA_VALID` for
    /// [`ChecksumState::Unnecessary`] when `allow_data_valid`; `hdr_len` is
    /// the real length of the headers up to the end of the L4 header.
    ///
    /// `frame` is an Ethernet frame; [`VirtioNetHdr::from_meta_as`] takes
    /// either medium.
    ///
    /// # Errors
    /// [`VirtioHdrError::Unrepresentable`] for a GSO type virtio cannot carry;
    /// [`VirtioHdrError::BadHeaders`] if a GSO frame's headers do not parse.
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
