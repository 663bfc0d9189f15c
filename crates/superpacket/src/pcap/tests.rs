//! Unit tests of the capture reader, writer and annotation convention.

use std::io::Cursor;

use proptest::prelude::*;

use super::*;

/// An owned copy of a read frame, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    index: u64,
    data: Vec<u8>,
    timestamp_ns: u64,
    captured_len: u32,
    original_len: u32,
    link_type: LinkType,
    interface_id: u32,
    annotation: FrameAnnotation,
    comment: Option<String>,
}

fn own(f: &CapturedFrame<'_>) -> Owned {
    Owned {
        index: f.index,
        data: f.data.to_vec(),
        timestamp_ns: f.timestamp_ns,
        captured_len: f.captured_len,
        original_len: f.original_len,
        link_type: f.link_type,
        interface_id: f.interface_id,
        annotation: f.annotation,
        comment: f.comment.map(str::to_owned),
    }
}

/// Reads every frame; returns the frames and the terminating error, if any.
fn read_all(bytes: &[u8]) -> Result<(Vec<Owned>, Option<PcapError>), PcapError> {
    let mut r = CaptureReader::new(Cursor::new(bytes))?;
    let mut frames = Vec::new();
    loop {
        match r.next_frame() {
            Ok(Some(f)) => frames.push(own(&f)),
            Ok(None) => return Ok((frames, None)),
            Err(e) => return Ok((frames, Some(e))),
        }
    }
}

fn read_ok(bytes: &[u8]) -> Vec<Owned> {
    let (frames, err) = read_all(bytes).expect("header");
    assert!(err.is_none(), "unexpected error: {err:?}");
    frames
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn gso(kind: GsoKind, size: u16, segs: u16, csum_partial: bool) -> FrameAnnotation {
    FrameAnnotation { gso: Some(GsoAnnotation { kind, size, segs }), csum_partial, tunnel: None }
}

/// Frames used by the round-trip tests: (data, timestamp_ns, annotation).
fn sample_frames() -> Vec<(Vec<u8>, u64, FrameAnnotation)> {
    vec![
        (pattern(60, 1), 1_700_000_000_123_456_789, FrameAnnotation::NONE),
        (pattern(1514, 2), 1_700_000_001_000_000_001, FrameAnnotation { gso: None, csum_partial: true, tunnel: None }),
        (pattern(65226, 3), 1_700_000_002_999_999_999, gso(GsoKind::TcpV4, 1448, 45, true)),
        (pattern(200_000, 4), 1_700_000_003_000_000_000, gso(GsoKind::UdpL4, 1472, 136, false)),
        (pattern(1, 5), 0, gso(GsoKind::TcpV6, 1428, 1, true)),
        (Vec::new(), 42, FrameAnnotation::NONE),
    ]
}

fn write_capture(
    format: CaptureFormat,
    order: ByteOrder,
    link_type: LinkType,
    frames: &[(Vec<u8>, u64, FrameAnnotation)],
) -> Vec<u8> {
    let opts = WriterOptions { byte_order: order, ..WriterOptions::default() };
    let mut w = CaptureWriter::with_options(Vec::new(), format, link_type, opts).unwrap();
    for (data, ts, ann) in frames {
        w.write_frame(data, *ts, ann).unwrap();
    }
    assert_eq!(w.frames_written(), frames.len() as u64);
    let written = w.bytes_written();
    let out = w.finish().unwrap();
    assert_eq!(written, out.len() as u64);
    out
}

#[test]
fn round_trip_all_formats_and_byte_orders() {
    let all = sample_frames();
    for format in [CaptureFormat::PcapMicros, CaptureFormat::PcapNanos, CaptureFormat::PcapNg] {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            // pcap cannot carry annotations: write those frames without.
            let frames: Vec<_> = all
                .iter()
                .map(|(d, t, a)| (d.clone(), *t, if format.supports_comments() { *a } else { FrameAnnotation::NONE }))
                .collect();
            let bytes = write_capture(format, order, LinkType::ETHERNET, &frames);
            let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
            assert_eq!(r.format(), format);
            assert_eq!(r.byte_order(), order);
            let mut got = Vec::new();
            while let Some(f) = r.next_frame().unwrap() {
                got.push(own(&f));
            }
            assert_eq!(r.link_type(), Some(LinkType::ETHERNET), "{format} {order:?}");
            assert_eq!(r.snaplen(), Some(DEFAULT_SNAPLEN));
            assert_eq!(r.bytes_read(), bytes.len() as u64);
            assert_eq!(got.len(), frames.len());
            for (i, (g, (data, ts, ann))) in got.iter().zip(&frames).enumerate() {
                let want_ts = match format {
                    CaptureFormat::PcapMicros => ts / 1000 * 1000,
                    _ => *ts,
                };
                assert_eq!(g.index, i as u64);
                assert_eq!(&g.data, data, "{format} {order:?} frame {i}");
                assert_eq!(g.captured_len as usize, data.len());
                assert_eq!(g.original_len as usize, data.len());
                assert_eq!(g.timestamp_ns, want_ts, "{format} {order:?} frame {i}");
                assert_eq!(g.link_type, LinkType::ETHERNET);
                assert_eq!(g.interface_id, 0);
                assert_eq!(g.annotation, *ann, "{format} {order:?} frame {i}");
                let want_comment = if ann.is_empty() { None } else { Some(ann.to_string()) };
                assert_eq!(g.comment, want_comment);
            }
        }
    }
}

