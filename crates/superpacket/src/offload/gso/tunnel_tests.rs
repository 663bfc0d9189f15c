//! Tunnel GSO tests (offload-rules 3.7): table tests against frames built
//! one by one ([`Flow::frame`] for each inner segment, then [`encapsulate`]
//! with a complete outer checksum), checked again with etherparse; offload
//! modes, pass-through, IDs, bad metadata; property tests.

use super::tests::{Fam, expected, fragment_payload, superpacket};
use super::*;
use crate::packet::{ChecksumState, GsoType, OffloadMeta, Packet, TunnelKind};
use crate::traffic::{TunnelSpec, encapsulate};
use crate::validate::{Medium, validate_frame};
use crate::wire::TcpFlags;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use proptest::prelude::*;

const MTU: usize = 9000;

fn tunnel(kind: TunnelKind, outer_v6: bool, csum: bool) -> TunnelSpec {
    let mut t = TunnelSpec::new(kind, outer_v6);
    t.udp_csum = csum;
    if kind == TunnelKind::Geneve {
        t.geneve_options = 8;
    }
    t
}

fn flags_of(fam: Fam) -> TcpFlags {
    if fam.is_tcp() { TcpFlags::PSH | TcpFlags::CWR } else { TcpFlags::empty() }
}

fn tunnel_superpacket(fam: Fam, t: &TunnelSpec, payload: usize, gso: u16) -> Packet {
    encapsulate(&superpacket(fam.spec(0), payload, gso, flags_of(fam)), t).unwrap()
}

/// The segments built one by one: inner frames from a fresh flow, each
/// encapsulated with outer IPv4 ID + i and a complete outer checksum.
fn tunnel_expected(fam: Fam, t: &TunnelSpec, payload: usize, gso: usize) -> Vec<Vec<u8>> {
    expected(fam.spec(0), payload, gso, flags_of(fam), false)
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut tt = *t;
            tt.ip_id = t.ip_id.wrapping_add(i as u16);
            encapsulate(&Packet::from_frame(f), &tt).unwrap().to_vec()
        })
        .collect()
}

fn run(pkt: &Packet, caps: &TargetCaps) -> (Result<GsoOutcome, GsoError>, Vec<OutFrame>) {
    let mut sink = VecSink::new();
    let r = segment(pkt, caps, &mut sink);
    if r.is_err() {
        assert!(sink.frames.is_empty(), "an error must emit nothing");
    }
    (r, sink.frames)
}

/// A frame with its partial checksum (inner or outer) completed.
fn completed(f: &OutFrame) -> Vec<u8> {
    let mut d = f.data.clone();
    if let ChecksumState::Partial { start, offset } = f.meta.csum {
        crate::csum::complete_partial(&mut d, start as usize, offset as usize, offset == 6).unwrap();
    }
    d
}

/// Checks a finished tunnel frame with our views and with etherparse:
/// outer and inner IP/L4 lengths and checksums (an outer UDP checksum of 0
/// only when `csum` is false), the tunnel header; returns the inner L4 payload.
fn check_tunnel_frame(f: &[u8], kind: TunnelKind, csum: bool) -> Vec<u8> {
    let mut problems = Vec::new();
    validate_frame(f, Medium::Ethernet, &OffloadMeta::default(), false, &mut problems);
    // A zero UDP checksum over IPv6 is allowed for tunnels (RFC 6935,
    // Linux `udp6zerocsumtx`).
    problems.retain(|p| csum || p.kind != crate::validate::ProblemKind::UdpChecksum);
    assert!(problems.is_empty(), "outer: {problems:?}");
    let outer = SlicedPacket::from_ethernet(f).expect("etherparse outer");
    let Some(TransportSlice::Udp(u)) = &outer.transport else { panic!("outer is not UDP") };
    assert_eq!(u.length() as usize, 8 + u.payload().len());
    let want = match outer.net.as_ref().unwrap() {
        NetSlice::Ipv4(s) => {
            assert_eq!(s.header().header_checksum(), s.header().to_header().calc_header_checksum());
            u.to_header().calc_checksum_ipv4_raw(s.header().source(), s.header().destination(), u.payload()).unwrap()
        }
        NetSlice::Ipv6(s) => {
            u.to_header().calc_checksum_ipv6_raw(s.header().source(), s.header().destination(), u.payload()).unwrap()
        }
        NetSlice::Arp(_) => unreachable!(),
    };
    assert_eq!(u.checksum(), if csum { want } else { 0 }, "outer UDP checksum");
    let tnl = u.payload();
    let inner = match kind {
        TunnelKind::Vxlan => {
            crate::wire::VxlanRepr::parse(&crate::wire::VxlanPacket::new_checked(tnl).unwrap()).unwrap();
            &tnl[8..]
        }
        TunnelKind::Geneve => {
            let g = crate::wire::GenevePacket::new_checked(tnl).unwrap();
            crate::wire::GeneveRepr::parse(&g).unwrap();
            &tnl[g.header_len()..]
        }
    };
    validate_frame(inner, Medium::Ethernet, &OffloadMeta::default(), false, &mut problems);
    assert!(problems.is_empty(), "inner: {problems:?}");
    let s = SlicedPacket::from_ethernet(inner).expect("etherparse inner");
    match (&s.net, &s.transport) {
        (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Tcp(t))) => {
            assert_eq!(t.checksum(), t.calc_checksum_ipv4(ip.header().source(), ip.header().destination()).unwrap());
            t.payload().to_vec()
        }
        (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Tcp(t))) => {
            assert_eq!(t.checksum(), t.calc_checksum_ipv6(ip.header().source(), ip.header().destination()).unwrap());
            t.payload().to_vec()
        }
        (_, Some(TransportSlice::Udp(u))) => u.payload().to_vec(),
        other => panic!("inner: {other:?}"),
    }
}

