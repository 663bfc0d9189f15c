//! Probes of how fast the measuring core and its memory are right now.
//!
//! The machines the benchmarks run on are shared virtual machines: the
//! core's clock and the cache and memory other guests share move under the
//! host's load, and two engines do not slow alike (code bound by the core
//! slows with the clock, code waiting on memory with the memory). The
//! probes correct no figure: they say, beside each row, what the machine
//! was like while the row was measured, so that a reader can tell a
//! disturbed row from a real change (docs/benchmarks.md, "Slow spells").
//!
//! - The **core probe** times a chain of additions, each taking one
//!   cycle and depending on the one before (each addend passes through
//!   [`std::hint::black_box`], so the compiler cannot sum the chain in
//!   closed form). A chain of one-cycle steps needs the core's whole issue
//!   rate for this thread: it slows when the clock drops and when another
//!   thread shares the core (a busy SMT sibling). On the EPYC here a run of
//!   `bench peers` whose rows came out 30-35% slower had this chain at
//!   about 0.52 ns per step instead of 0.28, while a chain of 4-cycle
//!   steps (exclusive or and multiply) kept its full speed: the spells are
//!   not the clock. Its speed is given relative to the run's fastest probe.
//! - The **memory probe** times dependent loads through [`CHASE_BYTES`]
//!   (beyond one core's L2, within the L3 other guests share) in a random
//!   cyclic order, each load waiting for the one before, so no prefetcher
//!   helps; each probe goes on where the last stopped, so the probes walk
//!   the whole table. Its latency is given in ns: about 15 when the table
//!   stays in the L3, 100 and more when it has to come from memory.

use std::hint::black_box;
use std::time::Instant;

/// Steps of one probe: about 0.54 ms at full speed on the EPYC above.
pub const PROBE_STEPS: u64 = 1_000_000;

/// Nanoseconds per step of the dependent chain, timed once now.
pub fn probe_ns_per_step() -> f64 {
    let mut x = black_box(1u64);
    let steps = black_box(PROBE_STEPS);
    let start = Instant::now();
    for step in 0..steps {
        x = x.wrapping_add(black_box(step));
    }
    black_box(x);
    start.elapsed().as_secs_f64() * 1e9 / PROBE_STEPS as f64
}

/// Bytes the memory probe chases through: 4 MiB, beyond the 1 MiB L2 of
/// one core of the EPYC above and within its shared 32 MiB L3, like the
/// peers rows' inputs (1-1.6 MB) with the other rows' buffers around them.
pub const CHASE_BYTES: usize = 4 << 20;

/// Loads of one memory probe (0.3 ms at 15 ns each, 2 ms at 100).
pub const CHASE_LOADS: usize = 20_000;

/// `u32` words per 64-byte cache line: the chase visits one word per line.
const LINE_WORDS: usize = 16;

/// The chase table: word `16 * i` of line `i` holds the word index of the
/// next line to visit, the lines forming one cycle in a random order
/// (Sattolo's shuffle with a fixed seed, so every run chases alike).
fn chase_table() -> &'static [u32] {
    static TABLE: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let lines = CHASE_BYTES / 64;
        let mut order: Vec<u32> = (0..lines as u32).collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for i in (1..lines).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(i, (seed % i as u64) as usize);
        }
        let mut table = vec![0u32; lines * LINE_WORDS];
        for (i, &line) in order.iter().enumerate() {
            let next = order[(i + 1) % lines];
            table[line as usize * LINE_WORDS] = next * LINE_WORDS as u32;
        }
        table
    })
}

/// Nanoseconds per load of the memory chase, timed once now, going on
/// from where the previous probe of this process stopped.
pub fn probe_ns_per_load() -> f64 {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static POSITION: AtomicUsize = AtomicUsize::new(0);
    let table = chase_table();
    let mut at = black_box(POSITION.load(Ordering::Relaxed));
    let start = Instant::now();
    for _ in 0..CHASE_LOADS {
        at = table[at] as usize;
    }
    let elapsed = start.elapsed();
    POSITION.store(at, Ordering::Relaxed);
    elapsed.as_secs_f64() * 1e9 / CHASE_LOADS as f64
}

/// Both probes, taken one after the other.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// [`probe_ns_per_step`].
    pub core_ns: f64,
    /// [`probe_ns_per_load`].
    pub memory_ns: f64,
}

/// Takes both probes.
pub fn probe() -> Probe {
    Probe { core_ns: probe_ns_per_step(), memory_ns: probe_ns_per_load() }
}

/// The probes that measured something: positive finite times.
fn measured(probes: &[f64]) -> impl Iterator<Item = f64> + '_ {
    probes.iter().copied().filter(|ns| ns.is_finite() && *ns > 0.0)
}

