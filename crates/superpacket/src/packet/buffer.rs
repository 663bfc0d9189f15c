//! The packet buffer: this crate's `sk_buff`.
//!
//! Layout of one [`Packet`]:
//! ```text
//!  storage: [ headroom | linear data | tailroom ]     owned, mutable (headers live here)
//!  segments: [Segment, Segment, ...]                  payload, at most MAX_SEGMENTS
//!  frag_list: [Packet, Packet, ...]                   chained whole packets (fraglist GRO/GSO)
//! ```
//! The packet's bytes are the linear data followed by the segments, in order.
//! The frag list is *not* part of [`Packet::len`]; [`Packet::total_len`]
//! includes it, as Linux's `skb->len` includes `frag_list` data. Likewise
//! [`Packet::chunks`], [`Packet::copy_to`] and [`Packet::to_vec`] cover this
//! packet's own bytes, [`Packet::all_chunks`] and [`Packet::copy_all_to`] the
//! whole packet: anything that writes a packet to the wire or to a file
//! uses the latter (a GRO aggregate of more than [`MAX_SEGMENTS`] + 1
//! packets keeps the rest of its payload on the frag list).
//!
//! Invariants (kept by every method):
//! - `head <= tail <= storage.len()`, and `tail <= MAX_LINEAR_END` (the
//!   offsets are `u32`, so that a [`Packet`] is 128 bytes: every move of
//!   one is a few vector copies, not a `memcpy` call, see
//!   docs/benchmarks.md, "Packet moves");
//! - no segment is empty;
//! - a [`ChecksumState::Partial`] start always points inside the packet: `push`
//!   and `pull` move it with the data, and a `pull` that would cut it off fails.
//!
//! Zero-copy rules: payload bytes are never copied by [`Packet::push`],
//! [`Packet::push_vlan_tag`], [`Packet::pop_vlan_tag`] (they move the 12 MAC
//! address bytes only), [`Packet::split_off`], [`Packet::append_payload_of`]
//! or [`Packet::detach_payload`]; [`Packet::linearize`] and
//! [`Packet::to_vec`] are the explicit copies, for targets without
//! scatter-gather.

use super::meta::{ChecksumState, OffloadMeta};
use super::pool;
use crate::wire::VlanTagView;
use bytes::Bytes;
use std::fmt;
use std::mem::ManuallyDrop;

/// Maximum number of shared payload segments per packet (Linux `MAX_SKB_FRAGS`).
pub const MAX_SEGMENTS: usize = 17;
/// Headroom reserved by [`Packet::from_frame`]: room to push the largest
/// encapsulation the graph adds without reallocating: VXLAN/Geneve over
/// IPv6 (14 + 40 + 8 + 8 = 70 bytes) plus two VLAN tags (8) and a
/// `virtio_net_hdr_v1` (12) is 90. Linux reserves `NET_SKB_PAD` (64) and
/// lets tunnel devices raise `needed_headroom`; one larger constant costs
/// 64 bytes per buffer and saves a reallocation and a copy of the whole
/// linear area per encapsulated packet.
pub const DEFAULT_HEADROOM: usize = 128;
/// The furthest a packet's linear area may end from the start of its
/// buffer, headroom included (4 GiB - 1): far beyond any frame (an IP
/// packet is at most 64 KiB, a BIG TCP one 512 KiB). Operations that
/// would pass it fail ([`PacketError::LinearTooLong`]) or, where they
/// cannot fail, panic.
pub const MAX_LINEAR_END: usize = u32::MAX as usize;

/// `offset` as a linear area offset.
///
/// # Panics
/// If it passes [`MAX_LINEAR_END`]: the callers checked it or document it.
#[inline(always)]
fn linear_offset(offset: usize) -> u32 {
    match u32::try_from(offset) {
        Ok(o) => o,
        Err(_) => linear_too_long(offset),
    }
}

#[cold]
#[inline(never)]
fn linear_too_long(end: usize) -> ! {
    panic!("a packet's linear area would end {end} bytes into its buffer, past MAX_LINEAR_END")
}

/// Errors of packet-buffer operations. None of them leaves the packet modified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketError {
    /// The linear area holds fewer bytes than the operation needs.
    TooShort {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// `pop_vlan_tag` on a frame whose ethertype is not a VLAN TPID.
    NotVlanTagged {
        /// The ethertype found at offset 12.
        ethertype: u16,
    },
    /// A pull would remove the start of a pending (partial) checksum.
    ChecksumStartPulled {
        /// Bytes asked to pull.
        pulled: usize,
        /// Offset of the checksum start.
        csum_start: u16,
    },
    /// A push would move a pending checksum start beyond 65535.
    ChecksumStartOverflow {
        /// Bytes asked to push.
        pushed: usize,
    },
    /// A pull would remove part of an encapsulated packet's outer headers
    /// while its offloads still describe them (decapsulate first: clear
    /// [`crate::packet::OffloadMeta::encap`]).
    EncapsulationPulled {
        /// Bytes asked to pull.
        pulled: usize,
        /// Offset of the outer UDP header.
        outer_transport: u16,
    },
    /// All [`MAX_SEGMENTS`] payload segment slots are in use.
    SegmentsFull,
    /// The linear area would end more than [`MAX_LINEAR_END`] bytes into
    /// its buffer.
    LinearTooLong {
        /// Where it would end.
        end: usize,
    },
    /// An offset beyond the packet's length.
    OutOfRange {
        /// The offset asked for.
        offset: usize,
        /// The packet length.
        len: usize,
    },
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::TooShort { needed, available } => {
                write!(f, "linear area too short: need {needed} bytes, have {available}")
            }
            PacketError::NotVlanTagged { ethertype } => write!(f, "frame has no VLAN tag (ethertype {ethertype:#06x})"),
            PacketError::ChecksumStartPulled { pulled, csum_start } => {
                write!(f, "pull of {pulled} bytes would cut off the pending checksum starting at {csum_start}")
            }
            PacketError::ChecksumStartOverflow { pushed } => {
                write!(f, "push of {pushed} bytes would move the checksum start beyond 65535")
            }
            PacketError::EncapsulationPulled { pulled, outer_transport } => write!(
                f,
                "pull of {pulled} bytes would cut into the tunnel headers (outer UDP at {outer_transport}) of an encapsulated packet"
            ),
            PacketError::LinearTooLong { end } => {
                write!(f, "the linear area would end {end} bytes into its buffer (at most {MAX_LINEAR_END})")
            }
            PacketError::SegmentsFull => write!(f, "all {MAX_SEGMENTS} payload segments are in use"),
            PacketError::OutOfRange { offset, len } => write!(f, "offset {offset} is beyond the packet length {len}"),
        }
    }
}

