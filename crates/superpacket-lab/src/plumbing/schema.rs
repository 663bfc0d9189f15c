//! The `[lab]` table of a topology file: its TOML structures, and the
//! checked declaration ([`LabSpec`]) they become.
//!
//! The table is read from the same source as the topology (the engine's
//! schema accepts the key and leaves it alone), with `toml`'s byte spans, so
//! every error names its line and column as the topology's errors do
//! ([`TopologyError`]). Unknown keys are errors, as everywhere in a topology.

use serde::Deserialize;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::ops::Range;
use superpacket_engine::device::TopologyError;
use superpacket_engine::device::topology::line_col;
use superpacket_engine::io::netlink::parse_cidr;
use superpacket_engine::io::sys::{check_chars, check_ifname};
use toml::Spanned;

/// The whole file as far as the lab is concerned: every other top-level
/// key is the engine's and is ignored here.
#[derive(Debug, Deserialize)]
struct LabDoc {
    #[serde(default)]
    lab: Option<LabTable>,
}

/// `[lab]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LabTable {
    netns: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    ipv6: Option<Spanned<bool>>,
    #[serde(default, rename = "link")]
    links: Vec<LinkTable>,
    #[serde(default, rename = "route")]
    routes: Vec<RouteTable>,
}

/// `[[lab.link]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkTable {
    kind: Spanned<String>,
    name: Spanned<String>,
    netns: Spanned<String>,
    #[serde(default)]
    mtu: Option<Spanned<u32>>,
    #[serde(default)]
    up: Option<Spanned<bool>>,
    #[serde(default)]
    multi_queue: Option<Spanned<bool>>,
    #[serde(default)]
    addresses: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    peer: Option<Spanned<PeerTable>>,
    #[serde(default)]
    ports: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    id: Option<Spanned<u32>>,
    #[serde(default)]
    local: Option<Spanned<String>>,
    #[serde(default)]
    remote: Option<Spanned<String>>,
    #[serde(default)]
    dstport: Option<Spanned<u16>>,
    #[serde(default)]
    dev: Option<Spanned<String>>,
    #[serde(default)]
    udp_checksum: Option<Spanned<bool>>,
}

/// A veth's `peer = { name, netns, addresses }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PeerTable {
    name: Spanned<String>,
    #[serde(default)]
    netns: Option<Spanned<String>>,
    #[serde(default)]
    addresses: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[[lab.route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteTable {
    netns: Spanned<String>,
    to: Spanned<String>,
    #[serde(default)]
    via: Option<Spanned<String>>,
    #[serde(default)]
    dev: Option<Spanned<String>>,
}

// ------------------------------------------------------------ the checked model

/// What a lab declares, checked: namespaces, links, addresses, routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSpec {
    /// Network namespaces to create, in order.
    pub netns: Vec<String>,
    /// IPv6 on (default) or disabled in every namespace.
    pub ipv6: bool,
    /// Links, created in order.
    pub links: Vec<LinkDecl>,
    /// Routes, added in order once every link is up.
    pub routes: Vec<RouteDecl>,
    /// Line of the `[lab]` table's `netns` key (for messages).
    pub line: usize,
}

/// The kind of a declared link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A persistent TAP with a virtio-net header (`ip tuntap add mode tap vnet_hdr`).
    Tap,
    /// A persistent TUN with a virtio-net header (`ip tuntap add mode tun vnet_hdr`).
    Tun,
    /// A veth pair (one end in each of two namespaces, or both in one).
    Veth,
    /// A Linux bridge.
    Bridge,
    /// A Linux VXLAN device over a link of its namespace (`ip link add
    /// NAME type vxlan id VNI local L remote R dstport P dev DEV`).
    Vxlan,
}

impl LinkKind {
    /// `tap`, `tun`, `veth`, `bridge` or `vxlan`.
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Tap => "tap",
            LinkKind::Tun => "tun",
            LinkKind::Veth => "veth",
            LinkKind::Bridge => "bridge",
            LinkKind::Vxlan => "vxlan",
        }
    }

    const ALL: [LinkKind; 5] = [LinkKind::Tap, LinkKind::Tun, LinkKind::Veth, LinkKind::Bridge, LinkKind::Vxlan];
}

