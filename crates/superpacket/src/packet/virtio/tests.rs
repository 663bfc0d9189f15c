//! Table-driven tests of `virtio_net_hdr` import (offload-rules 4.2), in the
//! style of wireguard-go's offload tables: one row per rule.

use super::*;
use crate::traffic::{Flow, FlowSpec, Transport};
use crate::wire::TcpFlags;

/// A superpacket frame of the given kind and the header a TAP would write.
fn handover(
    transport: Transport,
    ipv6: bool,
    vlans: &[(u16, u16)],
    payload: usize,
    gso: u16,
) -> (VirtioNetHdr, Vec<u8>) {
    let spec = FlowSpec::new(transport, ipv6, 1).with_vlans(vlans).unwrap();
    let p = Flow::new(spec).superpacket(payload, gso, TcpFlags::empty()).unwrap();
    let frame = p.to_vec();
    (VirtioNetHdr::from_meta(&p.meta, &frame, false).unwrap(), frame)
}

fn tcp4() -> (VirtioNetHdr, Vec<u8>) {
    handover(Transport::Tcp, false, &[], 1448 * 10, 1448)
}

#[test]
fn layouts_and_byte_orders_round_trip() {
    let hdr = VirtioNetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: GSO_TCPV4 | GSO_ECN,
        hdr_len: 66,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
        num_buffers: 3,
    };
    for order in [HdrByteOrder::Native, HdrByteOrder::Little, HdrByteOrder::Big] {
        let mut buf = [0u8; 12];
        hdr.emit(&mut buf, HdrLayout::MrgRxbuf, order).unwrap();
        assert_eq!(VirtioNetHdr::parse(&buf, HdrLayout::MrgRxbuf, order).unwrap(), hdr);
        let mut basic = [0u8; 10];
        hdr.emit(&mut basic, HdrLayout::Basic, order).unwrap();
        assert_eq!(
            VirtioNetHdr::parse(&basic, HdrLayout::Basic, order).unwrap(),
            VirtioNetHdr { num_buffers: 0, ..hdr }
        );
    }
    let mut le = [0u8; 10];
    hdr.emit(&mut le, HdrLayout::Basic, HdrByteOrder::Little).unwrap();
    assert_eq!(le, [0x01, 0x81, 66, 0, 0xa8, 0x05, 34, 0, 16, 0]);
    assert_eq!(
        VirtioNetHdr::parse(&le[..9], HdrLayout::Basic, HdrByteOrder::Little),
        Err(VirtioHdrError::Truncated { needed: 10, available: 9 })
    );
    assert_eq!(HdrLayout::from_len(12), Some(HdrLayout::MrgRxbuf));
    assert_eq!(HdrLayout::from_len(20), None);
}

