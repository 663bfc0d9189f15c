//! `superpacket run TOPOLOGY.toml`: the engine as a long-running process.
//!
//! Builds the topology's graph once per worker (opening TAP and AF_PACKET
//! ports), starts the workers, then waits for SIGINT/SIGTERM, answering
//! `superpacket stats` on a Unix socket (and Prometheus scrapes when asked)
//! and reporting ports that vanish and come back. On a signal it stops the
//! workers, which closes every port (TAPs it created vanish, offloads of
//! TAPs it attached to are restored), prints the final counters and exits 0.
//! With `--lab`, [`super::run_lab`] makes the topology's lab first and
//! removes it at the end.

use super::{CliError, EXIT_OK};
use clap::Args;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use superpacket_engine::device::{StackMode, Topology};
use superpacket_engine::engine::control::{StatsServer, default_socket_dir};
use superpacket_engine::engine::privileges::{PrivilegePlan, drop_privileges, lookup_user};
use superpacket_engine::engine::{Engine, EngineConfig, EngineOptions, PortEvent};
use superpacket_engine::io::event::{Epoll, SignalFd, signal_name};

/// Arguments of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Topology file (TOML; see docs/topology.md).
    pub topology: PathBuf,
    /// Worker threads (each with its own graph; TAPs multi-queue, AF_PACKET
    /// fanout; NAT's connection table and the neighbour table shared).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Pin worker N to the N-th CPU this process may run on (wrapping), as
    /// `bench live-peers` does: a worker then keeps its CPU instead of being
    /// pulled onto the CPU of the sender that wakes it (docs/benchmarks.md,
    /// "One stream, two workers: pinned workers").
    #[arg(long)]
    pub pin_workers: bool,
    /// Most packets taken from one port per round (NAPI weight).
    #[arg(long, default_value_t = 64)]
    pub budget: usize,
    /// Override the topology's stack mode (passthrough, legacy).
    #[arg(long)]
    pub mode: Option<String>,
    /// Unix socket for `superpacket stats` (default: /run/superpacket/<topology name>.sock).
    #[arg(long)]
    pub stats_socket: Option<PathBuf>,
    /// Also serve Prometheus text format on this address (e.g. 127.0.0.1:9464).
    #[arg(long)]
    pub prometheus: Option<SocketAddr>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print a status line every N seconds (default: 5 on a terminal, else never).
    #[arg(long)]
    pub status_interval: Option<f64>,
    /// Once the ports are open, become this user (name or uid), keeping only
    /// the capabilities reopening ports needs.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Keep every privilege (by default, once the ports are open, the engine
    /// keeps only CAP_NET_ADMIN and CAP_NET_RAW, plus CAP_SYS_ADMIN when a
    /// port lives in a named namespace).
    #[arg(long, conflicts_with = "user")]
    pub keep_privileges: bool,
    /// Make the topology's [lab] (as `superpacket lab up`) before the engine
    /// starts and remove it when the run ends, however it ends (SIGINT,
    /// SIGTERM, the engine failing or killed). A lab already up is used and
    /// left up.
    #[arg(long)]
    pub lab: bool,
}

/// The default stats socket of a topology file: `<dir>/<file stem>.sock`.
pub fn default_socket(topology: &Path) -> PathBuf {
    let stem = topology.file_stem().and_then(|s| s.to_str()).unwrap_or("superpacket");
    default_socket_dir().join(format!("{stem}.sock"))
}

/// Parses a `--mode` value.
pub fn parse_mode(s: &str) -> Result<StackMode, CliError> {
    match s {
        "passthrough" => Ok(StackMode::Passthrough),
        "legacy" => Ok(StackMode::Legacy),
        other => Err(CliError(format!("unknown mode `{other}` (passthrough, legacy)"))),
    }
}

const SIGNAL_TOKEN: u64 = 1 << 32;

/// Checks the arguments that need no file.
pub fn check_args(args: &RunArgs) -> Result<(), CliError> {
    if args.budget == 0 {
        return Err(CliError("--budget must be at least 1".into()));
    }
    if args.workers == 0 || args.workers > 256 {
        return Err(CliError("--workers must be 1..=256".into()));
    }
    args.mode.as_deref().map(parse_mode).transpose().map(drop)
}

/// Runs the command.
pub fn run(args: &RunArgs) -> Result<u8, CliError> {
    if args.lab {
        return super::run_lab::run(args);
    }
    run_engine(args)
}

