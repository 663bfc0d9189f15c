//! The `tun` port driver end to end, with the real kernel on both sides:
//! `superpacket run` on `examples/live-tun-router.toml` (two TUNs the
//! engine creates in two throwaway namespaces, a router between them),
//! kernel TCP (IPv4 and IPv6) and UDP GSO both ways through it with every
//! byte checked, and the counters that show superpackets crossing whole;
//! then the same router with A's TUN offering no offloads and GRO on its
//! port, so that the superpackets are made by the engine's raw-IP GRO.
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). Only the namespaces the
//! test creates, and the TUNs the engine creates in them, are touched; all
//! are deleted, also on failure.

mod common;

use common::engine::{Running, counter};
use common::privileged;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use superpacket_engine::io::NetNs;
use superpacket_lab::streams::{self, Limit, TcpConfig, TcpTransfer, UdpConfig, UdpTransfer};

const EXAMPLE: &str = "live-tun-router.toml";

/// Two namespaces for the TUNs of `examples/live-tun-router.toml`.
struct TunLab {
    a: NetNs,
    b: NetNs,
}

/// Each side: its TUN, its addresses and the router's addresses on its link.
const SIDES: [(&str, &str, &str, &str, &str); 2] = [
    ("spt-a", "10.73.0.2/24", "fd73::2/64", "10.73.0.1", "fd73::1"),
    ("spt-b", "10.74.0.2/24", "fd74::2/64", "10.74.0.1", "fd74::1"),
];

impl TunLab {
    fn create(prefix: &str) -> TunLab {
        TunLab {
            a: NetNs::create(&format!("{prefix}-a")).expect("namespace a"),
            b: NetNs::create(&format!("{prefix}-b")).expect("namespace b"),
        }
    }

    /// The example with this lab's namespaces.
    fn topology(&self) -> String {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(EXAMPLE))
            .expect("example");
        text.replace("sp-lab-a", self.a.name()).replace("sp-lab-b", self.b.name())
    }

    /// The kernel side of the TUNs the running engine created (they are up):
    /// addresses, and default routes via the router.
    fn configure(&self) {
        for (ns, (dev, v4, v6, gw4, gw6)) in [&self.a, &self.b].into_iter().zip(SIDES) {
            ns.add_addr(dev, v4).unwrap();
            ns.add_addr_nodad(dev, v6).unwrap();
            ns.add_route("default", Some(gw4), Some(dev)).unwrap();
            ns.add_route("default", Some(gw6), Some(dev)).unwrap();
        }
    }

    /// Host A's or B's address.
    fn host(b: bool, v6: bool) -> IpAddr {
        let (_, v4, v6addr, ..) = SIDES[usize::from(b)];
        let cidr = if v6 { v6addr } else { v4 };
        cidr.split('/').next().unwrap().parse().unwrap()
    }

    /// Kernel TCP for `secs` from A to B (or B to A).
    fn tcp(&self, to_b: bool, v6: bool, secs: f64) -> TcpTransfer {
        let cfg = TcpConfig { limit: Limit::Duration(Duration::from_secs_f64(secs)), ..TcpConfig::default() };
        let (rx, tx) = if to_b { (&self.b, &self.a) } else { (&self.a, &self.b) };
        let addr = SocketAddr::new(TunLab::host(to_b, v6), 5301);
        streams::tcp_transfer(Some(rx), Some(tx), addr, &cfg).unwrap()
    }

    /// Kernel UDP with `UDP_SEGMENT` for `secs`, from A to B (or B to A).
    fn udp(&self, to_b: bool, secs: f64) -> UdpTransfer {
        let cfg = UdpConfig { limit: Limit::Duration(Duration::from_secs_f64(secs)), ..UdpConfig::default() };
        let (rx, tx) = if to_b { (&self.b, &self.a) } else { (&self.a, &self.b) };
        let addr = SocketAddr::new(TunLab::host(to_b, false), 5302);
        streams::udp_transfer(Some(rx), Some(tx), addr, &cfg).unwrap()
    }
}

