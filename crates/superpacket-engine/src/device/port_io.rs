//! Port drivers backed by real kernel I/O: a TAP device ([`TapDriver`]), a
//! TUN device (the queue under [`crate::device::tun_port::TunDriver`]) or an
//! AF_PACKET socket on an interface ([`PacketSocketDriver`]), all with
//! virtio_net_hdr framing (offload-rules section 4), so superpackets cross
//! into the kernel whole and come out of it whole.
//!
//! All are one generic driver, [`IoPortDriver`], over an [`IoEndpoint`]
//! (TAP and TUN queues: [`tuntap`], built with the `tap` or `tun` feature;
//! AF_PACKET sockets: [`af_packet`], the `af-packet` feature):
//!
//! - **transmit** ([`PortDriver::xmit`]): the virtio_net_hdr is built from the
//!   packet's metadata ([`VirtioNetHdr::from_meta_as`], offload-rules 4.3: GSO
//!   type and size, `NEEDS_CSUM` for a partial checksum) and written with the
//!   packet's chunks ([`Packet::all_chunks`]: linear area, segments, then the
//!   frag list): no payload copy. Per frame (one vectored write, packets of
//!   more than [`STACK_PARTS`] chunks gathered into a reusable buffer first)
//!   or batched (below).
//! - **software segmentation output** ([`PortDriver::sink`]): scatter-gather
//!   frames are written as header + payload slices, linear frames from a
//!   reusable buffer, each with a header from the frame's metadata.
//! - **receive** ([`PortDriver::recv`]): nonblocking reads, the header
//!   imported with the kernel's validation ([`VirtioNetHdr::to_meta`],
//!   [`ImportOptions`] with the endpoint's [`IoEndpoint::MEDIUM`]: raw IP
//!   for a TUN); a refused header is a drop counted with
//!   [`VirtioHdrError::reason`], never a panic. The [`Packet`] built from the
//!   frame is the one allocation (and copy) per received packet, as an skb
//!   is. A VLAN tag the kernel moved into skb metadata (AF_PACKET,
//!   `PACKET_AUXDATA` or the ring header) is put back into the frame.
//!
//! # Batched AF_PACKET I/O ([`PacketPortOptions::batch`] > 1)
//!
//! Chosen by measurement on this machine (`io::packet_ring::measure_paths`,
//! figures in `tests/af_packet_batch.rs`): a TPACKET_V2 RX ring received
//! clearly faster than `recvmmsg` (a streaming receiver: +20-45 % frames/s
//! for MTU frames, about twice for 64 KB superpackets: the kernel copies
//! into the ring in the delivering softirq and no system call is made per
//! packet), while a TX ring was no faster than `sendmmsg` for MTU frames
//! and 3-4 times slower for superpackets (every frame copied into the
//! ring). So:
//!
//! - **receive**: from an RX ring of [`PacketPortOptions::rx_ring_frames`]
//!   frames of [`RING_FRAME_SIZE`] bytes (or, with 0 ring frames, `recvmmsg`
//!   into preallocated slots), up to `batch` packets per refill, kept in a
//!   queue and handed out one by one by [`PortDriver::recv`].
//! - **transmit**: packets given to [`PortDriver::xmit`] are owned by the
//!   driver: they are queued as they are and written by one `sendmmsg`
//!   whose iovecs point at their chunks (no copy) when `batch` frames are
//!   queued or at [`PortDriver::flush`] (the end of an engine round, and on
//!   drop). Frames from the segmenter's sink are borrowed, so they are copied
//!   into a reusable arena (linear frames are built in it directly) and
//!   queued the same way; a frame larger than the arena is written at once,
//!   after the queue. The order of frames is kept. Errors of queued frames
//!   are counted by the driver and reported through
//!   [`PortDriver::take_drops`] (not returned by `xmit`).
//!
//! Queues, arena, iovec arrays and receive slots are allocated when the
//! driver opens and reused: no heap allocation per packet beyond the
//! received [`Packet`] itself. `batch` = 1 keeps one `sendmsg`/`recvmsg` per
//! frame, written at once (what [`PacketSocketDriver::open`] uses); a TAP
//! always works per frame.
//!
//! # Fanout ([`PacketPortOptions::fanout_group`])
//!
//! Each engine worker opens its own socket on the interface in the same
//! `PACKET_FANOUT` group (`PACKET_FANOUT_HASH`, the symmetric flow hash):
//! the kernel gives every received packet to exactly one socket, both
//! directions of a flow to the same one ([`crate::io::packet_socket`]).
//!
//! # Gone and back
//!
//! A receive or send failing with `ENETDOWN`, `ENXIO`, `ENODEV`, `EBADFD`
//! or `EIO` ([`is_link_gone`]: the interface was deleted or went down; a
//! TAP whose netdev was deleted answers `EBADFD`) marks the driver gone
//! ([`PortDriver::is_gone`]), counted once as drop reason `link-gone`;
//! queued frames and later transmissions are dropped as `link-gone` too.
//! [`PortDriver::reopen`] opens the same interface name in the same
//! namespace again with the same options (AF_PACKET: a new socket, new RX
//! ring, same fanout group; TAP: the TAP is created again, the same
//! offloads negotiated, the link brought up), then the driver works again;
//! its [`PortDriver::poll_fd`] changes. Only drivers opened by name
//! (`open`, `open_with`) can reopen.
//!
//! Errors on transmit are [`DriverError`]s whose `reason` the graph counts
//! as a drop on the port; errors in the segmenter's output, in batched
//! sends and on receive are counted by the driver ([`IoPortStats::drops`])
//! and reported to the graph through [`PortDriver::take_drops`]. Packets
//! the kernel dropped before the engine saw them, because the socket's RX
//! ring or receive queue was full (AF_PACKET `PACKET_STATISTICS`), are read
//! when the counters are published ([`PortDriver::driver_counters`]) and
//! reported the same way, as [`RX_KERNEL_FULL`].
//!
//! Features come from what the kernel accepted:
//!
//! - TAP and TUN: `TUNSETOFFLOAD` of [`TAP_OFFLOADS`] through
//!   [`crate::io::tuntap::TunTapDevice::negotiate_offload`]; CSUM gives HW_CSUM, TSO4 TSO, TSO6
//!   TSO6, TSO_ECN TSO_ECN, USO4+USO6 GSO_UDP_L4, UDP_TUNNEL_GSO
//!   GSO_UDP_TUNNEL and UDP_TUNNEL_GSO_CSUM GSO_UDP_TUNNEL_CSUM (a TAP on a
//!   kernel that accepts them, 6.17+, with the 24-byte virtio_net_hdr: VXLAN
//!   and Geneve superpackets cross whole both ways; elsewhere the engine
//!   segments them before the port, as before). The flags set which
//!   superpackets the kernel hands this port undivided on receive (the TAP's
//!   own netdev features, offload-rules 4.4); the kernel generation that
//!   accepts a flag also accepts the matching GSO type in headers written to
//!   the TAP (USO: both since 6.2). What the TAP hands the kernel is received
//!   in its namespace as one GSO skb, segmented only where it leaves (or
//!   never, if it is delivered locally): a TAP port takes superpackets.
//! - AF_PACKET: HW_CSUM, SG, TSO, TSO6 and GSO_UDP_L4 always: the kernel
//!   validates the header (`virtio_net_hdr_to_skb`) and segments in software
//!   when the interface lacks the offload (veth with `tso off`), or passes
//!   the GSO skb on (offload-rules 4.5; what the kernel did is recorded in
//!   the `superpacket-lab` crate's `oracle`).
//!
//! Both accept frag lists (their chunks are written in order) and any VLAN
//! depth ([`FeaturesCheck::Any`]): the kernel applies its own
//! `features_check` where the skb finally leaves. On this machine a QinQ
//! TCP superpacket sent through AF_PACKET crossed a veth (and a TAP) whole
//! ([`crate::io::packet_socket`] module documentation).

