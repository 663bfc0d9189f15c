//! UDP tunnel GRO: VXLAN and Geneve over UDP over IPv4 or IPv6
//! (offload-rules 2.2 item 1 and 2.6; Linux `udp_gro_receive` with a tunnel
//! socket, `vxlan_gro_receive`, `geneve_gro_receive`, `eth_gro_receive`,
//! then the inner IP and TCP/UDP layers).
//!
//! A datagram to a configured tunnel port ([`TunnelPorts`], Linux: a UDP
//! tunnel socket bound to it) is coalesced on its **inner** TCP or UDP flow
//! with the inner rules already in place (offload-rules 1.3, 2.3), and on top:
//!
//! - flow identity ([`TunnelId`]): the outer MAC header, VLAN tags, outer
//!   addresses (IPv6: flow label and extension-header bytes), outer ports,
//!   "outer UDP checksum zero" or not, the tunnel header (VXLAN: its 8 bytes;
//!   Geneve: the whole header with its options), the inner Ethernet header
//!   and the inner IP/L4 identity. A difference there is another flow,
//!   held beside the first (Linux clears `same_flow`);
//! - the outer IP header follows the network rules of 1.3 (b) at its own
//!   level: TTL/hop limit, TOS/traffic class, DF, and the IPv4 ID
//!   incrementing by one per segment or fixed, with its own fixed-ID latch
//!   (`ip_fixedid` bit 0; the inner header has bit 1). A violation flushes
//!   the aggregate;
//! - the outer UDP checksum must verify when it is not zero (a bad one:
//!   delivered untouched); the inner checksum is then checked from the sum
//!   the outer one implies.
//!
//! Completion ([`complete`]): the inner completion of 1.4 / 2.4, then the
//! outer IP length (and IPv4 header checksum), the outer UDP length, and a
//! non-zero outer UDP checksum replaced by the outer pseudo-header sum;
//! `gso_type` = `UDP_TUNNEL` (outer checksum zero) or `UDP_TUNNEL_CSUM`,
//! plus the inner bits; [`OffloadMeta::encap`](crate::packet::OffloadMeta::encap) records the offsets. The
//! checksum state is the inner `CHECKSUM_PARTIAL` Linux leaves.
//!
//! The fast path of a TCP segment that joins its flow's aggregate
//! (`Gro::tunnel_fast` in `tunnel_fast.rs`, tried before any parse) finds
//! the aggregate through a [`SlotHints`] entry named by the outer UDP ports,
//! settles the flow identity and the equal-field rules with one masked
//! compare of the headers ([`Template`], one per header layout,
//! [`Templates`]) and checks the outer lengths and checksums
//! ([`OuterAt::entry`]); the full path above decides everything else.
//!
//! Not coalesced (delivered as they are, [`BypassReason::Tunnel`]): Geneve
//! with a version other than 0 or the O bit (Linux flushes those too), Geneve
//! carrying anything but Ethernet (Linux would coalesce an IP payload; not
//! modelled), an inner frame with VLAN tags (this kernel has no VLAN GRO), an
//! inner protocol other than TCP/UDP, a tunnel inside the tunnel; GSO
//! packets; fraglist modes ([`BypassReason::Mode`]: not modelled for tunnels).

use super::Encap;
use super::counters::{BypassReason, FlushReason};
use super::flow::{FlowKey, Held};
use super::ip;
use super::parse::{GroHeaders, NotCandidate};
use super::template::Shape;
#[cfg(doc)]
use super::{
    hint::SlotHints,
    template::{Template, Templates},
};
use crate::packet::{ChecksumState, Encapsulation, GsoType, TunnelKind};
use crate::wire::Medium;
use crate::wire::field::{be16, ne64};

/// Most tunnel ports a [`TunnelPorts`] holds.
pub const MAX_TUNNEL_PORTS: usize = 4;

