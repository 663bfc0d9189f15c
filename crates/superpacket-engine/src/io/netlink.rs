//! Synchronous rtnetlink: links, addresses, routes and neighbours configured
//! by messages to the kernel (`netlink-packet-route` builds and parses them,
//! `netlink-sys` is the socket), never by starting `ip`.
//!
//! A [`Netlink`] socket is bound to the network namespace of the thread that
//! opened it, for its whole life: open it inside a namespace
//! ([`in_netns`], [`super::NetNs::enter_scoped`]) and it keeps configuring
//! that namespace from any thread.
//!
//! Every failure is an [`IoError::Syscall`] whose `call` names the request
//! (`RTM_NEWLINK`, ...), whose `what` says what was asked, and whose source
//! carries the kernel's errno.

use super::error::{IoError, Result};
use super::netns::NetNs;
use super::sys::check_ifname;
use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::link::{
    InfoData, InfoKind, InfoVeth, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage, State,
};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Receive buffer: larger than any reply to the requests made here.
const RECV_BUF: usize = 64 * 1024;

/// An rtnetlink socket of one network namespace (the opening thread's).
#[derive(Debug)]
pub struct Netlink {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// Runs `f` on a thread inside the named namespace (`/run/netns/NAME`,
/// entered with `setns`), returning its result. The caller's namespace
/// never changes.
///
/// # Errors
/// No such namespace, `setns` failing, or `f`'s own error.
pub fn in_netns<R: Send>(name: &str, f: impl FnOnce() -> Result<R> + Send) -> Result<R> {
    NetNs::attach(name)?.enter_scoped(f)?
}

impl Netlink {
    /// Opens an rtnetlink socket in the calling thread's namespace.
    ///
    /// # Errors
    /// The socket cannot be created or bound.
    pub fn open() -> Result<Netlink> {
        let sys = |call, source| IoError::Syscall { call, what: "NETLINK_ROUTE".into(), source };
        let mut socket = Socket::new(NETLINK_ROUTE).map_err(|e| sys("socket(AF_NETLINK)", e))?;
        socket.bind_auto().map_err(|e| sys("bind(AF_NETLINK)", e))?;
        socket.connect(&SocketAddr::new(0, 0)).map_err(|e| sys("connect(AF_NETLINK)", e))?;
        let _ = socket.set_ext_ack(true);
        Ok(Netlink { socket, seq: 0, buf: Vec::with_capacity(RECV_BUF) })
    }

