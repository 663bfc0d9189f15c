//! `superpacket bench [SCENARIO...]`: the benchmark suite with ministat's
//! statistics (`crate::bench::suite`), as text, `--json`, and a markdown
//! report with SVG charts (`--report DIR`).
//!
//! Scenarios are the registry's (`crate::bench::scenarios::SCENARIOS`,
//! one per reproduced result) plus [`LIVE`]: the live demo's figures, real
//! kernel TCP and UDP through the engine, run only when named and only as
//! root (it runs `superpacket demo --json` as a child process, about 30 s
//! per run).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;

use super::{CliError, EXIT_OK, EXIT_PROBLEMS, progress};
use crate::bench::BenchReport;
use crate::bench::live_peers::{self, LIVE_PEERS};
use crate::bench::scenarios::SCENARIOS;
use crate::bench::stats::{Confidence, CriticalValues, Method, TestOptions};
use crate::bench::suite::{
    Better, KeyFigure, Kind, Pair, PlotSpec, RunOptions, Scenario, Skipped, SuiteOptions, run_suite,
};
use crate::bench::suite_report::write_report;
use crate::bench::vhost_user::VHOST_USER;

/// Options of the suite (`superpacket bench` without a micro-benchmark).
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Scenarios to run, by name or result number (default: every result;
    /// `live`, real kernel traffic as root, `vhost-user`, superpacket's
    /// vhost-user port against DPDK's with testpmd frontends as root, and
    /// `live-peers`, kernel traffic through superpacket, Open vSwitch and
    /// the kernel as root, only when named); `--list` shows them.
    #[arg(value_name = "SCENARIO")]
    pub scenarios: Vec<String>,
    /// List the suite's scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Runs of every configuration (N of the statistics).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Small sizes and short measurements (tests, smoke runs): figures are indicative only.
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object: the shared bench shape per scenario, with the statistics.
    #[arg(long)]
    pub json: bool,
    /// Write a markdown report (report.md) and SVG charts into DIR.
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
    /// Confidence level of the t test: 80, 90, 95, 98, 99 or 99.5.
    #[arg(long, default_value = "95", value_parser = parse_confidence)]
    pub confidence: Confidence,
    /// Welch's t test (unequal variances) instead of Student's with the pooled standard deviation.
    #[arg(long)]
    pub welch: bool,
    /// Critical values from FreeBSD ministat's table verbatim (see `superpacket ministat --help`).
    #[arg(long)]
    pub ministat_table: bool,
    /// Seconds per transfer of the live scenarios (`live`, `live-peers`), and
    /// per counted window of each workload of `vhost-user` (--quick: 1, 0.5 and 0.5).
    #[arg(long, default_value_t = 3.0, value_name = "S")]
    pub live_seconds: f64,
}

/// Parses a confidence level for clap.
pub fn parse_confidence(s: &str) -> Result<Confidence, String> {
    s.parse()
}

