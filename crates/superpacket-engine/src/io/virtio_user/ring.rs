//! One split virtqueue seen from the driver (virtio 1.2, 2.7): the driver
//! writes descriptors and the available ring, the device (the vhost-user
//! backend, in another thread or process) writes the used ring.
//!
//! Every access goes through `vm-memory` (bounds-checked, volatile; the
//! indices with acquire/release atomics) because the device writes the
//! same memory concurrently. What the device writes is never trusted: a
//! used element naming a descriptor outside the queue or one the driver
//! did not make available is a [`RingFault`], never a panic.

use std::num::Wrapping;
use std::sync::atomic::{Ordering, fence};
use vm_memory::{Address, Bytes, GuestAddress, GuestMemory};

/// `VIRTQ_DESC_F_NEXT`.
pub const DESC_F_NEXT: u16 = 1;
/// `VIRTQ_DESC_F_WRITE`: the device writes this buffer.
pub const DESC_F_WRITE: u16 = 2;
/// `VIRTQ_DESC_F_INDIRECT`: the buffer is a table of descriptors.
pub const DESC_F_INDIRECT: u16 = 4;
/// `VIRTQ_AVAIL_F_NO_INTERRUPT`.
const AVAIL_F_NO_INTERRUPT: u16 = 1;
/// `VIRTQ_USED_F_NO_NOTIFY`.
const USED_F_NO_NOTIFY: u16 = 1;

/// Bytes of one descriptor (`struct virtq_desc`).
pub const DESC_SIZE: u64 = 16;

/// Something the device wrote into the used ring that no device may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingFault {
    /// The used index moved by more than the queue holds.
    UsedIndex,
    /// A used element names a descriptor outside the queue, or one that
    /// was not made available.
    UsedId,
    /// A used element's length is larger than the buffer.
    UsedLen,
    /// A received header's `num_buffers` is zero or more than the queue holds.
    NumBuffers,
    /// A ring lies outside the shared memory (a driver bug: the layout is ours).
    Address,
}

impl RingFault {
    /// A short stable name (for errors and counters).
    pub fn reason(self) -> &'static str {
        match self {
            RingFault::UsedIndex => "virtio-user-bad-used-idx",
            RingFault::UsedId => "virtio-user-bad-used-id",
            RingFault::UsedLen => "virtio-user-bad-used-len",
            RingFault::NumBuffers => "virtio-user-bad-num-buffers",
            RingFault::Address => "virtio-user-bad-address",
        }
    }
}

/// One descriptor to write (`struct virtq_desc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescriptorWrite {
    /// Buffer (guest physical address).
    pub addr: GuestAddress,
    /// Buffer bytes.
    pub len: u32,
    /// `DESC_F_*`.
    pub flags: u16,
    /// The next descriptor of the chain (with [`DESC_F_NEXT`]).
    pub next: u16,
}

impl DescriptorWrite {
    /// The last (or only) descriptor of a chain.
    pub fn new(addr: GuestAddress, len: u32, flags: u16) -> DescriptorWrite {
        DescriptorWrite { addr, len, flags, next: 0 }
    }

    /// This descriptor followed by descriptor `next`.
    pub fn then(self, next: u16) -> DescriptorWrite {
        DescriptorWrite { flags: self.flags | DESC_F_NEXT, next, ..self }
    }
}

/// Where one queue's three parts are in guest memory, and the driver's
/// private indices.
///
/// Invariant: `next_avail - last_used` (wrapping) is at most `size`
/// (chains outstanding at the device).
#[derive(Debug, Clone)]
pub struct DriverRing {
    /// Descriptors (a power of two).
    pub size: u16,
    /// Descriptor table.
    pub desc: GuestAddress,
    /// Available ring (`flags`, `idx`, `ring[size]`, `used_event`).
    pub avail: GuestAddress,
    /// Used ring (`flags`, `idx`, `ring[size]`, `avail_event`).
    pub used: GuestAddress,
    /// `VIRTIO_RING_F_EVENT_IDX` was negotiated.
    pub event_idx: bool,
    next_avail: Wrapping<u16>,
    published: Wrapping<u16>,
    last_used: Wrapping<u16>,
}

impl DriverRing {
    /// A ring of `size` descriptors at the given addresses (zeroed memory).
    pub fn new(size: u16, desc: GuestAddress, avail: GuestAddress, used: GuestAddress) -> DriverRing {
        DriverRing {
            size,
            desc,
            avail,
            used,
            event_idx: false,
            next_avail: Wrapping(0),
            published: Wrapping(0),
            last_used: Wrapping(0),
        }
    }

    /// Bytes of the descriptor table, available and used rings of a queue of `size`.
    pub fn footprint(size: u16) -> (u64, u64, u64) {
        let n = u64::from(size);
        (DESC_SIZE * n, 6 + 2 * n, 6 + 8 * n)
    }

