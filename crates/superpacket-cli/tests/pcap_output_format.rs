//! The output format of `pcap gro`, `pcap gso` and `pcap defrag` follows
//! OUT's extension, whatever the input's format: `.pcap` (any case) is
//! classic pcap (the input's resolution if it is classic pcap, nanoseconds
//! for a pcapng input), anything else pcapng.
//!
//! Each command runs on the same frames as a classic pcap and a pcapng input,
//! Ethernet and raw IP (101, 228, 229), into `.pcap`, `.PCAP`, `.pcapng`,
//! `.PcapNg` and extension-less outputs: the magic number, link type, frames
//! and timestamps read back are checked against the pcapng output of the
//! Ethernet pcapng input; classic outputs carry no annotations, and a command
//! that had annotations to write says so once on stderr (the exit status is
//! unchanged). tshark reads every output (fails if tshark is missing, unless
//! `SUPERPACKET_SKIP_TSHARK=1`).

use std::path::Path;
use std::process::Command;

mod common;

use common::raw_ip::tcp_segments;

use superpacket::offload::frag::{FragmentRequest, Fragmenter};
use superpacket::packet::Packet;
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType, WriterOptions};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");
/// Input timestamps are whole microseconds, so a classic pcap input and a
/// pcapng input hold the same ones.
const BASE_TS: u64 = 1_700_000_000_000_000_000;
const WARNING: &str = "classic pcap cannot carry offload annotations";

const MAGIC_PCAP_US: [u8; 4] = [0xd4, 0xc3, 0xb2, 0xa1];
const MAGIC_PCAP_NS: [u8; 4] = [0x4d, 0x3c, 0xb2, 0xa1];
const MAGIC_PCAPNG: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

type Frames = Vec<(Vec<u8>, FrameAnnotation)>;

/// A frame read back: bytes, annotation, timestamp.
type ReadFrame = (Vec<u8>, FrameAnnotation, u64);

fn write_capture(path: &Path, format: CaptureFormat, link: LinkType, frames: &Frames) {
    let opts = WriterOptions { strip_annotations: true, ..WriterOptions::default() };
    let mut w = CaptureWriter::create_with_options(path, format, link, opts).unwrap();
    for (i, (f, a)) in frames.iter().enumerate() {
        w.write_frame(f, BASE_TS + i as u64 * 1000, a).unwrap();
    }
    w.finish().unwrap();
}

/// The first four bytes of a file, its format, its link type and its frames.
fn read_output(path: &Path) -> ([u8; 4], CaptureFormat, LinkType, Vec<ReadFrame>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let magic: [u8; 4] = bytes[..4].try_into().unwrap();
    let mut r = CaptureReader::open(path).unwrap();
    let mut frames = Vec::new();
    let mut links = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        links.push(f.link_type);
        frames.push((f.data.to_vec(), f.annotation, f.timestamp_ns));
    }
    let link = r.link_type().unwrap();
    assert!(links.iter().all(|l| *l == link), "{}: one link type: {links:?}", path.display());
    (magic, r.format(), link, frames)
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(command: &str, extra: &[&str], input: &Path, output: &Path) -> Run {
    let out = Command::new(BIN)
        .args(["pcap", command, "--json"])
        .args(extra)
        .arg(input)
        .arg(output)
        .output()
        .expect("run superpacket");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The raw-IP packets of Ethernet frames (untagged): the frames minus 14 bytes.
fn strip(frames: &Frames) -> Frames {
    frames.iter().map(|(f, a)| (f[14..].to_vec(), *a)).collect()
}

const OUTPUT_NAMES: [&str; 5] = ["out.pcapng", "out.pcap", "OUT.PCAP", "out.PcapNg", "out"];

fn classic(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".pcap")
}

/// One output of [`matrix`].
struct Output {
    path: std::path::PathBuf,
    raw: bool,
    frames: usize,
}

