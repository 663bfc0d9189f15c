//! IP input validation (issue 22, [`super::ingress`]): one case per rule,
//! named after the Linux check it mirrors, first on the pure validation
//! functions, then through a graph with a router and a masquerade NAT rule:
//! a refused packet leaves no port, creates no connection and is counted
//! with its reason. Well-formed packets of both families still forward, and
//! Ethernet padding is trimmed on the way.

use super::ingress::{self, IngressDrop, MAX_EXT_HEADERS};
use super::nat::{NAT_INVALID_L4, NatRule};
use super::port::MemoryDriver;
use super::router::{LINK_LAYER_MULTICAST, Route};
use super::*;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use superpacket::packet::{ChecksumState, Packet};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::{IpProtocol, Ipv4Packet, Ipv6Packet, Ipv6Repr, MacAddr, TcpFlags, TcpPacket, UdpPacket};

const L3: usize = 14;
const HOST_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 2);
const FAR_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const GW_MAC: MacAddr = MacAddr([0x02, 0xaa, 0, 0, 0, 0xfe]);

fn host_v6() -> Ipv6Addr {
    "fd01::2".parse().unwrap()
}

fn far_v6() -> Ipv6Addr {
    "2001:db8:99::7".parse().unwrap()
}

// ------------------------------------------------------------ frame builders

/// A UDP (or TCP) frame over IPv4 from `src` to `dst`, to `dst_mac`, with
/// valid checksums.
fn v4_frame(dst_mac: MacAddr, src: Ipv4Addr, dst: Ipv4Addr, transport: Transport, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(transport, false, 0);
    spec.addrs = Addrs::V4 { src, dst };
    spec.dst_mac = dst_mac;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

/// A valid IPv4 UDP frame with `change` applied to its IPv4 header, whose
/// checksum is then filled in again (so that only the changed field is
/// wrong).
fn v4_with(dst_mac: MacAddr, change: impl Fn(&mut Ipv4Packet<&mut [u8]>)) -> Vec<u8> {
    let mut f = v4_frame(dst_mac, HOST_V4, FAR_V4, Transport::Udp, 32);
    let mut ip = Ipv4Packet::new_unchecked(&mut f[L3..]);
    change(&mut ip);
    ip.fill_checksum();
    f
}

/// A valid IPv4 TCP (4 bytes of payload) or UDP (32 bytes) frame with
/// `change` applied to its L4 header (the L4 checksum is not fixed: NAT does
/// not verify it).
fn v4_l4_with(dst_mac: MacAddr, transport: Transport, change: impl Fn(&mut [u8])) -> Vec<u8> {
    let payload = if transport == Transport::Tcp { 4 } else { 32 };
    let mut f = v4_frame(dst_mac, HOST_V4, FAR_V4, transport, payload);
    change(&mut f[L3 + 20..]);
    f
}

/// An IPv6 frame: fixed header (next header `next`, payload length
/// `payload_len` or the body's length), then `body` (extension headers and
/// upper layer, as given).
fn v6_raw(dst_mac: MacAddr, src: Ipv6Addr, dst: Ipv6Addr, next: u8, body: &[u8], payload_len: Option<u16>) -> Vec<u8> {
    let mut f = Vec::with_capacity(54 + body.len());
    f.extend_from_slice(&dst_mac.0);
    f.extend_from_slice(&[0x02, 0xaa, 0, 0, 0, 2, 0x86, 0xdd]);
    let mut ip = [0u8; 40];
    let repr = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol(next),
        payload_len: body.len().min(65535),
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    };
    let mut v = Ipv6Packet::new_unchecked(&mut ip[..]);
    repr.emit(&mut v).unwrap();
    if let Some(pl) = payload_len {
        v.set_payload_len(pl);
    }
    f.extend_from_slice(&ip);
    f.extend_from_slice(body);
    f
}

/// An 8-byte UDP header (no checksum) and `n` bytes of payload.
fn udp_body(n: usize) -> Vec<u8> {
    let mut b = vec![0u8; 8 + n];
    let mut u = UdpPacket::new_unchecked(&mut b[..]);
    u.set_src_port(5000);
    u.set_dst_port(53);
    u.set_len((8 + n) as u16);
    b
}

