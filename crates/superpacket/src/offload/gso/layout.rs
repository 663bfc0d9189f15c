//! The header walk of the segmenter: offsets of L2/L3/L4 and the payload in
//! a copy of the first bytes of a packet.
//!
//! Unlike [`crate::wire::FrameHeaders::parse`] it does not need the whole
//! packet to be contiguous (a GRO aggregate's payload lives in segments and
//! on the frag list): the IP length fields are read, not checked against the
//! buffer; the caller checks them against the packet's real length.

use super::GsoError;
use crate::wire::ethernet::{EtherType, parse_tags};
use crate::wire::{Ipv6Packet, WireError};

/// Transport protocol of a walked packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum L4 {
    Tcp,
    Udp,
    Other,
}

/// Where the walk starts: an Ethernet header (VLAN tags allowed) or the IP
/// header (a raw IP packet, or a frag-list packet whose MAC header was pulled).
pub(crate) use crate::wire::Medium;

/// Offsets and key fields of a packet's headers (all from the first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// VLAN tags in the data.
    pub vlan_count: usize,
    /// L3 header offset (L2 length).
    pub l3_offset: usize,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// L3 header length incl. IPv4 options / IPv6 extension headers.
    pub l3_header_len: usize,
    /// L3 length from the IP header (IPv4 total length, IPv6 40 + payload length).
    pub l3_len: usize,
    /// IPv6 extension header bytes (0 for IPv4).
    pub ext_len: usize,
    /// Upper-layer protocol number.
    pub proto: u8,
    /// Transport protocol.
    pub l4: L4,
    /// L4 header offset.
    pub l4_offset: usize,
    /// Payload offset (end of the header block).
    pub hdr_len: usize,
    /// The packet is an IP fragment (or IPv6 with a Fragment header).
    pub is_fragment: bool,
    /// IPv4 DF.
    pub dont_frag: bool,
}

impl Layout {
    /// End of the IP packet.
    pub(crate) fn l3_end(&self) -> usize {
        self.l3_offset + self.l3_len
    }

    /// The medium the headers were parsed as: only a raw IP packet has its
    /// IP header at offset 0 (an Ethernet header is 14 bytes or more).
    pub(crate) fn medium(&self) -> Medium {
        if self.l3_offset == 0 { Medium::Ip } else { Medium::Ethernet }
    }
}

fn bad(e: WireError) -> GsoError {
    GsoError::BadHeaders(e)
}

fn need(layer: &'static str, needed: usize, have: usize) -> Result<(), GsoError> {
    if have < needed {
        if needed > super::MAX_HEADER_LEN {
            return Err(GsoError::HeaderTooLong { len: needed, max: super::MAX_HEADER_LEN });
        }
        return Err(bad(WireError::truncated(layer, needed, have)));
    }
    Ok(())
}

/// Walks the headers at the start of `hdr` (which may end anywhere after
/// them). Non-IP frames and IP with an unparsed upper layer are errors only
/// where the bytes are self-contradictory; the caller decides what it needs.
pub(crate) fn parse(hdr: &[u8], medium: Medium) -> Result<Layout, GsoError> {
    let (vlan_count, ethertype, l3) = match medium {
        Medium::Ethernet => {
            need("ethernet", 14, hdr.len())?;
            let (vlans, et, off) = parse_tags(hdr, 12).map_err(bad)?;
            (vlans.len(), et, off)
        }
        Medium::Ip => {
            need("ip", 1, hdr.len())?;
            (0, Medium::ip_ethertype(hdr).map_err(bad)?, 0)
        }
    };
    let mut lay = Layout {
        vlan_count,
        l3_offset: l3,
        v6: false,
        l3_header_len: 0,
        l3_len: 0,
        ext_len: 0,
        proto: 0,
        l4: L4::Other,
        l4_offset: l3,
        hdr_len: l3,
        is_fragment: false,
        dont_frag: false,
    };
    match ethertype {
        EtherType::IPV4 => {
            need("ipv4", l3 + 20, hdr.len())?;
            let ip = &hdr[l3..];
            if ip[0] >> 4 != 4 {
                return Err(bad(WireError::malformed("ipv4", "version is not 4")));
            }
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            if ihl < 20 {
                return Err(bad(WireError::malformed("ipv4", "IHL < 5")));
            }
            need("ipv4", l3 + ihl, hdr.len())?;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if total < ihl {
                return Err(bad(WireError::malformed("ipv4", "total length shorter than header")));
            }
            let frag = u16::from_be_bytes([ip[6], ip[7]]);
            lay.is_fragment = frag & 0x3fff != 0;
            lay.dont_frag = frag & 0x4000 != 0;
            lay.l3_header_len = ihl;
            lay.l3_len = total;
            lay.proto = ip[9];
        }
        EtherType::IPV6 => {
            need("ipv6", l3 + 40, hdr.len())?;
            let ip = &hdr[l3..];
            if ip[0] >> 4 != 6 {
                return Err(bad(WireError::malformed("ipv6", "version is not 6")));
            }
            let pl = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            if pl == 0 {
                return Err(bad(WireError::unsupported("ipv6", "jumbogram (payload length 0)")));
            }
            lay.v6 = true;
            lay.l3_len = 40 + pl;
            let view = Ipv6Packet::new_unchecked(ip);
            let ext = view.walk_ext_headers().map_err(|e| match e {
                WireError::Truncated { needed, .. } if l3 + needed > super::MAX_HEADER_LEN => {
                    GsoError::HeaderTooLong { len: l3 + needed, max: super::MAX_HEADER_LEN }
                }
                e => bad(e),
            })?;
            lay.is_fragment = ext.fragment.is_some();
            lay.l3_header_len = ext.upper_offset;
            lay.ext_len = ext.ext_len();
            lay.proto = ext.upper_protocol.0;
        }
        _ => {
            lay.hdr_len = l3;
            return Ok(lay);
        }
    }
    if lay.l3_header_len > lay.l3_len {
        return Err(bad(WireError::malformed("ip", "headers longer than the IP length")));
    }
    lay.l4_offset = l3 + lay.l3_header_len;
    lay.hdr_len = lay.l4_offset;
    if lay.is_fragment {
        return Ok(lay);
    }
    match lay.proto {
        6 => {
            need("tcp", lay.l4_offset + 20, hdr.len())?;
            let doff = ((hdr[lay.l4_offset + 12] >> 4) as usize) * 4;
            if doff < 20 {
                return Err(bad(WireError::malformed("tcp", "data offset < 5")));
            }
            need("tcp", lay.l4_offset + doff, hdr.len())?;
            lay.l4 = L4::Tcp;
            lay.hdr_len = lay.l4_offset + doff;
        }
        17 => {
            need("udp", lay.l4_offset + 8, hdr.len())?;
            lay.l4 = L4::Udp;
            lay.hdr_len = lay.l4_offset + 8;
        }
        _ => {}
    }
    if lay.hdr_len > lay.l3_end() {
        return Err(bad(WireError::malformed("ip", "L4 header beyond the IP length")));
    }
    Ok(lay)
}
