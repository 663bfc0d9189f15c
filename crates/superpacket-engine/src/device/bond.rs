//! Bonding (offload-rules 6.5): active-backup with link failover and
//! balance-xor with layer2 or layer3+4 transmit hashing. Features come from
//! [`super::features::compute_master_features`]; the slave is chosen per
//! packet by [`super::Graph`], which keeps a flow on one slave while the set
//! of usable slaves does not change (per-flow order).

use super::DeviceId;
use serde::{Deserialize, Serialize};

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
