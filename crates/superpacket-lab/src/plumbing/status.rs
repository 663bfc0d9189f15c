//! Each object a lab declares, and whether it is there as declared
//! ([`status`]): namespaces, links (kind, state, MTU, bridge), addresses
//! and routes, read back through rtnetlink.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::schema::{End, format_cidr};
use super::state::{self, LabState};
use super::{LabError, LabSpec, LinkKind, require_root};
use superpacket_engine::io::NetNs;
use superpacket_engine::io::netlink::{LinkState, Netlink, RouteEntry};

/// `ARPHRD_ETHER`: a TAP's link type.
const ARPHRD_ETHER: u16 = 1;
/// `ARPHRD_NONE`: a TUN's link type.
const ARPHRD_NONE: u16 = 0xfffe;

/// Whether a declared object is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemState {
    /// There, as declared (with details: state, MTU, who made it).
    Ok(String),
    /// Not there.
    Missing,
    /// There, but not as declared (what differs).
    Wrong(String),
}

/// One declared object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusItem {
    /// `netns sp-lab-a`, `tap spd-a in sp-lab-a`, `address 10.71.0.2/24 on
    /// spd-a in sp-lab-a`, `route default via 10.71.0.1 in sp-lab-a`.
    pub object: String,
    /// Line of its declaration.
    pub line: usize,
    /// Whether it is there.
    pub state: ItemState,
}

/// The state of a lab: its record and each declared object.
#[derive(Debug, Clone)]
pub struct LabStatus {
    /// The topology file (canonical path).
    pub file: PathBuf,
    /// The record of `lab up`, if the lab is on record.
    pub record: Option<LabState>,
    /// Each declared object, in declaration order.
    pub items: Vec<StatusItem>,
}

impl LabStatus {
    /// Every declared object is there as declared.
    pub fn all_ok(&self) -> bool {
        self.items.iter().all(|i| matches!(i.state, ItemState::Ok(_)))
    }

    /// How many objects are not there as declared.
    pub fn problems(&self) -> usize {
        self.items.iter().filter(|i| !matches!(i.state, ItemState::Ok(_))).count()
    }
}

