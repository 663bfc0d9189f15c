//! x86_64 vectorised summation: SSE2 (baseline), AVX2, AVX-VNNI, AVX-512 and
//! AVX-512 VNNI (chosen at run time), and the cached dispatch of
//! [`super::ones_sum`] ([`accumulate_selected`]).
//!
//! The AVX-VNNI and AVX-512 kernels use a sign bias and `vpmaddwd`/`vpdpwssd`
//! instead of the scheme below; the AVX-512 ones also replace head, tail and
//! lone-byte handling by masked loads (see [`accumulate_avx512`]).
//!
//! # Algorithm (SSE2, AVX2)
//! Every 32-bit lane `v` of the input holds two native-order 16-bit words,
//! `lo = v & 0xFFFF` and `hi = v >> 16`. Per vector the loop does three cheap
//! operations: `full += v` (wrapping 32-bit add), `high += v >> 16`. At the end
//! `full - (high << 16)` (mod 2^32) is exactly the sum of the `lo` words, because
//! that sum is known to stay below 2^32 (the loop widens before it could not);
//! `lo_sum + high` is then the exact word sum. Three vector-ALU operations per
//! vector is the floor found for AVX2 (the mask-and-shift variant needs four,
//! `vpmaddwd` with a sign bias needs three but is port-restricted, unpacking to
//! 64-bit lanes needs four with two shuffles).
//!
//! Small inputs matter (1500-byte packets), so the fixed cost is kept low:
//! - the horizontal reduction stays in registers (no spill to an array);
//! - the tail is one overlapping vector load ending at the last even byte,
//!   masked with a sliding window over a constant table, plus at most one lone
//!   byte, instead of a scalar loop;
//! - AVX2 aligns its main loop to 32 bytes (split loads cost up to 30% at
//!   64 KiB): the unaligned head is one masked load; if the head length is odd,
//!   the head is byte-swapped within words and the whole sum swapped back at the
//!   end (RFC 1071 section 2(B): only a byte's offset parity matters).
//!
//! The result has the same meaning as [`super::portable::accumulate`]: a
//! native-order sum to be folded, zero only for all-zero input.

use std::arch::x86_64::*;
use std::sync::atomic::{AtomicPtr, Ordering};

/// 128-byte iterations of the AVX2 main loop between two widenings. Each
/// combined 32-bit lane receives at most `4 * AVX2_BLOCK_ITERS + 2` vectors
/// (body, head, tail), each adding at most 0xFFFF to `lo` and to `hi`: the
/// exactness condition `vectors * 2 * 0xFFFF < 2^32` needs fewer than 32768.
const AVX2_BLOCK_ITERS: usize = 4096;

/// 64-byte iterations of the SSE2 main loop between two widenings (same bound:
/// `4 * SSE2_BLOCK_ITERS + 4` vectors per combined lane).
const SSE2_BLOCK_ITERS: usize = 4096;

/// Inputs at least this long get the AVX2 alignment head; below it the extra
/// masked vector costs more than the split loads it saves.
const AVX2_ALIGN_MIN: usize = 256;

/// Sliding-window byte mask: 32 zero bytes then 32 `0xFF` bytes. A 32-byte
/// load at offset `r` keeps the last `r` bytes of a 32-byte vector; a 16-byte
/// load at offset `16 + r` keeps the last `r` bytes of a 16-byte vector.
static TAIL_MASK: [u8; 64] = window(false);

/// 32 `0xFF` bytes then 32 zero bytes: a 32-byte load at offset `32 - k` keeps
/// the first `k` bytes.
static HEAD_MASK: [u8; 64] = window(true);

const fn window(ones_first: bool) -> [u8; 64] {
    let mut m = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        if (i < 32) == ones_first {
            m[i] = 0xFF;
        }
        i += 1;
    }
    m
}

/// Adds partial sums without losing a carry, then folds the total to 64 bits
/// modulo 0xFFFF (a non-zero total stays non-zero).
#[inline]
fn combine_u128(parts: &[u64]) -> u64 {
    let mut wide: u128 = 0;
    for &p in parts {
        wide += p as u128;
    }
    // 2^64 is congruent to 1 modulo 0xFFFF: end-around carry, and a non-zero
    // total stays non-zero.
    let folded = (wide as u64 as u128) + (wide >> 64);
    (folded as u64).wrapping_add((folded >> 64) as u64)
}

// ---------------------------------------------------------------- SSE2

/// SSE2 summation (always present on x86_64).
pub(super) fn accumulate_sse2(data: &[u8]) -> u64 {
    // SAFETY: SSE2 is part of the x86_64 baseline, so the target feature the
    // inner function enables is always present.
    unsafe { accumulate_sse2_inner(data) }
}

/// Exact sum of the words described by the `full`/`high` accumulators.
#[inline]
#[target_feature(enable = "sse2")]
fn reduce_sse2(full: __m128i, high: __m128i) -> u64 {
    // Sum of the low words per lane, exact by the block bound; `lo + hi` per
    // lane is below 2^32 by the same bound.
    let lo = _mm_sub_epi32(full, _mm_slli_epi32(high, 16));
    let x = _mm_add_epi32(lo, high);
    // Widen to 64-bit lanes: (x & 0xFFFF_FFFF) + (x >> 32).
    let w = _mm_add_epi64(_mm_and_si128(x, _mm_set_epi32(0, -1, 0, -1)), _mm_srli_epi64(x, 32));
    let s = _mm_add_epi64(w, _mm_unpackhi_epi64(w, w));
    _mm_cvtsi128_si64(s) as u64
}

