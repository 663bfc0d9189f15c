//! Whole device graphs under hostile input (issue 22, item 5): one of a few
//! fixed topologies (bridges with VLAN filtering, 802.1Q and 802.1ad stacks,
//! bonds, teams, a router with IPv4/IPv6 addresses, static neighbours and
//! routes, masquerade/SNAT/DNAT with a tiny connection table, reassembly
//! with tiny limits), built from TOML with in-memory ports only, then fed a
//! sequence of frames on its ports, clock steps and carrier changes.
//!
//! # Input
//! Byte 0: the topology (`TOPOLOGIES[(b & 0x7f) % N]`; bit 7 builds it in
//! `legacy` stack mode). Then operations, each an opcode byte (`op % 8`):
//! - 0, 1: a raw frame: port byte (bit 7: through the driver and
//!   `Graph::poll` instead of `Graph::receive`), metadata byte (GSO, partial
//!   checksum, DODGY, payload in a separate segment), gso_size byte,
//!   little-endian u16 segment cut, little-endian u16 length, then the
//!   bytes; the metadata is made consistent with the frame when it parses
//!   (GSO type of its protocol, `gso_segs` computed, the pseudo-header sum in
//!   a partial checksum's field), as a driver's import would give it;
//! - 2, 3, 4: a *mostly valid* frame: a TCP/UDP frame or superpacket
//!   (`superpacket::traffic::Flow`) from one of the topology's hosts (on
//!   its port, with its VLAN tags, to its gateway's MAC) to another host, a
//!   router address, a routed or unroutable destination or a DNAT port; or an
//!   IPv4 fragment of such a datagram, an IPv6 packet with a Destination
//!   Options header, a TTL of 1, an L2 (bridged) destination MAC; then
//!   optionally damaged at one byte;
//! - 5: a reply to a frame that left the graph earlier: an ARP reply to its
//!   ARP request, a neighbour advertisement to its solicitation, or the
//!   TCP/UDP packet with addresses and ports swapped (what brings NAT's
//!   reverse path and neighbour resolution into play);
//! - 6: the clock advances (1 ms to 630 s) and `Graph::housekeeping` runs;
//! - 7: a carrier toggle, `Graph::discard_local`, or nothing.
//!
//! A frame of opcodes 0-5 not fed through `Graph::poll` goes, every other
//! step, through `Graph::receive_burst` in a burst of one to four frames
//! (`Run::burst_of`: the frame alone, twice, after the previous frame fed,
//! or around it), as the engine's worker receives.
//!
//! At most [`MAX_FRAMES`] frames and [`MAX_OPS`] operations per input.
//!
//! # Invariants (checked after every operation)
//! 1. No panic.
//! 2. Every frame that leaves a port (drained from its `MemoryDriver`) passes
//!    the checks of `superpacket pcap check` (`superpacket::validate::validate_frame`
//!    with the frame's metadata), except frames that only L2 devices
//!    forwarded from an input that itself fails them. Linux's bridge, bond,
//!    team and VLAN devices forward any Ethernet frame (they never look past
//!    the tags), so garbage in is garbage out there; the router must never
//!    emit an invalid packet. Precisely, an invalid output frame is excused
//!    iff (a) or (b) holds for a frame the operation fed (none for clock
//!    and carrier operations; one to four in a burst), or (c) holds:
//!    - (a) the output equals that input frame once the VLAN tags of both are
//!      removed (same MACs, same bytes after the tags: the router always
//!      rewrites the TTL / hop limit and the source MAC, so this is never a
//!      routed frame), and either the input fails the checks or the output's
//!      only problem is `unsupported` (more VLAN tags than `pcap check`
//!      parses: an L2 device pushed one more onto a deep stack, which Linux
//!      does too); or
//!    - (b) the input fails the checks and the output's source MAC is the
//!      input's and belongs to no device of the graph (the router writes
//!      its egress device's MAC as every frame's source, so such a frame was
//!      only bridged/bonded/tagged, and then cut or checksummed by the
//!      port's software GSO, whose output of invalid input is not held to
//!      validity either); or
//!    - (c) all the output fails is its transport layer (TCP/UDP/ICMP
//!      checksum, partial checksum field, GSO metadata that disagrees with a
//!      damaged UDP length or TCP data offset, a TCP/UDP/ICMP header that
//!      does not parse), and a frame fed earlier in the run (in this step, or
//!      held in the neighbour queue or reassembly since) failed only there
//!      with the same transport error (`transport_key`): for TCP and UDP
//!      the same IP protocol and checksum error (the ones' complement sum
//!      over pseudo-header and segment, or for a partial checksum the
//!      pseudo-header sum minus the field: incremental updates by TTL, NAT
//!      and GSO keep it, and checksum completion turns the second into the
//!      first), plus, with a GSO problem, the same GSO type, size, segments
//!      and payload length; for other transports the same transport bytes;
//!      when the transport header does not parse, the same bytes after the IP
//!      headers bar the TCP/UDP checksum field (NAT must not rewrite a
//!      transport header it has not validated, as conntrack refuses it in
//!      Linux; software completion of a partial checksum writes the field,
//!      as Linux's `skb_checksum_help` does). Linux's router forwards such
//!      packets (`ip_forward` / `ip6_forward` never read L4), and its
//!      incremental checksum updates keep a wrong checksum exactly as wrong.
//!
//!    So frames sent by housekeeping (solicitations) are always held to
//!    validity, and so is everything the router sends, bar rule (c): the IP
//!    layer must be valid on every routed frame, and a valid transport layer
//!    must stay valid.
//! 3. Tables stay within their bounds: every `TableUsage` of every device
//!    (`Graph::table_usage`: the router's `neighbours`, `neighbour-queue`,
//!    `conntrack`, `reasm-bytes`, `reasm-queues`) has `size <= limit` and
//!    `size <= peak` (`reasm-bytes` may pass its limit by one fragment's
//!    truesize, Linux's admission rule: by at most the largest truesize
//!    fed), and every bridge's FDB holds at most `fdb_max` entries.
//! 4. Held packets drain: after the input, the clock advances in 2 s steps
//!    past the neighbour give-up (3 solicitations 1 s apart) and then by an
//!    hour (past every reassembly lifetime), with housekeeping at each step:
//!    the router's neighbour queue (`pending()`), `resolving()` and
//!    `reasm-bytes` / `reasm-queues` are 0.
//! 5. Accounting ([`check_accounting`]): every drop reason of every device is
//!    a non-empty kebab-case name; no counter (packets, bytes, each drop
//!    reason) ever decreases; conservation ([`check_conservation`]): on
//!    every device (the router included) every step ends in one verdict,
//!    `rx_packets + tx_packets == forwarded + delivered + held + refused`;
//!    the refusals of all devices are at most their drops; per port, the
//!    rx/tx counts match what was fed and taken (see there).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;
use superpacket::offload::frag::build_fragment;
use superpacket::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport, insert_ipv6_dstopts};
use superpacket::validate::{self, ProblemKind};
use superpacket::wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, FrameHeaders, Icmpv6Packet, Icmpv6Repr, L3Kind, L4Kind, MacAddr,
    TcpFlags,
};
use superpacket_engine::device::bridge::Bridge;
use superpacket_engine::device::router::{SOLICIT_INTERVAL_NS, SOLICIT_PROBES};
use superpacket_engine::device::topology::{BuildOptions, Topology};
use superpacket_engine::device::{DeviceCounters, DeviceId, Graph, MemoryDriver, StackMode, TableUsage};
use superpacket_fuzz::{bytes_of, problems};

