//! The one interface every device kind implements, after Linux's split
//! between `net_device_ops` (a device's own transmit) and `rx_handler`
//! (what a master does with a frame its lower received), plus the protocol
//! handler an L3 device (the router) registers on its interfaces.
//!
//! A device kind owns its receive and transmit in its own module and sees
//! the rest of the graph only through a [`Cx`]: the common attributes of
//! every device ([`Device`]: MAC, MTU, carrier, links, counters) and a queue
//! of next steps. The graph ([`super::Graph`]) keeps the wiring and runs the
//! walk: it takes one step (a packet received by, or given for transmission
//! to, one device), calls the one handler the wiring names, counts the
//! [`Verdict`] and queues the steps the handler asked for. No handler calls
//! another device; every packet a handler takes ends in exactly one verdict,
//! so none disappears uncounted (`docs/topology.md`, "Counters").
//!
//! Adding a device kind: one module implementing [`NetDevice`], plus its
//! registration in the topology schema (`topology/schema.rs` and the
//! build's `kind` match).

use super::features::{DeviceFeatures, NetdevFeatures, StackMode};
use super::graph::{Device, DeviceId};
use super::port::{HeldFrame, PortDevice, PortDriver};
use super::tables::TableUsage;
use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use superpacket::offload::gso::Segmenter;
use superpacket::packet::Packet;

/// How a handler ended with the packet it was given (Linux's
/// `rx_handler_result` and `netdev_tx_t`, with the drop reason kept).
/// The graph counts one verdict per step on the step's device
/// ([`super::DeviceCounters::forwarded`] and its neighbours).
///
/// The packet stays where the graph keeps it (the handler gets it as
/// `&mut Packet`): a handler with one successor names it
/// ([`Verdict::Transmit`], [`Verdict::Up`]) and the walk goes on with the
/// same packet, never moving it; a handler that fans out or keeps it takes
/// it (`std::mem::take`) into [`Cx::transmit`] / [`Cx::receive`] or its table.
#[derive(Debug)]
pub enum Verdict {
    /// Hand the packet, of total length `.1`, to device `.0`'s transmit.
    Transmit(DeviceId, usize),
    /// The handler's own device receives the packet (of total length
    /// `.0`) next: a bond's or team's slave frame, a VLAN device's untagged
    /// frame, a bridge's frame for its own stack.
    Up(usize),
    /// Handed on: taken into [`Cx::transmit`] / [`Cx::receive`] (one or
    /// more), or to a port's driver.
    Forwarded,
    /// Delivered to a local UDP socket of device `.0` (a tunnel's: Linux's
    /// `encap_rcv`), the packet of total length `.1`: the walk goes on with
    /// [`NetDevice::deliver`] of that device. Counted as delivered here.
    Deliver(DeviceId, usize),
    /// No device above takes it: delivered to the receiving device's host
    /// side ([`Device::local`]).
    Pass,
    /// Consumed by the handler's device itself (ARP and neighbour
    /// discovery at the router).
    Consumed,
    /// Taken into a bounded table (the router's neighbour queue or
    /// reassembly queues); it leaves later as a transmit or a counted drop.
    Held,
    /// Dropped, counted under `reason` on device `on`.
    Dropped {
        /// The device whose counters get the reason.
        on: DeviceId,
        /// Stable reason name (kebab-case).
        reason: &'static str,
    },
}

/// What a master decided for the leading packets of a burst its member
/// received ([`NetDevice::receive_run`]).
#[derive(Debug)]
pub enum Run {
    /// The first `.1` packets (at least one) leave whole through device
    /// `.0`'s transmit, unchanged (their bytes and lengths as received):
    /// what [`NetDevice::receive`] would have decided for each
    /// ([`Verdict::Transmit`]), with its effects (a bridge's learning)
    /// done, and nothing else queued.
    To(DeviceId, usize),
    /// The first packet's verdict, as [`NetDevice::receive`] gave it (the
    /// walk goes on from there); the master is asked again about the rest.
    First(Verdict),
    /// Every packet takes the per-packet walk: the kind decides no runs.
    Each,
}

