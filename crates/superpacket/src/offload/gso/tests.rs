//! Table tests, one group per rule of offload-rules section 3 (and 0.3 for
//! checksum help). The reference for "correct" is independent of the
//! segmenter: [`Flow::frame`] builds each expected segment from scratch with
//! full checksums, so segments are compared byte for byte.

use super::*;
use crate::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use crate::traffic::{Flow, FlowSpec, Transport, payload_byte};
use crate::validate::{Medium, validate_frame};
use crate::wire::TcpFlags;

pub(super) const MTU: usize = 9000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fam {
    Tcp4,
    Tcp6,
    Udp4,
    Udp6,
}

impl Fam {
    pub(super) const ALL: [Fam; 4] = [Fam::Tcp4, Fam::Tcp6, Fam::Udp4, Fam::Udp6];
    pub(super) fn spec(self, vlans: usize) -> FlowSpec {
        let (t, v6) = match self {
            Fam::Tcp4 => (Transport::Tcp, false),
            Fam::Tcp6 => (Transport::Tcp, true),
            Fam::Udp4 => (Transport::Udp, false),
            Fam::Udp6 => (Transport::Udp, true),
        };
        let tags = [(0x88A8, 100), (0x8100, 200)];
        let tags: &[(u16, u16)] = match vlans {
            0 => &[],
            1 => &tags[1..],
            _ => &tags[..],
        };
        FlowSpec::new(t, v6, 3).with_vlans(tags).unwrap()
    }
    pub(super) fn is_tcp(self) -> bool {
        matches!(self, Fam::Tcp4 | Fam::Tcp6)
    }
}

/// The frames a correct segmenter must produce for `payload` bytes cut at
/// `gso` with superpacket `flags` (rules of 3.2), built one by one.
pub(super) fn expected(spec: FlowSpec, payload: usize, gso: usize, flags: TcpFlags, accecn: bool) -> Vec<Vec<u8>> {
    let mut f = Flow::new(spec);
    let n = payload.div_ceil(gso);
    (0..n)
        .map(|i| {
            let len = gso.min(payload - i * gso);
            let mut fl = flags;
            if i + 1 < n {
                fl.remove(TcpFlags::FIN | TcpFlags::PSH);
            }
            if i > 0 && !accecn {
                fl.remove(TcpFlags::CWR);
            }
            f.frame(len, fl).unwrap()
        })
        .collect()
}

pub(super) fn superpacket(spec: FlowSpec, payload: usize, gso: u16, flags: TcpFlags) -> Packet {
    Flow::new(spec).superpacket(payload, gso, flags).unwrap()
}

/// Runs the segmenter into a [`VecSink`]. A linear untagged IP packet runs a
/// second time as raw IP (its first 14 bytes cut off, the
/// target's medium [`Medium::Ip`]), and that run must give the same outcome
/// and the same frames minus their Ethernet header: so every case of this
/// file is a raw IP case too.
pub(super) fn run(pkt: &Packet, caps: &TargetCaps) -> (Result<GsoOutcome, GsoError>, Vec<OutFrame>) {
    let (r, frames) = run_once(pkt, caps);
    if let Some(raw) = raw_ip_twin(pkt) {
        let (raw_r, raw_frames) = run_once(&raw, &caps.with_medium(Medium::Ip));
        assert_same_as_raw_ip(&r, &frames, &raw_r, &raw_frames);
    }
    (r, frames)
}

fn run_once(pkt: &Packet, caps: &TargetCaps) -> (Result<GsoOutcome, GsoError>, Vec<OutFrame>) {
    let mut sink = VecSink::new();
    let r = segment(pkt, caps, &mut sink);
    if r.is_err() {
        assert!(sink.frames.is_empty(), "an error must emit nothing");
    }
    (r, sink.frames)
}

/// The raw IP packet a linear untagged Ethernet IPv4/IPv6 packet stands for
/// (metadata shifted by -14); `None` for anything else (payload segments and
/// frag lists decide the output's shape, and a linear copy would change it),
/// or when a partial checksum starts inside the Ethernet header.
pub(super) fn raw_ip_twin(pkt: &Packet) -> Option<Packet> {
    if !pkt.frag_list().is_empty() || !pkt.segments().is_empty() {
        return None;
    }
    let bytes = pkt.to_vec();
    let mut raw = Packet::from_frame(crate::traffic::raw_ip_packet(&bytes)?);
    raw.meta = pkt.meta.shifted(-14)?;
    Some(raw)
}

/// The raw IP run agrees with the Ethernet run: same outcome (errors by
/// reason: their offsets differ by 14), same frames minus 14 bytes, same
/// metadata with a partial checksum's start 14 lower.
pub(super) fn assert_same_as_raw_ip(
    eth: &Result<GsoOutcome, GsoError>,
    eth_frames: &[OutFrame],
    raw: &Result<GsoOutcome, GsoError>,
    raw_frames: &[OutFrame],
) {
    match (eth, raw) {
        (Ok(e), Ok(r)) => assert_eq!(e, r, "raw IP: outcome"),
        (Err(e), Err(r)) => assert_eq!(e.reason(), r.reason(), "raw IP: error ({e} / {r})"),
        _ => panic!("raw IP: outcome {raw:?}, Ethernet {eth:?}"),
    }
    assert_eq!(raw_frames.len(), eth_frames.len(), "raw IP: frames");
    for (i, (e, r)) in eth_frames.iter().zip(raw_frames).enumerate() {
        assert_eq!(r.data[..], e.data[14..], "raw IP frame {i}: bytes");
        assert_eq!(Some(r.meta), e.meta.shifted(-14), "raw IP frame {i}: metadata");
        let mut problems = Vec::new();
        validate_frame(&r.data, Medium::Ip, &r.meta, false, &mut problems);
        assert_eq!(problems.is_empty(), validate_problems(e).is_empty(), "raw IP frame {i}: {problems:?}");
    }
}

fn validate_problems(f: &OutFrame) -> Vec<crate::validate::Problem> {
    let mut problems = Vec::new();
    validate_frame(&f.data, Medium::Ethernet, &f.meta, false, &mut problems);
    problems
}

/// Every frame passes `validate_frame` with its own metadata and fits the MTU.
pub(super) fn assert_valid(frames: &[OutFrame], mtu: usize) {
    for (i, f) in frames.iter().enumerate() {
        let mut problems = Vec::new();
        validate_frame(&f.data, Medium::Ethernet, &f.meta, false, &mut problems);
        assert!(problems.is_empty(), "frame {i}: {problems:?}");
        if f.kind != OutKind::PassThrough {
            let h = crate::wire::FrameHeaders::parse(&f.data).unwrap();
            assert!(h.l3_len <= mtu, "frame {i}: L3 length {} > MTU {mtu}", h.l3_len);
            assert!(!f.meta.is_gso());
        }
    }
}

/// Completes the partial checksums of frames left partial (to compare with
/// fully checksummed references).
pub(super) fn completed(frames: &[OutFrame]) -> Vec<Vec<u8>> {
    frames
        .iter()
        .map(|f| {
            let mut d = f.data.clone();
            if let ChecksumState::Partial { start, offset } = f.meta.csum {
                let udp = offset == 6;
                crate::csum::complete_partial(&mut d, start as usize, offset as usize, udp).unwrap();
            }
            d
        })
        .collect()
}

fn sw(sg: bool) -> TargetCaps {
    let c = TargetCaps::new(MTU);
    if sg { c.with_sg() } else { c }
}

