//! `superpacket pcap gro|gso|defrag|check` on raw-IP captures (link types
//! 101, 228, 229: what a TUN device carries) and on link types they do not
//! read.
//!
//! A raw-IP packet is an Ethernet frame without its first 14 bytes, so every
//! command run on the raw-IP copy of a capture must write the Ethernet run's
//! output minus 14 bytes per frame, with link type 101 (and the same
//! annotations, in the same format). Unsupported link types (113, 147) are
//! refused with exit 2 and a message naming them, and no output is written;
//! a pcapng mixing Ethernet and raw-IP interfaces is refused by the stateful
//! commands and checked by `pcap check`. tshark reads the raw-IP outputs as
//! valid IP/TCP/UDP (fails if tshark is missing, unless
//! `SUPERPACKET_SKIP_TSHARK=1`).

use std::path::Path;
use std::process::Command;

mod common;

use common::raw_ip::tcp_segments;

use superpacket::offload::frag::{FragmentRequest, Fragmenter};
use superpacket::packet::Packet;
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType, WriteRecord};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");
const BASE_TS: u64 = 1_700_000_000_000_000_000;

type Frames = Vec<(Vec<u8>, FrameAnnotation)>;

/// The raw-IP packets of Ethernet frames (untagged): the frames minus 14 bytes.
fn strip(frames: &Frames) -> Frames {
    frames.iter().map(|(f, a)| (f[14..].to_vec(), *a)).collect()
}

fn write_capture(path: &Path, format: CaptureFormat, link: LinkType, frames: &Frames) {
    let mut w = CaptureWriter::create(path, format, link).unwrap();
    for (i, (f, a)) in frames.iter().enumerate() {
        w.write_frame(f, BASE_TS + i as u64 * 1000, a).unwrap();
    }
    w.finish().unwrap();
}

/// The frames of a capture, its format and the link type of its frames
/// (all the same), or of the file when it has none.
fn read_capture(path: &Path) -> (CaptureFormat, LinkType, Frames) {
    let mut r = CaptureReader::open(path).unwrap();
    let mut frames = Vec::new();
    let mut links = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        frames.push((f.data.to_vec(), f.annotation));
        links.push(f.link_type);
    }
    let link = r.link_type().unwrap_or(LinkType::ETHERNET);
    assert!(links.iter().all(|l| *l == link), "one link type: {links:?} vs {link:?}");
    (r.format(), link, frames)
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: stdout {:?}, stderr {:?}", self.stdout, self.stderr))
    }
}

fn run(args: &[&str], input: &Path, output: Option<&Path>) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.arg("pcap").args(args).arg(input);
    if let Some(o) = output {
        cmd.arg(o);
    }
    let out = cmd.output().expect("run superpacket");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `command` (with `--json` and `extra`) on `eth` as Ethernet and on its
