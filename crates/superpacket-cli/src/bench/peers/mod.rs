//! `superpacket bench peers`: superpacket next to tun-rs and DPDK on the
//! same preloaded frames, in one run, on one core (issue 11).
//!
//! Each engine gets the same input ([`workload`]): the same frames in the
//! same order, cut into the same receive bursts. What is timed is the
//! engine's own call over buffers prepared beforehand; preparing them and
//! counting the output are not. Equal work is proven, not assumed: every
//! engine's output packets and IP bytes are counted and printed, and the
//! report says whether they agree (`equal_work_*` = 1).
//!
//! | row | superpacket | tun-rs | DPDK 22.11 |
//! |---|---|---|---|
//! | GRO, TCP/IPv4 and UDP/IPv4, 1 and 64 flows (UDP: no DPDK row) | `Gro::receive_burst` + `flush` per burst, checksums verified ([`superpacket::GroChecksum::Verify`]) and trusted ([`superpacket::GroChecksum::Trusted`]) | `GROTable::apply_gro` per burst (verifies checksums, copies payload) | each frame parsed (`rte_net_get_ptype`), `rte_gro_reassemble_burst` in lightweight mode (checksums not looked at, mbufs chained), merged IPv4 headers' checksums refreshed |
//! | GRO VXLAN: TCP/IPv4 in VXLAN over IPv4, 1 and 64 flows | the same with a VXLAN tunnel on port 4789 (`GroConfig::with_tunnel`), merging on the inner flow | n/a: no tunnel offload | each frame's outer and inner headers read for the tunnel packet type and lengths, `rte_gro_reassemble_burst` with `RTE_GRO_IPV4_VXLAN_TCP_IPV4` (lightweight), merged outer and inner IPv4 headers' checksums refreshed |
//! | GSO, 64 KB TCP/IPv4, checksums | `Segmenter::segment` for a target without offloads: linear (copy + sum) and scatter-gather (borrowed payload, summed) | `gso_split` (copy + checksums) | `rte_gso_segment` (indirect mbufs) + software IPv4 and TCP checksums |
//!
//! GRO: each peer is compared with the superpacket form that does the same
//! work: tun-rs with checksum-verifying GRO, DPDK with trusting GRO. Same
//! bursts, same output (checked).
//!
//! GSO: every engine produces the same wire segments with their checksums
//! filled in, each in the form its output path takes: superpacket a header
//! plus payload slices, as its ports write them (`writev`, or `sendmmsg`
//! iovecs; scatter-gather is superpacket's path to every SG-capable port),
//! DPDK an indirect mbuf chain, tun-rs a copy of each segment into its own
//! buffer (its TUN write path). The headline ratios compare those;
//! superpacket's linear form (copy + checksum in one pass, what it does for
//! a port without SG) is shown beside them with its own ratio to tun-rs
//! (`gso_ratio_tunrs_linear`), so the cost of the copy stays visible.
//!
//! | GSO VXLAN: 64 KB TCP/IPv4 in VXLAN over IPv4, checksums | `Segmenter::segment` of the `UDP_TUNNEL` superpacket, linear and scatter-gather | n/a: no tunnel offload | `rte_gso_segment` with `RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO` + software outer IPv4, inner IPv4 and TCP checksums |
//!
//! Figures are the median over all samples; engines take turns in rounds so
//! that load from elsewhere hits them alike. Every engine makes one untimed
//! warm-up pass per round before its timed samples ([`WARM_UP_PASSES`]).
//! GRO is in Mpps of input frames; GSO in Gbps of TCP payload segmented.
//!
//! Ratios (and the targets' verdicts) are **paired per round**
//! ([`PairedRatio`]): round k's ratio is one engine's rate in round k over
//! the other's in round k (each the median of that round's samples), and
//! the ratio is the median of those per-round ratios, printed with their
//! lowest and highest. The engines of one round run within a fraction of a
//! second of each other, while the shared machine's slow spells
//! (docs/benchmarks.md, "Slow spells") come and go over a row's rounds: a
//! ratio of the two engines' overall medians can take one engine's median
//! from its fast rounds and the other's from its slow ones, a pairing
//! cannot. The ratio of the medians stays in the report beside it
//! (`<ratio>_of_medians`).
//!
//! Targets ([`TARGETS`], each printed with its verdict): issue 11, GRO on
//! 64 flows and GSO each at least 2x tun-rs and 1.2x DPDK; issue 25, VXLAN
//! GRO at least 1.5x DPDK's (64 flows and one flow) and VXLAN GSO at least
//! 2x DPDK's (scatter-gather and linear).

pub mod dpdk;
pub mod dpdk_build;
pub mod kernel;
pub mod superpacket;
pub mod tunrs;
pub mod workload;

use super::{BenchReport, clock, median};
use superpacket_engine::io::affinity;
use workload::{GroWorkload, GsoWorkload};

/// The targets: `(ratio result name, minimum)`. Issue 11's four (plain
/// TCP GRO on 64 flows, GSO), then issue 25's tunnel targets on every VXLAN
/// row: GRO at least 1.5x DPDK's VXLAN GRO on 64 flows and on one flow,
/// GSO at least 2x its VXLAN GSO in the scatter-gather form (the same
/// memory work as DPDK's indirect mbufs) and in the linear form (which
/// also writes every payload byte).
pub const TARGETS: [(&str, f64); 8] = [
    ("gro_ratio_tunrs", 2.0),
    ("gro_ratio_dpdk", 1.2),
    ("gso_ratio_tunrs", 2.0),
    ("gso_ratio_dpdk", 1.2),
    ("gro_vxlan_ratio_dpdk", 1.5),
    ("gro_vxlan_1flow_ratio_dpdk", 1.5),
    ("gso_vxlan_ratio_dpdk", 2.0),
    ("gso_vxlan_ratio_dpdk_linear", 2.0),
];

