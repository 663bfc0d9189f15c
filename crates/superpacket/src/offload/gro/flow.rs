//! Flow key, held aggregates and the bounded flow table (offload-rules 1.1).
//!
//! The kernel's flow pre-match (`gro_list_prepare`) compares the RX hash, the
//! VLAN tag state and the MAC header; the IP layer then refines on protocol
//! and addresses (IPv6: also flow label and extension-header bytes), and the
//! L4 layer on the port pair. Everything that makes two packets "the same
//! flow" is packed into one [`FlowKey`] (64 bytes compared at once); the
//! IPv6 extension-header bytes, rare in practice, are compared separately
//! when their length (part of the key) is not zero.
//!
//! Fields that must be equal *within* a flow for a merge (TTL, TOS, DF,
//! ACK, window, options...) are not part of the key: a difference there
//! flushes the held aggregate instead of starting a second one beside it,
//! exactly as in Linux.

use super::Incoming;
use super::parse::GroHeaders;
use super::template::Shape;
use crate::packet::Packet;
use crate::wire::field::{be32, ne32, ne64};

/// The identity of a flow, built once per packet from its headers.
///
/// Layout (native-endian words of wire bytes): `[0]` MAC bytes 0..8; `[1]`
/// MAC bytes 8..12, IPv6 extension length, tag count, IP protocol; `[2]` up to
/// two VLAN tags (TPID + TCI each); `[3..7]` addresses (IPv4 uses `[3]`);
/// `[7]` port pair and, for IPv6, the version + flow label word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey(pub [u64; 8]);

/// The upper half of an IPv4 key's word 7 (where IPv6 has its version and
/// flow label word, whose version nibble is 6).
const IPV4_MARKER: u64 = 0x4000_0000;

impl FlowKey {
    /// Builds the key of a TCP/UDP frame over IPv4 or IPv6 with at most two
    /// VLAN tags. `frame` must hold the headers `h` describes.
    #[inline]
    pub fn build(frame: &[u8], h: &GroHeaders) -> FlowKey {
        Self::build_on::<false>(frame, h)
    }

    /// [`FlowKey::build`], one copy per path (see [`GroHeaders::parse_on`]).
    #[inline]
    pub fn build_on<const TUNNEL: bool>(frame: &[u8], h: &GroHeaders) -> FlowKey {
        // Fixed-size views of the parsed headers: one bounds check each,
        // none per field. The parse guarantees them (an Ethernet header and
        // at least 20 bytes of IP header, or two tags, fill the first 20
        // bytes), so the panics cannot happen.
        const PARSED: &str = "GroHeaders::parse checked these headers";
        let head: &[u8; 20] = frame.first_chunk().expect(PARSED);
        let ip = &frame[h.l3..];
        let ports = ne32(frame.get(h.l4..).and_then(|l4| l4.first_chunk::<4>()).expect(PARSED), 0) as u64;
        let v6 = h.v6;
        let protocol: u8 = if h.tcp { 6 } else { 17 };
        let mut w = [0u64; 8];
        // A raw IP packet (IP header at 0) has no MAC header: its MAC words
        // stay zero, and its first bytes are not read as addresses.
        let (mac_lo, mac_hi) = if h.l3 == 0 { (0, 0) } else { (ne64(head, 0), ne32(head, 8) as u64) };
        w[0] = mac_lo;
        let tags = h.tags;
        let ext_len = if v6 { (h.l4 - h.l3 - 40) as u64 } else { 0 };
        w[1] = mac_hi | (ext_len & 0xFFFF) << 32 | (tags as u64) << 48 | (protocol as u64) << 56;
        match tags {
            0 => {}
            1 => w[2] = ne32(head, 12) as u64,
            _ => w[2] = ne64(head, 12),
        }
        if v6 {
            let ip: &[u8; 40] = ip.first_chunk().expect(PARSED);
            w[3] = ne64(ip, 8);
            w[4] = ne64(ip, 16);
            w[5] = ne64(ip, 24);
            w[6] = ne64(ip, 32);
            // Version nibble and flow label must match; traffic class is a
            // within-flow field (offload-rules 1.2).
            let first = be32(ip, 0) & 0xF00F_FFFF;
            w[7] = ports | (first as u64) << 32;
        } else {
            let ip: &[u8; 20] = ip.first_chunk().expect(PARSED);
            w[3] = ne64(ip, 12);
            w[7] = ports | IPV4_MARKER << 32;
        }
        FlowKey(w)
    }

