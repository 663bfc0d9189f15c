//! IPv4/IPv6 reassembly with fragment coalescing and bounded memory, and
//! fragmentation on output (offload-rules section 5, Appendix A).
//!
//! # Reassembly ([`Reassembler`])
//! One engine for both families, with the kernel's rules, each in one place:
//!
//! | rule | where |
//! |---|---|
//! | queue key: IPv4 (saddr, daddr, 16-bit ID, protocol), IPv6 (saddr, daddr, 32-bit ID), plus the [`Scope`] (port and VLAN stack); one engine per "user" ([`Delivery`]) | [`reasm`] `FragKey` |
//! | ordered runs, DUPLICATE (fragment dropped) vs OVERLAP (datagram discarded) (5.1) | [`queue`] |
//! | last-fragment / beyond-end / zero-length rules, timer from the first fragment, ECN table, memory admission over `truesize` (5.1) | [`reasm`] |
//! | IPv4: offset x 8, non-last rounded down to x 8, `ipfrag_max_dist`, oversize, DF iff the largest fragment had DF (5.2) | [`ipv4`] |
//! | IPv6: atomic fragments pass, incomplete header chain (param problem code 3), end > 65535 and length not x 8 (param problem), jumbogram, fragment header removed (5.3) | [`ipv6`] |
//! | coalescing (local delivery) vs held fragments (forwarding) | [`coalesce`] |
//!
//! Memory: each queue is charged its descriptor, its datagram buffer's
//! capacity (coalescing) or the [`Packet::truesize`] of every held fragment
//! (forwarding). Over `high_thresh` the [`MemoryPolicy`] decides: `DropNew`
//! (Linux today: every new fragment is dropped and counted) or `EvictOldest`
//! (the oldest queues are discarded down to `low_thresh`, as Linux did before
//! 4.17). Memory returns to zero when the traffic stops (completion, timeout,
//! discard).
//!
//! Deliberate differences from Linux, all on error paths: an IPv4 fragment
//! ending beyond 65515 bytes discards its queue at once (Linux waits for
//! completion or timeout; the datagram can never be valid either way); IPv6
//! fragments refused for their own length or offset do not create an empty
//! queue; the queue table is bounded ([`ReasmConfig::max_queues`]) as well as
//! the memory.
//!
//! # Fragmentation ([`Fragmenter`])
//! IPv4 (RFC 791: non-copied options become NOPs in later fragments, as
//! Linux), DF refused with an ICMP "fragmentation needed"; IPv6 with a
//! Fragment header after the unfragmentable part and a per-destination
//! identification, "packet too big" when a router must not fragment. A
//! reassembled datagram carries its geometry ([`DatagramInfo::max_frag_size`])
//! so forwarding re-fragments it as it came in.

pub mod clock;
pub mod coalesce;
pub mod fragment;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod queue;
pub mod reasm;

#[cfg(test)]
mod tests;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use fragment::{FragmentError, FragmentRequest, Fragmenter, FragmenterCounters, Ipv6IdGenerator, build_fragment};
pub use icmp::{IcmpError, IcmpKind};
pub use reasm::Reassembler;

use crate::packet::Packet;
pub use crate::wire::Medium;
use crate::wire::{VlanStack, WireError};

/// IP family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// Who reassembles (the kernel's "user"): decides coalescing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Delivery {
    /// Local delivery (`IP_DEFRAG_LOCAL_DELIVER`, IPv6 reassembly): each
    /// fragment's payload is copied into one datagram buffer as it is placed
    /// and its receive buffer released at once (coalescing).
    #[default]
    Local,
    /// Forwarding / conntrack: fragments are held and chained on the result's
    /// frag list, and the geometry kept for identical re-fragmentation.
    Forward,
}

/// What happens to new fragments above `high_thresh` (offload-rules 5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MemoryPolicy {
    /// Drop every new fragment, existing queues included (Linux since 4.17).
    #[default]
    DropNew,
    /// Discard the oldest queues of the family until memory is at or below
    /// `low_thresh`, then admit the fragment (Linux before 4.17).
    EvictOldest,
}