#[test]
fn pcapng_header_has_userappl_tsresol_and_snaplen() {
    let bytes = write_capture(CaptureFormat::PcapNg, ByteOrder::Little, LinkType::RAW, &[]);
    let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
    assert!(r.next_frame().unwrap().is_none());
    let s = r.section().unwrap();
    assert_eq!((s.major, s.minor), (1, 0));
    assert_eq!(s.user_appl.as_deref(), Some("superpacket"));
    let ifs = r.interfaces();
    assert_eq!(ifs.len(), 1);
    assert_eq!(ifs[0].link_type, LinkType::RAW);
    assert_eq!(ifs[0].snaplen, 262_144);
    assert_eq!(ifs[0].ts_resolution, TsResolution::NANOS);
    // The raw bytes: SHB magic, BOM, and the option text.
    assert_eq!(&bytes[0..4], &[0x0A, 0x0D, 0x0D, 0x0A]);
    assert_eq!(&bytes[8..12], &0x1A2B_3C4Du32.to_le_bytes());
    assert!(bytes.windows(11).any(|w| w == b"superpacket"));
}

#[test]
fn pcap_header_bytes() {
    let le = write_capture(CaptureFormat::PcapMicros, ByteOrder::Little, LinkType::ETHERNET, &[]);
    assert_eq!(le, [&[0xD4, 0xC3, 0xB2, 0xA1, 2, 0, 4, 0][..], &[0; 8], &[0, 0, 4, 0], &[1, 0, 0, 0]].concat());
    let be = write_capture(CaptureFormat::PcapNanos, ByteOrder::Big, LinkType::RAW, &[]);
    assert_eq!(be, [&[0xA1, 0xB2, 0x3C, 0x4D, 0, 2, 0, 4][..], &[0; 8], &[0, 4, 0, 0], &[0, 0, 0, 101]].concat());
}

#[test]
fn snapped_frames_and_raw_link_type() {
    for format in [CaptureFormat::PcapMicros, CaptureFormat::PcapNg] {
        let mut w = CaptureWriter::new(Vec::new(), format, LinkType::RAW).unwrap();
        w.write_frame_with_original_len(&pattern(100, 9), 9000, 5_000, &FrameAnnotation::NONE).unwrap();
        let err = w.write_frame_with_original_len(&pattern(100, 9), 99, 5_000, &FrameAnnotation::NONE).unwrap_err();
        assert!(matches!(err, PcapError::InvalidFrame { frame: 1, .. }), "{err:?}");
        let bytes = w.finish().unwrap();
        let frames = read_ok(&bytes);
        assert_eq!(frames.len(), 1);
        assert_eq!((frames[0].captured_len, frames[0].original_len), (100, 9000));
        assert_eq!(frames[0].link_type, LinkType::RAW);
        let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
        assert!(r.next_frame().unwrap().unwrap().is_snapped());
    }
}

#[test]
fn pcap_writer_refuses_annotations_unless_stripping() {
    let ann = gso(GsoKind::TcpV4, 1448, 2, true);
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapMicros, LinkType::ETHERNET).unwrap();
    w.write_frame(&pattern(60, 0), 1, &FrameAnnotation::NONE).unwrap();
    let before = w.bytes_written();
    let err = w.write_frame(&pattern(60, 0), 1, &ann).unwrap_err();
    assert!(matches!(err, PcapError::AnnotationNotRepresentable { frame: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("frame 1"), "{err}");
    assert_eq!(w.bytes_written(), before, "a refused frame writes nothing");
    let rec = WriteRecord { data: &[1, 2, 3], comment: Some("hello"), ..WriteRecord::default() };
    assert!(matches!(w.write_record(&rec), Err(PcapError::AnnotationNotRepresentable { .. })));

    let opts = WriterOptions { strip_annotations: true, ..WriterOptions::default() };
    let mut w = CaptureWriter::with_options(Vec::new(), CaptureFormat::PcapNanos, LinkType::ETHERNET, opts).unwrap();
    w.write_frame(&pattern(60, 0), 1, &ann).unwrap();
    w.write_frame(&pattern(60, 0), 2, &FrameAnnotation::NONE).unwrap();
    assert_eq!(w.stripped_annotations(), 1);
    let frames = read_ok(&w.finish().unwrap());
    assert_eq!(frames.len(), 2);
    assert!(frames[0].annotation.is_empty());
}

#[test]
fn writer_limits() {
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    let err = w.write_frame(&vec![0; 262_145], 0, &FrameAnnotation::NONE).unwrap_err();
    assert!(matches!(err, PcapError::FrameTooLarge { frame: 0, len: 262_145, limit: 262_144, .. }), "{err:?}");
    w.write_frame(&vec![0; 262_144], 0, &FrameAnnotation::NONE).unwrap();
    let rec = WriteRecord { data: &[0; 10], interface_id: 1, ..WriteRecord::default() };
    assert!(matches!(w.write_record(&rec), Err(PcapError::UnknownInterface { frame: 1, interface_id: 1 })));
    let long = "x".repeat(70_000);
    let rec = WriteRecord { data: &[0; 10], comment: Some(&long), ..WriteRecord::default() };
    assert!(matches!(w.write_record(&rec), Err(PcapError::InvalidFrame { .. })));

    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapMicros, LinkType::ETHERNET).unwrap();
    let err = w.write_frame(&[0; 10], (u64::from(u32::MAX) + 1) * 1_000_000_000, &FrameAnnotation::NONE);
    assert!(matches!(err, Err(PcapError::TimestampOutOfRange { .. })));
    assert!(matches!(w.add_interface(LinkType::RAW), Err(PcapError::Unsupported(_))));

    // A larger snaplen allows bigger superpackets.
    let opts = WriterOptions { snaplen: 1 << 20, ..WriterOptions::default() };
    let mut w = CaptureWriter::with_options(Vec::new(), CaptureFormat::PcapNg, LinkType::ETHERNET, opts).unwrap();
    w.write_frame(&pattern(600_000, 7), 0, &FrameAnnotation::NONE).unwrap();
    let frames = read_ok(&w.finish().unwrap());
    assert_eq!(frames[0].data, pattern(600_000, 7));
}

