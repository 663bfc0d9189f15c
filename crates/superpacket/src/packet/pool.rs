//! Recycled receive buffers: the engine's page pool.
//!
//! A port that reads a superpacket hands the buffer it read into to the
//! [`Packet`] itself ([`Packet::from_storage`]:
//! no copy), so it needs a fresh buffer for the next read. Allocating 128 KiB
//! per superpacket costs a `mmap`, page faults and zeroing; instead every
//! buffer of exactly [`POOL_BUFFER_LEN`] bytes goes back to a per-thread free
//! list when the packet holding it is dropped (usually right after transmit,
//! on the same worker thread), and the next read takes it from there.
//!
//! Invariants:
//! - a pooled buffer has `len() == capacity() == POOL_BUFFER_LEN` (its bytes
//!   are stale, never zeroed again: readers only trust what they wrote);
//! - each thread keeps at most [`POOL_MAX_IDLE`] idle buffers
//!   (`POOL_MAX_IDLE * POOL_BUFFER_LEN` = 8 MiB); more are freed;
//! - buffers of any other size are never pooled (they are freed as usual).
//!
//! The per-thread list needs no lock; a buffer dropped on another thread
//! simply joins that thread's list.
//!
//! Small frames (up to [`COPYBREAK`]) that a driver copies from memory it
//! cannot borrow ([`Packet::with_linear_len_pooled`](super::Packet::with_linear_len_pooled):
//! a vhost-user guest's buffers) get a buffer of [`SMALL_BUFFER_LEN`] bytes
//! from a second per-thread list, recycled the same way, so that a stream
//! of 64-byte frames costs no `malloc`/`free` per frame (about 570
//! instructions a frame, a twelfth of the vhost-user loop's, callgrind).
//! Same invariants: `len() == capacity() == SMALL_BUFFER_LEN`, stale
//! bytes, at most [`SMALL_MAX_IDLE`] idle per thread.
//!
//! GRO aggregates' segment lists (the `skb_shared_info` frag arrays of this
//! crate: [`MAX_SEGMENTS`] entries) are recycled the same way
//! ([`take_segment_list`], [`recycle_segment_list`]): merging the first
//! packet into an aggregate takes an empty list instead of allocating one,
//! and dropping the aggregate gives it back. At most
//! [`SEGMENT_LISTS_MAX_IDLE`] idle lists per thread; a recycled list is
//! always empty with capacity exactly [`MAX_SEGMENTS`].
//!
//! Their frag lists too ([`take_frag_list`], [`recycle_frag_list`]): an
//! aggregate of more than [`MAX_SEGMENTS`] + 1 segments chains packets on a
//! list of [`FRAG_LIST_ROOM`], which came from `malloc` once per aggregate
//! (2% of one VXLAN flow's GRO time, docs/benchmarks.md "One VXLAN flow:
//! per-aggregate work"). At most [`FRAG_LISTS_MAX_IDLE`] idle lists per
//! thread; a recycled list is always empty with capacity exactly
//! [`FRAG_LIST_ROOM`].

use std::cell::RefCell;

use super::buffer::{MAX_SEGMENTS, Packet, Segment};

/// Size of a pooled receive buffer: headroom plus a frame of up to 128 KiB
/// minus the headroom (more than a 64 KiB GSO frame with its headers).
pub const POOL_BUFFER_LEN: usize = 128 * 1024;

/// Received frames up to this size are copied into a packet of their own
/// size (Linux drivers' `rx_copybreak`): an MTU frame must not pin a
/// [`POOL_BUFFER_LEN`] buffer. Larger ones (superpackets) use pool buffers.
pub const COPYBREAK: usize = 4096;

/// Most idle buffers one thread keeps.
pub const POOL_MAX_IDLE: usize = 64;

/// Size of a pooled small buffer: the default headroom and a frame of up
/// to [`COPYBREAK`] bytes.
pub const SMALL_BUFFER_LEN: usize = super::buffer::DEFAULT_HEADROOM + COPYBREAK;

