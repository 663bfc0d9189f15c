//! One attached paravirtual link, as either end sees it: the shared region,
//! the transmit queue this side drives ([`PvTx`]), the receive queue it
//! serves ([`PvRx`]), the four eventfds and the control socket; plus the
//! two halves of the attach handshake ([`PvLink::connect`] for the client,
//! [`PendingAttach`] for the engine).

use super::proto::{self, Msg, SeqPacket};
use super::ring::{DEFAULT_RING, MAX_RING, RegionLayout, RingError};
use super::rx::{PvRx, RxFrame, RxStats};
use super::shm::{Notifier, ShmRegion};
use super::tx::{PvTx, RxCaps, TxError, TxForm, TxStats, TxStrategy};
use crate::io::IoError;
use std::os::fd::{OwnedFd, RawFd};
use std::path::Path;
use std::time::{Duration, Instant};
use superpacket::offload::gso::{CsumCaps, SegmentSink, Segmenter, SgFrame, TargetCaps};
use superpacket::packet::{OffloadMeta, Packet};

/// Slices gathered on the stack for one frame; packets of more chunks are
/// copied into one buffer first.
const STACK_PARTS: usize = 64;

/// Name of the memfd (visible in `/proc/PID/maps` as `/memfd:superpacket-pv`).
pub const REGION_NAME: &str = "superpacket-pv";

/// A paravirtual link failed.
#[derive(Debug, thiserror::Error)]
pub enum PvError {
    /// A system call failed.
    #[error("{0}")]
    Io(#[from] IoError),
    /// The handshake went wrong (unexpected message, bad descriptors, ...).
    #[error("pv handshake: {0}")]
    Handshake(String),
    /// The engine refused the attach (feature negotiation, port busy, ...).
    #[error("pv attach refused: {0}")]
    Refused(String),
    /// The peer closed the link (or died).
    #[error("pv peer disconnected")]
    Disconnected,
    /// The peer sent something on the control socket after the handshake.
    #[error("pv peer sent an unexpected control message")]
    Protocol,
    /// The peer broke the ring protocol; the link is unusable.
    #[error("pv ring: {0}")]
    Ring(#[from] RingError),
    /// A frame could not be sent (the link is still usable).
    #[error("pv send: {0}")]
    Tx(TxError),
    /// A wait timed out.
    #[error("pv: timed out")]
    Timeout,
}

impl From<TxError> for PvError {
    fn from(e: TxError) -> PvError {
        match e {
            TxError::Ring(r) => PvError::Ring(r),
            e => PvError::Tx(e),
        }
    }
}

impl PvError {
    /// Short stable name for counters.
    pub fn reason(&self) -> &'static str {
        match self {
            PvError::Io(_) => "pv-io-error",
            PvError::Handshake(_) => "pv-handshake",
            PvError::Refused(_) => "pv-refused",
            PvError::Disconnected => "pv-disconnected",
            PvError::Protocol => "pv-ctrl-unexpected",
            PvError::Ring(r) => r.reason(),
            PvError::Tx(t) => t.reason(),
            PvError::Timeout => "pv-timeout",
        }
    }

    /// True if the link cannot be used any more.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, PvError::Tx(_) | PvError::Timeout)
    }
}

/// Which end of the link this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The application: drives queue 0, serves queue 1.
    Client,
    /// The engine: drives queue 1, serves queue 0.
    Engine,
}

/// Notification counters of a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotifyStats {
    /// Calls sent to the peer (it was waiting for used buffers).
    pub calls_sent: u64,
    /// Kicks received (eventfd reads that found it signalled).
    pub kicks_taken: u64,
    /// Calls received.
    pub calls_taken: u64,
}

/// Everything a link counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvStats {
    /// Negotiated features.
    pub features: u64,
    /// Ring size.
    pub ring: u16,
    /// The transmit side (includes the kicks sent).
    pub tx: TxStats,
    /// The receive side.
    pub rx: RxStats,
    /// Notifications.
    pub notify: NotifyStats,
}

