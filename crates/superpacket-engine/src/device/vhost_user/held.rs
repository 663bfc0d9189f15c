//! A superpacket's payload left in the sending guest's memory ([`HeldFrame`]):
//! the one-copy path for TSO superpackets between vhost-user ports
//! (docs/benchmarks.md, "vhost-user backends", the one-copy subsections).
//!
//! The sending port copies only a frame's first [`HELD_HEAD`] bytes (its
//! headers) into the [`Packet`]; the rest stays in the sender's buffers,
//! described by a [`HeldFrame`] that travels beside the packet, never in it:
//! the graph's devices see whole packets only, because every path that is
//! not the fast one (a bridge forwarding on headers to one vhost-user port
//! that takes the frame as it is) first *materialises* the payload
//! ([`HeldFrame::materialise`]: the bytes copied into the packet's own
//! buffer, one copy, as without this module). The fast path copies the
//! payload guest to guest ([`HeldFrame::stream_to`], streaming stores).
//!
//! Invariants:
//!
//! - no Rust reference to guest memory: every access is a bounds-checked
//!   `vm-memory` slice and a volatile or raw-pointer copy;
//! - the packet's last [`HeldFrame::len`] bytes are the held ones: headers
//!   pushed or pulled at the front (VLAN tags) do not move them;
//! - the sender's chain is given back exactly once, when the `HeldFrame`
//!   is dropped (after its bytes were copied, or when the frame is dropped):
//!   a used element (head, 0 bytes) written into the sender's transmit
//!   queue, and nothing if that queue was reset, moved or its connection
//!   ended meanwhile (the guest takes its buffers back with the reset). The
//!   used index is published by the sending port as for every chain, once
//!   per burst: `VIRTIO_F_IN_ORDER` is not offered, so used elements may
//!   come back in any order (virtio 1.2, 2.7.9);
//! - a held frame never outlives the engine round that took it: the worker
//!   hands it to the graph with its packet, and the graph either sends it
//!   or materialises it before anything else sees the packet; a port that
//!   cannot place it at once materialises it into its backlog.
//!
//! At a stop (docs/topology.md, "vhost-user ports", stopping a ring): every
//! live held frame is counted in its transmit queue's [`HeldQueue`], and
//! the control thread waits for that count to reach zero before it lets
//! the frontend go on, so no chain is written after the frontend was told
//! the queue stopped, and none is lost by a frontend that goes on without a
//! reset:
//!
//! - `GET_VRING_BASE` (`vhost-user-backend` marks the queue not ready, then
//!   calls `stop_vring`, then reads `next_avail` as the base): `stop_vring`
//!   waits for the queue's held frames, which still write their used
//!   elements (a completion does not look at the ready flag, only at
//!   [`HeldQueue`]'s stop count), publishes the used index and only then
//!   counts the stop. The base counts every chain taken, and every one of
//!   them is in the used ring the frontend reads when it restarts the ring
//!   from that base;
//! - `SET_VRING_ENABLE(0)`: the ring stays started (vhost-user, "Ring
//!   states": a disabled ring's transmit buffers are still processed), so
//!   held frames complete as usual and the sending port publishes them;
//! - `RESET_DEVICE` and the end of a connection: completions write
//!   nothing (the guest takes its buffers back with the reset, or the
//!   next connection starts the rings afresh); the control thread waits
//!   for the held frames all the same before it answers the reset or
//!   serves the next connection, so none of them writes into the rings
//!   that follow;
//! - a wait longer than [`STOP_WAIT`] (a worker that stopped in a round)
//!   is given up and counted (`held_stop_timeouts`); a frame completing
//!   after it writes nothing, and its buffer is lost to the frontend.

use super::backend::{Conn, PortShared, Vring};
use super::guest_copy::copy_guest_to_guest;
use super::ring::GuestMem;
use super::virtq::{self, QueueFault};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use superpacket::packet::Packet;
use vhost_user_backend::VringT;
use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryBackend, VolatileSlice};

