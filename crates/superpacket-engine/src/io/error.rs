//! The error type of the real-I/O layer: every failure names the syscall or
//! command that failed, what it was applied to, and the errno text.

use std::io;
use superpacket::packet::virtio::VirtioHdrError;

/// Result of the `io` module.
pub type Result<T> = std::result::Result<T, IoError>;

/// What went wrong in real I/O.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    /// A system call failed; `source` carries the errno and its text.
    #[error("{call} ({what}): {source}")]
    Syscall {
        /// The call, e.g. `ioctl(TUNSETIFF)` or `setsockopt(PACKET_VNET_HDR)`.
        call: &'static str,
        /// What it was applied to (device, namespace, path).
        what: String,
        /// The OS error (errno and text).
        #[source]
        source: io::Error,
    },
    /// `TUNSETOFFLOAD` refused the flags with `EINVAL`: this kernel does not
    /// accept at least one of them (offload-rules 4.4).
    #[error("TUNSETOFFLOAD {flags:#x} on {device} rejected by the kernel (EINVAL)")]
    OffloadRejected {
        /// The refused flags.
        flags: u32,
        /// The TAP device.
        device: String,
    },
    /// A name (namespace, device, sysfs attribute) is not acceptable.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The virtio_net_hdr could not be encoded or decoded.
    #[error("virtio_net_hdr: {0}")]
    Header(#[from] VirtioHdrError),
    /// A received packet did not fit the buffer (its tail was lost).
    #[error("received packet of {len} bytes truncated to the {capacity}-byte buffer")]
    Truncated {
        /// Real frame length.
        len: usize,
        /// Buffer size.
        capacity: usize,
    },
    /// A write/send moved fewer bytes than asked.
    #[error("{call} wrote {written} of {expected} bytes")]
    ShortWrite {
        /// The call.
        call: &'static str,
        /// Bytes written.
        written: usize,
        /// Bytes offered.
        expected: usize,
    },
    /// A request this kernel or this module does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An oracle scenario could not be completed.
    #[error("oracle: {0}")]
    Oracle(String),
}

impl IoError {
    /// A [`IoError::Syscall`] from the current `errno`.
    pub fn last_os(call: &'static str, what: impl Into<String>) -> IoError {
        IoError::Syscall { call, what: what.into(), source: io::Error::last_os_error() }
    }

    /// The raw errno of a failed syscall, if this is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            IoError::Syscall { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// True for a timeout or "would block" from a nonblocking or timed call.
    pub fn is_would_block(&self) -> bool {
        matches!(self.raw_os_error(), Some(e) if e == libc::EAGAIN || e == libc::EWOULDBLOCK)
    }
}