#[cfg(feature = "af-packet")]
pub mod af_packet;
#[cfg(any(feature = "tap", feature = "tun"))]
pub mod tuntap;

#[cfg(feature = "af-packet")]
pub use af_packet::{
    DEFAULT_BATCH, DEFAULT_RX_RING_FRAMES, MAX_RX_RING_FRAMES, PACKET_SOCKET_FEATURES, PacketPortOptions,
    PacketSocketDriver, RING_FRAME_SIZE,
};
#[cfg(feature = "tap")]
pub use tuntap::TapDriver;
#[cfg(any(feature = "tap", feature = "tun"))]
pub use tuntap::{TAP_OFFLOADS, TapPortOptions, tap_features};

use super::features::{FeaturesCheck, NetdevFeatures};
use super::port::{DriverError, PortDriver};
use crate::io::frame::{FrameSource, VlanInfo};
#[cfg(feature = "af-packet")]
use crate::io::packet_ring::RxLend;
use crate::io::sys::STACK_PARTS;
use crate::io::{IoError, NetNs};
use std::any::Any;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::os::fd::RawFd;
use superpacket::offload::gso::{SegmentSink, SgFrame};
use superpacket::packet::virtio::{ImportOptions, VirtioHdrError, VirtioNetHdr};
use superpacket::packet::{DEFAULT_HEADROOM, OffloadMeta, Packet, pool};
use superpacket::wire::Medium;

/// Most frames per batched system call on AF_PACKET ports.
pub const MAX_BATCH: usize = 1024;

/// Bytes of a lent ring frame copied into the packet's linear area (see
/// `IoPortDriver::import`): more than the longest header stack the device
/// graph edits in place (Ethernet, two VLAN tags, IPv4 with options, TCP
/// with options: 142 bytes). Lent frames are larger than [`pool::COPYBREAK`].
#[cfg(feature = "af-packet")]
const LENT_HEADER_BYTES: usize = 256;

/// Arena bytes per queued frame of a batched port (the arena holds `batch`
/// MTU-sized frames, and at least [`ARENA_MIN`] bytes).
const ARENA_PER_FRAME: usize = 2048;

/// Smallest arena of a batched port (a 64 KiB frame from the segmenter's
/// sink fits).
const ARENA_MIN: usize = 128 * 1024;

/// Most chunks of a queued packet (`UIO_MAXIOV` minus the header); more are
/// gathered and written at once.
const MAX_QUEUED_PARTS: usize = 1023;

/// A batched port flushes its send queue once the packets queued by value
/// hold this many bytes, even before `batch` frames: four 64 KB
/// superpackets. Each queued packet pins its receive buffer (a 128 KiB
/// pool buffer, or a lent ring frame) until the `sendmmsg`; 32 queued
/// superpackets pinned 2-4 MiB, more than this machine's 2 MiB L2, so the
/// next TAP read copied into a buffer that had left the cache. Flushing at
/// 256 KiB keeps the pool's few recycled buffers hot (the pool is LIFO).
/// Measured with `superpacket demo --config passthrough` (UDP, unpaced):
/// 17.2-18.1 Gbit/s and 0.37-0.43 engine CPU s/GB without the limit,
/// 19.4-20.0 Gbit/s and 0.35 s/GB with it.
pub const TX_QUEUE_FLUSH_BYTES: usize = 256 * 1024;

/// Most packets a single [`PortDriver::recv`] call discards (refused or
/// truncated) before it returns `None`, so that a flood of bad packets
/// cannot hold the caller.
const MAX_DISCARDS_PER_RECV: usize = 64;

