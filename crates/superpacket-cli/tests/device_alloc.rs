//! The passthrough transmit path of a VLAN-on-bond stack (and of a VLAN on
//! a team) makes no heap allocation per packet after warm-up
//! (docs/DEVELOPING.md: hot paths allocate nothing per packet): superpackets
//! descend the stack whole, the VLAN device pushes its tag into headroom,
//! the bond/team picks a slave, the port takes the packet as it is.

use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::superpackets::fraglist_aggregate;
use superpacket_engine::device::{DeviceId, Graph, MemoryDriver, Topology};

const TOPOLOGY: &str = r#"
[[device]]
name = "eth0"
kind = "port"

[[device]]
name = "eth1"
kind = "port"

[[device]]
name = "eth2"
kind = "port"

[[device]]
name = "eth3"
kind = "port"

[[device]]
name = "bond0"
kind = "bond"
mode = "balance-xor"
xmit_hash_policy = "layer3+4"
slaves = ["eth0", "eth1"]

[[device]]
name = "bond0.100"
kind = "vlan"
lower = "bond0"
protocol = "802.1ad"
id = 100

[[device]]
name = "bond0.100.200"
kind = "vlan"
lower = "bond0.100"
id = 200

[[device]]
name = "team0"
kind = "team"
runner = "roundrobin"
ports = ["eth2", "eth3"]

[[device]]
name = "team0.7"
kind = "vlan"
lower = "team0"
id = 7
"#;

/// TCP (v4 and v6) and UDP superpackets and fraglist aggregates over 8 flows.
fn batch(n: usize) -> Vec<Packet> {
    let mut out = Vec::with_capacity(n);
    let mut flows: Vec<(Flow, Transport)> = (0..8u32)
        .map(|i| {
            let t = if i % 2 == 0 { Transport::Tcp } else { Transport::Udp };
            (Flow::new(FlowSpec::new(t, i % 4 == 2, i)), t)
        })
        .collect();
    for k in 0..n {
        let (f, _t) = &mut flows[k % 8];
        let p = if k % 5 == 4 {
            let frames: Vec<Vec<u8>> = (0..6).map(|_| f.frame(1000, TcpFlags::empty()).unwrap()).collect();
            fraglist_aggregate(&frames).unwrap()
        } else {
            f.superpacket(30000, 1400, TcpFlags::empty()).unwrap()
        };
        out.push(p);
    }
    out
}

fn clear(g: &mut Graph, ports: &[DeviceId]) {
    for p in ports {
        g.driver_mut::<MemoryDriver>(*p).unwrap().tx.clear();
    }
}

#[test]
fn passthrough_transmit_through_vlan_on_bond_allocates_nothing_per_packet() {
    let mut g = Topology::parse(TOPOLOGY).unwrap().build().unwrap();
    let ports: Vec<DeviceId> = ["eth0", "eth1", "eth2", "eth3"].iter().map(|n| g.id(n).unwrap()).collect();
    for top in ["bond0.100.200", "team0.7"] {
        let top = g.id(top).unwrap();
        // Warm-up: the ports' queues grow to their working size.
        for p in batch(64) {
            g.transmit(top, p);
        }
        clear(&mut g, &ports);
        g.reset_counters();
        let packets = batch(64);
        let mut packets = Some(packets);
        let info = allocation_counter::measure(|| {
            for p in packets.take().unwrap() {
                g.transmit(top, p);
            }
        });
        // Only the emptied `Vec` of the batch is freed inside; nothing is allocated.
        assert_eq!(info.count_total, 0, "{}: {info:?}", g.device(top).name);
        let whole: u64 = ports.iter().map(|p| g.counters(*p).tx_passthrough).sum();
        let segmented: u64 = ports.iter().map(|p| g.counters(*p).tx_segmented).sum();
        assert_eq!((whole, segmented), (64, 0), "every superpacket reached a port whole");
        clear(&mut g, &ports);
    }
}
