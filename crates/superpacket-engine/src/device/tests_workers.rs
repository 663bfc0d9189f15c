//! Routers of several engine workers sharing NAT's connection table and
//! the neighbour table ([`Graph::share_tables`]): one graph per worker, as
//! the engine builds them, with packets of one connection handed to
//! different workers as the kernel's flow hash would.

use super::port::MemoryDriver;
use super::seed::seed_router;
use super::*;
use std::net::{IpAddr, Ipv4Addr};
use superpacket::packet::Packet;
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::{ArpOperation, ArpPacket, ArpRepr, MacAddr, TcpFlags};

const HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 10, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const PUBLIC: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
const GW_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xfe]);
const HOST_MAC: MacAddr = MacAddr([2, 0xbb, 0, 0, 0, 2]);

/// Two seed NAT routers (`examples/seed-vlan-nat.toml`) sharing their
/// tables, worker 1's linked to worker 0's as the engine does; `host_known`
/// adds the LAN host as a static neighbour of both first.
fn two_workers(host_known: bool) -> ([Graph; 2], FlowSpec) {
    let (mut g0, mut spec) = seed_router(StackMode::Passthrough, MemoryMode::Capture);
    let (mut g1, _) = seed_router(StackMode::Passthrough, MemoryMode::Capture);
    if host_known {
        for g in [&mut g0, &mut g1] {
            g.router_mut().add_neighbour(IpAddr::V4(HOST), HOST_MAC);
        }
    }
    g1.share_tables(&mut g0);
    spec.transport = Transport::Tcp;
    spec.dst_port = 80;
    spec.src_mac = HOST_MAC;
    ([g0, g1], spec)
}

fn tx(g: &mut Graph, port: &str) -> Vec<Packet> {
    let p = g.id(port).unwrap();
    g.driver_mut::<MemoryDriver>(p).unwrap().tx.drain(..).collect()
}

