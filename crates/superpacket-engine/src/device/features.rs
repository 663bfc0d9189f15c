//! Netdev features: the Linux `NETIF_F_*` bitset, the consistency rules
//! (offload-rules 6.1), upper-device computation (6.4 VLAN, 6.5
//! bond/team/bridge), per-packet effective features (6.2) and the mapping of
//! a port's effective features onto the segmenter's [`TargetCaps`] (3.1).
//!
//! Bit positions are this crate's own; names are Linux's (`ethtool -k`).

use std::fmt;
use superpacket::offload::gso::{CsumCaps, GSO_MAX_SEGS, TargetCaps};
use superpacket::packet::{ChecksumState, GsoType, Packet};

/// Which kernel generation the device layer imitates (offload-rules 9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StackMode {
    /// Current kernels: `GSO_SOFTWARE` includes UDP_L4 and FRAGLIST, only
    /// the final port's validate step segments (6.3), the QinQ rule is a
    /// per-device `features_check` hook (6.2 step 5).
    #[default]
    Passthrough,
    /// Old kernels: `GSO_SOFTWARE` = ALL_TSO (+SCTP); every device runs the
    /// validate step, so the first device lacking a GSO type segments in
    /// software; multi-tagged packets lose all segmentation offloads in the
    /// core (`vlan_features_check` applied whatever the device says).
    Legacy,
}

/// A set of netdev features (Linux `netdev_features_t`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NetdevFeatures(u64);