/// Frames (after the `virtio_net_hdr`) of at least this many bytes may be
/// held: below it the second copy is cheap and the bookkeeping is not.
pub const HELD_MIN: usize = 8192;

/// Bytes of a held frame copied into its packet: every header the graph
/// reads (Ethernet, two VLAN tags, IPv6 with extension headers, TCP with
/// options) fits; a frame whose headers or checksum field reach past them
/// is copied whole.
pub const HELD_HEAD: usize = 256;

/// Most buffers of a chain that is held (a 64 KiB superpacket in 2 KiB
/// buffers takes 33); a chain in more is copied whole.
pub const MAX_HELD_BUFS: usize = 64;

/// Most chains of one transmit queue held at a time (a quarter of the
/// largest ring): past it frames are copied whole, so held chains cannot
/// use up the sender's ring while the receiver is slow.
pub const MAX_HELD: usize = 256;

/// Longest a stop waits for a queue's held frames: far more than an engine
/// round (well under a millisecond even on a loaded machine), short enough
/// that a stuck worker does not hold the frontend's request for long.
pub const STOP_WAIT: Duration = Duration::from_secs(1);

/// The held frames of one transmit queue (one per queue pair of a port):
/// how many are alive, and how many times the queue was stopped
/// (`GET_VRING_BASE`) under them. See the module documentation, "At a
/// stop".
#[derive(Debug, Default)]
pub struct HeldQueue {
    /// [`HeldFrame`]s alive: counted when made, under the queue's lock,
    /// uncounted after their completion.
    alive: AtomicUsize,
    /// Stops of the queue so far; a completion writes only if none came
    /// since its chain was taken. Changed and read under the queue's lock.
    stops: AtomicU64,
}

impl HeldQueue {
    /// Waits until no held frame of the queue is alive, at most `timeout`;
    /// false if some still were.
    pub fn wait_drained(&self, timeout: Duration) -> bool {
        let start = Instant::now();
        while self.alive.load(Ordering::Acquire) != 0 {
            if start.elapsed() >= timeout {
                return false;
            }
            // Held frames live for part of an engine round: a short sleep
            // is a few rounds at most, and this is the control thread.
            std::thread::sleep(Duration::from_micros(50));
        }
        true
    }

    /// Counts a stop of the queue: the frames still alive (after a wait
    /// that gave up) write nothing from now on. Called with the queue's
    /// lock held.
    pub fn stopped(&self) {
        self.stops.fetch_add(1, Ordering::AcqRel);
    }

    /// Held frames alive.
    pub fn alive(&self) -> usize {
        self.alive.load(Ordering::Acquire)
    }
}

/// Where a held chain is given back: the sender's transmit queue and the
/// connection it belonged to when it was taken.
pub struct Completion {
    /// The sender's transmit vring.
    tx: Vring,
    /// The sender's port (its current connection).
    shared: Arc<PortShared>,
    /// The queue pair of `tx`.
    pair: usize,
    /// The connection the chain was taken on.
    conn: Arc<Conn>,
    /// `conn`'s device resets when it was taken.
    resets: u64,
    /// The queue's stops ([`HeldQueue`]) when it was taken.
    stops: u64,
    /// The used ring's guest address when it was taken.
    used_ring: u64,
    /// The chain's head descriptor.
    head: u16,
}

impl Completion {
    /// Where chain `head` of `q`, the transmit queue `tx` of queue pair
    /// `pair` of `shared`'s connection `conn` (`resets` device resets
    /// since it started), is given back. Called with `tx`'s lock held
    /// (`q` is its queue), so the stop count read is the one the chain was
    /// taken under.
    pub fn new(
        tx: Vring,
        q: &Queue,
        shared: Arc<PortShared>,
        pair: usize,
        conn: Arc<Conn>,
        resets: u64,
        head: u16,
    ) -> Completion {
        let stops = shared.held[pair].stops.load(Ordering::Acquire);
        Completion { tx, used_ring: q.used_ring(), shared, pair, conn, resets, stops, head }
    }

    /// The chain's head descriptor.
    pub fn head(&self) -> u16 {
        self.head
    }