/// Features every I/O port has: scatter-gather (vectored writes), frag lists
/// (written as chunks), high memory, software GSO.
const BASE_FEATURES: NetdevFeatures =
    NetdevFeatures::SG.union(NetdevFeatures::FRAGLIST).union(NetdevFeatures::HIGHDMA).union(NetdevFeatures::GSO);

/// One frame read from an [`IoEndpoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The virtio_net_hdr the kernel wrote.
    pub hdr: VirtioNetHdr,
    /// Frame length in the buffer.
    pub len: usize,
    /// A VLAN tag the kernel kept in skb metadata (not in the bytes).
    pub vlan: Option<VlanInfo>,
}

/// What [`IoEndpoint::read_frames`] hands each frame (or per-frame error)
/// to, with the right to keep a ring frame without copying it ([`RxLend`];
/// `None` for frames not read from a ring).
#[cfg(feature = "af-packet")]
pub type FrameHandler<'f> = dyn FnMut(Result<(Received, &[u8]), IoError>, Option<&mut RxLend<'_>>) + 'f;

/// A kernel endpoint moving frames with virtio_net_hdr framing: a TAP or
/// TUN queue or an AF_PACKET socket. Implemented for
/// [`crate::io::tuntap::TunTapDevice`] and [`crate::io::PacketSocket`]
/// (used nonblocking). Only the per-frame methods are required; the batched
/// ones default to "not supported" / one frame at a time.
pub trait IoEndpoint: fmt::Debug + Send + 'static {
    /// Driver kind reported by [`PortDriver::kind`].
    const KIND: &'static str;
    /// What follows the virtio_net_hdr: Ethernet frames (default) or raw IP
    /// packets (a TUN); received headers are imported with it.
    const MEDIUM: Medium = Medium::Ethernet;
    /// The device or interface name.
    fn ifname(&self) -> &str;
    /// Writes `hdr` then the frame made of `parts`, in one call.
    ///
    /// # Errors
    /// The write failing.
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError>;
    /// Reads one frame into `buf` without waiting; `Ok(None)` when nothing is queued.
    ///
    /// # Errors
    /// The read failing ([`IoError::Truncated`] for a frame larger than `buf`).
    fn read_frame(&mut self, buf: &mut [u8]) -> Result<Option<Received>, IoError>;
    /// The descriptor an event loop waits on; default none.
    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
    /// UDP tunnel GSO in effect (plain, with outer checksum): received
    /// headers with the tunnel bits are imported ([`ImportOptions::udp_tunnel`])
    /// and tunnel superpackets written with the 24-byte header; default
    /// neither.
    fn udp_tunnel(&self) -> (bool, bool) {
        (false, false)
    }
    /// True if [`IoEndpoint::read_frames`] and [`IoEndpoint::write_frames`]
    /// batch (the driver then queues sends); default false.
    fn batched(&self) -> bool {
        false
    }
    /// Hands up to `max` frames to `f` without waiting, borrowed from the
    /// endpoint's memory; `None` if the endpoint cannot batch, else how many
    /// (0: nothing queued).
    ///
    /// # Errors
    /// The receive failing as a whole (a per-frame error is handed to `f`).
    #[cfg(feature = "af-packet")]
    fn read_frames(&mut self, max: usize, f: &mut FrameHandler<'_>) -> Option<Result<usize, IoError>> {
        let _ = (max, f);
        None
    }
    /// Writes every frame of `frames`, reporting each frame's result in
    /// order (`report(i, bytes or error)`); returns the batched system calls
    /// made. Default: [`IoEndpoint::write_frame`] per frame (0 batched calls).
    fn write_frames<'a>(
        &mut self,
        frames: &dyn FrameSource<'a>,
        report: &mut dyn FnMut(usize, Result<usize, IoError>),
    ) -> usize {
        for i in 0..frames.len() {
            let mut parts: [&'a [u8]; STACK_PARTS] = [&[]; STACK_PARTS];
            let mut n = 0;
            let mut more: Vec<&'a [u8]> = Vec::new();
            frames.parts(i, &mut |p| {
                if n < STACK_PARTS {
                    parts[n] = p;
                    n += 1;
                } else {
                    more.push(p);
                }
            });
            let hdr = frames.header(i);
            let r = if more.is_empty() {
                self.write_frame(&hdr, &parts[..n])
            } else {
                let all: Vec<&[u8]> = parts.iter().copied().chain(more).collect();
                self.write_frame(&hdr, &all)
            };
            report(i, r);
        }
        0
    }
    /// Packets the kernel dropped for this endpoint since the last call
    /// (a full socket queue or ring); default 0.
    fn take_kernel_drops(&self) -> u64 {
        0
    }
}

/// True for an I/O error that says the device behind an endpoint is gone or
/// down: `ENETDOWN` (AF_PACKET: the interface went down or was
/// unregistered), `ENXIO`/`ENODEV` (no device of that index any more),
/// `EBADFD` (a TAP whose netdev was deleted) or `EIO` (a TAP being torn down).
pub fn is_link_gone(e: &IoError) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV | libc::EBADFD | libc::EIO))
}

/// Counters of an I/O port driver (the graph keeps the port's own counters;
/// these say what reached the kernel).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoPortStats {
    /// Frames (superpackets counting once) written to the kernel.
    pub tx_frames: u64,
    /// Their bytes (without virtio headers).
    pub tx_bytes: u64,
    /// GSO superpackets among them.
    pub tx_superpackets: u64,
    /// Packets received.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// GSO superpackets among them.
    pub rx_superpackets: u64,
    /// Batched send calls (`sendmmsg`) that wrote at least one frame.
    pub tx_batches: u64,
    /// Batched receive refills (RX ring or `recvmmsg`) that got at least one frame.
    pub rx_batches: u64,
    /// Successful [`PortDriver::reopen`]s.
    pub reopens: u64,
    /// Every drop the driver saw, by reason (transmit errors included).
    pub drops: BTreeMap<&'static str, u64>,
    /// The most recent error, as text.
    pub last_error: Option<String>,
}

