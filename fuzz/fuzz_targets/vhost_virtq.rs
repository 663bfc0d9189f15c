//! The vhost-user port's data path (`virtq::pop_tx`, `take_frame`,
//! `complete`, `push_rx`) on guest memory that is entirely fuzzer bytes:
//! descriptor tables, available rings, chains (direct, indirect, looping,
//! pointing anywhere), buffers. Whatever a frontend writes, nothing panics,
//! and: every byte a chain taken from a transmit queue reports (unless it
//! says it is cut) can be read from the buffers it recorded, no more; a
//! frame taken whole is as long as the chain minus its header; a frame
//! placed in a receive queue is placed whole (its
//! bytes and at least one chain), one chain only without `MRG_RXBUF`; a
//! refusal is one of the typed ones. The port's own descriptor walk
//! (`ring::Rings`) is checked against `virtio-queue`'s iterator, which the
//! port used before: every chain gives the same head, length, descriptor
//! count and buffers, or the same fault; and the port's burst path (rings
//! kept in a `RingCache`, the available index through one `AvailCursor`)
//! takes the same chains as the per-call one; a linear frame placed by
//! `push_rx_frame` lands as `push_rx` places it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use superpacket_engine::device::vhost_user::ring::{AvailCursor, RingCache, Rings};
use superpacket_engine::device::vhost_user::virtq::{self, MAX_RX_CHAINS, QueueFault, RxScratch, TxChain, TxScratch};
use virtio_queue::{Queue, QueueOwnedT, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryMmap};

/// Guest memory size: small, so that fuzzer addresses often land in it.
const MEM: usize = 0x4000;

fn queue(m: &GuestMemoryMmap<()>, size: u16, rings: &[u8]) -> Option<Queue> {
    let at =
        |i: usize, align: u64| u64::from(u16::from_le_bytes([rings[i], rings[i + 1]])) % (MEM as u64) & !(align - 1);
    let mut q = Queue::new(256).ok()?;
    q.set_size(size);
    q.try_set_desc_table_address(GuestAddress(at(0, 16))).ok()?;
    q.try_set_avail_ring_address(GuestAddress(at(2, 2))).ok()?;
    q.try_set_used_ring_address(GuestAddress(at(4, 4))).ok()?;
    q.set_ready(true);
    // The backend refuses a queue whose rings are not in guest memory when
    // the frontend sets it up; what is left is what the data path sees.
    q.is_valid(m).then_some(q)
}

/// The chain `virtio-queue`'s iterator makes of the next available entry
/// of `q` (what the port did before its own walk): the same record as
/// `virtq::pop_tx`, the buffers (guest address, length) in `bufs`.
fn reference_pop_tx(
    q: &mut Queue,
    m: &GuestMemoryMmap<()>,
    bufs: &mut Vec<(u64, u32)>,
) -> Result<Option<TxChain>, QueueFault> {
    let avail = q.avail_idx(m, std::sync::atomic::Ordering::Acquire).map_err(|_| QueueFault::Address)?;
    if avail.0 == q.next_avail() {
        return Ok(None);
    }
    let mut it = q.iter(m).map_err(|e| match e {
        virtio_queue::Error::InvalidAvailRingIndex => QueueFault::AvailIndex,
        _ => QueueFault::Address,
    })?;
    let chain = it.next().ok_or(QueueFault::Address)?;
    let head = chain.head_index();
    bufs.clear();
    let (mut len, mut truncated, mut descs, mut last_next) = (0usize, false, 0u16, true);
    for d in chain {
        descs = descs.saturating_add(1);
        last_next = d.has_next();
        if d.is_write_only() {
            return Err(QueueFault::Direction);
        }
        let n = d.len() as usize;
        if n == 0 {
            continue;
        }
        if !m.check_range(d.addr(), n, vm_memory::Permissions::Read) {
            return Err(QueueFault::Address);
        }
        len = len.saturating_add(n);
        if len > virtq::MAX_TX_CHAIN || bufs.len() == virtq::MAX_TX_BUFFERS {
            truncated = true;
        } else {
            bufs.push((d.addr().0, d.len()));
        }
    }
    if descs == 0 || last_next {
        return Err(QueueFault::Chain);
    }
    Ok(Some(TxChain { head, len, truncated, descs }))
}

