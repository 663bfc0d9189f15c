//! Port drivers backed by real kernel I/O: a TAP device ([`TapDriver`]) or
//! an AF_PACKET socket on an interface ([`PacketSocketDriver`]), both with
//! virtio_net_hdr framing (offload-rules section 4), so superpackets cross
//! into the kernel whole and come out of it whole.
//!
//! Both are one generic driver, [`IoPortDriver`], over an [`IoEndpoint`]:
//!
//! - **transmit** ([`PortDriver::xmit`]): the virtio_net_hdr is built from the
//!   packet's metadata ([`VirtioNetHdr::from_meta`], offload-rules 4.3: GSO
//!   type and size, `NEEDS_CSUM` for a partial checksum) and written with the
//!   packet's chunks ([`Packet::all_chunks`]: linear area, segments, then the
//!   frag list) in one vectored write: no payload copy. Packets of more than
//!   [`STACK_PARTS`] chunks are gathered into a reusable buffer first.
//! - **software segmentation output** ([`PortDriver::sink`]): scatter-gather
//!   frames are written as header + payload slices, linear frames from a
//!   reusable buffer, each with a header from the frame's metadata.
//! - **receive** ([`PortDriver::recv`]): a nonblocking read into a reusable
//!   buffer, the header imported with the kernel's validation
//!   ([`VirtioNetHdr::to_meta`], [`ImportOptions::default`]); a refused header
//!   is a drop counted with [`VirtioHdrError::reason`], never a panic. The
//!   [`Packet`] built from the frame is the one allocation (and copy) per
//!   received packet, as an skb is. A VLAN tag the kernel moved into skb
//!   metadata (AF_PACKET, `PACKET_AUXDATA`) is put back into the frame.
//!
//! Errors on transmit are [`DriverError`]s whose `reason` the graph counts
//! as a drop on the port; errors in the segmenter's output and on receive
//! are counted by the driver ([`IoPortStats::drops`]) and reported to the
//! graph through [`PortDriver::take_drops`].
//!
//! Features come from what the kernel accepted:
//!
//! - TAP: `TUNSETOFFLOAD` of [`TAP_OFFLOADS`] through
//!   [`TapDevice::negotiate_offload`]; CSUM gives HW_CSUM, TSO4 TSO, TSO6
//!   TSO6, TSO_ECN TSO_ECN, USO4+USO6 GSO_UDP_L4. The flags set which
//!   superpackets the kernel hands this port undivided on receive (the TAP's
//!   own netdev features, offload-rules 4.4); the kernel generation that
//!   accepts a flag also accepts the matching GSO type in headers written to
//!   the TAP (USO: both since 6.2). What the TAP hands the kernel is received
//!   in its namespace as one GSO skb, segmented only where it leaves (or
//!   never, if it is delivered locally): a TAP port takes superpackets.
//! - AF_PACKET: HW_CSUM, SG, TSO, TSO6 and GSO_UDP_L4 always: the kernel
//!   validates the header (`virtio_net_hdr_to_skb`) and segments in software
//!   when the interface lacks the offload (veth with `tso off`), or passes
//!   the GSO skb on (offload-rules 4.5; what the kernel did is recorded in
//!   [`crate::io::oracle`]).
//!
//! Both accept frag lists (their chunks are written in order) and any VLAN
//! depth ([`FeaturesCheck::Any`]): the kernel applies its own
//! `features_check` where the skb finally leaves.

use super::features::{FeaturesCheck, NetdevFeatures};
use super::port::{DriverError, PortDriver};
use crate::io::packet_socket::VlanInfo;
use crate::io::tap::{STACK_PARTS, TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_USO4, TUN_F_USO6};
use crate::io::{IoError, NetNs, PacketSocket, PacketSocketConfig, TapConfig, TapDevice};
use crate::offload::gso::{SegmentSink, SgFrame};
use crate::packet::virtio::{ImportOptions, VirtioHdrError, VirtioNetHdr};
use crate::packet::{OffloadMeta, Packet};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::process::Command;

