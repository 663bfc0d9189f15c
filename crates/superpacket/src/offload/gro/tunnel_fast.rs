//! The tunnel fast path (offload-rules 2.6): a TCP segment inside VXLAN or
//! Geneve that joins the aggregate its flow went to last, decided before
//! any parse by one masked compare of its outer and inner headers against
//! that aggregate's first packet's ([`Template`]). The full path
//! (`Gro::prepare`, then `Gro::tunnel_one`) stays the reference for
//! everything else, and for every packet this path leaves.
//!
//! [`Template`]: super::template::Template

use super::counters::FlushReason;
use super::flow::Position;
use super::parse::GroHeaders;
use super::{Gro, Incoming, hint, ip, tcp, tunnel};
use crate::packet::Packet;
use crate::wire::field::be16;

impl Gro {
    /// The fast path of a TCP tunnel packet (its [`tunnel_hint`] `hint`,
    /// receive hash `hash` as [`Gro::gro_one`] takes it) that merges into
    /// its flow's aggregate.
    /// Entered before the plain path's parse: the packet's [`tunnel_hint`]
    /// names the aggregate its flow went to last ([`hint::SlotHints`]); if
    /// the packet's masked headers equal that aggregate's first packet's
    /// (its [`Shape`] template: the same flow identity at every level,
    /// 2.6, hence the same offsets, the same tunnel port and so the same
    /// tunnel kind, the same VLAN tags, no fragment and no reserved flag at
    /// either IPv4 level, and the same values in the fields rules 1.3 (b),
    /// (c), (d) want equal) and that aggregate is held in the bucket the full
    /// path's hash picks, it is the aggregate [`FlowTable::find_tunnel`]
    /// finds (a flow has at most one per bucket). What the template does not
    /// settle is checked as the full path checks it: at the outer level the
    /// IP length ending the frame (no padding, which the full path trims or
    /// flush-marks), the UDP length ending the IP packet, the IPv4 header
    /// checksum and the outer UDP checksum being zero or not as the
    /// aggregate's (1.2, 2.6); at the inner level the IP length ending the
    /// UDP payload (no inner padding), some TCP payload and the IPv4 header
    /// checksum; then the merge rules left at both levels
    /// ([`tcp::same_headers_before_append`]: size, both IPv4 ID rules,
    /// sequence; and the append, whose size limit alone restarts the
    /// aggregate, [`Gro::restart_tunnel`]) and last the checksums
    /// ([`Gro::verify_tunnel`]), which the full path verifies first: a
    /// packet the rules refuse is left to it unverified, and one they take
    /// is merged or restarts the aggregate only once its checksums verify,
    /// so the order decides nothing.
    ///
    /// Returns whether it dealt with the packet (merged, held as the next
    /// aggregate after the size limit, or delivered for a bad checksum, as
    /// the full path would before its lookup); if not, nothing has changed
    /// and the full path decides.
    ///
    /// The usual layout, VXLAN in an untagged Ethernet frame with IPv4
    /// headers without options at both levels, has a copy of its own with
    /// the offsets as constants ([`TunnelLayout::VXLAN_IPV4`]), as the plain
    /// fast path has for its usual layout: its header reads need no bounds
    /// check of their own (about 30 instructions per packet less for one
    /// VXLAN flow, docs/benchmarks.md "VXLAN rows").
    ///
    /// Plain packets pay only the test before it in [`Gro::gro_one`] (a TCP
    /// segment has a plain hint, and nothing is tried without a tunnel
    /// port). Inlined there: out of line, the call and the register saves
    /// cost a tunnel packet 30 instructions, and plain GRO's counts are the
    /// same or lower either way (docs/benchmarks.md, "VXLAN rows").
    ///
    /// [`tunnel_hint`]: hint::tunnel_hint
    /// [`Shape`]: super::template::Shape
    /// [`FlowTable::find_tunnel`]: super::flow::FlowTable::find_tunnel
    #[inline(always)]
    pub(super) fn tunnel_fast(&mut self, pkt: &mut Packet, hint: hint::Hint, hash: Option<u32>) -> bool {
        // (With `tcp_fraglist` no tunnel TCP aggregate is held, 2.6: the
        // hint finds none.)
        if pkt.meta.is_gso() {
            return false;
        }
        let slot = self.tunnel_cache.slot(hint);
        let Some(p) = self.table.slot(slot) else { return false };
        let Some(t) = p.tunnel.as_ref() else { return false };
        // The layout from the shape: an aggregate without a template (no
        // shape) has no fast path anyway, and goes the other way to find so.
        if TunnelLayout::VXLAN_IPV4.is_shape_of(t.shape) {
            self.tunnel_fast_at(pkt, slot, TunnelLayout::VXLAN_IPV4, hint, hash)
        } else {
            self.tunnel_fast_other(pkt, slot, hint, hash)
        }
    }

