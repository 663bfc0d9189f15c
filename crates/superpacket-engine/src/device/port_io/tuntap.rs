//! TAP and TUN queues as [`IoEndpoint`]s, and the opening of their ports:
//! one generic implementation over the device kind
//! ([`crate::io::tuntap::TunTapKind`]), so a TAP port ([`TapDriver`]) and
//! the queue under a TUN port ([`crate::device::tun_port::TunDriver`]) are
//! opened, negotiated, brought up and reopened by the same code.

use super::{BASE_FEATURES, IoEndpoint, IoPortDriver, Received, io_driver_error, ns_handle, reopen_error};
use crate::device::features::NetdevFeatures;
use crate::device::port::DriverError;
use crate::io::tuntap::{
    Medium, TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_UDP_TUNNEL, TUN_F_UDP_TUNNEL_GSO,
    TUN_F_UDP_TUNNEL_GSO_CSUM, TUN_F_USO4, TUN_F_USO6, TunTapConfig, TunTapDevice, TunTapKind,
};
use crate::io::{IoError, NetNs};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use superpacket::packet::virtio::VirtioNetHdr;

/// The `TUN_F_*` offloads a TAP (or TUN) port asks for: checksum, TSO,
/// USO and UDP tunnel GSO with and without the outer checksum (a TAP only:
/// a TUN never asks for the tunnel flags, see `open_queue`). A kernel that
/// refuses the tunnel flags (before 6.17) leaves the port as before: 10-byte
/// header, tunnel superpackets segmented before they reach it.
pub const TAP_OFFLOADS: u32 =
    TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6 | TUN_F_UDP_TUNNEL;

/// How a TAP or TUN port is opened (topology `driver = { kind = "tap", ... }`
/// or `{ kind = "tun", ... }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapPortOptions {
    /// `TUN_F_*` offloads asked for with `TUNSETOFFLOAD` (default
    /// [`TAP_OFFLOADS`]); the kernel may accept fewer
    /// ([`TunTapDevice::negotiate_offload`]).
    pub offloads: u32,
    /// `IFF_MULTI_QUEUE`: each engine worker opens its own queue of the
    /// device and the kernel spreads flows over them by flow hash.
    pub multi_queue: bool,
}

impl Default for TapPortOptions {
    fn default() -> Self {
        TapPortOptions { offloads: TAP_OFFLOADS, multi_queue: false }
    }
}

impl<K: TunTapKind> IoEndpoint for TunTapDevice<K> {
    const KIND: &'static str = K::NAME;
    const MEDIUM: Medium = K::MEDIUM;
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
    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.as_fd().as_raw_fd())
    }
    fn udp_tunnel(&self) -> (bool, bool) {
        TunTapDevice::udp_tunnel(self)
    }
}

/// A port on a TAP device.
#[cfg(feature = "tap")]
pub type TapDriver = IoPortDriver<crate::io::TapDevice>;

/// Sets link `name` up in `netns` (or the current namespace), through netlink.
fn link_up(name: &str, netns: Option<&NetNs>) -> Result<(), DriverError> {
    match netns {
        Some(ns) => ns.link_up(name),
        None => crate::io::netlink::Netlink::open().and_then(|mut nl| nl.set_up(name, true)),
    }
    .map_err(|e| io_driver_error(&format!("bringing {name} up"), e))
}

/// Opens a nonblocking queue of device `name` (created if missing) in
/// `netns` with `opts`' multi-queue flag and negotiates `opts`' offloads;
/// returns it with the offloads accepted. `fail` labels an error with the
/// step (`open-failed` when opening, `reopen-failed` when reopening).
///
/// A TUN (raw IP) never asks for the tunnel flags: the kernel checks the
/// outer transport offset of a written tunnel header against an Ethernet
/// header length plus the outer IP header (`virtio_net_hdr_tnl_to_skb`), so
/// a raw IPv4 tunnel packet would be refused.
fn open_queue<K: TunTapKind>(
    name: &str,
    netns: Option<&NetNs>,
    opts: &TapPortOptions,
    fail: impl Fn(&str, IoError) -> DriverError,
) -> Result<(TunTapDevice<K>, u32), DriverError> {
    let cfg = TunTapConfig { nonblocking: true, multi_queue: opts.multi_queue, ..TunTapConfig::named(name) };
    let what = format!("opening {} {name}", K::NAME.to_ascii_uppercase());
    let dev = match netns {
        Some(ns) => TunTapDevice::<K>::open_in(ns, &cfg),
        None => TunTapDevice::<K>::open(&cfg),
    }
    .map_err(|e| fail(&what, e))?;
    let mut dev = dev;
    let wanted = if K::MEDIUM == Medium::Ip { opts.offloads & !TUN_F_UDP_TUNNEL } else { opts.offloads };
    let accepted = dev.negotiate_offload(wanted).map_err(|e| fail(&what, e))?;
    dev.set_nonblocking(true).map_err(|e| fail(&what, e))?;
    Ok((dev, accepted))
}

