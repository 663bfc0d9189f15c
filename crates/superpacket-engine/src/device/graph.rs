//! The device graph: the wiring of ports, VLAN devices, bonds, teams,
//! bridges and the router (which device sits on which), their features
//! kept consistent (offload-rules 6.1, 6.4, 6.5), and the walk that moves a
//! packet through them (3.1, 6.2, 6.3).
//!
//! Each device kind implements [`NetDevice`] in its own module and owns its
//! receive handling and its transmit ([`super::netdev`]); the graph only
//! dispatches. A walk is a queue of steps, each "device D receives" or
//! "device D transmits":
//!
//! - **transmit through D**: D's own transmit runs (a VLAN device pushes
//!   its tag and hands the packet to its lower, a bond or team picks a
//!   slave, a bridge looks up its FDB, a port runs the validate step and its
//!   driver, the router routes a locally generated packet).
//! - **D receives** (from the wire, or from a device below): the one handler
//!   the wiring names takes it, as Linux's `__netif_receive_skb_core` does:
//!   D's master's receive (Linux's `rx_handler`: bridge forwarding, a bond's
//!   or team's slave check); else the receive of the VLAN device on D whose
//!   tag the frame carries; else D hands the packet to its L3 upper (the
//!   router, when D has addresses), which receives it as a step of its own;
//!   else D's host side ([`Device::local`]).
//!
//! Every step ends in one [`Verdict`], counted on its device
//! ([`DeviceCounters::forwarded`], `delivered`, `held`, `refused`).
//!
//! A port whose driver works on raw IP ([`PortDriver::medium`], a TUN) is
//! an Ethernet port on a point-to-point link to the graph: its driver frames
//! what it receives ([`PortDriver::link_input`], after the port's GRO) and
//! strips what it transmits ([`PortDriver::link_output`], in the port's
//! transmit); the ARP and neighbour solicitations it answers itself are
//! received on the port after the operation that sent them
//! ([`super::LinkOutput::Reply`]).
//!
//! With [`StackMode::Legacy`] every device runs the validate step before its
//! transmit: the first device whose features lack the packet's GSO type
//! segments it in software and the segments descend separately; the QinQ
//! rule is applied in the core.

use super::bond::{Bond, BondMode, HashPolicy};
use super::bridge::{Bridge, PortVlans};
use super::features::{
    DeviceFeatures, FeaturesCheck, NetdevFeatures, PacketInfo, StackMode, effective_features, gso_ok, target_caps,
};
use super::netdev::{Cx, Hop, NetDevice, Run, Shared, Verdict};
use super::port::{HeldFrame, PortDevice, PortDriver, record_outcome};
use super::router::{Router, UdpSocket};
use super::tables::TableUsage;
use super::team::{Team, TeamMode};
use super::udp_tunnel::{self, TunnelConfig, UdpTunnel};
use super::vlan::{Vlan, VlanProto, outer_tag};
use super::xconnect::Xconnect;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use superpacket::offload::gso::{SegmentSink, Segmenter, SgFrame};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::wire::{MacAddr, Medium};

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
    /// A master that takes no more lowers (a cross-connect has two).
    #[error("{name:?} already has {max} members, the most a {kind} takes")]
    TooManyLowers {
        /// The master's name.
        name: String,
        /// Its kind.
        kind: &'static str,
        /// Most lowers it takes.
        max: usize,
    },
    /// A VLAN id outside 1..=4094.
    #[error("VLAN id {0} is outside 1..=4094")]
    BadVid(u16),
    /// A tunnel device that cannot work as configured.
    #[error("tunnel {name:?}: {why}")]
    BadTunnel {
        /// Device name.
        name: String,
        /// What is wrong.
        why: String,
    },
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
    /// Steps of this device (packets received or given to transmit) that
    /// ended handed on to other devices or to the driver.
    pub forwarded: u64,
    /// Steps that ended on this device's host side ([`Device::local`]) or
    /// were consumed by the device itself (ARP and NDP at the router).
    pub delivered: u64,
    /// Steps that ended in a bounded table (the router's neighbour queue,
    /// reassembly): they leave it later as transmits or counted drops.
    pub held: u64,
    /// Steps that ended in a drop; each reason is counted in `drops` of
    /// the device that refused the packet (this one or the handler's).
    ///
    /// Invariant: `rx_packets + tx_packets == forwarded + delivered + held
    /// + refused` (checked by the `graph` fuzz target).
    pub refused: u64,
}

impl DeviceCounters {
    /// Total drops.
    pub fn dropped(&self) -> u64 {
        self.drops.values().sum()
    }
    /// Counts `packets` steps of `bytes` in all, `superpackets` of them
    /// superpackets: received (`rx`) or given to transmit.
    #[inline(always)]
    pub(crate) fn count_steps(&mut self, rx: bool, packets: u64, bytes: u64, superpackets: u64) {
        let (p, b, s) = self.step_counters(rx);
        *p += packets;
        *b += bytes;
        *s += superpackets;
    }
    /// The packet, byte and superpacket counters of received (`rx`) or
    /// transmitted steps.
    #[inline(always)]
    fn step_counters(&mut self, rx: bool) -> (&mut u64, &mut u64, &mut u64) {
        if rx {
            (&mut self.rx_packets, &mut self.rx_bytes, &mut self.rx_superpackets)
        } else {
            (&mut self.tx_packets, &mut self.tx_bytes, &mut self.tx_superpackets)
        }
    }
    // Out of line: a map insertion, where the walk's steps only need a call.
    #[inline(never)]
    pub(crate) fn drop_n(&mut self, reason: &'static str, n: u64) {
        *self.drops.entry(reason).or_insert(0) += n;
    }
}

/// One device of a [`Graph`]: what every kind has (Linux's `struct
/// net_device`); the kind's own state is behind [`Graph::kind`].
#[derive(Debug)]
pub struct Device {
    /// Unique name.
    pub name: String,
    /// The kind's name ([`NetDevice::kind`]).
    pub kind: &'static str,
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
    /// The L3 device handling what this one receives (the router, once the
    /// device has an address).
    pub l3_upper: Option<DeviceId>,
    /// Counters.
    pub counters: DeviceCounters,
    /// Packets delivered to this device's host side (no upper took them).
    pub local: VecDeque<Packet>,
}

