//! ICMP errors the reassembler and the fragmenter offer to the caller, built
//! with the wire module's `Icmpv4Repr` / `Icmpv6Repr` (quoting rules there).

use super::Family;
use crate::wire::icmpv4::TIME_EXCEEDED_REASSEMBLY as V4_REASM;
use crate::wire::icmpv6::TIME_EXCEEDED_REASSEMBLY as V6_REASM;
use crate::wire::{Icmpv4Repr, Icmpv6Repr, WireError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Largest quote kept: what an IPv6 error can carry (1280 - 48); IPv4 quotes less.
const MAX_QUOTE: usize = 1232;

/// The ICMP message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcmpKind {
    /// IPv4 type 3 code 4: fragmentation needed and DF set, with the next-hop MTU.
    FragNeeded {
        /// Next-hop MTU.
        mtu: u16,
    },
    /// IPv4 type 11 code 1 / IPv6 type 3 code 1: reassembly time exceeded.
    ReassemblyTimeExceeded,
    /// IPv6 type 2: packet too big.
    PacketTooBig {
        /// MTU of the next hop.
        mtu: u32,
    },
    /// IPv6 type 4: parameter problem.
    ParamProblem {
        /// 0 erroneous header field, 3 incomplete header chain.
        code: u8,
        /// Offset of the offending octet from the IPv6 header.
        pointer: u32,
    },
}

/// An ICMP error for the sender of an offending packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcmpError {
    /// Family of the offending packet (and of the error).
    pub family: Family,
    /// The message.
    pub kind: IcmpKind,
    /// The start of the offending IP packet (from its IP header), as much as
    /// an error may quote.
    pub offending: Vec<u8>,
}

impl IcmpError {
    /// Keeps the quotable start of `l3` (an IP packet from its header).
    pub fn new(family: Family, kind: IcmpKind, l3: &[u8]) -> IcmpError {
        IcmpError { family, kind, offending: l3[..l3.len().min(MAX_QUOTE)].to_vec() }
    }

    /// Source address of the offending packet: where the error goes.
    pub fn destination(&self) -> Option<IpAddr> {
        let b = &self.offending;
        match self.family {
            Family::V4 if b.len() >= 20 => Some(IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))),
            Family::V6 if b.len() >= 40 => {
                let a: [u8; 16] = b[8..24].try_into().ok()?;
                Some(IpAddr::V6(Ipv6Addr::from(a)))
            }
            _ => None,
        }
    }

    /// Destination address of the offending packet (the default source of the error).
    fn offending_dst(&self) -> Option<IpAddr> {
        let b = &self.offending;
        match self.family {
            Family::V4 if b.len() >= 20 => Some(IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19]))),
            Family::V6 if b.len() >= 40 => {
                let a: [u8; 16] = b[24..40].try_into().ok()?;
                Some(IpAddr::V6(Ipv6Addr::from(a)))
            }
            _ => None,
        }
    }

    /// The complete IP packet carrying the error, from `src` (default: the
    /// offending packet's destination, i.e. this host) to the offending
    /// packet's source, TTL/hop limit 64.
    ///
    /// # Errors
    /// If the quote is too short to name the sender, or `src` is of the other family.
    pub fn to_ip_packet(&self, src: Option<IpAddr>) -> Result<Vec<u8>, WireError> {
        let bad = || WireError::malformed("icmp", "offending packet too short or address family mismatch");
        let dst = self.destination().ok_or_else(bad)?;
        let src = src.or_else(|| self.offending_dst()).ok_or_else(bad)?;
        let mut buf = vec![0u8; 1280];
        let n = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let repr = match self.kind {
                    IcmpKind::FragNeeded { mtu } => Icmpv4Repr::frag_needed(mtu, &self.offending),
                    IcmpKind::ReassemblyTimeExceeded => Icmpv4Repr::time_exceeded(V4_REASM, &self.offending),
                    _ => return Err(WireError::malformed("icmp", "IPv6-only message for an IPv4 packet")),
                };
                repr.emit_ipv4_packet(s, d, 64, &mut buf)?
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let repr = match self.kind {
                    IcmpKind::PacketTooBig { mtu } => Icmpv6Repr::packet_too_big(mtu, &self.offending),
                    IcmpKind::ReassemblyTimeExceeded => Icmpv6Repr::time_exceeded(V6_REASM, &self.offending),
                    IcmpKind::ParamProblem { code, pointer } => {
                        Icmpv6Repr::param_problem(code, pointer, &self.offending)
                    }
                    IcmpKind::FragNeeded { .. } => {
                        return Err(WireError::malformed("icmp", "IPv4-only message for an IPv6 packet"));
                    }
                };
                repr.emit_ipv6_packet(s, d, 64, &mut buf)?
            }
            _ => return Err(bad()),
        };
        buf.truncate(n);
        Ok(buf)
    }
}

/// True when an ICMP error may be sent about a packet to `dst` (never about
/// multicast or broadcast destinations, RFC 1122 3.2.2 / RFC 4443 2.4(e)).
pub(crate) fn may_send_error(family: Family, l3: &[u8]) -> bool {
    match family {
        Family::V4 => {
            if l3.len() < 20 {
                return false;
            }
            let dst = Ipv4Addr::new(l3[16], l3[17], l3[18], l3[19]);
            // Never about an ICMP error message (RFC 1122 3.2.2).
            let ihl = usize::from(l3[0] & 0x0f) * 4;
            let icmp_error = l3[9] == 1 && l3.get(ihl).is_some_and(|t| matches!(t, 3 | 4 | 5 | 11 | 12));
            !(dst.is_multicast() || dst.is_broadcast() || icmp_error)
        }
        Family::V6 => l3.len() >= 40 && l3[24] != 0xff,
    }
}