/// `n` destination-options headers (8 bytes of PadN each), the last one
/// followed by `upper`, then the upper-layer bytes.
fn dstopts(n: usize, upper: u8, rest: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    for i in 0..n {
        let nh = if i + 1 == n { upper } else { 60 };
        b.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]);
    }
    b.extend_from_slice(rest);
    b
}

/// A UDP frame over IPv6 with valid checksums.
fn v6_frame(dst_mac: MacAddr, src: Ipv6Addr, dst: Ipv6Addr, payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Udp, true, 0);
    spec.addrs = Addrs::V6 { src, dst };
    spec.dst_mac = dst_mac;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

/// `f` with Ethernet padding (zeros) up to `to` bytes.
fn padded(mut f: Vec<u8>, to: usize) -> Vec<u8> {
    f.resize(to.max(f.len()), 0);
    f
}

// ------------------------------------------------------------ the cases

/// One rule: a frame (to `dst_mac`) and the drop reason it must get (`None`:
/// accepted by the validation).
struct Case {
    name: &'static str,
    frame: Vec<u8>,
    want: Option<&'static str>,
}

fn case(name: &'static str, frame: Vec<u8>, want: Option<IngressDrop>) -> Case {
    Case { name, frame, want: want.map(|d| d.reason()) }
}

fn v4_cases(mac: MacAddr) -> Vec<Case> {
    use IngressDrop::*;
    let src = |a: Ipv4Addr| v4_with(mac, move |ip| ip.set_src_addr(a));
    let dst = |a: Ipv4Addr| v4_with(mac, move |ip| ip.set_dst_addr(a));
    let mut short = v4_frame(mac, HOST_V4, FAR_V4, Transport::Udp, 32);
    short.truncate(L3 + 19);
    let mut version = v4_frame(mac, HOST_V4, FAR_V4, Transport::Udp, 32);
    version[L3] = 0x65; // version 6, IHL 5 in an 0x0800 frame
    let mut options_cut = v4_with(mac, |ip| ip.set_header_len(60));
    options_cut.truncate(L3 + 40);
    let mut bad_sum = v4_frame(mac, HOST_V4, FAR_V4, Transport::Udp, 32);
    let c = Ipv4Packet::new_unchecked(&bad_sum[L3..]).checksum();
    Ipv4Packet::new_unchecked(&mut bad_sum[L3..]).set_checksum(c ^ 0x0101);
    vec![
        case("ip_rcv_core: pskb_may_pull(skb, sizeof(struct iphdr))", short, Some(Ipv4Truncated)),
        case("ip_rcv_core: iph->version != 4", version, Some(Ipv4Version)),
        case("ip_rcv_core: iph->ihl < 5", v4_with(mac, |ip| ip.set_header_len(16)), Some(Ipv4HeaderLength)),
        case("ip_rcv_core: pskb_may_pull(skb, iph->ihl * 4)", options_cut, Some(Ipv4Truncated)),
        case("ip_rcv_core: ip_fast_csum", bad_sum, Some(Ipv4Checksum)),
        case(
            "ip_rcv_core: skb->len < len (total length beyond the frame)",
            v4_with(mac, |ip| ip.set_total_len(ip.total_len() + 1)),
            Some(Ipv4Truncated),
        ),
        case("ip_rcv_core: len < iph->ihl * 4", v4_with(mac, |ip| ip.set_total_len(19)), Some(Ipv4TotalLength)),
        case(
            "ip_rcv_core: len < iph->ihl * 4 (total length 0, no BIG TCP)",
            v4_with(mac, |ip| ip.set_total_len(0)),
            Some(Ipv4TotalLength),
        ),
        case(
            "ip_route_input_rcu: ipv4_is_multicast(daddr)",
            dst(Ipv4Addr::new(239, 1, 2, 3)),
            Some(MulticastDestination),
        ),
        case(
            "ip_route_input_slow: ipv4_is_multicast(saddr) martian",
            src(Ipv4Addr::new(224, 0, 0, 5)),
            Some(MartianSource),
        ),
        case("ip_route_input_slow: ipv4_is_lbcast(saddr) martian", src(Ipv4Addr::BROADCAST), Some(MartianSource)),
        case(
            "ip_route_input_slow: ipv4_is_lbcast(daddr) brd_input",
            dst(Ipv4Addr::BROADCAST),
            Some(BroadcastDestination),
        ),
        case(
            "ip_route_input_slow: saddr == 0 && daddr == 0 brd_input",
            v4_with(mac, |ip| {
                ip.set_src_addr(Ipv4Addr::UNSPECIFIED);
                ip.set_dst_addr(Ipv4Addr::UNSPECIFIED);
            }),
            Some(BroadcastDestination),
        ),
        case(
            "ip_route_input_slow: ipv4_is_zeronet(saddr) martian",
            src(Ipv4Addr::new(0, 1, 2, 3)),
            Some(MartianSource),
        ),
        case(
            "ip_route_input_slow: ipv4_is_zeronet(daddr) martian",
            dst(Ipv4Addr::new(0, 0, 0, 7)),
            Some(MartianDestination),
        ),
        case(
            "ip_route_input_slow: ipv4_is_loopback(daddr) martian",
            dst(Ipv4Addr::LOCALHOST),
            Some(MartianDestination),
        ),
        case("ip_route_input_slow: ipv4_is_loopback(saddr) martian", src(Ipv4Addr::LOCALHOST), Some(MartianSource)),
    ]
}

