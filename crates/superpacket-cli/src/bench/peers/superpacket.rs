//! superpacket on the peers' workloads: the same frames, the same bursts,
//! timed the same way (the engine call over preloaded packets; building the
//! packets and counting the output are not timed). Like the peers' inputs
//! (DPDK's mbufs come back to their mempool, tun-rs reuses one buffer
//! array), GRO's input buffers are reused from sample to sample: each
//! sample's output gives its buffers back ([`Packet::into_buffers`]) and
//! the next sample is copied into them ([`refill_bursts`]). Allocated
//! afresh for every sample, they landed wherever `malloc` put them, and
//! the single-flow trusted row swung between 16 and 24 Mpps from run to run.
//!
//! Two forms of each, matching what the peers do:
//! - GRO `verify`: every segment's TCP checksum is summed before it is
//!   merged (`CHECKSUM_NONE` on receive), as tun-rs does; GRO `trusted`: the
//!   NIC validated it (`CHECKSUM_UNNECESSARY`), as DPDK's GRO assumes (it
//!   never looks at checksums).
//! - GSO `linear`: each segment copied into its own buffer with the checksum
//!   summed in the same pass, as tun-rs's `gso_split` writes them; GSO `sg`:
//!   a fresh header plus payload slices borrowed from the superpacket, the
//!   checksum summed from the slices, as DPDK's indirect-mbuf segments (plus
//!   the software checksum the peers' row adds).
//!
//! VXLAN rows: GRO with [`PEERS_GRO`] plus a VXLAN tunnel on port 4789
//! ([`GroConfig::with_tunnel`]), merging on the inner flow; `trusted` there
//! means the NIC validated the inner TCP checksum too (`CHECKSUM_UNNECESSARY`
//! level 1; the outer UDP checksum is 0). GSO of `UDP_TUNNEL` superpackets
//! for a target without offloads: outer and inner IPv4 header checksums and
//! the inner TCP checksum completed.

use std::hint::black_box;
use std::time::Instant;

use super::EngineRun;
use super::workload::{ETH_HLEN, GSO_SEGMENTS, GroWorkload, GsoWorkload};
use crate::bench::gro::refill_bursts;
use superpacket::offload::gro::{Gro, GroConfig, UdpGroMode};
use superpacket::offload::gso::{SegmentSink, Segmenter, SgFrame, TargetCaps};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet, TunnelKind};
use superpacket::wire::vxlan::VXLAN_PORT;

/// How superpacket's GRO treats receive checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroChecksum {
    /// Sum every segment's TCP checksum (what tun-rs does).
    Verify,
    /// Trust the NIC (`CHECKSUM_UNNECESSARY`: what DPDK's GRO assumes).
    Trusted,
}

/// The GRO configuration of the comparison: Linux's rules, with a flow
/// table that holds every flow of a burst (64 buckets x 8 instead of
/// Linux's 8 x 8, which evicts when 64 flows hash unevenly), as tun-rs's
/// table (sized for 128 flows) and DPDK's (sized to the burst) do. With
/// Linux's 8 x 8, 64 interleaved flows give more, smaller aggregates: not
/// the same output as the peers. For UDP rows, UDP segment GRO is on
/// (`rx-udp-gro-forwarding`), as tun-rs's UDP GRO does.
pub const PEERS_GRO: GroConfig = GroConfig { buckets: 64, ..GroConfig::LINUX };

/// superpacket's GRO engine for the workload ([`PEERS_GRO`], UDP segment
/// GRO for UDP rows, the VXLAN port for VXLAN rows) and the checksum state
/// its received packets carry: what [`gro`] times and `bench instructions`
/// counts.
pub fn gro_engine(work: &GroWorkload, csum: GroChecksum) -> (Gro, ChecksumState) {
    let state = match csum {
        GroChecksum::Verify => ChecksumState::None,
        // Over VXLAN (outer UDP checksum 0) the NIC's validation covers the
        // inner TCP checksum: level 1, as Linux marks it.
        GroChecksum::Trusted => ChecksumState::Unnecessary { level: u8::from(work.vxlan) },
    };
    let udp = if work.udp { UdpGroMode::Forward } else { UdpGroMode::Off };
    let mut config = GroConfig { udp, ..PEERS_GRO };
    if work.vxlan {
        config = config.with_tunnel(VXLAN_PORT, TunnelKind::Vxlan);
    }
    (Gro::new(config), state)
}

/// What a GRO engine delivered over one pass of a workload, one vector per
/// receive burst: what a caller that takes each burst's output
/// ([`Gro::swap_delivered`]: no packet copied) and hands it on has. The
/// vectors are reused from pass to pass, so that a pass allocates nothing
/// once they have grown.
pub struct BurstOutputs {
    bursts: Vec<Vec<Packet>>,
    batch: usize,
}

impl BurstOutputs {
    /// Outputs of bursts of up to `batch` packets.
    pub fn new(batch: usize) -> Self {
        BurstOutputs { bursts: Vec::new(), batch }
    }

    /// Receives each burst into `engine`, flushes, and takes its output:
    /// burst `i`'s delivered packets go to vector `i`, whose (drained)
    /// buffer the engine delivers the next burst into.
    pub fn receive(&mut self, engine: &mut Gro, bursts: &mut [Vec<Packet>]) {
        if self.bursts.len() < bursts.len() {
            self.bursts.resize_with(bursts.len(), || Vec::with_capacity(self.batch));
        }
        for (burst, out) in bursts.iter_mut().zip(&mut self.bursts) {
            engine.receive_burst(burst);
            engine.flush();
            engine.swap_delivered(out);
        }
    }

