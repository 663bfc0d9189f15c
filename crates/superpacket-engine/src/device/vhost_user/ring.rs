//! The port's own walk of a split virtqueue (virtio 1.2, 2.7): the
//! descriptor table, the available ring and the used ring resolved to host
//! slices once ([`Rings::new`]), the available index read once per burst
//! ([`AvailCursor`]), chains followed descriptor by descriptor
//! ([`Rings::walk`]).
//!
//! `virtio-queue`'s iterator (`Queue::iter`, `DescriptorChain`) looks every
//! ring entry and descriptor up in guest memory by guest address (a region
//! search per access) and loads the available index twice per chain; in
//! the 64-byte loop that was about 1,300 instructions of the 4,759 the
//! engine spent per frame (docs/benchmarks.md, "vhost-user backends").
//! DPDK's vhost translates the rings once when the frontend sets them up
//! and reads the available index once per burst; this does the same, with
//! `vm-memory` still behind every access: each ring is a bounds-checked
//! [`VolatileSlice`] of one mapped region (a ring that is not inside one
//! region stops the queue, as DPDK refuses a ring it cannot translate to
//! one host range), descriptors and ring entries are volatile loads at
//! offsets checked against the slice, and buffer addresses are checked by
//! the callers before any copy. `vhost-user-backend` and `vm-memory` keep
//! the protocol and the memory regions; only the walk is ours.
//!
//! A chain is followed as `virtio-queue` follows it, so that the faults a
//! guest can cause are the same: at most as many descriptors as its table
//! holds (a loop ends there), an index outside the table ends it, one level
//! of indirect table (a multiple of 16 bytes, inside one region), no more
//! than 2^32 bytes in all (virtio 1.2, 2.7.5.2). A chain cut short is
//! [`QueueFault::Chain`]; nothing a guest writes panics.

use super::virtq::QueueFault;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use virtio_queue::desc::split::Descriptor;
use virtio_queue::{Queue, QueueT};
use vm_memory::{
    Bytes, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion, MemoryRegionAddress, VolatileMemory,
    VolatileSlice,
};

/// The guest memory the port maps (no dirty-page bitmap).
pub type GuestMem = GuestMemoryMmap<()>;

/// Bytes of one descriptor.
const DESC_LEN: usize = 16;

/// How far ahead of the chain being taken [`Rings::prefetch_next`]
/// prefetches descriptors: a burst of the 64-byte loop (about 11 chains)
/// and more.
const PREFETCH_DESC_AHEAD: u16 = 24;

/// Descriptors are prefetched in groups too: once fewer than this many
/// chains ahead are covered, up to [`PREFETCH_DESC_AHEAD`]. At least
/// [`PREFETCH_BUF_AHEAD`] plus one, so that every buffer prefetch reads a
/// descriptor an earlier call prefetched.
const PREFETCH_DESC_REFILL: u16 = 16;

/// How far ahead it prefetches buffers, whose descriptors must have
/// arrived first (prefetched at least four chains earlier).
const PREFETCH_BUF_AHEAD: u16 = 12;

const _: () = assert!(PREFETCH_DESC_REFILL > PREFETCH_BUF_AHEAD && PREFETCH_DESC_AHEAD > PREFETCH_DESC_REFILL);

/// Buffers are prefetched in groups: once fewer than this many chains
/// ahead are covered, up to [`PREFETCH_BUF_AHEAD`] at once.
const PREFETCH_BUF_REFILL: u16 = 4;

/// Where the available index was when last loaded, kept by the port per
/// queue between calls so that the index (a line the guest writes from
/// another CPU) is loaded once per burst, not per chain. It is used only
/// while the queue is where the cursor left it (same available ring, the
/// same `next_avail`); anything else (a reset, a new ring, another queue)
/// loads the index again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AvailCursor {
    /// Guest address of the available ring it was loaded from.
    ring: u64,
    /// `next_avail` after the last chain taken through this cursor.
    next: u16,
    /// The available index as loaded (at most a queue size ahead of `next`).
    avail: u16,
    /// `ring`, `next` and `avail` hold a load.
    loaded: bool,
    /// Chains before this one had their descriptor prefetched
    /// ([`Rings::prefetch_next`]); meaningful only between `next` and
    /// `avail`.
    desc_to: u16,
    /// Chains before this one had their first buffer prefetched.
    buf_to: u16,
}