/// The `TUN_F_*` offloads a TAP port asks for.
pub const TAP_OFFLOADS: u32 = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6;

/// How a TAP port is opened (topology `driver = { kind = "tap", ... }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapPortOptions {
    /// `TUN_F_*` offloads asked for with `TUNSETOFFLOAD` (default
    /// [`TAP_OFFLOADS`]); the kernel may accept fewer
    /// ([`TapDevice::negotiate_offload`]).
    pub offloads: u32,
    /// `IFF_MULTI_QUEUE`: each engine worker opens its own queue of the TAP
    /// and the kernel spreads flows over them by flow hash.
    pub multi_queue: bool,
}

impl Default for TapPortOptions {
    fn default() -> Self {
        TapPortOptions { offloads: TAP_OFFLOADS, multi_queue: false }
    }
}

/// How an AF_PACKET port is opened (topology `driver = { kind = "af_packet", ... }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketPortOptions {
    /// `PACKET_QDISC_BYPASS`: sends skip the interface's qdisc.
    pub qdisc_bypass: bool,
    /// `PACKET_FANOUT` group shared by the engine's workers (`None`: one
    /// socket receives everything).
    pub fanout_group: Option<u16>,
    /// Frames per batched receive or send system call (1: one call per frame).
    pub batch: usize,
}

impl Default for PacketPortOptions {
    fn default() -> Self {
        PacketPortOptions { qdisc_bypass: false, fanout_group: None, batch: DEFAULT_BATCH }
    }
}

/// Default frames per batched system call on AF_PACKET ports.
pub const DEFAULT_BATCH: usize = 32;

/// Most frames per batched system call on AF_PACKET ports.
pub const MAX_BATCH: usize = 1024;

/// Receive buffer size: more than a 64 KiB GSO packet with its headers.
pub const RECV_BUF: usize = 128 * 1024;

/// Most packets a single [`PortDriver::recv`] call discards (refused or
/// truncated) before it returns `None`, so that a flood of bad packets
/// cannot hold the caller.
const MAX_DISCARDS_PER_RECV: usize = 64;

/// Features every I/O port has: scatter-gather (vectored writes), frag lists
/// (written as chunks), high memory, software GSO.
const BASE_FEATURES: NetdevFeatures =
    NetdevFeatures::SG.union(NetdevFeatures::FRAGLIST).union(NetdevFeatures::HIGHDMA).union(NetdevFeatures::GSO);

/// One frame read from an [`IoEndpoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The virtio_net_hdr the kernel wrote.
    pub hdr: VirtioNetHdr,
    /// Frame length in the buffer.
    pub len: usize,
    /// A VLAN tag the kernel kept in skb metadata (not in the bytes).
    pub vlan: Option<VlanInfo>,
}

/// A kernel endpoint moving frames with virtio_net_hdr framing: a TAP queue
/// or an AF_PACKET socket. Implemented for [`TapDevice`] and
/// [`PacketSocket`] (both used nonblocking).
pub trait IoEndpoint: fmt::Debug + Send + 'static {
    /// Driver kind reported by [`PortDriver::kind`].
    const KIND: &'static str;
    /// The device or interface name.
    fn ifname(&self) -> &str;
    /// Writes `hdr` then the frame made of `parts`, in one call.
    ///
    /// # Errors
    /// The write failing.
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError>;
    /// Reads one frame into `buf` without waiting; `Ok(None)` when nothing is queued.
    ///
    /// # Errors
    /// The read failing ([`IoError::Truncated`] for a frame larger than `buf`).
    fn read_frame(&mut self, buf: &mut [u8]) -> Result<Option<Received>, IoError>;
}

