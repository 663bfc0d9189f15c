//! `superpacket bench csum`: Internet checksum throughput against memcpy.
//!
//! For each size, in one interleaved run (see [`super::measure_interleaved`]):
//! `memcpy` (`dst.copy_from_slice(src)`, which reads and writes), the
//! dispatched [`superpacket::csum::ones_sum`] (`csum_<size>`) and every available
//! implementation (`csum_<impl>_<size>`), all in GB/s (10^9 bytes of input per
//! second). `ratio_<size>` is checksum over memcpy throughput, the median of the
//! per-round ratios. The targets are `ratio_1500 >= 0.6` and
//! `ratio_65536 >= 1.2`.
//!
//! Sizes up to 64 KiB are measured in cache (the same buffers every
//! iteration); 64 MiB is meant to be out of cache (larger than L2; whether it
//! fits a big shared L3 depends on the machine). All buffers are 64-byte
//! aligned, so neither side is favoured by alignment.

use std::hint::black_box;

use super::{BenchReport, MeasureConfig, batch, format_value, measure_interleaved, median};
use superpacket::csum::{Implementation, ones_sum};

/// Sizes measured, in bytes. The last one is the out-of-cache case.
pub const SIZES: [usize; 5] = [64, 1500, 9000, 65536, 64 << 20];

/// The throughput-ratio targets: `(size, minimum csum/memcpy ratio)`.
pub const TARGETS: [(usize, f64); 2] = [(1500, 0.6), (65536, 1.2)];

/// Options of [`run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsumBenchOptions {
    /// Much shorter measurement (for tests and smoke runs): figures are
    /// indicative only.
    pub quick: bool,
}

/// One checked target, see [`check_targets`].
#[derive(Debug, Clone, PartialEq)]
pub struct TargetCheck {
    /// Buffer size the target applies to.
    pub size: usize,
    /// Minimum checksum/memcpy throughput ratio.
    pub min_ratio: f64,
    /// Measured ratio (NaN if missing from the report).
    pub ratio: f64,
    /// Whether `ratio >= min_ratio`.
    pub pass: bool,
}

/// Runs the benchmark.
pub fn run(opts: &CsumBenchOptions) -> BenchReport {
    run_with_progress(opts, &mut |_, _, _| {})
}

/// Runs the benchmark, calling `on_step(description, step, total_steps)` before
/// each step (`step` counts from 0) and once more with `step == total_steps`
/// when done.
pub fn run_with_progress(opts: &CsumBenchOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    let cfg = if opts.quick { MeasureConfig::quick() } else { MeasureConfig::standard() };
    let total = SIZES.len();
    let selected = Implementation::selected();
    let available = Implementation::available();

    let mut report = BenchReport::new("csum");
    for imp in &available {
        if *imp == selected {
            report.push(format!("impl_{}", imp.name()), 1.0, "bool");
        }
    }

    for (step, &size) in SIZES.iter().enumerate() {
        on_step(&format!("{} B", size), step, total);
        let src_buf = AlignedBuf::pseudo_random(size, size as u64);
        let mut dst_buf = AlignedBuf::zeroed(size);
        let src = src_buf.as_slice();
        let dst = dst_buf.as_mut_slice();

        // Candidate 0: memcpy; 1: dispatched ones_sum; then one per implementation.
        let mut candidates = vec![
            batch(move || {
                let d = black_box(&mut *dst);
                d.copy_from_slice(black_box(src));
                black_box(d);
            }),
            batch(move || {
                black_box(ones_sum(black_box(src)));
            }),
        ];
        for &imp in &available {
            candidates.push(batch(move || {
                black_box(imp.ones_sum(black_box(src)));
            }));
        }
        let m = measure_interleaved(&cfg, &mut candidates);
        drop(candidates);

        let memcpy = &m[0];
        let ratio = |c: &super::Measurement| {
            let per_round: Vec<f64> =
                memcpy.secs_per_iter.iter().zip(&c.secs_per_iter).map(|(mc, cs)| mc / cs).collect();
            median(&per_round)
        };
        report.push(format!("csum_{size}"), m[1].gb_per_s(size), "GB/s");
        report.push(format!("memcpy_{size}"), memcpy.gb_per_s(size), "GB/s");
        report.push(format!("ratio_{size}"), ratio(&m[1]), "x");
        for (imp, mi) in available.iter().zip(&m[2..]) {
            report.push(format!("csum_{}_{size}", imp.name()), mi.gb_per_s(size), "GB/s");
            report.push(format!("ratio_{}_{size}", imp.name()), ratio(mi), "x");
        }
    }
    for t in check_targets(&report) {
        report.push(format!("target_{}_pass", t.size), if t.pass { 1.0 } else { 0.0 }, "bool");
    }
    on_step("done", total, total);
    report
}

