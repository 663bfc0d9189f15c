//! The split virtqueue (virtio 1.x, section 2.7): descriptor table,
//! available ring and used ring in the shared region, with
//! `VIRTIO_RING_F_EVENT_IDX` notification suppression, and the region layout
//! both ends compute from the ring size.
//!
//! ```text
//! descriptor  { le64 addr; le32 len; le16 flags (NEXT 1, WRITE 2, INDIRECT 4); le16 next }
//! avail ring  { le16 flags (NO_INTERRUPT 1); le16 idx; le16 ring[N]; le16 used_event }
//! used ring   { le16 flags (NO_NOTIFY 1);    le16 idx; { le32 id; le32 len } ring[N]; le16 avail_event }
//! ```
//!
//! `addr` is an offset in the shared region (there is no guest-physical
//! address space). Indices are free-running 16-bit counters; entry `i` lives
//! at `i % N` (N a power of two).
//!
//! - [`VqDriver`] is the side that makes buffers available (here: the
//!   transmitter) and takes them back from the used ring; it trusts nothing
//!   the device writes: a used id that is out of range or not in flight,
//!   or a used index that runs ahead of what is in flight, is a
//!   [`RingError`] (the link is then unusable and is torn down).
//! - [`VqDevice`] consumes the available ring and returns buffers through
//!   the used ring; an available index more than N ahead is a [`RingError`].
//!
//! # Notification suppression (virtio 1.x 2.7.7 / 2.7.10)
//!
//! With EVENT_IDX each side publishes the index at which it wants the next
//! notification: the device writes `avail_event` ("kick me when you make
//! entry `avail_event` available"), the driver `used_event` ("call me when
//! you use entry `used_event`"). A notification is sent only when the
//! producer's index crosses that value ([`vring_need_event`]), so a device
//! that is busy polling (it stops updating `avail_event`) receives no kicks,
//! and a driver that is not waiting for completions receives no calls.
//! Without EVENT_IDX the `NO_NOTIFY` / `NO_INTERRUPT` flags are used.
//! Re-enabling is always followed by a full fence and a re-check of the
//! ring, so an entry added in between is never missed.

use super::shm::{ShmError, ShmRegion};
use std::sync::atomic::{Ordering, fence};

/// `VRING_DESC_F_NEXT`: the chain continues at `next`.
pub const DESC_F_NEXT: u16 = 1;
/// `VRING_DESC_F_WRITE`: device-writable (never valid in a transmit queue).
pub const DESC_F_WRITE: u16 = 2;
/// `VRING_DESC_F_INDIRECT`: the buffer is a table of descriptors.
pub const DESC_F_INDIRECT: u16 = 4;
/// `VRING_USED_F_NO_NOTIFY`: the device does not want kicks (no EVENT_IDX).
pub const USED_F_NO_NOTIFY: u16 = 1;
/// `VRING_AVAIL_F_NO_INTERRUPT`: the driver does not want calls (no EVENT_IDX).
pub const AVAIL_F_NO_INTERRUPT: u16 = 1;

/// Bytes of one descriptor.
pub const DESC_SIZE: usize = 16;
/// Most entries of an indirect table (header metadata, L2, L3, L4 and up
/// to 28 payload buffers: a 64 KB superpacket in 4 KiB chunks fits).
pub const MAX_INDIRECT: usize = 32;
/// Bytes of the per-descriptor buffer slot: a direct frame (virtio_net_hdr
/// plus up to 2036 bytes) or the metadata and start of an indirect one.
pub const SLOT_SIZE: usize = 2048;
/// Bytes of one large-frame chunk.
pub const CHUNK_SIZE: usize = 4096;
/// Chunks per queue for frames that do not fit a slot (superpackets):
/// 1 MiB, sixteen 64 KB superpackets in flight.
pub const CHUNKS: usize = 256;
/// Largest ring accepted.
pub const MAX_RING: u16 = 1024;
/// Default ring size.
pub const DEFAULT_RING: u16 = 256;

/// True when moving an index from `old` to `new` crosses `event`
/// (`vring_need_event` of the virtio specification).
#[inline]
pub fn vring_need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

