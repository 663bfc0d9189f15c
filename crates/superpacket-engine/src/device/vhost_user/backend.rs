//! The vhost-user protocol side of a port: `vhost-user-backend`'s
//! [`VhostUserDaemon`] runs the socket (features, memory table, vring
//! setup) in a control thread; [`NetBackend`] is what it calls back. The
//! data path is not here: the engine workers touch the vrings themselves
//! (see the parent module).
//!
//! One [`PortShared`] lives as long as the port; each connection gets a
//! new daemon and a new [`Conn`] (the daemon's vrings, the guest memory,
//! the acked features), published to the workers through
//! [`PortShared::conn`] with [`PortShared::generation`] bumped, so a worker
//! notices a connect, a disconnect, a feature or memory change with one
//! atomic load.

use super::ctrl::{self, Command};
use super::enable_relay;
use super::features as vf;
use super::held::{HeldQueue, STOP_WAIT};
use super::memory;
use super::virtq;
use crate::io::event::EventFd;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;
use vhost::vhost_user::Listener;
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost_user_backend::{ShutdownHandle, VhostUserBackend, VhostUserDaemon, VringMutex, VringT};
use virtio_queue::QueueT;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{EventConsumer, EventFlag, EventNotifier, new_event_consumer_and_notifier};

/// Guest memory behind an atomic pointer (replaced on `SET_MEM_TABLE`).
/// The daemon maps each table into one of its own; the workers see a
/// second one, [`Conn::mem`], which gets a table only once
/// [`memory::check_and_seal`] passed it.
pub type Mem = GuestMemoryAtomic<GuestMemoryMmap<()>>;
/// One vring: the daemon's state behind a mutex the workers take briefly.
pub type Vring = VringMutex<Mem>;

/// Whether the engine listens or connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The engine listens on the socket; the VMM (or DPDK virtio-user)
    /// connects. One frontend at a time; the next may connect after it leaves.
    #[default]
    Server,
    /// The engine connects to a listening VMM and connects again whenever
    /// the connection ends (every [`RECONNECT_INTERVAL`] until it succeeds).
    Client,
}

/// How long a client-mode port waits between connection attempts.
pub const RECONNECT_INTERVAL: Duration = Duration::from_millis(200);

