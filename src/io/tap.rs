//! TAP devices with `IFF_VNET_HDR` (offload-rules 4.4, this-machine.md
//! section 1 and 4).
//!
//! [`TapDevice`] opens `/dev/net/tun` with `IFF_TAP | IFF_NO_PI |
//! IFF_VNET_HDR` (plus optional `IFF_NAPI`, `IFF_NAPI_FRAGS`,
//! `IFF_MULTI_QUEUE`), in the current namespace or inside a [`NetNs`]
//! ([`TapDevice::open_in`]; the descriptor keeps working from any thread).
//! Every read and write carries a virtio_net_hdr of `vnet_hdr_sz` bytes (10 or
//! 12 here, host byte order), moved with `readv`/`writev` so that the frame is
//! never concatenated with its header.
//!
//! The device is not persistent: it disappears when its last descriptor is
//! closed (and with its namespace).

use super::error::{IoError, Result};
use super::netns::NetNs;
use super::sys;
use crate::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

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
const TUNGETFEATURES: libc::c_ulong = 0x8004_54cf;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNGETVNETHDRSZ: libc::c_ulong = 0x8004_54d7;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;

/// `struct ifreq` as used by `TUNSETIFF`: name plus a short of flags, padded
/// to the 40 bytes of the kernel's union.
#[repr(C)]
struct IfReqFlags {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// How to open a TAP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// Device name to create or attach to; `None` lets the kernel pick `tapN`.
    pub name: Option<String>,
    /// `IFF_NAPI`.
    pub napi: bool,
    /// `IFF_NAPI_FRAGS` (implies `napi`).
    pub napi_frags: bool,
    /// `IFF_MULTI_QUEUE` (opening the same name again attaches another queue).
    pub multi_queue: bool,
    /// virtio_net_hdr size: 10 (default) or 12.
    pub vnet_hdr_len: usize,
    /// Open the descriptor nonblocking.
    pub nonblocking: bool,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig {
            name: None,
            napi: false,
            napi_frags: false,
            multi_queue: false,
            vnet_hdr_len: 10,
            nonblocking: false,
        }
    }
}

impl TapConfig {
    /// A default config for the named device.
    pub fn named(name: &str) -> TapConfig {
        TapConfig { name: Some(name.to_string()), ..TapConfig::default() }
    }

