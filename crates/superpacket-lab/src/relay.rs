//! The reference every live figure is compared with: a plain superpacket
//! relay between two TAPs (docs/kernel-oracle.md section 4, "tapwire"). Each
//! frame read from one TAP, virtio_net_hdr included, is written unchanged
//! to the other: no parsing, no device stack, superpackets passed through
//! as the kernel made them. The engine should come close to it
//! (issue 7: TCP at least 0.8x) while doing real work (VLAN tags, bridge,
//! router, NAT).

use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use superpacket_engine::io::cputime;
use superpacket_engine::io::event::{Epoll, EventFd};
use superpacket_engine::io::{IoError, TapDevice};

/// Counters of a relay run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RelayStats {
    /// Frames moved (both directions).
    pub frames: u64,
    /// Frame bytes moved (without virtio headers).
    pub bytes: u64,
    /// Frames that could not be written (the other TAP's queue, a refused header).
    pub write_errors: u64,
    /// CPU seconds of the relay thread.
    pub cpu_seconds: f64,
}

/// A running relay thread.
pub struct TapRelay {
    stop: Arc<EventFd>,
    thread: JoinHandle<Result<RelayStats, IoError>>,
}

impl TapRelay {
    /// Starts relaying between `a` and `b` (opened with virtio_net_hdr, the
    /// same offloads on both, nonblocking) on a new thread.
    ///
    /// # Errors
    /// Creating the eventfd or the thread.
    pub fn start(a: TapDevice, b: TapDevice) -> Result<TapRelay, IoError> {
        let stop = Arc::new(EventFd::new()?);
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("sp-relay".into())
            .spawn(move || relay_loop(a, b, &stop2))
            .map_err(|e| IoError::Syscall { call: "spawn", what: "relay thread".into(), source: e })?;
        Ok(TapRelay { stop, thread })
    }

    /// Stops the relay and returns its counters (the TAPs are closed).
    ///
    /// # Errors
    /// The loop failed.
    pub fn stop(self) -> Result<RelayStats, IoError> {
        self.stop.notify();
        self.thread.join().unwrap_or_else(|_| Err(IoError::Unsupported("relay thread panicked".into())))
    }
}

fn relay_loop(a: TapDevice, b: TapDevice, stop: &EventFd) -> Result<RelayStats, IoError> {
    let mut taps = [a, b];
    let mut epoll = Epoll::new(4)?;
    epoll.add(taps[0].as_fd().as_raw_fd(), 0)?;
    epoll.add(taps[1].as_fd().as_raw_fd(), 1)?;
    epoll.add(stop.as_fd().as_raw_fd(), 2)?;
    let mut buf = vec![0u8; 128 * 1024];
    let mut stats = RelayStats::default();
    let cpu0 = cputime::thread_cpu_seconds();
    loop {
        let mut ready = [false; 3];
        epoll.wait(Duration::from_millis(100), |t| ready[t as usize] = true)?;
        if ready[2] {
            break;
        }
        for from in 0..2 {
            if !ready[from] {
                continue;
            }
            // Drain the ready TAP (bounded, so the other direction is served too).
            for _ in 0..256 {
                let (hdr, len) = match taps[from].read_packet(&mut buf) {
                    Ok(r) => r,
                    Err(e) if e.is_would_block() => break,
                    Err(IoError::Truncated { .. } | IoError::Header(_)) => {
                        stats.write_errors += 1;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                match taps[1 - from].write_packet(&hdr, &buf[..len]) {
                    Ok(_) => {
                        stats.frames += 1;
                        stats.bytes += len as u64;
                    }
                    Err(_) => stats.write_errors += 1,
                }
            }
        }
    }
    stats.cpu_seconds = cputime::thread_cpu_seconds() - cpu0;
    Ok(stats)
}
