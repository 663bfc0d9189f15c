//! Team (offload-rules 6.5): roundrobin, loadbalance (layer3+4 hash, per
//! flow) and activebackup runners. Features as for a bond.

use super::DeviceId;
use serde::{Deserialize, Serialize};

/// Team runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TeamMode {
    /// Ports in turn, packet by packet.
    Roundrobin,
    /// Port by flow hash ([`super::bond::hash_layer34`]).
    Loadbalance,
    /// One active port, failover on carrier loss.
    Activebackup,
}

/// A team's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    /// Runner.
    pub mode: TeamMode,
    /// Packets sent so far (roundrobin position).
    pub rr: u64,
    /// Active port (activebackup).
    pub active: Option<DeviceId>,
    /// Failovers so far.
    pub failovers: u64,
}

impl Team {
    /// A team without ports.
    pub fn new(mode: TeamMode) -> Team {
        Team { mode, rr: 0, active: None, failovers: 0 }
    }
}