fn align(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

/// Where one queue lives in the region. The data area (tables, slots and
/// chunks) is the only memory a descriptor of this queue may point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLayout {
    /// Ring size N.
    pub num: u16,
    /// Descriptor table.
    pub desc: usize,
    /// Available ring.
    pub avail: usize,
    /// Used ring.
    pub used: usize,
    /// Indirect tables, one of [`MAX_INDIRECT`] entries per descriptor.
    pub tables: usize,
    /// Buffer slots, one of [`SLOT_SIZE`] bytes per descriptor.
    pub slots: usize,
    /// [`CHUNKS`] chunks of [`CHUNK_SIZE`] bytes.
    pub chunks: usize,
    /// End of the queue's memory (end of the data area).
    pub end: usize,
}

impl QueueLayout {
    fn new(num: u16, base: usize) -> QueueLayout {
        let n = num as usize;
        let desc = align(base, 4096);
        let avail = align(desc + DESC_SIZE * n, 64);
        let used = align(avail + 6 + 2 * n, 64);
        let tables = align(used + 6 + 8 * n, 64);
        let slots = align(tables + n * MAX_INDIRECT * DESC_SIZE, 4096);
        let chunks = align(slots + n * SLOT_SIZE, 4096);
        let end = chunks + CHUNKS * CHUNK_SIZE;
        QueueLayout { num, desc, avail, used, tables, slots, chunks, end }
    }

    /// Descriptor `i`.
    #[inline]
    pub fn desc_at(&self, i: u16) -> u64 {
        (self.desc + DESC_SIZE * i as usize) as u64
    }
    fn avail_flags(&self) -> u64 {
        self.avail as u64
    }
    fn avail_idx(&self) -> u64 {
        self.avail as u64 + 2
    }
    fn avail_ring(&self, i: u16) -> u64 {
        (self.avail + 4 + 2 * (i % self.num) as usize) as u64
    }
    fn used_event(&self) -> u64 {
        (self.avail + 4 + 2 * self.num as usize) as u64
    }
    fn used_flags(&self) -> u64 {
        self.used as u64
    }
    fn used_idx(&self) -> u64 {
        self.used as u64 + 2
    }
    fn used_elem(&self, i: u16) -> u64 {
        (self.used + 4 + 8 * (i % self.num) as usize) as u64
    }
    fn avail_event(&self) -> u64 {
        (self.used + 4 + 8 * self.num as usize) as u64
    }
    /// The indirect table of descriptor `head`.
    #[inline]
    pub fn table(&self, head: u16) -> u64 {
        (self.tables + head as usize * MAX_INDIRECT * DESC_SIZE) as u64
    }
    /// The buffer slot of descriptor `head`.
    #[inline]
    pub fn slot(&self, head: u16) -> u64 {
        (self.slots + head as usize * SLOT_SIZE) as u64
    }
    /// Chunk `i`.
    #[inline]
    pub fn chunk(&self, i: u16) -> u64 {
        (self.chunks + i as usize * CHUNK_SIZE) as u64
    }
    /// True if `addr..addr + len` lies inside the queue's data area.
    #[inline]
    pub fn in_data(&self, addr: u64, len: u32) -> bool {
        addr >= self.tables as u64 && addr.checked_add(len as u64).is_some_and(|end| end <= self.end as u64)
    }
}

/// The region: queue 0 carries client-to-engine frames (the client is its
/// driver), queue 1 engine-to-client frames (the engine is its driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionLayout {
    /// The two queues.
    pub queues: [QueueLayout; 2],
    /// Region size in bytes.
    pub size: usize,
}

impl RegionLayout {
    /// The layout for rings of `num` entries; `None` unless `num` is a
    /// power of two in 2..=[`MAX_RING`].
    pub fn new(num: u16) -> Option<RegionLayout> {
        if !num.is_power_of_two() || !(2..=MAX_RING).contains(&num) {
            return None;
        }
        let q0 = QueueLayout::new(num, 0);
        let q1 = QueueLayout::new(num, q0.end);
        Some(RegionLayout { queues: [q0, q1], size: align(q1.end, 4096) })
    }
}

/// One descriptor, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Desc {
    /// Region offset of the buffer.
    pub addr: u64,
    /// Buffer length.
    pub len: u32,
    /// `DESC_F_*` bits.
    pub flags: u16,
    /// Next descriptor of the chain (with [`DESC_F_NEXT`]).
    pub next: u16,
}

