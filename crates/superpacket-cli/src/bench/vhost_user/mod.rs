//! `superpacket bench vhost-user` (issue 24 item 4): the same traffic,
//! in one run, through superpacket's vhost-user port and through DPDK's
//! own vhost backend, between the same two DPDK 22.11 `dpdk-testpmd`
//! virtio-user frontends (one sends, one receives).
//!
//! # Method
//! One run measures both backends in turn (superpacket first in even
//! runs, DPDK first in odd ones, so drift of the machine hits both alike);
//! the suite repeats runs (`--runs N`) and gives every figure's
//! statistics and ministat's t test per pair ([`crate::bench::suite`]).
//! Each workload of each backend gets fresh processes
//! ([`measure_workload`]): the backend ([`backend`]) listens on two
//! sockets, the receiver testpmd connects to the second (`rxonly`,
//! `--rx-offloads=0x2018`: TCP checksum, LRO and scatter, so it acks
//! `GUEST_CSUM` and `GUEST_TSO4/6` and takes superpackets whole), then the
//! sender to the first:
//!
//! - **64-byte frames**: testpmd `txonly` (64-byte UDP/IPv4 frames, as
//!   fast as it can). Figure: frames the receiver counted per second.
//! - **64 KB TSO superpackets in a loop** ([`Workload::Tso`]): one testpmd
//!   on one forwarding lcore holds three ports: DPDK's pcap PMD (port 0,
//!   `net_pcap0,rx_pcap=FILE`, [`TSO_LOOP_FRAMES`] TCP/IPv4 frames of
//!   [`TSO_FRAME_LEN`] bytes written by superpacket's pcap writer, read
//!   once), a virtio-user port on the sender's socket (port 1: `csum set
//!   tcp hw`, `tso set 1448`, so each frame leaves as one TSO superpacket,
//!   `gso_type` TCPV4, `gso_size` 1448) and one on the receiver's (port 2:
//!   LRO, TCP checksum and scatter, so it acks `GUEST_TSO4/6` and takes
//!   superpackets whole), `csum` forwarding, 64 KiB mbufs
//!   (`--mbuf-size=65535`: one superpacket per mbuf). The pcap's frames
//!   are forwarded to port 1 once; the backend puts them in port 2's ring;
//!   then the frontend forwards port 2 to port 1, so the same
//!   superpackets circulate, always from the sender's socket to the
//!   receiver's. Figure: Ethernet frame bytes port 2 counted per
//!   second (Gbit/s), and the mean frame it received (a superpacket
//!   delivered whole is [`TSO_FRAME_LEN`] bytes).
//!
//!   Why a loop: with a sender and a receiver testpmd (the row before
//!   this one), both busy-polling on the CPU they share, each ran only in
//!   its scheduler time slices, and the sender spent nine tenths of its
//!   samples in the pcap PMD's copy of every 64 KB frame
//!   (`infinite_rx=1` replays by `rte_memcpy` into a fresh mbuf):
//!   superpacket's backend waited for them a third of the time. One
//!   process replaying the pcap to the sending port and dropping what the
//!   receiving port got (`chained` pcap -> sender -> receiver -> pcap)
//!   removes the time slices but keeps the copy; the loop moves no
//!   payload in the frontend at all (see docs/benchmarks.md, "The TSO
//!   row with one frontend").
//! - **64-byte frames in a loop** ([`Workload::Loop`]): the backend alone
//!   is measured. In the 64-byte workload above both frontends busy-poll
//!   on the one CPU they share, so the receiver runs only in the
//!   scheduler's time slices and bounds the 64-byte figure. Here one
//!   testpmd holds both virtio-user ports (one per socket) on one
//!   forwarding lcore:
//!   `mac` forwarding from each port to the other (source and destination
//!   MACs rewritten, so a learning bridge sees each MAC on one side
//!   only), started with `start tx_first` [`LOOP_BURSTS`] (that many
//!   bursts of 32 frames sent on each port first). The frames then
//!   circulate: frontend, backend, frontend, and so on. Figure: frames the
//!   frontend received on both ports per second (every one crossed the
//!   backend once).
//! - **The loop through a cross-connect** (`*_loop_xc_superpacket`):
//!   the loop again with superpacket's ports in a cross-connect
//!   ([`EngineTopology::Xconnect`]: no learning, no lookup), the same work
//!   as DPDK's `io` forwarding; the bridge rows stay the operator's usual
//!   case.
//!
//! Buffers ([`Workload::mbuf_args`]): DPDK's default 2 KiB mbufs for
//! 64-byte frames; 64 KiB ones for superpackets in the frontend (one
//! receive buffer per superpacket) and in DPDK's backend (its best case:
//! with 2 KiB it chains 32 mbufs per superpacket, which was slower in
//! trial runs).
//!
//! Each workload runs for a warm-up, then a window: the receiving ports'
//! `show port stats` counters, the backend process's CPU clock (every
//! thread: [`cpu::process_cpu_seconds`]) and the sending ports' counters
//! are read at both ends of the window. Backend CPU per packet and per GB
//! divide the backend's CPU time in the window by what the receiver got;
//! `backend_cpu_load` is that CPU time per second of window (1.0 = one
//! CPU busy). DPDK's forwarding lcore polls without pause, so its load is
//! 1.0 whatever the rate; superpacket's worker sleeps when idle.
//!
//! # Placement
//! [`cpu::Placement`]: the frontends (every thread) on the first CPU this
//! process may use, the backend (every thread of the engine process or of
//! DPDK's testpmd) alone on the second; the same for both backends. On
//! this project's 2-vCPU machines the 64-byte workload's two frontends
//! therefore share one CPU, and the offered load (`offered_*`, the
//! sender's own count) shows when a frontend rather than the backend
//! limits a figure; the two loops have one frontend process with one
//! forwarding lcore.
//!
//! It needs root (the EAL's runtime files and the engine's defaults),
//! `dpdk-testpmd` (Debian's `dpdk` package, which brings the vhost,
//! virtio and pcap PMDs) and two CPUs; otherwise the scenario is skipped
//! with the reason.

