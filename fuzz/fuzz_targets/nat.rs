//! NAT: the connection table driven by arbitrary creates, lookups and
//! expiries on an arbitrary clock, and the packet rewrite on arbitrary frames.
//! Invariants:
//! - the table never holds more than `max_conns`; `created` = live +
//!   `expired` (connections only leave by expiring); a created connection
//!   translates both ways (`lookup` of the original gives the translated
//!   tuple, `lookup` of the reply gives the original reversed) until it expires;
//! - `rewrite` of a frame that passes `pcap check` gives a frame that still
//!   passes it (incremental IPv4 and TCP/UDP checksum updates, UDP's
//!   "no checksum" kept, CHECKSUM_PARTIAL updated as a pseudo-header sum)
//!   and carries the new tuple; `tuple_of` never panics.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::net::Ipv4Addr;
use superpacket::packet::{ChecksumState, Packet};
use superpacket::validate;
use superpacket::wire::{FrameHeaders, L3Kind};
use superpacket_engine::device::ingress::ipv4_header;
use superpacket_engine::device::nat::{Nat, Tuple, rewrite, tuple_of};
use superpacket_fuzz::{Flows, FrameRecipe, is_valid, problems};

#[derive(Debug, Arbitrary, Clone, Copy)]
struct T {
    udp: bool,
    src: u8,
    sport: u16,
    dst: u8,
    dport: u16,
}

impl T {
    fn tuple(self) -> Tuple {
        Tuple {
            proto: if self.udp { 17 } else { 6 },
            src: Ipv4Addr::new(10, 0, 0, self.src % 8),
            sport: self.sport % 8 + 1020,
            dst: Ipv4Addr::new(192, 0, 2, self.dst % 4),
            dport: self.dport % 4 + 80,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Op {
    Create { orig: T, to_src: u8, to_sport: u16 },
    Lookup { t: T, reply: bool, fin: bool },
    Expire,
    Advance(u32),
    Rewrite { frame: FrameRecipe, to: T, partial: bool },
}

#[derive(Debug, Arbitrary)]
struct Input {
    max_conns: u8,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let mut nat = Nat::new(usize::from(input.max_conns % 16) + 1);
    let mut flows = Flows::new();
    let mut now = 1_000_000_000u64;
    // Connections created and when they were last used (a lookup refreshes them).
    let mut live: Vec<(Tuple, Tuple)> = Vec::new();
    for op in input.ops.iter().take(200) {
        match op {
            Op::Create { orig, to_src, to_sport } => {
                let orig = orig.tuple();
                let to = Tuple { src: Ipv4Addr::new(203, 0, 113, to_src % 2), sport: to_sport % 8 + 1020, ..orig };
                if let Some(got) = nat.create(orig, to, now) {
                    assert_eq!((got.proto, got.src, got.dst, got.dport), (to.proto, to.src, to.dst, to.dport));
                    live.push((orig, got));
                    // Both directions translate at once.
                    let fwd = nat.lookup(&orig, now, false).expect("a new connection translates");
                    assert_eq!(fwd.to, got);
                    let rev = nat.lookup(&got.reversed(), now, false).expect("its reply translates");
                    assert_eq!(rev.to, orig.reversed());
                }
            }
            Op::Lookup { t, reply, fin } => {
                let t = t.tuple();
                let q = if *reply { t.reversed() } else { t };
                if let Some(rw) = nat.lookup(&q, now, *fin) {
                    assert!(nat.lookup_only(&q).is_some());
                    let _ = rw;
                }
            }
            Op::Expire => {
                nat.expire(now);
            }
            Op::Advance(d) => now += u64::from(*d) * 1_000_000,
            Op::Rewrite { frame, to, partial } => {
                let mut f = flows.build(frame);
                let Ok(h) = FrameHeaders::parse(&f) else {
                    // Damaged frames: validation refuses or accepts, never panics.
                    if let Ok(ip) = ipv4_header(&f, 14, f.len()) {
                        let _ = tuple_of(&f, &ip, false);
                    }
                    continue;
                };
                let mut meta = superpacket::packet::OffloadMeta::default();
                if *partial
                    && !h.is_fragment
                    && let Some(field) = h.l4.csum_offset()
                    && let Some(pseudo) = validate::l4_pseudo_header_sum(&f, &h)
                {
                    f[h.l4_offset + usize::from(field)..][..2].copy_from_slice(&pseudo.to_be_bytes());
                    meta.csum = ChecksumState::Partial { start: h.l4_offset as u16, offset: field };
                }
                if h.l3 != L3Kind::Ipv4 {
                    continue;
                }
                let Ok(ip) = ipv4_header(&f, h.l3_offset, f.len()) else { continue };
                let Ok(Some(conn)) = tuple_of(&f, &ip, false) else { continue };
                let (from, l4) = (conn.tuple, conn.l4);
                let was_valid = is_valid(&f, &meta);
                let to = Tuple { proto: from.proto, ..to.tuple() };
                let mut pkt = Packet::from_frame(&f);
                pkt.meta = meta;
                rewrite(&mut pkt, h.l3_offset, l4, &from, &to).expect("a validated L4 header is rewritten");
                let after = superpacket_fuzz::bytes_of(&pkt);
                let ip = ipv4_header(&after, h.l3_offset, after.len()).expect("still a valid IPv4 header");
                let t2 = tuple_of(&after, &ip, false).expect("still valid").expect("still a TCP/UDP packet").tuple;
                assert_eq!(t2, to);
                if was_valid {
                    let p = problems(&after, &pkt.meta);
                    assert!(p.is_empty(), "NAT rewrite broke a valid frame: {p:?}");
                }
            }
        }
        assert!(nat.len() <= nat.max_conns, "{} connections > {}", nat.len(), nat.max_conns);
        let c = nat.counters;
        assert_eq!(c.created, nat.len() as u64 + c.expired, "{c:?} live {}", nat.len());
    }
    // Everything expires eventually (TCP established: 5 days).
    now += 500_000 * 1_000_000_000;
    nat.expire(now);
    assert!(nat.is_empty());
    for (orig, got) in &live {
        assert!(nat.lookup(orig, now, false).is_none() && nat.lookup(&got.reversed(), now, false).is_none());
    }
});
