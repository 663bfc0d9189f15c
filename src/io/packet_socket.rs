//! AF_PACKET raw sockets with `PACKET_VNET_HDR` (offload-rules 4.5,
//! this-machine.md section 6).
//!
//! A [`PacketSocket`] is bound to one interface (by index, looked up in the
//! namespace it is opened in) and sees whole skbs: GRO aggregates and GSO
//! packets arrive as one frame with their virtio_net_hdr (host byte order),
//! and a GSO superpacket can be sent with one `sendmsg` (header + frame
//! parts as iovecs, never concatenated).
//!
//! `PACKET_VNET_HDR` is set right after `socket()`, before any ring could
//! exist. Receive-direction filtering uses `PACKET_IGNORE_OUTGOING` when the
//! kernel has it and otherwise skips `PACKET_OUTGOING` by the `sll_pkttype`
//! of each packet. With [`PacketSocketConfig::auxdata`] the VLAN tag the
//! kernel moved into metadata is reported ([`RecvInfo::vlan`]).
//!
//! Batched rings (`PACKET_RX_RING`/`TX_RING`, TPACKET_V2: V3 refuses
//! `PACKET_VNET_HDR` on TX) and `recvmmsg` come with the live data path;
//! they will be added as new methods next to these.

use super::error::{IoError, Result};
use super::netns::NetNs;
use super::sys;
use super::tap::with_iovecs;
use crate::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

const SOL_PACKET: libc::c_int = 263;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const ETH_P_ALL: u16 = 0x0003;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// `struct tpacket_auxdata` (linux/if_packet.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// `sll_pkttype` of a received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PktType {
    /// `PACKET_HOST`: addressed to this host's MAC.
    Host,
    /// `PACKET_BROADCAST`.
    Broadcast,
    /// `PACKET_MULTICAST`.
    Multicast,
    /// `PACKET_OTHERHOST`: another host's MAC (seen because of promiscuity or a TAP).
    OtherHost,
    /// `PACKET_OUTGOING`: sent by this host.
    Outgoing,
    /// Any other value (loopback, user, kernel).
    Other(u8),
}

impl PktType {
    /// From the raw `sll_pkttype`.
    pub fn from_raw(v: u8) -> PktType {
        match v {
            0 => PktType::Host,
            1 => PktType::Broadcast,
            2 => PktType::Multicast,
            3 => PktType::OtherHost,
            4 => PktType::Outgoing,
            v => PktType::Other(v),
        }
    }
}

/// A VLAN tag the kernel stripped into skb metadata (from `PACKET_AUXDATA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanInfo {
    /// Tag control information (PCP, DEI, VID).
    pub tci: u16,
    /// TPID (0x8100 or 0x88A8); 0 if the kernel did not report it.
    pub tpid: u16,
}

/// One received packet's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvInfo {
    /// The virtio_net_hdr the kernel prepended.
    pub hdr: VirtioNetHdr,
    /// Frame length (bytes written to the buffer).
    pub len: usize,
    /// Packet type (direction / addressing).
    pub pkttype: PktType,
    /// Stripped VLAN tag, with [`PacketSocketConfig::auxdata`].
    pub vlan: Option<VlanInfo>,
}

/// Options for [`PacketSocket::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketSocketConfig {
    /// Receive incoming packets only (skip `PACKET_OUTGOING`).
    pub incoming_only: bool,
    /// `PACKET_QDISC_BYPASS` on sends.
    pub qdisc_bypass: bool,
    /// `SO_RCVTIMEO`; `None` blocks forever.
    pub recv_timeout: Option<Duration>,
    /// `PACKET_AUXDATA`: report stripped VLAN tags.
    pub auxdata: bool,
    /// `SO_RCVBUFFORCE` (falls back to `SO_RCVBUF`) in bytes.
    pub rcvbuf: Option<usize>,
    /// Open nonblocking.
    pub nonblocking: bool,
}

