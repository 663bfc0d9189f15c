//! `superpacket pcap gro IN OUT [--batch N] [--lro] [--json]`: receive
//! offload of a capture with [`superpacket::offload::gro`].
//!
//! Frames are read in order (their annotation becomes their offload
//! metadata, their timestamp their arrival time) and given to the engine;
//! every held aggregate is flushed after each `--batch` input frames (the NAPI
//! budget, 64 by default) and at the end. OUT is written in delivery order,
//! each frame annotated with its metadata (`gso_type=... gso_size=...
//! gso_segs=... csum=partial` for superpackets) and stamped with the arrival
//! time of its first segment. Its format follows its extension (see
//! [`super::pcap_output`]): pcapng, or classic pcap for `.pcap`, which cannot
//! carry the annotations: they are dropped and a warning says so on stderr.
//!
//! Defaults are current Linux plus UDP segment GRO (`--udp forward`, Linux's
//! `rx-udp-gro-forwarding`): a userspace forwarder wants UDP flows as UDP_L4
//! superpackets a TAP with USO or a peer's GSO takes whole. `--udp off` is
//! the kernel default. Fraglist aggregates are written as the equivalent
//! UDP_L4/TCP superpacket (see [`superpacket::offload::gro::capture_bytes`]).
//!
//! Link types (see [`super::pcap_media`]): Ethernet (1) and raw IP (101, 228,
//! 229; what a TUN device carries) are read, the engine runs with that
//! medium, and OUT keeps it (linktype 1, or 101 for raw IP). Any other link
//! type is refused (exit 2); a frame of linktype 228/229 not of that IP
//! version is dropped and counted (exit 1).

use super::pcap_media::{FrameMedium, MediumGate};
use super::pcap_output;
use super::{CliError, EXIT_OK, EXIT_PROBLEMS, progress};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use superpacket::offload::gro::{self, CwrRule, FixedIdRule, Gro, GroConfig, GroCounters, UdpGroMode};
use superpacket::packet::{Packet, TunnelKind};
use superpacket::pcap::{CaptureReader, CaptureWriter, FrameAnnotation, PcapError};
use superpacket::wire::Medium;

/// UDP GRO mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UdpArg {
    /// No UDP coalescing (the kernel default).
    Off,
    /// Same-size datagrams become UDP_L4 superpackets (`rx-udp-gro-forwarding`).
    Forward,
    /// Datagrams are chained intact (`rx-gro-list`).
    Fraglist,
}

/// Arguments of `pcap gro`.
#[derive(Debug, Args)]
pub struct GroArgs {
    /// Input capture (pcap or pcapng): Ethernet (linktype 1) or raw IP (101,
    /// 228, 229); other link types are refused.
    pub input: PathBuf,
    /// Output capture, in the input's medium: Ethernet (linktype 1) or raw IP
    /// (101). Classic pcap if its name ends in `.pcap` (any case; offload
    /// annotations are then lost, with a warning), annotated pcapng otherwise.
    pub output: PathBuf,
    /// Flush every held aggregate after each N input frames (the NAPI budget).
    #[arg(long, value_name = "N", default_value_t = gro::NAPI_BUDGET, value_parser = parse_batch)]
    pub batch: usize,
    /// LRO mode: sort each batch by RSS hash (Toeplitz, or the frame's own) before coalescing.
    #[arg(long)]
    pub lro: bool,
    /// UDP GRO mode.
    #[arg(long, value_enum, default_value_t = UdpArg::Forward)]
    pub udp: UdpArg,
    /// TCP fraglist GRO (forwarded TCP kept as intact segments).
    #[arg(long)]
    pub tcp_fraglist: bool,
    /// Strict Linux: do not trim Ethernet padding (padded frames are not merged).
    #[arg(long)]
    pub no_trim: bool,
    /// Do not coalesce VLAN-tagged frames (a kernel without 8021q).
    #[arg(long)]
    pub no_vlan: bool,
    /// Kernels up to 6.19: a CWR segment never joins an aggregate.
    #[arg(long)]
    pub legacy_cwr: bool,
    /// Older kernels: a fixed IPv4 ID only merges with DF set.
    #[arg(long)]
    pub legacy_fixed_id: bool,
    /// Also flush aggregates older than this many microseconds (by frame timestamps).
    #[arg(long, value_name = "US")]
    pub flush_age_us: Option<u64>,
    /// Tunnel GRO for VXLAN on this UDP port (e.g. 4789; repeatable): datagrams
    /// to it are coalesced on their inner flow (docs/offload-rules.md 2.6).
    #[arg(long, value_name = "PORT")]
    pub vxlan: Vec<u16>,
    /// Tunnel GRO for Geneve on this UDP port (e.g. 6081; repeatable; at most
    /// four tunnel ports in all).
    #[arg(long, value_name = "PORT")]
    pub geneve: Vec<u16>,
    /// Print one JSON object {"medium", "packets_in", "wrong_ip_version",
    /// "packets_out", "superpackets", "segments_per_superpacket",
    /// "aggregation", "counters"}.
    #[arg(long)]
    pub json: bool,
}

fn parse_batch(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not a batch size (a number >= 1)")),
    }
}

