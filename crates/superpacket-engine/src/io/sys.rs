//! Small libc helpers shared by the TAP, TUN and AF_PACKET code.

use super::error::{IoError, Result};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// Sets or clears `O_NONBLOCK` on `fd`.
pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool, what: &str) -> Result<()> {
    // SAFETY: F_GETFL on a valid, borrowed descriptor has no memory effects.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(IoError::last_os("fcntl(F_GETFL)", what));
    }
    let new = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: F_SETFL with an int argument on a valid, borrowed descriptor.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, new) } < 0 {
        return Err(IoError::last_os("fcntl(F_SETFL)", what));
    }
    Ok(())
}

/// Makes a blocking system call, again as long as a signal interrupts it
/// (`EINTR`: nothing was done, as with `SA_RESTART`); a negative result is
/// the error `call` on `what`. Its timeout, if any, restarts in full.
pub fn retry_interrupted<T: Default + PartialOrd>(
    call: &'static str,
    what: &str,
    mut syscall: impl FnMut() -> T,
) -> Result<T> {
    loop {
        let rc = syscall();
        if rc >= T::default() {
            return Ok(rc);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(IoError::Syscall { call, what: what.to_string(), source: err });
        }
    }
}

/// Waits until `fd` is readable or `timeout` passes; `Ok(true)` when readable.
/// `EINTR` restarts the wait with the full timeout (good enough for tests).
pub fn poll_readable(fd: BorrowedFd<'_>, timeout: Duration, what: &str) -> Result<bool> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // Round sub-millisecond timeouts up so that a non-zero timeout waits.
    let ms = if ms == 0 && !timeout.is_zero() { 1 } else { ms };
    let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: `pfd` is a valid pollfd array of length 1 that lives across the call.
    let rc = retry_interrupted("poll", what, || unsafe { libc::poll(&mut pfd, 1, ms) })?;
    Ok(rc > 0 && pfd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0)
}

/// Sets `UDP_SEGMENT` on a UDP socket: its sends become superpackets of
/// `gso_size`-byte datagrams (the kernel's USO).
pub fn set_udp_segment(fd: BorrowedFd<'_>, gso_size: u16) -> Result<()> {
    let v = libc::c_int::from(gso_size);
    // SAFETY: the option value points to a live c_int whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&raw const v).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(IoError::last_os("setsockopt(UDP_SEGMENT)", "udp socket"));
    }
    Ok(())
}

/// An `iovec` for a read-only slice (the kernel only reads it).
pub fn iovec_ro(s: &[u8]) -> libc::iovec {
    libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() }
}

/// An `iovec` for a writable slice.
pub fn iovec_rw(s: &mut [u8]) -> libc::iovec {
    libc::iovec { iov_base: s.as_mut_ptr() as *mut libc::c_void, iov_len: s.len() }
}

/// Checks an interface name: 1-15 bytes of `[A-Za-z0-9_.-]`.
pub fn check_ifname(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 15 {
        return Err(IoError::InvalidName { name: name.to_string(), reason: "interface names have 1-15 bytes" });
    }
    check_chars(name)
}

/// Checks a name used on command lines and in paths: `[A-Za-z0-9_.-]`, not
/// starting with `-` or `.`.
pub fn check_chars(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && !name.starts_with(['-', '.'])
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(IoError::InvalidName {
            name: name.to_string(),
            reason: "use only [A-Za-z0-9_.-], not starting with - or .",
        })
    }
}

/// `if_nametoindex` in the current thread's network namespace.
pub fn if_index(name: &str) -> Result<u32> {
    check_ifname(name)?;
    let c = std::ffi::CString::new(name).map_err(|_| IoError::InvalidName { name: name.into(), reason: "NUL byte" })?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(IoError::last_os("if_nametoindex", name));
    }
    Ok(idx)
}

/// Most frame parts `with_iovecs` lays out on the stack (more are placed
/// in a heap vector): enough for a frag-list GRO aggregate of 64 KiB.
pub const STACK_PARTS: usize = 127;

/// Builds `[header, parts...]` as iovecs (on the stack for up to
/// [`STACK_PARTS`] parts) and calls `f`.
pub fn with_iovecs(header: &[u8], parts: &[&[u8]], f: impl FnOnce(&[libc::iovec]) -> isize) -> Result<isize> {
    const STACK: usize = STACK_PARTS + 1;
    if parts.len() + 1 > 1024 {
        return Err(IoError::Unsupported(format!("{} frame parts (at most 1023)", parts.len())));
    }
    if parts.len() < STACK {
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; STACK];
        iov[0] = iovec_ro(header);
        for (slot, p) in iov[1..].iter_mut().zip(parts) {
            *slot = iovec_ro(p);
        }
        Ok(f(&iov[..parts.len() + 1]))
    } else {
        let mut iov = Vec::with_capacity(parts.len() + 1);
        iov.push(iovec_ro(header));
        iov.extend(parts.iter().map(|p| iovec_ro(p)));
        Ok(f(&iov))
    }
}