#[target_feature(enable = "sse2")]
fn accumulate_sse2_inner(data: &[u8]) -> u64 {
    let len = data.len();
    if len < 16 {
        return super::portable::accumulate(data);
    }
    let p = data.as_ptr();
    let zero = _mm_setzero_si128();
    let (mut f0, mut h0, mut f1, mut h1) = (zero, zero, zero, zero);
    let mut blocks_total: u64 = 0;
    let mut off = 0usize;
    let mut iters = len / 64;
    loop {
        let n = iters.min(SSE2_BLOCK_ITERS);
        for _ in 0..n {
            // SAFETY: `off + 64 <= len` (there are `iters` whole 64-byte chunks
            // from `off`), so the four unaligned 16-byte loads stay inside `data`.
            let (v0, v1, v2, v3) = unsafe {
                let q = p.add(off) as *const __m128i;
                (_mm_loadu_si128(q), _mm_loadu_si128(q.add(1)), _mm_loadu_si128(q.add(2)), _mm_loadu_si128(q.add(3)))
            };
            f0 = _mm_add_epi32(f0, v0);
            h0 = _mm_add_epi32(h0, _mm_srli_epi32(v0, 16));
            f1 = _mm_add_epi32(f1, v1);
            h1 = _mm_add_epi32(h1, _mm_srli_epi32(v1, 16));
            f0 = _mm_add_epi32(f0, v2);
            h0 = _mm_add_epi32(h0, _mm_srli_epi32(v2, 16));
            f1 = _mm_add_epi32(f1, v3);
            h1 = _mm_add_epi32(h1, _mm_srli_epi32(v3, 16));
            off += 64;
        }
        iters -= n;
        if iters == 0 {
            break;
        }
        blocks_total += reduce_sse2(_mm_add_epi32(f0, f1), _mm_add_epi32(h0, h1));
        (f0, h0, f1, h1) = (zero, zero, zero, zero);
    }
    // Up to three whole vectors.
    while off + 16 <= len {
        // SAFETY: `off + 16 <= len`.
        let v = unsafe { _mm_loadu_si128(p.add(off) as *const __m128i) };
        f0 = _mm_add_epi32(f0, v);
        h0 = _mm_add_epi32(h0, _mm_srli_epi32(v, 16));
        off += 16;
    }
    // A lone last byte is the first byte of a zero-padded word: on a
    // little-endian host its native value is the byte itself.
    let mut end = len;
    let mut lone: u64 = 0;
    if len % 2 == 1 {
        end -= 1;
        lone = data[end] as u64;
    }
    let rest = end - off; // even, below 16
    if rest > 0 {
        // SAFETY: `len >= 16`, so at least one whole vector was summed and
        // `end > off >= 16`: the 16 bytes before `end` are inside `data`;
        // `16 + rest + 16 <= 64` keeps the mask load inside `TAIL_MASK`. The
        // mask keeps only the `rest` bytes not yet summed, and `end - 16` is
        // even, so word parity is preserved.
        let v = unsafe {
            let v = _mm_loadu_si128(p.add(end - 16) as *const __m128i);
            let m = _mm_loadu_si128(TAIL_MASK.as_ptr().add(16 + rest) as *const __m128i);
            _mm_and_si128(v, m)
        };
        f1 = _mm_add_epi32(f1, v);
        h1 = _mm_add_epi32(h1, _mm_srli_epi32(v, 16));
    }
    let last = reduce_sse2(_mm_add_epi32(f0, f1), _mm_add_epi32(h0, h1));
    combine_u128(&[blocks_total, last, lone])
}

// ---------------------------------------------------------------- AVX2

/// Exact sum of the words described by the `full`/`high` accumulators.
#[inline]
#[target_feature(enable = "avx2")]
fn reduce_avx2(full: __m256i, high: __m256i) -> u64 {
    let lo = _mm256_sub_epi32(full, _mm256_slli_epi32(high, 16));
    let x = _mm256_add_epi32(lo, high);
    let w = _mm256_add_epi64(_mm256_and_si256(x, _mm256_set1_epi64x(0xFFFF_FFFF)), _mm256_srli_epi64(x, 32));
    let s = _mm_add_epi64(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
    let s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
    _mm_cvtsi128_si64(s) as u64
}

/// [`accumulate_avx2`] after checking that the CPU has AVX2.
///
/// # Panics
/// If the CPU lacks AVX2.
pub(super) fn accumulate_avx2_checked(data: &[u8]) -> u64 {
    assert!(is_x86_feature_detected!("avx2"), "AVX2 checksum requested on a CPU without AVX2");
    // SAFETY: the CPU supports AVX2 (checked just above).
    unsafe { accumulate_avx2(data) }
}

/// AVX2 summation.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn accumulate_avx2(data: &[u8]) -> u64 {
    let len = data.len();
    if len < 32 {
        return accumulate_sse2_inner(data);
    }
    let p = data.as_ptr();
    let zero = _mm256_setzero_si256();
    let (mut f0, mut h0, mut f1, mut h1) = (zero, zero, zero, zero);

    // Head: sum the bytes before the first 32-byte boundary with one masked
    // load, so the main loop's loads never straddle cache lines.
    let mut off = 0usize;
    let mut swapped = false;
    if len >= AVX2_ALIGN_MIN {
        let k = p.align_offset(32);
        if k != 0 {
            // SAFETY: `len >= 32`, so the first 32 bytes are inside `data`;
            // `0 < k < 32`, so `32 - k + 32 <= 64` keeps the mask load inside
            // `HEAD_MASK`. The mask keeps only the first `k` bytes.
            let mut v = unsafe {
                let v = _mm256_loadu_si256(p as *const __m256i);
                let m = _mm256_loadu_si256(HEAD_MASK.as_ptr().add(32 - k) as *const __m256i);
                _mm256_and_si256(v, m)
            };
            if k % 2 == 1 {
                // Everything from here on is summed with its bytes at the other
                // parity ("body parity"); put the head at that parity too, and
                // swap the final sum back.
                let swap = _mm256_set_epi8(
                    14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2,
                    3, 0, 1,
                );
                v = _mm256_shuffle_epi8(v, swap);
                swapped = true;
            }
            f0 = v;
            h0 = _mm256_srli_epi32(v, 16);
            off = k;
        }
    }

    let mut blocks_total: u64 = 0;
    let mut iters = (len - off) / 128;
    loop {
        let n = iters.min(AVX2_BLOCK_ITERS);
        for _ in 0..n {
            // SAFETY: `off + 128 <= len` (there are `iters` whole 128-byte
            // chunks from `off`), so the four unaligned 32-byte loads stay
            // inside `data`.
            let (v0, v1, v2, v3) = unsafe {
                let q = p.add(off) as *const __m256i;
                (
                    _mm256_loadu_si256(q),
                    _mm256_loadu_si256(q.add(1)),
                    _mm256_loadu_si256(q.add(2)),
                    _mm256_loadu_si256(q.add(3)),
                )
            };
            f0 = _mm256_add_epi32(f0, v0);
            h0 = _mm256_add_epi32(h0, _mm256_srli_epi32(v0, 16));
            f1 = _mm256_add_epi32(f1, v1);
            h1 = _mm256_add_epi32(h1, _mm256_srli_epi32(v1, 16));
            f0 = _mm256_add_epi32(f0, v2);
            h0 = _mm256_add_epi32(h0, _mm256_srli_epi32(v2, 16));
            f1 = _mm256_add_epi32(f1, v3);
            h1 = _mm256_add_epi32(h1, _mm256_srli_epi32(v3, 16));
            off += 128;
        }
        iters -= n;
        if iters == 0 {
            break;
        }
        blocks_total += reduce_avx2(_mm256_add_epi32(f0, f1), _mm256_add_epi32(h0, h1));
        (f0, h0, f1, h1) = (zero, zero, zero, zero);
    }

    // Up to three whole vectors.
    while off + 32 <= len {
        // SAFETY: `off + 32 <= len`.
        let v = unsafe { _mm256_loadu_si256(p.add(off) as *const __m256i) };
        f0 = _mm256_add_epi32(f0, v);
        h0 = _mm256_add_epi32(h0, _mm256_srli_epi32(v, 16));
        off += 32;
    }
    // Relative to `off`'s parity, a lone last byte is the first byte of a
    // zero-padded word: its native (little-endian) value is the byte itself.
    let mut end = len;
    let mut lone: u64 = 0;
    if (len - off) % 2 == 1 {
        end -= 1;
        lone = data[end] as u64;
    }
    let rest = end - off; // even, below 32
    if rest > 0 {
        // SAFETY: at least one whole vector was summed after the head (`len >=
        // 32` without a head, `len - off >= 224` with one), so `end > off >= 32`:
        // the 32 bytes before `end` are inside `data`; `rest + 32 <= 64` keeps the mask load inside
        // `TAIL_MASK`. The mask keeps only the `rest` bytes not yet summed, and
        // `end - 32` has the parity of `off`, so word parity is preserved.
        let v = unsafe {
            let v = _mm256_loadu_si256(p.add(end - 32) as *const __m256i);
            let m = _mm256_loadu_si256(TAIL_MASK.as_ptr().add(rest) as *const __m256i);
            _mm256_and_si256(v, m)
        };
        f1 = _mm256_add_epi32(f1, v);
        h1 = _mm256_add_epi32(h1, _mm256_srli_epi32(v, 16));
    }
    let last = reduce_avx2(_mm256_add_epi32(f0, f1), _mm256_add_epi32(h0, h1));
    let total = combine_u128(&[blocks_total, last, lone]);
    if swapped { super::fold64(total).swap_bytes() as u64 } else { total }
}

