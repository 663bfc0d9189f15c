//! `superpacket lab up|down|status FILE` and `superpacket run --lab FILE`
//! as a user runs them (issue 23): the shipped live examples' `[lab]` tables
//! made by `lab up`, the engine run on the same file, real kernel TCP and
//! UDP from namespace A to namespace B through it, `lab down`, and nothing
//! left behind (namespaces, record); `run --lab` stopped with SIGINT, and
//! failing to start, removing its lab, and using a lab already up without
//! removing it; `lab up` refusing a namespace it did not make, and removing
//! what it made when a step fails halfway; `lab down` leaving a namespace of
//! its lab's name that someone else made again; `status --json`; the
//! message without root.
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). The shipped examples use
//! the fixed namespaces `sp-lab-a`, `sp-lab-b` and `sp-lab-t`: the tests that
//! run them hold [`FIXED_NAMES`] (and find them absent first, or fail
//! saying so); the other tests use unique names in temporary files. Every
//! lab a test makes is removed by `lab down` also when it fails.

mod common;

use common::lab::{LabUp, superpacket, text};
use common::{privileged, wait_for_engine};

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use superpacket_engine::io::NetNs;
use superpacket_engine::io::netns::{create_named, delete_named};
use superpacket_lab::plumbing::state_path;
use superpacket_lab::streams::{self, Limit, TcpConfig, UdpConfig};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

/// Held by the tests that make the shipped examples' labs (fixed names).
static FIXED_NAMES: Mutex<()> = Mutex::new(());

fn fixed_names() -> std::sync::MutexGuard<'static, ()> {
    FIXED_NAMES.lock().unwrap_or_else(|p| p.into_inner())
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name).canonicalize().unwrap()
}

fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// The record `lab up FILE` keeps.
fn record(file: &Path) -> PathBuf {
    state_path(&file.canonicalize().unwrap())
}