/// The live demo as a suite scenario.
pub static LIVE: Scenario = Scenario {
    name: "live",
    result: None,
    title: "Live data path: kernel TCP and UDP through the engine",
    kind: Kind::LiveKernel,
    default: false,
    original: "Results 1 and 5 on real traffic: superpackets passed through VLAN/QinQ/bond devices and a NAT \
               router instead of being segmented in the middle (20 Mbps -> 1 Gbps; 11.3% -> 4.2% system CPU).",
    models: "The live demo (`superpacket demo`, examples/live-qinq-nat.toml): kernel TCP and UDP_SEGMENT/UDP_GRO \
             streams between two network namespaces through TAPs, a bridge, 802.1Q on 802.1ad on a bond over a \
             veth trunk (AF_PACKET) and a VLAN NAT router, in four configurations: relay (no engine, the \
             reference), passthrough, per-frame (TAPs without offloads) and legacy (segmentation in the middle).",
    real: "Everything: the kernel's TCP and UDP stacks, TAPs, veth, AF_PACKET rings and the engine's threads; \
           every stream is hashed at both ends (integrity_ok).",
    simulated: "Nothing. The kernel senders and receivers share the machine's CPUs with the engine, so the \
                figures are noisy; the UDP sender is unpaced (goodput at the receiver is the figure).",
    pairs: &[
        Pair {
            label: "TCP throughput, passthrough vs legacy",
            baseline: "tcp_legacy_gbps",
            candidate: "tcp_passthrough_gbps",
            better: Better::Higher,
        },
        Pair {
            label: "TCP throughput, passthrough vs per-frame",
            baseline: "tcp_perframe_gbps",
            candidate: "tcp_passthrough_gbps",
            better: Better::Higher,
        },
        Pair {
            label: "UDP goodput, passthrough vs legacy",
            baseline: "udp_legacy_gbps",
            candidate: "udp_passthrough_gbps",
            better: Better::Higher,
        },
        Pair {
            label: "UDP goodput, passthrough vs per-frame",
            baseline: "udp_perframe_gbps",
            candidate: "udp_passthrough_gbps",
            better: Better::Higher,
        },
        Pair {
            label: "UDP goodput, passthrough vs MTU frames with batched I/O",
            baseline: "udp_mtubatched_gbps",
            candidate: "udp_passthrough_gbps",
            better: Better::Higher,
        },
        Pair {
            label: "engine CPU per GB, passthrough vs legacy",
            baseline: "legacy_cpu_s_per_gb",
            candidate: "passthrough_cpu_s_per_gb",
            better: Better::Lower,
        },
    ],
    key: &[
        KeyFigure {
            label: "UDP goodput through the VLAN NAT router, passthrough / legacy",
            baseline: "udp_legacy_gbps",
            candidate: "udp_passthrough_gbps",
            better: Better::Higher,
            original: "20 Mbps -> 1 Gbps (result 1)",
            original_ratio: Some(50.0),
        },
        KeyFigure {
            label: "engine CPU per GB, legacy / passthrough",
            baseline: "legacy_cpu_s_per_gb",
            candidate: "passthrough_cpu_s_per_gb",
            better: Better::Lower,
            original: "11.3% -> 4.2% system CPU (result 5)",
            original_ratio: Some(11.3 / 4.2),
        },
    ],
    plots: &[
        PlotSpec {
            file: "live-gbps.svg",
            title: "Live data path: kernel TCP and UDP throughput (real traffic)",
            y_label: "Gbit/s",
            log: false,
            series: &["relay", "passthrough", "per-frame", "MTU batched", "legacy"],
            groups: &[
                (
                    "TCP",
                    &[
                        "tcp_relay_gbps",
                        "tcp_passthrough_gbps",
                        "tcp_perframe_gbps",
                        "tcp_mtubatched_gbps",
                        "tcp_legacy_gbps",
                    ],
                ),
                (
                    "UDP",
                    &[
                        "udp_relay_gbps",
                        "udp_passthrough_gbps",
                        "udp_perframe_gbps",
                        "udp_mtubatched_gbps",
                        "udp_legacy_gbps",
                    ],
                ),
            ],
        },
        PlotSpec {
            file: "live-cpu.svg",
            title: "Live data path: engine CPU per GB (real traffic)",
            y_label: "CPU s/GB",
            log: false,
            series: &["relay", "passthrough", "per-frame", "MTU batched", "legacy"],
            groups: &[(
                "TCP + UDP",
                &[
                    "relay_cpu_s_per_gb",
                    "passthrough_cpu_s_per_gb",
                    "perframe_cpu_s_per_gb",
                    "mtubatched_cpu_s_per_gb",
                    "legacy_cpu_s_per_gb",
                ],
            )],
        },
    ],
    available: live_available,
    run: run_live,
};

fn live_available() -> Result<(), String> {
    superpacket_engine::io::privileges_available().map_err(|why| format!("real kernel traffic needs root ({why})"))
}

