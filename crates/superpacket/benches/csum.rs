//! Criterion benchmarks of the Internet checksum against memcpy.
//!
//! One group per size (`csum/<size>`), each with the dispatched `ones_sum`,
//! every available implementation and `memcpy` (`copy_from_slice`, which reads
//! and writes the size), all reported as input bytes per second. Run with
//! `cargo bench --bench csum`, or e.g. `cargo bench --bench csum -- csum/1500`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use superpacket::csum::{Implementation, ones_sum};

/// In-cache sizes, then one out-of-cache size.
const SIZES: [usize; 5] = [64, 1500, 9000, 65536, 64 << 20];

/// A 64-byte-aligned pseudo-random buffer of `len` bytes inside `storage`.
fn aligned(storage: &mut Vec<u8>, len: usize, seed: u64) -> std::ops::Range<usize> {
    *storage = vec![0u8; len + 64];
    let start = storage.as_ptr().align_offset(64);
    let mut x = seed | 1;
    for b in &mut storage[start..start + len] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
    start..start + len
}

fn bench_csum(c: &mut Criterion) {
    for size in SIZES {
        let (mut src_store, mut dst_store) = (Vec::new(), Vec::new());
        let src_range = aligned(&mut src_store, size, size as u64);
        let dst_range = aligned(&mut dst_store, size, 1);
        let src = &src_store[src_range];
        let dst = &mut dst_store[dst_range];

        let mut group = c.benchmark_group(format!("csum/{size}"));
        group.throughput(Throughput::Bytes(size as u64));
        if size > 1 << 20 {
            group.sample_size(10);
        }
        group.bench_function("ones_sum", |b| b.iter(|| ones_sum(black_box(src))));
        for imp in Implementation::available() {
            group.bench_function(imp.name(), |b| b.iter(|| imp.ones_sum(black_box(src))));
        }
        group.bench_function("memcpy", |b| {
            b.iter(|| {
                black_box(&mut *dst).copy_from_slice(black_box(src));
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_csum);
criterion_main!(benches);
