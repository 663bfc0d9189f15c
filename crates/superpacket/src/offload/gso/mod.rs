//! Generic segmentation offload: TSO4/TSO6, USO and fraglist GSO in
//! software, fused with checksum completion, for a target described by its
//! capabilities (offload-rules section 3, checksum rules 0.3, per-packet
//! features 6.2).
//!
//! # What happens to a packet ([`Segmenter::segment`])
//! 1. **Metadata and headers are validated first**, before anything is
//!    emitted: a known GSO type naming one protocol that matches the headers
//!    (no IP fragments), `gso_size > 0`, a partial checksum that starts at the
//!    L4 header with the protocol's offset (3.2, 3.3), IP lengths that agree
//!    with the bytes present and, for a superpacket (step 2), the USO segment
//!    limit (3.3), `gso_segs` consistent (or recomputed for DODGY / unknown,
//!    3.1) and the per-segment L3 length within the MTU (3.6: the segment
//!    length, never the aggregate). Any failure is a [`GsoError`], counted by
//!    [`GsoError::reason`] in [`GsoCounters::drops`]; nothing reaches the sink.
//! 2. **Not a superpacket**: a GSO packet whose payload is not larger than
//!    `gso_size` is sent as an ordinary packet, one frame whose partial
//!    checksum is completed (in software, or by a target that can), as
//!    Linux's `virtio_net_hdr_to_skb` makes it (offload-rules 4.2 step 5) and
//!    [`crate::packet::virtio::VirtioNetHdr::to_meta`] does at import. Linux's
//!    segmenters return EINVAL for such a packet (3.2, 3.3), but no packet
//!    from userspace reaches them in that state, so dropping it here would
//!    lose packets the kernel sends. (A fraglist aggregate that small is cut
//!    as one frame with its checksum recomputed: its head's checksum does not
//!    cover the chained payload.)
//! 3. **Pass-through when the target can take it** ([`TargetCaps`], 3.1
//!    `skb_gso_ok` and 6.2 `netif_skb_features`): every GSO bit is a target
//!    feature (FIXEDID needs the MANGLEID equivalent, and a DF=0 IPv4 header
//!    strips it), the target can checksum this packet (0.3, including the
//!    IPv6-extension-header rule), at most one VLAN tag (the QinQ rule), the
//!    segment count and size within the target's limits, and a frag list only
//!    for a target with fraglist support. DODGY packets are validated and get
//!    `gso_segs` recomputed (3.1 "ROBUST" check).
//! 4. **Otherwise software segmentation** ([`tcp`], [`udp`], [`fraglist`]):
//!    each segment gets a copy of the header block with its lengths, IPv4 ID,
//!    header checksum, TCP sequence/flags or UDP length fixed, and an L4
//!    checksum that is either left `CHECKSUM_PARTIAL` (target can checksum) or
//!    completed in software from pseudo-header + header sum + payload sum
//!    ([`csum_help`]).
//!
//! 5. **Tunnel superpackets** (`UDP_TUNNEL` / `UDP_TUNNEL_CSUM` with
//!    [`OffloadMeta::encap`]: VXLAN, Geneve) take the same steps with the
//!    outer headers fixed per segment as well (outer IPv4 ID, lengths, outer
//!    UDP checksum zero, computed by LCO or left partial) and the inner ones
//!    as above; module `tunnel`, offload-rules 3.7, checked against the
//!    kernel's VXLAN segmentation (`tests/gso_tunnel_kernel_oracle.rs`).
//!
//! # Output forms ([`output`])
//! Targets with scatter-gather get [`SgFrame`]s: a fresh header (owned by
//! the segmenter, rewritten in place for each segment) plus payload slices
//! borrowed from the superpacket; no payload byte is copied and nothing is
//! allocated per segment (payload sums are taken from the slices). Targets
//! without it get linear frames written into a buffer the sink provides, the
//! payload copied and summed in one pass ([`crate::csum::copy_and_sum`]).
//!
//! # Packet model conventions
//! - A GSO packet's bytes are [`Packet::chunks`]; for a non-fraglist GSO type
//!   the packets on its frag list hold **pure payload** continuing it (Linux:
//!   `skb->len` includes the frag list).
//! - A FRAGLIST aggregate's head is the first original packet with the IP
//!   (and UDP) length covering the whole aggregate, as Linux's GRO completion
//!   leaves it; each frag-list packet is one original packet, normally with
//!   its headers pulled (payload only: Linux and [`crate::offload::gro`]),
//!   or else a whole frame or a packet starting at its network header. See
//!   [`fraglist`].
//!
//! Checked against the kernel (`tests/gso_kernel_oracle.rs`: byte-identical
//! segments from Linux's software GSO for TCPv4/TCPv6/USO and checksum help),
//! against independently built frames (table and property tests), against
//! the GRO engine (`tests/gso_gro_roundtrip.rs`) and tshark
//! (`tests/gso_pcap.rs`).

pub mod csum_help;
pub mod fraglist;
mod layout;
pub mod output;
pub mod tcp;
pub(crate) mod tunnel;
pub mod udp;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tunnel_tests;

use crate::packet::{ChecksumState, GsoProtocol, GsoType, OffloadMeta, Packet};
use crate::wire::WireError;
use std::collections::BTreeMap;

pub use output::{MAX_SG_SLICES, OutFrame, OutKind, SegmentSink, SgFrame, VecSink};

pub use crate::wire::Medium;
use layout::{L4, Layout};
use output::PayloadCursor;

/// Longest header block (L2 + L3 incl. IPv6 extension headers + L4) the
/// segmenter copies per segment. Longer headers are a [`GsoError::HeaderTooLong`].
pub const MAX_HEADER_LEN: usize = 512;

/// `UDP_MAX_SEGMENTS` on current kernels (offload-rules 3.3, Appendix A).
pub const UDP_MAX_SEGMENTS: u16 = 128;
/// `UDP_MAX_SEGMENTS` on older kernels.
pub const UDP_MAX_SEGMENTS_LEGACY: u16 = 64;
/// `GSO_MAX_SEGS` (Appendix A).
pub const GSO_MAX_SEGS: u16 = 65535;
/// `GSO_LEGACY_MAX_SIZE`: default largest superpacket a target takes whole (Appendix A).
pub const GSO_LEGACY_MAX_SIZE: usize = 65536;

/// GSO type bits this engine knows; any other bit is a [`GsoError::UnknownGsoType`].
const KNOWN_GSO_BITS: GsoType = GsoType::from_bits(
    GsoType::TCPV4.bits()
        | GsoType::DODGY.bits()
        | GsoType::TCP_ECN.bits()
        | GsoType::TCPV6.bits()
        | GsoType::UDP_L4.bits()
        | GsoType::FRAGLIST.bits()
        | GsoType::TCP_ACCECN.bits()
        | GsoType::TCP_FIXEDID.bits()
        | GsoType::TCP_FIXEDID_INNER.bits()
        | GsoType::UDP_TUNNEL.bits()
        | GsoType::UDP_TUNNEL_CSUM.bits(),
);