#[test]
fn multiple_interfaces_and_extra_comment() {
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    assert_eq!(w.add_interface(LinkType::RAW).unwrap(), 1);
    let ann = gso(GsoKind::TcpV6, 1428, 3, true);
    w.write_record(&WriteRecord {
        data: &[0x60; 40],
        timestamp_ns: 7,
        interface_id: 1,
        annotation: ann,
        comment: Some("from tap0"),
        original_len: None,
    })
    .unwrap();
    w.write_record(&WriteRecord { data: &[1; 14], comment: Some("just text"), ..WriteRecord::default() }).unwrap();
    let frames = read_ok(&w.finish().unwrap());
    assert_eq!(frames[0].interface_id, 1);
    assert_eq!(frames[0].link_type, LinkType::RAW);
    assert_eq!(frames[0].annotation, ann);
    assert_eq!(frames[0].comment.as_deref(), Some("gso_type=tcpv6 gso_size=1428 gso_segs=3 csum=partial from tap0"));
    assert_eq!(frames[1].link_type, LinkType::ETHERNET);
    assert!(frames[1].annotation.is_empty());
    assert_eq!(frames[1].comment.as_deref(), Some("just text"));
}

#[test]
fn annotations_round_trip_exactly() {
    let kinds = [GsoKind::TcpV4, GsoKind::TcpV6, GsoKind::UdpL4];
    let mut frames = Vec::new();
    for (i, kind) in kinds.into_iter().enumerate() {
        for (size, segs) in [(1, 0), (536, 1), (1448, 45), (65535, 65535)] {
            for partial in [false, true] {
                frames.push((pattern(64 + i, 0), 1000 * frames.len() as u64, gso(kind, size, segs, partial)));
            }
        }
    }
    frames.push((pattern(64, 0), 5, FrameAnnotation { gso: None, csum_partial: true, tunnel: None }));
    frames.push((pattern(64, 0), 6, FrameAnnotation::NONE));
    for order in [ByteOrder::Little, ByteOrder::Big] {
        let bytes = write_capture(CaptureFormat::PcapNg, order, LinkType::ETHERNET, &frames);
        let got = read_ok(&bytes);
        assert_eq!(got.len(), frames.len());
        for (g, (_, _, ann)) in got.iter().zip(&frames) {
            assert_eq!(g.annotation, *ann);
            assert_eq!(g.comment.as_deref().map(FrameAnnotation::parse_comment), (!ann.is_empty()).then_some(Ok(*ann)));
        }
    }
}

/// wireguard-go style table: comment -> expected annotation or error.
#[test]
fn comment_token_parsing_table() {
    use AnnotationError as E;
    let none = FrameAnnotation::NONE;
    let partial = FrameAnnotation { gso: None, csum_partial: true, tunnel: None };
    let tcp4 = gso(GsoKind::TcpV4, 1448, 45, false);
    let bad = |key: &'static str, value: &str, reason: &'static str| {
        Err(E::InvalidValue { key, value: value.to_owned(), reason })
    };
    let table: Vec<(&str, Result<FrameAnnotation, AnnotationError>)> = vec![
        ("", Ok(none)),
        ("   \t\n ", Ok(none)),
        ("gso_type=none", Ok(none)),
        ("gso_type=none gso_size=0 gso_segs=0", Ok(none)),
        ("csum=partial", Ok(partial)),
        ("csum=none", Ok(none)),
        ("csum=unnecessary", Ok(none)),
        ("csum=complete", Ok(none)),
        ("gso_type=none csum=partial", Ok(partial)),
        ("gso_type=tcpv4 gso_size=1448 gso_segs=45", Ok(tcp4)),
        ("gso_segs=45 gso_size=1448 gso_type=tcpv4", Ok(tcp4)),
        ("  gso_type=tcpv4\tgso_size=1448\ngso_segs=45  ", Ok(tcp4)),
        ("gso_type=tcpv4 gso_size=01448 gso_segs=045", Ok(tcp4)),
        ("gso_type=tcpv6 gso_size=1428 gso_segs=2 csum=partial", Ok(gso(GsoKind::TcpV6, 1428, 2, true))),
        ("gso_type=udp_l4 gso_size=1472 gso_segs=10", Ok(gso(GsoKind::UdpL4, 1472, 10, false))),
        ("gso_type=tcpv4 gso_size=1448", Ok(gso(GsoKind::TcpV4, 1448, 0, false))),
        ("gso_type=tcpv4 gso_size=65535 gso_segs=65535", Ok(gso(GsoKind::TcpV4, 65535, 65535, false))),
        // Unknown tokens and free text are ignored.
        ("hello world", Ok(none)),
        ("retransmission, see ticket #42", Ok(none)),
        ("vlan=5 gso_type=tcpv4 note=x=y gso_size=1448 gso_segs=45 csum", Ok(tcp4)),
        ("GSO_TYPE=bogus Gso_size=abc", Ok(none)),
        ("gso_typex=tcpv4 xgso_size=1", Ok(none)),
        ("captured on eth0 csum=partial by tcpdump", Ok(partial)),
        // Malformed values of known tokens.
        ("gso_size=abc", bad("gso_size", "abc", "not a decimal number")),
        ("gso_type=tcpv4 gso_size=", bad("gso_size", "", "missing value")),
        ("gso_type=tcpv4 gso_size=65536", bad("gso_size", "65536", "out of range 0..=65535")),
        (
            "gso_type=tcpv4 gso_size=99999999999999999999",
            bad("gso_size", "99999999999999999999", "out of range 0..=65535"),
        ),
        ("gso_type=tcpv4 gso_size=+1448", bad("gso_size", "+1448", "not a decimal number")),
        ("gso_type=tcpv4 gso_size=-1", bad("gso_size", "-1", "not a decimal number")),
        ("gso_type=tcpv4 gso_size=1448 gso_segs=1.5", bad("gso_segs", "1.5", "not a decimal number")),
        ("gso_type=tcpv4 gso_size=1448,", bad("gso_size", "1448,", "not a decimal number")),
        ("gso_type=sctp gso_size=1", bad("gso_type", "sctp", "expected tcpv4, tcpv6, udp_l4 or none")),
        ("gso_type=TCPV4 gso_size=1", bad("gso_type", "TCPV4", "expected tcpv4, tcpv6, udp_l4 or none")),
        ("gso_type=", bad("gso_type", "", "expected tcpv4, tcpv6, udp_l4 or none")),
        ("csum=full", bad("csum", "full", "expected partial, none, unnecessary or complete")),
        ("gso_type=tcpv4 gso_size=0", bad("gso_size", "0", "must be non-zero with a GSO type")),
        // Inconsistent or repeated tokens.
        ("gso_type=tcpv4", Err(E::MissingGsoSize { kind: GsoKind::TcpV4 })),
        ("gso_type=udp_l4 gso_segs=3", Err(E::MissingGsoSize { kind: GsoKind::UdpL4 })),
        ("gso_size=1448", Err(E::GsoFieldWithoutType { key: "gso_size" })),
        ("gso_type=none gso_segs=3", Err(E::GsoFieldWithoutType { key: "gso_segs" })),
        ("gso_type=tcpv4 gso_type=tcpv4 gso_size=1", Err(E::Duplicate { key: "gso_type" })),
        ("gso_type=tcpv4 gso_size=1 gso_size=1", Err(E::Duplicate { key: "gso_size" })),
        ("csum=partial csum=partial", Err(E::Duplicate { key: "csum" })),
    ];
    for (input, want) in table {
        assert_eq!(FrameAnnotation::parse_comment(input), want, "input {input:?}");
        assert_eq!(input.parse::<FrameAnnotation>(), want, "FromStr {input:?}");
    }
    // Non-UTF-8 bytes are just unknown tokens.
    assert_eq!(
        FrameAnnotation::parse_comment_bytes(b"\xff\xfe gso_type=tcpv4 gso_size=9 \x80=1"),
        Ok(gso(GsoKind::TcpV4, 9, 0, false))
    );
}