pub mod backend;
pub mod cpu;
pub mod testpmd;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::BenchReport;
use super::suite::{Better, KeyFigure, Kind, Pair, PlotSpec, RunOptions, Scenario};
use backend::{Backend, BackendKind, EngineTopology};
use cpu::Placement;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};
use testpmd::{PortStats, Testpmd, TestpmdSpec};

/// The sender's MAC.
pub const SENDER_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0a];
/// The receiver's MAC (every frame is addressed to it).
pub const RECEIVER_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0b];

/// TCP payload of one TSO superpacket: 45 segments of 1448 bytes.
pub const TSO_PAYLOAD: usize = 45 * 1448;
/// Its segment size (`tso set`).
pub const TSO_MSS: usize = 1448;
/// Its Ethernet frame: 14 + IPv4 20 + TCP 32 (timestamps) + payload. It
/// must fit one 65535-byte mbuf after its 128-byte headroom.
pub const TSO_FRAME_LEN: usize = 14 + 20 + 32 + TSO_PAYLOAD;

/// Bursts of 32 frames `start tx_first` sends on each port of the loop
/// frontend: 512 frames circulate, fewer than one ring (1024) holds, so
/// that no full ring drops frames for good.
pub const LOOP_BURSTS: usize = 8;

/// Virtqueue size of both frontends (the largest superpacket's port offers).
const QUEUE_SIZE: u32 = 1024;

/// Warm-up and window of one workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Traffic before the window opens.
    pub warmup: Duration,
    /// The window counted.
    pub window: Duration,
}

impl Timing {
    /// `--quick`: 0.3 s warm-up, 0.5 s window; else 1 s and `window_s`.
    pub fn new(quick: bool, window_s: f64) -> Timing {
        if quick {
            Timing { warmup: Duration::from_millis(300), window: Duration::from_millis(500) }
        } else {
            Timing { warmup: Duration::from_secs(1), window: Duration::from_secs_f64(window_s) }
        }
    }
}

/// What one window counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Frames the receiver got.
    pub packets: u64,
    /// Their bytes (Ethernet frames without FCS).
    pub bytes: u64,
    /// Frames the sender handed its queue.
    pub offered_packets: u64,
    /// Their bytes.
    pub offered_bytes: u64,
    /// Length of the window, seconds.
    pub secs: f64,
    /// CPU time of the backend process in the window, seconds.
    pub backend_cpu_s: f64,
}

impl Window {
    /// Receiver Mpps.
    pub fn mpps(&self) -> f64 {
        self.packets as f64 / self.secs / 1e6
    }
    /// Receiver Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e9
    }
    /// Backend CPU nanoseconds per received frame.
    pub fn cpu_ns_per_packet(&self) -> f64 {
        self.backend_cpu_s * 1e9 / self.packets as f64
    }
    /// Backend CPU seconds per GB (10^9 bytes) received.
    pub fn cpu_s_per_gb(&self) -> f64 {
        self.backend_cpu_s / (self.bytes as f64 / 1e9)
    }
    /// Backend CPU seconds per second of window.
    pub fn cpu_load(&self) -> f64 {
        self.backend_cpu_s / self.secs
    }
}

fn mac(m: [u8; 6]) -> String {
    MacAddr(m).to_string()
}

/// The two workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// 64-byte frames from testpmd `txonly`.
    Small,
    /// 64 KB TCP TSO superpackets circulating through one testpmd's two
    /// ports: received whole with LRO on the receiver's, sent back out
    /// with TSO on the sender's.
    Tso,
    /// 64-byte frames circulating between one testpmd's two ports
    /// through the backend.
    Loop,
}