/// TCP-only GSO bits (invalid with UDP_L4).
const TCP_ONLY_BITS: GsoType = GsoType::from_bits(
    GsoType::TCP_ECN.bits()
        | GsoType::TCP_ACCECN.bits()
        | GsoType::TCP_FIXEDID.bits()
        | GsoType::TCP_FIXEDID_INNER.bits(),
);

/// Transmit checksum offload of a target (offload-rules 0.3, Linux
/// `NETIF_F_IP_CSUM`, `NETIF_F_IPV6_CSUM`, `NETIF_F_HW_CSUM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct CsumCaps {
    /// `IP_CSUM`: TCP/UDP over IPv4.
    pub ipv4: bool,
    /// `IPV6_CSUM`: TCP/UDP over IPv6 with no extension headers.
    pub ipv6: bool,
    /// `HW_CSUM`: any `csum_start`/`csum_offset`, any protocol.
    pub hw: bool,
}

impl CsumCaps {
    /// No checksum offload: every checksum is completed in software.
    pub const NONE: CsumCaps = CsumCaps { ipv4: false, ipv6: false, hw: false };
    /// `IP_CSUM | IPV6_CSUM`.
    pub const IP: CsumCaps = CsumCaps { ipv4: true, ipv6: true, hw: false };
    /// `HW_CSUM` (what TAP with `TUN_F_CSUM` and veth advertise).
    pub const HW: CsumCaps = CsumCaps { ipv4: false, ipv6: false, hw: true };
}

/// What a transmit target can do itself; the segmenter produces only what
/// it lacks. Build with [`TargetCaps::new`] and the `with_*` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TargetCaps {
    /// GSO types the target segments itself: TCPV4 (TSO), TCPV6 (TSO6),
    /// UDP_L4 (USO), TCP_ECN (TSO_ECN), TCP_ACCECN, TCP_FIXEDID (the
    /// `TSO_MANGLEID` feature), FRAGLIST (GSO_FRAGLIST). DODGY is never
    /// needed: the segmenter validates DODGY packets itself. UDP_TUNNEL and
    /// UDP_TUNNEL_CSUM are Linux's `GSO_UDP_TUNNEL[_CSUM]` features: a tunnel
    /// superpacket passes through only if its bits are here **and** in
    /// [`TargetCaps::enc_gso`] (offload-rules 3.7).
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_gso_type"))]
    pub gso: GsoType,
    /// Checksum offload.
    pub csum: CsumCaps,
    /// Scatter-gather: the target takes a frame as several buffers (TAP
    /// `writev`, AF_PACKET `sendmsg` iovecs). Without it frames are linear.
    pub sg: bool,
    /// The target takes packets with a frag list (`NETIF_F_FRAGLIST`).
    pub fraglist: bool,
    /// L3 MTU: the largest IP packet per wire segment (offload-rules 3.6).
    pub mtu: usize,
    /// Most segments the target's own GSO takes in one superpacket
    /// (`gso_max_segs`); beyond it the segmenter cuts in software.
    pub max_segs: u16,
    /// Largest superpacket the target's own GSO takes (`gso_max_size`);
    /// at or beyond it the segmenter cuts in software (6.2 step 2).
    pub gso_max_size: usize,
    /// USO segment limit (`UDP_MAX_SEGMENTS`): more is an error (3.3).
    pub udp_max_segments: u16,
    /// The most VLAN tags a packet may carry for the target to still
    /// segment it or complete its IP-specific checksum itself. Linux's default
    /// per-device check (`vlan_features_check`, offload-rules 6.2 step 5)
    /// allows 1; a device whose `features_check` hook can parse deeper stacks
    /// raises it. `HW_CSUM` is never limited by tags.
    pub max_offload_tags: u8,
    /// GSO types the target also does on the inner headers of a tunnel
    /// packet (the GSO bits of Linux's `hw_enc_features`); default none.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_gso_type"))]
    pub enc_gso: GsoType,
    /// Checksum offload for the inner headers of a tunnel packet (the
    /// checksum bits of `hw_enc_features`), intersected with
    /// [`TargetCaps::csum`]; default none: inner checksums of tunnel
    /// segments are completed in software (offload-rules 3.7).
    pub enc_csum: CsumCaps,
    /// How the target's packets start: Ethernet (TAP, AF_PACKET) or raw IP
    /// (TUN). Every packet given to [`Segmenter::segment`] for this target is
    /// read as this medium, and its segments keep it.
    pub medium: Medium,
    /// Tunnel GSO types (`UDP_TUNNEL`, `UDP_TUNNEL_CSUM`) the target finishes
    /// from GSO_PARTIAL output: Linux's `NETIF_F_GSO_PARTIAL` with these in
    /// `gso_partial_features`. A tunnel superpacket of such a type that the
    /// target cannot take whole is cut into one chunk of a multiple of
    /// `gso_size` (plus a remainder) with the lengths of one segment, which
    /// the target segments itself (offload-rules 3.7 "GSO_PARTIAL"); the
    /// inner GSO type must be in [`TargetCaps::gso`] ∩
    /// [`TargetCaps::enc_gso`]. Default none.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_gso_type"))]
    pub gso_partial: GsoType,
}