/// Per-family limits (sysctls `ipfrag_*` / `ip6frag_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyLimits {
    /// Memory above which fragments are refused (bytes of truesize; 0 refuses all).
    pub high_thresh: usize,
    /// Target of [`MemoryPolicy::EvictOldest`] (bounded by `high_thresh`).
    pub low_thresh: usize,
    /// Lifetime of a queue, from its first fragment, in nanoseconds.
    pub timeout_ns: u64,
}

/// Linux default thresholds: 4 MiB high, 3 MiB low.
pub const DEFAULT_HIGH_THRESH: usize = 4 << 20;
/// See [`DEFAULT_HIGH_THRESH`].
pub const DEFAULT_LOW_THRESH: usize = 3 << 20;
/// `ipfrag_time`: 30 s.
pub const IPV4_DEFAULT_TIMEOUT_NS: u64 = 30_000_000_000;
/// `ip6frag_time`: 60 s.
pub const IPV6_DEFAULT_TIMEOUT_NS: u64 = 60_000_000_000;
/// `ipfrag_max_dist`: 64.
pub const IPV4_DEFAULT_MAX_DIST: u32 = 64;
/// Largest IPv4 total length / IPv6 payload length of a reassembled datagram.
pub const MAX_DATAGRAM: usize = 65535;

impl FamilyLimits {
    /// Linux defaults for `family`.
    pub const fn linux(family: Family) -> Self {
        FamilyLimits {
            high_thresh: DEFAULT_HIGH_THRESH,
            low_thresh: DEFAULT_LOW_THRESH,
            timeout_ns: match family {
                Family::V4 => IPV4_DEFAULT_TIMEOUT_NS,
                Family::V6 => IPV6_DEFAULT_TIMEOUT_NS,
            },
        }
    }
}

/// Reassembler configuration. `Default` is Linux's local delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReasmConfig {
    /// Local delivery (coalescing) or forwarding (geometry kept).
    pub delivery: Delivery,
    /// Behaviour above the high threshold.
    pub policy: MemoryPolicy,
    /// IPv4 limits.
    pub v4: FamilyLimits,
    /// IPv6 limits.
    pub v6: FamilyLimits,
    /// `ipfrag_max_dist` (IPv4 only; 0 disables): a queue that saw more than
    /// this many fragments from its source since its own previous fragment
    /// is re-initialised.
    pub ipv4_max_dist: u32,
    /// Most queues alive at once (both families).
    pub max_queues: usize,
    /// Drop IPv4 fragments whose header checksum is wrong (as `ip_rcv` does).
    pub verify_ipv4_checksum: bool,
    /// How fragments start: Ethernet frames or raw IP packets (TUN). A
    /// reassembled datagram keeps the first fragment's link header, if any.
    pub medium: Medium,
}

impl Default for ReasmConfig {
    fn default() -> Self {
        ReasmConfig {
            delivery: Delivery::Local,
            policy: MemoryPolicy::DropNew,
            v4: FamilyLimits::linux(Family::V4),
            v6: FamilyLimits::linux(Family::V6),
            ipv4_max_dist: IPV4_DEFAULT_MAX_DIST,
            max_queues: 16384,
            verify_ipv4_checksum: true,
            medium: Medium::Ethernet,
        }
    }
}

impl ReasmConfig {
    /// The limits of `family`.
    pub fn limits(&self, family: Family) -> &FamilyLimits {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }
}

/// Where a fragment came from, added to the kernel's key: fragments of
/// different ports or VLAN stacks never share a queue. (This also covers the
/// IPv6 key's ingress ifindex for link-local and multicast destinations.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Scope {
    /// Receiving port id.
    pub port: u32,
    /// VLAN tags of the frame, outermost first.
    pub vlans: VlanStack,
}