impl Workload {
    /// For progress messages.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Small => "64-byte frames",
            Workload::Tso => "64 KB TSO superpackets in a loop",
            Workload::Loop => "64-byte frames in a loop",
        }
    }

    /// mbuf arguments of the frontends and of DPDK's backend: 2 KiB
    /// (DPDK's default) for 64-byte frames; for superpackets 64 KiB, so
    /// that one superpacket is one receive buffer in the frontend and one
    /// mbuf in DPDK's backend (with 2 KiB a receiver freeing 32 mbufs per
    /// superpacket limited both backends, and DPDK's backend chains 32
    /// mbufs per superpacket), 4096 of them: the receiving ring's 1024,
    /// the superpackets in flight and the mempool caches (with 2048 a full
    /// 1024-entry transmit ring and the caches once starved the pcap port).
    pub fn mbuf_args(self) -> Vec<String> {
        match self {
            Workload::Small | Workload::Loop => vec!["--total-num-mbufs=16384".into()],
            Workload::Tso => vec!["--mbuf-size=65535".into(), "--total-num-mbufs=4096".into()],
        }
    }
}

fn virtio_user(index: usize, socket: &Path, mac_addr: [u8; 6]) -> String {
    format!("net_virtio_user{index},path={},mac={},queue_size={QUEUE_SIZE}", socket.display(), mac(mac_addr))
}

fn receiver_spec(socket: &Path, cpu: usize, workload: Workload) -> TestpmdSpec {
    let mut args: Vec<String> =
        ["--forward-mode=rxonly", "--rx-offloads=0x2018", "--rxd=1024", "--txd=1024"].map(String::from).to_vec();
    args.extend(workload.mbuf_args());
    TestpmdSpec { name: "rx".into(), cpu, vdevs: vec![virtio_user(0, socket, RECEIVER_MAC)], args }
}

/// The 64-byte sender: `txonly` to the receiver's MAC.
fn sender_spec(socket: &Path, cpu: usize) -> TestpmdSpec {
    TestpmdSpec {
        name: "tx64".into(),
        cpu,
        vdevs: vec![virtio_user(0, socket, SENDER_MAC)],
        args: [
            "--forward-mode=txonly".into(),
            format!("--eth-peer=0,{}", mac(RECEIVER_MAC)),
            "--total-num-mbufs=8192".into(),
            "--rxd=1024".into(),
            "--txd=1024".into(),
        ]
        .into(),
    }
}

/// The loop frontend: port 0 on the sender's socket, port 1 on the
/// receiver's, `mac` forwarding from each to the other.
fn loop_spec(sockets: [&Path; 2], cpu: usize) -> TestpmdSpec {
    let mut args: Vec<String> = vec![
        "--forward-mode=mac".into(),
        format!("--eth-peer=0,{}", mac(RECEIVER_MAC)),
        format!("--eth-peer=1,{}", mac(SENDER_MAC)),
        "--rxd=1024".into(),
        "--txd=1024".into(),
    ];
    args.extend(Workload::Loop.mbuf_args());
    TestpmdSpec {
        name: "loop".into(),
        cpu,
        vdevs: vec![virtio_user(0, sockets[0], SENDER_MAC), virtio_user(1, sockets[1], RECEIVER_MAC)],
        args,
    }
}

/// The TSO frontend's ports: DPDK's pcap PMD (the seed), the
/// virtio-user port on the sender's socket and the one on the receiver's.
const TSO_PCAP_PORT: u16 = 0;
const TSO_SEND_PORT: u16 = 1;
const TSO_RECV_PORT: u16 = 2;

/// The TSO frontend: the pcap port reading `pcap` once, then the sending
/// and the receiving virtio-user ports; `csum` forwarding on one lcore,
/// each forwarding port to the next of the port list (`chained`), the
/// receive queues kept as they are when forwarding starts
/// (`--no-flush-rx`: the seeded superpackets wait there).
fn tso_spec(sockets: [&Path; 2], pcap: &Path, cpu: usize) -> TestpmdSpec {
    let mut args: Vec<String> = vec![
        "--forward-mode=csum".into(),
        "--port-topology=chained".into(),
        "--no-flush-rx".into(),
        "--rxd=1024".into(),
        "--txd=1024".into(),
    ];
    args.extend(Workload::Tso.mbuf_args());
    TestpmdSpec {
        name: "tso".into(),
        cpu,
        vdevs: vec![
            format!("net_pcap{TSO_PCAP_PORT},rx_pcap={}", pcap.display()),
            virtio_user(TSO_SEND_PORT.into(), sockets[0], SENDER_MAC),
            virtio_user(TSO_RECV_PORT.into(), sockets[1], RECEIVER_MAC),
        ],
        args,
    }
}

