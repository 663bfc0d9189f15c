//! IPv4 NAT: SNAT / masquerade and DNAT with port mapping, a bounded
//! connection table with timeouts, and the packet rewrite.
//!
//! The rewrite is done **once per superpacket**, on its first headers, with
//! RFC 1624 incremental updates (offload-rules 0.3): the IPv4 header checksum
//! always; the TCP/UDP checksum field as a *checksum* (addresses and ports)
//! when it holds a full checksum, and as a *sum* over the addresses only
//! ([`superpacket::csum::update_partial_bytes`]) when the packet is
//! `CHECKSUM_PARTIAL` (the field holds the pseudo-header sum, which does not
//! cover ports). GSO metadata is untouched: NAT never resegments. A fraglist
//! aggregate's head is rewritten; the segmenter carries the head's
//! addresses and ports into the chained packets if it has to split it.

use super::conntrack::{ConnTable, Found, Refused, Scratch};
use std::net::Ipv4Addr;
use std::sync::Arc;
use superpacket::csum::{update_bytes, update_partial_bytes};
use superpacket::packet::{ChecksumState, Packet};
use superpacket::wire::ipv4::IPV4_HEADER_LEN;
use superpacket::wire::tcp::TCP_HEADER_LEN;
use superpacket::wire::udp::UDP_HEADER_LEN;
use superpacket::wire::{IpProtocol, Ipv4Packet, TcpPacket, UdpPacket};

/// A connection tuple: protocol, source, source port, destination, destination port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tuple {
    /// IP protocol (6 TCP, 17 UDP).
    pub proto: u8,
    /// Source address.
    pub src: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Destination port.
    pub dport: u16,
}

impl Tuple {
    /// The tuple of the other direction.
    pub fn reversed(&self) -> Tuple {
        Tuple { proto: self.proto, src: self.dst, sport: self.dport, dst: self.src, dport: self.sport }
    }
}

/// Connection timeouts (ns), as Linux's nf_conntrack defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NatTimeouts {
    /// UDP before a reply (30 s).
    pub udp_unreplied: u64,
    /// UDP after a reply (120 s).
    pub udp_replied: u64,
    /// TCP before a reply (120 s).
    pub tcp_unreplied: u64,
    /// TCP established (5 days).
    pub tcp_established: u64,
    /// TCP after FIN or RST (10 s).
    pub tcp_closing: u64,
}

impl Default for NatTimeouts {
    fn default() -> Self {
        const S: u64 = 1_000_000_000;
        NatTimeouts {
            udp_unreplied: 30 * S,
            udp_replied: 120 * S,
            tcp_unreplied: 120 * S,
            tcp_established: 432_000 * S,
            tcp_closing: 10 * S,
        }
    }
}

/// A NAT rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatRule {
    /// Source NAT to the egress interface's first address (postrouting).
    Masquerade {
        /// Egress interface (device index).
        out_dev: usize,
    },
    /// Source NAT to a fixed address (postrouting).
    Snat {
        /// Egress interface.
        out_dev: usize,
        /// New source.
        to: Ipv4Addr,
    },
    /// Destination NAT with port mapping (prerouting).
    Dnat {
        /// Ingress interface, or any.
        in_dev: Option<usize>,
        /// Protocol (6 or 17).
        proto: u8,
        /// Destination port to match.
        port: u16,
        /// New destination address.
        to: Ipv4Addr,
        /// New destination port.
        to_port: u16,
    },
}

/// Counters of the connection table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NatCounters {
    /// Connections created.
    pub created: u64,
    /// Connections expired.
    pub expired: u64,
    /// New connections refused because the table was full.
    pub table_full: u64,
    /// Packets translated.
    pub translated: u64,
}

/// The NAT engine: rules plus the bounded connection table
/// ([`ConnTable`], which the workers of one engine share: see
/// [`Nat::share_table`]).
#[derive(Debug)]
pub struct Nat {
    /// Rules (DNAT and SNAT/masquerade; order matters within a kind).
    pub rules: Vec<NatRule>,
    /// Most connections (`[conntrack] max_connections`, default 65536 as
    /// [`Nat::default`]); a new connection beyond it reclaims expired ones
    /// or is refused (`table_full`, drop `conntrack-full`). Workers sharing
    /// a table are built from one topology, so they hold the same limit.
    pub max_conns: usize,
    /// Timeouts.
    pub timeouts: NatTimeouts,
    /// Counters of what this worker did (the engine sums the workers').
    pub counters: NatCounters,
    table: Arc<ConnTable>,
    /// Whether other workers use `table` too.
    shared: bool,
    scratch: Scratch,
}

impl Default for Nat {
    fn default() -> Self {
        Nat::new(65536)
    }
}

/// The addresses and ports a packet must get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rewrite {
    /// New tuple (as the packet will leave).
    pub to: Tuple,
}

