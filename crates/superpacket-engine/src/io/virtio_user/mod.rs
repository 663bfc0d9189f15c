//! A virtio-net driver over vhost-user, in this process ([`VirtioUser`]):
//! what DPDK's `net_virtio_user` is, for tests and benchmarks that need a
//! frontend whose features and transmit policy they choose (USO, which
//! DPDK 22.11 lacks; direct against indirect descriptors).
//!
//! # Design
//!
//! - **protocol**: `vhost`'s [`Frontend`] (feature `vhost-user-frontend`)
//!   speaks vhost-user: features, protocol features (`REPLY_ACK`, so every
//!   set-up message is acknowledged before the next), the memory table,
//!   one queue pair (receive queue 0, transmit queue 1).
//! - **guest memory** ([`memory`]): one memfd mapped here with `vm-memory`
//!   and handed to the backend in `SET_MEM_TABLE`; guest physical address
//!   0 is the start of the memfd. It holds both queues' rings, one
//!   transmit slot and indirect table per transmit descriptor, and one
//!   receive buffer per receive descriptor.
//! - **queues** ([`ring`]): split virtqueues driven from the driver side,
//!   `EVENT_IDX` honoured both ways (kicks only when the device asked,
//!   notifications asked for only while waiting).
//! - **transmit** ([`VirtioUser::send`]): the `virtio_net_hdr_v1` and the
//!   frame are copied into the chain's slot, header first; descriptor `i`
//!   either points at the slot ([`DescLayout::Direct`]: header and frame
//!   in one buffer) or at indirect table `i` ([`DescLayout::Indirect`]:
//!   one descriptor for the header, one per frame part).
//! - **receive** ([`VirtioUser::recv`]): every receive descriptor is
//!   posted at start and posted again as soon as its bytes are copied out;
//!   with `MRG_RXBUF` a frame spans `num_buffers` of them.
//! - **headers**: the packet model's [`VirtioNetHdr`] (the code TAP and
//!   the vhost-user port use): [`VirtioUser::send_meta`] exports an
//!   [`OffloadMeta`], [`RxFrame::meta`] imports with the kernel's validation.
//!
//! Nothing the device writes can make this code panic: used elements are
//! checked against what was made available ([`RingFault`]).
//!
//! No per-frame heap allocation: slots, tables and buffers are in the
//! shared memory, the free list is allocated once, frames are copied out
//! into the caller's buffer.

pub mod memory;
pub mod ring;

use crate::device::vhost_user::features as vf;
use crate::io::tx_policy::{TxForm, TxStrategy};
use memory::{GuestMem, Layout};
use ring::{DESC_F_INDIRECT, DESC_F_WRITE, DescriptorWrite, DriverRing, RingFault};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;
use superpacket::csum::complete_partial;
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, ImportOptions, VirtioHdrError, VirtioNetHdr};
use superpacket::packet::{ChecksumState, OffloadMeta};
use superpacket::wire::Medium;
use vhost::vhost_user::message::{VhostUserHeaderFlag, VhostUserProtocolFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{Address, Bytes, GuestAddress};
use vmm_sys_util::eventfd::{EFD_NONBLOCK, EventFd};

/// Receive queue index.
pub const RX_QUEUE: usize = 0;
/// Transmit queue index.
pub const TX_QUEUE: usize = 1;

/// Most frame parts (descriptors after the header) of an indirect chain.
pub const MAX_TX_PARTS: usize = 15;

/// Bytes of one transmit slot and of a receive buffer without
/// `MRG_RXBUF`: a 12-byte header and a 64 KiB IP packet behind an
/// Ethernet header with two VLAN tags, rounded up.
pub const MAX_FRAME_BUF: u32 = 65_600;

/// Receive buffer size with `MRG_RXBUF` (as Linux's virtio_net for a
/// 1500-byte MTU, rounded).
pub const MRG_RX_BUF: u32 = 2048;

/// How the frontend connects and what it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtioUserConfig {
    /// The backend's vhost-user socket.
    pub socket: PathBuf,
    /// Virtio features wanted; what is acked is these and what the device offers.
    pub features: u64,
    /// Descriptors per queue (a power of two, 8..=1024).
    pub queue_size: u16,
    /// Bytes of one receive buffer (default: [`MRG_RX_BUF`] with
    /// `MRG_RXBUF`, else [`MAX_FRAME_BUF`]).
    pub rx_buf_len: Option<u32>,
}

