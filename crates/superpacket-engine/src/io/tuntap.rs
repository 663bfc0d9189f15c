//! The `/dev/net/tun` queue that TAP ([`super::tap`]) and TUN
//! ([`super::tun`]) devices share: one [`TunTapDevice`], generic over the
//! kind ([`TunTapKind`]: [`super::tap::Tap`] or [`super::tun::Tun`]), does
//! the `TUNSETIFF`, `TUNSETVNETHDRSZ` and `TUNSETOFFLOAD` ioctls, the
//! vectored reads and writes with a virtio_net_hdr in front, nonblocking mode
//! and polling; the kinds differ only in their `IFF_*` flags and in what
//! follows the header (an Ethernet frame or a raw IP packet, [`Medium`]).
//!
//! A queue is opened in the current namespace or inside a [`NetNs`]
//! ([`TunTapDevice::open_in`]; the descriptor keeps working from any
//! thread). Every read and write carries a virtio_net_hdr of `vnet_hdr_sz`
//! bytes (10, 12 or 24 here, host byte order), moved with `readv`/`writev` so
//! that the packet is never concatenated with its header.
//!
//! # UDP tunnel GSO
//!
//! Kernels from 6.17 on (tun's `set_offload`) accept `TUN_F_UDP_TUNNEL_GSO`
//! (netdev feature `tx-udp_tnl-segmentation`) and `TUN_F_UDP_TUNNEL_GSO_CSUM`
//! (`tx-udp_tnl-csum-segmentation`), only together with a plain GSO flag
//! (TSO4, TSO6 or USO); older kernels refuse the unknown bits with `EINVAL`.
//! With them the kernel hands over VXLAN/Geneve superpackets whole, with the
//! 24-byte `virtio_net_hdr_v1_hash_tunnel` ([`HdrLayout::HashTunnel`]) —
//! and fails every read with a smaller configured header, so
//! [`TunTapDevice::negotiate_offload`] sets the header size to 24 before
//! asking for them (and back when they are refused). On writes the kernel
//! accepts tunnel headers whenever the header size is 24 or more, whatever
//! `TUNSETOFFLOAD` says. Every field of a tunnel header is little-endian
//! (the kernel reads and writes it so), which host order is on the
//! little-endian machines this runs on.
//!
//! A device created here is not persistent: it disappears when its last
//! descriptor is closed (and with its namespace). A device that existed
//! before (persistent, e.g. `ip tuntap add dev X mode tap vnet_hdr`, or
//! another process's multi-queue device) keeps the offloads `TUNSETOFFLOAD`
//! sets after we let go, so [`TunTapDevice::open`] remembers the offloads in
//! effect (read from the device's netdev features with `SIOCETHTOOL`,
//! [`TunTapDevice::netdev_offloads`]) and the last queue this process holds
//! restores them on drop (best effort).
//! [`TunTapDevice::keep_offloads_on_drop`] opts out.

use super::error::{IoError, Result};
use super::netns::NetNs;
use super::sys;
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;
use std::time::Duration;
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};
pub use superpacket::wire::Medium;

/// `TUN_F_CSUM`: userspace accepts `CHECKSUM_PARTIAL` packets.
pub const TUN_F_CSUM: u32 = 0x01;
/// `TUN_F_TSO4`: userspace accepts TCPv4 GSO packets.
pub const TUN_F_TSO4: u32 = 0x02;
/// `TUN_F_TSO6`: userspace accepts TCPv6 GSO packets.
pub const TUN_F_TSO6: u32 = 0x04;
/// `TUN_F_TSO_ECN`: TSO packets may carry the ECN flag.
pub const TUN_F_TSO_ECN: u32 = 0x08;
/// `TUN_F_UFO`: accepted and ignored by current kernels.
pub const TUN_F_UFO: u32 = 0x10;
/// `TUN_F_USO4`: UDP segmentation offload, IPv4 (effective only with USO6).
pub const TUN_F_USO4: u32 = 0x20;
/// `TUN_F_USO6`: UDP segmentation offload, IPv6 (effective only with USO4).
pub const TUN_F_USO6: u32 = 0x40;
/// `TUN_F_UDP_TUNNEL_GSO`: TSO/USO inside a UDP tunnel (effective only with
/// a plain GSO flag; needs the 24-byte header; Linux 6.17+).
pub const TUN_F_UDP_TUNNEL_GSO: u32 = 0x80;
/// `TUN_F_UDP_TUNNEL_GSO_CSUM`: the same with the outer UDP checksum
/// (effective only with [`TUN_F_UDP_TUNNEL_GSO`]).
pub const TUN_F_UDP_TUNNEL_GSO_CSUM: u32 = 0x100;
/// Both tunnel flags.
pub const TUN_F_UDP_TUNNEL: u32 = TUN_F_UDP_TUNNEL_GSO | TUN_F_UDP_TUNNEL_GSO_CSUM;

