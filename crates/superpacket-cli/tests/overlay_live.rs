//! `examples/live-vxlan-overlay.toml` as a user runs it (issue 25): `superpacket
//! lab up` makes the two namespaces, their TAPs and B's kernel VXLAN device,
//! `superpacket run` runs the engine on the same file (one tunnel end: a
//! `vxlan` device bridged with A's port, its underlay routed out of port
//! `u`), and real kernel TCP (IPv4 and IPv6 inside) and UDP GSO go from A to
//! B over the overlay and back, every byte checked: the engine's VXLAN
//! interoperates with Linux's both ways. `superpacket stats --json` then shows
//! `vx` encapsulating superpackets whole, port `u` segmenting them (the TAP
//! takes no tunnel GSO), the router delivering B's VXLAN to the tunnel's
//! socket, `vx` learning B's MAC, and no drop at `vx`. `lab status` sees
//! the kernel VXLAN device (and its absence), and `lab down` leaves nothing.
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). The example uses the fixed
//! namespaces `sp-ovl-a` and `sp-ovl-b`: the tests hold [`fixed_names`] (a
//! mutex, and a lock file against another test process) and find them
//! absent first, or fail saying so. Every lab a test makes is removed by
//! `lab down` also when it fails.

mod common;

use common::lab::{LabUp, superpacket, text};
use common::{privileged, wait_for_engine};

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use superpacket_engine::io::NetNs;
use superpacket_lab::plumbing::state_path;
use superpacket_lab::streams::{self, Limit, TcpConfig, UdpConfig};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");
const EXAMPLE: &str = "live-vxlan-overlay.toml";
const NAMESPACES: [&str; 2] = ["sp-ovl-a", "sp-ovl-b"];

static FIXED_NAMES: Mutex<()> = Mutex::new(());

/// The fixed names, held: this process's other tests wait on the mutex,
/// another test process on an exclusive `flock` of a file in the
/// temporary directory.
struct FixedNames {
    _guard: MutexGuard<'static, ()>,
    _file: std::fs::File,
}

fn fixed_names() -> FixedNames {
    let guard = FIXED_NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let path = std::env::temp_dir().join("superpacket-sp-ovl.lock");
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).unwrap();
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0, "{}", path.display());
    for n in NAMESPACES {
        assert!(
            !Path::new("/run/netns").join(n).exists(),
            "namespace {n} exists: a lab is up (superpacket lab down examples/{EXAMPLE}), cannot test"
        );
    }
    FixedNames { _guard: guard, _file: file }
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(EXAMPLE).canonicalize().unwrap()
}

/// `superpacket run` on the file, stopped with SIGTERM (by its PID) on drop.
struct Run {
    child: Option<Child>,
    socket: PathBuf,
}

impl Run {
    fn start(file: &Path, socket: &Path) -> Run {
        let mut child = Command::new(BIN)
            .args(["run", "--status-interval", "0", "--stats-socket"])
            .arg(socket)
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_engine(socket, &mut child);
        Run { child: Some(child), socket: socket.to_path_buf() }
    }

    /// `superpacket stats --json`: device -> counters, and the tables.
    fn stats(&self) -> (BTreeMap<String, serde_json::Value>, Vec<serde_json::Value>) {
        let out = Command::new(BIN).args(["stats", "--json", "--socket"]).arg(&self.socket).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "stats: {}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let devices = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| (d["name"].as_str().unwrap().to_string(), d["counters"].clone()))
            .collect();
        (devices, v["tables"].as_array().cloned().unwrap_or_default())
    }

