//! `superpacket bench peers --quick --json` end to end: exit 0 (equal work
//! across engines), one JSON document in the shared bench shape with the
//! issue's keys, finite and positive. Speeds are not checked.

use std::process::Command;

use serde_json::Value;

#[test]
fn peers_quick_json_has_the_headline_keys() {
    let o = Command::new(env!("CARGO_BIN_EXE_superpacket"))
        .args(["bench", "peers", "--quick", "--json"])
        .output()
        .expect("run superpacket");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(j["scenario"], "peers");
    let results = j["results"].as_array().expect("results");
    let get =
        |name: &str| results.iter().find(|r| r["name"] == name).and_then(|r| r["value"].as_f64()).unwrap_or(f64::NAN);
    for key in superpacket_cli::bench::peers::HEADLINE_KEYS {
        let v = get(key);
        assert!(v.is_finite() && v > 0.0, "{key} = {v}");
    }
    assert_eq!(get("equal_work_gro_tcp4_64flows"), 1.0);
    assert_eq!(get("equal_work_gso_tcp4_64k"), 1.0);
}

#[test]
fn a_batch_above_dpdk_limit_is_a_usage_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_superpacket"))
        .args(["bench", "peers", "--batch", "129"])
        .output()
        .expect("run superpacket");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("129"));
}

/// `bench peers --quick [--json]` with `env` (cleared, then these) added.
fn peers_with_env(json: bool, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_superpacket"));
    cmd.args(["bench", "peers", "--quick"]).env_clear().envs(env.iter().copied());
    if json {
        cmd.arg("--json");
    }
    let o = cmd.output().expect("run superpacket");
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A machine without pkg-config (nothing on PATH), the build-time peer
/// hidden: the DPDK peer is missing, and that is said in words on the
/// terminal and as `"missing"` in the JSON, for the peer and for every
/// figure left null.
#[test]
fn a_missing_dpdk_peer_is_said_in_words_and_in_json() {
    let cache = tempfile::tempdir().expect("tempdir");
    let cache = cache.path().to_str().expect("utf-8 path");
    let env = [("PATH", "/nonexistent"), ("SUPERPACKET_DPDK_PEER", "build"), ("SUPERPACKET_CACHE_DIR", cache)];
    let (code, stdout, stderr) = peers_with_env(false, &env);
    assert_eq!(code, Some(0), "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("DPDK peer: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.starts_with("DPDK peer: missing (libdpdk not found"), "{line}");
    assert!(line.contains("apt-get install dpdk-dev"), "{line}");
    assert!(stdout.contains("target gro_ratio_dpdk >= 1.2: not measured"), "{stdout}");

    let (code, stdout, stderr) = peers_with_env(true, &env);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("DPDK peer missing (libdpdk not found"), "{stderr}");
    let j: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let why = j["peers"]["dpdk"]["missing"].as_str().expect("peers.dpdk.missing");
    assert!(why.starts_with("libdpdk not found"), "{why}");
    let results = j["results"].as_array().expect("results");
    for r in results {
        if r["value"].is_null() {
            let m = r["missing"].as_str().unwrap_or_else(|| panic!("null without a reason: {r}"));
            // tun-rs has no tunnel offload: its VXLAN cells are n/a.
            assert!(m.contains("libdpdk not found") || m == superpacket_cli::bench::peers::TUNRS_NO_TUNNEL, "{r}");
        }
    }
    let dpdk = results.iter().find(|r| r["name"] == "gro_dpdk_mpps").expect("gro_dpdk_mpps is still there");
    assert!(dpdk["value"].is_null() && dpdk["missing"].is_string(), "{dpdk}");
    // The other engines ran.
    let sp = results.iter().find(|r| r["name"] == "gro_superpacket_mpps").expect("gro_superpacket_mpps");
    assert!(sp["value"].as_f64().is_some_and(|v| v > 0.0) && sp.get("missing").is_none(), "{sp}");
}

/// libdpdk installed (scripts/test.sh installs dpdk-dev) but the build-time
/// peer hidden: `bench peers` compiles the peer into the cache directory
/// and runs it; a second run reuses it.
#[test]
fn the_dpdk_peer_is_built_at_run_time_when_the_build_time_one_is_absent() {
    let cache = tempfile::tempdir().expect("tempdir");
    let dir = cache.path().to_str().expect("utf-8 path");
    let path = std::env::var("PATH").unwrap_or_default();
    let env = [("PATH", path.as_str()), ("SUPERPACKET_DPDK_PEER", "build"), ("SUPERPACKET_CACHE_DIR", dir)];
    let (code, stdout, stderr) = peers_with_env(true, &env);
    assert_eq!(code, Some(0), "{stderr}");
    let j: Value = serde_json::from_str(&stdout).expect("one JSON document");
    let peer = &j["peers"]["dpdk"];
    assert_eq!(peer["origin"], "built now", "{peer} (scripts/test.sh installs dpdk-dev and pkg-config)");
    let exe = std::path::PathBuf::from(peer["path"].as_str().expect("path"));
    assert!(exe.starts_with(cache.path()) && exe.is_file(), "{}", exe.display());
    let results = j["results"].as_array().expect("results");
    for key in superpacket_cli::bench::peers::HEADLINE_KEYS {
        let v = results.iter().find(|r| r["name"] == key).and_then(|r| r["value"].as_f64()).unwrap_or(f64::NAN);
        assert!(v.is_finite() && v > 0.0, "{key} = {v}");
    }
    // Nothing missing but tun-rs's VXLAN cells (it has no tunnel offload).
    assert!(
        results.iter().all(|r| r.get("missing").is_none_or(|m| m == superpacket_cli::bench::peers::TUNRS_NO_TUNNEL)),
        "{stdout}"
    );

    let (code, stdout, stderr) = peers_with_env(false, &env);
    assert_eq!(code, Some(0), "{stderr}");
    let line = stdout.lines().find(|l| l.starts_with("DPDK peer: ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains(&exe.display().to_string()) && line.contains("cached build"), "{line}");
}