// ---------------------------------------------------------------- AVX-VNNI

/// Whether the CPU has AVX-VNNI (the VEX-encoded `vpdpwssd`). The standard
/// library caches the CPUID result (CPUID traps to the hypervisor in a VM).
/// AVX register-state support is the caller's AVX2 check.
pub(super) fn has_avx_vnni() -> bool {
    is_x86_feature_detected!("avxvnni")
}

/// 256-byte iterations of the AVX-VNNI main loop between two widenings: eight
/// `i32` accumulators each get one vector per iteration, every vector adds at
/// most 2 x 32768 in magnitude per lane, and the combined lanes (plus at most 9
/// head and tail vectors) must stay below 2^31: `8 * 2048 * 65536 = 2^30`.
const VNNI_BLOCK_ITERS: usize = 2048;

/// Signed 16-bit pair sum of `v` with the sign bias applied: `(w0 - 32768) +
/// (w1 - 32768)` per 32-bit lane.
#[inline]
#[target_feature(enable = "avx2")]
fn biased_pairs(v: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_xor_si256(v, _mm256_set1_epi16(i16::MIN)), _mm256_set1_epi16(1))
}

/// Widens the eight `i32` lane accumulators to `i64` lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn widen_i32(v: __m256i) -> __m256i {
    _mm256_add_epi64(
        _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v)),
        _mm256_cvtepi32_epi64(_mm256_extracti128_si256::<1>(v)),
    )
}

/// One AVX-VNNI step: `acc + biased pair sums of v` (`vpxor` + `vpdpwssd`).
#[inline]
#[target_feature(enable = "avx2,avxvnni")]
fn vnni_step(acc: __m256i, v: __m256i, bias: __m256i, ones: __m256i) -> __m256i {
    _mm256_dpwssd_avx_epi32(acc, _mm256_xor_si256(v, bias), ones)
}

/// [`accumulate_avx_vnni`] after checking that the CPU has AVX2 and AVX-VNNI.
///
/// # Panics
/// If the CPU lacks either.
pub(super) fn accumulate_avx_vnni_checked(data: &[u8]) -> u64 {
    assert!(
        is_x86_feature_detected!("avx2") && has_avx_vnni(),
        "AVX-VNNI checksum requested on a CPU without AVX2 and AVX-VNNI"
    );
    // SAFETY: the CPU supports AVX2 and AVX-VNNI (checked just above).
    unsafe { accumulate_avx_vnni(data) }
}

