//! Generic receive offload: coalesces TCP and UDP flows into superpackets
//! exactly as Linux does (offload-rules sections 1 and 2), and optionally
//! sorts each receive batch by flow first, as FreeBSD's LRO does in iflib
//! (section 8).
//!
//! # Use
//!
//! The engine is a batch API, the same for a port's receive loop and for
//! `superpacket pcap gro`:
//!
//! ```
//! use superpacket::offload::gro::{Gro, GroConfig};
//! use superpacket::traffic::{Flow, FlowSpec, Transport};
//! use superpacket::wire::TcpFlags;
//!
//! let mut gro = Gro::new(GroConfig::default());
//! let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 0));
//! for _ in 0..4 {
//!     gro.receive_frame(&flow.frame(1448, TcpFlags::empty()).unwrap());
//! }
//! gro.flush(); // end of the receive batch (end of a NAPI poll)
//! let out: Vec<_> = gro.drain_delivered().collect();
//! assert_eq!(out.len(), 1);
//! assert_eq!(out[0].meta.gso_segs, 4);
//! ```
//!
//! # Structure (Linux's layering, one place per rule)
//!
//! | file | rules |
//! |---|---|
//! | `mod.rs` | entry (parse once, trim padding, checksum), flow lookup, outcome matrix, flushes, delivery order (offload-rules 1.1, 1.3 outcome matrix, 9.1.1, 9.1.4) |
//! | `fast.rs` | the plain fast path: a TCP segment that matches the template of the aggregate its flow went to last, or starts its flow's next aggregate in the slot of its delivered last one (1.1, 1.2, 1.3; the full path is the reference) |
//! | `template.rs`, `hint.rs` | header templates (masked compare against an aggregate's first packet) and the slot hints of both fast paths |
//! | `flow.rs` | flow key, held aggregate, bounded table 8 x 8 (1.1) |
//! | `ip.rs` | IPv4/IPv6 early rejection, TTL/TOS/DF/ID latch and TC/hop limit rules, length rewrite (1.2, 1.3 (b), 1.4) |
//! | `tcp.rs` | TCP merge decision and completion, TCP fraglist (1.3, 1.4, 1.6) |
//! | `udp.rs` | UDP segment and fraglist modes (2.2 - 2.4) |
//! | `tunnel.rs` | VXLAN and Geneve: entry, outer identity and rules, completion (2.6) |
//! | `tunnel_fast.rs` | the tunnel fast path, before any parse: a TCP segment in a tunnel that matches the template of the aggregate its flow went to last (2.6; the full path is the reference) |
//! | `lro.rs`, `toeplitz.rs` | FreeBSD-style batch sort by RSS hash (8.2) |
//! | `counters.rs` | merged, flushed and bypassed by reason |
//!
//! # Behaviour notes
//!
//! - Defaults are current Linux ([`GroConfig::default`]); version switches of
//!   offload-rules 9.2 are [`CwrRule`] and [`FixedIdRule`].
//! - Ethernet padding after the IP packet is trimmed before GRO (9.1.1);
//!   [`GroConfig::trim_padding`] `= false` is the strict-Linux behaviour (a
//!   padded TCP segment flushes its flow and is delivered normally).
//! - A packet rejected before the flow lookup (bad checksum, IPv4 options,
//!   fragments...) is delivered at once, possibly ahead of older held data of
//!   its flow, as in Linux (9.1.4; the kernel oracle's S5).
//! - Delivery order: a flushed aggregate goes out at its flush point; at the
//!   end of a batch, aggregates go out bucket by bucket, oldest first.
//! - Zero copy: a merge moves the new packet's buffer into the aggregate as a
//!   payload segment ([`Packet::append_payload_from`]); once the
//!   [`crate::packet::MAX_SEGMENTS`] slots are used, further packets are chained
//!   on the frag list with their headers pulled, as Linux does with
//!   `frag_list` (so [`Packet::total_len`] is the aggregate's length).
//!   Fraglist aggregates chain every merged packet that way, keeping it intact
//!   behind its pulled headers. [`capture_bytes`] linearises either kind.
//! - A checksum verified in software upgrades the packet from
//!   [`ChecksumState::None`] to [`ChecksumState::Unnecessary`], as the kernel
//!   does; packets that arrive `Unnecessary` or `Partial` are not re-summed,
//!   and `Complete` ones are verified from their sum without touching payload.

mod counters;
mod fast;
mod flow;
mod hint;
mod ip;
pub mod lro;
mod parse;
mod tcp;
mod template;
pub mod toeplitz;
mod tunnel;
mod tunnel_fast;
mod udp;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tunnel_tests;

pub use counters::{BypassCounters, BypassReason, FlushCounters, FlushReason, GroCounters};
pub use tunnel::{MAX_TUNNEL_PORTS, TunnelPorts};
pub use udp::UDP_GRO_CNT_MAX;

use crate::csum;
use crate::packet::prefetch::prefetch_lines;
use crate::packet::{ChecksumState, GsoType, OffloadMeta, Packet, TunnelKind};
pub use crate::wire::Medium;
use crate::wire::field::be16;
use flow::{FlowKey, FlowTable, Held, Position};
use lro::LroQueue;
use parse::{GroHeaders, NotCandidate};
use tcp::{W3_CLOSING, W3_FIN, W3_PSH};
use udp::UdpDecision;

/// How many packets ahead [`Gro::receive_burst`] prefetches a packet to verify.
const PREFETCH_AHEAD: usize = 2;

/// Most cache lines prefetched per packet (1536 bytes: an MTU frame).
const PREFETCH_MAX_LINES: usize = 24;

/// Largest number of segments of a TCP fraglist aggregate (offload-rules 1.6).
pub const FRAGLIST_MAX_SEGS: u32 = 64;

/// Default `gro_max_size` (`GRO_LEGACY_MAX_SIZE`): the largest aggregate is an
/// L3 packet of 65535 bytes (offload-rules 1.1).
pub const GRO_MAX_SIZE: usize = 65536;

/// The NAPI budget: the default receive batch of `pcap gro`.
pub const NAPI_BUDGET: usize = 64;

/// How CWR is treated by TCP GRO (offload-rules 1.3 (a), 9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CwrRule {
    /// Current (2026+): CWR is part of the flag word that must be equal.
    #[default]
    Current,
    /// Older kernels (the spec dates the change to 2026 / v7.0, but this
    /// machine's 6.18.44 already behaves as [`CwrRule::Current`], see
    /// `tests/gro_kernel_oracle.rs`): CWR is not compared, but a segment with
    /// CWR never joins an existing aggregate (it may start one).
    Legacy,
}

/// How a non-incrementing IPv4 ID is treated (offload-rules 1.3 (b), 9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FixedIdRule {
    /// Current (v6.18+): a fixed ID is latched at the second segment whatever DF says.
    #[default]
    Current,
    /// Older kernels: a fixed ID is accepted only with DF set.
    Legacy,
}

/// UDP GRO mode (offload-rules 2.2). Linux has both `rx-udp-gro-forwarding`
/// and `rx-gro-list` off by default, so UDP is not coalesced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UdpGroMode {
    /// No UDP GRO: datagrams are delivered as they come.
    #[default]
    Off,
    /// Segment GRO (`rx-udp-gro-forwarding`): same-size datagrams become one
    /// UDP_L4 superpacket (CHECKSUM_PARTIAL), the last may be shorter.
    Forward,
    /// Fraglist GRO (`rx-gro-list`): datagrams are chained intact on the
    /// frag list (FRAGLIST | UDP_L4, CHECKSUM_UNNECESSARY), for forwarding.
    Fraglist,
}