#[cfg(feature = "serde")]
fn ser_gso_type<S: serde::Serializer>(t: &GsoType, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

impl TargetCaps {
    /// A target with no offload at all and the given L3 MTU: linear frames,
    /// software checksums, software segmentation.
    pub const fn new(mtu: usize) -> TargetCaps {
        TargetCaps {
            gso: GsoType::NONE,
            csum: CsumCaps::NONE,
            sg: false,
            fraglist: false,
            mtu,
            max_segs: GSO_MAX_SEGS,
            gso_max_size: GSO_LEGACY_MAX_SIZE,
            udp_max_segments: UDP_MAX_SEGMENTS,
            max_offload_tags: 1,
            enc_gso: GsoType::NONE,
            enc_csum: CsumCaps::NONE,
            medium: Medium::Ethernet,
            gso_partial: GsoType::NONE,
        }
    }

    /// With GSO_PARTIAL output for these tunnel GSO types (see
    /// [`TargetCaps::gso_partial`]).
    pub const fn with_gso_partial(mut self, tunnel: GsoType) -> TargetCaps {
        self.gso_partial = tunnel;
        self
    }

    /// With packets of `medium` (raw IP for a TUN device).
    pub const fn with_medium(mut self, medium: Medium) -> TargetCaps {
        self.medium = medium;
        self
    }
    /// With scatter-gather.
    pub const fn with_sg(mut self) -> TargetCaps {
        self.sg = true;
        self
    }
    /// With this checksum offload.
    pub const fn with_csum(mut self, csum: CsumCaps) -> TargetCaps {
        self.csum = csum;
        self
    }
    /// With these GSO types done by the target.
    pub const fn with_gso(mut self, gso: GsoType) -> TargetCaps {
        self.gso = gso;
        self
    }
    /// With these offloads for the inner headers of tunnel packets (Linux
    /// `hw_enc_features`: see [`TargetCaps::enc_gso`], [`TargetCaps::enc_csum`]).
    pub const fn with_enc(mut self, gso: GsoType, csum: CsumCaps) -> TargetCaps {
        self.enc_gso = gso;
        self.enc_csum = csum;
        self
    }
    /// With frag-list support.
    pub const fn with_fraglist(mut self) -> TargetCaps {
        self.fraglist = true;
        self
    }
    /// With the most VLAN tags the target offloads through (see
    /// [`TargetCaps::max_offload_tags`]).
    pub const fn with_max_offload_tags(mut self, tags: u8) -> TargetCaps {
        self.max_offload_tags = tags;
        self
    }
    /// With the legacy USO limit (64) or another one.
    pub const fn with_udp_max_segments(mut self, max: u16) -> TargetCaps {
        self.udp_max_segments = max;
        self
    }
}

/// Why a packet was dropped. Never partially emitted: every check runs
/// before the first frame reaches the sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GsoError {
    /// The headers do not parse.
    BadHeaders(WireError),
    /// The GSO type has unknown bits, names no single protocol, or mixes TCP bits into UDP_L4.
    UnknownGsoType(GsoType),
    /// The GSO type does not match the headers.
    ProtocolMismatch {
        /// The packet's GSO type.
        gso_type: GsoType,
        /// What the frame holds.
        found: &'static str,
    },
    /// A GSO type with `gso_size` 0.
    ZeroGsoSize,
    /// More segments than allowed (USO: `UDP_MAX_SEGMENTS`; any: 65535).
    TooManySegments {
        /// Segments the payload needs.
        segments: usize,
        /// The limit.
        max: usize,
    },
    /// `gso_segs` disagrees with the payload and `gso_size` (not DODGY, not 0).
    GsoSegsMismatch {
        /// The metadata's gso_segs.
        found: u16,
        /// ceil(payload / gso_size).
        computed: usize,
    },
    /// A segment's L3 length exceeds the target MTU (offload-rules 3.6).
    SegmentExceedsMtu {
        /// Per-segment L3 length (headers + gso_size).
        len: usize,
        /// The MTU.
        mtu: usize,
    },
    /// A partial checksum that does not start at the L4 header.
    ChecksumStartNotL4 {
        /// csum_start.
        start: u16,
        /// L4 header offset.
        l4_offset: usize,
    },
    /// A partial checksum whose offset does not match the protocol (16 TCP, 6 UDP).
    WrongChecksumOffset {
        /// csum_offset.
        offset: u16,
        /// The protocol's offset.
        expected: u16,
    },
    /// A partial checksum field outside the packet.
    ChecksumOutsidePacket {
        /// csum_start.
        start: u16,
        /// csum_offset.
        offset: u16,
        /// Packet length.
        len: usize,
    },
    /// The IP length does not match the bytes of the packet.
    LengthMismatch {
        /// `l3_offset + l3_len` from the IP header.
        ip_end: usize,
        /// Bytes present.
        bytes: usize,
    },
    /// The header block is longer than [`MAX_HEADER_LEN`].
    HeaderTooLong {
        /// Header length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A fraglist aggregate whose chained packets do not fit its head.
    BadFraglist(&'static str),
    /// Tunnel GSO metadata that is not valid by itself (offload-rules 3.7):
    /// UDP_TUNNEL without [`OffloadMeta::encap`], encapsulation offsets on
    /// a plain GSO type, both tunnel bits, FRAGLIST in a tunnel.
    BadTunnelGso(&'static str),
    /// [`OffloadMeta::encap`] disagrees with the bytes (offload-rules 3.7):
    /// outer headers not UDP at `outer_transport`, a tunnel header of the
    /// wrong length or protocol, inner offsets that are not the inner
    /// headers, an outer UDP length not reaching the end.
    BadEncapsulation(&'static str),
}

impl std::fmt::Display for GsoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GsoError::BadHeaders(err) => write!(f, "headers unreadable: {err}"),
            GsoError::UnknownGsoType(gso_type) => write!(f, "gso_type {gso_type} is not a valid segmentation type"),
            GsoError::ProtocolMismatch { gso_type, found } => {
                write!(f, "gso_type {gso_type} does not match the frame ({found})")
            }
            GsoError::ZeroGsoSize => f.write_str("gso_size 0"),
            GsoError::TooManySegments { segments, max } => write!(f, "{segments} segments exceed the limit of {max}"),
            GsoError::GsoSegsMismatch { found, computed } => {
                write!(f, "gso_segs {found} but the payload makes {computed} segments")
            }
            GsoError::SegmentExceedsMtu { len, mtu } => write!(f, "segment L3 length {len} exceeds the MTU {mtu}"),
            GsoError::ChecksumStartNotL4 { start, l4_offset } => {
                write!(f, "csum_start {start} is not the L4 header offset {l4_offset}")
            }
            GsoError::WrongChecksumOffset { offset, expected } => {
                write!(f, "csum_offset {offset}, expected {expected}")
            }
            GsoError::ChecksumOutsidePacket { start, offset, len } => {
                write!(f, "csum_start {start} + csum_offset {offset} lies outside the {len}-byte packet")
            }
            GsoError::LengthMismatch { ip_end, bytes } => {
                write!(f, "IP packet ends at {ip_end}, but the packet holds {bytes} bytes")
            }
            GsoError::HeaderTooLong { len, max } => write!(f, "header block of {len} bytes exceeds {max}"),
            GsoError::BadFraglist(why) => write!(f, "bad fraglist aggregate: {why}"),
            GsoError::BadTunnelGso(why) => write!(f, "bad tunnel GSO metadata: {why}"),
            GsoError::BadEncapsulation(why) => write!(f, "encapsulation offsets disagree with the packet: {why}"),
        }
    }
}

impl std::error::Error for GsoError {}

impl GsoError {
    /// A short stable name for drop counters.
    pub fn reason(&self) -> &'static str {
        match self {
            GsoError::BadHeaders(_) => "bad-headers",
            GsoError::UnknownGsoType(_) => "unknown-gso-type",
            GsoError::ProtocolMismatch { .. } => "protocol-mismatch",
            GsoError::ZeroGsoSize => "zero-gso-size",
            GsoError::TooManySegments { .. } => "too-many-segments",
            GsoError::GsoSegsMismatch { .. } => "gso-segs-mismatch",
            GsoError::SegmentExceedsMtu { .. } => "exceeds-mtu",
            GsoError::ChecksumStartNotL4 { .. } => "csum-start-not-l4",
            GsoError::WrongChecksumOffset { .. } => "wrong-csum-offset",
            GsoError::ChecksumOutsidePacket { .. } => "csum-outside-packet",
            GsoError::LengthMismatch { .. } => "length-mismatch",
            GsoError::HeaderTooLong { .. } => "header-too-long",
            GsoError::BadFraglist(_) => "bad-fraglist",
            GsoError::BadTunnelGso(_) => "bad-tunnel-gso",
            GsoError::BadEncapsulation(_) => "bad-encap",
        }
    }
}

