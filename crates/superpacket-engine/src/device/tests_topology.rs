//! Topology files: every example builds; bad files name the right line.

use super::features::{FeaturesCheck, NetdevFeatures};
use super::port::{DriverError, MemoryDriver, PortDriver};
use super::topology::{
    BuildOptions, DriverContext, DriverRegistry, DriverSpec, FactoryError, Topology, line_col, load,
};
use super::{MemoryMode, StackMode};
use crate::device::bond::BondMode;
use crate::device::nat::NatRule;
use std::net::{IpAddr, Ipv4Addr};

type F = NetdevFeatures;

fn examples() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_loads_and_builds() {
    let all = examples();
    for name in ["seed-vlan-nat.toml", "seed-qinq-tso.toml", "bridge-vlan-filtering.toml"] {
        assert!(all.iter().any(|(p, _)| p.ends_with(name)), "examples/{name} is missing");
    }
    for (path, src) in &all {
        let t = Topology::parse(src).unwrap_or_else(|e| panic!("{path}: {e}"));
        if path.contains("/live-") {
            // Live topologies open TAPs and AF_PACKET sockets in the lab's
            // namespaces: built and run by tests/engine_live.rs.
            continue;
        }
        for mode in [StackMode::Passthrough, StackMode::Legacy] {
            let opts = BuildOptions { mode: Some(mode), memory_mode: MemoryMode::Count, ..BuildOptions::default() };
            let g = t.build_with(&opts).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert!(!g.devices().is_empty(), "{path}");
            assert_eq!(g.mode(), mode);
        }
    }
}

#[test]
fn seed_vlan_nat_example_is_the_seed_router() {
    let g = load(include_str!("../../../../examples/seed-vlan-nat.toml")).unwrap();
    let lan10 = g.id("lan.10").unwrap();
    let wan20 = g.id("wan.20").unwrap();
    assert!(matches!(g.kind_as::<super::vlan::Vlan>(lan10), Some(v) if v.vid == 10));
    assert_eq!(g.device(lan10).lowers, vec![g.id("lan").unwrap()]);
    assert!(g.router().unwrap().has_interface(lan10) && g.router().unwrap().has_interface(wan20));
    assert_eq!(g.router().unwrap().nat.rules, vec![NatRule::Masquerade { out_dev: wan20.0 }]);
    let gw = IpAddr::V4(Ipv4Addr::new(203, 0, 113, 254));
    assert_eq!(g.router().unwrap().route(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8))), Some((wan20, gw)));
    assert!(g.router().unwrap().neighbours.contains_key(&gw));
    assert!(g.device(wan20).feat.features.contains(F::GSO_UDP_L4 | F::GSO_FRAGLIST));
}

#[test]
fn bridge_and_qinq_examples_configure_what_they_say() {
    let g = load(include_str!("../../../../examples/bridge-vlan-filtering.toml")).unwrap();
    let br = g.id("br0").unwrap();
    let uplink = g.id("uplink").unwrap();
    let b = g.kind_as::<super::bridge::Bridge>(br).expect("br0 is a bridge");
    assert!(b.vlan_filtering);
    assert_eq!(b.ageing_ns, 300_000_000_000);
    let trunk = b.port_vlans(g.id("trunk").unwrap()).unwrap();
    assert_eq!(
        (trunk.pvid, trunk.member(1), trunk.member(10), trunk.member(30)),
        (Some(1), Some(true), Some(false), None)
    );
    assert_eq!(b.self_vlans.member(10), Some(false));
    assert!(!g.device(uplink).feat.features.intersects(F::TSO | F::TSO6 | F::GSO_UDP_L4));
    assert_eq!(g.device(br).mac.0, [0x02, 0x42, 0, 0, 0, 1]);

    let g = load(include_str!("../../../../examples/seed-qinq-tso.toml")).unwrap();
    let bond = g.id("bond0").unwrap();
    assert!(matches!(g.kind_as::<super::bond::Bond>(bond), Some(b) if b.mode == BondMode::BalanceXor));
    assert!(matches!(g.device(g.id("eth0").unwrap()).check, FeaturesCheck::Any));
    let c = g.id("team0.100.200").unwrap();
    assert_eq!(g.device(c).lowers, vec![g.id("team0.100").unwrap()]);
    assert!(g.device(c).feat.features.contains(F::TSO));
}

