//! The reassembly engine (offload-rules 5.1): the queue table, memory
//! accounting and admission, timeouts, the shared per-fragment rules, and
//! completion. Family rules live in [`super::ipv4`] / [`super::ipv6`], the
//! run logic in [`super::queue`], data storage in [`super::coalesce`].
//!
//! Hot path per fragment: the queue lookup (in order, a key comparison with
//! the previous fragment's queue; otherwise one seeded hash lookup), the run
//! insertion, one copy of the payload (coalescing) or a move of the packet
//! (forwarding); no heap allocation beyond the datagram buffer (queue
//! descriptors are recycled in a slab, run lists in a pool, `ipfrag_max_dist`
//! peers in a slab indexed from the queue).

use super::clock::{Clock, MonotonicClock};
use super::coalesce::{Coalesced, Held, HeldFrag};
use super::icmp::{IcmpError, IcmpKind, may_send_error};
use super::ipv6::V6Parse;
use super::queue::{Placement, Runs};
use super::{
    DatagramInfo, Delivery, DropReason, Family, FragDrop, MAX_DATAGRAM, MemoryPolicy, ReasmConfig, ReasmCounters,
    Reassembled, Scope, Verdict, ipv4, ipv6,
};
use crate::csum::{ones_add, ones_sub, ones_sum};
use crate::packet::{ChecksumState, OffloadMeta, Packet};
use crate::wire::{EtherType, Medium, VlanStack};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};

const NIL: u32 = u32::MAX;
/// Most ICMP errors kept for [`Reassembler::expire`] to hand out.
const MAX_PENDING_ICMP: usize = 256;

/// ECN bits of one fragment (`IPFRAG_ECN_*`).
pub(crate) fn ecn_bit(tos: u8) -> u8 {
    match tos & 3 {
        0 => 0x01, // Not-ECT
        1 => 0x02, // ECT(1)
        2 => 0x04, // ECT(0)
        _ => 0x08, // CE
    }
}

/// RFC 3168 5.3 / `ip_frag_ecn_table`: the ECN bits to OR into the result,
/// or `None` to drop (Not-ECT mixed with ECT or CE).
pub(crate) fn ecn_table(bits: u8) -> Option<u8> {
    let not_ect = bits & 0x01 != 0;
    let ect = bits & 0x06 != 0;
    let ce = bits & 0x08 != 0;
    if not_ect && (ect || ce) {
        None
    } else if ce && ect {
        Some(3)
    } else {
        Some(0)
    }
}

/// What a fragment says, decoded by the family module. Written in place by
/// the parsers and passed by reference, because it is read right after its
/// fields were stored one by one: a load wider than those stores (a whole-
/// struct move, or a `u16` field loaded with its neighbours) stalls on store
/// forwarding, ~15% of the in-order fragment's cost when measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FragDesc {
    pub family: Family,
    /// Source and destination addresses as little-endian words: source
    /// `[0..2]`, destination `[2..4]` (IPv4: the address in the low half of
    /// words 0 and 2, words 1 and 3 zero).
    pub addrs: [u64; 4],
    pub ident: u32,
    /// IPv4 protocol (part of the IPv4 key); 0 for IPv6.
    pub proto: u8,
    /// Offset of the IP header in the frame.
    pub l3: usize,
    /// Offset of the fragment data in the frame.
    pub data_start: usize,
    /// Payload offset of the data in the datagram.
    pub offset: u32,
    /// End (offset + length; IPv4 non-last rounded down to x 8).
    pub end: u32,
    /// More fragments follow.
    pub more: bool,
    /// `IPFRAG_ECN_*` bit.
    pub ecn: u8,
    /// IPv4 DF.
    pub dont_frag: bool,
    /// IP packet length of the fragment.
    /// (A `u32`, not a `u16`: see [`FragDesc`] on store forwarding.)
    pub frag_size: u32,
    /// Bytes after the used data (rounding, L2 padding): a COMPLETE sum no longer matches.
    pub trimmed: bool,
    /// IPv4: header length; IPv6: offset of the Fragment header from the IPv6 header.
    pub unfrag_len: usize,
    /// IPv6: offset (from the IPv6 header) of the next-header byte naming the Fragment header.
    pub nh_off: usize,
    /// IPv6: the Fragment header's next header; IPv4: the protocol.
    pub next_header: u8,
    /// Datagram payload length announced by the first fragment's UDP header (0 = none).
    pub len_hint: u32,
}

impl FragDesc {
    /// A blank description, filled by [`ipv4::parse`] / [`ipv6::parse`].
    pub const BLANK: FragDesc = FragDesc {
        family: Family::V4,
        addrs: [0; 4],
        ident: 0,
        proto: 0,
        l3: 0,
        data_start: 0,
        offset: 0,
        end: 0,
        more: false,
        ecn: 0,
        dont_frag: false,
        frag_size: 0,
        trimmed: false,
        unfrag_len: 0,
        nh_off: 0,
        next_header: 0,
        len_hint: 0,
    };
}

/// A fragment as offered: a packet, or a frame in a receive buffer (its
/// metadata by reference: read field by field, never copied whole per fragment).
enum Src<'a> {
    Owned(Packet),
    Borrowed(&'a [u8], &'a OffloadMeta),
}

