//! Kernel-oracle tests (need root: see `require_privileges`). They pin what
//! this kernel does in the scenarios of docs/kernel-oracle.md section 5; the
//! results are recorded in the `oracle` module documentation.

use super::*;
use superpacket::packet::Packet;
use superpacket::packet::virtio::{F_DATA_VALID, F_NEEDS_CSUM, GSO_NONE, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4};
use superpacket::packet::{ChecksumState, OffloadMeta};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::FrameHeaders;
use superpacket::wire::tcp::TcpFlags;
use superpacket_engine::io::require_privileges;

const MSS: usize = 1448;

/// A TCP flow without timestamps (54-byte IPv4 headers, as the spec's injector).
fn tcp_flow(ipv6: bool, index: u32) -> Flow {
    let mut spec = FlowSpec::new(Transport::Tcp, ipv6, index);
    spec.tcp_timestamps = false;
    Flow::new(spec)
}

/// `n` in-order MSS segments; PSH on the indices in `psh`.
fn segments(flow: &mut Flow, n: usize, psh: &[usize]) -> Vec<Vec<u8>> {
    (0..n).map(|i| flow.frame(MSS, if psh.contains(&i) { TcpFlags::PSH } else { TcpFlags::empty() }).unwrap()).collect()
}

fn describe(d: &[(VirtioNetHdr, Vec<u8>)]) -> String {
    d.iter()
        .map(|(h, f)| {
            format!(
                "  len={} flags={:#x} gso_type={} gso_size={} hdr_len={} csum_start={} csum_off={}",
                f.len(),
                h.flags,
                h.gso_type,
                h.gso_size,
                h.hdr_len,
                h.csum_start,
                h.csum_offset
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn payload_len(frame: &[u8]) -> usize {
    FrameHeaders::parse(frame).unwrap().payload_len
}

fn tcp_seq(frame: &[u8]) -> u32 {
    let h = FrameHeaders::parse(frame).unwrap();
    u32::from_be_bytes(frame[h.l4_offset + 4..h.l4_offset + 8].try_into().unwrap())
}

fn tcp_flags(frame: &[u8]) -> u8 {
    let h = FrameHeaders::parse(frame).unwrap();
    frame[h.l4_offset + 13]
}

fn ipv4_id(frame: &[u8]) -> u16 {
    let h = FrameHeaders::parse(frame).unwrap();
    u16::from_be_bytes([frame[h.l3_offset + 4], frame[h.l3_offset + 5]])
}

/// Checks a delivered frame as its header states: a partial checksum must hold
/// the pseudo-header sum, otherwise every checksum must verify.
fn assert_valid(hdr: &VirtioNetHdr, frame: &[u8]) {
    let mut meta = OffloadMeta::default();
    if hdr.flags & F_NEEDS_CSUM != 0 {
        meta.csum = ChecksumState::Partial { start: hdr.csum_start, offset: hdr.csum_offset };
    }
    let mut problems = Vec::new();
    validate_frame(frame, Medium::Ethernet, &meta, false, &mut problems);
    assert!(problems.is_empty(), "invalid frame ({} bytes, {hdr:?}): {problems:?}", frame.len());
}

/// A superpacket as (header, frame) for AF_PACKET.
fn superpacket(flow: &mut Flow, payload: usize, gso_size: u16, flags: TcpFlags) -> (VirtioNetHdr, Vec<u8>) {
    let p: Packet = flow.superpacket(payload, gso_size, flags).unwrap();
    let frame = p.to_vec();
    let hdr = VirtioNetHdr::from_meta(&p.meta, &frame, false).unwrap();
    (hdr, frame)
}

fn gro_oracle() -> GroOracle {
    GroOracle::new().expect("GRO oracle setup")
}

// ---------------------------------------------------------------- GRO

/// S1: 20 in-order segments, PSH on the last -> 1 skb of 29014 bytes.
#[test]
fn gro_s1_in_order_segments_merge_into_one_skb() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let frames = segments(&mut tcp_flow(false, 0), 20, &[19]);
    let got = oracle.run(&frames).unwrap();
    eprintln!("S1:\n{}\n{:?}", describe(&got), oracle.stats());
    assert_eq!(got.len(), 1, "{}", describe(&got));
    let (h, f) = &got[0];
    assert_eq!(f.len(), 29014);
    assert_eq!((h.gso_type, h.gso_size, h.flags), (GSO_TCPV4, MSS as u16, F_NEEDS_CSUM));
    assert_eq!((h.csum_start, h.csum_offset), (34, 16));
    assert_eq!(tcp_flags(f), 0x18, "ACK|PSH of the last segment");
    assert_eq!(tcp_seq(f), tcp_seq(&frames[0]));
    assert_valid(h, f);
}

/// The oracle is reusable: the same scenario twice on one setup, plus an
/// empty run.
#[test]
fn gro_oracle_is_reusable_and_deterministic() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    for i in 0..3 {
        let frames = segments(&mut tcp_flow(false, i), 20, &[19]);
        let got = oracle.run(&frames).unwrap();
        assert_eq!(got.len(), 1, "round {i}:\n{}", describe(&got));
        assert_eq!(got[0].1.len(), 29014);
    }
    assert!(oracle.run::<Vec<u8>>(&[]).unwrap().is_empty());
    eprintln!("{:?}", oracle.stats());
}

/// S2: PSH on #5 of 10 -> 2 skbs (5 + 5).
#[test]
fn gro_s2_psh_flushes() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let frames = segments(&mut tcp_flow(false, 0), 10, &[4]);
    let got = oracle.run(&frames).unwrap();
    eprintln!("S2:\n{}", describe(&got));
    let payloads: Vec<usize> = got.iter().map(|(_, f)| payload_len(f)).collect();
    assert_eq!(payloads, [5 * MSS, 5 * MSS]);
    assert_eq!(tcp_flags(&got[0].1), 0x18);
}

/// S3: two flows interleaved, each with its own IP ID sequence -> 2 skbs of 8.
/// S3b: one shared IP ID counter (ID +2 within a flow) -> no merging at all.
#[test]
fn gro_s3_two_flows_and_the_ip_id_rule() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let (mut a, mut b) = (tcp_flow(false, 1), tcp_flow(false, 2));
    let mut frames = Vec::new();
    for _ in 0..8 {
        frames.push(a.frame(MSS, TcpFlags::empty()).unwrap());
        frames.push(b.frame(MSS, TcpFlags::empty()).unwrap());
    }
    let got = oracle.run(&frames).unwrap();
    eprintln!("S3:\n{}", describe(&got));
    assert_eq!(got.iter().map(|(_, f)| payload_len(f)).collect::<Vec<_>>(), [8 * MSS, 8 * MSS]);

    let (mut a, mut b) = (tcp_flow(false, 3), tcp_flow(false, 4));
    let mut shared_id = 100u16;
    let mut frames = Vec::new();
    for _ in 0..8 {
        for f in [&mut a, &mut b] {
            f.ip_id = shared_id;
            shared_id += 1;
            frames.push(f.frame(MSS, TcpFlags::empty()).unwrap());
        }
    }
    let got = oracle.run(&frames).unwrap();
    eprintln!("S3b: {} skbs", got.len());
    assert_eq!(got.len(), 16, "{}", describe(&got));
}