/// Runs the engine (everything but `--lab`).
pub fn run_engine(args: &RunArgs) -> Result<u8, CliError> {
    check_args(args)?;
    let mode = args.mode.as_deref().map(parse_mode).transpose()?;
    let src = std::fs::read_to_string(&args.topology).map_err(|e| CliError::context(args.topology.display(), e))?;
    let topo = Topology::parse(&src).map_err(|e| CliError::context(args.topology.display(), e))?;
    // The lab the file declares (made by `lab up` or `--lab`) must fit the ports: say so before they fail to open.
    if let Ok(Some(lab)) = superpacket_lab::plumbing::parse(&src) {
        for w in super::lab::port_warnings(&lab, &topo, Some(args.workers)) {
            eprintln!("superpacket: warning: {}: {w}", args.topology.display());
        }
    }
    // Signals are blocked before any thread starts, so they wait in the signalfd.
    let signals = SignalFd::install().map_err(|e| CliError::context("signals", e))?;
    // The user is looked up before any port opens: an unknown one is a usage error.
    let user_ids = match (&args.user, args.keep_privileges) {
        (Some(user), false) => Some(lookup_user(user).map_err(|e| CliError::context("--user", e))?),
        _ => None,
    };
    let socket = match (&args.stats_socket, &args.user) {
        (Some(s), _) => s.clone(),
        // A directory the user will own, so that it can remove its socket at exit.
        (None, Some(user)) if !args.keep_privileges => {
            let d = default_socket(&args.topology);
            let name = d.file_name().map(|n| n.to_os_string()).unwrap_or_default();
            default_socket_dir().join(user).join(name)
        }
        (None, _) => default_socket(&args.topology),
    };
    let opts = EngineOptions {
        workers: args.workers,
        config: EngineConfig { budget: args.budget, ..EngineConfig::default() },
        mode,
        base_dir: args.topology.parent().map(Path::to_path_buf),
        tap_offloads: None,
        packet_batch: None,
        pin_workers: args.pin_workers,
    };
    let open = Engine::open(&topo, &opts).map_err(|e| CliError::context(args.topology.display(), e))?;
    // The socket appears once every port is open: its existence means "running".
    let server = StatsServer::bind(&socket, args.prometheus).map_err(|e| CliError::context(socket.display(), e))?;
    // Still the only thread: what is dropped here is dropped for the workers too.
    let privileges = if args.keep_privileges {
        "kept (--keep-privileges)".to_string()
    } else {
        let plan = PrivilegePlan::for_topology(topo.uses_named_netns(), user_ids);
        if let Some((uid, gid)) = user_ids {
            // The default socket of a --user run lives in a directory of that user's own.
            let own_dir = args.stats_socket.is_none();
            server.hand_to(uid, gid, own_dir).map_err(|e| CliError::context(server.path().display(), e))?;
        }
        let r = drop_privileges(&plan).map_err(|e| CliError::context("dropping privileges", e))?;
        format!("uid {} gid {}, capabilities {}", r.uid, r.gid, r.effective_names())
    };
    let engine = open.start().map_err(|e| CliError::context(args.topology.display(), e))?;
    eprintln!("superpacket: privileges: {privileges}");
    eprintln!(
        "superpacket: running {} with {} worker(s); stats: superpacket stats --socket {}{}",
        args.topology.display(),
        args.workers,
        server.path().display(),
        server.prometheus_addr().map(|a| format!("; Prometheus: http://{a}/metrics")).unwrap_or_default()
    );

    let mut epoll = Epoll::new(8).map_err(|e| CliError::context("epoll", e))?;
    epoll.add(signals.as_fd().as_raw_fd(), SIGNAL_TOKEN).map_err(|e| CliError::context("epoll", e))?;
    for (i, fd) in server.fds().into_iter().enumerate() {
        epoll.add(fd, i as u64).map_err(|e| CliError::context("epoll", e))?;
    }
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + Duration::from_secs_f64(d.max(0.0)));
    let status_every = match args.status_interval {
        Some(s) if s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(_) => None,
        None => std::io::stderr().is_terminal().then_some(Duration::from_secs(5)),
    };
    let mut next_status = status_every.map(|d| started + d);
    let mut reason = String::from("end of --duration");
    loop {
        let mut signalled = false;
        epoll
            .wait(Duration::from_millis(200), |t| signalled |= t == SIGNAL_TOKEN)
            .map_err(|e| CliError::context("epoll", e))?;
        if signalled && let Some(sig) = signals.take() {
            reason = signal_name(sig).to_string();
            break;
        }
        server.serve_pending(&|| engine.snapshot());
        for e in engine.take_events() {
            match e {
                PortEvent::Gone { port } => eprintln!("superpacket: port {port}: device gone, carrier down; retrying"),
                PortEvent::Back { port } => eprintln!("superpacket: port {port}: device back, reopened"),
            }
        }
        if !engine.is_running() {
            reason = "a worker stopped".into();
            break;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break;
        }
        if let (Some(at), Some(every)) = (next_status, status_every)
            && now >= at
        {
            let s = engine.snapshot();
            let rx: u64 = s.devices.iter().filter(|d| d.kind == "port").map(|d| d.get("rx_packets")).sum();
            let tx: u64 = s.devices.iter().filter(|d| d.kind == "port").map(|d| d.get("tx_packets")).sum();
            let drops: u64 = s.devices.iter().map(|d| d.dropped()).sum();
            eprintln!(
                "superpacket: up {:.0} s: ports rx {rx} tx {tx} packets, {drops} drops, {:.2} CPU s",
                s.uptime_s, s.cpu_seconds
            );
            next_status = Some(now + every);
        }
    }
    eprintln!("superpacket: stopping ({reason})");
    let fin = engine.stop().map_err(|e| CliError::context("engine", e))?;
    print!("{}", fin.render_text());
    Ok(EXIT_OK)
}
