//! Streaming capture reader for classic pcap and pcapng.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::ops::Range;
use std::path::Path;

use super::annotation::{Accumulator, AnnotationError, FrameAnnotation};
use super::{
    BLOCK_EPB, BLOCK_IDB, BLOCK_OPB, BLOCK_SHB, BLOCK_SPB, BYTE_ORDER_MAGIC, ByteOrder, CaptureFormat, LinkType,
    MAX_FRAME_LEN, OPT_COMMENT, OPT_END, OPT_IF_NAME, OPT_IF_TSOFFSET, OPT_IF_TSRESOL, OPT_SHB_HARDWARE, OPT_SHB_OS,
    OPT_SHB_USERAPPL, PCAP_MAGIC_MICROS, PCAP_MAGIC_NANOS, PcapError, pad4,
};

/// Room allowed in a packet block beyond its frame (headers and options), and
/// the largest non-packet block (section or interface header) that is buffered.
const MAX_BLOCK_OVERHEAD: u32 = 1 << 20;

/// Capacity of the internal read buffer.
const READ_BUFFER: usize = 1 << 16;

/// Timestamp resolution of a pcapng interface (the `if_tsresol` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TsResolution {
    /// Units of 10^-n seconds.
    Pow10(u8),
    /// Units of 2^-n seconds.
    Pow2(u8),
}

impl TsResolution {
    /// Microseconds, the pcapng default when `if_tsresol` is absent.
    pub const MICROS: TsResolution = TsResolution::Pow10(6);
    /// Nanoseconds, what [`CaptureWriter`](super::CaptureWriter) writes.
    pub const NANOS: TsResolution = TsResolution::Pow10(9);

    /// Decodes the one-byte `if_tsresol` value: the high bit selects a power
    /// of two, the low seven bits are the negative exponent.
    pub fn from_option_byte(v: u8) -> TsResolution {
        if v & 0x80 != 0 { TsResolution::Pow2(v & 0x7f) } else { TsResolution::Pow10(v) }
    }

    /// Encodes as the one-byte `if_tsresol` value.
    pub fn option_byte(self) -> u8 {
        match self {
            TsResolution::Pow10(n) => n & 0x7f,
            TsResolution::Pow2(n) => 0x80 | (n & 0x7f),
        }
    }

    /// Converts a count of ticks in this resolution to nanoseconds, truncating
    /// sub-nanosecond parts and saturating at `u64::MAX`.
    pub fn ticks_to_ns(self, ticks: u64) -> u64 {
        match self {
            TsResolution::Pow10(e) if e <= 9 => ticks.saturating_mul(10u64.pow(u32::from(9 - e))),
            TsResolution::Pow10(e) => {
                let d = u32::from(e - 9);
                // 10^38 is the largest power of ten in a u128; beyond it every u64 rounds to 0.
                if d > 38 { 0 } else { (u128::from(ticks) / 10u128.pow(d)) as u64 }
            }
            TsResolution::Pow2(e) => {
                let ns = (u128::from(ticks) * 1_000_000_000) >> (e & 0x7f);
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
        }
    }
}

/// A pcapng interface, from its Interface Description Block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Link type of the frames captured on it.
    pub link_type: LinkType,
    /// Snapshot length (0 = no limit).
    pub snaplen: u32,
    /// Timestamp resolution (`if_tsresol`, microseconds by default).
    pub ts_resolution: TsResolution,
    /// Seconds added to every timestamp (`if_tsoffset`, 0 by default).
    pub ts_offset_s: i64,
    /// Interface name (`if_name`), if given.
    pub name: Option<String>,
}

/// A pcapng section, from its Section Header Block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionInfo {
    /// Byte order of the section.
    pub byte_order: ByteOrder,
    /// Major version (always 1).
    pub major: u16,
    /// Minor version.
    pub minor: u16,
    /// `shb_hardware`, if given.
    pub hardware: Option<String>,
    /// `shb_os`, if given.
    pub os: Option<String>,
    /// `shb_userappl` (the writing application), if given.
    pub user_appl: Option<String>,
    /// Byte offset of the Section Header Block.
    pub offset: u64,
}

