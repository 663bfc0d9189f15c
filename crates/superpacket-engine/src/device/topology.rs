//! Topology files: a device graph described in TOML (format reference:
//! `docs/topology.md`; examples in `examples/`).
//!
//! A file lists devices (`[[device]]`: ports with their drivers, 802.1Q /
//! 802.1ad VLAN devices stacked to any depth, bonds, teams and bridges with
//! VLAN filtering), per-device feature overrides with `ethtool -k` names
//! (offload-rules 6.1), MTU, MAC and addresses, then routes, static
//! neighbours, NAT rules and connection-table limits, and the stack mode
//! (passthrough or legacy, offload-rules 9.2). Devices may appear in any
//! order: lowers are built before their uppers.
//!
//! Every error, syntactic or semantic (an unknown lower device, a duplicate
//! name, a VLAN id out of range, a feature name `ethtool` does not know),
//! is a [`TopologyError`] naming the line (and column) of the offending key
//! or value, computed from the byte spans the `toml` crate keeps
//! ([`toml::Spanned`], [`toml::de::Error::span`]).

use super::bond::{BondMode, HashPolicy};
use super::bridge::Bridge;
use super::bridge::PortVlans;
use super::features::{FeaturesCheck, NetdevFeatures, StackMode};
use super::graph::{DeviceId, Graph};
use super::nat::{NatRule, NatTimeouts};
use super::port::{MemoryDriver, MemoryMode, PcapDriver, PortDriver};
#[cfg(feature = "tap")]
use super::port_io::TapDriver;
#[cfg(any(feature = "tap", feature = "tun"))]
use super::port_io::TapPortOptions;
#[cfg(feature = "af-packet")]
use super::port_io::{MAX_BATCH, MAX_RX_RING_FRAMES, PacketPortOptions, PacketSocketDriver};
#[cfg(feature = "pv")]
use super::pv_port::{MAX_PV_BATCH, PvPortDriver, PvPortOptions};
use super::router::Route;
use super::team::TeamMode;
#[cfg(feature = "tun")]
use super::tun_port::TunDriver;
use super::vlan::VlanProto;
#[cfg(feature = "pv")]
use crate::io::pv::TxStrategy;
#[cfg(feature = "pv")]
use crate::io::pv::proto as pv_proto;
#[cfg(feature = "pv")]
use crate::io::pv::ring::MAX_RING as PV_MAX_RING;
#[cfg(any(feature = "tap", feature = "tun"))]
use crate::io::tuntap::{TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_USO4, TUN_F_USO6};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use superpacket::wire::MacAddr;
use toml::Spanned;

/// A topology file could not be read, parsed or built: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct TopologyError {
    /// 1-based line of the offending key or value (0: not tied to a line, e.g. an I/O error).
    pub line: usize,
    /// 1-based column (0 when `line` is 0).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl TopologyError {
    fn render(&self) -> String {
        if self.line == 0 { self.message.clone() } else { format!("line {}: {}", self.line, self.message) }
    }

    fn at(src: &str, span: &Range<usize>, message: impl Into<String>) -> TopologyError {
        let (line, column) = line_col(src, span.start);
        TopologyError { line, column, message: message.into() }
    }
}

/// 1-based line and column of byte offset `at` in `src`.
pub fn line_col(src: &str, at: usize) -> (usize, usize) {
    let at = at.min(src.len());
    let before = &src.as_bytes()[..at];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = at - before.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, col)
}

// ------------------------------------------------------------------ schema

/// The parsed file (see `docs/topology.md`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySpec {
    /// `passthrough` (default) or `legacy`.
    #[serde(default)]
    pub mode: Option<Spanned<String>>,
    /// `[[device]]` entries.
    #[serde(default, rename = "device")]
    pub devices: Vec<DeviceSpec>,
    /// `[[route]]` entries.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteSpec>,
    /// `[[neighbour]]` entries (static ARP/NDP entries).
    #[serde(default, rename = "neighbour")]
    pub neighbours: Vec<NeighbourSpec>,
    /// `[[nat]]` rules.
    #[serde(default, rename = "nat")]
    pub nat: Vec<NatSpec>,
    /// `[conntrack]`: connection-table size and timeouts.
    #[serde(default)]
    pub conntrack: Option<ConntrackSpec>,
    /// `[reassembly]`: limits of the IPv4 defragmentation before NAT.
    #[serde(default)]
    pub reassembly: Option<ReassemblySpec>,
}

/// One `[[device]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct DeviceSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// `port`, `vlan`, `bond`, `team` or `bridge`.
    pub kind: Spanned<String>,
    /// Port: `memory` (default), `{ kind = "pcap", path, input }`,
    /// `{ kind = "tap", name, netns }`, `{ kind = "tun", name, netns }`,
    /// `{ kind = "af_packet", interface, netns }`, `{ kind = "pv", socket }`.
    pub driver: Option<Spanned<DriverSpec>>,
    /// Port: `any` (parses every VLAN depth) or `vlan` (Linux's default hook).
    pub features_check: Option<Spanned<String>>,
    /// Port: `gso_max_size` in bytes.
    pub gso_max_size: Option<Spanned<u32>>,
    /// Port: `gso_max_segs`.
    pub gso_max_segs: Option<Spanned<u16>>,
    /// Port: software GRO on what the port receives (`superpacket run`).
    pub gro: Option<Spanned<bool>>,
    /// VLAN: the lower device.
    pub lower: Option<Spanned<String>>,
    /// VLAN: `802.1Q` (default) or `802.1ad`.
    pub protocol: Option<Spanned<String>>,
    /// VLAN: the VLAN id.
    pub id: Option<Spanned<i64>>,
    /// Bond: `active-backup` or `balance-xor`.
    pub mode: Option<Spanned<String>>,
    /// Bond: `layer2` (default) or `layer3+4`.
    pub xmit_hash_policy: Option<Spanned<String>>,
    /// Bond: slave names.
    pub slaves: Option<Spanned<Vec<Spanned<String>>>>,
    /// Bond: preferred active slave.
    pub primary: Option<Spanned<String>>,
    /// Team: `roundrobin`, `loadbalance` or `activebackup`.
    pub runner: Option<Spanned<String>>,
    /// Team: port names. Bridge: port names or `{ name, pvid, untagged, tagged }`.
    pub ports: Option<Spanned<Vec<Spanned<PortRef>>>>,
    /// Bridge: VLAN filtering (default false).
    pub vlan_filtering: Option<Spanned<bool>>,
    /// Bridge: FDB ageing time in seconds (default 300).
    pub ageing: Option<Spanned<f64>>,
    /// Bridge: most FDB entries (default 4096).
    pub fdb_max: Option<Spanned<u32>>,
    /// Bridge: the bridge device's own VLANs (`bridge vlan ... self`).
    #[serde(rename = "self")]
    pub self_vlans: Option<Spanned<PortRef>>,
    /// Feature overrides (`ethtool -K` names).
    pub features: Option<Spanned<BTreeMap<String, Spanned<bool>>>>,
    /// L3 MTU.
    pub mtu: Option<Spanned<u32>>,
    /// MAC address `aa:bb:cc:dd:ee:ff`.
    pub mac: Option<Spanned<String>>,
    /// Router addresses `a.b.c.d/len` or `x::y/len`.
    pub addresses: Option<Vec<Spanned<String>>>,
}