/// Runs `command` (with `extra`) on `eth` as a classic pcap and a pcapng
/// input, Ethernet and raw IP as `raw_link`, into every name of
/// [`OUTPUT_NAMES`]; every run exits `code`. Checks each output's magic
/// number, link type, frames, timestamps and annotations against the pcapng
/// output of the Ethernet pcapng input, and the warning about lost
/// annotations. Returns the reference frames and every output.
fn matrix(
    dir: &Path,
    command: &str,
    extra: &[&str],
    raw_link: LinkType,
    eth: &Frames,
    code: i32,
) -> (Vec<ReadFrame>, Vec<Output>) {
    let mut reference: Option<Vec<ReadFrame>> = None;
    let mut packets_out = None;
    let mut outputs = Vec::new();
    for (raw, link, frames) in [(false, LinkType::ETHERNET, eth.clone()), (true, raw_link, strip(eth))] {
        for in_format in [CaptureFormat::PcapNg, CaptureFormat::PcapMicros] {
            let tag = format!("{command}-{}-{in_format}", link.0);
            let input = dir.join(format!("{tag}.in"));
            write_capture(&input, in_format, link, &frames);
            let sub = dir.join(&tag);
            std::fs::create_dir_all(&sub).unwrap();
            for name in OUTPUT_NAMES {
                let what = format!("{tag} -> {name}");
                let output = sub.join(name);
                let r = run(command, extra, &input, &output);
                assert_eq!(r.code, Some(code), "{what}: {} {}", r.stdout, r.stderr);
                let json: serde_json::Value = serde_json::from_str(r.stdout.trim())
                    .unwrap_or_else(|e| panic!("{what}: {e}: {} {}", r.stdout, r.stderr));
                let (magic, format, out_link, got) = read_output(&output);
                // Magic number and format: the extension's, not the input's.
                let (want_magic, want_format) = match (classic(name), in_format) {
                    (false, _) => (MAGIC_PCAPNG, CaptureFormat::PcapNg),
                    (true, CaptureFormat::PcapMicros) => (MAGIC_PCAP_US, CaptureFormat::PcapMicros),
                    (true, _) => (MAGIC_PCAP_NS, CaptureFormat::PcapNanos),
                };
                assert_eq!(magic, want_magic, "{what}: magic number");
                assert_eq!(format, want_format, "{what}");
                // Raw IP stays raw IP (101) in both formats.
                assert_eq!(out_link, if raw { LinkType::RAW } else { LinkType::ETHERNET }, "{what}");
                assert_eq!(json["medium"], if raw { "ip" } else { "ethernet" }, "{what}: {json}");
                assert_eq!(json["packets_out"].as_u64(), Some(got.len() as u64), "{what}: {json}");
                let reference = reference.get_or_insert_with(|| got.clone());
                assert_eq!(*packets_out.get_or_insert(json["packets_out"].clone()), json["packets_out"], "{what}");
                assert_eq!(got.len(), reference.len(), "{what}: frames");
                for (i, ((gf, ga, gt), (rf, ra, rt))) in got.iter().zip(reference.iter()).enumerate() {
                    let rf = if raw { &rf[14..] } else { &rf[..] };
                    assert_eq!(&gf[..], rf, "{what} frame {i}: bytes");
                    assert_eq!(gt, rt, "{what} frame {i}: timestamp");
                    let want = if classic(name) { FrameAnnotation::NONE } else { *ra };
                    assert_eq!(*ga, want, "{what} frame {i}: annotation");
                }
                // Lost annotations are said once on stderr; nothing is said otherwise.
                let lost = reference.iter().filter(|(_, a, _)| *a != FrameAnnotation::NONE).count();
                let warnings = r.stderr.matches(WARNING).count();
                if classic(name) && lost > 0 {
                    assert_eq!(warnings, 1, "{what}: {}", r.stderr);
                    assert!(r.stderr.contains(&format!("{lost} frame(s)")), "{what}: {}", r.stderr);
                    assert!(r.stderr.contains(".pcapng"), "{what}: {}", r.stderr);
                } else {
                    assert_eq!(warnings, 0, "{what}: {}", r.stderr);
                }
                outputs.push(Output { path: output, raw, frames: got.len() });
            }
        }
    }
    (reference.unwrap(), outputs)
}

/// Frames of several flows alternated.
fn interleave(flows: Vec<Frames>) -> Frames {
    let mut its: Vec<_> = flows.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for it in &mut its {
            out.extend(it.next());
        }
        if out.len() == before {
            return out;
        }
    }
}

fn v4_only(frames: &Frames) -> Frames {
    frames.iter().filter(|(f, _)| f[14] >> 4 == 4).cloned().collect()
}

fn v6_only(frames: &Frames) -> Frames {
    frames.iter().filter(|(f, _)| f[14] >> 4 == 6).cloned().collect()
}

fn gro_frames() -> Frames {
    interleave(vec![tcp_segments(false, 1, 12), tcp_segments(true, 2, 12)])
}

/// Large un-annotated TCP and UDP frames with complete checksums (classic
/// pcap carries no annotation: `--gso-size` asks for the cut).
fn gso_frames() -> Frames {
    let mut v = Vec::new();
    for (i, (t, v6)) in
        [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false), (Transport::Udp, true)]
            .into_iter()
            .enumerate()
    {
        let mut flow = Flow::new(FlowSpec::new(t, v6, 10 + i as u32));
        v.push((flow.frame(5000, TcpFlags::PSH).unwrap(), FrameAnnotation::NONE));
        v.push((flow.frame(200, TcpFlags::empty()).unwrap(), FrameAnnotation::NONE));
    }
    v
}