impl Desc {
    /// Decodes 16 little-endian bytes.
    #[inline]
    pub fn decode(b: &[u8]) -> Desc {
        Desc {
            addr: u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            len: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            flags: u16::from_le_bytes([b[12], b[13]]),
            next: u16::from_le_bytes([b[14], b[15]]),
        }
    }
    /// Encodes into 16 little-endian bytes.
    #[inline]
    pub fn encode(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..14].copy_from_slice(&self.flags.to_le_bytes());
        b[14..16].copy_from_slice(&self.next.to_le_bytes());
    }
}

/// The peer broke the ring protocol; the link cannot be used any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// The available index ran more than N entries ahead.
    #[error("available index {idx} is {ahead} entries ahead of {last} (ring of {num})")]
    AvailOverrun {
        /// Index found.
        idx: u16,
        /// Last index consumed.
        last: u16,
        /// Distance.
        ahead: u16,
        /// Ring size.
        num: u16,
    },
    /// The used index ran ahead of the buffers in flight.
    #[error("used index {idx} is {ahead} entries ahead of {last}, but only {in_flight} are in flight")]
    UsedOverrun {
        /// Index found.
        idx: u16,
        /// Last index reclaimed.
        last: u16,
        /// Distance.
        ahead: u16,
        /// Buffers in flight.
        in_flight: usize,
    },
    /// A used entry names a descriptor that is out of range or not in flight.
    #[error("used id {id} is not a descriptor in flight")]
    BadUsedId {
        /// The id.
        id: u32,
    },
    /// A ring field lies outside the region (a layout bug).
    #[error("{0}")]
    Shm(#[from] ShmError),
}

impl RingError {
    /// Short stable name for counters.
    pub fn reason(&self) -> &'static str {
        match self {
            RingError::AvailOverrun { .. } => "ring-avail-overrun",
            RingError::UsedOverrun { .. } => "ring-used-overrun",
            RingError::BadUsedId { .. } => "ring-bad-used-id",
            RingError::Shm(_) => "ring-out-of-bounds",
        }
    }
}

/// The driver side of a queue: free descriptor heads, the shadow available
/// index, and reclaiming from the used ring.
#[derive(Debug)]
pub struct VqDriver {
    lay: QueueLayout,
    event_idx: bool,
    free: Vec<u16>,
    in_flight: Vec<bool>,
    n_in_flight: usize,
    avail_idx: u16,
    last_used: u16,
    /// Available index at the last kick decision.
    kicked_at: u16,
}

impl VqDriver {
    /// A driver over `lay` with every descriptor free. Without EVENT_IDX it
    /// sets `NO_INTERRUPT` (calls are asked for only while waiting).
    ///
    /// # Errors
    /// The layout does not fit the region.
    pub fn new(shm: &mut ShmRegion, lay: QueueLayout, event_idx: bool) -> Result<VqDriver, RingError> {
        let n = lay.num as usize;
        if !event_idx {
            shm.write_u16(lay.avail_flags(), AVAIL_F_NO_INTERRUPT)?;
        }
        Ok(VqDriver {
            lay,
            event_idx,
            free: (0..lay.num).rev().collect(),
            in_flight: vec![false; n],
            n_in_flight: 0,
            avail_idx: 0,
            last_used: 0,
            kicked_at: 0,
        })
    }

    /// The queue's layout.
    pub fn layout(&self) -> &QueueLayout {
        &self.lay
    }

    /// A free descriptor head, if any (the ring is full otherwise).
    #[inline]
    pub fn alloc(&mut self) -> Option<u16> {
        let h = self.free.pop()?;
        self.in_flight[h as usize] = true;
        self.n_in_flight += 1;
        Some(h)
    }

    /// Gives back a head taken with [`VqDriver::alloc`] but never made available.
    #[inline]
    pub fn unalloc(&mut self, head: u16) {
        if self.in_flight[head as usize] {
            self.in_flight[head as usize] = false;
            self.n_in_flight -= 1;
            self.free.push(head);
        }
    }

    /// Descriptors in flight (made available, not yet reclaimed).
    pub fn in_flight(&self) -> usize {
        self.n_in_flight
    }