    /// A cheap, well-mixed hash of the addresses and ports, for frames that
    /// carry no RSS hash (the kernel uses the flow dissector's hash).
    #[inline]
    pub fn cheap_hash(&self) -> u32 {
        let w = &self.0;
        let x = w[3] ^ w[4].rotate_left(17) ^ w[5].rotate_left(31) ^ w[6].rotate_left(47) ^ w[7];
        let m = (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        ((m ^ (m >> 32)) >> 16) as u32 ^ (m >> 40) as u32
    }

    /// Equality without a `memcmp` call: the XOR of the words, or-ed. Words
    /// 0, 1, 3 and 7 first; when they are equal and say "IPv4, no VLAN tag"
    /// (word 1: tag count 0; word 7: the IPv4 marker), words 2 and 4-6 are
    /// zero in both keys and need no compare.
    #[inline]
    pub fn same(&self, other: &FlowKey) -> bool {
        let (a, b) = (&self.0, &other.0);
        if (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[3] ^ b[3]) | (a[7] ^ b[7]) != 0 {
            return false;
        }
        let untagged_v4 = (a[1] >> 48) & 0xFF == 0 && a[7] >> 32 == IPV4_MARKER;
        untagged_v4 || ((a[2] ^ b[2]) | (a[4] ^ b[4]) | (a[5] ^ b[5]) | (a[6] ^ b[6])) == 0
    }

    /// Length of the IPv6 extension headers (0 for IPv4).
    #[inline]
    pub fn ext_len(&self) -> usize {
        ((self.0[1] >> 32) & 0xFFFF) as usize
    }
}

/// Copies of the first packet's IP and TCP headers, taken when its
/// aggregate is started, so that the merge rules read the aggregate's side
/// from fixed-size arrays (no slicing, no bounds checks) instead of from its
/// packet. The aggregate's own headers change only when it is completed, or
/// get FIN/PSH just before a flush, so the copies stay exact while it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstHeaders {
    /// The first 20 bytes of the IP header (IPv6: its first 20; the rules
    /// read only the traffic class and hop limit there). A parsed IP header
    /// has at least 20 bytes; the array is zeroed first all the same, so no
    /// byte of an earlier aggregate can remain.
    pub ip: [u8; 20],
    /// The TCP header with its options (UDP: zeros). The bytes after its
    /// length are not part of it (the first packet's payload, or zeros)
    /// and no rule reads them: its length is in word 3.
    pub tcp: [u8; 60],
}

impl Default for FirstHeaders {
    fn default() -> Self {
        FirstHeaders { ip: [0; 20], tcp: [0; 60] }
    }
}

impl FirstHeaders {
    /// Copies the headers of a parsed frame (`l3`, `l4` and `payload` are
    /// the offsets its parse found; a TCP header is at most 60 bytes).
    /// A frame with 60 bytes from its TCP header on (a full-sized segment)
    /// has both copied as fixed-size blocks, without `memcpy` calls.
    #[inline(always)]
    pub fn copy_from(&mut self, frame: &[u8], l3: usize, l4: usize, payload: usize, tcp: bool) {
        if tcp
            && let (Some(ip), Some(t)) =
                (frame.get(l3..).and_then(|b| b.first_chunk()), frame.get(l4..).and_then(|b| b.first_chunk()))
        {
            self.ip = *ip;
            self.tcp = *t;
            return;
        }
        let ip = &frame[l3..];
        let n = ip.len().min(20);
        self.ip = [0; 20];
        self.ip[..n].copy_from_slice(&ip[..n]);
        self.tcp = [0; 60];
        if tcp {
            let hl = (payload - l4).min(60);
            self.tcp[..hl].copy_from_slice(&frame[l4..l4 + hl]);
        }
    }
}