/// How a client attaches ([`PvLink::connect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvClientConfig {
    /// Features the client is willing to use (intersected with the offer,
    /// then dependencies fixed); default: all this crate knows.
    pub features: u64,
    /// Ring size (a power of two; default: the engine's).
    pub ring: Option<u16>,
    /// Transmit policy.
    pub strategy: TxStrategy,
    /// Handshake timeout.
    pub timeout: Duration,
}

impl Default for PvClientConfig {
    fn default() -> Self {
        PvClientConfig {
            features: proto::ALL_FEATURES,
            ring: None,
            strategy: TxStrategy::default(),
            timeout: Duration::from_secs(5),
        }
    }
}

/// What the engine offers ([`PendingAttach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvServerConfig {
    /// Features offered.
    pub features: u64,
    /// Largest ring accepted.
    pub max_ring: u16,
    /// Ring used when the client has no preference.
    pub default_ring: u16,
    /// Transmit policy of the engine's side.
    pub strategy: TxStrategy,
}

impl Default for PvServerConfig {
    fn default() -> Self {
        PvServerConfig {
            features: proto::ALL_FEATURES,
            max_ring: MAX_RING,
            default_ring: DEFAULT_RING,
            strategy: TxStrategy::default(),
        }
    }
}

/// Waits for input on `fds` up to `ms` (-1: forever); returns the revents.
fn poll_fds<const N: usize>(fds: [RawFd; N], ms: i32) -> [i16; N] {
    let mut p = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    // SAFETY: `p` is a valid array of N pollfds that lives across the call.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), N as libc::nfds_t, ms) };
    if rc <= 0 {
        return [0; N];
    }
    p.map(|x| x.revents)
}

fn ms_until(deadline: Instant) -> i32 {
    let left = deadline.saturating_duration_since(Instant::now());
    (left.as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32
}

/// An attached link (see the module documentation).
pub struct PvLink {
    shm: ShmRegion,
    tx: PvTx,
    rx: PvRx,
    tx_kick: Notifier,
    tx_call: Notifier,
    rx_kick: Notifier,
    rx_call: Notifier,
    ctrl: SeqPacket,
    features: u64,
    ring: u16,
    role: Role,
    seg: Box<Segmenter>,
    lin: Vec<u8>,
    notify: NotifyStats,
}

impl std::fmt::Debug for PvLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvLink")
            .field("role", &self.role)
            .field("features", &proto::feature_names(self.features))
            .field("ring", &self.ring)
            .field("strategy", &self.tx.strategy)
            .finish()
    }
}

/// The software-segmentation sink: each frame becomes one send with `more`.
struct SegSink<'a> {
    tx: &'a mut PvTx,
    shm: &'a mut ShmRegion,
    buf: &'a mut Vec<u8>,
    err: Option<TxError>,
}

impl SegSink<'_> {
    fn send(&mut self, parts: &[&[u8]], meta: &OffloadMeta) {
        if self.err.is_some() {
            return;
        }
        if let Err(e) = self.tx.send(self.shm, parts, meta, true) {
            self.err = Some(e);
        }
    }
}

impl SegmentSink for SegSink<'_> {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        let mut parts: [&[u8]; STACK_PARTS] = [&[]; STACK_PARTS];
        let mut n = 0;
        for c in packet.all_chunks() {
            if n == STACK_PARTS {
                self.err = Some(TxError::TooLong(packet.total_len()));
                return;
            }
            parts[n] = c;
            n += 1;
        }
        self.send(&parts[..n], meta);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        let mut parts: [&[u8]; STACK_PARTS + 1] = [&[]; STACK_PARTS + 1];
        parts[0] = frame.header;
        let n = frame.payload.len().min(STACK_PARTS);
        parts[1..=n].copy_from_slice(&frame.payload[..n]);
        self.send(&parts[..=n], &frame.meta);
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.clear();
        self.buf.resize(len, 0);
        self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let buf = std::mem::take(self.buf);
        self.send(&[&buf[..len.min(buf.len())]], meta);
        *self.buf = buf;
    }
}