/// Counters of one family (Linux `IPSTATS_MIB_REASM*` plus a reason per drop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ReasmCounters {
    /// Fragments offered (`ReasmReqds`).
    pub fragments: u64,
    /// Datagrams reassembled (`ReasmOKs`).
    pub reassembled: u64,
    /// Failures: queues discarded and fragments refused, duplicates excepted (`ReasmFails`).
    pub failed: u64,
    /// Fragments dropped as exact or contained duplicates (queue kept).
    pub duplicates: u64,
    /// Queues discarded for an overlap (`ReasmOverlaps`).
    pub overlaps: u64,
    /// Queues expired (`ReasmTimeout`).
    pub timeouts: u64,
    /// Datagrams that would exceed 65535 bytes.
    pub oversize: u64,
    /// Length rule violations: zero length, inconsistent last fragment, data
    /// beyond the end, IPv6 non-last length not a multiple of 8, IPv6 end > 65535.
    pub bad_length: u64,
    /// IPv6 first fragments without the whole header chain.
    pub incomplete_chain: u64,
    /// Datagrams with incompatible ECN codepoints.
    pub ecn_mismatch: u64,
    /// Fragments with a bad IPv4 header checksum or unparsable fragment headers.
    pub malformed: u64,
    /// Fragments dropped because memory was above `high_thresh`.
    pub mem_limit: u64,
    /// Fragments dropped because the queue table was full.
    pub queue_limit: u64,
    /// Queues discarded by [`MemoryPolicy::EvictOldest`].
    pub evicted: u64,
    /// Queues re-initialised by `ipfrag_max_dist`.
    pub max_dist_reinit: u64,
    /// IPv6 atomic fragments passed through as unfragmented (RFC 6946).
    pub atomic: u64,
    /// ICMP errors offered to the caller.
    pub icmp: u64,
}

impl ReasmCounters {
    /// Field-wise sum.
    pub fn merged(&self, o: &ReasmCounters) -> ReasmCounters {
        ReasmCounters {
            fragments: self.fragments + o.fragments,
            reassembled: self.reassembled + o.reassembled,
            failed: self.failed + o.failed,
            duplicates: self.duplicates + o.duplicates,
            overlaps: self.overlaps + o.overlaps,
            timeouts: self.timeouts + o.timeouts,
            oversize: self.oversize + o.oversize,
            bad_length: self.bad_length + o.bad_length,
            incomplete_chain: self.incomplete_chain + o.incomplete_chain,
            ecn_mismatch: self.ecn_mismatch + o.ecn_mismatch,
            malformed: self.malformed + o.malformed,
            mem_limit: self.mem_limit + o.mem_limit,
            queue_limit: self.queue_limit + o.queue_limit,
            evicted: self.evicted + o.evicted,
            max_dist_reinit: self.max_dist_reinit + o.max_dist_reinit,
            atomic: self.atomic + o.atomic,
            icmp: self.icmp + o.icmp,
        }
    }
}

