//! GRO -> GSO round trip with the real engines (offload-rules 9.3): any
//! in-order stream that [`superpacket::offload::gro`] merged, segmented by
//! [`superpacket::offload::gso`] with the same gso_size for a target without
//! offloads, gives the original frames back. The spec allows PSH/FIN on the
//! last segment only, CWR on the first only, regenerated IPv4 IDs and
//! recomputed checksums; the streams here (PSH only on the last frame,
//! incrementing IDs, valid checksums) make every allowed difference vanish,
//! so the comparison is byte for byte. Covers TCPv4/TCPv6 (segment and
//! fraglist GRO), UDP forwarding GRO (USO) and UDP fraglist GRO, with 0, 1 or
//! 2 VLAN tags, scatter-gather and linear output.

use proptest::prelude::*;
use superpacket::offload::gro::{Gro, GroConfig, UdpGroMode};
use superpacket::offload::gso::{Segmenter, TargetCaps, VecSink};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;

fn round_trip(originals: &[Vec<u8>], cfg: GroConfig, sg: bool) -> (Vec<Vec<u8>>, usize) {
    let mut gro = Gro::new(cfg);
    for f in originals {
        gro.receive_frame(f);
    }
    gro.flush();
    let delivered: Vec<_> = gro.drain_delivered().collect();
    let caps = if sg { TargetCaps::new(9000).with_sg() } else { TargetCaps::new(9000) };
    let mut seg = Segmenter::new();
    let mut sink = VecSink::new();
    let mut superpackets = 0;
    for p in &delivered {
        superpackets += usize::from(p.meta.is_gso());
        seg.segment(p, &caps, &mut sink).unwrap_or_else(|e| panic!("GSO refused a GRO aggregate ({:?}): {e}", p.meta));
    }
    let frames: Vec<Vec<u8>> = sink.frames.into_iter().map(|f| f.data).collect();
    for f in &frames {
        let mut problems = Vec::new();
        validate_frame(f, Medium::Ethernet, &Default::default(), false, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }
    (frames, superpackets)
}

fn stream(spec: FlowSpec, mss: usize, count: usize, last: usize, psh_last: bool) -> Vec<Vec<u8>> {
    let mut f = Flow::new(spec);
    (0..count)
        .map(|i| {
            let end = i + 1 == count;
            let flags = if end && psh_last { TcpFlags::PSH } else { TcpFlags::empty() };
            f.frame(if end { last } else { mss }, flags).unwrap()
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Mode {
    Segment,
    Fraglist,
}

fn config(transport: Transport, mode: Mode) -> GroConfig {
    match (transport, mode) {
        (Transport::Tcp, Mode::Segment) => GroConfig::default(),
        (Transport::Tcp, Mode::Fraglist) => GroConfig { tcp_fraglist: true, ..GroConfig::default() },
        (Transport::Udp, Mode::Segment) => GroConfig { udp: UdpGroMode::Forward, ..GroConfig::default() },
        (Transport::Udp, Mode::Fraglist) => GroConfig { udp: UdpGroMode::Fraglist, ..GroConfig::default() },
    }
}

#[test]
fn a_merged_stream_comes_back_unchanged() {
    for transport in [Transport::Tcp, Transport::Udp] {
        for v6 in [false, true] {
            for mode in [Mode::Segment, Mode::Fraglist] {
                let spec = FlowSpec::new(transport, v6, 5);
                let originals = stream(spec, 1400, 30, 333, transport == Transport::Tcp);
                for sg in [false, true] {
                    let (frames, supers) = round_trip(&originals, config(transport, mode), sg);
                    assert!(supers >= 1, "{transport:?} v6 {v6} {mode:?}: GRO merged nothing");
                    assert_eq!(frames, originals, "{transport:?} v6 {v6} {mode:?} sg {sg}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn gro_then_gso_is_the_identity(
        tcp in any::<bool>(),
        v6 in any::<bool>(),
        vlans in 0usize..=2,
        fraglist in any::<bool>(),
        mss in 100usize..1400,
        count in 1usize..80,
        last in 1usize..1400,
        psh_last in any::<bool>(),
        sg in any::<bool>(),
    ) {
        let transport = if tcp { Transport::Tcp } else { Transport::Udp };
        let tags: &[(u16, u16)] = match vlans {
            0 => &[],
            1 => &[(0x8100, 7)],
            _ => &[(0x88A8, 7), (0x8100, 8)],
        };
        let spec = FlowSpec::new(transport, v6, 6).with_vlans(tags).unwrap();
        let originals = stream(spec, mss, count, last.min(mss), psh_last && tcp);
        let mode = if fraglist { Mode::Fraglist } else { Mode::Segment };
        let (frames, _) = round_trip(&originals, config(transport, mode), sg);
        prop_assert_eq!(frames, originals);
    }
}