impl IoEndpoint for TapDevice {
    const KIND: &'static str = "tap";
    fn ifname(&self) -> &str {
        self.name()
    }
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError> {
        self.write_packet_vectored(hdr, parts)
    }
    fn read_frame(&mut self, buf: &mut [u8]) -> Result<Option<Received>, IoError> {
        match self.read_packet(buf) {
            Ok((hdr, len)) => Ok(Some(Received { hdr, len, vlan: None })),
            Err(e) if e.is_would_block() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl IoEndpoint for PacketSocket {
    const KIND: &'static str = "af_packet";
    fn ifname(&self) -> &str {
        PacketSocket::ifname(self)
    }
    fn write_frame(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize, IoError> {
        self.send(hdr, parts)
    }
    fn read_frame(&mut self, buf: &mut [u8]) -> Result<Option<Received>, IoError> {
        Ok(self.try_recv_info(buf)?.map(|i| Received { hdr: i.hdr, len: i.len, vlan: i.vlan }))
    }
}

/// Counters of an I/O port driver (the graph keeps the port's own counters;
/// these say what reached the kernel).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoPortStats {
    /// Frames (superpackets counting once) written to the kernel.
    pub tx_frames: u64,
    /// Their bytes (without virtio headers).
    pub tx_bytes: u64,
    /// GSO superpackets among them.
    pub tx_superpackets: u64,
    /// Packets received.
    pub rx_frames: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// GSO superpackets among them.
    pub rx_superpackets: u64,
    /// Every drop the driver saw, by reason (transmit errors included).
    pub drops: BTreeMap<&'static str, u64>,
    /// The most recent error, as text.
    pub last_error: Option<String>,
}

/// A port driver over a kernel endpoint (see the module documentation).
pub struct IoPortDriver<E: IoEndpoint> {
    endpoint: E,
    hw: NetdevFeatures,
    offloads: u32,
    /// Gathers packets of more than [`STACK_PARTS`] chunks; lends linear frames.
    buf: Vec<u8>,
    rx_buf: Vec<u8>,
    /// Drops not yet reported through [`PortDriver::take_drops`].
    pending: Vec<(&'static str, u64)>,
    stats: IoPortStats,
}

/// A port on a TAP device.
pub type TapDriver = IoPortDriver<TapDevice>;
/// A port on an interface, through an AF_PACKET socket.
pub type PacketSocketDriver = IoPortDriver<PacketSocket>;

impl<E: IoEndpoint> fmt::Debug for IoPortDriver<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoPortDriver")
            .field("kind", &E::KIND)
            .field("ifname", &self.endpoint.ifname())
            .field("hw", &self.hw)
            .field("stats", &self.stats)
            .finish()
    }
}

fn io_driver_error(what: &str, e: IoError) -> DriverError {
    DriverError::new("open-failed", format!("{what}: {e}"))
}

/// `ip [-n NS] link set dev NAME up`.
fn link_up(name: &str, netns: Option<&NetNs>) -> Result<(), DriverError> {
    match netns {
        Some(ns) => ns.link_up(name).map_err(|e| io_driver_error(&format!("bringing {name} up"), e)),
        None => {
            let out = Command::new("ip")
                .args(["link", "set", "dev", name, "up"])
                .output()
                .map_err(|e| DriverError::new("open-failed", format!("cannot run `ip`: {e}")))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(DriverError::new(
                    "open-failed",
                    format!("`ip link set dev {name} up` failed: {}", String::from_utf8_lossy(&out.stderr).trim()),
                ))
            }
        }
    }
}

impl IoPortDriver<TapDevice> {
    /// Creates (or attaches to) TAP `name` inside `netns` (`None`: the
    /// current namespace) with a 10-byte virtio_net_hdr, nonblocking,
    /// negotiates [`TAP_OFFLOADS`] and brings the link up. The TAP exists
    /// while the driver lives.
    ///
    /// # Errors
    /// Opening, `TUNSETOFFLOAD` or `ip link set up` failing (needs
    /// CAP_NET_ADMIN); the message names the step.
    pub fn open(name: &str, netns: Option<&NetNs>) -> Result<TapDriver, DriverError> {
        TapDriver::open_with(name, netns, &TapPortOptions::default())
    }