impl std::error::Error for PacketError {}

/// One payload segment: either a receive buffer moved in whole (owned, no
/// reference count, no allocation to move) or a reference-counted slice
/// shared with other packets.
#[derive(Clone)]
pub enum Segment {
    /// `buf[start..end]` of a buffer this packet owns (a merged packet's
    /// receive buffer).
    Owned {
        /// The buffer.
        buf: Vec<u8>,
        /// First payload byte.
        start: usize,
        /// One past the last payload byte.
        end: usize,
    },
    /// A shared slice.
    Shared(Bytes),
}

impl Segment {
    /// The segment's bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        match self {
            Segment::Owned { buf, start, end } => &buf[*start..*end],
            Segment::Shared(b) => b,
        }
    }
    /// Its length.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Segment::Owned { start, end, .. } => end - start,
            Segment::Shared(b) => b.len(),
        }
    }
    /// True when it holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Memory charged for it: an owned buffer's capacity, a shared slice's length.
    fn truesize(&self) -> usize {
        match self {
            Segment::Owned { buf, .. } => buf.capacity(),
            Segment::Shared(b) => b.len(),
        }
    }
    /// Turns an owned segment into a shared one (one small allocation for the
    /// reference count; no payload copy).
    fn share(&mut self) -> &mut Bytes {
        if let Segment::Owned { buf, start, end } = self {
            let (start, end) = (*start, *end);
            let bytes = Bytes::from(std::mem::take(buf)).slice(start..end);
            *self = Segment::Shared(bytes);
        }
        match self {
            Segment::Shared(b) => b,
            Segment::Owned { .. } => unreachable!("just converted"),
        }
    }
    /// Keeps `at` bytes, returns the rest (shared with this one).
    fn split_off(&mut self, at: usize) -> Segment {
        Segment::Shared(self.share().split_off(at))
    }
    /// Keeps the first `len` bytes.
    fn truncate(&mut self, len: usize) {
        match self {
            Segment::Owned { start, end, .. } => *end = (*start + len).min(*end),
            Segment::Shared(b) => b.truncate(len),
        }
    }
}

/// `items.push(seg)` when `items` has to grow (kept out of the hot path).
#[cold]
#[inline(never)]
fn push_cold(items: &mut Vec<Segment>, seg: Segment) {
    items.push(seg);
}

/// The list of payload segments, at most [`MAX_SEGMENTS`]. An empty list
/// does not allocate; a merged aggregate allocates its list once.
///
/// The list is dropped by hand ([`Segments`]'s `Drop`): the compiler's drop
/// glue of a `Vec<Segment>` is a call even for a list without memory, and
/// every packet has one (most of them empty).
#[derive(Clone, Default)]
struct Segments {
    items: ManuallyDrop<Vec<Segment>>,
}

impl Drop for Segments {
    #[inline]
    fn drop(&mut self) {
        if self.items.capacity() != 0 {
            drop(std::mem::take(&mut *self.items));
        }
    }
}

impl Segments {
    fn len(&self) -> usize {
        self.items.len()
    }
    #[inline]
    fn push(&mut self, seg: Segment) -> Result<(), Segment> {
        if seg.is_empty() {
            return Ok(());
        }
        if self.items.len() == MAX_SEGMENTS {
            return Err(seg);
        }
        self.items.push(seg);
        Ok(())
    }
    fn byte_len(&self) -> usize {
        self.items.iter().map(Segment::len).sum()
    }
    fn clear(&mut self) {
        self.items.clear();
    }
    /// Keeps the first `keep` bytes of the segments, returns the rest.
    fn split_off(&mut self, keep: usize) -> Segments {
        let mut seen = 0;
        for i in 0..self.items.len() {
            let seg_len = self.items[i].len();
            if seen + seg_len <= keep {
                seen += seg_len;
                continue;
            }
            let cut = keep - seen;
            let mut rest = Segments::default();
            if cut == 0 {
                *rest.items = self.items.split_off(i);
            } else {
                let tail = self.items[i].split_off(cut);
                rest.items.push(tail);
                rest.items.extend(self.items.drain(i + 1..));
            }
            return rest;
        }
        Segments::default()
    }
    /// Keeps the first `keep` bytes, releasing the rest.
    fn truncate(&mut self, keep: usize) {
        let mut seen = 0;
        for i in 0..self.items.len() {
            let seg_len = self.items[i].len();
            if seen + seg_len < keep {
                seen += seg_len;
                continue;
            }
            self.items[i].truncate(keep - seen);
            let first_dropped = if self.items[i].is_empty() { i } else { i + 1 };
            self.items.truncate(first_dropped);
            return;
        }
    }
}

/// A packet: owned linear header area with headroom, shared payload segments,
/// a chain of fraglist packets, and offload metadata.
#[derive(Clone, Default)]
pub struct Packet {
    storage: Vec<u8>,
    /// First byte of the linear area in `storage`.
    head: u32,
    /// One past its last byte.
    tail: u32,
    segments: Segments,
    /// Dropped by hand, as the segment list ([`Segments`]): the drop glue
    /// of a `Vec<Packet>` is a call, per packet, for a list that is almost
    /// always empty.
    frag_list: ManuallyDrop<Vec<Packet>>,
    /// Offload metadata (GSO, checksum state, RSS hash, arrival time).
    pub meta: OffloadMeta,
}

