//! `superpacket bench vhost-user` end to end with `--quick` (one run, half
//! a second per window): both backends moved traffic, every figure is
//! there, finite and positive, the superpackets circulating in the TSO
//! loop reached its receiving port whole, and the JSON has the suite's
//! shape. Speeds are not checked.
//! Also: why it is skipped without `dpdk-testpmd`, and usage errors.
//!
//! Needs root and `dpdk-testpmd` (scripts/test.sh installs Debian's
//! `dpdk`); without them the live test says so and is skipped
//! (`SUPERPACKET_SKIP_PRIVILEGED=1`, `SUPERPACKET_SKIP_DPDK=1`), or fails.

mod common;

use std::process::{Command, Output};

use common::privileged;
use serde_json::Value;
use superpacket_cli::bench::vhost_user::{TSO_FRAME_LEN, testpmd};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn bench(args: &[&str]) -> Output {
    Command::new(BIN).arg("bench").args(args).output().expect("run superpacket")
}

fn testpmd_available(test: &str) -> bool {
    if testpmd::installed() {
        return true;
    }
    if std::env::var("SUPERPACKET_SKIP_DPDK").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED {test}: dpdk-testpmd is not installed (SUPERPACKET_SKIP_DPDK=1)");
        return false;
    }
    panic!("{test}: dpdk-testpmd is not installed: `apt-get install dpdk` (scripts/test.sh does)");
}

#[test]
fn quick_run_moves_traffic_through_both_backends() {
    const TEST: &str = "quick_run_moves_traffic_through_both_backends";
    if !privileged(TEST) || !testpmd_available(TEST) {
        return;
    }
    let o = bench(&["vhost-user", "--quick", "--runs", "1", "--json"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stderr}\n{stdout}");
    let j: Value = serde_json::from_slice(&o.stdout).expect("one JSON document on stdout");
    assert!(j["suite"]["machine"].as_str().is_some_and(|m| m.contains("CPU")), "{}", j["suite"]);
    let s = &j["scenarios"][0];
    assert_eq!(s["scenario"], "vhost-user");
    assert_eq!(s["kind"], "live-processes");
    assert_eq!(s["runs"], 1, "{}", s["errors"]);
    assert_eq!(s["errors"].as_array().unwrap().len(), 0, "{}", s["errors"]);
    let figure = |name: &str| -> f64 {
        let r = s["results"].as_array().unwrap().iter().find(|r| r["name"] == name);
        let v = r.unwrap_or_else(|| panic!("no figure {name}: {s}"))["value"].as_f64();
        let v = v.unwrap_or_else(|| panic!("{name} is not a number: {s}"));
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        v
    };
    for backend in ["superpacket", "dpdk"] {
        for f in [
            "mpps_64b",
            "offered_mpps_64b",
            "cpu_ns_per_packet_64b",
            "cpu_s_per_gb_64b",
            "backend_cpu_load_64b",
            "gbps_tso",
            "offered_gbps_tso",
            "cpu_ns_per_packet_tso",
            "cpu_s_per_gb_tso",
            "backend_cpu_load_tso",
            "mpps_loop",
            "cpu_ns_per_packet_loop",
            "backend_cpu_load_loop",
        ] {
            figure(&format!("{f}_{backend}"));
        }
        // The TSO loop's receiving port took the superpackets whole: its
        // mean frame is one superpacket's (segments would bring it toward
        // 1.5 KB, and a loop that lost its seed would have stopped the
        // run). Within 0.1%: one 5-run measurement of the two-frontend row
        // once saw a mean 14 bytes short, not explained.
        let frame = figure(&format!("frame_bytes_tso_{backend}"));
        let whole = TSO_FRAME_LEN as f64;
        assert!(frame <= whole && frame > whole * 0.999, "{backend}: mean frame {frame}, a superpacket is {whole}");
    }
    figure("mpps_64b_ratio");
    figure("gbps_tso_ratio");
    figure("mpps_loop_ratio");
    // The loop again through superpacket's cross-connect (DPDK's is io
    // forwarding already: no such rows).
    for f in
        ["mpps_loop_xc_superpacket", "cpu_ns_per_packet_loop_xc_superpacket", "backend_cpu_load_loop_xc_superpacket"]
    {
        figure(f);
    }
    figure("mpps_loop_xc_ratio");
    let results = s["results"].as_array().unwrap();
    assert!(!results.iter().any(|r| r["name"].as_str().is_some_and(|n| n.ends_with("_xc_dpdk"))), "{s}");
    // Six pairs, untested with one run; four key figures with the targets.
    let c = s["comparisons"].as_array().unwrap();
    assert_eq!(c.len(), 6);
    assert!(c.iter().all(|c| c["verdict"].is_null() && c["ratio"].as_f64().is_some_and(|r| r > 0.0)), "{c:?}");
    let k = s["key_figures"].as_array().unwrap();
    assert_eq!(k.iter().map(|k| k["original_ratio"].as_f64().unwrap()).collect::<Vec<_>>(), vec![0.8, 0.8, 0.8, 2.0]);
}

/// Without `dpdk-testpmd` on PATH the scenario is skipped with the reason
/// on stderr (also with `--json`) and the command fails: nothing measured.
#[test]
fn says_why_it_is_skipped_without_testpmd() {
    const TEST: &str = "says_why_it_is_skipped_without_testpmd";
    if !privileged(TEST) {
        return;
    }
    let o = Command::new(BIN)
        .args(["bench", "vhost-user", "--quick", "--runs", "1", "--json"])
        .env("PATH", "/nonexistent")
        .output()
        .expect("run superpacket");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("vhost-user skipped: dpdk-testpmd is not installed (apt-get install dpdk)"), "{stderr}");
    let j: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(j["scenarios"].as_array().unwrap().len(), 0);
    assert_eq!(j["skipped"][0]["scenario"], "vhost-user");
}

#[test]
fn usage_errors_exit_2() {
    for args in [&["vhost-user", "--runs", "0"][..], &["vhost-user", "--live-seconds", "0"], &["vhost-user", "--bogus"]]
    {
        let o = bench(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}