/// The device graph. See the module documentation.
#[derive(Debug)]
pub struct Graph {
    /// What handlers share; its `link_replies` are the frames raw-IP
    /// drivers answered themselves ([`super::LinkOutput::Reply`]), received
    /// on their port once the current operation is done.
    sh: Shared,
    kinds: Vec<Box<dyn NetDevice>>,
    names: HashMap<String, DeviceId>,
    router: Option<DeviceId>,
    next_mac: u8,
    /// The lengths of a burst's packets ([`Graph::receive_burst`]'s runs):
    /// empty between bursts, its capacity kept.
    run_lens: Vec<usize>,
}

/// Most link replies received at the end of one operation (the rest wait
/// for the next one): a loop guard.
const MAX_LINK_REPLIES: usize = 64;

/// Default MTU of new devices.
pub const DEFAULT_MTU: usize = 1500;

/// Name of the router device a graph creates with its first address
/// ([`Graph::add_address`]); a suffix is added if a device already has it.
pub const ROUTER_NAME: &str = "router";

impl Default for Graph {
    fn default() -> Self {
        Graph::new(StackMode::Passthrough)
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
            sh: Shared {
                devices: Vec::new(),
                now_ns: 0,
                mode,
                segmenter: Segmenter::new(),
                steps: VecDeque::new(),
                link_replies: VecDeque::new(),
                held: None,
            },
            kinds: Vec::new(),
            names: HashMap::new(),
            router: None,
            next_mac: 1,
            run_lens: Vec::new(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> StackMode {
        self.sh.mode
    }

    /// Switches the mode: virtual devices get the mode's default requested
    /// features back and every device is recomputed.
    pub fn set_mode(&mut self, mode: StackMode) {
        self.sh.mode = mode;
        for (d, k) in self.sh.devices.iter_mut().zip(&self.kinds) {
            if let Some(wanted) = k.default_features(mode) {
                d.feat.hw_features = wanted;
                d.feat.wanted = wanted;
            }
        }
        for i in 0..self.sh.devices.len() {
            self.recompute_one(DeviceId(i));
        }
    }

    /// The engine clock (ns) used for ageing and timeouts.
    pub fn now_ns(&self) -> u64 {
        self.sh.now_ns
    }

    /// Sets the engine clock.
    pub fn set_time(&mut self, now_ns: u64) {
        self.sh.now_ns = now_ns;
    }

    /// All devices, in creation order (lowers before uppers).
    pub fn devices(&self) -> &[Device] {
        &self.sh.devices
    }

    /// One device.
    pub fn device(&self, id: DeviceId) -> &Device {
        &self.sh.devices[id.0]
    }

    /// One device, writable (changing features directly skips propagation:
    /// use [`Graph::set_features`]).
    pub fn device_mut(&mut self, id: DeviceId) -> &mut Device {
        &mut self.sh.devices[id.0]
    }

    /// The kind-specific part of device `id`.
    pub fn kind(&self, id: DeviceId) -> &dyn NetDevice {
        self.kinds[id.0].as_ref()
    }

    /// Device `id`'s kind-specific state, if it is a `T` (a [`Bridge`],
    /// [`Bond`], [`Team`], [`Vlan`], [`Router`] or [`PortDevice`]).
    pub fn kind_as<T: 'static>(&self, id: DeviceId) -> Option<&T> {
        self.kinds[id.0].as_any().downcast_ref::<T>()
    }

    /// Device `id`'s kind-specific state, writable, if it is a `T`.
    pub fn kind_as_mut<T: 'static>(&mut self, id: DeviceId) -> Option<&mut T> {
        self.kinds[id.0].as_any_mut().downcast_mut::<T>()
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
        &self.sh.devices[id.0].counters
    }

    /// Resets every device's counters.
    pub fn reset_counters(&mut self) {
        for d in &mut self.sh.devices {
            d.counters = DeviceCounters::default();
        }
    }