impl PvLink {
    #[allow(clippy::too_many_arguments)]
    fn new(
        role: Role,
        mut shm: ShmRegion,
        lay: RegionLayout,
        kicks: [Notifier; 2],
        calls: [Notifier; 2],
        ctrl: SeqPacket,
        features: u64,
        ring: u16,
        strategy: TxStrategy,
    ) -> Result<PvLink, PvError> {
        let (txq, rxq) = match role {
            Role::Client => (0, 1),
            Role::Engine => (1, 0),
        };
        let event_idx = features & proto::F_RING_EVENT_IDX != 0;
        let indirect = features & proto::F_RING_INDIRECT_DESC != 0;
        let tx = PvTx::new(&mut shm, lay.queues[txq], event_idx, RxCaps::for_queue(features, txq), strategy)?;
        let rx = PvRx::new(lay.queues[rxq], event_idx, indirect, RxCaps::for_queue(features, rxq));
        let [k0, k1] = kicks;
        let [c0, c1] = calls;
        let (tx_kick, rx_kick, tx_call, rx_call) = match role {
            Role::Client => (k0, k1, c0, c1),
            Role::Engine => (k1, k0, c1, c0),
        };
        Ok(PvLink {
            shm,
            tx,
            rx,
            tx_kick,
            tx_call,
            rx_kick,
            rx_call,
            ctrl,
            features,
            ring,
            role,
            seg: Box::new(Segmenter::new()),
            lin: Vec::new(),
            notify: NotifyStats::default(),
        })
    }

    /// Attaches to the pv socket at `path` as a client: receives the offer,
    /// accepts `cfg.features` of it (dependencies fixed), receives and maps
    /// the region.
    ///
    /// # Errors
    /// Nobody listening, a refusal, a timeout or a malformed answer.
    pub fn connect(path: &Path, cfg: &PvClientConfig) -> Result<PvLink, PvError> {
        let sock = SeqPacket::connect(path, cfg.timeout)?;
        let recv = |sock: &SeqPacket| -> Result<(Msg, Vec<OwnedFd>), PvError> {
            match sock.recv() {
                Ok(Some(m)) => Ok(m),
                Ok(None) => Err(PvError::Disconnected),
                Err(e) if e.is_would_block() => Err(PvError::Timeout),
                Err(e) => Err(PvError::Handshake(e.to_string())),
            }
        };
        let (offer, _) = recv(&sock)?;
        let (offered, max_ring, default_ring) = match offer {
            Msg::Offer { features, max_ring, default_ring } => (features, max_ring, default_ring),
            Msg::Refuse { reason } => return Err(PvError::Refused(reason)),
            m => return Err(PvError::Handshake(format!("expected an offer, got {m:?}"))),
        };
        let features = proto::with_dependencies(offered & cfg.features & proto::ALL_FEATURES);
        let ring = cfg.ring.unwrap_or(default_ring).min(max_ring);
        sock.send(&Msg::Ack { features, ring }, &[])?;
        let (ready, fds) = recv(&sock)?;
        let (got_features, got_ring, size) = match ready {
            Msg::Ready { features, ring, region_size } => (features, ring, region_size),
            Msg::Refuse { reason } => return Err(PvError::Refused(reason)),
            m => return Err(PvError::Handshake(format!("expected READY, got {m:?}"))),
        };
        if got_features != features || got_ring != ring {
            return Err(PvError::Handshake(format!(
                "engine answered features {} ring {got_ring}, asked {} ring {ring}",
                proto::feature_names(got_features),
                proto::feature_names(features)
            )));
        }
        let lay = RegionLayout::new(ring).ok_or_else(|| PvError::Handshake(format!("bad ring size {ring}")))?;
        if size != lay.size as u64 || fds.len() != 5 {
            return Err(PvError::Handshake(format!(
                "region of {size} bytes with {} descriptors (expected {} bytes, 5 descriptors)",
                fds.len(),
                lay.size
            )));
        }
        let mut fds = fds.into_iter();
        let mut next = || fds.next().expect("5 descriptors checked");
        let shm = ShmRegion::map_received(next(), lay.size)?;
        let k0 = Notifier::from_fd(next())?;
        let c0 = Notifier::from_fd(next())?;
        let k1 = Notifier::from_fd(next())?;
        let c1 = Notifier::from_fd(next())?;
        sock.set_recv_timeout(None)?;
        sock.set_nonblocking(true)?;
        PvLink::new(Role::Client, shm, lay, [k0, k1], [c0, c1], sock, features, ring, cfg.strategy)
    }