/// A port driver: a name, or a table with `kind` and its options.
#[derive(Debug)]
pub enum DriverSpec {
    /// `driver = "memory"`.
    Name(String),
    /// `driver = { kind = "pcap", path = "...", input = "..." }` (or `tap`,
    /// `tun`, `af_packet`, `pv` with their keys).
    Table(Box<DriverTable>),
}

/// The table form of a driver.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverTable {
    /// `memory`, `pcap`, `tap`, `tun`, `af_packet` or `pv`.
    pub kind: Spanned<String>,
    /// pcap: output file (relative to the topology file).
    pub path: Option<Spanned<String>>,
    /// pcap: capture to receive from.
    pub input: Option<Spanned<String>>,
    /// tap, tun: the TAP or TUN device to create (or attach to).
    pub name: Option<Spanned<String>>,
    /// af_packet: the interface the socket is bound to.
    pub interface: Option<Spanned<String>>,
    /// tap, tun, af_packet: the named network namespace (`ip netns`) the device
    /// lives in; omitted: the current one.
    pub netns: Option<Spanned<String>>,
    /// tap, tun: the offloads asked for (`csum`, `tso4`, `tso6`, `tso-ecn`,
    /// `uso`; default all of them).
    pub offloads: Option<Spanned<Vec<Spanned<String>>>>,
    /// af_packet: `PACKET_QDISC_BYPASS`.
    pub qdisc_bypass: Option<Spanned<bool>>,
    /// af_packet: frames per batched receive or send call; pv: packets per
    /// transmit batch.
    pub batch: Option<Spanned<u32>>,
    /// pv: the Unix socket clients attach to (relative to the topology file).
    pub socket: Option<Spanned<String>>,
    /// pv: transmit policy (`swcsum-direct`, `offload-indirect`, `direct-nocsum`).
    pub strategy: Option<Spanned<String>>,
    /// pv: require header information with checksum-offloaded frames
    /// (`GUEST_HDRLEN`; default true).
    pub header_info: Option<Spanned<bool>>,
    /// pv: default ring size (a power of two, 2..=1024; default 256).
    /// af_packet: frames of the TPACKET_V2 receive ring (0: no ring,
    /// `recvmmsg`; default 128, 68 KiB each).
    pub ring: Option<Spanned<u32>>,
}

impl<'de> Deserialize<'de> for DriverSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DriverSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a driver name or a table with `kind`")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<DriverSpec, E> {
                Ok(DriverSpec::Name(s.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DriverSpec, A::Error> {
                DriverTable::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(|t| DriverSpec::Table(Box::new(t)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A team or bridge port: a name, or (bridge) a table with VLAN membership.
#[derive(Debug)]
pub enum PortRef {
    /// Just the name (bridge: VLAN 1, pvid, untagged).
    Name(String),
    /// `{ name, pvid, untagged, tagged }`.
    Table(BridgePortSpec),
}

/// VLAN membership of a bridge port (or of the bridge itself, `name` omitted).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgePortSpec {
    /// Port name (absent for `self`).
    pub name: Option<Spanned<String>>,
    /// VLAN of untagged ingress frames; must be one of `untagged` or `tagged`.
    pub pvid: Option<Spanned<i64>>,
    /// VLANs sent untagged.
    #[serde(default)]
    pub untagged: Vec<Spanned<i64>>,
    /// VLANs sent tagged.
    #[serde(default)]
    pub tagged: Vec<Spanned<i64>>,
}

impl<'de> Deserialize<'de> for PortRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PortRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a device name or a table { name, pvid, untagged, tagged }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<PortRef, E> {
                Ok(PortRef::Name(s.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PortRef, A::Error> {
                BridgePortSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(PortRef::Table)
            }
        }
        d.deserialize_any(V)
    }
}

/// One `[[route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Destination prefix `a.b.c.d/len`, `x::/len`, `default` (IPv4) or `default6`.
    pub to: Spanned<String>,
    /// Next hop (omitted: directly connected).
    pub via: Option<Spanned<String>>,
    /// Egress device.
    pub dev: Spanned<String>,
}

/// One `[[neighbour]]` (static ARP / NDP entry).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourSpec {
    /// IP address.
    pub address: Spanned<String>,
    /// MAC address.
    pub mac: Spanned<String>,
}

/// One `[[nat]]` rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatSpec {
    /// `masquerade`, `snat` or `dnat`.
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    /// masquerade/snat: egress device.
    pub out: Option<Spanned<String>>,
    /// dnat: ingress device (omitted: any).
    #[serde(rename = "in")]
    pub in_dev: Option<Spanned<String>>,
    /// snat: new source address; dnat: new destination address.
    pub to: Option<Spanned<String>>,
    /// dnat: `tcp` or `udp`.
    pub protocol: Option<Spanned<String>>,
    /// dnat: destination port matched.
    pub port: Option<Spanned<u16>>,
    /// dnat: new destination port (default: `port`).
    pub to_port: Option<Spanned<u16>>,
}

/// `[conntrack]`: table size and timeouts in seconds (defaults: Linux's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConntrackSpec {
    /// Most connections (default 65536).
    pub max_connections: Option<Spanned<u32>>,
    /// UDP before a reply (30).
    pub udp_unreplied: Option<Spanned<f64>>,
    /// UDP after a reply (120).
    pub udp_replied: Option<Spanned<f64>>,
    /// TCP before a reply (120).
    pub tcp_unreplied: Option<Spanned<f64>>,
    /// TCP established (432000).
    pub tcp_established: Option<Spanned<f64>>,
    /// TCP after FIN/RST (10).
    pub tcp_closing: Option<Spanned<f64>>,
}

/// `[reassembly]`: limits of the router's IPv4 defragmentation before NAT
/// (defaults: Linux's `ipfrag_high_thresh`, queue bound and `ipfrag_time`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReassemblySpec {
    /// Bytes of held fragments above which new fragments are refused
    /// (default 4194304, `ipfrag_high_thresh`).
    pub max_bytes: Option<Spanned<u64>>,
    /// Most datagrams being reassembled at once (default 16384).
    pub max_queues: Option<Spanned<u32>>,
    /// Seconds a datagram may take to complete (default 30, `ipfrag_time`).
    pub timeout: Option<Spanned<f64>>,
}

// ------------------------------------------------------------------ build

/// How to build a graph from a topology.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Overrides the file's `mode`.
    pub mode: Option<StackMode>,
    /// What in-memory ports keep of segmented frames.
    pub memory_mode: MemoryMode,
    /// Directory relative pcap paths are resolved against.
    pub base_dir: Option<PathBuf>,
    /// Engine workers sharing each real port (0 or 1: one). With more, TAPs
    /// and TUNs are opened multi-queue (one queue per worker) and AF_PACKET sockets
    /// join the fanout group [`BuildOptions::fanout_group`].
    pub workers: usize,
    /// `PACKET_FANOUT` group id base for AF_PACKET ports (each port adds its index).
    pub fanout_group: u16,
    /// Overrides the `offloads` of every TAP and TUN port (`TUN_F_*`; e.g. 0
    /// for per-frame I/O).
    pub tap_offloads: Option<u32>,
    /// Overrides the `batch` of every AF_PACKET port (1: one frame per
    /// system call and no receive ring, i.e. per-frame I/O).
    pub packet_batch: Option<usize>,
}

