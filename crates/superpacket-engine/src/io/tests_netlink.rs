//! Netlink, namespace and ethtool-ioctl plumbing, cross-checked against
//! what `ip -j` and `ethtool -k` report (the tests may start the tools; the
//! code under test never does). Root only; every namespace and link is the
//! test's own, removed on drop also when an assertion fails.

use super::netlink::Netlink;
use super::netns::{NETNS_RUN_DIR, create_named, delete_named};
use super::*;
use serde_json::Value;
use std::net::IpAddr;
use std::process::Command;

/// `ip -n NS -j ARGS...` as JSON.
fn ip_json(ns: &NetNs, args: &[&str]) -> Value {
    let out = Command::new("ip").args(["-n", ns.name(), "-j"]).args(args).output().expect("ip");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Array(Vec::new()))
}

fn link(ns: &NetNs, dev: &str) -> Value {
    let v = ip_json(ns, &["-d", "link", "show", "dev", dev]);
    v[0].clone()
}

fn flags(link: &Value) -> Vec<String> {
    link["flags"].as_array().unwrap().iter().map(|f| f.as_str().unwrap().to_string()).collect()
}

fn ethtool_k(ns: &NetNs, dev: &str) -> String {
    let out = Command::new("ip").args(["netns", "exec", ns.name(), "ethtool", "-k", dev]).output().expect("ethtool");
    assert!(out.status.success(), "ethtool -k {dev}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ip_netns_list() -> String {
    String::from_utf8_lossy(&Command::new("ip").args(["netns", "list"]).output().expect("ip netns list").stdout)
        .into_owned()
}

#[test]
fn namespaces_are_made_and_removed_as_ip_netns_does() {
    if !require_privileges() {
        return;
    }
    let ns = NetNs::create("spnl").unwrap();
    let name = ns.name().to_string();
    assert!(ip_netns_list().lines().any(|l| l.split_whitespace().next() == Some(name.as_str())));
    // The loopback is up, and `ip netns exec` enters the same namespace.
    assert!(flags(&link(&ns, "lo")).contains(&"UP".to_string()));
    // A second namespace of the same name is refused.
    let again = create_named(&name).unwrap_err();
    assert_eq!(again.raw_os_error(), Some(libc::EEXIST), "{again}");
    drop(ns);
    assert!(!std::path::Path::new(&format!("{NETNS_RUN_DIR}/{name}")).exists());
    assert!(!ip_netns_list().lines().any(|l| l.split_whitespace().next() == Some(name.as_str())));
    assert!(delete_named(&name).is_err(), "deleting twice fails");
}

#[test]
fn links_addresses_routes_and_neighbours_match_ip() {
    if !require_privileges() {
        return;
    }
    let a = NetNs::create("spnl").unwrap();
    let b = NetNs::create("spnl").unwrap();
    let veth = VethPair::create(&a, "spnl0", &b, "spnl1").unwrap();
    let l = link(&a, "spnl0");
    assert_eq!(l["linkinfo"]["info_kind"], "veth");
    assert_eq!(link(&b, "spnl1")["linkinfo"]["info_kind"], "veth");
    assert!(!a.netlink().unwrap().link_exists("spnl1").unwrap(), "the peer is created in b only");

    // MTU, MAC, promiscuity, up/down.
    a.set_mtu("spnl0", 1400).unwrap();
    a.set_mac("spnl0", [0x02, 0x5e, 0x10, 0, 0, 1]).unwrap();
    a.set_promisc("spnl0", true).unwrap();
    a.link_up("spnl0").unwrap();
    b.link_up("spnl1").unwrap();
    let l = link(&a, "spnl0");
    assert_eq!(l["mtu"], 1400);
    assert_eq!(l["address"], "02:5e:10:00:00:01");
    assert_eq!(l["promiscuity"], 1);
    assert!(flags(&l).contains(&"UP".to_string()) && flags(&l).contains(&"PROMISC".to_string()), "{l}");
    assert_eq!(a.read_sysfs("spnl0", "mtu").unwrap(), "1400");
    assert_eq!(a.read_sysfs("spnl0", "address").unwrap(), "02:5e:10:00:00:01");
    a.set_promisc("spnl0", false).unwrap();
    assert_eq!(link(&a, "spnl0")["promiscuity"], 0);

    // Addresses, v4 and v6.
    a.add_addr("spnl0", "10.231.0.1/24").unwrap();
    a.add_addr("spnl0", "fd00:231::1/64").unwrap();
    let addrs = ip_json(&a, &["addr", "show", "dev", "spnl0"]);
    let infos: Vec<(String, u64)> = addrs[0]["addr_info"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["local"].as_str().unwrap().to_string(), i["prefixlen"].as_u64().unwrap()))
        .collect();
    assert!(infos.contains(&("10.231.0.1".into(), 24)), "{infos:?}");
    assert!(infos.contains(&("fd00:231::1".into(), 64)), "{infos:?}");
    let dup = a.add_addr("spnl0", "10.231.0.1/24").unwrap_err();
    assert_eq!(dup.raw_os_error(), Some(libc::EEXIST), "{dup}");

    // Routes: via a gateway and on a device, v4 and v6.
    let mut nl = a.netlink().unwrap();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    nl.add_route(ip("10.232.0.0"), 24, Some(ip("10.231.0.2")), None).unwrap();
    nl.add_route(ip("10.233.0.0"), 16, None, Some("spnl0")).unwrap();
    nl.add_route(ip("fd00:232::"), 64, Some(ip("fd00:231::2")), Some("spnl0")).unwrap();
    let v4 = ip_json(&a, &["route", "show"]);
    let find = |routes: &Value, dst: &str| routes.as_array().unwrap().iter().find(|r| r["dst"] == dst).cloned();
    let r = find(&v4, "10.232.0.0/24").expect("route via");
    assert_eq!(r["gateway"], "10.231.0.2");
    assert_eq!(r["dev"], "spnl0");
    let r = find(&v4, "10.233.0.0/16").expect("route dev");
    assert_eq!(r["scope"], "link");
    let v6 = ip_json(&a, &["-6", "route", "show"]);
    assert_eq!(find(&v6, "fd00:232::/64").expect("v6 route")["gateway"], "fd00:231::2");
    let unreachable = nl.add_route(ip("10.234.0.0"), 24, Some(ip("192.0.2.1")), None).unwrap_err();
    assert_eq!(unreachable.raw_os_error(), Some(libc::ENETUNREACH), "{unreachable}");

    // Neighbours.
    nl.add_neighbour("spnl0", ip("10.231.0.9"), [0x02, 0, 0, 0, 0, 9]).unwrap();
    nl.add_neighbour("spnl0", ip("fd00:231::9"), [0x02, 0, 0, 0, 0, 0x19]).unwrap();
    let neigh = ip_json(&a, &["neigh", "show", "dev", "spnl0"]);
    let entry = |dst: &str| neigh.as_array().unwrap().iter().find(|n| n["dst"] == dst).cloned().expect(dst);
    assert_eq!(entry("10.231.0.9")["lladdr"], "02:00:00:00:00:09");
    assert_eq!(entry("10.231.0.9")["state"][0], "PERMANENT");
    assert_eq!(entry("fd00:231::9")["lladdr"], "02:00:00:00:00:19");

    // Bridge, enslave, release; move a link between namespaces; delete.
    let mut nlb = b.netlink().unwrap();
    nlb.add_bridge("spnlbr").unwrap();
    assert_eq!(link(&b, "spnlbr")["linkinfo"]["info_kind"], "bridge");
    nlb.set_master("spnl1", Some("spnlbr")).unwrap();
    assert_eq!(link(&b, "spnl1")["master"], "spnlbr");
    nlb.set_master("spnl1", None).unwrap();
    assert!(link(&b, "spnl1").get("master").is_none());
    nl.add_veth("spnl2", "spnl3", None).unwrap();
    assert_eq!(link(&a, "spnl3")["linkinfo"]["info_kind"], "veth");
    nl.set_netns("spnl3", b.fd()).unwrap();
    assert!(!nl.link_exists("spnl3").unwrap());
    assert!(nlb.link_exists("spnl3").unwrap());
    assert_eq!(link(&b, "spnl3")["linkinfo"]["info_kind"], "veth");
    nl.del_link("spnl2").unwrap();
    assert!(!nlb.link_exists("spnl3").unwrap(), "deleting one end removes both");
    nlb.del_link("spnlbr").unwrap();
    assert!(!nlb.link_exists("spnlbr").unwrap());
    a.link_down("spnl0").unwrap();
    assert!(!flags(&link(&a, "spnl0")).contains(&"UP".to_string()));

    // Errors carry the errno and what was asked.
    let missing = nl.link_index("spnl9").unwrap_err();
    assert_eq!(missing.raw_os_error(), Some(libc::ENODEV));
    assert!(missing.to_string().contains("spnl9"), "{missing}");
    let taken = nl.add_veth("spnl0", "spnl4", None).unwrap_err();
    assert_eq!(taken.raw_os_error(), Some(libc::EEXIST), "{taken}");

    // A veth in the namespace of the current thread (in_netns).
    let name = a.name().to_string();
    netlink::in_netns(&name, || {
        let mut nl = Netlink::open()?;
        nl.add_veth("spnl5", "spnl6", None)?;
        nl.set_up("spnl5", true)
    })
    .unwrap();
    assert!(flags(&link(&a, "spnl5")).contains(&"UP".to_string()));

    drop(veth);
    assert!(!a.netlink().unwrap().link_exists("spnl0").unwrap(), "VethPair removed on drop");
    assert!(!b.netlink().unwrap().link_exists("spnl1").unwrap());
}

