//! The GSO hot path allocates nothing per superpacket or per segment, in
//! both output forms (DEVELOPING.md: "no per-packet heap allocation").

use std::hint::black_box;
use superpacket::offload::gso::{SegmentSink, Segmenter, SgFrame, TargetCaps};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

/// Keeps nothing; lends one preallocated buffer for linear frames.
struct Discard {
    buf: Vec<u8>,
    frames: usize,
}

impl SegmentSink for Discard {
    fn pass_through(&mut self, p: &Packet, _: &OffloadMeta) {
        black_box(p.len());
        self.frames += 1;
    }
    fn sg_frame(&mut self, f: &SgFrame<'_>) {
        black_box(f.len());
        self.frames += 1;
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        &mut self.buf[..len]
    }
    fn linear_frame(&mut self, len: usize, _: &OffloadMeta) {
        black_box(&self.buf[..len]);
        self.frames += 1;
    }
}

#[test]
fn segmenting_does_not_allocate() {
    let cases = [(Transport::Tcp, false, 1448u16), (Transport::Tcp, true, 1428), (Transport::Udp, false, 1400)];
    for (t, v6, gso) in cases {
        let spec = FlowSpec::new(t, v6, 1).with_vlans(&[(0x8100, 7)]).unwrap();
        let pkt = Flow::new(spec).superpacket(60000, gso, TcpFlags::PSH).unwrap();
        let mut seg = Segmenter::new();
        let mut sink = Discard { buf: vec![0; 65536], frames: 0 };
        for caps in [TargetCaps::new(9000), TargetCaps::new(9000).with_sg()] {
            // Warm up (the counters' drop map is the only lazily allocated state).
            seg.segment(&pkt, &caps, &mut sink).unwrap();
            let info = allocation_counter::measure(|| {
                for _ in 0..10 {
                    seg.segment(&pkt, &caps, &mut sink).unwrap();
                }
            });
            assert_eq!(info.count_total, 0, "{t:?} v6 {v6} sg {}: {info:?}", caps.sg);
        }
        assert!(sink.frames >= 22 * 60000 / gso as usize);
    }
}