/// Most frames fed per input.
const MAX_FRAMES: usize = 64;
/// Most operations per input.
const MAX_OPS: usize = 256;
/// Largest raw frame.
const MAX_RAW: usize = 9100;
/// Largest payload of a generated superpacket (keeps executions fast).
const MAX_GSO_PAYLOAD: usize = 16000;
/// Emitted frames kept for replies (the most recent ones).
const KEEP_EMITTED: usize = 32;
const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// A host attached to a topology: where its frames enter, with what tags,
/// and which router interface is its gateway.
struct Host {
    port: &'static str,
    tags: &'static [(u16, u16)],
    gw: &'static str,
    mac: [u8; 6],
    v4: Ipv4Addr,
    v6: Option<Ipv6Addr>,
}

/// A fixed topology and the hosts and destinations its frames use.
struct Topo {
    name: &'static str,
    toml: &'static str,
    hosts: &'static [Host],
    /// Destinations besides the hosts: router addresses, routed and
    /// unroutable networks, NAT addresses.
    dests: &'static [IpAddr],
}

/// A [`Host`].
const fn host(
    port: &'static str,
    tags: &'static [(u16, u16)],
    gw: &'static str,
    mac: [u8; 6],
    v4: Ipv4Addr,
    v6: Option<Ipv6Addr>,
) -> Host {
    Host { port, tags, gw, mac, v4, v6 }
}
const fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}
const fn v6(a: u16, b: u16, h: u16) -> Ipv6Addr {
    Ipv6Addr::new(a, b, 0, 0, 0, 0, 0, h)
}
const Q: u16 = 0x8100;
const AD: u16 = 0x88A8;