/// S3c: a fixed IP ID with DF set still merges.
#[test]
fn gro_s3c_fixed_ip_id_with_df_merges() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let mut flow = tcp_flow(false, 5);
    let frames: Vec<Vec<u8>> = (0..6)
        .map(|_| {
            flow.ip_id = 7;
            flow.frame(MSS, TcpFlags::empty()).unwrap()
        })
        .collect();
    let got = oracle.run(&frames).unwrap();
    eprintln!("S3c:\n{}", describe(&got));
    assert_eq!(got.len(), 1);
    assert_eq!(payload_len(&got[0].1), 6 * MSS);
}

/// S4: a sequence gap (#5 missing) -> 2 skbs (4 + 5).
#[test]
fn gro_s4_sequence_gap_splits() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let mut frames = segments(&mut tcp_flow(false, 0), 10, &[]);
    frames.remove(4);
    let got = oracle.run(&frames).unwrap();
    eprintln!("S4:\n{}", describe(&got));
    assert_eq!(got.iter().map(|(_, f)| payload_len(f)).collect::<Vec<_>>(), [4 * MSS, 5 * MSS]);
    assert_eq!(tcp_seq(&got[1].1), tcp_seq(&frames[4]));
}

/// S5: #4 of 8 has a bad TCP checksum, #8 is short: the bad one comes out
/// first, unmerged, flags 0; then 1-3 and 5-8 (short tail included).
#[test]
fn gro_s5_bad_checksum_and_short_tail() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let mut flow = tcp_flow(false, 0);
    let mut frames: Vec<Vec<u8>> = (0..7).map(|_| flow.frame(MSS, TcpFlags::empty()).unwrap()).collect();
    frames.push(flow.frame(500, TcpFlags::empty()).unwrap());
    frames[3][14 + 20 + 16] ^= 0x5a;
    let got = oracle.run(&frames).unwrap();
    eprintln!("S5:\n{}", describe(&got));
    assert_eq!(got.len(), 3, "{}", describe(&got));
    assert_eq!(got[0].1, frames[3], "the bad-checksum segment first, unchanged");
    assert_eq!(got[0].0.flags, 0);
    assert_eq!(payload_len(&got[1].1), 3 * MSS);
    assert_eq!(payload_len(&got[2].1), 3 * MSS + 500);
}