/// raw-IP copy as `raw_link`, both in `format`: both succeed with `code`, and
/// the raw-IP output is the Ethernet output minus 14 bytes per frame, written
/// as linktype 101 in the same format. Returns both JSON reports and the
/// outputs.
fn compare_media(
    dir: &Path,
    command: &str,
    extra: &[&str],
    format: CaptureFormat,
    raw_link: LinkType,
    eth: &Frames,
    code: i32,
) -> (serde_json::Value, serde_json::Value, Frames) {
    let tag = format!("{command}-{format}-{}", raw_link.0);
    let (eth_in, eth_out) = (dir.join(format!("{tag}-eth.in")), dir.join(format!("{tag}-eth.out")));
    let (raw_in, raw_out) = (dir.join(format!("{tag}-raw.in")), dir.join(format!("{tag}-raw.out")));
    write_capture(&eth_in, format, LinkType::ETHERNET, eth);
    write_capture(&raw_in, format, raw_link, &strip(eth));
    let mut args = vec![command, "--json"];
    args.extend_from_slice(extra);
    let e = run(&args, &eth_in, Some(&eth_out));
    assert_eq!(e.code, Some(code), "{tag} Ethernet: {} {}", e.stdout, e.stderr);
    let r = run(&args, &raw_in, Some(&raw_out));
    assert_eq!(r.code, Some(code), "{tag} raw IP: {} {}", r.stdout, r.stderr);
    let (ej, rj) = (e.json(), r.json());
    assert_eq!(ej["medium"], "ethernet", "{tag}: {ej}");
    assert_eq!(rj["medium"], "ip", "{tag}: {rj}");
    for key in ["packets_in", "packets_out"] {
        assert_eq!(ej[key], rj[key], "{tag} {key}: Ethernet {ej} vs raw IP {rj}");
    }
    let (eth_format, eth_link, eth_frames) = read_capture(&eth_out);
    let (raw_format, raw_link_out, raw_frames) = read_capture(&raw_out);
    assert_eq!(eth_link, LinkType::ETHERNET, "{tag}");
    assert_eq!(raw_link_out, LinkType::RAW, "{tag}: raw IP is written as linktype 101");
    assert_eq!(raw_format, eth_format, "{tag}");
    assert_eq!(raw_frames.len(), eth_frames.len(), "{tag}");
    for (i, ((rf, ra), (ef, ea))) in raw_frames.iter().zip(&eth_frames).enumerate() {
        assert_eq!(ra, ea, "{tag} frame {i}: annotation");
        assert_eq!(&rf[..], &ef[14..], "{tag} frame {i}: the Ethernet output's frame minus 14 bytes");
    }
    (ej, rj, raw_frames)
}

/// `pcap check` on a capture: exit code and JSON report.
fn check(path: &Path) -> (Option<i32>, serde_json::Value) {
    let r = run(&["check", "--json"], path, None);
    (r.code, r.json())
}

/// Two flows' frames alternated.
fn interleave(a: Frames, b: Frames) -> Frames {
    let mut out = Vec::new();
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

#[test]
fn gro_raw_ip_is_ethernet_minus_14_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let eth = interleave(tcp_segments(false, 1, 20), tcp_segments(true, 2, 20));
    for format in [CaptureFormat::PcapNg, CaptureFormat::PcapMicros] {
        let (_, rj, out) = compare_media(dir.path(), "gro", &[], format, LinkType::RAW, &eth, 0);
        assert_eq!(rj["packets_in"], 40, "{rj}");
        assert_eq!(rj["packets_out"], 2, "each flow is one superpacket: {rj}");
        assert_eq!(rj["superpackets"], 2, "{rj}");
        assert!(out.iter().all(|(_, a)| a.gso.is_some_and(|g| g.segs == 20)), "{out:?}");
    }
    // The raw-IP output passes `pcap check`.
    let (code, report) = check(&dir.path().join("gro-pcapng-101-raw.out"));
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["packets"], 2);
}

#[test]
fn gro_reads_ipv4_and_ipv6_link_types_and_counts_wrong_versions() {
    let dir = tempfile::tempdir().unwrap();
    let v4 = tcp_segments(false, 3, 10);
    let v6 = tcp_segments(true, 4, 10);
    let (_, rj, _) = compare_media(dir.path(), "gro", &[], CaptureFormat::PcapNg, LinkType::IPV4, &v4, 0);
    assert_eq!((rj["packets_out"].as_u64(), rj["wrong_ip_version"].as_u64()), (Some(1), Some(0)), "{rj}");
    let (_, rj, _) = compare_media(dir.path(), "gro", &[], CaptureFormat::PcapMicros, LinkType::IPV6, &v6, 0);
    assert_eq!(rj["packets_out"], 1, "{rj}");

    // An IPv6 packet in a linktype 228 (IPv4) capture: dropped, counted, exit 1.
    let mut frames = strip(&v4);
    frames.insert(3, strip(&v6)[0].clone());
    let (input, output) = (dir.path().join("mixed-228.pcapng"), dir.path().join("mixed-228.out"));
    write_capture(&input, CaptureFormat::PcapNg, LinkType::IPV4, &frames);
    let r = run(&["gro", "--json"], &input, Some(&output));
    assert_eq!(r.code, Some(1), "{} {}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!((j["packets_in"].as_u64(), j["wrong_ip_version"].as_u64()), (Some(11), Some(1)), "{j}");
    let (_, link, out) = read_capture(&output);
    assert_eq!(link, LinkType::RAW);
    assert!(out.iter().all(|(f, _)| f[0] >> 4 == 4), "the IPv6 packet is not written");
    // Human output names the problem.
    let r = run(&["gro"], &input, Some(&output));
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.contains("dropped 1: IP version") && r.stdout.contains("frame 3"), "{}", r.stdout);
    // `pcap check` reports it as a problem of the frame.
    let (code, report) = check(&input);
    assert_eq!(code, Some(1), "{report}");
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    assert_eq!((problems[0]["index"].as_u64(), &problems[0]["kind"]), (Some(3), &"link-type-ip-version".into()));
}