/// The driver's counters and the drops not yet reported to the graph.
#[derive(Debug, Default)]
struct Books {
    stats: IoPortStats,
    /// Drops not yet reported through [`PortDriver::take_drops`].
    pending: Vec<(&'static str, u64)>,
}

impl Books {
    /// Counts a drop the graph learns of through [`PortDriver::take_drops`].
    fn drop(&mut self, reason: &'static str, err: Option<String>) {
        self.record(reason, err);
        match self.pending.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.pending.push((reason, 1)),
        }
    }

    /// Counts a drop in the driver's own counters only (the graph counts
    /// the error returned to it).
    fn record(&mut self, reason: &'static str, err: Option<String>) {
        *self.stats.drops.entry(reason).or_insert(0) += 1;
        if let Some(e) = err {
            self.stats.last_error = Some(e);
        }
    }

    fn tx(&mut self, bytes: usize, gso: bool) {
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += bytes as u64;
        if gso {
            self.stats.tx_superpackets += 1;
        }
    }

    fn rx(&mut self, p: &Packet) {
        self.stats.rx_frames += 1;
        self.stats.rx_bytes += p.len() as u64;
        if p.meta.is_gso() {
            self.stats.rx_superpackets += 1;
        }
    }
}

/// A frame waiting for a batched send.
#[derive(Debug)]
struct TxEntry {
    hdr: VirtioNetHdr,
    gso: bool,
    data: TxData,
}

/// Where a queued frame's bytes are.
#[derive(Debug)]
enum TxData {
    /// A packet given to [`PortDriver::xmit`], written from its chunks.
    Owned(Packet),
    /// Bytes `start..start + len` of the arena.
    Arena { start: usize, len: usize },
}

/// The send queue of a batched driver: entries (at most `batch`) and the
/// arena holding copies of borrowed frames. Both keep their capacity; the
/// arena never grows past it (a frame that does not fit flushes the queue
/// first), so no allocation happens after the driver opened.
#[derive(Debug, Default)]
struct TxQueue {
    entries: Vec<TxEntry>,
    /// Bytes of the queued [`TxData::Owned`] packets (flushed at
    /// [`TX_QUEUE_FLUSH_BYTES`]).
    owned_bytes: usize,
    arena: Vec<u8>,
    /// Arena start of the buffer lent by [`SegmentSink::linear_buffer`].
    lent: Option<usize>,
}

impl TxQueue {
    fn with_capacity(batch: usize) -> TxQueue {
        TxQueue {
            entries: Vec::with_capacity(batch),
            owned_bytes: 0,
            arena: Vec::with_capacity((batch * ARENA_PER_FRAME).max(ARENA_MIN)),
            lent: None,
        }
    }

    fn room(&self) -> usize {
        self.arena.capacity() - self.arena.len()
    }
}

/// The queued frames as a [`FrameSource`] for the endpoint.
struct QueueView<'a> {
    entries: &'a [TxEntry],
    arena: &'a [u8],
}

impl<'a> FrameSource<'a> for QueueView<'a> {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn header(&self, i: usize) -> VirtioNetHdr {
        self.entries[i].hdr
    }
    fn parts(&self, i: usize, part: &mut dyn FnMut(&'a [u8])) {
        let entries: &'a [TxEntry] = self.entries;
        match &entries[i].data {
            TxData::Owned(p) => {
                for c in p.all_chunks() {
                    part(c);
                }
            }
            TxData::Arena { start, len } => part(&self.arena[*start..*start + *len]),
        }
    }
}

/// Opens the endpoint again (the same device, namespace and options);
/// returns it with the `TUN_F_*` offloads accepted (0 for AF_PACKET).
type Reopener<E> = Box<dyn FnMut() -> Result<(E, u32), DriverError> + Send>;

/// A port driver over a kernel endpoint (see the module documentation).
pub struct IoPortDriver<E: IoEndpoint> {
    endpoint: E,
    hw: NetdevFeatures,
    offloads: u32,
    /// Frames per batched call; 1: per-frame I/O.
    batch: usize,
    /// Gathers packets of more than [`STACK_PARTS`] chunks; lends linear frames (per-frame mode).
    buf: Vec<u8>,
    /// Per-frame receive buffer (allocated on first use).
    rx_buf: Vec<u8>,
    /// Received packets not yet handed out (batched mode; capacity `batch`).
    rx_queue: VecDeque<Packet>,
    tx: TxQueue,
    gone: bool,
    reopen: Option<Reopener<E>>,
    books: Books,
    /// Packets the kernel dropped at the socket so far (read at every publish).
    kernel_drops: Cell<u64>,
    /// Of those, the ones already reported through [`PortDriver::take_drops`].
    kernel_drops_reported: u64,
}

/// Drop reason of packets the kernel dropped at a port's socket because
/// its RX ring or receive queue was full (the worker did not drain it in
/// time): counted on the port like the engine's own drops, so that a loss
/// in front of the engine has a reason too (docs/benchmarks.md, "Workers,
/// rings and AF_XDP").
pub const RX_KERNEL_FULL: &str = "rx-kernel-full";

impl<E: IoEndpoint> fmt::Debug for IoPortDriver<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoPortDriver")
            .field("kind", &E::KIND)
            .field("ifname", &self.endpoint.ifname())
            .field("hw", &self.hw)
            .field("batch", &self.batch)
            .field("gone", &self.gone)
            .field("stats", &self.books.stats)
            .finish()
    }
}

