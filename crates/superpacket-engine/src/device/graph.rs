//! The device graph: ports, VLAN devices, bonds, teams and bridges stacked
//! on each other, their features kept consistent (offload-rules 6.1, 6.4,
//! 6.5), and the transmit and receive paths through them (3.1, 6.2, 6.3).
//!
//! # Transmit
//! A packet given to a device descends the stack unchanged (a VLAN device
//! pushes its tag, a bond/team picks a slave, a bridge looks up its FDB)
//! until it reaches a port. The port's validate step computes the packet's
//! effective features (6.2, with the port's `features_check` hook) and
//! either hands the packet to the driver as it is, or gives it to the
//! [`Segmenter`] with the port's [`superpacket::offload::gso::TargetCaps`], which
//! produces only what the port lacks (6.3).
//!
//! A port whose driver works on raw IP ([`PortDriver::medium`], a TUN) is
//! an Ethernet port on a point-to-point link to the graph: its driver frames
//! what it receives ([`PortDriver::link_input`], after the port's GRO) and
//! strips what it transmits ([`PortDriver::link_output`], before the
//! validate step, whose segmenter then cuts raw IP packets); the ARP and
//! neighbour solicitations it answers itself are received on the port after
//! the operation that sent them ([`LinkOutput::Reply`]).
//!
//! With [`StackMode::Legacy`] every device runs the validate step: the first
//! device whose features lack the packet's GSO type segments it in software
//! and the segments descend separately; the QinQ rule is applied in the core.

use super::bond::{self, Bond, BondMode, HashPolicy};
use super::bridge::{Bridge, PortVlans};
use super::features::{
    DeviceFeatures, FeaturesCheck, NetdevFeatures, PacketInfo, StackMode, compute_master_features, effective_features,
    fix_features, gso_ok, takes_as_is, target_caps, vlan_fix_features, vlan_hw_features,
};
use super::port::{LinkOutput, PortDriver};
use super::router::Router;
use super::team::{Team, TeamMode};
use super::vlan::{Vlan, VlanProto, outer_tag};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use superpacket::offload::gso::{GsoOutcome, SegmentSink, Segmenter, SgFrame};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::wire::ethernet::ETHERNET_HEADER_LEN;
use superpacket::wire::{MacAddr, Medium};

/// How a bridge classified a frame: its VLAN (0 without filtering) and
/// whether the frame carries that VLAN's tag in its data.
#[derive(Debug, Clone, Copy)]
struct BridgeClass {
    vid: u16,
    tagged: bool,
}

/// Index of a device in its [`Graph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DeviceId(pub usize);

/// Deepest stack a packet may descend or ascend (loop guard).
pub const MAX_DEPTH: usize = 16;

/// Errors building or changing a graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// Two devices with one name.
    #[error("device name {0:?} is already used")]
    NameTaken(String),
    /// No such device.
    #[error("no device {0:?}")]
    NoSuchDevice(String),
    /// The operation needs another kind of device.
    #[error("{name:?} is not a {expected}")]
    WrongKind {
        /// Device name.
        name: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The device already has a master.
    #[error("{0:?} is already enslaved")]
    AlreadyEnslaved(String),
    /// A VLAN id outside 1..=4094.
    #[error("VLAN id {0} is outside 1..=4094")]
    BadVid(u16),
    /// A VLAN device with this tag already exists on the lower.
    #[error("{lower:?} already has a VLAN device for {vid}")]
    DuplicateVlan {
        /// Lower device.
        lower: String,
        /// VLAN id.
        vid: u16,
    },
}

/// Per-device counters (rx/tx packets and bytes, superpackets, segments
/// produced, checksums completed, drops by reason).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceCounters {
    /// Packets received (a superpacket counts once).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Superpackets received.
    pub rx_superpackets: u64,
    /// Packets given to the device for transmission.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Superpackets among them.
    pub tx_superpackets: u64,
    /// Packets the device's driver took whole (ports).
    pub tx_passthrough: u64,
    /// Superpackets segmented in software here.
    pub tx_segmented: u64,
    /// Frames produced by software segmentation here.
    pub segments_produced: u64,
    /// L4 checksums completed in software here.
    pub checksums_completed: u64,
    /// Drops by reason.
    pub drops: BTreeMap<&'static str, u64>,
}

impl DeviceCounters {
    /// Total drops.
    pub fn dropped(&self) -> u64 {
        self.drops.values().sum()
    }
    fn drop(&mut self, reason: &'static str) {
        self.drop_n(reason, 1);
    }
    fn drop_n(&mut self, reason: &'static str, n: u64) {
        *self.drops.entry(reason).or_insert(0) += n;
    }
}

/// What a device is.
#[derive(Debug)]
pub enum DeviceKind {
    /// A port with its driver.
    Port(Box<dyn PortDriver>),
    /// A VLAN device on `lowers[0]`.
    Vlan(Vlan),
    /// A bond over `lowers`.
    Bond(Bond),
    /// A team over `lowers`.
    Team(Team),
    /// A bridge over `lowers`.
    Bridge(Box<Bridge>),
}

impl DeviceKind {
    /// Short kind name.
    pub fn name(&self) -> &'static str {
        match self {
            DeviceKind::Port(_) => "port",
            DeviceKind::Vlan(_) => "vlan",
            DeviceKind::Bond(_) => "bond",
            DeviceKind::Team(_) => "team",
            DeviceKind::Bridge(_) => "bridge",
        }
    }
}

