//! `superpacket vhost-peer` (hidden): the engine's vhost-user port with an
//! echo (UDP ports 7, 7001-7003) and discard responder, for `bench
//! vhost-tx` ([`crate::bench::vhost_tx::run_peer`]); prints `ready S` once
//! listening and one JSON report per frontend
//! ([`crate::bench::pv_tx::PeerReport`]).

use super::pv_peer::PeerArgs;
use super::{CliError, EXIT_OK};
use crate::bench::vhost_tx::{VhostPeerOptions, run_peer};
use std::time::Duration;

/// Runs the command.
pub fn run(a: &PeerArgs) -> Result<u8, CliError> {
    let o = VhostPeerOptions {
        socket: a.socket.clone(),
        busy_poll: Duration::from_micros(a.busy_poll_us),
        verify: a.verify,
        once: a.once,
        cpu: a.cpu,
    };
    super::pv_peer::print_peer(|ready, report| run_peer(&o, ready, report))
        .map_err(|e| CliError::context(a.socket.display(), e))?;
    Ok(EXIT_OK)
}