    /// Sends `msg` with `flags` (plus `NLM_F_REQUEST | NLM_F_ACK`) and waits
    /// for the kernel's acknowledgement; returns the messages answered
    /// before it (for a `GET`).
    fn request(
        &mut self,
        call: &'static str,
        what: &dyn Fn() -> String,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> Result<Vec<RouteNetlinkMessage>> {
        let err = |source: io::Error| IoError::Syscall { call, what: what(), source };
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = seq;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        packet.finalize();
        let mut out = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut out);
        self.socket.send(&out, 0).map_err(err)?;
        let mut replies = Vec::new();
        loop {
            self.buf.clear();
            self.buf.reserve(RECV_BUF);
            let n = self.socket.recv(&mut self.buf, 0).map_err(err)?;
            if n > self.buf.len() {
                return Err(err(io::Error::other(format!("netlink reply of {n} bytes truncated"))));
            }
            let mut off = 0;
            while off + 16 <= self.buf.len() {
                let len = u32::from_ne_bytes(self.buf[off..off + 4].try_into().expect("4 bytes")) as usize;
                if len < 16 || off + len > self.buf.len() {
                    return Err(err(io::Error::other("malformed netlink message")));
                }
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[off..off + len])
                    .map_err(|e| err(io::Error::other(format!("cannot parse the netlink reply: {e}"))))?;
                off += (len + 3) & !3;
                if reply.header.sequence_number != seq {
                    continue;
                }
                match reply.payload {
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(replies),
                            Some(code) => Err(err(io::Error::from_raw_os_error(-code.get()))),
                        };
                    }
                    NetlinkPayload::Done(_) => return Ok(replies),
                    NetlinkPayload::InnerMessage(m) => replies.push(m),
                    _ => {}
                }
            }
        }
    }

    /// The kernel's description of link `name` (`RTM_GETLINK`).
    ///
    /// # Errors
    /// Bad name, or no such link (`ENODEV`).
    fn get_link(&mut self, name: &str) -> Result<LinkMessage> {
        check_ifname(name)?;
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        let replies = self.request("RTM_GETLINK", &|| format!("link {name}"), RouteNetlinkMessage::GetLink(msg), 0)?;
        replies
            .into_iter()
            .find_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => Some(l),
                _ => None,
            })
            .ok_or_else(|| IoError::Syscall {
                call: "RTM_GETLINK",
                what: format!("link {name}"),
                source: io::Error::from_raw_os_error(libc::ENODEV),
            })
    }

    /// The index of link `name`.
    ///
    /// # Errors
    /// Bad name, or no such link (`ENODEV`).
    pub fn link_index(&mut self, name: &str) -> Result<u32> {
        Ok(self.get_link(name)?.header.index)
    }

    /// Whether link `name` exists.
    ///
    /// # Errors
    /// Bad name, or a failure other than "no such device".
    pub fn link_exists(&mut self, name: &str) -> Result<bool> {
        match self.link_index(name) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `RTM_SETLINK` on `name` with the header and attributes `build` sets.
    fn set_link(&mut self, name: &str, what: &dyn Fn() -> String, build: impl FnOnce(&mut LinkMessage)) -> Result<()> {
        let index = self.link_index(name)?;
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        build(&mut msg);
        self.request("RTM_SETLINK", what, RouteNetlinkMessage::SetLink(msg), 0).map(drop)
    }

    /// Sets link `name` administratively up or down (`IFF_UP`).
    ///
    /// # Errors
    /// No such link, or the kernel refusing.
    pub fn set_up(&mut self, name: &str, up: bool) -> Result<()> {
        self.set_flag(name, LinkFlags::Up, up, &|| format!("set {name} {}", if up { "up" } else { "down" }))
    }

    /// Turns promiscuous mode of `name` on or off (`IFF_PROMISC`).
    ///
    /// # Errors
    /// No such link, or the kernel refusing.
    pub fn set_promisc(&mut self, name: &str, on: bool) -> Result<()> {
        self.set_flag(name, LinkFlags::Promisc, on, &|| format!("set {name} promisc {}", if on { "on" } else { "off" }))
    }

    fn set_flag(&mut self, name: &str, flag: LinkFlags, on: bool, what: &dyn Fn() -> String) -> Result<()> {
        self.set_link(name, what, |m| {
            m.header.change_mask = flag;
            m.header.flags = if on { flag } else { LinkFlags::empty() };
        })
    }

    /// Sets the MTU of `name`.
    ///
    /// # Errors
    /// No such link, or an MTU the device refuses (`EINVAL`).
    pub fn set_mtu(&mut self, name: &str, mtu: u32) -> Result<()> {
        self.set_link(name, &|| format!("set {name} mtu {mtu}"), |m| m.attributes.push(LinkAttribute::Mtu(mtu)))
    }

    /// Sets the MAC address of `name`.
    ///
    /// # Errors
    /// No such link, or an address the device refuses.
    pub fn set_mac(&mut self, name: &str, mac: [u8; 6]) -> Result<()> {
        self.set_link(name, &|| format!("set {name} address {}", super::netns::format_mac(mac)), |m| {
            m.attributes.push(LinkAttribute::Address(mac.to_vec()))
        })
    }

    /// Moves link `name` into the namespace whose file descriptor is
    /// `netns` (e.g. an open `/run/netns/NAME`).
    ///
    /// # Errors
    /// No such link, or the kernel refusing.
    pub fn set_netns(&mut self, name: &str, netns: BorrowedFd<'_>) -> Result<()> {
        let fd = netns.as_raw_fd();
        self.set_link(name, &|| format!("move {name} to netns fd {fd}"), |m| {
            m.attributes.push(LinkAttribute::NetNsFd(fd))
        })
    }

    /// Enslaves `name` to bridge (or bond) `master`, or releases it with `None`.
    ///
    /// # Errors
    /// No such link or master, or the kernel refusing.
    pub fn set_master(&mut self, name: &str, master: Option<&str>) -> Result<()> {
        let index = match master {
            Some(m) => self.link_index(m)?,
            None => 0,
        };
        self.set_link(name, &|| format!("set {name} master {master:?}"), |m| {
            m.attributes.push(LinkAttribute::Controller(index))
        })
    }

    /// `RTM_NEWLINK` with `NLM_F_CREATE | NLM_F_EXCL`.
    fn new_link(&mut self, what: &dyn Fn() -> String, msg: LinkMessage) -> Result<()> {
        self.request("RTM_NEWLINK", what, RouteNetlinkMessage::NewLink(msg), NLM_F_CREATE | NLM_F_EXCL).map(drop)
    }

    /// Creates a veth pair `name` <-> `peer` (down, no addresses). The peer
    /// is created directly in the namespace `peer_netns` when given (a
    /// namespace file descriptor), else next to `name`.
    ///
    /// # Errors
    /// Bad names, a name in use (`EEXIST`), or the kernel refusing.
    pub fn add_veth(&mut self, name: &str, peer: &str, peer_netns: Option<BorrowedFd<'_>>) -> Result<()> {
        self.add_veth_with(name, peer, peer_netns, None)
    }

    /// [`Netlink::add_veth`] with both ends' MTU set at creation when `mtu`
    /// is given (`ip link add NAME mtu M type veth peer name PEER mtu M`).
    ///
    /// # Errors
    /// As [`Netlink::add_veth`]; an MTU the veth driver refuses (`EINVAL`).
    pub fn add_veth_with(
        &mut self,
        name: &str,
        peer: &str,
        peer_netns: Option<BorrowedFd<'_>>,
        mtu: Option<u32>,
    ) -> Result<()> {
        check_ifname(name)?;
        check_ifname(peer)?;
        let mut peer_msg = LinkMessage::default();
        peer_msg.attributes.push(LinkAttribute::IfName(peer.to_string()));
        if let Some(fd) = peer_netns {
            peer_msg.attributes.push(LinkAttribute::NetNsFd(fd.as_raw_fd()));
        }
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        if let Some(mtu) = mtu {
            peer_msg.attributes.push(LinkAttribute::Mtu(mtu));
            msg.attributes.push(LinkAttribute::Mtu(mtu));
        }
        msg.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Veth),
            LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer_msg))),
        ]));
        self.new_link(&|| format!("add veth {name} peer {peer}"), msg)
    }

    /// Creates bridge `name` (down, default settings).
    ///
    /// # Errors
    /// Bad name, a name in use, or the kernel refusing.
    pub fn add_bridge(&mut self, name: &str) -> Result<()> {
        check_ifname(name)?;
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        msg.attributes.push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Bridge)]));
        self.new_link(&|| format!("add bridge {name}"), msg)
    }

    /// Deletes link `name` (for a veth, both ends).
    ///
    /// # Errors
    /// No such link, or the kernel refusing.
    pub fn del_link(&mut self, name: &str) -> Result<()> {
        let index = self.link_index(name)?;
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        self.request("RTM_DELLINK", &|| format!("delete link {name}"), RouteNetlinkMessage::DelLink(msg), 0).map(drop)
    }

    /// Adds `addr/prefix` to link `name` (`ip addr add` without options).
    ///
    /// # Errors
    /// No such link, a prefix too long for the family, or the kernel refusing.
    pub fn add_address(&mut self, name: &str, addr: IpAddr, prefix: u8) -> Result<()> {
        self.add_address_with(name, addr, prefix, false)
    }

    /// [`Netlink::add_address`], with `nodad` skipping IPv6 duplicate address
    /// detection (`ip addr add ... nodad`: usable at once).
    ///
    /// # Errors
    /// As [`Netlink::add_address`].
    pub fn add_address_with(&mut self, name: &str, addr: IpAddr, prefix: u8, nodad: bool) -> Result<()> {
        let what = || format!("add address {addr}/{prefix} to {name}{}", if nodad { " nodad" } else { "" });
        check_prefix(addr, prefix, &what)?;
        let index = self.link_index(name)?;
        let mut msg = AddressMessage::default();
        msg.header.family = family(addr);
        msg.header.prefix_len = prefix;
        msg.header.index = index;
        if addr.is_ipv4() {
            msg.attributes.push(AddressAttribute::Local(addr));
        }
        msg.attributes.push(AddressAttribute::Address(addr));
        if nodad {
            msg.attributes.push(AddressAttribute::Flags(AddressFlags::Nodad));
        }
        self.request("RTM_NEWADDR", &what, RouteNetlinkMessage::NewAddress(msg), NLM_F_CREATE | NLM_F_EXCL).map(drop)
    }

    /// Adds a route to `dest/prefix` in the main table, through gateway
    /// `via` and/or out of link `dev` (at least one of them). A prefix of 0
    /// is the default route.
    ///
    /// # Errors
    /// Neither `via` nor `dev`, mixed families, no such link, or the kernel
    /// refusing (`ENETUNREACH` for an unreachable gateway, `EEXIST`).
    pub fn add_route(&mut self, dest: IpAddr, prefix: u8, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
        let (msg, what) = self.route_message(dest, prefix, via, dev)?;
        self.request("RTM_NEWROUTE", &|| what.clone(), RouteNetlinkMessage::NewRoute(msg), NLM_F_CREATE | NLM_F_EXCL)
            .map(drop)
    }

    /// Deletes the route [`Netlink::add_route`] with the same arguments added.
    ///
    /// # Errors
    /// As [`Netlink::add_route`]; `ESRCH` when there is no such route.
    pub fn del_route(&mut self, dest: IpAddr, prefix: u8, via: Option<IpAddr>, dev: Option<&str>) -> Result<()> {
        let (msg, what) = self.route_message(dest, prefix, via, dev)?;
        let what = what.replacen("add", "delete", 1);
        self.request("RTM_DELROUTE", &|| what.clone(), RouteNetlinkMessage::DelRoute(msg), 0).map(drop)
    }

    fn route_message(
        &mut self,
        dest: IpAddr,
        prefix: u8,
        via: Option<IpAddr>,
        dev: Option<&str>,
    ) -> Result<(RouteMessage, String)> {
        let mut what = format!("add route {dest}/{prefix}");
        if let Some(v) = via {
            what += &format!(" via {v}");
        }
        if let Some(d) = dev {
            what += &format!(" dev {d}");
        }
        let invalid = |reason: &str| IoError::Syscall {
            call: "RTM_NEWROUTE",
            what: what.clone(),
            source: io::Error::new(io::ErrorKind::InvalidInput, reason.to_string()),
        };
        check_prefix(dest, prefix, &|| what.clone())?;
        if via.is_none() && dev.is_none() {
            return Err(invalid("a route needs a gateway or a device"));
        }
        if via.is_some_and(|v| v.is_ipv4() != dest.is_ipv4()) {
            return Err(invalid("gateway and destination of different families"));
        }
        let oif = match dev {
            Some(d) => Some(self.link_index(d)?),
            None => None,
        };
        let mut msg = RouteMessage::default();
        msg.header.address_family = family(dest);
        msg.header.destination_prefix_length = prefix;
        msg.header.table = RouteHeader::RT_TABLE_MAIN;
        msg.header.protocol = RouteProtocol::Boot;
        msg.header.scope = if via.is_some() { RouteScope::Universe } else { RouteScope::Link };
        msg.header.kind = RouteType::Unicast;
        if prefix > 0 {
            msg.attributes.push(RouteAttribute::Destination(RouteAddress::from(dest)));
        }
        if let Some(v) = via {
            msg.attributes.push(RouteAttribute::Gateway(RouteAddress::from(v)));
        }
        if let Some(i) = oif {
            msg.attributes.push(RouteAttribute::Oif(i));
        }
        Ok((msg, what))
    }

    /// The link-layer address of the neighbour entry for `ip` (on any link),
    /// if the kernel has one (`ip neigh show IP`).
    ///
    /// # Errors
    /// The dump failing.
    pub fn neighbour_mac(&mut self, ip: IpAddr) -> Result<Option<[u8; 6]>> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = family(ip);
        let replies = self.request(
            "RTM_GETNEIGH",
            &|| format!("neighbour {ip}"),
            RouteNetlinkMessage::GetNeighbour(msg),
            NLM_F_DUMP,
        )?;
        let want = match ip {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        };
        for reply in replies {
            let RouteNetlinkMessage::NewNeighbour(n) = reply else { continue };
            if !n.attributes.iter().any(|a| matches!(a, NeighbourAttribute::Destination(d) if *d == want)) {
                continue;
            }
            for a in &n.attributes {
                if let NeighbourAttribute::LinkLayerAddress(mac) = a
                    && let Ok(mac) = <[u8; 6]>::try_from(mac.as_slice())
                {
                    return Ok(Some(mac));
                }
            }
        }
        Ok(None)
    }

    /// Adds a permanent neighbour entry `ip` -> `mac` on link `dev`
    /// (`ip neigh add IP lladdr MAC dev DEV nud permanent`).
    ///
    /// # Errors
    /// No such link, an existing entry (`EEXIST`), or the kernel refusing.
    pub fn add_neighbour(&mut self, dev: &str, ip: IpAddr, mac: [u8; 6]) -> Result<()> {
        self.set_neighbour(dev, ip, mac, false)
    }

    /// [`Netlink::add_neighbour`], replacing an existing entry for `ip`
    /// (`ip neigh replace ... nud permanent`).
    ///
    /// # Errors
    /// No such link, or the kernel refusing.
    pub fn replace_neighbour(&mut self, dev: &str, ip: IpAddr, mac: [u8; 6]) -> Result<()> {
        self.set_neighbour(dev, ip, mac, true)
    }

    fn set_neighbour(&mut self, dev: &str, ip: IpAddr, mac: [u8; 6], replace: bool) -> Result<()> {
        let verb = if replace { "replace" } else { "add" };
        let what = || format!("{verb} neighbour {ip} lladdr {} dev {dev}", super::netns::format_mac(mac));
        let index = self.link_index(dev)?;
        let mut msg = NeighbourMessage::default();
        msg.header.family = family(ip);
        msg.header.ifindex = index;
        msg.header.state = NeighbourState::Permanent;
        msg.attributes.push(NeighbourAttribute::Destination(match ip {
            IpAddr::V4(a) => NeighbourAddress::Inet(a),
            IpAddr::V6(a) => NeighbourAddress::Inet6(a),
        }));
        msg.attributes.push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
        let flags = NLM_F_CREATE | if replace { NLM_F_REPLACE } else { NLM_F_EXCL };
        self.request("RTM_NEWNEIGH", &what, RouteNetlinkMessage::NewNeighbour(msg), flags).map(drop)
    }

    /// What the kernel says of link `name` (`ip -d link show NAME`), `None`
    /// if there is no such link.
    ///
    /// # Errors
    /// Bad name, or the request failing otherwise.
    pub fn link_state(&mut self, name: &str) -> Result<Option<LinkState>> {
        check_ifname(name)?;
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        let replies =
            match self.request("RTM_GETLINK", &|| format!("link {name}"), RouteNetlinkMessage::GetLink(msg), 0) {
                Ok(r) => r,
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => return Ok(None),
                Err(e) => return Err(e),
            };
        Ok(replies.into_iter().find_map(|m| match m {
            RouteNetlinkMessage::NewLink(l) => Some(LinkState::from_message(&l)),
            _ => None,
        }))
    }

    /// The addresses of link `name` (`ip addr show dev NAME`), IPv4 and IPv6
    /// (link-local ones included), as address and prefix length.
    ///
    /// # Errors
    /// No such link, or the dump failing.
    pub fn addresses(&mut self, name: &str) -> Result<Vec<(IpAddr, u8)>> {
        let index = self.link_index(name)?;
        let replies = self.request(
            "RTM_GETADDR",
            &|| format!("addresses of {name}"),
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            NLM_F_DUMP,
        )?;
        let mut out = Vec::new();
        for reply in replies {
            let RouteNetlinkMessage::NewAddress(a) = reply else { continue };
            if a.header.index != index {
                continue;
            }
            // IFA_LOCAL is the interface's own address (IFA_ADDRESS the peer's on point-to-point links).
            let local = a.attributes.iter().find_map(|x| match x {
                AddressAttribute::Local(ip) => Some(*ip),
                _ => None,
            });
            let addr = local.or_else(|| {
                a.attributes.iter().find_map(|x| match x {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })
            });
            if let Some(ip) = addr {
                out.push((ip, a.header.prefix_len));
            }
        }
        Ok(out)
    }

    /// The unicast routes of the main table of one family (`ip [-6] route
    /// show`).
    ///
    /// # Errors
    /// The dump failing.
    pub fn routes(&mut self, v6: bool) -> Result<Vec<RouteEntry>> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = if v6 { AddressFamily::Inet6 } else { AddressFamily::Inet };
        let replies = self.request(
            "RTM_GETROUTE",
            &|| format!("IPv{} routes", if v6 { 6 } else { 4 }),
            RouteNetlinkMessage::GetRoute(msg),
            NLM_F_DUMP,
        )?;
        let ip = |a: &RouteAddress| match a {
            RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
            RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
            _ => None,
        };
        let mut out = Vec::new();
        for reply in replies {
            let RouteNetlinkMessage::NewRoute(r) = reply else { continue };
            let table = r
                .attributes
                .iter()
                .find_map(|a| match a {
                    RouteAttribute::Table(t) => Some(*t),
                    _ => None,
                })
                .unwrap_or(u32::from(r.header.table));
            if table != u32::from(RouteHeader::RT_TABLE_MAIN) || r.header.kind != RouteType::Unicast {
                continue;
            }
            let unspecified = if v6 {
                IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
            };
            let mut entry =
                RouteEntry { dest: unspecified, prefix: r.header.destination_prefix_length, via: None, oif: None };
            for a in &r.attributes {
                match a {
                    RouteAttribute::Destination(d) => entry.dest = ip(d).unwrap_or(entry.dest),
                    RouteAttribute::Gateway(g) => entry.via = ip(g),
                    RouteAttribute::Oif(i) => entry.oif = Some(*i),
                    _ => {}
                }
            }
            out.push(entry);
        }
        Ok(out)
    }

    /// Creates VXLAN device `name` (down) as `ip link add NAME type vxlan id
    /// VNI remote R local L dstport P dev DEV [no]udpcsum` (see [`VxlanLink`]).
    ///
    /// # Errors
    /// Bad name, no such lower device, mixed address families, or the kernel refusing.
    pub fn add_vxlan(&mut self, name: &str, cfg: &VxlanLink<'_>) -> Result<()> {
        use netlink_packet_route::link::InfoVxlan;
        let VxlanLink { vni, remote, local, port, dev, udp_csum } = *cfg;
        check_ifname(name)?;
        let what = || format!("add vxlan {name} id {vni} remote {remote} local {local} dstport {port} dev {dev}");
        let link = self.link_index(dev)?;
        let mut data = vec![InfoVxlan::Id(vni), InfoVxlan::Link(link), InfoVxlan::Port(port)];
        match (remote, local) {
            (IpAddr::V4(r), IpAddr::V4(l)) => {
                data.extend([InfoVxlan::Group(r), InfoVxlan::Local(l), InfoVxlan::UDPCsum(udp_csum)]);
            }
            (IpAddr::V6(r), IpAddr::V6(l)) => {
                data.extend([InfoVxlan::Group6(r), InfoVxlan::Local6(l), InfoVxlan::UDPZeroCsumTX(!udp_csum)]);
            }
            _ => {
                return Err(IoError::Syscall {
                    call: "RTM_NEWLINK",
                    what: what(),
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                });
            }
        }
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        msg.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Vxlan),
            LinkInfo::Data(InfoData::Vxlan(data)),
        ]));
        self.new_link(&what, msg)
    }

    /// Creates VXLAN device `name` (down) in collect-metadata mode
    /// (`ip link add NAME type vxlan dstport PORT external`): once up it
    /// holds UDP tunnel sockets on `port` for IPv4 and IPv6, so the
    /// namespace's GRO coalesces VXLAN packets to that port (offload-rules
    /// 2.2 item 1) whatever their addresses.
    ///
    /// # Errors
    /// Bad name, a name or port in use, or the kernel refusing.
    pub fn add_vxlan_external(&mut self, name: &str, port: u16) -> Result<()> {
        check_ifname(name)?;
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_string()));
        msg.attributes.push(LinkAttribute::LinkInfo(vec![
            LinkInfo::Kind(InfoKind::Vxlan),
            LinkInfo::Data(InfoData::Vxlan(vec![InfoVxlan::CollectMetadata(true), InfoVxlan::Port(port)])),
        ]));
        self.new_link(&|| format!("add vxlan {name} dstport {port} external"), msg)
    }
}

