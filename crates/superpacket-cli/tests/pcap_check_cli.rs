//! `superpacket pcap check` end to end: captures built here, with good and
//! bad frames mixed at random, must yield exactly the bad frames; exit codes
//! follow the CLI contract; and on checksum errors our verdict agrees with
//! Wireshark's (tshark with checksum validation on).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

mod common;

use superpacket::pcap::{CaptureFormat, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The ways a frame is made bad; each is detectable by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Corruption {
    Ipv4HeaderChecksum,
    L4Payload,
    L4ChecksumField,
    Truncate,
    UdpLength,
    GsoSegs,
}

struct Built {
    frame: Vec<u8>,
    annotation: FrameAnnotation,
    /// Byte offsets: L3 start, L4 start, payload start.
    l3: usize,
    l4: usize,
    ipv4: bool,
    udp: bool,
}

fn flows() -> Vec<FlowSpec> {
    let mut v = Vec::new();
    for (i, (t, v6)) in
        [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false), (Transport::Udp, true)]
            .iter()
            .enumerate()
    {
        for tags in [&[][..], &[(0x8100, 10)][..], &[(0x88A8, 20), (0x8100, 30)][..]] {
            v.push(FlowSpec::new(*t, *v6, i as u32 * 10 + tags.len() as u32).with_vlans(tags).unwrap());
        }
    }
    v
}

fn build(rng: &mut Rng, flows: &mut [Flow], superpackets: bool) -> Built {
    let f = &mut flows[rng.below(flows.len())];
    let spec = f.spec;
    let l3 = 14 + 4 * spec.vlans.len();
    let ipv4 = matches!(spec.addrs, superpacket::traffic::Addrs::V4 { .. });
    let udp = spec.transport == Transport::Udp;
    let l4 = l3 + if ipv4 { 20 } else { 40 };
    if superpackets && rng.below(4) == 0 {
        let p = f.superpacket(1400 * (2 + rng.below(40)) + rng.below(1400), 1400, TcpFlags::empty()).unwrap();
        let annotation = FrameAnnotation::from_meta(&p.meta);
        return Built { frame: p.to_vec(), annotation, l3, l4, ipv4, udp };
    }
    let frame = f.frame(1 + rng.below(1500), TcpFlags::empty()).unwrap();
    Built { frame, annotation: FrameAnnotation::NONE, l3, l4, ipv4, udp }
}

fn corrupt(rng: &mut Rng, b: &mut Built, allowed: &[Corruption]) -> Corruption {
    loop {
        let c = allowed[rng.below(allowed.len())];
        match c {
            Corruption::Ipv4HeaderChecksum if b.ipv4 => {
                // TTL, ID or checksum bytes: never the version/length fields.
                let at = b.l3 + [4, 5, 8, 10, 11][rng.below(5)];
                b.frame[at] ^= 1 << rng.below(8);
            }
            Corruption::L4Payload if !b.annotation.csum_partial => {
                let header = if b.udp { 8 } else { 32 };
                let at = b.l4 + header + rng.below(b.frame.len() - b.l4 - header);
                b.frame[at] ^= 1 << rng.below(8);
            }
            Corruption::L4ChecksumField => {
                let at = b.l4 + if b.udp { 6 } else { 16 } + rng.below(2);
                b.frame[at] ^= 1 << rng.below(8);
            }
            Corruption::Truncate => {
                let keep = b.l4 + rng.below(b.frame.len() - b.l4 - 1);
                b.frame.truncate(keep.max(b.l3 + 1));
            }
            Corruption::UdpLength if b.udp => {
                let v = u16::from_be_bytes([b.frame[b.l4 + 4], b.frame[b.l4 + 5]]);
                b.frame[b.l4 + 4..b.l4 + 6].copy_from_slice(&(v + 1 + rng.below(100) as u16).to_be_bytes());
            }
            Corruption::GsoSegs if b.annotation.gso.is_some() => {
                if let Some(g) = b.annotation.gso.as_mut() {
                    g.segs += 1;
                }
            }
            _ => continue,
        }
        return c;
    }
}

/// Writes a capture of `n` frames, about a third of them corrupted; returns
/// the indices of the corrupted ones.
fn write_capture(
    path: &Path,
    format: CaptureFormat,
    seed: u64,
    n: usize,
    allowed: &[Corruption],
    superpackets: bool,
) -> BTreeMap<u64, Corruption> {
    let mut rng = Rng(seed);
    let mut flows: Vec<Flow> = flows().into_iter().map(Flow::new).collect();
    let mut w = CaptureWriter::create(path, format, LinkType::ETHERNET).unwrap();
    let mut bad = BTreeMap::new();
    for i in 0..n {
        let mut b = build(&mut rng, &mut flows, superpackets);
        if rng.below(3) == 0 {
            bad.insert(i as u64, corrupt(&mut rng, &mut b, allowed));
        }
        w.write_frame(&b.frame, 1_000_000 * i as u64, &b.annotation).unwrap();
    }
    w.finish().unwrap();
    bad
}

fn check_json(path: &Path) -> (i32, serde_json::Value) {
    let out = Command::new(BIN).args(["pcap", "check", "--json"]).arg(path).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), v)
}

