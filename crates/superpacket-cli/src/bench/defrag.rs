//! `superpacket bench defrag-coalesce`: why reassembly must coalesce, in a
//! model of the receiving port, and what reassembly costs against memcpy.
//!
//! # The ring-pressure model
//! A sender streams UDP datagrams of 60000 payload bytes over a 1500-byte
//! MTU (IPv4: 41 fragments; IPv6: 42) at a line rate of 10 Gbit/s (each frame
//! also costs 24 bytes of preamble, FCS and gap on the wire). Each fragment is
//! lost on the wire with probability `p` (0.1 %, 0.5 %, 1 %; a seeded hash of
//! datagram and fragment number, so every configuration sees the same
//! losses). The receiving port has a ring of 256 receive buffers: a fragment
//! arriving when no buffer is free is dropped by the NIC. A buffer is free
//! again when its packet is released. The host is infinitely fast: every
//! received fragment goes straight to the real [`Reassembler`] (Linux
//! defaults: 4 MiB / 3 MiB, 30 s / 60 s), on a [`ManualClock`] that follows
//! the arrival times, and every complete datagram is consumed at once.
//! - **coalescing** ([`Delivery::Local`]): each fragment's payload is copied
//!   into the datagram buffer and its receive buffer released immediately;
//! - **no coalescing** ([`Delivery::Forward`], the held-fragments mode Linux
//!   used for IPv6 between 2018 and 2019): the reassembler holds each
//!   fragment's buffer until its datagram completes or its queue dies. The
//!   ring's free count is `256 - Reassembler::held_fragments()`.
//!
//! A lost fragment leaves its datagram incomplete. Without coalescing, its
//! ~40 buffers stay out of the ring until the queue times out (30 s / 60 s);
//! after about six such datagrams the ring is empty and every later fragment
//! is dropped by the NIC, so nothing completes until a timeout returns
//! buffers: goodput collapses (the 6.6 Gbit/s -> 9 Mbit/s of the issue).
//! The memory thresholds never help, because 256 held buffers are far below
//! 4 MiB. With coalescing the ring never runs dry; incomplete datagrams hold
//! memory instead, and with Linux's `DropNew` policy those fill the 4 MiB in
//! a few milliseconds and then every fragment is refused until timeouts free
//! memory: goodput collapses too (reported as `*_dropnew_*`). With
//! [`MemoryPolicy::EvictOldest`] the oldest (dead) queues are reclaimed and
//! coalescing keeps the line busy. The headline figures compare both modes
//! under `EvictOldest` (the policy cannot rescue the non-coalescing mode).
//!
//! Windows of virtual time: two timeout periods (60 s IPv4, 120 s IPv6),
//! fast-forwarding while nothing can be received; coalescing with eviction is
//! stationary after ~20 ms and is simulated for 2 s (0.25 s with `--quick`).
//!
//! # Reassembly against memcpy
//! In-order reassembly of one 60000-byte UDP datagram from its fragments in
//! receive buffers ([`Reassembler::push_frame`], coalescing: parse, lookup,
//! run insertion, copy, header fix, buffer handed over), against one memcpy
//! of the datagram's IP bytes, interleaved in the same run. Target: ratio >= 0.5.

use std::hint::black_box;

use super::{BenchReport, MeasureConfig, batch, measure_interleaved, median};
use superpacket::offload::frag::{
    Delivery, Family, FragmentRequest, Fragmenter, Ipv6IdGenerator, ManualClock, MemoryPolicy, ReasmConfig,
    Reassembler, Scope, Verdict,
};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

/// UDP payload of each datagram.
pub const PAYLOAD: usize = 60000;
/// Receive ring size.
pub const RING: usize = 256;
/// Line rate, bit/s.
pub const LINE_BPS: f64 = 10e9;
/// Per-frame wire overhead: preamble + SFD 8, FCS 4, inter-frame gap 12.
pub const WIRE_OVERHEAD: usize = 24;
/// Loss rates simulated.
pub const LOSSES: [f64; 3] = [0.001, 0.005, 0.01];
/// Target: coalescing goodput / no-coalescing goodput at 0.5 % loss.
pub const TARGET_RATIO: f64 = 20.0;
/// Target: in-order reassembly throughput / memcpy throughput.
pub const TARGET_REASM: f64 = 0.5;

/// Options of [`run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DefragBenchOptions {
    /// Shorter simulation and measurement (figures indicative only).
    pub quick: bool,
}

