//! Table-driven tests of the frame validation rules: one row per rule, each a
//! frame built by `traffic`, a corruption, and the problem kinds expected.

use super::*;
use crate::packet::GsoType;
use crate::traffic::{Flow, FlowSpec, Transport};
use crate::wire::TcpFlags;

fn frame(transport: Transport, ipv6: bool, vlans: &[(u16, u16)], payload: usize) -> Vec<u8> {
    let spec = FlowSpec::new(transport, ipv6, 7).with_vlans(vlans).unwrap();
    Flow::new(spec).frame(payload, TcpFlags::PSH).unwrap()
}

fn kinds(frame: &[u8], meta: &OffloadMeta, snapped: bool) -> Vec<ProblemKind> {
    let mut out = Vec::new();
    validate_frame(frame, Medium::Ethernet, meta, snapped, &mut out);
    out.iter().map(|p| p.kind).collect()
}

fn flip(mut f: Vec<u8>, at: usize) -> Vec<u8> {
    f[at] ^= 0x01;
    f
}

#[test]
fn good_frames_have_no_problems() {
    for transport in [Transport::Tcp, Transport::Udp] {
        for ipv6 in [false, true] {
            for vlans in [&[][..], &[(0x8100, 5)][..], &[(0x88A8, 5), (0x8100, 6)][..]] {
                for payload in [0, 1, 1448, 9000] {
                    let f = frame(transport, ipv6, vlans, payload);
                    assert_eq!(kinds(&f, &OffloadMeta::default(), false), vec![], "{transport:?} v6={ipv6} {vlans:?}");
                }
            }
        }
    }
}

#[test]
fn each_rule_finds_its_problem() {
    let tcp4 = frame(Transport::Tcp, false, &[], 100);
    let udp4 = frame(Transport::Udp, false, &[], 100);
    let udp6 = frame(Transport::Udp, true, &[], 100);
    let tcp6_qinq = frame(Transport::Tcp, true, &[(0x88A8, 1), (0x8100, 2)], 100);
    let none = OffloadMeta::default();
    let cases: Vec<(&str, Vec<u8>, OffloadMeta, Vec<ProblemKind>)> = vec![
        ("ipv4 header checksum", flip(tcp4.clone(), 14 + 10), none, vec![ProblemKind::Ipv4HeaderChecksum]),
        ("ipv4 ttl changed", flip(tcp4.clone(), 14 + 8), none, vec![ProblemKind::Ipv4HeaderChecksum]),
        ("tcp payload byte", flip(tcp4.clone(), 120), none, vec![ProblemKind::TcpChecksum]),
        ("tcp checksum field", flip(tcp4.clone(), 34 + 16), none, vec![ProblemKind::TcpChecksum]),
        ("tcp over ipv6 in qinq", flip(tcp6_qinq.clone(), 140), none, vec![ProblemKind::TcpChecksum]),
        ("udp payload byte", flip(udp4.clone(), 60), none, vec![ProblemKind::UdpChecksum]),
        (
            "udp ipv6 zero checksum",
            {
                let mut f = udp6.clone();
                f[54 + 6] = 0;
                f[54 + 7] = 0;
                f
            },
            none,
            vec![ProblemKind::UdpChecksum],
        ),
        ("ipv4 truncated", tcp4[..60].to_vec(), none, vec![ProblemKind::Truncated]),
        (
            "ipv4 ihl 4",
            {
                let mut f = tcp4.clone();
                f[14] = 0x44;
                f
            },
            none,
            vec![ProblemKind::Malformed],
        ),
        (
            "tcp data offset 4",
            {
                let mut f = tcp4.clone();
                f[34 + 12] = 0x40;
                f
            },
            none,
            vec![ProblemKind::Malformed],
        ),
        (
            "udp length too long",
            {
                let mut f = udp4.clone();
                f[34 + 4] = 0x10;
                f
            },
            none,
            vec![ProblemKind::Truncated],
        ),
        ("ethernet only 10 bytes", tcp4[..10].to_vec(), none, vec![ProblemKind::Truncated]),
        (
            "partial field not the pseudo sum",
            tcp4.clone(),
            OffloadMeta { csum: ChecksumState::Partial { start: 34, offset: 16 }, ..none },
            vec![ProblemKind::PartialChecksum],
        ),
        (
            "partial start not l4",
            tcp4.clone(),
            OffloadMeta { csum: ChecksumState::Partial { start: 14, offset: 16 }, ..none },
            vec![ProblemKind::PartialChecksum],
        ),
        (
            "gso type of the other family",
            tcp4.clone(),
            OffloadMeta { gso_type: GsoType::TCPV6, gso_size: 10, gso_segs: 10, ..none },
            vec![ProblemKind::GsoMismatch],
        ),
        (
            "gso_size not below payload",
            tcp4.clone(),
            OffloadMeta { gso_type: GsoType::TCPV4, gso_size: 100, gso_segs: 1, ..none },
            vec![ProblemKind::GsoSize],
        ),
        (
            "gso_segs wrong",
            tcp4.clone(),
            OffloadMeta { gso_type: GsoType::TCPV4, gso_size: 30, gso_segs: 3, ..none },
            vec![ProblemKind::GsoSegs],
        ),
        (
            "two problems in one frame",
            flip(flip(tcp4.clone(), 14 + 10), 120),
            none,
            vec![ProblemKind::Ipv4HeaderChecksum, ProblemKind::TcpChecksum],
        ),
    ];
    for (name, f, meta, want) in cases {
        assert_eq!(kinds(&f, &meta, false), want, "{name}");
    }
}

