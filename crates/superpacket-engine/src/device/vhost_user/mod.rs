//! The vhost-user-net port driver ([`VhostUserDriver`], topology `driver =
//! { kind = "vhost-user", socket = "/path.sock" }`): a virtio-net device
//! whose frontend is a VMM (QEMU, cloud-hypervisor) or DPDK's virtio-user,
//! built on the rust-vmm crates rather than a protocol of our own.
//!
//! # Design
//!
//! - **protocol** ([`backend`]): `vhost-user-backend`'s `VhostUserDaemon`
//!   handles the socket (features, `SET_MEM_TABLE`, `SET_VRING_*`) in a
//!   control thread per port; the engine listens (`mode = "server"`, the
//!   default: one frontend at a time, the next may connect after it
//!   leaves) or connects to a listening VMM and connects again whenever the
//!   connection ends (`mode = "client"`).
//! - **data path** (this module and [`virtq`]): the engine worker that owns
//!   the port touches the vrings itself (the daemon's `VringMutex`, locked
//!   for the few microseconds of one frame) and the guest memory through
//!   `vm-memory` (`GuestMemoryAtomic<GuestMemoryMmap>`, its current table
//!   taken once per connection change: bounds-checked guest addresses,
//!   volatile copies). The chains are followed by a walk of the port's own
//!   ([`ring`]: rings resolved to host slices when they change, the
//!   available index loaded once per burst, as DPDK's vhost does), not
//!   `virtio-queue`'s iterator. The daemon's event thread only turns
//!   kicks into a wake-up of the worker: [`PortDriver::poll_fd`] is one
//!   eventfd per queue pair, signalled on a kick of either queue and on any
//!   connection change.
//! - **queue pairs**: one per engine worker (`VIRTIO_NET_F_MQ` offers as
//!   many pairs as there are workers, with the `VIRTIO_NET_F_CTRL_VQ`
//!   virtio requires with it); worker `i` serves pair `i` (receive queue
//!   `2i`, transmit queue `2i + 1`) while the frontend has it enabled
//!   (`SET_VRING_ENABLE`) and, if it handed the port the control queue,
//!   within the pairs the guest set there ([`ctrl`]). Every worker builds
//!   its own graph; the port's control thread and socket are shared
//!   through a process-wide registry keyed by the socket path.
//! - **receive from the guest** ([`PortDriver::recv_burst`], [`virtq::take_frame`]):
//!   a burst of chains under one lock and one ring lookup; the buffers of one chain (direct or indirect descriptors) are
//!   recorded and checked, the `virtio_net_hdr_v1` read from them and
//!   parsed, and only then the frame copied once, straight from guest
//!   memory into a [`Packet`] (a pool buffer for a superpacket); the chain
//!   is given back after the copy and the header imported with the
//!   kernel's validation ([`VirtioNetHdr::to_meta`], the same code as a
//!   TAP's). A refused header is a drop counted with the same reason as on
//!   a TAP. Through [`PortDriver::recv_burst_held`] (the engine worker's
//!   call) a superpacket's payload may instead stay in the guest's buffers
//!   ([`held`]): only its headers are copied, and the chain is given back
//!   when the payload has been copied guest to guest into another
//!   vhost-user port ([`PortDriver::xmit_held`]) or materialised.
//! - **transmit to the guest** ([`PortDriver::xmit`], [`PortDriver::sink`]):
//!   the header is exported as for a TAP ([`VirtioNetHdr::from_meta_as`])
//!   and header and frame are copied into the guest's receive buffers;
//!   with `VIRTIO_NET_F_MRG_RXBUF` a superpacket spreads over as many chains
//!   as it needs (`num_buffers`). Frames that find no buffer wait in a
//!   bounded backlog ([`BACKLOG`]) while kicks on the receive queue are
//!   enabled; the guest is notified (call eventfd, honouring `EVENT_IDX`)
//!   at [`PortDriver::flush`], the end of the engine round.
//!   Within an engine round the port holds what it is given
//!   ([`PortDriver::hold_tx`]) and places it all at that flush, the
//!   receive queue's checks, lock and ring lookup once per burst (the `rx_burst` module).
//! - **features**: what the guest acked becomes the port's netdev features
//!   ([`netdev_features`]: `GUEST_CSUM` gives HW_CSUM, `GUEST_TSO4` TSO,
//!   `GUEST_TSO6` TSO6, `GUEST_ECN` TSO_ECN, `GUEST_USO4`+`GUEST_USO6`
//!   GSO_UDP_L4) through [`PortDriver::take_hw_change`]: the graph segments
//!   (and checksums) before a guest that does not take the offload and
//!   hands superpackets whole to one that does. Without a guest the port
//!   has no offloads and transmitting is a `vhost-no-guest` drop.
//!
//! # Hostile guests
//!
//! A guest that announces more chains than its queue holds, writes a
//! chain that loops or leaves its table, nests indirect tables, points a
//! ring or buffer outside its memory or hands a writable buffer to transmit
//! (a readable one to receive) gets that queue stopped: counted once as a
//! drop `vhost-bad-*` ([`virtq::QueueFault::reason`]) and in the driver
//! counter `queue_stopped`; nothing more is taken from or put in that queue
//! until the guest resets the device or reconnects. Guest memory is only
//! accessed through `vm-memory`, so no guest address can reach outside the
//! regions the frontend shared, and no other port's memory is involved;
//! the workers see a memory table only after [`memory::check_and_seal`]
//! found every region within its file (and sealed the file against
//! shrinking where it can be sealed): a table with a region past its
//! file's end is refused and the connection ended. A
//! frontend that disconnects mid-transfer: the worker keeps its mapping
//! (reference-counted) until it sees the new generation, so nothing is
//! unmapped under it.

pub mod backend;
pub mod ctrl;
mod enable_relay;
mod guest_copy;
pub mod held;
mod rx_burst;
pub use rx_burst::RX_BURST;
pub mod memory;
pub mod ring;
pub mod virtq;

use super::features::{FeaturesCheck, NetdevFeatures};
use super::port::{DriverError, PortDriver};
pub use backend::Mode;
use backend::{Control, PortShared, Vring};
use held::{Completion, HeldFrame};
use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use superpacket::offload::gso::{SegmentSink, SgFrame};
use superpacket::packet::virtio::{F_NEEDS_CSUM, GSO_ECN, HdrByteOrder, HdrLayout, VirtioNetHdr};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::wire::Medium;
use vhost_user_backend::VringT;
use virtio_queue::QueueT;
use virtq::{QueueFault, RxRefused};
use vm_memory::GuestAddressSpace;

