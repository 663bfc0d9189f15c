//! The transmit side of a paravirtual link: the driver of one virtqueue,
//! its buffers, the two submission forms and the transmit policy.
//!
//! # Buffers
//!
//! Every descriptor head `h` owns a [`SLOT_SIZE`]-byte slot and an indirect
//! table of [`MAX_INDIRECT`] entries at fixed places of the queue's data
//! area; frames that do not fit a slot (superpackets) also take 4 KiB chunks
//! from a pool of [`super::ring::CHUNKS`], returned when the head is
//! reclaimed. The free lists are private to this side: a peer cannot corrupt
//! them, only return ids, which [`super::ring::VqDriver::reclaim`] checks.
//!
//! # Forms
//!
//! - **direct**: one descriptor, `virtio_net_hdr_v1` (12 bytes) and the frame
//!   in one slot;
//! - **indirect**: one ring descriptor with `INDIRECT` pointing at the head's
//!   table: entry 0 is the metadata (the header, plus [`HdrInfo`] when the
//!   receiver needs header information), then, with header information, one
//!   entry each for the L2, L3 and L4 headers, then the payload buffers
//!   (without it: the frame's buffers). Required for frames larger than a
//!   slot and whenever header information must be given.
//!
//! # The transmit policy ([`TxStrategy`])
//!
//! Only packets with a partial checksum (`CHECKSUM_PARTIAL`) have a choice,
//! and only when the receiver needs header information with a
//! checksum-offloaded frame (`GUEST_HDRLEN` negotiated):
//!
//! | strategy | GSO, batched (`more`) or larger than a slot | lone non-GSO packet |
//! |---|---|---|
//! | [`TxStrategy::SwCsumDirect`] (default) | offload + header info, indirect | checksum completed in software while it is copied, **direct** |
//! | [`TxStrategy::OffloadIndirect`] | offload + header info, indirect | offload + header info, indirect |
//! | [`TxStrategy::DirectNoCsum`] | offload without header info (indirect only if it does not fit) | offload without header info, direct: what the old driver did, unsafely |
//!
//! "Batched" is the stack's `xmit_more`: the caller says more packets
//! follow at once, so the kick is deferred to the last one; the original
//! driver kept the offload there because a device works through a batch as
//! a stream, while for a lone packet the extra descriptors add to its
//! latency. (On this software link the indirect form costs throughput in
//! batches too: see `superpacket bench pv-tx`.) Without `GUEST_HDRLEN` every
//! strategy offloads in the direct form (no header information is needed);
//! a receiver without checksum offload always gets software checksums. A
//! frame whose headers cannot be described ([`HdrInfo::from_frame`]: IPv6
//! extension headers, IP fragments, other protocols than TCP and UDP) gets a
//! software checksum too.
//!
//! The software checksum costs almost nothing because it is fused with the
//! copy into the slot ([`superpacket::csum::copy_and_sum`]): the bytes are read
//! once either way.

use super::hdrinfo::{HDR_INFO_LEN, HdrInfo};
use super::proto;
use super::ring::{
    CHUNK_SIZE, CHUNKS, DESC_F_INDIRECT, DESC_F_NEXT, DESC_SIZE, Desc, MAX_INDIRECT, QueueLayout, RingError, SLOT_SIZE,
    VqDriver,
};
use super::shm::ShmRegion;
use superpacket::csum::{copy_and_sum, ones_add};
use superpacket::packet::virtio::{F_NEEDS_CSUM, GSO_ECN, GSO_TCPV4, GSO_TCPV6, GSO_UDP_L4, HdrByteOrder, HdrLayout};
use superpacket::packet::{ChecksumState, GsoProtocol, GsoType, OffloadMeta, virtio::VirtioNetHdr};

/// Bytes of the `virtio_net_hdr_v1` in front of every frame.
pub const VNET_HDR_LEN: usize = 12;
/// Bytes at the start of an indirect frame's slot kept for the metadata.
pub const META_AREA: usize = 32;
/// Longest frame: a 64 KB IP packet with its link header and tags.
pub const MAX_FRAME: usize = 65_535 + 64;
/// Longest frame of the direct form.
pub const MAX_DIRECT_FRAME: usize = SLOT_SIZE - VNET_HDR_LEN;
/// Chunks a head may hold.
const MAX_HEAD_CHUNKS: usize = MAX_FRAME.div_ceil(CHUNK_SIZE) + 1;

