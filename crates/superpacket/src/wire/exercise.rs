//! Exercisers: wrap bytes in every view of this module and call every
//! accessor, checking the documented invariants of [`FrameHeaders`]. Shared
//! by the property tests (`proptests.rs`) and the `wire` fuzz target
//! (`fuzz/fuzz_targets/wire.rs`); a panic here is a parser bug. Not part of
//! the public API.

use super::*;
use std::net::Ipv6Addr;

pub fn exercise_l2(b: &[u8]) {
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

pub fn exercise_ip(b: &[u8]) {
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

pub fn exercise_l4(b: &[u8]) {
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
pub fn check_headers(h: &FrameHeaders, b: &[u8]) {
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

pub fn exercise_headers(b: &[u8]) {
    if let Ok(h) = FrameHeaders::parse(b) {
        check_headers(&h, b);
    }
    if let Ok(h) = FrameHeaders::parse_ip(b) {
        check_headers(&h, b);
    }
}

pub fn exercise_all(b: &[u8]) {
    exercise_l2(b);
    exercise_ip(b);
    exercise_l4(b);
    exercise_headers(b);
}