const TOPOLOGIES: [Topo; 6] = [
    Topo {
        name: "bridge-vlan-router",
        toml: r#"
[[device]]
name = "acc1"
kind = "port"
[[device]]
name = "acc2"
kind = "port"
[[device]]
name = "trunk"
kind = "port"
[[device]]
name = "upl"
kind = "port"
features = { tso = false, tso6 = false, uso = false }
[[device]]
name = "br0"
kind = "bridge"
vlan_filtering = true
ageing = 20
fdb_max = 6
mac = "02:42:00:00:00:01"
ports = [
    { name = "acc1", pvid = 10, untagged = [10] },
    { name = "acc2", pvid = 20, untagged = [20] },
    { name = "trunk", pvid = 1, untagged = [1], tagged = [10, 20] },
    { name = "upl", pvid = 10, untagged = [10], tagged = [20] },
]
self = { tagged = [10, 20] }
[[device]]
name = "br0.10"
kind = "vlan"
lower = "br0"
id = 10
addresses = ["10.0.10.1/24", "fd00:10::1/64"]
[[device]]
name = "br0.20"
kind = "vlan"
lower = "br0"
id = 20
addresses = ["10.0.20.1/24", "fd00:20::1/64"]
[[neighbour]]
address = "10.0.20.5"
mac = "02:00:00:00:20:05"
[[neighbour]]
address = "fd00:20::5"
mac = "02:00:00:00:20:05"
"#,
        hosts: &[
            host("acc1", &[], "br0.10", [2, 0, 0, 0, 0x10, 5], v4(10, 0, 10, 5), Some(v6(0xfd00, 0x10, 5))),
            host("acc2", &[], "br0.20", [2, 0, 0, 0, 0x20, 5], v4(10, 0, 20, 5), Some(v6(0xfd00, 0x20, 5))),
            host("trunk", &[(Q, 10)], "br0.10", [2, 0, 0, 0, 0x10, 6], v4(10, 0, 10, 6), Some(v6(0xfd00, 0x10, 6))),
            host("trunk", &[(Q, 20)], "br0.20", [2, 0, 0, 0, 0x20, 6], v4(10, 0, 20, 6), Some(v6(0xfd00, 0x20, 6))),
            host("upl", &[], "br0.10", [2, 0, 0, 0, 0x10, 7], v4(10, 0, 10, 7), Some(v6(0xfd00, 0x10, 7))),
            host("upl", &[(Q, 20)], "br0.20", [2, 0, 0, 0, 0x20, 7], v4(10, 0, 20, 7), Some(v6(0xfd00, 0x20, 7))),
        ],
        dests: &[
            IpAddr::V4(v4(10, 0, 10, 1)),
            IpAddr::V4(v4(10, 0, 30, 1)),
            IpAddr::V4(v4(10, 0, 20, 9)),
            IpAddr::V6(v6(0xfd00, 0x10, 1)),
            IpAddr::V6(v6(0x2001, 0xdb8, 1)),
        ],
    },
    Topo {
        name: "qinq-bond-team-router",
        toml: r#"
[[device]]
name = "eth0"
kind = "port"
[[device]]
name = "eth1"
kind = "port"
features_check = "vlan"
[[device]]
name = "eth2"
kind = "port"
[[device]]
name = "eth3"
kind = "port"
mtu = 1400
features = { tso = false, uso = false }
[[device]]
name = "eth4"
kind = "port"
mtu = 1280
features = { sg = false }
addresses = ["192.168.3.1/24", "fd00:3::1/64"]
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
protocol = "802.1Q"
id = 200
addresses = ["192.168.1.1/24", "fd00:1::1/64"]
[[device]]
name = "team0"
kind = "team"
runner = "loadbalance"
ports = ["eth2", "eth3"]
[[device]]
name = "team0.100"
kind = "vlan"
lower = "team0"
protocol = "802.1ad"
id = 100
[[device]]
name = "team0.100.200"
kind = "vlan"
lower = "team0.100"
protocol = "802.1Q"
id = 200
addresses = ["192.168.2.1/24", "fd00:2::1/64"]
[[route]]
to = "198.51.100.0/24"
via = "192.168.3.254"
dev = "eth4"
[[route]]
to = "default6"
via = "fd00:3::fe"
dev = "eth4"
[[neighbour]]
address = "192.168.1.5"
mac = "02:00:00:01:00:05"
[[neighbour]]
address = "fd00:1::5"
mac = "02:00:00:01:00:05"
[[neighbour]]
address = "192.168.2.5"
mac = "02:00:00:02:00:05"
"#,
        hosts: &[
            host(
                "eth0",
                &[(AD, 100), (Q, 200)],
                "bond0.100.200",
                [2, 0, 0, 1, 0, 5],
                v4(192, 168, 1, 5),
                Some(v6(0xfd00, 1, 5)),
            ),
            host(
                "eth1",
                &[(AD, 100), (Q, 200)],
                "bond0.100.200",
                [2, 0, 0, 1, 0, 6],
                v4(192, 168, 1, 6),
                Some(v6(0xfd00, 1, 6)),
            ),
            host(
                "eth2",
                &[(AD, 100), (Q, 200)],
                "team0.100.200",
                [2, 0, 0, 2, 0, 5],
                v4(192, 168, 2, 5),
                Some(v6(0xfd00, 2, 5)),
            ),
            host(
                "eth3",
                &[(AD, 100), (Q, 200)],
                "team0.100.200",
                [2, 0, 0, 2, 0, 6],
                v4(192, 168, 2, 6),
                Some(v6(0xfd00, 2, 6)),
            ),
            host("eth4", &[], "eth4", [2, 0, 0, 3, 0, 5], v4(192, 168, 3, 5), Some(v6(0xfd00, 3, 5))),
        ],
        dests: &[
            IpAddr::V4(v4(198, 51, 100, 7)),
            IpAddr::V4(v4(192, 168, 1, 1)),
            IpAddr::V4(v4(10, 9, 9, 9)),
            IpAddr::V6(v6(0x2001, 0xdb8, 7)),
            IpAddr::V6(v6(0xfd00, 2, 1)),
        ],
    },
    Topo {
        name: "ab-bond-nat-reasm",
        toml: r#"
[[device]]
name = "eth0"
kind = "port"
[[device]]
name = "eth1"
kind = "port"
[[device]]
name = "wan"
kind = "port"
mtu = 1400
addresses = ["203.0.113.1/24"]
[[device]]
name = "bond0"
kind = "bond"
mode = "active-backup"
slaves = ["eth0", "eth1"]
primary = "eth1"
[[device]]
name = "bond0.10"
kind = "vlan"
lower = "bond0"
id = 10
addresses = ["192.168.10.1/24"]
[[route]]
to = "default"
via = "203.0.113.254"
dev = "wan"
[[neighbour]]
address = "203.0.113.254"
mac = "02:00:00:00:fe:fe"
[[nat]]
type = "masquerade"
out = "wan"
[[nat]]
type = "dnat"
in = "wan"
protocol = "tcp"
port = 8080
to = "192.168.10.5"
to_port = 80
[[nat]]
type = "dnat"
in = "wan"
protocol = "udp"
port = 5353
to = "192.168.10.6"
to_port = 53
[conntrack]
max_connections = 4
udp_unreplied = 2
tcp_closing = 1
[reassembly]
max_bytes = 65536
max_queues = 2
timeout = 2
"#,
        hosts: &[
            host("eth1", &[(Q, 10)], "bond0.10", [2, 0, 0, 0x0a, 0, 5], v4(192, 168, 10, 5), None),
            host("eth0", &[(Q, 10)], "bond0.10", [2, 0, 0, 0x0a, 0, 6], v4(192, 168, 10, 6), None),
            host("wan", &[], "wan", [2, 0, 0, 0, 0xfe, 0xfe], v4(198, 51, 100, 20), None),
            host("wan", &[], "wan", [2, 0, 0, 0, 0xfe, 0xfe], v4(203, 0, 113, 254), None),
        ],
        dests: &[
            IpAddr::V4(v4(203, 0, 113, 1)),
            IpAddr::V4(v4(8, 8, 8, 8)),
            IpAddr::V4(v4(192, 168, 10, 1)),
            IpAddr::V4(v4(192, 168, 10, 7)),
        ],
    },
    Topo {
        name: "team-snat-legacy",
        toml: r#"
mode = "legacy"
[[device]]
name = "p0"
kind = "port"
[[device]]
name = "p1"
kind = "port"
[[device]]
name = "p2"
kind = "port"
mtu = 1280
features = { tso = false, tso6 = false, uso = false }
[[device]]
name = "p3"
kind = "port"
[[device]]
name = "p4"
kind = "port"
features_check = "vlan"
[[device]]
name = "team0"
kind = "team"
runner = "activebackup"
ports = ["p0", "p1"]
addresses = ["10.1.0.1/24", "fd00:a::1/64"]
[[device]]
name = "p2.30"
kind = "vlan"
lower = "p2"
id = 30
addresses = ["10.2.0.1/24", "fd00:b::1/64"]
[[device]]
name = "team1"
kind = "team"
runner = "roundrobin"
ports = ["p3", "p4"]
addresses = ["10.3.0.1/24"]
[[route]]
to = "default"
via = "10.2.0.254"
dev = "p2.30"
[[route]]
to = "10.9.0.0/16"
via = "10.3.0.9"
dev = "team1"
[[route]]
to = "default6"
via = "fd00:b::fe"
dev = "p2.30"
[[neighbour]]
address = "10.3.0.9"
mac = "02:00:00:0d:00:09"
[[nat]]
type = "snat"
out = "p2.30"
to = "10.2.0.100"
[conntrack]
max_connections = 3
"#,
        hosts: &[
            host("p0", &[], "team0", [2, 0, 0, 0x0b, 0, 5], v4(10, 1, 0, 5), Some(v6(0xfd00, 0xa, 5))),
            host("p1", &[], "team0", [2, 0, 0, 0x0b, 0, 6], v4(10, 1, 0, 6), Some(v6(0xfd00, 0xa, 6))),
            host("p2", &[(Q, 30)], "p2.30", [2, 0, 0, 0x0c, 0, 5], v4(10, 2, 0, 254), Some(v6(0xfd00, 0xb, 0xfe))),
            host("p3", &[], "team1", [2, 0, 0, 0x0d, 0, 9], v4(10, 3, 0, 9), None),
            host("p4", &[], "team1", [2, 0, 0, 0x0d, 0, 0x0a], v4(10, 3, 0, 10), None),
        ],
        dests: &[
            IpAddr::V4(v4(10, 9, 1, 1)),
            IpAddr::V4(v4(1, 1, 1, 1)),
            IpAddr::V4(v4(10, 2, 0, 100)),
            IpAddr::V6(v6(0x2001, 0xdb8, 1)),
        ],
    },
    Topo {
        name: "bridge-bond-qinq-nat",
        toml: r#"
[[device]]
name = "p0"
kind = "port"
[[device]]
name = "p1"
kind = "port"
[[device]]
name = "p2"
kind = "port"
features = { hw-csum = false }
[[device]]
name = "p3"
kind = "port"
[[device]]
name = "p4"
kind = "port"
mtu = 1000
addresses = ["10.5.0.1/24"]
[[device]]
name = "bond0"
kind = "bond"
mode = "balance-xor"
slaves = ["p0", "p1"]
[[device]]
name = "p3.100"
kind = "vlan"
lower = "p3"
protocol = "802.1ad"
id = 100
[[device]]
name = "p3.100.200"
kind = "vlan"
lower = "p3.100"
protocol = "802.1Q"
id = 200
[[device]]
name = "br0"
kind = "bridge"
ports = ["bond0", "p2", "p3.100.200"]
fdb_max = 4
ageing = 1
addresses = ["10.4.0.1/24", "fd00:4::1/64"]
[[route]]
to = "default"
via = "10.5.0.9"
dev = "p4"
[[neighbour]]
address = "10.5.0.9"
mac = "02:00:00:05:00:09"
[[nat]]
type = "masquerade"
out = "p4"
[conntrack]
max_connections = 2
[reassembly]
max_queues = 1
timeout = 1
"#,
        hosts: &[
            host("p0", &[], "br0", [2, 0, 0, 4, 0, 5], v4(10, 4, 0, 5), Some(v6(0xfd00, 4, 5))),
            host("p1", &[], "br0", [2, 0, 0, 4, 0, 6], v4(10, 4, 0, 6), Some(v6(0xfd00, 4, 6))),
            host("p2", &[], "br0", [2, 0, 0, 4, 0, 7], v4(10, 4, 0, 7), Some(v6(0xfd00, 4, 7))),
            host("p3", &[(AD, 100), (Q, 200)], "br0", [2, 0, 0, 4, 0, 8], v4(10, 4, 0, 8), Some(v6(0xfd00, 4, 8))),
            host("p4", &[], "p4", [2, 0, 0, 5, 0, 9], v4(9, 9, 9, 9), None),
        ],
        dests: &[IpAddr::V4(v4(9, 9, 9, 9)), IpAddr::V4(v4(10, 4, 0, 1)), IpAddr::V4(v4(10, 5, 0, 1))],
    },
    Topo {
        name: "qinq-vlan-nat-dnat",
        toml: r#"
[[device]]
name = "lan"
kind = "port"
[[device]]
name = "wan"
kind = "port"
features = { uso = false, tso6 = false }
[[device]]
name = "lan.100"
kind = "vlan"
lower = "lan"
protocol = "802.1ad"
id = 100
[[device]]
name = "lan.100.10"
kind = "vlan"
lower = "lan.100"
id = 10
addresses = ["192.168.10.1/24", "fd00:10::1/64"]
[[device]]
name = "wan.20"
kind = "vlan"
lower = "wan"
id = 20
addresses = ["203.0.113.1/24", "2001:db8:20::1/64"]
[[route]]
to = "default"
via = "203.0.113.254"
dev = "wan.20"
[[route]]
to = "default6"
via = "2001:db8:20::fe"
dev = "wan.20"
[[neighbour]]
address = "203.0.113.254"
mac = "02:00:00:00:fe:fe"
[[nat]]
type = "masquerade"
out = "wan.20"
[[nat]]
type = "dnat"
in = "wan.20"
protocol = "tcp"
port = 8080
to = "192.168.10.5"
to_port = 80
[conntrack]
max_connections = 8
[reassembly]
max_bytes = 65536
max_queues = 4
timeout = 3
"#,
        hosts: &[
            host(
                "lan",
                &[(AD, 100), (Q, 10)],
                "lan.100.10",
                [2, 0, 0, 0x10, 0, 5],
                v4(192, 168, 10, 5),
                Some(v6(0xfd00, 0x10, 5)),
            ),
            host(
                "lan",
                &[(AD, 100), (Q, 10)],
                "lan.100.10",
                [2, 0, 0, 0x10, 0, 6],
                v4(192, 168, 10, 6),
                Some(v6(0xfd00, 0x10, 6)),
            ),
            host(
                "wan",
                &[(Q, 20)],
                "wan.20",
                [2, 0, 0, 0, 0xfe, 0xfe],
                v4(203, 0, 113, 254),
                Some(v6(0x2001, 0xdb8, 0xfe)),
            ),
            host(
                "wan",
                &[(Q, 20)],
                "wan.20",
                [2, 0, 0, 0, 0xfe, 0xfe],
                v4(198, 51, 100, 20),
                Some(v6(0x2001, 0xdb9, 0x20)),
            ),
        ],
        dests: &[
            IpAddr::V4(v4(203, 0, 113, 1)),
            IpAddr::V4(v4(8, 8, 8, 8)),
            IpAddr::V6(v6(0x2001, 0xdb9, 1)),
            IpAddr::V6(v6(0xfd00, 0x10, 1)),
        ],
    },
];