    /// Negotiated features.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Ring size.
    pub fn ring_size(&self) -> u16 {
        self.ring
    }

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The transmit policy.
    pub fn strategy(&self) -> TxStrategy {
        self.tx.strategy
    }

    /// Changes the transmit policy.
    pub fn set_strategy(&mut self, s: TxStrategy) {
        self.tx.strategy = s;
    }

    /// What the peer accepts from this side.
    pub fn tx_caps(&self) -> RxCaps {
        self.tx.caps
    }

    /// What this side accepts from the peer.
    pub fn rx_caps(&self) -> RxCaps {
        self.rx.caps
    }

    /// The counters (copies them).
    pub fn stats(&self) -> PvStats {
        PvStats {
            features: self.features,
            ring: self.ring,
            tx: self.tx.stats.clone(),
            rx: self.rx.stats.clone(),
            notify: self.notify,
        }
    }

    /// The transmit counters, without copying.
    pub fn tx_stats(&self) -> &TxStats {
        &self.tx.stats
    }

    /// The receive counters, without copying.
    pub fn rx_stats(&self) -> &RxStats {
        &self.rx.stats
    }

    /// The shared region (tests write garbage into it to play a bad peer).
    #[cfg(test)]
    pub(crate) fn shm_mut(&mut self) -> &mut ShmRegion {
        &mut self.shm
    }

    /// The memfd's descriptor number in this process.
    pub fn region_fd(&self) -> RawFd {
        self.shm.raw_fd()
    }

    /// Readable when the peer kicked (frames to receive).
    pub fn rx_kick_fd(&self) -> RawFd {
        self.rx_kick.as_raw_fd()
    }

    /// Readable when the peer hung up (or misbehaved on the control socket).
    pub fn ctrl_fd(&self) -> RawFd {
        self.ctrl.as_raw_fd()
    }

    /// Sends one frame (see [`PvTx::send`]); without `more`, kicks the peer
    /// if it asked for it.
    ///
    /// # Errors
    /// A full ring or a frame the peer cannot take ([`PvError::Tx`], the link
    /// stays usable), or a fatal ring error.
    #[inline]
    pub fn send(&mut self, parts: &[&[u8]], meta: &OffloadMeta, more: bool) -> Result<TxForm, PvError> {
        let form = self.tx.send(&mut self.shm, parts, meta, more)?;
        if !more {
            self.kick()?;
        }
        Ok(form)
    }

    /// Sends a packet (its chunks, frag list included). A superpacket the
    /// peer does not take whole is segmented here in software
    /// ([`superpacket::offload::gso`]); all its frames are sent with `more`, and
    /// the kick follows the last one unless `more`.
    ///
    /// # Errors
    /// As [`PvLink::send`]; a segmentation failure is [`TxError::NeedsSoftwareGso`].
    pub fn send_packet(&mut self, pkt: &Packet, more: bool) -> Result<(), PvError> {
        self.send_packet_meta(pkt, &pkt.meta, more)
    }

    /// [`PvLink::send_packet`] with metadata `meta` instead of the packet's own.
    ///
    /// # Errors
    /// As [`PvLink::send_packet`].
    pub fn send_packet_meta(&mut self, pkt: &Packet, meta: &OffloadMeta, more: bool) -> Result<(), PvError> {
        let mut parts: [&[u8]; STACK_PARTS] = [&[]; STACK_PARTS];
        let r = match pkt.gather_chunks(&mut parts) {
            Some(n) => self.tx.send(&mut self.shm, &parts[..n], meta, more),
            None => {
                pkt.copy_all_to(&mut self.lin);
                self.tx.send(&mut self.shm, &[&self.lin], meta, more)
            }
        };
        match r {
            Ok(_) => {}
            Err(TxError::NeedsSoftwareGso) => self.segment(pkt, meta)?,
            Err(e) => return Err(e.into()),
        }
        if !more {
            self.kick()?;
        }
        Ok(())
    }