fn kinds() -> [TunnelKind; 2] {
    [TunnelKind::Vxlan, TunnelKind::Geneve]
}

#[test]
fn tunnel_segments_match_independently_built_frames() {
    let mut n = 0;
    for kind in kinds() {
        for outer_v6 in [false, true] {
            for fam in Fam::ALL {
                for csum in [false, true] {
                    for sg in [false, true] {
                        let t = tunnel(kind, outer_v6, csum);
                        let (payload, gso) = (3 * 1000 + 77, 1000);
                        let pkt = tunnel_superpacket(fam, &t, payload, gso as u16);
                        let caps = if sg { TargetCaps::new(MTU).with_sg() } else { TargetCaps::new(MTU) };
                        let name = format!("{kind:?} outer v6 {outer_v6} {fam:?} csum {csum} sg {sg}");
                        let (r, frames) = run(&pkt, &caps);
                        assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: true }), "{name}");
                        let want = tunnel_expected(fam, &t, payload, gso);
                        let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
                        assert_eq!(got, want, "{name}");
                        let mut inner_payload = Vec::new();
                        for f in &frames {
                            assert_eq!(f.kind, if sg { OutKind::Sg } else { OutKind::Linear }, "{name}");
                            assert_eq!(f.meta.csum, ChecksumState::None, "{name}");
                            assert!(!f.meta.is_gso() && f.meta.encap.is_none(), "{name}");
                            inner_payload.extend(check_tunnel_frame(&f.data, kind, csum));
                        }
                        let stream: Vec<u8> = (0..payload as u64).map(crate::traffic::payload_byte).collect();
                        assert_eq!(inner_payload, stream, "{name}: inner payload");
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 2 * 2 * 4 * 2 * 2);
}

#[test]
fn inner_or_outer_checksum_left_to_the_target() {
    for kind in kinds() {
        for outer_v6 in [false, true] {
            for fam in Fam::ALL {
                for csum in [false, true] {
                    let t = tunnel(kind, outer_v6, csum);
                    let pkt = tunnel_superpacket(fam, &t, 2500, 1000);
                    let want = tunnel_expected(fam, &t, 2500, 1000);
                    let name = format!("{kind:?} v6 {outer_v6} {fam:?} csum {csum}");
                    // hw_enc_features with HW_CSUM: the inner checksum is
                    // left partial, the outer computed by LCO.
                    let inner_hw = TargetCaps::new(MTU).with_csum(CsumCaps::HW).with_enc(GsoType::NONE, CsumCaps::HW);
                    let (r, frames) = run(&pkt, &inner_hw);
                    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 3, csum_completed: false }), "{name}");
                    let encap = pkt.meta.encap.unwrap();
                    for (f, w) in frames.iter().zip(&want) {
                        let start = encap.inner_transport;
                        assert!(matches!(f.meta.csum, ChecksumState::Partial { start: s, .. } if s == start));
                        assert_eq!(f.meta.encap, Some(encap));
                        assert_eq!(&completed(f), w, "{name}: inner partial");
                    }
                    // Checksum offload without hw_enc_features: the inner
                    // checksum in software, the outer one (if any) left partial.
                    let outer_hw = TargetCaps::new(MTU).with_csum(CsumCaps::IP);
                    let (r, frames) = run(&pkt, &outer_hw);
                    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 3, csum_completed: true }), "{name}");
                    for (f, w) in frames.iter().zip(&want) {
                        let partial = matches!(f.meta.csum, ChecksumState::Partial { offset: 6, .. });
                        assert_eq!(partial, csum, "{name}");
                        assert_eq!(&completed(f), w, "{name}: outer partial");
                    }
                }
            }
        }
    }
}

