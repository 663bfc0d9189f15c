//! `superpacket pcap gso` end to end, and Wireshark's view of GSO output.
//!
//! - A capture with annotated superpackets (TCPv4/TCPv6/USO, VLAN tags),
//!   partial-checksum single frames, plain frames, an un-annotated large
//!   frame (for `--gso-size`), a GSO frame no larger than its gso_size (one
//!   frame out) and one bad superpacket goes through the CLI;
//!   `--json` counts are checked and `superpacket pcap check` passes on the
//!   output.
//! - Segments produced by the library are written to a pcapng and tshark
//!   validates every IP/TCP/UDP checksum. Fails if tshark is missing unless
//!   `SUPERPACKET_SKIP_TSHARK=1`.

use std::path::Path;
use std::process::Command;

mod common;

use superpacket::offload::gso::{CsumCaps, Segmenter, TargetCaps, VecSink};
use superpacket::packet::{ChecksumState, GsoType, Packet};
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn spec(t: Transport, v6: bool, tags: &[(u16, u16)]) -> FlowSpec {
    FlowSpec::new(t, v6, 9).with_vlans(tags).unwrap()
}

/// Superpackets of every kind, VLAN depth 0-2, with the flags that matter.
fn superpackets() -> Vec<Packet> {
    let mut v = Vec::new();
    let tags: [&[(u16, u16)]; 3] = [&[], &[(0x8100, 5)], &[(0x88A8, 10), (0x8100, 20)]];
    for (i, t) in tags.iter().enumerate() {
        v.push(Flow::new(spec(Transport::Tcp, false, t)).superpacket(20000 + i, 1448, TcpFlags::PSH).unwrap());
        let mut p = Flow::new(spec(Transport::Tcp, true, t))
            .superpacket(9000 + i, 1428, TcpFlags::CWR | TcpFlags::FIN)
            .unwrap();
        p.meta.gso_type |= GsoType::TCP_ECN;
        v.push(p);
        v.push(Flow::new(spec(Transport::Udp, false, t)).superpacket(14007, 1400, TcpFlags::empty()).unwrap());
        v.push(Flow::new(spec(Transport::Udp, true, t)).superpacket(5000, 1000, TcpFlags::empty()).unwrap());
    }
    v
}

fn write_capture(path: &Path, frames: &[(Vec<u8>, FrameAnnotation)]) {
    let mut w = CaptureWriter::create(path, CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    for (i, (f, a)) in frames.iter().enumerate() {
        w.write_frame(f, 1_700_000_000_000_000_000 + i as u64 * 1000, a).unwrap();
    }
    w.finish().unwrap();
}

fn read_all(path: &Path) -> Vec<(Vec<u8>, FrameAnnotation)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push((f.data.to_vec(), f.annotation));
    }
    out
}

