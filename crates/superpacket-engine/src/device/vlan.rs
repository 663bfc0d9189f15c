//! 802.1Q / 802.1ad VLAN devices (offload-rules 6.4): features from the
//! real device ([`super::features::vlan_fix_features`]), the tag pushed on
//! transmit (in the data; the lower's validate step sees it, 6.2 steps 4-5)
//! and popped on receive.

use super::DeviceId;
use super::features::{DeviceFeatures, NetdevFeatures, StackMode, fix_features, vlan_fix_features, vlan_hw_features};
use super::netdev::{Cx, NetDevice, Verdict};
use serde::{Deserialize, Serialize};
use std::any::Any;
use superpacket::packet::Packet;
use superpacket::wire::ethernet::VLAN_TAG_LEN;

/// The tag kind of a VLAN device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VlanProto {
    /// 802.1Q customer tag (TPID 0x8100).
    #[serde(rename = "802.1q")]
    Dot1Q,
    /// 802.1ad service tag (TPID 0x88A8).
    #[serde(rename = "802.1ad")]
    Dot1AD,
}

impl VlanProto {
    /// The TPID.
    pub const fn tpid(self) -> u16 {
        match self {
            VlanProto::Dot1Q => 0x8100,
            VlanProto::Dot1AD => 0x88A8,
        }
    }
}

/// A VLAN device's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vlan {
    /// Tag kind.
    pub proto: VlanProto,
    /// VLAN id (1..=4094).
    pub vid: u16,
}

/// The outermost tag of an Ethernet frame's linear area: `(tpid, vid)`.
pub fn outer_tag(frame: &[u8]) -> Option<(u16, u16)> {
    use superpacket::wire::VlanTagView;
    // A tag counts only with the type field after it (18 bytes).
    if frame.len() < 18 {
        return None;
    }
    let tag = VlanTagView::new_checked(&frame[12..16]).ok()?;
    tag.tpid().is_vlan_tpid().then(|| (tag.tpid().0, tag.vid()))
}

impl NetDevice for Vlan {
    fn kind(&self) -> &'static str {
        "vlan"
    }

    /// Pushes the tag (in the data: the lower's validate step sees it, 6.2
    /// steps 4-5) and hands the packet to the real device.
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        if pkt.push_vlan_tag(self.proto.tpid(), self.vid).is_err() {
            return cx.drop("vlan-push");
        }
        Verdict::Transmit(cx.dev().lowers[0], len + VLAN_TAG_LEN)
    }

    /// The lower received a frame carrying this device's tag outermost
    /// (the graph matched it with [`NetDevice::vlan_tag`]): the tag is
    /// popped and this device receives the frame.
    fn receive(&mut self, cx: &mut Cx<'_>, _from: DeviceId, pkt: &mut Packet, len: usize) -> Verdict {
        if pkt.pop_vlan_tag().is_err() {
            return cx.drop("vlan-pop");
        }
        Verdict::Up(len - VLAN_TAG_LEN)
    }

    fn default_features(&self, mode: StackMode) -> Option<NetdevFeatures> {
        Some(vlan_hw_features(mode) | NetdevFeatures::LLTX)
    }

    /// 6.4: what the real device offers for tagged packets, its GSO limits.
    fn compute_features(&self, own: &DeviceFeatures, lowers: &[DeviceFeatures], mode: StackMode) -> DeviceFeatures {
        let mut f = *own;
        let Some(lower) = lowers.first() else { return f };
        f.features = fix_features(vlan_fix_features(f.wanted, lower, mode));
        f.vlan_features = lower.vlan_features.without(NetdevFeatures::ALL_FCOE);
        f.gso_max_size = lower.gso_max_size;
        f.gso_max_segs = lower.gso_max_segs;
        f
    }

    fn vlan_tag(&self) -> Option<(u16, u16)> {
        Some((self.proto.tpid(), self.vid))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