// Moves of a packet (into GRO's flow table, out to the delivered vector)
// are inline copies up to 128 bytes; past that each is a `memcpy` call
// (docs/benchmarks.md, "Packet moves").
const _: () = assert!(std::mem::size_of::<Packet>() <= 128);

/// A dropped packet gives its receive buffers back to the pool
/// ([`super::pool`]): the linear storage and owned payload segments (a GRO
/// aggregate's merged receive buffers). Other memory is freed as usual.
///
/// A packet whose buffer was moved out (what GRO leaves of a merged packet,
/// what the graph's walk leaves once a driver took the packet) holds no
/// memory; its drop is a few compares, no calls: the segment list and the
/// frag list are only looked at when they have memory.
impl Drop for Packet {
    #[inline]
    fn drop(&mut self) {
        pool::recycle_from(&mut self.storage);
        // (Segments' own drop finds the list it took empty.)
        if self.segments.items.capacity() != 0 {
            self.recycle_segments();
        }
        if self.frag_list.capacity() != 0 {
            self.drop_frag_list();
        }
    }
}

impl fmt::Debug for Packet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len())
            .field("headlen", &self.headlen())
            .field("headroom", &self.headroom())
            .field("segments", &self.segments.len())
            .field("frag_list", &self.frag_list.len())
            .field("meta", &self.meta)
            .finish()
    }
}

impl Packet {
    /// Drops the packet; one that owns no memory (what GRO leaves of a merged
    /// packet, or of one it moved out) is forgotten without running its drop
    /// glue, which costs a call per field even when there is nothing to
    /// free: 7% of GRO's time at 64 flows, where every other packet is
    /// merged (`superpacket bench peers`, perf).
    #[inline]
    pub fn release(self) {
        if self.owns_nothing() {
            // Nothing to free or recycle: forgetting it leaks nothing.
            std::mem::forget(self);
        }
    }

    /// Empties `pkts` (keeping its capacity) as [`Packet::release`] would
    /// release each packet, without moving the ones that own no memory
    /// out of the vector one by one (a 128-byte copy each: what GRO leaves
    /// of a receive burst is mostly such shells). Those that own memory are
    /// dropped in place first; then none does, and forgetting them all
    /// leaks nothing.
    #[inline]
    pub fn release_all(pkts: &mut Vec<Packet>) {
        for p in pkts.iter_mut() {
            if !p.owns_nothing() {
                drop(std::mem::take(p));
            }
        }
        // A forgotten drain leaves the vector without the packets it
        // covered and drops none, with no loop over them (forgetting them
        // one by one as the drain yields them is a loop of 5 instructions
        // per packet that the compiler keeps). `clear` then has nothing
        // left to drop: it only keeps the result independent of how
        // `drain` leaks.
        std::mem::forget(pkts.drain(..));
        pkts.clear();
    }

    /// Drops every packet of `pkts`, keeping the vector's capacity: the
    /// small pool buffers (frames up to [`pool::COPYBREAK`] copied into
    /// packets of their own, as a guest's) go back to this thread's list
    /// with one access to it for all, where each packet's drop is an
    /// access per buffer; the rest goes as by [`Packet::release_all`].
    /// For a driver dropping a burst it sent.
    pub fn drop_all(pkts: &mut Vec<Packet>) {
        Packet::recycle_small_all(pkts);
        Packet::release_all(pkts);
    }

    /// The first half of [`Packet::drop_all`], for packets the caller
    /// drops later (a driver done with a burst it was lent): the small pool
    /// buffers of `pkts` go back to this thread's list with one access to
    /// it for all. Every packet it reaches is left with no bytes (its
    /// linear area an empty range), owning what it owned but such a buffer;
    /// it stops at the first one that finds the list full.
    pub fn recycle_small_all(pkts: &mut [Packet]) {
        pool::keep_small_all(pkts.iter_mut().filter_map(|p| {
            (p.head, p.tail) = (0, 0);
            pool::is_small_buffer(&p.storage).then_some(&mut p.storage)
        }));
    }

    /// Moves `src` into `self`, leaving `src` with no bytes, its metadata
    /// as it was, and the buffers `self` held, for the caller to drop
    /// (none when `self` was emptied, as a GRO flow table slot is). The
    /// buffers are exchanged field by field: inline, where
    /// `std::mem::swap` of the whole packet is a call that exchanges every
    /// byte (docs/benchmarks.md, "Packet moves").
    #[inline(always)]
    pub fn move_from(&mut self, src: &mut Packet) {
        std::mem::swap(&mut self.storage, &mut src.storage);
        std::mem::swap(&mut self.segments, &mut src.segments);
        std::mem::swap(&mut self.frag_list, &mut src.frag_list);
        // `src`'s linear area is now an empty range of `self`'s former storage.
        (self.head, self.tail) = (src.head, src.tail);
        (src.head, src.tail) = (0, 0);
        self.meta = src.meta;
    }

    /// Moves the packet out, leaving in its place a packet with no bytes
    /// that owns nothing (its metadata kept): `std::mem::take` without
    /// writing a whole default packet (only the buffers and offsets are
    /// reset), for a walk handing its packet to a driver.
    #[inline(always)]
    pub fn move_out(&mut self) -> Packet {
        let (head, tail) = (self.head, self.tail);
        (self.head, self.tail) = (0, 0);
        Packet {
            storage: std::mem::take(&mut self.storage),
            head,
            tail,
            segments: std::mem::take(&mut self.segments),
            frag_list: std::mem::take(&mut self.frag_list),
            meta: self.meta,
        }
    }

    /// No storage, payload segment list or frag list: dropping it would
    /// free nothing.
    #[inline(always)]
    fn owns_nothing(&self) -> bool {
        self.storage.capacity() == 0 && self.segments.items.capacity() == 0 && self.frag_list.capacity() == 0
    }

    /// Gives the owned payload buffers and the segment list back to the pool.
    #[inline(never)]
    fn recycle_segments(&mut self) {
        self.take_segment_buffers(pool::recycle);
        pool::recycle_segment_list(std::mem::take(&mut *self.segments.items));
    }

