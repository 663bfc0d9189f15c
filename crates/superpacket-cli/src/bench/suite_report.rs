//! `superpacket bench --report DIR`: a markdown report (`DIR/report.md`)
//! and one SVG chart per [`PlotSpec`] of every scenario that ran.
//!
//! The report says how it was produced (command, build, runs, test,
//! machine), how to read a verdict, then per scenario: the original change
//! and its figures, what the scenario models, what is real and what is
//! simulated, its key ratios against the original's, every A/B comparison
//! with ministat's verdict, difference and relative difference and their
//! confidence intervals, the charts, and every figure's statistics.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::format_value;
use super::plot::{Bar, Chart, render_svg};
use super::stats::{Verdict, fmt_g};
use super::suite::{
    Better, Kind, PlotSpec, ScenarioResult, SuiteResult, build_kind, comparison_line, format_ratio, heading,
    method_name,
};

/// What [`write_report`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportFiles {
    /// The markdown report.
    pub markdown: PathBuf,
    /// The charts written.
    pub plots: Vec<PathBuf>,
    /// Charts that could not be drawn, with the reason (also noted in the report).
    pub plot_errors: Vec<String>,
}

/// The chart of `spec` from the scenario's figures.
pub fn chart(s: &ScenarioResult, spec: &PlotSpec) -> Chart {
    Chart {
        title: spec.title.to_string(),
        y_label: spec.y_label.to_string(),
        log: spec.log,
        series: spec.series.iter().map(|n| n.to_string()).collect(),
        groups: spec
            .groups
            .iter()
            .map(|(label, figs)| {
                let bars = figs
                    .iter()
                    .map(|f| {
                        let fig = s.figure(f)?;
                        let x = fig.summary?;
                        Some(Bar { mean: x.avg, min: x.min, max: x.max, samples: fig.samples.clone() })
                    })
                    .collect();
                (label.to_string(), bars)
            })
            .collect(),
    }
}

/// Writes `report.md` and the charts into `dir` (created if needed).
/// `command` is the command line shown in the report.
///
/// # Errors
/// If the directory or a file cannot be written.
pub fn write_report(result: &SuiteResult, dir: &Path, command: &str) -> Result<ReportFiles, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut plots = Vec::new();
    let mut plot_errors = Vec::new();
    let mut drawn: Vec<(&str, &str)> = Vec::new();
    for s in &result.scenarios {
        for spec in s.scenario.plots {
            match render_svg(&chart(s, spec)) {
                Ok(svg) => {
                    let path = dir.join(spec.file);
                    std::fs::write(&path, svg).map_err(|e| format!("{}: {e}", path.display()))?;
                    plots.push(path);
                    drawn.push((s.scenario.name, spec.file));
                }
                Err(e) => plot_errors.push(format!("{}: {e}", spec.file)),
            }
        }
    }
    let md = markdown(result, command, &drawn, &plot_errors);
    let markdown = dir.join("report.md");
    std::fs::write(&markdown, md).map_err(|e| format!("{}: {e}", markdown.display()))?;
    Ok(ReportFiles { markdown, plots, plot_errors })
}

/// CPU model and count of this machine, e.g. `Intel Xeon ... (2 CPUs)`.
pub fn machine_description() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{model} ({cpus} CPU{})", if cpus == 1 { "" } else { "s" })
}

/// How to read a verdict (the README and the report say the same).
pub const READING_VERDICTS: &str = "\
Each configuration ran N times. A comparison tests the candidate (B, ministat's `+`) against the \
baseline (A, ministat's `x`) with Student's t test on the N values of each, as FreeBSD's ministat does:
- **Difference at 95.0% confidence**: the means differ by more than the half-width of the 95% \
confidence interval of their difference; `d +/- e` is B's mean minus A's with that half-width, and \
`r% +/- q%` the same relative to A's mean. With 95% confidence the true difference lies within `d +/- e`.
- **No difference proven at 95.0% confidence**: the difference is within the noise of N runs. It does \
not prove the two are equal; more runs (`--runs`) narrow the interval.
- The ratio is the ratio of the means, oriented so that above 1 is an improvement (for CPU per GB: A / B).";

