//! Result 3 (FreeBSD iflib's RSS-sorted LRO): forwarding packets per second
//! with receive offload off, on with packets taken in arrival order
//! (`unsorted`), and on with the receive batch sorted by RSS hash first
//! (`sorted`), at 1, 64 and 1000 TCP flows, and the aggregation of each.
//!
//! The engine's own components: a router ([`ROUTER_TOPOLOGY`]: two
//! in-memory ports, IPv4 forwarding with TTL and MAC rewrite, egress port
//! with TSO) built by [`Topology`], fed by the GRO engine ([`Gro`], Linux
//! defaults: an 8 x 8 flow table; `sorted` is its LRO mode, FreeBSD's
//! `tcp_lro_queue_mbuf` + `tcp_lro_flush_all` as iflib uses it since
//! D51772). Each receive batch is 1024 packets (iflib's sort array,
//! `min(1024, ring size)`), their checksums verified by the "NIC"
//! (`CHECKSUM_UNNECESSARY`, as iflib requires for LRO) and carrying the
//! NIC's RSS hash (Toeplitz, computed before the clock starts); the batch is flushed
//! at its end and every delivered packet forwarded: `off` forwards every
//! wire packet, `unsorted`/`sorted` forward aggregates that leave the egress
//! port whole (TSO).
//!
//! Traffic: 1448-byte TCP/IPv4 segments of `flows` flows, up to 128 bursts of
//! 16 segments in flight at a time, drawn packet by packet in random order
//! ([`super::gro::interleaved_bursts`], seeded: each run of the suite sees
//! another order of the same traffic). With one flow every packet is the
//! next segment of the same stream.
//!
//! Timed: GRO + forwarding + the egress port taking the packets, over packets
//! built before the clock starts (a sample is 16384 wire packets, 4096 with
//! `quick`); the figure is the median over the samples, the three modes
//! measured round-robin with a rotating start. `fwd_mpps_*` counts wire
//! packets per second; `agg_*` is wire packets per forwarded packet.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use super::gro::interleaved_bursts;
use super::{BenchReport, median};
use superpacket::offload::gro::lro::rss_hash;
use superpacket::offload::gro::{Gro, GroConfig};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket_engine::device::{BuildOptions, DeviceId, Graph, MemoryDriver, MemoryMode, Topology};

/// Flow counts measured.
pub const FLOWS: [usize; 3] = [1, 64, 1000];

/// Receive batch: iflib's sort array, `min(1024, ring size)`.
pub const BATCH: usize = 1024;

/// The router: `lan` (10.94.0.254/24) and `wan` (203.0.113.1/24, default
/// route via 203.0.113.254), both in-memory ports with every offload.
pub const ROUTER_TOPOLOGY: &str = r#"
mode = "passthrough"

[[device]]
name = "lan"
kind = "port"
driver = "memory"
addresses = ["10.94.0.254/24"]

[[device]]
name = "wan"
kind = "port"
driver = "memory"
addresses = ["203.0.113.1/24"]

[[route]]
to = "default"
via = "203.0.113.254"
dev = "wan"

[[neighbour]]
address = "203.0.113.254"
mac = "02:00:00:00:00:fe"
"#;

/// Receive offload configuration of one measured path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LroMode {
    /// No receive offload: every wire packet is forwarded.
    Off,
    /// GRO/LRO in arrival order (Linux GRO, FreeBSD's classic `tcp_lro_rx`).
    Unsorted,
    /// The batch sorted by RSS hash, then coalesced (iflib since D51772).
    Sorted,
}

impl LroMode {
    /// The three modes, in report order.
    pub const ALL: [LroMode; 3] = [LroMode::Off, LroMode::Unsorted, LroMode::Sorted];

    /// Name used in result names.
    pub fn name(self) -> &'static str {
        match self {
            LroMode::Off => "off",
            LroMode::Unsorted => "unsorted",
            LroMode::Sorted => "sorted",
        }
    }
}

/// Options of [`run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LroForwardOptions {
    /// Smaller samples, fewer of them.
    pub quick: bool,
    /// Seed of the arrival order (non-zero).
    pub seed: u64,
}