/// The UDP destination ports that have a tunnel behind them (Linux: a UDP
/// tunnel socket with a `gro_receive` hook bound to the port). Empty by
/// default: no tunnel GRO, a tunnel datagram is plain UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelPorts {
    ports: [(u16, TunnelKind); MAX_TUNNEL_PORTS],
    len: u8,
}

impl Default for TunnelPorts {
    fn default() -> Self {
        TunnelPorts::NONE
    }
}

impl TunnelPorts {
    /// No tunnel ports.
    pub const NONE: TunnelPorts = TunnelPorts { ports: [(0, TunnelKind::Vxlan); MAX_TUNNEL_PORTS], len: 0 };

    /// These ports plus `port` for `kind` (an existing entry for the port is
    /// replaced). At most [`MAX_TUNNEL_PORTS`]: beyond, the last entry is
    /// replaced.
    pub const fn with(mut self, port: u16, kind: TunnelKind) -> TunnelPorts {
        let mut i = 0;
        while i < self.len as usize {
            if self.ports[i].0 == port {
                self.ports[i].1 = kind;
                return self;
            }
            i += 1;
        }
        if (self.len as usize) < MAX_TUNNEL_PORTS {
            self.ports[self.len as usize] = (port, kind);
            self.len += 1;
        } else {
            self.ports[MAX_TUNNEL_PORTS - 1] = (port, kind);
        }
        self
    }

    /// No port configured.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The tunnel behind UDP destination port `port`.
    #[inline]
    pub fn lookup(&self, port: u16) -> Option<TunnelKind> {
        self.ports[..self.len as usize].iter().find(|(p, _)| *p == port).map(|&(_, k)| k)
    }

    /// The configured (port, kind) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u16, TunnelKind)> + '_ {
        self.ports[..self.len as usize].iter().copied()
    }
}

/// The outer half of a tunnel flow's identity (the inner half is the
/// [`FlowKey`]): the outer headers' flow key (MAC, tags, addresses, ports,
/// IPv6 flow label), the first 8 bytes of the tunnel header and whether the
/// outer UDP checksum is non-zero. Variable-length parts (outer IPv6
/// extension headers, Geneve options) are compared from the packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TunnelId {
    /// Outer flow key.
    pub outer: FlowKey,
    /// Tunnel header bytes 0..8 (VXLAN: flags and VNI; Geneve: version,
    /// option length, flags, protocol, VNI).
    pub header: u64,
    /// The outer UDP checksum is not zero (Linux: "both zero or both non-zero").
    pub csum: bool,
}

/// A new packet's tunnel headers (offsets from the frame start).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TunnelIn {
    pub kind: TunnelKind,
    pub outer_v6: bool,
    pub outer_l3: u16,
    pub outer_l4: u16,
    pub inner_mac: u16,
}

/// Where a datagram to a tunnel port has its outer IP and UDP headers, as
/// the plain path's parse found them, small enough for one register.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OuterAt {
    /// Offset of the outer IP header.
    l3: u16,
    /// Offset of the outer UDP header.
    l4: u16,
    /// Outer IPv6 (else IPv4).
    v6: bool,
    /// The tunnel behind the destination port.
    pub kind: TunnelKind,
    /// The outer IP layer flush-marks the packet (offload-rules 1.2).
    pub flush_mark: bool,
}

impl OuterAt {
    /// From the parse `h` of a UDP datagram; `None` if an offset does not
    /// fit 16 bits (a tunnel packet's offsets are recorded in 16 bits,
    /// [`Encapsulation`]).
    #[inline(always)]
    pub(crate) fn new(h: &GroHeaders, kind: TunnelKind, flush_mark: bool) -> Option<OuterAt> {
        // The IP header comes first: one compare bounds both.
        (h.l4 <= u16::MAX as usize).then_some(OuterAt { l3: h.l3 as u16, l4: h.l4 as u16, v6: h.v6, kind, flush_mark })
    }

    /// Offset of the outer IP header.
    #[inline]
    pub(crate) fn l3(&self) -> u16 {
        self.l3
    }