#[test]
fn comment_writing_table() {
    let table = [
        (FrameAnnotation::NONE, ""),
        (FrameAnnotation { gso: None, csum_partial: true, tunnel: None }, "csum=partial"),
        (gso(GsoKind::TcpV4, 1448, 45, false), "gso_type=tcpv4 gso_size=1448 gso_segs=45"),
        (gso(GsoKind::TcpV6, 1, 0, true), "gso_type=tcpv6 gso_size=1 gso_segs=0 csum=partial"),
        (gso(GsoKind::UdpL4, 65535, 65535, true), "gso_type=udp_l4 gso_size=65535 gso_segs=65535 csum=partial"),
    ];
    for (ann, want) in table {
        assert_eq!(ann.to_string(), want);
        let mut s = String::from("prefix:");
        ann.write_comment(&mut s);
        assert_eq!(s, format!("prefix:{want}"));
        assert_eq!(ann.is_empty(), want.is_empty());
    }
}

// ---- hand-built files -------------------------------------------------------

fn u16b(o: ByteOrder, v: u16) -> [u8; 2] {
    o.put_u16(v)
}

fn u32b(o: ByteOrder, v: u32) -> [u8; 4] {
    o.put_u32(v)
}

/// One pcapng option, padded.
fn opt(o: ByteOrder, code: u16, value: &[u8]) -> Vec<u8> {
    let mut v = [&u16b(o, code)[..], &u16b(o, value.len() as u16)[..], value].concat();
    v.resize(pad4(v.len()), 0);
    v
}

/// One pcapng block around `body` (padded here).
fn block(o: ByteOrder, block_type: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    body.resize(pad4(body.len()), 0);
    let total = (body.len() + 12) as u32;
    [&u32b(o, block_type)[..], &u32b(o, total)[..], &body, &u32b(o, total)[..]].concat()
}

fn shb(o: ByteOrder, options: &[u8]) -> Vec<u8> {
    let body = [&u32b(o, 0x1A2B_3C4D)[..], &u16b(o, 1)[..], &u16b(o, 0)[..], &[0xFF; 8][..], options].concat();
    block(o, 0x0A0D_0D0A, &body)
}

fn idb(o: ByteOrder, link: u16, snaplen: u32, options: &[u8]) -> Vec<u8> {
    block(o, 1, &[&u16b(o, link)[..], &[0, 0], &u32b(o, snaplen)[..], options].concat())
}

fn epb(o: ByteOrder, iface: u32, ticks: u64, data: &[u8], orig: u32, options: &[u8]) -> Vec<u8> {
    let mut padded = data.to_vec();
    padded.resize(pad4(data.len()), 0);
    let body = [
        &u32b(o, iface)[..],
        &u32b(o, (ticks >> 32) as u32)[..],
        &u32b(o, ticks as u32)[..],
        &u32b(o, data.len() as u32)[..],
        &u32b(o, orig)[..],
        &padded,
        options,
    ]
    .concat();
    block(o, 6, &body)
}

