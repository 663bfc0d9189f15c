//! The running kernel as the oracle of **tunnel GRO** (docs/offload-rules.md
//! 2.6, docs/kernel-oracle.md section 5): VXLAN frames are written into an
//! `IFF_NAPI` TAP ([`superpacket_lab::GroOracle`]) in a namespace that also
//! holds a VXLAN device (`Netlink::add_vxlan`: external mode, UDP tunnel
//! sockets on port 4789 for IPv4 and IPv6), so the TAP's GRO coalesces them
//! on their inner flows (`udp_gro_receive` finds the tunnel socket); an
//! AF_PACKET socket on the TAP reads the aggregates. The same frames go
//! through superpacket's engine with [`GroConfig::kernel_6_18`] plus the
//! VXLAN port; the delivered packets must match, per flow: every byte (outer
//! and inner lengths, IPv4 header checksums, the outer UDP checksum field,
//! the inner pseudo-header sum), gso_type, gso_size and the checksum flags
//! and offsets of the virtio_net_hdr (AF_PACKET reports a tunnel aggregate
//! as its inner type, with `csum_start` at the inner L4 header).
//!
//! Cases: IPv4 and IPv6 outers, TCP/IPv4, TCP/IPv6 and UDP inners, outer
//! UDP checksum on and zero, and each outer rule violated (TTL/hop limit,
//! TOS/traffic class, DF, IPv4 ID, flow label, VNI, source port, checksum
//! zero vs non-zero, bad outer and inner checksums). Geneve is not built
//! into this kernel (`CONFIG_GENEVE` is off): its cases are unit tests
//! against the written rules (`offload/gro/tests.rs`, "tunnel").
//!
//! Needs root (namespaces, TAP); fails with a clear message otherwise unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, then prints SKIPPED.

mod common;

use std::collections::BTreeMap;

use common::raw_ip;
use superpacket::offload::gro::{self, Gro, GroConfig, UdpGroMode};
use superpacket::packet::TunnelKind;
use superpacket::packet::virtio::{F_DATA_VALID, F_NEEDS_CSUM, VirtioNetHdr};
use superpacket::traffic::{FlowSpec, Transport, TunnelFlow};
use superpacket::wire::{L3Kind, Medium, TcpFlags};
use superpacket_lab::{GroOracle, GroOracleConfig};

/// The VXLAN port of the kernel's tunnel socket and of the engine's config.
const PORT: u16 = 4789;

/// One delivered packet, in a form both sides produce.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    frame: Vec<u8>,
    gso_type: u8,
    gso_size: u16,
    flags: u8,
    csum: Option<(u16, u16)>,
}

impl Seen {
    fn from_hdr(hdr: &VirtioNetHdr, frame: Vec<u8>) -> Seen {
        let gso = hdr.gso_type != 0;
        Seen {
            frame,
            gso_type: hdr.gso_type,
            gso_size: if gso { hdr.gso_size } else { 0 },
            flags: hdr.flags & (F_NEEDS_CSUM | F_DATA_VALID),
            csum: (hdr.flags & F_NEEDS_CSUM != 0).then_some((hdr.csum_start, hdr.csum_offset)),
        }
    }

    fn short(&self) -> String {
        format!(
            "{}B gso={} size={} flags={} csum={:?}",
            self.frame.len(),
            self.gso_type,
            self.gso_size,
            self.flags,
            self.csum
        )
    }

    /// The flow: outer source port, outer UDP checksum zero or not, VNI
    /// word, inner source port (delivery order across flows follows hash
    /// buckets, which differ).
    fn flow(&self) -> (u16, bool, u32, u16) {
        let f = &self.frame;
        let Ok(h) = Medium::Ethernet.parse(f) else { return (0, false, 0, 0) };
        let u = h.l4_offset;
        let sport = u16::from_be_bytes([f[u], f[u + 1]]);
        let zero = f[u + 6] == 0 && f[u + 7] == 0;
        let vni = u32::from_be_bytes([f[u + 12], f[u + 13], f[u + 14], f[u + 15]]);
        let inner = Medium::Ethernet.parse(&f[u + 16..]).ok();
        let isport = inner.map_or(0, |i| {
            let at = u + 16 + i.l4_offset;
            u16::from_be_bytes([f[at], f[at + 1]])
        });
        (sport, zero, vni, isport)
    }
}