/// One `[[lab.link]]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDecl {
    /// Its kind.
    pub kind: LinkKind,
    /// Interface name.
    pub name: String,
    /// The namespace it is created in.
    pub netns: String,
    /// MTU (a veth: both ends).
    pub mtu: Option<u32>,
    /// Brought up (default; a veth: both ends).
    pub up: bool,
    /// TAP, TUN: `IFF_MULTI_QUEUE` (for `superpacket run --workers N`, N > 1).
    pub multi_queue: bool,
    /// Addresses (IPv6 ones without duplicate address detection).
    pub addresses: Vec<(IpAddr, u8)>,
    /// A veth's other end.
    pub peer: Option<PeerDecl>,
    /// A bridge's ports (links of its namespace).
    pub ports: Vec<String>,
    /// A VXLAN device's settings.
    pub vxlan: Option<VxlanDecl>,
    /// Line of the link's `name`.
    pub line: usize,
}

/// The settings of a `vxlan` link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanDecl {
    /// The VNI (`id`).
    pub id: u32,
    /// Local (outer source) address.
    pub local: IpAddr,
    /// Remote (outer destination) address: the default FDB entry.
    pub remote: IpAddr,
    /// UDP destination port (default 4789).
    pub dstport: u16,
    /// The underlay link (declared earlier in the same namespace).
    pub dev: String,
    /// Outer UDP checksum on transmit (default: off over IPv4, on over
    /// IPv6, as Linux).
    pub udp_checksum: bool,
}

/// One end of a link: the link itself, or a veth's peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End<'a> {
    /// Its namespace.
    pub netns: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its addresses.
    pub addresses: &'a [(IpAddr, u8)],
    /// True for a veth's peer.
    pub is_peer: bool,
}

impl LinkDecl {
    /// The link's ends: itself, and a veth's peer.
    pub fn ends(&self) -> Vec<End<'_>> {
        let mut v = vec![End { netns: &self.netns, name: &self.name, addresses: &self.addresses, is_peer: false }];
        if let Some(p) = &self.peer {
            v.push(End { netns: &p.netns, name: &p.name, addresses: &p.addresses, is_peer: true });
        }
        v
    }
}

/// The other end of a veth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDecl {
    /// Interface name.
    pub name: String,
    /// Its namespace (default: the first end's).
    pub netns: String,
    /// Its addresses.
    pub addresses: Vec<(IpAddr, u8)>,
}

/// One `[[lab.route]]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteDecl {
    /// The namespace whose main table gets the route.
    pub netns: String,
    /// Destination (unspecified for a default route).
    pub dest: IpAddr,
    /// Prefix length (0: default).
    pub prefix: u8,
    /// Gateway.
    pub via: Option<IpAddr>,
    /// Output link.
    pub dev: Option<String>,
    /// Line of the route's `to`.
    pub line: usize,
}

impl RouteDecl {
    /// `default via 10.71.0.1`, `10.9.0.0/16 dev spd-a`: as `ip route` shows it.
    pub fn describe(&self) -> String {
        let mut s = if self.prefix == 0 { "default".to_string() } else { format!("{}/{}", self.dest, self.prefix) };
        if let Some(v) = self.via {
            s += &format!(" via {v}");
        }
        if let Some(d) = &self.dev {
            s += &format!(" dev {d}");
        }
        s
    }
}

/// `addr/len`.
pub fn format_cidr((addr, prefix): (IpAddr, u8)) -> String {
    format!("{addr}/{prefix}")
}

impl LabSpec {
    /// Every interface the lab makes, as (namespace, name): links and veth peers.
    pub fn interfaces(&self) -> Vec<(&str, &str)> {
        let mut v = Vec::new();
        for l in &self.links {
            v.push((l.netns.as_str(), l.name.as_str()));
            if let Some(p) = &l.peer {
                v.push((p.netns.as_str(), p.name.as_str()));
            }
        }
        v
    }

    /// The link (or veth peer) `name` of namespace `netns`, with its kind.
    pub fn interface(&self, netns: &str, name: &str) -> Option<(&LinkDecl, bool)> {
        self.links.iter().find_map(|l| {
            if l.netns == netns && l.name == name {
                Some((l, false))
            } else if l.peer.as_ref().is_some_and(|p| p.netns == netns && p.name == name) {
                Some((l, true))
            } else {
                None
            }
        })
    }
}

