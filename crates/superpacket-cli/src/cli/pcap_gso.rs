//! `superpacket pcap gso IN OUT [--gso-size N] [--mtu N] [--json]`: software
//! segmentation of a capture with [`superpacket::offload::gso`].
//!
//! Every frame whose annotation says GSO (`gso_type=... gso_size=...`) is cut
//! into segments; with `--gso-size N`, so is every TCP/UDP frame with more
//! than N payload bytes that carries no GSO annotation. Frames marked
//! `csum=partial` get their checksum completed. The target is "no offload at
//! all", so every frame written has complete, correct checksums and no
//! annotation. Other frames are copied unchanged (snapped frames too). A
//! frame the segmenter refuses (bad metadata) is dropped and counted by
//! reason; the exit status is then 1.
//!
//! Link types (see [`super::pcap_media`]): Ethernet (1) and raw IP (101, 228,
//! 229; what a TUN device carries) are read, segmented as that medium, and
//! written in it (linktype 1, or 101 for raw IP), in the format OUT's
//! extension names (classic pcap for `.pcap`, pcapng otherwise; see
//! [`super::pcap_output`]). Any
//! other link type is refused (exit 2); a frame of linktype 228/229 not of
//! that IP version is dropped and counted (exit 1).

use super::pcap_media::{FrameMedium, MediumGate};
use super::pcap_output;
use super::{CliError, EXIT_OK, EXIT_PROBLEMS, progress};
use clap::Args;
use serde::Serialize;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use superpacket::offload::gso::{GsoCounters, SegmentSink, Segmenter, SgFrame, TargetCaps};
use superpacket::packet::{GsoType, OffloadMeta, Packet};
use superpacket::pcap::{CaptureReader, CaptureWriter, FrameAnnotation, PcapError};
use superpacket::wire::{FrameHeaders, L3Kind, L4Kind, Medium};

/// Arguments of `pcap gso`.
#[derive(Debug, Args)]
pub struct GsoArgs {
    /// Input capture (pcap or pcapng): Ethernet (linktype 1) or raw IP (101,
    /// 228, 229); other link types are refused.
    pub input: PathBuf,
    /// Output capture, in the input's medium: Ethernet (linktype 1) or raw IP
    /// (101). Classic pcap if its name ends in `.pcap` (any case), pcapng
    /// otherwise.
    pub output: PathBuf,
    /// Also segment un-annotated TCP/UDP frames with more than N payload bytes into N-byte segments.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub gso_size: Option<u16>,
    /// L3 MTU of the target: a segment longer than this is an error (dropped).
    #[arg(long, value_name = "N", default_value_t = 65535)]
    pub mtu: usize,
    /// Print one JSON object {"medium", "packets_in", "packets_out",
    /// "superpackets_segmented", "wrong_ip_version", "counters"}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct GsoReport {
    /// `ethernet` or `ip` (raw IP): the medium of the input and the output.
    medium: &'static str,
    packets_in: u64,
    packets_out: u64,
    superpackets_segmented: u64,
    /// Frames of linktype 228/229 not of that IP version (dropped).
    wrong_ip_version: u64,
    counters: GsoCounters,
}