/// A parsed topology file, ready to build a [`Graph`].
#[derive(Debug)]
pub struct Topology {
    src: String,
    /// The parsed content.
    pub spec: TopologySpec,
}

/// Parses and builds `src` with default options.
///
/// # Errors
/// A [`TopologyError`] naming the line.
pub fn load(src: &str) -> Result<Graph, TopologyError> {
    Topology::parse(src)?.build()
}

/// Reads, parses and builds the file at `path` (pcap paths relative to it).
///
/// # Errors
/// I/O errors (line 0) or a [`TopologyError`] naming the line.
pub fn load_file(path: &Path) -> Result<Graph, TopologyError> {
    let src = std::fs::read_to_string(path).map_err(|e| TopologyError {
        line: 0,
        column: 0,
        message: format!("{}: {e}", path.display()),
    })?;
    let opts = BuildOptions { base_dir: path.parent().map(Path::to_path_buf), ..BuildOptions::default() };
    Topology::parse(&src)?.build_with(&opts)
}

const KINDS: [&str; 5] = ["port", "vlan", "bond", "team", "bridge"];

/// The real port drivers: (driver kind, the cargo feature of this crate
/// that builds it, whether it is built).
pub(crate) const DRIVER_FEATURES: [(&str, &str, bool); 4] = [
    ("tap", "tap", cfg!(feature = "tap")),
    ("tun", "tun", cfg!(feature = "tun")),
    ("af_packet", "af-packet", cfg!(feature = "af-packet")),
    ("pv", "pv", cfg!(feature = "pv")),
];

/// Keys of `[[device]]` that apply only to some kinds: (key, kinds).
const KIND_KEYS: &[(&str, &[&str])] = &[
    ("driver", &["port"]),
    ("features_check", &["port"]),
    ("gso_max_size", &["port"]),
    ("gso_max_segs", &["port"]),
    ("gro", &["port"]),
    ("lower", &["vlan"]),
    ("protocol", &["vlan"]),
    ("id", &["vlan"]),
    ("mode", &["bond"]),
    ("xmit_hash_policy", &["bond"]),
    ("slaves", &["bond"]),
    ("primary", &["bond"]),
    ("runner", &["team"]),
    ("ports", &["team", "bridge"]),
    ("vlan_filtering", &["bridge"]),
    ("ageing", &["bridge"]),
    ("fdb_max", &["bridge"]),
    ("self", &["bridge"]),
];

impl DeviceSpec {
    /// The span of kind-specific key `key`, if present.
    fn key_span(&self, key: &str) -> Option<Range<usize>> {
        match key {
            "driver" => self.driver.as_ref().map(Spanned::span),
            "features_check" => self.features_check.as_ref().map(Spanned::span),
            "gso_max_size" => self.gso_max_size.as_ref().map(Spanned::span),
            "gso_max_segs" => self.gso_max_segs.as_ref().map(Spanned::span),
            "gro" => self.gro.as_ref().map(Spanned::span),
            "lower" => self.lower.as_ref().map(Spanned::span),
            "protocol" => self.protocol.as_ref().map(Spanned::span),
            "id" => self.id.as_ref().map(Spanned::span),
            "mode" => self.mode.as_ref().map(Spanned::span),
            "xmit_hash_policy" => self.xmit_hash_policy.as_ref().map(Spanned::span),
            "slaves" => self.slaves.as_ref().map(Spanned::span),
            "primary" => self.primary.as_ref().map(Spanned::span),
            "runner" => self.runner.as_ref().map(Spanned::span),
            "ports" => self.ports.as_ref().map(Spanned::span),
            "vlan_filtering" => self.vlan_filtering.as_ref().map(Spanned::span),
            "ageing" => self.ageing.as_ref().map(Spanned::span),
            "fdb_max" => self.fdb_max.as_ref().map(Spanned::span),
            "self" => self.self_vlans.as_ref().map(Spanned::span),
            _ => None,
        }
    }

    /// Names of the devices this one is built on, with their spans.
    fn deps(&self) -> Vec<(&str, Range<usize>)> {
        let mut v = Vec::new();
        if let Some(l) = &self.lower {
            v.push((l.get_ref().as_str(), l.span()));
        }
        if let Some(s) = &self.slaves {
            v.extend(s.get_ref().iter().map(|n| (n.get_ref().as_str(), n.span())));
        }
        if let Some(p) = &self.ports {
            for r in p.get_ref() {
                match r.get_ref() {
                    PortRef::Name(n) => v.push((n.as_str(), r.span())),
                    PortRef::Table(t) => {
                        if let Some(n) = &t.name {
                            v.push((n.get_ref().as_str(), n.span()));
                        }
                    }
                }
            }
        }
        v
    }
}