impl VirtioUserConfig {
    /// Every feature this driver knows (one queue pair: no `MQ`).
    pub const ALL_FEATURES: u64 = vf::DEFAULT & !vf::MQ;

    /// Every feature, 256 descriptors per queue.
    pub fn new(socket: impl Into<PathBuf>) -> VirtioUserConfig {
        VirtioUserConfig { socket: socket.into(), features: Self::ALL_FEATURES, queue_size: 256, rx_buf_len: None }
    }

    /// These options asking for `features`.
    pub fn with_features(self, features: u64) -> VirtioUserConfig {
        VirtioUserConfig { features, ..self }
    }
}

/// Why the frontend failed.
#[derive(Debug, thiserror::Error)]
pub enum VirtioUserError {
    /// The options are invalid.
    #[error("virtio-user: {0}")]
    Config(String),
    /// The socket, the memfd or an eventfd failed.
    #[error("virtio-user {what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A vhost-user request failed or was refused.
    #[error("virtio-user {what}: {detail}")]
    Protocol {
        /// The request.
        what: &'static str,
        /// The error the `vhost` crate returned.
        detail: String,
    },
    /// Asked for something the negotiated features do not allow.
    #[error("virtio-user: {0} was not negotiated")]
    NotNegotiated(&'static str),
    /// Every transmit descriptor is still at the device.
    #[error("virtio-user: transmit queue full")]
    TxFull,
    /// The frame does not fit a transmit slot, or has too many parts.
    #[error("virtio-user: frame of {len} bytes in {parts} parts does not fit a transmit slot")]
    TxTooBig {
        /// Frame bytes.
        len: usize,
        /// Parts given.
        parts: usize,
    },
    /// A received frame did not fit the caller's buffer (it is consumed).
    #[error("virtio-user: received frame of {len} bytes, buffer of {room}")]
    RxTooBig {
        /// Frame bytes.
        len: usize,
        /// The caller's buffer.
        room: usize,
    },
    /// The header of a frame to send cannot be expressed, or a received
    /// one does not parse.
    #[error("virtio-user: {0}")]
    Header(#[from] VirtioHdrError),
    /// The device broke a ring.
    #[error("virtio-user: device fault {}", .0.reason())]
    Ring(RingFault),
}

impl From<RingFault> for VirtioUserError {
    fn from(f: RingFault) -> Self {
        VirtioUserError::Ring(f)
    }
}

fn protocol(what: &'static str) -> impl FnOnce(vhost::Error) -> VirtioUserError {
    move |e| VirtioUserError::Protocol { what, detail: e.to_string() }
}

/// How a transmitted frame's chain is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescLayout {
    /// One descriptor: header and frame contiguous in the slot.
    Direct,
    /// One descriptor pointing at an indirect table: the header, then one
    /// descriptor per frame part (needs `INDIRECT_DESC`).
    Indirect,
}

/// A frame taken from the receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxFrame {
    /// Its `virtio_net_hdr` as the device wrote it.
    pub hdr: VirtioNetHdr,
    /// Frame bytes copied into the caller's buffer (header excluded).
    pub len: usize,
    /// Receive buffers it spanned.
    pub buffers: u16,
}

impl RxFrame {
    /// The header imported with the kernel's validation (the TAP's code).
    ///
    /// # Errors
    /// The header is refused for `frame` (its first [`RxFrame::len`] bytes).
    pub fn meta(&self, frame: &[u8]) -> Result<OffloadMeta, VirtioHdrError> {
        self.hdr.to_meta(&frame[..self.len.min(frame.len())], &ImportOptions::default())
    }
}