/// The markdown report. `plots`: (scenario, file) of the charts drawn;
/// `plot_errors`: charts that could not be drawn.
pub fn markdown(result: &SuiteResult, command: &str, plots: &[(&str, &str)], plot_errors: &[String]) -> String {
    let o = &result.options;
    let mut md = String::from("# superpacket benchmark report\n\n");
    let _ = writeln!(md, "Produced by `{command}`.\n");
    let _ = writeln!(
        md,
        "- Build: {}; machine: {}; elapsed: {:.0} s.\n- Runs: {} per configuration{}. Runs are interleaved: run 1 of every scenario, then run 2, and so on; inside a run a scenario measures its configurations back to back or round-robin, so that drift of the machine hits A and B alike.\n- Test: {} t{} at {} confidence, critical values {}.\n",
        build_kind(),
        machine_description(),
        result.elapsed_s,
        o.runs,
        if o.quick { ", quick mode (small sizes: figures are indicative only)" } else { "" },
        method_name(o.test.method),
        match o.test.method {
            super::stats::Method::Student => " with the pooled standard deviation (ministat's test)",
            super::stats::Method::Welch => " (unequal variances, Welch–Satterthwaite degrees of freedom)",
        },
        o.test.confidence,
        match o.test.critical {
            super::stats::CriticalValues::Exact => "computed exactly and rounded to ministat's three decimals",
            super::stats::CriticalValues::MinistatTable => "from FreeBSD ministat's table",
        }
    );
    md += "## Reading the verdicts\n\n";
    md += READING_VERDICTS;
    md +=
        "\n\n## Summary\n\n| # | scenario | key figure | measured | original | verdicts |\n|---|---|---|---|---|---|\n";
    for s in &result.scenarios {
        let (diff, none, untested) = verdict_counts(s);
        for (i, k) in s.key.iter().enumerate() {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {}{} | {}{} | {} |",
                if i == 0 { s.scenario.result.map_or("live".to_string(), |r| r.to_string()) } else { String::new() },
                if i == 0 { s.scenario.name } else { "" },
                k.key.label,
                format_ratio(k.ratio),
                k.target_text(),
                k.key.original,
                k.key.original_ratio.map(|r| format!(" ({})", format_ratio(r))).unwrap_or_default(),
                if i == 0 {
                    format!(
                        "{diff} difference{}, {none} no difference proven{}",
                        if diff == 1 { "" } else { "s" },
                        if untested > 0 { format!(", {untested} untested") } else { String::new() }
                    )
                } else {
                    String::new()
                }
            );
        }
    }
    for k in &result.skipped {
        let _ = writeln!(md, "| | {} | skipped: {} | | | |", k.scenario, k.reason);
    }
    for s in &result.scenarios {
        md += "\n";
        md += &scenario_markdown(s, plots);
    }
    if !plot_errors.is_empty() {
        md += "\n## Charts not drawn\n\n";
        for e in plot_errors {
            let _ = writeln!(md, "- {e}");
        }
    }
    md
}

fn verdict_counts(s: &ScenarioResult) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for p in &s.comparisons {
        match &p.comparison {
            Ok(x) if x.verdict == Verdict::Difference => c.0 += 1,
            Ok(_) => c.1 += 1,
            Err(_) => c.2 += 1,
        }
    }
    c
}

fn cell(v: Option<f64>) -> String {
    v.map_or("n/a".to_string(), |v| fmt_g(v, 6))
}