/// Destination ports a generated frame may use: services, DNAT ports.
const DPORTS: [u16; 8] = [80, 8080, 53, 5353, 5201, 4789, 22, 443];

/// The topologies, parsed once (each input builds a fresh graph).
static PARSED: LazyLock<Vec<Topology>> = LazyLock::new(|| {
    TOPOLOGIES.iter().map(|t| Topology::parse(t.toml).unwrap_or_else(|e| panic!("topology {}: {e}", t.name))).collect()
});

/// The input, read byte by byte (zeros once exhausted).
struct Reader<'a> {
    d: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.i >= self.d.len()
    }
    fn u8(&mut self) -> u8 {
        let v = self.d.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let start = self.i.min(self.d.len());
        let end = (start + n).min(self.d.len());
        self.i = end;
        &self.d[start..end]
    }
}

/// What a step fed: the frame (as bytes) and whether it passes `pcap check`.
struct Fed {
    bytes: Vec<u8>,
    valid: bool,
}

/// True if `problems` (of `frame`, non-empty) are all about the transport
/// layer: a TCP/UDP/ICMP checksum, a partial checksum's field, the GSO
/// metadata (which describes how the transport is cut: a damaged UDP length
/// or TCP data offset makes it disagree), or a TCP, UDP or ICMP header that
/// does not parse. An IP router (Linux's
/// `ip_forward` / `ip6_forward`) never reads that layer; conntrack marks
/// such a packet invalid, and an incremental checksum update (TTL, NAT)
/// carries a wrong checksum over as wrong.
fn transport_only(frame: &[u8], problems: &[validate::Problem]) -> bool {
    !problems.is_empty()
        && problems.iter().all(|p| match p.kind {
            ProblemKind::TcpChecksum
            | ProblemKind::UdpChecksum
            | ProblemKind::IcmpChecksum
            | ProblemKind::PartialChecksum
            | ProblemKind::GsoMismatch
            | ProblemKind::GsoSize
            | ProblemKind::GsoSegs => true,
            ProblemKind::Truncated | ProblemKind::Malformed | ProblemKind::Unsupported => {
                matches!(FrameHeaders::parse(frame), Err(e) if matches!(e.layer(), "tcp" | "udp" | "icmpv4" | "icmpv6"))
            }
            _ => false,
        })
}

/// The harness state for one input.
struct Run {
    topo: &'static Topo,
    legacy: bool,
    g: Graph,
    ports: Vec<DeviceId>,
    /// MACs of every device (the router writes one of them as the source of
    /// everything it sends).
    own_macs: Vec<MacAddr>,
    now: u64,
    /// Frames fed to each device (ports only), for the rx accounting.
    fed: Vec<u64>,
    /// Frames taken from each port's driver.
    taken: Vec<u64>,
    /// Recently emitted frames: (port, bytes).
    emitted: VecDeque<(DeviceId, Vec<u8>)>,
    prev: Vec<DeviceCounters>,
    /// [`transport_key`]s of the frames fed whose only problems are in
    /// their transport layer (rule (c) of invariant 2).
    bad_transport: HashSet<u64>,
    max_truesize: usize,
    /// The last frame fed, for the bursts of [`Run::burst_of`].
    last_fed: Option<Packet>,
    step: usize,
    debug: bool,
}

fn mac_at(f: &[u8], at: usize) -> Option<MacAddr> {
    Some(MacAddr(f.get(at..at + 6)?.try_into().ok()?))
}

/// The frame without its VLAN tags: (MACs, bytes after the tags).
fn untagged(f: &[u8]) -> Option<(&[u8], &[u8])> {
    if f.len() < 14 {
        return None;
    }
    let mut off = 12;
    while off + 4 <= f.len() && EtherType(u16::from_be_bytes([f[off], f[off + 1]])).is_vlan_tpid() {
        off += 4;
    }
    Some((&f[..12], &f[off..]))
}

/// The same frame up to its VLAN tags.
fn same_modulo_tags(a: &[u8], b: &[u8]) -> bool {
    a == b || matches!((untagged(a), untagged(b)), (Some(x), Some(y)) if x == y)
}

fn hex(b: &[u8]) -> String {
    let n = b.len().min(96);
    let mut s: String = b[..n].iter().map(|x| format!("{x:02x}")).collect();
    if b.len() > n {
        s.push_str(&format!("... ({} bytes)", b.len()));
    }
    s
}

/// Offload metadata consistent with `frame` (as a driver's import would
/// give it): from bit 0 a GSO type of the frame's protocol with a gso_size
/// from `size` when the payload is larger, from bit 1 a partial checksum
/// (the field then holds the pseudo-header sum), bit 2 adds DODGY.
fn consistent_meta(frame: &mut [u8], bits: u8, size: u8) -> OffloadMeta {
    let mut meta = OffloadMeta::default();
    let Ok(h) = FrameHeaders::parse(frame) else { return meta };
    let (base, field) = match (h.l3, h.l4) {
        (L3Kind::Ipv4, L4Kind::Tcp) => (GsoType::TCPV4, 16),
        (L3Kind::Ipv6, L4Kind::Tcp) => (GsoType::TCPV6, 16),
        (L3Kind::Ipv4 | L3Kind::Ipv6, L4Kind::Udp) => (GsoType::UDP_L4, 6),
        _ => return meta,
    };
    if h.is_fragment {
        return meta;
    }
    let gso_size = usize::from(size) * 8 + 1;
    if bits & 1 != 0 && h.payload_len > gso_size {
        meta.gso_type = base;
        if bits & 4 != 0 {
            meta.gso_type |= GsoType::DODGY;
        }
        meta.gso_size = gso_size as u16;
        meta.gso_segs = h.payload_len.div_ceil(gso_size).min(65535) as u16;
    }
    if bits & 2 != 0
        && let Some(pseudo) = validate::l4_pseudo_header_sum(frame, &h)
    {
        let at = h.l4_offset + field;
        frame[at..at + 2].copy_from_slice(&pseudo.to_be_bytes());
        meta.csum = ChecksumState::Partial { start: h.l4_offset as u16, offset: field as u16 };
    }
    meta
}

