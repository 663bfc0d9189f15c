//! `superpacket bench vhost-tx`: seed result 4 (the transmit policy of a
//! paravirtual NIC driver) on vhost-user, between two real processes.
//!
//! # Set-up
//!
//! This process spawns `superpacket vhost-peer --once --socket S`: the
//! engine's vhost-user port ([`VhostUserDriver`], the code a `vhost-user`
//! port of `superpacket run` runs, listening) with an echo responder
//! ([`serve`]: UDP to ports 7001-7003 comes back with addresses and ports
//! swapped and the checksum handed back partial, as a stack's reply;
//! anything else is counted and dropped). It attaches superpacket's
//! virtio-user frontend ([`VirtioUser`], every feature, `INDIRECT_DESC`
//! included) and sends with the three strategies of
//! [`superpacket_engine::io::tx_policy::TxStrategy`] through
//! [`VirtioUser::send_with`]:
//!
//! - `swcsum_direct`: a lone non-GSO packet gets its checksum completed in
//!   software and goes in one direct descriptor (header and frame in one
//!   buffer); superpackets and batches keep the offload, indirect;
//! - `offload_indirect`: always `NEEDS_CSUM`, the `virtio_net_hdr` in its
//!   own descriptor behind an indirect table;
//! - `direct_nocsum`: `NEEDS_CSUM` in one direct descriptor.
//!
//! The measurement, the estimator (fastest of many short interleaved
//! samples, the two processes pinned to different CPUs) and the figures
//! are [`super::tx_strategies`]'s, which suite scenario 4 reads. The device
//! is the engine's vhost-user port (`virtio-queue`'s descriptor walk,
//! `vm-memory` copies); on virtio the header is always there, so "offload"
//! needs no extra header information, only the indirect table.
//!
//! The frontend copies each request into a scratch buffer before sending
//! (the software checksum is completed in that copy, so the request keeps
//! its pseudo-header sum); every strategy pays that copy.

use super::BenchReport;
use super::peer_process::{PeerProcess, PeerReport, peer_args, superpacket_binary};
use super::tx_strategies::{
    ECHO_PORT, ECHO_PORT_BASE, LinkKind, StrategyLink, TxBenchOptions, reflect, render_with, run_over,
};
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::FrameHeaders;
use superpacket_engine::device::PortDriver;
use superpacket_engine::device::vhost_user::{VhostUserDriver, VhostUserOptions};
use superpacket_engine::io::affinity;
use superpacket_engine::io::tx_policy::{TxForm, TxStrategy};
use superpacket_engine::io::virtio_user::{VirtioUser, VirtioUserConfig, VirtioUserError};

/// Longest a full transmit queue is waited for.
const TX_FULL_WAIT: Duration = Duration::from_secs(2);

/// The client's end: the virtio-user frontend.
pub struct VirtioLink {
    fe: VirtioUser,
    scratch: Vec<u8>,
    /// Poll the receive queue this long before sleeping on the call eventfd.
    pub busy_poll: Duration,
}

impl VirtioLink {
    /// Attaches to the vhost-user backend on `socket` with every feature.
    ///
    /// # Errors
    /// The connection or the negotiation failing, or no `INDIRECT_DESC`.
    pub fn connect(socket: &Path, busy_poll: Duration) -> Result<VirtioLink, String> {
        let fe = VirtioUser::connect(&VirtioUserConfig::new(socket))
            .map_err(|e| format!("attaching to {}: {e}", socket.display()))?;
        if fe.acked_features() & superpacket_engine::device::vhost_user::features::INDIRECT_DESC == 0 {
            return Err("the backend did not negotiate INDIRECT_DESC".into());
        }
        Ok(VirtioLink { fe, scratch: Vec::with_capacity(70_000), busy_poll })
    }

