//! Table-driven GRO tests (wireguard-go style): every rule of offload-rules
//! sections 1 and 2, run for IPv4 and IPv6, untagged, 802.1Q and QinQ.
//!
//! A case is a list of inputs (frames, frames with metadata, batch ends) and
//! the expected delivered packets in order, each as (wire segments, payload
//! bytes, checksum valid). Every case also checks: every delivered frame
//! validates (`validate::validate_frame`, with its metadata) unless marked
//! bad, segments and payload bytes are conserved, and the counters add up.

use super::*;
use crate::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use crate::traffic::{Flow, FlowSpec, Transport};
use crate::validate::{self, Medium};
use crate::wire::{FrameHeaders, TcpFlags};

// ---------------------------------------------------------------- helpers

/// A family / tagging variant every case runs in.
#[derive(Debug, Clone, Copy)]
pub(super) struct Variant {
    pub name: &'static str,
    pub v6: bool,
    pub tags: &'static [(u16, u16)],
}

pub(super) const VARIANTS: [Variant; 6] = [
    Variant { name: "ipv4", v6: false, tags: &[] },
    Variant { name: "ipv4-8021q", v6: false, tags: &[(0x8100, 100)] },
    Variant { name: "ipv4-qinq", v6: false, tags: &[(0x88A8, 10), (0x8100, 20)] },
    Variant { name: "ipv6", v6: true, tags: &[] },
    Variant { name: "ipv6-8021q", v6: true, tags: &[(0x8100, 100)] },
    Variant { name: "ipv6-qinq", v6: true, tags: &[(0x88A8, 10), (0x8100, 20)] },
];

/// Flow number `idx` of the variant.
pub(super) fn flow(v: &Variant, t: Transport, idx: u32) -> Flow {
    Flow::new(FlowSpec::new(t, v.v6, idx).with_vlans(v.tags).expect("two tags fit"))
}

/// One input of a case.
pub(super) enum In {
    /// A frame (checksum state NONE).
    F(Vec<u8>),
    /// A frame with metadata.
    M(Vec<u8>, OffloadMeta),
    /// End of a receive batch.
    Flush,
}

/// One expected delivered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Out {
    pub segs: u32,
    pub payload: usize,
    pub valid: bool,
}

const fn ok(segs: u32, payload: usize) -> Out {
    Out { segs, payload, valid: true }
}

const fn bad(payload: usize) -> Out {
    Out { segs: 1, payload, valid: false }
}

fn seg(f: &mut Flow, len: usize) -> In {
    In::F(f.frame(len, TcpFlags::empty()).expect("frame"))
}

fn segf(f: &mut Flow, len: usize, flags: TcpFlags) -> In {
    In::F(f.frame(len, flags).expect("frame"))
}

/// Recomputes the IPv4 header checksum and the TCP/UDP checksum of a frame.
pub(super) fn refresh(frame: &mut [u8]) {
    assert!(validate::refresh_checksums(frame), "frame parses");
}

/// Edits a frame (`f(frame, headers)`) and fixes its checksums.
fn edit(input: In, f: impl FnOnce(&mut Vec<u8>, &FrameHeaders)) -> In {
    let In::F(mut frame) = input else { panic!("edit a plain frame") };
    let h = FrameHeaders::parse(&frame).expect("parses");
    f(&mut frame, &h);
    refresh(&mut frame);
    In::F(frame)
}

/// Edits the TCP header (window, flags...).
fn tcp_edit(input: In, f: impl FnOnce(&mut [u8])) -> In {
    edit(input, |fr, h| f(&mut fr[h.l4_offset..]))
}

/// Edits the IP header.
fn ip_edit(input: In, f: impl FnOnce(&mut [u8])) -> In {
    edit(input, |fr, h| f(&mut fr[h.l3_offset..]))
}

/// Corrupts the L4 checksum (after `edit`).
fn corrupt_l4(input: In) -> In {
    let In::F(mut frame) = input else { panic!() };
    let h = FrameHeaders::parse(&frame).unwrap();
    let at = h.l4_offset + usize::from(h.l4.csum_offset().expect("TCP or UDP"));
    frame[at] ^= 0x5a;
    In::F(frame)
}

/// Inserts `ext` (IPv6 extension headers whose first next-header byte is
/// patched in) between the IPv6 header and the L4 header.
fn insert_v6_ext(input: In, first_nh: u8, mut ext: Vec<u8>) -> In {
    let In::F(mut frame) = input else { panic!() };
    let h = FrameHeaders::parse(&frame).unwrap();
    let l3 = h.l3_offset;
    let upper = frame[l3 + 6];
    // The last extension header's next header is the upper protocol.
    let mut at = 0;
    loop {
        let len = if ext.len() - at == 8 || first_nh == 44 { 8 } else { (ext[at + 1] as usize + 1) * 8 };
        if at + len >= ext.len() {
            ext[at] = upper;
            break;
        }
        at += len;
    }
    frame[l3 + 6] = first_nh;
    let pl = u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]) + ext.len() as u16;
    frame[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
    let pos = l3 + 40;
    frame.splice(pos..pos, ext);
    refresh(&mut frame);
    In::F(frame)
}

/// Adds 4 bytes of IPv4 options (NOPs).
fn add_ipv4_options(input: In) -> In {
    edit(input, |fr, h| {
        let l3 = h.l3_offset;
        fr.splice(l3 + 20..l3 + 20, [1u8, 1, 1, 0]);
        fr[l3] = 0x46;
        let tl = u16::from_be_bytes([fr[l3 + 2], fr[l3 + 3]]) + 4;
        fr[l3 + 2..l3 + 4].copy_from_slice(&tl.to_be_bytes());
    })
}

/// Pads the frame with zero bytes (Ethernet padding).
fn pad(input: In, n: usize) -> In {
    let In::F(mut frame) = input else { panic!() };
    frame.resize(frame.len() + n, 0);
    In::F(frame)
}

fn with_meta(input: In, meta: OffloadMeta) -> In {
    let In::F(frame) = input else { panic!() };
    In::M(frame, meta)
}

