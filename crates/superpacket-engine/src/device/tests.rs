//! Device-layer tests: feature propagation (the kernel's vdev_offload idea),
//! segmentation exactly once at the final port (and, with legacy, where the
//! old kernel did it), bond failover and team load balancing.

use super::bond::{BondMode, HashPolicy};
use super::features::*;
use super::port::MemoryDriver;
use super::superpackets::fraglist_aggregate;
use super::team::TeamMode;
use super::vlan::VlanProto;
use super::*;
use superpacket::packet::{GsoType, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport, payload_byte};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;

type F = NetdevFeatures;

fn port(g: &mut Graph, name: &str, hw: NetdevFeatures) -> DeviceId {
    g.add_port(name, Box::new(MemoryDriver::new(hw))).unwrap()
}

fn tx_of(g: &mut Graph, p: DeviceId) -> Vec<Packet> {
    g.driver_mut::<MemoryDriver>(p).unwrap().tx.drain(..).collect()
}

// ------------------------------------------------------------ features

#[test]
fn fix_features_rules() {
    let cases: &[(NetdevFeatures, NetdevFeatures)] = &[
        (F::HW_CSUM | F::IP_CSUM | F::IPV6_CSUM | F::SG, F::HW_CSUM | F::SG),
        (F::TSO | F::TSO6 | F::HW_CSUM, F::HW_CSUM),
        (F::SG | F::TSO | F::TSO_ECN | F::IPV6_CSUM, F::SG | F::IPV6_CSUM),
        (F::SG | F::TSO6 | F::IP_CSUM, F::SG | F::IP_CSUM),
        (F::SG | F::HW_CSUM | F::TSO_MANGLEID, F::SG | F::HW_CSUM),
        (F::SG | F::HW_CSUM | F::TSO_ECN, F::SG | F::HW_CSUM),
        (F::GSO | F::GSO_UDP_L4 | F::HW_CSUM, F::GSO_UDP_L4 | F::HW_CSUM),
        (F::LRO | F::GRO_HW | F::RXCSUM, F::GRO_HW | F::RXCSUM),
    ];
    for (i, (input, want)) in cases.iter().enumerate() {
        assert_eq!(fix_features(*input), *want, "case {i}: {input}");
    }
}

#[test]
fn increment_features_semantics() {
    // ONE_FOR_ALL: union; ALL_FOR_ALL: intersection; HW_CSUM wins.
    let req = F::SG | F::FRAGLIST | F::HW_CSUM | F::NOCACHE_COPY | F::GSO_FRAGLIST;
    let a = F::SG | F::IP_CSUM | F::NOCACHE_COPY;
    let b = F::FRAGLIST | F::HW_CSUM;
    let mut all = base_features(req);
    all = increment_features(all, a, req);
    all = increment_features(all, b, req);
    assert!(all.contains(F::SG | F::FRAGLIST | F::HW_CSUM));
    assert!(!all.intersects(F::IP_CSUM | F::NOCACHE_COPY | F::GSO_FRAGLIST));
    assert_eq!(F::from_name("tx-udp-segmentation"), Some(F::GSO_UDP_L4));
    assert_eq!(F::from_name("tso"), Some(F::TSO));
    assert_eq!(F::from_name("nope"), None);
}

