//! The tunnel fast path (offload-rules 2.6): a TCP segment inside VXLAN or
//! Geneve that joins the aggregate its flow went to last, decided before
//! any parse by one masked compare of its outer and inner headers against
//! that aggregate's first packet's ([`Template`]). The full path
//! (`Gro::prepare`, then `Gro::tunnel_one`) stays the reference for
//! everything else, and for every packet this path leaves.
//!
//! [`Template`]: super::template::Template

use super::counters::FlushReason;
use super::flow::{FlowKey, FlowTable, Position};
use super::parse::GroHeaders;
use super::{Gro, Incoming, hint, ip, tcp, tunnel};
use crate::packet::Packet;
use crate::wire::Medium;
use crate::wire::field::be16;

impl Gro {
    /// The fast path of a TCP tunnel packet (receive hash `hash` as
    /// [`Gro::gro_one`] takes it) that merges into its flow's aggregate.
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
    pub(super) fn tunnel_fast(&mut self, pkt: &mut Packet, hash: Option<u32>) -> bool {
        // (With `tcp_fraglist` no tunnel TCP aggregate is held, 2.6: the
        // hint finds none.)
        if pkt.meta.is_gso() {
            return false;
        }
        let frame = pkt.linear();
        let Some(hint) = hint::tunnel_hint(frame, self.cfg.medium == Medium::Ip) else { return false };
        let slot = self.tunnel_cache.slot(hint);
        let Some(p) = self.table.slot(slot) else { return false };
        // A free slot has no tunnel state: the flow's last aggregate there
        // may have been delivered (the end of a burst), and its next one
        // may start without the parse ([`Gro::tunnel_start`]).
        let Some(t) = p.tunnel.as_ref() else { return self.tunnel_start(pkt, slot, hint, hash) };
        let o = TunnelLayout {
            outer_l3: t.outer_l3,
            outer_l4: t.outer_l4,
            outer_v6: t.outer_v6,
            l3: p.l3,
            l4: p.l4,
            v6: p.v6,
        };
        if o == TunnelLayout::VXLAN_IPV4 {
            self.tunnel_fast_at(pkt, slot, TunnelLayout::VXLAN_IPV4, hint, hash)
        } else {
            self.tunnel_fast_other(pkt, slot, o, hint, hash)
        }
    }

