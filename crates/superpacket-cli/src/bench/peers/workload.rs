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
//! - VXLAN GRO and GSO: the same TCP/IPv4 frames and superpackets inside
//!   VXLAN (UDP port 4789) over IPv4, outer UDP checksum 0 (as a Linux
//!   VXLAN device sends over IPv4), outer IPv4 ID incrementing per frame,
//!   outer DF clear; one VXLAN source port per inner flow. GSO segments of
//!   1448 inner payload bytes: 1500-byte inner and 1550-byte outer IPv4
//!   packets, every outer and inner checksum filled in.

use crate::bench::gro::{MSS, bursts};
use superpacket::packet::{Packet, TunnelKind};
use superpacket::traffic::{Flow, FlowSpec, Transport, TunnelFlow, TunnelSpec, encapsulate};
use superpacket::wire::TcpFlags;

/// Ethernet header length of every frame here (untagged).
pub const ETH_HLEN: usize = 14;

/// UDP payload of every datagram of the UDP GRO rows (a QUIC- or
/// WireGuard-sized datagram).
pub const UDP_PAYLOAD: usize = 1400;

/// Outer headers of a VXLAN-over-IPv4 frame: Ethernet, IPv4, UDP, VXLAN.
pub const VXLAN4_OVERHEAD: usize = 14 + 20 + 8 + 8;

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
    /// TCP/IPv4 inside VXLAN over IPv4.
    pub vxlan: bool,
}

impl GroWorkload {
    /// `flows` TCP/IPv4 flows interleaved packet by packet, `total` frames.
    pub fn tcp4(flows: usize, total: usize, batch: usize) -> GroWorkload {
        let pattern = bursts(flows, 1, total, batch);
        let name = if flows == 1 { "tcp4_1flow".to_string() } else { format!("tcp4_{flows}flows") };
        GroWorkload { name, flows, frames: pattern.frames, batch, udp: false, vxlan: false }
    }

    /// `flows` UDP/IPv4 flows of [`UDP_PAYLOAD`]-byte datagrams interleaved
    /// packet by packet, `total` frames.
    pub fn udp4(flows: usize, total: usize, batch: usize) -> GroWorkload {
        let mut fl: Vec<Flow> = (0..flows).map(|i| Flow::new(FlowSpec::new(Transport::Udp, false, i as u32))).collect();
        let frames =
            (0..total).map(|i| fl[i % flows].frame(UDP_PAYLOAD, TcpFlags::empty()).expect("a datagram fits")).collect();
        let name = if flows == 1 { "udp4_1flow".to_string() } else { format!("udp4_{flows}flows") };
        GroWorkload { name, flows, frames, batch, udp: true, vxlan: false }
    }

    /// `flows` TCP/IPv4 flows in VXLAN over IPv4 (one outer source port
    /// per flow, outer UDP checksum 0) interleaved packet by packet,
    /// `total` frames of [`MSS`]-byte segments.
    pub fn vxlan_tcp4(flows: usize, total: usize, batch: usize) -> GroWorkload {
        let mut fl: Vec<TunnelFlow> = (0..flows)
            .map(|i| {
                let mut t =
                    TunnelFlow::new(TunnelKind::Vxlan, false, FlowSpec::new(Transport::Tcp, false, i as u32), i as u32);
                t.udp_csum = false;
                t
            })
            .collect();
        let frames = (0..total).map(|i| fl[i % flows].frame(MSS, TcpFlags::empty()).expect("a segment fits")).collect();
        let name = if flows == 1 { "vxlan_tcp4_1flow".to_string() } else { format!("vxlan_tcp4_{flows}flows") };
        GroWorkload { name, flows, frames, batch, udp: false, vxlan: true }
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
    /// The (outer) IP MTU of the segments: 1500, or 1550 for VXLAN (a
    /// 1500-byte inner packet plus the tunnel headers).
    pub mtu: usize,
    /// TCP/IPv4 inside VXLAN over IPv4.
    pub vxlan: bool,
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
        GsoWorkload { name: "tcp4_64k".to_string(), superpackets, mss: MSS, mtu: 1500, vxlan: false }
    }

    /// `count` consecutive 64 KB superpackets of one TCP/IPv4 flow, each in
    /// VXLAN over IPv4 (`UDP_TUNNEL`: outer UDP checksum 0), as a Linux
    /// VXLAN device hands them to its lower device.
    pub fn vxlan_tcp4_64k(count: usize) -> GsoWorkload {
        let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 1));
        let mut tunnel = TunnelSpec::new(TunnelKind::Vxlan, false);
        let superpackets = (0..count)
            .map(|_| {
                let inner =
                    flow.superpacket(GSO_SEGMENTS * MSS, MSS as u16, TcpFlags::PSH).expect("64 KB fits an IPv4 packet");
                let sp = encapsulate(&inner, &tunnel).expect("64 KB plus 50 bytes fits an IPv4 packet");
                tunnel.ip_id = tunnel.ip_id.wrapping_add(GSO_SEGMENTS as u16);
                sp
            })
            .collect();
        GsoWorkload {
            name: "vxlan_tcp4_64k".to_string(),
            superpackets,
            mss: MSS,
            mtu: 1500 + VXLAN4_OVERHEAD,
            vxlan: true,
        }
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