impl Default for LroForwardOptions {
    fn default() -> Self {
        LroForwardOptions { quick: false, seed: 1 }
    }
}

/// `flows` to-be-forwarded flows through [`ROUTER_TOPOLOGY`]'s `lan` port
/// (MAC `lan_mac`), `total` frames.
pub fn traffic(flows: usize, total: usize, lan_mac: superpacket::wire::MacAddr, seed: u64) -> Vec<Vec<u8>> {
    let fl: Vec<Flow> = (0..flows.max(1))
        .map(|i| {
            let mut spec = FlowSpec::new(Transport::Tcp, false, i as u32);
            spec.dst_mac = lan_mac;
            spec.addrs = Addrs::V4 { src: Ipv4Addr::new(10, 94, 0, 1), dst: Ipv4Addr::new(198, 51, 100, 7) };
            Flow::new(spec)
        })
        .collect();
    interleaved_bursts(fl, 128, 16, total, BATCH, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).frames
}

/// One forwarding path: a router graph and, unless `Off`, a GRO engine.
pub struct Forwarder {
    graph: Graph,
    lan: DeviceId,
    wan: DeviceId,
    gro: Option<Gro>,
    sink: Vec<Packet>,
}

/// What one timed pass measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pass {
    /// Seconds for all packets.
    pub seconds: f64,
    /// Wire packets per forwarded packet.
    pub aggregation: f64,
    /// Every packet handed to the router left the egress port, none dropped.
    pub forwarded_all: bool,
}

impl Forwarder {
    /// A router and, for `Unsorted`/`Sorted`, a GRO engine in front of it.
    pub fn new(mode: LroMode) -> Forwarder {
        let opts = BuildOptions { memory_mode: MemoryMode::Count, ..BuildOptions::default() };
        let graph =
            Topology::parse(ROUTER_TOPOLOGY).and_then(|t| t.build_with(&opts)).expect("the built-in router is valid");
        let lan = graph.id("lan").expect("built");
        let wan = graph.id("wan").expect("built");
        let gro = match mode {
            LroMode::Off => None,
            LroMode::Unsorted => Some(Gro::new(GroConfig::default())),
            LroMode::Sorted => Some(Gro::new(GroConfig { lro: true, ..GroConfig::default() })),
        };
        Forwarder { graph, lan, wan, gro, sink: Vec::with_capacity(BATCH) }
    }

    /// MAC address of the receiving port.
    pub fn lan_mac(&self) -> superpacket::wire::MacAddr {
        self.graph.device(self.lan).mac
    }

