//! The lab of `superpacket bench live-peers`: a sender and a receiver
//! namespace joined through a middle namespace, where the datapath under
//! test (superpacket, Open vSwitch, the kernel's bridge or router) connects
//! the two veths.
//!
//! ```text
//!  ns S (sender)                 ns M (middle)                  ns R (receiver)
//!  lp-host ==veth==> lp-s   [datapath under test]   lp-r <==veth== lp-host
//! ```
//!
//! Every datapath gets a fresh lab ([`PeersLab::create`]) so that nothing
//! one leaves behind (bridge membership, addresses, neighbour entries,
//! forwarding) changes the next one's figures; everything is deleted on
//! drop, also when a measurement fails. IPv6 is off in all three
//! namespaces (no router solicitations or DAD in the figures).
//!
//! Two address plans ([`Addressing`]):
//! - **bridged**: S 10.73.0.1/24, R 10.73.0.2/24, one segment;
//! - **routed**: S 10.73.1.2/24 via 10.73.1.1, R 10.73.2.2/24 via
//!   10.73.2.1; the middle's gateways are [`ROUTER_S`] on `lp-s` and
//!   [`ROUTER_R`] on `lp-r` (the kernel router's addresses, or the
//!   superpacket router's interfaces).

use std::net::Ipv4Addr;
use superpacket_engine::io::{IoError, NetNs, VethPair};

/// The sender's and receiver's own veth end (in S and in R).
pub const HOST_LINK: &str = "lp-host";
/// The middle's end towards the sender.
pub const MID_S: &str = "lp-s";
/// The middle's end towards the receiver.
pub const MID_R: &str = "lp-r";
/// The kernel bridge's name in the middle ([`PeersLab::kernel_bridge`]).
pub const KERNEL_BRIDGE: &str = "lp-br";
/// The router's address on the sender's side.
pub const ROUTER_S: &str = "10.73.1.1/24";
/// The router's address on the receiver's side.
pub const ROUTER_R: &str = "10.73.2.1/24";

/// How the sender and the receiver are addressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// One IPv4 segment: the middle bridges.
    Bridged,
    /// Two segments: the middle routes.
    Routed,
}

impl Addressing {
    /// Sender address, receiver address, prefix length, and the gateways of
    /// sender and receiver (routed only).
    fn plan(self) -> (Ipv4Addr, Ipv4Addr, Option<(&'static str, &'static str)>) {
        match self {
            Addressing::Bridged => (Ipv4Addr::new(10, 73, 0, 1), Ipv4Addr::new(10, 73, 0, 2), None),
            Addressing::Routed => {
                (Ipv4Addr::new(10, 73, 1, 2), Ipv4Addr::new(10, 73, 2, 2), Some(("10.73.1.1", "10.73.2.1")))
            }
        }
    }

    /// The receiver's address (where traffic is sent).
    pub fn receiver(self) -> Ipv4Addr {
        self.plan().1
    }
}

/// The lab (see the module documentation).
#[derive(Debug)]
pub struct PeersLab {
    /// The sender's namespace.
    pub sender: NetNs,
    /// The receiver's namespace.
    pub receiver: NetNs,
    /// The middle namespace (the datapath's).
    pub middle: NetNs,
    /// The address plan.
    pub addressing: Addressing,
    // Dropped before the namespaces (field order).
    _veths: [VethPair; 2],
}

impl PeersLab {
    /// Builds the lab; namespace names start with `prefix` (`-s`, `-m`,
    /// `-r` appended). The middle's veth ends are up, without addresses.
    ///
    /// # Errors
    /// Any namespace, link, address or route operation failing (needs root).
    pub fn create(prefix: &str, addressing: Addressing) -> Result<PeersLab, IoError> {
        let sender = NetNs::create(&format!("{prefix}-s"))?;
        let receiver = NetNs::create(&format!("{prefix}-r"))?;
        let middle = NetNs::create(&format!("{prefix}-m"))?;
        for ns in [&sender, &receiver, &middle] {
            ns.disable_ipv6()?;
        }
        let veths = [
            VethPair::create(&sender, HOST_LINK, &middle, MID_S)?,
            VethPair::create(&receiver, HOST_LINK, &middle, MID_R)?,
        ];
        let (s_addr, r_addr, gateways) = addressing.plan();
        for (ns, addr) in [(&sender, s_addr), (&receiver, r_addr)] {
            ns.add_addr(HOST_LINK, &format!("{addr}/24"))?;
            ns.link_up(HOST_LINK)?;
        }
        if let Some((gw_s, gw_r)) = gateways {
            sender.add_route("default", Some(gw_s), None)?;
            receiver.add_route("default", Some(gw_r), None)?;
        }
        for dev in [MID_S, MID_R] {
            middle.link_up(dev)?;
        }
        Ok(PeersLab { sender, receiver, middle, addressing, _veths: veths })
    }

