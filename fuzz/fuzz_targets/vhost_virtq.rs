//! The vhost-user port's data path (`virtq::pop_tx`, `take_frame`,
//! `complete`, `push_rx`) on guest memory that is entirely fuzzer bytes:
//! descriptor tables, available rings, chains (direct, indirect, looping,
//! pointing anywhere), buffers. Whatever a frontend writes, nothing panics,
//! and: every byte a chain taken from a transmit queue reports (unless it
//! says it is cut) can be read from the buffers it recorded, no more; a
//! frame taken whole is as long as the chain minus its header; a frame
//! placed in a receive queue is placed whole (its
//! bytes and at least one chain), one chain only without `MRG_RXBUF`; a
//! refusal is one of the typed ones.
#![no_main]

use libfuzzer_sys::fuzz_target;
use superpacket_engine::device::vhost_user::virtq::{self, MAX_RX_CHAINS, RxScratch, TxScratch};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

/// Guest memory size: small, so that fuzzer addresses often land in it.
const MEM: usize = 0x4000;

fn queue(m: &GuestMemoryMmap<()>, size: u16, rings: &[u8]) -> Option<Queue> {
    let at = |i: usize, align: u64| {
        u64::from(u16::from_le_bytes([rings[i], rings[i + 1]])) % (MEM as u64) & !(align - 1)
    };
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
});
