//! `superpacket bench ...`: benchmark scenarios, human table or `--json`.

use super::{CliError, EXIT_OK, progress};
use crate::bench::BenchReport;
use crate::bench::csum::{self, CsumBenchOptions};
use crate::bench::instructions::{self, InstructionsOptions, MethodChoice};
use clap::{Args, Subcommand};

/// The benchmark scenarios.
#[derive(Debug, Subcommand)]
pub enum BenchScenario {
    /// Checksum throughput against memcpy throughput measured in the same run,
    /// at 64 B, 1500 B, 9000 B, 64 KB (in cache) and 64 MB (out of cache).
    Csum(CommonBenchArgs),
    /// Reassembly with and without fragment coalescing in a receive-ring
    /// model (60 KB UDP datagrams, 256 buffers, random loss), and in-order
    /// reassembly throughput against memcpy.
    #[command(name = "defrag-coalesce")]
    DefragCoalesce(CommonBenchArgs),
    /// Seed result 4 on vhost-user: superpacket's virtio-user frontend and
    /// the engine's vhost-user port in two processes: request/response rate
    /// (64 B to 1500 B) and streaming rate for the three transmit strategies
    /// (software checksum + one direct descriptor for lone packets, offload
    /// with the header in an indirect table, offload in one direct
    /// descriptor).
    #[command(name = "vhost-tx")]
    VhostTx(CommonBenchArgs),
    /// Software GSO (TSO/USO with checksum completion) payload throughput,
    /// scatter-gather and linear, against memcpy of the same bytes.
    Gso(CommonBenchArgs),
    /// GRO engine Mpps per core (1 flow, 64 interleaved flows, with and without
    /// checksum verification) and aggregation at 1000 flows without and with LRO sorting.
    Gro(CommonBenchArgs),
    /// TCP TSO superpackets over 802.1Q on 802.1ad on a bond and a team of
    /// two in-memory ports: CPU per GB with passthrough against `legacy`.
    #[command(name = "seed-qinq-tso")]
    SeedQinqTso(CommonBenchArgs),
    /// A VLAN NAT router forwarding UDP L4 and fraglist superpackets between
    /// in-memory ports: payload Gbps with passthrough against `legacy`.
    #[command(name = "seed-vlan-nat")]
    SeedVlanNat(CommonBenchArgs),
    /// superpacket next to tun-rs and DPDK 22.11 on the same preloaded
    /// frames: GRO of 1 and 64 interleaved TCP/IPv4 and UDP/IPv4 flows (UDP:
    /// tun-rs only) and TCP/IPv4-in-VXLAN flows (DPDK only), and GSO of 64 KB
    /// TCP/IPv4 superpackets, plain and in VXLAN (DPDK only), with checksums;
    /// Mpps / Gbps, output counts (equal work) and the ratios superpacket / peer.
    Peers(PeersArgs),
    /// Live, root only: a kernel TCP flow through a NAT engine, unloaded and
    /// under floods of random 5-tuples, never-completed fragments and SYNs
    /// (issue 10: ratio target >= 0.5), with the bounded tables' peaks
    /// against their limits.
    Flood(super::bench_flood::FloodBenchArgs),
    /// How much of the core and its memory the measuring thread gets over
    /// time: a chain of one-cycle additions and a 4 MiB dependent-load
    /// chase, timed in 50 ms windows; the slow spells of a shared machine
    /// (another thread sharing the core for a while) and how deep they go.
    Clock(ClockArgs),
    /// Instructions per packet, segment, fragment, superpacket and byte
    /// (GRO, GSO, reassembly, the device graph's bridge and router, the
    /// checksum) against the issue-27 budgets: hardware counters where the
    /// machine exposes them, else callgrind (valgrind must be installed).
    Instructions(InstructionsArgs),
    /// In memory: packets per second of 1..N workers (bridge, NAT router
    /// sharing its tables, NAT with steering's own tables) and the curve.
    Scaling(ScalingArgs),
}

/// Options of `superpacket bench clock`.
#[derive(Debug, Args)]
pub struct ClockArgs {
    #[command(flatten)]
    pub common: CommonBenchArgs,
    /// Seconds to probe (`--quick`: 1).
    #[arg(long, default_value_t = 20.0, value_parser = parse_seconds)]
    pub seconds: f64,
    /// The CPU to probe on (`bench peers` measures on CPU 0).
    #[arg(long, default_value_t = 0)]
    pub cpu: usize,
}