pub use crate::io::tx_policy::{TxForm, TxStrategy};

/// What the receiving side of a queue accepts (from the negotiated features).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RxCaps {
    /// Partial checksums.
    pub csum: bool,
    /// TCPv4 superpackets.
    pub tso4: bool,
    /// TCPv6 superpackets.
    pub tso6: bool,
    /// UDP_L4 superpackets.
    pub uso: bool,
    /// The TCP ECN GSO flag.
    pub ecn: bool,
    /// Header information is required with every checksum-offloaded frame.
    pub hdr_info: bool,
}

impl RxCaps {
    /// What the receiver of queue `queue` accepts under `features` (queue
    /// 0: the engine, `CSUM`/`HOST_*`; queue 1: the client, `GUEST_*`).
    pub fn for_queue(features: u64, queue: usize) -> RxCaps {
        let has = |f: u64| features & f != 0;
        let csum = has(if queue == 0 { proto::F_CSUM } else { proto::F_GUEST_CSUM });
        let (tso4, tso6, uso, ecn) = if queue == 0 {
            (has(proto::F_HOST_TSO4), has(proto::F_HOST_TSO6), has(proto::F_HOST_USO), has(proto::F_HOST_ECN))
        } else {
            (
                has(proto::F_GUEST_TSO4),
                has(proto::F_GUEST_TSO6),
                has(proto::F_GUEST_USO4) && has(proto::F_GUEST_USO6),
                has(proto::F_GUEST_ECN),
            )
        };
        RxCaps { csum, tso4, tso6, uso, ecn, hdr_info: csum && has(proto::F_GUEST_HDRLEN) }
    }

    /// True if a superpacket with `gso_type` may be sent whole.
    pub fn takes_gso(&self, gso_type: GsoType) -> bool {
        let proto_ok = match gso_type.protocol() {
            Some(GsoProtocol::TcpV4) => self.tso4,
            Some(GsoProtocol::TcpV6) => self.tso6,
            Some(GsoProtocol::UdpL4) => self.uso,
            None => false,
        };
        self.csum && proto_ok && (!gso_type.contains(GsoType::TCP_ECN) || self.ecn)
    }

    /// The GSO types taken whole.
    pub fn gso_types(&self) -> GsoType {
        let mut t = GsoType::NONE;
        if self.csum {
            for (on, bit) in [(self.tso4, GsoType::TCPV4), (self.tso6, GsoType::TCPV6), (self.uso, GsoType::UDP_L4)] {
                if on {
                    t = t.union(bit);
                }
            }
            if self.ecn && (self.tso4 || self.tso6) {
                t = t.union(GsoType::TCP_ECN);
            }
        }
        t
    }
}

/// Why a frame was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxError {
    /// No free descriptor or chunk: the receiver is behind.
    #[error("transmit ring full")]
    RingFull,
    /// A superpacket the receiver does not take whole (or whose headers
    /// cannot be described although header information is required): the
    /// caller segments it in software.
    #[error("superpacket must be segmented in software for this receiver")]
    NeedsSoftwareGso,
    /// Shorter than an Ethernet header.
    #[error("frame of {0} bytes is too short")]
    TooShort(usize),
    /// Longer than [`MAX_FRAME`].
    #[error("frame of {0} bytes is too long")]
    TooLong(usize),
    /// A partial checksum whose field lies outside the frame.
    #[error("partial checksum outside the frame")]
    BadChecksumOffsets,
    /// A GSO type virtio cannot carry.
    #[error("GSO type cannot be expressed in a virtio_net_hdr")]
    Unrepresentable,
    /// The peer broke the ring protocol.
    #[error("{0}")]
    Ring(#[from] RingError),
}

impl TxError {
    /// Short stable name for drop counters.
    pub fn reason(&self) -> &'static str {
        match self {
            TxError::RingFull => "tx-ring-full",
            TxError::NeedsSoftwareGso => "tx-needs-sw-gso",
            TxError::TooShort(_) => "tx-too-short",
            TxError::TooLong(_) => "tx-too-long",
            TxError::BadChecksumOffsets => "tx-bad-csum-offsets",
            TxError::Unrepresentable => "unrepresentable-gso-type",
            TxError::Ring(e) => e.reason(),
        }
    }
}

