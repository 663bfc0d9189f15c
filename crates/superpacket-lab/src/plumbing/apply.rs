//! Making a declared lab ([`up`]) and removing what was made ([`down`]).
//!
//! `up` makes, in order: the namespaces (each recorded at once, loopback
//! up, IPv6 off if asked), the links (persistent TAPs and TUNs, veths with
//! each end in its namespace, bridges, VXLAN devices over a link made
//! before them) with their MTU and addresses (IPv6
//! without duplicate address detection, usable at once), the bridge ports,
//! the link states, then the routes. If a step fails, everything made so
//! far is removed before the error is returned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::schema::End;
use super::state::{self, LabState, LinkRecord, NamespaceRecord, StateLock};
use super::{LabError, LabSpec, LinkDecl, LinkKind, fingerprint, require_root};
use superpacket_engine::io::netlink::{Netlink, VxlanLink};
use superpacket_engine::io::netns::{create_named, delete_named};
use superpacket_engine::io::{IoError, NetNs, TapConfig, TapDevice, TunConfig, TunDevice};

/// What [`up`] did.
#[derive(Debug)]
pub enum UpOutcome {
    /// The lab was made; its record.
    Made(LabState),
    /// The lab was already up, made by an earlier `up` of the same file
    /// from the same declaration; nothing was changed.
    AlreadyUp(LabState),
}

/// What [`down`] did.
#[derive(Debug)]
pub enum DownOutcome {
    /// The recorded lab was removed.
    Removed {
        /// Namespaces deleted.
        namespaces: Vec<String>,
        /// Recorded namespaces that were already gone.
        gone: Vec<String>,
        /// Recorded namespaces that exist but are not the ones `up` made
        /// (deleted and made again by someone else since): left alone.
        left: Vec<String>,
        /// Links that could not be deleted one by one (they went with
        /// their namespaces).
        warnings: Vec<String>,
    },
    /// No lab of this file is on record.
    NotUp,
}

/// An I/O failure at `line` of the file, while doing `what`.
fn at(line: usize, what: impl std::fmt::Display, e: IoError) -> LabError {
    LabError::Io(format!("line {line}: {what}: {e}"))
}

/// Makes the lab `spec` of topology file `file`, or reports it already up.
///
/// # Errors
/// Not root ([`LabError::Privileges`]); a declared namespace already exists
/// that an earlier `up` of this file did not make, or the lab is up in
/// another form or only partly ([`LabError::Conflict`]: nothing is
/// changed); a step failing ([`LabError::Io`], naming the line; what was
/// made is removed).
pub fn up(file: &Path, spec: &LabSpec) -> Result<UpOutcome, LabError> {
    require_root("lab up")?;
    let file = state::canonical(file)?;
    let path = state::state_path(&file);
    let _lock = StateLock::take()?;
    let fp = fingerprint(spec);
    if let Some(st) = LabState::load(&path)? {
        let ours = st.namespaces.iter().filter(|n| state::is_ours(n)).count();
        let f = file.display();
        if ours == 0 {
            // Every namespace it made is gone (deleted by hand): the record is stale.
            remove_record(&path)?;
        } else if ours == st.namespaces.len() && st.complete && st.declaration == fp {
            return Ok(UpOutcome::AlreadyUp(st));
        } else if st.declaration != fp {
            return Err(LabError::Conflict(format!(
                "the lab of {f} is up, made from an earlier form of its [lab] table: \
                 `superpacket lab down {f}` first"
            )));
        } else {
            return Err(LabError::Conflict(format!(
                "the lab of {f} is only partly up (made by pid {}, {} of {} namespaces left): \
                 `superpacket lab down {f}` first",
                st.pid,
                ours,
                spec.netns.len()
            )));
        }
    }
    let others = LabState::others(&path);
    for name in &spec.netns {
        if state::namespace_id(name).is_none() {
            continue;
        }
        let owner = others.iter().find(|o| o.namespaces.iter().any(|n| &n.name == name && state::is_ours(n)));
        let whose = match owner {
            Some(o) => format!(
                "it belongs to the lab of {} (`superpacket lab down {}` removes it)",
                o.file.display(),
                o.file.display()
            ),
            None => "`superpacket lab up` of this file did not make it".to_string(),
        };
        return Err(LabError::Conflict(format!(
            "{}: line {}: namespace `{name}` already exists and {whose}: refusing to touch it",
            file.display(),
            spec.line
        )));
    }
    let created_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut st = LabState {
        version: 1,
        file: file.clone(),
        declaration: fp,
        pid: std::process::id(),
        created_unix,
        complete: false,
        namespaces: Vec::new(),
        links: Vec::new(),
    };
    let made = make(spec, &mut st, &path).and_then(|()| {
        st.complete = true;
        st.save(&path)
    });
    match made {
        Ok(()) => Ok(UpOutcome::Made(st)),
        Err(e) => {
            let removal = remove(&st);
            let undone = if removal.errors.is_empty() {
                let _ = remove_record(&path);
                "everything made so far was removed".to_string()
            } else {
                format!(
                    "removing what was made failed too ({}); `superpacket lab down {}` retries",
                    removal.errors.join("; "),
                    file.display()
                )
            };
            Err(LabError::Io(format!("{e}; {undone}")))
        }
    }
}

