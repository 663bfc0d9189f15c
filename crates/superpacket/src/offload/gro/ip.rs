//! IPv4 / IPv6 layer of GRO: early rejection (offload-rules 1.2), the
//! network-header flush rules shared by TCP and UDP (offload-rules 1.3 (b),
//! `gro_receive_network_flush`) with the IPv4 ID latch, and the length
//! rewrite of a completed aggregate (offload-rules 1.4).

use super::counters::{BypassReason, FlushReason};
use super::flow::Held;
use super::parse::GroHeaders;
use super::{FixedIdRule, GroConfig};
use crate::csum;
use crate::wire::field::{be16, ne32};

/// IPv4 flag bits in the 16-bit flags/fragment-offset word.
const IPV4_DF: u8 = 0x40;
/// The reserved ("evil") IPv4 flag bit.
const IPV4_RESERVED: u8 = 0x80;

/// Extension headers GRO skips (offload-rules 1.2: those flagged GSO-capable:
/// hop-by-hop, routing, destination options). A Fragment header (44) or
/// anything else has no GRO handler.
const fn skippable_ext(nh: u8) -> bool {
    matches!(nh, 0 | 43 | 60)
}

/// The IPv4 header checksum over 20 bytes verifies (`ip_fast_csum`).
#[inline(always)]
pub fn ipv4_header_ok(hdr: &[u8]) -> bool {
    // Five native-order 32-bit words: a ones' complement sum is byte-order
    // independent as long as the fold is (RFC 1071 2(B)); all-ones either way.
    let Some(hdr) = hdr.first_chunk::<20>() else {
        return false;
    };
    let w = |i: usize| ne32(hdr, i) as u64;
    sum_is_all_ones(w(0) + w(4) + w(8) + w(12) + w(16))
}

/// `csum::fold64(acc) == 0xFFFF`, without the fold: folding (end-around
/// carries) keeps a sum's value modulo 0xFFFF (2^16 and 2^32 are 1 modulo
/// 0xFFFF) and keeps a non-zero sum non-zero, ending in 1..=0xFFFF, so it
/// ends in 0xFFFF exactly when the sum is a non-zero multiple of 0xFFFF.
///
/// That is tested with one multiply by the inverse of 0xFFFF modulo 2^64
/// (0xFFFF is odd): the product is at most `u64::MAX / 0xFFFF` exactly for
/// the multiples of 0xFFFF, whose quotient it then is (Granlund and
/// Montgomery, "Division by invariant integers using multiplication", 9),
/// and it is zero only for zero, which the subtraction of one wraps past
/// the bound: 5 instructions fewer per IPv4 header than
/// `acc != 0 && acc % 0xFFFF == 0`, for which the compiler computes the
/// remainder (docs/benchmarks.md, "One VXLAN flow: fewer checks").
#[inline(always)]
fn sum_is_all_ones(acc: u64) -> bool {
    /// The inverse of 0xFFFF modulo 2^64.
    const INVERSE: u64 = 0xFFFE_FFFE_FFFE_FFFF;
    const _: () = assert!(INVERSE.wrapping_mul(0xFFFF) == 1);
    acc.wrapping_mul(INVERSE).wrapping_sub(1) < u64::MAX / 0xFFFF
}

/// Outcome of the IP-layer entry checks for an accepted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L3Checks {
    /// The packet must not be merged but still reaches L4, where a matching
    /// aggregate is flushed (IPv4 reserved flag; offload-rules 1.2).
    pub flush_mark: bool,
}

/// Early rejection at the IP layer (offload-rules 1.2): IPv4 with options,
/// fragments, a bad IPv4 header checksum, IPv6 fragments and extension
/// headers without a GRO handler. A rejected packet is delivered normally
/// and no held aggregate is touched.
#[inline]
pub fn check_l3(frame: &[u8], h: &GroHeaders) -> Result<L3Checks, BypassReason> {
    check_l3_on::<false>(frame, h)
}

/// [`check_l3`], one copy per path (see [`GroHeaders::parse_on`]).
#[inline]
pub fn check_l3_on<const TUNNEL: bool>(frame: &[u8], h: &GroHeaders) -> Result<L3Checks, BypassReason> {
    let ip = &frame[h.l3..];
    let v6 = h.v6;
    if !v6 {
        if ip[0] != 0x45 {
            return Err(BypassReason::IpOptions);
        }
        if h.is_fragment {
            return Err(BypassReason::Fragment);
        }
        if !ipv4_header_ok(ip) {
            return Err(BypassReason::BadIpChecksum);
        }
        return Ok(L3Checks { flush_mark: ip[6] & IPV4_RESERVED != 0 });
    }
    if h.has_fragment_header {
        return Err(BypassReason::Fragment);
    }
    if h.l3_header_len > 40 {
        // Walk the chain: only HBH / routing / destination options may come
        // before the upper-layer header.
        let mut nh = ip[6];
        let mut at = 40;
        while at < h.l3_header_len {
            if !skippable_ext(nh) {
                return Err(BypassReason::Ipv6Ext);
            }
            nh = ip[at];
            at += (ip[at + 1] as usize + 1) * 8;
        }
    }
    Ok(L3Checks { flush_mark: false })
}

