//! Errors of capture reading and writing.

use std::fmt;
use std::io;

use super::CaptureFormat;
use super::annotation::AnnotationError;

/// An error reading or writing a capture file. Messages name the frame index
/// (0-based) and/or the byte offset where the problem is.
#[derive(Debug)]
#[non_exhaustive]
pub enum PcapError {
    /// The underlying reader or writer failed.
    Io(io::Error),

    /// The file starts with neither a pcap nor a pcapng magic number.
    BadMagic {
        /// The first four bytes of the file.
        magic: [u8; 4],
    },

    /// The file declares a format version this reader does not know.
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
    Truncated {
        /// What was being read, e.g. `record data` or `enhanced packet block`.
        what: &'static str,
        /// Index of the frame being read, if the truncated part is a frame.
        frame: Option<u64>,
        /// Byte offset where the truncated header, record or block starts.
        offset: u64,
    },

    /// A pcapng block (or pcap header) is malformed.
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
    BadAnnotation {
        /// Index of the frame.
        frame: u64,
        /// What is wrong.
        source: AnnotationError,
    },

    /// An annotated (or commented) frame was written to a format that cannot
    /// carry comments, and stripping was not allowed.
    AnnotationNotRepresentable {
        /// Index of the frame.
        frame: u64,
        /// The output format.
        format: CaptureFormat,
    },

    /// A timestamp does not fit the output format (pcap seconds are 32-bit).
    TimestampOutOfRange {
        /// Index of the frame.
        frame: u64,
        /// The timestamp given.
        timestamp_ns: u64,
        /// The output format.
        format: CaptureFormat,
    },

    /// A frame refers to an interface that was not declared.
    UnknownInterface {
        /// Index of the frame.
        frame: u64,
        /// The interface id given.
        interface_id: u32,
    },

    /// A frame given to the writer is inconsistent (e.g. an original length
    /// smaller than the data, or a comment longer than 65535 bytes).
    InvalidFrame {
        /// Index of the frame.
        frame: u64,
        /// What is wrong.
        reason: &'static str,
    },

    /// The operation is not available for this format.
    Unsupported(&'static str),
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Io(err) => write!(f, "I/O error: {err}"),
            PcapError::BadMagic { magic } => {
                write!(f, "not a pcap or pcapng file: unrecognised magic number {magic:02x?}")
            }
            PcapError::UnsupportedVersion { format, major, minor, offset } => {
                write!(f, "unsupported {format} version {major}.{minor} at byte offset {offset}")
            }
            PcapError::Truncated { what, frame, offset } => {
                write!(f, "file truncated in {what}{} starting at byte offset {offset}", FrameSuffix(*frame))
            }
            PcapError::BadBlock { block, reason, offset } => {
                write!(f, "malformed {block} at byte offset {offset}: {reason}")
            }
            PcapError::FrameTooLarge { frame, offset, len, limit } => {
                write!(f, "frame {frame}{} is {len} bytes, more than the limit of {limit}", OffsetSuffix(*offset))
            }
            PcapError::BadAnnotation { frame, source } => {
                write!(f, "frame {frame}: bad offload annotation in packet comment: {source}")
            }
            PcapError::AnnotationNotRepresentable { frame, format } => write!(
                f,
                "frame {frame}: {format} cannot carry packet comments, so its offload annotation would be lost \
                 (write pcapng, or allow stripping with WriterOptions::strip_annotations)"
            ),
            PcapError::TimestampOutOfRange { frame, timestamp_ns, format } => {
                write!(f, "frame {frame}: timestamp {timestamp_ns} ns does not fit the {format} format")
            }
            PcapError::UnknownInterface { frame, interface_id } => {
                write!(f, "frame {frame}: interface {interface_id} is not defined")
            }
            PcapError::InvalidFrame { frame, reason } => write!(f, "frame {frame}: {reason}"),
            PcapError::Unsupported(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for PcapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PcapError::Io(err) => Some(err),
            PcapError::BadAnnotation { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<io::Error> for PcapError {
    fn from(err: io::Error) -> Self {
        PcapError::Io(err)
    }
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
