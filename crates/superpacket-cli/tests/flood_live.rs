//! Hardening under hostile load, live (issue 10): `superpacket run` of a
//! NAT router between the lab's TAPs (namespaces A and B of
//! [`superpacket_lab::lab`]).
//!
//! - `floods_keep_tables_bounded_and_the_tcp_flow_going`: a kernel TCP flow
//!   from A to B runs through the NAT while A floods the engine, in turn,
//!   with random UDP 5-tuples, never-completed IPv4 first fragments and TCP
//!   SYNs with random source ports ([`superpacket_lab::flood`]; raw
//!   frames, bounded by count and time). After each flood the stats socket
//!   must show every bounded table (conntrack, reassembly bytes and queues,
//!   GRO flow table, neighbours) at or below its limit, now and at its peak,
//!   and the refusals counted with their reasons (`conntrack-full`,
//!   `reasm-mem-limit`). The TCP flow must stay intact: its sender and
//!   receiver give up after 3 s without progress, so finishing intact with
//!   data means it kept moving through every flood. No throughput is
//!   asserted here: `superpacket bench flood` measures it.
//! - `overload_is_exactly_accounted`: see its documentation.
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). Only namespaces and TAPs
//! the test creates are touched; all are deleted, also on failure.

mod common;

use common::engine::{Running, counter};
use common::privileged;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use superpacket::packet::virtio::VirtioNetHdr;
use superpacket_engine::io::NetNs;
use superpacket_lab::flood::{self, FloodKind, FloodPlan, ipv4_frame, udp};
use superpacket_lab::lab::{HOST_A_V4, HOST_B_V4, Lab, TAP_A, TAP_B};
use superpacket_lab::streams::{self, Limit, TcpConfig};

/// Conntrack size of the flood topology: small, so that floods fill it.
const MAX_CONNS: u64 = 512;

/// Every `drops.*` counter of every device, summed.
fn engine_drops(stats: &serde_json::Value) -> u64 {
    let mut n = 0;
    for d in stats["devices"].as_array().unwrap() {
        for (k, v) in d["counters"].as_object().unwrap() {
            if k.starts_with("drops.") {
                n += v.as_u64().unwrap();
            }
        }
    }
    n
}

/// (size, peak, limit, events) of a table.
fn table(stats: &serde_json::Value, name: &str) -> Option<(u64, u64, u64, serde_json::Value)> {
    let t = stats["tables"].as_array()?.iter().find(|t| t["name"] == name)?;
    Some((t["size"].as_u64()?, t["peak"].as_u64()?, t["limit"].as_u64()?, t["events"].clone()))
}

fn sysfs(ns: &NetNs, dev: &str, stat: &str) -> u64 {
    ns.link_statistic(dev, stat).unwrap()
}

