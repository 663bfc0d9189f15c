//! IPv4/IPv6 router: interfaces (devices of the graph) with addresses,
//! longest-prefix routes, neighbour tables filled by ARP and NDP, TTL / hop
//! limit handling with incremental checksum updates, and IPv4 NAT
//! ([`super::nat`]). A forwarded superpacket stays one packet: its headers
//! are rewritten once and its GSO metadata kept (offload-rules 3.6: the MTU
//! check uses the per-segment length).
//!
//! Every received IPv4/IPv6 packet first passes Linux's IP input checks
//! ([`super::ingress`]; `docs/topology.md`, "Drop reasons of the router"):
//! nothing Linux would refuse is routed or reaches NAT.

use super::graph::{Device, DeviceId};
use super::ingress::{self, IngressDrop, Ipv6Input};
use super::nat::{L4Conn, Nat, Tuple, rewrite, tuple_of};
use super::neighbours::SharedNeighbours;
use super::netdev::{Cx, NetDevice, Verdict};
use super::tables::{Defrag, TableUsage};
use std::any::Any;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use superpacket::csum::update_u16;
use superpacket::packet::Packet;
use superpacket::wire::ethernet::ETHERNET_HEADER_LEN;
use superpacket::wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetFrame, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Packet,
    Ipv6Packet, MacAddr,
};

/// A route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix.
    pub prefix: IpAddr,
    /// Prefix length.
    pub len: u8,
    /// Next hop (none: directly connected).
    pub via: Option<IpAddr>,
    /// Egress interface.
    pub dev: DeviceId,
}

/// How the router ended with a packet it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    /// Sent on (as one packet or as fragments).
    Forwarded,
    /// Waiting for its neighbour or for the rest of its datagram.
    Held,
    /// ARP or neighbour discovery the router took itself.
    Consumed,
    /// For a local UDP socket: the packet is the last entry of the output
    /// (the socket's device, the packet, its length), handed to that device
    /// ([`Verdict::Deliver`]) rather than transmitted.
    Local,
}

/// A local UDP socket of a device (a tunnel endpoint: VXLAN, Geneve): what
/// the router receives for one of its addresses (or `local`, if given) on
/// UDP port `port` is delivered to `dev` instead of being refused as
/// `local-delivery-unsupported`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpSocket {
    /// Local UDP port.
    pub port: u16,
    /// Local address it is bound to (`None`: any of the router's).
    pub local: Option<IpAddr>,
    /// The device that owns it.
    pub dev: DeviceId,
}

/// A router interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The device.
    pub dev: DeviceId,
    /// Addresses with prefix lengths.
    pub addrs: Vec<(IpAddr, u8)>,
}

/// Most packets waiting for neighbour resolution (all neighbours together);
/// more are dropped as `neighbour-queue-full`. Packets leave it when their
/// neighbour answers or is given up ([`SOLICIT_PROBES`]).
pub const MAX_PENDING: usize = 64;

/// Solicitations sent for an unresolved neighbour before it is given up
/// (Linux's `mcast_solicit`, 3), one every [`SOLICIT_INTERVAL_NS`]
/// (`retrans_time`, 1 s). A neighbour that answered none of them is
/// unreachable: the packets waiting for it are dropped as
/// `neighbour-unresolved` (Linux counts them as `unresolved_discards`) and
/// leave the neighbour queue, so silent next hops cannot fill it for good.
pub const SOLICIT_PROBES: u32 = 3;

/// Time between two solicitations of one unresolved neighbour (1 s, Linux's
/// `retrans_time`); see [`SOLICIT_PROBES`].
pub const SOLICIT_INTERVAL_NS: u64 = 1_000_000_000;

/// A neighbour being resolved: packets for it wait in the neighbour queue.
#[derive(Debug, Clone, Copy)]
struct Resolving {
    hop: IpAddr,
    egress: DeviceId,
    /// The egress interface's MAC (the solicitation's source).
    src_mac: MacAddr,
    /// Solicitations sent so far (1 ..= [`SOLICIT_PROBES`]).
    probes: u32,
    /// When the last one was sent (engine clock, ns).
    last_probe_ns: u64,
}

/// Most learned neighbours (Linux's `gc_thresh3` default, 1024). Once full,
/// the router learns only neighbours it asked for (packets wait for them);
/// unsolicited ARP/NDP from new addresses is answered but not remembered
/// (counted in [`Router::neighbours_refused`]), so a flood of spoofed
/// sources cannot grow the table. Static neighbours are always added.
pub const MAX_NEIGHBOURS: usize = 1024;