fn datagram(v6: bool, index: u32, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Udp, v6, index);
    spec.dont_frag = false;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

fn fragments(frame: &[u8], mtu: usize) -> Frames {
    let mut out = Vec::new();
    Fragmenter::new().fragment(Packet::from_frame(frame), &FragmentRequest::local(mtu), &mut out).unwrap();
    out.iter().map(|p| (p.to_vec(), FrameAnnotation::NONE)).collect()
}

fn defrag_frames() -> Frames {
    let mut frames: Frames = vec![(datagram(false, 40, 100), FrameAnnotation::NONE)];
    let mut f4 = fragments(&datagram(false, 41, 6000), 1500);
    f4.reverse();
    frames.extend(interleave(vec![f4, fragments(&datagram(true, 42, 5000), 1280)]));
    frames
}

#[test]
fn gro_output_format_follows_extension() {
    let dir = tempfile::tempdir().unwrap();
    let frames = gro_frames();
    let (reference, _) = matrix(dir.path(), "gro", &[], LinkType::RAW, &frames, 0);
    // Two superpackets, annotated in pcapng (and so lost, with a warning, in classic pcap).
    assert_eq!(reference.len(), 2);
    assert!(reference.iter().all(|(_, a, _)| a.gso.is_some_and(|g| g.segs == 12) && a.csum_partial));
    let (reference, _) = matrix(dir.path(), "gro", &[], LinkType::IPV4, &v4_only(&frames), 0);
    assert_eq!(reference.len(), 1);
    let (reference, _) = matrix(dir.path(), "gro", &[], LinkType::IPV6, &v6_only(&frames), 0);
    assert_eq!(reference.len(), 1);
}

#[test]
fn gso_output_format_follows_extension() {
    let dir = tempfile::tempdir().unwrap();
    let frames = gso_frames();
    let extra = ["--gso-size", "1000"];
    let (reference, _) = matrix(dir.path(), "gso", &extra, LinkType::RAW, &frames, 0);
    assert!(reference.len() > 20, "segments: {}", reference.len());
    assert!(reference.iter().all(|(_, a, _)| *a == FrameAnnotation::NONE));
    matrix(dir.path(), "gso", &extra, LinkType::IPV4, &v4_only(&frames), 0);
    matrix(dir.path(), "gso", &extra, LinkType::IPV6, &v6_only(&frames), 0);
}

#[test]
fn gso_of_annotated_pcapng_into_classic_pcap() {
    // Annotated superpackets (pcapng input only) cut into segments without
    // annotations: a classic output loses nothing and warns of nothing.
    let dir = tempfile::tempdir().unwrap();
    let mut frames = Frames::new();
    for (i, (t, v6, size)) in [(Transport::Tcp, false, 1448u16), (Transport::Udp, true, 1000)].into_iter().enumerate() {
        let p = Flow::new(FlowSpec::new(t, v6, 50 + i as u32)).superpacket(9000, size, TcpFlags::PSH).unwrap();
        frames.push((p.to_vec(), FrameAnnotation::from_meta(&p.meta)));
    }
    let input = dir.path().join("in.pcapng");
    write_capture(&input, CaptureFormat::PcapNg, LinkType::ETHERNET, &frames);
    let (ng, classic) = (dir.path().join("out.pcapng"), dir.path().join("out.pcap"));
    for output in [&ng, &classic] {
        let r = run("gso", &[], &input, output);
        assert_eq!(r.code, Some(0), "{} {}", r.stdout, r.stderr);
        assert!(!r.stderr.contains(WARNING), "{}", r.stderr);
    }
    let (magic, _, _, a) = read_output(&classic);
    assert_eq!(magic, MAGIC_PCAP_NS);
    let (_, _, _, b) = read_output(&ng);
    assert!(a.len() > 10);
    assert_eq!(a, b, "the same segments in both formats");
}

#[test]
fn defrag_output_format_follows_extension() {
    let dir = tempfile::tempdir().unwrap();
    let frames = defrag_frames();
    let (reference, _) = matrix(dir.path(), "defrag", &[], LinkType::RAW, &frames, 0);
    assert_eq!(reference.len(), 3, "one plain frame and two datagrams");
    matrix(dir.path(), "defrag", &[], LinkType::IPV4, &v4_only(&frames), 0);
    matrix(dir.path(), "defrag", &[], LinkType::IPV6, &v6_only(&frames), 0);
}

