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