/// Virtio-net feature bits (virtio 1.2, 5.1.3) and the vhost-user one.
pub mod features {
    /// `VIRTIO_NET_F_CSUM`: the guest sends partial checksums.
    pub const CSUM: u64 = 1 << 0;
    /// `VIRTIO_NET_F_GUEST_CSUM`: the guest takes partial checksums.
    pub const GUEST_CSUM: u64 = 1 << 1;
    /// `VIRTIO_NET_F_GUEST_TSO4`.
    pub const GUEST_TSO4: u64 = 1 << 7;
    /// `VIRTIO_NET_F_GUEST_TSO6`.
    pub const GUEST_TSO6: u64 = 1 << 8;
    /// `VIRTIO_NET_F_GUEST_ECN`.
    pub const GUEST_ECN: u64 = 1 << 9;
    /// `VIRTIO_NET_F_HOST_TSO4`: the guest sends TCPv4 superpackets.
    pub const HOST_TSO4: u64 = 1 << 11;
    /// `VIRTIO_NET_F_HOST_TSO6`.
    pub const HOST_TSO6: u64 = 1 << 12;
    /// `VIRTIO_NET_F_HOST_ECN`.
    pub const HOST_ECN: u64 = 1 << 13;
    /// `VIRTIO_NET_F_MRG_RXBUF`: a received frame may span several chains.
    pub const MRG_RXBUF: u64 = 1 << 15;
    /// `VIRTIO_NET_F_STATUS`: the config space has a link status.
    pub const STATUS: u64 = 1 << 16;
    /// `VIRTIO_NET_F_CTRL_VQ`: a control virtqueue (after the data queues).
    pub const CTRL_VQ: u64 = 1 << 17;
    /// `VIRTIO_NET_F_MQ`: several queue pairs.
    pub const MQ: u64 = 1 << 22;
    /// `VIRTIO_RING_F_INDIRECT_DESC`.
    pub const INDIRECT_DESC: u64 = 1 << 28;
    /// `VIRTIO_RING_F_EVENT_IDX`.
    pub const EVENT_IDX: u64 = 1 << 29;
    /// `VHOST_USER_F_PROTOCOL_FEATURES`.
    pub const VHOST_USER_F_PROTOCOL_FEATURES: u64 = 1 << 30;
    /// `VIRTIO_F_VERSION_1`.
    pub const VERSION_1: u64 = 1 << 32;
    /// `VIRTIO_NET_F_GUEST_USO4`.
    pub const GUEST_USO4: u64 = 1 << 54;
    /// `VIRTIO_NET_F_GUEST_USO6`.
    pub const GUEST_USO6: u64 = 1 << 55;
    /// `VIRTIO_NET_F_HOST_USO`.
    pub const HOST_USO: u64 = 1 << 56;

    /// Always offered: the ring and framing features, and (with more than
    /// one queue pair) `MQ` with the `CTRL_VQ` virtio requires with it.
    pub const BASE: u64 = VERSION_1 | MRG_RXBUF | EVENT_IDX | INDIRECT_DESC | STATUS | MQ | CTRL_VQ;
    /// Every offload (both directions).
    pub const OFFLOADS: u64 = CSUM
        | GUEST_CSUM
        | HOST_TSO4
        | HOST_TSO6
        | HOST_ECN
        | HOST_USO
        | GUEST_TSO4
        | GUEST_TSO6
        | GUEST_ECN
        | GUEST_USO4
        | GUEST_USO6;
    /// What a port offers by default.
    pub const DEFAULT: u64 = BASE | OFFLOADS;

    /// The offload bits of topology offload name `name` (`csum`, `tso4`,
    /// `tso6`, `tso-ecn`, `uso`), both directions.
    pub fn offload(name: &str) -> Option<u64> {
        Some(match name {
            "csum" => CSUM | GUEST_CSUM,
            "tso4" => HOST_TSO4 | GUEST_TSO4,
            "tso6" => HOST_TSO6 | GUEST_TSO6,
            "tso-ecn" => HOST_ECN | GUEST_ECN,
            "uso" => HOST_USO | GUEST_USO4 | GUEST_USO6,
            _ => return None,
        })
    }
}

use features as vf;

/// Frames kept for a guest whose receive queue is full, per queue pair.
pub const BACKLOG: usize = 256;

/// Default (and largest) queue size offered.
pub const DEFAULT_QUEUE_SIZE: u16 = 1024;

/// Times one [`PortDriver::recv_burst`] (or `recv`) finds the queue empty,
/// re-enables kicks and finds frames again before it returns.
const MAX_IDLE_CHECKS: usize = 8;

/// Frames one [`PortDriver::recv_burst`] (or `recv`) call may drop before
/// it returns.
const MAX_DISCARDS_PER_RECV: usize = 64;

/// Features of every vhost-user port (copies from any chunk list).
const BASE_FEATURES: NetdevFeatures =
    NetdevFeatures::SG.union(NetdevFeatures::FRAGLIST).union(NetdevFeatures::HIGHDMA).union(NetdevFeatures::GSO);

/// The netdev features of a port whose guest acked `acked`.
pub fn netdev_features(acked: u64) -> NetdevFeatures {
    let mut f = BASE_FEATURES;
    if acked & vf::GUEST_CSUM != 0 {
        f = f | NetdevFeatures::HW_CSUM;
        for (bit, feat) in [
            (vf::GUEST_TSO4, NetdevFeatures::TSO),
            (vf::GUEST_TSO6, NetdevFeatures::TSO6),
            (vf::GUEST_ECN, NetdevFeatures::TSO_ECN),
        ] {
            if acked & bit != 0 {
                f = f | feat;
            }
        }
        if acked & (vf::GUEST_USO4 | vf::GUEST_USO6) == vf::GUEST_USO4 | vf::GUEST_USO6 {
            f = f | NetdevFeatures::GSO_UDP_L4;
        }
    }
    f
}

/// Whether a worker may use vring `st` of `a`: set up, enabled by the
/// frontend (`SET_VRING_ENABLE`) and within the guest's pairs.
fn in_service(a: &Active, st: &vhost_user_backend::VringState<backend::Mem>) -> bool {
    a.within_limit && st.get_queue().ready() && st.is_enabled()
}

/// How a vhost-user port is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VhostUserOptions {
    /// The vhost-user socket.
    pub socket: PathBuf,
    /// Listen (default) or connect.
    pub mode: Mode,
    /// Virtio features offered ([`features::DEFAULT`]).
    pub features: u64,
    /// Most descriptors per queue (a power of two, 64..=1024).
    pub queue_size: u16,
    /// How long the port keeps polling the guest's transmit queue with kicks
    /// off after it last found it empty (zero: kicks on as soon as it is
    /// empty, and the worker sleeps). Polling costs a busy CPU while the
    /// guest pauses; it saves a kick, a wake-up of the backend thread and a
    /// wake-up of the worker per burst (docs/topology.md, "vhost-user ports").
    pub busy_poll: std::time::Duration,
}

impl VhostUserOptions {
    /// Defaults for a listening port on `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> VhostUserOptions {
        VhostUserOptions {
            socket: socket.into(),
            mode: Mode::Server,
            features: vf::DEFAULT,
            queue_size: DEFAULT_QUEUE_SIZE,
            busy_poll: std::time::Duration::ZERO,
        }
    }
}

