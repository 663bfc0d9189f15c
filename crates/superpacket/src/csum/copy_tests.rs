//! Tests of the fused copy-and-checksum ([`copy_and_sum`]) against
//! [`ones_sum`] plus a plain copy.

use super::*;
use proptest::prelude::*;

fn check(src: &[u8], dst_offset: usize) {
    let mut buf = vec![0xA5u8; src.len() + dst_offset + 1];
    let dst = &mut buf[dst_offset..dst_offset + src.len()];
    let s = copy_and_sum(dst, src);
    assert_eq!(dst, src, "copied bytes (len {}, dst offset {dst_offset})", src.len());
    assert_eq!(s, ones_sum(src), "sum (len {})", src.len());
    let mut dst2 = vec![0u8; src.len()];
    assert_eq!(copy_and_sum_portable(&mut dst2, src), ones_sum(src));
    assert_eq!(dst2, src);
    assert_eq!(buf[dst_offset + src.len()], 0xA5, "no write past the end");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let mut dst3 = vec![0u8; src.len()];
        let native = super::x86::copy_accumulate_avx2_checked(&mut dst3, src);
        assert_eq!(fold_native(native), ones_sum(src), "AVX2 sum (len {})", src.len());
        assert_eq!(dst3, src);
    }
    #[cfg(target_arch = "x86_64")]
    if super::x86::has_avx512() {
        let mut dst4 = vec![0u8; src.len()];
        let native = super::x86::copy_accumulate_avx512_checked(&mut dst4, src);
        assert_eq!(fold_native(native), ones_sum(src), "AVX-512 sum (len {})", src.len());
        assert_eq!(dst4, src);
    }
}

#[test]
fn every_small_length_and_alignment() {
    let data: Vec<u8> = (0..700u32).map(|i| (i.wrapping_mul(151) ^ (i >> 3)) as u8).collect();
    for len in 0..300 {
        for start in 0..3 {
            for dst_offset in 0..3 {
                check(&data[start..start + len], dst_offset);
            }
        }
    }
}

#[test]
fn all_ones_beyond_one_block() {
    // 0xFF everywhere maximises every lane; 600 KB exceeds one AVX2 block.
    let data = vec![0xFFu8; 600_000 + 5];
    check(&data, 1);
}

proptest! {
    #[test]
    fn matches_ones_sum_and_memcpy(data in proptest::collection::vec(any::<u8>(), 0..5000), start in 0usize..4, dst_offset in 0usize..40) {
        let start = start.min(data.len());
        check(&data[start..], dst_offset);
    }
}

/// Every offset of the source inside a 64-byte line (the AVX-512 kernel
/// aligns its loads to the source's lines and masks the first and last
/// one), with lengths around whole lines and a GSO segment's 1448 bytes; the
/// bytes on either side of the destination stay untouched.
#[test]
fn every_source_line_offset() {
    const GUARD: usize = 64;
    let backing: Vec<u8> = (0..2048u32).map(|i| (i.wrapping_mul(97) ^ (i >> 5)) as u8).collect();
    let line_start = backing.as_ptr().align_offset(64);
    let lens = [1, 2, 3, 62, 63, 64, 65, 66, 127, 128, 129, 255, 256, 257, 320, 383, 384, 385, 511, 512, 1448, 1449];
    for head in 0..64 {
        for len in lens {
            let src = &backing[line_start + head..line_start + head + len];
            for dst_offset in 0..3 {
                check(src, dst_offset);
                let mut buf = vec![0x5Au8; GUARD + dst_offset + len + GUARD];
                let dst = &mut buf[GUARD + dst_offset..GUARD + dst_offset + len];
                assert_eq!(copy_and_sum(dst, src), ones_sum(src), "sum (head {head}, len {len})");
                assert_eq!(dst, src, "copy (head {head}, len {len})");
                let outside = buf[..GUARD + dst_offset].iter().chain(&buf[GUARD + dst_offset + len..]);
                assert!(outside.into_iter().all(|&b| b == 0x5A), "write outside dst (head {head}, len {len})");
            }
        }
    }
}