/// Most idle small buffers one thread keeps: a 1024-entry ring's worth
/// (about 4 MiB).
pub const SMALL_MAX_IDLE: usize = 1024;

/// Most idle segment lists one thread keeps: the aggregates a 1024-frame
/// receive burst can make (pairs of frames): at most about 350 KB of
/// idle lists (17 segments of 40 bytes each).
pub const SEGMENT_LISTS_MAX_IDLE: usize = 512;

/// Packets a pooled frag list has room for: what GRO reserves for an
/// aggregate's chained packets (a 64 KB aggregate of MTU segments chains
/// two).
pub const FRAG_LIST_ROOM: usize = 4;

/// Most idle frag lists one thread keeps (as [`SEGMENT_LISTS_MAX_IDLE`]:
/// at most 256 KB of 512-byte lists).
pub const FRAG_LISTS_MAX_IDLE: usize = 512;

thread_local! {
    static IDLE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static IDLE_SMALL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static IDLE_SEGMENT_LISTS: RefCell<Vec<Vec<Segment>>> = const { RefCell::new(Vec::new()) };
    static IDLE_FRAG_LISTS: RefCell<Vec<Vec<Packet>>> = const { RefCell::new(Vec::new()) };
}

/// Counters of this thread's pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Idle buffers now.
    pub idle: usize,
    /// Idle small buffers now.
    pub idle_small: usize,
}

type IdleList = std::thread::LocalKey<RefCell<Vec<Vec<u8>>>>;

/// A buffer from `list`, or a new zeroed one of `len` bytes (inlined, as
/// [`keep_buffer`], so that each caller reaches its list directly).
#[inline(always)]
fn take_from(list: &'static IdleList, len: usize) -> Vec<u8> {
    list.try_with(|idle| idle.borrow_mut().pop()).ok().flatten().unwrap_or_else(|| vec![0; len])
}

/// A receive buffer of [`POOL_BUFFER_LEN`] bytes: a recycled one when this
/// thread has one idle, else a new zeroed one.
#[inline]
pub fn take_buffer() -> Vec<u8> {
    take_from(&IDLE, POOL_BUFFER_LEN)
}

/// A buffer of [`SMALL_BUFFER_LEN`] bytes: a recycled one when this thread
/// has one idle, else a new zeroed one.
#[inline]
pub fn take_small_buffer() -> Vec<u8> {
    take_from(&IDLE_SMALL, SMALL_BUFFER_LEN)
}

/// Lends this thread's idle small buffers, all of them, to a driver that
/// takes one per frame of a burst: `into` (empty) and the list are
/// exchanged, one access to the list for the burst where
/// [`take_small_buffer`] is one per frame. The driver pops buffers from
/// `into` ([`Packet::with_linear_len_from`](super::Packet::with_linear_len_from))
/// and gives the rest back with [`return_small_buffers`] before the burst
/// ends; meanwhile the list is empty (a buffer dropped joins it and is
/// merged then; a take from it allocates).
pub fn lend_small_buffers(into: &mut Vec<Vec<u8>>) {
    debug_assert!(into.is_empty(), "a burst's buffers were not given back");
    // During thread teardown the list may be gone: nothing is lent.
    let _ = IDLE_SMALL.try_with(|idle| std::mem::swap(into, &mut *idle.borrow_mut()));
}

/// Gives back what [`lend_small_buffers`] lent: `from` becomes the list
/// again, with the buffers that joined the list meanwhile (at most
/// [`SMALL_MAX_IDLE`]: more are freed), and `from` is left empty.
pub fn return_small_buffers(from: &mut Vec<Vec<u8>>) {
    let _ = IDLE_SMALL.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        while from.len() < SMALL_MAX_IDLE
            && let Some(buf) = idle.pop()
        {
            from.push(buf);
        }
        std::mem::swap(from, &mut *idle);
    });
    from.clear();
}

/// True if a buffer of `capacity` bytes may be a pool buffer (large or
/// small).
#[inline]
pub fn is_pool_capacity(capacity: usize) -> bool {
    capacity == POOL_BUFFER_LEN || capacity == SMALL_BUFFER_LEN
}