impl<K: TunTapKind> IoPortDriver<TunTapDevice<K>> {
    /// Creates (or attaches to) the TAP (or TUN) `name` inside `netns`
    /// (`None`: the current namespace) with a 10-byte virtio_net_hdr,
    /// nonblocking, negotiates [`TAP_OFFLOADS`] and brings the link up. The
    /// device exists while the driver lives.
    ///
    /// # Errors
    /// Opening, `TUNSETOFFLOAD` or `ip link set up` failing (needs
    /// CAP_NET_ADMIN); the message names the step.
    pub fn open(name: &str, netns: Option<&NetNs>) -> Result<IoPortDriver<TunTapDevice<K>>, DriverError> {
        Self::open_with(name, netns, &TapPortOptions::default())
    }

    /// [`IoPortDriver::open`] with `opts` (offloads asked for, multi-queue).
    /// The driver keeps a handle on `netns` and the options, to
    /// [`crate::device::PortDriver::reopen`]: the device is created again,
    /// the offloads negotiated again must be the ones accepted now.
    ///
    /// # Errors
    /// As [`IoPortDriver::open`].
    pub fn open_with(
        name: &str,
        netns: Option<&NetNs>,
        opts: &TapPortOptions,
    ) -> Result<IoPortDriver<TunTapDevice<K>>, DriverError> {
        let (dev, accepted) = open_queue::<K>(name, netns, opts, io_driver_error)?;
        let mut drv = IoPortDriver::with_features(dev, tap_features(accepted), accepted);
        link_up(name, netns)?;
        let ns = ns_handle(netns);
        let name = name.to_string();
        let opts = opts.clone();
        drv.reopen = Some(Box::new(move || {
            let ns =
                ns.as_ref().map_err(|e| reopen_error(&format!("{} {name}", K::NAME.to_ascii_uppercase()), e))?.as_ref();
            let opened = open_queue::<K>(&name, ns, &opts, |what, e| reopen_error(&format!("re{what}"), e))?;
            link_up(&name, ns)?;
            Ok(opened)
        }));
        Ok(drv)
    }

    /// Wraps an open queue: negotiates `wanted` (`TUN_F_*`), switches it to
    /// nonblocking; the link state is left as it is (and the driver cannot
    /// reopen the device).
    ///
    /// # Errors
    /// `TUNSETOFFLOAD` or `fcntl` failing.
    pub fn from_tap(mut tap: TunTapDevice<K>, wanted: u32) -> Result<IoPortDriver<TunTapDevice<K>>, DriverError> {
        let what = format!("{} {}", K::NAME.to_ascii_uppercase(), tap.name());
        let accepted = tap.negotiate_offload(wanted).map_err(|e| io_driver_error(&what, e))?;
        tap.set_nonblocking(true).map_err(|e| io_driver_error(&what, e))?;
        Ok(IoPortDriver::with_features(tap, tap_features(accepted), accepted))
    }
}

/// The features a TAP (or TUN) offers with `TUN_F_*` offloads `accepted`.
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
        // The kernel takes the tunnel flags only with a plain GSO flag, so
        // an accepted one means tunnel superpackets of TCP or UDP inside.
        if accepted & TUN_F_UDP_TUNNEL_GSO != 0 {
            f = f | NetdevFeatures::GSO_UDP_TUNNEL;
            if accepted & TUN_F_UDP_TUNNEL_GSO_CSUM != 0 {
                f = f | NetdevFeatures::GSO_UDP_TUNNEL_CSUM;
            }
        }
    }
    f
}