/// A link as [`Netlink::link_state`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkState {
    /// Interface index.
    pub index: u32,
    /// `IFLA_INFO_KIND` (`tun` for TAPs and TUNs, `veth`, `bridge`, ...), if any.
    pub kind: Option<String>,
    /// `ARPHRD_*` link type: 1 (Ethernet) for a TAP, 65534 (none) for a TUN.
    pub link_type: u16,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Operational state up (RFC 2863 `IF_OPER_UP`: carrier and queue
    /// active; `ip link show`'s `state UP`).
    pub oper_up: bool,
    /// The MTU.
    pub mtu: Option<u32>,
    /// The index of the link's master (bridge, bond), if enslaved.
    pub master: Option<u32>,
}

impl LinkState {
    fn from_message(l: &LinkMessage) -> LinkState {
        let mut state = LinkState {
            index: l.header.index,
            kind: None,
            link_type: u16::from(l.header.link_layer_type),
            up: l.header.flags.contains(LinkFlags::Up),
            oper_up: l.attributes.iter().any(|a| matches!(a, LinkAttribute::OperState(State::Up))),
            mtu: None,
            master: None,
        };
        for a in &l.attributes {
            match a {
                LinkAttribute::Mtu(m) => state.mtu = Some(*m),
                LinkAttribute::Controller(m) if *m != 0 => state.master = Some(*m),
                LinkAttribute::LinkInfo(infos) => {
                    for i in infos {
                        if let LinkInfo::Kind(k) = i {
                            state.kind = Some(k.to_string());
                        }
                    }
                }
                _ => {}
            }
        }
        state
    }
}

