//! Synthetic traffic: deterministic Ethernet frames and superpackets for the
//! demo, the tests and the benchmarks.
//!
//! A [`Flow`] keeps the state of one TCP or UDP conversation (sequence
//! number, IPv4 ID, timestamps) and builds frames with fully valid checksums
//! ([`Flow::frame`]) or superpackets shaped exactly as a TAP with TSO/USO
//! hands them to userspace ([`Flow::superpacket`], docs/kernel-oracle.md section 4):
//! first segment's headers, IP length covering the whole payload, the L4
//! checksum field holding the pseudo-header sum, and `CHECKSUM_PARTIAL` plus
//! GSO metadata.
//!
//! Payload bytes are a pure function of the flow's stream offset
//! ([`payload_byte`]), so tests can check byte conservation across GRO/GSO.

use crate::packet::{ChecksumState, GsoProtocol, OffloadMeta, Packet};
use crate::wire::ethernet::{EtherType, EthernetFrame, EthernetRepr, MacAddr, VlanStack, VlanTag};
use crate::wire::ip::IpProtocol;
use crate::wire::ipv4::{Ipv4Options, Ipv4Packet, Ipv4Repr};
use crate::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::wire::tcp::{TcpFlags, TcpOptionsRepr, TcpPacket, TcpRepr};
use crate::wire::udp::{UdpPacket, UdpRepr};
use crate::wire::{Result, WireError};
use std::net::{Ipv4Addr, Ipv6Addr};

mod tunnel;
pub use tunnel::TunnelFlow;

/// Network addresses of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addrs {
    /// IPv4 source and destination.
    V4 {
        /// Source.
        src: Ipv4Addr,
        /// Destination.
        dst: Ipv4Addr,
    },
    /// IPv6 source and destination.
    V6 {
        /// Source.
        src: Ipv6Addr,
        /// Destination.
        dst: Ipv6Addr,
    },
}

/// Transport protocol of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP (with the timestamp option when [`FlowSpec::tcp_timestamps`]).
    Tcp,
    /// UDP.
    Udp,
}

/// Everything constant about a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSpec {
    /// Source MAC.
    pub src_mac: MacAddr,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// VLAN tags, outermost first.
    pub vlans: VlanStack,
    /// Addresses.
    pub addrs: Addrs,
    /// TCP or UDP.
    pub transport: Transport,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// IPv4 TOS / IPv6 traffic class.
    pub tos: u8,
    /// IPv4 DF bit.
    pub dont_frag: bool,
    /// Add the TCP timestamp option (NOP NOP TS, 12 bytes) like Linux does.
    pub tcp_timestamps: bool,
}

impl FlowSpec {
    /// Flow number `index` of a family of distinct flows between two hosts:
    /// the source port is `10000 + index` (mod 50000).
    pub fn new(transport: Transport, ipv6: bool, index: u32) -> FlowSpec {
        let addrs = if ipv6 {
            Addrs::V6 {
                src: Ipv6Addr::new(0xfd00, 0x5e, 0, 0, 0, 0, 0, 1),
                dst: Ipv6Addr::new(0xfd00, 0x5e, 0, 0, 0, 0, 0, 2),
            }
        } else {
            Addrs::V4 { src: Ipv4Addr::new(10, 94, 0, 1), dst: Ipv4Addr::new(10, 94, 0, 2) }
        };
        FlowSpec {
            src_mac: MacAddr([0x02, 0x5e, 0, 0, 0, 1]),
            dst_mac: MacAddr([0x02, 0x5e, 0, 0, 0, 2]),
            vlans: VlanStack::new(),
            addrs,
            transport,
            src_port: 10000 + (index % 50000) as u16,
            dst_port: if transport == Transport::Tcp { 5201 } else { 4789 },
            ttl: 64,
            tos: 0,
            dont_frag: true,
            tcp_timestamps: transport == Transport::Tcp,
        }
    }

    /// The same flow carried inside the given VLAN tags, outermost first:
    /// `(tpid, vid)` pairs such as `(0x88A8, 100), (0x8100, 200)` for QinQ.
    ///
    /// # Errors
    /// If more tags are given than a [`VlanStack`] holds.
    pub fn with_vlans(mut self, tags: &[(u16, u16)]) -> Result<FlowSpec> {
        let mut stack = VlanStack::new();
        for &(tpid, vid) in tags {
            stack.push(VlanTag::from_tci(EtherType(tpid), vid & 0x0FFF))?;
        }
        self.vlans = stack;
        Ok(self)
    }