/// The network-header flush rules between the aggregate's first header and
/// the new packet's (offload-rules 1.3 (b)): IPv4 TTL, TOS (ECN included) and
/// DF must be equal and the ID must increment by one per segment or stay
/// fixed (latched at the second packet); IPv6 traffic class and hop limit
/// must be equal.
///
/// Returns whether the fixed-ID latch is to be set (the caller applies it when
/// it merges), or [`FlushReason::Mismatch`].
#[inline(always)]
pub fn network_flush(p: &Held, n_frame: &[u8], n_l3: usize, cfg: &GroConfig) -> Result<bool, FlushReason> {
    header_flush(&p.first.ip, p.v6, p.fixed_id, p.count, n_frame, n_l3, cfg)
}

/// [`network_flush`] for one header level: `a` is the aggregate's first
/// header (its first 20 bytes), `v6` its version, `fixed` that level's
/// fixed-ID latch and `count` the segments held; the new packet's header is
/// at `n_l3` of `n_frame`. Tunnel aggregates check their outer header with it
/// too, with the outer latch (offload-rules 2.6).
#[inline(always)]
pub fn header_flush(
    a: &[u8; 20],
    v6: bool,
    fixed: bool,
    count: u32,
    n_frame: &[u8],
    n_l3: usize,
    cfg: &GroConfig,
) -> Result<bool, FlushReason> {
    // The new packet's header was parsed whole (IPv4: 20 bytes, IPv6: 40),
    // so this fixed-size view holds and every byte below is read unchecked;
    // the aggregate's side is its first packet's copy.
    let Some(b) = n_frame.get(n_l3..).and_then(|ip| ip.first_chunk::<20>()) else {
        return Err(FlushReason::Mismatch);
    };
    if v6 {
        // Traffic class spans bytes 0-1 (mask 0x0FF0_0000 of the first word).
        let tc_differs = ((a[0] ^ b[0]) & 0x0F) != 0 || ((a[1] ^ b[1]) & 0xF0) != 0;
        if tc_differs || a[7] != b[7] {
            return Err(FlushReason::Mismatch);
        }
        return Ok(false);
    }
    // TTL, TOS, DF.
    if a[8] != b[8] || a[1] != b[1] || ((a[6] ^ b[6]) & IPV4_DF) != 0 {
        return Err(FlushReason::Mismatch);
    }
    id_rule(a, fixed, count, b, cfg)
}

/// The IPv4 ID rule of [`header_flush`] alone (offload-rules 1.3 (b)): the
/// new header `b`'s ID increments by one per segment from the aggregate's
/// first header `a`, or stays fixed (latched at the second packet; `fixed`:
/// latched already). For a packet whose TTL, TOS and DF are known equal to
/// the first packet's. Returns whether the latch is to be set.
#[inline(always)]
pub fn id_rule(a: &[u8; 20], fixed: bool, count: u32, b: &[u8; 20], cfg: &GroConfig) -> Result<bool, FlushReason> {
    let id_p = be16(a, 4);
    let id_n = be16(b, 4);
    let off = id_n.wrapping_sub(id_p);
    // The usual case, an ID one further per segment held and no latch, is
    // decided before `cfg` and the latch are read: the test below gives
    // the same (`off == count` excludes the latch, which needs `off == 0`
    // with `count == 1`). Decided by the lines below, this case cost a
    // merged VXLAN packet (both IP levels) about 15 instructions more, a
    // plain one 8 (docs/benchmarks.md, "One VXLAN flow: the ID rule
    // first").
    if !fixed && off == count as u16 {
        return Ok(false);
    }
    let df = b[6] & IPV4_DF != 0;
    let may_latch = match cfg.fixed_id {
        FixedIdRule::Current => true,
        FixedIdRule::Legacy => df,
    };
    let latch = count == 1 && off == 0 && may_latch;
    let fixed = fixed || latch;
    let ok = if fixed { off == 0 } else { off == count as u16 };
    if ok { Ok(latch) } else { Err(FlushReason::Mismatch) }
}

/// Rewrites the IP length of a completed aggregate: IPv4 total length with an
/// incremental header-checksum update, IPv6 payload length.
#[inline(always)]
pub fn set_l3_len(frame: &mut [u8], l3: usize, v6: bool, l3_len: usize) {
    let ip = &mut frame[l3..];
    if v6 {
        let payload = (l3_len - 40) as u16;
        ip[4..6].copy_from_slice(&payload.to_be_bytes());
    } else {
        let old = be16(ip, 2);
        let new = l3_len as u16;
        let check = be16(ip, 10);
        ip[2..4].copy_from_slice(&new.to_be_bytes());
        ip[10..12].copy_from_slice(&csum::update_u16(check, old, new).to_be_bytes());
    }
}