/// What [`Segmenter::segment`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GsoOutcome {
    /// The target takes the packet as it is: one
    /// [`SegmentSink::pass_through`] call.
    PassedThrough,
    /// One frame was emitted for a non-GSO packet (or a GSO packet whose
    /// payload is not larger than `gso_size`, which is not a superpacket):
    /// its checksum completed in software (`csum_completed`) and/or its bytes
    /// linearized for a target without scatter-gather or frag-list support.
    Completed {
        /// A partial checksum was computed in software.
        csum_completed: bool,
    },
    /// The superpacket was cut into `segments` frames.
    Segmented {
        /// Frames emitted.
        segments: usize,
        /// Their L4 checksums were computed in software (else left partial
        /// for the target, or, for fraglist, carried over from the originals).
        csum_completed: bool,
    },
}

/// Counters of a [`Segmenter`] (serialisable for `--json` reports).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GsoCounters {
    /// Packets handed to the segmenter.
    pub packets_in: u64,
    /// Frames given to the sink (pass-throughs included).
    pub frames_out: u64,
    /// Superpackets cut in software.
    pub superpackets_segmented: u64,
    /// Frames produced by software segmentation.
    pub segments_out: u64,
    /// Packets the target took as they were.
    pub passed_through: u64,
    /// L4 checksums computed in software (one per segment or completed packet).
    pub checksums_completed: u64,
    /// Non-GSO packets emitted as one frame (checksum completed or linearized).
    pub completed: u64,
    /// Packets dropped, by [`GsoError::reason`].
    pub drops: BTreeMap<&'static str, u64>,
}

impl GsoCounters {
    /// Total drops.
    pub fn dropped(&self) -> u64 {
        self.drops.values().sum()
    }

    fn record(&mut self, outcome: &Result<GsoOutcome, GsoError>) {
        self.packets_in += 1;
        match outcome {
            Ok(o) => self.count(o, |c, n| *c += n),
            Err(e) => *self.drops.entry(e.reason()).or_insert(0) += 1,
        }
    }

    /// Takes back what [`Segmenter::segment`] counted for a packet whose
    /// `outcome` the caller discarded because it segments the same packet
    /// again (superpacket-engine's port does, for a packet whose payload
    /// was not in it yet), so that each packet is counted once.
    pub fn take_back(&mut self, outcome: &GsoOutcome) {
        self.packets_in = self.packets_in.saturating_sub(1);
        self.count(outcome, |c, n| *c = c.saturating_sub(n));
    }

    /// Applies `add` to each counter `outcome` moves, with the amount.
    fn count(&mut self, outcome: &GsoOutcome, add: impl Fn(&mut u64, u64)) {
        match *outcome {
            GsoOutcome::PassedThrough => {
                add(&mut self.passed_through, 1);
                add(&mut self.frames_out, 1);
            }
            GsoOutcome::Completed { csum_completed } => {
                add(&mut self.completed, 1);
                add(&mut self.frames_out, 1);
                add(&mut self.checksums_completed, u64::from(csum_completed));
            }
            GsoOutcome::Segmented { segments, csum_completed } => {
                let n = segments as u64;
                add(&mut self.superpackets_segmented, 1);
                add(&mut self.segments_out, n);
                add(&mut self.frames_out, n);
                if csum_completed {
                    add(&mut self.checksums_completed, n);
                }
            }
        }
    }
}

/// The software segmenter: owns the reusable header buffer and the counters.
/// One per transmit queue; no allocation per packet or per segment.
#[derive(Debug, Clone)]
pub struct Segmenter {
    hdr: [u8; MAX_HEADER_LEN],
    /// Counters since creation.
    pub counters: GsoCounters,
}

impl Default for Segmenter {
    fn default() -> Self {
        Segmenter::new()
    }
}

/// Segments one packet for `caps` with a temporary [`Segmenter`] (counters
/// discarded). See [`Segmenter::segment`].
///
/// # Errors
/// See [`Segmenter::segment`].
pub fn segment<S: SegmentSink + ?Sized>(pkt: &Packet, caps: &TargetCaps, sink: &mut S) -> Result<GsoOutcome, GsoError> {
    Segmenter::new().segment(pkt, caps, sink)
}

/// What the validation step found out about a TCP/UDP superpacket: enough to
/// cut it without looking at the headers again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub lay: Layout,
    pub proto: GsoProtocol,
    pub gso_size: usize,
    pub payload_len: usize,
    pub segs: usize,
    /// Compute L4 checksums in software (else leave them partial).
    pub sw_csum: bool,
    /// IPv4 ID fixed for every segment (TCP_FIXEDID).
    pub fixed_id: bool,
    /// AccECN: CWR on every segment.
    pub accecn: bool,
    /// Every segment keeps the superpacket's TCP flags (fraglist members
    /// all had them: fraglist GRO merges only equal flag words).
    pub keep_flags: bool,
    /// Frag-list packets carry their own headers to skip (fraglist fallback).
    pub frag_headers: bool,
    /// The input's L4 checksum field holds the pseudo-header sum
    /// (`CHECKSUM_PARTIAL`): segments derive theirs from it by adjusting the
    /// length, as Linux does, so whatever addresses it covers (e.g. an IPv6
    /// routing header's final destination) are kept.
    pub partial_in: bool,
    /// Metadata of every output frame.
    pub out_meta: OffloadMeta,
    /// A tunnel superpacket's outer headers to fix per segment (`lay` is
    /// then the inner layout, offsets from the frame start).
    pub outer: Option<tunnel::OuterFixer>,
    /// GSO_PARTIAL output: the metadata of the chunk that carries more than
    /// `gso_size` bytes (a GSO packet for the target to finish) and the
    /// number of `gso_size` units in it; `None` for ordinary segments.
    pub partial: Option<(OffloadMeta, u16)>,
}