/// `IFF_TUN`.
pub const IFF_TUN: u16 = 0x0001;
/// `IFF_TAP`.
pub const IFF_TAP: u16 = 0x0002;
/// `IFF_NAPI`: written packets go through a NAPI poll and full GRO.
pub const IFF_NAPI: u16 = 0x0010;
/// `IFF_NAPI_FRAGS`: `napi_gro_frags` path (requires `IFF_NAPI`).
pub const IFF_NAPI_FRAGS: u16 = 0x0020;
/// `IFF_NO_CARRIER`.
pub const IFF_NO_CARRIER: u16 = 0x0040;
/// `IFF_MULTI_QUEUE`.
pub const IFF_MULTI_QUEUE: u16 = 0x0100;
/// `IFF_NO_PI`: no packet-information prefix.
pub const IFF_NO_PI: u16 = 0x1000;
/// `IFF_VNET_HDR`: virtio_net_hdr prefix on every read and write.
pub const IFF_VNET_HDR: u16 = 0x4000;

// _IOW('T', 202, int) etc. Computed here so as not to depend on libc's coverage.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETPERSIST: libc::c_ulong = 0x4004_54cb;
const TUNGETFEATURES: libc::c_ulong = 0x8004_54cf;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNGETVNETHDRSZ: libc::c_ulong = 0x8004_54d7;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

/// The netdev features (ethtool names) that `TUNSETOFFLOAD` switches, with
/// the `TUN_F_*` flags that turn them on (drivers/net/tun.c `set_offload`).
pub const OFFLOAD_FEATURES: [(&str, u32); 7] = [
    ("tx-checksum-ip-generic", TUN_F_CSUM),
    ("tx-tcp-segmentation", TUN_F_TSO4),
    ("tx-tcp6-segmentation", TUN_F_TSO6),
    ("tx-tcp-ecn-segmentation", TUN_F_TSO_ECN),
    ("tx-udp-segmentation", TUN_F_USO4 | TUN_F_USO6),
    ("tx-udp_tnl-segmentation", TUN_F_UDP_TUNNEL_GSO),
    ("tx-udp_tnl-csum-segmentation", TUN_F_UDP_TUNNEL_GSO_CSUM),
];

/// The `TUN_F_*` flags whose effect is the given set of active netdev
/// features (ethtool names): the inverse of tun's `set_offload`. Without
/// `tx-checksum-ip-generic` nothing else can be on, so the result is 0.
pub fn offloads_from_features<'a>(active: impl IntoIterator<Item = &'a str>) -> u32 {
    let mut flags = 0;
    for name in active {
        if let Some((_, f)) = OFFLOAD_FEATURES.iter().find(|(n, _)| *n == name) {
            flags |= f;
        }
    }
    if flags & TUN_F_CSUM == 0 { 0 } else { flags }
}

/// Which device a queue belongs to: (network namespace inode, ifindex).
type DeviceKey = (u64, u32);

/// One device this process has queues of.
struct Held {
    key: DeviceKey,
    /// Open [`TunTapDevice`]s of this process on the device.
    queues: usize,
    /// `TUN_F_*` flags to set again when the last of them goes.
    restore: Option<u32>,
    /// The virtio_net_hdr size to set again then (a device that existed
    /// before keeps its own).
    restore_hdr_len: Option<usize>,
}

/// The devices this process holds, so that queues of one multi-queue device
/// remember the offloads once and restore them once, when the last goes.
static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

fn held() -> std::sync::MutexGuard<'static, Vec<Held>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// `struct ifreq` as used by `TUNSETIFF`: name plus a short of flags, padded
/// to the 40 bytes of the kernel's union.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// A kind of `/dev/net/tun` device: TAP ([`super::tap::Tap`]) or TUN
/// ([`super::tun::Tun`]).
pub trait TunTapKind: fmt::Debug + Send + Sync + 'static {
    /// `tap` or `tun` (driver kind and messages).
    const NAME: &'static str;
    /// `IFF_TAP` or `IFF_TUN`.
    const IFF: u16;
    /// What follows the virtio_net_hdr: an Ethernet frame (TAP) or a raw IP
    /// packet (TUN).
    const MEDIUM: Medium;
}