/// AVX2 + AVX-VNNI summation.
///
/// Every word `w` is biased to the signed `w - 32768` (one `vpxor`) and
/// multiplied by 1 and pair-summed into `i32` lanes by `vpdpwssd`, which also
/// accumulates: two vector operations per 32 bytes instead of three, which is
/// what lifts the in-cache throughput from ~29 to ~38 bytes per cycle. The bias,
/// 32768 per word (16 words per vector, masked words included), is added back
/// exactly at the end. `vpdpwssd` has a 5-cycle latency, so the main loop keeps
/// eight accumulators (plain variables, so that they stay in registers).
///
/// Head alignment, tail and parity handling are those of [`accumulate_avx2`].
///
/// # Safety
/// The CPU must support AVX2 and AVX-VNNI ([`has_avx_vnni`]).
#[target_feature(enable = "avx2,avxvnni")]
unsafe fn accumulate_avx_vnni(data: &[u8]) -> u64 {
    let len = data.len();
    if len < 256 {
        // SAFETY: the caller guarantees AVX2.
        return unsafe { accumulate_avx2(data) };
    }
    let p = data.as_ptr();
    let zero = _mm256_setzero_si256();
    let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
        (zero, zero, zero, zero, zero, zero, zero, zero);
    let mut wide = zero;
    let mut vectors: u64 = 0;

    // Head, as in `accumulate_avx2` (here `len >= 256` always).
    let mut off = 0usize;
    let mut swapped = false;
    let k = p.align_offset(32);
    if k != 0 {
        // SAFETY: `len >= 32`, so the first 32 bytes are inside `data`; `0 < k <
        // 32`, so `32 - k + 32 <= 64` keeps the mask load inside `HEAD_MASK`.
        let mut v = unsafe {
            let v = _mm256_loadu_si256(p as *const __m256i);
            let m = _mm256_loadu_si256(HEAD_MASK.as_ptr().add(32 - k) as *const __m256i);
            _mm256_and_si256(v, m)
        };
        if k % 2 == 1 {
            let swap = _mm256_set_epi8(
                14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3,
                0, 1,
            );
            v = _mm256_shuffle_epi8(v, swap);
            swapped = true;
        }
        a0 = biased_pairs(v);
        vectors += 1;
        off = k;
    }

    let bias = _mm256_set1_epi16(i16::MIN);
    let ones = _mm256_set1_epi16(1);
    let mut iters = (len - off) / 256;
    loop {
        let n = iters.min(VNNI_BLOCK_ITERS);
        for _ in 0..n {
            // SAFETY: `off + 256 <= len` (there are `iters` whole 256-byte
            // chunks from `off`), so the eight 32-byte loads stay inside `data`.
            let v = unsafe {
                let q = p.add(off) as *const __m256i;
                [
                    _mm256_loadu_si256(q),
                    _mm256_loadu_si256(q.add(1)),
                    _mm256_loadu_si256(q.add(2)),
                    _mm256_loadu_si256(q.add(3)),
                    _mm256_loadu_si256(q.add(4)),
                    _mm256_loadu_si256(q.add(5)),
                    _mm256_loadu_si256(q.add(6)),
                    _mm256_loadu_si256(q.add(7)),
                ]
            };
            a0 = vnni_step(a0, v[0], bias, ones);
            a1 = vnni_step(a1, v[1], bias, ones);
            a2 = vnni_step(a2, v[2], bias, ones);
            a3 = vnni_step(a3, v[3], bias, ones);
            a4 = vnni_step(a4, v[4], bias, ones);
            a5 = vnni_step(a5, v[5], bias, ones);
            a6 = vnni_step(a6, v[6], bias, ones);
            a7 = vnni_step(a7, v[7], bias, ones);
            off += 256;
        }
        iters -= n;
        vectors += 8 * n as u64;
        if iters == 0 {
            break;
        }
        let s = sum4(sum4(a0, a1, a2, a3), sum4(a4, a5, a6, a7), zero, zero);
        wide = _mm256_add_epi64(wide, widen_i32(s));
        (a0, a1, a2, a3, a4, a5, a6, a7) = (zero, zero, zero, zero, zero, zero, zero, zero);
    }
    // Up to seven more whole vectors, alternating between two accumulators.
    while off + 64 <= len {
        // SAFETY: `off + 64 <= len`.
        let (v0, v1) = unsafe {
            let q = p.add(off) as *const __m256i;
            (_mm256_loadu_si256(q), _mm256_loadu_si256(q.add(1)))
        };
        a0 = vnni_step(a0, v0, bias, ones);
        a1 = vnni_step(a1, v1, bias, ones);
        vectors += 2;
        off += 64;
    }
    let mut x = sum4(a0, a1, a2, a3);
    let mut y = sum4(a4, a5, a6, a7);
    if off + 32 <= len {
        // SAFETY: `off + 32 <= len`.
        let v = unsafe { _mm256_loadu_si256(p.add(off) as *const __m256i) };
        x = _mm256_add_epi32(x, biased_pairs(v));
        vectors += 1;
        off += 32;
    }
    let mut end = len;
    let mut lone: u64 = 0;
    if (len - off) % 2 == 1 {
        end -= 1;
        lone = data[end] as u64;
    }
    let rest = end - off;
    if rest > 0 {
        // SAFETY: `len - off >= 224` after the head, so whole vectors were
        // summed and `end > off >= 32`: the 32 bytes before `end` are inside
        // `data`; `rest + 32 <= 64` keeps the mask load inside `TAIL_MASK`. The
        // mask keeps only the `rest` bytes not yet summed, at `off`'s parity.
        let v = unsafe {
            let v = _mm256_loadu_si256(p.add(end - 32) as *const __m256i);
            let m = _mm256_loadu_si256(TAIL_MASK.as_ptr().add(rest) as *const __m256i);
            _mm256_and_si256(v, m)
        };
        y = _mm256_add_epi32(y, biased_pairs(v));
        vectors += 1;
    }
    let w = _mm256_add_epi64(wide, widen_i32(_mm256_add_epi32(x, y)));
    let s = _mm_add_epi64(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
    let s = _mm_add_epi64(s, _mm_unpackhi_epi64(s, s));
    // Remove the bias: 16 words of 32768 per vector. The result is the exact
    // word sum, so it is non-negative (and far below 2^63).
    let exact = _mm_cvtsi128_si64(s) + ((vectors as i64) << 19);
    let total = combine_u128(&[exact as u64, lone]);
    if swapped { super::fold64(total).swap_bytes() as u64 } else { total }
}

/// Lane-wise `i32` sum of four accumulators (within the block bound).
#[inline]
#[target_feature(enable = "avx2")]
fn sum4(a: __m256i, b: __m256i, c: __m256i, d: __m256i) -> __m256i {
    _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d))
}

// ---------------------------------------------------------------- AVX-512

/// 512-byte iterations of the AVX-512 main loop between two widenings: eight
/// `i32` accumulators each get one vector per iteration, every vector adds at
/// most 2 x 32768 in magnitude per lane, and the combined lanes (plus at most
/// 9 head, remainder and tail vectors) must stay below 2^31:
/// `(8 * 2048 + 9) * 65536 < 2^31`.
const AVX512_BLOCK_ITERS: usize = 2048;

/// Inputs spanning fewer 64-byte lines than this have an exact word sum below
/// 2^32 (`64 * 2048 / 2` words of at most 0xFFFF), and fit in one block.
const AVX512_SHORT_LINES: usize = 2048;

/// `vpmaddwd` step of [`accumulate_avx512`]: `acc + (w0 + w1)` per 32-bit lane
/// of the biased words `x` (`ones` is 1 in every 16-bit lane).
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn madd_step(acc: __m512i, x: __m512i, ones: __m512i) -> __m512i {
    _mm512_add_epi32(acc, _mm512_madd_epi16(x, ones))
}

/// `vpdpwssd` step of [`accumulate_avx512_vnni`]: the same as [`madd_step`]
/// in one instruction.
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
fn dpwssd_step(acc: __m512i, x: __m512i, ones: __m512i) -> __m512i {
    _mm512_dpwssd_epi32(acc, x, ones)
}

