//! The paravirtual port driver ([`PvPortDriver`], topology
//! `driver = { kind = "pv", socket = "/path.sock" }`): the engine's end of
//! [`crate::io::pv`] links. It listens on a Unix socket; one application at
//! a time attaches as a client ([`crate::io::pv::PvClient`]) and the port
//! then moves superpackets through shared memory.
//!
//! - **receive** ([`PortDriver::recv`]): frames from the client's queue,
//!   validated ([`crate::io::pv::rx`]) and copied into a new [`Packet`] (the
//!   one allocation and copy per received packet, as for TAP and AF_PACKET).
//!   When the ring is empty the port handles its control events (a client
//!   attaching, the client hanging up), drains the kick eventfd and re-enables
//!   kicks; the worker then sleeps in epoll on [`PortDriver::poll_fd`].
//! - **transmit** ([`PortDriver::xmit`]): packets are queued (moved, not
//!   copied) and written at [`PortDriver::flush`] (the end of an engine
//!   round) or when [`PvPortOptions::batch`] are queued. Each is sent with
//!   `xmit_more` set unless it is the last of the batch, so **the transmit
//!   policy** ([`TxStrategy`]) sees batching: a lone, non-GSO packet with a
//!   partial checksum is checksummed in software and sent direct; batched
//!   ones and superpackets keep the offload. Frames from the segmenter
//!   ([`PortDriver::sink`]) are sent at once, with `xmit_more`; the kick
//!   follows at the flush.
//! - **features**: what the port offers clients (the `GUEST_*` offloads)
//!   becomes its netdev features (HW_CSUM, TSO, TSO6, TSO_ECN, GSO_UDP_L4).
//!   A client that accepts less gets software checksums and segmentation
//!   from the link itself ([`crate::io::pv::PvLink::send_packet`]).
//!
//! Without a client, transmitted packets are dropped as `pv-no-client`. A
//! second client is refused (`port busy`) while one is attached. A client
//! that hangs up or dies is detached: its region is unmapped and every
//! descriptor closed (the memory is released), the counters of its link
//! are kept in the port's totals, and the next client may attach. A client
//! that corrupts its ring is detached the same way (drop reason `ring-*`).
//! Nothing a client does can stop the engine.

use super::features::{FeaturesCheck, NetdevFeatures};
use super::port::{DriverError, PortDriver};
use crate::io::pv::poller::Poller;
use crate::io::pv::proto::{self, SeqListener};
use crate::io::pv::ring::{DEFAULT_RING, MAX_RING};
use crate::io::pv::{Attach, PendingAttach, PvError, PvLink, PvServerConfig, RxStats, TxStats, TxStrategy};
use std::any::Any;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::time::Duration;
use superpacket::offload::gso::{SegmentSink, SgFrame};
use superpacket::packet::{DEFAULT_HEADROOM, OffloadMeta, Packet};

/// Default packets per transmit batch.
pub const DEFAULT_PV_BATCH: usize = 64;

/// Most packets per transmit batch a topology may ask for.
pub const MAX_PV_BATCH: usize = 1024;
/// Times [`PortDriver::recv`] goes idle and finds frames again before it
/// returns (and re-arms the descriptor).
const MAX_IDLE_CHECKS: usize = 8;
/// Clients in the middle of the handshake at once.
const MAX_PENDING: usize = 4;
/// A client that does not answer the offer within this time is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

const TOKEN_LISTENER: u64 = 0;
const TOKEN_KICK: u64 = 1;
const TOKEN_CTRL: u64 = 2;
const TOKEN_PENDING: u64 = 1 << 32;

/// How a pv port is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvPortOptions {
    /// The Unix socket clients attach to.
    pub socket: PathBuf,
    /// Features offered (default: all, header information required).
    pub features: u64,
    /// The transmit policy (default: software checksum + direct for lone packets).
    pub strategy: TxStrategy,
    /// Ring size offered by default.
    pub ring: u16,
    /// Packets per transmit batch.
    pub batch: usize,
}

