//! Bridge (offload-rules 6.5): MAC learning with ageing, flooding of
//! broadcast/multicast/unknown destinations, and 802.1Q VLAN filtering with
//! tagged and untagged members (`bridge vlan add ... pvid untagged`).
//! Features: the common set over the ports
//! ([`super::features::compute_master_features`]).

use super::DeviceId;
use super::features::{DeviceFeatures, NetdevFeatures, StackMode, compute_master_features};
use super::netdev::{Cx, NetDevice, Run, Verdict};
use super::vlan::outer_tag;
use std::any::Any;
use std::collections::HashMap;
use superpacket::packet::Packet;
use superpacket::wire::ethernet::VLAN_TAG_LEN;
use superpacket::wire::{EthernetFrame, MacAddr};

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

/// The FDB's map. Keyed by addresses a guest or a peer chooses, so its hash
/// is keyed per process (`ahash::RandomState`: no collision set can be
/// chosen in advance, as with std's SipHash) and about a tenth of SipHash's
/// cost on a 6-byte address: two lookups per forwarded frame (learn the
/// source, find the destination).
pub type FdbMap = HashMap<(MacAddr, u16), FdbEntry, ahash::RandomState>;

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
    pub fdb: FdbMap,
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
            fdb: FdbMap::default(),
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

/// How a bridge classified a frame: its VLAN (0 without filtering) and
/// whether the frame carries that VLAN's tag in its data.
#[derive(Debug, Clone, Copy)]
struct BridgeClass {
    vid: u16,
    tagged: bool,
}

impl Bridge {
    /// Sets the VLAN membership of port `port`. Returns `false` if `port`
    /// is not a port of this bridge.
    pub fn set_port_vlans(&mut self, port: DeviceId, vlans: PortVlans) -> bool {
        match self.ports.iter_mut().find(|(p, _)| *p == port) {
            Some(e) => {
                e.1 = vlans;
                true
            }
            None => false,
        }
    }

    /// VLAN id of `pkt` entering with membership `vlans` (a port's, or the
    /// bridge's own for host-originated frames), popping nothing: `Some(vid)`
    /// if admitted.
    fn ingress_vid(&self, vlans: Option<&PortVlans>, pkt: &Packet) -> Option<u16> {
        if !self.vlan_filtering {
            return Some(0);
        }
        let vlans = vlans?;
        match outer_tag(pkt.linear()) {
            Some((0x8100, vid)) if vid != 0 => vlans.member(vid).map(|_| vid),
            _ => vlans.pvid.filter(|p| vlans.member(*p).is_some()),
        }
    }