    /// The outer offsets of a held aggregate (its IP header at `l3`, its
    /// UDP header at `l4`, both below 64 KB as [`TunnelHeld`] records them,
    /// its version and tunnel kind): those of a packet whose masked headers
    /// equal its first packet's (a header [`Template`] covers the layout),
    /// before any check of that packet's lengths.
    #[inline(always)]
    pub(crate) fn held_at(l3: usize, l4: usize, v6: bool, kind: TunnelKind) -> OuterAt {
        OuterAt { l3: l3 as u16, l4: l4 as u16, v6, kind, flush_mark: false }
    }

    /// The outer entry checks of the plain path's parse and IP layer
    /// (offload-rules 1.2, 2.6) that a header template leaves open, for a
    /// `frame` whose masked headers equal those of an aggregate with these
    /// offsets (so the layout, the tags, the IP version, options and
    /// fragment bits, the reserved flag, the protocol and the ports are
    /// known good: held packets had no flush mark): the IP length ends the
    /// frame (no padding: the full path trims or flush-marks it; an IPv6
    /// jumbogram's zero payload length never does), the UDP length ends the
    /// IP packet, an IPv4 header checksum verifies, and the outer UDP checksum is
    /// zero exactly when `csum` (the aggregate's) is false, the part of the
    /// flow identity the template leaves to this check. Then
    /// [`OuterAt::headers`] is the parse the full path would have made.
    #[inline(always)]
    pub(crate) fn entry(&self, frame: &[u8], csum: bool) -> bool {
        self.entry_ok(frame, csum).is_some()
    }

    #[inline(always)]
    fn entry_ok(&self, frame: &[u8], csum: bool) -> Option<()> {
        let (l3, l4) = (self.l3 as usize, self.l4 as usize);
        let ip = frame.get(l3..)?;
        let l3_len = if self.v6 { 40 + be16(ip, 4) as usize } else { be16(ip, 2) as usize };
        let udp = frame.get(l4..l4 + 8)?;
        if l3 + l3_len != frame.len() || be16(udp, 4) as usize != frame.len() - l4 || (be16(udp, 6) != 0) != csum {
            return None;
        }
        if !self.v6 && !ip::ipv4_header_ok(ip) {
            return None;
        }
        Some(())
    }

    /// The parse these offsets come from, rebuilt from `frame` (the same
    /// frame): every field follows from the two offsets and the length
    /// fields the parse checked. The parse accepted no fragment (the IP layer
    /// turned fragments away before the tunnel port was looked at), and the
    /// VLAN tags fill the space before the IP header (4 bytes each after the
    /// 14-byte Ethernet header; a raw IP packet has none).
    #[inline(always)]
    pub(crate) fn headers(&self, frame: &[u8]) -> GroHeaders {
        let (l3, l4) = (self.l3 as usize, self.l4 as usize);
        let l3_len = if self.v6 { 40 + be16(frame, l3 + 4) as usize } else { be16(frame, l3 + 2) as usize };
        GroHeaders {
            tags: l3.saturating_sub(14) / 4,
            v6: self.v6,
            tcp: false,
            l3,
            l3_header_len: l4 - l3,
            l3_len,
            l4,
            payload: l4 + 8,
            payload_len: (be16(frame, l4 + 4) as usize).saturating_sub(8),
            is_fragment: false,
            has_fragment_header: false,
            l2_padding: frame.len().saturating_sub(l3 + l3_len),
        }
    }
}

/// What a tunnel packet's outer headers add to its inner packet's merge and
/// hold (offload-rules 2.6): the outer network rules with their own fixed-ID
/// latch, and the outer state of a new aggregate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outer {
    /// The new packet's outer headers.
    pub t: TunnelIn,
    /// Their identity, built once per packet: it gives the packet's hash,
    /// finds its aggregate and becomes a new aggregate's.
    pub id: TunnelId,
    /// The hash of the packet's flow identity ([`identity_hash`]), taken
    /// once: the packet's bucket without a receive hash, and a new
    /// aggregate's [`TunnelHeld::identity_hash`].
    pub identity_hash: u32,
    /// Its L3 length from the outer IP header (the size limit counts from there).
    pub agg_len: usize,
}