    /// Free descriptors.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Makes `head` (whose descriptor is written) available: writes the ring
    /// entry, then publishes the index with release ordering.
    ///
    /// # Errors
    /// A layout bug (ring outside the region).
    #[inline]
    pub fn publish(&mut self, shm: &mut ShmRegion, head: u16) -> Result<(), RingError> {
        shm.write_u16(self.lay.avail_ring(self.avail_idx), head)?;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        shm.atomic_u16(self.lay.avail_idx())?.store(self.avail_idx, Ordering::Release);
        Ok(())
    }

    /// Whether the device must be kicked for what was published since the
    /// last decision (EVENT_IDX: the new entries cross `avail_event`; else
    /// unless `NO_NOTIFY`).
    ///
    /// # Errors
    /// A layout bug.
    #[inline]
    pub fn kick_needed(&mut self, shm: &ShmRegion) -> Result<bool, RingError> {
        if self.kicked_at == self.avail_idx {
            return Ok(false);
        }
        // The device's `avail_event` must be read after our index store is
        // visible (virtio's `virtio_mb` before `vring_need_event`).
        fence(Ordering::SeqCst);
        let need = if self.event_idx {
            let ev = shm.atomic_u16(self.lay.avail_event())?.load(Ordering::Acquire);
            vring_need_event(ev, self.avail_idx, self.kicked_at)
        } else {
            shm.atomic_u16(self.lay.used_flags())?.load(Ordering::Acquire) & USED_F_NO_NOTIFY == 0
        };
        self.kicked_at = self.avail_idx;
        Ok(need)
    }

    /// Used entries waiting to be reclaimed.
    ///
    /// # Errors
    /// The used index ran ahead of what is in flight.
    #[inline]
    pub fn used_pending(&self, shm: &ShmRegion) -> Result<u16, RingError> {
        let idx = shm.atomic_u16(self.lay.used_idx())?.load(Ordering::Acquire);
        let ahead = idx.wrapping_sub(self.last_used);
        if ahead as usize > self.n_in_flight {
            return Err(RingError::UsedOverrun { idx, last: self.last_used, ahead, in_flight: self.n_in_flight });
        }
        Ok(ahead)
    }

    /// Takes back every used descriptor, calling `f(head)` for each.
    ///
    /// # Errors
    /// A used entry that is not in flight, or an overrun used index.
    #[inline]
    pub fn reclaim(&mut self, shm: &ShmRegion, mut f: impl FnMut(u16)) -> Result<usize, RingError> {
        let n = self.used_pending(shm)?;
        for _ in 0..n {
            let id = shm.read_u32(self.lay.used_elem(self.last_used))?;
            let ok = id < self.lay.num as u32 && self.in_flight[id as usize];
            if !ok {
                return Err(RingError::BadUsedId { id });
            }
            let head = id as u16;
            self.in_flight[head as usize] = false;
            self.n_in_flight -= 1;
            self.free.push(head);
            self.last_used = self.last_used.wrapping_add(1);
            f(head);
        }
        Ok(n as usize)
    }

    /// Asks for a call at the next used entry; true if entries are already
    /// used (re-checked after a full fence: the caller must not sleep then).
    ///
    /// # Errors
    /// A layout bug or an overrun used index.
    pub fn enable_calls(&mut self, shm: &mut ShmRegion) -> Result<bool, RingError> {
        if self.event_idx {
            shm.atomic_u16(self.lay.used_event())?.store(self.last_used, Ordering::Release);
        } else {
            shm.atomic_u16(self.lay.avail_flags())?.store(0, Ordering::Release);
        }
        fence(Ordering::SeqCst);
        Ok(self.used_pending(shm)? > 0)
    }

    /// Stops asking for calls (without EVENT_IDX: sets `NO_INTERRUPT`; with
    /// it, the stale `used_event` is not crossed again before 65536 entries).
    ///
    /// # Errors
    /// A layout bug.
    pub fn disable_calls(&mut self, shm: &mut ShmRegion) -> Result<(), RingError> {
        if !self.event_idx {
            shm.atomic_u16(self.lay.avail_flags())?.store(AVAIL_F_NO_INTERRUPT, Ordering::Release);
        }
        Ok(())
    }
}