/// Makes every object of `spec`, recording namespaces and links in `st`.
fn make(spec: &LabSpec, st: &mut LabState, path: &Path) -> Result<(), LabError> {
    st.save(path)?;
    let mut handles: BTreeMap<&str, NetNs> = BTreeMap::new();
    for name in &spec.netns {
        create_named(name).map_err(|e| at(spec.line, format_args!("creating namespace `{name}`"), e))?;
        let (dev, ino) = state::namespace_id(name)
            .ok_or_else(|| LabError::Io(format!("namespace `{name}` vanished right after it was made")))?;
        st.namespaces.push(NamespaceRecord { name: name.clone(), dev, ino });
        st.save(path)?;
        let ns = NetNs::attach(name).map_err(|e| at(spec.line, format_args!("opening namespace `{name}`"), e))?;
        ns.link_up("lo").map_err(|e| at(spec.line, format_args!("bringing lo up in `{name}`"), e))?;
        if !spec.ipv6 {
            ns.disable_ipv6().map_err(|e| at(spec.line, format_args!("disabling IPv6 in `{name}`"), e))?;
        }
        handles.insert(name, ns);
    }
    let mut nl: BTreeMap<&str, Netlink> = BTreeMap::new();
    for (name, ns) in &handles {
        let sock = ns.netlink().map_err(|e| at(spec.line, format_args!("netlink in `{name}`"), e))?;
        nl.insert(name, sock);
    }
    for l in &spec.links {
        let what = || format!("{} `{}` in `{}`", l.kind.name(), l.name, l.netns);
        create_link(l, &handles).map_err(|e| at(l.line, format_args!("creating {}", what()), e))?;
        st.links.push(LinkRecord { netns: l.netns.clone(), name: l.name.clone() });
        for End { netns: ns, name, addresses, .. } in l.ends() {
            let n = nl.get_mut(ns).expect("declared namespace");
            if let Some(mtu) = l.mtu {
                n.set_mtu(name, mtu).map_err(|e| at(l.line, format_args!("MTU {mtu} on {}", what()), e))?;
            }
            for &(addr, prefix) in addresses {
                n.add_address_with(name, addr, prefix, addr.is_ipv6())
                    .map_err(|e| at(l.line, format_args!("address {addr}/{prefix} on `{name}` in `{ns}`"), e))?;
            }
        }
    }
    for b in spec.links.iter().filter(|l| l.kind == LinkKind::Bridge) {
        let n = nl.get_mut(b.netns.as_str()).expect("declared namespace");
        for port in &b.ports {
            n.set_master(port, Some(&b.name))
                .map_err(|e| at(b.line, format_args!("`{port}` into bridge `{}` in `{}`", b.name, b.netns), e))?;
        }
    }
    for l in spec.links.iter().filter(|l| l.up) {
        for End { netns: ns, name, .. } in l.ends() {
            let n = nl.get_mut(ns).expect("declared namespace");
            n.set_up(name, true).map_err(|e| at(l.line, format_args!("bringing `{name}` up in `{ns}`"), e))?;
        }
    }
    for r in &spec.routes {
        let n = nl.get_mut(r.netns.as_str()).expect("declared namespace");
        n.add_route(r.dest, r.prefix, r.via, r.dev.as_deref())
            .map_err(|e| at(r.line, format_args!("route {} in `{}`", r.describe(), r.netns), e))?;
    }
    Ok(())
}