/// Makes a superpacket's payload non-linear: headers in the linear area,
/// payload split into segments at `cuts` and, from `frag_at` on, frag-list
/// packets of pure payload.
pub(super) fn fragment_payload(pkt: &Packet, hdr_len: usize, cuts: &[usize], frag_at: Option<usize>) -> Packet {
    let mut p = pkt.clone();
    p.detach_payload(hdr_len).unwrap();
    let mut tail = frag_at.map(|at| p.split_off(hdr_len + at).unwrap());
    let mut pieces = Vec::new();
    let mut rest = p.split_off(hdr_len).unwrap();
    let mut prev = 0;
    for &c in cuts {
        if c <= prev || hdr_len + c >= pkt.len() || frag_at.is_some_and(|f| c >= f) {
            continue;
        }
        let r = rest.split_off(c - prev).unwrap();
        pieces.push(rest);
        rest = r;
        prev = c;
    }
    pieces.push(rest);
    for piece in pieces {
        for s in piece.segments() {
            let b = match s {
                crate::packet::Segment::Shared(b) => b.clone(),
                crate::packet::Segment::Owned { .. } => bytes::Bytes::copy_from_slice(s.as_slice()),
            };
            p.append_segment(b).unwrap();
        }
    }
    if let Some(t) = tail.take() {
        // The tail in two frag-list packets when it is long enough.
        let mut t = t;
        if t.len() > 10 {
            let t2 = t.split_off(t.len() / 2).unwrap();
            p.push_frag(t);
            p.push_frag(t2);
        } else {
            p.push_frag(t);
        }
    }
    p.meta = pkt.meta;
    p
}

// ---------------------------------------------------------------- TCP/UDP

#[test]
fn segments_match_independently_built_frames() {
    // Families x VLAN depth x output form x payload geometry.
    for fam in Fam::ALL {
        for vlans in 0..=2 {
            for sg in [false, true] {
                for (payload, gso) in [(4000, 1448), (2897, 1448), (65000 - 100, 1400), (10, 3)] {
                    let spec = fam.spec(vlans);
                    let flags = if fam.is_tcp() { TcpFlags::PSH } else { TcpFlags::empty() };
                    let pkt = superpacket(spec, payload, gso as u16, flags);
                    // `run` repeats every untagged one as raw IP.
                    assert_eq!(raw_ip_twin(&pkt).is_some(), vlans == 0, "{fam:?} vlans {vlans}");
                    let (r, frames) = run(&pkt, &sw(sg));
                    let n = payload.div_ceil(gso);
                    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: n, csum_completed: true }), "{fam:?}");
                    assert_valid(&frames, MTU);
                    let want = expected(spec, payload, gso, flags, false);
                    let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
                    assert_eq!(got.len(), want.len());
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(g, w, "{fam:?} vlans {vlans} sg {sg} payload {payload}/{gso}: segment {i}");
                    }
                    let kind = if sg { OutKind::Sg } else { OutKind::Linear };
                    assert!(frames.iter().all(|f| f.kind == kind && f.meta.csum == ChecksumState::None));
                }
            }
        }
    }
}

#[test]
fn tcp_flag_rules() {
    // (superpacket flags, accecn): FIN/PSH on the last only; CWR on the first
    // only unless AccECN; ECE, URG, ACK everywhere.
    let cases = [
        (TcpFlags::FIN | TcpFlags::PSH, false),
        (TcpFlags::CWR, false),
        (TcpFlags::CWR | TcpFlags::ECE | TcpFlags::PSH, false),
        (TcpFlags::CWR | TcpFlags::FIN, true),
        (TcpFlags::URG | TcpFlags::ECE, false),
    ];
    for fam in [Fam::Tcp4, Fam::Tcp6] {
        for (flags, accecn) in cases {
            let spec = fam.spec(0);
            let mut pkt = superpacket(spec, 5000, 1000, flags);
            if accecn {
                pkt.meta.gso_type |= GsoType::TCP_ACCECN;
            }
            let (r, frames) = run(&pkt, &sw(true));
            assert!(r.is_ok());
            let want = expected(spec, 5000, 1000, flags, accecn);
            assert_eq!(frames.iter().map(|f| &f.data).collect::<Vec<_>>(), want.iter().collect::<Vec<_>>());
            // Spot-check the rule directly too.
            let flag_of = |f: &OutFrame| {
                let h = crate::wire::FrameHeaders::parse(&f.data).unwrap();
                crate::wire::TcpPacket::new_checked(&f.data[h.l4_offset..]).unwrap().flags()
            };
            let last = frames.len() - 1;
            for (i, f) in frames.iter().enumerate() {
                let fl = flag_of(f);
                assert_eq!(fl.contains(TcpFlags::FIN), i == last && flags.contains(TcpFlags::FIN));
                assert_eq!(fl.contains(TcpFlags::PSH), i == last && flags.contains(TcpFlags::PSH));
                assert_eq!(fl.contains(TcpFlags::CWR), (i == 0 || accecn) && flags.contains(TcpFlags::CWR));
                assert_eq!(fl.contains(TcpFlags::ECE), flags.contains(TcpFlags::ECE));
            }
        }
    }
}

fn ip_ids(frames: &[OutFrame]) -> Vec<u16> {
    frames
        .iter()
        .map(|f| {
            let h = crate::wire::FrameHeaders::parse(&f.data).unwrap();
            u16::from_be_bytes([f.data[h.l3_offset + 4], f.data[h.l3_offset + 5]])
        })
        .collect()
}

#[test]
fn ipv4_id_incrementing_or_fixed() {
    let spec = Fam::Tcp4.spec(1);
    let mut pkt = superpacket(spec, 4 * 1448, 1448, TcpFlags::empty());
    // Start near the wrap to check modular arithmetic.
    let l3 = 18;
    let mut frame = pkt.to_vec();
    frame[l3 + 4..l3 + 6].copy_from_slice(&0xFFFEu16.to_be_bytes());
    frame[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = crate::csum::checksum(&frame[l3..l3 + 20]);
    frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    let meta = pkt.meta;
    pkt = Packet::from_frame(&frame);
    pkt.meta = meta;
    let (_, frames) = run(&pkt, &sw(true));
    assert_eq!(ip_ids(&frames), [0xFFFE, 0xFFFF, 0, 1]);
    assert_valid(&frames, MTU);

    pkt.meta.gso_type |= GsoType::TCP_FIXEDID;
    let (_, frames) = run(&pkt, &sw(false));
    assert_eq!(ip_ids(&frames), [0xFFFE; 4]);
    assert_valid(&frames, MTU);

    // USO always increments.
    let u = superpacket(Fam::Udp4.spec(0), 3000, 1000, TcpFlags::empty());
    let (_, frames) = run(&u, &sw(true));
    let ids = ip_ids(&frames);
    assert_eq!(ids, [ids[0], ids[0].wrapping_add(1), ids[0].wrapping_add(2)]);
}

#[test]
fn fixedid_offload_needs_mangleid_and_df() {
    let tso = TargetCaps::new(MTU).with_sg().with_csum(CsumCaps::HW).with_gso(GsoType::TCPV4 | GsoType::TCP_FIXEDID);
    let mut spec = Fam::Tcp4.spec(0);
    let mut pkt = superpacket(spec, 4000, 1000, TcpFlags::empty());
    pkt.meta.gso_type |= GsoType::TCP_FIXEDID;
    assert_eq!(run(&pkt, &tso).0, Ok(GsoOutcome::PassedThrough));
    let no_mangle = tso.with_gso(GsoType::TCPV4);
    assert!(matches!(run(&pkt, &no_mangle).0, Ok(GsoOutcome::Segmented { .. })));
    // DF=0 strips MANGLEID (6.2 step 2): software, IDs stay fixed.
    spec.dont_frag = false;
    let mut pkt = superpacket(spec, 4000, 1000, TcpFlags::empty());
    pkt.meta.gso_type |= GsoType::TCP_FIXEDID;
    let (r, frames) = run(&pkt, &tso);
    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: false }));
    let ids = ip_ids(&frames);
    assert!(ids.iter().all(|&i| i == ids[0]));
    assert_valid(&frames, MTU);
}