/// The device side of a queue: consumes the available ring, fills the used ring.
#[derive(Debug)]
pub struct VqDevice {
    lay: QueueLayout,
    event_idx: bool,
    last_avail: u16,
    used_idx: u16,
    /// Used index at the last call decision.
    called_at: u16,
}

impl VqDevice {
    /// A device over `lay`, kicks enabled.
    pub fn new(lay: QueueLayout, event_idx: bool) -> VqDevice {
        VqDevice { lay, event_idx, last_avail: 0, used_idx: 0, called_at: 0 }
    }

    /// The queue's layout.
    pub fn layout(&self) -> &QueueLayout {
        &self.lay
    }

    /// Entries available and not yet consumed.
    ///
    /// # Errors
    /// The available index is more than N entries ahead.
    #[inline]
    pub fn avail_pending(&self, shm: &ShmRegion) -> Result<u16, RingError> {
        let idx = shm.atomic_u16(self.lay.avail_idx())?.load(Ordering::Acquire);
        let ahead = idx.wrapping_sub(self.last_avail);
        if ahead > self.lay.num {
            return Err(RingError::AvailOverrun { idx, last: self.last_avail, ahead, num: self.lay.num });
        }
        Ok(ahead)
    }

    /// The next available head (unvalidated: the caller checks it is `< N`).
    ///
    /// # Errors
    /// As [`VqDevice::avail_pending`].
    #[inline]
    pub fn pop(&mut self, shm: &ShmRegion) -> Result<Option<u16>, RingError> {
        if self.avail_pending(shm)? == 0 {
            return Ok(None);
        }
        let head = shm.read_u16(self.lay.avail_ring(self.last_avail))?;
        self.last_avail = self.last_avail.wrapping_add(1);
        Ok(Some(head))
    }