    fn queue(&self) -> &HeldQueue {
        &self.shared.held[self.pair]
    }

    /// Writes the used element (head, 0 bytes), unless the queue changed:
    /// another connection, a device reset, a stop counted or another used
    /// ring since the chain was taken. Everything is checked under the
    /// queue's lock, which the stop counts under; the connection and the
    /// reset are changed without it, but the control thread waits for the
    /// held frames after changing them ([`HeldQueue::wait_drained`]), so a
    /// completion that saw them unchanged is over before it goes on.
    fn complete(&self, mem: &GuestMem) {
        let mut st = self.tx.get_mut();
        let current = self.shared.still_serves(&self.conn, self.resets)
            && self.queue().stops.load(Ordering::Acquire) == self.stops;
        let q = st.get_queue_mut();
        if !current || q.used_ring() != self.used_ring {
            return;
        }
        // A fault here is the guest's (its used ring left its memory): the
        // port finds it on its next access and stops the queue.
        let _: Result<(), QueueFault> = virtq::write_used(q, mem, &[(self.head, 0)]);
    }
}

/// A frame's payload in the sending guest's buffers (see the module
/// documentation). Dropping it gives the chain back.
pub struct HeldFrame {
    /// The sender's memory (its mapping is kept while the frame is held).
    mem: Arc<GuestMem>,
    /// (guest address, length) of the chain's buffers, `nbufs` of them.
    bufs: [(GuestAddress, u32); MAX_HELD_BUFS],
    nbufs: usize,
    /// Chain bytes before the held ones (`virtio_net_hdr` and head).
    skip: usize,
    /// Held bytes: the packet's last `len`.
    len: usize,
    /// The packet's identity in the graph ([`owner_of`]).
    owner: usize,
    /// The packet's place in the burst the driver returned it in
    /// ([`HeldFrame::in_burst`]): the worker's identity of the packet.
    burst_index: usize,
    completion: Completion,
}

impl std::fmt::Debug for HeldFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldFrame").field("len", &self.len).field("head", &self.completion.head).finish()
    }
}

impl HeldFrame {
    /// The held bytes `skip..skip + len` of the chain in `bufs` (each
    /// checked to lie in `mem`), the payload of `packet`; `None` if the
    /// chain has more than [`MAX_HELD_BUFS`] buffers.
    pub fn new(
        mem: Arc<GuestMem>,
        bufs: &[(GuestAddress, u32)],
        skip: usize,
        len: usize,
        packet: &Packet,
        completion: Completion,
    ) -> Result<HeldFrame, Completion> {
        if bufs.len() > MAX_HELD_BUFS || packet.total_len() < len {
            return Err(completion);
        }
        completion.queue().alive.fetch_add(1, Ordering::AcqRel);
        let mut held = [(GuestAddress(0), 0); MAX_HELD_BUFS];
        held[..bufs.len()].copy_from_slice(bufs);
        Ok(HeldFrame {
            mem,
            bufs: held,
            nbufs: bufs.len(),
            skip,
            len,
            owner: owner_of(packet),
            burst_index: 0,
            completion,
        })
    }

    /// The frame of the packet at `index` of the burst a driver returns
    /// ([`crate::device::PortDriver::recv_burst_held`]).
    pub fn in_burst(mut self, index: usize) -> HeldFrame {
        self.burst_index = index;
        self
    }

    /// The place of this frame's packet in the burst it came in: the
    /// worker hands the packet at that place, and no other, to the graph
    /// with this frame.
    pub fn burst_index(&self) -> usize {
        self.burst_index
    }

    /// Held bytes: the packet's last `len()`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a frame with nothing held is not held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether this is `packet`'s payload, for the graph's walk of its
    /// packet ([`crate::device::Graph::receive_held`]; see `owner_of`).
    pub fn belongs_to(&self, packet: &Packet) -> bool {
        self.owner == owner_of(packet)
    }