/// Whether the chain at the next available entry of a queue (descriptor
/// table, available ring, size, next available index) has an indirect
/// descriptor whose table is not all inside `m`.
fn indirect_table_outside((table, avail, size, next): (u64, u64, u16, u16), m: &GuestMemoryMmap<()>) -> bool {
    let entry = GuestAddress(avail + 4 + 2 * u64::from(next % size));
    let Ok(mut i) = m.read_obj::<u16>(entry) else { return false };
    for _ in 0..size {
        let Ok(d) = m.read_obj::<virtio_queue::desc::split::Descriptor>(GuestAddress(table + 16 * u64::from(i))) else {
            return false;
        };
        if d.refers_to_indirect_table() {
            return !m.check_range(d.addr(), d.len() as usize, vm_memory::Permissions::Read);
        }
        if !d.has_next() || d.next() >= size {
            return false;
        }
        i = d.next();
    }
    false
}

/// Whether the byte ranges (start, length) `a` and `b` overlap.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.0 + b.1 && b.0 < a.0 + a.1
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 16 {
        return;
    }
    let (head, body) = data.split_at(16);
    let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).expect("guest memory");
    if m.write_slice(&body[..body.len().min(MEM)], GuestAddress(0)).is_err() {
        return;
    }
    let size = |b: u8| 1u16 << (b % 9);
    let mrg = head[14] & 1 != 0;

    if let Some(mut tx) = queue(&m, size(head[0]), &head[1..7]) {
        let mut scratch = TxScratch::new();
        let mut buf = vec![0u8; virtq::MAX_TX_CHAIN + 1];
        let whole_frames = head[13] & 1 != 0;
        for _ in 0..64 {
            if whole_frames {
                match virtq::take_frame(&mut tx, &m, &mut scratch, 12) {
                    Ok(Some(c)) => {
                        assert!(c.descs >= 1);
                        if let Ok(f) = c.frame {
                            assert!(f.packet.len() <= virtq::MAX_TX_CHAIN - 12);
                        }
                        // The port publishes per burst; here every few frames.
                        if c.descs % 3 == 0 && virtq::publish_used_idx(&tx, &m).is_err() {
                            break;
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
                continue;
            }
            match virtq::pop_tx(&mut tx, &m, &mut scratch) {
                Ok(Some(c)) => {
                    assert!(c.descs >= 1, "{c:?}");
                    if !c.truncated {
                        assert!(c.len <= virtq::MAX_TX_CHAIN, "{c:?}");
                        scratch.read(&m, 0, &mut buf[..c.len]).expect("every byte counted is readable");
                        assert!(scratch.read(&m, 0, &mut buf[..c.len + 1]).is_err(), "no byte more");
                    }
                    if virtq::complete(&mut tx, &m, c.head, 0).is_err() {
                        break;
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
    }

    // The own walk against virtio-queue's, chain by chain, on the same
    // rings; the bytes each recorded are compared through their reads.
    // virtio-queue refuses an available ring at guest address 0 (its sign
    // of a queue reset and not set up again); the port takes the queue the
    // frontend set, so such queues are not compared.
    if let Some(mut tx) = queue(&m, size(head[0]), &head[1..7]).filter(|q| q.avail_ring() != 0) {
        let Some(mut reference) = queue(&m, size(head[0]), &head[1..7]) else { return };
        let (mut scratch, mut bufs) = (TxScratch::new(), Vec::new());
        let mut got = vec![0u8; virtq::MAX_TX_CHAIN];
        let mut want = vec![0u8; virtq::MAX_TX_CHAIN];
        for _ in 0..64 {
            let before = (tx.desc_table(), tx.avail_ring(), tx.size(), tx.next_avail());
            let ours = virtq::pop_tx(&mut tx, &m, &mut scratch);
            let theirs = reference_pop_tx(&mut reference, &m, &mut bufs);
            if ours != theirs {
                // The one difference on purpose: an indirect table must lie
                // inside one region (as DPDK's vhost requires), where
                // virtio-queue reads what it can of it.
                assert_eq!(ours, Err(QueueFault::Chain), "the own walk and virtio-queue's differ: {theirs:?}");
                assert!(indirect_table_outside(before, &m), "a chain refused for no reason: {theirs:?}");
                break;
            }
            let Ok(Some(c)) = ours else { break };
            if !c.truncated {
                scratch.read(&m, 0, &mut got[..c.len]).expect("every byte counted is readable");
                let mut at = 0;
                for &(addr, len) in &bufs {
                    m.read_slice(&mut want[at..at + len as usize], GuestAddress(addr)).expect("checked");
                    at += len as usize;
                }
                assert_eq!(at, c.len);
                assert_eq!(got[..c.len], want[..c.len], "the same bytes");
            }
            assert_eq!(tx.next_avail(), reference.next_avail());
        }
    }

    // The port's burst path (rings kept, the available index loaded once
    // per burst) takes the same chains as the per-call one, and places the
    // same frames, whatever the guest wrote.
    // Two fresh copies of the fuzzer's memory (the sections above wrote
    // used elements into `m`), one per path; where the used ring overlaps
    // the available ring, the elements written change the index the burst
    // path holds and the per-call one reloads: a guest's own doing, not
    // compared.
    let fresh = || {
        let g = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), MEM)]).expect("guest memory");
        g.write_slice(&body[..body.len().min(MEM)], GuestAddress(0)).expect("in memory");
        g
    };
    let (mem, single_mem) = (Arc::new(fresh()), fresh());
    if let (Some(mut burst), Some(mut single)) =
        (queue(&mem, size(head[0]), &head[1..7]), queue(&single_mem, size(head[0]), &head[1..7]))
        && !overlaps(
            (burst.used_ring(), 4 + 8 * u64::from(burst.size())),
            (burst.avail_ring(), 4 + 2 * u64::from(burst.size())),
        )
    {
        let (mut cache, mut cursor) = (RingCache::default(), AvailCursor::default());
        let (mut a, mut b) = (TxScratch::new(), TxScratch::new());
        for _ in 0..64 {
            let ours = Rings::cached(&burst, &mem, &mut cache)
                .and_then(|r| virtq::take_frame_at(&r, &mut burst, &mut cursor, &mut a, 12));
            let theirs = virtq::take_frame(&mut single, &single_mem, &mut b, 12);
            match (&ours, &theirs) {
                (Ok(Some(x)), Ok(Some(y))) => {
                    assert_eq!(x.descs, y.descs);
                    match (&x.frame, &y.frame) {
                        (Ok(f), Ok(g)) => assert_eq!(f.packet.to_vec(), g.packet.to_vec()),
                        (Err(r), Err(s)) => assert_eq!(r, s),
                        _ => panic!("one frame taken, the other dropped"),
                    }
                }
                (Ok(None), Ok(None)) => break,
                (Err(f), Err(g)) => {
                    assert_eq!(f, g);
                    break;
                }
                _ => panic!("burst path {ours:?}, per-call path {theirs:?}"),
            }
        }
    }

    if let Some(mut rx) = queue(&m, size(head[7]), &head[8..14]) {
        let hdr = [0u8; 12];
        let frame = vec![0x5a; 1 + usize::from(head[15]) * 24];
        // One scratch for every frame, as the port keeps one.
        let mut scratch = RxScratch::new();
        for _ in 0..8 {
            match virtq::push_rx(&mut rx, &m, &mut scratch, &hdr, std::iter::once(&frame[..]), frame.len(), mrg) {
                Ok(placed) => {
                    assert_eq!(placed.bytes, hdr.len() + frame.len());
                    assert!(placed.chains >= 1 && placed.chains <= if mrg { MAX_RX_CHAINS } else { 1 });
                    if placed.chains % 2 == 1 && virtq::publish_used_idx(&rx, &m).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    }

    // A linear frame's placement (`push_rx_frame`: written at once into the
    // first buffer when it fits, else as `push_rx`) against `push_rx`, on
    // two fresh copies of the memory: the same results, queue positions
    // and bytes, frame after frame (sizes around a buffer's, both header
    // lengths).
    let (ours_mem, theirs_mem) = (fresh(), fresh());
    if let (Some(mut ours), Some(mut theirs)) =
        (queue(&ours_mem, size(head[7]), &head[8..14]), queue(&theirs_mem, size(head[7]), &head[8..14]))
    {
        let hdr = [head[9]; 12];
        let hdr = &hdr[..if head[13] & 2 != 0 { 10 } else { 12 }];
        let (mut a, mut b) = (RxScratch::new(), RxScratch::new());
        for i in 0..8usize {
            let frame = vec![0xa5 ^ i as u8; usize::from(head[15]) * 8 + i * 7];
            let x = Rings::new(&ours, &ours_mem).map_err(virtq::RxRefused::Fault).and_then(|r| {
                virtq::push_rx_frame(&r, &mut ours, &mut AvailCursor::default(), &mut a, hdr, &frame, mrg)
            });
            let y =
                virtq::push_rx(&mut theirs, &theirs_mem, &mut b, hdr, std::iter::once(&frame[..]), frame.len(), mrg);
            assert_eq!(x, y, "frame {i}");
            assert_eq!((ours.next_avail(), ours.next_used()), (theirs.next_avail(), theirs.next_used()), "frame {i}");
            if x.is_err() {
                break;
            }
        }
        let (mut got, mut want) = (vec![0u8; MEM], vec![0u8; MEM]);
        ours_mem.read_slice(&mut got, GuestAddress(0)).expect("in memory");
        theirs_mem.read_slice(&mut want, GuestAddress(0)).expect("in memory");
        assert!(got == want, "the same bytes placed");
    }
});
