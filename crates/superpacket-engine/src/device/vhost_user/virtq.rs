//! The vhost-user port's data path on one split virtqueue: taking a frame
//! from a transmit queue ([`pop_tx`]) and placing one in a receive queue
//! ([`push_rx`], with `VIRTIO_NET_F_MRG_RXBUF` spread over several chains).
//!
//! Everything here reads the guest's memory through `vm-memory`
//! ([`GuestMemory`]: bounds-checked guest addresses, volatile copies); the
//! data queues' chains are followed by the port's own walk ([`super::ring`]:
//! rings resolved to host slices and kept by the port between calls, the
//! available index loaded once per burst), `virtio-queue`'s [`Queue`] keeping the queue's state
//! (`next_avail`, `next_used`, addresses) that the protocol side sets and
//! reads. Nothing a guest writes can
//! make these functions panic: a ring or chain the guest broke is reported
//! as a [`QueueFault`], after which the caller stops the queue (the
//! device's "needs reset" state: nothing more is taken from or given to
//! it until the guest resets the device or reconnects).
//!
//! Invariants the callers rely on:
//!
//! - a chain is given back to the guest (used ring) only once its bytes
//!   were copied: the guest may reuse the buffer the moment it sees it used;
//! - [`push_rx`] either places the whole frame (and returns the chains it
//!   used, already in the used ring) or gives every chain it took back to
//!   the available ring (`next_avail` rewound): no half-written frame is
//!   ever published.
//! - [`take_frame`] and [`push_rx`] write used elements but leave the used
//!   index to the caller ([`publish_used_idx`], once per burst, before
//!   notifying the guest), as DPDK's vhost does: the index shares a cache
//!   line the guest polls from another CPU, and a store to it per frame
//!   moved that line across CPUs per frame. The index only ever moves to a
//!   frame boundary, so every buffer of a frame becomes used at once.

use super::guest_copy::{read_guest, write_guest, write_rx_frame, write_slice};
use super::held::{HELD_HEAD, HELD_MIN, HeldFrame, MAX_HELD_BUFS};
use super::ring::{AvailCursor, GuestMem, Near, Rings};
use std::sync::atomic::Ordering;
use superpacket::packet::virtio::{F_NEEDS_CSUM, HdrByteOrder, HdrLayout, ImportOptions, VirtioNetHdr};
use superpacket::packet::{ChecksumState, Packet};
use superpacket::wire::Medium;
use virtio_queue::{Queue, QueueOwnedT, QueueT};
use vm_memory::{
    Address, Bytes, GuestAddress, GuestMemory, GuestMemoryBackend, GuestMemoryRegion, VolatileMemory, VolatileSlice,
};

/// Most chains one received frame may span (`MRG_RXBUF`): a 64 KiB
/// superpacket in 1536-byte buffers needs 44.
pub const MAX_RX_CHAINS: usize = 128;

/// Most writable descriptors of one receive chain that are used; the rest
/// of a longer chain is left unwritten (its capacity is not counted), so
/// such a chain can only be the last of a frame (virtio wants every chain
/// but the last filled to its full length): a frame that would need more
/// is refused ([`RxRefused::TooBig`]).
const MAX_RX_DESCS: usize = 64;

/// Something the guest did to a queue that stops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueFault {
    /// The available index is more than a queue size ahead of the device.
    AvailIndex,
    /// A descriptor chain that loops, names a descriptor outside its table,
    /// nests indirect tables or is empty.
    Chain,
    /// A ring, table or buffer address outside the guest's memory.
    Address,
    /// A device-writable buffer in a transmit chain, or a readable one in a
    /// receive chain.
    Direction,
}

impl QueueFault {
    /// The drop reason the port counts (`vhost-bad-*`).
    pub fn reason(self) -> &'static str {
        match self {
            QueueFault::AvailIndex => "vhost-bad-avail-idx",
            QueueFault::Chain => "vhost-bad-chain",
            QueueFault::Address => "vhost-bad-address",
            QueueFault::Direction => "vhost-bad-direction",
        }
    }
}

/// One chain taken from a transmit queue by [`pop_tx`]: its buffers are in
/// the [`TxScratch`], nothing is copied yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxChain {
    /// Head descriptor index (for the used ring).
    pub head: u16,
    /// Bytes in the chain's buffers (all of them, recorded or not).
    pub len: usize,
    /// The chain is longer than [`MAX_TX_CHAIN`] bytes or has more than
    /// [`MAX_TX_BUFFERS`] non-empty buffers: not all of it was recorded,
    /// and its frame is dropped.
    pub truncated: bool,
    /// Descriptors in the chain.
    pub descs: u16,
}

/// Bytes of one chain taken from a transmit queue: a 12-byte header and a
/// 64 KiB IP packet behind an Ethernet header with two VLAN tags.
pub const MAX_TX_CHAIN: usize = 12 + 65_535 + 22;

/// Most non-empty buffers of one transmit chain that are recorded (the
/// largest queue: virtio 1.2, 2.7.5.3.1, a driver must not make a chain
/// longer than the queue size).
pub const MAX_TX_BUFFERS: usize = 1024;

/// The buffers of the chain [`pop_tx`] took last, kept between calls so
/// that taking a frame allocates nothing.
#[derive(Debug)]
pub struct TxScratch {
    /// (guest address, length) of each non-empty buffer, in chain order;
    /// every one was found inside guest memory.
    bufs: Vec<(GuestAddress, u32)>,
    /// Where [`take_frame_holding`] has [`take_frame_into`] put its one
    /// packet (room for one: no allocation per call).
    one: Vec<Packet>,
    /// The thread's small pool buffers while they are lent
    /// ([`TxScratch::packet`]), else empty.
    small: Vec<Vec<u8>>,
    /// `small` holds the lent list, to be given back
    /// ([`TxScratch::return_pool`]).
    lent: bool,
}

