//! Bonding (offload-rules 6.5): active-backup with link failover and
//! balance-xor with layer2 or layer3+4 transmit hashing. Features come from
//! [`super::features::compute_master_features`]; the slave is chosen per
//! packet by [`super::Graph`], which keeps a flow on one slave while the set
//! of usable slaves does not change (per-flow order).

use super::DeviceId;
use super::features::{DeviceFeatures, NetdevFeatures, StackMode, compute_master_features};
use super::graph::Device;
use super::netdev::{Cx, NetDevice, Verdict};
use serde::{Deserialize, Serialize};
use std::any::Any;
use superpacket::packet::Packet;

/// Bonding mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BondMode {
    /// One active slave; another takes over when its carrier goes down.
    ActiveBackup,
    /// Slave = hash of the frame modulo the usable slaves.
    BalanceXor,
}

/// `xmit_hash_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HashPolicy {
    /// MAC addresses and EtherType.
    #[default]
    #[serde(rename = "layer2")]
    Layer2,
    /// IP addresses and TCP/UDP ports (MACs for non-IP).
    #[serde(rename = "layer3+4")]
    Layer34,
}

/// A bond's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bond {
    /// Mode.
    pub mode: BondMode,
    /// Hash policy (balance-xor).
    pub hash: HashPolicy,
    /// Current active slave (active-backup).
    pub active: Option<DeviceId>,
    /// Failovers so far.
    pub failovers: u64,
    /// Preferred slave (`primary`): active whenever its carrier is up.
    pub primary: Option<DeviceId>,
}

impl Bond {
    /// A bond without slaves.
    pub fn new(mode: BondMode, hash: HashPolicy) -> Bond {
        Bond { mode, hash, active: None, failovers: 0, primary: None }
    }
}

/// Skips VLAN tags: the offset of the EtherType field and its value (the
/// last TPID if the frame ends inside its tag stack, 0 without a type field).
fn ethertype(frame: &[u8]) -> (usize, u16) {
    let walk = superpacket::wire::ethernet::walk_tags(frame, 12);
    (walk.type_offset, walk.ethertype.0)
}

/// Linux `bond_xmit_hash` layer2: last MAC bytes XOR EtherType.
pub fn hash_layer2(frame: &[u8]) -> u32 {
    use superpacket::wire::ethernet::{ETHERNET_HEADER_LEN, EthernetFrame, MacAddr};
    if frame.len() < ETHERNET_HEADER_LEN {
        return 0;
    }
    let (_, et) = ethertype(frame);
    // 14 bytes are there: the addresses are in range.
    let eth = EthernetFrame::new_unchecked(frame);
    let low4 = |mac: MacAddr| {
        let [_, _, rest @ ..] = mac.octets();
        u32::from_be_bytes(rest)
    };
    let h = low4(eth.dst_addr()) ^ low4(eth.src_addr()) ^ u32::from(et);
    h ^ (h >> 16) ^ (h >> 8)
}

/// Linux `bond_xmit_hash` layer3+4: addresses XOR ports, folded; falls back
/// to layer2 for non-IP frames. Fragments hash without ports.
///
/// Only the fixed IP header must be there: version, IHL and lengths are not
/// validated (a frame that lies about them hashes as it always did), and the
/// ports count when their 4 bytes are present.
pub fn hash_layer34(frame: &[u8]) -> u32 {
    use superpacket::wire::ip::transport_ports;
    use superpacket::wire::ipv4::IPV4_HEADER_LEN;
    use superpacket::wire::ipv6::IPV6_HEADER_LEN;
    use superpacket::wire::{EtherType, IpProtocol, Ipv4Packet, Ipv6Packet};
    let (off, et) = ethertype(frame);
    let ip = frame.get(off + 2..).unwrap_or_default();
    let (mut h, l4, proto) = match EtherType(et) {
        EtherType::IPV4 if ip.len() >= IPV4_HEADER_LEN => {
            // The fixed header is there: the view's accessors are in range.
            let v4 = Ipv4Packet::new_unchecked(ip);
            let addrs = u32::from_be_bytes(v4.src_bytes()) ^ u32::from_be_bytes(v4.dst_bytes());
            (addrs, (!v4.is_fragment()).then_some(v4.header_len()), v4.protocol())
        }
        EtherType::IPV6 if ip.len() >= IPV6_HEADER_LEN => {
            let v6 = Ipv6Packet::new_unchecked(ip);
            // The XOR of the eight address words: fold the XOR of the two addresses.
            let x = u128::from_be_bytes(v6.src_bytes()) ^ u128::from_be_bytes(v6.dst_bytes());
            let h = (x >> 96) as u32 ^ (x >> 64) as u32 ^ (x >> 32) as u32 ^ x as u32;
            (h, Some(IPV6_HEADER_LEN), v6.next_header())
        }
        _ => return hash_layer2(frame),
    };
    if let Some(l4) = l4
        && matches!(proto, IpProtocol::TCP | IpProtocol::UDP)
        && let Some((src, dst)) = ip.get(l4..).and_then(transport_ports)
    {
        h ^= u32::from(src) << 16 | u32::from(dst);
    }
    h ^= h >> 16;
    h ^= h >> 8;
    h >> 1
}