    /// Applies the egress tagging of a member whose membership of the
    /// frame's VLAN is `untag` (`None`: not a member) to `pkt`; returns the
    /// new total length, or the drop reason.
    fn egress_tagging(
        class: BridgeClass,
        untag: Option<bool>,
        pkt: &mut Packet,
        len: usize,
    ) -> Result<usize, &'static str> {
        let BridgeClass { vid, tagged } = class;
        let untag = untag.ok_or("vlan-filtered")?;
        let res = match (tagged, untag) {
            (true, true) => pkt.pop_vlan_tag().map(|_| len - VLAN_TAG_LEN),
            (false, false) => pkt.push_vlan_tag(0x8100, vid).map(|_| len + VLAN_TAG_LEN),
            _ => Ok(len),
        };
        res.map_err(|_| "vlan-tagging")
    }

    /// Sends `pkt` out of member `port` with that port's egress tagging.
    fn egress(&self, cx: &mut Cx<'_>, port: DeviceId, pkt: &mut Packet, len: usize, class: BridgeClass) -> Verdict {
        if !self.vlan_filtering {
            return Verdict::Transmit(port, len);
        }
        let untag = self.port_vlans(port).and_then(|v| v.member(class.vid));
        match Self::egress_tagging(class, untag, pkt, len) {
            Ok(len) => Verdict::Transmit(port, len),
            Err(reason) => cx.drop(reason),
        }
    }

    /// Sends a copy of `pkt` out of member `port` (a flood); returns
    /// whether it left (a refusal is counted).
    fn egress_copy(&self, cx: &mut Cx<'_>, port: DeviceId, pkt: &Packet, len: usize, class: BridgeClass) -> bool {
        let mut copy = pkt.clone();
        match self.egress(cx, port, &mut copy, len, class) {
            Verdict::Transmit(dev, len) => {
                cx.transmit(dev, copy, len);
                true
            }
            Verdict::Dropped { on, reason } => {
                cx.count_drops(on, reason, 1);
                false
            }
            _ => false,
        }
    }

    /// Hands a frame to the bridge device's own stack. The bridge device is
    /// an egress like a port: with VLAN filtering the frame leaves untagged
    /// if the bridge's own membership of the VLAN is untagged, tagged
    /// otherwise (so a VLAN device on the bridge, such as `br0.10`, gets it).
    fn up(&self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize, class: BridgeClass) -> Verdict {
        if !self.vlan_filtering {
            return Verdict::Up(len);
        }
        match Self::egress_tagging(class, self.self_vlans.member(class.vid), pkt, len) {
            Ok(len) => Verdict::Up(len),
            Err(reason) => cx.drop(reason),
        }
    }

    /// Forwards `pkt` from `ingress` (a port, or the bridge itself for
    /// host-originated frames): learning, FDB lookup, flooding (Linux's
    /// `br_handle_frame_finish` / `br_forward` / `br_flood`).
    fn forward(&mut self, cx: &mut Cx<'_>, ingress: DeviceId, pkt: &mut Packet, len: usize) -> Verdict {
        let me = cx.me();
        let now = cx.now_ns();
        let vlans = if ingress == me { Some(&self.self_vlans) } else { self.port_vlans(ingress) };
        let Some(vid) = self.ingress_vid(vlans, pkt) else {
            return cx.drop("vlan-filtered");
        };
        let tagged = self.vlan_filtering && matches!(outer_tag(pkt.linear()), Some((0x8100, v)) if v == vid);
        let class = BridgeClass { vid, tagged };
        let Ok(eth) = EthernetFrame::new_checked(pkt.linear()) else {
            return cx.drop("runt");
        };
        let (dst, src) = (eth.dst_addr(), eth.src_addr());
        self.learn(src, vid, ingress, now);
        let target = if dst == cx.dev().mac {
            Some(me)
        } else if dst.is_unicast() {
            self.lookup(dst, vid, now)
        } else {
            None
        };
        match target {
            Some(t) if t == ingress => cx.drop("same-port"),
            Some(t) if t == me => self.up(cx, pkt, len, class),
            Some(t) => self.egress(cx, t, pkt, len, class),
            None => self.flood(cx, ingress, pkt, len, class, dst),
        }
    }

    /// Floods to every other member of the VLAN, and up to the bridge's own
    /// stack for broadcast and multicast (unknown unicast is not passed up:
    /// in Linux only a promiscuous bridge receives it). Every recipient but
    /// the last gets a copy; the last gets the packet itself.
    fn flood(
        &self,
        cx: &mut Cx<'_>,
        ingress: DeviceId,
        pkt: &mut Packet,
        len: usize,
        class: BridgeClass,
        dst: MacAddr,
    ) -> Verdict {
        let me = cx.me();
        let to_self =
            ingress != me && !dst.is_unicast() && (!self.vlan_filtering || self.self_vlans.member(class.vid).is_some());
        let members =
            self.ports.iter().filter(|(p, v)| *p != ingress && (!self.vlan_filtering || v.member(class.vid).is_some()));
        let mut last = None;
        let mut sent = false;
        // A copy reads the payload: one still in its sender's memory is
        // made whole before the first (a flood to one port sends the
        // packet itself).
        let copy = |cx: &mut Cx<'_>, pkt: &mut Packet, to: DeviceId| {
            cx.materialise_held(pkt).map(|()| self.egress_copy(cx, to, pkt, len, class))
        };
        for (p, _) in members {
            if let Some(earlier) = last.replace(*p) {
                match copy(cx, pkt, earlier) {
                    Ok(s) => sent |= s,
                    Err(reason) => return cx.drop(reason),
                }
            }
        }
        let verdict = match (to_self, last) {
            (true, earlier) => {
                if let Some(earlier) = earlier {
                    match copy(cx, pkt, earlier) {
                        Ok(s) => sent |= s,
                        Err(reason) => return cx.drop(reason),
                    }
                }
                self.up(cx, pkt, len, class)
            }
            (false, Some(final_port)) => self.egress(cx, final_port, pkt, len, class),
            (false, None) => cx.drop("no-flood-member"),
        };
        match verdict {
            // The copies left: the step forwarded, the last refusal counts.
            Verdict::Dropped { on, reason } if sent => {
                cx.count_drops(on, reason, 1);
                Verdict::Forwarded
            }
            v => v,
        }
    }
}

