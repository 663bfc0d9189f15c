//! UDP GRO (offload-rules 2): segment ("forwarding", UDP_L4) and fraglist
//! modes, `udp_gro_receive_segment` merge rules and completion (2.4).

use super::counters::{BypassReason, FlushReason};
use super::flow::Held;
use super::ip;
use super::tcp::{csum_kind, unnecessary};
use super::{Encap, GroConfig, Incoming};
use crate::packet::{ChecksumState, GsoType, Packet};
use crate::wire::field::be16;

/// Largest number of datagrams in one UDP aggregate (`UDP_GRO_CNT_MAX`).
pub const UDP_GRO_CNT_MAX: u32 = 64;

/// Entry checks that deliver the datagram normally without touching any held
/// aggregate (offload-rules 2.3): a zero checksum, a UDP length of 8 or less,
/// or one that disagrees with the bytes present.
#[inline]
pub fn check_entry(n_pkt: &Packet, n: &Incoming) -> Result<(), BypassReason> {
    let uh = &n_pkt.linear()[n.l4..];
    if uh[6] == 0 && uh[7] == 0 {
        return Err(BypassReason::UdpZeroChecksum);
    }
    let ulen = be16(uh, 4) as usize;
    if ulen != n.l3_len - (n.l4 - n.l3) || n.padded_strict {
        return Err(if n.padded_strict { BypassReason::Padding } else { BypassReason::UdpLength });
    }
    if ulen <= 8 {
        return Err(BypassReason::ZeroPayload);
    }
    Ok(())
}

/// What to do with a datagram whose flow has an aggregate `p`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpDecision {
    /// Merge; then flush `p` if the datagram was shorter than the first or the
    /// count limit is reached. Carries the fixed-ID latch.
    Merge {
        /// Set the IPv4 fixed-ID latch.
        latch: bool,
        /// Set a tunnel aggregate's outer fixed-ID latch (offload-rules 2.6).
        outer_latch: bool,
    },
    /// Flush `p`, then hold the datagram as a new aggregate (unless it carries
    /// a flush mark, then deliver it normally).
    FlushAndHold(FlushReason),
    /// Fraglist with a different checksum state: deliver the datagram
    /// normally, keep `p`.
    Bypass(BypassReason),
}

/// The `udp_gro_receive_segment` decision for a datagram of the same flow
/// (offload-rules 2.3).
#[inline]
pub fn decide(p: &Held, n_pkt: &Packet, n: &Incoming, cfg: &GroConfig, e: &impl Encap) -> UdpDecision {
    let nl = n_pkt.linear();
    let ulen = be16(nl, n.l4 + 4);
    let net = ip::network_flush(p, nl, n.l3, cfg).and_then(|latch| Ok((latch, e.outer_flush(p, nl, cfg)?)));
    if ulen > p.ulen {
        return UdpDecision::FlushAndHold(FlushReason::SegmentSize);
    }
    let (latch, outer_latch) = match net {
        Ok(l) => l,
        Err(r) => return UdpDecision::FlushAndHold(r),
    };
    if p.fraglist && csum_kind(p.pkt.meta.csum) != csum_kind(n_pkt.meta.csum) {
        return UdpDecision::Bypass(BypassReason::Mode);
    }
    // The append fails on a flush mark or the size limit: p is flushed and the
    // datagram is then held (or delivered, if flush-marked).
    if n.flush_mark {
        return UdpDecision::FlushAndHold(FlushReason::Mismatch);
    }
    if p.l3_len + n.payload_len >= cfg.max_size {
        return UdpDecision::FlushAndHold(FlushReason::SizeLimit);
    }
    UdpDecision::Merge { latch, outer_latch }
}

/// Completes a merged UDP aggregate (offload-rules 2.4): UDP length = total;
/// segment mode: checksum field = pseudo-header sum, CHECKSUM_PARTIAL,
/// UDP_L4; fraglist: FRAGLIST | UDP_L4, CHECKSUM_UNNECESSARY.
pub fn complete(held: &mut Held) {
    complete_on::<false>(held)
}

/// [`complete`], one copy per path (see [`super::parse::GroHeaders::parse_on`]).
pub fn complete_on<const TUNNEL: bool>(held: &mut Held) {
    let (l3, l4, v6) = (held.l3, held.l4, held.v6);
    let l3_len = held.l3_len;
    let l4_len = l3_len - (l4 - l3);
    let mut meta = held.pkt.meta;
    meta.gso_size = held.mss;
    meta.gso_segs = held.count.min(u16::MAX as u32) as u16;
    let lin = held.pkt.linear_mut();
    ip::set_l3_len(lin, l3, v6, l3_len);
    lin[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    if held.fraglist {
        meta.gso_type |= GsoType::FRAGLIST | GsoType::UDP_L4;
        meta.csum = unnecessary(meta.csum);
    } else {
        // The checksum is non-zero (zero-checksum datagrams never merge).
        let pseudo = ip::pseudo_sum(lin, l3, v6, 17, l4_len);
        lin[l4 + 6..l4 + 8].copy_from_slice(&pseudo.to_be_bytes());
        meta.gso_type |= GsoType::UDP_L4;
        meta.csum = ChecksumState::Partial { start: l4 as u16, offset: 6 };
    }
    held.pkt.meta = meta;
}