/// One device of a [`Graph`].
#[derive(Debug)]
pub struct Device {
    /// Unique name.
    pub name: String,
    /// Kind and kind-specific state.
    pub kind: DeviceKind,
    /// Features and limits (6.1).
    pub feat: DeviceFeatures,
    /// The per-packet `features_check` hook (6.2 step 5).
    pub check: FeaturesCheck,
    /// What a port's driver reads and writes ([`PortDriver::medium`], taken
    /// once when the port is added); Ethernet for every other device.
    pub medium: Medium,
    /// MAC address.
    pub mac: MacAddr,
    /// L3 MTU.
    pub mtu: usize,
    /// Carrier (link) up.
    pub carrier: bool,
    /// Bond, team or bridge this device is enslaved to.
    pub master: Option<DeviceId>,
    /// Lower devices (VLAN: its real device; masters: their slaves/ports).
    pub lowers: Vec<DeviceId>,
    /// VLAN devices stacked on this one.
    pub vlan_uppers: Vec<DeviceId>,
    /// Counters.
    pub counters: DeviceCounters,
    /// Packets delivered to this device's host side (no upper took them).
    pub local: VecDeque<Packet>,
}

/// The device graph. See the module documentation.
#[derive(Debug)]
pub struct Graph {
    devices: Vec<Device>,
    names: HashMap<String, DeviceId>,
    mode: StackMode,
    segmenter: Segmenter,
    /// The IPv4/IPv6 router (interfaces are devices of this graph).
    pub router: Router,
    router_out: Vec<(DeviceId, Packet, usize)>,
    /// Frames raw-IP drivers answered themselves ([`LinkOutput::Reply`]),
    /// received on their port once the current operation is done.
    link_replies: VecDeque<(DeviceId, Packet)>,
    now_ns: u64,
    next_mac: u8,
}

/// Most link replies received at the end of one operation (the rest wait
/// for the next one): a loop guard.
const MAX_LINK_REPLIES: usize = 64;

/// Default MTU of new devices.
pub const DEFAULT_MTU: usize = 1500;

impl Default for Graph {
    fn default() -> Self {
        Graph::new(StackMode::Passthrough)
    }
}

/// The sink between the segmenter and a port driver. A pass-through is not
/// written from the borrowed packet (that would copy a whole superpacket
/// into the driver's send arena): only its metadata is kept, and
/// [`Graph::port_xmit`] then hands the packet itself to the driver by value
/// (valid because the segmenter passes through the very packet it was given,
/// see [`SegmentSink::pass_through`]). Segments go straight to the driver.
struct PortSink<'a> {
    inner: &'a mut dyn SegmentSink,
    passed_through: Option<OffloadMeta>,
}

impl SegmentSink for PortSink<'_> {
    fn pass_through(&mut self, _packet: &Packet, meta: &OffloadMeta) {
        self.passed_through = Some(*meta);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        self.inner.sg_frame(frame);
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.inner.linear_buffer(len)
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        self.inner.linear_frame(len, meta);
    }
}

/// Collects segmenter output as packets (legacy segmentation at a virtual
/// device: the segments continue down the stack one by one).
#[derive(Default)]
struct PacketSink {
    out: Vec<Packet>,
    buf: Vec<u8>,
}

impl SegmentSink for PacketSink {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        let mut p = packet.clone();
        p.meta = *meta;
        self.out.push(p);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        frame.copy_to(&mut self.buf);
        let mut p = Packet::from_frame(&self.buf);
        p.meta = frame.meta;
        self.out.push(p);
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.clear();
        self.buf.resize(len, 0);
        &mut self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let mut p = Packet::from_frame(&self.buf[..len]);
        p.meta = *meta;
        self.out.push(p);
    }
}

impl Graph {
    /// An empty graph behaving as `mode`.
    pub fn new(mode: StackMode) -> Graph {
        Graph {
            devices: Vec::new(),
            names: HashMap::new(),
            mode,
            segmenter: Segmenter::new(),
            router: Router::default(),
            router_out: Vec::new(),
            link_replies: VecDeque::new(),
            now_ns: 0,
            next_mac: 1,
        }
    }

    /// The mode.
    pub fn mode(&self) -> StackMode {
        self.mode
    }

    /// Switches the mode: virtual devices get the mode's default requested
    /// features back and every device is recomputed.
    pub fn set_mode(&mut self, mode: StackMode) {
        self.mode = mode;
        for i in 0..self.devices.len() {
            let wanted = match self.devices[i].kind {
                DeviceKind::Port(_) => continue,
                DeviceKind::Vlan(_) => vlan_hw_features(mode) | NetdevFeatures::LLTX,
                DeviceKind::Bond(_) | DeviceKind::Team(_) => master_wanted(mode),
                DeviceKind::Bridge(_) => bridge_wanted(mode),
            };
            self.devices[i].feat.hw_features = wanted;
            self.devices[i].feat.wanted = wanted;
        }
        for i in 0..self.devices.len() {
            self.recompute_one(DeviceId(i));
        }
    }