#[test]
fn passes_through_only_with_tunnel_features_on_both_sets() {
    let t = tunnel(TunnelKind::Vxlan, false, true);
    let pkt = tunnel_superpacket(Fam::Tcp4, &t, 5000, 1000);
    let full = GsoType::TCPV4 | GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM;
    let caps = TargetCaps::new(MTU).with_sg().with_csum(CsumCaps::HW).with_gso(full).with_enc(full, CsumCaps::HW);
    let (r, frames) = run(&pkt, &caps);
    assert_eq!(r, Ok(GsoOutcome::PassedThrough));
    assert_eq!(frames[0].data, pkt.to_vec());
    assert_eq!(frames[0].meta.gso_segs, 5);
    assert_eq!(frames[0].meta.encap, pkt.meta.encap);
    // Missing any part: segmented in software.
    for caps in [
        caps.with_gso(GsoType::TCPV4 | GsoType::UDP_TUNNEL),
        caps.with_enc(GsoType::UDP_TUNNEL_CSUM, CsumCaps::HW),
        caps.with_enc(full, CsumCaps::NONE),
        caps.with_csum(CsumCaps::NONE),
    ] {
        let (r, _) = run(&pkt, &caps);
        assert!(matches!(r, Ok(GsoOutcome::Segmented { segments: 5, .. })), "{caps:?}: {r:?}");
    }
    // DODGY is validated, not needed as a feature.
    let mut dodgy = pkt.clone();
    dodgy.meta.gso_type |= GsoType::DODGY;
    dodgy.meta.gso_segs = 0;
    let (r, frames) = run(&dodgy, &caps);
    assert_eq!(r, Ok(GsoOutcome::PassedThrough));
    assert_eq!(frames[0].meta.gso_type, pkt.meta.gso_type);
    assert_eq!(frames[0].meta.gso_segs, 5);
}

fn ipv4_id(f: &[u8], l3: usize) -> u16 {
    u16::from_be_bytes([f[l3 + 4], f[l3 + 5]])
}

#[test]
fn outer_and_inner_ipv4_ids() {
    let t = tunnel(TunnelKind::Vxlan, false, false);
    let inner_l3 = 14 + 20 + 8 + 8 + 14;
    for (bits, outer_fixed, inner_fixed) in [
        (GsoType::NONE, false, false),
        (GsoType::TCP_FIXEDID, true, false),
        (GsoType::TCP_FIXEDID_INNER, false, true),
        (GsoType::TCP_FIXEDID | GsoType::TCP_FIXEDID_INNER, true, true),
    ] {
        let mut pkt = tunnel_superpacket(Fam::Tcp4, &t, 4000, 1000);
        pkt.meta.gso_type |= bits;
        let (r, frames) = run(&pkt, &TargetCaps::new(MTU));
        assert!(r.is_ok(), "{bits:?}: {r:?}");
        let (o0, i0) = (ipv4_id(&pkt.to_vec(), 14), ipv4_id(&pkt.to_vec(), inner_l3));
        for (i, f) in frames.iter().enumerate() {
            let step = i as u16;
            assert_eq!(ipv4_id(&f.data, 14), if outer_fixed { o0 } else { o0.wrapping_add(step) }, "{bits:?}");
            assert_eq!(ipv4_id(&f.data, inner_l3), if inner_fixed { i0 } else { i0.wrapping_add(step) }, "{bits:?}");
            check_tunnel_frame(&f.data, TunnelKind::Vxlan, false);
        }
    }
}

#[test]
fn outer_ipv4_id_wraps_and_zero_checksum_becomes_ffff() {
    // Search an outer source port whose segment checksum comes out 0.
    let mut hit = false;
    for port in 0..=u16::MAX {
        let mut t = tunnel(TunnelKind::Vxlan, false, true);
        t.ip_id = 0xFFFF;
        t.outer.src_port = port;
        let pkt = tunnel_superpacket(Fam::Udp4, &t, 200, 100);
        let want = tunnel_expected(Fam::Udp4, &t, 200, 100);
        let (_, frames) = run(&pkt, &TargetCaps::new(MTU));
        assert_eq!(ipv4_id(&frames[1].data, 14), 0);
        let c = |f: &[u8]| u16::from_be_bytes([f[14 + 20 + 6], f[14 + 20 + 7]]);
        assert_eq!(frames[0].data, want[0]);
        if c(&frames[0].data) == 0xFFFF {
            hit = true;
            break;
        }
    }
    assert!(hit, "no port gave a computed 0");
}