/// Every ratio the report carries: `(name, kind, workload, engine A, engine
/// B)`, A's rate over B's in that row, paired per round ([`PairedRatio`]).
/// Each superpacket form is set against the peer doing the same work:
/// checksum-verifying GRO against tun-rs, trusting GRO against DPDK,
/// scatter-gather GSO against both; linear GSO beside them.
pub const RATIOS: [(&str, &str, &str, &str, &str); 9] = [
    ("gro_ratio_tunrs", "gro", "tcp4_64flows", "superpacket_verify", "tunrs"),
    ("gro_ratio_dpdk", "gro", "tcp4_64flows", "superpacket_trusted", "dpdk"),
    ("gso_ratio_tunrs", "gso", "tcp4_64k", "superpacket_sg", "tunrs"),
    ("gso_ratio_dpdk", "gso", "tcp4_64k", "superpacket_sg", "dpdk"),
    ("gso_ratio_tunrs_linear", "gso", "tcp4_64k", "superpacket_linear", "tunrs"),
    ("gro_vxlan_ratio_dpdk", "gro", "vxlan_tcp4_64flows", "superpacket_trusted", "dpdk"),
    ("gro_vxlan_1flow_ratio_dpdk", "gro", "vxlan_tcp4_1flow", "superpacket_trusted", "dpdk"),
    ("gso_vxlan_ratio_dpdk", "gso", "vxlan_tcp4_64k", "superpacket_sg", "dpdk"),
    ("gso_vxlan_ratio_dpdk_linear", "gso", "vxlan_tcp4_64k", "superpacket_linear", "dpdk"),
];

/// The figures the issue names: GRO Mpps on 64 interleaved TCP/IPv4 flows
/// and GSO Gbps on 64 KB TCP/IPv4 superpackets, per engine.
pub const HEADLINE_KEYS: [&str; 6] = [
    "gro_superpacket_mpps",
    "gro_tunrs_mpps",
    "gro_dpdk_mpps",
    "gso_superpacket_gbps",
    "gso_tunrs_gbps",
    "gso_dpdk_gbps",
];

/// tun-rs's cell in the VXLAN rows: it has no tunnel offload.
pub const TUNRS_NO_TUNNEL: &str = "n/a: tun-rs 2.8 has no tunnel (VXLAN) GRO or GSO";

/// The CPU every engine is measured on (DPDK's EAL core list is `-l 0`).
pub const MEASURE_CPU: usize = 0;

/// Options of [`run_with_progress`].
#[derive(Debug, Clone, PartialEq)]
pub struct PeersOptions {
    /// Frames per receive burst for every engine (DPDK's lightweight GRO
    /// takes at most 128).
    pub batch: usize,
    /// Rounds: each engine measured once per round, in turn.
    pub rounds: usize,
    /// Samples per engine per round.
    pub samples: usize,
    /// Much shorter measurement (tests and smoke runs).
    pub quick: bool,
    /// Also measure the kernel reference ([`kernel`], root) for this many
    /// seconds per stream.
    pub kernel_seconds: Option<f64>,
}

impl Default for PeersOptions {
    fn default() -> Self {
        PeersOptions { batch: 128, rounds: 20, samples: 40, quick: false, kernel_seconds: None }
    }
}

/// Untimed passes each in-process engine makes over its workload before
/// its timed samples, as the DPDK peer does (its first pass is untimed and
/// only checked): the first pass of a measurement pays for page faults in
/// fresh buffers and cold caches, which no later pass sees, and every
/// engine should be timed the same way.
pub const WARM_UP_PASSES: usize = 1;

/// What one engine did on one workload: input, output and sample times.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineRun {
    /// Packets given to the engine per sample (frames or superpackets).
    pub packets_in: u64,
    /// Packets the engine produced per sample.
    pub packets_out: u64,
    /// IP bytes (without Ethernet header) the engine produced per sample.
    pub ip_bytes_out: u64,
    /// False if two samples produced different output (never expected).
    pub stable: bool,
    /// Seconds per sample.
    pub samples_secs: Vec<f64>,
    /// The median seconds per sample of each round, in round order: one
    /// entry per [`EngineRun::merge`]d measurement (empty for a single
    /// measurement that no round merged).
    pub round_secs: Vec<f64>,
}

impl EngineRun {
    /// An empty run over `packets_in` input packets per sample.
    pub fn new(packets_in: u64) -> EngineRun {
        EngineRun {
            packets_in,
            packets_out: 0,
            ip_bytes_out: 0,
            stable: true,
            samples_secs: Vec::new(),
            round_secs: Vec::new(),
        }
    }

    /// Records pass `pass` (0-based) of a measurement: its time, unless it
    /// is one of the [`WARM_UP_PASSES`], and its output. The first pass's
    /// output sets the run's; every later one must agree.
    pub fn record_pass(&mut self, pass: usize, secs: f64, packets: u64, ip_bytes: u64) {
        if pass >= WARM_UP_PASSES {
            self.samples_secs.push(secs);
        }
        if pass == 0 {
            self.packets_out = packets;
            self.ip_bytes_out = ip_bytes;
        } else if (packets, ip_bytes) != (self.packets_out, self.ip_bytes_out) {
            self.stable = false;
        }
    }

    /// How many passes a measurement of `samples` timed samples makes.
    pub fn passes(samples: usize) -> std::ops::Range<usize> {
        0..WARM_UP_PASSES + samples.max(1)
    }

    /// Appends another run of the same work as the next round: its samples,
    /// and their median as that round's entry of [`EngineRun::round_secs`].
    pub fn merge(&mut self, other: EngineRun) {
        let round = median(&other.samples_secs);
        if self.samples_secs.is_empty() {
            let rounds = std::mem::take(&mut self.round_secs);
            *self = EngineRun { round_secs: rounds, ..other };
        } else {
            self.stable &= other.stable
                && (other.packets_in, other.packets_out, other.ip_bytes_out)
                    == (self.packets_in, self.packets_out, self.ip_bytes_out);
            self.samples_secs.extend(other.samples_secs);
        }
        self.round_secs.push(round);
    }

    /// Median seconds per sample.
    pub fn median_secs(&self) -> f64 {
        median(&self.samples_secs)
    }

    /// Million input packets per second (median sample).
    pub fn mpps(&self) -> f64 {
        self.mpps_at(self.median_secs())
    }

    /// Gbps of `bytes` per sample (median sample).
    pub fn gbps(&self, bytes: u64) -> f64 {
        gbps_at(bytes, self.median_secs())
    }

    /// Million input packets per second at `secs` per sample.
    fn mpps_at(&self, secs: f64) -> f64 {
        self.packets_in as f64 / secs / 1e6
    }
}

/// The estimator of every ratio `bench peers` reports and of its targets'
/// verdicts: rates paired by round. Round k's ratio is engine A's rate in
/// round k over engine B's rate in round k (each rate from the median of
/// that round's samples); the ratio is the median of the per-round ratios.
/// The engines of a round are measured one after the other within a
/// fraction of a second, so a change of the machine's state between rounds
/// moves both rates of a pair alike, and the ratio of two medians (which
/// may come from different rounds, one engine's from a fast stretch and the
/// other's from a slow one) does not decide the verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedRatio {
    /// Median of the per-round ratios: the figure and the verdict's input.
    pub median: f64,
    /// Lowest per-round ratio.
    pub lowest: f64,
    /// Highest per-round ratio.
    pub highest: f64,
    /// Rounds paired (both engines measured in each).
    pub rounds: usize,
    /// A's median rate over all its samples divided by B's (the estimator
    /// before pairing), for comparison.
    pub of_medians: f64,
}

