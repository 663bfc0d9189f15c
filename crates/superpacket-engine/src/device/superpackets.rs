//! Building superpackets for device tests and benches.

use superpacket::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use superpacket::wire::{FrameHeaders, L3Kind, L4Kind};

/// A fraglist aggregate of complete `frames` as GRO leaves it (offload-rules
/// 1.6, 2.4): the head is the first frame with its IP (and UDP) length
/// covering every payload; the others are chained from their IP header
/// (Linux pulled their MAC header); `CHECKSUM_UNNECESSARY`.
///
/// Returns `None` if the frames do not parse or are fewer than two.
pub fn fraglist_aggregate(frames: &[Vec<u8>]) -> Option<Packet> {
    if frames.len() < 2 {
        return None;
    }
    let h = FrameHeaders::parse(&frames[0]).ok()?;
    let mut extra = 0;
    for f in &frames[1..] {
        extra += FrameHeaders::parse(f).ok()?.payload_len;
    }
    let mut head = frames[0].clone();
    let l3 = h.l3_offset;
    if h.l3 == L3Kind::Ipv4 {
        let tot = u16::try_from(h.l3_len + extra).ok()?;
        head[l3 + 2..l3 + 4].copy_from_slice(&tot.to_be_bytes());
        head[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
        let c = superpacket::csum::checksum(&head[l3..l3 + h.l3_header_len]);
        head[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    } else {
        let pl = u16::try_from(h.l3_len - 40 + extra).ok()?;
        head[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
    }
    let udp = h.l4 == L4Kind::Udp;
    if udp {
        let ul = u16::try_from(h.l4_len() + extra).ok()?;
        head[h.l4_offset + 4..h.l4_offset + 6].copy_from_slice(&ul.to_be_bytes());
    }
    let mut p = Packet::from_frame(&head);
    p.reserve_frag_list(frames.len() - 1);
    for f in &frames[1..] {
        p.push_frag(Packet::from_frame(&f[l3..]));
    }
    let proto = match (h.l3, udp) {
        (_, true) => GsoType::UDP_L4,
        (L3Kind::Ipv4, false) => GsoType::TCPV4,
        _ => GsoType::TCPV6,
    };
    p.meta = OffloadMeta {
        gso_type: proto | GsoType::FRAGLIST,
        gso_size: h.payload_len as u16,
        gso_segs: frames.len() as u16,
        csum: ChecksumState::Unnecessary { level: 0 },
        ..OffloadMeta::default()
    };
    Some(p)
}
