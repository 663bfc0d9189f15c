//! The `superpacket` command line: argument parsing and dispatch.
//!
//! Exit codes (the CLI contract): 0 ok, 1 problems found, 2 usage or I/O error.

mod bench;
mod bench_flood;
mod bench_suite;
mod demo;
mod demo_live;
mod lab;
mod ministat;
mod pcap_check;
mod pcap_defrag;
mod pcap_gro;
mod pcap_gso;
mod pcap_media;
mod pcap_output;
mod progress;
mod run;
mod run_lab;
mod stats;
mod vhost_peer;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exit status for success.
pub const EXIT_OK: u8 = 0;
/// Exit status when the command ran and found problems.
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status for usage and I/O errors.
pub const EXIT_ERROR: u8 = 2;

/// An error that ends a command with exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CliError(pub String);

impl CliError {
    /// Wraps any displayable error with context.
    pub fn context(what: impl std::fmt::Display, err: impl std::fmt::Display) -> CliError {
        CliError(format!("{what}: {err}"))
    }
}

/// superpacket: a userspace packet offload engine (GRO/GSO/TSO/USO, checksum
/// offload, defragmentation, stacked virtual devices).
#[derive(Debug, Parser)]
#[command(name = "superpacket", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the main job: as root, real kernel TCP and UDP through the engine in
    /// throwaway namespaces (throughput, CPU per GB, integrity); otherwise, or
    /// with --offline, the offline pipeline on generated traffic.
    Demo(demo::DemoArgs),
    /// Inspect and validate capture files (pcap, pcapng).
    Pcap {
        #[command(subcommand)]
        command: PcapCommand,
    },
    /// Run the engine on a topology file until SIGINT/SIGTERM (TAP, AF_PACKET,
    /// pcap and memory ports; see docs/topology.md).
    Run(run::RunArgs),
    /// Show the counters of a running engine.
    Stats(stats::StatsArgs),
    /// Make, remove or check the namespaces, TAPs, TUNs, veths, bridges,
    /// VXLAN devices, addresses and routes a topology declares in its [lab] table (as root; see
    /// docs/topology.md): `lab up FILE`, then `run FILE`, then `lab down FILE`.
    Lab {
        #[command(subcommand)]
        command: lab::LabCommand,
    },
    /// Run benchmarks: with no micro-benchmark named, the suite that
    /// reproduces the five results (every configuration N times, ministat's
    /// t test per A/B pair, `--json`, `--report DIR` with markdown and SVG
    /// charts); `bench <micro-benchmark>` runs one micro-benchmark once.
    #[command(args_conflicts_with_subcommands = true)]
    Bench {
        #[command(subcommand)]
        scenario: Option<bench::BenchScenario>,
        #[command(flatten)]
        suite: bench_suite::SuiteArgs,
    },
    /// FreeBSD ministat's statistics over files of numbers: summary table,
    /// ASCII distribution plot, Student's t test against the first file.
    /// Exit 0 ok, 2 usage or I/O error.
    Ministat(ministat::MinistatArgs),
    /// The engine's vhost-user port with an echo responder, for `bench vhost-tx`.
    #[command(name = "vhost-peer", hide = true)]
    VhostPeer(vhost_peer::PeerArgs),
}

#[derive(Debug, Subcommand)]
enum PcapCommand {
    /// Validate every frame: checksums (superpackets included), lengths,
    /// headers, VLAN stacks. Reads Ethernet (linktype 1) and raw IP (101,
    /// 228, 229) frames, both media mixed across pcapng interfaces; other link
    /// types are refused. Exit 0 if clean, 1 if any problem, 2 on error.
    Check(pcap_check::CheckArgs),
    /// Reassemble IPv4/IPv6 fragments: each datagram written once, other
    /// frames unchanged. Reads Ethernet (linktype 1) or raw IP (101, 228,
    /// 229) captures and writes the same medium (1 or 101), as classic pcap
    /// when OUT ends in `.pcap` and pcapng otherwise; other link types are
    /// refused. Exit 0 ok, 1 if fragments were dropped or left
    /// incomplete, 2 on error.
    Defrag(pcap_defrag::DefragArgs),
    /// Segment superpackets (annotated GSO frames, or with --gso-size every
    /// TCP/UDP frame longer than one segment) into frames with complete
    /// checksums. Reads Ethernet (linktype 1) or raw IP (101, 228, 229)
    /// captures and writes the same medium (1 or 101), as classic pcap when
    /// OUT ends in `.pcap` and pcapng otherwise; other link types are
    /// refused. Exit 0 ok, 1 if frames were dropped as bad, 2 on error.
    Gso(pcap_gso::GsoArgs),
    /// Receive offload (GRO, or LRO with --lro): coalesce TCP/UDP flows into
    /// superpackets, written in delivery order (annotated pcapng; classic
    /// pcap, without the annotations, when OUT ends in `.pcap`). Reads
    /// Ethernet (linktype 1) or raw IP (101, 228, 229) captures and writes
    /// the same medium (1 or 101); other link types are refused. Exit 0 ok,
    /// 1 if frames were dropped (not of their link type's IP version), 2 on
    /// error.
    Gro(pcap_gro::GroArgs),
}

/// Parses the arguments, runs the command and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Pcap { command: PcapCommand::Check(args) } => pcap_check::run(&args),
        Command::Pcap { command: PcapCommand::Defrag(args) } => pcap_defrag::run(&args),
        Command::Pcap { command: PcapCommand::Gso(args) } => pcap_gso::run(&args),
        Command::Pcap { command: PcapCommand::Gro(args) } => pcap_gro::run(&args),
        Command::Bench { scenario: Some(scenario), .. } => bench::run(&scenario),
        Command::Bench { scenario: None, suite } => bench_suite::run(&suite),
        Command::Ministat(args) => ministat::run(&args),
        Command::VhostPeer(args) => vhost_peer::run(&args),
        Command::Run(args) => run::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Lab { command } => lab::run(&command),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("superpacket: error: {e}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