impl Nat {
    /// A NAT with no rules and room for `max_conns` connections.
    pub fn new(max_conns: usize) -> Nat {
        Nat {
            rules: Vec::new(),
            max_conns,
            timeouts: NatTimeouts::default(),
            counters: NatCounters::default(),
            table: Arc::new(ConnTable::new(max_conns)),
            shared: false,
            scratch: Scratch::default(),
        }
    }

    /// Makes this NAT use `other`'s connection table (the engine does it
    /// for every worker but the first: a connection created by one worker
    /// is translated the same way by all, and a translated source port is
    /// unique across them).
    pub fn share_table(&mut self, other: &mut Nat) {
        self.table = other.table.clone();
        self.shared = true;
        other.shared = true;
    }

    /// Whether other workers share this NAT's connection table.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Live connections.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Most connections alive at once so far.
    pub fn peak(&self) -> usize {
        self.table.peak()
    }

    /// No connection.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Removes expired connections; returns how many.
    pub fn expire(&mut self, now: u64) -> usize {
        let n = self.table.expire(now, &mut self.scratch);
        self.counters.expired += n as u64;
        n
    }

    /// Looks `t` up in the table (prerouting). Returns the rewrite for a
    /// known connection, refreshing its timeout; `tcp_fin_rst` marks it closing.
    pub fn lookup(&mut self, t: &Tuple, now: u64, tcp_fin_rst: bool) -> Option<Rewrite> {
        match self.table.lookup(t, now, tcp_fin_rst, &self.timeouts) {
            Found::Live(to) => {
                self.counters.translated += 1;
                Some(Rewrite { to })
            }
            Found::Expired => {
                self.counters.expired += 1;
                None
            }
            Found::None => None,
        }
    }

    /// Whether `t` belongs to a known connection (no refresh).
    pub fn lookup_only(&self, t: &Tuple) -> Option<()> {
        self.table.contains(t).then_some(())
    }

    /// DNAT for a new connection arriving on `in_dev`: the new destination.
    pub fn dnat(&self, t: &Tuple, in_dev: usize) -> Option<(Ipv4Addr, u16)> {
        self.rules.iter().find_map(|r| match *r {
            NatRule::Dnat { in_dev: d, proto, port, to, to_port }
                if proto == t.proto && port == t.dport && d.is_none_or(|d| d == in_dev) =>
            {
                Some((to, to_port))
            }
            _ => None,
        })
    }

    /// SNAT/masquerade source for a new connection leaving on `out_dev`
    /// whose interface address is `iface_addr`.
    pub fn snat(&self, out_dev: usize, iface_addr: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        self.rules.iter().find_map(|r| match *r {
            NatRule::Masquerade { out_dev: d } if d == out_dev => iface_addr,
            NatRule::Snat { out_dev: d, to } if d == out_dev => Some(to),
            _ => None,
        })
    }

    /// Creates a connection from `orig` translated to `to` (source port
    /// remapped if the reply tuple is taken). Returns the final translated
    /// tuple, or `None` if the table is full or no port is free (both
    /// counted as `table_full`) or a tuple is another connection's.
    pub fn create(&mut self, orig: Tuple, to: Tuple, now: u64) -> Option<Tuple> {
        let res = self.table.create(orig, to, now, self.max_conns, &self.timeouts, &mut self.scratch);
        self.counters.expired += self.scratch.take_reclaimed();
        match res {
            Ok(to) => {
                self.counters.created += 1;
                self.counters.translated += 1;
                Some(to)
            }
            Err(Refused::Full | Refused::NoPort) => {
                self.counters.table_full += 1;
                None
            }
            Err(Refused::Exists) => None,
        }
    }
}

/// The drop reason of a TCP/UDP packet whose L4 header conntrack would
/// call invalid: it is never translated (`docs/topology.md`, "Drop reasons
/// of the router").
pub const NAT_INVALID_L4: &str = "nat-invalid-l4";

/// The connection of a TCP/UDP packet ([`tuple_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L4Conn {
    /// Its tuple as received.
    pub tuple: Tuple,
    /// Offset of the TCP/UDP header from the start of the frame.
    pub l4: usize,
    /// TCP with FIN or RST set (the connection is closing).
    pub fin_rst: bool,
}