    /// The delivered packets, in delivery order.
    pub fn packets(&self) -> impl Iterator<Item = &Packet> {
        self.bursts.iter().flatten()
    }

    /// Gives the delivered packets' buffers to `spare` (the next pass's
    /// inputs, [`refill_bursts`]), leaving every vector empty.
    pub fn recycle(&mut self, spare: &mut Vec<Vec<u8>>) {
        for p in self.bursts.iter_mut().flat_map(|b| b.drain(..)) {
            p.into_buffers(spare);
        }
    }
}

/// Times superpacket's GRO ([`PEERS_GRO`]) over the workload, `samples` times.
pub fn gro(work: &GroWorkload, csum: GroChecksum, samples: usize) -> EngineRun {
    let (mut engine, state) = gro_engine(work, csum);
    let mut delivered = BurstOutputs::new(work.batch);
    let mut run = EngineRun::new(work.frames.len() as u64);
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(work.frames.len());
    for pass in EngineRun::passes(samples) {
        let mut bursts = refill_bursts(&work.frames, work.batch, state, &mut spare);
        let start = Instant::now();
        delivered.receive(&mut engine, &mut bursts);
        let secs = start.elapsed().as_secs_f64();
        let bytes = delivered.packets().map(|p| (p.total_len() - ETH_HLEN) as u64).sum();
        run.record_pass(pass, secs, delivered.packets().count() as u64, bytes);
        delivered.recycle(&mut spare);
    }
    run
}

/// How superpacket's GSO hands out segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoOutput {
    /// Each segment copied into its own buffer (what tun-rs produces).
    Linear,
    /// Header plus borrowed payload slices (what DPDK's GSO produces).
    ScatterGather,
}

/// A sink that gives every segment of a superpacket its own output buffer
/// (like the peers' output arrays) and counts what it gets.
pub struct CountingSink {
    bufs: Vec<Vec<u8>>,
    next: usize,
    /// Segments (and packets passed through) received.
    pub frames: u64,
    /// Their IP bytes (without the Ethernet header).
    pub ip_bytes: u64,
}

impl CountingSink {
    /// A sink with one 1514-byte buffer per segment of a superpacket.
    pub fn new() -> Self {
        CountingSink { bufs: vec![vec![0; 1514]; GSO_SEGMENTS], next: 0, frames: 0, ip_bytes: 0 }
    }
}

impl Default for CountingSink {
    fn default() -> Self {
        Self::new()
    }
}

/// The target superpacket's GSO segments for: the workload's MTU, no
/// offload (so every checksum is completed), scatter-gather or not.
pub fn gso_caps(work: &GsoWorkload, output: GsoOutput) -> TargetCaps {
    match output {
        GsoOutput::Linear => TargetCaps::new(work.mtu),
        GsoOutput::ScatterGather => TargetCaps::new(work.mtu).with_sg(),
    }
}

impl SegmentSink for CountingSink {
    fn pass_through(&mut self, packet: &Packet, _: &OffloadMeta) {
        self.frames += 1;
        self.ip_bytes += (packet.total_len() - ETH_HLEN) as u64;
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        black_box((frame.header.as_ptr(), frame.payload));
        self.frames += 1;
        self.ip_bytes += (frame.len() - ETH_HLEN) as u64;
    }
    // Inlined into the segmenter's loop, as a port's own sink would be;
    // growing a buffer is out of line, the next buffer found without a
    // division.
    #[inline]
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        let buf = &mut self.bufs[self.next];
        if buf.len() < len {
            grow(buf, len);
        }
        &mut buf[..len]
    }
    #[inline]
    fn linear_frame(&mut self, len: usize, _: &OffloadMeta) {
        black_box(&self.bufs[self.next][..len]);
        self.next += 1;
        if self.next == self.bufs.len() {
            self.next = 0;
        }
        self.frames += 1;
        self.ip_bytes += (len - ETH_HLEN) as u64;
    }
}

/// Grows an output buffer to `len` bytes (a frame longer than any before).
#[cold]
#[inline(never)]
fn grow(buf: &mut Vec<u8>, len: usize) {
    buf.resize(len, 0);
}

/// Times superpacket's software GSO of the workload's superpackets for a
/// target without any offload (so every checksum is completed), `samples`
/// times.
///
/// # Errors
/// The segmenter's error, as text (never expected on these superpackets).
pub fn gso(work: &GsoWorkload, output: GsoOutput, samples: usize) -> Result<EngineRun, String> {
    let caps = gso_caps(work, output);
    let mut segmenter = Segmenter::new();
    let mut sink = CountingSink::new();
    let mut run = EngineRun::new(work.superpackets.len() as u64);
    for pass in EngineRun::passes(samples) {
        sink.frames = 0;
        sink.ip_bytes = 0;
        let start = Instant::now();
        for p in &work.superpackets {
            segmenter.segment(p, &caps, &mut sink).map_err(|e| format!("superpacket GSO: {e}"))?;
        }
        let secs = start.elapsed().as_secs_f64();
        run.record_pass(pass, secs, sink.frames, sink.ip_bytes);
    }
    Ok(run)
}