    /// [`Gro::tunnel_fast_at`] for any other layout. Out of line and cold:
    /// a second copy inlined in the burst loop cost plain TCP segments 3 to
    /// 5 instructions each (`gro_instructions 1 peers`), for layouts that
    /// are rare; cold, the usual layout's copy is 11 instructions cheaper
    /// than beside a plain out-of-line one.
    #[cold]
    #[inline(never)]
    fn tunnel_fast_other(
        &mut self,
        pkt: &mut Packet,
        slot: u32,
        o: TunnelLayout,
        hint: hint::Hint,
        hash: Option<u32>,
    ) -> bool {
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
        let held = p.pkt.linear();
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
        // The checks of `inner_entry`, written out: through the helper
        // (inlined, its layout by value or by reference) the register
        // allocation of this path cost one VXLAN flow 6 instructions per
        // packet (docs/benchmarks.md, "One VXLAN flow: starts after a
        // flush"). The outer IP packet ends the frame (`entry`).
        let (l3, l4, payload, v6, end) = (o.l3, o.l4, p.payload, o.v6, frame.len());
        let ip = &frame[l3..];
        let l3_len = if v6 { 40 + be16(ip, 4) as usize } else { be16(ip, 2) as usize };
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
            self.restart_tunnel(pkt, n, found, slot, hint);
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
    fn restart_tunnel(&mut self, pkt: &mut Packet, n: Incoming, at: Position, slot: u32, hint: hint::Hint) {
        let p = self.table.get(at);
        let Some(t) = p.tunnel.as_ref() else { return };
        let outer = outer_of(t, &n);
        let n = Incoming { key: p.key, key_hash: p.key_hash, ..n };
        self.flush_at(at, FlushReason::SizeLimit);
        self.hold(pkt, &n, at.bucket, &outer);
        self.note_tunnel_hold(at.bucket, hint, slot);
        #[cfg(test)]
        {
            self.tunnel_fast_restarts += 1;
        }
    }
}

impl Gro {
    /// What the full path does with the first segment of a flow whose last
    /// aggregate was delivered from slot `slot` (the one the packet's
    /// tunnel hint `hint` names, now free): when its masked headers equal
    /// those that aggregate's first packet had ([`TunnelStarts`]), it holds
    /// the segment as the flow's next aggregate, as
    /// [`Gro::restart_tunnel`] does after the size limit, without the two
    /// parses, the key and the identity hash. The entry checks, and the
    /// checksums of a packet not vouched for, are those of
    /// [`Gro::tunnel_fast`]; the bucket its hash picks must hold no
    /// aggregate of the flow (the full path would try to merge the segment
    /// there), and a closing segment (FIN, RST, SYN...) goes the full way,
    /// which delivers it. Returns whether it dealt with the packet; if not,
    /// nothing has changed and the full path decides.
    ///
    /// Out of line and cold: once per flow and burst (each burst ends with
    /// a flush), and the merge path inlined in the burst loop keeps its
    /// registers.
    #[cold]
    #[inline(never)]
    fn tunnel_start(&mut self, pkt: &mut Packet, slot: u32, hint: hint::Hint, hash: Option<u32>) -> bool {
        if pkt.meta.is_gso() || !self.table.is_free(slot) {
            return false;
        }
        let Some(s) = self.tunnel_starts.get(slot) else { return false };
        let frame = pkt.linear();
        match self.templates.get(s.held.shape) {
            Some(template) if template.matches_tunnel(&s.head, frame) => {}
            _ => return false,
        }
        let t = &s.held;
        let at = tunnel::OuterAt::held_at(t.outer_l3, t.outer_l4, t.outer_v6, t.kind);
        if !at.entry(frame, t.id.csum) || s.key.ext_len() != 0 {
            return false;
        }
        let o = s.layout;
        let Some(l3_len) = inner_entry(&o, s.payload, frame) else { return false };
        if tcp::word3(&frame[o.l4..]) & tcp::W3_CLOSING != 0 {
            return false;
        }
        let want = hash.or(pkt.meta.rss_hash).unwrap_or(t.identity_hash);
        let b = self.table.bucket_of(want);
        let tin = tunnel_in(t);
        if self.table.find_tunnel(b, &s.key, &[], &tin, &t.id, frame).is_some() {
            return false;
        }
        let n = Incoming::matched_tcp(o.l3, o.l4, s.payload, l3_len, o.v6, want);
        let n = Incoming { key: s.key, key_hash: s.key_hash, ..n };
        let outer = outer_of(t, &n);
        if !tunnel::vouched(pkt.meta.csum) {
            let (h, ih) = (at.headers(frame), GroHeaders::tcp(o.l3, o.l4, s.payload, l3_len, o.v6));
            if let Err(reason) = self.verify_tunnel(pkt, &h, &ih, false, false) {
                self.bypass(pkt, reason);
                return true;
            }
        }
        self.hold(pkt, &n, b, &outer);
        self.note_tunnel_hold(b, hint, slot);
        #[cfg(test)]
        {
            self.tunnel_fast_starts += 1;
        }
        true
    }