    /// Calls `f` with each piece of held bytes `from..` in order, as a
    /// bounds-checked slice of the sender's memory, until `f` returns
    /// false. `Err` if a buffer left guest memory (the table changed).
    fn pieces(&self, from: usize, mut f: impl FnMut(VolatileSlice<'_>) -> bool) -> Result<(), QueueFault> {
        let mut off = self.skip + from;
        let pm = &*self.mem;
        for &(addr, blen) in &self.bufs[..self.nbufs] {
            let blen = blen as usize;
            if off >= blen {
                off -= blen;
                continue;
            }
            let at = addr.0.checked_add(off as u64).ok_or(QueueFault::Address)?;
            let vs = pm.get_slice(GuestAddress(at), blen - off).map_err(|_| QueueFault::Address)?;
            off = 0;
            if !f(vs) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Copies held bytes `from..from + dst.len()` into `dst` (volatile
    /// reads).
    ///
    /// # Errors
    /// [`QueueFault::Address`]: a buffer is no longer in guest memory, or
    /// fewer bytes are held.
    pub fn copy_to(&self, from: usize, dst: &mut [u8]) -> Result<(), QueueFault> {
        if from.checked_add(dst.len()).is_none_or(|end| end > self.len) {
            return Err(QueueFault::Address);
        }
        let mut rest = &mut *dst;
        self.pieces(from, |vs| {
            let n = vs.len().min(rest.len());
            let (now, later) = std::mem::take(&mut rest).split_at_mut(n);
            vs.copy_to(now);
            rest = later;
            !rest.is_empty()
        })?;
        if rest.is_empty() { Ok(()) } else { Err(QueueFault::Address) }
    }

    /// Copies held bytes `from..from + dst.len()` into `dst`, another
    /// guest's receive buffer, guest to guest: streaming stores (see
    /// `guest_copy`), ordered before any later store of the caller's.
    ///
    /// # Errors
    /// As [`HeldFrame::copy_to`].
    pub fn stream_to(&self, from: usize, dst: &VolatileSlice<'_>) -> Result<(), QueueFault> {
        if from.checked_add(dst.len()).is_none_or(|end| end > self.len) {
            return Err(QueueFault::Address);
        }
        let mut done = 0;
        self.pieces(from, |src| {
            let n = src.len().min(dst.len() - done);
            let Ok(d) = dst.subslice(done, n) else { return false };
            copy_guest_to_guest(&d, &src);
            done += n;
            done < dst.len()
        })?;
        if done == dst.len() { Ok(()) } else { Err(QueueFault::Address) }
    }

    /// Copies the held bytes into `packet` (this frame's own, whose last
    /// `len()` bytes they are) and gives the chain back: the packet is
    /// whole from now on, as if copied whole at take time. A payload that
    /// can no longer be read (the sender's memory table changed under it)
    /// is an `Err` with the drop reason; the packet must then be dropped.
    pub fn materialise(self, packet: &mut Packet) -> Result<(), &'static str> {
        debug_assert!(self.belongs_to(packet), "a held payload materialised into another packet");
        if !packet.segments().is_empty() || !packet.frag_list().is_empty() {
            return Err("vhost-held-lost");
        }
        let lin = packet.linear_mut();
        let Some(at) = lin.len().checked_sub(self.len) else { return Err("vhost-held-lost") };
        self.copy_to(0, &mut lin[at..]).map_err(|_| "vhost-held-lost")
    }
}

impl Drop for HeldFrame {
    fn drop(&mut self) {
        self.completion.complete(&self.mem);
        self.completion.queue().alive.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A packet's identity in the graph while its payload is held: the end of
/// its linear buffer (unmoved by headers pushed or pulled at the front).
/// No two live packets share a buffer, and the hold ends with the walk
/// chain of its packet (`Graph::receive_held`: the packet lives in that
/// chain's slot until it is sent or dropped, and the hold is given up
/// before any other packet is walked), so while the hold lasts no other
/// packet can have this identity; a pool buffer reused after the packet's
/// drop comes only after the hold ended.
fn owner_of(packet: &Packet) -> usize {
    let lin = packet.linear();
    (lin.as_ptr() as usize).wrapping_add(lin.len())
}