/// Takes `buf` (leaving it empty) if it is a pool buffer, and gives it back
/// as [`recycle`] does; anything else is left for its owner to free. A
/// dropped packet's storage: no move of a buffer that is not the pool's.
#[inline]
pub fn recycle_from(buf: &mut Vec<u8>) {
    match (buf.capacity(), buf.len()) {
        (POOL_BUFFER_LEN, POOL_BUFFER_LEN) => keep_large(std::mem::take(buf)),
        (SMALL_BUFFER_LEN, SMALL_BUFFER_LEN) => keep_small(std::mem::take(buf)),
        _ => {}
    }
}

/// Gives `buf` back if it is a pool buffer (large or small) and this
/// thread's list has room; otherwise it is freed.
#[inline]
pub fn recycle(buf: Vec<u8>) {
    match (buf.capacity(), buf.len()) {
        (POOL_BUFFER_LEN, POOL_BUFFER_LEN) => keep_large(buf),
        (SMALL_BUFFER_LEN, SMALL_BUFFER_LEN) => keep_small(buf),
        _ => {}
    }
}

/// Puts the small pool buffers `bufs` yields on this thread's list, each
/// taken (left empty), while the list has room (those past it stay where
/// they are), with one access to the list for all of them: a transmitted
/// burst's buffers, where each one's drop is an access of its own
/// ([`super::Packet::drop_all`]). `bufs` must yield only small pool
/// buffers (`len() == capacity() == SMALL_BUFFER_LEN`) and drop nothing
/// (the list is borrowed while it runs).
#[inline]
pub(crate) fn keep_small_all<'a>(bufs: impl Iterator<Item = &'a mut Vec<u8>>) {
    // During thread teardown the list may be gone: the buffers are then
    // left to their packets' drops.
    let _ = IDLE_SMALL.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        if idle.capacity() == 0 {
            idle.reserve_exact(SMALL_MAX_IDLE);
        }
        for buf in bufs {
            if idle.len() >= SMALL_MAX_IDLE {
                break;
            }
            debug_assert!(is_small_buffer(buf), "only small pool buffers are kept on the small list");
            idle.push(std::mem::take(buf));
        }
    });
}

/// True if `buf` is a small pool buffer as [`recycle`] takes one.
#[inline(always)]
pub(crate) fn is_small_buffer(buf: &Vec<u8>) -> bool {
    buf.capacity() == SMALL_BUFFER_LEN && buf.len() == SMALL_BUFFER_LEN
}

/// [`keep_buffer`] on the large list: one function per list, so that each
/// reaches its thread-local directly (a function shared by both lists calls
/// the list's accessor through a pointer, per buffer).
#[inline(never)]
fn keep_large(buf: Vec<u8>) {
    keep_buffer::<POOL_MAX_IDLE>(&IDLE, buf);
}

/// [`keep_buffer`] on the small list (see [`keep_large`]).
#[inline(never)]
fn keep_small(buf: Vec<u8>) {
    keep_buffer::<SMALL_MAX_IDLE>(&IDLE_SMALL, buf);
}

/// Puts a pool buffer on `list`, if it holds fewer than `MAX`. (`MAX` is a
/// const parameter so that each list's closure is a type of its own, which
/// the compiler inlines with the list's thread-local access.)
#[inline(always)]
fn keep_buffer<const MAX: usize>(list: &'static IdleList, buf: Vec<u8>) {
    // During thread teardown the list may be gone: the buffer is then freed.
    let _ = list.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        if idle.len() < MAX {
            if idle.capacity() == 0 {
                idle.reserve_exact(MAX);
            }
            idle.push(buf);
        }
    });
}

/// A per-thread list of idle object lists (segment lists, frag lists).
type IdleLists<T> = std::thread::LocalKey<RefCell<Vec<Vec<T>>>>;