/// S6: 802.1Q-tagged segments are not merged (no 8021q here); AF_PACKET
/// shows the tag stripped into metadata.
#[test]
fn gro_s6_vlan_tagged_flow_is_not_merged() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let mut spec = FlowSpec::new(Transport::Tcp, false, 0).with_vlans(&[(0x8100, 100)]).unwrap();
    spec.tcp_timestamps = false;
    let frames = segments(&mut Flow::new(spec), 10, &[]);
    let items: Vec<(VirtioNetHdr, &Vec<u8>)> = frames.iter().map(|f| (VirtioNetHdr::default(), f)).collect();
    let got = oracle.run_detailed(&items).unwrap();
    eprintln!(
        "S6: {} skbs, first: len={} {:?} vlan={:?} pkttype={:?}",
        got.len(),
        got[0].frame.len(),
        got[0].hdr,
        got[0].vlan,
        got[0].pkttype
    );
    assert_eq!(got.len(), 10);
    for (d, sent) in got.iter().zip(&frames) {
        assert_eq!(d.frame.len(), sent.len() - 4, "tag removed from the bytes");
        assert_eq!(&d.frame[12..14], &[0x08, 0x00]);
        assert_eq!(d.vlan.map(|v| (v.tci & 0x0fff, v.tpid)), Some((100, 0x8100)));
        assert_eq!(d.hdr.gso_type, GSO_NONE);
    }
}

/// TCP over IPv6 merges like IPv4 (20 segments -> 1 TCPV6 skb).
#[test]
fn gro_tcp6_merges() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let frames = segments(&mut tcp_flow(true, 0), 20, &[19]);
    let got = oracle.run(&frames).unwrap();
    eprintln!("TCPv6:\n{}", describe(&got));
    assert_eq!(got.len(), 1);
    let (h, f) = &got[0];
    assert_eq!((h.gso_type, h.gso_size, h.flags), (GSO_TCPV6, MSS as u16, F_NEEDS_CSUM));
    assert_eq!(f.len(), 14 + 40 + 20 + 20 * MSS);
    assert_eq!((h.csum_start, h.csum_offset), (54, 16));
    assert_valid(h, f);
}

/// Frames not addressed to the TAP's MAC are merged as well (no promiscuous
/// mode needed); AF_PACKET reports them as OtherHost.
#[test]
fn gro_other_host_frames_merge_too() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let mut flow = tcp_flow(false, 0);
    flow.spec.dst_mac = superpacket::wire::ethernet::MacAddr([0x02, 0x5e, 0, 0, 0, 0x77]);
    let frames = segments(&mut flow, 10, &[9]);
    let items: Vec<(VirtioNetHdr, &Vec<u8>)> = frames.iter().map(|f| (VirtioNetHdr::default(), f)).collect();
    let got = oracle.run_detailed(&items).unwrap();
    eprintln!("other-host: {} skbs, pkttype {:?}", got.len(), got[0].pkttype);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].pkttype, PktType::OtherHost);
}

/// Unmergeable single frames come back unchanged, `DATA_VALID` (verified
/// checksum); `DATA_VALID` on input changes nothing.
#[test]
fn gro_single_frames_come_back_data_valid() {
    if !require_privileges() {
        return;
    }
    let mut oracle = gro_oracle();
    let mut flow = tcp_flow(false, 0);
    let frame = flow.frame(100, TcpFlags::PSH).unwrap();
    let got = oracle.run(std::slice::from_ref(&frame)).unwrap();
    eprintln!("single:\n{}", describe(&got));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, frame);
    assert_eq!(got[0].0, VirtioNetHdr { flags: F_DATA_VALID, ..VirtioNetHdr::default() });

    let frames = segments(&mut flow, 4, &[]);
    let dv = VirtioNetHdr { flags: F_DATA_VALID, ..VirtioNetHdr::default() };
    let items: Vec<(VirtioNetHdr, &Vec<u8>)> = frames.iter().map(|f| (dv, f)).collect();
    let got = oracle.run_with_headers(&items).unwrap();
    eprintln!("DATA_VALID in:\n{}", describe(&got));
    assert_eq!(got.len(), 1);
    assert_eq!(payload_len(&got[0].1), 4 * MSS);
}

