//! `superpacket demo`: the main job. As root it runs the live data path
//! ([`super::demo_live`]: nothing needed beyond the binary, no `ip` or
//! `ethtool`); without privileges, or with `--offline`, it runs the offline
//! pipeline on traffic it generates, and says why:
//!
//! 1. generate flows (TCP and UDP, IPv4 and IPv6, untagged, 802.1Q and QinQ)
//!    as a TAP with TSO/USO hands them over: superpackets with
//!    `CHECKSUM_PARTIAL`, plus small frames;
//! 2. hand each one over as `virtio_net_hdr` + frame and import it the way
//!    the engine's ports will, with the kernel's validation, alongside a few
//!    deliberately bogus headers that must be refused;
//! 3. complete half of the deferred checksums in software;
//! 4. write everything to a pcapng with offload annotations, read it back and
//!    validate every frame (`pcap check` rules);
//! 5. receive side to transmit side: interleaved MTU frames of several flows
//!    go through GRO (superpackets out), then down the device stack of
//!    `examples/demo-offline.toml` (QinQ on an active-backup bond); the
//!    superpackets cross it whole and only the final port, which lacks TSO and
//!    USO, cuts them into wire frames. The wire frames are validated and the
//!    payload bytes counted on both sides.

use super::{CliError, EXIT_OK, EXIT_PROBLEMS};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;
use superpacket::offload::gro::{Gro, GroConfig};
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, ImportOptions, VirtioNetHdr};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{self, Medium};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::{MemoryDriver, topology};

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to write the capture (default: superpacket-demo.pcapng in the
    /// system temporary directory).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Superpackets per flow.
    #[arg(long, default_value_t = 16)]
    pub superpackets: usize,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Run the offline pipeline even as root.
    #[arg(long)]
    pub offline: bool,
    /// Seconds per live transfer (TCP, then UDP, in each of five configurations).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Live demo only: measure just these configurations (repeatable; default
    /// all five: relay, passthrough, perframe, mtubatched, legacy). Ratios
    /// need both sides.
    #[arg(long = "config", value_name = "NAME", value_parser = super::demo_live::CONFIG_NAMES)]
    pub configs: Vec<String>,
}

#[derive(Debug, Default, Serialize)]
struct DemoReport {
    mode: &'static str,
    flows: Vec<String>,
    handed_over: u64,
    imported: u64,
    refused: BTreeMap<String, u64>,
    superpackets: u64,
    wire_segments: u64,
    checksums_completed: u64,
    capture: String,
    capture_frames: u64,
    capture_bytes: u64,
    check_problems: u64,
    pipeline: PipelineReport,
    elapsed_ms: f64,
}

/// Figures of stage 5 (GRO -> device stack -> final-port GSO).
#[derive(Debug, Default, Serialize)]
struct PipelineReport {
    frames_in: u64,
    payload_bytes_in: u64,
    superpackets: u64,
    gro_segments_per_superpacket: f64,
    devices_crossed_whole: u64,
    port: String,
    port_segmented: u64,
    frames_out: u64,
    checksums_completed: u64,
    payload_bytes_out: u64,
    problems: u64,
}

/// Runs the demo; exit 0 when every stage did what it should, 1 otherwise.
pub fn run(args: &DemoArgs) -> Result<u8, CliError> {
    if !(0.2..=600.0).contains(&args.seconds) {
        return Err(CliError(format!("--seconds {} is outside 0.2..=600", args.seconds)));
    }
    if !args.offline {
        match superpacket_engine::io::privileges_available() {
            Ok(()) => return super::demo_live::run(args.seconds, args.json, &args.configs),
            Err(why) => eprintln!(
                "superpacket demo: the live data path needs root ({why}); running the offline pipeline instead"
            ),
        }
    }
    run_offline(args)
}