/// The hash of `frame` under `policy`.
pub fn hash(policy: HashPolicy, frame: &[u8]) -> u32 {
    match policy {
        HashPolicy::Layer2 => hash_layer2(frame),
        HashPolicy::Layer34 => hash_layer34(frame),
    }
}

/// Lowers of `me` whose carrier is up, in enslavement order.
pub(crate) fn usable_lowers<'a>(me: DeviceId, devices: &'a [Device]) -> impl Iterator<Item = DeviceId> + 'a {
    devices[me.0].lowers.iter().copied().filter(|l| devices[l.0].carrier)
}

/// The `n`th usable lower of `me` modulo their number (`None` if none).
pub(crate) fn nth_usable(me: DeviceId, devices: &[Device], n: usize) -> Option<DeviceId> {
    let lowers = &devices[me.0].lowers;
    let usable = usable_lowers(me, devices).count();
    match usable {
        0 => None,
        // Every slave up (the usual case): index directly.
        u if u == lowers.len() => lowers.get(n % u).copied(),
        u => usable_lowers(me, devices).nth(n % u),
    }
}

/// Active-backup selection for a bond or team `me` (Linux's
/// `bond_select_active_slave`): keeps the active slave while its carrier is
/// up and no usable `primary` differs from it, else takes `primary` or the
/// first usable slave; a change from one slave to another is a failover.
pub(crate) fn reselect_active(
    me: DeviceId,
    devices: &[Device],
    active: &mut Option<DeviceId>,
    failovers: &mut u64,
    primary: Option<DeviceId>,
) {
    let mine = |d: DeviceId| devices[d.0].carrier && devices[d.0].master == Some(me);
    let primary = primary.filter(|p| mine(*p));
    let keep = active.is_some_and(mine);
    if keep && (primary.is_none() || primary == *active) {
        return;
    }
    let next = primary.or_else(|| usable_lowers(me, devices).next());
    if active.is_some() && next.is_some() && *active != next {
        *failovers += 1;
    }
    *active = next;
}

/// What a bond or team does with a frame slave `from` received: an
/// inactive slave's frames are dropped (counted on the slave, as Linux
/// counts them on the device that received them), others climb to the master.
pub(crate) fn receive_on_slave(active_backup: Option<Option<DeviceId>>, from: DeviceId, len: usize) -> Verdict {
    match active_backup {
        Some(active) if active != Some(from) => Verdict::Dropped { on: from, reason: "inactive-slave" },
        _ => Verdict::Up(len),
    }
}

/// A bond's or team's features (6.5): the common set over its slaves, VLAN
/// insertion always on for a bond.
pub(crate) fn master_features(
    own: &DeviceFeatures,
    lowers: &[DeviceFeatures],
    mode: StackMode,
    always: NetdevFeatures,
) -> DeviceFeatures {
    let mut f = compute_master_features(own.wanted, lowers, mode);
    f.hw_features = own.hw_features;
    f.wanted = own.wanted;
    f.features = f.features | always;
    f
}

/// Sends `pkt` to `slave`, or drops it as `no-slave`.
pub(crate) fn to_slave(cx: &mut Cx<'_>, slave: Option<DeviceId>, len: usize) -> Verdict {
    match slave {
        Some(s) => Verdict::Transmit(s, len),
        None => cx.drop("no-slave"),
    }
}

impl NetDevice for Bond {
    fn kind(&self) -> &'static str {
        "bond"
    }

    /// Active-backup: the active slave; balance-xor: the slave the hash
    /// picks among the usable ones (a flow stays on one slave while the set
    /// does not change).
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let slave = match self.mode {
            BondMode::ActiveBackup => self.active,
            BondMode::BalanceXor => {
                let h = hash(self.hash, pkt.linear()) as usize;
                nth_usable(cx.me(), cx.devices(), h)
            }
        };
        to_slave(cx, slave, len)
    }

    fn receive(&mut self, _cx: &mut Cx<'_>, from: DeviceId, _pkt: &mut Packet, len: usize) -> Verdict {
        receive_on_slave((self.mode == BondMode::ActiveBackup).then_some(self.active), from, len)
    }

    fn default_features(&self, mode: StackMode) -> Option<NetdevFeatures> {
        Some(master_wanted(mode))
    }

    fn compute_features(&self, own: &DeviceFeatures, lowers: &[DeviceFeatures], mode: StackMode) -> DeviceFeatures {
        master_features(own, lowers, mode, NetdevFeatures::VLAN_TX)
    }

    fn is_master(&self) -> bool {
        true
    }

    fn lowers_changed(&mut self, me: DeviceId, devices: &[Device]) {
        reselect_active(me, devices, &mut self.active, &mut self.failovers, self.primary);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Requested features of a new bond or team (6.5: BOND_VLAN_FEATURES +
/// VLAN insertion + the soft features).
pub fn master_wanted(mode: StackMode) -> NetdevFeatures {
    type F = NetdevFeatures;
    F::HW_CSUM
        | F::SG
        | F::FRAGLIST
        | F::gso_software(mode)
        | F::GSO_ENCAP_ALL
        | F::HIGHDMA
        | F::SOFT_FEATURES
        | F::VLAN_TX
        | F::LLTX
}
