//! Bursts by runs ([`Graph::receive_burst`] into a master,
//! [`NetDevice::receive_run`], [`PortDevice::transmit_run`]): a burst must
//! end exactly as the same packets received one by one do: the same frames
//! out of each port in the same order, the same counters on every device,
//! the same bridge table.

use super::bridge::Bridge;
use super::port::{DriverError, MemoryDriver};
use super::*;
use std::any::Any;
use superpacket::offload::gso::SegmentSink;
use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};

/// A memory port that refuses every third packet it is given whole
/// (counting from the first), as a driver whose queue is full would.
#[derive(Debug)]
struct Refusing {
    inner: MemoryDriver,
    given: u64,
}

impl PortDriver for Refusing {
    fn kind(&self) -> &'static str {
        "refusing"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.inner.hw_features()
    }
    fn features_check(&self) -> FeaturesCheck {
        self.inner.features_check()
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        self.given += 1;
        if self.given % 3 == 1 {
            return Err(DriverError::new("test-refused", "every third"));
        }
        self.inner.xmit(pkt)
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self.inner.sink()
    }
    fn recv(&mut self) -> Option<Packet> {
        None
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

fn station(n: u8) -> MacAddr {
    MacAddr([0x02, 0xaa, 0, 0, 0, n])
}

/// A UDP frame of `len` bytes from station `src` to `dst`.
fn frame(src: u8, dst: MacAddr, len: usize) -> Packet {
    let mut spec = FlowSpec::new(Transport::Udp, false, 0);
    spec.src_mac = station(src);
    spec.dst_mac = dst;
    Packet::from_frame(&Flow::new(spec).frame(len, TcpFlags::empty()).unwrap())
}

/// How the members are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    Xconnect,
    Bridge { vlan_filtering: bool },
}

/// Ports `a` (full), `b` (MTU 200, refusing every third packet when
/// `refusing`) and, in a bridge, `c` (carrier down when `c_down`), joined by
/// `join`; in a bridge, station 2 is learnt on `b`, 3 on `c`, 4 on `a`.
fn graph(join: Join, refusing: bool, c_down: bool) -> (Graph, [DeviceId; 3], DeviceId) {
    let mut g = Graph::new(StackMode::Passthrough);
    let a = g.add_port("a", Box::new(MemoryDriver::full())).unwrap();
    let b = if refusing {
        g.add_port("b", Box::new(Refusing { inner: MemoryDriver::full(), given: 0 })).unwrap()
    } else {
        g.add_port("b", Box::new(MemoryDriver::full())).unwrap()
    };
    let c = g.add_port("c", Box::new(MemoryDriver::full())).unwrap();
    g.set_mtu(b, 200);
    let m = match join {
        Join::Xconnect => g.add_xconnect("m").unwrap(),
        Join::Bridge { vlan_filtering } => g.add_bridge("m", vlan_filtering).unwrap(),
    };
    g.enslave(m, a).unwrap();
    g.enslave(m, b).unwrap();
    if join != Join::Xconnect {
        g.enslave(m, c).unwrap();
        g.set_time(1_000);
        for (port, st) in [(b, 2), (c, 3), (a, 4)] {
            g.receive(port, frame(st, MacAddr::BROADCAST, 60));
        }
    }
    g.set_carrier(c, !c_down);
    g.set_time(2_000);
    (g, [a, b, c], m)
}

/// A burst from `a` with every kind of frame: runs to each learnt station
/// (interleaved), unknown unicast and broadcast (twice each), runts (one of
/// 12 and one of 13 bytes after a frame with their addresses), frames over `b`'s
/// MTU, a superpacket, one to the bridge's own address, one from a station
/// to itself, one back to its own port.
fn mixed_burst(own: MacAddr) -> Vec<Packet> {
    let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 0)).superpacket(4000, 1000, TcpFlags::empty()).unwrap();
    let mut runt = frame(1, station(2), 60);
    runt.trim(10).unwrap();
    // Runts that still hold a run's 12 address bytes: dropped, never in it.
    let short = |len: usize| {
        let mut p = frame(1, station(2), 60);
        p.trim(len).unwrap();
        p
    };
    let mut burst = Vec::new();
    for (src, dst, len) in [(1, 2, 60), (1, 2, 61), (1, 2, 62), (1, 3, 60), (1, 3, 70), (1, 2, 60), (5, 2, 60)] {
        burst.push(frame(src, station(dst), len));
    }
    // Floods, each twice in a row: the second must be flooded too.
    burst.push(frame(1, station(9), 60));
    burst.push(frame(1, station(9), 60));
    burst.push(frame(1, MacAddr::BROADCAST, 60));
    burst.push(frame(1, MacAddr::BROADCAST, 60));
    burst.push(frame(1, station(2), 60));
    burst.push(runt);
    burst.push(frame(1, station(2), 60));
    burst.push(short(12));
    burst.push(short(13));
    burst.push(frame(1, station(2), 60));
    burst.push(frame(1, station(2), 300));
    burst.push(frame(1, station(2), 60));
    burst.push(sp);
    burst.push(frame(1, own, 60));
    burst.push(frame(6, station(6), 60));
    burst.push(frame(1, station(4), 60));
    for len in 60..70 {
        burst.push(frame(7, station(3), len));
    }
    burst
}