impl AvailCursor {
    /// Forgets the load (the next chain loads the index).
    pub fn reset(&mut self) {
        self.loaded = false;
    }

    /// Follows `q` after the caller moved its `next_avail` back (chains
    /// given back): the index loaded is still ahead of it.
    pub fn rewound(&mut self, q: &Queue) {
        self.next = q.next_avail();
    }

    /// Chains from `next` on that a prefetch stage whose mark is `mark`
    /// covered, of the `ahead` loaded: none for a mark outside
    /// `[next, next + ahead]` (the queue was rewound past it, or the ring
    /// is new).
    #[inline]
    fn covered(&self, mark: u16, ahead: u16) -> u16 {
        Some(mark.wrapping_sub(self.next)).filter(|&n| n <= ahead).unwrap_or(0)
    }
}

/// One queue's rings as [`Rings::cached`] last resolved them, kept by the
/// port between calls (DPDK's vhost translates a ring once, when the
/// frontend sets it).
#[derive(Debug, Default)]
pub struct RingCache {
    held: Option<HeldRings>,
}

impl RingCache {
    /// Drops what it holds (its reference to the guest memory with it).
    pub fn clear(&mut self) {
        self.held = None;
    }
}

#[derive(Debug)]
struct HeldRings {
    /// Keeps the mapping the host addresses point into.
    mem: Arc<GuestMem>,
    /// Descriptor table, available ring, used ring (guest addresses), size.
    key: (u64, u64, u64, u16),
    /// Host addresses of the three rings.
    desc: usize,
    avail: usize,
    used: usize,
}

/// One queue's three rings as host slices of guest memory.
#[derive(Debug)]
pub struct Rings<'m> {
    mem: &'m GuestMem,
    /// `size` descriptors.
    desc: VolatileSlice<'m>,
    /// flags, idx, ring[size].
    avail: VolatileSlice<'m>,
    /// flags, idx, ring[size] of (id, len).
    used: VolatileSlice<'m>,
    /// A power of two (split virtqueues: virtio 1.2, 2.7; `virtio-queue`
    /// sets no other, and [`Rings::new`] refuses one).
    size: u16,
    /// `size - 1`: a ring slot is `index & mask`, `index % size` without a
    /// division per ring access.
    mask: u16,
    /// The region [`Rings::slice`] found a buffer in last (its guest start
    /// and the whole region as a slice), tried first for the next one.
    region: Cell<Option<(u64, VolatileSlice<'m>)>>,
}

/// Byte lengths of a queue's three rings for `size` entries: what
/// [`Rings::new`] resolves and [`Rings::cached`] rebuilds from the kept host
/// addresses (its `unsafe` relies on the two being the same).
struct RingLens {
    desc: usize,
    /// flags, idx, ring[size] of u16.
    avail: usize,
    /// flags, idx, ring[size] of (id, len).
    used: usize,
}

impl RingLens {
    fn of(size: u16) -> RingLens {
        let n = usize::from(size);
        RingLens { desc: DESC_LEN * n, avail: 4 + 2 * n, used: 4 + 8 * n }
    }
}