macro_rules! features {
    ($( $(#[$doc:meta])* $name:ident = $bit:expr, $eth:literal; )*) => {
        impl NetdevFeatures {
            $( $(#[$doc])* pub const $name: NetdevFeatures = NetdevFeatures(1 << $bit); )*
            /// Every feature with its `ethtool -k` name.
            pub const NAMES: &'static [(NetdevFeatures, &'static str)] = &[$( (NetdevFeatures::$name, $eth), )*];
        }
    };
}

features! {
    /// `NETIF_F_SG`: scatter-gather.
    SG = 0, "tx-scatter-gather";
    /// `NETIF_F_IP_CSUM`: TCP/UDP over IPv4 checksum.
    IP_CSUM = 1, "tx-checksum-ipv4";
    /// `NETIF_F_HW_CSUM`: generic checksum (any start/offset).
    HW_CSUM = 2, "tx-checksum-ip-generic";
    /// `NETIF_F_IPV6_CSUM`: TCP/UDP over IPv6 checksum.
    IPV6_CSUM = 3, "tx-checksum-ipv6";
    /// `NETIF_F_HIGHDMA`.
    HIGHDMA = 4, "highdma";
    /// `NETIF_F_FRAGLIST`: takes packets with a frag list.
    FRAGLIST = 5, "tx-scatter-gather-fraglist";
    /// `NETIF_F_HW_VLAN_CTAG_TX`: inserts 802.1Q tags.
    HW_VLAN_CTAG_TX = 6, "tx-vlan-hw-insert";
    /// `NETIF_F_HW_VLAN_CTAG_RX`.
    HW_VLAN_CTAG_RX = 7, "rx-vlan-hw-parse";
    /// `NETIF_F_HW_VLAN_CTAG_FILTER`.
    HW_VLAN_CTAG_FILTER = 8, "rx-vlan-filter";
    /// `NETIF_F_HW_VLAN_STAG_TX`: inserts 802.1ad tags.
    HW_VLAN_STAG_TX = 9, "tx-vlan-stag-hw-insert";
    /// `NETIF_F_HW_VLAN_STAG_RX`.
    HW_VLAN_STAG_RX = 10, "rx-vlan-stag-hw-parse";
    /// `NETIF_F_VLAN_CHALLENGED`.
    VLAN_CHALLENGED = 11, "vlan-challenged";
    /// `NETIF_F_GSO`: generic segmentation.
    GSO = 12, "tx-generic-segmentation";
    /// `NETIF_F_LLTX`: lockless transmit.
    LLTX = 13, "tx-lockless";
    /// `NETIF_F_GRO`.
    GRO = 14, "rx-gro";
    /// `NETIF_F_LRO`.
    LRO = 15, "large-receive-offload";
    /// `NETIF_F_TSO`: TCP/IPv4 segmentation.
    TSO = 16, "tx-tcp-segmentation";
    /// `NETIF_F_GSO_ROBUST`: takes DODGY packets.
    GSO_ROBUST = 17, "tx-gso-robust";
    /// `NETIF_F_TSO_ECN`.
    TSO_ECN = 18, "tx-tcp-ecn-segmentation";
    /// `NETIF_F_TSO_MANGLEID`: may rewrite fixed IPv4 IDs.
    TSO_MANGLEID = 19, "tx-tcp-mangleid-segmentation";
    /// `NETIF_F_TSO6`: TCP/IPv6 segmentation.
    TSO6 = 20, "tx-tcp6-segmentation";
    /// `NETIF_F_FSO`.
    FSO = 21, "tx-fcoe-segmentation";
    /// `NETIF_F_GSO_GRE`.
    GSO_GRE = 22, "tx-gre-segmentation";
    /// `NETIF_F_GSO_GRE_CSUM`.
    GSO_GRE_CSUM = 23, "tx-gre-csum-segmentation";
    /// `NETIF_F_GSO_IPXIP4`.
    GSO_IPXIP4 = 24, "tx-ipxip4-segmentation";
    /// `NETIF_F_GSO_IPXIP6`.
    GSO_IPXIP6 = 25, "tx-ipxip6-segmentation";
    /// `NETIF_F_GSO_UDP_TUNNEL`.
    GSO_UDP_TUNNEL = 26, "tx-udp_tnl-segmentation";
    /// `NETIF_F_GSO_UDP_TUNNEL_CSUM`.
    GSO_UDP_TUNNEL_CSUM = 27, "tx-udp_tnl-csum-segmentation";
    /// `NETIF_F_GSO_PARTIAL`.
    GSO_PARTIAL = 28, "tx-gso-partial";
    /// `NETIF_F_GSO_SCTP`.
    GSO_SCTP = 29, "tx-sctp-segmentation";
    /// `NETIF_F_GSO_ESP`.
    GSO_ESP = 30, "tx-esp-segmentation";
    /// `NETIF_F_GSO_UDP_L4`: UDP segmentation (USO).
    GSO_UDP_L4 = 31, "tx-udp-segmentation";
    /// `NETIF_F_GSO_FRAGLIST`: takes fraglist GSO packets.
    GSO_FRAGLIST = 32, "tx-gso-list";
    /// `NETIF_F_GSO_ACCECN`.
    GSO_ACCECN = 33, "tx-tcp-accecn-segmentation";
    /// `NETIF_F_FCOE_CRC`.
    FCOE_CRC = 34, "tx-checksum-fcoe-crc";
    /// `NETIF_F_SCTP_CRC`.
    SCTP_CRC = 35, "tx-checksum-sctp";
    /// `NETIF_F_FCOE_MTU`.
    FCOE_MTU = 36, "fcoe-mtu";
    /// `NETIF_F_RXCSUM`.
    RXCSUM = 37, "rx-checksum";
    /// `NETIF_F_NOCACHE_COPY`.
    NOCACHE_COPY = 38, "tx-nocache-copy";
    /// `NETIF_F_RXFCS`.
    RXFCS = 39, "rx-fcs";
    /// `NETIF_F_GRO_HW`.
    GRO_HW = 40, "rx-gro-hw";
    /// `NETIF_F_GRO_FRAGLIST`.
    GRO_FRAGLIST = 41, "rx-gro-list";
    /// `NETIF_F_GRO_UDP_FWD`.
    GRO_UDP_FWD = 42, "rx-udp-gro-forwarding";
    /// `NETIF_F_HW_MACSEC`.
    HW_MACSEC = 43, "macsec-hw-offload";
    /// `NETIF_F_HW_ESP`.
    HW_ESP = 44, "esp-hw-offload";
    /// `NETIF_F_HW_ESP_TX_CSUM`.
    HW_ESP_TX_CSUM = 45, "esp-tx-csum-hw-offload";
    /// `NETIF_F_RXHASH`.
    RXHASH = 46, "receive-hashing";
}

impl NetdevFeatures {
    /// No feature.
    pub const EMPTY: NetdevFeatures = NetdevFeatures(0);
    /// `NETIF_F_CSUM_MASK`.
    pub const CSUM_MASK: NetdevFeatures = NetdevFeatures(Self::IP_CSUM.0 | Self::IPV6_CSUM.0 | Self::HW_CSUM.0);
    /// `NETIF_F_ALL_TSO`.
    pub const ALL_TSO: NetdevFeatures =
        NetdevFeatures(Self::TSO.0 | Self::TSO6.0 | Self::TSO_ECN.0 | Self::TSO_MANGLEID.0);
    /// `NETIF_F_GSO_SOFTWARE` of current kernels (6.1).
    pub const GSO_SOFTWARE: NetdevFeatures = NetdevFeatures(
        Self::ALL_TSO.0 | Self::GSO_ACCECN.0 | Self::GSO_SCTP.0 | Self::GSO_UDP_L4.0 | Self::GSO_FRAGLIST.0,
    );
    /// `NETIF_F_GSO_SOFTWARE` of old kernels (9.2): ALL_TSO + SCTP.
    pub const GSO_SOFTWARE_LEGACY: NetdevFeatures = NetdevFeatures(Self::ALL_TSO.0 | Self::GSO_SCTP.0);
    /// `NETIF_F_GSO_ENCAP_ALL`.
    pub const GSO_ENCAP_ALL: NetdevFeatures = NetdevFeatures(
        Self::GSO_GRE.0
            | Self::GSO_GRE_CSUM.0
            | Self::GSO_IPXIP4.0
            | Self::GSO_IPXIP6.0
            | Self::GSO_UDP_TUNNEL.0
            | Self::GSO_UDP_TUNNEL_CSUM.0,
    );
    /// `NETIF_F_GSO_MASK`: every GSO feature bit.
    pub const GSO_MASK: NetdevFeatures = NetdevFeatures(
        Self::GSO_SOFTWARE.0
            | Self::GSO_ROBUST.0
            | Self::FSO.0
            | Self::GSO_ENCAP_ALL.0
            | Self::GSO_PARTIAL.0
            | Self::GSO_ESP.0,
    );
    /// `NETIF_F_ONE_FOR_ALL` of current kernels ("if any lower has it").
    pub const ONE_FOR_ALL: NetdevFeatures = NetdevFeatures(
        Self::GSO_SOFTWARE.0
            | Self::GSO_ROBUST.0
            | Self::SG.0
            | Self::HIGHDMA.0
            | Self::FRAGLIST.0
            | Self::VLAN_CHALLENGED.0,
    );
    /// `NETIF_F_ALL_FOR_ALL` ("only if every lower has it").
    pub const ALL_FOR_ALL: NetdevFeatures = NetdevFeatures(Self::NOCACHE_COPY.0 | Self::FSO.0);
    /// `NETIF_F_SOFT_FEATURES` (always-on defaults).
    pub const SOFT_FEATURES: NetdevFeatures = NetdevFeatures(Self::GSO.0 | Self::GRO.0);
    /// All FCoE features.
    pub const ALL_FCOE: NetdevFeatures = NetdevFeatures(Self::FCOE_CRC.0 | Self::FCOE_MTU.0 | Self::FSO.0);
    /// VLAN tag insertion, both kinds.
    pub const VLAN_TX: NetdevFeatures = NetdevFeatures(Self::HW_VLAN_CTAG_TX.0 | Self::HW_VLAN_STAG_TX.0);
    /// What `vlan_features_check` keeps for a multi-tagged packet (6.2 step 5).
    pub const MULTI_TAG_KEEP: NetdevFeatures =
        NetdevFeatures(Self::SG.0 | Self::HIGHDMA.0 | Self::HW_CSUM.0 | Self::FRAGLIST.0 | Self::VLAN_TX.0);
    /// `MASTER_UPPER_DEV_VLAN_FEATURES` (6.5).
    pub const MASTER_UPPER_VLAN_MASK: NetdevFeatures = NetdevFeatures(
        Self::HW_CSUM.0
            | Self::SG.0
            | Self::FRAGLIST.0
            | Self::GSO_SOFTWARE.0
            | Self::GSO_ENCAP_ALL.0
            | Self::HIGHDMA.0
            | Self::LRO.0,
    );
    /// What a full-featured in-memory NIC offers: SG, generic checksum, every
    /// TSO/USO/fraglist type, frag lists, VLAN insertion, receive offloads.
    pub const FULL_NIC: NetdevFeatures = NetdevFeatures(
        Self::SG.0
            | Self::HW_CSUM.0
            | Self::HIGHDMA.0
            | Self::FRAGLIST.0
            | Self::VLAN_TX.0
            | Self::HW_VLAN_CTAG_RX.0
            | Self::HW_VLAN_STAG_RX.0
            | Self::GSO.0
            | Self::GRO.0
            | Self::GSO_SOFTWARE.0
            | Self::RXCSUM.0,
    );

    /// Raw bits.
    pub const fn bits(self) -> u64 {
        self.0
    }
    /// From raw bits.
    pub const fn from_bits(bits: u64) -> NetdevFeatures {
        NetdevFeatures(bits)
    }
    /// Every bit of `o` set.
    pub const fn contains(self, o: NetdevFeatures) -> bool {
        self.0 & o.0 == o.0
    }
    /// Any bit of `o` set.
    pub const fn intersects(self, o: NetdevFeatures) -> bool {
        self.0 & o.0 != 0
    }
    /// Union.
    pub const fn union(self, o: NetdevFeatures) -> NetdevFeatures {
        NetdevFeatures(self.0 | o.0)
    }
    /// Intersection.
    pub const fn and(self, o: NetdevFeatures) -> NetdevFeatures {
        NetdevFeatures(self.0 & o.0)
    }
    /// Difference.
    pub const fn without(self, o: NetdevFeatures) -> NetdevFeatures {
        NetdevFeatures(self.0 & !o.0)
    }
    /// No bit set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Sets or clears `o`.
    pub fn set(&mut self, o: NetdevFeatures, on: bool) {
        *self = if on { self.union(o) } else { self.without(o) };
    }

    /// The feature with this `ethtool -k` name, or one of the short aliases
    /// `sg`, `ip-csum`, `ipv6-csum`, `hw-csum`, `fraglist`, `tso`, `tso6`,
    /// `tso-ecn`, `tso-mangleid`, `gso-udp-l4`, `gso-fraglist`, `gso-robust`,
    /// `gso`, `gro`, `lro`, `rx-csum`, `vlan-ctag-tx`, `vlan-stag-tx`.
    pub fn from_name(name: &str) -> Option<NetdevFeatures> {
        let alias = match name {
            "sg" => Some(Self::SG),
            "ip-csum" => Some(Self::IP_CSUM),
            "ipv6-csum" => Some(Self::IPV6_CSUM),
            "hw-csum" => Some(Self::HW_CSUM),
            "fraglist" => Some(Self::FRAGLIST),
            "tso" => Some(Self::TSO),
            "tso6" => Some(Self::TSO6),
            "tso-ecn" => Some(Self::TSO_ECN),
            "tso-mangleid" => Some(Self::TSO_MANGLEID),
            "gso-udp-l4" | "uso" => Some(Self::GSO_UDP_L4),
            "gso-fraglist" => Some(Self::GSO_FRAGLIST),
            "gso-robust" => Some(Self::GSO_ROBUST),
            "gso" => Some(Self::GSO),
            "gro" => Some(Self::GRO),
            "lro" => Some(Self::LRO),
            "rx-csum" => Some(Self::RXCSUM),
            "vlan-ctag-tx" => Some(Self::HW_VLAN_CTAG_TX),
            "vlan-stag-tx" => Some(Self::HW_VLAN_STAG_TX),
            _ => None,
        };
        alias.or_else(|| Self::NAMES.iter().find(|(_, n)| *n == name).map(|(f, _)| *f))
    }

    /// The `GSO_SOFTWARE` group for `mode`.
    pub const fn gso_software(mode: StackMode) -> NetdevFeatures {
        match mode {
            StackMode::Passthrough => Self::GSO_SOFTWARE,
            StackMode::Legacy => Self::GSO_SOFTWARE_LEGACY,
        }
    }
}

impl std::ops::BitOr for NetdevFeatures {
    type Output = NetdevFeatures;
    fn bitor(self, o: NetdevFeatures) -> NetdevFeatures {
        self.union(o)
    }
}

impl std::ops::BitAnd for NetdevFeatures {
    type Output = NetdevFeatures;
    fn bitand(self, o: NetdevFeatures) -> NetdevFeatures {
        self.and(o)
    }
}

impl std::ops::Not for NetdevFeatures {
    type Output = NetdevFeatures;
    fn not(self) -> NetdevFeatures {
        NetdevFeatures(!self.0)
    }
}

impl fmt::Debug for NetdevFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for NetdevFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let mut first = true;
        for (flag, name) in Self::NAMES {
            if self.contains(*flag) {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// `netdev_fix_features` (offload-rules 6.1): the consistency rules applied
/// on every feature update.
pub fn fix_features(mut f: NetdevFeatures) -> NetdevFeatures {
    type F = NetdevFeatures;
    if f.contains(F::HW_CSUM) {
        f = f.without(F::IP_CSUM | F::IPV6_CSUM);
    }
    if f.intersects(F::ALL_TSO) && !f.contains(F::SG) {
        f = f.without(F::ALL_TSO);
    }
    if f.contains(F::TSO) && !f.intersects(F::HW_CSUM | F::IP_CSUM) {
        f = f.without(F::TSO | F::TSO_ECN);
    }
    if f.contains(F::TSO6) && !f.intersects(F::HW_CSUM | F::IPV6_CSUM) {
        f = f.without(F::TSO6);
    }
    if f.contains(F::TSO_MANGLEID) && !f.contains(F::TSO) {
        f = f.without(F::TSO_MANGLEID);
    }
    if f.contains(F::TSO_ECN) && !f.intersects(F::TSO | F::TSO6) {
        f = f.without(F::TSO_ECN);
    }
    if f.contains(F::GSO) && !f.contains(F::SG) {
        f = f.without(F::GSO);
    }
    if f.contains(F::LRO) && f.contains(F::GRO_HW) {
        f = f.without(F::LRO);
    }
    if f.contains(F::GRO_HW) && (!f.contains(F::RXCSUM) || f.contains(F::RXFCS)) {
        f = f.without(F::GRO_HW);
    }
    if f.contains(F::LRO) && f.contains(F::RXFCS) {
        f = f.without(F::LRO);
    }
    f
}

/// `netdev_increment_features` (6.5): add `one` (a lower's features) to
/// `all` under `mask`: ONE_FOR_ALL and checksum bits are a union, ALL_FOR_ALL
/// an intersection, HW_CSUM wins over IP/IPV6_CSUM.
pub fn increment_features(all: NetdevFeatures, one: NetdevFeatures, mask: NetdevFeatures) -> NetdevFeatures {
    type F = NetdevFeatures;
    let mut mask = mask;
    if mask.contains(F::HW_CSUM) {
        mask = mask | F::CSUM_MASK;
    }
    mask = mask | F::VLAN_CHALLENGED;
    let mut all = all | (one & (F::ONE_FOR_ALL | F::CSUM_MASK) & mask);
    all = all & (one | !F::ALL_FOR_ALL);
    if all.contains(F::HW_CSUM) {
        all = all.without(F::IP_CSUM | F::IPV6_CSUM);
    }
    all
}

/// `netdev_base_features`: the requested set with ONE_FOR_ALL removed and
/// ALL_FOR_ALL added, the starting point of [`increment_features`].
pub fn base_features(f: NetdevFeatures) -> NetdevFeatures {
    f.without(NetdevFeatures::ONE_FOR_ALL) | NetdevFeatures::ALL_FOR_ALL
}

/// `netdev_add_tso_features`: TSO is always offered on a master (6.5).
pub fn add_tso_features(f: NetdevFeatures, mask: NetdevFeatures) -> NetdevFeatures {
    increment_features(f, NetdevFeatures::ALL_TSO | NetdevFeatures::ALL_FOR_ALL, mask)
}

/// `netdev_intersect_features`: intersection where HW_CSUM implies IP/IPV6_CSUM.
pub fn intersect_features(mut a: NetdevFeatures, mut b: NetdevFeatures) -> NetdevFeatures {
    type F = NetdevFeatures;
    if (a.0 ^ b.0) & F::HW_CSUM.0 != 0 {
        if a.contains(F::HW_CSUM) {
            a = a | F::IP_CSUM | F::IPV6_CSUM;
        } else {
            b = b | F::IP_CSUM | F::IPV6_CSUM;
        }
    }
    a & b
}

/// Features and limits of one device (offload-rules 6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceFeatures {
    /// Currently active (`features`).
    pub features: NetdevFeatures,
    /// User-changeable (`hw_features`).
    pub hw_features: NetdevFeatures,
    /// What the user asked for (`wanted_features`).
    pub wanted: NetdevFeatures,
    /// What a VLAN device on top may inherit, and what applies to tagged
    /// packets sent through this device (`vlan_features`).
    pub vlan_features: NetdevFeatures,
    /// `gso_partial_features`.
    pub gso_partial_features: NetdevFeatures,
    /// `gso_max_size` (bytes; a packet of this length or more is not offloaded, 6.2 step 2).
    pub gso_max_size: usize,
    /// `gso_max_segs`.
    pub gso_max_segs: u16,
}

impl DeviceFeatures {
    /// A device whose hardware offers `hw` (all wanted and active after
    /// [`fix_features`]) and carries all of it for VLAN uppers.
    pub fn new(hw: NetdevFeatures) -> DeviceFeatures {
        let features = fix_features(hw);
        DeviceFeatures {
            features,
            hw_features: hw,
            wanted: hw,
            vlan_features: features | NetdevFeatures::HIGHDMA,
            gso_partial_features: NetdevFeatures::EMPTY,
            gso_max_size: superpacket::offload::gso::GSO_LEGACY_MAX_SIZE,
            gso_max_segs: GSO_MAX_SEGS,
        }
    }
}

impl Default for DeviceFeatures {
    fn default() -> Self {
        DeviceFeatures::new(NetdevFeatures::EMPTY)
    }
}

/// 6.4 `vlan_dev_fix_features`: requested ∩ (lower.vlan_features + RXCSUM) ∩
/// lower.features (HW_CSUM added when the lower has IP/IPV6_CSUM), then
/// the requested SOFT_FEATURES and `GSO_SOFTWARE` (of `mode`) put back, plus LLTX.
pub fn vlan_fix_features(requested: NetdevFeatures, lower: &DeviceFeatures, mode: StackMode) -> NetdevFeatures {
    type F = NetdevFeatures;
    let mut lower_f = intersect_features(lower.vlan_features | F::RXCSUM, lower.features);
    if lower_f.intersects(F::IP_CSUM | F::IPV6_CSUM) {
        lower_f = lower_f | F::HW_CSUM;
    }
    let mut f = intersect_features(requested, lower_f);
    f = f | (requested & (F::SOFT_FEATURES | F::gso_software(mode)));
    f | F::LLTX
}

/// The `hw_features` of a new VLAN device (6.4).
pub fn vlan_hw_features(mode: StackMode) -> NetdevFeatures {
    type F = NetdevFeatures;
    F::HW_CSUM
        | F::SG
        | F::FRAGLIST
        | F::gso_software(mode)
        | F::GSO_ENCAP_ALL
        | F::HIGHDMA
        | F::SCTP_CRC
        | F::ALL_FCOE
        | F::SOFT_FEATURES
}

/// Features of a master (bond, team, bridge) from its lowers (6.5
/// `bond_fix_features` / `br_features_recompute` +
/// `netdev_compute_master_upper_features`): `features` from `requested`
/// incremented over every lower plus TSO; `vlan_features` over the lowers'
/// vlan_features with the master mask; limits the minimum over lowers.
/// Without lowers the requested set is kept.
pub fn compute_master_features(
    requested: NetdevFeatures,
    lowers: &[DeviceFeatures],
    mode: StackMode,
) -> DeviceFeatures {
    type F = NetdevFeatures;
    let sw = F::gso_software(mode);
    let vlan_mask = F::MASTER_UPPER_VLAN_MASK.without(F::GSO_SOFTWARE) | sw;
    let mut out = DeviceFeatures::new(requested);
    if lowers.is_empty() {
        out.vlan_features = requested & vlan_mask;
        return out;
    }
    let mut f = base_features(requested);
    let mut vf = base_features(vlan_mask);
    let mut max_size = usize::MAX;
    let mut max_segs = u16::MAX;
    for l in lowers {
        f = increment_features(f, l.features, requested);
        vf = increment_features(vf, l.vlan_features, vlan_mask);
        max_size = max_size.min(l.gso_max_size);
        max_segs = max_segs.min(l.gso_max_segs);
    }
    f = add_tso_features(f, requested);
    out.features = fix_features(f);
    out.vlan_features = vf;
    out.gso_max_size = max_size;
    out.gso_max_segs = max_segs;
    out
}

/// L3 protocol of a packet as far as checksum features care (0.3 "can checksum protocol").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3Proto {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// Anything else (ARP, unknown).
    Other,
}

/// What 6.2 needs to know about one packet, read once from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// GSO type (empty for an ordinary packet).
    pub gso_type: GsoType,
    /// `gso_segs`.
    pub gso_segs: u16,
    /// Total bytes incl. the frag list.
    pub len: usize,
    /// VLAN tags in the data.
    pub vlan_tags: u8,
    /// L3 protocol after the tags.
    pub l3: L3Proto,
    /// IPv4 DF bit (true for IPv6).
    pub dont_frag: bool,
    /// IPv6 with extension headers before TCP/UDP (IPV6_CSUM does not apply).
    pub ipv6_ext: bool,
    /// Checksum state.
    pub csum: ChecksumState,
    /// Payload lives in segments (needs SG).
    pub paged: bool,
    /// The packet has a frag list (needs FRAGLIST).
    pub has_frag_list: bool,
}

impl PacketInfo {
    /// Reads the tags, the L3 protocol and the IPv4 DF bit from the linear area.
    pub fn of(pkt: &Packet) -> PacketInfo {
        PacketInfo::of_len(pkt, pkt.total_len())
    }

    /// As [`PacketInfo::of`] with the total length already known (the
    /// graph carries it with the packet instead of walking the frag list).
    ///
    /// The DF bit and the IPv6 next header are read through the IP header
    /// views, so only when the linear area holds the fixed IP header (20 or
    /// 40 bytes; otherwise DF reads clear and no extension header is seen).
    pub fn of_len(pkt: &Packet, len: usize) -> PacketInfo {
        use superpacket::wire::ethernet::walk_tags;
        use superpacket::wire::ipv4::IPV4_HEADER_LEN;
        use superpacket::wire::ipv6::IPV6_HEADER_LEN;
        use superpacket::wire::{EtherType, IpProtocol, Ipv4Packet, Ipv6Packet};
        let b = pkt.linear();
        let walk = walk_tags(b, 12);
        // The IP header, when the linear area holds at least its fixed part.
        let ip = |fixed: usize| b.get(walk.l3_offset()..).filter(|ip| ip.len() >= fixed);
        let (l3, dont_frag, ipv6_ext) = match walk.ethertype {
            EtherType::IPV4 => {
                let df = ip(IPV4_HEADER_LEN).is_some_and(|ip| Ipv4Packet::new_unchecked(ip).dont_frag());
                (L3Proto::Ipv4, df, false)
            }
            EtherType::IPV6 => {
                let ext = ip(IPV6_HEADER_LEN).is_some_and(|ip| {
                    !matches!(Ipv6Packet::new_unchecked(ip).next_header(), IpProtocol::TCP | IpProtocol::UDP)
                });
                (L3Proto::Ipv6, true, ext)
            }
            _ => (L3Proto::Other, false, false),
        };
        PacketInfo {
            gso_type: pkt.meta.gso_type,
            gso_segs: pkt.meta.gso_segs,
            len,
            vlan_tags: saturated_tags(walk.tags),
            l3,
            dont_frag,
            ipv6_ext,
            csum: pkt.meta.csum,
            paged: !pkt.segments().is_empty(),
            has_frag_list: !pkt.frag_list().is_empty(),
        }
    }

    /// A GSO packet.
    pub fn is_gso(&self) -> bool {
        !self.gso_type.is_empty()
    }

    /// [`PacketInfo::vlan_tags`] of an Ethernet frame whose linear area is
    /// `frame`, alone (what a plain frame's MTU check needs of it).
    pub fn vlan_tags_of(frame: &[u8]) -> u8 {
        saturated_tags(superpacket::wire::ethernet::walk_tags(frame, 12).tags)
    }

    /// Whether every port takes `pkt` as it is, whatever its features
    /// ([`takes_as_is`] is true for any features): not GSO, no partial
    /// checksum, all its bytes in the linear area. Such a packet's
    /// [`PacketInfo`] and effective features need not be worked out (the
    /// 64-byte frames of a forwarding loop are all such).
    #[inline]
    pub fn taken_as_is_anywhere(pkt: &Packet) -> bool {
        !pkt.meta.is_gso() && !matches!(pkt.meta.csum, ChecksumState::Partial { .. }) && pkt.is_linear()
    }
}

/// A tag count as [`PacketInfo::vlan_tags`]: saturating, since a deeper
/// stack than 255 tags is as unoffloadable as 255.
fn saturated_tags(tags: usize) -> u8 {
    tags.min(usize::from(u8::MAX)) as u8
}

/// A per-device `ndo_features_check` hook (6.2 step 5): narrows the
/// features for one packet.
#[derive(Clone, Copy)]
pub enum FeaturesCheck {
    /// Linux's default `vlan_features_check`: a packet with more than one VLAN
    /// tag keeps only SG, HIGHDMA, HW_CSUM, FRAGLIST and VLAN insertion.
    Vlan,
    /// The device parses any tag depth: no restriction.
    Any,
    /// A custom rule.
    Custom(fn(&PacketInfo, NetdevFeatures) -> NetdevFeatures),
}

impl fmt::Debug for FeaturesCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FeaturesCheck::Vlan => "vlan",
            FeaturesCheck::Any => "any",
            FeaturesCheck::Custom(_) => "custom",
        })
    }
}