/// UDP: without a UDP_GRO socket nothing merges; with
/// `rx-udp-gro-forwarding on` on the TAP the datagrams become one UDP_L4 skb.
#[test]
fn gro_udp_needs_a_gro_socket_or_forwarding() {
    if !require_privileges() {
        return;
    }
    let mk = |index| {
        let mut flow = Flow::new(FlowSpec::new(Transport::Udp, false, index));
        (0..10).map(|_| flow.frame(1400, TcpFlags::empty()).unwrap()).collect::<Vec<_>>()
    };
    let mut plain = gro_oracle();
    let got = plain.run(&mk(0)).unwrap();
    eprintln!("UDP plain: {} skbs", got.len());
    assert_eq!(got.len(), 10);

    let cfg = GroOracleConfig { udp_gro_forwarding: true, ..GroOracleConfig::default() };
    let mut fwd = GroOracle::with_config(cfg).unwrap();
    let got = fwd.run(&mk(1)).unwrap();
    eprintln!("UDP rx-udp-gro-forwarding:\n{}", describe(&got));
    assert_eq!(got.len(), 1);
    let (h, f) = &got[0];
    assert_eq!((h.gso_type, h.gso_size), (GSO_UDP_L4, 1400));
    assert_eq!(f.len(), 14 + 20 + 8 + 10 * 1400);
}

/// Without a flush timeout nothing merges (each write is its own NAPI poll).
#[test]
fn gro_without_flush_timeout_does_not_merge() {
    if !require_privileges() {
        return;
    }
    let cfg = GroOracleConfig { gro_flush_timeout_ns: 0, align_to_tick: false, ..GroOracleConfig::default() };
    let mut oracle = GroOracle::with_config(cfg).unwrap();
    let frames = segments(&mut tcp_flow(false, 0), 10, &[]);
    let got = oracle.run(&frames).unwrap();
    assert_eq!(got.len(), 10, "{}", describe(&got));
}

/// `IFF_NAPI_FRAGS`: no merging at all (napi_gro_frags completes the NAPI
/// after every write).
#[test]
fn gro_napi_frags_mode_does_not_merge() {
    if !require_privileges() {
        return;
    }
    let cfg = GroOracleConfig { napi_frags: true, align_to_tick: false, ..GroOracleConfig::default() };
    let mut oracle = GroOracle::with_config(cfg).unwrap();
    let frames = segments(&mut tcp_flow(false, 0), 10, &[]);
    let got = oracle.run(&frames).unwrap();
    eprintln!("napi_frags:\n{}", describe(&got));
    assert_eq!(got.len(), 10);
}

/// Stability check: S1 many times on one oracle (run with `--ignored`).
#[test]
#[ignore = "slow stability probe"]
fn gro_s1_stability_probe() {
    if !require_privileges() {
        return;
    }
    for align in [true, false] {
        let cfg = GroOracleConfig { align_to_tick: align, ..GroOracleConfig::default() };
        let mut oracle = GroOracle::with_config(cfg).unwrap();
        let mut bad = 0;
        for i in 0..200 {
            let frames = segments(&mut tcp_flow(false, i), 20, &[19]);
            if oracle.run(&frames).unwrap().len() != 1 {
                bad += 1;
            }
        }
        eprintln!("align_to_tick={align}: {bad}/200 split; {:?}", oracle.stats());
    }
}

// ---------------------------------------------------------------- GSO

fn check_segments(got: &[Delivered], sent: &[u8], gso_size: usize) {
    let sent_h = FrameHeaders::parse(sent).unwrap();
    let total = sent_h.payload_len;
    assert_eq!(got.len(), total.div_ceil(gso_size), "segment count");
    let mut offset = 0;
    for (i, d) in got.iter().enumerate() {
        assert_valid(&d.hdr, &d.frame);
        let h = FrameHeaders::parse(&d.frame).unwrap();
        assert_eq!(h.payload_len, gso_size.min(total - offset), "segment {i} payload");
        assert_eq!(
            &d.frame[h.payload_offset..h.payload_offset + h.payload_len],
            &sent[sent_h.payload_offset + offset..sent_h.payload_offset + offset + h.payload_len],
            "segment {i} bytes"
        );
        offset += h.payload_len;
    }
}