/// Runs the engine over the inputs (flushing at the end).
pub(super) fn run(cfg: GroConfig, inputs: Vec<In>) -> (Vec<Packet>, GroCounters) {
    let mut g = Gro::new(cfg);
    for i in inputs {
        match i {
            In::F(f) => g.receive_frame(&f),
            In::M(f, m) => {
                let mut p = Packet::from_frame(&f);
                p.meta = m;
                g.receive(p);
            }
            In::Flush => g.flush(),
        }
    }
    g.flush();
    assert_eq!(g.held(), 0);
    (g.drain_delivered().collect(), *g.counters())
}

/// The shape of a delivered packet, after validating it.
pub(super) fn shape(p: &Packet, valid_expected: bool, ctx: &str) -> Out {
    let mut bytes = Vec::new();
    let meta = capture_bytes(p, Medium::Ethernet, &mut bytes);
    assert_eq!(bytes.len(), p.total_len(), "{ctx}: capture covers the whole packet");
    let h = FrameHeaders::parse(&bytes).unwrap_or_else(|e| panic!("{ctx}: output does not parse: {e}"));
    if meta.is_gso() {
        assert_eq!(h.l2_padding, 0, "{ctx}: IP length matches the superpacket");
    }
    assert!(h.l3_len <= 65535, "{ctx}: L3 size bound");
    let mut problems = Vec::new();
    validate::validate_frame(&bytes, Medium::Ethernet, &meta, false, &mut problems);
    let valid = problems.is_empty();
    if valid_expected {
        assert!(valid, "{ctx}: output does not validate: {problems:?} (meta {meta:?})");
    }
    let segs = if meta.is_gso() { meta.gso_segs as u32 } else { 1 };
    if meta.is_gso() {
        assert!(matches!(meta.csum, ChecksumState::Partial { .. }), "{ctx}: superpacket is CHECKSUM_PARTIAL");
    }
    Out { segs, payload: h.payload_len, valid }
}

/// One table entry.
struct Case {
    name: &'static str,
    /// Run for IPv4 variants only (IPv4 header rules).
    v4_only: bool,
    /// Run for IPv6 variants only.
    v6_only: bool,
    cfg: GroConfig,
    build: fn(&Variant) -> Vec<In>,
    want: Vec<Out>,
}

fn case(name: &'static str, build: fn(&Variant) -> Vec<In>, want: &[Out]) -> Case {
    Case { name, v4_only: false, v6_only: false, cfg: LINUX, build, want: want.to_vec() }
}

const LINUX: GroConfig = GroConfig::LINUX;

const UDP_FWD: GroConfig = GroConfig { udp: UdpGroMode::Forward, ..LINUX };
const STRICT: GroConfig = GroConfig { trim_padding: false, ..LINUX };
const LEGACY_CWR: GroConfig = GroConfig { cwr: CwrRule::Legacy, ..LINUX };
const LEGACY_ID: GroConfig = GroConfig { fixed_id: FixedIdRule::Legacy, ..LINUX };

fn tcp(v: &Variant) -> Flow {
    flow(v, Transport::Tcp, 1)
}

fn udp(v: &Variant) -> Flow {
    flow(v, Transport::Udp, 1)
}

fn v4(mut c: Case) -> Case {
    c.v4_only = true;
    c
}

fn v6(mut c: Case) -> Case {
    c.v6_only = true;
    c
}

fn cfg(mut c: Case, cfg: GroConfig) -> Case {
    c.cfg = cfg;
    c
}

// ---------------------------------------------------------------- the table

