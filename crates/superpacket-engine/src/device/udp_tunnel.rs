//! UDP tunnel devices: VXLAN (RFC 7348) and Geneve (RFC 8926), as Linux's
//! `vxlan` and `geneve` devices behave (`docs/topology.md`, "Tunnel
//! devices"; `docs/offload-rules.md`, "Tunnels").
//!
//! **Transmit** (a frame given to the device, typically by a bridge):
//! the destination comes from the device's FDB (inner destination MAC ->
//! remote endpoint, static or learned) or its default `remote`; the frame
//! gets outer Ethernet (addresses filled by the router), IPv4/IPv6, UDP and
//! tunnel headers in its headroom and is handed to the router as a locally
//! generated packet, which routes it out of the underlay. **A superpacket
//! stays one packet**: its GSO type gains `UDP_TUNNEL` (outer UDP checksum
//! zero) or `UDP_TUNNEL_CSUM` and [`superpacket::packet::OffloadMeta::encap`] records the inner
//! headers, so the final port takes it whole or segments it (offload-rules
//! "Tunnels", GSO). The outer IPv4 header has DF clear and IDs reserved per
//! segment (`ip_select_ident_segs`); the UDP source port comes from the
//! inner flow's hash scaled into 32768..61000 (`udp_flow_src_port`).
//!
//! **Receive**: the device owns a UDP socket on the router
//! ([`super::router::UdpSocket`]); the router delivers what arrives for the
//! tunnel port ([`NetDevice::deliver`]). The outer UDP checksum is checked
//! (zero is accepted over IPv4; over IPv6 only with `udp6zerocsumrx`), the
//! tunnel header is checked as Linux's receive path does (wire views), the
//! VNI must be the device's, the inner source MAC is learned (when
//! `learning` is on), and the inner frame is received by the device: a
//! tunnel aggregate from GRO becomes an ordinary inner superpacket.
//!
//! Drops carry stable reasons (`no-remote`, `tunnel-too-big`,
//! `udp-checksum`, `udp6-zero-checksum`, `vni-mismatch`, `tunnel-header`,
//! ...), counted on the device.

use super::DeviceId;
use super::features::{NetdevFeatures, StackMode};
use super::netdev::{Cx, NetDevice, Verdict};
use super::tables::TableUsage;
use std::any::Any;
use std::collections::HashMap;
use std::net::IpAddr;
use superpacket::csum;
use superpacket::packet::{ChecksumState, Encapsulation, GsoType, Packet, TunnelKind};
use superpacket::wire::ethernet::{ETHERNET_HEADER_LEN, walk_tags};
use superpacket::wire::geneve::{GENEVE_HEADER_LEN, GENEVE_PROTO_ETHERNET};
use superpacket::wire::vxlan::VXLAN_HEADER_LEN;
use superpacket::wire::{EtherType, GenevePacket, GeneveRepr, MacAddr, VxlanPacket, VxlanRepr};

/// UDP source ports a tunnel picks from (Linux's default local port range,
/// `[min, max)`).
pub const SOURCE_PORTS: (u16, u16) = (32768, 61000);

/// Most learned FDB entries of a tunnel device (static ones always fit).
pub const DEFAULT_FDB_MAX: usize = 4096;

/// Overhead of the outer headers: Ethernet + IPv4 (20) or IPv6 (40) + UDP +
/// the 8-byte tunnel header (Geneve options not included). It is also what
/// the tunnel's MTU gives up against the underlay's (Linux's
/// `VXLAN_HEADROOM` counts the inner Ethernet header instead of the outer:
/// the same 14 bytes).
pub const fn overhead(v6: bool) -> usize {
    ETHERNET_HEADER_LEN + if v6 { 40 } else { 20 } + 8 + 8
}

