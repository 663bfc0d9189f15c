//! Ports: the bottom of a device stack, backed by a [`PortDriver`]
//! (offload-rules 3.1: the final port's validate step runs before the
//! driver gets a packet).
//!
//! Drivers here: [`MemoryDriver`] (in-memory queues, for tests, benches and
//! topologies without I/O) and [`PcapDriver`] (writes what it transmits to a
//! pcapng file with offload annotations, reads what it receives from a
//! capture). Real I/O ports (TAP, AF_PACKET) implement the same trait in
//! [`super::port_io`], TUN ports in [`super::tun_port`].
//!
//! # Raw-IP ports
//!
//! The device graph works on Ethernet frames. A driver whose packets are
//! raw IP ([`PortDriver::medium`] is [`Medium::Ip`]: a TUN) presents itself
//! as an Ethernet port on a point-to-point link: the graph hands every
//! packet it receives (after the port's GRO, which runs on the raw packets)
//! to [`PortDriver::link_input`] for an Ethernet header, and every frame it
//! transmits to [`PortDriver::link_output`] first, which strips the header
//! (or answers the frame itself: [`LinkOutput::Reply`]); the port's
//! validate step then segments the raw IP packet ([`Medium::Ip`] in the
//! segmenter's target).

use super::features::{FeaturesCheck, NetdevFeatures, PacketInfo, effective_features, takes_as_is, target_caps};
use super::graph::DeviceCounters;
use super::netdev::{Cx, NetDevice, Verdict};
use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use superpacket::offload::gso::{GsoOutcome, SegmentSink, SgFrame};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::wire::ethernet::ETHERNET_HEADER_LEN;
use superpacket::wire::{MacAddr, Medium};

/// A driver failed to open, or to take or produce a packet.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct DriverError {
    /// Short stable name, used as the drop reason when the graph counts a
    /// packet the driver refused (`tx-refused`, `tx-io-error`, ...).
    pub reason: &'static str,
    /// What happened, for people.
    pub message: String,
}

impl DriverError {
    /// An error with drop reason `reason`.
    pub fn new(reason: &'static str, message: impl Into<String>) -> DriverError {
        DriverError { reason, message: message.into() }
    }
}

/// What a raw-IP driver makes of an Ethernet frame the graph transmits
/// ([`PortDriver::link_output`]).
#[derive(Debug)]
pub enum LinkOutput {
    /// Write this raw IP packet: the frame without its Ethernet header (the
    /// checksum offsets moved back with it).
    Send(Packet),
    /// The driver answered the frame itself (an ARP request, a neighbour
    /// solicitation): the graph receives this reply on the port, as if it
    /// had come from the wire, once the current operation is done.
    Reply(Packet),
    /// Nothing the link carries: a drop, counted on the port with this reason.
    Drop(&'static str),
}

/// A superpacket's payload left in the sending guest's memory (the
/// vhost-user port's one-copy path).
#[cfg(feature = "vhost-user")]
pub use super::vhost_user::held::HeldFrame;

/// A superpacket's payload left in a sender's memory: none without
/// vhost-user ports.
#[cfg(not(feature = "vhost-user"))]
#[derive(Debug)]
pub enum HeldFrame {}

#[cfg(not(feature = "vhost-user"))]
impl HeldFrame {
    /// Held bytes.
    pub fn len(&self) -> usize {
        match *self {}
    }
    /// Never true.
    pub fn is_empty(&self) -> bool {
        match *self {}
    }
    /// Whether this is `packet`'s payload.
    pub fn belongs_to(&self, _packet: &Packet) -> bool {
        match *self {}
    }
    /// The place of its packet in the burst it came in.
    pub fn burst_index(&self) -> usize {
        match *self {}
    }
    /// Copies the payload into `packet`.
    ///
    /// # Errors
    /// Never.
    pub fn materialise(self, _packet: &mut Packet) -> Result<(), &'static str> {
        match self {}
    }
}