#[test]
fn non_linear_tunnel_superpackets() {
    for sg in [false, true] {
        for fam in Fam::ALL {
            let t = tunnel(TunnelKind::Geneve, true, true);
            let pkt = tunnel_superpacket(fam, &t, 7001, 1400);
            let hl = pkt.meta.encap.unwrap().inner_transport as usize + if fam.is_tcp() { 32 } else { 8 };
            let split = fragment_payload(&pkt, hl, &[5, 1399, 1400, 3000], Some(5000));
            let caps = if sg { TargetCaps::new(MTU).with_sg() } else { TargetCaps::new(MTU) };
            let (r, frames) = run(&split, &caps);
            assert!(r.is_ok(), "{r:?}");
            let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
            assert_eq!(got, tunnel_expected(fam, &t, 7001, 1400), "{fam:?} sg {sg}");
        }
    }
}

#[test]
fn bad_tunnel_metadata_is_a_counted_drop() {
    let t = tunnel(TunnelKind::Geneve, false, true);
    let good = tunnel_superpacket(Fam::Tcp4, &t, 3000, 1000);
    let encap = good.meta.encap.unwrap();
    let with = |f: &dyn Fn(&mut Packet)| {
        let mut p = good.clone();
        f(&mut p);
        p
    };
    let set_byte = |p: &mut Packet, at: usize, v: u8| {
        let mut b = p.to_vec();
        b[at] = v;
        let meta = p.meta;
        *p = Packet::from_frame(&b);
        p.meta = meta;
    };
    let ot = encap.outer_transport as usize;
    let cases: Vec<(&str, Packet, &str)> = vec![
        ("no encap", with(&|p| p.meta.encap = None), "bad-tunnel-gso"),
        ("both bits", with(&|p| p.meta.gso_type |= GsoType::UDP_TUNNEL), "bad-tunnel-gso"),
        (
            "encap on plain TSO",
            with(&|p| p.meta.gso_type = p.meta.gso_type.without(GsoType::UDP_TUNNEL_CSUM)),
            "bad-tunnel-gso",
        ),
        ("fraglist", with(&|p| p.meta.gso_type |= GsoType::FRAGLIST), "bad-tunnel-gso"),
        ("inner_mac off", with(&|p| p.meta.encap.as_mut().unwrap().inner_mac += 4), "bad-encap"),
        ("outer_transport off", with(&|p| p.meta.encap.as_mut().unwrap().outer_transport -= 2), "bad-encap"),
        ("inner_network off", with(&|p| p.meta.encap.as_mut().unwrap().inner_network += 1), "bad-encap"),
        ("inner_transport off", with(&|p| p.meta.encap.as_mut().unwrap().inner_transport += 4), "bad-encap"),
        ("inner_mac in UDP", with(&|p| p.meta.encap.as_mut().unwrap().inner_mac = ot as u16 + 4), "bad-encap"),
        ("geneve opt len", with(&|p| set_byte(p, ot + 8, 1)), "bad-encap"),
        ("geneve protocol", with(&|p| set_byte(p, ot + 11, 0x59)), "bad-encap"),
        ("outer UDP length", with(&|p| set_byte(p, ot + 5, 0)), "bad-encap"),
        ("outer not UDP", with(&|p| set_byte(p, 14 + 9, 47)), "bad-encap"),
        ("inner protocol", with(&|p| p.meta.gso_type = GsoType::TCPV6 | GsoType::UDP_TUNNEL_CSUM), "protocol-mismatch"),
        (
            "csum at outer UDP",
            with(&|p| p.meta.csum = ChecksumState::Partial { start: ot as u16, offset: 16 }),
            "csum-start-not-l4",
        ),
        (
            "inner IP length",
            with(&|p| {
                let at = encap.inner_network as usize + 3;
                let b = p.to_vec()[at];
                set_byte(p, at, b.wrapping_sub(1))
            }),
            "length-mismatch",
        ),
        ("gso_segs", with(&|p| p.meta.gso_segs = 9), "gso-segs-mismatch"),
        ("truncated", Packet::from_frame(&good.to_vec()[..ot + 12]).with_meta(good.meta), "bad-headers"),
    ];
    let mut seg = Segmenter::new();
    for (name, p, reason) in &cases {
        let mut sink = VecSink::new();
        let r = seg.segment(p, &TargetCaps::new(MTU), &mut sink);
        assert_eq!(r.as_ref().map_err(GsoError::reason).err(), Some(*reason), "{name}: {r:?}");
        assert!(sink.frames.is_empty(), "{name}");
    }
    assert_eq!(seg.counters.dropped(), cases.len() as u64);
    assert_eq!(seg.counters.drops.get("bad-encap"), Some(&9));
}

trait WithMeta {
    fn with_meta(self, meta: OffloadMeta) -> Packet;
}

impl WithMeta for Packet {
    fn with_meta(mut self, meta: OffloadMeta) -> Packet {
        self.meta = meta;
        self
    }
}

