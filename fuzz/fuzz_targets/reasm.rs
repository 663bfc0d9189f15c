//! The IPv4/IPv6 reassembler fed an arbitrary sequence of fragments (cut
//! from four synthetic datagrams, clean or damaged, or raw frames) on an
//! arbitrary clock, with arbitrary configurations (local delivery or
//! forwarding, drop-new or evict-oldest, tiny memory thresholds and queue
//! limits, checksum verification on or off). Invariants:
//! - a datagram completed from clean fragments (cut from the real
//!   datagram, MF set exactly where data follows) is the datagram, byte for
//!   byte, and passes `pcap check`; any locally delivered datagram parses
//!   and is not a fragment;
//! - counters: `reassembled` = datagrams completed; `timeouts` >= queues
//!   expired by `expire`;
//! - memory returns to zero: after the clock passes both timeouts and
//!   `expire` runs, no memory, queue or held fragment is left (and `clear`
//!   leaves nothing either).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use superpacket::offload::frag::{
    Delivery, Family, FamilyLimits, ManualClock, MemoryPolicy, ReasmConfig, Reassembler, Scope, Verdict,
    build_fragment, flatten,
};
use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{EtherType, FrameHeaders, L3Kind, TcpFlags, VlanStack, VlanTag};
use superpacket_fuzz::{Flows, FrameRecipe, is_valid, refresh};

const S: u64 = 1_000_000_000;
const SIZES: [usize; 4] = [600, 3000, 1500, 20000];

#[derive(Debug, Arbitrary)]
enum Event {
    /// A fragment cut from datagram `d`: bytes `off..off+len` of its data, MF where data follows.
    Clean { d: u8, off: u16, len: u16, port: u8 },
    /// A fragment with any MF, any range, and byte damage.
    Dirty { d: u8, off: u16, len: u16, more: bool, edits: Vec<(u16, u8)>, repair: bool, vlan: bool },
    /// Any frame.
    Raw(FrameRecipe),
    /// The clock moves forward (milliseconds).
    Advance(u16),
    /// Timers run.
    Expire,
}

#[derive(Debug, Arbitrary)]
struct Input {
    forward: bool,
    evict: bool,
    tiny_mem: Option<u16>,
    max_queues: u8,
    verify_csum: bool,
    timeout_ms: Option<u16>,
    events: Vec<Event>,
}

/// The four datagrams (IPv4/IPv6, UDP/TCP), DF clear, IDs distinct. Built
/// once: they are the same for every input.
static DATAGRAMS: std::sync::LazyLock<Vec<Vec<u8>>> = std::sync::LazyLock::new(|| {
    (0..4u32)
        .map(|i| {
            let transport = if i == 2 { Transport::Tcp } else { Transport::Udp };
            let mut spec = FlowSpec::new(transport, i & 1 == 1, i);
            spec.dont_frag = false;
            let mut d = Flow::new(spec).frame(SIZES[i as usize], TcpFlags::empty()).expect("datagram");
            if i & 1 == 0 {
                d[14 + 4..14 + 6].copy_from_slice(&(0x4400 + i as u16).to_be_bytes()); // IPv4 ID
                refresh(&mut d);
            }
            d
        })
        .collect()
});

