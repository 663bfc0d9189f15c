//! Tunnel GRO tests (offload-rules 2.6): table-driven cases run for VXLAN
//! and Geneve (without and with options), IPv4 and IPv6 outers, TCP/IPv4,
//! TCP/IPv6 and UDP/IPv4 inners; each outer rule violated; Geneve's own
//! rules (version, O bit, payload type, options); and property tests of
//! payload conservation and header validity over random tunnel traffic.
//! VXLAN's outcomes are also checked against the kernel
//! (`crates/superpacket-cli/tests/gro_tunnel_kernel_oracle.rs`).

use super::*;
use crate::packet::{ChecksumState, GsoType, Packet, TunnelKind};
use crate::traffic::{FlowSpec, Transport, TunnelFlow, payload_byte};
use crate::wire::{GENEVE_PORT, TcpFlags, VXLAN_PORT};
use proptest::prelude::*;

/// One tunnel shape every case runs in.
#[derive(Debug, Clone, Copy)]
struct Shape {
    kind: TunnelKind,
    geneve_opts: usize,
    outer_v6: bool,
    inner: Transport,
    inner_v6: bool,
}

fn shapes() -> Vec<Shape> {
    let mut v = Vec::new();
    for (kind, geneve_opts) in [(TunnelKind::Vxlan, 0), (TunnelKind::Geneve, 0), (TunnelKind::Geneve, 8)] {
        for outer_v6 in [false, true] {
            for (inner, inner_v6) in [(Transport::Tcp, false), (Transport::Tcp, true), (Transport::Udp, false)] {
                v.push(Shape { kind, geneve_opts, outer_v6, inner, inner_v6 });
            }
        }
    }
    v
}

fn tflow(s: &Shape, idx: u32) -> TunnelFlow {
    let mut spec = FlowSpec::new(s.inner, s.inner_v6, idx);
    if s.inner == Transport::Udp {
        spec.dst_port = 9000;
    }
    let mut f = TunnelFlow::new(s.kind, s.outer_v6, spec, idx);
    f.geneve_options = (0..s.geneve_opts as u8).collect();
    f
}

fn config() -> GroConfig {
    GroConfig { udp: UdpGroMode::Forward, ..GroConfig::default() }
        .with_tunnel(VXLAN_PORT, TunnelKind::Vxlan)
        .with_tunnel(GENEVE_PORT, TunnelKind::Geneve)
}

fn run(cfg: GroConfig, frames: &[Vec<u8>]) -> (Vec<Packet>, GroCounters) {
    let mut g = Gro::new(cfg);
    for f in frames {
        g.receive_frame(f);
    }
    g.flush();
    let out = g.drain_delivered().collect();
    (out, *g.counters())
}

fn bytes(p: &Packet) -> Vec<u8> {
    let mut v = Vec::new();
    capture_bytes(p, Medium::Ethernet, &mut v);
    v
}

/// Checks a delivered tunnel packet's headers: outer IPv4 header checksum,
/// outer IP and UDP lengths; a tunnel aggregate also its outer UDP checksum
/// field (0, or the outer pseudo-header sum), inner IP length and IPv4 header
/// checksum, inner checksum field = inner pseudo-header sum, GSO type, size
/// and segments against its inner payload, encap offsets. Returns the inner
/// payload.
fn check_tunnel_packet(p: &Packet, ctx: &str) -> Vec<u8> {
    let f = bytes(p);
    let h = Medium::Ethernet.parse(&f).unwrap_or_else(|e| panic!("{ctx}: outer parse {e}"));
    assert_eq!(h.l3_offset + h.l3_len, f.len(), "{ctx}: outer IP length");
    if h.l3 == crate::wire::L3Kind::Ipv4 {
        assert_eq!(csum::ones_sum(&f[h.l3_offset..h.l3_offset + 20]), 0xFFFF, "{ctx}: outer IPv4 checksum");
    }
    let u = h.l4_offset;
    assert_eq!(be16(&f, u + 4) as usize, f.len() - u, "{ctx}: outer UDP length");
    let Some(e) = p.meta.encap else {
        // Not coalesced: the frame as it came, its inner payload after the inner headers.
        let tnl = if be16(&f, u + 2) == GENEVE_PORT { 8 + (f[u + 8] & 0x3f) as usize * 4 } else { 8 };
        let inner = Medium::Ethernet.parse(&f[u + 8 + tnl..]).expect("inner parses");
        return f[u + 8 + tnl + inner.payload_offset..u + 8 + tnl + inner.payload_offset + inner.payload_len].to_vec();
    };
    let t = p.meta.gso_type;
    let check = be16(&f, u + 6);
    assert!(t.contains(if check != 0 { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL }), "{ctx}: {t:?}");
    assert_eq!(e.outer_transport as usize, u, "{ctx}");
    if check != 0 {
        let v6 = h.l3 == crate::wire::L3Kind::Ipv6;
        assert_eq!(check, ip::pseudo_sum(&f, h.l3_offset, v6, 17, f.len() - u), "{ctx}: outer pseudo sum");
    }
    let im = e.inner_mac as usize;
    let ih = Medium::Ethernet.parse(&f[im..]).unwrap_or_else(|er| panic!("{ctx}: inner parse {er}"));
    assert_eq!(ih.l3_offset + im, e.inner_network as usize, "{ctx}");
    assert_eq!(ih.l4_offset + im, e.inner_transport as usize, "{ctx}");
    assert_eq!(ih.l3_offset + ih.l3_len, f.len() - im, "{ctx}: inner IP length");
    let il3 = im + ih.l3_offset;
    let iv6 = ih.l3 == crate::wire::L3Kind::Ipv6;
    if !iv6 {
        assert_eq!(csum::ones_sum(&f[il3..il3 + 20]), 0xFFFF, "{ctx}: inner IPv4 checksum");
    }
    let il4 = im + ih.l4_offset;
    let tcp = t.intersects(GsoType::TCPV4 | GsoType::TCPV6);
    let (proto, field) = if tcp { (6, 16) } else { (17, 6) };
    assert_eq!(p.meta.csum, ChecksumState::Partial { start: il4 as u16, offset: field as u16 }, "{ctx}");
    assert_eq!(be16(&f, il4 + field), ip::pseudo_sum(&f, il3, iv6, proto, f.len() - il4), "{ctx}: inner pseudo sum");
    let payload = f[im + ih.payload_offset..].to_vec();
    let size = p.meta.gso_size as usize;
    assert_eq!(payload.len().div_ceil(size), p.meta.gso_segs as usize, "{ctx}: gso_segs");
    if !tcp {
        assert_eq!(be16(&f, il4 + 4) as usize, f.len() - il4, "{ctx}: inner UDP length");
    }
    payload
}

