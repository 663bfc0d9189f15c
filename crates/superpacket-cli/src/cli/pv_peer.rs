//! `superpacket pv-peer` (hidden): the processes on the other side of a
//! paravirtual link, for `bench pv-tx` and the tests.
//!
//! - `pv-peer device --socket S`: the engine's end of pv links with an
//!   echo (UDP port 7) and discard (port 9) responder
//!   ([`crate::bench::pv_tx::run_peer`]); prints `ready S` once listening and
//!   one JSON report per client ([`crate::bench::pv_tx::PeerReport`]).
//! - `pv-peer flood --socket S`: a client sending a mix of traffic until
//!   `--seconds` or until killed ([`crate::bench::pv_tx::run_flood`]);
//!   prints `attached` once the link is up and a JSON report at the end.

use super::{CliError, EXIT_OK};
use crate::bench::pv_tx::{FloodOptions, PeerOptions, PeerReport, run_flood, run_peer};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use superpacket_engine::device::topology::parse_mac;
use superpacket_engine::io::pv::{TxStrategy, proto};

/// The two roles.
#[derive(Debug, Subcommand)]
pub enum PvPeerCommand {
    /// The engine's end of pv links, with an echo/discard responder.
    Device(DeviceArgs),
    /// A client sending a mix of traffic.
    Flood(FloodArgs),
}

/// What every peer process takes (`pv-peer device`, `vhost-peer`).
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// Socket to listen on.
    #[arg(long)]
    pub socket: PathBuf,
    /// Poll the ring this many microseconds before sleeping on the eventfd.
    #[arg(long, default_value_t = 0)]
    pub busy_poll_us: u64,
    /// Validate every received frame (checksums, lengths, offload metadata).
    #[arg(long)]
    pub verify: bool,
    /// Serve one client, then exit.
    #[arg(long)]
    pub once: bool,
    /// Pin the process to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// Arguments of `pv-peer device`.
#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// Socket, busy polling, verification, CPU.
    #[command(flatten)]
    pub peer: PeerArgs,
    /// Transmit policy of the replies (swcsum-direct, offload-indirect, direct-nocsum).
    #[arg(long, default_value = "swcsum-direct")]
    pub strategy: String,
    /// Do not ask for header information (no GUEST_HDRLEN).
    #[arg(long)]
    pub no_header_info: bool,
    /// Do not offer EVENT_IDX.
    #[arg(long)]
    pub no_event_idx: bool,
    /// Default ring size.
    #[arg(long, default_value_t = 256)]
    pub ring: u16,
}

/// Arguments of `pv-peer flood`.
#[derive(Debug, Args)]
pub struct FloodArgs {
    /// Socket of the pv port to attach to.
    #[arg(long)]
    pub socket: PathBuf,
    /// Transmit policy.
    #[arg(long, default_value = "swcsum-direct")]
    pub strategy: String,
    /// Stop after this many seconds (default: until killed).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Source MAC.
    #[arg(long, default_value = "02:5e:00:00:00:01")]
    pub src_mac: String,
    /// Destination MAC.
    #[arg(long, default_value = "02:5e:00:00:00:02")]
    pub dst_mac: String,
}

/// Runs a peer that calls `ready` once it listens and `report` per
/// client, printing `ready SOCKET` and each report as one JSON line.
pub(super) fn print_peer<E>(
    run: impl FnOnce(&mut dyn FnMut(&Path), &mut dyn FnMut(&PeerReport)) -> Result<(), E>,
) -> Result<(), E> {
    let mut ready = |p: &Path| {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "ready {}", p.display());
        let _ = out.flush();
    };
    let mut report = |r: &PeerReport| {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{}", serde_json::to_string(r).unwrap_or_default());
        let _ = out.flush();
    };
    run(&mut ready, &mut report)
}

fn strategy(s: &str) -> Result<TxStrategy, CliError> {
    TxStrategy::parse(s)
        .ok_or_else(|| CliError(format!("unknown strategy `{s}` (swcsum-direct, offload-indirect, direct-nocsum)")))
}

fn mac(s: &str) -> Result<[u8; 6], CliError> {
    parse_mac(s).map(|m| m.0).ok_or_else(|| CliError(format!("bad MAC address `{s}`")))
}

/// Runs the command.
pub fn run(cmd: &PvPeerCommand) -> Result<u8, CliError> {
    match cmd {
        PvPeerCommand::Device(a) => {
            let mut o = PeerOptions::new(&a.peer.socket);
            o.strategy = strategy(&a.strategy)?;
            o.busy_poll = Duration::from_micros(a.peer.busy_poll_us);
            o.verify = a.peer.verify;
            o.once = a.peer.once;
            o.ring = a.ring;
            o.cpu = a.peer.cpu;
            if a.no_header_info {
                o.features &= !proto::F_GUEST_HDRLEN;
            }
            if a.no_event_idx {
                o.features &= !proto::F_RING_EVENT_IDX;
            }
            print_peer(|ready, report| run_peer(&o, ready, report))
                .map_err(|e| CliError::context(a.peer.socket.display(), e))?;
            Ok(EXIT_OK)
        }
        PvPeerCommand::Flood(a) => {
            let o = FloodOptions {
                socket: a.socket.clone(),
                strategy: strategy(&a.strategy)?,
                duration: a.seconds.map(Duration::from_secs_f64),
                src_mac: mac(&a.src_mac)?,
                dst_mac: mac(&a.dst_mac)?,
            };
            let r = run_flood(&o, &mut || {
                let mut out = std::io::stdout();
                let _ = writeln!(out, "attached");
                let _ = out.flush();
            })
            .map_err(|e| CliError::context(a.socket.display(), e))?;
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
            Ok(EXIT_OK)
        }
    }
}