/// The offline pipeline (no privileges needed).
fn run_offline(args: &DemoArgs) -> Result<u8, CliError> {
    let started = Instant::now();
    let out = args.out.clone().unwrap_or_else(|| std::env::temp_dir().join("superpacket-demo.pcapng"));
    let mut report = DemoReport { mode: "offline", capture: out.display().to_string(), ..DemoReport::default() };

    let specs = demo_flows().map_err(|e| CliError::context("building flows", e))?;
    let mut writer = CaptureWriter::create(&out, CaptureFormat::PcapNg, LinkType::ETHERNET)
        .map_err(|e| CliError::context(out.display(), e))?;
    let opts = ImportOptions::default();
    let mut wire_bytes = vec![0u8; HdrLayout::Basic.len()];
    let mut ts = 1_700_000_000_000_000_000u64;

    for (name, spec) in &specs {
        report.flows.push(name.to_string());
        let mut flow = Flow::new(*spec);
        let gso_size = if spec.transport == Transport::Tcp { 1448 } else { 1400 };
        for i in 0..args.superpackets {
            let packet = flow
                .superpacket(
                    gso_size as usize * 44,
                    gso_size,
                    if i % 4 == 3 { TcpFlags::PSH } else { TcpFlags::empty() },
                )
                .map_err(|e| CliError::context("generating", e))?;
            let small =
                Packet::from_frame(&flow.frame(64, TcpFlags::empty()).map_err(|e| CliError::context("generating", e))?);
            for mut p in [packet, small] {
                // The TAP read form: virtio_net_hdr + frame, then the import a port does.
                let frame = p.to_vec();
                let hdr = VirtioNetHdr::from_meta(&p.meta, &frame, true).map_err(|e| CliError::context("export", e))?;
                hdr.emit(&mut wire_bytes, HdrLayout::Basic, HdrByteOrder::Native)
                    .map_err(|e| CliError::context("export", e))?;
                report.handed_over += 1;
                let parsed = VirtioNetHdr::parse(&wire_bytes, HdrLayout::Basic, HdrByteOrder::Native)
                    .map_err(|e| CliError::context("import", e))?;
                match parsed.to_meta(&frame, &opts) {
                    Ok(meta) => p.meta = OffloadMeta { arrival_ns: Some(ts), ..meta },
                    Err(e) => {
                        *report.refused.entry(e.reason().to_string()).or_default() += 1;
                        continue;
                    }
                }
                report.imported += 1;
                if p.meta.is_gso() {
                    report.superpackets += 1;
                    report.wire_segments += u64::from(p.meta.gso_segs);
                }
                if i % 2 == 1 {
                    complete_checksum(&mut p, &mut report);
                }
                let data = p.to_vec();
                writer
                    .write_frame(&data, ts, &FrameAnnotation::from_meta(&p.meta))
                    .map_err(|e| CliError::context(out.display(), e))?;
                ts += 1_000;
            }
        }
    }
    for (why, hdr, frame) in bogus_handovers(&specs).map_err(|e| CliError::context("generating", e))? {
        report.handed_over += 1;
        match hdr.to_meta(&frame, &opts) {
            Ok(_) => return Err(CliError(format!("bogus header ({why}) was accepted"))),
            Err(e) => *report.refused.entry(e.reason().to_string()).or_default() += 1,
        }
    }
    writer.finish().map_err(|e| CliError::context(out.display(), e))?;

    let mut reader = CaptureReader::open(&out).map_err(|e| CliError::context(out.display(), e))?;
    let mut problems = Vec::new();
    while let Some(frame) = reader.next_frame().map_err(|e| CliError::context(out.display(), e))? {
        report.capture_frames += 1;
        report.capture_bytes += frame.data.len() as u64;
        let headers = validate::parse_headers(frame.data, Medium::Ethernet).ok();
        let meta = frame.annotation.to_meta(headers.as_ref());
        validate::validate_frame(frame.data, Medium::Ethernet, &meta, frame.is_snapped(), &mut problems);
    }
    report.check_problems = problems.len() as u64;
    report.pipeline = gro_stack_gso(&specs, &mut problems)?;
    report.elapsed_ms = started.elapsed().as_secs_f64() * 1e3;

    if args.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| CliError::context("json", e))?);
    } else {
        print_human(&report, &problems);
    }
    let p = &report.pipeline;
    let conserved = p.payload_bytes_in == p.payload_bytes_out && p.frames_in == p.frames_out;
    Ok(if problems.is_empty() && conserved { EXIT_OK } else { EXIT_PROBLEMS })
}

