//! Held frames ([`super::held`]): the payload left in the sender's memory
//! is copied guest to guest or materialised, byte for byte, and the
//! sender's chain is given back exactly once, after the copy, and never
//! into a queue that was reset or a connection that ended.

use super::backend::{Conn, Mode, PortShared, Vring};
use super::held::{Completion, HELD_HEAD, HeldFrame};
use super::ring::{AvailCursor, Rings};
use super::tests::{AVAIL, DESC, F_NEXT, F_WRITE, SIZE, USED, desc, used_elem};
use super::virtq::{self, HeldChain};
use crate::device::port::MemoryDriver;
use crate::device::{Graph, NetdevFeatures, StackMode};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use superpacket::offload::gso::{SegmentSink, SgFrame};
use superpacket::packet::Packet;
use superpacket::packet::virtio::{F_NEEDS_CSUM, HdrByteOrder, HdrLayout, VirtioNetHdr};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{Medium, TcpFlags};
use vhost_user_backend::{VringMutex, VringT};
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress, GuestMemoryAtomic, GuestMemoryMmap};

const MEM: usize = 0x8_0000;
/// Where a chain's buffers start, and how long each is.
const BUFS: u64 = 0x1_0000;
const BUF_LEN: u32 = 4096;
/// What an unwritten used element reads as.
const UNUSED: (u32, u32) = (0xdead, 0xbeef);

fn mem() -> GuestMemoryMmap<()> {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), MEM)]).unwrap()
}

/// A TCPv4 superpacket of `payload` bytes and its `virtio_net_hdr`.
fn superpacket(payload: usize) -> (Vec<u8>, [u8; 12]) {
    let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 0)).superpacket(payload, 1448, TcpFlags::PSH).unwrap();
    let hdr = VirtioNetHdr::from_meta_as(&sp.meta, sp.linear(), Medium::Ethernet, false).unwrap();
    let mut hb = [0u8; 12];
    hdr.emit(&mut hb, HdrLayout::MrgRxbuf, HdrByteOrder::Little).unwrap();
    (sp.to_vec(), hb)
}

/// A sending guest: its transmit queue in a vring, on a connection that
/// is its port's current one.
struct Sender {
    m: GuestMemoryMmap<()>,
    tx: Vring,
    shared: Arc<PortShared>,
    conn: Arc<Conn>,
    /// The buffers of each chain [`Sender::take`] took, in order.
    scratch_bufs: std::sync::Mutex<Vec<Vec<(GuestAddress, u32)>>>,
}

impl Sender {
    fn new() -> Sender {
        Sender::with_mem(mem())
    }

    /// [`Sender::new`] in guest memory `m` (its rings where tests.rs puts
    /// them, its buffers from `BUFS` on).
    fn with_mem(m: GuestMemoryMmap<()>) -> Sender {
        let tx: Vring = VringMutex::new(GuestMemoryAtomic::new(m.clone()), SIZE).unwrap();
        tx.set_queue_size(SIZE);
        tx.set_queue_info(DESC, AVAIL, USED).unwrap();
        tx.set_queue_ready(true);
        for i in 0..u64::from(SIZE) {
            m.write_obj(UNUSED.0, GuestAddress(USED + 4 + 8 * i)).unwrap();
            m.write_obj(UNUSED.1, GuestAddress(USED + 8 + 8 * i)).unwrap();
        }
        let shared = Arc::new(PortShared::new("/nonexistent/held.sock".into(), Mode::Server, 0, 1, SIZE).unwrap());
        let conn = Arc::new(Conn::for_test());
        *shared.conn.lock().unwrap() = Some(conn.clone());
        Sender { m, tx, shared, conn, scratch_bufs: Default::default() }
    }

    /// Offers `frames` (header, frame), each as one chain of `BUF_LEN`
    /// buffers, and takes them with holding on: each frame's packet and
    /// the chain left in the guest, if the frame was held.
    fn take(&self, frames: &[(&[u8], [u8; 12])]) -> Vec<(Packet, Option<HeldChain>)> {
        offer_chains(&self.m, frames, 0, 0);
        let mut st = self.tx.get_mut();
        let q = st.get_queue_mut();
        let rings = Rings::new(q, &self.m).unwrap();
        let (mut cursor, mut scratch) = (AvailCursor::default(), virtq::TxScratch::new());
        let mut out = Vec::new();
        while let Some((taken, held)) =
            virtq::take_frame_holding(&rings, q, &mut cursor, &mut scratch, 12, true).unwrap()
        {
            out.push((taken.frame.unwrap().packet, held));
            self.scratch_bufs.lock().unwrap().push(scratch.bufs().to_vec());
        }
        out
    }

    /// [`Sender::take`] of frames that are all held: their packets, whose
    /// payloads are held, and the held frames.
    /// Sends one 20,000-byte TSO superpacket, held: the frame, its
    /// virtio-net header, its packet and its held payload.
    fn send_one_held(&self) -> (Vec<u8>, [u8; 12], Packet, HeldFrame) {
        let (frame, hdr) = superpacket(20_000);
        let (packet, held) = self.send_held(&[(&frame, hdr)]).pop().expect("one frame sent");
        (frame, hdr, packet, held)
    }

    fn send_held(&self, frames: &[(&[u8], [u8; 12])]) -> Vec<(Packet, HeldFrame)> {
        let taken = self.take(frames);
        let bufs = std::mem::take(&mut *self.scratch_bufs.lock().unwrap());
        taken
            .into_iter()
            .zip(bufs)
            .map(|((packet, held), bufs)| {
                let HeldChain { head, skip, len } = held.expect("a superpacket is held");
                let completion = Completion::new(
                    self.tx.clone(),
                    self.tx.get_ref().get_queue(),
                    self.shared.clone(),
                    0,
                    self.conn.clone(),
                    0,
                    head,
                );
                let mem = Arc::new(self.m.clone());
                let Ok(held) = HeldFrame::new(mem, &bufs, skip, len, &packet, completion) else {
                    panic!("a chain of {} buffers is held", bufs.len())
                };
                (packet, held)
            })
            .collect()
    }