fn io_driver_error(what: &str, e: IoError) -> DriverError {
    DriverError::new("open-failed", format!("{what}: {e}"))
}

/// A handle on the namespace a driver was opened in, for reopening: `None`
/// for the current one; an error text if the named one could not be
/// attached (reopening then fails with it).
type NsHandle = Result<Option<NetNs>, String>;

fn ns_handle(netns: Option<&NetNs>) -> NsHandle {
    match netns {
        None => Ok(None),
        Some(ns) => NetNs::attach(ns.name()).map(Some).map_err(|e| format!("namespace {}: {e}", ns.name())),
    }
}

fn reopen_error(what: &str, e: impl fmt::Display) -> DriverError {
    DriverError::new("reopen-failed", format!("{what}: {e}"))
}

impl<E: IoEndpoint> IoPortDriver<E> {
    /// A driver over `endpoint` (already nonblocking) offering `hw`, with
    /// per-frame I/O; `offloads` is informational (the `TUN_F_*` flags
    /// accepted, 0 if none apply).
    pub fn with_features(endpoint: E, hw: NetdevFeatures, offloads: u32) -> IoPortDriver<E> {
        IoPortDriver {
            endpoint,
            hw,
            offloads,
            batch: 1,
            buf: Vec::new(),
            rx_buf: Vec::new(),
            rx_queue: VecDeque::new(),
            tx: TxQueue::default(),
            gone: false,
            reopen: None,
            books: Books { stats: IoPortStats::default(), pending: Vec::with_capacity(8) },
            kernel_drops: Cell::new(0),
            kernel_drops_reported: 0,
        }
    }

    /// With `batch` frames per batched call (clamped to 1..=[`MAX_BATCH`]);
    /// endpoints that cannot batch ([`IoEndpoint::batched`]: a TAP) stay at
    /// 1. Allocates the send queue, arena and receive queue now.
    pub fn with_batch(mut self, batch: usize) -> IoPortDriver<E> {
        self.flush_queue();
        let batch = if self.endpoint.batched() { batch.clamp(1, MAX_BATCH) } else { 1 };
        self.batch = batch;
        if batch > 1 {
            self.tx = TxQueue::with_capacity(batch);
            self.rx_queue = VecDeque::with_capacity(batch);
        } else {
            self.tx = TxQueue::default();
            self.rx_queue = VecDeque::new();
        }
        self
    }

    /// Frames per batched call (1: per-frame I/O).
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The endpoint (TAP device or socket).
    pub fn endpoint(&self) -> &E {
        &self.endpoint
    }

    /// The endpoint, writable.
    pub fn endpoint_mut(&mut self) -> &mut E {
        &mut self.endpoint
    }

    /// The `TUN_F_*` offloads the kernel accepted (TAP; 0 for AF_PACKET).
    pub fn offloads(&self) -> u32 {
        self.offloads
    }

    /// The driver's counters.
    pub fn stats(&self) -> &IoPortStats {
        &self.books.stats
    }

    /// Frames waiting in the send queue (batched mode).
    pub fn queued(&self) -> usize {
        self.tx.entries.len()
    }

    /// Marks the driver gone after `e` (counted once as `link-gone`).
    fn mark_gone(&mut self, e: &dyn fmt::Display) {
        if !self.gone {
            self.gone = true;
            self.books.drop("link-gone", Some(e.to_string()));
        }
    }

    /// Writes `pkt` with metadata `meta` at once: header from the metadata,
    /// then the packet's chunks (gathered into `buf` beyond [`STACK_PARTS`]).
    fn send_packet(&mut self, pkt: &Packet, meta: &OffloadMeta) -> Result<(), DriverError> {
        let hdr = Self::export_hdr(meta, pkt.linear()).map_err(header_error)?;
        let mut parts: [&[u8]; STACK_PARTS] = [&[]; STACK_PARTS];
        let written = match pkt.gather_chunks(&mut parts) {
            Some(n) => self.endpoint.write_frame(&hdr, &parts[..n]),
            None => {
                pkt.copy_all_to(&mut self.buf);
                self.endpoint.write_frame(&hdr, &[&self.buf])
            }
        }
        .map_err(tx_error)?;
        self.books.tx(written, meta.is_gso());
        Ok(())
    }

    /// A transmit error found outside [`PortDriver::xmit`] (no caller to return it to).
    fn sink_result(&mut self, r: Result<(), DriverError>) {
        if let Err(e) = r {
            if e.reason == "link-gone" {
                self.gone = true;
            }
            self.books.drop(e.reason, Some(e.message));
        }
    }

    /// Writes every queued frame (`sendmmsg`), counting each frame sent or
    /// dropped, and empties the queue and arena.
    fn flush_queue(&mut self) {
        if self.tx.entries.is_empty() {
            self.tx.arena.clear();
            return;
        }
        let entries = &self.tx.entries;
        let view = QueueView { entries, arena: &self.tx.arena };
        let books = &mut self.books;
        let gone = &mut self.gone;
        let calls = if *gone {
            for _ in entries {
                books.drop("link-gone", None);
            }
            0
        } else {
            self.endpoint.write_frames(&view, &mut |i, r| match r {
                Ok(n) => books.tx(n, entries[i].gso),
                Err(e) => {
                    let e = tx_error(e);
                    if e.reason == "link-gone" {
                        *gone = true;
                    }
                    books.drop(e.reason, Some(e.message));
                }
            })
        };
        books.stats.tx_batches += calls as u64;
        self.tx.entries.clear();
        self.tx.owned_bytes = 0;
        self.tx.arena.clear();
        self.tx.lent = None;
    }