/// The router. See the module documentation.
#[derive(Debug, Default)]
pub struct Router {
    /// Interfaces.
    pub interfaces: Vec<Interface>,
    /// Routes (connected routes are added with the interface addresses).
    pub routes: Vec<Route>,
    /// Neighbours (ARP and NDP), keyed by address: this worker's copy of
    /// the shared table when the engine's workers share one
    /// ([`Router::share_tables`]).
    pub neighbours: HashMap<IpAddr, MacAddr>,
    /// The neighbour table of all workers, if shared.
    shared_neighbours: Option<Arc<SharedNeighbours>>,
    /// The generation of `shared_neighbours` that `neighbours` holds.
    neighbours_generation: u64,
    /// IPv4 NAT.
    pub nat: Nat,
    /// Neighbours not learned because the table was full ([`MAX_NEIGHBOURS`]).
    pub neighbours_refused: u64,
    /// Neighbours that gave no answer to [`SOLICIT_PROBES`] solicitations.
    pub neighbours_failed: u64,
    /// Local UDP sockets of devices (tunnel endpoints).
    pub udp_sockets: Vec<UdpSocket>,
    pending: Vec<(IpAddr, DeviceId, Packet, usize)>,
    /// Drops not reported as an `input` error (refused fragments of a
    /// refragmented datagram, packets of a neighbour given up), until the
    /// graph collects them with [`Router::take_drops`].
    drops: Vec<(DeviceId, &'static str, u64)>,
    /// Unresolved neighbours with packets waiting (at most one entry per
    /// (next hop, egress); every entry has at least one pending packet).
    resolving: Vec<Resolving>,
    /// IPv4 defragmentation before NAT (created with the first fragment
    /// that meets NAT rules; see [`Defrag`]).
    defrag: Option<Box<Defrag>>,
    /// The defragmenter's configuration (`[reassembly]` of a topology);
    /// `None`: [`Defrag::default_config`].
    pub defrag_config: Option<superpacket::offload::frag::ReasmConfig>,
    peak_neighbours: usize,
    peak_pending: usize,
    /// Scratch for the frames one operation sends (kept between calls).
    out: Vec<(DeviceId, Packet, usize)>,
    /// The router's own device in its graph (set by the graph when it
    /// creates the router), where its refusals are counted.
    pub(crate) device: Option<DeviceId>,
}

fn prefix_match(a: IpAddr, p: IpAddr, len: u8) -> bool {
    match (a, p) {
        (IpAddr::V4(a), IpAddr::V4(p)) => {
            let m = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            u32::from(a) & m == u32::from(p) & m
        }
        (IpAddr::V6(a), IpAddr::V6(p)) => {
            let m = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            u128::from(a) & m == u128::from(p) & m
        }
        _ => false,
    }
}

fn frame_with(dst: MacAddr, src: MacAddr, ethertype: u16, payload: &[u8]) -> Packet {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    Packet::from_frame(&f)
}

/// The ARP reply frame that announces `mac` for the address `request` asks
/// about, sent to the requester (the router's own answers, and a TUN
/// port's answers for its peer).
///
/// # Errors
/// `arp-emit` (the packet could not be written).
pub(crate) fn arp_reply(request: &ArpRepr, mac: MacAddr) -> Result<Packet, &'static str> {
    let reply = ArpRepr::reply_to(request, mac);
    let mut buf = [0u8; 28];
    reply.emit(&mut ArpPacket::new_unchecked(&mut buf[..])).map_err(|_| "arp-emit")?;
    Ok(frame_with(request.source_hardware_addr, mac, 0x0806, &buf))
}

/// A neighbour discovery message ([`parse_ndp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ndp {
    /// A neighbour solicitation from `src` for `target`.
    Solicit {
        /// The IPv6 source.
        src: Ipv6Addr,
        /// The address asked about.
        target: Ipv6Addr,
        /// The solicitor's link-layer address option.
        source_lladdr: Option<MacAddr>,
    },
    /// A neighbour advertisement: `target` is at `lladdr`.
    Advert {
        /// The address advertised.
        target: Ipv6Addr,
        /// Its link-layer address option.
        lladdr: Option<MacAddr>,
    },
    /// Another ICMPv6 message.
    Other,
}

/// The neighbour discovery message of Ethernet frame `b` (an untagged
/// IPv6 frame; extension headers are walked, see
/// [`ingress::ipv6_header`]).
///
/// # Errors
/// `bad-icmpv6` for a frame whose IPv6 header does not validate, that is
/// not an unfragmented ICMPv6 message, or whose message does not parse.
// Used by the TUN port, which answers its peer's solicitations itself.
#[cfg_attr(not(feature = "tun"), allow(dead_code))]
pub(crate) fn parse_ndp(b: &[u8]) -> Result<Ndp, &'static str> {
    let ip = ingress::ipv6_header(b, ETHERNET_HEADER_LEN, b.len()).map_err(|_| "bad-icmpv6")?;
    ndp_message(b, &ip)
}

/// The neighbour discovery message of frame `b` whose IPv6 header `ip` was
/// validated: the ICMPv6 message at the upper-layer offset the walk found,
/// bounded by the payload length (never the Ethernet padding).
fn ndp_message(b: &[u8], ip: &Ipv6Input) -> Result<Ndp, &'static str> {
    if ip.upper_protocol != IpProtocol::ICMPV6 || ip.is_fragment {
        return Err("bad-icmpv6");
    }
    let msg = b.get(ip.upper_offset..ip.end()).ok_or("bad-icmpv6")?;
    let p = Icmpv6Packet::new_checked(msg).map_err(|_| "bad-icmpv6")?;
    let repr = Icmpv6Repr::parse(&p).map_err(|_| "bad-icmpv6")?;
    if matches!(repr, Icmpv6Repr::NeighborSolicit { .. } | Icmpv6Repr::NeighborAdvert { .. }) {
        // Only on-link senders may write the neighbour table: RFC 4861
        // 7.1.1/7.1.2 and Linux's `ndisc_rcv` drop neighbour discovery with
        // a hop limit below 255, `icmpv6_rcv` one with a bad checksum.
        if ip.hop_limit != 255 {
            return Err(NDP_HOP_LIMIT);
        }
        if !p.verify_checksum(&ip.src, &ip.dst) {
            return Err(ICMPV6_CHECKSUM);
        }
    }
    Ok(match repr {
        Icmpv6Repr::NeighborSolicit { target_addr, source_lladdr } => {
            Ndp::Solicit { src: ip.src, target: target_addr, source_lladdr }
        }
        Icmpv6Repr::NeighborAdvert { target_addr, target_lladdr, .. } => {
            Ndp::Advert { target: target_addr, lladdr: target_lladdr }
        }
        _ => Ndp::Other,
    })
}

