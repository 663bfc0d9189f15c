//! AF_PACKET raw sockets with `PACKET_VNET_HDR` (offload-rules 4.5,
//! docs/kernel-oracle.md section 6).
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
//! # Batched I/O
//!
//! [`PacketSocket::recv_batch`] receives up to [`RecvBatch::capacity`]
//! frames with one `recvmmsg` into the batch's preallocated slots;
//! [`PacketSocket::send_batch`] sends the frames of a [`FrameSource`] with
//! `sendmmsg`, each frame's header and parts as iovecs pointing at the
//! caller's memory (no copy). Both reuse their arrays, so a steady stream
//! makes no heap allocation. TPACKET_V2 rings are in
//! [`super::packet_ring`], with the measurement that chose `mmsg` for the
//! live data path.
//!
//! # Fanout
//!
//! With [`PacketSocketConfig::fanout_group`] the socket joins a
//! `PACKET_FANOUT` group of mode `PACKET_FANOUT_HASH` after `bind`: the
//! kernel spreads the interface's received packets over the group's sockets
//! by the symmetric flow hash (`__skb_get_hash_symmetric`: both directions of
//! a flow, and every fragment of a datagram, which hashes on addresses only,
//! go to the same socket). Groups are per network namespace. Outgoing
//! packets are kept out with `PACKET_FANOUT_FLAG_IGNORE_OUTGOING` (a member's
//! own `PACKET_IGNORE_OUTGOING` does not apply to the group's hook); a kernel
//! without that flag falls back to filtering by `sll_pkttype`.
//!
//! # Tagged superpackets (measured on this machine, kernel 6.18)
//!
//! `packet_snd` sets `skb->protocol` from `sll_protocol`, which
//! [`PacketSocket::send`] takes from the frame's EtherType (0x88a8 for a
//! QinQ frame). A TCP GSO frame with two tags (802.1ad + 802.1Q) sent so on
//! a veth with its default offloads (or on a TAP with TSO) reaches the peer
//! as **one** GSO skb (gso_type TCPV4, the outer tag in skb metadata, the
//! inner one in the bytes): the multi-tag rule of `vlan_features_check`
//! did not make the kernel segment it (qdisc bypass or not, IPv4 and IPv6).
//! With `tso off` on the sending veth the kernel does segment it, into
//! 1518-byte frames (1522 with the outer tag) that a peer at MTU 1500 then
//! drops (`is_skb_forwardable` allows MTU + 18). Sending the same frame with
//! `sll_protocol` = IPv4 ([`PacketSocket::send_as`]) is refused with
//! `ENOMEM`: the kernel validates every virtio GSO skb (`SKB_GSO_DODGY`) by
//! parsing its headers from `skb->protocol` at the network header, which
//! `packet_snd` places right after the Ethernet header, on the first tag.
//! So frames go out with their own EtherType (`tests/af_packet_batch.rs`,
//! `qinq_superpacket_crosses_veth_whole`).

use super::error::{IoError, Result};
pub use super::frame::{FrameSource, VlanInfo};
use super::netns::NetNs;
use super::packet_ring::{RingConfig, RingMap, RxLend};
use super::sys::{self, with_iovecs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};

const SOL_PACKET: libc::c_int = 263;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_VNET_HDR: libc::c_int = 15;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_FANOUT: libc::c_int = 18;
const PACKET_FANOUT_HASH: u32 = 0;
const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;
const ETH_P_ALL: u16 = 0x0003;
/// Size of the virtio_net_hdr on AF_PACKET sockets (`PACKET_VNET_HDR`).
const HLEN: usize = 10;
/// Most iovecs per message (`UIO_MAXIOV`).
const MAX_IOV: usize = 1024;
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
    /// Join this `PACKET_FANOUT` group (mode `PACKET_FANOUT_HASH`) after
    /// binding; every socket of the group must use the same options.
    pub fanout_group: Option<u16>,
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
            fanout_group: None,
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
    fanout_group: Option<u16>,
    /// Arrays of [`PacketSocket::send_batch`], kept between calls.
    tx: TxScratch,
    /// TPACKET_V2 RX ring ([`PacketSocket::enable_rx_ring`]).
    rx_ring: Option<RingMap>,
    /// Slots of [`PacketSocket::recv_many`] without a ring.
    rx_slots: Option<RecvBatch>,
}

