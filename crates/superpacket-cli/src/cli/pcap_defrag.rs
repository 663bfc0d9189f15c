//! `superpacket pcap defrag IN OUT [--json]`: reassembles the IP fragments of
//! a capture ([`superpacket::offload::frag`], local-delivery rules: coalescing,
//! Linux defaults, timeouts measured on the capture's timestamps).
//!
//! Every reassembled datagram is written once, with the timestamp of the
//! fragment that completed it; every frame that is not a fragment (IPv6
//! atomic fragments, non-IP, snapped frames) is written unchanged, in order.
//! Dropped fragments are not written.
//!
//! Link types (see [`super::pcap_media`]): Ethernet (1) and raw IP (101, 228,
//! 229; what a TUN device carries) are read, reassembled as that medium, and
//! written in it (linktype 1, or 101 for raw IP), in the format OUT's
//! extension names (classic pcap for `.pcap`, pcapng otherwise; see
//! [`super::pcap_output`]). Any
//! other link type is refused (exit 2); a frame of linktype 228/229 not of
//! that IP version is dropped and counted (exit 1).
//!
//! Exit status: 0 when every fragment became part of a datagram (exact
//! duplicates are tolerated), 1 when fragments were dropped for a rule
//! (overlap, bad length, timeout, memory...), datagrams were still
//! incomplete at the end of the capture or frames were of the wrong IP
//! version, 2 on usage or I/O errors.

use super::pcap_media::{FrameMedium, MediumGate};
use super::pcap_output;
use super::{CliError, EXIT_ERROR, EXIT_OK, EXIT_PROBLEMS, progress};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use superpacket::offload::frag::{
    DropReason, Family, ManualClock, ReasmConfig, ReasmCounters, Reassembler, Scope, Verdict, flatten,
};
use superpacket::packet::Packet;
use superpacket::pcap::{CaptureReader, CaptureWriter, FrameAnnotation};
use superpacket::validate::{self, Medium};
use superpacket::wire::VlanStack;

/// Arguments of `pcap defrag`.
#[derive(Debug, Args)]
pub struct DefragArgs {
    /// Input capture (pcap or pcapng): Ethernet (linktype 1) or raw IP (101,
    /// 228, 229); other link types are refused.
    pub input: PathBuf,
    /// Output capture, in the input's medium: Ethernet (linktype 1) or raw IP
    /// (101). Classic pcap if its name ends in `.pcap` (any case), pcapng
    /// otherwise.
    pub output: PathBuf,
    /// Print one JSON object: {"medium", "packets_in", "packets_out",
    /// "datagrams_reassembled", "wrong_ip_version", "counters": {...}, ...}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Default, Serialize)]
struct DefragReport {
    /// `ethernet` or `ip` (raw IP): the medium of the input and the output.
    medium: &'static str,
    packets_in: u64,
    packets_out: u64,
    datagrams_reassembled: u64,
    /// Frames written unchanged (not fragments).
    passed_through: u64,
    /// Fragments dropped (duplicates included).
    fragments_dropped: u64,
    /// Frames of linktype 228/229 not of that IP version (dropped).
    wrong_ip_version: u64,
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
    let mut gate = MediumGate::new("pcap defrag", &args.input, &reader)?;
    let format = reader.format();
    let bar = progress::bar(reader.total_len(), !args.json, "defragmenting");
    let clock = ManualClock::new(0);
    // Made with the medium of the first frame.
    let mut reasm: Option<Reassembler<ManualClock>> = None;
    let mut writer: Option<CaptureWriter<_>> = None;
    let mut report = DefragReport::default();
    let mut problems = 0u64;
    let mut icmp = Vec::new();
    let mut buf = Vec::new();
    let mut now = 0u64;
    let open = |medium: Medium| pcap_output::create(&args.output, format, medium);
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        };
        report.packets_in += 1;
        let FrameMedium::Read(link) = gate.frame(&frame)? else {
            continue;
        };
        let w = match &mut writer {
            Some(w) => w,
            None => writer.insert(open(link)?),
        };
        let reasm = reasm.get_or_insert_with(|| {
            Reassembler::with_clock(ReasmConfig { medium: link, ..ReasmConfig::default() }, clock.clone())
        });
        now = now.max(frame.timestamp_ns);
        clock.set(now);
        let pass = |w: &mut CaptureWriter<_>, data: &[u8], ann: &FrameAnnotation| {
            w.write_frame(data, frame.timestamp_ns, ann).map_err(|e| CliError::context(args.output.display(), e))
        };
        if frame.is_snapped() {
            pass(w, frame.data, &frame.annotation)?;
            report.passed_through += 1;
            continue;
        }
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
        // The reassembler reads the medium it was configured with (the run's).
        match reasm.push(packet, scope) {
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
    if let Some(reasm) = &mut reasm {
        reasm.expire(&mut icmp);
        report.incomplete = reasm.queue_count(Family::V4) + reasm.queue_count(Family::V6);
        report.counters_ipv4 = *reasm.counters(Family::V4);
        report.counters_ipv6 = *reasm.counters(Family::V6);
        report.counters = reasm.counters_total();
    }
    report.icmp_offered = report.counters.icmp;
    problems += report.counters.timeouts + report.counters.evicted;
    report.wrong_ip_version = gate.wrong_ip_version;
    problems += gate.wrong_ip_version;
    let medium = match gate.medium() {
        Some(m) => m,
        // An empty capture, or one that failed before its first frame was read.
        None if report.error.is_some() => Medium::Ethernet,
        None => gate.finish(&reader)?,
    };
    report.medium = medium.name();
    let w = match writer {
        Some(w) => w,
        None => open(medium)?,
    };
    report.packets_out = w.frames_written();
    pcap_output::warn_dropped("pcap defrag", &args.output, &w);
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
        if let Some(line) = gate.wrong_ip_version_line() {
            println!("{line}");
        }
    }
    if let Some(e) = &report.error {
        eprintln!("superpacket: error: {}: {e}", args.input.display());
        return Ok(EXIT_ERROR);
    }
    Ok(if problems == 0 && report.incomplete == 0 { EXIT_OK } else { EXIT_PROBLEMS })
}