/// The outer level of a tunnel packet for the merge rules alone: where its
/// outer IP header is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OuterLevel {
    /// Offset of the new packet's outer IP header.
    pub outer_l3: u16,
}

impl Encap for OuterLevel {
    #[inline]
    fn outer_flush(&self, p: &Held, nl: &[u8], cfg: &super::GroConfig) -> Result<bool, FlushReason> {
        match &p.tunnel {
            Some(t) => outer_flush(t, p.count, nl, self.outer_l3, cfg),
            None => Ok(false),
        }
    }

    #[inline]
    fn merged(&self, p: &mut Held, outer_latch: bool) {
        if let Some(t) = &mut p.tunnel {
            t.outer_fixed_id |= outer_latch;
        }
    }
}

impl Encap for Outer {
    #[inline]
    fn outer_flush(&self, p: &Held, nl: &[u8], cfg: &super::GroConfig) -> Result<bool, FlushReason> {
        OuterLevel { outer_l3: self.t.outer_l3 }.outer_flush(p, nl, cfg)
    }

    #[inline]
    fn merged(&self, p: &mut Held, outer_latch: bool) {
        OuterLevel { outer_l3: self.t.outer_l3 }.merged(p, outer_latch)
    }
}

impl super::EncapStart for Outer {
    fn held(&self, p: &mut Held, frame: &[u8]) {
        p.l3_len = self.agg_len;
        let shape = Shape::tunnel(&self.t, p);
        p.tunnel = Some(TunnelHeld::new(&self.t, self.id, frame, shape, self.identity_hash));
    }
}

/// A held tunnel aggregate's outer state.
#[derive(Debug, Clone, Copy)]
pub struct TunnelHeld {
    /// Outer identity.
    pub id: TunnelId,
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
    /// Outer IPv6 (else IPv4).
    pub outer_v6: bool,
    /// Offset of the outer IP header.
    pub outer_l3: usize,
    /// Offset of the outer UDP header.
    pub outer_l4: usize,
    /// Offset of the inner Ethernet header.
    pub inner_mac: usize,
    /// The first packet's outer IP header (first 20 bytes).
    pub outer_ip: [u8; 20],
    /// Outer IPv4 fixed-ID latch (offload-rules 1.3 (b), per header level).
    pub outer_fixed_id: bool,
    /// Its header layout, which names its header template ([`Templates`]).
    pub shape: Shape,
    /// The hash of the flow identity ([`identity_hash`]): the bucket a
    /// packet of this flow without a receive hash goes to.
    pub identity_hash: u32,
}

impl TunnelHeld {
    /// From a new packet's tunnel headers `t`, their identity `id`, its
    /// header template and its identity hash.
    pub(crate) fn new(t: &TunnelIn, id: TunnelId, frame: &[u8], shape: Shape, identity_hash: u32) -> TunnelHeld {
        let mut outer_ip = [0u8; 20];
        let l3 = t.outer_l3 as usize;
        if let Some(ip) = frame.get(l3..l3 + 20) {
            outer_ip.copy_from_slice(ip);
        }
        TunnelHeld {
            id,
            kind: t.kind,
            outer_v6: t.outer_v6,
            outer_l3: l3,
            outer_l4: t.outer_l4 as usize,
            inner_mac: t.inner_mac as usize,
            outer_ip,
            outer_fixed_id: false,
            shape,
            identity_hash,
        }
    }

