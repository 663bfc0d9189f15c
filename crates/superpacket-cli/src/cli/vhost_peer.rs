//! `superpacket vhost-peer` (hidden): the engine's vhost-user port with an
//! echo (UDP ports 7, 7001-7003) and discard responder, for `bench
//! vhost-tx` ([`crate::bench::vhost_tx::run_peer`]); prints `ready S` once
//! listening and one JSON report per frontend
//! ([`crate::bench::peer_process::PeerReport`]).

use super::{CliError, EXIT_OK};
use crate::bench::peer_process::PeerReport;
use crate::bench::vhost_tx::{VhostPeerOptions, run_peer};
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Arguments of `vhost-peer`.
#[derive(Debug, Args)]
pub struct PeerArgs {
    /// Socket to listen on.
    #[arg(long)]
    pub socket: PathBuf,
    /// Poll the queue this many microseconds before sleeping on the eventfd.
    #[arg(long, default_value_t = 0)]
    pub busy_poll_us: u64,
    /// Validate every received frame (checksums, lengths, offload metadata).
    #[arg(long)]
    pub verify: bool,
    /// Serve one frontend, then exit.
    #[arg(long)]
    pub once: bool,
    /// Pin the process to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

/// Runs the command.
pub fn run(a: &PeerArgs) -> Result<u8, CliError> {
    let o = VhostPeerOptions {
        socket: a.socket.clone(),
        busy_poll: Duration::from_micros(a.busy_poll_us),
        verify: a.verify,
        once: a.once,
        cpu: a.cpu,
    };
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
    run_peer(&o, &mut ready, &mut report).map_err(|e| CliError::context(a.socket.display(), e))?;
    Ok(EXIT_OK)
}
