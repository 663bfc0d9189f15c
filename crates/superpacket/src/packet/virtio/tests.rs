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
        ..Default::default()
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
    assert_eq!(HdrLayout::from_len(24), Some(HdrLayout::HashTunnel));
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
const RAW_IP: ImportOptions = ImportOptions {
    udp_max_segments: UDP_MAX_SEGMENTS,
    trust_data_valid: false,
    medium: Medium::Ip,
    udp_tunnel: false,
    udp_tunnel_csum: false,
};

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

// ---- UDP tunnel GSO (offload-rules 4.2, tunnel variant) ----

use crate::packet::{Encapsulation, TunnelKind};
use crate::traffic::{TunnelSpec, encapsulate};

/// A tunnel superpacket (inner `transport` over `inner_v6`, outer `outer_v6`)
/// with its metadata, the header a tunnel-GSO TAP would write, and the frame.
fn tunnel_handover(
    kind: TunnelKind,
    outer_v6: bool,
    transport: Transport,
    inner_v6: bool,
    udp_csum: bool,
    geneve_options: usize,
) -> (OffloadMeta, VirtioNetHdr, Vec<u8>) {
    let inner =
        Flow::new(FlowSpec::new(transport, inner_v6, 3)).superpacket(1400 * 5, 1400, TcpFlags::empty()).unwrap();
    let mut spec = TunnelSpec::new(kind, outer_v6);
    spec.udp_csum = udp_csum;
    spec.geneve_options = geneve_options;
    let p = encapsulate(&inner, &spec).unwrap();
    let frame = p.to_vec();
    let hdr = VirtioNetHdr::from_meta(&p.meta, &frame, true).unwrap();
    (p.meta, hdr, frame)
}

fn vxlan4() -> (OffloadMeta, VirtioNetHdr, Vec<u8>) {
    tunnel_handover(TunnelKind::Vxlan, false, Transport::Tcp, false, false, 0)
}

fn tunnel_opts() -> ImportOptions {
    ImportOptions::default().with_udp_tunnel(true)
}

#[test]
fn tunnel_superpackets_round_trip_through_the_24_byte_layout() {
    for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
        for outer_v6 in [false, true] {
            for (transport, inner_v6) in
                [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false), (Transport::Udp, true)]
            {
                for udp_csum in [false, true] {
                    let options = if kind == TunnelKind::Geneve { 8 } else { 0 };
                    let (meta, hdr, frame) = tunnel_handover(kind, outer_v6, transport, inner_v6, udp_csum, options);
                    let case =
                        format!("{kind:?} outer v6 {outer_v6} {transport:?} inner v6 {inner_v6} csum {udp_csum}");
                    let encap = meta.encap.unwrap();
                    let tunnel_bit = if outer_v6 { GSO_UDP_TUNNEL_IPV6 } else { GSO_UDP_TUNNEL_IPV4 };
                    let inner_bit = match (transport, inner_v6) {
                        (Transport::Tcp, false) => GSO_TCPV4,
                        (Transport::Tcp, true) => GSO_TCPV6,
                        _ => GSO_UDP_L4,
                    };
                    assert_eq!(hdr.gso_type, tunnel_bit | inner_bit, "{case}");
                    let csum_flag = if udp_csum { F_UDP_TUNNEL_CSUM } else { 0 };
                    assert_eq!(hdr.flags, F_NEEDS_CSUM | csum_flag, "{case}: never DATA_VALID");
                    assert_eq!(
                        (hdr.outer_th_offset, hdr.inner_nh_offset, hdr.csum_start),
                        (encap.outer_transport, encap.inner_network, encap.inner_transport),
                        "{case}"
                    );
                    let mut bytes = [0xEEu8; 24];
                    hdr.emit(&mut bytes, HdrLayout::HashTunnel, HdrByteOrder::Little).unwrap();
                    assert_eq!(&bytes[12..20], &[0; 8], "{case}: hash fields zeroed");
                    assert_eq!(u16::from_le_bytes([bytes[20], bytes[21]]), encap.outer_transport);
                    assert_eq!(u16::from_le_bytes([bytes[22], bytes[23]]), encap.inner_network);
                    let read = VirtioNetHdr::parse(&bytes, HdrLayout::HashTunnel, HdrByteOrder::Little).unwrap();
                    assert_eq!(read, hdr, "{case}");
                    let got = read.to_meta(&frame, &tunnel_opts()).unwrap();
                    assert_eq!(got.gso_type, meta.gso_type | GsoType::DODGY, "{case}");
                    assert_eq!((got.gso_size, got.gso_segs, got.csum), (meta.gso_size, meta.gso_segs, meta.csum));
                    assert_eq!(got.encap, meta.encap, "{case}: tunnel kind and offsets found from the bytes");
                    assert!(got.is_tunnel_gso());
                }
            }
        }
    }
}

