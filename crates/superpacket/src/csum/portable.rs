//! Portable RFC 1071 summation: the reference every other implementation is
//! tested against.

/// Native-endian accumulation of `data` as 16-bit words (an odd trailing byte
/// padded with zero in network order). The result is congruent, modulo 0xFFFF,
/// to the ones' complement sum of the host-order words; callers fold it.
#[inline]
pub(super) fn accumulate(data: &[u8]) -> u64 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        // Add the two 32-bit halves into a 64-bit accumulator: no carry is lost
        // for inputs below 16 EiB.
        acc += (w & 0xFFFF_FFFF) + (w >> 32);
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u16::from_ne_bytes([p[0], p[1]]) as u64;
    }
    if let [last] = pairs.remainder() {
        // Network order: the lone byte is the high byte of a zero-padded word.
        acc += u16::from_ne_bytes([*last, 0]) as u64;
    }
    acc
}

/// Copies `src` into `dst` (same length) and returns the native-endian
/// accumulation of the copied bytes, as [`accumulate`] would: one pass, each
/// 8-byte word loaded once, stored and summed.
#[inline]
pub(super) fn copy_accumulate(dst: &mut [u8], src: &[u8]) -> u64 {
    debug_assert_eq!(dst.len(), src.len());
    let mut acc: u64 = 0;
    let mut s8 = src.chunks_exact(8);
    let mut d8 = dst.chunks_exact_mut(8);
    for (s, d) in (&mut s8).zip(&mut d8) {
        let w = u64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
        d.copy_from_slice(&w.to_ne_bytes());
        acc += (w & 0xFFFF_FFFF) + (w >> 32);
    }
    let rest = s8.remainder();
    d8.into_remainder().copy_from_slice(rest);
    acc + accumulate(rest)
}