    /// [`TapDriver::open`] with `opts` (offloads asked for, multi-queue).
    ///
    /// # Errors
    /// As [`TapDriver::open`].
    pub fn open_with(name: &str, netns: Option<&NetNs>, opts: &TapPortOptions) -> Result<TapDriver, DriverError> {
        let cfg = TapConfig { nonblocking: true, multi_queue: opts.multi_queue, ..TapConfig::named(name) };
        let what = format!("opening TAP {name}");
        let tap = match netns {
            Some(ns) => TapDevice::open_in(ns, &cfg),
            None => TapDevice::open(&cfg),
        }
        .map_err(|e| io_driver_error(&what, e))?;
        let drv = TapDriver::from_tap(tap, opts.offloads)?;
        link_up(name, netns)?;
        Ok(drv)
    }

    /// Wraps an open TAP: negotiates `wanted` (`TUN_F_*`), switches it to
    /// nonblocking; the link state is left as it is.
    ///
    /// # Errors
    /// `TUNSETOFFLOAD` or `fcntl` failing.
    pub fn from_tap(tap: TapDevice, wanted: u32) -> Result<TapDriver, DriverError> {
        let what = format!("TAP {}", tap.name());
        let accepted = tap.negotiate_offload(wanted).map_err(|e| io_driver_error(&what, e))?;
        tap.set_nonblocking(true).map_err(|e| io_driver_error(&what, e))?;
        Ok(IoPortDriver::with_features(tap, tap_features(accepted), accepted))
    }
}

/// The features a TAP offers with `TUN_F_*` offloads `accepted`.
pub fn tap_features(accepted: u32) -> NetdevFeatures {
    let mut f = BASE_FEATURES;
    if accepted & TUN_F_CSUM != 0 {
        f = f | NetdevFeatures::HW_CSUM;
        // Every flag but CSUM is ignored without CSUM (offload-rules 4.4).
        for (flag, feat) in [
            (TUN_F_TSO4, NetdevFeatures::TSO),
            (TUN_F_TSO6, NetdevFeatures::TSO6),
            (TUN_F_TSO_ECN, NetdevFeatures::TSO_ECN),
        ] {
            if accepted & flag != 0 {
                f = f | feat;
            }
        }
        if accepted & (TUN_F_USO4 | TUN_F_USO6) == TUN_F_USO4 | TUN_F_USO6 {
            f = f | NetdevFeatures::GSO_UDP_L4;
        }
    }
    f
}

/// The features of an AF_PACKET port: HW_CSUM, SG, TSO, TSO6, GSO_UDP_L4
/// (the kernel segments what the interface cannot take).
pub const PACKET_SOCKET_FEATURES: NetdevFeatures = BASE_FEATURES
    .union(NetdevFeatures::HW_CSUM)
    .union(NetdevFeatures::TSO)
    .union(NetdevFeatures::TSO6)
    .union(NetdevFeatures::GSO_UDP_L4);

impl IoPortDriver<PacketSocket> {
    /// Opens an AF_PACKET socket with `PACKET_VNET_HDR` bound to `interface`
    /// inside `netns` (`None`: the current namespace): nonblocking, incoming
    /// packets only, VLAN tags reported (`PACKET_AUXDATA`). The interface's
    /// link state is left as it is.
    ///
    /// # Errors
    /// No such interface, or the socket calls failing (needs CAP_NET_RAW).
    pub fn open(interface: &str, netns: Option<&NetNs>) -> Result<PacketSocketDriver, DriverError> {
        PacketSocketDriver::open_with(interface, netns, &PacketPortOptions::default())
    }

    /// [`PacketSocketDriver::open`] with `opts` (qdisc bypass, fanout, batch size).
    ///
    /// # Errors
    /// As [`PacketSocketDriver::open`].
    pub fn open_with(
        interface: &str,
        netns: Option<&NetNs>,
        opts: &PacketPortOptions,
    ) -> Result<PacketSocketDriver, DriverError> {
        let cfg = PacketSocketConfig {
            incoming_only: true,
            auxdata: true,
            nonblocking: true,
            qdisc_bypass: opts.qdisc_bypass,
            ..Default::default()
        };
        let sock = match netns {
            Some(ns) => PacketSocket::open_in(ns, interface, &cfg),
            None => PacketSocket::open(interface, &cfg),
        }
        .map_err(|e| io_driver_error(&format!("opening AF_PACKET on {interface}"), e))?;
        PacketSocketDriver::from_socket(sock)
    }