/// An aggregate held in the table: the first packet (headers and payload as
/// received) plus the payload of every merged segment, and the state the
/// merge rules need.
#[derive(Debug, Default)]
pub struct Held {
    /// Flow identity.
    pub key: FlowKey,
    /// Its hash ([`FlowKey::cheap_hash`]): the bucket of a packet of this
    /// flow without a receive hash (the plain fast path checks the
    /// aggregate is held there).
    pub key_hash: u32,
    /// Its header layout, which names its header template for the plain
    /// fast path ([`super::template::Templates`]). [`Shape::NONE`] for
    /// every aggregate but a plain TCP one in segment mode (UDP, tunnel,
    /// fraglist), which the plain fast path must not take.
    pub shape: Shape,
    /// The aggregate.
    pub pkt: Packet,
    /// A TCP aggregate's first header bytes, as received (unchanged while
    /// held, and kept once it is delivered, with the key, offsets and
    /// shape, until the slot holds another aggregate): what the tunnel fast
    /// path compares a segment with while the aggregate is held, and the
    /// plain one when the slot is free, to start the next aggregate of the
    /// same flow ([`super::fast::HeadCopy`]).
    pub head: super::fast::HeadCopy,
    /// Its first packet's headers, for the merge rules.
    pub first: FirstHeaders,
    /// A TCP aggregate's pseudo-header sum without the TCP length (its
    /// addresses and protocol, folded; [`super::ip::pseudo_sum`] with
    /// length 0), which completion adds the aggregate's TCP length to
    /// (offload-rules 1.4). The same for every aggregate of the flow, so
    /// kept with the identity when the plain fast path starts the flow's
    /// next aggregate in the slot.
    pub pseudo_addrs: u16,
    /// TCP (else UDP).
    pub tcp: bool,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Fraglist mode: merged packets are chained whole (offload-rules 1.6, 2.3).
    pub fraglist: bool,
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP/UDP header.
    pub l4: usize,
    /// Offset of the first payload byte.
    pub payload: usize,
    /// L3 length of the aggregate so far (the size limit counts from the IP header).
    pub l3_len: usize,
    /// Wire segments in the aggregate (`NAPI_GRO_CB(p)->count`).
    pub count: u32,
    /// Segment size (`gso_size`): the first packet's payload length.
    pub mss: u16,
    /// TCP: the sequence number the next segment must carry.
    pub next_seq: u32,
    /// UDP: the length field of the first datagram (not updated while merging).
    pub ulen: u16,
    /// IPv4 fixed-ID latch (offload-rules 1.3 (b)).
    pub fixed_id: bool,
    /// Arrival time of the first packet, when known (for age flushes).
    pub age_ns: Option<u64>,
    /// At least one packet was merged in.
    pub merged: bool,
    /// A tunnel aggregate's outer state (offload-rules 2.6); then `l3`,
    /// `l4`, `payload`, `first`, `fixed_id` and `v6` describe the inner
    /// headers and `l3_len` counts from the outer IP header.
    pub tunnel: Option<super::tunnel::TunnelHeld>,
}