#[test]
fn tunnel_superpacket_no_larger_than_gso_size_is_one_segment() {
    for fam in Fam::ALL {
        let t = tunnel(TunnelKind::Vxlan, true, true);
        let mut pkt = encapsulate(&superpacket(fam.spec(0), 700, 1000, flags_of(fam)), &t).unwrap();
        assert!(!pkt.meta.is_gso());
        pkt.meta.gso_type = fam_gso(fam) | GsoType::UDP_TUNNEL_CSUM;
        pkt.meta.gso_size = 1000;
        pkt.meta.gso_segs = 1;
        pkt.meta.encap = Some(encapsulation_of(&pkt));
        let (r, frames) = run(&pkt, &TargetCaps::new(MTU));
        assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 1, csum_completed: true }), "{fam:?}");
        assert_eq!(frames[0].data, tunnel_expected(fam, &t, 700, 1000)[0], "{fam:?}");
    }
}

fn fam_gso(fam: Fam) -> GsoType {
    match fam {
        Fam::Tcp4 => GsoType::TCPV4,
        Fam::Tcp6 => GsoType::TCPV6,
        Fam::Udp4 | Fam::Udp6 => GsoType::UDP_L4,
    }
}

/// The encapsulation offsets of an untagged VXLAN-in-IPv6 frame.
fn encapsulation_of(pkt: &Packet) -> crate::packet::Encapsulation {
    let f = pkt.to_vec();
    let im = 14 + 40 + 8 + 8;
    let h = crate::wire::FrameHeaders::parse(&f[im..]).unwrap();
    crate::packet::Encapsulation {
        tunnel: TunnelKind::Vxlan,
        outer_transport: 54,
        inner_mac: im as u16,
        inner_network: (im + h.l3_offset) as u16,
        inner_transport: (im + h.l4_offset) as u16,
    }
}

#[test]
fn mangled_tunnel_metadata_never_panics() {
    let t = tunnel(TunnelKind::Geneve, true, true);
    let good = tunnel_superpacket(Fam::Udp6, &t, 3000, 1000);
    let bytes = good.to_vec();
    let mut rng = 0x1234_5678u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut seg = Segmenter::new();
    for _ in 0..3000 {
        let mut b = bytes.clone();
        for _ in 0..(next() % 4) {
            let at = (next() as usize) % 160;
            b[at] = next() as u8;
        }
        let mut p = Packet::from_frame(&b[..b.len() - (next() % 3) as usize]);
        p.meta = good.meta;
        if let Some(e) = p.meta.encap.as_mut() {
            match next() % 5 {
                0 => e.inner_mac = (next() % 600) as u16,
                1 => e.inner_transport = (next() % 600) as u16,
                2 => e.outer_transport = (next() % 600) as u16,
                _ => {}
            }
        }
        p.meta.gso_size = (next() % 2000) as u16;
        let caps = TargetCaps::new(MTU).with_sg();
        let _ = seg.segment(&p, &caps, &mut VecSink::new());
    }
    assert!(seg.counters.packets_in == 3000);
}

fn fam_strategy() -> impl Strategy<Value = Fam> {
    prop_oneof![Just(Fam::Tcp4), Just(Fam::Tcp6), Just(Fam::Udp4), Just(Fam::Udp6)]
}