/// Pseudo-header sum for an L4 length, from the IP header at `l3`.
#[inline(always)]
pub fn pseudo_sum(frame: &[u8], l3: usize, v6: bool, protocol: u8, l4_len: usize) -> u16 {
    let ip = &frame[l3..];
    if v6 {
        let src: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
        let dst: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
        csum::pseudo_header_v6(src, dst, protocol, l4_len as u32)
    } else {
        let src: [u8; 4] = ip[12..16].try_into().expect("4 bytes");
        let dst: [u8; 4] = ip[16..20].try_into().expect("4 bytes");
        csum::pseudo_header_v4(src, dst, protocol, l4_len as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The sums five 32-bit words can make, at the edges: zero, the
    /// multiples of 0xFFFF and their neighbours, the largest.
    #[test]
    fn all_ones_test_agrees_with_the_fold_at_the_edges() {
        let max = 5 * u64::from(u32::MAX);
        let mut sums = vec![0, 1, max - 1, max];
        for k in [1u64, 2, 3, 0x1_0001, 0x2_0002, max / 0xFFFF] {
            sums.extend([k * 0xFFFF - 1, k * 0xFFFF, k * 0xFFFF + 1]);
        }
        for acc in sums {
            assert_eq!(sum_is_all_ones(acc), csum::fold64(acc) == 0xFFFF, "{acc:#x}");
        }
    }

    /// The ID rule (offload-rules 1.3 (b)) as stated: the latch is set at
    /// the second segment (`count == 1`) for an unchanged ID (with DF under
    /// the legacy rule); a latched aggregate wants the ID unchanged, any
    /// other one the first ID plus the segments held.
    fn id_rule_as_stated(off: u16, fixed: bool, count: u32, df: bool, rule: FixedIdRule) -> Result<bool, FlushReason> {
        let latch = count == 1 && off == 0 && (rule == FixedIdRule::Current || df);
        let ok = if fixed || latch { off == 0 } else { off == count as u16 };
        if ok { Ok(latch) } else { Err(FlushReason::Mismatch) }
    }

    /// `id_rule`, its usual case decided first included, against the rule
    /// as stated: every latch state, both config rules, DF or not, segment
    /// counts at the start, in the middle and where the 16-bit ID wraps,
    /// first IDs at the edges and offsets around each count.
    #[test]
    fn id_rule_decides_as_stated() {
        for rule in [FixedIdRule::Current, FixedIdRule::Legacy] {
            let cfg = GroConfig { fixed_id: rule, ..GroConfig::default() };
            for count in [0u32, 1, 2, 3, 44, 0xFFFF, 0x1_0000, 0x1_0001] {
                for id_p in [0u16, 1, 0x1234, 0xFFFE, 0xFFFF] {
                    for delta in [0u16, 1, 2, 0xFFFF, 0x8000] {
                        let off = (count as u16).wrapping_add(delta);
                        for off in [off, 0, 1] {
                            for (fixed, df) in [(false, false), (false, true), (true, false), (true, true)] {
                                let mut a = [0u8; 20];
                                let mut b = [0u8; 20];
                                a[4..6].copy_from_slice(&id_p.to_be_bytes());
                                b[4..6].copy_from_slice(&id_p.wrapping_add(off).to_be_bytes());
                                b[6] = if df { IPV4_DF } else { 0 };
                                assert_eq!(
                                    id_rule(&a, fixed, count, &b, &cfg),
                                    id_rule_as_stated(off, fixed, count, df, rule),
                                    "{rule:?} count {count} first ID {id_p} offset {off} fixed {fixed} DF {df}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

        /// Any sum of five 32-bit words, and any 20 bytes as a header: the
        /// divisibility test says what the fold says.
        #[test]
        fn all_ones_test_agrees_with_the_fold(acc in 0..=5 * u64::from(u32::MAX), hdr in any::<[u8; 20]>(), fix in any::<bool>()) {
            prop_assert_eq!(sum_is_all_ones(acc), csum::fold64(acc) == 0xFFFF);
            let mut hdr = hdr;
            if fix {
                // A header with its checksum set right.
                hdr[10..12].fill(0);
                let c = !csum::fold64((0..5).map(|i| u64::from(ne32(&hdr, 4 * i))).sum());
                hdr[10..12].copy_from_slice(&c.to_ne_bytes());
            }
            let fold = csum::fold64((0..5).map(|i| u64::from(ne32(&hdr, 4 * i))).sum()) == 0xFFFF;
            prop_assert_eq!(ipv4_header_ok(&hdr), fold);
            if fix {
                prop_assert!(ipv4_header_ok(&hdr));
            }
        }
    }
}
