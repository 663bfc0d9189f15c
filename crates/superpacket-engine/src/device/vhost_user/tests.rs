//! The vhost-user data path against guest memory built by hand
//! (`vm-memory`'s mmap-backed test memory): good chains, hostile ones
//! (loops, addresses outside memory, bad indices, wrong directions, nested
//! indirect tables), `MRG_RXBUF` placement and its rollback.

use super::ctrl::{self, Command};
use super::virtq::{self, QueueFault, RxRefused};
use super::*;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const MEM: usize = 0x10000;
pub(super) const DESC: u64 = 0x1000;
pub(super) const AVAIL: u64 = 0x2000;
pub(super) const USED: u64 = 0x3000;
pub(super) const SIZE: u16 = 16;
pub(super) const F_NEXT: u16 = 1;
pub(super) const F_WRITE: u16 = 2;
const F_INDIRECT: u16 = 4;

fn mem() -> GuestMemoryMmap<()> {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).unwrap()
}

fn queue(m: &GuestMemoryMmap<()>) -> Queue {
    let mut q = Queue::new(SIZE).unwrap();
    q.set_size(SIZE);
    q.try_set_desc_table_address(GuestAddress(DESC)).unwrap();
    q.try_set_avail_ring_address(GuestAddress(AVAIL)).unwrap();
    q.try_set_used_ring_address(GuestAddress(USED)).unwrap();
    q.set_ready(true);
    assert!(q.is_valid(m));
    q
}

pub(super) fn desc_at(m: &GuestMemoryMmap<()>, table: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
    let at = GuestAddress(table + 16 * u64::from(i));
    m.write_obj(addr.to_le(), at).unwrap();
    m.write_obj(len.to_le(), GuestAddress(at.0 + 8)).unwrap();
    m.write_obj(flags.to_le(), GuestAddress(at.0 + 12)).unwrap();
    m.write_obj(next.to_le(), GuestAddress(at.0 + 14)).unwrap();
}

pub(super) fn desc(m: &GuestMemoryMmap<()>, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
    desc_at(m, DESC, i, addr, len, flags, next);
}

/// Makes chains starting at `heads` available (avail idx = their count).
fn offer(m: &GuestMemoryMmap<()>, heads: &[u16]) {
    for (i, h) in heads.iter().enumerate() {
        m.write_obj(h.to_le(), GuestAddress(AVAIL + 4 + 2 * i as u64)).unwrap();
    }
    m.write_obj((heads.len() as u16).to_le(), GuestAddress(AVAIL + 2)).unwrap();
}

fn used_idx(m: &GuestMemoryMmap<()>) -> u16 {
    m.read_obj::<u16>(GuestAddress(USED + 2)).unwrap()
}

pub(super) fn used_elem(m: &GuestMemoryMmap<()>, i: u64) -> (u32, u32) {
    let at = USED + 4 + 8 * i;
    (m.read_obj::<u32>(GuestAddress(at)).unwrap(), m.read_obj::<u32>(GuestAddress(at + 4)).unwrap())
}

#[test]
fn a_two_descriptor_chain_is_read_whole_and_completed() {
    let m = mem();
    let mut q = queue(&m);
    m.write_slice(&[0xaa; 12], GuestAddress(0x4000)).unwrap();
    m.write_slice(&[0xbb; 60], GuestAddress(0x5000)).unwrap();
    desc(&m, 0, 0x4000, 12, F_NEXT, 1);
    desc(&m, 1, 0x5000, 60, 0, 0);
    offer(&m, &[0]);
    let mut scratch = virtq::TxScratch::new();
    let c = virtq::pop_tx(&mut q, &m, &mut scratch).unwrap().unwrap();
    assert_eq!((c.head, c.len, c.truncated, c.descs), (0, 72, false, 2));
    let mut buf = [0u8; 72];
    scratch.read(&m, 0, &mut buf).unwrap();
    assert_eq!(&buf[..12], &[0xaa; 12]);
    assert_eq!(&buf[12..72], &[0xbb; 60]);
    // Any byte range, across the buffers' boundary; not beyond the chain.
    let mut mid = [0u8; 4];
    scratch.read(&m, 10, &mut mid).unwrap();
    assert_eq!(mid, [0xaa, 0xaa, 0xbb, 0xbb]);
    assert_eq!(scratch.read(&m, 70, &mut mid), Err(QueueFault::Address));
    virtq::complete(&mut q, &m, c.head, 0).unwrap();
    assert_eq!(used_idx(&m), 1);
    assert_eq!(virtq::pop_tx(&mut q, &m, &mut scratch).unwrap(), None);
    // A chain longer than the largest frame is said to be cut.
    for i in 2..7u16 {
        desc(&m, i, 0x4000, 0x8000, F_NEXT, i + 1);
    }
    desc(&m, 7, 0x4000, 0x8000, 0, 0);
    offer(&m, &[0, 2]);
    let c = virtq::pop_tx(&mut q, &m, &mut scratch).unwrap().unwrap();
    assert!(c.truncated && c.len == 6 * 0x8000, "{c:?}");
}

/// The frame goes from the guest's buffers into the packet once; the
/// chain is given back after the copy; a header the kernel's validation
/// refuses drops the frame (the chain is given back all the same).
#[test]
fn take_frame_imports_the_header_and_copies_the_frame_once() {
    let m = mem();
    let mut q = queue(&m);
    let frame: Vec<u8> = (0..60u8).collect();
    // NEEDS_CSUM with csum_start 14, csum_offset 6 (a UDP checksum field).
    let mut hdr = [0u8; 12];
    hdr[0] = 1;
    hdr[6..8].copy_from_slice(&14u16.to_le_bytes());
    hdr[8..10].copy_from_slice(&6u16.to_le_bytes());
    m.write_slice(&hdr, GuestAddress(0x4000)).unwrap();
    m.write_slice(&frame[..20], GuestAddress(0x5000)).unwrap();
    m.write_slice(&frame[20..], GuestAddress(0x6000)).unwrap();
    desc(&m, 0, 0x4000, 12, F_NEXT, 1);
    desc(&m, 1, 0x5000, 20, F_NEXT, 2);
    desc(&m, 2, 0x6000, 40, 0, 0);
    // A header asking for a checksum beyond the frame: refused.
    let mut bad = hdr;
    bad[6..8].copy_from_slice(&100u16.to_le_bytes());
    m.write_slice(&bad, GuestAddress(0x7000)).unwrap();
    desc(&m, 3, 0x7000, 12, F_NEXT, 1);
    // A chain shorter than a header.
    desc(&m, 4, 0x4000, 5, 0, 0);
    offer(&m, &[0, 3, 4]);
    let mut scratch = virtq::TxScratch::new();
    let c = virtq::take_frame(&mut q, &m, &mut scratch, 12).unwrap().unwrap();
    let f = c.frame.unwrap();
    assert_eq!((c.descs, f.packet.to_vec(), f.csum_partial), (3, frame.clone(), true));
    assert!(
        matches!(f.packet.meta.csum, superpacket::packet::ChecksumState::Partial { start: 14, offset: 6 }),
        "{:?}",
        f.packet.meta
    );
    // The chain is in the used ring; the index waits for the burst's end.
    assert_eq!((used_idx(&m), q.next_used(), used_elem(&m, 0)), (0, 1, (0, 0)));
    virtq::publish_used_idx(&q, &m).unwrap();
    assert_eq!(used_idx(&m), 1);
    for n in [2u16, 3] {
        let c = virtq::take_frame(&mut q, &m, &mut scratch, 12).unwrap().unwrap();
        assert!(c.frame.is_err(), "chain {n}: {:?}", c.frame);
        virtq::publish_used_idx(&q, &m).unwrap();
        assert_eq!(used_idx(&m), n, "the chain is given back");
    }
    assert!(virtq::take_frame(&mut q, &m, &mut scratch, 12).unwrap().is_none());
}

