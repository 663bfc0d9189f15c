//! Building a [`Graph`] from a parsed topology: names and kinds checked,
//! devices built lowers first (ports through the driver registry,
//! [`super::drivers`]), then their settings, addresses, routes, neighbours,
//! NAT rules, connection-table limits and reassembly limits.

use super::schema::{BridgePortSpec, DeviceSpec, KIND_KEYS, KINDS, NatSpec, PortRef, ReassemblySpec, key_span};
use super::{BuildOptions, Topology, TopologyError, line_col};
use crate::device::bond::{BondMode, HashPolicy};
use crate::device::bridge::{Bridge, PortVlans};
use crate::device::features::{FeaturesCheck, NetdevFeatures};
use crate::device::graph::{DeviceId, Graph};
use crate::device::nat::{NatRule, NatTimeouts};
use crate::device::router::Route;
use crate::device::team::TeamMode;
use crate::device::udp_tunnel::{TunnelConfig, UdpTunnel};
use crate::device::vlan::VlanProto;
use crate::device::xconnect::XCONNECT_MEMBERS;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Range;
use superpacket::packet::TunnelKind;
use superpacket::wire::MacAddr;
use toml::Spanned;

impl Topology {
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
                return Err(self.err(
                    &d.kind.span(),
                    format!("unknown device kind `{kind}` (port, vlan, bond, team, bridge, xconnect, vxlan, geneve)"),
                ));
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
                    let id = self.build_device(&mut g, &devs[i], &index, &ids, opts)?;
                    // Addresses right away: a tunnel built later binds to
                    // its underlay's address.
                    for a in devs[i].addresses.iter().flatten() {
                        let (addr, len) = parse_prefix(a.get_ref(), true)
                            .map_err(|m| self.err(&a.span(), format!("bad address `{}`: {m}", a.get_ref())))?;
                        g.add_address(id, addr, len);
                    }
                    ids[i] = Some(id);
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
                g.router_mut().nat = crate::device::nat::Nat::new(*m.get_ref() as usize);
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
        let mut cfg = crate::device::tables::Defrag::default_config();
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
        let map_dev = |span: &Range<usize>, e: crate::device::graph::DeviceError| self.err(span, e.to_string());
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
                    crate::device::graph::DeviceError::DuplicateVlan { .. } => map_dev(&vid.span(), e),
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
            "xconnect" => self.xconnect(g, d, &id_of)?,
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
            "vxlan" | "geneve" => self.tunnel(g, d)?,
            _ => unreachable!("kinds checked before building"),
        };
        self.device_settings(g, id, d)?;
        Ok(id)
    }

    /// A cross-connect (`docs/topology.md`, `kind = "xconnect"`): exactly
    /// two ports, named; one more or one fewer is refused at its `ports`.
    fn xconnect(
        &self,
        g: &mut Graph,
        d: &DeviceSpec,
        id_of: &dyn Fn(&str) -> DeviceId,
    ) -> Result<DeviceId, TopologyError> {
        let name = d.name.get_ref().as_str();
        let ports = d.ports.as_ref().map(|p| p.get_ref().as_slice()).unwrap_or_default();
        if let Some(extra) = ports.get(XCONNECT_MEMBERS) {
            return Err(self.err(
                &extra.span(),
                format!("xconnect `{name}` takes exactly {XCONNECT_MEMBERS} ports; this is a third"),
            ));
        }
        if ports.len() < XCONNECT_MEMBERS {
            let span = d.ports.as_ref().map_or_else(|| d.kind.span(), Spanned::span);
            return Err(self.err(
                &span,
                format!("xconnect `{name}` takes exactly {XCONNECT_MEMBERS} ports, it names {}", ports.len()),
            ));
        }
        let id = g.add_xconnect(name).map_err(|e| self.err(&d.name.span(), e.to_string()))?;
        for p in ports {
            let PortRef::Name(n) = p.get_ref() else {
                return Err(self.err(&p.span(), "xconnect ports are device names (VLAN membership is for bridges)"));
            };
            g.enslave(id, id_of(n)).map_err(|e| self.err(&p.span(), e.to_string()))?;
        }
        Ok(id)
    }

    /// A VXLAN or Geneve device (`docs/topology.md`, "Tunnel devices").
    fn tunnel(&self, g: &mut Graph, d: &DeviceSpec) -> Result<DeviceId, TopologyError> {
        let name = d.name.get_ref().as_str();
        let protocol = if d.kind.get_ref() == "vxlan" { TunnelKind::Vxlan } else { TunnelKind::Geneve };
        let need = |v: &Option<Spanned<String>>, key: &str| {
            v.clone().ok_or_else(|| self.err(&d.kind.span(), format!("{} `{name}` needs `{key}`", d.kind.get_ref())))
        };
        let addr = |s: &Spanned<String>| -> Result<IpAddr, TopologyError> {
            s.get_ref().parse().map_err(|_| self.err(&s.span(), format!("bad IP address `{}`", s.get_ref())))
        };
        let vni = d.id.as_ref().ok_or_else(|| self.err(&d.kind.span(), format!("`{name}` needs `id` (the VNI)")))?;
        if !(0..1 << 24).contains(vni.get_ref()) {
            return Err(self.err(&vni.span(), format!("VNI {} is outside 0..=16777215", vni.get_ref())));
        }
        let underlay = need(&d.underlay, "underlay")?;
        let local_s = need(&d.local, "local")?;
        let local = addr(&local_s)?;
        let mut cfg = TunnelConfig::new(protocol, *vni.get_ref() as u32, local);
        let ours = g
            .id(underlay.get_ref())
            .and_then(|u| g.router().and_then(|r| r.interfaces.iter().find(|i| i.dev == u)).map(|i| i.addrs.clone()));
        if !ours.is_some_and(|a| a.iter().any(|(x, _)| *x == local)) {
            return Err(self.err(&local_s.span(), format!("`{local}` is not an address of `{}`", underlay.get_ref())));
        }
        if let Some(r) = &d.remote {
            cfg.remote = Some(addr(r)?);
        }
        if let Some(p) = &d.dstport {
            cfg.port = *p.get_ref();
        }
        if let Some(c) = &d.udp_checksum {
            cfg.udp_checksum = *c.get_ref();
        }
        if let Some(c) = &d.udp6_zero_checksum_rx {
            cfg.udp6_zero_checksum_rx = *c.get_ref();
        }
        if let Some(l) = &d.learning {
            cfg.learning = *l.get_ref();
        }
        if let Some(t) = &d.ttl {
            cfg.ttl = u8::try_from(*t.get_ref())
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| self.err(&t.span(), "ttl is 1..=255"))?;
        }
        if let Some(m) = &d.fdb_max {
            cfg.fdb_max = *m.get_ref() as usize;
        }
        let id = g.add_tunnel(name, cfg).map_err(|e| self.err(&d.name.span(), e.to_string()))?;
        for f in d.fdb.iter().flatten() {
            let e = f.get_ref();
            let mac = parse_mac(e.mac.get_ref())
                .ok_or_else(|| self.err(&e.mac.span(), format!("bad MAC address `{}`", e.mac.get_ref())))?;
            let remote = addr(&e.remote)?;
            if let Some(t) = g.kind_as_mut::<UdpTunnel>(id) {
                t.add_fdb(mac, remote).map_err(|m| self.err(&e.remote.span(), m))?;
            }
        }
        Ok(id)
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
