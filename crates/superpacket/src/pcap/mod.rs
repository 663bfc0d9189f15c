//! Capture files: streaming readers and writers for classic pcap and pcapng.
//!
//! # File formats
//!
//! **Classic pcap** (draft-ietf-opsawg-pcap, "PCAP Capture File Format") is a
//! 24-byte file header followed by records. The header starts with a magic
//! number whose byte order gives the file's byte order and whose value gives the
//! timestamp precision: `0xA1B2C3D4` for microseconds, `0xA1B23C4D` for
//! nanoseconds. It carries version 2.4, the snapshot length and one link type
//! for the whole file. Each record is a 16-byte header (seconds, fraction,
//! captured length, original length) followed by the captured bytes. A record
//! cannot carry any metadata beyond that.
//!
//! **pcapng** (draft-ietf-opsawg-pcapng, "PCAP Now Generic") is a sequence of
//! blocks, each `type, total length, body, total length`, padded to 32 bits.
//! A Section Header Block (type `0x0A0D0D0A`, palindromic) starts each section
//! and holds a byte-order magic `0x1A2B3C4D` that fixes the byte order of the
//! section. Interface Description Blocks declare interfaces (link type,
//! snapshot length, and the `if_tsresol` option giving the timestamp
//! resolution, microseconds by default). Packets come in Enhanced Packet
//! Blocks (interface id, 64-bit timestamp, lengths, data, options), Simple
//! Packet Blocks (no timestamp, interface 0) or the obsolete Packet Block
//! (type 2). Every block may end in a list of TLV options (`code: u16, length:
//! u16, value padded to 32 bits`, terminated by `opt_endofopt`); option code 1
//! (`opt_comment`) is a UTF-8 comment. Blocks of unknown types are skipped.
//!
//! # Superpackets
//!
//! GRO/GSO superpackets are far larger than an MTU, so writers declare a
//! snapshot length of [`DEFAULT_SNAPLEN`] (262144, what Wireshark accepts) and
//! readers accept frames up to [`MAX_FRAME_LEN`] (16 MiB). A record claiming
//! more is rejected with [`PcapError::FrameTooLarge`] before anything is
//! allocated for it.
//!
//! # Offload annotations
//!
//! A frame carrying offload metadata gets a pcapng packet comment made of
//! space-separated `key=value` tokens (see [`FrameAnnotation`]):
//!
//! ```text
//! gso_type=tcpv4 gso_size=1448 gso_segs=45 csum=partial
//! ```
//!
//! `gso_type` is `tcpv4`, `tcpv6`, `udp_l4` or `none`; `gso_size` is the
//! segment payload size and `gso_segs` the segment count; `csum=partial` says the
//! TCP/UDP checksum field holds the pseudo-header sum (`CHECKSUM_PARTIAL`).
//! Tokens with other keys, and words without `=`, are ignored, so free-text
//! comments written by other tools read back as "no annotation". Classic pcap
//! cannot carry comments, so [`CaptureWriter`] refuses annotated frames in pcap
//! output unless [`WriterOptions::strip_annotations`] is set.
//!
//! # Example
//!
//! ```no_run
//! use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
//!
//! # fn main() -> Result<(), superpacket::pcap::PcapError> {
//! let mut reader = CaptureReader::open("in.pcapng")?;
//! let mut writer = CaptureWriter::create("out.pcapng", CaptureFormat::PcapNg, LinkType::ETHERNET)?;
//! while let Some(frame) = reader.next_frame()? {
//!     writer.write_frame(frame.data, frame.timestamp_ns, &frame.annotation)?;
//! }
//! writer.finish()?;
//! # Ok(())
//! # }
//! ```

mod annotation;
mod error;
mod offload;
mod reader;
mod writer;

#[cfg(test)]
mod tests;

use crate::wire::Medium;
use std::fmt;

pub use annotation::{AnnotationError, FrameAnnotation, GsoAnnotation, GsoKind, TunnelAnnotation};
pub use error::PcapError;
pub use reader::{CaptureReader, CapturedFrame, InterfaceInfo, OptionIter, SectionInfo, TsResolution};
pub use writer::{CaptureWriter, WriteRecord, WriterOptions};

/// Snapshot length written in file and interface headers: large enough for
/// 64 KiB GSO superpackets and the largest Wireshark accepts by default.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Largest frame the reader accepts (16 MiB). Records claiming more are a
/// [`PcapError::FrameTooLarge`] error rather than an allocation.
pub const MAX_FRAME_LEN: u32 = 16 * 1024 * 1024;

/// Application name written in the pcapng `shb_userappl` option.
pub const USER_APPL: &str = "superpacket";

