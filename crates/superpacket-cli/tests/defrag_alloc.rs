//! In-order reassembly (local delivery, frames in receive buffers) allocates
//! once per datagram, for the datagram's buffer, and nothing per fragment
//! (DEVELOPING.md: "no per-packet heap allocation").

use std::hint::black_box;
use superpacket::offload::frag::{ManualClock, ReasmConfig, Reassembler, Scope, Verdict};
use superpacket::packet::OffloadMeta;
use superpacket_cli::bench::defrag::fragment_set;

#[test]
fn in_order_reassembly_allocates_one_buffer_per_datagram() {
    for v6 in [false, true] {
        let frames = fragment_set(v6);
        let mut r = Reassembler::with_clock(ReasmConfig::default(), ManualClock::new(0));
        let run = |r: &mut Reassembler<ManualClock>| {
            let mut done = 0;
            for f in &frames {
                if let Ok(Verdict::Complete(x)) = r.push_frame(f, OffloadMeta::default(), Scope::default()) {
                    black_box(&x);
                    done += 1;
                }
            }
            done
        };
        // Warm up: the queue table, slot slab, peer table and run pool.
        assert_eq!(run(&mut r), 1);
        let mut done = 0;
        let info = allocation_counter::measure(|| {
            for _ in 0..10 {
                done += run(&mut r);
            }
        });
        assert_eq!(done, 10);
        assert_eq!(info.count_total, 10, "v6 {v6}: {info:?}");
    }
}