/// A tunnel device's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelConfig {
    /// VXLAN or Geneve.
    pub protocol: TunnelKind,
    /// Network identifier (24 bits).
    pub vni: u32,
    /// Local endpoint address (one of the router's).
    pub local: IpAddr,
    /// Default remote endpoint: where frames without an FDB entry go.
    pub remote: Option<IpAddr>,
    /// UDP destination port (and the local socket's port).
    pub port: u16,
    /// Outer UDP checksum on transmit (Linux: `udpcsum` for IPv4, default
    /// off; on for IPv6 unless `udp6zerocsumtx`).
    pub udp_checksum: bool,
    /// Accept a zero outer UDP checksum over IPv6 (`udp6zerocsumrx`).
    pub udp6_zero_checksum_rx: bool,
    /// Learn inner source MACs from received packets.
    pub learning: bool,
    /// Outer TTL / hop limit.
    pub ttl: u8,
    /// Most learned FDB entries.
    pub fdb_max: usize,
}

impl TunnelConfig {
    /// A configuration with Linux's defaults for `protocol`, `vni` and
    /// `local`: the protocol's IANA port, checksum off over IPv4 and on over
    /// IPv6, learning on, TTL 64.
    pub fn new(protocol: TunnelKind, vni: u32, local: IpAddr) -> TunnelConfig {
        TunnelConfig {
            protocol,
            vni,
            local,
            remote: None,
            port: match protocol {
                TunnelKind::Vxlan => superpacket::wire::VXLAN_PORT,
                TunnelKind::Geneve => superpacket::wire::GENEVE_PORT,
            },
            udp_checksum: local.is_ipv6(),
            udp6_zero_checksum_rx: false,
            learning: true,
            ttl: 64,
            fdb_max: DEFAULT_FDB_MAX,
        }
    }

    /// Checks what a topology can get wrong.
    ///
    /// # Errors
    /// A message naming the problem.
    pub fn check(&self) -> Result<(), String> {
        if self.vni >= 1 << 24 {
            return Err(format!("VNI {} does not fit 24 bits", self.vni));
        }
        if let Some(r) = self.remote
            && r.is_ipv4() != self.local.is_ipv4()
        {
            return Err(format!("remote {r} and local {} are of different families", self.local));
        }
        if self.port == 0 {
            return Err("UDP port 0".into());
        }
        if self.ttl == 0 {
            return Err("TTL 0".into());
        }
        Ok(())
    }
}

/// An FDB entry: where frames for a MAC go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FdbEntry {
    remote: IpAddr,
    /// Configured, never replaced by learning.
    is_static: bool,
}

/// A VXLAN or Geneve device. See the module documentation.
#[derive(Debug)]
pub struct UdpTunnel {
    cfg: TunnelConfig,
    /// The router device that routes the underlay.
    router: DeviceId,
    fdb: HashMap<MacAddr, FdbEntry>,
    learned: usize,
    peak_learned: usize,
    /// Learned entries refused because the FDB was full.
    pub learn_refused: u64,
    /// Next outer IPv4 ID.
    next_ip_id: u16,
}

impl UdpTunnel {
    /// A tunnel whose underlay is routed by `router`.
    pub fn new(cfg: TunnelConfig, router: DeviceId) -> UdpTunnel {
        UdpTunnel { cfg, router, fdb: HashMap::new(), learned: 0, peak_learned: 0, learn_refused: 0, next_ip_id: 1 }
    }

    /// The configuration.
    pub fn config(&self) -> &TunnelConfig {
        &self.cfg
    }

    /// Adds a static FDB entry (`bridge fdb append MAC dev vx0 dst REMOTE`).
    ///
    /// # Errors
    /// A remote of the wrong family.
    pub fn add_fdb(&mut self, mac: MacAddr, remote: IpAddr) -> Result<(), String> {
        if remote.is_ipv4() != self.cfg.local.is_ipv4() {
            return Err(format!("FDB remote {remote} is not of the local address's family"));
        }
        if let Some(old) = self.fdb.insert(mac, FdbEntry { remote, is_static: true })
            && !old.is_static
        {
            self.learned -= 1;
        }
        Ok(())
    }

    /// The remote endpoint for inner destination `mac`, if any.
    pub fn remote_for(&self, mac: MacAddr) -> Option<IpAddr> {
        if !mac.is_multicast()
            && let Some(e) = self.fdb.get(&mac)
        {
            return Some(e.remote);
        }
        self.cfg.remote
    }

