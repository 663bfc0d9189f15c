//! The TOML schema of a topology file: the structures serde fills
//! ([`TopologySpec`] and its parts, each keeping the byte spans of its keys
//! and values for errors) and the span helpers.
//!
//! Every table refuses keys it does not know (`deny_unknown_fields`), except
//! the driver table of a kind no built-in driver has: its keys belong to
//! the factory registered for that kind ([`super::DriverRegistry`]), so it
//! is kept whole as a [`CustomDriverTable`] (see
//! [`Topology::parse`](super::Topology::parse)).

use super::TopologyError;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};
/// 1-based line and column of byte offset `at` in `src`.
pub fn line_col(src: &str, at: usize) -> (usize, usize) {
    let at = at.min(src.len());
    let before = &src.as_bytes()[..at];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = at - before.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, col)
}

/// Parses a topology file into its [`TopologySpec`].
///
/// Serde reads a table key by key (in sorted order here) and cannot know
/// whether `colour = 1` is an unknown key before it has seen `kind`. So the
/// driver tables of kinds that are not built in are taken out of the parsed
/// document first, the strict schema reads the rest (unknown keys of a
/// built-in driver are refused at the key, as everywhere), and those tables
/// come back as [`DriverSpec::Custom`]. A [`TopologySpec`] deserialized by
/// other means treats every driver table strictly.
///
/// # Errors
/// A syntax or type error, naming its line.
pub(super) fn parse_spec(src: &str) -> Result<TopologySpec, TopologyError> {
    let located = |e: toml::de::Error, or: Option<Range<usize>>| {
        let span = e.span().or(or);
        let mut t = TopologyError::at(src, &span.clone().unwrap_or(0..0), e.message().trim_end().to_string());
        if span.is_none() {
            (t.line, t.column) = (0, 0);
        }
        t
    };
    let mut doc = DeTable::parse(src).map_err(|e| located(e, None))?;
    let custom = take_custom_drivers(doc.get_mut());
    let mut spec = TopologySpec::deserialize(toml::de::Deserializer::from(doc)).map_err(|e| located(e, None))?;
    for (i, table) in custom {
        let span = table.span();
        let driver = custom_driver(table).map_err(|e| located(e, Some(span)))?;
        // Same index: `device` is the array `Vec<DeviceSpec>` was read from.
        if let Some(d) = spec.devices.get_mut(i) {
            d.driver = Some(driver);
        }
    }
    Ok(spec)
}

/// Removes from `doc` the `driver` tables whose `kind` is a string naming
/// no built-in driver: (index of the device in `[[device]]`, the table).
fn take_custom_drivers<'i>(doc: &mut DeTable<'i>) -> Vec<(usize, Spanned<DeValue<'i>>)> {
    let mut out = Vec::new();
    let Some(DeValue::Array(devices)) = doc.get_mut("device").map(Spanned::get_mut) else { return out };
    for (i, device) in devices.iter_mut().enumerate() {
        let DeValue::Table(device) = device.get_mut() else { continue };
        let custom = match device.get("driver").map(Spanned::get_ref) {
            Some(DeValue::Table(t)) => matches!(
                t.get("kind").map(Spanned::get_ref),
                Some(DeValue::String(k)) if !BUILTIN_DRIVER_KINDS.contains(&k.as_ref())
            ),
            _ => false,
        };
        if custom && let Some(table) = device.remove("driver") {
            out.push((i, table));
        }
    }
    out
}

/// A driver table [`take_custom_drivers`] took out, as a [`CustomDriverTable`].
fn custom_driver(table: Spanned<DeValue<'_>>) -> Result<Spanned<DriverSpec>, toml::de::Error> {
    use serde::de::IntoDeserializer;
    let span = table.span();
    let DeValue::Table(entries) = table.into_inner() else { unreachable!("take_custom_drivers takes tables only") };
    let (mut kind, mut keys, mut key_spans) = (None, toml::Table::new(), BTreeMap::new());
    for (key, value) in entries {
        if key.get_ref() == "kind" {
            kind = Some(Spanned::<String>::deserialize(value.into_deserializer())?);
            continue;
        }
        key_spans.insert(key.get_ref().to_string(), key.span());
        keys.insert(key.into_inner().into_owned(), toml::Value::deserialize(value.into_deserializer())?);
    }
    let kind = kind.expect("take_custom_drivers takes tables with a `kind`");
    Ok(Spanned::new(span, DriverSpec::Custom(Box::new(CustomDriverTable { kind, keys, key_spans }))))
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
    /// `[lab]`: the namespaces and links the file's ports expect, made and
    /// removed by `superpacket lab up|down` (its schema and checks are the
    /// lab's: `superpacket_lab::plumbing`). The engine does not read it.
    #[serde(default)]
    pub lab: Option<de::IgnoredAny>,
}

