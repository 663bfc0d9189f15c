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

/// Longest frame [`write_rx_frame`] copies with a few inline loads and
/// stores; longer ones go through [`write_slice`].
pub const INLINE_MAX: usize = 128;

/// Writes the 12-byte header `hdr` and then `frame` at the start of `vs`:
/// a frame placed alone in a receive buffer. Returns false, writing
/// nothing, if `vs` is shorter than the two.
///
/// A frame of 16 to [`INLINE_MAX`] bytes (every small frame) is copied by
/// a few 16-byte loads and stores inline, the last ones overlapping the
/// ones before where the length is not a multiple of 16 (the small-size
/// path of `memcpy`, without its call and the checks
/// `VolatileSlice::copy_from` makes before it); the header is one 12-byte
/// store before it. Any other goes through [`write_slice`].
#[inline(always)]
pub fn write_rx_frame<B: vm_memory::bitmap::BitmapSlice>(
    vs: &VolatileSlice<'_, B>,
    hdr: [u8; 12],
    frame: &[u8],
) -> bool {
    let n = frame.len();
    // No overflow: a slice of bytes is at most `isize::MAX` long.
    let total = 12 + n;
    if vs.len() < total {
        return false;
    }
    if !(16..=INLINE_MAX).contains(&n) {
        let (Ok(h), Ok(rest)) = (vs.subslice(0, 12), vs.subslice(12, n)) else { return false };
        h.copy_from(&hdr);
        write_slice(&rest, frame);
        return true;
    }
    // The guard lives to the end (a mapping it may hold stays while the copy runs).
    let guard = vs.ptr_guard_mut();
    let dst = guard.as_ptr();
    // SAFETY: `vs` (bounds-checked by `vm-memory` where it was made) covers
    // `vs.len() >= total` bytes from `dst` inside one mapped region, which
    // the memory it borrows keeps mapped; `frame` is the engine's own
    // memory, never guest memory, so the two do not overlap; `n` is in
    // `16..=INLINE_MAX`, `copy_small`'s contract. Only raw-pointer
    // unaligned stores touch the guest's bytes (copy semantics, no
    // reference to guest memory).
    unsafe {
        std::ptr::write_unaligned(dst.cast::<[u8; 12]>(), hdr);
        copy_small(dst.add(12), frame.as_ptr(), n);
    }
    vm_memory::bitmap::Bitmap::mark_dirty(vs.bitmap(), 0, total);
    true
}

/// Copies `n` bytes from `src` to `dst` with 16-byte unaligned loads and
/// stores (two, four or eight, the last ones overlapping), no loop.
///
/// # Safety
/// `n` is in `16..=INLINE_MAX`; `dst` is valid for `n` bytes of writes,
/// `src` for `n` bytes of reads, and they do not overlap.
#[inline(always)]
unsafe fn copy_small(dst: *mut u8, src: *const u8, n: usize) {
    type Block = [u8; 16];
    // SAFETY (for each call): `off + 16 <= n` (`n >= 16`, and each offset
    // below is at most `n - 16`), within both ranges by the caller's
    // contract.
    let block = |off: usize| unsafe {
        std::ptr::write_unaligned(dst.add(off).cast::<Block>(), std::ptr::read_unaligned(src.add(off).cast::<Block>()));
    };
    if n <= 32 {
        block(0);
        block(n - 16);
    } else if n <= 64 {
        block(0);
        block(16);
        block(n - 32);
        block(n - 16);
    } else {
        for off in [0, 16, 32, 48, n - 64, n - 48, n - 32, n - 16] {
            block(off);
        }
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

/// Hints the CPU to fetch the two cache lines from host address `at` on
/// (a small frame's header and bytes straddle a line boundary), `for_write`
/// with the intent to store (`prefetchw` where the CPU has it): the walk
/// calls it for the chains it takes next ([`super::ring::Rings::prefetch_next`]),
/// whose buffers the frontend last wrote from another CPU, so the line
/// transfers overlap the current frame's work instead of stalling its
/// copy (DPDK's vhost prefetches its bursts the same way). `at` may be any
/// address: nothing is read or written, and a prefetch never faults.
#[inline(always)]
pub fn prefetch_pair_at(at: *const u8, for_write: bool) {
    prefetch_at(at, for_write);
    prefetch_at(at.wrapping_add(64), for_write);
}

/// Hints the CPU to fetch the cache line holding host address `at` (any
/// address), as [`prefetch_pair_at`]; a no-op elsewhere than x86_64.
#[inline(always)]
pub fn prefetch_at(at: *const u8, for_write: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        let line = at.cast::<i8>();
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
    let _ = (at, for_write);
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

    /// A frame after its header, every length around the inline copy's
    /// steps and bounds, at every misalignment: header and frame land byte
    /// for byte and nothing around them changes; a buffer one byte short
    /// gets nothing.
    #[test]
    fn receive_frames_land_exactly() {
        let m = mem();
        let src: Vec<u8> = (0..600u32).map(|i| (i * 11 + 5) as u8).collect();
        let hdr: [u8; 12] = std::array::from_fn(|i| 0xa0 + i as u8);
        let lens = [0, 1, 14, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 80, 127, 128, 129, 500];
        for len in lens {
            for mis in [0u64, 1, 7, 15, 63] {
                let at = GuestAddress(0x1000 + mis);
                m.write_slice(&[0xee; 800], GuestAddress(0x1000 - 64)).unwrap();
                let short = m.get_slice(at, 12 + len - 1).unwrap();
                assert!(!write_rx_frame(&short, hdr, &src[..len]), "len {len} mis {mis}: short buffer");
                let vs = m.get_slice(at, 12 + len + 7).unwrap();
                assert!(write_rx_frame(&vs, hdr, &src[..len]), "len {len} mis {mis}");
                let mut back = vec![0u8; 12 + len + 128];
                m.read_slice(&mut back, GuestAddress(0x1000 + mis - 64)).unwrap();
                assert!(back[..64].iter().all(|&b| b == 0xee), "before, len {len} mis {mis}");
                assert_eq!(&back[64..76], &hdr, "header, len {len} mis {mis}");
                assert_eq!(&back[76..76 + len], &src[..len], "len {len} mis {mis}");
                assert!(back[76 + len..].iter().all(|&b| b == 0xee), "after, len {len} mis {mis}");
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