/// Queue key: the kernel's key plus the scope, as words (compared and
/// hashed word by word; VLAN tags as `tpid << 16 | tci`, unused ones zero,
/// only the used ones compared).
#[derive(Debug, Clone, Copy)]
struct FragKey {
    family: Family,
    /// [`FragDesc::addrs`].
    addrs: [u64; 4],
    /// `ident | proto << 32 | family << 40 | vlan_len << 48`.
    id: u64,
    port: u32,
    vlans: [u32; crate::wire::MAX_VLAN_TAGS],
}

impl FragKey {
    #[inline]
    fn new(d: &FragDesc, scope: &Scope) -> FragKey {
        let mut vlans = [0u32; crate::wire::MAX_VLAN_TAGS];
        for (w, t) in vlans.iter_mut().zip(scope.vlans.iter()) {
            *w = u32::from(t.tpid.0) << 16 | u32::from(t.tci());
        }
        FragKey { family: d.family, addrs: d.addrs, id: Self::id_word(d, scope), port: scope.port, vlans }
    }

    #[inline]
    fn id_word(d: &FragDesc, scope: &Scope) -> u64 {
        let fam = u64::from(d.family == Family::V6);
        u64::from(d.ident) | u64::from(d.proto) << 32 | fam << 40 | (scope.vlans.len() as u64) << 48
    }

    /// Equal to `FragKey::new(d, scope)`, compared field by field from the
    /// description (words read as they were written: no wide loads over
    /// fresh narrow stores).
    #[inline]
    fn matches(&self, d: &FragDesc, scope: &Scope) -> bool {
        self.id == Self::id_word(d, scope)
            && self.addrs[0] == d.addrs[0]
            && self.addrs[2] == d.addrs[2]
            && self.addrs[1] == d.addrs[1]
            && self.addrs[3] == d.addrs[3]
            && self.port == scope.port
            // Equal `id`s: equal tag counts (usually none: no iterator call).
            && (scope.vlans.is_empty()
                || self
                    .vlans
                    .iter()
                    .zip(scope.vlans.iter())
                    .all(|(w, t)| *w == u32::from(t.tpid.0) << 16 | u32::from(t.tci())))
    }

    fn ident(&self) -> u32 {
        self.id as u32
    }

    fn vlan_len(&self) -> usize {
        usize::from((self.id >> 48) as u8)
    }

    /// IPv4 source address (the `ipfrag_max_dist` peer).
    fn v4_src(&self) -> u32 {
        self.addrs[0] as u32
    }
}

impl PartialEq for FragKey {
    #[inline]
    fn eq(&self, o: &FragKey) -> bool {
        let (a, b) = (&self.addrs, &o.addrs);
        let diff = (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (self.id ^ o.id);
        // Equal `id`s: equal VLAN counts, and only the used tags are compared.
        // (A loop rather than a slice comparison: no memcmp call for the usual 0-2 tags.)
        diff == 0 && self.port == o.port && self.vlans.iter().zip(&o.vlans).take(self.vlan_len()).all(|(x, y)| x == y)
    }
}

impl Eq for FragKey {}

impl std::hash::Hash for FragKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let a = &self.addrs;
        h.write_u64(a[0] ^ a[1].rotate_left(29));
        h.write_u64(a[2] ^ a[3].rotate_left(29));
        h.write_u64(self.id);
        h.write_u64(u64::from(self.port));
        for v in &self.vlans[..self.vlan_len()] {
            h.write_u32(*v);
        }
    }
}

/// A multiply-rotate hasher (FxHash) with a per-reassembler random seed, as
/// the kernel's seeded jhash: cheap per fragment, keys not predictable.
#[derive(Clone, Copy)]
struct SeededFx(u64);

impl Hasher for SeededFx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

#[derive(Clone, Copy)]
struct SeededState(u64);

impl BuildHasher for SeededState {
    type Hasher = SeededFx;
    fn build_hasher(&self) -> SeededFx {
        SeededFx(self.0)
    }
}

fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new().build_hasher().finish()
}

/// Checksum state of the result (5.1): equal states are kept, COMPLETE sums
/// added, anything mixed becomes NONE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CsumAcc {
    Empty,
    Same(ChecksumState),
    /// Sum of the data parts of COMPLETE fragments.
    Complete(u16),
    Mixed,
}

impl CsumAcc {
    fn add(&mut self, state: ChecksumState, data_sum: Option<u16>) {
        let next = match (*self, state, data_sum) {
            (CsumAcc::Mixed, ..) => CsumAcc::Mixed,
            (CsumAcc::Empty, ChecksumState::Complete { .. }, Some(s)) => CsumAcc::Complete(s),
            (CsumAcc::Complete(a), ChecksumState::Complete { .. }, Some(s)) => CsumAcc::Complete(ones_add(a, s)),
            (CsumAcc::Empty, ChecksumState::None | ChecksumState::Unnecessary { .. }, _) => CsumAcc::Same(state),
            (CsumAcc::Same(a), b, _) if std::mem::discriminant(&a) == std::mem::discriminant(&b) => CsumAcc::Same(a),
            _ => CsumAcc::Mixed,
        };
        *self = next;
    }
}