#[test]
fn an_indirect_table_is_followed_and_a_nested_one_refused() {
    let m = mem();
    let mut q = queue(&m);
    const TABLE: u64 = 0x6000;
    desc_at(&m, TABLE, 0, 0x4000, 12, F_NEXT, 1);
    desc_at(&m, TABLE, 1, 0x5000, 100, 0, 0);
    desc(&m, 0, TABLE, 32, F_INDIRECT, 0);
    offer(&m, &[0]);
    let mut scratch = virtq::TxScratch::new();
    let c = virtq::pop_tx(&mut q, &m, &mut scratch).unwrap().unwrap();
    assert_eq!((c.len, c.descs), (112, 2));
    // An indirect descriptor inside an indirect table.
    desc_at(&m, TABLE, 1, TABLE, 32, F_INDIRECT, 0);
    offer(&m, &[0, 0]);
    assert_eq!(virtq::pop_tx(&mut q, &m, &mut scratch), Err(QueueFault::Chain));
}

#[test]
fn hostile_chains_stop_the_queue_without_a_panic() {
    let mut scratch = virtq::TxScratch::new();
    type Setup<'a> = &'a dyn Fn(&GuestMemoryMmap<()>);
    let cases: [(&str, Setup<'_>, QueueFault); 8] = [
        (
            "a loop",
            &|m| {
                desc(m, 0, 0x4000, 10, F_NEXT, 1);
                desc(m, 1, 0x4000, 10, F_NEXT, 0);
                offer(m, &[0]);
            },
            QueueFault::Chain,
        ),
        (
            "a self loop",
            &|m| {
                desc(m, 3, 0x4000, 10, F_NEXT, 3);
                offer(m, &[3]);
            },
            QueueFault::Chain,
        ),
        (
            "next outside the table",
            &|m| {
                desc(m, 0, 0x4000, 10, F_NEXT, 200);
                offer(m, &[0]);
            },
            QueueFault::Chain,
        ),
        ("a head outside the table", &|m| offer(m, &[SIZE + 3]), QueueFault::Chain),
        (
            "a buffer outside memory",
            &|m| {
                desc(m, 0, 0xffff_0000, 100, 0, 0);
                offer(m, &[0]);
            },
            QueueFault::Address,
        ),
        (
            "a buffer running off the end of memory",
            &|m| {
                desc(m, 0, MEM as u64 - 10, 100, 0, 0);
                offer(m, &[0]);
            },
            QueueFault::Address,
        ),
        (
            "a writable buffer to transmit",
            &|m| {
                desc(m, 0, 0x4000, 100, F_WRITE, 0);
                offer(m, &[0]);
            },
            QueueFault::Direction,
        ),
        (
            "an avail index far ahead",
            &|m| {
                desc(m, 0, 0x4000, 100, 0, 0);
                m.write_obj((SIZE + 5).to_le(), GuestAddress(AVAIL + 2)).unwrap();
            },
            QueueFault::AvailIndex,
        ),
    ];
    for (what, set, want) in cases {
        let m = mem();
        let mut q = queue(&m);
        set(&m);
        assert_eq!(virtq::pop_tx(&mut q, &m, &mut scratch), Err(want), "{what}");
        assert_eq!(used_idx(&m), 0, "{what}: nothing given back");
    }
    // A misaligned indirect table and one outside memory.
    for (addr, len) in [(0x6000u64, 20u32), (0xffff_0000, 32)] {
        let m = mem();
        let mut q = queue(&m);
        desc(&m, 0, addr, len, F_INDIRECT, 0);
        offer(&m, &[0]);
        assert_eq!(virtq::pop_tx(&mut q, &m, &mut scratch), Err(QueueFault::Chain), "indirect {addr:#x}/{len}");
    }
}

#[test]
fn a_frame_in_one_chain_says_one_buffer() {
    // The header's num_buffers is the port's to set: 1 for a frame that
    // fits one chain, with MRG_RXBUF or without, whatever the caller's
    // header bytes held.
    for mrg in [true, false] {
        let mut rxs = virtq::RxScratch::new();
        let m = mem();
        let mut q = queue(&m);
        desc(&m, 0, 0x4000, 2048, F_WRITE, 0);
        offer(&m, &[0]);
        let hdr = [0x11u8; 12];
        let frame: Vec<u8> = (0..60u32).map(|i| i as u8).collect();
        let placed = virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 60, mrg).unwrap();
        assert_eq!((placed.chains, placed.bytes), (1, 72), "mrg {mrg}");
        let mut got = vec![0u8; 72];
        m.read_slice(&mut got, GuestAddress(0x4000)).unwrap();
        assert_eq!(&got[..10], &[0x11; 10], "mrg {mrg}");
        assert_eq!(u16::from_le_bytes([got[10], got[11]]), 1, "num_buffers, mrg {mrg}");
        assert_eq!(&got[12..], &frame[..], "mrg {mrg}");
    }
}