type Flows = BTreeMap<(u16, bool, u32, u16), Vec<Seen>>;

fn by_flow(v: &[Seen]) -> Flows {
    let mut m = Flows::new();
    for s in v {
        m.entry(s.flow()).or_default().push(s.clone());
    }
    m
}

fn describe(v: &[Seen]) -> String {
    v.iter().map(Seen::short).collect::<Vec<_>>().join(", ")
}

fn ours(cfg: GroConfig, frames: &[Vec<u8>]) -> Vec<Seen> {
    let mut g = Gro::new(cfg);
    for f in frames {
        g.receive_frame(f);
    }
    g.flush();
    let mut buf = Vec::new();
    g.drain_delivered()
        .map(|p| {
            let mut meta = gro::capture_bytes(&p, Medium::Ethernet, &mut buf);
            // The packet socket's 10/12-byte header (`virtio_net_hdr_from_skb`)
            // carries a tunnel aggregate's inner type only: export ours so.
            meta.gso_type = meta
                .gso_type
                .without(superpacket::packet::GsoType::UDP_TUNNEL | superpacket::packet::GsoType::UDP_TUNNEL_CSUM);
            meta.encap = None;
            let hdr = raw_ip::export_hdr(&meta, &buf, Medium::Ethernet, true);
            Seen::from_hdr(&hdr, buf.clone())
        })
        .collect()
}

/// Tunnel flow `idx`: VXLAN over IPv4 or IPv6, carrying TCP (no
/// timestamps) or UDP over IPv4 or IPv6.
fn tunnel(outer_v6: bool, t: Transport, inner_v6: bool, idx: u32) -> TunnelFlow {
    let mut inner = FlowSpec::new(t, inner_v6, idx);
    inner.tcp_timestamps = false;
    if t == Transport::Udp {
        inner.dst_port = 9000; // not the tunnel port
    }
    TunnelFlow::new(TunnelKind::Vxlan, outer_v6, inner, idx)
}

fn run(f: &mut TunnelFlow, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| f.frame(len, TcpFlags::empty()).unwrap()).collect()
}