/// (source, source port, destination, destination port) of a valid
/// single-tagged IPv4 TCP frame.
fn endpoints(p: &Packet) -> (Ipv4Addr, u16, Ipv4Addr, u16) {
    let mut problems = Vec::new();
    validate_frame(&p.to_vec(), Medium::Ethernet, &p.meta, false, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    let d = p.linear();
    let ip = |o: usize| Ipv4Addr::new(d[o], d[o + 1], d[o + 2], d[o + 3]);
    let port = |o: usize| u16::from_be_bytes([d[o], d[o + 1]]);
    (ip(30), port(38), ip(34), port(40))
}

/// A TCP segment from the server to `PUBLIC:port`, as the gateway sends
/// it into VLAN 20 to the router.
fn from_server(g: &Graph, sport: u16, port: u16) -> Packet {
    let mut spec = FlowSpec::new(Transport::Tcp, false, 0).with_vlans(&[(0x8100, 20)]).unwrap();
    spec.addrs = Addrs::V4 { src: SERVER, dst: PUBLIC };
    (spec.src_port, spec.dst_port) = (sport, port);
    (spec.src_mac, spec.dst_mac) = (GW_MAC, g.device(g.id("wan.20").unwrap()).mac);
    Packet::from_frame(&Flow::new(spec).frame(100, TcpFlags::ACK).unwrap())
}

#[test]
fn a_connection_opened_on_one_worker_is_translated_by_the_other_in_both_directions() {
    let ([mut g0, mut g1], spec) = two_workers(true);
    // Worker 0 sees the SYN: the connection is created, masqueraded.
    g0.receive(g0.id("lan").unwrap(), Packet::from_frame(&Flow::new(spec).frame(0, TcpFlags::SYN).unwrap()));
    let out = tx(&mut g0, "wan");
    assert_eq!(out.len(), 1);
    let (src, port, dst, dport) = endpoints(&out[0]);
    assert_eq!((src, dst, dport), (PUBLIC, SERVER, 80));
    // Worker 1 sees the reply: translated back to the host.
    g1.receive(g1.id("wan").unwrap(), from_server(&g1, 80, port));
    let out = tx(&mut g1, "lan");
    assert_eq!(out.len(), 1, "reply forwarded by the other worker: {:?}", g1.router().unwrap().nat.counters);
    assert_eq!(endpoints(&out[0]), (SERVER, 80, HOST, spec.src_port));
    // Worker 1 sees the host's next segment: the same translation.
    g1.receive(g1.id("lan").unwrap(), Packet::from_frame(&Flow::new(spec).frame(10, TcpFlags::ACK).unwrap()));
    let out = tx(&mut g1, "wan");
    assert_eq!(endpoints(&out[0]), (PUBLIC, port, SERVER, 80));
    // One connection, created once, counted once in the engine's totals.
    let nat = |g: &Graph| (g.router().unwrap().nat.len(), g.router().unwrap().nat.counters.created);
    assert_eq!((nat(&g0), nat(&g1)), ((1, 1), (1, 0)));
    let mut usage = Vec::new();
    g1.router().unwrap().table_usage(&mut usage);
    assert!(usage.iter().any(|t| t.name == "conntrack" && t.shared && t.size == 1), "{usage:?}");
}

#[test]
fn translated_source_ports_are_unique_across_workers() {
    let ([mut g0, mut g1], spec) = two_workers(true);
    // Two LAN hosts with the same source port to the same server, one
    // through each worker: the second gets another public port.
    let mut ports = Vec::new();
    for (g, host) in [(&mut g0, HOST), (&mut g1, Ipv4Addr::new(192, 168, 10, 3))] {
        let mut s = spec;
        s.addrs = Addrs::V4 { src: host, dst: SERVER };
        g.receive(g.id("lan").unwrap(), Packet::from_frame(&Flow::new(s).frame(0, TcpFlags::SYN).unwrap()));
        let out = tx(g, "wan");
        assert_eq!(out.len(), 1);
        ports.push(endpoints(&out[0]).1);
    }
    assert_ne!(ports[0], ports[1], "one public port per connection");
    // Each reply reaches the host that opened it, whichever worker takes it.
    g0.router_mut().add_neighbour(IpAddr::V4(Ipv4Addr::new(192, 168, 10, 3)), HOST_MAC);
    g1.router_mut().add_neighbour(IpAddr::V4(Ipv4Addr::new(192, 168, 10, 3)), HOST_MAC);
    for (g, port, host) in [(&mut g1, ports[0], HOST), (&mut g0, ports[1], Ipv4Addr::new(192, 168, 10, 3))] {
        let p = from_server(g, 80, port);
        g.receive(g.id("wan").unwrap(), p);
        let out = tx(g, "lan");
        assert_eq!(out.len(), 1);
        assert_eq!(endpoints(&out[0]).2, host);
    }
}

#[test]
fn expiry_by_one_worker_ends_the_connection_for_all() {
    let ([mut g0, mut g1], spec) = two_workers(true);
    g0.receive(g0.id("lan").unwrap(), Packet::from_frame(&Flow::new(spec).frame(0, TcpFlags::SYN).unwrap()));
    let port = endpoints(&tx(&mut g0, "wan")[0]).1;
    // Unreplied TCP lives 120 s; worker 1 expires it past that.
    let later = g0.router().unwrap().nat.timeouts.tcp_unreplied + 1;
    assert_eq!(g1.router_mut().nat.expire(later), 1);
    assert_eq!(g0.router().unwrap().nat.len(), 0, "gone for worker 0 too");
    g0.set_time(later);
    g0.receive(g0.id("wan").unwrap(), from_server(&g0, 80, port));
    assert!(tx(&mut g0, "lan").is_empty(), "a reply to an expired connection is not translated");
}

/// The ARP reply of the LAN host (`HOST_MAC`) to `request`, into VLAN 10.
fn arp_reply(request: &Packet) -> Packet {
    let r = ArpRepr::parse(&ArpPacket::new_checked(&request.linear()[18..]).unwrap()).unwrap();
    assert_eq!((r.operation, r.target_protocol_addr), (ArpOperation::Request, HOST));
    let mut arp = [0u8; 28];
    ArpRepr::reply_to(&r, HOST_MAC).emit(&mut ArpPacket::new_unchecked(&mut arp[..])).unwrap();
    let mut f = Vec::new();
    f.extend_from_slice(&r.source_hardware_addr.0);
    f.extend_from_slice(&HOST_MAC.0);
    f.extend_from_slice(&[0x81, 0x00, 0x00, 10, 0x08, 0x06]);
    f.extend_from_slice(&arp);
    Packet::from_frame(&f)
}

/// Two workers without the LAN host as a neighbour: worker 0 opens a
/// connection, worker 1 gets `held` replies for it, which wait for the
/// host's address, and the host's ARP reply reaches worker 0. Returns the
/// workers, the host's flow and the connection's public port.
fn replies_held_on_worker_1_answered_on_worker_0(held: usize) -> ([Graph; 2], FlowSpec, u16) {
    let ([mut g0, mut g1], spec) = two_workers(false);
    g0.receive(g0.id("lan").unwrap(), Packet::from_frame(&Flow::new(spec).frame(0, TcpFlags::SYN).unwrap()));
    let port = endpoints(&tx(&mut g0, "wan")[0]).1;
    for _ in 0..held {
        g1.receive(g1.id("wan").unwrap(), from_server(&g1, 80, port));
    }
    assert_eq!(g1.router().unwrap().pending(), held);
    let req = tx(&mut g1, "lan");
    assert_eq!(req.len(), 1, "one ARP request");
    // The host's answer reaches worker 0, which has nothing waiting.
    g0.receive(g0.id("lan").unwrap(), arp_reply(&req[0]));
    assert!(tx(&mut g0, "lan").is_empty());
    ([g0, g1], spec, port)
}

#[test]
fn an_arp_reply_taken_by_another_worker_releases_the_packets_held_for_it() {
    let ([_g0, mut g1], spec, port) = replies_held_on_worker_1_answered_on_worker_0(3);
    // Worker 1 sees the neighbour at its next pass and sends the three.
    g1.housekeeping(1);
    assert_eq!((g1.router().unwrap().pending(), g1.router().unwrap().resolving()), (0, 0));
    let out = tx(&mut g1, "lan");
    assert_eq!(out.len(), 3);
    for p in &out {
        assert_eq!(&p.linear()[..6], &HOST_MAC.0[..], "addressed to the host");
        assert_eq!(endpoints(p), (SERVER, 80, HOST, spec.src_port));
    }
    // Later packets go straight out; nothing else was sent.
    g1.receive(g1.id("wan").unwrap(), from_server(&g1, 80, port));
    assert_eq!(tx(&mut g1, "lan").len(), 1);
    g1.housekeeping(3 * super::router::SOLICIT_INTERVAL_NS);
    assert!(tx(&mut g1, "lan").is_empty(), "no solicitation after the answer");
    assert_eq!(g1.router().unwrap().neighbours_failed, 0);
}

#[test]
fn the_next_packet_for_the_neighbour_releases_the_held_ones_first() {
    let ([_g0, mut g1], _, port) = replies_held_on_worker_1_answered_on_worker_0(2);
    // No housekeeping: worker 1's next packet to the host misses its copy,
    // which it then refreshes; the two held packets leave before it.
    let mut third = from_server(&g1, 80, port);
    third.linear_mut()[60] ^= 0xff;
    g1.receive(g1.id("wan").unwrap(), third);
    let out = tx(&mut g1, "lan");
    assert_eq!(out.len(), 3);
    assert_eq!(g1.router().unwrap().pending(), 0);
    let payload_byte = |p: &Packet| p.linear()[60];
    assert_eq!(payload_byte(&out[0]), payload_byte(&out[1]), "the two held ones first");
    assert_ne!(payload_byte(&out[1]), payload_byte(&out[2]), "then the new one");
}
