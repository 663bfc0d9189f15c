//! A private Open vSwitch for `bench live-peers`: `ovsdb-server` and
//! `ovs-vswitchd` started by the benchmark with their own database, run,
//! log and pid files in a temporary directory, a userspace (`netdev`)
//! bridge with userspace TSO over two veth ends, and both daemons stopped
//! by their process ids when the [`Ovs`] is dropped (also when a
//! measurement fails). A system-wide Open vSwitch, if one runs, is never
//! used or touched: every tool is pointed at this directory's socket.
//!
//! `ovs-vswitchd` enters the middle namespace between fork and exec, so
//! the daemon lives there and sees the veth ends. Both daemons get SIGTERM
//! if the benchmark dies without stopping them (`PR_SET_PDEATHSIG`).

use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::super::vhost_user::cpu::process_cpu_seconds;
use crate::bench::peer_process::terminate;
use superpacket_engine::io::NetNs;

/// The schema `ovsdb-tool create` makes the database from.
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";
/// What to install when Open vSwitch is missing.
pub const INSTALL_HINT: &str = "openvswitch-switch not installed (apt-get install openvswitch-switch)";
/// The OVS bridge's name (in the middle namespace).
pub const BRIDGE: &str = "lp-ovs";
/// Longest wait for a daemon's socket or for a configuration to apply.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a tool is: `PATH`, then the sbin directories root's `PATH` may lack.
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Why Open vSwitch cannot run here, if it cannot.
///
/// # Errors
/// A daemon, tool or the schema is missing ([`INSTALL_HINT`]).
pub fn available() -> Result<(), String> {
    let missing: Vec<&str> = ["ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl"]
        .into_iter()
        .filter(|t| tool(t).is_none())
        .chain((!Path::new(SCHEMA).is_file()).then_some(SCHEMA))
        .collect();
    if missing.is_empty() { Ok(()) } else { Err(format!("{INSTALL_HINT}: {} missing", missing.join(", "))) }
}

/// The running private Open vSwitch (see the module documentation).
#[derive(Debug)]
pub struct Ovs {
    dir: PathBuf,
    // Stopped in reverse order: the switch, then its database.
    daemons: Vec<Child>,
}

impl Ovs {
    /// Starts both daemons with their files under `dir` (created, and
    /// removed on drop), turns userspace TSO on, and makes [`BRIDGE`], a
    /// `netdev` bridge with `ports` (interfaces of `ns`) as its ports.
    ///
    /// # Errors
    /// Open vSwitch missing, a daemon failing to start, or `ovs-vsctl`
    /// failing; the log's last line is in the message.
    pub fn start(ns: &NetNs, ports: &[&str], dir: &Path) -> Result<Ovs, String> {
        available()?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut ovs = Ovs { dir: dir.to_path_buf(), daemons: Vec::new() };
        let db = dir.join("conf.db");
        ovs.run_tool("ovsdb-tool", &["create".as_ref(), db.as_os_str(), SCHEMA.as_ref()])?;
        let sock = ovs.db_socket();
        let server = ovs
            .command("ovsdb-server", "ovsdb-server", None)?
            .arg(&db)
            .arg(format!("--remote=punix:{}", sock.display()))
            .spawn()
            .map_err(|e| format!("starting ovsdb-server: {e}"))?;
        ovs.daemons.push(server);
        ovs.wait_for(&sock, "ovsdb-server")?;
        ovs.vsctl(&["--no-wait", "init"])?;
        // Read once when ovs-vswitchd starts: set before it does.
        ovs.vsctl(&["--no-wait", "set", "Open_vSwitch", ".", "other_config:userspace-tso-enable=true"])?;
        let switch = ovs
            .command("ovs-vswitchd", "ovs-vswitchd", Some(ns))?
            .arg(format!("unix:{}", sock.display()))
            .spawn()
            .map_err(|e| format!("starting ovs-vswitchd in {}: {e}", ns.name()))?;
        ovs.daemons.push(switch);
        ovs.wait_for(&dir.join("ovs-vswitchd.ctl"), "ovs-vswitchd")?;
        let timeout = format!("--timeout={}", START_TIMEOUT.as_secs());
        let mut args = vec![timeout.as_str(), "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev"];
        for p in ports {
            args.extend(["--", "add-port", BRIDGE, p]);
        }
        ovs.vsctl(&args)?;
        Ok(ovs)
    }