fn cases() -> Vec<Case> {
    vec![
        // --- basic coalescing, flags (offload-rules 1.3 outcome matrix)
        case(
            "in-order segments merge",
            |v| {
                let mut f = tcp(v);
                (0..4).map(|_| seg(&mut f, 1000)).collect()
            },
            &[ok(4, 4000)],
        ),
        case("single segment goes out unchanged", |v| vec![seg(&mut tcp(v), 1000)], &[ok(1, 1000)]),
        case(
            "PSH on the last closes the aggregate",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), seg(&mut f, 1000), segf(&mut f, 1000, TcpFlags::PSH), seg(&mut f, 1000)]
            },
            &[ok(3, 3000), ok(1, 1000)],
        ),
        case(
            "PSH in the middle splits (S2)",
            |v| {
                let mut f = tcp(v);
                let mut out: Vec<In> = (0..4).map(|_| seg(&mut f, 1448)).collect();
                out.push(segf(&mut f, 1448, TcpFlags::PSH));
                out.extend((0..5).map(|_| seg(&mut f, 1448)));
                out
            },
            &[ok(5, 5 * 1448), ok(5, 5 * 1448)],
        ),
        case(
            "FIN closes the aggregate",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), segf(&mut f, 1000, TcpFlags::FIN), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(1, 1000)],
        ),
        case("PSH without an aggregate bypasses", |v| vec![segf(&mut tcp(v), 1000, TcpFlags::PSH)], &[ok(1, 1000)]),
        case(
            "SYN flushes the flow and bypasses",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), seg(&mut f, 1000), segf(&mut f, 0, TcpFlags::SYN), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(1, 0), ok(1, 1000)],
        ),
        case(
            "RST flushes the flow and bypasses",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), segf(&mut f, 1000, TcpFlags::RST)]
            },
            &[ok(1, 1000), ok(1, 1000)],
        ),
        case(
            "URG flushes the flow and bypasses",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), segf(&mut f, 1000, TcpFlags::URG), seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(1, 1000), ok(1, 1000), ok(2, 2000)],
        ),
        case("zero-length segment alone bypasses", |v| vec![seg(&mut tcp(v), 0)], &[ok(1, 0)]),
        case(
            "pure ACK flushes the aggregate",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), seg(&mut f, 1000), seg(&mut f, 0), seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(1, 0), ok(2, 2000)],
        ),
        case(
            "zero-length FIN flushes and bypasses",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), seg(&mut f, 1000), segf(&mut f, 0, TcpFlags::FIN)]
            },
            &[ok(2, 2000), ok(1, 0)],
        ),
        // --- CWR/ECE (1.3 (a), 9.2)
        case(
            "CWR current: must match, may start",
            |v| {
                let mut f = tcp(v);
                vec![
                    segf(&mut f, 1000, TcpFlags::CWR),
                    segf(&mut f, 1000, TcpFlags::CWR),
                    seg(&mut f, 1000),
                    seg(&mut f, 1000),
                ]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        cfg(
            case(
                "CWR legacy: starts, later segments join",
                |v| {
                    let mut f = tcp(v);
                    vec![segf(&mut f, 1000, TcpFlags::CWR), seg(&mut f, 1000), seg(&mut f, 1000)]
                },
                &[ok(3, 3000)],
            ),
            LEGACY_CWR,
        ),
        cfg(
            case(
                "CWR legacy: never joins",
                |v| {
                    let mut f = tcp(v);
                    vec![seg(&mut f, 1000), seg(&mut f, 1000), segf(&mut f, 1000, TcpFlags::CWR), seg(&mut f, 1000)]
                },
                &[ok(2, 2000), ok(2, 2000)],
            ),
            LEGACY_CWR,
        ),
        case(
            "ECE differs",
            |v| {
                let mut f = tcp(v);
                vec![
                    seg(&mut f, 1000),
                    seg(&mut f, 1000),
                    segf(&mut f, 1000, TcpFlags::ECE),
                    segf(&mut f, 1000, TcpFlags::ECE),
                ]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        // --- ACK, window, options (1.3 (a), (c), (d))
        case(
            "ACK number differs",
            |v| {
                let mut f = tcp(v);
                let a = seg(&mut f, 1000);
                let b = seg(&mut f, 1000);
                f.ack += 1;
                vec![a, b, seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        case(
            "window differs",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                let c = tcp_edit(seg(&mut f, 1000), |t| t[15] ^= 1);
                vec![a, b, c]
            },
            &[ok(2, 2000), ok(1, 1000)],
        ),
        case(
            "TCP timestamp differs",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                f.ts_val += 1;
                vec![a, b, seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        case(
            "option bytes differ, same length",
            |v| {
                let mut f = tcp(v);
                let a = seg(&mut f, 1000);
                // NOP NOP TS -> TS with the NOPs after it (same length, other bytes).
                let b = tcp_edit(seg(&mut f, 1000), |t| {
                    let ts: Vec<u8> = t[22..32].to_vec();
                    t[20..30].copy_from_slice(&ts);
                    t[30] = 1;
                    t[31] = 1;
                });
                vec![a, b]
            },
            &[ok(1, 1000), ok(1, 1000)],
        ),
        // --- payload size (1.3 (e))
        case(
            "short segment closes",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), seg(&mut f, 1000), seg(&mut f, 500), seg(&mut f, 1000)]
            },
            &[ok(3, 2500), ok(1, 1000)],
        ),
        case(
            "longer segment does not join",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 500), seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(1, 500), ok(2, 2000)],
        ),
        case(
            "1-byte segments merge",
            |v| {
                let mut f = tcp(v);
                (0..10).map(|_| seg(&mut f, 1)).collect()
            },
            &[ok(10, 10)],
        ),
        // --- sequence (1.3 (f))
        case(
            "sequence gap (S4)",
            |v| {
                let mut f = tcp(v);
                let mut out: Vec<In> = (0..4).map(|_| seg(&mut f, 1448)).collect();
                let _lost = seg(&mut f, 1448);
                out.extend((0..5).map(|_| seg(&mut f, 1448)));
                out
            },
            &[ok(4, 4 * 1448), ok(5, 5 * 1448)],
        ),
        case(
            "retransmission does not merge",
            |v| {
                let mut f = tcp(v);
                let a = f.clone();
                let first = seg(&mut f, 1000);
                let second = seg(&mut f, 1000);
                let mut again = a;
                vec![first, second, seg(&mut again, 1000)]
            },
            &[ok(2, 2000), ok(1, 1000)],
        ),
        // --- size limit (1.1, 1.5)
        case(
            "64 KB limit",
            |v| {
                let mut f = tcp(v);
                (0..50).map(|_| seg(&mut f, 1448)).collect()
            },
            &[ok(45, 45 * 1448), ok(5, 5 * 1448)],
        ),
        // --- IPv4 network rules (1.3 (b))
        v4(case(
            "IPv4 ID incrementing merges; +2 does not (S3b)",
            |v| {
                let mut f = tcp(v);
                let mut out = vec![seg(&mut f, 1000), seg(&mut f, 1000)];
                f.ip_id = f.ip_id.wrapping_add(1);
                out.push(seg(&mut f, 1000));
                out
            },
            &[ok(2, 2000), ok(1, 1000)],
        )),
        v4(case(
            "IPv4 ID wraps",
            |v| {
                let mut f = tcp(v);
                f.ip_id = 0xFFFE;
                (0..4).map(|_| seg(&mut f, 1000)).collect()
            },
            &[ok(4, 4000)],
        )),
        v4(case(
            "IPv4 fixed ID latched (S3c)",
            |v| {
                let mut f = tcp(v);
                (0..6)
                    .map(|_| {
                        f.ip_id = 7;
                        seg(&mut f, 1000)
                    })
                    .collect()
            },
            &[ok(6, 6000)],
        )),
        v4(case(
            "IPv4 fixed ID without DF merges (current)",
            |v| {
                let mut f = tcp(v);
                f.spec.dont_frag = false;
                (0..3)
                    .map(|_| {
                        f.ip_id = 7;
                        seg(&mut f, 1000)
                    })
                    .collect()
            },
            &[ok(3, 3000)],
        )),
        v4(cfg(
            case(
                "IPv4 fixed ID without DF does not merge (legacy)",
                |v| {
                    let mut f = tcp(v);
                    f.spec.dont_frag = false;
                    (0..3)
                        .map(|_| {
                            f.ip_id = 7;
                            seg(&mut f, 1000)
                        })
                        .collect()
                },
                &[ok(1, 1000), ok(1, 1000), ok(1, 1000)],
            ),
            LEGACY_ID,
        )),
        v4(cfg(
            case(
                "IPv4 fixed ID with DF merges (legacy)",
                |v| {
                    let mut f = tcp(v);
                    (0..3)
                        .map(|_| {
                            f.ip_id = 7;
                            seg(&mut f, 1000)
                        })
                        .collect()
                },
                &[ok(3, 3000)],
            ),
            LEGACY_ID,
        )),
        v4(case(
            "IPv4 fixed then incrementing ID breaks",
            |v| {
                let mut f = tcp(v);
                let mut out: Vec<In> = (0..3)
                    .map(|_| {
                        f.ip_id = 7;
                        seg(&mut f, 1000)
                    })
                    .collect();
                f.ip_id = 8;
                out.push(seg(&mut f, 1000));
                out
            },
            &[ok(3, 3000), ok(1, 1000)],
        )),
        v4(case(
            "IPv4 DF differs",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                f.spec.dont_frag = false;
                vec![a, b, seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(2, 2000)],
        )),
        case(
            "TTL / hop limit differs",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                f.spec.ttl = 63;
                vec![a, b, seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        case(
            "TOS / traffic class differs",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                f.spec.tos = 0x20;
                vec![a, b, seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(1, 1000)],
        ),
        case(
            "ECN bits differ (ECT0 vs CE)",
            |v| {
                let mut f = tcp(v);
                f.spec.tos = 0x02;
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                f.spec.tos = 0x03;
                vec![a, b, seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        v4(case(
            "IPv4 options bypass, held data untouched",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                let c = add_ipv4_options(seg(&mut f, 1000));
                vec![a, b, c, seg(&mut f, 1000)]
            },
            &[ok(1, 1000), ok(2, 2000), ok(1, 1000)],
        )),
        v4(case(
            "IPv4 fragment bypasses",
            |v| {
                let mut f = tcp(v);
                let a = seg(&mut f, 1000);
                let b = ip_edit(seg(&mut f, 1000), |ip| ip[6] |= 0x20);
                vec![a, b]
            },
            &[ok(1, 1000), ok(1, 1000)],
        )),
        v4(case(
            "bad IPv4 header checksum bypasses",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                let In::F(mut c) = seg(&mut f, 1000) else { unreachable!() };
                let l3 = 14 + 4 * v.tags.len();
                c[l3 + 10] ^= 1;
                vec![a, b, In::F(c), seg(&mut f, 1000)]
            },
            &[bad(1000), ok(2, 2000), ok(1, 1000)],
        )),
        v4(case(
            "IPv4 reserved flag flushes",
            |v| {
                let mut f = tcp(v);
                let (a, b) = (seg(&mut f, 1000), seg(&mut f, 1000));
                let c = ip_edit(seg(&mut f, 1000), |ip| ip[6] |= 0x80);
                vec![a, b, c]
            },
            &[ok(2, 2000), ok(1, 1000)],
        )),
        // --- IPv6 rules (1.2)
        v6(case(
            "IPv6 flow label differs: separate flows, no flush",
            |v| {
                let mut a = tcp(v);
                let mut b = tcp(v);
                let relabel = |i: In| ip_edit(i, |ip| ip[3] ^= 0x55);
                vec![seg(&mut a, 1000), relabel(seg(&mut b, 1000)), seg(&mut a, 1000), relabel(seg(&mut b, 1000))]
            },
            &[ok(2, 2000), ok(2, 2000)],
        )),
        v6(case(
            "IPv6 hop-by-hop header merges",
            |v| {
                let mut f = tcp(v);
                let hbh = || vec![0u8, 0, 1, 4, 0, 0, 0, 0];
                (0..3).map(|_| insert_v6_ext(seg(&mut f, 1000), 0, hbh())).collect()
            },
            &[ok(3, 3000)],
        )),
        v6(case(
            "IPv6 destination options bytes differ: separate flows",
            |v| {
                let mut f = tcp(v);
                let mut g = tcp(v);
                let d = |x: u8| vec![0u8, 0, 1, 4, x, 0, 0, 0];
                vec![
                    insert_v6_ext(seg(&mut f, 1000), 60, d(1)),
                    insert_v6_ext(seg(&mut g, 1000), 60, d(2)),
                    insert_v6_ext(seg(&mut f, 1000), 60, d(1)),
                    insert_v6_ext(seg(&mut g, 1000), 60, d(2)),
                ]
            },
            &[ok(2, 2000), ok(2, 2000)],
        )),
        v6(case(
            "IPv6 fragment header bypasses",
            |v| {
                let mut f = tcp(v);
                let a = seg(&mut f, 1000);
                let b = insert_v6_ext(seg(&mut f, 1000), 44, vec![0u8, 0, 0, 0, 0, 0, 0, 9]);
                vec![a, b, seg(&mut f, 1000)]
            },
            &[ok(1, 1000), ok(1, 1000), ok(1, 1000)],
        )),
        // --- checksums (1.3 entry, 0.3)
        case(
            "bad TCP checksum delivered first, unmerged (S5)",
            |v| {
                let mut f = tcp(v);
                let mut out: Vec<In> = (0..3).map(|_| seg(&mut f, 1448)).collect();
                out.push(corrupt_l4(seg(&mut f, 1448)));
                out.extend((0..3).map(|_| seg(&mut f, 1448)));
                out.push(seg(&mut f, 500));
                out
            },
            &[bad(1448), ok(3, 3 * 1448), ok(4, 3 * 1448 + 500)],
        ),
        case(
            "checksum UNNECESSARY is not re-summed",
            |v| {
                let mut f = tcp(v);
                let m = OffloadMeta { csum: ChecksumState::Unnecessary { level: 0 }, ..OffloadMeta::default() };
                vec![with_meta(seg(&mut f, 1000), m), with_meta(corrupt_l4(seg(&mut f, 1000)), m)]
            },
            &[ok(2, 2000)],
        ),
        case(
            "checksum COMPLETE verified from its sum",
            |v| {
                let mut f = tcp(v);
                let complete = |i: In, good: bool| {
                    let In::F(fr) = i else { unreachable!() };
                    let h = FrameHeaders::parse(&fr).unwrap();
                    let mut sum = crate::csum::ones_sum(&fr[h.l3_offset..]);
                    if !good {
                        sum = sum.wrapping_add(1);
                    }
                    In::M(fr, OffloadMeta { csum: ChecksumState::Complete { sum }, ..OffloadMeta::default() })
                };
                vec![
                    complete(seg(&mut f, 1000), true),
                    complete(seg(&mut f, 1000), true),
                    complete(seg(&mut f, 1000), false),
                ]
            },
            &[ok(1, 1000), ok(2, 2000)],
        ),
        // --- Ethernet padding (9.1.1)
        case(
            "padded 1-byte segment is trimmed and merged (data_lrg_1byte)",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 100), pad(seg(&mut f, 1), 6)]
            },
            &[ok(2, 101)],
        ),
        cfg(
            case(
                "strict: padded segment flushes and bypasses",
                |v| {
                    let mut f = tcp(v);
                    vec![seg(&mut f, 100), seg(&mut f, 100), pad(seg(&mut f, 1), 6)]
                },
                &[ok(2, 200), ok(1, 1)],
            ),
            STRICT,
        ),
        // --- flows and batches (1.1)
        case(
            "two interleaved flows (S3)",
            |v| {
                let (mut a, mut b) = (flow(v, Transport::Tcp, 1), flow(v, Transport::Tcp, 2));
                (0..8).flat_map(|_| [seg(&mut a, 1448), seg(&mut b, 1448)]).collect()
            },
            &[ok(8, 8 * 1448), ok(8, 8 * 1448)],
        ),
        case(
            "batch end flushes",
            |v| {
                let mut f = tcp(v);
                vec![seg(&mut f, 1000), seg(&mut f, 1000), In::Flush, seg(&mut f, 1000), seg(&mut f, 1000)]
            },
            &[ok(2, 2000), ok(2, 2000)],
        ),
        case(
            "TCP GSO packet joins and continues",
            |v| {
                let mut f = tcp(v);
                let a = seg(&mut f, 1000);
                let sp = f.superpacket(3000, 1000, TcpFlags::empty()).unwrap();
                let b = In::M(sp.to_vec(), sp.meta);
                vec![a, b, seg(&mut f, 1000)]
            },
            &[ok(5, 5000)],
        ),
        // --- UDP (2.3)
        cfg(
            case(
                "UDP off: no coalescing",
                |v| {
                    let mut f = udp(v);
                    (0..3).map(|_| seg(&mut f, 1000)).collect()
                },
                &[ok(1, 1000), ok(1, 1000), ok(1, 1000)],
            ),
            LINUX,
        ),
        cfg(
            case(
                "UDP same-size datagrams merge",
                |v| {
                    let mut f = udp(v);
                    (0..4).map(|_| seg(&mut f, 1000)).collect()
                },
                &[ok(4, 4000)],
            ),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP shorter last closes",
                |v| {
                    let mut f = udp(v);
                    vec![seg(&mut f, 1000), seg(&mut f, 1000), seg(&mut f, 300), seg(&mut f, 1000)]
                },
                &[ok(3, 2300), ok(1, 1000)],
            ),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP longer datagram starts a new aggregate",
                |v| {
                    let mut f = udp(v);
                    vec![seg(&mut f, 300), seg(&mut f, 300), seg(&mut f, 1000), seg(&mut f, 1000)]
                },
                &[ok(2, 600), ok(2, 2000)],
            ),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP at most 64 datagrams",
                |v| {
                    let mut f = udp(v);
                    (0..70).map(|_| seg(&mut f, 200)).collect()
                },
                &[ok(64, 64 * 200), ok(6, 6 * 200)],
            ),
            UDP_FWD,
        ),
        cfg(
            v4(case(
                "UDP zero checksum bypasses, held untouched",
                |v| {
                    let mut f = udp(v);
                    let (a, b) = (seg(&mut f, 500), seg(&mut f, 500));
                    let In::F(mut c) = seg(&mut f, 500) else { unreachable!() };
                    let l4 = 14 + 4 * v.tags.len() + 20;
                    c[l4 + 6] = 0;
                    c[l4 + 7] = 0;
                    f.ip_id = f.ip_id.wrapping_sub(1); // as if c came from elsewhere
                    vec![a, b, In::F(c), seg(&mut f, 500)]
                },
                &[ok(1, 500), ok(3, 1500)],
            )),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP bad checksum bypasses",
                |v| {
                    let mut f = udp(v);
                    let (a, b) = (seg(&mut f, 500), seg(&mut f, 500));
                    vec![a, b, corrupt_l4(seg(&mut f, 500))]
                },
                &[bad(500), ok(2, 1000)],
            ),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP TTL differs flushes and holds",
                |v| {
                    let mut f = udp(v);
                    let (a, b) = (seg(&mut f, 500), seg(&mut f, 500));
                    f.spec.ttl = 9;
                    vec![a, b, seg(&mut f, 500), seg(&mut f, 500)]
                },
                &[ok(2, 1000), ok(2, 1000)],
            ),
            UDP_FWD,
        ),
        cfg(
            v4(case(
                "UDP IPv4 ID rule",
                |v| {
                    let mut f = udp(v);
                    let (a, b) = (seg(&mut f, 500), seg(&mut f, 500));
                    f.ip_id = f.ip_id.wrapping_add(3);
                    vec![a, b, seg(&mut f, 500)]
                },
                &[ok(2, 1000), ok(1, 500)],
            )),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP padded datagram is trimmed and merged",
                |v| {
                    let mut f = udp(v);
                    vec![seg(&mut f, 10), pad(seg(&mut f, 10), 2)]
                },
                &[ok(2, 20)],
            ),
            UDP_FWD,
        ),
        cfg(
            case(
                "UDP fraglist keeps datagrams",
                |v| {
                    let mut f = udp(v);
                    vec![seg(&mut f, 700), seg(&mut f, 700), seg(&mut f, 700), seg(&mut f, 100)]
                },
                &[ok(4, 2200)],
            ),
            GroConfig { udp: UdpGroMode::Fraglist, ..LINUX },
        ),
    ]
}