#[test]
fn valid_superpackets_import_with_metadata() {
    type Case = (Transport, bool, &'static [(u16, u16)], GsoType, u16);
    let cases: &[Case] = &[
        (Transport::Tcp, false, &[], GsoType::TCPV4, 1448),
        (Transport::Tcp, true, &[], GsoType::TCPV6, 1428),
        (Transport::Udp, false, &[], GsoType::UDP_L4, 1400),
        (Transport::Udp, true, &[], GsoType::UDP_L4, 1400),
        (Transport::Tcp, false, &[(0x8100, 100)], GsoType::TCPV4, 1448),
        (Transport::Tcp, true, &[(0x88A8, 10), (0x8100, 20)], GsoType::TCPV6, 1428),
        (Transport::Udp, false, &[(0x88A8, 10), (0x8100, 20)], GsoType::UDP_L4, 1400),
    ];
    for &(transport, ipv6, vlans, gso_type, gso_size) in cases {
        let (hdr, frame) = handover(transport, ipv6, vlans, gso_size as usize * 20 + 7, gso_size);
        let meta = hdr.to_meta(&frame, &ImportOptions::default()).unwrap();
        assert_eq!(meta.gso_type, gso_type | GsoType::DODGY, "{transport:?} ipv6={ipv6} vlans={vlans:?}");
        assert_eq!(meta.gso_size, gso_size);
        assert_eq!(meta.gso_segs, 21);
        let l4 = 14 + 4 * vlans.len() + if ipv6 { 40 } else { 20 };
        let off = if transport == Transport::Tcp { 16 } else { 6 };
        assert_eq!(meta.csum, ChecksumState::Partial { start: l4 as u16, offset: off });
        // Export gives the same header back (hdr_len = real header length).
        assert_eq!(VirtioNetHdr::from_meta(&meta, &frame, false).unwrap(), hdr);
        if vlans.is_empty() {
            // As a TUN hands it over: the same packet without its Ethernet
            // header, offsets 14 lower.
            let raw = &frame[14..];
            let raw_hdr = raw_ip_twin(&hdr);
            let raw_meta = raw_hdr.to_meta(raw, &RAW_IP).unwrap();
            assert_eq!(Some(raw_meta), meta.shifted(-14), "{transport:?} ipv6={ipv6} raw IP");
            assert_eq!(VirtioNetHdr::from_meta_as(&raw_meta, raw, Medium::Ip, false).unwrap(), raw_hdr);
        }
    }
}

/// Import options for a TUN (raw IP packets).
const RAW_IP: ImportOptions =
    ImportOptions { udp_max_segments: UDP_MAX_SEGMENTS, trust_data_valid: false, medium: Medium::Ip };

/// The header of the same packet without its 14-byte Ethernet header.
fn raw_ip_twin(hdr: &VirtioNetHdr) -> VirtioNetHdr {
    VirtioNetHdr { csum_start: hdr.csum_start.saturating_sub(14), hdr_len: hdr.hdr_len.saturating_sub(14), ..*hdr }
}

#[test]
fn bogus_headers_are_refused() {
    let (good, frame) = tcp4();
    let (udp_good, udp_frame) = handover(Transport::Udp, false, &[], 1400 * 10, 1400);
    let opts = ImportOptions::default();
    type Case = (&'static str, VirtioNetHdr, Vec<u8>, fn(&VirtioHdrError) -> bool);
    let cases: Vec<Case> = vec![
        ("gso_size 0", VirtioNetHdr { gso_size: 0, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::ZeroGsoSize { .. })
        }),
        ("GSO_BY_FRAGS", VirtioNetHdr { gso_size: 0xFFFF, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::GsoByFrags)
        }),
        ("unknown gso_type", VirtioNetHdr { gso_type: 2, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::UnknownGsoType(2))
        }),
        ("ECN alone", VirtioNetHdr { gso_type: GSO_ECN, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::UnknownGsoType(0x80))
        }),
        ("legacy UFO", VirtioNetHdr { gso_type: GSO_UDP, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::UfoUnsupported)
        }),
        (
            "csum_start past the end",
            VirtioNetHdr { csum_start: frame.len() as u16, csum_offset: 0, hdr_len: 0, ..good },
            frame.clone(),
            |e| matches!(e, VirtioHdrError::HdrLenBeyondFrame { .. }),
        ),
        (
            "L4 header past the end",
            VirtioNetHdr { csum_start: frame.len() as u16 - 10, csum_offset: 0, hdr_len: 0, ..good },
            frame.clone(),
            |e| matches!(e, VirtioHdrError::ChecksumOutsideFrame { .. }),
        ),
        ("hdr_len past the end", VirtioNetHdr { hdr_len: 20000, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::HdrLenBeyondFrame { hdr_len: 20000, .. })
        }),
        ("TCP csum_offset 6", VirtioNetHdr { csum_offset: 6, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::WrongChecksumOffset { expected: 16, .. })
        }),
        ("TCPV6 on IPv4", VirtioNetHdr { gso_type: GSO_TCPV6, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::ProtocolMismatch { .. })
        }),
        ("UDP_L4 on TCP", VirtioNetHdr { gso_type: GSO_UDP_L4, csum_offset: 6, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::ProtocolMismatch { .. })
        }),
        ("TCPV4 on UDP", VirtioNetHdr { gso_type: GSO_TCPV4, csum_offset: 16, ..udp_good }, udp_frame.clone(), |e| {
            matches!(e, VirtioHdrError::ProtocolMismatch { .. })
        }),
        ("csum_start not at L4", VirtioNetHdr { csum_start: 14, ..good }, frame.clone(), |e| {
            matches!(e, VirtioHdrError::ChecksumStartNotL4 { start: 14, l4_offset: 34 })
        }),
        ("UDP_L4 without NEEDS_CSUM", VirtioNetHdr { flags: 0, ..udp_good }, udp_frame.clone(), |e| {
            matches!(e, VirtioHdrError::UdpL4WithoutChecksum)
        }),
        ("UDP_L4 with ECN", VirtioNetHdr { gso_type: GSO_UDP_L4 | GSO_ECN, ..udp_good }, udp_frame.clone(), |e| {
            matches!(e, VirtioHdrError::UdpL4ExtraBits(_))
        }),
        ("UDP_L4 csum_offset 16", VirtioNetHdr { csum_offset: 16, ..udp_good }, udp_frame.clone(), |e| {
            matches!(e, VirtioHdrError::WrongChecksumOffset { expected: 6, .. })
        }),
        ("UDP_L4 too many segments", VirtioNetHdr { gso_size: 100, ..udp_good }, udp_frame.clone(), |e| {
            matches!(e, VirtioHdrError::TooManySegments { segments: 140, max: 128 })
        }),
        ("frame shorter than Ethernet", good, frame[..10].to_vec(), |e| {
            matches!(e, VirtioHdrError::FrameTooShort { len: 10, medium: Medium::Ethernet })
        }),
        (
            "GSO on ARP-sized garbage",
            VirtioNetHdr { flags: 0, csum_start: 0, csum_offset: 0, hdr_len: 0, ..good },
            {
                let mut f = frame.clone();
                f[12] = 0x08;
                f[13] = 0x06; // ARP ethertype, rest is not an ARP packet
                f
            },
            |e| matches!(e, VirtioHdrError::BadHeaders(_) | VirtioHdrError::ProtocolMismatch { .. }),
        ),
        ("GSO on a truncated IP packet", VirtioNetHdr { hdr_len: 0, ..good }, frame[..200].to_vec(), |e| {
            matches!(e, VirtioHdrError::BadHeaders(_))
        }),
    ];
    let mut raw_cases = 0;
    for (name, hdr, frame, expect) in cases {
        let reason = match hdr.to_meta(&frame, &opts) {
            Ok(meta) => panic!("{name}: accepted as {meta:?}"),
            Err(e) => {
                assert!(expect(&e), "{name}: wrong error {e:?}");
                e.reason()
            }
        };
        // Every case on an IP frame is refused for the same reason as raw IP.
        if let Some(raw) = crate::traffic::raw_ip_packet(&frame) {
            match raw_ip_twin(&hdr).to_meta(raw, &RAW_IP) {
                Ok(meta) => panic!("{name} raw IP: accepted as {meta:?}"),
                Err(e) => assert_eq!(e.reason(), reason, "{name} raw IP: {e}"),
            }
            raw_cases += 1;
        }
    }
    assert_eq!(raw_cases, 18, "every IP case ran as raw IP");
    let empty = good.to_meta(&[], &RAW_IP).unwrap_err();
    assert!(matches!(empty, VirtioHdrError::FrameTooShort { len: 0, medium: Medium::Ip }), "{empty}");
    let not_ip = raw_ip_twin(&good).to_meta(&[0x55; 60], &RAW_IP);
    assert!(matches!(not_ip, Err(VirtioHdrError::BadHeaders(_))), "{not_ip:?}");
    // The old UDP_MAX_SEGMENTS (64) is an option.
    let old = ImportOptions { udp_max_segments: 64, ..ImportOptions::default() };
    assert!(VirtioNetHdr { gso_size: 200, ..udp_good }.to_meta(&udp_frame, &old).is_err());
    assert!(VirtioNetHdr { gso_size: 200, ..udp_good }.to_meta(&udp_frame, &opts).is_ok());
}

