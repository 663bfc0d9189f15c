//! The peer process of the two-process benchmarks (`bench vhost-tx`, the
//! vhost-user suite scenarios): a `superpacket` subcommand spawned by the
//! benchmark, which prints `ready SOCKET` once it listens and one JSON
//! [`PeerReport`] per frontend it served.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// What a peer saw of one frontend (printed as one JSON line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerReport {
    /// Features negotiated.
    pub features: String,
    /// Frames received.
    pub frames: u64,
    /// Replies sent.
    pub echoed: u64,
    /// Frames counted and dropped (discard port and anything else).
    pub discarded: u64,
    /// Superpackets received.
    pub superpackets: u64,
    /// Frames that failed validation (with `verify`).
    pub bad_frames: u64,
    /// The first validation problem.
    pub first_problem: Option<String>,
    /// Received with a partial checksum.
    pub rx_csum_partial: u64,
    /// Receive and transmit drops by reason.
    pub rx_drops: BTreeMap<String, u64>,
    /// Why the session ended.
    pub end: String,
}

/// The `superpacket` binary to run peers with: `SUPERPACKET_BIN`, else this
/// executable if it is `superpacket`, else (a cargo test binary in
/// `target/<profile>/deps`) the `superpacket` next to `deps`.
///
/// # Errors
/// None of them exists.
pub fn superpacket_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SUPERPACKET_BIN") {
        return Ok(p.into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    if exe.file_name().is_some_and(|n| n == "superpacket") {
        return Ok(exe);
    }
    if let Some(deps) = exe.parent()
        && deps.ends_with("deps")
        && let Some(dir) = deps.parent()
        && dir.join("superpacket").is_file()
    {
        return Ok(dir.join("superpacket"));
    }
    Err(format!(
        "cannot find the superpacket binary for the peer process ({} is not it); set SUPERPACKET_BIN",
        exe.display()
    ))
}

/// The arguments of a peer: `--busy-poll-us`, `--verify`, `--cpu`.
pub fn peer_args(busy_poll: Duration, verify: bool, cpu: Option<usize>) -> Vec<String> {
    let mut args = vec!["--busy-poll-us".to_string(), busy_poll.as_micros().to_string()];
    if verify {
        args.push("--verify".into());
    }
    if let Some(c) = cpu {
        args.extend(["--cpu".to_string(), c.to_string()]);
    }
    args
}

/// A spawned peer process serving one frontend (`--once`; killed on drop
/// if it is still running).
pub struct PeerProcess {
    child: Child,
    out: BufReader<ChildStdout>,
    /// Its socket.
    pub socket: PathBuf,
}

impl PeerProcess {
    /// Runs `bin command... --once --socket socket args...` (a peer that
    /// prints `ready` and then one [`PeerReport`]) and waits until it listens.
    ///
    /// # Errors
    /// The binary cannot be started, or the peer exits early.
    pub fn spawn_command(bin: &Path, command: &[&str], socket: &Path, args: &[&str]) -> Result<PeerProcess, String> {
        let mut child = Command::new(bin)
            .args(command)
            .args(["--once", "--socket"])
            .arg(socket)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let mut out = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut line = String::new();
        match out.read_line(&mut line) {
            Ok(n) if n > 0 && line.starts_with("ready") => Ok(PeerProcess { child, out, socket: socket.into() }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{} did not start ({}): {:?}", command.join(" "), bin.display(), line.trim()))
            }
        }
    }

    /// The peer's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// After the frontend detached: the peer's report, and its exit.
    ///
    /// # Errors
    /// No report (the peer died) or an unreadable one.
    pub fn finish(mut self) -> Result<PeerReport, String> {
        let mut line = String::new();
        let r = match self.out.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(line.trim()).map_err(|e| format!("peer report {line:?}: {e}")),
            _ => Err("the peer exited without a report".to_string()),
        };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return r;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        r
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Stops a child process the benchmark spawned: SIGTERM to its PID, then
/// waits up to `grace` for it to exit, then SIGKILL. Returns its exit status
/// if it exited by itself (already, or within `grace`), `None` if it had to
/// be killed. The child is reaped either way.
pub fn terminate(child: &mut Child, grace: Duration) -> Option<std::process::ExitStatus> {
    if let Ok(Some(st)) = child.try_wait() {
        return Some(st);
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with the PID of a child this process spawned and has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let t0 = Instant::now();
    while t0.elapsed() < grace {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
