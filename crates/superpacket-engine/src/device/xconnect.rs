//! Cross-connect (`kind = "xconnect"`, `docs/topology.md`): exactly two
//! member ports, every frame one receives leaves through the other whole,
//! superpackets included, as VPP's l2 xconnect and Open vSwitch's patch
//! ports do. No learning, no lookup, no VLAN processing: the work of DPDK
//! testpmd's `io` forwarding between two ports.
//!
//! Features: negotiated as for a bridge's members (offload-rules 6.5,
//! [`super::bridge::member_features`]), so a superpacket the receiving
//! member cannot take whole is segmented at that member only.
//!
//! Invariant: at most [`XCONNECT_MEMBERS`] members (the graph refuses a
//! third, [`NetDevice::max_lowers`]); with fewer, what the lone member
//! receives is dropped as `no-peer`.

use super::DeviceId;
use super::bridge::{bridge_wanted, member_features};
use super::features::{DeviceFeatures, NetdevFeatures, StackMode};
use super::netdev::{Cx, NetDevice, Run, Verdict};
use std::any::Any;
use superpacket::packet::Packet;

/// Members of a cross-connect.
pub const XCONNECT_MEMBERS: usize = 2;

/// A cross-connect's state: its members in enslaving order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Xconnect {
    members: Vec<DeviceId>,
}

impl Xconnect {
    /// A cross-connect without members.
    pub fn new() -> Xconnect {
        Xconnect::default()
    }

    /// The member a frame received on `from` leaves through.
    pub fn peer_of(&self, from: DeviceId) -> Option<DeviceId> {
        match self.members.as_slice() {
            [a, b] if *a == from => Some(*b),
            [a, b] if *b == from => Some(*a),
            _ => None,
        }
    }
}

impl NetDevice for Xconnect {
    fn kind(&self) -> &'static str {
        "xconnect"
    }

    /// A cross-connect has no host side: nothing is sent through it but
    /// what its members receive.
    fn transmit(&mut self, cx: &mut Cx<'_>, _pkt: &mut Packet, _len: usize) -> Verdict {
        cx.drop("xconnect-no-host")
    }

    /// A member's frame, handed whole to the other member.
    fn receive(&mut self, cx: &mut Cx<'_>, from: DeviceId, _pkt: &mut Packet, len: usize) -> Verdict {
        match self.peer_of(from) {
            Some(peer) => Verdict::Transmit(peer, len),
            None => cx.drop("no-peer"),
        }
    }

    /// A burst goes whole to the other member: one run.
    fn receive_run(&mut self, _cx: &mut Cx<'_>, from: DeviceId, pkts: &mut [Packet], _len: usize) -> Run {
        match self.peer_of(from) {
            Some(peer) => Run::To(peer, pkts.len()),
            None => Run::Each,
        }
    }

    fn default_features(&self, mode: StackMode) -> Option<NetdevFeatures> {
        Some(bridge_wanted(mode))
    }

    fn compute_features(&self, own: &DeviceFeatures, lowers: &[DeviceFeatures], mode: StackMode) -> DeviceFeatures {
        member_features(own, lowers, mode)
    }

    fn is_master(&self) -> bool {
        true
    }

    /// A frame goes to the other member with nothing of it read: a payload
    /// still in its sender's memory passes, and the other member's driver
    /// copies it from there if it can (one copy, as through a bridge:
    /// docs/benchmarks.md, the vhost-user one-copy subsections).
    fn passes_held_payload(&self) -> bool {
        true
    }

    fn max_lowers(&self) -> Option<usize> {
        Some(XCONNECT_MEMBERS)
    }

    fn enslaved(&mut self, lower: DeviceId) {
        self.members.push(lower);
    }

    fn released(&mut self, lower: DeviceId) {
        self.members.retain(|m| *m != lower);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