#[test]
fn offload_features_match_ethtool() {
    if !require_privileges() {
        return;
    }
    let a = NetNs::create("spnl").unwrap();
    let b = NetNs::create("spnl").unwrap();
    let _veth = VethPair::create(&a, "spnl0", &b, "spnl1").unwrap();
    // The same text as `ethtool -k`.
    assert_eq!(a.offloads("spnl0").unwrap(), ethtool_k(&a, "spnl0"));
    // Aliases and single features, on and off.
    a.set_offloads("spnl0", &[("tso", "off"), ("tx-udp-segmentation", "off")]).unwrap();
    let text = ethtool_k(&a, "spnl0");
    assert!(text.contains("tcp-segmentation-offload: off\n"), "{text}");
    assert!(text.contains("\ttx-tcp-segmentation: off\n"), "{text}");
    assert!(text.contains("\ttx-tcp6-segmentation: off\n"), "{text}");
    assert!(text.contains("tx-udp-segmentation: off\n"), "{text}");
    assert_eq!(a.offloads("spnl0").unwrap(), text);
    a.set_offloads("spnl0", &[("rx-udp-gro-forwarding", "on"), ("gro", "on")]).unwrap();
    let f = a.features("spnl0").unwrap();
    assert!(f.is_active("rx-udp-gro-forwarding") && f.is_active("rx-gro"));
    assert!(ethtool_k(&a, "spnl0").contains("rx-udp-gro-forwarding: on\n"));
    a.set_offloads("spnl0", &[("tx", "off")]).unwrap();
    let text = ethtool_k(&a, "spnl0");
    assert!(text.contains("tx-checksumming: off\n"), "{text}");
    assert_eq!(a.offloads("spnl0").unwrap(), text);
    // A feature turned on that depends on one off: requested, not active, as ethtool shows it.
    a.set_offloads("spnl0", &[("tso", "on")]).unwrap();
    assert_eq!(a.offloads("spnl0").unwrap(), ethtool_k(&a, "spnl0"));
    // Unknown and fixed features are refused.
    assert!(a.set_offloads("spnl0", &[("no-such-feature", "on")]).is_err());
    assert!(a.set_offloads("spnl0", &[("tso", "maybe")]).is_err());
    let fixed = a.features("spnl0").unwrap().features.into_iter().find(|f| f.fixed() && !f.active).unwrap();
    assert!(a.set_offloads("spnl0", &[(&fixed.name, "on")]).is_err(), "{} is fixed", fixed.name);
}

