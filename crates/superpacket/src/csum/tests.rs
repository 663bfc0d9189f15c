use super::*;
use proptest::prelude::*;

/// The textbook RFC 1071 definition, byte by byte, big-endian words.
fn reference_sum(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for pair in data.chunks(2) {
        let word = if pair.len() == 2 { u16::from_be_bytes([pair[0], pair[1]]) } else { (pair[0] as u16) << 8 };
        acc += word as u32;
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

#[test]
fn rfc1071_example() {
    // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(ones_sum(&data), 0xddf2);
    assert_eq!(checksum(&data), !0xddf2);
}

#[test]
fn known_ipv4_header() {
    // A classic example header with checksum b861.
    let hdr = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];
    assert_eq!(checksum(&hdr), 0xb861);
}

#[test]
fn empty_and_odd() {
    assert_eq!(ones_sum(&[]), 0);
    assert_eq!(ones_sum(&[0xab]), 0xab00);
    assert_eq!(ones_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
}

#[test]
fn all_ones_large_buffers_do_not_overflow() {
    // 0xFF everywhere maximises every lane; 300 KB exceeds one AVX2 block.
    let data = vec![0xFFu8; 300_000 + 3];
    for imp in Implementation::available() {
        assert_eq!(imp.ones_sum(&data), reference_sum(&data), "{}", imp.name());
    }
}

#[test]
fn update_matches_recompute() {
    let mut data: Vec<u8> = (0..64u8).collect();
    let before = checksum(&data);
    let old = [data[10], data[11]];
    data[10] = 0xde;
    data[11] = 0xad;
    assert_eq!(update_bytes(before, &old, &data[10..12]), checksum(&data));
}

#[test]
fn complete_partial_udp_zero_becomes_ffff() {
    // Bytes chosen so that the complemented sum is 0: the sum must be 0xFFFF.
    let mut frame = vec![0xFF, 0xFF, 0x00, 0x00];
    assert_eq!(complete_partial(&mut frame, 0, 2, true), Some(0xFFFF));
    assert_eq!(&frame[2..], &[0xFF, 0xFF]);
    let mut frame = vec![0xFF, 0xFF, 0x00, 0x00];
    assert_eq!(complete_partial(&mut frame, 0, 2, false), Some(0));
    assert_eq!(complete_partial(&mut frame, 0, 3, false), None);
    assert_eq!(complete_partial(&mut frame, usize::MAX, 3, false), None);
}

proptest! {
    #[test]
    fn every_implementation_matches_reference(
        data in proptest::collection::vec(any::<u8>(), 0..5000),
        skip in 0usize..64,
    ) {
        // `skip` shifts the start so every alignment is exercised.
        let slice = &data[skip.min(data.len())..];
        let want = reference_sum(slice);
        prop_assert_eq!(ones_sum(slice), want);
        for imp in Implementation::available() {
            prop_assert_eq!(imp.ones_sum(slice), want, "{}", imp.name());
        }
    }

    #[test]
    fn split_sums_combine(data in proptest::collection::vec(any::<u8>(), 0..3000), cut in 0usize..3000) {
        let cut = cut.min(data.len());
        let combined = ones_add(ones_sum_at(&data[..cut], 0), ones_sum_at(&data[cut..], cut));
        // 0x0000 and 0xFFFF are both zero in ones' complement.
        let want = reference_sum(&data);
        prop_assert!(combined == want || (combined == 0xFFFF && want == 0) || (combined == 0 && want == 0xFFFF));
    }

    #[test]
    fn incremental_update_matches_recompute(
        mut data in proptest::collection::vec(any::<u8>(), 2..600),
        pos in 0usize..300,
        new in any::<u16>(),
    ) {
        let pos = (pos % (data.len() / 2)) * 2;
        let before = checksum(&data);
        let old = u16::from_be_bytes([data[pos], data[pos + 1]]);
        data[pos..pos + 2].copy_from_slice(&new.to_be_bytes());
        let after = checksum(&data);
        let updated = update_u16(before, old, new);
        // RFC 1624: the two zeros of ones' complement may differ.
        prop_assert!(updated == after || (updated ^ after) == 0xFFFF && (updated == 0 || after == 0));
    }
}

/// Deterministic pseudo-random bytes (xorshift), no dependency on a RNG crate.
fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

#[test]
fn every_length_and_alignment_matches_reference() {
    // Covers every head length (alignment), tail length and lone-byte case of
    // the vector paths around their thresholds.
    let data = pseudo_random(1200, 0x9E37_79B9_7F4A_7C15);
    for skip in 0..64 {
        for len in 0..data.len() - 64 {
            let slice = &data[skip..skip + len];
            let want = reference_sum(slice);
            for imp in Implementation::available() {
                assert_eq!(imp.ones_sum(slice), want, "{} len {len} skip {skip}", imp.name());
            }
        }
    }
}

#[test]
fn multi_block_buffers_match_reference() {
    // Longer than several widening blocks (512 KiB for AVX2, 256 KiB for SSE2),
    // at odd and even starts, all-ones and random.
    let ones = vec![0xFFu8; (3 << 20) + 77];
    let random = pseudo_random((3 << 20) + 77, 42);
    for data in [&ones, &random] {
        for skip in [0, 1, 17] {
            let slice = &data[skip..];
            let want = reference_sum(slice);
            for imp in Implementation::available() {
                assert_eq!(imp.ones_sum(slice), want, "{} skip {skip}", imp.name());
            }
        }
    }
}

#[test]
fn all_zero_sums_to_zero_not_ffff() {
    let zeros = vec![0u8; 5000];
    for len in [0, 1, 31, 32, 33, 64, 255, 256, 257, 1500, 4999] {
        for imp in Implementation::available() {
            assert_eq!(imp.ones_sum(&zeros[1..1 + len.min(4999)]), 0, "{} len {len}", imp.name());
        }
    }
}

#[test]
fn all_ones_around_avx512_short_path_limit() {
    // The AVX-512 kernels reduce modulo 2^32 below 2048 lines of 64 bytes
    // (128 KiB) and widen to 64 bits above: all-ones data is the largest sum.
    let ones = vec![0xFFu8; (128 << 10) + 256];
    for len in [(128 << 10) - 65, (128 << 10) - 64, (128 << 10) - 1, 128 << 10, (128 << 10) + 1, (128 << 10) + 64] {
        for skip in [0, 1, 63] {
            let slice = &ones[skip..skip + len];
            let want = reference_sum(slice);
            for imp in Implementation::available() {
                assert_eq!(imp.ones_sum(slice), want, "{} len {len} skip {skip}", imp.name());
            }
        }
    }
}