/// GRO engine configuration. [`GroConfig::default`] is current Linux.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroConfig {
    /// Hash buckets of the flow table (8; bucket = hash & 7).
    pub buckets: usize,
    /// Aggregates per bucket (8, `MAX_GRO_SKBS`).
    pub bucket_depth: usize,
    /// `gro_max_size`: an aggregate's L3 length stays below this (65536).
    pub max_size: usize,
    /// CWR rule (current).
    pub cwr: CwrRule,
    /// IPv4 fixed-ID rule (current).
    pub fixed_id: FixedIdRule,
    /// UDP GRO mode (off, as Linux by default).
    pub udp: UdpGroMode,
    /// TCP fraglist GRO (`rx-gro-list` for forwarded TCP; off).
    pub tcp_fraglist: bool,
    /// Trim Ethernet padding to the IP length before GRO (on; offload-rules
    /// 9.1.1). Off = strict Linux: a padded frame is not merged.
    pub trim_padding: bool,
    /// Coalesce VLAN-tagged frames (0, 1 or 2 tags; the tag stack is part of
    /// the flow key). Off = a kernel without VLAN GRO (this machine's, which
    /// lacks `CONFIG_VLAN_8021Q`): tagged frames bypass.
    pub vlan: bool,
    /// Flush aggregates held longer than this (by the packets' arrival
    /// times); `None`: only batch ends and the merge rules flush.
    pub flush_age_ns: Option<u64>,
    /// LRO mode: queue the whole batch, sort it by RSS hash, then coalesce
    /// (offload-rules 8.2).
    pub lro: bool,
    /// LRO: largest queue before it is sorted and coalesced anyway (iflib:
    /// min(1024, ring size)).
    pub lro_queue_max: usize,
    /// How received packets start: Ethernet frames (TAP, AF_PACKET) or raw
    /// IP packets (TUN). Aggregates keep the medium of their packets.
    pub medium: Medium,
    /// UDP ports with a VXLAN or Geneve tunnel behind them (Linux: a UDP
    /// tunnel socket on the port): datagrams to them are coalesced on their
    /// inner flow (offload-rules 2.6). None by default: tunnel datagrams
    /// are plain UDP.
    pub tunnels: TunnelPorts,
}

impl GroConfig {
    /// Current Linux defaults (offload-rules 1.1, 9.2): an 8 x 8 flow table,
    /// 64 KB aggregates, current CWR and fixed-ID rules, UDP GRO off,
    /// padding trimmed (9.1.1), VLAN-tagged flows coalesced.
    pub const LINUX: GroConfig = GroConfig {
        buckets: 8,
        bucket_depth: 8,
        max_size: GRO_MAX_SIZE,
        cwr: CwrRule::Current,
        fixed_id: FixedIdRule::Current,
        udp: UdpGroMode::Off,
        tcp_fraglist: false,
        trim_padding: true,
        vlan: true,
        flush_age_ns: None,
        lro: false,
        lro_queue_max: 1024,
        medium: Medium::Ethernet,
        tunnels: TunnelPorts::NONE,
    };
}

impl Default for GroConfig {
    fn default() -> Self {
        GroConfig::LINUX
    }
}

impl GroConfig {
    /// The configuration for a userspace forwarder (what `superpacket pcap
    /// gro` uses): Linux defaults plus UDP segment GRO
    /// (`rx-udp-gro-forwarding`), so UDP flows become UDP_L4 superpackets
    /// that a TAP with USO or a peer's GSO takes whole.
    pub fn forwarder() -> GroConfig {
        GroConfig { udp: UdpGroMode::Forward, ..GroConfig::default() }
    }

    /// This machine's kernel (6.18.44) as the oracle shows it: current CWR and
    /// fixed-ID rules, no padding trim (a padded frame is not merged and
    /// flushes its flow), no VLAN GRO (`CONFIG_VLAN_8021Q` is off), UDP GRO off.
    pub fn kernel_6_18() -> GroConfig {
        GroConfig { trim_padding: false, vlan: false, ..GroConfig::default() }
    }

    /// This configuration for packets of `medium` (raw IP for a TUN device).
    ///
    /// ```
    /// use superpacket::offload::gro::{Gro, GroConfig};
    /// use superpacket::traffic::{Flow, FlowSpec, Transport};
    /// use superpacket::wire::{Medium, TcpFlags};
    ///
    /// let mut gro = Gro::new(GroConfig::default().with_medium(Medium::Ip));
    /// let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, true, 0)); // TCP over IPv6
    /// for _ in 0..3 {
    ///     let frame = flow.frame(1000, TcpFlags::empty()).unwrap();
    ///     gro.receive_frame(&frame[14..]); // a TUN packet: the frame without its Ethernet header
    /// }
    /// gro.flush();
    /// let sp = gro.drain_delivered().next().unwrap();
    /// assert_eq!((sp.meta.gso_segs, sp.meta.gso_size), (3, 1000));
    /// assert_eq!(sp.total_len(), 40 + 32 + 3000); // IPv6, TCP with timestamps, payload
    /// ```
    pub const fn with_medium(mut self, medium: Medium) -> GroConfig {
        self.medium = medium;
        self
    }

    /// This configuration with a `kind` tunnel behind UDP port `port`
    /// (offload-rules 2.6; at most [`MAX_TUNNEL_PORTS`] ports).
    ///
    /// ```
    /// use superpacket::offload::gro::{Gro, GroConfig};
    /// use superpacket::packet::{GsoType, TunnelKind};
    /// use superpacket::traffic::{FlowSpec, Transport, TunnelFlow};
    /// use superpacket::wire::TcpFlags;
    ///
    /// let mut gro = Gro::new(GroConfig::default().with_tunnel(4789, TunnelKind::Vxlan));
    /// let mut t = TunnelFlow::new(TunnelKind::Vxlan, false, FlowSpec::new(Transport::Tcp, false, 1), 1);
    /// for _ in 0..3 {
    ///     gro.receive_frame(&t.frame(1000, TcpFlags::empty()).unwrap());
    /// }
    /// gro.flush();
    /// let sp = gro.drain_delivered().next().unwrap();
    /// assert_eq!(sp.meta.gso_segs, 3);
    /// assert!(sp.meta.gso_type.contains(GsoType::TCPV4 | GsoType::UDP_TUNNEL_CSUM));
    /// assert_eq!(sp.meta.encap.unwrap().inner_mac, 14 + 20 + 8 + 8);
    /// ```
    pub const fn with_tunnel(mut self, port: u16, kind: TunnelKind) -> GroConfig {
        self.tunnels = self.tunnels.with(port, kind);
        self
    }
}

/// A parsed packet on its way through the engine (the kernel's
/// `NAPI_GRO_CB(skb)` state).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Incoming {
    pub key: FlowKey,
    /// The key's own hash ([`FlowKey::cheap_hash`]): the bucket a packet of
    /// this flow without a receive hash goes to (a tunnel packet's: 0, its
    /// aggregate keeps its identity hash).
    pub key_hash: u32,
    pub hash: u32,
    pub tcp: bool,
    pub v6: bool,
    pub l3: usize,
    pub l4: usize,
    pub payload: usize,
    pub l3_len: usize,
    pub payload_len: usize,
    /// Must not merge; reaching L4 it flushes a matching TCP aggregate
    /// (offload-rules 1.2: reserved flag, strict-mode padding).
    pub flush_mark: bool,
    /// Ethernet padding present and not trimmed (strict mode).
    pub padded_strict: bool,
    /// Wire segments this packet stands for (its `gso_segs` if GSO, else 1).
    pub segs: u32,
    /// Its `gso_size` if it is a GSO packet, else 0.
    pub gso_size: u16,
}

impl Incoming {
    /// A TCP segment a fast path matched against its aggregate's template
    /// (so laid out as the aggregate, one wire segment, no flush mark, no
    /// padding), as the merge rules see it; `hash` picks its bucket. The
    /// key is left empty: only a new aggregate takes it, and a fast path
    /// that starts one copies it from the aggregate the segment matched.
    #[inline(always)]
    pub(crate) fn matched_tcp(l3: usize, l4: usize, payload: usize, l3_len: usize, v6: bool, hash: u32) -> Incoming {
        Incoming {
            key: FlowKey::default(),
            key_hash: 0,
            hash,
            tcp: true,
            v6,
            l3,
            l4,
            payload,
            l3_len,
            payload_len: l3 + l3_len - payload,
            flush_mark: false,
            padded_strict: false,
            segs: 1,
            gso_size: 0,
        }
    }
}

