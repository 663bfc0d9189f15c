//! GRO counters: what came in, what went out, and why every aggregate ended
//! and every bypassing packet was not coalesced.

/// Why a held aggregate was flushed (completed and delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlushReason {
    /// PSH or FIN merged (closes the aggregate), or the new segment's flag
    /// bits differ (SYN/RST/URG/ECE/CWR...) (offload-rules 1.3 (a) and the outcome matrix).
    Flags,
    /// A shorter segment merged and closed the aggregate, or a longer or
    /// zero-length segment could not join it (offload-rules 1.3 (e), 2.3).
    SegmentSize,
    /// The 64 KB L3 limit (`gro_max_size`) or the segment count limit (64 for
    /// UDP and fraglist) was reached (offload-rules 1.1, 1.5, 2.3).
    SizeLimit,
    /// A header field differs: ACK, window, TCP options, TTL/hop limit,
    /// TOS/traffic class, DF, IPv4 ID, mode, or the new packet carries a flush
    /// mark (offload-rules 1.2, 1.3 (b)-(d)).
    Mismatch,
    /// The new segment's sequence number is not the next expected one
    /// (offload-rules 1.3 (f)).
    OutOfOrder,
    /// Held longer than the configured flush age.
    Age,
    /// The bucket was full and this was its oldest aggregate (offload-rules 1.1).
    TableFull,
    /// End of a receive batch (end of a NAPI poll).
    BatchEnd,
    /// LRO: the sorted batch moved on to another RSS hash (offload-rules 8.2).
    GroupEnd,
}

/// Why a packet was delivered without being held or merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BypassReason {
    /// Not IPv4/IPv6 (ARP, other EtherTypes).
    NotIp,
    /// IP but neither TCP nor UDP.
    NotTcpUdp,
    /// Headers do not parse, are not in the linear area, or the frame is
    /// shorter than the IP length says.
    Malformed,
    /// More VLAN tags than supported (2), or VLAN GRO disabled.
    Vlan,
    /// IPv4 header with options (offload-rules 1.2).
    IpOptions,
    /// IPv4 fragment or IPv6 Fragment header (offload-rules 1.2).
    Fragment,
    /// Bad IPv4 header checksum (offload-rules 1.2).
    BadIpChecksum,
    /// IPv6 extension header GRO cannot skip (offload-rules 1.2).
    Ipv6Ext,
    /// Ethernet padding after the IP packet in strict-Linux mode (offload-rules 1.2, 9.1.1).
    Padding,
    /// TCP segment with URG/PSH/RST/SYN/FIN and no aggregate to join.
    TcpFlags,
    /// Zero-length TCP segment (pure ACK) or UDP datagram without payload.
    ZeroPayload,
    /// UDP with UDP GRO off (offload-rules 2.2).
    UdpOff,
    /// UDP with a zero checksum (offload-rules 2.3).
    UdpZeroChecksum,
    /// UDP length field disagrees with the IP length (offload-rules 2.3).
    UdpLength,
    /// A GSO packet GRO cannot take (UDP, DODGY, unknown type) (offload-rules 1.1).
    Gso,
    /// Fraglist/segment mode or checksum state differs from the aggregate
    /// (offload-rules 1.6, 2.3).
    Mode,
    /// Bad TCP/UDP checksum: delivered unmerged and untouched (offload-rules 1.3).
    BadChecksum,
    /// A datagram to a tunnel port GRO does not look into: Geneve with a
    /// version other than 0, the O bit or a non-Ethernet payload, an inner
    /// frame with VLAN tags or without TCP/UDP over IP, a tunnel inside the
    /// tunnel (offload-rules 2.6).
    Tunnel,
}

/// Aggregates flushed, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FlushCounters {
    /// See [`FlushReason::Flags`].
    pub flags: u64,
    /// See [`FlushReason::SegmentSize`].
    pub segment_size: u64,
    /// See [`FlushReason::SizeLimit`].
    pub size_limit: u64,
    /// See [`FlushReason::Mismatch`].
    pub mismatch: u64,
    /// See [`FlushReason::OutOfOrder`].
    pub out_of_order: u64,
    /// See [`FlushReason::Age`].
    pub age: u64,
    /// See [`FlushReason::TableFull`].
    pub table_full: u64,
    /// See [`FlushReason::BatchEnd`].
    pub batch_end: u64,
    /// See [`FlushReason::GroupEnd`].
    pub group_end: u64,
}

impl FlushCounters {
    /// Total aggregates flushed.
    pub fn total(&self) -> u64 {
        self.flags
            + self.segment_size
            + self.size_limit
            + self.mismatch
            + self.out_of_order
            + self.age
            + self.table_full
            + self.batch_end
            + self.group_end
    }
}