/// One frame read from a capture. It borrows the reader's buffer, so it lives
/// until the next call to [`CaptureReader::next_frame`].
#[derive(Debug, Clone)]
pub struct CapturedFrame<'a> {
    /// 0-based frame number in the file (all sections counted).
    pub index: u64,
    /// The captured bytes (`captured_len` of them).
    pub data: &'a [u8],
    /// Timestamp in nanoseconds since the Unix epoch (0 for Simple Packet Blocks).
    pub timestamp_ns: u64,
    /// Number of bytes captured.
    pub captured_len: u32,
    /// Length of the frame on the wire; more than `captured_len` when the frame was snapped.
    pub original_len: u32,
    /// Link type of the frame (pcap: the file's; pcapng: its interface's).
    pub link_type: LinkType,
    /// pcapng interface id (0 for pcap).
    pub interface_id: u32,
    /// Offload metadata parsed from the packet comments (default if none).
    pub annotation: FrameAnnotation,
    /// The first packet comment, if any and valid UTF-8 (trailing NULs removed).
    pub comment: Option<&'a str>,
    options: &'a [u8],
    order: ByteOrder,
}

impl<'a> CapturedFrame<'a> {
    /// Whether fewer bytes were captured than were on the wire.
    pub fn is_snapped(&self) -> bool {
        self.captured_len < self.original_len
    }

    /// The block's options as `(code, value)` pairs (empty for pcap records and
    /// Simple Packet Blocks).
    pub fn options(&self) -> OptionIter<'a> {
        OptionIter { data: self.options, order: self.order }
    }

    /// All packet comments (`opt_comment`) that are valid UTF-8, trailing NULs removed.
    pub fn comments(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.options().filter(|&(code, _)| code == OPT_COMMENT).filter_map(|(_, v)| comment_str(v))
    }
}

/// Iterator over the TLV options of a pcapng block: `(code, value)` pairs, up to
/// `opt_endofopt` or the end of the block.
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    data: &'a [u8],
    order: ByteOrder,
}

impl<'a> OptionIter<'a> {
    fn new(data: &'a [u8], order: ByteOrder) -> Self {
        OptionIter { data, order }
    }

    /// Next option, or the reason the option list is malformed.
    fn next_checked(&mut self) -> Option<Result<(u16, &'a [u8]), &'static str>> {
        if self.data.is_empty() {
            return None;
        }
        let (Some(code), Some(len)) = (get_u16(self.order, self.data, 0), get_u16(self.order, self.data, 2)) else {
            self.data = &[];
            return Some(Err("option header overruns the block"));
        };
        if code == OPT_END {
            self.data = &[];
            return None;
        }
        let rest = self.data.get(4..).unwrap_or_default();
        let len = usize::from(len);
        let Some(value) = rest.get(..len) else {
            self.data = &[];
            return Some(Err("option value overruns the block"));
        };
        self.data = rest.get(pad4(len).min(rest.len())..).unwrap_or_default();
        Some(Ok((code, value)))
    }

    fn validate(mut self) -> Result<(), &'static str> {
        while let Some(item) = self.next_checked() {
            item?;
        }
        Ok(())
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_checked()?.ok()
    }
}

/// Where a frame is in the buffer, and its metadata.
struct FrameMeta {
    index: u64,
    data: Range<usize>,
    options: Range<usize>,
    timestamp_ns: u64,
    captured_len: u32,
    original_len: u32,
    link_type: LinkType,
    interface_id: u32,
}