    /// Receives `frames` in batches of [`BATCH`] and forwards what comes out.
    pub fn pass(&mut self, frames: &[Vec<u8>]) -> Pass {
        let meta = OffloadMeta { csum: ChecksumState::Unnecessary { level: 0 }, ..OffloadMeta::default() };
        let mut batches: Vec<Vec<Packet>> = frames
            .chunks(BATCH)
            .map(|c| {
                c.iter()
                    .map(|f| {
                        let mut p = Packet::from_frame(f);
                        p.meta = meta;
                        // The NIC's RSS hash (Toeplitz), as iflib's drivers report it.
                        p.meta.rss_hash = Some(rss_hash(&p, superpacket::wire::Medium::Ethernet));
                        p
                    })
                    .collect()
            })
            .collect();
        self.graph.reset_counters();
        if let Some(g) = &mut self.gro {
            g.reset_counters();
        }
        let mut handed = 0u64;
        let start = Instant::now();
        for batch in batches.iter_mut() {
            match &mut self.gro {
                None => {
                    handed += batch.len() as u64;
                    for p in batch.drain(..) {
                        self.graph.receive(self.lan, p);
                    }
                }
                Some(g) => {
                    g.receive_burst(batch);
                    g.flush();
                    g.take_delivered_into(&mut self.sink);
                    handed += self.sink.len() as u64;
                    for p in self.sink.drain(..) {
                        self.graph.receive(self.lan, p);
                    }
                }
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        black_box(&batches);
        let wan = self.graph.counters(self.wan);
        let forwarded_all =
            wan.tx_passthrough == handed && self.graph.devices().iter().all(|d| d.counters.dropped() == 0);
        if let Some(d) = self.graph.driver_mut::<MemoryDriver>(self.wan) {
            d.tx.clear();
        }
        let aggregation = self.gro.as_ref().map_or(1.0, |g| g.counters().aggregation());
        Pass { seconds, aggregation, forwarded_all }
    }
}

/// Runs the scenario.
pub fn run(opts: &LroForwardOptions) -> BenchReport {
    run_with_progress(opts, &mut |_, _, _| {})
}

/// Runs the scenario, calling `on_step(description, step, total)` before each
/// flow count and once more with `step == total` when done.
pub fn run_with_progress(opts: &LroForwardOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    let (total, samples) = if opts.quick { (4096, 3) } else { (16384, 9) };
    let mut report = BenchReport::new("lro");
    let mut all_forwarded = true;
    for (step, &flows) in FLOWS.iter().enumerate() {
        let unit = if flows == 1 { "1flow".to_string() } else { format!("{flows}flows") };
        on_step(&format!("{unit} forwarding"), step, FLOWS.len());
        let mut paths: Vec<Forwarder> = LroMode::ALL.iter().map(|&m| Forwarder::new(m)).collect();
        let frames = traffic(flows, total, paths[0].lan_mac(), opts.seed);
        let mut secs: Vec<Vec<f64>> = vec![Vec::with_capacity(samples); paths.len()];
        let mut agg = vec![0.0; paths.len()];
        for p in paths.iter_mut() {
            let _ = p.pass(&frames[..BATCH.min(frames.len())]); // warm-up
        }
        for s in 0..samples {
            for k in 0..paths.len() {
                let i = (s + k) % paths.len();
                let pass = paths[i].pass(&frames);
                secs[i].push(pass.seconds);
                agg[i] = pass.aggregation;
                all_forwarded &= pass.forwarded_all;
            }
        }
        for (i, mode) in LroMode::ALL.iter().enumerate() {
            let mpps: Vec<f64> = secs[i].iter().map(|s| frames.len() as f64 / s.max(1e-12) / 1e6).collect();
            report.push(format!("fwd_mpps_{unit}_{}", mode.name()), median(&mpps), "Mpps");
        }
        for (i, mode) in LroMode::ALL.iter().enumerate().skip(1) {
            report.push(format!("agg_{unit}_{}", mode.name()), agg[i], "pkts/out");
        }
    }
    report.push("forwarded_all", f64::from(u8::from(all_forwarded)), "bool");
    on_step("done", FLOWS.len(), FLOWS.len());
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_forwards_everything() {
        for mode in LroMode::ALL {
            let mut f = Forwarder::new(mode);
            let frames = traffic(64, 2048, f.lan_mac(), 3);
            let p = f.pass(&frames);
            assert!(p.forwarded_all, "{mode:?} {p:?}");
            assert!(p.seconds > 0.0);
            match mode {
                LroMode::Off => assert_eq!(p.aggregation, 1.0),
                _ => assert!(p.aggregation > 1.0, "{mode:?} {p:?}"),
            }
        }
    }

    #[test]
    fn sorting_aggregates_more_with_many_flows() {
        let (mut u, mut s) = (Forwarder::new(LroMode::Unsorted), Forwarder::new(LroMode::Sorted));
        let frames = traffic(1000, 4096, u.lan_mac(), 1);
        let (a, b) = (u.pass(&frames).aggregation, s.pass(&frames).aggregation);
        assert!(b > 2.0 * a, "sorted {b} vs unsorted {a}");
        // Another seed: another arrival order.
        assert_ne!(frames, traffic(1000, 4096, u.lan_mac(), 2));
    }

    #[test]
    fn quick_run_reports_every_figure() {
        let r = run(&LroForwardOptions { quick: true, seed: 5 });
        for flows in ["1flow", "64flows", "1000flows"] {
            for mode in ["off", "unsorted", "sorted"] {
                let v = r.get(&format!("fwd_mpps_{flows}_{mode}")).unwrap();
                assert!(v.is_finite() && v > 0.0, "{flows} {mode} {v}");
            }
            assert!(r.get(&format!("agg_{flows}_sorted")).unwrap() >= 1.0);
        }
        assert_eq!(r.get("forwarded_all"), Some(1.0));
    }
}