    /// Bytes of L2 + L3 + L4 headers of every frame of this flow.
    pub fn header_len(&self) -> usize {
        self.l2_len() + self.l3_len() + self.l4_header_len()
    }

    fn l2_len(&self) -> usize {
        14 + 4 * self.vlans.len()
    }
    fn l3_len(&self) -> usize {
        match self.addrs {
            Addrs::V4 { .. } => 20,
            Addrs::V6 { .. } => 40,
        }
    }
    fn l4_header_len(&self) -> usize {
        match self.transport {
            Transport::Tcp if self.tcp_timestamps => 32,
            Transport::Tcp => 20,
            Transport::Udp => 8,
        }
    }
}

/// The byte at `offset` of a flow's payload stream.
#[inline]
pub fn payload_byte(offset: u64) -> u8 {
    (offset.wrapping_mul(31) ^ (offset >> 8)) as u8
}

/// Fills `buf` with the payload stream bytes starting at `offset`.
pub fn fill_payload(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = payload_byte(offset + i as u64);
    }
}

/// A flow's changing state.
#[derive(Debug, Clone)]
pub struct Flow {
    /// The constant part.
    pub spec: FlowSpec,
    /// Next TCP sequence number.
    pub seq: u32,
    /// TCP acknowledgment number (constant: a one-way transfer).
    pub ack: u32,
    /// Next IPv4 identification.
    pub ip_id: u16,
    /// TCP timestamp value (constant within a burst, as at high rates).
    pub ts_val: u32,
    /// Payload bytes sent so far: the stream offset of the next payload byte.
    pub stream_offset: u64,
}

impl Flow {
    /// A flow at its initial state.
    pub fn new(spec: FlowSpec) -> Flow {
        let seed = spec.src_port as u32;
        Flow {
            spec,
            seq: 0x1000_0000u32.wrapping_add(seed.wrapping_mul(7919)),
            ack: 0x2000_0000,
            ip_id: (seed as u16).wrapping_mul(13),
            ts_val: 1_000_000,
            stream_offset: 0,
        }
    }