    fn db_socket(&self) -> PathBuf {
        self.dir.join("db.sock")
    }

    /// A daemon's command: its pid, control socket and log in the
    /// directory, the OVS_* directories pointed there too, output to the
    /// log; run in `netns` (else here), ended with this process.
    fn command(&self, name: &str, daemon: &str, netns: Option<&NetNs>) -> Result<Command, String> {
        let mut cmd = Command::new(tool(name).ok_or_else(|| format!("{INSTALL_HINT}: {name} missing"))?);
        cmd.arg(format!("--pidfile={}", self.dir.join(format!("{daemon}.pid")).display()))
            .arg(format!("--unixctl={}", self.dir.join(format!("{daemon}.ctl")).display()))
            .arg(format!("--log-file={}", self.log(daemon).display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.private_dirs(&mut cmd);
        let ns_fd = netns.map(|n| n.fd().as_raw_fd());
        // SAFETY: between fork and exec the closure only makes the
        // async-signal-safe system calls prctl and setns; `ns_fd` stays open
        // (borrowed from `netns`, which outlives the spawn).
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = ns_fd
                    && libc::setns(fd, libc::CLONE_NEWNET) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(cmd)
    }

    fn private_dirs(&self, cmd: &mut Command) {
        for var in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR", "OVS_SYSCONFDIR"] {
            cmd.env(var, &self.dir);
        }
    }

    fn log(&self, daemon: &str) -> PathBuf {
        self.dir.join(format!("{daemon}.log"))
    }

    /// Waits for `path` to appear while the daemons keep running.
    fn wait_for(&mut self, path: &Path, daemon: &str) -> Result<(), String> {
        let t0 = Instant::now();
        while !path.exists() {
            for c in &mut self.daemons {
                if let Ok(Some(st)) = c.try_wait() {
                    return Err(format!("{daemon} exited ({st}): {}", self.log_tail(daemon)));
                }
            }
            if t0.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "{daemon}: no {} after {START_TIMEOUT:?}: {}",
                    path.display(),
                    self.log_tail(daemon)
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The last line `daemon` (`ovsdb-server`, `ovs-vswitchd`) logged.
    pub fn log_tail(&self, daemon: &str) -> String {
        let text = std::fs::read_to_string(self.log(daemon)).unwrap_or_default();
        text.lines().last().unwrap_or("(empty log)").to_string()
    }

    fn run_tool(&self, name: &str, args: &[&std::ffi::OsStr]) -> Result<String, String> {
        let mut cmd = Command::new(tool(name).ok_or_else(|| format!("{INSTALL_HINT}: {name} missing"))?);
        cmd.args(args);
        self.private_dirs(&mut cmd);
        let out = cmd.output().map_err(|e| format!("running {name}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{name} {args:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `ovs-vsctl` against this instance's database only.
    ///
    /// # Errors
    /// The tool failing.
    pub fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.db_socket().display());
        let all: Vec<&std::ffi::OsStr> = std::iter::once(db.as_ref()).chain(args.iter().map(|a| a.as_ref())).collect();
        self.run_tool("ovs-vsctl", &all)
    }

    /// CPU seconds `ovs-vswitchd` (every thread) has used so far.
    ///
    /// # Errors
    /// The daemon is not running.
    pub fn cpu_seconds(&self) -> Result<f64, String> {
        let switch = self.daemons.get(1).ok_or("ovs-vswitchd is not running")?;
        process_cpu_seconds(switch.id())
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        while let Some(mut child) = self.daemons.pop() {
            stop(&mut child);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// SIGTERM to `child` (by its pid), SIGKILL after 5 s; then reaped.
fn stop(child: &mut Child) {
    let _ = terminate(child, Duration::from_secs(5));
}