    /// The concrete driver of port `id`, if it is a `T`.
    pub fn driver_mut<T: 'static>(&mut self, id: DeviceId) -> Option<&mut T> {
        self.kinds[id.0].port_driver()?.as_any_mut().downcast_mut::<T>()
    }

    /// The driver of port `id` (`None` for other devices).
    pub fn port_driver_mut(&mut self, id: DeviceId) -> Option<&mut dyn PortDriver> {
        self.kinds[id.0].port_driver()
    }

    /// Whether `id` is a port.
    pub fn is_port(&self, id: DeviceId) -> bool {
        self.kinds[id.0].as_any().is::<PortDevice>()
    }

    // ------------------------------------------------------------- building

    /// Adds a device of any kind (a kind from outside this crate included):
    /// its requested features are `feat`, or the kind's
    /// [`NetDevice::default_features`] when it has them.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_device(
        &mut self,
        name: &str,
        kind: Box<dyn NetDevice>,
        feat: DeviceFeatures,
    ) -> Result<DeviceId, DeviceError> {
        if self.names.contains_key(name) {
            return Err(DeviceError::NameTaken(name.to_string()));
        }
        let id = DeviceId(self.sh.devices.len());
        let mac = MacAddr([0x02, 0x53, 0x50, 0, (id.0 >> 8) as u8, self.next_mac]);
        self.next_mac = self.next_mac.wrapping_add(1);
        let (check, medium) = match kind.as_any().downcast_ref::<PortDevice>() {
            Some(p) => (p.driver.features_check(), p.driver.medium()),
            None => (FeaturesCheck::Any, Medium::Ethernet),
        };
        let feat = match kind.default_features(self.sh.mode) {
            Some(wanted) => {
                let mut f = DeviceFeatures::new(wanted);
                f.hw_features = wanted;
                f
            }
            None => feat,
        };
        self.sh.devices.push(Device {
            name: name.to_string(),
            kind: kind.kind(),
            feat,
            check,
            medium,
            mac,
            mtu: DEFAULT_MTU,
            carrier: true,
            master: None,
            lowers: Vec::new(),
            vlan_uppers: Vec::new(),
            l3_upper: None,
            counters: DeviceCounters::default(),
            local: VecDeque::new(),
        });
        self.kinds.push(kind);
        self.names.insert(name.to_string(), id);
        self.recompute_one(id);
        Ok(id)
    }

    /// Adds a port backed by `driver`; its features are the driver's
    /// hardware features after [`super::features::fix_features`].
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_port(&mut self, name: &str, driver: Box<dyn PortDriver>) -> Result<DeviceId, DeviceError> {
        let mut feat = DeviceFeatures::new(driver.hw_features());
        feat.vlan_features = driver.vlan_features();
        feat.gso_partial_features = driver.gso_partial_features();
        self.add_device(name, Box::new(PortDevice::new(driver)), feat)
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
        let dup = self.sh.devices[lower.0]
            .vlan_uppers
            .iter()
            .any(|u| self.kinds[u.0].vlan_tag() == Some((proto.tpid(), vid)));
        if dup {
            return Err(DeviceError::DuplicateVlan { lower: self.sh.devices[lower.0].name.clone(), vid });
        }
        let id = self.add_device(name, Box::new(Vlan { proto, vid }), DeviceFeatures::default())?;
        let mac = self.sh.devices[lower.0].mac;
        let mtu = self.sh.devices[lower.0].mtu;
        let d = &mut self.sh.devices[id.0];
        d.lowers.push(lower);
        d.mac = mac;
        d.mtu = mtu;
        self.sh.devices[lower.0].vlan_uppers.push(id);
        self.recompute(id);
        Ok(id)
    }

    /// Adds a VXLAN or Geneve device ([`super::udp_tunnel`]). Its underlay
    /// is routed by the router, which must exist with `cfg.local` as one of
    /// its addresses ([`Graph::add_address`] first); the device's UDP socket
    /// is bound there. Its MTU leaves room for the outer headers (1450 over
    /// IPv4, 1430 over IPv6, as Linux's defaults).
    ///
    /// # Errors
    /// Name taken; a bad configuration, no router, `local` not the
    /// router's, or the port already bound ([`DeviceError::BadTunnel`]).
    pub fn add_tunnel(&mut self, name: &str, cfg: TunnelConfig) -> Result<DeviceId, DeviceError> {
        let bad = |why: String| DeviceError::BadTunnel { name: name.to_string(), why };
        cfg.check().map_err(bad)?;
        let router = self.router.ok_or_else(|| bad("no router: give an interface an address first".into()))?;
        let r = self.router().ok_or_else(|| bad("no router".into()))?;
        if !r.interfaces.iter().any(|i| i.addrs.iter().any(|(a, _)| *a == cfg.local)) {
            return Err(bad(format!("local address {} is none of the router's", cfg.local)));
        }
        if r.udp_sockets.iter().any(|s| s.port == cfg.port && s.local.is_none_or(|a| a == cfg.local)) {
            return Err(bad(format!("UDP port {} on {} is already bound", cfg.port, cfg.local)));
        }
        let (port, local, v6) = (cfg.port, cfg.local, cfg.local.is_ipv6());
        let id = self.add_device(name, Box::new(UdpTunnel::new(cfg, router)), DeviceFeatures::default())?;
        self.sh.devices[id.0].mtu = DEFAULT_MTU - udp_tunnel::overhead(v6);
        self.router_mut().udp_sockets.push(UdpSocket { port, local: Some(local), dev: id });
        Ok(id)
    }

    /// The UDP ports of the graph's tunnel devices with their protocol:
    /// Linux's UDP tunnel sockets, which make GRO on any device coalesce
    /// the datagrams to them on their inner flows (offload-rules 2.6). The
    /// engine configures every port's GRO with them.
    pub fn tunnel_ports(&self) -> Vec<(u16, superpacket::packet::TunnelKind)> {
        let Some(r) = self.router() else { return Vec::new() };
        r.udp_sockets
            .iter()
            .filter_map(|s| self.kind_as::<UdpTunnel>(s.dev).map(|t| (s.port, t.config().protocol)))
            .collect()
    }

    /// Adds a bond without slaves.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_bond(&mut self, name: &str, mode: BondMode, hash: HashPolicy) -> Result<DeviceId, DeviceError> {
        self.add_device(name, Box::new(Bond::new(mode, hash)), DeviceFeatures::default())
    }

    /// Adds a team without ports.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_team(&mut self, name: &str, mode: TeamMode) -> Result<DeviceId, DeviceError> {
        self.add_device(name, Box::new(Team::new(mode)), DeviceFeatures::default())
    }

    /// Adds a cross-connect without members ([`Xconnect`]: at most two).
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_xconnect(&mut self, name: &str) -> Result<DeviceId, DeviceError> {
        self.add_device(name, Box::new(Xconnect::new()), DeviceFeatures::default())
    }

    /// Adds a bridge without ports.
    ///
    /// # Errors
    /// [`DeviceError::NameTaken`].
    pub fn add_bridge(&mut self, name: &str, vlan_filtering: bool) -> Result<DeviceId, DeviceError> {
        self.add_device(name, Box::new(Bridge::new(vlan_filtering)), DeviceFeatures::default())
    }

    /// Makes this graph's router share the NAT connection table and the
    /// neighbour table of `first`'s ([`Router::share_tables`]): the engine
    /// builds one graph per worker from one topology and links every
    /// other worker's to the first's. Nothing happens without routers.
    pub fn share_tables(&mut self, first: &mut Graph) {
        if self.router.is_none() || first.router.is_none() {
            return;
        }
        self.router_mut().share_tables(first.router_mut());
    }

    /// The router device, if the graph has one (it is created with the
    /// first address, [`Graph::add_address`]).
    pub fn router_id(&self) -> Option<DeviceId> {
        self.router
    }

    /// The router (routes, neighbours, NAT), if the graph has one.
    pub fn router(&self) -> Option<&Router> {
        self.router.and_then(|r| self.kind_as::<Router>(r))
    }

    /// The router, created (as device [`ROUTER_NAME`]) if the graph has
    /// none yet.
    pub fn router_mut(&mut self) -> &mut Router {
        let id = match self.router {
            Some(id) => id,
            None => {
                let mut name = ROUTER_NAME.to_string();
                let mut n = 1;
                while self.names.contains_key(&name) {
                    name = format!("{ROUTER_NAME}-{n}");
                    n += 1;
                }
                let id = self.add_device(&name, Box::<Router>::default(), DeviceFeatures::default());
                let id = id.unwrap_or_else(|_| unreachable!("the name is free"));
                self.router = Some(id);
                id
            }
        };
        let router = self.kinds[id.0]
            .as_any_mut()
            .downcast_mut::<Router>()
            .unwrap_or_else(|| unreachable!("the router is a Router"));
        router.device = Some(id);
        router
    }

    /// Gives device `dev` the address `addr/len`: it becomes a router
    /// interface (what it receives goes to the router, [`Device::l3_upper`])
    /// with a connected route.
    pub fn add_address(&mut self, dev: DeviceId, addr: IpAddr, len: u8) {
        self.router_mut().add_address(dev, addr, len);
        self.sh.devices[dev.0].l3_upper = self.router;
    }

    /// Enslaves `lower` to the bond, team, bridge or cross-connect `master`
    /// (bridge ports get VLAN 1 pvid untagged; see
    /// [`Graph::set_bridge_port_vlans`]).
    ///
    /// # Errors
    /// Wrong kind of master, a master with all the lowers it takes
    /// ([`DeviceError::TooManyLowers`]), or `lower` already enslaved.
    pub fn enslave(&mut self, master: DeviceId, lower: DeviceId) -> Result<(), DeviceError> {
        if !self.kinds[master.0].is_master() {
            return Err(DeviceError::WrongKind {
                name: self.sh.devices[master.0].name.clone(),
                expected: "bond, team, bridge or xconnect",
            });
        }
        let kind = &self.kinds[master.0];
        if let Some(max) = kind.max_lowers()
            && self.sh.devices[master.0].lowers.len() >= max
        {
            return Err(DeviceError::TooManyLowers {
                name: self.sh.devices[master.0].name.clone(),
                kind: kind.kind(),
                max,
            });
        }
        if self.sh.devices[lower.0].master.is_some() || lower == master {
            return Err(DeviceError::AlreadyEnslaved(self.sh.devices[lower.0].name.clone()));
        }
        self.sh.devices[lower.0].master = Some(master);
        self.sh.devices[master.0].lowers.push(lower);
        let mtu = self.sh.devices[lower.0].mtu;
        let m = &mut self.sh.devices[master.0];
        if m.lowers.len() == 1 {
            m.mtu = mtu;
        }
        self.kinds[master.0].enslaved(lower);
        self.kinds[master.0].lowers_changed(master, &self.sh.devices);
        self.recompute(master);
        Ok(())
    }

    /// Removes `lower` from its master.
    pub fn release(&mut self, lower: DeviceId) {
        let Some(master) = self.sh.devices[lower.0].master.take() else { return };
        self.sh.devices[master.0].lowers.retain(|l| *l != lower);
        self.kinds[master.0].released(lower);
        self.kinds[master.0].lowers_changed(master, &self.sh.devices);
        self.recompute(master);
    }

    /// Sets the VLAN membership of bridge port `port` (or of the bridge
    /// itself when `port` is the bridge).
    ///
    /// # Errors
    /// If `port` is neither the bridge nor one of its ports.
    pub fn set_bridge_port_vlans(&mut self, port: DeviceId, vlans: PortVlans) -> Result<(), DeviceError> {
        if let Some(b) = self.kind_as_mut::<Bridge>(port) {
            b.self_vlans = vlans;
            return Ok(());
        }
        let master = self.sh.devices[port.0].master;
        match master.and_then(|m| self.kind_as_mut::<Bridge>(m)).map(|b| b.set_port_vlans(port, vlans)) {
            Some(true) => Ok(()),
            _ => Err(DeviceError::WrongKind { name: self.sh.devices[port.0].name.clone(), expected: "bridge port" }),
        }
    }

    /// Sets or clears wanted features of a device (`ethtool -K`): the
    /// device's features are recomputed, then every upper's (6.4, 6.5).
    pub fn set_features(&mut self, id: DeviceId, on: NetdevFeatures, off: NetdevFeatures) {
        let f = &mut self.sh.devices[id.0].feat;
        f.wanted = (f.wanted | on).without(off);
        self.recompute(id);
    }

    /// Sets the primary slave of an active-backup bond (`primary`): it is
    /// the active slave whenever its carrier is up.
    pub fn set_bond_primary(&mut self, bond: DeviceId, primary: Option<DeviceId>) {
        if let Some(b) = self.kind_as_mut::<Bond>(bond) {
            b.primary = primary;
            self.kinds[bond.0].lowers_changed(bond, &self.sh.devices);
        }
    }

    /// Sets the carrier of a device: bonds and teams over it fail over.
    pub fn set_carrier(&mut self, id: DeviceId, up: bool) {
        self.sh.devices[id.0].carrier = up;
        if let Some(m) = self.sh.devices[id.0].master {
            self.kinds[m.0].lowers_changed(m, &self.sh.devices);
        }
    }

    /// Sets the MTU of a device.
    pub fn set_mtu(&mut self, id: DeviceId, mtu: usize) {
        self.sh.devices[id.0].mtu = mtu;
    }

    /// Sets the MAC address of a device.
    pub fn set_mac(&mut self, id: DeviceId, mac: MacAddr) {
        self.sh.devices[id.0].mac = mac;
    }

    /// Sets the features_check hook of a device.
    pub fn set_features_check(&mut self, id: DeviceId, check: FeaturesCheck) {
        self.sh.devices[id.0].check = check;
    }

    /// Sets the GSO limits of a port (uppers follow).
    pub fn set_gso_limits(&mut self, id: DeviceId, max_size: usize, max_segs: u16) {
        let f = &mut self.sh.devices[id.0].feat;
        f.gso_max_size = max_size;
        f.gso_max_segs = max_segs;
        self.recompute(id);
    }

    /// Recomputes `id` and then every device above it.
    fn recompute(&mut self, id: DeviceId) {
        self.recompute_one(id);
        let mut uppers = self.sh.devices[id.0].vlan_uppers.clone();
        if let Some(m) = self.sh.devices[id.0].master {
            uppers.push(m);
        }
        for u in uppers {
            self.recompute(u);
        }
    }

    /// Recomputes one device's features from its lowers.
    fn recompute_one(&mut self, id: DeviceId) {
        let d = &self.sh.devices[id.0];
        let lowers: Vec<DeviceFeatures> = d.lowers.iter().map(|l| self.sh.devices[l.0].feat).collect();
        let new = self.kinds[id.0].compute_features(&d.feat, &lowers, self.sh.mode);
        self.sh.devices[id.0].feat = new;
    }

    /// How full every device's bounded tables are (see [`super::tables`]).
    pub fn table_usage(&self, out: &mut Vec<TableUsage>) {
        for k in &self.kinds {
            k.table_usage(out);
        }
    }

    // ------------------------------------------------------------- the walk

    /// Transmits `pkt` through device `id` (see the module documentation).
    /// Never fails: problems are drops counted on the device concerned.
    pub fn transmit(&mut self, id: DeviceId, mut pkt: Packet) {
        let len = pkt.total_len();
        self.walk(Hop::Transmit(id), &mut pkt, len, 0);
        self.receive_link_replies();
    }

    /// A packet arrives from the wire on port `port`: it climbs the stack
    /// (master, VLAN uppers, router) or is delivered to the device's
    /// [`Device::local`] queue; forwarded packets are transmitted.
    pub fn receive(&mut self, port: DeviceId, mut pkt: Packet) {
        self.receive_one(port, &mut pkt);
        self.receive_link_replies();
    }

    /// Receives a burst port `port`'s driver gave
    /// ([`PortDriver::recv_burst_held`]): every packet of `burst` in order,
    /// as [`Graph::receive`] would, or as [`Graph::receive_held`] with its
    /// held payload from `held` ([`HeldFrame::burst_index`]); a packet
    /// without an arrival time gets `arrival_ns`. Each packet is walked in
    /// its place in `burst` (a packet is 128 bytes: moving it out of the
    /// burst and into the walk were copies per packet); both vectors are
    /// left empty, their capacity kept.
    ///
    /// A burst of whole Ethernet frames into a master goes by runs
    /// ([`NetDevice::receive_run`]): the packets its master sends on to one
    /// port unchanged are counted together and handed to that port as one
    /// run ([`PortDevice::transmit_run`]); the others are walked one by
    /// one. Each port gets its packets in the order they came.
    pub fn receive_burst(
        &mut self,
        port: DeviceId,
        burst: &mut Vec<Packet>,
        held: &mut Vec<HeldFrame>,
        arrival_ns: u64,
    ) {
        let d = &self.sh.devices[port.0];
        let mut from = 0;
        if let Some(m) = d.master
            && held.is_empty()
            && d.medium == Medium::Ethernet
        {
            from = self.receive_runs(port, m, burst, arrival_ns);
        }
        let mut held = held.drain(..);
        for (i, pkt) in burst.iter_mut().enumerate().skip(from) {
            pkt.meta.arrival_ns.get_or_insert(arrival_ns);
            match take_held_of(&mut held, i) {
                Some(h) => self.receive_held_in_place(port, pkt, h),
                None => {
                    self.receive_one(port, pkt);
                    self.receive_link_replies();
                }
            }
        }
        // Every held frame matched its packet: the driver numbers them by
        // their packet's place in the burst. One left over would mean its
        // packet went on without its payload; tests catch that here.
        debug_assert!(held.as_slice().is_empty(), "a held frame without its packet in the burst");
        drop(held);
        // What the walks left: shells of packets a driver took, or packets
        // dropped on the way.
        Packet::release_all(burst);
    }

    /// The runs of [`Graph::receive_burst`] for port `port` under master
    /// `m`: returns the index of the first packet left for the per-packet
    /// loop (the master decides no runs, [`Run::Each`]).
    fn receive_runs(&mut self, port: DeviceId, m: DeviceId, burst: &mut [Packet], arrival_ns: u64) -> usize {
        let mut lens = std::mem::take(&mut self.run_lens);
        lens.clear();
        lens.extend(burst.iter_mut().map(|p| {
            p.meta.arrival_ns.get_or_insert(arrival_ns);
            p.total_len_inline()
        }));
        let mut i = 0;
        while i < burst.len() {
            let (kind, mut cx) = self.cx(m, 0);
            match kind.receive_run(&mut cx, port, &mut burst[i..], lens[i]) {
                Run::To(t, n) => {
                    let end = (i + n.max(1)).min(burst.len());
                    self.count_received_run(port, &burst[i..end], &lens[i..end]);
                    self.transmit_run(t, &mut burst[i..end], &lens[i..end], 1);
                    i = end;
                }
                Run::First(verdict) => {
                    // The step `Graph::step` takes, its handler already called.
                    let pkt = &mut burst[i];
                    self.count_step(port, pkt, lens[i], 0, true);
                    if let Some((hop, n)) = self.settle(port, m, pkt, verdict) {
                        self.walk_chain(hop, pkt, n, 1);
                    }
                    self.drain_steps();
                    self.receive_link_replies();
                    i += 1;
                }
                Run::Each => break,
            }
        }
        self.run_lens = lens;
        i
    }

    /// Counts the receive steps of a run on `port`, each handed on
    /// ([`DeviceCounters::forwarded`]), as [`Graph::step`] counts one.
    fn count_received_run(&mut self, port: DeviceId, pkts: &[Packet], lens: &[usize]) {
        let bytes = lens.iter().sum::<usize>() as u64;
        let superpackets = pkts.iter().filter(|p| p.meta.is_gso()).count() as u64;
        let c = &mut self.sh.devices[port.0].counters;
        c.count_steps(true, pkts.len() as u64, bytes, superpackets);
        c.forwarded += pkts.len() as u64;
    }

    /// Transmits a run of packets (lengths `lens`) through device `t`, at
    /// `depth`, in order: a port takes the leading packets its transmit
    /// would send whole at once ([`PortDevice::transmit_run`]); every other
    /// packet is walked alone from `t`'s transmit.
    fn transmit_run(&mut self, t: DeviceId, pkts: &mut [Packet], lens: &[usize], depth: usize) {
        let mut i = 0;
        while i < pkts.len() {
            if depth <= MAX_DEPTH {
                let (kind, mut cx) = self.cx(t, depth);
                if let Some(port) = kind.as_port() {
                    i += port.transmit_run(&mut cx, &mut pkts[i..], &lens[i..]);
                    if i == pkts.len() {
                        break;
                    }
                }
            }
            self.walk(Hop::Transmit(t), &mut pkts[i], lens[i], depth);
            self.receive_link_replies();
            i += 1;
        }
    }

    /// [`Graph::receive`] of a packet whose last `held.len()` bytes are
    /// still in its sender's memory ([`super::port::PortDriver::recv_burst_held`]).
    /// The walk lets the payload pass only through steps that read headers
    /// alone (a port's receive into a bridge without VLAN filtering, the
    /// bridge's forwarding to one port, a port's transmit); the port whose
    /// driver takes it ([`super::port::PortDriver::xmit_held`]) copies it
    /// from the sender's memory; every other step, and a flood, first
    /// materialises it into the packet (one copy, as for any packet). The
    /// steps that let it pass keep the packet in the walk's slot (they
    /// never queue it), so the hold ends with the packet's own chain of
    /// steps: a payload still held then belonged to a dropped packet, and
    /// dropping it gives the sender's chain back, before any other packet
    /// (a flood's copies, queued) is walked. So no held payload outlives
    /// its packet, and none outlives this call.
    pub fn receive_held(&mut self, port: DeviceId, mut pkt: Packet, held: HeldFrame) {
        self.receive_held_in_place(port, &mut pkt, held);
    }

    /// [`Graph::receive_held`] of the packet in `pkt`'s slot.
    fn receive_held_in_place(&mut self, port: DeviceId, pkt: &mut Packet, held: HeldFrame) {
        if self.sh.devices[port.0].medium != Medium::Ethernet || self.sh.held.is_some() {
            match held.materialise(pkt) {
                Ok(()) => {
                    self.receive_one(port, pkt);
                    self.receive_link_replies();
                }
                Err(reason) => self.sh.devices[port.0].counters.drop_n(reason, 1),
            }
            return;
        }
        self.sh.held = Some(held);
        let len = pkt.total_len();
        self.walk_chain(Hop::Receive(port), pkt, len, 0);
        self.sh.held = None;
        self.drain_steps();
        self.receive_link_replies();
    }

    /// The counters of the segmenter the ports share.
    #[cfg(all(test, feature = "vhost-user"))]
    pub(crate) fn segmenter_counters(&self) -> &superpacket::offload::gso::GsoCounters {
        &self.sh.segmenter.counters
    }

    /// Whether a packet whose payload is held may take step `hop` as it is
    /// (see [`Graph::receive_held`]).
    fn held_may_pass(&self, hop: Hop) -> bool {
        match hop {
            Hop::Receive(id) => {
                self.is_port(id) && self.sh.devices[id.0].master.is_some_and(|m| self.kinds[m.0].passes_held_payload())
            }
            Hop::Transmit(id) => self.is_port(id) && self.sh.devices[id.0].medium == Medium::Ethernet,
            Hop::L3(..) | Hop::Deliver(_) => false,
        }
    }

    /// [`Graph::receive`] without the link replies: a raw-IP port's driver
    /// frames the packet first.
    #[inline(always)]
    fn receive_one(&mut self, port: DeviceId, pkt: &mut Packet) {
        let d = &mut self.sh.devices[port.0];
        // The medium first: the driver is a virtual call away, and only a
        // raw-IP port's is needed.
        if d.medium == Medium::Ip
            && let Some(driver) = self.kinds[port.0].port_driver()
        {
            match driver.link_input(std::mem::take(pkt), d.mac) {
                Ok(p) => *pkt = p,
                Err(reason) => {
                    d.counters.drop_n(reason, 1);
                    return;
                }
            }
        }
        let len = pkt.total_len_inline();
        self.walk(Hop::Receive(port), pkt, len, 0);
    }

    /// Receives the frames raw-IP drivers answered themselves
    /// ([`super::LinkOutput::Reply`]) on their ports, at most [`MAX_LINK_REPLIES`].
    fn receive_link_replies(&mut self) {
        for _ in 0..MAX_LINK_REPLIES {
            let Some((port, mut pkt)) = self.sh.link_replies.pop_front() else { return };
            let len = pkt.total_len();
            self.walk(Hop::Receive(port), &mut pkt, len, 0);
        }
    }

    /// Takes steps from `hop` with `pkt` until it ends, then the queued
    /// ones until none is left.
    fn walk(&mut self, hop: Hop, pkt: &mut Packet, len: usize, depth: usize) {
        self.walk_chain(hop, pkt, len, depth);
        self.drain_steps();
    }

    /// Takes steps from `hop` while each hands the packet on to one
    /// successor: the packet stays in the caller's slot `pkt` (no move, no
    /// queue); what is left there at the end (nothing, once a driver or a
    /// queue took it) is the caller's to drop.
    fn walk_chain(&mut self, hop: Hop, pkt: &mut Packet, len: usize, depth: usize) {
        let (mut hop, mut len, mut depth) = (hop, len, depth);
        while let Some((next, n)) = self.step(hop, pkt, len, depth) {
            hop = next;
            len = n;
            depth += 1;
        }
    }

    /// Queued steps only (after work that queued without a packet of its own).
    #[inline(always)]
    fn drain_steps(&mut self) {
        // Most walks queue nothing: no call for them.
        if !self.sh.steps.is_empty() {
            self.drain_queued();
        }
    }

    /// [`Graph::drain_steps`] once there are some.
    #[inline(never)]
    fn drain_queued(&mut self) {
        while let Some(mut s) = self.sh.steps.pop_front() {
            self.walk_chain(s.hop, &mut s.pkt, s.len, s.depth);
        }
    }

    /// One step: returns the next hop of the same packet, if any. A
    /// device's transmit and a master's receive (every step of a frame
    /// switched between ports) are inlined into the walk; the rest, and a
    /// held payload's materialisation, are calls, so that the walk's
    /// common path stays short.
    #[inline(always)]
    fn step(&mut self, hop: Hop, pkt: &mut Packet, len: usize, depth: usize) -> Option<(Hop, usize)> {
        if self.sh.held.is_some() && !self.held_may_pass(hop) && !self.materialise_for(hop, pkt) {
            return None;
        }
        let (id, handler) = match hop {
            Hop::Transmit(id) => {
                if !self.count_step(id, pkt, len, depth, false) {
                    return None;
                }
                if self.sh.mode == StackMode::Legacy && pkt.meta.is_gso() && !self.is_port(id) {
                    return self.legacy_segment(id, pkt, len, depth);
                }
                let (kind, mut cx) = self.cx(id, depth);
                let verdict = kind.transmit(&mut cx, pkt, len);
                return self.settle(id, id, pkt, verdict);
            }
            Hop::Receive(id) => match self.sh.devices[id.0].master {
                Some(m) => (id, m),
                None => return self.receive_unmastered(id, pkt, len, depth),
            },
            Hop::L3(..) | Hop::Deliver(_) => return self.l3_step(hop, pkt, len, depth),
        };
        if !self.count_step(id, pkt, len, depth, true) {
            return None;
        }
        let (kind, mut cx) = self.cx(handler, depth);
        let verdict = kind.receive(&mut cx, id, pkt, len);
        self.settle(id, handler, pkt, verdict)
    }

    /// Makes `pkt` whole before step `hop`, which may not let its held
    /// payload pass ([`Graph::held_may_pass`]); false (the drop counted on
    /// the step's device) if the payload could not be read.
    #[inline(never)]
    fn materialise_for(&mut self, hop: Hop, pkt: &mut Packet) -> bool {
        let Err(reason) = self.sh.materialise_held(pkt) else { return true };
        let id = match hop {
            Hop::Receive(id) | Hop::Transmit(id) | Hop::L3(id, _) | Hop::Deliver(id) => id,
        };
        self.sh.devices[id.0].counters.drop_n(reason, 1);
        false
    }

    /// Device `id`, without a master, receives: the VLAN device its tag
    /// names receives it, else its L3 upper, else its host side.
    #[inline(never)]
    fn receive_unmastered(&mut self, id: DeviceId, pkt: &mut Packet, len: usize, depth: usize) -> Option<(Hop, usize)> {
        if let Some(v) = self.vlan_upper(id, pkt) {
            if !self.count_step(id, pkt, len, depth, true) {
                return None;
            }
            let (kind, mut cx) = self.cx(v, depth);
            let verdict = kind.receive(&mut cx, id, pkt, len);
            return self.settle(id, v, pkt, verdict);
        }
        if !self.count_step(id, pkt, len, depth, true) {
            return None;
        }
        let d = &mut self.sh.devices[id.0];
        match d.l3_upper {
            // Handed to the L3 device: a receive step of its own.
            Some(l3) => {
                d.counters.forwarded += 1;
                Some((Hop::L3(l3, id), len))
            }
            None => self.settle(id, id, pkt, Verdict::Pass),
        }
    }

    /// An L3 device's receive ([`Hop::L3`]) or a delivery to a device's
    /// local socket ([`Hop::Deliver`]).
    #[inline(never)]
    fn l3_step(&mut self, hop: Hop, pkt: &mut Packet, len: usize, depth: usize) -> Option<(Hop, usize)> {
        match hop {
            Hop::L3(id, from) => {
                if !self.count_step(id, pkt, len, depth, true) {
                    return None;
                }
                let (kind, mut cx) = self.cx(id, depth);
                let verdict = kind.receive(&mut cx, from, pkt, len);
                self.settle(id, id, pkt, verdict)
            }
            Hop::Deliver(id) => {
                let (kind, mut cx) = self.cx(id, depth);
                let verdict = kind.deliver(&mut cx, pkt, len);
                if let Verdict::Up(n) = verdict {
                    return Some((Hop::Receive(id), n));
                }
                if !self.count_step(id, pkt, len, depth, true) {
                    return None;
                }
                self.settle(id, id, pkt, verdict)
            }
            Hop::Receive(_) | Hop::Transmit(_) => unreachable!("taken by Graph::step"),
        }
    }

    /// A context for device `me`'s handler.
    #[inline(always)]
    fn cx(&mut self, me: DeviceId, depth: usize) -> (&mut dyn NetDevice, Cx<'_>) {
        let cx = Cx { me, depth, sh: &mut self.sh };
        (self.kinds[me.0].as_mut(), cx)
    }

    /// Counts the verdict of handler `h` on a step of device `id` (the
    /// handler is the device itself for a transmit); returns the packet's
    /// next hop if it has one (`Up`: `h` receives it next).
    #[inline(always)]
    fn settle(&mut self, id: DeviceId, h: DeviceId, pkt: &mut Packet, verdict: Verdict) -> Option<(Hop, usize)> {
        let c = &mut self.sh.devices[id.0].counters;
        match verdict {
            Verdict::Transmit(next, n) => {
                c.forwarded += 1;
                return Some((Hop::Transmit(next), n));
            }
            Verdict::Up(n) => {
                c.forwarded += 1;
                return Some((Hop::Receive(h), n));
            }
            Verdict::Forwarded => c.forwarded += 1,
            Verdict::Deliver(socket, n) => {
                c.delivered += 1;
                return Some((Hop::Deliver(socket), n));
            }
            Verdict::Consumed => c.delivered += 1,
            Verdict::Pass => {
                c.delivered += 1;
                self.pass_to_host(id, pkt);
            }
            Verdict::Held => c.held += 1,
            Verdict::Dropped { on, reason } => {
                c.refused += 1;
                self.sh.devices[on.0].counters.drop_n(reason, 1);
            }
        }
        None
    }

    /// Queues `pkt` on device `id`'s host side ([`Device::local`]).
    #[inline(never)]
    fn pass_to_host(&mut self, id: DeviceId, pkt: &mut Packet) {
        self.sh.devices[id.0].local.push_back(std::mem::take(pkt));
    }

    /// Counts a step of device `id`: `rx` for a receive, else a transmit.
    /// Returns `false` (and counts the drop) past [`MAX_DEPTH`].
    #[inline(always)]
    fn count_step(&mut self, id: DeviceId, pkt: &Packet, len: usize, depth: usize, rx: bool) -> bool {
        let c = &mut self.sh.devices[id.0].counters;
        let (packets, bytes, superpackets) = c.step_counters(rx);
        // A superpacket is counted under a branch: the walk's common
        // step (a frame) then stores nothing there.
        *packets += 1;
        *bytes += len as u64;
        if pkt.meta.is_gso() {
            *superpackets += 1;
        }
        if depth > MAX_DEPTH {
            c.refused += 1;
            c.drop_n("too-deep", 1);
            return false;
        }
        true
    }

    /// Old kernels (6.3): a virtual device whose features lack the packet's
    /// GSO type segments it, and its transmit takes the segments one by
    /// one, each continuing down the stack before the next.
    #[inline(never)]
    fn legacy_segment(&mut self, id: DeviceId, pkt: &mut Packet, len: usize, depth: usize) -> Option<(Hop, usize)> {
        let d = &self.sh.devices[id.0];
        let info = PacketInfo::of_len(pkt, len);
        let f = effective_features(&d.feat, &info, &d.check, self.sh.mode);
        if gso_ok(f, &info) {
            let (kind, mut cx) = self.cx(id, depth);
            let verdict = kind.transmit(&mut cx, pkt, len);
            return self.settle(id, id, pkt, verdict);
        }
        let caps = target_caps(f, &d.feat, d.mtu);
        let mut sink = PacketSink::default();
        match self.sh.segmenter.segment(pkt, &caps, &mut sink) {
            Ok(outcome) => record_outcome(&mut self.sh.devices[id.0].counters, &outcome),
            Err(e) => return self.settle(id, id, pkt, Verdict::Dropped { on: id, reason: e.reason() }),
        }
        self.sh.devices[id.0].counters.forwarded += 1;
        for mut seg in sink.out {
            let n = seg.total_len();
            let (kind, mut cx) = self.cx(id, depth);
            match kind.transmit(&mut cx, &mut seg, n) {
                Verdict::Transmit(next, n) => self.walk_chain(Hop::Transmit(next), &mut seg, n, depth + 1),
                Verdict::Up(n) => self.walk_chain(Hop::Receive(id), &mut seg, n, depth + 1),
                Verdict::Deliver(socket, n) => self.walk_chain(Hop::Deliver(socket), &mut seg, n, depth + 1),
                Verdict::Pass => self.sh.devices[id.0].local.push_back(seg),
                Verdict::Dropped { on, reason } => self.sh.devices[on.0].counters.drop_n(reason, 1),
                Verdict::Forwarded | Verdict::Consumed | Verdict::Held => {}
            }
        }
        None
    }

    /// The VLAN device on `id` whose tag `pkt` carries outermost (Linux's
    /// `vlan_do_receive` lookup).
    fn vlan_upper(&self, id: DeviceId, pkt: &Packet) -> Option<DeviceId> {
        let uppers = &self.sh.devices[id.0].vlan_uppers;
        if uppers.is_empty() {
            return None;
        }
        let tag = outer_tag(pkt.linear())?;
        uppers.iter().copied().find(|u| self.kinds[u.0].vlan_tag() == Some(tag))
    }

    /// Polls every port driver once and processes what they received;
    /// returns the packets processed.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        for i in 0..self.sh.devices.len() {
            while let Some(mut p) = self.kinds[i].port_driver().and_then(|d| d.recv()) {
                self.receive_one(DeviceId(i), &mut p);
                n += 1;
            }
            self.collect_driver_drops(DeviceId(i));
        }
        self.receive_link_replies();
        n
    }

    /// Adds the drops port `id`'s driver counted itself
    /// ([`PortDriver::take_drops`]) to the port's counters.
    pub fn collect_driver_drops(&mut self, id: DeviceId) {
        if let Some(driver) = self.kinds[id.0].port_driver() {
            let counters = &mut self.sh.devices[id.0].counters;
            driver.take_drops(&mut |reason, n| counters.drop_n(reason, n));
        }
    }

    /// Applies a change of port `id`'s driver features
    /// ([`PortDriver::take_hw_change`]): they become the port's hardware,
    /// wanted and VLAN features, and the port and its uppers are
    /// recomputed. True if there was a change.
    pub fn refresh_port_features(&mut self, id: DeviceId) -> bool {
        let Some(hw) = self.kinds[id.0].port_driver().and_then(|d| d.take_hw_change()) else { return false };
        self.apply_hw_change(id, hw);
        true
    }

    /// The end of an engine round for port `id`: its driver writes out its
    /// batched sends ([`PortDriver::flush`]), then
    /// [`Graph::collect_driver_drops`] and [`Graph::refresh_port_features`],
    /// with one look-up of the driver for the three (a busy-polled round
    /// carries a frame or two).
    pub fn end_port_round(&mut self, id: DeviceId) {
        let Some(driver) = self.kinds[id.0].port_driver() else { return };
        driver.flush();
        let counters = &mut self.sh.devices[id.0].counters;
        driver.take_drops(&mut |reason, n| counters.drop_n(reason, n));
        if let Some(hw) = driver.take_hw_change() {
            self.apply_hw_change(id, hw);
        }
    }

    /// Makes `hw` port `id`'s hardware, wanted and VLAN features and
    /// recomputes it and its uppers.
    fn apply_hw_change(&mut self, id: DeviceId, hw: NetdevFeatures) {
        let f = &mut self.sh.devices[id.0].feat;
        f.hw_features = hw;
        f.wanted = hw;
        f.vlan_features = hw | NetdevFeatures::HIGHDMA;
        self.recompute(id);
    }

    /// Counts `n` drops of `reason` on device `id`.
    pub fn count_drops(&mut self, id: DeviceId, reason: &'static str, n: u64) {
        self.sh.devices[id.0].counters.drop_n(reason, n);
    }

    /// Discards every packet waiting in a [`Device::local`] queue, counting
    /// each as a drop `no-host-stack` on its device: for a running engine,
    /// which has no host stack above its devices. Returns how many.
    pub fn discard_local(&mut self) -> u64 {
        let mut total = 0;
        for d in &mut self.sh.devices {
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
        self.sh.devices[id.0].local.pop_front()
    }

    /// Periodic work at the engine clock `now_ns` (the worker calls it every
    /// `publish_interval`): every device's timers ([`NetDevice::housekeeping`]:
    /// the router's reassembly lifetimes, neighbour solicitations and
    /// give-ups). What they send is transmitted like any other output.
    pub fn housekeeping(&mut self, now_ns: u64) {
        self.sh.now_ns = now_ns;
        for i in 0..self.kinds.len() {
            let (kind, mut cx) = self.cx(DeviceId(i), 0);
            kind.housekeeping(&mut cx);
        }
        self.drain_steps();
        self.receive_link_replies();
    }

    /// Sends a packet from the router's host side (e.g. a locally generated
    /// IP packet, Ethernet header present): routed, NATed and resolved like
    /// forwarded traffic.
    ///
    /// # Errors
    /// Why the packet was dropped (no router, no route, neighbour queue
    /// full, ...); it is also counted on the router.
    pub fn route_local(&mut self, mut pkt: Packet) -> Result<(), &'static str> {
        let Some(r) = self.router else { return Err("no-router") };
        let len = pkt.total_len();
        if !self.count_step(r, &pkt, len, 0, false) {
            return Err("too-deep");
        }
        let (kind, mut cx) = self.cx(r, 0);
        let verdict = kind.transmit(&mut cx, &mut pkt, len);
        let res = match verdict {
            Verdict::Dropped { reason, .. } => Err(reason),
            _ => Ok(()),
        };
        match self.settle(r, r, &mut pkt, verdict) {
            Some((hop, n)) => self.walk(hop, &mut pkt, n, 1),
            None => self.drain_steps(),
        }
        self.receive_link_replies();
        res
    }
}

/// The held payload of the burst's packet `i`, if it has one: the next of
/// `held` when it says it is packet `i`'s ([`HeldFrame::burst_index`]; a
/// driver pushes them in packet order). Only a frame taken is moved (one is
/// over 1 KiB).
pub fn take_held_of(held: &mut std::vec::Drain<'_, HeldFrame>, i: usize) -> Option<HeldFrame> {
    if held.as_slice().first().is_some_and(|h| h.burst_index() == i) { held.next() } else { None }
}