/// An empty list from `idle`, or a new one with room for `room`.
fn take_list<T>(idle: &'static IdleLists<T>, room: usize) -> Vec<T> {
    idle.try_with(|idle| idle.borrow_mut().pop()).ok().flatten().unwrap_or_else(|| Vec::with_capacity(room))
}

/// Empties `list` and puts it on `idle`, if that holds fewer than `max`.
/// The list's elements are dropped before `idle` is borrowed: dropping one
/// may give a list of its own back to the same `idle`.
fn keep_list<T>(idle: &'static IdleLists<T>, max: usize, mut list: Vec<T>) {
    list.clear();
    // During thread teardown the list may be gone: the list is then freed.
    let _ = idle.try_with(|idle| {
        let mut idle = idle.borrow_mut();
        if idle.len() < max {
            idle.push(list);
        }
    });
}

/// An empty segment list with room for [`MAX_SEGMENTS`]: a recycled one
/// when this thread has one idle, else a new one.
pub fn take_segment_list() -> Vec<Segment> {
    take_list(&IDLE_SEGMENT_LISTS, MAX_SEGMENTS)
}

/// Gives an emptied segment list back if it has exactly [`MAX_SEGMENTS`]
/// capacity and this thread's list has room; otherwise it is freed.
#[inline]
pub fn recycle_segment_list(list: Vec<Segment>) {
    if list.capacity() == MAX_SEGMENTS {
        keep_list(&IDLE_SEGMENT_LISTS, SEGMENT_LISTS_MAX_IDLE, list);
    }
}

/// An empty frag list with room for [`FRAG_LIST_ROOM`] packets: a recycled
/// one when this thread has one idle, else a new one.
pub fn take_frag_list() -> Vec<Packet> {
    take_list(&IDLE_FRAG_LISTS, FRAG_LIST_ROOM)
}

/// Gives a frag list back if it has exactly [`FRAG_LIST_ROOM`] capacity
/// and this thread's list has room; otherwise it is freed. Its packets are
/// dropped first (one of them may give a frag list of its own back).
pub fn recycle_frag_list(list: Vec<Packet>) {
    if list.capacity() == FRAG_LIST_ROOM {
        keep_list(&IDLE_FRAG_LISTS, FRAG_LISTS_MAX_IDLE, list);
    }
}

