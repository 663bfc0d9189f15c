//! CPU placement for the two ends of a measurement: busy-polling ends of a
//! link (vhost-user ports, virtio-user and testpmd frontends) must run on different CPUs (two
//! spinning processes sharing one CPU take turns per scheduler slice, and
//! the figures then measure the scheduler). The benchmarks pin their own
//! thread to one CPU and the peer processes to another, as netperf's `-T`
//! does.

use super::error::IoError;

/// The CPUs the calling thread may run on.
///
/// # Errors
/// `sched_getaffinity` failing.
pub fn current() -> Result<libc::cpu_set_t, IoError> {
    of_thread(0)
}

/// The CPUs thread `tid` (a kernel thread id, `/proc/self/task/TID`; 0:
/// the calling thread) may run on.
///
/// # Errors
/// `sched_getaffinity` failing (no such thread).
pub fn of_thread(tid: libc::pid_t) -> Result<libc::cpu_set_t, IoError> {
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); the
    // kernel writes at most `size_of::<cpu_set_t>()` bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) < 0 {
            return Err(IoError::last_os("sched_getaffinity", format!("thread {tid}")));
        }
        Ok(set)
    }
}

/// Restricts the calling thread to `set`.
///
/// # Errors
/// `sched_setaffinity` failing (no allowed CPU in the set).
pub fn set(set: &libc::cpu_set_t) -> Result<(), IoError> {
    // SAFETY: `set` is a valid cpu_set_t the kernel only reads.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } < 0 {
        return Err(IoError::last_os("sched_setaffinity", "calling thread"));
    }
    Ok(())
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
/// `sched_setaffinity` failing (no such CPU, or not allowed).
pub fn pin(cpu: usize) -> Result<(), IoError> {
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); CPU_SET
    // writes one bit of it, bounds-checked by the libc crate.
    let s = unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut s);
        s
    };
    set(&s)
}

/// Pins the thread behind `thread` to CPU `cpu` (from any thread: the
/// engine pins each worker it starts, [`crate::engine::EngineOptions::pin_workers`]).
///
/// # Errors
/// `pthread_setaffinity_np` failing (no such CPU, or not allowed).
pub fn pin_thread<T>(thread: &std::thread::JoinHandle<T>, cpu: usize) -> Result<(), IoError> {
    use std::os::unix::thread::JoinHandleExt;
    // SAFETY: cpu_set_t is plain data (all-zero is the empty set); CPU_SET
    // writes one bit of it, bounds-checked by the libc crate. The pthread_t
    // is valid while the JoinHandle lives (the thread is not yet joined or
    // detached), and the kernel only reads the set.
    let rc = unsafe {
        let mut s: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut s);
        libc::pthread_setaffinity_np(thread.as_pthread_t(), std::mem::size_of::<libc::cpu_set_t>(), &s)
    };
    if rc != 0 {
        return Err(IoError::Syscall {
            call: "pthread_setaffinity_np",
            what: format!("thread to CPU {cpu}"),
            source: std::io::Error::from_raw_os_error(rc),
        });
    }
    Ok(())
}

/// Gives the calling thread back the CPUs it had when this was made, on drop.
#[derive(Debug)]
pub struct Restore(Option<libc::cpu_set_t>);

impl Restore {
    /// Remembers the calling thread's CPUs (nothing to restore if they cannot be read).
    pub fn current() -> Restore {
        Restore(current().ok())
    }

    /// The remembered CPUs (empty if they could not be read).
    pub fn cpus(&self) -> Vec<usize> {
        self.0.as_ref().map(cpus).unwrap_or_default()
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            let _ = set(s);
        }
    }
}

/// The CPUs in `set`, lowest first.
pub fn cpus(set: &libc::cpu_set_t) -> Vec<usize> {
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads one bit of a valid set, bounds-checked by the libc crate.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, set) })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pin_and_restore() {
        let before = super::current().unwrap();
        let cpus = super::cpus(&before);
        assert!(!cpus.is_empty());
        let t = std::thread::spawn(move || {
            super::pin(cpus[cpus.len() - 1]).unwrap();
            super::cpus(&super::current().unwrap())
        });
        assert_eq!(t.join().unwrap().len(), 1);
        assert_eq!(super::cpus(&super::current().unwrap()), super::cpus(&before), "other threads unaffected");
    }

    #[test]
    fn pin_another_thread() {
        let cpus = super::cpus(&super::current().unwrap());
        let last = cpus[cpus.len() - 1];
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            wait.recv().unwrap();
            super::cpus(&super::current().unwrap())
        });
        super::pin_thread(&t, last).unwrap();
        go.send(()).unwrap();
        assert_eq!(t.join().unwrap(), vec![last]);
        assert_eq!(super::cpus(&super::current().unwrap()), cpus, "the caller unaffected");
        let t = std::thread::spawn(|| ());
        assert!(super::pin_thread(&t, libc::CPU_SETSIZE as usize - 1).is_err(), "a CPU that does not exist");
        t.join().unwrap();
    }
}