fn v4_accepted(mac: MacAddr) -> Vec<Case> {
    vec![
        case(
            "ip_route_input_slow: class E (240/4) is unicast, not martian",
            v4_with(mac, |ip| ip.set_src_addr(Ipv4Addr::new(240, 0, 0, 1))),
            None,
        ),
        case(
            "ip_rcv_core: pskb_trim_rcsum (padding beyond the total length)",
            padded(v4_frame(mac, HOST_V4, FAR_V4, Transport::Udp, 4), 60),
            None,
        ),
    ]
}

fn v6_cases(mac: MacAddr) -> Vec<Case> {
    use IngressDrop::*;
    let (h, f) = (host_v6(), far_v6());
    let udp = udp_body(16);
    let plain = |src: Ipv6Addr, dst: Ipv6Addr| v6_raw(mac, src, dst, 17, &udp, None);
    let mut short = v6_frame(mac, h, f, 16);
    short.truncate(L3 + 39);
    let mut version = v6_frame(mac, h, f, 16);
    version[L3] = 0x45;
    // Payload length 0 with a hop-by-hop header that has no jumbo option.
    let no_jumbo = v6_raw(mac, h, f, 0, &[17, 0, 1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8], Some(0));
    // A well-formed jumbogram (RFC 2675): 70000 bytes after the fixed header.
    let jumbo_len: u32 = 70_000;
    let mut body = vec![17, 0, 0xc2, 4];
    body.extend_from_slice(&jumbo_len.to_be_bytes());
    body.extend_from_slice(&udp_body(jumbo_len as usize - 16));
    let jumbogram = v6_raw(mac, h, f, 0, &body, Some(0));
    // A jumbo option whose length fits in 16 bits.
    let mut small = vec![17, 0, 0xc2, 4];
    small.extend_from_slice(&1000u32.to_be_bytes());
    small.extend_from_slice(&udp_body(1000 - 16));
    let small_jumbo = v6_raw(mac, h, f, 0, &small, Some(0));
    // A routing header whose length runs past the payload.
    let cut_ext = v6_raw(mac, h, f, 43, &[17, 4, 0, 0, 0, 0, 0, 0], None);
    let too_many = v6_raw(mac, h, f, 60, &dstopts(MAX_EXT_HEADERS + 1, 17, &udp), None);
    vec![
        case("ipv6_rcv: pskb_may_pull(skb, sizeof(*hdr))", short, Some(Ipv6Truncated)),
        case("ipv6_rcv: hdr->version != 6", version, Some(Ipv6Version)),
        case("ipv6_rcv: ipv6_addr_loopback(&hdr->saddr)", plain(Ipv6Addr::LOCALHOST, f), Some(MartianSource)),
        case("ipv6_rcv: ipv6_addr_loopback(&hdr->daddr)", plain(h, Ipv6Addr::LOCALHOST), Some(MartianDestination)),
        case(
            "ipv6_rcv: IPV6_ADDR_MC_SCOPE(&hdr->daddr) == 1 (RFC 4291 errata 3480)",
            plain(h, "ff01::1".parse().unwrap()),
            Some(MartianDestination),
        ),
        case(
            "ipv6_rcv: IPV6_ADDR_MC_SCOPE(&hdr->daddr) == 0 (RFC 4291 2.7)",
            plain(h, "ff00::1".parse().unwrap()),
            Some(MartianDestination),
        ),
        case(
            "ipv6_rcv: ipv6_addr_is_multicast(&hdr->saddr)",
            plain("ff02::1".parse().unwrap(), f),
            Some(MartianSource),
        ),
        case(
            "ipv6_rcv: pkt_len + sizeof(struct ipv6hdr) > skb->len",
            v6_raw(mac, h, f, 17, &udp, Some(udp.len() as u16 + 1)),
            Some(Ipv6Truncated),
        ),
        case("ipv6_hop_jumbo: payload_len 0 without a jumbo option", no_jumbo, Some(Ipv6Truncated)),
        case("ipv6_hop_jumbo: pkt_len <= IPV6_MAXPLEN", small_jumbo, Some(Ipv6Truncated)),
        case("ipv6_hop_jumbo: a valid jumbogram (unsupported)", jumbogram, Some(Ipv6Jumbogram)),
        case("ipv6_parse_hopopts: extension header beyond the payload", cut_ext, Some(Ipv6ExtensionHeader)),
        case("extension-header chain longer than MAX_EXT_HEADERS", too_many, Some(Ipv6ExtensionHeader)),
        case(
            "ip6_route_input: multicast destination without multicast routing",
            plain(h, "ff0e::1".parse().unwrap()),
            Some(MulticastDestination),
        ),
    ]
}