impl Plan {
    /// The metadata of an output frame carrying `len` payload bytes: the
    /// GSO_PARTIAL chunk's when it carries more than one segment's worth.
    #[inline(always)]
    fn frame_meta(&self, len: usize) -> OffloadMeta {
        match self.partial {
            Some((meta, _)) if len > self.gso_size => meta,
            _ => self.out_meta,
        }
    }

    /// The most payload bytes whose lengths a frame's headers state: one
    /// segment's (`gso_size`) for GSO_PARTIAL output, where the headers of
    /// a chunk describe one segment of it (Linux `inet_gso_segment`,
    /// `ipv6_gso_segment`, `__skb_udp_tunnel_segment` with `gso_partial`);
    /// unbounded otherwise.
    pub(crate) fn wire_cap(&self) -> usize {
        if self.partial.is_some() { self.gso_size } else { usize::MAX }
    }

    /// How far the IPv4 IDs of consecutive frames lie apart: the `gso_size`
    /// units of a GSO_PARTIAL chunk (Linux: `id += gso_segs`), else 1.
    pub(crate) fn id_stride(&self) -> u16 {
        self.partial.map_or(1, |(_, units)| units)
    }
}

impl Segmenter {
    /// A segmenter with zeroed counters.
    pub fn new() -> Segmenter {
        Segmenter { hdr: [0; MAX_HEADER_LEN], counters: GsoCounters::default() }
    }

    /// Segments (or passes through, or checksums) one packet for a target
    /// with capabilities `caps`, giving the result to `sink`. See the module
    /// documentation for the decision; counted in [`Segmenter::counters`].
    ///
    /// ```
    /// use superpacket::offload::gso::{GsoOutcome, Segmenter, TargetCaps, VecSink};
    /// use superpacket::traffic::{Flow, FlowSpec, Transport};
    /// use superpacket::validate::validate_frame;
    /// use superpacket::wire::{Medium, TcpFlags};
    ///
    /// // A TSO superpacket as a TAP hands it over: 4000 bytes for 1448-byte segments.
    /// let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 0)).superpacket(4000, 1448, TcpFlags::PSH).unwrap();
    /// let mut sink = VecSink::new();
    /// let outcome = Segmenter::new().segment(&sp, &TargetCaps::new(1500), &mut sink).unwrap();
    /// assert_eq!(outcome, GsoOutcome::Segmented { segments: 3, csum_completed: true });
    /// let lens: Vec<_> = sink.frames.iter().map(|f| f.data.len()).collect();
    /// assert_eq!(lens, [14 + 52 + 1448, 14 + 52 + 1448, 14 + 52 + 1104]);
    /// let mut problems = Vec::new(); // headers, lengths and checksums: all valid
    /// sink.frames.iter().for_each(|f| validate_frame(&f.data, Medium::Ethernet, &f.meta, false, &mut problems));
    /// assert!(problems.is_empty(), "{problems:?}");
    /// ```
    ///
    /// # Errors
    /// A [`GsoError`] for bad metadata or headers; nothing was given to the
    /// sink then.
    pub fn segment<S: SegmentSink + ?Sized>(
        &mut self,
        pkt: &Packet,
        caps: &TargetCaps,
        sink: &mut S,
    ) -> Result<GsoOutcome, GsoError> {
        let r = if pkt.meta.gso_type.is_empty() {
            csum_help::non_gso(self, pkt, &pkt.meta, caps, sink)
        } else {
            self.gso(pkt, caps, sink)
        };
        self.counters.record(&r);
        r
    }

    /// Copies the first bytes of the packet (up to [`MAX_HEADER_LEN`]) into
    /// the header buffer and parses them.
    fn probe(&mut self, pkt: &Packet, medium: Medium) -> Result<Layout, GsoError> {
        let n = pkt.len().min(MAX_HEADER_LEN);
        // In range by construction.
        let _ = pkt.read_at(0, &mut self.hdr[..n]);
        layout::parse(&self.hdr[..n], medium)
    }

    fn gso<S: SegmentSink + ?Sized>(
        &mut self,
        pkt: &Packet,
        caps: &TargetCaps,
        sink: &mut S,
    ) -> Result<GsoOutcome, GsoError> {
        let meta = pkt.meta;
        let t = meta.gso_type;
        let proto = t.protocol().ok_or(GsoError::UnknownGsoType(t))?;
        if !KNOWN_GSO_BITS.contains(t) || (proto == GsoProtocol::UdpL4 && t.intersects(TCP_ONLY_BITS)) {
            return Err(GsoError::UnknownGsoType(t));
        }
        if meta.gso_size == 0 {
            return Err(GsoError::ZeroGsoSize);
        }
        if t.intersects(tunnel::TUNNEL_BITS) || meta.encap.is_some() {
            return tunnel::segment(self, pkt, caps, sink, proto);
        }
        let lay = self.probe(pkt, caps.medium)?;
        check_protocol(t, proto, &lay)?;
        if let ChecksumState::Partial { start, offset } = meta.csum {
            if start as usize != lay.l4_offset {
                return Err(GsoError::ChecksumStartNotL4 { start, l4_offset: lay.l4_offset });
            }
            if offset != proto.csum_offset() {
                return Err(GsoError::WrongChecksumOffset { offset, expected: proto.csum_offset() });
            }
        }
        if t.contains(GsoType::FRAGLIST) {
            return fraglist::segment(self, pkt, caps, sink, lay, proto);
        }
        let bytes = pkt.len() + pkt.frag_list().iter().map(Packet::total_len).sum::<usize>();
        if lay.l3_end() != bytes {
            return Err(GsoError::LengthMismatch { ip_end: lay.l3_end(), bytes });
        }
        let payload_len = lay.l3_end() - lay.hdr_len;
        if payload_len <= meta.gso_size as usize {
            // Not a superpacket: an ordinary packet, as `virtio_net_hdr_to_skb`
            // leaves it (offload-rules 4.2 step 5); its partial checksum is
            // completed like any other (0.3), `gso_segs` and DODGY are moot.
            let plain = OffloadMeta { gso_type: GsoType::NONE, gso_size: 0, gso_segs: 0, ..meta };
            return csum_help::non_gso(self, pkt, &plain, caps, sink);
        }
        let plan = Segmenter::plan(pkt, caps, lay, proto, payload_len, false, true)?;
        if csum_help::gso_offloadable(caps, &plan, &meta, bytes, !pkt.frag_list().is_empty()) {
            let mut out = meta;
            out.gso_type = t.without(GsoType::DODGY);
            out.gso_segs = plan.segs as u16;
            sink.pass_through(pkt, &out);
            return Ok(GsoOutcome::PassedThrough);
        }
        let segments = self.cut(pkt, caps, &plan, sink);
        Ok(GsoOutcome::Segmented { segments, csum_completed: plan.sw_csum })
    }

