//! `superpacket bench seed-qinq-tso`: TCP TSO superpackets over 802.1Q on
//! 802.1ad on a bond and on a team of two in-memory ports, passthrough
//! against `legacy` (offload-rules 6.2 step 5, 6.3, 9.2).
//!
//! Passthrough: the ports' `features_check` takes two tags, so the 64 KB
//! superpackets reach the ports whole (NIC TSO). Legacy: the core's QinQ
//! rule strips TSO for the double-tagged packet, so it is cut in software
//! at the first device that sees both tags (the bond/team). Figures: payload
//! Gbps and engine CPU seconds per GB (thread CPU time of the transmit
//! calls only; building the packets is outside the timed region). The
//! graph is built from `examples/seed-qinq-tso.toml`.

use super::BenchReport;
use std::time::{Duration, Instant};
use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::{BuildOptions, DeviceId, Graph, MemoryDriver, MemoryMode, StackMode, Topology};
use superpacket_engine::io::cputime::thread_cpu_seconds;

/// Options.
#[derive(Debug, Clone, Copy, Default)]
pub struct QinqTsoOptions {
    /// Shorter run (noisier).
    pub quick: bool,
}

/// One measured configuration: a graph, where packets enter, and the
/// packets of one round.
pub(crate) struct Engine {
    pub graph: Graph,
    pub entry: DeviceId,
    /// `true`: packets arrive from the wire on `entry`; `false`: sent through it.
    pub receive: bool,
    pub ports: Vec<DeviceId>,
    pub templates: Vec<Packet>,
    pub payload_bytes: u64,
    pub wall_s: Vec<f64>,
    pub cpu_s: Vec<f64>,
}

impl Engine {
    pub(crate) fn new(
        graph: Graph,
        entry: DeviceId,
        receive: bool,
        ports: Vec<DeviceId>,
        templates: Vec<Packet>,
        payload_bytes: u64,
    ) -> Engine {
        Engine { graph, entry, receive, ports, templates, payload_bytes, wall_s: Vec::new(), cpu_s: Vec::new() }
    }

    /// One round: clone the templates (untimed), push them through (timed),
    /// free what the ports took (untimed).
    pub(crate) fn round(&mut self) {
        let mut batch: Vec<Packet> = self.templates.clone();
        let c0 = thread_cpu_seconds();
        let w0 = Instant::now();
        for p in batch.drain(..) {
            if self.receive {
                self.graph.receive(self.entry, p);
            } else {
                self.graph.transmit(self.entry, p);
            }
        }
        let wall = w0.elapsed().as_secs_f64();
        let cpu = thread_cpu_seconds() - c0;
        self.wall_s.push(wall);
        self.cpu_s.push(cpu);
        for p in &self.ports {
            if let Some(d) = self.graph.driver_mut::<MemoryDriver>(*p) {
                d.tx.clear();
            }
        }
    }

    /// Median payload Gbps over the rounds.
    pub(crate) fn gbps(&self) -> f64 {
        let v: Vec<f64> = self.wall_s.iter().map(|w| self.payload_bytes as f64 * 8.0 / w.max(1e-12) / 1e9).collect();
        super::median(&v)
    }

    /// Median engine CPU seconds per GB of payload.
    pub(crate) fn cpu_s_per_gb(&self) -> f64 {
        let v: Vec<f64> = self.cpu_s.iter().map(|c| c / (self.payload_bytes as f64 / 1e9)).collect();
        super::median(&v)
    }
}

/// Runs the engines round-robin for about `time` each.
pub(crate) fn run_interleaved(engines: &mut [&mut Engine], time: Duration, min_rounds: usize) {
    for e in engines.iter_mut() {
        e.round();
        e.wall_s.clear();
        e.cpu_s.clear();
    }
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < min_rounds || start.elapsed() < time * engines.len() as u32 {
        for e in engines.iter_mut() {
            e.round();
        }
        rounds += 1;
    }
}

