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
