//! pcap / pcapng reading on arbitrary bytes (both annotation modes), the
//! `pcap check` path on every frame read, and a write/read round trip.
//! Invariants: no panic, no endless loop (a bad annotation is reported once
//! per frame and reading goes on); `frames_read` counts the frames returned;
//! frame indexes increase by one; a frame holds `captured_len` bytes;
//! `bytes_read` never exceeds the input; every Ethernet frame read and
//! written back (pcapng, with its annotation) reads back identical.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, LinkType, PcapError};
use superpacket::validate::{self, Medium};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else { return };
    let Ok(mut r) = CaptureReader::new(Cursor::new(bytes)) else { return };
    r.set_strict_annotations(mode & 1 != 0);
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::PcapNg, LinkType::ETHERNET).expect("in memory");
    let mut written = Vec::new();
    let (mut returned, mut bad) = (0u64, 0u64);
    let mut problems = Vec::new();
    for _ in 0..100_000 {
        let f = match r.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(PcapError::BadAnnotation { frame, .. }) => {
                assert_eq!(frame, returned + bad, "bad annotation on an unexpected frame");
                bad += 1;
                continue;
            }
            Err(_) => break,
        };
        assert_eq!(f.index, returned + bad, "frame indexes");
        returned += 1;
        assert_eq!(f.data.len(), f.captured_len as usize);
        let link = match f.link_type {
            LinkType::ETHERNET => Medium::Ethernet,
            LinkType(101) => Medium::Ip,
            _ => continue,
        };
        // What `pcap check` does with it.
        let headers = validate::parse_headers(f.data, link).ok();
        let meta = f.annotation.to_meta(headers.as_ref());
        problems.clear();
        validate::validate_frame(f.data, link, &meta, f.is_snapped(), &mut problems);
        if link == Medium::Ethernet
            && w.write_frame_with_original_len(f.data, f.original_len, f.timestamp_ns, &f.annotation).is_ok()
        {
            written.push((f.data.to_vec(), f.original_len, f.timestamp_ns, f.annotation));
        }
    }
    assert!(r.bytes_read() <= bytes.len() as u64, "read {} of {} bytes", r.bytes_read(), bytes.len());
    assert!(r.frames_read() >= returned, "frames_read {} < {returned} returned", r.frames_read());
    // Round trip of what was read.
    let out = w.finish().expect("in memory");
    let mut r2 = CaptureReader::new(Cursor::new(out)).expect("our own file");
    r2.set_strict_annotations(true);
    for (i, (data, orig, ts, ann)) in written.iter().enumerate() {
        let f = r2.next_frame().expect("our own file reads").expect("every frame written");
        assert_eq!((f.data, f.original_len, f.timestamp_ns), (&data[..], *orig, *ts), "frame {i}");
        assert_eq!(f.annotation, *ann, "frame {i}");
    }
    assert!(r2.next_frame().expect("our own file reads").is_none());
});