/// Superpackets of every kind (untagged: raw IP has no VLAN tags), annotated.
fn superpackets() -> Frames {
    let mut v = Vec::new();
    for (i, (t, v6, size)) in [
        (Transport::Tcp, false, 1448u16),
        (Transport::Tcp, true, 1428),
        (Transport::Udp, false, 1400),
        (Transport::Udp, true, 1000),
    ]
    .into_iter()
    .enumerate()
    {
        let p = Flow::new(FlowSpec::new(t, v6, 20 + i as u32)).superpacket(12000 + i, size, TcpFlags::PSH).unwrap();
        v.push((p.to_vec(), FrameAnnotation::from_meta(&p.meta)));
    }
    v
}

#[test]
fn gso_raw_ip_is_ethernet_minus_14_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut frames = superpackets();
    let plain = Flow::new(FlowSpec::new(Transport::Tcp, false, 30)).frame(100, TcpFlags::empty()).unwrap();
    frames.push((plain, FrameAnnotation::NONE));
    let (_, rj, out) = compare_media(dir.path(), "gso", &[], CaptureFormat::PcapNg, LinkType::RAW, &frames, 0);
    assert_eq!(rj["superpackets_segmented"], 4, "{rj}");
    assert!(out.len() > 30, "{rj}");
    assert!(out.iter().all(|(_, a)| *a == FrameAnnotation::NONE));
    let (code, report) = check(&dir.path().join("gso-pcapng-101-raw.out"));
    assert_eq!(code, Some(0), "{report}");

    // Classic pcap (no annotations): large un-annotated frames cut with --gso-size,
    // IPv4 as linktype 228 and IPv6 as 229.
    for (v6, link) in [(false, LinkType::IPV4), (true, LinkType::IPV6)] {
        let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, v6, 31));
        let big: Frames =
            (0..3).map(|_| (flow.frame(9000, TcpFlags::empty()).unwrap(), FrameAnnotation::NONE)).collect();
        let extra = ["--gso-size", "1000"];
        let (_, rj, out) = compare_media(dir.path(), "gso", &extra, CaptureFormat::PcapNanos, link, &big, 0);
        assert_eq!((rj["superpackets_segmented"].as_u64(), out.len()), (Some(3), 27), "{rj}");
    }
}

fn fragments(frame: &[u8], mtu: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    Fragmenter::new().fragment(Packet::from_frame(frame), &FragmentRequest::local(mtu), &mut out).unwrap();
    out.iter().map(Packet::to_vec).collect()
}

fn datagram(v6: bool, index: u32, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Udp, v6, index);
    spec.dont_frag = false;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