/// Options of `superpacket bench instructions`.
#[derive(Debug, Args)]
pub struct InstructionsArgs {
    #[command(flatten)]
    pub common: CommonBenchArgs,
    /// How to count: the hardware counter if it works, else callgrind
    /// (`auto`); or only one of them.
    #[arg(long, value_enum, default_value_t = MethodChoice::Auto)]
    pub method: MethodChoice,
    /// Only the rows whose name contains this (e.g. `gso`, `gro_tcp4`).
    #[arg(long, value_name = "TEXT")]
    pub rows: Option<String>,
    /// Exit 1 when a budget is not met (by default budgets are only reported).
    #[arg(long)]
    pub check: bool,
    /// Internal: run one row for the parent's callgrind (prints its work as JSON).
    #[arg(long = "callgrind-child", value_name = "ROW", hide = true)]
    pub callgrind_child: Option<String>,
}

/// Options of `superpacket bench scaling`.
#[derive(Debug, Args)]
pub struct ScalingArgs {
    #[command(flatten)]
    pub common: CommonBenchArgs,
    /// Most workers (1..=256; default: the CPUs available).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: Option<u16>,
}

/// Options of `superpacket bench peers`.
#[derive(Debug, Args)]
pub struct PeersArgs {
    #[command(flatten)]
    pub common: CommonBenchArgs,
    /// Frames per receive burst, the same for every engine (1..=128: DPDK's
    /// lightweight GRO takes at most 128).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u16).range(1..=128))]
    pub batch: u16,
    /// Rounds: every engine is measured once per round, in turn (20 by
    /// default: the shared machine's slow spells last seconds, and more turns
    /// spread them over the engines alike).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub rounds: u16,
    /// Also measure the kernel as reference (root): one TCP stream between
    /// two namespaces over a veth, and the same through `superpacket run`.
    #[arg(long)]
    pub kernel: bool,
    /// Seconds per TCP stream of `--kernel`.
    #[arg(long, default_value_t = 3.0, value_parser = parse_seconds)]
    pub seconds: f64,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.1..=600.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds between 0.1 and 600")),
    }
}

/// Options every scenario takes.
#[derive(Debug, Args)]
pub struct CommonBenchArgs {
    /// Print one JSON object `{"scenario", "results": [{"name","value","unit"}]}`.
    #[arg(long)]
    pub json: bool,
    /// Shorter measurements (noisier): for smoke tests.
    #[arg(long)]
    pub quick: bool,
}

/// Runs the chosen scenario.
pub fn run(scenario: &BenchScenario) -> Result<u8, CliError> {
    use crate::bench::{defrag, gro, gso, seed_qinq_tso, seed_vlan_nat};
    match scenario {
        BenchScenario::Csum(a) => {
            report(a, "csum", |quick, p| csum::run_with_progress(&CsumBenchOptions { quick }, p), csum::render_human)
        }
        BenchScenario::DefragCoalesce(a) => report(
            a,
            "defrag-coalesce",
            |quick, p| defrag::run_with_progress(&defrag::DefragBenchOptions { quick }, p),
            defrag::render_human,
        ),
        BenchScenario::VhostTx(a) => report(
            a,
            "vhost-tx",
            |quick, p| {
                crate::bench::vhost_tx::run_with_progress(&crate::bench::tx_strategies::TxBenchOptions { quick }, p)
            },
            crate::bench::vhost_tx::render_human,
        ),
        BenchScenario::Gso(a) => {
            report(a, "gso", |quick, p| gso::run_with_progress(&gso::GsoBenchOptions { quick }, p), gso::render_human)
        }
        BenchScenario::Gro(a) => {
            report(a, "gro", |quick, p| gro::run_with_progress(&gro::GroBenchOptions { quick }, p), gro::render_human)
        }
        BenchScenario::SeedQinqTso(a) => report(
            a,
            "seed-qinq-tso",
            |quick, _| seed_qinq_tso::run(&seed_qinq_tso::QinqTsoOptions { quick }),
            BenchReport::to_table,
        ),
        BenchScenario::SeedVlanNat(a) => report(
            a,
            "seed-vlan-nat",
            |quick, _| seed_vlan_nat::run(&seed_vlan_nat::VlanNatOptions { quick }),
            BenchReport::to_table,
        ),
        BenchScenario::Peers(a) => run_peers(a),
        BenchScenario::Flood(a) => super::bench_flood::run(a),
        BenchScenario::Instructions(a) => run_instructions(a),
        BenchScenario::Clock(a) => report(
            &a.common,
            "clock",
            |quick, p| {
                let seconds = if quick { a.seconds.min(1.0) } else { a.seconds };
                crate::bench::clock::run(&crate::bench::clock::ClockOptions { seconds, cpu: a.cpu }, p)
            },
            crate::bench::clock::render_human,
        ),
        BenchScenario::Scaling(a) => {
            let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
            let max_workers = a.workers.map_or(cpus, usize::from);
            report(
                &a.common,
                "scaling",
                |quick, p| {
                    crate::bench::scaling::run_with_progress(
                        &crate::bench::scaling::ScalingOptions { quick, max_workers },
                        p,
                    )
                },
                crate::bench::scaling::render_human,
            )
        }
    }
}