/// Recomputes a tunnel frame's outer IPv4 header checksum and (when not
/// zero) its outer UDP checksum after an edit.
fn refresh_outer(frame: &mut [u8]) {
    let h = Medium::Ethernet.parse(frame).unwrap();
    if h.l3 == L3Kind::Ipv4 {
        let l3 = h.l3_offset;
        frame[l3 + 10..l3 + 12].fill(0);
        let c = superpacket::csum::checksum(&frame[l3..l3 + 20]);
        frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    let u = h.l4_offset;
    if frame[u + 6] != 0 || frame[u + 7] != 0 {
        frame[u + 6..u + 8].fill(0);
        let pseudo = superpacket::validate::l4_pseudo_header_sum(frame, &h).unwrap();
        let mut c =
            !superpacket::csum::ones_add(pseudo, superpacket::csum::ones_sum(&frame[u..h.l3_offset + h.l3_len]));
        if c == 0 {
            c = 0xFFFF;
        }
        frame[u + 6..u + 8].copy_from_slice(&c.to_be_bytes());
    }
}

struct Case {
    name: String,
    frames: Vec<Vec<u8>>,
    udp: bool,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for outer_v6 in [false, true] {
        let o = if outer_v6 { "outer IPv6" } else { "outer IPv4" };
        let mut add = |name: &str, frames: Vec<Vec<u8>>, udp: bool| {
            out.push(Case { name: format!("{o}: {name}"), frames, udp });
        };
        // Plain runs.
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 1);
        let mut fr = run(&mut f, 9, 1000);
        fr.push(f.frame(1000, TcpFlags::PSH).unwrap());
        add("TCP/IPv4 10 segments, PSH last", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 2);
        f.udp_csum = false;
        add("TCP/IPv4, outer UDP checksum 0", run(&mut f, 8, 1200), false);
        let mut f = tunnel(outer_v6, Transport::Tcp, true, 3);
        add("TCP/IPv6 8 segments", run(&mut f, 8, 1000), false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 4);
        add("64 KB limit (70 segments)", run(&mut f, 70, 1000), false);
        let mut f = tunnel(outer_v6, Transport::Udp, false, 5);
        let mut fr = run(&mut f, 6, 1000);
        fr.push(f.frame(300, TcpFlags::empty()).unwrap());
        fr.extend(run(&mut f, 2, 1000));
        add("UDP/IPv4 6 x 1000 + 300 + 2", fr, true);
        let mut f = tunnel(outer_v6, Transport::Udp, true, 6);
        f.udp_csum = false;
        add("UDP/IPv6, outer UDP checksum 0", run(&mut f, 6, 900), true);
        let (mut a, mut b) = (tunnel(outer_v6, Transport::Tcp, false, 7), tunnel(outer_v6, Transport::Tcp, false, 8));
        b.outer.src_port = a.outer.src_port;
        let fr =
            (0..6).flat_map(|_| [a.frame(1000, TcpFlags::empty()).unwrap(), b.frame(1000, TcpFlags::empty()).unwrap()]);
        add("two inner flows, one outer flow", fr.collect(), false);
        // Outer rules.
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 10);
        let mut fr = run(&mut f, 3, 1000);
        f.outer.ttl = 9;
        fr.extend(run(&mut f, 3, 1000));
        add("outer TTL / hop limit change", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 11);
        let mut fr = run(&mut f, 3, 1000);
        f.outer.tos = 0x01;
        fr.extend(run(&mut f, 3, 1000));
        add("outer TOS / traffic class (ECN) change", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 12);
        let mut fr = run(&mut f, 3, 1000);
        f.vni = 43;
        fr.extend(run(&mut f, 3, 1000));
        f.vni = 42;
        fr.extend(run(&mut f, 2, 1000));
        add("VNI change (another flow)", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 13);
        let mut fr = run(&mut f, 3, 1000);
        f.udp_csum = false;
        fr.extend(run(&mut f, 3, 1000));
        add("outer checksum non-zero then zero (another flow)", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 14);
        let mut fr = run(&mut f, 3, 1000);
        let mut bad = f.frame(1000, TcpFlags::empty()).unwrap();
        let at = bad.len() - 1;
        bad[at] ^= 0xFF; // breaks both the inner and the outer checksum
        fr.push(bad);
        fr.extend(run(&mut f, 3, 1000));
        add("bad outer checksum #4", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 15);
        let mut fr = run(&mut f, 3, 1000);
        let mut bad = f.frame(1000, TcpFlags::empty()).unwrap();
        let at = bad.len() - 1;
        bad[at] ^= 0xFF;
        refresh_outer(&mut bad); // a valid outer checksum over a bad inner one
        fr.push(bad);
        fr.extend(run(&mut f, 3, 1000));
        add("bad inner checksum #4", fr, false);
        let mut f = tunnel(outer_v6, Transport::Tcp, false, 16);
        let mut fr = run(&mut f, 3, 1000);
        let _ = f.inner.frame(1000, TcpFlags::empty());
        fr.extend(run(&mut f, 3, 1000));
        add("inner sequence gap", fr, false);
        if outer_v6 {
            let mut f = tunnel(outer_v6, Transport::Tcp, false, 17);
            let mut fr = run(&mut f, 3, 1000);
            let mut other = run(&mut f, 3, 1000);
            for fr in &mut other {
                fr[14 + 3] ^= 0x01; // flow label
            }
            fr.extend(other);
            add("outer flow label change (another flow)", fr, false);
        } else {
            let mut f = tunnel(outer_v6, Transport::Tcp, false, 18);
            let fr = (0..6)
                .map(|_| {
                    f.ip_id = 77;
                    f.frame(1000, TcpFlags::empty()).unwrap()
                })
                .collect();
            add("outer IPv4 ID fixed", fr, false);
            let mut f = tunnel(outer_v6, Transport::Tcp, false, 19);
            let mut fr = run(&mut f, 3, 1000);
            f.ip_id = f.ip_id.wrapping_add(5);
            fr.extend(run(&mut f, 3, 1000));
            add("outer IPv4 ID jump", fr, false);
            let mut f = tunnel(outer_v6, Transport::Tcp, false, 20);
            let mut fr = run(&mut f, 3, 1000);
            f.outer.dont_frag = true;
            fr.extend(run(&mut f, 3, 1000));
            add("outer DF change", fr, false);
            let mut f = tunnel(outer_v6, Transport::Tcp, false, 21);
            f.inner.spec.dont_frag = false;
            let fr = (0..5)
                .map(|_| {
                    f.ip_id = 300;
                    f.inner.ip_id = 9;
                    f.frame(1000, TcpFlags::empty()).unwrap()
                })
                .collect();
            add("outer and inner IPv4 IDs fixed", fr, false);
        }
    }
    out
}