fn v6_accepted(mac: MacAddr) -> Vec<Case> {
    let (h, f) = (host_v6(), far_v6());
    let echo = [128u8, 0, 0, 0, 0, 1, 0, 1];
    vec![
        case(
            "ip6_mc_input: ICMPv6 to a multicast group is the router's own",
            v6_raw(mac, h, "ff02::1".parse().unwrap(), 58, &echo, None),
            None,
        ),
        case(
            "extension-header chain of MAX_EXT_HEADERS",
            v6_raw(mac, h, f, 60, &dstopts(MAX_EXT_HEADERS, 17, &udp_body(8)), None),
            None,
        ),
        case("ipv6_rcv: pskb_trim_rcsum (padding)", padded(v6_frame(mac, h, f, 0), 64), None),
    ]
}

#[test]
fn every_ipv4_rule_on_the_validation_function() {
    let mac = MacAddr([0x02, 0, 0, 0, 0, 1]);
    for c in v4_cases(mac).into_iter().chain(v4_accepted(mac)) {
        let got = ingress::ipv4_input(&c.frame, L3, c.frame.len()).map(|_| ()).map_err(|e| e.reason());
        assert_eq!(got.err(), c.want, "{}", c.name);
    }
    // What a valid header reports.
    let f = padded(v4_frame(mac, HOST_V4, FAR_V4, Transport::Udp, 4), 60);
    let ip = ingress::ipv4_input(&f, L3, f.len()).unwrap();
    assert_eq!((ip.header_len, ip.total_len, ip.padding, ip.end()), (20, 32, 14, 46));
    assert_eq!((ip.src, ip.dst, ip.protocol, ip.is_fragment), (HOST_V4, FAR_V4, IpProtocol::UDP, false));
}

