//! `superpacket demo` end to end: every stage does what it says, the capture
//! it writes passes `pcap check`, and the pipeline conserves payload bytes.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

#[test]
fn demo_runs_clean_and_conserves_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("demo.pcapng");
    let out = Command::new(BIN).args(["demo", "--offline", "--json", "--out"]).arg(&capture).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["mode"], "offline");
    assert_eq!(v["check_problems"], 0);
    assert_eq!(v["handed_over"].as_u64().unwrap(), v["imported"].as_u64().unwrap() + 4, "4 bogus headers refused");
    let p = &v["pipeline"];
    assert_eq!(p["payload_bytes_in"], p["payload_bytes_out"]);
    assert_eq!(p["frames_in"], p["frames_out"]);
    assert_eq!(p["devices_crossed_whole"], 3);
    assert!(p["gro_segments_per_superpacket"].as_f64().unwrap() > 40.0, "{p}");
    assert_eq!(p["problems"], 0);
    // The capture it wrote is clean for `pcap check` too.
    let check = Command::new(BIN).args(["pcap", "check"]).arg(&capture).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stdout));
    // The human form says it is the offline pipeline.
    let human = Command::new(BIN).args(["demo", "--offline", "--out"]).arg(&capture).output().unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("OFFLINE pipeline"), "{text}");
    assert!(!text.contains("not built yet"), "the live data path exists: {text}");
}

/// Without privileges the demo runs the offline pipeline and says why, with
/// what to do about it (as root the test drops to `nobody` for the child;
/// as a normal user it already is one).
#[test]
fn demo_without_root_says_why_and_runs_offline() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let capture = dir.path().join("demo.pcapng");
    let mut cmd = Command::new(BIN);
    cmd.args(["demo", "--superpackets", "2", "--out"]).arg(&capture).current_dir(dir.path());
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the live data path needs root"), "{stderr}");
    assert!(stderr.contains("CAP_NET_ADMIN missing: run as root"), "names what is missing and how: {stderr}");
    assert!(stdout.contains("OFFLINE pipeline"), "{stdout}");
}