impl TxScratch {
    /// The buffers of the chain taken last.
    pub fn bufs(&self) -> &[(GuestAddress, u32)] {
        &self.bufs
    }

    /// Room for [`MAX_TX_BUFFERS`] buffers.
    pub fn new() -> TxScratch {
        TxScratch {
            bufs: Vec::with_capacity(MAX_TX_BUFFERS),
            one: Vec::with_capacity(1),
            small: Vec::new(),
            lent: false,
        }
    }

    /// Gives the thread's small pool buffers back if a take has them lent
    /// (the first frame of a burst borrows them: [`take_frame_into`]): the
    /// taker of a burst calls it at the burst's end (the list is empty
    /// while they are lent).
    #[inline]
    pub fn return_pool(&mut self) {
        if self.lent {
            self.lent = false;
            superpacket::packet::pool::return_small_buffers(&mut self.small);
        }
    }

    /// A packet for a frame of `len` bytes, as
    /// [`Packet::with_linear_len_pooled`], a small frame's buffer popped
    /// from the thread's list, which the first call borrows whole
    /// ([`superpacket::packet::pool::lend_small_buffers`]: one access to
    /// the list per burst, not one per frame) until
    /// [`TxScratch::return_pool`].
    #[inline(always)]
    fn packet(&mut self, len: usize) -> Packet {
        if !self.lent {
            self.lent = true;
            superpacket::packet::pool::lend_small_buffers(&mut self.small);
        }
        Packet::with_linear_len_from(len, &mut self.small)
    }

    /// Copies the chain's bytes `offset..offset + dst.len()` into `dst`,
    /// straight from guest memory.
    ///
    /// # Errors
    /// [`QueueFault::Address`] if a buffer cannot be read, or the recorded
    /// buffers hold fewer bytes (the caller asks only for what
    /// [`TxChain::len`] counted of a chain that is not truncated).
    pub fn read(&self, mem: &GuestMem, offset: usize, dst: &mut [u8]) -> Result<(), QueueFault> {
        self.read_near(mem, &Near::default(), offset, dst)
    }

    /// [`TxScratch::read`] through the host slices the walk kept in `near`
    /// (in the same call, on the same `mem`) where it has them.
    #[inline(always)]
    fn read_near(&self, mem: &GuestMem, near: &Near<'_>, offset: usize, dst: &mut [u8]) -> Result<(), QueueFault> {
        // A chain of one buffer (a small frame, header and all, as DPDK's
        // virtio-user sends it): one bounds-checked copy.
        if self.bufs.len() == 1
            && let Some(vs) = near.get(0)
        {
            vs.subslice(offset, dst.len()).map_err(|_| QueueFault::Address)?.copy_to(dst);
            return Ok(());
        }
        self.read_bufs(mem, near, offset, dst)
    }

    /// [`TxScratch::read_near`] buffer by buffer.
    fn read_bufs(
        &self,
        mem: &GuestMem,
        near: &Near<'_>,
        mut offset: usize,
        mut dst: &mut [u8],
    ) -> Result<(), QueueFault> {
        for (i, &(addr, len)) in self.bufs.iter().enumerate() {
            if dst.is_empty() {
                return Ok(());
            }
            let len = len as usize;
            if offset >= len {
                offset -= len;
                continue;
            }
            let n = (len - offset).min(dst.len());
            let (now, rest) = dst.split_at_mut(n);
            match near.get(i) {
                Some(vs) => {
                    let part = vs.subslice(offset, n).map_err(|_| QueueFault::Address)?;
                    part.copy_to(now);
                }
                None => read_guest(mem, addr.checked_add(offset as u64).ok_or(QueueFault::Address)?, now)?,
            }
            dst = rest;
            offset = 0;
        }
        if dst.is_empty() { Ok(()) } else { Err(QueueFault::Address) }
    }
}

impl Default for TxScratch {
    fn default() -> TxScratch {
        TxScratch::new()
    }
}

/// The next chain's head of `q`, or `None` when the guest made none
/// available.
///
/// # Errors
/// [`QueueFault::AvailIndex`] (more announced than the queue holds) or
/// [`QueueFault::Address`] (a ring outside guest memory).
pub fn next_head<'m, M: GuestMemory>(
    q: &mut Queue,
    mem: &'m M,
) -> Result<Option<virtio_queue::DescriptorChain<&'m M>>, QueueFault> {
    let avail = q.avail_idx(mem, Ordering::Acquire).map_err(|_| QueueFault::Address)?;
    if avail.0 == q.next_avail() {
        return Ok(None);
    }
    let mut it = q.iter(mem).map_err(|e| match e {
        virtio_queue::Error::InvalidAvailRingIndex => QueueFault::AvailIndex,
        _ => QueueFault::Address,
    })?;
    // Entries are announced but the ring entry cannot be read.
    it.next().map(Some).ok_or(QueueFault::Address)
}

/// Takes the next chain of transmit queue `q` and records its buffers in
/// `scratch` (each checked to lie inside guest memory; nothing copied);
/// `Ok(None)` when the guest made no chain available. The chain is not yet
/// in the used ring: the caller copies what it needs
/// ([`TxScratch::read`]) and then adds it ([`complete`]).
///
/// # Errors
/// A [`QueueFault`]: the caller stops the queue.
pub fn pop_tx(q: &mut Queue, mem: &GuestMem, scratch: &mut TxScratch) -> Result<Option<TxChain>, QueueFault> {
    pop_tx_at(&Rings::new(q, mem)?, q, &mut AvailCursor::default(), scratch, &mut Near::default())
}