/// A 29014-byte TCPV4 superpacket -> 20 frames of <= 1514 bytes, valid
/// checksums, IP IDs incrementing, PSH on the last only.
#[test]
fn gso_tcp4_superpacket_is_segmented() {
    if !require_privileges() {
        return;
    }
    let mut oracle = GsoOracle::new().expect("GSO oracle setup");
    let mut flow = tcp_flow(false, 0);
    let first_id = flow.ip_id;
    let (hdr, frame) = superpacket(&mut flow, 20 * MSS, MSS as u16, TcpFlags::PSH);
    assert_eq!(frame.len(), 29014);
    let got = oracle.segment_detailed(&hdr, &frame).unwrap();
    eprintln!(
        "GSO TCPv4: {} frames, lens {:?}, hdr[0] {:?}, ids {:?}",
        got.len(),
        got.iter().map(|d| d.frame.len()).collect::<Vec<_>>(),
        got[0].hdr,
        got.iter().map(|d| ipv4_id(&d.frame)).collect::<Vec<_>>()
    );
    check_segments(&got, &frame, MSS);
    for (i, d) in got.iter().enumerate() {
        assert!(d.frame.len() <= 1514);
        assert_eq!(ipv4_id(&d.frame), first_id.wrapping_add(i as u16));
        assert_eq!(tcp_flags(&d.frame), if i == 19 { 0x18 } else { 0x10 });
    }
}

/// TCPV6 superpacket -> MSS segments.
#[test]
fn gso_tcp6_superpacket_is_segmented() {
    if !require_privileges() {
        return;
    }
    let mut oracle = GsoOracle::new().unwrap();
    let mut flow = tcp_flow(true, 0);
    let (hdr, frame) = superpacket(&mut flow, 10 * 1428 + 100, 1428, TcpFlags::PSH);
    let got = oracle.segment_detailed(&hdr, &frame).unwrap();
    eprintln!(
        "GSO TCPv6: {} frames, lens {:?}, hdr[0] {:?}",
        got.len(),
        got.iter().map(|d| d.frame.len()).collect::<Vec<_>>(),
        got[0].hdr
    );
    check_segments(&got, &frame, 1428);
}

/// UDP_L4 (USO) superpackets over IPv4 and IPv6 -> one datagram per gso_size.
#[test]
fn gso_udp_l4_superpacket_is_segmented() {
    if !require_privileges() {
        return;
    }
    let mut oracle = GsoOracle::new().unwrap();
    for ipv6 in [false, true] {
        let mut flow = Flow::new(FlowSpec::new(Transport::Udp, ipv6, 0));
        let (hdr, frame) = superpacket(&mut flow, 20 * 1400 + 7, 1400, TcpFlags::empty());
        let got = oracle.segment_detailed(&hdr, &frame).unwrap();
        eprintln!(
            "GSO UDP_L4 ipv6={ipv6}: {} frames, lens {:?}, hdr[0] {:?}",
            got.len(),
            got.iter().map(|d| d.frame.len()).collect::<Vec<_>>(),
            got[0].hdr
        );
        check_segments(&got, &frame, 1400);
        if !ipv6 {
            let ids: Vec<u16> = got.iter().map(|d| ipv4_id(&d.frame)).collect();
            eprintln!("  UDP ids {ids:?}");
        }
    }
}

/// Checksum offload only: a NEEDS_CSUM frame without GSO arrives with its
/// checksum filled in.
#[test]
fn gso_checksum_offload_only() {
    if !require_privileges() {
        return;
    }
    let mut oracle = GsoOracle::new().unwrap();
    let mut flow = tcp_flow(false, 0);
    let (hdr, frame) = superpacket(&mut flow, 1000, MSS as u16, TcpFlags::PSH);
    assert_eq!(hdr.gso_type, GSO_NONE);
    assert_eq!(hdr.flags, F_NEEDS_CSUM);
    let got = oracle.segment_detailed(&hdr, &frame).unwrap();
    eprintln!("csum only: {} frames, hdr {:?}", got.len(), got[0].hdr);
    assert_eq!(got.len(), 1);
    assert_valid(&got[0].hdr, &got[0].frame);
    assert_eq!(got[0].frame.len(), frame.len());
}

/// A header the kernel refuses (GSO with gso_size 0) is a typed error.
#[test]
fn gso_oracle_reports_refused_headers() {
    if !require_privileges() {
        return;
    }
    let mut oracle = GsoOracle::new().unwrap();
    let mut flow = tcp_flow(false, 0);
    let (mut hdr, frame) = superpacket(&mut flow, 4 * MSS, MSS as u16, TcpFlags::empty());
    hdr.csum_offset = 6; // TCP with csum_offset 6: virtio_net_hdr_to_skb refuses it
    let err = oracle.segment(&hdr, &frame).unwrap_err();
    eprintln!("refused: {err}");
    assert!(err.to_string().contains("sendmsg"), "{err}");
}