    /// Wraps an open socket (it should have `auxdata` on, so that stripped
    /// VLAN tags are put back), switching it to nonblocking.
    ///
    /// # Errors
    /// `fcntl` failing.
    pub fn from_socket(sock: PacketSocket) -> Result<PacketSocketDriver, DriverError> {
        let what = format!("AF_PACKET on {}", sock.ifname());
        sock.set_nonblocking(true).map_err(|e| io_driver_error(&what, e))?;
        Ok(IoPortDriver::with_features(sock, PACKET_SOCKET_FEATURES, 0))
    }
}

impl<E: IoEndpoint> IoPortDriver<E> {
    /// A driver over `endpoint` (already nonblocking) offering `hw`;
    /// `offloads` is informational (the `TUN_F_*` flags accepted, 0 if none apply).
    pub fn with_features(endpoint: E, hw: NetdevFeatures, offloads: u32) -> IoPortDriver<E> {
        IoPortDriver {
            endpoint,
            hw,
            offloads,
            buf: Vec::new(),
            rx_buf: vec![0; RECV_BUF],
            pending: Vec::with_capacity(8),
            stats: IoPortStats::default(),
        }
    }

    /// The endpoint (TAP device or socket).
    pub fn endpoint(&self) -> &E {
        &self.endpoint
    }

    /// The endpoint, writable.
    pub fn endpoint_mut(&mut self) -> &mut E {
        &mut self.endpoint
    }

    /// The `TUN_F_*` offloads the kernel accepted (TAP; 0 for AF_PACKET).
    pub fn offloads(&self) -> u32 {
        self.offloads
    }

    /// The driver's counters.
    pub fn stats(&self) -> &IoPortStats {
        &self.stats
    }

    fn count_drop(&mut self, reason: &'static str, err: Option<String>) {
        *self.stats.drops.entry(reason).or_insert(0) += 1;
        if let Some(e) = err {
            self.stats.last_error = Some(e);
        }
        match self.pending.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.pending.push((reason, 1)),
        }
    }

    /// Writes `pkt` with metadata `meta`: header from the metadata, then
    /// the packet's chunks (gathered into `buf` beyond [`STACK_PARTS`]).
    fn send_packet(&mut self, pkt: &Packet, meta: &OffloadMeta) -> Result<(), DriverError> {
        let hdr = VirtioNetHdr::from_meta(meta, pkt.linear(), false).map_err(header_error)?;
        let mut parts: [&[u8]; STACK_PARTS] = [&[]; STACK_PARTS];
        let mut n = 0;
        let mut overflow = false;
        for c in pkt.all_chunks() {
            if n == STACK_PARTS {
                overflow = true;
                break;
            }
            parts[n] = c;
            n += 1;
        }
        let written = if overflow {
            pkt.copy_all_to(&mut self.buf);
            self.endpoint.write_frame(&hdr, &[&self.buf])
        } else {
            self.endpoint.write_frame(&hdr, &parts[..n])
        }
        .map_err(tx_error)?;
        self.count_tx(written, meta);
        Ok(())
    }

    fn count_tx(&mut self, bytes: usize, meta: &OffloadMeta) {
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += bytes as u64;
        if meta.is_gso() {
            self.stats.tx_superpackets += 1;
        }
    }

    /// A transmit error found outside [`PortDriver::xmit`] (no caller to return it to).
    fn sink_result(&mut self, r: Result<(), DriverError>) {
        if let Err(e) = r {
            self.count_drop(e.reason, Some(e.message));
        }
    }
}

fn header_error(e: VirtioHdrError) -> DriverError {
    DriverError::new(e.reason(), format!("virtio_net_hdr: {e}"))
}