/// `superpacket bench instructions`: the table or `--json`; exit 2 when no
/// method can count here (or a row failed), 1 with `--check` when a budget
/// is missed.
fn run_instructions(args: &InstructionsArgs) -> Result<u8, CliError> {
    if let Some(row) = &args.callgrind_child {
        let line = instructions::child(row, args.common.quick).map_err(CliError)?;
        println!("{line}");
        return Ok(EXIT_OK);
    }
    let opts = InstructionsOptions { quick: args.common.quick, method: args.method, only: args.rows.clone() };
    let report = with_steps(!args.common.json, "bench instructions", |p| instructions::run(&opts, p));
    let report = report.map_err(|e| CliError(format!("bench instructions: {e}")))?;
    if args.common.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", instructions::render_human(&report));
    }
    // Also on the terminal with `--json`: which method counted.
    eprintln!("superpacket bench instructions: counted by {:?}", report.method);
    Ok(if args.check && !report.budgets_met() { super::EXIT_PROBLEMS } else { EXIT_OK })
}

/// `superpacket bench peers`: the comparison, its table or `--json`; exit 1
/// when the engines' outputs differ (the comparison would be meaningless).
fn run_peers(args: &PeersArgs) -> Result<u8, CliError> {
    use crate::bench::peers::{self, PeersOptions};
    let defaults = PeersOptions::default();
    let opts = PeersOptions {
        batch: args.batch as usize,
        rounds: if args.common.quick { 1 } else { args.rounds as usize },
        samples: if args.common.quick { 3 } else { defaults.samples },
        quick: args.common.quick,
        kernel_seconds: args.kernel.then_some(args.seconds),
    };
    let report = with_steps(!args.common.json, "bench peers", |p| peers::run_with_progress(&opts, p));
    if args.common.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.render_human());
    }
    if let Err(why) = &report.dpdk_peer {
        // Also on the terminal with `--json`: the figures it lacks are null.
        eprintln!("superpacket bench peers: DPDK peer missing ({why}); its figures are left out");
    }
    let equal = report.rows.iter().all(|r| r.equal_work());
    if !equal {
        eprintln!("superpacket bench peers: the engines' outputs differ; the figures do not compare equal work");
    }
    let kernel_ok = match &report.kernel {
        Some(Err(why)) => {
            eprintln!("superpacket bench peers: the kernel reference failed: {why}");
            false
        }
        Some(Ok(k)) if !(k.veth.intact && k.engine.intact) => {
            eprintln!("superpacket bench peers: a kernel reference stream arrived changed");
            false
        }
        _ => true,
    };
    Ok(if equal && kernel_ok { EXIT_OK } else { super::EXIT_PROBLEMS })
}

/// Runs one scenario with a step progress bar (terminal only, never with
/// `--json`) and prints its report as JSON or as the scenario's human table.
fn report(
    args: &CommonBenchArgs,
    name: &str,
    run: impl FnOnce(bool, &mut dyn FnMut(&str, usize, usize)) -> BenchReport,
    render: fn(&BenchReport) -> String,
) -> Result<u8, CliError> {
    let report = with_steps(!args.json, &format!("bench {name}"), |p| run(args.quick, p));
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", render(&report));
    }
    Ok(EXIT_OK)
}

/// Runs `run` with a step progress bar called `name` (on a terminal, and
/// only when `show`: never with `--json`), cleared when it returns; `run`
/// reports `(step, done, total)`.
fn with_steps<T>(show: bool, name: &str, run: impl FnOnce(&mut dyn FnMut(&str, usize, usize)) -> T) -> T {
    let bar = progress::steps_bar(show, name);
    let out = run(&mut |step, done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(step.to_string());
    });
    bar.finish_and_clear();
    out
}