#[test]
fn ipv6_extension_headers() {
    for fam in [Fam::Tcp6, Fam::Udp6] {
        for vlans in 0..=2 {
            let spec = fam.spec(vlans);
            let pkt = with_ipv6_ext(&superpacket(spec, 3500, 1200, TcpFlags::PSH));
            for caps in [sw(true), sw(false), sw(true).with_csum(CsumCaps::IP)] {
                let (r, frames) = run(&pkt, &caps);
                assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 3, csum_completed: true }), "{fam:?} {caps:?}");
                assert_valid(&frames, MTU);
                // The extension header is copied into every segment.
                for f in &frames {
                    let h = crate::wire::FrameHeaders::parse(&f.data).unwrap();
                    assert_eq!(h.l3_header_len, 48);
                }
                let want = expected(spec, 3500, 1200, TcpFlags::PSH, false);
                for (f, w) in frames.iter().zip(&want) {
                    assert_eq!(strip_ipv6_ext(&f.data, 14 + 4 * vlans), *w);
                }
            }
            // HW_CSUM takes extension headers: the segments stay partial.
            let (r, frames) = run(&pkt, &sw(true).with_csum(CsumCaps::HW));
            assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 3, csum_completed: false }));
            assert_valid(&frames, MTU);
            assert!(frames.iter().all(|f| matches!(f.meta.csum, ChecksumState::Partial { .. })));
        }
    }
}

/// Inserts an 8-byte Destination Options header after the IPv6 header of a
/// (superpacket) frame, keeping its metadata valid.
pub(super) fn with_ipv6_ext(pkt: &Packet) -> Packet {
    let l3 = crate::wire::FrameHeaders::parse(&pkt.to_vec()).unwrap().l3_offset;
    crate::traffic::insert_ipv6_dstopts(pkt, l3)
}

fn strip_ipv6_ext(f: &[u8], l3: usize) -> Vec<u8> {
    let mut out = f[..l3 + 40].to_vec();
    out[l3 + 6] = f[l3 + 40];
    let pl = u16::from_be_bytes([out[l3 + 4], out[l3 + 5]]) - 8;
    out[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
    out.extend_from_slice(&f[l3 + 48..]);
    out
}

#[test]
fn uso_limits() {
    let spec = Fam::Udp4.spec(0);
    // 128 datagrams: fine; 129: too many; 64 with the legacy limit.
    let ok = superpacket(spec, 128 * 100, 100, TcpFlags::empty());
    let (r, frames) = run(&ok, &sw(true));
    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 128, csum_completed: true }));
    assert_valid(&frames, MTU);
    let too_many = superpacket(spec, 128 * 100 + 1, 100, TcpFlags::empty());
    assert_eq!(run(&too_many, &sw(true)).0, Err(GsoError::TooManySegments { segments: 129, max: 128 }));
    let legacy = sw(true).with_udp_max_segments(UDP_MAX_SEGMENTS_LEGACY);
    let sixty_five = superpacket(spec, 64 * 100 + 1, 100, TcpFlags::empty());
    assert_eq!(run(&sixty_five, &legacy).0, Err(GsoError::TooManySegments { segments: 65, max: 64 }));
    // Every datagram gso_size long but the last; UDP length per datagram.
    let p = superpacket(spec, 1000, 300, TcpFlags::empty());
    let (_, frames) = run(&p, &sw(false));
    let lens: Vec<usize> =
        frames.iter().map(|f| crate::wire::FrameHeaders::parse(&f.data).unwrap().payload_len).collect();
    assert_eq!(lens, [300, 300, 300, 100]);
}

/// UDP GSO cuts the IP payload after the UDP header and gives every
/// datagram its own length: the superpacket's UDP length field is not read
/// (Linux's `__udp_gso_segment`). A DODGY superpacket whose UDP length
/// covers only part of the payload still yields every byte, in order (the
/// case the long `virtio` and `gso` fuzz runs built).
#[test]
fn uso_ignores_the_superpacket_udp_length() {
    let spec = Fam::Udp4.spec(0);
    let mut p = superpacket(spec, 1000, 300, TcpFlags::empty());
    let h = crate::wire::FrameHeaders::parse(&p.to_vec()).unwrap();
    let (l4, payload_at) = (h.l4_offset, h.payload_offset);
    let original = p.to_vec()[payload_at..].to_vec();
    p.linear_mut()[l4 + 4..l4 + 6].copy_from_slice(&(8u16 + 98).to_be_bytes());
    p.meta.gso_type |= GsoType::DODGY;
    let (r, frames) = run(&p, &sw(false));
    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: true }));
    assert_valid(&frames, MTU);
    let mut got = Vec::new();
    for f in &frames {
        let h = crate::wire::FrameHeaders::parse(&f.data).unwrap();
        assert_eq!(h.l4_len(), h.payload_len + 8, "each datagram carries its own UDP length");
        got.extend_from_slice(h.payload_bytes(&f.data));
    }
    assert_eq!(got, original);
}

/// Sets the last two payload bytes of a UDP frame so that its checksum
/// computes to 0 (before the 0 -> 0xFFFF rule).
fn force_zero_udp_sum(frame: &mut [u8]) {
    let h = crate::wire::FrameHeaders::parse(frame).unwrap();
    let end = h.l3_end();
    assert!((end - h.payload_offset).is_multiple_of(2));
    frame[end - 2..end].copy_from_slice(&[0, 0]);
    frame[h.l4_offset + 6..h.l4_offset + 8].copy_from_slice(&[0, 0]);
    let pseudo = crate::validate::l4_pseudo_header_sum(frame, &h).unwrap();
    let s = crate::csum::ones_add(pseudo, crate::csum::ones_sum(&frame[h.l4_offset..end]));
    frame[end - 2..end].copy_from_slice(&(!s).to_be_bytes());
}

#[test]
fn udp_zero_checksum_becomes_ffff() {
    for fam in [Fam::Udp4, Fam::Udp6] {
        let spec = fam.spec(0);
        // GSO: build a 2-datagram superpacket whose first datagram sums to 0.
        let want = expected(spec, 2000, 1000, TcpFlags::empty(), false);
        let mut first = want[0].clone();
        force_zero_udp_sum(&mut first);
        let mut pkt = superpacket(spec, 2000, 1000, TcpFlags::empty());
        let hl = spec.header_len();
        let mut frame = pkt.to_vec();
        frame[hl + 998..hl + 1000].copy_from_slice(&first[hl + 998..hl + 1000]);
        let meta = pkt.meta;
        pkt = Packet::from_frame(&frame);
        pkt.meta = meta;
        for sg in [false, true] {
            let (r, frames) = run(&pkt, &sw(sg));
            assert!(r.is_ok());
            let l4 = hl - 8;
            assert_eq!(&frames[0].data[l4 + 6..l4 + 8], &[0xFF, 0xFF], "{fam:?} sg {sg}");
            assert_valid(&frames, MTU);
        }
        // Checksum help of a single partial datagram.
        let mut single = Flow::new(spec).superpacket(1000, 1000, TcpFlags::empty()).unwrap();
        let mut f = single.to_vec();
        let mut full = f.clone();
        force_zero_udp_sum(&mut full);
        f[hl + 998..hl + 1000].copy_from_slice(&full[hl + 998..hl + 1000]);
        let meta = single.meta;
        single = Packet::from_frame(&f);
        single.meta = meta;
        let (r, frames) = run(&single, &sw(true));
        assert_eq!(r, Ok(GsoOutcome::Completed { csum_completed: true }));
        assert_eq!(&frames[0].data[hl - 2..hl], &[0xFF, 0xFF]);
        assert_valid(&frames, MTU);
    }
}