#[test]
fn defrag_warns_of_annotations_lost_to_classic_pcap() {
    // An annotated superpacket passes through `pcap defrag` unchanged: pcapng
    // keeps its annotation, classic pcap loses it and says so once.
    let dir = tempfile::tempdir().unwrap();
    let p = Flow::new(FlowSpec::new(Transport::Tcp, false, 60)).superpacket(9000, 1448, TcpFlags::PSH).unwrap();
    let ann = FrameAnnotation::from_meta(&p.meta);
    let mut frames: Frames = vec![(p.to_vec(), ann), (p.to_vec(), ann)];
    frames.extend(fragments(&datagram(false, 61, 3000), 1500));
    let input = dir.path().join("in.pcapng");
    write_capture(&input, CaptureFormat::PcapNg, LinkType::ETHERNET, &frames);
    let (ng, classic) = (dir.path().join("out.pcapng"), dir.path().join("out.Pcap"));
    let r = run("defrag", &[], &input, &ng);
    assert_eq!(r.code, Some(0), "{} {}", r.stdout, r.stderr);
    assert!(!r.stderr.contains(WARNING), "{}", r.stderr);
    let r = run("defrag", &[], &input, &classic);
    assert_eq!(r.code, Some(0), "{} {}", r.stdout, r.stderr);
    assert_eq!(r.stderr.matches(WARNING).count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("2 frame(s)") && r.stderr.contains("pcap defrag"), "{}", r.stderr);
    let (_, _, _, a) = read_output(&ng);
    let (magic, _, _, b) = read_output(&classic);
    assert_eq!(magic, MAGIC_PCAP_NS);
    assert_eq!(a.len(), 3);
    assert_eq!((a[0].1, b[0].1), (ann, FrameAnnotation::NONE));
    for ((af, _, at), (bf, _, bt)) in a.iter().zip(&b) {
        assert_eq!((af, at), (bf, bt));
    }
}

#[test]
fn gro_human_output_warns_once_too() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    write_capture(&input, CaptureFormat::PcapMicros, LinkType::ETHERNET, &gro_frames());
    let output = dir.path().join("out.pcap");
    let out = Command::new(BIN).args(["pcap", "gro"]).arg(&input).arg(&output).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
    assert!(stderr.contains("superpacket: warning:") && stderr.contains("2 frame(s)"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 out"), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(read_output(&output).0, MAGIC_PCAP_US);
    // Without their annotations the superpackets' partial checksums are
    // problems to `pcap check` (as docs/pcap.md says); the pcapng output is clean.
    let ng = dir.path().join("out.pcapng");
    assert_eq!(Command::new(BIN).args(["pcap", "gro"]).arg(&input).arg(&ng).output().unwrap().status.code(), Some(0));
    let check = |path: &Path| Command::new(BIN).args(["pcap", "check"]).arg(path).output().unwrap().status.code();
    assert_eq!((check(&output), check(&ng)), (Some(1), Some(0)));
}

#[test]
fn tshark_reads_every_output_format() {
    if !common::wireshark_tools_available(&["tshark"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runs: [(&str, &[&str], Frames); 3] =
        [("gro", &[], gro_frames()), ("gso", &["--gso-size", "1000"], gso_frames()), ("defrag", &[], defrag_frames())];
    for (command, extra, frames) in runs {
        let sub = dir.path().join(command);
        std::fs::create_dir_all(&sub).unwrap();
        let (_, outputs) = matrix(&sub, command, extra, LinkType::RAW, &frames, 0);
        let prefs = ["ip.check_checksum:TRUE", "tcp.check_checksum:TRUE", "udp.check_checksum:TRUE"];
        let fields =
            ["frame.encap_type", "frame.len", "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status"];
        for o in outputs {
            let (_, _, _, ours) = read_output(&o.path);
            let out = common::tshark_fields(&o.path, &prefs, &fields);
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), o.frames, "{}: {out}", o.path.display());
            for (line, (f, _, _)) in lines.iter().zip(&ours) {
                let c: Vec<&str> = line.split('|').collect();
                // WTAP_ENCAP_ETHERNET is 1, WTAP_ENCAP_RAW_IP 7.
                assert_eq!(c[0], if o.raw { "7" } else { "1" }, "{}: {line}", o.path.display());
                assert_eq!(c[1], f.len().to_string(), "{}: {line}", o.path.display());
                if !c[2].is_empty() {
                    assert_eq!(c[2], "1", "{}: IPv4 checksum good: {line}", o.path.display());
                }
                // GRO's superpackets hold a partial TCP checksum; the others verify.
                let l4 = if c[3].is_empty() { c[4] } else { c[3] };
                if command != "gro" && !l4.is_empty() {
                    assert_eq!(l4, "1", "{}: L4 checksum good: {line}", o.path.display());
                }
            }
        }
    }
}