#[test]
fn devices_may_come_in_any_order_and_primary_wins() {
    let src = r#"
[[device]]
name = "v"
kind = "vlan"
lower = "b"
id = 5

[[device]]
name = "b"
kind = "bond"
slaves = ["p1", "p2"]
primary = "p2"

[[device]]
name = "p1"
kind = "port"

[[device]]
name = "p2"
kind = "port"
"#;
    let mut g = load(src).unwrap();
    let (b, p1, p2) = (g.id("b").unwrap(), g.id("p1").unwrap(), g.id("p2").unwrap());
    let active = |g: &super::Graph| g.kind_as::<super::bond::Bond>(b).and_then(|s| s.active);
    assert_eq!(active(&g), Some(p2));
    g.set_carrier(p2, false);
    assert_eq!(active(&g), Some(p1));
    g.set_carrier(p2, true);
    assert_eq!(active(&g), Some(p2), "primary takes over again");
}

/// A valid base the bad cases append to (lines 1-12).
const BASE: &str = r#"mode = "passthrough"

[[device]]
name = "p"
kind = "port"

[[device]]
name = "q"
kind = "port"

[[device]]
name = "v"
"#;

#[test]
fn bad_files_name_the_line_and_the_problem() {
    // (file, line, words the message must contain)
    let cases: &[(&str, usize, &[&str])] = &[
        // syntax
        ("[[device]]\nname = \"p\"\nkind = \"port\nmtu = 1500\n", 3, &["string"]),
        ("mode = \"passthrough\"\n\nmode = \"legacy\"\n", 3, &["duplicate"]),
        // types and unknown keys
        ("[[device]]\nname = \"p\"\nkind = \"port\"\nmtu = \"big\"\n", 4, &["invalid type"]),
        ("[[device]]\nname = \"p\"\nkind = \"port\"\ncolour = \"red\"\n", 4, &["unknown field", "colour"]),
        ("mode = \"fast\"\n", 1, &["unknown mode", "fast"]),
        ("bogus = 1\n", 1, &["unknown field", "bogus"]),
        // names and kinds
        (
            &format!("{BASE}kind = \"vlan\"\nlower = \"p\"\nid = 1\n\n[[device]]\nname = \"p\"\nkind = \"port\"\n"),
            18,
            &["duplicate device name", "`p`", "line 4"],
        ),
        (&format!("{BASE}kind = \"router\"\n"), 13, &["unknown device kind", "router"]),
        (&format!("{BASE}kind = \"vlan\"\nlower = \"nope\"\nid = 3\n"), 14, &["unknown device `nope`"]),
        (&format!("{BASE}kind = \"vlan\"\nlower = \"p\"\nid = 4095\n"), 15, &["4095", "1..=4094"]),
        (&format!("{BASE}kind = \"vlan\"\nlower = \"p\"\nid = 7\nslaves = [\"q\"]\n"), 16, &["`slaves`", "vlan"]),
        (&format!("{BASE}kind = \"vlan\"\nlower = \"p\"\nprotocol = \"802.1x\"\nid = 7\n"), 15, &["802.1x"]),
        (&format!("{BASE}kind = \"vlan\"\nid = 7\n"), 13, &["needs `lower`"]),
        (
            &format!(
                "{BASE}kind = \"vlan\"\nlower = \"p\"\nid = 7\n\n[[device]]\nname = \"w\"\nkind = \"vlan\"\nlower = \"p\"\nid = 7\n"
            ),
            21,
            &["already has a VLAN device for 7"],
        ),
        // bonds, teams, bridges
        (&format!("{BASE}kind = \"bond\"\nmode = \"802.3ad\"\n"), 14, &["bond mode", "802.3ad"]),
        (&format!("{BASE}kind = \"bond\"\nxmit_hash_policy = \"layer5\"\n"), 14, &["layer5"]),
        (&format!("{BASE}kind = \"bond\"\nslaves = [\"p\", \"q\"]\nprimary = \"x\"\n"), 15, &["primary `x`"]),
        (
            &format!(
                "{BASE}kind = \"bond\"\nslaves = [\"p\"]\n\n[[device]]\nname = \"t\"\nkind = \"team\"\nports = [\"q\", \"p\"]\n"
            ),
            19,
            &["`p` is already a port of `v`"],
        ),
        (&format!("{BASE}kind = \"team\"\nrunner = \"broadcast\"\n"), 14, &["team runner", "broadcast"]),
        (
            &format!(
                "{BASE}kind = \"bridge\"\nports = [\n  \"p\",\n  {{ name = \"q\", pvid = 9, untagged = [10] }},\n]\n"
            ),
            16,
            &["pvid 9"],
        ),
        (&format!("{BASE}kind = \"bridge\"\nports = [{{ name = \"q\", tagged = [10, 5000] }}]\n"), 14, &["5000"]),
        (
            &format!("{BASE}kind = \"bridge\"\nports = [{{ name = \"q\", vlans = [10] }}]\n"),
            14,
            &["unknown field", "vlans"],
        ),
        (&format!("{BASE}kind = \"bridge\"\nageing = -3\n"), 14, &["ageing"]),
        (&format!("{BASE}kind = \"bond\"\nslaves = [\"v\"]\n"), 14, &["stacked on itself"]),
        (
            &format!(
                "{BASE}kind = \"vlan\"\nlower = \"w\"\nid = 1\n\n[[device]]\nname = \"w\"\nkind = \"vlan\"\nlower = \"v\"\nid = 2\n"
            ),
            12,
            &["stacking loop"],
        ),
        // ports
        (&format!("{BASE}kind = \"port\"\ndriver = \"tap\"\n"), 14, &["tap driver is a table", "name"]),
        (&format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tap\" }}\n"), 14, &["needs `name`"]),
        (&format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"af_packet\" }}\n"), 14, &["needs `interface`"]),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tap\", name = \"x0\", path = \"a.pcap\" }}\n"),
            14,
            &["`path` does not apply to a tap driver"],
        ),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"pcap\", path = \"a\", interface = \"veth9\" }}\n"),
            14,
            &["`interface` does not apply to a pcap driver"],
        ),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"memory\", path = \"a.pcap\" }}\n"),
            14,
            &["`path` does not apply to a memory driver"],
        ),
        (
            &format!(
                "{BASE}kind = \"port\"\ndriver = {{ kind = \"af_packet\", interface = \"veth9\", ring = 5000 }}\n"
            ),
            14,
            &["ring 5000 is outside 0..=4096"],
        ),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tap\", name = \"x0\", ring = 8 }}\n"),
            14,
            &["`ring` does not apply to a tap driver"],
        ),
        (&format!("{BASE}kind = \"port\"\ndriver = \"dpdk\"\n"), 14, &["unknown driver", "dpdk", "tun"]),
        // tun: the tap's keys, nothing else
        (&format!("{BASE}kind = \"port\"\ndriver = \"tun\"\n"), 14, &["tun driver is a table", "name"]),
        (&format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tun\" }}\n"), 14, &["needs `name`"]),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tun\", name = \"x0\",\n  interface = \"veth9\" }}\n"),
            15,
            &["`interface` does not apply to a tun driver"],
        ),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tun\", name = \"x0\", batch = 8 }}\n"),
            14,
            &["`batch` does not apply to a tun driver"],
        ),
        (
            &format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"tun\", name = \"x0\", colour = 1 }}\n"),
            14,
            &["unknown field", "colour"],
        ),
        (
            &format!(
                "{BASE}kind = \"port\"\ndriver = {{ kind = \"tun\", name = \"x0\",\n  offloads = [\"csum\",\n    \"lro\"] }}\n"
            ),
            16,
            &["unknown TUN offload `lro`", "csum, tso4, tso6, tso-ecn, uso"],
        ),
        (
            &format!(
                "{BASE}kind = \"port\"\ndriver = {{ kind = \"tun\", name = \"x0\",\n  netns = \"sp-no-such-namespace\" }}\n"
            ),
            15,
            &["tun driver: network namespace `sp-no-such-namespace`"],
        ),
        (&format!("{BASE}kind = \"port\"\ndriver = {{ kind = \"pcap\" }}\n"), 14, &["needs `path`"]),
        (&format!("{BASE}kind = \"port\"\nfeatures_check = \"maybe\"\n"), 14, &["features_check", "maybe"]),
        (
            &format!("{BASE}kind = \"port\"\nfeatures = {{ tx-tcp-segmentation = false,\n  tx-warp-drive = true }}\n"),
            15,
            &["unknown feature `tx-warp-drive`"],
        ),
        (&format!("{BASE}kind = \"port\"\nfeatures = {{ tso = \"no\" }}\n"), 14, &["invalid type"]),
        (&format!("{BASE}kind = \"port\"\nmtu = 20\n"), 14, &["MTU 20"]),
        (&format!("{BASE}kind = \"port\"\nmac = \"01:00:5e:00:00:01\"\n"), 14, &["not unicast"]),
        (&format!("{BASE}kind = \"port\"\nmac = \"02:00:00:00:00\"\n"), 14, &["bad MAC"]),
        (&format!("{BASE}kind = \"port\"\naddresses = [\"10.0.0.1/24\", \"10.0.0.300/24\"]\n"), 14, &["10.0.0.300"]),
        // routes, neighbours, NAT, conntrack
        (
            &format!("{BASE}kind = \"port\"\n\n[[route]]\nto = \"10.1.0.0/16\"\ndev = \"zz\"\n"),
            17,
            &["unknown device `zz`"],
        ),
        (&format!("{BASE}kind = \"port\"\n\n[[route]]\nto = \"10.1.0.1/16\"\ndev = \"v\"\n"), 16, &["host bits"]),
        (
            &format!("{BASE}kind = \"port\"\n\n[[route]]\nto = \"default\"\nvia = \"2001:db8::1\"\ndev = \"v\"\n"),
            17,
            &["IP versions"],
        ),
        (&format!("{BASE}kind = \"port\"\n\n[[neighbour]]\naddress = \"10.0.0.9\"\nmac = \"zz\"\n"), 17, &["bad MAC"]),
        (&format!("{BASE}kind = \"port\"\n\n[[nat]]\ntype = \"redirect\"\n"), 16, &["unknown NAT type", "redirect"]),
        (&format!("{BASE}kind = \"port\"\n\n[[nat]]\ntype = \"masquerade\"\nout = \"v\"\n"), 17, &["no address"]),
        (
            &format!("{BASE}kind = \"port\"\naddresses = [\"10.0.0.1/24\"]\n\n[[nat]]\ntype = \"snat\"\nout = \"v\"\n"),
            17,
            &["needs `to`"],
        ),
        (
            &format!(
                "{BASE}kind = \"port\"\naddresses = [\"10.0.0.1/24\"]\n\n[[nat]]\ntype = \"dnat\"\nprotocol = \"icmp\"\nport = 1\nto = \"10.0.0.2\"\n"
            ),
            18,
            &["unknown protocol", "icmp"],
        ),
        (
            &format!(
                "{BASE}kind = \"port\"\naddresses = [\"10.0.0.1/24\"]\n\n[[nat]]\ntype = \"dnat\"\nprotocol = \"tcp\"\nport = 70000\nto = \"10.0.0.2\"\n"
            ),
            19,
            &["70000"],
        ),
        (&format!("{BASE}kind = \"port\"\n\n[conntrack]\nmax_connections = 0\n"), 16, &["at least 1"]),
        (&format!("{BASE}kind = \"port\"\n\n[conntrack]\nudp_replied = 0\n"), 16, &["timeout"]),
        (&format!("{BASE}kind = \"port\"\n\n[reassembly]\nmax_bytes = 1000\n"), 16, &["at least 65536"]),
        (&format!("{BASE}kind = \"port\"\n\n[reassembly]\nmax_queues = 0\n"), 16, &["at least 1"]),
        (&format!("{BASE}kind = \"port\"\n\n[reassembly]\ntimeout = -1\n"), 16, &["timeout"]),
    ];
    for (i, (src, line, words)) in cases.iter().enumerate() {
        let err = match Topology::parse(src).and_then(|t| t.build()) {
            Ok(_) => panic!("case {i} built:\n{src}"),
            Err(e) => e,
        };
        let text = err.to_string();
        if text.contains("is not built in")
            && !cfg!(all(feature = "tap", feature = "tun", feature = "af-packet", feature = "vhost-user"))
        {
            // A build without this driver: its feature check speaks first.
            continue;
        }
        assert_eq!(err.line, *line, "case {i}: {err}\n{src}");
        assert!(text.starts_with(&format!("line {line}: ")), "case {i}: {text}");
        for w in *words {
            assert!(text.contains(w), "case {i}: {text:?} lacks {w:?}");
        }
    }
}