#[test]
fn mtu_is_checked_per_segment() {
    // TCPv4 with timestamps: 20 + 32 + 1448 = 1500.
    let pkt = superpacket(Fam::Tcp4.spec(2), 20000, 1448, TcpFlags::empty());
    let ok = TargetCaps::new(1500).with_sg();
    let (r, frames) = run(&pkt, &ok);
    assert!(r.is_ok());
    assert_valid(&frames, 1500);
    let small = TargetCaps::new(1499).with_sg();
    assert_eq!(run(&pkt, &small).0, Err(GsoError::SegmentExceedsMtu { len: 1500, mtu: 1499 }));
    // A TSO target gets the same check (the wire segments are the same).
    let tso = small.with_csum(CsumCaps::HW).with_gso(GsoType::TCPV4);
    assert!(matches!(run(&pkt, &tso).0, Err(GsoError::SegmentExceedsMtu { .. })));
    // USO: 20 + 8 + gso_size.
    let u = superpacket(Fam::Udp6.spec(0), 5000, 1452, TcpFlags::empty());
    assert!(run(&u, &TargetCaps::new(1500)).0.is_ok());
    assert!(matches!(run(&u, &TargetCaps::new(1499)).0, Err(GsoError::SegmentExceedsMtu { len: 1500, .. })));
}

#[test]
fn bad_metadata_is_a_counted_drop() {
    let tcp = superpacket(Fam::Tcp4.spec(1), 3000, 1000, TcpFlags::empty());
    let udp = superpacket(Fam::Udp6.spec(0), 3000, 1000, TcpFlags::empty());
    let with = |p: &Packet, f: &dyn Fn(&mut OffloadMeta)| {
        let mut p = p.clone();
        f(&mut p.meta);
        p
    };
    let truncated = {
        let mut p = tcp.clone();
        p.trim(p.len() - 1).unwrap();
        p
    };
    let garbage = {
        let mut f = [0u8; 60];
        f[12..15].copy_from_slice(&[0x08, 0x00, 0x41]); // IPv4 with IHL 1
        let mut p = Packet::from_frame(&f);
        p.meta = tcp.meta;
        p
    };
    let cases: Vec<(&str, Packet, &str)> = vec![
        ("gso_size 0", with(&tcp, &|m| m.gso_size = 0), "zero-gso-size"),
        ("TCPV6 on IPv4", with(&tcp, &|m| m.gso_type = GsoType::TCPV6), "protocol-mismatch"),
        ("UDP_L4 on TCP", with(&tcp, &|m| m.gso_type = GsoType::UDP_L4), "protocol-mismatch"),
        ("TCPV4 on UDP", with(&udp, &|m| m.gso_type = GsoType::TCPV4), "protocol-mismatch"),
        ("two protocols", with(&tcp, &|m| m.gso_type |= GsoType::TCPV6), "unknown-gso-type"),
        ("unknown bit", with(&tcp, &|m| m.gso_type |= GsoType::from_bits(1 << 6)), "unknown-gso-type"),
        ("UDP with FIXEDID", with(&udp, &|m| m.gso_type |= GsoType::TCP_FIXEDID), "unknown-gso-type"),
        ("only DODGY", with(&tcp, &|m| m.gso_type = GsoType::DODGY), "unknown-gso-type"),
        ("gso_segs wrong", with(&tcp, &|m| m.gso_segs = 7), "gso-segs-mismatch"),
        (
            "csum start not L4",
            with(&tcp, &|m| m.csum = ChecksumState::Partial { start: 14, offset: 16 }),
            "csum-start-not-l4",
        ),
        (
            "csum offset of UDP on TCP",
            with(&tcp, &|m| m.csum = ChecksumState::Partial { start: 38, offset: 6 }),
            "wrong-csum-offset",
        ),
        ("IP length beyond the bytes", truncated, "length-mismatch"),
        ("garbage headers", garbage, "bad-headers"),
        ("not IP", with(&Packet::from_frame(&[0u8; 60]), &|m| *m = tcp.meta), "protocol-mismatch"),
        ("too many USO segments", with(&udp, &|m| m.gso_size = 20), "too-many-segments"),
    ];
    let mut seg = Segmenter::new();
    for (what, p, reason) in &cases {
        let mut sink = VecSink::new();
        let r = seg.segment(p, &sw(true), &mut sink);
        let e = r.expect_err(what);
        assert_eq!(e.reason(), *reason, "{what}: {e}");
        assert!(sink.frames.is_empty(), "{what}: nothing emitted");
    }
    assert_eq!(seg.counters.dropped(), cases.len() as u64);
    assert_eq!(seg.counters.drops["protocol-mismatch"], 4);
    assert_eq!(seg.counters.frames_out, 0);
    // DODGY with gso_segs 0 (from virtio) is validated and recomputed.
    let dodgy = with(&tcp, &|m| {
        m.gso_type |= GsoType::DODGY;
        m.gso_segs = 0;
    });
    let mut sink = VecSink::new();
    assert!(seg.segment(&dodgy, &sw(true), &mut sink).is_ok());
    let tso = sw(true).with_csum(CsumCaps::HW).with_gso(GsoType::TCPV4);
    let mut sink = VecSink::new();
    assert_eq!(seg.segment(&dodgy, &tso, &mut sink), Ok(GsoOutcome::PassedThrough));
    assert_eq!(sink.frames[0].meta.gso_segs, 3);
    assert_eq!(sink.frames[0].meta.gso_type, GsoType::TCPV4);
}