/// Why [`Gro::prepare`] gives no plain packet: deliver it unmerged, or it
/// is for the tunnel path.
pub(crate) enum NotPlain {
    /// Deliver it as it is, for this reason.
    Bypass(BypassReason),
    /// A datagram to a tunnel port, for [`Gro::tunnel_one`]: where its outer
    /// headers are.
    Tunnel(tunnel::OuterAt),
}

impl From<BypassReason> for NotPlain {
    #[inline(always)]
    fn from(reason: BypassReason) -> NotPlain {
        NotPlain::Bypass(reason)
    }
}

/// What a level of encapsulation adds to the TCP/UDP merge rules
/// (offload-rules 2.6). A plain packet has [`Plain`], whose hooks are empty,
/// so the plain path compiles to the code it had before tunnels; a tunnel
/// packet has [`tunnel::Outer`], or [`tunnel::OuterLevel`] on the fast path
/// (which only merges).
pub(crate) trait Encap {
    /// The outer network rules against the aggregate `p` for the new packet
    /// `nl` (after the inner ones): the outer fixed-ID latch decision.
    fn outer_flush(&self, p: &Held, nl: &[u8], cfg: &GroConfig) -> Result<bool, FlushReason>;
    /// A packet was merged into `p` with this outer latch decision.
    fn merged(&self, p: &mut Held, outer_latch: bool);
}

/// What a level of encapsulation adds to a new aggregate (offload-rules 2.6).
pub(crate) trait EncapStart: Encap {
    /// `p` was started from the packet `frame` (every plain field written).
    fn held(&self, p: &mut Held, frame: &[u8]);
}

/// No encapsulation.
pub(crate) struct Plain;

impl Encap for Plain {
    #[inline(always)]
    fn outer_flush(&self, _: &Held, _: &[u8], _: &GroConfig) -> Result<bool, FlushReason> {
        Ok(false)
    }

    #[inline(always)]
    fn merged(&self, _: &mut Held, _: bool) {}
}

impl EncapStart for Plain {
    #[inline(always)]
    fn held(&self, _: &mut Held, _: &[u8]) {}
}

/// The GRO engine: one per receive queue (a NAPI context).
#[derive(Debug)]
pub struct Gro {
    cfg: GroConfig,
    table: FlowTable,
    out: Vec<Packet>,
    counters: GroCounters,
    lro: LroQueue,
    /// A lower bound of the held aggregates' arrival times (age flushes).
    min_age: u64,
    /// Most aggregates held at once so far.
    peak_held: usize,
    /// Where tunnel packets went last, by outer source port (the fast path's hint).
    tunnel_cache: hint::SlotHints,
    /// The header templates of the tunnel fast path, by header layout.
    templates: template::Templates,
    /// Take the tunnel fast path ([`Gro::tunnel_fast`]); off only in tests
    /// that compare it with the full path ([`Gro::fast_paths_on`]).
    #[cfg(test)]
    tunnel_fast: bool,
    /// Where plain TCP packets went last, by their hint key (the plain fast path's hint).
    plain_hints: hint::SlotHints,
    /// Take the plain fast path ([`Gro::plain_fast`]); off only in tests
    /// that compare it with the full path ([`Gro::fast_paths_on`]).
    #[cfg(test)]
    plain_fast: bool,
    /// Packets the plain fast path merged (tests check that it is taken).
    #[cfg(test)]
    plain_fast_merges: u64,
    /// Aggregates the plain fast path started after the size limit ended
    /// the one before (tests check that it is taken).
    #[cfg(test)]
    plain_fast_restarts: u64,
    /// Aggregates the plain fast path started in a free slot, after the
    /// flow's last one there was delivered (tests check that it is taken).
    #[cfg(test)]
    plain_fast_starts: u64,
    /// Packets the tunnel fast path merged (tests check that it is taken).
    #[cfg(test)]
    fast_merges: u64,
    /// Aggregates the tunnel fast path started after the size limit ended
    /// the one before (tests check that it is taken).
    #[cfg(test)]
    tunnel_fast_restarts: u64,
}

impl Default for Gro {
    fn default() -> Self {
        Gro::new(GroConfig::default())
    }
}