/// What moves frames between a port and the outside world. The port has
/// already decided everything (3.1): [`PortDriver::xmit`] gets packets the
/// device takes as they are (superpackets included); the segmenter's output
/// for what it lacks goes to [`PortDriver::sink`].
pub trait PortDriver: fmt::Debug + Send {
    /// Short driver kind (`memory`, `pcap`, `tap`, ...).
    fn kind(&self) -> &'static str;
    /// Features the hardware offers (`hw_features`, 6.1).
    fn hw_features(&self) -> NetdevFeatures;
    /// Features that apply to tagged packets (`vlan_features`, 6.1);
    /// default: all of [`PortDriver::hw_features`].
    fn vlan_features(&self) -> NetdevFeatures {
        self.hw_features() | NetdevFeatures::HIGHDMA
    }
    /// Features the device offers only for GSO_PARTIAL packets
    /// (`gso_partial_features`, 6.1): with `GSO_PARTIAL` among the hardware
    /// features and a UDP tunnel feature here, the port gets GSO_PARTIAL
    /// output for that tunnel type (offload-rules 3.7). Default none.
    fn gso_partial_features(&self) -> NetdevFeatures {
        NetdevFeatures::EMPTY
    }
    /// The driver's `ndo_features_check` (6.2 step 5); default Linux's
    /// `vlan_features_check`.
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Vlan
    }
    /// Takes one packet as it is (with its offload metadata).
    ///
    /// # Errors
    /// An I/O failure; the port counts a drop.
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError>;
    /// [`PortDriver::xmit`] with the packet's total length (frag list
    /// included) already known; drivers that count bytes override it to
    /// avoid walking the frag list again.
    ///
    /// # Errors
    /// As [`PortDriver::xmit`].
    fn xmit_len(&mut self, pkt: Packet, len: usize) -> Result<(), DriverError> {
        let _ = len;
        self.xmit(pkt)
    }
    /// [`PortDriver::xmit_len`] of every packet of `pkts` in order (`lens`
    /// their total lengths), each moved out of its slot (left owning
    /// nothing) or left in it for the caller to drop; `refused` gets the
    /// reason of each packet the driver refused. The port's burst transmit
    /// ([`PortDevice::transmit_run`]) calls it once per run instead of
    /// `xmit_len` once per packet. Default: [`xmit_each`].
    fn xmit_burst(&mut self, pkts: &mut [Packet], lens: &[usize], refused: &mut dyn FnMut(&'static str)) {
        xmit_each(self, pkts, lens, refused);
    }
    /// Where segmented or checksum-completed frames go.
    fn sink(&mut self) -> &mut dyn SegmentSink;
    /// The next received packet, if any.
    fn recv(&mut self) -> Option<Packet>;
    /// A burst: up to `max` received packets appended to `out`, in the
    /// order [`PortDriver::recv`] would give them; returns how many (0: as
    /// `recv` returning `None`, with the same side effects). The engine
    /// worker receives through this, so a driver can make its per-call
    /// checks (connection, ring addresses, available index) once per burst
    /// instead of once per packet. `out` is the caller's, reused between
    /// bursts: a driver only pushes to it. Default: one packet of
    /// [`PortDriver::recv`] per call (if `max` allows), so the worker sends
    /// each packet on while its bytes are still in the cache: a burst of
    /// 64 superpackets is 4 MiB, past the CPU's L2 (docs/benchmarks.md,
    /// the third quiet re-run). A driver whose per-call checks cost more
    /// than its frames' copies (vhost-user) overrides it.
    fn recv_burst(&mut self, out: &mut Vec<Packet>, max: usize) -> usize {
        if max == 0 {
            return 0;
        }
        match self.recv() {
            Some(p) => {
                out.push(p);
                1
            }
            None => 0,
        }
    }
    /// [`PortDriver::recv_burst`] that may leave superpackets' payloads in
    /// the sender's memory: each such packet has a [`HeldFrame`] pushed to
    /// `held` (in packet order, each saying its packet's place in `out`,
    /// [`HeldFrame::burst_index`]; see the vhost-user port's `held` module),
    /// and its caller must hand both to [`super::Graph::receive_held`] (or
    /// materialise the frame, [`HeldFrame::materialise`]) before the engine
    /// round ends. Default: [`PortDriver::recv_burst`], nothing held.
    fn recv_burst_held(&mut self, out: &mut Vec<Packet>, held: &mut Vec<HeldFrame>, max: usize) -> usize {
        let _ = held;
        self.recv_burst(out, max)
    }
    /// Whether [`PortDriver::xmit_held`] copies a held payload itself (the
    /// one-copy path). Default: no.
    fn takes_held(&self) -> bool {
        false
    }
    /// Transmits `pkt`, whose last `held.len()` bytes are `held`'s, the
    /// offloads as they are (the caller checked the port takes them).
    /// Default: the payload materialised, then [`PortDriver::xmit_len`].
    ///
    /// # Errors
    /// As [`PortDriver::xmit`].
    fn xmit_held(&mut self, mut pkt: Packet, len: usize, held: HeldFrame) -> Result<(), DriverError> {
        held.materialise(&mut pkt).map_err(|reason| DriverError::new(reason, "held payload lost"))?;
        self.xmit_len(pkt, len)
    }
    /// Reports, then forgets, the drops the driver counted itself since the
    /// last call, as `(reason, count)`: frames given to [`PortDriver::sink`]
    /// that could not be written, received packets refused (a bad
    /// virtio_net_hdr). The graph adds them to the port's counters after each
    /// software segmentation and each poll. Default: none.
    fn take_drops(&mut self, report: &mut dyn FnMut(&'static str, u64)) {
        let _ = report;
    }
    /// The descriptor an event loop waits on (readable when [`PortDriver::recv`]
    /// has something); `None` for drivers without one, which the engine
    /// polls every round (memory and pcap ports).
    fn poll_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Starts a transmit burst: until the next [`PortDriver::flush`] the
    /// driver may hold what [`PortDriver::xmit`] gives it and send it all
    /// at the flush, in order, paying its per-call checks once per burst.
    /// A held packet the driver cannot send then is one of its own drops
    /// ([`PortDriver::take_drops`]). The engine worker calls it at the
    /// start of each round and flushes at its end. Default: nothing held.
    fn hold_tx(&mut self) {}
    /// Writes out whatever the driver queued for a batched send (the end of
    /// an engine round). Default: nothing is queued.
    fn flush(&mut self) {}
    /// True while the driver busy-polls: its last [`PortDriver::recv`] found
    /// nothing but left the peer's notifications off, so the engine must poll
    /// it again next round instead of waiting on [`PortDriver::poll_fd`]
    /// (a vhost-user port's `busy_poll_us`). Default: never.
    fn wants_poll(&self) -> bool {
        false
    }
    /// The driver's hardware features changed since the last call (a
    /// vhost-user guest acked its offloads, or went away): the new
    /// [`PortDriver::hw_features`], which the graph makes the port's
    /// (wanted and active) and its uppers recompute from. Called at the end
    /// of every engine round. Default: never.
    fn take_hw_change(&mut self) -> Option<NetdevFeatures> {
        None
    }
    /// The driver's own counters, as `(name, value)` (what reached the
    /// kernel, batching figures, ...). Default: none.
    fn driver_counters(&self, report: &mut dyn FnMut(&'static str, u64)) {
        let _ = report;
    }
    /// The device behind the driver has gone away (interface deleted, TAP
    /// removed): the engine takes the port's carrier down and calls
    /// [`PortDriver::reopen`] from time to time.
    fn is_gone(&self) -> bool {
        false
    }
    /// Opens the device again after [`PortDriver::is_gone`].
    ///
    /// # Errors
    /// The device is still missing (or cannot be reopened by this driver).
    fn reopen(&mut self) -> Result<(), DriverError> {
        Err(DriverError::new("reopen-unsupported", format!("a {} port cannot be reopened", self.kind())))
    }
    /// What the driver reads and writes: Ethernet frames (the default) or
    /// raw IP packets (see [Raw-IP ports](self#raw-ip-ports)). The port's
    /// GRO runs with this medium.
    fn medium(&self) -> Medium {
        Medium::Ethernet
    }
    /// Raw-IP drivers: the Ethernet frame the graph receives for the raw IP
    /// packet `pkt` (received, and through the port's GRO), addressed to
    /// `own`, the port's MAC; `Err(reason)` drops it. Default: the packet as
    /// it is.
    ///
    /// # Errors
    /// A drop reason, counted on the port.
    fn link_input(&mut self, pkt: Packet, own: MacAddr) -> Result<Packet, &'static str> {
        let _ = own;
        Ok(pkt)
    }
    /// Raw-IP drivers: what becomes of the Ethernet frame `frame` the graph
    /// transmits, before the port's validate step. Default: sent as it is.
    fn link_output(&mut self, frame: Packet) -> LinkOutput {
        LinkOutput::Send(frame)
    }
    /// For downcasting to the concrete driver.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// What a [`MemoryDriver`] keeps of frames the segmenter produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemoryMode {
    /// Every frame becomes a [`Packet`] on [`MemoryDriver::tx`] (tests).
    #[default]
    Capture,
    /// Segmented frames are only counted, as a NIC's DMA would read them;
    /// packets taken whole still go to `tx` (moved, not copied) so the owner
    /// frees them outside any timed region (benches).
    Count,
}

/// An in-memory port driver: transmitted packets queue on `tx`, packets to
/// receive are pushed on `rx`.
#[derive(Debug)]
pub struct MemoryDriver {
    /// Hardware features.
    pub hw: NetdevFeatures,
    /// Features for tagged packets.
    pub vlan: NetdevFeatures,
    /// The features_check hook.
    pub check: FeaturesCheck,
    /// `gso_partial_features` ([`PortDriver::gso_partial_features`]).
    pub gso_partial: NetdevFeatures,
    /// What happens to segmented frames.
    pub mode: MemoryMode,
    /// Transmitted packets, oldest first.
    pub tx: VecDeque<Packet>,
    /// Packets waiting to be received.
    pub rx: VecDeque<Packet>,
    /// Frames handed over (pass-through superpackets count as one).
    pub tx_frames: u64,
    /// Bytes handed over.
    pub tx_bytes: u64,
    buf: Vec<u8>,
}

impl MemoryDriver {
    /// A driver offering `hw` (also for tagged packets) that parses any VLAN
    /// depth ([`FeaturesCheck::Any`]), in [`MemoryMode::Capture`].
    pub fn new(hw: NetdevFeatures) -> MemoryDriver {
        MemoryDriver {
            hw,
            vlan: hw | NetdevFeatures::HIGHDMA,
            check: FeaturesCheck::Any,
            gso_partial: NetdevFeatures::EMPTY,
            mode: MemoryMode::Capture,
            tx: VecDeque::new(),
            rx: VecDeque::new(),
            tx_frames: 0,
            tx_bytes: 0,
            buf: Vec::new(),
        }
    }

    /// A full-featured NIC ([`NetdevFeatures::FULL_NIC`]).
    pub fn full() -> MemoryDriver {
        MemoryDriver::new(NetdevFeatures::FULL_NIC)
    }

    /// With this features_check hook.
    pub fn with_check(mut self, check: FeaturesCheck) -> MemoryDriver {
        self.check = check;
        self
    }

    /// With this mode.
    pub fn with_mode(mut self, mode: MemoryMode) -> MemoryDriver {
        self.mode = mode;
        self
    }

    fn keep(&mut self, data: &[u8], meta: &OffloadMeta) {
        self.tx_frames += 1;
        self.tx_bytes += data.len() as u64;
        if self.mode == MemoryMode::Capture {
            let mut p = Packet::from_frame(data);
            p.meta = *meta;
            self.tx.push_back(p);
        }
    }
}

impl PortDriver for MemoryDriver {
    fn kind(&self) -> &'static str {
        "memory"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn vlan_features(&self) -> NetdevFeatures {
        self.vlan
    }
    fn gso_partial_features(&self) -> NetdevFeatures {
        self.gso_partial
    }
    fn features_check(&self) -> FeaturesCheck {
        self.check
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        let len = pkt.total_len();
        self.xmit_len(pkt, len)
    }
    fn xmit_len(&mut self, pkt: Packet, len: usize) -> Result<(), DriverError> {
        self.tx_frames += 1;
        self.tx_bytes += len as u64;
        self.tx.push_back(pkt);
        Ok(())
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        self.rx.pop_front()
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl SegmentSink for MemoryDriver {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        self.tx_frames += 1;
        self.tx_bytes += packet.total_len() as u64;
        if self.mode == MemoryMode::Capture {
            let mut p = packet.clone();
            p.meta = *meta;
            self.tx.push_back(p);
        }
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        if self.mode == MemoryMode::Capture {
            let mut data = Vec::with_capacity(frame.len());
            for c in frame.chunks() {
                data.extend_from_slice(c);
            }
            self.keep(&data, &frame.meta);
        } else {
            self.tx_frames += 1;
            self.tx_bytes += frame.len() as u64;
        }
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.clear();
        self.buf.resize(len, 0);
        &mut self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let data = std::mem::take(&mut self.buf);
        self.keep(&data[..len], meta);
        self.buf = data;
    }
}

/// A port driver that writes transmitted frames to a pcapng file (with
/// offload annotations, so `superpacket pcap check` validates superpackets)
/// and receives frames read from an optional capture.
pub struct PcapDriver {
    hw: NetdevFeatures,
    writer: CaptureWriter<BufWriter<File>>,
    reader: Option<CaptureReader>,
    buf: Vec<u8>,
    /// Write errors so far (the first one is kept).
    pub error: Option<String>,
}

impl fmt::Debug for PcapDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapDriver").field("hw", &self.hw).field("error", &self.error).finish()
    }
}