/// A GSO packet whose payload is not larger than `gso_size` is not a
/// superpacket (offload-rules 4.2 step 5, issue 22 item 4): it leaves as one
/// ordinary frame, its checksum completed (or left partial for a target that
/// checksums), never dropped. Every family, 0-2 VLAN tags, and (through
/// [`run`]) raw IP for the untagged ones.
#[test]
fn small_gso_packets_go_out_as_one_frame() {
    let full = TargetCaps::new(MTU)
        .with_sg()
        .with_csum(CsumCaps::HW)
        .with_gso(GsoType::TCPV4 | GsoType::TCPV6 | GsoType::UDP_L4);
    let done = GsoOutcome::Completed { csum_completed: true };
    struct Case {
        name: &'static str,
        payload: usize,
        gso_size: u16,
        /// GSO bits besides the protocol's.
        bits: GsoType,
        gso_segs: u16,
        caps: TargetCaps,
        outcome: GsoOutcome,
    }
    let case = |name, payload, gso_size, caps, outcome| Case {
        name,
        payload,
        gso_size,
        bits: GsoType::NONE,
        gso_segs: 1,
        caps,
        outcome,
    };
    let cases = [
        case("payload = gso_size", 1000, 1000, sw(true), done),
        case("payload = gso_size, linear", 1000, 1000, sw(false), done),
        case("payload < gso_size", 999, 1448, sw(true), done),
        case("one byte", 1, 1400, sw(false), done),
        case("no payload", 0, 1400, sw(true), done),
        // gso_size is no segment length here: only the real frame meets the MTU.
        case("gso_size beyond the MTU", 1000, 9000, TargetCaps::new(1500), done),
        Case { bits: GsoType::DODGY, gso_segs: 0, ..case("DODGY from virtio", 1000, 1000, sw(true), done) },
        // gso_segs describes a superpacket; this is none (virtio ignores it too).
        Case { gso_segs: 7, ..case("gso_segs disagrees", 500, 1000, sw(true), done) },
        case("target checksums", 1000, 1400, sw(true).with_csum(CsumCaps::HW), GsoOutcome::PassedThrough),
        case("target segments", 1000, 1400, full, GsoOutcome::PassedThrough),
    ];
    let mut seg = Segmenter::new();
    for fam in Fam::ALL {
        for vlans in 0..=2 {
            let spec = fam.spec(vlans);
            for c in &cases {
                let what = format!("{} {fam:?} vlans {vlans}", c.name);
                let mut pkt = superpacket(spec, c.payload, c.gso_size, TcpFlags::PSH | TcpFlags::FIN);
                let proto = match fam {
                    Fam::Tcp4 => GsoType::TCPV4,
                    Fam::Tcp6 => GsoType::TCPV6,
                    Fam::Udp4 | Fam::Udp6 => GsoType::UDP_L4,
                };
                pkt.meta.gso_type = proto | c.bits;
                pkt.meta.gso_size = c.gso_size;
                pkt.meta.gso_segs = c.gso_segs;
                let want = Flow::new(spec).frame(c.payload, TcpFlags::PSH | TcpFlags::FIN).unwrap();
                let (r, frames) = run(&pkt, &c.caps);
                assert_eq!(r, Ok(c.outcome), "{what}");
                assert_eq!(frames.len(), 1, "{what}");
                let f = &frames[0];
                assert!(!f.meta.is_gso(), "{what}: {:?}", f.meta);
                assert_eq!(completed(&frames)[0], want, "{what}");
                if c.outcome == done {
                    assert_eq!(f.data, want, "{what}");
                    assert_eq!(f.meta.csum, ChecksumState::None, "{what}");
                } else {
                    assert_eq!(f.data, pkt.to_vec(), "{what}: passed through unchanged");
                    assert_eq!(f.meta.csum, pkt.meta.csum, "{what}");
                }
                assert_valid(&frames, c.caps.mtu);
                // The same packet through a long-lived segmenter: counted as sent, not dropped.
                let mut sink = VecSink::new();
                assert_eq!(seg.segment(&pkt, &c.caps, &mut sink), Ok(c.outcome), "{what}");
            }
        }
    }
    assert_eq!(seg.counters.dropped(), 0);
    assert_eq!(seg.counters.superpackets_segmented, 0);
    assert_eq!(seg.counters.frames_out, seg.counters.packets_in);

    // TCP_ECN on a small TCP packet: the bit goes with the GSO metadata.
    let mut ecn = superpacket(Fam::Tcp4.spec(0), 800, 1448, TcpFlags::CWR);
    ecn.meta.gso_type = GsoType::TCPV4 | GsoType::TCP_ECN;
    ecn.meta.gso_size = 1448;
    let (r, frames) = run(&ecn, &sw(true));
    assert_eq!(r, Ok(done));
    assert_eq!(frames[0].data, Flow::new(Fam::Tcp4.spec(0)).frame(800, TcpFlags::CWR).unwrap());
    // Payload beyond the linear area (segments and a frag list of pure payload).
    let spec = Fam::Udp6.spec(1);
    let big = superpacket(spec, 3000, 1000, TcpFlags::empty());
    let mut chunked = fragment_payload(&big, spec.header_len(), &[700, 1500], Some(2000));
    chunked.meta.gso_size = 3000;
    chunked.meta.gso_segs = 1;
    let want = Flow::new(spec).frame(3000, TcpFlags::empty()).unwrap();
    for sg in [false, true] {
        let (r, frames) = run(&chunked, &sw(sg));
        assert_eq!(r, Ok(done), "sg {sg}");
        assert_eq!(frames[0].data, want, "sg {sg}");
    }
    // Checksum state NONE (the sender's checksum is final): sent as it is.
    let mut none = Packet::from_frame(&want);
    none.meta = OffloadMeta { csum: ChecksumState::None, ..chunked.meta };
    let (r, frames) = run(&none, &sw(false));
    assert_eq!(r, Ok(GsoOutcome::PassedThrough));
    assert_eq!((frames[0].data.as_slice(), frames[0].meta.is_gso()), (want.as_slice(), false));
    // Still validated first: a small packet of the wrong protocol is dropped.
    let mut wrong = ecn.clone();
    wrong.meta.gso_type = GsoType::TCPV6;
    assert_eq!(run(&wrong, &sw(true)).0.unwrap_err().reason(), "protocol-mismatch");
}

#[test]
fn bad_metadata_fuzz_never_panics() {
    // Random metadata and random byte flips in the headers: an error or
    // frames that validate, never a panic.
    let base = superpacket(Fam::Tcp6.spec(1), 3000, 1000, TcpFlags::PSH);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        let mut f = base.to_vec();
        for _ in 0..(next() % 3) {
            let at = (next() % 100) as usize;
            f[at] ^= next() as u8;
        }
        let mut p = Packet::from_frame(&f);
        p.meta = base.meta;
        p.meta.gso_size = (next() % 3100) as u16;
        p.meta.gso_type = GsoType::from_bits(base.meta.gso_type.bits() ^ ((next() % 8 == 0) as u32) << (next() % 32));
        if next() % 4 == 0 {
            p.meta.csum = ChecksumState::Partial { start: (next() % 120) as u16, offset: (next() % 20) as u16 };
        }
        for caps in [sw(true), sw(false).with_csum(CsumCaps::IP)] {
            let (r, frames) = run(&p, &caps);
            if r.is_ok() && p.meta.gso_type == base.meta.gso_type && f == base.to_vec() {
                assert_valid(&frames, MTU);
            }
        }
    }
}

// ---------------------------------------------------------------- decisions

#[test]
fn produces_only_what_the_target_lacks() {
    let full = TargetCaps::new(MTU)
        .with_sg()
        .with_csum(CsumCaps::HW)
        .with_gso(GsoType::TCPV4 | GsoType::TCPV6 | GsoType::UDP_L4);
    let csum_only = TargetCaps::new(MTU).with_sg().with_csum(CsumCaps::IP);
    for fam in Fam::ALL {
        let pkt = superpacket(fam.spec(1), 5000, 1400, TcpFlags::PSH);
        // Full offload: pass-through, metadata intact.
        let (r, frames) = run(&pkt, &full);
        assert_eq!(r, Ok(GsoOutcome::PassedThrough));
        assert_eq!(frames[0].data, pkt.to_vec());
        assert_eq!(frames[0].meta, pkt.meta);
        // Checksum offload but no GSO: segments left partial.
        let (r, frames) = run(&pkt, &csum_only);
        assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: false }));
        assert_valid(&frames, MTU);
        let want = expected(fam.spec(1), 5000, 1400, TcpFlags::PSH, false);
        assert_eq!(completed(&frames), want);
        // QinQ: no GSO and only HW_CSUM (6.2 step 5).
        let q = superpacket(fam.spec(2), 5000, 1400, TcpFlags::PSH);
        let (r, frames) = run(&q, &full);
        assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: false }));
        assert_valid(&frames, MTU);
        let (r, _) = run(&q, &csum_only);
        assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: true }));
        // A target whose per-device check parses two tags keeps its offloads.
        let (r, frames) = run(&q, &full.with_max_offload_tags(2));
        assert_eq!(r, Ok(GsoOutcome::PassedThrough));
        assert_eq!(frames[0].data, q.to_vec());
        let (r, _) = run(&q, &csum_only.with_max_offload_tags(2));
        assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 4, csum_completed: false }));
    }
    // A TSO target without the ECN feature: software.
    let mut ecn = superpacket(Fam::Tcp4.spec(0), 5000, 1400, TcpFlags::CWR);
    ecn.meta.gso_type |= GsoType::TCP_ECN;
    assert!(matches!(run(&ecn, &full).0, Ok(GsoOutcome::Segmented { .. })));
    assert_eq!(run(&ecn, &full.with_gso(GsoType::TCPV4 | GsoType::TCP_ECN)).0, Ok(GsoOutcome::PassedThrough));
    // Too many segments / too large for the target's own GSO: software.
    let pkt = superpacket(Fam::Tcp4.spec(0), 5000, 100, TcpFlags::empty());
    let mut few = full;
    few.max_segs = 10;
    assert!(matches!(run(&pkt, &few).0, Ok(GsoOutcome::Segmented { segments: 50, .. })));
    let mut small = full;
    small.gso_max_size = 4000;
    assert!(matches!(run(&pkt, &small).0, Ok(GsoOutcome::Segmented { .. })));
    // A superpacket whose checksum state is NONE cannot be offloaded (3.1).
    let mut none = superpacket(Fam::Tcp4.spec(0), 5000, 1000, TcpFlags::empty());
    let mut f = none.to_vec();
    let h = crate::wire::FrameHeaders::parse(&f).unwrap();
    let pseudo = crate::validate::l4_pseudo_header_sum(&f, &h).unwrap();
    crate::wire::TcpPacket::new_unchecked(&mut f[h.l4_offset..]).fill_checksum(pseudo);
    let meta = OffloadMeta { csum: ChecksumState::None, ..none.meta };
    none = Packet::from_frame(&f);
    none.meta = meta;
    let (r, frames) = run(&none, &full);
    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 5, csum_completed: false }));
    assert_eq!(completed(&frames), expected(Fam::Tcp4.spec(0), 5000, 1000, TcpFlags::empty(), false));
}

