//! `superpacket pcap check FILE [--json]`: validates every frame of a capture
//! with the rules of [`superpacket::validate`].
//!
//! Link types (see [`super::pcap_media`]): Ethernet (1) and raw IP (101, 228,
//! 229), mixed freely across pcapng interfaces (each frame is checked as its
//! own medium). A frame of another link type stops the check with exit 2 and
//! a message naming the link type (the report so far is still printed); a
//! frame of linktype 228/229 not of that IP version is a problem of kind
//! `link-type-ip-version`.

use super::{CliError, EXIT_OK, EXIT_PROBLEMS, pcap_media, progress};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use superpacket::pcap::{CaptureFormat, CaptureReader, PcapError};
use superpacket::validate::{self, Problem};

/// Arguments of `pcap check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The capture (pcap or pcapng): Ethernet (linktype 1) or raw IP (101,
    /// 228, 229), interfaces of both media allowed; other link types are
    /// refused (exit 2).
    pub file: PathBuf,
    /// Print one JSON object: {"packets": N, "problems": [{"index", "kind", "detail"}], ...}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct FrameProblem {
    index: u64,
    kind: &'static str,
    detail: String,
}

#[derive(Debug, Default, Serialize)]
struct CheckReport {
    packets: u64,
    problems: Vec<FrameProblem>,
    /// Frames captured shorter than on the wire (only the bytes present checked).
    snapped: u64,
    /// A read error that stopped the check early (exit 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Runs the check; exit 0 when clean, 1 with problems, 2 on a read error.
pub fn run(args: &CheckArgs) -> Result<u8, CliError> {
    let mut reader = CaptureReader::open(&args.file).map_err(|e| CliError::context(args.file.display(), e))?;
    if reader.format() != CaptureFormat::PcapNg
        && let Some(link) = reader.link_type().filter(|l| l.medium().is_none())
    {
        return Err(pcap_media::unsupported("pcap check", &args.file, link, None));
    }
    let bar = progress::bar(reader.total_len(), !args.json, "checking");
    let mut report = CheckReport::default();
    let mut problems: Vec<Problem> = Vec::new();
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(PcapError::BadAnnotation { frame, source }) => {
                report.packets += 1;
                report.problems.push(FrameProblem { index: frame, kind: "bad-annotation", detail: source.to_string() });
                continue;
            }
            Err(e) => {
                report.error = Some(e.to_string());
                break;
            }
        };
        let Some(link) = frame.link_type.medium() else {
            let at = Some((frame.index, frame.interface_id));
            report.error = Some(pcap_media::unsupported_message("pcap check", frame.link_type, at));
            break;
        };
        report.packets += 1;
        if let Some(detail) = pcap_media::wrong_ip_version(frame.link_type, frame.data) {
            report.problems.push(FrameProblem { index: frame.index, kind: "link-type-ip-version", detail });
            continue;
        }
        let snapped = frame.is_snapped();
        report.snapped += u64::from(snapped);
        let headers = validate::parse_headers(frame.data, link).ok();
        let meta = frame.annotation.to_meta_in(headers.as_ref(), frame.data);
        problems.clear();
        validate::validate_frame(frame.data, link, &meta, snapped, &mut problems);
        let index = frame.index;
        for p in problems.drain(..) {
            report.problems.push(FrameProblem { index, kind: p.kind.name(), detail: p.detail });
        }
        bar.set_position(reader.bytes_read());
    }
    bar.finish_and_clear();
    // A pcapng without frames is refused like the others when its first interface is.
    if report.packets == 0
        && report.error.is_none()
        && let Some(link) = reader.link_type().filter(|l| l.medium().is_none())
    {
        report.error = Some(pcap_media::unsupported_message("pcap check", link, None));
    }

    if args.json {
        let json = serde_json::to_string(&report).map_err(|e| CliError::context("json", e))?;
        println!("{json}");
    } else {
        print_human(args, &report);
    }
    if let Some(e) = &report.error {
        eprintln!("superpacket: error: {}: {e}", args.file.display());
        return Ok(super::EXIT_ERROR);
    }
    Ok(if report.problems.is_empty() { EXIT_OK } else { EXIT_PROBLEMS })
}

fn print_human(args: &CheckArgs, r: &CheckReport) {
    for p in &r.problems {
        println!("frame {}: {}: {}", p.index, p.kind, p.detail);
    }
    let frames_with_problems = {
        let mut idx: Vec<u64> = r.problems.iter().map(|p| p.index).collect();
        idx.dedup();
        idx.len()
    };
    print!(
        "{}: {} frames, {} problems in {} frames",
        args.file.display(),
        r.packets,
        r.problems.len(),
        frames_with_problems
    );
    if r.snapped > 0 {
        print!(", {} snapped (checked as far as captured)", r.snapped);
    }
    println!();
}
