//! The Linux kernel as the GSO oracle (docs/kernel-oracle.md section 5, "A second
//! oracle"): each superpacket is sent through AF_PACKET with
//! `PACKET_VNET_HDR` into a veth whose TX checksum, TSO, GSO and USO are off
//! (so the kernel segments and checksums in software), the peer captures the
//! segments, and superpacket's segments for a target without offloads must be
//! **byte-identical**.
//!
//! Every case also runs as **raw IP** (what a TUN with `IFF_NO_PI`
//! carries): the same superpacket minus its 14-byte Ethernet header, with
//! `csum_start` and `hdr_len` 14 less, sent with AF_PACKET on a TUN whose
//! reader accepts no offload ([`GsoOracleConfig::medium`] = [`Medium::Ip`]:
//! the kernel segments before the TUN queue and the segments are read from
//! the TUN), and segmented by superpacket for
//! `TargetCaps::new(1500).with_medium(Medium::Ip)`. There, (a) our segments
//! must equal the kernel's, and (b) the kernel's raw-IP segments must be its
//! Ethernet segments minus 14 bytes. One case table, a loop over the media:
//! only the cases that cannot exist as raw IP ([`RAW_IP_SKIPPED`]: VLAN tags)
//! are skipped, and `every_ethernet_case_has_a_raw_ip_twin_or_a_reason`
//! fails for a case neither derived nor listed.
//!
//! Root only (namespaces and veths are created and always deleted by
//! [`superpacket_lab::oracle::GsoOracle`]); fails with the reason if not
//! root, unless `SUPERPACKET_SKIP_PRIVILEGED=1` (then prints a skip note).

mod common;

use std::collections::{BTreeMap, HashMap};

use common::raw_ip::{self, MEDIA};
use superpacket::offload::gso::{Segmenter, TargetCaps, VecSink};
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket::packet::{GsoType, Packet};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;
use superpacket_lab::oracle::{Delivered, GsoOracle, GsoOracleConfig};

/// Ethernet cases that cannot exist as raw IP, and why.
const RAW_IP_SKIPPED: &[(&str, &str)] =
    &[("tcp4 vlan 100", "VLAN-tagged (802.1Q)"), ("uso6 qinq 10/20", "VLAN-tagged (QinQ)")];
/// How many Ethernet cases [`RAW_IP_SKIPPED`] must hold.
const RAW_IP_SKIPS_EXPECTED: usize = 2;

/// The kernel's frames as they were on the wire: a VLAN tag the receiver
/// moved into metadata is put back after the MAC addresses.
fn wire_bytes(d: &Delivered) -> Vec<u8> {
    match d.vlan {
        Some(v) => {
            let tpid = if v.tpid == 0 { 0x8100 } else { v.tpid };
            let mut f = d.frame[..12].to_vec();
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&v.tci.to_be_bytes());
            f.extend_from_slice(&d.frame[12..]);
            f
        }
        None => d.frame.clone(),
    }
}

struct Scenario {
    name: &'static str,
    spec: FlowSpec,
    payload: usize,
    gso: u16,
    flags: TcpFlags,
    ecn: bool,
    /// Insert an 8-byte IPv6 Destination Options header.
    ext: bool,
    /// Mark the packet GSO even though its payload is not larger than `gso`
    /// (Linux sends it as one ordinary frame: `virtio_net_hdr_to_skb`).
    small: bool,
}

/// Inserts an 8-byte Destination Options header (PadN) after the IPv6 header
/// of an untagged superpacket, keeping its metadata valid.
fn with_ipv6_ext(pkt: &Packet) -> Packet {
    superpacket::traffic::insert_ipv6_dstopts(pkt, 14)
}

