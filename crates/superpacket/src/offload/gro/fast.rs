//! The plain fast path: a TCP segment that joins the aggregate its flow
//! went to last, decided by one masked compare of its headers against that
//! aggregate's first packet's ([`Template`]) instead of the parse, the flow
//! key, its hash and the bucket walk of the full path (`Gro::gro_one`),
//! which stays the reference for everything else (offload-rules 1.1, 1.2,
//! 1.3).
//!
//! [`Template`]: super::template::Template

use super::counters::FlushReason;
use super::flow::Position;
use super::hint::Hint;
use super::parse::GroHeaders;
use super::tcp::W3_CLOSING;
use super::template::TEMPLATE_BYTES;
use super::{ChecksumState, Gro, Incoming, Plain, ip, tcp};
use crate::packet::Packet;
use crate::wire::field::{be16, ne32};

impl Gro {
    /// The full path dealt with a TCP packet whose hint is `hint`: the
    /// newest aggregate of its bucket `b` is the one it started or joined,
    /// unless it was delivered (then the hint is wrong, and checked).
    #[inline(always)]
    pub(super) fn note_plain_hint(&mut self, hint: Option<Hint>, b: usize) {
        if let (Some(hint), Some(slot)) = (hint, self.table.newest(b)) {
            self.plain_hints.note(hint, slot);
        }
    }

    /// The fast path of a plain TCP segment (hint `hint`, receive hash
    /// `hash` as [`Gro::gro_one`] takes it) that merges into its flow's
    /// aggregate. It finds the aggregate its hint last went to
    /// ([`hint::SlotHints`]); if the packet's masked headers equal that
    /// aggregate's first packet's (its [`Shape`] template: the same flow key
    /// (1.1), the same offsets, and the same values in the fields rule 1.3
    /// wants equal) and the aggregate is held in the bucket the full path's
    /// hash picks, that is the aggregate [`FlowTable::find`] finds (a flow
    /// has at most one per bucket). What the template does not settle is
    /// checked as the full path checks it: the entry (1.2: the IP length
    /// ends the frame, so no padding; some payload; a good IPv4 header
    /// checksum; not a GSO packet), the merge rules left
    /// ([`tcp::same_headers_before_append`]: size, ID, sequence; then the append) and
    /// the L4 checksum ([`Gro::verify_l4`]).
    ///
    /// A segment that passes every rule but the append (h), the size limit,
    /// ends the aggregate and starts the next one of its flow, as the full
    /// path does with it ([`Gro::restart_plain`]): the last segment of every
    /// 64 KB aggregate of a bulk flow, which the full path costs about 550
    /// instructions more (parse, key, hash, lookup, merge rules).
    ///
    /// Returns whether it dealt with the packet (merged, held as the next
    /// aggregate, or delivered for a bad checksum, which the full path
    /// rejects before its lookup); if not, nothing has changed and the full
    /// path decides.
    ///
    /// [`Shape`]: super::template::Shape
    /// [`FlowTable::find`]: super::flow::FlowTable::find
    ///
    /// The usual layout, an untagged Ethernet frame with an IPv4 header
    /// without options, has a copy of its own with the IP and TCP offsets
    /// as constants ([`Layout::ETHERNET_IPV4`]), so that the header reads
    /// of the rules need no bounds check of their own.
    #[inline(always)]
    pub(super) fn plain_fast(&mut self, pkt: &mut Packet, hint: Hint, hash: Option<u32>) -> bool {
        if pkt.meta.is_gso() {
            return false;
        }
        let slot = self.plain_hints.slot(hint);
        let Some(p) = self.table.slot(slot) else { return false };
        if p.tunnel.is_some() || p.fraglist {
            return false;
        }
        let layout = Layout { l3: p.l3, l4: p.l4, v6: p.v6 };
        if layout == Layout::ETHERNET_IPV4 {
            self.plain_fast_at(pkt, slot, Layout::ETHERNET_IPV4, hint, hash)
        } else {
            self.plain_fast_at(pkt, slot, layout, hint, hash)
        }
    }

