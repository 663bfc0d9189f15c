//! Event-loop primitives for `superpacket run`: [`Epoll`] (level-triggered
//! readiness of port descriptors), [`EventFd`] (wakes a worker: stop, stats
//! request) and [`SignalFd`] (SIGINT/SIGTERM as a readable descriptor, so
//! shutdown is an ordinary event and no code runs in signal context).

use super::error::{IoError, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// An epoll instance. Registrations are level-triggered: a descriptor with
/// data left (a receive budget ran out) is reported again by the next wait.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new instance reporting at most `capacity` events per wait.
    ///
    /// # Errors
    /// `epoll_create1` failing.
    pub fn new(capacity: usize) -> Result<Epoll> {
        // SAFETY: epoll_create1 takes only flags.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(IoError::last_os("epoll_create1", "event loop"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)] })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `ev` is a valid epoll_event that lives across the call; the
        // kernel copies it (and ignores it for EPOLL_CTL_DEL).
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) } < 0 {
            return Err(IoError::last_os("epoll_ctl", format!("fd {fd}")));
        }
        Ok(())
    }

    /// Watches `fd` for input, reporting it as `token`.
    ///
    /// # Errors
    /// `epoll_ctl` failing (a closed descriptor, for instance).
    pub fn add(&self, fd: RawFd, token: u64) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token)
    }

    /// Stops watching `fd` (errors are ignored: the descriptor may already
    /// be closed, which removes it anyway).
    pub fn remove(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0);
    }

    /// Waits up to `timeout` (at least, unless input comes first: whole
    /// milliseconds, rounded up) and calls `ready` with the token of every
    /// descriptor that has input (or an error/hangup to read). Returns the
    /// number of events; an interrupted wait returns 0.
    ///
    /// # Errors
    /// `epoll_wait` failing for another reason than `EINTR`.
    pub fn wait(&mut self, timeout: Duration, mut ready: impl FnMut(u64)) -> Result<usize> {
        // Rounded down, a wait for a deadline would end before it and a
        // second wait follow: two wake-ups per publication tick of an idle
        // worker (docs/benchmarks.md, "One stream, two workers").
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        // SAFETY: `events` is a writable array of `len` epoll_events that lives across the call.
        let n = unsafe {
            libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as libc::c_int, ms)
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(IoError::Syscall { call: "epoll_wait", what: "event loop".into(), source: err });
        }
        for ev in &self.events[..n as usize] {
            ready(ev.u64);
        }
        Ok(n as usize)
    }
}

/// An eventfd: a counter other threads bump to wake a waiting loop.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A nonblocking eventfd starting at 0.
    ///
    /// # Errors
    /// `eventfd` failing.
    pub fn new() -> Result<EventFd> {
        // SAFETY: eventfd takes an initial value and flags.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(IoError::last_os("eventfd", "event loop"));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    /// Wakes the waiters (adds 1 to the counter).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64; an eventfd write cannot
        // fail except on counter overflow, which only means it is already signalled.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reads and resets the counter; true if it was signalled.
    pub fn take(&self) -> bool {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64; EAGAIN (not signalled) leaves it 0.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        n == 8 && v > 0
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// SIGINT and SIGTERM delivered through a descriptor.
///
/// [`SignalFd::install`] blocks both signals in the calling thread, so call
/// it before starting other threads: they inherit the mask, and the signals
/// then wait in the descriptor instead of killing the process.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks SIGINT and SIGTERM in this thread and opens a nonblocking
    /// signalfd for them.
    ///
    /// # Errors
    /// `pthread_sigmask` or `signalfd` failing.
    pub fn install() -> Result<SignalFd> {
        // SAFETY: `set` is a valid sigset_t, initialised by sigemptyset before use;
        // pthread_sigmask and signalfd read it during the calls only.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(IoError::last_os("pthread_sigmask", "SIGINT/SIGTERM"));
            }
            let raw = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if raw < 0 {
                return Err(IoError::last_os("signalfd", "SIGINT/SIGTERM"));
            }
            Ok(SignalFd { fd: OwnedFd::from_raw_fd(raw) })
        }
    }

    /// The pending signal's number, if one arrived.
    pub fn take(&self) -> Option<i32> {
        // SAFETY: signalfd_siginfo is plain data; the kernel writes exactly its size or fails.
        unsafe {
            let mut info: libc::signalfd_siginfo = std::mem::zeroed();
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            let n = libc::read(self.fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size);
            (n as usize == size).then_some(info.ssi_signo as i32)
        }
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The name of signal `sig` (for the shutdown message).
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventfd_wakes_epoll_and_resets() {
        let mut ep = Epoll::new(4).unwrap();
        let ev = EventFd::new().unwrap();
        ep.add(ev.as_fd().as_raw_fd(), 7).unwrap();
        let mut seen = Vec::new();
        assert_eq!(ep.wait(Duration::ZERO, |t| seen.push(t)).unwrap(), 0);
        ev.notify();
        ep.wait(Duration::from_millis(100), |t| seen.push(t)).unwrap();
        assert_eq!(seen, [7]);
        assert!(ev.take());
        assert!(!ev.take());
        seen.clear();
        ep.wait(Duration::ZERO, |t| seen.push(t)).unwrap();
        assert!(seen.is_empty());
    }

    #[test]
    fn a_wait_without_input_lasts_at_least_its_timeout() {
        let mut ep = Epoll::new(4).unwrap();
        for timeout in [Duration::from_micros(300), Duration::from_micros(1500), Duration::from_micros(2900)] {
            let start = std::time::Instant::now();
            assert_eq!(ep.wait(timeout, |_| ()).unwrap(), 0);
            assert!(start.elapsed() >= timeout, "{timeout:?}: woke after {:?}", start.elapsed());
        }
    }
}
