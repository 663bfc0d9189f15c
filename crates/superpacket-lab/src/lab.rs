//! The lab the live topologies in `examples/live-*.toml` expect, built and
//! torn down by code: `superpacket demo` and the end-to-end tests use it.
//! The files declare the same lab under fixed names in their `[lab]` table,
//! for `superpacket lab up` ([`crate::plumbing`]); this one has unique names,
//! so that tests can run side by side (a test checks that the two agree).
//!
//! Three network namespaces, created with unique names and deleted on drop
//! (also when a test fails or the demo is interrupted):
//!
//! - **A**: TAP `spd-a` (persistent, `vnet_hdr`) with 10.71.0.2/24 and
//!   fd71::2/64, default routes via 10.71.0.1 and fd71::1;
//! - **B**: TAP `spd-b` with 10.72.0.2/24 and fd72::2/64, default routes via
//!   10.72.0.1 and fd72::1;
//! - **T** (trunk): veth pair `spd-t1`/`spd-t2`, MTU 1600 (room for two
//!   VLAN tags on MTU frames).
//!
//! The TAPs are persistent so that every engine run (and the plain relay)
//! uses the same devices; they go with their namespaces. Topology files
//! name the namespaces `sp-lab-a`, `sp-lab-b` and `sp-lab-t`;
//! [`Lab::localize`] rewrites those names to this lab's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use superpacket_engine::io::{IoError, NetNs, VethPair};

/// TAP in namespace A.
pub const TAP_A: &str = "spd-a";
/// TAP in namespace B.
pub const TAP_B: &str = "spd-b";
/// Trunk veth end 1 (namespace T).
pub const TRUNK_1: &str = "spd-t1";
/// Trunk veth end 2 (namespace T).
pub const TRUNK_2: &str = "spd-t2";
/// Host A's IPv4 address.
pub const HOST_A_V4: Ipv4Addr = Ipv4Addr::new(10, 71, 0, 2);
/// Host B's IPv4 address.
pub const HOST_B_V4: Ipv4Addr = Ipv4Addr::new(10, 72, 0, 2);
/// Host A's IPv6 address.
pub const HOST_A_V6: Ipv6Addr = Ipv6Addr::new(0xfd71, 0, 0, 0, 0, 0, 0, 2);
/// Host B's IPv6 address.
pub const HOST_B_V6: Ipv6Addr = Ipv6Addr::new(0xfd72, 0, 0, 0, 0, 0, 0, 2);

/// The lab (see the module documentation).
#[derive(Debug)]
pub struct Lab {
    /// Namespace A (traffic sources).
    pub a: NetNs,
    /// Namespace B (traffic sinks).
    pub b: NetNs,
    /// The trunk's namespace.
    pub t: NetNs,
    trunk: Option<VethPair>,
}

impl Lab {
    /// Builds the lab; namespace names start with `prefix` (`-a`, `-b`, `-t`
    /// appended). With `ipv6` false, IPv6 is disabled in all three.
    ///
    /// # Errors
    /// Any namespace, link, address or route operation failing (needs root).
    pub fn create(prefix: &str, ipv6: bool) -> Result<Lab, IoError> {
        let a = NetNs::create(&format!("{prefix}-a"))?;
        let b = NetNs::create(&format!("{prefix}-b"))?;
        let t = NetNs::create(&format!("{prefix}-t"))?;
        if !ipv6 {
            for ns in [&a, &b, &t] {
                ns.disable_ipv6()?;
            }
        }
        let hosts = [
            (&a, TAP_A, HOST_A_V4, HOST_A_V6, "10.71.0.1", "fd71::1"),
            (&b, TAP_B, HOST_B_V4, HOST_B_V6, "10.72.0.1", "fd72::1"),
        ];
        for (ns, tap, v4, v6, gw4, gw6) in hosts {
            ns.create_persistent_tap(tap)?;
            ns.add_addr(tap, &format!("{v4}/24"))?;
            if ipv6 {
                ns.add_addr_nodad(tap, &format!("{v6}/64"))?;
            }
            ns.link_up(tap)?;
            ns.add_route("default", Some(gw4), None)?;
            if ipv6 {
                ns.add_route("default", Some(gw6), None)?;
            }
        }
        let trunk = make_trunk(&t)?;
        Ok(Lab { a, b, t, trunk: Some(trunk) })
    }