    /// After a tunnel segment with hint `hint` was held as the newest
    /// aggregate of bucket `b`, taking over from the flow's aggregate in
    /// slot `last` (flushed at the size limit, or delivered before a
    /// start): the next segment of its flow is sent to it, and its headers
    /// are kept for the start of the flow's next one unless it took `last`
    /// itself (the free slot taken first is the one freed last), where a
    /// record of the flow is kept already. Skipping the write there only
    /// loses starts, never changes a decision: a record is written whole
    /// from one aggregate, and a start trusts it only for a packet matching
    /// its header copy ([`TunnelStarts`]).
    #[inline(always)]
    fn note_tunnel_hold(&mut self, b: usize, hint: hint::Hint, last: u32) {
        let Some(slot) = self.table.newest(b) else { return };
        self.tunnel_cache.note(hint, slot);
        if slot != last {
            self.tunnel_starts.note(&self.table, slot);
        }
    }
}

/// The inner entry checks of a tunnel segment whose masked headers equal
/// an aggregate's (so its offsets are `o`, its payload at `payload`) that
/// the template leaves open (offload-rules 1.2, 2.6), the outer ones
/// ([`tunnel::OuterAt::entry`]) passed: its inner IP packet ends the frame
/// (the outer one does, so no inner padding) after some TCP payload, and an
/// inner IPv4 header checksum verifies. Returns its inner IP length.
#[inline(always)]
fn inner_entry(o: &TunnelLayout, payload: usize, frame: &[u8]) -> Option<usize> {
    let (l3, l4, v6, end) = (o.l3, o.l4, o.v6, frame.len());
    let ip = frame.get(l3..)?;
    let l3_len = if v6 { 40 + be16(ip, 4) as usize } else { be16(ip, 2) as usize };
    // (The TCP header ends at the payload, so `end > payload` implies
    // the last test; stated, it bounds the merge rules' reads of that
    // header, which then need no bounds checks of their own.)
    if l3 + l3_len != end || payload >= end || end < l4 + 20 {
        return None;
    }
    if !v6 && !ip::ipv4_header_ok(ip) {
        return None;
    }
    Some(l3_len)
}

/// The tunnel headers of held aggregate `t`, as the full path's parse
/// gives them.
fn tunnel_in(t: &tunnel::TunnelHeld) -> tunnel::TunnelIn {
    tunnel::TunnelIn {
        kind: t.kind,
        outer_v6: t.outer_v6,
        outer_l3: t.outer_l3 as u16,
        outer_l4: t.outer_l4 as u16,
        inner_mac: t.inner_mac as u16,
    }
}

/// The outer state of segment `n` of the flow of tunnel aggregate `t`
/// when it starts the flow's next aggregate: `t`'s, which the template
/// covers, and the segment's own length from the outer IP header.
fn outer_of(t: &tunnel::TunnelHeld, n: &Incoming) -> tunnel::Outer {
    tunnel::Outer { t: tunnel_in(t), id: t.id, identity_hash: t.identity_hash, agg_len: n.l3 - t.outer_l3 + n.l3_len }
}

/// Bytes of a [`TunnelStart`]'s header copy: the fixed tunnel template
/// compare's ([`Template::matches_tunnel`]); a layout with longer headers
/// never matches the copy, and its flows start by the full path.
///
/// [`Template::matches_tunnel`]: super::template::Template::matches_tunnel
const TUNNEL_HEAD_BYTES: usize = 128;

/// What a tunnel aggregate's flow needs for [`Gro::tunnel_start`], kept
/// once the aggregate is delivered: its first packet's first header bytes
/// as received (zeros past a shorter frame), its inner flow key and hash,
/// its outer state and its header offsets. A packet whose masked headers
/// equal the copy (the template covers every byte these are built from)
/// gets the same from the full path's parse.
#[derive(Debug, Clone, Copy)]
struct TunnelStart {
    head: [u8; TUNNEL_HEAD_BYTES],
    key: FlowKey,
    key_hash: u32,
    held: tunnel::TunnelHeld,
    layout: TunnelLayout,
    payload: usize,
}

/// The [`TunnelStart`] of each flow table slot's last tunnel aggregate, by
/// slot: apart from the table ([`Held`] is moved at every hold, and a
/// larger record cost 64 VXLAN flows 12 instructions per packet,
/// docs/benchmarks.md "One VXLAN flow: fewer checks"). Allocated once
/// with the engine; a slot's record is written when a tunnel aggregate is
/// held there and stays, whatever the slot holds next, until the next
/// tunnel aggregate there: [`Gro::tunnel_start`] trusts only a record
/// whose copy matches the packet, in a free slot.
///
/// [`Held`]: super::flow::Held
#[derive(Debug, Default)]
pub(super) struct TunnelStarts(Vec<Option<TunnelStart>>);

impl TunnelStarts {
    /// Room for `slots` slots' records (none without a tunnel port).
    pub(super) fn with_slots(slots: usize) -> TunnelStarts {
        TunnelStarts(vec![None; slots])
    }

    #[inline]
    fn get(&self, slot: u32) -> Option<&TunnelStart> {
        self.0.get(slot as usize)?.as_ref()
    }

    /// Keeps the record of the tunnel aggregate in `slot` if it holds its
    /// first packet only (its headers as received: a merge may set FIN or
    /// PSH in them). Written in place: once per aggregate. (An inner UDP
    /// aggregate's record names no template, [`Shape::NONE`], so no start
    /// takes a packet with it; with `tcp_fraglist` no tunnel TCP aggregate
    /// is held, 2.6.)
    ///
    /// [`Shape::NONE`]: super::template::Shape::NONE
    #[inline(never)]
    pub(super) fn note(&mut self, table: &FlowTable, slot: u32) {
        let (Some(p), Some(rec)) = (table.slot(slot), self.0.get_mut(slot as usize)) else { return };
        let Some(t) = p.tunnel.as_ref() else { return };
        if p.merged {
            return;
        }
        let layout = TunnelLayout {
            outer_l3: t.outer_l3,
            outer_l4: t.outer_l4,
            outer_v6: t.outer_v6,
            l3: p.l3,
            l4: p.l4,
            v6: p.v6,
        };
        let r = rec.get_or_insert_with(|| TunnelStart {
            head: [0; TUNNEL_HEAD_BYTES],
            key: p.key,
            key_hash: p.key_hash,
            held: *t,
            layout,
            payload: p.payload,
        });
        let frame = p.pkt.linear();
        if let Some(h) = frame.first_chunk::<TUNNEL_HEAD_BYTES>() {
            r.head = *h;
        } else {
            r.head = [0; TUNNEL_HEAD_BYTES];
            r.head[..frame.len()].copy_from_slice(frame);
        }
        (r.key, r.key_hash, r.held, r.layout, r.payload) = (p.key, p.key_hash, *t, layout, p.payload);
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
}
