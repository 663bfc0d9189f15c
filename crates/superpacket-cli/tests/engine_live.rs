//! The live data path end to end, with the real kernel on both sides:
//! `superpacket run` on every `examples/live-*.toml` in a lab of throwaway
//! namespaces ([`superpacket_lab::lab`]), kernel TCP (IPv4 and IPv6) and
//! UDP GSO through it with every byte checked, offload negotiation with and
//! without USO, a trunk port that disappears and comes back, clean shutdown,
//! and the live `superpacket demo`.
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). Only namespaces, TAPs and
//! veths the test creates are touched; all are deleted, also on failure.

mod common;

use common::engine::{Running, counter};
use common::{privileged, quiet_ns};

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use superpacket_lab::lab::Lab;
use superpacket_lab::streams::{self, Limit, TcpConfig, UdpConfig};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).unwrap()
}

/// `ip -n NS -d link show DEV`: the link's details, `None` if it does not
/// exist. (`ip -n` rather than `ip netns exec`, whose mount set-up can fail
/// spuriously while other tests create namespaces.)
fn link_details(ns: &superpacket_engine::io::NetNs, dev: &str) -> Option<String> {
    let out = Command::new("ip").args(["-n", ns.name(), "-d", "link", "show", "dev", dev]).output().unwrap();
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn tcp(lab: &Lab, v6: bool, secs: f64) -> streams::TcpTransfer {
    let cfg = TcpConfig { limit: Limit::Duration(Duration::from_secs_f64(secs)), ..TcpConfig::default() };
    streams::tcp_transfer(Some(&lab.b), Some(&lab.a), SocketAddr::new(Lab::host_b(v6), 5201), &cfg).unwrap()
}

fn udp(lab: &Lab, secs: f64) -> streams::UdpTransfer {
    let cfg = UdpConfig { limit: Limit::Duration(Duration::from_secs_f64(secs)), ..UdpConfig::default() };
    streams::udp_transfer(Some(&lab.b), Some(&lab.a), SocketAddr::new(Lab::host_b(false), 5202), &cfg).unwrap()
}

#[test]
fn every_live_example_carries_tcp_v4_v6_and_udp_gso_intact() {
    if !privileged("every_live_example_carries_tcp_v4_v6_and_udp_gso_intact") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        // vhost-user examples need a frontend on the other side of the link: tests/vhost_user_frontend.rs drives them;
        // tun examples need their kernel side configured once the engine runs: tests/tun_router.rs;
        // the VXLAN overlay needs its own lab (a kernel VXLAN end): tests/overlay_live.rs.
        .filter(|n| {
            n.starts_with("live-")
                && n.ends_with(".toml")
                && !n.starts_with("live-vhost-user-")
                && !n.starts_with("live-tun-")
                && !n.starts_with("live-vxlan-")
        })
        .collect();
    names.sort();
    assert!(names.len() >= 3, "{names:?}");
    for name in names {
        let lab = Lab::create("sp-e2e", true).unwrap();
        let engine = Running::start(&lab.localize(&example(&name)));
        for v6 in [false, true] {
            let t = tcp(&lab, v6, 1.0);
            assert!(t.intact(), "{name} TCP v6={v6}: {t:?}");
            assert!(
                t.receiver.bytes > 10_000_000,
                "{name} TCP v6={v6}: only {} bytes; engine: {}",
                t.receiver.bytes,
                engine.stats()
            );
        }
        let u = udp(&lab, 1.0);
        assert!(u.no_corruption() && u.receiver.counts.unique > 1000, "{name} UDP: {u:?}");
        let s = engine.stats();
        // Superpackets reached B's TAP whole (GRO'd again on the trunk in vlan-gro).
        assert!(counter(&s, "b", "tx_superpackets") > 0, "{name}: {s}");
        assert_eq!(counter(&s, "b", "segments_produced"), 0, "{name}: nothing cut at B's TAP");
        if name.contains("vlan-gro") {
            assert!(counter(&s, "t2", "gro.merged") > 1000, "{name}: GRO on the trunk: {s}");
            assert_eq!(counter(&s, "a", "rx_superpackets"), 0, "{name}: TAP a takes no offloads");
        }
        if name.contains("qinq") {
            assert!(counter(&s, "t2", "rx_superpackets") > 0, "{name}: QinQ superpackets crossed the veth: {s}");
        }
        let (code, err) = engine.stop();
        assert_eq!(code, Some(0), "{name}: {err}");
        assert!(err.contains("stopping (SIGTERM)"), "{err}");
    }
}

#[test]
fn uso_negotiation_decides_what_the_engine_receives() {
    if !privileged("uso_negotiation_decides_what_the_engine_receives") {
        return;
    }
    let lab = Lab::create("sp-e2e-uso", false).unwrap();
    let base = lab.localize(&example("live-router.toml"));
    for (offloads, uso) in [(r#"["csum", "tso4", "tso6", "uso"]"#, true), (r#"["csum", "tso4", "tso6"]"#, false)] {
        let ns = lab.a.name().to_string();
        let topo =
            base.replace(&format!("netns = \"{ns}\" }}"), &format!("netns = \"{ns}\", offloads = {offloads} }}"));
        assert_ne!(topo, base);
        let engine = Running::start(&topo);
        let u = udp(&lab, 0.5);
        assert!(u.no_corruption() && u.receiver.counts.unique > 100, "uso={uso}: {u:?}");
        let s = engine.stats();
        let supers = counter(&s, "a", "rx_superpackets");
        if uso {
            assert!(supers > 0, "with USO the TAP hands over UDP_L4 superpackets: {s}");
        } else {
            assert_eq!(supers, 0, "without USO the kernel segments before the TAP: {s}");
            assert!(counter(&s, "a", "rx_packets") > 1000);
        }
        assert_eq!(engine.stop().0, Some(0));
    }
}

#[test]
fn a_trunk_port_that_disappears_comes_back_by_itself() {
    if !privileged("a_trunk_port_that_disappears_comes_back_by_itself") {
        return;
    }
    let mut lab = Lab::create("sp-e2e-gone", false).unwrap();
    let engine = Running::start(&lab.localize(&example("live-vlan-gro.toml")));
    assert!(tcp(&lab, false, 0.5).intact());
    lab.remove_trunk();
    let t0 = Instant::now();
    loop {
        let s = engine.stats();
        let down = s["devices"].as_array().unwrap().iter().any(|d| d["name"] == "t1" && d["carrier"] == false);
        if down {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "t1 never went down: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    lab.restore_trunk().unwrap();
    let t0 = Instant::now();
    loop {
        let s = engine.stats();
        let up = s["devices"].as_array().unwrap().iter().all(|d| d["carrier"] == true);
        if up {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the trunk never came back: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = tcp(&lab, false, 0.5);
    assert!(t.intact() && t.receiver.bytes > 0, "{t:?}");
    let (code, err) = engine.stop();
    assert_eq!(code, Some(0));
    assert!(err.contains("device gone") && err.contains("device back"), "{err}");
}

#[test]
fn shutdown_removes_created_taps_and_leaves_the_lab_as_it_was() {
    if !privileged("shutdown_removes_created_taps_and_leaves_the_lab_as_it_was") {
        return;
    }
    let lab = Lab::create("sp-e2e-stop", false).unwrap();
    // A TAP the engine creates itself, next to the lab's persistent one.
    let topo = format!(
        "{}\n[[device]]\nname = \"own\"\nkind = \"port\"\ndriver = {{ kind = \"tap\", name = \"sp-own0\", netns = \"{}\" }}\n",
        lab.localize(&example("live-router.toml")),
        lab.a.name()
    );
    // Effective features (ethtool's "[requested on]" notes the wanted set, which TUNSETOFFLOAD leaves behind).
    let effective = |text: String| text.replace(" [requested on]", "");
    let before = effective(lab.a.offloads("spd-a").unwrap());
    let engine = Running::start(&topo);
    assert!(link_details(&lab.a, "sp-own0").is_some());
    let (code, _) = engine.stop();
    assert_eq!(code, Some(0));
    assert!(link_details(&lab.a, "sp-own0").is_none(), "created TAP removed");
    assert!(link_details(&lab.a, "spd-a").is_some(), "the lab's TAP stays");
    assert_eq!(effective(lab.a.offloads("spd-a").unwrap()), before, "offloads of an attached TAP are restored");
}

#[test]
fn live_demo_reports_every_figure_and_removes_its_lab() {
    if !privileged("live_demo_reports_every_figure_and_removes_its_lab") {
        return;
    }
    // Nothing on PATH: the live demo needs no `ip`, `ethtool` or shell (issue 23).
    let out = Command::new(BIN)
        .env_clear()
        .env("PATH", "/nonexistent")
        .args(["demo", "--json", "--seconds", "0.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scenario"], "demo");
    let get = |name: &str| {
        v["results"].as_array().unwrap().iter().find(|r| r["name"] == name).and_then(|r| r["value"].as_f64())
    };
    for key in [
        "tcp_passthrough_gbps",
        "tcp_perframe_gbps",
        "tcp_legacy_gbps",
        "tcp_relay_gbps",
        "udp_passthrough_gbps",
        "udp_perframe_gbps",
        "tcp_mtubatched_gbps",
        "udp_mtubatched_gbps",
    ] {
        assert!(get(key).is_some_and(|g| g > 0.0), "{key}: {v}");
    }
    assert_eq!(get("integrity_ok"), Some(1.0));
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&netns.stdout);
    // The demo's namespaces carry its PID, which is gone now: none may remain.
    let leftovers: Vec<&str> = list
        .lines()
        .filter(|l| l.starts_with("sp-demo-"))
        .filter(|l| {
            let pid = l.split('-').nth(3).and_then(|p| p.parse::<u32>().ok());
            pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists())
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn two_workers_share_multi_queue_taps() {
    if !privileged("two_workers_share_multi_queue_taps") {
        return;
    }
    let (a, b) = (quiet_ns("sp-e2e-mq-a"), quiet_ns("sp-e2e-mq-b"));
    // TAPs the engine creates itself (every worker opens one queue of each),
    // bridged: one subnet, so no per-worker router state is involved.
    let topo = format!(
        "[[device]]\nname = \"a\"\nkind = \"port\"\ndriver = {{ kind = \"tap\", name = \"spq-a\", netns = \"{}\" }}\n\
         [[device]]\nname = \"b\"\nkind = \"port\"\ndriver = {{ kind = \"tap\", name = \"spq-b\", netns = \"{}\" }}\n\
         [[device]]\nname = \"br0\"\nkind = \"bridge\"\nports = [\"a\", \"b\"]\n",
        a.name(),
        b.name()
    );
    let engine = Running::start_with(&topo, &["--workers", "2"]);
    for (ns, tap, host) in [(&a, "spq-a", "10.81.0.2/24"), (&b, "spq-b", "10.81.0.3/24")] {
        let detail = link_details(ns, tap).expect("the engine created the TAP");
        assert!(detail.contains("multi_queue"), "{detail}");
        ns.add_addr(tap, host).unwrap();
    }
    let cfg = TcpConfig { limit: Limit::Duration(Duration::from_secs_f64(0.5)), ..TcpConfig::default() };
    for port in [5301, 5302, 5303] {
        let t = streams::tcp_transfer(Some(&b), Some(&a), SocketAddr::new("10.81.0.3".parse().unwrap(), port), &cfg)
            .unwrap();
        assert!(t.intact() && t.receiver.bytes > 1_000_000, "{t:?}");
    }
    let s = engine.stats();
    assert_eq!(s["workers"], 2);
    assert!(counter(&s, "b", "tx_superpackets") > 0, "{s}");
    assert_eq!(engine.stop().0, Some(0));
    assert!(link_details(&a, "spq-a").is_none(), "the engine's TAP is gone");
}