impl Scenario {
    /// The Ethernet superpacket.
    fn packet(&self) -> Packet {
        let mut pkt: Packet = Flow::new(self.spec).superpacket(self.payload, self.gso, self.flags).unwrap();
        if self.ecn {
            pkt.meta.gso_type |= GsoType::TCP_ECN;
        }
        if self.ext {
            pkt = with_ipv6_ext(&pkt);
        }
        if self.small {
            assert!(!pkt.meta.is_gso() && self.payload <= usize::from(self.gso), "{}: not small", self.name);
            pkt.meta.gso_type = match (self.spec.transport, self.spec.addrs) {
                (Transport::Tcp, Addrs::V4 { .. }) => GsoType::TCPV4,
                (Transport::Tcp, Addrs::V6 { .. }) => GsoType::TCPV6,
                (Transport::Udp, _) => GsoType::UDP_L4,
            };
            pkt.meta.gso_size = self.gso;
            pkt.meta.gso_segs = 1;
        }
        pkt
    }

    /// The superpacket for `medium`: as built (Ethernet), or minus its
    /// Ethernet header with the checksum start moved (raw IP); `None` for a
    /// case in [`RAW_IP_SKIPPED`].
    fn packet_for(&self, medium: Medium) -> Option<Packet> {
        let pkt = self.packet();
        match medium {
            Medium::Ethernet => Some(pkt),
            Medium::Ip if RAW_IP_SKIPPED.iter().any(|(n, _)| *n == self.name) => None,
            Medium::Ip => {
                let mut ip = Packet::from_frame(&raw_ip::strip_ethernet(&pkt.to_vec()));
                ip.meta = raw_ip::shift_meta(&pkt.meta, -(raw_ip::ETH_LEN as isize));
                Some(ip)
            }
        }
    }

    /// Why the case cannot exist as raw IP ([`raw_ip::ethernet_only`]).
    fn ethernet_only(&self) -> Option<&'static str> {
        raw_ip::ethernet_only(&self.packet().to_vec())
    }
}

fn scenarios() -> Vec<Scenario> {
    let tcp4 = FlowSpec::new(Transport::Tcp, false, 1);
    let tcp6 = FlowSpec::new(Transport::Tcp, true, 2);
    let udp4 = FlowSpec::new(Transport::Udp, false, 3);
    let udp6 = FlowSpec::new(Transport::Udp, true, 4);
    let mut tcp4_nots = tcp4;
    tcp4_nots.tcp_timestamps = false;
    let mut tcp4_nodf = tcp4;
    tcp4_nodf.dont_frag = false;
    let tagged = tcp4.with_vlans(&[(0x8100, 100)]).unwrap();
    let qinq6 = udp6.with_vlans(&[(0x88A8, 10), (0x8100, 20)]).unwrap();
    let s = |name, spec, payload, gso, flags, ecn| Scenario {
        name,
        spec,
        payload,
        gso,
        flags,
        ecn,
        ext: false,
        small: false,
    };
    let x = |name, spec, payload, gso, flags| Scenario {
        name,
        spec,
        payload,
        gso,
        flags,
        ecn: false,
        ext: true,
        small: false,
    };
    let small = |name, spec, payload, gso, flags| Scenario { small: true, ..s(name, spec, payload, gso, flags, false) };
    vec![
        s("tcp4 20x1448 PSH", tcp4_nots, 20 * 1448, 1448, TcpFlags::PSH, false),
        s("tcp4 ts 10x1448+777", tcp4, 10 * 1448 + 777, 1448, TcpFlags::PSH, false),
        s("tcp4 CWR|PSH|FIN ecn", tcp4, 5 * 1448 + 1, 1448, TcpFlags::CWR | TcpFlags::PSH | TcpFlags::FIN, true),
        s("tcp4 CWR|ECE|URG", tcp4, 4 * 1000, 1000, TcpFlags::CWR | TcpFlags::ECE | TcpFlags::URG, false),
        s("tcp4 DF=0 small mss", tcp4_nodf, 3000, 536, TcpFlags::empty(), false),
        s("tcp4 64KB", tcp4, 44 * 1448, 1448, TcpFlags::PSH, false),
        s("tcp4 vlan 100", tagged, 6 * 1444, 1444, TcpFlags::PSH, false),
        s("uso6 qinq 10/20", qinq6, 3 * 1400 + 5, 1400, TcpFlags::empty(), false),
        s("tcp6 10x1428+100", tcp6, 10 * 1428 + 100, 1428, TcpFlags::PSH, false),
        s("tcp6 FIN odd", tcp6, 7 * 999 + 3, 999, TcpFlags::FIN, false),
        s("uso4 20x1400+7", udp4, 20 * 1400 + 7, 1400, TcpFlags::empty(), false),
        s("uso4 odd sizes", udp4, 5 * 333 + 1, 333, TcpFlags::empty(), false),
        s("uso6 20x1400+7", udp6, 20 * 1400 + 7, 1400, TcpFlags::empty(), false),
        x("tcp6 dstopts 5x1400+9", tcp6, 5 * 1400 + 9, 1400, TcpFlags::PSH),
        x("uso6 dstopts 4x1000+1", udp6, 4 * 1000 + 1, 1000, TcpFlags::empty()),
        // No GSO: NEEDS_CSUM only (checksum help).
        s("tcp4 csum only", tcp4, 1000, 1448, TcpFlags::PSH, false),
        s("udp6 csum only", udp6, 1001, 1400, TcpFlags::empty(), false),
        // Marked GSO but no larger than gso_size: one ordinary frame, checksum
        // completed (issue 22 item 4). TCP without options at the boundary, as
        // Linux counts TCP options as payload there (`thlen` = 20).
        small("tcp4 gso = payload", tcp4_nots, 1448, 1448, TcpFlags::PSH | TcpFlags::FIN),
        small("tcp6 gso > payload", tcp6, 1000, 1428, TcpFlags::PSH),
        small("uso4 gso = payload", udp4, 1400, 1400, TcpFlags::empty()),
        small("uso6 gso > payload", udp6, 333, 1400, TcpFlags::empty()),
    ]
}