    /// The sender's used elements written so far (the queue's `next_used`).
    fn used(&self) -> Vec<(u32, u32)> {
        let n = self.tx.get_ref().get_queue().next_used();
        (0..u64::from(n)).map(|i| used_elem(&self.m, i)).collect()
    }
}

/// Offers `frames` (header, frame) in the transmit ring, each as one chain
/// of `BUF_LEN` buffers from descriptor `first_desc` on (descriptor `d`'s
/// buffer at `BUFS + d * BUF_LEN`), in available slots from `first_slot`
/// on; returns the chains' heads.
fn offer_chains(m: &GuestMemoryMmap<()>, frames: &[(&[u8], [u8; 12])], first_desc: u16, first_slot: u16) -> Vec<u16> {
    let mut next_desc = first_desc;
    let mut heads = Vec::new();
    for (k, (frame, hdr)) in frames.iter().enumerate() {
        let bytes = [&hdr[..], frame].concat();
        let head = next_desc;
        for (i, piece) in bytes.chunks(BUF_LEN as usize).enumerate() {
            let at = BUFS + u64::from(next_desc) * u64::from(BUF_LEN);
            m.write_slice(piece, GuestAddress(at)).unwrap();
            let last = (i + 1) * BUF_LEN as usize >= bytes.len();
            let d = next_desc;
            desc(m, d, at, piece.len() as u32, if last { 0 } else { F_NEXT }, d + 1);
            next_desc += 1;
        }
        let slot = u64::from(first_slot) + k as u64;
        m.write_obj(head.to_le(), GuestAddress(AVAIL + 4 + 2 * (slot % u64::from(SIZE)))).unwrap();
        heads.push(head);
    }
    m.write_obj((first_slot + frames.len() as u16).to_le(), GuestAddress(AVAIL + 2)).unwrap();
    heads
}

/// The frame's payload is not in the packet until something copies it.
#[test]
fn a_held_frame_carries_only_its_head() {
    let s = Sender::new();
    let (frame, hdr) = superpacket(20_000);
    let mut got = s.send_held(&[(&frame, hdr)]);
    let (packet, held) = got.pop().unwrap();
    assert_eq!((packet.len(), held.len()), (frame.len(), frame.len() - HELD_HEAD));
    assert_eq!(&packet.linear()[..HELD_HEAD], &frame[..HELD_HEAD]);
    assert!(held.belongs_to(&packet));
    let mut back = vec![0u8; held.len()];
    held.copy_to(0, &mut back).unwrap();
    assert_eq!(back, &frame[HELD_HEAD..]);
    assert!(held.copy_to(1, &mut back).is_err(), "past the held bytes");
}

/// A frame whose headers may reach past the first [`HELD_HEAD`] bytes (no
/// partial checksum to say where its L4 header is, or one too far in) is
/// taken whole, never parsed from a recycled buffer's leftover bytes, and
/// its chain given back at once.
#[test]
fn a_frame_whose_headers_may_pass_the_head_is_taken_whole() {
    let (frame, hdr) = superpacket(20_000);
    let mut no_csum = hdr;
    no_csum[0] &= !F_NEEDS_CSUM;
    // Leftover bytes in the small-buffer pool's recycled buffers must not
    // matter: fill one with garbage and give it back first.
    let mut recycled = Packet::with_linear_len_pooled(frame.len());
    recycled.linear_mut().fill(0xa5);
    drop(recycled);
    let s = Sender::new();
    let got = s.take(&[(&frame, no_csum)]);
    assert_eq!(got.len(), 1);
    let (packet, held) = &got[0];
    assert!(held.is_none(), "taken whole");
    assert_eq!(packet.linear(), &frame[..], "every byte read from the guest");
    assert_eq!(s.used().len(), 1, "its chain given back at once");
}

/// Copied guest to guest into a receiving guest's buffers (three chains,
/// `MRG_RXBUF`): header and frame byte for byte; the sender's chain is
/// given back only when the held frame goes, once, with the index left
/// for the sending port to publish.
#[test]
fn sent_the_senders_chain_is_given_back_after_the_receivers_copy() {
    let s = Sender::new();
    let (frame, hdr, packet, held) = s.send_one_held();
    let rm = mem();
    let mut rq = virtio_queue::Queue::new(SIZE).unwrap();
    rq.set_size(SIZE);
    rq.try_set_desc_table_address(GuestAddress(DESC)).unwrap();
    rq.try_set_avail_ring_address(GuestAddress(AVAIL)).unwrap();
    rq.try_set_used_ring_address(GuestAddress(USED)).unwrap();
    rq.set_ready(true);
    for i in 0..3u16 {
        desc(&rm, i, BUFS + 0x8000 * u64::from(i), 0x8000, F_WRITE, 0);
        rm.write_obj(i.to_le(), GuestAddress(AVAIL + 4 + 2 * u64::from(i))).unwrap();
    }
    rm.write_obj(3u16.to_le(), GuestAddress(AVAIL + 2)).unwrap();
    let rings = Rings::new(&rq, &rm).unwrap();
    let own = &packet.linear()[..packet.len() - held.len()];
    let placed = virtq::push_rx_holding(
        &rings,
        &mut rq,
        &mut AvailCursor::default(),
        &mut virtq::RxScratch::new(),
        &hdr,
        std::iter::once(own),
        frame.len(),
        true,
        Some(&held),
    )
    .unwrap();
    assert_eq!((placed.chains, placed.bytes), (1, 12 + frame.len()));
    let mut back = vec![0u8; placed.bytes];
    rm.read_slice(&mut back, GuestAddress(BUFS)).unwrap();
    assert_eq!((&back[..10], &back[12..]), (&hdr[..10], &frame[..]));
    assert_eq!(s.used(), [], "not before the held frame goes");
    drop(held);
    assert_eq!(s.used(), [(0, 0)]);
    assert_eq!(s.m.read_obj::<u16>(GuestAddress(USED + 2)).unwrap(), 0, "the index is the sending port's to publish");
}