/// The core's speed at each probe relative to the fastest probe of
/// `all` (1.0 = as fast as the fastest; 0.5 = half its rate). Probes
/// that are not positive finite numbers are left out.
pub fn relative_speeds(probes: &[f64], all: &[f64]) -> Vec<f64> {
    let fastest = measured(all).fold(f64::INFINITY, f64::min);
    measured(probes).map(|ns| fastest / ns).collect()
}

/// A probe slower than this share of the run's fastest counts as slow
/// (a spell at half the issue rate is 0.5).
pub const SLOW_BELOW: f64 = 0.8;

/// How fast the core (or the memory) was over a set of probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Speed {
    /// Median relative speed.
    pub median: f64,
    /// Lowest relative speed (a probe preempted by another thread is low too).
    pub lowest: f64,
    /// Share of the probes below [`SLOW_BELOW`].
    pub slow_share: f64,
}

/// Summary of `speeds` (from [`relative_speeds`]), or `None` when empty.
pub fn summarise(speeds: &[f64]) -> Option<Speed> {
    if speeds.is_empty() {
        return None;
    }
    let lowest = speeds.iter().copied().fold(f64::INFINITY, f64::min);
    let slow = speeds.iter().filter(|s| **s < SLOW_BELOW).count();
    Some(Speed { median: super::median(speeds), lowest, slow_share: slow as f64 / speeds.len() as f64 })
}

/// Lowest, median and highest of a set of memory probes, in ns per load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Lowest ns per load.
    pub lowest_ns: f64,
    /// Median ns per load.
    pub median_ns: f64,
    /// Highest ns per load.
    pub highest_ns: f64,
}

/// Summary of memory probes, or `None` when there are none.
pub fn latency(ns_per_load: &[f64]) -> Option<Latency> {
    let valid: Vec<f64> = measured(ns_per_load).collect();
    if valid.is_empty() {
        return None;
    }
    Some(Latency {
        lowest_ns: valid.iter().copied().fold(f64::INFINITY, f64::min),
        median_ns: super::median(&valid),
        highest_ns: valid.iter().copied().fold(0.0, f64::max),
    })
}

/// Length of one window of `superpacket bench clock`.
pub const WINDOW_SECS: f64 = 0.05;

/// Options of [`run`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOptions {
    /// How long to probe.
    pub seconds: f64,
    /// The CPU to probe on (pinned for the run).
    pub cpu: usize,
}