/// [`pop_tx`] on rings already resolved, the available index loaded
/// through `cursor` (once per burst: see [`AvailCursor`]).
fn pop_tx_at<'m>(
    rings: &Rings<'m>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut TxScratch,
    near: &mut Near<'m>,
) -> Result<Option<TxChain>, QueueFault> {
    let Some(head) = rings.next_head(q, cursor)? else { return Ok(None) };
    rings.prefetch_next(cursor, false);
    scratch.bufs.clear();
    // One readable descriptor (every small frame DPDK's virtio-user
    // sends): what the walk below would record, without it.
    if let Some(d) = rings.lone(head)
        && !d.is_write_only()
        && d.len() > 0
        && d.len() as usize <= MAX_TX_CHAIN
        && near.record(rings, 0, d.addr(), d.len() as usize)
    {
        scratch.bufs.push((d.addr(), d.len()));
        return Ok(Some(TxChain { head, len: d.len() as usize, truncated: false, descs: 1 }));
    }
    let (mut len, mut truncated) = (0usize, false);
    let descs = rings.walk(head, |d| {
        if d.is_write_only() {
            return Err(QueueFault::Direction);
        }
        let n = d.len() as usize;
        if n == 0 {
            return Ok(());
        }
        // Every buffer must lie inside guest memory, recorded or not.
        if !near.record(rings, scratch.bufs.len(), d.addr(), n) {
            return Err(QueueFault::Address);
        }
        len = len.saturating_add(n);
        if len > MAX_TX_CHAIN || scratch.bufs.len() == MAX_TX_BUFFERS {
            truncated = true;
        } else {
            scratch.bufs.push((d.addr(), d.len()));
        }
        Ok(())
    })?;
    Ok(Some(TxChain { head, len, truncated, descs }))
}

/// A frame the guest sent, as [`take_frame`] imported it.
#[derive(Debug)]
pub struct GuestFrame {
    /// The frame, its `virtio_net_hdr` imported into `meta`.
    pub packet: Packet,
    /// The header asked for a partial checksum (`NEEDS_CSUM`).
    pub csum_partial: bool,
}

/// What [`take_frame`] made of one chain (already given back to the guest).
#[derive(Debug)]
pub struct TakenChain {
    /// Descriptors in the chain.
    pub descs: u16,
    /// The frame, or why it is dropped: a chain of more than
    /// [`MAX_TX_CHAIN`] bytes or [`MAX_TX_BUFFERS`] buffers
    /// (`vhost-tx-too-long`), a header the kernel's validation refuses
    /// (the TAP's reasons).
    pub frame: Result<GuestFrame, &'static str>,
}

/// Takes the next chain of transmit queue `q` as one frame behind a
/// `hdr_len`-byte `virtio_net_hdr` (12: `virtio_net_hdr_v1` or with
/// `num_buffers`; 10: the legacy one), and gives the chain back (a used
/// element, 0 bytes written; the used index is the caller's to publish,
/// [`publish_used_idx`]) once its bytes are copied. `Ok(None)` when the
/// guest made no chain available.
///
/// One copy: the header is read first and parsed; only a header that
/// parses gets a packet, and the frame is copied from the guest's buffers
/// straight into it ([`Packet::with_linear_len_pooled`]: a pool buffer for
/// a superpacket). The header is then imported with the kernel's
/// validation against the frame ([`VirtioNetHdr::to_meta`], the same code
/// as a TAP's); a refused one drops the packet.
///
/// # Errors
/// A [`QueueFault`]: the caller stops the queue.
pub fn take_frame(
    q: &mut Queue,
    mem: &GuestMem,
    scratch: &mut TxScratch,
    hdr_len: usize,
) -> Result<Option<TakenChain>, QueueFault> {
    take_frame_at(&Rings::new(q, mem)?, q, &mut AvailCursor::default(), scratch, hdr_len)
}

/// [`take_frame`] on `q`'s rings resolved by the caller (the port keeps
/// them: [`Rings::cached`]), the available index loaded through `cursor`,
/// which the port keeps per queue (once per burst: see [`AvailCursor`]).
///
/// # Errors
/// A [`QueueFault`]: the caller stops the queue.
pub fn take_frame_at(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut TxScratch,
    hdr_len: usize,
) -> Result<Option<TakenChain>, QueueFault> {
    Ok(take_frame_holding(rings, q, cursor, scratch, hdr_len, false)?.map(|(taken, _)| taken))
}

/// A chain [`take_frame_holding`] did not give back: its frame's packet
/// holds only the first [`HELD_HEAD`] bytes, the rest (`len` bytes from
/// chain byte `skip`) is still in the buffers recorded in the
/// [`TxScratch`] ([`TxScratch::bufs`]). The caller gives the chain back
/// once that is copied ([`super::held::HeldFrame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldChain {
    /// Head descriptor index (for the used ring).
    pub head: u16,
    /// Chain bytes before the held ones.
    pub skip: usize,
    /// Held bytes: the packet's last `len`.
    pub len: usize,
}

/// [`take_frame_at`], and with `hold` a frame of at least [`HELD_MIN`]
/// bytes in at most [`MAX_HELD_BUFS`] buffers whose offload header lies in
/// its first [`HELD_HEAD`] bytes is taken with only those bytes copied: its
/// chain is not given back but returned as a [`HeldChain`].
///
/// # Errors
/// A [`QueueFault`]: the caller stops the queue.
pub fn take_frame_holding(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut TxScratch,
    hdr_len: usize,
    hold: bool,
) -> Result<Option<(TakenChain, Option<HeldChain>)>, QueueFault> {
    let mut one = std::mem::take(&mut scratch.one);
    let taken = take_frame_into(rings, q, cursor, scratch, hdr_len, hold, &mut one);
    scratch.return_pool();
    let packet = one.pop();
    scratch.one = one;
    let Some(taken) = taken? else { return Ok(None) };
    let (frame, held) = match (taken.frame, packet) {
        (Ok(f), Some(packet)) => (Ok(GuestFrame { packet, csum_partial: f.csum_partial }), f.held),
        (Ok(_), None) => unreachable!("take_frame_into puts the packet of every frame it takes"),
        (Err(reason), _) => (Err(reason), None),
    };
    Ok(Some((TakenChain { descs: taken.descs, frame }, held)))
}