    /// One frame with `payload_len` payload bytes, TCP `flags` (ignored for
    /// UDP) and fully valid checksums. Advances the sequence number, IPv4 ID
    /// and stream offset.
    ///
    /// # Errors
    /// If the payload does not fit in one IP packet.
    pub fn frame(&mut self, payload_len: usize, flags: TcpFlags) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.frame_into(payload_len, flags, &mut out)?;
        Ok(out)
    }

    /// As [`Flow::frame`], writing into `out` (reused: no allocation once it
    /// has grown).
    ///
    /// # Errors
    /// If the payload does not fit in one IP packet.
    pub fn frame_into(&mut self, payload_len: usize, flags: TcpFlags, out: &mut Vec<u8>) -> Result<()> {
        let l4_offset = self.write_headers(payload_len, flags, out)?;
        let payload_at = self.spec.header_len();
        fill_payload(&mut out[payload_at..], self.stream_offset);
        let pseudo = self.pseudo_sum(out, l4_offset);
        match self.spec.transport {
            Transport::Tcp => TcpPacket::new_unchecked(&mut out[l4_offset..]).fill_checksum(pseudo),
            Transport::Udp => {
                UdpPacket::new_unchecked(&mut out[l4_offset..]).fill_checksum(pseudo);
            }
        }
        self.advance(payload_len, 1);
        Ok(())
    }

    /// A superpacket of `payload_len` bytes to be cut into `gso_size`-byte
    /// segments, as a TAP with TSO/USO delivers it: `CHECKSUM_PARTIAL` with
    /// the pseudo-header sum in the L4 checksum field, gso type/size/segs set.
    /// Advances the flow as if every segment had been sent.
    ///
    /// # Errors
    /// If the payload does not fit in one IP packet, or `gso_size` is 0.
    pub fn superpacket(&mut self, payload_len: usize, gso_size: u16, flags: TcpFlags) -> Result<Packet> {
        if gso_size == 0 {
            return Err(WireError::Malformed { layer: "gen", reason: "gso_size 0" });
        }
        let mut frame = Vec::new();
        let l4_offset = self.write_headers(payload_len, flags, &mut frame)?;
        let payload_at = self.spec.header_len();
        fill_payload(&mut frame[payload_at..], self.stream_offset);
        let pseudo = self.pseudo_sum(&frame, l4_offset);
        let protocol = match (self.spec.transport, self.spec.addrs) {
            (Transport::Tcp, Addrs::V4 { .. }) => GsoProtocol::TcpV4,
            (Transport::Tcp, Addrs::V6 { .. }) => GsoProtocol::TcpV6,
            (Transport::Udp, _) => GsoProtocol::UdpL4,
        };
        let field = l4_offset + protocol.csum_offset() as usize;
        frame[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
        let segs = payload_len.div_ceil(gso_size as usize);
        let mut packet = Packet::from_frame(&frame);
        packet.meta = OffloadMeta {
            csum: ChecksumState::Partial { start: l4_offset as u16, offset: protocol.csum_offset() },
            ..OffloadMeta::default()
        };
        if payload_len > gso_size as usize {
            packet.meta.gso_type = protocol.gso_type();
            packet.meta.gso_size = gso_size;
            packet.meta.gso_segs = segs as u16;
        }
        self.advance(payload_len, segs as u16);
        Ok(packet)
    }

    fn advance(&mut self, payload_len: usize, segments: u16) {
        self.seq = self.seq.wrapping_add(payload_len as u32);
        self.ip_id = self.ip_id.wrapping_add(segments.max(1));
        self.stream_offset += payload_len as u64;
    }

    /// Writes all headers into `out` (resized to the full frame) and returns
    /// the L4 offset. Checksum fields are left zero.
    fn write_headers(&self, payload_len: usize, flags: TcpFlags, out: &mut Vec<u8>) -> Result<usize> {
        let spec = &self.spec;
        let l4_len = spec.l4_header_len() + payload_len;
        out.clear();
        out.resize(spec.header_len() + payload_len, 0);
        let ethertype = match spec.addrs {
            Addrs::V4 { .. } => EtherType::IPV4,
            Addrs::V6 { .. } => EtherType::IPV6,
        };
        let eth = EthernetRepr { dst_addr: spec.dst_mac, src_addr: spec.src_mac, vlans: spec.vlans, ethertype };
        eth.emit(&mut EthernetFrame::new_unchecked(&mut out[..]))?;
        let l3 = spec.l2_len();
        let protocol = match spec.transport {
            Transport::Tcp => IpProtocol::TCP,
            Transport::Udp => IpProtocol::UDP,
        };
        match spec.addrs {
            Addrs::V4 { src, dst } => Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                protocol,
                payload_len: l4_len,
                ttl: spec.ttl,
                tos: spec.tos,
                ident: self.ip_id,
                dont_frag: spec.dont_frag,
                more_frags: false,
                frag_offset: 0,
                options: Ipv4Options::default(),
            }
            .emit(&mut Ipv4Packet::new_unchecked(&mut out[l3..]))?,
            Addrs::V6 { src, dst } => Ipv6Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: protocol,
                payload_len: l4_len,
                hop_limit: spec.ttl,
                traffic_class: spec.tos,
                flow_label: 0x12345,
            }
            .emit(&mut Ipv6Packet::new_unchecked(&mut out[l3..]))?,
        }
        let l4 = l3 + spec.l3_len();
        match spec.transport {
            Transport::Tcp => {
                let options = TcpOptionsRepr {
                    timestamp: spec.tcp_timestamps.then_some((self.ts_val, 7_000_000)),
                    ..TcpOptionsRepr::default()
                };
                TcpRepr {
                    src_port: spec.src_port,
                    dst_port: spec.dst_port,
                    seq_number: self.seq,
                    ack_number: self.ack,
                    flags: flags | TcpFlags::ACK,
                    window: 502,
                    urgent_ptr: 0,
                    options,
                }
                .emit(&mut TcpPacket::new_unchecked(&mut out[l4..]))?
            }
            Transport::Udp => UdpRepr { src_port: spec.src_port, dst_port: spec.dst_port, payload_len }
                .emit(&mut UdpPacket::new_unchecked(&mut out[l4..]))?,
        }
        Ok(l4)
    }

    fn pseudo_sum(&self, frame: &[u8], l4_offset: usize) -> u16 {
        let l4_len = frame.len() - l4_offset;
        let protocol = match self.spec.transport {
            Transport::Tcp => 6,
            Transport::Udp => 17,
        };
        match self.spec.addrs {
            Addrs::V4 { src, dst } => {
                crate::csum::pseudo_header_v4(src.octets(), dst.octets(), protocol, l4_len as u16)
            }
            Addrs::V6 { src, dst } => {
                crate::csum::pseudo_header_v6(src.octets(), dst.octets(), protocol, l4_len as u32)
            }
        }
    }
}