/// Expected delivered packets: (segments, payload bytes) each.
type Want = &'static [(u32, usize)];

fn expect(out: &[Packet], want: Want, ctx: &str) {
    let got: Vec<(u32, usize)> = out
        .iter()
        .map(|p| {
            let pl = check_tunnel_packet(p, ctx);
            (if p.meta.is_gso() { p.meta.gso_segs as u32 } else { 1 }, pl.len())
        })
        .collect();
    let mut got_sorted = got.clone();
    let mut want_sorted = want.to_vec();
    got_sorted.sort();
    want_sorted.sort();
    assert_eq!(got_sorted, want_sorted, "{ctx}: delivered {got:?}");
}

fn frames(f: &mut TunnelFlow, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| f.frame(len, TcpFlags::empty()).unwrap()).collect()
}

/// Recomputes a tunnel frame's outer IPv4 header and outer UDP checksums.
fn refresh_outer(frame: &mut [u8]) {
    let h = Medium::Ethernet.parse(frame).unwrap();
    if h.l3 == crate::wire::L3Kind::Ipv4 {
        let l3 = h.l3_offset;
        frame[l3 + 10..l3 + 12].fill(0);
        let c = csum::checksum(&frame[l3..l3 + 20]);
        frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    let u = h.l4_offset;
    if be16(frame, u + 6) != 0 {
        frame[u + 6..u + 8].fill(0);
        let v6 = h.l3 == crate::wire::L3Kind::Ipv6;
        let pseudo = ip::pseudo_sum(frame, h.l3_offset, v6, 17, frame.len() - u);
        let mut c = !csum::ones_add(pseudo, csum::ones_sum(&frame[u..]));
        if c == 0 {
            c = 0xFFFF;
        }
        frame[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    }
}

/// A case: frames built for a shape, and the expected deliveries.
struct Case {
    name: &'static str,
    build: fn(&Shape) -> Vec<Vec<u8>>,
    want: Want,
    /// Only for IPv4 outers.
    v4_only: bool,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "8 segments coalesce",
            build: |s| frames(&mut tflow(s, 1), 8, 1000),
            want: &[(8, 8000)],
            v4_only: false,
        },
        Case {
            name: "outer checksum zero",
            build: |s| {
                let mut f = tflow(s, 1);
                f.udp_csum = false;
                frames(&mut f, 5, 1000)
            },
            want: &[(5, 5000)],
            v4_only: false,
        },
        Case {
            name: "outer TTL / hop limit change flushes",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.outer.ttl = 7;
                v.extend(frames(&mut f, 3, 1000));
                v
            },
            want: &[(3, 3000), (3, 3000)],
            v4_only: false,
        },
        Case {
            name: "outer TOS / traffic class change flushes",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.outer.tos = 0x02;
                v.extend(frames(&mut f, 3, 1000));
                v
            },
            want: &[(3, 3000), (3, 3000)],
            v4_only: false,
        },
        Case {
            name: "outer DF change flushes",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.outer.dont_frag = true;
                v.extend(frames(&mut f, 3, 1000));
                v
            },
            want: &[(3, 3000), (3, 3000)],
            v4_only: true,
        },
        Case {
            name: "outer IPv4 ID jump flushes",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.ip_id = f.ip_id.wrapping_add(3);
                v.extend(frames(&mut f, 3, 1000));
                v
            },
            want: &[(3, 3000), (3, 3000)],
            v4_only: true,
        },
        Case {
            name: "outer IPv4 ID fixed is latched",
            build: |s| {
                let mut f = tflow(s, 1);
                (0..4)
                    .map(|_| {
                        f.ip_id = 5;
                        f.frame(1000, TcpFlags::empty()).unwrap()
                    })
                    .collect()
            },
            want: &[(4, 4000)],
            v4_only: true,
        },
        Case {
            name: "VNI change: another flow",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.vni = 7;
                v.extend(frames(&mut f, 2, 1000));
                f.vni = 42;
                v.extend(frames(&mut f, 2, 1000));
                v
            },
            want: &[(3, 3000), (2, 2000), (2, 2000)],
            v4_only: false,
        },
        Case {
            name: "outer checksum zero vs non-zero: another flow",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.udp_csum = false;
                v.extend(frames(&mut f, 3, 1000));
                v
            },
            want: &[(3, 3000), (3, 3000)],
            v4_only: false,
        },
        Case {
            name: "outer source port change: another flow",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                f.outer.src_port += 1;
                v.extend(frames(&mut f, 3, 1000));
                v
            },
            want: &[(3, 3000), (3, 3000)],
            v4_only: false,
        },
        Case {
            name: "bad outer checksum: bypassed, aggregate kept",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                let mut bad = v[1].clone();
                let h = Medium::Ethernet.parse(&bad).unwrap();
                bad[h.l4_offset + 6] ^= 0x40;
                v.insert(2, bad);
                v
            },
            // The inserted copy repeats segment 2: after it, segment 3 still follows.
            want: &[(1, 1000), (3, 3000)],
            v4_only: false,
        },
        Case {
            name: "bad inner checksum: bypassed, aggregate kept",
            build: |s| {
                let mut f = tflow(s, 1);
                let mut v = frames(&mut f, 3, 1000);
                let mut bad = v[1].clone();
                let n = bad.len();
                bad[n - 1] ^= 0x40;
                refresh_outer(&mut bad);
                v.insert(2, bad);
                v
            },
            want: &[(1, 1000), (3, 3000)],
            v4_only: false,
        },
    ]
}