/// How to open a queue of a TAP or TUN device (also known as
/// [`super::tap::TapConfig`] and [`super::tun::TunConfig`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunTapConfig {
    /// Device name to create or attach to; `None` lets the kernel pick
    /// (`tapN`, `tunN`).
    pub name: Option<String>,
    /// `IFF_NAPI`.
    pub napi: bool,
    /// `IFF_NAPI_FRAGS` (implies `napi`; TAP only).
    pub napi_frags: bool,
    /// `IFF_MULTI_QUEUE` (opening the same name again attaches another queue).
    pub multi_queue: bool,
    /// virtio_net_hdr size: 10 (default), 12 or 24 (UDP tunnel GSO).
    pub vnet_hdr_len: usize,
    /// Open the descriptor nonblocking.
    pub nonblocking: bool,
}

impl Default for TunTapConfig {
    fn default() -> Self {
        TunTapConfig {
            name: None,
            napi: false,
            napi_frags: false,
            multi_queue: false,
            vnet_hdr_len: 10,
            nonblocking: false,
        }
    }
}

impl TunTapConfig {
    /// A default config for the named device.
    pub fn named(name: &str) -> TunTapConfig {
        TunTapConfig { name: Some(name.to_string()), ..TunTapConfig::default() }
    }

    /// The `TUNSETIFF` flags this config asks for on a device of kind `K`:
    /// `K::IFF | IFF_NO_PI | IFF_VNET_HDR` and the options.
    pub fn iff_flags<K: TunTapKind>(&self) -> u16 {
        let mut f = K::IFF | IFF_NO_PI | IFF_VNET_HDR;
        if self.napi || self.napi_frags {
            f |= IFF_NAPI;
        }
        if self.napi_frags {
            f |= IFF_NAPI_FRAGS;
        }
        if self.multi_queue {
            f |= IFF_MULTI_QUEUE;
        }
        f
    }
}

/// An open queue of a TAP or TUN device with virtio_net_hdr framing
/// ([`super::tap::TapDevice`], [`super::tun::TunDevice`]).
pub struct TunTapDevice<K: TunTapKind> {
    fd: OwnedFd,
    name: String,
    layout: HdrLayout,
    /// A datagram socket in the device's namespace, for `SIOCETHTOOL`.
    ctl: Option<OwnedFd>,
    /// The device's identity in [`HELD`] (`None`: unknown, nothing restored).
    key: Option<DeviceKey>,
    /// The device existed before this queue was opened.
    existed: bool,
    /// The `TUN_F_*` flags the last successful `TUNSETOFFLOAD` set.
    offloads: Cell<u32>,
    kind: PhantomData<fn() -> K>,
}

impl<K: TunTapKind> fmt::Debug for TunTapDevice<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TunTapDevice")
            .field("kind", &K::NAME)
            .field("name", &self.name)
            .field("layout", &self.layout)
            .field("existed", &self.existed)
            .finish()
    }
}