/// Why a fragment was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// The fragment's headers do not parse.
    Malformed(WireError),
    /// IPv4 header checksum is wrong.
    BadHeaderChecksum,
    /// Entirely inside data already received (only this fragment is dropped).
    Duplicate,
    /// Partially covers data already received (datagram discarded).
    Overlap,
    /// The datagram would exceed 65535 bytes.
    Oversize,
    /// A fragment carrying no data.
    ZeroLength,
    /// A last fragment ending before data seen, or disagreeing with an earlier last fragment.
    BadLastFragment,
    /// Data beyond the end set by the last fragment.
    BeyondEnd,
    /// IPv6 non-last fragment whose length is not a multiple of 8.
    NotMultipleOf8,
    /// IPv6 fragment ending beyond 65535.
    EndBeyondMax,
    /// IPv6 first fragment without the whole header chain (RFC 8200 4.5).
    IncompleteChain,
    /// IPv6 jumbogram (payload length 0) with a Fragment header.
    Jumbogram,
    /// Not-ECT mixed with ECT/CE (RFC 3168 5.3).
    EcnMismatch,
    /// Memory above the high threshold.
    MemoryLimit,
    /// Too many queues.
    QueueLimit,
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DropReason::Malformed(err) => write!(f, "malformed fragment: {err}"),
            DropReason::BadHeaderChecksum => f.write_str("bad IPv4 header checksum"),
            DropReason::Duplicate => f.write_str("duplicate fragment"),
            DropReason::Overlap => f.write_str("fragment overlaps received data: datagram discarded"),
            DropReason::Oversize => f.write_str("reassembled datagram would exceed 65535 bytes"),
            DropReason::ZeroLength => f.write_str("zero-length fragment"),
            DropReason::BadLastFragment => f.write_str("last fragment inconsistent with the data received"),
            DropReason::BeyondEnd => f.write_str("fragment data beyond the datagram's end"),
            DropReason::NotMultipleOf8 => f.write_str("IPv6 non-last fragment length not a multiple of 8"),
            DropReason::EndBeyondMax => f.write_str("IPv6 fragment ends beyond 65535"),
            DropReason::IncompleteChain => f.write_str("IPv6 first fragment lacks the upper-layer header"),
            DropReason::Jumbogram => f.write_str("IPv6 jumbogram with a fragment header"),
            DropReason::EcnMismatch => f.write_str("incompatible ECN codepoints among the fragments"),
            DropReason::MemoryLimit => f.write_str("reassembly memory above the high threshold"),
            DropReason::QueueLimit => f.write_str("reassembly queue table full"),
        }
    }
}

impl std::error::Error for DropReason {}

/// A dropped fragment: the reason, whether its whole queue was discarded,
/// and an ICMP error to send to its source, when the rules say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragDrop {
    /// Why.
    pub reason: DropReason,
    /// True when the fragment's queue (every fragment received so far) was discarded too.
    pub queue_discarded: bool,
    /// ICMP error for the sender (IPv6 parameter problem).
    pub icmp: Option<IcmpError>,
}

impl std::fmt::Display for FragDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reason)
    }
}

impl std::error::Error for FragDrop {}

/// Geometry and identity of a reassembled datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramInfo {
    /// Family.
    pub family: Family,
    /// Identification (IPv4: 16 bits).
    pub ident: u32,
    /// Fragments that made it.
    pub fragments: u16,
    /// IP packet length of the largest fragment (Linux `frag_max_size`):
    /// forwarding re-fragments to no more than this.
    pub max_frag_size: u16,
    /// IPv4: DF was set on the largest fragment (and is set on the result).
    pub dont_frag: bool,
    /// Offset of the IP header in the packet.
    pub l3_offset: usize,
}

/// A reassembled datagram. With [`Delivery::Local`] the packet is one
/// contiguous buffer; with [`Delivery::Forward`] its linear area holds the
/// headers and its frag list the fragments' payloads ([`flatten`] gives the bytes).
#[derive(Debug)]
pub struct Reassembled {
    /// The datagram: L2 header of the first fragment, fixed IP header, payload.
    pub packet: Packet,
    /// Geometry for re-fragmentation.
    pub info: DatagramInfo,
}

/// Outcome of offering a packet to the reassembler.
#[derive(Debug)]
pub enum Verdict {
    /// Not a fragment (non-IP, unfragmented, IPv6 atomic fragment, or not
    /// parsable as IP): the packet, untouched.
    Pass(Packet),
    /// Not a fragment, from [`Reassembler::push_frame`]: deliver the frame yourself.
    NotFragment,
    /// Held (coalesced or queued) until the datagram completes.
    Queued,
    /// The datagram is complete.
    Complete(Reassembled),
}

/// Copies all bytes of `p` (linear, segments, then the frag list, depth
/// first) into `out`, replacing its content.
pub fn flatten(p: &Packet, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(p.total_len());
    append_all(p, out);
}

fn append_all(p: &Packet, out: &mut Vec<u8>) {
    for c in p.chunks() {
        out.extend_from_slice(c);
    }
    for f in p.frag_list() {
        append_all(f, out);
    }
}
