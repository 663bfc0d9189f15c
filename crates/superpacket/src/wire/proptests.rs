//! Property tests for every parser: random bytes and mutated valid frames
//! must never panic; every repr round-trips through emit and parse; the
//! frame generator used here (and by `oracle_tests`) is built from our own
//! builders.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::csum;

use super::exercise::{check_headers, exercise_all};

// ---------------------------------------------------------------------------
// Frame generator (shared with oracle_tests).

/// An IPv6 extension header to put in a generated packet.
#[derive(Debug, Clone)]
pub(crate) enum ExtSpec {
    HopByHop(Vec<u8>),
    DestOpts(Vec<u8>),
    Routing { routing_type: u8, segments_left: u8, data: Vec<u8> },
    Fragment { offset: u16, more: bool, ident: u32 },
}

impl ExtSpec {
    fn proto(&self) -> IpProtocol {
        match self {
            ExtSpec::HopByHop(_) => IpProtocol::HOP_BY_HOP,
            ExtSpec::DestOpts(_) => IpProtocol::IPV6_DEST_OPTS,
            ExtSpec::Routing { .. } => IpProtocol::IPV6_ROUTING,
            ExtSpec::Fragment { .. } => IpProtocol::IPV6_FRAGMENT,
        }
    }

    fn emit(&self, next: IpProtocol, out: &mut Vec<u8>) {
        let mut buf = [0u8; 512];
        let n = match self {
            ExtSpec::HopByHop(o) | ExtSpec::DestOpts(o) => {
                Ipv6OptionsRepr { next_header: next, options: o }.emit(&mut buf).unwrap()
            }
            ExtSpec::Routing { routing_type, segments_left, data } => {
                Ipv6RoutingRepr { next_header: next, routing_type: *routing_type, segments_left: *segments_left, data }
                    .emit(&mut buf)
                    .unwrap()
            }
            ExtSpec::Fragment { offset, more, ident } => Ipv6FragmentRepr {
                next_header: next,
                info: FragmentInfo { offset: *offset, more_fragments: *more, ident: *ident },
            }
            .emit(&mut buf)
            .unwrap(),
        };
        out.extend_from_slice(&buf[..n]);
    }
}

/// The transport part of a generated packet.
#[derive(Debug, Clone)]
pub(crate) enum L4Spec {
    Tcp(TcpRepr, Vec<u8>),
    Udp(u16, u16, Vec<u8>),
    /// ICMP echo request (v4 or v6 according to the IP version).
    Echo(u16, u16, Vec<u8>),
    Raw(u8, Vec<u8>),
}

/// The network part of a generated packet.
#[derive(Debug, Clone)]
pub(crate) enum L3Spec {
    V4(Ipv4Repr),
    V6(Ipv6Repr, Vec<ExtSpec>),
}

/// A whole generated frame.
#[derive(Debug, Clone)]
pub(crate) struct FrameSpec {
    pub src: MacAddr,
    pub dst: MacAddr,
    pub vlans: Vec<VlanTag>,
    pub l3: L3Spec,
    pub l4: L4Spec,
    pub pad: usize,
}

impl FrameSpec {
    pub(crate) fn l4_proto(&self) -> IpProtocol {
        match (&self.l4, &self.l3) {
            (L4Spec::Tcp(..), _) => IpProtocol::TCP,
            (L4Spec::Udp(..), _) => IpProtocol::UDP,
            (L4Spec::Echo(..), L3Spec::V4(_)) => IpProtocol::ICMP,
            (L4Spec::Echo(..), L3Spec::V6(..)) => IpProtocol::ICMPV6,
            (L4Spec::Raw(p, _), _) => IpProtocol(*p),
        }
    }

    pub(crate) fn is_fragment(&self) -> bool {
        match &self.l3 {
            L3Spec::V4(r) => r.more_frags || r.frag_offset != 0,
            L3Spec::V6(_, ext) => {
                ext.iter().any(|e| matches!(e, ExtSpec::Fragment { offset, more, .. } if *offset != 0 || *more))
            }
        }
    }

    /// L4 header length as the spec intends.
    pub(crate) fn l4_header_len(&self) -> usize {
        match &self.l4 {
            L4Spec::Tcp(r, _) => r.header_len(),
            L4Spec::Udp(..) | L4Spec::Echo(..) => 8,
            L4Spec::Raw(..) => 0,
        }
    }

