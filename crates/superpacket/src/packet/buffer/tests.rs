use super::*;
use proptest::prelude::*;

fn frame(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

#[test]
fn vlan_push_pop_moves_only_mac_addresses() {
    let f = frame(100);
    let mut p = Packet::from_frame(&f);
    let payload_ptr = p.linear()[14..].as_ptr();
    p.push_vlan_tag(0x8100, 100).unwrap();
    p.push_vlan_tag(0x88A8, 200).unwrap();
    assert_eq!(p.len(), 108);
    // The bytes after the Ethernet header did not move in memory.
    assert_eq!(p.linear()[22..].as_ptr(), payload_ptr);
    assert_eq!(&p.linear()[..12], &f[..12]);
    assert_eq!(&p.linear()[12..20], &[0x88, 0xA8, 0, 200, 0x81, 0x00, 0, 100]);
    assert_eq!(&p.linear()[20..], &f[12..]);
    assert_eq!(p.pop_vlan_tag().unwrap(), (0x88A8, 200));
    assert_eq!(p.pop_vlan_tag().unwrap(), (0x8100, 100));
    assert_eq!(p.linear(), &f[..]);
    assert_eq!(p.linear()[14..].as_ptr(), payload_ptr);
    assert_eq!(p.pop_vlan_tag(), Err(PacketError::NotVlanTagged { ethertype: u16::from_be_bytes([f[12], f[13]]) }));
}

#[test]
fn push_beyond_headroom_reallocates_and_keeps_bytes() {
    let f = frame(30);
    let mut p = Packet::from_frame_with_headroom(&f, 2);
    p.push(10).unwrap().fill(0xEE);
    assert_eq!(p.len(), 40);
    assert_eq!(&p.linear()[..10], &[0xEE; 10]);
    assert_eq!(&p.linear()[10..], &f[..]);
    assert!(p.headroom() >= DEFAULT_HEADROOM);
}

#[test]
fn push_past_the_linear_limit_fails_and_leaves_the_packet() {
    let f = frame(30);
    let mut p = Packet::from_frame(&f);
    p.meta.csum = ChecksumState::Partial { start: 34, offset: 16 };
    for n in [usize::MAX, usize::MAX / 2, MAX_LINEAR_END] {
        assert!(matches!(p.push(n), Err(PacketError::LinearTooLong { .. })), "push({n})");
        assert_eq!((p.linear(), p.headroom()), (&f[..], DEFAULT_HEADROOM));
        assert_eq!(p.meta.csum, ChecksumState::Partial { start: 34, offset: 16 });
    }
    // One byte more than fits.
    let mut q = Packet::from_frame_with_headroom(&[], 0);
    assert_eq!(q.extend_linear(&f), Ok(()));
    assert_eq!(
        q.push(MAX_LINEAR_END - 30 - DEFAULT_HEADROOM + 1).map(|_| ()),
        Err(PacketError::LinearTooLong { end: MAX_LINEAR_END + 1 })
    );
}

#[test]
fn move_from_moves_the_packet_and_leaves_the_source_empty() {
    let f = frame(3000);
    let mut src = Packet::from_frame(&f);
    src.detach_payload(54).unwrap();
    src.push_frag(Packet::from_frame(&frame(100)));
    src.meta.gso_size = 1448;
    let mut slot = Packet::default();
    slot.move_from(&mut src);
    assert_eq!((slot.to_vec(), slot.headroom(), slot.frag_list().len()), (f.clone(), DEFAULT_HEADROOM, 1));
    assert_eq!(slot.meta.gso_size, 1448);
    assert_eq!((src.total_len(), src.headroom(), src.truesize()), (0, 0, std::mem::size_of::<Packet>()));
    // Into a packet that still holds bytes: the source gets its buffers.
    let mut other = Packet::from_frame(&frame(40));
    other.move_from(&mut slot);
    assert_eq!(other.to_vec(), f);
    assert_eq!((slot.total_len(), slot.headroom()), (0, 0));
    assert_eq!(slot.truesize(), std::mem::size_of::<Packet>() + DEFAULT_HEADROOM + 40);
}

/// The segment list and the frag list are dropped by hand (no drop glue):
/// a packet with both, of sizes the pool does not keep, leaves nothing
/// allocated once dropped, its segments' and frag-list packets' memory
/// included; so do the lists a split and a general merge leave behind.
#[test]
fn a_dropped_packet_frees_its_segment_and_frag_lists() {
    let info = allocation_counter::measure(|| {
        let mut p = Packet::from_frame(&frame(3000));
        p.detach_payload(54).unwrap();
        p.append_segment(Bytes::from(frame(500))).unwrap();
        for i in 0..5 {
            let mut q = Packet::from_frame(&frame(200 + i));
            q.append_segment(Bytes::from(frame(100))).unwrap();
            p.push_frag(q);
        }
        assert!(p.has_segment_list() && p.frag_list().len() == 5 && !p.is_linear());
        let tail = p.split_off(54 + 1000).unwrap();
        let mut joined = Packet::from_frame(&frame(60));
        joined.append_payload_of(tail, 0).unwrap();
        drop(joined);
        drop(p);
    });
    assert_eq!((info.count_current, info.bytes_current), (0, 0), "{info:?}");
}

#[test]
fn move_out_leaves_a_shell_that_owns_nothing() {
    let f = frame(3000);
    let mut p = Packet::from_frame(&f);
    p.detach_payload(54).unwrap();
    p.push_frag(Packet::from_frame(&frame(100)));
    p.meta.gso_size = 1448;
    let out = p.move_out();
    assert_eq!((out.to_vec(), out.frag_list().len(), out.meta.gso_size), (f, 1, 1448));
    assert_eq!((p.total_len(), p.headroom(), p.meta.gso_size), (0, 0, 1448));
    assert_eq!(p.truesize(), std::mem::size_of::<Packet>(), "the shell owns no memory");
}

#[test]
fn total_len_counts_the_frag_list_and_is_linear_sees_segments_and_frags() {
    let lens = |p: &Packet| (p.len(), p.total_len(), p.total_len_inline(), p.is_linear());
    let mut p = Packet::from_frame(&frame(100));
    assert_eq!(lens(&p), (100, 100, 100, true));
    p.push_frag(Packet::from_frame(&frame(40)));
    assert_eq!(lens(&p), (100, 140, 140, false));
    let mut q = Packet::from_frame(&frame(100));
    q.append_segment(Bytes::from(frame(30))).unwrap();
    assert_eq!(lens(&q), (130, 130, 130, false));
    q.push_frag(p);
    assert_eq!(lens(&q), (130, 270, 270, false));
}

#[test]
fn partial_checksum_start_follows_push_and_pull() {
    let mut p = Packet::from_frame(&frame(60));
    p.meta.csum = ChecksumState::Partial { start: 34, offset: 16 };
    p.push_vlan_tag(0x8100, 5).unwrap();
    assert_eq!(p.meta.csum, ChecksumState::Partial { start: 38, offset: 16 });
    p.pop_vlan_tag().unwrap();
    assert_eq!(p.meta.csum, ChecksumState::Partial { start: 34, offset: 16 });
    assert_eq!(p.pull(35), Err(PacketError::ChecksumStartPulled { pulled: 35, csum_start: 34 }));
    p.pull(14).unwrap();
    assert_eq!(p.meta.csum, ChecksumState::Partial { start: 20, offset: 16 });
}

#[test]
fn detach_split_and_merge_share_payload() {
    let f = frame(9000);
    let mut p = Packet::from_frame(&f);
    p.detach_payload(54).unwrap();
    assert_eq!(p.headlen(), 54);
    assert_eq!(p.segments().len(), 1);
    let seg_ptr = p.segments()[0].as_slice().as_ptr();
    let tail = p.split_off(54 + 4000).unwrap();
    assert_eq!(p.len(), 4054);
    assert_eq!(tail.len(), 9000 - 4054);
    // The split shares the same allocation: the tail starts 4000 bytes in.
    assert_eq!(tail.segments()[0].as_slice().as_ptr(), unsafe_free_offset(seg_ptr, 4000));
    let mut joined = p.clone();
    joined.append_payload_of(tail, 0).unwrap();
    assert_eq!(joined.to_vec(), f);
}

/// Pointer arithmetic for the assertion above without `unsafe`.
fn unsafe_free_offset(p: *const u8, n: usize) -> *const u8 {
    p.wrapping_add(n)
}

#[test]
fn append_payload_skips_headers_and_reports_full() {
    let mut agg = Packet::from_frame(&frame(100));
    for _ in 0..MAX_SEGMENTS {
        agg.append_payload_of(Packet::from_frame(&frame(80)), 54).unwrap();
    }
    assert_eq!(agg.len(), 100 + MAX_SEGMENTS * 26);
    let back = agg.append_payload_of(Packet::from_frame(&frame(80)), 54).unwrap_err();
    assert_eq!(back.len(), 80);
    agg.push_frag(back);
    assert_eq!(agg.total_len(), 100 + MAX_SEGMENTS * 26 + 80);
    assert!(agg.truesize() > agg.total_len());
}

#[test]
fn read_at_crosses_segments() {
    let f = frame(300);
    let mut p = Packet::from_frame(&f);
    p.detach_payload(20).unwrap();
    let t = p.split_off(120).unwrap();
    p.append_payload_of(t, 0).unwrap();
    let mut buf = [0u8; 150];
    p.read_at(50, &mut buf).unwrap();
    assert_eq!(&buf[..], &f[50..200]);
    assert!(p.read_at(200, &mut buf).is_err());
    assert!(p.read_at(usize::MAX, &mut buf).is_err());
}

#[derive(Debug, Clone)]
enum Op {
    Push(usize),
    Pull(usize),
    Trim(usize),
    Detach(usize),
    SplitMerge(usize),
    VlanPush(u16),
    VlanPop,
    Linearize,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..100).prop_map(Op::Push),
        (0usize..100).prop_map(Op::Pull),
        (0usize..3000).prop_map(Op::Trim),
        (0usize..200).prop_map(Op::Detach),
        (0usize..3000).prop_map(Op::SplitMerge),
        any::<u16>().prop_map(Op::VlanPush),
        Just(Op::VlanPop),
        Just(Op::Linearize),
    ]
}