#[test]
fn checksum_help_for_single_packets() {
    for fam in Fam::ALL {
        for vlans in 0..=2 {
            let spec = fam.spec(vlans);
            let partial = Flow::new(spec).superpacket(1000, 1400, TcpFlags::PSH).unwrap();
            assert!(!partial.meta.is_gso());
            let want = Flow::new(spec).frame(1000, TcpFlags::PSH).unwrap();
            // (caps, expect pass-through)
            let cases = [
                (sw(true), false),
                (sw(false), false),
                (sw(true).with_csum(CsumCaps::IP), vlans < 2),
                (sw(true).with_csum(CsumCaps { ipv4: true, ipv6: false, hw: false }), vlans < 2 && !spec_v6(fam)),
                (sw(true).with_csum(CsumCaps { ipv4: false, ipv6: true, hw: false }), vlans < 2 && spec_v6(fam)),
                (sw(true).with_csum(CsumCaps::HW), true),
            ];
            for (caps, pass) in cases {
                let (r, frames) = run(&partial, &caps);
                if pass {
                    assert_eq!(r, Ok(GsoOutcome::PassedThrough), "{fam:?} vlans {vlans} {caps:?}");
                    assert_eq!(completed(&frames)[0], want);
                } else {
                    assert_eq!(r, Ok(GsoOutcome::Completed { csum_completed: true }), "{fam:?} {vlans} {caps:?}");
                    assert_eq!(frames[0].data, want, "{fam:?} vlans {vlans} {caps:?}");
                    assert_eq!(frames[0].meta.csum, ChecksumState::None);
                }
                assert_valid(&frames, MTU);
            }
            if spec_v6(fam) {
                // IPV6_CSUM does not cover extension headers.
                let ext = with_ipv6_ext(&partial);
                let (r, frames) = run(&ext, &sw(true).with_csum(CsumCaps::IP));
                assert_eq!(r, Ok(GsoOutcome::Completed { csum_completed: true }));
                assert_valid(&frames, MTU);
            }
        }
    }
    // COMPLETE on transmit is "done"; a linear non-partial packet passes.
    let mut p = Packet::from_frame(&Flow::new(Fam::Tcp4.spec(0)).frame(100, TcpFlags::empty()).unwrap());
    p.meta.csum = ChecksumState::Complete { sum: 0x1234 };
    let (r, frames) = run(&p, &sw(false));
    assert_eq!(r, Ok(GsoOutcome::PassedThrough));
    assert_eq!(frames[0].meta.csum, ChecksumState::None);
    // Partial field outside the packet.
    p.meta.csum = ChecksumState::Partial { start: 150, offset: 16 };
    assert_eq!(run(&p, &sw(true)).0.unwrap_err().reason(), "csum-outside-packet");
}

/// Regression (found by fuzz target `gso`): a partial-checksum packet with
/// Ethernet padding after its IP packet got a checksum summed over the
/// padding. The checksum covers the IP packet only; the padding is dropped.
#[test]
fn checksum_help_ignores_ethernet_padding() {
    for fam in Fam::ALL {
        let spec = fam.spec(1);
        let partial = Flow::new(spec).superpacket(9, 1400, TcpFlags::PSH).unwrap();
        let want = Flow::new(spec).frame(9, TcpFlags::PSH).unwrap();
        let mut padded = partial.to_vec();
        padded.extend_from_slice(&[0xA5, 0x5A, 0x01]); // non-zero padding, odd length
        let mut pkt = Packet::from_frame(&padded);
        pkt.meta = partial.meta;
        for sg in [false, true] {
            let (r, frames) = run(&pkt, &sw(sg));
            assert_eq!(r, Ok(GsoOutcome::Completed { csum_completed: true }), "{fam:?} sg {sg}");
            assert_eq!(frames[0].data, want, "{fam:?} sg {sg}");
            assert_valid(&frames, MTU);
        }
    }
}

fn spec_v6(f: Fam) -> bool {
    matches!(f, Fam::Tcp6 | Fam::Udp6)
}

#[test]
fn non_linear_packets_are_linearized_only_without_sg() {
    let spec = Fam::Tcp4.spec(0);
    let frame = Flow::new(spec).frame(3000, TcpFlags::empty()).unwrap();
    let pkt = fragment_payload(&Packet::from_frame(&frame), spec.header_len(), &[1000, 2001], None);
    assert_eq!(pkt.segments().len(), 3);
    assert_eq!(run(&pkt, &sw(true)).0, Ok(GsoOutcome::PassedThrough));
    let (r, frames) = run(&pkt, &sw(false));
    assert_eq!(r, Ok(GsoOutcome::Completed { csum_completed: false }));
    assert_eq!(frames[0].data, frame);
    assert_eq!(frames[0].kind, OutKind::Linear);
}

// ---------------------------------------------------------------- payload layout

#[test]
fn non_linear_superpackets() {
    for fam in Fam::ALL {
        let spec = fam.spec(1);
        let pkt = superpacket(spec, 10000, 1448, TcpFlags::FIN);
        let want = expected(spec, 10000, 1448, TcpFlags::FIN, false);
        let hl = spec.header_len();
        for (cuts, frag_at) in
            [(vec![1], None), (vec![700, 1448, 1449, 5001], None), (vec![3, 999], Some(6000)), (vec![], Some(1))]
        {
            let p = fragment_payload(&pkt, hl, &cuts, frag_at);
            for sg in [true, false] {
                let (r, frames) = run(&p, &sw(sg));
                assert!(r.is_ok(), "{fam:?} {cuts:?} {frag_at:?}: {r:?}");
                let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
                assert_eq!(got, want, "{fam:?} {cuts:?} {frag_at:?} sg {sg}");
            }
        }
    }
}