impl PcapDriver {
    /// Writes to `out` (created); reads from `input` if given. Frag lists
    /// are not offered (a capture record is one frame): fraglist
    /// superpackets are segmented before they reach the file.
    ///
    /// # Errors
    /// If a file cannot be created or opened.
    pub fn new(out: &Path, input: Option<&Path>, hw: NetdevFeatures) -> Result<PcapDriver, DriverError> {
        let file = File::create(out).map_err(|e| DriverError::new("pcap-create", format!("{}: {e}", out.display())))?;
        let writer = CaptureWriter::new(BufWriter::new(file), CaptureFormat::PcapNg, LinkType::ETHERNET)
            .map_err(|e| DriverError::new("pcap-write", e.to_string()))?;
        let reader = match input {
            Some(p) => Some(
                CaptureReader::open(p).map_err(|e| DriverError::new("pcap-open", format!("{}: {e}", p.display())))?,
            ),
            None => None,
        };
        let hw = hw.without(NetdevFeatures::FRAGLIST | NetdevFeatures::GSO_FRAGLIST);
        Ok(PcapDriver { hw, writer, reader, buf: Vec::new(), error: None })
    }

    /// Flushes the file.
    ///
    /// # Errors
    /// On a write error.
    pub fn flush(&mut self) -> Result<(), DriverError> {
        self.writer.flush().map_err(|e| DriverError::new("pcap-write", e.to_string()))
    }