    /// Same outer flow as the new packet `n` (frame `n_frame`); `held` is
    /// this aggregate's frame (its headers are unchanged while held).
    #[inline]
    pub(crate) fn same(&self, n: &TunnelIn, n_id: &TunnelId, held: &[u8], n_frame: &[u8]) -> bool {
        if self.id != *n_id || self.inner_mac != n.inner_mac as usize || self.outer_l4 != n.outer_l4 as usize {
            return false;
        }
        // Outer IPv6 extension headers, then Geneve options: byte for byte.
        let ext = self.outer_l3 + 40..self.outer_l4;
        if self.outer_v6 && !ext.is_empty() && held.get(ext.clone()) != n_frame.get(ext) {
            return false;
        }
        let opts = self.outer_l4 + 16..self.inner_mac;
        opts.is_empty() || held.get(opts.clone()) == n_frame.get(opts)
    }
}

/// The parse of a datagram to a tunnel port: the inner headers (offsets from
/// the frame start) and the outer positions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TunnelParse {
    pub inner: GroHeaders,
    pub inner_mac: usize,
}

/// Parses the tunnel header and the inner frame of a datagram to a `kind`
/// port whose outer headers are `h` (offload-rules 2.6).
pub(crate) fn parse(frame: &[u8], h: &GroHeaders, kind: TunnelKind) -> Result<TunnelParse, BypassReason> {
    let end = h.l3_end();
    let tnl = h.l4 + 8;
    let fixed = frame.get(tnl..tnl + 8).filter(|_| tnl + 8 <= end).ok_or(BypassReason::Malformed)?;
    let hdr_len = match kind {
        TunnelKind::Vxlan => 8,
        TunnelKind::Geneve => {
            // geneve_gro_receive: version 0 and no O bit, else no GRO.
            if fixed[0] >> 6 != 0 || fixed[1] & 0x80 != 0 {
                return Err(BypassReason::Tunnel);
            }
            if be16(fixed, 2) != crate::wire::geneve::GENEVE_PROTO_ETHERNET {
                return Err(BypassReason::Tunnel);
            }
            8 + (fixed[0] & 0x3f) as usize * 4
        }
    };
    let inner_mac = tnl + hdr_len;
    if inner_mac > end {
        return Err(BypassReason::Malformed);
    }
    let inner_frame = &frame[inner_mac..end];
    let ih = GroHeaders::parse_on::<true>(inner_frame, Medium::Ethernet).map_err(|e| match e {
        NotCandidate::Malformed => BypassReason::Malformed,
        _ => BypassReason::Tunnel,
    })?;
    if ih.tags != 0 {
        return Err(BypassReason::Tunnel);
    }
    let inner = GroHeaders { l3: ih.l3 + inner_mac, l4: ih.l4 + inner_mac, payload: ih.payload + inner_mac, ..ih };
    Ok(TunnelParse { inner, inner_mac })
}

/// The inner flow key: [`FlowKey::build`] over the inner frame, marked as a
/// tunnel key (so it never equals a plain key, and [`FlowKey::same`] compares
/// every word).
pub(crate) fn inner_key(frame: &[u8], t: &TunnelParse) -> FlowKey {
    let m = t.inner_mac;
    let rel = GroHeaders { l3: t.inner.l3 - m, l4: t.inner.l4 - m, payload: t.inner.payload - m, ..t.inner };
    let mut key = FlowKey::build_on::<true>(&frame[m..], &rel);
    key.0[1] |= TUNNEL_MARK << 48;
    key
}

/// Marker in the tag-count byte of a tunnel packet's inner key.
const TUNNEL_MARK: u64 = 0x80;

/// The outer identity.
pub(crate) fn tunnel_id(frame: &[u8], h: &GroHeaders) -> TunnelId {
    let tnl = h.l4 + 8;
    TunnelId {
        outer: FlowKey::build_on::<true>(frame, h),
        header: frame.get(tnl..tnl + 8).map_or(0, |b| ne64(b, 0)),
        csum: be16(frame, h.l4 + 6) != 0,
    }
}

/// The hash of a tunnel flow's identity (inner key `key`, outer identity
/// `id`), for a packet that carries no receive hash.
#[inline]
pub(crate) fn identity_hash(key: &FlowKey, id: &TunnelId) -> u32 {
    key.cheap_hash() ^ id.outer.cheap_hash()
}