#[test]
fn mergeable_buffers_carry_a_frame_over_several_chains() {
    let mut rxs = virtq::RxScratch::new();
    let m = mem();
    let mut q = queue(&m);
    for i in 0..4u16 {
        desc(&m, i, 0x4000 + 0x100 * u64::from(i), 100, F_WRITE, 0);
    }
    offer(&m, &[0, 1, 2, 3]);
    let hdr = [0x11u8; 12];
    let frame: Vec<u8> = (0..250u32).map(|i| i as u8).collect();
    let placed =
        virtq::push_rx(&mut q, &m, &mut rxs, &hdr, [&frame[..100], &frame[100..]].into_iter(), 250, true).unwrap();
    assert_eq!((placed.chains, placed.bytes), (3, 262));
    assert_eq!((used_idx(&m), q.next_used()), (0, 3), "written, not yet published");
    virtq::publish_used_idx(&q, &m).unwrap();
    assert_eq!(used_idx(&m), 3);
    assert_eq!((used_elem(&m, 0), used_elem(&m, 1), used_elem(&m, 2)), ((0, 100), (1, 100), (2, 62)));
    let mut got = vec![0u8; 300];
    for i in 0..3u64 {
        m.read_slice(&mut got[100 * i as usize..100 * (i as usize + 1)], GuestAddress(0x4000 + 0x100 * i)).unwrap();
    }
    assert_eq!(&got[..10], &[0x11; 10]);
    assert_eq!(u16::from_le_bytes([got[10], got[11]]), 3, "num_buffers");
    assert_eq!(&got[12..262], &frame[..]);
    // One chain left (100 bytes): a 250-byte frame waits, the chain given back.
    assert_eq!(
        virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 250, true),
        Err(RxRefused::NoRoom)
    );
    assert_eq!(q.next_avail(), 3);
    // Without MRG_RXBUF a frame must fit one chain.
    assert_eq!(
        virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 250, false),
        Err(RxRefused::TooBig)
    );
    assert_eq!(q.next_avail(), 3);
    let placed = virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..50]), 50, false).unwrap();
    assert_eq!(placed.chains, 1);
    virtq::publish_used_idx(&q, &m).unwrap();
    assert_eq!(used_idx(&m), 4);
}

/// A frame over several chains is announced with one used-index store
/// (virtio 1.2, 5.1.6.4.2: "use all buffers used by a single receive packet
/// together"); the guest is notified per `EVENT_IDX` of the receive queue.
#[test]
fn a_frames_chains_are_published_together_and_notified_per_event_idx() {
    let mut rxs = virtq::RxScratch::new();
    let m = mem();
    let mut q = queue(&m);
    for i in 0..8u16 {
        desc(&m, i, 0x4000 + 0x100 * u64::from(i), 100, F_WRITE, 0);
    }
    offer(&m, &[0, 1, 2, 3, 4, 5, 6, 7]);
    let hdr = [0u8; 12];
    let frame = [7u8; 388];
    let placed = virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 388, true).unwrap();
    assert_eq!(placed.chains, 4);
    assert_eq!((used_idx(&m), q.next_used()), (0, 4));
    virtq::publish_used_idx(&q, &m).unwrap();
    assert_eq!((used_idx(&m), q.next_used()), (4, 4));
    for i in 0..4 {
        assert_eq!(used_elem(&m, i), (i as u32, 100));
    }
    // Without EVENT_IDX: always, once something was used since.
    assert!(virtq::wants_notification(&q, &m, 0).unwrap());
    assert!(!virtq::wants_notification(&q, &m, 4).unwrap());
    // ... unless the guest set VIRTQ_AVAIL_F_NO_INTERRUPT.
    m.write_obj(1u16.to_le(), GuestAddress(AVAIL)).unwrap();
    assert!(virtq::interrupts_suppressed(&q, &m).unwrap());
    assert!(!virtq::wants_notification(&q, &m, 0).unwrap());
    m.write_obj(0u16.to_le(), GuestAddress(AVAIL)).unwrap();
    assert!(virtq::wants_notification(&q, &m, 0).unwrap());
    // With it: only if used_event lies in [since, next_used).
    q.set_event_idx(true);
    let used_event = GuestAddress(AVAIL + 4 + 2 * u64::from(SIZE));
    for (event, since, want) in [(0u16, 0u16, true), (3, 0, true), (4, 0, false), (2, 3, false), (3, 3, true)] {
        m.write_obj(event.to_le(), used_event).unwrap();
        assert_eq!(virtq::wants_notification(&q, &m, since).unwrap(), want, "used_event {event}, since {since}");
    }
    // A used ring the guest moved outside its memory is a fault, not a panic.
    q.set_next_used(0);
    let mut bad = Queue::new(SIZE).unwrap();
    bad.set_size(SIZE);
    bad.try_set_used_ring_address(GuestAddress(MEM as u64 - 4)).unwrap();
    assert_eq!(virtq::publish_used(&mut bad, &m, &[(0, 1)]), Err(QueueFault::Address));
    assert_eq!(virtq::publish_used(&mut q, &m, &[(SIZE, 1)]), Err(QueueFault::Address));
}

/// A frame that every buffer of the ring cannot hold is refused, not
/// waited for (the guest cannot ever offer more).
#[test]
fn a_frame_larger_than_the_whole_ring_is_too_big() {
    let mut rxs = virtq::RxScratch::new();
    let m = mem();
    let mut q = queue(&m);
    let heads: Vec<u16> = (0..SIZE).collect();
    for &i in &heads {
        desc(&m, i, 0x4000 + 0x100 * u64::from(i), 100, F_WRITE, 0);
    }
    offer(&m, &heads);
    let frame = [3u8; 2000];
    let r = virtq::push_rx(&mut q, &m, &mut rxs, &[0u8; 12], std::iter::once(&frame[..]), 2000, true);
    assert_eq!(r, Err(RxRefused::TooBig));
    assert_eq!((q.next_avail(), used_idx(&m)), (0, 0));
}

/// A receive chain of more descriptors than are counted can only end a
/// frame (every chain but the last must be filled to its full length).
#[test]
fn a_chain_with_uncounted_descriptors_only_ends_a_frame() {
    let mut rxs = virtq::RxScratch::new();
    const TABLE: u64 = 0x6000;
    let m = mem();
    let mut q = queue(&m);
    // 70 descriptors of 4 bytes in an indirect table: 64 are counted (256 bytes).
    for i in 0..70u16 {
        let next = if i < 69 { F_NEXT } else { 0 };
        desc_at(&m, TABLE, i, 0x8000 + 4 * u64::from(i), 4, F_WRITE | next, i + 1);
    }
    desc(&m, 0, TABLE, 70 * 16, F_INDIRECT, 0);
    desc(&m, 1, 0x4000, 2000, F_WRITE, 0);
    offer(&m, &[0, 1]);
    let hdr = [0u8; 12];
    let frame = [1u8; 400];
    assert_eq!(
        virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 400, true),
        Err(RxRefused::TooBig)
    );
    assert_eq!((q.next_avail(), used_idx(&m)), (0, 0));
    let placed = virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..200]), 200, true).unwrap();
    assert_eq!((placed.chains, used_elem(&m, 0)), (1, (0, 212)));
}