/// testpmd commands that configure the TSO frontend's virtio-user ports:
/// the receiving one takes LRO, TCP checksum and scatter (what acks
/// `GUEST_TSO4/6` and `GUEST_CSUM`; per port, since the pcap port has
/// none of them), the sending one sends each TCP frame as one TSO
/// superpacket (`gso_type` TCPV4, `gso_size` [`TSO_MSS`]).
fn tso_setup() -> Vec<String> {
    let (r, t) = (TSO_RECV_PORT, TSO_SEND_PORT);
    let mut c: Vec<String> = vec![format!("port stop {r}")];
    c.extend(["tcp_lro", "tcp_cksum", "scatter"].map(|o| format!("port config {r} rx_offload {o} on")));
    c.push(format!("port start {r}"));
    c.extend([
        format!("port stop {t}"),
        format!("csum set ip sw {t}"),
        format!("csum set tcp hw {t}"),
        format!("tso set {TSO_MSS} {t}"),
        format!("port start {t}"),
    ]);
    c
}

/// The frames that seed the TSO loop: `count` consecutive 64 KB
/// segments of one TCP/IPv4 flow from the sender's to the receiver's MAC,
/// checksums valid.
///
/// # Errors
/// Only if a frame cannot be built (never for these sizes).
pub fn tso_frames(count: usize) -> Result<Vec<Vec<u8>>, String> {
    let spec = FlowSpec {
        src_mac: MacAddr(SENDER_MAC),
        dst_mac: MacAddr(RECEIVER_MAC),
        ..FlowSpec::new(Transport::Tcp, false, 0)
    };
    let mut flow = Flow::new(spec);
    (0..count)
        .map(|_| flow.frame(TSO_PAYLOAD, TcpFlags::ACK | TcpFlags::PSH).map_err(|e| format!("TSO frame: {e}")))
        .collect()
}

/// Where one window's counters come from: the ports that receive, and
/// those that send (in the same testpmd or in another).
struct Counted<'a> {
    receiver: (&'a mut Testpmd, &'a [u16]),
    sender: Offered<'a>,
}

/// The ports whose transmit counters are the offered load.
enum Offered<'a> {
    /// Ports of another testpmd.
    Other(&'a mut Testpmd, &'a [u16]),
    /// Ports of the receiving testpmd.
    Same(&'a [u16]),
}

/// `show port stats` of each of `ports`, summed.
fn stats_sum(t: &mut Testpmd, ports: &[u16]) -> Result<PortStats, String> {
    let mut sum = PortStats::default();
    for &p in ports {
        let s = t.port_stats(p)?;
        sum.rx_packets += s.rx_packets;
        sum.rx_bytes += s.rx_bytes;
        sum.tx_packets += s.tx_packets;
        sum.tx_bytes += s.tx_bytes;
    }
    Ok(sum)
}

/// Counts one window after the warm-up: what the receiving ports got and
/// the sending ports sent, and the backend's CPU clock.
fn count_window(c: Counted<'_>, backend: &Backend, timing: Timing) -> Result<Window, String> {
    let Counted { receiver: (receiver, rx_ports), mut sender } = c;
    std::thread::sleep(timing.warmup);
    let mut offered = |receiver: &mut Testpmd| match &mut sender {
        Offered::Other(t, ports) => stats_sum(t, ports),
        Offered::Same(ports) => stats_sum(receiver, ports),
    };
    let s0 = offered(receiver)?;
    let t0 = Instant::now();
    let r0 = stats_sum(receiver, rx_ports)?;
    let c0 = backend.cpu_seconds()?;
    std::thread::sleep(timing.window.saturating_sub(t0.elapsed()));
    let secs = t0.elapsed().as_secs_f64();
    let r1 = stats_sum(receiver, rx_ports)?;
    let c1 = backend.cpu_seconds()?;
    let s1 = offered(receiver)?;
    Ok(Window {
        packets: r1.rx_packets.saturating_sub(r0.rx_packets),
        bytes: r1.rx_bytes.saturating_sub(r0.rx_bytes),
        offered_packets: s1.tx_packets.saturating_sub(s0.tx_packets),
        offered_bytes: s1.tx_bytes.saturating_sub(s0.tx_bytes),
        secs,
        backend_cpu_s: c1 - c0,
    })
}

/// Both workloads through one backend.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackendRun {
    /// 64-byte frames.
    pub small: Window,
    /// 64 KB TSO superpackets in a loop.
    pub tso: Window,
    /// 64-byte frames in a loop.
    pub looped: Window,
    /// 64-byte frames in a loop through a cross-connect (superpacket only).
    pub looped_xc: Option<Window>,
}