/// What [`take_frame_into`] made of one chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// Descriptors in the chain.
    pub descs: u16,
    /// The frame (its packet pushed on the caller's vector), or why it is
    /// dropped, as [`TakenChain::frame`].
    pub frame: Result<TakenFrame, &'static str>,
}

/// A frame [`take_frame_into`] took: its packet is the last of the
/// caller's vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakenFrame {
    /// The header asked for a partial checksum (`NEEDS_CSUM`).
    pub csum_partial: bool,
    /// The chain, not given back, when the frame is held.
    pub held: Option<HeldChain>,
}

/// [`take_frame_holding`] with the frame's packet pushed on `out` (its
/// end: the burst the caller returns), not returned: the packet is built
/// and moved into place once (a packet carried out through results and a
/// burst closure was moved five times, 16 instructions each). The chain is
/// given back (a used element, nothing written) before the return, unless
/// the frame is held, also before a fault is returned. A small frame's
/// buffer comes from the thread's pool buffers `scratch` borrows for a
/// burst: the caller gives them back after its last frame
/// ([`TxScratch::return_pool`]).
///
/// # Errors
/// A [`QueueFault`]: the caller stops the queue.
pub fn take_frame_into(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut TxScratch,
    hdr_len: usize,
    hold: bool,
    out: &mut Vec<Packet>,
) -> Result<Option<Taken>, QueueFault> {
    let mem = rings.mem();
    let mut near = Near::default();
    let Some(chain) = pop_tx_at(rings, q, cursor, scratch, &mut near)? else { return Ok(None) };
    let (head, descs) = (chain.head, chain.descs);
    // One way out, so that the used element is written at one place (every
    // outcome but a held frame gives the chain back, a fault too, before
    // the caller stops the queue); the outcomes carry no packet. One push
    // too: a second push site made the compiler call `Vec::push` (a move
    // of the packet more) at both.
    let taken: Result<Result<TakenFrame, &'static str>, QueueFault> = 'taken: {
        let plain = plain_frame(scratch, &near, &chain, hdr_len);
        let (len, hdr, hold) = match plain {
            Some(src) => (src.len(), None, false),
            None => {
                if chain.truncated {
                    break 'taken Ok(Err("vhost-tx-too-long"));
                }
                let hdr = match read_header(mem, scratch, &near, hdr_len, chain.len) {
                    Ok(Ok(h)) => h,
                    Ok(Err(reason)) => break 'taken Ok(Err(reason)),
                    Err(f) => break 'taken Err(f),
                };
                let hold = hold
                    && chain.len.saturating_sub(hdr_len) >= HELD_MIN
                    && scratch.bufs.len() <= MAX_HELD_BUFS
                    && each_in_one_region(rings, &scratch.bufs)
                    // A header that may reach past the first bytes is never parsed
                    // from them (the packet's buffer is recycled: past them lie
                    // another frame's bytes): such a frame is copied whole.
                    && held_header_fits(&hdr);
                (chain.len - hdr_len, Some(hdr), hold)
            }
        };
        out.push(scratch.packet(len));
        let Some(packet) = out.last_mut() else { unreachable!("just pushed") };
        let lin = packet.linear_mut();
        let Some(hdr) = hdr else {
            // A plain frame (every other one has its header parsed): its
            // bytes, default metadata (see `plain_frame`).
            if let Some(src) = plain {
                src.copy_to(lin);
            }
            break 'taken Ok(Ok(TakenFrame { csum_partial: false, held: None }));
        };
        let n = if hold { HELD_HEAD.min(lin.len()) } else { lin.len() };
        if let Err(f) = scratch.read_near(mem, &near, hdr_len, &mut lin[..n]) {
            out.pop();
            break 'taken Err(f);
        }
        let opts = ImportOptions { medium: Medium::Ethernet, ..ImportOptions::default() };
        match hdr.to_meta(packet.linear(), &opts) {
            Ok(meta) => packet.meta = meta,
            Err(e) => {
                out.pop();
                break 'taken Ok(Err(e.reason()));
            }
        }
        let csum_partial = hdr.flags & F_NEEDS_CSUM != 0;
        // Held: only a frame the graph can route on its first bytes (its
        // offload header within them).
        if hold && header_within(packet, HELD_HEAD) {
            let held = HeldChain { head, skip: hdr_len + HELD_HEAD, len: packet.len() - HELD_HEAD };
            return Ok(Some(Taken { descs, frame: Ok(TakenFrame { csum_partial, held: Some(held) }) }));
        }
        if hold {
            // Copied whole after all: the rest of the frame now.
            let rest = &mut packet.linear_mut()[HELD_HEAD..];
            if let Err(f) = scratch.read_near(mem, &near, hdr_len + HELD_HEAD, rest) {
                out.pop();
                break 'taken Err(f);
            }
        }
        Ok(Ok(TakenFrame { csum_partial, held: None }))
    };
    if let Err(f) = rings.write_used(q, &[(head, 0)]) {
        // The queue stops: a frame whose chain was not given back does
        // not go on either.
        if matches!(taken, Ok(Ok(_))) {
            out.pop();
        }
        return Err(f);
    }
    Ok(Some(Taken { descs, frame: taken? }))
}

/// The frame bytes of the chain [`pop_tx_at`] just took when it is one
/// buffer starting with a plain 12-byte header (no flag, no GSO type:
/// every small frame a guest sends without a partial checksum): the
/// header's first four bytes are its checks, the metadata is the default.
/// These are the checks and the outcome of [`VirtioNetHdr::to_meta`] for
/// such a header (its rule 1: a frame of at least a link header, `hdr_len`
/// within it; then no rule for a header without flag and GSO), without
/// parsing the whole header into a struct and the metadata through a
/// result. `None` for any other chain: the general path takes it, and
/// names the reason of a header this one does not accept.
#[inline(always)]
fn plain_frame<'m>(scratch: &TxScratch, near: &Near<'m>, chain: &TxChain, hdr_len: usize) -> Option<VolatileSlice<'m>> {
    const PLAIN: usize = 12;
    // One buffer (its slice kept by the walk) holds the whole chain.
    let vs = near.get(0).filter(|_| scratch.bufs.len() == 1 && !chain.truncated && hdr_len == PLAIN)?;
    let frame_len = chain.len.checked_sub(PLAIN)?;
    let word = u32::from_le(vs.get_ref::<u32>(0).ok()?.load());
    // flags (byte 0) and gso_type (byte 1) zero; hdr_len (bytes 2, 3)
    // within the frame.
    if word & 0xffff != 0
        || (word >> 16) as usize > frame_len
        || frame_len < VirtioNetHdr::shortest_frame(Medium::Ethernet)
    {
        return None;
    }
    vs.subslice(PLAIN, frame_len).ok()
}