    /// [`Gro::tunnel_fast_at`] for any other layout (read from the
    /// aggregate in `slot`). Out of line and cold:
    /// a second copy inlined in the burst loop cost plain TCP segments 3 to
    /// 5 instructions each (`gro_instructions 1 peers`), for layouts that
    /// are rare; cold, the usual layout's copy is 11 instructions cheaper
    /// than beside a plain out-of-line one.
    #[cold]
    #[inline(never)]
    fn tunnel_fast_other(&mut self, pkt: &mut Packet, slot: u32, hint: hint::Hint, hash: Option<u32>) -> bool {
        let Some(p) = self.table.slot(slot) else { return false };
        let Some(t) = p.tunnel.as_ref() else { return false };
        let o = TunnelLayout {
            outer_l3: t.outer_l3,
            outer_l4: t.outer_l4,
            outer_v6: t.outer_v6,
            l3: p.l3,
            l4: p.l4,
            v6: p.v6,
        };
        self.tunnel_fast_at(pkt, slot, o, hint, hash)
    }

    /// [`Gro::tunnel_fast`] for the aggregate in `slot` (the one its hint
    /// `hint` names), whose header offsets are `o`.
    #[inline(always)]
    fn tunnel_fast_at(
        &mut self,
        pkt: &mut Packet,
        slot: u32,
        o: TunnelLayout,
        hint: hint::Hint,
        hash: Option<u32>,
    ) -> bool {
        let frame = pkt.linear();
        let Some(p) = self.table.slot(slot) else { return false };
        let Some(t) = p.tunnel.as_ref() else { return false };
        // The template covers the outer ports too, which tell flows apart (a
        // slot the flow lost holds another one's aggregate): comparing them
        // first saved the miss a few instructions and cost every merged
        // packet 14 (docs/benchmarks.md, "One VXLAN flow: fewer checks").
        let held = &p.head.0;
        match self.templates.get(t.shape) {
            Some(template) if template.matches_tunnel(held, frame) => {}
            _ => return false,
        }
        let at = tunnel::OuterAt::held_at(o.outer_l3, o.outer_l4, o.outer_v6, t.kind);
        if !at.entry(frame, t.id.csum) {
            return false;
        }
        let want = hash.or(pkt.meta.rss_hash).unwrap_or(t.identity_hash);
        let Some(found) = self.table.position_in(self.table.bucket_of(want), slot) else { return false };
        // The outer IP packet ends the frame (`entry`).
        let (l3, l4, payload, v6, end) = (o.l3, o.l4, p.payload, o.v6, frame.len());
        let ip = &frame[l3..];
        let l3_len = if v6 { 40 + be16(ip, 4) as usize } else { be16(ip, 2) as usize };
        // (The TCP header ends at the payload, so `end > payload` implies
        // the last test; stated, it bounds the rules' reads of that header,
        // which then need no bounds checks of their own.)
        if l3 + l3_len != end || payload >= end || end < l4 + 20 {
            return false;
        }
        if !v6 && !ip::ipv4_header_ok(ip) {
            return false;
        }
        // The merge rules before the checksums: both only read the packet,
        // and a packet they refuse goes the full way, which verifies its
        // checksums before anything else (as if this path had not been
        // tried). Evaluated here, on the frame and the aggregate already at
        // hand, their reads of known offsets need no bounds checks of their
        // own, and neither is looked up again after the verification.
        let n = Incoming::matched_tcp(l3, l4, payload, l3_len, v6, want);
        let outer = if o.outer_v6 {
            None
        } else {
            let Some(b) = frame.get(o.outer_l3..).and_then(|ip| ip.first_chunk()) else { return false };
            Some((&t.outer_ip, t.outer_fixed_id, b))
        };
        let Some(latches) = tcp::same_headers_before_append(p, frame, &n, &self.cfg, outer) else {
            return false;
        };
        let fits = tcp::append_rule(p, &n, &self.cfg).is_ok();
        let w = tcp::word3(&frame[l4..]);
        if !tunnel::vouched(pkt.meta.csum) {
            let (h, ih) = (at.headers(frame), GroHeaders::tcp(l3, l4, payload, l3_len, v6));
            if let Err(reason) = self.verify_tunnel(pkt, &h, &ih, false, false) {
                self.bypass(pkt, reason);
                return true;
            }
        }
        if !fits {
            self.restart_tunnel(pkt, n, found, hint);
            return true;
        }
        let e = tunnel::OuterLevel { outer_l3: at.l3() };
        self.tcp_merge(pkt, &n, found, latches, w, &e);
        #[cfg(test)]
        {
            self.fast_merges += 1;
        }
        true
    }