impl PairedRatio {
    /// Pairs `a[k]` with `b[k]` (per-round rates of two engines; rounds
    /// beyond the shorter list are left out, and a round whose ratio is
    /// not a finite positive number, a zero or unmeasurable time on either
    /// side, too); `of_medians` is A's overall median rate over B's. `None`
    /// without a round of both.
    pub fn new(a: &[f64], b: &[f64], of_medians: f64) -> Option<PairedRatio> {
        let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).filter(|r| r.is_finite() && *r > 0.0).collect();
        if ratios.is_empty() {
            return None;
        }
        let (lowest, highest) =
            ratios.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| (lo.min(r), hi.max(r)));
        Some(PairedRatio { median: median(&ratios), lowest, highest, rounds: ratios.len(), of_medians })
    }
}

/// Gbps of `bytes` per sample at `secs` per sample.
fn gbps_at(bytes: u64, secs: f64) -> f64 {
    bytes as f64 * 8.0 / secs / 1e9
}

/// An engine's result on one workload, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineResult {
    /// Engine label, e.g. `tun-rs`.
    pub engine: String,
    /// Stable key part, e.g. `tunrs`.
    pub key: String,
    /// The run, or the reason there is none (e.g. DPDK not built).
    pub run: Result<EngineRun, String>,
}

/// One workload and every engine's result on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `gro` or `gso`.
    pub kind: &'static str,
    /// Workload name, e.g. `tcp4_64flows`.
    pub workload: String,
    /// What the workload is, for people.
    pub description: String,
    /// Bytes the Gbps figure counts per sample (GSO: TCP payload; GRO: input IP bytes).
    pub bytes_per_sample: u64,
    /// Every engine's result.
    pub engines: Vec<EngineResult>,
    /// The core and memory probes taken before each engine's measurement
    /// in each round ([`clock::probe`]).
    pub probes: Vec<clock::Probe>,
}

impl Row {
    /// The result of the engine with `key`, if it ran.
    pub fn run(&self, key: &str) -> Option<&EngineRun> {
        self.engines.iter().find(|e| e.key == key).and_then(|e| e.run.as_ref().ok())
    }

    /// The row's figure of `run` over all its samples: Mpps of input
    /// packets for GRO, Gbps of [`Row::bytes_per_sample`] for GSO (median
    /// sample).
    pub fn rate(&self, run: &EngineRun) -> f64 {
        self.rate_of(run, run.median_secs())
    }

    /// [`Row::rate`] of each round of `run` (from [`EngineRun::round_secs`]).
    pub fn round_rates(&self, run: &EngineRun) -> Vec<f64> {
        run.round_secs.iter().map(|&secs| self.rate_of(run, secs)).collect()
    }

    fn rate_of(&self, run: &EngineRun, secs: f64) -> f64 {
        if self.kind == "gro" { run.mpps_at(secs) } else { gbps_at(self.bytes_per_sample, secs) }
    }

    /// True if every engine that ran produced the same packets and bytes, stably.
    pub fn equal_work(&self) -> bool {
        let runs: Vec<&EngineRun> = self.engines.iter().filter_map(|e| e.run.as_ref().ok()).collect();
        runs.iter().all(|r| r.stable && (r.packets_out, r.ip_bytes_out) == (runs[0].packets_out, runs[0].ip_bytes_out))
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct PeersReport {
    /// Options it ran with.
    pub options: PeersOptions,
    /// One row per workload.
    pub rows: Vec<Row>,
    /// The kernel reference, when asked for (or why it could not run).
    pub kernel: Option<Result<kernel::KernelReference, String>>,
    /// The DPDK peer program, or why it is missing ([`dpdk::locate`]).
    pub dpdk_peer: Result<dpdk::DpdkPeer, String>,
}

/// The engines of a GRO row, in measuring order.
const GRO_ENGINES: [(&str, &str); 4] = [
    ("superpacket (verifies checksums)", "superpacket_verify"),
    ("tun-rs 2.8 (verifies checksums)", "tunrs"),
    ("superpacket (NIC-validated checksums)", "superpacket_trusted"),
    ("DPDK 22.11 (checksums not checked)", "dpdk"),
];

/// The engines of a UDP GRO row (DPDK has no UDP segment GRO).
const UDP_GRO_ENGINES: [(&str, &str); 2] =
    [("superpacket (verifies checksums)", "superpacket_verify"), ("tun-rs 2.8 (verifies checksums)", "tunrs")];

/// The engines of a VXLAN GRO row (tun-rs: n/a, [`TUNRS_NO_TUNNEL`]).
const VXLAN_GRO_ENGINES: [(&str, &str); 4] = [
    ("superpacket (verifies checksums)", "superpacket_verify"),
    ("tun-rs 2.8", "tunrs"),
    ("superpacket (NIC-validated checksums)", "superpacket_trusted"),
    ("DPDK 22.11 (checksums not checked)", "dpdk"),
];

/// The engines of a GSO row, in measuring order.
const GSO_ENGINES: [(&str, &str); 4] = [
    ("superpacket (scatter-gather + checksum)", "superpacket_sg"),
    ("tun-rs 2.8 gso_split (copy + checksum)", "tunrs"),
    ("DPDK 22.11 rte_gso_segment + checksum", "dpdk"),
    ("superpacket (linear: copy + checksum)", "superpacket_linear"),
];

fn measure_gro(key: &str, work: &GroWorkload, samples: usize) -> Result<EngineRun, String> {
    match key {
        "superpacket_verify" => Ok(superpacket::gro(work, superpacket::GroChecksum::Verify, samples)),
        "superpacket_trusted" => Ok(superpacket::gro(work, superpacket::GroChecksum::Trusted, samples)),
        "tunrs" if work.vxlan => Err(TUNRS_NO_TUNNEL.to_string()),
        "tunrs" => tunrs::gro(work, samples),
        _ if work.vxlan => measure_dpdk(dpdk::DpdkMode::GroVxlan, &work.frames, work.batch, samples, None),
        _ => measure_dpdk(dpdk::DpdkMode::Gro, &work.frames, work.batch, samples, None),
    }
}

fn measure_gso(key: &str, work: &GsoWorkload, samples: usize) -> Result<EngineRun, String> {
    match key {
        "superpacket_linear" => superpacket::gso(work, superpacket::GsoOutput::Linear, samples),
        "superpacket_sg" => superpacket::gso(work, superpacket::GsoOutput::ScatterGather, samples),
        "tunrs" if work.vxlan => Err(TUNRS_NO_TUNNEL.to_string()),
        "tunrs" => tunrs::gso(work, samples),
        _ => {
            let mode = if work.vxlan { dpdk::DpdkMode::GsoVxlan } else { dpdk::DpdkMode::Gso };
            measure_dpdk(mode, &work.frames(), work.superpackets.len(), samples, Some(work.mss))
        }
    }
}

/// The engines of a VXLAN GSO row (tun-rs: n/a, [`TUNRS_NO_TUNNEL`]).
const VXLAN_GSO_ENGINES: [(&str, &str); 4] = [
    ("superpacket (scatter-gather + checksum)", "superpacket_sg"),
    ("tun-rs 2.8", "tunrs"),
    ("DPDK 22.11 rte_gso_segment + checksum", "dpdk"),
    ("superpacket (linear: copy + checksum)", "superpacket_linear"),
];

/// DPDK's run of the same frames (the `dpdk_peer` program).
fn measure_dpdk(
    mode: dpdk::DpdkMode,
    frames: &[Vec<u8>],
    batch: usize,
    samples: usize,
    mss: Option<usize>,
) -> Result<EngineRun, String> {
    dpdk::run(mode, frames, batch, samples, mss).map(EngineRun::from).map_err(|e| e.to_string())
}

/// Measures `engines` on one workload over the rounds; an engine that fails
/// once keeps its error and is not tried again. Also returns the probes
/// taken before each measurement.
fn measure_row(
    engines: &[(&str, &str)],
    opts: &PeersOptions,
    mut measure: impl FnMut(&str, usize) -> Result<EngineRun, String>,
    progress: &mut Progress<'_>,
) -> (Vec<EngineResult>, Vec<clock::Probe>) {
    let mut results: Vec<EngineResult> = engines
        .iter()
        .map(|(label, key)| EngineResult {
            engine: label.to_string(),
            key: key.to_string(),
            run: Ok(EngineRun::new(0)),
        })
        .collect();
    let mut probes = Vec::new();
    for round in 0..opts.rounds.max(1) {
        for r in results.iter_mut() {
            let Ok(acc) = &mut r.run else { continue };
            progress.step(&format!("{} (round {}/{})", r.engine, round + 1, opts.rounds.max(1)));
            probes.push(clock::probe());
            match measure(&r.key, opts.samples.max(1)) {
                Ok(run) => acc.merge(run),
                Err(e) => r.run = Err(e),
            }
        }
    }
    (results, probes)
}

/// Counts measurements for the progress callback.
struct Progress<'a> {
    done: usize,
    total: usize,
    on_step: &'a mut dyn FnMut(&str, usize, usize),
}

impl Progress<'_> {
    fn step(&mut self, what: &str) {
        (self.on_step)(what, self.done, self.total);
        self.done += 1;
    }
}