    /// Validates sizes and limits and builds the [`Plan`] (shared by the
    /// TCP/UDP path and the fraglist fallback). A payload not larger than
    /// `gso_size` plans one frame (only the fraglist fallback gets here with
    /// one: its concatenated payload needs the checksum recomputed, so it
    /// cannot go out as an ordinary packet unchanged); the MTU check then
    /// applies to that frame.
    pub(crate) fn plan(
        pkt: &Packet,
        caps: &TargetCaps,
        lay: Layout,
        proto: GsoProtocol,
        payload_len: usize,
        frag_headers: bool,
        check_segs: bool,
    ) -> Result<Plan, GsoError> {
        let meta = pkt.meta;
        let gso_size = meta.gso_size as usize;
        let segs = payload_len.div_ceil(gso_size).max(1);
        let max = if proto == GsoProtocol::UdpL4 { caps.udp_max_segments } else { GSO_MAX_SEGS } as usize;
        if segs > max {
            return Err(GsoError::TooManySegments { segments: segs, max });
        }
        if check_segs && meta.gso_segs != 0 && meta.gso_segs as usize != segs && !meta.gso_type.contains(GsoType::DODGY)
        {
            return Err(GsoError::GsoSegsMismatch { found: meta.gso_segs, computed: segs });
        }
        let seg_l3 = lay.hdr_len - lay.l3_offset + gso_size.min(payload_len);
        if seg_l3 > caps.mtu {
            return Err(GsoError::SegmentExceedsMtu { len: seg_l3, mtu: caps.mtu });
        }
        let sw_csum = !csum_help::csum_offloadable(caps, &lay);
        let out_meta = OffloadMeta {
            csum: if sw_csum {
                ChecksumState::None
            } else {
                ChecksumState::Partial { start: lay.l4_offset as u16, offset: proto.csum_offset() }
            },
            rss_hash: meta.rss_hash,
            arrival_ns: meta.arrival_ns,
            ..OffloadMeta::default()
        };
        Ok(Plan {
            lay,
            proto,
            gso_size,
            payload_len,
            segs,
            sw_csum,
            fixed_id: meta.gso_type.contains(GsoType::TCP_FIXEDID) && proto == GsoProtocol::TcpV4,
            accecn: meta.gso_type.contains(GsoType::TCP_ACCECN),
            keep_flags: false,
            frag_headers,
            partial_in: matches!(meta.csum, ChecksumState::Partial { .. }),
            out_meta,
            outer: None,
            partial: None,
        })
    }

    /// Cuts a validated superpacket into `plan.segs` frames (offload-rules
    /// 3.2 `skb_segment`, 3.3). Returns the number of frames.
    pub(crate) fn cut<S: SegmentSink + ?Sized>(
        &mut self,
        pkt: &Packet,
        caps: &TargetCaps,
        plan: &Plan,
        sink: &mut S,
    ) -> usize {
        let size = plan.gso_size;
        // What is left after each frame, counted down (no multiplication per frame).
        let lengths = (0..plan.segs).scan(plan.payload_len, move |left, _| {
            let len = (*left).min(size);
            *left -= len;
            Some(len)
        });
        self.cut_at(pkt, caps, plan, sink, lengths)
    }

    /// [`Segmenter::cut`] with explicit segment payload lengths (fraglist
    /// members keep their own sizes).
    pub(crate) fn cut_at<S: SegmentSink + ?Sized>(
        &mut self,
        pkt: &Packet,
        caps: &TargetCaps,
        plan: &Plan,
        sink: &mut S,
        lengths: impl Iterator<Item = usize>,
    ) -> usize {
        // The loop is compiled for four shapes, chosen once per superpacket
        // (a segment then tests none of the flags its shape fixes, and the
        // loop keeps fewer values live): scatter-gather or linear, each for
        // TCP with checksums in software (the usual output for a port
        // without checksum offload) and for everything else.
        let tcp_sw = plan.sw_csum && matches!(plan.proto, GsoProtocol::TcpV4 | GsoProtocol::TcpV6);
        match (caps.sg, tcp_sw) {
            (true, true) => self.cut_loop::<S, true, true>(pkt, plan, sink, lengths),
            (true, false) => self.cut_loop::<S, true, false>(pkt, plan, sink, lengths),
            (false, true) => self.cut_loop::<S, false, true>(pkt, plan, sink, lengths),
            (false, false) => self.cut_loop::<S, false, false>(pkt, plan, sink, lengths),
        }
    }

    /// [`Segmenter::cut_at`]'s loop for one shape: `SG`, frames in
    /// scatter-gather form where the payload fits [`MAX_SG_SLICES`] slices
    /// (else linear); `TCP_SW`, the plan is TCP with software checksums
    /// ([`HeaderFixer::fix`]).
    #[inline(always)]
    fn cut_loop<S: SegmentSink + ?Sized, const SG: bool, const TCP_SW: bool>(
        &mut self,
        pkt: &Packet,
        plan: &Plan,
        sink: &mut S,
        lengths: impl Iterator<Item = usize>,
    ) -> usize {
        let lay = &plan.lay;
        let hl = lay.hdr_len;
        let sum = TCP_SW || plan.sw_csum;
        let fixer = HeaderFixer::new(&self.hdr[..hl], plan);
        let mut cursor = PayloadCursor::new(pkt, hl, plan.frag_headers, plan.lay.medium());
        let mut slices: [&[u8]; MAX_SG_SLICES] = [&[]; MAX_SG_SLICES];
        let mut offset = 0;
        let mut count = 0;
        let mut k = fixer.for_len(plan.gso_size);
        let mut ko = plan.outer.map(|o| o.for_len(hl, plan.gso_size));
        self.write_lens(&fixer, plan, &k, &ko);
        for (i, len) in lengths.enumerate() {
            count += 1;
            let at = offset;
            offset += len;
            if len != k.len {
                k = fixer.for_len(len);
                ko = plan.outer.map(|o| o.for_len(hl, len));
                self.write_lens(&fixer, plan, &k, &ko);
            }
            // Too many slices for one frame: `gather` leaves the cursor
            // where it was, and this one goes out linear.
            if SG && let Some((n, psum)) = cursor.gather(len, &mut slices, sum) {
                let pseudo = fixer.fix::<TCP_SW>(&mut self.hdr[..hl], i, at, &k, psum);
                if let (Some(outer), Some(ko)) = (&plan.outer, &ko) {
                    outer.fix(&mut self.hdr[..hl], i, ko, pseudo);
                }
                let meta = plan.frame_meta(len);
                sink.sg_frame(&SgFrame { header: &self.hdr[..hl], payload: &slices[..n], meta });
                continue;
            }
            let buf = sink.linear_buffer(hl + len);
            output::copy_header_block(buf, &self.hdr, hl);
            let psum = cursor.copy_into(&mut buf[hl..hl + len], sum);
            let pseudo = fixer.fix::<TCP_SW>(&mut buf[..hl], i, at, &k, psum);
            if let (Some(outer), Some(ko)) = (&plan.outer, &ko) {
                outer.fix(&mut buf[..hl], i, ko, pseudo);
            }
            sink.linear_frame(hl + len, &plan.frame_meta(len));
        }
        count
    }

