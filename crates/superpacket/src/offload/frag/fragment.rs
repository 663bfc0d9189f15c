//! Fragmentation on output (RFC 791 / RFC 8200 section 4.5; Linux
//! `ip_do_fragment`, `ip6_fragment`, offload-rules 5.2/5.3 "frag_max_size").
//!
//! [`Fragmenter::fragment`] takes an Ethernet frame and the egress MTU (the
//! largest IP packet the link carries) and returns the packet untouched if it
//! fits, or its fragments:
//! - **IPv4**: every fragment carries the datagram's L2 header and IP header
//!   (same ID, DF kept, MF on all but the last, offsets in units of 8); later
//!   fragments keep the header length but options whose *copied* flag is
//!   clear become NOPs (Linux `ip_options_fragment`). DF set and not
//!   allowed to fragment → [`FragmentError::FragmentationNeeded`] with the
//!   ICMP "fragmentation needed" (type 3 code 4, next-hop MTU) for the sender.
//! - **IPv6**: the unfragmentable part (IPv6 header, hop-by-hop, routing, and
//!   destination options before a routing header) is repeated, a Fragment
//!   header follows with the datagram's identification (a reassembled
//!   datagram's own, or a per-destination counter), then the data. A router
//!   never fragments: forwarding a packet larger than the MTU gives
//!   [`FragmentError::PacketTooBig`] with the ICMPv6 message. MTUs below
//!   1280 are raised to 1280.
//! - **Geometry** ([`FragmentRequest::max_frag_size`], from
//!   [`super::DatagramInfo`]): a reassembled datagram being forwarded is
//!   always re-fragmented to at most its largest original fragment, so it
//!   leaves as it came; if that size exceeds the MTU it is refused (IPv4 only
//!   when DF is set, as Linux).
//!
//! Checksums: a `CHECKSUM_PARTIAL` packet is completed first (fragments
//! cannot be checksummed later); IPv4 header checksums are computed per
//! fragment. GSO packets must be segmented first.

use super::icmp::{IcmpError, IcmpKind, may_send_error};
use super::{Family, flatten};
use crate::csum;
use crate::packet::{ChecksumState, OffloadMeta, Packet};
use crate::wire::{EtherType, Ipv4Packet, VlanStack, WireError};

/// IPv6 minimum MTU.
const IPV6_MIN_MTU: usize = 1280;
/// IPv4 minimum MTU (RFC 791).
const IPV4_MIN_MTU: usize = 68;

/// What to fragment for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentRequest {
    /// Largest IP packet (header included) the egress link carries.
    pub mtu: usize,
    /// The packet is being forwarded (a router: IPv6 is never fragmented, only refused).
    pub forwarding: bool,
    /// Largest fragment the datagram arrived in, for a reassembled datagram
    /// (Linux `frag_max_size`): output fragments are never larger, and the
    /// datagram is fragmented even if it fits the MTU.
    pub max_frag_size: Option<u16>,
    /// IPv6 identification to use (a reassembled datagram's own); `None`
    /// draws one from the per-destination generator.
    pub ident: Option<u32>,
}

impl FragmentRequest {
    /// A locally originated packet on a link of `mtu`.
    pub const fn local(mtu: usize) -> Self {
        FragmentRequest { mtu, forwarding: false, max_frag_size: None, ident: None }
    }

    /// A forwarded packet on a link of `mtu`.
    pub const fn forward(mtu: usize) -> Self {
        FragmentRequest { mtu, forwarding: true, max_frag_size: None, ident: None }
    }

    /// Forwarding a reassembled datagram: restore its geometry.
    pub fn forward_reassembled(mtu: usize, info: &super::DatagramInfo) -> Self {
        FragmentRequest {
            mtu,
            forwarding: true,
            max_frag_size: Some(info.max_frag_size),
            ident: (info.family == Family::V6).then_some(info.ident),
        }
    }
}

/// Why a packet was not fragmented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FragmentError {
    /// IPv4 with DF larger than the MTU: send `icmp` (fragmentation needed) to the sender.
    FragmentationNeeded {
        /// Packet length.
        len: usize,
        /// The MTU.
        mtu: usize,
        /// The ICMP error for the sender (absent for multicast/broadcast or ICMP errors).
        icmp: Option<IcmpError>,
    },
    /// IPv6 larger than the MTU where fragmenting is not allowed: send `icmp` (packet too big).
    PacketTooBig {
        /// Packet length.
        len: usize,
        /// The MTU.
        mtu: usize,
        /// The ICMPv6 error for the sender.
        icmp: Option<IcmpError>,
    },
    /// The MTU cannot carry a header and 8 bytes of data.
    MtuTooSmall(usize),
    /// A GSO superpacket: segment it first.
    Gso,
    /// Too big and not IP, or IP headers that do not parse.
    Malformed(WireError),
}