/// Counters of the transmit side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames sent (superpackets count once).
    pub frames: u64,
    /// Their bytes (without headers).
    pub bytes: u64,
    /// GSO superpackets among them.
    pub superpackets: u64,
    /// Sent direct, nothing offloaded.
    pub direct: u64,
    /// Sent direct with the checksum offloaded.
    pub direct_offload: u64,
    /// Sent direct after a software checksum.
    pub direct_swcsum: u64,
    /// Sent indirect without header information.
    pub indirect: u64,
    /// Sent indirect after a software checksum (too large for a slot).
    pub indirect_swcsum: u64,
    /// Sent indirect with header information.
    pub indirect_hdr_info: u64,
    /// Checksums offloaded without the header information the receiver
    /// asked for ([`TxStrategy::DirectNoCsum`]).
    pub csum_without_hdr_info: u64,
    /// Software checksums because the headers could not be described or
    /// the receiver takes no partial checksums.
    pub swcsum_fallback: u64,
    /// Sends refused because the ring was full.
    pub ring_full: u64,
    /// Kicks sent (eventfd writes).
    pub kicks: u64,
}

/// The form chosen for a frame.
struct Choice {
    form: TxForm,
    info: Option<HdrInfo>,
    /// A software checksum the strategy did not ask for (no offload or no
    /// describable headers).
    fallback: bool,
}

/// Chunks held by one head.
#[derive(Debug, Clone, Copy)]
struct HeadBufs {
    chunks: [u16; MAX_HEAD_CHUNKS],
    n: u8,
}

/// Buffers reused for every frame (written before they are read, never
/// zeroed again).
#[derive(Debug)]
struct Scratch {
    probe: [u8; PROBE],
    table: [Desc; MAX_INDIRECT],
    tbytes: [u8; MAX_INDIRECT * DESC_SIZE],
    ext: Extents,
}

/// Bytes of a frame's start parsed for its headers when they are not all in
/// the first part.
const PROBE: usize = 256;

/// The transmit side of one queue.
#[derive(Debug)]
pub struct PvTx {
    vq: VqDriver,
    lay: QueueLayout,
    /// What the receiver accepts.
    pub caps: RxCaps,
    /// The policy in force.
    pub strategy: TxStrategy,
    heads: Vec<HeadBufs>,
    free_chunks: Vec<u16>,
    kick_pending: bool,
    scratch: Box<Scratch>,
    /// Counters.
    pub stats: TxStats,
}

/// A frame given as slices, read in order by the copy.
struct Src<'a, 'b> {
    parts: &'b [&'a [u8]],
    i: usize,
    off: usize,
    pos: usize,
}

impl<'a> Src<'a, '_> {
    /// Up to `max` next bytes (shorter at a part boundary); empty at the end.
    #[inline]
    fn take(&mut self, max: usize) -> &'a [u8] {
        while self.i < self.parts.len() {
            let p: &'a [u8] = self.parts[self.i];
            if self.off < p.len() {
                let n = (p.len() - self.off).min(max);
                let s = &p[self.off..self.off + n];
                self.off += n;
                self.pos += n;
                return s;
            }
            self.i += 1;
            self.off = 0;
        }
        &[]
    }
}

/// Copies `dst.len()` bytes of `src` into `dst`; bytes at frame offsets
/// `>= from` are summed into `sum` (ones' complement, network order).
#[inline]
fn copy_summing(dst: &mut [u8], src: &mut Src<'_, '_>, from: Option<usize>, sum: &mut u16) {
    let mut at = 0;
    while at < dst.len() {
        let pos = src.pos;
        let room = dst.len() - at;
        let lim = match from {
            Some(c) if pos < c => room.min(c - pos),
            _ => room,
        };
        let s = src.take(lim);
        if s.is_empty() {
            return;
        }
        let d = &mut dst[at..at + s.len()];
        match from {
            Some(c) if pos >= c => {
                let part = copy_and_sum(d, s);
                // A piece starting at an odd offset of the summed data
                // contributes its byte-swapped sum (RFC 1071 2(B)).
                let part = if (pos - c) % 2 == 1 { part.swap_bytes() } else { part };
                *sum = ones_add(*sum, part);
            }
            _ => d.copy_from_slice(s),
        }
        at += s.len();
    }
}

