//! Bridge (offload-rules 6.5): MAC learning with ageing, flooding of
//! broadcast/multicast/unknown destinations, and 802.1Q VLAN filtering with
//! tagged and untagged members (`bridge vlan add ... pvid untagged`).
//! Features: the common set over the ports
//! ([`super::features::compute_master_features`]).

use super::DeviceId;
use std::collections::HashMap;
use superpacket::wire::MacAddr;

/// VLAN membership of one bridge port (or of the bridge itself).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortVlans {
    /// VLAN for untagged ingress frames.
    pub pvid: Option<u16>,
    /// Member VLANs: `(vid, untagged on egress)`.
    pub vlans: Vec<(u16, bool)>,
}

impl PortVlans {
    /// Member of `vid`? Returns its egress-untagged flag.
    pub fn member(&self, vid: u16) -> Option<bool> {
        self.vlans.iter().find(|(v, _)| *v == vid).map(|(_, u)| *u)
    }
    /// Linux's default: VLAN 1, pvid, untagged.
    pub fn default_vlan() -> PortVlans {
        PortVlans { pvid: Some(1), vlans: vec![(1, true)] }
    }
}

/// A forwarding database entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdbEntry {
    /// Port the address was seen on (the bridge itself for its own address).
    pub port: DeviceId,
    /// Last time seen (ns).
    pub seen_ns: u64,
}

/// A bridge's state.
#[derive(Debug, Clone)]
pub struct Bridge {
    /// VLAN filtering on.
    pub vlan_filtering: bool,
    /// Ageing time (ns); entries older than this are ignored and removed.
    pub ageing_ns: u64,
    /// Most entries in the FDB (learning stops when full).
    pub max_entries: usize,
    /// The FDB, keyed by (address, vid); vid is 0 without filtering.
    pub fdb: HashMap<(MacAddr, u16), FdbEntry>,
    /// Per-port VLAN membership.
    pub ports: Vec<(DeviceId, PortVlans)>,
    /// The bridge device's own membership (frames to/from the host).
    pub self_vlans: PortVlans,
}

/// Linux's default ageing time, 300 s.
pub const DEFAULT_AGEING_NS: u64 = 300_000_000_000;

impl Bridge {
    /// A bridge without ports.
    pub fn new(vlan_filtering: bool) -> Bridge {
        Bridge {
            vlan_filtering,
            ageing_ns: DEFAULT_AGEING_NS,
            max_entries: 4096,
            fdb: HashMap::new(),
            ports: Vec::new(),
            self_vlans: PortVlans::default_vlan(),
        }
    }

    /// The VLAN config of `port`.
    pub fn port_vlans(&self, port: DeviceId) -> Option<&PortVlans> {
        self.ports.iter().find(|(p, _)| *p == port).map(|(_, v)| v)
    }

    /// Learns `mac` on `port` in `vid` at `now` (a station that moved is
    /// re-learnt on its new port; when the table is full, aged-out entries
    /// make room, else the address is not learnt and frames to it flood).
    pub fn learn(&mut self, mac: MacAddr, vid: u16, port: DeviceId, now: u64) {
        if !mac.is_unicast() {
            return;
        }
        let key = (mac, vid);
        if let Some(e) = self.fdb.get_mut(&key) {
            e.port = port;
            e.seen_ns = now;
        } else {
            // A full table first drops its aged-out entries.
            if self.fdb.len() >= self.max_entries {
                self.age(now);
            }
            if self.fdb.len() < self.max_entries {
                self.fdb.insert(key, FdbEntry { port, seen_ns: now });
            }
        }
    }

    /// The port for `mac` in `vid`, if learnt and not aged out.
    pub fn lookup(&self, mac: MacAddr, vid: u16, now: u64) -> Option<DeviceId> {
        self.fdb.get(&(mac, vid)).filter(|e| now.saturating_sub(e.seen_ns) < self.ageing_ns).map(|e| e.port)
    }

    /// Removes aged-out entries; returns how many.
    pub fn age(&mut self, now: u64) -> usize {
        let before = self.fdb.len();
        let ageing = self.ageing_ns;
        self.fdb.retain(|_, e| now.saturating_sub(e.seen_ns) < ageing);
        before - self.fdb.len()
    }
}