impl std::fmt::Display for FragmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FragmentError::FragmentationNeeded { len, mtu, .. } => {
                write!(f, "IPv4 packet of {len} bytes with DF exceeds the MTU {mtu}")
            }
            FragmentError::PacketTooBig { len, mtu, .. } => {
                write!(f, "IPv6 packet of {len} bytes exceeds the MTU {mtu} and may not be fragmented here")
            }
            FragmentError::MtuTooSmall(mtu) => write!(f, "MTU {mtu} too small to fragment this packet"),
            FragmentError::Gso => f.write_str("GSO packet: segment before fragmenting"),
            FragmentError::Malformed(err) => write!(f, "cannot fragment: {err}"),
        }
    }
}

impl std::error::Error for FragmentError {}

/// Fragmenter counters (Linux `FragOKs`, `FragCreates`, `FragFails`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FragmenterCounters {
    /// Packets fragmented.
    pub fragmented: u64,
    /// Fragments created.
    pub fragments: u64,
    /// Packets refused (any [`FragmentError`]).
    pub failed: u64,
    /// IPv4 refusals because of DF.
    pub frag_needed: u64,
    /// IPv6 refusals (packet too big).
    pub packet_too_big: u64,
    /// Packets that fitted and went out unchanged.
    pub passed: u64,
}

/// Per-destination IPv6 fragment identifications (Linux `ipv6_select_ident`):
/// a keyed hash of the addresses picks a counter among 2048 and an offset,
/// so consecutive datagrams to one destination get consecutive IDs and
/// different destinations unrelated ones.
#[derive(Debug, Clone)]
pub struct Ipv6IdGenerator {
    seed: u64,
    counters: Vec<u32>,
}

impl Ipv6IdGenerator {
    /// A generator with a fixed seed (deterministic IDs, for tests).
    pub fn with_seed(seed: u64) -> Self {
        Ipv6IdGenerator { seed, counters: vec![0; 2048] }
    }

    /// A generator with a random seed.
    pub fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        Self::with_seed(std::collections::hash_map::RandomState::new().build_hasher().finish())
    }

    /// The next identification for `src` -> `dst` (never 0).
    pub fn next_id(&mut self, src: &[u8; 16], dst: &[u8; 16]) -> u32 {
        let mut h = self.seed ^ 0x9e37_79b9_7f4a_7c15;
        for c in src.chunks_exact(8).chain(dst.chunks_exact(8)) {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        let b = (h % self.counters.len() as u64) as usize;
        self.counters[b] = self.counters[b].wrapping_add(1);
        let id = ((h >> 32) as u32).wrapping_add(self.counters[b]);
        if id == 0 { 1 << 31 } else { id }
    }
}

impl Default for Ipv6IdGenerator {
    fn default() -> Self {
        Self::new()
    }
}

/// The fragmenter: IPv6 identification state and counters.
#[derive(Debug, Clone, Default)]
pub struct Fragmenter {
    ids: Ipv6IdGenerator,
    counters: FragmenterCounters,
}

impl Fragmenter {
    /// A fragmenter with a random IPv6 ID seed.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fragmenter with the given IPv6 ID generator.
    pub fn with_ids(ids: Ipv6IdGenerator) -> Self {
        Fragmenter { ids, counters: FragmenterCounters::default() }
    }

    /// Counters.
    pub fn counters(&self) -> &FragmenterCounters {
        &self.counters
    }

    /// Appends `packet` (if it fits) or its fragments to `out`; returns how
    /// many packets were appended.
    ///
    /// # Errors
    /// [`FragmentError`]; the refusals carry the ICMP error for the sender.
    pub fn fragment(
        &mut self,
        packet: Packet,
        req: &FragmentRequest,
        out: &mut Vec<Packet>,
    ) -> Result<usize, FragmentError> {
        let r = self.fragment_inner(packet, req, out);
        match &r {
            Ok(0) => {}
            Ok(1) => self.counters.passed += 1,
            Ok(n) => {
                self.counters.fragmented += 1;
                self.counters.fragments += *n as u64;
            }
            Err(e) => {
                self.counters.failed += 1;
                match e {
                    FragmentError::FragmentationNeeded { .. } => self.counters.frag_needed += 1,
                    FragmentError::PacketTooBig { .. } => self.counters.packet_too_big += 1,
                    _ => {}
                }
            }
        }
        r
    }

