//! The two vhost-user backends under test, each a process of its own
//! pinned to the backend CPU and serving two vhost-user sockets (the
//! sender's and the receiver's):
//!
//! - **superpacket**: `superpacket run --workers 1` (this binary, release
//!   build for figures) on a topology of two vhost-user ports in a bridge
//!   or in a cross-connect ([`EngineTopology`]), each busy-polling for [`BUSY_POLL_US`] after its queue runs empty:
//!   one engine worker thread serves both ports' queues.
//! - **DPDK**: `dpdk-testpmd` with DPDK's own vhost PMD on both sockets
//!   (`--vdev net_vhost0,iface=S0,tso=1 --vdev net_vhost1,iface=S1,tso=1`)
//!   and `io` forwarding between its two ports on one forwarding lcore.
//!
//! Both listen; the testpmd frontends connect to them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cpu::process_cpu_seconds;
use super::testpmd::{Testpmd, TestpmdSpec};
use superpacket_engine::io::affinity;

/// Which backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// superpacket's vhost-user port.
    Superpacket,
    /// DPDK 22.11's vhost PMD.
    Dpdk,
}

impl BackendKind {
    /// Both, superpacket first.
    pub const ALL: [BackendKind; 2] = [BackendKind::Superpacket, BackendKind::Dpdk];

    /// The suffix of its figures' names.
    pub fn key(self) -> &'static str {
        match self {
            BackendKind::Superpacket => "superpacket",
            BackendKind::Dpdk => "dpdk",
        }
    }
}

/// What joins superpacket's two ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineTopology {
    /// A learning bridge: the operator's usual case.
    Bridge,
    /// A cross-connect (`kind = "xconnect"`): every frame to the other
    /// port, no lookup; the same work as DPDK's `io` forwarding.
    Xconnect,
}

impl EngineTopology {
    /// The `[[device]]` joining ports `vsend` and `vrecv`.
    fn device(self) -> &'static str {
        match self {
            EngineTopology::Bridge => "name = \"br0\"\nkind = \"bridge\"\n",
            EngineTopology::Xconnect => "name = \"xc0\"\nkind = \"xconnect\"\n",
        }
    }
}

/// How long a backend may take to listen on its sockets.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A backend process serving `sockets`.
pub enum Backend {
    /// `superpacket run`.
    Superpacket(Engine),
    /// DPDK's vhost PMD in a testpmd.
    Dpdk(Testpmd),
}

/// A `superpacket run` process (SIGKILL to its PID on drop if it still runs).
pub struct Engine {
    child: Option<Child>,
    /// Its stdout and stderr.
    log: PathBuf,
}