/// What routing, NAT and segmentation keep of a packet's transport layer,
/// to recognise a routed frame as carrying the transport error of a fed one
/// (rule (c) of invariant 2). For TCP and UDP: the IP protocol and the
/// checksum error, the ones' complement sum of pseudo-header and segment
/// (0xFFFF when the checksum is right), or with a partial checksum the
/// pseudo-header sum minus the field (0xFFFF when right, and what the sum
/// becomes once the checksum is completed): incremental updates of
/// addresses, ports, lengths and checksum (TTL, NAT, GSO) keep both. For
/// other transports: the bytes of the transport header and payload (the
/// router changes none). When the transport header does not parse: every
/// byte after the IP header and its extension headers but the TCP/UDP
/// checksum field (NAT must not rewrite what it has not validated; a port
/// completing a partial checksum writes that field whatever the header says).
/// With a GSO problem, also the GSO type, size and segments and the payload
/// length `pcap check` sees (routing and NAT change none of them).
fn transport_key(frame: &[u8], meta: &OffloadMeta, problems: &[validate::Problem]) -> u64 {
    use superpacket::csum::{ones_add, ones_sum};
    let mut st = DefaultHasher::new();
    match FrameHeaders::parse(frame) {
        Ok(h) => {
            h.ip_protocol.map(|p| p.0).hash(&mut st);
            let gso = [ProblemKind::GsoMismatch, ProblemKind::GsoSize, ProblemKind::GsoSegs];
            if problems.iter().any(|p| gso.contains(&p.kind)) {
                (meta.gso_type.bits(), meta.gso_size, meta.gso_segs, h.payload_len).hash(&mut st);
            }
            let l4 = frame.get(h.l4_offset..h.l3_end().max(h.l4_offset)).unwrap_or(&[]);
            match (h.l4.csum_offset(), h.is_fragment) {
                (Some(field), false) if matches!(h.l4, L4Kind::Tcp | L4Kind::Udp) => {
                    let pseudo = validate::l4_pseudo_header_sum(frame, &h).unwrap_or(0);
                    let partial = matches!(meta.csum, ChecksumState::Partial { start, offset }
                        if usize::from(start) == h.l4_offset && offset == field);
                    let k = if partial {
                        let at = usize::from(field);
                        let f = l4.get(at..at + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
                        ones_add(pseudo, !f)
                    } else {
                        ones_add(pseudo, ones_sum(l4))
                    };
                    (if k == 0 { 0xFFFF } else { k }).hash(&mut st);
                }
                _ => l4.hash(&mut st),
            }
        }
        Err(_) => {
            let Some((_, rest)) = untagged(frame) else { return 0 };
            let l3 = frame.len() - rest.len() + 2;
            let ip = frame.get(l3..).unwrap_or(&[]);
            let (mut proto, mut hl, total) = match (rest.get(..2), ip.first()) {
                (Some([8, 0]), Some(v)) if ip.len() >= 20 => {
                    (ip[9], usize::from(v & 0x0f) * 4, usize::from(u16::from_be_bytes([ip[2], ip[3]])))
                }
                (Some([0x86, 0xdd]), Some(_)) if ip.len() >= 40 => {
                    (ip[6], 40, 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])))
                }
                _ => return 1,
            };
            // IPv6 extension headers (hop-by-hop, routing, destination options).
            for _ in 0..8 {
                match (proto, ip.get(hl..hl + 2)) {
                    (0 | 43 | 60, Some(&[nh, len])) if rest[..2] == [0x86, 0xdd] => {
                        proto = nh;
                        hl += (usize::from(len) + 1) * 8;
                    }
                    _ => break,
                }
            }
            proto.hash(&mut st);
            let mut l4 = ip.get(hl.min(ip.len())..total.clamp(hl.min(ip.len()), ip.len())).unwrap_or(&[]).to_vec();
            // Without its checksum field: a port completing a partial checksum
            // in software (Linux's `skb_checksum_help`) writes it whatever the
            // header says.
            let field = match proto {
                6 => 16,
                17 => 6,
                _ => usize::MAX,
            };
            if let Some(f) = l4.get_mut(field..field + 2) {
                f.fill(0);
            }
            l4.hash(&mut st);
        }
    }
    st.finish()
}

/// `frame` as a packet with `meta`; with `detach`, the payload after the
/// headers (when they parse) in a separate segment, cut once at `cut`.
fn packet_of(frame: &[u8], meta: OffloadMeta, detach: bool, cut: u16) -> Packet {
    let mut pkt = Packet::from_frame(frame);
    pkt.meta = meta;
    if detach
        && let Ok(h) = FrameHeaders::parse(frame)
        && h.payload_offset < frame.len()
        && pkt.detach_payload(h.payload_offset).is_ok()
    {
        let at = h.payload_offset + usize::from(cut) % (frame.len() - h.payload_offset);
        if at > h.payload_offset
            && let Ok(tail) = pkt.split_off(at)
        {
            assert!(pkt.append_payload_of(tail, 0).is_ok(), "two segments always fit");
        }
        pkt.meta = meta;
        assert_eq!(bytes_of(&pkt), frame, "packet layout changed the bytes");
    }
    pkt
}

impl Run {
    fn new(data0: u8) -> Run {
        let topo = &TOPOLOGIES[usize::from(data0 & 0x7f) % TOPOLOGIES.len()];
        let legacy = data0 & 0x80 != 0;
        let idx = usize::from(data0 & 0x7f) % TOPOLOGIES.len();
        let opts = BuildOptions { mode: legacy.then_some(StackMode::Legacy), ..BuildOptions::default() };
        let g = PARSED[idx].build_with(&opts).unwrap_or_else(|e| panic!("topology {} does not build: {e}", topo.name));
        let ports: Vec<DeviceId> = (0..g.devices().len()).map(DeviceId).filter(|id| g.is_port(*id)).collect();
        let own_macs = g.devices().iter().map(|d| d.mac).collect();
        let n = g.devices().len();
        let mut r = Run {
            topo,
            legacy,
            g,
            ports,
            own_macs,
            now: S,
            fed: vec![0; n],
            taken: vec![0; n],
            emitted: VecDeque::new(),
            prev: vec![DeviceCounters::default(); n],
            bad_transport: HashSet::new(),
            max_truesize: 0,
            last_fed: None,
            step: 0,
            debug: std::env::var_os("SUPERPACKET_FUZZ_DEBUG").is_some(),
        };
        r.g.set_time(r.now);
        r
    }

    fn where_(&self) -> String {
        format!("topology {}{} step {}", self.topo.name, if self.legacy { " (legacy)" } else { "" }, self.step)
    }

    fn dev(&self, name: &str) -> DeviceId {
        self.g.id(name).unwrap_or_else(|| panic!("topology {}: no device {name}", self.topo.name))
    }

    /// Feeds `pkt` on `port` (through the driver and `poll` if `poll`,
    /// else `receive` or, every other step, `receive_burst` of a burst of
    /// one to four frames: [`Run::burst_of`]).
    fn feed(&mut self, port: DeviceId, pkt: Packet, poll: bool) {
        let burst_step = !poll && self.step % 2 == 1;
        let frames = if burst_step { self.burst_of(pkt) } else { vec![pkt] };
        let mut fed = Vec::with_capacity(frames.len());
        for pkt in &frames {
            let bytes = bytes_of(pkt);
            let p = problems(&bytes, &pkt.meta);
            let valid = p.is_empty();
            if transport_only(&bytes, &p) {
                self.bad_transport.insert(transport_key(&bytes, &pkt.meta, &p));
            }
            if self.debug {
                eprintln!(
                    "step {}: feed {} ({}, {:?}, {}): {}",
                    self.step,
                    self.g.device(port).name,
                    if valid { "valid" } else { "invalid" },
                    pkt.meta,
                    if poll {
                        "poll"
                    } else if burst_step {
                        "burst"
                    } else {
                        "receive"
                    },
                    hex(&bytes)
                );
            }
            self.max_truesize = self.max_truesize.max(pkt.truesize());
            self.fed[port.0] += 1;
            fed.push(Fed { bytes, valid });
        }
        self.last_fed = frames.last().cloned();
        if poll {
            let [pkt] = <[Packet; 1]>::try_from(frames).unwrap_or_else(|_| unreachable!("one frame when polling"));
            self.g.driver_mut::<MemoryDriver>(port).expect("memory port").rx.push_back(pkt);
            let n = self.g.poll();
            assert_eq!(n, 1, "{}: poll processed {n} packets, 1 was queued", self.where_());
        } else if burst_step {
            // As the engine's worker receives: a port under a master takes
            // the run path (`NetDevice::receive_run`), which bursts of
            // equal, alike and different frames exercise.
            let mut burst = frames;
            self.g.receive_burst(port, &mut burst, &mut Vec::new(), self.now);
        } else {
            let [pkt] = <[Packet; 1]>::try_from(frames).unwrap_or_else(|_| unreachable!("one frame"));
            self.g.receive(port, pkt);
        }
        self.after(&fed);
    }