#[test]
fn sysctl_and_sysfs_stay_inside_the_namespace() {
    if !require_privileges() {
        return;
    }
    let sys_before = sys_mounts();
    let a = NetNs::create("spnl").unwrap();
    let host_before = std::fs::read_to_string("/proc/sys/net/ipv6/conf/default/disable_ipv6").unwrap();
    a.disable_ipv6().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", a.name(), "cat", "/proc/sys/net/ipv6/conf/default/disable_ipv6"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    assert_eq!(std::fs::read_to_string("/proc/sys/net/ipv6/conf/default/disable_ipv6").unwrap(), host_before);
    // /sys/class/net of the namespace: its loopback, and none of the host's links.
    assert_eq!(a.read_sysfs("lo", "mtu").unwrap(), "65536");
    assert!(a.read_sysfs("eth0", "mtu").is_err(), "the host's eth0 is not visible");
    // Nothing leaked into the caller's mount namespace.
    assert_eq!(sys_mounts(), sys_before);
}

fn sys_mounts() -> usize {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    mounts.lines().filter(|l| l.split_whitespace().nth(4) == Some("/sys")).count()
}

#[cfg(feature = "tap")]
#[test]
fn lab_plumbing_matches_ip() {
    if !require_privileges() {
        return;
    }
    let a = NetNs::create("spnl").unwrap();
    // A persistent TAP with a virtio-net header, as `ip tuntap add ... vnet_hdr` makes it.
    a.create_persistent_tap("spnltap").unwrap();
    let l = link(&a, "spnltap");
    assert_eq!(l["linkinfo"]["info_kind"], "tun", "{l}");
    assert_eq!(l["linkinfo"]["info_data"]["type"], "tap", "{l}");
    assert_eq!(l["linkinfo"]["info_data"]["vnet_hdr"], true, "{l}");
    assert_eq!(l["linkinfo"]["info_data"]["persist"], true, "{l}");
    a.add_addr("spnltap", "10.235.0.2/24").unwrap();
    a.add_addr_nodad("spnltap", "fd00:235::2/64").unwrap();
    a.link_up("spnltap").unwrap();
    let addrs = ip_json(&a, &["-6", "addr", "show", "dev", "spnltap"]);
    let v6 = addrs[0]["addr_info"].as_array().unwrap().iter().find(|i| i["local"] == "fd00:235::2").cloned().unwrap();
    assert_eq!(v6["nodad"], true, "{v6}");
    // Default routes of both families, a device route, and its removal.
    a.add_route("default", Some("10.235.0.1"), None).unwrap();
    a.add_route("default", Some("fd00:235::1"), None).unwrap();
    a.add_route("10.236.0.0/24", None, Some("spnltap")).unwrap();
    let v4 = ip_json(&a, &["route", "show"]);
    let default = v4.as_array().unwrap().iter().find(|r| r["dst"] == "default").cloned().unwrap();
    assert_eq!(default["gateway"], "10.235.0.1");
    let v6 = ip_json(&a, &["-6", "route", "show"]);
    let default6 = v6.as_array().unwrap().iter().find(|r| r["dst"] == "default").cloned().unwrap();
    assert_eq!(default6["gateway"], "fd00:235::1");
    assert!(v4.as_array().unwrap().iter().any(|r| r["dst"] == "10.236.0.0/24"));
    a.del_route("10.236.0.0/24", None, Some("spnltap")).unwrap();
    assert!(!ip_json(&a, &["route", "show"]).as_array().unwrap().iter().any(|r| r["dst"] == "10.236.0.0/24"));
    let gone = a.del_route("10.236.0.0/24", None, Some("spnltap")).unwrap_err();
    assert_eq!(gone.raw_os_error(), Some(libc::ESRCH), "{gone}");
    // Neighbour lookup, as `ip neigh show IP`.
    let ip: IpAddr = "10.235.0.7".parse().unwrap();
    assert_eq!(a.neighbour_mac(ip).unwrap(), None);
    a.netlink().unwrap().add_neighbour("spnltap", ip, [0x02, 0, 0, 0, 0, 7]).unwrap();
    assert_eq!(a.neighbour_mac(ip).unwrap(), Some([0x02, 0, 0, 0, 0, 7]));
    // The persistent TAP is deleted like any link.
    a.netlink().unwrap().del_link("spnltap").unwrap();
    assert!(!a.netlink().unwrap().link_exists("spnltap").unwrap());
}