    /// Queues an entry, flushing when the queue holds `batch` frames or
    /// [`TX_QUEUE_FLUSH_BYTES`] of packets given by value.
    fn enqueue(&mut self, entry: TxEntry) {
        if let TxData::Owned(p) = &entry.data {
            self.tx.owned_bytes += p.len();
        }
        self.tx.entries.push(entry);
        if self.tx.entries.len() >= self.batch || self.tx.owned_bytes >= TX_QUEUE_FLUSH_BYTES {
            self.flush_queue();
        }
    }

    /// Makes room for `len` arena bytes (flushing the queue if needed);
    /// false if a frame of `len` bytes can never fit.
    fn arena_room(&mut self, len: usize) -> bool {
        if self.tx.room() < len {
            self.flush_queue();
        }
        self.tx.room() >= len
    }

    /// Queues a copy of the frame made of `chunks` (batched mode), or
    /// writes it at once when larger than the arena.
    fn queue_copy<'c>(
        &mut self,
        hdr_src: &[u8],
        meta: &OffloadMeta,
        len: usize,
        chunks: impl Iterator<Item = &'c [u8]>,
    ) -> Result<bool, DriverError> {
        let hdr = Self::export_hdr(meta, hdr_src).map_err(header_error)?;
        if !self.arena_room(len) {
            return Ok(false);
        }
        let start = self.tx.arena.len();
        for c in chunks {
            self.tx.arena.extend_from_slice(c);
        }
        let len = self.tx.arena.len() - start;
        self.enqueue(TxEntry { hdr, gso: meta.is_gso(), data: TxData::Arena { start, len } });
        Ok(true)
    }

    /// One received frame as a packet: the header imported with the
    /// kernel's rules, the VLAN tag from metadata put back. A GSO
    /// superpacket in a ring frame is kept where it is when the ring can
    /// lend it (`lend`): its first [`LENT_HEADER_BYTES`] bytes are copied
    /// into the packet's linear area (where the device stack edits headers)
    /// and the rest becomes a payload segment pointing into the ring; the
    /// frame goes back to the kernel when the packet is dropped after
    /// transmit. Any other frame is copied ([`Packet::from_frame_pooled`]).
    #[cfg(feature = "af-packet")]
    fn import(
        r: &Received,
        frame: &[u8],
        lend: Option<&mut RxLend<'_>>,
        opts: &ImportOptions,
    ) -> Result<Packet, &'static str> {
        let meta = Self::import_meta(r, frame, opts)?;
        let lent = if meta.is_gso() && frame.len() > pool::COPYBREAK { lend.and_then(RxLend::lend) } else { None };
        let p = match lent {
            Some(bytes) => {
                let mut p = Packet::from_frame(&frame[..LENT_HEADER_BYTES]);
                p.append_segment(bytes.slice(LENT_HEADER_BYTES..)).map_err(|_| "rx-lend")?;
                p
            }
            None => Packet::from_frame_pooled(frame),
        };
        Self::finish_import(r, p, meta)
    }

    /// The virtio_net_hdr for `frame` (its first bytes at least) with
    /// `meta`, for the endpoint's medium.
    fn export_hdr(meta: &OffloadMeta, frame: &[u8]) -> Result<VirtioNetHdr, VirtioHdrError> {
        VirtioNetHdr::from_meta_as(meta, frame, E::MEDIUM, false)
    }

    /// The metadata of received frame `frame`: its header imported with the
    /// kernel's rules and `opts` ([`IoPortDriver::import_options`]).
    fn import_meta(r: &Received, frame: &[u8], opts: &ImportOptions) -> Result<OffloadMeta, &'static str> {
        r.hdr.to_meta(frame, opts).map_err(|e| e.reason())
    }

    /// How received headers are imported: the endpoint's medium, UDP tunnel
    /// GSO as negotiated.
    fn import_options(&self) -> ImportOptions {
        let (udp_tunnel, udp_tunnel_csum) = self.endpoint.udp_tunnel();
        ImportOptions { medium: E::MEDIUM, udp_tunnel, udp_tunnel_csum, ..ImportOptions::default() }
    }

    /// Sets the imported metadata of a received packet and puts back the
    /// VLAN tag the kernel kept in metadata.
    fn finish_import(r: &Received, mut p: Packet, meta: OffloadMeta) -> Result<Packet, &'static str> {
        p.meta = meta;
        if let Some(v) = r.vlan {
            let tpid = if v.tpid == 0 { 0x8100 } else { v.tpid };
            p.push_vlan_tag(tpid, v.tci).map_err(|_| "rx-vlan-restore")?;
        }
        Ok(p)
    }

    /// A receive failure of the whole endpoint.
    fn rx_failed(&mut self, e: IoError) {
        if is_link_gone(&e) {
            self.mark_gone(&e);
        } else {
            self.books.drop("rx-io-error", Some(e.to_string()));
        }
    }

    /// Imports the frame just read into `rx_buf` (at [`DEFAULT_HEADROOM`]):
    /// a superpacket keeps the buffer itself (no copy; the next read takes a
    /// fresh one from the pool), a frame up to [`pool::COPYBREAK`] bytes is
    /// copied into a packet of its own size and the buffer is read into again.
    fn import_rx_buf(&mut self, r: &Received) -> Result<Packet, &'static str> {
        let (head, tail) = (DEFAULT_HEADROOM, DEFAULT_HEADROOM + r.len);
        let opts = self.import_options();
        let frame = &self.rx_buf[head..tail];
        let meta = Self::import_meta(r, frame, &opts)?;
        let p = if r.len <= pool::COPYBREAK {
            Packet::from_frame(frame)
        } else {
            Packet::from_storage(std::mem::take(&mut self.rx_buf), head, tail).map_err(|_| "rx-truncated")?
        };
        Self::finish_import(r, p, meta)
    }

    /// [`PortDriver::recv`] with one read per frame.
    fn recv_single(&mut self) -> Option<Packet> {
        for _ in 0..MAX_DISCARDS_PER_RECV {
            if self.rx_buf.is_empty() {
                self.rx_buf = pool::take_buffer();
            }
            let r = match self.endpoint.read_frame(&mut self.rx_buf[DEFAULT_HEADROOM..]) {
                Ok(None) => return None,
                Ok(Some(r)) => r,
                Err(IoError::Truncated { .. }) => {
                    self.books.drop("rx-truncated", None);
                    continue;
                }
                Err(IoError::Header(e)) => {
                    self.books.drop(e.reason(), None);
                    continue;
                }
                Err(e) => {
                    self.rx_failed(e);
                    return None;
                }
            };
            match self.import_rx_buf(&r) {
                Ok(p) => {
                    self.books.rx(&p);
                    return Some(p);
                }
                Err(reason) => self.books.drop(reason, None),
            }
        }
        None
    }

    /// [`PortDriver::recv`] from the receive queue, refilled up to `batch`
    /// packets at a time.
    #[cfg(feature = "af-packet")]
    fn recv_batched(&mut self) -> Option<Packet> {
        let mut seen = 0;
        while seen < MAX_DISCARDS_PER_RECV {
            if let Some(p) = self.rx_queue.pop_front() {
                return Some(p);
            }
            let opts = self.import_options();
            let books = &mut self.books;
            let queue = &mut self.rx_queue;
            let r = self.endpoint.read_frames(self.batch, &mut |r, lend| match r {
                Ok((rcv, frame)) => match Self::import(&rcv, frame, lend, &opts) {
                    Ok(p) => {
                        books.rx(&p);
                        queue.push_back(p);
                    }
                    Err(reason) => books.drop(reason, None),
                },
                Err(IoError::Truncated { .. }) => books.drop("rx-truncated", None),
                Err(IoError::Header(e)) => books.drop(e.reason(), None),
                Err(e) => books.drop("rx-io-error", Some(e.to_string())),
            });
            match r {
                None => return self.recv_single(),
                Some(Ok(0)) => return None,
                Some(Ok(n)) => {
                    self.books.stats.rx_batches += 1;
                    seen += n;
                }
                Some(Err(e)) => {
                    self.rx_failed(e);
                    return None;
                }
            }
        }
        self.rx_queue.pop_front()
    }
}

