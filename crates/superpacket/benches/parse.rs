//! Header parsing: `superpacket::wire::FrameHeaders::parse` against
//! etherparse's `SlicedPacket` and `LaxSlicedPacket` on three frame shapes.
//!
//! Run: `cargo bench --bench parse -- --quick` (or with
//! `--measurement-time 2`). The figures are quoted in `src/wire/mod.rs`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use etherparse::{LaxSlicedPacket, SlicedPacket};
use superpacket::csum;
use superpacket::wire::*;

fn tag(tpid: EtherType, vid: u16) -> VlanTag {
    VlanTag { tpid, pcp: 0, dei: false, vid }
}

fn ethernet(vlans: &[VlanTag], ethertype: EtherType, l3: &[u8]) -> Vec<u8> {
    let r = EthernetRepr {
        dst_addr: MacAddr([2, 0, 0, 0, 0, 2]),
        src_addr: MacAddr([2, 0, 0, 0, 0, 1]),
        vlans: VlanStack::from_tags(vlans).unwrap(),
        ethertype,
    };
    let mut f = vec![0u8; r.buffer_len(l3.len())];
    r.emit(&mut EthernetFrame::new_unchecked(&mut f[..])).unwrap();
    let hl = r.header_len();
    f[hl..].copy_from_slice(l3);
    f
}

fn tcp_segment(pseudo: impl Fn(usize) -> u16, payload: usize) -> Vec<u8> {
    let r = TcpRepr {
        src_port: 40000,
        dst_port: 443,
        seq_number: 1,
        ack_number: 2,
        flags: TcpFlags::ACK | TcpFlags::PSH,
        window: 512,
        urgent_ptr: 0,
        options: TcpOptionsRepr { timestamp: Some((1, 2)), ..Default::default() },
    };
    let mut seg = vec![0u8; r.buffer_len(payload)];
    let mut t = TcpPacket::new_unchecked(&mut seg[..]);
    r.emit(&mut t).unwrap();
    let len = seg.len();
    TcpPacket::new_unchecked(&mut seg[..]).fill_checksum(pseudo(len));
    seg
}

/// An option-less IPv4 packet (TTL 64, ID 1, not a fragment) from `s` to `d`
/// carrying the L4 bytes `seg`.
fn ipv4_packet(s: [u8; 4], d: [u8; 4], protocol: IpProtocol, dont_frag: bool, seg: &[u8]) -> Vec<u8> {
    let ip = Ipv4Repr {
        src_addr: s.into(),
        dst_addr: d.into(),
        protocol,
        payload_len: seg.len(),
        ttl: 64,
        tos: 0,
        ident: 1,
        dont_frag,
        more_frags: false,
        frag_offset: 0,
        options: Ipv4Options::NONE,
    };
    let mut l3 = vec![0u8; ip.buffer_len()];
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut l3[..])).unwrap();
    l3[20..].copy_from_slice(seg);
    l3
}

/// TCP/IPv4, 1448-byte payload with timestamps (a typical bulk segment).
fn tcp_ipv4() -> Vec<u8> {
    let (s, d) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let seg = tcp_segment(|l| csum::pseudo_header_v4(s, d, 6, l as u16), 1448);
    let l3 = ipv4_packet(s, d, IpProtocol::TCP, true, &seg);
    ethernet(&[], EtherType::IPV4, &l3)
}

/// TCP/IPv6 behind hop-by-hop, destination-options and routing headers.
fn tcp_ipv6_ext() -> Vec<u8> {
    let s: [u8; 16] = "2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let d: [u8; 16] = "2001:db8::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let seg = tcp_segment(|l| csum::pseudo_header_v6(s, d, 6, l as u32), 1200);
    let mut ext = [0u8; 40];
    let mut n =
        Ipv6OptionsRepr { next_header: IpProtocol::IPV6_DEST_OPTS, options: &[5, 2, 0, 0] }.emit(&mut ext).unwrap();
    n += Ipv6OptionsRepr { next_header: IpProtocol::IPV6_ROUTING, options: &[1, 4, 0, 0, 0, 0] }
        .emit(&mut ext[n..])
        .unwrap();
    n += Ipv6RoutingRepr { next_header: IpProtocol::TCP, routing_type: 4, segments_left: 0, data: &[0; 20] }
        .emit(&mut ext[n..])
        .unwrap();
    let ip = Ipv6Repr {
        src_addr: s.into(),
        dst_addr: d.into(),
        next_header: IpProtocol::HOP_BY_HOP,
        payload_len: n + seg.len(),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 7,
    };
    let mut l3 = vec![0u8; ip.buffer_len()];
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut l3[..])).unwrap();
    l3[40..40 + n].copy_from_slice(&ext[..n]);
    l3[40 + n..].copy_from_slice(&seg);
    ethernet(&[], EtherType::IPV6, &l3)
}

/// UDP/IPv4 in QinQ (802.1ad S-tag + 802.1Q C-tag), 512-byte payload.
fn qinq_udp() -> Vec<u8> {
    let (s, d) = ([10, 1, 0, 1], [10, 1, 0, 2]);
    let mut seg = vec![0u8; 8 + 512];
    let mut u = UdpPacket::new_unchecked(&mut seg[..]);
    UdpRepr { src_port: 5000, dst_port: 4789, payload_len: 512 }.emit(&mut u).unwrap();
    u.fill_checksum(csum::pseudo_header_v4(s, d, 17, 520));
    let l3 = ipv4_packet(s, d, IpProtocol::UDP, false, &seg);
    ethernet(&[tag(EtherType::QINQ, 100), tag(EtherType::VLAN, 200)], EtherType::IPV4, &l3)
}

fn bench(c: &mut Criterion) {
    let frames = [("tcp_ipv4", tcp_ipv4()), ("tcp_ipv6_ext", tcp_ipv6_ext()), ("qinq_udp", qinq_udp())];
    for (name, f) in &frames {
        // Sanity: all three parsers accept the frame and agree on the payload length.
        let h = FrameHeaders::parse(f).unwrap();
        let s = SlicedPacket::from_ethernet(f).unwrap();
        let ep_payload = match s.transport.as_ref().unwrap() {
            etherparse::TransportSlice::Tcp(t) => t.payload().len(),
            etherparse::TransportSlice::Udp(u) => u.payload().len(),
            _ => unreachable!(),
        };
        assert_eq!(h.payload_len, ep_payload, "{name}");
        assert!(LaxSlicedPacket::from_ethernet(f).unwrap().stop_err.is_none());

        let mut g = c.benchmark_group(*name);
        g.bench_function("superpacket_FrameHeaders", |b| b.iter(|| FrameHeaders::parse(black_box(f)).unwrap()));
        g.bench_function("etherparse_SlicedPacket", |b| b.iter(|| SlicedPacket::from_ethernet(black_box(f)).unwrap()));
        g.bench_function("etherparse_LaxSlicedPacket", |b| {
            b.iter(|| LaxSlicedPacket::from_ethernet(black_box(f)).unwrap())
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2)).sample_size(30);
    targets = bench
}
criterion_main!(benches);