#[test]
fn table() {
    for s in shapes() {
        for c in cases() {
            if c.v4_only && s.outer_v6 {
                continue;
            }
            let ctx = format!("{} [{s:?}]", c.name);
            let input = (c.build)(&s);
            let (out, counters) = run(config(), &input);
            expect(&out, c.want, &ctx);
            assert_eq!(counters.packets_in, input.len() as u64, "{ctx}");
            assert_eq!(counters.packets_out, out.len() as u64, "{ctx}");
        }
    }
}

#[test]
fn tunnel_gso_bits_and_checksum_states() {
    for s in shapes() {
        let ctx = format!("{s:?}");
        let mut f = tflow(&s, 3);
        let (out, _) = run(config(), &frames(&mut f, 3, 1000));
        let m = out[0].meta;
        let inner = match (s.inner, s.inner_v6) {
            (Transport::Udp, _) => GsoType::UDP_L4,
            (_, false) => GsoType::TCPV4,
            (_, true) => GsoType::TCPV6,
        };
        assert_eq!(m.gso_type, GsoType::UDP_TUNNEL_CSUM | inner, "{ctx}");
        assert_eq!((m.gso_size, m.gso_segs), (1000, 3), "{ctx}");
        assert_eq!(m.encap.unwrap().tunnel, s.kind, "{ctx}");
        // A single packet is delivered as it came, both checksums verified.
        let (one, c) = run(config(), &frames(&mut f, 1, 1000));
        assert_eq!(one[0].meta.csum, ChecksumState::Unnecessary { level: 1 }, "{ctx}");
        assert_eq!(one[0].meta.encap, None, "{ctx}");
        assert_eq!(c.checksums_verified, 1, "{ctx}: the inner checksum comes from the outer sum");
    }
}

#[test]
fn fixed_id_latches_per_header_level() {
    // tcp4_gro_complete: outer latch -> FIXEDID, inner latch -> FIXEDID_INNER;
    // an inner IPv6 TCP gets neither (offload-rules 2.6).
    for inner_v6 in [false, true] {
        let s = Shape { kind: TunnelKind::Vxlan, geneve_opts: 0, outer_v6: false, inner: Transport::Tcp, inner_v6 };
        let mut f = tflow(&s, 4);
        let fixed_outer: Vec<_> = (0..3)
            .map(|_| {
                f.ip_id = 9;
                f.frame(1000, TcpFlags::empty()).unwrap()
            })
            .collect();
        let (out, _) = run(config(), &fixed_outer);
        assert_eq!(out.len(), 1);
        let t = out[0].meta.gso_type;
        assert_eq!(t.contains(GsoType::TCP_FIXEDID), !inner_v6, "{t:?}");
        assert!(!t.contains(GsoType::TCP_FIXEDID_INNER), "{t:?}");
        if !inner_v6 {
            let mut f = tflow(&s, 5);
            let both: Vec<_> = (0..3)
                .map(|_| {
                    f.inner.ip_id = 3;
                    f.frame(1000, TcpFlags::empty()).unwrap()
                })
                .collect();
            let (out, _) = run(config(), &both);
            let t = out[0].meta.gso_type;
            assert!(t.contains(GsoType::TCP_FIXEDID_INNER) && !t.contains(GsoType::TCP_FIXEDID), "{t:?}");
        }
    }
}

