//! Errors of capture reading and writing.

use std::fmt;
use std::io;

use super::CaptureFormat;
use super::annotation::AnnotationError;

/// An error reading or writing a capture file. Messages name the frame index
/// (0-based) and/or the byte offset where the problem is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PcapError {
    /// The underlying reader or writer failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    /// The file starts with neither a pcap nor a pcapng magic number.
    #[error("not a pcap or pcapng file: unrecognised magic number {magic:02x?}")]
    BadMagic {
        /// The first four bytes of the file.
        magic: [u8; 4],
    },

    /// The file declares a format version this reader does not know.
    #[error("unsupported {format} version {major}.{minor} at byte offset {offset}")]
    UnsupportedVersion {
        /// `pcap` or `pcapng`.
        format: &'static str,
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
        /// Byte offset of the header holding the version.
        offset: u64,
    },

    /// The file ends in the middle of a header, record or block. Frames before
    /// it have been delivered.
    #[error("file truncated in {what}{} starting at byte offset {offset}", FrameSuffix(*.frame))]
    Truncated {
        /// What was being read, e.g. `record data` or `enhanced packet block`.
        what: &'static str,
        /// Index of the frame being read, if the truncated part is a frame.
        frame: Option<u64>,
        /// Byte offset where the truncated header, record or block starts.
        offset: u64,
    },

    /// A pcapng block (or pcap header) is malformed.
    #[error("malformed {block} at byte offset {offset}: {reason}")]
    BadBlock {
        /// Which block, e.g. `enhanced packet block`.
        block: &'static str,
        /// What is wrong with it.
        reason: String,
        /// Byte offset where the block starts.
        offset: u64,
    },

    /// A frame (or the block holding it) is larger than the limit. Nothing is
    /// allocated for it.
    #[error("frame {frame}{} is {len} bytes, more than the limit of {limit}", OffsetSuffix(*.offset))]
    FrameTooLarge {
        /// Index of the frame.
        frame: u64,
        /// Byte offset of the record or block (reading) or `None` (writing).
        offset: Option<u64>,
        /// The claimed or given length.
        len: u64,
        /// The limit in force ([`MAX_FRAME_LEN`](super::MAX_FRAME_LEN) for
        /// reading, the snapshot length for writing).
        limit: u64,
    },

    /// A packet comment holds a malformed offload annotation.
    #[error("frame {frame}: bad offload annotation in packet comment: {source}")]
    BadAnnotation {
        /// Index of the frame.
        frame: u64,
        /// What is wrong.
        #[source]
        source: AnnotationError,
    },

    /// An annotated (or commented) frame was written to a format that cannot
    /// carry comments, and stripping was not allowed.
    #[error(
        "frame {frame}: {format} cannot carry packet comments, so its offload annotation would be lost \
         (write pcapng, or allow stripping with WriterOptions::strip_annotations)"
    )]
    AnnotationNotRepresentable {
        /// Index of the frame.
        frame: u64,
        /// The output format.
        format: CaptureFormat,
    },

    /// A timestamp does not fit the output format (pcap seconds are 32-bit).
    #[error("frame {frame}: timestamp {timestamp_ns} ns does not fit the {format} format")]
    TimestampOutOfRange {
        /// Index of the frame.
        frame: u64,
        /// The timestamp given.
        timestamp_ns: u64,
        /// The output format.
        format: CaptureFormat,
    },

    /// A frame refers to an interface that was not declared.
    #[error("frame {frame}: interface {interface_id} is not defined")]
    UnknownInterface {
        /// Index of the frame.
        frame: u64,
        /// The interface id given.
        interface_id: u32,
    },

    /// A frame given to the writer is inconsistent (e.g. an original length
    /// smaller than the data, or a comment longer than 65535 bytes).
    #[error("frame {frame}: {reason}")]
    InvalidFrame {
        /// Index of the frame.
        frame: u64,
        /// What is wrong.
        reason: &'static str,
    },

    /// The operation is not available for this format.
    #[error("{0}")]
    Unsupported(&'static str),
}

impl PcapError {
    /// Whether the reader can go on after this error: true only for
    /// [`BadAnnotation`](PcapError::BadAnnotation), whose frame has been consumed.
    pub fn is_recoverable(&self) -> bool {
        matches!(self, PcapError::BadAnnotation { .. })
    }
}

struct FrameSuffix(Option<u64>);

impl fmt::Display for FrameSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, " of frame {n}"),
            None => Ok(()),
        }
    }
}

struct OffsetSuffix(Option<u64>);

impl fmt::Display for OffsetSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, " at byte offset {n}"),
            None => Ok(()),
        }
    }
}