/// Everything observable after a walk: each port's transmitted frames
/// (bytes and offloads), every device's counters and host-side queue
/// length, a bridge's table.
fn observed(g: &mut Graph, ports: [DeviceId; 3], m: DeviceId) -> String {
    let mut out = String::new();
    for p in ports {
        let tx: Vec<(Vec<u8>, OffloadSummary)> = match g.driver_mut::<MemoryDriver>(p) {
            Some(d) => d.tx.drain(..).map(|p| (p.to_vec(), OffloadSummary::of(&p))).collect(),
            None => {
                let d = g.driver_mut::<Refusing>(p).unwrap();
                d.inner.tx.drain(..).map(|p| (p.to_vec(), OffloadSummary::of(&p))).collect()
            }
        };
        out += &format!("{p:?} tx {tx:?}\n");
    }
    for (i, d) in g.devices().iter().enumerate() {
        out += &format!("{i} {:?} local {}\n", d.counters, d.local.len());
    }
    if let Some(b) = g.kind_as::<Bridge>(m) {
        let mut fdb: Vec<_> = b.fdb.iter().map(|(k, e)| (*k, *e)).collect();
        fdb.sort_by_key(|((mac, vid), _)| (mac.0, *vid));
        out += &format!("fdb {fdb:?}\n");
    }
    out
}

#[derive(Debug)]
#[allow(dead_code, reason = "read through Debug")]
struct OffloadSummary {
    gso: bool,
    gso_size: u16,
    arrival_ns: Option<u64>,
}

impl OffloadSummary {
    fn of(p: &Packet) -> OffloadSummary {
        OffloadSummary { gso: p.meta.is_gso(), gso_size: p.meta.gso_size, arrival_ns: p.meta.arrival_ns }
    }
}

#[test]
fn a_burst_into_a_master_ends_as_its_packets_received_one_by_one() {
    let joins = [Join::Xconnect, Join::Bridge { vlan_filtering: false }, Join::Bridge { vlan_filtering: true }];
    for join in joins {
        for refusing in [false, true] {
            for c_down in [false, true] {
                let what = format!("{join:?} refusing {refusing} c down {c_down}");
                let (mut one, ports, m) = graph(join, refusing, c_down);
                let (mut burst_g, _, _) = graph(join, refusing, c_down);
                let own = one.device(m).mac;
                for p in mixed_burst(own) {
                    let mut p = p;
                    p.meta.arrival_ns.get_or_insert(2_000);
                    one.receive(ports[0], p);
                }
                let mut burst = mixed_burst(own);
                let n = burst.len() as u64 + burst_g.counters(ports[0]).rx_packets;
                burst_g.receive_burst(ports[0], &mut burst, &mut Vec::new(), 2_000);
                assert!(burst.is_empty(), "{what}");
                let (want, got) = (observed(&mut one, ports, m), observed(&mut burst_g, ports, m));
                assert_eq!(got, want, "{what}");
                assert_eq!(burst_g.counters(ports[0]).rx_packets, n, "{what}");
                // The case is not vacuous: frames left, and were refused.
                let b = burst_g.counters(ports[1]);
                assert!(b.tx_passthrough > 3, "{what}: {b:?}");
                assert_eq!(b.drops.contains_key("test-refused"), refusing, "{what}: {b:?}");
            }
        }
    }
}

/// A run is one hand-over to the port, not a walk per packet: a burst
/// through the cross-connect reaches the driver in one
/// [`PortDriver::xmit_burst`] call.
#[test]
fn a_cross_connect_hands_a_burst_to_its_peer_in_one_call() {
    #[derive(Debug, Default)]
    struct Calls {
        inner: Option<MemoryDriver>,
        bursts: Vec<usize>,
    }
    impl PortDriver for Calls {
        fn kind(&self) -> &'static str {
            "calls"
        }
        fn hw_features(&self) -> NetdevFeatures {
            NetdevFeatures::FULL_NIC
        }
        fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
            self.inner.get_or_insert_with(MemoryDriver::full).xmit(pkt)
        }
        fn xmit_burst(&mut self, pkts: &mut [Packet], lens: &[usize], refused: &mut dyn FnMut(&'static str)) {
            self.bursts.push(pkts.len());
            for (p, &len) in pkts.iter_mut().zip(lens) {
                assert_eq!(p.total_len(), len);
                if let Err(e) = self.xmit(p.move_out()) {
                    refused(e.reason);
                }
            }
        }
        fn sink(&mut self) -> &mut dyn SegmentSink {
            self.inner.get_or_insert_with(MemoryDriver::full).sink()
        }
        fn recv(&mut self) -> Option<Packet> {
            None
        }
        fn as_any_mut(&mut self) -> &mut dyn Any {
            self
        }
    }
    let mut g = Graph::new(StackMode::Passthrough);
    let a = g.add_port("a", Box::new(MemoryDriver::full())).unwrap();
    let b = g.add_port("b", Box::new(Calls::default())).unwrap();
    let xc = g.add_xconnect("xc").unwrap();
    g.enslave(xc, a).unwrap();
    g.enslave(xc, b).unwrap();
    let mut burst: Vec<Packet> = (0..16).map(|i| frame(1, station(2), 60 + i)).collect();
    let bytes = burst.iter().map(Packet::total_len).sum::<usize>() as u64;
    g.receive_burst(a, &mut burst, &mut Vec::new(), 0);
    let d = g.driver_mut::<Calls>(b).unwrap();
    assert_eq!(d.bursts, [16]);
    assert_eq!(d.inner.as_ref().unwrap().tx.len(), 16);
    let (ca, cb) = (g.counters(a), g.counters(b));
    assert_eq!((ca.rx_packets, ca.forwarded, cb.tx_packets, cb.tx_passthrough, cb.forwarded), (16, 16, 16, 16, 16));
    assert_eq!((ca.rx_bytes, cb.tx_bytes), (bytes, bytes));
}
