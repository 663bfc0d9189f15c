//! IP input validation of the router (issue 22): the checks Linux makes on a
//! received IPv4/IPv6 packet before it may be forwarded or translated, so
//! that no packet Linux's IP input refuses leaves through superpacket's
//! router or NAT. Each rule mirrors one kernel check and has a stable drop
//! reason ([`IngressDrop::reason`]); the table is in `docs/topology.md`,
//! section "Drop reasons of the router".
//!
//! - IPv4, `ip_rcv_core` ([`ipv4_header`]): header present, version 4,
//!   IHL >= 5, the whole header present, header checksum (`ip_fast_csum`),
//!   total length within the packet and not below the header.
//! - IPv4, `ip_route_input_rcu` / `ip_route_input_slow` ([`ipv4_route_input`]):
//!   multicast destinations (no multicast routing), martian sources and
//!   destinations, limited broadcast (delivered locally, never forwarded).
//! - IPv6, `ipv6_rcv` (`ip6_rcv_core`) ([`ipv6_input`]): header present,
//!   version 6, loopback and multicast source, loopback, interface-local
//!   and scope-0 multicast destination, payload length within the packet
//!   (payload length 0 only for an RFC 2675 jumbogram), then the
//!   extension-header chain ([`MAX_EXT_HEADERS`]); `ip6_route_input`: a
//!   multicast destination is not forwarded (the router consumes only its
//!   ICMPv6, i.e. neighbour discovery).
//!
//! Headers are read only through the [`superpacket::wire`] views, from the
//! packet's linear area, where every port and GRO put them. The IP length
//! is checked against the whole packet (`pkt_len`: linear area, payload
//! segments and frag list), because the IP length of a superpacket covers
//! the whole aggregate (offload-rules 1.4, 2.4). A header that is not in
//! the linear area is treated as truncated: no packet source builds one.
//!
//! The IPv4 header checksum is always verified, as `ip_rcv_core` does:
//! no packet metadata says that the *header* checksum was verified
//! ([`superpacket::packet::ChecksumState::Unnecessary`], TAP's
//! `DATA_VALID`, counts L4 checksums only, offload-rules 0.3), and the sum
//! covers at most 60 bytes, also for a superpacket.
//!
//! Bytes beyond the IP length (Ethernet padding) are cut off by
//! [`trim_padding`] before the packet goes on (Linux's `pskb_trim_rcsum`).
//!
//! Nothing here allocates or panics, whatever the input.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use superpacket::csum;
use superpacket::packet::{ChecksumState, Packet};
use superpacket::wire::{IpProtocol, Ipv4Packet, Ipv6Option, Ipv6OptionsHeader, Ipv6Packet};

/// Most IPv6 extension headers a forwarded packet may carry; a longer chain
/// is dropped as `ipv6-extension-header`. Linux does not walk the chain of a
/// forwarded packet, but real traffic carries at most a few (hop-by-hop,
/// destination options, routing, fragment, AH, destination options:
/// RFC 8200 4.1), and a long chain is a known way to hide the upper-layer
/// header from filters (RFC 7112).
pub const MAX_EXT_HEADERS: usize = 8;

/// Fixed IPv4 header length (IHL 5).
const IPV4_MIN_HEADER: usize = 20;
/// Fixed IPv6 header length.
const IPV6_HEADER: usize = 40;
/// Largest payload length of a non-jumbo IPv6 packet (`IPV6_MAXPLEN`).
const IPV6_MAXPLEN: u32 = 65535;

