//! Support shared by the integration tests (each includes it with `mod common;`
//! and uses only part of it, hence `allow(dead_code)`).
#![allow(dead_code)]

pub mod engine;
pub mod lab;
pub mod qemu;
pub mod raw_ip;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use superpacket_engine::io::{NetNs, require_privileges};

/// Whether a test that needs root may run: true with privileges; without,
/// `require_privileges` panics with the reason unless
/// `SUPERPACKET_SKIP_PRIVILEGED=1`, and then the test is reported skipped.
pub fn privileged(test: &str) -> bool {
    if require_privileges() {
        return true;
    }
    eprintln!("SKIPPED {test}: needs root (SUPERPACKET_SKIP_PRIVILEGED=1)");
    false
}

/// Waits until a `superpacket run` child has created its stats socket
/// `socket` (the engine is up); panics with its stderr if it exits first, or
/// after 20 s.
pub fn wait_for_engine(socket: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !socket.exists() {
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("engine exited early ({st}): {err}");
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "engine did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A topology with a vhost-user port `vp` listening on `socket` and TAP
/// ports, all in one bridge `br0`: each of `taps` is (port name, TAP
/// device name, namespace).
pub fn vhost_user_and_taps_topology(socket: &Path, taps: &[(&str, &str, &str)]) -> String {
    let driver = format!(r#"{{ kind = "vhost-user", socket = "{}" }}"#, socket.display());
    engine::port_bridged_to_taps("vp", &driver, taps)
}

/// Accepts one TCP connection on `listener` in a thread and returns what
/// the peer sent until it closed (each read waits at most `timeout`).
#[allow(dead_code)]
pub fn receive_one_tcp_stream(listener: std::net::TcpListener, timeout: Duration) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(timeout)).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        got
    })
}

/// FNV-1a, 64-bit: a digest for comparing a received stream with what was
/// sent, without a crypto dependency (the QEMU guest helper computes the
/// same).
#[allow(dead_code)]
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// A namespace named after `prefix` with IPv6 off, so that nothing but the
/// test's own frames moves in it (deleted on drop).
pub fn quiet_ns(prefix: &str) -> NetNs {
    let ns = NetNs::create(prefix).expect("create namespace");
    ns.disable_ipv6().expect("disable IPv6");
    ns
}

/// Sets `devs` up and waits (at most 5 s) until each is operational: the
/// kernel activates a link's queue from its link-watch work, up to a second
/// after the netlink request, and drops what is sent before that.
#[allow(dead_code)]
pub fn links_up_and_running(ns: &NetNs, devs: &[&str]) {
    for dev in devs {
        ns.link_up(dev).unwrap_or_else(|e| panic!("link {dev} up: {e}"));
    }
    let t0 = std::time::Instant::now();
    while !devs.iter().all(|d| ns.link_state(d).is_ok_and(|s| s.oper_up)) {
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{devs:?} not running after 5 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Sets both ends of a fresh veth up (`a` in `ns_a`, `b` in `ns_b`) and
/// waits until both are operational (an end is only once its peer is up).
#[allow(dead_code)]
pub fn veth_up_and_running(ns_a: &NetNs, a: &str, ns_b: &NetNs, b: &str) {
    ns_b.link_up(b).unwrap_or_else(|e| panic!("link {b} up: {e}"));
    links_up_and_running(ns_a, &[a]);
    links_up_and_running(ns_b, &[b]);
}

/// Whether the Wireshark command-line `tools` (e.g. `tshark`) are installed:
/// panics with a clear message if one is missing, unless
/// `SUPERPACKET_SKIP_TSHARK=1` (then prints a skip note and returns `false`).
pub fn wireshark_tools_available(tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|tool| !Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success()))
        .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("SUPERPACKET_SKIP_TSHARK").as_deref() == Ok("1") {
        eprintln!("SKIPPED: {} not installed and SUPERPACKET_SKIP_TSHARK=1", missing.join(", "));
        return false;
    }
    panic!(
        "{} not installed: these tests need Wireshark's command-line tools \
         (`apt-get install tshark`), or set SUPERPACKET_SKIP_TSHARK=1 to skip them",
        missing.join(", ")
    );
}

/// Runs a tool, asserting success and no complaint about the file; returns stdout.
pub fn run_tool(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool).args(args).output().unwrap_or_else(|e| panic!("running {tool}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{tool} {args:?} failed ({}): {stderr}", out.status);
    for complaint in ["damaged", "corrupt", "cut short", "isn't", "bigger than", "too big"] {
        assert!(!stderr.contains(complaint), "{tool} {args:?} complained: {stderr}");
    }
    String::from_utf8(out.stdout).expect("tool output is UTF-8")
}

/// `tshark -r path [-o pref]... -T fields -E separator=| [-e field]...` through
/// [`run_tool`]: one line per frame, the fields separated by `|`.
pub fn tshark_fields(path: &Path, prefs: &[&str], fields: &[&str]) -> String {
    let mut args = vec!["-r", path.to_str().unwrap()];
    for pref in prefs {
        args.extend(["-o", pref]);
    }
    args.extend(["-T", "fields", "-E", "separator=|"]);
    for field in fields {
        args.extend(["-e", field]);
    }
    run_tool("tshark", &args)
}