/// A port's shared half: its control thread and what the workers share.
#[derive(Debug)]
struct PortHandle {
    shared: Arc<PortShared>,
    _control: Control,
}

/// Ports open in this process, by socket: worker `i > 0` of an engine
/// joins the port worker 0 opened and serves the next queue pair.
type Registry = Vec<(PathBuf, Weak<PortHandle>, usize)>;
static PORTS: Mutex<Registry> = Mutex::new(Vec::new());

/// The queues of the current connection this driver serves.
struct Active {
    rx: Vring,
    tx: Vring,
    /// The guest memory as it was when the port took this connection in
    /// ([`VhostUserDriver::refresh`]): a new table bumps the generation,
    /// so the snapshot is replaced before the next frame, and it keeps its
    /// mapping alive while the port uses it. One load at refresh instead of
    /// an `arc_swap` load per access.
    mem: Arc<ring::GuestMem>,
    acked: u64,
    /// 12 (VERSION_1 or MRG_RXBUF) or 10.
    hdr_len: usize,
    mrg: bool,
    /// The guest lets this pair be used: it is within the pairs it set
    /// through a control queue handed to the port (if one was).
    within_limit: bool,
    /// Which connection and device reset (to tell a reconnect or a reset
    /// from a feature change).
    conn: (usize, u64),
    /// The connection itself: a held chain's completion checks it is
    /// still the current one ([`held::Completion`]).
    owner: Arc<backend::Conn>,
}

/// The virtio-net header (`hdr_len` bytes of the 12) exported for a
/// frame of `meta` starting with `head`, for the guest of `a`.
///
/// # Errors
/// The drop reason: an export the header cannot carry, or an offload the
/// guest did not ack (a packet queued before the graph saw the guest's
/// features is refused, never handed over).
#[inline(always)]
fn rx_header(a: &Active, meta: &OffloadMeta, head: &[u8]) -> Result<[u8; 12], &'static str> {
    // No GSO and no partial checksum (every small frame of a guest that
    // sent it without one): the header `from_meta_as` makes is all zeros
    // (`num_buffers` is set where the frame is placed), and it needs no
    // offload.
    if !meta.is_gso() && !matches!(meta.csum, ChecksumState::Partial { .. }) {
        return Ok([0; 12]);
    }
    offload_header(a, meta, head)
}

/// [`rx_header`] for a frame with GSO or a partial checksum.
fn offload_header(a: &Active, meta: &OffloadMeta, head: &[u8]) -> Result<[u8; 12], &'static str> {
    let hdr = VirtioNetHdr::from_meta_as(meta, head, Medium::Ethernet, false).map_err(|e| e.reason())?;
    let gso = hdr.gso_type & !GSO_ECN;
    let need = match gso {
        0 => 0,
        1 => vf::GUEST_TSO4,
        4 => vf::GUEST_TSO6,
        5 => vf::GUEST_USO4 | vf::GUEST_USO6,
        _ => u64::MAX,
    } | if hdr.gso_type & GSO_ECN != 0 { vf::GUEST_ECN } else { 0 }
        | if hdr.flags & F_NEEDS_CSUM != 0 { vf::GUEST_CSUM } else { 0 };
    if a.acked & need != need {
        return Err("vhost-guest-lacks-offload");
    }
    let mut hb = [0u8; 12];
    let layout = if a.hdr_len == 12 { HdrLayout::MrgRxbuf } else { HdrLayout::Basic };
    hdr.emit(&mut hb, layout, HdrByteOrder::Little).map_err(|e| e.reason())?;
    Ok(hb)
}

/// Counters of one driver (one queue pair).
#[derive(Debug, Default, Clone)]
struct Stats {
    tx_frames: u64,
    tx_bytes: u64,
    tx_superpackets: u64,
    tx_buffers: u64,
    tx_backlogged: u64,
    rx_frames: u64,
    rx_bytes: u64,
    rx_superpackets: u64,
    rx_csum_partial: u64,
    rx_held: u64,
    rx_descs: u64,
    queue_stopped: u64,
    calls_sent: u64,
    wakeups: u64,
}

impl Stats {
    /// A frame of `len` bytes placed in `chains` receive chains.
    fn placed(&mut self, len: usize, chains: usize, superpacket: bool) {
        let mut one = Sent::default();
        one.add(len, chains, superpacket);
        self.add_placed(&one);
    }

    /// The frames of `sent`, placed.
    fn add_placed(&mut self, sent: &Sent) {
        self.tx_frames += sent.frames;
        self.tx_bytes += sent.bytes;
        self.tx_buffers += sent.buffers;
        self.tx_superpackets += sent.superpackets;
    }
}

/// Frames placed in the guest's receive queue, counted by a run
/// (`rx_burst`) in locals and added to [`Stats`] once.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    frames: u64,
    bytes: u64,
    buffers: u64,
    superpackets: u64,
}

impl Sent {
    /// A frame of `len` bytes placed in `chains` receive chains.
    #[inline(always)]
    fn add(&mut self, len: usize, chains: usize, superpacket: bool) {
        self.frames += 1;
        self.bytes += len as u64;
        self.buffers += chains as u64;
        self.superpackets += u64::from(superpacket);
    }
}

/// Most microseconds a port may busy-poll ([`VhostUserOptions::busy_poll`]):
/// a longer window only burns a CPU for a guest that has stopped sending.
pub const MAX_BUSY_POLL_US: u32 = 100_000;

/// Empty polls of a busy-poll window per clock read
/// ([`VhostUserDriver::keep_polling`]).
pub(crate) const IDLE_POLLS_PER_CLOCK_READ: u32 = 16;

/// The engine's end of a vhost-user-net device (see the module documentation).
pub struct VhostUserDriver {
    opts: VhostUserOptions,
    handle: Arc<PortHandle>,
    qp: usize,
    hw: NetdevFeatures,
    hw_changed: bool,
    seen_gen: u64,
    active: Option<Active>,
    /// Receive (0) and transmit (1) queue stopped for a guest fault.
    stopped: [bool; 2],
    /// The queues' rings were checked to lie in guest memory.
    validated: [bool; 2],
    tx_kicks_on: bool,
    rx_kicks_on: bool,
    /// When the transmit queue was first found empty in the current
    /// busy-poll window (`None`: not in one).
    idle_since: Option<std::time::Instant>,
    /// Empty polls in the current busy-poll window (0: not in one).
    idle_polls: u32,
    /// The last [`PortDriver::recv`] found nothing and left kicks off.
    polling: bool,
    signal_rx: bool,
    signal_tx: bool,
    /// Each queue's (receive, transmit) used index when the guest was last
    /// considered for a notification (`None`: not yet on this connection).
    signalled: [Option<u16>; 2],
    tx_scratch: virtq::TxScratch,
    /// [`PortDriver::recv`]'s burst of one (room for one: no allocation).
    recv_one: Vec<Packet>,
    rx_scratch: virtq::RxScratch,
    /// Receive (0) and transmit (1) queue's available index as last
    /// loaded: once per burst ([`ring::AvailCursor`]); forgotten at every
    /// change [`VhostUserDriver::refresh`] takes in.
    avail: [ring::AvailCursor; 2],
    /// Receive (0) and transmit (1) queue's rings as host slices, resolved
    /// when the queue or the memory changes, not per frame.
    rings: [ring::RingCache; 2],
    lin: Vec<u8>,
    backlog: VecDeque<Packet>,
    /// Frames given to the port since [`PortDriver::hold_tx`], placed
    /// together at the flush ([`rx_burst`]); at most [`rx_burst::RX_BURST`].
    rx_burst: Vec<Packet>,
    /// Their lengths.
    rx_burst_len: Vec<usize>,
    /// Between [`PortDriver::hold_tx`] and the next flush.
    bursting: bool,
    stats: Stats,
    pending: Vec<(&'static str, u64)>,
}

impl fmt::Debug for VhostUserDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VhostUserDriver")
            .field("socket", &self.opts.socket)
            .field("mode", &self.opts.mode)
            .field("queue_pair", &self.qp)
            .field("connected", &self.active.is_some())
            .finish()
    }
}