/// A two-section pcapng: big-endian then little-endian, exercising every block kind.
fn hand_built_pcapng() -> Vec<u8> {
    let be = ByteOrder::Big;
    let le = ByteOrder::Little;
    let end = [0u8; 4];
    [
        // Section 1, big-endian.
        shb(be, &[opt(be, 4, b"handmade"), opt(be, 3, b"Linux"), end.to_vec()].concat()),
        // Interface 0: Ethernet, millisecond timestamps, offset 10 s.
        idb(
            be,
            1,
            65535,
            &[opt(be, 2, b"eth0"), opt(be, 9, &[3]), opt(be, 14, &10u64.to_be_bytes()), end.to_vec()].concat(),
        ),
        // Interface 1: raw IP, 2^-10 s timestamps, no end-of-options marker.
        idb(be, 101, 0, &opt(be, 9, &[0x80 | 10])),
        // Name resolution block and a custom block: skipped.
        block(be, 4, &[0, 0, 0, 0]),
        block(be, 0x0000_0BAD, b"custom stuff"),
        // Frame 0: EPB on interface 0 with an annotation comment and a trailing NUL.
        epb(
            be,
            0,
            1_500,
            b"hello",
            5,
            &[opt(be, 1, b"gso_type=udp_l4 gso_size=1000 gso_segs=2\0"), end.to_vec()].concat(),
        ),
        // Frame 1: EPB on interface 1, snapped, two comments (free text first).
        epb(
            be,
            1,
            3 << 10,
            &[0x45; 7],
            1500,
            &[opt(be, 1, b"free text"), opt(be, 1, b"csum=partial"), end.to_vec()].concat(),
        ),
        // Frame 2: simple packet block (interface 0, snaplen 65535).
        block(be, 3, &[&u32b(be, 3)[..], b"abc"].concat()),
        // Frame 3: obsolete packet block on interface 1 with drops count 7.
        block(
            be,
            2,
            &[
                &u16b(be, 1)[..],
                &u16b(be, 7)[..],
                &u32b(be, 0)[..],
                &u32b(be, 1 << 10)[..],
                &u32b(be, 2)[..],
                &u32b(be, 2)[..],
                b"xy\0\0",
            ]
            .concat(),
        ),
        // Section 2, little-endian: interfaces reset.
        shb(le, &[]),
        idb(le, 101, 262_144, &[opt(le, 9, &[9]), end.to_vec()].concat()),
        // Frame 4.
        epb(le, 0, 1_700_000_000_000_000_123, &[0x60; 40], 40, &[]),
    ]
    .concat()
}

#[test]
fn hand_built_pcapng_both_byte_orders_all_blocks() {
    let bytes = hand_built_pcapng();
    let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
    assert_eq!(r.byte_order(), ByteOrder::Big);
    assert_eq!(r.section().unwrap().user_appl.as_deref(), Some("handmade"));
    assert_eq!(r.section().unwrap().os.as_deref(), Some("Linux"));
    let mut frames = Vec::new();
    let mut all_comments = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        all_comments.push(f.comments().map(str::to_owned).collect::<Vec<_>>());
        frames.push(own(&f));
        if f.index == 3 {
            assert_eq!(r.interfaces().len(), 2);
            assert_eq!(r.interfaces()[0].name.as_deref(), Some("eth0"));
            assert_eq!(r.interfaces()[0].ts_offset_s, 10);
            assert_eq!(r.interfaces()[1].ts_resolution, TsResolution::Pow2(10));
        }
    }
    assert_eq!(r.sections(), 2);
    assert_eq!(r.byte_order(), ByteOrder::Little);
    assert_eq!(r.interfaces().len(), 1);
    assert_eq!(r.bytes_read(), bytes.len() as u64);
    assert_eq!(frames.len(), 5);

    let f = &frames[0];
    assert_eq!((f.index, &f.data[..], f.link_type, f.interface_id), (0, &b"hello"[..], LinkType::ETHERNET, 0));
    assert_eq!(f.timestamp_ns, 1_500_000_000 + 10_000_000_000, "1500 ms + 10 s offset");
    assert_eq!(f.annotation, gso(GsoKind::UdpL4, 1000, 2, false));
    assert_eq!(f.comment.as_deref(), Some("gso_type=udp_l4 gso_size=1000 gso_segs=2"));

    let f = &frames[1];
    assert_eq!((f.link_type, f.interface_id, f.captured_len, f.original_len), (LinkType::RAW, 1, 7, 1500));
    assert_eq!(f.timestamp_ns, 3_000_000_000);
    assert_eq!(f.comment.as_deref(), Some("free text"));
    assert_eq!(all_comments[1], ["free text", "csum=partial"]);
    assert_eq!(f.annotation, FrameAnnotation { gso: None, csum_partial: true, tunnel: None });

    let f = &frames[2];
    assert_eq!((&f.data[..], f.captured_len, f.original_len, f.timestamp_ns), (&b"abc"[..], 3, 3, 0));
    assert_eq!((f.link_type, f.interface_id), (LinkType::ETHERNET, 0));

    let f = &frames[3];
    assert_eq!(
        (&f.data[..], f.link_type, f.interface_id, f.timestamp_ns),
        (&b"xy"[..], LinkType::RAW, 1, 1_000_000_000)
    );

    let f = &frames[4];
    assert_eq!((f.index, f.link_type, f.timestamp_ns, f.data.len()), (4, LinkType::RAW, 1_700_000_000_000_000_123, 40));
}