/// Drop reason: neighbour discovery whose hop limit is not 255 (it may
/// come from off the link: RFC 4861 7.1.1, Linux's `ndisc_rcv`).
pub const NDP_HOP_LIMIT: &str = "ndp-hop-limit";

/// Drop reason: an ICMPv6 neighbour discovery message with a bad checksum
/// (Linux's `icmpv6_rcv`).
pub const ICMPV6_CHECKSUM: &str = "icmpv6-checksum";

/// The drop reason of a packet the router would forward although it came
/// in a link-layer broadcast or multicast frame: `ip_forward` and
/// `ip6_forward` forward only frames addressed to the router
/// (`skb->pkt_type != PACKET_HOST`).
pub const LINK_LAYER_MULTICAST: &str = "link-layer-multicast";

/// Sets the Ethernet source (`src`) and, if given, destination of frame
/// `pkt` (the router's output rewrite). Frames shorter than an Ethernet
/// header never reach here (input checks them); they are left alone.
fn set_macs(pkt: &mut Packet, src: MacAddr, dst: Option<MacAddr>) {
    if let Ok(mut eth) = EthernetFrame::new_checked(pkt.linear_mut()) {
        eth.set_src_addr(src);
        if let Some(d) = dst {
            eth.set_dst_addr(d);
        }
    }
}

/// TTL - 1 of the validated IPv4 header at `l3`, with the header checksum
/// updated incrementally (RFC 1624) over the TTL/protocol word.
fn decrement_ttl(pkt: &mut Packet, l3: usize) -> Result<(), &'static str> {
    let b = pkt.linear_mut().get_mut(l3..).filter(|b| b.len() >= 20).ok_or(IngressDrop::Ipv4Truncated.reason())?;
    let mut ip = Ipv4Packet::new_unchecked(b);
    let (ttl, proto) = (ip.ttl(), ip.protocol().0);
    let new_ttl = ttl.checked_sub(1).ok_or("ttl-exceeded")?;
    let old = u16::from_be_bytes([ttl, proto]);
    let new = u16::from_be_bytes([new_ttl, proto]);
    ip.set_ttl(new_ttl);
    ip.set_checksum(update_u16(ip.checksum(), old, new));
    Ok(())
}

/// The neighbour advertisement frame answering a solicitation for
/// `target_addr` from `src` (whose link-layer address, if it gave one, is
/// `source_lladdr`): `target_addr` is at `mac`, solicited, override, with
/// the router flag `router`.
///
/// # Errors
/// `ndp-emit` (the packet could not be written).
pub(crate) fn neighbour_advert(
    target_addr: Ipv6Addr,
    src: Ipv6Addr,
    source_lladdr: Option<MacAddr>,
    mac: MacAddr,
    router: bool,
) -> Result<Packet, &'static str> {
    let na =
        Icmpv6Repr::NeighborAdvert { router, solicited: true, override_: true, target_addr, target_lladdr: Some(mac) };
    let mut buf = [0u8; 128];
    let n = na.emit_ipv6_packet(target_addr, src, 255, &mut buf).map_err(|_| "ndp-emit")?;
    let dst_mac = source_lladdr.unwrap_or(MacAddr::from_ipv6_multicast(src.octets()));
    Ok(frame_with(dst_mac, mac, 0x86DD, &buf[..n]))
}

impl Router {
    /// Adds (or extends) interface `dev` with `addr/len` and its connected
    /// route. The graph wires the interface to the router at the same time:
    /// use [`super::Graph::add_address`].
    pub(crate) fn add_address(&mut self, dev: DeviceId, addr: IpAddr, len: u8) {
        match self.interfaces.iter_mut().find(|i| i.dev == dev) {
            Some(i) => i.addrs.push((addr, len)),
            None => self.interfaces.push(Interface { dev, addrs: vec![(addr, len)] }),
        }
        self.routes.push(Route { prefix: addr, len, via: None, dev });
    }

    /// Adds a route.
    pub fn add_route(&mut self, route: Route) {
        self.routes.push(route);
    }

    /// Adds a static neighbour.
    pub fn add_neighbour(&mut self, addr: IpAddr, mac: MacAddr) {
        self.neighbours.insert(addr, mac);
        self.peak_neighbours = self.peak_neighbours.max(self.neighbours.len());
    }

    /// Makes this router (of one engine worker) share `first`'s (another
    /// worker's, built from the same topology) NAT connection table and
    /// neighbour table: a connection is translated the same way whichever
    /// worker a packet of it reaches, and a neighbour learned by one worker
    /// releases the packets another holds for it (`docs/topology.md`, "NAT
    /// and routing with several workers").
    pub fn share_tables(&mut self, first: &mut Router) {
        self.nat.share_table(&mut first.nat);
        let shared =
            first.shared_neighbours.get_or_insert_with(|| Arc::new(SharedNeighbours::new(&first.neighbours))).clone();
        self.shared_neighbours = Some(shared);
        self.neighbours_generation = 0;
    }

    /// Whether `id` is a router interface.
    pub fn has_interface(&self, id: DeviceId) -> bool {
        self.interfaces.iter().any(|i| i.dev == id)
    }