/// What one connection's daemon shares with the workers.
pub struct Conn {
    /// The daemon's vrings (queue `2 * i` receives into the guest, `2 * i + 1`
    /// is the guest's transmit queue), known once the daemon's event thread
    /// called [`NetBackend::handle_event`].
    pub vrings: OnceLock<Vec<Vring>>,
    /// The guest's memory as checked and sealed ([`memory`]): the only
    /// memory the workers and the control queue touch (vring accessors
    /// that would use the daemon's own, unchecked, copy are not called).
    pub mem: Mem,
    /// Virtio features the frontend acked (0 until `SET_FEATURES`).
    pub acked: AtomicU64,
    /// Device resets so far (`RESET_DEVICE`): a stopped queue starts
    /// again after one.
    pub resets: AtomicU64,
    /// Queue pairs the guest may use, as it set them through a control
    /// queue handed to the port (`VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET`;
    /// [`NO_PAIR_LIMIT`] while no control queue is in use: the frontend
    /// enables and disables pairs with `SET_VRING_ENABLE`).
    pub pair_limit: AtomicUsize,
    /// The control queue was stopped for a guest fault.
    ctrl_stopped: AtomicBool,
    /// Exit notifiers of the daemon's event threads (to end them when the
    /// connection ends).
    exits: Mutex<Vec<EventNotifier>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("acked", &self.acked.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl Conn {
    /// A new connection: no vrings and no memory yet, nothing acked, no
    /// reset, no pair limit.
    fn fresh() -> Conn {
        Conn {
            vrings: OnceLock::new(),
            mem: GuestMemoryAtomic::new(GuestMemoryMmap::new()),
            acked: AtomicU64::new(0),
            resets: AtomicU64::new(0),
            pair_limit: AtomicUsize::new(NO_PAIR_LIMIT),
            ctrl_stopped: AtomicBool::new(false),
            exits: Mutex::new(Vec::new()),
        }
    }

    /// A connection with no daemon behind it (no vrings, no memory), for
    /// tests that only need its identity.
    #[cfg(test)]
    pub fn for_test() -> Conn {
        Conn::fresh()
    }
}

/// [`Conn::pair_limit`] without a control queue.
pub const NO_PAIR_LIMIT: usize = usize::MAX;

/// Counters of the protocol side.
#[derive(Debug, Default)]
pub struct ControlStats {
    /// Frontends that connected.
    pub attaches: AtomicU64,
    /// Connections that ended.
    pub detaches: AtomicU64,
    /// Connection attempts or daemons that failed.
    pub errors: AtomicU64,
    /// Commands answered on a control queue handed to the port.
    pub ctrl_commands: AtomicU64,
    /// Of those, refused (`VIRTIO_NET_ERR`): unknown or malformed.
    pub ctrl_refused: AtomicU64,
    /// Control queues stopped for a guest fault.
    pub ctrl_stopped: AtomicU64,
    /// Memory tables refused ([`memory::Refused`]: a region past the end
    /// of its file); the connection is ended.
    pub mem_refused: AtomicU64,
    /// Regions accepted whose file cannot shrink any more (`F_SEAL_SHRINK`).
    pub mem_regions_sealed: AtomicU64,
    /// Regions accepted whose file could not be sealed.
    pub mem_regions_unsealed: AtomicU64,
    /// Stops (`GET_VRING_BASE`, `RESET_DEVICE`, a disconnect) that gave up
    /// waiting for held frames ([`super::held::STOP_WAIT`]).
    pub held_stop_timeouts: AtomicU64,
}

/// What a port's control thread, its daemon and its workers share.
pub struct PortShared {
    /// The socket.
    pub socket: PathBuf,
    /// Listen or connect.
    pub mode: Mode,
    /// Virtio features offered.
    pub offered: u64,
    /// Queue pairs offered (one per engine worker).
    pub pairs: usize,
    /// Most descriptors per queue.
    pub queue_size: u16,
    /// One wake eventfd per queue pair: the poll descriptor of the worker
    /// serving it, signalled on a kick of either of its queues and on any
    /// connection change.
    pub wake: Vec<EventFd>,
    /// The current connection, if any.
    pub conn: Mutex<Option<Arc<Conn>>>,
    /// Bumped on every change of `conn` or of what it holds.
    pub generation: AtomicU64,
    /// Protocol-side counters.
    pub stats: ControlStats,
    /// The held frames of each queue pair's transmit queue
    /// ([`super::held`]): what a stop waits for.
    pub held: Vec<HeldQueue>,
    /// The last protocol error, for people.
    pub last_error: Mutex<Option<String>>,
    stop: AtomicBool,
    stop_evt: EventFd,
    shutdown: Mutex<Option<ShutdownHandle>>,
}

impl std::fmt::Debug for PortShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortShared")
            .field("socket", &self.socket)
            .field("mode", &self.mode)
            .field("pairs", &self.pairs)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PortShared {
    /// Shared state for a port on `socket`.
    ///
    /// # Errors
    /// An eventfd cannot be created.
    pub fn new(
        socket: PathBuf,
        mode: Mode,
        offered: u64,
        pairs: usize,
        queue_size: u16,
    ) -> std::io::Result<PortShared> {
        let ev = || EventFd::new().map_err(|e| std::io::Error::other(e.to_string()));
        let wake = (0..pairs.max(1)).map(|_| ev()).collect::<Result<Vec<_>, _>>()?;
        Ok(PortShared {
            socket,
            mode,
            offered,
            pairs: pairs.max(1),
            queue_size,
            wake,
            conn: Mutex::new(None),
            generation: AtomicU64::new(1),
            stats: ControlStats::default(),
            held: (0..pairs.max(1)).map(|_| HeldQueue::default()).collect(),
            last_error: Mutex::new(None),
            stop: AtomicBool::new(false),
            stop_evt: ev()?,
            shutdown: Mutex::new(None),
        })
    }

    /// Publishes a change: bumps the generation and wakes every worker.
    pub fn changed(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        for w in &self.wake {
            w.notify();
        }
    }

    /// The current connection.
    pub fn current(&self) -> Option<Arc<Conn>> {
        lock(&self.conn).clone()
    }

    /// True if `conn` is still the current connection and its device was
    /// not reset since it counted `resets`: what a write into its rings
    /// checks first (a used element of a held frame, a used index).
    pub fn still_serves(&self, conn: &Arc<Conn>, resets: u64) -> bool {
        self.current().is_some_and(|c| Arc::ptr_eq(&c, conn)) && conn.resets.load(Ordering::Acquire) == resets
    }

    fn error(&self, e: impl std::fmt::Display) {
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        self.note(e.to_string());
    }

    /// Keeps `what` as the port's last error and tells the operator on
    /// standard error, once per distinct message: a frontend that repeats
    /// the same fault on every reconnect does not flood the log, and the
    /// counters say how often it happened.
    pub fn note(&self, what: String) {
        let mut last = lock(&self.last_error);
        if last.as_deref() != Some(what.as_str()) {
            eprintln!("superpacket: vhost-user {}: {what}", self.socket.display());
            *last = Some(what);
        }
    }

    /// Waits for the held frames of every queue pair ([`HeldQueue::wait_drained`]),
    /// counting a wait that gave up; then counts a stop of each transmit
    /// queue of `vrings` under its lock ([`HeldQueue::stopped`]). The reset
    /// or the connection change before the wait is made without the queue's
    /// lock: a completion that read them unchanged just as a wait gave up
    /// could still write, but not past a stop counted under the lock, which
    /// it checks under the same lock.
    fn wait_held_drained(&self, vrings: Option<&[Vring]>) {
        let start = std::time::Instant::now();
        let all = self.held.iter().all(|h| h.wait_drained(STOP_WAIT.saturating_sub(start.elapsed())));
        if !all {
            self.held_stop_timed_out();
        }
        for (qp, held) in self.held.iter().enumerate() {
            if let Some(tx) = vrings.and_then(|v| v.get(2 * qp + 1)) {
                let _locked = tx.get_mut();
                held.stopped();
            }
        }
    }

    fn held_stop_timed_out(&self) {
        self.stats.held_stop_timeouts.fetch_add(1, Ordering::Relaxed);
        self.note("a stop gave up waiting for held frames: their buffers are lost to the frontend".into());
    }

    /// The wake descriptor of queue pair `qp`.
    pub fn wake_fd(&self, qp: usize) -> RawFd {
        self.wake[qp].as_fd().as_raw_fd()
    }
}

/// The [`VhostUserBackend`] of one connection.
#[derive(Clone)]
pub struct NetBackend {
    port: Arc<PortShared>,
    conn: Arc<Conn>,
}

impl VhostUserBackend for NetBackend {
    type Bitmap = ();
    type Vring = Vring;

    /// Two per queue pair, and the control queue (index `2N`) when
    /// `CTRL_VQ` is offered.
    fn num_queues(&self) -> usize {
        2 * self.port.pairs + usize::from(self.port.offered & vf::CTRL_VQ != 0)
    }
    fn max_queue_size(&self) -> usize {
        usize::from(self.port.queue_size)
    }
    fn features(&self) -> u64 {
        self.port.offered | vf::VHOST_USER_F_PROTOCOL_FEATURES
    }
    fn acked_features(&self, features: u64) {
        self.conn.acked.store(features, Ordering::Release);
        self.port.changed();
    }
    /// `MQ`, `REPLY_ACK`, `CONFIG` (the virtio-net config space: link up,
    /// queue pairs), `RESET_DEVICE`. Not offered because the crates do not
    /// implement them: `INFLIGHT_SHMFD` (QEMU's in-flight tracking for
    /// reconnecting without losing descriptors), `STATUS`, `LOG_SHMFD`.
    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::RESET_DEVICE
    }
    /// Held frames taken before the reset write nothing; the reset is
    /// answered once none is left ([`super::held`], "At a stop").
    fn reset_device(&self) {
        self.conn.resets.fetch_add(1, Ordering::AcqRel);
        self.conn.acked.store(0, Ordering::Release);
        self.conn.pair_limit.store(NO_PAIR_LIMIT, Ordering::Release);
        self.conn.ctrl_stopped.store(false, Ordering::Release);
        self.port.changed();
        self.port.wait_held_drained(self.conn.vrings.get().map(Vec::as_slice));
    }
    /// `GET_VRING_BASE` of data queue `index`, between the crate marking
    /// it not ready and reading its base (`next_avail`): see
    /// `NetBackend::stop_data_queue`.
    fn stop_vring(&self, index: u32) -> std::io::Result<()> {
        let index = index as usize;
        if index < 2 * self.port.pairs
            && let Some(vring) = self.conn.vrings.get().and_then(|v| v.get(index))
        {
            self.stop_data_queue(index, vring);
        }
        Ok(())
    }
    fn set_event_idx(&self, _enabled: bool) {
        // The queues carry the flag themselves (set by the daemon).
    }
    /// `struct virtio_net_config`: mac (zero: not offered), status
    /// (`VIRTIO_NET_S_LINK_UP`), max_virtqueue_pairs, mtu.
    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        let mut cfg = [0u8; 12];
        cfg[6..8].copy_from_slice(&1u16.to_le_bytes());
        cfg[8..10].copy_from_slice(&(self.port.pairs as u16).to_le_bytes());
        cfg[10..12].copy_from_slice(&1500u16.to_le_bytes());
        let start = (offset as usize).min(cfg.len());
        let end = start.saturating_add(size as usize).min(cfg.len());
        cfg[start..end].to_vec()
    }
    /// The daemon mapped a new table into its own atomic: seal and check
    /// it ([`memory::check_and_seal`]) and only then hand it to the
    /// workers. A refusal is an error of `SET_MEM_TABLE` (a failure reply
    /// with `REPLY_ACK`), which ends the connection; the workers keep what
    /// they had and the daemon's mapping goes with the connection.
    fn update_memory(&self, mem: Mem) -> std::io::Result<()> {
        let table = GuestMemoryMmap::clone(&mem.memory());
        let stats = &self.port.stats;
        match memory::check_and_seal(&table) {
            Ok(c) => {
                stats.mem_regions_sealed.fetch_add(c.sealed, Ordering::Relaxed);
                stats.mem_regions_unsealed.fetch_add(c.unsealed, Ordering::Relaxed);
                self.conn.mem.lock().unwrap_or_else(std::sync::PoisonError::into_inner).replace(table);
                self.port.changed();
                Ok(())
            }
            Err(refused) => {
                stats.mem_refused.fetch_add(1, Ordering::Relaxed);
                self.port.note(refused.to_string());
                Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, refused))
            }
        }
    }
    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        let (c, n) = new_event_consumer_and_notifier(EventFlag::NONBLOCK | EventFlag::CLOEXEC).ok()?;
        let keep = n.try_clone().ok()?;
        lock(&self.conn.exits).push(keep);
        Some((c, n))
    }
    /// A kick (or a vring that became enabled): wake the worker serving
    /// that queue pair, or answer the control queue. The first call also
    /// publishes the vrings.
    fn handle_event(
        &self,
        device_event: u16,
        _evset: EventSet,
        vrings: &[Vring],
        _thread_id: usize,
    ) -> std::io::Result<()> {
        if self.conn.vrings.get().is_none() && vrings.len() == self.num_queues() {
            let _ = self.conn.vrings.set(vrings.to_vec());
            self.port.changed();
        }
        let ctrl_index = 2 * self.port.pairs;
        if usize::from(device_event) == ctrl_index {
            if let Some(v) = vrings.get(ctrl_index) {
                self.serve_ctrl(v);
            }
            return Ok(());
        }
        let qp = usize::from(device_event) / 2;
        if let Some(w) = self.port.wake.get(qp) {
            w.notify();
        }
        Ok(())
    }
}