#[test]
fn feature_propagation_table() {
    // (description, device, feature, expected) after each step.
    let mut g = Graph::new(StackMode::Passthrough);
    let p1 = port(&mut g, "p1", F::FULL_NIC);
    let p2 = port(&mut g, "p2", F::FULL_NIC);
    let p3 = port(&mut g, "p3", F::FULL_NIC);
    let p4 = port(&mut g, "p4", F::FULL_NIC);
    let v1 = g.add_vlan("p1.10", p1, VlanProto::Dot1Q, 10).unwrap();
    let vv = g.add_vlan("p1.10.20", v1, VlanProto::Dot1Q, 20).unwrap();
    let bond = g.add_bond("bond0", BondMode::ActiveBackup, HashPolicy::Layer2).unwrap();
    g.enslave(bond, p2).unwrap();
    let team = g.add_team("team0", TeamMode::Loadbalance).unwrap();
    g.enslave(team, p3).unwrap();
    let br = g.add_bridge("br0", false).unwrap();
    g.enslave(br, p4).unwrap();
    let vb = g.add_vlan("bond0.5", bond, VlanProto::Dot1AD, 5).unwrap();
    let vt = g.add_vlan("team0.5", team, VlanProto::Dot1Q, 5).unwrap();
    let vbr = g.add_vlan("br0.5", br, VlanProto::Dot1Q, 5).unwrap();
    let f = |g: &Graph, d: DeviceId| g.device(d).feat.features;

    // Everything on with full lowers.
    for d in [v1, vv, bond, team, br, vb, vt, vbr] {
        for feat in [F::SG, F::FRAGLIST, F::TSO, F::TSO6, F::GSO_UDP_L4, F::GSO_FRAGLIST, F::HW_CSUM] {
            assert!(f(&g, d).contains(feat), "{} lacks {feat}", g.device(d).name);
        }
    }

    // Toggle SG off on every port: TSO goes (fix rules) on ports; VLAN
    // devices follow for SG/checksum but keep claiming GSO_SOFTWARE (6.4);
    // masters drop SG/FRAGLIST-like bits only when all lowers lack them (6.5).
    for p in [p1, p2, p3, p4] {
        g.set_features(p, F::EMPTY, F::SG | F::FRAGLIST | F::GSO_FRAGLIST);
    }
    let table: &[(DeviceId, NetdevFeatures, bool)] = &[
        (p1, F::SG, false),
        (p1, F::TSO, false),
        (v1, F::SG, false),
        (v1, F::FRAGLIST, false),
        (v1, F::GSO_UDP_L4, true),
        (vv, F::SG, false),
        (vv, F::GSO_FRAGLIST, true),
        (bond, F::SG, false),
        (bond, F::FRAGLIST, false),
        (bond, F::GSO_FRAGLIST, false),
        (team, F::SG, false),
        (br, F::SG, false),
        (br, F::FRAGLIST, false),
        (vb, F::SG, false),
        (vt, F::SG, false),
        (vbr, F::SG, false),
    ];
    for (d, feat, want) in table {
        assert_eq!(f(&g, *d).contains(*feat), *want, "{} {feat} after SG off", g.device(*d).name);
    }

    // Back on: every upper follows.
    for p in [p1, p2, p3, p4] {
        g.set_features(p, F::SG | F::FRAGLIST | F::GSO_FRAGLIST, F::EMPTY);
    }
    for d in [v1, vv, bond, team, br, vb, vt, vbr] {
        assert!(f(&g, d).contains(F::SG | F::FRAGLIST | F::GSO_FRAGLIST), "{}", g.device(d).name);
    }

    // A master with two lowers: on if any lower has it.
    let p5 = port(&mut g, "p5", F::FULL_NIC.without(F::GSO_FRAGLIST | F::FRAGLIST));
    g.enslave(bond, p5).unwrap();
    assert!(f(&g, bond).contains(F::GSO_FRAGLIST | F::FRAGLIST));
    g.set_features(p2, F::EMPTY, F::GSO_FRAGLIST | F::FRAGLIST);
    assert!(!f(&g, bond).intersects(F::GSO_FRAGLIST | F::FRAGLIST));
    assert!(!f(&g, vb).contains(F::FRAGLIST));
    // TSO is always offered on a master (software fallback at the slave).
    g.set_features(p2, F::EMPTY, F::TSO | F::TSO6);
    g.set_features(p5, F::EMPTY, F::TSO | F::TSO6);
    assert!(f(&g, bond).contains(F::TSO | F::TSO6));
    // Checksum: VLAN gets HW_CSUM from a lower with only IP_CSUM.
    let p6 = port(&mut g, "p6", (F::FULL_NIC.without(F::HW_CSUM)) | F::IP_CSUM | F::IPV6_CSUM);
    let v6 = g.add_vlan("p6.7", p6, VlanProto::Dot1Q, 7).unwrap();
    assert!(f(&g, v6).contains(F::HW_CSUM));
    // Limits follow the lower.
    g.set_gso_limits(p1, 32768, 20);
    assert_eq!(g.device(vv).feat.gso_max_size, 32768);
    assert_eq!(g.device(vv).feat.gso_max_segs, 20);
}

#[test]
fn legacy_vlan_lacks_uso_and_fraglist() {
    let mut g = Graph::new(StackMode::Legacy);
    let p = port(&mut g, "p", F::FULL_NIC);
    let v = g.add_vlan("p.1", p, VlanProto::Dot1Q, 1).unwrap();
    let vf = g.device(v).feat.features;
    assert!(vf.contains(F::TSO | F::TSO6));
    assert!(!vf.intersects(F::GSO_UDP_L4 | F::GSO_FRAGLIST));
    g.set_mode(StackMode::Passthrough);
    assert!(g.device(v).feat.features.contains(F::GSO_UDP_L4 | F::GSO_FRAGLIST));
}