#[test]
fn defrag_raw_ip_is_ethernet_minus_14_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (d4, d6) = (datagram(false, 40, 12000), datagram(true, 41, 7000));
    let (mut f4, f6) = (fragments(&d4, 1500), fragments(&d6, 1280));
    f4.reverse();
    let plain = datagram(false, 42, 100);
    let mut frames: Frames = vec![(plain.clone(), FrameAnnotation::NONE)];
    frames.extend(interleave(
        f4.into_iter().map(|f| (f, FrameAnnotation::NONE)).collect(),
        f6.into_iter().map(|f| (f, FrameAnnotation::NONE)).collect(),
    ));
    for format in [CaptureFormat::PcapNg, CaptureFormat::PcapMicros] {
        let (_, rj, out) = compare_media(dir.path(), "defrag", &[], format, LinkType::RAW, &frames, 0);
        assert_eq!((rj["datagrams_reassembled"].as_u64(), out.len()), (Some(2), 3), "{rj}");
        assert_eq!(out[0].0, &plain[14..]);
        let datagrams: Vec<&[u8]> = out.iter().map(|(f, _)| &f[..]).collect();
        assert!(datagrams.contains(&&d4[14..]) && datagrams.contains(&&d6[14..]), "{rj}");
    }
    // One family per capture as 228 and 229.
    let only = |v6: bool| -> Frames { frames.iter().filter(|(f, _)| (f[14] >> 4 == 6) == v6).cloned().collect() };
    let (_, rj, _) = compare_media(dir.path(), "defrag", &[], CaptureFormat::PcapNg, LinkType::IPV4, &only(false), 0);
    assert_eq!(rj["datagrams_reassembled"], 1, "{rj}");
    let (_, rj, _) = compare_media(dir.path(), "defrag", &[], CaptureFormat::PcapNg, LinkType::IPV6, &only(true), 0);
    assert_eq!(rj["datagrams_reassembled"], 1, "{rj}");
}

/// A capture of `n` frames with link type `link` (113, 147: frames the
/// commands cannot read). The frames are Ethernet on purpose: a misread
/// would "work".
fn foreign_capture(path: &Path, format: CaptureFormat, link: LinkType, n: usize) {
    write_capture(path, format, link, &tcp_segments(false, 50, n));
}

#[test]
fn unsupported_link_types_are_refused_with_their_name() {
    let dir = tempfile::tempdir().unwrap();
    for (link, name) in [(LinkType(113), "113 (LINUX_SLL)"), (LinkType(147), "147 (USER0)")] {
        // Without frames too: a pcapng then has only its Interface Description Block.
        for (format, n) in [(CaptureFormat::PcapMicros, 2), (CaptureFormat::PcapNg, 2), (CaptureFormat::PcapNg, 0)] {
            let input = dir.path().join(format!("{}-{format}-{n}.in", link.0));
            foreign_capture(&input, format, link, n);
            for command in ["gro", "gso", "defrag", "check"] {
                let output = dir.path().join(format!("{}-{format}-{n}-{command}.out", link.0));
                let out = (command != "check").then_some(output.as_path());
                for json in [false, true] {
                    let args: &[&str] = if json { &[command, "--json"] } else { &[command] };
                    let r = run(args, &input, out);
                    let want = format!(
                        "link type {name} is not supported by `pcap {command}`: it reads Ethernet (1) and raw IP \
                         (101, 228, 229) captures"
                    );
                    assert_eq!(r.code, Some(2), "{command} {format} {}: {} {}", link.0, r.stdout, r.stderr);
                    assert!(r.stderr.contains(&want), "{command} {format}: {:?} lacks {want:?}", r.stderr);
                    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
                    assert!(!output.exists(), "{command} {format} {}: no output written", link.0);
                }
            }
        }
    }
}

/// A pcapng with an Ethernet interface (0) and a raw-IP one (1), a TCP
/// segment on each.
fn two_media_capture(path: &Path) -> Frames {
    let eth = tcp_segments(false, 60, 2);
    let mut w = CaptureWriter::create(path, CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    assert_eq!(w.add_interface(LinkType::RAW).unwrap(), 1);
    for (i, (f, iface)) in [(&eth[0].0[..], 0), (&eth[1].0[14..], 1)].into_iter().enumerate() {
        let rec = WriteRecord {
            data: f,
            original_len: None,
            timestamp_ns: BASE_TS + i as u64,
            interface_id: iface,
            annotation: FrameAnnotation::NONE,
            comment: None,
        };
        w.write_record(&rec).unwrap();
    }
    w.finish().unwrap();
    eth
}

#[test]
fn two_media_in_one_pcapng() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("two.pcapng");
    two_media_capture(&input);
    let (code, report) = check(&input);
    assert_eq!(code, Some(0), "pcap check reads each frame as its own medium: {report}");
    assert_eq!(report["packets"], 2);
    for command in ["gro", "gso", "defrag"] {
        let r = run(&[command], &input, Some(&dir.path().join(format!("{command}.out"))));
        assert_eq!(r.code, Some(2), "{command}: {} {}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("frame 1 (interface 1) has link type 101 (RAW)") && r.stderr.contains("one medium"),
            "{command}: {}",
            r.stderr
        );
    }
}