/// Parses the `[lab]` table of topology source `src` (`None`: the file
/// declares no lab).
///
/// # Errors
/// A syntax or type error, an unknown key, or a declaration that cannot be
/// made (an undeclared namespace, a bad name or address, a duplicate link,
/// a route through a link the namespace does not have), naming its line.
pub fn parse(src: &str) -> Result<Option<LabSpec>, TopologyError> {
    let doc: LabDoc = toml::from_str(src).map_err(|e| {
        let span = e.span();
        let (line, column) = span.map_or((0, 0), |s| line_col(src, s.start));
        TopologyError { line, column, message: format!("[lab]: {}", e.message().trim_end()) }
    })?;
    let Some(table) = doc.lab else { return Ok(None) };
    Check { src }.lab(table).map(Some)
}

/// Semantic checks, with the source for line numbers.
struct Check<'a> {
    src: &'a str,
}

impl Check<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> TopologyError {
        let (line, column) = line_col(self.src, span.start);
        TopologyError { line, column, message: message.into() }
    }

    fn line(&self, span: Range<usize>) -> usize {
        line_col(self.src, span.start).0
    }

    fn lab(&self, t: LabTable) -> Result<LabSpec, TopologyError> {
        let mut netns = Vec::new();
        if t.netns.get_ref().is_empty() {
            return Err(self.err(t.netns.span(), "[lab] netns: declare at least one namespace"));
        }
        for n in t.netns.get_ref() {
            let name = n.get_ref();
            if check_chars(name).is_err() || name.len() > 64 {
                return Err(self.err(
                    n.span(),
                    format!("namespace name `{name}`: use 1 to 64 of [A-Za-z0-9_.-], not starting with - or ."),
                ));
            }
            if netns.contains(name) {
                return Err(self.err(n.span(), format!("namespace `{name}` declared twice")));
            }
            netns.push(name.clone());
        }
        let ipv6 = t.ipv6.as_ref().is_none_or(|v| *v.get_ref());
        let mut spec = LabSpec { netns, ipv6, links: Vec::new(), routes: Vec::new(), line: self.line(t.netns.span()) };
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        let mut claim = |ns: &str, name: &Spanned<String>| -> Result<(), TopologyError> {
            if !seen.insert((ns.to_string(), name.get_ref().clone())) {
                return Err(self.err(name.span(), format!("interface `{}` declared twice in `{ns}`", name.get_ref())));
            }
            Ok(())
        };
        for l in &t.links {
            let link = self.link(&spec, l)?;
            claim(&link.netns, &l.name)?;
            if let (Some(p), Some(pt)) = (&link.peer, &l.peer) {
                claim(&p.netns, &pt.get_ref().name)?;
            }
            spec.links.push(link);
        }
        // Bridge ports once every link is known (a port may be declared after its bridge).
        for (i, l) in t.links.iter().enumerate() {
            let Some(ports) = &l.ports else { continue };
            let bridge = &spec.links[i];
            for p in ports.get_ref() {
                let port = p.get_ref();
                match spec.interface(&bridge.netns, port) {
                    None => {
                        return Err(self.err(
                            p.span(),
                            format!("bridge `{}`: no link `{port}` declared in `{}`", bridge.name, bridge.netns),
                        ));
                    }
                    Some((d, false)) if d.kind == LinkKind::Bridge => {
                        return Err(self.err(p.span(), format!("bridge `{}`: port `{port}` is a bridge", bridge.name)));
                    }
                    Some(_) => {}
                }
                let masters = spec.links.iter().filter(|b| b.netns == bridge.netns && b.ports.contains(port)).count();
                if masters > 1 || bridge.ports.iter().filter(|q| *q == port).count() > 1 {
                    return Err(self.err(p.span(), format!("`{port}` is a port of more than one bridge (or twice)")));
                }
            }
        }
        for r in &t.routes {
            let route = self.route(&spec, r)?;
            spec.routes.push(route);
        }
        Ok(spec)
    }

    fn namespace(&self, spec: &LabSpec, n: &Spanned<String>) -> Result<String, TopologyError> {
        if spec.netns.contains(n.get_ref()) {
            Ok(n.get_ref().clone())
        } else {
            Err(self.err(
                n.span(),
                format!(
                    "namespace `{}` is not declared in [lab] netns ({}): the lab only makes things in its own namespaces",
                    n.get_ref(),
                    spec.netns.join(", ")
                ),
            ))
        }
    }

    fn ifname(&self, n: &Spanned<String>) -> Result<String, TopologyError> {
        check_ifname(n.get_ref()).map_err(|_| {
            self.err(
                n.span(),
                format!("interface name `{}`: use 1 to 15 of [A-Za-z0-9_.-], not starting with - or .", n.get_ref()),
            )
        })?;
        Ok(n.get_ref().clone())
    }

    fn addresses(
        &self,
        spec: &LabSpec,
        list: &Option<Spanned<Vec<Spanned<String>>>>,
    ) -> Result<Vec<(IpAddr, u8)>, TopologyError> {
        let mut out = Vec::new();
        for a in list.iter().flat_map(|l| l.get_ref()) {
            let text = a.get_ref();
            if !text.contains('/') {
                return Err(self.err(a.span(), format!("address `{text}`: write it as addr/len")));
            }
            let cidr = parse_cidr(text).map_err(|e| self.err(a.span(), format!("address `{text}`: {e}")))?;
            if cidr.0.is_ipv6() && !spec.ipv6 {
                return Err(self.err(a.span(), format!("address `{text}`: IPv6 is off in this lab (ipv6 = false)")));
            }
            if out.contains(&cidr) {
                return Err(self.err(a.span(), format!("address `{text}` given twice")));
            }
            out.push(cidr);
        }
        Ok(out)
    }

    fn link(&self, spec: &LabSpec, l: &LinkTable) -> Result<LinkDecl, TopologyError> {
        let kind = LinkKind::ALL.into_iter().find(|k| k.name() == l.kind.get_ref()).ok_or_else(|| {
            self.err(l.kind.span(), format!("unknown link kind `{}` (tap, tun, veth, bridge, vxlan)", l.kind.get_ref()))
        })?;
        let name = self.ifname(&l.name)?;
        let netns = self.namespace(spec, &l.netns)?;
        let only = |key: &str, span: Option<Range<usize>>, kinds: &[LinkKind]| match span {
            Some(s) if !kinds.contains(&kind) => {
                Err(self.err(s, format!("key `{key}` does not apply to a {} link", kind.name())))
            }
            _ => Ok(()),
        };
        only("multi_queue", l.multi_queue.as_ref().map(Spanned::span), &[LinkKind::Tap, LinkKind::Tun])?;
        only("peer", l.peer.as_ref().map(Spanned::span), &[LinkKind::Veth])?;
        only("ports", l.ports.as_ref().map(Spanned::span), &[LinkKind::Bridge])?;
        let vx = &[LinkKind::Vxlan];
        only("id", l.id.as_ref().map(Spanned::span), vx)?;
        only("local", l.local.as_ref().map(Spanned::span), vx)?;
        only("remote", l.remote.as_ref().map(Spanned::span), vx)?;
        only("dstport", l.dstport.as_ref().map(Spanned::span), vx)?;
        only("dev", l.dev.as_ref().map(Spanned::span), vx)?;
        only("udp_checksum", l.udp_checksum.as_ref().map(Spanned::span), vx)?;
        let vxlan = if kind == LinkKind::Vxlan { Some(self.vxlan(spec, l, &name, &netns)?) } else { None };
        if let Some(m) = &l.mtu
            && !(68..=65535).contains(m.get_ref())
        {
            return Err(self.err(m.span(), format!("MTU {} is outside 68..=65535", m.get_ref())));
        }
        let peer = match &l.peer {
            None if kind == LinkKind::Veth => {
                return Err(self.err(l.name.span(), format!("veth `{name}` needs `peer = {{ name = ... }}`")));
            }
            None => None,
            Some(p) => {
                let p = p.get_ref();
                let peer_name = self.ifname(&p.name)?;
                let peer_ns = match &p.netns {
                    Some(n) => self.namespace(spec, n)?,
                    None => netns.clone(),
                };
                if peer_ns == netns && peer_name == name {
                    return Err(self.err(p.name.span(), format!("veth `{name}`: the peer needs a name of its own")));
                }
                Some(PeerDecl { name: peer_name, netns: peer_ns, addresses: self.addresses(spec, &p.addresses)? })
            }
        };
        Ok(LinkDecl {
            kind,
            name,
            netns,
            mtu: l.mtu.as_ref().map(|m| *m.get_ref()),
            up: l.up.as_ref().is_none_or(|u| *u.get_ref()),
            multi_queue: l.multi_queue.as_ref().is_some_and(|m| *m.get_ref()),
            addresses: self.addresses(spec, &l.addresses)?,
            peer,
            ports: l.ports.iter().flat_map(|p| p.get_ref()).map(|p| p.get_ref().clone()).collect(),
            vxlan,
            line: self.line(l.name.span()),
        })
    }

    /// A `vxlan` link's settings: `id`, `local`, `remote` and `dev` required,
    /// the addresses of one family, `dev` a link declared before it in its
    /// namespace.
    fn vxlan(&self, spec: &LabSpec, l: &LinkTable, name: &str, netns: &str) -> Result<VxlanDecl, TopologyError> {
        let need = |key: &str| self.err(l.name.span(), format!("vxlan `{name}` needs `{key}`"));
        let id = l.id.as_ref().ok_or_else(|| need("id"))?;
        if *id.get_ref() >= 1 << 24 {
            return Err(self.err(id.span(), format!("VNI {} does not fit 24 bits", id.get_ref())));
        }
        let address = |key: &str, v: &Option<Spanned<String>>| -> Result<IpAddr, TopologyError> {
            let v = v.as_ref().ok_or_else(|| need(key))?;
            let a = v
                .get_ref()
                .parse::<IpAddr>()
                .map_err(|_| self.err(v.span(), format!("{key} `{}` is not an IP address", v.get_ref())))?;
            if a.is_unspecified() || a.is_multicast() {
                return Err(self.err(v.span(), format!("{key} {a}: give a unicast address")));
            }
            if a.is_ipv6() && !spec.ipv6 {
                return Err(self.err(v.span(), format!("{key} {a}: IPv6 is off in this lab (ipv6 = false)")));
            }
            Ok(a)
        };
        let local = address("local", &l.local)?;
        let remote = address("remote", &l.remote)?;
        if local.is_ipv4() != remote.is_ipv4() {
            let span = l.remote.as_ref().map_or(l.name.span(), Spanned::span);
            return Err(
                self.err(span, format!("vxlan `{name}`: local {local} and remote {remote} of different families"))
            );
        }
        let dstport = match &l.dstport {
            Some(p) if *p.get_ref() == 0 => return Err(self.err(p.span(), "dstport 0")),
            Some(p) => *p.get_ref(),
            None => superpacket::wire::VXLAN_PORT,
        };
        let dev = l.dev.as_ref().ok_or_else(|| need("dev"))?;
        let dev_name = self.ifname(dev)?;
        if spec.interface(netns, &dev_name).is_none() {
            return Err(self.err(
                dev.span(),
                format!("vxlan `{name}`: no link `{dev_name}` declared before it in `{netns}` (its underlay)"),
            ));
        }
        Ok(VxlanDecl {
            id: *id.get_ref(),
            local,
            remote,
            dstport,
            dev: dev_name,
            udp_checksum: l.udp_checksum.as_ref().map_or(local.is_ipv6(), |c| *c.get_ref()),
        })
    }

    fn route(&self, spec: &LabSpec, r: &RouteTable) -> Result<RouteDecl, TopologyError> {
        let netns = self.namespace(spec, &r.netns)?;
        let via = match &r.via {
            Some(v) => Some(
                v.get_ref()
                    .parse::<IpAddr>()
                    .map_err(|_| self.err(v.span(), format!("gateway `{}` is not an IP address", v.get_ref())))?,
            ),
            None => None,
        };
        let to = r.to.get_ref().as_str();
        let (dest, prefix) = match to {
            "default" => match via {
                Some(IpAddr::V6(_)) => (IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0),
                _ => (IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0),
            },
            "default6" => (IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED), 0),
            cidr => {
                let (addr, prefix) =
                    parse_cidr(cidr).map_err(|e| self.err(r.to.span(), format!("route destination `{cidr}`: {e}")))?;
                (network(addr, prefix), prefix)
            }
        };
        if let Some(v) = via
            && v.is_ipv4() != dest.is_ipv4()
        {
            return Err(self.err(r.to.span(), format!("route `{to}`: gateway and destination of different families")));
        }
        if dest.is_ipv6() && !spec.ipv6 {
            return Err(self.err(r.to.span(), format!("route `{to}`: IPv6 is off in this lab (ipv6 = false)")));
        }
        let dev = match &r.dev {
            Some(d) => {
                let name = self.ifname(d)?;
                if spec.interface(&netns, &name).is_none() {
                    return Err(self.err(d.span(), format!("route `{to}`: no link `{name}` declared in `{netns}`")));
                }
                Some(name)
            }
            None => None,
        };
        if via.is_none() && dev.is_none() {
            return Err(self.err(r.to.span(), format!("route `{to}` needs `via` or `dev` (or both)")));
        }
        Ok(RouteDecl { netns, dest, prefix, via, dev, line: self.line(r.to.span()) })
    }
}