/// Runs the command: 0 if every frame was written, 1 if some were dropped,
/// 2 on a usage or I/O error (an unsupported link type among them).
pub fn run(args: &GsoArgs) -> Result<u8, CliError> {
    let mut reader = CaptureReader::open(&args.input).map_err(|e| CliError::context(args.input.display(), e))?;
    let mut gate = MediumGate::new("pcap gso", &args.input, &reader)?;
    let format = reader.format();
    let open = |medium: Medium| -> Result<PcapSink, CliError> {
        let writer = pcap_output::create(&args.output, format, medium)?;
        Ok(PcapSink { writer, timestamp_ns: 0, buf: Vec::new(), error: None })
    };
    let mut sink: Option<PcapSink> = None;
    let mut seg = Segmenter::new();
    let bar = progress::bar(reader.total_len(), !args.json, "segmenting");
    let mut packets_in = 0u64;
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return Err(CliError::context(args.input.display(), e)),
        };
        packets_in += 1;
        let FrameMedium::Read(medium) = gate.frame(&frame)? else {
            continue;
        };
        let sink = match &mut sink {
            Some(s) => s,
            None => sink.insert(open(medium)?),
        };
        sink.timestamp_ns = frame.timestamp_ns;
        if frame.is_snapped() {
            sink.copy_frame(frame.data, frame.original_len, &frame.annotation).map_err(|e| io_err(args, e))?;
            continue;
        }
        let headers = medium.parse(frame.data).ok();
        let mut meta = frame.annotation.to_meta_in(headers.as_ref(), frame.data);
        if let (Some(size), Some(h)) = (args.gso_size, headers.as_ref())
            && meta.gso_type.is_empty()
        {
            meta = requested_gso(meta, h, size);
        }
        let mut pkt = Packet::from_frame(frame.data);
        pkt.meta = meta;
        let caps = TargetCaps::new(args.mtu).with_medium(medium);
        let _ = seg.segment(&pkt, &caps, sink);
        sink.take_error().map_err(|e| io_err(args, e))?;
        bar.set_position(reader.bytes_read());
    }
    bar.finish_and_clear();
    let medium = gate.finish(&reader)?;
    let sink = match sink {
        Some(s) => s,
        None => open(medium)?,
    };
    let packets_out = sink.writer.frames_written();
    pcap_output::warn_dropped("pcap gso", &args.output, &sink.writer);
    sink.writer.finish().map_err(|e| io_err(args, e))?;

    let c = seg.counters;
    let dropped = c.dropped() + gate.wrong_ip_version;
    let report = GsoReport {
        medium: medium.name(),
        packets_in,
        packets_out,
        superpackets_segmented: c.superpackets_segmented,
        wrong_ip_version: gate.wrong_ip_version,
        counters: c,
    };
    if args.json {
        let json = serde_json::to_string(&report).map_err(|e| CliError::context("json", e))?;
        println!("{json}");
    } else {
        let c = &report.counters;
        println!(
            "{} -> {}: {} frames in, {} out; {} superpackets cut into {} segments, {} checksums completed, {} dropped",
            args.input.display(),
            args.output.display(),
            report.packets_in,
            report.packets_out,
            c.superpackets_segmented,
            c.segments_out,
            c.checksums_completed,
            dropped
        );
        for (reason, n) in &c.drops {
            println!("  dropped {n}: {reason}");
        }
        if let Some(line) = gate.wrong_ip_version_line() {
            println!("{line}");
        }
    }
    Ok(if dropped > 0 { EXIT_PROBLEMS } else { EXIT_OK })
}

fn io_err(args: &GsoArgs, e: PcapError) -> CliError {
    CliError::context(args.output.display(), e)
}

/// The GSO metadata `--gso-size` asks for on an un-annotated TCP/UDP frame
/// with more payload than one segment (left alone otherwise).
fn requested_gso(mut meta: OffloadMeta, h: &FrameHeaders, size: u16) -> OffloadMeta {
    if h.is_fragment || h.payload_len <= size as usize {
        return meta;
    }
    let t = match (h.l3, h.l4) {
        (L3Kind::Ipv4, L4Kind::Tcp) => GsoType::TCPV4,
        (L3Kind::Ipv6, L4Kind::Tcp) => GsoType::TCPV6,
        (L3Kind::Ipv4 | L3Kind::Ipv6, L4Kind::Udp) => GsoType::UDP_L4,
        _ => return meta,
    };
    meta.gso_type = t;
    meta.gso_size = size;
    meta.gso_segs = 0;
    meta
}

/// Writes the segmenter's output straight into the capture (frames without
/// annotation: every checksum is complete). The first write error is kept
/// and reported after the packet.
struct PcapSink {
    writer: CaptureWriter<BufWriter<File>>,
    timestamp_ns: u64,
    buf: Vec<u8>,
    error: Option<PcapError>,
}

impl PcapSink {
    fn write(&mut self, len: usize, annotation: &FrameAnnotation) {
        if self.error.is_none()
            && let Err(e) = self.writer.write_frame(&self.buf[..len], self.timestamp_ns, annotation)
        {
            self.error = Some(e);
        }
    }

    fn copy_frame(&mut self, data: &[u8], original_len: u32, annotation: &FrameAnnotation) -> Result<(), PcapError> {
        self.writer.write_frame_with_original_len(data, original_len, self.timestamp_ns, annotation)
    }

    fn take_error(&mut self) -> Result<(), PcapError> {
        self.error.take().map_or(Ok(()), Err)
    }
}

impl SegmentSink for PcapSink {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        packet.copy_all_to(&mut self.buf);
        let len = self.buf.len();
        self.write(len, &FrameAnnotation::from_meta(meta));
    }

    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        frame.copy_to(&mut self.buf);
        let len = self.buf.len();
        self.write(len, &FrameAnnotation::default());
    }

    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.resize(len, 0);
        &mut self.buf[..len]
    }

    fn linear_frame(&mut self, len: usize, _meta: &OffloadMeta) {
        self.write(len, &FrameAnnotation::default());
    }
}