fn csum_strategy() -> impl Strategy<Value = CsumCaps> {
    prop_oneof![Just(CsumCaps::NONE), Just(CsumCaps::IP), Just(CsumCaps::HW)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random tunnel superpackets: every segment's outer and inner lengths
    /// and checksums verify (after the target's part is done), the inner
    /// payloads concatenate to the original, and the segments equal the
    /// frames built one by one.
    #[test]
    fn tunnel_segments_validate_and_reassemble(
        fam in fam_strategy(),
        geneve in any::<bool>(),
        outer_v6 in any::<bool>(),
        csum in any::<bool>(),
        payload in 2usize..20000,
        gso_frac in 0.0f64..1.0,
        sg in any::<bool>(),
        caps_csum in csum_strategy(),
        enc_csum in csum_strategy(),
        cuts in proptest::collection::vec(1usize..20000, 0..5),
        frag_at in proptest::option::of(1usize..20000),
    ) {
        let gso = ((payload - 1) as f64 * gso_frac) as usize + 1;
        prop_assume!(gso < payload);
        prop_assume!(fam.is_tcp() || payload.div_ceil(gso) <= UDP_MAX_SEGMENTS as usize);
        let kind = if geneve { TunnelKind::Geneve } else { TunnelKind::Vxlan };
        let t = tunnel(kind, outer_v6, csum);
        let pkt = tunnel_superpacket(fam, &t, payload, gso as u16);
        let hl = pkt.meta.encap.unwrap().inner_transport as usize + if fam.is_tcp() { 32 } else { 8 };
        let pkt = fragment_payload(&pkt, hl, &cuts, frag_at.filter(|&f| f < payload));
        let mut caps = TargetCaps::new(65535).with_csum(caps_csum).with_enc(GsoType::NONE, enc_csum);
        caps.sg = sg;
        let (r, frames) = run(&pkt, &caps);
        prop_assert!(r.is_ok(), "{:?}", r);
        let want = tunnel_expected(fam, &t, payload, gso);
        prop_assert_eq!(frames.len(), want.len());
        let mut inner_payload = Vec::new();
        for (f, w) in frames.iter().zip(&want) {
            let done = completed(f);
            prop_assert_eq!(&done, w);
            inner_payload.extend(check_tunnel_frame(&done, kind, csum));
        }
        let stream: Vec<u8> = (0..payload as u64).map(crate::traffic::payload_byte).collect();
        prop_assert_eq!(inner_payload, stream);
    }
}

#[test]
fn tunnel_annotations_round_trip_and_validate() {
    use crate::pcap::FrameAnnotation;
    for kind in kinds() {
        for outer_v6 in [false, true] {
            for csum in [false, true] {
                let t = tunnel(kind, outer_v6, csum);
                let pkt = tunnel_superpacket(Fam::Tcp4, &t, 2500, 1000);
                let bytes = pkt.to_vec();
                let ann = FrameAnnotation::from_meta(&pkt.meta);
                let text = ann.to_string();
                let tg = if csum { "udp_tunnel_csum" } else { "udp_tunnel" };
                assert_eq!(
                    text,
                    format!(
                        "gso_type=tcpv4 gso_size=1000 gso_segs=3 tunnel={} tunnel_gso={tg} csum=partial",
                        kind.name()
                    )
                );
                let back = FrameAnnotation::parse_comment(&text).unwrap();
                assert_eq!(back, ann);
                let h = crate::wire::FrameHeaders::parse(&bytes).unwrap();
                assert_eq!(back.to_meta_in(Some(&h), &bytes), pkt.meta, "{text}");
                // Without tunnel_gso the outer checksum field decides (Linux's GRO rule).
                let derived = FrameAnnotation::parse_comment(&text.replace(&format!(" tunnel_gso={tg}"), "")).unwrap();
                assert_eq!(derived.to_meta_in(Some(&h), &bytes), pkt.meta, "{text}");
                // pcap check: the superpacket and every segment (inner partial) validate.
                let mut problems = Vec::new();
                validate_frame(&bytes, Medium::Ethernet, &pkt.meta, false, &mut problems);
                assert!(problems.is_empty(), "{text}: {problems:?}");
                let caps = TargetCaps::new(MTU).with_csum(CsumCaps::HW).with_enc(GsoType::NONE, CsumCaps::HW);
                let (_, frames) = run(&pkt, &caps);
                for f in &frames {
                    validate_frame(&f.data, Medium::Ethernet, &f.meta, false, &mut problems);
                    let a = FrameAnnotation::from_meta(&f.meta);
                    assert_eq!(a.to_string(), format!("tunnel={} csum=partial", kind.name()));
                    let fh = crate::wire::FrameHeaders::parse(&f.data).unwrap();
                    assert_eq!(a.to_meta_in(Some(&fh), &f.data), f.meta);
                }
                assert!(problems.is_empty(), "{text}: {problems:?}");
                // A broken outer checksum seed is reported.
                let mut bad = bytes.clone();
                let ot = pkt.meta.encap.unwrap().outer_transport as usize;
                bad[ot + 6] ^= 0x10;
                validate_frame(&bad, Medium::Ethernet, &pkt.meta, false, &mut problems);
                assert_eq!(problems.len(), usize::from(csum) + usize::from(!csum), "{text}: {problems:?}");
            }
        }
    }
}

// ------------------------------------------------------------ GSO_PARTIAL

/// A target that finishes tunnel segmentation from GSO_PARTIAL output:
/// scatter-gather, checksums of inner headers, inner TSO/USO as
/// encapsulated features, both tunnel types in `gso_partial` (and not as
/// full tunnel GSO: the packet is not taken whole).
fn partial_target() -> TargetCaps {
    let inner = GsoType::TCPV4 | GsoType::TCPV6 | GsoType::UDP_L4 | GsoType::TCP_ECN;
    TargetCaps::new(MTU)
        .with_sg()
        .with_csum(CsumCaps::HW)
        .with_gso(inner)
        .with_enc(inner, CsumCaps::HW)
        .with_gso_partial(GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM)
}

fn put16(f: &mut [u8], at: usize, v: u16) {
    f[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Sets an IP header's length field (and for IPv4 the ID) and recomputes
/// the IPv4 header checksum over the bytes.
fn set_ip(f: &mut [u8], l3: usize, len: usize, id: Option<u16>) {
    if f[l3] >> 4 == 6 {
        put16(f, l3 + 4, (len - 40) as u16);
        return;
    }
    put16(f, l3 + 2, len as u16);
    if let Some(id) = id {
        put16(f, l3 + 4, id);
    }
    put16(f, l3 + 10, 0);
    let ihl = usize::from(f[l3] & 0x0f) * 4;
    let c = crate::csum::checksum(&f[l3..l3 + ihl]);
    put16(f, l3 + 10, c);
}

/// The L4 pseudo-header sum of the IP header at `l3` with L4 length `len`.
fn pseudo_of(f: &[u8], l3: usize, proto: u8, len: usize) -> u16 {
    if f[l3] >> 4 == 6 {
        let a: [u8; 16] = f[l3 + 8..l3 + 24].try_into().unwrap();
        let b: [u8; 16] = f[l3 + 24..l3 + 40].try_into().unwrap();
        crate::csum::pseudo_header_v6(a, b, proto, len as u32)
    } else {
        let a: [u8; 4] = f[l3 + 12..l3 + 16].try_into().unwrap();
        let b: [u8; 4] = f[l3 + 16..l3 + 20].try_into().unwrap();
        crate::csum::pseudo_header_v4(a, b, proto, len as u16)
    }
}

/// GSO_PARTIAL output built by hand from the rules (offload-rules 3.7
/// "GSO_PARTIAL"), independently of the segmenter: the inner frames of a
/// flow cut at `units * gso` (a chunk and the remainder, complete
/// checksums, `Flow::frame`); then, per frame `i`, inner and outer IPv4 IDs
/// `+ i * units`; for the chunk the inner and outer IP lengths and the
/// outer UDP length of one `gso`-byte segment, the outer UDP checksum
/// summed over the bytes with the pseudo-header of the chunk's real UDP
/// length; last, the inner L4 checksum field left partial (pseudo-header
/// sum of the frame's own inner L4 length).
fn partial_expected(fam: Fam, t: &TunnelSpec, payload: usize, gso: usize, units: usize) -> Vec<Vec<u8>> {
    let chunk = units * gso;
    let inner = expected(fam.spec(0), payload, chunk, flags_of(fam), false);
    let (proto, field) = if fam.is_tcp() { (6u8, 16) } else { (17u8, 6) };
    inner
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut f = f.clone();
            let l3 = 14;
            let v6 = f[l3] >> 4 == 6;
            let l4 = l3 + if v6 { 40 } else { 20 };
            let l4_hdr = if fam.is_tcp() { usize::from(f[l4 + 12] >> 4) * 4 } else { 8 };
            let carried = f.len() - l4 - l4_hdr;
            let step = (i * units) as u16;
            let id =
                (!v6).then(|| u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]).wrapping_sub(i as u16).wrapping_add(step));
            let wire = carried.min(gso);
            set_ip(&mut f, l3, l4 + l4_hdr + wire - l3, id);
            let mut tt = *t;
            tt.ip_id = t.ip_id.wrapping_add(step);
            let mut o = encapsulate(&Packet::from_frame(&f), &tt).unwrap().to_vec();
            let hl = o.len() - carried;
            let udp = 14 + if o[14] >> 4 == 6 { 40 } else { 20 };
            if carried > gso {
                set_ip(&mut o, 14, hl + gso - 14, None);
                put16(&mut o, udp + 4, (hl + gso - udp) as u16);
                if t.udp_csum {
                    put16(&mut o, udp + 6, 0);
                    let real = o.len() - udp;
                    let sum = crate::csum::ones_add(pseudo_of(&o, 14, 17, real), crate::csum::ones_sum(&o[udp..]));
                    put16(&mut o, udp + 6, super::udp::mangle_zero(!sum));
                }
            }
            let il4 = o.len() - (f.len() - l4);
            let il3 = il4 - (l4 - l3);
            let ps = pseudo_of(&o, il3, proto, o.len() - il4);
            put16(&mut o, il4 + field, ps);
            o
        })
        .collect()
}