/// `addr` with the host bits beyond `prefix` cleared (the kernel refuses a
/// route whose destination has them set).
fn network(addr: IpAddr, prefix: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(prefix)) };
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = if prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(prefix)) };
            IpAddr::V6((u128::from(a) & mask).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: &str = r#"
mode = "passthrough"

[[device]]
name = "a"
kind = "port"

[lab]
netns = ["ns-a", "ns-t"]

[[lab.link]]
kind = "tap"
name = "tap-a"
netns = "ns-a"
addresses = ["10.1.0.2/24", "fd01::2/64"]

[[lab.link]]
kind = "veth"
name = "t1"
netns = "ns-t"
mtu = 1600
peer = { name = "t2", addresses = ["10.2.0.2/24"] }

[[lab.link]]
kind = "bridge"
name = "br0"
netns = "ns-t"
ports = ["t1"]

[[lab.route]]
netns = "ns-a"
to = "default"
via = "fd01::1"

[[lab.route]]
netns = "ns-a"
to = "10.9.1.7/16"
dev = "tap-a"
"#;

    #[test]
    fn a_full_lab_parses() {
        let spec = parse(LAB).unwrap().unwrap();
        assert_eq!(spec.netns, ["ns-a", "ns-t"]);
        assert!(spec.ipv6);
        assert_eq!(spec.links.len(), 3);
        let veth = &spec.links[1];
        assert_eq!((veth.kind, veth.mtu, veth.up), (LinkKind::Veth, Some(1600), true));
        let peer = veth.peer.as_ref().unwrap();
        assert_eq!((peer.name.as_str(), peer.netns.as_str()), ("t2", "ns-t"));
        assert_eq!(spec.links[2].ports, ["t1"]);
        assert_eq!(spec.routes[0].describe(), "default via fd01::1");
        assert!(spec.routes[0].dest.is_ipv6());
        assert_eq!(spec.routes[1].describe(), "10.9.0.0/16 dev tap-a");
        assert_eq!(spec.links[0].line, 13);
        assert_eq!(spec.interfaces(), [("ns-a", "tap-a"), ("ns-t", "t1"), ("ns-t", "t2"), ("ns-t", "br0")]);
    }

    const VXLAN_LAB: &str = r#"
[lab]
netns = ["ns-b"]

[[lab.link]]
kind = "tap"
name = "u0"
netns = "ns-b"
addresses = ["10.96.0.2/24"]

[[lab.link]]
kind = "vxlan"
name = "vx0"
netns = "ns-b"
id = 42
local = "10.96.0.2"
remote = "10.96.0.1"
dev = "u0"
mtu = 1400
addresses = ["10.95.0.2/24", "fd95::2/64"]

[[lab.link]]
kind = "vxlan"
name = "vx6"
netns = "ns-b"
id = 7
local = "fd96::2"
remote = "fd96::1"
dstport = 8472
dev = "u0"
udp_checksum = false
"#;

    #[test]
    fn a_vxlan_link_parses_with_linux_defaults() {
        let spec = parse(VXLAN_LAB).unwrap().unwrap();
        let vx = &spec.links[1];
        assert_eq!((vx.kind, vx.mtu, vx.line), (LinkKind::Vxlan, Some(1400), 13));
        assert_eq!(vx.addresses.len(), 2);
        let v = vx.vxlan.as_ref().unwrap();
        assert_eq!(
            *v,
            VxlanDecl {
                id: 42,
                local: "10.96.0.2".parse().unwrap(),
                remote: "10.96.0.1".parse().unwrap(),
                dstport: 4789,
                dev: "u0".into(),
                udp_checksum: false,
            }
        );
        let v6 = spec.links[2].vxlan.as_ref().unwrap();
        assert_eq!((v6.id, v6.dstport, v6.udp_checksum), (7, 8472, false));
        assert!(v6.local.is_ipv6());
        assert!(spec.links[0].vxlan.is_none());
        // Over IPv6 the outer checksum is on unless said otherwise (Linux: no udp6zerocsumtx).
        let on = parse(&VXLAN_LAB.replace("udp_checksum = false\n", "")).unwrap().unwrap();
        assert!(on.links[2].vxlan.as_ref().unwrap().udp_checksum);
        // A vxlan may be a bridge port.
        let src = format!(
            "{VXLAN_LAB}\n[[lab.link]]\nkind = \"bridge\"\nname = \"br0\"\nnetns = \"ns-b\"\nports = [\"vx0\"]\n"
        );
        assert_eq!(parse(&src).unwrap().unwrap().links[3].ports, ["vx0"]);
        superpacket_engine::device::Topology::parse(VXLAN_LAB).unwrap();
    }

    /// `examples/live-vxlan-overlay.toml`'s lab: B's kernel VXLAN end faces
    /// the engine's (`vx`: id 42, local 10.96.0.1, remote 10.96.0.2) over
    /// the underlay TAP the engine's port `u` attaches to.
    #[test]
    fn the_overlay_example_declares_the_kernel_end_of_the_tunnel() {
        let src = include_str!("../../../../examples/live-vxlan-overlay.toml");
        let spec = parse(src).unwrap().unwrap();
        assert_eq!(spec.netns, ["sp-ovl-a", "sp-ovl-b"]);
        let names: Vec<_> = spec.links.iter().map(|l| (l.kind, l.netns.as_str(), l.name.as_str())).collect();
        assert_eq!(
            names,
            [
                (LinkKind::Tap, "sp-ovl-a", "spo-a"),
                (LinkKind::Tap, "sp-ovl-b", "spo-u"),
                (LinkKind::Vxlan, "sp-ovl-b", "vx0")
            ]
        );
        assert_eq!(spec.links[0].mtu, Some(1450), "A's segments fit the overlay");
        let v = spec.links[2].vxlan.as_ref().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            (v.id, v.local, v.remote, v.dstport, v.dev.as_str()),
            (42, ip("10.96.0.2"), ip("10.96.0.1"), 4789, "spo-u")
        );
        superpacket_engine::device::Topology::parse(src).unwrap();
    }

    #[test]
    fn vxlan_errors_name_line_and_column() {
        let base = "[lab]\nnetns = [\"x\"]\n\n[[lab.link]]\nkind = \"tap\"\nname = \"u0\"\nnetns = \"x\"\n\n[[lab.link]]\nkind = \"vxlan\"\nname = \"vx0\"\nnetns = \"x\"\n";
        let full = "id = 42\nlocal = \"10.0.0.1\"\nremote = \"10.0.0.2\"\ndev = \"u0\"\n";
        assert!(parse(&format!("{base}{full}")).unwrap().is_some());
        let without =
            |key: &str| full.lines().filter(|l| !l.starts_with(key)).map(|l| format!("{l}\n")).collect::<String>();
        let cases: Vec<(String, usize, &str)> = vec![
            (without("id"), 11, "vxlan `vx0` needs `id`"),
            (without("local"), 11, "needs `local`"),
            (without("remote"), 11, "needs `remote`"),
            (without("dev"), 11, "needs `dev`"),
            (full.replace("id = 42", "id = 16777216"), 13, "does not fit 24 bits"),
            (full.replace("\"10.0.0.1\"", "\"ten\""), 14, "local `ten` is not an IP address"),
            (full.replace("\"10.0.0.2\"", "\"fd00::2\""), 15, "different families"),
            (full.replace("\"10.0.0.2\"", "\"239.1.1.1\""), 15, "unicast"),
            (full.replace("\"u0\"", "\"u9\""), 16, "no link `u9` declared before it in `x`"),
            (format!("{full}dstport = 0\n"), 17, "dstport 0"),
            (format!("{full}dstport = 70000\n"), 17, "invalid value"),
            (format!("{full}ports = [\"u0\"]\n"), 17, "key `ports` does not apply to a vxlan link"),
            (format!("{full}vni = 42\n"), 17, "unknown field `vni`"),
        ];
        for (extra, line, text) in &cases {
            let e = error(&format!("{base}{extra}"));
            assert_eq!(e.line, *line, "{extra}: {e}");
            assert!(e.column > 0, "{extra}: {e}");
            assert!(e.message.contains(text), "{extra}: {e}");
        }
        // vxlan keys on another kind.
        for key in [
            "id = 1",
            "local = \"10.0.0.1\"",
            "remote = \"10.0.0.1\"",
            "dstport = 1",
            "dev = \"lo\"",
            "udp_checksum = true",
        ] {
            let e = error(&format!(
                "[lab]\nnetns = [\"x\"]\n[[lab.link]]\nkind = \"tap\"\nname = \"t\"\nnetns = \"x\"\n{key}\n"
            ));
            assert!(e.line == 7 && e.message.contains("does not apply to a tap link"), "{key}: {e}");
        }
        // The underlay must come first, and an IPv6 underlay needs IPv6.
        let e = error(
            "[lab]\nnetns = [\"x\"]\n[[lab.link]]\nkind = \"vxlan\"\nname = \"v\"\nnetns = \"x\"\nid = 1\nlocal = \"10.0.0.1\"\nremote = \"10.0.0.2\"\ndev = \"t\"\n[[lab.link]]\nkind = \"tap\"\nname = \"t\"\nnetns = \"x\"\n",
        );
        assert!(e.line == 10 && e.message.contains("declared before it"), "{e}");
        let e = error(
            &format!("{base}{}", full.replace("10.0.0.1", "fd00::1").replace("10.0.0.2", "fd00::2"))
                .replace("netns = [\"x\"]", "netns = [\"x\"]\nipv6 = false"),
        );
        assert!(e.message.contains("IPv6 is off"), "{e}");
    }

    #[test]
    fn no_lab_table_is_none() {
        assert_eq!(parse("[[device]]\nname = \"a\"\nkind = \"port\"\n").unwrap(), None);
    }

    #[test]
    fn the_engine_accepts_the_lab_table() {
        superpacket_engine::device::Topology::parse(LAB).unwrap();
    }

    fn error(src: &str) -> TopologyError {
        parse(src).unwrap_err()
    }

    #[test]
    fn errors_name_line_and_column() {
        let base = "[lab]\nnetns = [\"x\"]\n\n[[lab.link]]\nkind = \"tap\"\nname = \"t0\"\nnetns = \"x\"\n";
        let cases: &[(&str, usize, &str)] = &[
            ("colour = 3\n", 8, "unknown field `colour`"),
            ("mtu = 20\n", 8, "MTU 20 is outside"),
            ("addresses = [\"10.0.0.1\"]\n", 8, "write it as addr/len"),
            ("addresses = [\"10.0.0.1/40\"]\n", 8, "prefix longer"),
            ("peer = { name = \"p\" }\n", 8, "does not apply to a tap"),
            ("\n[[lab.link]]\nkind = \"tap\"\nname = \"t0\"\nnetns = \"x\"\n", 11, "declared twice"),
            ("\n[[lab.link]]\nkind = \"wire\"\nname = \"w\"\nnetns = \"x\"\n", 10, "unknown link kind `wire`"),
            ("\n[[lab.link]]\nkind = \"veth\"\nname = \"v\"\nnetns = \"x\"\n", 11, "needs `peer"),
            ("\n[[lab.link]]\nkind = \"tap\"\nname = \"u\"\nnetns = \"y\"\n", 12, "not declared in [lab] netns"),
            ("\n[[lab.route]]\nnetns = \"x\"\nto = \"default\"\ndev = \"nope\"\n", 12, "no link `nope`"),
            ("\n[[lab.route]]\nnetns = \"x\"\nto = \"default\"\n", 11, "needs `via` or `dev`"),
            ("\n[[lab.route]]\nnetns = \"x\"\nto = \"10.0.0.0/8\"\nvia = \"fd00::1\"\n", 11, "different families"),
            ("\n[[lab.link]]\nkind = \"bridge\"\nname = \"b\"\nnetns = \"x\"\nports = [\"zz\"]\n", 13, "no link `zz`"),
            ("\n[[lab.link]]\nkind = \"tap\"\nname = \"name-too-long-16\"\nnetns = \"x\"\n", 11, "1 to 15"),
        ];
        for (extra, line, text) in cases {
            let e = error(&format!("{base}{extra}"));
            assert_eq!(e.line, *line, "{extra}: {e}");
            assert!(e.column > 0, "{extra}: {e}");
            assert!(e.message.contains(text), "{extra}: {e}");
        }
        let e = error("[lab]\nnetns = []\n");
        assert_eq!(e.line, 2);
        let e = error(
            "[lab]\nnetns = [\"a\"]\nipv6 = false\n[[lab.link]]\nkind = \"tun\"\nname = \"t\"\nnetns = \"a\"\naddresses = [\"fd00::1/64\"]\n",
        );
        assert!(e.message.contains("IPv6 is off"), "{e}");
        let e = error("[lab]\nnetns = [\"a\", \"a\"]\n");
        assert!(e.message.contains("declared twice") && e.line == 2, "{e}");
        let e = error("[lab]\nnetns = [\"-a\"]\n");
        assert!(e.message.contains("namespace name"), "{e}");
    }
}