    fn is_local(&self, a: IpAddr) -> bool {
        self.interfaces.iter().any(|i| i.addrs.iter().any(|(x, _)| *x == a))
    }

    fn iface_v4(&self, dev: DeviceId) -> Option<Ipv4Addr> {
        let i = self.interfaces.iter().find(|i| i.dev == dev)?;
        i.addrs.iter().find_map(|(a, _)| match a {
            IpAddr::V4(v) => Some(*v),
            _ => None,
        })
    }

    fn iface_v6(&self, dev: DeviceId) -> Option<Ipv6Addr> {
        let i = self.interfaces.iter().find(|i| i.dev == dev)?;
        i.addrs.iter().find_map(|(a, _)| match a {
            IpAddr::V6(v) => Some(*v),
            _ => None,
        })
    }

    /// Longest-prefix match: (egress, next hop).
    pub fn route(&self, dst: IpAddr) -> Option<(DeviceId, IpAddr)> {
        self.routes
            .iter()
            .filter(|r| prefix_match(dst, r.prefix, r.len))
            .max_by_key(|r| r.len)
            .map(|r| (r.dev, r.via.unwrap_or(dst)))
    }

    /// Whether `dst` is the subnet-directed broadcast address of one of the
    /// router's IPv4 prefixes shorter than /31: Linux's local table holds a
    /// broadcast route for it (`fib_add_ifaddr`), so `ip_route_input_slow`
    /// delivers it locally (`brd_input`) and never forwards it (directed
    /// broadcast forwarding, `bc_forwarding`, is off by default).
    fn is_directed_broadcast(&self, dst: Ipv4Addr) -> bool {
        self.interfaces.iter().flat_map(|i| i.addrs.iter()).any(|&(a, len)| match a {
            IpAddr::V4(a) if len < 31 => {
                let host = u32::MAX >> len;
                u32::from(dst) == u32::from(a) | host
            }
            _ => false,
        })
    }

    /// A packet received on interface `iface` (frame with a plain Ethernet
    /// header: VLAN devices below have popped their tags) whose total length
    /// is `len`. Outputs are `(egress, frame, total length)`.
    ///
    /// Every IPv4/IPv6 packet is validated first as Linux's IP input does
    /// ([`super::ingress`]; `docs/topology.md`, "Drop reasons of the
    /// router"), before NAT sees it, and its Ethernet padding is trimmed.
    ///
    /// # Errors
    /// A drop reason (counted on the interface by the graph).
    pub fn input(
        &mut self,
        iface: DeviceId,
        pkt: Packet,
        len: usize,
        now: u64,
        devs: &[Device],
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        let mac = devs.get(iface.0).ok_or("no-device")?.mac;
        let eth = EthernetFrame::new_checked(pkt.linear()).map_err(|_| "runt")?;
        let dst_mac = eth.dst_addr();
        if dst_mac != mac && !dst_mac.is_multicast() {
            return Err("not-for-us");
        }
        match eth.ethertype() {
            EtherType::ARP => self.arp_input(iface, mac, &pkt, out),
            EtherType::IPV4 => self.ipv4_input(iface, dst_mac.is_multicast(), pkt, len, now, devs, out),
            EtherType::IPV6 => self.ipv6_input(iface, mac, dst_mac.is_multicast(), pkt, len, now, devs, out),
            _ => Err("unknown-ethertype"),
        }
    }