impl Default for PacketSocketConfig {
    fn default() -> Self {
        PacketSocketConfig {
            incoming_only: true,
            qdisc_bypass: false,
            recv_timeout: None,
            auxdata: true,
            rcvbuf: None,
            nonblocking: false,
        }
    }
}

/// An AF_PACKET `SOCK_RAW` socket with virtio_net_hdr framing, bound to one
/// interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    /// Skip outgoing packets in userspace (the kernel lacks `PACKET_IGNORE_OUTGOING`).
    filter_outgoing: bool,
}

fn setsockopt_int(fd: BorrowedFd<'_>, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    // SAFETY: passes a pointer to a live c_int with its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

fn sockaddr_ll(ifindex: u32, protocol: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as libc::c_ushort;
    sa.sll_protocol = protocol.to_be();
    sa.sll_ifindex = ifindex as libc::c_int;
    sa
}

impl PacketSocket {
    /// Opens a socket bound to `ifname` in the current thread's namespace.
    ///
    /// # Errors
    /// Bad name, unknown interface, `socket`/`setsockopt`/`bind` failing.
    pub fn open(ifname: &str, cfg: &PacketSocketConfig) -> Result<PacketSocket> {
        let ifindex = sys::if_index(ifname)?;
        let mut ty = libc::SOCK_RAW | libc::SOCK_CLOEXEC;
        if cfg.nonblocking {
            ty |= libc::SOCK_NONBLOCK;
        }
        // Protocol 0: nothing is received until bind() names the interface.
        // SAFETY: plain socket(2) call.
        let raw = unsafe { libc::socket(libc::AF_PACKET, ty, 0) };
        if raw < 0 {
            return Err(IoError::last_os("socket(AF_PACKET, SOCK_RAW)", ifname));
        }
        // SAFETY: `raw` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let opt_err = |call: &'static str| {
            move |source: std::io::Error| IoError::Syscall { call, what: ifname.to_string(), source }
        };
        setsockopt_int(fd.as_fd(), SOL_PACKET, PACKET_VNET_HDR, 1).map_err(opt_err("setsockopt(PACKET_VNET_HDR)"))?;
        let mut filter_outgoing = false;
        if cfg.incoming_only {
            match setsockopt_int(fd.as_fd(), SOL_PACKET, PACKET_IGNORE_OUTGOING, 1) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => filter_outgoing = true,
                Err(e) => return Err(opt_err("setsockopt(PACKET_IGNORE_OUTGOING)")(e)),
            }
        }
        if cfg.qdisc_bypass {
            setsockopt_int(fd.as_fd(), SOL_PACKET, PACKET_QDISC_BYPASS, 1)
                .map_err(opt_err("setsockopt(PACKET_QDISC_BYPASS)"))?;
        }
        if cfg.auxdata {
            setsockopt_int(fd.as_fd(), SOL_PACKET, PACKET_AUXDATA, 1).map_err(opt_err("setsockopt(PACKET_AUXDATA)"))?;
        }
        if let Some(bytes) = cfg.rcvbuf {
            let v = bytes.min(i32::MAX as usize / 2) as libc::c_int;
            if setsockopt_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
                setsockopt_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, v)
                    .map_err(opt_err("setsockopt(SO_RCVBUF)"))?;
            }
        }
        let sock = PacketSocket { fd, ifname: ifname.to_string(), ifindex, filter_outgoing };
        sock.set_recv_timeout(cfg.recv_timeout)?;
        let sa = sockaddr_ll(ifindex, ETH_P_ALL);
        // SAFETY: `sa` is a valid sockaddr_ll and the length is its exact size.
        let rc = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("bind(AF_PACKET)", ifname));
        }
        Ok(sock)
    }

    /// Opens a socket bound to `ifname` inside `ns` (created on a thread that
    /// entered the namespace; usable from anywhere afterwards).
    ///
    /// # Errors
    /// As [`PacketSocket::open`], plus `setns` failing.
    pub fn open_in(ns: &NetNs, ifname: &str, cfg: &PacketSocketConfig) -> Result<PacketSocket> {
        ns.enter_scoped(|| PacketSocket::open(ifname, cfg))?
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface index (in the socket's namespace).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// `SO_RCVTIMEO`: how long a blocking receive waits (`None`: forever).
    /// A timeout shows as an error with [`IoError::is_would_block`].
    ///
    /// # Errors
    /// `setsockopt` failing.
    pub fn set_recv_timeout(&self, timeout: Option<Duration>) -> Result<()> {
        let d = timeout.unwrap_or(Duration::ZERO);
        let mut tv =
            libc::timeval { tv_sec: d.as_secs() as libc::time_t, tv_usec: d.subsec_micros() as libc::suseconds_t };
        if timeout.is_some() && d.as_micros() == 0 {
            tv.tv_usec = 1; // zero would mean "forever"
        }
        // SAFETY: passes a pointer to a live timeval with its exact size.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("setsockopt(SO_RCVTIMEO)", self.ifname.clone()));
        }
        Ok(())
    }

    /// Switches `O_NONBLOCK`.
    ///
    /// # Errors
    /// `fcntl` failing.
    pub fn set_nonblocking(&self, on: bool) -> Result<()> {
        sys::set_nonblocking(self.fd.as_fd(), on, &self.ifname)
    }

    /// Waits up to `timeout` for a packet; `Ok(true)` if one is queued.
    ///
    /// # Errors
    /// `poll` failing.
    pub fn poll_readable(&self, timeout: Duration) -> Result<bool> {
        sys::poll_readable(self.fd.as_fd(), timeout, &self.ifname)
    }

    /// Receives one packet into `buf`: (header, frame length, packet type).
    ///
    /// # Errors
    /// See [`PacketSocket::recv_info`].
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<(VirtioNetHdr, usize, PktType)> {
        let info = self.recv_info(buf)?;
        Ok((info.hdr, info.len, info.pkttype))
    }

    /// Receives one packet into `buf`, with its VLAN tag if the kernel
    /// stripped one (and [`PacketSocketConfig::auxdata`] is on).
    ///
    /// # Errors
    /// `recvmsg` failing (a timeout or empty nonblocking socket satisfies
    /// [`IoError::is_would_block`]); [`IoError::Truncated`] when the frame
    /// was larger than `buf` (it is consumed); an undecodable header.
    pub fn recv_info(&mut self, buf: &mut [u8]) -> Result<RecvInfo> {
        self.recv_flags(buf, 0)
    }

    /// As [`PacketSocket::recv_info`] without waiting (`MSG_DONTWAIT`):
    /// `Ok(None)` when nothing is queued.
    ///
    /// # Errors
    /// As [`PacketSocket::recv_info`], except "would block".
    pub fn try_recv_info(&mut self, buf: &mut [u8]) -> Result<Option<RecvInfo>> {
        match self.recv_flags(buf, libc::MSG_DONTWAIT) {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.is_would_block() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Discards every queued packet without waiting; returns how many.
    ///
    /// # Errors
    /// `recvmsg` failing with anything but "would block".
    pub fn drain(&mut self) -> Result<usize> {
        let mut scratch = vec![0u8; 65536];
        let mut n = 0;
        loop {
            match self.recv_flags(&mut scratch, libc::MSG_DONTWAIT) {
                Ok(_) | Err(IoError::Truncated { .. }) => n += 1,
                Err(e) if e.is_would_block() => return Ok(n),
                Err(e) => return Err(e),
            }
        }
    }

    fn recv_flags(&mut self, buf: &mut [u8], flags: libc::c_int) -> Result<RecvInfo> {
        const HLEN: usize = 10;
        loop {
            let mut hdr = [0u8; HLEN];
            let mut iov = [sys::iovec_rw(&mut hdr), sys::iovec_rw(buf)];
            // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
            let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut control = [0u64; 16];
            // SAFETY: msghdr is plain old data; all-zero is valid before the fields are set.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = &mut sa as *mut libc::sockaddr_ll as *mut libc::c_void;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = 2;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: `msg` points to live buffers (name, two iovecs, control) of the stated sizes.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, flags | libc::MSG_TRUNC) };
            if n < 0 {
                return Err(IoError::last_os("recvmsg", self.ifname.clone()));
            }
            let pkttype = PktType::from_raw(sa.sll_pkttype);
            if self.filter_outgoing && pkttype == PktType::Outgoing {
                continue;
            }
            let n = n as usize;
            if n < HLEN {
                return Err(IoError::Truncated { len: n, capacity: HLEN });
            }
            let len = n - HLEN;
            if len > buf.len() {
                return Err(IoError::Truncated { len, capacity: buf.len() });
            }
            let vlan = parse_auxdata(&msg);
            let hdr = VirtioNetHdr::parse(&hdr, HdrLayout::Basic, HdrByteOrder::Native)?;
            return Ok(RecvInfo { hdr, len, pkttype, vlan });
        }
    }

    /// Sends one packet: `hdr` then the frame made of `parts` (scatter-gather,
    /// one `sendmsg`). For a GSO header the kernel segments or passes the
    /// superpacket on according to the device's features. Returns the frame
    /// bytes sent.
    ///
    /// # Errors
    /// `sendmsg` failing (`EINVAL` for a header the kernel refuses,
    /// `EMSGSIZE` for a non-GSO frame over the MTU), or a short send.
    pub fn send(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize> {
        const HLEN: usize = 10;
        let mut hbytes = [0u8; HLEN];
        hdr.emit(&mut hbytes, HdrLayout::Basic, HdrByteOrder::Native)?;
        let ethertype = u16::from_be_bytes([byte_at(parts, 12).unwrap_or(0), byte_at(parts, 13).unwrap_or(3)]);
        let mut sa = sockaddr_ll(self.ifindex, ethertype);
        let expected = HLEN + parts.iter().map(|p| p.len()).sum::<usize>();
        let fd = self.fd.as_raw_fd();
        let n = with_iovecs(&hbytes, parts, |iov| {
            // SAFETY: msghdr is plain old data; all-zero is valid before the fields are set.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = &mut sa as *mut libc::sockaddr_ll as *mut libc::c_void;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = iov.len() as _;
            // SAFETY: `msg` points to a live address and iovecs of live slices; the kernel only reads them.
            unsafe { libc::sendmsg(fd, &msg, 0) }
        })?;
        if n < 0 {
            return Err(IoError::last_os("sendmsg", self.ifname.clone()));
        }
        if n as usize != expected {
            return Err(IoError::ShortWrite { call: "sendmsg", written: n as usize, expected });
        }
        Ok(expected - HLEN)
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The byte at `offset` of the concatenation of `parts`.
fn byte_at(parts: &[&[u8]], mut offset: usize) -> Option<u8> {
    for p in parts {
        if offset < p.len() {
            return Some(p[offset]);
        }
        offset -= p.len();
    }
    None
}

/// The VLAN tag from a `PACKET_AUXDATA` control message, if any.
fn parse_auxdata(msg: &libc::msghdr) -> Option<VlanInfo> {
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay within msg_control/msg_controllen.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: `cmsg` is non-null and points inside the control buffer (see above).
        let c = unsafe { &*cmsg };
        if c.cmsg_level == SOL_PACKET && c.cmsg_type == PACKET_AUXDATA {
            // SAFETY: the kernel wrote a full tpacket_auxdata as the payload of this message;
            // read_unaligned copes with any alignment.
            let aux: TpacketAuxdata =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const TpacketAuxdata) };
            if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
                let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 { aux.tp_vlan_tpid } else { 0 };
                return Some(VlanInfo { tci: aux.tp_vlan_tci, tpid });
            }
            return None;
        }
        // SAFETY: as above; returns null past the end.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}