/// The `hdr_len`-byte `virtio_net_hdr` at the start of a chain of
/// `chain_len` bytes (recorded in `scratch`) parsed, or the drop reason
/// (a chain too short for it among them). The usual header, 12 bytes at
/// the start of the first buffer, is one fixed-size volatile load.
fn read_header(
    mem: &GuestMem,
    scratch: &TxScratch,
    near: &Near<'_>,
    hdr_len: usize,
    chain_len: usize,
) -> Result<Result<VirtioNetHdr, &'static str>, QueueFault> {
    let mut hb = [0u8; 12];
    let n = hdr_len.min(12).min(chain_len);
    match near.get(0) {
        Some(vs) if n == 12 && vs.len() >= 12 => {
            // Two loads (a volatile `[u8; 12]` is twelve byte loads).
            let lo = vs.get_ref::<u64>(0).map_err(|_| QueueFault::Address)?.load();
            let hi = vs.get_ref::<u32>(8).map_err(|_| QueueFault::Address)?.load();
            hb[..8].copy_from_slice(&lo.to_ne_bytes());
            hb[8..].copy_from_slice(&hi.to_ne_bytes());
        }
        _ => scratch.read_near(mem, near, 0, &mut hb[..n])?,
    }
    let layout = if hdr_len == 12 { HdrLayout::MrgRxbuf } else { HdrLayout::Basic };
    Ok(VirtioNetHdr::parse(&hb[..n], layout, HdrByteOrder::Little).map_err(|e| e.reason()))
}

/// Whether every header the import parses lies in a held frame's first
/// [`HELD_HEAD`] bytes: a partial checksum whose start is the L4 header
/// (the import checks that), with room for the longest TCP header (60
/// bytes) after it, and no tunnel. Headers come one after the other, so
/// the parse reads nothing past the L4 header's end.
fn held_header_fits(hdr: &VirtioNetHdr) -> bool {
    const LONGEST_L4_HEADER: usize = 60;
    hdr.flags & F_NEEDS_CSUM != 0 && !hdr.is_tunnel() && usize::from(hdr.csum_start) + LONGEST_L4_HEADER <= HELD_HEAD
}

/// Whether each buffer lies in one memory region: a held frame's buffers
/// are read later slice by slice ([`HeldFrame`]), which a buffer across
/// two regions would fail.
fn each_in_one_region(rings: &Rings<'_>, bufs: &[(GuestAddress, u32)]) -> bool {
    bufs.iter().all(|&(addr, len)| rings.slice(addr, len as usize).is_some())
}

/// Whether what the offload metadata points at (the checksum field of a
/// partial checksum) lies in the packet's first `head` bytes, and nothing
/// else (an encapsulation) was imported.
fn header_within(packet: &Packet, head: usize) -> bool {
    let meta = &packet.meta;
    meta.encap.is_none()
        && match meta.csum {
            ChecksumState::Partial { start, offset } => usize::from(start) + usize::from(offset) + 2 <= head,
            _ => true,
        }
}

/// Puts chain `head` in the used ring with `len` bytes written and
/// publishes it ([`publish_used`]).
///
/// # Errors
/// [`QueueFault::Address`]: the used ring is outside guest memory (or the
/// head index outside the queue).
pub fn complete<M: GuestMemory>(q: &mut Queue, mem: &M, head: u16, len: u32) -> Result<(), QueueFault> {
    publish_used(q, mem, &[(head, len)])
}

/// Why a frame was not placed in a receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxRefused {
    /// Not enough buffers are available now: every chain taken was given
    /// back; try again when the guest adds buffers.
    NoRoom,
    /// The frame does not fit the buffers the guest gives one frame (one
    /// chain without `MRG_RXBUF`, [`MAX_RX_CHAINS`] with it): dropped.
    TooBig,
    /// The guest broke the queue: stop it.
    Fault(QueueFault),
}

impl From<QueueFault> for RxRefused {
    fn from(f: QueueFault) -> RxRefused {
        RxRefused::Fault(f)
    }
}

/// How a frame was placed by [`push_rx`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxPlaced {
    /// Chains used (the header's `num_buffers`).
    pub chains: usize,
    /// Bytes written, header included.
    pub bytes: usize,
}

/// What [`push_rx`] keeps between calls, so that placing a frame neither
/// allocates (once warm) nor clears per-call arrays: the writable buffers
/// of the chain being filled and the chains the frame used. Its contents
/// never outlive one call (each call clears them before use).
#[derive(Debug)]
pub struct RxScratch {
    /// (guest address, length) of the current chain's first
    /// [`MAX_RX_DESCS`] writable descriptors, each checked to lie in guest
    /// memory.
    bufs: Vec<(GuestAddress, u32)>,
    /// (head, bytes written) of every chain of the frame so far.
    used: Vec<(u16, u32)>,
}

impl RxScratch {
    /// Room for `MAX_RX_DESCS` buffers and `MAX_RX_CHAINS` chains.
    pub fn new() -> RxScratch {
        RxScratch { bufs: Vec::with_capacity(MAX_RX_DESCS), used: Vec::with_capacity(MAX_RX_CHAINS) }
    }
}