#[derive(Debug)]
enum Store {
    Coalesced(Coalesced),
    Held(Held),
}

impl Store {
    fn charge(&self) -> usize {
        match self {
            Store::Coalesced(c) => c.charge(),
            Store::Held(h) => h.charge(),
        }
    }
    fn held(&self) -> usize {
        match self {
            Store::Coalesced(_) => 0,
            Store::Held(h) => h.frags.len(),
        }
    }
}

/// One datagram being reassembled.
#[derive(Debug)]
struct FragQueue {
    key: FragKey,
    /// Creation (or max_dist re-initialisation) time: the timer's start.
    created_ns: u64,
    /// Datagram payload length known so far (`q.len`).
    len: u32,
    /// Payload bytes received (`q.meat`).
    meat: u32,
    first_in: bool,
    last_in: bool,
    runs: Runs,
    store: Store,
    ecn: u8,
    max_size: u16,
    max_df_size: u16,
    frags: u16,
    /// Memory charged to the family's counter.
    charged: usize,
    // From the first fragment:
    l3: usize,
    unfrag_len: usize,
    nh_off: usize,
    next_header: u8,
    head_meta: OffloadMeta,
    csum: CsumAcc,
    len_hint: u32,
    /// `ipfrag_max_dist`: the source's fragment counter at this queue's last fragment.
    rid: u32,
    /// IPv4: index of the source's [`Peer`] in `peer_slots` (`NIL` for IPv6).
    peer: u32,
    prev: u32,
    next: u32,
}

/// Charge of a queue descriptor: the queue, its table entry and [`super::queue::INLINE_RUNS`] runs.
const QUEUE_OVERHEAD: usize = std::mem::size_of::<FragQueue>() + 64 + super::queue::INLINE_RUNS * 8;