/// CWR on a TCP superpacket: the kernel keeps it on the first segment only
/// (with or without the virtio ECN bit); FIN/PSH only on the last.
#[test]
fn gso_tcp_flags_are_split_like_the_kernel() {
    if !require_privileges() {
        return;
    }
    let mut oracle = GsoOracle::new().unwrap();
    for ecn in [false, true] {
        let mut flow = tcp_flow(false, 0);
        let (mut hdr, frame) =
            superpacket(&mut flow, 5 * MSS, MSS as u16, TcpFlags::CWR | TcpFlags::PSH | TcpFlags::FIN);
        if ecn {
            hdr.gso_type |= superpacket::packet::virtio::GSO_ECN;
        }
        let got = oracle.segment_detailed(&hdr, &frame).unwrap();
        let flags: Vec<u8> = got.iter().map(|d| tcp_flags(&d.frame)).collect();
        eprintln!("GSO CWR|PSH|FIN ecn={ecn}: tcp flags {flags:02x?}");
        check_segments(&got, &frame, MSS);
        assert_eq!(flags, [0x90, 0x10, 0x10, 0x10, 0x19]);
    }
}

/// With the sender's offloads left on (veth default), the superpacket
/// crosses the veth whole and AF_PACKET on the peer shows it as one GSO skb.
#[test]
fn gso_with_sender_offloads_on_passes_the_superpacket_through() {
    if !require_privileges() {
        return;
    }
    let cfg = GsoOracleConfig { sender_offloads: Vec::new(), ..GsoOracleConfig::default() };
    let mut oracle = GsoOracle::with_config(cfg).unwrap();
    let mut flow = tcp_flow(false, 0);
    let (hdr, frame) = superpacket(&mut flow, 20 * MSS, MSS as u16, TcpFlags::PSH);
    let got = oracle.segment_detailed(&hdr, &frame).unwrap();
    eprintln!("GSO pass-through: {} frames, hdr {:?}", got.len(), got[0].hdr);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].frame.len(), 29014);
    assert_eq!((got[0].hdr.gso_type, got[0].hdr.gso_size), (GSO_TCPV4, MSS as u16));
}

// ---------------------------------------------------------------- raw IP (TUN)

/// A raw IP packet from an untagged Ethernet frame.
fn strip_eth(frame: &[u8]) -> Vec<u8> {
    frame[14..].to_vec()
}

/// An Ethernet-side header as the raw-IP side should show it: `csum_start`
/// 14 less; `hdr_len` (the linear length, a hint) left out of comparisons.
fn shifted(h: &VirtioNetHdr) -> VirtioNetHdr {
    let mut h = *h;
    if h.flags & F_NEEDS_CSUM != 0 {
        h.csum_start -= 14;
    }
    h.hdr_len = 0;
    h
}

fn without_hdr_len(h: &VirtioNetHdr) -> VirtioNetHdr {
    VirtioNetHdr { hdr_len: 0, ..*h }
}

fn validate_ip(hdr: &VirtioNetHdr, packet: &[u8]) {
    let mut meta = OffloadMeta::default();
    if hdr.flags & F_NEEDS_CSUM != 0 {
        meta.csum = ChecksumState::Partial { start: hdr.csum_start, offset: hdr.csum_offset };
    }
    let mut problems = Vec::new();
    validate_frame(packet, Medium::Ip, &meta, false, &mut problems);
    assert!(problems.is_empty(), "invalid packet ({} bytes, {hdr:?}): {problems:?}", packet.len());
}

/// The TUN GRO oracle: S1 on raw IP gives the Ethernet result minus 14 bytes
/// (29000 B, TCPV4, gso_size 1448, csum_start 20).
#[test]
fn gro_raw_ip_s1_merges_on_a_tun() {
    if !require_privileges() {
        return;
    }
    let cfg = GroOracleConfig { medium: Medium::Ip, ..GroOracleConfig::default() };
    let mut oracle = GroOracle::with_config(cfg).expect("TUN GRO oracle setup");
    let frames: Vec<Vec<u8>> = segments(&mut tcp_flow(false, 0), 20, &[19]).iter().map(|f| strip_eth(f)).collect();
    let got = oracle.run_detailed(&frames.iter().map(|f| (VirtioNetHdr::default(), f)).collect::<Vec<_>>()).unwrap();
    eprintln!(
        "raw IP S1: {:?}\n{:?}",
        got.iter().map(|d| (d.frame.len(), d.hdr, d.pkttype)).collect::<Vec<_>>(),
        oracle.stats()
    );
    assert_eq!(got.len(), 1);
    let d = &got[0];
    assert_eq!(d.frame.len(), 29000);
    assert_eq!((d.hdr.gso_type, d.hdr.gso_size, d.hdr.flags), (GSO_TCPV4, MSS as u16, F_NEEDS_CSUM));
    assert_eq!((d.hdr.csum_start, d.hdr.csum_offset), (20, 16));
    assert_eq!(d.pkttype, PktType::Host);
    validate_ip(&d.hdr, &d.frame);
}