#[test]
fn effective_features_rules() {
    let dev = DeviceFeatures::new(F::FULL_NIC);
    let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 0).with_vlans(&[(0x88A8, 1), (0x8100, 2)]).unwrap());
    let sp = flow.superpacket(8000, 1000, TcpFlags::empty()).unwrap();
    let info = PacketInfo::of(&sp);
    assert_eq!(info.vlan_tags, 2);
    let vlan = effective_features(&dev, &info, &FeaturesCheck::Vlan, StackMode::Passthrough);
    assert!(!vlan.contains(F::TSO) && vlan.contains(F::HW_CSUM));
    let any = effective_features(&dev, &info, &FeaturesCheck::Any, StackMode::Passthrough);
    assert!(any.contains(F::TSO) && takes_as_is(any, &info));
    let legacy = effective_features(&dev, &info, &FeaturesCheck::Any, StackMode::Legacy);
    assert!(!legacy.contains(F::TSO));
    // gso_max_segs exceeded: no GSO.
    let mut small = dev;
    small.gso_max_segs = 4;
    assert!(!effective_features(&small, &info, &FeaturesCheck::Any, StackMode::Passthrough).contains(F::TSO));
    // IPv4 checksum only: an IPv6 partial packet loses checksum and GSO.
    let ip4 = DeviceFeatures::new(F::SG | F::IP_CSUM | F::TSO | F::TSO6);
    let mut f6 = Flow::new(FlowSpec::new(Transport::Tcp, true, 0));
    let sp6 = f6.superpacket(8000, 1000, TcpFlags::empty()).unwrap();
    let e = effective_features(&ip4, &PacketInfo::of(&sp6), &FeaturesCheck::Any, StackMode::Passthrough);
    assert!(!e.intersects(F::CSUM_MASK | F::GSO_MASK));
    let caps = target_caps(any, &dev, 1500);
    assert!(caps.gso.contains(GsoType::TCPV4) && caps.sg && caps.csum.hw && caps.fraglist);
    assert_eq!(caps.gso_partial, GsoType::NONE);
}

#[test]
fn a_gso_partial_port_gets_a_chunk_and_the_remainder() {
    // A driver declaring GSO_PARTIAL for VXLAN (no full tunnel GSO): a VXLAN
    // superpacket of 10 x 1000 + 300 bytes reaches it as one chunk of 10
    // units (a GSO_PARTIAL packet) and the 300-byte remainder.
    let tunnels = F::GSO_UDP_TUNNEL | F::GSO_UDP_TUNNEL_CSUM;
    let mut driver = MemoryDriver::new(F::SG | F::HW_CSUM | F::TSO | F::GSO_PARTIAL | tunnels);
    driver.gso_partial = tunnels;
    let mut g = Graph::new(StackMode::Passthrough);
    let nic = g.add_port("nic", Box::new(driver)).unwrap();
    let inner = Flow::new(FlowSpec::new(Transport::Tcp, false, 0)).superpacket(10_300, 1000, TcpFlags::PSH).unwrap();
    let sp = superpacket::traffic::encapsulate(
        &inner,
        &superpacket::traffic::TunnelSpec::new(superpacket::packet::TunnelKind::Vxlan, false),
    )
    .unwrap();
    g.transmit(nic, sp);
    let out = tx_of(&mut g, nic);
    assert_eq!(out.len(), 2);
    assert!(out[0].meta.gso_type.contains(GsoType::PARTIAL | GsoType::UDP_TUNNEL | GsoType::TCPV4));
    assert_eq!((out[0].meta.gso_size, out[0].meta.gso_segs), (1000, 10));
    assert!(out[1].meta.gso_type.is_empty());
    let hl = out[1].len() - 300;
    assert_eq!(out[0].len(), hl + 10_000);
    // Without gso_partial_features the same port segments in software.
    let mut g = Graph::new(StackMode::Passthrough);
    let nic = port(&mut g, "nic", F::SG | F::HW_CSUM | F::TSO | F::GSO_PARTIAL);
    let sp = superpacket::traffic::encapsulate(
        &inner,
        &superpacket::traffic::TunnelSpec::new(superpacket::packet::TunnelKind::Vxlan, false),
    )
    .unwrap();
    g.transmit(nic, sp);
    assert_eq!(tx_of(&mut g, nic).len(), 11);
}