/// What [`PacketSocket::recv_many`] hands each received packet to.
///
/// A frame read from an RX ring comes with an [`RxLend`] (`None` otherwise):
/// the handler may keep the frame without copying it.
pub type RecvHandler<'f> = dyn FnMut(Result<(RecvInfo, &[u8])>, Option<&mut RxLend<'_>>) + 'f;

/// Bytes per slot of [`PacketSocket::recv_many`] without a ring: more than
/// a 64 KiB GSO packet with its headers.
pub const RECV_SLOT: usize = 128 * 1024;

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
        let mut sock = PacketSocket {
            fd,
            ifname: ifname.to_string(),
            ifindex,
            filter_outgoing,
            fanout_group: cfg.fanout_group,
            tx: TxScratch::default(),
            rx_ring: None,
            rx_slots: None,
        };
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
        if let Some(group) = cfg.fanout_group {
            sock.join_fanout(group, cfg.incoming_only)?;
        }
        Ok(sock)
    }

    /// Joins `PACKET_FANOUT` group `group` in hash mode (the socket is bound).
    fn join_fanout(&mut self, group: u16, incoming_only: bool) -> Result<()> {
        let arg = |flags: u32| (u32::from(group) | ((PACKET_FANOUT_HASH | flags) << 16)) as libc::c_int;
        let err = |source| IoError::Syscall { call: "setsockopt(PACKET_FANOUT)", what: self.ifname.clone(), source };
        if !incoming_only {
            return setsockopt_int(self.fd.as_fd(), SOL_PACKET, PACKET_FANOUT, arg(0)).map_err(err);
        }
        match setsockopt_int(self.fd.as_fd(), SOL_PACKET, PACKET_FANOUT, arg(PACKET_FANOUT_FLAG_IGNORE_OUTGOING)) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                // A kernel without PACKET_FANOUT_FLAG_IGNORE_OUTGOING (before 6.9):
                // the group's hook sees outgoing packets, skipped by pkttype.
                setsockopt_int(self.fd.as_fd(), SOL_PACKET, PACKET_FANOUT, arg(0)).map_err(err)?;
                self.filter_outgoing = true;
                Ok(())
            }
            Err(e) => Err(err(e)),
        }
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

    /// The `PACKET_FANOUT` group joined, if any.
    pub fn fanout_group(&self) -> Option<u16> {
        self.fanout_group
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
            let fd = self.fd.as_raw_fd();
            // A signal during a blocking receive (one failed a CI run) is not
            // an error: `retry_interrupted` receives again.
            // SAFETY: `msg` points to live buffers (name, two iovecs, control) of the stated sizes.
            let n = sys::retry_interrupted("recvmsg", &self.ifname, || unsafe {
                libc::recvmsg(fd, &mut msg, flags | libc::MSG_TRUNC)
            })?;
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
    ///
    /// `sll_protocol` (hence `skb->protocol`) is the frame's EtherType
    /// ([`frame_protocol`]; tagged frames included, see the module
    /// documentation).
    pub fn send(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<usize> {
        let mut prefix = Prefix::default();
        for p in parts {
            if prefix.full() {
                break;
            }
            prefix.push(p);
        }
        self.send_as(hdr, parts, frame_protocol(prefix.bytes()))
    }

    /// [`PacketSocket::send`] with `sll_protocol` = `protocol` (host order),
    /// whatever the frame says: `skb->protocol` of the packet sent (for
    /// experiments with the kernel; see the module documentation).
    ///
    /// # Errors
    /// As [`PacketSocket::send`].
    pub fn send_as(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]], protocol: u16) -> Result<usize> {
        let mut hbytes = [0u8; HLEN];
        hdr.emit(&mut hbytes, HdrLayout::Basic, HdrByteOrder::Native)?;
        let mut sa = sockaddr_ll(self.ifindex, protocol);
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

    /// Sends every frame of `frames` with `sendmmsg` (as many calls as
    /// needed), each as [`PacketSocket::send`] would: its header, then its
    /// parts as iovecs pointing at the caller's memory (no copy), with the
    /// same `sll_protocol` choice. `report(i, result)` is called once per
    /// frame `i`, in order, with the frame bytes sent or the error: a frame
    /// the kernel refuses is reported and skipped, the next call starts with
    /// the frame after it; when the error says the interface is gone
    /// (`ENXIO`, `ENODEV`, `ENETDOWN`) the remaining frames get the same
    /// error without further calls. Returns the `sendmmsg` calls that sent
    /// at least one frame.
    ///
    /// The iovec, header and address arrays are kept in the socket and
    /// reused: no heap allocation once they have grown to the batch size.
    pub fn send_batch<'a, F: FrameSource<'a> + ?Sized>(
        &mut self,
        frames: &F,
        mut report: impl FnMut(usize, Result<usize>),
    ) -> usize {
        let s = &mut self.tx;
        s.clear();
        for i in 0..frames.len() {
            let hdr = frames.header(i);
            let mut hbytes = [0u8; HLEN];
            if let Err(e) = hdr.emit(&mut hbytes, HdrLayout::Basic, HdrByteOrder::Native) {
                report(i, Err(e.into()));
                continue;
            }
            let start = s.iov.len();
            s.iov.push(libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }); // the header, set below
            let mut prefix = Prefix::default();
            let mut bytes = 0usize;
            frames.parts(i, &mut |p: &'a [u8]| {
                s.iov.push(sys::iovec_ro(p));
                prefix.push(p);
                bytes += p.len();
            });
            let count = s.iov.len() - start;
            if count > MAX_IOV {
                s.iov.truncate(start);
                report(i, Err(IoError::Unsupported(format!("{} frame parts (at most {})", count - 1, MAX_IOV - 1))));
                continue;
            }
            let protocol = frame_protocol(prefix.bytes());
            s.hdrs.push(hbytes);
            s.addrs.push(sockaddr_ll(self.ifindex, protocol));
            s.frames.push(TxMsg { frame: i, iov_start: start, iov_count: count, expected: HLEN + bytes });
        }
        // The arrays are complete: no more reallocation, pointers into them stay valid.
        for k in 0..s.frames.len() {
            let f = s.frames[k];
            s.iov[f.iov_start] = sys::iovec_ro(&s.hdrs[k]);
            // SAFETY: mmsghdr is plain old data; all-zero is valid before the fields are set.
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_name = &mut s.addrs[k] as *mut libc::sockaddr_ll as *mut libc::c_void;
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            m.msg_hdr.msg_iov = s.iov[f.iov_start..].as_mut_ptr();
            m.msg_hdr.msg_iovlen = f.iov_count as _;
            s.msgs.push(m);
        }
        let fd = self.fd.as_raw_fd();
        let total = s.msgs.len();
        let mut pos = 0;
        let mut calls = 0;
        while pos < total {
            let vlen = (total - pos).min(MAX_IOV) as libc::c_uint;
            // SAFETY: msgs[pos..pos + vlen] are initialised mmsghdrs whose names, iovecs and the
            // slices those point to (the socket's arrays, the caller's frames borrowed for 'a)
            // live across the call; the kernel reads them and writes only msg_len.
            let rc = unsafe { libc::sendmmsg(fd, s.msgs[pos..].as_mut_ptr(), vlen, 0) };
            if rc < 0 {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
                let err = |errno| IoError::Syscall {
                    call: "sendmmsg",
                    what: self.ifname.clone(),
                    source: std::io::Error::from_raw_os_error(errno),
                };
                report(s.frames[pos].frame, Err(err(errno)));
                pos += 1;
                if matches!(errno, libc::ENXIO | libc::ENODEV | libc::ENETDOWN) {
                    for f in &s.frames[pos..] {
                        report(f.frame, Err(err(errno)));
                    }
                    break;
                }
                continue;
            }
            calls += 1;
            let sent = rc as usize;
            for k in pos..pos + sent {
                let (f, written) = (s.frames[k], s.msgs[k].msg_len as usize);
                if written == f.expected {
                    report(f.frame, Ok(f.expected - HLEN));
                } else {
                    report(f.frame, Err(IoError::ShortWrite { call: "sendmmsg", written, expected: f.expected }));
                }
            }
            pos += sent;
        }
        calls
    }

    /// Maps a TPACKET_V2 RX ring of `frames` frames of `frame_size` bytes
    /// (a page multiple; 68 KiB holds a 64 KiB GSO packet): from now on the
    /// kernel copies received packets into the ring (in the softirq that
    /// delivers them) and [`PacketSocket::recv_many`] reads them from there,
    /// without a system call per packet. When the ring is full the kernel
    /// drops (counted in [`PacketSocket::take_stats`]). The ring replaces
    /// the socket queue: [`PacketSocket::recv_info`] no longer sees packets.
    ///
    /// # Errors
    /// A ring exists already; the ring setup or `mmap` failing.
    pub fn enable_rx_ring(&mut self, frames: usize, frame_size: usize) -> Result<()> {
        if self.rx_ring.is_some() {
            return Err(IoError::Unsupported(format!("{}: RX ring set up twice", self.ifname)));
        }
        let ring = RingMap::setup(self, &RingConfig { frame_size, rx_frames: frames, tx_frames: 0 })?;
        self.rx_ring = Some(ring);
        Ok(())
    }

    /// True once [`PacketSocket::enable_rx_ring`] succeeded.
    pub fn has_rx_ring(&self) -> bool {
        self.rx_ring.is_some()
    }

    /// Hands up to `max` received packets to `f`, without waiting, each
    /// borrowed from the socket's memory (RX ring frames, or `recvmmsg`
    /// slots of [`RECV_SLOT`] bytes, `max` of them, allocated on first use);
    /// returns how many were handed (a truncated or undecodable one is
    /// handed as its error). 0 means nothing is queued.
    ///
    /// # Errors
    /// A pending socket error (`ENETDOWN` once the interface went down or
    /// away); with a ring it is read (`SO_ERROR`) when the ring is empty.
    pub fn recv_many(&mut self, max: usize, f: &mut RecvHandler<'_>) -> Result<usize> {
        let max = max.max(1);
        if let Some(ring) = &mut self.rx_ring {
            let skip = self.filter_outgoing;
            let mut n = 0;
            for _ in 0..max {
                match ring.rx_next(skip, &mut *f) {
                    None => break,
                    Some(None) => {}
                    Some(Some(())) => n += 1,
                }
            }
            if n == 0 {
                self.take_error()?;
            }
            return Ok(n);
        }
        if self.rx_slots.as_ref().is_none_or(|b| b.capacity() != max) {
            self.rx_slots = Some(RecvBatch::new(max, RECV_SLOT));
        }
        let mut batch = self.rx_slots.take().unwrap_or_else(|| RecvBatch::new(max, RECV_SLOT));
        let r = self.recv_batch(&mut batch);
        let mut handed = 0;
        if let Ok(k) = r {
            for i in 0..k {
                match batch.frame(i) {
                    Ok(None) => {}
                    Ok(Some(frame)) => {
                        f(Ok(frame), None);
                        handed += 1;
                    }
                    Err(e) => {
                        f(Err(e), None);
                        handed += 1;
                    }
                }
            }
        }
        self.rx_slots = Some(batch);
        r.map(|_| handed)
    }

    /// Reads and clears the socket's pending error (`SO_ERROR`).
    ///
    /// # Errors
    /// The pending error, as the failure of `what`; `getsockopt` failing.
    pub fn take_error(&self) -> Result<()> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: SO_ERROR writes one int; `v` and `len` are live and sized accordingly.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                &mut v as *mut libc::c_int as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("getsockopt(SO_ERROR)", self.ifname.clone()));
        }
        if v != 0 {
            return Err(IoError::Syscall {
                call: "recv (pending socket error)",
                what: self.ifname.clone(),
                source: std::io::Error::from_raw_os_error(v),
            });
        }
        Ok(())
    }

    /// `PACKET_STATISTICS`: (packets received, packets dropped) since the
    /// last call (the kernel resets them on read): drops because the socket
    /// queue or RX ring was full.
    ///
    /// # Errors
    /// `getsockopt` failing.
    pub fn take_stats(&self) -> Result<(u32, u32)> {
        let mut v = [0u32; 2];
        let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
        // SAFETY: PACKET_STATISTICS writes a struct tpacket_stats (two u32) into `v`; `len` says so.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_STATISTICS,
                v.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            return Err(IoError::last_os("getsockopt(PACKET_STATISTICS)", self.ifname.clone()));
        }
        Ok((v[0], v[1]))
    }

    /// Receives up to [`RecvBatch::capacity`] packets with one `recvmmsg`,
    /// without waiting, into `batch` (replacing what it held); returns how
    /// many (0: nothing queued). Read them with [`RecvBatch::frame`].
    ///
    /// # Errors
    /// `recvmmsg` failing with anything but "would block" (`ENETDOWN` once
    /// the interface went down or away).
    pub fn recv_batch(&mut self, batch: &mut RecvBatch) -> Result<usize> {
        batch.filled = 0;
        batch.filter_outgoing = self.filter_outgoing;
        let n = batch.prepare();
        // SAFETY: `batch.msgs[..n]` are mmsghdrs whose names, iovecs and control buffers point
        // into the batch's own arrays (sized n, alive and not reallocated across the call).
        let rc = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                batch.msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = IoError::last_os("recvmmsg", self.ifname.clone());
            return if e.is_would_block() { Ok(0) } else { Err(e) };
        }
        batch.filled = rc as usize;
        Ok(batch.filled)
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One message of a batched send.
#[derive(Debug, Clone, Copy)]
struct TxMsg {
    /// Index in the [`FrameSource`].
    frame: usize,
    iov_start: usize,
    iov_count: usize,
    /// Bytes the kernel should take (header included).
    expected: usize,
}

