//! Instructions per frame the vhost-user port spends taking frames from a
//! guest's transmit queue (`virtq::take_frame`: the chain walked, its
//! bytes copied into a packet, the `virtio_net_hdr` imported, the chain
//! given back), for callgrind:
//!
//! ```sh
//! cargo build --release -p superpacket-engine --example vhost_rx_instructions
//! valgrind --tool=callgrind --toggle-collect='*rx_burst*' \
//!     target/release/examples/vhost_rx_instructions 64|tso [split]
//! ```
//!
//! Ir per frame = callgrind's `Collected` / (`ROUNDS` x `BATCH`), printed by
//! the program as the divisor. `64`: 64-byte UDP frames (60 bytes of frame
//! behind the 12-byte header); `tso`: TCPv4 superpackets of 62,000 bytes
//! of payload (`GSO_TCPV4`, `NEEDS_CSUM`). Each chain is one descriptor
//! (header and frame together, as DPDK's virtio-user sends when the header
//! fits the mbuf's headroom), or with `split` two (header, then frame, as
//! Linux guests send). The guest memory is `vm-memory`'s mmap-backed
//! memory, as a frontend's table is mapped; the packets are dropped outside
//! the counted function (their pool buffers recycled, as in the engine).

use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, VirtioNetHdr};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::vhost_user::virtq::{self, TxScratch};
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const ROUNDS: usize = 200;
const BATCH: usize = 32;
const QUEUE: u16 = 256;
const DESC: u64 = 0x1000;
const AVAIL: u64 = 0x4000;
const USED: u64 = 0x5000;
const BUFS: u64 = 0x10000;
/// Room per chain in guest memory.
const SLOT: u64 = 0x11000;
const F_NEXT: u16 = 1;

fn desc(m: &GuestMemoryMmap<()>, i: u16, addr: u64, len: usize, flags: u16, next: u16) {
    let at = DESC + 16 * u64::from(i);
    m.write_obj(addr.to_le(), GuestAddress(at)).expect("in memory");
    m.write_obj((len as u32).to_le(), GuestAddress(at + 8)).expect("in memory");
    m.write_obj(flags.to_le(), GuestAddress(at + 12)).expect("in memory");
    m.write_obj(next.to_le(), GuestAddress(at + 14)).expect("in memory");
}

#[inline(never)]
fn rx_burst(
    q: &mut Queue,
    m: &GuestMemoryMmap<()>,
    scratch: &mut TxScratch,
    out: &mut Vec<superpacket::packet::Packet>,
) {
    for _ in 0..BATCH {
        match virtq::take_frame(q, m, scratch, 12) {
            Ok(Some(c)) => out.push(c.frame.expect("the harness's frames are valid").packet),
            other => panic!("no frame: {other:?}"),
        }
    }
}

fn main() {
    let kind = std::env::args().nth(1).unwrap_or_else(|| "64".into());
    let split = std::env::args().nth(2).as_deref() == Some("split");
    let mut flow = match kind.as_str() {
        "64" => Flow::new(FlowSpec::new(Transport::Udp, false, 1)),
        "tso" => Flow::new(FlowSpec::new(Transport::Tcp, false, 1)),
        other => panic!("unknown kind {other} (64 or tso)"),
    };
    let packet = if kind == "64" {
        let hl = flow.spec.header_len();
        superpacket::packet::Packet::from_frame(&flow.frame(60 - hl, TcpFlags::empty()).expect("fits"))
    } else {
        flow.superpacket(62_000, 1448, TcpFlags::empty()).expect("fits")
    };
    let frame = packet.to_vec();
    let mut hdr = [0u8; 12];
    VirtioNetHdr::from_meta(&packet.meta, &frame, false)
        .and_then(|h| h.emit(&mut hdr, HdrLayout::MrgRxbuf, HdrByteOrder::Little))
        .expect("a valid header");

    let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), (BUFS + SLOT * u64::from(QUEUE)) as usize)])
        .expect("guest memory");
    for slot in 0..QUEUE {
        let at = BUFS + SLOT * u64::from(slot);
        m.write_slice(&hdr, GuestAddress(at)).expect("in memory");
        m.write_slice(&frame, GuestAddress(at + 12)).expect("in memory");
    }
    // Chains of one descriptor use descriptors 0..QUEUE/2; split chains two each.
    let heads: Vec<u16> = (0..QUEUE / 2).map(|i| if split { 2 * i } else { i }).collect();
    for (slot, &h) in heads.iter().enumerate() {
        let at = BUFS + SLOT * slot as u64;
        if split {
            desc(&m, h, at, 12, F_NEXT, h + 1);
            desc(&m, h + 1, at + 12, frame.len(), 0, 0);
        } else {
            desc(&m, h, at, 12 + frame.len(), 0, 0);
        }
    }
    let mut q = Queue::new(QUEUE).expect("queue");
    q.set_size(QUEUE);
    q.try_set_desc_table_address(GuestAddress(DESC)).expect("aligned");
    q.try_set_avail_ring_address(GuestAddress(AVAIL)).expect("aligned");
    q.try_set_used_ring_address(GuestAddress(USED)).expect("aligned");
    q.set_ready(true);
    assert!(q.is_valid(&m));

    let mut scratch = TxScratch::new();
    let mut out = Vec::with_capacity(BATCH);
    let mut avail = 0u16;
    for round in 0..ROUNDS {
        // The guest offers BATCH more chains (the ring entries wrap).
        for i in 0..BATCH {
            let slot = (round * BATCH + i) % heads.len();
            let at = AVAIL + 4 + 2 * u64::from(avail % QUEUE);
            m.write_obj(heads[slot].to_le(), GuestAddress(at)).expect("in memory");
            avail = avail.wrapping_add(1);
        }
        m.write_obj(avail.to_le(), GuestAddress(AVAIL + 2)).expect("in memory");
        rx_burst(&mut q, &m, &mut scratch, &mut out);
        for p in out.drain(..) {
            assert_eq!(p.len(), frame.len());
        }
    }
    println!("frames: {} (divide callgrind's Collected by this)", ROUNDS * BATCH);
}