/// Defines an AVX-512 summation function; the two variants differ only in
/// the accumulation step (`$step`) and the target features it needs.
macro_rules! avx512_kernel {
    ($(#[$attr:meta])* fn $name:ident, $features:literal, $step:ident) => {
        $(#[$attr])*
        #[target_feature(enable = $features)]
        unsafe fn $name(data: &[u8]) -> u64 {
            let len = data.len();
            if len == 0 {
                return 0;
            }
            let p = data.as_ptr();
            // All loads are 64-byte aligned: `base` is the start of the line
            // holding `p`, and the data covers offsets `head..end` from it.
            let head = p as usize % 64;
            let end = head + len;
            let lines = end.div_ceil(64);
            let first_mask = u64::MAX << head;
            let last_mask = u64::MAX >> (lines * 64 - end);
            let bias = _mm512_set1_epi16(i16::MIN);
            let ones = _mm512_set1_epi16(1);
            let zero = _mm512_setzero_si512();
            let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
                (zero, zero, zero, zero, zero, zero, zero, zero);
            let mut wide = zero;
            // The line holding the first byte (and the last one if they are the
            // same): a masked load, so nothing outside `data` is read.
            let first = if lines == 1 { first_mask & last_mask } else { first_mask };
            // SAFETY: the mask selects exactly the bytes of line 0 that are
            // inside `data` (offsets `head..min(end, 64)` from `base`); masked-off
            // bytes are neither read nor able to fault, so `base` (computed
            // with wrapping arithmetic, possibly before `data`) is never
            // dereferenced outside `data`. AVX-512BW is enabled.
            let v = unsafe { _mm512_maskz_loadu_epi8(first, p.wrapping_sub(head) as *const i8) };
            a0 = $step(a0, _mm512_xor_si512(v, bias), ones);
            if lines > 1 {
                // Whole lines 1..lines-1 (offsets `64..64 * (lines - 1)` from
                // `base`), then the masked last line.
                let mut off = 64 - head; // offset from `p` of line 1
                let mut iters = (lines - 2) / 8;
                loop {
                    let n = iters.min(AVX512_BLOCK_ITERS);
                    for _ in 0..n {
                        // SAFETY: the eight lines at `off..off + 512` are whole
                        // lines before the last one, so inside `data`; `p + off`
                        // is 64-byte aligned.
                        let v = unsafe {
                            let q = p.add(off) as *const __m512i;
                            [
                                _mm512_load_si512(q),
                                _mm512_load_si512(q.add(1)),
                                _mm512_load_si512(q.add(2)),
                                _mm512_load_si512(q.add(3)),
                                _mm512_load_si512(q.add(4)),
                                _mm512_load_si512(q.add(5)),
                                _mm512_load_si512(q.add(6)),
                                _mm512_load_si512(q.add(7)),
                            ]
                        };
                        a0 = $step(a0, _mm512_xor_si512(v[0], bias), ones);
                        a1 = $step(a1, _mm512_xor_si512(v[1], bias), ones);
                        a2 = $step(a2, _mm512_xor_si512(v[2], bias), ones);
                        a3 = $step(a3, _mm512_xor_si512(v[3], bias), ones);
                        a4 = $step(a4, _mm512_xor_si512(v[4], bias), ones);
                        a5 = $step(a5, _mm512_xor_si512(v[5], bias), ones);
                        a6 = $step(a6, _mm512_xor_si512(v[6], bias), ones);
                        a7 = $step(a7, _mm512_xor_si512(v[7], bias), ones);
                        off += 512;
                    }
                    iters -= n;
                    if iters == 0 {
                        break;
                    }
                    wide = _mm512_add_epi64(wide, widen_i32x16(sum8([a0, a1, a2, a3, a4, a5, a6, a7])));
                    (a0, a1, a2, a3, a4, a5, a6, a7) = (zero, zero, zero, zero, zero, zero, zero, zero);
                }
                // The remaining zero to seven whole lines, spread over the
                // accumulators so that their latencies overlap.
                let rem = (lines - 2) % 8;
                if rem >= 4 {
                    // SAFETY: four whole lines before the last one, aligned.
                    let v = unsafe {
                        let q = p.add(off) as *const __m512i;
                        [
                            _mm512_load_si512(q),
                            _mm512_load_si512(q.add(1)),
                            _mm512_load_si512(q.add(2)),
                            _mm512_load_si512(q.add(3)),
                        ]
                    };
                    a4 = $step(a4, _mm512_xor_si512(v[0], bias), ones);
                    a5 = $step(a5, _mm512_xor_si512(v[1], bias), ones);
                    a6 = $step(a6, _mm512_xor_si512(v[2], bias), ones);
                    a7 = $step(a7, _mm512_xor_si512(v[3], bias), ones);
                    off += 256;
                }
                if rem & 2 != 0 {
                    // SAFETY: two whole lines before the last one, aligned.
                    let v = unsafe {
                        let q = p.add(off) as *const __m512i;
                        [_mm512_load_si512(q), _mm512_load_si512(q.add(1))]
                    };
                    a1 = $step(a1, _mm512_xor_si512(v[0], bias), ones);
                    a2 = $step(a2, _mm512_xor_si512(v[1], bias), ones);
                    off += 128;
                }
                if rem & 1 != 0 {
                    // SAFETY: one whole line before the last one, aligned.
                    let v = unsafe { _mm512_load_si512(p.add(off) as *const __m512i) };
                    a3 = $step(a3, _mm512_xor_si512(v, bias), ones);
                    off += 64;
                }
                // SAFETY: `off` is the last line (`off < len <= off + 64`); the
                // mask selects its `end - 64 * (lines - 1)` bytes inside `data`,
                // masked-off bytes are not read.
                let v = unsafe { _mm512_maskz_loadu_epi8(last_mask, p.add(off) as *const i8) };
                a5 = $step(a5, _mm512_xor_si512(v, bias), ones);
            }
            // Remove the bias: 32 words of 32768 per line (masked-off words
            // included). The result is the exact sum of the words, taken at
            // address parity, so it is non-negative (and far below 2^63).
            let exact = if lines < AVX512_SHORT_LINES {
                // The exact sum is below 2^32, so it can be computed modulo 2^32:
                // a cheaper reduction in `i32` lanes, without widening.
                let s = sum8([a0, a1, a2, a3, a4, a5, a6, a7]);
                (_mm512_reduce_add_epi32(s) as u32).wrapping_add((lines as u32) << 20) as u64
            } else {
                let w = _mm512_add_epi64(wide, widen_i32x16(sum8([a0, a1, a2, a3, a4, a5, a6, a7])));
                (_mm512_reduce_add_epi64(w) + ((lines as i64) << 20)) as u64
            };
            // Words were formed at even addresses: if `data` starts at an odd
            // address, every data word was summed byte-swapped (RFC 1071 2(B)).
            if head % 2 == 1 { super::fold64(exact).swap_bytes() as u64 } else { exact }
        }
    };
}

avx512_kernel! {
    /// AVX-512 (F + BW) summation, 64 bytes per vector.
    ///
    /// Every vector is a whole 64-byte-aligned line: the first and the last
    /// lines are read with masked loads (`vmovdqu8` with a zeroing byte mask),
    /// so there is no head or tail loop and no scalar code at all, whatever the
    /// length or alignment. Because words are formed at even *addresses*, an
    /// odd start address only swaps the bytes of the final sum. Words are
    /// biased to signed (`vpxorq` with 0x8000) and pair-summed into `i32` lanes
    /// by `vpmaddwd` against ones, then added (`vpaddd`): three operations per
    /// 64 bytes. Eight accumulators, widened to `i64` every 1 MiB; the bias
    /// (32768 per word) is added back exactly at the end.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and AVX-512BW.
    fn accumulate_avx512, "avx512f,avx512bw", madd_step
}

avx512_kernel! {
    /// [`accumulate_avx512`] with the `vpmaddwd` + `vpaddd` pair fused into the
    /// AVX-512 VNNI `vpdpwssd`: two operations per 64 bytes.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, AVX-512BW and AVX-512 VNNI.
    fn accumulate_avx512_vnni, "avx512f,avx512bw,avx512vnni", dpwssd_step
}

/// Lane-wise `i32` sum of eight accumulators (within the block bound).
#[inline]
#[target_feature(enable = "avx512f")]
fn sum8(a: [__m512i; 8]) -> __m512i {
    let s0 = _mm512_add_epi32(_mm512_add_epi32(a[0], a[1]), _mm512_add_epi32(a[2], a[3]));
    let s1 = _mm512_add_epi32(_mm512_add_epi32(a[4], a[5]), _mm512_add_epi32(a[6], a[7]));
    _mm512_add_epi32(s0, s1)
}

/// Sign-extends sixteen `i32` lanes and adds them pairwise into eight `i64` lanes.
#[inline]
#[target_feature(enable = "avx512f")]
fn widen_i32x16(s: __m512i) -> __m512i {
    _mm512_add_epi64(
        _mm512_cvtepi32_epi64(_mm512_castsi512_si256(s)),
        _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(s)),
    )
}

/// Whether the CPU can run [`accumulate_avx512`].
pub(super) fn has_avx512() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw")
}

