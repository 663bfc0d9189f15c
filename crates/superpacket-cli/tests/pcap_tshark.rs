//! Interoperability of `superpacket::pcap` with Wireshark's tools.
//!
//! Captures we write are read by `tshark` (lengths, timestamps, packet comments,
//! checksums), and captures written by `editcap` and `text2pcap` are read by
//! our reader. These tests fail if tshark is not installed, unless
//! `SUPERPACKET_SKIP_TSHARK=1` is set (CI installs it: `apt-get install tshark`).

use std::io::Cursor;
use std::path::Path;

use superpacket::csum::{checksum, ones_add, ones_sum, pseudo_header_v4};
use superpacket::pcap::{
    CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, GsoAnnotation, GsoKind, LinkType, WriteRecord,
    WriterOptions,
};

mod common;

use common::{run_tool as run, tshark_fields, wireshark_tools_available};

const SRC: [u8; 4] = [10, 0, 0, 1];
const DST: [u8; 4] = [10, 0, 0, 2];
const BASE_TS: u64 = 1_700_000_000_123_456_789;

/// Whether Wireshark's tools can be used (see [`wireshark_tools_available`]).
fn tools_available() -> bool {
    wireshark_tools_available(&["tshark", "editcap", "text2pcap"])
}

/// An Ethernet/IPv4/UDP frame with valid IPv4 checksum. The UDP checksum is
/// complete, or with `partial` the pseudo-header sum (CHECKSUM_PARTIAL).
fn udp_frame(sport: u16, dport: u16, payload: &[u8], partial: bool) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let ip_len = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + ip_len);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00]);
    f.extend_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0]);
    f[16..18].copy_from_slice(&(ip_len as u16).to_be_bytes());
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&DST);
    let ip_csum = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&ip_csum.to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let pseudo = pseudo_header_v4(SRC, DST, 17, udp_len as u16);
    let csum = if partial {
        pseudo
    } else {
        match !ones_add(pseudo, ones_sum(&f[34..])) {
            0 => 0xFFFF,
            c => c,
        }
    };
    f[40..42].copy_from_slice(&csum.to_be_bytes());
    f
}

struct TestFrame {
    data: Vec<u8>,
    ts: u64,
    annotation: FrameAnnotation,
    extra_comment: Option<&'static str>,
}

impl TestFrame {
    fn expected_comment(&self) -> String {
        let mut c = self.annotation.to_string();
        if let Some(extra) = self.extra_comment {
            if !c.is_empty() {
                c.push(' ');
            }
            c.push_str(extra);
        }
        c
    }
}

fn test_frames() -> Vec<TestFrame> {
    let payload = |n: usize| (0..n).map(|i| (i % 251) as u8).collect::<Vec<u8>>();
    let uso = FrameAnnotation {
        gso: Some(GsoAnnotation { kind: GsoKind::UdpL4, size: 1472, segs: 44 }),
        csum_partial: true,
        tunnel: None,
    };
    vec![
        TestFrame {
            data: udp_frame(1000, 53, &payload(18), false),
            ts: BASE_TS,
            annotation: FrameAnnotation::NONE,
            extra_comment: None,
        },
        TestFrame {
            data: udp_frame(1001, 4789, &payload(1000), true),
            ts: BASE_TS + 1_000,
            annotation: FrameAnnotation { gso: None, csum_partial: true, tunnel: None },
            extra_comment: None,
        },
        // A USO superpacket: 44 segments of 1472 bytes.
        TestFrame {
            data: udp_frame(1002, 4433, &payload(1472 * 44), true),
            ts: BASE_TS + 2_000_000,
            annotation: uso,
            extra_comment: None,
        },
        TestFrame {
            data: udp_frame(1003, 9999, &payload(1400), false),
            ts: BASE_TS + 3_000_000_001,
            annotation: FrameAnnotation::NONE,
            extra_comment: Some("plain note from the test"),
        },
    ]
}

fn write_frames(path: &Path, format: CaptureFormat, options: WriterOptions, frames: &[TestFrame]) {
    let mut w = CaptureWriter::create_with_options(path, format, LinkType::ETHERNET, options).unwrap();
    for f in frames {
        let (annotation, comment) =
            if format.supports_comments() { (f.annotation, f.extra_comment) } else { (FrameAnnotation::NONE, None) };
        w.write_record(&WriteRecord {
            data: &f.data,
            timestamp_ns: f.ts,
            annotation,
            comment,
            ..WriteRecord::default()
        })
        .unwrap();
    }
    w.finish().unwrap();
}

/// Formats a nanosecond timestamp as tshark's `frame.time_epoch` does.
fn epoch(ts: u64, digits: u32) -> String {
    let frac = ts % 1_000_000_000 / 10u64.pow(9 - digits);
    format!("{}.{frac:0width$}", ts / 1_000_000_000, width = digits as usize)
}