    /// What the full path does with a segment `n` of the tunnel aggregate
    /// at `at` that fails only its size limit (offload-rules 1.3 (h) at the
    /// inner level, 2.6; its checksums verified, its tunnel hint `hint`):
    /// the aggregate is flushed ([`FlushReason::SizeLimit`]) and the segment
    /// held as the next one of its flow in the same bucket (`n.hash` picked
    /// it). Its inner key, outer identity, identity hash, tunnel kind and
    /// offsets are the old aggregate's: the template covers every byte they
    /// are built from, and [`tunnel::OuterAt::entry`] checked the outer
    /// checksum's zeroness ([`TunnelId::csum`]). Out of line: once per
    /// 64 KB aggregate, which the full path costs about 1200 instructions
    /// more (both parses, key, identity hash, lookup, merge rules).
    ///
    /// [`TunnelId::csum`]: tunnel::TunnelId::csum
    #[inline(never)]
    fn restart_tunnel(&mut self, pkt: &mut Packet, n: Incoming, at: Position, hint: hint::Hint) {
        let p = self.table.get(at);
        let Some(t) = p.tunnel.as_ref() else { return };
        let tin = tunnel::TunnelIn {
            kind: t.kind,
            outer_v6: t.outer_v6,
            outer_l3: t.outer_l3 as u16,
            outer_l4: t.outer_l4 as u16,
            inner_mac: t.inner_mac as u16,
        };
        let outer =
            tunnel::Outer { t: tin, id: t.id, identity_hash: t.identity_hash, agg_len: n.l3 - t.outer_l3 + n.l3_len };
        let n = Incoming { key: p.key, key_hash: p.key_hash, ..n };
        self.flush_at(at, FlushReason::SizeLimit);
        self.hold(pkt, &n, at.bucket, &outer);
        if let Some(slot) = self.table.newest(at.bucket) {
            self.tunnel_cache.note(hint, slot);
        }
        #[cfg(test)]
        {
            self.tunnel_fast_restarts += 1;
        }
    }
}

/// Where a tunnel aggregate's headers are: the outer IP and UDP headers,
/// the inner IP and TCP ones, and the IP version at each level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TunnelLayout {
    outer_l3: usize,
    outer_l4: usize,
    outer_v6: bool,
    l3: usize,
    l4: usize,
    v6: bool,
}

impl TunnelLayout {
    /// VXLAN in an untagged Ethernet frame with IPv4 headers without
    /// options at both levels (outer Ethernet 14, IPv4 20, UDP 8, VXLAN 8,
    /// inner Ethernet 14, IPv4 20): the usual layout, given a copy of the
    /// fast path with these offsets as constants, so that its header reads
    /// need no bounds check of their own. (An untagged inner Ethernet
    /// header behind a Geneve header without options has the same offsets:
    /// the template's tunnel port tells them apart, and the fast path does
    /// not depend on the kind.)
    const VXLAN_IPV4: TunnelLayout =
        TunnelLayout { outer_l3: 14, outer_l4: 34, outer_v6: false, l3: 64, l4: 84, v6: false };

    /// Whether `shape` is that of a tunnel aggregate with this layout
    /// ([`Shape::is_tunnel_layout`]): its offsets are packed in it.
    ///
    /// [`Shape::is_tunnel_layout`]: super::template::Shape::is_tunnel_layout
    #[inline(always)]
    fn is_shape_of(self, shape: super::template::Shape) -> bool {
        shape.is_tunnel_layout([self.outer_l3, self.outer_l4, self.l3, self.l4], self.outer_v6, self.v6)
    }
}