/// Where the frame's bytes go: region extents in frame order.
#[derive(Debug)]
struct Extents {
    ext: [(u64, usize); MAX_INDIRECT],
    n: usize,
}

impl Extents {
    /// Region offset of frame offset `at`.
    fn addr_of(&self, mut at: usize) -> Option<u64> {
        for &(a, l) in &self.ext[..self.n] {
            if at < l {
                return Some(a + at as u64);
            }
            at -= l;
        }
        None
    }
}

impl PvTx {
    /// The transmit side of queue `lay`, for a receiver accepting `caps`.
    ///
    /// # Errors
    /// The layout does not fit the region.
    pub fn new(
        shm: &mut ShmRegion,
        lay: QueueLayout,
        event_idx: bool,
        caps: RxCaps,
        strategy: TxStrategy,
    ) -> Result<PvTx, RingError> {
        let vq = VqDriver::new(shm, lay, event_idx)?;
        Ok(PvTx {
            vq,
            lay,
            caps,
            strategy,
            heads: vec![HeadBufs { chunks: [0; MAX_HEAD_CHUNKS], n: 0 }; lay.num as usize],
            free_chunks: (0..CHUNKS as u16).rev().collect(),
            kick_pending: false,
            scratch: Box::new(Scratch {
                probe: [0; PROBE],
                table: [Desc::default(); MAX_INDIRECT],
                tbytes: [0; MAX_INDIRECT * DESC_SIZE],
                ext: Extents { ext: [(0, 0); MAX_INDIRECT], n: 0 },
            }),
            stats: TxStats::default(),
        })
    }

    /// Descriptors in flight.
    pub fn in_flight(&self) -> usize {
        self.vq.in_flight()
    }

    /// Takes back used descriptors and their chunks.
    ///
    /// # Errors
    /// The peer returned something not in flight.
    #[inline]
    pub fn reclaim(&mut self, shm: &ShmRegion) -> Result<usize, RingError> {
        let heads = &mut self.heads;
        let free = &mut self.free_chunks;
        self.vq.reclaim(shm, |h| {
            let hb = &mut heads[h as usize];
            free.extend_from_slice(&hb.chunks[..hb.n as usize]);
            hb.n = 0;
        })
    }

    /// True if a send would find a free descriptor right now (after reclaiming).
    ///
    /// # Errors
    /// As [`PvTx::reclaim`].
    pub fn has_room(&mut self, shm: &ShmRegion) -> Result<bool, RingError> {
        self.reclaim(shm)?;
        Ok(self.vq.free() > 0)
    }

    /// Asks the receiver for a call when it uses an entry; true if some
    /// are used already (do not sleep).
    ///
    /// # Errors
    /// A ring error.
    pub fn enable_calls(&mut self, shm: &mut ShmRegion) -> Result<bool, RingError> {
        self.vq.enable_calls(shm)
    }

    /// Stops asking for calls.
    ///
    /// # Errors
    /// A ring error.
    pub fn disable_calls(&mut self, shm: &mut ShmRegion) -> Result<(), RingError> {
        self.vq.disable_calls(shm)
    }

    /// Whether the receiver must be kicked now for what was sent since the
    /// last decision (called after a send without `more`, or at a flush).
    ///
    /// # Errors
    /// A ring error.
    #[inline]
    pub fn kick_needed(&mut self, shm: &ShmRegion) -> Result<bool, RingError> {
        self.kick_pending = false;
        let need = self.vq.kick_needed(shm)?;
        if need {
            self.stats.kicks += 1;
        }
        Ok(need)
    }

    /// True if sends with `more` left a kick decision pending.
    pub fn kick_pending(&self) -> bool {
        self.kick_pending
    }