#[test]
fn small_gso_packets_become_ordinary() {
    // Payload equal to gso_size: not really GSO (offload-rules 4.2 step 5).
    let (hdr, frame) = handover(Transport::Tcp, false, &[], 1448, 1448);
    let hdr = VirtioNetHdr { gso_type: GSO_TCPV4, gso_size: 1448, ..hdr };
    let meta = hdr.to_meta(&frame, &ImportOptions::default()).unwrap();
    assert!(!meta.is_gso());
    assert_eq!(meta.csum, ChecksumState::Partial { start: 34, offset: 16 });
}

#[test]
fn checksum_flags() {
    let (good, frame) = tcp4();
    let plain = VirtioNetHdr { gso_type: GSO_NONE, gso_size: 0, ..good };
    let valid = VirtioNetHdr { flags: F_DATA_VALID, ..plain };
    // DATA_VALID is ignored on input unless asked (as the kernel does).
    assert_eq!(valid.to_meta(&frame, &ImportOptions::default()).unwrap().csum, ChecksumState::None);
    let trust = ImportOptions { trust_data_valid: true, ..ImportOptions::default() };
    assert_eq!(valid.to_meta(&frame, &trust).unwrap().csum, ChecksumState::Unnecessary { level: 0 });
    // Export: UNNECESSARY becomes DATA_VALID only when allowed; COMPLETE gives 0.
    let meta = OffloadMeta { csum: ChecksumState::Unnecessary { level: 0 }, ..OffloadMeta::default() };
    assert_eq!(VirtioNetHdr::from_meta(&meta, &frame, true).unwrap().flags, F_DATA_VALID);
    assert_eq!(VirtioNetHdr::from_meta(&meta, &frame, false).unwrap().flags, 0);
    let meta = OffloadMeta { csum: ChecksumState::Complete { sum: 0x1234 }, ..OffloadMeta::default() };
    assert_eq!(VirtioNetHdr::from_meta(&meta, &frame, true).unwrap(), VirtioNetHdr::default());
}

