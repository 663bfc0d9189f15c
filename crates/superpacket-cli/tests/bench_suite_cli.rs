//! `superpacket bench` (the suite) end to end, on small sizes: every
//! scenario of the registry runs twice and produces its figures, every A/B
//! pair is tested, the JSON parses, and the report directory holds the
//! markdown and every chart. Speeds are not checked (only that figures
//! exist and are finite and positive). The live scenario is not run here.

use std::process::{Command, Output};

use serde_json::Value;
use superpacket_cli::bench::scenarios::SCENARIOS;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn bench(args: &[&str]) -> Output {
    Command::new(BIN).arg("bench").args(args).output().expect("run superpacket")
}

fn figure<'a>(scenario: &'a Value, name: &str) -> &'a Value {
    scenario["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{}: no figure {name}", scenario["scenario"]))
}

fn positive(v: &Value, what: &str) -> f64 {
    let x = v.as_f64().unwrap_or_else(|| panic!("{what}: {v} is not a number"));
    assert!(x.is_finite() && x > 0.0, "{what} = {x}");
    x
}

#[test]
fn whole_suite_twice_on_small_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let o = bench(&["--runs", "2", "--quick", "--json", "--report", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).expect("one JSON document on stdout");
    assert_eq!(j["suite"]["runs"], 2);
    assert_eq!(j["suite"]["quick"], true);
    assert_eq!(j["suite"]["confidence"], 95.0);
    assert_eq!(j["suite"]["method"], "student");

    let defaults: Vec<_> = SCENARIOS.iter().filter(|s| s.default).collect();
    let ran = j["scenarios"].as_array().unwrap();
    assert_eq!(ran.len(), defaults.len());
    for (s, sj) in defaults.iter().zip(ran) {
        assert_eq!(sj["scenario"], s.name);
        assert_eq!(sj["runs"], 2, "{}", s.name);
        assert_eq!(sj["errors"].as_array().unwrap().len(), 0, "{}: {}", s.name, sj["errors"]);
        // Every figure of every run, with its statistics.
        for r in sj["results"].as_array().unwrap() {
            let what = format!("{} {}", s.name, r["name"]);
            assert_eq!(r["samples"].as_array().unwrap().len(), 2, "{what}");
            if r["unit"] != "bool" && r["unit"] != "fragments" {
                positive(&r["value"], &what);
                assert_eq!(r["stats"]["n"], 2, "{what}");
                let (min, max) = (r["stats"]["min"].as_f64().unwrap(), r["stats"]["max"].as_f64().unwrap());
                let avg = r["stats"]["avg"].as_f64().unwrap();
                assert!(min <= avg && avg <= max && r["stats"]["stddev"].is_number(), "{what}: {}", r["stats"]);
            }
        }
        // Every pair tested on figures the scenario produced.
        let comparisons = sj["comparisons"].as_array().unwrap();
        assert_eq!(comparisons.len(), s.pairs.len(), "{}", s.name);
        for (p, c) in s.pairs.iter().zip(comparisons) {
            positive(&figure(sj, p.baseline)["value"], p.baseline);
            positive(&figure(sj, p.candidate)["value"], p.candidate);
            assert!(c["verdict"] == "difference" || c["verdict"] == "no_difference", "{}: {c}", p.label);
            let text = c["text"].as_str().unwrap();
            assert!(text.ends_with("at 95.0% confidence"), "{text}");
            assert!(c["difference"].is_number() && c["difference_ci"].is_number(), "{c}");
            assert_eq!(c["dof"], 2.0);
            positive(&c["ratio"], p.label);
        }
        for (k, kj) in s.key.iter().zip(sj["key_figures"].as_array().unwrap()) {
            assert_eq!(kj["name"], k.label);
            positive(&kj["ratio"], k.label);
        }
    }
    assert!(j["skipped"].as_array().unwrap().iter().any(|k| k["scenario"] == "live"));

    // The report: markdown naming every scenario and chart, and the charts.
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("superpacket bench --runs 2 --quick --json --report"), "command line missing");
    for s in &defaults {
        assert!(md.contains(&format!("] {} — ", s.name)), "{} missing from the report", s.name);
        for text in [s.models, s.real, s.simulated, s.original] {
            assert!(md.contains(text), "{}: description missing", s.name);
        }
        for p in s.plots {
            assert!(md.contains(&format!("]({})", p.file)), "{} not linked", p.file);
            let svg = std::fs::read_to_string(report.join(p.file)).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains(p.title), "{}", p.file);
        }
    }
    let svgs = std::fs::read_dir(&report)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "svg"));
    assert_eq!(svgs.count(), defaults.iter().map(|s| s.plots.len()).sum::<usize>());
}

#[test]
fn named_scenarios_as_text() {
    let o = bench(&["--runs", "2", "--quick", "--confidence", "99", "--welch", "1", "qinq-tso"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("[1] vlan-nat") && out.contains("[5] qinq-tso") && !out.contains("[3] lro"), "{out}");
    assert!(out.contains("Welch's t test at 99.0% confidence"), "{out}");
    assert!(out.contains("at 99.0% confidence"));
    assert!(out.contains("key figure: CPU per GB, legacy / passthrough"), "{out}");
}

#[test]
fn micro_benchmarks_and_usage_errors() {
    // `bench <micro-benchmark>` is unchanged: one run, the shared shape.
    let o = bench(&["gro", "--quick", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["scenario"], "gro");
    assert!(j["results"].as_array().unwrap().iter().all(|r| r["name"].is_string() && r["unit"].is_string()));
    assert!(j.get("suite").is_none());
    // Suite options do not apply to a micro-benchmark; unknown names and levels are usage errors.
    for args in [&["gro", "--runs", "2"][..], &["nope"], &["--confidence", "97"], &["--runs", "0"]] {
        let o = bench(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    let o = bench(&["nope"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scenario 'nope'"));
}