/// Every Ethernet case has a raw-IP twin, or is in [`RAW_IP_SKIPPED`]
/// because it cannot exist as raw IP (and only then); the skip list has
/// [`RAW_IP_SKIPS_EXPECTED`] entries. Needs no root.
#[test]
fn every_ethernet_case_has_a_raw_ip_twin_or_a_reason() {
    let all = scenarios();
    let cases: Vec<(&str, Option<&'static str>)> = all.iter().map(|s| (s.name, s.ethernet_only())).collect();
    raw_ip::check_derivation(&cases, RAW_IP_SKIPPED, RAW_IP_SKIPS_EXPECTED);
    for sc in &all {
        assert_eq!(sc.packet_for(Medium::Ip).is_some(), sc.ethernet_only().is_none(), "{}", sc.name);
    }
}

/// One segment with its virtio_net_hdr (`hdr_len`, a hint, left out).
type Segment = (VirtioNetHdr, Vec<u8>);

fn without_hdr_len(h: VirtioNetHdr) -> VirtioNetHdr {
    VirtioNetHdr { hdr_len: 0, ..h }
}

/// Where two segment lists first differ.
fn first_difference(kernel: &[Segment], ours: &[Segment]) -> String {
    match kernel.iter().zip(ours).position(|(k, o)| k != o) {
        Some(i) => {
            let (k, o) = (&kernel[i], &ours[i]);
            if k.0 != o.0 {
                return format!("segment {i} header differs: kernel {:?}, ours {:?}", k.0, o.0);
            }
            let at = k.1.iter().zip(&o.1).position(|(a, b)| a != b);
            let window = |f: &[u8]| {
                let from = at.unwrap_or(0).saturating_sub(4);
                format!("{:02x?}", &f[from.min(f.len())..(from + 12).min(f.len())])
            };
            format!(
                "segment {i} differs first at byte {at:?} (lengths {} / {}): kernel {} ours {}",
                k.1.len(),
                o.1.len(),
                window(&k.1),
                window(&o.1)
            )
        }
        None => format!("segment counts differ: kernel {}, ours {}", kernel.len(), ours.len()),
    }
}

#[test]
fn segments_are_byte_identical_to_the_kernels() {
    if !superpacket_engine::io::require_privileges() {
        println!("SKIPPED: gso_kernel_oracle needs root");
        return;
    }
    let all = scenarios();
    let mut seg = Segmenter::new();
    let mut failures = Vec::new();
    let mut ran: HashMap<Medium, Vec<String>> = HashMap::new();
    let mut kernel_ethernet: BTreeMap<&str, Vec<Segment>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for medium in MEDIA {
        eprintln!("---- {medium}");
        let mut oracle = GsoOracle::with_config(GsoOracleConfig { medium, ..GsoOracleConfig::default() })
            .expect("GSO oracle setup (namespaces, veth or TUN, AF_PACKET)");
        let caps = TargetCaps::new(1500).with_medium(medium);
        for sc in &all {
            let Some(pkt) = sc.packet_for(medium) else {
                skipped.push(sc.name);
                eprintln!("{:<24} skipped on {medium}: {}", sc.name, sc.ethernet_only().unwrap_or("?"));
                continue;
            };
            ran.entry(medium).or_default().push(sc.name.to_string());
            let name = format!("{} [{medium}]", sc.name);
            let frame = pkt.to_vec();
            let hdr = match medium {
                Medium::Ethernet => VirtioNetHdr::from_meta(&pkt.meta, &frame, false).unwrap(),
                // The Ethernet case's header with its offsets 14 less.
                Medium::Ip => raw_ip::hdr_to_ip(&{
                    let eth = sc.packet();
                    VirtioNetHdr::from_meta(&eth.meta, &eth.to_vec(), false).unwrap()
                }),
            };
            // Our export of the raw-IP superpacket agrees with that shifted header.
            assert_eq!(raw_ip::export_hdr(&pkt.meta, &frame, medium, false), hdr, "{name}: exported header");
            let kernel: Vec<Segment> = oracle
                .segment_detailed(&hdr, &frame)
                .unwrap_or_else(|e| panic!("{name}: kernel segmentation: {e}"))
                .iter()
                .map(|d| (without_hdr_len(d.hdr), wire_bytes(d)))
                .collect();
            // (b) raw IP: the kernel's Ethernet segments minus the Ethernet header.
            if medium == Medium::Ip {
                let expected: Vec<Segment> = kernel_ethernet[sc.name]
                    .iter()
                    .map(|(h, f)| (without_hdr_len(raw_ip::hdr_to_ip(h)), raw_ip::strip_ethernet(f)))
                    .collect();
                if kernel != expected {
                    failures.push(format!(
                        "{name}: the kernel's raw-IP segments are not its Ethernet segments minus 14 bytes: {}",
                        first_difference(&kernel, &expected)
                    ));
                }
            } else {
                kernel_ethernet.insert(sc.name, kernel.clone());
            }
            // (a) ours against the kernel.
            let mut sink = VecSink::new();
            seg.segment(&pkt, &caps, &mut sink).unwrap_or_else(|e| panic!("{name}: {e}"));
            let ours: Vec<Segment> = sink
                .frames
                .into_iter()
                .map(|f| (without_hdr_len(raw_ip::export_hdr(&f.meta, &f.data, medium, false)), f.data))
                .collect();
            for (_, f) in &ours {
                let mut problems = Vec::new();
                validate_frame(f, medium, &Default::default(), false, &mut problems);
                assert!(problems.is_empty(), "{name}: our segment fails validation: {problems:?}");
            }
            let sizes: Vec<usize> = kernel.iter().map(|(_, f)| f.len()).collect();
            eprintln!(
                "{:<24} kernel {} segments {:?}; ours {}{}",
                sc.name,
                kernel.len(),
                summarize(&sizes),
                ours.len(),
                if kernel == ours { "" } else { "  DIFFERENT" }
            );
            if kernel != ours {
                failures.push(format!("{name}: {}", first_difference(&kernel, &ours)));
            }
        }
        eprintln!("oracle stats ({medium}): {:?}", oracle.stats());
    }
    raw_ip::check_coverage(&ran, &skipped, all.len(), RAW_IP_SKIPPED, RAW_IP_SKIPS_EXPECTED);
    assert!(failures.is_empty(), "differences from the kernel:\n{}", failures.join("\n"));
}

/// "20 x 1502" style summary of a list of sizes.
fn summarize(sizes: &[usize]) -> Vec<String> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &s in sizes {
        match out.last_mut() {
            Some((size, n)) if *size == s => *n += 1,
            _ => out.push((s, 1)),
        }
    }
    out.into_iter().map(|(s, n)| if n == 1 { format!("{s}") } else { format!("{n}x{s}") }).collect()
}