impl Default for RxScratch {
    fn default() -> RxScratch {
        RxScratch::new()
    }
}

/// Takes the next chain of receive queue `q`, records its first
/// [`MAX_RX_DESCS`] buffers in `bufs` (cleared first) and returns its head
/// and whether it had more descriptors than that (capped).
#[inline(always)]
fn rx_chain<'m>(
    rings: &Rings<'m>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    bufs: &mut Vec<(GuestAddress, u32)>,
    near: &mut Near<'m>,
) -> Result<Option<(u16, bool)>, QueueFault> {
    let Some(head) = rings.next_head(q, cursor)? else { return Ok(None) };
    rings.prefetch_next(cursor, true);
    bufs.clear();
    // One writable descriptor (DPDK's virtio PMD's receive buffers): what
    // the walk below would record, without it.
    if let Some(d) = rings.lone(head)
        && d.is_write_only()
        && d.len() > 0
        && near.record(rings, 0, d.addr(), d.len() as usize)
    {
        bufs.push((d.addr(), d.len()));
        return Ok(Some((head, false)));
    }
    let mut capped = false;
    rings.walk(head, |d| {
        if !d.is_write_only() {
            return Err(QueueFault::Direction);
        }
        if d.len() > 0 && !near.record(rings, bufs.len(), d.addr(), d.len() as usize) {
            return Err(QueueFault::Address);
        }
        if bufs.len() < MAX_RX_DESCS {
            bufs.push((d.addr(), d.len()));
        } else {
            capped = true;
        }
        Ok(())
    })?;
    Ok(Some((head, capped)))
}

/// Places the frame `hdr` + `parts` (`len` bytes of frame after the
/// header) in receive queue `q`: in one chain, or (`mrg`) in as many as it
/// needs, the header's `num_buffers` (bytes 10 and 11 of a 12-byte `hdr`)
/// set to the number used. The chains are added to the used ring
/// ([`write_used`]); the caller publishes the used index
/// ([`publish_used_idx`]) and notifies the guest. `scratch` is working
/// space only (see [`RxScratch`]).
///
/// # Errors
/// [`RxRefused`]; on `NoRoom` and `TooBig` every chain taken was given back.
pub fn push_rx<'h, 'a: 'h>(
    q: &mut Queue,
    mem: &GuestMem,
    scratch: &mut RxScratch,
    hdr: &'h [u8],
    parts: impl Iterator<Item = &'a [u8]>,
    len: usize,
    mrg: bool,
) -> Result<RxPlaced, RxRefused> {
    push_rx_at(&Rings::new(q, mem)?, q, &mut AvailCursor::default(), scratch, hdr, parts, len, mrg)
}

/// [`push_rx`] on `q`'s rings resolved by the caller (the port keeps them:
/// [`Rings::cached`]), the available index loaded through `cursor`, which
/// the port keeps per queue (once per burst: see [`AvailCursor`]).
///
/// # Errors
/// As [`push_rx`].
#[allow(clippy::too_many_arguments)]
pub fn push_rx_at<'h, 'a: 'h>(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut RxScratch,
    hdr: &'h [u8],
    parts: impl Iterator<Item = &'a [u8]>,
    len: usize,
    mrg: bool,
) -> Result<RxPlaced, RxRefused> {
    push_rx_holding(rings, q, cursor, scratch, hdr, parts, len, mrg, None)
}

/// [`push_rx_at`] of a frame in one slice (a linear packet: every frame
/// copied from a guest). A frame that fits the first buffer of the next
/// chain (the 64-byte frame, and any frame in a guest's large buffers)
/// is written there at once, the header (`num_buffers` 1) and the frame
/// by one small copy (`guest_copy::write_rx_frame`): no source iterator, no buffer
/// loop. Any other is placed by [`push_rx_at`], the chain taken first
/// given back. Inlined into the caller's loop (a burst's), the other
/// frames' path out of line.
///
/// # Errors
/// As [`push_rx`].
#[inline(always)]
pub fn push_rx_frame(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut RxScratch,
    hdr: &[u8],
    frame: &[u8],
    mrg: bool,
) -> Result<RxPlaced, RxRefused> {
    let need = hdr.len() + frame.len();
    if let Ok(hb) = <[u8; 12]>::try_from(hdr) {
        let Some(head) = rings.next_head(q, cursor)? else { return Err(RxRefused::NoRoom) };
        rings.prefetch_next(cursor, true);
        // One writable buffer in one region with room for the frame: what
        // `rx_chain` would record and check, without recording it.
        if let Some(d) = rings.lone(head)
            && d.is_write_only()
            && d.len() as usize >= need
            && let Some(vs) = rings.slice(d.addr(), d.len() as usize)
        {
            // `num_buffers` (bytes 10 and 11) 1.
            let mut hb = hb;
            hb[10..].copy_from_slice(&1u16.to_le_bytes());
            if !write_rx_frame(&vs, hb, frame) {
                return Err(QueueFault::Address.into());
            }
            rings.write_used(q, &[(head, need as u32)])?;
            return Ok(RxPlaced { chains: 1, bytes: need });
        }
        q.go_to_previous_position();
        cursor.rewound(q);
    }
    push_rx_spread(rings, q, cursor, scratch, hdr, frame, mrg)
}

/// [`push_rx_frame`] of a frame that is not written into one buffer at
/// once: [`push_rx_holding`] of its one slice.
///
/// # Errors
/// As [`push_rx`].
#[inline(never)]
fn push_rx_spread(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut RxScratch,
    hdr: &[u8],
    frame: &[u8],
    mrg: bool,
) -> Result<RxPlaced, RxRefused> {
    push_rx_holding(rings, q, cursor, scratch, hdr, std::iter::once(frame), frame.len(), mrg, None)
}