#[test]
fn a_driver_whose_feature_is_not_built_is_refused_naming_the_feature() {
    for (kind, feature, built) in super::topology::DRIVER_FEATURES {
        let src = format!(
            "mode = \"passthrough\"\n\n[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {{ kind = \"{kind}\" }}\n"
        );
        let t = Topology::parse(&src).unwrap();
        if built {
            // Built: the driver's own checks speak (none of them about features).
            let err = t.build().map(|_| ()).unwrap_err();
            assert!(!err.to_string().contains("not built in"), "{kind}: {err}");
            continue;
        }
        let err = t.build().map(|_| ()).unwrap_err();
        assert_eq!(err.line, 6, "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "line 6: driver kind \"{kind}\" is not built in: enable the superpacket-engine feature \"{feature}\""
            )
        );
    }
}

/// The retired `pv` port: every way of naming it, old keys included, is
/// refused at its `kind` naming the vhost-user replacement; a crate that
/// registers a kind of that name gets its own driver.
#[test]
fn a_retired_pv_driver_is_refused_naming_vhost_user() {
    for driver in [
        r#"{ kind = "pv", socket = "pv0.sock" }"#,
        r#"{ kind = "pv", socket = "pv0.sock", strategy = "swcsum-direct", header_info = false, ring = 256 }"#,
        r#""pv""#,
    ] {
        let src = format!("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {driver}\n");
        let err = Topology::parse(&src).and_then(|t| t.build()).map(|_| ()).unwrap_err();
        let text = err.to_string();
        assert_eq!(err.line, 4, "{text}");
        assert!(
            text.starts_with("line 4: driver kind \"pv\" (the home-made shared-memory port) is retired: "),
            "{text}"
        );
        for w in ["kind = \"vhost-user\"", "virtio_user::VirtioUser", "docs/topology.md"] {
            assert!(text.contains(w), "{text:?} lacks {w:?}");
        }
    }
    let mut opts = BuildOptions::default();
    opts.drivers.register("pv", counting);
    let mut g = Topology::parse("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = \"pv\"\n")
        .unwrap()
        .build_with(&opts)
        .unwrap();
    let p = g.id("p").unwrap();
    assert!(g.driver_mut::<Counting>(p).is_some());
}