    /// Drops the frag list's packets; gives the list back to the pool if it
    /// is one of its lists ([`pool::recycle_frag_list`]), else frees it.
    #[cold]
    #[inline(never)]
    fn drop_frag_list(&mut self) {
        pool::recycle_frag_list(std::mem::take(&mut *self.frag_list));
    }

    /// Hands the buffer of every owned payload segment to `f`, in order
    /// (the segments stay, empty).
    #[inline]
    fn take_segment_buffers(&mut self, mut f: impl FnMut(Vec<u8>)) {
        for seg in self.segments.items.iter_mut() {
            if let Segment::Owned { buf, .. } = seg {
                f(std::mem::take(buf));
            }
        }
    }

    /// Moves the packet's owned buffers into `out` for reuse as receive
    /// buffers (what a driver's ring refill does, or a benchmark that
    /// preloads every sample into the same memory, as DPDK's mempool and
    /// tun-rs's buffer arrays do): its linear storage, its owned payload
    /// segments, and those of every frag-list packet. Shared segments and
    /// the rest of the packet are dropped as usual.
    pub fn into_buffers(mut self, out: &mut Vec<Vec<u8>>) {
        if self.storage.capacity() != 0 {
            out.push(std::mem::take(&mut self.storage));
        }
        self.take_segment_buffers(|buf| out.push(buf));
        let mut frags = std::mem::take(&mut *self.frag_list);
        for p in frags.drain(..) {
            p.into_buffers(out);
        }
        pool::recycle_frag_list(frags);
    }

    /// A packet holding a copy of `frame` in its linear area, with
    /// [`DEFAULT_HEADROOM`] bytes of headroom. This is the copy at the I/O edge.
    ///
    /// # Panics
    /// If the frame and the headroom pass [`MAX_LINEAR_END`] (4 GiB).
    pub fn from_frame(frame: &[u8]) -> Packet {
        Packet::from_frame_with_headroom(frame, DEFAULT_HEADROOM)
    }

    /// As [`Packet::from_frame`] with a chosen headroom.
    ///
    /// # Panics
    /// If the frame and the headroom pass [`MAX_LINEAR_END`] (4 GiB).
    pub fn from_frame_with_headroom(frame: &[u8], headroom: usize) -> Packet {
        let mut storage = Vec::with_capacity(headroom + frame.len());
        storage.resize(headroom, 0);
        storage.extend_from_slice(frame);
        let tail = storage.len();
        Packet::with_storage(storage, headroom, tail)
    }

    /// A packet over `storage[head..tail]`, nothing else set (the caller
    /// checked the range; `tail` past [`MAX_LINEAR_END`] panics).
    #[inline]
    fn with_storage(storage: Vec<u8>, head: usize, tail: usize) -> Packet {
        Packet {
            storage,
            head: linear_offset(head),
            tail: linear_offset(tail),
            segments: Segments::default(),
            frag_list: ManuallyDrop::default(),
            meta: OffloadMeta::default(),
        }
    }

    /// As [`Packet::from_frame`], but into a recycled buffer chosen as by
    /// [`Packet::with_linear_len_pooled`]: a frame of more than
    /// [`pool::COPYBREAK`] bytes into a pool buffer (no `mmap`, no page
    /// faults, no zeroing per superpacket), a smaller one into a small
    /// buffer (no allocation per frame once warm). A frame too large for
    /// either gets a buffer of its own.
    ///
    /// # Panics
    /// If the frame and the headroom pass [`MAX_LINEAR_END`] (4 GiB).
    pub fn from_frame_pooled(frame: &[u8]) -> Packet {
        if DEFAULT_HEADROOM + frame.len() > pool::POOL_BUFFER_LEN {
            return Packet::from_frame(frame);
        }
        let mut packet = Packet::with_linear_len_pooled(frame.len());
        packet.linear_mut().copy_from_slice(frame);
        packet
    }

    /// A packet whose linear area is `len` bytes for the caller to fill
    /// (zeros, or the stale bytes of a recycled buffer), with
    /// [`DEFAULT_HEADROOM`]: for drivers that copy a frame from memory
    /// they cannot borrow as one slice (a guest's buffers, read through
    /// `vm-memory`) straight into the packet. A superpacket gets a pool
    /// buffer as by [`Packet::from_frame_pooled`]; a frame of up to
    /// [`pool::COPYBREAK`] bytes a recycled small buffer
    /// ([`pool::take_small_buffer`]: no allocation per frame once warm).
    ///
    /// # Panics
    /// If `len` and the headroom pass [`MAX_LINEAR_END`] (4 GiB).
    #[inline]
    pub fn with_linear_len_pooled(len: usize) -> Packet {
        let (head, tail) = (DEFAULT_HEADROOM, DEFAULT_HEADROOM + len);
        let storage = if Packet::fits_pool_buffer(len) {
            pool::take_buffer()
        } else if tail <= pool::SMALL_BUFFER_LEN {
            pool::take_small_buffer()
        } else {
            vec![0; tail]
        };
        Packet::with_storage(storage, head, tail)
    }

    /// [`Packet::with_linear_len_pooled`] with a small buffer popped from
    /// `small` (the thread's small pool buffers lent to a driver for a
    /// burst, [`pool::lend_small_buffers`]) when the frame takes one and
    /// `small` has one long enough (any other buffer there is dropped): no
    /// access to the thread's list per frame.
    ///
    /// # Panics
    /// As [`Packet::with_linear_len_pooled`].
    #[inline(always)]
    pub fn with_linear_len_from(len: usize, small: &mut Vec<Vec<u8>>) -> Packet {
        let tail = DEFAULT_HEADROOM + len;
        if !Packet::fits_pool_buffer(len)
            && tail <= pool::SMALL_BUFFER_LEN
            && let Some(buf) = small.pop()
            && buf.len() >= tail
        {
            return Packet::with_storage(buf, DEFAULT_HEADROOM, tail);
        }
        Packet::with_linear_len_pooled(len)
    }

    /// A frame of `len` bytes goes into a pool buffer: larger than
    /// [`pool::COPYBREAK`], and fits one with the headroom.
    #[inline]
    fn fits_pool_buffer(len: usize) -> bool {
        len > pool::COPYBREAK && DEFAULT_HEADROOM + len <= pool::POOL_BUFFER_LEN
    }