/// The raw IP packet an untagged IPv4 or IPv6 Ethernet frame carries (what
/// a TUN would hand over for it): the frame without its 14-byte header.
/// `None` for a VLAN-tagged or non-IP frame, or one with nothing after the
/// header. For deriving raw-IP test cases from Ethernet ones.
pub fn raw_ip_packet(frame: &[u8]) -> Option<&[u8]> {
    match frame.get(12..) {
        Some([0x08, 0x00, _, ..] | [0x86, 0xDD, _, ..]) => Some(&frame[14..]),
        _ => None,
    }
}

/// Inserts an 8-byte Destination Options header (PadN) after the IPv6 header
/// at `l3` of a frame or superpacket (`l3` = 0 for a raw IP packet), keeping
/// its metadata valid: the payload length grows by 8 and a partial checksum's
/// start moves with the transport header. Panics if the packet has no IPv6
/// header at `l3` (test support, like the rest of this module's builders).
pub fn insert_ipv6_dstopts(pkt: &Packet, l3: usize) -> Packet {
    let f = pkt.to_vec();
    let mut out = f[..l3 + 40].to_vec();
    let nh = out[l3 + 6];
    out[l3 + 6] = 60;
    let pl = u16::from_be_bytes([out[l3 + 4], out[l3 + 5]]) + 8;
    out[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
    out.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]);
    out.extend_from_slice(&f[l3 + 40..]);
    let mut p = Packet::from_frame(&out);
    p.meta = pkt.meta;
    if let ChecksumState::Partial { start, offset } = p.meta.csum {
        p.meta.csum = ChecksumState::Partial { start: start + 8, offset };
    }
    p
}

/// The outer headers of a UDP tunnel (offload-rules 3.7): what
/// [`encapsulate`] puts in front of an inner frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelSpec {
    /// VXLAN or Geneve.
    pub kind: crate::packet::TunnelKind,
    /// The outer Ethernet, IP and UDP headers (its transport must be UDP;
    /// `dst_port` is the tunnel port, `src_port` the entropy port).
    pub outer: FlowSpec,
    /// The VNI.
    pub vni: u32,
    /// Geneve option bytes (a multiple of 4, at most 252; 0 for VXLAN).
    pub geneve_options: usize,
    /// Outer UDP checksum: `UDP_TUNNEL_CSUM` for a superpacket, a computed
    /// checksum for a single frame; else 0 (`UDP_TUNNEL`).
    pub udp_csum: bool,
    /// Outer IPv4 identification.
    pub ip_id: u16,
}

impl TunnelSpec {
    /// A VXLAN (port 4789) or Geneve (6081) tunnel between two hosts of
    /// the given outer family, without outer checksum; outer DF clear, as a
    /// Linux VXLAN device sends by default.
    pub fn new(kind: crate::packet::TunnelKind, outer_v6: bool) -> TunnelSpec {
        let mut outer = FlowSpec::new(Transport::Udp, outer_v6, 0);
        outer.addrs = if outer_v6 {
            Addrs::V6 {
                src: Ipv6Addr::new(0xfd00, 0x7e, 0, 0, 0, 0, 0, 1),
                dst: Ipv6Addr::new(0xfd00, 0x7e, 0, 0, 0, 0, 0, 2),
            }
        } else {
            Addrs::V4 { src: Ipv4Addr::new(10, 126, 0, 1), dst: Ipv4Addr::new(10, 126, 0, 2) }
        };
        outer.src_mac = MacAddr([0x02, 0x7e, 0, 0, 0, 1]);
        outer.dst_mac = MacAddr([0x02, 0x7e, 0, 0, 0, 2]);
        outer.src_port = 0xaaa1;
        outer.dst_port = match kind {
            crate::packet::TunnelKind::Vxlan => crate::wire::vxlan::VXLAN_PORT,
            crate::packet::TunnelKind::Geneve => crate::wire::geneve::GENEVE_PORT,
        };
        outer.dont_frag = false;
        TunnelSpec { kind, outer, vni: 42, geneve_options: 0, udp_csum: false, ip_id: 0x1234 }
    }