    /// [`Gro::plain_fast`] for the aggregate in `slot`, whose header
    /// offsets are `o`.
    #[inline(always)]
    fn plain_fast_at(&mut self, pkt: &mut Packet, slot: u32, o: Layout, hint: Hint, hash: Option<u32>) -> bool {
        let Some(p) = self.table.slot(slot) else { return false };
        // The aggregate's header copy: its masked bytes are its frame's
        // (a slot the plain fast path started holds the copy its segment
        // matched), and a fixed array has no bounds to check.
        let (frame, held) = (pkt.linear(), &p.head.0[..]);
        // A free slot first (its header copy is the last aggregate's, which
        // the flow's first segment of a burst matches): that segment goes
        // to `Gro::plain_start` (with many flows, a large share).
        if self.table.is_free(slot) {
            return false;
        }
        // The ports first: they tell flows apart (the slot may hold another
        // flow's aggregate by now).
        let ports = |f: &[u8]| f.get(o.l4..o.l4 + 4).map(|b| ne32(b, 0));
        if ports(held) != ports(frame) {
            return false;
        }
        match self.templates.get(p.shape) {
            Some(template) if template.matches(held, frame) => {}
            _ => return false,
        }
        let want = hash.or(pkt.meta.rss_hash).unwrap_or(p.key_hash);
        let Some(at) = self.table.position_in(self.table.bucket_of(want), slot) else { return false };
        let Some(n) = entry(o, p.payload, frame) else { return false };
        let Some(latches) = tcp::same_headers_before_append(p, frame, &n, &self.cfg, None) else {
            return false;
        };
        let full = tcp::append_rule(p, &n, &self.cfg).is_err();
        let w = tcp::word3(&frame[n.l4..]);
        if !matches!(pkt.meta.csum, ChecksumState::Unnecessary { .. } | ChecksumState::Partial { .. }) {
            let h = GroHeaders::tcp(n.l3, n.l4, n.payload, n.l3_len, n.v6);
            if let Err(reason) = self.verify_l4(pkt, &h) {
                self.bypass(pkt, reason);
                return true;
            }
        }
        if full {
            self.restart_plain(pkt, n, at, want, hint);
            return true;
        }
        self.tcp_merge(pkt, &n, at, latches, w, &Plain);
        #[cfg(test)]
        {
            self.plain_fast_merges += 1;
        }
        true
    }
}

impl Gro {
    /// [`Gro::plain_start_at`] if the hint `hint` names a free slot (the
    /// merge path, [`Gro::plain_fast`], found no aggregate there; `false`,
    /// nothing changed, otherwise).
    ///
    /// Tried first on the full path ([`Gro::gro_full`]), so that the burst
    /// loop's code stays as it was: tried from the loop right after the
    /// merge path (out of line), 64 interleaved flows took 31 instructions
    /// per packet fewer, but one trusted flow lost 6% of its packet rate
    /// (`superpacket bench peers`, docs/benchmarks.md).
    #[inline(always)]
    pub(super) fn plain_start(&mut self, pkt: &mut Packet, hint: Hint, hash: Option<u32>) -> bool {
        let slot = self.plain_hints.slot(hint);
        if pkt.meta.is_gso() || !self.table.is_free(slot) {
            return false;
        }
        let Some(p) = self.table.slot(slot) else { return false };
        let o = Layout { l3: p.l3, l4: p.l4, v6: p.v6 };
        if o == Layout::ETHERNET_IPV4 {
            self.plain_start_at::<true>(pkt, slot, o, hash)
        } else {
            self.plain_start_at::<false>(pkt, slot, o, hash)
        }
    }

    /// The fast path of a plain TCP segment (receive hash `hash`) whose
    /// hint names the free slot `slot`: the first segment of
    /// a flow after its last aggregate was delivered (at the end of a
    /// burst, say). The slot still describes that aggregate (its key, key
    /// hash, offsets `o`, shape and first header bytes, [`HeadCopy`]). If
    /// the segment's masked headers equal those bytes (so its flow key is
    /// that key: the template covers every byte the key is built from,
    /// offload-rules 1.1), it passes the entry checks the template leaves
    /// open ([`entry`], 1.2), has none of the flags that keep a segment
    /// from starting an aggregate (1.3 outcome matrix) and its flow has no
    /// aggregate held in the bucket its hash picks ([`FlowTable::find`],
    /// as the full path looks), the full path would hold it as a new
    /// aggregate: so it is held in that slot, without the parse, the key
    /// build and its hash, and only the fields a new first packet changes
    /// are written ([`Held::begin`]: the slot's identity, layout, shape and
    /// header copy are the flow's already). A bad L4 checksum delivers it,
    /// as the full path does before its lookup.
    ///
    /// `ETH_IPV4`: `o` is [`Layout::ETHERNET_IPV4`] (the offsets are then
    /// constants in this copy).
    ///
    /// Returns whether it dealt with the packet; if not, nothing has
    /// changed and the full path decides.
    ///
    /// Inlined into the full path's entry, one copy per layout: out of
    /// line, the full path's code around the call cost the UDP rows 12-14
    /// instructions per packet (`gro_instructions 1 peers udp`).
    ///
    /// [`FlowTable::find`]: super::flow::FlowTable::find
    /// [`Held::begin`]: super::flow::Held::begin
    #[inline(always)]
    fn plain_start_at<const ETH_IPV4: bool>(
        &mut self,
        pkt: &mut Packet,
        slot: u32,
        o: Layout,
        hash: Option<u32>,
    ) -> bool {
        let o = if ETH_IPV4 { Layout::ETHERNET_IPV4 } else { o };
        let Some(p) = self.table.slot(slot) else { return false };
        let frame = pkt.linear();
        match self.templates.get(p.shape) {
            Some(template) if template.matches(&p.head.0, frame) => {}
            _ => return false,
        }
        let Some(n) = entry(o, p.payload, frame) else { return false };
        if tcp::word3(&frame[n.l4..]) & W3_CLOSING != 0 {
            return false;
        }
        let want = hash.or(pkt.meta.rss_hash).unwrap_or(p.key_hash);
        let b = self.table.bucket_of(want);
        let ext: &[u8] = if p.key.ext_len() != 0 { &frame[n.l3 + 40..n.l4] } else { &[] };
        if self.table.holds_plain(b, &p.key, p.key_hash, ext) {
            return false;
        }
        if !matches!(pkt.meta.csum, ChecksumState::Unnecessary { .. } | ChecksumState::Partial { .. }) {
            let h = GroHeaders::tcp(n.l3, n.l4, n.payload, n.l3_len, n.v6);
            if let Err(reason) = self.verify_l4(pkt, &h) {
                self.bypass(pkt, reason);
                return true;
            }
        }
        // The hint names this slot already: it is not noted again.
        if !self.hold_in_own_slot(pkt, &n, b, slot) {
            return false;
        }
        #[cfg(test)]
        {
            self.plain_fast_starts += 1;
        }
        true
    }
}