#[test]
fn geneve_rules() {
    let s = Shape { kind: TunnelKind::Geneve, geneve_opts: 8, outer_v6: false, inner: Transport::Tcp, inner_v6: false };
    // Different option bytes: another flow (the whole header is compared).
    let mut f = tflow(&s, 1);
    let mut v = frames(&mut f, 3, 1000);
    f.geneve_options[7] ^= 1;
    v.extend(frames(&mut f, 3, 1000));
    let (out, _) = run(config(), &v);
    expect(&out, &[(3, 3000), (3, 3000)], "geneve options");
    // Different option length: another flow.
    let mut f = tflow(&s, 2);
    let mut v = frames(&mut f, 3, 1000);
    f.geneve_options.truncate(4);
    v.extend(frames(&mut f, 3, 1000));
    let (out, _) = run(config(), &v);
    expect(&out, &[(3, 3000), (3, 3000)], "geneve option length");
    // Version 1, the O bit, or a non-Ethernet payload: not coalesced.
    for (at, value, what) in
        [(0usize, 0x42u8, "version 1"), (1, 0x80, "O bit"), (2, 0x08, "non-Ethernet protocol type")]
    {
        let mut f = tflow(&s, 3);
        let v: Vec<Vec<u8>> = frames(&mut f, 4, 1000)
            .into_iter()
            .map(|mut fr| {
                let tnl = 14 + 20 + 8 + at;
                fr[tnl] = if at == 0 { (fr[tnl] & 0x3f) | (value & 0xc0) } else { fr[tnl] | value };
                refresh_outer(&mut fr);
                fr
            })
            .collect();
        let (out, c) = run(config(), &v);
        assert_eq!(out.len(), 4, "{what}");
        assert_eq!(c.bypassed.tunnel, 4, "{what}");
    }
}

#[test]
fn without_a_tunnel_port_it_is_plain_udp() {
    let s = Shape { kind: TunnelKind::Vxlan, geneve_opts: 0, outer_v6: false, inner: Transport::Tcp, inner_v6: false };
    let mut f = tflow(&s, 1);
    let v = frames(&mut f, 4, 1000);
    let (out, c) = run(GroConfig::default(), &v);
    assert_eq!((out.len(), c.bypassed.udp_off), (4, 4));
    let (out, _) = run(GroConfig::forwarder(), &v);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].meta.gso_type, GsoType::UDP_L4, "outer UDP segment GRO, as Linux without a tunnel socket");
    assert_eq!(out[0].meta.encap, None);
}

#[test]
fn inner_udp_follows_the_udp_mode_and_nested_tunnels_are_refused() {
    let s = Shape { kind: TunnelKind::Vxlan, geneve_opts: 0, outer_v6: true, inner: Transport::Udp, inner_v6: false };
    let mut f = tflow(&s, 1);
    let v = frames(&mut f, 4, 800);
    let off = GroConfig::default().with_tunnel(VXLAN_PORT, TunnelKind::Vxlan);
    let (out, c) = run(off, &v);
    assert_eq!((out.len(), c.bypassed.udp_off), (4, 4));
    // Checksums were verified before the UDP mode said no (as Linux does).
    assert!(out.iter().all(|p| p.meta.csum == ChecksumState::Unnecessary { level: 1 }));
    let mut nested = tflow(&s, 2);
    nested.inner.spec.dst_port = VXLAN_PORT;
    let (out, c) = run(config(), &frames(&mut nested, 3, 800));
    assert_eq!((out.len(), c.bypassed.tunnel), (3, 3));
}