#[test]
fn every_ipv6_rule_on_the_validation_function() {
    let mac = MacAddr([0x02, 0, 0, 0, 0, 1]);
    for c in v6_cases(mac).into_iter().chain(v6_accepted(mac)) {
        let got = ingress::ipv6_input(&c.frame, L3, c.frame.len()).map(|_| ()).map_err(|e| e.reason());
        assert_eq!(got.err(), c.want, "{}", c.name);
    }
    let f = v6_raw(mac, host_v6(), far_v6(), 60, &dstopts(2, 17, &udp_body(8)), None);
    let ip = ingress::ipv6_input(&f, L3, f.len()).unwrap();
    assert_eq!((ip.upper_protocol, ip.upper_offset, ip.ext_count, ip.padding), (IpProtocol::UDP, L3 + 56, 2, 0));
}

#[test]
fn reason_names_are_stable_and_distinct() {
    let names: Vec<&str> = IngressDrop::ALL.iter().map(IngressDrop::reason).collect();
    assert_eq!(
        names,
        [
            "ipv4-version",
            "ipv4-header-length",
            "ipv4-truncated",
            "ipv4-total-length",
            "ipv4-checksum",
            "martian-source",
            "martian-destination",
            "broadcast-destination",
            "multicast-destination",
            "ipv6-version",
            "ipv6-truncated",
            "ipv6-extension-header",
            "ipv6-jumbogram",
        ]
    );
    assert_eq!(IngressDrop::Ipv4Checksum.to_string(), "ipv4-checksum");
}

#[test]
fn no_prefix_of_any_frame_panics_the_validation() {
    let mac = MacAddr([0x02, 0, 0, 0, 0, 1]);
    let frames: Vec<Vec<u8>> = v4_cases(mac).into_iter().chain(v6_cases(mac)).map(|c| c.frame).collect();
    for f in &frames {
        for n in (0..f.len().min(200)).chain([f.len()]) {
            let _ = ingress::ipv4_input(&f[..n], L3, n);
            let _ = ingress::ipv6_input(&f[..n], L3, n);
            // A claimed packet length larger than the linear area.
            let _ = ingress::ipv4_input(&f[..n], L3, n + 100);
            let _ = ingress::ipv6_input(&f[..n], L3, n + 100);
        }
    }
}

#[test]
fn trim_padding_cuts_the_frag_list_from_the_end() {
    // Head of 100 bytes, members of 50 and 10 bytes; the IP packet ends 15
    // bytes before the end: the last member goes, the one before loses 5.
    let mut p = Packet::from_frame(&[7u8; 100]);
    p.push_frag(Packet::from_frame(&[8u8; 50]));
    p.push_frag(Packet::from_frame(&[9u8; 10]));
    p.meta.csum = ChecksumState::Complete { sum: 0x1234 };
    let len = p.total_len();
    assert_eq!(ingress::trim_padding(&mut p, len, L3, len - 15), len - 15);
    assert_eq!((p.total_len(), p.frag_list().len(), p.frag_list()[0].len()), (145, 1, 45));
    assert_eq!(p.meta.csum, ChecksumState::None, "a sum over bytes no longer in the packet is dropped");
    // Linear padding keeps a COMPLETE sum, minus the padding's bytes.
    let mut p = Packet::from_frame(&[1u8; 60]);
    p.meta.csum = ChecksumState::Complete { sum: 0x5678 };
    assert_eq!(ingress::trim_padding(&mut p, 60, L3, 60), 60, "nothing to trim");
    assert_eq!(ingress::trim_padding(&mut p, 60, L3, 47), 47);
    assert_eq!(p.len(), 47);
    let pad_sum = superpacket::csum::ones_sum_at(&[1u8; 13], 47 - L3);
    assert_eq!(p.meta.csum, ChecksumState::Complete { sum: superpacket::csum::ones_sub(0x5678, pad_sum) });
}

// ------------------------------------------------------------ through the graph

/// Two in-memory ports with router addresses (IPv4 and IPv6), default
/// routes via a static gateway on `wan`, masquerade on `wan`.
struct Net {
    g: Graph,
    lan: DeviceId,
    wan: DeviceId,
}

