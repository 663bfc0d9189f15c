//! Synthetic UDP tunnel traffic: an inner [`Flow`] carried in VXLAN or
//! Geneve over UDP over IPv4 or IPv6, every checksum valid (the outer UDP
//! checksum zero when [`TunnelFlow::udp_csum`] is off, as Linux's VXLAN sends
//! by default over IPv4).
//!
//! The outer IPv4 ID increments by one per frame (as a tunnel endpoint's
//! GSO leaves it); the outer source port is the outer spec's.

use super::{Addrs, Flow, FlowSpec, Transport};
use crate::csum;
use crate::packet::TunnelKind;
use crate::wire::Result;
use crate::wire::geneve::{GENEVE_PORT, GENEVE_PROTO_ETHERNET};
use crate::wire::tcp::TcpFlags;
use crate::wire::vxlan::{VXLAN_FLAG_I, VXLAN_PORT};
use std::net::{Ipv4Addr, Ipv6Addr};

/// An inner flow in a UDP tunnel.
#[derive(Debug, Clone)]
pub struct TunnelFlow {
    /// The outer headers: MACs, addresses, ports, TTL/hop limit, TOS/traffic
    /// class, DF (transport UDP; VLAN tags are not written).
    pub outer: FlowSpec,
    /// VXLAN or Geneve.
    pub kind: TunnelKind,
    /// The VNI (24 bits).
    pub vni: u32,
    /// Fill in the outer UDP checksum (else zero).
    pub udp_csum: bool,
    /// Geneve option bytes (a multiple of 4, at most 252; ignored for VXLAN).
    pub geneve_options: Vec<u8>,
    /// Next outer IPv4 identification.
    pub ip_id: u16,
    /// The carried flow.
    pub inner: Flow,
}

impl TunnelFlow {
    /// Flow `index` of `inner`'s shape in a tunnel of `kind` over IPv4 or
    /// IPv6 (`outer_v6`) to the tunnel's IANA port, VNI 42, outer UDP
    /// checksum on. Outer addresses 10.95.0.1 -> 10.95.0.2 or
    /// fd00:5f::1 -> fd00:5f::2, outer source port `20000 + index`.
    pub fn new(kind: TunnelKind, outer_v6: bool, inner: FlowSpec, index: u32) -> TunnelFlow {
        let mut outer = FlowSpec::new(Transport::Udp, outer_v6, index);
        outer.addrs = if outer_v6 {
            Addrs::V6 {
                src: Ipv6Addr::new(0xfd00, 0x5f, 0, 0, 0, 0, 0, 1),
                dst: Ipv6Addr::new(0xfd00, 0x5f, 0, 0, 0, 0, 0, 2),
            }
        } else {
            Addrs::V4 { src: Ipv4Addr::new(10, 95, 0, 1), dst: Ipv4Addr::new(10, 95, 0, 2) }
        };
        outer.src_port = 20000 + (index % 40000) as u16;
        outer.dst_port = match kind {
            TunnelKind::Vxlan => VXLAN_PORT,
            TunnelKind::Geneve => GENEVE_PORT,
        };
        outer.dont_frag = false;
        let ip_id = 0x4000u16.wrapping_add(index as u16 * 97);
        TunnelFlow { outer, kind, vni: 42, udp_csum: true, geneve_options: Vec::new(), ip_id, inner: Flow::new(inner) }
    }

    /// Bytes of outer headers: Ethernet, IP, UDP and the tunnel header.
    pub fn outer_len(&self) -> usize {
        let ip = if matches!(self.outer.addrs, Addrs::V6 { .. }) { 40 } else { 20 };
        14 + ip + 8 + self.tunnel_header_len()
    }

    fn tunnel_header_len(&self) -> usize {
        match self.kind {
            TunnelKind::Vxlan => 8,
            TunnelKind::Geneve => 8 + self.geneve_options.len(),
        }
    }

    /// One tunnel frame carrying the inner flow's next frame of
    /// `payload_len` bytes and `flags` (see [`Flow::frame`]).
    ///
    /// # Errors
    /// If the inner or outer packet does not fit in one IP packet.
    pub fn frame(&mut self, payload_len: usize, flags: TcpFlags) -> Result<Vec<u8>> {
        let inner = self.inner.frame(payload_len, flags)?;
        self.wrap(&inner)
    }