#[test]
fn hand_built_big_endian_pcap() {
    let be = ByteOrder::Big;
    let mut bytes = [&[0xA1, 0xB2, 0xC3, 0xD4][..], &[0, 2, 0, 4], &[0; 8], &u32b(be, 65535), &u32b(be, 101)].concat();
    // FCS bits in the upper half of the link type are ignored.
    bytes[20] = 0x10;
    for (i, len) in [20u32, 0, 70_000].into_iter().enumerate() {
        bytes.extend_from_slice(&u32b(be, 1_000 + i as u32));
        bytes.extend_from_slice(&u32b(be, 999_999));
        bytes.extend_from_slice(&u32b(be, len));
        bytes.extend_from_slice(&u32b(be, len + 4));
        bytes.extend(pattern(len as usize, i as u8));
    }
    let frames = read_ok(&bytes);
    assert_eq!(frames.len(), 3);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.timestamp_ns, (1_000 + i as u64) * 1_000_000_000 + 999_999_000);
        assert_eq!(f.link_type, LinkType::RAW);
        assert_eq!(f.original_len, f.captured_len + 4);
        assert_eq!(f.data, pattern(f.captured_len as usize, i as u8));
    }
    // The same file in nanosecond flavour.
    bytes[2..4].copy_from_slice(&[0x3C, 0x4D]);
    let frames = read_ok(&bytes);
    assert_eq!(frames[0].timestamp_ns, 1_000_000_999_999);
}

#[test]
fn ts_resolution_conversions() {
    assert_eq!(TsResolution::MICROS.ticks_to_ns(5), 5_000);
    assert_eq!(TsResolution::NANOS.ticks_to_ns(5), 5);
    assert_eq!(TsResolution::Pow10(0).ticks_to_ns(2), 2_000_000_000);
    assert_eq!(TsResolution::Pow10(12).ticks_to_ns(5_000_999), 5_000);
    assert_eq!(TsResolution::Pow10(127).ticks_to_ns(u64::MAX), 0);
    assert_eq!(TsResolution::Pow10(0).ticks_to_ns(u64::MAX), u64::MAX);
    assert_eq!(TsResolution::Pow2(0).ticks_to_ns(u64::MAX), u64::MAX);
    assert_eq!(TsResolution::Pow2(1).ticks_to_ns(3), 1_500_000_000);
    assert_eq!(TsResolution::Pow2(127).ticks_to_ns(u64::MAX), 0);
    assert_eq!(TsResolution::from_option_byte(0x8A), TsResolution::Pow2(10));
    assert_eq!(TsResolution::from_option_byte(9), TsResolution::NANOS);
    assert_eq!(TsResolution::Pow2(10).option_byte(), 0x8A);
}

// ---- errors -------------------------------------------------------------------

#[test]
fn bad_magic_and_versions() {
    let err = CaptureReader::new(Cursor::new(b"GIF89a..........................")).err().unwrap();
    assert!(matches!(err, PcapError::BadMagic { magic: [b'G', b'I', b'F', b'8'] }), "{err:?}");
    assert!(err.to_string().contains("magic"));
    assert!(matches!(CaptureReader::new(Cursor::new(b"")).err().unwrap(), PcapError::Truncated { offset: 0, .. }));

    let mut pcap = write_capture(CaptureFormat::PcapMicros, ByteOrder::Little, LinkType::ETHERNET, &[]);
    pcap[4] = 3;
    let err = CaptureReader::new(Cursor::new(&pcap)).err().unwrap();
    assert!(matches!(err, PcapError::UnsupportedVersion { major: 3, minor: 4, .. }), "{err:?}");

    let mut ng = write_capture(CaptureFormat::PcapNg, ByteOrder::Little, LinkType::ETHERNET, &[]);
    ng[12] = 2;
    let err = CaptureReader::new(Cursor::new(&ng)).err().unwrap();
    assert!(matches!(err, PcapError::UnsupportedVersion { major: 2, .. }), "{err:?}");
    let mut ng = write_capture(CaptureFormat::PcapNg, ByteOrder::Little, LinkType::ETHERNET, &[]);
    ng[8] = 0;
    let err = CaptureReader::new(Cursor::new(&ng)).err().unwrap();
    assert!(matches!(err, PcapError::BadBlock { offset: 0, .. }), "{err:?}");
}

#[test]
fn oversized_records_are_typed_errors() {
    // pcap record claiming 4 GiB.
    let mut pcap = write_capture(CaptureFormat::PcapMicros, ByteOrder::Little, LinkType::ETHERNET, &[]);
    pcap.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    let (frames, err) = read_all(&pcap).unwrap();
    assert!(frames.is_empty());
    let err = err.unwrap();
    assert!(matches!(err, PcapError::FrameTooLarge { frame: 0, offset: Some(24), len: 0xFFFF_FFFF, .. }), "{err:?}");
    assert!(err.to_string().contains("frame 0") && err.to_string().contains("offset 24"), "{err}");

    // Just over the limit, and at the limit but truncated (no giant allocation either way).
    let mut pcap = write_capture(CaptureFormat::PcapMicros, ByteOrder::Little, LinkType::ETHERNET, &[]);
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&(MAX_FRAME_LEN + 1).to_le_bytes());
    pcap.extend_from_slice(&[0; 4]);
    assert!(matches!(read_all(&pcap).unwrap().1, Some(PcapError::FrameTooLarge { .. })));
    let at = pcap.len() - 8;
    pcap[at..at + 4].copy_from_slice(&MAX_FRAME_LEN.to_le_bytes());
    assert!(matches!(read_all(&pcap).unwrap().1, Some(PcapError::Truncated { frame: Some(0), .. })));

    // pcapng EPB whose block length is huge, and one whose captured length is.
    let o = ByteOrder::Little;
    let head = [shb(o, &[]), idb(o, 1, 0, &[])].concat();
    let mut ng = head.clone();
    ng.extend_from_slice(&[6, 0, 0, 0, 0xFC, 0xFF, 0xFF, 0x7F]);
    let err = read_all(&ng).unwrap().1.unwrap();
    assert!(matches!(err, PcapError::FrameTooLarge { frame: 0, .. }), "{err:?}");
    let mut big = epb(o, 0, 0, b"abcd", 4, &[]);
    big[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = read_all(&[head.clone(), big].concat()).unwrap().1.unwrap();
    assert!(matches!(err, PcapError::FrameTooLarge { frame: 0, .. }), "{err:?}");
    // Captured length past the end of the block.
    let mut over = epb(o, 0, 0, b"abcd", 4, &[]);
    over[20..24].copy_from_slice(&8u32.to_le_bytes());
    let err = read_all(&[head, over].concat()).unwrap().1.unwrap();
    assert!(matches!(err, PcapError::BadBlock { block: "enhanced packet block", .. }), "{err:?}");
}

