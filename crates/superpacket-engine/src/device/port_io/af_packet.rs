//! AF_PACKET sockets as [`IoEndpoint`]s (batched, with an RX ring), and the
//! opening of AF_PACKET ports ([`PacketSocketDriver`]); see the
//! documentation of [`super`].

use super::{
    BASE_FEATURES, FrameHandler, IoEndpoint, IoPortDriver, Received, io_driver_error, ns_handle, reopen_error,
};
use crate::device::features::NetdevFeatures;
use crate::device::port::DriverError;
use crate::io::frame::FrameSource;
use crate::io::{IoError, NetNs, PacketSocket, PacketSocketConfig};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use superpacket::packet::virtio::VirtioNetHdr;

/// How an AF_PACKET port is opened (topology `driver = { kind = "af_packet", ... }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketPortOptions {
    /// `PACKET_QDISC_BYPASS`: sends skip the interface's qdisc.
    pub qdisc_bypass: bool,
    /// `PACKET_FANOUT` group shared by the engine's workers (`None`: one
    /// socket receives everything).
    pub fanout_group: Option<u16>,
    /// Frames per batched receive refill or `sendmmsg` (1: one system call
    /// per frame, sends written at once; see the module documentation).
    pub batch: usize,
    /// Frames of the TPACKET_V2 RX ring used when `batch` > 1 (each
    /// [`RING_FRAME_SIZE`] bytes: the default 128 frames map 8.5 MiB);
    /// 0: `recvmmsg` into `batch` slots of 128 KiB instead.
    pub rx_ring_frames: usize,
}

impl Default for PacketPortOptions {
    fn default() -> Self {
        PacketPortOptions {
            qdisc_bypass: false,
            fanout_group: None,
            batch: DEFAULT_BATCH,
            rx_ring_frames: DEFAULT_RX_RING_FRAMES,
        }
    }
}

/// Default frames per batched system call on AF_PACKET ports.
pub const DEFAULT_BATCH: usize = 32;

/// Default RX ring frames of an AF_PACKET port ([`PacketPortOptions::rx_ring_frames`]).
/// In the live vlan-gro topology (MTU frames from a TAP, GRO on the trunk
/// port, about 3 Gbps of TCP) a ring of 64 frames dropped about 1 % of the
/// frames when full, 128 almost none (256: none, same throughput).
pub const DEFAULT_RX_RING_FRAMES: usize = 128;

/// Most RX ring frames a port may ask for (the topology key `ring`):
/// 4096 frames of 68 KiB are 272 MiB of locked-in ring memory.
pub const MAX_RX_RING_FRAMES: usize = 4096;

/// Bytes per RX ring frame: a 64 KiB GSO packet with the ring's headers
/// (larger frames are dropped as `rx-truncated`).
pub const RING_FRAME_SIZE: usize = 17 * 4096;

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
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.as_fd().as_raw_fd())
    }
    fn batched(&self) -> bool {
        true
    }
    fn read_frames(&mut self, max: usize, f: &mut FrameHandler<'_>) -> Option<Result<usize, IoError>> {
        Some(self.recv_many(max, &mut |r, lend| {
            f(r.map(|(i, frame)| (Received { hdr: i.hdr, len: i.len, vlan: i.vlan }, frame)), lend)
        }))
    }
    fn write_frames<'a>(
        &mut self,
        frames: &dyn FrameSource<'a>,
        report: &mut dyn FnMut(usize, Result<usize, IoError>),
    ) -> usize {
        self.send_batch(frames, report)
    }
    fn take_kernel_drops(&self) -> u64 {
        self.take_stats().map(|(_, drops)| u64::from(drops)).unwrap_or(0)
    }
}

/// A port on an interface, through an AF_PACKET socket.
pub type PacketSocketDriver = IoPortDriver<PacketSocket>;

/// The features of an AF_PACKET port: HW_CSUM, SG, TSO, TSO6, GSO_UDP_L4
/// (the kernel segments what the interface cannot take).
pub const PACKET_SOCKET_FEATURES: NetdevFeatures = BASE_FEATURES
    .union(NetdevFeatures::HW_CSUM)
    .union(NetdevFeatures::TSO)
    .union(NetdevFeatures::TSO6)
    .union(NetdevFeatures::GSO_UDP_L4);