#[test]
fn gso_partial_features_map_to_gso_partial_output() {
    // A NIC with tunnel GSO only as GSO_PARTIAL (as Intel's drivers declare
    // it): the tunnel features leave the effective features of a
    // superpacket (6.2 step 2), and the segmenter is told to leave chunks.
    let tunnels = F::GSO_UDP_TUNNEL | F::GSO_UDP_TUNNEL_CSUM;
    let mut dev = DeviceFeatures::new(F::SG | F::HW_CSUM | F::TSO | F::TSO6 | F::GSO_PARTIAL | tunnels);
    dev.gso_partial_features = tunnels;
    let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 0)).superpacket(8000, 1000, TcpFlags::empty()).unwrap();
    let f = effective_features(&dev, &PacketInfo::of(&sp), &FeaturesCheck::Any, StackMode::Passthrough);
    assert!(!f.intersects(tunnels) && f.contains(F::GSO_PARTIAL));
    let caps = target_caps(f, &dev, 1500);
    assert_eq!(caps.gso_partial, GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM);
    assert!(!caps.gso.intersects(GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM));
    assert!(caps.enc_gso.contains(GsoType::TCPV4) && caps.enc_csum.hw);
    // Without GSO_PARTIAL among the features, or with it stripped by the
    // GSO limits, no partial output.
    let mut off = dev;
    off.features = off.features.without(F::GSO_PARTIAL);
    assert_eq!(
        target_caps(
            effective_features(&off, &PacketInfo::of(&sp), &FeaturesCheck::Any, StackMode::Passthrough),
            &off,
            1500
        )
        .gso_partial,
        GsoType::NONE
    );
    let mut small = dev;
    small.gso_max_segs = 4;
    let f = effective_features(&small, &PacketInfo::of(&sp), &FeaturesCheck::Any, StackMode::Passthrough);
    assert_eq!(target_caps(f, &small, 1500).gso_partial, GsoType::NONE);
}

// ------------------------------------------------- segmentation exactly once

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Tcp4,
    Tcp6,
    Udp,
    Fraglist,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Tcp4, Kind::Tcp6, Kind::Udp, Kind::Fraglist];
    /// The port feature that lets the port take it whole.
    fn feature(self) -> NetdevFeatures {
        match self {
            Kind::Tcp4 => F::TSO,
            Kind::Tcp6 => F::TSO6,
            Kind::Udp => F::GSO_UDP_L4,
            Kind::Fraglist => F::GSO_FRAGLIST,
        }
    }
    fn packet(self, index: u32) -> (Packet, usize) {
        match self {
            Kind::Tcp4 | Kind::Tcp6 | Kind::Udp => {
                let t = if self == Kind::Udp { Transport::Udp } else { Transport::Tcp };
                let mut f = Flow::new(FlowSpec::new(t, self == Kind::Tcp6, index));
                (f.superpacket(12000, 1200, TcpFlags::PSH).unwrap(), 10)
            }
            Kind::Fraglist => {
                let mut f = Flow::new(FlowSpec::new(Transport::Udp, false, index));
                let frames: Vec<Vec<u8>> = (0..6).map(|_| f.frame(1000, TcpFlags::empty()).unwrap()).collect();
                (fraglist_aggregate(&frames).unwrap(), 6)
            }
        }
    }
}

/// A port under `tags` VLAN devices (alternating 802.1ad / 802.1Q from the
/// bottom); returns (graph, port, vlan devices top first).
fn stack(mode: StackMode, port_hw: NetdevFeatures, tags: usize) -> (Graph, DeviceId, Vec<DeviceId>) {
    let mut g = Graph::new(mode);
    let p = port(&mut g, "eth0", port_hw);
    let mut lower = p;
    let mut vlans = Vec::new();
    for i in 0..tags {
        let proto = if i % 2 == 0 { VlanProto::Dot1AD } else { VlanProto::Dot1Q };
        lower = g.add_vlan(&format!("v{i}"), lower, proto, 100 + i as u16).unwrap();
        vlans.push(lower);
    }
    vlans.reverse();
    (g, p, vlans)
}

fn assert_all_valid(frames: &[Packet], tags: usize, what: &str) {
    let mut problems = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let data = f.to_vec();
        problems.clear();
        validate_frame(&data, Medium::Ethernet, &f.meta, false, &mut problems);
        assert!(problems.is_empty(), "{what}: frame {i}: {problems:?}");
        assert_eq!(PacketInfo::of(f).vlan_tags as usize, tags, "{what}: frame {i} tags");
    }
}