#[test]
fn hostile_receive_chains_stop_the_queue() {
    let mut rxs = virtq::RxScratch::new();
    let hdr = [0u8; 12];
    let frame = [0u8; 60];
    for (what, flags, addr, want) in [
        ("a readable buffer to receive", 0u16, 0x4000u64, QueueFault::Direction),
        ("a buffer outside memory", F_WRITE, 0xffff_0000, QueueFault::Address),
    ] {
        let m = mem();
        let mut q = queue(&m);
        desc(&m, 0, addr, 100, flags, 0);
        offer(&m, &[0]);
        assert_eq!(
            virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 60, true),
            Err(RxRefused::Fault(want)),
            "{what}"
        );
        assert_eq!(used_idx(&m), 0);
    }
    // Zero-length buffers: the frame is refused, nothing spins.
    let m = mem();
    let mut q = queue(&m);
    desc(&m, 0, 0x4000, 0, F_WRITE, 0);
    offer(&m, &[0]);
    assert_eq!(
        virtq::push_rx(&mut q, &m, &mut rxs, &hdr, std::iter::once(&frame[..]), 60, true),
        Err(RxRefused::TooBig)
    );
}

#[test]
fn guest_features_map_onto_port_features() {
    use features as f;
    assert_eq!(netdev_features(0), BASE_FEATURES);
    assert_eq!(netdev_features(f::GUEST_TSO4), BASE_FEATURES, "TSO needs GUEST_CSUM");
    let all = netdev_features(f::DEFAULT);
    assert!(all.contains(
        NetdevFeatures::HW_CSUM
            | NetdevFeatures::TSO
            | NetdevFeatures::TSO6
            | NetdevFeatures::TSO_ECN
            | NetdevFeatures::GSO_UDP_L4
    ));
    let csum_only = netdev_features(f::GUEST_CSUM | f::GUEST_USO4);
    assert!(csum_only.contains(NetdevFeatures::HW_CSUM));
    assert!(!csum_only.intersects(NetdevFeatures::TSO | NetdevFeatures::GSO_UDP_L4));
}