impl<'m> Rings<'m> {
    /// Resolves the rings of `q` in `mem` (three region lookups).
    ///
    /// # Errors
    /// [`QueueFault::Address`]: a ring is not inside one region of guest
    /// memory, or the queue's size is not a power of two.
    pub fn new(q: &Queue, mem: &'m GuestMem) -> Result<Rings<'m>, QueueFault> {
        let size = q.size();
        if !size.is_power_of_two() {
            return Err(QueueFault::Address);
        }
        let lens = RingLens::of(size);
        let slice = |addr: u64, len: usize| {
            GuestMemoryBackend::get_slice(mem, GuestAddress(addr), len).map_err(|_| QueueFault::Address)
        };
        // Host addresses aligned as virtio aligns the rings (2.7: 16, 2,
        // 4 bytes), which the unchecked entry reads rely on
        // ([`Rings::avail_entry`], [`Rings::desc_addr`]).
        let slice = |addr: u64, len: usize, align: usize| {
            slice(addr, len).and_then(|vs| {
                if (vs.ptr_guard().as_ptr() as usize).is_multiple_of(align) { Ok(vs) } else { Err(QueueFault::Address) }
            })
        };
        Ok(Rings {
            mem,
            desc: slice(q.desc_table(), lens.desc, 16)?,
            avail: slice(q.avail_ring(), lens.avail, 2)?,
            used: slice(q.used_ring(), lens.used, 4)?,
            size,
            mask: size - 1,
            region: Cell::new(None),
        })
    }

    /// The rings of `q` in `mem` from `cache` when it holds them (the same
    /// memory, addresses and size), else resolved ([`Rings::new`]) and
    /// kept there: no lookup per call while the queue stays as it is.
    ///
    /// # Errors
    /// As [`Rings::new`].
    pub fn cached(q: &Queue, mem: &'m Arc<GuestMem>, cache: &mut RingCache) -> Result<Rings<'m>, QueueFault> {
        let key = (q.desc_table(), q.avail_ring(), q.used_ring(), q.size());
        if let Some(held) = &cache.held
            && held.key == key
            && Arc::ptr_eq(&held.mem, mem)
        {
            let lens = RingLens::of(key.3);
            let slice = |at: usize, len: usize| {
                // SAFETY: `at` is the host address `get_slice` gave for
                // `len` bytes of `held.mem` (a `VolatileSlice` of one mapped
                // region, `Rings::new` below, of the same `RingLens`), which
                // the cache keeps alive with its `Arc` (a region is unmapped
                // only when the last reference to its memory goes) and which
                // is the `mem` borrowed for `'m`. Guest memory is only ever
                // accessed through volatile accesses and raw-pointer copies.
                unsafe { VolatileSlice::new(at as *mut u8, len) }
            };
            return Ok(Rings {
                mem,
                desc: slice(held.desc, lens.desc),
                avail: slice(held.avail, lens.avail),
                used: slice(held.used, lens.used),
                size: key.3,
                mask: key.3 - 1,
                region: Cell::new(None),
            });
        }
        let rings = Rings::new(q, mem)?;
        cache.held = Some(HeldRings {
            mem: Arc::clone(mem),
            key,
            desc: rings.desc.ptr_guard().as_ptr() as usize,
            avail: rings.avail.ptr_guard().as_ptr() as usize,
            used: rings.used.ptr_guard().as_ptr() as usize,
        });
        Ok(rings)
    }

    /// The guest memory the rings are in.
    pub fn mem(&self) -> &'m GuestMem {
        self.mem
    }

    /// The `len` bytes of guest memory at `addr` as one host slice, if
    /// they lie in one region (`None` also for bytes across two regions,
    /// which only `vm-memory`'s region walk copies). The region found last
    /// is tried first: a buffer of the usual guest (one region, or a few
    /// large ones) costs one bounds check, not a region search
    /// (`vm-memory`'s `get_slice` searches the regions at every call). The
    /// slice is `vm-memory`'s own (`subslice` of the region's), so it is as
    /// bounds-checked as a `get_slice`.
    #[inline(always)]
    pub fn slice(&self, addr: GuestAddress, len: usize) -> Option<VolatileSlice<'m>> {
        if let Some((start, region)) = self.region.get()
            && let Some(off) = addr.0.checked_sub(start)
            && let Ok(off) = usize::try_from(off)
            && let Ok(vs) = region.subslice(off, len)
        {
            return Some(vs);
        }
        self.slice_slow(addr, len)
    }