/// Waits until A has resolved the router's address; returns its MAC.
fn router_mac(lab: &Lab) -> [u8; 6] {
    let t0 = Instant::now();
    loop {
        if let Some(m) = flood::neighbour_mac(&lab.a, "10.71.0.1".parse().unwrap()) {
            return m;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "A never resolved the router");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn floods_keep_tables_bounded_and_the_tcp_flow_going() {
    if !privileged("floods_keep_tables_bounded_and_the_tcp_flow_going") {
        return;
    }
    let lab = Lab::create("sp-flood", false).unwrap();
    let engine = Running::start(&flood::nat_topology(&lab, MAX_CONNS));
    let (a, b) = (&lab.a, &lab.b);
    let tcp = std::thread::scope(|s| {
        let flow = s.spawn(|| {
            let cfg = TcpConfig { limit: Limit::Duration(Duration::from_secs(9)), ..TcpConfig::default() };
            streams::tcp_transfer(Some(b), Some(a), SocketAddr::new(HOST_B_V4.into(), 5201), &cfg)
        });
        let mac = router_mac(&lab);
        std::thread::sleep(Duration::from_millis(500));
        for (i, kind) in FloodKind::ALL.into_iter().enumerate() {
            let before = engine.stats();
            let plan = FloodPlan {
                kind,
                max_frames: 300_000,
                max_time: Duration::from_millis(1500),
                rate: 0,
                seed: 11 + i as u64,
            };
            let rep = flood::flood(&lab.a, TAP_A, mac, &plan).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let s = engine.stats();
            eprintln!("{} flood: {rep:?}; tables {}", kind.name(), s["tables"]);
            assert!(rep.sent > 1000, "{kind:?}: {rep:?}");
            for t in s["tables"].as_array().unwrap() {
                let name = t["name"].as_str().unwrap();
                let (size, peak, limit) =
                    (t["size"].as_u64().unwrap(), t["peak"].as_u64().unwrap(), t["limit"].as_u64().unwrap());
                // Reassembly admits a fragment while at or below the limit:
                // one fragment's truesize of slack (see device::tables).
                let slack = if name == "reasm-bytes" { 16 * 1024 } else { 0 };
                assert!(size <= limit + slack && peak <= limit + slack, "{kind:?}: table {t}");
            }
            // The router counts its refusals (conntrack, reassembly) itself.
            let delta = |key: &str| counter(&s, "router", key) - counter(&before, "router", key);
            match kind {
                FloodKind::RandomTuples | FloodKind::SynFlood => {
                    let (_, peak, limit, ev) = table(&s, "conntrack").expect("conntrack table");
                    assert_eq!(limit, MAX_CONNS);
                    assert_eq!(peak, MAX_CONNS, "{kind:?}: the flood filled the table");
                    assert!(delta("drops.conntrack-full") > 0, "{kind:?}: refusals counted: {s}");
                    assert!(ev["table_full"].as_u64().unwrap() > 0, "{kind:?}: {ev}");
                }
                FloodKind::Fragments => {
                    let (_, peak, limit, ev) = table(&s, "reasm-bytes").expect("reassembly table");
                    assert_eq!(limit, 4 << 20);
                    assert!(peak > limit / 2, "the flood filled reassembly memory: {peak}");
                    assert!(delta("drops.reasm-mem-limit") > 0, "fragment refusals counted: {s}");
                    assert!(ev["mem_limit"].as_u64().unwrap() > 0, "{ev}");
                    let (_, qpeak, qlimit, _) = table(&s, "reasm-queues").unwrap();
                    assert!(qpeak > 0 && qpeak <= qlimit);
                }
            }
            if kind == FloodKind::RandomTuples {
                let (_, peak, limit, _) = table(&s, "gro:a").expect("GRO table of a");
                assert!(peak > 1 && peak <= limit, "GRO held random flows: {peak}/{limit}");
            }
        }
        flow.join().unwrap()
    });
    let tcp = tcp.expect("the TCP flow kept going through every flood (3 s idle timeout)");
    assert!(tcp.intact(), "{tcp:?}");
    assert!(tcp.receiver.bytes > 10_000_000, "{tcp:?}");
    let s = engine.stats();
    let (_, peak, limit, _) = table(&s, "neighbours").unwrap();
    assert!(peak <= limit, "neighbours {peak}/{limit}");
    assert_eq!(counter(&s, "b", "drops.conntrack-full"), 0, "the flow's replies were never refused: {s}");
}

/// Pushes more UDP frames than the engine can take from A to B through the
/// router (no NAT, no GRO: one frame in is at most one frame out) and
/// checks, exactly:
///
/// `offered = delivered + engine drops + TAP queue drops`
///
/// - `offered`: frames the test's AF_PACKET socket in A handed to TAP
///   `spd-a` with the qdisc bypassed (every `sendmsg` accepted or refused);
/// - TAP queue drops: `spd-a`'s `tx_dropped` (the TAP's queue toward the
///   engine was full; such a `sendmsg` fails with `ENOBUFS`, checked too);
/// - engine drops: every `drops.*` counter of every device (router, port
///   drivers' transmit errors);
/// - `delivered`: `spd-b`'s `rx_packets` in B (frames the engine wrote into
///   B's TAP and the kernel received).
///
/// Nothing else moves meanwhile: IPv6 is off, ARP was resolved before, and
/// B has a socket on the destination port (no ICMP back). Counters are
/// deltas over the blast, read after the engine has drained.
#[test]
fn overload_is_exactly_accounted() {
    if !privileged("overload_is_exactly_accounted") {
        return;
    }
    let lab = Lab::create("sp-exact", false).unwrap();
    let topo = format!(
        "[[device]]\nname = \"a\"\nkind = \"port\"\n\
         driver = {{ kind = \"tap\", name = \"{TAP_A}\", netns = \"{}\" }}\naddresses = [\"10.71.0.1/24\"]\n\
         [[device]]\nname = \"b\"\nkind = \"port\"\n\
         driver = {{ kind = \"tap\", name = \"{TAP_B}\", netns = \"{}\" }}\naddresses = [\"10.72.0.1/24\"]\n",
        lab.a.name(),
        lab.b.name()
    );
    let engine = Running::start(&topo);
    let sink = lab.b.enter_scoped(|| UdpSocket::bind((HOST_B_V4, 9999))).unwrap().unwrap();
    // Resolve both neighbours with a few kernel datagrams.
    let src = lab.a.enter_scoped(|| UdpSocket::bind((HOST_A_V4, 0))).unwrap().unwrap();
    for _ in 0..5 {
        src.send_to(b"prime", (HOST_B_V4, 9999)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut buf = [0u8; 64];
    sink.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert_eq!(sink.recv(&mut buf).unwrap(), 5, "the path works");
    let mac = router_mac(&lab);
    std::thread::sleep(Duration::from_millis(300));

    let (a_tx0, a_drop0) = (sysfs(&lab.a, TAP_A, "tx_packets"), sysfs(&lab.a, TAP_A, "tx_dropped"));
    let b_rx0 = sysfs(&lab.b, TAP_B, "rx_packets");
    let s0 = engine.stats();

    const N: u64 = 300_000;
    let mut sock = flood::raw_sender(&lab.a, TAP_A).unwrap();
    let frame = ipv4_frame(mac, [2, 0, 0, 0, 0, 0xaa], HOST_A_V4, HOST_B_V4, 17, 1, 0x4000, &udp(4000, 9999, &[0; 64]));
    let (mut ok, mut refused) = (0u64, 0u64);
    let hdr = VirtioNetHdr::default();
    for _ in 0..N {
        match sock.send(&hdr, &[&frame]) {
            Ok(_) => ok += 1,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => refused += 1,
            Err(e) => panic!("send: {e}"),
        }
    }
    // Drained: the engine has read everything the TAP queued and its
    // published counters stopped moving.
    let t0 = Instant::now();
    let mut last = serde_json::Value::Null;
    let s = loop {
        std::thread::sleep(Duration::from_millis(300));
        let s = engine.stats();
        let a_tx = sysfs(&lab.a, TAP_A, "tx_packets") - a_tx0;
        if counter(&s, "a", "rx_packets") - counter(&s0, "a", "rx_packets") == a_tx && s["devices"] == last["devices"] {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "engine never drained: {s}");
        last = s;
    };
    let a_tx = sysfs(&lab.a, TAP_A, "tx_packets") - a_tx0;
    let a_dropped = sysfs(&lab.a, TAP_A, "tx_dropped") - a_drop0;
    let delivered = sysfs(&lab.b, TAP_B, "rx_packets") - b_rx0;
    let engine_dropped = engine_drops(&s) - engine_drops(&s0);
    let by_reason: Vec<String> = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| {
            let name = d["name"].as_str().unwrap().to_string();
            d["counters"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| k.starts_with("drops."))
                .map(move |(k, v)| format!("{name}:{k}={v}"))
                .collect::<Vec<_>>()
        })
        .collect();
    eprintln!(
        "offered {N}: accepted {ok}, refused {refused}; TAP a tx {a_tx} dropped {a_dropped}; \
         delivered {delivered}; engine drops {engine_dropped} {by_reason:?}"
    );
    assert_eq!(ok + refused, N);
    assert_eq!(refused, a_dropped, "every refused sendmsg is a counted TAP queue drop");
    assert_eq!(ok, a_tx, "every accepted frame reached the engine");
    assert_eq!(N, delivered + engine_dropped + a_dropped, "sent = delivered + counted drops");
    drop(sink);
}