/// The first header bytes of a TCP aggregate's first packet (from the
/// start of the frame; zeros past a shorter frame), kept in its slot: as
/// many as a template covers ([`TEMPLATE_BYTES`]), so that every header a
/// template is built for fits. While the aggregate is held they are its
/// frame's (its headers change only when it is completed, or get FIN/PSH
/// just before a flush). What the fast paths compare a segment with: the
/// tunnel one ([`Gro::tunnel_fast`]) while the aggregate is held, a fixed
/// array without the bounds checks and loads of the packet's linear area
/// (docs/benchmarks.md, "One VXLAN flow: the header copy"); the plain one when the slot is
/// free, to start the next aggregate of the same flow
/// ([`Gro::plain_start_at`]).
///
/// Aligned as a template ([`super::template::Template`]): its 16-byte
/// lines can be vector memory operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct HeadCopy(pub [u8; HEAD_BYTES]);

/// Bytes of a [`HeadCopy`].
pub const HEAD_BYTES: usize = TEMPLATE_BYTES;

impl Default for HeadCopy {
    fn default() -> Self {
        HeadCopy([0; HEAD_BYTES])
    }
}

impl HeadCopy {
    /// Copies the first bytes of `frame` (a fixed-size copy for a frame of
    /// at least [`HEAD_BYTES`]; a shorter one is copied whole and the rest
    /// zeroed, so that no byte of an earlier aggregate remains).
    #[inline(always)]
    pub fn copy_from(&mut self, frame: &[u8]) {
        if let Some(h) = frame.first_chunk::<HEAD_BYTES>() {
            self.0 = *h;
            return;
        }
        self.0 = [0; HEAD_BYTES];
        self.0[..frame.len()].copy_from_slice(frame);
    }
}

/// Where an aggregate's IP and TCP headers are, and its IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    l3: usize,
    l4: usize,
    v6: bool,
}

impl Layout {
    /// An untagged Ethernet frame with an IPv4 header without options.
    const ETHERNET_IPV4: Layout = Layout { l3: 14, l4: 34, v6: false };
}

impl Gro {
    /// What the full path does with a segment `n` of the aggregate at `at`
    /// that fails only its size limit (offload-rules 1.3 (h); its checksum
    /// verified, receive hash `want`, plain hint `hint`): the aggregate is
    /// flushed ([`FlushReason::SizeLimit`]) and the segment held as the
    /// next one of its flow in the same bucket. Its flow key is the old
    /// aggregate's: the template covers every byte the key is built from.
    /// Out of line: once per 64 KB aggregate.
    #[inline(never)]
    fn restart_plain(&mut self, pkt: &mut Packet, n: Incoming, at: Position, want: u32, hint: Hint) {
        let p = self.table.get(at);
        let n = Incoming { key: p.key, key_hash: p.key_hash, hash: want, ..n };
        self.flush_at(at, FlushReason::SizeLimit);
        self.hold(pkt, &n, at.bucket, &Plain);
        self.note_plain_hint(Some(hint), at.bucket);
        #[cfg(test)]
        {
            self.plain_fast_restarts += 1;
        }
    }
}

/// The entry checks of a segment whose masked headers equal those of an
/// aggregate (so its offsets are the aggregate's: its IP and TCP headers
/// at `o`, its payload at `payload`) that the template leaves open
/// (offload-rules 1.2): its IP length ends the frame (no padding) after
/// some TCP payload, an IPv6 payload length is not zero (a jumbogram goes
/// the full way), an IPv4 header checksum verifies. Returns the segment as
/// the merge rules see it.
#[inline(always)]
fn entry(o: Layout, payload: usize, frame: &[u8]) -> Option<Incoming> {
    let Layout { l3, l4, v6 } = o;
    let ip = frame.get(l3..)?;
    let l3_len = if v6 {
        match be16(ip, 4) {
            0 => return None,
            pl => 40 + pl as usize,
        }
    } else {
        be16(ip, 2) as usize
    };
    if l3 + l3_len != frame.len() || payload >= frame.len() {
        return None;
    }
    if !v6 && !ip::ipv4_header_ok(ip) {
        return None;
    }
    // The bucket check is done: the hash is not read again.
    Some(Incoming::matched_tcp(l3, l4, payload, l3_len, v6, 0))
}