impl Topology {
    /// Parses `src`.
    ///
    /// # Errors
    /// A syntax or type error, naming its line.
    pub fn parse(src: &str) -> Result<Topology, TopologyError> {
        let spec: TopologySpec = toml::from_str(src).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            let mut t = TopologyError::at(src, &span, e.message().trim_end().to_string());
            if e.span().is_none() {
                (t.line, t.column) = (0, 0);
            }
            t
        })?;
        Ok(Topology { src: src.to_string(), spec })
    }

    /// Builds the graph with default options.
    ///
    /// # Errors
    /// A semantic error, naming its line.
    pub fn build(&self) -> Result<Graph, TopologyError> {
        self.build_with(&BuildOptions::default())
    }

    fn err(&self, span: &Range<usize>, message: impl Into<String>) -> TopologyError {
        TopologyError::at(&self.src, span, message)
    }

    /// The stack mode the file asks for.
    ///
    /// # Errors
    /// An unknown mode.
    pub fn mode(&self) -> Result<StackMode, TopologyError> {
        match &self.spec.mode {
            None => Ok(StackMode::Passthrough),
            Some(m) => match m.get_ref().as_str() {
                "passthrough" => Ok(StackMode::Passthrough),
                "legacy" => Ok(StackMode::Legacy),
                other => Err(self.err(&m.span(), format!("unknown mode `{other}` (passthrough, legacy)"))),
            },
        }
    }

    /// Builds the graph.
    ///
    /// # Errors
    /// A semantic error (unknown or duplicate device, bad value, a device
    /// enslaved twice, a dependency cycle, ...), naming its line.
    pub fn build_with(&self, opts: &BuildOptions) -> Result<Graph, TopologyError> {
        let file_mode = self.mode()?;
        let mut g = Graph::new(opts.mode.unwrap_or(file_mode));
        let devs = &self.spec.devices;

        // Names, kinds, keys that do not apply.
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, d) in devs.iter().enumerate() {
            let name = d.name.get_ref().as_str();
            if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', ':']) {
                return Err(self.err(
                    &d.name.span(),
                    format!("bad device name {name:?} (1 to 15 characters, no '/', ':' or space)"),
                ));
            }
            if let Some(&j) = index.get(name) {
                let (first, _) = line_col(&self.src, devs[j].name.span().start);
                return Err(
                    self.err(&d.name.span(), format!("duplicate device name `{name}` (first defined on line {first})"))
                );
            }
            index.insert(name, i);
            let kind = d.kind.get_ref().as_str();
            if !KINDS.contains(&kind) {
                return Err(
                    self.err(&d.kind.span(), format!("unknown device kind `{kind}` (port, vlan, bond, team, bridge)"))
                );
            }
            for (key, kinds) in KIND_KEYS {
                if !kinds.contains(&kind)
                    && let Some(span) = d.key_span(key)
                {
                    return Err(self.err(&span, format!("key `{key}` does not apply to a {kind} device")));
                }
            }
        }

        // Dependencies: every name known, each device under one upper at most.
        let mut owner: HashMap<&str, (&str, Range<usize>)> = HashMap::new();
        for d in devs {
            let me = d.name.get_ref().as_str();
            let master = d.kind.get_ref() != "vlan";
            for (dep, span) in d.deps() {
                if !index.contains_key(dep) {
                    return Err(self.err(&span, format!("unknown device `{dep}` (used by `{me}`)")));
                }
                if dep == me {
                    return Err(self.err(&span, format!("`{me}` cannot be stacked on itself")));
                }
                if master {
                    if let Some((other, _)) = owner.get(dep) {
                        return Err(self.err(&span, format!("`{dep}` is already a port of `{other}`")));
                    }
                    owner.insert(dep, (me, span));
                }
            }
        }

        // Build in dependency order.
        let mut ids: Vec<Option<DeviceId>> = vec![None; devs.len()];
        let mut left: Vec<usize> = (0..devs.len()).collect();
        while !left.is_empty() {
            let before = left.len();
            let mut next = Vec::new();
            for i in left {
                if devs[i].deps().iter().all(|(n, _)| ids[index[n]].is_some()) {
                    ids[i] = Some(self.build_device(&mut g, &devs[i], &index, &ids, opts)?);
                } else {
                    next.push(i);
                }
            }
            if next.len() == before {
                let d = &devs[next[0]];
                return Err(self.err(&d.name.span(), format!("`{}` is part of a stacking loop", d.name.get_ref())));
            }
            left = next;
        }
        let by_name = |s: &Spanned<String>| -> Result<DeviceId, TopologyError> {
            index
                .get(s.get_ref().as_str())
                .and_then(|i| ids[*i])
                .ok_or_else(|| self.err(&s.span(), format!("unknown device `{}`", s.get_ref())))
        };

        // Per-device settings that need every device built.
        for (i, d) in devs.iter().enumerate() {
            let id = ids[i].expect("built above");
            for a in d.addresses.iter().flatten() {
                let (addr, len) = parse_prefix(a.get_ref(), true)
                    .map_err(|m| self.err(&a.span(), format!("bad address `{}`: {m}", a.get_ref())))?;
                g.add_address(id, addr, len);
            }
        }

        for r in &self.spec.routes {
            let dev = by_name(&r.dev)?;
            let (prefix, len) = match r.to.get_ref().as_str() {
                "default" => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
                "default6" => (IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0),
                s => parse_prefix(s, false).map_err(|m| self.err(&r.to.span(), format!("bad prefix `{s}`: {m}")))?,
            };
            let via = match &r.via {
                None => None,
                Some(v) => {
                    let a: IpAddr = v
                        .get_ref()
                        .parse()
                        .map_err(|_| self.err(&v.span(), format!("bad next hop `{}`", v.get_ref())))?;
                    if a.is_ipv4() != prefix.is_ipv4() {
                        return Err(self.err(&v.span(), "next hop and destination are of different IP versions"));
                    }
                    Some(a)
                }
            };
            g.router_mut().add_route(Route { prefix, len, via, dev });
        }

        for n in &self.spec.neighbours {
            let a: IpAddr = n
                .address
                .get_ref()
                .parse()
                .map_err(|_| self.err(&n.address.span(), format!("bad IP address `{}`", n.address.get_ref())))?;
            let mac = parse_mac(n.mac.get_ref())
                .ok_or_else(|| self.err(&n.mac.span(), format!("bad MAC address `{}`", n.mac.get_ref())))?;
            g.router_mut().add_neighbour(a, mac);
        }

        for r in &self.spec.nat {
            let rule = self.nat_rule(r, &by_name, &g)?;
            g.router_mut().nat.rules.push(rule);
        }

        if let Some(c) = &self.spec.conntrack {
            if let Some(m) = &c.max_connections {
                if *m.get_ref() == 0 {
                    return Err(self.err(&m.span(), "max_connections must be at least 1"));
                }
                let rules = std::mem::take(&mut g.router_mut().nat.rules);
                g.router_mut().nat = super::nat::Nat::new(*m.get_ref() as usize);
                g.router_mut().nat.rules = rules;
            }
            let t = &mut g.router_mut().nat.timeouts;
            let d = NatTimeouts::default();
            for (field, dst, def) in [
                (&c.udp_unreplied, &mut t.udp_unreplied, d.udp_unreplied),
                (&c.udp_replied, &mut t.udp_replied, d.udp_replied),
                (&c.tcp_unreplied, &mut t.tcp_unreplied, d.tcp_unreplied),
                (&c.tcp_established, &mut t.tcp_established, d.tcp_established),
                (&c.tcp_closing, &mut t.tcp_closing, d.tcp_closing),
            ] {
                *dst = match field {
                    None => def,
                    Some(s) => seconds_ns(*s.get_ref())
                        .ok_or_else(|| self.err(&s.span(), "a timeout is a positive number of seconds"))?,
                };
            }
        }
        if let Some(r) = &self.spec.reassembly {
            g.router_mut().defrag_config = Some(self.reassembly_config(r)?);
        }
        Ok(g)
    }

    /// The defragmenter configuration of a `[reassembly]` section.
    fn reassembly_config(&self, r: &ReassemblySpec) -> Result<superpacket::offload::frag::ReasmConfig, TopologyError> {
        let mut cfg = super::tables::Defrag::default_config();
        if let Some(m) = &r.max_bytes {
            let bytes = usize::try_from(*m.get_ref())
                .ok()
                .filter(|&b| b >= 1 << 16)
                .ok_or_else(|| self.err(&m.span(), "max_bytes must be at least 65536"))?;
            // Linux keeps low_thresh at 3/4 of high_thresh by default.
            cfg.v4.high_thresh = bytes;
            cfg.v4.low_thresh = bytes / 4 * 3;
        }
        if let Some(q) = &r.max_queues {
            if *q.get_ref() == 0 {
                return Err(self.err(&q.span(), "max_queues must be at least 1"));
            }
            cfg.max_queues = *q.get_ref() as usize;
        }
        if let Some(t) = &r.timeout {
            cfg.v4.timeout_ns = seconds_ns(*t.get_ref())
                .ok_or_else(|| self.err(&t.span(), "a timeout is a positive number of seconds"))?;
        }
        Ok(cfg)
    }

    fn nat_rule(
        &self,
        r: &NatSpec,
        by_name: &dyn Fn(&Spanned<String>) -> Result<DeviceId, TopologyError>,
        g: &Graph,
    ) -> Result<NatRule, TopologyError> {
        let kind = r.kind.get_ref().as_str();
        let need = |v: &Option<Spanned<String>>, key: &str| -> Result<Spanned<String>, TopologyError> {
            v.clone().ok_or_else(|| self.err(&r.kind.span(), format!("a {kind} rule needs `{key}`")))
        };
        let refuse = |present: Option<Range<usize>>, key: &str| -> Result<(), TopologyError> {
            match present {
                Some(s) => Err(self.err(&s, format!("key `{key}` does not apply to a {kind} rule"))),
                None => Ok(()),
            }
        };
        let v4 = |s: &Spanned<String>| -> Result<Ipv4Addr, TopologyError> {
            s.get_ref().parse().map_err(|_| self.err(&s.span(), format!("bad IPv4 address `{}`", s.get_ref())))
        };
        let router_dev = |s: &Spanned<String>| -> Result<DeviceId, TopologyError> {
            let id = by_name(s)?;
            if !g.router().is_some_and(|r| r.has_interface(id)) {
                return Err(self.err(&s.span(), format!("`{}` has no address: not a router interface", s.get_ref())));
            }
            Ok(id)
        };
        match kind {
            "masquerade" | "snat" => {
                refuse(r.in_dev.as_ref().map(Spanned::span), "in")?;
                refuse(r.protocol.as_ref().map(Spanned::span), "protocol")?;
                refuse(r.port.as_ref().map(Spanned::span), "port")?;
                refuse(r.to_port.as_ref().map(Spanned::span), "to_port")?;
                let out = router_dev(&need(&r.out, "out")?)?.0;
                if kind == "masquerade" {
                    refuse(r.to.as_ref().map(Spanned::span), "to")?;
                    Ok(NatRule::Masquerade { out_dev: out })
                } else {
                    Ok(NatRule::Snat { out_dev: out, to: v4(&need(&r.to, "to")?)? })
                }
            }
            "dnat" => {
                refuse(r.out.as_ref().map(Spanned::span), "out")?;
                let in_dev = match &r.in_dev {
                    Some(s) => Some(router_dev(s)?.0),
                    None => None,
                };
                let p = need(&r.protocol, "protocol")?;
                let proto = match p.get_ref().as_str() {
                    "tcp" => 6,
                    "udp" => 17,
                    other => return Err(self.err(&p.span(), format!("unknown protocol `{other}` (tcp, udp)"))),
                };
                let port = r.port.as_ref().ok_or_else(|| self.err(&r.kind.span(), "a dnat rule needs `port`"))?;
                let to = v4(&need(&r.to, "to")?)?;
                let to_port = r.to_port.as_ref().map_or(*port.get_ref(), |p| *p.get_ref());
                Ok(NatRule::Dnat { in_dev, proto, port: *port.get_ref(), to, to_port })
            }
            other => Err(self.err(&r.kind.span(), format!("unknown NAT type `{other}` (masquerade, snat, dnat)"))),
        }
    }

    fn build_device(
        &self,
        g: &mut Graph,
        d: &DeviceSpec,
        index: &HashMap<&str, usize>,
        ids: &[Option<DeviceId>],
        opts: &BuildOptions,
    ) -> Result<DeviceId, TopologyError> {
        let name = d.name.get_ref().as_str();
        let id_of = |n: &str| ids[index[n]].expect("dependencies are built first");
        let map_dev = |span: &Range<usize>, e: super::graph::DeviceError| self.err(span, e.to_string());
        let id = match d.kind.get_ref().as_str() {
            "port" => {
                let driver = self.driver(d, opts, index[name])?;
                g.add_port(name, driver).map_err(|e| map_dev(&d.name.span(), e))?
            }
            "vlan" => {
                let lower = d
                    .lower
                    .as_ref()
                    .ok_or_else(|| self.err(&d.kind.span(), format!("VLAN device `{name}` needs `lower`")))?;
                let proto = match &d.protocol {
                    None => VlanProto::Dot1Q,
                    Some(p) => match p.get_ref().to_ascii_lowercase().as_str() {
                        "802.1q" => VlanProto::Dot1Q,
                        "802.1ad" => VlanProto::Dot1AD,
                        other => {
                            return Err(
                                self.err(&p.span(), format!("unknown VLAN protocol `{other}` (802.1Q, 802.1ad)"))
                            );
                        }
                    },
                };
                let vid = d.id.as_ref().ok_or_else(|| self.err(&d.kind.span(), format!("VLAN `{name}` needs `id`")))?;
                let v = *vid.get_ref();
                if !(1..=4094).contains(&v) {
                    return Err(self.err(&vid.span(), format!("VLAN id {v} is outside 1..=4094")));
                }
                let lower_id = id_of(lower.get_ref());
                if g.is_port(lower_id) && g.device(lower_id).feat.features.contains(NetdevFeatures::VLAN_CHALLENGED) {
                    return Err(self.err(&lower.span(), format!("`{}` cannot carry VLANs", lower.get_ref())));
                }
                g.add_vlan(name, lower_id, proto, v as u16).map_err(|e| match e {
                    super::graph::DeviceError::DuplicateVlan { .. } => map_dev(&vid.span(), e),
                    _ => map_dev(&d.name.span(), e),
                })?
            }
            "bond" => {
                let mode = match &d.mode {
                    None => BondMode::ActiveBackup,
                    Some(m) => match m.get_ref().as_str() {
                        "active-backup" => BondMode::ActiveBackup,
                        "balance-xor" => BondMode::BalanceXor,
                        other => {
                            return Err(self
                                .err(&m.span(), format!("unknown bond mode `{other}` (active-backup, balance-xor)")));
                        }
                    },
                };
                let hash = match &d.xmit_hash_policy {
                    None => HashPolicy::Layer2,
                    Some(h) => match h.get_ref().as_str() {
                        "layer2" => HashPolicy::Layer2,
                        "layer3+4" => HashPolicy::Layer34,
                        other => {
                            return Err(
                                self.err(&h.span(), format!("unknown xmit_hash_policy `{other}` (layer2, layer3+4)"))
                            );
                        }
                    },
                };
                let id = g.add_bond(name, mode, hash).map_err(|e| map_dev(&d.name.span(), e))?;
                let slaves = d.slaves.as_ref().map(|s| s.get_ref().as_slice()).unwrap_or_default();
                for s in slaves {
                    g.enslave(id, id_of(s.get_ref())).map_err(|e| map_dev(&s.span(), e))?;
                }
                if let Some(p) = &d.primary {
                    if !slaves.iter().any(|s| s.get_ref() == p.get_ref()) {
                        return Err(
                            self.err(&p.span(), format!("primary `{}` is not a slave of `{name}`", p.get_ref()))
                        );
                    }
                    g.set_bond_primary(id, Some(id_of(p.get_ref())));
                }
                id
            }
            "team" => {
                let mode = match &d.runner {
                    None => TeamMode::Roundrobin,
                    Some(r) => match r.get_ref().as_str() {
                        "roundrobin" => TeamMode::Roundrobin,
                        "loadbalance" => TeamMode::Loadbalance,
                        "activebackup" => TeamMode::Activebackup,
                        other => {
                            return Err(self.err(
                                &r.span(),
                                format!("unknown team runner `{other}` (roundrobin, loadbalance, activebackup)"),
                            ));
                        }
                    },
                };
                let id = g.add_team(name, mode).map_err(|e| map_dev(&d.name.span(), e))?;
                for p in d.ports.as_ref().map(|p| p.get_ref().as_slice()).unwrap_or_default() {
                    let PortRef::Name(n) = p.get_ref() else {
                        return Err(self.err(&p.span(), "team ports are device names (VLAN membership is for bridges)"));
                    };
                    g.enslave(id, id_of(n)).map_err(|e| map_dev(&p.span(), e))?;
                }
                id
            }
            "bridge" => {
                let filtering = d.vlan_filtering.as_ref().is_some_and(|v| *v.get_ref());
                let id = g.add_bridge(name, filtering).map_err(|e| map_dev(&d.name.span(), e))?;
                for p in d.ports.as_ref().map(|p| p.get_ref().as_slice()).unwrap_or_default() {
                    let (port, vlans) = match p.get_ref() {
                        PortRef::Name(n) => (id_of(n), PortVlans::default_vlan()),
                        PortRef::Table(t) => {
                            let n = t.name.as_ref().ok_or_else(|| self.err(&p.span(), "a bridge port needs `name`"))?;
                            (id_of(n.get_ref()), self.port_vlans(t)?)
                        }
                    };
                    g.enslave(id, port).map_err(|e| map_dev(&p.span(), e))?;
                    g.set_bridge_port_vlans(port, vlans).map_err(|e| map_dev(&p.span(), e))?;
                }
                if let Some(s) = &d.self_vlans {
                    let vlans = match s.get_ref() {
                        PortRef::Table(t) if t.name.is_none() => self.port_vlans(t)?,
                        _ => {
                            return Err(
                                self.err(&s.span(), "`self` is a table { pvid, untagged, tagged } without name")
                            );
                        }
                    };
                    g.set_bridge_port_vlans(id, vlans).map_err(|e| map_dev(&s.span(), e))?;
                }
                if let Some(b) = g.kind_as_mut::<Bridge>(id) {
                    if let Some(a) = &d.ageing {
                        b.ageing_ns = seconds_ns(*a.get_ref())
                            .ok_or_else(|| self.err(&a.span(), "ageing is a positive number of seconds"))?;
                    }
                    if let Some(m) = &d.fdb_max {
                        b.max_entries = *m.get_ref() as usize;
                    }
                }
                id
            }
            _ => unreachable!("kinds checked before building"),
        };
        self.device_settings(g, id, d)?;
        Ok(id)
    }

    fn driver(
        &self,
        d: &DeviceSpec,
        opts: &BuildOptions,
        port_index: usize,
    ) -> Result<Box<dyn PortDriver>, TopologyError> {
        let check = match &d.features_check {
            None => FeaturesCheck::Any,
            Some(c) => match c.get_ref().as_str() {
                "any" => FeaturesCheck::Any,
                "vlan" => FeaturesCheck::Vlan,
                other => return Err(self.err(&c.span(), format!("unknown features_check `{other}` (any, vlan)"))),
            },
        };
        let memory = || Box::new(MemoryDriver::full().with_check(check).with_mode(opts.memory_mode));
        // Only AF_PACKET ports use it (their fanout group).
        #[cfg(not(any(feature = "tap", feature = "tun", feature = "af-packet")))]
        let _ = port_index;
        let Some(spec) = &d.driver else { return Ok(memory()) };
        let (kind, span, table) = match spec.get_ref() {
            DriverSpec::Name(n) => (n.as_str(), spec.span(), None),
            DriverSpec::Table(t) => (t.kind.get_ref().as_str(), t.kind.span(), Some(&**t)),
        };
        if let Some((_, feature, false)) = DRIVER_FEATURES.iter().find(|(k, ..)| *k == kind) {
            return Err(self.err(
                &span,
                format!("driver kind \"{kind}\" is not built in: enable the superpacket-engine feature \"{feature}\""),
            ));
        }
        if let Some(t) = table {
            // Keys that belong to other driver kinds.
            let allowed: &[&str] = match kind {
                "pcap" => &["path", "input"],
                "tap" | "tun" => &["name", "netns", "offloads"],
                "af_packet" => &["interface", "netns", "qdisc_bypass", "batch", "ring"],
                "pv" => &["socket", "offloads", "strategy", "header_info", "ring", "batch"],
                _ => &[],
            };
            let keys = [
                ("path", &t.path),
                ("input", &t.input),
                ("name", &t.name),
                ("interface", &t.interface),
                ("netns", &t.netns),
                ("socket", &t.socket),
                ("strategy", &t.strategy),
            ];
            let spans = [
                ("offloads", t.offloads.as_ref().map(Spanned::span)),
                ("qdisc_bypass", t.qdisc_bypass.as_ref().map(Spanned::span)),
                ("batch", t.batch.as_ref().map(Spanned::span)),
                ("header_info", t.header_info.as_ref().map(Spanned::span)),
                ("ring", t.ring.as_ref().map(Spanned::span)),
            ];
            let keys = keys.iter().map(|(k, v)| (*k, v.as_ref().map(Spanned::span))).chain(spans);
            for (key, v) in keys {
                if let Some(v) = v
                    && !allowed.contains(&key)
                    && matches!(kind, "memory" | "pcap" | "tap" | "tun" | "af_packet" | "pv")
                {
                    let at = key_span(&self.src, &spec.span(), key).unwrap_or(v);
                    return Err(self.err(&at, format!("key `{key}` does not apply to a {kind} driver")));
                }
            }
        }
        match kind {
            "memory" => Ok(memory()),
            "pcap" => {
                let t = table.ok_or_else(|| self.err(&span, "a pcap driver is a table { kind = \"pcap\", path }"))?;
                let path = t.path.as_ref().ok_or_else(|| self.err(&span, "a pcap driver needs `path`"))?;
                let resolve = |p: &str| match &opts.base_dir {
                    Some(b) if Path::new(p).is_relative() => b.join(p),
                    _ => PathBuf::from(p),
                };
                let input = t.input.as_ref().map(|i| resolve(i.get_ref()));
                let drv = PcapDriver::new(&resolve(path.get_ref()), input.as_deref(), NetdevFeatures::FULL_NIC)
                    .map_err(|e| {
                        let at = match (&t.input, e.message.contains(path.get_ref().as_str())) {
                            (Some(i), false) => i.span(),
                            _ => path.span(),
                        };
                        self.err(&at, format!("pcap driver: {e}"))
                    })?;
                if !matches!(check, FeaturesCheck::Any) {
                    return Err(self.err(&span, "a pcap driver parses any VLAN depth: features_check must be `any`"));
                }
                Ok(Box::new(drv))
            }
            #[cfg(any(feature = "tap", feature = "tun", feature = "af-packet"))]
            "tap" | "tun" | "af_packet" => self.kernel_port(kind, &span, table, opts, port_index),
            #[cfg(feature = "pv")]
            "pv" => {
                let t = table.ok_or_else(|| {
                    self.err(&span, "a pv driver is a table { kind = \"pv\", socket = \"/path.sock\" }")
                })?;
                let pv = self.pv_options(t, opts, &span)?;
                if opts.workers > 1 {
                    return Err(self.err(
                        &span,
                        format!(
                            "a pv port serves its client from one worker; run with one worker (asked for {})",
                            opts.workers
                        ),
                    ));
                }
                let at = t.socket.as_ref().map_or(span.clone(), Spanned::span);
                PvPortDriver::open(&pv)
                    .map(|d| Box::new(d) as Box<dyn PortDriver>)
                    .map_err(|e| self.err(&at, format!("pv driver: {e}")))
            }
            other => Err(self.err(&span, format!("unknown driver `{other}` (memory, pcap, tap, tun, af_packet, pv)"))),
        }
    }

    /// A port on a kernel device: `tap` or `tun` (the device `name`,
    /// created if missing) or `af_packet` (an existing `interface`), in the
    /// namespace `netns` if given. Only kinds whose feature is built get here.
    #[cfg(any(feature = "tap", feature = "tun", feature = "af-packet"))]
    fn kernel_port(
        &self,
        kind: &str,
        span: &Range<usize>,
        table: Option<&DriverTable>,
        opts: &BuildOptions,
        port_index: usize,
    ) -> Result<Box<dyn PortDriver>, TopologyError> {
        let (key, example) =
            if kind == "af_packet" { ("interface", "interface = \"veth0\"") } else { ("name", "name = \"sp0\"") };
        let t = table
            .ok_or_else(|| self.err(span, format!("a {kind} driver is a table {{ kind = \"{kind}\", {example} }}")))?;
        let dev = if kind == "af_packet" { &t.interface } else { &t.name };
        let dev = dev.as_ref().ok_or_else(|| self.err(span, format!("a {kind} driver needs `{key}`")))?;
        let ns = match &t.netns {
            None => None,
            Some(n) => Some(crate::io::NetNs::attach(n.get_ref()).map_err(|e| {
                self.err(&n.span(), format!("{kind} driver: network namespace `{}`: {e}", n.get_ref()))
            })?),
        };
        let (name, ns) = (dev.get_ref().as_str(), ns.as_ref());
        #[cfg(not(feature = "af-packet"))]
        let _ = port_index;
        let opened: Result<Box<dyn PortDriver>, super::port::DriverError> = match kind {
            #[cfg(feature = "tap")]
            "tap" => TapDriver::open_with(name, ns, &self.tap_options(kind, t, opts)?).map(|d| Box::new(d) as _),
            #[cfg(feature = "tun")]
            "tun" => TunDriver::open_with(name, ns, &self.tap_options(kind, t, opts)?).map(|d| Box::new(d) as _),
            #[cfg(feature = "af-packet")]
            "af_packet" => PacketSocketDriver::open_with(name, ns, &self.packet_options(t, opts, port_index)?)
                .map(|d| Box::new(d) as _),
            other => return Err(self.err(span, format!("driver kind \"{other}\" is not built in"))),
        };
        opened.map_err(|e| {
            let hint = if crate::io::privileges_available().is_err() { " (needs root: CAP_NET_ADMIN)" } else { "" };
            self.err(&dev.span(), format!("{kind} driver: {e}{hint}"))
        })
    }

    /// The options of a `tap` or `tun` port.
    #[cfg(any(feature = "tap", feature = "tun"))]
    fn tap_options(&self, kind: &str, t: &DriverTable, opts: &BuildOptions) -> Result<TapPortOptions, TopologyError> {
        let mut o = TapPortOptions { multi_queue: opts.workers > 1, ..TapPortOptions::default() };
        if let Some(list) = &t.offloads {
            o.offloads = 0;
            for name in list.get_ref() {
                o.offloads |= match name.get_ref().as_str() {
                    "csum" => TUN_F_CSUM,
                    "tso4" => TUN_F_TSO4,
                    "tso6" => TUN_F_TSO6,
                    "tso-ecn" => TUN_F_TSO_ECN,
                    "uso" => TUN_F_USO4 | TUN_F_USO6,
                    other => {
                        return Err(self.err(
                            &name.span(),
                            format!(
                                "unknown {} offload `{other}` (csum, tso4, tso6, tso-ecn, uso)",
                                kind.to_ascii_uppercase()
                            ),
                        ));
                    }
                };
            }
        }
        if let Some(over) = opts.tap_offloads {
            o.offloads = over;
        }
        Ok(o)
    }

    #[cfg(feature = "pv")]
    fn pv_options(
        &self,
        t: &DriverTable,
        opts: &BuildOptions,
        span: &Range<usize>,
    ) -> Result<PvPortOptions, TopologyError> {
        let socket = t.socket.as_ref().ok_or_else(|| self.err(span, "a pv driver needs `socket`"))?;
        let path = Path::new(socket.get_ref());
        let path = match &opts.base_dir {
            Some(b) if path.is_relative() => b.join(path),
            _ => path.to_path_buf(),
        };
        let mut o = PvPortOptions::new(path);
        if let Some(s) = &t.strategy {
            o.strategy = TxStrategy::parse(s.get_ref()).ok_or_else(|| {
                self.err(
                    &s.span(),
                    format!("unknown pv strategy `{}` (swcsum-direct, offload-indirect, direct-nocsum)", s.get_ref()),
                )
            })?;
        }
        if let Some(list) = &t.offloads {
            let mut f = o.features & !(pv_proto::ALL_FEATURES & !pv_proto::REQUIRED);
            f |= pv_proto::F_RING_EVENT_IDX | pv_proto::F_GUEST_HDRLEN;
            for name in list.get_ref() {
                f |= match name.get_ref().as_str() {
                    "csum" => pv_proto::F_CSUM | pv_proto::F_GUEST_CSUM,
                    "tso4" => pv_proto::F_HOST_TSO4 | pv_proto::F_GUEST_TSO4,
                    "tso6" => pv_proto::F_HOST_TSO6 | pv_proto::F_GUEST_TSO6,
                    "tso-ecn" => pv_proto::F_HOST_ECN | pv_proto::F_GUEST_ECN,
                    "uso" => pv_proto::F_HOST_USO | pv_proto::F_GUEST_USO4 | pv_proto::F_GUEST_USO6,
                    other => {
                        return Err(self.err(
                            &name.span(),
                            format!("unknown pv offload `{other}` (csum, tso4, tso6, tso-ecn, uso)"),
                        ));
                    }
                };
            }
            o.features = f;
        }
        if t.header_info.as_ref().is_some_and(|h| !*h.get_ref()) {
            o.features &= !pv_proto::F_GUEST_HDRLEN;
        }
        if let Some(r) = &t.ring {
            let n = *r.get_ref();
            if !(2..=u32::from(PV_MAX_RING)).contains(&n) || !n.is_power_of_two() {
                return Err(self.err(&r.span(), format!("ring {n} is not a power of two in 2..={PV_MAX_RING}")));
            }
            o.ring = n as u16;
        }
        if let Some(b) = &t.batch {
            o.batch = self.batch(b, MAX_PV_BATCH)?;
        }
        Ok(o)
    }

    /// A `batch` key: 1..=`max`.
    #[cfg(any(feature = "pv", feature = "af-packet"))]
    fn batch(&self, b: &Spanned<u32>, max: usize) -> Result<usize, TopologyError> {
        let n = *b.get_ref() as usize;
        if !(1..=max).contains(&n) {
            return Err(self.err(&b.span(), format!("batch {n} is outside 1..={max}")));
        }
        Ok(n)
    }

    #[cfg(feature = "af-packet")]
    fn packet_options(
        &self,
        t: &DriverTable,
        opts: &BuildOptions,
        port_index: usize,
    ) -> Result<PacketPortOptions, TopologyError> {
        let mut o = PacketPortOptions {
            qdisc_bypass: t.qdisc_bypass.as_ref().is_some_and(|b| *b.get_ref()),
            fanout_group: (opts.workers > 1).then(|| opts.fanout_group.wrapping_add(port_index as u16)),
            ..PacketPortOptions::default()
        };
        if let Some(b) = &t.batch {
            o.batch = self.batch(b, MAX_BATCH)?;
        }
        if let Some(r) = &t.ring {
            let n = *r.get_ref() as usize;
            if n > MAX_RX_RING_FRAMES {
                return Err(self.err(&r.span(), format!("ring {n} is outside 0..={MAX_RX_RING_FRAMES} frames")));
            }
            o.rx_ring_frames = n;
        }
        if let Some(b) = opts.packet_batch {
            o.batch = b.clamp(1, MAX_BATCH);
        }
        Ok(o)
    }

    /// True if a port has a pcap driver.
    pub fn has_pcap_ports(&self) -> bool {
        self.spec.devices.iter().any(|d| match d.driver.as_ref().map(Spanned::get_ref) {
            Some(DriverSpec::Name(n)) => n == "pcap",
            Some(DriverSpec::Table(t)) => t.kind.get_ref() == "pcap",
            None => false,
        })
    }

    /// True if some port lives in a named network namespace (`netns = ...`):
    /// reopening it needs `setns`, hence CAP_SYS_ADMIN.
    pub fn uses_named_netns(&self) -> bool {
        self.spec.devices.iter().any(|d| match d.driver.as_ref().map(Spanned::get_ref) {
            Some(DriverSpec::Table(t)) => t.netns.is_some(),
            _ => false,
        })
    }

    /// Names of the ports with `gro = true` (software GRO on ingress).
    pub fn gro_ports(&self) -> Vec<String> {
        self.spec
            .devices
            .iter()
            .filter(|d| d.gro.as_ref().is_some_and(|g| *g.get_ref()))
            .map(|d| d.name.get_ref().clone())
            .collect()
    }

    fn port_vlans(&self, t: &BridgePortSpec) -> Result<PortVlans, TopologyError> {
        let mut vlans: Vec<(u16, bool)> = Vec::new();
        for (list, untagged) in [(&t.untagged, true), (&t.tagged, false)] {
            for v in list {
                let vid = *v.get_ref();
                if !(1..=4094).contains(&vid) {
                    return Err(self.err(&v.span(), format!("VLAN id {vid} is outside 1..=4094")));
                }
                if vlans.iter().any(|(x, _)| i64::from(*x) == vid) {
                    return Err(self.err(&v.span(), format!("VLAN {vid} is listed twice")));
                }
                vlans.push((vid as u16, untagged));
            }
        }
        let pvid = match &t.pvid {
            None => None,
            Some(p) => {
                let vid = *p.get_ref();
                if !vlans.iter().any(|(x, _)| i64::from(*x) == vid) {
                    return Err(self.err(&p.span(), format!("pvid {vid} is not in `untagged` or `tagged`")));
                }
                Some(vid as u16)
            }
        };
        if vlans.is_empty() && t.pvid.is_none() && t.name.is_some() {
            // `{ name = "x" }` alone: Linux's default membership.
            return Ok(PortVlans::default_vlan());
        }
        Ok(PortVlans { pvid, vlans })
    }

    fn device_settings(&self, g: &mut Graph, id: DeviceId, d: &DeviceSpec) -> Result<(), TopologyError> {
        if let Some(m) = &d.mtu {
            let mtu = *m.get_ref() as usize;
            if !(68..=65535).contains(&mtu) {
                return Err(self.err(&m.span(), format!("MTU {mtu} is outside 68..=65535")));
            }
            g.set_mtu(id, mtu);
        }
        if let Some(m) = &d.mac {
            let mac = parse_mac(m.get_ref())
                .ok_or_else(|| self.err(&m.span(), format!("bad MAC address `{}`", m.get_ref())))?;
            if !mac.is_unicast() {
                return Err(self.err(&m.span(), format!("MAC address `{}` is not unicast", m.get_ref())));
            }
            g.set_mac(id, mac);
        }
        if let Some(f) = &d.features {
            let (mut on, mut off) = (NetdevFeatures::EMPTY, NetdevFeatures::EMPTY);
            for (name, v) in f.get_ref() {
                let feat = NetdevFeatures::from_name(name).ok_or_else(|| {
                    let at = key_span(&self.src, &f.span(), name).unwrap_or_else(|| v.span());
                    self.err(
                        &at,
                        format!("unknown feature `{name}` (use `ethtool -k` names, e.g. tx-tcp-segmentation)"),
                    )
                })?;
                if *v.get_ref() {
                    on = on | feat;
                } else {
                    off = off | feat;
                }
            }
            g.set_features(id, on, off);
        }
        if d.gso_max_size.is_some() || d.gso_max_segs.is_some() {
            let cur = g.device(id).feat;
            let size = d.gso_max_size.as_ref().map_or(cur.gso_max_size, |s| *s.get_ref() as usize);
            let segs = d.gso_max_segs.as_ref().map_or(cur.gso_max_segs, |s| *s.get_ref());
            g.set_gso_limits(id, size, segs);
        }
        if let Some(c) = &d.features_check
            && let Some(check) = match c.get_ref().as_str() {
                "any" => Some(FeaturesCheck::Any),
                "vlan" => Some(FeaturesCheck::Vlan),
                _ => None,
            }
        {
            g.set_features_check(id, check);
        }
        Ok(())
    }
}