/// `superpacket bench clock`: probes the core and the memory for
/// `opts.seconds` on `opts.cpu`, in windows of [`WINDOW_SECS`] (each
/// window's median probe); reports the core probe's fastest window, each
/// window's speed relative to it (median, lowest, share below
/// [`SLOW_BELOW`]) and its slow spells (runs of slow windows: how many,
/// the longest, their median speed), and the memory probe's lowest,
/// median and highest window in ns per load.
pub fn run(opts: &ClockOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> super::BenchReport {
    let _restore = superpacket_engine::io::affinity::Restore::current();
    let pinned = superpacket_engine::io::affinity::pin(opts.cpu).is_ok();
    chase_table();
    let start = Instant::now();
    let (mut core, mut memory) = (Vec::new(), Vec::new());
    let total = (opts.seconds / WINDOW_SECS).ceil() as usize;
    while start.elapsed().as_secs_f64() < opts.seconds {
        let window_start = start.elapsed().as_secs_f64();
        let mut probes = Vec::new();
        while start.elapsed().as_secs_f64() - window_start < WINDOW_SECS {
            probes.push(probe());
        }
        core.push(super::median(&probes.iter().map(|p| p.core_ns).collect::<Vec<_>>()));
        memory.push(super::median(&probes.iter().map(|p| p.memory_ns).collect::<Vec<_>>()));
        on_step("probing the core and the memory", core.len(), total);
    }
    let mut report = super::BenchReport::new("clock");
    report.push("pinned_cpu", if pinned { opts.cpu as f64 } else { f64::NAN }, "cpu");
    report.push("windows", core.len() as f64, "windows");
    report.push("window_secs", WINDOW_SECS, "s");
    report.push("core_fastest_ns", core.iter().copied().fold(f64::INFINITY, f64::min), "ns per step");
    let speeds = relative_speeds(&core, &core);
    if let Some(speed) = summarise(&speeds) {
        report.push("core_speed_median", speed.median, "x");
        report.push("core_speed_lowest", speed.lowest, "x");
        report.push("core_slow_share", speed.slow_share, "share");
    }
    let spells = slow_spells(&speeds);
    report.push("core_slow_spells", spells.len() as f64, "spells");
    let longest = spells.iter().map(ExactSizeIterator::len).max().unwrap_or(0);
    report.push("core_longest_slow_spell_secs", longest as f64 * WINDOW_SECS, "s");
    let slow: Vec<f64> = spells.iter().flat_map(|r| speeds[r.clone()].iter().copied()).collect();
    report.push("core_slow_spell_speed_median", super::median(&slow), "x");
    if let Some(l) = latency(&memory) {
        report.push("memory_ns_median", l.median_ns, "ns per load");
        report.push("memory_ns_highest", l.highest_ns, "ns per load");
        report.push("memory_ns_lowest", l.lowest_ns, "ns per load");
    }
    report
}

/// The runs of consecutive windows slower than [`SLOW_BELOW`].
fn slow_spells(speeds: &[f64]) -> Vec<std::ops::Range<usize>> {
    let mut spells = Vec::new();
    let mut open: Option<usize> = None;
    for (i, s) in speeds.iter().enumerate() {
        match (open, *s < SLOW_BELOW) {
            (None, true) => open = Some(i),
            (Some(from), false) => {
                spells.push(from..i);
                open = None;
            }
            _ => {}
        }
    }
    if let Some(from) = open {
        spells.push(from..speeds.len());
    }
    spells
}

/// The report of [`run`] for people.
pub fn render_human(report: &super::BenchReport) -> String {
    let get = |name: &str| report.get(name).unwrap_or(f64::NAN);
    let core = get("core_fastest_ns");
    format!(
        "superpacket bench clock: {} windows of {:.0} ms on CPU {}\n\
         core: a chain of one-cycle additions, fastest window {core:.3} ns per step\n  \
         speed relative to the fastest window: median {:.2}, lowest {:.2}; {:.1}% of windows below {SLOW_BELOW}\n  \
         slow spells (consecutive windows below {SLOW_BELOW}): {}, longest {:.2} s, median speed in them {:.2}\n\
         memory: dependent loads through {} MiB, ns per load: lowest window {:.1}, median {:.1}, highest {:.1}\n",
        get("windows"),
        get("window_secs") * 1000.0,
        get("pinned_cpu"),
        get("core_speed_median"),
        get("core_speed_lowest"),
        get("core_slow_share") * 100.0,
        get("core_slow_spells"),
        get("core_longest_slow_spell_secs"),
        get("core_slow_spell_speed_median"),
        CHASE_BYTES >> 20,
        get("memory_ns_lowest"),
        get("memory_ns_median"),
        get("memory_ns_highest"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_takes_positive_time_per_step() {
        let ns = probe_ns_per_step();
        assert!(ns.is_finite() && ns > 0.0 && ns < 1000.0, "{ns}");
    }

    #[test]
    fn the_chase_visits_every_line_once_per_cycle() {
        let table = chase_table();
        let lines = CHASE_BYTES / 64;
        let mut seen = vec![false; lines];
        let mut at = 0usize;
        for _ in 0..lines {
            assert_eq!(at % LINE_WORDS, 0);
            assert!(!seen[at / LINE_WORDS], "line {} visited twice", at / LINE_WORDS);
            seen[at / LINE_WORDS] = true;
            at = table[at] as usize;
        }
        assert_eq!(at, 0, "one cycle through every line");
        assert!(probe_ns_per_load() > 0.0);
    }

    #[test]
    fn slow_spells_are_runs_of_slow_windows() {
        let speeds = [1.0, 0.5, 0.6, 1.0, 0.9, 0.7, 1.0, 0.3];
        assert_eq!(slow_spells(&speeds), vec![1..3, 5..6, 7..8]);
        assert!(slow_spells(&[1.0, 0.95]).is_empty());
    }

    #[test]
    fn a_short_run_reports_its_windows() {
        let report = run(&ClockOptions { seconds: 0.2, cpu: 0 }, &mut |_, _, _| {});
        let windows = report.get("windows").unwrap();
        assert!((3.0..=5.0).contains(&windows), "{windows}");
        let median = report.get("core_speed_median").unwrap();
        assert!(median > 0.0 && median <= 1.0, "{median}");
        let (lowest, highest) = (report.get("memory_ns_lowest").unwrap(), report.get("memory_ns_highest").unwrap());
        assert!(0.0 < lowest && lowest <= highest, "{lowest} {highest}");
        assert!(render_human(&report).contains("memory: dependent loads"));
    }

    #[test]
    fn speeds_are_relative_to_the_fastest_probe_of_the_run() {
        let all = [0.3, 0.6, 0.4, f64::NAN, 0.0];
        let row = [0.6, 0.3, f64::NAN];
        let speeds = relative_speeds(&row, &all);
        assert_eq!(speeds, vec![0.5, 1.0]);
        assert_eq!(summarise(&speeds), Some(Speed { median: 0.75, lowest: 0.5, slow_share: 0.5 }));
        assert_eq!(summarise(&[]), None);
        assert_eq!(
            latency(&[20.0, f64::NAN, 100.0, 30.0]),
            Some(Latency { lowest_ns: 20.0, median_ns: 30.0, highest_ns: 100.0 })
        );
        assert_eq!(latency(&[]), None);
    }
}
