//! The reassembler's clock: an injectable source of nanoseconds, so tests
//! and the ring-pressure benchmark drive timeouts exactly (offload-rules 5.1:
//! the timer starts with the queue and is never extended).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A monotonic time source in nanoseconds.
pub trait Clock {
    /// Current time in nanoseconds (any epoch; only differences matter).
    fn now_ns(&self) -> u64;
}

/// The real monotonic clock (`Instant`), counted from its creation.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    start: Instant,
}

impl MonotonicClock {
    /// A clock reading 0 now.
    pub fn new() -> Self {
        MonotonicClock { start: Instant::now() }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

/// A clock set by hand; clones share the same time (give one to the
/// reassembler, keep one to move time forward).
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `ns`.
    pub fn new(ns: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(ns)))
    }

    /// Sets the time.
    pub fn set(&self, ns: u64) {
        self.0.store(ns, Ordering::Relaxed);
    }

    /// Moves the time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