impl NetDevice for Bridge {
    fn kind(&self) -> &'static str {
        "bridge"
    }

    /// A host-originated frame: forwarded as if it entered on the bridge.
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let me = cx.me();
        self.forward(cx, me, pkt, len)
    }

    /// The bridge's `rx_handler`: a frame its port `from` received.
    fn receive(&mut self, cx: &mut Cx<'_>, from: DeviceId, pkt: &mut Packet, len: usize) -> Verdict {
        self.forward(cx, from, pkt, len)
    }

    /// A run: the first frame forwarded as by `receive`; when it goes to
    /// one member as it is and nothing else was queued (no flood's
    /// copies), the frames after it with its addresses go there too.
    /// Forwarding them one by one would change nothing more: learning their
    /// source again at the same time on the same port leaves the table as
    /// it is, so each gets the first one's verdict (a runt, too short for
    /// an Ethernet header, is not in it: `forward` drops it). With VLAN
    /// filtering (tags pushed or popped per frame), none.
    fn receive_run(&mut self, cx: &mut Cx<'_>, from: DeviceId, pkts: &mut [Packet], len: usize) -> Run {
        if self.vlan_filtering {
            return Run::Each;
        }
        let Some((first, rest)) = pkts.split_first_mut() else { return Run::Each };
        match self.forward(cx, from, first, len) {
            Verdict::Transmit(to, n) if n == len && !cx.queued_steps() => {
                // `forward`'s checks of a frame: a runt is dropped, even
                // with the run's addresses.
                let addrs = first.linear().first_chunk::<12>();
                let joins = |p: &&Packet| {
                    p.linear().first_chunk::<12>() == addrs && EthernetFrame::new_checked(p.linear()).is_ok()
                };
                Run::To(to, 1 + rest.iter().take_while(joins).count())
            }
            verdict => Run::First(verdict),
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

    /// Forwarding reads the MAC addresses only, and a flood materialises
    /// the payload before its first copy. Not with VLAN filtering: the held
    /// path was built and tested for the unfiltered bridge only.
    fn passes_held_payload(&self) -> bool {
        !self.vlan_filtering
    }

    fn enslaved(&mut self, lower: DeviceId) {
        self.ports.push((lower, PortVlans::default_vlan()));
    }

    fn released(&mut self, lower: DeviceId) {
        self.ports.retain(|(p, _)| *p != lower);
        self.fdb.retain(|_, e| e.port != lower);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Features of a device forwarding between member ports (a bridge, a
/// cross-connect): the common set over the members (offload-rules 6.5),
/// with the device's own wanted and hardware sets kept.
pub fn member_features(own: &DeviceFeatures, lowers: &[DeviceFeatures], mode: StackMode) -> DeviceFeatures {
    let mut f = compute_master_features(own.wanted, lowers, mode);
    f.hw_features = own.hw_features;
    f.wanted = own.wanted;
    f
}

/// Requested features of a new bridge (6.5: SG, FRAGLIST, HIGHDMA, every
/// GSO type, HW_CSUM, LLTX, VLAN insertion).
pub fn bridge_wanted(mode: StackMode) -> NetdevFeatures {
    type F = NetdevFeatures;
    F::SG
        | F::FRAGLIST
        | F::HIGHDMA
        | F::gso_software(mode)
        | F::GSO_ROBUST
        | F::GSO_ENCAP_ALL
        | F::HW_CSUM
        | F::LLTX
        | F::VLAN_TX
        | F::SOFT_FEATURES
}