/// Whether the CPU can run [`accumulate_avx512_vnni`].
pub(super) fn has_avx512_vnni() -> bool {
    has_avx512() && is_x86_feature_detected!("avx512vnni")
}

/// [`accumulate_avx512`] after checking that the CPU has AVX-512F and BW.
///
/// # Panics
/// If the CPU lacks either.
pub(super) fn accumulate_avx512_checked(data: &[u8]) -> u64 {
    assert!(has_avx512(), "AVX-512 checksum requested on a CPU without AVX-512F/BW");
    // SAFETY: the CPU supports AVX-512F and AVX-512BW (checked just above).
    unsafe { accumulate_avx512(data) }
}

/// [`accumulate_avx512_vnni`] after checking that the CPU has AVX-512F, BW
/// and VNNI.
///
/// # Panics
/// If the CPU lacks any of them.
pub(super) fn accumulate_avx512_vnni_checked(data: &[u8]) -> u64 {
    assert!(has_avx512_vnni(), "AVX-512 VNNI checksum requested on a CPU without AVX-512F/BW/VNNI");
    // SAFETY: the CPU supports AVX-512F, BW and VNNI (checked just above).
    unsafe { accumulate_avx512_vnni(data) }
}

// ------------------------------------------------ AVX2 fused copy + sum

/// [`copy_accumulate_avx2`] after checking that the CPU has AVX2 and that the
/// slices have the same length.
///
/// # Panics
/// If the CPU lacks AVX2 or `dst.len() != src.len()`.
#[cfg(test)]
pub(super) fn copy_accumulate_avx2_checked(dst: &mut [u8], src: &[u8]) -> u64 {
    assert!(is_x86_feature_detected!("avx2"), "AVX2 copy-and-sum requested on a CPU without AVX2");
    assert_eq!(dst.len(), src.len(), "copy-and-sum needs equal lengths");
    // SAFETY: the CPU supports AVX2 and the lengths are equal (checked just above).
    unsafe { copy_accumulate_avx2(dst, src) }
}

/// Copies `src` into `dst` and accumulates the copied bytes in the same pass
/// (each 32-byte vector is loaded once, stored once and summed with the
/// `full`/`high` scheme of [`accumulate_avx2`]). The result has the meaning of
/// [`super::portable::accumulate`] over `src`.
///
/// # Safety
/// The CPU must support AVX2 and `dst.len() == src.len()`.
#[target_feature(enable = "avx2")]
unsafe fn copy_accumulate_avx2(dst: &mut [u8], src: &[u8]) -> u64 {
    let len = src.len();
    if len < 32 {
        dst.copy_from_slice(src);
        return super::portable::accumulate(src);
    }
    let s = src.as_ptr();
    let d = dst.as_mut_ptr();
    let zero = _mm256_setzero_si256();
    let (mut f0, mut h0, mut f1, mut h1) = (zero, zero, zero, zero);
    let mut blocks_total: u64 = 0;
    let mut off = 0usize;
    let mut iters = len / 128;
    loop {
        let n = iters.min(AVX2_BLOCK_ITERS);
        for _ in 0..n {
            // SAFETY: `off + 128 <= len` (there are `iters` whole 128-byte
            // chunks from `off`) and `dst` has the length of `src`, so the four
            // unaligned 32-byte loads and stores stay inside the slices, which
            // cannot overlap (one is borrowed mutably).
            let (v0, v1, v2, v3) = unsafe {
                let q = s.add(off) as *const __m256i;
                let v = (
                    _mm256_loadu_si256(q),
                    _mm256_loadu_si256(q.add(1)),
                    _mm256_loadu_si256(q.add(2)),
                    _mm256_loadu_si256(q.add(3)),
                );
                let w = d.add(off) as *mut __m256i;
                _mm256_storeu_si256(w, v.0);
                _mm256_storeu_si256(w.add(1), v.1);
                _mm256_storeu_si256(w.add(2), v.2);
                _mm256_storeu_si256(w.add(3), v.3);
                v
            };
            f0 = _mm256_add_epi32(f0, v0);
            h0 = _mm256_add_epi32(h0, _mm256_srli_epi32(v0, 16));
            f1 = _mm256_add_epi32(f1, v1);
            h1 = _mm256_add_epi32(h1, _mm256_srli_epi32(v1, 16));
            f0 = _mm256_add_epi32(f0, v2);
            h0 = _mm256_add_epi32(h0, _mm256_srli_epi32(v2, 16));
            f1 = _mm256_add_epi32(f1, v3);
            h1 = _mm256_add_epi32(h1, _mm256_srli_epi32(v3, 16));
            off += 128;
        }
        iters -= n;
        if iters == 0 {
            break;
        }
        blocks_total += reduce_avx2(_mm256_add_epi32(f0, f1), _mm256_add_epi32(h0, h1));
        (f0, h0, f1, h1) = (zero, zero, zero, zero);
    }
    // Up to three whole vectors (each lane then holds at most
    // `2 * AVX2_BLOCK_ITERS + 3` vectors: inside the exactness bound),
    // straight-line: as a loop LLVM turns their copy into a `memcpy` call,
    // with the accumulators spilled around it, once per call.
    let whole = (len - off) / 32;
    for k in 0..3 {
        if k < whole {
            // SAFETY: `off + 32 * (k + 1) <= len` for both slices (there are
            // `whole` whole vectors from `off`); they do not overlap.
            let v = unsafe {
                let v = _mm256_loadu_si256(s.add(off + 32 * k) as *const __m256i);
                _mm256_storeu_si256(d.add(off + 32 * k) as *mut __m256i, v);
                v
            };
            f0 = _mm256_add_epi32(f0, v);
            h0 = _mm256_add_epi32(h0, _mm256_srli_epi32(v, 16));
        }
    }
    off += 32 * whole;
    // Fewer than 32 bytes left from `off` (a multiple of 32, so even): one
    // overlapping vector copies them (rewriting bytes already copied with
    // the same values), and the bytes not yet summed are summed from a
    // masked vector ending at the last even byte, plus at most one lone
    // byte, as in `accumulate_avx2` (no scalar loop, no `memcpy` call).
    let mut lone: u64 = 0;
    let rem = len - off;
    if rem > 0 {
        // SAFETY: `len >= 32` (checked at entry), so the 32 bytes before
        // `len` are inside both slices, which do not overlap.
        let last_vec = unsafe {
            let v = _mm256_loadu_si256(s.add(len - 32) as *const __m256i);
            _mm256_storeu_si256(d.add(len - 32) as *mut __m256i, v);
            v
        };
        let end = len - rem % 2;
        if end < len {
            // A lone last byte is the first byte of a zero-padded word: on
            // a little-endian host its native value is the byte itself.
            lone = src[end] as u64;
        }
        let rest = end - off; // even, below 32
        if rest > 0 {
            // SAFETY: `end > off >= 32` (at least one whole vector was
            // copied), so the 32 bytes before `end` are inside `src`;
            // `rest + 32 <= 64` keeps the mask load inside `TAIL_MASK`. The
            // mask keeps only the `rest` bytes not yet summed, and `end - 32`
            // is even, so word parity is preserved.
            let v = unsafe {
                let v = if end == len { last_vec } else { _mm256_loadu_si256(s.add(end - 32) as *const __m256i) };
                let m = _mm256_loadu_si256(TAIL_MASK.as_ptr().add(rest) as *const __m256i);
                _mm256_and_si256(v, m)
            };
            f1 = _mm256_add_epi32(f1, v);
            h1 = _mm256_add_epi32(h1, _mm256_srli_epi32(v, 16));
        }
    }
    let last = reduce_avx2(_mm256_add_epi32(f0, f1), _mm256_add_epi32(h0, h1));
    combine_u128(&[blocks_total, last, lone])
}