/// A receiving guest's queue in `m` (rings where tests.rs puts them) with
/// `bufs` (guest address, length) offered, each as a one-buffer chain.
fn receiver(m: &GuestMemoryMmap<()>, bufs: &[(u64, u32)]) -> virtio_queue::Queue {
    let mut rq = virtio_queue::Queue::new(SIZE).unwrap();
    rq.set_size(SIZE);
    rq.try_set_desc_table_address(GuestAddress(DESC)).unwrap();
    rq.try_set_avail_ring_address(GuestAddress(AVAIL)).unwrap();
    rq.try_set_used_ring_address(GuestAddress(USED)).unwrap();
    rq.set_ready(true);
    for (i, &(addr, len)) in bufs.iter().enumerate() {
        let i = i as u16;
        desc(m, i, addr, len, F_WRITE, 0);
        m.write_obj(i.to_le(), GuestAddress(AVAIL + 4 + 2 * u64::from(i))).unwrap();
    }
    m.write_obj((bufs.len() as u16).to_le(), GuestAddress(AVAIL + 2)).unwrap();
    rq
}

/// Places `packet`, whose payload `held` holds, in receiving queue `rq` of
/// `rm` (`MRG_RXBUF`) behind `hdr`, the payload copied guest to guest.
fn deliver(
    rm: &GuestMemoryMmap<()>,
    rq: &mut virtio_queue::Queue,
    hdr: &[u8; 12],
    packet: &Packet,
    held: &HeldFrame,
) -> Result<virtq::RxPlaced, virtq::RxRefused> {
    let rings = Rings::new(rq, rm).unwrap();
    let own = &packet.linear()[..packet.len() - held.len()];
    let (mut cursor, mut scratch) = (AvailCursor::default(), virtq::RxScratch::new());
    let parts = std::iter::once(own);
    virtq::push_rx_holding(&rings, rq, &mut cursor, &mut scratch, hdr, parts, packet.len(), true, Some(held))
}

/// A sender's guest memory in two regions: a frame whose buffers each lie
/// in one region, some in each, is held and its payload read byte for
/// byte; one with a buffer across the two regions is read whole at once,
/// not held (a held payload is read region slice by region slice), and its
/// chain given back.
#[test]
fn a_sender_in_two_regions_holds_only_frames_whose_buffers_each_lie_in_one() {
    let (frame, hdr) = superpacket(20_000);
    let two = |split: u64| {
        let regions = [(GuestAddress(0), split as usize), (GuestAddress(split), MEM - split as usize)];
        Sender::with_mem(GuestMemoryMmap::from_ranges(&regions).unwrap())
    };
    // Buffers 0 and 1 below the split, 2.. above it.
    let s = two(BUFS + 2 * u64::from(BUF_LEN));
    let (packet, held) = s.send_held(&[(&frame, hdr)]).pop().unwrap();
    let mut back = vec![0u8; held.len()];
    held.copy_to(0, &mut back).unwrap();
    assert_eq!(back, &frame[packet.len() - held.len()..]);
    // Buffer 1 across the split.
    let s = two(BUFS + u64::from(BUF_LEN) + u64::from(BUF_LEN / 2));
    let got = s.take(&[(&frame, hdr)]);
    assert_eq!(got.len(), 1);
    assert!(got[0].1.is_none(), "a frame with a buffer across two regions is not held");
    assert_eq!(got[0].0.to_vec(), frame);
    assert_eq!(s.used(), [(0, 0)]);
}

/// A held frame into a receiving guest of two memory regions, over five
/// receive chains (`MRG_RXBUF`, `num_buffers` 5): some in the region of
/// its rings, some in the other, one across the two. Header and frame land
/// byte for byte, each chain filled to its length but the last, and the
/// sender's chain comes back once the held frame goes.
#[test]
fn a_held_frame_lands_over_several_receive_chains_in_two_regions() {
    let s = Sender::new();
    let (frame, hdr, packet, held) = s.send_one_held();
    const SPLIT: u64 = 0x4_0000;
    let rm = GuestMemoryMmap::<()>::from_ranges(&[
        (GuestAddress(0), SPLIT as usize),
        (GuestAddress(SPLIT), MEM - SPLIT as usize),
    ])
    .unwrap();
    let bufs = [
        (SPLIT - 0x2000, 4096),
        (SPLIT - 0x800, 4096),
        (SPLIT + 0x1000, 4096),
        (0x1_0000, 4096),
        (SPLIT + 0x3000, 8192),
    ];
    let mut rq = receiver(&rm, &bufs);
    let placed = deliver(&rm, &mut rq, &hdr, &packet, &held).unwrap();
    assert_eq!((placed.chains, placed.bytes), (5, 12 + frame.len()));
    let mut back = Vec::new();
    for (i, &(addr, len)) in bufs.iter().enumerate() {
        let want = if i < 4 { len as usize } else { 12 + frame.len() - 4 * 4096 };
        assert_eq!(used_elem(&rm, i as u64), (i as u32, want as u32), "chain {i}");
        let mut b = vec![0u8; want];
        rm.read_slice(&mut b, GuestAddress(addr)).unwrap();
        back.extend(b);
    }
    assert_eq!((&back[..10], u16::from_le_bytes([back[10], back[11]]), &back[12..]), (&hdr[..10], 5, &frame[..]));
    assert_eq!(s.used(), [], "not before the held frame goes");
    drop(held);
    assert_eq!(s.used(), [(0, 0)]);
}