#[test]
fn gso_partial_output_matches_the_rules_byte_for_byte() {
    // (payload, gso_size): remainder or not, two units (the least that is
    // worth a chunk), many units.
    let sizes = [(3 * 1000 + 77, 1000), (4 * 1000, 1000), (2 * 1400 + 1, 1400), (45 * 1448, 1448)];
    let mut n = 0;
    for kind in kinds() {
        for outer_v6 in [false, true] {
            for fam in Fam::ALL {
                for csum in [false, true] {
                    for (payload, gso) in sizes {
                        let mut t = tunnel(kind, outer_v6, csum);
                        t.ip_id = 0xfff0; // the stride crosses the 16-bit wrap
                        let pkt = tunnel_superpacket(fam, &t, payload, gso as u16);
                        let name = format!("{kind:?} outer v6 {outer_v6} {fam:?} csum {csum} {payload}/{gso}");
                        let units = payload / gso;
                        let frames_n = 1 + usize::from(!payload.is_multiple_of(gso));
                        let (r, frames) = run(&pkt, &partial_target());
                        assert_eq!(
                            r,
                            Ok(GsoOutcome::Segmented { segments: frames_n, csum_completed: false }),
                            "{name}"
                        );
                        let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
                        assert_eq!(got, partial_expected(fam, &t, payload, gso, units), "{name}");
                        let tunnel_bit = if csum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL };
                        let inner_l4 = pkt.meta.encap.unwrap().inner_transport;
                        for (i, f) in frames.iter().enumerate() {
                            assert_eq!(f.meta.encap, pkt.meta.encap, "{name}: frame {i} keeps encap");
                            assert_eq!(
                                f.meta.csum,
                                ChecksumState::Partial { start: inner_l4, offset: if fam.is_tcp() { 16 } else { 6 } },
                                "{name}: frame {i} inner checksum left partial"
                            );
                            if i == 0 {
                                assert_eq!(f.meta.gso_type, pkt.meta.gso_type | GsoType::PARTIAL, "{name}");
                                assert_eq!((f.meta.gso_size, f.meta.gso_segs), (gso as u16, units as u16), "{name}");
                                assert!(f.meta.gso_type.contains(tunnel_bit));
                            } else {
                                assert_eq!(
                                    (f.meta.gso_type, f.meta.gso_size),
                                    (GsoType::NONE, 0),
                                    "{name}: the remainder"
                                );
                            }
                        }
                        // The target's segmentation of the chunk (cut at
                        // gso_size, lengths from the bytes) gives what plain
                        // software GSO gives: the chunk is the same stream.
                        let payload_got: Vec<u8> = frames
                            .iter()
                            .flat_map(|f| {
                                completed_inner_payload(&f.data, pkt.meta.encap.unwrap().inner_transport, fam)
                            })
                            .collect();
                        assert_eq!(payload_got.len(), payload, "{name}");
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 2 * 2 * 4 * 2 * 4);
}

/// The inner L4 payload of an output frame (after the inner L4 header).
fn completed_inner_payload(f: &[u8], inner_l4: u16, fam: Fam) -> Vec<u8> {
    let l4 = inner_l4 as usize;
    let h = if fam.is_tcp() { usize::from(f[l4 + 12] >> 4) * 4 } else { 8 };
    f[l4 + h..].to_vec()
}

#[test]
fn gso_partial_only_where_linux_keeps_it() {
    // (why, target, tunnel csum, payload, gso): each falls back to ordinary
    // segments (one frame per gso_size).
    let p = partial_target();
    let cases: [(&str, TargetCaps, bool, usize, usize); 6] = [
        ("fewer than two units in the chunk (partial_segs <= 1)", p, false, 1000 + 500, 1000),
        ("no GSO_PARTIAL", TargetCaps { gso_partial: GsoType::NONE, ..p }, false, 3000, 1000),
        ("GSO_PARTIAL for the other tunnel type", p.with_gso_partial(GsoType::UDP_TUNNEL_CSUM), false, 3000, 1000),
        ("no scatter-gather (skb_segment needs SG)", TargetCaps { sg: false, ..p }, false, 3000, 1000),
        ("inner checksum not offloaded", p.with_enc(p.enc_gso, CsumCaps::NONE), true, 3000, 1000),
        ("inner TSO not an encapsulated feature", p.with_enc(GsoType::UDP_L4, CsumCaps::HW), false, 3000, 1000),
    ];
    for (why, caps, csum, payload, gso) in cases {
        let t = tunnel(TunnelKind::Vxlan, false, csum);
        let pkt = tunnel_superpacket(Fam::Tcp4, &t, payload, gso as u16);
        let (r, frames) = run(&pkt, &caps);
        let segs = payload.div_ceil(gso);
        assert!(matches!(r, Ok(GsoOutcome::Segmented { segments, .. }) if segments == segs), "{why}: {r:?}");
        assert!(frames.iter().all(|f| f.meta.gso_type.is_empty() && f.data.len() <= pkt.len()), "{why}");
        let want = tunnel_expected(Fam::Tcp4, &t, payload, gso);
        let got: Vec<Vec<u8>> = frames.iter().map(completed).collect();
        assert_eq!(got, want, "{why}");
    }
    // A target that takes tunnel GSO whole still gets the superpacket whole.
    let whole = TargetCaps { gso: p.gso | GsoType::UDP_TUNNEL, enc_gso: p.enc_gso | GsoType::UDP_TUNNEL, ..p };
    let pkt = tunnel_superpacket(Fam::Tcp4, &tunnel(TunnelKind::Vxlan, false, false), 3000, 1000);
    assert_eq!(run(&pkt, &whole).0, Ok(GsoOutcome::PassedThrough));
}