impl PvPortOptions {
    /// Defaults for a port listening on `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> PvPortOptions {
        PvPortOptions {
            socket: socket.into(),
            features: proto::ALL_FEATURES,
            strategy: TxStrategy::default(),
            ring: DEFAULT_RING,
            batch: DEFAULT_PV_BATCH,
        }
    }
}

/// Totals over every link the port had, plus its own events.
#[derive(Debug, Default)]
struct Totals {
    attaches: u64,
    detaches: u64,
    refused: u64,
    tx: TxStats,
    rx: RxStats,
    kicks_taken: u64,
    calls_sent: u64,
    drops: BTreeMap<&'static str, u64>,
    /// Drops not yet reported through [`PortDriver::take_drops`].
    pending: Vec<(&'static str, u64)>,
    last_error: Option<String>,
}

impl Totals {
    fn drop(&mut self, reason: &'static str, n: u64) {
        *self.drops.entry(reason).or_insert(0) += n;
        match self.pending.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, c)) => *c += n,
            None => self.pending.push((reason, n)),
        }
    }

    fn add_link(&mut self, l: &PvLink) {
        let (t, r) = (l.tx_stats(), l.rx_stats());
        let s = &mut self.tx;
        s.frames += t.frames;
        s.bytes += t.bytes;
        s.superpackets += t.superpackets;
        s.direct += t.direct;
        s.direct_offload += t.direct_offload;
        s.direct_swcsum += t.direct_swcsum;
        s.indirect += t.indirect;
        s.indirect_swcsum += t.indirect_swcsum;
        s.indirect_hdr_info += t.indirect_hdr_info;
        s.csum_without_hdr_info += t.csum_without_hdr_info;
        s.swcsum_fallback += t.swcsum_fallback;
        s.ring_full += t.ring_full;
        s.kicks += t.kicks;
        let x = &mut self.rx;
        x.frames += r.frames;
        x.bytes += r.bytes;
        x.superpackets += r.superpackets;
        x.csum_partial += r.csum_partial;
        x.direct += r.direct;
        x.chains += r.chains;
        x.indirect += r.indirect;
        x.indirect_hdr_info += r.indirect_hdr_info;
        x.csum_without_hdr_info += r.csum_without_hdr_info;
        let n = l.stats().notify;
        self.kicks_taken += n.kicks_taken;
        self.calls_sent += n.calls_sent;
    }
}

/// The engine's end of a paravirtual port (see the module documentation).
pub struct PvPortDriver {
    opts: PvPortOptions,
    server: PvServerConfig,
    hw: NetdevFeatures,
    listener: SeqListener,
    poller: Poller,
    pending: Vec<PendingAttach>,
    link: Option<Box<PvLink>>,
    queue: VecDeque<Packet>,
    lin: Vec<u8>,
    /// Kicks are enabled (the port went idle); disabled again while it
    /// receives (without EVENT_IDX this sets `NO_NOTIFY`).
    kicks_on: bool,
    /// Receive drops of the current link already reported.
    rx_drops_seen: BTreeMap<&'static str, u64>,
    totals: Totals,
}

impl fmt::Debug for PvPortDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PvPortDriver")
            .field("socket", &self.opts.socket)
            .field("features", &proto::feature_names(self.opts.features))
            .field("strategy", &self.opts.strategy)
            .field("attached", &self.link.is_some())
            .finish()
    }
}

