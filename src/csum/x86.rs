//! x86_64 vectorised summation (SSE2 baseline, AVX2 chosen at run time).
//!
//! Both split every 32-bit lane into its two 16-bit words (mask and shift, no
//! shuffles), add them into 32-bit lane accumulators, and widen those into a
//! 64-bit total before any lane can overflow. The result has the same meaning
//! as [`super::portable::accumulate`]: a native-order sum to be folded.

use std::arch::x86_64::*;

/// Vectors summed into the 32-bit lane accumulators before they are widened.
/// Each step adds at most 2 x 0xFFFF per lane, so 2^14 steps stay below 2^32.
const BLOCK_STEPS: usize = 1 << 14;

/// SSE2 summation (always present on x86_64).
pub(super) fn accumulate_sse2(data: &[u8]) -> u64 {
    // SAFETY: SSE2 is part of the x86_64 baseline.
    unsafe { accumulate_sse2_inner(data) }
}

#[target_feature(enable = "sse2")]
unsafe fn accumulate_sse2_inner(data: &[u8]) -> u64 {
    let mask = _mm_set1_epi32(0xFFFF);
    let mut total: u64 = 0;
    let mut vectors = data.chunks_exact(64);
    loop {
        let mut a0 = _mm_setzero_si128();
        let mut a1 = _mm_setzero_si128();
        let mut a2 = _mm_setzero_si128();
        let mut a3 = _mm_setzero_si128();
        let mut steps = 0;
        for c in vectors.by_ref() {
            let p = c.as_ptr() as *const __m128i;
            // SAFETY: `c` is 64 bytes long, so the four unaligned 16-byte loads
            // stay inside it.
            let (v0, v1, v2, v3) = unsafe {
                (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)), _mm_loadu_si128(p.add(2)), _mm_loadu_si128(p.add(3)))
            };
            a0 = _mm_add_epi32(a0, _mm_add_epi32(_mm_and_si128(v0, mask), _mm_srli_epi32(v0, 16)));
            a1 = _mm_add_epi32(a1, _mm_add_epi32(_mm_and_si128(v1, mask), _mm_srli_epi32(v1, 16)));
            a2 = _mm_add_epi32(a2, _mm_add_epi32(_mm_and_si128(v2, mask), _mm_srli_epi32(v2, 16)));
            a3 = _mm_add_epi32(a3, _mm_add_epi32(_mm_and_si128(v3, mask), _mm_srli_epi32(v3, 16)));
            steps += 1;
            if steps == BLOCK_STEPS {
                break;
            }
        }
        let mut lanes = [0u32; 16];
        // SAFETY: `lanes` holds 64 bytes: four unaligned 16-byte stores fit.
        unsafe {
            let out = lanes.as_mut_ptr() as *mut __m128i;
            _mm_storeu_si128(out, a0);
            _mm_storeu_si128(out.add(1), a1);
            _mm_storeu_si128(out.add(2), a2);
            _mm_storeu_si128(out.add(3), a3);
        }
        total += lanes.iter().map(|&l| l as u64).sum::<u64>();
        if steps < BLOCK_STEPS {
            break;
        }
    }
    total + super::portable::accumulate(vectors.remainder())
}

/// AVX2 summation.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn accumulate_avx2(data: &[u8]) -> u64 {
    let mask = _mm256_set1_epi32(0xFFFF);
    let mut total: u64 = 0;
    let mut vectors = data.chunks_exact(128);
    loop {
        let mut a0 = _mm256_setzero_si256();
        let mut a1 = _mm256_setzero_si256();
        let mut a2 = _mm256_setzero_si256();
        let mut a3 = _mm256_setzero_si256();
        let mut steps = 0;
        for c in vectors.by_ref() {
            let p = c.as_ptr() as *const __m256i;
            // SAFETY: `c` is 128 bytes long, so the four unaligned 32-byte loads
            // stay inside it.
            let (v0, v1, v2, v3) = unsafe {
                (
                    _mm256_loadu_si256(p),
                    _mm256_loadu_si256(p.add(1)),
                    _mm256_loadu_si256(p.add(2)),
                    _mm256_loadu_si256(p.add(3)),
                )
            };
            a0 = _mm256_add_epi32(a0, _mm256_add_epi32(_mm256_and_si256(v0, mask), _mm256_srli_epi32(v0, 16)));
            a1 = _mm256_add_epi32(a1, _mm256_add_epi32(_mm256_and_si256(v1, mask), _mm256_srli_epi32(v1, 16)));
            a2 = _mm256_add_epi32(a2, _mm256_add_epi32(_mm256_and_si256(v2, mask), _mm256_srli_epi32(v2, 16)));
            a3 = _mm256_add_epi32(a3, _mm256_add_epi32(_mm256_and_si256(v3, mask), _mm256_srli_epi32(v3, 16)));
            steps += 1;
            if steps == BLOCK_STEPS {
                break;
            }
        }
        let mut lanes = [0u32; 32];
        // SAFETY: `lanes` holds 128 bytes: four unaligned 32-byte stores fit.
        unsafe {
            let out = lanes.as_mut_ptr() as *mut __m256i;
            _mm256_storeu_si256(out, a0);
            _mm256_storeu_si256(out.add(1), a1);
            _mm256_storeu_si256(out.add(2), a2);
            _mm256_storeu_si256(out.add(3), a3);
        }
        total += lanes.iter().map(|&l| l as u64).sum::<u64>();
        if steps < BLOCK_STEPS {
            break;
        }
    }
    total + super::portable::accumulate(vectors.remainder())
}