fn problem_indices(v: &serde_json::Value) -> BTreeSet<u64> {
    v["problems"].as_array().unwrap().iter().map(|p| p["index"].as_u64().unwrap()).collect()
}

const ALL: &[Corruption] = &[
    Corruption::Ipv4HeaderChecksum,
    Corruption::L4Payload,
    Corruption::L4ChecksumField,
    Corruption::Truncate,
    Corruption::UdpLength,
    Corruption::GsoSegs,
];

#[test]
fn finds_exactly_the_bad_frames_of_unseen_captures() {
    let dir = tempfile::tempdir().unwrap();
    for seed in [1u64, 2, 3, 0xdead_beef, 42_4242] {
        let path = dir.path().join(format!("mix-{seed}.pcapng"));
        let bad = write_capture(&path, CaptureFormat::PcapNg, seed, 300, ALL, true);
        let (code, v) = check_json(&path);
        assert_eq!(v["packets"], 300);
        let found = problem_indices(&v);
        let want: BTreeSet<u64> = bad.keys().copied().collect();
        assert_eq!(found, want, "seed {seed}: corrupted {bad:?}\nreport: {v}");
        assert_eq!(code, 1);
        for p in v["problems"].as_array().unwrap() {
            assert!(p["kind"].as_str().is_some_and(|k| !k.is_empty()));
        }
    }
}

#[test]
fn clean_captures_pass_in_pcap_and_pcapng() {
    let dir = tempfile::tempdir().unwrap();
    for (format, name, superpackets) in
        [(CaptureFormat::PcapNg, "clean.pcapng", true), (CaptureFormat::PcapMicros, "clean.pcap", false)]
    {
        let path = dir.path().join(name);
        write_capture(&path, format, 7, 0, ALL, superpackets);
        let mut rng = Rng(99);
        let mut flows: Vec<Flow> = flows().into_iter().map(Flow::new).collect();
        let mut w = CaptureWriter::create(&path, format, LinkType::ETHERNET).unwrap();
        for i in 0..200u64 {
            let b = build(&mut rng, &mut flows, superpackets);
            w.write_frame(&b.frame, i, &b.annotation).unwrap();
        }
        w.finish().unwrap();
        let (code, v) = check_json(&path);
        assert_eq!((code, v["packets"].as_u64(), problem_indices(&v).len()), (0, Some(200), 0), "{name}: {v}");
        let human = Command::new(BIN).args(["pcap", "check"]).arg(&path).output().unwrap();
        assert!(String::from_utf8_lossy(&human.stdout).contains("200 frames, 0 problems"));
    }
}

#[test]
fn usage_and_io_errors_exit_2() {
    let missing = Command::new(BIN).args(["pcap", "check", "/nonexistent/x.pcapng"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/x.pcapng"));
    let usage = Command::new(BIN).args(["pcap", "check"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let bogus = Command::new(BIN).args(["pcap", "frobnicate"]).output().unwrap();
    assert_eq!(bogus.status.code(), Some(2));

    let dir = tempfile::tempdir().unwrap();
    let not_a_capture = dir.path().join("text.pcap");
    std::fs::write(&not_a_capture, b"this is not a capture file at all").unwrap();
    let out = Command::new(BIN).args(["pcap", "check"]).arg(&not_a_capture).output().unwrap();
    assert_eq!(out.status.code(), Some(2));

    // A capture cut in the middle of a record: the frames before it are
    // checked and reported, then exit 2 with the read error.
    let path = dir.path().join("cut.pcapng");
    write_capture(&path, CaptureFormat::PcapNg, 5, 50, ALL, false);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    let (code, v) = check_json(&path);
    assert_eq!(code, 2);
    assert_eq!(v["packets"], 49);
    assert!(v["error"].as_str().is_some_and(|e| e.contains("frame 49")), "{v}");
}

#[test]
fn agrees_with_tshark_on_checksums() {
    if !common::wireshark_tools_available(&["tshark"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checksums.pcapng");
    let only_checksums = [Corruption::Ipv4HeaderChecksum, Corruption::L4Payload, Corruption::L4ChecksumField];
    let bad = write_capture(&path, CaptureFormat::PcapNg, 2024, 400, &only_checksums, false);
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args(["-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"])
        .args(["-T", "fields", "-E", "separator=|"])
        .args([
            "-e",
            "frame.number",
            "-e",
            "ip.checksum.status",
            "-e",
            "tcp.checksum.status",
            "-e",
            "udp.checksum.status",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    // tshark 4.0: checksum status 0 = Bad, 1 = Good, 2 = Unverified.
    let mut tshark_bad = BTreeSet::new();
    let mut lines = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        lines += 1;
        let mut fields = line.split('|');
        let number: u64 = fields.next().unwrap().parse().unwrap();
        if fields.any(|f| f.split(',').any(|s| s == "0")) {
            tshark_bad.insert(number - 1);
        }
    }
    assert_eq!(lines, 400);
    let (code, v) = check_json(&path);
    assert_eq!(code, 1);
    let ours = problem_indices(&v);
    assert_eq!(ours, tshark_bad, "superpacket and tshark disagree");
    assert_eq!(ours, bad.keys().copied().collect());
}
