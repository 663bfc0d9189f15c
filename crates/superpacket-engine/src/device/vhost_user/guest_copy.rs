//! Copies between the engine's memory and a guest's, the data path's only
//! access to frame bytes in guest memory.
//!
//! Both directions take a guest address and a length, find the one region
//! that holds them (`vm-memory`'s bounds-checked `get_slice`) and copy
//! through raw pointers into that mapping: no Rust reference to guest
//! memory is ever made (the guest may write it at any time), as
//! `vm-memory`'s own `VolatileSlice::copy_to`/`copy_from` do. A range that
//! spans two regions falls back to `vm-memory`'s `Bytes` methods, which walk
//! the regions.
//!
//! Writes of at least [`STREAM_MIN`] bytes into a receive buffer use
//! non-temporal (streaming) stores on x86_64: the buffer belongs to a
//! guest that runs on another CPU and, for a large frame, is usually not
//! in any cache (a ring of 1024 64 KiB buffers is 64 MiB), so an ordinary
//! store first reads every cache line it writes from memory (read for
//! ownership) only to overwrite it. Streaming stores write whole lines
//! without that read and leave the engine's cache to the frames it is
//! about to copy. They are weakly ordered: [`write_guest`] ends them with a
//! store fence, so the release store that later publishes the used ring
//! cannot become visible before the frame's bytes.

use super::virtq::QueueFault;
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryBackend, VolatileSlice};

/// Smallest write that [`write_guest`] makes with streaming stores: below
/// a page, the read-for-ownership an ordinary store pays is a small part
/// of the frame's cost and the guest, reading the frame soon, is better
/// served from a cache.
pub const STREAM_MIN: usize = 4096;

/// Copies `dst.len()` bytes at `addr` of guest memory into `dst`: one
/// region lookup and one volatile copy where the bytes lie in one region
/// (`Bytes::read_slice` walks a slice iterator, about 300 instructions a
/// call more: callgrind on `examples/vhost_rx_instructions`).
///
/// # Errors
/// [`QueueFault::Address`]: the range is not all inside guest memory.
pub fn read_guest<M: GuestMemory>(mem: &M, addr: GuestAddress, dst: &mut [u8]) -> Result<(), QueueFault> {
    if let Some(Ok(vs)) = mem.physical_memory().map(|pm| pm.get_slice(addr, dst.len()))
        && vs.copy_to(dst) == dst.len()
    {
        return Ok(());
    }
    mem.read_slice(dst, addr).map_err(|_| QueueFault::Address)
}

/// Copies `src` to `addr` of guest memory: one region lookup and one copy
/// where the range lies in one region, with streaming stores from
/// [`STREAM_MIN`] bytes on (see the module documentation); the bytes are
/// ordered before any store the caller makes after the return.
///
/// # Errors
/// [`QueueFault::Address`]: the range is not all inside guest memory.
pub fn write_guest<M: GuestMemory>(mem: &M, addr: GuestAddress, src: &[u8]) -> Result<(), QueueFault> {
    if let Some(Ok(vs)) = mem.physical_memory().map(|pm| pm.get_slice(addr, src.len())) {
        write_slice(&vs, src);
        return Ok(());
    }
    mem.write_slice(src, addr).map_err(|_| QueueFault::Address)
}

/// Copies `src` to the start of `vs` (at most its length), as
/// [`write_guest`] does once it found the region: streaming stores from
/// [`STREAM_MIN`] bytes on.
pub fn write_slice<B: vm_memory::bitmap::BitmapSlice>(vs: &VolatileSlice<'_, B>, src: &[u8]) {
    let src = &src[..src.len().min(vs.len())];
    if src.len() >= STREAM_MIN && stream::available() {
        let guard = vs.ptr_guard_mut();
        // SAFETY: `vs` (made by `get_slice`, bounds-checked) covers
        // `vs.len() >= src.len()` bytes from `guard.as_ptr()` inside one
        // mapped region of guest memory, which the memory it borrows keeps
        // mapped; `src` is the engine's own memory, never guest memory, so
        // the two do not overlap. Only raw-pointer stores touch the
        // guest's bytes.
        unsafe { stream::copy(guard.as_ptr(), src.as_ptr(), src.len()) };
        vm_memory::bitmap::Bitmap::mark_dirty(vs.bitmap(), 0, src.len());
    } else {
        vs.copy_from(src);
    }
}