#[test]
fn line_col_counts_from_one() {
    assert_eq!(line_col("ab\ncd\n", 0), (1, 1));
    assert_eq!(line_col("ab\ncd\n", 4), (2, 2));
    assert_eq!(line_col("ab\ncd\n", 99), (3, 1));
}

#[test]
fn feature_overrides_use_ethtool_names() {
    let src = "[[device]]\nname = \"p\"\nkind = \"port\"\nfeatures = { tx-tcp-segmentation = false, \"tx-checksum-ip-generic\" = true }\n\n[[device]]\nname = \"p.1\"\nkind = \"vlan\"\nlower = \"p\"\nid = 1\nfeatures = { tx-udp-segmentation = false }\n";
    let g = load(src).unwrap();
    let p = g.device(g.id("p").unwrap()).feat.features;
    assert!(!p.contains(F::TSO) && p.contains(F::TSO6 | F::HW_CSUM));
    let v = g.device(g.id("p.1").unwrap()).feat.features;
    assert!(!v.contains(F::GSO_UDP_L4) && v.contains(F::TSO6));
}

#[test]
fn the_complete_example_in_the_documentation_builds() {
    let doc = include_str!("../../../../docs/topology.md");
    let start = doc.find("## A complete example").expect("section");
    let body = &doc[start..];
    let open = body.find("```toml\n").expect("toml block") + "```toml\n".len();
    let len = body[open..].find("```").expect("closed");
    let dir = tempfile::tempdir().unwrap();
    let opts = BuildOptions { base_dir: Some(dir.path().to_path_buf()), ..BuildOptions::default() };
    let g = Topology::parse(&body[open..open + len]).unwrap().build_with(&opts).unwrap();
    assert!(dir.path().join("wan.pcapng").exists(), "the pcap port created its file");
    let wan = g.id("wan").unwrap();
    assert!(!g.device(wan).feat.features.contains(F::GSO_UDP_L4));
    assert_eq!(g.router().unwrap().nat.rules.len(), 2);
}