    /// Writes the length fields of `k` (and `ko`, a tunnel's outer ones)
    /// into the template, which every segment of that length starts from.
    fn write_lens(&mut self, fixer: &HeaderFixer, plan: &Plan, k: &SegLen, ko: &Option<tunnel::OuterLen>) {
        let hdr = &mut self.hdr[..plan.lay.hdr_len];
        fixer.write_len(hdr, k);
        if let (Some(outer), Some(ko)) = (&plan.outer, ko) {
            outer.write_len(hdr, ko);
        }
    }
}

/// Writes `field` into the length field of the IP header at `l3` of
/// `hdr`: IPv6's payload length (at 4) or IPv4's total length (at 2).
///
/// # Panics
/// If `hdr` ends inside that field (a programming error).
#[inline]
pub(crate) fn write_ip_len(hdr: &mut [u8], l3: usize, v6: bool, field: u16) {
    let at = if v6 { l3 + 4 } else { l3 + 2 };
    hdr[at..at + 2].copy_from_slice(&field.to_be_bytes());
}

/// Checks that the GSO type names the frame's protocol (offload-rules 3.2,
/// 3.3: `tcp4_gso_segment` needs TCP over IPv4, etc.; never a fragment).
fn check_protocol(t: GsoType, proto: GsoProtocol, lay: &Layout) -> Result<(), GsoError> {
    let found = match (lay.v6, lay.l4) {
        _ if lay.is_fragment => "an IP fragment",
        (false, L4::Tcp) => "TCP/IPv4",
        (true, L4::Tcp) => "TCP/IPv6",
        (false, L4::Udp) => "UDP/IPv4",
        (true, L4::Udp) => "UDP/IPv6",
        (_, L4::Other) => "another IP protocol",
    };
    let ok = !lay.is_fragment
        && match proto {
            GsoProtocol::TcpV4 => !lay.v6 && lay.l4 == L4::Tcp,
            GsoProtocol::TcpV6 => lay.v6 && lay.l4 == L4::Tcp,
            GsoProtocol::UdpL4 => lay.l4 == L4::Udp,
        };
    if ok { Ok(()) } else { Err(GsoError::ProtocolMismatch { gso_type: t, found }) }
}

/// Per-segment header rewriting (offload-rules 3.2 and 3.3), from values
/// read once from the template. The IPv4 header checksum and the L4 header's
/// contribution to the L4 checksum are precomputed without the fields that
/// change, so each segment only writes (no re-read of the header just
/// written, no summing of header bytes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeaderFixer {
    lay: Layout,
    proto: GsoProtocol,
    segs: usize,
    sw_csum: bool,
    ip_id: u16,
    /// How far the IPv4 IDs of consecutive segments lie apart: 0 with
    /// FIXEDID, else [`Plan::id_stride`] (segment `i` has `ip_id + i * id_step`).
    id_step: u16,
    /// [`Plan::wire_cap`].
    wire_cap: usize,
    seq: u32,
    /// The TCP flag byte of the first, a middle and the last segment
    /// ([`tcp::segment_flags`], or the superpacket's with `keep_flags`),
    /// chosen once so that a segment only picks one: segment `i` takes
    /// entry `(i > 0) + (i + 1 >= segs)`. With one segment all three are
    /// that segment's (the last's, which keeps every flag), so its entry 1
    /// is right too.
    seg_flags: [u8; 3],
    /// L4 header length (L4 length = this + the segment's payload).
    l4_hdr_len: usize,
    /// Pseudo-header sum without the length.
    addr_sum: u16,
    /// Sum of the IPv4 header with total length, ID and checksum zeroed.
    ip_base: u16,
    /// Sum of the L4 header with the checksum and the per-segment fields
    /// (TCP sequence number and flag byte, UDP length) zeroed.
    l4_base: u16,
}

