//! CPU time of the calling thread (for `superpacket bench` CPU-per-GB figures).

/// CPU time consumed by the calling thread so far, in seconds
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`); 0 if the clock is unavailable.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call;
    // CLOCK_THREAD_CPUTIME_ID needs no other argument.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