#[test]
fn tunnel_headers_need_the_24_byte_layout() {
    let (_, hdr, _) = vxlan4();
    for layout in [HdrLayout::Basic, HdrLayout::MrgRxbuf] {
        let mut out = [0u8; 24];
        assert_eq!(
            hdr.emit(&mut out, layout, HdrByteOrder::Native),
            Err(VirtioHdrError::TunnelNeedsLayout { layout_len: layout.len() })
        );
    }
    // A plain header in the 24-byte layout: offsets zero, fields as before.
    let (plain, frame) = tcp4();
    let mut out = [0xFFu8; 24];
    plain.emit(&mut out, HdrLayout::HashTunnel, HdrByteOrder::Native).unwrap();
    assert_eq!(&out[10..], &[0; 14]);
    let read = VirtioNetHdr::parse(&out, HdrLayout::HashTunnel, HdrByteOrder::Native).unwrap();
    assert_eq!(read, plain);
    assert_eq!(read.to_meta(&frame, &tunnel_opts()), plain.to_meta(&frame, &ImportOptions::default()));
    assert!(matches!(
        VirtioNetHdr::parse(&out[..20], HdrLayout::HashTunnel, HdrByteOrder::Native),
        Err(VirtioHdrError::Truncated { needed: 24, available: 20 })
    ));
}