impl FeaturesCheck {
    /// Applies the hook.
    pub fn apply(&self, info: &PacketInfo, f: NetdevFeatures) -> NetdevFeatures {
        match self {
            FeaturesCheck::Vlan => vlan_features_check(info, f),
            FeaturesCheck::Any => f,
            FeaturesCheck::Custom(c) => c(info, f),
        }
    }
}

/// `vlan_features_check` (6.2 step 5).
pub fn vlan_features_check(info: &PacketInfo, f: NetdevFeatures) -> NetdevFeatures {
    if info.vlan_tags > 1 { f & NetdevFeatures::MULTI_TAG_KEEP } else { f }
}

/// Whether these features can checksum the packet's L3 protocol (0.3).
pub fn can_checksum_protocol(f: NetdevFeatures, l3: L3Proto) -> bool {
    f.contains(NetdevFeatures::HW_CSUM)
        || match l3 {
            L3Proto::Ipv4 => f.contains(NetdevFeatures::IP_CSUM),
            L3Proto::Ipv6 => f.contains(NetdevFeatures::IPV6_CSUM),
            L3Proto::Other => false,
        }
}

/// `netif_skb_features` (6.2): the effective features for `info` on a device
/// with features `dev`, its hook `check`. In [`StackMode::Legacy`] the QinQ
/// rule is applied in the core whatever the hook says.
pub fn effective_features(
    dev: &DeviceFeatures,
    info: &PacketInfo,
    check: &FeaturesCheck,
    mode: StackMode,
) -> NetdevFeatures {
    type F = NetdevFeatures;
    let mut f = dev.features;
    // Step 2: gso_features_check.
    if info.is_gso() {
        if info.gso_segs > dev.gso_max_segs || info.len >= dev.gso_max_size {
            f = f.without(F::GSO_MASK);
        }
        f = f.without(dev.gso_partial_features);
        if info.gso_type.contains(GsoType::TCPV4) && !info.dont_frag {
            f = f.without(F::TSO_MANGLEID);
        }
    }
    // Step 4: tagged packets get the vlan_features.
    if info.vlan_tags > 0 {
        f = intersect_features(f, dev.vlan_features | F::VLAN_TX);
    }
    // Step 5: the device hook (legacy: the blanket core rule).
    f = match mode {
        StackMode::Legacy => vlan_features_check(info, f),
        StackMode::Passthrough => check.apply(info, f),
    };
    // Step 6: harmonize_features.
    if !matches!(info.csum, ChecksumState::None) && !can_checksum_protocol(f, info.l3) {
        f = f.without(F::CSUM_MASK | F::GSO_MASK);
    }
    f
}