    /// [`Rings::slice`] through a region search, remembering the region.
    #[cold]
    fn slice_slow(&self, addr: GuestAddress, len: usize) -> Option<VolatileSlice<'m>> {
        let r = self.mem.find_region(addr)?;
        let whole = r.get_slice(MemoryRegionAddress(0), usize::try_from(r.len()).ok()?).ok()?;
        self.region.set(Some((r.start_addr().0, whole)));
        let off = usize::try_from(addr.0 - r.start_addr().0).ok()?;
        whole.subslice(off, len).ok()
    }

    /// Takes the next available chain's head from `q` (moving its
    /// `next_avail`), loading the available index only when `cursor` has
    /// no chain left from its last load; `None` when the guest made none
    /// available.
    ///
    /// # Errors
    /// [`QueueFault::AvailIndex`]: the index is more than a queue size
    /// ahead of the device.
    pub fn next_head(&self, q: &mut Queue, cursor: &mut AvailCursor) -> Result<Option<u16>, QueueFault> {
        let next = q.next_avail();
        let ring = q.avail_ring();
        if !(cursor.loaded && cursor.ring == ring && cursor.next == next && cursor.avail != next) {
            let avail = u16::from_le(self.avail.load::<u16>(2, Ordering::Acquire).map_err(|_| QueueFault::Address)?);
            if avail.wrapping_sub(next) > self.size {
                cursor.reset();
                return Err(QueueFault::AvailIndex);
            }
            let (desc_to, buf_to) = if cursor.ring == ring { (cursor.desc_to, cursor.buf_to) } else { (next, next) };
            *cursor = AvailCursor { ring, next, avail, loaded: true, desc_to, buf_to };
            if avail == next {
                return Ok(None);
            }
        }
        let head = self.avail_entry(next);
        let next = next.wrapping_add(1);
        q.set_next_avail(next);
        cursor.next = next;
        Ok(Some(head))
    }

    /// Prefetches for the chains `cursor` has loaded but not yet taken
    /// (called after [`Rings::next_head`]), in two stages, each in groups
    /// (see `PREFETCH_DESC_REFILL`, `PREFETCH_BUF_REFILL`): the
    /// descriptors of the chains up to `PREFETCH_DESC_AHEAD` ahead, and
    /// the first buffer's first lines of those up to `PREFETCH_BUF_AHEAD`
    /// ahead, whose descriptors an earlier call prefetched (`for_write`: a
    /// receive buffer the port will store into). Each is a line the
    /// frontend last wrote from its CPU: the first call after a load of
    /// the index starts the transfers of a whole burst at once, so they
    /// overlap one another and the work on the current chain instead of
    /// stalling each frame's walk and copy (DPDK's vhost prefetches its
    /// bursts the same way); later calls find both stages covered and
    /// return after a few compares, until one runs low. Only hints, so
    /// unchecked beyond what keeps them inside the mapping: ring entries
    /// are read at offsets masked into the ring, a head past the table is
    /// taken modulo its size, a
    /// buffer's host address is its offset in the region found last
    /// clamped into that region (a buffer elsewhere, or an indirect
    /// table, hints a line that is not the buffer's), and nothing a walk
    /// decides depends on them.
    #[inline]
    pub fn prefetch_next(&self, cursor: &mut AvailCursor, for_write: bool) {
        let ahead = cursor.avail.wrapping_sub(cursor.next);
        if !cursor.loaded || ahead == 0 || ahead > self.size {
            return;
        }
        let (descs, bufs) = (cursor.covered(cursor.desc_to, ahead), cursor.covered(cursor.buf_to, ahead));
        if descs >= PREFETCH_DESC_REFILL.min(ahead) && bufs >= PREFETCH_BUF_REFILL.min(ahead) {
            return;
        }
        self.prefetch_groups(cursor, for_write, ahead);
    }

    /// The stages of [`Rings::prefetch_next`] that ran low, `ahead`
    /// chains loaded and not taken.
    #[inline(never)]
    fn prefetch_groups(&self, cursor: &mut AvailCursor, for_write: bool, ahead: u16) {
        let next = cursor.next;
        let covered = cursor.covered(cursor.desc_to, ahead);
        if covered < PREFETCH_DESC_REFILL.min(ahead) {
            let to = ahead.min(PREFETCH_DESC_AHEAD);
            for c in covered..to {
                let at = DESC_LEN * usize::from(self.avail_entry(next.wrapping_add(c)) & self.mask);
                super::guest_copy::prefetch_at(self.desc.ptr_guard().as_ptr().wrapping_add(at), false);
            }
            cursor.desc_to = next.wrapping_add(to);
        }
        // Buffers in groups: a buffer's page is usually not in the TLB
        // (a frontend's 4 KiB pages, one per buffer), and a prefetch waits
        // for its page walk before it retires; walks started back to back
        // overlap, one per chain would each stall.
        let from = cursor.covered(cursor.buf_to, ahead);
        if from >= PREFETCH_BUF_REFILL.min(ahead) {
            return;
        }
        let to = ahead.min(PREFETCH_BUF_AHEAD);
        cursor.buf_to = next.wrapping_add(to);
        let Some(hint) = self.region.get().map(BufferHint::of).or_else(|| {
            self.slice_slow(GuestAddress(self.desc_addr(self.avail_entry(next))), 1)?;
            self.region.get().map(BufferHint::of)
        }) else {
            return;
        };
        for c in from..to {
            let at = hint.host(self.desc_addr(self.avail_entry(next.wrapping_add(c))));
            super::guest_copy::prefetch_pair_at(at, for_write);
        }
    }

    /// The host address [`Rings::prefetch_next`] hints for a buffer at
    /// guest address `addr` (see [`BufferHint`]), after a buffer lookup
    /// found its region; `None` before.
    #[cfg(test)]
    pub fn buffer_hint(&self, addr: u64) -> Option<*const u8> {
        self.region.get().map(|r| BufferHint::of(r).host(addr))
    }

    /// The buffer address of descriptor `head` of the table, `head` taken
    /// modulo the size (for a hint: the walk checks a head against the
    /// table instead).
    #[inline(always)]
    fn desc_addr(&self, head: u16) -> u64 {
        let at = DESC_LEN * usize::from(head & self.mask);
        debug_assert!(at + DESC_LEN <= self.desc.len());
        // SAFETY: `self.desc` is one mapped region's `RingLens::desc =
        // DESC_LEN * size` bytes (`Rings::new`, or `Rings::cached` from
        // its host address), so the descriptor at `at` (`head & mask <
        // size`) lies inside it; its first 8 bytes (`addr`) are an aligned
        // u64 (the table's host address is 16-byte aligned, `Rings::new`).
        // Guest memory is read with a volatile load, never a reference.
        let addr = unsafe { self.desc.ptr_guard().as_ptr().add(at).cast::<u64>().read_volatile() };
        u64::from_le(addr)
    }

    /// The head the available ring names in its `nth` entry (`nth` modulo
    /// the size), as the guest wrote it (the caller checks it against the
    /// table).
    #[inline(always)]
    fn avail_entry(&self, nth: u16) -> u16 {
        let slot = 4 + 2 * usize::from(nth & self.mask);
        debug_assert!(slot + 2 <= self.avail.len());
        // SAFETY: `self.avail` is one mapped region's `RingLens::avail =
        // 4 + 2 * size` bytes (`Rings::new`, or `Rings::cached` from its
        // host address), so entry `nth & mask < size` at `slot` lies
        // inside it, an aligned u16 (the ring's host address is 2-byte
        // aligned, `Rings::new`). Guest memory is read with a volatile
        // load, never a reference.
        let head = unsafe { self.avail.ptr_guard().as_ptr().add(slot).cast::<u16>().read_volatile() };
        u16::from_le(head)
    }

    /// Follows the chain at `head`, calling `visit` with every descriptor
    /// that describes a buffer (not the one naming an indirect table), in
    /// order; returns how many it visited (at most `u16::MAX`: more is
    /// counted as that many).
    ///
    /// # Errors
    /// [`QueueFault::Chain`]: the chain is cut short (see the module
    /// documentation) or empty; else the first error of `visit`.
    pub fn walk(
        &self,
        head: u16,
        mut visit: impl FnMut(&Descriptor) -> Result<(), QueueFault>,
    ) -> Result<u16, QueueFault> {
        let mut table = self.desc;
        let (mut table_size, mut next, mut ttl) = (self.size, head, self.size);
        let (mut indirect, mut bytes, mut visited) = (false, 0u32, 0u16);
        loop {
            if ttl == 0 || next >= table_size {
                return Err(QueueFault::Chain);
            }
            let d = table.get_ref::<Descriptor>(DESC_LEN * usize::from(next)).map_err(|_| QueueFault::Chain)?.load();
            if d.refers_to_indirect_table() {
                let len = d.len() as usize;
                if indirect || !len.is_multiple_of(DESC_LEN) || len / DESC_LEN > usize::from(u16::MAX) {
                    return Err(QueueFault::Chain);
                }
                table = self.slice(d.addr(), len).ok_or(QueueFault::Chain)?;
                (table_size, next, ttl, indirect) = ((len / DESC_LEN) as u16, 0, (len / DESC_LEN) as u16, true);
                continue;
            }
            bytes = bytes.checked_add(d.len()).ok_or(QueueFault::Chain)?;
            // A direct descriptor before an indirect table of 65535 makes
            // 65536: the count saturates instead of overflowing.
            visited = visited.saturating_add(1);
            visit(&d)?;
            if !d.has_next() {
                return Ok(visited);
            }
            next = d.next();
            ttl -= 1;
        }
    }

    /// The descriptor at `head` if it is a chain by itself: no next, no
    /// indirect table (`None` also for a head outside the table, which the
    /// walk reports).
    #[inline]
    pub fn lone(&self, head: u16) -> Option<Descriptor> {
        let d = self.desc.get_ref::<Descriptor>(DESC_LEN * usize::from(head)).ok()?.load();
        (!d.has_next() && !d.refers_to_indirect_table()).then_some(d)
    }

    /// Writes used elements (head, bytes written) into the used ring from
    /// `q`'s `next_used` on and moves it past them, without the used
    /// index ([`super::virtq::write_used`]'s contract).
    ///
    /// # Errors
    /// [`QueueFault::Address`]: a head outside the queue.
    #[inline(always)]
    pub fn write_used(&self, q: &mut Queue, chains: &[(u16, u32)]) -> Result<(), QueueFault> {
        let mut next = q.next_used();
        for &(head, len) in chains {
            if head >= self.size {
                return Err(QueueFault::Address);
            }
            // struct virtq_used_elem { le32 id; le32 len; } after flags and idx.
            let elem = (u64::from(len) << 32 | u64::from(head)).to_le();
            let at = 4 + 8 * usize::from(next & self.mask);
            self.used.get_ref::<u64>(at).map_err(|_| QueueFault::Address)?.store(elem);
            next = next.wrapping_add(1);
        }
        q.set_next_used(next);
        Ok(())
    }
}

