//! One interactive `dpdk-testpmd` (DPDK 22.11, Debian's `dpdk` package)
//! driven over its command line: started on one CPU with the flags that
//! work on this machine (shared/spec/this-machine.md section 9: no
//! hugepages, no PCI, two lcores), commands written to its stdin, each
//! answered when the next `testpmd> ` prompt appears, port counters read
//! from `show port stats`.
//!
//! Invariants: a [`Testpmd`] owns its child process; dropping it kills
//! that PID (and only it) if it still runs and reaps it. Its output
//! (stdout and stderr) is kept whole for error messages.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use superpacket_engine::io::affinity;

/// The program.
pub const TESTPMD: &str = "dpdk-testpmd";

/// What testpmd prints when it is ready for the next command.
const PROMPT: &str = "testpmd> ";

/// How long EAL start-up and one command may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `dpdk-testpmd` is on `PATH`.
pub fn installed() -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(TESTPMD).is_file()))
}

/// How to start one testpmd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestpmdSpec {
    /// A short name, unique among the testpmds of this process (its EAL
    /// file prefix and the messages name it).
    pub name: String,
    /// The CPU every thread of the process runs on: the main lcore, the
    /// forwarding lcore and DPDK's control threads.
    pub cpu: usize,
    /// `--vdev` arguments, e.g. `net_virtio_user0,path=/tmp/s.sock`.
    pub vdevs: Vec<String>,
    /// testpmd's own arguments (after `--`; `-i` and `--disable-link-check`
    /// are always given).
    pub args: Vec<String>,
}

/// Counters of one port (`show port stats N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    /// `RX-packets`.
    pub rx_packets: u64,
    /// `RX-bytes`.
    pub rx_bytes: u64,
    /// `TX-packets`.
    pub tx_packets: u64,
    /// `TX-bytes`.
    pub tx_bytes: u64,
}

impl PortStats {
    /// Parses the first port block of `show port stats` output.
    ///
    /// # Errors
    /// A counter is missing or not a number.
    pub fn parse(text: &str) -> Result<PortStats, String> {
        let field = |key: &str| -> Result<u64, String> {
            let at = text.find(key).ok_or_else(|| format!("no {key} in `show port stats` output: {text:?}"))?;
            let value = text[at + key.len()..].split_whitespace().next().unwrap_or("");
            value.parse().map_err(|_| format!("{key} {value:?} is not a number"))
        };
        Ok(PortStats {
            rx_packets: field("RX-packets:")?,
            rx_bytes: field("RX-bytes:")?,
            tx_packets: field("TX-packets:")?,
            tx_bytes: field("TX-bytes:")?,
        })
    }
}

/// Everything the process wrote so far, and a signal for each addition.
#[derive(Default)]
struct Output {
    text: Mutex<String>,
    grew: Condvar,
}

impl Output {
    fn append(&self, s: &str) {
        self.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push_str(s);
        self.grew.notify_all();
    }

    fn snapshot(&self) -> String {
        self.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

/// A running interactive testpmd (see the module documentation).
pub struct Testpmd {
    name: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    /// stdout: the prompts and what commands print.
    output: Arc<Output>,
    /// stderr (the EAL's log, warnings), kept apart so that a message
    /// cannot split a prompt.
    errors: Arc<Output>,
    runtime_dir: PathBuf,
}

impl Testpmd {
    /// Starts testpmd as `spec` says, pinned to `spec.cpu`, and waits for
    /// its first prompt.
    ///
    /// # Errors
    /// It cannot be started (not installed, the CPU not allowed) or exits
    /// or stays silent before its prompt; the message holds its output.
    pub fn start(spec: &TestpmdSpec) -> Result<Testpmd, String> {
        let prefix = format!("spvb{}{}", std::process::id(), spec.name);
        let lcores = format!("0@{cpu},1@{cpu}", cpu = spec.cpu);
        let mut cmd = Command::new("stdbuf");
        // stdbuf: testpmd's printf output reaches the pipe line by line, in
        // order with the prompts its command line writes directly.
        cmd.args(["-oL", "-eL", TESTPMD, "--lcores", &lcores, "--no-huge", "-m", "512", "--no-pci"]).args([
            "--single-file-segments",
            "--no-telemetry",
            "--file-prefix",
            &prefix,
        ]);
        for v in &spec.vdevs {
            cmd.args(["--vdev", v]);
        }
        // --disable-link-check: testpmd would otherwise poll a port's link
        // for up to 9 s at start; DPDK's vhost backend reports the virtio
        // link late, and no figure depends on it.
        cmd.args(["--", "-i", "--disable-link-check"]).args(&spec.args);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = {
            // The child inherits this thread's CPU set; the thread gets its
            // own back when `_restore` drops.
            let _restore = affinity::Restore::current();
            affinity::pin(spec.cpu).map_err(|e| format!("pinning to CPU {}: {e}", spec.cpu))?;
            cmd.spawn().map_err(|e| format!("starting {TESTPMD} (through stdbuf): {e}"))?
        };
        let mut t = Testpmd {
            name: spec.name.clone(),
            child: Some(child),
            stdin: None,
            output: Arc::new(Output::default()),
            errors: Arc::new(Output::default()),
            runtime_dir: runtime_dir(&prefix),
        };
        let child = t.child.as_mut().expect("just started");
        t.stdin = child.stdin.take();
        let streams = [
            (child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>), t.output.clone()),
            (child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>), t.errors.clone()),
        ];
        for (stream, output) in streams {
            if let Some(stream) = stream {
                std::thread::spawn(move || copy_output(stream, &output));
            }
        }
        t.wait_for_prompts(1, START_TIMEOUT)?;
        Ok(t)
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything it printed on stdout so far.
    pub fn output(&self) -> String {
        self.output.snapshot()
    }

    fn failure(&self, what: &str) -> String {
        let out = format!("{}\n{}", self.errors.snapshot(), self.output());
        let tail: Vec<&str> = out.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("testpmd {}: {what}; its last output (stderr, then stdout):\n{}", self.name, tail.join("\n"))
    }

    /// Waits until the output holds `n` prompts.
    fn wait_for_prompts(&mut self, n: usize, timeout: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            let text = self.output.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if text.matches(PROMPT).count() >= n {
                return Ok(());
            }
            let (text, _) = self
                .output
                .grew
                .wait_timeout(text, Duration::from_millis(20))
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let seen = text.matches(PROMPT).count();
            drop(text);
            if seen >= n {
                return Ok(());
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                return Err(self.failure(&format!("exited ({st})")));
            }
            if t0.elapsed() > timeout {
                return Err(self.failure(&format!("no prompt after {timeout:?}")));
            }
        }
    }

