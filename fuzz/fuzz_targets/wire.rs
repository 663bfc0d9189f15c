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
use std::net::Ipv6Addr;
use superpacket::wire::*;

fn exercise_l2(b: &[u8]) {
    if let Ok(f) = EthernetFrame::new_checked(b) {
        let _ = (f.dst_addr().to_string(), f.src_addr(), f.ethertype().to_string(), f.payload().len());
        let _ = f.vlan_stack();
        let _ = EthernetRepr::parse(&f);
    }
    let _ = VlanStack::parse(b);
    if let Ok(v) = VlanTagView::new_checked(b) {
        let _ = (v.tpid(), v.tci(), v.pcp(), v.dei(), v.vid(), VlanTag::parse(&v));
    }
    if let Ok(a) = ArpPacket::new_checked(b) {
        let _ = (a.hardware_type(), a.protocol_type(), a.operation(), a.packet_len());
        let _ =
            (a.source_hardware_addr(), a.source_protocol_addr(), a.target_hardware_addr(), a.target_protocol_addr());
        let _ = ArpRepr::parse(&a);
    }
}

fn exercise_ip(b: &[u8]) {
    if let Ok(p) = Ipv4Packet::new_checked(b) {
        let _ = (p.version(), p.ihl(), p.tos(), p.dscp(), p.ecn(), p.total_len(), p.ident(), p.reserved_flag());
        let _ = (p.dont_frag(), p.more_frags(), p.frag_offset(), p.is_fragment(), p.fragment_info(), p.ttl());
        let _ = (p.protocol().to_string(), p.checksum(), p.src_addr(), p.dst_addr(), p.header(), p.options());
        let _ = (p.payload(), p.padding(), p.verify_checksum(), p.pseudo_header_sum());
        assert_eq!(p.header().len() + p.payload().len() + p.padding().len(), b.len());
        let _ = Ipv4Repr::parse(&p);
    }
    if let Ok(p) = Ipv6Packet::new_checked(b) {
        let _ = (p.version(), p.traffic_class(), p.dscp(), p.ecn(), p.flow_label(), p.payload_len(), p.total_len());
        let _ = (p.next_header(), p.hop_limit(), p.src_addr(), p.dst_addr(), p.header(), p.payload(), p.padding());
        let _ = p.pseudo_header_sum(IpProtocol::TCP, 20);
        if let Ok(w) = p.walk_ext_headers() {
            assert!(w.upper_offset <= p.total_len());
            let _ = (w.ext_len(), w.is_fragment());
        }
        let _ = Ipv6Repr::parse(&p);
    }
    if let Ok(h) = Ipv6OptionsHeader::new_checked(b) {
        let _ = (h.next_header(), h.header_len(), h.options());
        let _ = h.iter_options().count();
        let _ = Ipv6OptionsRepr::parse(&h);
    }
    if let Ok(h) = Ipv6RoutingHeader::new_checked(b) {
        let _ = (h.next_header(), h.header_len(), h.routing_type(), h.segments_left(), h.data());
        let _ = Ipv6RoutingRepr::parse(&h);
    }
    if let Ok(h) = Ipv6FragmentHeader::new_checked(b) {
        let _ = (h.next_header(), h.frag_offset(), h.more_frags(), h.ident(), h.fragment_info());
        let _ = Ipv6FragmentRepr::parse(&h);
    }
}

fn exercise_l4(b: &[u8]) {
    if let Ok(t) = TcpPacket::new_checked(b) {
        let _ = (t.src_port(), t.dst_port(), t.seq_number(), t.ack_number(), t.data_offset(), t.header_len());
        let _ = (t.flags().to_string(), t.word3(), t.syn(), t.ack(), t.fin(), t.rst(), t.psh(), t.window());
        let _ = (t.checksum(), t.urgent_ptr(), t.options(), t.payload(), t.verify_checksum(0x1234));
        let _ = t.iter_options().count();
        let _ = TcpRepr::parse(&t);
    }
    let _ = TcpOptionsRepr::parse(b);
    if let Ok(u) = UdpPacket::new_checked(b) {
        let _ = (u.src_port(), u.dst_port(), u.len(), u.checksum(), u.payload());
        let _ = (u.verify_checksum(7, IpVersion::V4), u.verify_checksum(7, IpVersion::V6), UdpRepr::parse(&u));
    }
    if let Ok(i) = Icmpv4Packet::new_checked(b) {
        let _ = (i.msg_type(), i.code(), i.checksum(), i.rest_of_header(), i.echo_ident(), i.echo_seq_no());
        let _ = (i.next_hop_mtu(), i.pointer(), i.data(), i.verify_checksum());
        let _ = Icmpv4Repr::parse(&i).map(|r| (r.is_error(), r.buffer_len(), r.echo_reply_to()));
    }
    let _ = icmpv4_quote(b, Icmpv4QuoteLen::Rfc792);
    let _ = icmpv4_quote(b, Icmpv4QuoteLen::Rfc1812);
    let _ = icmpv6_quote(b);
    if let Ok(i) = Icmpv6Packet::new_checked(b) {
        let _ = (i.msg_type(), i.code(), i.checksum(), i.word1(), i.mtu(), i.pointer(), i.echo_ident());
        let _ = (i.echo_seq_no(), i.nd_flags(), i.nd_target_addr(), i.data());
        let _ = i.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::UNSPECIFIED);
        for o in i.nd_options().flatten() {
            let _ = o.mac_addr();
        }
        let _ = Icmpv6Repr::parse(&i).map(|r| (r.is_error(), r.buffer_len(), r.msg_type()));
    }
}

/// Checks the documented invariants of a successful `FrameHeaders` parse.
fn check_headers(h: &FrameHeaders, b: &[u8]) {
    assert!(h.l3_offset <= h.l4_offset && h.l4_offset <= h.payload_offset, "{h:?}");
    assert!(h.payload_offset + h.payload_len <= h.l3_end(), "{h:?}");
    assert_eq!(h.l3_end() + h.l2_padding, b.len(), "{h:?}");
    assert_eq!(h.l4_offset, h.l3_offset + h.l3_header_len, "{h:?}");
    assert_eq!(h.payload_offset, h.l4_offset + h.l4_header_len, "{h:?}");
    assert_eq!(h.payload_bytes(b).len(), h.payload_len);
    assert_eq!(h.l3_bytes(b).len(), h.l3_len);
    let _ = h.l4_bytes(b);
    assert_eq!(h.is_ip(), h.ip_protocol.is_some());
}

fn exercise_headers(b: &[u8]) {
    if let Ok(h) = FrameHeaders::parse(b) {
        check_headers(&h, b);
    }
    if let Ok(h) = FrameHeaders::parse_ip(b) {
        check_headers(&h, b);
    }
}

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