    /// Chains made available (published or not) whose used element has not been read.
    pub fn outstanding(&self) -> u16 {
        (self.next_avail - self.last_used).0
    }

    /// Writes descriptor `i` of the table at `table`.
    ///
    /// # Errors
    /// [`RingFault::Address`]: the table is outside `mem`.
    pub fn write_desc<M: GuestMemory>(
        mem: &M,
        table: GuestAddress,
        i: u16,
        desc: DescriptorWrite,
    ) -> Result<(), RingFault> {
        let mut d = [0u8; DESC_SIZE as usize];
        d[..8].copy_from_slice(&desc.addr.raw_value().to_le_bytes());
        d[8..12].copy_from_slice(&desc.len.to_le_bytes());
        d[12..14].copy_from_slice(&desc.flags.to_le_bytes());
        d[14..16].copy_from_slice(&desc.next.to_le_bytes());
        let at = table.checked_add(DESC_SIZE * u64::from(i)).ok_or(RingFault::Address)?;
        mem.write_slice(&d, at).map_err(|_| RingFault::Address)
    }

    /// Puts chain `head` in the next available slot (not yet visible to the
    /// device: [`DriverRing::publish`]).
    ///
    /// # Errors
    /// [`RingFault::Address`] (ring outside memory).
    pub fn push_avail<M: GuestMemory>(&mut self, mem: &M, head: u16) -> Result<(), RingFault> {
        let slot = u64::from(self.next_avail.0 % self.size);
        let at = self.avail.checked_add(4 + 2 * slot).ok_or(RingFault::Address)?;
        mem.write_obj(head.to_le(), at).map_err(|_| RingFault::Address)?;
        self.next_avail += Wrapping(1);
        Ok(())
    }

    /// Makes every pushed chain visible to the device (one release store of
    /// the available index); true if the device asked to be kicked for them
    /// (`avail_event` with `EVENT_IDX`, else the used ring's `NO_NOTIFY`).
    ///
    /// # Errors
    /// [`RingFault::Address`].
    pub fn publish<M: GuestMemory>(&mut self, mem: &M) -> Result<bool, RingFault> {
        let (old, new) = (self.published, self.next_avail);
        if old == new {
            return Ok(false);
        }
        let idx = self.avail.checked_add(2).ok_or(RingFault::Address)?;
        // Release: descriptors and ring entries are visible before the index.
        mem.store(new.0.to_le(), idx, Ordering::Release).map_err(|_| RingFault::Address)?;
        self.published = new;
        // The index store before the device's suppression field is read
        // (virtio 1.2, 2.7.13.3.1: "read ... after ... updating idx").
        fence(Ordering::SeqCst);
        if self.event_idx {
            let at = self.used.checked_add(4 + 8 * u64::from(self.size)).ok_or(RingFault::Address)?;
            let event = u16::from_le(mem.load::<u16>(at, Ordering::Acquire).map_err(|_| RingFault::Address)?);
            Ok(need_event(event, new.0, old.0))
        } else {
            let flags = u16::from_le(mem.load::<u16>(self.used, Ordering::Acquire).map_err(|_| RingFault::Address)?);
            Ok(flags & USED_F_NO_NOTIFY == 0)
        }
    }

    /// The used elements the device published and the driver has not read.
    ///
    /// # Errors
    /// [`RingFault::UsedIndex`]: the device announced more than it was given.
    pub fn used_pending<M: GuestMemory>(&self, mem: &M) -> Result<u16, RingFault> {
        let idx = self.used.checked_add(2).ok_or(RingFault::Address)?;
        let used = Wrapping(u16::from_le(mem.load::<u16>(idx, Ordering::Acquire).map_err(|_| RingFault::Address)?));
        let n = (used - self.last_used).0;
        if n > self.outstanding() {
            return Err(RingFault::UsedIndex);
        }
        Ok(n)
    }

    /// The next used element (`id`, `len`) without taking it.
    ///
    /// # Errors
    /// As [`DriverRing::pop_used`].
    pub fn peek_used<M: GuestMemory>(&self, mem: &M) -> Result<Option<(u16, u32)>, RingFault> {
        let mut probe = self.clone();
        probe.pop_used(mem)
    }