/// Copies `src` (one guest's memory) to the start of `dst` (another's, or
/// the same guest's), at most the shorter length: streaming stores from
/// [`STREAM_MIN`] bytes on, as [`write_slice`]; the one-copy path of a held
/// frame (`held::HeldFrame::stream_to`).
///
/// The two ranges may overlap: the graph never sends a held frame back out
/// of its own port, but both are buffers a guest chose, and two ports may
/// map one guest (its memory file mapped twice). Ranges that overlap in
/// this process's address space are copied with `memmove` (`vm-memory`'s
/// `copy_to_volatile_slice`): the guest gets garbage, as it asked, and the
/// engine no undefined behaviour. The same pages mapped at two addresses
/// are two ranges that do not overlap as addresses, which is all a copy
/// requires.
pub fn copy_guest_to_guest<B: vm_memory::bitmap::BitmapSlice, C: vm_memory::bitmap::BitmapSlice>(
    dst: &VolatileSlice<'_, B>,
    src: &VolatileSlice<'_, C>,
) {
    let n = dst.len().min(src.len());
    let (d, s) = (dst.ptr_guard_mut(), src.ptr_guard());
    let disjoint = (d.as_ptr() as usize).abs_diff(s.as_ptr() as usize) >= n;
    if n >= STREAM_MIN && disjoint && stream::available() {
        // SAFETY: both slices were made by `get_slice` (bounds-checked):
        // `d` is valid for `dst.len() >= n` bytes of writes and `s` for
        // `src.len() >= n` bytes of reads, inside mappings their memories
        // keep; the two ranges of `n` bytes do not overlap (their starts
        // are at least `n` apart, checked above). Only raw-pointer loads
        // and stores touch guest memory, never a reference.
        unsafe { stream::copy(d.as_ptr(), s.as_ptr(), n) };
        vm_memory::bitmap::Bitmap::mark_dirty(dst.bitmap(), 0, n);
    } else {
        src.copy_to_volatile_slice(dst.clone());
    }
}

/// Hints the CPU to fetch the first two cache lines of `vs` (a small
/// frame's header and bytes straddle a line boundary), `for_write` with
/// the intent to store (`prefetchw` where the CPU has it): the walk calls
/// it for the chain it takes next ([`super::ring::Rings::prefetch_next`]),
/// whose buffers the frontend last wrote from another CPU, so the line
/// transfers overlap the current frame's work instead of stalling its
/// copy (DPDK's vhost prefetches its bursts the same way). Never changes
/// memory or a result.
#[inline(always)]
pub fn prefetch_slice<B: vm_memory::bitmap::BitmapSlice>(vs: &VolatileSlice<'_, B>, for_write: bool) {
    prefetch_line(vs, 0, for_write);
    prefetch_line(vs, 64, for_write);
}