    /// SIGTERM, then the exit code and output.
    fn stop(mut self) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        // SAFETY: kill with the PID of a child this test started and has not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        (out.status.code(), text(&out))
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

fn counter(c: &serde_json::Value, name: &str) -> u64 {
    c[name].as_u64().unwrap_or(0)
}

#[test]
fn overlay_example_carries_kernel_tcp_and_udp_both_ways_through_the_engine() {
    if !privileged("overlay_example_carries_kernel_tcp_and_udp_both_ways_through_the_engine") {
        return;
    }
    let _fixed = fixed_names();
    let file = example();
    let lab = LabUp::up(&file);
    let status = superpacket(&["lab", "status"], &file);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status));
    assert!(text(&status).contains("vxlan vx0 in sp-ovl-b (up, MTU 1450)"), "{}", text(&status));

    let dir = tempfile::tempdir().unwrap();
    let run = Run::start(&file, &dir.path().join("ovl.sock"));
    let a = NetNs::attach("sp-ovl-a").unwrap();
    let b = NetNs::attach("sp-ovl-b").unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let tcp = TcpConfig { limit: Limit::Duration(Duration::from_millis(500)), ..TcpConfig::default() };
    let udp = UdpConfig { limit: Limit::Duration(Duration::from_millis(300)), ..UdpConfig::default() };
    // (from, to, destination): A -> B first (A's superpackets enter the tunnel), then B -> A.
    let ways =
        [("A", &a, "B", &b, [ip("10.95.0.2"), ip("fd95::2")]), ("B", &b, "A", &a, [ip("10.95.0.1"), ip("fd95::1")])];
    let mut port = 5601;
    for (from, tx, to, rx, hosts) in ways {
        for host in hosts {
            let t = streams::tcp_transfer(Some(rx), Some(tx), SocketAddr::new(host, port), &tcp).unwrap();
            assert!(t.intact() && t.receiver.bytes > 1_000_000, "TCP {from} -> {to} {host}: {t:?}");
            eprintln!("TCP {from} -> {to} {host}: {:.2} Gbit/s", t.gbps());
            let u = streams::udp_transfer(Some(rx), Some(tx), SocketAddr::new(host, port + 1), &udp).unwrap();
            assert!(u.no_corruption() && u.receiver.counts.unique > 100, "UDP {from} -> {to} {host}: {u:?}");
            eprintln!("UDP {from} -> {to} {host}: {:.2} Gbit/s, {} lost", u.gbps(), u.lost());
            port += 2;
        }
    }

    let (devices, tables) = run.stats();
    let dev = |name: &str| devices.get(name).unwrap_or_else(|| panic!("no device {name} in {devices:?}"));
    let (vx, u, router) = (dev("vx"), dev("u"), dev("router"));
    // A's superpackets entered the tunnel whole...
    assert!(counter(vx, "tx_superpackets") > 0, "vx: {vx}");
    assert!(counter(dev("a"), "rx_superpackets") > 0, "a: {}", dev("a"));
    // ...were routed whole, and left through the underlay TAP whole if the
    // kernel took UDP-tunnel GSO on it (TUN_F_UDP_TUNNEL_GSO, 6.18 does),
    // else were segmented there.
    assert!(counter(router, "tx_superpackets") > 0, "router: {router}");
    if counter(u, "driver.udp_tunnel_gso") == 1 {
        assert!(counter(u, "tx_superpackets") > 0 && counter(u, "tx_segmented") == 0, "u: {u}");
        // B's kernel hands its tunnel superpackets to the engine whole too,
        // and they reach A's TAP whole: nothing is segmented on the way.
        assert!(counter(u, "rx_superpackets") > 0, "u: {u}");
        let a = dev("a");
        assert!(counter(a, "tx_superpackets") > 0 && counter(a, "tx_segmented") == 0, "a: {a}");
        assert_eq!(counter(vx, "segments_produced") + counter(router, "segments_produced"), 0);
    } else {
        eprintln!("NOTE: this kernel refused UDP-tunnel GSO on the TAP: the engine segments before it");
        assert!(
            counter(u, "tx_segmented") > 0 && counter(u, "segments_produced") > counter(u, "tx_segmented"),
            "u: {u}"
        );
    }
    // B's VXLAN was delivered to the tunnel's socket and decapsulated.
    assert!(counter(router, "delivered") > 0 && counter(vx, "rx_packets") > 0, "router: {router}, vx: {vx}");
    // No drop at the tunnel, and none for tunnel reasons at the router.
    let drops: Vec<&String> = vx
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| k.starts_with("drops.") && v.as_u64() != Some(0))
        .map(|(k, _)| k)
        .collect();
    assert!(drops.is_empty() && counter(vx, "refused") == 0, "vx drops: {vx}");
    for reason in ["local-delivery-unsupported", "local-fragment-unsupported", "no-route", "exceeds-mtu"] {
        assert_eq!(counter(router, &format!("drops.{reason}")), 0, "router: {router}");
    }
    // B's vx0 MAC (and nothing else) learned.
    let fdb = tables.iter().find(|t| t["name"] == "tunnel-fdb").unwrap_or_else(|| panic!("tables: {tables:?}"));
    assert_eq!(fdb["size"], 1, "{fdb}");

    let (code, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    drop(lab);
    assert_all_gone(&file);
}

#[test]
fn lab_status_sees_the_kernel_vxlan_and_lab_down_removes_it() {
    if !privileged("lab_status_sees_the_kernel_vxlan_and_lab_down_removes_it") {
        return;
    }
    let _fixed = fixed_names();
    let file = example();
    let lab = LabUp::up(&file);
    let out = superpacket(&["lab", "status", "--json"], &file);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let objects = v["objects"].as_array().unwrap();
    assert!(objects.iter().any(|o| o["object"] == "vxlan vx0 in sp-ovl-b" && o["state"] == "ok"), "{v}");
    // The device Linux made is the one declared.
    let b = NetNs::attach("sp-ovl-b").unwrap();
    if let Ok(shown) = Command::new("ip").args(["-n", "sp-ovl-b", "-d", "link", "show", "vx0"]).output() {
        let shown = text(&shown);
        for part in ["vxlan id 42", "remote 10.96.0.1", "local 10.96.0.2", "dev spo-u", "dstport 4789"] {
            assert!(shown.contains(part), "{part}: {shown}");
        }
    }
    // Deleted by hand: missing, exit 1.
    b.netlink().unwrap().del_link("vx0").unwrap();
    let out = superpacket(&["lab", "status"], &file);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).lines().any(|l| l.contains("vxlan vx0 in sp-ovl-b") && l.contains("missing")), "{}", text(&out));
    drop(b);
    drop(lab);
    assert_all_gone(&file);
}

fn assert_all_gone(file: &Path) {
    for n in NAMESPACES {
        assert!(!Path::new("/run/netns").join(n).exists(), "namespace {n} left behind");
    }
    let record = state_path(file);
    assert!(!record.exists(), "record {} left behind", record.display());
}
