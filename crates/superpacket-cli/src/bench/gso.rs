//! `superpacket bench gso`: software segmentation throughput against memcpy.
//!
//! Superpackets of about 64 KB (TCPv4 cut at 1448, TCPv6 at 1428, UDP over
//! IPv4 and IPv6 at 1400 bytes, whole segments) are segmented for a target
//! with no offload at all, so every segment's checksum is completed in
//! software: scatter-gather (fresh header + borrowed payload slices, payload
//! summed from the slices) and linear (payload copied and summed in one pass
//! into a reused buffer). In the same interleaved run, `memcpy` copies the
//! same number of payload bytes. Figures are payload Gbps (10^9 bits of
//! payload per second); `ratio_*` is the per-round median of scenario over
//! memcpy throughput.
//!
//! Targets: `ratio_tcp4_sg >= 0.5` and `ratio_tcp4_linear >= 0.4`.

use std::hint::black_box;

use super::{BenchReport, MeasureConfig, Measurement, batch, format_value, measure_interleaved, median};
use superpacket::offload::gso::{SegmentSink, Segmenter, SgFrame, TargetCaps};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

/// Options of [`run`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GsoBenchOptions {
    /// Much shorter measurement (for tests and smoke runs).
    pub quick: bool,
}

/// The throughput-ratio targets: `(scenario, minimum ratio to memcpy)`.
pub const TARGETS: [(&str, f64); 2] = [("tcp4_sg", 0.5), ("tcp4_linear", 0.4)];

/// The superpackets: `(name, transport, ipv6, gso_size)`.
const CASES: [(&str, Transport, bool, u16); 4] = [
    ("tcp4", Transport::Tcp, false, 1448),
    ("tcp6", Transport::Tcp, true, 1428),
    ("udp4", Transport::Udp, false, 1400),
    ("udp6", Transport::Udp, true, 1400),
];

/// Payload bytes of one superpacket: whole segments, at most 64000 bytes.
fn payload_len(gso: u16) -> usize {
    (64000 / gso as usize) * gso as usize
}

/// A sink that touches what a real target would (the iovec list, the frame
/// buffer) and keeps nothing: no allocation after the first frame.
struct BenchSink {
    buf: Vec<u8>,
    frames: u64,
}

impl SegmentSink for BenchSink {
    fn pass_through(&mut self, packet: &Packet, _: &OffloadMeta) {
        black_box(packet.len());
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        black_box((frame.header.as_ptr(), frame.payload.len()));
        self.frames += 1;
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        &mut self.buf[..len]
    }
    fn linear_frame(&mut self, len: usize, _: &OffloadMeta) {
        black_box(&self.buf[..len]);
        self.frames += 1;
    }
}

/// Runs the benchmark.
pub fn run(opts: &GsoBenchOptions) -> BenchReport {
    run_with_progress(opts, &mut |_, _, _| {})
}