impl NetBackend {
    /// Stops data queue `index` (`vring`, already not ready: no worker
    /// takes another chain from it) so that the base the crate reads next
    /// accounts for every chain taken: a transmit queue's held frames are
    /// waited for (they still write their used elements: [`super::held`],
    /// "At a stop"), then the used index of everything the workers wrote
    /// is published, which a worker would otherwise do at the end of its
    /// round, maybe after the frontend read the ring. Nothing is written
    /// into a ring that was not started since its last stop (no kick
    /// descriptor: the crate drops it after each stop).
    fn stop_data_queue(&self, index: usize, vring: &Vring) {
        let held = (index % 2 == 1).then(|| &self.port.held[index / 2]);
        if held.is_some_and(|h| !h.wait_drained(STOP_WAIT)) {
            self.port.held_stop_timed_out();
        }
        let st = vring.get_mut();
        if let Some(h) = held {
            h.stopped();
        }
        if st.get_kick().is_some() {
            // A fault is the guest's (its used ring left its memory).
            let _ = virtq::publish_used_idx(st.get_queue(), &*self.conn.mem.memory());
        }
    }

    /// Answers every command waiting on the control queue (in the daemon's
    /// event thread: commands are rare and touch no data queue).
    /// `VQ_PAIRS_SET` limits the pairs the workers serve; the first kick
    /// sets the limit to one pair, the virtio default once a driver uses
    /// the control queue.
    fn serve_ctrl(&self, vring: &Vring) {
        let (conn, port) = (&self.conn, &self.port);
        if conn.ctrl_stopped.load(Ordering::Acquire) {
            return;
        }
        let mem = conn.mem.memory();
        let mut st = vring.get_mut();
        let q = st.get_queue();
        if !q.ready() || !st.is_enabled() {
            return;
        }
        let mut limit_changed =
            conn.pair_limit.compare_exchange(NO_PAIR_LIMIT, 1, Ordering::AcqRel, Ordering::Acquire).is_ok();
        let fault = if q.is_valid(&*mem) { None } else { Some(super::virtq::QueueFault::Address) };
        let (mut answered, mut fault) = (0u16, fault);
        let max_pairs = u16::try_from(port.pairs).unwrap_or(u16::MAX);
        // At most one queue's worth per kick: a guest that keeps adding
        // commands does not hold the thread.
        while fault.is_none() && answered < st.get_queue().size() {
            match ctrl::serve_one(st.get_queue_mut(), &*mem, max_pairs) {
                Ok(None) => break,
                Ok(Some(cmd)) => {
                    answered += 1;
                    port.stats.ctrl_commands.fetch_add(1, Ordering::Relaxed);
                    match cmd {
                        Command::PairsSet(n) => {
                            conn.pair_limit.store(usize::from(n), Ordering::Release);
                            limit_changed = true;
                        }
                        Command::Refused { class, command } => {
                            port.stats.ctrl_refused.fetch_add(1, Ordering::Relaxed);
                            port.note(format!("control queue: refused class {class} command {command}"));
                        }
                    }
                }
                Err(f) => fault = Some(f),
            }
        }
        if let Some(f) = fault {
            conn.ctrl_stopped.store(true, Ordering::Release);
            port.stats.ctrl_stopped.fetch_add(1, Ordering::Relaxed);
            port.note(format!("control queue stopped: {}", f.reason()));
        }
        if answered > 0 && matches!(st.get_queue_mut().needs_notification(&*mem), Ok(true)) {
            let _ = st.signal_used_queue();
        }
        drop(st);
        if limit_changed {
            port.changed();
        }
    }
}