/// Counters of one frontend.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct VirtioUserStats {
    /// Frames sent.
    pub tx_frames: u64,
    /// ... of which in one direct descriptor.
    pub tx_direct: u64,
    /// ... of which through an indirect table.
    pub tx_indirect: u64,
    /// ... of which superpackets (a GSO type in the header).
    pub tx_superpackets: u64,
    /// Kicks of the transmit queue (the device asked for them).
    pub tx_kicks: u64,
    /// Frames received.
    pub rx_frames: u64,
    /// Receive buffers they spanned.
    pub rx_buffers: u64,
    /// ... of which superpackets.
    pub rx_superpackets: u64,
    /// Kicks of the receive queue (buffers posted again).
    pub rx_kicks: u64,
    /// Notifications waited for and received.
    pub rx_wakeups: u64,
}

/// A virtio-net device driven over vhost-user (see the module documentation).
pub struct VirtioUser {
    /// The vhost-user connection: held so the device lives; the backend
    /// ends the device when it closes.
    _frontend: Frontend,
    mem: GuestMem,
    layout: Layout,
    acked: u64,
    hdr_layout: HdrLayout,
    rx: DriverRing,
    tx: DriverRing,
    kicks: [EventFd; 2],
    calls: [EventFd; 2],
    /// Transmit descriptors (= slots) not at the device.
    tx_free: Vec<u16>,
    /// Which transmit descriptors are at the device.
    tx_busy: Vec<bool>,
    /// Which receive descriptors are at the device.
    rx_posted: Vec<bool>,
    stats: VirtioUserStats,
}

impl std::fmt::Debug for VirtioUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtioUser").field("acked", &format_args!("{:#x}", self.acked)).finish_non_exhaustive()
    }
}

impl VirtioUser {
    /// Connects to the backend on `cfg.socket`, negotiates, shares the
    /// memory, sets both queues up and posts every receive buffer.
    ///
    /// # Errors
    /// Invalid options, the socket, the memfd or any vhost-user request failing.
    pub fn connect(cfg: &VirtioUserConfig) -> Result<VirtioUser, VirtioUserError> {
        let size = cfg.queue_size;
        if !(8..=1024).contains(&size) || !size.is_power_of_two() {
            return Err(VirtioUserError::Config(format!("queue size {size} is not a power of two in 8..=1024")));
        }
        let mut frontend = Frontend::connect(&cfg.socket, 2).map_err(protocol("connect"))?;
        frontend.set_owner().map_err(protocol("SET_OWNER"))?;
        let offered = frontend.get_features().map_err(protocol("GET_FEATURES"))?;
        let mut acked = cfg.features & offered & !(vf::MQ | vf::VHOST_USER_F_PROTOCOL_FEATURES);
        let with_protocol = offered & vf::VHOST_USER_F_PROTOCOL_FEATURES != 0;
        if with_protocol {
            let pf = frontend.get_protocol_features().map_err(protocol("GET_PROTOCOL_FEATURES"))?;
            let want = pf & VhostUserProtocolFeatures::REPLY_ACK;
            frontend.set_protocol_features(want).map_err(protocol("SET_PROTOCOL_FEATURES"))?;
            if want.contains(VhostUserProtocolFeatures::REPLY_ACK) {
                frontend.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
            }
            acked |= vf::VHOST_USER_F_PROTOCOL_FEATURES;
        }
        frontend.set_features(acked).map_err(protocol("SET_FEATURES"))?;
        let acked = acked & !vf::VHOST_USER_F_PROTOCOL_FEATURES;
        let mrg = acked & vf::MRG_RXBUF != 0;
        let rx_buf_len = cfg.rx_buf_len.unwrap_or(if mrg { MRG_RX_BUF } else { MAX_FRAME_BUF });
        let layout = Layout::new(size, rx_buf_len)?;
        let mem = GuestMem::create("superpacket-virtio-user", layout.total)?;
        let region = mem
            .region()
            .ok_or_else(|| VirtioUserError::Config("guest memory without a region".into()))
            .and_then(|r| {
                VhostUserMemoryRegionInfo::from_guest_region(r)
                    .map_err(|e| VirtioUserError::Protocol { what: "memory region", detail: e.to_string() })
            })?;
        frontend.set_mem_table(&[region]).map_err(protocol("SET_MEM_TABLE"))?;
        let event_idx = acked & vf::EVENT_IDX != 0;
        let rings = [layout.ring(RX_QUEUE), layout.ring(TX_QUEUE)];
        let ev = |what| EventFd::new(EFD_NONBLOCK).map_err(|source| VirtioUserError::Io { what, source });
        let kicks = [ev("kick eventfd")?, ev("kick eventfd")?];
        let calls = [ev("call eventfd")?, ev("call eventfd")?];
        for (q, r) in rings.iter().enumerate() {
            frontend.set_vring_num(q, size).map_err(protocol("SET_VRING_NUM"))?;
            let va = |a: GuestAddress| mem.host_address(a);
            let addrs = VringConfigData {
                queue_max_size: size,
                queue_size: size,
                flags: 0,
                desc_table_addr: va(r.desc)?,
                used_ring_addr: va(r.used)?,
                avail_ring_addr: va(r.avail)?,
                log_addr: None,
            };
            frontend.set_vring_addr(q, &addrs).map_err(protocol("SET_VRING_ADDR"))?;
            frontend.set_vring_base(q, 0).map_err(protocol("SET_VRING_BASE"))?;
            frontend.set_vring_call(q, &calls[q]).map_err(protocol("SET_VRING_CALL"))?;
            frontend.set_vring_kick(q, &kicks[q]).map_err(protocol("SET_VRING_KICK"))?;
            if with_protocol {
                frontend.set_vring_enable(q, true).map_err(protocol("SET_VRING_ENABLE"))?;
            }
        }
        let [mut rx, mut tx] = rings;
        rx.event_idx = event_idx;
        tx.event_idx = event_idx;
        let n = usize::from(size);
        let mut dev = VirtioUser {
            _frontend: frontend,
            mem,
            layout,
            acked,
            hdr_layout: if acked & (vf::VERSION_1 | vf::MRG_RXBUF) != 0 {
                HdrLayout::MrgRxbuf
            } else {
                HdrLayout::Basic
            },
            rx,
            tx,
            kicks,
            calls,
            tx_free: (0..size).rev().collect(),
            tx_busy: vec![false; n],
            rx_posted: vec![false; n],
            stats: VirtioUserStats::default(),
        };
        dev.tx.disable_interrupts(dev.mem.get())?;
        dev.rx.disable_interrupts(dev.mem.get())?;
        dev.post_all_rx()?;
        Ok(dev)
    }

