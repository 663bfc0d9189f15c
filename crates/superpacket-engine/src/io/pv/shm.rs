//! The shared memory of a paravirtual link: one sealed memfd mapped
//! `MAP_SHARED` by both processes, and the eventfds that carry the
//! notifications.
//!
//! The engine creates the region ([`ShmRegion::create`]), sizes it, and
//! seals it against shrinking and growing (`F_SEAL_SHRINK | F_SEAL_GROW |
//! F_SEAL_SEAL`) before the client ever sees the descriptor: a client that
//! could `ftruncate` the file smaller would make the engine's next access to
//! the vanished pages a `SIGBUS`. The client ([`ShmRegion::map_received`])
//! checks the size and the seals of what it received for the same reason.
//!
//! # Access rules
//!
//! The other process can write any byte of the region at any time, so the
//! safe API never hands out a shared reference to peer-writable bytes:
//!
//! - ring indices are [`AtomicU16`]s (acquire/release: the virtio memory
//!   barriers);
//! - descriptors, ring entries and frames are *copied out* into private
//!   memory ([`ShmRegion::copy_out`], [`ShmRegion::read_u16`], ...) before
//!   anything looks at them, so a value is validated and then used without
//!   the peer being able to change it in between (no double fetch);
//! - a buffer the local side owns (not yet made available to the peer) is
//!   written through [`ShmRegion::with_mut`], which lends a `&mut [u8]` for
//!   the duration of a closure (the fused copy-and-checksum kernels need a
//!   slice). A peer writing into a buffer it does not own only corrupts the
//!   frame it will itself receive.
//!
//! Every offset is bounds-checked against the mapping; a bad offset is a
//! [`ShmError`], never a panic or an access outside the mapping.

use super::super::error::IoError;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU16;

/// The seals a region must carry before the engine maps one or a client
/// trusts one: its size can no longer change.
pub const REQUIRED_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;

/// An access outside the region, or a misaligned atomic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("shared-memory access of {len} bytes at offset {offset} outside the {size}-byte region (or misaligned)")]
pub struct ShmError {
    /// Offset asked for.
    pub offset: u64,
    /// Length asked for.
    pub len: u64,
    /// Region size.
    pub size: usize,
}

/// A mapped, sealed memfd shared with the peer process.
#[derive(Debug)]
pub struct ShmRegion {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is process memory owned by this value; every access
// goes through methods that copy, use atomics, or lend `&mut` under `&mut
// self`, so moving the value to another thread is sound.
unsafe impl Send for ShmRegion {}

impl ShmRegion {
    /// Creates a memfd named `name` of `len` bytes (zero-filled), seals its
    /// size and maps it.
    ///
    /// # Errors
    /// `memfd_create`, `ftruncate`, `fcntl(F_ADD_SEALS)` or `mmap` failing.
    pub fn create(name: &str, len: usize) -> Result<ShmRegion, IoError> {
        let cname = CString::new(name).map_err(|_| IoError::InvalidName { name: name.into(), reason: "NUL byte" })?;
        // SAFETY: `cname` is a valid NUL-terminated string that outlives the call.
        let raw = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if raw < 0 {
            return Err(IoError::last_os("memfd_create", name));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } < 0 {
            return Err(IoError::last_os("ftruncate", name));
        }
        let seals = REQUIRED_SEALS | libc::F_SEAL_SEAL;
        // SAFETY: fcntl(F_ADD_SEALS) with an int argument on a descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(IoError::last_os("fcntl(F_ADD_SEALS)", name));
        }
        Self::map(fd, len, name)
    }