#[test]
fn scatter_gather_borrows_the_payload() {
    struct Check<'p> {
        range: std::ops::Range<usize>,
        frames: usize,
        _p: std::marker::PhantomData<&'p ()>,
    }
    impl SegmentSink for Check<'_> {
        fn pass_through(&mut self, _: &Packet, _: &OffloadMeta) {
            panic!("unexpected pass-through");
        }
        fn sg_frame(&mut self, frame: &SgFrame<'_>) {
            for s in frame.payload {
                let a = s.as_ptr() as usize;
                assert!(self.range.contains(&a) && self.range.contains(&(a + s.len() - 1)), "payload not borrowed");
            }
            self.frames += 1;
        }
        fn linear_buffer(&mut self, _: usize) -> &mut [u8] {
            panic!("unexpected linear frame");
        }
        fn linear_frame(&mut self, _: usize, _: &OffloadMeta) {}
    }
    let pkt = superpacket(Fam::Tcp4.spec(0), 60000, 1448, TcpFlags::empty());
    let lin = pkt.linear();
    let range = lin.as_ptr() as usize..lin.as_ptr() as usize + lin.len();
    let mut sink = Check { range, frames: 0, _p: std::marker::PhantomData };
    let r = segment(&pkt, &sw(true), &mut sink);
    assert!(r.is_ok());
    assert_eq!(sink.frames, 60000usize.div_ceil(1448));
}

#[test]
fn counters_add_up() {
    let mut seg = Segmenter::new();
    let mut sink = VecSink::new();
    let caps = sw(true);
    let p = superpacket(Fam::Tcp4.spec(0), 3000, 1000, TcpFlags::empty());
    seg.segment(&p, &caps, &mut sink).unwrap();
    let single = Flow::new(Fam::Udp4.spec(0)).superpacket(100, 1000, TcpFlags::empty()).unwrap();
    seg.segment(&single, &caps, &mut sink).unwrap();
    let plain = Packet::from_frame(&Flow::new(Fam::Udp4.spec(0)).frame(100, TcpFlags::empty()).unwrap());
    seg.segment(&plain, &caps, &mut sink).unwrap();
    let c = &seg.counters;
    assert_eq!((c.packets_in, c.superpackets_segmented, c.segments_out, c.passed_through), (3, 1, 3, 1));
    assert_eq!((c.completed, c.checksums_completed, c.frames_out), (1, 4, 5));
    assert_eq!(sink.frames.len(), 5);
    #[cfg(feature = "serde")]
    {
        let json = serde_json::to_string(c).unwrap();
        assert!(json.contains("\"segments_out\":3"), "{json}");
    }
}

#[test]
fn payload_is_conserved_with_stream_bytes() {
    // The payload of the segments, in order, is the stream.
    let spec = Fam::Udp6.spec(2);
    let pkt = superpacket(spec, 7777, 1000, TcpFlags::empty());
    let (_, frames) = run(&pkt, &sw(false));
    let mut off = 0u64;
    for f in &frames {
        let h = crate::wire::FrameHeaders::parse(&f.data).unwrap();
        for &b in h.payload_bytes(&f.data) {
            assert_eq!(b, payload_byte(off));
            off += 1;
        }
    }
    assert_eq!(off, 7777);
}

// ---------------------------------------------------------------- fraglist

/// How the members of a fraglist aggregate are chained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chain {
    /// Headers pulled, payload only (Linux, this crate's GRO).
    Pulled,
    /// Whole frames.
    Whole,
    /// From the IP header.
    L3,
}

impl Chain {
    pub(super) const ALL: [Chain; 3] = [Chain::Pulled, Chain::Whole, Chain::L3];
}

/// A fraglist aggregate of `frames` as GRO leaves it (offload-rules 1.6,
/// 2.4): the head is the first frame with the IP (and UDP) length covering
/// every payload; the others are chained as `chain` says.
pub(super) fn fraglist_aggregate(frames: &[Vec<u8>], chain: Chain) -> Packet {
    let h = crate::wire::FrameHeaders::parse(&frames[0]).unwrap();
    let extra: usize = frames[1..].iter().map(|f| crate::wire::FrameHeaders::parse(f).unwrap().payload_len).sum();
    let mut head = frames[0].clone();
    let l3 = h.l3_offset;
    if h.l3 == crate::wire::L3Kind::Ipv4 {
        let tot = (h.l3_len + extra) as u16;
        head[l3 + 2..l3 + 4].copy_from_slice(&tot.to_be_bytes());
        head[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
        let c = crate::csum::checksum(&head[l3..l3 + h.l3_header_len]);
        head[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    } else {
        let pl = (h.l3_len - 40 + extra) as u16;
        head[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
    }
    let udp = h.l4 == crate::wire::L4Kind::Udp;
    if udp {
        let ul = (h.l4_len() + extra) as u16;
        head[h.l4_offset + 4..h.l4_offset + 6].copy_from_slice(&ul.to_be_bytes());
    }
    let mut p = Packet::from_frame(&head);
    for f in &frames[1..] {
        let mut m = Packet::from_frame(if chain == Chain::L3 { &f[l3..] } else { f });
        if chain == Chain::Pulled {
            m.pull(crate::wire::FrameHeaders::parse(f).unwrap().payload_offset).unwrap();
        }
        p.push_frag(m);
    }
    let proto = match (h.l3, udp) {
        (_, true) => GsoType::UDP_L4,
        (crate::wire::L3Kind::Ipv4, false) => GsoType::TCPV4,
        _ => GsoType::TCPV6,
    };
    p.meta = OffloadMeta {
        gso_type: proto | GsoType::FRAGLIST,
        gso_size: h.payload_len as u16,
        gso_segs: frames.len() as u16,
        csum: ChecksumState::Unnecessary { level: 0 },
        ..OffloadMeta::default()
    };
    p
}

#[test]
fn fraglist_splits_back_into_the_originals() {
    for fam in Fam::ALL {
        for vlans in 0..=2 {
            let spec = fam.spec(vlans);
            let mut flow = Flow::new(spec);
            let originals: Vec<Vec<u8>> =
                (0..5).map(|i| flow.frame(if i == 4 { 321 } else { 1200 }, TcpFlags::empty()).unwrap()).collect();
            for chain in Chain::ALL {
                let agg = fraglist_aggregate(&originals, chain);
                for sg in [true, false] {
                    let (r, frames) = run(&agg, &sw(sg));
                    // Pulled members get their checksums recomputed; others keep theirs.
                    let csum_completed = chain == Chain::Pulled;
                    assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 5, csum_completed }), "{fam:?} {chain:?}");
                    assert_valid(&frames, MTU);
                    let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
                    assert_eq!(got, originals, "{fam:?} vlans {vlans} {chain:?} sg {sg}");
                }
                // A target with fraglist GSO takes it whole.
                let caps = sw(true)
                    .with_fraglist()
                    .with_csum(CsumCaps::HW)
                    .with_gso(GsoType::FRAGLIST | GsoType::TCPV4 | GsoType::TCPV6 | GsoType::UDP_L4);
                let want = if vlans < 2 {
                    GsoOutcome::PassedThrough
                } else {
                    GsoOutcome::Segmented { segments: 5, csum_completed: false }
                };
                assert_eq!(run(&agg, &caps).0, Ok(want), "{fam:?} vlans {vlans}");
            }
        }
    }
}