    pub(crate) fn payload(&self) -> &[u8] {
        match &self.l4 {
            L4Spec::Tcp(_, p) | L4Spec::Udp(_, _, p) | L4Spec::Echo(_, _, p) | L4Spec::Raw(_, p) => p,
        }
    }

    /// Builds the frame with every checksum filled.
    pub(crate) fn build(&self) -> Vec<u8> {
        let proto = self.l4_proto();
        let l4_len = self.l4_header_len() + self.payload().len();
        let (src4, dst4, src6, dst6) = match &self.l3 {
            L3Spec::V4(r) => (r.src_addr.octets(), r.dst_addr.octets(), [0; 16], [0; 16]),
            L3Spec::V6(r, _) => ([0; 4], [0; 4], r.src_addr.octets(), r.dst_addr.octets()),
        };
        let v6 = matches!(self.l3, L3Spec::V6(..));
        let pseudo = if v6 {
            csum::pseudo_header_v6(src6, dst6, proto.0, l4_len as u32)
        } else {
            csum::pseudo_header_v4(src4, dst4, proto.0, l4_len as u16)
        };
        let mut l4 = vec![0u8; l4_len];
        match &self.l4 {
            L4Spec::Tcp(r, p) => {
                let mut t = TcpPacket::new_unchecked(&mut l4[..]);
                r.emit(&mut t).unwrap();
                t.payload_mut().copy_from_slice(p);
                t.fill_checksum(pseudo);
            }
            L4Spec::Udp(s, d, p) => {
                let mut u = UdpPacket::new_unchecked(&mut l4[..]);
                UdpRepr { src_port: *s, dst_port: *d, payload_len: p.len() }.emit(&mut u).unwrap();
                u.payload_mut().copy_from_slice(p);
                u.fill_checksum(pseudo);
            }
            L4Spec::Echo(ident, seq_no, data) => {
                if v6 {
                    Icmpv6Repr::EchoRequest { ident: *ident, seq_no: *seq_no, data }
                        .emit(
                            &Ipv6Addr::from(src6),
                            &Ipv6Addr::from(dst6),
                            &mut Icmpv6Packet::new_unchecked(&mut l4[..]),
                        )
                        .unwrap();
                } else {
                    Icmpv4Repr::EchoRequest { ident: *ident, seq_no: *seq_no, data }
                        .emit(&mut Icmpv4Packet::new_unchecked(&mut l4[..]))
                        .unwrap();
                }
            }
            L4Spec::Raw(_, p) => l4.copy_from_slice(p),
        }
        let mut l3 = Vec::new();
        match &self.l3 {
            L3Spec::V4(r) => {
                let r = Ipv4Repr { protocol: proto, payload_len: l4_len, ..*r };
                l3.resize(r.buffer_len(), 0);
                r.emit(&mut Ipv4Packet::new_unchecked(&mut l3[..])).unwrap();
                let hl = r.header_len();
                l3[hl..].copy_from_slice(&l4);
            }
            L3Spec::V6(r, ext) => {
                let mut exts = Vec::new();
                for (i, e) in ext.iter().enumerate() {
                    let next = ext.get(i + 1).map_or(proto, |n| n.proto());
                    e.emit(next, &mut exts);
                }
                let first = ext.first().map_or(proto, |e| e.proto());
                let r = Ipv6Repr { next_header: first, payload_len: exts.len() + l4_len, ..*r };
                l3.resize(40, 0);
                r.emit(&mut Ipv6Packet::new_unchecked(&mut l3[..])).unwrap();
                l3.extend_from_slice(&exts);
                l3.extend_from_slice(&l4);
            }
        }
        let eth = EthernetRepr {
            dst_addr: self.dst,
            src_addr: self.src,
            vlans: VlanStack::from_tags(&self.vlans).unwrap(),
            ethertype: if v6 { EtherType::IPV6 } else { EtherType::IPV4 },
        };
        let mut f = vec![0u8; eth.buffer_len(l3.len()) + self.pad];
        eth.emit(&mut EthernetFrame::new_unchecked(&mut f[..])).unwrap();
        f[eth.header_len()..eth.header_len() + l3.len()].copy_from_slice(&l3);
        f
    }
}

pub(crate) fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

pub(crate) fn vlan_tag() -> impl Strategy<Value = VlanTag> {
    (
        prop_oneof![Just(EtherType::VLAN), Just(EtherType::QINQ), Just(EtherType::QINQ_LEGACY)],
        0u8..8,
        any::<bool>(),
        0u16..4096,
    )
        .prop_map(|(tpid, pcp, dei, vid)| VlanTag { tpid, pcp, dei, vid })
}