/// A streaming reader of pcap and pcapng files, auto-detected by magic number.
///
/// Frames are read one at a time into a reusable buffer: no allocation per
/// frame once the buffer has grown to the largest frame, so files of any size
/// stream in constant memory. Frames up to [`MAX_FRAME_LEN`] are accepted.
///
/// After an error the reader is finished (further calls return `Ok(None)`),
/// except for [`PcapError::BadAnnotation`], after which reading can go on with
/// the next frame (see [`PcapError::is_recoverable`]).
pub struct CaptureReader<R = File> {
    inner: BufReader<R>,
    format: CaptureFormat,
    order: ByteOrder,
    /// pcap only: the file's link type and snapshot length.
    pcap_link_type: LinkType,
    pcap_snaplen: u32,
    /// pcapng only: interfaces of the current section, and the section.
    interfaces: Vec<InterfaceInfo>,
    section: Option<SectionInfo>,
    sections: u64,
    buf: Vec<u8>,
    offset: u64,
    total_len: Option<u64>,
    next_index: u64,
    done: bool,
    strict_annotations: bool,
}

impl CaptureReader<File> {
    /// Opens a capture file; [`total_len`](Self::total_len) is the file size.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        let file = File::open(path)?;
        let len = file.metadata().ok().map(|m| m.len());
        let mut reader = CaptureReader::new(file)?;
        reader.total_len = len;
        Ok(reader)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header (pcap header, or the first pcapng Section Header
    /// Block) from `reader`, which is buffered internally.
    pub fn new(reader: R) -> Result<Self, PcapError> {
        let mut r = CaptureReader {
            inner: BufReader::with_capacity(READ_BUFFER, reader),
            format: CaptureFormat::PcapNg,
            order: ByteOrder::Little,
            pcap_link_type: LinkType::ETHERNET,
            pcap_snaplen: 0,
            interfaces: Vec::new(),
            section: None,
            sections: 0,
            buf: Vec::new(),
            offset: 0,
            total_len: None,
            next_index: 0,
            done: false,
            strict_annotations: true,
        };
        let mut magic = [0u8; 4];
        if r.read_some(&mut magic)? < 4 {
            return Err(PcapError::Truncated { what: "file header", frame: None, offset: 0 });
        }
        if u32::from_le_bytes(magic) == BLOCK_SHB {
            let mut len = [0u8; 4];
            if r.read_some(&mut len)? < 4 {
                return Err(PcapError::Truncated { what: "section header block", frame: None, offset: 0 });
            }
            r.read_shb(0, len)?;
            return Ok(r);
        }
        let (order, format) = match (u32::from_le_bytes(magic), u32::from_be_bytes(magic)) {
            (PCAP_MAGIC_MICROS, _) => (ByteOrder::Little, CaptureFormat::PcapMicros),
            (PCAP_MAGIC_NANOS, _) => (ByteOrder::Little, CaptureFormat::PcapNanos),
            (_, PCAP_MAGIC_MICROS) => (ByteOrder::Big, CaptureFormat::PcapMicros),
            (_, PCAP_MAGIC_NANOS) => (ByteOrder::Big, CaptureFormat::PcapNanos),
            _ => return Err(PcapError::BadMagic { magic }),
        };
        let mut hdr = [0u8; 20];
        if r.read_some(&mut hdr)? < hdr.len() {
            return Err(PcapError::Truncated { what: "pcap file header", frame: None, offset: 0 });
        }
        let major = order.u16([hdr[0], hdr[1]]);
        let minor = order.u16([hdr[2], hdr[3]]);
        if major != 2 {
            return Err(PcapError::UnsupportedVersion { format: "pcap", major, minor, offset: 0 });
        }
        r.order = order;
        r.format = format;
        r.pcap_snaplen = order.u32([hdr[12], hdr[13], hdr[14], hdr[15]]);
        // The upper bits of the link-type field hold FCS information.
        r.pcap_link_type = LinkType((order.u32([hdr[16], hdr[17], hdr[18], hdr[19]]) & 0xFFFF) as u16);
        Ok(r)
    }

    /// Reads the next frame, skipping non-packet blocks. `Ok(None)` at the end
    /// of the file. A file cut inside a frame yields [`PcapError::Truncated`]
    /// naming that frame, after all complete frames before it.
    pub fn next_frame(&mut self) -> Result<Option<CapturedFrame<'_>>, PcapError> {
        if self.done {
            return Ok(None);
        }
        let step = match self.format {
            CaptureFormat::PcapNg => self.next_pcapng(),
            CaptureFormat::PcapMicros | CaptureFormat::PcapNanos => self.next_pcap(),
        };
        let meta = match step {
            Ok(Some(meta)) => meta,
            Ok(None) => {
                self.done = true;
                return Ok(None);
            }
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        let data = self.buf.get(meta.data).unwrap_or_default();
        let options = self.buf.get(meta.options).unwrap_or_default();
        let (comment, parsed) = scan_comments(options, self.order);
        let annotation = match parsed {
            Ok(a) => a,
            Err(source) if self.strict_annotations => {
                return Err(PcapError::BadAnnotation { frame: meta.index, source });
            }
            Err(_) => FrameAnnotation::default(),
        };
        Ok(Some(CapturedFrame {
            index: meta.index,
            data,
            timestamp_ns: meta.timestamp_ns,
            captured_len: meta.captured_len,
            original_len: meta.original_len,
            link_type: meta.link_type,
            interface_id: meta.interface_id,
            annotation,
            comment,
            options,
            order: self.order,
        }))
    }

    /// With `false`, a malformed annotation in a packet comment yields the
    /// frame with a default annotation (the comment is still available)
    /// instead of [`PcapError::BadAnnotation`]. Default `true`.
    pub fn set_strict_annotations(&mut self, strict: bool) {
        self.strict_annotations = strict;
    }

    fn next_pcap(&mut self) -> Result<Option<FrameMeta>, PcapError> {
        let start = self.offset;
        let index = self.next_index;
        let mut hdr = [0u8; 16];
        match self.read_some(&mut hdr)? {
            0 => return Ok(None),
            16 => {}
            _ => return Err(PcapError::Truncated { what: "record header", frame: Some(index), offset: start }),
        }
        let o = self.order;
        let ts_sec = o.u32([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let ts_frac = o.u32([hdr[4], hdr[5], hdr[6], hdr[7]]);
        let incl_len = o.u32([hdr[8], hdr[9], hdr[10], hdr[11]]);
        let orig_len = o.u32([hdr[12], hdr[13], hdr[14], hdr[15]]);
        if incl_len > MAX_FRAME_LEN {
            return Err(PcapError::FrameTooLarge {
                frame: index,
                offset: Some(start),
                len: incl_len.into(),
                limit: MAX_FRAME_LEN.into(),
            });
        }
        let len = incl_len as usize;
        if self.read_into_buf(len)? < len {
            return Err(PcapError::Truncated { what: "record data", frame: Some(index), offset: start });
        }
        self.next_index += 1;
        let frac_ns = match self.format {
            CaptureFormat::PcapNanos => u64::from(ts_frac),
            _ => u64::from(ts_frac) * 1000,
        };
        Ok(Some(FrameMeta {
            index,
            data: 0..len,
            options: 0..0,
            timestamp_ns: u64::from(ts_sec) * 1_000_000_000 + frac_ns,
            captured_len: incl_len,
            original_len: orig_len,
            link_type: self.pcap_link_type,
            interface_id: 0,
        }))
    }

    fn next_pcapng(&mut self) -> Result<Option<FrameMeta>, PcapError> {
        loop {
            let start = self.offset;
            let mut hdr = [0u8; 8];
            match self.read_some(&mut hdr)? {
                0 => return Ok(None),
                8 => {}
                _ => return Err(PcapError::Truncated { what: "block header", frame: None, offset: start }),
            }
            let block_type = self.order.u32([hdr[0], hdr[1], hdr[2], hdr[3]]);
            let len_bytes = [hdr[4], hdr[5], hdr[6], hdr[7]];
            if block_type == BLOCK_SHB {
                self.read_shb(start, len_bytes)?;
                continue;
            }
            let total = self.order.u32(len_bytes);
            let name = block_name(block_type);
            if total < 12 || !total.is_multiple_of(4) {
                return Err(bad(
                    name,
                    start,
                    format!("block total length {total} is not a multiple of 4 of at least 12"),
                ));
            }
            match block_type {
                BLOCK_EPB | BLOCK_OPB | BLOCK_SPB => {
                    let index = self.next_index;
                    if total > MAX_FRAME_LEN + MAX_BLOCK_OVERHEAD {
                        return Err(PcapError::FrameTooLarge {
                            frame: index,
                            offset: Some(start),
                            len: total.into(),
                            limit: MAX_FRAME_LEN.into(),
                        });
                    }
                    let body_len = self.read_block_body(start, total, name, Some(index))?;
                    let meta = self.parse_packet_block(block_type, start, body_len, index)?;
                    self.next_index += 1;
                    return Ok(Some(meta));
                }
                BLOCK_IDB => {
                    if total > MAX_BLOCK_OVERHEAD {
                        return Err(bad(name, start, format!("block total length {total} is implausibly large")));
                    }
                    let body_len = self.read_block_body(start, total, name, None)?;
                    self.parse_idb(start, body_len)?;
                }
                _ => self.skip_block(start, total, name)?,
            }
        }
    }

    /// Reads a Section Header Block whose type field (at `start`) has been read,
    /// with `len_bytes` its total-length field, and starts a new section.
    fn read_shb(&mut self, start: u64, len_bytes: [u8; 4]) -> Result<(), PcapError> {
        const NAME: &str = "section header block";
        let mut bom = [0u8; 4];
        if self.read_some(&mut bom)? < 4 {
            return Err(PcapError::Truncated { what: NAME, frame: None, offset: start });
        }
        let order = if bom == BYTE_ORDER_MAGIC.to_le_bytes() {
            ByteOrder::Little
        } else if bom == BYTE_ORDER_MAGIC.to_be_bytes() {
            ByteOrder::Big
        } else {
            return Err(bad(NAME, start, format!("bad byte-order magic {bom:02x?}")));
        };
        let total = order.u32(len_bytes);
        if total < 28 || !total.is_multiple_of(4) || total > MAX_BLOCK_OVERHEAD {
            return Err(bad(NAME, start, format!("invalid block total length {total}")));
        }
        let rest = (total - 12) as usize;
        if self.read_into_buf(rest)? < rest {
            return Err(PcapError::Truncated { what: NAME, frame: None, offset: start });
        }
        let body = self.buf.get(..rest).unwrap_or_default();
        check_trailer(order, body, total, NAME, start)?;
        let (Some(major), Some(minor)) = (get_u16(order, body, 0), get_u16(order, body, 2)) else {
            return Err(bad(NAME, start, "too short".into()));
        };
        if major != 1 {
            return Err(PcapError::UnsupportedVersion { format: "pcapng", major, minor, offset: start });
        }
        let opts = body.get(12..rest - 4).unwrap_or_default();
        let mut section =
            SectionInfo { byte_order: order, major, minor, hardware: None, os: None, user_appl: None, offset: start };
        let mut it = OptionIter::new(opts, order);
        while let Some(opt) = it.next_checked() {
            let (code, value) = opt.map_err(|r| bad(NAME, start, r.into()))?;
            let text = || comment_str(value).map(str::to_owned);
            match code {
                OPT_SHB_HARDWARE => section.hardware = text(),
                OPT_SHB_OS => section.os = text(),
                OPT_SHB_USERAPPL => section.user_appl = text(),
                _ => {}
            }
        }
        self.order = order;
        self.interfaces.clear();
        self.section = Some(section);
        self.sections += 1;
        Ok(())
    }

    fn parse_idb(&mut self, start: u64, body_len: usize) -> Result<(), PcapError> {
        const NAME: &str = "interface description block";
        let o = self.order;
        let body = self.buf.get(..body_len.saturating_sub(4)).unwrap_or_default();
        let (Some(link), Some(snaplen)) = (get_u16(o, body, 0), get_u32(o, body, 4)) else {
            return Err(bad(NAME, start, "too short".into()));
        };
        let mut info = InterfaceInfo {
            link_type: LinkType(link),
            snaplen,
            ts_resolution: TsResolution::MICROS,
            ts_offset_s: 0,
            name: None,
        };
        let mut it = OptionIter::new(body.get(8..).unwrap_or_default(), o);
        while let Some(opt) = it.next_checked() {
            let (code, value) = opt.map_err(|r| bad(NAME, start, r.into()))?;
            match code {
                OPT_IF_NAME => info.name = comment_str(value).map(str::to_owned),
                OPT_IF_TSRESOL => match value {
                    [v] => info.ts_resolution = TsResolution::from_option_byte(*v),
                    _ => return Err(bad(NAME, start, format!("if_tsresol has length {}, not 1", value.len()))),
                },
                OPT_IF_TSOFFSET => match get_u64(o, value, 0) {
                    Some(v) if value.len() == 8 => info.ts_offset_s = v as i64,
                    _ => return Err(bad(NAME, start, format!("if_tsoffset has length {}, not 8", value.len()))),
                },
                _ => {}
            }
        }
        self.interfaces.push(info);
        Ok(())
    }

    /// Parses an Enhanced, Simple or obsolete Packet Block whose body (after the
    /// type and length fields, trailer included) is in `buf[..body_len]`.
    fn parse_packet_block(
        &self,
        block_type: u32,
        start: u64,
        body_len: usize,
        index: u64,
    ) -> Result<FrameMeta, PcapError> {
        let name = block_name(block_type);
        let o = self.order;
        let content = self.buf.get(..body_len.saturating_sub(4)).unwrap_or_default();
        let too_short = || bad(name, start, "too short for its fixed fields".into());
        if block_type == BLOCK_SPB {
            let original_len = get_u32(o, content, 0).ok_or_else(too_short)?;
            let iface = self
                .interfaces
                .first()
                .ok_or_else(|| bad(name, start, "simple packet block before any interface description block".into()))?;
            let room = content.len() - 4;
            let mut cap = (original_len as usize).min(room);
            if iface.snaplen != 0 {
                cap = cap.min(iface.snaplen as usize);
            }
            return Ok(FrameMeta {
                index,
                data: 4..4 + cap,
                options: 0..0,
                timestamp_ns: 0,
                // cap <= original_len, so it fits a u32.
                captured_len: cap as u32,
                original_len,
                link_type: iface.link_type,
                interface_id: 0,
            });
        }
        let interface_id =
            if block_type == BLOCK_OPB { get_u16(o, content, 0).map(u32::from) } else { get_u32(o, content, 0) }
                .ok_or_else(too_short)?;
        let (Some(ts_hi), Some(ts_lo), Some(captured_len), Some(original_len)) =
            (get_u32(o, content, 4), get_u32(o, content, 8), get_u32(o, content, 12), get_u32(o, content, 16))
        else {
            return Err(too_short());
        };
        if captured_len > MAX_FRAME_LEN {
            return Err(PcapError::FrameTooLarge {
                frame: index,
                offset: Some(start),
                len: captured_len.into(),
                limit: MAX_FRAME_LEN.into(),
            });
        }
        let cap = captured_len as usize;
        let data_end = 20 + cap;
        if data_end > content.len() {
            return Err(bad(
                name,
                start,
                format!(
                    "captured length {captured_len} exceeds the block ({} bytes of packet data)",
                    content.len() - 20
                ),
            ));
        }
        let options = (20 + pad4(cap)).min(content.len())..content.len();
        OptionIter::new(content.get(options.clone()).unwrap_or_default(), o)
            .validate()
            .map_err(|r| bad(name, start, r.into()))?;
        let iface = self.interfaces.get(interface_id as usize).ok_or_else(|| {
            bad(
                name,
                start,
                format!(
                    "frame {index} refers to interface {interface_id}, but only {} are defined",
                    self.interfaces.len()
                ),
            )
        })?;
        let ticks = (u64::from(ts_hi) << 32) | u64::from(ts_lo);
        let ns = i128::from(iface.ts_resolution.ticks_to_ns(ticks)) + i128::from(iface.ts_offset_s) * 1_000_000_000;
        Ok(FrameMeta {
            index,
            data: 20..data_end,
            options,
            timestamp_ns: u64::try_from(ns.max(0)).unwrap_or(u64::MAX),
            captured_len,
            original_len,
            link_type: iface.link_type,
            interface_id,
        })
    }

    /// Reads the rest of a block (`total - 8` bytes, trailer included) into the
    /// buffer and checks the trailing length. Returns the body length.
    fn read_block_body(
        &mut self,
        start: u64,
        total: u32,
        name: &'static str,
        frame: Option<u64>,
    ) -> Result<usize, PcapError> {
        let body_len = (total - 8) as usize;
        if self.read_into_buf(body_len)? < body_len {
            return Err(PcapError::Truncated { what: name, frame, offset: start });
        }
        check_trailer(self.order, self.buf.get(..body_len).unwrap_or_default(), total, name, start)?;
        Ok(body_len)
    }

    /// Skips a block of an unknown or uninteresting type without buffering it.
    fn skip_block(&mut self, start: u64, total: u32, name: &'static str) -> Result<(), PcapError> {
        let skip = u64::from(total - 12);
        let copied = io::copy(&mut (&mut self.inner).take(skip), &mut io::sink())?;
        self.offset += copied;
        let mut trailer = [0u8; 4];
        if copied < skip || self.read_some(&mut trailer)? < 4 {
            return Err(PcapError::Truncated { what: name, frame: None, offset: start });
        }
        check_trailer(self.order, &trailer, total, name, start)
    }

    /// Reads up to `out.len()` bytes, fewer only at end of file.
    fn read_some(&mut self, out: &mut [u8]) -> Result<usize, PcapError> {
        let got = fill(&mut self.inner, out)?;
        self.offset += got as u64;
        Ok(got)
    }

    /// Reads up to `len` bytes into `buf[..len]`, fewer only at end of file.
    /// The buffer grows only as data actually arrives, so a bogus length in a
    /// truncated file does not cause a large allocation.
    fn read_into_buf(&mut self, len: usize) -> Result<usize, PcapError> {
        let mut got = 0;
        while got < len {
            if self.buf.len() <= got {
                // At least READ_BUFFER at once (so typical frames never reallocate);
                // past that, double as data arrives, up to the length claimed.
                let grown = (self.buf.len() * 2).max(READ_BUFFER).min(len.max(READ_BUFFER));
                self.buf.resize(grown, 0);
            }
            let end = self.buf.len().min(len);
            let n = fill(&mut self.inner, self.buf.get_mut(got..end).unwrap_or_default())?;
            got += n;
            if n == 0 || got < end {
                break;
            }
        }
        self.offset += got as u64;
        Ok(got)
    }
}

impl<R> CaptureReader<R> {
    /// The container format (for pcapng: [`CaptureFormat::PcapNg`]).
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Byte order of the file (pcapng: of the current section).
    pub fn byte_order(&self) -> ByteOrder {
        self.order
    }

    /// Link type of the file (pcap), or of the first interface of the current
    /// section (pcapng; `None` before its Interface Description Block is read).
    pub fn link_type(&self) -> Option<LinkType> {
        match self.format {
            CaptureFormat::PcapNg => self.interfaces.first().map(|i| i.link_type),
            _ => Some(self.pcap_link_type),
        }
    }

    /// Snapshot length from the pcap header (pcapng: of the first interface of the current section).
    pub fn snaplen(&self) -> Option<u32> {
        match self.format {
            CaptureFormat::PcapNg => self.interfaces.first().map(|i| i.snaplen),
            _ => Some(self.pcap_snaplen),
        }
    }

    /// pcapng interfaces of the current section read so far (empty for pcap).
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// The current pcapng section (`None` for pcap).
    pub fn section(&self) -> Option<&SectionInfo> {
        self.section.as_ref()
    }

    /// Number of pcapng sections seen so far (0 for pcap).
    pub fn sections(&self) -> u64 {
        self.sections
    }

    /// Number of frames returned (or failed on) so far: the index of the next frame.
    pub fn frames_read(&self) -> u64 {
        self.next_index
    }

    /// Bytes of the file consumed so far, for progress reporting.
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Total size of the file when known ([`open`](CaptureReader::open) takes it
    /// from the file metadata), for progress reporting.
    pub fn total_len(&self) -> Option<u64> {
        self.total_len
    }

    /// Sets the value [`total_len`](Self::total_len) reports (for readers made with `new`).
    pub fn set_total_len(&mut self, total_len: Option<u64>) {
        self.total_len = total_len;
    }
}

/// The first comment (if valid UTF-8) and the annotation parsed from all comments.
fn scan_comments(options: &[u8], order: ByteOrder) -> (Option<&str>, Result<FrameAnnotation, AnnotationError>) {
    let mut first = None;
    let mut seen = false;
    let mut acc = Accumulator::default();
    for (code, value) in OptionIter::new(options, order) {
        if code != OPT_COMMENT {
            continue;
        }
        if !seen {
            seen = true;
            first = comment_str(value);
        }
        if let Err(e) = acc.feed(trim_nuls(value)) {
            return (first, Err(e));
        }
    }
    (first, acc.finish())
}

/// A string option as `&str`: trailing NULs removed, `None` if not UTF-8.
fn comment_str(value: &[u8]) -> Option<&str> {
    std::str::from_utf8(trim_nuls(value)).ok()
}

/// `value` without trailing NUL bytes (some writers NUL-terminate strings).
fn trim_nuls(value: &[u8]) -> &[u8] {
    let end = value.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    value.get(..end).unwrap_or_default()
}

fn check_trailer(order: ByteOrder, body: &[u8], total: u32, name: &'static str, start: u64) -> Result<(), PcapError> {
    let trailer = body.len().checked_sub(4).and_then(|at| get_u32(order, body, at));
    match trailer {
        Some(t) if t == total => Ok(()),
        Some(t) => Err(bad(name, start, format!("trailing block length {t} does not match leading length {total}"))),
        None => Err(bad(name, start, "missing trailing block length".into())),
    }
}

fn bad(block: &'static str, offset: u64, reason: String) -> PcapError {
    PcapError::BadBlock { block, reason, offset }
}

fn block_name(block_type: u32) -> &'static str {
    match block_type {
        BLOCK_SHB => "section header block",
        BLOCK_IDB => "interface description block",
        BLOCK_OPB => "packet block",
        BLOCK_SPB => "simple packet block",
        BLOCK_EPB => "enhanced packet block",
        4 => "name resolution block",
        5 => "interface statistics block",
        0xA => "decryption secrets block",
        _ => "block",
    }
}

fn get_u16(order: ByteOrder, s: &[u8], at: usize) -> Option<u16> {
    Some(order.u16(s.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn get_u32(order: ByteOrder, s: &[u8], at: usize) -> Option<u32> {
    Some(order.u32(s.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn get_u64(order: ByteOrder, s: &[u8], at: usize) -> Option<u64> {
    Some(order.u64(s.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Reads until `out` is full or end of file; returns the count read.
fn fill(inner: &mut impl Read, out: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < out.len() {
        match inner.read(out.get_mut(got..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