impl Held {
    /// Starts the state of a new aggregate whose first packet `frame` is
    /// `n` (its TCP sequence number plus payload length `next_seq`, its UDP
    /// length `ulen`, arrival time `arrival_ns`): every field the segments
    /// of an aggregate change. The rest (identity and layout, shape, header
    /// copy, packet, tunnel state) is the caller's, kept as it is when the
    /// slot held the same flow before ([`super::Gro::plain_start_at`]). The
    /// pattern names every field, so that a new one is not forgotten here.
    #[inline(always)]
    pub(crate) fn begin(&mut self, frame: &[u8], n: &Incoming, next_seq: u32, ulen: u16, arrival_ns: Option<u64>) {
        let Held {
            key: _,
            key_hash: _,
            shape: _,
            pkt: _,
            head: _,
            first,
            pseudo_addrs: _,
            tcp: _,
            v6: _,
            fraglist: _,
            l3: _,
            l4: _,
            payload: _,
            l3_len,
            count,
            mss,
            next_seq: held_next_seq,
            ulen: held_ulen,
            fixed_id,
            age_ns,
            merged,
            tunnel: _,
        } = self;
        first.copy_from(frame, n.l3, n.l4, n.payload, n.tcp);
        *l3_len = n.l3_len;
        *count = n.segs;
        *mss = if n.gso_size != 0 { n.gso_size } else { n.payload_len as u16 };
        *held_next_seq = next_seq;
        *held_ulen = ulen;
        *fixed_id = false;
        *age_ns = arrival_ns;
        *merged = false;
    }
}

/// Where a held aggregate is: its bucket and its slab slot. Valid until
/// the table is next changed. (Its place in the bucket is looked up only
/// when it is removed: a fast path then knows it is held in the bucket
/// from one load, [`FlowTable::position_in`], without walking the bucket.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The bucket.
    pub bucket: usize,
    slot: u32,
}

/// [`FlowTable`]'s bucket of a slot that holds no aggregate.
const NOT_HELD: u32 = u32::MAX;

/// The bounded flow table: `buckets` lists of at most `depth` aggregates each,
/// oldest first (offload-rules 1.1: 8 x 8 in Linux).
///
/// The aggregates live in a slab of `buckets x depth` slots allocated once;
/// a bucket is a list of slot numbers. An aggregate is built in its slot
/// and completed there, so it is never moved: only its packet leaves, when
/// it is delivered. (Held in the buckets' own lists, every hold and every
/// flush moved the whole 260-byte [`Held`] with a `memcpy` call, 11% of
/// GRO's time at 64 flows.) A free slot holds an empty packet.
///
/// The buckets' lists are rows of one flat array (`rows[b * depth..]`, the
/// first `lens[b]` used), not a vector each: a lookup loads the slot number
/// straight from the table instead of first loading the bucket's own heap
/// pointer, one dependent load less before the key compare that every
/// packet waits on.
#[derive(Debug)]
pub struct FlowTable {
    slots: Vec<Held>,
    /// The bucket each slot's aggregate is held in ([`NOT_HELD`] when the
    /// slot is free): kept with `rows`, so that `homes[s] == b` exactly
    /// when `s` is in bucket `b`'s row.
    homes: Vec<u32>,
    rows: Vec<u32>,
    lens: Vec<usize>,
    free: FreeSlots,
    depth: usize,
    /// `buckets - 1` when the bucket count is a power of two (a mask, not a
    /// division, picks the bucket).
    bucket_mask: Option<usize>,
}

impl FlowTable {
    /// An empty table.
    pub fn new(buckets: usize, depth: usize) -> FlowTable {
        let buckets = buckets.max(1);
        let depth = depth.max(1);
        let slots = buckets * depth;
        FlowTable {
            slots: (0..slots).map(|_| Held::default()).collect(),
            homes: vec![NOT_HELD; slots],
            rows: vec![0; slots],
            lens: vec![0; buckets],
            free: FreeSlots::all(slots),
            depth,
            bucket_mask: buckets.is_power_of_two().then(|| buckets - 1),
        }
    }

    /// Bucket of a hash (`hash & 7` for the kernel's 8 buckets).
    #[inline]
    pub fn bucket_of(&self, hash: u32) -> usize {
        match self.bucket_mask {
            Some(mask) => hash as usize & mask,
            None => hash as usize % self.lens.len(),
        }
    }