#[test]
fn topology_builds_vhost_user_ports_and_refuses_bad_keys() {
    use crate::device::topology::{BuildOptions, Topology};
    let dir = tempfile::tempdir().unwrap();
    let build = |src: &str, workers: usize| {
        let opts = BuildOptions { base_dir: Some(dir.path().to_path_buf()), workers, ..BuildOptions::default() };
        Topology::parse(src).and_then(|t| t.build_with(&opts)).map_err(|e| e.to_string())
    };
    let port = |driver: &str| format!("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {driver}\n");
    let mut g =
        build(&port(r#"{ kind = "vhost-user", socket = "v.sock", offloads = ["csum"], ring = 256 }"#), 1).unwrap();
    assert!(dir.path().join("v.sock").exists());
    let id = g.id("p").unwrap();
    let d = g.port_driver_mut(id).unwrap();
    assert_eq!(d.kind(), "vhost-user");
    assert!(d.poll_fd().is_some());
    // No guest yet: no offloads, and transmitting is a counted drop.
    assert_eq!(d.hw_features(), BASE_FEATURES);
    let v = d.as_any_mut().downcast_mut::<VhostUserDriver>().unwrap();
    assert_eq!(v.opts.queue_size, 256);
    assert_eq!(v.handle.shared.offered & features::OFFLOADS, features::CSUM | features::GUEST_CSUM);
    assert_eq!(v.handle.shared.offered & features::MQ, 0, "one worker: no MQ");
    assert_eq!(v.xmit(Packet::from_frame(&[0u8; 60])).unwrap_err().reason, "vhost-no-guest");
    assert!(v.recv().is_none());
    drop(g);
    assert!(!dir.path().join("v.sock").exists(), "the socket file goes with the port");
    for (driver, want) in [
        (r#"{ kind = "vhost-user" }"#, "a vhost-user driver needs `socket`"),
        (r#""vhost-user""#, "a vhost-user driver is a table"),
        (r#"{ kind = "vhost-user", socket = "x.sock", mode = "peer" }"#, "unknown vhost-user mode `peer`"),
        (r#"{ kind = "vhost-user", socket = "x.sock", ring = 100 }"#, "ring 100 is not a power of two"),
        (r#"{ kind = "vhost-user", socket = "x.sock", offloads = ["lro"] }"#, "unknown vhost-user offload `lro`"),
        (r#"{ kind = "vhost-user", socket = "x.sock", batch = 4 }"#, "key `batch` does not apply"),
    ] {
        let e = build(&port(driver), 1).unwrap_err();
        assert!(e.contains(want), "{driver}: {e}");
    }
    // A socket in use by a live port is refused.
    let _g = build(&port(r#"{ kind = "vhost-user", socket = "live.sock" }"#), 1).unwrap();
    let e = build(&port(r#"{ kind = "vhost-user", socket = "live.sock" }"#), 1).unwrap_err();
    assert!(e.contains("another endpoint is listening"), "{e}");
}

#[test]
fn workers_share_one_socket_with_one_queue_pair_each() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VhostUserOptions::new(dir.path().join("mq.sock"));
    let a = VhostUserDriver::open_worker(&opts, 2).unwrap();
    let b = VhostUserDriver::open_worker(&opts, 2).unwrap();
    assert_eq!((a.queue_pair(), b.queue_pair()), (0, 1));
    assert!(Arc::ptr_eq(&a.handle, &b.handle));
    assert_ne!(a.poll_fd(), b.poll_fd());
    assert_ne!(a.handle.shared.offered & features::MQ, 0);
    assert_ne!(a.handle.shared.offered & features::CTRL_VQ, 0, "virtio requires CTRL_VQ with MQ");
    // A third worker's port is a new port: the socket is taken.
    assert!(VhostUserDriver::open_worker(&opts, 2).is_err());
}

/// Writes command `bytes` at 0x4000 and an ack byte buffer at 0x5000 as
/// chain `head` (descriptors `head`, `head + 1`) and returns what the
/// control queue made of it and the ack byte.
fn ctrl_command(m: &GuestMemoryMmap<()>, q: &mut Queue, bytes: &[u8], n: u16) -> (Option<Command>, u8) {
    let head = 2 * (n % (SIZE / 2));
    m.write_slice(bytes, GuestAddress(0x4000)).unwrap();
    m.write_obj(0xeeu8, GuestAddress(0x5000)).unwrap();
    desc(m, head, 0x4000, bytes.len() as u32, F_NEXT, head + 1);
    desc(m, head + 1, 0x5000, 1, F_WRITE, 0);
    m.write_obj(head.to_le(), GuestAddress(AVAIL + 4 + 2 * u64::from(n % SIZE))).unwrap();
    m.write_obj((n + 1).to_le(), GuestAddress(AVAIL + 2)).unwrap();
    let c = ctrl::serve_one(q, m, 4).unwrap();
    (c, m.read_obj::<u8>(GuestAddress(0x5000)).unwrap())
}

#[test]
fn the_control_queue_sets_queue_pairs_and_refuses_other_commands() {
    let m = mem();
    let mut q = queue(&m);
    let cases: [(&[u8], Option<Command>, u8); 6] = [
        (&[4, 0, 2, 0], Some(Command::PairsSet(2)), ctrl::ACK_OK),
        (&[4, 0, 4, 0], Some(Command::PairsSet(4)), ctrl::ACK_OK),
        (&[4, 0, 5, 0], Some(Command::Refused { class: 4, command: 0 }), ctrl::ACK_ERR),
        (&[4, 0, 0, 0], Some(Command::Refused { class: 4, command: 0 }), ctrl::ACK_ERR),
        (&[4, 0, 1], Some(Command::Refused { class: 4, command: 0 }), ctrl::ACK_ERR),
        // VIRTIO_NET_CTRL_RX_PROMISC: CTRL_RX is not offered.
        (&[0, 0, 1], Some(Command::Refused { class: 0, command: 0 }), ctrl::ACK_ERR),
    ];
    for (n, (bytes, want, ack)) in cases.into_iter().enumerate() {
        assert_eq!(ctrl_command(&m, &mut q, bytes, n as u16), (want, ack), "{bytes:?}");
        assert_eq!(used_idx(&m), n as u16 + 1);
    }
    assert_eq!(ctrl::serve_one(&mut q, &m, 4), Ok(None));
    // A command without a writable ack byte, or with the ack first: the
    // queue is broken.
    for flags in [(F_NEXT, 0), (F_NEXT | F_WRITE, 0)] {
        let m = mem();
        let mut q = queue(&m);
        desc(&m, 0, 0x5000, 1, flags.0, 1);
        desc(&m, 1, 0x4000, 4, flags.1, 0);
        offer(&m, &[0]);
        assert_eq!(ctrl::serve_one(&mut q, &m, 4), Err(QueueFault::Direction), "{flags:?}");
        assert_eq!(used_idx(&m), 0);
    }
    // An ack byte outside memory.
    let m = mem();
    let mut q = queue(&m);
    desc(&m, 0, 0x4000, 4, F_NEXT, 1);
    desc(&m, 1, 0xffff_0000, 1, F_WRITE, 0);
    offer(&m, &[0]);
    assert_eq!(ctrl::serve_one(&mut q, &m, 4), Err(QueueFault::Address));
}

/// A memfd of `len` bytes, sealable or not (`MFD_ALLOW_SEALING`).
pub(super) fn memfd(len: u64, sealable: bool) -> std::fs::File {
    use std::os::fd::FromRawFd;
    let flags = libc::MFD_CLOEXEC | if sealable { libc::MFD_ALLOW_SEALING } else { 0 };
    // SAFETY: a NUL-terminated name and valid flags.
    let fd = unsafe { libc::memfd_create(c"sp-vhost-test".as_ptr(), flags) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just created and is owned by nothing else.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

/// The port-wide driver counter `name` of `d`.
pub(super) fn port_counter(d: &VhostUserDriver, name: &str) -> u64 {
    let mut v = None;
    d.driver_counters(&mut |n, x| {
        if n == name {
            v = Some(x);
        }
    });
    v.unwrap_or_else(|| panic!("no counter {name}"))
}

/// Waits (5 s) until counter `name` of `d` is `want`.
pub(super) fn wait_counter(d: &VhostUserDriver, name: &str, want: u64) {
    let t0 = std::time::Instant::now();
    while port_counter(d, name) != want {
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{name}: {} not {want}", port_counter(d, name));
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A frontend (the `vhost` crate's, as a VMM drives it) that negotiated
/// every offered feature and `REPLY_ACK`, then sends one memory region of
/// `size` bytes at `offset` of `file`: the port's answer to `SET_MEM_TABLE`.
fn send_mem_table(
    sock: &Path,
    file: &std::fs::File,
    offset: u64,
    size: u64,
) -> (vhost::vhost_user::Frontend, vhost::Result<()>) {
    use std::os::fd::AsRawFd;
    use vhost::vhost_user::message::{VhostUserHeaderFlag, VhostUserProtocolFeatures};
    use vhost::vhost_user::{Frontend, VhostUserFrontend};
    use vhost::{VhostBackend, VhostUserMemoryRegionInfo};
    let mut fe = Frontend::connect(sock, 2).unwrap();
    fe.set_owner().unwrap();
    let f = fe.get_features().unwrap();
    fe.set_features(f).unwrap();
    let pf = fe.get_protocol_features().unwrap();
    assert!(pf.contains(VhostUserProtocolFeatures::REPLY_ACK));
    fe.set_protocol_features(VhostUserProtocolFeatures::REPLY_ACK).unwrap();
    fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    let region = VhostUserMemoryRegionInfo {
        guest_phys_addr: 0,
        memory_size: size,
        userspace_addr: 0x7f00_0000_0000,
        mmap_offset: offset,
        mmap_handle: file.as_raw_fd(),
    };
    let r = fe.set_mem_table(&[region]).map(|_| ());
    (fe, r)
}

/// A memory table whose region reaches past the end of its file is refused
/// (counted, the connection ended) and the port serves the next frontend;
/// a table it accepts can no longer shrink under the engine.
#[test]
fn a_memory_region_past_its_files_end_is_refused_and_an_accepted_one_sealed() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("mem.sock");
    let d = VhostUserDriver::open(&VhostUserOptions::new(&sock)).unwrap();
    // A region larger than its memfd, and one whose offset pushes it past
    // the end: both would SIGBUS on access.
    for (n, (file_len, offset)) in [(64 * 1024, 0), (MIB, MIB / 2)].into_iter().enumerate() {
        let file = memfd(file_len, true);
        let (fe, r) = send_mem_table(&sock, &file, offset, MIB);
        assert!(r.is_err(), "a region past the end of its file was accepted ({file_len} bytes, offset {offset})");
        drop(fe);
        wait_counter(&d, "mem_refused", n as u64 + 1);
        wait_counter(&d, "detaches", n as u64 + 1);
    }
    assert_eq!(port_counter(&d, "mem_regions_sealed"), 0);
    assert!(lock(&d.shared().last_error).as_deref().is_some_and(|e| e.contains("which has")));
    // The next frontend is served, and its memory sealed: shrinking the
    // file the engine maps fails.
    let file = memfd(MIB, true);
    let (fe, r) = send_mem_table(&sock, &file, 0, MIB);
    r.expect("a region that fits its file is accepted");
    wait_counter(&d, "mem_regions_sealed", 1);
    let e = file.set_len(4096).expect_err("a sealed memory file shrank");
    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
    assert!(file.set_len(2 * MIB).is_ok(), "growing is not sealed");
    drop(fe);
    wait_counter(&d, "detaches", 3);
    // A memfd made without MFD_ALLOW_SEALING (as DPDK's --no-huge memory):
    // accepted, counted as unsealed.
    let file = memfd(MIB, false);
    let (fe, r) = send_mem_table(&sock, &file, 0, MIB);
    r.expect("an unsealable region that fits its file is accepted");
    wait_counter(&d, "mem_regions_unsealed", 1);
    assert_eq!((port_counter(&d, "mem_refused"), port_counter(&d, "attaches")), (2, 4));
    drop(fe);
}

/// A 60-byte frame behind a zeroed 12-byte header at `at` (one buffer).
fn plain_frame(m: &GuestMemoryMmap<()>, at: u64, fill: u8) {
    m.write_slice(&[0u8; 12], GuestAddress(at)).unwrap();
    m.write_slice(&[fill; 60], GuestAddress(at + 12)).unwrap();
}

/// The port's burst path: the available index is loaded once and used
/// until the chains it announced are taken, then loaded again; a queue
/// moved under the cursor (a reset) makes it load again.
#[test]
fn the_available_index_is_loaded_once_per_burst() {
    let m = std::sync::Arc::new(mem());
    let mut q = queue(&m);
    for i in 0..2u16 {
        plain_frame(&m, 0x4000 + 0x100 * u64::from(i), i as u8);
        desc(&m, i, 0x4000 + 0x100 * u64::from(i), 72, 0, 0);
    }
    offer(&m, &[0, 1]);
    let (mut cache, mut cursor, mut scratch) =
        (ring::RingCache::default(), ring::AvailCursor::default(), virtq::TxScratch::new());
    let mut take = |q: &mut Queue, cursor: &mut ring::AvailCursor| {
        let rings = ring::Rings::cached(q, &m, &mut cache)?;
        virtq::take_frame_at(&rings, q, cursor, &mut scratch, 12)
    };
    assert_eq!(take(&mut q, &mut cursor).unwrap().unwrap().frame.unwrap().packet.to_vec(), vec![0; 60]);
    // An index now far ahead would stop the queue, were it loaded again.
    m.write_obj((SIZE + 5).to_le(), GuestAddress(AVAIL + 2)).unwrap();
    assert_eq!(take(&mut q, &mut cursor).unwrap().unwrap().frame.unwrap().packet.to_vec(), vec![1; 60]);
    assert!(matches!(take(&mut q, &mut cursor), Err(QueueFault::AvailIndex)));
    // A reset moved next_avail: the cursor's load is not used.
    let mut cursor = ring::AvailCursor::default();
    m.write_obj(2u16.to_le(), GuestAddress(AVAIL + 2)).unwrap();
    q.set_next_avail(0);
    assert!(take(&mut q, &mut cursor).unwrap().is_some());
    m.write_obj(0u16.to_le(), GuestAddress(AVAIL + 2)).unwrap();
    q.set_next_avail(0);
    assert!(take(&mut q, &mut cursor).unwrap().is_none(), "loaded again: nothing available");
}

/// Rings kept between calls are resolved again when the guest moves them.
#[test]
fn kept_rings_follow_the_queue() {
    const DESC2: u64 = 0x9000;
    let m = std::sync::Arc::new(mem());
    let mut q = queue(&m);
    plain_frame(&m, 0x4000, 0xaa);
    plain_frame(&m, 0x5000, 0xbb);
    desc(&m, 0, 0x4000, 72, 0, 0);
    desc_at(&m, DESC2, 0, 0x5000, 72, 0, 0);
    offer(&m, &[0, 0]);
    let (mut cache, mut cursor, mut scratch) =
        (ring::RingCache::default(), ring::AvailCursor::default(), virtq::TxScratch::new());
    for (table, want) in [(DESC, 0xaa), (DESC2, 0xbb)] {
        q.try_set_desc_table_address(GuestAddress(table)).unwrap();
        let rings = ring::Rings::cached(&q, &m, &mut cache).unwrap();
        let c = virtq::take_frame_at(&rings, &mut q, &mut cursor, &mut scratch, 12).unwrap().unwrap();
        assert_eq!(c.frame.unwrap().packet.to_vec(), vec![want; 60], "table {table:#x}");
    }
}

/// A chain of one buffer, header and frame together (DPDK's virtio-user),
/// is taken as the same bytes split over two descriptors (the general
/// walk and import): the same frame, metadata and used element, or the
/// same drop reason, at every edge of the plain header's checks.
#[test]
fn a_one_buffer_chain_is_taken_as_a_split_one() {
    const CSUM: u8 = 1;
    // (flags, gso_type, hdr_len field, frame bytes after the header)
    let cases: &[(u8, u8, u16, usize)] = &[
        (0, 0, 0, 60),
        (0, 0, 60, 60),
        (0, 0, 61, 60),
        (0, 0, 0, 14),
        (0, 0, 14, 14),
        (0, 0, 0, 13),
        (0, 0, 0, 0),
        (0, 0, 0xffff, 1500),
        (CSUM, 0, 0, 60),
        (0, 1, 0, 60),
        (0, 0x80, 0, 60),
    ];
    for &(flags, gso, hdr_len, n) in cases {
        let what = format!("flags {flags}, gso {gso}, hdr_len {hdr_len}, frame {n}");
        let take = |split: bool| {
            let m = mem();
            let mut q = queue(&m);
            let mut bytes = vec![0u8; 12 + n];
            bytes[0] = flags;
            bytes[1] = gso;
            bytes[2..4].copy_from_slice(&hdr_len.to_le_bytes());
            // A UDP checksum field for the partial checksum's case.
            bytes[6..8].copy_from_slice(&34u16.to_le_bytes());
            bytes[8..10].copy_from_slice(&6u16.to_le_bytes());
            for (i, b) in bytes[12..].iter_mut().enumerate() {
                *b = (i * 7 + 1) as u8;
            }
            // An IPv4/UDP frame's EtherType and IHL where the frame has them.
            if n >= 15 {
                bytes[24..27].copy_from_slice(&[0x08, 0x00, 0x45]);
            }
            m.write_slice(&bytes, GuestAddress(0x4000)).unwrap();
            if split && n > 0 {
                desc(&m, 0, 0x4000, 12, F_NEXT, 1);
                desc(&m, 1, 0x4000 + 12, n as u32, 0, 0);
            } else {
                desc(&m, 0, 0x4000, 12 + n as u32, 0, 0);
            }
            offer(&m, &[0]);
            let c = virtq::take_frame(&mut q, &m, &mut virtq::TxScratch::new(), 12).unwrap().unwrap();
            let frame = c.frame.map(|f| (f.packet.to_vec(), f.packet.meta, f.csum_partial));
            (frame, q.next_used(), used_elem(&m, 0))
        };
        let (one, split) = (take(false), take(true));
        assert_eq!(one, split, "{what}");
        let (frame, used, elem) = one;
        assert_eq!((used, elem), (1, (0, 0)), "{what}: the chain is given back");
        match (flags, gso, usize::from(hdr_len) <= n && n >= 14) {
            (0, 0, true) => {
                let (bytes, meta, partial) = frame.expect("a plain header is accepted");
                assert_eq!((bytes.len(), meta, partial), (n, Default::default(), false), "{what}");
            }
            (0, 0, false) => assert!(frame.is_err(), "{what}: refused"),
            _ => {}
        }
    }
}

/// A buffer across two regions is copied whole both ways (region by
/// region); one inside a region through the slice the walk kept.
#[test]
fn buffers_across_regions_are_copied_whole() {
    let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x8000), (GuestAddress(0x8000), 0x8000)]).unwrap();
    let mut q = queue(&m);
    let frame: Vec<u8> = (0..200u32).map(|i| i as u8).collect();
    m.write_slice(&[0u8; 12], GuestAddress(0x8000 - 100)).unwrap();
    m.write_slice(&frame, GuestAddress(0x8000 - 88)).unwrap();
    desc(&m, 0, 0x8000 - 100, 212, 0, 0);
    offer(&m, &[0]);
    let mut scratch = virtq::TxScratch::new();
    let c = virtq::take_frame(&mut q, &m, &mut scratch, 12).unwrap().unwrap();
    assert_eq!(c.frame.unwrap().packet.to_vec(), frame);

    let mut q = queue(&m);
    desc(&m, 0, 0x8000 - 50, 300, F_WRITE, 0);
    offer(&m, &[0]);
    let hdr = [0x11u8; 12];
    let placed =
        virtq::push_rx(&mut q, &m, &mut virtq::RxScratch::new(), &hdr, std::iter::once(&frame[..]), 200, true).unwrap();
    assert_eq!(placed.bytes, 212);
    let mut got = vec![0u8; 212];
    m.read_slice(&mut got, GuestAddress(0x8000 - 50)).unwrap();
    assert_eq!((&got[..10], u16::from_le_bytes([got[10], got[11]]), &got[12..]), (&[0x11; 10][..], 1, &frame[..]));
}

/// The longest chain a guest can build, a direct descriptor and then an
/// indirect table of 65535 (65536 buffers), is walked without the count
/// overflowing.
#[test]
fn the_longest_chain_is_counted_without_overflow() {
    const TABLE: u64 = 0x10_0000;
    let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x20_0000)]).unwrap();
    let q = queue(&m);
    for i in 0..u16::MAX {
        let next = if i < u16::MAX - 1 { F_NEXT } else { 0 };
        desc_at(&m, TABLE, i, 0x8000, 0, next, i.wrapping_add(1));
    }
    desc(&m, 0, 0x4000, 12, F_NEXT, 1);
    desc(&m, 1, TABLE, u32::from(u16::MAX) * 16, F_INDIRECT, 0);
    let rings = ring::Rings::new(&q, &m).unwrap();
    let mut seen = 0u32;
    let counted = rings.walk(0, |_| {
        seen += 1;
        Ok(())
    });
    assert_eq!((counted, seen), (Ok(u16::MAX), 65536));
}

/// `Rings::slice` finds a buffer in whichever region holds it, the last
/// region hit or another (the same host bytes `vm-memory`'s `get_slice`
/// gives), and nothing for bytes across two regions, in a hole or past
/// the end.
#[test]
fn buffers_are_found_in_the_region_that_holds_them() {
    let m = GuestMemoryMmap::<()>::from_ranges(&[
        (GuestAddress(0), 0x8000),
        (GuestAddress(0x8000), 0x8000),
        (GuestAddress(0x2_0000), 0x8000),
    ])
    .unwrap();
    let q = queue(&m);
    let rings = ring::Rings::new(&q, &m).unwrap();
    let host = |vs: &vm_memory::VolatileSlice<'_>| (vs.ptr_guard().as_ptr() as usize, vs.len());
    for (addr, len) in [(0x4000, 16), (0x9000, 16), (0x4000, 64), (0x2_1000, 64), (0x7ff0, 16), (0x2_7ff0, 16)] {
        let want = vm_memory::GuestMemoryBackend::get_slice(&m, GuestAddress(addr), len).unwrap();
        let got = rings.slice(GuestAddress(addr), len).unwrap_or_else(|| panic!("{addr:#x}+{len}"));
        assert_eq!(host(&got), host(&want), "{addr:#x}+{len}");
    }
    for (addr, len) in [(0x7ff8, 16), (0x1_8000, 16), (0x2_7ff0, 17), (0x2_8000, 1), (u64::MAX, 1)] {
        assert!(rings.slice(GuestAddress(addr), len).is_none(), "{addr:#x}+{len}");
        // After a region was hit: the same answer.
        assert!(rings.slice(GuestAddress(0x2_1000), 1).is_some());
        assert!(rings.slice(GuestAddress(addr), len).is_none(), "{addr:#x}+{len}, after a hit");
    }
}

/// A buffer's prefetch hint is its own host address when it lies in the
/// region found last, and a line inside that region for any other guest
/// address (outside memory, below the region, in another region, a
/// guest's garbage): a hint never points past the mapping.
#[test]
fn buffer_hints_stay_in_the_region_found_last() {
    let m = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x8000), (GuestAddress(0x8000), 0x8000)]).unwrap();
    let q = queue(&m);
    let rings = ring::Rings::new(&q, &m).unwrap();
    assert!(rings.buffer_hint(0x9000).is_none(), "no region found yet");
    assert!(rings.slice(GuestAddress(0x9000), 64).is_some());
    let host = |addr: u64| {
        vm_memory::GuestMemoryBackend::get_slice(&m, GuestAddress(addr), 1).unwrap().ptr_guard().as_ptr() as usize
    };
    for addr in [0x8000, 0x9000, 0xff80] {
        assert_eq!(rings.buffer_hint(addr).map(|p| p as usize), Some(host(addr)), "{addr:#x}");
    }
    let (lo, hi) = (host(0x8000), host(0xffff) + 1);
    for addr in [0xffc0, 0x1_0000, 0x7fff, 0x100, 0, 0x1_0000_0000, u64::MAX, u64::MAX - 0x7fff] {
        let at = rings.buffer_hint(addr).unwrap() as usize;
        assert!(at >= lo && at + 128 <= hi, "{addr:#x}: {at:#x} outside {lo:#x}..{hi:#x}");
    }
}

/// A frame taken alone gets one of the thread's small pool buffers, which
/// the take borrows whole, and gives the others back.
#[test]
fn a_take_gives_the_lent_pool_buffers_back() {
    use superpacket::packet::pool;
    let m = mem();
    let mut q = queue(&m);
    plain_frame(&m, 0x4000, 7);
    desc(&m, 0, 0x4000, 72, 0, 0);
    offer(&m, &[0]);
    // This thread's list holds exactly two buffers.
    let held: Vec<Vec<u8>> = (0..pool::stats().idle_small).map(|_| pool::take_small_buffer()).collect();
    let two = [vec![0; pool::SMALL_BUFFER_LEN], vec![0; pool::SMALL_BUFFER_LEN]];
    let top = two[1].as_ptr() as usize;
    two.into_iter().for_each(pool::recycle);
    let mut scratch = virtq::TxScratch::new();
    let p = virtq::take_frame(&mut q, &m, &mut scratch, 12).unwrap().unwrap().frame.unwrap().packet;
    assert_eq!(p.to_vec(), vec![7; 60]);
    assert_eq!(p.linear().as_ptr() as usize, top + superpacket::packet::DEFAULT_HEADROOM, "a pool buffer");
    assert_eq!(pool::stats().idle_small, 1, "the other one given back");
    drop((held, p));
}

/// A linear frame placed by `push_rx_frame` (at once into the first buffer
/// when it fits, else as `push_rx`) lands as `push_rx` places it, on every
/// kind of receive chain: one buffer with room, exactly enough or one
/// byte short, header and data in two descriptors, an empty first
/// descriptor, a readable one, no chain; both header lengths.
#[test]
fn a_linear_frame_lands_as_push_rx_places_it() {
    const LAYOUTS: &[&[(u32, u16)]] = &[
        &[(2048, F_WRITE)],
        &[(72, F_WRITE)],
        &[(71, F_WRITE)],
        &[(12, F_WRITE | F_NEXT), (2048, F_WRITE)],
        &[(0, F_WRITE | F_NEXT), (2048, F_WRITE)],
        &[(2048, 0)],
        // Past the end of guest memory: the queue stops, room or not.
        &[(0x10000, F_WRITE)],
        &[],
    ];
    let frame: Vec<u8> = (0..60u32).map(|i| (i * 3) as u8).collect();
    for (k, layout) in LAYOUTS.iter().enumerate() {
        for (hdr_len, mrg) in [(12, true), (12, false), (10, false)] {
            let set_up = || {
                let m = mem();
                let q = queue(&m);
                // The layout twice over (a second chain for a frame that
                // spills over with MRG_RXBUF).
                let n = layout.len() as u16;
                for c in 0..2u16 {
                    for (i, &(len, flags)) in layout.iter().enumerate() {
                        let i = c * n + i as u16;
                        desc(&m, i, 0x4000 + 0x1000 * u64::from(i), len, flags, i + 1);
                    }
                }
                let heads = [0, n];
                offer(&m, &heads[..if n == 0 { 0 } else { 2 }]);
                (m, q)
            };
            let hdr = &[0x11u8; 12][..hdr_len];
            let what = format!("layout {k}, header {hdr_len}, mrg {mrg}");
            let (ours_mem, mut ours) = set_up();
            let (theirs_mem, mut theirs) = set_up();
            let rings = ring::Rings::new(&ours, &ours_mem).unwrap();
            let (mut a, mut b) = (virtq::RxScratch::new(), virtq::RxScratch::new());
            let mut cursor = ring::AvailCursor::default();
            let x = virtq::push_rx_frame(&rings, &mut ours, &mut cursor, &mut a, hdr, &frame, mrg);
            let y = virtq::push_rx(&mut theirs, &theirs_mem, &mut b, hdr, std::iter::once(&frame[..]), 60, mrg);
            assert_eq!(x, y, "{what}");
            assert_eq!((ours.next_avail(), ours.next_used()), (theirs.next_avail(), theirs.next_used()), "{what}");
            let (mut got, mut want) = (vec![0u8; MEM], vec![0u8; MEM]);
            ours_mem.read_slice(&mut got, GuestAddress(0)).unwrap();
            theirs_mem.read_slice(&mut want, GuestAddress(0)).unwrap();
            assert!(got == want, "{what}: the bytes differ");
            if k == 0 && hdr_len == 12 {
                // At once into the first buffer: the header with
                // num_buffers 1, the frame after it, one used element.
                assert_eq!(x, Ok(virtq::RxPlaced { chains: 1, bytes: 72 }), "{what}");
                assert_eq!((&got[0x4000..0x400a], &got[0x400a..0x400c]), (&[0x11; 10][..], &[1, 0][..]), "{what}");
                assert_eq!(&got[0x400c..0x4048], &frame[..], "{what}");
                assert_eq!(used_elem(&ours_mem, 0), (0, 72), "{what}");
            }
        }
    }
}