    /// IPv4 input and forwarding; `l2_multicast`: the frame came to a
    /// link-layer broadcast or multicast address.
    #[allow(clippy::too_many_arguments)]
    fn ipv4_input(
        &mut self,
        iface: DeviceId,
        l2_multicast: bool,
        mut pkt: Packet,
        len: usize,
        now: u64,
        devs: &[Device],
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        let l3 = ETHERNET_HEADER_LEN;
        let mut ip = ingress::ipv4_input(pkt.linear(), l3, len)?;
        if self.is_directed_broadcast(ip.dst) {
            return Err(IngressDrop::BroadcastDestination.reason());
        }
        let mut len = ingress::trim_padding(&mut pkt, len, l3, ip.end());
        // Conntrack defragmentation: NAT needs the whole datagram. Every
        // fragment was validated above, as `ip_rcv_core` does before
        // PREROUTING.
        let mut geometry = None;
        if !self.nat.rules.is_empty() && ip.is_fragment {
            let cfg = self.defrag_config;
            let d =
                self.defrag.get_or_insert_with(|| Box::new(Defrag::new(cfg.unwrap_or_else(Defrag::default_config))));
            match d.push(pkt, iface, now)? {
                None => return Ok(Routed::Held),
                Some((whole, info)) => {
                    pkt = whole;
                    len = pkt.total_len();
                    // The reassembler wrote a fresh header (length and
                    // checksum); read it again.
                    ip = ingress::ipv4_header(pkt.linear(), l3, len)?;
                    geometry = Some(info);
                }
            }
        }
        // The connection; a TCP/UDP header conntrack calls invalid is never
        // translated: with NAT rules such a packet is dropped.
        let conn = match tuple_of(pkt.linear(), &ip, pkt.meta.is_gso()) {
            Ok(c) => c,
            Err(reason) if !self.nat.rules.is_empty() => return Err(reason),
            Err(_) => None,
        };
        let dst = ip.dst;
        if l2_multicast {
            // ip_forward: only frames sent to us are forwarded.
            return Err(if self.is_local(IpAddr::V4(dst)) {
                "local-delivery-unsupported"
            } else {
                LINK_LAYER_MULTICAST
            });
        }
        // NAT: a known connection, or DNAT for a new one (prerouting).
        let mut new_dst = dst;
        let mut xlate: Option<(Tuple, Tuple, usize)> = None;
        // Without rules no connection is ever created: nothing to look up.
        let conn = conn.filter(|_| !self.nat.rules.is_empty());
        // A lookup that finds nothing has also removed an expired entry, so
        // `known` is all postrouting needs to know (no second lookup).
        let mut known = false;
        if let Some(L4Conn { tuple: t, l4, fin_rst }) = conn {
            if let Some(r) = self.nat.lookup(&t, now, fin_rst) {
                new_dst = r.to.dst;
                xlate = Some((t, r.to, l4));
                known = true;
            } else if let Some((to, to_port)) = self.nat.dnat(&t, iface.0) {
                new_dst = to;
                xlate = Some((t, Tuple { dst: to, dport: to_port, ..t }, l4));
            }
        }
        if xlate.is_none() && self.is_local(IpAddr::V4(dst)) {
            let socket = self.udp_socket(IpAddr::V4(dst), ip.protocol, ip.is_fragment, pkt.linear(), ip.l4())?;
            out.push((socket, pkt, len));
            return Ok(Routed::Local);
        }
        if ip.ttl <= 1 {
            return Err("ttl-exceeded");
        }
        let (egress, hop) = self.route(IpAddr::V4(new_dst)).ok_or("no-route")?;
        // New connection: SNAT/masquerade (postrouting) and create it.
        if let Some(L4Conn { tuple: t, l4, .. }) = conn
            && !known
        {
            let after_dnat = xlate.map_or(t, |x| x.1);
            let src = self.nat.snat(egress.0, self.iface_v4(egress));
            if xlate.is_some() || src.is_some() {
                let to = Tuple { src: src.unwrap_or(after_dnat.src), ..after_dnat };
                let to = self.nat.create(t, to, now).ok_or("conntrack-full")?;
                xlate = Some((t, to, l4));
            }
        }
        if let Some((from, to, l4)) = xlate {
            rewrite(&mut pkt, l3, l4, &from, &to)?;
        }
        decrement_ttl(&mut pkt, l3)?;
        if let (Some(info), Some(d)) = (geometry, self.defrag.as_mut()) {
            let mut frags = Vec::new();
            let mtu = devs.get(egress.0).ok_or("no-device")?.mtu;
            d.refragment(pkt, mtu, &info, &mut frags)?;
            // Every fragment is sent; each refused one is a drop.
            for f in frags {
                let n = f.total_len();
                if let Err(reason) = self.send(egress, hop, f, n, now, devs, out) {
                    self.count_drops(self.device.unwrap_or(iface), reason, 1);
                }
            }
            return Ok(Routed::Forwarded);
        }
        self.send(egress, hop, pkt, len, now, devs, out)
    }

    /// IPv6 input and forwarding (see [`Router::ipv4_input`]); neighbour
    /// discovery to the router (its addresses or a multicast group) is
    /// consumed here.
    #[allow(clippy::too_many_arguments)]
    fn ipv6_input(
        &mut self,
        iface: DeviceId,
        mac: MacAddr,
        l2_multicast: bool,
        mut pkt: Packet,
        len: usize,
        now: u64,
        devs: &[Device],
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        let l3 = ETHERNET_HEADER_LEN;
        let ip = ingress::ipv6_input(pkt.linear(), l3, len)?;
        let len = ingress::trim_padding(&mut pkt, len, l3, ip.end());
        let dst = ip.dst;
        let local = self.is_local(IpAddr::V6(dst));
        if ip.upper_protocol == IpProtocol::ICMPV6 && !ip.is_fragment && (local || dst.is_multicast()) {
            return self.ndp_input(iface, mac, &pkt, &ip, out);
        }
        if local {
            let socket =
                self.udp_socket(IpAddr::V6(dst), ip.upper_protocol, ip.is_fragment, pkt.linear(), ip.upper_offset)?;
            out.push((socket, pkt, len));
            return Ok(Routed::Local);
        }
        if l2_multicast {
            // ip6_forward: only frames sent to us are forwarded.
            return Err(LINK_LAYER_MULTICAST);
        }
        if ip.hop_limit <= 1 {
            return Err("hop-limit-exceeded");
        }
        let (egress, hop) = self.route(IpAddr::V6(dst)).ok_or("no-route")?;
        let b = pkt.linear_mut().get_mut(l3..).ok_or(IngressDrop::Ipv6Truncated.reason())?;
        let mut v = Ipv6Packet::new_unchecked(b);
        v.set_hop_limit(ip.hop_limit - 1);
        self.send(egress, hop, pkt, len, now, devs, out)
    }