/// Why IP input refused a packet. [`IngressDrop::reason`] is the stable
/// name counted in the device drops (`docs/topology.md`, "Drop reasons of
/// the router").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IngressDrop {
    /// `ipv4-version`: the version nibble of an IPv4 (EtherType 0x0800)
    /// packet is not 4 (`ip_rcv_core`: `iph->version != 4`).
    Ipv4Version,
    /// `ipv4-header-length`: IHL below 5 (`ip_rcv_core`: `iph->ihl < 5`).
    Ipv4HeaderLength,
    /// `ipv4-truncated`: fewer bytes than 20, than IHL * 4 or than the total
    /// length (`ip_rcv_core`: `pskb_may_pull`, `skb->len < len`).
    Ipv4Truncated,
    /// `ipv4-total-length`: total length below IHL * 4 (`ip_rcv_core`:
    /// `len < iph->ihl * 4`).
    Ipv4TotalLength,
    /// `ipv4-checksum`: the header checksum does not verify (`ip_rcv_core`:
    /// `ip_fast_csum`).
    Ipv4Checksum,
    /// `martian-source`: a source no host may use (IPv4 0/8, 127/8,
    /// 224/4, 255.255.255.255: `ip_route_input_slow`; IPv6 `::1` and
    /// multicast: `ipv6_rcv`).
    MartianSource,
    /// `martian-destination`: a destination that never crosses a link (IPv4
    /// 0/8, 127/8: `ip_route_input_slow`; IPv6 `::1`, interface-local and
    /// scope-0 multicast: `ipv6_rcv`).
    MartianDestination,
    /// `broadcast-destination`: limited broadcast 255.255.255.255 (or
    /// 0.0.0.0 to 0.0.0.0) and a subnet-directed broadcast of a router
    /// interface: Linux delivers it locally (`brd_input`), never forwards it.
    BroadcastDestination,
    /// `multicast-destination`: a multicast destination; without multicast
    /// routing Linux does not forward it (`ip_route_input_rcu`,
    /// `ip6_route_input` / `ip6_mc_input`).
    MulticastDestination,
    /// `ipv6-version`: the version nibble of an IPv6 (EtherType 0x86DD)
    /// packet is not 6 (`ipv6_rcv`: `hdr->version != 6`).
    Ipv6Version,
    /// `ipv6-truncated`: fewer than 40 bytes, a payload length beyond the
    /// packet, or payload length 0 without a valid jumbo payload option
    /// (`ipv6_rcv`: `pskb_may_pull`, `pkt_len + sizeof(struct ipv6hdr) >
    /// skb->len`; `ipv6_hop_jumbo`).
    Ipv6Truncated,
    /// `ipv6-extension-header`: an extension-header chain that is truncated,
    /// malformed (RFC 8200 4.1) or longer than [`MAX_EXT_HEADERS`]
    /// (`ipv6_parse_hopopts` for the hop-by-hop header; the bound is
    /// superpacket's).
    Ipv6ExtensionHeader,
    /// `ipv6-jumbogram`: a well-formed RFC 2675 jumbogram. Linux accepts
    /// it; superpacket never carries more than 65535 bytes of IP payload
    /// (offload-rules 1.1; GSO refuses jumbograms), so it could not leave.
    Ipv6Jumbogram,
}

impl IngressDrop {
    /// Every drop, in declaration order (for tests and documentation).
    pub const ALL: [IngressDrop; 13] = [
        IngressDrop::Ipv4Version,
        IngressDrop::Ipv4HeaderLength,
        IngressDrop::Ipv4Truncated,
        IngressDrop::Ipv4TotalLength,
        IngressDrop::Ipv4Checksum,
        IngressDrop::MartianSource,
        IngressDrop::MartianDestination,
        IngressDrop::BroadcastDestination,
        IngressDrop::MulticastDestination,
        IngressDrop::Ipv6Version,
        IngressDrop::Ipv6Truncated,
        IngressDrop::Ipv6ExtensionHeader,
        IngressDrop::Ipv6Jumbogram,
    ];