impl GroArgs {
    /// The engine configuration these arguments ask for.
    pub fn config(&self) -> GroConfig {
        let mut tunnels = gro::TunnelPorts::NONE;
        for &p in &self.vxlan {
            tunnels = tunnels.with(p, TunnelKind::Vxlan);
        }
        for &p in &self.geneve {
            tunnels = tunnels.with(p, TunnelKind::Geneve);
        }
        GroConfig {
            tunnels,
            udp: match self.udp {
                UdpArg::Off => UdpGroMode::Off,
                UdpArg::Forward => UdpGroMode::Forward,
                UdpArg::Fraglist => UdpGroMode::Fraglist,
            },
            tcp_fraglist: self.tcp_fraglist,
            trim_padding: !self.no_trim,
            vlan: !self.no_vlan,
            cwr: if self.legacy_cwr { CwrRule::Legacy } else { CwrRule::Current },
            fixed_id: if self.legacy_fixed_id { FixedIdRule::Legacy } else { FixedIdRule::Current },
            flush_age_ns: self.flush_age_us.map(|us| us.saturating_mul(1000)),
            lro: self.lro,
            lro_queue_max: self.batch.max(1),
            ..GroConfig::forwarder()
        }
    }
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct GroReport {
    /// `ethernet` or `ip` (raw IP): the medium of the input and the output.
    medium: &'static str,
    packets_in: u64,
    /// Frames of linktype 228/229 not of that IP version (dropped).
    wrong_ip_version: u64,
    packets_out: u64,
    superpackets: u64,
    segments_per_superpacket: f64,
    /// Wire packets per delivered packet.
    aggregation: f64,
    counters: GroCounters,
}

/// Writes delivered packets to the output capture.
struct Output {
    writer: CaptureWriter<BufWriter<File>>,
    buf: Vec<u8>,
}

impl Output {
    fn write_all(&mut self, gro: &mut Gro) -> Result<(), PcapError> {
        let medium = gro.config().medium;
        for pkt in gro.drain_delivered() {
            let meta = gro::capture_bytes(&pkt, medium, &mut self.buf);
            let ts = pkt.meta.arrival_ns.unwrap_or(0);
            self.writer.write_frame(&self.buf, ts, &FrameAnnotation::from_meta(&meta))?;
        }
        Ok(())
    }
}

/// Runs the command: 0 when the output was written, 1 when frames were
/// dropped (not of their link type's IP version), 2 on a usage or I/O error
/// (an unsupported link type among them).
pub fn run(args: &GroArgs) -> Result<u8, CliError> {
    let input_err = |e: PcapError| CliError::context(args.input.display(), e);
    let output_err = |e: PcapError| CliError::context(args.output.display(), e);
    let mut reader = CaptureReader::open(&args.input).map_err(input_err)?;
    let mut gate = MediumGate::new("pcap gro", &args.input, &reader)?;
    // The engine and the output, made once the medium is known.
    let format = reader.format();
    let start = |medium: Medium| -> Result<(Gro, Output), CliError> {
        let writer = pcap_output::create(&args.output, format, medium)?;
        Ok((Gro::new(args.config().with_medium(medium)), Output { writer, buf: Vec::new() }))
    };
    let mut run: Option<(Gro, Output)> = None;
    let bar = progress::bar(reader.total_len(), !args.json, "coalescing");
    let mut in_batch = 0usize;
    while let Some(frame) = reader.next_frame().map_err(input_err)? {
        let FrameMedium::Read(medium) = gate.frame(&frame)? else {
            continue;
        };
        let (gro, out) = match &mut run {
            Some(r) => r,
            None => run.insert(start(medium)?),
        };
        let headers = medium.parse(frame.data).ok();
        let mut pkt = Packet::from_frame(frame.data);
        pkt.meta = frame.annotation.to_meta(headers.as_ref());
        pkt.meta.arrival_ns = Some(frame.timestamp_ns);
        gro.receive(pkt);
        in_batch += 1;
        if in_batch == args.batch {
            gro.flush();
            in_batch = 0;
            out.write_all(gro).map_err(output_err)?;
            bar.set_position(reader.bytes_read());
        }
    }
    let (mut gro, mut out) = match run {
        Some(r) => r,
        None => start(gate.finish(&reader)?)?,
    };
    gro.flush();
    out.write_all(&mut gro).map_err(output_err)?;
    bar.finish_and_clear();
    pcap_output::warn_dropped("pcap gro", &args.output, &out.writer);
    out.writer.finish().map_err(output_err)?;

    let c = *gro.counters();
    let report = GroReport {
        medium: gro.config().medium.name(),
        packets_in: c.packets_in + gate.wrong_ip_version,
        wrong_ip_version: gate.wrong_ip_version,
        packets_out: c.packets_out,
        superpackets: c.superpackets,
        segments_per_superpacket: c.segments_per_superpacket(),
        aggregation: c.aggregation(),
        counters: c,
    };
    if args.json {
        let json = serde_json::to_string(&report).map_err(|e| CliError::context("json", e))?;
        println!("{json}");
    } else {
        println!(
            "{} -> {}: {} frames in, {} out ({:.2} wire packets per packet); {} superpackets of {:.1} segments; \
             {} bypassed, {} bad checksums",
            args.input.display(),
            args.output.display(),
            report.packets_in,
            report.packets_out,
            report.aggregation,
            report.superpackets,
            report.segments_per_superpacket,
            c.bypassed.total(),
            c.bad_checksums,
        );
        if let Some(line) = gate.wrong_ip_version_line() {
            println!("{line}");
        }
    }
    Ok(if gate.wrong_ip_version > 0 { EXIT_PROBLEMS } else { EXIT_OK })
}