/// Runs the comparison; `on_step(what, done, total)` is called before each
/// measurement and once more with `done == total` at the end.
pub fn run_with_progress(opts: &PeersOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> PeersReport {
    // Every engine on the same CPU: the DPDK peer's EAL runs on lcore 0
    // (`-l 0`), so the in-process engines are measured on CPU 0 too (a
    // thread that migrates between CPUs mid-run loses its caches).
    let _restore = affinity::Restore::current();
    let _ = affinity::pin(MEASURE_CPU);
    let total = if opts.quick { 256 } else { 1024 };
    let measurements = (GRO_ENGINES.len() * 2
        + UDP_GRO_ENGINES.len() * 2
        + VXLAN_GRO_ENGINES.len() * 2
        + GSO_ENGINES.len()
        + VXLAN_GSO_ENGINES.len())
        * opts.rounds.max(1);
    let mut progress = Progress { done: 0, total: measurements, on_step };
    // Found (or compiled) before anything is timed.
    (progress.on_step)("locating the DPDK peer (compiling it if needed)", 0, measurements);
    let dpdk_peer = dpdk::dpdk_peer();
    let on_step = &mut progress;
    let mut rows = Vec::new();
    let tcp_work = [64, 1].into_iter().map(|f| GroWorkload::tcp4(f, total, opts.batch));
    let udp_work = [64, 1].into_iter().map(|f| GroWorkload::udp4(f, total, opts.batch));
    let vxlan_work = [64, 1].into_iter().map(|f| GroWorkload::vxlan_tcp4(f, total, opts.batch));
    for work in tcp_work.chain(udp_work).chain(vxlan_work) {
        let engines: &[(&str, &str)] = if work.udp {
            &UDP_GRO_ENGINES
        } else if work.vxlan {
            &VXLAN_GRO_ENGINES
        } else {
            &GRO_ENGINES
        };
        let (engines, probes) = measure_row(engines, opts, |key, n| measure_gro(key, &work, n), on_step);
        rows.push(Row {
            kind: "gro",
            description: format!(
                "GRO, {}, {} flow(s) interleaved packet by packet, {} frames of {} bytes, bursts of {}",
                if work.udp {
                    "UDP/IPv4"
                } else if work.vxlan {
                    "TCP/IPv4 in VXLAN over IPv4 (outer UDP checksum 0)"
                } else {
                    "TCP/IPv4"
                },
                work.flows,
                work.frames.len(),
                work.frames[0].len(),
                work.batch
            ),
            workload: work.name.clone(),
            bytes_per_sample: work.ip_bytes(),
            engines,
            probes,
        });
    }
    let count = if opts.quick { 4 } else { 16 };
    for work in [GsoWorkload::tcp4_64k(count), GsoWorkload::vxlan_tcp4_64k(count)] {
        let engines: &[(&str, &str)] = if work.vxlan { &VXLAN_GSO_ENGINES } else { &GSO_ENGINES };
        let (engines, probes) = measure_row(engines, opts, |key, n| measure_gso(key, &work, n), on_step);
        rows.push(Row {
            kind: "gso",
            description: format!(
                "GSO, {} {} superpackets of {} payload bytes cut at MSS {}, checksums filled in{}",
                work.superpackets.len(),
                if work.vxlan { "TCP/IPv4-in-VXLAN-over-IPv4" } else { "TCP/IPv4" },
                workload::GSO_SEGMENTS * work.mss,
                work.mss,
                if work.vxlan { " (outer and inner; outer UDP checksum 0)" } else { "" }
            ),
            workload: work.name.clone(),
            bytes_per_sample: work.payload_bytes(),
            engines,
            probes,
        });
    }
    let kernel = opts.kernel_seconds.map(|secs| {
        (progress.on_step)(
            "kernel reference: TCP over a veth, then through superpacket run",
            measurements,
            measurements,
        );
        kernel::measure(secs)
    });
    (progress.on_step)("done", measurements, measurements);
    PeersReport { options: opts.clone(), rows, kernel, dpdk_peer }
}

impl PeersReport {
    /// How fast the core was while `row` was measured, relative to the
    /// run's fastest core probe, and the memory probes' latency ([`clock`]).
    pub fn row_probes(&self, row: &Row) -> (Option<clock::Speed>, Option<clock::Latency>) {
        let all: Vec<f64> = self.rows.iter().flat_map(|r| r.probes.iter().map(|p| p.core_ns)).collect();
        let core: Vec<f64> = row.probes.iter().map(|p| p.core_ns).collect();
        let memory: Vec<f64> = row.probes.iter().map(|p| p.memory_ns).collect();
        (clock::summarise(&clock::relative_speeds(&core, &all)), clock::latency(&memory))
    }

    /// The figures in the shared bench shape: per row and engine
    /// `<kind>_<workload>_<engine>_{mpps,gbps,out_packets}`, equal-work
    /// flags, the issue's headline keys (`gro_*_mpps` on 64 flows,
    /// `gso_*_gbps` on 64 KB superpackets), ratios and target verdicts.
    /// An engine that did not run has NaN figures; [`PeersReport::missing`]
    /// says why.
    pub fn to_bench_report(&self) -> BenchReport {
        self.report_and_missing().0
    }

    /// Why figures of [`PeersReport::to_bench_report`] are missing (or, for
    /// a `target_*_pass`, why the target could not be met): `(name, reason)`.
    pub fn missing(&self) -> Vec<(String, String)> {
        self.report_and_missing().1
    }

    fn report_and_missing(&self) -> (BenchReport, Vec<(String, String)>) {
        let mut report = BenchReport::new("peers");
        let mut missing = Vec::new();
        for row in &self.rows {
            for e in &row.engines {
                let prefix = format!("{}_{}_{}", row.kind, row.workload, e.key);
                match &e.run {
                    Ok(run) => {
                        report.push(format!("{prefix}_mpps"), run.mpps(), "Mpps");
                        report.push(format!("{prefix}_gbps"), run.gbps(row.bytes_per_sample), "Gbps");
                        report.push(format!("{prefix}_out_packets"), run.packets_out as f64, "packets");
                    }
                    Err(why) => {
                        for (suffix, unit) in [("mpps", "Mpps"), ("gbps", "Gbps"), ("out_packets", "packets")] {
                            report.push(format!("{prefix}_{suffix}"), f64::NAN, unit);
                            let reason = if why == TUNRS_NO_TUNNEL {
                                why.clone()
                            } else {
                                format!("{} did not run: {why}", e.engine)
                            };
                            missing.push((format!("{prefix}_{suffix}"), reason));
                        }
                    }
                }
            }
            report.push(format!("equal_work_{}_{}", row.kind, row.workload), row.equal_work() as u8 as f64, "bool");
            let (core, memory) = self.row_probes(row);
            if let Some(speed) = core {
                let prefix = format!("core_speed_{}_{}", row.kind, row.workload);
                report.push(format!("{prefix}_median"), speed.median, "x");
                report.push(format!("{prefix}_lowest"), speed.lowest, "x");
                report.push(format!("{prefix}_slow_share"), speed.slow_share, "share");
            }
            if let Some(l) = memory {
                let prefix = format!("memory_ns_{}_{}", row.kind, row.workload);
                report.push(format!("{prefix}_median"), l.median_ns, "ns per load");
                report.push(format!("{prefix}_highest"), l.highest_ns, "ns per load");
            }
        }
        for (name, value, unit) in self.headlines() {
            match value {
                Ok(v) => report.push(name, v, unit),
                Err(why) => {
                    report.push(name.clone(), f64::NAN, unit);
                    missing.push((name, why));
                }
            }
        }
        for (name, ..) in RATIOS {
            // The estimator under the ratio's own name, then its spread and
            // the ratio of the medians.
            let names = [name.to_string(), format!("{name}_round_lowest"), format!("{name}_round_highest")];
            let names = names.into_iter().chain([format!("{name}_of_medians")]);
            match self.ratio(name) {
                Ok(r) => {
                    names.zip([r.median, r.lowest, r.highest, r.of_medians]).for_each(|(n, v)| report.push(n, v, "x"))
                }
                Err(why) => {
                    for n in names {
                        report.push(n.clone(), f64::NAN, "x");
                        missing.push((n, why.clone()));
                    }
                }
            }
        }
        if let Some(Ok(k)) = &self.kernel {
            report.push("kernel_veth_tcp_gbps", k.veth.gbps, "Gbps");
            report.push("kernel_engine_tcp_gbps", k.engine.gbps, "Gbps");
            report.push("kernel_engine_over_veth", k.engine.gbps / k.veth.gbps, "x");
            report.push("kernel_integrity_ok", (k.veth.intact && k.engine.intact) as u8 as f64, "bool");
        }
        for (name, min) in TARGETS {
            let v = report.get(name).unwrap_or(f64::NAN);
            report.push(format!("target_{name}_pass"), if v >= min { 1.0 } else { 0.0 }, "bool");
            if let Some((_, why)) = missing.iter().find(|(n, _)| n == name) {
                missing.push((format!("target_{name}_pass"), why.clone()));
            }
        }
        (report, missing)
    }

    /// The row `kind`/`workload` and the run of engine `key` in it, or why
    /// there is none.
    fn engine_run(&self, kind: &str, workload: &str, key: &str) -> Result<(&Row, &EngineRun), String> {
        let row = self
            .rows
            .iter()
            .find(|r| r.kind == kind && r.workload == workload)
            .ok_or_else(|| format!("no {kind} {workload} row"))?;
        let e = row.engines.iter().find(|e| e.key == key).ok_or_else(|| format!("no {key} in {workload}"))?;
        match &e.run {
            Ok(run) => Ok((row, run)),
            Err(why) => Err(format!("{} did not run: {why}", e.engine)),
        }
    }

    /// The issue's headline figures (each engine's median rate), or why an
    /// engine they need did not run.
    fn headlines(&self) -> Vec<(String, Result<f64, String>, &'static str)> {
        let figure = |kind: &str, key: &str| {
            let workload = if kind == "gro" { "tcp4_64flows" } else { "tcp4_64k" };
            self.engine_run(kind, workload, key).map(|(row, run)| row.rate(run))
        };
        let gro = |key: &str| figure("gro", key);
        let gso = |key: &str| figure("gso", key);
        vec![
            ("gro_superpacket_mpps".into(), gro("superpacket_verify"), "Mpps"),
            ("gro_superpacket_trusted_mpps".into(), gro("superpacket_trusted"), "Mpps"),
            ("gro_tunrs_mpps".into(), gro("tunrs"), "Mpps"),
            ("gro_dpdk_mpps".into(), gro("dpdk"), "Mpps"),
            ("gso_superpacket_gbps".into(), gso("superpacket_sg"), "Gbps"),
            ("gso_superpacket_linear_gbps".into(), gso("superpacket_linear"), "Gbps"),
            ("gso_tunrs_gbps".into(), gso("tunrs"), "Gbps"),
            ("gso_dpdk_gbps".into(), gso("dpdk"), "Gbps"),
        ]
    }

    /// Ratio `name` of [`RATIOS`], paired per round ([`PairedRatio`]), or
    /// why it has none.
    pub fn ratio(&self, name: &str) -> Result<PairedRatio, String> {
        let &(_, kind, workload, a, b) =
            RATIOS.iter().find(|r| r.0 == name).ok_or_else(|| format!("no ratio {name}"))?;
        let (row, run_a) = self.engine_run(kind, workload, a)?;
        let (_, run_b) = self.engine_run(kind, workload, b)?;
        PairedRatio::new(&row.round_rates(run_a), &row.round_rates(run_b), row.rate(run_a) / row.rate(run_b))
            .ok_or_else(|| format!("{name}: no round measured both {a} and {b}"))
    }

    /// `--json`: the [`BenchReport`] shape (`{"scenario", "results"}`), where
    /// every result without a figure (`"value": null`) carries
    /// `"missing": "reason"`, plus `"peers"`: `{"dpdk": {"path", "origin"}}`
    /// or `{"dpdk": {"missing": "reason"}}`, and `{"tunrs": {...}}`.
    pub fn to_json(&self) -> String {
        use serde_json::{Value, json};
        let (report, missing) = self.report_and_missing();
        let mut doc = serde_json::to_value(&report).expect("a report always serialises");
        if let Some(results) = doc.get_mut("results").and_then(Value::as_array_mut) {
            for r in results {
                let Some(name) = r.get("name").and_then(Value::as_str) else { continue };
                if let Some((_, why)) = missing.iter().find(|(n, _)| n == name) {
                    r["missing"] = Value::String(why.clone());
                } else if r.get("value").is_some_and(Value::is_null) {
                    r["missing"] = Value::String(format!("{name} is not a finite number"));
                }
            }
        }
        let dpdk = match &self.dpdk_peer {
            Ok(p) => json!({ "path": p.path.display().to_string(), "origin": p.origin_key() }),
            Err(why) => json!({ "missing": why }),
        };
        let tunrs_failure = self.rows.iter().flat_map(|r| &r.engines).find_map(|e| match &e.run {
            Err(why) if e.key == "tunrs" && why != TUNRS_NO_TUNNEL => Some(why.clone()),
            _ => None,
        });
        let tunrs = match tunrs_failure {
            None => json!({ "linked": "in process (crate tun-rs 2.8)" }),
            Some(why) => json!({ "missing": why }),
        };
        doc["peers"] = json!({ "dpdk": dpdk, "tunrs": tunrs });
        doc.to_string()
    }

    /// The table people read: per row, every engine's rate, output and
    /// the ratio of its superpacket counterpart; then the targets.
    pub fn render_human(&self) -> String {
        use std::fmt::Write;
        let o = &self.options;
        let mut out = format!(
            "superpacket bench peers: the same preloaded frames through each engine, one core, \
             {} rounds x {} samples, median\n",
            o.rounds, o.samples
        );
        match &self.dpdk_peer {
            Ok(p) => {
                let _ = writeln!(out, "DPDK peer: {}", p.describe());
            }
            Err(why) => {
                let _ = writeln!(out, "DPDK peer: missing ({why})");
            }
        }
        for row in &self.rows {
            let _ = writeln!(out, "\n{}", row.description);
            let _ = writeln!(
                out,
                "  {:<42} {:>9} {:>9} {:>10} {:>12}",
                "engine", "Mpps", "Gbps", "out pkts", "out IP bytes"
            );
            for e in &row.engines {
                match &e.run {
                    Ok(run) => {
                        let _ = writeln!(
                            out,
                            "  {:<42} {:>9.3} {:>9.2} {:>10} {:>12}",
                            e.engine,
                            run.mpps(),
                            run.gbps(row.bytes_per_sample),
                            run.packets_out,
                            run.ip_bytes_out
                        );
                    }
                    Err(why) if why == TUNRS_NO_TUNNEL => {
                        let _ = writeln!(out, "  {:<42} {why}", e.engine);
                    }
                    Err(why) => {
                        let _ = writeln!(out, "  {:<42} did not run: {why}", e.engine);
                    }
                }
            }
            let verdict = if row.equal_work() { "yes" } else { "NO: the engines' outputs differ" };
            let _ = writeln!(out, "  equal work (same output packets and bytes): {verdict}");
            let (core, memory) = self.row_probes(row);
            if let (Some(speed), Some(l)) = (core, memory) {
                let _ = writeln!(
                    out,
                    "  probes before each measurement: core speed median {:.2} (1.00 = the run's fastest), \
                     {:.0}% below {}; memory {:.0} ns per load median, {:.0} highest",
                    speed.median,
                    speed.slow_share * 100.0,
                    clock::SLOW_BELOW,
                    l.median_ns,
                    l.highest_ns
                );
            }
        }
        match &self.kernel {
            Some(Ok(k)) => {
                let intact = |r: &kernel::StreamResult| if r.intact { "intact" } else { "CORRUPTED" };
                let _ = writeln!(out, "\nThe kernel as reference: one TCP stream between two namespaces");
                let _ = writeln!(
                    out,
                    "  {:<42} {:>9.2} Gbps  {}",
                    "kernel, veth (TSO + GRO)",
                    k.veth.gbps,
                    intact(&k.veth)
                );
                let _ = writeln!(
                    out,
                    "  {:<42} {:>9.2} Gbps  {}  ({:.2}x the veth)",
                    "superpacket run: TAP -> router -> TAP",
                    k.engine.gbps,
                    intact(&k.engine),
                    k.engine.gbps / k.veth.gbps
                );
            }
            Some(Err(why)) => {
                let _ = writeln!(out, "\nkernel reference did not run: {why}");
            }
            None => {}
        }
        let (report, missing) = self.report_and_missing();
        let _ = writeln!(out);
        for (name, min) in TARGETS {
            let v = report.get(name).unwrap_or(f64::NAN);
            if let Some((_, why)) = missing.iter().find(|(n, _)| n == name) {
                let _ = writeln!(out, "target {name} >= {min}: not measured ({why})");
                continue;
            }
            let pass = if v >= min { "PASS" } else { "FAIL" };
            let spread = match self.ratio(name) {
                Ok(r) => format!(
                    " (median of {} per-round ratios, {:.2}..{:.2}; ratio of medians {:.2}x)",
                    r.rounds, r.lowest, r.highest, r.of_medians
                ),
                Err(_) => String::new(),
            };
            let _ = writeln!(out, "target {name} >= {min}: {v:.2}x {pass}{spread}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    //! The comparison on small sizes: every engine runs (DPDK too: the test
    //! command installs dpdk-dev), the outputs agree with each other and
    //! with what the workload must give, and the report carries the issue's
    //! keys. Speeds are not checked here (`superpacket bench peers` is the
    //! benchmark).

    use super::*;

    fn quick() -> PeersReport {
        let opts = PeersOptions { rounds: 1, samples: 2, quick: true, ..PeersOptions::default() };
        run_with_progress(&opts, &mut |_, _, _| {})
    }

    #[test]
    fn every_engine_does_the_same_work() {
        let report = quick();
        assert_eq!(report.rows.len(), 8);
        for row in &report.rows {
            for e in &row.engines {
                if row.workload.starts_with("vxlan") && e.key == "tunrs" {
                    assert_eq!(e.run, Err(TUNRS_NO_TUNNEL.to_string()));
                    continue;
                }
                let run = e.run.as_ref().unwrap_or_else(|why| panic!("{} {}: {why}", row.workload, e.engine));
                assert!(run.stable && run.samples_secs.len() == 2, "{} {}: {run:?}", row.workload, e.engine);
                assert!(run.mpps().is_finite() && run.mpps() > 0.0);
            }
            assert!(row.equal_work(), "{}: {:?}", row.workload, row.engines);
        }
        // 256 frames of 64 flows round-robin in bursts of 128: each flow's
        // two segments per burst merge, 64 outputs per burst.
        let gro64 = &report.rows[0];
        assert_eq!(gro64.workload, "tcp4_64flows");
        let sp = gro64.run("superpacket_verify").unwrap();
        assert_eq!((sp.packets_in, sp.packets_out), (256, 128));
        // One flow: 128 segments per burst in aggregates of at most 64 KB (45 segments).
        let gro1 = gro64_or(&report, "tcp4_1flow");
        assert_eq!(gro1.run("tunrs").unwrap().packets_out, 2 * 3);
        // UDP: the same pairs per burst, each merged into one UDP_L4 superpacket.
        let udp64 = gro64_or(&report, "udp4_64flows");
        assert_eq!(udp64.run("tunrs").unwrap().packets_out, 128);
        assert_eq!(udp64.engines.len(), 2, "DPDK has no UDP segment GRO");
        // GSO: 4 superpackets of 45 segments, each segment 1500 IP bytes.
        let gso = gro64_or(&report, "tcp4_64k");
        let dpdk = gso.run("dpdk").unwrap();
        assert_eq!((dpdk.packets_out, dpdk.ip_bytes_out), (4 * 45, 4 * 45 * 1500));
    }

    #[test]
    fn vxlan_rows_do_the_same_work_as_dpdk() {
        let report = quick();
        // 64 VXLAN flows: the same pairs per burst as plain TCP, merged on
        // the inner flow by superpacket and by DPDK alike.
        let gro64 = gro64_or(&report, "vxlan_tcp4_64flows");
        assert!(gro64.equal_work(), "{:?}", gro64.engines);
        let dpdk = gro64.run("dpdk").expect("DPDK VXLAN GRO ran");
        assert_eq!((dpdk.packets_in, dpdk.packets_out), (256, 128));
        let sp = gro64.run("superpacket_trusted").unwrap();
        assert_eq!((sp.packets_out, sp.ip_bytes_out), (dpdk.packets_out, dpdk.ip_bytes_out));
        // One flow: aggregates of at most 64 KB of outer IP packet.
        let gro1 = gro64_or(&report, "vxlan_tcp4_1flow");
        assert!(gro1.equal_work(), "{:?}", gro1.engines);
        assert_eq!(gro1.run("superpacket_verify").unwrap().packets_out, gro1.run("dpdk").unwrap().packets_out);
        // GSO: 4 superpackets of 45 segments, each 1550 outer IP bytes.
        let gso = gro64_or(&report, "vxlan_tcp4_64k");
        assert!(gso.equal_work(), "{:?}", gso.engines);
        for key in ["superpacket_sg", "superpacket_linear", "dpdk"] {
            let r = gso.run(key).unwrap();
            assert_eq!((r.packets_out, r.ip_bytes_out), (4 * 45, 4 * 45 * 1550), "{key}");
        }
        assert!(gso.run("tunrs").is_none());
        // tun-rs's n/a cells do not make the peer missing.
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert!(json["peers"]["tunrs"].get("missing").is_none(), "{}", json["peers"]);
        let cells = json["results"].as_array().unwrap();
        let cell = cells.iter().find(|r| r["name"] == "gso_vxlan_tcp4_64k_tunrs_gbps").expect("tun-rs cell");
        assert!(cell["value"].is_null() && cell["missing"] == TUNRS_NO_TUNNEL, "{cell}");
        let r = report.to_bench_report();
        for key in ["gro_vxlan_ratio_dpdk", "gso_vxlan_ratio_dpdk"] {
            let v = r.get(key).unwrap_or_else(|| panic!("no {key}"));
            assert!(v.is_finite() && v > 0.0, "{key} = {v}");
        }
    }

    fn gro64_or<'a>(report: &'a PeersReport, workload: &str) -> &'a Row {
        report.rows.iter().find(|r| r.workload == workload).expect("row")
    }

    #[test]
    fn the_report_has_the_issue_keys_and_verdicts() {
        let report = quick().to_bench_report();
        for key in HEADLINE_KEYS.into_iter().chain(["gro_ratio_tunrs", "gso_ratio_dpdk", "equal_work_gro_tcp4_64flows"])
        {
            let v = report.get(key).unwrap_or_else(|| panic!("no {key}"));
            assert!(v.is_finite() && v > 0.0, "{key} = {v}");
        }
        for (name, _) in TARGETS {
            let v = report.get(&format!("target_{name}_pass")).expect("verdict");
            assert!(v == 0.0 || v == 1.0);
        }
        // Every row says how fast the core and the memory were while it was measured.
        for row in ["gro_tcp4_64flows", "gro_vxlan_tcp4_1flow", "gso_vxlan_tcp4_64k"] {
            let median = report.get(&format!("core_speed_{row}_median")).expect("core speed");
            let lowest = report.get(&format!("core_speed_{row}_lowest")).expect("core speed");
            assert!(0.0 < lowest && lowest <= median && median <= 1.0, "{row}: {lowest} {median}");
            let memory = report.get(&format!("memory_ns_{row}_median")).expect("memory latency");
            assert!(memory > 0.0 && memory.is_finite(), "{row}: {memory}");
        }
    }

    /// Five rounds of linear VXLAN GSO against DPDK in Gbps, the machine
    /// fast in rounds 1-2 and slow in rounds 4-5 for both engines, and
    /// turning slow in round 3 between DPDK's measurement and superpacket's
    /// (which follows it): superpacket is 2.5x DPDK in every round measured
    /// in one state. The overall medians take superpacket's from its slow
    /// rounds and DPDK's from its fast ones (15 / 10 = 1.5x, below the 2x
    /// target); the rounds paired give 2.5x, with round 3's 1.5 as the
    /// lowest.
    #[test]
    fn a_round_without_a_finite_ratio_is_left_out() {
        // Round 2's B rate is infinite (a zero time), round 3's A rate is 0.
        let r = PairedRatio::new(&[2.0, 3.0, 9.0, 0.0], &[1.0, 1.0, f64::INFINITY, 1.0], 2.5).unwrap();
        assert_eq!((r.rounds, r.lowest, r.highest), (2, 2.0, 3.0));
        assert!(r.median.is_finite());
        assert!(PairedRatio::new(&[1.0], &[0.0], 1.0).is_none());
    }

    #[test]
    fn ratios_pair_the_rates_round_by_round() {
        const SUPERPACKET: [f64; 5] = [25.0, 25.0, 15.0, 15.0, 15.0];
        const DPDK: [f64; 5] = [10.0, 10.0, 10.0, 6.0, 6.0];
        // One sample per round; 10^9 / 8 bytes per sample: Gbps = 1 / seconds.
        let bytes = 1_000_000_000 / 8;
        let mut rounds = [0usize; 2];
        let mut measure = |key: &str, _: usize| {
            let (table, k) = match key {
                "superpacket_linear" => (&SUPERPACKET, 0),
                "dpdk" => (&DPDK, 1),
                other => return Err(format!("{other} is not in this row")),
            };
            let mut run = EngineRun::new(16);
            run.record_pass(0, 0.0, 720, 720 * 1550);
            run.record_pass(1, 1.0 / table[rounds[k]], 720, 720 * 1550);
            rounds[k] += 1;
            Ok(run)
        };
        let opts = PeersOptions { rounds: 5, samples: 1, quick: true, ..PeersOptions::default() };
        let engines = [("DPDK", "dpdk"), ("superpacket linear", "superpacket_linear")];
        let mut on_step = |_: &str, _: usize, _: usize| {};
        let mut progress = Progress { done: 0, total: 10, on_step: &mut on_step };
        let (engines, probes) = measure_row(&engines, &opts, &mut measure, &mut progress);
        assert_eq!(probes.len(), 10);
        let row = Row {
            kind: "gso",
            workload: "vxlan_tcp4_64k".into(),
            description: String::new(),
            bytes_per_sample: bytes,
            engines,
            probes,
        };
        let sp = row.run("superpacket_linear").unwrap();
        assert_eq!(sp.round_secs.len(), 5);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(row.rate(sp), 15.0) && close(row.rate(row.run("dpdk").unwrap()), 10.0));
        let report = PeersReport { options: opts, rows: vec![row], kernel: None, dpdk_peer: Err("not needed".into()) };
        let r = report.ratio("gso_vxlan_ratio_dpdk_linear").unwrap();
        assert_eq!(r.rounds, 5);
        assert!(close(r.median, 2.5) && close(r.lowest, 1.5) && close(r.highest, 2.5), "{r:?}");
        assert!(close(r.of_medians, 1.5), "{r:?}");
        // The verdict is the paired ratio's, and the report carries its spread.
        let bench = report.to_bench_report();
        assert_eq!(bench.get("target_gso_vxlan_ratio_dpdk_linear_pass"), Some(1.0));
        assert!(close(bench.get("gso_vxlan_ratio_dpdk_linear").unwrap(), 2.5));
        assert!(close(bench.get("gso_vxlan_ratio_dpdk_linear_round_lowest").unwrap(), 1.5));
        assert!(close(bench.get("gso_vxlan_ratio_dpdk_linear_round_highest").unwrap(), 2.5));
        assert!(close(bench.get("gso_vxlan_ratio_dpdk_linear_of_medians").unwrap(), 1.5));
        let human = report.render_human();
        assert!(
            human.contains(
                "target gso_vxlan_ratio_dpdk_linear >= 2: 2.50x PASS \
                 (median of 5 per-round ratios, 1.50..2.50; ratio of medians 1.50x)"
            ),
            "{human}"
        );
    }

    #[test]
    fn paired_ratios_need_a_round_of_both() {
        assert_eq!(PairedRatio::new(&[], &[1.0], 1.0), None);
        // Rounds beyond the shorter list are left out.
        let r = PairedRatio::new(&[4.0, 6.0, 100.0], &[2.0, 2.0], 3.0).unwrap();
        assert_eq!((r.median, r.lowest, r.highest, r.rounds), (2.5, 2.0, 3.0, 2));
    }

    #[test]
    fn a_run_with_different_output_is_not_equal_work() {
        let mut a = EngineRun::new(10);
        a.record_pass(0, 1.0, 5, 500);
        a.record_pass(1, 1.0, 5, 500);
        assert_eq!(a.samples_secs.len(), 2 - WARM_UP_PASSES, "warm-up passes are not timed");
        assert!(a.stable);
        let mut b = a.clone();
        b.packets_out = 6;
        let row = Row {
            kind: "gro",
            workload: "w".into(),
            description: String::new(),
            bytes_per_sample: 1,
            engines: vec![
                EngineResult { engine: "a".into(), key: "a".into(), run: Ok(a.clone()) },
                EngineResult { engine: "b".into(), key: "b".into(), run: Ok(b) },
            ],
            probes: Vec::new(),
        };
        assert!(!row.equal_work());
        // A later sample with other output makes the run unstable.
        a.record_pass(2, 1.0, 4, 500);
        assert!(!a.stable);
    }
}