#[test]
fn fraglist_regenerates_ids_and_propagates_nat() {
    let spec = Fam::Udp4.spec(0);
    let mut flow = Flow::new(spec);
    let mut originals: Vec<Vec<u8>> = (0..3).map(|_| flow.frame(800, TcpFlags::empty()).unwrap()).collect();
    // Fixed IDs on the originals: regenerated as head ID + i.
    let id0 = originals_id(&originals[0]);
    for f in &mut originals[1..] {
        f[18..20].copy_from_slice(&id0.to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let c = crate::csum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    let mut agg = fraglist_aggregate(&originals, Chain::Whole);
    let (_, frames) = run(&agg, &sw(true));
    let ids = ip_ids(&frames);
    assert_eq!(ids, [ids[0], ids[0] + 1, ids[0] + 2]);
    assert_valid(&frames, MTU);
    // NAT on the head after GRO: new source address and port.
    let mut head = agg.to_vec();
    head[26..30].copy_from_slice(&[192, 168, 7, 9]);
    head[34..36].copy_from_slice(&4242u16.to_be_bytes());
    head[24..26].copy_from_slice(&[0, 0]);
    let c = crate::csum::checksum(&head[14..34]);
    head[24..26].copy_from_slice(&c.to_be_bytes());
    // Fix the head's own UDP checksum as NAT would (full recompute over its own datagram).
    let frags = agg.take_frag_list();
    let meta = agg.meta;
    let mut own = head.clone();
    let own_len = (8 + 800) as u16;
    own[38..40].copy_from_slice(&own_len.to_be_bytes());
    own[16..18].copy_from_slice(&((20 + 8 + 800) as u16).to_be_bytes());
    own.truncate(14 + 20 + 8 + 800);
    own[40..42].copy_from_slice(&[0, 0]);
    let h = crate::wire::FrameHeaders::parse(&own[..]).unwrap();
    let pseudo = crate::validate::l4_pseudo_header_sum(&own, &h).unwrap();
    let s = udp::mangle_zero(!crate::csum::ones_add(pseudo, crate::csum::ones_sum(&own[34..])));
    head[40..42].copy_from_slice(&s.to_be_bytes());
    let mut nat = Packet::from_frame(&head);
    nat.meta = meta;
    for f in frags {
        nat.push_frag(f);
    }
    let (r, frames) = run(&nat, &sw(false));
    assert!(r.is_ok());
    assert_valid(&frames, MTU);
    for f in &frames {
        assert_eq!(&f.data[26..30], &[192, 168, 7, 9]);
        assert_eq!(&f.data[34..36], &4242u16.to_be_bytes());
    }
}

fn originals_id(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[18], f[19]])
}

#[test]
fn fraglist_altered_geometry_falls_back() {
    for fam in Fam::ALL {
        let spec = fam.spec(1);
        let mut flow = Flow::new(spec);
        let originals: Vec<Vec<u8>> = (0..4).map(|_| flow.frame(1000, TcpFlags::empty()).unwrap()).collect();
        for chain in Chain::ALL {
            let mut agg = fraglist_aggregate(&originals, chain);
            // gso_size no longer matches the head: ordinary segmentation at 700.
            agg.meta.gso_size = 700;
            agg.meta.gso_segs = 0;
            let (r, frames) = run(&agg, &sw(true));
            assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 6, csum_completed: true }), "{fam:?} {chain:?}");
            assert_valid(&frames, MTU);
            let want = expected(spec, 4000, 700, TcpFlags::empty(), false);
            let got: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
            assert_eq!(got, want, "{fam:?} {chain:?}");
        }
    }
}

/// A fraglist aggregate whose whole payload is not larger than `gso_size`
/// (issue 22 item 4): one frame over the concatenated payloads, checksum
/// recomputed (the head's covered only its own part).
#[test]
fn fraglist_no_larger_than_gso_size_is_one_frame() {
    for fam in Fam::ALL {
        let spec = fam.spec(1);
        let mut flow = Flow::new(spec);
        let originals: Vec<Vec<u8>> = (0..3).map(|_| flow.frame(1000, TcpFlags::empty()).unwrap()).collect();
        for chain in Chain::ALL {
            for gso_size in [3000, 3001] {
                let mut agg = fraglist_aggregate(&originals, chain);
                agg.meta.gso_size = gso_size;
                agg.meta.gso_segs = 0;
                let (r, frames) = run(&agg, &sw(true));
                assert_eq!(r, Ok(GsoOutcome::Segmented { segments: 1, csum_completed: true }), "{fam:?} {chain:?}");
                assert_valid(&frames, MTU);
                assert_eq!(
                    frames[0].data,
                    Flow::new(spec).frame(3000, TcpFlags::empty()).unwrap(),
                    "{fam:?} {chain:?}"
                );
            }
        }
    }
}

#[test]
fn fraglist_bad_chain_is_dropped() {
    let spec = Fam::Tcp4.spec(0);
    let mut flow = Flow::new(spec);
    let originals: Vec<Vec<u8>> = (0..3).map(|_| flow.frame(1000, TcpFlags::empty()).unwrap()).collect();
    let mut agg = fraglist_aggregate(&originals, Chain::Whole);
    let mut frags = agg.take_frag_list();
    let short = frags[1].len() - 10;
    frags[1].trim(short).unwrap();
    for f in frags {
        agg.push_frag(f);
    }
    assert_eq!(run(&agg, &sw(true)).0.unwrap_err().reason(), "bad-fraglist");
    let mut agg = fraglist_aggregate(&originals, Chain::Whole);
    agg.push_frag(Packet::from_frame(&[0u8; 40]));
    assert_eq!(run(&agg, &sw(true)).0.unwrap_err().reason(), "bad-fraglist");
}

#[test]
fn fraglist_pulled_members_keep_their_flags() {
    // Fraglist GRO merges only equal flag words: PSH on every member comes
    // back on every packet (not "last only"), and the members' sizes are
    // their own.
    for fam in [Fam::Tcp4, Fam::Tcp6] {
        let spec = fam.spec(1);
        let mut flow = Flow::new(spec);
        let originals: Vec<Vec<u8>> =
            [900, 900, 900, 17].iter().map(|&n| flow.frame(n, TcpFlags::PSH).unwrap()).collect();
        let agg = fraglist_aggregate(&originals, Chain::Pulled);
        for caps in [sw(true), sw(false), sw(true).with_csum(CsumCaps::IP)] {
            let (r, frames) = run(&agg, &caps);
            assert!(r.is_ok(), "{r:?}");
            assert_valid(&frames, MTU);
            assert_eq!(completed(&frames), originals, "{fam:?} {caps:?}");
        }
    }
}

/// `output::copy_header` copies every block length up to
/// [`MAX_HEADER_LEN`] exactly (each of its fixed-size forms and the loop),
/// and nothing else.
#[test]
fn copy_header_every_length() {
    let src: Vec<u8> = (0..MAX_HEADER_LEN as u32).map(|i| (i.wrapping_mul(31) ^ (i >> 4)) as u8 | 1).collect();
    for n in 0..=MAX_HEADER_LEN {
        let mut buf = vec![0u8; n + 1];
        output::copy_header(&mut buf[..n], &src[..n]);
        assert_eq!(&buf[..n], &src[..n], "{n}-byte block");
        assert_eq!(buf[n], 0, "{n}-byte block: a byte written past the end");
    }
}

/// `output::copy_header_block` leaves a frame's first `hl` bytes equal to
/// the template's for every block length and frame length around the
/// fixed-size move (128 bytes), and writes nothing past the frame.
#[test]
fn copy_header_block_every_length() {
    let template: Vec<u8> = (0..MAX_HEADER_LEN as u32).map(|i| (i.wrapping_mul(37) ^ (i >> 3)) as u8 | 1).collect();
    for hl in 0..=200 {
        for frame_len in hl..=hl + 140 {
            let mut buf = vec![0u8; frame_len + 1];
            output::copy_header_block(&mut buf[..frame_len], &template, hl);
            assert_eq!(&buf[..hl], &template[..hl], "{hl}-byte block in a {frame_len}-byte frame");
            assert_eq!(buf[frame_len], 0, "{hl}-byte block: a byte written past the {frame_len}-byte frame");
        }
    }
    // A template shorter than the fixed move is copied by length.
    let mut buf = vec![0u8; 200];
    output::copy_header_block(&mut buf, &template[..100], 100);
    assert_eq!(&buf[..100], &template[..100]);
}