/// One run of the live demo: `superpacket demo --json` in a child process
/// (its lab of namespaces lives and dies with it).
fn run_live(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
    let seconds = if o.quick { 1.0 } else { o.live_seconds };
    on_step(&format!("kernel TCP and UDP, 4 configurations x {seconds} s"), 0, 1);
    let exe = std::env::current_exe().map_err(|e| format!("finding superpacket: {e}"))?;
    let out = Command::new(exe)
        .args(["demo", "--json", "--seconds", &seconds.to_string()])
        .output()
        .map_err(|e| format!("running superpacket demo: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout.lines().rev().find(|l| l.trim_start().starts_with('{'));
    match (out.status.code(), json) {
        (Some(0 | 1), Some(line)) => parse_report(line),
        _ => {
            let err = String::from_utf8_lossy(&out.stderr);
            Err(format!("superpacket demo failed ({}): {}", out.status, err.trim().lines().last().unwrap_or("")))
        }
    }
}

/// A report in the shared JSON shape (`null` values become NaN).
pub fn parse_report(json: &str) -> Result<BenchReport, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("bad report JSON: {e}"))?;
    let mut r = BenchReport::new(v["scenario"].as_str().unwrap_or("unknown"));
    for x in v["results"].as_array().ok_or("report JSON without results")? {
        let name = x["name"].as_str().ok_or("a result without a name")?;
        r.push(name, x["value"].as_f64().unwrap_or(f64::NAN), x["unit"].as_str().unwrap_or(""));
    }
    Ok(r)
}

/// Every scenario the suite knows: the registry, then the live demo, the
/// vhost-user backends and the live peers (all three run only when named).
pub fn all_scenarios() -> Vec<Scenario> {
    SCENARIOS.iter().copied().chain([LIVE, VHOST_USER, LIVE_PEERS]).collect()
}

/// The scenarios named (by name or result number), in registry order;
/// with none named, the default ones.
///
/// # Errors
/// An unknown name.
pub fn select(names: &[String]) -> Result<Vec<Scenario>, CliError> {
    let all = all_scenarios();
    if names.is_empty() {
        return Ok(all.into_iter().filter(|s| s.default).collect());
    }
    let mut wanted = Vec::new();
    for n in names {
        let hit = all.iter().find(|s| s.name == n || s.result.is_some_and(|r| r.to_string() == *n));
        match hit {
            Some(s) => wanted.push(s.name),
            None => {
                let known: Vec<String> =
                    all.iter().map(|s| s.result.map_or(s.name.to_string(), |r| format!("{} ({r})", s.name))).collect();
                return Err(CliError(format!(
                    "unknown scenario '{n}'; suite scenarios: {}; micro-benchmarks: csum, gro, gso, defrag-coalesce, seed-vlan-nat, seed-qinq-tso, vhost-tx, peers",
                    known.join(", ")
                )));
            }
        }
    }
    Ok(all.into_iter().filter(|s| wanted.contains(&s.name)).collect())
}

/// One line per scenario: result number, name, default or not, title.
pub fn list() -> String {
    let mut out = String::new();
    for s in all_scenarios() {
        out += &format!(
            "{:<4} {:<10} {:<8} {}{}\n",
            s.result.map_or("-".to_string(), |r| r.to_string()),
            s.name,
            if s.default { "default" } else { "named" },
            s.title,
            match s.kind {
                Kind::LiveKernel => " (real kernel traffic, root)",
                Kind::LiveProcesses => " (real processes: DPDK testpmd, root)",
                Kind::Model => "",
            }
        );
    }
    out
}