/// The arrays of [`PacketSocket::send_batch`], kept between calls. Between
/// calls the raw pointers in `iov` and `msgs` are stale and never read:
/// every call clears and rebuilds them.
#[derive(Default)]
struct TxScratch {
    hdrs: Vec<[u8; HLEN]>,
    addrs: Vec<libc::sockaddr_ll>,
    iov: Vec<libc::iovec>,
    frames: Vec<TxMsg>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside (`iovec`, `mmsghdr`) are only dereferenced by the kernel
// during `send_batch`, which rebuilds them from memory borrowed for that call; between calls
// they are dead values, so moving the scratch to another thread is sound.
unsafe impl Send for TxScratch {}

impl std::fmt::Debug for TxScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxScratch").field("capacity", &self.msgs.capacity()).finish()
    }
}

impl TxScratch {
    fn clear(&mut self) {
        self.hdrs.clear();
        self.addrs.clear();
        self.iov.clear();
        self.frames.clear();
        self.msgs.clear();
    }
}

/// Preallocated slots for [`PacketSocket::recv_batch`]: per slot a
/// virtio_net_hdr, a data buffer of [`RecvBatch::slot_size`] bytes, a
/// `sockaddr_ll` and a control buffer for `PACKET_AUXDATA`.
pub struct RecvBatch {
    slot: usize,
    data: Vec<u8>,
    hdrs: Vec<[u8; HLEN]>,
    addrs: Vec<libc::sockaddr_ll>,
    control: Vec<[u64; 8]>,
    iov: Vec<[libc::iovec; 2]>,
    msgs: Vec<libc::mmsghdr>,
    filled: usize,
    filter_outgoing: bool,
}