/// One `[[device]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct DeviceSpec {
    /// Unique name.
    pub name: Spanned<String>,
    /// `port`, `vlan`, `bond`, `team`, `bridge`, `xconnect`, `vxlan` or `geneve`.
    pub kind: Spanned<String>,
    /// Port: `memory` (default), `{ kind = "pcap", path, input }`,
    /// `{ kind = "tap", name, netns }`, `{ kind = "tun", name, netns }`,
    /// `{ kind = "af_packet", interface, netns }`, `{ kind = "vhost-user", socket }`,
    /// or a registered third-party kind with its own keys.
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
    /// VLAN: the VLAN id. VXLAN/Geneve: the VNI.
    pub id: Option<Spanned<i64>>,
    /// VXLAN/Geneve: the device carrying the local address (the underlay).
    pub underlay: Option<Spanned<String>>,
    /// VXLAN/Geneve: the local endpoint address (one of the underlay's).
    pub local: Option<Spanned<String>>,
    /// VXLAN/Geneve: the default remote endpoint.
    pub remote: Option<Spanned<String>>,
    /// VXLAN/Geneve: the UDP port (4789 / 6081).
    pub dstport: Option<Spanned<u16>>,
    /// VXLAN/Geneve: outer UDP checksum on transmit (default: off over
    /// IPv4, on over IPv6).
    pub udp_checksum: Option<Spanned<bool>>,
    /// VXLAN/Geneve over IPv6: accept a zero outer UDP checksum.
    pub udp6_zero_checksum_rx: Option<Spanned<bool>>,
    /// VXLAN/Geneve: learn inner source MACs (default true).
    pub learning: Option<Spanned<bool>>,
    /// VXLAN/Geneve: outer TTL / hop limit (default 64).
    pub ttl: Option<Spanned<i64>>,
    /// VXLAN/Geneve: static FDB entries `{ mac, remote }`.
    pub fdb: Option<Vec<Spanned<TunnelFdbSpec>>>,
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
    /// Xconnect: its two port names.
    pub ports: Option<Spanned<Vec<Spanned<PortRef>>>>,
    /// Bridge: VLAN filtering (default false).
    pub vlan_filtering: Option<Spanned<bool>>,
    /// Bridge: FDB ageing time in seconds (default 300).
    pub ageing: Option<Spanned<f64>>,
    /// Bridge, VXLAN/Geneve: most (learned) FDB entries (default 4096).
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

/// A static FDB entry of a tunnel device: frames for `mac` go to `remote`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelFdbSpec {
    /// Inner destination MAC.
    pub mac: Spanned<String>,
    /// Remote endpoint address.
    pub remote: Spanned<String>,
}

/// A port driver: a name, or a table with `kind` and its options.
#[derive(Debug)]
pub enum DriverSpec {
    /// `driver = "memory"`.
    Name(String),
    /// `driver = { kind = "pcap", path = "...", input = "..." }` (or `tap`,
    /// `tun`, `af_packet`, `vhost-user` with their keys).
    Table(Box<DriverTable>),
    /// `driver = { kind = "counting", step = 3 }`: a kind no built-in driver
    /// has, with keys only its factory knows.
    Custom(Box<CustomDriverTable>),
}

/// The driver kinds whose table is a [`DriverTable`]: the built-in drivers,
/// compiled in or not (a kind whose cargo feature is off still gets its own
/// error, not an unknown key's).
pub const BUILTIN_DRIVER_KINDS: [&str; 6] = ["memory", "pcap", "tap", "tun", "af_packet", "vhost-user"];

