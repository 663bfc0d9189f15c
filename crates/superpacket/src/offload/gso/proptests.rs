//! Property tests (offload-rules 9.3): for random superpackets (family,
//! VLAN depth, IPv6 extension headers, payload and gso_size, payload layout
//! across segments and the frag list, target capabilities) the segments
//! validate, fit the MTU, carry the payload in order, and equal the frames
//! built one by one; and a stream of frames merged "as GRO would" comes back
//! unchanged except where the spec allows.

use super::tests::{
    Chain, Fam, assert_valid, completed, expected, fraglist_aggregate, fragment_payload, run, with_ipv6_ext,
};
use super::*;
use crate::packet::GsoType;
use crate::traffic::{Flow, payload_byte};
use crate::wire::{FrameHeaders, TcpFlags};
use proptest::prelude::*;

fn fam() -> impl Strategy<Value = Fam> {
    prop_oneof![Just(Fam::Tcp4), Just(Fam::Tcp6), Just(Fam::Udp4), Just(Fam::Udp6)]
}

fn csum_caps() -> impl Strategy<Value = CsumCaps> {
    prop_oneof![Just(CsumCaps::NONE), Just(CsumCaps::IP), Just(CsumCaps::HW)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn segments_validate_and_reassemble(
        fam in fam(),
        vlans in 0usize..=2,
        ext in any::<bool>(),
        payload in 2usize..30000,
        gso_frac in 0.0f64..1.0,
        sg in any::<bool>(),
        csum in csum_caps(),
        slack in 0usize..64,
        cuts in proptest::collection::vec(1usize..30000, 0..6),
        frag_at in proptest::option::of(1usize..30000),
        flags in 0u16..0x100,
    ) {
        let spec = fam.spec(vlans);
        let gso = ((payload - 1) as f64 * gso_frac) as usize + 1; // 1..payload-1
        prop_assume!(gso < payload);
        let segs = payload.div_ceil(gso);
        prop_assume!(fam.is_tcp() || segs <= UDP_MAX_SEGMENTS as usize);
        let mut flags = TcpFlags::from_bits_truncate(flags);
        flags.remove(TcpFlags::SYN | TcpFlags::RST);
        let mut pkt = superpacket_of(spec, payload, gso, flags);
        let v6 = matches!(fam, Fam::Tcp6 | Fam::Udp6);
        let ext = ext && v6;
        if ext {
            pkt = with_ipv6_ext(&pkt);
        }
        let hl = spec.header_len() + if ext { 8 } else { 0 };
        let pkt = fragment_payload(&pkt, hl, &cuts, frag_at.filter(|&f| f < payload));
        let mtu = hl - (14 + 4 * vlans) + gso + slack;
        let mut caps = TargetCaps::new(mtu).with_csum(csum);
        caps.sg = sg;
        let (r, frames) = run(&pkt, &caps);
        prop_assert_eq!(r, Ok(GsoOutcome::Segmented {
            segments: segs,
            csum_completed: !(csum.hw || (csum == CsumCaps::IP && vlans < 2 && !ext)),
        }));
        assert_valid(&frames, mtu);
        // Payload in order.
        let mut off = 0u64;
        for f in &frames {
            let h = FrameHeaders::parse(&f.data).unwrap();
            for &b in h.payload_bytes(&f.data) {
                prop_assert_eq!(b, payload_byte(off));
                off += 1;
            }
        }
        prop_assert_eq!(off as usize, payload);
        if !ext {
            prop_assert_eq!(completed(&frames), expected(spec, payload, gso, flags, false));
        }
        // An MTU one byte short is refused.
        let short = TargetCaps { mtu: mtu - slack - 1, ..caps };
        let is_mtu_error = matches!(run(&pkt, &short).0, Err(GsoError::SegmentExceedsMtu { .. }));
        prop_assert!(is_mtu_error);
    }

    /// GRO -> GSO round trip (offload-rules 9.3): an in-order run of frames
    /// of one flow, merged as GRO merges it (the "as merged" superpacket of
    /// [`Flow::superpacket`], its payload spread over segments and the frag
    /// list as an aggregate's is), segmented with the same gso_size, gives the
    /// original frames back: only PSH/FIN (last only) and CWR (first only)
    /// may differ, and IDs/checksums are regenerated, which for incrementing
    /// IDs gives identical bytes.
    #[test]
    fn gro_gso_round_trip(
        fam in fam(),
        vlans in 0usize..=2,
        mss in 200usize..1500,
        count in 2usize..40,
        last in 1usize..1500,
        psh_last in any::<bool>(),
        sg in any::<bool>(),
    ) {
        let spec = fam.spec(vlans);
        let last = last.min(mss);
        let payload = mss * (count - 1) + last;
        // The original frames, as a sender would put them on the wire.
        let mut f = Flow::new(spec);
        let flags_last = if psh_last && fam.is_tcp() { TcpFlags::PSH } else { TcpFlags::empty() };
        let originals: Vec<Vec<u8>> = (0..count)
            .map(|i| {
                let (len, fl) = if i + 1 == count { (last, flags_last) } else { (mss, TcpFlags::empty()) };
                f.frame(len, fl).unwrap()
            })
            .collect();
        // Merged as GRO merges them: first frame's headers, one segment per
        // original payload (at most 17), the rest on the frag list.
        let merged = superpacket_of(spec, payload, mss, flags_last);
        let hl = spec.header_len();
        let cuts: Vec<usize> = (1..count.min(17)).map(|i| i * mss).collect();
        let frag_at = (count > 17).then_some(17 * mss);
        let agg = fragment_payload(&merged, hl, &cuts, frag_at);
        splits_into_originals(&agg, sg, &originals)?;
    }

    /// Fraglist aggregates split back into exactly their packets.
    #[test]
    fn fraglist_round_trip(
        fam in fam(),
        vlans in 0usize..=2,
        mss in 1usize..1400,
        count in 2usize..30,
        last in 1usize..1400,
        chain in prop_oneof![Just(Chain::Pulled), Just(Chain::Whole), Just(Chain::L3)],
        sg in any::<bool>(),
    ) {
        let spec = fam.spec(vlans);
        let mut f = Flow::new(spec);
        let originals: Vec<Vec<u8>> =
            (0..count).map(|i| f.frame(if i + 1 == count { last.min(mss) } else { mss }, TcpFlags::empty()).unwrap()).collect();
        let agg = fraglist_aggregate(&originals, chain);
        splits_into_originals(&agg, sg, &originals)?;
    }
}

/// Segments `agg` for a 9000-byte MTU target (with scatter-gather if `sg`):
/// it must succeed, give valid frames, and give exactly `originals`.
fn splits_into_originals(agg: &crate::packet::Packet, sg: bool, originals: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let caps = if sg { TargetCaps::new(9000).with_sg() } else { TargetCaps::new(9000) };
    let (r, frames) = run(agg, &caps);
    prop_assert!(r.is_ok());
    assert_valid(&frames, 9000);
    let got: Vec<Vec<u8>> = frames.into_iter().map(|f| f.data).collect();
    prop_assert_eq!(got, originals);
    Ok(())
}

fn superpacket_of(
    spec: crate::traffic::FlowSpec,
    payload: usize,
    gso: usize,
    flags: TcpFlags,
) -> crate::packet::Packet {
    let p = Flow::new(spec).superpacket(payload, gso as u16, flags).unwrap();
    assert!(p.meta.gso_type.intersects(GsoType::TCPV4 | GsoType::TCPV6 | GsoType::UDP_L4));
    p
}