    /// Returns `head` to the driver (`len` bytes written: 0 for transmit
    /// buffers) and publishes the used index with release ordering.
    ///
    /// # Errors
    /// A layout bug.
    #[inline]
    pub fn push_used(&mut self, shm: &mut ShmRegion, head: u16, len: u32) -> Result<(), RingError> {
        let at = self.lay.used_elem(self.used_idx);
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&(head as u32).to_le_bytes());
        b[4..].copy_from_slice(&len.to_le_bytes());
        shm.copy_in(at, &b)?;
        self.used_idx = self.used_idx.wrapping_add(1);
        shm.atomic_u16(self.lay.used_idx())?.store(self.used_idx, Ordering::Release);
        Ok(())
    }

    /// Whether the driver must be called for the entries used since the last
    /// decision.
    ///
    /// # Errors
    /// A layout bug.
    #[inline]
    pub fn call_needed(&mut self, shm: &ShmRegion) -> Result<bool, RingError> {
        if self.called_at == self.used_idx {
            return Ok(false);
        }
        fence(Ordering::SeqCst);
        let need = if self.event_idx {
            let ev = shm.atomic_u16(self.lay.used_event())?.load(Ordering::Acquire);
            vring_need_event(ev, self.used_idx, self.called_at)
        } else {
            shm.atomic_u16(self.lay.avail_flags())?.load(Ordering::Acquire) & AVAIL_F_NO_INTERRUPT == 0
        };
        self.called_at = self.used_idx;
        Ok(need)
    }

    /// Asks for a kick at the next available entry; true if entries are
    /// already available (re-checked after a full fence).
    ///
    /// # Errors
    /// A layout bug or an overrun available index.
    pub fn enable_kicks(&mut self, shm: &mut ShmRegion) -> Result<bool, RingError> {
        if self.event_idx {
            shm.atomic_u16(self.lay.avail_event())?.store(self.last_avail, Ordering::Release);
        } else {
            shm.atomic_u16(self.lay.used_flags())?.store(0, Ordering::Release);
        }
        fence(Ordering::SeqCst);
        Ok(self.avail_pending(shm)? > 0)
    }

    /// Stops asking for kicks while polling (without EVENT_IDX: `NO_NOTIFY`;
    /// with it, `avail_event` is simply left behind).
    ///
    /// # Errors
    /// A layout bug.
    pub fn disable_kicks(&mut self, shm: &mut ShmRegion) -> Result<(), RingError> {
        if !self.event_idx {
            shm.atomic_u16(self.lay.used_flags())?.store(USED_F_NO_NOTIFY, Ordering::Release);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn need_event_follows_the_specification() {
        // (event, new, old, expected)
        let cases = [
            (0, 1, 0, true),          // first entry crosses event 0
            (5, 5, 4, false),         // index 5 not yet used: entry 5 is the 6th
            (4, 5, 4, true),          // entry 4 just made available
            (4, 9, 0, true),          // a batch crossing the event
            (10, 9, 0, false),        // not reached yet
            (65535, 1, 65534, true),  // across the 16-bit wrap
            (65533, 1, 65534, false), // event already passed before `old`
        ];
        for (event, new, old, want) in cases {
            assert_eq!(vring_need_event(event, new, old), want, "event {event} new {new} old {old}");
        }
    }

    #[test]
    fn layout_is_disjoint_aligned_and_refuses_bad_sizes() {
        for n in [2u16, 8, 256, 1024] {
            let l = RegionLayout::new(n).unwrap();
            let [a, b] = l.queues;
            assert!(a.end <= b.desc && b.end <= l.size);
            for q in [a, b] {
                assert!(q.desc % 4096 == 0 && q.slots % 4096 == 0 && q.chunks % 4096 == 0);
                assert!(q.desc + 16 * n as usize <= q.avail);
                assert!(q.avail + 6 + 2 * n as usize <= q.used);
                assert!(q.used + 6 + 8 * n as usize <= q.tables);
                assert!(!q.in_data(q.used as u64, 4), "rings are not data");
                assert!(q.in_data(q.slot(n - 1), SLOT_SIZE as u32));
                assert!(!q.in_data(q.end as u64 - 1, 2));
                assert!(!q.in_data(u64::MAX - 2, 8), "overflow is out of range");
            }
        }
        for bad in [0u16, 1, 3, 100, 2048] {
            assert!(RegionLayout::new(bad).is_none(), "{bad}");
        }
    }

    fn pair(n: u16, event_idx: bool) -> (ShmRegion, VqDriver, VqDevice) {
        let l = RegionLayout::new(n).unwrap();
        let mut shm = ShmRegion::create("sp-ring-test", l.size).unwrap();
        let drv = VqDriver::new(&mut shm, l.queues[0], event_idx).unwrap();
        let dev = VqDevice::new(l.queues[0], event_idx);
        (shm, drv, dev)
    }

    #[test]
    fn full_and_empty_ring_and_wrap_around() {
        let (mut shm, mut drv, mut dev) = pair(8, true);
        assert_eq!(dev.pop(&shm).unwrap(), None, "empty ring");
        let mut order = Vec::new();
        // 70000 entries: the 16-bit indices wrap once, ring slots ~8750 times.
        let mut sent = 0u32;
        let mut got = 0u32;
        while got < 70_000 {
            // Fill until full.
            while let Some(h) = drv.alloc() {
                drv.publish(&mut shm, h).unwrap();
                sent += 1;
            }
            assert_eq!(drv.free(), 0, "full ring: no head left");
            assert_eq!(dev.avail_pending(&shm).unwrap(), 8);
            // Consume half, reclaim, check FIFO order of heads.
            for _ in 0..5 {
                let h = dev.pop(&shm).unwrap().unwrap();
                order.push(h);
                dev.push_used(&mut shm, h, 0).unwrap();
                got += 1;
            }
            let mut back = Vec::new();
            drv.reclaim(&shm, |h| back.push(h)).unwrap();
            assert_eq!(back, order);
            order.clear();
        }
        assert!(sent >= got);
    }

    #[test]
    fn event_idx_suppresses_kicks_and_calls() {
        let (mut shm, mut drv, mut dev) = pair(16, true);
        // The device wants a kick at entry 0: the first publish kicks.
        dev.enable_kicks(&mut shm).unwrap();
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        assert!(drv.kick_needed(&shm).unwrap());
        // The device is polling (did not re-enable): no more kicks.
        for _ in 0..5 {
            let h = drv.alloc().unwrap();
            drv.publish(&mut shm, h).unwrap();
            assert!(!drv.kick_needed(&shm).unwrap());
        }
        // The device drains, re-enables: the next publish kicks once.
        while let Some(h) = dev.pop(&shm).unwrap() {
            dev.push_used(&mut shm, h, 0).unwrap();
        }
        assert!(!dev.enable_kicks(&mut shm).unwrap(), "nothing pending after the re-check");
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        assert!(drv.kick_needed(&shm).unwrap(), "two entries published, one kick");
        assert!(!drv.kick_needed(&shm).unwrap());
        // An entry published after enable but before the re-check is seen.
        while let Some(h) = dev.pop(&shm).unwrap() {
            dev.push_used(&mut shm, h, 0).unwrap();
        }
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        assert!(dev.enable_kicks(&mut shm).unwrap(), "re-check finds the entry: do not sleep");

        // Calls: the initial used_event 0 was crossed by the first used
        // entry (one call); the driver does not wait, so no more calls.
        assert!(dev.call_needed(&shm).unwrap());
        drv.reclaim(&shm, |_| {}).unwrap();
        let mut calls = 0;
        for _ in 0..3 {
            let h = drv.alloc().unwrap();
            drv.publish(&mut shm, h).unwrap();
        }
        while let Some(h) = dev.pop(&shm).unwrap() {
            dev.push_used(&mut shm, h, 0).unwrap();
            calls += usize::from(dev.call_needed(&shm).unwrap());
        }
        assert_eq!(calls, 0);
        // The driver waits for a completion: exactly one call.
        drv.reclaim(&shm, |_| {}).unwrap();
        assert!(!drv.enable_calls(&mut shm).unwrap());
        for _ in 0..3 {
            let h = drv.alloc().unwrap();
            drv.publish(&mut shm, h).unwrap();
        }
        let mut calls = 0;
        while let Some(h) = dev.pop(&shm).unwrap() {
            dev.push_used(&mut shm, h, 0).unwrap();
            calls += usize::from(dev.call_needed(&shm).unwrap());
        }
        assert_eq!(calls, 1);
    }

    #[test]
    fn flags_suppress_without_event_idx() {
        let (mut shm, mut drv, mut dev) = pair(8, false);
        dev.disable_kicks(&mut shm).unwrap();
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        assert!(!drv.kick_needed(&shm).unwrap(), "NO_NOTIFY set");
        assert!(dev.enable_kicks(&mut shm).unwrap());
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        assert!(drv.kick_needed(&shm).unwrap());
        // The driver set NO_INTERRUPT at creation: no calls until it asks.
        let h = dev.pop(&shm).unwrap().unwrap();
        dev.push_used(&mut shm, h, 0).unwrap();
        assert!(!dev.call_needed(&shm).unwrap());
        drv.reclaim(&shm, |_| {}).unwrap();
        drv.enable_calls(&mut shm).unwrap();
        let h = dev.pop(&shm).unwrap().unwrap();
        dev.push_used(&mut shm, h, 0).unwrap();
        assert!(dev.call_needed(&shm).unwrap());
    }

    #[test]
    fn a_lying_peer_is_a_ring_error_not_a_panic() {
        let (mut shm, mut drv, mut dev) = pair(8, true);
        let l = *drv.layout();
        // Device side: the driver claims 100 entries are available.
        shm.atomic_u16(l.avail_idx()).unwrap().store(100, Ordering::Release);
        assert!(matches!(dev.pop(&shm), Err(RingError::AvailOverrun { .. })));
        shm.atomic_u16(l.avail_idx()).unwrap().store(0, Ordering::Release);
        // Driver side: a used entry for a descriptor never made available...
        let h = drv.alloc().unwrap();
        drv.publish(&mut shm, h).unwrap();
        shm.write_u32(l.used_elem(0), 7).unwrap();
        shm.atomic_u16(l.used_idx()).unwrap().store(1, Ordering::Release);
        assert_eq!(drv.reclaim(&shm, |_| {}), Err(RingError::BadUsedId { id: 7 }));
        // ... an id out of range, and a used index beyond what is in flight.
        shm.write_u32(l.used_elem(0), 4000).unwrap();
        assert_eq!(drv.reclaim(&shm, |_| {}), Err(RingError::BadUsedId { id: 4000 }));
        shm.atomic_u16(l.used_idx()).unwrap().store(5, Ordering::Release);
        assert!(matches!(drv.reclaim(&shm, |_| {}), Err(RingError::UsedOverrun { .. })));
    }
}
