//! `superpacket run` as a child process of a test, and reading its counters.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::wait_for_engine;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

/// `superpacket run` as a child process; SIGTERM and wait on drop.
pub struct Running {
    child: Option<Child>,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Running {
    pub fn start(topology: &str) -> Running {
        Running::start_with(topology, &[])
    }

    /// With extra `run` arguments (e.g. `--workers 2`).
    pub fn start_with(topology: &str, extra: &[&str]) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live.toml");
        std::fs::write(&path, topology).unwrap();
        let socket = dir.path().join("live.sock");
        let mut child = Command::new(BIN)
            .args(["run", "--status-interval", "0", "--stats-socket"])
            .arg(&socket)
            .args(extra)
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_engine(&socket, &mut child);
        Running { child: Some(child), socket, _dir: dir }
    }

    pub fn stats(&self) -> serde_json::Value {
        let out = Command::new(BIN).args(["stats", "--json", "--socket"]).arg(&self.socket).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// SIGTERM; returns (exit code, stderr).
    /// The engine's PID (while it runs).
    #[allow(dead_code)]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    pub fn stop(mut self) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        // SAFETY: kill with the PID of a child this test started and has not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

/// A device's counter from `stats --json`.
pub fn counter(stats: &serde_json::Value, device: &str, key: &str) -> u64 {
    stats["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == device)
        .and_then(|d| d["counters"][key].as_u64())
        .unwrap_or(0)
}

/// A topology of one port `port` (driver `driver`, a TOML inline table)
/// bridged (`br0`) to a TAP port `tap` whose device `tap_name` is in
/// namespace `netns`.
pub fn port_bridged_to_tap(port: &str, driver: &str, tap_name: &str, netns: &str) -> String {
    port_bridged_to_taps(port, driver, &[("tap", tap_name, netns)])
}

/// A topology of one port `port` (driver `driver`, a TOML inline table) and
/// TAP ports, all in one bridge `br0`: each of `taps` is (port name, TAP
/// device name, namespace).
pub fn port_bridged_to_taps(port: &str, driver: &str, taps: &[(&str, &str, &str)]) -> String {
    let mut t = format!("[[device]]\nname = \"{port}\"\nkind = \"port\"\ndriver = {driver}\n");
    let mut ports = vec![format!("\"{port}\"")];
    for (tap, dev, netns) in taps {
        t += &format!(
            "[[device]]\nname = \"{tap}\"\nkind = \"port\"\ndriver = {{ kind = \"tap\", name = \"{dev}\", netns = \"{netns}\" }}\n"
        );
        ports.push(format!("\"{tap}\""));
    }
    t + &format!("[[device]]\nname = \"br0\"\nkind = \"bridge\"\nports = [{}]\n", ports.join(", "))
}