/// Creates link `l` (down, no addresses) in its namespace.
fn create_link(l: &LinkDecl, handles: &BTreeMap<&str, NetNs>) -> Result<(), IoError> {
    let ns = &handles[l.netns.as_str()];
    match l.kind {
        LinkKind::Tap => {
            let cfg = TapConfig { multi_queue: l.multi_queue, ..TapConfig::named(&l.name) };
            TapDevice::open_in(ns, &cfg)?.set_persist(true)
        }
        LinkKind::Tun => {
            let cfg = TunConfig { multi_queue: l.multi_queue, ..TunConfig::named(&l.name) };
            TunDevice::open_in(ns, &cfg)?.set_persist(true)
        }
        LinkKind::Veth => {
            let peer = l.peer.as_ref().expect("a checked veth has a peer");
            let peer_ns = &handles[peer.netns.as_str()];
            ns.netlink()?.add_veth(&l.name, &peer.name, Some(peer_ns.fd()))
        }
        LinkKind::Bridge => ns.netlink()?.add_bridge(&l.name),
        LinkKind::Vxlan => {
            let v = l.vxlan.as_ref().expect("a checked vxlan has its settings");
            let cfg = VxlanLink {
                vni: v.id,
                remote: v.remote,
                local: v.local,
                port: v.dstport,
                dev: &v.dev,
                udp_csum: v.udp_checksum,
            };
            ns.netlink()?.add_vxlan(&l.name, &cfg)
        }
    }
}

/// What [`remove`] did.
#[derive(Debug, Default)]
struct Removal {
    namespaces: Vec<String>,
    gone: Vec<String>,
    left: Vec<String>,
    /// Namespaces that are ours but could not be deleted, with the errors.
    failed: Vec<String>,
    errors: Vec<String>,
}

/// Removes what record `st` lists: its links (so that they go at once even
/// if something still holds a namespace), then its namespaces, newest
/// first, each only if it is still the namespace that was made.
fn remove(st: &LabState) -> Removal {
    let mut r = Removal::default();
    for link in st.links.iter().rev() {
        let Some(rec) = st.namespaces.iter().find(|n| n.name == link.netns) else { continue };
        if !state::is_ours(rec) {
            continue;
        }
        let deleted = NetNs::attach(&link.netns).and_then(|ns| {
            let mut nl = ns.netlink()?;
            if nl.link_exists(&link.name)? { nl.del_link(&link.name) } else { Ok(()) }
        });
        // A veth is gone once its peer was deleted: only other failures count.
        if let Err(e) = deleted
            && e.raw_os_error() != Some(libc::ENODEV)
        {
            r.errors.push(format!("deleting `{}` in `{}`: {e}", link.name, link.netns));
        }
    }
    for rec in st.namespaces.iter().rev() {
        if state::namespace_id(&rec.name).is_none() {
            r.gone.push(rec.name.clone());
        } else if !state::is_ours(rec) {
            r.left.push(rec.name.clone());
        } else {
            match delete_named(&rec.name) {
                Ok(()) => r.namespaces.push(rec.name.clone()),
                Err(e) => {
                    r.errors.push(format!("deleting namespace `{}`: {e}", rec.name));
                    r.failed.push(rec.name.clone());
                }
            }
        }
    }
    r
}

fn remove_record(path: &Path) -> Result<(), LabError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LabError::Io(format!("{}: {e}", path.display()))),
    }
}

/// The path naming the lab of `file`: its canonical path, or (the file is
/// gone) its absolute path.
fn lab_file(file: &Path) -> Result<PathBuf, LabError> {
    state::canonical(file)
        .or_else(|_| std::path::absolute(file).map_err(|e| LabError::Io(format!("{}: {e}", file.display()))))
}

/// Removes what the `up` of `file` recorded, and the record.
///
/// # Errors
/// Not root; the record unreadable; a namespace that cannot be deleted
/// (the record then keeps it, for another try).
pub fn down(file: &Path) -> Result<DownOutcome, LabError> {
    require_root("lab down")?;
    let file = lab_file(file)?;
    let path = state::state_path(&file);
    let _lock = StateLock::take()?;
    let Some(mut st) = LabState::load(&path)? else { return Ok(DownOutcome::NotUp) };
    let r = remove(&st);
    if !r.failed.is_empty() {
        st.namespaces.retain(|n| r.failed.contains(&n.name));
        st.links.retain(|l| r.failed.contains(&l.netns));
        st.save(&path)?;
        return Err(LabError::Io(r.errors.join("; ")));
    }
    remove_record(&path)?;
    Ok(DownOutcome::Removed { namespaces: r.namespaces, gone: r.gone, left: r.left, warnings: r.errors })
}