#[derive(Debug, Clone, Copy)]
struct AgeList {
    head: u32,
    tail: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct Peer {
    rid: u32,
    refs: u32,
}

fn fi(f: Family) -> usize {
    match f {
        Family::V4 => 0,
        Family::V6 => 1,
    }
}

/// IPv4/IPv6 reassembler (see the [module documentation](super)).
///
/// ```
/// use superpacket::offload::frag::{Reassembler, ReasmConfig, Scope, Verdict, build_fragment};
/// use superpacket::packet::Packet;
/// use superpacket::traffic::{Flow, FlowSpec, Transport};
/// use superpacket::wire::TcpFlags;
///
/// let datagram = Flow::new(FlowSpec::new(Transport::Udp, false, 0)).frame(3000, TcpFlags::empty()).unwrap();
/// let mut reasm = Reassembler::new(ReasmConfig::default());
/// let mut done = None;
/// // Three fragments of the 3008 bytes after the IPv4 header, the last one first.
/// for (offset, len, more) in [(2960, 48, false), (0, 1480, true), (1480, 1480, true)] {
///     let frag = build_fragment(&datagram, offset, len, more, 0).unwrap();
///     if let Verdict::Complete(r) = reasm.push(Packet::from_frame(&frag), Scope::default()).unwrap() {
///         done = Some(r);
///     }
/// }
/// let r = done.expect("complete after the third fragment");
/// assert_eq!((r.info.fragments, r.packet.to_vec()), (3, datagram));
/// ```
pub struct Reassembler<C: Clock = MonotonicClock> {
    cfg: ReasmConfig,
    clock: C,
    table: HashMap<FragKey, u32, SeededState>,
    slots: Vec<Option<FragQueue>>,
    free: Vec<u32>,
    ages: [AgeList; 2],
    mem: [usize; 2],
    queues: [usize; 2],
    held: usize,
    counters: [ReasmCounters; 2],
    /// IPv4 sources with live queues: address -> index in `peer_slots`
    /// (looked up when a queue is created; its fragments use the index).
    peers: HashMap<u32, u32, SeededState>,
    peer_slots: Vec<Peer>,
    peer_free: Vec<u32>,
    /// Slot of the queue of the previous fragment (in-order fast path: its
    /// key is compared before the table is searched); may be stale.
    last: u32,
    pending_icmp: VecDeque<IcmpError>,
    spare_runs: Vec<Runs>,
}

impl Reassembler<MonotonicClock> {
    /// A reassembler on the monotonic clock.
    pub fn new(cfg: ReasmConfig) -> Self {
        Reassembler::with_clock(cfg, MonotonicClock::new())
    }
}

impl<C: Clock> Reassembler<C> {
    /// A reassembler reading time from `clock`.
    pub fn with_clock(cfg: ReasmConfig, clock: C) -> Self {
        let seed = random_seed();
        Reassembler {
            cfg,
            clock,
            table: HashMap::with_hasher(SeededState(seed)),
            slots: Vec::new(),
            free: Vec::new(),
            ages: [AgeList { head: NIL, tail: NIL }; 2],
            mem: [0; 2],
            queues: [0; 2],
            held: 0,
            counters: [ReasmCounters::default(); 2],
            peers: HashMap::with_hasher(SeededState(seed.rotate_left(17))),
            peer_slots: Vec::new(),
            peer_free: Vec::new(),
            last: NIL,
            pending_icmp: VecDeque::new(),
            spare_runs: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ReasmConfig {
        &self.cfg
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Memory charged to `family` (truesize of held data plus descriptors).
    pub fn memory(&self, family: Family) -> usize {
        self.mem[fi(family)]
    }

    /// Queues alive for `family`.
    pub fn queue_count(&self, family: Family) -> usize {
        self.queues[fi(family)]
    }

    /// Fragment packets held (forwarding mode; 0 when coalescing): receive
    /// buffers not yet returned to their ring.
    pub fn held_fragments(&self) -> usize {
        self.held
    }

    /// Counters of `family`.
    pub fn counters(&self, family: Family) -> &ReasmCounters {
        &self.counters[fi(family)]
    }

    /// Counters of both families added.
    pub fn counters_total(&self) -> ReasmCounters {
        self.counters[0].merged(&self.counters[1])
    }

    /// True when `family` is above its high threshold (new fragments are
    /// dropped under [`MemoryPolicy::DropNew`]).
    pub fn over_high_thresh(&self, family: Family) -> bool {
        let l = self.cfg.limits(family);
        l.high_thresh == 0 || self.mem[fi(family)] > l.high_thresh
    }

    /// When the oldest queue expires (nanoseconds on the clock), if any.
    pub fn next_deadline(&self) -> Option<u64> {
        [Family::V4, Family::V6]
            .iter()
            .filter_map(|&f| {
                let h = self.ages[fi(f)].head;
                (h != NIL).then(|| self.q(h).created_ns.saturating_add(self.cfg.limits(f).timeout_ns))
            })
            .min()
    }

    /// Offers a packet of the configured medium ([`ReasmConfig::medium`]:
    /// an Ethernet frame, or a raw IP packet from a TUN) received on `scope`.
    /// A reassembled datagram has the first fragment's medium.
    ///
    /// # Errors
    /// A [`FragDrop`] for a fragment that was dropped (counted), possibly with
    /// its whole queue, and an ICMP error to send where the rules say so.
    pub fn push(&mut self, packet: Packet, scope: Scope) -> Result<Verdict, FragDrop> {
        self.push_inner(packet, scope, self.cfg.medium)
    }

    /// Offers a packet starting at its IP header (TUN mode), whatever the
    /// configured medium.
    ///
    /// # Errors
    /// As [`Reassembler::push`].
    pub fn push_ip(&mut self, packet: Packet, scope: Scope) -> Result<Verdict, FragDrop> {
        self.push_inner(packet, scope, Medium::Ip)
    }

    /// Expires queues whose timeout passed (counted; the ICMP "reassembly
    /// time exceeded" of local-delivery queues whose first fragment arrived is
    /// appended to `icmp`, also those of expiries noticed during `push`).
    /// Returns the number of queues expired by this call.
    pub fn expire(&mut self, icmp: &mut Vec<IcmpError>) -> usize {
        let now = self.clock.now_ns();
        let n = self.expire_family(Family::V4, now) + self.expire_family(Family::V6, now);
        icmp.extend(self.pending_icmp.drain(..));
        n
    }

    /// Discards every queue (not counted as failures): memory returns to 0.
    pub fn clear(&mut self) {
        for f in [Family::V4, Family::V6] {
            while self.ages[fi(f)].head != NIL {
                let h = self.ages[fi(f)].head;
                let q = self.remove(h);
                self.recycle(q);
            }
        }
        self.pending_icmp.clear();
    }

    fn q(&self, slot: u32) -> &FragQueue {
        self.slots[slot as usize].as_ref().expect("live slot")
    }

    fn q_mut(&mut self, slot: u32) -> &mut FragQueue {
        self.slots[slot as usize].as_mut().expect("live slot")
    }

    /// Offers a frame still in its receive buffer (local delivery): the
    /// payload is copied into the datagram buffer and the caller may reuse
    /// `frame` at once. With [`Delivery::Forward`] the frame is copied into a
    /// held packet. Non-fragments give [`Verdict::NotFragment`].
    ///
    /// # Errors
    /// As [`Reassembler::push`].
    pub fn push_frame(&mut self, frame: &[u8], meta: OffloadMeta, scope: Scope) -> Result<Verdict, FragDrop> {
        let mut d = FragDesc::BLANK;
        if self.classify(frame, self.cfg.medium, &mut d)? {
            self.queue_fragment(Src::Borrowed(frame, &meta), &d, &scope)
        } else {
            Ok(Verdict::NotFragment)
        }
    }

    fn push_inner(&mut self, mut packet: Packet, scope: Scope, medium: Medium) -> Result<Verdict, FragDrop> {
        if !packet.frag_list().is_empty() {
            return Ok(Verdict::Pass(packet));
        }
        if !packet.segments().is_empty() {
            packet.linearize();
        }
        let mut d = FragDesc::BLANK;
        if self.classify(packet.linear(), medium, &mut d)? {
            self.queue_fragment(Src::Owned(packet), &d, &scope)
        } else {
            Ok(Verdict::Pass(packet))
        }
    }

    /// Decodes a frame into `d`: `Ok(false)` when it is not a fragment.
    #[inline]
    fn classify(&mut self, frame: &[u8], medium: Medium, d: &mut FragDesc) -> Result<bool, FragDrop> {
        let (l3, ethertype) = if medium == Medium::Ethernet {
            if frame.len() < 14 {
                return Ok(false);
            }
            let et = EtherType(u16::from_be_bytes([frame[12], frame[13]]));
            if et == EtherType::IPV4 || et == EtherType::IPV6 {
                (14, et)
            } else {
                match VlanStack::parse(&frame[12..]) {
                    Ok((_, et, used)) => (12 + used, et),
                    Err(_) => return Ok(false),
                }
            }
        } else {
            match Medium::ip_ethertype(frame) {
                Ok(et) => (0, et),
                Err(_) => return Ok(false),
            }
        };
        match ethertype {
            EtherType::IPV4 => match ipv4::parse(frame, l3, self.cfg.verify_ipv4_checksum, d) {
                Ok(is_frag) => Ok(is_frag),
                Err(reason) => Err(self.refuse(Family::V4, reason, None)),
            },
            EtherType::IPV6 => match ipv6::parse(frame, l3, d) {
                Ok(V6Parse::Fragment) => Ok(true),
                Ok(V6Parse::NotFragment) => Ok(false),
                Ok(V6Parse::Atomic) => {
                    self.counters[1].atomic += 1;
                    Ok(false)
                }
                Err((reason, icmp)) => Err(self.refuse(Family::V6, reason, icmp)),
            },
            _ => Ok(false),
        }
    }

    /// Counts a fragment refused before any queue was touched.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, f: Family, reason: DropReason, icmp: Option<IcmpError>) -> FragDrop {
        let c = &mut self.counters[fi(f)];
        c.fragments += 1;
        c.icmp += u64::from(icmp.is_some());
        count_reason(c, &reason);
        FragDrop { reason, queue_discarded: false, icmp }
    }

    fn queue_fragment(&mut self, src: Src<'_>, d: &FragDesc, scope: &Scope) -> Result<Verdict, FragDrop> {
        let f = d.family;
        let i = fi(f);
        self.counters[i].fragments += 1;
        let now = self.clock.now_ns();
        self.expire_family(f, now);
        if !self.admit(f) {
            return Err(self.refuse_counted(f, DropReason::MemoryLimit));
        }
        let slot = match self.lookup(d, scope) {
            Some(s) => s,
            None => {
                let key = FragKey::new(d, scope);
                match self.table.get(&key) {
                    Some(&s) => s,
                    None => {
                        if self.queues[0] + self.queues[1] >= self.cfg.max_queues {
                            return Err(self.refuse_counted(f, DropReason::QueueLimit));
                        }
                        self.create(key, now)
                    }
                }
            }
        };
        self.last = slot;

        // ipfrag_max_dist (5.2).
        if f == Family::V4 && self.cfg.ipv4_max_dist > 0 {
            let q = self.slots[slot as usize].as_mut().expect("live slot");
            let peer = &mut self.peer_slots[q.peer as usize];
            peer.rid = peer.rid.wrapping_add(1);
            let end = peer.rid;
            let start = std::mem::replace(&mut q.rid, end);
            if q.frags > 0 && end.wrapping_sub(start) > self.cfg.ipv4_max_dist {
                self.reinit(slot, now);
            }
        }

        // Length rules (5.2 / 5.3), in the kernel's order.
        let (offset, end) = (d.offset, d.end);
        if f == Family::V4 && end > ipv4::max_end(d.unfrag_len) {
            return Err(self.discard(slot, DropReason::Oversize));
        }
        {
            let q = self.q_mut(slot);
            if !d.more {
                if end < q.len || (q.last_in && end != q.len) {
                    return Err(self.discard(slot, DropReason::BadLastFragment));
                }
                q.last_in = true;
                q.len = end;
            } else if end > q.len {
                if q.last_in {
                    return Err(self.discard(slot, DropReason::BeyondEnd));
                }
                q.len = end;
            }
        }
        if end == offset {
            return Err(self.discard(slot, DropReason::ZeroLength));
        }
        match self.q_mut(slot).runs.insert(offset, end) {
            Placement::Duplicate => {
                self.counters[i].duplicates += 1;
                return Err(FragDrop { reason: DropReason::Duplicate, queue_discarded: false, icmp: None });
            }
            Placement::Overlap => return Err(self.discard(slot, DropReason::Overlap)),
            Placement::NewRun | Placement::Appended => {}
        }

        // Store the data and keep the books.
        let len = (end - offset) as usize;
        let (frame, meta): (&[u8], &OffloadMeta) = match &src {
            Src::Owned(p) => (p.linear(), &p.meta),
            Src::Borrowed(f, m) => (f, m),
        };
        let data_sum = match meta.csum {
            ChecksumState::Complete { sum } if !d.trimmed => Some(ones_sub(sum, ones_sum(&frame[d.l3..d.data_start]))),
            _ => None,
        };
        let state = match meta.csum {
            ChecksumState::Complete { .. } if d.trimmed => ChecksumState::None,
            s => s,
        };
        let q = self.slots[slot as usize].as_mut().expect("live slot");
        q.csum.add(state, data_sum);
        if offset == 0 {
            q.first_in = true;
            q.l3 = d.l3;
            q.unfrag_len = d.unfrag_len;
            q.nh_off = d.nh_off;
            q.next_header = d.next_header;
            q.head_meta = *meta;
            q.len_hint = d.len_hint;
        }
        q.meat += len as u32;
        q.ecn |= d.ecn;
        q.frags = q.frags.saturating_add(1);
        let frag_size = d.frag_size as u16;
        q.max_size = q.max_size.max(frag_size);
        if d.dont_frag {
            q.max_df_size = q.max_df_size.max(frag_size);
        }
        match &mut q.store {
            Store::Coalesced(c) => {
                let target = if q.last_in {
                    q.len as usize
                } else if q.len_hint > q.len {
                    q.len_hint as usize
                } else {
                    0
                };
                c.place(&frame[d.data_start..d.data_start + len], offset as usize, target);
                if offset == 0 {
                    c.set_header(&frame[..d.data_start]);
                }
                drop(src); // the receive buffer goes back at once
            }
            Store::Held(h) => {
                let packet = match src {
                    Src::Owned(p) => p,
                    Src::Borrowed(f, m) => {
                        let mut p = Packet::from_frame(f);
                        p.meta = *m;
                        p
                    }
                };
                h.insert(HeldFrag { offset, len: len as u32, data_start: d.data_start, packet });
                self.held += 1;
            }
        }
        self.recharge(slot);

        let q = self.q(slot);
        if q.first_in && q.last_in && q.meat == q.len {
            return self.complete(slot);
        }
        Ok(Verdict::Queued)
    }

    #[cold]
    #[inline(never)]
    fn refuse_counted(&mut self, f: Family, reason: DropReason) -> FragDrop {
        count_reason(&mut self.counters[fi(f)], &reason);
        FragDrop { reason, queue_discarded: false, icmp: None }
    }

    /// Admission (5.1): below `high_thresh`, or room made by eviction.
    #[inline]
    fn admit(&mut self, f: Family) -> bool {
        let high = self.cfg.limits(f).high_thresh;
        if high != 0 && self.mem[fi(f)] <= high {
            return true;
        }
        self.admit_slow(f)
    }

    /// [`Self::admit`] at or above the high threshold.
    #[cold]
    #[inline(never)]
    fn admit_slow(&mut self, f: Family) -> bool {
        let l = *self.cfg.limits(f);
        if l.high_thresh == 0 {
            return false;
        }
        if self.mem[fi(f)] <= l.high_thresh {
            return true;
        }
        if self.cfg.policy == MemoryPolicy::DropNew {
            return false;
        }
        let low = l.low_thresh.min(l.high_thresh);
        while self.mem[fi(f)] > low && self.ages[fi(f)].head != NIL {
            let h = self.ages[fi(f)].head;
            let q = self.remove(h);
            self.counters[fi(f)].evicted += 1;
            self.counters[fi(f)].failed += 1;
            self.recycle(q);
        }
        self.mem[fi(f)] <= l.high_thresh
    }

    /// In-order fast path: the previous fragment's queue when this fragment
    /// has the same key (no hashing); `None` sends the caller to the table.
    #[inline]
    fn lookup(&self, d: &FragDesc, scope: &Scope) -> Option<u32> {
        match self.slots.get(self.last as usize) {
            Some(Some(q)) if q.key.matches(d, scope) => Some(self.last),
            _ => None,
        }
    }

    fn create(&mut self, key: FragKey, now: u64) -> u32 {
        let f = key.family;
        let store = match self.cfg.delivery {
            Delivery::Local => Store::Coalesced(Coalesced::default()),
            Delivery::Forward => Store::Held(Held::default()),
        };
        let q = FragQueue {
            key,
            created_ns: now,
            len: 0,
            meat: 0,
            first_in: false,
            last_in: false,
            runs: self.spare_runs.pop().unwrap_or_default(),
            store,
            ecn: 0,
            max_size: 0,
            max_df_size: 0,
            frags: 0,
            charged: 0,
            l3: 0,
            unfrag_len: 0,
            nh_off: 0,
            next_header: 0,
            head_meta: OffloadMeta::default(),
            csum: CsumAcc::Empty,
            len_hint: 0,
            rid: 0,
            peer: NIL,
            prev: NIL,
            next: NIL,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(q);
                s
            }
            None => {
                self.slots.push(Some(q));
                (self.slots.len() - 1) as u32
            }
        };
        self.table.insert(key, slot);
        self.link_tail(f, slot);
        self.queues[fi(f)] += 1;
        if f == Family::V4 {
            let src = key.v4_src();
            let peer = match self.peers.get(&src) {
                Some(&p) => p,
                None => {
                    let p = match self.peer_free.pop() {
                        Some(p) => {
                            self.peer_slots[p as usize] = Peer::default();
                            p
                        }
                        None => {
                            self.peer_slots.push(Peer::default());
                            (self.peer_slots.len() - 1) as u32
                        }
                    };
                    self.peers.insert(src, p);
                    p
                }
            };
            self.peer_slots[peer as usize].refs += 1;
            self.q_mut(slot).peer = peer;
        }
        self.recharge(slot);
        slot
    }

    /// Re-charges a queue's memory after a change.
    #[inline]
    fn recharge(&mut self, slot: u32) {
        let q = self.slots[slot as usize].as_mut().expect("live slot");
        let now = QUEUE_OVERHEAD + q.runs.extra_bytes() + q.store.charge();
        let i = fi(q.key.family);
        self.mem[i] = self.mem[i] - q.charged + now;
        q.charged = now;
    }

    fn link_tail(&mut self, f: Family, slot: u32) {
        let tail = self.ages[fi(f)].tail;
        {
            let q = self.q_mut(slot);
            q.prev = tail;
            q.next = NIL;
        }
        if tail == NIL {
            self.ages[fi(f)].head = slot;
        } else {
            self.q_mut(tail).next = slot;
        }
        self.ages[fi(f)].tail = slot;
    }

    fn unlink(&mut self, f: Family, slot: u32) {
        let (prev, next) = {
            let q = self.q(slot);
            (q.prev, q.next)
        };
        if prev == NIL {
            self.ages[fi(f)].head = next;
        } else {
            self.q_mut(prev).next = next;
        }
        if next == NIL {
            self.ages[fi(f)].tail = prev;
        } else {
            self.q_mut(next).prev = prev;
        }
    }

    /// Takes a queue out of every structure and un-charges it.
    fn remove(&mut self, slot: u32) -> FragQueue {
        let f = self.q(slot).key.family;
        self.unlink(f, slot);
        let q = self.slots[slot as usize].take().expect("live slot");
        self.free.push(slot);
        self.table.remove(&q.key);
        self.mem[fi(f)] -= q.charged;
        self.queues[fi(f)] -= 1;
        self.held -= q.store.held();
        if f == Family::V4 {
            let p = &mut self.peer_slots[q.peer as usize];
            p.refs -= 1;
            if p.refs == 0 {
                self.peers.remove(&q.key.v4_src());
                self.peer_free.push(q.peer);
            }
        }
        q
    }

    /// Returns a dead queue's run list to the pool; its data is released.
    fn recycle(&mut self, mut q: FragQueue) {
        if self.spare_runs.len() < 64 {
            q.runs.clear();
            self.spare_runs.push(std::mem::take(&mut q.runs));
        }
    }

    /// Discards a queue because of `reason` (counted).
    #[cold]
    #[inline(never)]
    fn discard(&mut self, slot: u32, reason: DropReason) -> FragDrop {
        let q = self.remove(slot);
        count_reason(&mut self.counters[fi(q.key.family)], &reason);
        self.recycle(q);
        FragDrop { reason, queue_discarded: true, icmp: None }
    }

    /// `ip_frag_reinit`: forget everything received, restart the timer.
    #[cold]
    #[inline(never)]
    fn reinit(&mut self, slot: u32, now: u64) {
        let f = self.q(slot).key.family;
        self.unlink(f, slot);
        let q = self.q_mut(slot);
        let held = q.store.held();
        q.store = match q.store {
            Store::Coalesced(_) => Store::Coalesced(Coalesced::default()),
            Store::Held(_) => Store::Held(Held::default()),
        };
        q.runs.clear();
        q.created_ns = now;
        q.len = 0;
        q.meat = 0;
        q.first_in = false;
        q.last_in = false;
        q.ecn = 0;
        q.max_size = 0;
        q.max_df_size = 0;
        q.frags = 0;
        q.csum = CsumAcc::Empty;
        q.len_hint = 0;
        self.held -= held;
        self.link_tail(f, slot);
        self.recharge(slot);
        let c = &mut self.counters[fi(f)];
        c.max_dist_reinit += 1;
        c.failed += 1;
    }

    /// Expires the queues of `f` whose timeout passed (the oldest first).
    #[inline]
    fn expire_family(&mut self, f: Family, now: u64) -> usize {
        let h = self.ages[fi(f)].head;
        if h == NIL || self.q(h).created_ns.saturating_add(self.cfg.limits(f).timeout_ns) > now {
            return 0;
        }
        self.expire_family_slow(f, now)
    }

    #[cold]
    #[inline(never)]
    fn expire_family_slow(&mut self, f: Family, now: u64) -> usize {
        let timeout = self.cfg.limits(f).timeout_ns;
        let mut n = 0;
        loop {
            let h = self.ages[fi(f)].head;
            if h == NIL || self.q(h).created_ns.saturating_add(timeout) > now {
                return n;
            }
            let q = self.remove(h);
            n += 1;
            let c = &mut self.counters[fi(f)];
            c.timeouts += 1;
            c.failed += 1;
            if q.first_in && self.cfg.delivery == Delivery::Local {
                let l3 = match &q.store {
                    Store::Coalesced(c) => c.header_and_payload(1280).split_off(q.l3),
                    Store::Held(h) => h.first().map(|x| x.packet.linear()[q.l3..].to_vec()).unwrap_or_default(),
                };
                if may_send_error(f, &l3) && self.pending_icmp.len() < MAX_PENDING_ICMP {
                    self.pending_icmp.push_back(IcmpError::new(f, IcmpKind::ReassemblyTimeExceeded, &l3));
                    self.counters[fi(f)].icmp += 1;
                }
            }
            self.recycle(q);
        }
    }

    /// The queue is complete: checks (ECN, size) and builds the datagram.
    fn complete(&mut self, slot: u32) -> Result<Verdict, FragDrop> {
        let (f, ecn_bits, unfrag, len) = {
            let q = self.q(slot);
            (q.key.family, q.ecn, q.unfrag_len, q.len as usize)
        };
        let Some(ecn_or) = ecn_table(ecn_bits) else {
            return Err(self.discard(slot, DropReason::EcnMismatch));
        };
        let size = match f {
            Family::V4 => unfrag + len,
            Family::V6 => unfrag - 40 + len,
        };
        if size > MAX_DATAGRAM {
            return Err(self.discard(slot, DropReason::Oversize));
        }
        let mut q = self.remove(slot);
        let store = std::mem::replace(&mut q.store, Store::Held(Held::default()));
        let dont_frag = f == Family::V4 && q.max_df_size == q.max_size;
        let mut packet = match store {
            Store::Coalesced(c) => {
                let (mut buf, mut start) = c.into_frame(len);
                match f {
                    Family::V4 => ipv4::finish_header(&mut buf[start + q.l3..], len, dont_frag, ecn_or),
                    Family::V6 => {
                        start = ipv6::finish_header(&mut buf, start, q.l3, unfrag, q.nh_off, q.next_header, len, ecn_or)
                    }
                }
                let tail = buf.len();
                Packet::from_storage(buf, start, tail).expect("bounds are the buffer's")
            }
            Store::Held(h) => self.chain_held(h, &q, len, dont_frag, ecn_or),
        };
        let header_sum = ones_sum(&packet.linear()[q.l3..(q.l3 + unfrag).min(packet.headlen())]);
        packet.meta = OffloadMeta {
            csum: match q.csum {
                CsumAcc::Same(s @ ChecksumState::Unnecessary { .. }) => s,
                CsumAcc::Complete(s) => ChecksumState::Complete { sum: ones_add(s, header_sum) },
                _ => ChecksumState::None,
            },
            ..q.head_meta
        };
        packet.meta.clear_gso();
        let info = DatagramInfo {
            family: f,
            ident: q.key.ident(),
            fragments: q.frags,
            max_frag_size: q.max_size,
            dont_frag,
            l3_offset: q.l3,
        };
        self.counters[fi(f)].reassembled += 1;
        self.recycle(q);
        Ok(Verdict::Complete(Reassembled { packet, info }))
    }

    /// Forwarding mode: the first fragment becomes the head (header fixed in
    /// place), the others are chained on its frag list, trimmed to their data.
    fn chain_held(&self, h: Held, q: &FragQueue, len: usize, dont_frag: bool, ecn_or: u8) -> Packet {
        let mut frags = h.frags.into_iter();
        let first = frags.next().expect("a complete queue has its first fragment");
        let mut head = first.packet;
        head.meta = OffloadMeta::default();
        let _ = head.trim(first.data_start + first.len as usize);
        match q.key.family {
            Family::V4 => ipv4::finish_header(&mut head.linear_mut()[q.l3..], len, dont_frag, ecn_or),
            Family::V6 => {
                let lin = head.linear_mut();
                let start = ipv6::finish_header(lin, 0, q.l3, q.unfrag_len, q.nh_off, q.next_header, len, ecn_or);
                let _ = head.pull(start);
            }
        }
        for f in frags {
            let mut p = f.packet;
            p.meta = OffloadMeta::default();
            let _ = p.trim(f.data_start + f.len as usize);
            let _ = p.pull(f.data_start);
            head.push_frag(p);
        }
        head
    }
}

impl<C: Clock> std::fmt::Debug for Reassembler<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reassembler")
            .field("cfg", &self.cfg)
            .field("queues", &self.queues)
            .field("mem", &self.mem)
            .field("held", &self.held)
            .finish()
    }
}

/// Counts a drop in its reason's counter (and `failed`, except duplicates).
fn count_reason(c: &mut ReasmCounters, r: &DropReason) {
    match r {
        DropReason::Duplicate => {
            c.duplicates += 1;
            return;
        }
        DropReason::Malformed(_) | DropReason::BadHeaderChecksum | DropReason::Jumbogram => c.malformed += 1,
        DropReason::Overlap => c.overlaps += 1,
        DropReason::Oversize => c.oversize += 1,
        DropReason::ZeroLength
        | DropReason::BadLastFragment
        | DropReason::BeyondEnd
        | DropReason::NotMultipleOf8
        | DropReason::EndBeyondMax => c.bad_length += 1,
        DropReason::IncompleteChain => c.incomplete_chain += 1,
        DropReason::EcnMismatch => c.ecn_mismatch += 1,
        DropReason::MemoryLimit => c.mem_limit += 1,
        DropReason::QueueLimit => c.queue_limit += 1,
    }
    c.failed += 1;
}