/// Where a step of the walk happens.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hop {
    /// The device receives the packet from below.
    Receive(DeviceId),
    /// The device is given the packet to transmit.
    Transmit(DeviceId),
    /// L3 device `.0` (the router) takes the packet its interface `.1`
    /// received: counted as received by `.0`.
    L3(DeviceId, DeviceId),
    /// Device `.0` gets a packet the router delivered to its UDP socket
    /// ([`Verdict::Deliver`]); what it makes of it is received by it, and
    /// counted then.
    Deliver(DeviceId),
}

/// A step waiting in the graph's queue (fan-out: a bridge's flood, the
/// router's output).
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) hop: Hop,
    pub(crate) pkt: Packet,
    pub(crate) len: usize,
    pub(crate) depth: usize,
}

/// The graph's state every handler may touch: the devices' common
/// attributes, the clock, the mode, the segmenter and the step queues.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) devices: Vec<Device>,
    pub(crate) now_ns: u64,
    pub(crate) mode: StackMode,
    pub(crate) segmenter: Segmenter,
    pub(crate) steps: VecDeque<Step>,
    pub(crate) link_replies: VecDeque<(DeviceId, Packet)>,
    /// The payload of the packet being received, still in its sender's
    /// memory ([`super::Graph::receive_held`]): only the walk's devices
    /// that read headers alone let it pass; every other step materialises
    /// it first.
    pub(crate) held: Option<HeldFrame>,
}

impl Shared {
    /// Copies a held payload that is `pkt`'s into it (the packet whole
    /// from then on); nothing if none is held for it.
    ///
    /// # Errors
    /// The payload could not be read: the packet must be dropped for this reason.
    pub(crate) fn materialise_held(&mut self, pkt: &mut Packet) -> Result<(), &'static str> {
        match self.held.take_if(|h| h.belongs_to(pkt)) {
            Some(h) => h.materialise(pkt),
            None => Ok(()),
        }
    }
}

/// What a handler sees of the graph: see the module documentation.
pub struct Cx<'a> {
    pub(crate) me: DeviceId,
    pub(crate) depth: usize,
    pub(crate) sh: &'a mut Shared,
}

impl<'a> Cx<'a> {
    /// The device whose handler runs.
    pub fn me(&self) -> DeviceId {
        self.me
    }

    /// Every device's common attributes, indexed by [`DeviceId`].
    pub fn devices(&self) -> &[Device] {
        &self.sh.devices
    }

    /// Every device's common attributes, writable (counters).
    pub fn devices_mut(&mut self) -> &mut [Device] {
        &mut self.sh.devices
    }

    /// The engine clock (ns).
    pub fn now_ns(&self) -> u64 {
        self.sh.now_ns
    }

    /// How the stack segments (offload-rules 6.3).
    pub fn mode(&self) -> StackMode {
        self.sh.mode
    }

    /// The graph's segmenter (scratch state shared by every port) and the
    /// devices' common attributes.
    pub fn segmenter(&mut self) -> (&mut Segmenter, &mut [Device]) {
        (&mut self.sh.segmenter, &mut self.sh.devices)
    }

    /// Its common attributes.
    pub fn dev(&self) -> &Device {
        &self.sh.devices[self.me.0]
    }

    /// Its common attributes, writable (counters).
    pub fn dev_mut(&mut self) -> &mut Device {
        &mut self.sh.devices[self.me.0]
    }

    /// Another device's common attributes.
    pub fn device(&self, id: DeviceId) -> &Device {
        &self.sh.devices[id.0]
    }

