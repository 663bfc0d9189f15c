//! The GRO view of a frame's headers: a small `Copy` summary built in one
//! pass, with a fast path for the shapes GRO merges (Ethernet with up to two
//! VLAN tags, or a raw IP packet; then IPv4 without options and not
//! fragmented, or IPv6 straight to TCP/UDP) and [`Medium::parse`] for
//! everything else (IPv4 options, fragments, IPv6 extension headers,
//! malformed frames), so that the rules see exactly what the crate-wide
//! parser sees. A raw IP packet has its IP header at offset 0 and no tags;
//! every other offset means the same on both media.

use crate::wire::field::be16;
use crate::wire::{EtherType, L3Kind, L4Kind, Medium};

/// Offsets and kinds GRO needs (all offsets from the start of the frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroHeaders {
    /// VLAN tags in front of the IP header.
    pub tags: usize,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// TCP (else UDP).
    pub tcp: bool,
    /// Offset of the IP header.
    pub l3: usize,
    /// IP header length including IPv6 extension headers.
    pub l3_header_len: usize,
    /// IP packet length (IPv4 total length, IPv6 40 + payload length).
    pub l3_len: usize,
    /// Offset of the TCP/UDP header.
    pub l4: usize,
    /// Offset of the payload.
    pub payload: usize,
    /// Payload length (UDP: from the UDP length field).
    pub payload_len: usize,
    /// An IPv4 fragment.
    pub is_fragment: bool,
    /// IPv6 with a Fragment header (atomic fragments included).
    pub has_fragment_header: bool,
    /// Bytes after the IP packet.
    pub l2_padding: usize,
}

/// Why a frame is not a GRO candidate at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCandidate {
    /// Does not parse.
    Malformed,
    /// Not IPv4/IPv6.
    NotIp,
    /// IP, but neither TCP nor UDP (or a non-first fragment).
    NotTcpUdp,
    /// More than two VLAN tags (the count is reported by the caller's check).
    TooManyTags,
}

#[inline]
fn is_tpid(t: u16) -> bool {
    matches!(t, 0x8100 | 0x88A8 | 0x9100)
}

impl GroHeaders {
    /// Parses a packet of `medium` (fast path, then the full parser).
    #[inline]
    pub fn parse(frame: &[u8], medium: Medium) -> Result<GroHeaders, NotCandidate> {
        Self::parse_on::<false>(frame, medium)
    }

    /// [`GroHeaders::parse`], compiled once for the plain path and once for
    /// the tunnel path (`TUNNEL`) so that each copy has one caller and the
    /// plain one is inlined as before tunnels existed (see [`super::Encap`]).
    #[inline]
    pub fn parse_on<const TUNNEL: bool>(frame: &[u8], medium: Medium) -> Result<GroHeaders, NotCandidate> {
        let fast = match medium {
            Medium::Ethernet => Self::fast_ethernet::<TUNNEL>(frame),
            Medium::Ip => Self::fast_ip::<TUNNEL>(frame),
        };
        match fast {
            Some(h) => Ok(h),
            None => Self::slow(frame, medium),
        }
    }

    /// Ethernet with at most two tags; `None` means "ask the full parser".
    #[inline]
    fn fast_ethernet<const TUNNEL: bool>(frame: &[u8]) -> Option<GroHeaders> {
        let len = frame.len();
        if len < 14 + 20 {
            return None;
        }
        let mut l3 = 14;
        let mut et = be16(frame, 12);
        let mut tags = 0;
        while is_tpid(et) {
            if tags == 2 || len < l3 + 4 + 20 {
                return None;
            }
            et = be16(frame, l3 + 2);
            l3 += 4;
            tags += 1;
        }
        Self::fast_l3(frame, l3, et, tags)
    }