#[test]
fn tshark_reads_our_pcapng_with_comments() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let frames = test_frames();
    for order in [superpacket::pcap::ByteOrder::Little, superpacket::pcap::ByteOrder::Big] {
        let path = dir.path().join(format!("ours-{order:?}.pcapng"));
        write_frames(
            &path,
            CaptureFormat::PcapNg,
            WriterOptions { byte_order: order, ..WriterOptions::default() },
            &frames,
        );
        let out = tshark_fields(
            &path,
            &["ip.check_checksum:TRUE", "udp.check_checksum:TRUE"],
            &[
                "frame.len",
                "frame.cap_len",
                "frame.time_epoch",
                "udp.length",
                "ip.checksum.status",
                "udp.checksum.status",
                "frame.comment",
            ],
        );
        eprintln!("tshark ({order:?}):\n{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), frames.len(), "tshark saw {} frames: {out}", lines.len());
        for (i, (line, f)) in lines.iter().zip(&frames).enumerate() {
            let cols: Vec<&str> = line.split('|').collect();
            assert_eq!(cols.len(), 7, "frame {i}: {line}");
            let len = f.data.len().to_string();
            assert_eq!(cols[0], len, "frame {i} frame.len");
            assert_eq!(cols[1], len, "frame {i} frame.cap_len");
            assert_eq!(cols[2], epoch(f.ts, 9), "frame {i} time");
            assert_eq!(cols[3], (f.data.len() - 34).to_string(), "frame {i} udp.length");
            // tshark's checksum status: 0 = bad, 1 = good, 2 = unverified.
            assert_eq!(cols[4], "1", "frame {i}: tshark says the IPv4 checksum is not good");
            // A complete checksum verifies; a partial one (pseudo-header sum) does not.
            let want_udp = if f.annotation.csum_partial { "0" } else { "1" };
            assert_eq!(cols[5], want_udp, "frame {i} udp.checksum.status");
            assert_eq!(cols[6], f.expected_comment(), "frame {i} comment");
        }
    }
}

#[test]
fn tshark_reads_our_pcap_micros_and_nanos() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let frames = test_frames();
    for (format, digits) in [(CaptureFormat::PcapMicros, 6), (CaptureFormat::PcapNanos, 9)] {
        let path = dir.path().join(format!("ours.{format}"));
        write_frames(&path, format, WriterOptions::default(), &frames);
        let out = tshark_fields(&path, &[], &["frame.len", "frame.time_epoch"]);
        eprintln!("tshark ({format}):\n{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), frames.len(), "{out}");
        for (line, f) in lines.iter().zip(&frames) {
            // tshark prints nanoseconds; a microsecond file has zeros past the 6th digit.
            let ts = if digits == 6 { f.ts / 1000 * 1000 } else { f.ts };
            let want = format!("{}|{}", f.data.len(), epoch(ts, 9));
            assert_eq!(*line, want);
        }
        let info = run("capinfos", &["-T", "-r", "-l", "-E", path.to_str().unwrap()]);
        assert!(info.contains("262144"), "snaplen not 262144: {info}");
    }
}

/// Reads a whole capture with our reader: (data, timestamp, link type, annotation, comment) per frame.
type Frame = (Vec<u8>, u64, LinkType, FrameAnnotation, Option<String>);

fn read_ours(path: &Path) -> Vec<Frame> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        assert_eq!(f.captured_len, f.original_len);
        out.push((f.data.to_vec(), f.timestamp_ns, f.link_type, f.annotation, f.comment.map(str::to_owned)));
    }
    assert_eq!(Some(r.bytes_read()), r.total_len());
    out
}

#[test]
fn we_read_editcap_output() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let frames = test_frames();
    let ours = dir.path().join("ours.pcapng");
    write_frames(&ours, CaptureFormat::PcapNg, WriterOptions::default(), &frames);
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();

    // pcapng -> pcapng through Wireshark's writer keeps comments, so annotations survive.
    run("editcap", &["-F", "pcapng", ours.to_str().unwrap(), &p("copy.pcapng")]);
    let got = read_ours(Path::new(&p("copy.pcapng")));
    assert_eq!(got.len(), frames.len());
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!((&g.0, g.1, g.2, g.3), (&f.data, f.ts, LinkType::ETHERNET, f.annotation));
        let want = f.expected_comment();
        assert_eq!(g.4.as_deref(), (!want.is_empty()).then_some(want.as_str()));
    }

    // pcapng -> pcap (µs and ns): comments are dropped, data and time kept.
    for (fmt, keep_ns) in [("pcap", false), ("nsecpcap", true)] {
        let out = p(&format!("conv.{fmt}"));
        run("editcap", &["-F", fmt, ours.to_str().unwrap(), &out]);
        let got = read_ours(Path::new(&out));
        assert_eq!(got.len(), frames.len());
        for (g, f) in got.iter().zip(&frames) {
            let ts = if keep_ns { f.ts } else { f.ts / 1000 * 1000 };
            assert_eq!((&g.0, g.1, g.2, g.3, &g.4), (&f.data, ts, LinkType::ETHERNET, FrameAnnotation::NONE, &None));
        }
    }

    // pcap -> pcapng with a comment added by editcap: our annotation parser reads it.
    let back = p("back.pcapng");
    run(
        "editcap",
        &["-F", "pcapng", "-a", "3:gso_type=tcpv4 gso_size=1448 gso_segs=3 csum=partial", &p("conv.pcap"), &back],
    );
    let got = read_ours(Path::new(&back));
    assert_eq!(got.len(), frames.len());
    let want = FrameAnnotation {
        gso: Some(GsoAnnotation { kind: GsoKind::TcpV4, size: 1448, segs: 3 }),
        csum_partial: true,
        tunnel: None,
    };
    assert_eq!(got[2].3, want);
    assert!(got[0].3.is_empty() && got[0].4.is_none());
}