    /// The engine clock (ns) used for ageing and timeouts.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Sets the engine clock.
    pub fn set_time(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    /// All devices, in creation order (lowers before uppers).
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// One device.
    pub fn device(&self, id: DeviceId) -> &Device {
        &self.devices[id.0]
    }

    /// One device, writable (changing features directly skips propagation:
    /// use [`Graph::set_features`]).
    pub fn device_mut(&mut self, id: DeviceId) -> &mut Device {
        &mut self.devices[id.0]
    }

    /// The device called `name`.
    pub fn id(&self, name: &str) -> Option<DeviceId> {
        self.names.get(name).copied()
    }

    /// The device called `name`, or an error naming it.
    ///
    /// # Errors
    /// [`DeviceError::NoSuchDevice`].
    pub fn lookup(&self, name: &str) -> Result<DeviceId, DeviceError> {
        self.id(name).ok_or_else(|| DeviceError::NoSuchDevice(name.to_string()))
    }

    /// Counters of a device.
    pub fn counters(&self, id: DeviceId) -> &DeviceCounters {
        &self.devices[id.0].counters
    }

    /// Resets every device's counters.
    pub fn reset_counters(&mut self) {
        for d in &mut self.devices {
            d.counters = DeviceCounters::default();
        }
    }

    /// The concrete driver of port `id`, if it is a `T`.
    pub fn driver_mut<T: 'static>(&mut self, id: DeviceId) -> Option<&mut T> {
        match &mut self.devices[id.0].kind {
            DeviceKind::Port(d) => d.as_any_mut().downcast_mut::<T>(),
            _ => None,
        }
    }

    fn add(&mut self, name: &str, kind: DeviceKind, feat: DeviceFeatures) -> Result<DeviceId, DeviceError> {
        if self.names.contains_key(name) {
            return Err(DeviceError::NameTaken(name.to_string()));
        }
        let id = DeviceId(self.devices.len());
        let mac = MacAddr([0x02, 0x53, 0x50, 0, (id.0 >> 8) as u8, self.next_mac]);
        self.next_mac = self.next_mac.wrapping_add(1);
        let (check, medium) = match &kind {
            DeviceKind::Port(d) => (d.features_check(), d.medium()),
            _ => (FeaturesCheck::Any, Medium::Ethernet),
        };
        self.devices.push(Device {
            name: name.to_string(),
            kind,
            feat,
            check,
            medium,
            mac,
            mtu: DEFAULT_MTU,
            carrier: true,
            master: None,
            lowers: Vec::new(),
            vlan_uppers: Vec::new(),
            counters: DeviceCounters::default(),
            local: VecDeque::new(),
        });
        self.names.insert(name.to_string(), id);
        Ok(id)
    }

    /// Adds a port backed by `driver`; its features are the driver's
    /// hardware features after [`fix_features`].
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_port(&mut self, name: &str, driver: Box<dyn PortDriver>) -> Result<DeviceId, DeviceError> {
        let mut feat = DeviceFeatures::new(driver.hw_features());
        feat.vlan_features = driver.vlan_features();
        self.add(name, DeviceKind::Port(driver), feat)
    }

    /// Adds a VLAN device of kind `proto` and id `vid` on `lower` (6.4).
    ///
    /// # Errors
    /// Name taken, bad VLAN id, or a duplicate tag on the lower.
    pub fn add_vlan(
        &mut self,
        name: &str,
        lower: DeviceId,
        proto: VlanProto,
        vid: u16,
    ) -> Result<DeviceId, DeviceError> {
        if vid == 0 || vid > 4094 {
            return Err(DeviceError::BadVid(vid));
        }
        let dup = self.devices[lower.0]
            .vlan_uppers
            .iter()
            .any(|u| matches!(self.devices[u.0].kind, DeviceKind::Vlan(v) if v.vid == vid && v.proto == proto));
        if dup {
            return Err(DeviceError::DuplicateVlan { lower: self.devices[lower.0].name.clone(), vid });
        }
        let wanted = vlan_hw_features(self.mode) | NetdevFeatures::LLTX;
        let mut feat = DeviceFeatures::new(wanted);
        feat.hw_features = wanted;
        let id = self.add(name, DeviceKind::Vlan(Vlan { proto, vid }), feat)?;
        let mac = self.devices[lower.0].mac;
        let mtu = self.devices[lower.0].mtu;
        let d = &mut self.devices[id.0];
        d.lowers.push(lower);
        d.mac = mac;
        d.mtu = mtu;
        self.devices[lower.0].vlan_uppers.push(id);
        self.recompute(id);
        Ok(id)
    }