#[test]
fn tunnel_cases_cover_both_outers_and_inners() {
    let all = cases();
    for needle in ["outer IPv4: TCP/IPv4", "outer IPv6: TCP/IPv4", "outer IPv4: UDP", "outer IPv6: UDP", "TCP/IPv6"] {
        assert!(all.iter().any(|c| c.name.contains(needle)), "no case for {needle}");
    }
    // Every frame is a valid VXLAN frame to the tunnel port.
    for c in &all {
        for f in &c.frames {
            let h = Medium::Ethernet.parse(f).unwrap();
            assert_eq!(u16::from_be_bytes([f[h.l4_offset + 2], f[h.l4_offset + 3]]), PORT, "{}", c.name);
        }
    }
}

#[test]
fn kernel_vxlan_gro_matches_superpacket() {
    if !superpacket_engine::io::require_privileges() {
        println!("SKIPPED: kernel tunnel GRO oracle needs root");
        return;
    }
    let mut oracles = BTreeMap::new();
    for udp in [false, true] {
        let cfg = GroOracleConfig { udp_gro_forwarding: udp, ..GroOracleConfig::default() };
        let oracle = GroOracle::with_config(cfg).expect("GRO oracle setup");
        let mut nl = oracle.netns().netlink().expect("netlink in the oracle's namespace");
        nl.add_vxlan_external("spvx0", PORT).expect("a VXLAN device (CONFIG_VXLAN)");
        oracle.netns().link_up("spvx0").expect("VXLAN device up");
        oracles.insert(udp, oracle);
    }
    let base = GroConfig::kernel_6_18().with_tunnel(PORT, TunnelKind::Vxlan);
    let mut failures = Vec::new();
    let mut merged = 0;
    let all = cases();
    for c in &all {
        let oracle = oracles.get_mut(&c.udp).expect("both oracles exist");
        let k: Vec<Seen> =
            oracle.run(&c.frames).expect("oracle run").into_iter().map(|(h, f)| Seen::from_hdr(&h, f)).collect();
        let cfg = if c.udp { GroConfig { udp: UdpGroMode::Forward, ..base } } else { base };
        let o = ours(cfg, &c.frames);
        let ok = by_flow(&k) == by_flow(&o);
        merged += k.iter().filter(|s| s.gso_type != 0).count();
        println!("{:<60} kernel [{}] {}", c.name, describe(&k), if ok { "== ours" } else { "!= ours" });
        if !ok {
            let diff = by_flow(&k)
                .into_iter()
                .zip(by_flow(&o))
                .find(|(a, b)| a != b)
                .map(|((_, a), (_, b))| {
                    a.iter()
                        .zip(&b)
                        .find(|(x, y)| x != y)
                        .map(|(x, y)| {
                            let at = x.frame.iter().zip(&y.frame).position(|(p, q)| p != q);
                            format!(
                                "first differing packet: kernel {} / ours {}; first differing byte {at:?}",
                                x.short(),
                                y.short()
                            )
                        })
                        .unwrap_or_default()
                })
                .unwrap_or_default();
            failures.push(format!("{}:\n  kernel: {}\n  ours:   {}\n  {diff}", c.name, describe(&k), describe(&o)));
        }
    }
    for (udp, o) in &oracles {
        println!("oracle stats (udp forwarding {udp}): {:?}", o.stats());
    }
    assert!(merged > 0, "the kernel coalesced nothing: is the VXLAN socket there?");
    assert!(failures.is_empty(), "superpacket differs from the kernel:\n{}", failures.join("\n"));
}