/// The netdev features of a port offering `features` to clients.
pub fn pv_features(features: u64) -> NetdevFeatures {
    let mut f =
        NetdevFeatures::SG.union(NetdevFeatures::FRAGLIST).union(NetdevFeatures::HIGHDMA).union(NetdevFeatures::GSO);
    if features & proto::F_GUEST_CSUM != 0 {
        f = f | NetdevFeatures::HW_CSUM;
        for (bit, feat) in [
            (proto::F_GUEST_TSO4, NetdevFeatures::TSO),
            (proto::F_GUEST_TSO6, NetdevFeatures::TSO6),
            (proto::F_GUEST_ECN, NetdevFeatures::TSO_ECN),
        ] {
            if features & bit != 0 {
                f = f | feat;
            }
        }
        if features & (proto::F_GUEST_USO4 | proto::F_GUEST_USO6) == proto::F_GUEST_USO4 | proto::F_GUEST_USO6 {
            f = f | NetdevFeatures::GSO_UDP_L4;
        }
    }
    f
}

fn open_error(what: &str, e: impl fmt::Display) -> DriverError {
    DriverError::new("open-failed", format!("{what}: {e}"))
}

impl PvPortDriver {
    /// Listens on `opts.socket` (replacing a stale socket file).
    ///
    /// # Errors
    /// The socket path is in use by a live endpoint or cannot be bound.
    pub fn open(opts: &PvPortOptions) -> Result<PvPortDriver, DriverError> {
        let what = format!("pv socket {}", opts.socket.display());
        if !(2..=MAX_RING).contains(&opts.ring) || !opts.ring.is_power_of_two() {
            return Err(open_error(&what, format!("ring size {} is not a power of two in 2..={MAX_RING}", opts.ring)));
        }
        let features = proto::with_dependencies(opts.features) | proto::REQUIRED;
        if let Some(dir) = opts.socket.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(|e| open_error(&what, e))?;
        }
        let listener = SeqListener::bind(&opts.socket).map_err(|e| open_error(&what, e))?;
        let poller = Poller::new().map_err(|e| open_error(&what, e))?;
        poller.add(listener.as_raw_fd(), TOKEN_LISTENER).map_err(|e| open_error(&what, e))?;
        let server = PvServerConfig { features, max_ring: MAX_RING, default_ring: opts.ring, strategy: opts.strategy };
        Ok(PvPortDriver {
            opts: PvPortOptions { features, batch: opts.batch.max(1), ..opts.clone() },
            server,
            hw: pv_features(features),
            listener,
            poller,
            pending: Vec::with_capacity(MAX_PENDING),
            link: None,
            queue: VecDeque::with_capacity(opts.batch.max(1)),
            lin: Vec::new(),
            kicks_on: false,
            rx_drops_seen: BTreeMap::new(),
            totals: Totals::default(),
        })
    }

    /// True while a client is attached.
    pub fn attached(&self) -> bool {
        self.link.is_some()
    }

    /// The socket clients attach to.
    pub fn socket(&self) -> &std::path::Path {
        &self.opts.socket
    }

    /// The attached client's link.
    pub fn link_mut(&mut self) -> Option<&mut PvLink> {
        self.link.as_deref_mut()
    }

    fn attach(&mut self, link: Box<PvLink>) {
        if self.link.is_some() {
            // Two clients finished the handshake at once: the first wins.
            self.totals.refused += 1;
            return;
        }
        let mut link = link;
        let ok =
            self.poller.add(link.rx_kick_fd(), TOKEN_KICK).and_then(|_| self.poller.add(link.ctrl_fd(), TOKEN_CTRL));
        if let Err(e) = ok {
            self.poller.remove(link.rx_kick_fd());
            self.totals.refused += 1;
            self.totals.last_error = Some(e.to_string());
            return;
        }
        let _ = link.enable_rx_kicks();
        self.kicks_on = true;
        self.totals.attaches += 1;
        self.rx_drops_seen.clear();
        self.link = Some(link);
    }

    /// Detaches the client (it hung up, died or broke the protocol): its
    /// region is unmapped and its descriptors closed.
    fn detach(&mut self, reason: &'static str, err: Option<String>) {
        let Some(link) = self.link.take() else { return };
        self.collect_rx_drops(&link);
        self.poller.remove(link.rx_kick_fd());
        self.poller.remove(link.ctrl_fd());
        self.totals.add_link(&link);
        self.totals.detaches += 1;
        if reason != "pv-disconnected" {
            self.totals.drop(reason, 1);
        }
        if let Some(e) = err {
            self.totals.last_error = Some(e);
        }
        let queued = self.queue.len() as u64;
        self.queue.clear();
        if queued > 0 {
            self.totals.drop("pv-no-client", queued);
        }
        drop(link);
    }

    /// Moves the link's receive drops not yet reported into the totals.
    fn collect_rx_drops(&mut self, link: &PvLink) {
        for (&reason, &n) in &link.rx_stats().drops {
            let seen = self.rx_drops_seen.entry(reason).or_insert(0);
            if n > *seen {
                self.totals.drop(reason, n - *seen);
                *seen = n;
            }
        }
    }

    fn fail(&mut self, e: PvError) {
        if e.is_fatal() {
            let msg = e.to_string();
            self.detach(e.reason(), Some(msg));
        } else {
            self.totals.drop(e.reason(), 1);
        }
    }

    /// Handles what the poller reports: connections, handshakes, hang-ups.
    fn control(&mut self) {
        let mut tokens = [0u64; 16];
        let mut n = 0;
        self.poller.ready(|t| {
            if n < tokens.len() {
                tokens[n] = t;
                n += 1;
            }
        });
        for &t in &tokens[..n] {
            match t {
                TOKEN_LISTENER => self.accept(),
                TOKEN_CTRL => {
                    if let Some(l) = &self.link
                        && let Err(e) = l.check_ctrl()
                    {
                        // A client that sent and then hung up: its frames
                        // are received first (the hang-up stays reported).
                        let pending = matches!(e, PvError::Disconnected) && l.rx_pending().unwrap_or(0) > 0;
                        if !pending {
                            self.fail(e);
                        }
                    }
                }
                TOKEN_KICK => {}
                t if t & TOKEN_PENDING != 0 => self.progress(t as u32 as RawFd),
                _ => {}
            }
        }
        // Clients that never answered the offer.
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].age() > HANDSHAKE_TIMEOUT {
                let p = self.pending.swap_remove(i);
                self.poller.remove(p.as_raw_fd());
                self.totals.refused += 1;
            } else {
                i += 1;
            }
        }
    }

    fn accept(&mut self) {
        loop {
            let sock = match self.listener.accept() {
                Ok(Some(s)) => s,
                Ok(None) => return,
                Err(e) => {
                    self.totals.last_error = Some(e.to_string());
                    return;
                }
            };
            if self.link.is_some() || self.pending.len() >= MAX_PENDING {
                PendingAttach::refuse(sock, "port busy: another client is attached");
                self.totals.refused += 1;
                continue;
            }
            match PendingAttach::start(sock, &self.server) {
                Ok(p) => {
                    let fd = p.as_raw_fd();
                    if self.poller.add(fd, TOKEN_PENDING | fd as u32 as u64).is_ok() {
                        self.pending.push(p);
                    } else {
                        self.totals.refused += 1;
                    }
                }
                Err(e) => {
                    self.totals.refused += 1;
                    self.totals.last_error = Some(e.to_string());
                }
            }
        }
    }

    fn progress(&mut self, fd: RawFd) {
        let Some(i) = self.pending.iter().position(|p| p.as_raw_fd() == fd) else { return };
        let p = self.pending.swap_remove(i);
        self.poller.remove(fd);
        match p.poll(&self.server) {
            Ok(Attach::Ready(link)) => self.attach(link),
            Ok(Attach::Pending(p)) => {
                if self.poller.add(fd, TOKEN_PENDING | fd as u32 as u64).is_ok() {
                    self.pending.push(p);
                }
            }
            Err(e) => {
                self.totals.refused += 1;
                self.totals.last_error = Some(e.to_string());
            }
        }
    }

    /// Sends the queued packets, each with `xmit_more` but the last.
    fn flush_queue(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let Some(link) = self.link.as_deref_mut() else {
            let n = self.queue.len() as u64;
            self.queue.clear();
            self.totals.drop("pv-no-client", n);
            return;
        };
        let n = self.queue.len();
        let mut fatal = None;
        for (i, pkt) in self.queue.drain(..).enumerate() {
            if fatal.is_some() {
                self.totals.drop("pv-no-client", 1);
                continue;
            }
            match link.send_packet(&pkt, i + 1 < n) {
                Ok(()) => {}
                Err(e) if !e.is_fatal() => self.totals.drop(e.reason(), 1),
                Err(e) => fatal = Some(e),
            }
        }
        if let Some(e) = fatal {
            self.fail(e);
        }
    }

    fn sink_send(&mut self, f: impl FnOnce(&mut PvLink, &mut Vec<u8>) -> Result<(), PvError>) {
        let Some(link) = self.link.as_deref_mut() else {
            self.totals.drop("pv-no-client", 1);
            return;
        };
        if let Err(e) = f(link, &mut self.lin) {
            self.fail(e);
        }
    }
}