#[test]
fn tcp_and_udp_cross_a_router_between_two_tuns_intact_and_whole() {
    if !privileged("tcp_and_udp_cross_a_router_between_two_tuns_intact_and_whole") {
        return;
    }
    let lab = TunLab::create("sp-tun");
    let engine = Running::start(&lab.topology());
    lab.configure();

    for (to_b, v6) in [(true, false), (true, true), (false, false)] {
        let t = lab.tcp(to_b, v6, 1.0);
        assert!(t.intact(), "TCP to_b={to_b} v6={v6}: {t:?}\nengine: {}", engine.stats());
        assert!(t.receiver.bytes > 10_000_000, "TCP to_b={to_b} v6={v6}: only {} bytes", t.receiver.bytes);
        eprintln!("TCP to_b={to_b} v6={v6}: {:.1} Gbit/s", t.gbps());
    }
    for to_b in [true, false] {
        let u = lab.udp(to_b, 0.5);
        assert!(u.no_corruption() && u.receiver.counts.unique > 1000, "UDP to_b={to_b}: {u:?}");
    }

    let s = engine.stats();
    // The kernel's TSO/USO superpackets entered at A's TUN whole (each
    // stands for gso_segs > 1 segments), were routed whole and written into
    // B's TUN whole; nothing was cut at either TUN.
    for (port, dir) in [("a", "rx"), ("b", "tx"), ("b", "rx"), ("a", "tx")] {
        assert!(counter(&s, port, &format!("{dir}_superpackets")) > 0, "{port} {dir}: {s}");
    }
    assert!(counter(&s, "a", "rx_bytes") / counter(&s, "a", "rx_packets").max(1) > 1500, "{s}");
    for port in ["a", "b"] {
        assert_eq!(counter(&s, port, "segments_produced"), 0, "{port}: {s}");
        assert!(counter(&s, port, "driver.tx_superpackets") > 0, "{port}: {s}");
        // The router resolved the hosts through the port drivers' answers.
        assert!(counter(&s, port, "driver.arp_answered") >= 1 && counter(&s, port, "driver.nd_answered") >= 1, "{s}");
        for reason in ["tun-not-ip", "tun-bad-ip", "tun-arp", "tx-refused"] {
            assert_eq!(counter(&s, port, &format!("drops.{reason}")), 0, "{port} {reason}: {s}");
        }
    }
    let (code, err) = engine.stop();
    assert_eq!(code, Some(0), "{err}");
    // The TUNs the engine created went with it.
    for (ns, (dev, ..)) in [&lab.a, &lab.b].into_iter().zip(SIDES) {
        assert!(!ns.link_exists(dev).unwrap(), "{dev} left behind");
    }
}

#[test]
fn raw_ip_gro_on_a_tun_port_makes_the_superpackets() {
    if !privileged("raw_ip_gro_on_a_tun_port_makes_the_superpackets") {
        return;
    }
    let lab = TunLab::create("sp-tungro");
    let base = lab.topology();
    let ns = lab.a.name();
    let topo =
        base.replace(&format!("netns = \"{ns}\" }}"), &format!("netns = \"{ns}\", offloads = [] }}\ngro = true"));
    assert_ne!(topo, base);
    let engine = Running::start(&topo);
    lab.configure();

    let t = lab.tcp(true, false, 1.0);
    assert!(t.intact() && t.receiver.bytes > 1_000_000, "{t:?}\nengine: {}", engine.stats());
    let s = engine.stats();
    // A's TUN hands over MTU packets only; GRO on the raw packets merged
    // them, and the aggregates left through B's TUN whole.
    assert_eq!(counter(&s, "a", "driver.rx_superpackets"), 0, "{s}");
    assert!(counter(&s, "a", "gro.merged") > 1000, "{s}");
    assert!(counter(&s, "b", "tx_superpackets") > 0 && counter(&s, "b", "driver.tx_superpackets") > 0, "{s}");
    assert_eq!(counter(&s, "b", "segments_produced"), 0, "{s}");
    assert_eq!(engine.stop().0, Some(0));
}