/// The span of key `name` inside the table at `table` (for errors about a
/// key of a map whose keys carry no span).
fn key_span(src: &str, table: &Range<usize>, name: &str) -> Option<Range<usize>> {
    let body = src.get(table.clone())?;
    let mut from = 0;
    while let Some(p) = body[from..].find(name) {
        let at = from + p;
        let before = body[..at].chars().next_back();
        let after = body[at + name.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let quoted = before == Some('"') && after == Some('"');
        if quoted || (boundary(before) && boundary(after)) {
            let start = table.start + at;
            return Some(start..start + name.len());
        }
        from = at + name.len();
    }
    None
}

fn seconds_ns(s: f64) -> Option<u64> {
    (s.is_finite() && s > 0.0 && s < 1e9).then_some((s * 1e9) as u64)
}

/// Parses `aa:bb:cc:dd:ee:ff` (or with `-`).
pub fn parse_mac(s: &str) -> Option<MacAddr> {
    let mut out = [0u8; 6];
    let mut n = 0;
    for part in s.split([':', '-']) {
        if n == 6 || part.len() != 2 {
            return None;
        }
        out[n] = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(MacAddr(out))
}

/// Parses `addr/len`; with `host`, the address part may have host bits.
fn parse_prefix(s: &str, host: bool) -> Result<(IpAddr, u8), String> {
    let (a, l) = s.split_once('/').ok_or("expected address/prefix-length")?;
    let addr: IpAddr = a.parse().map_err(|_| format!("`{a}` is not an IP address"))?;
    let len: u8 = l.parse().map_err(|_| format!("`{l}` is not a prefix length"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(format!("prefix length {len} is more than {max}"));
    }
    if !host {
        let masked = match addr {
            IpAddr::V4(v) => {
                let m = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len)) };
                IpAddr::V4((u32::from(v) & m).into())
            }
            IpAddr::V6(v) => {
                let m = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len)) };
                IpAddr::V6((u128::from(v) & m).into())
            }
        };
        if masked != addr {
            return Err(format!("host bits set (network is {masked}/{len})"));
        }
    }
    Ok((addr, len))
}
