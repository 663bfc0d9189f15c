//! `superpacket pcap check FILE [--json]`: validates every frame of a capture
//! with the rules of [`superpacket::validate`].

use super::{CliError, EXIT_OK, EXIT_PROBLEMS, progress};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use superpacket::pcap::{CaptureReader, LinkType, PcapError};
use superpacket::validate::{self, Medium, Problem};

/// Arguments of `pcap check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The capture (pcap or pcapng; Ethernet or raw IP link type).
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
    /// Frames of a link type superpacket cannot check.
    #[serde(skip_serializing_if = "is_zero")]
    skipped: u64,
    /// A read error that stopped the check early (exit 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn link_layer(link: LinkType) -> Option<Medium> {
    match link {
        LinkType::ETHERNET => Some(Medium::Ethernet),
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => Some(Medium::Ip),
        _ => None,
    }
}

/// Runs the check; exit 0 when clean, 1 with problems, 2 on a read error.
pub fn run(args: &CheckArgs) -> Result<u8, CliError> {
    let mut reader = CaptureReader::open(&args.file).map_err(|e| CliError::context(args.file.display(), e))?;
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
        report.packets += 1;
        let Some(link) = link_layer(frame.link_type) else {
            report.skipped += 1;
            continue;
        };
        let snapped = frame.is_snapped();
        report.snapped += u64::from(snapped);
        let headers = validate::parse_headers(frame.data, link).ok();
        let meta = frame.annotation.to_meta(headers.as_ref());
        problems.clear();
        validate::validate_frame(frame.data, link, &meta, snapped, &mut problems);
        let index = frame.index;
        for p in problems.drain(..) {
            report.problems.push(FrameProblem { index, kind: p.kind.name(), detail: p.detail });
        }
        bar.set_position(reader.bytes_read());
    }
    bar.finish_and_clear();

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
    if r.skipped > 0 {
        print!(", {} skipped (link type not checked)", r.skipped);
    }
    println!();
}