    /// Writes one frame, stamped with its arrival time (a replayed frame
    /// keeps its capture time) or, for a frame made by the engine itself
    /// (ARP, neighbour solicitations), the time it is written.
    fn write(&mut self, data: &[u8], meta: &OffloadMeta) {
        let ts = meta.arrival_ns.unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
        });
        if let Err(e) = self.writer.write_frame(data, ts, &FrameAnnotation::from_meta(meta))
            && self.error.is_none()
        {
            self.error = Some(e.to_string());
        }
    }
}

impl PortDriver for PcapDriver {
    fn kind(&self) -> &'static str {
        "pcap"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Any
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        let mut data = std::mem::take(&mut self.buf);
        pkt.copy_all_to(&mut data);
        self.write(&data, &pkt.meta);
        self.buf = data;
        Ok(())
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        let r = self.reader.as_mut()?;
        let f = r.next_frame().ok()??;
        let mut p = Packet::from_frame(f.data);
        let headers = superpacket::wire::FrameHeaders::parse(f.data).ok();
        p.meta = f.annotation.to_meta(headers.as_ref());
        p.meta.arrival_ns = Some(f.timestamp_ns);
        Some(p)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl SegmentSink for PcapDriver {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        let mut data = std::mem::take(&mut self.buf);
        packet.copy_all_to(&mut data);
        self.write(&data, meta);
        self.buf = data;
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        let mut data = std::mem::take(&mut self.buf);
        frame.copy_to(&mut data);
        self.write(&data, &frame.meta);
        self.buf = data;
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.clear();
        self.buf.resize(len, 0);
        &mut self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let data = std::mem::take(&mut self.buf);
        self.write(&data[..len], meta);
        self.buf = data;
    }
}

