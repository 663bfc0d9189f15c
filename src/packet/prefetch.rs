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
