//! x86_64 vectorised summation (SSE2 baseline, AVX2 chosen at run time).
//!
//! # Algorithm
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
        // `end > off >= 16`: the 16 bytes before `end` are inside `data`; `16 + rest + 16 <= 64` keeps the mask load inside
        // `TAIL_MASK`. The mask keeps only the `rest` bytes not yet summed, and
        // `end - 16` is even, so word parity is preserved.
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

/// Whether the CPU has AVX-VNNI (the VEX-encoded `vpdpwssd`), detected once
/// with CPUID (leaf 7 sub-leaf 1, EAX bit 4) and cached: CPUID traps to the
/// hypervisor in a VM. AVX register-state support is the caller's AVX2 check.
pub(super) fn has_avx_vnni() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    static CACHE: AtomicU8 = AtomicU8::new(0);
    match CACHE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            #[allow(unused_unsafe)] // `__cpuid*` are safe functions in newer Rust.
            // SAFETY: CPUID exists on every x86_64 CPU; sub-leaf 1 of leaf 7 is
            // only queried when the maximum basic leaf is at least 7.
            let has = unsafe { __cpuid(0).eax >= 7 && __cpuid_count(7, 1).eax & (1 << 4) != 0 };
            CACHE.store(if has { 2 } else { 1 }, Ordering::Relaxed);
            has
        }
    }
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
/// what lifts the in-cache throughput from ~29 to ~40 bytes per cycle. The bias,
/// 32768 per word (16 words per vector, masked words included), is added back
/// exactly at the end. `vpdpwssd` has a 5-cycle latency, so the main loop keeps
/// eight accumulators. It is written as inline assembly because the `avxvnni`
/// target feature and its intrinsics need Rust 1.89 (the crate supports 1.88).
///
/// Head alignment, tail and parity handling are those of [`accumulate_avx2`].
///
/// # Safety
/// The CPU must support AVX2 and AVX-VNNI ([`has_avx_vnni`]).
#[target_feature(enable = "avx2")]
unsafe fn accumulate_avx_vnni(data: &[u8]) -> u64 {
    let len = data.len();
    if len < 256 {
        // SAFETY: the caller guarantees AVX2.
        return unsafe { accumulate_avx2(data) };
    }
    let p = data.as_ptr();
    let zero = _mm256_setzero_si256();
    // Eight accumulators for the main loop (kept in registers: no array, which
    // would be spilled to the stack around the assembly).
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
        iters -= n;
        // In the last block, also the whole 64-byte pairs after the 256-byte
        // chunks (at most three), into two of the accumulators.
        let pairs = if iters == 0 { (len - off - n * 256) / 64 } else { 0 };
        // SAFETY: the assembly reads `n * 256 + pairs * 64` bytes from `p +
        // off`, and `off + n * 256 + pairs * 64 <= len` (`n` whole 256-byte
        // chunks, then `pairs` whole 64-byte chunks of what is left), so every
        // load is inside `data`. Both loops are skipped when their count is 0.
        // The CPU supports AVX-VNNI (caller's guarantee). Only the named
        // registers and flags are modified; no stack, no memory writes.
        unsafe {
            std::arch::asm!(
                "test {n}, {n}",
                "jz 3f",
                "2:",
                "vpxor {t0}, {bias}, ymmword ptr [{p}]",
                "{{vex}} vpdpwssd {a0}, {t0}, {ones}",
                "vpxor {t1}, {bias}, ymmword ptr [{p} + 32]",
                "{{vex}} vpdpwssd {a1}, {t1}, {ones}",
                "vpxor {t2}, {bias}, ymmword ptr [{p} + 64]",
                "{{vex}} vpdpwssd {a2}, {t2}, {ones}",
                "vpxor {t3}, {bias}, ymmword ptr [{p} + 96]",
                "{{vex}} vpdpwssd {a3}, {t3}, {ones}",
                "vpxor {t0}, {bias}, ymmword ptr [{p} + 128]",
                "{{vex}} vpdpwssd {a4}, {t0}, {ones}",
                "vpxor {t1}, {bias}, ymmword ptr [{p} + 160]",
                "{{vex}} vpdpwssd {a5}, {t1}, {ones}",
                "vpxor {t2}, {bias}, ymmword ptr [{p} + 192]",
                "{{vex}} vpdpwssd {a6}, {t2}, {ones}",
                "vpxor {t3}, {bias}, ymmword ptr [{p} + 224]",
                "{{vex}} vpdpwssd {a7}, {t3}, {ones}",
                "add {p}, 256",
                "dec {n}",
                "jnz 2b",
                "3:",
                "test {m}, {m}",
                "jz 5f",
                "4:",
                "vpxor {t0}, {bias}, ymmword ptr [{p}]",
                "{{vex}} vpdpwssd {a0}, {t0}, {ones}",
                "vpxor {t1}, {bias}, ymmword ptr [{p} + 32]",
                "{{vex}} vpdpwssd {a1}, {t1}, {ones}",
                "add {p}, 64",
                "dec {m}",
                "jnz 4b",
                "5:",
                p = inout(reg) p.add(off) => _,
                n = inout(reg) n => _,
                m = inout(reg) pairs => _,
                bias = in(ymm_reg) bias,
                ones = in(ymm_reg) ones,
                a0 = inout(ymm_reg) a0,
                a1 = inout(ymm_reg) a1,
                a2 = inout(ymm_reg) a2,
                a3 = inout(ymm_reg) a3,
                a4 = inout(ymm_reg) a4,
                a5 = inout(ymm_reg) a5,
                a6 = inout(ymm_reg) a6,
                a7 = inout(ymm_reg) a7,
                t0 = out(ymm_reg) _,
                t1 = out(ymm_reg) _,
                t2 = out(ymm_reg) _,
                t3 = out(ymm_reg) _,
                options(nostack, readonly),
            );
        }
        off += n * 256 + pairs * 64;
        vectors += 8 * n as u64 + 2 * pairs as u64;
        if iters == 0 {
            break;
        }
        let s = sum4(sum4(a0, a1, a2, a3), sum4(a4, a5, a6, a7), zero, zero);
        wide = _mm256_add_epi64(wide, widen_i32(s));
        (a0, a1, a2, a3, a4, a5, a6, a7) = (zero, zero, zero, zero, zero, zero, zero, zero);
    }
    let mut x = sum4(a0, a1, a2, a3);
    let mut y = sum4(a4, a5, a6, a7);

    // At most one more whole vector.
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