    fn tunnel_header_len(&self) -> usize {
        match self.cfg.protocol {
            TunnelKind::Vxlan => VXLAN_HEADER_LEN,
            TunnelKind::Geneve => GENEVE_HEADER_LEN,
        }
    }

    fn learn(&mut self, mac: MacAddr, remote: IpAddr) {
        if mac.is_multicast() || mac == MacAddr([0; 6]) {
            return;
        }
        match self.fdb.get_mut(&mac) {
            Some(e) if e.is_static => {}
            Some(e) => e.remote = remote,
            None if self.learned >= self.cfg.fdb_max => self.learn_refused += 1,
            None => {
                self.fdb.insert(mac, FdbEntry { remote, is_static: false });
                self.learned += 1;
                self.peak_learned = self.peak_learned.max(self.learned);
            }
        }
    }

    /// Writes the outer headers in front of `pkt` (see the module
    /// documentation). Returns the outer length.
    fn encapsulate(&mut self, pkt: &mut Packet, len: usize, remote: IpAddr) -> Result<usize, &'static str> {
        let v6 = remote.is_ipv6();
        let ip_len = if v6 { 40 } else { 20 };
        let tun_len = self.tunnel_header_len();
        let outer = ETHERNET_HEADER_LEN + ip_len + 8 + tun_len;
        let udp_len = len + 8 + tun_len;
        if (v6 && udp_len > 65535) || (!v6 && udp_len + 20 > 65535) {
            return Err("tunnel-too-big");
        }
        let sport = source_port(pkt);
        // The inner headers the offloads describe (Linux sets
        // `encapsulation` only for GSO or CHECKSUM_PARTIAL packets).
        let inner = match (pkt.meta.is_gso(), pkt.meta.csum) {
            (_, ChecksumState::Partial { start, .. }) => Some(inner_offsets(pkt.linear(), Some(start))?),
            (true, _) => Some(inner_offsets(pkt.linear(), None)?),
            (false, _) => None,
        };
        let segs = if pkt.meta.is_gso() { pkt.meta.gso_segs.max(1) } else { 1 };
        let ip_id = self.next_ip_id;
        self.next_ip_id = self.next_ip_id.wrapping_add(segs);
        let (local, ttl, port, vni, protocol) =
            (self.cfg.local, self.cfg.ttl, self.cfg.port, self.cfg.vni, self.cfg.protocol);
        let udp_checksum = self.cfg.udp_checksum;
        let hdr = pkt.push(outer).map_err(|_| "tunnel-headroom")?;
        hdr[..12].fill(0);
        let l4 = ETHERNET_HEADER_LEN + ip_len;
        match (local, remote) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                hdr[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
                let ip = &mut hdr[ETHERNET_HEADER_LEN..l4];
                ip[0] = 0x45;
                ip[1] = 0;
                ip[2..4].copy_from_slice(&((udp_len + 20) as u16).to_be_bytes());
                ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
                ip[6..8].fill(0);
                ip[8] = ttl;
                ip[9] = 17;
                ip[10..12].fill(0);
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                let c = csum::checksum(ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                hdr[12..14].copy_from_slice(&EtherType::IPV6.0.to_be_bytes());
                let ip = &mut hdr[ETHERNET_HEADER_LEN..l4];
                ip[..4].copy_from_slice(&[0x60, 0, 0, 0]);
                ip[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
                ip[6] = 17;
                ip[7] = ttl;
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
            }
            _ => return Err("tunnel-family"),
        }
        let udp = &mut hdr[l4..l4 + 8];
        udp[..2].copy_from_slice(&sport.to_be_bytes());
        udp[2..4].copy_from_slice(&port.to_be_bytes());
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        udp[6..8].fill(0);
        let tun = &mut hdr[l4 + 8..outer];
        match protocol {
            TunnelKind::Vxlan => VxlanRepr { vni }.emit(tun).map_err(|_| "tunnel-header")?,
            TunnelKind::Geneve => {
                GeneveRepr { vni, protocol: GENEVE_PROTO_ETHERNET, options_len: 0, oam: false, critical: false }
                    .emit(tun)
                    .map_err(|_| "tunnel-header")?
            }
        }
        if let Some((network, transport)) = inner {
            pkt.meta.encap = Some(Encapsulation {
                tunnel: protocol,
                outer_transport: l4 as u16,
                inner_mac: outer as u16,
                inner_network: (outer + network) as u16,
                inner_transport: (outer + transport) as u16,
            });
        }
        if pkt.meta.is_gso() {
            pkt.meta.gso_type |= if udp_checksum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL };
        }
        if udp_checksum {
            let check = outer_udp_checksum(pkt, l4, udp_len, local, remote);
            pkt.linear_mut()[l4 + 6..l4 + 8].copy_from_slice(&check.to_be_bytes());
        }
        Ok(outer)
    }

    /// Checks and strips the outer headers of a delivered packet; returns
    /// the inner frame's length.
    fn decapsulate(&mut self, pkt: &mut Packet, len: usize) -> Result<usize, &'static str> {
        let b = pkt.linear();
        let ((remote, local), l4, ip_end, v6) = match b.get(12..14) {
            Some([0x08, 0x00]) => {
                let ihl = usize::from(b.get(ETHERNET_HEADER_LEN).ok_or("tunnel-truncated")? & 0x0f) * 4;
                let addrs = b.get(26..34).ok_or("tunnel-truncated")?;
                let total = b.get(16..18).ok_or("tunnel-truncated")?;
                let total = usize::from(u16::from_be_bytes([total[0], total[1]]));
                let at = |i: usize| IpAddr::from([addrs[i], addrs[i + 1], addrs[i + 2], addrs[i + 3]]);
                ((at(0), at(4)), ETHERNET_HEADER_LEN + ihl, ETHERNET_HEADER_LEN + total, false)
            }
            Some([0x86, 0xdd]) => {
                let ip = ipv6_header(b, ETHERNET_HEADER_LEN).ok_or("tunnel-truncated")?;
                let addrs = (IpAddr::from(ip.src_bytes()), IpAddr::from(ip.dst_bytes()));
                let pl = usize::from(ip.payload_len());
                let upper = ip.walk_ext_headers().map_err(|_| "tunnel-truncated")?.upper_offset;
                (addrs, ETHERNET_HEADER_LEN + upper, ETHERNET_HEADER_LEN + 40 + pl, true)
            }
            _ => return Err("tunnel-not-ip"),
        };
        let udp = b.get(l4..l4 + 8).ok_or("udp-truncated")?;
        let ulen = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
        let check = u16::from_be_bytes([udp[6], udp[7]]);
        if ulen < 8 || l4 + ulen > ip_end.min(len) {
            return Err("udp-length");
        }
        let verified = matches!(pkt.meta.csum, ChecksumState::Unnecessary { .. } | ChecksumState::Partial { .. })
            || pkt.meta.encap.is_some();
        if check == 0 {
            if v6 && !self.cfg.udp6_zero_checksum_rx {
                return Err("udp6-zero-checksum");
            }
        } else if !verified && !udp_checksum_ok(pkt, l4, ulen, udp_pseudo(remote, local, ulen)) {
            return Err("udp-checksum");
        }
        let tun = l4 + 8;
        let b = pkt.linear();
        let (vni, tun_len) = match self.cfg.protocol {
            TunnelKind::Vxlan => {
                let v = VxlanPacket::new_checked(b.get(tun..).ok_or("tunnel-truncated")?)
                    .map_err(|_| "tunnel-truncated")?;
                (VxlanRepr::parse(&v).map_err(|_| "tunnel-header")?.vni, VXLAN_HEADER_LEN)
            }
            TunnelKind::Geneve => {
                let g = GenevePacket::new_checked(b.get(tun..).ok_or("tunnel-truncated")?)
                    .map_err(|_| "tunnel-truncated")?;
                let r = GeneveRepr::parse(&g).map_err(|_| "tunnel-header")?;
                (r.vni, r.header_len())
            }
        };
        if vni != self.cfg.vni {
            return Err("vni-mismatch");
        }
        let outer = tun + tun_len;
        let inner_len = (l4 + ulen).checked_sub(outer).filter(|&n| n >= ETHERNET_HEADER_LEN).ok_or("inner-runt")?;
        if self.cfg.learning {
            let src = b.get(outer + 6..outer + 12).ok_or("inner-runt")?;
            let mac = MacAddr(<[u8; 6]>::try_from(src).map_err(|_| "inner-runt")?);
            self.learn(mac, remote);
        }
        // A tunnel aggregate becomes an inner superpacket; checksum states
        // that describe the outer packet no longer apply.
        let meta = &mut pkt.meta;
        meta.encap = None;
        meta.gso_type = meta.gso_type.without(GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM);
        meta.csum = match meta.csum {
            ChecksumState::Partial { start, offset } if usize::from(start) >= outer => {
                ChecksumState::Partial { start, offset }
            }
            ChecksumState::Unnecessary { level } if level > 0 => ChecksumState::Unnecessary { level: level - 1 },
            _ => ChecksumState::None,
        };
        pkt.pull(outer).map_err(|_| "tunnel-truncated")?;
        let total = len - outer;
        if total > inner_len {
            pkt.trim(inner_len).map_err(|_| "tunnel-truncated")?;
        }
        Ok(inner_len)
    }
}