impl Backend {
    /// Starts `kind` on CPU `cpu`, listening on `sockets` (the sender's,
    /// then the receiver's), with its files in `dir`; returns once both
    /// sockets exist.
    ///
    /// # Errors
    /// The process could not start or does not listen within 30 s.
    /// `dpdk_mbufs` are DPDK's mbuf arguments (the engine has none);
    /// `topology` joins the engine's ports (DPDK's always does `io`
    /// forwarding).
    pub fn start(
        kind: BackendKind,
        topology: EngineTopology,
        dir: &Path,
        sockets: [&Path; 2],
        cpu: usize,
        dpdk_mbufs: Vec<String>,
    ) -> Result<Backend, String> {
        let mut backend = match kind {
            BackendKind::Superpacket => start_engine(topology, dir, sockets, cpu)?,
            BackendKind::Dpdk => {
                let vdevs = sockets
                    .iter()
                    .enumerate()
                    .map(|(i, s)| format!("net_vhost{i},iface={},tso=1", s.display()))
                    .collect();
                let args = std::iter::once("--forward-mode=io".to_string()).chain(dpdk_mbufs).collect();
                let mut t = Testpmd::start(&TestpmdSpec { name: "be".into(), cpu, vdevs, args })?;
                t.command("start")?;
                Backend::Dpdk(t)
            }
        };
        let t0 = Instant::now();
        while !sockets.iter().all(|s| s.exists()) {
            backend.check_running()?;
            if t0.elapsed() > LISTEN_TIMEOUT {
                return Err(format!("the {} backend does not listen after {LISTEN_TIMEOUT:?}", kind.key()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(backend)
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Backend::Superpacket(e) => e.child.as_ref().map(Child::id),
            Backend::Dpdk(t) => t.pid(),
        }
    }

    /// The process's CPU time so far (every thread), seconds.
    ///
    /// # Errors
    /// The process is gone.
    pub fn cpu_seconds(&self) -> Result<f64, String> {
        process_cpu_seconds(self.pid().ok_or("the backend is not running")?)
    }

    /// An error if the process has exited.
    ///
    /// # Errors
    /// It exited; the message holds the end of its output.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self {
            Backend::Superpacket(e) => match e.child.as_mut().map(Child::try_wait) {
                Some(Ok(None)) => Ok(()),
                Some(Ok(Some(st))) => Err(format!("the engine exited ({st}): {}", log_tail(&e.log))),
                Some(Err(err)) => Err(format!("the engine: {err}")),
                None => Err("the engine was stopped".to_string()),
            },
            // A command fails if testpmd exited.
            Backend::Dpdk(t) => t.command("").map(drop),
        }
    }

    /// Stops it: SIGTERM to the engine, `quit` to testpmd.
    ///
    /// # Errors
    /// It did not stop cleanly (killed after 20 s, or a nonzero exit).
    pub fn stop(self) -> Result<(), String> {
        match self {
            Backend::Superpacket(e) => e.stop(),
            Backend::Dpdk(t) => t.quit(),
        }
    }
}

impl Engine {
    /// SIGTERM, then waits for the exit (killed after 20 s).
    fn stop(mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        match crate::bench::peer_process::terminate(&mut child, Duration::from_secs(20)) {
            Some(st) if st.success() => Ok(()),
            Some(st) => Err(format!("the engine exited ({st}): {}", log_tail(&self.log))),
            None => Err("the engine ignored SIGTERM for 20 s (killed)".to_string()),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Not stopped (an error path): SIGKILL to its PID only.
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// How long superpacket's ports keep polling with the guests' kicks off
/// after their transmit queue ran empty (`busy_poll_us`). DPDK's forwarding
/// lcore polls without pause; with this both backends poll while traffic
/// flows, and the backend CPU figures count what polling costs.
pub const BUSY_POLL_US: u32 = 1000;

/// The topology of the superpacket backend: the two sockets' ports in a
/// bridge (the receiver never sends, so the bridge floods the sender's
/// frames to the one other port, as `io` forwarding does) or in a
/// cross-connect.
fn topology(joined_by: EngineTopology, sockets: [&Path; 2]) -> String {
    format!(
        r#"[[device]]
name = "vsend"
kind = "port"
driver = {{ kind = "vhost-user", socket = "{}", busy_poll_us = {BUSY_POLL_US} }}

[[device]]
name = "vrecv"
kind = "port"
driver = {{ kind = "vhost-user", socket = "{}", busy_poll_us = {BUSY_POLL_US} }}

[[device]]
{}ports = ["vsend", "vrecv"]
"#,
        sockets[0].display(),
        sockets[1].display(),
        joined_by.device()
    )
}

fn start_engine(joined_by: EngineTopology, dir: &Path, sockets: [&Path; 2], cpu: usize) -> Result<Backend, String> {
    let bin = crate::bench::peer_process::superpacket_binary()?;
    let topo = dir.join("vhost-user-bench.toml");
    std::fs::write(&topo, topology(joined_by, sockets)).map_err(|e| format!("{}: {e}", topo.display()))?;
    let log = dir.join("engine.log");
    let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(&bin);
    cmd.args(["run", "--workers", "1", "--status-interval", "0", "--stats-socket"])
        .arg(dir.join("engine.sock"))
        .arg(&topo)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let child = {
        // The engine inherits this thread's CPU set (restored on drop).
        let _restore = affinity::Restore::current();
        affinity::pin(cpu).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
        cmd.spawn().map_err(|e| format!("starting {}: {e}", bin.display()))?
    };
    Ok(Backend::Superpacket(Engine { child: Some(child), log }))
}

/// The last lines of a log file, for error messages.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