#[test]
fn pcap_gso_cli_segments_and_output_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcapng");
    let output = dir.path().join("out.pcapng");
    let mut frames: Vec<(Vec<u8>, FrameAnnotation)> = Vec::new();
    let mut expect_segments = 0u64;
    for p in superpackets() {
        expect_segments += p.meta.gso_segs as u64;
        frames.push((p.to_vec(), FrameAnnotation::from_meta(&p.meta)));
    }
    // A partial-checksum single frame, a plain frame, an un-annotated large frame.
    let single = Flow::new(spec(Transport::Udp, false, &[])).superpacket(300, 1400, TcpFlags::empty()).unwrap();
    assert!(matches!(single.meta.csum, ChecksumState::Partial { .. }));
    frames.push((single.to_vec(), FrameAnnotation::from_meta(&single.meta)));
    let plain = Flow::new(spec(Transport::Tcp, false, &[])).frame(100, TcpFlags::empty()).unwrap();
    frames.push((plain.clone(), FrameAnnotation::default()));
    let big = Flow::new(spec(Transport::Tcp, true, &[])).frame(5000, TcpFlags::PSH).unwrap();
    frames.push((big.clone(), FrameAnnotation::default()));
    write_capture(&input, &frames);

    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (i, o) = (input.to_str().unwrap(), output.to_str().unwrap());

    // Without --gso-size: the big frame passes unchanged.
    let (code, stdout, stderr) = run(&["pcap", "gso", i, o, "--json"]);
    assert_eq!(code, Some(0), "{stdout} {stderr}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["packets_in"], frames.len() as u64);
    assert_eq!(j["superpackets_segmented"], 12);
    assert_eq!(j["packets_out"], expect_segments + 3);
    assert_eq!(j["counters"]["segments_out"], expect_segments);
    assert_eq!(j["counters"]["checksums_completed"], expect_segments + 1);
    let out = read_all(&output);
    assert_eq!(out.len() as u64, expect_segments + 3);
    assert!(out.iter().all(|(_, a)| a.is_empty()), "no annotation left");
    assert_eq!(out[out.len() - 1].0, big);
    assert_eq!(out[out.len() - 2].0, plain);
    let (code, stdout, _) = run(&["pcap", "check", o]);
    assert_eq!(code, Some(0), "pcap check on the output: {stdout}");

    // --gso-size cuts the big frame too (5000 / 1000 = 5 segments).
    let (code, stdout, _) = run(&["pcap", "gso", i, o, "--gso-size", "1000", "--json"]);
    assert_eq!(code, Some(0));
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["superpackets_segmented"], 13);
    assert_eq!(j["packets_out"], expect_segments + 2 + 5);
    assert_eq!(run(&["pcap", "check", o]).0, Some(0));

    // A GSO frame whose payload is not larger than its gso_size is no
    // superpacket: it leaves as one frame, checksum completed (issue 22 item 4).
    let mut small = superpackets().remove(0);
    small.meta.gso_size = 30000;
    small.meta.gso_segs = 1;
    let mut with_small = frames.clone();
    with_small.push((small.to_vec(), FrameAnnotation::from_meta(&small.meta)));
    write_capture(&input, &with_small);
    let (code, stdout, _) = run(&["pcap", "gso", i, o, "--json"]);
    assert_eq!(code, Some(0), "{stdout}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["packets_out"], expect_segments + 3 + 1);
    assert_eq!(j["counters"]["completed"], 2, "the partial single frame and the small GSO frame");
    assert_eq!(run(&["pcap", "check", o]).0, Some(0));

    // A bad superpacket (gso_segs disagreeing with its payload) is dropped: exit 1.
    let bad = superpackets().remove(0);
    let mut with_bad = frames.clone();
    let mut a = FrameAnnotation::from_meta(&bad.meta);
    a.gso.as_mut().unwrap().segs = 3;
    with_bad.push((bad.to_vec(), a));
    write_capture(&input, &with_bad);
    let (code, stdout, _) = run(&["pcap", "gso", i, o, "--json"]);
    assert_eq!(code, Some(1), "{stdout}");
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["counters"]["drops"]["gso-segs-mismatch"], 1);
    assert_eq!(run(&["pcap", "check", o]).0, Some(0));
    // A small MTU: every TCPv4 superpacket's segments exceed it.
    let (code, stdout, _) = run(&["pcap", "gso", i, o, "--mtu", "1400"]);
    assert_eq!(code, Some(1));
    assert!(stdout.contains("exceeds-mtu"), "{stdout}");
    // Usage errors exit 2.
    assert_eq!(run(&["pcap", "gso", "/nonexistent.pcap", o]).0, Some(2));
    assert_eq!(run(&["pcap", "gso", i, o, "--gso-size", "0"]).0, Some(2));
}

#[test]
fn tshark_validates_every_gso_checksum() {
    if !common::wireshark_tools_available(&["tshark"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segments.pcapng");
    let mut w = CaptureWriter::create(&path, CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    let mut seg = Segmenter::new();
    let mut n = 0usize;
    let mut kinds = (0, 0);
    for p in superpackets() {
        for caps in
            [TargetCaps::new(9000), TargetCaps::new(9000).with_sg(), TargetCaps::new(9000).with_csum(CsumCaps::IP)]
        {
            let mut sink = VecSink::new();
            seg.segment(&p, &caps, &mut sink).unwrap();
            for f in sink.frames {
                let mut data = f.data;
                // Frames left partial for a checksumming target: finish them
                // as that target would.
                if let ChecksumState::Partial { start, offset } = f.meta.csum {
                    superpacket::csum::complete_partial(&mut data, start as usize, offset as usize, offset == 6)
                        .unwrap();
                }
                if data[12..14] == [0x08, 0x00] || data[16..18] == [0x08, 0x00] || data[20..22] == [0x08, 0x00] {
                    kinds.0 += 1;
                } else {
                    kinds.1 += 1;
                }
                w.write_frame(&data, n as u64 * 1000, &FrameAnnotation::default()).unwrap();
                n += 1;
            }
        }
    }
    w.finish().unwrap();
    assert!(kinds.0 > 0 && kinds.1 > 0);
    let out = Command::new("tshark")
        .args(["-r", path.to_str().unwrap()])
        .args(["-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"])
        .args(["-T", "fields", "-e", "frame.number", "-e", "ip.checksum.status", "-e", "tcp.checksum.status"])
        .args(["-e", "udp.checksum.status"])
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n);
    for line in lines {
        let cols: Vec<&str> = line.split('\t').collect();
        // Every present status must be 1 (good); IPv6 frames have no IP checksum.
        let statuses: Vec<&str> = cols[1..].iter().copied().filter(|c| !c.is_empty()).collect();
        assert!(!statuses.is_empty(), "no checksum checked: {line}");
        assert!(statuses.iter().all(|s| s.split(',').all(|x| x == "1")), "bad checksum status: {line}");
        // And an L4 checksum was among them.
        assert!(!cols[2].is_empty() || !cols[3].is_empty(), "no L4 checksum status: {line}");
    }
}