    /// Queues the transmission of `pkt` (total length `len`) through `dev`
    /// (for a handler with more than one successor; one successor is
    /// [`Verdict::Transmit`]).
    pub fn transmit(&mut self, dev: DeviceId, pkt: Packet, len: usize) {
        self.sh.steps.push_back(Step { hop: Hop::Transmit(dev), pkt, len, depth: self.depth + 1 });
    }

    /// Queues the reception of `pkt` (total length `len`) by `dev`.
    pub fn receive(&mut self, dev: DeviceId, pkt: Packet, len: usize) {
        self.sh.steps.push_back(Step { hop: Hop::Receive(dev), pkt, len, depth: self.depth + 1 });
    }

    /// A drop of the handler's own device.
    pub fn drop(&self, reason: &'static str) -> Verdict {
        Verdict::Dropped { on: self.me, reason }
    }

    /// Counts `n` drops of `reason` on `dev` for packets that are not the
    /// step's own (held packets given up, refused fragments).
    pub fn count_drops(&mut self, dev: DeviceId, reason: &'static str, n: u64) {
        self.sh.devices[dev.0].counters.drop_n(reason, n);
    }

    /// Whether steps are queued (a flood's copies, the router's output).
    pub(crate) fn queued_steps(&self) -> bool {
        !self.sh.steps.is_empty()
    }

    /// Whether a payload is held for the packet being walked
    /// ([`super::Graph::receive_held`]), this step's or not.
    #[inline]
    pub fn holds_payload(&self) -> bool {
        self.sh.held.is_some()
    }

    /// Takes the held payload of `pkt` ([`super::Graph::receive_held`]),
    /// if it has one: the caller sends it or materialises it.
    pub fn take_held(&mut self, pkt: &Packet) -> Option<HeldFrame> {
        self.sh.held.take_if(|h| h.belongs_to(pkt))
    }

    /// Makes `pkt` whole if its payload is held: for a handler about to
    /// read or copy payload bytes (a flood's copies).
    ///
    /// # Errors
    /// The payload could not be read: drop the packet for this reason.
    pub fn materialise_held(&mut self, pkt: &mut Packet) -> Result<(), &'static str> {
        self.sh.materialise_held(pkt)
    }

    /// A frame a raw-IP port's driver answered itself: received on the
    /// port once the current operation is done ([`super::LinkOutput::Reply`]).
    pub fn link_reply(&mut self, port: DeviceId, pkt: Packet) {
        self.sh.link_replies.push_back((port, pkt));
    }
}

/// A device kind: its transmit, its receive handling and its features. See
/// the module documentation.
pub trait NetDevice: fmt::Debug + Send + Any {
    /// The kind's name, as in a topology's `kind` (`port`, `vlan`, ...).
    fn kind(&self) -> &'static str;

    /// Transmit (`ndo_start_xmit`): `pkt`, of total length `len` (frag list
    /// included, kept up to date by every device that changes it), was given
    /// to this device.
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict;

    /// Receive handling for a packet that device `from` received and this
    /// device is registered to handle: as `from`'s master (a bridge, bond or
    /// team: Linux's `rx_handler`, within `from`'s receive), as the VLAN
    /// upper matching its outer tag (likewise), or as its L3 upper (the
    /// router: a receive step of its own, counted on it). The default: not
    /// a handler.
    fn receive(&mut self, cx: &mut Cx<'_>, from: DeviceId, pkt: &mut Packet, len: usize) -> Verdict {
        let _ = (from, pkt, len);
        cx.drop("no-handler")
    }