proptest! {
    /// Any sequence of operations keeps the packet equal to a plain Vec model.
    #[test]
    fn operations_match_vec_model(len in 0usize..2500, ops in proptest::collection::vec(op(), 0..20)) {
        let mut model = frame(len);
        let mut p = Packet::from_frame(&model);
        for op in ops {
            match op {
                Op::Push(n) => {
                    p.push(n).unwrap().fill(0xAB);
                    model.splice(0..0, std::iter::repeat_n(0xAB, n));
                }
                Op::Pull(n) => {
                    if p.pull(n).is_ok() { model.drain(..n); } else { prop_assert!(n > p.headlen()); }
                }
                Op::Trim(n) => {
                    if p.trim(n).is_ok() { model.truncate(n); } else { prop_assert!(n > model.len()); }
                }
                Op::Detach(n) => {
                    let _ = p.detach_payload(n);
                }
                Op::SplitMerge(at) => {
                    if let Ok(t) = p.split_off(at) {
                        prop_assert_eq!(p.len(), at);
                        if let Err(back) = p.append_payload_of(t, 0) {
                            // Segment slots full: linearize and merge again.
                            p.linearize();
                            p.append_payload_of(back, 0).unwrap();
                        }
                    }
                }
                Op::VlanPush(tci) => {
                    if p.push_vlan_tag(0x8100, tci).is_ok() {
                        let mut tag = vec![0x81, 0x00];
                        tag.extend_from_slice(&tci.to_be_bytes());
                        model.splice(12..12, tag);
                    }
                }
                Op::VlanPop => {
                    if p.pop_vlan_tag().is_ok() { model.drain(12..16); }
                }
                Op::Linearize => p.linearize(),
            }
            prop_assert_eq!(p.len(), model.len());
            prop_assert_eq!(p.to_vec(), model.clone());
            prop_assert!(p.segments().iter().all(|s| !s.is_empty()));
        }
    }
}