    /// Adds a bond without slaves.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_bond(&mut self, name: &str, mode: BondMode, hash: HashPolicy) -> Result<DeviceId, DeviceError> {
        let wanted = master_wanted(self.mode);
        let id = self.add(name, DeviceKind::Bond(Bond::new(mode, hash)), DeviceFeatures::new(wanted))?;
        self.recompute(id);
        Ok(id)
    }

    /// Adds a team without ports.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_team(&mut self, name: &str, mode: TeamMode) -> Result<DeviceId, DeviceError> {
        let wanted = master_wanted(self.mode);
        let id = self.add(name, DeviceKind::Team(Team::new(mode)), DeviceFeatures::new(wanted))?;
        self.recompute(id);
        Ok(id)
    }

    /// Adds a bridge without ports.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_bridge(&mut self, name: &str, vlan_filtering: bool) -> Result<DeviceId, DeviceError> {
        let wanted = bridge_wanted(self.mode);
        let id =
            self.add(name, DeviceKind::Bridge(Box::new(Bridge::new(vlan_filtering))), DeviceFeatures::new(wanted))?;
        self.recompute(id);
        Ok(id)
    }

    /// Enslaves `lower` to the bond, team or bridge `master` (bridge ports
    /// get VLAN 1 pvid untagged; see [`Graph::set_bridge_port_vlans`]).
    ///
    /// # Errors
    /// Wrong kind of master, or `lower` already enslaved.
    pub fn enslave(&mut self, master: DeviceId, lower: DeviceId) -> Result<(), DeviceError> {
        if matches!(self.devices[master.0].kind, DeviceKind::Port(_) | DeviceKind::Vlan(_)) {
            return Err(DeviceError::WrongKind {
                name: self.devices[master.0].name.clone(),
                expected: "bond, team or bridge",
            });
        }
        if self.devices[lower.0].master.is_some() || lower == master {
            return Err(DeviceError::AlreadyEnslaved(self.devices[lower.0].name.clone()));
        }
        self.devices[lower.0].master = Some(master);
        self.devices[master.0].lowers.push(lower);
        let mtu = self.devices[lower.0].mtu;
        let m = &mut self.devices[master.0];
        if m.lowers.len() == 1 {
            m.mtu = mtu;
        }
        if let DeviceKind::Bridge(b) = &mut m.kind {
            b.ports.push((lower, PortVlans::default_vlan()));
        }
        self.reselect_active(master);
        self.recompute(master);
        Ok(())
    }

    /// Removes `lower` from its master.
    pub fn release(&mut self, lower: DeviceId) {
        let Some(master) = self.devices[lower.0].master.take() else { return };
        let m = &mut self.devices[master.0];
        m.lowers.retain(|l| *l != lower);
        if let DeviceKind::Bridge(b) = &mut m.kind {
            b.ports.retain(|(p, _)| *p != lower);
            b.fdb.retain(|_, e| e.port != lower);
        }
        self.reselect_active(master);
        self.recompute(master);
    }

    /// Sets the VLAN membership of bridge port `port` (or of the bridge
    /// itself when `port` is the bridge).
    ///
    /// # Errors
    /// If `port` is neither the bridge nor one of its ports.
    pub fn set_bridge_port_vlans(&mut self, port: DeviceId, vlans: PortVlans) -> Result<(), DeviceError> {
        let (bridge, is_self) = match self.devices[port.0].kind {
            DeviceKind::Bridge(_) => (port, true),
            _ => match self.devices[port.0].master {
                Some(m) if matches!(self.devices[m.0].kind, DeviceKind::Bridge(_)) => (m, false),
                _ => {
                    return Err(DeviceError::WrongKind {
                        name: self.devices[port.0].name.clone(),
                        expected: "bridge port",
                    });
                }
            },
        };
        let DeviceKind::Bridge(b) = &mut self.devices[bridge.0].kind else { unreachable!("checked above") };
        if is_self {
            b.self_vlans = vlans;
        } else if let Some(e) = b.ports.iter_mut().find(|(p, _)| *p == port) {
            e.1 = vlans;
        }
        Ok(())
    }

    /// Sets or clears wanted features of a device (`ethtool -K`): the
    /// device's features are recomputed, then every upper's (6.4, 6.5).
    pub fn set_features(&mut self, id: DeviceId, on: NetdevFeatures, off: NetdevFeatures) {
        let f = &mut self.devices[id.0].feat;
        f.wanted = (f.wanted | on).without(off);
        self.recompute(id);
    }

    /// Sets the primary slave of an active-backup bond (`primary`): it is
    /// the active slave whenever its carrier is up.
    pub fn set_bond_primary(&mut self, bond: DeviceId, primary: Option<DeviceId>) {
        if let DeviceKind::Bond(b) = &mut self.devices[bond.0].kind {
            b.primary = primary;
            self.reselect_active(bond);
        }
    }

    /// Sets the carrier of a device: bonds and teams over it fail over.
    pub fn set_carrier(&mut self, id: DeviceId, up: bool) {
        self.devices[id.0].carrier = up;
        if let Some(m) = self.devices[id.0].master {
            self.reselect_active(m);
        }
    }

    /// Sets the MTU of a device.
    pub fn set_mtu(&mut self, id: DeviceId, mtu: usize) {
        self.devices[id.0].mtu = mtu;
    }

    /// Sets the MAC address of a device.
    pub fn set_mac(&mut self, id: DeviceId, mac: MacAddr) {
        self.devices[id.0].mac = mac;
    }

    /// Sets the features_check hook of a device.
    pub fn set_features_check(&mut self, id: DeviceId, check: FeaturesCheck) {
        self.devices[id.0].check = check;
    }

    /// Sets the GSO limits of a port (uppers follow).
    pub fn set_gso_limits(&mut self, id: DeviceId, max_size: usize, max_segs: u16) {
        let f = &mut self.devices[id.0].feat;
        f.gso_max_size = max_size;
        f.gso_max_segs = max_segs;
        self.recompute(id);
    }

    fn usable(&self, id: DeviceId) -> bool {
        self.devices[id.0].carrier
    }

    /// Active-backup: keeps the active slave while usable, else the first usable one.
    fn reselect_active(&mut self, master: DeviceId) {
        let lowers = &self.devices[master.0].lowers;
        let first_usable = lowers.iter().copied().find(|l| self.usable(*l));
        let current = match &self.devices[master.0].kind {
            DeviceKind::Bond(b) => b.active,
            DeviceKind::Team(t) => t.active,
            _ => return,
        };
        let primary = match &self.devices[master.0].kind {
            DeviceKind::Bond(b) => b.primary.filter(|p| self.usable(*p) && self.devices[p.0].master == Some(master)),
            _ => None,
        };
        let keep = current.is_some_and(|a| self.devices[a.0].carrier && self.devices[a.0].master == Some(master));
        if keep && (primary.is_none() || primary == current) {
            return;
        }
        let first_usable = primary.or(first_usable);
        let (active, failovers) = match &mut self.devices[master.0].kind {
            DeviceKind::Bond(b) => (&mut b.active, &mut b.failovers),
            DeviceKind::Team(t) => (&mut t.active, &mut t.failovers),
            _ => return,
        };
        if active.is_some() && first_usable.is_some() && *active != first_usable {
            *failovers += 1;
        }
        *active = first_usable;
    }

    /// Recomputes `id` and then every device above it.
    fn recompute(&mut self, id: DeviceId) {
        self.recompute_one(id);
        let mut uppers = self.devices[id.0].vlan_uppers.clone();
        if let Some(m) = self.devices[id.0].master {
            uppers.push(m);
        }
        for u in uppers {
            self.recompute(u);
        }
    }

    /// Recomputes one device's features from its lowers.
    fn recompute_one(&mut self, id: DeviceId) {
        let mode = self.mode;
        let d = &self.devices[id.0];
        let new = match &d.kind {
            DeviceKind::Port(_) => {
                let mut f = d.feat;
                f.features = fix_features(f.wanted & f.hw_features);
                f
            }
            DeviceKind::Vlan(_) => {
                let lower = self.devices[d.lowers[0].0].feat;
                let mut f = d.feat;
                f.features = fix_features(vlan_fix_features(f.wanted, &lower, mode));
                f.vlan_features = lower.vlan_features.without(NetdevFeatures::ALL_FCOE);
                f.gso_max_size = lower.gso_max_size;
                f.gso_max_segs = lower.gso_max_segs;
                f
            }
            DeviceKind::Bond(_) | DeviceKind::Team(_) | DeviceKind::Bridge(_) => {
                let lowers: Vec<DeviceFeatures> = d.lowers.iter().map(|l| self.devices[l.0].feat).collect();
                let mut f = compute_master_features(d.feat.wanted, &lowers, mode);
                f.hw_features = d.feat.hw_features;
                f.wanted = d.feat.wanted;
                if matches!(d.kind, DeviceKind::Bond(_)) {
                    f.features = f.features | NetdevFeatures::VLAN_TX;
                }
                f
            }
        };
        self.devices[id.0].feat = new;
    }

    // ---------------------------------------------------------------- transmit

    /// Transmits `pkt` through device `id` (see the module documentation).
    /// Never fails: problems are drops counted on the device concerned.
    pub fn transmit(&mut self, id: DeviceId, pkt: Packet) {
        let len = pkt.total_len();
        self.xmit(id, pkt, len, 0);
        self.receive_link_replies();
    }

    /// Transmit through `id`. `len` is the packet's total length (frag list
    /// included), computed once when the packet entered the graph and
    /// adjusted by every device that changes it (a VLAN tag: 4 bytes), so
    /// no device walks a fraglist superpacket's chain to count it.
    fn xmit(&mut self, id: DeviceId, pkt: Packet, len: usize, depth: usize) {
        let d = &mut self.devices[id.0];
        d.counters.tx_packets += 1;
        d.counters.tx_bytes += len as u64;
        if pkt.meta.is_gso() {
            d.counters.tx_superpackets += 1;
        }
        if depth > MAX_DEPTH {
            d.counters.drop("too-deep");
            return;
        }
        if matches!(d.kind, DeviceKind::Port(_)) {
            self.port_xmit(id, pkt, len);
            return;
        }
        if self.mode == StackMode::Legacy && pkt.meta.is_gso() {
            // Old kernels: the first device lacking the GSO type segments.
            let info = PacketInfo::of_len(&pkt, len);
            let f = effective_features(&d.feat, &info, &d.check, self.mode);
            if !gso_ok(f, &info) {
                let caps = target_caps(f, &d.feat, d.mtu);
                let mut sink = PacketSink::default();
                match self.segmenter.segment(&pkt, &caps, &mut sink) {
                    Ok(outcome) => {
                        let d = &mut self.devices[id.0];
                        record_outcome(&mut d.counters, &outcome);
                        for seg in sink.out {
                            let n = seg.total_len();
                            self.forward_down(id, seg, n, depth);
                        }
                    }
                    Err(e) => self.devices[id.0].counters.drop(e.reason()),
                }
                return;
            }
        }
        self.forward_down(id, pkt, len, depth);
    }

    /// The device-specific part of transmit: pass `pkt` to the next device(s).
    fn forward_down(&mut self, id: DeviceId, mut pkt: Packet, len: usize, depth: usize) {
        let d = &mut self.devices[id.0];
        match &mut d.kind {
            DeviceKind::Port(_) => self.port_xmit(id, pkt, len),
            DeviceKind::Vlan(v) => {
                let (tpid, vid) = (v.proto.tpid(), v.vid);
                if pkt.push_vlan_tag(tpid, vid).is_err() {
                    d.counters.drop("vlan-push");
                    return;
                }
                let lower = d.lowers[0];
                self.xmit(lower, pkt, len + 4, depth + 1);
            }
            DeviceKind::Bond(_) | DeviceKind::Team(_) => match self.select_slave(id, &pkt) {
                Some(s) => self.xmit(s, pkt, len, depth + 1),
                None => self.devices[id.0].counters.drop("no-slave"),
            },
            DeviceKind::Bridge(_) => self.bridge_xmit(id, pkt, len, depth),
        }
    }

    /// Picks the slave of a bond or team for `pkt` (none if no slave is usable).
    fn select_slave(&mut self, id: DeviceId, pkt: &Packet) -> Option<DeviceId> {
        let usable = self.devices[id.0].lowers.iter().filter(|l| self.usable(**l)).count();
        if usable == 0 {
            return None;
        }
        let nth = |g: &Graph, n: usize| g.devices[id.0].lowers.iter().copied().filter(|l| g.usable(*l)).nth(n);
        let frame = pkt.linear();
        match &mut self.devices[id.0].kind {
            DeviceKind::Bond(b) => match b.mode {
                BondMode::ActiveBackup => b.active,
                BondMode::BalanceXor => {
                    let h = bond::hash(b.hash, frame) as usize;
                    nth(self, h % usable)
                }
            },
            DeviceKind::Team(t) => match t.mode {
                TeamMode::Activebackup => t.active,
                TeamMode::Roundrobin => {
                    let n = (t.rr % usable as u64) as usize;
                    t.rr += 1;
                    nth(self, n)
                }
                TeamMode::Loadbalance => {
                    let h = bond::hash_layer34(frame) as usize;
                    nth(self, h % usable)
                }
            },
            _ => None,
        }
    }

    /// The final port's validate step (3.1, 6.2, 6.3).
    fn port_xmit(&mut self, id: DeviceId, pkt: Packet, len: usize) {
        let mode = self.mode;
        let d = &mut self.devices[id.0];
        if !d.carrier {
            d.counters.drop("no-carrier");
            return;
        }
        let DeviceKind::Port(driver) = &mut d.kind else { return };
        let mut info = PacketInfo::of_len(&pkt, len);
        if !info.is_gso() && info.len > d.mtu + 14 + 4 * info.vlan_tags as usize {
            d.counters.drop("exceeds-mtu");
            return;
        }
        let medium = d.medium;
        let (pkt, len) = match medium {
            Medium::Ethernet => (pkt, len),
            Medium::Ip => match driver.link_output(pkt) {
                LinkOutput::Send(p) => {
                    info.len = len - ETHERNET_HEADER_LEN;
                    (p, info.len)
                }
                LinkOutput::Reply(reply) => {
                    self.link_replies.push_back((id, reply));
                    return;
                }
                LinkOutput::Drop(reason) => {
                    d.counters.drop(reason);
                    return;
                }
            },
        };
        let f = effective_features(&d.feat, &info, &d.check, mode);
        if takes_as_is(f, &info) {
            d.counters.tx_passthrough += 1;
            if let Err(e) = driver.xmit_len(pkt, len) {
                d.counters.drop(e.reason);
            }
            return;
        }
        let caps = target_caps(f, &d.feat, d.mtu).with_medium(medium);
        let mut sink = PortSink { inner: driver.sink(), passed_through: None };
        let outcome = self.segmenter.segment(&pkt, &caps, &mut sink);
        let passed_through = sink.passed_through;
        match outcome {
            Ok(o) => record_outcome(&mut d.counters, &o),
            Err(e) => d.counters.drop(e.reason()),
        }
        if let Some(meta) = passed_through {
            let mut pkt = pkt;
            pkt.meta = meta;
            if let Err(e) = driver.xmit_len(pkt, len) {
                d.counters.drop(e.reason);
            }
        }
        let counters = &mut d.counters;
        driver.take_drops(&mut |reason, n| counters.drop_n(reason, n));
    }

    // ---------------------------------------------------------------- bridge

    /// VLAN id of `pkt` entering bridge member `port` (or the bridge itself),
    /// popping nothing: `Some(vid)` if admitted.
    fn bridge_ingress_vid(b: &Bridge, vlans: Option<&PortVlans>, pkt: &Packet) -> Option<u16> {
        if !b.vlan_filtering {
            return Some(0);
        }
        let vlans = vlans?;
        match outer_tag(pkt.linear()) {
            Some((0x8100, vid)) if vid != 0 => vlans.member(vid).map(|_| vid),
            _ => vlans.pvid.filter(|p| vlans.member(*p).is_some()),
        }
    }

    /// Sends `pkt` (classified in `class.vid`, tagged in the data iff
    /// `class.tagged`) out of bridge member `port` with that port's egress
    /// tagging.
    fn bridge_egress(
        &mut self,
        bridge: DeviceId,
        port: DeviceId,
        mut pkt: Packet,
        mut len: usize,
        class: BridgeClass,
        depth: usize,
    ) {
        let BridgeClass { vid, tagged } = class;
        let DeviceKind::Bridge(b) = &self.devices[bridge.0].kind else { return };
        if b.vlan_filtering {
            let Some(untag) = b.port_vlans(port).and_then(|v| v.member(vid)) else {
                self.devices[bridge.0].counters.drop("vlan-filtered");
                return;
            };
            let ok = match (tagged, untag) {
                (true, true) => {
                    len -= 4;
                    pkt.pop_vlan_tag().is_ok()
                }
                (false, false) => {
                    len += 4;
                    pkt.push_vlan_tag(0x8100, vid).is_ok()
                }
                _ => true,
            };
            if !ok {
                self.devices[bridge.0].counters.drop("vlan-tagging");
                return;
            }
        }
        self.xmit(port, pkt, len, depth + 1);
    }

    /// Forwards `pkt` inside bridge `bridge`, from `ingress` (a port, or the
    /// bridge itself for host-originated frames).
    fn bridge_forward(&mut self, bridge: DeviceId, ingress: DeviceId, pkt: Packet, len: usize, depth: usize) {
        let now = self.now_ns;
        let DeviceKind::Bridge(b) = &mut self.devices[bridge.0].kind else { return };
        let vlans = if ingress == bridge { Some(&b.self_vlans) } else { b.port_vlans(ingress) };
        let Some(vid) = Self::bridge_ingress_vid(b, vlans, &pkt) else {
            self.devices[bridge.0].counters.drop("vlan-filtered");
            return;
        };
        let tagged = b.vlan_filtering && matches!(outer_tag(pkt.linear()), Some((0x8100, v)) if v == vid);
        let class = BridgeClass { vid, tagged };
        let l = pkt.linear();
        if l.len() < 14 {
            self.devices[bridge.0].counters.drop("runt");
            return;
        }
        let dst = MacAddr([l[0], l[1], l[2], l[3], l[4], l[5]]);
        let src = MacAddr([l[6], l[7], l[8], l[9], l[10], l[11]]);
        b.learn(src, vid, ingress, now);
        let own = self.devices[bridge.0].mac;
        let DeviceKind::Bridge(b) = &self.devices[bridge.0].kind else { return };
        let target = if dst == own {
            Some(bridge)
        } else if dst.is_unicast() {
            b.lookup(dst, vid, now)
        } else {
            None
        };
        match target {
            Some(t) if t == ingress => self.devices[bridge.0].counters.drop("same-port"),
            Some(t) if t == bridge => self.bridge_up(bridge, pkt, len, class, depth),
            Some(t) => self.bridge_egress(bridge, t, pkt, len, class, depth),
            None => {
                // Flood to every other member of the VLAN (and up to the host).
                let members: Vec<DeviceId> = b
                    .ports
                    .iter()
                    .filter(|(p, v)| *p != ingress && (!b.vlan_filtering || v.member(vid).is_some()))
                    .map(|(p, _)| *p)
                    .collect();
                // Unknown unicast is not passed up (Linux: only a promiscuous
                // bridge receives it); broadcast and multicast are.
                let to_self =
                    ingress != bridge && !dst.is_unicast() && (!b.vlan_filtering || b.self_vlans.member(vid).is_some());
                for p in members {
                    self.bridge_egress(bridge, p, pkt.clone(), len, class, depth);
                }
                if to_self {
                    self.bridge_up(bridge, pkt, len, class, depth);
                }
            }
        }
    }

    /// Delivers a frame to the bridge device's own stack.
    /// The bridge device is an egress like a port: with VLAN filtering the
    /// frame leaves untagged if the bridge's own membership of `vid` is
    /// untagged, tagged otherwise (so a VLAN device on the bridge, such as
    /// `br0.10`, gets it).
    fn bridge_up(&mut self, bridge: DeviceId, mut pkt: Packet, mut len: usize, class: BridgeClass, depth: usize) {
        let BridgeClass { vid, tagged } = class;
        let DeviceKind::Bridge(b) = &self.devices[bridge.0].kind else { return };
        if b.vlan_filtering {
            let ok = match (tagged, b.self_vlans.member(vid)) {
                (true, Some(true)) => {
                    len -= 4;
                    pkt.pop_vlan_tag().is_ok()
                }
                (false, Some(false)) => {
                    len += 4;
                    pkt.push_vlan_tag(0x8100, vid).is_ok()
                }
                (_, Some(_)) => true,
                (_, None) => {
                    self.devices[bridge.0].counters.drop("vlan-filtered");
                    return;
                }
            };
            if !ok {
                self.devices[bridge.0].counters.drop("vlan-tagging");
                return;
            }
        }
        self.deliver_up(bridge, pkt, len, depth + 1);
    }

    fn bridge_xmit(&mut self, bridge: DeviceId, pkt: Packet, len: usize, depth: usize) {
        self.bridge_forward(bridge, bridge, pkt, len, depth);
    }

    // ---------------------------------------------------------------- receive

    /// A packet arrives from the wire on port `port`: it climbs the stack
    /// (master, VLAN uppers, router) or is delivered to the device's
    /// [`Device::local`] queue; forwarded packets are transmitted.
    pub fn receive(&mut self, port: DeviceId, pkt: Packet) {
        self.receive_one(port, pkt);
        self.receive_link_replies();
    }

    /// [`Graph::receive`] without the link replies: a raw-IP port's driver
    /// frames the packet first.
    fn receive_one(&mut self, port: DeviceId, pkt: Packet) {
        let d = &mut self.devices[port.0];
        let pkt = match &mut d.kind {
            DeviceKind::Port(driver) if d.medium == Medium::Ip => match driver.link_input(pkt, d.mac) {
                Ok(p) => p,
                Err(reason) => {
                    d.counters.drop(reason);
                    return;
                }
            },
            _ => pkt,
        };
        let len = pkt.total_len();
        self.rx(port, pkt, len, 0);
    }

    /// Receives the frames raw-IP drivers answered themselves
    /// ([`LinkOutput::Reply`]) on their ports, at most [`MAX_LINK_REPLIES`].
    fn receive_link_replies(&mut self) {
        for _ in 0..MAX_LINK_REPLIES {
            let Some((port, pkt)) = self.link_replies.pop_front() else { return };
            let len = pkt.total_len();
            self.rx(port, pkt, len, 0);
        }
    }

    /// Polls every port driver once and processes what they received;
    /// returns the packets processed.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        for i in 0..self.devices.len() {
            while let Some(p) = self.recv_from(i) {
                self.receive_one(DeviceId(i), p);
                n += 1;
            }
            let d = &mut self.devices[i];
            if let DeviceKind::Port(driver) = &mut d.kind {
                let counters = &mut d.counters;
                driver.take_drops(&mut |reason, n| counters.drop_n(reason, n));
            }
        }
        self.receive_link_replies();
        n
    }

    fn recv_from(&mut self, i: usize) -> Option<Packet> {
        match &mut self.devices[i].kind {
            DeviceKind::Port(d) => d.recv(),
            _ => None,
        }
    }

    /// The driver of port `id` (`None` for other devices).
    pub fn port_driver_mut(&mut self, id: DeviceId) -> Option<&mut dyn PortDriver> {
        match &mut self.devices[id.0].kind {
            DeviceKind::Port(d) => Some(d.as_mut()),
            _ => None,
        }
    }

    /// Adds the drops port `id`'s driver counted itself
    /// ([`PortDriver::take_drops`]) to the port's counters.
    pub fn collect_driver_drops(&mut self, id: DeviceId) {
        let d = &mut self.devices[id.0];
        if let DeviceKind::Port(driver) = &mut d.kind {
            let counters = &mut d.counters;
            driver.take_drops(&mut |reason, n| counters.drop_n(reason, n));
        }
    }

    /// Counts `n` drops of `reason` on device `id`.
    pub fn count_drops(&mut self, id: DeviceId, reason: &'static str, n: u64) {
        self.devices[id.0].counters.drop_n(reason, n);
    }

    /// Discards every packet waiting in a [`Device::local`] queue, counting
    /// each as a drop `no-host-stack` on its device: for a running engine,
    /// which has no host stack above its devices. Returns how many.
    pub fn discard_local(&mut self) -> u64 {
        let mut total = 0;
        for d in &mut self.devices {
            let n = d.local.len() as u64;
            if n > 0 {
                d.local.clear();
                d.counters.drop_n("no-host-stack", n);
                total += n;
            }
        }
        total
    }

    /// Takes the oldest packet delivered locally on `id`.
    pub fn take_local(&mut self, id: DeviceId) -> Option<Packet> {
        self.devices[id.0].local.pop_front()
    }

    /// Receive on `id`; `len` as for [`Graph::xmit`].
    fn rx(&mut self, id: DeviceId, pkt: Packet, len: usize, depth: usize) {
        let d = &mut self.devices[id.0];
        d.counters.rx_packets += 1;
        d.counters.rx_bytes += len as u64;
        if pkt.meta.is_gso() {
            d.counters.rx_superpackets += 1;
        }
        if depth > MAX_DEPTH {
            d.counters.drop("too-deep");
            return;
        }
        if let Some(m) = d.master {
            match &self.devices[m.0].kind {
                DeviceKind::Bridge(_) => return self.bridge_forward(m, id, pkt, len, depth + 1),
                DeviceKind::Bond(b) if b.mode == BondMode::ActiveBackup && b.active != Some(id) => {
                    self.devices[id.0].counters.drop("inactive-slave");
                    return;
                }
                DeviceKind::Team(t) if t.mode == TeamMode::Activebackup && t.active != Some(id) => {
                    self.devices[id.0].counters.drop("inactive-slave");
                    return;
                }
                _ => return self.rx(m, pkt, len, depth + 1),
            }
        }
        self.deliver_up(id, pkt, len, depth);
    }

    /// After the master step: VLAN uppers, router, local delivery.
    fn deliver_up(&mut self, id: DeviceId, mut pkt: Packet, len: usize, depth: usize) {
        if let Some((tpid, vid)) = outer_tag(pkt.linear()) {
            let up = self.devices[id.0].vlan_uppers.iter().copied().find(
                |u| matches!(self.devices[u.0].kind, DeviceKind::Vlan(v) if v.vid == vid && v.proto.tpid() == tpid),
            );
            if let Some(u) = up {
                if pkt.pop_vlan_tag().is_err() {
                    self.devices[id.0].counters.drop("vlan-pop");
                    return;
                }
                return self.rx(u, pkt, len - 4, depth + 1);
            }
        }
        if self.router.has_interface(id) {
            let mut out = std::mem::take(&mut self.router_out);
            let now = self.now_ns;
            if let Err(reason) = self.router.input(id, pkt, len, now, &self.devices, &mut out) {
                self.devices[id.0].counters.drop(reason);
            }
            self.finish_router_work(out);
            return;
        }
        self.devices[id.0].local.push_back(pkt);
    }

    /// After the router ran: adds the drops it counted itself
    /// ([`super::router::Router::take_drops`]) to their devices, transmits
    /// its output `out` and keeps the emptied vector for the next call.
    fn finish_router_work(&mut self, mut out: Vec<(DeviceId, Packet, usize)>) {
        let devices = &mut self.devices;
        self.router.take_drops(|dev, reason, n| devices[dev.0].counters.drop_n(reason, n));
        for (dev, p, n) in out.drain(..) {
            self.xmit(dev, p, n, 0);
        }
        self.router_out = out;
    }

    /// Periodic work at the engine clock `now_ns` (the worker calls it every
    /// `publish_interval`): the router's timers (reassembly lifetimes,
    /// neighbour solicitations and give-ups, see [`super::router::Router::housekeeping`]).
    /// Packets dropped there are counted on their egress device;
    /// re-solicitations are sent like any router output.
    pub fn housekeeping(&mut self, now_ns: u64) {
        let mut out = std::mem::take(&mut self.router_out);
        self.router.housekeeping(now_ns, &mut out);
        self.finish_router_work(out);
        self.receive_link_replies();
    }

    /// Sends a packet from the router's host side (e.g. a locally generated
    /// IP packet): routed, NATed and resolved like forwarded traffic.
    ///
    /// # Errors
    /// Why the packet was dropped (no route, neighbour queue full, ...);
    /// there is no ingress device to count it on.
    pub fn route_local(&mut self, pkt: Packet) -> Result<(), &'static str> {
        let mut out = std::mem::take(&mut self.router_out);
        let now = self.now_ns;
        let res = self.router.output_local(pkt, now, &self.devices, &mut out);
        self.finish_router_work(out);
        self.receive_link_replies();
        res
    }
}

fn record_outcome(c: &mut DeviceCounters, o: &GsoOutcome) {
    match *o {
        GsoOutcome::PassedThrough => c.tx_passthrough += 1,
        GsoOutcome::Completed { csum_completed } => c.checksums_completed += u64::from(csum_completed),
        GsoOutcome::Segmented { segments, csum_completed } => {
            c.tx_segmented += 1;
            c.segments_produced += segments as u64;
            if csum_completed {
                c.checksums_completed += segments as u64;
            }
        }
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