    /// The device whose UDP socket takes a packet for local address `dst`
    /// (protocol `proto`, L4 header at `l4` of `linear`); fragments are not
    /// reassembled for local delivery.
    ///
    /// # Errors
    /// `local-delivery-unsupported` when no socket takes it (the host stack
    /// is not the engine's), `local-fragment-unsupported` for a fragment.
    fn udp_socket(
        &self,
        dst: IpAddr,
        proto: IpProtocol,
        is_fragment: bool,
        linear: &[u8],
        l4: usize,
    ) -> Result<DeviceId, &'static str> {
        if self.udp_sockets.is_empty() || proto != IpProtocol::UDP {
            return Err("local-delivery-unsupported");
        }
        if is_fragment {
            return Err("local-fragment-unsupported");
        }
        let port = linear.get(l4 + 2..l4 + 4).ok_or("udp-truncated")?;
        let port = u16::from_be_bytes([port[0], port[1]]);
        self.udp_sockets
            .iter()
            .find(|s| s.port == port && s.local.is_none_or(|a| a == dst))
            .map(|s| s.dev)
            .ok_or("local-delivery-unsupported")
    }

    /// A locally generated frame (Ethernet header present, addresses
    /// rewritten on output): routed like a forwarded one without TTL change.
    /// Its IP header is checked for structure ([`ingress::ipv4_header`],
    /// [`ingress::ipv6_header`]: lengths, version, IPv4 header checksum)
    /// and bytes beyond the IP length are trimmed; the address rules of
    /// input do not apply to the host's own packets.
    ///
    /// # Errors
    /// A drop reason.
    pub fn output_local(
        &mut self,
        mut pkt: Packet,
        now: u64,
        devs: &[Device],
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        let l3 = ETHERNET_HEADER_LEN;
        let len = pkt.total_len();
        let ethertype = EthernetFrame::new_checked(pkt.linear()).map_err(|_| "not-ip")?.ethertype();
        let (dst, end) = match ethertype {
            EtherType::IPV4 => {
                let ip = ingress::ipv4_header(pkt.linear(), l3, len)?;
                (IpAddr::V4(ip.dst), ip.end())
            }
            EtherType::IPV6 => {
                let ip = ingress::ipv6_header(pkt.linear(), l3, len)?;
                (IpAddr::V6(ip.dst), ip.end())
            }
            _ => return Err("not-ip"),
        };
        let (egress, hop) = self.route(dst).ok_or("no-route")?;
        let len = ingress::trim_padding(&mut pkt, len, l3, end);
        self.send(egress, hop, pkt, len, now, devs, out)
    }

    /// Resolves `hop` on `egress` and queues the frame, or holds it and
    /// sends an ARP request / neighbour solicitation (repeated and given up
    /// by [`Router::housekeeping`]).
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        egress: DeviceId,
        hop: IpAddr,
        mut pkt: Packet,
        len: usize,
        now: u64,
        devs: &[Device],
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        let dev = devs.get(egress.0).ok_or("no-device")?;
        // MTU: per segment for superpackets (offload-rules 3.6).
        if !pkt.meta.is_gso() && len.saturating_sub(14) > dev.mtu {
            return Err("exceeds-mtu");
        }
        let src_mac = dev.mac;
        let mut known = self.neighbours.get(&hop).copied();
        if known.is_none() && self.shared_neighbours.is_some() {
            // Another worker may have learned it: copy the shared table on a
            // miss only (and at housekeeping), so that a flood of neighbour
            // changes costs the other workers nothing per packet.
            self.sync_neighbours(out);
            known = self.neighbours.get(&hop).copied();
        }
        // The source address is ours whether the frame leaves now or after
        // neighbour resolution.
        if let Some(mac) = known {
            set_macs(&mut pkt, src_mac, Some(mac));
            out.push((egress, pkt, len));
            return Ok(Routed::Forwarded);
        }
        set_macs(&mut pkt, src_mac, None);
        if self.pending.len() >= MAX_PENDING {
            return Err("neighbour-queue-full");
        }
        // One solicitation per unresolved neighbour: later packets only
        // queue behind the first.
        if !self.resolving.iter().any(|r| r.hop == hop && r.egress == egress) {
            let req = self.solicitation(egress, hop, src_mac)?;
            let n = req.len();
            out.push((egress, req, n));
            self.resolving.push(Resolving { hop, egress, src_mac, probes: 1, last_probe_ns: now });
            if let Some(sh) = &self.shared_neighbours {
                sh.awaiting(hop, true);
            }
        }
        self.pending.push((hop, egress, pkt, len));
        self.peak_pending = self.peak_pending.max(self.pending.len());
        Ok(Routed::Held)
    }

    /// The ARP request (IPv4) or neighbour solicitation (IPv6) for `hop`,
    /// sent from interface `egress` whose MAC is `src_mac`.
    fn solicitation(&self, egress: DeviceId, hop: IpAddr, src_mac: MacAddr) -> Result<Packet, &'static str> {
        Ok(match hop {
            IpAddr::V4(t) => {
                let me = self.iface_v4(egress).ok_or("no-address")?;
                let repr = ArpRepr::request(src_mac, me, t);
                let mut buf = [0u8; 28];
                repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..])).map_err(|_| "arp-emit")?;
                frame_with(MacAddr::BROADCAST, src_mac, 0x0806, &buf)
            }
            IpAddr::V6(t) => {
                let me = self.iface_v6(egress).ok_or("no-address")?;
                let o = t.octets();
                let sol =
                    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | u16::from(o[13]), u16::from_be_bytes([o[14], o[15]]));
                let repr = Icmpv6Repr::NeighborSolicit { target_addr: t, source_lladdr: Some(src_mac) };
                let mut buf = [0u8; 128];
                let n = repr.emit_ipv6_packet(me, sol, 255, &mut buf).map_err(|_| "ndp-emit")?;
                frame_with(MacAddr::from_ipv6_multicast(sol.octets()), src_mac, 0x86DD, &buf[..n])
            }
        })
    }

    /// Packets waiting for neighbour resolution.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn count_drops(&mut self, dev: DeviceId, reason: &'static str, n: u64) {
        if n != 0 {
            self.drops.push((dev, reason, n));
        }
    }

    /// Hands the drops counted since the last call to `f(device, reason,
    /// packets)`, to be added to the device's counters (the graph calls it
    /// after [`Router::input`] and [`Router::housekeeping`]).
    pub fn take_drops(&mut self, mut f: impl FnMut(DeviceId, &'static str, u64)) {
        for (dev, reason, n) in self.drops.drain(..) {
            f(dev, reason, n);
        }
    }

    /// Neighbours being resolved (each with packets in the neighbour queue).
    pub fn resolving(&self) -> usize {
        self.resolving.len()
    }

    /// Periodic work at `now` (ns, the clock of [`Router::input`]):
    /// reassembly queues past their lifetime are discarded; an unresolved
    /// neighbour is solicited again every [`SOLICIT_INTERVAL_NS`] (into
    /// `out`, as `(egress, frame, length)`), and after [`SOLICIT_PROBES`]
    /// unanswered solicitations it is given up: its waiting packets are
    /// dropped as `neighbour-unresolved` on the egress device (see
    /// [`Router::take_drops`]).
    pub fn housekeeping(&mut self, now: u64, out: &mut Vec<(DeviceId, Packet, usize)>) {
        if let Some(d) = &mut self.defrag {
            d.expire(now);
        }
        self.sync_neighbours(out);
        let mut i = 0;
        while i < self.resolving.len() {
            let r = self.resolving[i];
            if now.saturating_sub(r.last_probe_ns) < SOLICIT_INTERVAL_NS {
                i += 1;
                continue;
            }
            if r.probes < SOLICIT_PROBES {
                if let Ok(req) = self.solicitation(r.egress, r.hop, r.src_mac) {
                    let n = req.len();
                    out.push((r.egress, req, n));
                }
                let r = &mut self.resolving[i];
                r.probes += 1;
                r.last_probe_ns = now;
                i += 1;
                continue;
            }
            self.resolving.swap_remove(i);
            if let Some(sh) = &self.shared_neighbours {
                sh.awaiting(r.hop, false);
            }
            self.neighbours_failed += 1;
            let before = self.pending.len();
            self.pending.retain(|(hop, egress, _, _)| !(*hop == r.hop && *egress == r.egress));
            self.count_drops(r.egress, "neighbour-unresolved", (before - self.pending.len()) as u64);
        }
    }

    /// How full the router's bounded tables are (see [`super::tables`]):
    /// neighbours, the neighbour queue, the NAT connection table and, once
    /// fragments met NAT, the reassembly memory and queues.
    pub fn table_usage(&self, out: &mut Vec<TableUsage>) {
        out.push(
            TableUsage::new("neighbours", self.neighbours.len(), self.peak_neighbours, MAX_NEIGHBOURS)
                .event("refused", self.neighbours_refused)
                .shared(self.shared_neighbours.is_some()),
        );
        out.push(
            TableUsage::new("neighbour-queue", self.pending.len(), self.peak_pending, MAX_PENDING)
                .event("failed", self.neighbours_failed),
        );
        if !self.nat.rules.is_empty() {
            let c = &self.nat.counters;
            out.push(
                TableUsage::new("conntrack", self.nat.len(), self.nat.peak(), self.nat.max_conns)
                    .event("table_full", c.table_full)
                    .event("expired", c.expired)
                    .event("created", c.created)
                    .shared(self.nat.is_shared()),
            );
        }
        if let Some(d) = &self.defrag {
            d.usage(out);
        }
    }

    /// Learns `addr` → `mac` and releases the packets waiting for it, in
    /// the order they arrived.
    fn learn(&mut self, addr: IpAddr, mac: MacAddr, out: &mut Vec<(DeviceId, Packet, usize)>) {
        let awaited = self.pending.iter().any(|e| e.0 == addr);
        let learned = match &self.shared_neighbours {
            Some(sh) => sh.learn(addr, mac, awaited),
            None => self.neighbours.len() < MAX_NEIGHBOURS || self.neighbours.contains_key(&addr) || awaited,
        };
        if !learned {
            self.neighbours_refused += 1;
            return;
        }
        self.neighbours.insert(addr, mac);
        self.peak_neighbours = self.peak_neighbours.max(self.neighbours.len());
        self.release(addr, mac, out);
    }

    /// Brings this worker's copy of the shared neighbour table up to date
    /// (when another worker learned something since) and releases the
    /// packets waiting for a neighbour it now knows.
    fn sync_neighbours(&mut self, out: &mut Vec<(DeviceId, Packet, usize)>) {
        let Some(sh) = &self.shared_neighbours else { return };
        if sh.generation() == self.neighbours_generation {
            return;
        }
        self.neighbours_generation = sh.copy_into(&mut self.neighbours);
        self.peak_neighbours = self.peak_neighbours.max(self.neighbours.len());
        let mut i = 0;
        while i < self.resolving.len() {
            let hop = self.resolving[i].hop;
            match self.neighbours.get(&hop) {
                // Removes every resolving entry of `hop`, this one included.
                Some(&mac) => self.release(hop, mac, out),
                None => i += 1,
            }
        }
    }

    /// `addr` is at `mac`: its resolution ends and the packets waiting for
    /// it leave, in the order they arrived.
    fn release(&mut self, addr: IpAddr, mac: MacAddr, out: &mut Vec<(DeviceId, Packet, usize)>) {
        let shared = self.shared_neighbours.as_deref();
        self.resolving.retain(|r| {
            let done = r.hop == addr;
            if let (true, Some(sh)) = (done, shared) {
                sh.awaiting(addr, false);
            }
            !done
        });
        for (_, dev, mut p, len) in self.pending.extract_if(.., |e| e.0 == addr) {
            if let Ok(mut eth) = EthernetFrame::new_checked(p.linear_mut()) {
                eth.set_dst_addr(mac);
            }
            out.push((dev, p, len));
        }
    }

    fn arp_input(
        &mut self,
        iface: DeviceId,
        mac: MacAddr,
        pkt: &Packet,
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        let p =
            ArpPacket::new_checked(pkt.linear().get(ETHERNET_HEADER_LEN..).unwrap_or(&[])).map_err(|_| "bad-arp")?;
        let r = ArpRepr::parse(&p).map_err(|_| "bad-arp")?;
        self.learn(IpAddr::V4(r.source_protocol_addr), r.source_hardware_addr, out);
        if r.operation == ArpOperation::Request && self.iface_v4(iface) == Some(r.target_protocol_addr) {
            let f = arp_reply(&r, mac)?;
            let n = f.len();
            out.push((iface, f, n));
        }
        Ok(Routed::Consumed)
    }

    fn ndp_input(
        &mut self,
        iface: DeviceId,
        mac: MacAddr,
        pkt: &Packet,
        ip: &Ipv6Input,
        out: &mut Vec<(DeviceId, Packet, usize)>,
    ) -> Result<Routed, &'static str> {
        match ndp_message(pkt.linear(), ip)? {
            Ndp::Advert { target, lladdr: Some(l) } => {
                self.learn(IpAddr::V6(target), l, out);
                Ok(Routed::Consumed)
            }
            Ndp::Solicit { src, target, source_lladdr } => {
                if let Some(l) = source_lladdr {
                    self.learn(IpAddr::V6(src), l, out);
                }
                if !self.is_local(IpAddr::V6(target)) {
                    return Ok(Routed::Consumed);
                }
                let f = neighbour_advert(target, src, source_lladdr, mac, true)?;
                let n = f.len();
                out.push((iface, f, n));
                Ok(Routed::Consumed)
            }
            _ => Err("icmpv6-to-router"),
        }
    }
}