/// `skb_gso_ok` (3.1): every GSO bit of the packet maps to an enabled feature
/// and a frag-list packet needs FRAGLIST.
pub fn gso_ok(f: NetdevFeatures, info: &PacketInfo) -> bool {
    type F = NetdevFeatures;
    const MAP: [(GsoType, NetdevFeatures); 11] = [
        (GsoType::TCPV4, F::TSO),
        (GsoType::DODGY, F::GSO_ROBUST),
        (GsoType::TCP_ECN, F::TSO_ECN),
        (GsoType::TCPV6, F::TSO6),
        (GsoType::UDP_L4, F::GSO_UDP_L4),
        (GsoType::FRAGLIST, F::GSO_FRAGLIST),
        (GsoType::TCP_ACCECN, F::GSO_ACCECN),
        (GsoType::TCP_FIXEDID, F::TSO_MANGLEID),
        (GsoType::TCP_FIXEDID_INNER, F::TSO_MANGLEID),
        (GsoType::UDP_TUNNEL, F::GSO_UDP_TUNNEL),
        (GsoType::UDP_TUNNEL_CSUM, F::GSO_UDP_TUNNEL_CSUM),
    ];
    let mut rest = info.gso_type;
    for (t, feat) in MAP {
        if rest.contains(t) {
            if !f.contains(feat) {
                return false;
            }
            rest = rest.without(t);
        }
    }
    rest.is_empty() && (!info.has_frag_list || f.contains(F::FRAGLIST))
}

