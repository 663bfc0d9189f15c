//! Team (offload-rules 6.5): roundrobin, loadbalance (layer3+4 hash, per
//! flow) and activebackup runners. Features as for a bond.

use super::DeviceId;
use super::bond::{
    hash_layer34, master_features, master_wanted, nth_usable, receive_on_slave, reselect_active, to_slave,
};
use super::features::{DeviceFeatures, NetdevFeatures, StackMode};
use super::graph::Device;
use super::netdev::{Cx, NetDevice, Verdict};
use serde::{Deserialize, Serialize};
use std::any::Any;
use superpacket::packet::Packet;

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

impl NetDevice for Team {
    fn kind(&self) -> &'static str {
        "team"
    }

    /// Roundrobin: the next usable port; loadbalance: the layer3+4 hash's;
    /// activebackup: the active port.
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let slave = match self.mode {
            TeamMode::Activebackup => self.active,
            TeamMode::Roundrobin => {
                let n = self.rr as usize;
                self.rr = self.rr.wrapping_add(1);
                nth_usable(cx.me(), cx.devices(), n)
            }
            TeamMode::Loadbalance => nth_usable(cx.me(), cx.devices(), hash_layer34(pkt.linear()) as usize),
        };
        to_slave(cx, slave, len)
    }

    fn receive(&mut self, _cx: &mut Cx<'_>, from: DeviceId, _pkt: &mut Packet, len: usize) -> Verdict {
        receive_on_slave((self.mode == TeamMode::Activebackup).then_some(self.active), from, len)
    }

    fn default_features(&self, mode: StackMode) -> Option<NetdevFeatures> {
        Some(master_wanted(mode))
    }

    fn compute_features(&self, own: &DeviceFeatures, lowers: &[DeviceFeatures], mode: StackMode) -> DeviceFeatures {
        master_features(own, lowers, mode, NetdevFeatures::EMPTY)
    }

    fn is_master(&self) -> bool {
        true
    }

    fn lowers_changed(&mut self, me: DeviceId, devices: &[Device]) {
        reselect_active(me, devices, &mut self.active, &mut self.failovers, None);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