/// A view of the IPv6 header at `at` of a packet's linear area, which need
/// hold only the headers: a superpacket's payload may live in segments, so
/// the payload length is not checked against it (as the segmenter's header
/// walk does). `None` without the 40 fixed bytes.
fn ipv6_header(linear: &[u8], at: usize) -> Option<superpacket::wire::Ipv6Packet<&[u8]>> {
    let ip = linear.get(at..).filter(|ip| ip.len() >= 40)?;
    Some(superpacket::wire::Ipv6Packet::new_unchecked(ip))
}

/// The inner network and transport header offsets of `frame` (an Ethernet
/// frame, VLAN tags allowed): the transport header is the partial checksum's
/// start when there is one (it is what the offloads describe), else the IP
/// header's end.
fn inner_offsets(frame: &[u8], csum_start: Option<u16>) -> Result<(usize, usize), &'static str> {
    let walk = walk_tags(frame, 12);
    let network = walk.type_offset + 2;
    let transport = match (csum_start, walk.ethertype) {
        (Some(start), _) => usize::from(start),
        (None, EtherType::IPV4) => network + usize::from(frame.get(network).ok_or("inner-runt")? & 0x0f) * 4,
        (None, EtherType::IPV6) => {
            let ip = ipv6_header(frame, network).ok_or("inner-runt")?;
            network + ip.walk_ext_headers().map_err(|_| "inner-ipv6")?.upper_offset
        }
        _ => return Err("inner-not-ip"),
    };
    if transport <= network {
        return Err("inner-offsets");
    }
    Ok((network, transport))
}