    /// Number of aggregates held.
    #[inline]
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// The slot numbers of bucket `b`, oldest first.
    #[inline]
    fn row(&self, b: usize) -> &[u32] {
        let base = b * self.depth;
        &self.rows[base..base + self.lens[b]]
    }

    /// The aggregate in bucket `b` with this key. `ext` gives the IPv6
    /// extension-header bytes of the new packet (compared byte for byte when
    /// the key says there are some). A plain key never finds a tunnel
    /// aggregate: their keys carry a tunnel mark ([`FlowTable::find_tunnel`]).
    #[inline]
    pub fn find(&self, b: usize, key: &FlowKey, ext: &[u8]) -> Option<Position> {
        for &slot in self.row(b) {
            let held = &self.slots[slot as usize];
            if held.key.same(key) {
                if key.ext_len() != 0 {
                    let lin = held.pkt.linear();
                    if &lin[held.l3 + 40..held.l4] != ext {
                        continue;
                    }
                }
                return Some(Position { bucket: b, slot });
            }
        }
        None
    }

    /// Whether bucket `b` holds an aggregate with this key, whose hash
    /// ([`FlowKey::cheap_hash`]) is `key_hash`: [`FlowTable::find`], each
    /// entry's key compared only where its key hash is the same (a plain
    /// aggregate's is its key's hash; a tunnel one's key, with its tunnel
    /// mark, is never a plain key, whatever its key hash).
    #[inline(always)]
    pub fn holds_plain(&self, b: usize, key: &FlowKey, key_hash: u32, ext: &[u8]) -> bool {
        for &slot in self.row(b) {
            let Some(held) = self.slots.get(slot as usize) else { continue };
            if held.key_hash == key_hash
                && held.key.same(key)
                && (key.ext_len() == 0 || held.pkt.linear().get(held.l3 + 40..held.l4) == Some(ext))
            {
                return true;
            }
        }
        false
    }

    /// [`FlowTable::find`] for a tunnel packet (its inner key, inner IPv6
    /// extension headers `ext`): the outer identity must match too, `t` and
    /// `id` being the new packet's outer headers in `frame` (offload-rules 2.6).
    pub fn find_tunnel(
        &self,
        b: usize,
        key: &FlowKey,
        ext: &[u8],
        t: &super::tunnel::TunnelIn,
        id: &super::tunnel::TunnelId,
        frame: &[u8],
    ) -> Option<Position> {
        for &slot in self.row(b) {
            let held = &self.slots[slot as usize];
            if held.key.same(key) {
                let lin = held.pkt.linear();
                if key.ext_len() != 0 && lin.get(held.l3 + 40..held.l4) != Some(ext) {
                    continue;
                }
                match &held.tunnel {
                    Some(ht) if ht.same(t, id, lin, frame) => {}
                    _ => continue,
                }
                return Some(Position { bucket: b, slot });
            }
        }
        None
    }

    /// The aggregate in slab slot `slot`, held or not (a free slot holds an
    /// empty packet and no tunnel state).
    #[inline]
    pub fn slot(&self, slot: u32) -> Option<&Held> {
        self.slots.get(slot as usize)
    }

    /// Where the aggregate in slot `slot` is, if it is held in bucket `b`
    /// (one load: the slot's home bucket).
    #[inline(always)]
    pub fn position_in(&self, b: usize, slot: u32) -> Option<Position> {
        (*self.homes.get(slot as usize)? as usize == b).then_some(Position { bucket: b, slot })
    }

    /// The slot `slot` exists and holds no aggregate (one load: its home).
    #[inline(always)]
    pub fn is_free(&self, slot: u32) -> bool {
        self.homes.get(slot as usize) == Some(&NOT_HELD)
    }