/// Opens the socket of an AF_PACKET port: `PACKET_VNET_HDR`, nonblocking,
/// incoming packets only, VLAN tags reported, `opts`' bypass and fanout,
/// and with `batch` > 1 the RX ring.
fn open_packet_socket(
    interface: &str,
    netns: Option<&NetNs>,
    opts: &PacketPortOptions,
) -> Result<PacketSocket, IoError> {
    let cfg = PacketSocketConfig {
        incoming_only: true,
        auxdata: true,
        nonblocking: true,
        qdisc_bypass: opts.qdisc_bypass,
        fanout_group: opts.fanout_group,
        ..Default::default()
    };
    let mut sock = match netns {
        Some(ns) => PacketSocket::open_in(ns, interface, &cfg),
        None => PacketSocket::open(interface, &cfg),
    }?;
    if opts.batch > 1 && opts.rx_ring_frames > 0 {
        sock.enable_rx_ring(opts.rx_ring_frames, RING_FRAME_SIZE)?;
    }
    Ok(sock)
}

impl IoPortDriver<PacketSocket> {
    /// Opens an AF_PACKET socket with `PACKET_VNET_HDR` bound to `interface`
    /// inside `netns` (`None`: the current namespace): nonblocking, incoming
    /// packets only, VLAN tags reported (`PACKET_AUXDATA`), **one system
    /// call per frame** (batch 1: every transmitted frame is written at
    /// once, for callers without an event loop that would call
    /// [`crate::device::PortDriver::flush`]). The interface's link state is left as it is.
    ///
    /// # Errors
    /// No such interface, or the socket calls failing (needs CAP_NET_RAW).
    pub fn open(interface: &str, netns: Option<&NetNs>) -> Result<PacketSocketDriver, DriverError> {
        PacketSocketDriver::open_with(interface, netns, &PacketPortOptions { batch: 1, ..PacketPortOptions::default() })
    }

    /// [`PacketSocketDriver::open`] with `opts` (qdisc bypass, fanout, batch
    /// size, RX ring; the defaults batch 32 frames per call and receive from
    /// an RX ring, see the module documentation). The driver keeps a handle
    /// on `netns` and the options, to [`crate::device::PortDriver::reopen`].
    ///
    /// # Errors
    /// As [`PacketSocketDriver::open`], plus the RX ring setup failing.
    pub fn open_with(
        interface: &str,
        netns: Option<&NetNs>,
        opts: &PacketPortOptions,
    ) -> Result<PacketSocketDriver, DriverError> {
        let sock = open_packet_socket(interface, netns, opts)
            .map_err(|e| io_driver_error(&format!("opening AF_PACKET on {interface}"), e))?;
        let mut drv = PacketSocketDriver::from_socket(sock)?.with_batch(opts.batch);
        let ns = ns_handle(netns);
        let iface = interface.to_string();
        let opts = opts.clone();
        drv.reopen = Some(Box::new(move || {
            let what = format!("reopening AF_PACKET on {iface}");
            let ns = ns.as_ref().map_err(|e| reopen_error(&what, e))?.as_ref();
            let sock = open_packet_socket(&iface, ns, &opts).map_err(|e| reopen_error(&what, e))?;
            Ok((sock, 0))
        }));
        Ok(drv)
    }

    /// Wraps an open socket (it should have `auxdata` on, so that stripped
    /// VLAN tags are put back), switching it to nonblocking; per-frame I/O
    /// ([`IoPortDriver::with_batch`] changes it).
    ///
    /// # Errors
    /// `fcntl` failing.
    pub fn from_socket(sock: PacketSocket) -> Result<PacketSocketDriver, DriverError> {
        let what = format!("AF_PACKET on {}", sock.ifname());
        sock.set_nonblocking(true).map_err(|e| io_driver_error(&what, e))?;
        Ok(IoPortDriver::with_features(sock, PACKET_SOCKET_FEATURES, 0))
    }
}