fn ipv4_options() -> impl Strategy<Value = Ipv4Options> {
    (0usize..=10).prop_flat_map(|words| vec(any::<u8>(), words * 4)).prop_map(|v| Ipv4Options::new(&v).unwrap())
}

pub(crate) fn ipv4_repr() -> impl Strategy<Value = Ipv4Repr> {
    (
        any::<[u8; 4]>(),
        any::<[u8; 4]>(),
        any::<u8>(),
        (any::<u8>(), any::<u8>(), any::<u16>()),
        (any::<bool>(), prop_oneof![3 => Just((false, 0u16)), 1 => (any::<bool>(), 0u16..8192)]),
        ipv4_options(),
        0usize..1500,
    )
        .prop_map(|(s, d, proto, (ttl, tos, ident), (df, (mf, off)), options, payload_len)| Ipv4Repr {
            src_addr: s.into(),
            dst_addr: d.into(),
            protocol: IpProtocol(proto),
            payload_len,
            ttl,
            tos,
            ident,
            dont_frag: df,
            more_frags: mf,
            frag_offset: off * 8,
            options,
        })
}

pub(crate) fn ipv6_repr() -> impl Strategy<Value = Ipv6Repr> {
    (any::<[u8; 16]>(), any::<[u8; 16]>(), any::<u8>(), 0usize..65536, any::<u8>(), any::<u8>(), 0u32..(1 << 20))
        .prop_map(|(s, d, nh, payload_len, hop_limit, traffic_class, flow_label)| Ipv6Repr {
            src_addr: s.into(),
            dst_addr: d.into(),
            next_header: IpProtocol(nh),
            payload_len,
            hop_limit,
            traffic_class,
            flow_label,
        })
}

/// Options bytes whose header needs no padding (length 8k + 6).
fn opts_bytes() -> impl Strategy<Value = Vec<u8>> {
    (0usize..3).prop_flat_map(|k| vec(any::<u8>(), 8 * k + 6)).prop_map(|mut v| {
        // Make them valid TLVs: one PadN covering everything.
        v[0] = 1;
        v[1] = (v.len() - 2) as u8;
        v
    })
}

/// An etherparse-compatible extension-header chain: [HBH] [DestOpts]
/// [Routing] [Fragment]; a non-first fragment's header comes last.
pub(crate) fn ext_chain() -> impl Strategy<Value = Vec<ExtSpec>> {
    (
        proptest::option::of(opts_bytes()),
        proptest::option::of(opts_bytes()),
        proptest::option::of((any::<u8>(), any::<u8>(), (0usize..3).prop_flat_map(|k| vec(any::<u8>(), 8 * k + 4)))),
        proptest::option::of((prop_oneof![Just(0u16), (1u16..8192).prop_map(|o| o * 8)], any::<bool>(), any::<u32>())),
    )
        .prop_map(|(hbh, dst, rt, frag)| {
            let mut v = Vec::new();
            if let Some(o) = hbh {
                v.push(ExtSpec::HopByHop(o));
            }
            if let Some(o) = dst {
                v.push(ExtSpec::DestOpts(o));
            }
            if let Some((routing_type, segments_left, data)) = rt {
                v.push(ExtSpec::Routing { routing_type, segments_left, data });
            }
            if let Some((offset, more, ident)) = frag {
                v.push(ExtSpec::Fragment { offset, more, ident });
            }
            v
        })
}

pub(crate) fn tcp_options() -> impl Strategy<Value = TcpOptionsRepr> {
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        proptest::option::of(any::<(u32, u32)>()),
        vec(any::<(u32, u32)>(), 0..=4),
    )
        .prop_map(|(mss, window_scale, sack_permitted, timestamp, sack)| TcpOptionsRepr {
            mss,
            window_scale,
            sack_permitted,
            timestamp,
            sack: SackBlocks::new(&sack).unwrap(),
        })
        .prop_filter("options fit in 40 bytes", |o| o.len() <= 40)
}