impl Gro {
    /// An engine with `cfg`.
    pub fn new(cfg: GroConfig) -> Gro {
        Gro {
            table: FlowTable::new(cfg.buckets, cfg.bucket_depth),
            out: Vec::with_capacity(NAPI_BUDGET),
            counters: GroCounters::default(),
            lro: LroQueue::with_capacity(if cfg.lro { cfg.lro_queue_max.min(4096) } else { 0 }),
            min_age: u64::MAX,
            peak_held: 0,
            tunnel_cache: hint::SlotHints::default(),
            templates: template::Templates::default(),
            #[cfg(test)]
            tunnel_fast: true,
            plain_hints: hint::SlotHints::default(),
            #[cfg(test)]
            plain_fast: true,
            #[cfg(test)]
            fast_merges: 0,
            #[cfg(test)]
            tunnel_fast_restarts: 0,
            #[cfg(test)]
            plain_fast_merges: 0,
            #[cfg(test)]
            plain_fast_restarts: 0,
            #[cfg(test)]
            plain_fast_starts: 0,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &GroConfig {
        &self.cfg
    }

    /// The counters so far.
    pub fn counters(&self) -> &GroCounters {
        &self.counters
    }

    /// Resets the counters.
    pub fn reset_counters(&mut self) {
        self.counters = GroCounters::default();
    }

    /// Aggregates currently held.
    pub fn held(&self) -> usize {
        self.table.len()
    }

    /// Most aggregates held at once so far.
    pub fn peak_held(&self) -> usize {
        self.peak_held
    }

    /// Room of the flow table: `buckets` x `bucket_depth` aggregates (8 x 8
    /// by default); a full bucket flushes its oldest (`flushed.table_full`).
    pub fn capacity(&self) -> usize {
        self.cfg.buckets * self.cfg.bucket_depth
    }

    /// Packets queued for the LRO sort (0 outside LRO mode).
    pub fn queued(&self) -> usize {
        self.lro.len()
    }

    /// Receives one Ethernet frame (its headers in the linear area). It is
    /// held, merged, or delivered (see [`Gro::drain_delivered`]); in LRO mode
    /// it is queued until [`Gro::flush`].
    pub fn receive(&mut self, pkt: Packet) {
        self.counters.packets_in += 1;
        if self.cfg.lro {
            let hash = lro::rss_hash(&pkt, self.cfg.medium);
            self.lro.push(pkt, hash);
            if self.lro.len() >= self.cfg.lro_queue_max {
                self.process_lro();
            }
            return;
        }
        if let (Some(max_age), Some(now)) = (self.cfg.flush_age_ns, pkt.meta.arrival_ns)
            && now.saturating_sub(self.min_age) >= max_age
        {
            self.flush_aged(now);
        }
        let mut pkt = pkt;
        self.gro_one(&mut pkt, None);
    }

    /// Receives a burst of packets (a receive ring's worth) in order, as
    /// [`Gro::receive`] for each, draining `pkts` (which keeps its capacity
    /// for the next burst). Call [`Gro::flush`] at the end of the poll.
    ///
    /// While it works on packet `i`, the bytes of packet
    /// `i + PREFETCH_AHEAD` are prefetched if its checksum is still to be
    /// verified (`CHECKSUM_NONE`), so summing it does not wait on memory:
    /// 10-25% more packets per second on a 1024-frame burst (`superpacket
    /// bench peers`, verifying rows). A packet whose checksum is trusted gets
    /// only its two header lines prefetched (2% more at 64 flows, neutral at
    /// one); for a packet to verify, headers alone measured no better than
    /// nothing.
    pub fn receive_burst(&mut self, pkts: &mut Vec<Packet>) {
        if self.cfg.lro || self.cfg.flush_age_ns.is_some() {
            for pkt in pkts.drain(..) {
                self.receive(pkt);
            }
            return;
        }
        // The plain case of `receive`, working on the packets in place: a
        // merged packet only gives up its buffer, a held or delivered one is
        // moved out once; what is left (empty packets) is released at the end.
        self.counters.packets_in += pkts.len() as u64;
        for i in 0..pkts.len() {
            if let Some(ahead) = pkts.get(i + PREFETCH_AHEAD) {
                // Its checksum will be summed: bring all its bytes in now;
                // otherwise only the headers are read.
                if ahead.meta.csum == ChecksumState::None {
                    prefetch_lines(ahead.linear(), PREFETCH_MAX_LINES);
                } else {
                    ahead.prefetch_headers();
                }
            }
            self.gro_one(&mut pkts[i], None);
        }
        Packet::release_all(pkts);
    }

    /// Receives a copy of `frame` (see [`Gro::receive`]).
    pub fn receive_frame(&mut self, frame: &[u8]) {
        self.receive(Packet::from_frame(frame));
    }

    /// End of a receive batch (the end of a NAPI poll): in LRO mode sorts and
    /// coalesces the queued batch; then flushes every held aggregate.
    pub fn flush(&mut self) {
        if !self.lro.is_empty() {
            self.process_lro();
        }
        self.flush_all(FlushReason::BatchEnd);
    }

    /// Flushes the aggregates whose first packet arrived `flush_age_ns` or
    /// more before `now_ns` (nothing if no flush age is configured).
    pub fn flush_aged(&mut self, now_ns: u64) {
        let Some(max_age) = self.cfg.flush_age_ns else {
            return;
        };
        let (out, counters) = (&mut self.out, &mut self.counters);
        self.table.drain_where(
            |h| h.age_ns.is_some_and(|a| now_ns.saturating_sub(a) >= max_age),
            |h| finish(h, FlushReason::Age, out, counters),
        );
        self.min_age = self.table.iter().filter_map(|h| h.age_ns).min().unwrap_or(u64::MAX);
    }

    /// The packets delivered so far, in delivery order.
    pub fn delivered(&self) -> &[Packet] {
        &self.out
    }

    /// Takes the delivered packets, in delivery order (the engine keeps its
    /// buffer's capacity).
    pub fn drain_delivered(&mut self) -> std::vec::Drain<'_, Packet> {
        self.out.drain(..)
    }

    /// Moves the delivered packets to the end of `dst` (a copy of each:
    /// [`Gro::swap_delivered`] hands them over without one).
    pub fn take_delivered_into(&mut self, dst: &mut Vec<Packet>) {
        dst.append(&mut self.out);
    }

    /// Hands the delivered packets over by swapping vectors: afterwards
    /// `out` holds them, in delivery order, and the engine delivers into
    /// `out`'s former buffer, emptied first (packets left in it are
    /// dropped). No packet is copied: a caller that takes each burst's
    /// output this way and gives the vector back drained allocates nothing
    /// once the vectors have grown (docs/benchmarks.md, "Packet moves").
    pub fn swap_delivered(&mut self, out: &mut Vec<Packet>) {
        out.clear();
        std::mem::swap(&mut self.out, out);
    }

    fn process_lro(&mut self) {
        let mut queue = std::mem::take(&mut self.lro);
        let mut current: Option<u32> = None;
        queue.drain_sorted(|hash, pkt| {
            if current != Some(hash) {
                if current.is_some() {
                    self.flush_all(FlushReason::GroupEnd);
                }
                current = Some(hash);
            }
            let mut pkt = pkt;
            self.gro_one(&mut pkt, Some(hash));
        });
        self.lro = queue;
        self.counters.lro_batches += 1;
        self.flush_all(FlushReason::BatchEnd);
    }

    fn flush_all(&mut self, reason: FlushReason) {
        let (out, counters) = (&mut self.out, &mut self.counters);
        self.table.drain_all(|h| finish(h, reason, out, counters));
        self.min_age = u64::MAX;
    }

    #[inline]
    fn deliver(&mut self, pkt: Packet) {
        self.counters.packets_out += 1;
        self.out.push(pkt);
    }

    #[inline]
    fn bypass(&mut self, pkt: &mut Packet, reason: BypassReason) {
        self.counters.bypass(reason);
        if reason == BypassReason::BadChecksum {
            self.counters.bad_checksums += 1;
        }
        self.deliver(std::mem::take(pkt));
    }

    #[inline(never)]
    fn flush_at(&mut self, at: Position, reason: FlushReason) {
        let (out, counters) = (&mut self.out, &mut self.counters);
        self.table.remove_with(at, |held| finish(held, reason, out, counters));
    }

    /// One packet through the GRO layers.
    ///
    /// `pkt` is consumed: moved out (held or delivered) or emptied (merged);
    /// the caller drops what is left.
    ///
    /// The plain fast path is inlined into the caller (the burst loop) and
    /// the full path is a call: a merged segment, the common case, then pays
    /// no call and none of the register saves the full path's size needs
    /// (18 instructions per packet when both were one function).
    #[inline(always)]
    fn gro_one(&mut self, pkt: &mut Packet, hash: Option<u32>) {
        let any = hint::packet_hint(pkt.linear(), self.cfg.medium == Medium::Ip);
        let hint = match any {
            Some((k, false)) if self.fast_paths_on().0 => Some(k.hint()),
            _ => None,
        };
        if let Some(h) = hint
            && self.plain_fast(pkt, h, hash)
        {
            return;
        }
        // A datagram (its hint a tunnel hint) to a configured tunnel port
        // may join its inner flow's aggregate without the parse
        // (`tunnel_fast.rs`).
        if let Some((k, true)) = any
            && self.fast_paths_on().1
            && !self.cfg.tunnels.is_empty()
            && self.tunnel_fast(pkt, k.hint(), hash)
        {
            return;
        }
        self.gro_full(pkt, hash, hint);
    }

    /// Whether the plain and the tunnel fast paths are taken: both always,
    /// a constant outside tests (no test of a flag per packet in the burst
    /// loop); tests turn either off to compare it with the full path.
    #[inline(always)]
    fn fast_paths_on(&self) -> (bool, bool) {
        #[cfg(test)]
        return (self.plain_fast, self.tunnel_fast);
        #[cfg(not(test))]
        (true, true)
    }

    /// [`Gro::gro_one`] after the fast paths left the packet (`hint`: its
    /// plain hint, noted for the next packet of its flow).
    #[inline(never)]
    fn gro_full(&mut self, pkt: &mut Packet, hash: Option<u32>, hint: Option<hint::Hint>) {
        // The first segment of a flow whose last aggregate was delivered
        // may start the next one without the parse (`fast.rs`).
        if let Some(h) = hint
            && self.plain_start(pkt, h, hash)
        {
            return;
        }
        let n = match self.prepare(pkt, hash) {
            Ok(n) => n,
            Err(NotPlain::Bypass(reason)) => return self.bypass(pkt, reason),
            Err(NotPlain::Tunnel(at)) => return self.tunnel_one(pkt, at, hash),
        };
        let b = self.table.bucket_of(n.hash);
        let found = {
            let ext: &[u8] = if n.key.ext_len() != 0 { &pkt.linear()[n.l3 + 40..n.l4] } else { &[] };
            self.table.find(b, &n.key, ext)
        };
        if n.tcp {
            self.tcp_receive(pkt, &n, b, found, &Plain);
            self.note_plain_hint(hint, b);
        } else {
            self.udp_receive(pkt, &n, b, found, &Plain);
        }
    }

    /// [`Gro::gro_one`] for a datagram to a tunnel port whose outer headers
    /// passed the IP layer's checks (`at`: where they are, and whether they
    /// flush-mark it), coalesced on its inner flow (offload-rules 2.6).
    ///
    /// Kept apart from the plain path, which has no tunnel state nor check
    /// of its own: a tunnel aggregate's inner key carries a tunnel mark, so a
    /// plain packet never finds one. The plain path hands over only the
    /// outer offsets, in one register ([`tunnel::OuterAt`]): a reference to
    /// its parse (even a copy passed by value) keeps the parse in memory
    /// instead of registers, 30-odd instructions per plain packet, and a
    /// second parse of the outer headers here cost more than rebuilding it
    /// from the offsets (docs/benchmarks.md, "The tunnel fast path").
    ///
    /// A TCP segment that joins its flow's aggregate took the fast path
    /// ([`Gro::tunnel_fast`]) before the parse; every other packet, and one
    /// the fast path left, takes this full one.
    #[cold]
    #[inline(never)]
    fn tunnel_one(&mut self, pkt: &mut Packet, at: tunnel::OuterAt, hash: Option<u32>) {
        let h = at.headers(pkt.linear());
        // The fast path's hint of this packet, read before the packet is
        // moved away (the fast path itself was tried before the parse).
        let hint = hint::tunnel_hint(pkt.linear(), self.cfg.medium == Medium::Ip);
        let l3c = ip::L3Checks { flush_mark: at.flush_mark };
        let (n, outer) = match self.prepare_tunnel(pkt, &h, l3c, at.kind, hash) {
            Ok(n) => n,
            Err(reason) => return self.bypass(pkt, reason),
        };
        let b = self.table.bucket_of(n.hash);
        let found = {
            let lin = pkt.linear();
            let ext: &[u8] = if n.key.ext_len() != 0 { &lin[n.l3 + 40..n.l4] } else { &[] };
            self.table.find_tunnel(b, &n.key, ext, &outer.t, &outer.id, lin)
        };
        if n.tcp {
            self.tcp_receive(pkt, &n, b, found, &outer);
        } else {
            self.udp_receive(pkt, &n, b, found, &outer);
        }
        // The packet started or joined the newest aggregate of its bucket,
        // unless it was delivered (then the hint is wrong, and checked).
        if let Some(slot) = self.table.newest(b) {
            if let Some(hint) = hint {
                self.tunnel_cache.note(hint, slot);
            }
            if let Some(t) = self.table.slot(slot).and_then(|p| p.tunnel.as_ref()) {
                self.templates.ensure(t.shape);
            }
        }
    }

    /// Entry checks (offload-rules 1.1, 1.2, 1.3 entry, 2.1): parse once,
    /// reject what GRO cannot take, trim padding, verify the L4 checksum.
    #[inline]
    fn prepare(&mut self, pkt: &mut Packet, hash: Option<u32>) -> Result<Incoming, NotPlain> {
        let frame = pkt.linear();
        let h = GroHeaders::parse(frame, self.cfg.medium).map_err(|e| match e {
            NotCandidate::Malformed => BypassReason::Malformed,
            NotCandidate::NotIp => BypassReason::NotIp,
            NotCandidate::NotTcpUdp => BypassReason::NotTcpUdp,
            NotCandidate::TooManyTags => BypassReason::Vlan,
        })?;
        if h.tags != 0 && !self.cfg.vlan {
            return Err(BypassReason::Vlan.into());
        }
        let l3c = ip::check_l3(frame, &h)?;
        let (v6, tcp) = (h.v6, h.tcp);
        if !tcp {
            if !self.cfg.tunnels.is_empty()
                && let Some(kind) = self.cfg.tunnels.lookup(be16(frame, h.l4 + 2))
            {
                return Err(match tunnel::OuterAt::new(&h, kind, l3c.flush_mark) {
                    Some(at) => NotPlain::Tunnel(at),
                    None => NotPlain::Bypass(BypassReason::Malformed),
                });
            }
            if self.cfg.udp == UdpGroMode::Off {
                return Err(BypassReason::UdpOff.into());
            }
        }
        // Built before the padding is trimmed: it reads only headers.
        let key = FlowKey::build(frame, &h);
        let mut padded_strict = false;
        if h.l2_padding > 0 {
            if self.cfg.trim_padding {
                trim_padding(pkt, &h);
            } else {
                padded_strict = true;
            }
        }
        let (segs, gso_size) = if pkt.meta.is_gso() {
            let t = pkt.meta.gso_type;
            let want = if v6 { GsoType::TCPV6 } else { GsoType::TCPV4 };
            if !tcp || !t.contains(want) || t.contains(GsoType::DODGY) {
                return Err(BypassReason::Gso.into());
            }
            let size = pkt.meta.gso_size;
            let segs = if pkt.meta.gso_segs != 0 {
                pkt.meta.gso_segs as u32
            } else {
                h.payload_len.div_ceil(size as usize) as u32
            };
            (segs, size)
        } else {
            (1, 0)
        };
        let flush_mark = l3c.flush_mark || padded_strict;
        // Don't verify a checksum if the packet is going to be flushed anyway
        // (tcp4_gro_receive / udp4_gro_receive).
        if !flush_mark {
            self.verify_l4(pkt, &h)?;
        }
        let key_hash = key.cheap_hash();
        let hash = hash.or(pkt.meta.rss_hash).unwrap_or(key_hash);
        Ok(Incoming {
            key,
            key_hash,
            hash,
            tcp,
            v6,
            l3: h.l3,
            l4: h.l4,
            payload: h.payload,
            l3_len: h.l3_len,
            payload_len: h.payload_len,
            flush_mark,
            padded_strict,
            segs,
            gso_size,
        })
    }

    /// Entry checks of a datagram to a tunnel port (offload-rules 2.6): the
    /// outer headers were accepted by the IP layer (`l3c`); parse the tunnel
    /// and inner headers, apply the inner IP layer's early rejection, verify
    /// the outer UDP checksum (unless zero) and the inner one, as
    /// `udp4/6_gro_receive` + `udp_gro_receive` + `vxlan/geneve_gro_receive`
    /// + `eth_gro_receive` + the inner `inet/ipv6_gro_receive` and L4 entry.
    ///
    /// Returns the inner packet and what its outer headers add.
    #[inline]
    fn prepare_tunnel(
        &mut self,
        pkt: &mut Packet,
        h: &GroHeaders,
        l3c: ip::L3Checks,
        kind: TunnelKind,
        hash: Option<u32>,
    ) -> Result<(Incoming, tunnel::Outer), BypassReason> {
        if pkt.meta.is_gso() {
            return Err(BypassReason::Gso);
        }
        let frame = pkt.linear();
        let t = tunnel::parse(frame, h, kind)?;
        let ih = t.inner;
        let inner_l3c = ip::check_l3_on::<true>(frame, &ih)?;
        if !ih.tcp && self.cfg.tunnels.lookup(be16(frame, ih.l4 + 2)).is_some() {
            // A tunnel in the tunnel: udp_gro_receive refuses a second encap level.
            return Err(BypassReason::Tunnel);
        }
        let key = tunnel::inner_key(frame, &t);
        let (Ok(outer_l3), Ok(outer_l4), Ok(inner_mac)) =
            (u16::try_from(h.l3), u16::try_from(h.l4), u16::try_from(t.inner_mac))
        else {
            return Err(BypassReason::Malformed);
        };
        let tin = tunnel::TunnelIn { kind, outer_v6: h.v6, outer_l3, outer_l4, inner_mac };
        let id = tunnel::tunnel_id(frame, h);
        let outer_check = be16(frame, h.l4 + 6);
        let mut padded_strict = false;
        if h.l2_padding > 0 {
            if self.cfg.trim_padding {
                trim_padding(pkt, h);
            } else {
                padded_strict = true;
            }
        }
        let outer_flush = l3c.flush_mark || padded_strict;
        if outer_flush && outer_check != 0 && pkt.meta.csum == ChecksumState::None {
            // The outer checksum was not verified (the packet is flush-marked)
            // and nothing vouches for it: udp_gro_receive does not enter the tunnel.
            return Err(if padded_strict { BypassReason::Padding } else { BypassReason::Malformed });
        }
        // Inner padding (the inner IP packet shorter than the outer UDP
        // payload) marks the packet as the outer one would (inet_gro_receive).
        let inner_padded = ih.l2_padding > 0;
        let inner_flush = inner_l3c.flush_mark || inner_padded;
        if !tunnel::vouched(pkt.meta.csum) {
            self.verify_tunnel(pkt, h, &ih, outer_flush, outer_flush || inner_flush)?;
        }
        if self.cfg.tcp_fraglist && ih.tcp || self.cfg.udp == UdpGroMode::Fraglist && !ih.tcp {
            return Err(BypassReason::Mode);
        }
        if !ih.tcp && self.cfg.udp == UdpGroMode::Off {
            return Err(BypassReason::UdpOff);
        }
        let identity_hash = tunnel::identity_hash(&key, &id);
        let hash = hash.or(pkt.meta.rss_hash).unwrap_or(identity_hash);
        let outer = tunnel::Outer { t: tin, id, identity_hash, agg_len: ih.l3 - h.l3 + ih.l3_len };
        let n = Incoming {
            key,
            key_hash: 0,
            hash,
            tcp: ih.tcp,
            v6: ih.v6,
            l3: ih.l3,
            l4: ih.l4,
            payload: ih.payload,
            l3_len: ih.l3_len,
            payload_len: ih.payload_len,
            flush_mark: outer_flush || inner_flush,
            padded_strict: padded_strict || inner_padded,
            segs: 1,
            gso_size: 0,
        };
        Ok((n, outer))
    }

    /// Checksums of a tunnel packet (offload-rules 2.6, 0.3): the outer UDP
    /// checksum is verified unless zero, then the inner TCP/UDP one from the
    /// sum the outer one implies (no second pass over the payload) or, with
    /// a zero outer checksum, in software. Each level counts as verified,
    /// a zero outer checksum included (`skb_gro_incr_csum_unnecessary`): a
    /// packet arriving `None` leaves `Unnecessary { level: 1 }` (level 0 if
    /// only the outer one was reached). `Unnecessary { level: 0 }` vouches
    /// for the outer checksum only, and becomes level 1 once the inner one
    /// is checked, from the sum a non-zero outer checksum implies (as Linux
    /// converts it, `skb_gro_checksum_try_convert`), else in software;
    /// `Partial` and higher levels are trusted; `Complete` is
    /// checked from its sum. Nothing is verified at or after a flush-marked
    /// level (`skip_outer`, `skip_inner`).
    fn verify_tunnel(
        &mut self,
        pkt: &mut Packet,
        h: &GroHeaders,
        ih: &GroHeaders,
        skip_outer: bool,
        skip_inner: bool,
    ) -> Result<(), BypassReason> {
        let lin = pkt.linear();
        let outer_check = be16(lin, h.l4 + 6);
        let inner_proto = if ih.tcp { 6 } else { 17 };
        let inner_zero_udp = !ih.tcp && be16(lin, ih.l4 + 6) == 0;
        // Summed only when a checksum is actually checked: a packet the NIC
        // vouched for (level 1, the common case) needs neither.
        let inner_pseudo = || ip::pseudo_sum(lin, ih.l3, ih.v6, inner_proto, ih.l4_len());
        let outer_pseudo = || ip::pseudo_sum(lin, h.l3, h.v6, 17, h.l4_len());
        // The inner L4 sum from the outer L4 sum: minus the bytes between the
        // two L4 headers (an even distance for every header shape here, but
        // an odd one would shift the bytes: ones_sum_at).
        let inner_from_outer = |outer_l4_sum: u16| {
            let gap = ih.l4 - h.l4;
            let rest = csum::ones_sub(outer_l4_sum, csum::ones_sum(&lin[h.l4..ih.l4]));
            if gap % 2 == 1 { rest.swap_bytes() } else { rest }
        };
        let ok = |pseudo: u16, sum: u16| csum::ones_add(pseudo, sum) == 0xFFFF;
        match pkt.meta.csum {
            ChecksumState::Partial { .. } => Ok(()),
            ChecksumState::Unnecessary { level } => {
                if level >= 1 || skip_inner || inner_zero_udp {
                    return Ok(());
                }
                // Level 0 vouches for a non-zero outer checksum: the UDP
                // segment sums to the complement of the outer pseudo-header
                // (`skb_gro_checksum_try_convert`), and the inner checksum is
                // checked from that; only if that fails is it summed
                // (`__skb_gro_checksum_validate_complete`).
                if outer_check != 0 && ok(inner_pseudo(), inner_from_outer(!outer_pseudo())) {
                    pkt.meta.csum = ChecksumState::Unnecessary { level: 1 };
                    return Ok(());
                }
                self.counters.checksums_verified += 1;
                if !ok(inner_pseudo(), csum::ones_sum(&lin[ih.l4..ih.l3_end()])) {
                    return Err(BypassReason::BadChecksum);
                }
                pkt.meta.csum = ChecksumState::Unnecessary { level: 1 };
                Ok(())
            }
            ChecksumState::Complete { sum } => {
                if skip_outer {
                    return Ok(());
                }
                let outer_sum = csum::ones_sub(sum, csum::ones_sum(&lin[h.l3..h.l4]));
                if outer_check != 0 && !ok(outer_pseudo(), outer_sum) {
                    return Err(BypassReason::BadChecksum);
                }
                if skip_inner || inner_zero_udp {
                    return Ok(());
                }
                if !ok(inner_pseudo(), inner_from_outer(outer_sum)) {
                    return Err(BypassReason::BadChecksum);
                }
                Ok(())
            }
            ChecksumState::None => {
                if skip_outer {
                    return Ok(());
                }
                let outer_sum = if outer_check != 0 {
                    self.counters.checksums_verified += 1;
                    let s = csum::ones_sum(&lin[h.l4..h.l3_end()]);
                    if !ok(outer_pseudo(), s) {
                        return Err(BypassReason::BadChecksum);
                    }
                    Some(s)
                } else {
                    None
                };
                if skip_inner {
                    pkt.meta.csum = ChecksumState::Unnecessary { level: 0 };
                    return Ok(());
                }
                let inner_ok = inner_zero_udp
                    || match outer_sum {
                        Some(s) => ok(inner_pseudo(), inner_from_outer(s)),
                        None => {
                            self.counters.checksums_verified += 1;
                            ok(inner_pseudo(), csum::ones_sum(&lin[ih.l4..ih.l3_end()]))
                        }
                    };
                let level = if inner_ok { 1 } else { 0 };
                pkt.meta.csum = ChecksumState::Unnecessary { level };
                if inner_ok { Ok(()) } else { Err(BypassReason::BadChecksum) }
            }
        }
    }

    /// L4 checksum validation (offload-rules 0.3, 1.1 checksum setup, 1.3 entry
    /// 1, 2.1): UNNECESSARY and PARTIAL are trusted; COMPLETE is checked from
    /// its sum; NONE is summed in software and becomes UNNECESSARY. A zero UDP
    /// checksum is left to the UDP rules. Always inlined: it is on every
    /// packet's path, and the compiler otherwise calls it (docs/benchmarks.md,
    /// "Instructions per packet").
    #[inline(always)]
    fn verify_l4(&mut self, pkt: &mut Packet, h: &GroHeaders) -> Result<(), BypassReason> {
        let (v6, tcp) = (h.v6, h.tcp);
        let l4_sum = match pkt.meta.csum {
            ChecksumState::Unnecessary { .. } | ChecksumState::Partial { .. } => return Ok(()),
            ChecksumState::Complete { sum } => {
                let lin = pkt.linear();
                csum::ones_sub(sum, csum::ones_sum(&lin[h.l3..h.l4]))
            }
            ChecksumState::None => {
                let lin = pkt.linear();
                let l4 = &lin[h.l4..h.l3_end()];
                if !tcp && l4[6] == 0 && l4[7] == 0 {
                    return Ok(());
                }
                self.counters.checksums_verified += 1;
                csum::ones_sum(l4)
            }
        };
        let lin = pkt.linear();
        let pseudo = ip::pseudo_sum(lin, h.l3, v6, if tcp { 6 } else { 17 }, h.l4_len());
        if csum::ones_add(pseudo, l4_sum) != 0xFFFF {
            return Err(BypassReason::BadChecksum);
        }
        if pkt.meta.csum == ChecksumState::None {
            pkt.meta.csum = ChecksumState::Unnecessary { level: 0 };
        }
        Ok(())
    }

    /// The TCP outcome matrix (offload-rules 1.3).
    #[inline]
    fn tcp_receive(&mut self, pkt: &mut Packet, n: &Incoming, b: usize, found: Option<Position>, e: &impl EncapStart) {
        let frame = pkt.linear();
        let w = tcp::word3(&frame[n.l4..]);
        if let Some(at) = found {
            match tcp::can_merge(self.table.get(at), frame, pkt.meta.csum, n, &self.cfg, e) {
                Ok(latches) => return self.tcp_merge(pkt, n, at, latches, w, e),
                Err(reason) => self.flush_at(at, reason),
            }
        }
        if n.flush_mark {
            let reason = if n.padded_strict { BypassReason::Padding } else { BypassReason::Malformed };
            return self.bypass(pkt, reason);
        }
        if n.payload_len == 0 {
            return self.bypass(pkt, BypassReason::ZeroPayload);
        }
        if w & W3_CLOSING != 0 {
            return self.bypass(pkt, BypassReason::TcpFlags);
        }
        self.hold(pkt, n, b, e);
    }

    #[inline(always)]
    fn tcp_merge(
        &mut self,
        pkt: &mut Packet,
        n: &Incoming,
        at: Position,
        latches: (bool, bool),
        w: u32,
        e: &impl Encap,
    ) {
        let p = self.table.get_mut(at);
        p.fixed_id |= latches.0;
        e.merged(p, latches.1);
        p.count += n.segs;
        p.l3_len += n.payload_len;
        p.next_seq = p.next_seq.wrapping_add(n.payload_len as u32);
        p.merged = true;
        let fin_psh = ((w & (W3_FIN | W3_PSH)) >> 16) as u8;
        if fin_psh != 0 {
            let at = p.l4 + 13;
            p.pkt.linear_mut()[at] |= fin_psh;
        }
        let mss = p.mss as usize;
        attach(&mut p.pkt, pkt, n.payload, p.fraglist);
        self.counters.merged += 1;
        let short =
            if n.gso_size != 0 { n.payload_len != n.segs as usize * n.gso_size as usize } else { n.payload_len < mss };
        if fin_psh != 0 {
            self.flush_at(at, FlushReason::Flags);
        } else if short {
            self.flush_at(at, FlushReason::SegmentSize);
        }
    }

    /// The UDP rules (offload-rules 2.3). Out of line: it keeps the TCP path
    /// (the common case) compact.
    #[inline(never)]
    fn udp_receive(&mut self, pkt: &mut Packet, n: &Incoming, b: usize, found: Option<Position>, e: &impl EncapStart) {
        if let Err(reason) = udp::check_entry(pkt, n) {
            return self.bypass(pkt, reason);
        }
        if let Some(at) = found {
            if self.table.get(at).fraglist != (self.cfg.udp == UdpGroMode::Fraglist) {
                self.flush_at(at, FlushReason::Mismatch);
                return self.bypass(pkt, BypassReason::Mode);
            }
            match udp::decide(self.table.get(at), pkt, n, &self.cfg, e) {
                UdpDecision::Merge { latch, outer_latch } => {
                    let ulen = be16(pkt.linear(), n.l4 + 4);
                    let p = self.table.get_mut(at);
                    p.fixed_id |= latch;
                    e.merged(p, outer_latch);
                    p.count += 1;
                    p.l3_len += n.payload_len;
                    p.merged = true;
                    attach(&mut p.pkt, pkt, n.payload, p.fraglist);
                    let (shorter, full) = (ulen < p.ulen, p.count >= UDP_GRO_CNT_MAX);
                    self.counters.merged += 1;
                    if shorter {
                        self.flush_at(at, FlushReason::SegmentSize);
                    } else if full {
                        self.flush_at(at, FlushReason::SizeLimit);
                    }
                    return;
                }
                UdpDecision::FlushAndHold(reason) => self.flush_at(at, reason),
                UdpDecision::Bypass(reason) => return self.bypass(pkt, reason),
            }
        }
        if n.flush_mark {
            return self.bypass(pkt, BypassReason::Malformed);
        }
        self.hold(pkt, n, b, e);
    }

    /// Holds the packet as a new aggregate; a full bucket first loses its
    /// oldest aggregate (offload-rules 1.1).
    ///
    /// Out of line: inlined into the UDP path it cost UDP 64 flows 17
    /// instructions per packet (`bench instructions --rows gro`).
    #[inline(never)]
    fn hold(&mut self, pkt: &mut Packet, n: &Incoming, b: usize, e: &impl EncapStart) {
        let frame = pkt.linear();
        let l4 = &frame[n.l4..];
        let (next_seq, ulen) =
            if n.tcp { (tcp::seq(l4).wrapping_add(n.payload_len as u32), 0) } else { (0, be16(l4, 4)) };
        let fraglist = if n.tcp { self.cfg.tcp_fraglist } else { self.cfg.udp == UdpGroMode::Fraglist };
        let arrival_ns = pkt.meta.arrival_ns;
        self.note_start(arrival_ns);
        let (out, counters) = (&mut self.out, &mut self.counters);
        let slot = self.table.insert(b, |evicted| finish(evicted, FlushReason::TableFull, out, counters));
        // Every field is written: the slot holds a stale aggregate.
        slot.key = n.key;
        slot.key_hash = n.key_hash;
        slot.tcp = n.tcp;
        slot.v6 = n.v6;
        slot.fraglist = fraglist;
        slot.l3 = n.l3;
        slot.l4 = n.l4;
        slot.payload = n.payload;
        if n.tcp {
            slot.pseudo_addrs = ip::pseudo_sum(frame, n.l3, n.v6, 6, 0);
        }
        slot.begin(frame, n, next_seq, ulen, arrival_ns);
        e.held(slot, frame);
        // A plain TCP aggregate's template, for the plain fast path (a
        // tunnel aggregate has its own, `TunnelHeld::shape`; a fraglist
        // one none: the fast path leaves its packets to the full path).
        // Every TCP aggregate's header copy, which both fast paths compare.
        slot.shape = template::Shape::NONE;
        if n.tcp {
            slot.head.copy_from(frame);
            if slot.tunnel.is_none() && !fraglist {
                slot.shape = template::Shape::plain(slot);
                self.templates.ensure(slot.shape);
            }
        }
        take_into_slot(&mut slot.pkt, pkt);
        self.peak_held = self.peak_held.max(self.table.len());
    }

    /// [`Gro::hold`] of a plain TCP segment `n` (one wire segment, not
    /// fraglist) in the free slot `slot` of bucket `b`, which holds the
    /// identity, layout, shape and header copy of its flow already (the
    /// plain fast path matched the segment with them): only what a new
    /// first packet changes is written. Returns `false`, nothing changed,
    /// if the slot is not free.
    #[inline(always)]
    fn hold_in_own_slot(&mut self, pkt: &mut Packet, n: &Incoming, b: usize, slot: u32) -> bool {
        let (out, counters) = (&mut self.out, &mut self.counters);
        let Some(held) =
            self.table.insert_free(b, slot, |evicted| finish(evicted, FlushReason::TableFull, out, counters))
        else {
            return false;
        };
        debug_assert!(held.tcp && !held.fraglist && held.tunnel.is_none() && (held.l3, held.l4) == (n.l3, n.l4));
        let frame = pkt.linear();
        let next_seq = tcp::seq(&frame[n.l4..]).wrapping_add(n.payload_len as u32);
        let arrival_ns = pkt.meta.arrival_ns;
        held.begin(frame, n, next_seq, 0, arrival_ns);
        take_into_slot(&mut held.pkt, pkt);
        self.note_start(arrival_ns);
        self.peak_held = self.peak_held.max(self.table.len());
        true
    }

    /// Counts a new aggregate whose first packet arrived at `arrival_ns`
    /// (the age flush's lower bound follows it).
    #[inline(always)]
    fn note_start(&mut self, arrival_ns: Option<u64>) {
        if let Some(a) = arrival_ns {
            self.min_age = self.min_age.min(a);
        }
        self.counters.held += 1;
    }
}

/// Moves `pkt` into a slot's packet `slot`, the empty one `finish` left
/// there, leaving `pkt` with no bytes and no buffers for the caller to
/// drop ([`Packet::move_from`]).
#[inline(always)]
fn take_into_slot(slot: &mut Packet, pkt: &mut Packet) {
    debug_assert_eq!(slot.total_len(), 0, "a slot keeps an empty packet");
    slot.move_from(pkt);
}

/// Trims Ethernet padding beyond the IP packet (offload-rules 9.1.1),
/// adjusting a COMPLETE sum for the removed bytes.
fn trim_padding(pkt: &mut Packet, h: &GroHeaders) {
    let end = h.l3_end();
    if let ChecksumState::Complete { sum } = pkt.meta.csum {
        let pad = csum::ones_sum_at(&pkt.linear()[end..], h.l3_len);
        pkt.meta.csum = ChecksumState::Complete { sum: csum::ones_sub(sum, pad) };
    }
    // `end` is inside the frame (the parse checked it), so this cannot fail.
    let _ = pkt.trim(end);
}

/// Appends the payload of `n` (its first `payload` bytes are headers) to the
/// aggregate `p` without copying, as Linux's `skb_gro_receive` does: as a
/// payload segment of `p` while it has a free slot; then of the last packet
/// on its frag list; when that one is full too, `n` itself (headers pulled)
/// is chained on the frag list and collects the following payloads. In
/// fraglist mode every packet is chained, intact behind its pulled headers.
///
/// The usual case (the packet that collects payloads, the aggregate or the
/// last one on its frag list, has a segment list with a free slot) is
/// inlined into the merge; the rest is a call. (Of a 45-segment aggregate,
/// 28 merges go to the frag list.)
#[inline(always)]
fn attach(p: &mut Packet, n: &mut Packet, payload: usize, fraglist: bool) {
    if !fraglist {
        let last = if p.frag_list().is_empty() {
            &mut *p
        } else {
            let frags = p.frag_list_mut();
            let i = frags.len() - 1;
            &mut frags[i]
        };
        // A packet just chained has its list reserved, empty: it takes
        // this way too (the aggregate's own first merge, with no list yet,
        // takes one from the pool in `attach_slow`).
        if last.has_segment_list() && last.append_payload_from(n, payload) {
            return;
        }
    }
    attach_slow(p, n, payload, fraglist);
}

/// [`attach`] when the packet that collects payloads has no segment list
/// yet or no free slot in it, or for a fraglist aggregate.
#[inline(never)]
fn attach_slow(p: &mut Packet, n: &mut Packet, payload: usize, fraglist: bool) {
    use crate::packet::MAX_SEGMENTS;
    if !fraglist {
        let appended = if p.frag_list().is_empty() {
            if p.segments().is_empty() {
                p.reserve_segments(MAX_SEGMENTS);
            }
            p.append_payload_from(n, payload)
        } else {
            let frags = p.frag_list_mut();
            frags[frags.len() - 1].append_payload_from(n, payload)
        };
        if !appended {
            chain(p, std::mem::take(n), payload, false);
        }
    } else {
        chain(p, std::mem::take(n), payload, true);
    }
}

/// The slow half of [`attach`]: chains `n` on `p`'s frag list, its headers
/// pulled.
#[cold]
#[inline(never)]
fn chain(p: &mut Packet, mut n: Packet, payload: usize, fraglist: bool) {
    use crate::packet::MAX_SEGMENTS;
    if !fraglist {
        n.meta = OffloadMeta::default();
        n.reserve_segments(MAX_SEGMENTS);
        if p.frag_list().is_empty() {
            p.reserve_frag_list(crate::packet::pool::FRAG_LIST_ROOM);
        }
    } else {
        if let ChecksumState::Partial { .. } = n.meta.csum {
            // A pending checksum would start inside the pulled headers; the
            // member was produced locally and is trusted (offload-rules 0.3).
            n.meta.csum = ChecksumState::Unnecessary { level: 0 };
        }
        if p.frag_list().is_empty() {
            p.reserve_frag_list(16);
        }
    }
    // The headers are in the linear area (they were parsed there).
    let _ = n.pull(payload);
    p.push_frag(n);
}

/// Completes an aggregate (if anything was merged) in its table slot and
/// delivers its packet, leaving an empty one in the slot.
#[inline]
fn finish(held: &mut Held, reason: FlushReason, out: &mut Vec<Packet>, counters: &mut GroCounters) {
    if held.tunnel.is_some() {
        return finish_tunnel(held, reason, out, counters);
    }
    counters.flush(reason);
    if held.merged {
        if held.tcp {
            tcp::complete(held);
        } else {
            udp::complete(held);
        }
        counters.superpackets += 1;
        counters.superpacket_segments += held.count as u64;
    }
    counters.packets_out += 1;
    out.push(std::mem::take(&mut held.pkt));
}

/// [`finish`] for a tunnel aggregate (offload-rules 2.6), leaving the slot's
/// tunnel state empty for the next aggregate.
#[cold]
#[inline(never)]
fn finish_tunnel(held: &mut Held, reason: FlushReason, out: &mut Vec<Packet>, counters: &mut GroCounters) {
    counters.flush(reason);
    if held.merged {
        tunnel::complete(held);
        counters.superpackets += 1;
        counters.superpacket_segments += held.count as u64;
    }
    held.tunnel = None;
    counters.packets_out += 1;
    out.push(std::mem::take(&mut held.pkt));
}

/// Copies a delivered packet into `out` as one frame (linear area, payload
/// segments, then the frag list) and returns the metadata a capture file
/// records for it. Ordinary packets and segment-mode superpackets are copied
/// as they are. A fraglist aggregate is written as the equivalent segment-mode
/// superpacket: its L4 checksum field becomes the pseudo-header sum
/// (CHECKSUM_PARTIAL) and FRAGLIST is dropped from the type, so that the frame
/// validates; its datagrams are unchanged. `medium` is how the packet starts
/// (the GRO instance's [`GroConfig::medium`]).
pub fn capture_bytes(pkt: &Packet, medium: Medium, out: &mut Vec<u8>) -> OffloadMeta {
    out.clear();
    out.reserve(pkt.total_len());
    for c in pkt.all_chunks() {
        out.extend_from_slice(c);
    }
    let mut meta = pkt.meta;
    if meta.gso_type.contains(GsoType::FRAGLIST)
        && let Ok(h) = medium.parse(out)
        && let Some(pseudo) = crate::validate::l4_pseudo_header_sum(out, &h)
        && let Some(offset) = h.l4.csum_offset()
    {
        let at = h.l4_offset + offset as usize;
        out[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
        meta.gso_type = meta.gso_type.without(GsoType::FRAGLIST);
        meta.csum = ChecksumState::Partial { start: h.l4_offset as u16, offset };
    }
    meta
}