/// Runs `workload` through `kind` (superpacket's ports joined by
/// `topology`) with fresh processes (backend, receiver, sender) and
/// counts one window.
///
/// # Errors
/// A process failed to start or stop, or the receiver got nothing.
pub fn measure_workload(
    kind: BackendKind,
    topology: EngineTopology,
    workload: Workload,
    placement: Placement,
    dir: &Path,
    pcap: &Path,
    timing: Timing,
) -> Result<Window, String> {
    let send = dir.join(format!("{}-send.sock", kind.key()));
    let recv = dir.join(format!("{}-recv.sock", kind.key()));
    let backend_mbufs = if kind == BackendKind::Dpdk { workload.mbuf_args() } else { Vec::new() };
    let backend = Backend::start(kind, topology, dir, [&send, &recv], placement.backend, backend_mbufs)?;
    let w = match workload {
        Workload::Loop => measure_loop(&backend, [&send, &recv], placement, timing)?,
        Workload::Small => measure_small(&backend, &send, &recv, placement, timing)?,
        Workload::Tso => measure_tso(&backend, [&send, &recv], pcap, placement, timing)?,
    };
    backend.stop()?;
    nothing_received(w, workload, kind)
}

/// [`Workload::Small`] through the started `backend`: the receiver on
/// socket `recv`, the sender on `send`.
fn measure_small(
    backend: &Backend,
    send: &Path,
    recv: &Path,
    placement: Placement,
    timing: Timing,
) -> Result<Window, String> {
    let workload = Workload::Small;
    // The frontends connect to different sockets: they start side by side
    // (EAL start-up is most of a quick run's time).
    let (rx, tx) = std::thread::scope(|s| {
        let rx = s.spawn(|| Testpmd::start(&receiver_spec(recv, placement.frontends, workload)));
        let tx = Testpmd::start(&sender_spec(send, placement.frontends));
        (rx.join().unwrap_or_else(|_| Err("the receiver's start-up thread panicked".to_string())), tx)
    });
    let (mut rx, mut tx) = (rx?, tx?);
    rx.command("start")?;
    tx.command("start")?;
    let w =
        count_window(Counted { receiver: (&mut rx, &[0]), sender: Offered::Other(&mut tx, &[0]) }, backend, timing)?;
    tx.command("stop")?;
    rx.command("stop")?;
    let (rx_quit, tx_quit) = std::thread::scope(|s| {
        let rx_quit = s.spawn(|| rx.quit());
        (rx_quit.join().unwrap_or_else(|_| Err("the receiver's quit thread panicked".to_string())), tx.quit())
    });
    rx_quit?;
    tx_quit?;
    Ok(w)
}

/// `w`, or an error if nothing arrived.
fn nothing_received(w: Window, workload: Workload, kind: BackendKind) -> Result<Window, String> {
    if w.packets == 0 {
        return Err(format!(
            "{}: the receiver got nothing through the {} backend (the sender offered {})",
            workload.describe(),
            kind.key(),
            w.offered_packets
        ));
    }
    Ok(w)
}

/// [`Workload::Loop`] through the started `backend`: one frontend on both
/// sockets, frames injected by `start tx_first`, counted on both ports.
fn measure_loop(
    backend: &Backend,
    sockets: [&Path; 2],
    placement: Placement,
    timing: Timing,
) -> Result<Window, String> {
    let mut fe = Testpmd::start(&loop_spec(sockets, placement.frontends))?;
    fe.command(&format!("start tx_first {LOOP_BURSTS}"))?;
    let w = count_window(Counted { receiver: (&mut fe, &[0, 1]), sender: Offered::Same(&[0, 1]) }, backend, timing)?;
    fe.command("stop")?;
    fe.quit()?;
    Ok(w)
}

/// Superpackets seeded into the TSO loop: fewer than a ring holds
/// (1024), so the receiving port's ring takes them all before the loop
/// starts.
pub const TSO_LOOP_FRAMES: usize = 256;

/// [`Workload::Tso`] through the started `backend`: one frontend on both
/// sockets, seeded from `pcap` ([`seed_tso_loop`]), counted on its
/// receiving port (received) and its sending port (offered).
fn measure_tso(
    backend: &Backend,
    sockets: [&Path; 2],
    pcap: &Path,
    placement: Placement,
    timing: Timing,
) -> Result<Window, String> {
    let mut fe = Testpmd::start(&tso_spec(sockets, pcap, placement.frontends))?;
    for c in tso_setup() {
        fe.command(&c)?;
    }
    seed_tso_loop(&mut fe)?;
    let w = count_window(
        Counted { receiver: (&mut fe, &[TSO_RECV_PORT]), sender: Offered::Same(&[TSO_SEND_PORT]) },
        backend,
        timing,
    )?;
    fe.command("stop")?;
    fe.quit()?;
    Ok(w)
}