/// A held frame dropped unsent gives its chain back, once; two held frames
/// may come back in either order (no `VIRTIO_F_IN_ORDER`).
#[test]
fn dropped_held_frames_give_their_chains_back_once_in_any_order() {
    let s = Sender::new();
    let (frame, hdr) = superpacket(10_000);
    let mut got = s.send_held(&[(&frame, hdr), (&frame, hdr)]);
    // The second chain's head follows the first chain's buffers.
    let second_head = (12 + frame.len()).div_ceil(BUF_LEN as usize) as u32;
    let second = got.pop().unwrap();
    drop(second);
    assert_eq!(s.used(), [(second_head, 0)]);
    drop(got);
    assert_eq!(s.used(), [(second_head, 0), (0, 0)]);
}

/// A reset of the sender's device, or the end of its connection, while a
/// frame is held: nothing is written into its used ring, and the payload
/// can still be read (the mapping is kept).
#[test]
fn reset_or_disconnect_while_held_writes_nothing() {
    let s = Sender::new();
    let (frame, hdr) = superpacket(10_000);
    let mut got = s.send_held(&[(&frame, hdr), (&frame, hdr)]);
    let (mut packet, held) = got.pop().unwrap();
    s.conn.resets.fetch_add(1, Ordering::AcqRel);
    held.materialise(&mut packet).unwrap();
    assert_eq!(packet.to_vec(), frame);
    s.conn.resets.fetch_sub(1, Ordering::AcqRel);
    *s.shared.conn.lock().unwrap() = None;
    drop(got);
    assert_eq!(s.used(), []);
    assert_eq!(used_elem(&s.m, 0), UNUSED);
}

/// A bridge of ports with memory drivers (none takes held payloads):
/// `ingress`, and `n` others without TSO if `segment`.
fn bridge(n: usize, segment: bool) -> (Graph, crate::device::DeviceId, Vec<crate::device::DeviceId>) {
    let mut g = Graph::new(StackMode::Passthrough);
    let br = g.add_bridge("br0", false).unwrap();
    let ingress = g.add_port("in", Box::new(MemoryDriver::full())).unwrap();
    g.enslave(br, ingress).unwrap();
    let hw = if segment { NetdevFeatures::SG | NetdevFeatures::HW_CSUM } else { MemoryDriver::full().hw };
    let out: Vec<_> = (0..n)
        .map(|i| {
            let p = g.add_port(&format!("p{i}"), Box::new(MemoryDriver::new(hw))).unwrap();
            g.enslave(br, p).unwrap();
            p
        })
        .collect();
    (g, ingress, out)
}

fn sent(g: &mut Graph, p: crate::device::DeviceId) -> Vec<Vec<u8>> {
    g.driver_mut::<MemoryDriver>(p).unwrap().tx.drain(..).map(|p| p.to_vec()).collect()
}

/// A flood (unknown destination) to three ports: the payload is
/// materialised before the copies, every port gets the frame byte for
/// byte, and the sender's chain comes back once.
#[test]
fn flooded_every_port_gets_the_whole_frame() {
    let s = Sender::new();
    let (frame, _, packet, held) = s.send_one_held();
    let (mut g, ingress, out) = bridge(3, false);
    g.receive_held(ingress, packet, held);
    for p in out {
        assert_eq!(sent(&mut g, p), std::slice::from_ref(&frame));
    }
    assert_eq!(s.used(), [(0, 0)]);
}

/// Known destination on a port without TSO: the payload materialised
/// before the segmenter, whose segments are those of the frame copied
/// whole; the chain comes back once.
#[test]
fn segmented_for_a_port_without_tso_as_the_whole_frame() {
    let s = Sender::new();
    let (frame, _, packet, held) = s.send_one_held();
    // p0 learns the frame's destination address.
    let topology = || {
        let (mut g, ingress, out) = bridge(2, true);
        let mut learn = vec![0u8; 60];
        learn[..6].copy_from_slice(&frame[6..12]);
        learn[6..12].copy_from_slice(&frame[..6]);
        learn[12..14].copy_from_slice(&[0x88, 0xb5]);
        g.receive(out[0], Packet::from_frame(&learn));
        sent(&mut g, ingress);
        sent(&mut g, out[1]);
        (g, ingress, out)
    };
    let (mut g, ingress, out) = topology();
    let mut whole = Packet::from_frame(&frame);
    whole.meta = packet.meta;
    g.receive(ingress, whole);
    let want = sent(&mut g, out[0]);
    assert!(want.len() > 1, "segmented");
    let (mut g, ingress, out) = topology();
    g.receive_held(ingress, packet, held);
    assert_eq!(sent(&mut g, out[0]), want);
    assert_eq!(sent(&mut g, out[1]), Vec::<Vec<u8>>::new());
    assert_eq!(s.used(), [(0, 0)]);
}

