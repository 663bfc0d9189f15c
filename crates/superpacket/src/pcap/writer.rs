//! Capture writer for classic pcap and pcapng.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::annotation::FrameAnnotation;
use super::{
    BLOCK_EPB, BLOCK_IDB, BLOCK_SHB, BYTE_ORDER_MAGIC, ByteOrder, CaptureFormat, DEFAULT_SNAPLEN, LinkType,
    MAX_FRAME_LEN, OPT_COMMENT, OPT_IF_TSRESOL, OPT_SHB_USERAPPL, PCAP_MAGIC_MICROS, PCAP_MAGIC_NANOS, PcapError,
    USER_APPL, pad4,
};

/// Zero bytes for padding to 32 bits.
const PAD: [u8; 4] = [0; 4];

/// Options of a [`CaptureWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Byte order to write (default little-endian).
    pub byte_order: ByteOrder,
    /// Snapshot length written in the headers (default [`DEFAULT_SNAPLEN`]).
    /// Frames longer than it are refused with [`PcapError::FrameTooLarge`]
    /// (write a shorter slice with a larger original length to snap them).
    /// Values above [`MAX_FRAME_LEN`] are clamped to it.
    pub snaplen: u32,
    /// For classic pcap output: drop annotations and comments (counted by
    /// [`CaptureWriter::stripped_annotations`]) instead of refusing the frame
    /// with [`PcapError::AnnotationNotRepresentable`]. Default `false`.
    pub strip_annotations: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions { byte_order: ByteOrder::Little, snaplen: DEFAULT_SNAPLEN, strip_annotations: false }
    }
}

/// A frame to write with every field under control; see [`CaptureWriter::write_record`].
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteRecord<'a> {
    /// The captured bytes.
    pub data: &'a [u8],
    /// Length on the wire; `None` means `data.len()`. Must not be less than `data.len()`.
    pub original_len: Option<u32>,
    /// Timestamp in nanoseconds since the Unix epoch.
    pub timestamp_ns: u64,
    /// pcapng interface id (0 unless [`CaptureWriter::add_interface`] was used).
    pub interface_id: u32,
    /// Offload metadata, written as comment tokens.
    pub annotation: FrameAnnotation,
    /// Free text appended to the comment after the annotation tokens (separated by a space).
    pub comment: Option<&'a str>,
}

/// A capture file writer for classic pcap (µs or ns) and pcapng.
///
/// pcapng output starts with a Section Header Block (`shb_userappl` =
/// [`USER_APPL`]) and an Interface Description Block (snapshot length
/// [`DEFAULT_SNAPLEN`], `if_tsresol` = 9, nanoseconds); each frame is an
/// Enhanced Packet Block whose annotation, if any, is its `opt_comment`.
///
/// Output is flushed by [`finish`](Self::finish), which reports errors, or on
/// drop, which cannot.
pub struct CaptureWriter<W: Write> {
    inner: Option<W>,
    format: CaptureFormat,
    options: WriterOptions,
    interfaces: u32,
    frames: u64,
    bytes_written: u64,
    stripped: u64,
    comment: String,
}

impl CaptureWriter<BufWriter<File>> {
    /// Creates (truncates) the file at `path` and writes the file header.
    pub fn create(path: impl AsRef<Path>, format: CaptureFormat, link_type: LinkType) -> Result<Self, PcapError> {
        Self::create_with_options(path, format, link_type, WriterOptions::default())
    }