/// Checks [`TARGETS`] against a report produced by [`run`].
pub fn check_targets(report: &BenchReport) -> Vec<TargetCheck> {
    TARGETS
        .iter()
        .map(|&(size, min_ratio)| {
            let ratio = report.get(&format!("ratio_{size}")).unwrap_or(f64::NAN);
            TargetCheck { size, min_ratio, ratio, pass: ratio >= min_ratio }
        })
        .collect()
}

/// Human-readable rendering of a [`run`] report: the selected implementation,
/// a size-by-candidate matrix (GB/s, ratio to memcpy in parentheses) and the
/// PASS/FAIL verdict of each target.
pub fn render_human(report: &BenchReport) -> String {
    let selected = report
        .results
        .iter()
        .find(|r| r.name.starts_with("impl_") && r.value == 1.0)
        .map(|r| &r.name["impl_".len()..])
        .unwrap_or("?");
    let impls: Vec<&str> = Implementation::available().iter().map(|i| i.name()).collect();
    let mut out = format!("csum benchmark: selected implementation {selected}; throughput in GB/s (ratio to memcpy)\n");

    let mut header = vec!["size".to_string(), "memcpy".to_string(), "csum".to_string()];
    header.extend(impls.iter().map(|i| i.to_string()));
    let mut rows = vec![header];
    for size in SIZES {
        let cell = |gbps: Option<f64>, ratio: Option<f64>| match (gbps, ratio) {
            (Some(g), Some(r)) => format!("{} ({:.2}x)", format_value(g), r),
            (Some(g), None) => format_value(g),
            _ => "-".to_string(),
        };
        let mut row = vec![
            size_label(size),
            cell(report.get(&format!("memcpy_{size}")), None),
            cell(report.get(&format!("csum_{size}")), report.get(&format!("ratio_{size}"))),
        ];
        for imp in &impls {
            row.push(cell(report.get(&format!("csum_{imp}_{size}")), report.get(&format!("ratio_{imp}_{size}"))));
        }
        rows.push(row);
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r.get(c).map_or(0, String::len)).max().unwrap_or(0)).collect();
    for row in &rows {
        let line: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:>w$}")).collect();
        out += line.join("  ").trim_end();
        out.push('\n');
    }
    for t in check_targets(report) {
        out += &format!(
            "target csum/memcpy at {} >= {:.1}x: {:.2}x {}\n",
            size_label(t.size),
            t.min_ratio,
            t.ratio,
            if t.pass { "PASS" } else { "FAIL" }
        );
    }
    out
}

fn size_label(size: usize) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) { format!("{} MiB", size >> 20) } else { format!("{size} B") }
}

/// A heap buffer whose usable part starts at a 64-byte boundary.
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn zeroed(len: usize) -> Self {
        let storage = vec![0u8; len + 64];
        let start = storage.as_ptr().align_offset(64);
        AlignedBuf { storage, start, len }
    }

    fn pseudo_random(len: usize, seed: u64) -> Self {
        let mut b = Self::zeroed(len);
        let mut x = seed | 1;
        for byte in b.as_mut_slice() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *byte = (x >> 24) as u8;
        }
        b
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}