// SAFETY: the raw pointers inside (`iovec`, `mmsghdr`) point into the batch's own heap arrays,
// which move with it; they are rebuilt before every `recvmmsg` and only read through `&self`.
unsafe impl Send for RecvBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.capacity())
            .field("slot_size", &self.slot)
            .field("filled", &self.filled)
            .finish()
    }
}

impl RecvBatch {
    /// `slots` slots (at least 1) of `slot_size` bytes each, allocated now.
    pub fn new(slots: usize, slot_size: usize) -> RecvBatch {
        let slots = slots.max(1);
        // SAFETY: sockaddr_ll and mmsghdr are plain old data; all-zero is a valid value.
        let (sa, mm): (libc::sockaddr_ll, libc::mmsghdr) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
        let null = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        RecvBatch {
            slot: slot_size,
            data: vec![0; slots * slot_size],
            hdrs: vec![[0; HLEN]; slots],
            addrs: vec![sa; slots],
            control: vec![[0; 8]; slots],
            iov: vec![[null; 2]; slots],
            msgs: vec![mm; slots],
            filled: 0,
            filter_outgoing: false,
        }
    }

    /// Number of slots (most packets per call).
    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Bytes per slot (larger frames are reported truncated).
    pub fn slot_size(&self) -> usize {
        self.slot
    }