    /// The burst a burst step feeds for `pkt`, by the step: `pkt` alone;
    /// `pkt` twice (a bridge run extends over equal addresses); the
    /// previous frame fed (on any port: often another flow, size or
    /// offload) then `pkt` (a run that ends after its first frame, a
    /// transmit run that stops partway); or `pkt`, the previous frame,
    /// `pkt` again.
    fn burst_of(&self, pkt: Packet) -> Vec<Packet> {
        let prev = self.last_fed.clone();
        match ((self.step / 2) % 4, prev) {
            (1, _) => vec![pkt.clone(), pkt],
            (2, Some(prev)) => vec![prev, pkt],
            (3, Some(prev)) => vec![pkt.clone(), prev, pkt],
            _ => vec![pkt],
        }
    }

    /// The checks after every operation (invariants 2, 3 and 5).
    fn after(&mut self, fed: &[Fed]) {
        self.drain(fed);
        // Local deliveries: a host stack would take them.
        for i in 0..self.g.devices().len() {
            while self.g.take_local(DeviceId(i)).is_some() {}
        }
        self.check_tables();
        check_accounting(self);
        self.step += 1;
    }

    /// Takes every frame the ports sent and checks it (invariant 2).
    fn drain(&mut self, fed: &[Fed]) {
        for pi in 0..self.ports.len() {
            let port = self.ports[pi];
            let out: Vec<Packet> = self.g.driver_mut::<MemoryDriver>(port).expect("memory port").tx.drain(..).collect();
            for pkt in out {
                self.taken[port.0] += 1;
                let bytes = bytes_of(&pkt);
                let p = problems(&bytes, &pkt.meta);
                if !p.is_empty() && !self.excused(&bytes, &pkt.meta, &p, fed) {
                    panic!(
                        "{}: invalid frame left port {}: {p:?}\n meta {:?}\n frame {}\n fed {}",
                        self.where_(),
                        self.g.device(port).name,
                        pkt.meta,
                        hex(&bytes),
                        if fed.is_empty() {
                            "nothing (housekeeping)".to_string()
                        } else {
                            fed.iter()
                                .map(|f| format!("{} ({})", hex(&f.bytes), if f.valid { "valid" } else { "invalid" }))
                                .collect::<Vec<_>>()
                                .join(", ")
                        },
                    );
                }
                if self.debug {
                    eprintln!(
                        "  out {}: {}{}",
                        self.g.device(port).name,
                        hex(&bytes),
                        if p.is_empty() { "" } else { " (excused)" }
                    );
                }
                if bytes.len() <= MAX_RAW {
                    if self.emitted.len() == KEEP_EMITTED {
                        self.emitted.pop_front();
                    }
                    self.emitted.push_back((port, bytes));
                }
            }
        }
    }

    /// The exemption of invariant 2 (see the module documentation).
    fn excused(&self, out: &[u8], meta: &OffloadMeta, p: &[validate::Problem], fed: &[Fed]) -> bool {
        if transport_only(out, p) && self.bad_transport.contains(&transport_key(out, meta, p)) {
            return true;
        }
        fed.iter().any(|fed| {
            if same_modulo_tags(out, &fed.bytes) {
                return !fed.valid || p.iter().all(|p| p.kind == ProblemKind::Unsupported);
            }
            !fed.valid
                && mac_at(out, 6).is_some_and(|src| Some(src) == mac_at(&fed.bytes, 6) && !self.own_macs.contains(&src))
        })
    }

    /// Invariant 3.
    fn check_tables(&self) {
        let mut usage: Vec<TableUsage> = Vec::new();
        self.g.table_usage(&mut usage);
        for u in &usage {
            let slack = if u.name == "reasm-bytes" { self.max_truesize as u64 } else { 0 };
            assert!(u.size <= u.limit + slack, "{}: table {} over its bound: {u:?}", self.where_(), u.name);
            assert!(u.size <= u.peak, "{}: table {} above its peak: {u:?}", self.where_(), u.name);
        }
        for (i, d) in self.g.devices().iter().enumerate() {
            if let Some(b) = self.g.kind_as::<Bridge>(DeviceId(i)) {
                assert!(
                    b.fdb.len() <= b.max_entries,
                    "{}: bridge {} FDB holds {} > fdb_max {}",
                    self.where_(),
                    d.name,
                    b.fdb.len(),
                    b.max_entries
                );
            }
        }
    }

    fn advance(&mut self, dt: u64) {
        self.now += dt;
        self.g.set_time(self.now);
        self.g.housekeeping(self.now);
        if self.debug {
            eprintln!("step {}: clock +{} ms, housekeeping", self.step, dt / MS);
        }
        self.after(&[]);
    }

    /// A raw frame (opcodes 0, 1).
    fn raw(&mut self, r: &mut Reader) {
        let pb = r.u8();
        let port = self.ports[usize::from(pb & 0x7f) % self.ports.len()];
        let m = r.u8();
        let size = r.u8();
        let cut = r.u16();
        let len = usize::from(r.u16()) % (MAX_RAW + 1);
        let mut frame = r.bytes(len).to_vec();
        let meta = consistent_meta(&mut frame, m, size);
        let pkt = packet_of(&frame, meta, m & 8 != 0, cut);
        self.feed(port, pkt, pb & 0x80 != 0);
    }