fn tcp_fraglist_case() -> Case {
    cfg(
        case(
            "TCP fraglist mode",
            |v| {
                let mut f = tcp(v);
                let mut out: Vec<In> = (0..5).map(|_| seg(&mut f, 1000)).collect();
                out.push(segf(&mut f, 1000, TcpFlags::PSH));
                out
            },
            &[ok(5, 5000), ok(1, 1000)],
        ),
        GroConfig { tcp_fraglist: true, ..LINUX },
    )
}

#[test]
fn table() {
    let mut all = cases();
    all.push(tcp_fraglist_case());
    let (mut ran, mut ran_raw) = (0, 0);
    for c in &all {
        for v in &VARIANTS {
            if (c.v4_only && v.v6) || (c.v6_only && !v.v6) {
                continue;
            }
            let ctx = format!("[{}] {}", v.name, c.name);
            let inputs = (c.build)(v);
            let frames_in = inputs.iter().filter(|i| !matches!(i, In::Flush)).count() as u64;
            let (out, counters) = run(c.cfg, inputs);
            let got: Vec<Out> = out
                .iter()
                .zip(c.want.iter().chain(std::iter::repeat(&ok(0, 0))))
                .enumerate()
                .map(|(i, (p, w))| shape(p, w.valid, &format!("{ctx} output {i}")))
                .collect();
            assert_eq!(got, c.want, "{ctx}: delivered packets (counters {counters:?})");
            assert_eq!(counters.packets_in, frames_in, "{ctx}");
            assert_eq!(counters.packets_out, out.len() as u64, "{ctx}");
            let segs: u64 = got.iter().map(|o| o.segs as u64).sum();
            let gso_in: u64 = 0;
            assert!(segs >= frames_in + gso_in, "{ctx}: segments conserved");
            assert_eq!(
                counters.packets_out,
                counters.flushed.total() + counters.bypassed.total(),
                "{ctx}: every delivery is a flush or a bypass"
            );
            ran += 1;
            if v.tags.is_empty() {
                same_as_raw_ip(c.cfg, (c.build)(v), &out, &counters, &ctx);
                ran_raw += 1;
            }
        }
    }
    assert!(ran > 300, "ran {ran} case variants");
    // Every untagged variant of every case also ran as raw IP.
    let untagged = VARIANTS.iter().filter(|v| v.tags.is_empty()).count();
    let expected_raw: usize = all
        .iter()
        .map(|c| VARIANTS.iter().filter(|v| v.tags.is_empty() && !(c.v4_only && v.v6) && (!c.v6_only || v.v6)).count())
        .sum();
    assert!(untagged == 2 && ran_raw == expected_raw && ran_raw > 100, "ran {ran_raw} raw IP variants");
}