/// The UDP source port for the inner flow (Linux's `udp_flow_src_port`:
/// the flow hash scaled into [`SOURCE_PORTS`]). The hash is the packet's RSS
/// hash when it has one, else the inner frame's layer3+4 hash (addresses and
/// ports; MACs and EtherType for non-IP frames, as Linux falls back to),
/// the one bonds use ([`super::bond::hash_layer34`]), spread over 32 bits
/// by a Fibonacci multiply since the scaling reads its high bits. A flow
/// keeps its port.
fn source_port(pkt: &Packet) -> u16 {
    let hash = pkt.meta.rss_hash.unwrap_or_else(|| super::bond::hash_layer34(pkt.linear()).wrapping_mul(0x9e37_79b1));
    let (min, max) = SOURCE_PORTS;
    ((u64::from(hash) * u64::from(max - min)) >> 32) as u16 + min
}

/// The UDP pseudo-header sum of a datagram of `len` bytes from `src` to
/// `dst` (0 for mixed families, which configuration rules out).
fn udp_pseudo(src: IpAddr, dst: IpAddr, len: usize) -> u16 {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => csum::pseudo_header_v4(s.octets(), d.octets(), 17, len as u16),
        (IpAddr::V6(s), IpAddr::V6(d)) => csum::pseudo_header_v6(s.octets(), d.octets(), 17, len as u32),
        _ => 0,
    }
}