    /// Chooses the form for a frame (see the module documentation).
    fn choose(
        caps: &RxCaps,
        strategy: TxStrategy,
        meta: &OffloadMeta,
        first: &[u8],
        total: usize,
        more: bool,
    ) -> Result<Choice, TxError> {
        let fits = total <= MAX_DIRECT_FRAME;
        let partial = matches!(meta.csum, ChecksumState::Partial { .. });
        let info = || HdrInfo::from_frame(first);
        let pick = |form, info, fallback| Ok(Choice { form, info, fallback });
        if meta.is_gso() {
            if !caps.takes_gso(meta.gso_type) {
                return Err(TxError::NeedsSoftwareGso);
            }
            if !caps.hdr_info || !partial || strategy == TxStrategy::DirectNoCsum {
                return pick(TxForm::Indirect, None, false);
            }
            return match info() {
                Some(i) => pick(TxForm::IndirectHdrInfo, Some(i), false),
                None => Err(TxError::NeedsSoftwareGso),
            };
        }
        if !partial {
            return pick(if fits { TxForm::Direct } else { TxForm::Indirect }, None, false);
        }
        let swcsum = if fits { TxForm::DirectSwCsum } else { TxForm::IndirectSwCsum };
        if !caps.csum {
            return pick(swcsum, None, true);
        }
        let offload_plain = if fits { TxForm::DirectOffload } else { TxForm::Indirect };
        if !caps.hdr_info {
            return pick(offload_plain, None, false);
        }
        let with_info = || match info() {
            Some(i) => pick(TxForm::IndirectHdrInfo, Some(i), false),
            None => pick(swcsum, None, true),
        };
        match strategy {
            TxStrategy::OffloadIndirect => with_info(),
            TxStrategy::DirectNoCsum => pick(offload_plain, None, false),
            TxStrategy::SwCsumDirect if more || !fits => with_info(),
            TxStrategy::SwCsumDirect => pick(TxForm::DirectSwCsum, None, false),
        }
    }

    /// Sends one frame made of `parts` (in order) with metadata `meta`.
    /// `more`: more frames follow at once (`xmit_more`), so the kick
    /// decision waits for the last one ([`PvTx::kick_pending`]). Returns the
    /// form used. Nothing is allocated.
    ///
    /// # Errors
    /// A full ring, a frame the receiver cannot take ([`TxError::NeedsSoftwareGso`]),
    /// a malformed frame, or a ring error.
    pub fn send(
        &mut self,
        shm: &mut ShmRegion,
        parts: &[&[u8]],
        meta: &OffloadMeta,
        more: bool,
    ) -> Result<TxForm, TxError> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total < 14 {
            return Err(TxError::TooShort(total));
        }
        if total > MAX_FRAME {
            return Err(TxError::TooLong(total));
        }
        let partial = match meta.csum {
            ChecksumState::Partial { start, offset } => {
                let (s, o) = (start as usize, offset as usize);
                if s + o + 2 > total {
                    return Err(TxError::BadChecksumOffsets);
                }
                Some((s, o))
            }
            _ => None,
        };
        // Headers are normally in the first part (the linear area); else a
        // copy of the first bytes is parsed.
        let first: &[u8] = if parts[0].len() >= PROBE || parts[0].len() == total {
            parts[0]
        } else {
            let probe = &mut self.scratch.probe;
            let mut src = Src { parts, i: 0, off: 0, pos: 0 };
            let n = total.min(PROBE);
            let mut at = 0;
            while at < n {
                let s = src.take(n - at);
                probe[at..at + s.len()].copy_from_slice(s);
                at += s.len();
            }
            &probe[..n]
        };
        let Choice { form, info, fallback } = Self::choose(&self.caps, self.strategy, meta, first, total, more)?;
        let hdr_len = match info {
            Some(i) => i.hdr_len() as u16,
            None if meta.is_gso() => VirtioNetHdr::from_meta(meta, first, false).map(|h| h.hdr_len).unwrap_or(0),
            None => 0,
        };