    /// Encapsulates `inner` (an Ethernet frame) with the next outer headers.
    ///
    /// # Errors
    /// If the result does not fit in one IP packet.
    pub fn wrap(&mut self, inner: &[u8]) -> Result<Vec<u8>> {
        let s = &self.outer;
        let v6 = matches!(s.addrs, Addrs::V6 { .. });
        let l3 = 14;
        let l4 = l3 + if v6 { 40 } else { 20 };
        let tnl = l4 + 8;
        let udp_len = 8 + self.tunnel_header_len() + inner.len();
        let too_big = || crate::wire::WireError::Malformed { layer: "gen", reason: "tunnel packet over 64 KB" };
        let udp_len16 = u16::try_from(udp_len).map_err(|_| too_big())?;
        let mut f = vec![0u8; tnl + self.tunnel_header_len()];
        f[0..6].copy_from_slice(&s.dst_mac.0);
        f[6..12].copy_from_slice(&s.src_mac.0);
        f[12..14].copy_from_slice(&(if v6 { 0x86DDu16 } else { 0x0800 }).to_be_bytes());
        match s.addrs {
            Addrs::V4 { src, dst } => {
                let total = u16::try_from(20 + udp_len).map_err(|_| too_big())?;
                let ip = &mut f[l3..l4];
                ip[0] = 0x45;
                ip[1] = s.tos;
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[4..6].copy_from_slice(&self.ip_id.to_be_bytes());
                ip[6] = if s.dont_frag { 0x40 } else { 0 };
                ip[8] = s.ttl;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                let c = csum::checksum(ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            Addrs::V6 { src, dst } => {
                let ip = &mut f[l3..l4];
                let word = 6u32 << 28 | (s.tos as u32) << 20;
                ip[0..4].copy_from_slice(&word.to_be_bytes());
                ip[4..6].copy_from_slice(&udp_len16.to_be_bytes());
                ip[6] = 17;
                ip[7] = s.ttl;
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
            }
        }
        f[l4..l4 + 2].copy_from_slice(&s.src_port.to_be_bytes());
        f[l4 + 2..l4 + 4].copy_from_slice(&s.dst_port.to_be_bytes());
        f[l4 + 4..l4 + 6].copy_from_slice(&udp_len16.to_be_bytes());
        match self.kind {
            TunnelKind::Vxlan => {
                f[tnl] = VXLAN_FLAG_I;
                f[tnl + 4..tnl + 7].copy_from_slice(&self.vni.to_be_bytes()[1..]);
            }
            TunnelKind::Geneve => {
                f[tnl] = (self.geneve_options.len() / 4) as u8 & 0x3f;
                f[tnl + 2..tnl + 4].copy_from_slice(&GENEVE_PROTO_ETHERNET.to_be_bytes());
                f[tnl + 4..tnl + 7].copy_from_slice(&self.vni.to_be_bytes()[1..]);
                f[tnl + 8..].copy_from_slice(&self.geneve_options);
            }
        }
        f.extend_from_slice(inner);
        if self.udp_csum {
            let pseudo = match s.addrs {
                Addrs::V4 { src, dst } => csum::pseudo_header_v4(src.octets(), dst.octets(), 17, udp_len16),
                Addrs::V6 { src, dst } => csum::pseudo_header_v6(src.octets(), dst.octets(), 17, udp_len as u32),
            };
            let mut c = !csum::ones_add(pseudo, csum::ones_sum(&f[l4..]));
            if c == 0 {
                c = 0xFFFF;
            }
            f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
        }
        self.ip_id = self.ip_id.wrapping_add(1);
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Medium;

    #[test]
    fn tunnel_frames_verify() {
        for kind in [TunnelKind::Vxlan, TunnelKind::Geneve] {
            for outer_v6 in [false, true] {
                for (t, inner_v6) in [(Transport::Tcp, false), (Transport::Udp, true)] {
                    let mut f = TunnelFlow::new(kind, outer_v6, FlowSpec::new(t, inner_v6, 1), 1);
                    if kind == TunnelKind::Geneve {
                        f.geneve_options = vec![1, 2, 3, 4];
                    }
                    let frame = f.frame(500, TcpFlags::empty()).unwrap();
                    let h = Medium::Ethernet.parse(&frame).unwrap();
                    assert_eq!(h.l4_offset + 8 + f.tunnel_header_len(), f.outer_len());
                    let pseudo = crate::validate::l4_pseudo_header_sum(&frame, &h).unwrap();
                    let sum = csum::ones_add(pseudo, csum::ones_sum(&frame[h.l4_offset..h.l3_end()]));
                    assert_eq!(sum, 0xFFFF, "{kind:?} v6={outer_v6}");
                    let inner = &frame[f.outer_len()..];
                    let ih = Medium::Ethernet.parse(inner).unwrap();
                    assert_eq!(ih.payload_len, 500);
                }
            }
        }
    }
}
