//! The benchmark suite: every scenario run N times, with ministat's
//! statistics ([`super::stats`]) per figure and per A/B pair.
//!
//! A [`Scenario`] is one entry of a registry (the five results are in
//! [`super::scenarios::SCENARIOS`]): a function that measures every
//! configuration of the scenario once and returns a [`BenchReport`], plus
//! the A/B [`Pair`]s to test, the [`KeyFigure`]s to set against the
//! original change's figures, the plots, and what the scenario models.
//!
//! [`run_suite`] runs the scenarios round-robin: run 1 of every scenario,
//! then run 2, and so on, so that drift of the machine hits every
//! configuration alike; inside one run a scenario measures its A and B
//! configurations back to back or interleaved. Each figure of a scenario
//! becomes a sample of N values ([`Figure`], summarized by
//! [`Summary`]); each pair is tested with [`compare`] (reference = the
//! baseline, ministat's `x`; candidate = `+`), giving the verdict, the
//! difference and the relative difference with their confidence intervals.
//!
//! # JSON (`superpacket bench --json`)
//! One object; each scenario is the shared bench shape with the statistics
//! added (`value` is the mean over the runs):
//!
//! ```json
//! {"suite": {"runs": 5, "quick": false, "confidence": 95.0, "method": "student",
//!            "critical_values": "exact", "build": "release", "elapsed_s": 61.2},
//!  "scenarios": [
//!   {"scenario": "vlan-nat", "result": 1, "kind": "model", "title": "...",
//!    "results": [{"name": "udp_l4_passthrough_gbps", "value": 1978.6, "unit": "Gbps",
//!                 "samples": [...],
//!                 "stats": {"n": 5, "min": ..., "max": ..., "median": ..., "avg": ..., "stddev": ...}}],
//!    "comparisons": [{"name": "UDP L4 throughput", "baseline": "udp_l4_legacy_gbps",
//!                     "candidate": "udp_l4_passthrough_gbps", "better": "higher", "ratio": 23.7,
//!                     "verdict": "difference", "text": "Difference at 95.0% confidence",
//!                     "confidence": 95.0, "method": "student", "critical_values": "exact",
//!                     "dof": 8.0, "t": 2.306, "difference": ..., "difference_ci": ...,
//!                     "relative_pct": ..., "relative_ci_pct": ..., "s": ..., "note": null,
//!                     "error": null}],
//!    "key_figures": [{"name": "...", "baseline": "...", "candidate": "...", "ratio": 26.0,
//!                     "original": "20 Mbps -> 1 Gbps", "original_ratio": 50.0}],
//!    "errors": []}],
//!  "skipped": [{"scenario": "live", "reason": "..."}]}
//! ```
//!
//! Values that are not finite are `null`; a comparison that cannot be made
//! (a figure missing, fewer than 2 runs) has `"verdict": null` and its
//! reason in `"error"`.

use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::stats::{Comparison, Summary, TestOptions, Verdict, compare, fmt_g};
use super::{BenchReport, format_value};

/// What a scenario's run function gets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOptions {
    /// Small sizes and short measurements (tests, smoke runs).
    pub quick: bool,
    /// Which run this is (0-based); scenarios with randomness seed from it.
    pub run: usize,
    /// Seconds per transfer of scenarios that move real traffic.
    pub live_seconds: f64,
}

/// A scenario's run function: measures every configuration once. Progress
/// goes to `on_step(description, step, total)`.
pub type RunFn = fn(&RunOptions, &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String>;

/// Which direction is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Throughput, packets per second, aggregation.
    Higher,
    /// CPU per byte, latency.
    Lower,
}

impl Better {
    /// The improvement ratio of `candidate` over `baseline` (> 1 is better).
    pub fn ratio(self, baseline: f64, candidate: f64) -> f64 {
        match self {
            Better::Higher => candidate / baseline,
            Better::Lower => baseline / candidate,
        }
    }
}

