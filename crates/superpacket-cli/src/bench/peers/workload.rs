//! The preloaded input every engine of `superpacket bench peers` gets: the
//! same frames, built once, in the same order, cut into the same batches.
//!
//! - GRO: TCP/IPv4 Ethernet frames of 1448-byte segments with valid checksums
//!   and TCP timestamps (as [`superpacket::traffic::Flow`] builds them), `flows`
//!   flows interleaved packet by packet (round-robin, as a NIC ring fills
//!   with many busy connections), cut into receive bursts of `batch` frames;
//!   every engine flushes at the end of each burst (NAPI's `napi_complete`,
//!   DPDK's lightweight mode, tun-rs's per-read table).
//! - UDP GRO: the same with UDP/IPv4 datagrams of 1400 payload bytes (the
//!   peers and superpacket in UDP segment GRO, Linux's
//!   `rx-udp-gro-forwarding`); DPDK has no UDP segment GRO (its UDP GRO
//!   reassembles IP fragments), so those rows have no DPDK figure.
//! - GSO: 64 KB TCP/IPv4 superpackets (45 segments of 1448 bytes) as a TAP
//!   with TSO delivers them: `CHECKSUM_PARTIAL`, the pseudo-header sum in the
//!   TCP checksum field, gso_size 1448. Every engine must produce wire-ready
//!   segments: IPv4 header and TCP checksums filled in.

use crate::bench::gro::{MSS, bursts};
use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

/// Ethernet header length of every frame here (untagged).
pub const ETH_HLEN: usize = 14;

/// UDP payload of every datagram of the UDP GRO rows (a QUIC- or
/// WireGuard-sized datagram).
pub const UDP_PAYLOAD: usize = 1400;

/// Segments per GSO superpacket: 45 x 1448 = 65160 payload bytes, the
/// largest whole number of segments in a 64 KB IPv4 packet.
pub const GSO_SEGMENTS: usize = 45;

/// A GRO workload: frames in arrival order, flushed every `batch` frames.
#[derive(Debug, Clone)]
pub struct GroWorkload {
    /// Row name, e.g. `tcp4_64flows`.
    pub name: String,
    /// Number of interleaved flows.
    pub flows: usize,
    /// Ethernet frames in arrival order.
    pub frames: Vec<Vec<u8>>,
    /// Receive burst: every engine flushes after this many frames.
    pub batch: usize,
    /// UDP datagrams (else TCP segments).
    pub udp: bool,
}

impl GroWorkload {
    /// `flows` TCP/IPv4 flows interleaved packet by packet, `total` frames.
    pub fn tcp4(flows: usize, total: usize, batch: usize) -> GroWorkload {
        let pattern = bursts(flows, 1, total, batch);
        let name = if flows == 1 { "tcp4_1flow".to_string() } else { format!("tcp4_{flows}flows") };
        GroWorkload { name, flows, frames: pattern.frames, batch, udp: false }
    }

    /// `flows` UDP/IPv4 flows of [`UDP_PAYLOAD`]-byte datagrams interleaved
    /// packet by packet, `total` frames.
    pub fn udp4(flows: usize, total: usize, batch: usize) -> GroWorkload {
        let mut fl: Vec<Flow> = (0..flows).map(|i| Flow::new(FlowSpec::new(Transport::Udp, false, i as u32))).collect();
        let frames =
            (0..total).map(|i| fl[i % flows].frame(UDP_PAYLOAD, TcpFlags::empty()).expect("a datagram fits")).collect();
        let name = if flows == 1 { "udp4_1flow".to_string() } else { format!("udp4_{flows}flows") };
        GroWorkload { name, flows, frames, batch, udp: true }
    }

    /// IP bytes of all frames (what every engine receives, without the Ethernet header).
    pub fn ip_bytes(&self) -> u64 {
        self.frames.iter().map(|f| (f.len() - ETH_HLEN) as u64).sum()
    }
}

/// A GSO workload: identical superpackets, each cut into `mss`-byte segments.
#[derive(Debug, Clone)]
pub struct GsoWorkload {
    /// Row name, e.g. `tcp4_64k`.
    pub name: String,
    /// The superpackets (Ethernet frames with `CHECKSUM_PARTIAL` metadata).
    pub superpackets: Vec<Packet>,
    /// TCP payload bytes per segment.
    pub mss: usize,
}

impl GsoWorkload {
    /// `count` consecutive 64 KB superpackets of one TCP/IPv4 flow.
    pub fn tcp4_64k(count: usize) -> GsoWorkload {
        let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 1));
        let superpackets = (0..count)
            .map(|_| {
                flow.superpacket(GSO_SEGMENTS * MSS, MSS as u16, TcpFlags::PSH).expect("64 KB fits an IPv4 packet")
            })
            .collect();
        GsoWorkload { name: "tcp4_64k".to_string(), superpackets, mss: MSS }
    }

    /// The superpackets as plain Ethernet frames.
    pub fn frames(&self) -> Vec<Vec<u8>> {
        self.superpackets.iter().map(Packet::to_vec).collect()
    }

    /// TCP payload bytes of all superpackets (the figure Gbps is counted in).
    pub fn payload_bytes(&self) -> u64 {
        (self.superpackets.len() * GSO_SEGMENTS * self.mss) as u64
    }

    /// Segments every engine must produce.
    pub fn expected_segments(&self) -> u64 {
        (self.superpackets.len() * GSO_SEGMENTS) as u64
    }
}
