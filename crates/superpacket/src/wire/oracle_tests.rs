//! Cross-checks against `etherparse` 0.21, used as an independent oracle:
//! frames built by our builders must be read identically by etherparse, and
//! frames built by etherparse (which computes its own checksums) must parse
//! and verify with our views.

use etherparse::{LinkExtSlice, NetSlice, PacketBuilder, SlicedPacket, TransportSlice, VlanId};
use proptest::collection::vec;
use proptest::prelude::*;

use super::proptests::{FrameSpec, L3Spec, L4Spec, frame_spec};
use super::*;

/// Compares etherparse's reading of `f` with ours.
fn compare(spec: Option<&FrameSpec>, f: &[u8]) -> std::result::Result<(), TestCaseError> {
    let ours = FrameHeaders::parse(f).map_err(|e| TestCaseError::fail(format!("ours: {e}")))?;
    let theirs = SlicedPacket::from_ethernet(f).map_err(|e| TestCaseError::fail(format!("etherparse: {e:?}")))?;
    // VLAN ids.
    let their_vids: Vec<u16> = theirs
        .link_exts
        .iter()
        .filter_map(|e| match e {
            LinkExtSlice::Vlan(v) => Some(v.vlan_identifier().value()),
            _ => None,
        })
        .collect();
    let our_vids: Vec<u16> = ours.vlans.iter().map(|t| t.vid).collect();
    prop_assert_eq!(our_vids, their_vids);
    // Network layer.
    let net = theirs.net.as_ref().ok_or_else(|| TestCaseError::fail("etherparse: no net"))?;
    let l3 = ours.l3_bytes(f);
    match net {
        NetSlice::Ipv4(s) => {
            prop_assert_eq!(ours.l3, L3Kind::Ipv4);
            let p = Ipv4Packet::new_checked(l3).unwrap();
            prop_assert_eq!(p.src_addr().octets(), s.header().source());
            prop_assert_eq!(p.dst_addr().octets(), s.header().destination());
            prop_assert_eq!(ours.l3_len, s.header().total_len() as usize);
            prop_assert_eq!(ours.l3_header_len, s.header().slice().len());
            prop_assert_eq!(ours.is_fragment, s.is_payload_fragmented());
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(p.checksum(), s.header().to_header().calc_header_checksum());
        }
        NetSlice::Ipv6(s) => {
            prop_assert_eq!(ours.l3, L3Kind::Ipv6);
            let p = Ipv6Packet::new_checked(l3).unwrap();
            prop_assert_eq!(p.src_bytes(), s.header().source());
            prop_assert_eq!(p.dst_bytes(), s.header().destination());
            prop_assert_eq!(p.flow_label(), s.header().flow_label().value());
            prop_assert_eq!(ours.l3_len, 40 + s.header().payload_length() as usize);
            prop_assert_eq!(ours.l3_header_len, 40 + s.extensions().slice().len());
            prop_assert_eq!(ours.is_fragment, s.is_payload_fragmented());
        }
        NetSlice::Arp(_) => return Err(TestCaseError::fail("unexpected ARP")),
    }
    let ip_payload = theirs.ip_payload().unwrap();
    prop_assert_eq!(ours.ip_protocol, Some(IpProtocol(ip_payload.ip_number.0)));
    if matches!(net, NetSlice::Ipv6(s) if s.header().payload_length() == 0) {
        // etherparse reads an IPv6 payload length of 0 as "the rest of the
        // slice" (its jumbogram reading); RFC 8200 gives an empty payload,
        // and what follows is Ethernet padding. So ours is empty and theirs
        // is exactly our padding.
        prop_assert_eq!(ours.l4_len(), 0);
        prop_assert_eq!(ip_payload.payload, &f[ours.l3_end()..]);
    } else {
        prop_assert_eq!(ours.l4_len(), ip_payload.payload.len());
    }
    prop_assert_eq!(ours.l2_padding, f.len() - ours.l3_end());
    if let Some(spec) = spec {
        prop_assert_eq!(ours.l2_padding, spec.pad);
    }
    // Transport layer (etherparse only decodes unfragmented payloads).
    let seg = ours.l4_bytes(f);
    match &theirs.transport {
        Some(TransportSlice::Tcp(t)) => {
            prop_assert_eq!(ours.l4, L4Kind::Tcp);
            let ours_t = TcpPacket::new_checked(seg).unwrap();
            prop_assert_eq!((ours_t.src_port(), ours_t.dst_port()), (t.source_port(), t.destination_port()));
            prop_assert_eq!(
                (ours_t.seq_number(), ours_t.ack_number()),
                (t.sequence_number(), t.acknowledgment_number())
            );
            prop_assert_eq!(ours.l4_header_len, t.header_slice().len());
            prop_assert_eq!(ours.payload_len, t.payload().len());
            prop_assert_eq!(ours_t.options(), t.options());
            prop_assert_eq!(
                (ours_t.syn(), ours_t.ack(), ours_t.fin(), ours_t.window()),
                (t.syn(), t.ack(), t.fin(), t.window_size())
            );
            prop_assert_eq!(ours_t.flags().contains(TcpFlags::NS), t.ns());
            prop_assert_eq!(ours_t.flags().contains(TcpFlags::CWR), t.cwr());
            // etherparse computes the checksum itself: ours must have written the same.
            let expected = match net {
                NetSlice::Ipv4(s) => t.calc_checksum_ipv4(s.header().source(), s.header().destination()).unwrap(),
                NetSlice::Ipv6(s) => t.calc_checksum_ipv6(s.header().source(), s.header().destination()).unwrap(),
                NetSlice::Arp(_) => unreachable!(),
            };
            prop_assert_eq!(ours_t.checksum(), expected);
        }
        Some(TransportSlice::Udp(u)) => {
            prop_assert_eq!(ours.l4, L4Kind::Udp);
            let ours_u = UdpPacket::new_checked(seg).unwrap();
            prop_assert_eq!(
                (ours_u.src_port(), ours_u.dst_port(), ours_u.len()),
                (u.source_port(), u.destination_port(), u.length())
            );
            prop_assert_eq!(ours.payload_len, u.payload().len());
            let expected = match net {
                NetSlice::Ipv4(s) => u
                    .to_header()
                    .calc_checksum_ipv4_raw(s.header().source(), s.header().destination(), u.payload())
                    .unwrap(),
                NetSlice::Ipv6(s) => u
                    .to_header()
                    .calc_checksum_ipv6_raw(s.header().source(), s.header().destination(), u.payload())
                    .unwrap(),
                NetSlice::Arp(_) => unreachable!(),
            };
            prop_assert_eq!(ours_u.checksum(), expected);
        }
        Some(TransportSlice::Icmpv4(i)) => {
            prop_assert_eq!(ours.l4, L4Kind::Icmpv4);
            prop_assert_eq!(ours.payload_len, i.payload().len());
            prop_assert!(Icmpv4Packet::new_checked(seg).unwrap().verify_checksum());
        }
        Some(TransportSlice::Icmpv6(i)) => {
            prop_assert_eq!(ours.l4, L4Kind::Icmpv6);
            prop_assert_eq!(ours.payload_len, i.payload().len());
        }
        Some(TransportSlice::Igmp(_)) | None => {
            prop_assert!(
                !matches!(ours.l4, L4Kind::Tcp | L4Kind::Udp | L4Kind::Icmpv4 | L4Kind::Icmpv6)
                    || ours.is_fragment
                    || ours.fragment.is_some_and(|f| f.offset != 0)
                    || matches!(ours.l3, L3Kind::Ipv4) && ours.fragment.is_some()
            );
        }
    }
    Ok(())
}