/// An A/B comparison: ministat's `x` (baseline) against `+` (candidate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// What is compared, e.g. `"UDP L4 throughput"`.
    pub label: &'static str,
    /// Figure name of the baseline (A, the reference).
    pub baseline: &'static str,
    /// Figure name of the candidate (B).
    pub candidate: &'static str,
    /// Direction of improvement.
    pub better: Better,
}

/// A ratio of two figures' means, set against the original change's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyFigure {
    /// What the ratio is.
    pub label: &'static str,
    /// Baseline figure.
    pub baseline: &'static str,
    /// Candidate figure.
    pub candidate: &'static str,
    /// Direction of improvement (the ratio is oriented so that > 1 is better).
    pub better: Better,
    /// The original figures, e.g. `"20 Mbps -> 1 Gbps"`.
    pub original: &'static str,
    /// The original's ratio in the same orientation, if it gave one.
    /// When `original` names a target (`"... target: at least ..."`), this
    /// is the target's minimum and [`KeyResult::target_met`] judges it.
    pub original_ratio: Option<f64>,
}

impl KeyFigure {
    /// The minimum ratio when this key figure is a target (its `original`
    /// says `target: at least`), else `None`.
    pub fn target(&self) -> Option<f64> {
        self.original_ratio.filter(|_| self.original.contains("target: at least"))
    }
}

/// A grouped bar chart of figures (mean, min..max, every run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlotSpec {
    /// File name in the report directory (`.svg`).
    pub file: &'static str,
    /// Chart title.
    pub title: &'static str,
    /// Y axis label (the unit).
    pub y_label: &'static str,
    /// Logarithmic y axis (ratios of 10x and more).
    pub log: bool,
    /// Series (bar colours, legend), one per configuration.
    pub series: &'static [&'static str],
    /// Groups along x: a label and one figure name per series.
    pub groups: &'static [(&'static str, &'static [&'static str])],
}

/// What a scenario measures on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The engine's components on in-memory ports or a model of the wire.
    Model,
    /// Real kernel traffic through the live engine (needs root).
    LiveKernel,
    /// Real processes exchanging real traffic (e.g. DPDK testpmd frontends
    /// and a vhost-user backend), no kernel stack involved.
    LiveProcesses,
}

/// One entry of the suite's registry.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Name on the command line, e.g. `"vlan-nat"`.
    pub name: &'static str,
    /// Which of the README's five results it reproduces.
    pub result: Option<u8>,
    /// One-line title.
    pub title: &'static str,
    /// Model or live kernel traffic.
    pub kind: Kind,
    /// Run when no scenario is named.
    pub default: bool,
    /// The original change and its published figures.
    pub original: &'static str,
    /// What the scenario models.
    pub models: &'static str,
    /// What is real (the engine's code, timed where it is timed).
    pub real: &'static str,
    /// What is simulated.
    pub simulated: &'static str,
    /// A/B pairs to test.
    pub pairs: &'static [Pair],
    /// Ratios to compare with the original.
    pub key: &'static [KeyFigure],
    /// Plots for the report.
    pub plots: &'static [PlotSpec],
    /// Whether it can run here (`Err(why)` skips it, e.g. without root).
    pub available: fn() -> Result<(), String>,
    /// Measures every configuration once.
    pub run: RunFn,
}

/// Always available.
pub fn always() -> Result<(), String> {
    Ok(())
}

/// Options of [`run_suite`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuiteOptions {
    /// Runs per scenario (N).
    pub runs: usize,
    /// Small sizes (see [`RunOptions::quick`]).
    pub quick: bool,
    /// The t test's options.
    pub test: TestOptions,
    /// Seconds per transfer of live scenarios.
    pub live_seconds: f64,
}

impl Default for SuiteOptions {
    fn default() -> Self {
        SuiteOptions { runs: 5, quick: false, test: TestOptions::default(), live_seconds: 3.0 }
    }
}

/// Where the suite is, for a progress display.
#[derive(Debug, Clone, Copy)]
pub struct SuiteProgress<'a> {
    /// Scenario runs finished.
    pub done: usize,
    /// Scenario runs in all.
    pub total: usize,
    /// Current run (1-based).
    pub run: usize,
    /// Runs per scenario.
    pub runs: usize,
    /// Current scenario.
    pub scenario: &'a str,
    /// The scenario's current step.
    pub step: &'a str,
}