    /// The next used element (`id`, `len`), if the device published one.
    /// The caller checks that `id` is a chain it made available.
    ///
    /// # Errors
    /// As [`DriverRing::used_pending`]; [`RingFault::UsedId`] for an id
    /// outside the queue.
    pub fn pop_used<M: GuestMemory>(&mut self, mem: &M) -> Result<Option<(u16, u32)>, RingFault> {
        if self.used_pending(mem)? == 0 {
            return Ok(None);
        }
        let slot = u64::from(self.last_used.0 % self.size);
        let at = self.used.checked_add(4 + 8 * slot).ok_or(RingFault::Address)?;
        let mut e = [0u8; 8];
        mem.read_slice(&mut e, at).map_err(|_| RingFault::Address)?;
        let id = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        let len = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
        let id = u16::try_from(id).ok().filter(|&i| i < self.size).ok_or(RingFault::UsedId)?;
        self.last_used += Wrapping(1);
        Ok(Some((id, len)))
    }

    /// Asks the device for a notification at the next used element
    /// (`used_event` with `EVENT_IDX`, else clears `NO_INTERRUPT`). The
    /// caller checks the used ring again afterwards: an element published
    /// before the device saw the request raises no notification.
    ///
    /// # Errors
    /// [`RingFault::Address`].
    pub fn enable_interrupts<M: GuestMemory>(&self, mem: &M) -> Result<(), RingFault> {
        self.set_interrupts(mem, true)
    }

    /// Tells the device no notification is wanted (with `EVENT_IDX`:
    /// `used_event` one behind the last element read, reached only after
    /// the index wraps, as Linux's `virtqueue_disable_cb` does).
    ///
    /// # Errors
    /// [`RingFault::Address`].
    pub fn disable_interrupts<M: GuestMemory>(&self, mem: &M) -> Result<(), RingFault> {
        self.set_interrupts(mem, false)
    }

    fn set_interrupts<M: GuestMemory>(&self, mem: &M, on: bool) -> Result<(), RingFault> {
        if self.event_idx {
            let event = if on { self.last_used.0 } else { self.last_used.0.wrapping_sub(1) };
            let at = self.avail.checked_add(4 + 2 * u64::from(self.size)).ok_or(RingFault::Address)?;
            mem.store(event.to_le(), at, Ordering::Release).map_err(|_| RingFault::Address)?;
        } else {
            let flags = if on { 0 } else { AVAIL_F_NO_INTERRUPT };
            mem.store(flags.to_le(), self.avail, Ordering::Release).map_err(|_| RingFault::Address)?;
        }
        // The request is visible before the used index is read again.
        fence(Ordering::SeqCst);
        Ok(())
    }
}

/// `vring_need_event()`: whether `event` lies in `[old, new)` (wrapping).
fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::GuestMemoryMmap;

    fn ring(m: &GuestMemoryMmap<()>) -> DriverRing {
        let _ = m;
        DriverRing::new(8, GuestAddress(0x1000), GuestAddress(0x2000), GuestAddress(0x3000))
    }

    #[test]
    fn need_event_is_the_half_open_window_from_old_to_new() {
        assert!(need_event(0, 1, 0));
        assert!(!need_event(1, 1, 0));
        assert!(need_event(65535, 1, 65534));
        assert!(!need_event(3, 10, 5));
    }

    #[test]
    fn a_used_element_the_driver_never_made_available_is_a_fault() {
        let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x10000)]).unwrap();
        let mut r = ring(&m);
        // The device claims two used elements while none is outstanding.
        m.write_obj(2u16.to_le(), GuestAddress(0x3002)).unwrap();
        assert_eq!(r.pop_used(&m), Err(RingFault::UsedIndex));
        r.push_avail(&m, 3).unwrap();
        r.publish(&m).unwrap();
        m.write_obj(1u16.to_le(), GuestAddress(0x3002)).unwrap();
        m.write_obj(9u32.to_le(), GuestAddress(0x3004)).unwrap();
        assert_eq!(r.pop_used(&m), Err(RingFault::UsedId));
    }

    #[test]
    fn publish_kicks_only_when_the_device_asked() {
        let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x10000)]).unwrap();
        let mut r = ring(&m);
        r.event_idx = true;
        let avail_event = GuestAddress(0x3000 + 4 + 8 * 8);
        // The device wants a kick once entry 0 is made available.
        r.push_avail(&m, 0).unwrap();
        assert!(r.publish(&m).unwrap());
        // It still waits for entry 0 (already passed): no kick for entry 1.
        r.push_avail(&m, 1).unwrap();
        assert!(!r.publish(&m).unwrap());
        m.write_obj(2u16.to_le(), avail_event).unwrap();
        r.push_avail(&m, 2).unwrap();
        assert!(r.publish(&m).unwrap());
        assert_eq!(m.read_obj::<u16>(GuestAddress(0x2002)).unwrap(), 3);
        // Without EVENT_IDX, NO_NOTIFY decides.
        r.event_idx = false;
        m.write_obj(USED_F_NO_NOTIFY.to_le(), GuestAddress(0x3000)).unwrap();
        r.push_avail(&m, 3).unwrap();
        assert!(!r.publish(&m).unwrap());
    }
}
