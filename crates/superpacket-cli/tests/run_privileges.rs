//! `superpacket run` drops its privileges once the ports are open (issue 10):
//! it becomes the `--user`, keeps only the capabilities reopening ports needs,
//! its stats socket is not world-writable, and it still reopens a port whose
//! device vanished and came back.
//!
//! Root only: a namespace and a veth of the test's own, deleted on drop.

mod common;

use common::{privileged, quiet_ns, wait_for_engine};

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use superpacket_engine::io::VethPair;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn status_field(pid: u32, key: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("engine status");
    s.lines().find(|l| l.starts_with(key)).map(|l| l[key.len()..].trim().to_string()).unwrap_or_default()
}

fn stats(socket: &std::path::Path) -> String {
    let out = Command::new(BIN).args(["stats", "--socket"]).arg(socket).output().expect("stats");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn run_as_user_keeps_only_what_reopening_needs_and_still_reopens() {
    if !privileged("run_as_user_keeps_only_what_reopening_needs_and_still_reopens") {
        return;
    }
    let ns = quiet_ns("sp-priv");
    let veth = VethPair::create(&ns, "sppr0", &ns, "sppr1").expect("veth");
    ns.link_up("sppr0").unwrap();
    ns.link_up("sppr1").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join(format!("sp-priv-{}.toml", std::process::id()));
    std::fs::write(
        &topo,
        format!(
            "[[device]]\nname = \"t\"\nkind = \"port\"\ndriver = {{ kind = \"af_packet\", interface = \"sppr0\", netns = \"{}\" }}\n",
            ns.name()
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .arg("run")
        .arg(&topo)
        .args(["--user", "nobody", "--status-interval", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stem = topo.file_stem().unwrap().to_str().unwrap().to_string();
    let socket = std::path::PathBuf::from(format!("/run/superpacket/nobody/{stem}.sock"));
    wait_for_engine(&socket, &mut child);
    let pid = child.id();
    // A port in a named namespace: NET_ADMIN, NET_RAW and SYS_ADMIN (setns), nothing else.
    wait_until("the engine to become nobody", Duration::from_secs(5), || {
        status_field(pid, "Uid:").starts_with("65534")
    });
    assert_eq!(status_field(pid, "CapEff:"), "0000000000203000");
    assert_eq!(status_field(pid, "CapPrm:"), "0000000000203000");
    assert_eq!(status_field(pid, "CapBnd:"), "0000000000203000");
    assert_eq!(status_field(pid, "NoNewPrivs:"), "1");
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "the stats socket is not world-writable");
    assert!(stats(&socket).contains("driver.reopens=0") || !stats(&socket).contains("driver.reopens"));

    // The device vanishes and comes back: the unprivileged engine reopens the port.
    drop(veth);
    wait_until("carrier down", Duration::from_secs(10), || stats(&socket).lines().any(|l| l.contains(" down ")));
    let veth = VethPair::create(&ns, "sppr0", &ns, "sppr1").expect("veth again");
    ns.link_up("sppr0").unwrap();
    ns.link_up("sppr1").unwrap();
    wait_until("the port to be reopened", Duration::from_secs(10), || stats(&socket).contains("driver.reopens=1"));

    // SIGTERM: exit 0, and the socket (in nobody's directory) is removed.
    // SAFETY: signals the child this test started.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("capabilities cap_net_admin,cap_net_raw,cap_sys_admin"), "{err}");
    assert!(err.contains("device back, reopened"), "{err}");
    assert!(!socket.exists(), "socket left behind");
    drop(veth);
}