    /// Segments `pkt` in software for a peer that does not take it whole.
    fn segment(&mut self, pkt: &Packet, meta: &OffloadMeta) -> Result<(), PvError> {
        let caps = self.tx.caps;
        // With header information required, segments carry software
        // checksums (their headers may be what could not be described).
        let csum = if caps.csum && !caps.hdr_info { CsumCaps::HW } else { CsumCaps::NONE };
        let target = TargetCaps::new(65_535).with_sg().with_csum(csum).with_max_offload_tags(8);
        let mut p;
        let pkt = if *meta != pkt.meta {
            p = pkt.clone();
            p.meta = *meta;
            &p
        } else {
            pkt
        };
        let mut sink = SegSink { tx: &mut self.tx, shm: &mut self.shm, buf: &mut self.lin, err: None };
        let r = self.seg.segment(pkt, &target, &mut sink);
        if let Some(e) = sink.err {
            return Err(e.into());
        }
        r.map(|_| ()).map_err(|_| PvError::Tx(TxError::NeedsSoftwareGso))
    }

    /// Kicks the peer for frames sent with `more`, if it asked for it, and
    /// calls it for frames received, if it is waiting for them to be used.
    /// Call at the end of a batch.
    ///
    /// # Errors
    /// A fatal ring error.
    #[inline]
    pub fn flush(&mut self) -> Result<(), PvError> {
        if self.tx.kick_pending() {
            self.kick()?;
        }
        self.call()
    }

    #[inline]
    fn kick(&mut self) -> Result<(), PvError> {
        if self.tx.kick_needed(&self.shm)? {
            self.tx_kick.notify();
        }
        Ok(())
    }

    #[inline]
    fn call(&mut self) -> Result<(), PvError> {
        if self.rx.call_needed(&self.shm)? {
            self.rx_call.notify();
            self.notify.calls_sent += 1;
        }
        Ok(())
    }

    /// Receives the next frame, appending it to `out` (nothing is
    /// allocated once `out` has grown). `None` when nothing is waiting; the
    /// peer is then called if it waits for used buffers.
    ///
    /// # Errors
    /// A fatal ring error.
    #[inline]
    pub fn recv(&mut self, out: &mut Vec<u8>) -> Result<Option<RxFrame>, PvError> {
        let r = self.rx.recv(&mut self.shm, out)?;
        if r.is_none() {
            self.call()?;
        }
        Ok(r)
    }

    /// Frames waiting to be received.
    ///
    /// # Errors
    /// A corrupt ring.
    #[inline]
    pub fn rx_pending(&self) -> Result<u16, PvError> {
        Ok(self.rx.pending(&self.shm)?)
    }

    /// Asks the peer to kick at its next frame; true if frames are already
    /// waiting (the caller must not sleep).
    ///
    /// # Errors
    /// A fatal ring error.
    pub fn enable_rx_kicks(&mut self) -> Result<bool, PvError> {
        Ok(self.rx.enable_kicks(&mut self.shm)?)
    }

    /// Stops asking for kicks (the caller polls).
    ///
    /// # Errors
    /// A fatal ring error.
    pub fn disable_rx_kicks(&mut self) -> Result<(), PvError> {
        Ok(self.rx.disable_kicks(&mut self.shm)?)
    }

    /// Signals this side's own kick eventfd, so that whoever waits on it
    /// (an event loop) comes back to receive.
    pub fn rekick(&self) {
        self.rx_kick.notify();
    }

    /// Reads and resets the kick eventfd; true if it was signalled.
    pub fn take_rx_kick(&mut self) -> bool {
        let t = self.rx_kick.take();
        self.notify.kicks_taken += u64::from(t);
        t
    }