    /// The slot of the newest aggregate of bucket `b`.
    #[inline]
    pub fn newest(&self, b: usize) -> Option<u32> {
        self.row(b).last().copied()
    }

    /// The aggregate at `at` (one index: the slot was found with it).
    #[inline]
    pub fn get(&self, at: Position) -> &Held {
        &self.slots[at.slot as usize]
    }

    /// The aggregate at `at`, writable.
    #[inline]
    pub fn get_mut(&mut self, at: Position) -> &mut Held {
        &mut self.slots[at.slot as usize]
    }

    /// Takes entry `i` out of bucket `b` (the later ones move up); returns its slot.
    #[inline]
    fn unlink(&mut self, b: usize, i: usize) -> u32 {
        let (base, len) = (b * self.depth, self.lens[b]);
        let slot = self.rows[base + i];
        self.rows.copy_within(base + i + 1..base + len, base + i);
        self.lens[b] = len - 1;
        self.homes[slot as usize] = NOT_HELD;
        slot
    }

    /// Removes the aggregate at `at`, handing it to `f` in its slot (which
    /// `f` must leave with an empty packet: it takes the aggregate's).
    #[inline]
    pub fn remove_with(&mut self, at: Position, f: impl FnOnce(&mut Held)) {
        let index = self.row(at.bucket).iter().position(|&s| s == at.slot);
        debug_assert!(index.is_some(), "a stale position");
        let Some(index) = index else { return };
        let slot = self.unlink(at.bucket, index);
        f(&mut self.slots[slot as usize]);
        self.free.push(slot);
    }

    /// A slot entered as the newest aggregate of bucket `b`, for the caller
    /// to fill in (every field: it holds a stale aggregate's values and an
    /// empty packet). A full bucket first loses its oldest aggregate, handed
    /// to `evict` in its slot (see [`FlowTable::remove_with`]), whose slot
    /// is then reused.
    #[inline(always)]
    pub fn insert(&mut self, b: usize, evict: impl FnOnce(&mut Held)) -> &mut Held {
        let slot = if self.lens[b] >= self.depth {
            let oldest = self.unlink(b, 0);
            evict(&mut self.slots[oldest as usize]);
            oldest
        } else if let Some(free) = self.free.pop() {
            free
        } else {
            // Unreachable: a bucket below `depth` means fewer than
            // `buckets x depth` aggregates, so a slot is free. Grow rather
            // than fail if that ever stops being true.
            self.slots.push(Held::default());
            self.homes.push(NOT_HELD);
            (self.slots.len() - 1) as u32
        };
        self.homes[slot as usize] = b as u32;
        let len = self.lens[b];
        self.rows[b * self.depth + len] = slot;
        self.lens[b] = len + 1;
        &mut self.slots[slot as usize]
    }

    /// [`FlowTable::insert`] into the free slot `slot`, which still holds
    /// the values of the last aggregate started in it (for the caller to
    /// keep what is still right). `None`, and nothing changed, if `b` is
    /// not a bucket or `slot` is not free. A full bucket first loses its
    /// oldest aggregate, handed to `evict`, whose slot is then free. The
    /// lookups after the claim cannot fail (a claimed slot is in range, a
    /// bucket below `depth` has room); they are checked rather than
    /// indexed only because that costs no more here.
    #[inline(always)]
    pub fn insert_free(&mut self, b: usize, slot: u32, evict: impl FnOnce(&mut Held)) -> Option<&mut Held> {
        let len = *self.lens.get(b)?;
        if !self.free.claim(slot) {
            return None;
        }
        let len = if len >= self.depth { self.evict_oldest(b, evict) } else { len };
        // In range: `slot` was free, and a bucket below `depth` has room.
        *self.homes.get_mut(slot as usize)? = b as u32;
        *self.rows.get_mut(b * self.depth + len)? = slot;
        *self.lens.get_mut(b)? = len + 1;
        self.slots.get_mut(slot as usize)
    }