fn open_error(what: &str, e: impl fmt::Display) -> DriverError {
    DriverError::new("open-failed", format!("{what}: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl VhostUserDriver {
    /// Opens queue pair 0 of a port with one queue pair.
    ///
    /// # Errors
    /// As [`VhostUserDriver::open_worker`].
    pub fn open(opts: &VhostUserOptions) -> Result<VhostUserDriver, DriverError> {
        Self::open_worker(opts, 1)
    }

    /// Opens the next queue pair of the port on `opts.socket` for an
    /// engine of `workers` workers: the first call listens on (or connects
    /// to) the socket offering `workers` queue pairs and serves pair 0;
    /// the next `workers - 1` calls with the same socket serve pairs 1, 2, ...
    ///
    /// # Errors
    /// The socket is in use by a live endpoint or cannot be bound, or the
    /// options are invalid.
    pub fn open_worker(opts: &VhostUserOptions, workers: usize) -> Result<VhostUserDriver, DriverError> {
        let what = format!("vhost-user socket {}", opts.socket.display());
        if !(64..=DEFAULT_QUEUE_SIZE).contains(&opts.queue_size) || !opts.queue_size.is_power_of_two() {
            return Err(open_error(
                &what,
                format!("queue size {} is not a power of two in 64..={DEFAULT_QUEUE_SIZE}", opts.queue_size),
            ));
        }
        let mut reg = lock(&PORTS);
        reg.retain(|(_, w, _)| w.strong_count() > 0);
        let joined = reg.iter_mut().find_map(|(path, w, next)| {
            let h = w.upgrade()?;
            (path == &opts.socket && *next < h.shared.pairs).then(|| {
                *next += 1;
                (h, *next - 1)
            })
        });
        let (handle, qp) = match joined {
            Some(j) => j,
            None => {
                let workers = workers.max(1);
                let mut features = opts.features | vf::BASE;
                if workers == 1 {
                    features &= !(vf::MQ | vf::CTRL_VQ);
                }
                let shared = PortShared::new(opts.socket.clone(), opts.mode, features, workers, opts.queue_size)
                    .map_err(|e| open_error(&what, e))?;
                let shared = Arc::new(shared);
                let control = Control::start(shared.clone()).map_err(|e| open_error(&what, e))?;
                let h = Arc::new(PortHandle { shared, _control: control });
                reg.push((opts.socket.clone(), Arc::downgrade(&h), 1));
                (h, 0)
            }
        };
        drop(reg);
        Ok(VhostUserDriver {
            opts: opts.clone(),
            handle,
            qp,
            hw: BASE_FEATURES,
            hw_changed: false,
            seen_gen: 0,
            active: None,
            stopped: [false; 2],
            validated: [false; 2],
            tx_kicks_on: true,
            rx_kicks_on: true,
            idle_since: None,
            idle_polls: 0,
            polling: false,
            signal_rx: false,
            signal_tx: false,
            signalled: [None; 2],
            tx_scratch: virtq::TxScratch::new(),
            recv_one: Vec::with_capacity(1),
            rx_scratch: virtq::RxScratch::new(),
            avail: [ring::AvailCursor::default(); 2],
            rings: Default::default(),
            lin: Vec::new(),
            backlog: VecDeque::with_capacity(BACKLOG),
            rx_burst: Vec::with_capacity(rx_burst::RX_BURST),
            rx_burst_len: Vec::with_capacity(rx_burst::RX_BURST),
            bursting: false,
            stats: Stats::default(),
            pending: Vec::new(),
        })
    }

    /// The socket.
    pub fn socket(&self) -> &Path {
        &self.opts.socket
    }

    /// The queue pair this driver serves.
    pub fn queue_pair(&self) -> usize {
        self.qp
    }

    /// True while a frontend is connected and has set the device up.
    pub fn connected(&mut self) -> bool {
        self.refresh();
        self.active.is_some()
    }

    /// Virtio features the frontend acked (0 without one).
    pub fn acked_features(&mut self) -> u64 {
        self.refresh();
        self.active.as_ref().map_or(0, |a| a.acked)
    }

    fn shared(&self) -> &PortShared {
        &self.handle.shared
    }

    fn drop_n(&mut self, reason: &'static str, n: u64) {
        count_drop(&mut self.pending, reason, n);
    }

    /// Takes in what the control thread published since the last look:
    /// one load and compare when nothing was (called per frame and per
    /// burst).
    #[inline(always)]
    fn refresh(&mut self) {
        let g = self.shared().generation.load(Ordering::Acquire);
        if g != self.seen_gen {
            self.take_in(g);
        }
    }

    /// [`VhostUserDriver::refresh`] of generation `g`, a change.
    fn take_in(&mut self, g: u64) {
        self.seen_gen = g;
        self.avail = [ring::AvailCursor::default(); 2];
        self.rings.iter_mut().for_each(ring::RingCache::clear);
        let conn = self.shared().current();
        let qp = self.qp;
        let next = conn.as_ref().and_then(|c| {
            let acked = c.acked.load(Ordering::Acquire);
            let vrings = c.vrings.get()?;
            if acked == 0 || vrings.len() < 2 * qp + 2 {
                return None;
            }
            let v1 = acked & (vf::VERSION_1 | vf::MRG_RXBUF) != 0;
            Some(Active {
                rx: vrings[2 * qp].clone(),
                tx: vrings[2 * qp + 1].clone(),
                mem: c.mem.memory().into_inner(),
                acked,
                hdr_len: if v1 { 12 } else { 10 },
                mrg: acked & vf::MRG_RXBUF != 0,
                within_limit: qp < c.pair_limit.load(Ordering::Acquire),
                conn: (Arc::as_ptr(c) as usize, c.resets.load(Ordering::Acquire)),
                owner: c.clone(),
            })
        });
        let same_conn = matches!((&self.active, &next), (Some(a), Some(b)) if a.conn == b.conn);
        if !same_conn {
            self.stopped = [false; 2];
            self.validated = [false; 2];
            self.tx_kicks_on = true;
            self.rx_kicks_on = true;
            self.signal_rx = false;
            self.signal_tx = false;
            self.signalled = [None; 2];
            let n = self.backlog.len() as u64;
            if n > 0 && next.is_none() {
                self.backlog.clear();
                self.drop_n("vhost-no-guest", n);
            }
        }
        let hw = next.as_ref().map_or(BASE_FEATURES, |a| netdev_features(a.acked));
        if hw != self.hw {
            self.hw = hw;
            self.hw_changed = true;
        }
        self.active = next;
    }

    /// Stops queue `which` (0 receive, 1 transmit) for `fault`.
    fn stop_queue(&mut self, which: usize, fault: QueueFault) {
        if !self.stopped[which] {
            self.stopped[which] = true;
            self.stats.queue_stopped += 1;
            self.drop_n(fault.reason(), 1);
            self.shared().note(format!("queue {} stopped: {}", 2 * self.qp + which, fault.reason()));
        }
    }

    /// Checks once per connection that queue `which`'s rings lie in guest memory.
    fn validate(&mut self, which: usize) -> bool {
        if self.validated[which] {
            return true;
        }
        let Some(a) = &self.active else { return false };
        let vr = if which == 0 { &a.rx } else { &a.tx };
        let st = vr.get_ref();
        if !in_service(a, &st) {
            return false;
        }
        let ok = st.get_queue().is_valid(&*a.mem);
        drop(st);
        if ok {
            self.validated[which] = true;
        } else {
            self.stop_queue(which, QueueFault::Address);
        }
        ok
    }

    /// Frames from the guest's transmit queue, at most `max`, each pushed on
    /// `out` in ring order; returns how many. The queue's lock, its ring
    /// lookup ([`ring::Rings::cached`]) and its checks are taken once for
    /// the burst, not per frame. Frames the port refuses (a bad header, a
    /// chain too long) are counted as drops in `discards`, and the burst
    /// ends when that reaches [`MAX_DISCARDS_PER_RECV`]. Zero with
    /// `discards` below the limit: the queue is empty, stopped or not in
    /// service.
    ///
    /// With `held`, up to `hold` frames may be taken held
    /// ([`virtq::take_frame_into`]): each one's [`HeldFrame`] is pushed on
    /// it, naming its packet's place in `out`
    /// ([`HeldFrame::burst_index`]).
    fn take_tx_burst(
        &mut self,
        max: usize,
        discards: &mut usize,
        out: &mut Vec<Packet>,
        mut held: Option<&mut Vec<HeldFrame>>,
    ) -> usize {
        let hold = held.as_ref().map_or(0, |h| held::MAX_HELD.saturating_sub(h.len()));
        if self.stopped[1] || !self.validate(1) {
            return 0;
        }
        let Some(a) = &self.active else { return 0 };
        let hdr_len = a.hdr_len;
        let mut st = a.tx.get_mut();
        if !in_service(a, &st) {
            return 0;
        }
        if self.tx_kicks_on {
            let _ = st.get_queue_mut().disable_notification(&*a.mem);
            self.tx_kicks_on = false;
        }
        let q = st.get_queue_mut();
        let mut frames = 0;
        let mut held_now = 0;
        let fault = match ring::Rings::cached(q, &a.mem, &mut self.rings[1]) {
            Err(f) => Some(f),
            Ok(rings) => loop {
                if frames == max || *discards >= MAX_DISCARDS_PER_RECV {
                    break None;
                }
                let (scratch, cursor) = (&mut self.tx_scratch, &mut self.avail[1]);
                let taken = match virtq::take_frame_into(&rings, q, cursor, scratch, hdr_len, held_now < hold, out) {
                    Ok(None) => break None,
                    Ok(Some(t)) => t,
                    Err(f) => break Some(f),
                };
                self.signal_tx = true;
                self.stats.rx_descs += u64::from(taken.descs);
                let f = match taken.frame {
                    Ok(f) => f,
                    Err(reason) => {
                        count_drop(&mut self.pending, reason, 1);
                        *discards += 1;
                        continue;
                    }
                };
                let Some(packet) = out.last() else { break None };
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += packet.len() as u64;
                if packet.meta.is_gso() {
                    self.stats.rx_superpackets += 1;
                }
                if f.csum_partial {
                    self.stats.rx_csum_partial += 1;
                }
                frames += 1;
                let (Some(h), Some(held)) = (f.held, held.as_deref_mut()) else { continue };
                let shared = self.handle.shared.clone();
                let completion = Completion::new(a.tx.clone(), q, shared, self.qp, a.owner.clone(), a.conn.1, h.head);
                match HeldFrame::new(a.mem.clone(), self.tx_scratch.bufs(), h.skip, h.len, packet, completion) {
                    Ok(frame) => {
                        held_now += 1;
                        self.stats.rx_held += 1;
                        held.push(frame.in_burst(out.len() - 1));
                    }
                    // (`take_frame_into` holds only what fits.)
                    Err(c) => {
                        out.pop();
                        if let Err(f) = rings.write_used(q, &[(c.head(), 0)]) {
                            break Some(f);
                        }
                        count_drop(&mut self.pending, "vhost-held-lost", 1);
                    }
                }
            },
        };
        self.tx_scratch.return_pool();
        drop(st);
        if let Some(f) = fault {
            self.stop_queue(1, f);
        }
        frames
    }

    /// True while the transmit queue has been empty for less than
    /// [`VhostUserOptions::busy_poll`]: kicks stay off and the worker polls
    /// again ([`PortDriver::wants_poll`]). A window starts at the first empty
    /// poll after a frame and ends (kicks on, the worker may sleep) when it
    /// has run out. The clock is read only at every
    /// [`IDLE_POLLS_PER_CLOCK_READ`]th empty poll of a window (the first read
    /// starts its timing): a busy port's windows are mostly a few polls
    /// long, and a clock read per empty poll was 2% of the engine's time in
    /// the 64-byte loop (docs/benchmarks.md, "vhost-user backends"). A
    /// window so lasts at most that many polls (each well under a
    /// microsecond) longer.
    fn keep_polling(&mut self) -> bool {
        if self.opts.busy_poll.is_zero() || self.stopped[1] || self.active.is_none() {
            self.end_idle_window();
            return false;
        }
        self.idle_polls = self.idle_polls.saturating_add(1);
        if !self.idle_polls.is_multiple_of(IDLE_POLLS_PER_CLOCK_READ) {
            return true;
        }
        let now = std::time::Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        if now.duration_since(since) < self.opts.busy_poll {
            return true;
        }
        self.end_idle_window();
        false
    }

    /// Leaves the busy-poll window ([`Self::keep_polling`]).
    fn end_idle_window(&mut self) {
        self.idle_since = None;
        self.idle_polls = 0;
    }

    /// Re-enables kicks on the transmit queue; true if frames arrived meanwhile.
    fn enable_tx_kicks(&mut self) -> bool {
        let Some(a) = &self.active else { return false };
        let mut st = a.tx.get_mut();
        if !in_service(a, &st) {
            return false;
        }
        self.tx_kicks_on = true;
        match st.get_queue_mut().enable_notification(&*a.mem) {
            Ok(more) => more,
            Err(_) => {
                drop(st);
                self.stop_queue(1, QueueFault::Address);
                false
            }
        }
    }

    /// Publishes the used elements of queue `which` (0 receive, 1
    /// transmit) written since the last call and notifies the guest if it
    /// wants to be: once per burst (an empty poll or the end of the engine
    /// round), not per frame ([`virtq`]'s invariants). The elements are
    /// written by `virtq::write_used`, not `add_used`, so the `EVENT_IDX`
    /// check is ours ([`virtq::wants_notification`]; `virtio-queue`'s also
    /// ignores `VIRTQ_AVAIL_F_NO_INTERRUPT` without `EVENT_IDX`).
    fn signal(&mut self, which: usize) {
        let Some(a) = &self.active else { return };
        let st = if which == 0 { a.rx.get_ref() } else { a.tx.get_ref() };
        let mem = &*a.mem;
        let q = st.get_queue();
        // A stop (`GET_VRING_BASE`) publishes what was written and clears
        // `ready` under this lock; a reset or a new connection changes the
        // reset count or the current connection. After any of them the ring
        // is the frontend's again: not even the index is written.
        if !q.ready() || !self.shared().still_serves(&a.owner, a.conn.1) {
            return;
        }
        let want = virtq::publish_used_idx(q, mem).and_then(|()| match self.signalled[which] {
            None => Ok(true),
            Some(since) => virtq::wants_notification(q, mem, since),
        });
        self.signalled[which] = Some(q.next_used());
        match want {
            Ok(true) => {
                if st.signal_used_queue().is_ok() {
                    self.stats.calls_sent += 1;
                }
            }
            Ok(false) => {}
            Err(f) => {
                drop(st);
                self.stop_queue(which, f);
            }
        }
    }

    fn signal_pending(&mut self) {
        if self.signal_rx {
            self.signal_rx = false;
            self.signal(0);
        }
        if self.signal_tx {
            self.signal_tx = false;
            self.signal(1);
        }
    }

    /// Places one frame in the guest's receive queue.
    ///
    /// With `held`, the frame's last `held.len()` bytes are copied from the
    /// sender's memory ([`virtq::push_rx_holding`]) after `parts`.
    fn place<'a>(
        &mut self,
        meta: &OffloadMeta,
        head: &[u8],
        parts: impl Iterator<Item = &'a [u8]>,
        len: usize,
        held: Option<&HeldFrame>,
    ) -> Result<(), Place> {
        let Some(a) = &self.active else { return Err(Place::Drop("vhost-no-guest")) };
        if self.stopped[0] {
            return Err(Place::Drop("vhost-queue-stopped"));
        }
        let hb = rx_header(a, meta, head).map_err(Place::Drop)?;
        let (hdr_len, mrg) = (a.hdr_len, a.mrg);
        // A pair the guest does not use (disabled, or beyond the pairs it
        // set) gets nothing: waiting would only fill the backlog.
        if !self.validate(0) {
            return Err(Place::Drop(if self.stopped[0] { "vhost-queue-stopped" } else { "vhost-queue-disabled" }));
        }
        let Some(a) = &self.active else { return Err(Place::Drop("vhost-no-guest")) };
        let mut st = a.rx.get_mut();
        if !in_service(a, &st) {
            return Err(Place::Drop("vhost-queue-disabled"));
        }
        let q = st.get_queue_mut();
        let r = ring::Rings::cached(q, &a.mem, &mut self.rings[0]).map_err(RxRefused::Fault).and_then(|rings| {
            let (scratch, cursor) = (&mut self.rx_scratch, &mut self.avail[0]);
            virtq::push_rx_holding(&rings, q, cursor, scratch, &hb[..hdr_len], parts, len, mrg, held)
        });
        drop(st);
        match r {
            Ok(placed) => {
                self.signal_rx = true;
                self.stats.placed(len, placed.chains, meta.is_gso());
                Ok(())
            }
            Err(RxRefused::NoRoom) => Err(Place::NoRoom),
            Err(RxRefused::TooBig) => Err(Place::Drop("vhost-rx-too-big")),
            Err(RxRefused::Fault(f)) => {
                self.stop_queue(0, f);
                Err(Place::Drop("vhost-queue-stopped"))
            }
        }
    }

    /// Sends what waits in the backlog, as long as the guest has room;
    /// with frames left, kicks on the receive queue stay enabled so the
    /// guest wakes the worker when it adds buffers.
    ///
    /// A frame that finds too few buffers is tried again only if the guest
    /// added buffers since the attempt (its available index moved): a guest
    /// that offers fewer buffers than a superpacket needs and then adds
    /// none (stuck, or gone mid-transfer) must not keep the worker copying
    /// the same frame into the same buffers forever.
    fn drain_backlog(&mut self) {
        while let Some(p) = self.backlog.pop_front() {
            let len = p.total_len();
            let before = self.rx_avail_idx();
            match self.place(&p.meta, p.linear(), p.all_chunks(), len, None) {
                Ok(()) => {}
                Err(Place::Drop(r)) => self.drop_n(r, 1),
                Err(Place::NoRoom) => {
                    self.backlog.push_front(p);
                    self.enable_rx_kicks();
                    if before.is_some() && self.rx_avail_idx() != before {
                        continue;
                    }
                    return;
                }
            }
        }
        if self.rx_kicks_on {
            if let Some(a) = &self.active {
                let _ = a.rx.get_mut().get_queue_mut().disable_notification(&*a.mem);
            }
            self.rx_kicks_on = false;
        }
    }

    /// The guest's available index of the receive queue (`None` without
    /// a usable one).
    fn rx_avail_idx(&self) -> Option<u16> {
        let a = self.active.as_ref()?;
        let st = a.rx.get_ref();
        let q = st.get_queue();
        if !in_service(a, &st) {
            return None;
        }
        q.avail_idx(&*a.mem, Ordering::Acquire).ok().map(|w| w.0)
    }

    /// Enables kicks on the receive queue; true if buffers arrived meanwhile.
    fn enable_rx_kicks(&mut self) -> bool {
        let Some(a) = &self.active else { return false };
        let mut st = a.rx.get_mut();
        if !in_service(a, &st) {
            return false;
        }
        self.rx_kicks_on = true;
        matches!(st.get_queue_mut().enable_notification(&*a.mem), Ok(true))
    }

    /// Keeps `p` for when the guest has room, or drops it (`vhost-rx-ring-full`).
    fn backlog_push(&mut self, p: Packet) {
        if self.backlog.len() >= BACKLOG {
            self.drop_n("vhost-rx-ring-full", 1);
        } else {
            self.stats.tx_backlogged += 1;
            self.backlog.push_back(p);
        }
    }

    /// A frame from the segmenter: placed now, or copied into the backlog.
    fn sink_frame<'a, I: Iterator<Item = &'a [u8]>>(
        &mut self,
        meta: &OffloadMeta,
        head: &[u8],
        parts: impl Fn() -> I,
        len: usize,
    ) {
        // Frames held earlier go first (the port keeps the graph's order).
        self.place_rx_burst();
        self.refresh();
        if !self.backlog.is_empty() {
            self.drain_backlog();
        }
        let r = if self.backlog.is_empty() { self.place(meta, head, parts(), len, None) } else { Err(Place::NoRoom) };
        match r {
            Ok(()) => {}
            Err(Place::Drop(reason)) => self.drop_n(reason, 1),
            Err(Place::NoRoom) => {
                let mut data = Vec::with_capacity(len);
                for c in parts() {
                    data.extend_from_slice(c);
                }
                let mut p = Packet::from_frame(&data);
                p.meta = *meta;
                self.backlog_push(p);
            }
        }
    }

    /// [`PortDriver::recv_burst`]: up to `max` frames from the guest, each
    /// pushed on `out`; returns how many. With none, the queue's idle
    /// handling: used buffers given back, then busy polling or kicks on.
    ///
    /// With `held`, frames may come held (see [`Self::take_tx_burst`]).
    fn receive_burst(&mut self, max: usize, out: &mut Vec<Packet>, mut held: Option<&mut Vec<HeldFrame>>) -> usize {
        self.polling = false;
        self.refresh();
        if self.active.is_none() {
            self.shared().wake[self.qp].take();
            return 0;
        }
        if !self.backlog.is_empty() {
            self.drain_backlog();
        }
        let mut discards = 0;
        let mut idle = 0;
        while idle < MAX_IDLE_CHECKS && discards < MAX_DISCARDS_PER_RECV {
            let n = self.take_tx_burst(max, &mut discards, out, held.as_deref_mut());
            if n > 0 {
                self.end_idle_window();
                return n;
            }
            if discards >= MAX_DISCARDS_PER_RECV {
                break;
            }
            // Idle: give back used buffers; while busy polling, come back
            // next round with kicks off; else take the wake-up and sleep
            // with kicks enabled unless frames slipped in meanwhile. The
            // wake-up is not read while polling: with kicks off it is
            // rarely signalled, and reading it is a system call per empty
            // poll (per engine round), which at two frames a round was
            // most of a frame's cost in the loop (docs/benchmarks.md,
            // "vhost-user backends"). A connection change is seen through
            // the generation (`refresh`), not the descriptor.
            self.signal_pending();
            if self.keep_polling() {
                self.polling = true;
                return 0;
            }
            if self.shared().wake[self.qp].take() {
                self.stats.wakeups += 1;
            }
            if self.stopped[1] || !self.enable_tx_kicks() {
                return 0;
            }
            idle += 1;
        }
        // Still frames: make the descriptor readable so the worker comes back.
        self.shared().wake[self.qp].notify();
        0
    }
}

/// Adds `n` drops for `reason` to the counts a driver reports at
/// [`PortDriver::take_drops`].
fn count_drop(pending: &mut Vec<(&'static str, u64)>, reason: &'static str, n: u64) {
    match pending.iter_mut().find(|(r, _)| *r == reason) {
        Some((_, c)) => *c += n,
        None => pending.push((reason, n)),
    }
}

enum Place {
    NoRoom,
    Drop(&'static str),
}

impl PortDriver for VhostUserDriver {
    fn kind(&self) -> &'static str {
        "vhost-user"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Any
    }
    fn take_hw_change(&mut self) -> Option<NetdevFeatures> {
        self.refresh();
        std::mem::take(&mut self.hw_changed).then_some(self.hw)
    }
    /// Copies `pkt` into the guest's receive buffers (or the backlog).
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        let len = pkt.total_len();
        self.xmit_len(pkt, len)
    }
    fn xmit_len(&mut self, pkt: Packet, len: usize) -> Result<(), DriverError> {
        self.refresh();
        if self.active.is_none() {
            return Err(DriverError::new("vhost-no-guest", format!("no guest on {}", self.opts.socket.display())));
        }
        if self.bursting {
            self.push_rx_burst(pkt, len);
            return Ok(());
        }
        if !self.backlog.is_empty() {
            self.drain_backlog();
            if !self.backlog.is_empty() {
                self.backlog_push(pkt);
                return Ok(());
            }
        }
        // A linear packet (every frame copied from a guest) is its one
        // chunk: `all_chunks`'s chained iterators cost more than the
        // copy of a small frame.
        let placed = if pkt.segments().is_empty() && pkt.frag_list().is_empty() {
            self.place(&pkt.meta, pkt.linear(), std::iter::once(pkt.linear()), len, None)
        } else {
            self.place(&pkt.meta, pkt.linear(), pkt.all_chunks(), len, None)
        };
        match placed {
            Ok(()) => Ok(()),
            Err(Place::NoRoom) => {
                self.backlog_push(pkt);
                Ok(())
            }
            Err(Place::Drop(reason)) => Err(DriverError::new(reason, format!("vhost-user {}: {reason}", self.qp))),
        }
    }
    /// In a burst ([`PortDriver::hold_tx`]), the per-call checks are made
    /// once for the run: with nothing held, the run is placed at once
    /// (the `rx_burst` module's invariants: it is what the flush would
    /// place first) and the placed frames are left in their slots for the
    /// caller to drop; else it is held behind what is. Outside a burst,
    /// [`PortDriver::xmit_len`] per frame.
    fn xmit_burst(&mut self, pkts: &mut [Packet], lens: &[usize], refused: &mut dyn FnMut(&'static str)) {
        self.refresh();
        if self.active.is_none() {
            // As `xmit_len` refuses each (the caller drops them).
            pkts.iter().for_each(|_| refused("vhost-no-guest"));
            return;
        }
        if !self.bursting {
            super::port::xmit_each(self, pkts, lens, refused);
        } else if self.rx_burst.is_empty() {
            self.place_frames(pkts, lens);
            // Their buffers back to the pool together (the caller's drop
            // of each is an access to it per buffer).
            Packet::recycle_small_all(pkts);
        } else {
            self.push_rx_burst_all(pkts, lens);
        }
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        let mut one = std::mem::take(&mut self.recv_one);
        self.receive_burst(1, &mut one, None);
        let got = one.pop();
        self.recv_one = one;
        got
    }
    fn recv_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        self.receive_burst(max, out, None)
    }
    /// At most [`held::MAX_HELD`] frames held, counting what `held` holds
    /// (the caller resolves every held frame before its next call: see the
    /// trait).
    fn recv_burst_held(&mut self, out: &mut Vec<Packet>, held: &mut Vec<HeldFrame>, max: usize) -> usize {
        self.receive_burst(max, out, Some(held))
    }
    fn takes_held(&self) -> bool {
        true
    }
    /// The one-copy path: the payload copied from the sender's guest
    /// memory into this guest's receive buffers, and the sender's chain
    /// given back after it (the frame's drop). A frame that must wait (a
    /// backlog, no room) is materialised first: it may outlive the round.
    fn xmit_held(&mut self, mut pkt: Packet, len: usize, held: HeldFrame) -> Result<(), DriverError> {
        self.refresh();
        if self.active.is_none() {
            return Err(DriverError::new("vhost-no-guest", format!("no guest on {}", self.opts.socket.display())));
        }
        // The round's earlier frames go first: frames leave in the order
        // the graph gave them (see [`rx_burst`]).
        self.place_rx_burst();
        if !self.backlog.is_empty() {
            self.drain_backlog();
        }
        let placed = match pkt.linear().len().checked_sub(held.len()) {
            Some(own) if self.backlog.is_empty() && pkt.segments().is_empty() && pkt.frag_list().is_empty() => {
                let head = &pkt.linear()[..own];
                self.place(&pkt.meta, pkt.linear(), std::iter::once(head), len, Some(&held))
            }
            _ => Err(Place::NoRoom),
        };
        match placed {
            Ok(()) => Ok(()),
            Err(Place::NoRoom) => {
                match held.materialise(&mut pkt) {
                    Ok(()) => self.backlog_push(pkt),
                    Err(reason) => self.drop_n(reason, 1),
                }
                Ok(())
            }
            Err(Place::Drop(reason)) => Err(DriverError::new(reason, format!("vhost-user {}: {reason}", self.qp))),
        }
    }
    fn take_drops(&mut self, report: &mut dyn FnMut(&'static str, u64)) {
        for (reason, n) in self.pending.drain(..) {
            report(reason, n);
        }
    }
    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.shared().wake_fd(self.qp))
    }
    fn wants_poll(&self) -> bool {
        self.polling
    }
    fn hold_tx(&mut self) {
        self.bursting = true;
    }
    fn flush(&mut self) {
        self.bursting = false;
        self.place_rx_burst();
        self.refresh();
        if !self.backlog.is_empty() {
            self.drain_backlog();
        }
        self.signal_pending();
    }
    /// Port-wide, reported by the worker of pair 0 only (so that summing
    /// workers keeps them right): `connected` (0/1), `queue_pairs`,
    /// `features` (acked virtio feature bits), `attaches`, `detaches`,
    /// `protocol_errors`, `ctrl_commands`, `ctrl_refused`, `ctrl_stopped`
    /// (a control queue handed to the port: see [`ctrl`]), `mem_refused`,
    /// `mem_regions_sealed`, `mem_regions_unsealed` (see [`memory`]), `held_stop_timeouts` (see [`held`]). Per queue pair
    /// (summed over the workers): `pairs_enabled` (pairs in service: set up,
    /// enabled by the frontend, within the pairs the guest set),
    /// `pairs_rx_used` and `pairs_tx_used` (pairs that took frames from
    /// the guest, that placed frames in its receive queue); toward the
    /// guest: `tx_frames`, `tx_bytes`, `tx_superpackets`, `tx_buffers`
    /// (receive chains used, `num_buffers` summed), `tx_backlogged`,
    /// `backlog`; from the guest: `rx_frames`, `rx_bytes`,
    /// `rx_superpackets`, `rx_csum_partial`, `rx_held` (frames whose
    /// payload was left in the guest's memory: [`held`]), `rx_descs`; `queue_stopped`
    /// (queues stopped for a guest fault), `calls_sent`, `wakeups`.
    fn driver_counters(&self, report: &mut dyn FnMut(&'static str, u64)) {
        if self.qp == 0 {
            let c = &self.shared().stats;
            for (name, v) in [
                ("connected", u64::from(self.active.is_some())),
                ("queue_pairs", self.shared().pairs as u64),
                ("features", self.active.as_ref().map_or(0, |a| a.acked)),
                ("attaches", c.attaches.load(Ordering::Relaxed)),
                ("detaches", c.detaches.load(Ordering::Relaxed)),
                ("protocol_errors", c.errors.load(Ordering::Relaxed)),
                ("ctrl_commands", c.ctrl_commands.load(Ordering::Relaxed)),
                ("ctrl_refused", c.ctrl_refused.load(Ordering::Relaxed)),
                ("ctrl_stopped", c.ctrl_stopped.load(Ordering::Relaxed)),
                ("mem_refused", c.mem_refused.load(Ordering::Relaxed)),
                ("mem_regions_sealed", c.mem_regions_sealed.load(Ordering::Relaxed)),
                ("mem_regions_unsealed", c.mem_regions_unsealed.load(Ordering::Relaxed)),
                ("held_stop_timeouts", c.held_stop_timeouts.load(Ordering::Relaxed)),
            ] {
                report(name, v);
            }
        }
        let s = &self.stats;
        let enabled =
            self.active.as_ref().is_some_and(|a| in_service(a, &a.rx.get_ref()) && in_service(a, &a.tx.get_ref()));
        for (name, v) in [
            ("pairs_enabled", u64::from(enabled)),
            ("pairs_rx_used", u64::from(s.rx_frames > 0)),
            ("pairs_tx_used", u64::from(s.tx_frames > 0)),
            ("tx_frames", s.tx_frames),
            ("tx_bytes", s.tx_bytes),
            ("tx_superpackets", s.tx_superpackets),
            ("tx_buffers", s.tx_buffers),
            ("tx_backlogged", s.tx_backlogged),
            ("backlog", self.backlog.len() as u64),
            ("rx_frames", s.rx_frames),
            ("rx_bytes", s.rx_bytes),
            ("rx_superpackets", s.rx_superpackets),
            ("rx_csum_partial", s.rx_csum_partial),
            ("rx_held", s.rx_held),
            ("rx_descs", s.rx_descs),
            ("queue_stopped", s.queue_stopped),
            ("calls_sent", s.calls_sent),
            ("wakeups", s.wakeups),
        ] {
            report(name, v);
        }
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl SegmentSink for VhostUserDriver {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        let len = packet.total_len();
        self.sink_frame(meta, packet.linear(), || packet.all_chunks(), len);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        let parts = || std::iter::once(frame.header).chain(frame.payload.iter().copied());
        self.sink_frame(&frame.meta, frame.header, parts, frame.len());
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.lin.clear();
        self.lin.resize(len, 0);
        &mut self.lin
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let lin = std::mem::take(&mut self.lin);
        let data = &lin[..len.min(lin.len())];
        self.sink_frame(meta, data, || std::iter::once(data), data.len());
        self.lin = lin;
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_held;