/// Whether a device with effective features `f` takes the packet exactly as
/// it is (3.1 steps 2 and 3 all "nothing to do"): GSO it can do itself with a
/// PARTIAL/UNNECESSARY checksum, a partial checksum it can finish, SG for a
/// paged packet, FRAGLIST for a frag list.
pub fn takes_as_is(f: NetdevFeatures, info: &PacketInfo) -> bool {
    type F = NetdevFeatures;
    if info.is_gso()
        && (!gso_ok(f, info) || !matches!(info.csum, ChecksumState::Partial { .. } | ChecksumState::Unnecessary { .. }))
    {
        return false;
    }
    if let ChecksumState::Partial { .. } = info.csum {
        let ok = f.contains(F::HW_CSUM)
            || match info.l3 {
                L3Proto::Ipv4 => f.contains(F::IP_CSUM),
                L3Proto::Ipv6 => f.contains(F::IPV6_CSUM) && !info.ipv6_ext,
                L3Proto::Other => false,
            };
        if !ok {
            return false;
        }
    }
    (!info.paged || f.contains(F::SG)) && (!info.has_frag_list || f.contains(F::FRAGLIST))
}

/// Maps effective features onto the segmenter's [`TargetCaps`] (the final
/// port's validate step, 3.1): the GSO types it does itself, checksum
/// offload, SG, frag lists, MTU and GSO limits.
pub fn target_caps(f: NetdevFeatures, dev: &DeviceFeatures, mtu: usize) -> TargetCaps {
    type F = NetdevFeatures;
    let mut gso = GsoType::NONE;
    for (feat, t) in [
        (F::TSO, GsoType::TCPV4),
        (F::TSO6, GsoType::TCPV6),
        (F::TSO_ECN, GsoType::TCP_ECN),
        (F::TSO_MANGLEID, GsoType::TCP_FIXEDID),
        (F::GSO_UDP_L4, GsoType::UDP_L4),
        (F::GSO_FRAGLIST, GsoType::FRAGLIST),
        (F::GSO_ACCECN, GsoType::TCP_ACCECN),
        (F::GSO_UDP_TUNNEL, GsoType::UDP_TUNNEL),
        (F::GSO_UDP_TUNNEL_CSUM, GsoType::UDP_TUNNEL_CSUM),
    ] {
        if f.contains(feat) {
            gso |= t;
        }
    }
    let mut caps = TargetCaps::new(mtu).with_gso(gso).with_csum(CsumCaps {
        ipv4: f.contains(F::IP_CSUM),
        ipv6: f.contains(F::IPV6_CSUM),
        hw: f.contains(F::HW_CSUM),
    });
    if f.contains(F::SG) {
        caps = caps.with_sg();
    }
    if f.contains(F::FRAGLIST) {
        caps = caps.with_fraglist();
    }
    // The device model has no `hw_enc_features`: a port with UDP tunnel GSO
    // is taken to offer all its features for inner headers too (as veth,
    // whose `hw_enc_features` are its features, does); without the tunnel
    // features tunnel superpackets are segmented in software (offload-rules 3.7).
    let tunnel_bits = GsoType::UDP_TUNNEL | GsoType::UDP_TUNNEL_CSUM;
    if gso.intersects(tunnel_bits) {
        caps = caps.with_enc(gso, caps.csum);
    }
    // GSO_PARTIAL (offload-rules 3.7): the tunnel types in the device's
    // `features & gso_partial_features` are finished by the device from a
    // chunk the segmenter leaves, as long as the effective features keep
    // GSO_PARTIAL (`gso_features_check` and `harmonize_features` strip it
    // with the other GSO features). Its inner features are the device's
    // features, as for full tunnel GSO above.
    if f.contains(F::GSO_PARTIAL) {
        let partial = dev.features & dev.gso_partial_features;
        let mut tunnel = GsoType::NONE;
        for (feat, t) in [(F::GSO_UDP_TUNNEL, GsoType::UDP_TUNNEL), (F::GSO_UDP_TUNNEL_CSUM, GsoType::UDP_TUNNEL_CSUM)]
        {
            if partial.contains(feat) {
                tunnel |= t;
            }
        }
        if !tunnel.is_empty() {
            caps = caps.with_gso_partial(tunnel);
            if !gso.intersects(tunnel_bits) {
                caps = caps.with_enc(gso, caps.csum);
            }
        }
    }
    caps.max_segs = dev.gso_max_segs;
    caps.gso_max_size = dev.gso_max_size;
    // `f` already went through the device's `features_check` hook (or, in
    // legacy mode, the core's two-tag rule), so the segmenter must not apply
    // the tag rule a second time (offload-rules 6.2 step 5 is per device).
    caps.with_max_offload_tags(u8::MAX)
}