/// `superpacket run [extra] FILE` in the background, up once its stats socket exists.
fn start_run(file: &Path, extra: &[&str], socket: &Path) -> Child {
    let mut child = Command::new(BIN)
        .args(["run", "--status-interval", "0", "--stats-socket"])
        .arg(socket)
        .args(extra)
        .arg(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_engine(socket, &mut child);
    child
}

/// Sends `sig` to the child (by its PID) and waits: (exit code, output).
fn stop(child: Child, sig: i32) -> (Option<i32>, String) {
    // SAFETY: kill with the PID of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out))
}

/// Kernel TCP (IPv4, and IPv6 if `v6`) and UDP GSO from `sp-lab-a` to
/// `host_b` in `sp-lab-b`, every byte checked.
fn traffic(name: &str, host_b: [IpAddr; 2], v6: bool, port: u16) {
    let a = NetNs::attach("sp-lab-a").unwrap();
    let b = NetNs::attach("sp-lab-b").unwrap();
    let tcp = TcpConfig { limit: Limit::Duration(Duration::from_millis(400)), ..TcpConfig::default() };
    for host in host_b.into_iter().take(if v6 { 2 } else { 1 }) {
        let t = streams::tcp_transfer(Some(&b), Some(&a), SocketAddr::new(host, port), &tcp).unwrap();
        assert!(t.intact() && t.receiver.bytes > 1_000_000, "{name} TCP to {host}: {t:?}");
    }
    let udp = UdpConfig { limit: Limit::Duration(Duration::from_millis(300)), ..UdpConfig::default() };
    let u = streams::udp_transfer(Some(&b), Some(&a), SocketAddr::new(host_b[0], port + 1), &udp).unwrap();
    assert!(u.no_corruption() && u.receiver.counts.unique > 100, "{name} UDP: {u:?}");
}

/// Fails if a namespace of the shipped labs exists (someone's lab is up).
fn assert_fixed_names_free() {
    for n in ["sp-lab-a", "sp-lab-b", "sp-lab-t"] {
        assert!(!netns_exists(n), "namespace {n} exists: a lab is up (superpacket lab down FILE), cannot test");
    }
}

fn assert_all_gone(file: &Path, namespaces: &[&str]) {
    for n in namespaces {
        assert!(!netns_exists(n), "{}: namespace {n} left behind", file.display());
    }
    assert!(!record(file).exists(), "{}: record {} left behind", file.display(), record(file).display());
}

#[test]
fn lab_up_run_traffic_lab_down_for_the_shipped_examples() {
    if !privileged("lab_up_run_traffic_lab_down_for_the_shipped_examples") {
        return;
    }
    let _fixed = fixed_names();
    assert_fixed_names_free();
    let dir = tempfile::tempdir().unwrap();
    let v4 = |s: &str| s.parse::<IpAddr>().unwrap();
    // Every live example with a lab (live-vhost-user-bridge.toml has none:
    // its ports are sockets, tests/vhost_user_frontend.rs runs it).
    let cases: [(&str, &[&str], [IpAddr; 2], bool); 5] = [
        ("live-router.toml", &["sp-lab-a", "sp-lab-b"], [v4("10.72.0.2"), v4("fd72::2")], true),
        ("live-qinq-nat.toml", &["sp-lab-a", "sp-lab-b", "sp-lab-t"], [v4("10.72.0.2"), v4("fd72::2")], false),
        ("live-tun-router.toml", &["sp-lab-a", "sp-lab-b"], [v4("10.74.0.2"), v4("fd74::2")], true),
        ("live-router-nat.toml", &["sp-lab-a", "sp-lab-b"], [v4("10.72.0.2"), v4("fd72::2")], true),
        ("live-vlan-gro.toml", &["sp-lab-a", "sp-lab-b", "sp-lab-t"], [v4("10.72.0.2"), v4("fd72::2")], true),
    ];
    for (i, (name, namespaces, host_b, v6)) in cases.into_iter().enumerate() {
        let file = example(name);
        let lab = LabUp::up(&file);
        assert!(record(&file).exists(), "{name}: no record");
        let status = superpacket(&["lab", "status"], &file);
        assert_eq!(status.status.code(), Some(0), "{name}: {}", text(&status));
        if i == 0 {
            // Up twice: said, nothing changed.
            let again = superpacket(&["lab", "up"], &file);
            assert_eq!(again.status.code(), Some(0), "{}", text(&again));
            assert!(text(&again).contains("already up"), "{}", text(&again));
            // A lab of another file with the same namespaces is refused, naming the owner.
            let other = superpacket(&["lab", "up"], &example("live-router-nat.toml"));
            assert_eq!(other.status.code(), Some(2), "{}", text(&other));
            assert!(text(&other).contains("belongs to the lab of") && text(&other).contains(name), "{}", text(&other));
        }
        let socket = dir.path().join(format!("{i}.sock"));
        let run = start_run(&file, &[], &socket);
        traffic(name, host_b, v6, 5401 + 2 * i as u16);
        let (code, out) = stop(run, libc::SIGTERM);
        assert_eq!(code, Some(0), "{name}: {out}");
        // The engine is gone; the lab stays until lab down.
        assert!(namespaces.iter().all(|n| netns_exists(n)), "{name}");
        drop(lab);
        assert_all_gone(&file, namespaces);
        let down_again = superpacket(&["lab", "down"], &file);
        assert_eq!(down_again.status.code(), Some(0), "{}", text(&down_again));
        assert!(text(&down_again).contains("not up"), "{}", text(&down_again));
        let status = superpacket(&["lab", "status"], &file);
        assert_eq!(status.status.code(), Some(1), "{name} down: {}", text(&status));
    }
}

#[test]
fn run_with_lab_removes_its_lab_on_sigint() {
    if !privileged("run_with_lab_removes_its_lab_on_sigint") {
        return;
    }
    let _fixed = fixed_names();
    assert_fixed_names_free();
    let dir = tempfile::tempdir().unwrap();
    let file = example("live-router.toml");
    let socket = dir.path().join("lab.sock");
    let run = start_run(&file, &["--lab"], &socket);
    assert!(netns_exists("sp-lab-a") && netns_exists("sp-lab-b") && record(&file).exists());
    let v4 = "10.72.0.2".parse().unwrap();
    traffic("run --lab", [v4, "fd72::2".parse().unwrap()], false, 5411);
    let (code, out) = stop(run, libc::SIGINT);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("lab removed"), "{out}");
    assert_all_gone(&file, &["sp-lab-a", "sp-lab-b"]);
}

/// A topology file in `dir` whose `[lab]` declares `namespaces` (and a TAP
/// in the first), with `extra` appended.
fn tmp_topology(dir: &Path, namespaces: &[&str], extra: &str) -> PathBuf {
    let list: Vec<String> = namespaces.iter().map(|n| format!("\"{n}\"")).collect();
    let src = format!(
        "[[device]]\nname = \"a\"\nkind = \"port\"\ndriver = {{ kind = \"tap\", name = \"splt0\", netns = \"{0}\" }}\n\n\
         [lab]\nnetns = [{1}]\n\n[[lab.link]]\nkind = \"tap\"\nname = \"splt0\"\nnetns = \"{0}\"\n\
         addresses = [\"10.75.0.2/24\"]\n{extra}",
        namespaces[0],
        list.join(", ")
    );
    let path = dir.join("lab.toml");
    std::fs::write(&path, src).unwrap();
    path
}

fn unique(tag: &str) -> String {
    format!("sp-lt-{tag}-{}", std::process::id())
}