    /// A mostly valid frame (opcodes 2, 3, 4).
    fn generated(&mut self, r: &mut Reader) {
        let hosts = self.topo.hosts;
        let h = &hosts[usize::from(r.u8()) % hosts.len()];
        let kind = r.u8();
        let dsel = r.u8();
        let psel = r.u8();
        let flags = r.u8();
        let len = r.u16();
        let gso_size = r.u8();
        let (at, xor) = (r.u16(), r.u8());
        let (foff, flen) = (r.u8(), r.u8());
        let poll = psel & 0x80 != 0;

        let want_v6 = kind & 1 != 0;
        let transport = if kind & 2 != 0 { Transport::Udp } else { Transport::Tcp };
        let l2 = kind & 4 != 0;
        let gso = kind & 8 != 0;
        let partial = kind & 0x10 != 0;
        let detach = kind & 0x20 != 0;
        let frag_or_ext = kind & 0x40 != 0;
        let low_ttl = kind & 0x80 != 0;

        // Destination: another host or one of the topology's destinations,
        // of the source's family when it has one.
        let pick_v6 = want_v6 && h.v6.is_some();
        let dst: IpAddr = if dsel & 0x80 != 0 {
            let o = &hosts[usize::from(dsel & 0x7f) % hosts.len()];
            match (pick_v6, o.v6) {
                (true, Some(a)) => IpAddr::V6(a),
                _ => IpAddr::V4(o.v4),
            }
        } else {
            let same: Vec<IpAddr> = self.topo.dests.iter().copied().filter(|d| d.is_ipv6() == pick_v6).collect();
            if same.is_empty() { IpAddr::V4(v4(8, 8, 8, 8)) } else { same[usize::from(dsel) % same.len()] }
        };
        let addrs = match (dst, h.v6) {
            (IpAddr::V6(d), Some(s)) => Addrs::V6 { src: s, dst: d },
            (IpAddr::V4(d), _) => Addrs::V4 { src: h.v4, dst: d },
            (IpAddr::V6(_), None) => Addrs::V4 { src: h.v4, dst: v4(8, 8, 8, 8) },
        };
        let is_v6 = matches!(addrs, Addrs::V6 { .. });
        let mut spec = FlowSpec::new(transport, is_v6, u32::from(psel & 3));
        spec.addrs = addrs;
        spec.src_mac = MacAddr(h.mac);
        spec.dst_mac = if l2 {
            // Bridged: to another host (or broadcast).
            if dsel & 0x40 != 0 { MacAddr::BROADCAST } else { MacAddr(hosts[usize::from(dsel) % hosts.len()].mac) }
        } else {
            self.g.device(self.dev(h.gw)).mac
        };
        let Ok(s) = spec.with_vlans(h.tags) else { return };
        spec = s;
        spec.dst_port = DPORTS[usize::from(psel >> 2) % DPORTS.len()];
        if low_ttl {
            spec.ttl = 1 + (flags & 1);
        }
        let fragment = frag_or_ext && !is_v6 && !gso;
        spec.dont_frag = !fragment;
        let mut flow = Flow::new(spec);
        let tcp_flags = TcpFlags::from_bits_truncate(u16::from(flags));

        let (mut frame, mut meta) = if gso {
            let payload = usize::from(len) % (MAX_GSO_PAYLOAD + 1);
            let size = u16::from(gso_size) * 8 + 8;
            let Ok(p) = flow.superpacket(payload, size, tcp_flags) else { return };
            let meta = p.meta;
            (bytes_of(&p), meta)
        } else {
            let payload = usize::from(len) % if fragment { 4000 } else { 1500 };
            let Ok(f) = flow.frame(payload, tcp_flags) else { return };
            (f, OffloadMeta::default())
        };
        if fragment {
            let l2len = 14 + 4 * h.tags.len();
            let data = frame.len() - l2len - 20;
            let off = ((usize::from(foff) * 8) % data.max(1)) & !7;
            let n = (usize::from(flen) * 8 + 8).min(data - off);
            let more = off + n < data;
            match build_fragment(&frame, off, n, more, 0) {
                Ok(f) => frame = f,
                Err(_) => return,
            }
        } else if partial && meta.csum == ChecksumState::None {
            meta = consistent_meta(&mut frame, 2, 0);
        }
        if frag_or_ext && is_v6 {
            let l3 = 14 + 4 * h.tags.len();
            let mut p = Packet::from_frame(&frame);
            p.meta = meta;
            let p = insert_ipv6_dstopts(&p, l3);
            meta = p.meta;
            frame = bytes_of(&p);
        }
        if xor != 0 && !frame.is_empty() {
            let i = usize::from(at) % frame.len();
            frame[i] ^= xor;
        }
        let port = self.dev(h.port);
        let pkt = packet_of(&frame, meta, detach, at.rotate_left(7));
        self.feed(port, pkt, poll);
    }

    /// A reply to an emitted frame (opcode 5).
    fn reply(&mut self, r: &mut Reader) {
        let idx = r.u8();
        let variant = r.u8();
        if self.emitted.is_empty() {
            return;
        }
        let (port, f) = self.emitted[usize::from(idx) % self.emitted.len()].clone();
        let Some(frame) = reply_to(&f, variant) else { return };
        let port = if variant & 0x80 != 0 { self.ports[usize::from(idx) % self.ports.len()] } else { port };
        self.feed(port, Packet::from_frame(&frame), variant & 0x40 != 0);
    }

    /// Opcode 7.
    fn control(&mut self, r: &mut Reader) {
        let b = r.u8();
        match b & 3 {
            0 | 1 => {
                let port = self.ports[usize::from(b >> 2) % self.ports.len()];
                let up = !self.g.device(port).carrier;
                if self.debug {
                    eprintln!("step {}: carrier of {} {}", self.step, self.g.device(port).name, up);
                }
                self.g.set_carrier(port, up);
            }
            2 => {
                self.g.discard_local();
            }
            _ => {}
        }
        self.after(&[]);
    }

    /// Invariant 4: every held packet leaves once the clock passes every timeout.
    fn drain_held(&mut self) {
        for _ in 0..SOLICIT_PROBES + 2 {
            self.advance(2 * SOLICIT_INTERVAL_NS);
        }
        self.advance(3600 * S);
        let w = self.where_();
        if let Some(router) = self.g.router() {
            assert_eq!(router.pending(), 0, "{w}: packets still wait for a neighbour after every give-up");
            assert_eq!(router.resolving(), 0, "{w}: neighbours still being resolved after every give-up");
        }
        let mut usage: Vec<TableUsage> = Vec::new();
        self.g.table_usage(&mut usage);
        for u in usage.iter().filter(|u| u.name.starts_with("reasm-")) {
            assert_eq!(u.size, 0, "{w}: {} not empty after every reassembly lifetime: {u:?}", u.name);
        }
        if self.debug {
            for d in self.g.devices() {
                let c = &d.counters;
                eprintln!(
                    "{} ({}): rx {} tx {} = forwarded {} delivered {} held {} refused {}; drops {:?}",
                    d.name, d.kind, c.rx_packets, c.tx_packets, c.forwarded, c.delivered, c.held, c.refused, c.drops
                );
            }
        }
    }
}

/// The reply a peer would send to emitted frame `f`: an ARP reply to an
/// ARP request, a neighbour advertisement to a solicitation, or a TCP/UDP
/// packet with MACs, addresses and ports swapped (hop limit 64, TCP flags
/// from `variant` when its bit 5 is set; checksums recomputed).
fn reply_to(f: &[u8], variant: u8) -> Option<Vec<u8>> {
    let (_, rest) = untagged(f)?;
    let l3 = f.len() - rest.len() + 2;
    let tags_end = l3 - 2;
    let ethertype = u16::from_be_bytes(rest.get(..2)?.try_into().ok()?);
    let mac = MacAddr([2, 0, 0, 0x99, variant >> 4, variant & 0x0f]);
    let mut out = Vec::new();
    let header = |dst: MacAddr, src: MacAddr, et: u16, out: &mut Vec<u8>| {
        out.extend_from_slice(&dst.0);
        out.extend_from_slice(&src.0);
        out.extend_from_slice(&f[12..tags_end]);
        out.extend_from_slice(&et.to_be_bytes());
    };
    match ethertype {
        0x0806 => {
            let p = ArpPacket::new_checked(f.get(l3..)?).ok()?;
            let req = ArpRepr::parse(&p).ok()?;
            if req.operation != ArpOperation::Request {
                return None;
            }
            let rep = ArpRepr::reply_to(&req, mac);
            let mut buf = [0u8; 28];
            rep.emit(&mut ArpPacket::new_unchecked(&mut buf[..])).ok()?;
            header(req.source_hardware_addr, mac, 0x0806, &mut out);
            out.extend_from_slice(&buf);
            Some(out)
        }
        0x86DD | 0x0800 => {
            let h = FrameHeaders::parse(f).ok()?;
            if h.l4 == L4Kind::Icmpv6 {
                let p = Icmpv6Packet::new_checked(f.get(h.l4_offset..h.l3_end())?).ok()?;
                let Ok(Icmpv6Repr::NeighborSolicit { target_addr, .. }) = Icmpv6Repr::parse(&p) else { return None };
                let src: [u8; 16] = f.get(l3 + 8..l3 + 24)?.try_into().ok()?;
                let na = Icmpv6Repr::NeighborAdvert {
                    router: false,
                    solicited: true,
                    override_: true,
                    target_addr,
                    target_lladdr: Some(mac),
                };
                let mut buf = [0u8; 128];
                let n = na.emit_ipv6_packet(target_addr, Ipv6Addr::from(src), 255, &mut buf).ok()?;
                header(mac_at(f, 6)?, mac, 0x86DD, &mut out);
                out.extend_from_slice(&buf[..n]);
                return Some(out);
            }
            if !matches!(h.l4, L4Kind::Tcp | L4Kind::Udp) || h.is_fragment {
                return None;
            }
            let mut g = f[..h.l3_end()].to_vec();
            let (dst, src) = (mac_at(f, 0)?, mac_at(f, 6)?);
            g[0..6].copy_from_slice(&src.0);
            g[6..12].copy_from_slice(&dst.0);
            let l3 = h.l3_offset;
            let (a, n) = if h.l3 == L3Kind::Ipv4 { (l3 + 12, 4) } else { (l3 + 8, 16) };
            let s: Vec<u8> = g[a..a + n].to_vec();
            g.copy_within(a + n..a + 2 * n, a);
            g[a + n..a + 2 * n].copy_from_slice(&s);
            if h.l3 == L3Kind::Ipv4 {
                g[l3 + 8] = 64;
            } else {
                g[l3 + 7] = 64;
            }
            let l4 = h.l4_offset;
            let sp = [g[l4], g[l4 + 1]];
            g.copy_within(l4 + 2..l4 + 4, l4);
            g[l4 + 2..l4 + 4].copy_from_slice(&sp);
            if h.l4 == L4Kind::Tcp && variant & 0x20 != 0 {
                g[l4 + 13] = variant & 0x1f | 0x10;
            }
            validate::refresh_checksums(&mut g);
            Some(g)
        }
        _ => None,
    }
}