/// [`push_rx_at`] of a frame whose last `held.len()` bytes are `held`'s
/// (still in the sending guest's memory), copied guest to guest
/// ([`HeldFrame::stream_to`]); `parts` gives the `len - held.len()`
/// before them.
///
/// # Errors
/// As [`push_rx`].
#[allow(clippy::too_many_arguments)]
pub fn push_rx_holding<'h, 'a: 'h>(
    rings: &Rings<'_>,
    q: &mut Queue,
    cursor: &mut AvailCursor,
    scratch: &mut RxScratch,
    hdr: &'h [u8],
    parts: impl Iterator<Item = &'a [u8]>,
    len: usize,
    mrg: bool,
    held: Option<&HeldFrame>,
) -> Result<RxPlaced, RxRefused> {
    let mem = rings.mem();
    let held_from = hdr.len() + len - held.map_or(0, HeldFrame::len);
    let need = hdr.len() + len;
    let max_chains = if mrg { MAX_RX_CHAINS } else { 1 };
    let RxScratch { bufs, used } = scratch;
    used.clear();
    let mut near = Near::default();
    let mut written = 0usize;
    // The header is written with num_buffers (bytes 10 and 11 of a 12-byte
    // header) at 1, what it is for a frame in one chain (every frame
    // without MRG_RXBUF, and nearly every small one with it); a frame
    // that takes more chains gets it rewritten at the end, where bytes 10
    // and 11 landed.
    let mut first = [0u8; 12];
    let hdr: &[u8] = match hdr.len() {
        12 => {
            first.copy_from_slice(hdr);
            first[10..].copy_from_slice(&1u16.to_le_bytes());
            &first
        }
        _ => hdr,
    };
    let mut nb_addr: [Option<GuestAddress>; 2] = [None, None];
    let mut src = std::iter::once(hdr).chain(parts.map(|p| p as &[u8])).filter(|p| !p.is_empty());
    let mut cur: &[u8] = src.next().unwrap_or(&[]);
    let give_back = |q: &mut Queue, cursor: &mut AvailCursor, n: usize| {
        for _ in 0..n {
            q.go_to_previous_position();
        }
        cursor.rewound(q);
    };
    while written < need {
        if used.len() == max_chains {
            give_back(q, cursor, used.len());
            return Err(RxRefused::TooBig);
        }
        let (head, capped) = match rx_chain(rings, q, cursor, bufs, &mut near) {
            Ok(Some(c)) => c,
            Ok(None) => {
                give_back(q, cursor, used.len());
                // Every buffer of the ring was not enough: waiting for more
                // would wait forever.
                return Err(if used.len() >= usize::from(q.size()) { RxRefused::TooBig } else { RxRefused::NoRoom });
            }
            Err(f) => return Err(RxRefused::Fault(f)),
        };
        let mut in_chain = 0u32;
        'bufs: for (i, &(addr, blen)) in bufs.iter().enumerate() {
            let mut off = 0u32;
            while off < blen {
                if cur.is_empty() {
                    match src.next() {
                        Some(s) => cur = s,
                        None => match held.filter(|_| written >= held_from) {
                            Some(held) => {
                                let mut n = (need - written).min((blen - off) as usize);
                                if n == 0 {
                                    break 'bufs;
                                }
                                let at = addr.checked_add(u64::from(off)).ok_or(QueueFault::Address)?;
                                let dst = match near.get(i) {
                                    Some(vs) => vs.subslice(off as usize, n).map_err(|_| QueueFault::Address)?,
                                    None => {
                                        // A buffer may run on into the next
                                        // region: one region's part at a time.
                                        n = n.min(room_in_region(mem, at)?);
                                        mem.get_slice(at, n).map_err(|_| QueueFault::Address)?
                                    }
                                };
                                held.stream_to(written - held_from, &dst)?;
                                off += n as u32;
                                in_chain += n as u32;
                                written += n;
                                continue;
                            }
                            None => break 'bufs,
                        },
                    }
                }
                let n = cur.len().min((blen - off) as usize);
                let at = addr.checked_add(u64::from(off)).ok_or(QueueFault::Address)?;
                if written < 12 && hdr.len() == 12 {
                    for (k, slot) in nb_addr.iter_mut().enumerate() {
                        let pos = 10 + k;
                        if written <= pos && pos < written + n {
                            *slot = at.checked_add((pos - written) as u64);
                        }
                    }
                }
                match near.get(i) {
                    Some(vs) => write_slice(&vs.subslice(off as usize, n).map_err(|_| QueueFault::Address)?, &cur[..n]),
                    None => write_guest(mem, at, &cur[..n])?,
                }
                cur = &cur[n..];
                off += n as u32;
                in_chain += n as u32;
                written += n;
            }
        }
        used.push((head, in_chain));
        if in_chain == 0 || (capped && written < need) {
            // A chain without room (zero-length buffers): refuse the frame
            // rather than spin on it. A chain with uncounted descriptors
            // would not be the last one, and not be used to its full length.
            give_back(q, cursor, used.len());
            return Err(RxRefused::TooBig);
        }
    }
    if let [Some(lo), Some(hi)] = nb_addr
        && used.len() > 1
    {
        let nb = (used.len() as u16).to_le_bytes();
        if lo.checked_add(1) == Some(hi) {
            write_guest(mem, lo, &nb)?;
        } else {
            write_guest(mem, lo, &nb[..1])?;
            write_guest(mem, hi, &nb[1..])?;
        }
    }
    rings.write_used(q, used)?;
    Ok(RxPlaced { chains: used.len(), bytes: written })
}

/// Bytes of guest memory from `at` to the end of the region holding it.
///
/// # Errors
/// [`QueueFault::Address`]: `at` is in no region.
fn room_in_region(mem: &GuestMem, at: GuestAddress) -> Result<usize, QueueFault> {
    let r = mem.find_region(at).ok_or(QueueFault::Address)?;
    // From the region's last byte, not one past it: a region may end at
    // the top of the address space, where its end is not an address.
    let to_last = r.last_addr().checked_offset_from(at).ok_or(QueueFault::Address)?;
    Ok(usize::try_from(to_last).map_or(usize::MAX, |n| n.saturating_add(1)))
}