impl Router {
    /// Runs `op` with the scratch output vector, then queues what it sent
    /// and counts the drops it recorded on their devices.
    fn with_output<T>(
        &mut self,
        cx: &mut Cx<'_>,
        op: impl FnOnce(&mut Router, &[Device], &mut Vec<(DeviceId, Packet, usize)>) -> T,
    ) -> T {
        let mut out = std::mem::take(&mut self.out);
        let res = op(self, cx.devices(), &mut out);
        for (dev, p, n) in out.drain(..) {
            cx.transmit(dev, p, n);
        }
        self.out = out;
        self.take_drops(|dev, reason, n| cx.count_drops(dev, reason, n));
        res
    }

    /// The verdict of a routing operation whose packet was taken from
    /// `slot`: a packet forwarded as the operation's only output goes back
    /// into the slot as the step's one successor (no queue); anything else
    /// is queued by [`Router::with_output`].
    fn routed(
        &mut self,
        cx: &mut Cx<'_>,
        slot: &mut Packet,
        op: impl FnOnce(&mut Router, &[Device], &mut Vec<(DeviceId, Packet, usize)>) -> Result<Routed, &'static str>,
    ) -> Verdict {
        let mut next = None;
        let res = self.with_output(cx, |r, devs, out| {
            let res = op(r, devs, out);
            let one = out.len() == 1;
            if let (Ok(Routed::Forwarded), true) | (Ok(Routed::Local), _) = (res, one)
                && let Some((dev, p, n)) = out.pop()
            {
                *slot = p;
                next = Some((dev, n));
            }
            res
        });
        match (res, next) {
            (Err(reason), _) => cx.drop(reason),
            (Ok(Routed::Local), Some((dev, n))) => Verdict::Deliver(dev, n),
            (Ok(_), Some((dev, n))) => Verdict::Transmit(dev, n),
            (Ok(Routed::Forwarded), None) => Verdict::Forwarded,
            (Ok(Routed::Held), None) => Verdict::Held,
            (Ok(Routed::Consumed), None) => Verdict::Consumed,
            // A delivery always leaves its packet as the last output.
            (Ok(Routed::Local), None) => cx.drop("local-socket-lost"),
        }
    }
}