#[test]
fn malformed_blocks_are_typed_errors() {
    let o = ByteOrder::Little;
    let head = [shb(o, &[]), idb(o, 1, 0, &[])].concat();
    // Undefined interface.
    let err = read_all(&[head.clone(), epb(o, 3, 0, b"ab", 2, &[])].concat()).unwrap().1.unwrap();
    assert!(err.to_string().contains("interface 3"), "{err}");
    // Trailer mismatch.
    let mut b = epb(o, 0, 0, b"ab", 2, &[]);
    let n = b.len();
    b[n - 1] = 9;
    let err = read_all(&[head.clone(), b].concat()).unwrap().1.unwrap();
    assert!(matches!(err, PcapError::BadBlock { .. }), "{err:?}");
    // Length not a multiple of 4.
    let mut b = epb(o, 0, 0, b"ab", 2, &[]);
    b[4] += 1;
    assert!(matches!(read_all(&[head.clone(), b].concat()).unwrap().1, Some(PcapError::BadBlock { .. })));
    // Option overrunning the block.
    let b = epb(o, 0, 0, b"ab", 2, &[1, 0, 200, 0]);
    assert!(matches!(read_all(&[head.clone(), b].concat()).unwrap().1, Some(PcapError::BadBlock { .. })));
    // Simple packet block without an interface.
    let b = block(o, 3, &[2, 0, 0, 0, 1, 2]);
    assert!(matches!(read_all(&[shb(o, &[]), b].concat()).unwrap().1, Some(PcapError::BadBlock { .. })));
    // Bad if_tsresol length.
    let bad_idb = idb(o, 1, 0, &opt(o, 9, &[6, 6]));
    assert!(matches!(read_all(&[shb(o, &[]), bad_idb].concat()).unwrap().1, Some(PcapError::BadBlock { .. })));
}

#[test]
fn bad_annotation_is_recoverable_and_leniency_is_optional() {
    let o = ByteOrder::Little;
    let bytes = [
        shb(o, &[]),
        idb(o, 1, 0, &[]),
        epb(o, 0, 0, b"one", 3, &opt(o, 1, b"gso_size=abc")),
        epb(o, 0, 0, b"two", 3, &opt(o, 1, b"csum=partial")),
    ]
    .concat();
    let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
    let err = r.next_frame().unwrap_err();
    assert!(err.is_recoverable());
    assert!(matches!(&err, PcapError::BadAnnotation { frame: 0, source: AnnotationError::InvalidValue { .. } }));
    let msg = err.to_string();
    assert!(msg.contains("frame 0") && msg.contains("gso_size") && msg.contains("abc"), "{msg}");
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!((f.index, f.data), (1, &b"two"[..]));
    assert!(f.annotation.csum_partial);

    let mut r = CaptureReader::new(Cursor::new(&bytes)).unwrap();
    r.set_strict_annotations(false);
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!((f.annotation, f.comment), (FrameAnnotation::NONE, Some("gso_size=abc")));
}

/// Byte offsets at which a capture may end cleanly (after the header and
/// after each block or record), and the frames complete at each.
fn boundaries(format: CaptureFormat, frames: &[(Vec<u8>, u64, FrameAnnotation)]) -> (Vec<u8>, Vec<(u64, usize)>) {
    let mut w = CaptureWriter::new(Vec::new(), format, LinkType::ETHERNET).unwrap();
    let mut ends = vec![(w.bytes_written(), 0)];
    if format == CaptureFormat::PcapNg {
        // The SHB ends 8 bytes after its own fixed part plus the userappl option.
        let shb_len = 28 + 4 + pad4(USER_APPL.len()) + 4;
        ends.insert(0, (shb_len as u64, 0));
    }
    for (i, (d, t, a)) in frames.iter().enumerate() {
        w.write_frame(d, *t, a).unwrap();
        ends.push((w.bytes_written(), i + 1));
    }
    (w.finish().unwrap(), ends)
}