/// A frame the bridge drops (its own source port is the destination):
/// the chain comes back once, nothing is sent.
#[test]
fn dropped_in_the_graph_gives_the_chain_back_once() {
    let s = Sender::new();
    let (frame, _, packet, held) = s.send_one_held();
    let (mut g, ingress, out) = bridge(1, false);
    let mut learn = vec![0u8; 60];
    learn[6..12].copy_from_slice(&frame[..6]);
    learn[12..14].copy_from_slice(&[0x88, 0xb5]);
    g.receive(ingress, Packet::from_frame(&learn));
    sent(&mut g, out[0]);
    g.receive_held(ingress, packet, held);
    assert_eq!(sent(&mut g, out[0]), Vec::<Vec<u8>>::new());
    assert_eq!(s.used(), [(0, 0)]);
}

/// A driver that takes held payloads, copying them out as a receiving
/// vhost-user port would (through [`HeldFrame::copy_to`]).
#[derive(Debug)]
struct TakesHeld {
    hw: NetdevFeatures,
    sent: Vec<Vec<u8>>,
    held_sent: usize,
    lin: Vec<u8>,
}

impl crate::device::PortDriver for TakesHeld {
    fn kind(&self) -> &'static str {
        "takes-held"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), crate::device::DriverError> {
        self.sent.push(pkt.to_vec());
        Ok(())
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        None
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn takes_held(&self) -> bool {
        true
    }
    fn xmit_held(&mut self, pkt: Packet, len: usize, held: HeldFrame) -> Result<(), crate::device::DriverError> {
        let own = len - held.len();
        let mut frame = pkt.linear()[..own].to_vec();
        frame.resize(len, 0);
        held.copy_to(0, &mut frame[own..]).unwrap();
        self.sent.push(frame);
        self.held_sent += 1;
        Ok(())
    }
}

impl SegmentSink for TakesHeld {
    fn pass_through(&mut self, packet: &Packet, _meta: &superpacket::packet::OffloadMeta) {
        self.sent.push(packet.to_vec());
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        self.sent.push([frame.header, &frame.payload.concat()].concat());
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.lin.resize(len, 0);
        &mut self.lin
    }
    fn linear_frame(&mut self, len: usize, _meta: &superpacket::packet::OffloadMeta) {
        self.sent.push(self.lin[..len].to_vec());
    }
}

/// The one-copy path: a guest's superpacket (DODGY) flooded to the one
/// other port of a bridge, which takes held payloads, leaves as it came,
/// byte for byte, whether the port has GSO_ROBUST or the segmenter checks
/// the headers first; the sender's chain comes back once.
#[test]
fn sent_through_the_graph_to_a_port_that_takes_it() {
    for robust in [true, false] {
        let s = Sender::new();
        let (frame, _, packet, held) = s.send_one_held();
        assert!(packet.meta.gso_type.contains(superpacket::packet::GsoType::DODGY));
        let mut g = Graph::new(StackMode::Passthrough);
        let br = g.add_bridge("br0", false).unwrap();
        let ingress = g.add_port("in", Box::new(MemoryDriver::full())).unwrap();
        let full = MemoryDriver::full().hw;
        let hw = if robust { full | NetdevFeatures::GSO_ROBUST } else { full.without(NetdevFeatures::GSO_ROBUST) };
        let out =
            g.add_port("out", Box::new(TakesHeld { hw, sent: Vec::new(), held_sent: 0, lin: Vec::new() })).unwrap();
        g.enslave(br, ingress).unwrap();
        g.enslave(br, out).unwrap();
        g.receive_held(ingress, packet, held);
        let d = g.driver_mut::<TakesHeld>(out).unwrap();
        assert_eq!((d.held_sent, &d.sent), (1, &vec![frame.clone()]), "robust {robust}");
        assert_eq!(s.used(), [(0, 0)]);
    }
}

/// A guest's superpacket (DODGY) to a port that takes held payloads but
/// for GSO_ROBUST, and allows fewer segments than it carries, which its
/// metadata does not say (`gso_segs` 0: a DODGY packet's segments not
/// counted yet), so only the segmenter's header-only check finds it would
/// cut it: the cut is discarded and the packet materialised and cut
/// again; the port gets the whole frame's segments and the segmenter
/// counts the packet once.
#[test]
fn a_held_packet_the_segmenter_would_cut_is_cut_once_whole() {
    let s = Sender::new();
    let (frame, _, mut packet, held) = s.send_one_held();
    packet.meta.gso_segs = 0;
    let port = || TakesHeld {
        hw: MemoryDriver::full().hw.without(NetdevFeatures::GSO_ROBUST),
        sent: Vec::new(),
        held_sent: 0,
        lin: Vec::new(),
    };
    let topology = || {
        let mut g = Graph::new(StackMode::Passthrough);
        let br = g.add_bridge("br0", false).unwrap();
        let ingress = g.add_port("in", Box::new(MemoryDriver::full())).unwrap();
        let out = g.add_port("out", Box::new(port())).unwrap();
        g.enslave(br, ingress).unwrap();
        g.enslave(br, out).unwrap();
        g.set_gso_limits(out, superpacket::offload::gso::GSO_LEGACY_MAX_SIZE, 4);
        (g, ingress, out)
    };
    let (mut g, ingress, out) = topology();
    let mut whole = Packet::from_frame(&frame);
    whole.meta = packet.meta;
    g.receive(ingress, whole);
    let want = std::mem::take(&mut g.driver_mut::<TakesHeld>(out).unwrap().sent);
    assert!(want.len() > 4, "cut into {} segments", want.len());
    let (mut g, ingress, out) = topology();
    g.receive_held(ingress, packet, held);
    let d = g.driver_mut::<TakesHeld>(out).unwrap();
    assert_eq!((d.held_sent, &d.sent), (0, &want));
    let c = g.segmenter_counters();
    assert_eq!((c.packets_in, c.superpackets_segmented, c.segments_out), (1, 1, want.len() as u64));
    assert_eq!(s.used(), [(0, 0)]);
}