/// Stage 5: MTU frames -> GRO -> QinQ on a bond -> a port without TSO/USO.
fn gro_stack_gso(
    specs: &[(&str, FlowSpec)],
    problems: &mut Vec<validate::Problem>,
) -> Result<PipelineReport, CliError> {
    let mut r = PipelineReport::default();
    // 8 receive batches, each 44 MTU-sized segments of 4 interleaved flows:
    // what a NIC receive ring sees. The stack adds the tags, so the frames
    // are untagged.
    let mut flows: Vec<Flow> =
        specs.iter().map(|(_, s)| Flow::new(FlowSpec { vlans: Default::default(), ..*s })).collect();
    let mut gro = Gro::new(GroConfig::forwarder());
    for _batch in 0..8 {
        for _ in 0..44 {
            for f in &mut flows {
                // Full-sized segments for a 1500-byte MTU (1448 TCP/IPv4 with
                // timestamps, 1428 over IPv6), 1400-byte UDP datagrams.
                let mss = if f.spec.transport == Transport::Tcp { 1514 - f.spec.header_len() } else { 1400 };
                let frame = f.frame(mss, TcpFlags::empty()).map_err(|e| CliError::context("generating", e))?;
                r.frames_in += 1;
                r.payload_bytes_in += mss as u64;
                gro.receive(Packet::from_frame(&frame));
            }
        }
        gro.flush(); // end of the receive batch (NAPI poll)
    }
    let superpackets: Vec<Packet> = gro.drain_delivered().collect();
    r.superpackets = superpackets.iter().filter(|p| p.meta.is_gso()).count() as u64;
    r.gro_segments_per_superpacket = r.frames_in as f64 / superpackets.len().max(1) as f64;

    let mut graph = topology::load(DEMO_TOPOLOGY).map_err(|e| CliError::context("examples/demo-offline.toml", e))?;
    let top = graph.lookup("bond0.10.20").map_err(|e| CliError::context("topology", e))?;
    for p in superpackets {
        graph.transmit(top, p);
    }
    for name in ["bond0.10.20", "bond0.10", "bond0"] {
        let id = graph.lookup(name).map_err(|e| CliError::context("topology", e))?;
        let c = graph.counters(id);
        if c.tx_segmented == 0 && c.tx_superpackets == r.superpackets {
            r.devices_crossed_whole += 1;
        }
    }
    for name in ["eth0", "eth1"] {
        let id = graph.lookup(name).map_err(|e| CliError::context("topology", e))?;
        let c = graph.counters(id).clone();
        if c.tx_packets == 0 {
            continue;
        }
        r.port = name.to_string();
        r.port_segmented = c.tx_segmented;
        r.checksums_completed = c.checksums_completed;
        let Some(driver) = graph.driver_mut::<MemoryDriver>(id) else { continue };
        for frame in driver.tx.drain(..) {
            let data = frame.to_vec();
            r.frames_out += 1;
            let before = problems.len();
            validate::validate_frame(&data, Medium::Ethernet, &frame.meta, false, problems);
            r.problems += (problems.len() - before) as u64;
            if let Ok(h) = validate::parse_headers(&data, Medium::Ethernet) {
                r.payload_bytes_out += h.payload_len as u64;
            }
        }
    }
    Ok(r)
}

/// The device stack of stage 5.
const DEMO_TOPOLOGY: &str = include_str!("../../../../examples/demo-offline.toml");

fn demo_flows() -> superpacket::wire::Result<Vec<(&'static str, FlowSpec)>> {
    Ok(vec![
        ("tcp/ipv4 untagged", FlowSpec::new(Transport::Tcp, false, 1)),
        ("tcp/ipv6 in 802.1Q vid 100", FlowSpec::new(Transport::Tcp, true, 2).with_vlans(&[(0x8100, 100)])?),
        (
            "udp/ipv4 in QinQ 802.1ad vid 10 + 802.1Q vid 200",
            FlowSpec::new(Transport::Udp, false, 3).with_vlans(&[(0x88A8, 10), (0x8100, 200)])?,
        ),
        ("udp/ipv6 untagged", FlowSpec::new(Transport::Udp, true, 4)),
    ])
}