/// Runs `inputs` (untagged Ethernet frames) again as raw IP packets, the
/// first 14 bytes cut off, through GRO with [`Medium::Ip`]: the delivered
/// packets must be the Ethernet run's minus their Ethernet header (a partial
/// checksum's start 14 lower) and the counters the same.
pub(super) fn same_as_raw_ip(
    cfg: GroConfig,
    inputs: Vec<In>,
    eth_out: &[Packet],
    eth_counters: &GroCounters,
    ctx: &str,
) {
    let raw_inputs = inputs
        .into_iter()
        .map(|i| match i {
            In::F(f) => In::F(f[14..].to_vec()),
            In::M(f, m) => In::M(f[14..].to_vec(), m.shifted(-14).expect("start after the Ethernet header")),
            In::Flush => In::Flush,
        })
        .collect();
    let (raw_out, raw_counters) = run(cfg.with_medium(Medium::Ip), raw_inputs);
    assert_eq!(raw_counters, *eth_counters, "{ctx} raw IP: counters");
    assert_eq!(raw_out.len(), eth_out.len(), "{ctx} raw IP: delivered packets");
    let (mut eth_bytes, mut raw_bytes) = (Vec::new(), Vec::new());
    for (i, (e, r)) in eth_out.iter().zip(&raw_out).enumerate() {
        let eth_meta = capture_bytes(e, Medium::Ethernet, &mut eth_bytes);
        let raw_meta = capture_bytes(r, Medium::Ip, &mut raw_bytes);
        assert_eq!(raw_bytes[..], eth_bytes[14..], "{ctx} raw IP output {i}: bytes");
        assert_eq!(Some(raw_meta), eth_meta.shifted(-14), "{ctx} raw IP output {i}: metadata");
    }
}

