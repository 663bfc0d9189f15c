//! `superpacket pcap gro`: end to end on a capture the test builds, checked
//! with `--json` and with `superpacket pcap check` on the output.

use std::path::Path;
use std::process::Command;

use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

/// 3 TCP flows (IPv4, IPv6 in 802.1Q, IPv4 in QinQ) of 40 segments each and a
/// UDP flow of 30 datagrams, interleaved; a bad-checksum segment and a pure
/// ACK in the middle; PSH on each TCP flow's last segment.
fn build_capture(path: &Path, format: CaptureFormat) -> u64 {
    let mut tcp = [
        Flow::new(FlowSpec::new(Transport::Tcp, false, 1)),
        Flow::new(FlowSpec::new(Transport::Tcp, true, 2).with_vlans(&[(0x8100, 7)]).unwrap()),
        Flow::new(FlowSpec::new(Transport::Tcp, false, 3).with_vlans(&[(0x88A8, 1), (0x8100, 2)]).unwrap()),
    ];
    let mut udp = Flow::new(FlowSpec::new(Transport::Udp, true, 4));
    let mut w = CaptureWriter::create(path, format, LinkType::ETHERNET).unwrap();
    let mut n = 0u64;
    let mut ts = 1_000_000_000u64;
    let mut put = |w: &mut CaptureWriter<_>, frame: Vec<u8>| {
        ts += 1000;
        w.write_frame(&frame, ts, &FrameAnnotation::NONE).unwrap();
        n += 1;
    };
    for i in 0..40 {
        for f in tcp.iter_mut() {
            let flags = if i == 39 { TcpFlags::PSH } else { TcpFlags::empty() };
            let mut frame = f.frame(1448, flags).unwrap();
            if i == 20 && f.spec.src_port == 10001 {
                let last = frame.len() - 1;
                frame[last] ^= 0xFF; // bad checksum
            }
            put(&mut w, frame);
        }
        if i < 30 {
            put(&mut w, udp.frame(1200, TcpFlags::empty()).unwrap());
        }
        if i == 25 {
            put(&mut w, tcp[0].frame(0, TcpFlags::empty()).unwrap());
        }
    }
    w.finish().unwrap();
    n
}

fn run_gro(input: &Path, output: &Path, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["pcap", "gro"])
        .arg(input)
        .arg(output)
        .args(extra)
        .arg("--json")
        .output()
        .expect("run superpacket");
    assert!(out.status.success(), "pcap gro failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn check_output(output: &Path) -> u64 {
    let out = Command::new(BIN).args(["pcap", "check"]).arg(output).arg("--json").output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "the bad-checksum segment is delivered untouched: {report}");
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{report}");
    assert_eq!(problems[0]["kind"], "tcp-checksum");
    report["packets"].as_u64().unwrap()
}

#[test]
fn pcap_gro_json_and_valid_output() {
    let dir = tempfile::tempdir().unwrap();
    for format in [CaptureFormat::PcapMicros, CaptureFormat::PcapNg] {
        let input = dir.path().join(format!("in-{format:?}"));
        let output = dir.path().join(format!("out-{format:?}.pcapng"));
        let frames = build_capture(&input, format);
        let report = run_gro(&input, &output, &[]);
        assert_eq!(report["packets_in"].as_u64(), Some(frames), "{report}");
        let out_frames = report["packets_out"].as_u64().unwrap();
        assert!(out_frames * 5 < frames, "batches of 64 coalesce well: {report}");
        assert!(report["superpackets"].as_u64().unwrap() > 0);
        assert!(report["segments_per_superpacket"].as_f64().unwrap() > 5.0);
        assert_eq!(report["counters"]["bad_checksums"].as_u64(), Some(1));
        assert_eq!(report["counters"]["bypassed"]["zero_payload"].as_u64(), Some(1));
        assert_eq!(check_output(&output), out_frames);
        // Output is pcapng, annotated, in delivery order.
        let mut r = CaptureReader::open(&output).unwrap();
        let mut gso = 0;
        let mut segs = 0u64;
        while let Some(f) = r.next_frame().unwrap() {
            if let Some(g) = f.annotation.gso {
                gso += 1;
                segs += g.segs as u64;
                assert!(f.annotation.csum_partial);
            } else {
                segs += 1;
            }
        }
        assert_eq!(gso, report["superpackets"].as_u64().unwrap());
        assert_eq!(segs, frames, "every wire packet accounted for");
    }
}

#[test]
fn pcap_gro_batch_lro_and_udp_modes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcapng");
    let frames = build_capture(&input, CaptureFormat::PcapNg);
    let out = dir.path().join("out.pcapng");
    let small = run_gro(&input, &out, &["--batch", "4"]);
    let big = run_gro(&input, &out, &["--batch", "1000"]);
    assert!(small["packets_out"].as_u64() > big["packets_out"].as_u64());
    let lro = run_gro(&input, &out, &["--batch", "1000", "--lro"]);
    assert_eq!(lro["packets_in"].as_u64(), Some(frames));
    assert!(lro["packets_out"].as_u64() <= big["packets_out"].as_u64(), "{lro} vs {big}");
    assert_eq!(check_output(&out), lro["packets_out"].as_u64().unwrap());
    let off = run_gro(&input, &out, &["--udp", "off"]);
    assert_eq!(off["counters"]["bypassed"]["udp_off"].as_u64(), Some(30));
    let fraglist = run_gro(&input, &out, &["--udp", "fraglist", "--tcp-fraglist"]);
    assert!(fraglist["superpackets"].as_u64().unwrap() > 0);
    assert_eq!(check_output(&out), fraglist["packets_out"].as_u64().unwrap());
}

#[test]
fn pcap_gro_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pcap");
    let out = Command::new(BIN).args(["pcap", "gro"]).arg(&missing).arg(dir.path().join("o")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = Command::new(BIN).args(["pcap", "gro", "a", "b", "--batch", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