/// Outcome of one simulated configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimResult {
    /// Datagrams delivered.
    pub delivered: u64,
    /// Virtual seconds simulated.
    pub seconds: f64,
    /// Fragments lost on the wire.
    pub lost: u64,
    /// Fragments dropped because the ring was empty.
    pub ring_drops: u64,
    /// Fragments refused by the reassembler (memory, etc.).
    pub reasm_drops: u64,
}

impl SimResult {
    /// UDP payload goodput, Gbit/s.
    pub fn goodput_gbps(&self) -> f64 {
        self.delivered as f64 * PAYLOAD as f64 * 8.0 / self.seconds / 1e9
    }
    /// Datagrams per second.
    pub fn datagrams_per_s(&self) -> f64 {
        self.delivered as f64 / self.seconds
    }
}

/// One datagram's fragment frames for the family.
pub fn fragment_set(v6: bool) -> Vec<Vec<u8>> {
    let mut spec = FlowSpec::new(Transport::Udp, v6, 9);
    spec.dont_frag = false;
    let d = Flow::new(spec).frame(PAYLOAD, TcpFlags::empty()).expect("60000 bytes fit in one datagram");
    let mut out = Vec::new();
    Fragmenter::with_ids(Ipv6IdGenerator::with_seed(9))
        .fragment(Packet::from_frame(&d), &FragmentRequest::local(1500), &mut out)
        .expect("fragmentable");
    out.iter().map(Packet::to_vec).collect()
}