#[test]
fn load_file_resolves_pcap_paths_next_to_the_file_and_reports_io_errors_without_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(
        &path,
        "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = { kind = \"pcap\", path = \"p.pcapng\" }\n",
    )
    .unwrap();
    let g = super::topology::load_file(&path).unwrap();
    assert!(g.id("p").is_some() && dir.path().join("p.pcapng").exists());
    let e = super::topology::load_file(&dir.path().join("missing.toml")).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e.to_string().contains("missing.toml") && !e.to_string().starts_with("line"));
    // A capture to receive from that does not exist: the `input` line.
    std::fs::write(
        &path,
        "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = { kind = \"pcap\", path = \"p.pcapng\",\n  input = \"nope.pcap\" }\n",
    )
    .unwrap();
    let e = super::topology::load_file(&path).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
}

/// A third-party driver, as another crate would write it: keeps the first
/// `limit` frames it is given and refuses the rest.
#[derive(Debug)]
struct Counting {
    limit: usize,
    kept: Vec<superpacket::packet::Packet>,
    refused: u64,
    /// Where segmented frames would go (the port offers every offload, so
    /// whole packets reach `xmit`).
    segments: MemoryDriver,
}

impl PortDriver for Counting {
    fn kind(&self) -> &'static str {
        "counting"
    }
    fn hw_features(&self) -> NetdevFeatures {
        NetdevFeatures::FULL_NIC
    }
    fn xmit(&mut self, pkt: superpacket::packet::Packet) -> Result<(), DriverError> {
        if self.kept.len() == self.limit {
            self.refused += 1;
            return Err(DriverError::new("counting-limit", "limit reached"));
        }
        self.kept.push(pkt);
        Ok(())
    }
    fn sink(&mut self) -> &mut dyn superpacket::offload::gso::SegmentSink {
        &mut self.segments
    }
    fn recv(&mut self) -> Option<superpacket::packet::Packet> {
        None
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The factory of `counting`: `limit` (a positive integer, default 1) is its only key.
fn counting(cx: &DriverContext<'_>, _: &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> {
    cx.deny_unknown_keys(&["limit"])?;
    let limit = match cx.keys().get("limit") {
        None => 1,
        Some(v) => v.as_integer().ok_or_else(|| cx.key_error("limit", "`limit` is an integer"))?,
    };
    if limit < 1 {
        // A plain message: placed at the driver's `kind`.
        return Err(format!("a counting port keeps at least one frame (limit = {limit})").into());
    }
    Ok(Box::new(Counting { limit: limit as usize, kept: Vec::new(), refused: 0, segments: MemoryDriver::full() }))
}

fn with_counting() -> BuildOptions {
    let mut drivers = DriverRegistry::builtin();
    drivers.register("counting", counting);
    BuildOptions { drivers, ..BuildOptions::default() }
}

const COUNTING: &str = r#"[[device]]
name = "out"
kind = "port"
driver = { kind = "counting", limit = 3 }

[[device]]
name = "out.7"
kind = "vlan"
lower = "out"
id = 7
"#;

#[test]
fn a_registered_third_party_driver_gets_what_the_graph_transmits() {
    let t = Topology::parse(COUNTING).unwrap();
    let Some(DriverSpec::Custom(table)) = t.spec.devices[0].driver.as_ref().map(|d| d.get_ref()) else {
        panic!("a kind that is not built in keeps its keys: {:?}", t.spec.devices[0].driver)
    };
    assert_eq!((table.kind.get_ref().as_str(), table.keys.get("limit")), ("counting", Some(&toml::Value::Integer(3))));

    let mut g = t.build_with(&with_counting()).unwrap();
    let (out, vlan) = (g.id("out").unwrap(), g.id("out.7").unwrap());
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    frame.resize(60, 0xab);
    for _ in 0..5 {
        g.transmit(vlan, superpacket::packet::Packet::from_frame(&frame));
    }
    let d = g.driver_mut::<Counting>(out).expect("the port's driver is the registered one");
    assert_eq!((d.kept.len(), d.refused), (3, 2));
    let sent = d.kept[0].linear();
    assert_eq!(sent.len(), 64, "tagged by out.7");
    assert_eq!(sent[12..16], [0x81, 0x00, 0x00, 0x07]);
    assert_eq!(sent[16..18], [0x88, 0xb5]);
}

#[test]
fn third_party_driver_errors_name_the_line() {
    // (driver value on line 4, line, column, exact message)
    let cases: &[(&str, usize, usize, &str)] = &[
        ("{ kind = \"counting\",\n  limit = \"three\" }", 5, 3, "`limit` is an integer"),
        ("{ kind = \"counting\", limit = 0 }", 4, 19, "a counting port keeps at least one frame (limit = 0)"),
        ("{ kind = \"counting\",\n    colour = 1 }", 5, 5, "unknown field `colour`, expected `limit`"),
    ];
    for (driver, line, column, message) in cases {
        let src = format!("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {driver}\n");
        let err = Topology::parse(&src).unwrap().build_with(&with_counting()).map(|_| ()).unwrap_err();
        assert_eq!((err.line, err.column, err.message.as_str()), (*line, *column, *message), "{src}");
    }
    // Without the registration: unknown, and the error lists what is registered.
    let src = COUNTING.replace("\n\n[[device]]\nname = \"out.7\"", "\n\n[[device]]\nname = \"x\"");
    let src = src.replace("kind = \"vlan\"\nlower = \"out\"\nid = 7\n", "kind = \"port\"\ndriver = \"nic9\"\n");
    let err = Topology::parse(&src).unwrap().build_with(&with_counting()).map(|_| ()).unwrap_err();
    let mut kinds = DriverRegistry::builtin().kinds().join(", ");
    kinds += ", counting";
    assert_eq!((err.line, err.column), (9, 10), "{err}");
    assert!(err.message.starts_with(&format!("unknown driver `nic9` ({kinds}")), "{err}");
    let err = Topology::parse(COUNTING).unwrap().build().map(|_| ()).unwrap_err();
    assert_eq!((err.line, err.column), (4, 19), "{err}");
    assert!(err.message.starts_with("unknown driver `counting` (memory, pcap"), "{err}");
    // Still a port-only key.
    let src = "[[device]]\nname = \"p\"\nkind = \"port\"\n\n[[device]]\nname = \"b\"\nkind = \"bridge\"\ndriver = { kind = \"counting\" }\n";
    let err = Topology::parse(src).unwrap().build_with(&with_counting()).map(|_| ()).unwrap_err();
    assert_eq!(err.to_string(), "line 8: key `driver` does not apply to a bridge device");
}

#[test]
fn built_in_drivers_keep_their_strict_keys() {
    // The key a built-in driver does not know is refused while parsing, at the key.
    let src = "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = { kind = \"tun\", name = \"x0\", colour = 1 }\n";
    let err = Topology::parse(src).unwrap_err();
    assert_eq!((err.line, err.column), (4, 39), "{err}");
    assert!(err.message.starts_with("unknown field `colour`, expected one of `kind`, `path`"), "{err}");
    // Keys of another kind: at the key, whatever the registry holds.
    let src = "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = { kind = \"memory\", path = \"a.pcap\" }\n";
    let err = Topology::parse(src).unwrap().build_with(&with_counting()).map(|_| ()).unwrap_err();
    assert_eq!((err.line, err.column), (4, 29), "{err}");
    // A third-party kind may use any key, of any type, a built-in driver also has.
    let src = "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = { kind = \"counting\", name = 5, limit = 2 }\n";
    let t = Topology::parse(src).unwrap();
    let Some(DriverSpec::Custom(table)) = t.spec.devices[0].driver.as_ref().map(|d| d.get_ref()) else { panic!() };
    assert_eq!(table.keys.get("name"), Some(&toml::Value::Integer(5)));
    let err = t.build_with(&with_counting()).map(|_| ()).unwrap_err();
    assert_eq!((err.line, err.column, err.message.as_str()), (4, 31, "unknown field `name`, expected `limit`"));
}

#[test]
fn the_registry_holds_the_built_in_kinds_and_registering_replaces() {
    let built: Vec<&str> = ["memory", "pcap"]
        .into_iter()
        .chain(super::topology::DRIVER_FEATURES.iter().filter(|(.., built)| *built).map(|(k, ..)| *k))
        .collect();
    assert_eq!(DriverRegistry::default().kinds(), built);
    // A port without `driver` is a `memory` port: whatever `memory` is registered as.
    let mut opts = with_counting();
    opts.drivers.register("memory", counting);
    assert_eq!(opts.drivers.kinds()[0], "memory", "replaced in place");
    let mut g = Topology::parse("[[device]]\nname = \"p\"\nkind = \"port\"\n").unwrap().build_with(&opts).unwrap();
    let p = g.id("p").unwrap();
    assert!(g.driver_mut::<Counting>(p).is_some());
    assert!(format!("{opts:?}").contains("\"counting\""));
    let err = load("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = \"nic9\"\n").map(|_| ()).unwrap_err();
    assert!(opts.drivers.contains("counting") && !DriverRegistry::builtin().contains("counting"));
    assert_eq!(err.line, 4);
}

#[cfg(feature = "vhost-user")]
#[test]
fn a_vhost_user_busy_poll_window_is_bounded_and_other_kinds_refuse_it() {
    let build = |driver: &str| {
        let src = format!("[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = {driver}\n");
        Topology::parse(&src).and_then(|t| t.build()).map(|_| ()).unwrap_err().to_string()
    };
    let text = build(r#"{ kind = "vhost-user", socket = "/nonexistent-dir/vu.sock", busy_poll_us = 100001 }"#);
    assert!(text.contains("busy_poll_us 100001 is above 100000"), "{text}");
    let text = build(r#"{ kind = "tap", name = "sp-nonexistent", busy_poll_us = 10 }"#);
    assert!(text.contains("key `busy_poll_us` does not apply to a tap driver"), "{text}");
}