/// Payload of each superpacket.
const PAYLOAD: usize = 62_000;
/// TCP MSS.
const MSS: u16 = 1448;
/// Superpackets per round (8 flows).
const BATCH: usize = 32;

/// The seed topology (`examples/seed-qinq-tso.toml`): the bond stack on
/// eth0/eth1 and the team stack on eth2/eth3.
pub const SEED_TOPOLOGY: &str = include_str!("../../../../examples/seed-qinq-tso.toml");

fn build(mode: StackMode, team: bool) -> Engine {
    let opts = BuildOptions { mode: Some(mode), memory_mode: MemoryMode::Count, ..BuildOptions::default() };
    let g = Topology::parse(SEED_TOPOLOGY).and_then(|t| t.build_with(&opts)).expect("the seed example is valid");
    let (top, names) = if team { ("team0.100.200", ["eth2", "eth3"]) } else { ("bond0.100.200", ["eth0", "eth1"]) };
    let c = g.id(top).expect("in the seed example");
    let ports: Vec<DeviceId> = names.iter().map(|n| g.id(n).expect("in the seed example")).collect();
    let mut flows: Vec<Flow> = (0..8).map(|i| Flow::new(FlowSpec::new(Transport::Tcp, false, i))).collect();
    let mut templates = Vec::with_capacity(BATCH);
    for i in 0..BATCH {
        let f = &mut flows[i % 8];
        let hl = f.spec.header_len();
        let mut p = f.superpacket(PAYLOAD, MSS, TcpFlags::empty()).expect("fits");
        p.detach_payload(hl).expect("one segment");
        templates.push(p);
    }
    Engine::new(g, c, false, ports, templates, (BATCH * PAYLOAD) as u64)
}

/// Runs the scenario.
pub fn run(opts: &QinqTsoOptions) -> BenchReport {
    let time = if opts.quick { Duration::from_millis(100) } else { Duration::from_millis(800) };
    let mut report = BenchReport::new("seed-qinq-tso");
    let mut totals = [(0.0, 0.0); 2];
    for (team, label) in [(false, "bond"), (true, "team")] {
        let mut pass = build(StackMode::Passthrough, team);
        let mut legacy = build(StackMode::Legacy, team);
        run_interleaved(&mut [&mut pass, &mut legacy], time, 5);
        report.push(format!("{label}_passthrough_gbps"), pass.gbps(), "Gbps");
        report.push(format!("{label}_legacy_gbps"), legacy.gbps(), "Gbps");
        report.push(format!("{label}_passthrough_cpu_s_per_gb"), pass.cpu_s_per_gb(), "s/GB");
        report.push(format!("{label}_legacy_cpu_s_per_gb"), legacy.cpu_s_per_gb(), "s/GB");
        totals[0].0 += pass.cpu_s_per_gb() / 2.0;
        totals[1].0 += legacy.cpu_s_per_gb() / 2.0;
        totals[0].1 += pass.gbps() / 2.0;
        totals[1].1 += legacy.gbps() / 2.0;
    }
    report.push("qinq_tso_passthrough_gbps", totals[0].1, "Gbps");
    report.push("qinq_tso_legacy_gbps", totals[1].1, "Gbps");
    report.push("qinq_tso_passthrough_cpu_s_per_gb", totals[0].0, "s/GB");
    report.push("qinq_tso_legacy_cpu_s_per_gb", totals[1].0, "s/GB");
    report.push("qinq_tso_cpu_ratio", totals[1].0 / totals[0].0, "x");
    report.push("qinq_tso_target_met", f64::from(u8::from(totals[1].0 >= 2.5 * totals[0].0)), "bool");
    report
}

#[cfg(test)]
mod tests {
    #[test]
    fn quick_run_reports_every_figure() {
        let r = super::run(&super::QinqTsoOptions { quick: true });
        for name in ["qinq_tso_passthrough_cpu_s_per_gb", "qinq_tso_legacy_cpu_s_per_gb", "qinq_tso_cpu_ratio"] {
            assert!(r.get(name).is_some_and(f64::is_finite), "{name}");
        }
    }
}
