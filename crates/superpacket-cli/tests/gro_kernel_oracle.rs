//! The running kernel as the GRO oracle (docs/kernel-oracle.md section 5): the same
//! frames are written into an `IFF_NAPI` TAP with a non-zero
//! `gro_flush_timeout` ([`superpacket_lab::GroOracle`]) and given to
//! superpacket's engine; the delivered packets must match frame by frame:
//! length, every byte (headers included: lengths, IPv4 checksum, TCP flags,
//! the pseudo-header sum in the checksum field), gso_type, gso_size and the
//! checksum flags of the virtio_net_hdr.
//!
//! The engine runs with [`GroConfig::kernel_6_18`] (this kernel: current CWR
//! and fixed-ID rules, no padding trim, no VLAN GRO since `CONFIG_VLAN_8021Q`
//! is off). Scenarios whose outcome depends on a version switch are run
//! against both profiles and the one the kernel agrees with is reported and
//! asserted (found on 6.18.44: current CWR rule, although offload-rules 9.2
//! dates it to 2026; current fixed-ID rule; strict padding, i.e. the kernel
//! does not trim, unlike the selftest `data_lrg_1byte` expects).
//!
//! Every case also runs as **raw IP** (what a TUN with `IFF_NO_PI` carries):
//! the same frames minus their 14-byte Ethernet header, written into an
//! `IFF_TUN | IFF_NAPI` device ([`GroOracleConfig::medium`] =
//! [`Medium::Ip`]) and given to the engine with
//! `GroConfig::with_medium(Medium::Ip)`. There, (a) the engine must match
//! the kernel as on Ethernet, and (b) the kernel's raw-IP deliveries must be
//! its Ethernet deliveries minus 14 bytes (`csum_start` 14 less). The case
//! table is one list and the media are a loop, so a new case runs on both;
//! only the cases that cannot exist as raw IP ([`RAW_IP_SKIPPED`]: VLAN
//! tags, Ethernet padding) are skipped, and
//! `every_ethernet_case_has_a_raw_ip_twin_or_a_reason` fails for a case that
//! is neither derived nor listed.
//!
//! Needs root (namespaces, TAP); fails with a clear message otherwise unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, then prints SKIPPED.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::raw_ip::{self, MEDIA};
use superpacket::offload::gro::{self, CwrRule, FixedIdRule, Gro, GroConfig, UdpGroMode};
use superpacket::packet::virtio::{F_DATA_VALID, F_NEEDS_CSUM, VirtioNetHdr};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{FrameHeaders, Medium, TcpFlags};
use superpacket_lab::{GroOracle, GroOracleConfig};

/// Ethernet cases that cannot exist as raw IP, and why.
const RAW_IP_SKIPPED: &[(&str, &str)] =
    &[("S6 802.1Q VID 100", "VLAN-tagged frames"), ("data_lrg_1byte (padded 1-byte segment)", "Ethernet padding")];
/// How many Ethernet cases [`RAW_IP_SKIPPED`] must hold.
const RAW_IP_SKIPS_EXPECTED: usize = 2;

/// One delivered packet, in a form both sides produce.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    /// How `frame` starts.
    medium: Medium,
    frame: Vec<u8>,
    gso_type: u8,
    gso_size: u16,
    /// NEEDS_CSUM / DATA_VALID.
    flags: u8,
    csum: Option<(u16, u16)>,
}

impl Seen {
    fn from_kernel(medium: Medium, hdr: &VirtioNetHdr, frame: Vec<u8>) -> Seen {
        let gso = hdr.gso_type != 0;
        Seen {
            medium,
            frame,
            gso_type: hdr.gso_type,
            gso_size: if gso { hdr.gso_size } else { 0 },
            flags: hdr.flags & (F_NEEDS_CSUM | F_DATA_VALID),
            csum: (hdr.flags & F_NEEDS_CSUM != 0).then_some((hdr.csum_start, hdr.csum_offset)),
        }
    }

    /// The same packet without its Ethernet header (offsets 14 less).
    fn to_raw_ip(&self) -> Seen {
        assert_eq!(self.medium, Medium::Ethernet);
        Seen {
            medium: Medium::Ip,
            frame: raw_ip::strip_ethernet(&self.frame),
            csum: self.csum.map(|(start, off)| (start - raw_ip::ETH_LEN as u16, off)),
            ..self.clone()
        }
    }