/// One figure over the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Result name.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// One value per run that produced the figure (non-finite values kept).
    pub samples: Vec<f64>,
    /// Statistics of the finite samples.
    pub summary: Option<Summary>,
}

/// The test of one [`Pair`].
#[derive(Debug, Clone, PartialEq)]
pub struct PairResult {
    /// The pair.
    pub pair: Pair,
    /// Ratio of the means, oriented so that > 1 is an improvement.
    pub ratio: f64,
    /// The comparison, or why there is none.
    pub comparison: Result<Comparison, String>,
}

/// A [`KeyFigure`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyResult {
    /// The key figure.
    pub key: KeyFigure,
    /// Ratio of the means (NaN if a figure is missing).
    pub ratio: f64,
}

impl KeyResult {
    /// For a target ([`KeyFigure::target`]): whether the measured ratio
    /// reaches it (`None`: not a target, or the ratio is not finite).
    pub fn target_met(&self) -> Option<bool> {
        self.key.target().filter(|_| self.ratio.is_finite()).map(|min| self.ratio >= min)
    }

    /// `" (target met)"`, `" (target NOT met)"`, or empty when not a target.
    pub fn target_text(&self) -> &'static str {
        match (self.key.target(), self.target_met()) {
            (_, Some(true)) => " (target met)",
            (_, Some(false)) => " (target NOT met)",
            (Some(_), None) => " (target not measured)",
            (None, None) => "",
        }
    }
}

/// Everything measured for one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    /// The registry entry.
    pub scenario: Scenario,
    /// Runs that produced a report.
    pub runs_ok: usize,
    /// Figures in the order the scenario produced them.
    pub figures: Vec<Figure>,
    /// Pair tests.
    pub comparisons: Vec<PairResult>,
    /// Key figures.
    pub key: Vec<KeyResult>,
    /// Runs that failed, with the reason.
    pub errors: Vec<String>,
}

impl ScenarioResult {
    /// The figure called `name`.
    pub fn figure(&self, name: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.name == name)
    }

    /// The mean of figure `name` (NaN if missing).
    pub fn mean(&self, name: &str) -> f64 {
        self.figure(name).and_then(|f| f.summary).map_or(f64::NAN, |s| s.avg)
    }
}

/// A scenario that did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Its name.
    pub scenario: String,
    /// Why.
    pub reason: String,
}

/// The whole suite's outcome.
#[derive(Debug, Clone)]
pub struct SuiteResult {
    /// The options it ran with.
    pub options: SuiteOptions,
    /// Scenarios that ran, in registry order.
    pub scenarios: Vec<ScenarioResult>,
    /// Scenarios that could not run here.
    pub skipped: Vec<Skipped>,
    /// Wall time of the whole suite, seconds.
    pub elapsed_s: f64,
}

/// `"release"` or `"debug"`: the build that measured.
pub fn build_kind() -> &'static str {
    if cfg!(debug_assertions) { "debug" } else { "release" }
}