    /// Sends the scratch buffer, waiting for room in the transmit queue.
    fn send_scratch(&mut self, strategy: TxStrategy, meta: &OffloadMeta, more: bool) -> Result<TxForm, String> {
        let t0 = Instant::now();
        loop {
            match self.fe.send_with(strategy, &mut self.scratch, meta, more) {
                Ok(form) => return Ok(form),
                Err(VirtioUserError::TxFull) if t0.elapsed() < TX_FULL_WAIT => {
                    self.fe.flush_tx().map_err(|e| e.to_string())?;
                    std::hint::spin_loop();
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

impl StrategyLink for VirtioLink {
    fn send_frame(&mut self, s: TxStrategy, frame: &[u8], meta: &OffloadMeta, more: bool) -> Result<TxForm, String> {
        self.scratch.clear();
        self.scratch.extend_from_slice(frame);
        self.send_scratch(s, meta, more)
    }
    fn send_packet(&mut self, strategy: TxStrategy, packet: &Packet, more: bool) -> Result<(), String> {
        packet.copy_to(&mut self.scratch);
        self.send_scratch(strategy, &packet.meta, more).map(|_| ())
    }
    fn recv_wait(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> Result<Option<usize>, String> {
        if buf.len() < 70_000 {
            buf.resize(70_000, 0);
        }
        let t0 = Instant::now();
        loop {
            if let Some(f) = self.fe.recv(buf).map_err(|e| e.to_string())? {
                return Ok(Some(f.len));
            }
            let waited = t0.elapsed();
            if waited >= timeout {
                return Ok(None);
            }
            if waited < self.busy_poll {
                std::hint::spin_loop();
                continue;
            }
            self.fe.wait_rx(timeout - waited).map_err(|e| e.to_string())?;
        }
    }
}

/// The vhost-user link: `vhost-peer` and the virtio-user frontend.
pub const VHOST_LINK: LinkKind<VirtioLink> = LinkKind {
    bench: "vhost-tx",
    spawn_peer: |sock, busy_poll, cpu| {
        let args = peer_args(busy_poll, false, cpu);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        PeerProcess::spawn_command(&superpacket_binary()?, &["vhost-peer"], sock, &args)
    },
    connect: VirtioLink::connect,
};

/// Runs the benchmark, calling `on_step(description, step, total_steps)`
/// before each step and once more with `step == total_steps` when done.
pub fn run_with_progress(opts: &TxBenchOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    run_over(&VHOST_LINK, opts, on_step)
}

/// Human-readable rendering of a report.
pub fn render_human(report: &BenchReport) -> String {
    render_with(
        report,
        "vhost-tx benchmark: superpacket's virtio-user frontend and the engine's vhost-user port, two processes\n\
         swcsum_direct: the policy (a lone packet gets a software checksum and one direct descriptor)\n\
         offload_indirect: always offload, the virtio_net_hdr in its own descriptor behind an indirect table\n\
         direct_nocsum: offload in one direct descriptor\n",
    )
}

// ------------------------------------------------------------------ peer

/// How `superpacket vhost-peer` serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VhostPeerOptions {
    /// Socket to listen on.
    pub socket: PathBuf,
    /// Poll the transmit queue this long before sleeping.
    pub busy_poll: Duration,
    /// Validate every received frame ([`validate_frame`]).
    pub verify: bool,
    /// Serve one frontend, then return.
    pub once: bool,
    /// Pin the peer to this CPU.
    pub cpu: Option<usize>,
}

/// Whether a frame to `port` is echoed.
fn echoed(port: u16) -> bool {
    port == ECHO_PORT || (ECHO_PORT_BASE..ECHO_PORT_BASE + 3).contains(&port)
}

fn dst_port(frame: &[u8]) -> Option<u16> {
    let h = FrameHeaders::parse(frame).ok()?;
    let at = h.l4_offset;
    frame.get(at + 2..at + 4).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Waits until the port's wake descriptor is readable (at most `timeout`).
fn wait_port(port: &VhostUserDriver, timeout: Duration) {
    if let Some(fd) = port.poll_fd() {
        // SAFETY: the descriptor belongs to the port, which outlives this call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = superpacket_engine::io::sys::poll_readable(fd, timeout, "vhost-user port");
    }
}

/// Serves the connected frontend until it leaves (see [`VhostPeerOptions`]).
pub fn serve(port: &mut VhostUserDriver, opts: &VhostPeerOptions) -> PeerReport {
    let mut r = PeerReport { features: format!("{:#x}", port.acked_features()), ..PeerReport::default() };
    let mut drops = BTreeMap::new();
    let mut problems = Vec::new();
    let mut idle_since = Instant::now();
    loop {
        let mut got = false;
        while let Some(mut p) = port.recv() {
            got = true;
            r.frames += 1;
            r.superpackets += u64::from(p.meta.is_gso());
            r.rx_csum_partial += u64::from(matches!(p.meta.csum, ChecksumState::Partial { .. }));
            if opts.verify {
                problems.clear();
                validate_frame(&p.to_vec(), Medium::Ethernet, &p.meta, false, &mut problems);
                if !problems.is_empty() {
                    r.bad_frames += 1;
                    r.first_problem.get_or_insert_with(|| format!("frame {}: {}", r.frames, problems[0]));
                }
            }
            // Requests are small: the whole frame is in the linear part.
            let whole = p.len() == p.total_len();
            let reply = match dst_port(p.linear()) {
                Some(d) if whole && echoed(d) => {
                    let meta = p.meta;
                    reflect(p.linear_mut(), &meta)
                }
                _ => None,
            };
            let Some(meta) = reply else {
                r.discarded += 1;
                continue;
            };
            p.meta = meta;
            match port.xmit(p) {
                Ok(()) => r.echoed += 1,
                Err(e) => *drops.entry(e.reason.to_string()).or_insert(0) += 1,
            }
        }
        port.flush();
        port.take_drops(&mut |reason, n| *drops.entry(reason.to_string()).or_insert(0) += n);
        if !port.connected() {
            break;
        }
        if got {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= opts.busy_poll {
            wait_port(port, Duration::from_secs(1));
        }
    }
    r.rx_drops = drops;
    r.end = "the frontend left".into();
    r
}

/// The peer: listens on `opts.socket`, calls `ready` once listening, serves
/// frontends one at a time (reporting each through `report`), until the
/// first one leaves with `once`.
///
/// # Errors
/// The socket cannot be bound, or pinning fails.
pub fn run_peer(
    opts: &VhostPeerOptions,
    ready: &mut dyn FnMut(&Path),
    report: &mut dyn FnMut(&PeerReport),
) -> Result<(), String> {
    if let Some(cpu) = opts.cpu {
        affinity::pin(cpu).map_err(|e| e.to_string())?;
    }
    let mut port = VhostUserDriver::open(&VhostUserOptions::new(&opts.socket)).map_err(|e| e.to_string())?;
    ready(&opts.socket);
    loop {
        while !port.connected() {
            wait_port(&port, Duration::from_secs(1));
        }
        report(&serve(&mut port, opts));
        if opts.once {
            return Ok(());
        }
    }
}