/// An etherparse-built frame: VLAN choice, IP version, transport choice.
fn etherparse_frame(
    vlan: u8,
    vids: (u16, u16),
    v6: bool,
    l4: u8,
    ports: (u16, u16),
    seq: u32,
    payload: &[u8],
) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    macro_rules! finish {
        ($step:expr) => {{
            let ip = if v6 {
                $step.ipv6(
                    [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                    64,
                )
            } else {
                $step.ipv4([10, 0, 0, 1], [192, 168, 1, 2], 64)
            };
            let mut out = Vec::new();
            match l4 {
                0 => ip.tcp(ports.0, ports.1, seq, 1024).ack(seq ^ 0x5555).psh().write(&mut out, payload).unwrap(),
                1 => ip.udp(ports.0, ports.1).write(&mut out, payload).unwrap(),
                _ if v6 => ip.icmpv6_echo_request(ports.0, ports.1).write(&mut out, payload).unwrap(),
                _ => ip.icmpv4_echo_request(ports.0, ports.1).write(&mut out, payload).unwrap(),
            }
            out
        }};
    }
    let v0 = VlanId::try_new(vids.0).unwrap();
    let v1 = VlanId::try_new(vids.1).unwrap();
    match vlan {
        0 => finish!(b),
        1 => finish!(b.single_vlan(v0)),
        _ => finish!(b.double_vlan(v0, v1)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Our builders -> etherparse agrees (etherparse holds at most 3 tags).
    #[test]
    fn ours_read_by_etherparse(spec in frame_spec(3)) {
        let f = spec.build();
        compare(Some(&spec), &f)?;
        // Fields etherparse does not summarise: ports/addresses from the spec.
        let h = FrameHeaders::parse(&f).unwrap();
        if let (L3Spec::V4(r), L3Kind::Ipv4) = (&spec.l3, h.l3) {
            prop_assert_eq!(Ipv4Packet::new_checked(h.l3_bytes(&f)).unwrap().src_addr(), r.src_addr);
        }
        if let (L4Spec::Udp(s, d, _), L4Kind::Udp) = (&spec.l4, h.l4) {
            let u = UdpPacket::new_checked(h.l4_bytes(&f)).unwrap();
            prop_assert_eq!((u.src_port(), u.dst_port()), (*s, *d));
        }
    }

    /// etherparse builders -> we agree, and our checksum verification accepts
    /// etherparse's checksums.
    #[test]
    fn etherparse_read_by_ours(
        vlan in 0u8..3,
        vids in (0u16..4096, 0u16..4096),
        v6 in any::<bool>(),
        l4 in 0u8..3,
        ports in any::<(u16, u16)>(),
        seq in any::<u32>(),
        payload in vec(any::<u8>(), 0..300),
        pad in prop_oneof![3 => Just(0usize), 1 => 1usize..30],
    ) {
        let mut f = etherparse_frame(vlan, vids, v6, l4, ports, seq, &payload);
        f.resize(f.len() + pad, 0);
        compare(None, &f)?;
        let h = FrameHeaders::parse(&f).unwrap();
        prop_assert_eq!(h.vlans.len(), vlan as usize);
        prop_assert_eq!(h.payload_bytes(&f), &payload[..]);
        prop_assert_eq!(h.l2_padding, pad);
        let l3 = h.l3_bytes(&f);
        let seg = h.l4_bytes(&f);
        let (pseudo, ipv) = if v6 {
            let p = Ipv6Packet::new_checked(l3).unwrap();
            (p.pseudo_header_sum(h.ip_protocol.unwrap(), seg.len() as u32), IpVersion::V6)
        } else {
            let p = Ipv4Packet::new_checked(l3).unwrap();
            prop_assert!(p.verify_checksum());
            (p.pseudo_header_sum(), IpVersion::V4)
        };
        match h.l4 {
            L4Kind::Tcp => {
                let t = TcpPacket::new_checked(seg).unwrap();
                prop_assert!(t.verify_checksum(pseudo));
                prop_assert_eq!((t.src_port(), t.dst_port(), t.seq_number()), (ports.0, ports.1, seq));
                prop_assert!(t.flags().contains(TcpFlags::ACK | TcpFlags::PSH));
            }
            L4Kind::Udp => {
                let u = UdpPacket::new_checked(seg).unwrap();
                prop_assert_eq!(u.verify_checksum(pseudo, ipv), UdpChecksum::Valid);
                prop_assert_eq!(UdpRepr::parse(&u).unwrap(), UdpRepr { src_port: ports.0, dst_port: ports.1, payload_len: payload.len() });
            }
            L4Kind::Icmpv4 => {
                let i = Icmpv4Packet::new_checked(seg).unwrap();
                prop_assert!(i.verify_checksum());
                prop_assert_eq!(Icmpv4Repr::parse(&i).unwrap(), Icmpv4Repr::EchoRequest { ident: ports.0, seq_no: ports.1, data: &payload });
            }
            L4Kind::Icmpv6 => {
                let p = Ipv6Packet::new_checked(l3).unwrap();
                let i = Icmpv6Packet::new_checked(seg).unwrap();
                prop_assert!(i.verify_checksum(&p.src_addr(), &p.dst_addr()));
                prop_assert_eq!(Icmpv6Repr::parse(&i).unwrap(), Icmpv6Repr::EchoRequest { ident: ports.0, seq_no: ports.1, data: &payload });
            }
            other => return Err(TestCaseError::fail(format!("unexpected {other:?}"))),
        }
    }
}

#[test]
fn known_syn_agrees_with_etherparse() {
    let ip = &super::tcp::tests::SYN_IPV4;
    let s = SlicedPacket::from_ip(ip).unwrap();
    let Some(TransportSlice::Tcp(t)) = s.transport else { panic!("no tcp") };
    assert_eq!(t.calc_checksum_ipv4([192, 168, 122, 1], [192, 168, 122, 80]).unwrap(), 0xa458);
    let h = FrameHeaders::parse_ip(ip).unwrap();
    assert_eq!((h.l4, h.l4_header_len, h.payload_len), (L4Kind::Tcp, 40, 0));
}