/// The table form of a built-in driver ([`BUILTIN_DRIVER_KINDS`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverTable {
    /// `memory`, `pcap`, `tap`, `tun`, `af_packet` or `vhost-user`.
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
    /// `uso`; default all of them); vhost-user: the offloads offered to the
    /// guest, both directions (same names).
    pub offloads: Option<Spanned<Vec<Spanned<String>>>>,
    /// af_packet: `PACKET_QDISC_BYPASS`.
    pub qdisc_bypass: Option<Spanned<bool>>,
    /// af_packet: frames per batched receive or send call.
    pub batch: Option<Spanned<u32>>,
    /// vhost-user: the socket the engine listens on (or connects to;
    /// relative to the topology file).
    pub socket: Option<Spanned<String>>,
    /// vhost-user: `server` (default: the engine listens) or `client` (the
    /// engine connects to a listening VMM, and again after it goes away).
    pub mode: Option<Spanned<String>>,
    /// vhost-user: most descriptors per virtqueue (a power of two,
    /// 64..=1024; default 1024).
    /// af_packet: frames of the TPACKET_V2 receive ring (0: no ring,
    /// `recvmmsg`; default 128, 68 KiB each).
    pub ring: Option<Spanned<u32>>,
    /// vhost-user: microseconds the port keeps polling the guest's transmit
    /// queue with kicks off after finding it empty (0..=100000; default 0:
    /// kicks on at once, the worker sleeps).
    pub busy_poll_us: Option<Spanned<u32>>,
}

/// The table of a driver kind no built-in driver has (`driver = { kind =
/// "counting", step = 3 }`): every key but `kind` is kept, for the factory
/// registered for the kind ([`super::DriverRegistry`]) to read and check.
#[derive(Debug, Clone)]
pub struct CustomDriverTable {
    /// The driver kind.
    pub kind: Spanned<String>,
    /// Every other key of the table, with its value.
    pub keys: toml::Table,
    /// Where each key of `keys` is, for errors about it.
    pub key_spans: BTreeMap<String, Range<usize>>,
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

/// The device kinds.
pub(super) const KINDS: [&str; 8] = ["port", "vlan", "bond", "team", "bridge", "xconnect", "vxlan", "geneve"];

/// Keys of `[[device]]` that apply only to some kinds: (key, kinds).
pub(super) const KIND_KEYS: &[(&str, &[&str])] = &[
    ("driver", &["port"]),
    ("features_check", &["port"]),
    ("gso_max_size", &["port"]),
    ("gso_max_segs", &["port"]),
    ("gro", &["port"]),
    ("lower", &["vlan"]),
    ("protocol", &["vlan"]),
    ("id", &["vlan", "vxlan", "geneve"]),
    ("underlay", &["vxlan", "geneve"]),
    ("local", &["vxlan", "geneve"]),
    ("remote", &["vxlan", "geneve"]),
    ("dstport", &["vxlan", "geneve"]),
    ("udp_checksum", &["vxlan", "geneve"]),
    ("udp6_zero_checksum_rx", &["vxlan", "geneve"]),
    ("learning", &["vxlan", "geneve"]),
    ("ttl", &["vxlan", "geneve"]),
    ("fdb", &["vxlan", "geneve"]),
    ("mode", &["bond"]),
    ("xmit_hash_policy", &["bond"]),
    ("slaves", &["bond"]),
    ("primary", &["bond"]),
    ("runner", &["team"]),
    ("ports", &["team", "bridge", "xconnect"]),
    ("vlan_filtering", &["bridge"]),
    ("ageing", &["bridge"]),
    ("fdb_max", &["bridge", "vxlan", "geneve"]),
    ("self", &["bridge"]),
];

impl DeviceSpec {
    /// The span of kind-specific key `key`, if present.
    pub(super) fn key_span(&self, key: &str) -> Option<Range<usize>> {
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
            "underlay" => self.underlay.as_ref().map(Spanned::span),
            "local" => self.local.as_ref().map(Spanned::span),
            "remote" => self.remote.as_ref().map(Spanned::span),
            "dstport" => self.dstport.as_ref().map(Spanned::span),
            "udp_checksum" => self.udp_checksum.as_ref().map(Spanned::span),
            "udp6_zero_checksum_rx" => self.udp6_zero_checksum_rx.as_ref().map(Spanned::span),
            "learning" => self.learning.as_ref().map(Spanned::span),
            "ttl" => self.ttl.as_ref().map(Spanned::span),
            "fdb" => self.fdb.as_ref().and_then(|f| f.first()).map(Spanned::span),
            "self" => self.self_vlans.as_ref().map(Spanned::span),
            _ => None,
        }
    }

    /// Names of the devices this one is built on, with their spans.
    pub(super) fn deps(&self) -> Vec<(&str, Range<usize>)> {
        let mut v = Vec::new();
        if let Some(l) = &self.lower {
            v.push((l.get_ref().as_str(), l.span()));
        }
        if let Some(u) = &self.underlay {
            v.push((u.get_ref().as_str(), u.span()));
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

/// The span of key `name` inside the table at `table` (for errors about a
/// key of a map whose keys carry no span).
pub(super) fn key_span(src: &str, table: &Range<usize>, name: &str) -> Option<Range<usize>> {
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