    /// Bytes of the tunnel header (VXLAN 8, Geneve 8 + options).
    pub fn tunnel_header_len(&self) -> usize {
        match self.kind {
            crate::packet::TunnelKind::Vxlan => 8,
            crate::packet::TunnelKind::Geneve => 8 + self.geneve_options,
        }
    }
}

/// Puts the outer headers of `tunnel` in front of the Ethernet frame
/// `inner` (test and oracle support), as a Linux VXLAN/Geneve device does
/// on transmit:
/// - a superpacket (or a packet with a partial checksum) keeps its metadata
///   with every offset moved and `encap` set; a superpacket gets
///   `UDP_TUNNEL_CSUM` (outer UDP checksum field seeded with the
///   pseudo-header sum of the whole, as `udp_set_csum` does for GSO) or
///   `UDP_TUNNEL` (field 0);
/// - a finished frame (no partial checksum) gets a complete outer UDP
///   checksum (0 mangled to 0xFFFF) or 0.
///
/// # Errors
/// If the result does not fit in one outer IP packet.
pub fn encapsulate(inner: &Packet, tunnel: &TunnelSpec) -> Result<Packet> {
    use crate::packet::{Encapsulation, GsoType, TunnelKind};
    let inner_bytes = inner.to_vec();
    let tl = tunnel.tunnel_header_len();
    let mut flow = Flow::new(tunnel.outer);
    flow.ip_id = tunnel.ip_id;
    let mut out = Vec::new();
    let udp = flow.write_headers(tl + inner_bytes.len(), TcpFlags::empty(), &mut out)?;
    let th = udp + 8;
    match tunnel.kind {
        TunnelKind::Vxlan => {
            crate::wire::vxlan::VxlanRepr { vni: tunnel.vni }.emit(&mut out[th..th + 8])?;
        }
        TunnelKind::Geneve => {
            out[th] = (tunnel.geneve_options / 4) as u8;
            out[th + 2..th + 4].copy_from_slice(&crate::wire::geneve::GENEVE_PROTO_ETHERNET.to_be_bytes());
            out[th + 4..th + 8].copy_from_slice(&(tunnel.vni << 8).to_be_bytes());
            for (i, b) in out[th + 8..th + tl].iter_mut().enumerate() {
                *b = i as u8;
            }
        }
    }
    let inner_mac = th + tl;
    out[inner_mac..].copy_from_slice(&inner_bytes);
    let by = inner_mac as isize;
    let mut meta = inner.meta.shifted(by).ok_or(WireError::Malformed { layer: "gen", reason: "offsets" })?;
    let partial = matches!(inner.meta.csum, ChecksumState::Partial { .. });
    if partial || inner.meta.is_gso() {
        let h = crate::wire::FrameHeaders::parse(&inner_bytes)?;
        meta.encap = Some(Encapsulation {
            tunnel: tunnel.kind,
            outer_transport: udp as u16,
            inner_mac: inner_mac as u16,
            inner_network: (inner_mac + h.l3_offset) as u16,
            inner_transport: (inner_mac + h.l4_offset) as u16,
        });
    }
    if tunnel.udp_csum {
        let field = udp + 6;
        let pseudo = match tunnel.outer.addrs {
            Addrs::V4 { src, dst } => {
                crate::csum::pseudo_header_v4(src.octets(), dst.octets(), 17, (out.len() - udp) as u16)
            }
            Addrs::V6 { src, dst } => {
                crate::csum::pseudo_header_v6(src.octets(), dst.octets(), 17, (out.len() - udp) as u32)
            }
        };
        if inner.meta.is_gso() || partial {
            out[field..field + 2].copy_from_slice(&pseudo.to_be_bytes());
        } else {
            let sum = crate::csum::ones_add(pseudo, crate::csum::ones_sum(&out[udp..]));
            let c = if !sum == 0 { 0xFFFF } else { !sum };
            out[field..field + 2].copy_from_slice(&c.to_be_bytes());
        }
    }
    if inner.meta.is_gso() {
        meta.gso_type |= if tunnel.udp_csum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL };
    }
    let mut p = Packet::from_frame(&out);
    p.meta = meta;
    Ok(p)
}
