//! A small epoll set whose own descriptor is what the engine waits on for a
//! pv port: the listening socket, an attaching client's socket, the
//! attached client's kick eventfd and control socket. The engine's worker
//! registers the set's descriptor once ([`crate::device::PortDriver::poll_fd`]);
//! it is readable whenever one of its members is (nested epoll, level
//! triggered), and the port asks [`Poller::ready`] which one.

use super::super::error::IoError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Most events one [`Poller::ready`] call reports.
const EVENTS: usize = 16;

/// An epoll set (see the module documentation).
#[derive(Debug)]
pub struct Poller {
    fd: OwnedFd,
}

impl Poller {
    /// A new, empty set.
    ///
    /// # Errors
    /// `epoll_create1` failing.
    pub fn new() -> Result<Poller, IoError> {
        // SAFETY: epoll_create1 takes only flags.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(IoError::last_os("epoll_create1", "pv port"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        Ok(Poller { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Watches `fd` for input (hang-ups are always reported), as `token`.
    ///
    /// # Errors
    /// `epoll_ctl` failing.
    pub fn add(&self, fd: RawFd, token: u64) -> Result<(), IoError> {
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, u64: token };
        // SAFETY: `ev` is a valid epoll_event that lives across the call.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(IoError::last_os("epoll_ctl(ADD)", format!("fd {fd}")));
        }
        Ok(())
    }

    /// Stops watching `fd` (ignored if it was not watched).
    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `add`; the event is ignored for EPOLL_CTL_DEL.
        let _ = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Calls `f` with the token of every member ready now (no waiting).
    pub fn ready(&self, mut f: impl FnMut(u64)) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        // SAFETY: `events` is a writable array of EVENTS epoll_events that lives across the call.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), EVENTS as libc::c_int, 0) };
        for ev in &events[..n.max(0) as usize] {
            f(ev.u64);
        }
    }

    /// The set's descriptor.
    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