impl HeaderFixer {
    pub(crate) fn new(template: &[u8], plan: &Plan) -> HeaderFixer {
        use crate::csum::{ones_sub, ones_sum};
        let lay = plan.lay;
        let ip = &template[lay.l3_offset..];
        let l4 = &template[lay.l4_offset..lay.hdr_len];
        let field = lay.l4_offset + plan.proto.csum_offset() as usize;
        let field_sum = u16::from_be_bytes([template[field], template[field + 1]]);
        let addr_sum = if plan.partial_in {
            // The field holds pseudo(addresses, aggregate L4 length): take the length out.
            ones_sub(field_sum, len_sum(lay.l3_end() - lay.l4_offset))
        } else if lay.v6 {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s.copy_from_slice(&ip[8..24]);
            d.copy_from_slice(&ip[24..40]);
            crate::csum::pseudo_header_v6(s, d, lay.proto, 0)
        } else {
            crate::csum::pseudo_header_v4(
                [ip[12], ip[13], ip[14], ip[15]],
                [ip[16], ip[17], ip[18], ip[19]],
                lay.proto,
                0,
            )
        };
        let word = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
        let ip_base = if lay.v6 {
            0
        } else {
            let s = ones_sum(&ip[..lay.l3_header_len]);
            // Remove total length (2), ID (4) and checksum (10).
            ones_sub(ones_sub(ones_sub(s, word(ip, 2)), word(ip, 4)), word(ip, 10))
        };
        let tcp = lay.l4 == L4::Tcp;
        let mut l4_base = ones_sub(ones_sum(l4), field_sum);
        if tcp {
            // Sequence number (4..8) and the flag byte (low byte of word 12).
            l4_base = ones_sub(ones_sub(ones_sub(l4_base, word(l4, 4)), word(l4, 6)), l4[13] as u16);
        } else {
            l4_base = ones_sub(l4_base, word(l4, 4));
        }
        let flags = if tcp { l4[13] } else { 0 };
        let n = plan.segs;
        let flags_of = |i: usize| if plan.keep_flags { flags } else { tcp::segment_flags(flags, i, n, plan.accecn) };
        HeaderFixer {
            lay,
            proto: plan.proto,
            segs: n,
            sw_csum: plan.sw_csum,
            ip_id: if lay.v6 { 0 } else { word(ip, 4) },
            id_step: if plan.fixed_id { 0 } else { plan.id_stride() },
            wire_cap: plan.wire_cap(),
            seq: if tcp { u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]) } else { 0 },
            seg_flags: if n <= 1 { [flags_of(0); 3] } else { [flags_of(0), flags_of(1), flags_of(n - 1)] },
            l4_hdr_len: lay.hdr_len - lay.l4_offset,
            addr_sum,
            ip_base,
            l4_base,
        }
    }

    /// The fields and partial sums that depend only on a segment's payload
    /// length `len` (every segment but the last has the same): computed
    /// once per length, so that [`HeaderFixer::fix`] adds only what changes
    /// per segment (IPv4 ID, TCP sequence number and flags, payload sum).
    #[inline]
    pub(crate) fn for_len(&self, len: usize) -> SegLen {
        use crate::csum::fold32;
        let lay = &self.lay;
        let l4_len = self.l4_hdr_len + len;
        // The IP length states one segment of a GSO_PARTIAL chunk; the L4
        // length and pseudo-header cover the whole chunk (Linux: the inner
        // IP length from `gso_size`, `tcp_gso_segment`/`__udp_gso_segment`
        // with `mss *= gso_segs`).
        let wire = len.min(self.wire_cap);
        let l3_field =
            if lay.v6 { lay.hdr_len - lay.l3_offset - 40 + wire } else { lay.hdr_len - lay.l3_offset + wire };
        // The L4 length came from an IP length: its halves and the other
        // terms cannot overflow the u32.
        let pseudo = fold32(u32::from(self.addr_sum) + (l4_len >> 16) as u32 + (l4_len & 0xFFFF) as u32);
        let mut l4_part = u32::from(pseudo) + u32::from(self.l4_base);
        if self.proto == GsoProtocol::UdpL4 {
            l4_part += l4_len as u32 & 0xFFFF;
        }
        SegLen {
            len,
            l3_field: l3_field as u16,
            l4_len: l4_len as u16,
            ip_sum: fold32(u32::from(self.ip_base) + (l3_field as u32 & 0xFFFF)),
            pseudo,
            l4_part,
        }
    }

    /// Writes the fields that depend only on the payload length of `k` (IP
    /// length, UDP length) into the template `hdr`: every segment of that
    /// length is a copy of it (linear output) or the template itself (SG),
    /// so [`HeaderFixer::fix`] leaves these fields alone.
    ///
    /// # Panics
    /// If `hdr` is shorter than the template's header block (a programming error).
    #[inline]
    pub(crate) fn write_len(&self, hdr: &mut [u8], k: &SegLen) {
        let lay = &self.lay;
        write_ip_len(hdr, lay.l3_offset, lay.v6, k.l3_field);
        if self.proto == GsoProtocol::UdpL4 {
            let l4 = lay.l4_offset;
            hdr[l4 + 4..l4 + 6].copy_from_slice(&k.l4_len.to_be_bytes());
        }
    }

    /// Rewrites the per-segment fields of `hdr` (a copy of the template's
    /// `hdr_len` bytes, with [`HeaderFixer::write_len`] of `k` applied) for
    /// segment `i`, which starts `offset` bytes into the payload and
    /// carries `k.len` bytes whose sum (at even parity) is `psum`; `k` is
    /// [`HeaderFixer::for_len`] of that length. Returns the segment's L4
    /// pseudo-header sum (for a tunnel's outer checksum by LCO).
    /// Always inlined: called once per segment, a call's register saving
    /// and argument passing were a tenth of its cost.
    ///
    /// # Panics
    /// If `hdr` is shorter than the template's header block (a programming error).
    ///
    /// `TCP_SW`: the caller knows the plan is TCP with software checksums
    /// (its protocol and checksum flags are then not tested).
    #[inline(always)]
    pub(crate) fn fix<const TCP_SW: bool>(
        &self,
        hdr: &mut [u8],
        i: usize,
        offset: usize,
        k: &SegLen,
        psum: u16,
    ) -> u16 {
        use crate::csum::fold32;
        let proto = if TCP_SW { GsoProtocol::TcpV4 } else { self.proto };
        let sw_csum = TCP_SW || self.sw_csum;
        // Sums are taken in u32 and folded once (`fold32`: the value a chain
        // of `ones_add` gives). Each header is borrowed as a fixed-size array
        // (one bounds check, then constant offsets).
        let lay = &self.lay;
        let l3 = lay.l3_offset;
        if !lay.v6 {
            let ip: &mut [u8; 20] = (&mut hdr[l3..l3 + 20]).try_into().expect("IPv4 header in the block");
            // offload-rules 3.2: ID + i unless FIXEDID; USO always increments (3.3).
            let id = self.ip_id.wrapping_add((i as u16).wrapping_mul(self.id_step));
            let c = !crate::csum::ones_add(k.ip_sum, id);
            ip[4..6].copy_from_slice(&id.to_be_bytes());
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
        let l4 = lay.l4_offset;
        let value = match proto {
            GsoProtocol::TcpV4 | GsoProtocol::TcpV6 => {
                let tcp: &mut [u8; 20] = (&mut hdr[l4..l4 + 20]).try_into().expect("TCP header in the block");
                let seq = self.seq.wrapping_add(offset as u32);
                let which = usize::from(i > 0) + usize::from(i + 1 >= self.segs);
                let flags = self.seg_flags[which];
                tcp[4..8].copy_from_slice(&seq.to_be_bytes());
                tcp[13] = flags;
                let value = if sw_csum {
                    !fold32(k.l4_part + (seq >> 16) + (seq & 0xFFFF) + u32::from(flags) + u32::from(psum))
                } else {
                    k.pseudo
                };
                tcp[16..18].copy_from_slice(&value.to_be_bytes());
                return k.pseudo;
            }
            GsoProtocol::UdpL4 => {
                if sw_csum {
                    udp::mangle_zero(!fold32(k.l4_part + u32::from(psum)))
                } else {
                    k.pseudo
                }
            }
        };
        hdr[l4 + 6..l4 + 8].copy_from_slice(&value.to_be_bytes());
        k.pseudo
    }
}

/// What [`HeaderFixer::for_len`] computes for one segment payload length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SegLen {
    /// The payload length these values are for.
    pub(crate) len: usize,
    /// IPv4 total length or IPv6 payload length.
    l3_field: u16,
    /// L4 length (written as the UDP length).
    l4_len: u16,
    /// IPv4 header sum without the ID, folded: a segment adds its ID
    /// with one end-around carry.
    ip_sum: u16,
    /// L4 pseudo-header sum with this length.
    pseudo: u16,
    /// Pseudo-header plus the L4 header's fixed part (plus the UDP length
    /// for UDP), unfolded.
    l4_part: u32,
}

/// The pseudo-header contribution of an L4 length (32-bit for IPv6; the
/// IPv4 16-bit length gives the same value).
#[inline]
fn len_sum(l4_len: usize) -> u16 {
    crate::csum::ones_add((l4_len >> 16) as u16, (l4_len & 0xFFFF) as u16)
}