#[test]
fn export_refuses_unrepresentable_gso() {
    let (_, frame) = tcp4();
    let meta = OffloadMeta { gso_type: GsoType::FRAGLIST, gso_size: 1448, gso_segs: 2, ..OffloadMeta::default() };
    assert_eq!(VirtioNetHdr::from_meta(&meta, &frame, false), Err(VirtioHdrError::Unrepresentable(GsoType::FRAGLIST)));
    let ecn = OffloadMeta { gso_type: GsoType::TCPV4 | GsoType::TCP_ECN, gso_size: 1448, gso_segs: 10, ..meta };
    assert_eq!(VirtioNetHdr::from_meta(&ecn, &frame, false).unwrap().gso_type, GSO_TCPV4 | GSO_ECN);
}

#[test]
fn export_of_a_gro_aggregate_takes_hdr_len_from_the_partial_checksum() {
    // A GRO aggregate's linear area holds the headers only; its payload is in
    // segments, so the IP length runs past the slice `from_meta` sees.
    let (_, frame) = tcp4();
    let h = crate::wire::FrameHeaders::parse(&frame).unwrap();
    let meta = OffloadMeta {
        gso_type: GsoType::TCPV4,
        gso_size: 1448,
        gso_segs: 20,
        csum: ChecksumState::Partial { start: h.l4_offset as u16, offset: 16 },
        ..OffloadMeta::default()
    };
    let linear = &frame[..h.payload_offset];
    let hdr = VirtioNetHdr::from_meta(&meta, linear, false).unwrap();
    assert_eq!(usize::from(hdr.hdr_len), h.payload_offset);
    assert_eq!(hdr.flags, F_NEEDS_CSUM);
    // Without a partial checksum there is nothing to go by: refused.
    let plain = OffloadMeta { csum: ChecksumState::None, ..meta };
    assert!(matches!(VirtioNetHdr::from_meta(&plain, linear, false), Err(VirtioHdrError::BadHeaders(_))));
    // A checksum offset that is neither TCP's nor UDP's: refused.
    let odd = OffloadMeta { csum: ChecksumState::Partial { start: h.l4_offset as u16, offset: 4 }, ..meta };
    assert!(VirtioNetHdr::from_meta(&odd, linear, false).is_err());
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any header with any frame: a typed result, never a panic; an
        /// accepted GSO result is self-consistent.
        #[test]
        fn arbitrary_headers_never_panic(
            bytes in proptest::array::uniform10(any::<u8>()),
            cut in 0usize..20000,
            flip in proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
        ) {
            let (_, mut frame) = tcp4();
            for (i, b) in flip { let n = frame.len(); frame[i % n] ^= b; }
            frame.truncate(cut.max(1));
            let hdr = VirtioNetHdr::parse(&bytes, HdrLayout::Basic, HdrByteOrder::Little).unwrap();
            if let Ok(meta) = hdr.to_meta(&frame, &ImportOptions::default()) {
                if meta.is_gso() {
                    prop_assert!(meta.gso_size > 0 && meta.gso_segs >= 2);
                    prop_assert!(meta.gso_type.protocol().is_some());
                }
                if let ChecksumState::Partial { start, offset } = meta.csum {
                    prop_assert!(start as usize + offset as usize + 2 <= frame.len());
                }
            }
        }
    }
}