    /// Runs one command; returns what it printed before the next prompt.
    ///
    /// # Errors
    /// testpmd exited, or gave no prompt within 30 s.
    pub fn command(&mut self, c: &str) -> Result<String, String> {
        let before = self.output();
        let prompts = before.matches(PROMPT).count();
        let stdin = self.stdin.as_mut().ok_or_else(|| format!("testpmd {}: stdin closed", self.name))?;
        writeln!(stdin, "{c}")
            .and_then(|()| stdin.flush())
            .map_err(|e| self.failure(&format!("writing `{c}`: {e}")))?;
        self.wait_for_prompts(prompts + 1, COMMAND_TIMEOUT)?;
        let after = self.output();
        Ok(after.get(before.len()..).unwrap_or("").to_string())
    }

    /// `show port stats PORT`.
    ///
    /// # Errors
    /// The command failed or its output lacks a counter.
    pub fn port_stats(&mut self, port: u16) -> Result<PortStats, String> {
        let out = self.command(&format!("show port stats {port}"))?;
        PortStats::parse(&out).map_err(|e| format!("testpmd {}: {e}", self.name))
    }

    /// `quit`, then waits for the process (killed after 20 s).
    ///
    /// # Errors
    /// It had to be killed.
    pub fn quit(mut self) -> Result<(), String> {
        if let Some(mut s) = self.stdin.take() {
            let _ = writeln!(s, "quit");
        }
        let Some(mut c) = self.child.take() else { return Ok(()) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = c.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        Err(self.failure("did not quit within 20 s (killed)"))
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Child::kill sends SIGKILL to this child's PID only.
            let _ = c.kill();
            let _ = c.wait();
        }
        // The EAL's runtime directory of this process's own file prefix.
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// Copies `stream` into `output` as it arrives, until it ends (prompts
/// end without a newline, so nothing waits for one).
fn copy_output(mut stream: Box<dyn Read + Send>, output: &Output) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => output.append(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

/// Where the EAL keeps the runtime files of `prefix`: `/var/run/dpdk` as
/// root, else `$XDG_RUNTIME_DIR/dpdk` (or `/tmp/dpdk`).
fn runtime_dir(prefix: &str) -> PathBuf {
    let base = if superpacket_engine::io::privileges_available().is_ok() {
        PathBuf::from("/var/run/dpdk")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from).join("dpdk")
    };
    base.join(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_show_port_stats() {
        let text = "\n  ######################## NIC statistics for port 0  ########################\n  \
                    RX-packets: 4748       RX-missed: 0          RX-bytes:  309636072\n  RX-errors: 0\n  \
                    RX-nombuf:  0         \n  TX-packets: 12          TX-errors: 0          TX-bytes:  768\n";
        let s = PortStats::parse(text).unwrap();
        assert_eq!(s, PortStats { rx_packets: 4748, rx_bytes: 309_636_072, tx_packets: 12, tx_bytes: 768 });
        let e = PortStats::parse("RX-packets: 1 RX-bytes: x TX-packets: 1 TX-bytes: 1").unwrap_err();
        assert!(e.contains("RX-bytes"), "{e}");
        assert!(PortStats::parse("Invalid port 3").unwrap_err().contains("no RX-packets:"));
    }
}