impl Net {
    fn new() -> Net {
        let mut g = Graph::new(StackMode::Passthrough);
        let lan = g.add_port("lan", Box::new(MemoryDriver::full())).unwrap();
        let wan = g.add_port("wan", Box::new(MemoryDriver::full())).unwrap();
        g.add_address(lan, IpAddr::V4(Ipv4Addr::new(192, 168, 1, 1)), 24);
        g.add_address(lan, IpAddr::V6("fd01::1".parse().unwrap()), 64);
        g.add_address(wan, IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1)), 24);
        g.add_address(wan, IpAddr::V6("fd02::1".parse().unwrap()), 64);
        let r = g.router_mut();
        let gw4 = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 254));
        let gw6 = IpAddr::V6("fd02::fe".parse().unwrap());
        r.add_route(Route { prefix: IpAddr::V4(Ipv4Addr::UNSPECIFIED), len: 0, via: Some(gw4), dev: wan });
        r.add_route(Route { prefix: IpAddr::V6(Ipv6Addr::UNSPECIFIED), len: 0, via: Some(gw6), dev: wan });
        r.add_neighbour(gw4, GW_MAC);
        r.add_neighbour(gw6, GW_MAC);
        r.nat.rules.push(NatRule::Masquerade { out_dev: wan.0 });
        Net { g, lan, wan }
    }

    fn lan_mac(&self) -> MacAddr {
        self.g.device(self.lan).mac
    }

    /// Receives `frame` on `lan`; returns what left `wan` and `lan`.
    fn send(&mut self, frame: &[u8]) -> (Vec<Packet>, Vec<Packet>) {
        self.send_packet(Packet::from_frame(frame))
    }

    fn send_packet(&mut self, p: Packet) -> (Vec<Packet>, Vec<Packet>) {
        self.g.receive(self.lan, p);
        let mut tx = |id| self.g.driver_mut::<MemoryDriver>(id).unwrap().tx.drain(..).collect::<Vec<_>>();
        (tx(self.wan), tx(self.lan))
    }

    /// Drops of every device, summed by reason (where the router's drops
    /// are counted is not this test's concern).
    fn drops(&self) -> BTreeMap<&'static str, u64> {
        let mut all = BTreeMap::new();
        for d in self.g.devices() {
            for (r, n) in &d.counters.drops {
                *all.entry(*r).or_insert(0) += n;
            }
        }
        all
    }
}

/// Sends each case's frame through a fresh router: nothing leaves, no
/// connection, one drop of the case's reason and no other.
fn assert_refused_through_the_graph(cases: Vec<Case>) {
    for c in cases {
        let mut net = Net::new();
        let want = c.want.expect("a refused case");
        let (wan, lan) = net.send(&c.frame);
        assert!(wan.is_empty() && lan.is_empty(), "{}: {} frames left", c.name, wan.len() + lan.len());
        assert_eq!(
            (net.g.router_mut().nat.len(), net.g.router_mut().nat.counters.created),
            (0, 0),
            "{}: conntrack",
            c.name
        );
        assert_eq!(net.drops(), BTreeMap::from([(want, 1)]), "{}", c.name);
    }
}

#[test]
fn refused_ipv4_packets_leave_no_port_and_create_no_connection() {
    let mac = Net::new().lan_mac();
    let mut cases = v4_cases(mac);
    cases.push(Case {
        name: "ip_route_input_slow: RTN_BROADCAST (directed broadcast of a router subnet)",
        frame: v4_with(mac, |ip| ip.set_dst_addr(Ipv4Addr::new(203, 0, 113, 255))),
        want: Some(IngressDrop::BroadcastDestination.reason()),
    });
    cases.push(Case {
        name: "ip_forward: skb->pkt_type != PACKET_HOST",
        frame: v4_frame(MacAddr::BROADCAST, HOST_V4, FAR_V4, Transport::Udp, 32),
        want: Some(LINK_LAYER_MULTICAST),
    });
    assert_refused_through_the_graph(cases);
}

#[test]
fn refused_ipv6_packets_leave_no_port() {
    let mac = Net::new().lan_mac();
    let mut cases = v6_cases(mac);
    cases.push(Case {
        name: "ip6_forward: skb->pkt_type != PACKET_HOST",
        frame: v6_frame(MacAddr::BROADCAST, host_v6(), far_v6(), 16),
        want: Some(LINK_LAYER_MULTICAST),
    });
    assert_refused_through_the_graph(cases);
}