impl NetDevice for Router {
    fn kind(&self) -> &'static str {
        "router"
    }

    /// A locally generated packet ([`super::Graph::route_local`]).
    fn transmit(&mut self, cx: &mut Cx<'_>, pkt: &mut Packet, _len: usize) -> Verdict {
        let now = cx.now_ns();
        let taken = std::mem::take(pkt);
        self.routed(cx, pkt, |r, devs, out| r.output_local(taken, now, devs, out))
    }

    /// The protocol handler of interface `from`: ARP, neighbour discovery,
    /// forwarding with NAT. Refusals are counted on the router (as Linux
    /// counts IP input errors for the whole stack, not per device).
    fn receive(&mut self, cx: &mut Cx<'_>, from: DeviceId, pkt: &mut Packet, len: usize) -> Verdict {
        let now = cx.now_ns();
        let taken = std::mem::take(pkt);
        self.routed(cx, pkt, |r, devs, out| r.input(from, taken, len, now, devs, out))
    }

    fn housekeeping(&mut self, cx: &mut Cx<'_>) {
        let now = cx.now_ns();
        self.with_output(cx, |r, _, out| r.housekeeping(now, out));
    }

    fn table_usage(&self, out: &mut Vec<TableUsage>) {
        Router::table_usage(self, out);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