pub(crate) fn tcp_repr() -> impl Strategy<Value = TcpRepr> {
    (any::<(u16, u16, u32, u32)>(), 0u16..0x1000, any::<(u16, u16)>(), tcp_options()).prop_map(
        |((src_port, dst_port, seq_number, ack_number), flags, (window, urgent_ptr), options)| TcpRepr {
            src_port,
            dst_port,
            seq_number,
            ack_number,
            flags: TcpFlags::from_bits_truncate(flags),
            window,
            urgent_ptr,
            options,
        },
    )
}

fn l4_spec() -> impl Strategy<Value = L4Spec> {
    prop_oneof![
        3 => (tcp_repr(), vec(any::<u8>(), 0..200)).prop_map(|(r, p)| L4Spec::Tcp(r, p)),
        2 => (any::<u16>(), any::<u16>(), vec(any::<u8>(), 0..200)).prop_map(|(s, d, p)| L4Spec::Udp(s, d, p)),
        1 => (any::<u16>(), any::<u16>(), vec(any::<u8>(), 0..64)).prop_map(|(i, s, p)| L4Spec::Echo(i, s, p)),
        1 => (prop_oneof![Just(47u8), Just(132u8), Just(253u8)], vec(any::<u8>(), 0..64)).prop_map(|(p, b)| L4Spec::Raw(p, b)),
    ]
}

/// A random valid frame with at most `max_vlans` tags.
pub(crate) fn frame_spec(max_vlans: usize) -> impl Strategy<Value = FrameSpec> {
    let l3 =
        prop_oneof![ipv4_repr().prop_map(L3Spec::V4), (ipv6_repr(), ext_chain()).prop_map(|(r, e)| L3Spec::V6(r, e)),];
    (mac(), mac(), vec(vlan_tag(), 0..=max_vlans), l3, l4_spec(), prop_oneof![3 => Just(0usize), 1 => 1usize..40])
        .prop_map(|(src, dst, vlans, l3, l4, pad)| FrameSpec { src, dst, vlans, l3, l4, pad })
}

// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes_never_panic(b in vec(any::<u8>(), 0..160)) {
        exercise_all(&b);
    }

    #[test]
    fn random_frames_with_ip_ethertype_never_panic(tags in 0usize..3, v6 in any::<bool>(), b in vec(any::<u8>(), 0..160)) {
        // Random bytes behind a plausible L2 header reach the deeper parsers.
        let mut f = vec![0u8; 12];
        for _ in 0..tags {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        }
        f.extend_from_slice(if v6 { &[0x86, 0xdd, 0x60] } else { &[0x08, 0x00, 0x45] });
        f.extend_from_slice(&b);
        exercise_all(&f);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn generated_frames_parse_as_specified(spec in frame_spec(MAX_VLAN_TAGS)) {
        let f = spec.build();
        let h = FrameHeaders::parse(&f).unwrap();
        check_headers(&h, &f);
        prop_assert_eq!(h.vlans.as_slice(), &spec.vlans[..]);
        prop_assert_eq!(h.l3_offset, 14 + 4 * spec.vlans.len());
        prop_assert_eq!(h.l2_padding, spec.pad);
        prop_assert_eq!(h.ip_protocol, Some(spec.l4_proto()));
        prop_assert_eq!(h.is_fragment, spec.is_fragment());
        let first = h.fragment.is_none_or(|f| f.offset == 0);
        if first {
            prop_assert_eq!(h.l4_header_len, spec.l4_header_len());
            prop_assert_eq!(h.payload_bytes(&f), spec.payload());
            // Checksums verify with our own helpers.
            let seg = h.l4_bytes(&f);
            match (h.l3, h.l4) {
                (L3Kind::Ipv4, L4Kind::Tcp) | (L3Kind::Ipv4, L4Kind::Udp) => {
                    let ip = Ipv4Packet::new_checked(h.l3_bytes(&f)).unwrap();
                    prop_assert!(ip.verify_checksum());
                    if h.l4 == L4Kind::Tcp {
                        prop_assert!(TcpPacket::new_checked(seg).unwrap().verify_checksum(ip.pseudo_header_sum()));
                    } else {
                        let u = UdpPacket::new_checked(seg).unwrap();
                        prop_assert_eq!(u.verify_checksum(ip.pseudo_header_sum(), IpVersion::V4), UdpChecksum::Valid);
                    }
                }
                (L3Kind::Ipv6, L4Kind::Tcp) => {
                    let ip = Ipv6Packet::new_checked(h.l3_bytes(&f)).unwrap();
                    let ph = ip.pseudo_header_sum(IpProtocol::TCP, seg.len() as u32);
                    prop_assert!(TcpPacket::new_checked(seg).unwrap().verify_checksum(ph));
                }
                (L3Kind::Ipv4, L4Kind::Icmpv4) => prop_assert!(Icmpv4Packet::new_checked(seg).unwrap().verify_checksum()),
                (L3Kind::Ipv6, L4Kind::Icmpv6) => {
                    let ip = Ipv6Packet::new_checked(h.l3_bytes(&f)).unwrap();
                    prop_assert!(Icmpv6Packet::new_checked(seg).unwrap().verify_checksum(&ip.src_addr(), &ip.dst_addr()));
                }
                _ => {}
            }
        } else {
            prop_assert_eq!(h.l4, L4Kind::None);
        }
        // The same packet from the IP header on.
        let p = FrameHeaders::parse_ip(&f[h.l3_offset..]).unwrap();
        prop_assert_eq!(p.l4_offset + h.l3_offset, h.l4_offset);
        prop_assert_eq!(p.payload_len, h.payload_len);
    }

    #[test]
    fn mutated_frames_never_panic(
        spec in frame_spec(4),
        muts in vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut f = spec.build();
        let h = FrameHeaders::parse(&f).unwrap();
        for (i, v) in muts {
            let i = i.index(f.len());
            f[i] = v;
        }
        if do_cut {
            f.truncate(cut.index(f.len() + 1));
        }
        exercise_all(&f);
        for off in [h.l3_offset, h.l4_offset, h.payload_offset] {
            if off <= f.len() {
                exercise_all(&f[off..]);
            }
        }
    }

    #[test]
    fn ethernet_round_trip(dst in mac(), src in mac(), tags in vec(vlan_tag(), 0..=MAX_VLAN_TAGS), et in 0x0600u16..) {
        prop_assume!(!EtherType(et).is_vlan_tpid());
        let r = EthernetRepr { dst_addr: dst, src_addr: src, vlans: VlanStack::from_tags(&tags).unwrap(), ethertype: EtherType(et) };
        let mut b = vec![0u8; r.buffer_len(0)];
        r.emit(&mut EthernetFrame::new_unchecked(&mut b[..])).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn arp_round_trip(op in any::<u16>(), sm in mac(), si in any::<[u8; 4]>(), tm in mac(), ti in any::<[u8; 4]>()) {
        let r = ArpRepr {
            operation: ArpOperation::from_u16(op),
            source_hardware_addr: sm,
            source_protocol_addr: Ipv4Addr::from(si),
            target_hardware_addr: tm,
            target_protocol_addr: Ipv4Addr::from(ti),
        };
        let mut b = [0u8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut b[..])).unwrap();
        prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv4_round_trip(r in ipv4_repr()) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv4Packet::new_unchecked(&mut b[..])).unwrap();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn ipv6_round_trip(r in ipv6_repr(), ext in ext_chain()) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Ipv6Packet::new_unchecked(&mut b[..])).unwrap();
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
        // Each extension header round-trips through its own repr.
        for e in ext {
            let mut out = Vec::new();
            e.emit(IpProtocol::TCP, &mut out);
            match e {
                ExtSpec::HopByHop(o) | ExtSpec::DestOpts(o) => {
                    let h = Ipv6OptionsHeader::new_checked(&out[..]).unwrap();
                    prop_assert_eq!(Ipv6OptionsRepr::parse(&h).unwrap(), Ipv6OptionsRepr { next_header: IpProtocol::TCP, options: &o });
                    prop_assert!(h.iter_options().all(|o| o.is_ok()));
                }
                ExtSpec::Routing { routing_type, segments_left, data } => {
                    let h = Ipv6RoutingHeader::new_checked(&out[..]).unwrap();
                    prop_assert_eq!(
                        Ipv6RoutingRepr::parse(&h).unwrap(),
                        Ipv6RoutingRepr { next_header: IpProtocol::TCP, routing_type, segments_left, data: &data }
                    );
                }
                ExtSpec::Fragment { offset, more, ident } => {
                    let h = Ipv6FragmentHeader::new_checked(&out[..]).unwrap();
                    prop_assert_eq!(h.fragment_info(), FragmentInfo { offset, more_fragments: more, ident });
                }
            }
        }
    }

    #[test]
    fn tcp_round_trip(r in tcp_repr(), payload in vec(any::<u8>(), 0..100), ph in any::<u16>()) {
        let mut b = vec![0u8; r.buffer_len(payload.len())];
        let mut t = TcpPacket::new_unchecked(&mut b[..]);
        r.emit(&mut t).unwrap();
        t.payload_mut().copy_from_slice(&payload);
        t.fill_checksum(ph);
        let t = TcpPacket::new_checked(&b[..]).unwrap();
        prop_assert!(t.verify_checksum(ph));
        prop_assert_eq!(t.payload(), &payload[..]);
        prop_assert_eq!(TcpRepr::parse(&t).unwrap(), r);
    }

    #[test]
    fn udp_round_trip(s in any::<u16>(), d in any::<u16>(), payload in vec(any::<u8>(), 0..100), ph in any::<u16>()) {
        let r = UdpRepr { src_port: s, dst_port: d, payload_len: payload.len() };
        let mut b = vec![0u8; r.buffer_len()];
        let mut u = UdpPacket::new_unchecked(&mut b[..]);
        r.emit(&mut u).unwrap();
        u.payload_mut().copy_from_slice(&payload);
        let c = u.fill_checksum(ph);
        prop_assert_ne!(c, 0);
        let u = UdpPacket::new_checked(&b[..]).unwrap();
        prop_assert_eq!(u.verify_checksum(ph, IpVersion::V6), UdpChecksum::Valid);
        prop_assert_eq!(UdpRepr::parse(&u).unwrap(), r);
    }

    #[test]
    fn icmpv4_round_trip(kind in 0u8..6, a in any::<u8>(), m in any::<u16>(), rest in any::<[u8; 4]>(), data in vec(any::<u8>(), 0..100)) {
        let r = match kind {
            0 => Icmpv4Repr::EchoRequest { ident: m, seq_no: a as u16, data: &data },
            1 => Icmpv4Repr::EchoReply { ident: m, seq_no: a as u16, data: &data },
            2 => Icmpv4Repr::DstUnreachable { code: a, next_hop_mtu: m, quote: &data },
            3 => Icmpv4Repr::TimeExceeded { code: a, quote: &data },
            4 => Icmpv4Repr::ParamProblem { code: a, pointer: m as u8, quote: &data },
            _ => Icmpv4Repr::Other { msg_type: if matches!(a, 0 | 3 | 8 | 11 | 12) { 13 } else { a }, code: 1, rest, data: &data },
        };
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut b[..])).unwrap();
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(Icmpv4Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn icmpv6_round_trip(kind in 0u8..9, a in any::<u8>(), w in any::<u32>(), addr in any::<[u8; 16]>(), ll in proptest::option::of(mac()),
                         flags in any::<(bool, bool, bool)>(), data in vec(any::<u8>(), 0..100)) {
        let target_addr = Ipv6Addr::from(addr);
        let r = match kind {
            0 => Icmpv6Repr::DstUnreachable { code: a, quote: &data },
            1 => Icmpv6Repr::PacketTooBig { mtu: w, quote: &data },
            2 => Icmpv6Repr::TimeExceeded { code: a, quote: &data },
            3 => Icmpv6Repr::ParamProblem { code: a, pointer: w, quote: &data },
            4 => Icmpv6Repr::EchoRequest { ident: w as u16, seq_no: (w >> 16) as u16, data: &data },
            5 => Icmpv6Repr::EchoReply { ident: w as u16, seq_no: (w >> 16) as u16, data: &data },
            6 => Icmpv6Repr::NeighborSolicit { target_addr, source_lladdr: ll },
            7 => Icmpv6Repr::NeighborAdvert { router: flags.0, solicited: flags.1, override_: flags.2, target_addr, target_lladdr: ll },
            _ => Icmpv6Repr::Other {
                msg_type: if matches!(a, 1..=4 | 128 | 129 | 135 | 136) { 200 } else { a },
                code: 0,
                data: &data,
            },
        };
        if r.buffer_len() < 8 {
            prop_assert!(r.emit(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST, &mut Icmpv6Packet::new_unchecked(&mut [0u8; 8][..])).is_err());
            return Ok(());
        }
        let (s, d) = (Ipv6Addr::from(addr), Ipv6Addr::LOCALHOST);
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&s, &d, &mut Icmpv6Packet::new_unchecked(&mut b[..])).unwrap();
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        prop_assert!(p.verify_checksum(&s, &d));
        prop_assert_eq!(Icmpv6Repr::parse(&p).unwrap(), r);
    }
}