impl<K: TunTapKind> TunTapDevice<K> {
    /// Opens `/dev/net/tun` and creates (or attaches to) the device in the
    /// current thread's network namespace.
    ///
    /// # Errors
    /// Bad name or header size, `open` or `TUNSETIFF`/`TUNSETVNETHDRSZ` failing.
    pub fn open(cfg: &TunTapConfig) -> Result<TunTapDevice<K>> {
        let layout = HdrLayout::from_len(cfg.vnet_hdr_len)
            .ok_or_else(|| IoError::Unsupported(format!("vnet_hdr_len {} (use 10, 12 or 24)", cfg.vnet_hdr_len)))?;
        let mut ifr =
            IfReqFlags { name: [0; libc::IFNAMSIZ], flags: cfg.iff_flags::<K>() as libc::c_short, _pad: [0; 22] };
        if let Some(name) = &cfg.name {
            sys::check_ifname(name)?;
            ifr.name[..name.len()].copy_from_slice(name.as_bytes());
        }
        // A device of that name already there (persistent, or another queue) keeps what we change.
        let existed = cfg.name.as_deref().is_some_and(|n| sys::if_index(n).is_ok());
        let mut oflags = libc::O_RDWR | libc::O_CLOEXEC;
        if cfg.nonblocking {
            oflags |= libc::O_NONBLOCK;
        }
        // SAFETY: the path is a valid NUL-terminated C string literal.
        let raw = unsafe { libc::open(c"/dev/net/tun".as_ptr(), oflags) };
        if raw < 0 {
            return Err(IoError::last_os("open", "/dev/net/tun"));
        }
        // SAFETY: `raw` is a freshly opened descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let what = cfg.name.clone().unwrap_or_else(|| format!("{} (kernel-named)", K::NAME));
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq`; `ifr` has its layout and size
        // (40 bytes) and lives across the call.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut ifr as *mut IfReqFlags) } < 0 {
            return Err(IoError::last_os("ioctl(TUNSETIFF)", what));
        }
        let end = ifr.name.iter().position(|&b| b == 0).unwrap_or(libc::IFNAMSIZ);
        let name = String::from_utf8_lossy(&ifr.name[..end]).into_owned();
        // Best effort: without these the device works, only its offloads are not restored.
        let ctl = control_socket();
        let key = device_key(&name);
        let mut dev = TunTapDevice {
            fd,
            name,
            layout: HdrLayout::Basic,
            ctl,
            key,
            existed,
            offloads: Cell::new(0),
            kind: PhantomData,
        };
        dev.register();
        // Always: the size is the device's, and a persistent device keeps
        // what its previous user set (24 after UDP tunnel GSO), which would
        // misframe every packet of a queue that assumes the default.
        dev.set_vnet_hdr_len(layout.len())?;
        Ok(dev)
    }

    /// Counts this queue in [`HELD`]; the first queue of a device that
    /// existed before remembers its offloads.
    fn register(&mut self) {
        let Some(key) = self.key else { return };
        let mut held = held();
        if let Some(h) = held.iter_mut().find(|h| h.key == key) {
            h.queues += 1;
            return;
        }
        let restore = if self.existed { self.netdev_offloads().ok() } else { None };
        let restore_hdr_len = if self.existed { self.vnet_hdr_len().ok() } else { None };
        held.push(Held { key, queues: 1, restore, restore_hdr_len });
    }

    /// Makes the device persistent (`TUNSETPERSIST 1`: it stays when its
    /// last queue closes, as `ip tuntap add` leaves it) or not (`0`: it goes
    /// with its last queue).
    ///
    /// # Errors
    /// The ioctl failing.
    pub fn set_persist(&self, on: bool) -> Result<()> {
        // SAFETY: TUNSETPERSIST takes its argument by value (an int flag); `self.fd` is an
        // attached tun queue that lives across the call.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNSETPERSIST as _, libc::c_ulong::from(on)) } < 0 {
            return Err(IoError::last_os("ioctl(TUNSETPERSIST)", self.name.clone()));
        }
        Ok(())
    }

    /// Whether the device existed before this queue was opened (a persistent
    /// device, or a queue of a multi-queue device opened before).
    pub fn existed_before(&self) -> bool {
        self.existed
    }

    /// The `TUN_F_*` offloads in effect, read from the device's active
    /// netdev features (`SIOCETHTOOL` `ETHTOOL_GFEATURES`, mapped by
    /// [`OFFLOAD_FEATURES`]). Works from any thread.
    ///
    /// # Errors
    /// No control socket, or the ethtool ioctls failing.
    pub fn netdev_offloads(&self) -> Result<u32> {
        let active = self.active_features()?;
        Ok(offloads_from_features(active.iter().map(String::as_str)))
    }

    /// Records the offloads in effect now as those to restore when the last
    /// queue of this device held by this process is dropped; returns them.
    ///
    /// # Errors
    /// Reading the features fails, or the device could not be identified.
    pub fn remember_offloads(&mut self) -> Result<u32> {
        let key = self.key.ok_or_else(|| IoError::Unsupported(format!("identifying {} to restore it", self.name)))?;
        let flags = self.netdev_offloads()?;
        if let Some(h) = held().iter_mut().find(|h| h.key == key) {
            h.restore = Some(flags);
        }
        Ok(flags)
    }

    /// The `TUN_F_*` flags that will be set again when the last queue of
    /// this device goes (`None`: the offloads are left as they are).
    pub fn restore_on_drop(&self) -> Option<u32> {
        let key = self.key?;
        held().iter().find(|h| h.key == key).and_then(|h| h.restore)
    }

    /// Leaves the offloads as they are when the device is let go.
    pub fn keep_offloads_on_drop(&mut self) {
        if let Some(key) = self.key
            && let Some(h) = held().iter_mut().find(|h| h.key == key)
        {
            h.restore = None;
        }
    }

    /// The ethtool names of the device's active netdev features.
    fn active_features(&self) -> Result<Vec<String>> {
        let ctl = self
            .ctl
            .as_ref()
            .ok_or_else(|| IoError::Unsupported(format!("no control socket to query {}", self.name)))?;
        let features = super::ethtool::Features::read_on(ctl.as_fd(), &self.name)?;
        Ok(features.features.into_iter().filter(|f| f.active).map(|f| f.name).collect())
    }

    /// Creates (or attaches to) the device inside `ns`: the descriptor is opened
    /// on a thread that entered the namespace, and keeps working everywhere.
    ///
    /// # Errors
    /// As [`TunTapDevice::open`], plus `setns` failing.
    pub fn open_in(ns: &NetNs, cfg: &TunTapConfig) -> Result<TunTapDevice<K>> {
        ns.enter_scoped(|| TunTapDevice::open(cfg))?
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The virtio_net_hdr layout in use (10, 12 or 24 bytes).
    pub fn layout(&self) -> HdrLayout {
        self.layout
    }

    /// `TUNGETFEATURES`: the `IFF_*` flags this kernel supports (0x7173 on
    /// docs/kernel-oracle.md's kernel).
    ///
    /// # Errors
    /// The ioctl fails.
    pub fn features(&self) -> Result<u32> {
        let mut v: libc::c_uint = 0;
        // SAFETY: TUNGETFEATURES writes one unsigned int to the pointer, which is valid.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNGETFEATURES as _, &mut v as *mut libc::c_uint) } < 0 {
            return Err(IoError::last_os("ioctl(TUNGETFEATURES)", self.name.clone()));
        }
        Ok(v)
    }

    /// `TUNGETVNETHDRSZ`: the header size the kernel uses.
    ///
    /// # Errors
    /// The ioctl fails.
    pub fn vnet_hdr_len(&self) -> Result<usize> {
        let mut v: libc::c_int = 0;
        // SAFETY: TUNGETVNETHDRSZ writes one int to the pointer, which is valid.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNGETVNETHDRSZ as _, &mut v as *mut libc::c_int) } < 0 {
            return Err(IoError::last_os("ioctl(TUNGETVNETHDRSZ)", self.name.clone()));
        }
        Ok(v as usize)
    }

    /// `TUNSETVNETHDRSZ`: 10 (`virtio_net_hdr`), 12 (`mrg_rxbuf` / v1) or
    /// 24 (`v1_hash_tunnel`, UDP tunnel GSO).
    ///
    /// # Errors
    /// Another size, or the ioctl failing.
    pub fn set_vnet_hdr_len(&mut self, len: usize) -> Result<()> {
        let layout = HdrLayout::from_len(len)
            .ok_or_else(|| IoError::Unsupported(format!("vnet_hdr_len {len} (use 10, 12 or 24)")))?;
        let v = len as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads one int from the pointer, which is valid.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNSETVNETHDRSZ as _, &v as *const libc::c_int) } < 0 {
            return Err(IoError::last_os("ioctl(TUNSETVNETHDRSZ)", self.name.clone()));
        }
        self.layout = layout;
        Ok(())
    }

    /// `TUNSETOFFLOAD`: declares which offloads userspace can receive
    /// (`TUN_F_*`). Note that every flag except CSUM is ignored without
    /// `TUN_F_CSUM`, and USO needs both USO4 and USO6 (offload-rules 4.4).
    /// The tunnel flags need the 24-byte header for reads to work (see the
    /// module documentation); this call does not check it.
    ///
    /// # Errors
    /// [`IoError::OffloadRejected`] when the kernel answers `EINVAL` (a flag
    /// it does not know); other failures as [`IoError::Syscall`].
    pub fn set_offload(&self, flags: u32) -> Result<()> {
        // SAFETY: TUNSETOFFLOAD takes its argument by value; no memory is passed.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), TUNSETOFFLOAD as _, flags as libc::c_ulong) } < 0 {
            let err = IoError::last_os("ioctl(TUNSETOFFLOAD)", self.name.clone());
            if err.raw_os_error() == Some(libc::EINVAL) {
                return Err(IoError::OffloadRejected { flags, device: self.name.clone() });
            }
            return Err(err);
        }
        self.offloads.set(flags);
        Ok(())
    }

    /// The `TUN_F_*` flags the last successful `TUNSETOFFLOAD` of this queue
    /// set (0 before any).
    pub fn offloads(&self) -> u32 {
        self.offloads.get()
    }

    /// Whether the kernel hands this queue UDP tunnel superpackets and
    /// accepts them from it: (`TUN_F_UDP_TUNNEL_GSO`, `..._CSUM`) in effect
    /// with the 24-byte header.
    pub fn udp_tunnel(&self) -> (bool, bool) {
        let on = self.layout == HdrLayout::HashTunnel;
        let f = self.offloads.get();
        (on && f & TUN_F_UDP_TUNNEL_GSO != 0, on && f & TUN_F_UDP_TUNNEL_GSO_CSUM != 0)
    }

    /// Sets as much of `wanted` as the kernel accepts, dropping flags in this
    /// order when refused: UDP_TUNNEL_GSO_CSUM, UDP_TUNNEL_GSO, USO4/USO6,
    /// UFO, TSO_ECN, TSO4/TSO6, CSUM. Returns the flags accepted.
    ///
    /// Asking for a tunnel flag first switches the header to 24 bytes (tun
    /// fails reads with a smaller one once tunnel GSO is on); if no tunnel
    /// flag is accepted the header size goes back to what it was.
    ///
    /// # Errors
    /// A failure other than [`IoError::OffloadRejected`], or
    /// `TUNSETVNETHDRSZ` failing.
    pub fn negotiate_offload(&mut self, wanted: u32) -> Result<u32> {
        let before = self.layout;
        if wanted & TUN_F_UDP_TUNNEL != 0 && before != HdrLayout::HashTunnel {
            self.set_vnet_hdr_len(HdrLayout::HashTunnel.len())?;
        }
        let accepted = self.negotiate_flags(wanted);
        if accepted.as_ref().map_or(true, |f| f & TUN_F_UDP_TUNNEL == 0) && self.layout != before {
            self.set_vnet_hdr_len(before.len())?;
        }
        accepted
    }

    /// [`TunTapDevice::negotiate_offload`] without the header size.
    fn negotiate_flags(&self, wanted: u32) -> Result<u32> {
        const KNOWN: u32 = TUN_F_CSUM
            | TUN_F_TSO4
            | TUN_F_TSO6
            | TUN_F_TSO_ECN
            | TUN_F_UFO
            | TUN_F_USO4
            | TUN_F_USO6
            | TUN_F_UDP_TUNNEL;
        let drops = [
            TUN_F_UDP_TUNNEL_GSO_CSUM,
            TUN_F_UDP_TUNNEL_GSO,
            TUN_F_USO4 | TUN_F_USO6,
            TUN_F_UFO,
            TUN_F_TSO_ECN,
            TUN_F_TSO4 | TUN_F_TSO6,
            TUN_F_CSUM,
        ];
        let mut candidates = [0u32; 9];
        candidates[0] = wanted;
        candidates[1] = wanted & KNOWN;
        for (i, g) in drops.iter().enumerate() {
            candidates[i + 2] = candidates[i + 1] & !g;
        }
        let mut last_err = None;
        for (i, &flags) in candidates.iter().enumerate() {
            if i > 0 && flags == candidates[i - 1] {
                continue;
            }
            match self.set_offload(flags) {
                Ok(()) => return Ok(flags),
                Err(e @ IoError::OffloadRejected { .. }) => last_err = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_err.unwrap_or(IoError::OffloadRejected { flags: 0, device: self.name.clone() }))
    }

    /// Reads one packet: the virtio_net_hdr and the frame (TAP) or raw IP
    /// packet (TUN) into `buf`. Returns the decoded header and the length. Use a buffer of
    /// 65550 bytes or more for GSO packets.
    ///
    /// # Errors
    /// `readv` failing (`EAGAIN` when nonblocking and empty: see
    /// [`IoError::is_would_block`]), [`IoError::Truncated`] when the frame did
    /// not fit (the packet is consumed; `len` is then only a lower bound,
    /// `buf.len() + 1`, since tun reports the bytes it copied), or an
    /// undecodable header.
    pub fn read_packet(&mut self, buf: &mut [u8]) -> Result<(VirtioNetHdr, usize)> {
        let hlen = self.layout.len();
        let mut hdr = [0u8; 24];
        // A one-byte sentinel after `buf`: tun reports only the bytes it copied, so a frame
        // reaching the sentinel is known to be longer than `buf`.
        let mut sentinel = [0u8; 1];
        let iov = [sys::iovec_rw(&mut hdr[..hlen]), sys::iovec_rw(buf), sys::iovec_rw(&mut sentinel)];
        let fd = self.fd.as_raw_fd();
        // SAFETY: all three iovecs point to live, writable buffers of the stated lengths.
        let n = sys::retry_interrupted("readv", &self.name, || unsafe { libc::readv(fd, iov.as_ptr(), 3) })? as usize;
        if n < hlen {
            return Err(IoError::Truncated { len: n, capacity: hlen });
        }
        if n - hlen > buf.len() {
            return Err(IoError::Truncated { len: n - hlen, capacity: buf.len() });
        }
        let h = VirtioNetHdr::parse(&hdr[..hlen], self.layout, HdrByteOrder::Native)?;
        Ok((h, n - hlen))
    }

    /// Writes one packet: `hdr` then `frame`, with one `writev`. Returns the
    /// frame bytes written.
    ///
    /// # Errors
    /// `writev` failing (`EINVAL` for a header the kernel refuses), or a
    /// short write.
    pub fn write_packet(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<usize> {
        self.write_packet_vectored(hdr, &[frame])
    }

    /// Writes one packet whose frame is the concatenation of `parts`
    /// (scatter-gather; no copy). At most 1023 parts.
    ///
    /// # Errors
    /// As [`TunTapDevice::write_packet`]; too many parts.
    pub fn write_packet_vectored(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize> {
        let hlen = self.layout.len();
        let mut hbytes = [0u8; 24];
        hdr.emit(&mut hbytes[..hlen], self.layout, HdrByteOrder::Native)?;
        let expected = hlen + parts.iter().map(|p| p.len()).sum::<usize>();
        let n = sys::with_iovecs(&hbytes[..hlen], parts, |iov| {
            // SAFETY: every iovec points to a live slice of the stated length; the kernel only reads.
            unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int) }
        })?;
        if n < 0 {
            return Err(IoError::last_os("writev", self.name.clone()));
        }
        if n as usize != expected {
            return Err(IoError::ShortWrite { call: "writev", written: n as usize, expected });
        }
        Ok(expected - hlen)
    }

    /// Switches `O_NONBLOCK`.
    ///
    /// # Errors
    /// `fcntl` failing.
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        sys::set_nonblocking(self.fd.as_fd(), on, &self.name)
    }

    /// Waits up to `timeout` for a packet to read; `Ok(true)` if one is there.
    ///
    /// # Errors
    /// `poll` failing.
    pub fn poll_readable(&self, timeout: Duration) -> Result<bool> {
        sys::poll_readable(self.fd.as_fd(), timeout, &self.name)
    }
}

impl<K: TunTapKind> AsFd for TunTapDevice<K> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl<K: TunTapKind> Drop for TunTapDevice<K> {
    /// The last queue of a device this process holds sets the remembered
    /// header size and offloads again (best effort: errors are ignored).
    fn drop(&mut self) {
        let Some(key) = self.key else { return };
        let restore = {
            let mut held = held();
            let Some(i) = held.iter().position(|h| h.key == key) else { return };
            held[i].queues -= 1;
            if held[i].queues > 0 {
                return;
            }
            let h = held.swap_remove(i);
            (h.restore, h.restore_hdr_len)
        };
        // The size first: tunnel flags read with a 24-byte header only.
        if let Some(len) = restore.1 {
            let _ = self.set_vnet_hdr_len(len);
        }
        if let Some(flags) = restore.0 {
            let _ = self.set_offload(flags);
        }
    }
}

/// A datagram socket in the current thread's namespace (for ethtool ioctls).
fn control_socket() -> Option<OwnedFd> {
    // SAFETY: socket() has no memory arguments.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The identity of device `name` in the current thread's namespace.
fn device_key(name: &str) -> Option<DeviceKey> {
    let ns = std::fs::metadata("/proc/thread-self/ns/net").ok()?.ino();
    Some((ns, sys::if_index(name).ok()?))
}