/// Runs `scenarios` `opts.runs` times each, round-robin (run 1 of every
/// scenario, then run 2, ...), skipping those not available here, and
/// computes the statistics.
pub fn run_suite(
    scenarios: &[Scenario],
    opts: &SuiteOptions,
    progress: &mut dyn FnMut(&SuiteProgress<'_>),
) -> SuiteResult {
    let started = Instant::now();
    let mut skipped = Vec::new();
    let mut active: Vec<(Scenario, Vec<BenchReport>, Vec<String>)> = Vec::new();
    for s in scenarios {
        match (s.available)() {
            Ok(()) => active.push((*s, Vec::new(), Vec::new())),
            Err(reason) => skipped.push(Skipped { scenario: s.name.to_string(), reason }),
        }
    }
    let runs = opts.runs.max(1);
    let total = runs * active.len();
    let mut done = 0;
    for run in 0..runs {
        for (s, reports, errors) in active.iter_mut() {
            let ro = RunOptions { quick: opts.quick, run, live_seconds: opts.live_seconds };
            let mut on_step = |step: &str, _: usize, _: usize| {
                progress(&SuiteProgress { done, total, run: run + 1, runs, scenario: s.name, step });
            };
            on_step("starting", 0, 1);
            match (s.run)(&ro, &mut on_step) {
                Ok(r) => reports.push(r),
                Err(e) => errors.push(format!("run {}: {e}", run + 1)),
            }
            done += 1;
        }
    }
    progress(&SuiteProgress { done, total, run: runs, runs, scenario: "", step: "done" });
    let scenarios = active.into_iter().map(|(s, reports, errors)| analyze(s, &reports, errors, &opts.test)).collect();
    SuiteResult { options: *opts, scenarios, skipped, elapsed_s: started.elapsed().as_secs_f64() }
}

/// The statistics of one scenario's reports (one report per run).
pub fn analyze(scenario: Scenario, reports: &[BenchReport], errors: Vec<String>, test: &TestOptions) -> ScenarioResult {
    let mut figures: Vec<Figure> = Vec::new();
    for r in reports {
        for b in &r.results {
            match figures.iter_mut().find(|f| f.name == b.name) {
                Some(f) => f.samples.push(b.value),
                None => figures.push(Figure {
                    name: b.name.clone(),
                    unit: b.unit.clone(),
                    samples: vec![b.value],
                    summary: None,
                }),
            }
        }
    }
    for f in figures.iter_mut() {
        let finite: Vec<f64> = f.samples.iter().copied().filter(|v| v.is_finite()).collect();
        f.summary = Summary::of(&finite);
    }
    let mut result =
        ScenarioResult { scenario, runs_ok: reports.len(), figures, comparisons: Vec::new(), key: Vec::new(), errors };
    for pair in scenario.pairs {
        let get = |name: &str| result.figure(name).and_then(|f| f.summary).ok_or(format!("no figure {name}"));
        let comparison = match (get(pair.baseline), get(pair.candidate)) {
            (Ok(a), Ok(b)) => compare(&a.moments(), &b.moments(), test).map_err(|e| e.to_string()),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        let ratio = pair.better.ratio(result.mean(pair.baseline), result.mean(pair.candidate));
        result.comparisons.push(PairResult { pair: *pair, ratio, comparison });
    }
    for key in scenario.key {
        let ratio = key.better.ratio(result.mean(key.baseline), result.mean(key.candidate));
        result.key.push(KeyResult { key: *key, ratio });
    }
    result
}

fn num(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

impl SuiteResult {
    /// The JSON document described in the module documentation.
    pub fn to_json(&self) -> Value {
        let o = &self.options;
        let scenarios: Vec<Value> = self.scenarios.iter().map(scenario_json).collect();
        json!({
            "suite": {
                "runs": o.runs,
                "quick": o.quick,
                "confidence": o.test.confidence,
                "method": o.test.method,
                "critical_values": o.test.critical,
                "build": build_kind(),
                "machine": super::suite_report::machine_description(),
                "elapsed_s": num(self.elapsed_s),
            },
            "scenarios": scenarios,
            "skipped": self.skipped,
        })
    }

    /// The human-readable report for the terminal.
    pub fn to_text(&self) -> String {
        let o = &self.options;
        let mut out = format!(
            "superpacket bench: {} scenario{}, {} run{} each (interleaved), {} t test at {} confidence ({} build, {:.0} s)\n",
            self.scenarios.len(),
            if self.scenarios.len() == 1 { "" } else { "s" },
            o.runs,
            if o.runs == 1 { "" } else { "s" },
            method_name(o.test.method),
            o.test.confidence,
            build_kind(),
            self.elapsed_s
        );
        out += &format!("machine: {}\n", super::suite_report::machine_description());
        for s in &self.scenarios {
            out += "\n";
            out += &scenario_text(s);
        }
        for k in &self.skipped {
            out += &format!("\nskipped {}: {}\n", k.scenario, k.reason);
        }
        out
    }
}

/// `"Student's"` or `"Welch's"`.
pub fn method_name(m: super::stats::Method) -> &'static str {
    match m {
        super::stats::Method::Student => "Student's",
        super::stats::Method::Welch => "Welch's",
    }
}

fn scenario_json(s: &ScenarioResult) -> Value {
    let results: Vec<Value> = s
        .figures
        .iter()
        .map(|f| {
            json!({
                "name": f.name,
                "value": num(f.summary.map_or(f64::NAN, |x| x.avg)),
                "unit": f.unit,
                "samples": f.samples.iter().map(|&v| num(v)).collect::<Vec<_>>(),
                "stats": f.summary.map(|x| json!({
                    "n": x.n, "min": num(x.min), "max": num(x.max), "median": num(x.median),
                    "avg": num(x.avg), "stddev": num(x.stddev),
                })),
            })
        })
        .collect();
    let comparisons: Vec<Value> = s
        .comparisons
        .iter()
        .map(|p| {
            let mut v = json!({
                "name": p.pair.label,
                "baseline": p.pair.baseline,
                "candidate": p.pair.candidate,
                "better": p.pair.better,
                "ratio": num(p.ratio),
            });
            let m = v.as_object_mut().expect("an object");
            match &p.comparison {
                Ok(c) => {
                    m.insert("verdict".into(), json!(c.verdict));
                    m.insert("text".into(), json!(c.verdict_text()));
                    m.insert("confidence".into(), json!(c.confidence));
                    m.insert("method".into(), json!(c.method));
                    m.insert("critical_values".into(), json!(c.critical_values));
                    m.insert("dof".into(), num(c.dof));
                    m.insert("t".into(), num(c.t));
                    m.insert("difference".into(), num(c.difference));
                    m.insert("difference_ci".into(), num(c.difference_ci));
                    m.insert("relative_pct".into(), c.relative_pct.map_or(Value::Null, num));
                    m.insert("relative_ci_pct".into(), c.relative_ci_pct.map_or(Value::Null, num));
                    m.insert("s".into(), num(c.s));
                    m.insert("note".into(), json!(c.note));
                    m.insert("error".into(), Value::Null);
                }
                Err(e) => {
                    m.insert("verdict".into(), Value::Null);
                    m.insert("error".into(), json!(e));
                }
            }
            v
        })
        .collect();
    let key: Vec<Value> = s
        .key
        .iter()
        .map(|k| {
            json!({
                "name": k.key.label,
                "baseline": k.key.baseline,
                "candidate": k.key.candidate,
                "ratio": num(k.ratio),
                "original": k.key.original,
                "original_ratio": k.key.original_ratio,
                "target_met": k.target_met(),
            })
        })
        .collect();
    json!({
        "scenario": s.scenario.name,
        "result": s.scenario.result,
        "kind": s.scenario.kind,
        "title": s.scenario.title,
        "runs": s.runs_ok,
        "results": results,
        "comparisons": comparisons,
        "key_figures": key,
        "errors": s.errors,
    })
}

/// `[1] vlan-nat` or `[live] live`.
pub fn heading(s: &Scenario) -> String {
    match s.result {
        Some(r) => format!("[{r}] {}", s.name),
        None => format!("[{}] {}", if s.kind == Kind::Model { "-" } else { "live" }, s.name),
    }
}

/// A ratio for people: `26.0x`, `0.98x`, `46828x`.
pub fn format_ratio(r: f64) -> String {
    if !r.is_finite() {
        "n/a".to_string()
    } else if r >= 100.0 {
        format!("{r:.0}x")
    } else if r >= 10.0 {
        format!("{r:.1}x")
    } else {
        format!("{r:.2}x")
    }
}

/// One line per verdict: `Difference at 95.0% confidence: +1895.1 +/- 40.2 (+2268% +/- 50.3%)`.
pub fn comparison_line(p: &PairResult) -> String {
    match &p.comparison {
        Ok(c) => {
            let mut s = c.verdict_text();
            if c.verdict == Verdict::Difference {
                s += &format!(": {} +/- {}", fmt_g(c.difference, 6), fmt_g(c.difference_ci, 6));
                if let (Some(r), Some(e)) = (c.relative_pct, c.relative_ci_pct) {
                    s += &format!(" ({}% +/- {}%)", fmt_g(r, 6), fmt_g(e, 6));
                }
            }
            if let Some(n) = &c.note {
                s += &format!(" [{n}]");
            }
            s
        }
        Err(e) => format!("no test: {e}"),
    }
}

fn scenario_text(s: &ScenarioResult) -> String {
    let sc = &s.scenario;
    let mut out = format!("{} - {}", heading(sc), sc.title);
    match sc.kind {
        Kind::LiveKernel => out += " (REAL KERNEL TRAFFIC)",
        Kind::LiveProcesses => out += " (REAL PROCESSES AND TRAFFIC)",
        Kind::Model => {}
    }
    out += &format!("\n  {} run{} ok", s.runs_ok, if s.runs_ok == 1 { "" } else { "s" });
    for e in &s.errors {
        out += &format!("; {e}");
    }
    out += "\n";
    let w = s.figures.iter().map(|f| f.name.len()).max().unwrap_or(6).max(6);
    out += &format!(
        "  {:<w$} {:>3} {:>12} {:>12} {:>12} {:>12} {:>12}  unit\n",
        "figure", "N", "Min", "Max", "Median", "Avg", "Stddev"
    );
    for f in &s.figures {
        match f.summary {
            Some(x) => {
                out += &format!(
                    "  {:<w$} {:>3} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n",
                    f.name,
                    x.n,
                    fmt_g(x.min, 6),
                    fmt_g(x.max, 6),
                    fmt_g(x.median, 6),
                    fmt_g(x.avg, 6),
                    fmt_g(x.stddev, 6),
                    f.unit
                )
            }
            None => out += &format!("  {:<w$} {:>3}  (no finite value)  {}\n", f.name, 0, f.unit),
        }
    }
    for p in &s.comparisons {
        out += &format!(
            "  {}: {} vs {} ({} is better), ratio {}\n    {}\n",
            p.pair.label,
            p.pair.candidate,
            p.pair.baseline,
            match p.pair.better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            },
            format_ratio(p.ratio),
            comparison_line(p)
        );
    }
    for k in &s.key {
        out += &format!(
            "  key figure: {} = {} (original: {}{}){}\n",
            k.key.label,
            format_ratio(k.ratio),
            k.key.original,
            k.key.original_ratio.map(|r| format!(", {}", format_ratio(r))).unwrap_or_default(),
            k.target_text()
        );
    }
    out
}

/// A figure's mean with its unit, for reports: `1978.6 Gbps`.
pub fn mean_with_unit(s: &ScenarioResult, name: &str) -> String {
    match s.figure(name) {
        Some(f) => format!("{} {}", format_value(f.summary.map_or(f64::NAN, |x| x.avg)), f.unit),
        None => "n/a".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::Confidence;

    fn fake_run(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
        on_step("measuring", 0, 1);
        let mut r = BenchReport::new("fake");
        // A: about 100, B: about 110, both varying by run.
        let j = [0.0, 1.0, -1.0, 2.0, -2.0][o.run % 5];
        r.push("a_gbps", 100.0 + j, "Gbps");
        r.push("b_gbps", 110.0 - j, "Gbps");
        r.push("c_gbps", 100.5 - j, "Gbps");
        r.push("flaky", if o.run == 1 { f64::NAN } else { 1.0 }, "x");
        if o.run == 3 {
            return Err("simulated failure".into());
        }
        Ok(r)
    }

    fn unavailable() -> Result<(), String> {
        Err("needs root".into())
    }

    const PAIRS: &[Pair] = &[
        Pair { label: "B vs A", baseline: "a_gbps", candidate: "b_gbps", better: Better::Higher },
        Pair { label: "C vs A", baseline: "a_gbps", candidate: "c_gbps", better: Better::Higher },
        Pair { label: "missing", baseline: "a_gbps", candidate: "nope", better: Better::Lower },
    ];
    const KEY: &[KeyFigure] = &[KeyFigure {
        label: "B/A",
        baseline: "a_gbps",
        candidate: "b_gbps",
        better: Better::Higher,
        original: "1 -> 2",
        original_ratio: Some(2.0),
    }];

    fn scenario(name: &'static str, available: fn() -> Result<(), String>) -> Scenario {
        Scenario {
            name,
            result: Some(9),
            title: "fake",
            kind: Kind::Model,
            default: true,
            original: "o",
            models: "m",
            real: "r",
            simulated: "s",
            pairs: PAIRS,
            key: KEY,
            plots: &[],
            available,
            run: fake_run,
        }
    }

    #[test]
    fn runs_round_robin_and_tests_pairs() {
        let opts = SuiteOptions { runs: 5, ..SuiteOptions::default() };
        let mut seen = Vec::new();
        let r = run_suite(&[scenario("one", always), scenario("root", unavailable)], &opts, &mut |p| {
            seen.push((p.run, p.scenario.to_string(), p.done, p.total))
        });
        assert_eq!(r.skipped, vec![Skipped { scenario: "root".into(), reason: "needs root".into() }]);
        assert_eq!(r.scenarios.len(), 1);
        let s = &r.scenarios[0];
        assert_eq!(s.runs_ok, 4);
        assert_eq!(s.errors, vec!["run 4: simulated failure".to_string()]);
        assert_eq!(seen.last().unwrap().2, 5);
        let a = s.figure("a_gbps").unwrap();
        assert_eq!(a.samples, vec![100.0, 101.0, 99.0, 98.0]);
        assert_eq!(s.figure("flaky").unwrap().summary.unwrap().n, 3);
        let b_vs_a = &s.comparisons[0];
        assert_eq!(b_vs_a.comparison.as_ref().unwrap().verdict, Verdict::Difference);
        assert!((b_vs_a.ratio - 110.5 / 99.5).abs() < 1e-9);
        let c_vs_a = s.comparisons[1].comparison.as_ref().unwrap();
        assert_eq!(c_vs_a.verdict, Verdict::NoDifference);
        assert_eq!(s.comparisons[2].comparison, Err("no figure nope".to_string()));
        assert!((s.key[0].ratio - 110.5 / 99.5).abs() < 1e-9);

        let j = r.to_json();
        assert_eq!(j["suite"]["runs"], 5);
        assert_eq!(j["suite"]["confidence"], 95.0);
        let sj = &j["scenarios"][0];
        assert_eq!(sj["scenario"], "one");
        assert_eq!(sj["results"][0]["name"], "a_gbps");
        assert_eq!(sj["results"][0]["value"], 99.5);
        assert_eq!(sj["results"][0]["stats"]["n"], 4);
        assert_eq!(sj["results"][3]["samples"][1], Value::Null);
        assert_eq!(sj["comparisons"][0]["verdict"], "difference");
        assert_eq!(sj["comparisons"][0]["text"], "Difference at 95.0% confidence");
        assert_eq!(sj["comparisons"][1]["verdict"], "no_difference");
        assert_eq!(sj["comparisons"][2]["verdict"], Value::Null);
        assert_eq!(sj["key_figures"][0]["original_ratio"], 2.0);
        assert_eq!(j["skipped"][0]["scenario"], "root");
        let text = r.to_text();
        assert!(text.contains("[9] one - fake") && text.contains("skipped root: needs root"), "{text}");
        assert!(text.contains("No difference proven at 95.0% confidence"), "{text}");
    }

    #[test]
    fn one_run_gives_statistics_but_no_test() {
        let opts = SuiteOptions {
            runs: 1,
            test: TestOptions { confidence: Confidence::P99, ..TestOptions::default() },
            ..SuiteOptions::default()
        };
        let r = run_suite(&[scenario("one", always)], &opts, &mut |_| {});
        let s = &r.scenarios[0];
        assert!(s.figure("a_gbps").unwrap().summary.unwrap().stddev.is_nan());
        let e = s.comparisons[0].comparison.as_ref().unwrap_err();
        assert!(e.contains("at least 2"), "{e}");
        assert!(r.to_text().contains("no test: the reference sample has 1 value"));
    }
}
