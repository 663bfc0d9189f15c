//! `superpacket bench`: built-in micro-benchmarks.
//!
//! Every scenario returns a [`BenchReport`], printed either as JSON
//! ([`BenchReport::to_json`]: `{"scenario": ..., "results": [{"name", "value",
//! "unit"}, ...]}`) or as an aligned table ([`BenchReport::to_table`]).
//!
//! Timings on a shared machine are noisy, so scenarios compare things measured
//! in the same run: [`measure_interleaved`] runs several candidates round-robin
//! (one sample of each per round), so that a burst of load from elsewhere hits
//! every candidate alike, and ratios can be taken per round.

pub mod clock;
pub mod csum;
pub mod defrag;
pub mod gro;
pub mod gso;
pub mod instructions;
pub mod live_peers;
pub mod lro_forward;
pub mod ministat;
pub mod peer_process;
pub mod peers;
pub mod plot;
pub mod scaling;
pub mod scenarios;
pub mod seed_qinq_tso;
pub mod seed_vlan_nat;
pub mod stats;
pub mod suite;
pub mod suite_report;
pub mod tx_strategies;
pub mod vhost_tx;
pub mod vhost_user;

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The result of one `superpacket bench` scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// Scenario name, e.g. `"csum"`.
    pub scenario: String,
    /// Measured figures, in the order they were produced.
    pub results: Vec<BenchResult>,
}

/// One named figure of a [`BenchReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    /// Stable, machine-readable name, e.g. `"csum_1500"`.
    pub name: String,
    /// The figure.
    pub value: f64,
    /// Unit, e.g. `"GB/s"`, `"x"` (a ratio) or `"bool"` (1 or 0).
    pub unit: String,
}

impl BenchReport {
    /// An empty report for `scenario`.
    pub fn new(scenario: impl Into<String>) -> Self {
        BenchReport { scenario: scenario.into(), results: Vec::new() }
    }

    /// Appends a result.
    pub fn push(&mut self, name: impl Into<String>, value: f64, unit: impl Into<String>) {
        self.results.push(BenchResult { name: name.into(), value, unit: unit.into() });
    }

    /// The value of the first result called `name`.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.results.iter().find(|r| r.name == name).map(|r| r.value)
    }

    /// Compact JSON: `{"scenario":"csum","results":[{"name":..,"value":..,"unit":..},..]}`.
    ///
    /// Non-finite values (which JSON cannot represent) become `null`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a report always serialises")
    }

    /// Indented JSON, same shape as [`BenchReport::to_json`].
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }

    /// Aligned human-readable table: one line per result, the scenario first.
    pub fn to_table(&self) -> String {
        let name_w = self.results.iter().map(|r| r.name.len()).max().unwrap_or(0).max("name".len());
        let values: Vec<String> = self.results.iter().map(|r| format_value(r.value)).collect();
        let value_w = values.iter().map(String::len).max().unwrap_or(0).max("value".len());
        let mut out = format!("scenario: {}\n", self.scenario);
        out += &format!("{:<name_w$}  {:>value_w$}  unit\n", "name", "value");
        for (r, v) in self.results.iter().zip(&values) {
            out += &format!("{:<name_w$}  {:>value_w$}  {}\n", r.name, v, r.unit);
        }
        out
    }
}