    /// The stable drop reason counted in the device drops.
    pub const fn reason(&self) -> &'static str {
        match self {
            IngressDrop::Ipv4Version => "ipv4-version",
            IngressDrop::Ipv4HeaderLength => "ipv4-header-length",
            IngressDrop::Ipv4Truncated => "ipv4-truncated",
            IngressDrop::Ipv4TotalLength => "ipv4-total-length",
            IngressDrop::Ipv4Checksum => "ipv4-checksum",
            IngressDrop::MartianSource => "martian-source",
            IngressDrop::MartianDestination => "martian-destination",
            IngressDrop::BroadcastDestination => "broadcast-destination",
            IngressDrop::MulticastDestination => "multicast-destination",
            IngressDrop::Ipv6Version => "ipv6-version",
            IngressDrop::Ipv6Truncated => "ipv6-truncated",
            IngressDrop::Ipv6ExtensionHeader => "ipv6-extension-header",
            IngressDrop::Ipv6Jumbogram => "ipv6-jumbogram",
        }
    }
}

impl fmt::Display for IngressDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for IngressDrop {}

impl From<IngressDrop> for &'static str {
    fn from(d: IngressDrop) -> &'static str {
        d.reason()
    }
}

/// A validated IPv4 header ([`ipv4_header`]). Offsets count from the first
/// byte of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Input {
    /// Offset of the IPv4 header.
    pub l3: usize,
    /// IHL * 4 (20..=60), the whole header in the linear area.
    pub header_len: usize,
    /// Total length (header + payload; for a superpacket the aggregate).
    pub total_len: usize,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Time to live.
    pub ttl: u8,
    /// Upper-layer protocol.
    pub protocol: IpProtocol,
    /// A fragment (MF set or offset non-zero).
    pub is_fragment: bool,
    /// Fragment offset 0 (an unfragmented packet or a first fragment): the
    /// upper-layer header follows the IPv4 header.
    pub first_fragment: bool,
    /// Bytes after the total length (Ethernet padding), to trim.
    pub padding: usize,
}

impl Ipv4Input {
    /// Offset of the upper-layer header.
    pub const fn l4(&self) -> usize {
        self.l3 + self.header_len
    }

    /// Offset just past the IP packet.
    pub const fn end(&self) -> usize {
        self.l3 + self.total_len
    }
}

/// A validated IPv6 header and extension-header chain ([`ipv6_input`]).
/// Offsets count from the first byte of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Input {
    /// Offset of the IPv6 header.
    pub l3: usize,
    /// 40 + payload length.
    pub total_len: usize,
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Hop limit.
    pub hop_limit: u8,
    /// Upper-layer protocol after the extension headers (for a non-first
    /// fragment: the Fragment header's next header).
    pub upper_protocol: IpProtocol,
    /// Offset of the upper-layer header (or of the fragment data).
    pub upper_offset: usize,
    /// Extension headers walked.
    pub ext_count: usize,
    /// A real fragment (not an atomic one).
    pub is_fragment: bool,
    /// Bytes after the payload length (Ethernet padding), to trim.
    pub padding: usize,
}

impl Ipv6Input {
    /// Offset just past the IP packet.
    pub const fn end(&self) -> usize {
        self.l3 + self.total_len
    }
}

/// The `ip_rcv_core` checks on the IPv4 header at `l3` of `frame` (the
/// packet's linear area) of a packet of `pkt_len` bytes in all (frag list
/// included), in the kernel's order.
///
/// # Errors
/// `ipv4-truncated`, `ipv4-version`, `ipv4-header-length`,
/// `ipv4-checksum`, `ipv4-total-length` (see [`IngressDrop`]).
pub fn ipv4_header(frame: &[u8], l3: usize, pkt_len: usize) -> Result<Ipv4Input, IngressDrop> {
    // pskb_may_pull(skb, sizeof(struct iphdr))
    let bytes = frame.get(l3..).filter(|b| b.len() >= IPV4_MIN_HEADER).ok_or(IngressDrop::Ipv4Truncated)?;
    let ip = Ipv4Packet::new_unchecked(bytes);
    // Linux tests `ihl < 5 || version != 4` together; the version first
    // gives the more telling reason for a frame that is not IPv4 at all.
    if ip.version() != 4 {
        return Err(IngressDrop::Ipv4Version);
    }
    if ip.ihl() < 5 {
        return Err(IngressDrop::Ipv4HeaderLength);
    }
    let header_len = ip.header_len();
    // pskb_may_pull(skb, iph->ihl * 4)
    if bytes.len() < header_len {
        return Err(IngressDrop::Ipv4Truncated);
    }
    if !ip.verify_checksum() {
        return Err(IngressDrop::Ipv4Checksum);
    }
    // No BIG TCP (`iph_totlen`'s total length 0 on a TCP GSO packet):
    // superpacket never builds an aggregate above 65535 bytes
    // (offload-rules 1.1), so 0 is below the header like any other.
    let total_len = usize::from(ip.total_len());
    let avail = pkt_len.saturating_sub(l3);
    if total_len > avail {
        return Err(IngressDrop::Ipv4Truncated);
    }
    if total_len < header_len {
        return Err(IngressDrop::Ipv4TotalLength);
    }
    Ok(Ipv4Input {
        l3,
        header_len,
        total_len,
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        ttl: ip.ttl(),
        protocol: ip.protocol(),
        is_fragment: ip.is_fragment(),
        first_fragment: ip.frag_offset() == 0,
        padding: avail - total_len,
    })
}