fn header_error(e: VirtioHdrError) -> DriverError {
    DriverError::new(e.reason(), format!("virtio_net_hdr: {e}"))
}

/// Maps a write failure to a drop reason (`link-gone` when
/// [`is_link_gone`]).
fn tx_error(e: IoError) -> DriverError {
    let reason = match &e {
        IoError::Header(h) => h.reason(),
        IoError::ShortWrite { .. } => "tx-short-write",
        IoError::Unsupported(_) => "tx-unsupported",
        _ if is_link_gone(&e) => "link-gone",
        _ => match e.raw_os_error() {
            Some(libc::EINVAL) => "tx-refused",
            Some(libc::EAGAIN | libc::ENOBUFS) => "tx-busy",
            Some(libc::EMSGSIZE) => "tx-too-big",
            _ => "tx-io-error",
        },
    };
    DriverError::new(reason, e.to_string())
}

impl<E: IoEndpoint> PortDriver for IoPortDriver<E> {
    fn kind(&self) -> &'static str {
        E::KIND
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Any
    }
    /// Writes `pkt` at once (batch 1; the error is returned) or queues it
    /// (batched: `Ok`, errors counted at the flush). After the device went
    /// away: `link-gone`.
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        if self.gone {
            let e = DriverError::new("link-gone", format!("{} is gone", self.endpoint.ifname()));
            self.books.record(e.reason, None);
            return Err(e);
        }
        if self.batch > 1 {
            let hdr = match Self::export_hdr(&pkt.meta, pkt.linear()) {
                Ok(h) => h,
                Err(e) => {
                    let e = header_error(e);
                    self.books.record(e.reason, Some(e.message.clone()));
                    return Err(e);
                }
            };
            if pkt.all_chunks().nth(MAX_QUEUED_PARTS).is_none() {
                let gso = pkt.meta.is_gso();
                self.enqueue(TxEntry { hdr, gso, data: TxData::Owned(pkt) });
                return Ok(());
            }
            // Too many chunks for one message: written at once, after the queue.
            self.flush_queue();
        }
        let r = self.send_packet(&pkt, &pkt.meta);
        if let Err(e) = &r {
            if e.reason == "link-gone" {
                self.gone = true;
            }
            self.books.record(e.reason, Some(e.message.clone()));
        }
        r
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        if self.gone {
            return None;
        }
        #[cfg(feature = "af-packet")]
        if self.batch > 1 {
            return self.recv_batched();
        }
        self.recv_single()
    }
    /// The driver's own drops, then the kernel's drops at the socket read
    /// since the last call ([`RX_KERNEL_FULL`]; no system call here: they are
    /// read when the counters are published).
    fn take_drops(&mut self, report: &mut dyn FnMut(&'static str, u64)) {
        for (reason, n) in self.books.pending.drain(..) {
            report(reason, n);
        }
        let seen = self.kernel_drops.get();
        if seen > self.kernel_drops_reported {
            report(RX_KERNEL_FULL, seen - self.kernel_drops_reported);
            self.kernel_drops_reported = seen;
        }
    }
    fn poll_fd(&self) -> Option<RawFd> {
        self.endpoint.raw_fd()
    }
    fn flush(&mut self) {
        self.flush_queue();
    }
    /// `tx_frames`, `tx_bytes`, `tx_superpackets`, `rx_frames`, `rx_bytes`,
    /// `rx_superpackets` (what reached or came from the kernel),
    /// `tx_batches`, `rx_batches`, `tx_queued` (frames waiting for the next
    /// flush), `reopens`, `rx_kernel_drops` (packets the kernel dropped
    /// because the socket queue or RX ring was full, read from the socket;
    /// also reported as drops with reason [`RX_KERNEL_FULL`]),
    /// and what the kernel accepted: `offloads_accepted` (the `TUN_F_*`
    /// flags, 0 for AF_PACKET), `udp_tunnel_gso` and `udp_tunnel_gso_csum`
    /// (1 when UDP tunnel GSO, plain or with the outer checksum, was
    /// negotiated: tunnel superpackets cross whole with the 24-byte header).
    fn driver_counters(&self, report: &mut dyn FnMut(&'static str, u64)) {
        let s = &self.books.stats;
        for (name, v) in [
            ("tx_frames", s.tx_frames),
            ("tx_bytes", s.tx_bytes),
            ("tx_superpackets", s.tx_superpackets),
            ("rx_frames", s.rx_frames),
            ("rx_bytes", s.rx_bytes),
            ("rx_superpackets", s.rx_superpackets),
            ("tx_batches", s.tx_batches),
            ("rx_batches", s.rx_batches),
            ("tx_queued", self.tx.entries.len() as u64),
            ("reopens", s.reopens),
            ("offloads_accepted", u64::from(self.offloads)),
            ("udp_tunnel_gso", u64::from(self.endpoint.udp_tunnel().0)),
            ("udp_tunnel_gso_csum", u64::from(self.endpoint.udp_tunnel().1)),
        ] {
            report(name, v);
        }
        if !self.gone {
            self.kernel_drops.set(self.kernel_drops.get() + self.endpoint.take_kernel_drops());
        }
        report("rx_kernel_drops", self.kernel_drops.get());
    }
    fn is_gone(&self) -> bool {
        self.gone
    }
    /// Opens the same device again (see the module documentation); the
    /// receive and send queues start empty.
    fn reopen(&mut self) -> Result<(), DriverError> {
        let Some(reopen) = self.reopen.as_mut() else {
            return Err(DriverError::new(
                "reopen-unsupported",
                format!("{} {}: not opened by name, cannot reopen", E::KIND, self.endpoint.ifname()),
            ));
        };
        let (endpoint, offloads) = reopen()?;
        if offloads != self.offloads {
            return Err(DriverError::new(
                "reopen-failed",
                format!(
                    "{} {}: the kernel now accepts offloads {offloads:#x}, not {:#x}",
                    E::KIND,
                    self.endpoint.ifname(),
                    self.offloads
                ),
            ));
        }
        self.flush_queue();
        self.endpoint = endpoint;
        self.rx_queue.clear();
        self.gone = false;
        self.books.stats.reopens += 1;
        Ok(())
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl<E: IoEndpoint> Drop for IoPortDriver<E> {
    /// Writes what is still queued (best effort).
    fn drop(&mut self) {
        self.flush_queue();
    }
}

impl<E: IoEndpoint> SegmentSink for IoPortDriver<E> {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        if self.gone {
            self.books.drop("link-gone", None);
            return;
        }
        if self.batch > 1 {
            match self.queue_copy(packet.linear(), meta, packet.total_len(), packet.all_chunks()) {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => return self.books.drop(e.reason, Some(e.message)),
            }
        }
        let r = self.send_packet(packet, meta);
        self.sink_result(r);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        if self.gone {
            self.books.drop("link-gone", None);
            return;
        }
        if self.batch > 1 {
            match self.queue_copy(frame.header, &frame.meta, frame.len(), frame.chunks()) {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => return self.books.drop(e.reason, Some(e.message)),
            }
        }
        let r = (|| {
            let hdr = Self::export_hdr(&frame.meta, frame.header).map_err(header_error)?;
            let written = if frame.payload.len() < STACK_PARTS {
                let mut parts: [&[u8]; STACK_PARTS] = [&[]; STACK_PARTS];
                parts[0] = frame.header;
                parts[1..=frame.payload.len()].copy_from_slice(frame.payload);
                self.endpoint.write_frame(&hdr, &parts[..=frame.payload.len()])
            } else {
                frame.copy_to(&mut self.buf);
                self.endpoint.write_frame(&hdr, &[&self.buf])
            }
            .map_err(tx_error)?;
            self.books.tx(written, frame.meta.is_gso());
            Ok(())
        })();
        self.sink_result(r);
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        if self.batch > 1 && self.arena_room(len) {
            let start = self.tx.arena.len();
            self.tx.arena.resize(start + len, 0);
            self.tx.lent = Some(start);
            return &mut self.tx.arena[start..];
        }
        self.tx.lent = None;
        self.buf.clear();
        self.buf.resize(len, 0);
        &mut self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        if self.gone {
            self.tx.lent = None;
            self.books.drop("link-gone", None);
            return;
        }
        if let Some(start) = self.tx.lent.take() {
            let len = len.min(self.tx.arena.len() - start);
            self.tx.arena.truncate(start + len);
            match Self::export_hdr(meta, &self.tx.arena[start..]) {
                Ok(hdr) => self.enqueue(TxEntry { hdr, gso: meta.is_gso(), data: TxData::Arena { start, len } }),
                Err(e) => {
                    self.tx.arena.truncate(start);
                    let e = header_error(e);
                    self.books.drop(e.reason, Some(e.message));
                }
            }
            return;
        }
        let r = (|| {
            let frame = &self.buf[..len.min(self.buf.len())];
            let hdr = Self::export_hdr(meta, frame).map_err(header_error)?;
            let written = self.endpoint.write_frame(&hdr, &[frame]).map_err(tx_error)?;
            self.books.tx(written, meta.is_gso());
            Ok(())
        })();
        self.sink_result(r);
    }
}