#[test]
fn truncated_and_garbled_tunnel_frames_do_not_panic() {
    for s in shapes() {
        let mut f = tflow(&s, 1);
        let good = f.frame(200, TcpFlags::empty()).unwrap();
        let mut g = Gro::new(config());
        for cut in 0..good.len() {
            g.receive_frame(&good[..cut]);
        }
        for at in 0..f.outer_len() + 60 {
            let mut bad = good.clone();
            bad[at] ^= 0xA5;
            g.receive_frame(&bad);
            g.receive_frame(&good);
        }
        g.flush();
        let _ = g.drain_delivered().count();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random tunnel traffic (3 flows of one shape, random sizes, PSH, outer
    /// TTL bumps, lost segments, batch ends): every inner payload byte comes
    /// out once, in order per flow, and every delivered packet's headers
    /// verify (`check_tunnel_packet`).
    #[test]
    fn tunnel_payload_is_conserved_and_headers_verify(
        shape in 0usize..18,
        evs in prop::collection::vec((0usize..3, 1usize..1400, prop::bool::weighted(0.1), prop::bool::weighted(0.05), prop::bool::weighted(0.05), prop::bool::weighted(0.05)), 1..80),
    ) {
        let s = shapes()[shape];
        let mut flows: Vec<TunnelFlow> = (0..3).map(|i| tflow(&s, 10 + i as u32)).collect();
        let mut g = Gro::new(config());
        let mut sent: Vec<Vec<u8>> = vec![Vec::new(); 3];
        for (i, len, psh, ttl, lose, flush) in evs {
            let f = &mut flows[i];
            if ttl {
                f.outer.ttl = f.outer.ttl.wrapping_sub(1);
            }
            let off = f.inner.stream_offset;
            let flags = if psh { TcpFlags::PSH } else { TcpFlags::empty() };
            let frame = f.frame(len, flags).unwrap();
            if lose {
                continue;
            }
            sent[i].extend((0..len as u64).map(|k| payload_byte(off + k)));
            g.receive_frame(&frame);
            if flush {
                g.flush();
            }
        }
        g.flush();
        let mut got: Vec<Vec<u8>> = vec![Vec::new(); 3];
        for p in g.drain_delivered() {
            let payload = check_tunnel_packet(&p, &format!("{s:?}"));
            let f = bytes(&p);
            let h = Medium::Ethernet.parse(&f).unwrap();
            let sport = be16(&f, h.l4_offset);
            let i = flows.iter().position(|t| t.outer.src_port == sport).unwrap();
            got[i].extend(payload);
        }
        prop_assert_eq!(got, sent);
    }
}

/// Recomputes the inner IPv4 header checksum of a tunnel frame whose inner
/// IPv4 header is at `il3` (nothing if the frame is shorter).
fn refresh_inner_ipv4(frame: &mut [u8], il3: usize) {
    if frame.len() >= il3 + 20 {
        frame[il3 + 10..il3 + 12].fill(0);
        let c = csum::checksum(&frame[il3..il3 + 20]);
        frame[il3 + 10..il3 + 12].copy_from_slice(&c.to_be_bytes());
    }
}

/// The packets and counters an engine delivers for `bursts`, each burst
/// flushed at its end.
fn deliver(mut g: Gro, bursts: &[Vec<Packet>]) -> (Vec<(Vec<u8>, OffloadMeta)>, GroCounters) {
    let mut out = Vec::new();
    for burst in bursts {
        let mut pkts = burst.clone();
        g.receive_burst(&mut pkts);
        g.flush();
        out.extend(g.drain_delivered().map(|p| (bytes(&p), p.meta)));
    }
    (out, *g.counters())
}

/// [`deliver`] by an engine of configuration `cfg` without the tunnel fast
/// path: the reference the fast path is held to.
fn deliver_by_the_full_path(cfg: GroConfig, bursts: &[Vec<Packet>]) -> (Vec<(Vec<u8>, OffloadMeta)>, GroCounters) {
    let mut full = Gro::new(cfg);
    full.tunnel_fast = false;
    deliver(full, bursts)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The tunnel fast path (`Gro::tunnel_fast`: a packet matched against
    /// its flow's header template) decides as the full path does: random
    /// traffic of two flows of one shape, random sizes and PSH, header bytes
    /// changed (their IPv4 header and outer UDP checksums refreshed or not,
    /// so that changed packets reach the merge rules or are turned away
    /// early; some outer UDP checksums zeroed), each packet's checksum state none, unnecessary level 0 or 1,
    /// or partial, with or without a receive hash, in bursts, goes out of an
    /// engine with the fast path and one without it the same: every
    /// packet's bytes and metadata, in order, and every counter.
    #[test]
    fn tunnel_fast_path_decides_as_the_full_path(
        shape in 0usize..18,
        wide in any::<bool>(),
        evs in prop::collection::vec(
            (0usize..2, 1usize..1400, prop::bool::weighted(0.05), prop::option::weighted(0.2, (any::<u16>(), 1u8..=255, any::<bool>())),
             prop::bool::weighted(0.6), 0u8..4, prop::option::weighted(0.1, 0u32..4), prop::bool::weighted(0.1)),
            1..120),
        zeros in prop::collection::vec(prop::bool::weighted(0.1), 120),
    ) {
        let s = shapes()[shape];
        let mut flows: Vec<TunnelFlow> = (0..2).map(|i| tflow(&s, 20 + i as u32)).collect();
        let mut bursts = vec![Vec::new()];
        for ((i, len, psh, change, refresh, csum_state, rss, end), zero_outer) in evs.into_iter().zip(zeros) {
            let f = &mut flows[i];
            let flags = if psh { TcpFlags::PSH } else { TcpFlags::empty() };
            let mut frame = f.frame(len, flags).unwrap();
            if let Some((at, xor, varying)) = change {
                let headers = frame.len() - len;
                let at = if varying {
                    // The fields that change from segment to segment (the
                    // ones a header template leaves out).
                    let (ip, iip) = (if s.outer_v6 { 40 } else { 20 }, if s.inner_v6 { 40 } else { 20 });
                    let (l4, il3) = (14 + ip, f.outer_len() + 14);
                    let il4 = il3 + iip;
                    let fields = [16, 18, 24, l4 + 4, l4 + 6, il3 + 2, il3 + 4, il3 + 10, il4 + 4, il4 + 16];
                    // (A UDP inner's "TCP" fields may lie past a short frame.)
                    (fields[at as usize % fields.len()] + usize::from(xor & 1)).min(frame.len() - 1)
                } else {
                    at as usize % headers
                };
                frame[at] ^= xor;
                if refresh {
                    if !s.inner_v6 {
                        refresh_inner_ipv4(&mut frame, f.outer_len() + 14);
                    }
                    if Medium::Ethernet.parse(&frame).is_ok() {
                        refresh_outer(&mut frame);
                    }
                }
            }
            if zero_outer {
                // Zero-checksum UDP: another tunnel flow (offload-rules 2.6).
                let l4 = 14 + if s.outer_v6 { 40 } else { 20 };
                frame[l4 + 6..l4 + 8].fill(0);
            }
            let mut p = Packet::from_frame(&frame);
            p.meta.csum = match csum_state {
                0 => ChecksumState::None,
                1 => ChecksumState::Unnecessary { level: 0 },
                2 => ChecksumState::Unnecessary { level: 1 },
                _ => ChecksumState::Partial { start: 0, offset: 0 },
            };
            p.meta.rss_hash = rss;
            bursts.last_mut().unwrap().push(p);
            if end {
                bursts.push(Vec::new());
            }
        }
        let cfg = GroConfig { buckets: if wide { 64 } else { 8 }, ..config() };
        let fast = deliver(Gro::new(cfg), &bursts);
        let full = deliver_by_the_full_path(cfg, &bursts);
        prop_assert_eq!(&fast.0, &full.0, "{:?}", s);
        prop_assert_eq!(fast.1, full.1, "{:?}", s);
    }
}

/// `Unnecessary { level: 0 }` vouches for a non-zero outer checksum
/// (offload-rules 2.6, 0.3): the inner checksum is checked from the sum
/// that implies, without summing the payload, as Linux converts it
/// (`skb_gro_checksum_try_convert`); so a payload byte changed after the
/// outer checksum was computed goes unseen, as in Linux, a wrong outer
/// checksum makes that check fail and the software sum decide, and a bad
/// inner checksum under a good outer one fails both and is delivered as it
/// came. Every shape, on the fast and the full
/// path.
#[test]
fn level_0_checks_the_inner_checksum_from_the_outer_sum() {
    for s in shapes() {
        for fast in [true, false] {
            let ctx = format!("{s:?} fast {fast}");
            let mut f = tflow(&s, 5);
            let il4 = f.outer_len() + 14 + if s.inner_v6 { 40 } else { 20 };
            let field = il4 + if s.inner == Transport::Tcp { 16 } else { 6 };
            let level0 = |frames: &[Vec<u8>]| -> Vec<Packet> {
                frames
                    .iter()
                    .map(|fr| {
                        let mut p = Packet::from_frame(fr);
                        p.meta.csum = ChecksumState::Unnecessary { level: 0 };
                        p
                    })
                    .collect()
            };
            let gro = || {
                let mut g = Gro::new(config());
                g.tunnel_fast = fast;
                g
            };
            let mut v = frames(&mut f, 4, 1000);
            // A payload byte changed under the vouched-for outer checksum.
            let last = v.len() - 1;
            v[last][field + 40] ^= 0x5A;
            let (out, c) = deliver(gro(), &[level0(&v)]);
            assert_eq!(out.len(), 1, "{ctx}");
            assert_eq!(out[0].1.gso_segs, 4, "{ctx}");
            assert_eq!(c.checksums_verified, 0, "{ctx}: no payload summed");
            // A wrong outer checksum vouched for: the check from its sum
            // fails, the software sum of the inner segment decides.
            let mut v = frames(&mut f, 2, 1000);
            let outer_field = 14 + if s.outer_v6 { 40 } else { 20 } + 6;
            v[1][outer_field] ^= 0x01;
            let (out, c) = deliver(gro(), &[level0(&v)]);
            assert_eq!((out.len(), out[0].1.gso_segs, c.checksums_verified), (1, 2, 1), "{ctx}");
            // A bad inner checksum under a good outer one.
            let mut v = frames(&mut f, 1, 1000);
            v[0][field] ^= 0x01;
            refresh_outer(&mut v[0]);
            let (out, c) = deliver(gro(), &[level0(&v)]);
            assert_eq!((out.len(), c.bypassed.bad_checksum, c.checksums_verified), (1, 1, 1), "{ctx}");
            assert_eq!(out[0].1.csum, ChecksumState::Unnecessary { level: 0 }, "{ctx}: delivered as it came");
            assert_eq!(out[0].0, v[0], "{ctx}");
        }
    }
}

/// The fast path is taken: a TCP flow in VXLAN whose checksums are trusted
/// merges its later segments there, and only there (an engine without it
/// gives the same packets, counted by the full path).
#[test]
fn tunnel_fast_path_takes_a_flows_later_segments() {
    let s = Shape { kind: TunnelKind::Vxlan, geneve_opts: 0, outer_v6: false, inner: Transport::Tcp, inner_v6: false };
    let mut f = tflow(&s, 3);
    let burst: Vec<Packet> = (0..8)
        .map(|_| {
            let mut p = Packet::from_frame(&f.frame(1000, TcpFlags::empty()).unwrap());
            p.meta.csum = ChecksumState::Unnecessary { level: 1 };
            p
        })
        .collect();
    let mut g = Gro::new(config());
    let mut pkts = burst.clone();
    g.receive_burst(&mut pkts);
    assert_eq!(g.fast_merges, 7, "the first segment starts the aggregate, the others take the fast path");
    g.flush();
    let fast: Vec<_> = g.drain_delivered().map(|p| (bytes(&p), p.meta)).collect();
    assert_eq!(fast.len(), 1);
    assert_eq!(fast[0].1.gso_segs, 8);
    let (out, _) = deliver_by_the_full_path(config(), &[burst]);
    assert_eq!(out, fast);
}

/// The size limit ends a tunnel aggregate in the fast path: a bulk flow in
/// VXLAN (checksums trusted or verified, with or without a receive hash)
/// starts its next aggregate there (`Gro::restart_tunnel`), and gives the
/// packets and counters of an engine without the fast path.
#[test]
fn tunnel_fast_path_restarts_at_the_size_limit() {
    let s = Shape { kind: TunnelKind::Vxlan, geneve_opts: 0, outer_v6: false, inner: Transport::Tcp, inner_v6: false };
    for csum in [ChecksumState::Unnecessary { level: 1 }, ChecksumState::None] {
        for rss in [None, Some(0x1234_5678)] {
            let mut f = tflow(&s, 3);
            let burst: Vec<Packet> = (0..100)
                .map(|_| {
                    let mut p = Packet::from_frame(&f.frame(1400, TcpFlags::empty()).unwrap());
                    p.meta.csum = csum;
                    p.meta.rss_hash = rss;
                    p
                })
                .collect();
            let mut g = Gro::new(config());
            let mut pkts = burst.clone();
            g.receive_burst(&mut pkts);
            // 46 segments of 1400 bytes reach the 64 KB limit: two restarts.
            assert_eq!((g.tunnel_fast_restarts, g.fast_merges), (2, 97), "{csum:?} {rss:?}");
            g.flush();
            let fast: Vec<_> = g.drain_delivered().map(|p| (bytes(&p), p.meta)).collect();
            let fast_counters = *g.counters();
            assert_eq!(fast.len(), 3);
            let (out, counters) = deliver_by_the_full_path(config(), &[burst]);
            assert_eq!(out, fast, "{csum:?} {rss:?}");
            assert_eq!(counters, fast_counters, "{csum:?} {rss:?}");
        }
    }
}

/// One arrival of [`tunnel_fast_path_decides_as_the_full_path_under_edits`].
#[derive(Debug, Clone)]
struct TunnelEv {
    /// 0, 1: tunnel flows; 2: a tunnel flow with flow 0's outer ports and
    /// another VNI (the same fast-path hint); 3: a plain TCP flow.
    flow: usize,
    len: usize,
    psh: bool,
    /// 0: as built; 1: outer TTL/hop limit changed from here on; 2: lost
    /// (a sequence gap); 3: outer IPv4 header checksum broken (IPv6: the
    /// outer UDP checksum); 4: inner L4 checksum broken, outer refreshed;
    /// 5: Ethernet padding; 6: fixed outer IPv4 ID; 7: outer UDP or IP
    /// length off by one, outer refreshed; 8: one header bit flipped,
    /// checksums refreshed; 9: outer UDP checksum zeroed; 10: outer
    /// TOS/traffic class changed from here on; 11: inner IPv4 header
    /// checksum broken, outer refreshed.
    edit: u8,
    at: usize,
    /// 0: none; 1, 2: unnecessary level 0, 1; 3: partial; 4: complete
    /// (right or, with `at` odd, wrong).
    csum: u8,
    rss: bool,
    end: bool,
}

fn tunnel_ev() -> impl Strategy<Value = TunnelEv> {
    (
        prop_oneof![6 => 0usize..2, 1 => Just(2usize), 1 => Just(3usize)],
        prop_oneof![6 => Just(1400usize), 2 => Just(700usize), 1 => 1usize..1400],
        prop::bool::weighted(0.05),
        prop_oneof![14 => Just(0u8), 6 => 1u8..12],
        0usize..4096,
        0u8..5,
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(flow, len, psh, edit, at, csum, rss, end)| TunnelEv {
            flow,
            len,
            psh,
            edit,
            at,
            csum,
            rss,
            end,
        })
}

fn tunnel_configs() -> impl Strategy<Value = GroConfig> {
    prop_oneof![
        Just(config()),
        Just(GroConfig { buckets: 64, ..config() }),
        Just(GroConfig { buckets: 1, bucket_depth: 2, ..config() }),
        Just(GroConfig { trim_padding: false, ..config() }),
        Just(GroConfig { tcp_fraglist: true, ..config() }),
        Just(GroConfig { fixed_id: FixedIdRule::Legacy, ..config() }),
        Just(
            GroConfig::kernel_6_18()
                .with_tunnel(VXLAN_PORT, TunnelKind::Vxlan)
                .with_tunnel(GENEVE_PORT, TunnelKind::Geneve)
        ),
        Just(GroConfig { max_size: 9000, ..config() }),
        // Two or three segments of 1400 bytes: the size limit restarts
        // aggregates on the fast path (`Gro::restart_tunnel`).
        Just(GroConfig { max_size: 4000, ..config() }),
        Just(GroConfig { lro: true, lro_queue_max: 16, ..config() }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The tunnel fast path (`Gro::tunnel_fast`, tried before any parse)
    /// decides as the full path does under each outer and inner rule
    /// broken on purpose: random traffic of every tunnel shape (VXLAN and
    /// Geneve with and without options, IPv4 and IPv6 outers, TCP/IPv4,
    /// TCP/IPv6 and UDP inners), two flows, a third that shares the first
    /// one's fast-path hint, and a plain TCP flow in the same table; TTL,
    /// TOS, fixed outer IDs, gaps, broken IPv4 header checksums at both
    /// levels, broken outer UDP and inner checksums, wrong outer UDP and IP
    /// lengths, padding, zeroed outer
    /// checksums and flipped header bits; every checksum state (a complete
    /// sum right or wrong), with or without receive hashes, under ten
    /// configurations (small size limits and LRO's sorted batches among
    /// them): the same packets and counters with the fast path as without
    /// it.
    #[test]
    fn tunnel_fast_path_decides_as_the_full_path_under_edits(
        shape in 0usize..18,
        events in prop::collection::vec(tunnel_ev(), 1..160),
        cfg in tunnel_configs(),
    ) {
        let s = shapes()[shape];
        let mut tunnels: Vec<TunnelFlow> = (0..3).map(|i| tflow(&s, 30 + i as u32)).collect();
        tunnels[2].outer.src_port = tunnels[0].outer.src_port;
        tunnels[2].vni = 7;
        let mut plain = crate::traffic::Flow::new(FlowSpec::new(Transport::Tcp, false, 9));
        let outer_l4 = 14 + if s.outer_v6 { 40 } else { 20 };
        let mut bursts = vec![Vec::new()];
        for e in &events {
            let frame = if e.flow == 3 {
                plain.frame(e.len, TcpFlags::empty()).unwrap()
            } else {
                let f = &mut tunnels[e.flow];
                match e.edit {
                    1 => f.outer.ttl ^= 1,
                    6 => f.ip_id = 0x1234,
                    10 => f.outer.tos ^= 4,
                    _ => {}
                }
                let flags = if e.psh { TcpFlags::PSH } else { TcpFlags::empty() };
                let mut frame = f.frame(e.len, flags).unwrap();
                let il3 = f.outer_len() + 14;
                let il4 = il3 + if s.inner_v6 { 40 } else { 20 };
                match e.edit {
                    2 => continue,
                    3 if !s.outer_v6 => frame[14 + 10] ^= 0x01,
                    3 => frame[outer_l4 + 6] ^= 0x01,
                    4 => {
                        frame[il4 + if s.inner == Transport::Tcp { 16 } else { 6 }] ^= 0x01;
                        refresh_outer(&mut frame);
                    }
                    5 => frame.extend_from_slice(&[0; 6][..1 + e.at % 6]),
                    7 => {
                        // The outer UDP length, or (`at` odd) the outer IP length.
                        let at = if e.at % 2 == 0 { outer_l4 + 5 } else if s.outer_v6 { 14 + 5 } else { 14 + 3 };
                        frame[at] ^= 0x01;
                        // (One byte too long no longer parses: left as it is.)
                        if Medium::Ethernet.parse(&frame).is_ok() {
                            refresh_outer(&mut frame);
                        }
                    }
                    8 => {
                        let at = e.at % (frame.len() - e.len);
                        frame[at] ^= 1 << (e.at % 8);
                        if !s.inner_v6 {
                            refresh_inner_ipv4(&mut frame, il3);
                        }
                        if Medium::Ethernet.parse(&frame).is_ok() {
                            refresh_outer(&mut frame);
                        }
                    }
                    9 => frame[outer_l4 + 6..outer_l4 + 8].fill(0),
                    11 if !s.inner_v6 => {
                        frame[il3 + 10] ^= 0x01;
                        refresh_outer(&mut frame);
                    }
                    _ => {}
                }
                frame
            };
            let mut p = Packet::from_frame(&frame);
            p.meta.csum = match e.csum {
                0 => ChecksumState::None,
                1 => ChecksumState::Unnecessary { level: 0 },
                2 => ChecksumState::Unnecessary { level: 1 },
                3 => ChecksumState::Partial { start: 0, offset: 0 },
                _ => {
                    let sum = csum::ones_sum(&frame[14.min(frame.len())..]);
                    ChecksumState::Complete { sum: sum.wrapping_add((e.at % 2) as u16) }
                }
            };
            if e.rss {
                p.meta.rss_hash = Some(0x9E37_79B9u32.wrapping_mul(e.flow as u32 + 1));
            }
            bursts.last_mut().unwrap().push(p);
            if e.end {
                bursts.push(Vec::new());
            }
        }
        let fast = deliver(Gro::new(cfg), &bursts);
        let full = deliver_by_the_full_path(cfg, &bursts);
        prop_assert_eq!(&fast.0, &full.0, "{:?}", s);
        prop_assert_eq!(fast.1, full.1, "{:?}", s);
    }
}
