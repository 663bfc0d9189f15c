//! Bounded state of the device graph and how full it is (issue 10): every
//! table that grows with traffic has a limit with a documented default, and
//! reports its size, peak and limit ([`TableUsage`]) for `superpacket stats`.
//!
//! | table | limit (default) | when full |
//! |---|---|---|
//! | `neighbours` (router, ARP/NDP) | [`super::router::MAX_NEIGHBOURS`] (1024) | unsolicited neighbours not learned (`refused`) |
//! | `neighbour-queue` (packets awaiting ARP/NDP) | [`super::router::MAX_PENDING`] (64) | drop `neighbour-queue-full`; a neighbour unanswered after [`super::router::SOLICIT_PROBES`] (3) solicitations 1 s apart is given up (`failed`), its packets dropped as `neighbour-unresolved` |
//! | `conntrack` (NAT connections) | `[conntrack] max_connections` (65536) | expired ones reclaimed, else drop `conntrack-full` |
//! | `reasm-bytes` / `reasm-queues` (IPv4 defragmentation before NAT) | 4 MiB ([`superpacket::offload::frag::DEFAULT_HIGH_THRESH`]) / 16384 queues, 30 s lifetime | drops `reasm-mem-limit` / `reasm-queue-limit` |
//! | `gro:<port>` (GRO flow table of a port) | 8 buckets x 8 ([`superpacket::offload::gro::GroConfig`]) | oldest aggregate of the bucket flushed (`evicted`) |
//!
//! Sizes are in entries, except `reasm-bytes` (bytes charged: truesize of
//! the held fragments plus queue descriptors). Reassembly memory admits a
//! fragment while at or below the limit (Linux's rule), so it can exceed the
//! limit by at most one fragment's truesize.

use super::graph::DeviceId;
use serde::Serialize;
use superpacket::offload::frag::{
    Clock, DatagramInfo, DropReason, Family, FragmentError, FragmentRequest, Fragmenter, ManualClock, ReasmConfig,
    Reassembler, Scope, Verdict,
};
use superpacket::packet::Packet;

/// How full one bounded table is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TableUsage {
    /// Table name (see the module documentation).
    pub name: String,
    /// Entries (or bytes) in use now.
    pub size: u64,
    /// Highest size seen since the start.
    pub peak: u64,
    /// Configured limit.
    pub limit: u64,
    /// Refusals, evictions and expiries, by reason.
    pub events: Vec<(String, u64)>,
    /// One table every worker uses (NAT's connections, the neighbours
    /// when shared): the engine's totals take its size, peak and limit
    /// once rather than summing the workers' reports of it.
    pub shared: bool,
}

impl TableUsage {
    /// A usage record without events.
    pub fn new(name: &str, size: usize, peak: usize, limit: usize) -> TableUsage {
        TableUsage {
            name: name.to_string(),
            size: size as u64,
            peak: peak as u64,
            limit: limit as u64,
            events: vec![],
            shared: false,
        }
    }

    /// Marks the table as shared by the workers (see [`TableUsage::shared`]).
    pub fn shared(mut self, shared: bool) -> TableUsage {
        self.shared = shared;
        self
    }

    /// Adds an event counter.
    pub fn event(mut self, reason: &str, n: u64) -> TableUsage {
        self.events.push((reason.to_string(), n));
        self
    }
}

/// Conntrack defragmentation (Linux's `nf_defrag_ipv4`): with NAT rules,
/// IPv4 fragments are reassembled before the connection lookup (only a whole
/// datagram has ports) and the translated datagram is fragmented again as it
/// came in ([`DatagramInfo::max_frag_size`]). Memory and queues are bounded
/// by [`ReasmConfig`]'s defaults (4 MiB, 16384 queues, 30 s).
#[derive(Debug)]
pub struct Defrag {
    reasm: Reassembler<ManualClock>,
    clock: ManualClock,
    frag: Fragmenter,
    peak_bytes: usize,
    peak_queues: usize,
    /// Held fragments lost with their queue (expiry, overlap, re-init):
    /// never delivered, counted here.
    discarded: u64,
    scratch: Vec<u8>,
}

impl Default for Defrag {
    fn default() -> Self {
        Defrag::new(Defrag::default_config())
    }
}

/// The drop reason of a refused fragment.
fn reason(r: &DropReason) -> &'static str {
    match r {
        DropReason::MemoryLimit => "reasm-mem-limit",
        DropReason::QueueLimit => "reasm-queue-limit",
        DropReason::Duplicate => "reasm-duplicate",
        DropReason::Overlap => "reasm-overlap",
        DropReason::Oversize => "reasm-oversize",
        DropReason::BadHeaderChecksum => "bad-ipv4-checksum",
        DropReason::EcnMismatch => "reasm-ecn-mismatch",
        DropReason::Malformed(_) => "reasm-malformed",
        _ => "reasm-bad-length",
    }
}

