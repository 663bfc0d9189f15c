//! `superpacket run --lab FILE`: the topology's lab made before the engine
//! starts and removed when the run ends, however it ends.
//!
//! The process makes the lab ([`plumbing::up`]), then forks: the child runs
//! the engine exactly as `superpacket run FILE` does (dropping its
//! privileges once the ports are open), and the parent, which keeps root,
//! only waits for it and then removes the lab ([`plumbing::down`]). So the
//! lab goes whether the engine stops on SIGINT/SIGTERM, fails to start,
//! stops with an error, panics or is killed; only a SIGKILL of the parent
//! itself leaves it (the engine then gets SIGTERM, and `superpacket lab
//! down FILE` removes the lab).
//!
//! Signals: SIGINT, SIGTERM and SIGHUP are blocked before the lab is made
//! (one arriving while it is being made stops the run before the engine
//! starts). The parent passes each one on to the engine (SIGHUP as
//! SIGTERM; a Ctrl-C at a terminal reaches both anyway); at the third, the
//! engine is killed (SIGKILL) and the lab removed all the same.
//!
//! A lab that is already up (`superpacket lab up FILE` earlier) is used as
//! it is and left up: the run removes only what it made.

use super::run::{RunArgs, check_args, run_engine};
use super::{CliError, EXIT_ERROR, EXIT_OK};
use std::io::Write;
use std::path::PathBuf;
use superpacket_lab::plumbing::{self, DownOutcome, UpOutcome};

/// The signals the parent handles.
const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Removes the lab this process made when dropped in this process (not in
/// the forked engine, which shares the memory image).
struct LabGuard {
    file: PathBuf,
    owner: u32,
    armed: bool,
}

impl LabGuard {
    /// Removes the lab now, reporting on stderr; false if that failed.
    fn finish(mut self) -> bool {
        self.armed = false;
        take_down(&self.file)
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        if self.armed && std::process::id() == self.owner {
            take_down(&self.file);
        }
    }
}

fn take_down(file: &std::path::Path) -> bool {
    match plumbing::down(file) {
        Ok(DownOutcome::Removed { namespaces, left, warnings, .. }) => {
            for w in warnings {
                eprintln!("superpacket: warning: {w}");
            }
            eprintln!("superpacket: lab removed (namespaces {})", namespaces.join(", "));
            if !left.is_empty() {
                eprintln!("superpacket: left alone (not made by this run): {}", left.join(", "));
            }
            true
        }
        Ok(DownOutcome::NotUp) => true,
        Err(e) => {
            eprintln!("superpacket: error: removing the lab of {}: {e}", file.display());
            false
        }
    }
}

/// A signal set of `signals`.
fn sigset(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given; sigaddset only writes to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks `signals` in this thread (the only one); returns the previous mask.
fn block(signals: &[i32]) -> Result<libc::sigset_t, CliError> {
    let set = sigset(signals);
    // SAFETY: both pointers are valid sigset_t values for the duration of the call.
    unsafe {
        let mut old: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) != 0 {
            return Err(CliError::context("pthread_sigmask", std::io::Error::last_os_error()));
        }
        Ok(old)
    }
}

/// Sets this thread's signal mask to `mask`.
fn set_mask(mask: &libc::sigset_t) {
    // SAFETY: `mask` is a valid, initialised sigset_t.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, mask, std::ptr::null_mut()) };
}

/// Waits up to `timeout_ms` for one of the blocked `set`; `None` on timeout.
fn wait_signal(set: &libc::sigset_t, timeout_ms: i64) -> Option<i32> {
    let ts = libc::timespec { tv_sec: timeout_ms / 1000, tv_nsec: (timeout_ms % 1000) * 1_000_000 };
    // SAFETY: `set` and `ts` are valid for the call; a null siginfo pointer is allowed.
    let sig = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (sig > 0).then_some(sig)
}

/// Runs `run --lab`.
pub fn run(args: &RunArgs) -> Result<u8, CliError> {
    check_args(args)?;
    // The engine (the child) warns about ports the lab does not fit.
    let (spec, _) = super::lab::load(&args.topology)?;
    let file = args.topology.clone();
    let old_mask = block(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD])?;
    let made = match plumbing::up(&file, &spec).map_err(|e| CliError(e.to_string()))? {
        UpOutcome::Made(_) => true,
        UpOutcome::AlreadyUp(_) => false,
    };
    if !made {
        eprintln!(
            "superpacket: the lab of {} is already up (superpacket lab up): using it, and leaving it up",
            file.display()
        );
        set_mask(&old_mask);
        return run_engine(args);
    }
    eprintln!("superpacket: lab up (namespaces {}); removed when the run ends", spec.netns.join(", "));
    let guard = LabGuard { file, owner: std::process::id(), armed: true };
    let stop_set = sigset(&STOP_SIGNALS);
    if let Some(sig) = wait_signal(&stop_set, 0) {
        eprintln!("superpacket: {} while making the lab: not starting the engine", signal_name(sig));
        return Ok(if guard.finish() { EXIT_OK } else { EXIT_ERROR });
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork in a process with one thread (namespace set-up threads were joined); the
    // child only continues this program's own code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(CliError::context("fork", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // The engine. SIGINT/SIGTERM stay blocked: `run` reads them from a signalfd.
        std::mem::forget(guard);
        // If the parent is killed outright, the engine stops too (best effort: cleared when
        // --user changes the credentials), and `lab down FILE` finishes the job.
        // SAFETY: prctl with integer arguments only; getppid cannot fail.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong);
            if libc::getppid() != parent {
                libc::raise(libc::SIGTERM);
            }
        }
        let mut mask = old_mask;
        // SAFETY: `mask` is an initialised sigset_t.
        unsafe {
            libc::sigaddset(&mut mask, libc::SIGINT);
            libc::sigaddset(&mut mask, libc::SIGTERM);
        }
        set_mask(&mask);
        let code = match run_engine(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("superpacket: error: {e}");
                EXIT_ERROR
            }
        };
        std::process::exit(i32::from(code));
    }
    let code = supervise(pid);
    let removed = guard.finish();
    Ok(if removed { code } else { EXIT_ERROR })
}

/// Waits for the engine `pid`, passing stop signals on; its exit code (2
/// if it was killed).
fn supervise(pid: libc::pid_t) -> u8 {
    // SIGCHLD too: blocked since before the fork, so it is queued although its default action is
    // to ignore it, and ends the wait as soon as the engine exits.
    let set = sigset(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD]);
    let mut signals = 0;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child, writing its status to a local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            if libc::WIFEXITED(status) {
                return u8::try_from(libc::WEXITSTATUS(status)).unwrap_or(EXIT_ERROR);
            }
            if libc::WIFSIGNALED(status) {
                eprintln!("superpacket: the engine was killed by {}", signal_name(libc::WTERMSIG(status)));
            }
            return EXIT_ERROR;
        }
        if r < 0 {
            eprintln!("superpacket: waitpid: {}", std::io::Error::last_os_error());
            return EXIT_ERROR;
        }
        match wait_signal(&set, 500) {
            Some(sig) if STOP_SIGNALS.contains(&sig) => {
                signals += 1;
                let pass = if signals >= 3 {
                    eprintln!("superpacket: {} again: killing the engine", signal_name(sig));
                    libc::SIGKILL
                } else if sig == libc::SIGHUP {
                    libc::SIGTERM
                } else {
                    sig
                };
                // SAFETY: kill with the PID of our own child, not yet reaped.
                unsafe { libc::kill(pid, pass) };
            }
            _ => {}
        }
    }
}

fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        n => format!("signal {n}"),
    }
}
