//! Cache prefetch hints for packets a receive loop is about to read (as
//! NIC drivers prefetch the next descriptors' data): GRO prefetches the
//! packet two ahead whose checksum it will sum.

/// Hints the CPU to bring the first `lines` cache lines of `bytes` into
/// L1. A no-op on other architectures; never changes any result.
#[inline(always)]
pub fn prefetch_lines(bytes: &[u8], lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let n = bytes.len().div_ceil(64).min(lines);
        for i in 0..n {
            // SAFETY: SSE is part of the x86_64 baseline, so the intrinsic's
            // target feature is present; `i * 64 < bytes.len()`, so the
            // address is inside the slice; a prefetch never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(i * 64).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, lines);
}

/// Hints the CPU to bring the two cache lines that hold a frame's headers
/// (Ethernet, IP and TCP with options reach past the first 64 bytes) into
/// L1: the line of `at` and the next. The address is only a hint, never
/// read through, so it takes no slice: no length is looked at (a short
/// frame's second line is prefetched anyway, harmlessly), and a caller
/// that has the address at hand saves the bounds checks of making one
/// ([`super::Packet::prefetch_headers`]). A no-op on other architectures.
#[inline(always)]
pub fn prefetch_headers_at(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let at = at.cast::<i8>();
        // SAFETY: SSE is part of the x86_64 baseline, so the intrinsic's
        // target feature is present; a prefetch never faults and never
        // changes memory, whatever the address (`wrapping_add` makes the
        // second one without pointer arithmetic past an allocation).
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at);
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
