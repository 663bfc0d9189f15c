//! `superpacket bench gro`: the GRO engine alone, on pre-built packets.
//!
//! Every figure times `receive_burst` + `flush` (at each batch end) + taking
//! the delivered packets, over packets built before the clock starts (copies
//! of template frames); dropping the delivered packets happens after the clock
//! stops. One core, one engine. Figures are the median of the samples.
//!
//! A sample is 1024 packets, the buffers of a 1024-descriptor receive ring
//! (about 1.6 MB: in L2/L3 as after a NIC's DMA). `..._cold` repeats the
//! 64-flow case over 16384 packets (26 MB), so most headers miss the caches:
//! what a ring much larger than the caches would cost.
//!
//! | name | traffic | batch |
//! |---|---|---|
//! | `gro_mpps_1flow` | one TCP/IPv4 flow of 1448-byte segments (timestamps on) | 64 |
//! | `gro_mpps_64flows` | 64 flows sending bursts of 8 segments, bursts interleaved (merging: 8 segments per superpacket) | 64 |
//! | `gro_mpps_64flows_nomerge` | 64 flows round-robin, one segment per flow per batch (no merging possible) | 64 |
//! | `..._validated` | the same with `CHECKSUM_UNNECESSARY` (no checksum summed) | |
//! | `gro_mpps_64flows_validated_cold` | the 64-flow merging case over 16384 packets (cache-cold headers) | 64 |
//! | `agg_1000flows_gro`, `agg_1000flows_lro` | 1000 flows, 128 bursts of 16 segments in flight at a time, interleaved packet by packet in random order (deterministic); wire packets per delivered packet, without and with LRO sorting | 1024 (iflib's sort array) for both |
//!
//! Targets: `gro_mpps_64flows_validated >= 20`, `gro_mpps_64flows >= 10`
//! (Mpps per core), `agg_1000flows_lro / agg_1000flows_gro >= 3`.

use std::hint::black_box;
use std::time::Instant;

use super::{BenchReport, format_value, median};
use superpacket::offload::gro::{Gro, GroConfig};
use superpacket::packet::{ChecksumState, DEFAULT_HEADROOM, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

/// Options of [`run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroBenchOptions {
    /// Much shorter measurement (for tests and smoke runs).
    pub quick: bool,
}

/// The targets: `(result name, minimum)`.
pub const TARGETS: [(&str, f64); 3] =
    [("gro_mpps_64flows_validated", 20.0), ("gro_mpps_64flows", 10.0), ("agg_1000flows_lro_ratio", 3.0)];

/// Segment payload size of every scenario.
pub const MSS: usize = 1448;

/// A traffic pattern: template frames in arrival order and the batch size.
pub struct Pattern {
    /// Frames in arrival order.
    pub frames: Vec<Vec<u8>>,
    /// Receive batch (flush after this many frames).
    pub batch: usize,
}

/// `flows` TCP/IPv4 flows, each sending bursts of `burst` back-to-back
/// segments, bursts interleaved round-robin; `total` frames.
pub fn bursts(flows: usize, burst: usize, total: usize, batch: usize) -> Pattern {
    let mut fl: Vec<Flow> = (0..flows).map(|i| Flow::new(FlowSpec::new(Transport::Tcp, false, i as u32))).collect();
    let mut frames = Vec::with_capacity(total);
    'outer: loop {
        for f in fl.iter_mut() {
            for _ in 0..burst {
                if frames.len() == total {
                    break 'outer;
                }
                frames.push(f.frame(MSS, TcpFlags::empty()).expect("frame"));
            }
        }
    }
    Pattern { frames, batch }
}

/// The 1000-flow mix: `in_flight` bursts of `burst` segments at a time, drawn
/// packet by packet in random (deterministic) order; a finished burst is
/// replaced by the next flow's (round-robin over `flows`).
pub fn many_flows(flows: usize, in_flight: usize, burst: usize, total: usize, batch: usize) -> Pattern {
    let fl: Vec<Flow> = (0..flows).map(|i| Flow::new(FlowSpec::new(Transport::Tcp, false, i as u32))).collect();
    interleaved_bursts(fl, in_flight, burst, total, batch, 0x9E37_79B9_7F4A_7C15)
}