/// Puts `chains` (head, bytes written) in the used ring and then moves the
/// used index past all of them with one release store: the guest sees
/// every buffer of a frame used at once, never the first few
/// ([`write_used`], then [`publish_used_idx`]).
///
/// # Errors
/// [`QueueFault::Address`]: the used ring is outside guest memory (or a
/// head index outside the queue).
pub fn publish_used<M: GuestMemory>(q: &mut Queue, mem: &M, chains: &[(u16, u32)]) -> Result<(), QueueFault> {
    write_used(q, mem, chains)?;
    publish_used_idx(q, mem)
}

/// Writes `chains` (head, bytes written) into the used ring after the
/// entries written so far and moves the queue's `next_used` past them,
/// without storing the used index: the guest does not see them until
/// [`publish_used_idx`]. Callers write whole frames only, so that the
/// index, whenever published, is at a frame boundary.
///
/// Virtio 1.2, 5.1.6.4.2 (device requirements, processing of incoming
/// packets): "The device MUST use all buffers used by a single receive
/// packet together, such that at least `num_buffers` are observed by driver
/// as used." `virtio-queue`'s `add_used` stores the used index after every
/// element, so a frame over 34 chains was published 34 times; DPDK 22.11's
/// `virtio_recv_mergeable_pkts`, finding fewer used entries than
/// `num_buffers`, frees the head ("No enough segments for packet") and
/// takes the next chains for heads of new frames: their payload bytes read
/// as a `virtio_net_hdr` sent it into a software checksum over about 4 GB.
///
/// # Errors
/// [`QueueFault::Address`]: the used ring is outside guest memory (or a
/// head index outside the queue).
pub fn write_used<M: GuestMemory>(q: &mut Queue, mem: &M, chains: &[(u16, u32)]) -> Result<(), QueueFault> {
    let size = q.size();
    if size == 0 {
        return Err(QueueFault::Address);
    }
    let ring = GuestAddress(q.used_ring());
    let mut next = std::num::Wrapping(q.next_used());
    for &(head, len) in chains {
        if head >= size {
            return Err(QueueFault::Address);
        }
        // struct virtq_used_elem { le32 id; le32 len; } after flags and idx.
        let at = ring.checked_add(4 + 8 * u64::from(next.0 % size)).ok_or(QueueFault::Address)?;
        let mut elem = [0u8; 8];
        elem[..4].copy_from_slice(&u32::from(head).to_le_bytes());
        elem[4..].copy_from_slice(&len.to_le_bytes());
        write_guest(mem, at, &elem)?;
        next += std::num::Wrapping(1);
    }
    q.set_next_used(next.0);
    Ok(())
}

/// Publishes every used element written so far ([`write_used`]): stores
/// the queue's `next_used` as the used index, a release store, so the
/// frames' bytes and the elements are visible before the index that
/// announces them.
///
/// # Errors
/// [`QueueFault::Address`]: the used ring is outside guest memory.
pub fn publish_used_idx<M: GuestMemory>(q: &Queue, mem: &M) -> Result<(), QueueFault> {
    let idx = GuestAddress(q.used_ring()).checked_add(2).ok_or(QueueFault::Address)?;
    mem.store(q.next_used().to_le(), idx, Ordering::Release).map_err(|_| QueueFault::Address)
}

/// Whether the guest wants a notification for the used entries published
/// since `since` (the used index at the last check): with
/// `VIRTIO_RING_F_EVENT_IDX` (virtio 1.2, 2.7.10) only when `used_event`
/// was passed; without it, unless the guest set
/// `VIRTQ_AVAIL_F_NO_INTERRUPT` ([`interrupts_suppressed`]). Used for both
/// data queues, whose entries [`write_used`] writes itself, so
/// `virtio-queue`'s own count of added entries does not see them.
///
/// # Errors
/// [`QueueFault::Address`]: the available ring is outside guest memory.
pub fn wants_notification<M: GuestMemory>(q: &Queue, mem: &M, since: u16) -> Result<bool, QueueFault> {
    let new = q.next_used();
    if new == since {
        return Ok(false);
    }
    if !q.event_idx_enabled() {
        return interrupts_suppressed(q, mem).map(|off| !off);
    }
    // The used index stores before, the used_event load after.
    std::sync::atomic::fence(Ordering::SeqCst);
    // used_event follows the available ring: flags, idx, ring[size].
    let at = GuestAddress(q.avail_ring()).checked_add(4 + 2 * u64::from(q.size())).ok_or(QueueFault::Address)?;
    let event = u16::from_le(mem.load::<u16>(at, Ordering::Acquire).map_err(|_| QueueFault::Address)?);
    // vring_need_event(): event_idx in [old, new).
    Ok(new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(since))
}

/// `VIRTQ_AVAIL_F_NO_INTERRUPT` in the available ring's flags: a guest
/// that polls (DPDK's virtio PMD sets it on every queue) asks for no
/// notifications. Virtio 1.2, 2.7.7.2: without `VIRTIO_F_EVENT_IDX`, when
/// the flag is set the device should not send one; a call the guest does
/// not read would cost the engine a system call per round for nothing. A
/// guest that clears the flag re-checks the used ring afterwards (the
/// driver's side of the same section), so no notification is lost.
///
/// # Errors
/// [`QueueFault::Address`]: the available ring is outside guest memory.
pub fn interrupts_suppressed<M: GuestMemory>(q: &Queue, mem: &M) -> Result<bool, QueueFault> {
    const NO_INTERRUPT: u16 = 1;
    // The used index stores before the flags load.
    std::sync::atomic::fence(Ordering::SeqCst);
    let flags = mem.load::<u16>(GuestAddress(q.avail_ring()), Ordering::Acquire).map_err(|_| QueueFault::Address)?;
    Ok(u16::from_le(flags) & NO_INTERRUPT != 0)
}