    fn fragment_inner(
        &mut self,
        packet: Packet,
        req: &FragmentRequest,
        out: &mut Vec<Packet>,
    ) -> Result<usize, FragmentError> {
        if packet.meta.is_gso() {
            return Err(FragmentError::Gso);
        }
        let mut owned;
        let frame: &[u8] = if packet.segments().is_empty() && packet.frag_list().is_empty() {
            packet.linear()
        } else {
            owned = Vec::new();
            flatten(&packet, &mut owned);
            &owned
        };
        if frame.len() < 14 {
            return Err(FragmentError::Malformed(WireError::truncated("ethernet", 14, frame.len())));
        }
        let (_, ethertype, used) = VlanStack::parse(&frame[12..]).map_err(FragmentError::Malformed)?;
        let l3 = 12 + used;
        let l3_len = frame.len() - l3;
        let fits = |n: usize| n <= req.mtu && req.max_frag_size.is_none_or(|m| n <= m as usize);
        match ethertype {
            EtherType::IPV4 | EtherType::IPV6 => {}
            _ if l3_len <= req.mtu => {
                out.push(packet);
                return Ok(1);
            }
            other => return Err(FragmentError::Malformed(WireError::unsupported("fragment", ethertype_name(other)))),
        }
        let ip_len = if ethertype == EtherType::IPV4 {
            Ipv4Packet::new_checked(&frame[l3..]).map_err(FragmentError::Malformed)?.total_len() as usize
        } else {
            if l3_len < 40 {
                return Err(FragmentError::Malformed(WireError::truncated("ipv6", 40, l3_len)));
            }
            40 + u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]) as usize
        };
        if ip_len > l3_len {
            return Err(FragmentError::Malformed(WireError::truncated("ip", ip_len, l3_len)));
        }
        if fits(ip_len) {
            out.push(packet);
            return Ok(1);
        }
        // Complete a pending checksum: fragments can no longer be checksummed.
        let mut buf = frame[..l3 + ip_len].to_vec();
        if let ChecksumState::Partial { start, offset } = packet.meta.csum {
            let udp = offset == 6;
            csum::complete_partial(&mut buf, start as usize, offset as usize, udp);
        }
        let meta =
            OffloadMeta { rss_hash: packet.meta.rss_hash, arrival_ns: packet.meta.arrival_ns, ..Default::default() };
        if ethertype == EtherType::IPV4 {
            self.fragment_v4(&buf, l3, req, meta, out)
        } else {
            self.fragment_v6(&buf, l3, req, meta, out)
        }
    }

    fn fragment_v4(
        &mut self,
        frame: &[u8],
        l3: usize,
        req: &FragmentRequest,
        meta: OffloadMeta,
        out: &mut Vec<Packet>,
    ) -> Result<usize, FragmentError> {
        let ip = Ipv4Packet::new_unchecked(&frame[l3..]);
        let hl = ip.header_len();
        let len = frame.len() - l3;
        let df = ip.dont_frag();
        let geometry_too_big = req.max_frag_size.is_some_and(|m| m as usize > req.mtu);
        if df && (req.max_frag_size.is_none() || geometry_too_big) {
            let icmp = may_send_error(Family::V4, &frame[l3..]).then(|| {
                IcmpError::new(Family::V4, IcmpKind::FragNeeded { mtu: req.mtu.min(65535) as u16 }, &frame[l3..])
            });
            return Err(FragmentError::FragmentationNeeded { len, mtu: req.mtu, icmp });
        }
        let mtu = req.max_frag_size.map_or(req.mtu, |m| req.mtu.min(m as usize));
        if mtu < IPV4_MIN_MTU.min(hl + 8) || mtu < hl + 8 {
            return Err(FragmentError::MtuTooSmall(mtu));
        }
        let per = (mtu - hl) & !7;
        let base = ip.frag_offset() as usize;
        let orig_mf = ip.more_frags();
        let data = &frame[l3 + hl..];
        let mut later_header = frame[..l3 + hl].to_vec();
        options_fragment(&mut later_header[l3 + 20..]);
        let mut n = 0;
        let mut off = 0;
        while off < data.len() {
            let chunk = per.min(data.len() - off);
            let last = off + chunk == data.len();
            let hdr: &[u8] = if off == 0 { &frame[..l3 + hl] } else { &later_header };
            let mut f = Vec::with_capacity(crate::packet::DEFAULT_HEADROOM + hdr.len() + chunk);
            f.resize(crate::packet::DEFAULT_HEADROOM, 0);
            f.extend_from_slice(hdr);
            f.extend_from_slice(&data[off..off + chunk]);
            let head = crate::packet::DEFAULT_HEADROOM;
            {
                let mut p = Ipv4Packet::new_unchecked(&mut f[head + l3..]);
                p.set_total_len((hl + chunk) as u16);
                p.set_frag_offset((base + off) as u16);
                p.set_more_frags(!last || orig_mf);
                p.set_dont_frag(df);
                p.fill_checksum();
            }
            let tail = f.len();
            let mut pkt = Packet::from_storage(f, head, tail).expect("in bounds");
            pkt.meta = meta;
            out.push(pkt);
            n += 1;
            off += chunk;
        }
        Ok(n)
    }

    fn fragment_v6(
        &mut self,
        frame: &[u8],
        l3: usize,
        req: &FragmentRequest,
        meta: OffloadMeta,
        out: &mut Vec<Packet>,
    ) -> Result<usize, FragmentError> {
        let p = &frame[l3..];
        let len = p.len();
        let too_big = |mtu: usize| {
            let icmp = may_send_error(Family::V6, p)
                .then(|| IcmpError::new(Family::V6, IcmpKind::PacketTooBig { mtu: mtu as u32 }, p));
            FragmentError::PacketTooBig { len, mtu, icmp }
        };
        if (req.forwarding && req.max_frag_size.is_none()) || req.max_frag_size.is_some_and(|m| m as usize > req.mtu) {
            return Err(too_big(req.mtu));
        }
        let (unfrag, nh_off, nh) = match v6_unfragmentable(p) {
            Ok(Some(u)) => u,
            Ok(None) => return Err(too_big(req.mtu)), // already a fragment: never re-fragmented
            Err(e) => return Err(FragmentError::Malformed(e)),
        };
        let mut mtu = req.max_frag_size.map_or(req.mtu, |m| req.mtu.min(m as usize));
        if mtu < IPV6_MIN_MTU {
            mtu = IPV6_MIN_MTU;
        }
        if mtu < unfrag + 8 + 8 {
            return Err(FragmentError::MtuTooSmall(mtu));
        }
        let per = (mtu - unfrag - 8) & !7;
        let ident = match req.ident {
            Some(id) => id,
            None => {
                let src: [u8; 16] = p[8..24].try_into().expect("16 bytes");
                let dst: [u8; 16] = p[24..40].try_into().expect("16 bytes");
                self.ids.next_id(&src, &dst)
            }
        };
        let data = &p[unfrag..];
        let mut n = 0;
        let mut doff = 0;
        while doff < data.len() {
            let chunk = per.min(data.len() - doff);
            let last = doff + chunk == data.len();
            let head = crate::packet::DEFAULT_HEADROOM;
            let mut f = Vec::with_capacity(head + l3 + unfrag + 8 + chunk);
            f.resize(head, 0);
            f.extend_from_slice(&frame[..l3 + unfrag]);
            let fo = (doff as u16) | u16::from(!last);
            f.extend_from_slice(&[nh, 0]);
            f.extend_from_slice(&fo.to_be_bytes());
            f.extend_from_slice(&ident.to_be_bytes());
            f.extend_from_slice(&data[doff..doff + chunk]);
            let ip = head + l3;
            f[ip + nh_off] = 44;
            let pl = (unfrag - 40 + 8 + chunk) as u16;
            f[ip + 4..ip + 6].copy_from_slice(&pl.to_be_bytes());
            let tail = f.len();
            let mut pkt = Packet::from_storage(f, head, tail).expect("in bounds");
            pkt.meta = meta;
            out.push(pkt);
            n += 1;
            doff += chunk;
        }
        Ok(n)
    }
}

