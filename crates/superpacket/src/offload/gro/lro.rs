//! LRO batch sort (offload-rules 8.2, FreeBSD `tcp_lro_queue_mbuf` /
//! `tcp_lro_flush_all` as used by iflib since 2025): a whole receive batch is
//! queued, sorted by RSS hash with arrival order kept inside a hash, and only
//! then coalesced, so that packets of one flow that arrived interleaved with
//! many other flows become adjacent and merge.
//!
//! The sort key is `hash << 32 | arrival index`, so an unstable sort of
//! plain `u64`s is stable per flow. The RSS hash is the frame's own
//! ([`crate::packet::OffloadMeta::rss_hash`], as a NIC provides) or the
//! Toeplitz hash with the standard Microsoft key over addresses and ports
//! ([`super::toeplitz`]).

use super::toeplitz::Toeplitz;
use crate::packet::Packet;
use crate::wire::field::be16;
use crate::wire::{L3Kind, L4Kind, Medium};

/// The RSS hash of a packet of `medium`: its own if it has one, else
/// Toeplitz over the IP addresses and (TCP/UDP, not a fragment) the ports; 0
/// for anything else.
pub fn rss_hash(pkt: &Packet, medium: Medium) -> u32 {
    if let Some(h) = pkt.meta.rss_hash {
        return h;
    }
    let frame = pkt.linear();
    let Ok(h) = medium.parse(frame) else {
        return 0;
    };
    let ip = &frame[h.l3_offset..];
    let ports = match h.l4 {
        L4Kind::Tcp | L4Kind::Udp if !h.is_fragment => {
            let l4 = &frame[h.l4_offset..];
            Some((be16(l4, 0), be16(l4, 2)))
        }
        _ => None,
    };
    let t = Toeplitz::standard();
    match h.l3 {
        L3Kind::Ipv4 => {
            t.hash_v4(ip[12..16].try_into().expect("4 bytes"), ip[16..20].try_into().expect("4 bytes"), ports)
        }
        L3Kind::Ipv6 => {
            t.hash_v6(ip[8..24].try_into().expect("16 bytes"), ip[24..40].try_into().expect("16 bytes"), ports)
        }
        _ => 0,
    }
}

/// The queue of one receive batch in LRO mode.
#[derive(Debug, Default)]
pub struct LroQueue {
    keys: Vec<u64>,
    packets: Vec<Packet>,
}

impl LroQueue {
    /// An empty queue with room for `capacity` packets.
    pub fn with_capacity(capacity: usize) -> LroQueue {
        LroQueue { keys: Vec::with_capacity(capacity), packets: Vec::with_capacity(capacity) }
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.packets.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Queues a packet with its RSS hash.
    pub fn push(&mut self, pkt: Packet, hash: u32) {
        let index = self.packets.len() as u64;
        self.keys.push((hash as u64) << 32 | (index & 0xFFFF_FFFF));
        self.packets.push(pkt);
    }

    /// Sorts the batch and hands every packet to `f(hash, packet)` in sorted
    /// order (by hash, arrival order within a hash). The queue is empty
    /// afterwards and keeps its capacity.
    pub fn drain_sorted(&mut self, mut f: impl FnMut(u32, Packet)) {
        self.keys.sort_unstable();
        for &k in &self.keys {
            let pkt = std::mem::take(&mut self.packets[(k & 0xFFFF_FFFF) as usize]);
            f((k >> 32) as u32, pkt);
        }
        self.keys.clear();
        self.packets.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_by_hash_keeping_arrival_order() {
        let mut q = LroQueue::default();
        let hashes = [5u32, 1, 5, 3, 1, 5];
        for (i, &h) in hashes.iter().enumerate() {
            let mut p = Packet::from_frame(&[i as u8; 20]);
            p.meta.rss_hash = Some(h);
            q.push(p, rss_hash(&Packet::from_frame(&[0; 4]), Medium::Ethernet).wrapping_add(h));
        }
        let mut seen = Vec::new();
        q.drain_sorted(|h, p| seen.push((h, p.linear()[0])));
        let order: Vec<u8> = seen.iter().map(|s| s.1).collect();
        assert_eq!(order, vec![1, 4, 3, 0, 2, 5]);
        assert!(q.is_empty());
    }
}