/// Waits until `fd` is readable or the port is stopping (or `timeout`
/// passed); true if the port is stopping.
fn wait_readable(port: &PortShared, fd: Option<RawFd>, timeout: Option<Duration>) -> bool {
    let mut fds = [
        libc::pollfd { fd: port.stop_evt.as_fd().as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: fd.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
    ];
    let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
    // SAFETY: `fds` is a valid array of two pollfd for the duration of the
    // call; a negative fd is ignored by poll.
    let _ = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    port.stop.load(Ordering::Acquire)
}

/// Runs one connection's daemon until the connection ends.
fn serve_one(port: &Arc<PortShared>, listener: Option<&mut Listener>) {
    let daemon_mem: Mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
    let conn = Arc::new(Conn::fresh());
    let backend = NetBackend { port: port.clone(), conn: conn.clone() };
    let end_threads = |conn: &Conn| {
        for n in lock(&conn.exits).iter() {
            let _ = n.notify();
        }
    };
    let mut daemon = match VhostUserDaemon::new("sp-vhost-user".into(), backend, daemon_mem) {
        Ok(d) => d,
        Err(e) => {
            port.error(e);
            end_threads(&conn);
            std::thread::sleep(RECONNECT_INTERVAL);
            return;
        }
    };
    let frontend = match listener {
        Some(l) => l.accept().map_err(|e| e.to_string()).and_then(|s| s.ok_or_else(|| "no connection".into())),
        None => UnixStream::connect(&port.socket).map_err(|e| e.to_string()),
    };
    let relay = match frontend.and_then(|f| start_relayed(&mut daemon, f)) {
        Ok(r) => r,
        Err(e) => {
            if port.mode == Mode::Server {
                port.error(e);
            }
            end_threads(&conn);
            return;
        }
    };
    *lock(&port.shutdown) = daemon.shutdown_handle();
    if port.stop.load(Ordering::Acquire) {
        daemon.request_shutdown();
    }
    *lock(&port.conn) = Some(conn.clone());
    port.stats.attaches.fetch_add(1, Ordering::Relaxed);
    port.changed();
    match daemon.wait() {
        // The frontend went away (it closed the socket, maybe mid-message):
        // the normal end of a connection.
        Ok(())
        | Err(vhost_user_backend::Error::HandleRequest(
            vhost::vhost_user::Error::Disconnected | vhost::vhost_user::Error::PartialMessage,
        )) => {}
        Err(e) => port.error(e),
    }
    for t in relay {
        let _ = t.join();
    }
    *lock(&port.shutdown) = None;
    *lock(&port.conn) = None;
    port.stats.detaches.fetch_add(1, Ordering::Relaxed);
    port.changed();
    // Held frames of this connection write nothing now; the next one is
    // served once none is left ([`super::held`], "At a stop").
    port.wait_held_drained(conn.vrings.get().map(Vec::as_slice));
    end_threads(&conn);
}

/// Starts `daemon` on a connection from an [`enable_relay`] to `frontend`
/// (so that QEMU's early `SET_VRING_ENABLE` does not end it). The daemon
/// accepts the relay's connection on a socket in a private directory
/// (mode 0700, removed once accepted).
fn start_relayed(
    daemon: &mut VhostUserDaemon<NetBackend>,
    frontend: UnixStream,
) -> Result<[JoinHandle<()>; 2], String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "superpacket-vhost-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("daemon.sock");
    let started = (|| {
        let listener = UnixListener::bind(&path).map_err(|e| e.to_string())?;
        let to_daemon = UnixStream::connect(&path).map_err(|e| e.to_string())?;
        daemon.start(&mut Listener::from(listener)).map_err(|e| e.to_string())?;
        enable_relay::spawn(frontend, to_daemon).map_err(|e| e.to_string())
    })();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&dir);
    started
}