/// IPv4 0.0.0.0/8 ("this network", `ipv4_is_zeronet`).
fn is_zeronet(a: Ipv4Addr) -> bool {
    a.octets()[0] == 0
}

/// The address checks of `ip_route_input_rcu` / `ip_route_input_slow` on
/// a validated header, in the kernel's order. Class E (240/4) is not a
/// martian: Linux routes it as unicast. `route_localnet` is off (the
/// default), so loopback addresses are martians.
///
/// # Errors
/// `multicast-destination`, `martian-source`, `broadcast-destination`,
/// `martian-destination`.
pub fn ipv4_route_input(ip: &Ipv4Input) -> Result<(), IngressDrop> {
    let (s, d) = (ip.src, ip.dst);
    // ip_route_input_rcu: a multicast destination goes to ip_route_input_mc
    // (local delivery) or nowhere; it is never forwarded without mrouted.
    if d.is_multicast() {
        return Err(IngressDrop::MulticastDestination);
    }
    if s.is_multicast() || s.is_broadcast() {
        return Err(IngressDrop::MartianSource);
    }
    // brd_input: limited broadcast, and 0.0.0.0 -> 0.0.0.0 (BOOTP).
    if d.is_broadcast() || (s.is_unspecified() && d.is_unspecified()) {
        return Err(IngressDrop::BroadcastDestination);
    }
    if is_zeronet(s) {
        return Err(IngressDrop::MartianSource);
    }
    if is_zeronet(d) || d.is_loopback() {
        return Err(IngressDrop::MartianDestination);
    }
    if s.is_loopback() {
        return Err(IngressDrop::MartianSource);
    }
    Ok(())
}

/// [`ipv4_header`], then [`ipv4_route_input`]: everything Linux checks
/// before an IPv4 packet may be forwarded, except the subnet-directed
/// broadcast, which depends on the router's addresses.
///
/// # Errors
/// See the two functions.
pub fn ipv4_input(frame: &[u8], l3: usize, pkt_len: usize) -> Result<Ipv4Input, IngressDrop> {
    let ip = ipv4_header(frame, l3, pkt_len)?;
    ipv4_route_input(&ip)?;
    Ok(ip)
}

/// Multicast scope (`IPV6_ADDR_MC_SCOPE`): the low nibble of the second byte.
fn mc_scope(a: &Ipv6Addr) -> u8 {
    a.octets()[1] & 0x0f
}