    fn short(&self) -> String {
        let h = self.medium.parse(&self.frame).ok();
        format!(
            "{}B/{}p gso={} size={} flags={}",
            self.frame.len(),
            h.map_or(0, |h| h.payload_len),
            self.gso_type,
            self.gso_size,
            self.flags
        )
    }

    /// Source port of the frame (the flow).
    fn flow(&self) -> u16 {
        let h = self.medium.parse(&self.frame).expect("delivered frames parse");
        u16::from_be_bytes([self.frame[h.l4_offset], self.frame[h.l4_offset + 1]])
    }
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
            let meta = gro::capture_bytes(&p, cfg.medium, &mut buf);
            let hdr = raw_ip::export_hdr(&meta, &buf, cfg.medium, true);
            // This kernel strips VLAN tags into metadata (no 8021q): compare untagged.
            let mut frame = buf.clone();
            while cfg.medium == Medium::Ethernet
                && frame.len() >= 18
                && matches!(u16::from_be_bytes([frame[12], frame[13]]), 0x8100 | 0x88A8)
            {
                frame.drain(12..16);
            }
            Seen::from_kernel(cfg.medium, &hdr, frame)
        })
        .collect()
}

fn kernel(oracle: &mut GroOracle, frames: &[Vec<u8>]) -> Vec<Seen> {
    let medium = oracle.medium();
    oracle.run(frames).expect("oracle run").into_iter().map(|(h, f)| Seen::from_kernel(medium, &h, f)).collect()
}

/// Per-flow sequences (delivery order across flows depends on the hash
/// bucket order, which differs: the kernel hashes with the flow dissector).
fn by_flow(v: &[Seen]) -> BTreeMap<u16, Vec<Seen>> {
    let mut m: BTreeMap<u16, Vec<Seen>> = BTreeMap::new();
    for s in v {
        m.entry(s.flow()).or_default().push(s.clone());
    }
    m
}

fn same(a: &[Seen], b: &[Seen]) -> bool {
    by_flow(a) == by_flow(b)
}

fn describe(v: &[Seen]) -> String {
    v.iter().map(Seen::short).collect::<Vec<_>>().join(", ")
}

fn tcp(idx: u32, v6: bool) -> Flow {
    let mut spec = FlowSpec::new(Transport::Tcp, v6, idx);
    spec.tcp_timestamps = false;
    Flow::new(spec)
}

fn segs(f: &mut Flow, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| f.frame(len, TcpFlags::empty()).unwrap()).collect()
}