/// Invariant 5: every drop reason is a non-empty kebab-case name; no
/// counter ever decreases (packets, bytes, superpackets, segments,
/// checksums, verdicts, each drop reason); then
/// [`check_conservation`].
fn check_accounting(run: &mut Run) {
    let w = run.where_();
    for (i, d) in run.g.devices().iter().enumerate() {
        let c = &d.counters;
        if run.debug {
            for (reason, n) in &c.drops {
                let before = run.prev[i].drops.get(reason).copied().unwrap_or(0);
                if *n != before {
                    eprintln!("  drop {}: {reason} +{}", d.name, n - before);
                }
            }
        }
        for (reason, n) in &c.drops {
            assert!(is_kebab(reason), "{w}: device {} counts drops under {reason:?}, not a kebab-case name", d.name);
            assert!(*n > 0, "{w}: device {} has a drop reason {reason:?} with no drop", d.name);
        }
        let p = &run.prev[i];
        let pairs = [
            ("rx_packets", p.rx_packets, c.rx_packets),
            ("rx_bytes", p.rx_bytes, c.rx_bytes),
            ("rx_superpackets", p.rx_superpackets, c.rx_superpackets),
            ("tx_packets", p.tx_packets, c.tx_packets),
            ("tx_bytes", p.tx_bytes, c.tx_bytes),
            ("tx_superpackets", p.tx_superpackets, c.tx_superpackets),
            ("tx_passthrough", p.tx_passthrough, c.tx_passthrough),
            ("tx_segmented", p.tx_segmented, c.tx_segmented),
            ("segments_produced", p.segments_produced, c.segments_produced),
            ("checksums_completed", p.checksums_completed, c.checksums_completed),
            ("forwarded", p.forwarded, c.forwarded),
            ("delivered", p.delivered, c.delivered),
            ("held", p.held, c.held),
            ("refused", p.refused, c.refused),
            ("dropped", p.dropped(), c.dropped()),
        ];
        for (name, before, now) in pairs {
            assert!(now >= before, "{w}: device {} counter {name} went down: {before} -> {now}", d.name);
        }
        for (reason, before) in &p.drops {
            let now = c.drops.get(reason).copied().unwrap_or(0);
            assert!(now >= *before, "{w}: device {} drops {reason} went down: {before} -> {now}", d.name);
        }
    }
    run.prev = run.g.devices().iter().map(|d| d.counters.clone()).collect();
    check_conservation(run);
}

/// Conservation of packets (invariant 5).
///
/// Every device (ports, VLAN devices, bonds, teams, bridges, the router):
/// each step of the walk on it (a packet it received, or was given to
/// transmit) ends in exactly one verdict, so `rx_packets + tx_packets ==
/// forwarded + delivered + held + refused` (`DeviceCounters`); and every
/// refusal is counted under a drop reason (on the refusing device or the
/// handler's), so the sum of `refused` over the devices is at most the sum
/// of their drops (`dropped()`; drops have more sources: held packets given
/// up, refused fragments, `discard_local`, segments of a legacy software
/// GSO).
///
/// For every port besides:
/// - `rx_packets` = frames fed to it (by `receive` or through its driver and `poll`);
/// - the frames taken from its driver = the driver's `tx_frames`;
/// - `tx_passthrough + tx_segmented <= tx_packets` (each packet given to the
///   port leaves whole, is cut or completed once, or is dropped);
/// - `tx_passthrough + segments_produced <= driver tx_frames` (the rest are
///   checksum completions, which have no packet counter yet).
fn check_conservation(run: &mut Run) {
    let w = run.where_();
    let (mut refused, mut dropped) = (0u64, 0u64);
    for d in run.g.devices() {
        let c = &d.counters;
        let steps = c.rx_packets + c.tx_packets;
        let verdicts = c.forwarded + c.delivered + c.held + c.refused;
        assert_eq!(
            steps, verdicts,
            "{w}: device {} ({}): {} received + {} transmitted != {} forwarded + {} delivered + {} held + {} refused \
             (drops {:?})",
            d.name, d.kind, c.rx_packets, c.tx_packets, c.forwarded, c.delivered, c.held, c.refused, c.drops
        );
        refused += c.refused;
        dropped += c.dropped();
    }
    assert!(refused <= dropped, "{w}: {refused} steps refused in all, but only {dropped} drops counted");
    for pi in 0..run.ports.len() {
        let port = run.ports[pi];
        let c = run.g.device(port).counters.clone();
        let name = run.g.device(port).name.clone();
        let drv = run.g.driver_mut::<MemoryDriver>(port).expect("memory port");
        assert_eq!(
            c.rx_packets, run.fed[port.0],
            "{w}: port {name} counts {} received, {} were fed",
            c.rx_packets, run.fed[port.0]
        );
        assert_eq!(
            drv.tx_frames, run.taken[port.0],
            "{w}: port {name}: driver counts {} frames, {} were sent",
            drv.tx_frames, run.taken[port.0]
        );
        assert!(
            c.tx_passthrough + c.tx_segmented <= c.tx_packets,
            "{w}: port {name}: {} passed through + {} segmented > {} transmitted",
            c.tx_passthrough,
            c.tx_segmented,
            c.tx_packets
        );
        assert!(
            c.tx_passthrough + c.segments_produced <= drv.tx_frames,
            "{w}: port {name}: {} passed through + {} segments > {} frames sent",
            c.tx_passthrough,
            c.segments_produced,
            drv.tx_frames
        );
    }
}

/// `a-b-c`: lowercase ASCII letters and digits in words joined by single hyphens.
fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else { return };
    let mut run = Run::new(first);
    let mut r = Reader { d: rest, i: 0 };
    let (mut frames, mut ops) = (0, 0);
    while !r.done() && ops < MAX_OPS && frames < MAX_FRAMES {
        ops += 1;
        match r.u8() % 8 {
            0 | 1 => {
                frames += 1;
                run.raw(&mut r);
            }
            2..=4 => {
                frames += 1;
                run.generated(&mut r);
            }
            5 => {
                frames += 1;
                run.reply(&mut r);
            }
            6 => {
                let a = r.u8();
                let dt = match a >> 6 {
                    0 => u64::from(a & 63) * MS + 1,
                    1 => u64::from(a & 63) * 100 * MS,
                    2 => u64::from(a & 63) * S,
                    _ => u64::from(a & 63) * 10 * S,
                };
                run.advance(dt);
            }
            _ => run.control(&mut r),
        }
    }
    run.drain_held();
});