    /// Virtio features acked (`VHOST_USER_F_PROTOCOL_FEATURES` excluded).
    pub fn acked_features(&self) -> u64 {
        self.acked
    }

    /// Bytes of the `virtio_net_hdr` on this device (12 or 10).
    pub fn hdr_len(&self) -> usize {
        self.hdr_layout.len()
    }

    /// The counters.
    pub fn stats(&self) -> VirtioUserStats {
        self.stats
    }

    /// Most frame bytes one transmitted frame may have.
    pub fn max_tx_frame(&self) -> usize {
        self.layout.tx_slot as usize - self.hdr_len()
    }

    fn post_all_rx(&mut self) -> Result<(), VirtioUserError> {
        let m = self.mem.get();
        for i in 0..self.rx.size {
            let buf = self.layout.rx_buf(i);
            DriverRing::write_desc(
                m,
                self.rx.desc,
                i,
                DescriptorWrite::new(buf, self.layout.rx_buf_len, DESC_F_WRITE),
            )?;
            self.rx.push_avail(m, i)?;
            self.rx_posted[usize::from(i)] = true;
        }
        if self.rx.publish(m)? {
            self.kick(RX_QUEUE);
        }
        Ok(())
    }

    fn kick(&mut self, q: usize) {
        // A failed eventfd write only means the counter is saturated: the
        // device has a kick pending anyway.
        let _ = self.kicks[q].write(1);
        if q == RX_QUEUE {
            self.stats.rx_kicks += 1;
        } else {
            self.stats.tx_kicks += 1;
        }
    }