#[test]
#[cfg(feature = "tap")]
fn test_plumbing_matches_ip() {
    if !require_privileges() {
        return;
    }
    let a = NetNs::create("spnl").unwrap();
    // A multi-queue persistent TAP (`ip tuntap add ... multi_queue vnet_hdr`).
    a.create_persistent_tap_with(&tap::TapConfig { multi_queue: true, ..tap::TapConfig::named("spnlmq") }).unwrap();
    let l = link(&a, "spnlmq");
    assert_eq!(l["linkinfo"]["info_data"]["multi_queue"], true, "{l}");
    // Link state as `ip link show` flags and `state` report them.
    let down = a.link_state("spnlmq").unwrap();
    assert!(!down.up && !down.oper_up, "{down:?}");
    // A veth with its MTU set at creation, inside the namespace.
    a.add_veth("spnlv1", "spnlv2", Some(1600)).unwrap();
    for dev in ["spnlv1", "spnlv2"] {
        assert_eq!(link(&a, dev)["mtu"], 1600, "{dev}");
        assert_eq!(a.link_state(dev).unwrap().mtu, Some(1600));
    }
    a.link_up("spnlv1").unwrap();
    a.link_up("spnlv2").unwrap();
    let t0 = std::time::Instant::now();
    while !a.link_state("spnlv1").unwrap().oper_up {
        assert!(t0.elapsed() < std::time::Duration::from_secs(5), "the veth never came up");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let l = link(&a, "spnlv1");
    assert!(flags(&l).contains(&"UP".to_string()) && l["operstate"] == "UP", "{l}");
    assert!(a.link_state("spnlv1").unwrap().up);
    // Neighbours: add refuses an existing entry, replace overwrites it.
    a.add_neighbour("spnlv1", "10.237.0.9", [0x02, 0, 0, 0, 0, 9]).unwrap();
    let again = a.add_neighbour("spnlv1", "10.237.0.9", [0x02, 0, 0, 0, 0, 10]).unwrap_err();
    assert_eq!(again.raw_os_error(), Some(libc::EEXIST), "{again}");
    a.replace_neighbour("spnlv1", "10.237.0.9", [0x02, 0, 0, 0, 0, 10]).unwrap();
    let n = ip_json(&a, &["neigh", "show", "10.237.0.9"]);
    assert_eq!(n[0]["lladdr"], "02:00:00:00:00:0a", "{n}");
    assert!(n[0]["state"].as_array().unwrap().iter().any(|s| s == "PERMANENT"), "{n}");
    assert!(a.add_neighbour("spnlv1", "not-an-ip", [0; 6]).is_err());
    // Counters from sysfs, as `cat /sys/class/net/DEV/statistics/...` inside the namespace.
    let tx = a.link_statistic("spnlv1", "tx_packets").unwrap();
    let stats = ip_json(&a, &["-s", "link", "show", "dev", "spnlv1"]);
    assert!(stats[0]["stats64"]["tx"]["packets"].as_u64().unwrap() >= tx, "{stats}");
    assert!(a.link_statistic("spnlv1", "no_such_counter").is_err());
    // Deletion: a veth goes with its peer.
    a.del_link("spnlv1").unwrap();
    assert!(!a.link_exists("spnlv2").unwrap());
    a.del_link("spnlmq").unwrap();
    assert!(!a.link_exists("spnlmq").unwrap());
    assert!(a.del_link("spnlmq").is_err());
}
