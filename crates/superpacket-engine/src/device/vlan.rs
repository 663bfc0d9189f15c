//! 802.1Q / 802.1ad VLAN devices (offload-rules 6.4): features from the
//! real device ([`super::features::vlan_fix_features`]), the tag pushed on
//! transmit (in the data; the lower's validate step sees it, 6.2 steps 4-5)
//! and popped on receive.

use serde::{Deserialize, Serialize};

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