/// Seeds the TSO loop: forwards the pcap's [`TSO_LOOP_FRAMES`] frames
/// (read once; then the pcap port has nothing more) to the sending port,
/// and the backend puts the superpackets in the receiving port's ring,
/// not yet polled; then forwards from the receiving port to the sending
/// one (the port list 2, 1, chained), so the same superpackets circulate
/// through the backend, always from the sender's socket to the
/// receiver's.
///
/// # Errors
/// A command failed, or the pcap's frames did not all leave within 10 s.
fn seed_tso_loop(fe: &mut Testpmd) -> Result<(), String> {
    fe.command(&format!("set portlist {TSO_PCAP_PORT},{TSO_SEND_PORT}"))?;
    fe.command("start")?;
    let t0 = Instant::now();
    loop {
        let sent = fe.port_stats(TSO_SEND_PORT)?.tx_packets;
        if sent >= TSO_LOOP_FRAMES as u64 {
            break;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!("the TSO loop's seed: {sent} of {TSO_LOOP_FRAMES} superpackets sent after 10 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    fe.command("stop")?;
    fe.command(&format!("set portlist {TSO_RECV_PORT},{TSO_SEND_PORT}"))?;
    fe.command("start")?;
    Ok(())
}

/// A directory of this run's sockets, topology, logs and pcap, removed on drop.
struct RunDir(PathBuf);

impl RunDir {
    fn create(run: usize) -> Result<RunDir, String> {
        let d = std::env::temp_dir().join(format!("superpacket-bench-vhost-user-{}-{run}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        Ok(RunDir(d))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Appends one backend's figures (names end in `_<backend>`).
pub fn push_backend(r: &mut BenchReport, kind: BackendKind, run: &BackendRun) {
    let k = kind.key();
    let (s, t) = (&run.small, &run.tso);
    r.push(format!("mpps_64b_{k}"), s.mpps(), "Mpps");
    r.push(format!("offered_mpps_64b_{k}"), s.offered_packets as f64 / s.secs / 1e6, "Mpps");
    r.push(format!("cpu_ns_per_packet_64b_{k}"), s.cpu_ns_per_packet(), "ns");
    r.push(format!("cpu_s_per_gb_64b_{k}"), s.cpu_s_per_gb(), "CPU s/GB");
    r.push(format!("backend_cpu_load_64b_{k}"), s.cpu_load(), "CPUs");
    r.push(format!("gbps_tso_{k}"), t.gbps(), "Gbit/s");
    r.push(format!("offered_gbps_tso_{k}"), t.offered_bytes as f64 * 8.0 / t.secs / 1e9, "Gbit/s");
    r.push(format!("cpu_ns_per_packet_tso_{k}"), t.cpu_ns_per_packet(), "ns");
    r.push(format!("cpu_s_per_gb_tso_{k}"), t.cpu_s_per_gb(), "CPU s/GB");
    r.push(format!("backend_cpu_load_tso_{k}"), t.cpu_load(), "CPUs");
    r.push(format!("frame_bytes_tso_{k}"), t.bytes as f64 / t.packets as f64, "bytes");
    let l = &run.looped;
    r.push(format!("mpps_loop_{k}"), l.mpps(), "Mpps");
    r.push(format!("cpu_ns_per_packet_loop_{k}"), l.cpu_ns_per_packet(), "ns");
    r.push(format!("backend_cpu_load_loop_{k}"), l.cpu_load(), "CPUs");
    if let Some(x) = &run.looped_xc {
        r.push(format!("mpps_loop_xc_{k}"), x.mpps(), "Mpps");
        r.push(format!("cpu_ns_per_packet_loop_xc_{k}"), x.cpu_ns_per_packet(), "ns");
        r.push(format!("backend_cpu_load_loop_xc_{k}"), x.cpu_load(), "CPUs");
    }
}

/// Why the scenario cannot run here, if it cannot.
///
/// # Errors
/// Not root, no `dpdk-testpmd`, fewer than two CPUs, or no `superpacket`
/// binary for the engine process.
pub fn available() -> Result<(), String> {
    superpacket_engine::io::privileges_available()
        .map_err(|why| format!("DPDK's EAL and the engine are run as root here ({why})"))?;
    if !testpmd::installed() {
        return Err(format!("{} is not installed (apt-get install dpdk)", testpmd::TESTPMD));
    }
    Placement::choose()?;
    crate::bench::peer_process::superpacket_binary().map(drop)
}

/// One run: both backends, in an order that alternates with the run.
///
/// # Errors
/// As [`measure_workload`], or the pcap cannot be written.
pub fn run_once(o: &RunOptions, on_step: &mut dyn FnMut(&str, usize, usize)) -> Result<BenchReport, String> {
    let placement = Placement::choose()?;
    let timing = Timing::new(o.quick, o.live_seconds);
    let dir = RunDir::create(o.run)?;
    let pcap = dir.0.join("tso.pcap");
    crate::bench::peers::dpdk::write_pcap(&pcap, &tso_frames(TSO_LOOP_FRAMES)?)
        .map_err(|e| format!("{}: {e}", pcap.display()))?;
    let order = if o.run.is_multiple_of(2) { BackendKind::ALL } else { [BackendKind::Dpdk, BackendKind::Superpacket] };
    let mut runs = Vec::new();
    // Three workloads per backend, and superpacket's loop again through a
    // cross-connect.
    const STEPS: usize = 7;
    let mut step = 0;
    for kind in order {
        let mut measure = |workload: Workload, topology: EngineTopology| {
            let through = if topology == EngineTopology::Xconnect { " (cross-connect)" } else { "" };
            on_step(&format!("{}: {}{through}", kind.key(), workload.describe()), step, STEPS);
            step += 1;
            measure_workload(kind, topology, workload, placement, &dir.0, &pcap, timing)
        };
        let small = measure(Workload::Small, EngineTopology::Bridge)?;
        let tso = measure(Workload::Tso, EngineTopology::Bridge)?;
        let looped = measure(Workload::Loop, EngineTopology::Bridge)?;
        let looped_xc = match kind {
            BackendKind::Superpacket => Some(measure(Workload::Loop, EngineTopology::Xconnect)?),
            BackendKind::Dpdk => None,
        };
        runs.push((kind, BackendRun { small, tso, looped, looped_xc }));
    }
    runs.sort_by_key(|(k, _)| *k != BackendKind::Superpacket);
    let mut r = BenchReport::new("vhost-user");
    for (kind, run) in &runs {
        push_backend(&mut r, *kind, run);
    }
    let (sp, dpdk) = (&runs[0].1, &runs[1].1);
    r.push("mpps_64b_ratio", sp.small.mpps() / dpdk.small.mpps(), "x");
    r.push("gbps_tso_ratio", sp.tso.gbps() / dpdk.tso.gbps(), "x");
    r.push("mpps_loop_ratio", sp.looped.mpps() / dpdk.looped.mpps(), "x");
    if let Some(xc) = &sp.looped_xc {
        r.push("mpps_loop_xc_ratio", xc.mpps() / dpdk.looped.mpps(), "x");
    }
    Ok(r)
}

/// The scenario for the suite (named only: `superpacket bench vhost-user`).
pub static VHOST_USER: Scenario = Scenario {
    name: "vhost-user",
    result: None,
    title: "vhost-user backends: superpacket's port against DPDK's vhost PMD, same testpmd frontends",
    kind: Kind::LiveProcesses,
    default: false,
    original: "Issue 24: 64-byte frames at least 0.8x DPDK's vhost backend; 64 KB TSO superpackets at least 2x \
               its Gbit/s.",
    models: "DPDK 22.11 testpmd virtio-user frontends connected through (A) superpacket run with two vhost-user \
             ports in a bridge, one worker, and (B) testpmd with DPDK's vhost PMD on both sockets, io forwarding on \
             one lcore. 64-byte frames: a txonly sender and an rxonly receiver. TSO: one testpmd on both sockets, \
             64 KB TCP superpackets seeded once from a pcap, received whole with LRO on one port and sent back \
             out with TSO on the other. The 64-byte loop: one testpmd on both sockets, mac forwarding between its \
             ports; it runs twice through superpacket, its ports in the bridge and in a cross-connect (no lookup, \
             as io forwarding).",
    real: "Everything: real processes, real vhost-user and virtio rings in shared memory. Frontends on one CPU, \
           the backend alone on another; the backend's CPU time is its process CPU clock.",
    simulated: "Nothing. In the 64-byte workload the two frontends share one CPU, so they can limit both backends \
                alike (compare offered_* with the receiver's figures); the two loops have one frontend process.",
    pairs: &[
        Pair {
            label: "64-byte frames at the receiver",
            baseline: "mpps_64b_dpdk",
            candidate: "mpps_64b_superpacket",
            better: Better::Higher,
        },
        Pair {
            label: "64 KB TSO superpackets in a loop through the backend",
            baseline: "gbps_tso_dpdk",
            candidate: "gbps_tso_superpacket",
            better: Better::Higher,
        },
        Pair {
            label: "64-byte frames in a loop through the backend",
            baseline: "mpps_loop_dpdk",
            candidate: "mpps_loop_superpacket",
            better: Better::Higher,
        },
        Pair {
            label: "64-byte frames in a loop, superpacket's cross-connect",
            baseline: "mpps_loop_dpdk",
            candidate: "mpps_loop_xc_superpacket",
            better: Better::Higher,
        },
        Pair {
            label: "backend CPU per 64-byte frame",
            baseline: "cpu_ns_per_packet_64b_dpdk",
            candidate: "cpu_ns_per_packet_64b_superpacket",
            better: Better::Lower,
        },
        Pair {
            label: "backend CPU per GB of TSO superpackets",
            baseline: "cpu_s_per_gb_tso_dpdk",
            candidate: "cpu_s_per_gb_tso_superpacket",
            better: Better::Lower,
        },
    ],
    key: &[
        KeyFigure {
            label: "64-byte Mpps, superpacket / DPDK",
            baseline: "mpps_64b_dpdk",
            candidate: "mpps_64b_superpacket",
            better: Better::Higher,
            original: "issue 24 target: at least 0.8x",
            original_ratio: Some(0.8),
        },
        KeyFigure {
            label: "64-byte loop Mpps, superpacket / DPDK",
            baseline: "mpps_loop_dpdk",
            candidate: "mpps_loop_superpacket",
            better: Better::Higher,
            original: "issue 24 target: at least 0.8x (the backend alone)",
            original_ratio: Some(0.8),
        },
        KeyFigure {
            label: "64-byte loop Mpps, superpacket's cross-connect / DPDK's io forwarding",
            baseline: "mpps_loop_dpdk",
            candidate: "mpps_loop_xc_superpacket",
            better: Better::Higher,
            original: "issue 24 target: at least 0.8x (the backend alone, the same forwarding work)",
            original_ratio: Some(0.8),
        },
        KeyFigure {
            label: "TSO Gbit/s, superpacket / DPDK",
            baseline: "gbps_tso_dpdk",
            candidate: "gbps_tso_superpacket",
            better: Better::Higher,
            original: "issue 24 target: at least 2x",
            original_ratio: Some(2.0),
        },
    ],
    plots: &[
        PlotSpec {
            file: "vhost-user-mpps.svg",
            title: "64-byte frames through a vhost-user backend (receiver Mpps)",
            y_label: "Mpps",
            log: false,
            series: &["superpacket", "DPDK vhost"],
            groups: &[
                ("64-byte", &["mpps_64b_superpacket", "mpps_64b_dpdk"]),
                ("64-byte loop", &["mpps_loop_superpacket", "mpps_loop_dpdk"]),
                ("64-byte loop, cross-connect", &["mpps_loop_xc_superpacket", "mpps_loop_dpdk"]),
            ],
        },
        PlotSpec {
            file: "vhost-user-tso.svg",
            title: "64 KB TSO superpackets in a loop through a vhost-user backend (Gbit/s)",
            y_label: "Gbit/s",
            log: false,
            series: &["superpacket", "DPDK vhost"],
            groups: &[("64 KB TSO", &["gbps_tso_superpacket", "gbps_tso_dpdk"])],
        },
    ],
    available,
    run: run_once,
};

#[cfg(test)]
mod tests {
    use super::*;
    use superpacket::wire::{Ipv4Packet, TcpPacket};

    #[test]
    fn tso_frames_fit_one_mbuf_and_are_valid_tcp() {
        let frames = tso_frames(TSO_LOOP_FRAMES).unwrap();
        assert_eq!(frames.len(), TSO_LOOP_FRAMES);
        for f in &frames {
            assert_eq!(f.len(), TSO_FRAME_LEN);
            assert!(f.len() <= 65535 - 128, "one --mbuf-size=65535 mbuf after its headroom");
            assert_eq!(&f[..6], &RECEIVER_MAC);
            assert_eq!(&f[6..12], &SENDER_MAC);
            let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
            assert!(ip.verify_checksum());
            let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
            assert_eq!(tcp.payload().len(), TSO_PAYLOAD);
            assert_eq!(TSO_PAYLOAD / TSO_MSS, 45);
        }
    }

    #[test]
    fn window_figures() {
        let w = Window {
            packets: 2_000_000,
            bytes: 128_000_000,
            offered_packets: 3_000_000,
            offered_bytes: 192_000_000,
            secs: 2.0,
            backend_cpu_s: 1.0,
        };
        assert_eq!(w.mpps(), 1.0);
        assert_eq!(w.gbps(), 0.512);
        assert_eq!(w.cpu_ns_per_packet(), 500.0);
        assert_eq!(w.cpu_s_per_gb(), 1.0 / 0.128);
        assert_eq!(w.cpu_load(), 0.5);
    }

    #[test]
    fn every_compared_figure_is_reported() {
        let w = Window { packets: 1, bytes: 1, offered_packets: 1, offered_bytes: 1, secs: 1.0, backend_cpu_s: 1.0 };
        let mut r = BenchReport::new("vhost-user");
        for k in BackendKind::ALL {
            let looped_xc = (k == BackendKind::Superpacket).then_some(w);
            push_backend(&mut r, k, &BackendRun { small: w, tso: w, looped: w, looped_xc });
        }
        for p in VHOST_USER.pairs {
            assert!(r.get(p.baseline).is_some() && r.get(p.candidate).is_some(), "{}", p.label);
        }
        for g in VHOST_USER.plots.iter().flat_map(|p| p.groups.iter().flat_map(|g| g.1.iter())) {
            assert!(r.get(g).is_some(), "{g}");
        }
    }
}
