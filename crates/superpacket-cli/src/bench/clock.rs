//! A probe of how fast the measuring core runs right now.
//!
//! The machines the benchmarks run on are shared virtual machines whose
//! core clock moves under the host's load: a probe pinned to one vCPU of
//! the 2-vCPU AMD EPYC guest measured spells of 0.1-1 s at about 2.0 GHz
//! between stretches at 3.5-3.7 GHz (docs/benchmarks.md, "Slow spells are
//! the core's clock"). Code that is bound by the core slows with the clock,
//! code that waits on memory much less, so two engines' ratio moves with
//! the spells. The probe does not correct any figure: it says, beside each
//! row, how fast the core was while the row was measured, so that a reader
//! can tell a disturbed row from a real change.
//!
//! What it times: a chain of steps in registers, each an exclusive or and
//! a multiplication of the value the step before made, so no two overlap
//! and the time per step is a fixed number of core cycles (4 on current
//! x86 cores). The chain stays in registers: a chain through memory
//! (`black_box` on every step) measured twice as fast in some rows of a
//! run as in others on the EPYC, as the core forwarded the stores or not.

use std::hint::black_box;
use std::time::Instant;

/// Steps of one probe: about 1.1 ms at 3.6 GHz on the EPYC above.
pub const PROBE_STEPS: u64 = 1_000_000;

/// Nanoseconds per step of the dependent chain, timed once now.
pub fn probe_ns_per_step() -> f64 {
    let mut x = black_box(1u64);
    let steps = black_box(PROBE_STEPS);
    let start = Instant::now();
    for step in 0..steps {
        x = (x ^ step).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    black_box(x);
    start.elapsed().as_secs_f64() * 1e9 / PROBE_STEPS as f64
}

/// The core's speed at each probe relative to the fastest probe of
/// `all` (1.0 = as fast as the fastest; 0.55 = the clock at 55% of it).
/// Probes that are not positive finite numbers are left out.
pub fn relative_speeds(probes: &[f64], all: &[f64]) -> Vec<f64> {
    let fastest = all.iter().copied().filter(|ns| ns.is_finite() && *ns > 0.0).fold(f64::INFINITY, f64::min);
    probes.iter().copied().filter(|ns| ns.is_finite() && *ns > 0.0).map(|ns| fastest / ns).collect()
}

/// A probe slower than this share of the run's fastest counts as slow
/// (a spell at about 2.0 GHz against 3.6 is 0.55).
pub const SLOW_BELOW: f64 = 0.8;

/// How fast the core ran over a set of probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreSpeed {
    /// Median relative speed.
    pub median: f64,
    /// Lowest relative speed (a probe preempted by another thread is low too).
    pub lowest: f64,
    /// Share of the probes below [`SLOW_BELOW`].
    pub slow_share: f64,
}

/// Summary of `speeds` (from [`relative_speeds`]), or `None` when empty.
pub fn summarise(speeds: &[f64]) -> Option<CoreSpeed> {
    if speeds.is_empty() {
        return None;
    }
    let lowest = speeds.iter().copied().fold(f64::INFINITY, f64::min);
    let slow = speeds.iter().filter(|s| **s < SLOW_BELOW).count();
    Some(CoreSpeed { median: super::median(speeds), lowest, slow_share: slow as f64 / speeds.len() as f64 })
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
    fn speeds_are_relative_to_the_fastest_probe_of_the_run() {
        let all = [0.3, 0.6, 0.4, f64::NAN, 0.0];
        let row = [0.6, 0.3, f64::NAN];
        let speeds = relative_speeds(&row, &all);
        assert_eq!(speeds, vec![0.5, 1.0]);
        assert_eq!(summarise(&speeds), Some(CoreSpeed { median: 0.75, lowest: 0.5, slow_share: 0.5 }));
        assert_eq!(summarise(&[]), None);
    }
}