/// The control thread: accepts (or makes) one connection after another
/// until the port is dropped.
fn control(port: Arc<PortShared>, mut listener: Option<Listener>) {
    while !port.stop.load(Ordering::Acquire) {
        match listener.as_mut() {
            Some(l) => {
                if wait_readable(&port, Some(l.as_raw_fd()), None) {
                    break;
                }
                serve_one(&port, Some(l));
            }
            None => {
                serve_one(&port, None);
                if wait_readable(&port, None, Some(RECONNECT_INTERVAL)) {
                    break;
                }
            }
        }
    }
}

/// The control thread of a port; dropping it stops the thread (the
/// connection is shut down, the socket file of a listening port removed).
#[derive(Debug)]
pub struct Control {
    port: Arc<PortShared>,
    thread: Option<JoinHandle<()>>,
}

impl Control {
    /// Listens on (server mode) or starts connecting to (client mode) the
    /// port's socket.
    ///
    /// # Errors
    /// The socket cannot be bound (server mode), or the thread not started.
    pub fn start(port: Arc<PortShared>) -> std::io::Result<Control> {
        let listener = match port.mode {
            Mode::Server => {
                if let Some(dir) = port.socket.parent()
                    && !dir.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(dir)?;
                }
                if std::os::unix::net::UnixStream::connect(&port.socket).is_ok() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::AddrInUse,
                        "another endpoint is listening on this socket",
                    ));
                }
                let l = Listener::new(&port.socket, true).map_err(|e| std::io::Error::other(e.to_string()))?;
                Some(l)
            }
            Mode::Client => None,
        };
        let p = port.clone();
        let thread = std::thread::Builder::new().name("sp-vhost-ctl".into()).spawn(move || control(p, listener))?;
        Ok(Control { port, thread: Some(thread) })
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.port.stop.store(true, Ordering::Release);
        self.port.stop_evt.notify();
        if let Some(h) = lock(&self.port.shutdown).as_ref() {
            h.shutdown();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