/// A route as [`Netlink::routes`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    /// Destination (the unspecified address for a default route).
    pub dest: IpAddr,
    /// Destination prefix length (0: default route).
    pub prefix: u8,
    /// Gateway, if any.
    pub via: Option<IpAddr>,
    /// Output interface index, if any.
    pub oif: Option<u32>,
}

fn family(addr: IpAddr) -> AddressFamily {
    if addr.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 }
}

fn check_prefix(addr: IpAddr, prefix: u8, what: &dyn Fn() -> String) -> Result<()> {
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > max {
        return Err(IoError::Syscall {
            call: "netlink",
            what: what(),
            source: io::Error::new(io::ErrorKind::InvalidInput, format!("prefix longer than {max}")),
        });
    }
    Ok(())
}

/// Parses `ADDR/PREFIX` (`10.0.0.1/24`, `fd00::1/64`); a bare address is a
/// host prefix (/32, /128).
///
/// # Errors
/// Not an address, or a prefix too long for its family.
pub fn parse_cidr(cidr: &str) -> Result<(IpAddr, u8)> {
    let bad = |reason| IoError::InvalidName { name: cidr.to_string(), reason };
    let (addr, prefix) = match cidr.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (cidr, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| bad("not an IP address (ADDR/PREFIX)"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        Some(p) => p.parse::<u8>().map_err(|_| bad("prefix is not a number"))?,
        None => max,
    };
    if prefix > max {
        return Err(bad("prefix longer than the address"));
    }
    Ok((addr, prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_parsing() {
        assert_eq!(parse_cidr("10.0.0.1/24").unwrap(), ("10.0.0.1".parse().unwrap(), 24));
        assert_eq!(parse_cidr("fd00::1/64").unwrap(), ("fd00::1".parse().unwrap(), 64));
        assert_eq!(parse_cidr("10.0.0.1").unwrap().1, 32);
        for bad in ["10.0.0.1/33", "fd00::1/129", "x/1", "10.0.0.1/a", ""] {
            assert!(parse_cidr(bad).is_err(), "{bad}");
        }
    }
}

/// Settings of a VXLAN device made by [`Netlink::add_vxlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VxlanLink<'a> {
    /// VNI.
    pub vni: u32,
    /// Unicast remote (outer destination) address.
    pub remote: IpAddr,
    /// Local (outer source) address, same family as `remote`.
    pub local: IpAddr,
    /// UDP destination port (4789 for IANA VXLAN).
    pub port: u16,
    /// Lower device.
    pub dev: &'a str,
    /// Outer UDP checksum on transmit: `udpcsum` (IPv4), not
    /// `udp6zerocsumtx` (IPv6).
    pub udp_csum: bool,
}