#[test]
fn segmentation_happens_once_at_the_final_port() {
    for kind in Kind::ALL {
        for tags in 0..=3 {
            for port_can in [false, true] {
                let hw = if port_can { F::FULL_NIC } else { F::FULL_NIC.without(kind.feature()) };
                let (mut g, p, vlans) = stack(StackMode::Passthrough, hw, tags);
                let top = vlans.first().copied().unwrap_or(p);
                let (sp, segs) = kind.packet(1);
                g.transmit(top, sp);
                let what = format!("{kind:?} tags {tags} port_can {port_can}");
                for v in &vlans {
                    let c = g.counters(*v);
                    assert_eq!((c.tx_segmented, c.segments_produced), (0, 0), "{what}: {}", g.device(*v).name);
                    assert_eq!(c.tx_superpackets, 1, "{what}");
                }
                let c = g.counters(p).clone();
                let out = tx_of(&mut g, p);
                if port_can {
                    assert_eq!((c.tx_passthrough, c.tx_segmented), (1, 0), "{what}");
                    assert_eq!(out.len(), 1, "{what}");
                    assert!(out[0].meta.is_gso(), "{what}");
                } else {
                    assert_eq!((c.tx_segmented, c.segments_produced), (1, segs as u64), "{what}");
                    assert_eq!(out.len(), segs, "{what}");
                    assert!(out.iter().all(|f| !f.meta.is_gso()), "{what}");
                    if kind != Kind::Fraglist {
                        assert_all_valid(&out, tags, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn qinq_port_with_default_vlan_check_segments() {
    // A port type that cannot segment with two tags (Linux's default hook).
    let (mut g, p, vlans) = stack(StackMode::Passthrough, F::FULL_NIC, 2);
    g.set_features_check(p, FeaturesCheck::Vlan);
    let (sp, segs) = Kind::Tcp4.packet(2);
    g.transmit(vlans[0], sp);
    assert_eq!(g.counters(p).segments_produced, segs as u64);
    let out = tx_of(&mut g, p);
    assert_all_valid(&out, 2, "qinq vlan check");
}

#[test]
fn qinq_port_hook_decides_checksum_offload_too() {
    // A port whose hook parses any tag depth, with IP checksum offload but no
    // TSO: the superpacket is cut at the port and the checksums are left to
    // the port (the per-device hook decides, not a blanket two-tag rule).
    let hw = F::FULL_NIC.without(F::TSO).without(F::HW_CSUM) | F::IP_CSUM;
    let (mut g, p, vlans) = stack(StackMode::Passthrough, hw, 2);
    g.set_features_check(p, FeaturesCheck::Any);
    let (sp, segs) = Kind::Tcp4.packet(3);
    g.transmit(vlans[0], sp);
    let c = g.counters(p).clone();
    assert_eq!((c.segments_produced, c.checksums_completed), (segs as u64, 0));
    let out = tx_of(&mut g, p);
    assert!(out.iter().all(|f| matches!(f.meta.csum, superpacket::packet::ChecksumState::Partial { .. })));
    // With Linux's default hook the same port completes them in software.
    let (mut g, p, vlans) = stack(StackMode::Passthrough, hw, 2);
    g.set_features_check(p, FeaturesCheck::Vlan);
    g.transmit(vlans[0], Kind::Tcp4.packet(3).0);
    assert_eq!(g.counters(p).checksums_completed, segs as u64);
    assert_all_valid(&tx_of(&mut g, p), 2, "qinq default hook");
}

/// Where the old kernel segmented: the first device (top first: VLAN
/// devices, then the port) whose effective features lack the type. VLAN
/// devices lacked USO and fraglist GSO; a device seeing a tagged packet uses
/// its vlan_features, which a VLAN device inherits from the port (6.2 step
/// 4); a device seeing two or more tags lost every GSO type (the QinQ rule
/// in the core).
fn legacy_site(kind: Kind, tags: usize, port_can: bool) -> Option<usize> {
    for dev in 0..=tags {
        let seen_tags = dev;
        let is_port = dev == tags;
        let lacks = seen_tags >= 2
            || match kind {
                Kind::Udp | Kind::Fraglist => !is_port || !port_can,
                Kind::Tcp4 | Kind::Tcp6 => (is_port || seen_tags >= 1) && !port_can,
            };
        if lacks {
            return Some(dev);
        }
    }
    None
}

#[test]
fn legacy_segments_where_the_old_kernel_did() {
    for kind in Kind::ALL {
        for tags in 0..=3 {
            for port_can in [false, true] {
                let hw = if port_can { F::FULL_NIC } else { F::FULL_NIC.without(kind.feature()) };
                let (mut g, p, vlans) = stack(StackMode::Legacy, hw, tags);
                let top = vlans.first().copied().unwrap_or(p);
                let (sp, segs) = kind.packet(3);
                g.transmit(top, sp);
                let what = format!("legacy {kind:?} tags {tags} port_can {port_can}");
                let mut devs = vlans.clone();
                devs.push(p);
                let sites: Vec<usize> = (0..devs.len()).filter(|&i| g.counters(devs[i]).tx_segmented > 0).collect();
                let want = legacy_site(kind, tags, port_can);
                assert_eq!(sites, want.into_iter().collect::<Vec<_>>(), "{what}");
                let total: u64 = devs.iter().map(|d| g.counters(*d).tx_segmented).sum();
                assert!(total <= 1, "{what}");
                let out = tx_of(&mut g, p);
                assert_eq!(out.len(), if want.is_some() { segs } else { 1 }, "{what}");
                if want.is_some() && kind != Kind::Fraglist {
                    assert_all_valid(&out, tags, &what);
                }
            }
        }
    }
}

// ------------------------------------------------------ bond / team

/// Sends `n` superpackets on each of `flows` flows through `top`, with an
/// optional action after packet `at`; returns, per flow, the payload bytes
/// collected from every port in order.
fn run_flows(
    g: &mut Graph,
    top: DeviceId,
    ports: &[DeviceId],
    flows: u32,
    n: usize,
    mut between: impl FnMut(&mut Graph, usize),
) -> Vec<Vec<u8>> {
    let mut fl: Vec<Flow> = (0..flows).map(|i| Flow::new(FlowSpec::new(Transport::Tcp, false, i))).collect();
    let mut got = vec![Vec::new(); flows as usize];
    for k in 0..n {
        for f in fl.iter_mut() {
            let sp = f.superpacket(6000, 1000, TcpFlags::empty()).unwrap();
            g.transmit(top, sp);
        }
        between(g, k);
        // Collect in transmit order: with per-flow slave choice, a flow's
        // packets are on one port at a time.
        for p in ports {
            for pkt in tx_of(g, *p) {
                let data = pkt.to_vec();
                let h = superpacket::wire::FrameHeaders::parse(&data).unwrap();
                let l4 = h.l4_offset;
                let idx = (u16::from_be_bytes([data[l4], data[l4 + 1]]) - 10000) as usize;
                got[idx].extend_from_slice(&data[h.payload_offset..h.payload_offset + h.payload_len]);
            }
        }
    }
    got
}

fn assert_streams(got: &[Vec<u8>], len: usize) {
    for (i, s) in got.iter().enumerate() {
        assert_eq!(s.len(), len, "flow {i} length");
        for (j, b) in s.iter().enumerate() {
            assert_eq!(*b, payload_byte(j as u64), "flow {i} byte {j}");
        }
    }
}

#[test]
fn bond_active_backup_failover_keeps_flows_intact_and_in_order() {
    let mut g = Graph::new(StackMode::Passthrough);
    let a = port(&mut g, "a", F::FULL_NIC.without(F::TSO));
    let b = port(&mut g, "b", F::FULL_NIC);
    let bond = g.add_bond("bond0", BondMode::ActiveBackup, HashPolicy::Layer2).unwrap();
    g.enslave(bond, a).unwrap();
    g.enslave(bond, b).unwrap();
    let got = run_flows(&mut g, bond, &[a, b], 3, 10, |g, k| match k {
        3 => g.set_carrier(a, false),
        6 => g.set_carrier(a, true),
        8 => g.set_carrier(b, false),
        _ => {}
    });
    assert_streams(&got, 60000);
    let st = g.kind_as::<super::bond::Bond>(bond).expect("a bond");
    assert_eq!(st.failovers, 2);
    assert!(g.counters(a).segments_produced > 0, "port a has no TSO: segmented there");
    assert!(g.counters(b).tx_passthrough > 0);
    // No usable slave: dropped and counted.
    g.set_carrier(a, false);
    g.set_carrier(b, false);
    let mut f = Flow::new(FlowSpec::new(Transport::Tcp, false, 0));
    g.transmit(bond, f.superpacket(6000, 1000, TcpFlags::empty()).unwrap());
    assert_eq!(g.counters(bond).drops.get("no-slave"), Some(&1));
}

#[test]
fn bond_balance_xor_and_team_spread_flows_keep_order() {
    for hash in [HashPolicy::Layer2, HashPolicy::Layer34] {
        let mut g = Graph::new(StackMode::Passthrough);
        let a = port(&mut g, "a", F::FULL_NIC);
        let b = port(&mut g, "b", F::FULL_NIC);
        let bond = g.add_bond("bond0", BondMode::BalanceXor, hash).unwrap();
        g.enslave(bond, a).unwrap();
        g.enslave(bond, b).unwrap();
        let got = run_flows(&mut g, bond, &[a, b], 16, 4, |_, _| {});
        assert_streams(&got, 24000);
        if hash == HashPolicy::Layer34 {
            assert!(g.counters(a).tx_packets > 0 && g.counters(b).tx_packets > 0, "flows spread");
        }
    }
    for mode in [TeamMode::Loadbalance, TeamMode::Activebackup, TeamMode::Roundrobin] {
        let mut g = Graph::new(StackMode::Passthrough);
        let a = port(&mut g, "a", F::FULL_NIC);
        let b = port(&mut g, "b", F::FULL_NIC.without(F::TSO));
        let team = g.add_team("team0", mode).unwrap();
        g.enslave(team, a).unwrap();
        g.enslave(team, b).unwrap();
        let got = run_flows(&mut g, team, &[a, b], 16, 4, |g, k| {
            if k == 1 && mode == TeamMode::Activebackup {
                g.set_carrier(a, false);
            }
        });
        assert_streams(&got, 24000);
        if mode != TeamMode::Activebackup {
            assert!(g.counters(a).tx_packets > 0 && g.counters(b).tx_packets > 0, "{mode:?} spreads");
        }
    }
}

#[test]
fn qinq_on_bond_and_team_keeps_tso_until_the_port() {
    for legacy in [false, true] {
        let mode = if legacy { StackMode::Legacy } else { StackMode::Passthrough };
        let mut g = Graph::new(mode);
        let a = port(&mut g, "a", F::FULL_NIC);
        let b = port(&mut g, "b", F::FULL_NIC);
        let bond = g.add_bond("bond0", BondMode::BalanceXor, HashPolicy::Layer34).unwrap();
        g.enslave(bond, a).unwrap();
        g.enslave(bond, b).unwrap();
        let s = g.add_vlan("bond0.100", bond, VlanProto::Dot1AD, 100).unwrap();
        let c = g.add_vlan("bond0.100.200", s, VlanProto::Dot1Q, 200).unwrap();
        let got = run_flows(&mut g, c, &[a, b], 4, 3, |_, _| {});
        assert_streams(&got, 18000);
        let segs = g.counters(a).segments_produced + g.counters(b).segments_produced;
        let seg_sites: u64 = [s, c, bond].iter().map(|d| g.counters(*d).tx_segmented).sum();
        if legacy {
            // The bond sees two tags first: the core's QinQ rule strips TSO there.
            assert!(g.counters(bond).tx_segmented > 0 && segs == 0, "legacy segments at the bond");
        } else {
            assert_eq!((segs, seg_sites), (0, 0), "passthrough: no software segmentation");
        }
    }
}

#[test]
fn vlan_receive_pops_tags_to_the_right_device() {
    let (mut g, p, vlans) = stack(StackMode::Passthrough, F::FULL_NIC, 2);
    let mut f = Flow::new(FlowSpec::new(Transport::Udp, false, 0).with_vlans(&[(0x88A8, 100), (0x8100, 101)]).unwrap());
    let frame = f.frame(100, TcpFlags::empty()).unwrap();
    g.receive(p, Packet::from_frame(&frame));
    let got = g.take_local(vlans[0]).expect("delivered on the top VLAN device");
    assert_eq!(PacketInfo::of(&got).vlan_tags, 0);
    assert_eq!(g.counters(vlans[1]).rx_packets, 1);
    // Unknown tag: stays on the port.
    let mut f2 = Flow::new(FlowSpec::new(Transport::Udp, false, 0).with_vlans(&[(0x8100, 7)]).unwrap());
    g.receive(p, Packet::from_frame(&f2.frame(10, TcpFlags::empty()).unwrap()));
    assert!(g.take_local(p).is_some());
}

// ------------------------------------------------------------ router / NAT

fn nat_outputs(port_gso: bool) -> Vec<Packet> {
    use crate::device::seed::seed_router;
    let (mut g, spec) = seed_router(StackMode::Passthrough, super::MemoryMode::Capture);
    let wan = g.id("wan").unwrap();
    if !port_gso {
        g.set_features(wan, F::EMPTY, F::GSO_UDP_L4 | F::GSO_FRAGLIST | F::TSO | F::HW_CSUM);
        g.set_features(wan, F::IP_CSUM, F::EMPTY);
    }
    let lan = g.id("lan").unwrap();
    let mut udp = Flow::new(spec);
    let mut tcp_spec = spec;
    tcp_spec.transport = Transport::Tcp;
    tcp_spec.tcp_timestamps = true;
    let mut tcp = Flow::new(tcp_spec);
    g.receive(lan, udp.superpacket(14000, 1400, TcpFlags::empty()).unwrap());
    g.receive(lan, tcp.superpacket(14480, 1448, TcpFlags::empty()).unwrap());
    g.receive(lan, Packet::from_frame(&udp.frame(300, TcpFlags::empty()).unwrap()));
    g.receive(lan, Packet::from_frame(&tcp.frame(200, TcpFlags::PSH).unwrap()));
    let frames: Vec<Vec<u8>> = (0..4).map(|_| udp.frame(1000, TcpFlags::empty()).unwrap()).collect();
    g.receive(lan, fraglist_aggregate(&frames).unwrap());
    assert_eq!(g.counters(g.id("lan.10").unwrap()).dropped(), 0, "{:?}", g.counters(g.id("lan.10").unwrap()));
    tx_of(&mut g, wan)
}

#[test]
fn nat_outputs_are_valid_for_superpackets_and_frames() {
    for port_gso in [true, false] {
        let out = nat_outputs(port_gso);
        assert!(out.len() >= 5, "port_gso {port_gso}: {} frames", out.len());
        let mut problems = Vec::new();
        for (i, p) in out.iter().enumerate() {
            if p.frag_list().is_empty() {
                problems.clear();
                validate_frame(&p.to_vec(), Medium::Ethernet, &p.meta, false, &mut problems);
                assert!(problems.is_empty(), "port_gso {port_gso} frame {i}: {problems:?}");
            }
            let d = p.linear();
            assert_eq!(PacketInfo::of(p).vlan_tags, 1, "tagged for VLAN 20");
            assert_eq!(&d[18 + 12..18 + 16], &[203, 0, 113, 1], "masqueraded source");
        }
        if port_gso {
            assert!(out.iter().any(|p| p.meta.is_gso()), "superpackets forwarded whole");
        } else {
            assert!(out.iter().all(|p| !p.meta.is_gso()));
        }
    }
}

#[test]
fn nat_outputs_pass_tshark_checksum_validation() {
    if std::env::var("SUPERPACKET_SKIP_TSHARK").as_deref() == Ok("1") {
        return;
    }
    let tshark = std::process::Command::new("tshark").arg("--version").output();
    assert!(tshark.is_ok(), "tshark is missing (set SUPERPACKET_SKIP_TSHARK=1 to skip)");
    let out = nat_outputs(false);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nat.pcapng");
    let mut w = superpacket::pcap::CaptureWriter::create(
        &path,
        superpacket::pcap::CaptureFormat::PcapNg,
        superpacket::pcap::LinkType::ETHERNET,
    )
    .unwrap();
    for p in &out {
        w.write_frame(&p.to_vec(), 0, &superpacket::pcap::FrameAnnotation::default()).unwrap();
    }
    w.finish().unwrap();
    let r = std::process::Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE"])
        .args([
            "-Y",
            "ip.checksum.status == 0 || udp.checksum.status == 0 || tcp.checksum.status == 0 || _ws.malformed",
        ])
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(r.stdout.is_empty(), "bad checksums: {}", String::from_utf8_lossy(&r.stdout));
    let all = std::process::Command::new("tshark").arg("-r").arg(&path).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&all.stdout).lines().count(), out.len());
}

#[test]
fn conntrack_is_bounded_and_times_out() {
    use super::nat::{Nat, Tuple};
    use std::net::Ipv4Addr;
    let mut nat = Nat::new(2);
    let t = |p: u16| Tuple {
        proto: 17,
        src: Ipv4Addr::new(10, 0, 0, 1),
        sport: p,
        dst: Ipv4Addr::new(1, 1, 1, 1),
        dport: 53,
    };
    let snat = |x: Tuple| Tuple { src: Ipv4Addr::new(9, 9, 9, 9), ..x };
    assert!(nat.create(t(1), snat(t(1)), 0).is_some());
    assert!(nat.create(t(2), snat(t(2)), 0).is_some());
    assert!(nat.create(t(3), snat(t(3)), 0).is_none(), "table full");
    assert_eq!(nat.counters.table_full, 1);
    // Reply direction is found and translated back.
    let reply = snat(t(1)).reversed();
    assert_eq!(nat.lookup(&reply, 1, false).unwrap().to, t(1).reversed());
    // Unreplied UDP expires after 30 s; replied after 120 s.
    let s = 1_000_000_000u64;
    assert!(nat.lookup(&t(2), 31 * s, false).is_none());
    assert!(nat.lookup(&t(1), 100 * s, false).is_some());
    assert!(nat.create(t(3), snat(t(3)), 100 * s).is_some(), "room after expiry");
    // Same source port taken: remapped.
    let other = Tuple { src: Ipv4Addr::new(10, 0, 0, 2), ..t(1) };
    nat.max_conns = 10;
    let got = nat.create(other, snat(other), 100 * s).unwrap();
    assert_ne!(got.sport, 1);
}

#[test]
fn a_default_burst_is_one_packet_of_recv_in_order() {
    // The default `recv_burst` (what the engine worker receives through
    // from TAP, AF_PACKET and memory ports): the packets `recv` would give,
    // in order, appended to the caller's vector, one per call, none when
    // none is asked for.
    let mut d = MemoryDriver::new(NetdevFeatures::EMPTY);
    for len in 60..63 {
        d.rx.push_back(Packet::from_frame(&vec![0u8; len]));
    }
    let mut out = Vec::new();
    assert_eq!(d.recv_burst(&mut out, 0), 0);
    assert_eq!(d.recv_burst(&mut out, 10), 1);
    assert_eq!(d.recv_burst(&mut out, 10), 1);
    assert_eq!(d.recv_burst(&mut out, 1), 1);
    assert_eq!(d.recv_burst(&mut out, 10), 0);
    assert_eq!(out.iter().map(Packet::len).collect::<Vec<_>>(), [60, 61, 62]);
}