/// Every GRO scenario of the spec, run through the TAP and through the TUN:
/// the TUN's deliveries are the TAP's minus their Ethernet header, with
/// `csum_start` 14 less (per flow, in order).
#[test]
fn gro_raw_ip_equals_ethernet_minus_14() {
    if !require_privileges() {
        return;
    }
    let mut scenarios: Vec<(&str, Vec<Vec<u8>>, bool)> = Vec::new();
    scenarios.push(("S1", segments(&mut tcp_flow(false, 0), 20, &[19]), false));
    scenarios.push(("S2", segments(&mut tcp_flow(false, 1), 10, &[4]), false));
    let (mut a, mut b) = (tcp_flow(false, 2), tcp_flow(false, 3));
    let s3 = (0..8).flat_map(|_| [a.frame(MSS, TcpFlags::empty()).unwrap(), b.frame(MSS, TcpFlags::empty()).unwrap()]);
    scenarios.push(("S3", s3.collect(), false));
    let mut s4 = segments(&mut tcp_flow(false, 4), 10, &[]);
    s4.remove(4);
    scenarios.push(("S4", s4, false));
    let mut flow = tcp_flow(false, 5);
    let mut s5: Vec<Vec<u8>> = (0..7).map(|_| flow.frame(MSS, TcpFlags::empty()).unwrap()).collect();
    s5.push(flow.frame(500, TcpFlags::empty()).unwrap());
    s5[3][14 + 20 + 16] ^= 0x5a;
    scenarios.push(("S5", s5, false));
    scenarios.push(("TCPv6", segments(&mut tcp_flow(true, 6), 20, &[19]), false));
    scenarios.push(("single", vec![tcp_flow(false, 7).frame(100, TcpFlags::PSH).unwrap()], false));
    for v6 in [false, true] {
        let mut flow = Flow::new(FlowSpec::new(Transport::Udp, v6, 8));
        let udp = (0..10).map(|_| flow.frame(1400, TcpFlags::empty()).unwrap()).collect();
        scenarios.push((if v6 { "UDP/IPv6 fwd" } else { "UDP/IPv4 fwd" }, udp, true));
    }
    let mut oracles = Vec::new();
    for udp in [false, true] {
        for medium in [Medium::Ethernet, Medium::Ip] {
            let cfg = GroOracleConfig { medium, udp_gro_forwarding: udp, ..GroOracleConfig::default() };
            oracles.push(GroOracle::with_config(cfg).expect("GRO oracle setup"));
        }
    }
    for (name, frames, udp) in &scenarios {
        let at = if *udp { 2 } else { 0 };
        let eth = oracles[at].run(frames).unwrap();
        let ip_frames: Vec<Vec<u8>> = frames.iter().map(|f| strip_eth(f)).collect();
        let ip = oracles[at + 1].run(&ip_frames).unwrap();
        let expected: Vec<(VirtioNetHdr, Vec<u8>)> = eth.iter().map(|(h, f)| (shifted(h), strip_eth(f))).collect();
        let got: Vec<(VirtioNetHdr, Vec<u8>)> = ip.iter().map(|(h, f)| (without_hdr_len(h), f.clone())).collect();
        eprintln!(
            "{name}: ethernet {:?} / ip {:?}; hdr_len eth {:?} ip {:?}",
            eth.iter().map(|(_, f)| f.len()).collect::<Vec<_>>(),
            ip.iter().map(|(_, f)| f.len()).collect::<Vec<_>>(),
            eth.iter().map(|(h, _)| h.hdr_len).collect::<Vec<_>>(),
            ip.iter().map(|(h, _)| h.hdr_len).collect::<Vec<_>>()
        );
        assert_eq!(got.len(), expected.len(), "{name}: skb count");
        let by_port = |v: &[(VirtioNetHdr, Vec<u8>)]| {
            let mut m: std::collections::BTreeMap<u16, Vec<(VirtioNetHdr, Vec<u8>)>> = Default::default();
            for (h, f) in v {
                let l4 = FrameHeaders::parse_ip(f).unwrap().l4_offset;
                m.entry(u16::from_be_bytes([f[l4], f[l4 + 1]])).or_default().push((*h, f.clone()));
            }
            m
        };
        assert!(by_port(&got) == by_port(&expected), "{name}: raw IP differs from Ethernet minus 14");
        if got != expected {
            eprintln!("{name}: same per flow, but the order across flows differs");
        }
    }
    for o in &oracles {
        eprintln!("{:?} {:?}", o.medium(), o.stats());
    }
}