#[test]
fn superpackets_with_partial_checksums_validate() {
    for (transport, ipv6, vlans) in [
        (Transport::Tcp, false, &[][..]),
        (Transport::Tcp, true, &[(0x8100, 9)][..]),
        (Transport::Udp, false, &[(0x88A8, 9), (0x8100, 10)][..]),
        (Transport::Udp, true, &[][..]),
    ] {
        let spec = FlowSpec::new(transport, ipv6, 3).with_vlans(vlans).unwrap();
        let p = Flow::new(spec).superpacket(60_000, 1400, TcpFlags::empty()).unwrap();
        let f = p.to_vec();
        assert_eq!(kinds(&f, &p.meta, false), vec![], "{transport:?} v6={ipv6}");
        // Completing the checksum gives a frame that is valid without metadata.
        let mut done = f.clone();
        let ChecksumState::Partial { start, offset } = p.meta.csum else { panic!("not partial") };
        crate::csum::complete_partial(&mut done, start as usize, offset as usize, transport == Transport::Udp).unwrap();
        let plain = OffloadMeta { csum: ChecksumState::None, ..p.meta };
        assert_eq!(kinds(&done, &plain, false), vec![]);
        // The partial frame read as a complete one has a bad checksum.
        let want = if transport == Transport::Tcp { ProblemKind::TcpChecksum } else { ProblemKind::UdpChecksum };
        assert_eq!(kinds(&f, &plain, false), vec![want]);
    }
}

#[test]
fn snapped_frames_are_checked_as_far_as_captured() {
    let f = frame(Transport::Tcp, false, &[], 1000);
    assert_eq!(kinds(&f[..200], &OffloadMeta::default(), true), vec![]);
    assert_eq!(kinds(&f[..20], &OffloadMeta::default(), true), vec![]);
    assert_eq!(
        kinds(&flip(f.clone(), 14 + 10)[..200], &OffloadMeta::default(), true),
        vec![ProblemKind::Ipv4HeaderChecksum]
    );
}

#[test]
fn padding_fragments_and_raw_ip() {
    let mut f = frame(Transport::Udp, false, &[], 4);
    f.resize(60, 0); // Ethernet minimum frame: padding is fine
    assert_eq!(kinds(&f, &OffloadMeta::default(), false), vec![]);
    let tcp = frame(Transport::Tcp, true, &[], 64);
    let mut out = Vec::new();
    validate_frame(&tcp[14..], Medium::Ip, &OffloadMeta::default(), false, &mut out);
    assert!(out.is_empty(), "{out:?}");
    // A fragment's L4 checksum is not checked (it covers the whole datagram).
    let mut frag = frame(Transport::Udp, false, &[], 100);
    frag[14 + 6] |= 0x20; // MF
    frag[14 + 10] = 0;
    frag[14 + 11] = 0;
    let c = crate::csum::checksum(&frag[14..34]);
    frag[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
    frag[60] ^= 0xFF;
    assert_eq!(kinds(&frag, &OffloadMeta::default(), false), vec![]);
}

#[test]
fn problem_names_are_stable() {
    assert_eq!(ProblemKind::Ipv4HeaderChecksum.name(), "ipv4-header-checksum");
    assert_eq!(ProblemKind::TcpChecksum.to_string(), "tcp-checksum");
    let p = Problem { kind: ProblemKind::GsoSegs, detail: "x".into() };
    assert_eq!(p.to_string(), "gso-segs: x");
}