fn scenario_markdown(s: &ScenarioResult, plots: &[(&str, &str)]) -> String {
    let sc = &s.scenario;
    let mut md = format!("## {} — {}\n\n", heading(sc), sc.title);
    match sc.kind {
        Kind::LiveKernel => {
            md += "**Real kernel traffic** (root only): the kernel's TCP and UDP through the live engine.\n\n";
        }
        Kind::LiveProcesses => md += "**Real processes and traffic** (root only).\n\n",
        Kind::Model => {}
    }
    let _ = writeln!(md, "**Original change.** {}\n", sc.original);
    let _ = writeln!(md, "**What it models.** {}\n", sc.models);
    let _ = writeln!(md, "**What is real.** {}\n", sc.real);
    let _ = writeln!(md, "**What is simulated.** {}\n", sc.simulated);
    let _ = writeln!(md, "Runs that produced figures: {}.", s.runs_ok);
    for e in &s.errors {
        let _ = writeln!(md, "Failed: {e}.");
    }
    md += "\n**Against the original.**\n\n| key figure | measured | original | original ratio |\n|---|---|---|---|\n";
    for k in &s.key {
        let _ = writeln!(
            md,
            "| {} | {}{} | {} | {} |",
            k.key.label,
            format_ratio(k.ratio),
            k.target_text(),
            k.key.original,
            k.key.original_ratio.map_or("—".to_string(), format_ratio)
        );
    }
    md += "\n**Comparisons** (A = baseline, ministat's `x`; B = candidate, `+`; ratio > 1 is an improvement).\n\n";
    md += "| comparison | A | B | A mean | B mean | ratio | verdict |\n|---|---|---|---|---|---|---|\n";
    for p in &s.comparisons {
        let better = match p.pair.better {
            Better::Higher => "higher is better",
            Better::Lower => "lower is better",
        };
        let _ = writeln!(
            md,
            "| {} ({better}) | `{}` | `{}` | {} | {} | {} | {} |",
            p.pair.label,
            p.pair.baseline,
            p.pair.candidate,
            super::suite::mean_with_unit(s, p.pair.baseline),
            super::suite::mean_with_unit(s, p.pair.candidate),
            format_ratio(p.ratio),
            comparison_line(p)
        );
    }
    md += "\n";
    for (scenario, file) in plots.iter().filter(|(n, _)| *n == sc.name) {
        let _ = writeln!(md, "![{scenario}: {file}]({file})\n");
    }
    md += "<details><summary>Every figure over the runs</summary>\n\n";
    md += "| figure | unit | N | min | max | median | avg | stddev |\n|---|---|---|---|---|---|---|---|\n";
    for f in &s.figures {
        let x = f.summary;
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |",
            f.name,
            f.unit,
            x.map_or(0, |x| x.n),
            cell(x.map(|x| x.min)),
            cell(x.map(|x| x.max)),
            cell(x.map(|x| x.median)),
            x.map_or("n/a".to_string(), |x| format_value(x.avg)),
            cell(x.map(|x| x.stddev)),
        );
    }
    md += "\n</details>\n";
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::BenchReport;
    use crate::bench::stats::TestOptions;
    use crate::bench::suite::{KeyFigure, Pair, RunOptions, Scenario, SuiteOptions, always, run_suite};

    fn run(o: &RunOptions, _: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
        let mut r = BenchReport::new("x");
        r.push("a_gbps", 10.0 + o.run as f64, "Gbps");
        r.push("b_gbps", 100.0 + 2.0 * o.run as f64, "Gbps");
        Ok(r)
    }

    #[test]
    fn writes_markdown_and_charts() {
        static PLOTS: &[PlotSpec] = &[
            PlotSpec {
                file: "ab.svg",
                title: "A and B",
                y_label: "Gbps",
                log: true,
                series: &["a", "b"],
                groups: &[("g", &["a_gbps", "b_gbps"])],
            },
            PlotSpec {
                file: "missing.svg",
                title: "nothing",
                y_label: "Gbps",
                log: false,
                series: &["z"],
                groups: &[("g", &["zzz"])],
            },
        ];
        let s = Scenario {
            name: "demo",
            result: Some(1),
            title: "a demo",
            kind: Kind::Model,
            default: true,
            original: "ORIGINAL",
            models: "MODELS",
            real: "REAL",
            simulated: "SIMULATED",
            pairs: &[Pair { label: "B vs A", baseline: "a_gbps", candidate: "b_gbps", better: Better::Higher }],
            key: &[KeyFigure {
                label: "B/A",
                baseline: "a_gbps",
                candidate: "b_gbps",
                better: Better::Higher,
                original: "1 -> 10",
                original_ratio: Some(10.0),
            }],
            plots: PLOTS,
            available: always,
            run,
        };
        let opts = SuiteOptions { runs: 3, quick: true, test: TestOptions::default(), live_seconds: 1.0 };
        let result = run_suite(&[s], &opts, &mut |_| {});
        let dir = tempfile::tempdir().unwrap();
        let files = write_report(&result, &dir.path().join("sub"), "superpacket bench --runs 3").unwrap();
        assert_eq!(files.plots.len(), 1);
        assert_eq!(files.plot_errors.len(), 1);
        let md = std::fs::read_to_string(&files.markdown).unwrap();
        for text in [
            "superpacket bench --runs 3",
            "ORIGINAL",
            "MODELS",
            "REAL",
            "SIMULATED",
            "Difference at 95.0% confidence",
            "![demo: ab.svg](ab.svg)",
            "| 1 | demo | B/A | 9.27x | 1 -> 10 (10.0x) | 1 difference, 0 no difference proven |",
            "missing.svg: nothing: no value to plot",
        ] {
            assert!(md.contains(text), "{text} missing from\n{md}");
        }
        assert!(std::fs::read_to_string(&files.plots[0]).unwrap().contains("<svg"));
    }
}