impl PortDriver for PvPortDriver {
    fn kind(&self) -> &'static str {
        "pv"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Any
    }
    /// Queues `pkt` for the batch written at the next flush; without a
    /// client, `pv-no-client`.
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        if self.link.is_none() {
            *self.totals.drops.entry("pv-no-client").or_insert(0) += 1;
            return Err(DriverError::new("pv-no-client", format!("no client on {}", self.opts.socket.display())));
        }
        self.queue.push_back(pkt);
        if self.queue.len() >= self.opts.batch {
            self.flush_queue();
        }
        Ok(())
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        for _ in 0..MAX_IDLE_CHECKS {
            if let Some(link) = self.link.as_deref_mut() {
                if self.kicks_on {
                    let _ = link.disable_rx_kicks();
                    self.kicks_on = false;
                }
                let mut buf = Vec::with_capacity(DEFAULT_HEADROOM + 2048);
                buf.resize(DEFAULT_HEADROOM, 0);
                match link.recv(&mut buf) {
                    Ok(Some(f)) => match Packet::from_storage(buf, DEFAULT_HEADROOM, DEFAULT_HEADROOM + f.len) {
                        Ok(mut p) => {
                            p.meta = f.meta;
                            return Some(p);
                        }
                        Err(_) => self.totals.drop("rx-bad-length", 1),
                    },
                    Ok(None) => {}
                    Err(e) => {
                        self.fail(e);
                        continue;
                    }
                }
            }
            // Idle: control events, then sleep with kicks enabled unless a
            // frame slipped in meanwhile.
            self.control();
            let link = self.link.as_deref_mut()?;
            link.take_rx_kick();
            self.kicks_on = true;
            match link.enable_rx_kicks() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.fail(e);
                    return None;
                }
            }
        }
        // Still frames (a client sending faster than they are refused):
        // make the descriptor readable so the worker comes back.
        if let Some(link) = self.link.as_deref_mut() {
            link.rekick();
        }
        None
    }
    fn take_drops(&mut self, report: &mut dyn FnMut(&'static str, u64)) {
        if let Some(link) = self.link.take() {
            self.collect_rx_drops(&link);
            self.link = Some(link);
        }
        for (reason, n) in self.totals.pending.drain(..) {
            report(reason, n);
        }
    }
    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.poller.as_raw_fd())
    }
    fn flush(&mut self) {
        self.flush_queue();
        if let Some(link) = self.link.as_deref_mut()
            && let Err(e) = link.flush()
        {
            self.fail(e);
        }
    }
    /// `attached` (0/1), `attaches`, `detaches`, `refused`; transmit:
    /// `tx_frames`, `tx_bytes`, `tx_superpackets`, `tx_direct`,
    /// `tx_direct_offload`, `tx_direct_swcsum`, `tx_indirect`,
    /// `tx_indirect_swcsum`, `tx_indirect_hdr_info`, `tx_csum_without_hdr_info`,
    /// `tx_swcsum_fallback`, `tx_ring_full`, `tx_queued`, `kicks_sent`;
    /// receive: `rx_frames`, `rx_bytes`, `rx_superpackets`, `rx_csum_partial`,
    /// `rx_direct`, `rx_chain`, `rx_indirect`, `rx_indirect_hdr_info`,
    /// `rx_csum_without_hdr_info`; `kicks_taken`, `calls_sent` (all links so far).
    fn driver_counters(&self, report: &mut dyn FnMut(&'static str, u64)) {
        let mut t = Totals { tx: self.totals.tx.clone(), rx: self.totals.rx.clone(), ..Totals::default() };
        t.kicks_taken = self.totals.kicks_taken;
        t.calls_sent = self.totals.calls_sent;
        if let Some(l) = &self.link {
            t.add_link(l);
        }
        let (s, r) = (&t.tx, &t.rx);
        for (name, v) in [
            ("attached", u64::from(self.link.is_some())),
            ("attaches", self.totals.attaches),
            ("detaches", self.totals.detaches),
            ("refused", self.totals.refused),
            ("tx_frames", s.frames),
            ("tx_bytes", s.bytes),
            ("tx_superpackets", s.superpackets),
            ("tx_direct", s.direct),
            ("tx_direct_offload", s.direct_offload),
            ("tx_direct_swcsum", s.direct_swcsum),
            ("tx_indirect", s.indirect),
            ("tx_indirect_swcsum", s.indirect_swcsum),
            ("tx_indirect_hdr_info", s.indirect_hdr_info),
            ("tx_csum_without_hdr_info", s.csum_without_hdr_info),
            ("tx_swcsum_fallback", s.swcsum_fallback),
            ("tx_ring_full", s.ring_full),
            ("tx_queued", self.queue.len() as u64),
            ("kicks_sent", s.kicks),
            ("rx_frames", r.frames),
            ("rx_bytes", r.bytes),
            ("rx_superpackets", r.superpackets),
            ("rx_csum_partial", r.csum_partial),
            ("rx_direct", r.direct),
            ("rx_chain", r.chains),
            ("rx_indirect", r.indirect),
            ("rx_indirect_hdr_info", r.indirect_hdr_info),
            ("rx_csum_without_hdr_info", r.csum_without_hdr_info),
            ("kicks_taken", t.kicks_taken),
            ("calls_sent", t.calls_sent),
        ] {
            report(name, v);
        }
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Drop for PvPortDriver {
    /// Sends what is still queued (best effort).
    fn drop(&mut self) {
        self.flush_queue();
        if let Some(link) = self.link.as_deref_mut() {
            let _ = link.flush();
        }
    }
}

impl SegmentSink for PvPortDriver {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        self.sink_send(|link, _| link.send_packet_meta(packet, meta, true));
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        self.sink_send(|link, _| {
            let mut parts: [&[u8]; superpacket::offload::gso::MAX_SG_SLICES + 1] =
                [&[]; superpacket::offload::gso::MAX_SG_SLICES + 1];
            parts[0] = frame.header;
            let n = frame.payload.len().min(superpacket::offload::gso::MAX_SG_SLICES);
            parts[1..=n].copy_from_slice(&frame.payload[..n]);
            link.send(&parts[..=n], &frame.meta, true).map(|_| ())
        });
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.lin.clear();
        self.lin.resize(len, 0);
        &mut self.lin
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        self.sink_send(|link, lin| link.send(&[&lin[..len.min(lin.len())]], meta, true).map(|_| ()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::topology::{BuildOptions, Topology};

    fn build(src: &str, dir: &std::path::Path, workers: usize) -> Result<crate::device::Graph, String> {
        let opts = BuildOptions { base_dir: Some(dir.to_path_buf()), workers, ..BuildOptions::default() };
        Topology::parse(src).and_then(|t| t.build_with(&opts)).map_err(|e| e.to_string())
    }

    #[test]
    fn topology_builds_pv_ports_with_their_options() {
        let dir = tempfile::tempdir().unwrap();
        let src = r#"
[[device]]
name = "a"
kind = "port"
driver = { kind = "pv", socket = "a.sock" }
[[device]]
name = "b"
kind = "port"
driver = { kind = "pv", socket = "sub/b.sock", offloads = ["csum"], header_info = false, strategy = "offload-indirect", ring = 64, batch = 8 }
"#;
        let mut g = build(src, dir.path(), 1).unwrap();
        assert!(dir.path().join("a.sock").exists() && dir.path().join("sub/b.sock").exists());
        let a = g.id("a").unwrap();
        let d = g.port_driver_mut(a).unwrap();
        assert_eq!(d.kind(), "pv");
        assert!(d.poll_fd().is_some());
        let hw = d.hw_features();
        assert!(hw.contains(NetdevFeatures::HW_CSUM | NetdevFeatures::TSO | NetdevFeatures::TSO6));
        assert!(hw.contains(NetdevFeatures::GSO_UDP_L4));
        let b = g.id("b").unwrap();
        let d = g.port_driver_mut(b).unwrap();
        assert!(d.hw_features().contains(NetdevFeatures::HW_CSUM));
        assert!(!d.hw_features().intersects(NetdevFeatures::TSO | NetdevFeatures::GSO_UDP_L4));
        let pv = d.as_any_mut().downcast_mut::<PvPortDriver>().unwrap();
        assert_eq!(pv.opts.strategy, TxStrategy::OffloadIndirect);
        assert_eq!((pv.opts.ring, pv.opts.batch), (64, 8));
        assert_eq!(pv.opts.features & proto::F_GUEST_HDRLEN, 0);
        assert_eq!(pv.opts.features & (proto::F_HOST_TSO4 | proto::F_GUEST_TSO4), 0);
        // Without a client, transmit is a counted drop.
        let p = Packet::from_frame(&[0u8; 60]);
        assert_eq!(pv.xmit(p).unwrap_err().reason, "pv-no-client");
        drop(g);
        assert!(!dir.path().join("a.sock").exists(), "the socket file goes with the port");
    }

    #[test]
    fn topology_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let port = |driver: &str| format!("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {driver}\n");
        for (driver, workers, want) in [
            ("{ kind = \"pv\" }", 1, "line 4: a pv driver needs `socket`"),
            ("\"pv\"", 1, "line 4: a pv driver is a table"),
            ("{ kind = \"pv\", socket = \"x.sock\", strategy = \"fast\" }", 1, "unknown pv strategy `fast`"),
            ("{ kind = \"pv\", socket = \"x.sock\", ring = 100 }", 1, "ring 100 is not a power of two"),
            ("{ kind = \"pv\", socket = \"x.sock\", offloads = [\"lro\"] }", 1, "unknown pv offload `lro`"),
            (
                "{ kind = \"pv\", socket = \"x.sock\", interface = \"eth0\" }",
                1,
                "key `interface` does not apply to a pv driver",
            ),
            ("{ kind = \"pv\", socket = \"x.sock\" }", 2, "a pv port serves its client from one worker"),
        ] {
            let e = build(&port(driver), dir.path(), workers).unwrap_err();
            assert!(e.contains(want), "{driver}: {e}");
        }
        // A socket path in use by a live pv port is refused.
        let _g = build(&port("{ kind = \"pv\", socket = \"live.sock\" }"), dir.path(), 1).unwrap();
        let e = build(&port("{ kind = \"pv\", socket = \"live.sock\" }"), dir.path(), 1).unwrap_err();
        assert!(e.contains("another pv endpoint is listening"), "{e}");
    }
}