/// The port device: the bottom of a stack, where the validate step (3.1,
/// 6.2, 6.3) decides what its driver takes whole and what the segmenter
/// cuts for it.
#[derive(Debug)]
pub struct PortDevice {
    /// The driver.
    pub driver: Box<dyn PortDriver>,
}

impl PortDevice {
    /// A port backed by `driver`.
    pub fn new(driver: Box<dyn PortDriver>) -> PortDevice {
        PortDevice { driver }
    }
}

/// The sink between the segmenter and a port driver. A pass-through is not
/// written from the borrowed packet (that would copy a whole superpacket
/// into the driver's send arena): only its metadata is kept, and
/// [`PortDevice::transmit`] then hands the packet itself to the driver by
/// value (valid because the segmenter passes through the very packet it was
/// given, see [`SegmentSink::pass_through`]). Segments go straight to the
/// driver.
///
/// With `held` (the packet's payload is not in it yet: see
/// [`PortDevice::send_held`]) segments are not sent but noted in `cut`:
/// they were made of bytes the packet does not have.
struct PortSink<'a> {
    inner: &'a mut dyn SegmentSink,
    passed_through: Option<OffloadMeta>,
    held: bool,
    cut: bool,
}

impl SegmentSink for PortSink<'_> {
    fn pass_through(&mut self, _packet: &Packet, meta: &OffloadMeta) {
        self.passed_through = Some(*meta);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        self.cut = true;
        if !self.held {
            self.inner.sg_frame(frame);
        }
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.inner.linear_buffer(len)
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        self.cut = true;
        if !self.held {
            self.inner.linear_frame(len, meta);
        }
    }
}