#[test]
fn nat_never_rewrites_an_invalid_l4_header() {
    let mac = Net::new().lan_mac();
    let with_udp_len = |n: u16| v4_l4_with(mac, Transport::Udp, move |l4| UdpPacket::new_unchecked(l4).set_len(n));
    let with_doff =
        |n: usize| v4_l4_with(mac, Transport::Tcp, move |l4| TcpPacket::new_unchecked(l4).set_header_len(n));
    let cases = vec![
        ("tcp_error: th->doff * 4 < sizeof(struct tcphdr)", with_doff(16)),
        ("tcp_error: tcplen < th->doff * 4", with_doff(60)),
        ("udp_error: ulen > udplen (UDP length beyond the IP payload)", with_udp_len(41)),
        ("udp_error: ulen < sizeof(*hdr)", with_udp_len(7)),
    ];
    let cases = cases.into_iter().map(|(name, frame)| Case { name, frame, want: Some(NAT_INVALID_L4) }).collect();
    assert_refused_through_the_graph(cases);

    // Without NAT rules such a packet is routed untouched, as Linux does
    // without conntrack rules.
    let mut net = Net::new();
    net.g.router_mut().nat.rules.clear();
    let f = with_doff(16);
    let (wan, _) = net.send(&f);
    assert_eq!(wan.len(), 1);
    assert_eq!(&wan[0].linear()[L3 + 12..L3 + 16], &HOST_V4.octets(), "not translated");
}

#[test]
fn well_formed_packets_still_forward_and_padding_is_trimmed() {
    let mut net = Net::new();
    let mac = net.lan_mac();
    let wan_mac = net.g.device(net.wan).mac;
    let mut problems = Vec::new();
    let mut check = |p: &Packet, what: &str| {
        problems.clear();
        validate_frame(&p.to_vec(), Medium::Ethernet, &p.meta, false, &mut problems);
        assert!(problems.is_empty(), "{what}: {problems:?}");
        assert_eq!((&p.linear()[0..6], &p.linear()[6..12]), (&GW_MAC.0[..], &wan_mac.0[..]), "{what}");
    };

    // IPv4 UDP and TCP: masqueraded, TTL - 1, one connection each.
    for (i, t) in [Transport::Udp, Transport::Tcp].into_iter().enumerate() {
        let (wan, lan) = net.send(&v4_frame(mac, HOST_V4, FAR_V4, t, 100));
        assert_eq!((wan.len(), lan.len()), (1, 0), "{t:?}");
        let ip = Ipv4Packet::new_checked(&wan[0].linear()[L3..]).unwrap();
        assert_eq!((ip.src_addr(), ip.ttl()), (Ipv4Addr::new(203, 0, 113, 1), 63), "{t:?}");
        check(&wan[0], "ipv4");
        assert_eq!(net.g.router_mut().nat.len(), i + 1);
    }
    // A padded IPv4 frame (4 bytes of UDP payload, padded to 60): trimmed.
    let f = padded(v4_frame(mac, HOST_V4, Ipv4Addr::new(198, 51, 100, 8), Transport::Udp, 4), 60);
    let (wan, _) = net.send(&f);
    assert_eq!(wan.len(), 1);
    assert_eq!(wan[0].total_len(), L3 + 32, "padding trimmed");
    check(&wan[0], "padded ipv4");

    // IPv6: hop limit - 1; padded: trimmed.
    let (wan, _) = net.send(&v6_frame(mac, host_v6(), far_v6(), 100));
    assert_eq!(wan.len(), 1);
    assert_eq!(Ipv6Packet::new_checked(&wan[0].linear()[L3..]).unwrap().hop_limit(), 63);
    check(&wan[0], "ipv6");
    let (wan, _) = net.send(&padded(v6_frame(mac, host_v6(), far_v6(), 0), 64));
    assert_eq!(wan.len(), 1);
    assert_eq!(wan[0].total_len(), L3 + 48, "padding trimmed");
    check(&wan[0], "padded ipv6");
    // Extension headers are fine up to the bound.
    let (wan, _) = net.send(&v6_raw(mac, host_v6(), far_v6(), 60, &dstopts(2, 59, &[]), None));
    assert_eq!(wan.len(), 1, "two destination-options headers");

    // Superpackets: the IP length covers the aggregate; forwarded whole.
    let mut spec = FlowSpec::new(Transport::Tcp, false, 1);
    spec.addrs = Addrs::V4 { src: HOST_V4, dst: FAR_V4 };
    spec.dst_mac = mac;
    let sp = Flow::new(spec).superpacket(14480, 1448, TcpFlags::empty()).unwrap();
    let n = sp.total_len();
    let (wan, _) = net.send_packet(sp);
    assert_eq!(wan.len(), 1);
    assert!(wan[0].meta.is_gso());
    assert_eq!(wan[0].total_len(), n);
    let mut spec6 = FlowSpec::new(Transport::Tcp, true, 1);
    spec6.addrs = Addrs::V6 { src: host_v6(), dst: far_v6() };
    spec6.dst_mac = mac;
    let sp = Flow::new(spec6).superpacket(14000, 1400, TcpFlags::empty()).unwrap();
    let (wan, _) = net.send_packet(sp);
    assert_eq!(wan.len(), 1);
    assert!(wan[0].meta.is_gso());
    assert_eq!(Ipv6Packet::new_unchecked(&wan[0].linear()[L3..]).hop_limit(), 63);
    assert!(net.drops().is_empty(), "{:?}", net.drops());
}