/// Classic pcap magic for microsecond timestamps.
pub(crate) const PCAP_MAGIC_MICROS: u32 = 0xA1B2_C3D4;
/// Classic pcap magic for nanosecond timestamps.
pub(crate) const PCAP_MAGIC_NANOS: u32 = 0xA1B2_3C4D;
/// pcapng Section Header Block type (also the file magic).
pub(crate) const BLOCK_SHB: u32 = 0x0A0D_0D0A;
/// pcapng Interface Description Block type.
pub(crate) const BLOCK_IDB: u32 = 1;
/// pcapng obsolete Packet Block type.
pub(crate) const BLOCK_OPB: u32 = 2;
/// pcapng Simple Packet Block type.
pub(crate) const BLOCK_SPB: u32 = 3;
/// pcapng Enhanced Packet Block type.
pub(crate) const BLOCK_EPB: u32 = 6;
/// pcapng byte-order magic in the Section Header Block.
pub(crate) const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// `opt_endofopt`.
pub(crate) const OPT_END: u16 = 0;
/// `opt_comment`.
pub(crate) const OPT_COMMENT: u16 = 1;
/// `shb_hardware`.
pub(crate) const OPT_SHB_HARDWARE: u16 = 2;
/// `shb_os`.
pub(crate) const OPT_SHB_OS: u16 = 3;
/// `shb_userappl`.
pub(crate) const OPT_SHB_USERAPPL: u16 = 4;
/// `if_name`.
pub(crate) const OPT_IF_NAME: u16 = 2;
/// `if_tsresol`.
pub(crate) const OPT_IF_TSRESOL: u16 = 9;
/// `if_tsoffset`.
pub(crate) const OPT_IF_TSOFFSET: u16 = 14;

/// A link-layer header type (the `LINKTYPE_*` registry,
/// draft-ietf-opsawg-pcaplinktype). Only the low 16 bits of the pcap header's
/// link-type field are kept; the FCS bits above them are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u16);

impl LinkType {
    /// `LINKTYPE_NULL`: BSD loopback encapsulation.
    pub const NULL: LinkType = LinkType(0);
    /// `LINKTYPE_ETHERNET`: IEEE 802.3 Ethernet.
    pub const ETHERNET: LinkType = LinkType(1);
    /// `LINKTYPE_RAW`: raw IPv4 or IPv6, version taken from the first nibble.
    pub const RAW: LinkType = LinkType(101);
    /// `LINKTYPE_LINUX_SLL`: Linux "cooked" capture.
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// `LINKTYPE_IPV4`: raw IPv4.
    pub const IPV4: LinkType = LinkType(228);
    /// `LINKTYPE_IPV6`: raw IPv6.
    pub const IPV6: LinkType = LinkType(229);

    /// The medium of this link type's packets, if superpacket reads it:
    /// Ethernet (1), or raw IP (101, and 228/229 for one IP version each).
    pub fn medium(self) -> Option<Medium> {
        match self {
            LinkType::ETHERNET => Some(Medium::Ethernet),
            LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => Some(Medium::Ip),
            _ => None,
        }
    }

    /// The link type packets of `medium` are written with: Ethernet (1) or
    /// raw IP (101).
    pub fn for_medium(medium: Medium) -> LinkType {
        match medium {
            Medium::Ethernet => LinkType::ETHERNET,
            Medium::Ip => LinkType::RAW,
        }
    }

    /// Short lowercase name of well-known link types, if this is one.
    pub fn name(self) -> Option<&'static str> {
        match self {
            LinkType::NULL => Some("null"),
            LinkType::ETHERNET => Some("ethernet"),
            LinkType::RAW => Some("raw"),
            LinkType::LINUX_SLL => Some("linux_sll"),
            LinkType::IPV4 => Some("ipv4"),
            LinkType::IPV6 => Some("ipv6"),
            _ => None,
        }
    }
}

impl fmt::Display for LinkType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "linktype {}", self.0),
        }
    }
}

/// Byte order of a pcap file or of a pcapng section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    /// Least significant byte first (what x86 and most ARM hosts write).
    #[default]
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    pub(crate) fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }

    pub(crate) fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    pub(crate) fn u64(self, b: [u8; 8]) -> u64 {
        match self {
            ByteOrder::Little => u64::from_le_bytes(b),
            ByteOrder::Big => u64::from_be_bytes(b),
        }
    }

    pub(crate) fn put_u16(self, v: u16) -> [u8; 2] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    pub(crate) fn put_u32(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
}

/// Container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Classic pcap with microsecond timestamps (magic `0xA1B2C3D4`).
    PcapMicros,
    /// Classic pcap with nanosecond timestamps (magic `0xA1B23C4D`).
    PcapNanos,
    /// pcapng; the writer uses nanosecond timestamps (`if_tsresol` = 9).
    PcapNg,
}

impl CaptureFormat {
    /// Whether this format can carry packet comments (and so annotations).
    pub fn supports_comments(self) -> bool {
        matches!(self, CaptureFormat::PcapNg)
    }

    /// Short name: `pcap`, `pcap-ns` or `pcapng`.
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormat::PcapMicros => "pcap",
            CaptureFormat::PcapNanos => "pcap-ns",
            CaptureFormat::PcapNg => "pcapng",
        }
    }
}

impl fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Round `n` up to a multiple of 4 (pcapng padding).
pub(crate) const fn pad4(n: usize) -> usize {
    n.saturating_add(3) & !3
}