    /// A raw IP packet; `None` means "ask the full parser".
    #[inline]
    fn fast_ip<const TUNNEL: bool>(frame: &[u8]) -> Option<GroHeaders> {
        if frame.len() < 20 {
            return None;
        }
        let EtherType(et) = Medium::ip_ethertype(frame).ok()?;
        Self::fast_l3(frame, 0, et, 0)
    }

    /// The IP and TCP/UDP headers from `l3` (EtherType `et`), the common
    /// shapes only. The caller checked that 20 bytes from `l3` are there.
    /// Always inlined: left to the compiler, this walk that both media share
    /// becomes a call of its own on every packet (docs/benchmarks.md,
    /// "Instructions per packet").
    #[inline(always)]
    fn fast_l3(frame: &[u8], l3: usize, et: u16, tags: usize) -> Option<GroHeaders> {
        let len = frame.len();
        let (v6, proto, l3_header_len, l3_len) = match et {
            0x0800 => {
                let ip = &frame[l3..];
                // No options, not a fragment (MF and offset clear; DF/reserved allowed).
                if ip[0] != 0x45 || be16(ip, 6) & 0x3FFF != 0 {
                    return None;
                }
                (false, ip[9], 20, be16(ip, 2) as usize)
            }
            0x86DD => {
                if len < l3 + 40 {
                    return None;
                }
                let ip = &frame[l3..];
                if ip[0] >> 4 != 6 {
                    return None;
                }
                let pl = be16(ip, 4) as usize;
                if pl == 0 {
                    return None;
                }
                (true, ip[6], 40, 40 + pl)
            }
            _ => return None,
        };
        let l3_end = l3 + l3_len;
        if l3_len < l3_header_len || l3_end > len {
            return None;
        }
        let l4 = l3 + l3_header_len;
        let (tcp, payload, payload_len) = match proto {
            6 => {
                if l4 + 20 > l3_end {
                    return None;
                }
                let hl = (frame[l4 + 12] >> 4) as usize * 4;
                if hl < 20 || l4 + hl > l3_end {
                    return None;
                }
                (true, l4 + hl, l3_end - l4 - hl)
            }
            17 => {
                if l4 + 8 > l3_end {
                    return None;
                }
                let ulen = be16(frame, l4 + 4) as usize;
                if ulen < 8 || l4 + ulen > l3_end {
                    return None;
                }
                (false, l4 + 8, ulen - 8)
            }
            _ => return None,
        };
        Some(GroHeaders {
            tags,
            v6,
            tcp,
            l3,
            l3_header_len,
            l3_len,
            l4,
            payload,
            payload_len,
            is_fragment: false,
            has_fragment_header: false,
            l2_padding: len - l3_end,
        })
    }

    /// Everything else, through the crate-wide parser.
    #[cold]
    #[inline(never)]
    fn slow(frame: &[u8], medium: Medium) -> Result<GroHeaders, NotCandidate> {
        let h = medium.parse(frame).map_err(|_| NotCandidate::Malformed)?;
        if h.vlans.len() > 2 {
            return Err(NotCandidate::TooManyTags);
        }
        let v6 = match h.l3 {
            L3Kind::Ipv4 => false,
            L3Kind::Ipv6 => true,
            _ => return Err(NotCandidate::NotIp),
        };
        let tcp = match h.l4 {
            L4Kind::Tcp => true,
            L4Kind::Udp => false,
            // A non-first fragment has no L4 header but is still a fragment:
            // report it as TCP/UDP-less only if it is not one.
            L4Kind::None if h.is_fragment || h.fragment.is_some() => true,
            _ => return Err(NotCandidate::NotTcpUdp),
        };
        Ok(GroHeaders {
            tags: h.vlans.len(),
            v6,
            tcp,
            l3: h.l3_offset,
            l3_header_len: h.l3_header_len,
            l3_len: h.l3_len,
            l4: h.l4_offset,
            payload: h.payload_offset,
            payload_len: h.payload_len,
            is_fragment: h.is_fragment,
            has_fragment_header: h.fragment.is_some(),
            l2_padding: h.l2_padding,
        })
    }