// ---------------------------------------------------------------- dispatch

/// A summation kernel without its CPU-feature check: only ever called through
/// [`SELECTED`], which holds kernels the CPU supports.
type Kernel = unsafe fn(&[u8]) -> u64;

/// The kernel [`accumulate_selected`] calls. It starts as
/// [`select_and_accumulate`], which replaces itself with the kernel of
/// [`super::Implementation::selected`] on the first call: afterwards a call
/// costs one relaxed load and one indirect call (no feature checks, no match).
static SELECTED: AtomicPtr<()> = AtomicPtr::new(select_and_accumulate as Kernel as *mut ());

/// Accumulation of `data` with the selected implementation (the kernel behind
/// [`super::ones_sum`]).
#[inline]
pub(super) fn accumulate_selected(data: &[u8]) -> u64 {
    let f = SELECTED.load(Ordering::Relaxed);
    // SAFETY: `SELECTED` only ever holds a `Kernel` cast to a pointer: its
    // initial value, or one stored by `select_and_accumulate` from
    // `kernel_for`, which returns only kernels whose CPU features are present.
    unsafe { std::mem::transmute::<*mut (), Kernel>(f)(data) }
}

/// The initial [`SELECTED`] kernel: selects the implementation, stores its
/// kernel and runs it.
fn select_and_accumulate(data: &[u8]) -> u64 {
    let kernel = kernel_for(super::Implementation::selected()).expect("the selected implementation is available");
    SELECTED.store(kernel as *mut (), Ordering::Relaxed);
    // SAFETY: `kernel_for` checked the CPU features this kernel needs.
    unsafe { kernel(data) }
}

/// The kernel of `imp`, if this CPU supports it.
fn kernel_for(imp: super::Implementation) -> Option<Kernel> {
    use super::Implementation as I;
    let avx2 = is_x86_feature_detected!("avx2");
    match imp {
        I::Portable => Some(super::portable::accumulate),
        I::Sse2 => Some(accumulate_sse2),
        I::Avx2 if avx2 => Some(accumulate_avx2),
        I::AvxVnni if avx2 && has_avx_vnni() => Some(accumulate_avx_vnni),
        I::Avx512 if has_avx512() => Some(accumulate_avx512),
        I::Avx512Vnni if has_avx512_vnni() => Some(accumulate_avx512_vnni),
        _ => None,
    }
}

// ------------------------------------------------ fused copy + sum dispatch

/// A fused copy-and-sum kernel without its checks: only ever called through
/// [`COPY_SELECTED`], which holds kernels the CPU supports.
///
/// # Safety
/// The CPU must have the kernel's features and `dst.len() == src.len()`.
type CopyKernel = unsafe fn(&mut [u8], &[u8]) -> u64;

/// The kernel [`copy_accumulate_selected`] calls: like [`SELECTED`], it
/// starts as [`select_and_copy`], which stores the kernel of
/// [`super::Implementation::selected`] on the first call, so that a copy
/// costs one relaxed load and one indirect call instead of the selection,
/// the feature checks and the length check per call (about 40 instructions,
/// once per segment of linear GSO output).
static COPY_SELECTED: AtomicPtr<()> = AtomicPtr::new(select_and_copy as CopyKernel as *mut ());

/// Copies `src` into `dst` and accumulates it with the selected fused kernel.
///
/// # Safety
/// `dst.len() == src.len()` (the kernels read and write `src.len()` bytes).
#[inline]
pub(super) unsafe fn copy_accumulate_selected(dst: &mut [u8], src: &[u8]) -> u64 {
    let f = COPY_SELECTED.load(Ordering::Relaxed);
    // SAFETY: `COPY_SELECTED` only ever holds a `CopyKernel` cast to a
    // pointer: its initial value, or one stored by `select_and_copy` from
    // `copy_kernel_for`, which returns only kernels whose CPU features are
    // present; the caller guarantees equal lengths.
    unsafe { std::mem::transmute::<*mut (), CopyKernel>(f)(dst, src) }
}

/// The initial [`COPY_SELECTED`] kernel: selects, stores and runs.
///
/// # Safety
/// `dst.len() == src.len()`.
unsafe fn select_and_copy(dst: &mut [u8], src: &[u8]) -> u64 {
    let kernel = copy_kernel_for(super::Implementation::selected());
    COPY_SELECTED.store(kernel as *mut (), Ordering::Relaxed);
    // SAFETY: `copy_kernel_for` checked the CPU features; the caller
    // guarantees equal lengths.
    unsafe { kernel(dst, src) }
}

/// The fused kernel for `imp`: AVX-512 (F+BW) for the AVX-512 summation
/// implementations, AVX2 for the AVX2 ones, else the portable loop (each
/// only if the CPU has its features).
fn copy_kernel_for(imp: super::Implementation) -> CopyKernel {
    use super::Implementation as I;
    match imp {
        I::Avx512 | I::Avx512Vnni if has_avx512() => copy_accumulate_avx512,
        I::Avx2 | I::AvxVnni if is_x86_feature_detected!("avx2") => copy_accumulate_avx2,
        _ => super::portable::copy_accumulate,
    }
}

// ------------------------------------------------ AVX-512 fused copy + sum

/// 256-byte iterations of [`copy_accumulate_avx512`] between two widenings:
/// each 32-bit lane of `f0`/`f1` receives two vectors per iteration, plus the
/// masked first line, at most three whole lines and the masked last line, far
/// below the `32768`-vector exactness bound of the `full`/`high` scheme.
const AVX512_COPY_BLOCK_ITERS: usize = 4096;

/// Exact sum of the words described by 512-bit `full`/`high` accumulators.
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce_avx512_full_high(full: __m512i, high: __m512i) -> u64 {
    let lo = _mm512_sub_epi32(full, _mm512_slli_epi32(high, 16));
    let x = _mm512_add_epi32(lo, high);
    let w = _mm512_add_epi64(_mm512_and_si512(x, _mm512_set1_epi64(0xFFFF_FFFF)), _mm512_srli_epi64(x, 32));
    _mm512_reduce_add_epi64(w) as u64
}