    /// Checks the control socket: `Ok` while the peer is there and silent.
    ///
    /// # Errors
    /// [`PvError::Disconnected`] once the peer closed it (or died),
    /// [`PvError::Protocol`] if it sent anything.
    pub fn check_ctrl(&self) -> Result<(), PvError> {
        match self.ctrl.recv() {
            Ok(None) => Err(PvError::Disconnected),
            Ok(Some(_)) => Err(PvError::Protocol),
            Err(e) if e.is_would_block() => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => Err(PvError::Disconnected),
            Err(e) => Err(PvError::Io(e)),
        }
    }

    /// Waits until a frame can be received: first polls the ring for
    /// `busy_poll` (as vhost-net's `busyloop_timeout` or `SO_BUSY_POLL`),
    /// then sleeps on the kick eventfd until `timeout`. Returns false on
    /// timeout.
    ///
    /// # Errors
    /// The peer disconnected, or a ring error.
    pub fn wait_rx(&mut self, timeout: Duration, busy_poll: Duration) -> Result<bool, PvError> {
        if self.rx_pending()? > 0 {
            return Ok(true);
        }
        let start = Instant::now();
        if !busy_poll.is_zero() {
            // Polling: no kicks wanted until this side is about to sleep.
            self.disable_rx_kicks()?;
            let end = start + busy_poll;
            let mut spins = 0u32;
            loop {
                if self.rx_pending()? > 0 {
                    return Ok(true);
                }
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(64) && Instant::now() >= end {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let deadline = start + timeout;
        loop {
            if self.enable_rx_kicks()? {
                self.disable_rx_kicks()?;
                return Ok(true);
            }
            let ms = ms_until(deadline);
            if ms == 0 {
                return Ok(false);
            }
            let [_, ctrl] = poll_fds([self.rx_kick.as_raw_fd(), self.ctrl.as_raw_fd()], ms);
            self.take_rx_kick();
            // Frames sent just before a hang-up are still delivered.
            if self.rx_pending()? > 0 {
                self.disable_rx_kicks()?;
                return Ok(true);
            }
            if ctrl != 0 {
                self.check_ctrl()?;
            }
        }
    }

    /// Waits until a descriptor is free for sending (the peer used some),
    /// polling for `busy_poll` then sleeping on the call eventfd until
    /// `timeout`. Returns false on timeout.
    ///
    /// # Errors
    /// The peer disconnected, or a ring error.
    pub fn wait_tx(&mut self, timeout: Duration, busy_poll: Duration) -> Result<bool, PvError> {
        if self.tx.has_room(&self.shm)? {
            return Ok(true);
        }
        let start = Instant::now();
        while start.elapsed() < busy_poll {
            if self.tx.has_room(&self.shm)? {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        // Frames sent with `more` must reach the peer before sleeping.
        self.flush()?;
        let deadline = start + timeout;
        loop {
            if self.tx.enable_calls(&mut self.shm)? && self.tx.has_room(&self.shm)? {
                self.tx.disable_calls(&mut self.shm)?;
                return Ok(true);
            }
            let ms = ms_until(deadline);
            if ms == 0 {
                return Ok(false);
            }
            let [_, ctrl] = poll_fds([self.tx_call.as_raw_fd(), self.ctrl.as_raw_fd()], ms);
            if self.tx_call.take() {
                self.notify.calls_taken += 1;
            }
            if self.tx.has_room(&self.shm)? {
                self.tx.disable_calls(&mut self.shm)?;
                return Ok(true);
            }
            if ctrl != 0 {
                self.check_ctrl()?;
            }
        }
    }
}

/// A client connection the engine has accepted and offered features to,
/// waiting for the client's answer ([`PendingAttach::poll`]).
#[derive(Debug)]
pub struct PendingAttach {
    sock: SeqPacket,
    since: Instant,
}

/// What [`PendingAttach::poll`] got to.
#[derive(Debug)]
pub enum Attach {
    /// No answer yet.
    Pending(PendingAttach),
    /// The link is up.
    Ready(Box<PvLink>),
}

impl PendingAttach {
    /// Sends the offer on an accepted connection.
    ///
    /// # Errors
    /// The socket calls failing.
    pub fn start(sock: SeqPacket, cfg: &PvServerConfig) -> Result<PendingAttach, PvError> {
        sock.set_nonblocking(true)?;
        sock.send(&Msg::Offer { features: cfg.features, max_ring: cfg.max_ring, default_ring: cfg.default_ring }, &[])?;
        Ok(PendingAttach { sock, since: Instant::now() })
    }

    /// Refuses a connection with `reason` (best effort) and closes it.
    pub fn refuse(sock: SeqPacket, reason: &str) {
        let _ = sock.send(&Msg::Refuse { reason: reason.to_string() }, &[]);
    }

    /// The connection's descriptor (readable when the answer arrived).
    pub fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Time since the offer.
    pub fn age(&self) -> Duration {
        self.since.elapsed()
    }

    /// Reads the client's answer if it arrived: negotiates (refusing a bad
    /// set with a reason), creates the region and eventfds, sends them, and
    /// returns the engine's end of the link.
    ///
    /// # Errors
    /// The client left, answered nonsense, or asked for a refused set (it
    /// got a REFUSE then); creating the region failed.
    pub fn poll(self, cfg: &PvServerConfig) -> Result<Attach, PvError> {
        let (msg, _) = match self.sock.recv() {
            Ok(Some(m)) => m,
            Ok(None) => return Err(PvError::Disconnected),
            Err(e) if e.is_would_block() => return Ok(Attach::Pending(self)),
            Err(e) => return Err(PvError::Handshake(e.to_string())),
        };
        let Msg::Ack { features, ring } = msg else {
            PendingAttach::refuse(self.sock, "expected ACK");
            return Err(PvError::Handshake("client did not answer the offer with ACK".into()));
        };
        let features = match proto::negotiate(cfg.features, features) {
            Ok(f) => f,
            Err(reason) => {
                PendingAttach::refuse(self.sock, &reason);
                return Err(PvError::Refused(reason));
            }
        };
        let Some(lay) = RegionLayout::new(ring).filter(|_| ring <= cfg.max_ring) else {
            let reason = format!("ring size {ring} is not a power of two in 2..={}", cfg.max_ring);
            PendingAttach::refuse(self.sock, &reason);
            return Err(PvError::Refused(reason));
        };
        let shm = ShmRegion::create(REGION_NAME, lay.size)?;
        let kicks = [Notifier::new()?, Notifier::new()?];
        let calls = [Notifier::new()?, Notifier::new()?];
        let fds =
            [shm.raw_fd(), kicks[0].as_raw_fd(), calls[0].as_raw_fd(), kicks[1].as_raw_fd(), calls[1].as_raw_fd()];
        self.sock.send(&Msg::Ready { features, ring, region_size: lay.size as u64 }, &fds)?;
        let link = PvLink::new(Role::Engine, shm, lay, kicks, calls, self.sock, features, ring, cfg.strategy)?;
        Ok(Attach::Ready(Box::new(link)))
    }

    /// Waits (up to `timeout`) for the answer and completes the attach:
    /// for tools that serve one client at a time.
    ///
    /// # Errors
    /// As [`PendingAttach::poll`], or [`PvError::Timeout`].
    pub fn complete(mut self, cfg: &PvServerConfig, timeout: Duration) -> Result<PvLink, PvError> {
        let deadline = Instant::now() + timeout;
        loop {
            let fd = self.sock.as_raw_fd();
            match self.poll(cfg)? {
                Attach::Ready(l) => return Ok(*l),
                Attach::Pending(p) => self = p,
            }
            let ms = ms_until(deadline);
            if ms == 0 {
                return Err(PvError::Timeout);
            }
            poll_fds([fd], ms);
        }
    }
}

/// Waits up to `timeout` for a connection on `listener`.
///
/// # Errors
/// `accept` failing, or [`PvError::Timeout`].
pub fn accept_one(listener: &proto::SeqListener, timeout: Duration) -> Result<SeqPacket, PvError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = listener.accept()? {
            return Ok(s);
        }
        let ms = ms_until(deadline);
        if ms == 0 {
            return Err(PvError::Timeout);
        }
        poll_fds([listener.as_raw_fd()], ms);
    }
}