/// Software checksum completion of a partial frame (offload-rules 0.3).
fn complete_checksum(p: &mut Packet, report: &mut DemoReport) {
    if let ChecksumState::Partial { start, offset } = p.meta.csum {
        let udp = offset == 6;
        if superpacket::csum::complete_partial(p.linear_mut(), start as usize, offset as usize, udp).is_some() {
            p.meta.csum = ChecksumState::None;
            report.checksums_completed += 1;
        }
    }
}

/// Headers a buggy or hostile writer might hand over; each must be refused.
fn bogus_handovers(
    specs: &[(&str, FlowSpec)],
) -> superpacket::wire::Result<Vec<(&'static str, VirtioNetHdr, Vec<u8>)>> {
    let mut flow = Flow::new(specs[0].1);
    let p = flow.superpacket(1448 * 8, 1448, TcpFlags::empty())?;
    let frame = p.to_vec();
    let good = VirtioNetHdr::from_meta(&p.meta, &frame, false).unwrap_or_default();
    Ok(vec![
        ("gso_size 0", VirtioNetHdr { gso_size: 0, ..good }, frame.clone()),
        ("csum_start outside the frame", VirtioNetHdr { csum_start: 60000, ..good }, frame.clone()),
        (
            "TCPV6 on an IPv4 frame",
            VirtioNetHdr { gso_type: superpacket::packet::virtio::GSO_TCPV6, ..good },
            frame.clone(),
        ),
        ("unknown gso_type", VirtioNetHdr { gso_type: 0x07, ..good }, frame),
    ])
}

fn print_human(r: &DemoReport, problems: &[validate::Problem]) {
    println!("superpacket demo: OFFLINE pipeline on generated traffic");
    println!("  (the live data path through real TAP devices needs root: run `superpacket demo` as root,");
    println!("   or `superpacket run <topology>`; this offline run exercises the packet model,");
    println!("   virtio_net_hdr import, checksum completion, offload-aware pcapng, GRO, the device stack");
    println!("   and final-port GSO on generated traffic, in memory)");
    println!("flows:");
    for f in &r.flows {
        println!("  {f}");
    }
    println!(
        "virtio_net_hdr hand-overs: {} ({} imported, {} refused)",
        r.handed_over,
        r.imported,
        r.handed_over - r.imported
    );
    for (why, n) in &r.refused {
        println!("  refused x{n}: {why}");
    }
    let avg = if r.superpackets > 0 { r.wire_segments as f64 / r.superpackets as f64 } else { 0.0 };
    println!(
        "superpackets: {} standing for {} wire segments ({avg:.1} per superpacket)",
        r.superpackets, r.wire_segments
    );
    println!("checksums completed in software: {}", r.checksums_completed);
    println!(
        "capture: {} ({} frames, {:.1} MB, annotated with gso_type/gso_size/gso_segs/csum=partial)",
        r.capture,
        r.capture_frames,
        r.capture_bytes as f64 / 1e6
    );
    println!("pcap check of the capture: {} problems", r.check_problems);
    let p = &r.pipeline;
    println!("receive -> GRO -> device stack -> final-port GSO:");
    println!(
        "  GRO: {} MTU frames of 4 interleaved flows -> {} superpackets ({:.1} frames each)",
        p.frames_in, p.superpackets, p.gro_segments_per_superpacket
    );
    println!(
        "  stack (examples/demo-offline.toml): 802.1Q 20 on 802.1ad 10 on bond0 (active-backup); {} of 3 devices passed every superpacket whole",
        p.devices_crossed_whole
    );
    println!(
        "  port {} (no TSO/USO): cut {} superpackets into {} wire frames, {} checksums computed during the cut",
        p.port, p.port_segmented, p.frames_out, p.checksums_completed
    );
    println!(
        "  wire frames validated: {} problems; payload bytes in {} / out {}{}",
        p.problems,
        p.payload_bytes_in,
        p.payload_bytes_out,
        if p.payload_bytes_in == p.payload_bytes_out { " (conserved)" } else { " (MISMATCH)" }
    );
    for p in problems {
        println!("  {p}");
    }
    println!("done in {:.1} ms", r.elapsed_ms);
}