/// [`copy_accumulate_avx512`] after checking the CPU features and lengths.
///
/// # Panics
/// If the CPU lacks AVX-512F/BW or `dst.len() != src.len()`.
#[cfg(test)]
pub(super) fn copy_accumulate_avx512_checked(dst: &mut [u8], src: &[u8]) -> u64 {
    assert!(has_avx512(), "AVX-512 copy-and-sum requested on a CPU without AVX-512F/BW");
    assert_eq!(dst.len(), src.len(), "copy-and-sum needs equal lengths");
    // SAFETY: the CPU supports AVX-512F and BW and the lengths are equal (checked just above).
    unsafe { copy_accumulate_avx512(dst, src) }
}

/// Copies `src` into `dst` and accumulates the copied bytes in the same pass,
/// 64 bytes per vector. Same result as [`super::portable::accumulate`] over
/// `src`.
///
/// The loads are 64-byte aligned, as in [`accumulate_avx512`]: each vector is
/// one whole cache line of `src`, the first and the last line read with a
/// masked load (bytes outside `src` are neither read nor written, and read as
/// zero), and each vector is stored, unaligned, at the same offset in `dst`
/// under the same mask. A linear GSO segment's payload starts anywhere in a
/// line of the superpacket (1448 is not a multiple of 64): with unaligned
/// loads nearly every vector of the copy spans two lines, which cost this
/// copy about a tenth of its time on AMD EPYC (docs/benchmarks.md, "Linear
/// VXLAN GSO at 2x DPDK"); unaligned stores into the output buffer cost
/// little. Words are formed at even *addresses*, so an odd `src` only swaps
/// the bytes of the sum (RFC 1071 2(B)).
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW and `dst.len() == src.len()`.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn copy_accumulate_avx512(dst: &mut [u8], src: &[u8]) -> u64 {
    let len = src.len();
    if len == 0 {
        return 0;
    }
    let s = src.as_ptr();
    let d = dst.as_mut_ptr();
    // Vector k covers the line at `s - head + 64 * k`, i.e. offsets
    // `64 * k - head ..` of both slices; the data covers `head..end` of the lines.
    let head = s as usize % 64;
    let end = head + len;
    let lines = end.div_ceil(64);
    let first_mask = u64::MAX << head;
    let last_mask = u64::MAX >> (lines * 64 - end);
    let zero = _mm512_setzero_si512();
    let (mut f0, mut h0, mut f1, mut h1) = (zero, zero, zero, zero);
    let mut blocks_total: u64 = 0;
    // SAFETY: the mask selects exactly the bytes of line 0 inside `src`
    // (offsets `head..min(end, 64)` from the line start), and the same
    // offsets of `dst`, which has the length of `src`; masked-off bytes are
    // neither accessed nor able to fault, so the line starts (computed with
    // wrapping arithmetic, possibly before the slices) are never accessed
    // outside them. The slices cannot overlap (one is borrowed mutably).
    let v = unsafe {
        let mask = if lines == 1 { first_mask & last_mask } else { first_mask };
        let v = _mm512_maskz_loadu_epi8(mask, s.wrapping_sub(head) as *const i8);
        _mm512_mask_storeu_epi8(d.wrapping_sub(head) as *mut i8, mask, v);
        v
    };
    f0 = _mm512_add_epi32(f0, v);
    h0 = _mm512_add_epi32(h0, _mm512_srli_epi32(v, 16));
    if lines > 1 {
        // Whole lines 1..lines-1 (slice offsets `64 - head ..`), four per
        // iteration, then up to three, then the masked last line.
        let mut off = 64 - head;
        let mut iters = (lines - 2) / 4;
        loop {
            let n = iters.min(AVX512_COPY_BLOCK_ITERS);
            for _ in 0..n {
                // SAFETY: the four lines at `off..off + 256` are whole lines
                // before the last one, so inside `src` and, at the same
                // offsets, inside `dst`; `s + off` is 64-byte aligned.
                let (v0, v1, v2, v3) = unsafe {
                    let q = s.add(off) as *const __m512i;
                    let v = (
                        _mm512_load_si512(q),
                        _mm512_load_si512(q.add(1)),
                        _mm512_load_si512(q.add(2)),
                        _mm512_load_si512(q.add(3)),
                    );
                    let w = d.add(off) as *mut __m512i;
                    _mm512_storeu_si512(w, v.0);
                    _mm512_storeu_si512(w.add(1), v.1);
                    _mm512_storeu_si512(w.add(2), v.2);
                    _mm512_storeu_si512(w.add(3), v.3);
                    v
                };
                f0 = _mm512_add_epi32(f0, v0);
                h0 = _mm512_add_epi32(h0, _mm512_srli_epi32(v0, 16));
                f1 = _mm512_add_epi32(f1, v1);
                h1 = _mm512_add_epi32(h1, _mm512_srli_epi32(v1, 16));
                f0 = _mm512_add_epi32(f0, v2);
                h0 = _mm512_add_epi32(h0, _mm512_srli_epi32(v2, 16));
                f1 = _mm512_add_epi32(f1, v3);
                h1 = _mm512_add_epi32(h1, _mm512_srli_epi32(v3, 16));
                off += 256;
            }
            iters -= n;
            if iters == 0 {
                break;
            }
            blocks_total += reduce_avx512_full_high(_mm512_add_epi32(f0, f1), _mm512_add_epi32(h0, h1));
            (f0, h0, f1, h1) = (zero, zero, zero, zero);
        }
        // Up to three whole lines, straight-line (as a loop LLVM turns
        // their copy into a `memcpy` call, with the accumulators spilled
        // around it).
        let whole = (lines - 2) % 4;
        for k in 0..3 {
            if k < whole {
                // SAFETY: line `off + 64 * k` is a whole line before the last
                // one, inside both slices; aligned in `src`.
                let v = unsafe {
                    let v = _mm512_load_si512(s.add(off + 64 * k) as *const __m512i);
                    _mm512_storeu_si512(d.add(off + 64 * k) as *mut __m512i, v);
                    v
                };
                f1 = _mm512_add_epi32(f1, v);
                h1 = _mm512_add_epi32(h1, _mm512_srli_epi32(v, 16));
            }
        }
        off += 64 * whole;
        // SAFETY: `off` is the last line (`off < len <= off + 64`); the mask
        // selects its `len - off` bytes, inside both slices; masked-off bytes
        // are not accessed.
        let v = unsafe {
            let v = _mm512_maskz_loadu_epi8(last_mask, s.add(off) as *const i8);
            _mm512_mask_storeu_epi8(d.add(off) as *mut i8, last_mask, v);
            v
        };
        f0 = _mm512_add_epi32(f0, v);
        h0 = _mm512_add_epi32(h0, _mm512_srli_epi32(v, 16));
    }
    let last = reduce_avx512_full_high(_mm512_add_epi32(f0, f1), _mm512_add_epi32(h0, h1));
    let exact = combine_u128(&[blocks_total, last]);
    // Words were formed at even addresses: from an odd `src` every word of
    // the data was summed byte-swapped.
    if head % 2 == 1 { super::fold64(exact).swap_bytes() as u64 } else { exact }
}