// ---------------------------------------------------------------- specifics

fn run_frames(cfg: GroConfig, frames: Vec<Vec<u8>>) -> (Vec<Packet>, GroCounters) {
    run(cfg, frames.into_iter().map(In::F).collect())
}

#[test]
fn superpacket_headers() {
    for v in &VARIANTS {
        let mut f = tcp(v);
        f.ip_id = 100;
        let frames: Vec<Vec<u8>> =
            (0..3).map(|i| f.frame(1000, if i == 2 { TcpFlags::PSH } else { TcpFlags::empty() }).unwrap()).collect();
        let (out, c) = run_frames(LINUX, frames.clone());
        assert_eq!(out.len(), 1, "{}", v.name);
        let p = &out[0];
        let bytes = p.to_vec();
        let h = FrameHeaders::parse(&bytes).unwrap();
        // First segment's headers, PSH accumulated, lengths fixed.
        let first = FrameHeaders::parse(&frames[0]).unwrap();
        assert_eq!(&bytes[..h.l3_offset], &frames[0][..first.l3_offset], "{}: L2 header", v.name);
        assert_eq!(h.l3_len, first.l3_len + 2000);
        let t = &bytes[h.l4_offset..];
        assert_eq!(&t[..12], &frames[0][first.l4_offset..first.l4_offset + 12], "ports, seq, ack of the first");
        assert_eq!(t[13], 0x18, "ACK|PSH");
        assert_eq!(&bytes[h.payload_offset..], {
            let mut v = Vec::new();
            for fr in &frames {
                v.extend_from_slice(FrameHeaders::parse(fr).unwrap().payload_bytes(fr));
            }
            v
        });
        let want = if v.v6 { GsoType::TCPV6 } else { GsoType::TCPV4 };
        assert_eq!(p.meta.gso_type, want);
        assert_eq!((p.meta.gso_size, p.meta.gso_segs), (1000, 3));
        assert_eq!(p.meta.csum, ChecksumState::Partial { start: h.l4_offset as u16, offset: 16 });
        if !v.v6 {
            assert_eq!(u16::from_be_bytes([bytes[h.l3_offset + 4], bytes[h.l3_offset + 5]]), 100, "first IP ID");
        }
        assert_eq!((c.merged, c.superpackets, c.flushed.flags), (2, 1, 1));
    }
}

#[test]
fn ecn_and_fixedid_gso_bits() {
    let v = &VARIANTS[0];
    let mut f = tcp(v);
    let frames = vec![f.frame(1000, TcpFlags::CWR).unwrap(), f.frame(1000, TcpFlags::CWR).unwrap()];
    let (out, _) = run_frames(LINUX, frames);
    assert_eq!(out[0].meta.gso_type, GsoType::TCPV4 | GsoType::TCP_ECN);
    let mut f = tcp(v);
    let frames = (0..3)
        .map(|_| {
            f.ip_id = 5;
            f.frame(1000, TcpFlags::empty()).unwrap()
        })
        .collect();
    let (out, _) = run_frames(LINUX, frames);
    assert_eq!(out[0].meta.gso_type, GsoType::TCPV4 | GsoType::TCP_FIXEDID);
}