    /// The headers of a TCP segment known to be laid out as an aggregate's
    /// (a fast path's template matched): no tags counted (they are not
    /// read past the parse), no fragment, no padding.
    #[inline(always)]
    pub fn tcp(l3: usize, l4: usize, payload: usize, l3_len: usize, v6: bool) -> GroHeaders {
        GroHeaders {
            tags: 0,
            v6,
            tcp: true,
            l3,
            l3_header_len: l4 - l3,
            l3_len,
            l4,
            payload,
            payload_len: l3 + l3_len - payload,
            is_fragment: false,
            has_fragment_header: false,
            l2_padding: 0,
        }
    }

    /// End of the IP packet.
    #[inline]
    pub fn l3_end(&self) -> usize {
        self.l3 + self.l3_len
    }

    /// TCP/UDP length (pseudo-header length).
    #[inline]
    pub fn l4_len(&self) -> usize {
        self.l3_end() - self.l4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{Flow, FlowSpec, Transport};
    use crate::wire::TcpFlags;

    /// The fast path agrees with the full parser on every shape it takes,
    /// on both media; a raw IP packet's offsets are its Ethernet frame's
    /// minus 14.
    #[test]
    fn fast_path_matches_frame_headers() {
        for t in [Transport::Tcp, Transport::Udp] {
            for v6 in [false, true] {
                for tags in [&[][..], &[(0x8100, 5)], &[(0x88A8, 1), (0x8100, 2)]] {
                    let mut f = Flow::new(FlowSpec::new(t, v6, 3).with_vlans(tags).unwrap());
                    for len in [0, 1, 100, 1448] {
                        let mut frame = f.frame(len, TcpFlags::empty()).unwrap();
                        for pad in [0, 7] {
                            frame.resize(frame.len() + pad, 0);
                            let ctx = format!("{t:?} v6={v6} tags={tags:?} len={len} pad={pad}");
                            let fast = GroHeaders::fast_ethernet::<false>(&frame).expect("fast path");
                            let slow = GroHeaders::slow(&frame, Medium::Ethernet).unwrap();
                            assert_eq!(fast, slow, "{ctx}");
                            if !tags.is_empty() {
                                continue;
                            }
                            let raw = &frame[14..];
                            let fast_ip = GroHeaders::fast_ip::<false>(raw).expect("fast path");
                            assert_eq!(fast_ip, GroHeaders::slow(raw, Medium::Ip).unwrap(), "{ctx} raw IP");
                            let shifted =
                                GroHeaders { l3: fast.l3 - 14, l4: fast.l4 - 14, payload: fast.payload - 14, ..fast };
                            assert_eq!(fast_ip, shifted, "{ctx} raw IP = Ethernet minus 14");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn unusual_frames_take_the_full_parser() {
        let mut f = Flow::new(FlowSpec::new(Transport::Tcp, false, 3));
        let mut frame = f.frame(10, TcpFlags::empty()).unwrap();
        frame[14 + 6] |= 0x20; // MF
        assert!(GroHeaders::fast_ethernet::<false>(&frame).is_none());
        assert!(GroHeaders::fast_ip::<false>(&frame[14..]).is_none());
        assert!(GroHeaders::parse(&frame[14..], Medium::Ip).unwrap().is_fragment);
        assert_eq!(GroHeaders::parse(&[0x45; 10], Medium::Ip), Err(NotCandidate::Malformed));
        assert_eq!(GroHeaders::parse(&[0x55; 60], Medium::Ip), Err(NotCandidate::Malformed));
        assert!(GroHeaders::parse(&frame, Medium::Ethernet).unwrap().is_fragment);
        assert_eq!(GroHeaders::parse(&[0u8; 10], Medium::Ethernet), Err(NotCandidate::Malformed));
        assert_eq!(GroHeaders::parse(&[0u8; 60], Medium::Ethernet), Err(NotCandidate::NotIp));
    }
}