    /// Like [`create`](Self::create) with explicit options.
    pub fn create_with_options(
        path: impl AsRef<Path>,
        format: CaptureFormat,
        link_type: LinkType,
        options: WriterOptions,
    ) -> Result<Self, PcapError> {
        let file = File::create(path)?;
        CaptureWriter::with_options(BufWriter::with_capacity(1 << 16, file), format, link_type, options)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Writes the file header to `inner` (which should be buffered) with default options.
    pub fn new(inner: W, format: CaptureFormat, link_type: LinkType) -> Result<Self, PcapError> {
        Self::with_options(inner, format, link_type, WriterOptions::default())
    }

    /// Writes the file header to `inner` with explicit options.
    pub fn with_options(
        inner: W,
        format: CaptureFormat,
        link_type: LinkType,
        options: WriterOptions,
    ) -> Result<Self, PcapError> {
        let mut options = options;
        options.snaplen = options.snaplen.min(MAX_FRAME_LEN);
        let mut w = CaptureWriter {
            inner: Some(inner),
            format,
            options,
            interfaces: 0,
            frames: 0,
            bytes_written: 0,
            stripped: 0,
            comment: String::new(),
        };
        let o = options.byte_order;
        match format {
            CaptureFormat::PcapMicros | CaptureFormat::PcapNanos => {
                let magic = if format == CaptureFormat::PcapNanos { PCAP_MAGIC_NANOS } else { PCAP_MAGIC_MICROS };
                let mut hdr = [0u8; 24];
                hdr[0..4].copy_from_slice(&o.put_u32(magic));
                hdr[4..6].copy_from_slice(&o.put_u16(2));
                hdr[6..8].copy_from_slice(&o.put_u16(4));
                // thiszone and sigfigs stay 0.
                hdr[16..20].copy_from_slice(&o.put_u32(options.snaplen));
                hdr[20..24].copy_from_slice(&o.put_u32(u32::from(link_type.0)));
                w.put(&hdr)?;
                w.interfaces = 1;
            }
            CaptureFormat::PcapNg => {
                // SHB: type, length, BOM, version 1.0, section length -1,
                // shb_userappl, opt_endofopt, length.
                let appl = USER_APPL.as_bytes();
                let total = 28 + 4 + pad4(appl.len()) + 4;
                let mut shb = Vec::with_capacity(total);
                shb.extend_from_slice(&o.put_u32(BLOCK_SHB));
                shb.extend_from_slice(&o.put_u32(total as u32));
                shb.extend_from_slice(&o.put_u32(BYTE_ORDER_MAGIC));
                shb.extend_from_slice(&o.put_u16(1));
                shb.extend_from_slice(&o.put_u16(0));
                shb.extend_from_slice(&u64::MAX.to_le_bytes());
                push_option(&mut shb, o, OPT_SHB_USERAPPL, appl);
                shb.extend_from_slice(&PAD);
                shb.extend_from_slice(&o.put_u32(total as u32));
                w.put(&shb)?;
                w.add_interface(link_type)?;
            }
        }
        Ok(w)
    }

    /// pcapng only: declares another interface (an Interface Description Block
    /// with the writer's snapshot length and nanosecond timestamps) and returns
    /// its id for [`WriteRecord::interface_id`]. The first interface, id 0, is
    /// the one given at creation.
    pub fn add_interface(&mut self, link_type: LinkType) -> Result<u32, PcapError> {
        if self.format != CaptureFormat::PcapNg {
            return Err(PcapError::Unsupported("classic pcap files have a single link type"));
        }
        let o = self.options.byte_order;
        // IDB: type, length, link type, reserved, snaplen, if_tsresol, opt_endofopt, length.
        let total: u32 = 20 + 8 + 4;
        let mut idb = [0u8; 32];
        idb[0..4].copy_from_slice(&o.put_u32(BLOCK_IDB));
        idb[4..8].copy_from_slice(&o.put_u32(total));
        idb[8..10].copy_from_slice(&o.put_u16(link_type.0));
        idb[12..16].copy_from_slice(&o.put_u32(self.options.snaplen));
        idb[16..18].copy_from_slice(&o.put_u16(OPT_IF_TSRESOL));
        idb[18..20].copy_from_slice(&o.put_u16(1));
        idb[20] = 9;
        // bytes 21..24 padding, 24..28 opt_endofopt.
        idb[28..32].copy_from_slice(&o.put_u32(total));
        self.put(&idb)?;
        self.interfaces += 1;
        Ok(self.interfaces - 1)
    }

    /// Writes a frame whose original length is its captured length.
    pub fn write_frame(
        &mut self,
        data: &[u8],
        timestamp_ns: u64,
        annotation: &FrameAnnotation,
    ) -> Result<(), PcapError> {
        self.write_record(&WriteRecord { data, timestamp_ns, annotation: *annotation, ..WriteRecord::default() })
    }

    /// Writes a (possibly snapped) frame: `original_len` is its length on the
    /// wire and must be at least `data.len()`.
    pub fn write_frame_with_original_len(
        &mut self,
        data: &[u8],
        original_len: u32,
        timestamp_ns: u64,
        annotation: &FrameAnnotation,
    ) -> Result<(), PcapError> {
        self.write_record(&WriteRecord {
            data,
            original_len: Some(original_len),
            timestamp_ns,
            annotation: *annotation,
            ..WriteRecord::default()
        })
    }

    /// Writes a frame with every field under control. Nothing is written if it
    /// is refused.
    pub fn write_record(&mut self, rec: &WriteRecord<'_>) -> Result<(), PcapError> {
        let frame = self.frames;
        let snaplen = self.options.snaplen;
        if rec.data.len() > snaplen as usize {
            return Err(PcapError::FrameTooLarge {
                frame,
                offset: None,
                len: rec.data.len() as u64,
                limit: snaplen.into(),
            });
        }
        // data.len() <= snaplen <= MAX_FRAME_LEN, so it fits a u32.
        let cap = rec.data.len() as u32;
        let orig = rec.original_len.unwrap_or(cap);
        if orig < cap {
            return Err(PcapError::InvalidFrame { frame, reason: "original length is less than the captured length" });
        }
        if rec.interface_id >= self.interfaces {
            return Err(PcapError::UnknownInterface { frame, interface_id: rec.interface_id });
        }
        let has_comment = !rec.annotation.is_empty() || rec.comment.is_some_and(|c| !c.is_empty());
        let o = self.options.byte_order;
        match self.format {
            CaptureFormat::PcapMicros | CaptureFormat::PcapNanos => {
                if has_comment && !self.options.strip_annotations {
                    return Err(PcapError::AnnotationNotRepresentable { frame, format: self.format });
                }
                let secs = rec.timestamp_ns / 1_000_000_000;
                let sub_ns = (rec.timestamp_ns % 1_000_000_000) as u32;
                let frac = if self.format == CaptureFormat::PcapNanos { sub_ns } else { sub_ns / 1000 };
                let secs = u32::try_from(secs).map_err(|_| PcapError::TimestampOutOfRange {
                    frame,
                    timestamp_ns: rec.timestamp_ns,
                    format: self.format,
                })?;
                let mut hdr = [0u8; 16];
                hdr[0..4].copy_from_slice(&o.put_u32(secs));
                hdr[4..8].copy_from_slice(&o.put_u32(frac));
                hdr[8..12].copy_from_slice(&o.put_u32(cap));
                hdr[12..16].copy_from_slice(&o.put_u32(orig));
                if has_comment {
                    self.stripped += 1;
                }
                self.put(&hdr)?;
                self.put(rec.data)?;
            }
            CaptureFormat::PcapNg => {
                self.comment.clear();
                rec.annotation.write_comment(&mut self.comment);
                if let Some(extra) = rec.comment.filter(|c| !c.is_empty()) {
                    if !self.comment.is_empty() {
                        self.comment.push(' ');
                    }
                    self.comment.push_str(extra);
                }
                let comment_len = self.comment.len();
                if comment_len > usize::from(u16::MAX) {
                    return Err(PcapError::InvalidFrame { frame, reason: "packet comment is longer than 65535 bytes" });
                }
                let data_padded = pad4(rec.data.len());
                let opts_len = if comment_len > 0 { 4 + pad4(comment_len) + 4 } else { 0 };
                // Bounded by MAX_FRAME_LEN + 64 KiB + 44, well within u32.
                let total = (32 + data_padded + opts_len) as u32;
                let mut hdr = [0u8; 28];
                hdr[0..4].copy_from_slice(&o.put_u32(BLOCK_EPB));
                hdr[4..8].copy_from_slice(&o.put_u32(total));
                hdr[8..12].copy_from_slice(&o.put_u32(rec.interface_id));
                hdr[12..16].copy_from_slice(&o.put_u32((rec.timestamp_ns >> 32) as u32));
                hdr[16..20].copy_from_slice(&o.put_u32(rec.timestamp_ns as u32));
                hdr[20..24].copy_from_slice(&o.put_u32(cap));
                hdr[24..28].copy_from_slice(&o.put_u32(orig));
                self.put(&hdr)?;
                self.put(rec.data)?;
                self.put(&PAD[..data_padded - rec.data.len()])?;
                if comment_len > 0 {
                    let mut opt = [0u8; 4];
                    opt[0..2].copy_from_slice(&o.put_u16(OPT_COMMENT));
                    opt[2..4].copy_from_slice(&o.put_u16(comment_len as u16));
                    self.put(&opt)?;
                    let comment = std::mem::take(&mut self.comment);
                    let res = self.put(comment.as_bytes());
                    self.comment = comment;
                    res?;
                    self.put(&PAD[..pad4(comment_len) - comment_len])?;
                    self.put(&PAD)?; // opt_endofopt
                }
                self.put(&o.put_u32(total))?;
            }
        }
        self.frames += 1;
        Ok(())
    }

    /// Flushes buffered output.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        if let Some(w) = self.inner.as_mut() {
            w.flush()?;
        }
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> Result<W, PcapError> {
        self.flush()?;
        self.inner.take().ok_or(PcapError::Unsupported("writer already finished"))
    }

    /// The output format.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Number of frames written.
    pub fn frames_written(&self) -> u64 {
        self.frames
    }

    /// Number of bytes written (headers included).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Number of frames whose annotation or comment was dropped because the
    /// format cannot carry it ([`WriterOptions::strip_annotations`]).
    pub fn stripped_annotations(&self) -> u64 {
        self.stripped
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), PcapError> {
        let w = self.inner.as_mut().ok_or(PcapError::Unsupported("writer already finished"))?;
        w.write_all(bytes)?;
        self.bytes_written += bytes.len() as u64;
        Ok(())
    }
}

impl<W: Write> Drop for CaptureWriter<W> {
    fn drop(&mut self) {
        if let Some(w) = self.inner.as_mut() {
            // Errors cannot be reported from drop; `finish` reports them.
            let _ = w.flush();
        }
    }
}

/// Appends one option (code, length, value, padding) to a block under construction.
fn push_option(block: &mut Vec<u8>, o: ByteOrder, code: u16, value: &[u8]) {
    block.extend_from_slice(&o.put_u16(code));
    block.extend_from_slice(&o.put_u16(value.len() as u16));
    block.extend_from_slice(value);
    block.extend_from_slice(&PAD[..pad4(value.len()) - value.len()]);
}