        self.reclaim(shm)?;
        let chunks_needed = match form {
            TxForm::Indirect | TxForm::IndirectSwCsum | TxForm::IndirectHdrInfo => {
                total.saturating_sub(SLOT_SIZE - META_AREA).div_ceil(CHUNK_SIZE)
            }
            _ => 0,
        };
        if chunks_needed > self.free_chunks.len() {
            self.stats.ring_full += 1;
            return Err(TxError::RingFull);
        }
        let Some(head) = self.vq.alloc() else {
            self.stats.ring_full += 1;
            return Err(TxError::RingFull);
        };
        let r = self.fill(shm, head, parts, total, meta, form, info, hdr_len, partial, chunks_needed);
        if let Err(e) = r {
            let hb = &mut self.heads[head as usize];
            self.free_chunks.extend_from_slice(&hb.chunks[..hb.n as usize]);
            hb.n = 0;
            self.vq.unalloc(head);
            return Err(e);
        }
        self.vq.publish(shm, head)?;

        let s = &mut self.stats;
        s.frames += 1;
        s.bytes += total as u64;
        s.superpackets += u64::from(meta.is_gso());
        match form {
            TxForm::Direct => s.direct += 1,
            TxForm::DirectOffload => s.direct_offload += 1,
            TxForm::DirectSwCsum => s.direct_swcsum += 1,
            TxForm::Indirect => s.indirect += 1,
            TxForm::IndirectSwCsum => s.indirect_swcsum += 1,
            TxForm::IndirectHdrInfo => s.indirect_hdr_info += 1,
        }
        if partial.is_some() {
            let offloaded = matches!(form, TxForm::DirectOffload | TxForm::Indirect);
            if offloaded && self.caps.hdr_info {
                s.csum_without_hdr_info += 1;
            }
            s.swcsum_fallback += u64::from(fallback);
        }
        self.kick_pending = true;
        Ok(form)
    }

    /// Writes the buffers and the ring descriptor of `head`.
    #[allow(clippy::too_many_arguments)]
    fn fill(
        &mut self,
        shm: &mut ShmRegion,
        head: u16,
        parts: &[&[u8]],
        total: usize,
        meta: &OffloadMeta,
        form: TxForm,
        info: Option<HdrInfo>,
        hdr_len: u16,
        partial: Option<(usize, usize)>,
        chunks_needed: usize,
    ) -> Result<(), TxError> {
        let slot = self.lay.slot(head);
        // The header.
        let mut hdr = VirtioNetHdr::default();
        let sw_csum = matches!(form, TxForm::DirectSwCsum | TxForm::IndirectSwCsum);
        if let (Some((s, o)), false) = (partial, sw_csum) {
            hdr.flags = F_NEEDS_CSUM;
            hdr.csum_start = s as u16;
            hdr.csum_offset = o as u16;
        }
        if meta.is_gso() {
            let t = meta.gso_type;
            hdr.gso_type = match t.protocol() {
                Some(GsoProtocol::TcpV4) => GSO_TCPV4,
                Some(GsoProtocol::TcpV6) => GSO_TCPV6,
                Some(GsoProtocol::UdpL4) => GSO_UDP_L4,
                None => return Err(TxError::Unrepresentable),
            };
            if t.contains(GsoType::TCP_ECN) {
                hdr.gso_type |= GSO_ECN;
            }
            hdr.gso_size = meta.gso_size;
        }
        hdr.hdr_len = hdr_len;
        let mut hbytes = [0u8; VNET_HDR_LEN + HDR_INFO_LEN];
        hdr.emit(&mut hbytes, HdrLayout::MrgRxbuf, HdrByteOrder::Little).map_err(|_| TxError::Unrepresentable)?;
        let meta_len = match info {
            Some(i) => {
                i.encode(&mut hbytes[VNET_HDR_LEN..]);
                VNET_HDR_LEN + HDR_INFO_LEN
            }
            None => VNET_HDR_LEN,
        };

        let csum_from = if sw_csum { partial.map(|(s, _)| s) } else { None };
        let mut sum = 0u16;
        let mut src = Src { parts, i: 0, off: 0, pos: 0 };
        // The checksum of a software-completed frame: the sum covers the
        // field, which holds the pseudo-header sum (offload-rules 0.3).
        let check = |sum: u16, offset: usize| {
            let c = !sum;
            if c == 0 && offset == 6 { 0xFFFF } else { c }
        };
        let ring_desc = match form {
            TxForm::Direct | TxForm::DirectOffload | TxForm::DirectSwCsum => {
                shm.with_mut(slot, VNET_HDR_LEN + total, |buf| {
                    buf[..VNET_HDR_LEN].copy_from_slice(&hbytes[..VNET_HDR_LEN]);
                    let frame = &mut buf[VNET_HDR_LEN..];
                    copy_summing(frame, &mut src, csum_from, &mut sum);
                    if let (Some((s, o)), true) = (partial, sw_csum) {
                        frame[s + o..s + o + 2].copy_from_slice(&check(sum, o).to_be_bytes());
                    }
                })
                .map_err(RingError::from)?;
                Desc { addr: slot, len: (VNET_HDR_LEN + total) as u32, flags: 0, next: 0 }
            }
            TxForm::Indirect | TxForm::IndirectSwCsum | TxForm::IndirectHdrInfo => {
                let sc = &mut *self.scratch;
                // Extents: the rest of the slot, then chunks.
                let ext = &mut sc.ext;
                ext.ext[0] = (slot + META_AREA as u64, total.min(SLOT_SIZE - META_AREA));
                ext.n = 1;
                let hb = &mut self.heads[head as usize];
                let mut left = total - ext.ext[0].1;
                for _ in 0..chunks_needed {
                    let c = self.free_chunks.pop().expect("counted before");
                    hb.chunks[hb.n as usize] = c;
                    hb.n += 1;
                    let l = left.min(CHUNK_SIZE);
                    ext.ext[ext.n] = (self.lay.chunk(c), l);
                    ext.n += 1;
                    left -= l;
                }
                shm.copy_in(slot, &hbytes[..meta_len]).map_err(RingError::from)?;
                for &(a, l) in &ext.ext[..ext.n] {
                    shm.with_mut(a, l, |buf| copy_summing(buf, &mut src, csum_from, &mut sum))
                        .map_err(RingError::from)?;
                }
                if let (Some((s, o)), true) = (partial, sw_csum) {
                    for (k, byte) in check(sum, o).to_be_bytes().into_iter().enumerate() {
                        let at = ext.addr_of(s + o + k).ok_or(TxError::BadChecksumOffsets)?;
                        shm.copy_in(at, &[byte]).map_err(RingError::from)?;
                    }
                }
                // The table: metadata, [L2, L3, L4], then the data cut at
                // extent (and header) boundaries.
                let table = &mut sc.table;
                table[0] = Desc { addr: slot, len: meta_len as u32, flags: 0, next: 0 };
                let mut n = 1;
                let mut cuts = [0usize; 3];
                let ncuts = match info {
                    Some(i) => {
                        cuts = [i.l2_len as usize, i.l4_offset(), i.hdr_len()];
                        3
                    }
                    None => 0,
                };
                let mut pos = 0;
                let mut ext_start = 0;
                for &(a, l) in &ext.ext[..ext.n] {
                    let ext_end = ext_start + l;
                    while pos < ext_end {
                        let next_cut =
                            cuts[..ncuts].iter().copied().find(|&c| c > pos && c < ext_end).unwrap_or(ext_end);
                        table[n] = Desc {
                            addr: a + (pos - ext_start) as u64,
                            len: (next_cut - pos) as u32,
                            flags: 0,
                            next: 0,
                        };
                        n += 1;
                        pos = next_cut;
                    }
                    ext_start = ext_end;
                }
                let tbytes = &mut sc.tbytes;
                for (i, d) in table[..n].iter_mut().enumerate() {
                    if i + 1 < n {
                        d.flags = DESC_F_NEXT;
                        d.next = (i + 1) as u16;
                    }
                    d.encode(&mut tbytes[i * DESC_SIZE..(i + 1) * DESC_SIZE]);
                }
                let table_at = self.lay.table(head);
                shm.copy_in(table_at, &tbytes[..n * DESC_SIZE]).map_err(RingError::from)?;
                Desc { addr: table_at, len: (n * DESC_SIZE) as u32, flags: DESC_F_INDIRECT, next: 0 }
            }
        };
        let mut d = [0u8; DESC_SIZE];
        ring_desc.encode(&mut d);
        shm.copy_in(self.lay.desc_at(head), &d).map_err(RingError::from)?;
        Ok(())
    }
}