/// The TUN GSO oracle: every segment equals the veth oracle's segment minus
/// its Ethernet header, with the same (all-zero) virtio_net_hdr.
#[test]
fn gso_raw_ip_equals_ethernet_minus_14() {
    if !require_privileges() {
        return;
    }
    let mut eth = GsoOracle::new().expect("GSO oracle setup");
    let cfg = GsoOracleConfig { medium: Medium::Ip, ..GsoOracleConfig::default() };
    let mut ip = GsoOracle::with_config(cfg).expect("TUN GSO oracle setup");
    let cases: Vec<(&str, Flow, usize, u16, TcpFlags)> = vec![
        ("tcp4", tcp_flow(false, 0), 20 * MSS, MSS as u16, TcpFlags::PSH),
        ("tcp4 CWR|PSH|FIN", tcp_flow(false, 1), 5 * MSS, MSS as u16, TcpFlags::CWR | TcpFlags::PSH | TcpFlags::FIN),
        ("tcp6", tcp_flow(true, 2), 10 * 1428 + 100, 1428, TcpFlags::PSH),
        ("uso4", Flow::new(FlowSpec::new(Transport::Udp, false, 3)), 20 * 1400 + 7, 1400, TcpFlags::empty()),
        ("uso6", Flow::new(FlowSpec::new(Transport::Udp, true, 4)), 20 * 1400 + 7, 1400, TcpFlags::empty()),
        ("csum only", tcp_flow(false, 5), 1000, MSS as u16, TcpFlags::PSH),
    ];
    for (name, mut flow, payload, gso, flags) in cases {
        let (hdr, frame) = superpacket(&mut flow, payload, gso, flags);
        let k_eth = eth.segment_detailed(&hdr, &frame).unwrap();
        // The same header with offsets from the IP header (NEEDS_CSUM is set on all of these).
        let ip_hdr = VirtioNetHdr { csum_start: hdr.csum_start - 14, hdr_len: hdr.hdr_len.saturating_sub(14), ..hdr };
        let k_ip = ip.segment_detailed(&ip_hdr, &frame[14..]).unwrap();
        eprintln!(
            "GSO raw IP {name}: {} segments {:?}, hdr[0] {:?}, pkttype {:?}",
            k_ip.len(),
            k_ip.iter().map(|d| d.frame.len()).collect::<Vec<_>>(),
            k_ip[0].hdr,
            k_ip[0].pkttype
        );
        assert_eq!(k_ip.len(), k_eth.len(), "{name}: segment count");
        for (i, (a, b)) in k_eth.iter().zip(&k_ip).enumerate() {
            assert_eq!(a.frame[14..], b.frame[..], "{name}: segment {i} bytes");
            assert_eq!(shifted(&a.hdr), without_hdr_len(&b.hdr), "{name}: segment {i} header");
            validate_ip(&b.hdr, &b.frame);
        }
    }
    // A header the kernel refuses is refused on the TUN too.
    let (mut hdr, frame) = superpacket(&mut tcp_flow(false, 9), 4 * MSS, MSS as u16, TcpFlags::empty());
    hdr.csum_offset = 6;
    hdr.csum_start -= 14;
    hdr.hdr_len -= 14;
    let err = ip.segment(&hdr, &frame[14..]).unwrap_err();
    eprintln!("raw IP refused: {err}");
    assert!(err.to_string().contains("sendmsg"), "{err}");
    eprintln!("stats: eth {:?} ip {:?}", eth.stats(), ip.stats());
}

/// `IFF_NAPI_FRAGS` is for TAPs only: the TUN oracle cannot be opened so.
#[test]
fn gro_raw_ip_napi_frags_is_refused() {
    if !require_privileges() {
        return;
    }
    let cfg = GroOracleConfig { medium: Medium::Ip, napi_frags: true, ..GroOracleConfig::default() };
    let err = GroOracle::with_config(cfg).unwrap_err();
    eprintln!("TUN with IFF_NAPI_FRAGS: {err}");
    assert!(err.to_string().contains("TUNSETIFF"), "{err}");
}