/// A neighbour advertisement from `src` (at `lladdr`) to the router's LAN
/// address with hop limit `hop_limit`; `corrupt` flips a checksum bit.
fn neighbour_advert_frame(dst_mac: MacAddr, src: Ipv6Addr, lladdr: MacAddr, hop_limit: u8, corrupt: bool) -> Vec<u8> {
    let na = superpacket::wire::Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: false,
        override_: true,
        target_addr: src,
        target_lladdr: Some(lladdr),
    };
    let mut buf = [0u8; 128];
    let n = na.emit_ipv6_packet(src, "fd01::1".parse().unwrap(), hop_limit, &mut buf).unwrap();
    if corrupt {
        buf[40 + 2] ^= 0x01;
    }
    let mut f = Vec::with_capacity(14 + n);
    f.extend_from_slice(&dst_mac.0);
    f.extend_from_slice(&lladdr.0);
    f.extend_from_slice(&0x86DDu16.to_be_bytes());
    f.extend_from_slice(&buf[..n]);
    f
}

#[test]
fn ndisc_rcv_only_on_link_neighbour_discovery_writes_the_neighbour_table() {
    let src: Ipv6Addr = "fd01::77".parse().unwrap();
    let lladdr = MacAddr([0x02, 0x77, 0, 0, 0, 1]);
    let cases: [(&str, u8, bool, Option<&str>); 3] = [
        ("ndisc_rcv: ipv6_hdr(skb)->hop_limit != 255", 64, false, Some(super::router::NDP_HOP_LIMIT)),
        ("icmpv6_rcv: skb_checksum_validate", 255, true, Some(super::router::ICMPV6_CHECKSUM)),
        ("ndisc_rcv: a valid advertisement is learned", 255, false, None),
    ];
    for (name, hop_limit, corrupt, want) in cases {
        let mut net = Net::new();
        let frame = neighbour_advert_frame(net.lan_mac(), src, lladdr, hop_limit, corrupt);
        let (wan, lan) = net.send(&frame);
        assert!(wan.is_empty() && lan.is_empty(), "{name}");
        let learned = net.g.router().unwrap().neighbours.get(&IpAddr::V6(src)).copied();
        match want {
            Some(reason) => {
                assert_eq!(learned, None, "{name}: not learned");
                assert_eq!(net.drops(), BTreeMap::from([(reason, 1)]), "{name}");
            }
            None => {
                assert_eq!(learned, Some(lladdr), "{name}");
                assert!(net.drops().is_empty(), "{name}: {:?}", net.drops());
            }
        }
    }
}