fn refresh(frame: &mut [u8]) {
    let h = FrameHeaders::parse(frame).unwrap();
    let at = h.l4_offset + 16;
    frame[at..at + 2].fill(0);
    let pseudo = superpacket::validate::l4_pseudo_header_sum(frame, &h).unwrap();
    let c = !superpacket::csum::ones_add(pseudo, superpacket::csum::ones_sum(&frame[h.l4_offset..h.l3_end()]));
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// A scenario: name, Ethernet frames, and whether the outcome is a version
/// switch (then both profiles are tried).
struct Scenario {
    name: &'static str,
    frames: Vec<Vec<u8>>,
    /// (profile A, config A, profile B, config B, the profile this kernel follows).
    switch: Option<(&'static str, GroConfig, &'static str, GroConfig, &'static str)>,
    /// UDP: kernel UDP GRO needs `rx-udp-gro-forwarding` on the device, and
    /// the engine runs with `UdpGroMode::Forward`.
    udp_forwarding: bool,
}

impl Scenario {
    /// The frames for `medium`: as built (Ethernet), or minus their Ethernet
    /// header (raw IP); `None` for a case in [`RAW_IP_SKIPPED`].
    fn frames_for(&self, medium: Medium) -> Option<Vec<Vec<u8>>> {
        match medium {
            Medium::Ethernet => Some(self.frames.clone()),
            Medium::Ip if RAW_IP_SKIPPED.iter().any(|(n, _)| *n == self.name) => None,
            Medium::Ip => Some(self.frames.iter().map(|f| raw_ip::strip_ethernet(f)).collect()),
        }
    }

    /// Why the case cannot exist as raw IP (a frame's [`raw_ip::ethernet_only`]).
    fn ethernet_only(&self) -> Option<&'static str> {
        self.frames.iter().find_map(|f| raw_ip::ethernet_only(f))
    }
}

fn scenarios() -> Vec<Scenario> {
    let base = GroConfig::kernel_6_18();
    let mut out = Vec::new();
    let mut add = |name, frames| out.push(Scenario { name, frames, switch: None, udp_forwarding: false });

    // S1: 20 in-order segments, PSH on the last.
    let mut f = tcp(1, false);
    let mut fr = segs(&mut f, 19, 1448);
    fr.push(f.frame(1448, TcpFlags::PSH).unwrap());
    add("S1 20 segments, PSH last", fr);
    // S2: PSH on #5.
    let mut f = tcp(2, false);
    let mut fr = segs(&mut f, 4, 1448);
    fr.push(f.frame(1448, TcpFlags::PSH).unwrap());
    fr.extend(segs(&mut f, 5, 1448));
    add("S2 PSH on #5", fr);
    // S3: two flows interleaved.
    let (mut a, mut b) = (tcp(3, false), tcp(4, false));
    let fr =
        (0..8).flat_map(|_| [a.frame(1448, TcpFlags::empty()).unwrap(), b.frame(1448, TcpFlags::empty()).unwrap()]);
    add("S3 two flows interleaved", fr.collect());
    // S3b: shared IP ID counter (+2 within a flow).
    let (mut a, mut b) = (tcp(5, false), tcp(6, false));
    let mut id = 100u16;
    let mut fr = Vec::new();
    for _ in 0..8 {
        for f in [&mut a, &mut b] {
            f.ip_id = id;
            id += 1;
            fr.push(f.frame(1448, TcpFlags::empty()).unwrap());
        }
    }
    add("S3b shared IP ID counter", fr);
    // S3c: fixed IP ID with DF.
    let mut f = tcp(7, false);
    let fr = (0..6)
        .map(|_| {
            f.ip_id = 77;
            f.frame(1448, TcpFlags::empty()).unwrap()
        })
        .collect();
    add("S3c fixed IP ID, DF", fr);
    // S4: #5 missing.
    let mut f = tcp(8, false);
    let mut fr = segs(&mut f, 4, 1448);
    let _ = f.frame(1448, TcpFlags::empty());
    fr.extend(segs(&mut f, 5, 1448));
    add("S4 sequence gap", fr);
    // S5: #4 bad checksum, #8 short.
    let mut f = tcp(9, false);
    let mut fr = segs(&mut f, 7, 1448);
    let l = fr[3].len() - 1;
    fr[3][l] ^= 0xFF;
    fr.push(f.frame(500, TcpFlags::empty()).unwrap());
    add("S5 bad checksum #4, short #8", fr);
    // S6: 802.1Q tagged.
    let mut f = Flow::new({
        let mut s = FlowSpec::new(Transport::Tcp, false, 10).with_vlans(&[(0x8100, 100)]).unwrap();
        s.tcp_timestamps = false;
        s
    });
    add("S6 802.1Q VID 100", segs(&mut f, 10, 1448));
    // IPv6.
    let mut f = tcp(11, true);
    let mut fr = segs(&mut f, 19, 1448);
    fr.push(f.frame(1448, TcpFlags::PSH).unwrap());
    add("IPv6 20 segments", fr);
    // Beyond the spec's table.
    let mut f = tcp(12, false);
    add("64 KB limit (50 segments)", segs(&mut f, 50, 1448));
    let mut f = tcp(13, false);
    let mut fr = segs(&mut f, 3, 1000);
    fr.push(f.frame(0, TcpFlags::empty()).unwrap());
    fr.extend(segs(&mut f, 3, 1000));
    fr.push(f.frame(0, TcpFlags::SYN).unwrap());
    add("pure ACK and SYN", fr);
    let mut f = tcp(14, false);
    let mut fr = segs(&mut f, 3, 1000);
    f.spec.ttl = 63;
    fr.extend(segs(&mut f, 3, 1000));
    f.spec.tos = 0x01;
    fr.extend(segs(&mut f, 3, 1000));
    add("TTL then ECN change", fr);
    let mut f = tcp(15, false);
    let mut fr = segs(&mut f, 3, 1000);
    let mut w = f.frame(1000, TcpFlags::empty()).unwrap();
    let h = FrameHeaders::parse(&w).unwrap();
    w[h.l4_offset + 15] ^= 1;
    refresh(&mut w);
    fr.push(w);
    fr.extend(segs(&mut f, 2, 1000));
    add("window change", fr);
    let mut f = tcp(16, true);
    let mut fr = segs(&mut f, 3, 1000);
    f.spec.ttl = 9;
    fr.extend(segs(&mut f, 3, 1000));
    add("IPv6 hop limit change", fr);

    // Version switches.
    let mut f = tcp(20, false);
    let mut fr = segs(&mut f, 2, 1448);
    fr.push(f.frame(1448, TcpFlags::CWR).unwrap());
    fr.extend(segs(&mut f, 3, 1448));
    out.push(Scenario {
        name: "CWR in the middle",
        frames: fr,
        udp_forwarding: false,
        switch: Some((
            "legacy CWR (<= 6.19)",
            GroConfig { cwr: CwrRule::Legacy, ..base },
            "current CWR",
            GroConfig { cwr: CwrRule::Current, ..base },
            "current CWR",
        )),
    });
    let mut f = tcp(21, false);
    f.spec.dont_frag = false;
    let fr = (0..4)
        .map(|_| {
            f.ip_id = 5;
            f.frame(1448, TcpFlags::empty()).unwrap()
        })
        .collect();
    out.push(Scenario {
        name: "fixed IP ID without DF",
        frames: fr,
        udp_forwarding: false,
        switch: Some((
            "current fixed ID (DF irrelevant)",
            GroConfig { fixed_id: FixedIdRule::Current, ..base },
            "legacy fixed ID (DF required)",
            GroConfig { fixed_id: FixedIdRule::Legacy, ..base },
            "current fixed ID (DF irrelevant)",
        )),
    });
    let mut f = tcp(22, false);
    let mut fr = vec![f.frame(100, TcpFlags::empty()).unwrap()];
    let mut one = f.frame(1, TcpFlags::empty()).unwrap();
    one.resize(60, 0); // Ethernet minimum: 55 -> 60 bytes
    fr.push(one);
    out.push(Scenario {
        name: "data_lrg_1byte (padded 1-byte segment)",
        frames: fr,
        udp_forwarding: false,
        switch: Some((
            "strict (no trim)",
            GroConfig { trim_padding: false, ..base },
            "trim padding (9.1.1)",
            GroConfig { trim_padding: true, ..base },
            "strict (no trim)",
        )),
    });

    // UDP (kernel UDP GRO needs rx-udp-gro-forwarding on the device).
    for (name, v6) in [("UDP/IPv4 10 x 1400 + 300", false), ("UDP/IPv6 10 x 1400 + 300", true)] {
        let mut f = Flow::new(FlowSpec::new(Transport::Udp, v6, 30));
        let mut frames: Vec<Vec<u8>> = (0..10).map(|_| f.frame(1400, TcpFlags::empty()).unwrap()).collect();
        frames.push(f.frame(300, TcpFlags::empty()).unwrap());
        frames.extend((0..3).map(|_| f.frame(1400, TcpFlags::empty()).unwrap()));
        out.push(Scenario { name, frames, switch: None, udp_forwarding: true });
    }
    out
}

/// Every Ethernet case has a raw-IP twin, or is in [`RAW_IP_SKIPPED`]
/// because one of its frames cannot exist as raw IP (and only then); the
/// skip list has [`RAW_IP_SKIPS_EXPECTED`] entries. Needs no root.
#[test]
fn every_ethernet_case_has_a_raw_ip_twin_or_a_reason() {
    let all = scenarios();
    let cases: Vec<(&str, Option<&'static str>)> = all.iter().map(|s| (s.name, s.ethernet_only())).collect();
    raw_ip::check_derivation(&cases, RAW_IP_SKIPPED, RAW_IP_SKIPS_EXPECTED);
    for s in &all {
        assert_eq!(s.frames_for(Medium::Ip).is_some(), s.ethernet_only().is_none(), "{}", s.name);
    }
}

#[test]
fn kernel_gro_matches_superpacket() {
    if !superpacket_engine::io::require_privileges() {
        println!("SKIPPED: kernel GRO oracle needs root");
        return;
    }
    let base = GroConfig::kernel_6_18();
    let all = scenarios();
    let mut failures = Vec::new();
    // Per medium: the cases run; the kernel's Ethernet deliveries by case, for (b).
    let mut ran: HashMap<Medium, Vec<String>> = HashMap::new();
    let mut kernel_ethernet: BTreeMap<&str, Vec<Seen>> = BTreeMap::new();
    let mut skipped = Vec::new();
    for medium in MEDIA {
        println!("---- {medium}");
        let mut oracles = BTreeMap::new();
        for udp_forwarding in [false, true] {
            let cfg = GroOracleConfig { medium, udp_gro_forwarding: udp_forwarding, ..GroOracleConfig::default() };
            oracles.insert(udp_forwarding, GroOracle::with_config(cfg).expect("GRO oracle setup"));
        }
        for s in &all {
            let Some(frames) = s.frames_for(medium) else {
                skipped.push(s.name);
                println!("{:<40} skipped on {medium}: {}", s.name, s.ethernet_only().unwrap_or("?"));
                continue;
            };
            let oracle = oracles.get_mut(&s.udp_forwarding).expect("both oracles exist");
            let k = kernel(oracle, &frames);
            ran.entry(medium).or_default().push(s.name.to_string());
            let name = format!("{} [{medium}]", s.name);
            // (b) raw IP: the kernel's Ethernet result minus the Ethernet header.
            if medium == Medium::Ip {
                let expected: Vec<Seen> = kernel_ethernet[s.name].iter().map(Seen::to_raw_ip).collect();
                if !same(&k, &expected) {
                    failures.push(format!(
                        "{name}: the kernel's raw-IP result is not its Ethernet result minus 14 bytes\n  raw IP:   {}\n  Ethernet: {}",
                        describe(&k),
                        describe(&expected)
                    ));
                }
            } else {
                kernel_ethernet.insert(s.name, k.clone());
            }
            // (a) the engine against the kernel.
            let base = if s.udp_forwarding { GroConfig { udp: UdpGroMode::Forward, ..base } } else { base };
            match s.switch {
                None => {
                    let o = ours(base.with_medium(medium), &frames);
                    let ok = same(&k, &o);
                    println!("{:<40} kernel [{}] {}", s.name, describe(&k), if ok { "== ours" } else { "!= ours" });
                    if !ok {
                        failures.push(format!("{name}:\n  kernel: {}\n  ours:   {}", describe(&k), describe(&o)));
                    }
                }
                Some((name_a, cfg_a, name_b, cfg_b, expected)) => {
                    let (a, b) = (ours(cfg_a.with_medium(medium), &frames), ours(cfg_b.with_medium(medium), &frames));
                    let follows = |profile: &str, failures: &mut Vec<String>| {
                        if profile != expected {
                            failures.push(format!("{name}: kernel follows {profile}, expected {expected}"));
                        }
                        format!("kernel follows {profile}")
                    };
                    let verdict = match (same(&k, &a), same(&k, &b)) {
                        (true, true) => "both profiles agree".to_string(),
                        (true, false) => follows(name_a, &mut failures),
                        (false, true) => follows(name_b, &mut failures),
                        (false, false) => {
                            failures.push(format!(
                                "{name}: neither profile\n  kernel: {}\n  {name_a}: {}\n  {name_b}: {}",
                                describe(&k),
                                describe(&a),
                                describe(&b)
                            ));
                            "NEITHER".to_string()
                        }
                    };
                    println!("{:<40} kernel [{}] {verdict}", s.name, describe(&k));
                }
            }
        }
        for (udp, o) in &oracles {
            println!("oracle stats ({medium}, udp forwarding {udp}): {:?}", o.stats());
        }
    }
    raw_ip::check_coverage(&ran, &skipped, all.len(), RAW_IP_SKIPPED, RAW_IP_SKIPS_EXPECTED);
    assert!(failures.is_empty(), "superpacket differs from the kernel:\n{}", failures.join("\n"));
}