#[test]
fn tshark_reads_raw_ip_outputs() {
    if !common::wireshark_tools_available(&["tshark"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path();
    // GSO: segments with complete checksums.
    let gso_in = outputs.join("gso.in");
    let sps = superpackets();
    let segments: usize = sps.iter().map(|(_, a)| a.gso.map_or(1, |g| usize::from(g.segs))).sum();
    write_capture(&gso_in, CaptureFormat::PcapNg, LinkType::RAW, &strip(&sps));
    let gso_out = outputs.join("gso.pcapng");
    assert_eq!(run(&["gso"], &gso_in, Some(&gso_out)).code, Some(0));
    // Defrag: whole datagrams, as classic pcap.
    let defrag_in = outputs.join("defrag.in");
    let frags: Frames = [fragments(&datagram(false, 70, 6000), 1500), fragments(&datagram(true, 71, 5000), 1280)]
        .concat()
        .into_iter()
        .map(|f| (f[14..].to_vec(), FrameAnnotation::NONE))
        .collect();
    write_capture(&defrag_in, CaptureFormat::PcapMicros, LinkType::RAW, &frags);
    let defrag_out = outputs.join("defrag.pcap");
    assert_eq!(run(&["defrag"], &defrag_in, Some(&defrag_out)).code, Some(0));
    // GRO: superpackets (csum=partial: the TCP field holds the pseudo-header sum).
    let gro_in = outputs.join("gro.in");
    write_capture(&gro_in, CaptureFormat::PcapNg, LinkType::RAW, &strip(&tcp_segments(false, 72, 10)));
    let gro_out = outputs.join("gro.pcapng");
    assert_eq!(run(&["gro"], &gro_in, Some(&gro_out)).code, Some(0));

    let prefs = ["ip.check_checksum:TRUE", "tcp.check_checksum:TRUE", "udp.check_checksum:TRUE"];
    let fields = [
        "frame.encap_type",
        "ip.version",
        "ipv6.version",
        "ip.checksum.status",
        "tcp.checksum.status",
        "udp.checksum.status",
        "ip.len",
        "ipv6.plen",
    ];
    for (path, frames, l4_good) in [(&gso_out, segments, true), (&defrag_out, 2, true), (&gro_out, 1, false)] {
        let out = common::tshark_fields(path, &prefs, &fields);
        eprintln!("tshark {}:\n{out}", path.display());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), frames, "{}: {out}", path.display());
        for line in lines {
            let c: Vec<&str> = line.split('|').collect();
            // WTAP_ENCAP_RAW_IP is 7.
            assert_eq!(c[0], "7", "{}: raw IP encapsulation: {line}", path.display());
            assert!(c[1] == "4" || c[2] == "6", "{}: an IP packet: {line}", path.display());
            if c[1] == "4" {
                assert_eq!(c[3], "1", "{}: IPv4 checksum good: {line}", path.display());
            }
            let l4 = if c[4].is_empty() { c[5] } else { c[4] };
            if l4_good {
                assert_eq!(l4, "1", "{}: L4 checksum good: {line}", path.display());
            } else {
                assert_eq!(c[4], "0", "{}: a partial TCP checksum does not verify: {line}", path.display());
            }
            assert!(!c[6].is_empty() || !c[7].is_empty(), "{}: {line}", path.display());
        }
    }
}