#[test]
fn udp_superpacket_is_udp_l4_partial() {
    for v in &VARIANTS {
        let mut f = udp(v);
        let frames = (0..3).map(|_| f.frame(1200, TcpFlags::empty()).unwrap()).collect();
        let (out, _) = run_frames(UDP_FWD, frames);
        let p = &out[0];
        let bytes = p.to_vec();
        let h = FrameHeaders::parse(&bytes).unwrap();
        assert_eq!(p.meta.gso_type, GsoType::UDP_L4);
        assert_eq!((p.meta.gso_size, p.meta.gso_segs), (1200, 3));
        assert_eq!(u16::from_be_bytes([bytes[h.l4_offset + 4], bytes[h.l4_offset + 5]]) as usize, 8 + 3600);
        assert_eq!(p.meta.csum, ChecksumState::Partial { start: h.l4_offset as u16, offset: 6 });
    }
}

#[test]
fn fraglist_members_stay_intact() {
    let v = &VARIANTS[3];
    let mut f = udp(v);
    let frames: Vec<Vec<u8>> = (0..3).map(|_| f.frame(500, TcpFlags::empty()).unwrap()).collect();
    let (out, _) = run_frames(GroConfig { udp: UdpGroMode::Fraglist, ..LINUX }, frames.clone());
    let p = &out[0];
    assert_eq!(p.meta.gso_type, GsoType::UDP_L4 | GsoType::FRAGLIST);
    assert_eq!(p.meta.csum, ChecksumState::Unnecessary { level: 0 });
    assert_eq!(p.frag_list().len(), 2);
    for (m, orig) in p.frag_list().iter().zip(&frames[1..]) {
        // Pulled to the payload; the original headers are right in front.
        let mut whole = m.clone();
        let hl = FrameHeaders::parse(orig).unwrap().payload_offset;
        let _ = whole.push(hl).unwrap();
        assert_eq!(whole.to_vec(), *orig);
    }
}

#[test]
fn zero_copy_merge() {
    let v = &VARIANTS[0];
    let mut f = tcp(v);
    let pkts: Vec<Packet> = (0..30).map(|_| Packet::from_frame(&f.frame(1448, TcpFlags::empty()).unwrap())).collect();
    let payload_ptrs: Vec<*const u8> = pkts.iter().map(|p| p.linear()[66..].as_ptr()).collect();
    let mut g = Gro::default();
    for p in pkts {
        g.receive(p);
    }
    g.flush();
    let out: Vec<Packet> = g.drain_delivered().collect();
    assert_eq!(out.len(), 1);
    let p = &out[0];
    assert_eq!(p.meta.gso_segs, 30);
    // The first packet's payload stays in its linear area; each later one is
    // a segment or a frag-list member pointing at the original buffer.
    let mut ptrs = vec![p.linear()[66..].as_ptr()];
    ptrs.extend(p.segments().iter().map(|s| s.as_slice().as_ptr()));
    for m in p.frag_list() {
        ptrs.push(m.linear().as_ptr());
        ptrs.extend(m.segments().iter().map(|s| s.as_slice().as_ptr()));
    }
    assert_eq!(ptrs, payload_ptrs);
    assert_eq!(p.segments().len(), crate::packet::MAX_SEGMENTS);
    assert_eq!(p.frag_list().len(), 1, "the overflow packet collects the following payloads");
    assert_eq!(p.total_len(), 66 + 30 * 1448);
}

#[test]
fn no_per_packet_allocation_when_merging() {
    let v = &VARIANTS[0];
    let mut f = tcp(v);
    let mut g = Gro::default();
    let mut warm: Vec<Packet> =
        (0..64).map(|_| Packet::from_frame(&f.frame(1448, TcpFlags::empty()).unwrap())).collect();
    for p in warm.drain(..) {
        g.receive(p);
    }
    g.flush();
    let mut sink = Vec::with_capacity(64);
    g.take_delivered_into(&mut sink);
    sink.clear();
    let pkts: Vec<Packet> = (0..40).map(|_| Packet::from_frame(&f.frame(1448, TcpFlags::empty()).unwrap())).collect();
    let info = allocation_counter::measure(|| {
        for p in pkts {
            g.receive(p);
        }
        g.flush();
        g.take_delivered_into(&mut sink);
    });
    // One aggregate of 40 packets: a segment list per 18 packets (the head
    // and two overflow packets on the frag list) and the frag list itself,
    // all from the thread's pool, which the warm-up aggregate's drop filled;
    // nothing per packet.
    assert_eq!(info.count_total, 0, "{} allocations for 40 packets", info.count_total);
    assert_eq!(sink.len(), 1);
}

#[test]
fn swap_delivered_hands_over_the_output_and_reuses_the_vector() {
    let mut flows: Vec<_> = (1..=3).map(|i| flow(&VARIANTS[0], Transport::Tcp, i)).collect();
    let mut g = Gro::default();
    let mut expected = Gro::default();
    let mut out = Vec::with_capacity(8);
    for burst in 0..3 {
        for f in &mut flows {
            for _ in 0..=burst {
                let frame = f.frame(1000, TcpFlags::empty()).unwrap();
                g.receive(Packet::from_frame(&frame));
                expected.receive(Packet::from_frame(&frame));
            }
        }
        g.flush();
        expected.flush();
        // A packet left in the vector is dropped, not delivered again.
        out.push(Packet::from_frame(&[0; 60]));
        let buffer = out.as_ptr();
        g.swap_delivered(&mut out);
        assert!(g.delivered().is_empty());
        let want: Vec<Vec<u8>> = expected.drain_delivered().map(|p| p.to_vec()).collect();
        assert_eq!(want.len(), 3, "one aggregate per flow");
        assert_eq!(out.iter().map(Packet::to_vec).collect::<Vec<_>>(), want, "burst {burst}");
        // The engine delivers into the vector it was given.
        let handed = std::mem::take(&mut out);
        g.receive(Packet::from_frame(&[0; 60]));
        assert_eq!(g.delivered().as_ptr(), buffer);
        g.swap_delivered(&mut out);
        out = handed;
        out.clear();
    }
}