fn lost(seed: u64, d: u64, k: usize, p: f64) -> bool {
    let mut x = seed ^ d.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (k as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    ((x >> 11) as f64 / (1u64 << 53) as f64) < p
}

/// Gives fragment `frame` the identification of datagram `d`.
fn set_ident(p: &mut Packet, v6: bool, d: u64) {
    let f = p.linear_mut();
    if v6 {
        f[14 + 44..14 + 48].copy_from_slice(&((d as u32) | 0x4000_0000).to_be_bytes());
    } else {
        let old = u16::from_be_bytes([f[18], f[19]]);
        let new = d as u16;
        f[18..20].copy_from_slice(&new.to_be_bytes());
        let c = superpacket::csum::update_u16(u16::from_be_bytes([f[24], f[25]]), old, new);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
}

/// Simulates the ring-pressure model for `window_s` virtual seconds.
pub fn simulate(v6: bool, loss: f64, delivery: Delivery, policy: MemoryPolicy, window_s: f64, seed: u64) -> SimResult {
    let frags = fragment_set(v6);
    let wire_ns: Vec<u64> =
        frags.iter().map(|f| (((f.len() + WIRE_OVERHEAD) * 8) as f64 / LINE_BPS * 1e9).round() as u64).collect();
    let period: u64 = wire_ns.iter().sum();
    let n = frags.len();
    let family = if v6 { Family::V6 } else { Family::V4 };
    let clock = ManualClock::new(0);
    let cfg = ReasmConfig { delivery, policy, ..ReasmConfig::default() };
    let mut r = Reassembler::with_clock(cfg, clock.clone());
    let window = (window_s * 1e9) as u64;
    let mut res = SimResult { delivered: 0, seconds: window_s, lost: 0, ring_drops: 0, reasm_drops: 0 };
    let (mut d, mut k, mut t) = (0u64, 0usize, 0u64);
    let mut icmp = Vec::new();
    while t < window {
        if r.next_deadline().is_some_and(|dl| dl <= t) {
            clock.set(t);
            r.expire(&mut icmp);
            icmp.clear();
        }
        let ring_empty = r.held_fragments() >= RING;
        let mem_full = policy == MemoryPolicy::DropNew && r.over_high_thresh(family);
        if ring_empty || mem_full {
            // Nothing can be received until the next expiry: fast-forward.
            let until = r.next_deadline().unwrap_or(u64::MAX).min(window);
            let before = (d, k);
            if k == 0 && until > t {
                let periods = (until - t) / period;
                d += periods;
                t += periods * period;
            }
            while t < until {
                t += wire_ns[k];
                k += 1;
                if k == n {
                    k = 0;
                    d += 1;
                }
            }
            let skipped = (d - before.0) * n as u64 + k as u64 - before.1 as u64;
            if ring_empty {
                res.ring_drops += skipped;
            } else {
                res.reasm_drops += skipped;
            }
            continue;
        }
        if lost(seed, d, k, loss) {
            res.lost += 1;
        } else {
            clock.set(t);
            let mut p = Packet::from_frame(&frags[k]);
            set_ident(&mut p, v6, d);
            match r.push(p, Scope::default()) {
                Ok(Verdict::Complete(x)) => {
                    res.delivered += 1;
                    drop(black_box(x)); // consumed: buffers back to the ring
                }
                Ok(_) => {}
                Err(_) => res.reasm_drops += 1,
            }
        }
        t += wire_ns[k];
        k += 1;
        if k == n {
            k = 0;
            d += 1;
        }
    }
    res
}

/// Runs the benchmark.
pub fn run(opts: &DefragBenchOptions) -> BenchReport {
    run_with_progress(opts, &mut |_, _, _| {})
}

/// Runs the benchmark, calling `on_step(description, step, total)` before each step.
pub fn run_with_progress(opts: &DefragBenchOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    let mut report = BenchReport::new("defrag-coalesce");
    let short = if opts.quick { 0.25 } else { 2.0 };
    let total = 2 * LOSSES.len() + 2;
    let mut step = 0;
    report.push("ring_buffers", RING as f64, "count");
    report.push("line_rate_gbps", LINE_BPS / 1e9, "Gbps");
    for v6 in [false, true] {
        let fam = if v6 { "v6" } else { "v4" };
        let long = if v6 { 120.0 } else { 60.0 };
        report.push(format!("fragments_per_datagram_{fam}"), fragment_set(v6).len() as f64, "count");
        for loss in LOSSES {
            on_step(&format!("ring model {fam} loss {}%", loss * 100.0), step, total);
            step += 1;
            let c = simulate(v6, loss, Delivery::Local, MemoryPolicy::EvictOldest, short, 1);
            let nc = simulate(v6, loss, Delivery::Forward, MemoryPolicy::EvictOldest, long, 1);
            let c_dn = simulate(v6, loss, Delivery::Local, MemoryPolicy::DropNew, long, 1);
            let nc_dn = simulate(v6, loss, Delivery::Forward, MemoryPolicy::DropNew, long, 1);
            let sfx = if (loss - 0.005).abs() < 1e-9 { fam.to_string() } else { format!("{fam}_loss{}", loss * 100.0) };
            report.push(format!("goodput_coalesce_gbps_{sfx}"), c.goodput_gbps(), "Gbps");
            report.push(format!("goodput_nocoalesce_gbps_{sfx}"), nc.goodput_gbps(), "Gbps");
            report.push(format!("datagrams_per_s_coalesce_{sfx}"), c.datagrams_per_s(), "1/s");
            report.push(format!("datagrams_per_s_nocoalesce_{sfx}"), nc.datagrams_per_s(), "1/s");
            report.push(format!("ratio_{sfx}"), c.goodput_gbps() / nc.goodput_gbps(), "x");
            report.push(format!("goodput_coalesce_dropnew_gbps_{sfx}"), c_dn.goodput_gbps(), "Gbps");
            report.push(format!("goodput_nocoalesce_dropnew_gbps_{sfx}"), nc_dn.goodput_gbps(), "Gbps");
            report.push(format!("ring_drops_nocoalesce_{sfx}"), nc.ring_drops as f64, "count");
            if sfx == "v4" {
                report.push("goodput_coalesce_gbps", c.goodput_gbps(), "Gbps");
                report.push("goodput_nocoalesce_gbps", nc.goodput_gbps(), "Gbps");
                report.push("ratio", c.goodput_gbps() / nc.goodput_gbps(), "x");
            }
        }
    }
    let cfg = if opts.quick { MeasureConfig::quick() } else { MeasureConfig::standard() };
    for v6 in [false, true] {
        let fam = if v6 { "v6" } else { "v4" };
        on_step(&format!("reassembly vs memcpy {fam}"), step, total);
        step += 1;
        let (reasm, memcpy, ratio) = reasm_vs_memcpy(v6, &cfg);
        report.push(format!("reasm_gbps_{fam}"), reasm, "Gbps");
        report.push(format!("memcpy_gbps_{fam}"), memcpy, "Gbps");
        report.push(format!("reasm_ratio_{fam}"), ratio, "x");
        if !v6 {
            report.push("reasm_gbps", reasm, "Gbps");
            report.push("memcpy_gbps", memcpy, "Gbps");
            report.push("reasm_ratio", ratio, "x");
        }
    }
    let pass = |r: Option<f64>, min: f64| -> f64 { if r.is_some_and(|r| r >= min) { 1.0 } else { 0.0 } };
    let t1 = pass(report.get("ratio_v4"), TARGET_RATIO).min(pass(report.get("ratio_v6"), TARGET_RATIO));
    let t2 = pass(report.get("reasm_ratio_v4"), TARGET_REASM).min(pass(report.get("reasm_ratio_v6"), TARGET_REASM));
    report.push("target_ratio_20x_pass", t1, "bool");
    report.push("target_reasm_0.5x_pass", t2, "bool");
    on_step("done", total, total);
    report
}

/// In-order reassembly of one 60000-byte datagram vs memcpy of its IP
/// bytes: (reassembly Gbit/s, memcpy Gbit/s, median per-round ratio).
pub fn reasm_vs_memcpy(v6: bool, cfg: &MeasureConfig) -> (f64, f64, f64) {
    let frags = fragment_set(v6);
    let bytes = PAYLOAD + 8 + if v6 { 40 } else { 20 };
    let mut r = Reassembler::with_clock(ReasmConfig::default(), ManualClock::new(0));
    let src = vec![0x5au8; bytes];
    let mut dst = vec![0u8; bytes];
    let frames = &frags;
    let mut candidates = vec![
        batch(|| {
            for f in frames {
                if let Ok(Verdict::Complete(x)) = r.push_frame(black_box(f), OffloadMeta::default(), Scope::default()) {
                    black_box(x);
                }
            }
        }),
        batch(|| {
            let d = black_box(&mut dst[..]);
            d.copy_from_slice(black_box(&src[..]));
            black_box(d);
        }),
    ];
    let m = measure_interleaved(cfg, &mut candidates);
    drop(candidates);
    let per_round: Vec<f64> = m[0].secs_per_iter.iter().zip(&m[1].secs_per_iter).map(|(a, b)| b / a).collect();
    let gbps = |s: f64| bytes as f64 * 8.0 / s / 1e9;
    (gbps(m[0].median()), gbps(m[1].median()), median(&per_round))
}

/// Human rendering.
pub fn render_human(report: &BenchReport) -> String {
    let g = |n: &str| report.get(n).unwrap_or(f64::NAN);
    let mut out = String::from(
        "defrag-coalesce: 60000-byte UDP datagrams over a 1500 MTU at 10 Gbit/s, 256-buffer receive ring\n",
    );
    out += "family  loss   coalesce Gbps  no-coalesce Gbps  ratio      (DropNew: coalesce / no-coalesce Gbps)\n";
    for fam in ["v4", "v6"] {
        for loss in LOSSES {
            let sfx = if (loss - 0.005).abs() < 1e-9 { fam.to_string() } else { format!("{fam}_loss{}", loss * 100.0) };
            out += &format!(
                "{fam}      {:<5}  {:>13.3}  {:>16.5}  {:>9.1}x  ({:.4} / {:.5})\n",
                format!("{}%", loss * 100.0),
                g(&format!("goodput_coalesce_gbps_{sfx}")),
                g(&format!("goodput_nocoalesce_gbps_{sfx}")),
                g(&format!("ratio_{sfx}")),
                g(&format!("goodput_coalesce_dropnew_gbps_{sfx}")),
                g(&format!("goodput_nocoalesce_dropnew_gbps_{sfx}")),
            );
        }
    }
    for fam in ["v4", "v6"] {
        out += &format!(
            "in-order reassembly {fam}: {:.1} Gbps vs memcpy {:.1} Gbps: {:.2}x\n",
            g(&format!("reasm_gbps_{fam}")),
            g(&format!("memcpy_gbps_{fam}")),
            g(&format!("reasm_ratio_{fam}"))
        );
    }
    let v = |b: f64| if b == 1.0 { "PASS" } else { "FAIL" };
    out += &format!("target ratio >= {TARGET_RATIO}x at 0.5% loss: {}\n", v(g("target_ratio_20x_pass")));
    out += &format!("target reassembly >= {TARGET_REASM}x memcpy: {}\n", v(g("target_reasm_0.5x_pass")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_shapes() {
        assert_eq!(fragment_set(false).len(), 41);
        let c = simulate(false, 0.005, Delivery::Local, MemoryPolicy::EvictOldest, 0.05, 1);
        let nc = simulate(false, 0.005, Delivery::Forward, MemoryPolicy::EvictOldest, 0.05, 1);
        assert!(c.delivered > 10 * nc.delivered.max(1), "{c:?} {nc:?}");
        assert!(nc.ring_drops > 0);
        // Without loss both modes deliver everything.
        let a = simulate(true, 0.0, Delivery::Forward, MemoryPolicy::DropNew, 0.01, 1);
        let b = simulate(true, 0.0, Delivery::Local, MemoryPolicy::DropNew, 0.01, 1);
        assert_eq!(a.delivered, b.delivered);
        assert!(a.goodput_gbps() > 9.0, "{a:?}");
    }
}