#[test]
fn reserve_segments_and_frag_list_allocate_once() {
    let mut agg = Packet::from_frame(&frame(100));
    agg.reserve_segments(usize::MAX);
    agg.reserve_frag_list(4);
    let parts: Vec<Packet> = (0..MAX_SEGMENTS).map(|_| Packet::from_frame(&frame(80))).collect();
    let info = allocation_counter::measure(|| {
        for p in parts {
            agg.append_payload_of(p, 54).unwrap();
        }
        agg.push_frag(Packet::default());
    });
    assert_eq!(info.count_total, 0, "no allocation once reserved");
    assert_eq!(agg.segments().len(), MAX_SEGMENTS);
}

#[test]
fn all_chunks_include_the_frag_list() {
    let f = frame(200);
    let mut p = Packet::from_frame(&f[..100]);
    p.append_payload_of(Packet::from_frame(&f[100..150]), 0).unwrap();
    let mut tail = Packet::from_frame(&f[140..200]);
    tail.pull(10).unwrap();
    p.push_frag(tail);
    let all: Vec<u8> = p.all_chunks().flatten().copied().collect();
    assert_eq!(all, f);
    assert_eq!(all.len(), p.total_len());
    let mut copied = vec![1, 2, 3];
    p.copy_all_to(&mut copied);
    assert_eq!(copied, f);
    assert_eq!(p.to_vec(), &f[..150], "to_vec is the packet's own bytes only");
    p.frag_list_mut()[0].trim(49).unwrap();
    assert_eq!(p.total_len(), 199);
}