    /// Packets the last [`PacketSocket::recv_batch`] received.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// True if the last receive got nothing.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Points every message at its slot (the arrays never reallocate after
    /// [`RecvBatch::new`]); returns the slot count.
    fn prepare(&mut self) -> usize {
        let n = self.msgs.len();
        for i in 0..n {
            let (hdr, data) = (&mut self.hdrs[i], &mut self.data[i * self.slot..(i + 1) * self.slot]);
            self.iov[i] = [sys::iovec_rw(hdr), sys::iovec_rw(data)];
            let m = &mut self.msgs[i];
            m.msg_len = 0;
            m.msg_hdr.msg_name = &mut self.addrs[i] as *mut libc::sockaddr_ll as *mut libc::c_void;
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            m.msg_hdr.msg_iov = self.iov[i].as_mut_ptr();
            m.msg_hdr.msg_iovlen = 2;
            m.msg_hdr.msg_control = self.control[i].as_mut_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_controllen = std::mem::size_of::<[u64; 8]>() as _;
            m.msg_hdr.msg_flags = 0;
        }
        n
    }

    /// Packet `i` of the last receive (`i < len()`): its metadata and
    /// bytes, as [`PacketSocket::recv_info`] gives them; `Ok(None)` for an
    /// outgoing packet skipped in userspace (see the module documentation).
    ///
    /// # Errors
    /// [`IoError::Truncated`] for a frame larger than a slot (its tail is
    /// lost); an undecodable header.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn frame(&self, i: usize) -> Result<Option<(RecvInfo, &[u8])>> {
        assert!(i < self.filled, "RecvBatch::frame({i}) of {}", self.filled);
        let m = &self.msgs[i];
        let pkttype = PktType::from_raw(self.addrs[i].sll_pkttype);
        if self.filter_outgoing && pkttype == PktType::Outgoing {
            return Ok(None);
        }
        let n = m.msg_len as usize;
        if n < HLEN {
            return Err(IoError::Truncated { len: n, capacity: HLEN });
        }
        let len = n - HLEN;
        if len > self.slot {
            return Err(IoError::Truncated { len, capacity: self.slot });
        }
        let vlan = parse_auxdata(&m.msg_hdr);
        let hdr = VirtioNetHdr::parse(&self.hdrs[i], HdrLayout::Basic, HdrByteOrder::Native)?;
        let data = &self.data[i * self.slot..i * self.slot + len];
        Ok(Some((RecvInfo { hdr, len, pkttype, vlan }, data)))
    }
}

/// The first bytes of a frame given in parts (its Ethernet header).
#[derive(Default)]
struct Prefix {
    buf: [u8; 14],
    len: usize,
}

impl Prefix {
    fn push(&mut self, part: &[u8]) {
        let n = part.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&part[..n]);
        self.len += n;
    }
    fn full(&self) -> bool {
        self.len == self.buf.len()
    }
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The `sll_protocol` (host order) a frame starting with `prefix` is sent
/// with: its EtherType (for a tagged frame the outer TPID), or `ETH_P_ALL`
/// for a frame shorter than an Ethernet header (the kernel then parses the
/// header itself).
pub fn frame_protocol(prefix: &[u8]) -> u16 {
    match prefix.get(12..14) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => ETH_P_ALL,
    }
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