/// Where [`Rings::prefetch_next`] hints a buffer: its offset in the region
/// found last (the first chain's lookup finds it), clamped into that
/// region, from the region's host address. A hint needs no check that the
/// buffer is the guest's, only an address inside the mapping: a buffer
/// elsewhere, or a head or address the guest broke, hints a wrong line of
/// the region (the walk checks every buffer it takes).
#[derive(Clone, Copy)]
struct BufferHint {
    /// Guest address of the region's first byte.
    start: u64,
    /// Its host address.
    base: *const u8,
    /// The last offset whose two hinted lines are inside the region.
    last: usize,
}

impl BufferHint {
    #[inline(always)]
    fn of((start, region): (u64, VolatileSlice<'_>)) -> BufferHint {
        BufferHint { start, base: region.ptr_guard().as_ptr(), last: region.len().saturating_sub(128) }
    }

    /// The host address hinted for guest address `addr`.
    #[inline(always)]
    fn host(&self, addr: u64) -> *const u8 {
        let off = usize::try_from(addr.wrapping_sub(self.start)).unwrap_or(usize::MAX).min(self.last);
        self.base.wrapping_add(off)
    }
}

/// Buffers of one chain whose host slices a walk keeps for the copy that
/// follows it in the same call ([`Near::record`]): the first few, which
/// is every buffer of the chains frontends make (one or two descriptors
/// for a frame), so that each buffer is looked up once, not at the check
/// and again at every copy. Longer chains' other buffers are copied
/// through their guest addresses.
#[derive(Debug, Clone, Copy, Default)]
pub struct Near<'m> {
    slices: [Option<VolatileSlice<'m>>; NEAR],
}

/// Buffers per chain a [`Near`] keeps.
const NEAR: usize = 4;

impl<'m> Near<'m> {
    /// Checks that `len` bytes at `addr` lie in guest memory and keeps the
    /// host slice of buffer `index` of the chain if it has room and the
    /// buffer lies in one region; false if the buffer is not in memory.
    #[inline]
    pub fn record(&mut self, rings: &Rings<'m>, index: usize, addr: GuestAddress, len: usize) -> bool {
        match rings.slice(addr, len) {
            Some(vs) => {
                if let Some(slot) = self.slices.get_mut(index) {
                    *slot = Some(vs);
                }
                true
            }
            None => {
                if let Some(slot) = self.slices.get_mut(index) {
                    *slot = None;
                }
                GuestMemoryBackend::check_range(rings.mem, addr, len)
            }
        }
    }

    /// The host slice kept for buffer `index`, if any.
    pub fn get(&self, index: usize) -> Option<&VolatileSlice<'m>> {
        self.slices.get(index).and_then(Option::as_ref)
    }
}