/// [`many_flows`] over the given flows (at least one), with the random order drawn from
/// `seed` (non-zero; a different seed gives another arrival order of the
/// same traffic).
pub fn interleaved_bursts(
    mut fl: Vec<Flow>,
    in_flight: usize,
    burst: usize,
    total: usize,
    batch: usize,
    seed: u64,
) -> Pattern {
    let flows = fl.len();
    let mut active: Vec<(usize, usize)> = (0..in_flight.min(flows)).map(|i| (i, burst)).collect();
    let mut next = active.len() % flows;
    let mut x = seed.max(1);
    let mut frames = Vec::with_capacity(total);
    while frames.len() < total {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let slot = (x % active.len() as u64) as usize;
        let (flow, left) = &mut active[slot];
        frames.push(fl[*flow].frame(MSS, TcpFlags::empty()).expect("frame"));
        *left -= 1;
        if *left == 0 {
            *flow = next;
            *left = burst;
            next = (next + 1) % flows;
        }
    }
    Pattern { frames, batch }
}

/// The result of timing one pattern.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Million packets per second (median of the samples).
    pub mpps: f64,
    /// Million packets per second of the fastest sample (the least disturbed
    /// by other load on the machine).
    pub best_mpps: f64,
    /// Wire packets per delivered packet.
    pub aggregation: f64,
}

/// The receive bursts (a ring's worth of buffers each) of `frames`, built
/// before a timed run: `batch` packets per burst, each with checksum state
/// `csum`.
pub fn receive_bursts(frames: &[Vec<u8>], batch: usize, csum: ChecksumState) -> Vec<Vec<Packet>> {
    let meta = OffloadMeta { csum, ..OffloadMeta::default() };
    let packet = |f: &Vec<u8>| {
        let mut pkt = Packet::from_frame(f);
        pkt.meta = meta;
        pkt
    };
    frames.chunks(batch.max(1)).map(|chunk| chunk.iter().map(packet).collect()).collect()
}

/// As [`receive_bursts`], but each packet's buffer comes from `spare`
/// (lowest address first; new buffers only when it runs out), which the
/// caller refills from the previous sample's output with
/// [`Packet::into_buffers`]: every sample then works on the same memory, as
/// a driver refilling its receive ring does, and as the peers' harnesses
/// do (DPDK's mbufs return to their mempool, tun-rs's buffer array is
/// reused).
pub fn refill_bursts(
    frames: &[Vec<u8>],
    batch: usize,
    csum: ChecksumState,
    spare: &mut Vec<Vec<u8>>,
) -> Vec<Vec<Packet>> {
    let meta = OffloadMeta { csum, ..OffloadMeta::default() };
    spare.sort_unstable_by_key(|b| std::cmp::Reverse(b.as_ptr() as usize));
    let mut packet = |f: &Vec<u8>| {
        let mut buf = spare.pop().unwrap_or_default();
        buf.clear();
        buf.resize(DEFAULT_HEADROOM, 0);
        buf.extend_from_slice(f);
        let tail = buf.len();
        let mut pkt = Packet::from_storage(buf, DEFAULT_HEADROOM, tail).expect("the frame was just written");
        pkt.meta = meta;
        pkt
    };
    frames.chunks(batch.max(1)).map(|chunk| chunk.iter().map(&mut packet).collect()).collect()
}

/// Times the engine over the pattern: `samples` rounds, each over copies of
/// all template frames built beforehand.
pub fn time_pattern(p: &Pattern, cfg: GroConfig, csum: ChecksumState, samples: usize) -> Timing {
    let mut gro = Gro::new(cfg);
    let mut sink: Vec<Packet> = Vec::with_capacity(p.frames.len());
    let mut per_sample = Vec::with_capacity(samples);
    for _ in 0..samples.max(1) {
        let mut bursts = receive_bursts(&p.frames, p.batch, csum);
        gro.reset_counters();
        let start = Instant::now();
        for burst in bursts.iter_mut() {
            gro.receive_burst(burst);
            gro.flush();
            gro.take_delivered_into(&mut sink);
        }
        let elapsed = start.elapsed();
        black_box(&sink);
        sink.clear();
        per_sample.push(p.frames.len() as f64 / elapsed.as_secs_f64().max(1e-12) / 1e6);
    }
    let best_mpps = per_sample.iter().copied().fold(0.0, f64::max);
    Timing { mpps: median(&per_sample), best_mpps, aggregation: gro.counters().aggregation() }
}

/// Runs the benchmark.
pub fn run(opts: &GroBenchOptions) -> BenchReport {
    run_with_progress(opts, &mut |_, _, _| {})
}