/// Runs the benchmark, calling `on_step(description, step, total)` as it goes.
pub fn run_with_progress(opts: &GsoBenchOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    let cfg = if opts.quick { MeasureConfig::quick() } else { MeasureConfig::standard() };
    let mut report = BenchReport::new("gso");
    let total = CASES.len();
    let mut tcp4_memcpy = None;
    for (step, &(name, transport, v6, gso)) in CASES.iter().enumerate() {
        on_step(name, step, total);
        let payload = payload_len(gso);
        let pkt = Flow::new(FlowSpec::new(transport, v6, 1)).superpacket(payload, gso, TcpFlags::PSH).expect("fits");
        let src = vec![0x5Au8; payload];
        let mut dst = vec![0u8; payload];
        let sg_caps = TargetCaps::new(9000).with_sg();
        let linear_caps = TargetCaps::new(9000);
        let mut seg_sg = Segmenter::new();
        let mut seg_lin = Segmenter::new();
        let mut sink_sg = BenchSink { buf: Vec::new(), frames: 0 };
        let mut sink_lin = BenchSink { buf: Vec::new(), frames: 0 };
        let p = &pkt;
        let mut candidates = vec![
            batch(|| {
                let d = black_box(&mut dst[..]);
                d.copy_from_slice(black_box(&src[..]));
                black_box(d);
            }),
            batch(|| {
                let r = seg_sg.segment(black_box(p), &sg_caps, &mut sink_sg);
                black_box(r.is_ok());
            }),
            batch(|| {
                let r = seg_lin.segment(black_box(p), &linear_caps, &mut sink_lin);
                black_box(r.is_ok());
            }),
        ];
        let m = measure_interleaved(&cfg, &mut candidates);
        drop(candidates);
        debug_assert_eq!(seg_sg.counters.dropped() + seg_lin.counters.dropped(), 0);
        let gbps = |m: &Measurement| m.gb_per_s(payload) * 8.0;
        let ratio = |c: &Measurement| {
            let per_round: Vec<f64> = m[0].secs_per_iter.iter().zip(&c.secs_per_iter).map(|(mc, cs)| mc / cs).collect();
            median(&per_round)
        };
        report.push(format!("gso_{name}_sg_gbps"), gbps(&m[1]), "Gbps");
        report.push(format!("gso_{name}_linear_gbps"), gbps(&m[2]), "Gbps");
        report.push(format!("memcpy_{name}_gbps"), gbps(&m[0]), "Gbps");
        report.push(format!("ratio_{name}_sg"), ratio(&m[1]), "x");
        report.push(format!("ratio_{name}_linear"), ratio(&m[2]), "x");
        if name == "tcp4" {
            tcp4_memcpy = Some(gbps(&m[0]));
        }
    }
    report.push("memcpy_gbps", tcp4_memcpy.unwrap_or(f64::NAN), "Gbps");
    for (name, min) in TARGETS {
        let r = report.get(&format!("ratio_{name}")).unwrap_or(f64::NAN);
        report.push(format!("target_{name}_pass"), if r >= min { 1.0 } else { 0.0 }, "bool");
    }
    on_step("done", total, total);
    report
}

/// Human-readable rendering: one line per superpacket kind.
pub fn render_human(report: &BenchReport) -> String {
    let mut out =
        String::from("gso benchmark: 64 KB superpackets, software checksums; payload Gbps (ratio to memcpy)\n");
    let g = |n: String| report.get(&n).map_or("-".to_string(), format_value);
    let r = |n: String| report.get(&n).map_or("-".to_string(), |v| format!("{v:.2}x"));
    out += &format!("{:<6} {:>18} {:>18} {:>10}\n", "case", "scatter-gather", "linear", "memcpy");
    for (name, ..) in CASES {
        out += &format!(
            "{:<6} {:>18} {:>18} {:>10}\n",
            name,
            format!("{} ({})", g(format!("gso_{name}_sg_gbps")), r(format!("ratio_{name}_sg"))),
            format!("{} ({})", g(format!("gso_{name}_linear_gbps")), r(format!("ratio_{name}_linear"))),
            g(format!("memcpy_{name}_gbps")),
        );
    }
    for (name, min) in TARGETS {
        let v = report.get(&format!("ratio_{name}")).unwrap_or(f64::NAN);
        let pass = report.get(&format!("target_{name}_pass")) == Some(1.0);
        out += &format!("target {name} >= {min:.1}x memcpy: {v:.2}x {}\n", if pass { "PASS" } else { "FAIL" });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_reports_every_figure() {
        let r = run(&GsoBenchOptions { quick: true });
        for name in ["gso_tcp4_sg_gbps", "gso_tcp4_linear_gbps", "gso_udp4_sg_gbps", "memcpy_gbps", "ratio_tcp4_sg"] {
            let v = r.get(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        }
        assert!(render_human(&r).contains("tcp4"));
    }
}