/// Whether a frame of `len` bytes with `vlan_tags` tags is too long for an
/// L3 MTU of `mtu` (each tag adds its 4 bytes to the limit).
fn over_mtu(mtu: usize, len: usize, vlan_tags: u8) -> bool {
    len > mtu + ETHERNET_HEADER_LEN + 4 * usize::from(vlan_tags)
}

/// Adds a segmenter outcome to a device's counters.
pub(crate) fn record_outcome(c: &mut DeviceCounters, o: &GsoOutcome) {
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

impl PortDevice {
    /// The packet to the driver as it is (the port takes it whole).
    #[inline(always)]
    fn xmit_whole(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        cx.dev_mut().counters.tx_passthrough += 1;
        match self.driver.xmit_len(pkt.move_out(), len) {
            Ok(()) => Verdict::Forwarded,
            Err(e) => cx.drop(e.reason),
        }
    }

    /// The validate step proper: the packet (Ethernet or, on a raw-IP
    /// port, already stripped) to the driver whole, or through the
    /// segmenter for what the port lacks.
    fn validate_and_send(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize, info: &PacketInfo) -> Verdict {
        let me = cx.me();
        let mode = cx.mode();
        let d = &cx.devices()[me.0];
        let f = effective_features(&d.feat, info, &d.check, mode);
        // A payload still in its sender's memory: copied from there by a
        // driver that can, on the pass-through path only; else made whole
        // here, before the segmenter or the driver reads it.
        let mut held = cx.take_held(pkt);
        if held.is_some() {
            if let Some(verdict) = Self::send_held(self.driver.as_mut(), cx, pkt, len, info, f, &mut held) {
                return verdict;
            }
            if let Some(Err(reason)) = held.map(|h| h.materialise(pkt)) {
                return cx.drop(reason);
            }
        }
        if takes_as_is(f, info) {
            return self.xmit_whole(cx, pkt, len);
        }
        let driver = &mut self.driver;
        let d = &cx.devices()[me.0];
        let caps = target_caps(f, &d.feat, d.mtu).with_medium(d.medium);
        let mut sink = PortSink { inner: driver.sink(), passed_through: None, held: false, cut: false };
        let (segmenter, devices) = cx.segmenter();
        let outcome = segmenter.segment(pkt, &caps, &mut sink);
        let passed_through = sink.passed_through;
        let counters = &mut devices[me.0].counters;
        let mut verdict = match outcome {
            Ok(o) => {
                record_outcome(counters, &o);
                Verdict::Forwarded
            }
            Err(e) => Verdict::Dropped { on: me, reason: e.reason() },
        };
        if let Some(meta) = passed_through {
            pkt.meta = meta;
            if let Err(e) = driver.xmit_len(std::mem::take(pkt), len) {
                verdict = Verdict::Dropped { on: me, reason: e.reason };
            }
        }
        driver.take_drops(&mut |reason, n| counters.drop_n(reason, n));
        verdict
    }
}

impl PortDevice {
    /// The one-copy path of a packet whose payload is `held`: to a driver
    /// that copies it itself ([`PortDriver::xmit_held`]), if the port takes
    /// the packet as it is, or would but for `DODGY` (a guest's
    /// superpacket: the segmenter validates its headers and lengths and
    /// passes it through, reading no payload). `None` leaves `held` to the
    /// caller when the path does not apply (it materialises it), also if
    /// the segmenter would cut the packet after all.
    fn send_held(
        driver: &mut dyn PortDriver,
        cx: &mut Cx<'_>,
        pkt: &mut Packet,
        len: usize,
        info: &PacketInfo,
        f: NetdevFeatures,
        held: &mut Option<HeldFrame>,
    ) -> Option<Verdict> {
        let me = cx.me();
        if !driver.takes_held() || !takes_as_is(f | NetdevFeatures::GSO_ROBUST, info) {
            return None;
        }
        if !takes_as_is(f, info) {
            let d = &cx.devices()[me.0];
            let caps = target_caps(f, &d.feat, d.mtu).with_medium(d.medium);
            let mut sink = PortSink { inner: driver.sink(), passed_through: None, held: true, cut: false };
            let (segmenter, devices) = cx.segmenter();
            match segmenter.segment(pkt, &caps, &mut sink) {
                Ok(o) if !sink.cut && sink.passed_through.is_some() => {
                    record_outcome(&mut devices[me.0].counters, &o);
                    pkt.meta = sink.passed_through.unwrap_or(pkt.meta);
                }
                Ok(o) => {
                    // The cut is discarded (made of bytes the packet does
                    // not have yet): the caller segments it again once
                    // whole, and that is what the segmenter counts.
                    segmenter.counters.take_back(&o);
                    return None;
                }
                Err(e) => return Some(Verdict::Dropped { on: me, reason: e.reason() }),
            }
        } else {
            cx.devices_mut()[me.0].counters.tx_passthrough += 1;
        }
        let held = held.take()?;
        Some(match driver.xmit_held(std::mem::take(pkt), len, held) {
            Ok(()) => Verdict::Forwarded,
            Err(e) => cx.drop(e.reason),
        })
    }
}

impl NetDevice for PortDevice {
    fn kind(&self) -> &'static str {
        "port"
    }

    /// The validate step (3.1, 6.2, 6.3): the packet goes to the driver
    /// whole if the port's effective features take it as it is, else
    /// through the segmenter, which produces only what the port lacks. A
    /// raw-IP driver strips the Ethernet header first (or answers the frame
    /// itself).
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let me = cx.me();
        let d = &cx.devices()[me.0];
        if !d.carrier {
            return cx.drop("no-carrier");
        }
        // The validate step's outcome is known without the packet's info or
        // the port's effective features: the driver takes it whole. Only its
        // MTU check may need its tags, and only past the untagged limit.
        if d.medium == Medium::Ethernet && PacketInfo::taken_as_is_anywhere(pkt) && !cx.holds_payload() {
            if over_mtu(d.mtu, len, 0) && over_mtu(d.mtu, len, PacketInfo::vlan_tags_of(pkt.linear())) {
                return cx.drop("exceeds-mtu");
            }
            return self.xmit_whole(cx, pkt, len);
        }
        self.transmit_validated(cx, pkt, len)
    }

    fn port_driver(&mut self) -> Option<&mut dyn PortDriver> {
        Some(self.driver.as_mut())
    }

    fn as_port(&mut self) -> Option<&mut PortDevice> {
        Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// [`PortDriver::xmit_burst`]'s default: [`PortDriver::xmit_len`] per
/// packet, each moved out of its slot (a direct call in each driver's
/// instance).
pub fn xmit_each<D: PortDriver + ?Sized>(
    d: &mut D,
    pkts: &mut [Packet],
    lens: &[usize],
    refused: &mut dyn FnMut(&'static str),
) {
    for (pkt, &len) in pkts.iter_mut().zip(lens) {
        if let Err(e) = d.xmit_len(pkt.move_out(), len) {
            refused(e.reason);
        }
    }
}

impl PortDevice {
    /// The transmit of a run of packets (`lens` their total lengths) given
    /// to this port: the leading packets that [`PortDevice::transmit`]
    /// would hand to the driver whole without looking further (an Ethernet
    /// port with carrier; linear packets without offloads, within the
    /// untagged MTU; no payload held) go to the driver at once
    /// ([`PortDriver::xmit_burst`]), counted as their steps would be.
    /// Returns how many; the caller walks the next one alone.
    pub fn transmit_run(&mut self, cx: &mut Cx<'_>, pkts: &mut [Packet], lens: &[usize]) -> usize {
        let d = cx.dev();
        if !d.carrier || d.medium != Medium::Ethernet || cx.holds_payload() {
            return 0;
        }
        let mtu = d.mtu;
        let n = pkts
            .iter()
            .zip(lens)
            .take_while(|&(p, &len)| PacketInfo::taken_as_is_anywhere(p) && !over_mtu(mtu, len, 0))
            .count();
        if n == 0 {
            return 0;
        }
        let c = &mut cx.dev_mut().counters;
        // No superpackets: a packet taken as it is anywhere has no GSO.
        c.count_steps(false, n as u64, lens[..n].iter().sum::<usize>() as u64, 0);
        c.tx_passthrough += n as u64;
        let mut refused = 0;
        self.driver.xmit_burst(&mut pkts[..n], &lens[..n], &mut |reason| {
            refused += 1;
            c.drop_n(reason, 1);
        });
        c.forwarded += (n - refused) as u64;
        c.refused += refused as u64;
        n
    }

    /// [`PortDevice::transmit`] of a packet the port may not take as it is:
    /// out of line, so that the plain frame's path stays a short call.
    #[inline(never)]
    fn transmit_validated(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, len: usize) -> Verdict {
        let me = cx.me();
        let d = &cx.devices()[me.0];
        let mut info = PacketInfo::of_len(pkt, len);
        if !info.is_gso() && over_mtu(d.mtu, info.len, info.vlan_tags) {
            return cx.drop("exceeds-mtu");
        }
        let mut len = len;
        if d.medium == Medium::Ip {
            // The packet stays in the walk's slot, now raw IP.
            match self.driver.link_output(std::mem::take(pkt)) {
                LinkOutput::Send(p) => {
                    *pkt = p;
                    len -= ETHERNET_HEADER_LEN;
                    info.len = len;
                }
                LinkOutput::Reply(reply) => {
                    cx.link_reply(me, reply);
                    return Verdict::Consumed;
                }
                LinkOutput::Drop(reason) => return cx.drop(reason),
            }
        }
        self.validate_and_send(cx, pkt, len, &info)
    }
}
