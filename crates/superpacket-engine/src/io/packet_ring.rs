//! TPACKET_V2 memory-mapped rings on an AF_PACKET socket with
//! `PACKET_VNET_HDR` (docs/kernel-oracle.md section 6: V2 rings accept the
//! virtio_net_hdr in both directions, V3 refuses it on TX), and the
//! measurement that compares the three ways of moving frames through
//! AF_PACKET on this machine: one `sendmsg`/`recvmsg` per frame,
//! `sendmmsg`/`recvmmsg` batches ([`PacketSocket::send_batch`],
//! [`PacketSocket::recv_batch`]) and rings ([`PacketRing`]).
//!
//! # Layout
//!
//! One block per frame of [`RingConfig::frame_size`] bytes (a page
//! multiple, large enough for a 64 KiB GSO packet): RX frames first, then TX
//! frames, in one shared mapping.
//!
//! - RX: the kernel fills a frame (`tpacket_rcv`), then sets
//!   `TP_STATUS_USER`; the virtio_net_hdr sits right before the frame
//!   (`tp_mac - 10`), the `sockaddr_ll` after the aligned `tpacket2_hdr`.
//!   Userspace gives the frame back with `TP_STATUS_KERNEL`. A frame longer
//!   than the ring frame is cut (`tp_snaplen < tp_len`): reported as
//!   [`IoError::Truncated`].
//! - TX: userspace writes header + frame at `TPACKET2_HDRLEN -
//!   sizeof(sockaddr_ll)` (32) with `tp_len`, sets `TP_STATUS_SEND_REQUEST`,
//!   then one `send(fd, NULL, 0)` makes the kernel send every requested frame
//!   (`tpacket_snd`), attaching the ring pages to the skbs (no kernel copy);
//!   a frame becomes `TP_STATUS_AVAILABLE` again once its skb is freed, or
//!   `TP_STATUS_WRONG_FORMAT` if the kernel refused it.
//!
//! The status word is read with acquire and written with release ordering
//! (the kernel's `smp_rmb`/`smp_wmb` pairs).
//!
//! # Measured (what the live data path uses)
//!
//! [`measure_paths`] (run by `tests/af_packet_batch.rs`,
//! `af_packet_path_measurement`, ignored by default; the figures of this
//! machine are in that file's documentation) gives frames/s and Gbps for
//! each path and direction. Receiving, the RX ring was clearly faster than
//! `recvmmsg` and `recvmsg` (a streaming receiver: +20-45 % for MTU frames,
//! about twice for 64 KB superpackets): the kernel copies the packet into
//! the ring in the softirq that delivers it and no system call is made per
//! packet. Sending, a TX ring was no faster than `sendmmsg` for MTU frames
//! and 3-4 times slower for superpackets (userspace copies every frame into
//! the ring, where `sendmmsg` points iovecs at the packet). So the port
//! driver ([`crate::device::port_io`]) receives from an RX ring
//! ([`PacketSocket::enable_rx_ring`]) and sends with `sendmmsg`
//! ([`PacketSocket::send_batch`]); [`PacketRing`]'s TX side stays for
//! measurement.
//!
//! An RX ring frame has a fixed size (68 KiB here, for 64 KiB GSO
//! packets), so the ring holds as many packets as it has frames whatever
//! their size (128 by default in the driver: 8.5 MiB); when it is full the
//! kernel drops and counts (`PACKET_STATISTICS`).

use super::error::{IoError, Result};
use super::netns::{NetNs, VethPair};
use super::packet_socket::{FrameSource, PacketSocket, PacketSocketConfig, PktType, RecvBatch, RecvInfo, VlanInfo};
use bytes::Bytes;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};