    /// Frees the oldest aggregate's slot of the full bucket `b`, handing it
    /// to `evict` first (see [`FlowTable::remove_with`]); returns the
    /// bucket's length after. Out of line: [`FlowTable::insert_free`]'s
    /// usual bucket has room, and its code does not reload the table's
    /// vectors after a call it does not make.
    #[cold]
    #[inline(never)]
    fn evict_oldest(&mut self, b: usize, evict: impl FnOnce(&mut Held)) -> usize {
        let oldest = self.unlink(b, 0);
        evict(&mut self.slots[oldest as usize]);
        self.free.push(oldest);
        self.lens[b]
    }

    /// Removes every aggregate, bucket by bucket, oldest first within a
    /// bucket (the order of the kernel's `napi_gro_flush`), handing each to
    /// `f` in its slot (see [`FlowTable::remove_with`]).
    ///
    /// The walk ends at the last aggregate: an empty bucket after it is not
    /// visited (`bench peers`' table has 64 buckets, and one flow's
    /// aggregates are in one of them).
    pub fn drain_all(&mut self, mut f: impl FnMut(&mut Held)) {
        let mut left = self.len();
        let mut b = 0;
        while left != 0 && b < self.lens.len() {
            let base = b * self.depth;
            let len = std::mem::take(&mut self.lens[b]);
            for i in 0..len {
                let slot = self.rows[base + i];
                self.homes[slot as usize] = NOT_HELD;
                f(&mut self.slots[slot as usize]);
                self.free.push(slot);
            }
            left = left.saturating_sub(len);
            b += 1;
        }
    }

    /// Removes the aggregates for which `pred` is true (same order as
    /// [`FlowTable::drain_all`]).
    pub fn drain_where(&mut self, mut pred: impl FnMut(&Held) -> bool, mut f: impl FnMut(&mut Held)) {
        for b in 0..self.lens.len() {
            let base = b * self.depth;
            let mut kept = 0;
            for i in 0..self.lens[b] {
                let slot = self.rows[base + i];
                let held = &mut self.slots[slot as usize];
                if pred(held) {
                    f(held);
                    self.homes[slot as usize] = NOT_HELD;
                    self.free.push(slot);
                } else {
                    self.rows[base + kept] = slot;
                    kept += 1;
                }
            }
            self.lens[b] = kept;
        }
    }

    /// Iterates the held aggregates.
    pub fn iter(&self) -> impl Iterator<Item = &Held> {
        (0..self.lens.len()).flat_map(move |b| self.row(b)).map(|&slot| &self.slots[slot as usize])
    }
}

/// The free slots of a [`FlowTable`]: a stack (the slot freed last is
/// used first, its memory likely still in cache) from which a given slot
/// can also be taken ([`FreeSlots::claim`]: the plain fast path starts a
/// flow's next aggregate in the slot of its last one), each slot knowing
/// its place in it.
#[derive(Debug)]
struct FreeSlots {
    stack: Vec<u32>,
    /// Each free slot's index in `stack`, written when it is pushed or
    /// moved; stale for a slot that is not free (a pop leaves it: one
    /// store less per new aggregate), which [`FreeSlots::claim`] sees.
    at: Vec<u32>,
}

impl FreeSlots {
    /// Slots `0..n`, all free; slot 0 is used first.
    fn all(n: usize) -> FreeSlots {
        FreeSlots { stack: (0..n as u32).rev().collect(), at: (0..n as u32).rev().collect() }
    }

    #[inline]
    fn len(&self) -> usize {
        self.stack.len()
    }

    #[inline]
    fn push(&mut self, slot: u32) {
        if let Some(at) = self.at.get_mut(slot as usize) {
            *at = self.stack.len() as u32;
        } else {
            // A slot the table grew by (see `FlowTable::insert`).
            self.at.resize(slot as usize, NOT_HELD);
            self.at.push(self.stack.len() as u32);
        }
        self.stack.push(slot);
    }