/// Hints the CPU to fetch the cache line holding byte `offset` of `vs`
/// (nothing if `vs` is shorter), as [`prefetch_slice`]; a no-op
/// elsewhere than x86_64.
#[inline(always)]
pub fn prefetch_line<B: vm_memory::bitmap::BitmapSlice>(vs: &VolatileSlice<'_, B>, offset: usize, for_write: bool) {
    if offset >= vs.len() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        let line = vs.ptr_guard().as_ptr().wrapping_add(offset).cast::<i8>();
        // SAFETY: SSE is part of the x86_64 baseline, so the intrinsic's
        // target feature is present (without PRFCHW the write hint is an
        // ordinary prefetch); a prefetch never faults and never changes
        // memory, whatever the address.
        unsafe {
            if for_write {
                _mm_prefetch::<_MM_HINT_ET0>(line);
            } else {
                _mm_prefetch::<_MM_HINT_T0>(line);
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = for_write;
}

#[cfg(target_arch = "x86_64")]
mod stream {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// SSE2 is part of x86_64.
    pub fn available() -> bool {
        true
    }

    /// Copies `len` bytes from `src` to `dst` with streaming stores for
    /// every whole 64-byte line of `dst` (ordinary copies for the partial
    /// lines at both ends), then fences them.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes of writes, `src` for `len` bytes of
    /// reads, and they do not overlap.
    pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
        let head = dst.align_offset(64).min(len);
        let body = (len - head) & !63;
        // SAFETY: every range below is within `dst..dst + len` and
        // `src..src + len` (head + body <= len), by the caller's contract;
        // the streaming stores' addresses are 16-byte aligned (dst + head
        // is 64-byte aligned).
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let (mut d, mut s) = (dst.add(head), src.add(head));
            let end = d.add(body);
            while d < end {
                let a = _mm_loadu_si128(s.cast::<__m128i>());
                let b = _mm_loadu_si128(s.add(16).cast::<__m128i>());
                let c = _mm_loadu_si128(s.add(32).cast::<__m128i>());
                let e = _mm_loadu_si128(s.add(48).cast::<__m128i>());
                _mm_stream_si128(d.cast::<__m128i>(), a);
                _mm_stream_si128(d.add(16).cast::<__m128i>(), b);
                _mm_stream_si128(d.add(32).cast::<__m128i>(), c);
                _mm_stream_si128(d.add(48).cast::<__m128i>(), e);
                d = d.add(64);
                s = s.add(64);
            }
            std::ptr::copy_nonoverlapping(s, d, len - head - body);
            // Streaming stores are weakly ordered: fence them before the
            // caller's release store publishes the buffer.
            _mm_sfence();
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod stream {
    /// No streaming copy on this architecture.
    pub fn available() -> bool {
        false
    }

    /// Never called ([`available`] is false).
    ///
    /// # Safety
    /// As the x86_64 version.
    pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::GuestMemoryMmap;

    fn mem() -> GuestMemoryMmap<()> {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x4_0000), (GuestAddress(0x4_0000), 0x4_0000)]).unwrap()
    }

    /// Every length and misalignment around the streaming threshold and a
    /// 64-byte line lands byte for byte, and nothing around it changes.
    #[test]
    fn writes_land_exactly() {
        let m = mem();
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 63, 64, 65, STREAM_MIN - 1, STREAM_MIN, STREAM_MIN + 1, 9000, 20_000] {
            for mis in [0u64, 1, 15, 63] {
                let at = GuestAddress(0x1000 + mis);
                m.write_slice(&vec![0xee; 20_200], GuestAddress(0x1000 - 64)).unwrap();
                write_guest(&m, at, &src[..len]).unwrap();
                let mut back = vec![0u8; len + 128];
                m.read_slice(&mut back, GuestAddress(0x1000 + mis - 64)).unwrap();
                assert!(back[..64].iter().all(|&b| b == 0xee), "before, len {len} mis {mis}");
                assert_eq!(&back[64..64 + len], &src[..len], "len {len} mis {mis}");
                assert!(back[64 + len..].iter().all(|&b| b == 0xee), "after, len {len} mis {mis}");
                let mut again = vec![0u8; len];
                read_guest(&m, at, &mut again).unwrap();
                assert_eq!(again, &src[..len]);
            }
        }
    }

    /// Guest to guest, every length around the streaming threshold: the
    /// bytes land; ranges of one mapping that overlap (a guest's own
    /// choice) are copied as `memmove` would, not streamed.
    #[test]
    fn guest_to_guest_copies_land_and_overlapping_ranges_are_moved() {
        let m = mem();
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 13 + 1) as u8).collect();
        for len in [1, STREAM_MIN - 1, STREAM_MIN, 9000, 20_000] {
            for shift in [0u64, 64, 4096, 30_000] {
                m.write_slice(&src, GuestAddress(0x1000)).unwrap();
                let from = m.get_slice(GuestAddress(0x1000), len).unwrap();
                let to = m.get_slice(GuestAddress(0x1000 + shift), len).unwrap();
                copy_guest_to_guest(&to, &from);
                let mut back = vec![0u8; len];
                m.read_slice(&mut back, GuestAddress(0x1000 + shift)).unwrap();
                assert_eq!(back, &src[..len], "len {len} shift {shift}");
            }
        }
    }

    /// A range across two regions is copied (the slow path); one past the
    /// end of guest memory is refused whole.
    #[test]
    fn region_boundaries() {
        let m = mem();
        let src = vec![0x5a; 8192];
        write_guest(&m, GuestAddress(0x4_0000 - 4096), &src).unwrap();
        let mut back = vec![0u8; 8192];
        read_guest(&m, GuestAddress(0x4_0000 - 4096), &mut back).unwrap();
        assert_eq!(back, src);
        assert_eq!(write_guest(&m, GuestAddress(0x8_0000 - 4096), &src), Err(QueueFault::Address));
        assert_eq!(read_guest(&m, GuestAddress(0x8_0000 - 4096), &mut back), Err(QueueFault::Address));
    }
}