/// Checks every object `spec` declares (root: the namespaces are entered).
///
/// # Errors
/// Not root, the file gone, the record unreadable, or a netlink request
/// failing other than for a missing object.
pub fn status(file: &Path, spec: &LabSpec) -> Result<LabStatus, LabError> {
    require_root("lab status")?;
    let file = state::canonical(file)?;
    let record = LabState::load(&state::state_path(&file))?;
    let mut items = Vec::new();
    let mut sockets: BTreeMap<&str, Netlink> = BTreeMap::new();
    let io = |what: &str, e: superpacket_engine::io::IoError| LabError::Io(format!("{what}: {e}"));
    for name in &spec.netns {
        let state = match state::namespace_id(name) {
            None => ItemState::Missing,
            Some(id) => {
                let rec = record.as_ref().and_then(|r| r.namespaces.iter().find(|n| &n.name == name));
                let who = match rec {
                    Some(n) if (n.dev, n.ino) == id => "made by superpacket lab up",
                    _ => "not made by superpacket lab up of this file",
                };
                let ns = NetNs::attach(name).map_err(|e| io(name, e))?;
                sockets.insert(name, ns.netlink().map_err(|e| io(name, e))?);
                ItemState::Ok(who.to_string())
            }
        };
        items.push(StatusItem { object: format!("netns {name}"), line: spec.line, state });
    }
    // Link indexes, for bridge ports and routes: (namespace, name) -> index.
    let mut index: BTreeMap<(String, String), u32> = BTreeMap::new();
    for l in &spec.links {
        for End { netns: ns, name, addresses, is_peer } in l.ends() {
            let object = if is_peer {
                format!("{} {name} in {ns} (peer of {})", l.kind.name(), l.name)
            } else {
                format!("{} {name} in {ns}", l.kind.name())
            };
            let Some(nl) = sockets.get_mut(ns) else {
                items.push(StatusItem { object, line: l.line, state: ItemState::Missing });
                for &a in addresses {
                    items.push(address_item(a, name, ns, l.line, ItemState::Missing));
                }
                continue;
            };
            let link = nl.link_state(name).map_err(|e| io(name, e))?;
            let state = match &link {
                None => ItemState::Missing,
                Some(s) => {
                    index.insert((ns.to_string(), name.to_string()), s.index);
                    check_link(l.kind, l.up, l.mtu, s)
                }
            };
            items.push(StatusItem { object, line: l.line, state });
            let have = if link.is_some() { nl.addresses(name).map_err(|e| io(name, e))? } else { Vec::new() };
            for &a in addresses {
                let state = if have.contains(&a) { ItemState::Ok(String::new()) } else { ItemState::Missing };
                items.push(address_item(a, name, ns, l.line, state));
            }
        }
    }
    for b in spec.links.iter().filter(|l| l.kind == LinkKind::Bridge) {
        let Some(&bridge) = index.get(&(b.netns.clone(), b.name.clone())) else { continue };
        for port in &b.ports {
            let object = format!("{port} in bridge {} in {}", b.name, b.netns);
            let state = match sockets.get_mut(b.netns.as_str()).map(|nl| nl.link_state(port)) {
                Some(Ok(Some(s))) if s.master == Some(bridge) => ItemState::Ok(String::new()),
                Some(Ok(Some(_))) => ItemState::Wrong("not a port of the bridge".into()),
                Some(Err(e)) => return Err(io(port, e)),
                _ => ItemState::Missing,
            };
            items.push(StatusItem { object, line: b.line, state });
        }
    }
    let mut tables: BTreeMap<(&str, bool), Vec<RouteEntry>> = BTreeMap::new();
    for r in &spec.routes {
        let object = format!("route {} in {}", r.describe(), r.netns);
        let Some(nl) = sockets.get_mut(r.netns.as_str()) else {
            items.push(StatusItem { object, line: r.line, state: ItemState::Missing });
            continue;
        };
        let v6 = r.dest.is_ipv6();
        if let std::collections::btree_map::Entry::Vacant(e) = tables.entry((r.netns.as_str(), v6)) {
            e.insert(nl.routes(v6).map_err(|e| io(&r.netns, e))?);
        }
        let oif = r.dev.as_ref().map(|d| index.get(&(r.netns.clone(), d.clone())).copied());
        let found = tables[&(r.netns.as_str(), v6)].iter().any(|e| {
            e.dest == r.dest
                && e.prefix == r.prefix
                && e.via == r.via
                && match oif {
                    None => true,
                    Some(i) => i.is_some() && e.oif == i,
                }
        });
        let state = if found { ItemState::Ok(String::new()) } else { ItemState::Missing };
        items.push(StatusItem { object, line: r.line, state });
    }
    Ok(LabStatus { file, record, items })
}

fn address_item(a: (IpAddr, u8), dev: &str, ns: &str, line: usize, state: ItemState) -> StatusItem {
    StatusItem { object: format!("address {} on {dev} in {ns}", format_cidr(a)), line, state }
}

/// What a link of kind `s` is: `tap`, `tun`, `veth`, `bridge`, ...
fn kind_of(s: &LinkState) -> String {
    match (s.kind.as_deref(), s.link_type) {
        (Some("tun"), ARPHRD_ETHER) => "tap".into(),
        (Some("tun"), ARPHRD_NONE) => "tun".into(),
        (Some(k), _) => k.to_string(),
        (None, _) => "link of no kind".into(),
    }
}

fn check_link(kind: LinkKind, up: bool, mtu: Option<u32>, s: &LinkState) -> ItemState {
    let actual = kind_of(s);
    if actual != kind.name() {
        return ItemState::Wrong(format!("a {actual}, not a {}", kind.name()));
    }
    if up && !s.up {
        return ItemState::Wrong("down".into());
    }
    if let (Some(want), Some(have)) = (mtu, s.mtu)
        && want != have
    {
        return ItemState::Wrong(format!("MTU {have}, not {want}"));
    }
    let state = if s.up { "up" } else { "down" };
    ItemState::Ok(s.mtu.map_or(state.to_string(), |m| format!("{state}, MTU {m}")))
}