/// A tunnel packet in checksum state `csum` has nothing left to verify at
/// either level (offload-rules 0.3, 2.6): `Partial` (trusted on receive) or
/// `Unnecessary` of level 1 or more (outer and inner checksums). Then
/// `Gro::verify_tunnel` would change nothing and need not be called.
#[inline(always)]
pub(crate) fn vouched(csum: ChecksumState) -> bool {
    // Two tests rather than a `match` over the four states, which compiles
    // to a jump table: an indirect jump and more instructions on the tunnel
    // fast path.
    matches!(csum, ChecksumState::Partial { .. }) || matches!(csum, ChecksumState::Unnecessary { level } if level >= 1)
}

/// The outer network rules (offload-rules 1.3 (b) at the outer level, 2.6):
/// the aggregate's first outer header against the new packet's (at
/// `n_outer_l3` of `n_frame`), with `count` segments held. Returns the outer
/// fixed-ID latch decision.
#[inline]
pub(crate) fn outer_flush(
    t: &TunnelHeld,
    count: u32,
    n_frame: &[u8],
    n_outer_l3: u16,
    cfg: &super::GroConfig,
) -> Result<bool, FlushReason> {
    ip::header_flush(&t.outer_ip, t.outer_v6, t.outer_fixed_id, count, n_frame, n_outer_l3 as usize, cfg)
}

/// Completes a merged tunnel aggregate (offload-rules 2.6): the inner
/// completion (1.4 TCP, 2.4 UDP segment mode), then the outer lengths and
/// checksum field, the tunnel GSO bits and [`OffloadMeta::encap`].
///
/// [`OffloadMeta::encap`]: crate::packet::OffloadMeta::encap
pub fn complete(held: &mut Held) {
    // The few fields used, not the whole record (a copy of it, and of the
    // packet's metadata, cost 30-odd instructions per aggregate).
    let Some(t) = held.tunnel.as_ref() else { return };
    let (kind, csum, outer_fixed_id) = (t.kind, t.id.csum, t.outer_fixed_id);
    let (outer_l3, outer_l4, outer_v6, inner_mac) = (t.outer_l3, t.outer_l4, t.outer_v6, t.inner_mac);
    let outer_len = held.l3_len;
    let inner_len = outer_len - (held.l3 - outer_l3);
    held.l3_len = inner_len;
    // udp_gro_complete assigns the tunnel type before the inner completion ORs in its bits.
    held.pkt.meta.gso_type = if csum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL };
    if held.tcp {
        super::tcp::complete_on::<true>(held);
    } else {
        super::udp::complete_on::<true>(held);
    }
    held.l3_len = outer_len;
    let meta = &mut held.pkt.meta;
    // tcp4_gro_complete: ip_fixedid bit 0 (outer) -> FIXEDID, bit 1 (inner)
    // -> FIXEDID_INNER; tcp6_gro_complete and UDP add neither.
    let mut ty = meta.gso_type.without(GsoType::TCP_FIXEDID);
    if held.tcp && !held.v6 {
        if outer_fixed_id {
            ty |= GsoType::TCP_FIXEDID;
        }
        if held.fixed_id {
            ty |= GsoType::TCP_FIXEDID_INNER;
        }
    }
    meta.gso_type = ty;
    meta.encap = Some(Encapsulation {
        tunnel: kind,
        outer_transport: outer_l4 as u16,
        inner_mac: inner_mac as u16,
        inner_network: held.l3 as u16,
        inner_transport: held.l4 as u16,
    });
    let lin = held.pkt.linear_mut();
    ip::set_l3_len(lin, outer_l3, outer_v6, outer_len);
    let udp_len = outer_len - (outer_l4 - outer_l3);
    let u = outer_l4;
    lin[u + 4..u + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    if csum {
        let pseudo = ip::pseudo_sum(lin, outer_l3, outer_v6, 17, udp_len);
        lin[u + 6..u + 8].copy_from_slice(&pseudo.to_be_bytes());
    }
}