/// Through a cross-connect, a guest's superpacket reaches the other member,
/// whose driver takes held payloads, still held: copied once, from the
/// sender's memory, byte for byte; a cross-connect with one member drops
/// it (`no-peer`). Either way the sender's chain comes back once.
#[test]
fn a_cross_connect_passes_a_held_payload_to_its_other_member() {
    for members in [2, 1] {
        let s = Sender::new();
        let (frame, _, packet, held) = s.send_one_held();
        let mut g = Graph::new(StackMode::Passthrough);
        let xc = g.add_xconnect("xc0").unwrap();
        let ingress = g.add_port("in", Box::new(MemoryDriver::full())).unwrap();
        let port = TakesHeld { hw: MemoryDriver::full().hw, sent: Vec::new(), held_sent: 0, lin: Vec::new() };
        let out = g.add_port("out", Box::new(port)).unwrap();
        g.enslave(xc, ingress).unwrap();
        if members == 2 {
            g.enslave(xc, out).unwrap();
        }
        g.receive_held(ingress, packet, held);
        let d = g.driver_mut::<TakesHeld>(out).unwrap();
        if members == 2 {
            assert_eq!((d.held_sent, &d.sent), (1, &vec![frame.clone()]));
        } else {
            assert_eq!(d.sent, Vec::<Vec<u8>>::new());
            assert_eq!(g.counters(xc).drops.get("no-peer"), Some(&1));
        }
        assert_eq!(s.used(), [(0, 0)], "{members} members");
    }
}

/// A frame for the bridge itself goes up to its stack: that step reads
/// payloads, so the walk materialises the packet before it (the packet
/// delivered locally is whole); the chain comes back once.
#[test]
fn passed_up_the_packet_is_whole_before_the_step() {
    let s = Sender::new();
    let (mut g, ingress, _) = bridge(1, false);
    let br = g.id("br0").unwrap();
    let (mut frame, hdr) = superpacket(20_000);
    frame[..6].copy_from_slice(&g.device(br).mac.0);
    let (packet, held) = s.send_held(&[(&frame, hdr)]).pop().unwrap();
    g.receive_held(ingress, packet, held);
    assert_eq!(g.take_local(br).map(|p| p.to_vec()), Some(frame));
    assert_eq!(s.used(), [(0, 0)]);
}

/// Where the frontend's guest memory is in its own address space (the
/// addresses of `SET_VRING_ADDR`).
const FRONTEND_VA: u64 = 0x7f00_0000_0000;
/// The receive queue's rings (the transmit queue's are tests.rs's).
const RX_RINGS: (u64, u64, u64) = (0x4000, 0x4800, 0x5000);

/// A guest behind a real vhost-user frontend (the `vhost` crate's, as a
/// VMM drives it) on a port of one queue pair: the port's control thread
/// answers it (`vhost-user-backend`'s handler, `GET_VRING_BASE` included),
/// the test drives the port's driver as its engine worker would, and sees
/// the guest memory (a memfd both map).
struct ProtocolGuest {
    fe: vhost::vhost_user::Frontend,
    m: GuestMemoryMmap<()>,
    d: super::VhostUserDriver,
    kick: vmm_sys_util::eventfd::EventFd,
    call: vmm_sys_util::eventfd::EventFd,
    _dir: tempfile::TempDir,
}

impl ProtocolGuest {
    /// Connected, every offered feature acked (`PROTOCOL_FEATURES` and
    /// `RESET_DEVICE` among them), both rings started and enabled, the
    /// transmit ring's used elements marked [`UNUSED`].
    fn start() -> ProtocolGuest {
        use std::os::fd::AsRawFd;
        use vhost::vhost_user::message::VhostUserProtocolFeatures;
        use vhost::vhost_user::{Frontend, VhostUserFrontend};
        use vhost::{VhostBackend, VhostUserMemoryRegionInfo};
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("stop.sock");
        let d = super::VhostUserDriver::open(&super::VhostUserOptions::new(&sock)).unwrap();
        let file = super::tests::memfd(MEM as u64, true);
        let m = GuestMemoryMmap::<()>::from_ranges_with_files([(
            GuestAddress(0),
            MEM,
            Some(vm_memory::FileOffset::new(file.try_clone().unwrap(), 0)),
        )])
        .unwrap();
        for i in 0..u64::from(SIZE) {
            m.write_obj(UNUSED.0, GuestAddress(USED + 4 + 8 * i)).unwrap();
            m.write_obj(UNUSED.1, GuestAddress(USED + 8 + 8 * i)).unwrap();
        }
        let mut fe = Frontend::connect(&sock, 2).unwrap();
        fe.set_owner().unwrap();
        let f = fe.get_features().unwrap();
        fe.set_features(f).unwrap();
        let pf = fe.get_protocol_features().unwrap();
        fe.set_protocol_features(pf & VhostUserProtocolFeatures::RESET_DEVICE).unwrap();
        let region = VhostUserMemoryRegionInfo {
            guest_phys_addr: 0,
            memory_size: MEM as u64,
            userspace_addr: FRONTEND_VA,
            mmap_offset: 0,
            mmap_handle: file.as_raw_fd(),
        };
        fe.set_mem_table(&[region]).unwrap();
        let g = ProtocolGuest {
            fe,
            m,
            d,
            kick: vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap(),
            call: vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).unwrap(),
            _dir: dir,
        };
        g.start_ring(0, 0);
        g.start_ring(1, 0);
        g.fe.clone().set_vring_enable(0, true).unwrap();
        g.fe.clone().set_vring_enable(1, true).unwrap();
        // `SET_VRING_ENABLE` has no reply: a request that has one returns
        // once the port took both, so no test's first burst finds its
        // transmit ring not yet enabled.
        g.fe.get_features().unwrap();
        // The first kick publishes the vrings to the workers.
        g.kick.write(1).unwrap();
        let t0 = std::time::Instant::now();
        let mut d = g.d;
        while !d.connected() {
            assert!(t0.elapsed() < std::time::Duration::from_secs(5), "the port never took the connection");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        ProtocolGuest { d, ..g }
    }