/// An od-style hex dump (offset, then bytes), as text2pcap reads.
fn hex_dump(bytes: &[u8]) -> String {
    let mut dump = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        dump.push_str(&format!("{:06x}", i * 16));
        for b in chunk {
            dump.push_str(&format!(" {b:02x}"));
        }
        dump.push('\n');
    }
    dump
}

#[test]
fn we_read_text2pcap_output() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let frame = udp_frame(5, 6, b"text2pcap says hi", false);
    let txt = dir.path().join("dump.txt");
    std::fs::write(&txt, hex_dump(&frame)).unwrap();
    for fmt in ["pcap", "pcapng"] {
        let out = dir.path().join(format!("t2p.{fmt}"));
        run("text2pcap", &["-q", "-F", fmt, txt.to_str().unwrap(), out.to_str().unwrap()]);
        let got = read_ours(&out);
        assert_eq!(got.len(), 1, "{fmt}");
        assert_eq!(got[0].0, frame, "{fmt}");
        assert_eq!(got[0].2, LinkType::ETHERNET, "{fmt}");
    }
    // Raw IP link type (101) from a dump of the packet without its Ethernet header.
    let ip = &frame[14..];
    std::fs::write(&txt, hex_dump(ip)).unwrap();
    let out = dir.path().join("raw.pcapng");
    run("text2pcap", &["-q", "-l", "101", txt.to_str().unwrap(), out.to_str().unwrap()]);
    let got = read_ours(&out);
    assert_eq!((&got[0].0[..], got[0].2), (ip, LinkType::RAW));
}

#[test]
fn tshark_accepts_frames_larger_than_64k() {
    if !tools_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A 200000-byte frame with the IEEE local experimental EtherType (no IP length limit).
    let mut frame = vec![0x5Au8; 200_000];
    frame[..14].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xB5]);
    let annotation = FrameAnnotation {
        gso: Some(GsoAnnotation { kind: GsoKind::TcpV6, size: 8948, segs: 23 }),
        csum_partial: true,
        tunnel: None,
    };
    for format in [CaptureFormat::PcapNg, CaptureFormat::PcapMicros] {
        let path = dir.path().join(format!("big.{format}"));
        let mut w = CaptureWriter::create(&path, format, LinkType::ETHERNET).unwrap();
        let ann = if format.supports_comments() { annotation } else { FrameAnnotation::NONE };
        w.write_frame(&frame, BASE_TS, &ann).unwrap();
        w.write_frame_with_original_len(&frame[..1000], 200_000, BASE_TS + 1, &ann).unwrap();
        w.finish().unwrap();
        let out = tshark_fields(&path, &[], &["frame.len", "frame.cap_len", "frame.comment"]);
        let comment = if format.supports_comments() { annotation.to_string() } else { String::new() };
        assert_eq!(out, format!("200000|200000|{comment}\n200000|1000|{comment}\n"), "{format}");
    }
}

/// The read path makes no allocation per frame once the buffer has grown
/// (annotation parsing included). Needs no Wireshark tool.
#[test]
fn reading_does_not_allocate_per_frame() {
    for format in [CaptureFormat::PcapNg, CaptureFormat::PcapMicros] {
        let mut w = CaptureWriter::new(Vec::new(), format, LinkType::ETHERNET).unwrap();
        let annotation = FrameAnnotation {
            gso: Some(GsoAnnotation { kind: GsoKind::TcpV4, size: 1448, segs: 7 }),
            csum_partial: true,
            tunnel: None,
        };
        for i in 0..2000u64 {
            let ann = if format.supports_comments() && i % 2 == 0 { annotation } else { FrameAnnotation::NONE };
            let frame = udp_frame(1, 2, &vec![i as u8; (i as usize * 37) % 9000], i % 3 == 0);
            let comment = (format.supports_comments() && i % 5 == 0).then_some("free text vlan=3");
            w.write_record(&WriteRecord {
                data: &frame,
                timestamp_ns: i,
                annotation: ann,
                comment,
                ..Default::default()
            })
            .unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
        r.next_frame().unwrap().unwrap(); // warm-up: the buffer grows here
        let mut n = 1;
        let mut annotated = 0;
        let allocated = allocation_counter::measure(|| {
            while let Some(f) = r.next_frame().unwrap() {
                n += 1;
                annotated += u64::from(f.annotation.gso.is_some());
            }
        })
        .count_total;
        assert_eq!(n, 2000);
        assert_eq!(annotated, if format.supports_comments() { 999 } else { 0 });
        assert_eq!(allocated, 0, "{format}: {allocated} allocations while reading {n} frames");
    }
}
