//! Every wire parser on arbitrary bytes. The first byte picks the layer (0-4:
//! Ethernet/VLAN/ARP views, IP views, L4 views, `FrameHeaders`, everything;
//! with bit 7 set, the rest of the input is first repaired into a frame of a
//! synthetic flow with those bytes as edits, so the deeper views see
//! plausible headers). Invariants: no panic; after `new_checked` every
//! accessor is in bounds; `FrameHeaders` offsets are ordered, add up to the
//! frame length and agree with the views; the IPv4 view's header + payload +
//! padding is the whole buffer; reprs parsed from a valid view re-parse.
#![no_main]

use libfuzzer_sys::fuzz_target;
use superpacket::wire::exercise::*;
use superpacket::wire::*;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let owned;
    let b: &[u8] = if sel & 0x80 != 0 {
        // A structured frame: one of the synthetic flows, damaged by the input.
        let mut flows = superpacket_fuzz::Flows::new();
        let edits = rest.chunks_exact(3).map(|c| (u16::from_be_bytes([c[0], c[1]]), c[2])).collect();
        let recipe = superpacket_fuzz::FrameRecipe::Flow {
            flow: sel,
            len: rest.len() as u16 * 7,
            flags: rest.first().copied().unwrap_or(0),
            skew: 0,
            edits,
            repair: sel & 0x40 != 0,
            pad: (sel >> 3) & 7,
        };
        owned = flows.build(&recipe);
        &owned
    } else {
        rest
    };
    match sel & 0x07 {
        0 => exercise_l2(b),
        1 => exercise_ip(b),
        2 => exercise_l4(b),
        3 => exercise_headers(b),
        _ => {
            exercise_l2(b);
            exercise_ip(b);
            exercise_l4(b);
            exercise_headers(b);
        }
    }
    // Views and FrameHeaders agree on what they both describe.
    if let Ok(h) = FrameHeaders::parse(b) {
        if h.l3 == L3Kind::Ipv4 {
            let p =
                Ipv4Packet::new_checked(&b[h.l3_offset..h.l3_end()]).expect("FrameHeaders accepted the IPv4 header");
            assert_eq!(p.header().len(), h.l3_header_len);
        }
        if h.l4 == L4Kind::Tcp {
            let t = TcpPacket::new_checked(h.l4_bytes(b)).expect("FrameHeaders accepted the TCP header");
            assert_eq!(t.header_len(), h.l4_header_len);
        }
        if h.l4 == L4Kind::Udp && !h.is_fragment {
            // (A first fragment's UDP length covers the whole datagram.)
            UdpPacket::new_checked(h.l4_bytes(b)).expect("FrameHeaders accepted the UDP header");
        }
        // The validator never panics on anything that parses (or not).
        let _ = superpacket_fuzz::problems(b, &Default::default());
    }
});