fn ethertype_name(_: EtherType) -> &'static str {
    "not IPv4/IPv6 and larger than the MTU"
}

/// The unfragmentable part of an IPv6 packet `p` (Linux `ip6_find_1stfragopt`:
/// IPv6 header, hop-by-hop, routing, destination options before a routing
/// header): `(length, offset of the next-header byte to patch, next header
/// after it)`; `None` if the packet already has a Fragment header.
fn v6_unfragmentable(p: &[u8]) -> Result<Option<(usize, usize, u8)>, WireError> {
    let (mut nh, mut nh_off, mut off, mut found_rh) = (p[6], 6usize, 40usize, false);
    loop {
        let include = match nh {
            0 => true,
            43 => {
                found_rh = true;
                true
            }
            60 => !found_rh,
            44 => return Ok(None),
            _ => false,
        };
        if !include {
            return Ok(Some((off, nh_off, nh)));
        }
        let Some(&l) = p.get(off + 1) else { return Err(WireError::truncated("ipv6-ext", off + 2, p.len())) };
        let hl = (l as usize + 1) * 8;
        if off + hl > p.len() {
            return Err(WireError::truncated("ipv6-ext", off + hl, p.len()));
        }
        nh_off = off;
        nh = p[off];
        off += hl;
    }
}

