//! CPU placement of the benchmark's processes and the CPU time of a
//! backend process.
//!
//! On a small machine two busy-polling processes on one CPU take turns
//! per scheduler slice, and a figure then measures the scheduler. The
//! placement is therefore fixed and the same for both backends: the
//! testpmd frontends (every thread; two processes in the 64-byte
//! workload, one in the loops) on one CPU, the backend (every thread of
//! the engine process, or of DPDK's vhost testpmd) alone on another.

use superpacket_engine::io::affinity;

/// Which CPU runs what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The frontends.
    pub frontends: usize,
    /// The backend under test.
    pub backend: usize,
}

impl Placement {
    /// The first two CPUs this process may run on: frontends on the first,
    /// the backend on the second.
    ///
    /// # Errors
    /// Fewer than two CPUs are allowed (the placement needs two), or the
    /// CPU set cannot be read.
    pub fn choose() -> Result<Placement, String> {
        let set = affinity::current().map_err(|e| format!("reading the CPU set: {e}"))?;
        match affinity::cpus(&set)[..] {
            [frontends, backend, ..] => Ok(Placement { frontends, backend }),
            ref cpus => Err(format!(
                "the frontends and the backend need a CPU each, and this process may run on {} ({cpus:?})",
                cpus.len()
            )),
        }
    }
}

/// CPU time (user + system, every thread, including threads that ended)
/// of process `pid` so far, in seconds, read from its process CPU clock
/// (`clock_getcpuclockid` + `clock_gettime`: nanoseconds, unlike the
/// clock ticks of `/proc/PID/stat`).
///
/// # Errors
/// No such process, or its clock cannot be read.
pub fn process_cpu_seconds(pid: u32) -> Result<f64, String> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid, writable clockid_t for the duration of the call.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    if rc != 0 {
        return Err(format!("process {pid}: CPU clock: {}", std::io::Error::from_raw_os_error(rc)));
    }
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(format!("process {pid}: reading its CPU clock: {}", std::io::Error::last_os_error()));
    }
    Ok(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_cpu_time_grows_and_a_missing_process_is_an_error() {
        let me = std::process::id();
        let a = process_cpu_seconds(me).unwrap();
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = process_cpu_seconds(me).unwrap();
        assert!(b > a, "{a} -> {b}");
        // PIDs are at most 2^22 on Linux.
        assert!(process_cpu_seconds(1 << 23).is_err());
    }
}
