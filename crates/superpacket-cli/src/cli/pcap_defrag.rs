//! `superpacket pcap defrag IN OUT [--json]`: reassembles the IP fragments of
//! a capture ([`superpacket::offload::frag`], local-delivery rules: coalescing,
//! Linux defaults, timeouts measured on the capture's timestamps).
//!
//! Every reassembled datagram is written once, with the timestamp of the
//! fragment that completed it; every frame that is not a fragment (IPv6
//! atomic fragments, non-IP, snapped frames, other link types) is written
//! unchanged, in order. Dropped fragments are not written.
//!
//! Exit status: 0 when every fragment became part of a datagram (exact
//! duplicates are tolerated), 1 when fragments were dropped for a rule
//! (overlap, bad length, timeout, memory...) or datagrams were still
//! incomplete at the end of the capture, 2 on usage or I/O errors.

use super::{CliError, EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS, progress};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use superpacket::offload::frag::{
    DropReason, Family, ManualClock, ReasmConfig, ReasmCounters, Reassembler, Scope, Verdict, flatten,
};
use superpacket::packet::Packet;
use superpacket::pcap::{CaptureReader, CaptureWriter, FrameAnnotation, LinkType, PcapError, WriterOptions};
use superpacket::validate::{self, Medium};
use superpacket::wire::VlanStack;

/// Arguments of `pcap defrag`.
#[derive(Debug, Args)]
pub struct DefragArgs {
    /// Input capture (pcap or pcapng; Ethernet or raw IP).
    pub input: PathBuf,
    /// Output capture (same format as the input).
    pub output: PathBuf,
    /// Print one JSON object: {"packets_in", "packets_out", "datagrams_reassembled", "counters": {...}}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Default, Serialize)]
struct DefragReport {
    packets_in: u64,
    packets_out: u64,
    datagrams_reassembled: u64,
    /// Frames written unchanged (not fragments).
    passed_through: u64,
    /// Fragments dropped (duplicates included).
    fragments_dropped: u64,
    /// Queues still incomplete at the end of the capture.
    incomplete: usize,
    /// ICMP errors the rules would send (not written).
    icmp_offered: u64,
    /// Both families.
    counters: ReasmCounters,
    counters_ipv4: ReasmCounters,
    counters_ipv6: ReasmCounters,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs the command.
pub fn run(args: &DefragArgs) -> Result<u8, CliError> {
    let mut reader = CaptureReader::open(&args.input).map_err(|e| CliError::context(args.input.display(), e))?;
    let format = reader.format();
    let bar = progress::bar(reader.total_len(), !args.json, "defragmenting");
    let clock = ManualClock::new(0);
    let mut reasm = Reassembler::with_clock(ReasmConfig::default(), clock.clone());
    let mut writer: Option<CaptureWriter<_>> = None;
    let mut report = DefragReport::default();
    let mut problems = 0u64;
    let mut icmp = Vec::new();
    let mut buf = Vec::new();
    let mut now = 0u64;
    let open = |link: LinkType| {
        let opts = WriterOptions { strip_annotations: true, ..WriterOptions::default() };
        CaptureWriter::create_with_options(&args.output, format, link, opts)
            .map_err(|e| CliError::context(args.output.display(), e))
    };
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e @ PcapError::BadAnnotation { .. }) => {
                report.error = Some(e.to_string());
                break;
            }
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        };
        report.packets_in += 1;
        if writer.is_none() {
            writer = Some(open(frame.link_type)?);
        }
        let w = writer.as_mut().expect("just opened");
        now = now.max(frame.timestamp_ns);
        clock.set(now);
        let link = match frame.link_type {
            LinkType::ETHERNET => Some(Medium::Ethernet),
            LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => Some(Medium::Ip),
            _ => None,
        };
        let pass = |w: &mut CaptureWriter<_>, data: &[u8], ann: &FrameAnnotation| {
            w.write_frame(data, frame.timestamp_ns, ann).map_err(|e| CliError::context(args.output.display(), e))
        };
        let Some(link) = link.filter(|_| !frame.is_snapped()) else {
            pass(w, frame.data, &frame.annotation)?;
            report.passed_through += 1;
            continue;
        };
        let headers = validate::parse_headers(frame.data, link).ok();
        let mut packet = Packet::from_frame(frame.data);
        packet.meta = frame.annotation.to_meta(headers.as_ref());
        let scope = Scope {
            port: frame.interface_id,
            vlans: match link {
                Medium::Ethernet => frame.data.get(12..).and_then(|t| VlanStack::parse(t).ok()).map(|v| v.0),
                Medium::Ip => None,
            }
            .unwrap_or_default(),
        };
        let verdict = match link {
            Medium::Ethernet => reasm.push(packet, scope),
            Medium::Ip => reasm.push_ip(packet, scope),
        };
        match verdict {
            Ok(Verdict::Pass(_) | Verdict::NotFragment) => {
                pass(w, frame.data, &frame.annotation)?;
                report.passed_through += 1;
            }
            Ok(Verdict::Queued) => {}
            Ok(Verdict::Complete(d)) => {
                flatten(&d.packet, &mut buf);
                let ann = FrameAnnotation::from_meta(&d.packet.meta);
                pass(w, &buf, &ann)?;
                report.datagrams_reassembled += 1;
            }
            Err(drop) => {
                report.fragments_dropped += 1;
                problems += u64::from(drop.reason != DropReason::Duplicate);
            }
        }
        reasm.expire(&mut icmp);
        bar.set_position(reader.bytes_read());
    }
    bar.finish_and_clear();
    reasm.expire(&mut icmp);
    report.incomplete = reasm.queue_count(Family::V4) + reasm.queue_count(Family::V6);
    report.counters_ipv4 = *reasm.counters(Family::V4);
    report.counters_ipv6 = *reasm.counters(Family::V6);
    report.counters = reasm.counters_total();
    report.icmp_offered = report.counters.icmp;
    problems += report.counters.timeouts + report.counters.evicted;
    let w = match writer {
        Some(w) => w,
        None => open(reader.link_type().unwrap_or(LinkType::ETHERNET))?,
    };
    report.packets_out = w.frames_written();
    w.finish().map_err(|e| CliError::context(args.output.display(), e))?;

    if args.json {
        println!("{}", serde_json::to_string(&report).map_err(|e| CliError::context("json", e))?);
    } else {
        println!(
            "{} -> {}: {} frames in, {} out ({} datagrams reassembled, {} passed through), {} fragments dropped, {} incomplete",
            args.input.display(),
            args.output.display(),
            report.packets_in,
            report.packets_out,
            report.datagrams_reassembled,
            report.passed_through,
            report.fragments_dropped,
            report.incomplete
        );
    }
    if let Some(e) = &report.error {
        eprintln!("superpacket: error: {}: {e}", args.input.display());
        return Ok(EXIT_ERROR);
    }
    Ok(if problems == 0 && report.incomplete == 0 { EXIT_OK } else { EXIT_PROBLEMS })
}
