//! `superpacket pcap defrag` end to end: captures with shuffled fragments of
//! IPv4 and IPv6 datagrams (plus duplicates and ordinary frames) come out with
//! every datagram exactly once and every other frame unchanged, and the output
//! passes `pcap check`; bad fragments give exit 1.

use std::path::Path;
use std::process::Command;

use superpacket::offload::frag::{FragmentRequest, Fragmenter, build_fragment};
use superpacket::packet::Packet;
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

fn datagram(v6: bool, index: u32, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Udp, v6, index);
    spec.dont_frag = false;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

fn fragments(frame: &[u8], mtu: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    Fragmenter::new().fragment(Packet::from_frame(frame), &FragmentRequest::local(mtu), &mut out).unwrap();
    out.iter().map(Packet::to_vec).collect()
}

fn write(path: &Path, frames: &[Vec<u8>]) {
    let mut w = CaptureWriter::create(path, CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(f, 1_000_000_000 + i as u64 * 1000, &FrameAnnotation::default()).unwrap();
    }
    w.finish().unwrap();
}

fn read(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut v = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        v.push(f.data.to_vec());
    }
    v
}

fn defrag(input: &Path, output: &Path) -> (i32, serde_json::Value) {
    let out = Command::new(BIN).args(["pcap", "defrag", "--json"]).arg(input).arg(output).output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {} / {}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap(), json)
}

#[test]
fn datagrams_once_others_unchanged_and_output_checks_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.pcapng"), dir.path().join("out.pcapng"));
    let plain = datagram(false, 1, 200);
    let d4 = datagram(false, 2, 20000);
    let d6 = datagram(true, 3, 9000);
    let (mut f4, mut f6) = (fragments(&d4, 1500), fragments(&d6, 1280));
    f4.reverse();
    f6.swap(0, 3);
    let dup = f4[2].clone();
    let mut frames = vec![plain.clone()];
    // Interleave the two fragment sets, with an exact duplicate.
    let (n4, n6) = (f4.len(), f6.len());
    let mut it4 = f4.into_iter();
    let mut it6 = f6.into_iter();
    for i in 0..n4.max(n6) {
        frames.extend(it4.next());
        if i == 5 {
            frames.push(dup.clone());
        }
        frames.extend(it6.next());
    }
    frames.push(plain.clone());
    write(&input, &frames);
    let (code, json) = defrag(&input, &output);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["packets_in"], frames.len());
    assert_eq!(json["datagrams_reassembled"], 2);
    assert_eq!(json["packets_out"], 4);
    assert_eq!(json["counters"]["duplicates"], 1);
    let got = read(&output);
    assert_eq!(got.len(), 4);
    assert_eq!(got[0], plain);
    assert_eq!(got[3], plain);
    assert!(got.contains(&d4) && got.contains(&d6));
    let check = Command::new(BIN).args(["pcap", "check"]).arg(&output).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stdout));
}

#[test]
fn overlap_and_incomplete_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    let d = datagram(false, 4, 3000);
    let frames = vec![
        build_fragment(&d, 0, 1480, true, 0).unwrap(),
        build_fragment(&d, 1000, 1480, true, 0).unwrap(), // teardrop-style overlap
        build_fragment(&d, 1480, 1528, false, 0).unwrap(),
    ];
    let mut w = CaptureWriter::create(&input, CaptureFormat::PcapMicros, LinkType::ETHERNET).unwrap();
    for f in &frames {
        w.write_frame(f, 0, &FrameAnnotation::default()).unwrap();
    }
    w.finish().unwrap();
    let (code, json) = defrag(&input, &output);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["datagrams_reassembled"], 0);
    assert_eq!(json["counters"]["overlaps"], 1);
    assert_eq!(json["incomplete"], 1, "the last fragment opened a new queue");
    assert_eq!(read(&output).len(), 0);
    // Usage error: exit 2.
    let out = Command::new(BIN).args(["pcap", "defrag", "/nonexistent/x.pcap"]).arg(&output).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
