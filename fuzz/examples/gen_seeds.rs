//! Rebuilds the seed corpus of the byte-oriented targets from generated
//! frames (the same synthetic flows the tests use) and the example topologies:
//! `cd fuzz && cargo run --example gen_seeds` (writes `corpus/{wire,pcap,topology}/seed-*`).
//! The corpora of the structured targets (`arbitrary` input: gro_gso, gso,
//! reasm, nat, virtio) are minimised from fuzzing runs instead (see the README).

use std::fs;
use std::path::Path;
use superpacket::offload::frag::build_fragment;
use superpacket::pcap::{CaptureFormat, CaptureWriter, FrameAnnotation, GsoAnnotation, GsoKind, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

fn frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..8u32 {
        let transport = if i & 1 == 0 { Transport::Tcp } else { Transport::Udp };
        let v6 = i & 2 != 0;
        let mut spec = FlowSpec::new(transport, v6, i);
        if i >= 4 {
            spec = spec.with_vlans(&[(0x88A8, 100), (0x8100, 200)]).unwrap();
        }
        spec.dont_frag = false;
        let mut f = Flow::new(spec);
        out.push(f.frame(0, TcpFlags::SYN).unwrap());
        out.push(f.frame(100, TcpFlags::PSH).unwrap());
        let big = f.frame(3000, TcpFlags::empty()).unwrap();
        out.push(build_fragment(&big, 0, 1480, true, 7).unwrap());
        out.push(build_fragment(&big, 1480, 1000, false, 7).unwrap());
    }
    out
}

fn write(dir: &Path, name: &str, data: &[u8]) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), data).unwrap();
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let frames = frames();
    // wire: selector byte (which views: 4 = all) + the frame.
    for (i, f) in frames.iter().enumerate() {
        let mut d = vec![4u8];
        d.extend_from_slice(f);
        write(&corpus.join("wire"), &format!("seed-{i:02}"), &d);
    }
    // pcap: mode byte + a capture, in every format, with annotations.
    for (k, format) in
        [CaptureFormat::PcapMicros, CaptureFormat::PcapNanos, CaptureFormat::PcapNg].into_iter().enumerate()
    {
        for (j, chunk) in frames.chunks(8).enumerate() {
            let mut w = CaptureWriter::new(Vec::new(), format, LinkType::ETHERNET).unwrap();
            for (n, f) in chunk.iter().enumerate() {
                let mut ann = FrameAnnotation::default();
                if n == 1 && format == CaptureFormat::PcapNg {
                    ann.gso = Some(GsoAnnotation { kind: GsoKind::from_token("tcpv4").unwrap(), size: 1448, segs: 2 });
                    ann.csum_partial = true;
                }
                w.write_frame(f, 1_000_000_000 + n as u64, &ann).unwrap();
            }
            let mut d = vec![1u8];
            d.extend_from_slice(&w.finish().unwrap());
            write(&corpus.join("pcap"), &format!("seed-{k}-{j}"), &d);
        }
    }
    // topology: the example topologies.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for e in fs::read_dir(examples).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let name = format!("seed-{}", p.file_stem().unwrap().to_string_lossy());
            write(&corpus.join("topology"), &name, &fs::read(&p).unwrap());
        }
    }
}