/// Builds one fragment of the datagram `frame` (Ethernet; an unfragmented
/// IPv4 packet, or IPv6 without a Fragment header): the bytes
/// `offset..offset + len` of its fragmentable part, MF = `more`, IPv6
/// identification `ident` (IPv4 keeps the header's ID). Anything goes: odd
/// lengths, overlaps, zero length, offsets past the data (zero-filled) — for
/// tests, fuzzing and the kernel oracle. `offset` is rounded down to 8.
///
/// # Errors
/// If the datagram's headers do not parse or the fragment would exceed 65535 bytes.
pub fn build_fragment(frame: &[u8], offset: usize, len: usize, more: bool, ident: u32) -> Result<Vec<u8>, WireError> {
    let offset = offset & !7;
    let (_, et, used) = VlanStack::parse(frame.get(12..).unwrap_or(&[]))?;
    let l3 = 12 + used;
    let data_at = |start: usize, total: usize| {
        let mut d = vec![0u8; len];
        let avail = frame.get(start + offset..total).unwrap_or(&[]);
        let n = avail.len().min(len);
        d[..n].copy_from_slice(&avail[..n]);
        d
    };
    match et {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked(&frame[l3..])?;
            let hl = ip.header_len();
            let total = l3 + ip.total_len() as usize;
            let tl = u16::try_from(hl + len).map_err(|_| WireError::malformed("ipv4", "fragment over 65535"))?;
            let mut f = frame[..l3 + hl].to_vec();
            f.extend_from_slice(&data_at(l3 + hl, total));
            let mut p = Ipv4Packet::new_unchecked(&mut f[l3..]);
            p.set_total_len(tl);
            p.set_frag_offset(offset as u16);
            p.set_more_frags(more);
            p.fill_checksum();
            Ok(f)
        }
        EtherType::IPV6 => {
            let p = &frame[l3..];
            if p.len() < 40 {
                return Err(WireError::truncated("ipv6", 40, p.len()));
            }
            let total = l3 + 40 + u16::from_be_bytes([p[4], p[5]]) as usize;
            let (unfrag, nh_off, nh) =
                v6_unfragmentable(p)?.ok_or(WireError::malformed("ipv6", "already has a fragment header"))?;
            let pl = u16::try_from(unfrag - 40 + 8 + len).map_err(|_| WireError::malformed("ipv6", "over 65535"))?;
            let mut f = frame[..l3 + unfrag].to_vec();
            let fo = (offset as u16) | u16::from(more);
            f.extend_from_slice(&[nh, 0]);
            f.extend_from_slice(&fo.to_be_bytes());
            f.extend_from_slice(&ident.to_be_bytes());
            f.extend_from_slice(&data_at(l3 + unfrag, total));
            f[l3 + nh_off] = 44;
            f[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
            Ok(f)
        }
        _ => Err(WireError::unsupported("fragment", "not IP")),
    }
}

/// RFC 791 / Linux `ip_options_fragment`: in fragments after the first,
/// options whose copied flag (0x80) is clear become NOPs; the header keeps
/// its length.
fn options_fragment(opts: &mut [u8]) {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return,
            1 => i += 1,
            t => {
                let Some(&l) = opts.get(i + 1) else { return };
                let l = l as usize;
                if l < 2 || i + l > opts.len() {
                    return;
                }
                if t & 0x80 == 0 {
                    opts[i..i + l].fill(1);
                }
                i += l;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_copied_flag() {
        // Record route (7, not copied), then security (130, copied), then EOL.
        let mut o = [7, 7, 4, 0, 0, 0, 0, 130, 4, 1, 2, 0];
        options_fragment(&mut o);
        assert_eq!(o, [1, 1, 1, 1, 1, 1, 1, 130, 4, 1, 2, 0]);
        let mut bad = [68, 1, 0, 0];
        options_fragment(&mut bad); // length < 2: left alone
        assert_eq!(bad, [68, 1, 0, 0]);
    }

    #[test]
    fn ids_differ_per_destination_and_never_zero() {
        let mut g = Ipv6IdGenerator::with_seed(7);
        let (a, b) = ([1u8; 16], [2u8; 16]);
        let x = g.next_id(&a, &b);
        let y = g.next_id(&a, &b);
        assert_eq!(y, x.wrapping_add(1).max(1));
        assert_ne!(g.next_id(&a, &[3u8; 16]), y.wrapping_add(1));
    }
}