    /// Starts ring `q` (0 receive, 1 transmit) from available index `base`,
    /// as a frontend does (`SET_VRING_NUM`, `_ADDR`, `_BASE`, `_CALL`,
    /// `_KICK`), and returns once the port has taken the requests.
    fn start_ring(&self, q: usize, base: u16) {
        use vhost::{VhostBackend, VringConfigData};
        let (desc, avail, used) = if q == 0 { RX_RINGS } else { (DESC, AVAIL, USED) };
        let config = VringConfigData {
            queue_max_size: SIZE,
            queue_size: SIZE,
            flags: 0,
            desc_table_addr: FRONTEND_VA + desc,
            used_ring_addr: FRONTEND_VA + used,
            avail_ring_addr: FRONTEND_VA + avail,
            log_addr: None,
        };
        self.fe.set_vring_num(q, SIZE).unwrap();
        self.fe.set_vring_addr(q, &config).unwrap();
        self.fe.set_vring_base(q, base).unwrap();
        self.fe.set_vring_call(q, &self.call).unwrap();
        self.fe.set_vring_kick(q, &self.kick).unwrap();
        // A request with a reply: the port has taken the ones before.
        self.fe.get_features().unwrap();
    }

    /// Offers `frames` on the transmit ring (see [`offer_chains`]) and
    /// takes one burst through the driver, as the engine worker does:
    /// the packets and their held frames.
    fn send(
        &mut self,
        frames: &[(&[u8], [u8; 12])],
        first_desc: u16,
        first_slot: u16,
    ) -> (Vec<Packet>, Vec<HeldFrame>) {
        use crate::device::PortDriver;
        offer_chains(&self.m, frames, first_desc, first_slot);
        let (mut out, mut held) = (Vec::new(), Vec::new());
        self.d.recv_burst_held(&mut out, &mut held, 64);
        (out, held)
    }

    /// The transmit ring's used index as the guest sees it.
    fn used_idx(&self) -> u16 {
        self.m.read_obj::<u16>(GuestAddress(USED + 2)).unwrap()
    }

    /// Runs `request` (a frontend request) in another thread, and tells
    /// whether it is still unanswered after 200 ms, then its answer once
    /// `meanwhile` ran.
    fn answered_after<T: Send>(
        &self,
        request: impl FnOnce(vhost::vhost_user::Frontend) -> T + Send,
        meanwhile: impl FnOnce(),
    ) -> (bool, T) {
        let fe = self.fe.clone();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::channel();
            scope.spawn(move || tx.send(request(fe)).unwrap());
            let early = rx.recv_timeout(std::time::Duration::from_millis(200)).ok();
            meanwhile();
            let waited = early.is_none();
            let answer = early.unwrap_or_else(|| {
                rx.recv_timeout(std::time::Duration::from_secs(5)).expect("the request is answered")
            });
            (waited, answer)
        })
    }
}

/// `GET_VRING_BASE` of the transmit ring while a frame is held: the base
/// is reported only after the held frame went, its used element written
/// and the used index published, so the base (which counts the chain)
/// and the used ring agree; a frontend that restarts the ring from that
/// base without a reset gets every buffer back.
#[test]
fn get_vring_base_waits_for_held_frames_and_a_restart_from_it_returns_every_buffer() {
    use crate::device::PortDriver;
    use vhost::VhostBackend;
    let mut g = ProtocolGuest::start();
    let (frame, hdr) = superpacket(20_000);
    let (packets, held) = g.send(&[(&frame, hdr)], 0, 0);
    assert_eq!((packets.len(), held.len()), (1, 1), "the superpacket is held");
    let (waited, base) = g.answered_after(|fe| fe.get_vring_base(1).unwrap(), || drop(held));
    assert!(waited, "GET_VRING_BASE answered while a frame of the ring was held");
    assert_eq!(base, 1, "the base counts the held chain");
    assert_eq!((g.used_idx(), used_elem(&g.m, 0)), (1, (0, 0)), "its buffer is used before the base is reported");
    // Restarted from the base, no reset: the next chain comes back too.
    let second_head = (12 + frame.len()).div_ceil(BUF_LEN as usize) as u16;
    g.start_ring(1, base as u16);
    g.kick.write(1).unwrap();
    let (packets, held) = g.send(&[(&frame, hdr)], second_head, 1);
    assert_eq!((packets.len(), held.len()), (1, 1));
    drop(held);
    g.d.flush();
    assert_eq!(g.used_idx(), 2);
    assert_eq!([used_elem(&g.m, 0), used_elem(&g.m, 1)], [(0, 0), (u32::from(second_head), 0)]);
    assert_eq!(super::tests::port_counter(&g.d, "held_stop_timeouts"), 0);
}