#[test]
fn truncation_at_every_byte_is_a_typed_error() {
    let frames = [
        (pattern(60, 1), 1_000, FrameAnnotation::NONE),
        (pattern(61, 2), 2_000, gso(GsoKind::TcpV4, 1448, 2, true)),
        (pattern(3, 3), 3_000, FrameAnnotation { gso: None, csum_partial: true, tunnel: None }),
    ];
    for format in [CaptureFormat::PcapMicros, CaptureFormat::PcapNanos, CaptureFormat::PcapNg] {
        let frames: Vec<_> = frames
            .iter()
            .map(|(d, t, a)| (d.clone(), *t, if format.supports_comments() { *a } else { FrameAnnotation::NONE }))
            .collect();
        let (bytes, ends) = boundaries(format, &frames);
        let header_len = ends[0].0 as usize;
        for cut in 0..=bytes.len() {
            let result = read_all(&bytes[..cut]);
            if cut < header_len {
                let err = result.err().unwrap_or_else(|| panic!("{format} cut {cut}: header accepted"));
                assert!(matches!(err, PcapError::Truncated { .. }), "{format} cut {cut}: {err:?}");
                continue;
            }
            let (got, err) = result.unwrap();
            let complete = ends.iter().filter(|(end, _)| *end as usize <= cut).map(|(_, n)| *n).max().unwrap();
            assert_eq!(got.len(), complete, "{format} cut {cut}");
            for (g, (d, _, a)) in got.iter().zip(&frames) {
                assert_eq!((&g.data, &g.annotation), (d, a));
            }
            if ends.iter().any(|(end, _)| *end as usize == cut) {
                assert!(err.is_none(), "{format} cut {cut} at a boundary: {err:?}");
            } else {
                let err = err.unwrap_or_else(|| panic!("{format} cut {cut}: no error"));
                match &err {
                    PcapError::Truncated { frame: Some(n), .. } => assert_eq!(*n as usize, complete),
                    PcapError::Truncated { frame: None, what, .. } => {
                        assert!(format == CaptureFormat::PcapNg && what.contains("block"), "{what}")
                    }
                    other => panic!("{format} cut {cut}: {other:?}"),
                }
                assert!(err.to_string().contains("truncated"));
            }
        }
    }
}

#[test]
fn truncated_message_names_the_frame() {
    let frames = vec![(pattern(100, 0), 0, FrameAnnotation::NONE); 3];
    let bytes = write_capture(CaptureFormat::PcapNg, ByteOrder::Little, LinkType::ETHERNET, &frames);
    let (got, err) = read_all(&bytes[..bytes.len() - 10]).unwrap();
    assert_eq!(got.len(), 2);
    let msg = err.unwrap().to_string();
    assert!(msg.contains("frame 2") && msg.contains("enhanced packet block"), "{msg}");
}

#[test]
fn open_reports_total_len() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.pcapng");
    let mut w = CaptureWriter::create(&path, CaptureFormat::PcapNg, LinkType::ETHERNET).unwrap();
    w.write_frame(&pattern(70_000, 1), 1, &gso(GsoKind::TcpV4, 1448, 49, true)).unwrap();
    drop(w); // flush on drop
    let len = std::fs::metadata(&path).unwrap().len();
    let mut r = CaptureReader::open(&path).unwrap();
    assert_eq!(r.total_len(), Some(len));
    let f = r.next_frame().unwrap().unwrap();
    assert_eq!(f.data.len(), 70_000);
    assert!(r.next_frame().unwrap().is_none());
    assert_eq!(r.bytes_read(), len);
}

#[test]
fn reader_is_fused_after_error() {
    let bytes = write_capture(
        CaptureFormat::PcapMicros,
        ByteOrder::Little,
        LinkType::ETHERNET,
        &sample_frames()[..1].iter().map(|(d, t, _)| (d.clone(), *t, FrameAnnotation::NONE)).collect::<Vec<_>>(),
    );
    let mut r = CaptureReader::new(Cursor::new(&bytes[..bytes.len() - 1])).unwrap();
    assert!(r.next_frame().is_err());
    assert!(r.next_frame().unwrap().is_none());
}

fn arb_annotation() -> impl Strategy<Value = FrameAnnotation> {
    let kind = prop_oneof![Just(GsoKind::TcpV4), Just(GsoKind::TcpV6), Just(GsoKind::UdpL4)];
    let gso = proptest::option::of((kind, 1u16.., any::<u16>()).prop_map(|(kind, size, segs)| GsoAnnotation {
        kind,
        size,
        segs,
    }));
    (gso, any::<bool>()).prop_map(|(gso, csum_partial)| FrameAnnotation { gso, csum_partial, tunnel: None })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_all(&bytes);
    }

    #[test]
    fn random_bytes_after_valid_headers_never_panic(
        ng in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let format = if ng { CaptureFormat::PcapNg } else { CaptureFormat::PcapMicros };
        let mut bytes = write_capture(format, ByteOrder::Little, LinkType::ETHERNET, &[]);
        bytes.extend_from_slice(&tail);
        let _ = read_all(&bytes);
    }

    #[test]
    fn mutated_captures_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = hand_built_pcapng();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let end = cut.index(bytes.len() + 1);
        let _ = read_all(&bytes[..end]);
    }

    #[test]
    fn annotation_text_round_trips(ann in arb_annotation(), junk in "[a-z ]{0,20}") {
        let text = ann.to_string();
        prop_assert_eq!(FrameAnnotation::parse_comment(&text), Ok(ann));
        // Free text around the tokens does not change the result.
        prop_assert_eq!(FrameAnnotation::parse_comment(&format!("{junk} {text} {junk}")), Ok(ann));
    }

    #[test]
    fn annotation_comment_parse_never_panics(s in "\\PC{0,64}") {
        let _ = FrameAnnotation::parse_comment(&s);
    }

    #[test]
    fn frames_round_trip(
        frames in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..300), any::<u64>(), arb_annotation()), 0..6),
        big in any::<bool>(),
    ) {
        let order = if big { ByteOrder::Big } else { ByteOrder::Little };
        let bytes = write_capture(CaptureFormat::PcapNg, order, LinkType::ETHERNET, &frames);
        let got = read_ok(&bytes);
        prop_assert_eq!(got.len(), frames.len());
        for (g, (d, t, a)) in got.iter().zip(&frames) {
            prop_assert_eq!(&g.data, d);
            prop_assert_eq!(g.timestamp_ns, *t);
            prop_assert_eq!(g.annotation, *a);
        }
    }
}