/// Runs the benchmark, calling `on_step(description, step, total_steps)`
/// before each step and once more with `step == total_steps` when done.
pub fn run_with_progress(opts: &GroBenchOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    let (total, samples) = if opts.quick { (1024, 3) } else { (1024, 301) };
    let validated = ChecksumState::Unnecessary { level: 0 };
    let verify = ChecksumState::None;
    let linux = GroConfig::default();
    let scenarios: [(&str, Pattern); 3] = [
        ("gro_mpps_1flow", bursts(1, 1, total, 64)),
        ("gro_mpps_64flows", bursts(64, 8, total, 64)),
        ("gro_mpps_64flows_nomerge", bursts(64, 1, total, 64)),
    ];
    let steps = scenarios.len() * 2 + 2;
    let mut step = 0;
    let mut report = BenchReport::new("gro");
    // Warm-up: page in the code and the allocator.
    let _ = time_pattern(&scenarios[0].1, linux, validated, 2);
    for (name, pattern) in &scenarios {
        for (suffix, csum) in [("", verify), ("_validated", validated)] {
            on_step(&format!("{name}{suffix}"), step, steps);
            step += 1;
            let t = time_pattern(pattern, linux, csum, samples);
            report.push(format!("{name}{suffix}"), t.mpps, "Mpps");
            if suffix.is_empty() {
                let agg = name.replacen("gro_mpps", "agg", 1);
                report.push(agg, t.aggregation, "pkts/out");
            }
        }
    }
    let cold = bursts(64, 8, if opts.quick { 4096 } else { 16384 }, 64);
    let t = time_pattern(&cold, linux, validated, if opts.quick { 1 } else { 15 });
    report.push("gro_mpps_64flows_validated_cold", t.mpps, "Mpps");
    let mix = many_flows(1000, 128, 16, if opts.quick { 8192 } else { 32768 }, 1024);
    let agg_samples = if opts.quick { 1 } else { 5 };
    on_step("agg_1000flows_gro", step, steps);
    step += 1;
    let g = time_pattern(&mix, linux, validated, agg_samples);
    on_step("agg_1000flows_lro", step, steps);
    let l = time_pattern(&mix, GroConfig { lro: true, ..linux }, validated, agg_samples);
    report.push("agg_1000flows_gro", g.aggregation, "pkts/out");
    report.push("agg_1000flows_lro", l.aggregation, "pkts/out");
    report.push("agg_1000flows_lro_ratio", l.aggregation / g.aggregation, "x");
    report.push("gro_mpps_1000flows_validated", g.mpps, "Mpps");
    report.push("lro_mpps_1000flows_validated", l.mpps, "Mpps");
    for (name, min) in TARGETS {
        let v = report.get(name).unwrap_or(f64::NAN);
        report.push(format!("target_{name}_pass"), if v >= min { 1.0 } else { 0.0 }, "bool");
    }
    on_step("done", steps, steps);
    report
}

/// Human-readable rendering: the figures, then PASS/FAIL per target.
pub fn render_human(report: &BenchReport) -> String {
    let mut out = String::from("gro benchmark (one core; receive + flush + take on pre-built packets)\n");
    let w = report.results.iter().map(|r| r.name.len()).max().unwrap_or(4);
    for r in report.results.iter().filter(|r| !r.name.starts_with("target_")) {
        out += &format!("  {:<w$}  {:>9}  {}\n", r.name, format_value(r.value), r.unit);
    }
    for (name, min) in TARGETS {
        let v = report.get(name).unwrap_or(f64::NAN);
        out += &format!("target {name} >= {min}: {} {}\n", format_value(v), if v >= min { "PASS" } else { "FAIL" });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_reports_every_figure() {
        let r = run(&GroBenchOptions { quick: true });
        for name in [
            "gro_mpps_1flow",
            "gro_mpps_1flow_validated",
            "gro_mpps_64flows",
            "gro_mpps_64flows_validated",
            "gro_mpps_64flows_nomerge_validated",
            "agg_1000flows_gro",
            "agg_1000flows_lro",
        ] {
            let v = r.get(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(v > 0.0 && v.is_finite(), "{name} = {v}");
        }
        assert!(r.get("agg_64flows").unwrap() > 6.0, "bursts of 8 merge");
        assert!((r.get("agg_64flows_nomerge").unwrap() - 1.0).abs() < 1e-9, "round-robin does not");
        assert!(r.get("agg_1flow").unwrap() > 30.0);
        assert!(r.get("agg_1000flows_lro_ratio").unwrap() >= 3.0);
        assert!(render_human(&r).contains("target"));
    }
}