    /// Maps a region received from the peer, after checking that it is a
    /// sealed file of exactly `len` bytes.
    ///
    /// # Errors
    /// Wrong size, missing seals, or `mmap` failing.
    pub fn map_received(fd: OwnedFd, len: usize) -> Result<ShmRegion, IoError> {
        // SAFETY: fstat writes a stat struct we own; the descriptor is valid.
        let size = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) < 0 {
                return Err(IoError::last_os("fstat", "pv region"));
            }
            st.st_size as u64
        };
        if size != len as u64 {
            return Err(IoError::Unsupported(format!("pv region is {size} bytes, the handshake said {len}")));
        }
        // SAFETY: F_GET_SEALS takes no argument and has no memory effects.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & REQUIRED_SEALS != REQUIRED_SEALS {
            return Err(IoError::Unsupported(format!(
                "pv region is not sealed against resizing (seals {seals:#x}): refusing to map it"
            )));
        }
        Self::map(fd, len, "pv region")
    }

    fn map(fd: OwnedFd, len: usize, what: &str) -> Result<ShmRegion, IoError> {
        if len == 0 {
            return Err(IoError::Unsupported("empty pv region".into()));
        }
        // SAFETY: a fresh shared mapping of `len` bytes of a file of that
        // size (checked or set by the caller, and sealed); no existing memory
        // is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(IoError::last_os("mmap", what));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| IoError::Unsupported("mmap returned NULL".into()))?;
        Ok(ShmRegion { fd, ptr, len })
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region (never: creation refuses it).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memfd (sent to the client with `SCM_RIGHTS`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The memfd's number (for tests that look for it in `/proc`).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Checks `offset..offset + len` lies inside the region; returns `offset` as usize.
    #[inline]
    fn check(&self, offset: u64, len: usize) -> Result<usize, ShmError> {
        let err = ShmError { offset, len: len as u64, size: self.len };
        let off = usize::try_from(offset).map_err(|_| err)?;
        let end = off.checked_add(len).ok_or(err)?;
        if end > self.len {
            return Err(err);
        }
        Ok(off)
    }

    /// Copies `dst.len()` bytes at `offset` out of the region.
    ///
    /// # Errors
    /// The range is outside the region.
    #[inline]
    pub fn copy_out(&self, offset: u64, dst: &mut [u8]) -> Result<(), ShmError> {
        let off = self.check(offset, dst.len())?;
        // SAFETY: `off..off + dst.len()` is inside the mapping (checked);
        // `dst` is private memory that cannot overlap a MAP_SHARED mapping we
        // never lend out across this call. The peer may write the source
        // concurrently: the copy then holds some mix of old and new bytes,
        // which the caller validates as untrusted input.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Appends `len` bytes at `offset` to `out` (copied out, as
    /// [`ShmRegion::copy_out`], without zeroing `out` first).
    ///
    /// # Errors
    /// The range is outside the region (`out` is then unchanged).
    #[inline]
    pub fn append_to(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), ShmError> {
        let off = self.check(offset, len)?;
        out.reserve(len);
        let at = out.len();
        // SAFETY: the source range is inside the mapping (checked); the
        // destination is the reserved, unused capacity of `out` (private
        // memory), and exactly `len` bytes are written before `set_len`
        // makes them part of the vector.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), out.as_mut_ptr().add(at), len);
            out.set_len(at + len);
        }
        Ok(())
    }

    /// Copies `src` into the region at `offset`.
    ///
    /// # Errors
    /// The range is outside the region.
    #[inline]
    pub fn copy_in(&mut self, offset: u64, src: &[u8]) -> Result<(), ShmError> {
        let off = self.check(offset, src.len())?;
        // SAFETY: `off..off + src.len()` is inside the mapping (checked) and
        // `src` is private memory, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len()) };
        Ok(())
    }

    /// Lends `offset..offset + len` as a mutable slice for the duration of
    /// `f` (a buffer this side owns; see the module documentation).
    ///
    /// # Errors
    /// The range is outside the region.
    #[inline]
    pub fn with_mut<R>(&mut self, offset: u64, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, ShmError> {
        let off = self.check(offset, len)?;
        // SAFETY: the range is inside the mapping (checked); `&mut self`
        // guarantees no other reference into the mapping exists in this
        // process while the slice lives (it cannot escape `f`). Bytes are
        // plain `u8`: any value the peer might store is a valid `u8`.
        let s = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) };
        Ok(f(s))
    }

    /// The 16-bit ring index at `offset` (2-byte aligned).
    ///
    /// # Errors
    /// Out of range or misaligned.
    #[inline]
    pub fn atomic_u16(&self, offset: u64) -> Result<&AtomicU16, ShmError> {
        let off = self.check(offset, 2)?;
        if off % 2 != 0 {
            return Err(ShmError { offset, len: 2, size: self.len });
        }
        // SAFETY: in range and aligned (checked; the mapping is page-aligned);
        // an AtomicU16 has the size and alignment of a u16, may be modified
        // concurrently by the other process through its own atomics, and the
        // reference lives no longer than `self`, which keeps the mapping.
        Ok(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU16>() })
    }

    /// A little-endian u16 at `offset`, copied out.
    ///
    /// # Errors
    /// Out of range.
    #[inline]
    pub fn read_u16(&self, offset: u64) -> Result<u16, ShmError> {
        let mut b = [0u8; 2];
        self.copy_out(offset, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    /// A little-endian u32 at `offset`, copied out.
    ///
    /// # Errors
    /// Out of range.
    #[inline]
    pub fn read_u32(&self, offset: u64) -> Result<u32, ShmError> {
        let mut b = [0u8; 4];
        self.copy_out(offset, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian u16 at `offset`.
    ///
    /// # Errors
    /// Out of range.
    #[inline]
    pub fn write_u16(&mut self, offset: u64, v: u16) -> Result<(), ShmError> {
        self.copy_in(offset, &v.to_le_bytes())
    }

    /// Writes a little-endian u32 at `offset`.
    ///
    /// # Errors
    /// Out of range.
    #[inline]
    pub fn write_u32(&mut self, offset: u64, v: u32) -> Result<(), ShmError> {
        self.copy_in(offset, &v.to_le_bytes())
    }
}

impl Drop for ShmRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe the mapping created in `map`, which no
        // reference outlives (all borrow `self`). The memfd closes with `fd`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One notification channel (an eventfd): a "kick" (driver to device: new
/// buffers available) or a "call" (device to driver: buffers used).
#[derive(Debug)]
pub struct Notifier {
    fd: OwnedFd,
}

impl Notifier {
    /// A new nonblocking eventfd.
    ///
    /// # Errors
    /// `eventfd` failing.
    pub fn new() -> Result<Notifier, IoError> {
        // SAFETY: eventfd takes an initial value and flags.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(IoError::last_os("eventfd", "pv notifier"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        Ok(Notifier { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Wraps a descriptor received from the peer, switching it to nonblocking.
    ///
    /// # Errors
    /// `fcntl` failing (not a descriptor).
    pub fn from_fd(fd: OwnedFd) -> Result<Notifier, IoError> {
        super::super::sys::set_nonblocking(fd.as_fd(), true, "pv notifier")?;
        Ok(Notifier { fd })
    }

    /// Signals the other side (adds 1 to the counter).
    #[inline]
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64. Failure (EAGAIN on counter
        // overflow, or a non-eventfd descriptor from a bad peer) only means
        // no wake-up, which the peer's own polling covers.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reads and resets the counter; true if it was signalled.
    #[inline]
    pub fn take(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        n == 8 && v > 0
    }

    /// Waits until signalled or `timeout_ms` passes (-1: forever); true if
    /// readable. An interrupted wait returns false.
    pub fn wait(&self, timeout_ms: i32) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` is a valid pollfd array of length 1 that lives across the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        rc > 0 && pfd.revents & libc::POLLIN != 0
    }

    /// The descriptor.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Notifier {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn region_is_sealed_bounds_checked_and_shared_between_mappings() {
        let mut a = ShmRegion::create("sp-test", 8192).unwrap();
        a.copy_in(100, b"hello").unwrap();
        // A second mapping of the same memfd sees the bytes (what the peer does).
        let dup = a.fd().try_clone_to_owned().unwrap();
        let b = ShmRegion::map_received(dup, 8192).unwrap();
        let mut out = [0u8; 5];
        b.copy_out(100, &mut out).unwrap();
        assert_eq!(&out, b"hello");
        a.atomic_u16(64).unwrap().store(0xBEEF, Ordering::Release);
        assert_eq!(b.read_u16(64).unwrap(), 0xBEEF);
        // Out of range and overflowing offsets are errors, not panics.
        assert!(b.copy_out(8190, &mut out).is_err());
        assert!(b.copy_out(u64::MAX - 1, &mut out).is_err());
        assert!(b.atomic_u16(8191).is_err());
        assert!(b.atomic_u16(63).is_err(), "misaligned atomic");
        // The wrong size is refused.
        let dup = a.fd().try_clone_to_owned().unwrap();
        assert!(ShmRegion::map_received(dup, 4096).is_err());
        // The size cannot change any more.
        // SAFETY: ftruncate on a descriptor the region owns; it must fail.
        let rc = unsafe { libc::ftruncate(a.raw_fd(), 4096) };
        assert!(rc < 0, "a sealed region cannot shrink");
    }

    #[test]
    fn unsealed_memfd_is_refused() {
        let name = CString::new("sp-unsealed").unwrap();
        // SAFETY: valid NUL-terminated name; fresh descriptor owned below.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC)) };
        // SAFETY: ftruncate on the descriptor we own.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 4096) }, 0);
        let e = ShmRegion::map_received(fd, 4096).unwrap_err();
        assert!(e.to_string().contains("sealed"), "{e}");
    }

    #[test]
    fn notifier_signals_once_per_take() {
        let n = Notifier::new().unwrap();
        assert!(!n.take());
        assert!(!n.wait(0));
        n.notify();
        n.notify();
        assert!(n.wait(0));
        assert!(n.take());
        assert!(!n.take());
    }
}