/// A figure with three significant decimals for small numbers, fewer for big ones.
pub fn format_value(v: f64) -> String {
    if !v.is_finite() {
        format!("{v}")
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// How long and how often [`measure`] and [`measure_interleaved`] run a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasureConfig {
    /// Warm-up time per candidate (caches, branch predictors, CPU clock) before
    /// the batch size is chosen.
    pub warmup: Duration,
    /// Target duration of one sample; the batch size (iterations per sample) is
    /// chosen to reach it.
    pub sample_time: Duration,
    /// Number of samples (rounds); the median is reported.
    pub samples: usize,
}

impl MeasureConfig {
    /// The default: ~20 ms warm-up, 7 samples of ~25 ms.
    pub const fn standard() -> Self {
        MeasureConfig { warmup: Duration::from_millis(20), sample_time: Duration::from_millis(25), samples: 7 }
    }

    /// A short configuration for tests and smoke runs: figures are indicative only.
    pub const fn quick() -> Self {
        MeasureConfig { warmup: Duration::from_millis(1), sample_time: Duration::from_millis(2), samples: 3 }
    }
}

impl Default for MeasureConfig {
    fn default() -> Self {
        Self::standard()
    }
}

/// The samples of one candidate: seconds per iteration, in round order.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// Iterations timed together in one sample.
    pub iters_per_sample: u64,
    /// Seconds per iteration of each sample, in round order.
    pub secs_per_iter: Vec<f64>,
}

impl Measurement {
    /// Median seconds per iteration.
    pub fn median(&self) -> f64 {
        median(&self.secs_per_iter)
    }

    /// Throughput in GB/s (10^9 bytes per second) for `bytes` per iteration,
    /// from the median.
    pub fn gb_per_s(&self, bytes: usize) -> f64 {
        bytes as f64 / self.median() / 1e9
    }
}

/// Median of `values` (mean of the two middle ones for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 }
}

/// A candidate for [`measure_interleaved`]: runs its closure `n` times and
/// returns the elapsed time. The closure is monomorphised into the timing loop,
/// so there is no indirect call per iteration.
pub struct Batch<'a> {
    run: Box<dyn FnMut(u64) -> Duration + 'a>,
}

/// Wraps `f` as a [`Batch`]. Make `f` consume its result with
/// [`std::hint::black_box`] so the work is not optimised away.
pub fn batch<'a, F: FnMut() + 'a>(mut f: F) -> Batch<'a> {
    Batch {
        run: Box::new(move |n| {
            let start = Instant::now();
            for _ in 0..n {
                f();
            }
            start.elapsed()
        }),
    }
}

impl Batch<'_> {
    /// Runs the candidate `n` times; returns the elapsed time.
    pub fn run(&mut self, n: u64) -> Duration {
        (self.run)(black_box(n))
    }

    /// Warms up for `warmup`, then finds how many iterations take about `target`.
    fn calibrate(&mut self, warmup: Duration, target: Duration) -> u64 {
        let start = Instant::now();
        let mut n: u64 = 1;
        loop {
            let t = self.run(n);
            if t >= target / 4 && start.elapsed() >= warmup {
                let per_iter = t.as_secs_f64() / n as f64;
                return ((target.as_secs_f64() / per_iter).ceil() as u64).max(1);
            }
            if t < target / 4 {
                n = n.saturating_mul(2);
            }
        }
    }
}

/// Measures one candidate: warm-up, then `cfg.samples` samples of about
/// `cfg.sample_time` each.
pub fn measure<F: FnMut()>(cfg: &MeasureConfig, f: F) -> Measurement {
    measure_interleaved(cfg, &mut [batch(f)]).pop().expect("one candidate in, one measurement out")
}

/// Measures several candidates round-robin: each round takes one sample of
/// every candidate, so sample `i` of all candidates ran at about the same time
/// (compare them per round to cancel out load from other processes).
pub fn measure_interleaved(cfg: &MeasureConfig, candidates: &mut [Batch<'_>]) -> Vec<Measurement> {
    let iters: Vec<u64> = candidates.iter_mut().map(|c| c.calibrate(cfg.warmup, cfg.sample_time)).collect();
    let mut out: Vec<Measurement> = iters
        .iter()
        .map(|&n| Measurement { iters_per_sample: n, secs_per_iter: Vec::with_capacity(cfg.samples) })
        .collect();
    for _ in 0..cfg.samples.max(1) {
        for ((c, &n), m) in candidates.iter_mut().zip(&iters).zip(&mut out) {
            m.secs_per_iter.push(c.run(n).as_secs_f64() / n as f64);
        }
    }
    out
}

#[cfg(test)]
mod tests;