    /// `topology` with the namespace names `sp-lab-a`, `sp-lab-b` and
    /// `sp-lab-t` replaced by this lab's.
    pub fn localize(&self, topology: &str) -> String {
        topology
            .replace("\"sp-lab-a\"", &format!("\"{}\"", self.a.name()))
            .replace("\"sp-lab-b\"", &format!("\"{}\"", self.b.name()))
            .replace("\"sp-lab-t\"", &format!("\"{}\"", self.t.name()))
    }

    /// Host B's address of the family of `v6`.
    pub fn host_b(v6: bool) -> IpAddr {
        if v6 { IpAddr::V6(HOST_B_V6) } else { IpAddr::V4(HOST_B_V4) }
    }

    /// Deletes the trunk veth (the "port disappears" case); [`Lab::restore_trunk`] makes it again.
    pub fn remove_trunk(&mut self) {
        self.trunk = None;
    }

    /// Re-creates the trunk veth after [`Lab::remove_trunk`].
    ///
    /// # Errors
    /// Creating the veth failing.
    pub fn restore_trunk(&mut self) -> Result<(), IoError> {
        if self.trunk.is_none() {
            self.trunk = Some(make_trunk(&self.t)?);
        }
        Ok(())
    }
}

/// The trunk veth in `t`, up, with MTU 1600 (room for two VLAN tags on MTU frames).
fn make_trunk(t: &NetNs) -> Result<VethPair, IoError> {
    let trunk = VethPair::create(t, TRUNK_1, t, TRUNK_2)?;
    for dev in [TRUNK_1, TRUNK_2] {
        t.set_mtu(dev, 1600)?;
        t.link_up(dev)?;
    }
    Ok(trunk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plumbing::{self, LabSpec, LinkKind};

    fn lab_of(src: &str) -> LabSpec {
        let mut spec = plumbing::parse(src).unwrap().expect("a [lab] table");
        spec.line = 0;
        spec.links.iter_mut().for_each(|l| l.line = 0);
        spec.routes.iter_mut().for_each(|r| r.line = 0);
        spec
    }

    /// The `[lab]` of `examples/live-qinq-nat.toml` declares this lab (under
    /// the fixed names `localize` replaces), so that `superpacket lab up`
    /// and the demo make the same thing; the other examples declare it too,
    /// or its A and B half.
    #[test]
    fn the_examples_declare_this_lab() {
        let full = lab_of(include_str!("../../../examples/live-qinq-nat.toml"));
        assert_eq!(full.netns, ["sp-lab-a", "sp-lab-b", "sp-lab-t"]);
        assert!(full.ipv6);
        let hosts = [
            (TAP_A, "sp-lab-a", HOST_A_V4, HOST_A_V6, "10.71.0.1", "fd71::1"),
            (TAP_B, "sp-lab-b", HOST_B_V4, HOST_B_V6, "10.72.0.1", "fd72::1"),
        ];
        for (tap, ns, v4, v6, gw4, gw6) in hosts {
            let l = full.links.iter().find(|l| l.name == tap).expect(tap);
            assert_eq!((l.kind, l.netns.as_str(), l.up, l.mtu, l.multi_queue), (LinkKind::Tap, ns, true, None, false));
            assert_eq!(l.addresses, [(IpAddr::V4(v4), 24), (IpAddr::V6(v6), 64)]);
            for gw in [gw4, gw6] {
                let via: IpAddr = gw.parse().unwrap();
                assert!(
                    full.routes.iter().any(|r| r.netns == ns && r.prefix == 0 && r.via == Some(via) && r.dev.is_none()),
                    "default route via {gw} in {ns}"
                );
            }
        }
        let trunk = full.links.iter().find(|l| l.name == TRUNK_1).expect("trunk");
        let peer = trunk.peer.as_ref().expect("veth peer");
        assert_eq!((trunk.kind, trunk.netns.as_str(), trunk.mtu), (LinkKind::Veth, "sp-lab-t", Some(1600)));
        assert_eq!((peer.name.as_str(), peer.netns.as_str()), (TRUNK_2, "sp-lab-t"));
        assert_eq!((full.links.len(), full.routes.len()), (3, 4));

        assert_eq!(lab_of(include_str!("../../../examples/live-vlan-gro.toml")), full);
        let half = lab_of(include_str!("../../../examples/live-router.toml"));
        assert_eq!(half.netns, ["sp-lab-a", "sp-lab-b"]);
        assert_eq!(half.links[..], full.links[..2]);
        assert_eq!(half.routes, full.routes);
        assert_eq!(lab_of(include_str!("../../../examples/live-router-nat.toml")), half);
    }
}