    #[inline]
    fn pop(&mut self) -> Option<u32> {
        self.stack.pop()
    }

    /// Whether `slot` is free (its recorded place in the stack holds it).
    #[cfg(test)]
    fn has(&self, slot: u32) -> bool {
        self.at.get(slot as usize).and_then(|&i| self.stack.get(i as usize)) == Some(&slot)
    }

    /// Takes the free slot `slot` out (the top of the stack moves to its
    /// place) and returns `true`; `false`, nothing changed, if it is not
    /// free.
    #[inline(always)]
    fn claim(&mut self, slot: u32) -> bool {
        let Some(&i) = self.at.get(slot as usize) else { return false };
        if self.stack.get(i as usize) != Some(&slot) {
            return false;
        }
        let Some(top) = self.stack.pop() else { return false };
        if let (Some(place), Some(top_at)) = (self.stack.get_mut(i as usize), self.at.get_mut(top as usize)) {
            // `top != slot`: the top moves down into the place `slot` left.
            *place = top;
            *top_at = i;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{Flow, FlowSpec, Transport};
    use crate::wire::TcpFlags;

    fn key_of(frame: &[u8]) -> Option<FlowKey> {
        let h = GroHeaders::parse(frame, crate::wire::Medium::Ethernet).ok()?;
        Some(FlowKey::build(frame, &h))
    }

    /// A slot taken out of the free stack by number is free no more, the
    /// others stay free, and every slot is handed out once: claims, pops
    /// and pushes mixed, checked against a set.
    #[test]
    fn free_slots_claim_pop_and_push_keep_each_slot_once() {
        let mut f = FreeSlots::all(8);
        let mut free: std::collections::BTreeSet<u32> = (0..8).collect();
        let check = |f: &FreeSlots, free: &std::collections::BTreeSet<u32>| {
            for s in 0..8 {
                assert_eq!(f.has(s), free.contains(&s), "slot {s}");
            }
            assert_eq!(f.len(), free.len());
        };
        for step in 0..200u32 {
            let s = step.wrapping_mul(7) % 8;
            match step % 3 {
                0 => {
                    assert_eq!(f.claim(s), free.remove(&s), "claim of slot {s}");
                }
                1 => {
                    if let Some(p) = f.pop() {
                        assert!(free.remove(&p), "slot {p} handed out twice");
                    }
                }
                _ => {
                    if !free.contains(&s) {
                        f.push(s);
                        free.insert(s);
                    }
                }
            }
            check(&f, &free);
        }
    }

    /// `same` (which skips words an untagged IPv4 key leaves zero) agrees
    /// with comparing all 64 bytes, for keys of every shape and for every
    /// header byte of the frame changed.
    #[test]
    fn same_agrees_with_full_equality_for_every_header_byte_changed() {
        let mut keys = Vec::new();
        for t in [Transport::Tcp, Transport::Udp] {
            for v6 in [false, true] {
                for tags in [&[][..], &[(0x8100, 5)], &[(0x88A8, 1), (0x8100, 2)]] {
                    for id in 0..2 {
                        let mut f = Flow::new(FlowSpec::new(t, v6, id).with_vlans(tags).unwrap());
                        let frame = f.frame(100, TcpFlags::empty()).unwrap();
                        let base = key_of(&frame).expect("a GRO candidate");
                        keys.push(base);
                        let headers = frame.len() - 100;
                        for at in 0..headers {
                            let mut changed = frame.clone();
                            changed[at] ^= 0x01;
                            if let Some(k) = key_of(&changed) {
                                assert_eq!(k.same(&base), k == base, "{t:?} v6={v6} tags={tags:?} byte {at}");
                                keys.push(k);
                            }
                        }
                    }
                }
            }
        }
        for a in &keys {
            for b in keys.iter().step_by(7) {
                assert_eq!(a.same(b), a == b);
            }
        }
    }
}