impl Defrag {
    /// The router's configuration: Linux's limits (4 MiB, 16384 queues, 30 s
    /// for IPv4), forwarding delivery (the fragment geometry is kept).
    pub fn default_config() -> ReasmConfig {
        ReasmConfig { delivery: superpacket::offload::frag::Delivery::Forward, ..ReasmConfig::default() }
    }

    /// A defragmenter with `cfg`.
    pub fn new(cfg: ReasmConfig) -> Defrag {
        let clock = ManualClock::new(0);
        Defrag {
            reasm: Reassembler::with_clock(cfg, clock.clone()),
            clock,
            frag: Fragmenter::new(),
            peak_bytes: 0,
            peak_queues: 0,
            discarded: 0,
            scratch: Vec::new(),
        }
    }

    /// Expires queues older than their lifetime at `now` (ns).
    pub fn expire(&mut self, now: u64) {
        self.clock.set(now);
        if self.reasm.next_deadline().is_some_and(|d| d <= now) {
            let before = self.reasm.held_fragments();
            self.reasm.expire(&mut Vec::new());
            self.discarded += before.saturating_sub(self.reasm.held_fragments()) as u64;
        }
    }

    /// Offers an IPv4 fragment (Ethernet frame) received on `iface` at `now`:
    /// `Ok(None)` when it is held, `Ok(Some(..))` with the whole datagram (one
    /// linear frame) when it completes one, `Err(reason)` when it is dropped.
    ///
    /// # Errors
    /// The drop reason.
    pub fn push(
        &mut self,
        pkt: Packet,
        iface: DeviceId,
        now: u64,
    ) -> Result<Option<(Packet, DatagramInfo)>, &'static str> {
        self.expire(now);
        let before = self.reasm.held_fragments();
        let scope = Scope { port: iface.0 as u32, ..Scope::default() };
        let res = self.reasm.push(pkt, scope);
        let after = self.reasm.held_fragments();
        self.peak_bytes = self.peak_bytes.max(self.reasm.memory(Family::V4));
        self.peak_queues = self.peak_queues.max(self.reasm.queue_count(Family::V4));
        match res {
            Ok(Verdict::Queued) => {
                self.discarded += (before + 1).saturating_sub(after) as u64;
                Ok(None)
            }
            Ok(Verdict::Complete(r)) => {
                let used = (before + 1).saturating_sub(after);
                self.discarded += used.saturating_sub(usize::from(r.info.fragments)) as u64;
                superpacket::offload::frag::flatten(&r.packet, &mut self.scratch);
                Ok(Some((Packet::from_frame(&self.scratch), r.info)))
            }
            Ok(Verdict::Pass(_)) | Ok(Verdict::NotFragment) => Err("reasm-malformed"),
            Err(d) => {
                self.discarded += before.saturating_sub(after) as u64;
                Err(reason(&d.reason))
            }
        }
    }

    /// Fragments a reassembled (and translated) datagram again for a link
    /// of `mtu`, no larger than it arrived in.
    ///
    /// # Errors
    /// `frag-needed` (DF set and too big for the link) or `fragment-failed`.
    pub fn refragment(
        &mut self,
        pkt: Packet,
        mtu: usize,
        info: &DatagramInfo,
        out: &mut Vec<Packet>,
    ) -> Result<(), &'static str> {
        match self.frag.fragment(pkt, &FragmentRequest::forward_reassembled(mtu, info), out) {
            Ok(_) => Ok(()),
            Err(FragmentError::FragmentationNeeded { .. }) => Err("frag-needed"),
            Err(_) => Err("fragment-failed"),
        }
    }

    /// `reasm-bytes` and `reasm-queues`.
    pub fn usage(&self, out: &mut Vec<TableUsage>) {
        let cfg = self.reasm.config();
        let c = self.reasm.counters(Family::V4);
        out.push(
            TableUsage::new("reasm-bytes", self.reasm.memory(Family::V4), self.peak_bytes, cfg.v4.high_thresh)
                .event("mem_limit", c.mem_limit)
                .event("timeouts", c.timeouts)
                .event("fragments_discarded", self.discarded)
                .event("reassembled", c.reassembled),
        );
        out.push(
            TableUsage::new("reasm-queues", self.reasm.queue_count(Family::V4), self.peak_queues, cfg.max_queues)
                .event("queue_limit", c.queue_limit),
        );
    }

    /// The clock's time (ns).
    pub fn now(&self) -> u64 {
        self.clock.now_ns()
    }
}