    /// Takes back transmit descriptors the device has used.
    ///
    /// # Errors
    /// The device broke the used ring.
    pub fn reclaim_tx(&mut self) -> Result<usize, VirtioUserError> {
        let m = self.mem.get();
        let mut n = 0;
        while let Some((id, _)) = self.tx.pop_used(m)? {
            let busy = &mut self.tx_busy[usize::from(id)];
            if !*busy {
                return Err(RingFault::UsedId.into());
            }
            *busy = false;
            self.tx_free.push(id);
            n += 1;
        }
        if n > 0 {
            self.tx.disable_interrupts(m)?;
        }
        Ok(n)
    }

    /// Sends `frame` (its `parts`, in order) with header `hdr`, in the
    /// descriptor `layout`; with `more`, the chain is made available but
    /// the device is not told yet ([`VirtioUser::flush_tx`] or the next
    /// send without `more` does).
    ///
    /// # Errors
    /// [`VirtioUserError::TxFull`] (every descriptor at the device, after
    /// taking back the used ones), [`VirtioUserError::TxTooBig`],
    /// [`VirtioUserError::NotNegotiated`] (indirect without
    /// `INDIRECT_DESC`), or a device fault.
    pub fn send(
        &mut self,
        hdr: &VirtioNetHdr,
        parts: &[&[u8]],
        layout: DescLayout,
        more: bool,
    ) -> Result<(), VirtioUserError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let hdr_len = self.hdr_len();
        if len > self.max_tx_frame() || parts.len() > MAX_TX_PARTS {
            return Err(VirtioUserError::TxTooBig { len, parts: parts.len() });
        }
        if layout == DescLayout::Indirect && self.acked & vf::INDIRECT_DESC == 0 {
            return Err(VirtioUserError::NotNegotiated("INDIRECT_DESC"));
        }
        if self.tx_free.is_empty() {
            self.reclaim_tx()?;
        }
        let Some(&id) = self.tx_free.last() else { return Err(VirtioUserError::TxFull) };
        let mut hb = [0u8; 12];
        hdr.emit(&mut hb, self.hdr_layout, HdrByteOrder::Little)?;
        let m = self.mem.get();
        let slot = self.layout.tx_slot(id);
        let at = |off: usize| slot.checked_add(off as u64).ok_or(RingFault::Address);
        m.write_slice(&hb[..hdr_len], slot).map_err(|_| RingFault::Address)?;
        let mut off = hdr_len;
        for p in parts {
            m.write_slice(p, at(off)?).map_err(|_| RingFault::Address)?;
            off += p.len();
        }
        match layout {
            DescLayout::Direct => {
                DriverRing::write_desc(m, self.tx.desc, id, DescriptorWrite::new(slot, off as u32, 0))?;
                self.stats.tx_direct += 1;
            }
            DescLayout::Indirect => {
                let table = self.layout.tx_table(id);
                let nonempty = parts.iter().filter(|p| !p.is_empty()).count();
                let mut i = 0u16;
                let mut next = |d: DescriptorWrite, last: bool| -> Result<(), RingFault> {
                    let d = if last { d } else { d.then(i + 1) };
                    DriverRing::write_desc(m, table, i, d)?;
                    i += 1;
                    Ok(())
                };
                next(DescriptorWrite::new(slot, hdr_len as u32, 0), nonempty == 0)?;
                let mut off = hdr_len;
                let mut left = nonempty;
                for p in parts.iter().filter(|p| !p.is_empty()) {
                    left -= 1;
                    next(DescriptorWrite::new(at(off)?, p.len() as u32, 0), left == 0)?;
                    off += p.len();
                }
                let table_len = ring::DESC_SIZE as u32 * u32::from(i);
                DriverRing::write_desc(m, self.tx.desc, id, DescriptorWrite::new(table, table_len, DESC_F_INDIRECT))?;
                self.stats.tx_indirect += 1;
            }
        }
        self.tx.push_avail(m, id)?;
        self.tx_free.pop();
        self.tx_busy[usize::from(id)] = true;
        self.stats.tx_frames += 1;
        if hdr.gso_type != 0 {
            self.stats.tx_superpackets += 1;
        }
        if !more {
            self.flush_tx()?;
        }
        Ok(())
    }

    /// [`VirtioUser::send`] of one contiguous `frame` whose offloads are
    /// `meta` (the header exported as for a TAP).
    ///
    /// # Errors
    /// As [`VirtioUser::send`]; the header cannot express `meta`.
    pub fn send_meta(
        &mut self,
        meta: &OffloadMeta,
        frame: &[u8],
        layout: DescLayout,
        more: bool,
    ) -> Result<(), VirtioUserError> {
        let hdr = VirtioNetHdr::from_meta_as(meta, frame, Medium::Ethernet, false)?;
        self.send(&hdr, &[frame], layout, more)
    }

    /// Sends `frame` (its offloads `meta`) in the form the transmit policy
    /// `strategy` picks ([`crate::io::tx_policy`]); returns that form.
    ///
    /// | strategy | superpacket, or batched (`more`) | lone packet, partial checksum |
    /// |---|---|---|
    /// | `SwCsumDirect` | offload, indirect | checksum completed here (in `frame`), **direct** |
    /// | `OffloadIndirect` | offload, indirect | offload, indirect |
    /// | `DirectNoCsum` | offload, direct | offload, direct |
    ///
    /// "Indirect" is [`DescLayout::Indirect`] (the `virtio_net_hdr` in a
    /// descriptor of its own, behind the table) when `INDIRECT_DESC` was
    /// negotiated, else direct. A frame without a partial checksum goes
    /// direct as it is; without `CSUM` every checksum is completed here.
    ///
    /// # Errors
    /// As [`VirtioUser::send_meta`]; a partial checksum outside the frame.
    pub fn send_with(
        &mut self,
        strategy: TxStrategy,
        frame: &mut [u8],
        meta: &OffloadMeta,
        more: bool,
    ) -> Result<TxForm, VirtioUserError> {
        let ChecksumState::Partial { start, offset } = meta.csum else {
            self.send_meta(meta, frame, DescLayout::Direct, more)?;
            return Ok(TxForm::Direct);
        };
        let indirect = self.acked & vf::INDIRECT_DESC != 0;
        let offload = if indirect {
            (DescLayout::Indirect, TxForm::IndirectOffload)
        } else {
            (DescLayout::Direct, TxForm::DirectOffload)
        };
        let lone = !meta.is_gso() && !more;
        let (layout, form) = match strategy {
            _ if !meta.is_gso() && self.acked & vf::CSUM == 0 => (DescLayout::Direct, TxForm::DirectSwCsum),
            TxStrategy::SwCsumDirect if lone => (DescLayout::Direct, TxForm::DirectSwCsum),
            TxStrategy::SwCsumDirect | TxStrategy::OffloadIndirect => offload,
            TxStrategy::DirectNoCsum => (DescLayout::Direct, TxForm::DirectOffload),
        };
        if form == TxForm::DirectSwCsum {
            // A UDP checksum that sums to zero is sent as 0xffff (RFC 768).
            complete_partial(frame, usize::from(start), usize::from(offset), offset == 6)
                .ok_or(VirtioHdrError::ChecksumOutsideFrame { start, offset, frame_len: frame.len() })?;
            let done = OffloadMeta { csum: ChecksumState::None, ..*meta };
            self.send_meta(&done, frame, layout, more)?;
        } else {
            self.send_meta(meta, frame, layout, more)?;
        }
        Ok(form)
    }

    /// Makes the chains sent with `more` visible and kicks the device if it asked.
    ///
    /// # Errors
    /// A device fault.
    pub fn flush_tx(&mut self) -> Result<(), VirtioUserError> {
        if self.tx.publish(self.mem.get())? {
            self.kick(TX_QUEUE);
        }
        Ok(())
    }

    /// The next received frame, copied into `out` (header not included);
    /// `None` when the device has none ready. Its buffers are posted again.
    ///
    /// # Errors
    /// [`VirtioUserError::RxTooBig`] (the frame is consumed), a header
    /// that does not parse, or a device fault.
    pub fn recv(&mut self, out: &mut [u8]) -> Result<Option<RxFrame>, VirtioUserError> {
        let m = self.mem.get();
        let pending = self.rx.used_pending(m)?;
        if pending == 0 {
            return Ok(None);
        }
        let hdr_len = self.hdr_len();
        let Some((first, first_len)) = self.rx.peek_used(m)? else { return Ok(None) };
        let mut hb = [0u8; 12];
        m.read_slice(&mut hb[..hdr_len], self.layout.rx_buf(first)).map_err(|_| RingFault::Address)?;
        let hdr = VirtioNetHdr::parse(&hb, self.hdr_layout, HdrByteOrder::Little)?;
        let buffers = if self.acked & vf::MRG_RXBUF != 0 { hdr.num_buffers } else { 1 };
        if buffers == 0 || buffers > self.rx.size {
            return Err(RingFault::NumBuffers.into());
        }
        if (first_len as usize) < hdr_len {
            return Err(RingFault::UsedLen.into());
        }
        if pending < buffers {
            // The device publishes a frame's buffers together (virtio 1.2,
            // 5.1.6.4.2); the rest is on its way.
            return Ok(None);
        }
        let (mut len, mut fits) = (0usize, true);
        for k in 0..buffers {
            let Some((id, used_len)) = self.rx.pop_used(m)? else { return Err(RingFault::UsedIndex.into()) };
            let posted = &mut self.rx_posted[usize::from(id)];
            if !*posted || (k == 0 && id != first) {
                return Err(RingFault::UsedId.into());
            }
            if used_len > self.layout.rx_buf_len {
                return Err(RingFault::UsedLen.into());
            }
            *posted = false;
            let skip = if k == 0 { hdr_len } else { 0 };
            let n = (used_len as usize).saturating_sub(skip);
            let src = self.layout.rx_buf(id).checked_add(skip as u64).ok_or(RingFault::Address)?;
            if fits && len + n <= out.len() {
                m.read_slice(&mut out[len..len + n], src).map_err(|_| RingFault::Address)?;
            } else {
                fits = false;
            }
            len += n;
            // The bytes are out: the buffer goes back to the device.
            self.rx.push_avail(m, id)?;
            self.rx_posted[usize::from(id)] = true;
        }
        if self.rx.publish(m)? {
            self.kick(RX_QUEUE);
        }
        if !fits {
            return Err(VirtioUserError::RxTooBig { len, room: out.len() });
        }
        self.stats.rx_frames += 1;
        self.stats.rx_buffers += u64::from(buffers);
        if hdr.gso_type != 0 {
            self.stats.rx_superpackets += 1;
        }
        Ok(Some(RxFrame { hdr, len, buffers }))
    }

    /// Waits (at most `timeout`) until the device has used a receive
    /// buffer; true if one is ready.
    ///
    /// # Errors
    /// A device fault, or `poll` failing.
    pub fn wait_rx(&mut self, timeout: Duration) -> Result<bool, VirtioUserError> {
        let m = self.mem.get();
        if self.rx.used_pending(m)? > 0 {
            return Ok(true);
        }
        self.rx.enable_interrupts(m)?;
        if self.rx.used_pending(m)? == 0 {
            // SAFETY: the eventfd is owned by `self` and outlives this borrow.
            let fd = unsafe { BorrowedFd::borrow_raw(self.calls[RX_QUEUE].as_raw_fd()) };
            let readable = crate::io::sys::poll_readable(fd, timeout, "virtio-user call eventfd")
                .map_err(|e| VirtioUserError::Io { what: "poll", source: std::io::Error::other(e.to_string()) })?;
            if readable && self.calls[RX_QUEUE].read().is_ok() {
                self.stats.rx_wakeups += 1;
            }
        }
        self.rx.disable_interrupts(m)?;
        Ok(self.rx.used_pending(m)? > 0)
    }

    /// Bytes of the memory shared with the device.
    pub fn memory_len(&self) -> usize {
        self.layout.total
    }
}

/// Whether `path` looks like a listening vhost-user socket (it exists and
/// is a socket).
pub fn socket_ready(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests;