fuzz_target!(|input: Input| {
    let mut cfg = ReasmConfig {
        delivery: if input.forward { Delivery::Forward } else { Delivery::Local },
        policy: if input.evict { MemoryPolicy::EvictOldest } else { MemoryPolicy::DropNew },
        max_queues: if input.max_queues == 0 { 16384 } else { usize::from(input.max_queues % 8) + 1 },
        verify_ipv4_checksum: input.verify_csum,
        ..ReasmConfig::default()
    };
    for (l, f) in [(&mut cfg.v4, Family::V4), (&mut cfg.v6, Family::V6)] {
        *l = FamilyLimits::linux(f);
        if let Some(m) = input.tiny_mem {
            l.high_thresh = usize::from(m) * 8;
            l.low_thresh = l.high_thresh / 2;
        }
        if let Some(t) = input.timeout_ms {
            l.timeout_ns = u64::from(t) * 1_000_000 + 1;
        }
    }
    let clock = ManualClock::new(1000 * S);
    let mut r = Reassembler::with_clock(cfg, clock.clone());
    let ds: &[Vec<u8>] = &DATAGRAMS;
    let mut flows = Flows::new();
    let mut clean = true;
    let (mut completed, mut expired) = (0u64, 0usize);
    let mut icmp = Vec::new();
    let mut out = Vec::new();
    for e in input.events.iter().take(400) {
        let (frame, scope, origin) = match e {
            &Event::Clean { d, off, len, port } => {
                let i = usize::from(d % 4);
                let data = SIZES[i] + if i == 2 { 32 } else { 8 };
                let off = usize::from(off) % data & !7;
                let len = (usize::from(len) % (data - off)) + 1;
                let more = off + len < data;
                let Ok(f) = build_fragment(&ds[i], off, len, more, 0x6600 + i as u32) else { continue };
                (f, Scope { port: u32::from(port % 2), ..Scope::default() }, Some(i))
            }
            Event::Dirty { d, off, len, more, edits, repair, vlan } => {
                clean = false;
                let i = usize::from(d % 4);
                let Ok(mut f) = build_fragment(&ds[i], usize::from(*off), usize::from(*len), *more, 0x6600 + i as u32)
                else {
                    continue;
                };
                for &(at, x) in edits.iter().take(4) {
                    let n = f.len();
                    f[usize::from(at) % n] ^= x;
                }
                if *repair {
                    refresh(&mut f);
                }
                let mut scope = Scope::default();
                if *vlan {
                    let mut v = VlanStack::new();
                    let _ = v.push(VlanTag::from_tci(EtherType(0x8100), 7));
                    scope.vlans = v;
                }
                (f, scope, None)
            }
            Event::Raw(recipe) => {
                clean = false;
                (flows.build(recipe), Scope::default(), None)
            }
            &Event::Advance(ms) => {
                clock.advance(u64::from(ms) * 1_000_000);
                continue;
            }
            Event::Expire => {
                expired += r.expire(&mut icmp);
                continue;
            }
        };
        let _ = origin;
        match r.push(Packet::from_frame(&frame), scope) {
            Ok(Verdict::Complete(d)) => {
                completed += 1;
                flatten(&d.packet, &mut out);
                if !input.forward {
                    let h = FrameHeaders::parse(&out).expect("a reassembled datagram parses");
                    assert!(!h.is_fragment, "a reassembled datagram is still a fragment");
                    assert!(matches!(h.l3, L3Kind::Ipv4 | L3Kind::Ipv6));
                    if clean {
                        assert!(ds.contains(&out), "clean fragments reassembled into something else");
                        assert!(
                            is_valid(&out, &d.packet.meta),
                            "{:?}",
                            superpacket_fuzz::problems(&out, &d.packet.meta)
                        );
                    }
                }
            }
            Ok(Verdict::Pass(_) | Verdict::NotFragment | Verdict::Queued) | Err(_) => {}
        }
    }
    let c = r.counters_total();
    assert_eq!(c.reassembled, completed, "{c:?}");
    // Memory returns to zero once every queue timed out.
    clock.advance(61 * S + 2 * 65_536_000_000);
    expired += r.expire(&mut icmp);
    let c = r.counters_total();
    assert!(c.timeouts >= expired as u64, "{c:?} but {expired} expired");
    for f in [Family::V4, Family::V6] {
        assert_eq!((r.memory(f), r.queue_count(f)), (0, 0), "{f:?} not idle after expiry: {c:?}");
    }
    assert_eq!(r.held_fragments(), 0);
    assert_eq!(r.next_deadline(), None);
    r.clear();
    assert_eq!(r.memory(Family::V4) + r.memory(Family::V6), 0);
});