/// The ones' complement sum of bytes `from..to` of the packet (linear area,
/// payload segments and frag list, each chunk summed at its offset's
/// parity).
fn sum_range(pkt: &Packet, from: usize, to: usize) -> u16 {
    let (mut sum, mut pos) = (0u16, 0usize);
    for chunk in pkt.all_chunks() {
        let (start, end) = (pos, pos + chunk.len());
        pos = end;
        if end <= from {
            continue;
        }
        if start >= to {
            break;
        }
        let (a, b) = (from.max(start) - start, to.min(end) - start);
        sum = csum::ones_add(sum, csum::ones_sum_at(&chunk[a..b], start + a - from));
    }
    sum
}

/// The outer UDP checksum field for a packet just encapsulated (outer UDP at
/// `l4`, length `udp_len`): for a superpacket the pseudo-header seed the
/// segmenter adjusts per segment (Linux `udp_set_csum` on a GSO skb); for an
/// inner partial checksum the local checksum offload value (`lco_csum`:
/// only header bytes are summed, the inner checksum's final value being
/// known from its seed); else the full checksum.
fn outer_udp_checksum(pkt: &Packet, l4: usize, udp_len: usize, local: IpAddr, remote: IpAddr) -> u16 {
    let pseudo = udp_pseudo(local, remote, udp_len);
    if pkt.meta.is_gso() {
        return pseudo;
    }
    let sum = match pkt.meta.csum {
        ChecksumState::Partial { start, offset } => {
            let at = usize::from(start) + usize::from(offset);
            let seed = pkt.linear().get(at..at + 2).map_or(0, |s| u16::from_be_bytes([s[0], s[1]]));
            csum::ones_add(sum_range(pkt, l4, usize::from(start)), !seed)
        }
        _ => sum_range(pkt, l4, l4 + udp_len),
    };
    match !csum::ones_add(pseudo, sum) {
        0 => 0xffff,
        c => c,
    }
}

/// Whether the UDP checksum of the datagram at `l4` (length `ulen`)
/// verifies against the pseudo-header sum `pseudo`.
fn udp_checksum_ok(pkt: &Packet, l4: usize, ulen: usize, pseudo: u16) -> bool {
    csum::ones_add(pseudo, sum_range(pkt, l4, l4 + ulen)) == 0xffff
}

impl NetDevice for UdpTunnel {
    fn kind(&self) -> &'static str {
        self.cfg.protocol.name()
    }

    /// Encapsulates and hands the packet to the router (see the module documentation).
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let Some(dst) = pkt.linear().get(..6).and_then(|d| <[u8; 6]>::try_from(d).ok()) else {
            return cx.drop("runt");
        };
        let Some(remote) = self.remote_for(MacAddr(dst)) else {
            return cx.drop("no-remote");
        };
        match self.encapsulate(pkt, len, remote) {
            Ok(outer) => Verdict::Transmit(self.router, len + outer),
            Err(reason) => cx.drop(reason),
        }
    }

    fn deliver(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        match self.decapsulate(pkt, len) {
            Ok(n) => Verdict::Up(n),
            Err(reason) => cx.drop(reason),
        }
    }

    /// Linux's vxlan/geneve devices: scatter-gather, any checksum and every
    /// software GSO type, so superpackets enter whole.
    fn default_features(&self, mode: StackMode) -> Option<NetdevFeatures> {
        Some(
            NetdevFeatures::SG
                | NetdevFeatures::HW_CSUM
                | NetdevFeatures::RXCSUM
                | NetdevFeatures::LLTX
                | NetdevFeatures::gso_software(mode),
        )
    }

    fn table_usage(&self, out: &mut Vec<TableUsage>) {
        out.push(
            TableUsage::new("tunnel-fdb", self.learned, self.peak_learned, self.cfg.fdb_max)
                .event("refused", self.learn_refused),
        );
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