/// Maps a write failure to a drop reason.
fn tx_error(e: IoError) -> DriverError {
    let reason = match &e {
        IoError::Header(h) => h.reason(),
        IoError::ShortWrite { .. } => "tx-short-write",
        IoError::Unsupported(_) => "tx-unsupported",
        _ => match e.raw_os_error() {
            Some(libc::EINVAL) => "tx-refused",
            Some(libc::EAGAIN | libc::ENOBUFS) => "tx-busy",
            Some(libc::EMSGSIZE) => "tx-too-big",
            Some(libc::ENETDOWN | libc::ENXIO | libc::EIO) => "tx-link-down",
            _ => "tx-io-error",
        },
    };
    DriverError::new(reason, e.to_string())
}

impl<E: IoEndpoint> PortDriver for IoPortDriver<E> {
    fn kind(&self) -> &'static str {
        E::KIND
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Any
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        let r = self.send_packet(&pkt, &pkt.meta);
        if let Err(e) = &r {
            *self.stats.drops.entry(e.reason).or_insert(0) += 1;
            self.stats.last_error = Some(e.message.clone());
        }
        r
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        for _ in 0..MAX_DISCARDS_PER_RECV {
            let r = match self.endpoint.read_frame(&mut self.rx_buf) {
                Ok(None) => return None,
                Ok(Some(r)) => r,
                Err(IoError::Truncated { .. }) => {
                    self.count_drop("rx-truncated", None);
                    continue;
                }
                Err(IoError::Header(e)) => {
                    self.count_drop(e.reason(), None);
                    continue;
                }
                Err(e) => {
                    self.count_drop("rx-io-error", Some(e.to_string()));
                    return None;
                }
            };
            let frame = &self.rx_buf[..r.len];
            let meta = match r.hdr.to_meta(frame, &ImportOptions::default()) {
                Ok(m) => m,
                Err(e) => {
                    self.count_drop(e.reason(), None);
                    continue;
                }
            };
            let mut p = Packet::from_frame(frame);
            p.meta = meta;
            if let Some(v) = r.vlan {
                let tpid = if v.tpid == 0 { 0x8100 } else { v.tpid };
                if p.push_vlan_tag(tpid, v.tci).is_err() {
                    self.count_drop("rx-vlan-restore", None);
                    continue;
                }
            }
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += p.len() as u64;
            if p.meta.is_gso() {
                self.stats.rx_superpackets += 1;
            }
            return Some(p);
        }
        None
    }
    fn take_drops(&mut self, report: &mut dyn FnMut(&'static str, u64)) {
        for (reason, n) in self.pending.drain(..) {
            report(reason, n);
        }
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl<E: IoEndpoint> SegmentSink for IoPortDriver<E> {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        let r = self.send_packet(packet, meta);
        self.sink_result(r);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        let r = (|| {
            let hdr = VirtioNetHdr::from_meta(&frame.meta, frame.header, false).map_err(header_error)?;
            let written = if frame.payload.len() < STACK_PARTS {
                let mut parts: [&[u8]; STACK_PARTS] = [&[]; STACK_PARTS];
                parts[0] = frame.header;
                parts[1..=frame.payload.len()].copy_from_slice(frame.payload);
                self.endpoint.write_frame(&hdr, &parts[..=frame.payload.len()])
            } else {
                frame.copy_to(&mut self.buf);
                self.endpoint.write_frame(&hdr, &[&self.buf])
            }
            .map_err(tx_error)?;
            self.count_tx(written, &frame.meta);
            Ok(())
        })();
        self.sink_result(r);
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.clear();
        self.buf.resize(len, 0);
        &mut self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let r = (|| {
            let frame = &self.buf[..len.min(self.buf.len())];
            let hdr = VirtioNetHdr::from_meta(meta, frame, false).map_err(header_error)?;
            let written = self.endpoint.write_frame(&hdr, &[frame]).map_err(tx_error)?;
            self.count_tx(written, meta);
            Ok(())
        })();
        self.sink_result(r);
    }
}