    /// Takes ownership of a buffer whose bytes `head..tail` are the frame (a
    /// receive buffer read with reserved headroom): no copy.
    ///
    /// # Errors
    /// [`PacketError::OutOfRange`] unless `head <= tail <= storage.len()`;
    /// [`PacketError::LinearTooLong`] if `tail` passes [`MAX_LINEAR_END`].
    pub fn from_storage(storage: Vec<u8>, head: usize, tail: usize) -> Result<Packet, PacketError> {
        if head > tail || tail > storage.len() {
            return Err(PacketError::OutOfRange { offset: tail.max(head), len: storage.len() });
        }
        if tail > MAX_LINEAR_END {
            return Err(PacketError::LinearTooLong { end: tail });
        }
        Ok(Packet::with_storage(storage, head, tail))
    }

    /// Bytes of this packet (linear + segments), excluding the frag list.
    pub fn len(&self) -> usize {
        self.headlen() + self.segments.byte_len()
    }

    /// True if the packet holds no bytes (and no fraglist packets).
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.frag_list.is_empty()
    }

    /// Bytes including every packet on the frag list.
    pub fn total_len(&self) -> usize {
        self.len() + self.frag_list.iter().map(Packet::total_len).sum::<usize>()
    }

    /// [`Packet::total_len`] with a linear packet's (a switched frame's: its
    /// head length) worked out where it is called, for the graph's walk,
    /// once per packet. `total_len` itself stays a call: inlined, it makes
    /// the sums over frag lists that use it (GSO's) calls of their own.
    #[inline(always)]
    pub fn total_len_inline(&self) -> usize {
        if self.is_linear() { self.headlen() } else { self.total_len() }
    }

    /// Length of the linear area (Linux `skb_headlen`).
    #[inline]
    pub fn headlen(&self) -> usize {
        self.linear_end() - self.linear_start()
    }

    /// Free bytes before the linear data.
    pub fn headroom(&self) -> usize {
        self.linear_start()
    }

    /// Where the linear area starts in `storage`.
    #[inline(always)]
    fn linear_start(&self) -> usize {
        self.head as usize
    }

    /// Where it ends.
    #[inline(always)]
    fn linear_end(&self) -> usize {
        self.tail as usize
    }

    /// The linear area.
    #[inline]
    pub fn linear(&self) -> &[u8] {
        &self.storage[self.linear_start()..self.linear_end()]
    }

    /// Prefetches the first two cache lines of the linear area (the
    /// headers of a received frame, [`super::prefetch::prefetch_headers_at`]),
    /// from its address alone: no slice of it is made, so no bounds check
    /// (GRO does this for every packet of a burst, two ahead).
    #[inline(always)]
    pub fn prefetch_headers(&self) {
        super::prefetch::prefetch_headers_at(self.storage.as_ptr().wrapping_add(self.linear_start()));
    }

    /// The linear area, writable.
    pub fn linear_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.linear_start(), self.linear_end());
        &mut self.storage[start..end]
    }

    /// Every byte is in the linear area: no payload segment, no frag list.
    #[inline]
    pub fn is_linear(&self) -> bool {
        self.segments.items.is_empty() && self.frag_list.is_empty()
    }

    /// The payload segments following the linear area.
    pub fn segments(&self) -> &[Segment] {
        &self.segments.items
    }

    /// Whether the packet has a payload segment list allocated (room
    /// reserved, [`Packet::reserve_segments`], or segments), empty or not:
    /// appending to it then allocates nothing while it has room.
    #[inline]
    pub fn has_segment_list(&self) -> bool {
        self.segments.items.capacity() != 0
    }

    /// The packet's bytes as a sequence of slices (linear first): the
    /// scatter-gather view for `writev`/`sendmsg`.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        std::iter::once(self.linear())
            .filter(|s| !s.is_empty())
            .chain(self.segments.items.iter().map(Segment::as_slice))
    }

    /// Every byte of the packet as slices, frag list included: the linear
    /// area, the segments, then each frag-list packet's own chunks. For a GRO
    /// aggregate whose payload overflowed [`MAX_SEGMENTS`] (Linux `frag_list`
    /// semantics) this is the whole superpacket, [`Packet::total_len`] bytes.
    pub fn all_chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks().chain(self.frag_list.iter().flat_map(|p| p.chunks()))
    }

    /// Packets chained on the frag list.
    pub fn frag_list(&self) -> &[Packet] {
        &self.frag_list
    }

    /// Packets chained on the frag list, writable (GRO appends payload to the
    /// last one while it has free segment slots, as Linux's `skb_gro_receive`
    /// does with `NAPI_GRO_CB(p)->last`).
    pub fn frag_list_mut(&mut self) -> &mut [Packet] {
        &mut self.frag_list
    }

    /// Chains a packet on the frag list (fraglist GRO).
    pub fn push_frag(&mut self, p: Packet) {
        self.frag_list.push(p);
    }

    /// Reserves room for `additional` more payload segments (capped at
    /// [`MAX_SEGMENTS`] in all), so that an aggregate allocates its segment
    /// list once instead of growing it merge by merge (GRO).
    /// Room for all [`MAX_SEGMENTS`] on an empty list comes from the pool
    /// ([`pool::take_segment_list`]: no allocation once warm).
    pub fn reserve_segments(&mut self, additional: usize) {
        if additional >= MAX_SEGMENTS && self.segments.items.capacity() == 0 {
            // The list replaced has no memory (nor elements): forgetting it
            // saves the call of its drop glue (GRO's first merge into
            // every aggregate).
            std::mem::forget(std::mem::replace(&mut *self.segments.items, pool::take_segment_list()));
            return;
        }
        let room = MAX_SEGMENTS.saturating_sub(self.segments.len()).min(additional);
        self.segments.items.reserve(room);
    }

    /// Reserves room for `additional` more packets on the frag list (GRO
    /// allocates an aggregate's frag list once). Room for
    /// [`pool::FRAG_LIST_ROOM`] on an empty list comes from the pool
    /// ([`pool::take_frag_list`]: no allocation once warm).
    pub fn reserve_frag_list(&mut self, additional: usize) {
        if additional == pool::FRAG_LIST_ROOM && self.frag_list.capacity() == 0 {
            // The list replaced has no memory: nothing to drop.
            *self.frag_list = pool::take_frag_list();
            return;
        }
        self.frag_list.reserve(additional);
    }

    /// Removes and returns the frag list.
    pub fn take_frag_list(&mut self) -> Vec<Packet> {
        std::mem::take(&mut *self.frag_list)
    }

    /// Memory charged to this packet, for accounting (Linux `skb->truesize`):
    /// the owned storage's capacity, the descriptor, the shared segments'
    /// bytes and the frag list's truesize.
    pub fn truesize(&self) -> usize {
        self.storage.capacity()
            + std::mem::size_of::<Packet>()
            + self.segments.items.iter().map(Segment::truesize).sum::<usize>()
            + self.frag_list.iter().map(Packet::truesize).sum::<usize>()
    }

    /// Prepends `n` bytes (uninitialised content: zeros or stale bytes) and
    /// returns them. Reallocates, copying only the linear area, when headroom
    /// is short (Linux `skb_cow_head` + `skb_push`). A partial checksum start
    /// and an encapsulated packet's header offsets move with the data.
    ///
    /// # Errors
    /// [`PacketError::ChecksumStartOverflow`] if the checksum start (or a
    /// tunnel header offset) would pass 65535; [`PacketError::LinearTooLong`]
    /// if the headroom it needs would move the linear area's end past
    /// [`MAX_LINEAR_END`].
    pub fn push(&mut self, n: usize) -> Result<&mut [u8], PacketError> {
        let grow = match n.checked_sub(self.linear_start()) {
            Some(short) if short > 0 => short.saturating_add(DEFAULT_HEADROOM),
            _ => 0,
        };
        let end = self.linear_end().saturating_add(grow);
        if end > MAX_LINEAR_END {
            return Err(PacketError::LinearTooLong { end });
        }
        let encap = match &self.meta.encap {
            Some(e) => Some(e.shifted(n as isize).ok_or(PacketError::ChecksumStartOverflow { pushed: n })?),
            None => None,
        };
        if let ChecksumState::Partial { start, offset } = self.meta.csum {
            let moved =
                u16::try_from(start as usize + n).map_err(|_| PacketError::ChecksumStartOverflow { pushed: n })?;
            self.meta.csum = ChecksumState::Partial { start: moved, offset };
        }
        self.meta.encap = encap;
        if grow > 0 {
            self.grow_headroom(grow);
        }
        let start = self.linear_start() - n;
        self.head = linear_offset(start);
        Ok(&mut self.storage[start..start + n])
    }

    /// Copies the buffer into one with `extra` more bytes of headroom (the
    /// caller checked the linear area's end stays within [`MAX_LINEAR_END`]).
    fn grow_headroom(&mut self, extra: usize) {
        let mut storage = Vec::with_capacity(extra + self.storage.len());
        storage.resize(extra, 0);
        storage.extend_from_slice(&self.storage);
        self.storage = storage;
        self.head = linear_offset(self.linear_start() + extra);
        self.tail = linear_offset(self.linear_end() + extra);
    }

    /// Removes `n` bytes from the front of the linear area.
    ///
    /// # Errors
    /// [`PacketError::TooShort`] if the linear area is shorter than `n`;
    /// [`PacketError::ChecksumStartPulled`] if a partial checksum starts inside
    /// the pulled bytes; [`PacketError::EncapsulationPulled`] if they reach an
    /// encapsulated packet's outer UDP header (tunnel offsets move otherwise).
    pub fn pull(&mut self, n: usize) -> Result<(), PacketError> {
        if n > self.headlen() {
            return Err(PacketError::TooShort { needed: n, available: self.headlen() });
        }
        if let Some(e) = self.meta.encap {
            let moved = e.shifted(-(n as isize)).filter(|_| usize::from(e.outer_transport) >= n);
            let Some(moved) = moved else {
                return Err(PacketError::EncapsulationPulled { pulled: n, outer_transport: e.outer_transport });
            };
            if let ChecksumState::Partial { start, .. } = self.meta.csum
                && (start as usize) < n
            {
                return Err(PacketError::ChecksumStartPulled { pulled: n, csum_start: start });
            }
            self.meta.encap = Some(moved);
        }
        if let ChecksumState::Partial { start, offset } = self.meta.csum {
            if (start as usize) < n {
                return Err(PacketError::ChecksumStartPulled { pulled: n, csum_start: start });
            }
            self.meta.csum = ChecksumState::Partial { start: start - n as u16, offset };
        }
        self.head = linear_offset(self.linear_start() + n);
        Ok(())
    }

    /// Appends `bytes` to the linear area. Only valid while the packet has no
    /// segments (the linear area must stay in front of them).
    ///
    /// # Errors
    /// [`PacketError::OutOfRange`] if the packet already has segments;
    /// [`PacketError::LinearTooLong`] if the linear area would end past
    /// [`MAX_LINEAR_END`].
    pub fn extend_linear(&mut self, bytes: &[u8]) -> Result<(), PacketError> {
        if self.segments.len() != 0 {
            return Err(PacketError::OutOfRange { offset: self.headlen(), len: self.len() });
        }
        let end = self.linear_end().saturating_add(bytes.len());
        if end > MAX_LINEAR_END {
            return Err(PacketError::LinearTooLong { end });
        }
        self.storage.truncate(self.linear_end());
        self.storage.extend_from_slice(bytes);
        self.tail = linear_offset(end);
        Ok(())
    }

    /// Cuts the packet to `len` bytes (e.g. to remove Ethernet padding after
    /// the IP packet). Segments beyond `len` are released; no payload is copied.
    ///
    /// # Errors
    /// [`PacketError::OutOfRange`] if `len` exceeds the packet length.
    pub fn trim(&mut self, len: usize) -> Result<(), PacketError> {
        if len > self.len() {
            return Err(PacketError::OutOfRange { offset: len, len: self.len() });
        }
        if len <= self.headlen() {
            self.tail = linear_offset(self.linear_start() + len);
            self.segments.clear();
        } else {
            self.segments.truncate(len - self.headlen());
        }
        Ok(())
    }

    /// Inserts an 802.1Q/802.1ad tag as the outermost tag: the 12 MAC address
    /// bytes move 4 bytes forward into the headroom, the rest stays in place.
    ///
    /// # Errors
    /// [`PacketError::TooShort`] if the linear area lacks the 14-byte Ethernet header.
    pub fn push_vlan_tag(&mut self, tpid: u16, tci: u16) -> Result<(), PacketError> {
        if self.headlen() < 14 {
            return Err(PacketError::TooShort { needed: 14, available: self.headlen() });
        }
        self.push(4)?;
        let h = self.linear_start();
        // Fixed-size moves (no memmove call): this runs once per VLAN
        // device a packet leaves through.
        let header = &mut self.storage[h..h + 16];
        let mut macs = [0u8; 12];
        macs.copy_from_slice(&header[4..16]);
        header[..12].copy_from_slice(&macs);
        header[12..14].copy_from_slice(&tpid.to_be_bytes());
        header[14..16].copy_from_slice(&tci.to_be_bytes());
        Ok(())
    }

    /// Removes the outermost VLAN tag (TPID 0x8100, 0x88A8 or 0x9100) and returns
    /// `(tpid, tci)`: the 12 MAC address bytes move 4 bytes back, the rest stays.
    ///
    /// # Errors
    /// [`PacketError::TooShort`] without a full tagged header;
    /// [`PacketError::NotVlanTagged`] if the ethertype is not a VLAN TPID;
    /// [`PacketError::ChecksumStartPulled`] if a partial checksum starts in the tag.
    pub fn pop_vlan_tag(&mut self) -> Result<(u16, u16), PacketError> {
        if self.headlen() < 18 {
            return Err(PacketError::TooShort { needed: 18, available: self.headlen() });
        }
        // 18 bytes are there: the tag view's 4 bytes at 12 are in range.
        let tag = VlanTagView::new_unchecked(&self.linear()[12..16]);
        let (tpid, tci) = (tag.tpid(), tag.tci());
        if !tpid.is_vlan_tpid() {
            return Err(PacketError::NotVlanTagged { ethertype: tpid.0 });
        }
        let tpid = tpid.0;
        if let ChecksumState::Partial { start, .. } = self.meta.csum
            && start < 18
        {
            return Err(PacketError::ChecksumStartPulled { pulled: 4, csum_start: start });
        }
        let h = self.linear_start();
        let header = &mut self.storage[h..h + 16];
        let mut macs = [0u8; 12];
        macs.copy_from_slice(&header[..12]);
        header[4..16].copy_from_slice(&macs);
        self.pull(4)?;
        Ok((tpid, tci))
    }

    /// Appends a shared payload segment (zero-copy).
    ///
    /// # Errors
    /// Gives the segment back if all [`MAX_SEGMENTS`] slots are used; the
    /// caller then chains a packet on the frag list instead, as GRO does.
    pub fn append_segment(&mut self, segment: Bytes) -> Result<(), Bytes> {
        self.segments.push(Segment::Shared(segment)).map_err(|s| match s {
            Segment::Shared(b) => b,
            Segment::Owned { .. } => unreachable!("pushed a shared segment"),
        })
    }

    /// Moves the linear bytes beyond `header_len` into a shared payload segment
    /// without copying them; only the first `header_len` bytes are copied into a
    /// fresh linear area (with [`DEFAULT_HEADROOM`]). After this the payload can
    /// be split and shared freely.
    ///
    /// # Errors
    /// [`PacketError::TooShort`] if `header_len` exceeds the linear area;
    /// [`PacketError::SegmentsFull`] if no segment slot is free;
    /// [`PacketError::LinearTooLong`] if the headers and the headroom
    /// would end past [`MAX_LINEAR_END`].
    pub fn detach_payload(&mut self, header_len: usize) -> Result<(), PacketError> {
        if header_len > self.headlen() {
            return Err(PacketError::TooShort { needed: header_len, available: self.headlen() });
        }
        if header_len == self.headlen() {
            return Ok(());
        }
        if self.segments.len() == MAX_SEGMENTS {
            return Err(PacketError::SegmentsFull);
        }
        let end = DEFAULT_HEADROOM + header_len;
        if end > MAX_LINEAR_END {
            return Err(PacketError::LinearTooLong { end });
        }
        let mut header = Vec::with_capacity(end);
        header.resize(DEFAULT_HEADROOM, 0);
        header.extend_from_slice(&self.linear()[..header_len]);
        let old = std::mem::replace(&mut self.storage, header);
        let payload = Segment::Owned { buf: old, start: self.linear_start() + header_len, end: self.linear_end() };
        self.head = linear_offset(DEFAULT_HEADROOM);
        self.tail = linear_offset(end);
        self.segments.items.insert(0, payload);
        Ok(())
    }

    /// Splits the packet at byte `at`, which must not fall inside the linear
    /// area: returns a new packet (empty linear area with headroom for headers,
    /// default metadata) holding the bytes from `at` on as shared segments.
    /// No payload byte is copied. The frag list stays with `self`.
    ///
    /// # Errors
    /// [`PacketError::OutOfRange`] if `at < headlen()` or `at > len()`.
    pub fn split_off(&mut self, at: usize) -> Result<Packet, PacketError> {
        if at < self.headlen() || at > self.len() {
            return Err(PacketError::OutOfRange { offset: at, len: self.len() });
        }
        let rest = self.segments.split_off(at - self.headlen());
        let mut p = Packet::from_frame(&[]);
        p.segments = rest;
        Ok(p)
    }

    /// Appends the bytes of `other` from offset `skip` on (its headers skipped)
    /// to this packet as shared segments, without copying payload: `other`'s
    /// linear area is frozen into a segment. This is GRO's merge.
    ///
    /// # Errors
    /// Gives `other` back unchanged if `skip` is beyond it or the segments
    /// would not fit in [`MAX_SEGMENTS`]; the caller then chains it on the frag
    /// list instead.
    // Handing the 128-byte packet back by value avoids a heap allocation per
    // refused merge; boxing it would cost more than it saves.
    #[allow(clippy::result_large_err)]
    #[inline]
    pub fn append_payload_of(&mut self, mut other: Packet, skip: usize) -> Result<(), Packet> {
        if self.append_payload_from(&mut other, skip) { Ok(()) } else { Err(other) }
    }

    /// As [`Packet::append_payload_of`], without moving `other`: on success
    /// its storage and segments are moved into this packet (no payload copy)
    /// and `other` is left with no bytes (its metadata and frag list stay);
    /// on failure (`skip` beyond it, or the segments would not fit in
    /// [`MAX_SEGMENTS`]) nothing changes and `false` is returned. GRO's merge
    /// uses this to move only the buffer, not the whole packet.
    #[inline]
    pub fn append_payload_from(&mut self, other: &mut Packet, skip: usize) -> bool {
        let headlen = other.headlen();
        let linear_part = headlen.saturating_sub(skip);
        if linear_part > 0 && other.segments.len() == 0 {
            // The usual GRO case: one received buffer, headers skipped.
            if self.segments.len() >= MAX_SEGMENTS {
                return false;
            }
            let (start, end) = (other.linear_start() + skip, other.linear_end());
            other.head = 0;
            other.tail = 0;
            let items = &mut self.segments.items;
            if items.len() < items.capacity() {
                // No reallocation can happen here, so the segment is written
                // straight into its slot (no stack temporary, which the CPU
                // would have to re-read across two stores).
                items.push(Segment::Owned { buf: std::mem::take(&mut other.storage), start, end });
            } else {
                push_cold(items, Segment::Owned { buf: std::mem::take(&mut other.storage), start, end });
            }
            return true;
        }
        self.append_payload_general(other, skip)
    }

    /// [`Packet::append_payload_from`] for a packet that has payload
    /// segments of its own or whose headers reach past its linear area: out
    /// of line, so that GRO's usual case (one buffer) stays a short inlined
    /// path without this one's register saves.
    #[inline(never)]
    fn append_payload_general(&mut self, other: &mut Packet, skip: usize) -> bool {
        let linear_part = other.headlen().saturating_sub(skip);
        if skip > other.len() {
            return false;
        }
        let needed = usize::from(linear_part > 0) + other.segments.len();
        if self.segments.len() + needed > MAX_SEGMENTS {
            return false;
        }
        let storage = std::mem::take(&mut other.storage);
        let (head, tail) = (other.linear_start(), other.linear_end());
        other.head = 0;
        other.tail = 0;
        let mut segments = std::mem::take(&mut other.segments);
        let mut rest = if linear_part > 0 {
            let _ = self.segments.push(Segment::Owned { buf: storage, start: head + skip, end: tail });
            segments
        } else {
            segments.split_off(skip - (tail - head))
        };
        for seg in std::mem::take(&mut *rest.items) {
            let _ = self.segments.push(seg);
        }
        true
    }

    /// Fills `parts` with the packet's chunks in order (the frag list's
    /// included, as [`Packet::all_chunks`]), for a vectored write without a
    /// copy; returns how many, or `None` if they do not fit in `parts` (the
    /// caller then gathers them with [`Packet::copy_all_to`]).
    pub fn gather_chunks<'a>(&'a self, parts: &mut [&'a [u8]]) -> Option<usize> {
        let mut n = 0;
        for c in self.all_chunks() {
            *parts.get_mut(n)? = c;
            n += 1;
        }
        Some(n)
    }

    /// Copies the segments into the linear area (for targets without
    /// scatter-gather). The frag list is left alone.
    ///
    /// # Panics
    /// If the linear area would end past [`MAX_LINEAR_END`] (4 GiB).
    pub fn linearize(&mut self) {
        if self.segments.len() == 0 {
            return;
        }
        let end = self.linear_end() + self.segments.byte_len();
        let tail = linear_offset(end);
        self.storage.truncate(self.linear_end());
        self.storage.reserve(end - self.storage.len());
        for s in self.segments.items.iter() {
            self.storage.extend_from_slice(s.as_slice());
        }
        self.tail = tail;
        self.segments.clear();
    }

    /// Copies the packet's bytes (not the frag list) into `out`, replacing its
    /// content. `out` is reused, so a caller looping over packets allocates once.
    pub fn copy_to(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.len());
        for c in self.chunks() {
            out.extend_from_slice(c);
        }
    }

    /// Copies every byte of the packet, frag list included ([`Packet::all_chunks`]),
    /// into `out`, replacing its content: the whole superpacket of a GRO
    /// aggregate whose payload overflowed [`MAX_SEGMENTS`].
    pub fn copy_all_to(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.total_len());
        for c in self.all_chunks() {
            out.extend_from_slice(c);
        }
    }

    /// The packet's bytes (not the frag list) as one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.copy_to(&mut v);
        v
    }

    /// Copies `buf.len()` bytes starting at `offset` into `buf`, across the
    /// linear/segment boundary.
    ///
    /// # Errors
    /// [`PacketError::OutOfRange`] if the range passes the end of the packet.
    pub fn read_at(&self, offset: usize, buf: &mut [u8]) -> Result<(), PacketError> {
        let end = offset.checked_add(buf.len()).filter(|&e| e <= self.len());
        let Some(_) = end else {
            return Err(PacketError::OutOfRange { offset: offset.saturating_add(buf.len()), len: self.len() });
        };
        let mut pos = 0; // position of the current chunk in the packet
        let mut filled = 0;
        for c in self.chunks() {
            let chunk_end = pos + c.len();
            if chunk_end > offset + filled && filled < buf.len() {
                let from = offset + filled - pos;
                let n = (c.len() - from).min(buf.len() - filled);
                buf[filled..filled + n].copy_from_slice(&c[from..from + n]);
                filled += n;
            }
            pos = chunk_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