const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TX_RING: libc::c_int = 13;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// virtio_net_hdr size with `PACKET_VNET_HDR`.
const HLEN: usize = 10;
/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`: where the `sockaddr_ll` of an RX frame starts.
const SLL_OFFSET: usize = 32;
/// `TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`: where TX data starts.
const TX_DATA_OFFSET: usize = 32;

/// `struct tpacket_req`.
#[repr(C)]
struct TpacketReq {
    tp_block_size: libc::c_uint,
    tp_block_nr: libc::c_uint,
    tp_frame_size: libc::c_uint,
    tp_frame_nr: libc::c_uint,
}

/// `struct tpacket2_hdr` (the status word is accessed atomically, separately).
#[repr(C)]
#[derive(Clone, Copy)]
struct Tpacket2Hdr {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_sec: u32,
    tp_nsec: u32,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
    tp_padding: [u8; 4],
}

/// Ring sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per frame (and per block): a multiple of the page size. The
    /// default, 68 KiB, holds a 64 KiB GSO packet with its ring headers.
    pub frame_size: usize,
    /// RX frames (0: no RX ring).
    pub rx_frames: usize,
    /// TX frames (0: no TX ring).
    pub tx_frames: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig { frame_size: 17 * 4096, rx_frames: 64, tx_frames: 64 }
    }
}

/// The mapping of a socket's rings, shared between the [`RingMap`] and the
/// RX frames lent out of it ([`RxLend::lend`]): unmapped when the last of
/// them is dropped, so a lent frame stays readable even after its socket
/// was closed.
#[derive(Debug)]
struct RingMemory {
    map: *mut u8,
    map_len: usize,
    /// RX frames lent out now (at most [`RingMemory::max_lent`]).
    lent: AtomicUsize,
    max_lent: usize,
}

// SAFETY: the mapping is owned by this value (unmapped once, on drop); the ring protocol with the
// kernel goes through atomic status words and does not depend on which thread touches it.
unsafe impl Send for RingMemory {}
// SAFETY: shared access only reads frames userspace owns, or stores status words atomically.
unsafe impl Sync for RingMemory {}

impl Drop for RingMemory {
    fn drop(&mut self) {
        // SAFETY: `map`/`map_len` are exactly the mapping created in `RingMap::setup`, unmapped once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// The status word of the ring frame starting at `frame` (acquire).
fn load_status(frame: *mut u8) -> u32 {
    // SAFETY: callers pass the start of a frame of a live ring mapping: every frame starts
    // page-aligned with its u32 status word; the kernel accesses it concurrently, hence the
    // atomic view.
    unsafe { (*(frame as *const AtomicU32)).load(Ordering::Acquire) }
}

/// Sets the status word of the ring frame starting at `frame` (release).
fn store_status(frame: *mut u8, v: u32) {
    // SAFETY: as in `load_status`.
    unsafe { (*(frame as *const AtomicU32)).store(v, Ordering::Release) }
}

/// Status of an RX frame lent out by [`RxLend::lend`]: neither
/// `TP_STATUS_KERNEL` (the kernel fills only frames whose status is exactly
/// that) nor with `TP_STATUS_USER` set (the reader takes only those), so
/// nobody touches the frame until the loan gives it back.
const TP_STATUS_LENT: u32 = 1 << 30;

/// The mapped TPACKET_V2 rings of a socket (RX frames, then TX frames).
/// [`PacketRing`] pairs one with its socket; [`PacketSocket::enable_rx_ring`]
/// keeps one inside the socket.
#[derive(Debug)]
pub(crate) struct RingMap {
    mem: Arc<RingMemory>,
    cfg: RingConfig,
    rx_head: usize,
    tx_head: usize,
    /// Frames the kernel refused (`TP_STATUS_WRONG_FORMAT`) so far.
    tx_refused: u64,
}

/// An RX ring frame kept past the receive handler ([`RxLend::lend`]): the
/// owner of the [`Bytes`] that point into the ring. Dropping it gives the
/// frame back to the kernel.
struct RingLoan {
    mem: Arc<RingMemory>,
    frame: *mut u8,
    data: *const u8,
    len: usize,
}

// SAFETY: the loan only reads its frame's bytes, which nobody writes while it is lent (status
// TP_STATUS_LENT), inside a mapping its Arc keeps alive; the release is an atomic store.
unsafe impl Send for RingLoan {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for RingLoan {}

impl AsRef<[u8]> for RingLoan {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `data..data + len` lies inside the lent frame (checked by `rx_next` before
        // lending), in a mapping kept alive by `mem`, and is not written until `drop`.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for RingLoan {
    fn drop(&mut self) {
        store_status(self.frame, TP_STATUS_KERNEL);
        self.mem.lent.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Offered with each RX ring frame to the receive handler: the frame is
/// given back to the kernel when the handler returns, unless the handler
/// takes it with [`RxLend::lend`].
pub struct RxLend<'a> {
    mem: &'a Arc<RingMemory>,
    frame: *mut u8,
    data: &'a [u8],
    lent: bool,
}

impl fmt::Debug for RxLend<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxLend").field("len", &self.data.len()).field("lent", &self.lent).finish()
    }
}

impl RxLend<'_> {
    /// Keeps the frame out of the ring and returns its bytes (the frame the
    /// handler was given) without copying them: the frame goes back to the
    /// kernel when these bytes and every slice of them are dropped. `None`
    /// when half of the ring is lent already (the kernel must keep room to
    /// receive into) or the frame was lent before.
    pub fn lend(&mut self) -> Option<Bytes> {
        if self.lent {
            return None;
        }
        let lent = self.mem.lent.fetch_add(1, Ordering::Relaxed);
        if lent >= self.mem.max_lent {
            self.mem.lent.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        // Marked lent before the loan exists, so that a loan dropped at once
        // still ends with the frame given back.
        store_status(self.frame, TP_STATUS_LENT);
        self.lent = true;
        let loan =
            RingLoan { mem: Arc::clone(self.mem), frame: self.frame, data: self.data.as_ptr(), len: self.data.len() };
        Some(Bytes::from_owner(loan))
    }
}

fn setsockopt_raw<T>(sock: &PacketSocket, opt: libc::c_int, v: &T, call: &'static str) -> Result<()> {
    // SAFETY: passes a pointer to a live `T` with its exact size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_fd().as_raw_fd(),
            SOL_PACKET,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(IoError::last_os(call, sock.ifname().to_string())) } else { Ok(()) }
}

impl RingMap {
    /// Sets `PACKET_VERSION` to TPACKET_V2, asks for the rings of `ring` and
    /// maps them. `PACKET_VNET_HDR` must already be on (the socket's
    /// opening sets it), since the kernel refuses it once a ring exists.
    pub(crate) fn setup(sock: &PacketSocket, ring: &RingConfig) -> Result<RingMap> {
        if ring.frame_size == 0 || !ring.frame_size.is_multiple_of(4096) {
            return Err(IoError::Unsupported(format!("ring frame size {} (use a multiple of 4096)", ring.frame_size)));
        }
        let map_len = (ring.rx_frames + ring.tx_frames) * ring.frame_size;
        if map_len == 0 {
            return Err(IoError::Unsupported("a ring with no frames".into()));
        }
        let version: libc::c_int = TPACKET_V2;
        setsockopt_raw(sock, PACKET_VERSION, &version, "setsockopt(PACKET_VERSION)")?;
        let req = |n: usize| TpacketReq {
            tp_block_size: ring.frame_size as libc::c_uint,
            tp_block_nr: n as libc::c_uint,
            tp_frame_size: ring.frame_size as libc::c_uint,
            tp_frame_nr: n as libc::c_uint,
        };
        if ring.rx_frames > 0 {
            setsockopt_raw(sock, PACKET_RX_RING, &req(ring.rx_frames), "setsockopt(PACKET_RX_RING)")?;
        }
        if ring.tx_frames > 0 {
            setsockopt_raw(sock, PACKET_TX_RING, &req(ring.tx_frames), "setsockopt(PACKET_TX_RING)")?;
        }
        // SAFETY: maps the socket's rings (RX then TX, as set above) shared; the kernel checks
        // the length against the rings' size.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                sock.as_fd().as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(IoError::last_os("mmap(PACKET rings)", sock.ifname().to_string()));
        }
        let mem = RingMemory { map: map as *mut u8, map_len, lent: AtomicUsize::new(0), max_lent: ring.rx_frames / 2 };
        Ok(RingMap { mem: Arc::new(mem), cfg: *ring, rx_head: 0, tx_head: 0, tx_refused: 0 })
    }

    /// Start of RX frame `i` or TX frame `i` (after the RX frames).
    fn frame_ptr(&self, tx: bool, i: usize) -> *mut u8 {
        let index = if tx { self.cfg.rx_frames + i } else { i };
        debug_assert!(index * self.cfg.frame_size < self.mem.map_len);
        // SAFETY: `index` is below rx_frames + tx_frames, so the offset stays inside the mapping.
        unsafe { self.mem.map.add(index * self.cfg.frame_size) }
    }

    /// See [`PacketRing::recv_with`]; `skip_outgoing` gives outgoing
    /// packets back unseen. A good frame comes with an [`RxLend`]: the
    /// frame is given back to the kernel when `f` returns unless `f` lent it.
    pub(crate) fn rx_next<R>(
        &mut self,
        skip_outgoing: bool,
        f: impl FnOnce(Result<(RecvInfo, &[u8])>, Option<&mut RxLend<'_>>) -> R,
    ) -> Option<Option<R>> {
        if self.cfg.rx_frames == 0 {
            return None;
        }
        let base = self.frame_ptr(false, self.rx_head);
        let st = load_status(base);
        if st & TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the kernel handed this frame to userspace (TP_STATUS_USER, acquire): its
        // header and the sockaddr_ll after it are initialised and not written until released.
        let (h, sll) = unsafe {
            (
                std::ptr::read(base as *const Tpacket2Hdr),
                std::ptr::read_unaligned(base.add(SLL_OFFSET) as *const libc::sockaddr_ll),
            )
        };
        let pkttype = PktType::from_raw(sll.sll_pkttype);
        let out = if skip_outgoing && pkttype == PktType::Outgoing {
            None
        } else {
            let mac = h.tp_mac as usize;
            let snap = h.tp_snaplen as usize;
            let r = if mac < HLEN || mac + snap > self.cfg.frame_size {
                Err(IoError::Truncated { len: h.tp_len as usize, capacity: self.cfg.frame_size })
            } else if snap < h.tp_len as usize {
                Err(IoError::Truncated { len: h.tp_len as usize, capacity: snap })
            } else {
                // SAFETY: mac - HLEN .. mac + snap lies inside this frame (checked above), owned by
                // userspace until the status is released below.
                let (hb, data) = unsafe {
                    (
                        std::slice::from_raw_parts(base.add(mac - HLEN), HLEN),
                        std::slice::from_raw_parts(base.add(mac), snap),
                    )
                };
                let vlan = (st & TP_STATUS_VLAN_VALID != 0).then_some(VlanInfo {
                    tci: h.tp_vlan_tci,
                    tpid: if st & TP_STATUS_VLAN_TPID_VALID != 0 { h.tp_vlan_tpid } else { 0 },
                });
                VirtioNetHdr::parse(hb, HdrLayout::Basic, HdrByteOrder::Native)
                    .map_err(IoError::from)
                    .map(|hdr| (RecvInfo { hdr, len: snap, pkttype, vlan }, data))
            };
            match r {
                Ok((info, data)) => {
                    let mut lend = RxLend { mem: &self.mem, frame: base, data, lent: false };
                    let out = f(Ok((info, data)), Some(&mut lend));
                    if lend.lent {
                        // The loan gives the frame back.
                        self.rx_head = (self.rx_head + 1) % self.cfg.rx_frames;
                        return Some(Some(out));
                    }
                    Some(out)
                }
                Err(e) => Some(f(Err(e), None)),
            }
        };
        store_status(base, TP_STATUS_KERNEL);
        self.rx_head = (self.rx_head + 1) % self.cfg.rx_frames;
        Some(out)
    }

    /// See [`PacketRing::push`].
    fn tx_push(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<bool> {
        if self.cfg.tx_frames == 0 {
            return Err(IoError::Unsupported("no TX ring".into()));
        }
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let room = self.cfg.frame_size - TX_DATA_OFFSET - HLEN;
        if len > room {
            return Err(IoError::Truncated { len, capacity: room });
        }
        let base = self.frame_ptr(true, self.tx_head);
        let st = load_status(base);
        if st & TP_STATUS_WRONG_FORMAT != 0 {
            self.tx_refused += 1;
        } else if st != TP_STATUS_AVAILABLE {
            return Ok(false);
        }
        let mut hb = [0u8; HLEN];
        hdr.emit(&mut hb, HdrLayout::Basic, HdrByteOrder::Native)?;
        // SAFETY: the frame is AVAILABLE (or refused), so userspace owns it; TX_DATA_OFFSET + HLEN
        // + len fits the frame (checked above); tp_len is the second u32 of the header.
        unsafe {
            let mut at = base.add(TX_DATA_OFFSET);
            std::ptr::copy_nonoverlapping(hb.as_ptr(), at, HLEN);
            at = at.add(HLEN);
            for p in parts {
                std::ptr::copy_nonoverlapping(p.as_ptr(), at, p.len());
                at = at.add(p.len());
            }
            std::ptr::write(base.add(4) as *mut u32, (HLEN + len) as u32);
        }
        store_status(base, TP_STATUS_SEND_REQUEST);
        self.tx_head = (self.tx_head + 1) % self.cfg.tx_frames;
        Ok(true)
    }
}

/// An AF_PACKET socket with TPACKET_V2 RX and/or TX rings mapped.
#[derive(Debug)]
pub struct PacketRing {
    sock: PacketSocket,
    ring: RingMap,
}

impl PacketRing {
    /// Opens a socket on `ifname` (in `ns`, or the current namespace) with
    /// `sock_cfg` and maps rings of `ring`: `PACKET_VNET_HDR` is set by the
    /// socket's opening, before the rings, as the kernel requires.
    ///
    /// # Errors
    /// Opening the socket, `PACKET_VERSION`/`PACKET_RX_RING`/`PACKET_TX_RING`
    /// or `mmap` failing; a frame size that is not a page multiple.
    pub fn open(
        ns: Option<&NetNs>,
        ifname: &str,
        sock_cfg: &PacketSocketConfig,
        ring: &RingConfig,
    ) -> Result<PacketRing> {
        let sock = match ns {
            Some(ns) => PacketSocket::open_in(ns, ifname, sock_cfg)?,
            None => PacketSocket::open(ifname, sock_cfg)?,
        };
        let ring = RingMap::setup(&sock, ring)?;
        Ok(PacketRing { sock, ring })
    }

    /// The socket (for `poll`, `send`, ...).
    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }

    /// Frames the kernel refused (`TP_STATUS_WRONG_FORMAT`) so far.
    pub fn tx_refused(&self) -> u64 {
        self.ring.tx_refused
    }

    /// Hands the next received frame (if the kernel has filled one) to `f`
    /// as [`PacketSocket::recv_info`] would, then gives the frame back to
    /// the kernel; `None` when the ring is empty. Outgoing packets are given
    /// back unseen: `Some(None)`.
    pub fn recv_with<R>(&mut self, f: impl FnOnce(Result<(RecvInfo, &[u8])>) -> R) -> Option<Option<R>> {
        self.ring.rx_next(true, |r, _| f(r))
    }

    /// Copies `hdr` and the frame made of `parts` into the next TX frame and
    /// marks it for sending; `Ok(false)` when that frame is still in use
    /// (the ring is full: call [`PacketRing::kick`] and retry).
    ///
    /// # Errors
    /// No TX ring, a frame too large for a ring frame, an unencodable header.
    pub fn push(&mut self, hdr: &VirtioNetHdr, parts: &[&[u8]]) -> Result<bool> {
        self.ring.tx_push(hdr, parts)
    }

    /// Makes the kernel send every frame marked by [`PacketRing::push`]
    /// (`send(fd, NULL, 0)`); with `wait`, returns once their skbs are
    /// freed. Returns the bytes the kernel took.
    ///
    /// # Errors
    /// `send` failing (the first refused frame's error; see
    /// [`PacketRing::tx_refused`]).
    pub fn kick(&mut self, wait: bool) -> Result<usize> {
        let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        // SAFETY: a zero-length send with no buffer: the kernel reads the TX ring only.
        let rc = unsafe { libc::send(self.sock.as_fd().as_raw_fd(), std::ptr::null(), 0, flags) };
        if rc < 0 {
            let e = IoError::last_os("send(PACKET_TX_RING)", self.sock.ifname().to_string());
            if e.is_would_block() {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(rc as usize)
    }
}

// ---------------------------------------------------------------- measurement

/// One figure of [`measure_paths`].
#[derive(Debug, Clone, PartialEq)]
pub struct PathFigure {
    /// `single` (one `sendmsg`/`recvmsg` per frame), `mmsg` or `ring`.
    pub path: &'static str,
    /// `tx` or `rx`.
    pub direction: &'static str,
    /// Frame bytes (without the virtio_net_hdr).
    pub frame_len: usize,
    /// Frames moved in the timed part.
    pub frames: u64,
    /// Seconds of the timed part.
    pub secs: f64,
}

impl PathFigure {
    /// Frames per second.
    pub fn frames_per_sec(&self) -> f64 {
        self.frames as f64 / self.secs.max(1e-9)
    }
    /// Gigabits per second of frame bytes.
    pub fn gbps(&self) -> f64 {
        self.frames_per_sec() * self.frame_len as f64 * 8.0 / 1e9
    }
}

/// What [`measure_paths`] moves.
#[derive(Debug, Clone)]
pub struct MeasureCase {
    /// The header sent with every frame (GSO for a superpacket).
    pub hdr: VirtioNetHdr,
    /// The frame.
    pub frame: Vec<u8>,
    /// Frames per path and direction.
    pub frames: usize,
}

/// Frames per `sendmmsg`/`recvmmsg` call, ring kick, and RX round.
const MEASURE_BATCH: usize = 32;
/// Frames queued on the receiver before each timed RX round.
const MEASURE_ROUND: usize = 256;
/// How long each streaming RX measurement receives.
const STREAM_TIME: Duration = Duration::from_millis(500);

/// The same frame `n` times, for [`PacketSocket::send_batch`].
struct Repeat<'a> {
    hdr: VirtioNetHdr,
    frame: &'a [u8],
    n: usize,
}

impl<'a> FrameSource<'a> for Repeat<'a> {
    fn len(&self) -> usize {
        self.n
    }
    fn header(&self, _: usize) -> VirtioNetHdr {
        self.hdr
    }
    fn parts(&self, _: usize, part: &mut dyn FnMut(&'a [u8])) {
        part(self.frame);
    }
}

fn send_repeat(sock: &mut PacketSocket, case: &MeasureCase, n: usize) -> Result<usize> {
    let mut first_err = None;
    let mut ok = 0;
    sock.send_batch(&Repeat { hdr: case.hdr, frame: &case.frame, n }, |_, r| match r {
        Ok(_) => ok += 1,
        Err(e) => {
            if first_err.is_none() {
                first_err = Some(e);
            }
        }
    });
    match first_err {
        Some(e) => Err(e),
        None => Ok(ok),
    }
}

/// Measures, inside two namespaces joined by a veth (created here, deleted
/// on return), the three AF_PACKET paths for every case. Figures by
/// `direction`:
///
/// - `tx`: `frames` frames sent on one end, timed (one `sendmsg` each;
///   `sendmmsg` of 32; 32 frames copied into a TX ring, then one blocking
///   kick). The peer end has no listener: the frames die in its stack
///   (`PACKET_OTHERHOST`), superpackets whole (veth TSO on).
/// - `rx`, `rx-round`: rounds of 256 frames sent to the receiving socket by
///   `sendmmsg` from the other end, then drained (one `recvmsg` each;
///   `recvmmsg` of 32 and of 8; the RX ring). `rx` times the drain only
///   (unfair to the ring, whose copy happened while sending), `rx-round`
///   the sending and the drain.
/// - `rx-stream`: a second thread sends without pause while the path
///   measured receives for 0.5 s (socket receive buffer 8 MiB, ring of 64
///   frames): what a receiver keeps up with when both run at once.
///
/// Every received frame is copied once out of the kernel's memory into a
/// reusable buffer, as the port driver copies it into its packet.
///
/// # Errors
/// Namespace, veth or socket setup failing; a send failing.
pub fn measure_paths(cases: &[MeasureCase]) -> Result<Vec<PathFigure>> {
    let ns_a = NetNs::create("sp-meas")?;
    let ns_b = NetNs::create("sp-meas")?;
    ns_a.disable_ipv6()?;
    ns_b.disable_ipv6()?;
    let veth = VethPair::create(&ns_a, "spmeasa", &ns_b, "spmeasb")?;
    ns_a.link_up("spmeasa")?;
    ns_b.link_up("spmeasb")?;
    let tx_cfg = PacketSocketConfig { incoming_only: true, auxdata: false, ..PacketSocketConfig::default() };
    let rx_cfg = PacketSocketConfig {
        incoming_only: true,
        auxdata: true,
        rcvbuf: Some(256 << 20),
        nonblocking: true,
        ..PacketSocketConfig::default()
    };
    let mut out = Vec::new();
    for case in cases {
        let len = case.frame.len();
        let fig = |path, direction, frames, secs| PathFigure { path, direction, frame_len: len, frames, secs };
        // ---- tx
        let mut tx = PacketSocket::open_in(&ns_a, "spmeasa", &tx_cfg)?;
        let t = Instant::now();
        for _ in 0..case.frames {
            tx.send(&case.hdr, &[&case.frame])?;
        }
        out.push(fig("single", "tx", case.frames as u64, t.elapsed().as_secs_f64()));
        let t = Instant::now();
        let mut sent = 0;
        while sent < case.frames {
            sent += send_repeat(&mut tx, case, MEASURE_BATCH.min(case.frames - sent))?;
        }
        out.push(fig("mmsg", "tx", sent as u64, t.elapsed().as_secs_f64()));
        let ring_cfg = RingConfig { rx_frames: 0, tx_frames: 2 * MEASURE_BATCH, ..RingConfig::default() };
        let mut ring = PacketRing::open(Some(&ns_a), "spmeasa", &tx_cfg, &ring_cfg)?;
        let t = Instant::now();
        let mut sent = 0;
        while sent < case.frames {
            let mut pushed = 0;
            while pushed < MEASURE_BATCH && sent + pushed < case.frames {
                if !ring.push(&case.hdr, &[&case.frame])? {
                    break;
                }
                pushed += 1;
            }
            ring.kick(true)?;
            sent += pushed;
        }
        if ring.tx_refused() > 0 {
            return Err(IoError::Oracle(format!("TX ring: {} frames refused", ring.tx_refused())));
        }
        out.push(fig("ring", "tx", sent as u64, t.elapsed().as_secs_f64()));
        drop(ring);

        // ---- rx: rounds of MEASURE_ROUND frames queued (sent untimed but
        // clocked separately), then drained by the path measured.
        let rounds = case.frames.div_ceil(MEASURE_ROUND);
        let mut copy = Vec::with_capacity(len);
        // `drain(wait, consume)`: with `wait`, first wait for the socket to be readable.
        type Drain<'d> = &'d mut dyn FnMut(bool, &mut dyn FnMut(&[u8])) -> Result<usize>;
        let mut rx_rounds = |path: &'static str, drain: Drain<'_>| -> Result<()> {
            let (mut got, mut drain_secs, mut round_secs) = (0u64, 0.0, 0.0);
            for _ in 0..rounds {
                let t0 = Instant::now();
                let mut sent = 0;
                while sent < MEASURE_ROUND {
                    sent += send_repeat(&mut tx, case, MEASURE_BATCH.min(MEASURE_ROUND - sent))?;
                }
                drain(true, &mut |_| {})?;
                let t = Instant::now();
                let mut n = 0;
                let mut idle = Instant::now();
                while n < MEASURE_ROUND && idle.elapsed() < Duration::from_millis(50) {
                    let k = drain(false, &mut |frame: &[u8]| {
                        copy.clear();
                        copy.extend_from_slice(frame);
                    })?;
                    if k > 0 {
                        n += k;
                        idle = Instant::now();
                    }
                }
                drain_secs += t.elapsed().as_secs_f64();
                round_secs += t0.elapsed().as_secs_f64();
                got += n as u64;
            }
            out.push(fig(path, "rx", got, drain_secs));
            out.push(fig(path, "rx-round", got, round_secs));
            Ok(())
        };
        // one recvmsg per frame
        let mut rx = PacketSocket::open_in(&ns_b, "spmeasb", &rx_cfg)?;
        let mut buf = vec![0u8; 128 * 1024];
        rx_rounds("single", &mut |wait, consume| {
            if wait {
                rx.poll_readable(Duration::from_millis(100))?;
                return Ok(0);
            }
            Ok(match rx.try_recv_info(&mut buf)? {
                Some(info) => {
                    consume(&buf[..info.len]);
                    1
                }
                None => 0,
            })
        })?;
        // recvmmsg, batches of 32 and 8
        for (path, slots) in [("mmsg", MEASURE_BATCH), ("mmsg8", 8)] {
            let mut batch = RecvBatch::new(slots, 128 * 1024);
            rx_rounds(path, &mut |wait, consume| {
                if wait {
                    rx.poll_readable(Duration::from_millis(100))?;
                    return Ok(0);
                }
                let k = rx.recv_batch(&mut batch)?;
                let mut n = 0;
                for i in 0..k {
                    if let Some((_, frame)) = batch.frame(i)? {
                        consume(frame);
                        n += 1;
                    }
                }
                Ok(n)
            })?;
        }
        drop(rx);
        // RX ring
        let ring_cfg = RingConfig { rx_frames: MEASURE_ROUND + MEASURE_BATCH, tx_frames: 0, ..RingConfig::default() };
        let mut ring = PacketRing::open(Some(&ns_b), "spmeasb", &rx_cfg, &ring_cfg)?;
        rx_rounds("ring", &mut |wait, consume| {
            if wait {
                ring.socket().poll_readable(Duration::from_millis(100))?;
                return Ok(0);
            }
            let mut n = 0;
            while let Some(r) = ring.recv_with(|r| r.map(|(_, frame)| consume(frame))) {
                if let Some(r) = r {
                    r?;
                    n += 1;
                }
            }
            Ok(n)
        })?;
        // ---- rx-stream: a second thread sends without pause while the path
        // measured receives for STREAM_TIME.
        for path in ["single", "mmsg", "mmsg8", "ring"] {
            let stop = std::sync::atomic::AtomicBool::new(false);
            let mut pump = PacketSocket::open_in(&ns_a, "spmeasa", &tx_cfg)?;
            let mut rx = None;
            let mut ring = None;
            if path == "ring" {
                let cfg = RingConfig { rx_frames: 64, tx_frames: 0, ..RingConfig::default() };
                ring = Some(PacketRing::open(Some(&ns_b), "spmeasb", &rx_cfg, &cfg)?);
            } else {
                let cfg = PacketSocketConfig { rcvbuf: Some(8 << 20), ..rx_cfg.clone() };
                rx = Some(PacketSocket::open_in(&ns_b, "spmeasb", &cfg)?);
            }
            let slots = if path == "mmsg8" { 8 } else { MEASURE_BATCH };
            let mut batch = RecvBatch::new(slots, 128 * 1024);
            let mut buf = vec![0u8; 128 * 1024];
            let (got, secs) = std::thread::scope(|sc| -> Result<(u64, f64)> {
                let stop = &stop;
                sc.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if send_repeat(&mut pump, case, MEASURE_BATCH).is_err() {
                            std::thread::yield_now();
                        }
                    }
                });
                let t = Instant::now();
                let mut got = 0u64;
                let r = (|| -> Result<()> {
                    while t.elapsed() < STREAM_TIME {
                        match (&mut rx, &mut ring) {
                            (Some(rx), _) if path == "single" => {
                                if let Some(info) = rx.try_recv_info(&mut buf)? {
                                    copy.clear();
                                    copy.extend_from_slice(&buf[..info.len]);
                                    got += 1;
                                }
                            }
                            (Some(rx), _) => {
                                let k = rx.recv_batch(&mut batch)?;
                                for i in 0..k {
                                    if let Some((_, frame)) = batch.frame(i)? {
                                        copy.clear();
                                        copy.extend_from_slice(frame);
                                        got += 1;
                                    }
                                }
                            }
                            (None, Some(ring)) => {
                                while let Some(r) = ring.recv_with(|r| {
                                    r.map(|(_, frame)| {
                                        copy.clear();
                                        copy.extend_from_slice(frame);
                                    })
                                }) {
                                    if let Some(r) = r {
                                        r?;
                                        got += 1;
                                    }
                                }
                            }
                            (None, None) => unreachable!(),
                        }
                    }
                    Ok(())
                })();
                let secs = t.elapsed().as_secs_f64();
                stop.store(true, Ordering::Relaxed);
                r.map(|()| (got, secs))
            })?;
            out.push(fig(path, "rx-stream", got, secs));
        }
    }
    drop(veth);
    Ok(out)
}