/// The `ipv6_rcv` checks and the extension-header walk on the IPv6 header
/// at `l3` of `frame` (the linear area) of a packet of `pkt_len` bytes in
/// all, in the kernel's order; `addresses` adds the source and destination
/// checks (off for packets the router generates or only parses).
fn ipv6_parse(frame: &[u8], l3: usize, pkt_len: usize, addresses: bool) -> Result<Ipv6Input, IngressDrop> {
    // pskb_may_pull(skb, sizeof(*hdr))
    let bytes = frame.get(l3..).filter(|b| b.len() >= IPV6_HEADER).ok_or(IngressDrop::Ipv6Truncated)?;
    let ip = Ipv6Packet::new_unchecked(bytes);
    if ip.version() != 6 {
        return Err(IngressDrop::Ipv6Version);
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if addresses {
        // RFC 4291 2.5.3: loopback never on a link.
        if src.is_loopback() {
            return Err(IngressDrop::MartianSource);
        }
        if dst.is_loopback() {
            return Err(IngressDrop::MartianDestination);
        }
        // RFC 4291 errata 3480 (interface-local, scope 1) and 2.7
        // (reserved scope 0).
        if dst.is_multicast() && mc_scope(&dst) <= 1 {
            return Err(IngressDrop::MartianDestination);
        }
        // RFC 4291 2.7: multicast is never a source.
        if src.is_multicast() {
            return Err(IngressDrop::MartianSource);
        }
    }
    let avail = pkt_len.saturating_sub(l3);
    let payload_len = u32::from(ip.payload_len());
    let next = ip.next_header();
    if payload_len == 0 && next == IpProtocol::HOP_BY_HOP {
        // Linux skips the length check here and lets the jumbo payload
        // option (ipv6_hop_jumbo) give the length.
        return Err(jumbogram(bytes, avail));
    }
    // pkt_len + sizeof(struct ipv6hdr) > skb->len
    let total_len = IPV6_HEADER + payload_len as usize;
    if total_len > avail {
        return Err(IngressDrop::Ipv6Truncated);
    }
    let (upper_protocol, upper_offset, ext_count, is_fragment) = if next.is_ipv6_extension() {
        // The walk is bounded by the payload length, and by the linear
        // area (`new_unchecked` clamps to the buffer): a chain running past
        // either is truncated.
        let end = total_len.min(bytes.len());
        let view = Ipv6Packet::new_unchecked(bytes.get(..end).unwrap_or(bytes));
        let w = view.walk_ext_headers().map_err(|_| IngressDrop::Ipv6ExtensionHeader)?;
        if usize::from(w.ext_count) > MAX_EXT_HEADERS {
            return Err(IngressDrop::Ipv6ExtensionHeader);
        }
        (w.upper_protocol, w.upper_offset, usize::from(w.ext_count), w.is_fragment())
    } else {
        (next, IPV6_HEADER, 0, false)
    };
    Ok(Ipv6Input {
        l3,
        total_len,
        src,
        dst,
        hop_limit: ip.hop_limit(),
        upper_protocol,
        upper_offset: l3 + upper_offset,
        ext_count,
        is_fragment,
        padding: avail - total_len,
    })
}

/// The verdict on a packet with payload length 0 and a hop-by-hop header
/// (`bytes` from the IPv6 header on, `avail` bytes of IP packet): Linux's
/// `ipv6_hop_jumbo` refuses a missing or short jumbo length; a valid
/// jumbogram is refused as unsupported ([`IngressDrop::Ipv6Jumbogram`]).
fn jumbogram(bytes: &[u8], avail: usize) -> IngressDrop {
    let Ok(hbh) = Ipv6OptionsHeader::new_checked(bytes.get(IPV6_HEADER..).unwrap_or(&[])) else {
        return IngressDrop::Ipv6Truncated;
    };
    let mut jumbo = None;
    for opt in hbh.iter_options() {
        match opt {
            Ok(Ipv6Option::Jumbo(n)) => jumbo = Some(n),
            Ok(_) => {}
            Err(_) => return IngressDrop::Ipv6ExtensionHeader,
        }
    }
    match jumbo {
        // RFC 2675 3: payload length 0 needs the option, whose length
        // must exceed 65535 and fit in the packet.
        Some(n) if n > IPV6_MAXPLEN && (n as usize) <= avail.saturating_sub(IPV6_HEADER) => IngressDrop::Ipv6Jumbogram,
        _ => IngressDrop::Ipv6Truncated,
    }
}

/// The `ipv6_rcv` length and version checks and the extension-header walk
/// without the address checks: for frames the router only parses
/// (neighbour discovery on a TUN link) or sends itself.
///
/// # Errors
/// `ipv6-truncated`, `ipv6-version`, `ipv6-extension-header`, `ipv6-jumbogram`.
pub fn ipv6_header(frame: &[u8], l3: usize, pkt_len: usize) -> Result<Ipv6Input, IngressDrop> {
    ipv6_parse(frame, l3, pkt_len, false)
}

/// `ip6_route_input` for a router without multicast routing: a multicast
/// destination is not forwarded. Unfragmented ICMPv6 to a multicast group
/// is let through: the router consumes it itself (neighbour discovery).
///
/// # Errors
/// `multicast-destination`.
pub fn ipv6_route_input(ip: &Ipv6Input) -> Result<(), IngressDrop> {
    let own_icmpv6 = ip.upper_protocol == IpProtocol::ICMPV6 && !ip.is_fragment;
    if ip.dst.is_multicast() && !own_icmpv6 {
        return Err(IngressDrop::MulticastDestination);
    }
    Ok(())
}

/// Everything Linux checks before an IPv6 packet may be forwarded: the
/// `ipv6_rcv` checks in the kernel's order (truncated, version, martian
/// addresses, payload length, jumbogram), the extension-header chain, then
/// [`ipv6_route_input`].
///
/// # Errors
/// See [`IngressDrop`].
pub fn ipv6_input(frame: &[u8], l3: usize, pkt_len: usize) -> Result<Ipv6Input, IngressDrop> {
    let ip = ipv6_parse(frame, l3, pkt_len, true)?;
    ipv6_route_input(&ip)?;
    Ok(ip)
}

/// Cuts the packet (of `len` bytes in all, frag list included) to `end`
/// bytes, the end of its IP packet (`l3` is where the IP header starts):
/// Linux's `pskb_trim_rcsum`. Returns the new total length. A
/// `CHECKSUM_COMPLETE` sum loses the bytes cut off when they are all in
/// the linear area; otherwise it is dropped to [`ChecksumState::None`]
/// (the state of a packet whose sum is unknown, as older kernels did).
///
/// The bytes cut off are taken from the end: the last frag-list members
/// first (members are flat, as GRO builds them), then the packet's own
/// bytes. A frag-list member that is wholly beyond the IP length (a
/// self-contradictory superpacket) is unchained, which rebuilds the frag
/// list: the only allocation here, never on a well-formed packet.
pub fn trim_padding(pkt: &mut Packet, len: usize, l3: usize, end: usize) -> usize {
    if end >= len {
        return len;
    }
    let padding = len - end;
    let mut excess = padding;
    let in_linear = pkt.frag_list().is_empty() && pkt.segments().is_empty() && end <= pkt.headlen();
    if let ChecksumState::Complete { sum } = pkt.meta.csum {
        pkt.meta.csum = match pkt.linear().get(end..) {
            Some(pad) if in_linear && end >= l3 => {
                ChecksumState::Complete { sum: csum::ones_sub(sum, csum::ones_sum_at(pad, end - l3)) }
            }
            _ => ChecksumState::None,
        };
    }
    let mut emptied = false;
    for f in pkt.frag_list_mut().iter_mut().rev() {
        if excess == 0 {
            break;
        }
        let n = f.len();
        let cut = excess.min(n);
        // `n - cut <= n`: cannot fail.
        let _ = f.trim(n - cut);
        excess -= cut;
        emptied |= cut == n;
    }
    if emptied {
        let members = pkt.take_frag_list();
        for f in members.into_iter().filter(|f| !f.is_empty()) {
            pkt.push_frag(f);
        }
    }
    if excess > 0 {
        let n = pkt.len();
        let cut = excess.min(n);
        // `n - cut <= n`: cannot fail.
        let _ = pkt.trim(n - cut);
        excess -= cut;
    }
    len - (padding - excess)
}