#[test]
fn lab_up_and_down_touch_only_what_lab_up_made() {
    if !privileged("lab_up_and_down_touch_only_what_lab_up_made") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Someone else's namespace (the test's own, deleted on drop).
    let theirs = NetNs::create("sp-lt-theirs").unwrap();
    let mine = unique("mine");
    let file = tmp_topology(dir.path(), &[&mine, theirs.name()], "");
    let out = superpacket(&["lab", "up"], &file);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let msg = text(&out);
    assert!(msg.contains(theirs.name()) && msg.contains("already exists") && msg.contains("line 7"), "{msg}");
    // Nothing was made, nothing of theirs was touched, and down has nothing to remove.
    assert!(!netns_exists(&mine) && netns_exists(theirs.name()) && !record(&file).exists());
    let down = superpacket(&["lab", "down"], &file);
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    assert!(netns_exists(theirs.name()));

    // A step failing halfway (a gateway with no route to it): what was made is removed.
    let (a, b) = (unique("a"), unique("b"));
    let route = "\n[[lab.route]]\nnetns = \"NS\"\nto = \"10.9.0.0/16\"\nvia = \"10.99.0.1\"\n".replace("NS", &a);
    let file = tmp_topology(dir.path(), &[&a, &b], &route);
    let out = superpacket(&["lab", "up"], &file);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let msg = text(&out);
    assert!(msg.contains("line 17") && msg.contains("10.9.0.0/16 via 10.99.0.1") && msg.contains("removed"), "{msg}");
    assert_all_gone(&file, &[&a, &b]);

    // A namespace lab up made, deleted and made again by someone else: lab down leaves it.
    let file = tmp_topology(dir.path(), &[&a, &b], "");
    let lab = LabUp::up(&file);
    delete_named(&a).unwrap();
    create_named(&a).unwrap();
    let down = superpacket(&["lab", "down"], &file);
    let msg = text(&down);
    assert_eq!(down.status.code(), Some(0), "{msg}");
    assert!(msg.contains(&format!("left alone: {a}")), "{msg}");
    assert!(netns_exists(&a) && !netns_exists(&b) && !record(&file).exists(), "{msg}");
    delete_named(&a).unwrap();
    drop(lab);
}

#[test]
fn run_with_lab_removes_its_lab_when_the_engine_fails() {
    if !privileged("run_with_lab_removes_its_lab_when_the_engine_fails") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = unique("fail");
    let file = tmp_topology(dir.path(), &[&ns], "");
    // A second port on an interface the lab does not make: the engine cannot open it.
    let src = std::fs::read_to_string(&file).unwrap().replacen(
        "\n[lab]",
        &format!("[[device]]\nname = \"x\"\nkind = \"port\"\ndriver = {{ kind = \"af_packet\", interface = \"nope0\", netns = \"{ns}\" }}\n\n[lab]"),
        1,
    );
    std::fs::write(&file, src).unwrap();
    let out = Command::new(BIN)
        .args(["run", "--lab", "--status-interval", "0", "--stats-socket"])
        .arg(dir.path().join("fail.sock"))
        .arg(&file)
        .output()
        .unwrap();
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains("nope0") && msg.contains("lab removed"), "{msg}");
    // lab up warned that the port will not find its interface.
    assert!(msg.contains("makes no interface `nope0`"), "{msg}");
    assert_all_gone(&file, &[&ns]);
}

#[test]
fn lab_status_json_run_lab_on_a_lab_already_up_and_no_root() {
    if !privileged("lab_status_json_run_lab_on_a_lab_already_up_and_no_root") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = unique("json");
    let file = tmp_topology(dir.path(), &[&ns], "");
    let lab = LabUp::up(&file);
    let out = superpacket(&["lab", "status", "--json"], &file);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["up"], true, "{v}");
    let objects = v["objects"].as_array().unwrap();
    assert!(objects.iter().any(|o| o["object"] == format!("tap splt0 in {ns}") && o["state"] == "ok"), "{v}");
    assert_eq!(v["record"]["namespaces"][0], ns.as_str(), "{v}");

    // run --lab on a lab that is already up uses it and leaves it up.
    let out = Command::new(BIN)
        .args(["run", "--lab", "--duration", "0.3", "--status-interval", "0", "--stats-socket"])
        .arg(dir.path().join("json.sock"))
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("already up") && netns_exists(&ns) && record(&file).exists(), "{}", text(&out));

    // Without root: exit 2 and what is missing. (`nobody` reads the file through the
    // temporary directory, which is private: use a world-readable copy.)
    let copy = std::env::temp_dir().join(format!("sp-lab-nonroot-{}.toml", std::process::id()));
    std::fs::copy(&file, &copy).unwrap();
    let out = {
        use std::os::unix::process::CommandExt;
        Command::new(BIN).args(["lab", "up"]).arg(&copy).uid(65534).gid(65534).output().unwrap()
    };
    let _ = std::fs::remove_file(&copy);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("needs root") && text(&out).contains("CAP_NET_ADMIN"), "{}", text(&out));
    drop(lab);
    assert_all_gone(&file, &[&ns]);
}