/// Packets delivered without coalescing, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BypassCounters {
    /// See [`BypassReason::NotIp`].
    pub not_ip: u64,
    /// See [`BypassReason::NotTcpUdp`].
    pub not_tcp_udp: u64,
    /// See [`BypassReason::Malformed`].
    pub malformed: u64,
    /// See [`BypassReason::Vlan`].
    pub vlan: u64,
    /// See [`BypassReason::IpOptions`].
    pub ip_options: u64,
    /// See [`BypassReason::Fragment`].
    pub fragment: u64,
    /// See [`BypassReason::BadIpChecksum`].
    pub bad_ip_checksum: u64,
    /// See [`BypassReason::Ipv6Ext`].
    pub ipv6_ext: u64,
    /// See [`BypassReason::Padding`].
    pub padding: u64,
    /// See [`BypassReason::TcpFlags`].
    pub tcp_flags: u64,
    /// See [`BypassReason::ZeroPayload`].
    pub zero_payload: u64,
    /// See [`BypassReason::UdpOff`].
    pub udp_off: u64,
    /// See [`BypassReason::UdpZeroChecksum`].
    pub udp_zero_checksum: u64,
    /// See [`BypassReason::UdpLength`].
    pub udp_length: u64,
    /// See [`BypassReason::Gso`].
    pub gso: u64,
    /// See [`BypassReason::Mode`].
    pub mode: u64,
    /// See [`BypassReason::BadChecksum`].
    pub bad_checksum: u64,
    /// See [`BypassReason::Tunnel`].
    pub tunnel: u64,
}

impl BypassCounters {
    /// Total packets bypassed.
    pub fn total(&self) -> u64 {
        self.not_ip
            + self.not_tcp_udp
            + self.malformed
            + self.vlan
            + self.ip_options
            + self.fragment
            + self.bad_ip_checksum
            + self.ipv6_ext
            + self.padding
            + self.tcp_flags
            + self.zero_payload
            + self.udp_off
            + self.udp_zero_checksum
            + self.udp_length
            + self.gso
            + self.mode
            + self.bad_checksum
            + self.tunnel
    }
}

/// All GRO counters. A plain struct of `u64`s; serialises to JSON as is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GroCounters {
    /// Packets given to the engine.
    pub packets_in: u64,
    /// Packets delivered (superpackets, single packets and bypassing packets).
    pub packets_out: u64,
    /// Delivered packets that are merged aggregates (2 or more segments).
    pub superpackets: u64,
    /// Wire segments inside the delivered superpackets.
    pub superpacket_segments: u64,
    /// Packets merged into an existing aggregate.
    pub merged: u64,
    /// Aggregates started (packets held as the first segment).
    pub held: u64,
    /// TCP/UDP checksums found bad (those packets are also counted in
    /// `bypassed.bad_checksum`).
    pub bad_checksums: u64,
    /// Checksums verified in software.
    pub checksums_verified: u64,
    /// Aggregates flushed, by reason.
    pub flushed: FlushCounters,
    /// Packets delivered without coalescing, by reason.
    pub bypassed: BypassCounters,
    /// LRO batches sorted.
    pub lro_batches: u64,
}

impl GroCounters {
    /// Counts one flush.
    #[inline]
    pub fn flush(&mut self, reason: FlushReason) {
        let f = &mut self.flushed;
        *match reason {
            FlushReason::Flags => &mut f.flags,
            FlushReason::SegmentSize => &mut f.segment_size,
            FlushReason::SizeLimit => &mut f.size_limit,
            FlushReason::Mismatch => &mut f.mismatch,
            FlushReason::OutOfOrder => &mut f.out_of_order,
            FlushReason::Age => &mut f.age,
            FlushReason::TableFull => &mut f.table_full,
            FlushReason::BatchEnd => &mut f.batch_end,
            FlushReason::GroupEnd => &mut f.group_end,
        } += 1;
    }

    /// Counts one bypass.
    #[inline]
    pub fn bypass(&mut self, reason: BypassReason) {
        let b = &mut self.bypassed;
        *match reason {
            BypassReason::NotIp => &mut b.not_ip,
            BypassReason::NotTcpUdp => &mut b.not_tcp_udp,
            BypassReason::Malformed => &mut b.malformed,
            BypassReason::Vlan => &mut b.vlan,
            BypassReason::IpOptions => &mut b.ip_options,
            BypassReason::Fragment => &mut b.fragment,
            BypassReason::BadIpChecksum => &mut b.bad_ip_checksum,
            BypassReason::Ipv6Ext => &mut b.ipv6_ext,
            BypassReason::Padding => &mut b.padding,
            BypassReason::TcpFlags => &mut b.tcp_flags,
            BypassReason::ZeroPayload => &mut b.zero_payload,
            BypassReason::UdpOff => &mut b.udp_off,
            BypassReason::UdpZeroChecksum => &mut b.udp_zero_checksum,
            BypassReason::UdpLength => &mut b.udp_length,
            BypassReason::Gso => &mut b.gso,
            BypassReason::Mode => &mut b.mode,
            BypassReason::BadChecksum => &mut b.bad_checksum,
            BypassReason::Tunnel => &mut b.tunnel,
        } += 1;
    }

    /// Wire segments per delivered packet: `packets_in / packets_out` (the
    /// aggregation figure); 0 when nothing was delivered.
    pub fn aggregation(&self) -> f64 {
        if self.packets_out == 0 { 0.0 } else { self.packets_in as f64 / self.packets_out as f64 }
    }

    /// Average segments per superpacket (0 when there is none).
    pub fn segments_per_superpacket(&self) -> f64 {
        if self.superpackets == 0 { 0.0 } else { self.superpacket_segments as f64 / self.superpackets as f64 }
    }
}