    /// Makes the middle a kernel bridge with both veth ends as its ports.
    ///
    /// # Errors
    /// A netlink operation failing.
    pub fn kernel_bridge(&self) -> Result<(), IoError> {
        let mut nl = self.middle.netlink()?;
        nl.add_bridge(KERNEL_BRIDGE)?;
        for dev in [MID_S, MID_R] {
            nl.set_master(dev, Some(KERNEL_BRIDGE))?;
        }
        self.middle.link_up(KERNEL_BRIDGE)
    }

    /// Makes the middle a kernel router: [`ROUTER_S`] and [`ROUTER_R`] on
    /// the veth ends, IPv4 forwarding on (of the middle namespace only).
    ///
    /// # Errors
    /// A netlink operation or the sysctl failing.
    pub fn kernel_router(&self) -> Result<(), IoError> {
        self.middle.add_addr(MID_S, ROUTER_S)?;
        self.middle.add_addr(MID_R, ROUTER_R)?;
        self.middle.sysctl("net.ipv4.ip_forward", "1")
    }

    /// TCP segments the sender's namespace has retransmitted so far
    /// (`RetransSegs` of its `/proc/net/snmp`).
    ///
    /// # Errors
    /// The file cannot be read or has no such counter.
    pub fn sender_retransmits(&self) -> Result<u64, IoError> {
        snmp_in(&self.sender, "Tcp", "RetransSegs")
    }

    /// UDP datagrams the receiver's namespace dropped so far because a
    /// socket's receive buffer was full (`RcvbufErrors` of its
    /// `/proc/net/snmp`).
    ///
    /// # Errors
    /// The file cannot be read or has no such counter.
    pub fn receiver_rcvbuf_errors(&self) -> Result<u64, IoError> {
        snmp_in(&self.receiver, "Udp", "RcvbufErrors")
    }
}

/// Counter `name` of protocol `proto` in the `/proc/net/snmp` of `ns`.
fn snmp_in(ns: &NetNs, proto: &str, name: &str) -> Result<u64, IoError> {
    // /proc/net follows the main thread's namespace; /proc/thread-self/net the entering thread's.
    let text = ns
        .enter_scoped(|| std::fs::read_to_string("/proc/thread-self/net/snmp"))?
        .map_err(|source| IoError::Syscall { call: "read", what: "/proc/thread-self/net/snmp".into(), source })?;
    snmp_counter(&text, proto, name).ok_or_else(|| IoError::Syscall {
        call: "parse",
        what: format!("{proto} {name} in /proc/net/snmp"),
        source: std::io::ErrorKind::InvalidData.into(),
    })
}

/// Counter `name` of protocol `proto` in `/proc/net/snmp` text (a header
/// line `Proto: names...` followed by a value line `Proto: values...`).
pub fn snmp_counter(text: &str, proto: &str, name: &str) -> Option<u64> {
    let prefix = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let header = lines.next()?;
    let values = lines.next()?;
    let i = header.split_whitespace().position(|h| h == name)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_snmp_counters() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 2 64\nTcp: RtoAlgorithm ActiveOpens RetransSegs InErrs\n\
                    Tcp: 1 7 1234 0\nUdp: InDatagrams\nUdp: 5\n";
        assert_eq!(snmp_counter(text, "Tcp", "RetransSegs"), Some(1234));
        assert_eq!(snmp_counter(text, "Udp", "InDatagrams"), Some(5));
        assert_eq!(snmp_counter(text, "Tcp", "Nope"), None);
        assert_eq!(snmp_counter("Tcp: RetransSegs\n", "Tcp", "RetransSegs"), None);
        assert_eq!(snmp_counter("Tcp: RetransSegs\nTcp: x\n", "Tcp", "RetransSegs"), None);
    }

    #[test]
    fn address_plans() {
        assert_eq!(Addressing::Bridged.receiver(), Ipv4Addr::new(10, 73, 0, 2));
        assert_eq!(Addressing::Routed.receiver(), Ipv4Addr::new(10, 73, 2, 2));
        let (s, _, gw) = Addressing::Routed.plan();
        let (gw_s, gw_r) = gw.unwrap();
        assert!(ROUTER_S.starts_with(gw_s) && ROUTER_R.starts_with(gw_r));
        assert_eq!(s.octets()[..3], [10, 73, 1]);
    }
}