/// `GET_VRING_BASE` of either ring after a worker took or placed frames
/// but before the end of its round (where it publishes the used index):
/// the stop publishes it, so the base and the used index agree.
#[test]
fn get_vring_base_publishes_what_the_round_wrote() {
    use crate::device::PortDriver;
    use vhost::VhostBackend;
    let mut g = ProtocolGuest::start();
    let small: Vec<u8> = (0..100u8).collect();
    let (packets, held) = g.send(&[(&small, [0u8; 12])], 0, 0);
    assert_eq!((packets.len(), held.len(), g.used_idx()), (1, 0, 0), "taken whole, the index not yet published");
    assert_eq!(g.fe.get_vring_base(1).unwrap(), 1);
    assert_eq!((g.used_idx(), used_elem(&g.m, 0)), (1, (0, 0)));
    // One receive buffer; a frame placed in it.
    let (desc, avail, used) = RX_RINGS;
    super::tests::desc_at(&g.m, desc, 0, 0x6_0000, 4096, F_WRITE, 0);
    g.m.write_obj(0u16, GuestAddress(avail + 4)).unwrap();
    g.m.write_obj(1u16.to_le(), GuestAddress(avail + 2)).unwrap();
    g.d.xmit(Packet::from_frame(&small)).unwrap();
    assert_eq!(g.m.read_obj::<u16>(GuestAddress(used + 2)).unwrap(), 0, "placed, the index not yet published");
    assert_eq!(g.fe.get_vring_base(0).unwrap(), 1);
    assert_eq!(g.m.read_obj::<u16>(GuestAddress(used + 2)).unwrap(), 1);
    // The rings are the frontend's again: it clears them for a restart;
    // the end of the worker's round publishes nothing into them.
    for ring in [used, USED] {
        g.m.write_obj(0u16, GuestAddress(ring + 2)).unwrap();
    }
    g.d.flush();
    for ring in [used, USED] {
        assert_eq!(g.m.read_obj::<u16>(GuestAddress(ring + 2)).unwrap(), 0, "written after the stop");
    }
}

/// `SET_VRING_ENABLE(0)` of the transmit ring while a frame is held: the
/// ring stays started (vhost-user, "Ring states": a disabled ring's
/// transmit buffers are still processed), so the chain comes back as
/// usual, published at the end of the round.
#[test]
fn a_ring_disabled_while_a_frame_is_held_still_gets_its_chain_back() {
    use crate::device::PortDriver;
    use vhost::VhostBackend;
    use vhost::vhost_user::VhostUserFrontend;
    let mut g = ProtocolGuest::start();
    let (frame, hdr) = superpacket(20_000);
    let (_packets, held) = g.send(&[(&frame, hdr)], 0, 0);
    assert_eq!(held.len(), 1);
    g.fe.clone().set_vring_enable(1, false).unwrap();
    g.fe.get_features().unwrap();
    drop(held);
    g.d.flush();
    assert_eq!((g.used_idx(), used_elem(&g.m, 0)), (1, (0, 0)));
}

/// `RESET_DEVICE` while a frame is held: the reset is answered only once
/// the held frame went, and that wrote nothing (the guest takes its
/// buffers back with the reset).
#[test]
fn a_reset_waits_for_held_frames_which_write_nothing() {
    use vhost::VhostBackend;
    use vhost::vhost_user::VhostUserFrontend;
    let mut g = ProtocolGuest::start();
    let (frame, hdr) = superpacket(20_000);
    let (_packets, held) = g.send(&[(&frame, hdr)], 0, 0);
    assert_eq!(held.len(), 1);
    let reset = |mut fe: vhost::vhost_user::Frontend| {
        fe.reset_device().unwrap();
        // A request with a reply: answered after the reset.
        fe.get_features().unwrap()
    };
    let (waited, _) = g.answered_after(reset, || drop(held));
    assert!(waited, "RESET_DEVICE answered while a frame was held");
    assert_eq!((g.used_idx(), used_elem(&g.m, 0)), (0, UNUSED));
}

/// The frontend leaves while a frame is held: the next frontend is served
/// only once the held frame went, and that wrote nothing.
#[test]
fn after_a_disconnect_the_next_frontend_waits_for_held_frames_which_write_nothing() {
    use vhost::VhostBackend;
    let mut g = ProtocolGuest::start();
    let (frame, hdr) = superpacket(20_000);
    let (_packets, held) = g.send(&[(&frame, hdr)], 0, 0);
    assert_eq!(held.len(), 1);
    let ProtocolGuest { fe, m, d, _dir: dir, .. } = g;
    drop(fe);
    super::tests::wait_counter(&d, "detaches", 1);
    let sock = dir.path().join("stop.sock");
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        scope.spawn(move || {
            let fe = vhost::vhost_user::Frontend::connect(&sock, 2).unwrap();
            tx.send(fe.get_features().is_ok()).unwrap();
        });
        assert!(
            rx.recv_timeout(std::time::Duration::from_millis(200)).is_err(),
            "the next frontend was served while a frame of the last one was held"
        );
        drop(held);
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap());
    });
    assert_eq!((m.read_obj::<u16>(GuestAddress(USED + 2)).unwrap(), used_elem(&m, 0)), (0, UNUSED));
}

/// A burst of frames some of which are held: each held frame names its
/// packet's place in the burst, the worker's only way to pair them.
#[test]
fn each_held_frame_names_its_packets_place_in_the_burst() {
    let mut g = ProtocolGuest::start();
    let (frame, hdr) = superpacket(20_000);
    let small: Vec<u8> = (0..100u8).collect();
    let frames: [(&[u8], [u8; 12]); 4] = [(&small, [0; 12]), (&frame, hdr), (&small, [0; 12]), (&frame, hdr)];
    let (packets, held) = g.send(&frames, 0, 0);
    assert_eq!(packets.len(), 4);
    let places: Vec<usize> = held.iter().map(HeldFrame::burst_index).collect();
    assert_eq!(places, [1, 3]);
    for h in &held {
        assert_eq!(packets[h.burst_index()].len(), h.len() + HELD_HEAD);
        assert!(h.belongs_to(&packets[h.burst_index()]));
    }
}