#[test]
fn table_full_flushes_oldest_of_the_bucket() {
    let v = &VARIANTS[0];
    let mut flows: Vec<Flow> = (0..9).map(|i| flow(v, Transport::Tcp, i)).collect();
    let meta = OffloadMeta { rss_hash: Some(3), ..OffloadMeta::default() };
    let mut inputs = Vec::new();
    for f in flows.iter_mut() {
        inputs.push(In::M(f.frame(1000, TcpFlags::empty()).unwrap(), meta));
    }
    let (out, c) = run(LINUX, inputs);
    assert_eq!(c.flushed.table_full, 1);
    assert_eq!(out.len(), 9);
    // The evicted one is flow 0, delivered first.
    let first = FrameHeaders::parse(&out[0].to_vec()).unwrap();
    assert_eq!(u16::from_be_bytes([out[0].linear()[first.l4_offset], out[0].linear()[first.l4_offset + 1]]), 10000);
    // Another bucket is unaffected: 8 flows in bucket 3, 9th in bucket 4 fits.
    let mut inputs = Vec::new();
    for (i, f) in flows.iter_mut().enumerate() {
        let m = OffloadMeta { rss_hash: Some(if i == 8 { 4 } else { 3 }), ..OffloadMeta::default() };
        inputs.push(In::M(f.frame(1000, TcpFlags::empty()).unwrap(), m));
    }
    let (_, c) = run(GroConfig { bucket_depth: 8, ..LINUX }, inputs);
    assert_eq!(c.flushed.table_full, 0);
}

#[test]
fn flush_by_age() {
    let v = &VARIANTS[0];
    let (mut a, mut b) = (flow(v, Transport::Tcp, 1), flow(v, Transport::Tcp, 2));
    let at = |ns| OffloadMeta { arrival_ns: Some(ns), ..OffloadMeta::default() };
    let cfg = GroConfig { flush_age_ns: Some(1000), ..LINUX };
    let mut g = Gro::new(cfg);
    let rx = |g: &mut Gro, f: &mut Flow, ns| {
        let mut p = Packet::from_frame(&f.frame(1000, TcpFlags::empty()).unwrap());
        p.meta = at(ns);
        g.receive(p);
    };
    rx(&mut g, &mut a, 0);
    rx(&mut g, &mut a, 100);
    rx(&mut g, &mut b, 500);
    assert_eq!(g.delivered().len(), 0);
    rx(&mut g, &mut b, 1200); // a's aggregate is 1200 ns old: flushed first
    assert_eq!(g.delivered().len(), 1);
    assert_eq!(g.delivered()[0].meta.gso_segs, 2);
    assert_eq!(g.counters().flushed.age, 1);
    g.flush_aged(1500);
    assert_eq!(g.counters().flushed.age, 2);
    assert_eq!(g.held(), 0);
}

#[test]
fn vlan_tags_are_part_of_the_flow() {
    let base = FlowSpec::new(Transport::Tcp, false, 1);
    let mut a = Flow::new(base.with_vlans(&[(0x8100, 100)]).unwrap());
    let mut b = Flow::new(base.with_vlans(&[(0x8100, 200)]).unwrap());
    let mut c = Flow::new(base);
    let frames = (0..3)
        .flat_map(|_| {
            [
                a.frame(1000, TcpFlags::empty()).unwrap(),
                b.frame(1000, TcpFlags::empty()).unwrap(),
                c.frame(1000, TcpFlags::empty()).unwrap(),
            ]
        })
        .collect::<Vec<_>>();
    let (out, cn) = run_frames(LINUX, frames.clone());
    assert_eq!(out.iter().map(|p| p.meta.gso_segs).collect::<Vec<_>>(), vec![3, 3, 3]);
    assert_eq!(cn.flushed.mismatch, 0);
    // Without VLAN GRO (a kernel without 8021q, S6), tagged frames bypass.
    let (out, cn) = run_frames(GroConfig { vlan: false, ..LINUX }, frames);
    assert_eq!(out.len(), 7);
    assert_eq!(cn.bypassed.vlan, 6);
    // Three tags are beyond the supported stack.
    let mut d = Flow::new(base.with_vlans(&[(0x88A8, 1), (0x8100, 2), (0x8100, 3)]).unwrap());
    let (out, cn) = run_frames(LINUX, (0..2).map(|_| d.frame(100, TcpFlags::empty()).unwrap()).collect());
    assert_eq!((out.len(), cn.bypassed.vlan), (2, 2));
}

#[test]
fn bypass_reasons_are_counted() {
    let v = &VARIANTS[0];
    let mut f = tcp(v);
    let mut frames = vec![vec![0u8; 10], {
        let mut arp = f.frame(0, TcpFlags::empty()).unwrap();
        arp[12] = 0x08;
        arp[13] = 0x06;
        arp
    }];
    frames.push(f.frame(0, TcpFlags::empty()).unwrap());
    let (_, c) = run_frames(LINUX, frames);
    assert_eq!((c.bypassed.malformed, c.bypassed.zero_payload), (2, 1), "{c:#?}");
}

#[test]
fn lro_sorts_interleaved_flows() {
    let v = &VARIANTS[0];
    let mut flows: Vec<Flow> = (0..200).map(|i| flow(v, Transport::Tcp, i)).collect();
    let mut frames = Vec::new();
    for _ in 0..5 {
        for f in flows.iter_mut() {
            frames.push(f.frame(1448, TcpFlags::empty()).unwrap());
        }
    }
    let (gro_out, _) = run_frames(LINUX, frames.clone());
    let (lro_out, c) = run_frames(GroConfig { lro: true, ..LINUX }, frames);
    assert_eq!(gro_out.len(), 1000, "200 round-robin flows thrash the 8x8 table");
    assert_eq!(lro_out.len(), 200, "sorted: every flow's 5 segments become one superpacket");
    assert_eq!(c.lro_batches, 1);
    for p in &lro_out {
        assert_eq!(shape(p, true, "lro"), ok(5, 5 * 1448));
    }
}

#[test]
fn gso_input_rules() {
    let v = &VARIANTS[0];
    let mut f = udp(v);
    let sp = f.superpacket(3000, 1000, TcpFlags::empty()).unwrap();
    let (out, c) = run(UDP_FWD, vec![In::M(sp.to_vec(), sp.meta)]);
    assert_eq!((out.len(), c.bypassed.gso), (1, 1));
    let mut f = tcp(v);
    let mut sp = f.superpacket(3000, 1000, TcpFlags::empty()).unwrap();
    sp.meta.gso_type |= GsoType::DODGY;
    let (_, c) = run(LINUX, vec![In::M(sp.to_vec(), sp.meta)]);
    assert_eq!(c.bypassed.gso, 1);
}