/// The TCP/UDP connection of the IPv4 packet `ip` (validated by
/// [`super::ingress::ipv4_header`]) in `frame`, the packet's linear area;
/// `gso` for a superpacket. `Ok(None)` for other protocols and for
/// fragments (no ports to read: with NAT rules they are reassembled first).
///
/// The L4 header is checked as conntrack's `tcp_error` / `udp_error` do,
/// against the IP payload length (the aggregate's, for a superpacket):
/// TCP: 20 bytes present, data offset >= 5, the header within the payload;
/// UDP: 8 bytes present and, for a non-GSO packet, a length field of 8 up
/// to the IP payload (a superpacket's UDP length is its aggregate's or its
/// segment's, depending on the source). The fixed header (the ports and
/// the checksum field NAT rewrites) must be in the linear area.
///
/// # Errors
/// [`NAT_INVALID_L4`] for a TCP/UDP packet whose header fails these checks.
pub fn tuple_of(frame: &[u8], ip: &super::ingress::Ipv4Input, gso: bool) -> Result<Option<L4Conn>, &'static str> {
    let proto = ip.protocol;
    if ip.is_fragment || !matches!(proto, IpProtocol::TCP | IpProtocol::UDP) {
        return Ok(None);
    }
    let l4 = ip.l4();
    let l4_len = ip.total_len - ip.header_len;
    let seg = frame.get(l4..).ok_or(NAT_INVALID_L4)?;
    let (sport, dport, fin_rst) = if proto == IpProtocol::TCP {
        if l4_len < TCP_HEADER_LEN || seg.len() < TCP_HEADER_LEN {
            return Err(NAT_INVALID_L4);
        }
        let t = TcpPacket::new_unchecked(seg);
        if t.data_offset() < 5 || t.header_len() > l4_len {
            return Err(NAT_INVALID_L4);
        }
        (t.src_port(), t.dst_port(), t.fin() || t.rst())
    } else {
        if l4_len < UDP_HEADER_LEN || seg.len() < UDP_HEADER_LEN {
            return Err(NAT_INVALID_L4);
        }
        let u = UdpPacket::new_unchecked(seg);
        let ulen = usize::from(u.len());
        if !gso && !(UDP_HEADER_LEN..=l4_len).contains(&ulen) {
            return Err(NAT_INVALID_L4);
        }
        (u.src_port(), u.dst_port(), false)
    };
    let tuple = Tuple { proto: proto.0, src: ip.src, sport, dst: ip.dst, dport };
    Ok(Some(L4Conn { tuple, l4, fin_rst }))
}

/// Rewrites an IPv4 TCP/UDP packet (header at `l3`, L4 at `l4`, as
/// [`tuple_of`] found them) from `from` to `to` with incremental checksum
/// updates (see the module documentation), through the wire views.
///
/// # Errors
/// [`NAT_INVALID_L4`] if the headers are not in the linear area (nothing
/// is changed then; [`tuple_of`] rules it out).
pub fn rewrite(pkt: &mut Packet, l3: usize, l4: usize, from: &Tuple, to: &Tuple) -> Result<(), &'static str> {
    let l4_fixed = if from.proto == IpProtocol::TCP.0 { TCP_HEADER_LEN } else { UDP_HEADER_LEN };
    let b = pkt.linear_mut();
    if l4 < l3 + IPV4_HEADER_LEN || b.len() < l4 + l4_fixed {
        return Err(NAT_INVALID_L4);
    }
    let partial = matches!(pkt.meta.csum, ChecksumState::Partial { .. });
    if let ChecksumState::Complete { .. } = pkt.meta.csum {
        pkt.meta.csum = ChecksumState::None;
    }
    let b = pkt.linear_mut();
    let (head, seg) = b.split_at_mut(l4);
    let mut ip = Ipv4Packet::new_unchecked(&mut head[l3..]);
    let (os, od, ns, nd) = (from.src.octets(), from.dst.octets(), to.src.octets(), to.dst.octets());
    let mut ipc = ip.checksum();
    ipc = update_bytes(ipc, &os, &ns);
    ipc = update_bytes(ipc, &od, &nd);
    ip.set_checksum(ipc);
    ip.set_src_addr(to.src);
    ip.set_dst_addr(to.dst);
    // The L4 checksum: a checksum (addresses and ports) or, for
    // CHECKSUM_PARTIAL, the pseudo-header sum (addresses only).
    let l4_csum = |c: u16, udp: bool| {
        if partial {
            let c = update_partial_bytes(c, &os, &ns);
            update_partial_bytes(c, &od, &nd)
        } else if udp && c == 0 {
            // UDP over IPv4 without a checksum stays without one.
            0
        } else {
            let mut c = update_bytes(c, &os, &ns);
            c = update_bytes(c, &od, &nd);
            c = update_bytes(c, &from.sport.to_be_bytes(), &to.sport.to_be_bytes());
            c = update_bytes(c, &from.dport.to_be_bytes(), &to.dport.to_be_bytes());
            if udp && c == 0 { 0xFFFF } else { c }
        }
    };
    if from.proto == IpProtocol::TCP.0 {
        let mut t = TcpPacket::new_unchecked(seg);
        t.set_checksum(l4_csum(t.checksum(), false));
        t.set_src_port(to.sport);
        t.set_dst_port(to.dport);
    } else {
        let mut u = UdpPacket::new_unchecked(seg);
        u.set_checksum(l4_csum(u.checksum(), true));
        u.set_src_port(to.sport);
        u.set_dst_port(to.dport);
    }
    Ok(())
}