    /// The `TUNSETIFF` flags this config asks for.
    pub fn iff_flags(&self) -> u16 {
        let mut f = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
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

/// An open TAP queue with virtio_net_hdr framing.
#[derive(Debug)]
pub struct TapDevice {
    fd: OwnedFd,
    name: String,
    layout: HdrLayout,
}

impl TapDevice {
    /// Opens `/dev/net/tun` and creates (or attaches to) the TAP in the
    /// current thread's network namespace.
    ///
    /// # Errors
    /// Bad name or header size, `open` or `TUNSETIFF`/`TUNSETVNETHDRSZ` failing.
    pub fn open(cfg: &TapConfig) -> Result<TapDevice> {
        let layout = HdrLayout::from_len(cfg.vnet_hdr_len)
            .ok_or_else(|| IoError::Unsupported(format!("vnet_hdr_len {} (use 10 or 12)", cfg.vnet_hdr_len)))?;
        let mut ifr = IfReqFlags { name: [0; libc::IFNAMSIZ], flags: cfg.iff_flags() as libc::c_short, _pad: [0; 22] };
        if let Some(name) = &cfg.name {
            sys::check_ifname(name)?;
            ifr.name[..name.len()].copy_from_slice(name.as_bytes());
        }
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
        let what = cfg.name.clone().unwrap_or_else(|| "tap (kernel-named)".into());
        // SAFETY: TUNSETIFF reads and writes a `struct ifreq`; `ifr` has its layout and size
        // (40 bytes) and lives across the call.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut ifr as *mut IfReqFlags) } < 0 {
            return Err(IoError::last_os("ioctl(TUNSETIFF)", what));
        }
        let end = ifr.name.iter().position(|&b| b == 0).unwrap_or(libc::IFNAMSIZ);
        let name = String::from_utf8_lossy(&ifr.name[..end]).into_owned();
        let mut tap = TapDevice { fd, name, layout: HdrLayout::Basic };
        if layout != HdrLayout::Basic {
            tap.set_vnet_hdr_len(layout.len())?;
        }
        Ok(tap)
    }

    /// Creates (or attaches to) the TAP inside `ns`: the descriptor is opened
    /// on a thread that entered the namespace, and keeps working everywhere.
    ///
    /// # Errors
    /// As [`TapDevice::open`], plus `setns` failing.
    pub fn open_in(ns: &NetNs, cfg: &TapConfig) -> Result<TapDevice> {
        ns.enter_scoped(|| TapDevice::open(cfg))?
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The virtio_net_hdr layout in use (10 or 12 bytes).
    pub fn layout(&self) -> HdrLayout {
        self.layout
    }

    /// `TUNGETFEATURES`: the `IFF_*` flags this kernel supports (0x7173 on
    /// this-machine.md's kernel).
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

    /// `TUNSETVNETHDRSZ`: 10 (`virtio_net_hdr`) or 12 (`mrg_rxbuf` / v1).
    ///
    /// # Errors
    /// Another size, or the ioctl failing.
    pub fn set_vnet_hdr_len(&mut self, len: usize) -> Result<()> {
        let layout = HdrLayout::from_len(len)
            .ok_or_else(|| IoError::Unsupported(format!("vnet_hdr_len {len} (use 10 or 12)")))?;
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
        Ok(())
    }

    /// Sets as much of `wanted` as the kernel accepts, dropping flags in this
    /// order when refused: USO4/USO6, UFO, TSO_ECN, TSO4/TSO6, CSUM. Returns
    /// the flags accepted.
    ///
    /// # Errors
    /// A failure other than [`IoError::OffloadRejected`].
    pub fn negotiate_offload(&self, wanted: u32) -> Result<u32> {
        const KNOWN: u32 = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_UFO | TUN_F_USO4 | TUN_F_USO6;
        let drops = [TUN_F_USO4 | TUN_F_USO6, TUN_F_UFO, TUN_F_TSO_ECN, TUN_F_TSO4 | TUN_F_TSO6, TUN_F_CSUM];
        let mut candidates = [0u32; 7];
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

    /// Reads one packet: the virtio_net_hdr and the frame (into `buf`).
    /// Returns the decoded header and the frame length. Use a buffer of
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
        let mut hdr = [0u8; 12];
        // A one-byte sentinel after `buf`: tun reports only the bytes it copied, so a frame
        // reaching the sentinel is known to be longer than `buf`.
        let mut sentinel = [0u8; 1];
        let iov = [sys::iovec_rw(&mut hdr[..hlen]), sys::iovec_rw(buf), sys::iovec_rw(&mut sentinel)];
        // SAFETY: all three iovecs point to live, writable buffers of the stated lengths.
        let n = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 3) };
        if n < 0 {
            return Err(IoError::last_os("readv", self.name.clone()));
        }
        let n = n as usize;
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
    /// As [`TapDevice::write_packet`]; too many parts.
    pub fn write_packet_vectored(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize> {
        let hlen = self.layout.len();
        let mut hbytes = [0u8; 12];
        hdr.emit(&mut hbytes[..hlen], self.layout, HdrByteOrder::Native)?;
        let expected = hlen + parts.iter().map(|p| p.len()).sum::<usize>();
        let n = with_iovecs(&hbytes[..hlen], parts, |iov| {
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

impl AsFd for TapDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Most frame parts `with_iovecs` lays out on the stack (more are placed
/// in a heap vector): enough for a frag-list GRO aggregate of 64 KiB.
pub const STACK_PARTS: usize = 127;

/// Builds `[header, parts...]` as iovecs (on the stack for up to
/// [`STACK_PARTS`] parts) and calls `f`.
pub(crate) fn with_iovecs(header: &[u8], parts: &[&[u8]], f: impl FnOnce(&[libc::iovec]) -> isize) -> Result<isize> {
    const STACK: usize = STACK_PARTS + 1;
    if parts.len() + 1 > 1024 {
        return Err(IoError::Unsupported(format!("{} frame parts (at most 1023)", parts.len())));
    }
    if parts.len() < STACK {
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; STACK];
        iov[0] = sys::iovec_ro(header);
        for (slot, p) in iov[1..].iter_mut().zip(parts) {
            *slot = sys::iovec_ro(p);
        }
        Ok(f(&iov[..parts.len() + 1]))
    } else {
        let mut iov = Vec::with_capacity(parts.len() + 1);
        iov.push(sys::iovec_ro(header));
        iov.extend(parts.iter().map(|p| sys::iovec_ro(p)));
        Ok(f(&iov))
    }
}