    /// Burst receive (a master's, for a burst its member `from` received,
    /// every packet whole: no payload held elsewhere; `len` the first
    /// packet's total length): how many leading packets of `pkts` go to
    /// one device's transmit unchanged ([`Run::To`]), so that the graph
    /// counts them and hands them on as a run, with one dispatch instead of
    /// one walk each; or the first packet's verdict ([`Run::First`]). A run
    /// holds exactly the packets [`NetDevice::receive`], called for each in
    /// turn, would have sent there as they are, and this call has the
    /// effects those calls would have had. The receive of one packet must
    /// not depend on the transmit of an earlier one (the run's transmits
    /// follow its receives). The default: [`Run::Each`], every packet
    /// walked alone.
    fn receive_run(&mut self, cx: &mut Cx<'_>, from: DeviceId, pkts: &mut [Packet], len: usize) -> Run {
        let _ = (cx, from, pkts, len);
        Run::Each
    }

    /// A packet the router delivered to this device's local UDP socket
    /// (a tunnel endpoint, Linux's `encap_rcv`): [`Verdict::Up`] with the
    /// decapsulated frame's length makes this device receive it (counted as
    /// its receive then); any other verdict is counted as a receive of the
    /// delivered packet. The default: not a socket owner.
    fn deliver(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let _ = (pkt, len);
        cx.drop("no-socket")
    }

    /// Requested features a device of this kind starts with in `mode`
    /// (and gets back on a mode switch); `None` keeps the device's own (a
    /// port's come from its driver).
    fn default_features(&self, mode: StackMode) -> Option<NetdevFeatures> {
        let _ = mode;
        None
    }

    /// The device's features from its own (`own`: wanted, hardware) and its
    /// lowers' (offload-rules 6.4, 6.5). The default, for a device without
    /// lowers: what it wants of what it has (6.1).
    fn compute_features(&self, own: &DeviceFeatures, lowers: &[DeviceFeatures], mode: StackMode) -> DeviceFeatures {
        let _ = (lowers, mode);
        let mut f = *own;
        f.features = super::features::fix_features(f.wanted & f.hw_features);
        f
    }

    /// Whether other devices can be enslaved to it (bond, team, bridge,
    /// cross-connect).
    fn is_master(&self) -> bool {
        false
    }

    /// Whether a member's frame may reach this master while its payload is
    /// still in its sender's memory ([`super::Graph::receive_held`]): the
    /// device reads headers only on the way to one port, and materialises
    /// the payload itself before anything else (a bridge's flood). Default:
    /// no, the graph makes the packet whole first.
    fn passes_held_payload(&self) -> bool {
        false
    }

    /// Most lowers a master takes (a cross-connect: two); `None`: no limit.
    /// [`super::Graph::enslave`] refuses one more.
    fn max_lowers(&self) -> Option<usize> {
        None
    }

    /// `lower` was enslaved to this device (it is already in `lowers`).
    fn enslaved(&mut self, lower: DeviceId) {
        let _ = lower;
    }

    /// `lower` left this device.
    fn released(&mut self, lower: DeviceId) {
        let _ = lower;
    }

    /// The set of lowers or one's carrier changed: a bond or team picks its
    /// active slave again (`devices`: every device, `me` this one).
    fn lowers_changed(&mut self, me: DeviceId, devices: &[Device]) {
        let _ = (me, devices);
    }

    /// The 802.1Q/802.1ad tag (TPID, VLAN id) a VLAN device takes from its
    /// lower's received frames.
    fn vlan_tag(&self) -> Option<(u16, u16)> {
        None
    }

    /// Periodic work at the engine clock (timers, ageing).
    fn housekeeping(&mut self, cx: &mut Cx<'_>) {
        let _ = cx;
    }

    /// How full the device's bounded tables are.
    fn table_usage(&self, out: &mut Vec<TableUsage>) {
        let _ = out;
    }

    /// A port's driver.
    fn port_driver(&mut self) -> Option<&mut dyn PortDriver> {
        None
    }

    /// The port device, if this is one (its burst transmit,
    /// [`PortDevice::transmit_run`]).
    fn as_port(&mut self) -> Option<&mut PortDevice> {
        None
    }

    /// For downcasting to the concrete kind.
    fn as_any(&self) -> &dyn Any;

    /// For downcasting to the concrete kind.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