/// This thread's pool counters.
pub fn stats() -> PoolStats {
    PoolStats {
        idle: IDLE.try_with(|idle| idle.borrow().len()).unwrap_or(0),
        idle_small: IDLE_SMALL.try_with(|idle| idle.borrow().len()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_recycled_up_to_the_limit() {
        let before = stats().idle;
        let a = take_buffer();
        assert_eq!(a.len(), POOL_BUFFER_LEN);
        let ptr = a.as_ptr();
        recycle(a);
        assert_eq!(stats().idle, before + 1);
        let b = take_buffer();
        assert_eq!(b.as_ptr(), ptr, "the idle buffer is handed out again");
        recycle(b);
        // Foreign sizes are not pooled.
        recycle(vec![0; 1500]);
        let mut shrunk = take_buffer();
        shrunk.truncate(10);
        recycle(shrunk);
        assert_eq!(stats().idle, before);
        // The list is bounded.
        let many: Vec<Vec<u8>> = (0..POOL_MAX_IDLE + 5).map(|_| take_buffer()).collect();
        for b in many {
            recycle(b);
        }
        assert_eq!(stats().idle, POOL_MAX_IDLE);
    }

    /// A small frame to fill takes a small buffer, which its drop gives
    /// back to the small list (bounded), never to the large one.
    #[test]
    fn small_frames_recycle_small_buffers() {
        use crate::packet::{DEFAULT_HEADROOM, Packet};
        let held: Vec<Vec<u8>> = (0..stats().idle_small).map(|_| take_small_buffer()).collect();
        let mut p = Packet::with_linear_len_pooled(60);
        assert_eq!((p.len(), p.headroom()), (60, DEFAULT_HEADROOM));
        p.linear_mut().fill(3);
        let ptr = p.linear().as_ptr();
        let large_before = stats().idle;
        drop(p);
        assert_eq!((stats().idle_small, stats().idle), (1, large_before), "back on the small list");
        let mut q = Packet::with_linear_len_pooled(COPYBREAK);
        assert_eq!(q.linear().as_ptr(), ptr, "the idle small buffer is handed out again");
        assert_eq!(stats().idle_small, 0);
        q.linear_mut().fill(4);
        assert!(q.to_vec().iter().all(|&b| b == 4));
        drop(q);
        let many: Vec<Vec<u8>> = (0..SMALL_MAX_IDLE + 5).map(|_| take_small_buffer()).collect();
        assert!(many.iter().all(|b| b.len() == SMALL_BUFFER_LEN && b.capacity() == SMALL_BUFFER_LEN));
        for b in many {
            recycle(b);
        }
        assert_eq!(stats().idle_small, SMALL_MAX_IDLE);
        drop(held);
    }

    /// A sent burst's drop ([`Packet::drop_all`]): its small buffers back
    /// on the small list and handed out again, a large one on the large
    /// list, other memory freed; the small list stays bounded; the vector
    /// is left empty with its capacity.
    #[test]
    fn drop_all_gives_a_bursts_small_buffers_back() {
        use crate::packet::{DEFAULT_HEADROOM, Packet};
        // Drain this thread's lists so that every count below is exact.
        let held_small: Vec<Vec<u8>> = (0..stats().idle_small).map(|_| take_small_buffer()).collect();
        let held: Vec<Vec<u8>> = (0..stats().idle).map(|_| take_buffer()).collect();
        let mut pkts = Vec::with_capacity(8);
        pkts.push(Packet::from_frame_pooled(&[1; 60]));
        pkts.push(Packet::from_frame(&[2; 60]));
        pkts.push(Packet::from_frame_pooled(&[3; 9000]));
        pkts.push(Packet::default());
        pkts.push(Packet::from_frame_pooled(&[4; 100]));
        let small: Vec<*const u8> =
            [0, 4].iter().map(|&i| pkts[i].linear()[..0].as_ptr().wrapping_sub(DEFAULT_HEADROOM)).collect();
        Packet::drop_all(&mut pkts);
        assert!(pkts.is_empty() && pkts.capacity() >= 8);
        assert_eq!((stats().idle_small, stats().idle), (2, 1));
        let again = [take_small_buffer(), take_small_buffer()];
        assert_eq!([again[1].as_ptr(), again[0].as_ptr()], [small[0], small[1]], "the packets' own buffers");
        // One short of the bound: of two buffers, one is kept.
        let mut two = vec![Packet::with_linear_len_pooled(60), Packet::with_linear_len_pooled(60)];
        for b in (0..SMALL_MAX_IDLE - 1).map(|_| vec![0; SMALL_BUFFER_LEN]) {
            recycle(b);
        }
        assert_eq!(stats().idle_small, SMALL_MAX_IDLE - 1);
        Packet::drop_all(&mut two);
        assert_eq!(stats().idle_small, SMALL_MAX_IDLE);
        assert!(two.is_empty());
        drop((held_small, held, again));
    }

    /// A burst a driver was lent ([`Packet::recycle_small_all`]): its
    /// small buffers back on the small list, every packet left without
    /// bytes, other memory left to the packets' drop.
    #[test]
    fn recycle_small_all_takes_a_bursts_small_buffers_and_empties_the_packets() {
        use crate::packet::{DEFAULT_HEADROOM, Packet};
        let held_small: Vec<Vec<u8>> = (0..stats().idle_small).map(|_| take_small_buffer()).collect();
        let mut pkts =
            [Packet::from_frame_pooled(&[1; 60]), Packet::from_frame(&[2; 60]), Packet::from_frame_pooled(&[3; 100])];
        let small: Vec<*const u8> =
            [0, 2].iter().map(|&i| pkts[i].linear()[..0].as_ptr().wrapping_sub(DEFAULT_HEADROOM)).collect();
        Packet::recycle_small_all(&mut pkts);
        assert_eq!(stats().idle_small, 2);
        assert!(pkts.iter().all(|p| p.is_empty() && p.linear().is_empty()));
        let again = [take_small_buffer(), take_small_buffer()];
        assert_eq!([again[1].as_ptr(), again[0].as_ptr()], [small[0], small[1]], "the packets' own buffers");
        drop((pkts, held_small, again));
    }

    /// A burst's taker borrows the small list whole and gives it back:
    /// frames take the lent buffers, last first; a superpacket or a buffer
    /// too short is not served from them; a buffer dropped meanwhile joins
    /// them on the return.
    #[test]
    fn small_buffers_are_lent_for_a_burst() {
        use crate::packet::{DEFAULT_HEADROOM, Packet};
        let held: Vec<Vec<u8>> = (0..stats().idle_small).map(|_| take_small_buffer()).collect();
        for _ in 0..3 {
            recycle(vec![0; SMALL_BUFFER_LEN]);
        }
        let mut lent = Vec::new();
        lend_small_buffers(&mut lent);
        assert_eq!((lent.len(), stats().idle_small), (3, 0));
        let top = lent[2].as_ptr() as usize;
        let p = Packet::with_linear_len_from(60, &mut lent);
        assert_eq!((p.linear().as_ptr() as usize, p.linear().len()), (top + DEFAULT_HEADROOM, 60));
        let big = Packet::with_linear_len_from(COPYBREAK + 1, &mut lent);
        assert_eq!((lent.len(), big.linear().len()), (2, COPYBREAK + 1));
        drop(p);
        assert_eq!(stats().idle_small, 1, "dropped meanwhile: on the list");
        return_small_buffers(&mut lent);
        assert!(lent.is_empty());
        assert_eq!(stats().idle_small, 3);
        let mut short = vec![vec![0u8; 16]];
        let p = Packet::with_linear_len_from(60, &mut short);
        assert!(short.is_empty() && p.linear().len() == 60, "a buffer too short is not used");
        drop((held, big, p));
    }

    #[test]
    fn segment_lists_are_recycled_empty() {
        let a = take_segment_list();
        assert!(a.is_empty() && a.capacity() >= MAX_SEGMENTS);
        let mut a = Vec::with_capacity(MAX_SEGMENTS);
        a.push(Segment::Shared(bytes::Bytes::from_static(b"x")));
        let ptr = a.as_ptr();
        recycle_segment_list(a);
        let b = take_segment_list();
        assert_eq!(b.as_ptr(), ptr, "the idle list is handed out again");
        assert!(b.is_empty(), "a recycled list is empty");
        recycle_segment_list(b);
        // A list of another capacity is not pooled.
        recycle_segment_list(Vec::with_capacity(3));
        let c = take_segment_list();
        assert_eq!(c.as_ptr(), ptr, "the foreign list did not take the idle slot's place");
        recycle_segment_list(c);
    }

    /// A dropped aggregate's frag list (GRO's, [`FRAG_LIST_ROOM`]) goes back
    /// to this thread's idle lists, empty, its packets dropped, and is
    /// handed out again; so does one `into_buffers` empties; a list of
    /// another capacity is not kept.
    #[test]
    fn frag_lists_are_recycled_empty() {
        let idle = || IDLE_FRAG_LISTS.with(|idle| idle.borrow().len());
        // Drain this thread's list so that the counts below are exact.
        let held: Vec<Vec<Packet>> =
            std::iter::from_fn(|| IDLE_FRAG_LISTS.with(|idle| idle.borrow_mut().pop())).collect();
        let aggregate = || {
            let mut agg = Packet::from_frame(&[1; 60]);
            agg.reserve_frag_list(FRAG_LIST_ROOM);
            agg.push_frag(Packet::from_frame(&[2; 60]));
            agg
        };
        let agg = aggregate();
        let ptr = agg.frag_list().as_ptr();
        drop(agg);
        assert_eq!(idle(), 1, "the dropped aggregate's list is kept");
        let again = aggregate();
        assert_eq!((again.frag_list().as_ptr(), idle()), (ptr, 0), "and handed out again");
        let mut bufs = Vec::new();
        again.into_buffers(&mut bufs);
        assert_eq!((bufs.len(), idle()), (2, 1), "into_buffers gives both packets' buffers and the list back");
        let list = take_frag_list();
        assert!(list.is_empty() && list.capacity() == FRAG_LIST_ROOM && list.as_ptr() == ptr);
        recycle_frag_list(Vec::with_capacity(FRAG_LIST_ROOM + 1));
        assert_eq!(idle(), 0, "another capacity is not kept");
        recycle_frag_list(list);
        drop(held);
    }

    #[test]
    fn release_all_gives_back_the_buffers_of_the_packets_that_own_one() {
        use crate::packet::Packet;
        // Drain this thread's list so that the count below is exact.
        let held: Vec<Vec<u8>> = (0..stats().idle).map(|_| take_buffer()).collect();
        let big = vec![7u8; 9000];
        let mut pkts = Vec::with_capacity(8);
        for i in 0..6 {
            // Shells (what GRO leaves of a merged packet) between owners.
            pkts.push(if i % 3 == 1 { Packet::from_frame_pooled(&big) } else { Packet::default() });
        }
        Packet::release_all(&mut pkts);
        assert!(pkts.is_empty());
        assert!(pkts.capacity() >= 8, "the burst keeps its capacity");
        assert_eq!(stats().idle, 2, "both pooled buffers came back");
        for b in held {
            recycle(b);
        }
    }

    #[test]
    fn packets_give_their_receive_buffers_back() {
        use crate::packet::{DEFAULT_HEADROOM, Packet};
        // Drain this thread's list so that every count below is exact.
        let held: Vec<Vec<u8>> = (0..stats().idle).map(|_| take_buffer()).collect();
        let big = vec![7u8; 9000];
        let p = Packet::from_frame_pooled(&big);
        assert_eq!(p.to_vec(), big);
        assert_eq!(p.headroom(), DEFAULT_HEADROOM);
        let small_before = stats().idle_small;
        let small = Packet::from_frame_pooled(&big[..COPYBREAK]);
        assert_eq!(small.to_vec(), &big[..COPYBREAK]);
        let small_ptr = small.linear().as_ptr();
        drop(small);
        assert_eq!(stats().idle, 0, "a frame up to COPYBREAK takes no large buffer");
        assert_eq!(stats().idle_small, small_before + 1, "its small buffer came back");
        let again = Packet::from_frame_pooled(&big[..60]);
        assert_eq!(again.linear().as_ptr(), small_ptr, "and is handed out again");
        assert_eq!((again.to_vec(), again.headroom()), (big[..60].to_vec(), DEFAULT_HEADROOM));
        drop(again);
        drop(p);
        assert_eq!(stats().idle, 1, "the pooled buffer came back");
        // A packet to fill: the same choice of buffer.
        let mut p = Packet::with_linear_len_pooled(9000);
        assert_eq!((stats().idle, p.len(), p.headroom()), (0, 9000, DEFAULT_HEADROOM));
        p.linear_mut().copy_from_slice(&big);
        assert_eq!(p.to_vec(), big);
        drop(p);
        let small = Packet::with_linear_len_pooled(60);
        assert_eq!((stats().idle, small.len()), (1, 60), "a small frame does not take a large buffer");
        drop(small);
        assert_eq!(stats().idle, 1);
        // Read-into-buffer hand-over: the buffer becomes the packet's storage.
        let mut buf = take_buffer();
        buf[DEFAULT_HEADROOM..DEFAULT_HEADROOM + 5000].fill(9);
        let p = Packet::from_storage(buf, DEFAULT_HEADROOM, DEFAULT_HEADROOM + 5000).unwrap();
        assert_eq!(stats().idle, 0);
        assert!(p.to_vec().iter().all(|&b| b == 9));
        drop(p);
        assert_eq!(stats().idle, 1);
        drop(held);
    }
}