/// Runs the suite.
pub fn run(args: &SuiteArgs) -> Result<u8, CliError> {
    if !(0.2..=600.0).contains(&args.live_seconds) {
        return Err(CliError(format!("--live-seconds {} is outside 0.2..=600", args.live_seconds)));
    }
    if args.list {
        print!("{}", list());
        return Ok(EXIT_OK);
    }
    let scenarios = select(&args.scenarios)?;
    if scenarios.iter().any(|s| s.name == LIVE_PEERS.name) {
        // Before the progress bar's thread: Ctrl-C must reach live-peers' cleanup, not kill the process.
        live_peers::catch_signals().map_err(CliError)?;
    }
    let opts = SuiteOptions {
        runs: args.runs as usize,
        quick: args.quick,
        test: TestOptions {
            confidence: args.confidence,
            method: if args.welch { Method::Welch } else { Method::Student },
            critical: if args.ministat_table { CriticalValues::MinistatTable } else { CriticalValues::Exact },
        },
        live_seconds: args.live_seconds,
    };
    let bar = progress::steps_bar(!args.json, "bench");
    let mut result = run_suite(&scenarios, &opts, &mut |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(format!("run {}/{} {}: {}", p.run, p.runs, p.scenario, p.step));
    });
    bar.finish_and_clear();
    if args.scenarios.is_empty() {
        result.skipped.push(Skipped {
            scenario: LIVE.name.to_string(),
            reason: "not requested (real kernel traffic, about 30 s per run): `superpacket bench live` as root"
                .to_string(),
        });
    }
    // A scenario asked for by name that cannot run here is said on stderr
    // too (also with --json), and a suite that measured nothing fails.
    for k in result.skipped.iter().filter(|k| args.scenarios.contains(&k.scenario)) {
        eprintln!("superpacket bench: {} skipped: {}", k.scenario, k.reason);
    }
    if result.scenarios.is_empty() && !scenarios.is_empty() {
        if args.json {
            println!("{}", result.to_json());
        } else {
            print!("{}", result.to_text());
        }
        return Ok(EXIT_PROBLEMS);
    }
    let mut notes = Vec::new();
    if let Some(dir) = &args.report {
        let command =
            std::iter::once("superpacket".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
        let files = write_report(&result, dir, &command).map_err(|e| CliError::context("writing the report", e))?;
        notes.push(format!(
            "report: {} and {} chart(s) in {}",
            files.markdown.display(),
            files.plots.len(),
            dir.display()
        ));
        for e in files.plot_errors {
            notes.push(format!("chart not drawn: {e}"));
        }
    }
    if args.json {
        println!("{}", result.to_json());
        for n in &notes {
            eprintln!("{n}");
        }
    } else {
        print!("{}", result.to_text());
        for s in result.scenarios.iter().filter(|s| s.scenario.name == LIVE_PEERS.name) {
            print!("{}", live_peers::side_by_side(s));
        }
        for n in &notes {
            println!("{n}");
        }
    }
    let _ = std::io::stdout().flush();
    Ok(if result.scenarios.iter().any(|s| !s.errors.is_empty()) { EXIT_PROBLEMS } else { EXIT_OK })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_by_name_and_number() {
        let names = |v: &[&str]| -> Vec<&'static str> {
            select(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap().iter().map(|s| s.name).collect()
        };
        let defaults: Vec<&str> = SCENARIOS.iter().filter(|s| s.default).map(|s| s.name).collect();
        assert_eq!(names(&[]), defaults);
        for n in ["vlan-nat", "defrag", "lro", "qinq-tso"] {
            assert!(defaults.contains(&n), "{n}");
        }
        assert!(!defaults.contains(&"live"));
        assert!(list().lines().any(|l| l.starts_with("3    lro ")), "{}", list());
        assert_eq!(names(&["qinq-tso", "1"]), vec!["vlan-nat", "qinq-tso"]);
        assert_eq!(names(&["live", "3", "lro"]), vec!["lro", "live"]);
        let e = select(&["gro".to_string()]).unwrap_err();
        assert!(e.0.contains("unknown scenario 'gro'") && e.0.contains("vlan-nat (1)"), "{}", e.0);
    }

    #[test]
    fn parses_the_demo_json() {
        let r = parse_report(
            r#"{"scenario":"demo","results":[{"name":"tcp_passthrough_gbps","value":12.5,"unit":"Gbit/s"},{"name":"x","value":null,"unit":"x"}]}"#,
        )
        .unwrap();
        assert_eq!(r.get("tcp_passthrough_gbps"), Some(12.5));
        assert!(r.get("x").unwrap().is_nan());
        assert!(parse_report("{}").is_err());
        // Every figure the live scenario tests is one the demo reports.
        for p in LIVE.pairs {
            for n in [p.baseline, p.candidate] {
                assert!(n.ends_with("_gbps") || n.ends_with("_cpu_s_per_gb"), "{n}");
            }
        }
    }
}