#[test]
fn bogus_tunnel_headers_are_refused() {
    let (_, h, frame) = vxlan4();
    let (_, h6, frame6) = tunnel_handover(TunnelKind::Vxlan, true, Transport::Tcp, false, false, 0);
    let (_, hu, frame_u) = tunnel_handover(TunnelKind::Geneve, false, Transport::Udp, false, false, 0);
    let (_, hi6, frame_i6) = tunnel_handover(TunnelKind::Vxlan, false, Transport::Tcp, true, false, 0);
    let mut no_vxlan_flag = frame.clone();
    no_vxlan_flag[h.outer_th_offset as usize + 8] = 0;
    let th = h.csum_start;
    let offsets =
        |outer_th: u16, inner_nh: u16, inner_th: u16| VirtioHdrError::TunnelOffsets { outer_th, inner_nh, inner_th };
    let no_tunnel = ImportOptions::default();
    let no_csum = ImportOptions { udp_tunnel_csum: false, ..tunnel_opts() };
    type Row = (&'static str, VirtioNetHdr, Vec<u8>, ImportOptions, VirtioHdrError);
    let rows: Vec<Row> = vec![
        ("not negotiated", h, frame.clone(), no_tunnel, VirtioHdrError::TunnelNotNegotiated(h.gso_type)),
        (
            "both families",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL | GSO_TCPV4, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelBothFamilies,
        ),
        (
            "no inner type",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelInnerType(GSO_UDP_TUNNEL_IPV4),
        ),
        (
            "inner UFO",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4 | GSO_UDP, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelInnerType(GSO_UDP_TUNNEL_IPV4 | GSO_UDP),
        ),
        (
            "inner ECN only",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4 | GSO_ECN, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelInnerType(GSO_UDP_TUNNEL_IPV4 | GSO_ECN),
        ),
        (
            "unknown inner type",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4 | 0x07, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::UnknownGsoType(GSO_UDP_TUNNEL_IPV4 | 0x07),
        ),
        (
            "no NEEDS_CSUM",
            VirtioNetHdr { flags: 0, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelWithoutChecksum,
        ),
        (
            "DATA_VALID",
            VirtioNetHdr { flags: F_NEEDS_CSUM | F_DATA_VALID, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelDataValid,
        ),
        (
            "outer transport inside the outer IPv4 header",
            VirtioNetHdr { outer_th_offset: 33, ..h },
            frame.clone(),
            tunnel_opts(),
            offsets(33, h.inner_nh_offset, th),
        ),
        (
            "IPv6 tunnel bit, outer transport before 14 + 40",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV6 | GSO_TCPV4, ..h },
            frame.clone(),
            tunnel_opts(),
            offsets(34, h.inner_nh_offset, th),
        ),
        (
            "inner network inside the outer UDP header",
            VirtioNetHdr { inner_nh_offset: 41, ..h },
            frame.clone(),
            tunnel_opts(),
            offsets(34, 41, th),
        ),
        (
            "inner transport inside the inner IPv4 header",
            VirtioNetHdr { csum_start: h.inner_nh_offset + 19, ..h },
            frame.clone(),
            tunnel_opts(),
            offsets(34, h.inner_nh_offset, h.inner_nh_offset + 19),
        ),
        (
            "TCPV6 inner type, 20 bytes of inner IP",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4 | GSO_TCPV6, ..h },
            frame.clone(),
            tunnel_opts(),
            offsets(34, h.inner_nh_offset, th),
        ),
        (
            "gso_size 0",
            VirtioNetHdr { gso_size: 0, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::ZeroGsoSize { gso_type: h.gso_type },
        ),
        (
            "TCP with csum_offset 6",
            VirtioNetHdr { csum_offset: 6, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::WrongChecksumOffset { protocol: GsoProtocol::TcpV4, offset: 6, expected: 16 },
        ),
        (
            "USO with ECN",
            VirtioNetHdr { gso_type: hu.gso_type | GSO_ECN, ..hu },
            frame_u.clone(),
            tunnel_opts(),
            VirtioHdrError::UdpL4ExtraBits(hu.gso_type | GSO_ECN),
        ),
        (
            "outer checksum not negotiated",
            VirtioNetHdr { flags: F_NEEDS_CSUM | F_UDP_TUNNEL_CSUM, ..h },
            frame.clone(),
            no_csum,
            VirtioHdrError::TunnelCsumNotNegotiated,
        ),
        (
            "IPv4 tunnel bit on an IPv6 outer header",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4 | GSO_TCPV4, ..h6 },
            frame6.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelHeaders("the outer IP version is not the one gso_type states"),
        ),
        (
            "outer_th_offset not the UDP header",
            VirtioNetHdr { outer_th_offset: 38, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelHeaders("outer_th_offset is not an outer UDP header"),
        ),
        (
            "inner_nh_offset off by 4",
            VirtioNetHdr { inner_nh_offset: h.inner_nh_offset + 4, csum_start: th + 4, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::TunnelHeaders(
                "no VXLAN or Geneve header followed by an Ethernet header ending at inner_nh_offset",
            ),
        ),
        (
            "no VXLAN I flag",
            h,
            no_vxlan_flag,
            tunnel_opts(),
            VirtioHdrError::TunnelHeaders(
                "no VXLAN or Geneve header followed by an Ethernet header ending at inner_nh_offset",
            ),
        ),
        (
            "csum_start past the inner L4 header",
            VirtioNetHdr { csum_start: th + 4, ..h },
            frame.clone(),
            tunnel_opts(),
            VirtioHdrError::ChecksumStartNotL4 { start: th + 4, l4_offset: th as usize },
        ),
        (
            "TCPV4 inner type over inner IPv6",
            VirtioNetHdr { gso_type: GSO_UDP_TUNNEL_IPV4 | GSO_TCPV4, ..hi6 },
            frame_i6,
            tunnel_opts(),
            VirtioHdrError::ProtocolMismatch { gso_type: GsoType::TCPV4, found: "TCP over IPv6" },
        ),
        (
            "hdr_len beyond the frame",
            VirtioNetHdr { hdr_len: 200, ..h },
            frame[..150].to_vec(),
            tunnel_opts(),
            VirtioHdrError::HdrLenBeyondFrame { hdr_len: 200, frame_len: 150 },
        ),
    ];
    for (what, hdr, frame, opts, want) in rows {
        assert_eq!(hdr.to_meta(&frame, &opts), Err(want.clone()), "{what}");
        assert!(!want.reason().is_empty() && !want.to_string().is_empty());
    }
}

#[test]
fn a_small_tunnel_packet_keeps_its_inner_checksum_offsets() {
    let inner =
        Flow::new(FlowSpec::new(Transport::Tcp, false, 3)).superpacket(1400 * 2, 1400, TcpFlags::empty()).unwrap();
    let p = encapsulate(&inner, &TunnelSpec::new(TunnelKind::Vxlan, false)).unwrap();
    let frame = p.to_vec();
    let hdr = VirtioNetHdr::from_meta(&p.meta, &frame, false).unwrap();
    let big = VirtioNetHdr { gso_size: 4000, ..hdr };
    let got = big.to_meta(&frame, &tunnel_opts()).unwrap();
    assert!(!got.is_gso());
    assert_eq!(got.encap, p.meta.encap);
    assert_eq!(got.csum, p.meta.csum);
}

#[test]
fn tunnel_export_needs_offsets_and_a_partial_inner_checksum() {
    let (meta, _, frame) = vxlan4();
    let no_encap = OffloadMeta { encap: None, ..meta };
    assert_eq!(
        VirtioNetHdr::from_meta(&no_encap, &frame, false),
        Err(VirtioHdrError::TunnelMetaIncomplete("no encapsulation offsets"))
    );
    let complete = OffloadMeta { csum: ChecksumState::None, ..meta };
    assert_eq!(
        VirtioNetHdr::from_meta(&complete, &frame, false),
        Err(VirtioHdrError::TunnelMetaIncomplete("the inner checksum is not partial"))
    );
    let Encapsulation { inner_transport, .. } = meta.encap.unwrap();
    let elsewhere = OffloadMeta { csum: ChecksumState::Partial { start: inner_transport - 4, offset: 16 }, ..meta };
    assert!(matches!(VirtioNetHdr::from_meta(&elsewhere, &frame, false), Err(VirtioHdrError::TunnelMetaIncomplete(_))));
    // Raw IP (a TUN): offsets count from the IP header.
    let raw = meta.shifted(-14).unwrap();
    let hdr = VirtioNetHdr::from_meta_as(&raw, &frame[14..], Medium::Ip, false).unwrap();
    assert_eq!((hdr.outer_th_offset, hdr.gso_type), (20, GSO_UDP_TUNNEL_IPV4 | GSO_TCPV4));
    let opts = ImportOptions { medium: Medium::Ip, ..tunnel_opts() };
    assert_eq!(hdr.to_meta(&frame[14..], &opts).unwrap().encap, raw.encap);
}

#[test]
fn arbitrary_tunnel_headers_never_panic() {
    let (_, h, frame) = tunnel_handover(TunnelKind::Geneve, true, Transport::Udp, true, true, 12);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..20_000 {
        let r = next();
        let mut hdr = h;
        let pick = |bits: u64, base: u16| -> u16 {
            match bits & 3 {
                0 => base,
                1 => base.wrapping_add((bits >> 2) as u16 % 16).wrapping_sub(8),
                2 => (bits >> 2) as u16,
                _ => (bits >> 2) as u16 % 200,
            }
        };
        hdr.flags = (r & 0x0f) as u8;
        hdr.gso_type = if r & 0x10 != 0 { (r >> 5) as u8 } else { h.gso_type };
        hdr.outer_th_offset = pick(r >> 13, h.outer_th_offset);
        hdr.inner_nh_offset = pick(r >> 27, h.inner_nh_offset);
        hdr.csum_start = pick(r >> 41, h.csum_start);
        hdr.csum_offset = pick(r >> 55, h.csum_offset);
        hdr.gso_size = pick(next(), h.gso_size);
        hdr.hdr_len = pick(next(), h.hdr_len);
        let cut = (next() as usize) % (frame.len() + 1);
        let f = if r & (1 << 63) != 0 { &frame[..cut] } else { &frame[..] };
        let _ = hdr.to_meta(f, &tunnel_opts());
        let _ = hdr.to_meta(f, &ImportOptions { medium: Medium::Ip, ..tunnel_opts() });
    }
}
