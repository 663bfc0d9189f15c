//! UDP header (RFC 768) and its checksum rules.
//!
//! [`UdpPacket::new_checked`] validates: 8 bytes present (`Truncated`),
//! length field >= 8 (`Malformed`; 0 is the IPv6 jumbogram convention of
//! RFC 2675, reported as `Unsupported`) and length <= buffer (`Truncated`).
//! After it succeeds every accessor is in bounds, and
//! [`UdpPacket::payload`] is bounded by the length field.
//!
//! Checksums (RFC 768, RFC 8200 section 8.1, offload-rules 0.3):
//! - a computed checksum of 0 is transmitted as 0xFFFF
//!   ([`UdpPacket::fill_checksum`] does it);
//! - over IPv4 a checksum field of 0 means "no checksum"
//!   ([`UdpChecksum::Absent`]); over IPv6 it is [`UdpChecksum::Invalid`]
//!   (RFC 6935/6936 zero-checksum tunnels are not special-cased).

use super::error::{Result, WireError, check_len};
use super::field::be16;
use super::ip::IpVersion;
use super::{put_u16, sub, sub_mut};
use crate::csum;

/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;
/// Offset of the checksum field (the `csum_offset` of offload-rules 0.3).
pub const UDP_CHECKSUM_OFFSET: usize = 6;

/// Outcome of checking a UDP checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UdpChecksum {
    /// The checksum verifies.
    Valid,
    /// The checksum is wrong (or zero over IPv6).
    Invalid,
    /// The field is 0 over IPv4: the sender computed no checksum.
    Absent,
}

impl UdpChecksum {
    /// True for `Valid` and `Absent`: the datagram may be delivered.
    pub const fn is_acceptable(self) -> bool {
        !matches!(self, UdpChecksum::Invalid)
    }
}

/// Zero-copy view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    view_constructors! {
        /// Wraps without checks; accessors panic on fewer than 8 bytes.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// Runs the validations listed in the module documentation.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_len("udp", UDP_HEADER_LEN, len)?;
        match self.len() as usize {
            0 => Err(WireError::unsupported("udp", "length 0 (jumbogram)")),
            1..UDP_HEADER_LEN => Err(WireError::malformed("udp", "length field < 8")),
            l => check_len("udp", l, len),
        }
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Length field (header + payload).
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), 4)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), 6)
    }

    /// Payload, bounded by the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        sub(self.buffer.as_ref(), UDP_HEADER_LEN, self.len() as usize)
    }

    /// Checks the checksum given the pseudo-header sum (computed with the
    /// length field as L4 length). Sums the datagram up to the length field.
    pub fn verify_checksum(&self, pseudo_sum: u16, ip: IpVersion) -> UdpChecksum {
        if self.checksum() == 0 {
            return match ip {
                IpVersion::V4 => UdpChecksum::Absent,
                IpVersion::V6 => UdpChecksum::Invalid,
            };
        }
        let data = sub(self.buffer.as_ref(), 0, self.len() as usize);
        if csum::ones_add(pseudo_sum, csum::ones_sum(data)) == 0xFFFF {
            UdpChecksum::Valid
        } else {
            UdpChecksum::Invalid
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 0, v);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 4, v);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put_u16(self.buffer.as_mut(), 6, v);
    }

    /// Mutable payload (bounded by the length field).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.len() as usize;
        sub_mut(self.buffer.as_mut(), UDP_HEADER_LEN, l)
    }

    /// Computes and stores the checksum (a computed 0 is stored as 0xFFFF).
    /// Returns the stored value.
    pub fn fill_checksum(&mut self, pseudo_sum: u16) -> u16 {
        self.set_checksum(0);
        let data = sub(self.buffer.as_ref(), 0, self.len() as usize);
        let mut c = !csum::ones_add(pseudo_sum, csum::ones_sum(data));
        if c == 0 {
            c = 0xFFFF;
        }
        self.set_checksum(c);
        c
    }
}

/// A decoded UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length (length field minus 8).
    pub payload_len: usize,
}

impl UdpRepr {
    /// Decodes a header (checksum not checked).
    pub fn parse<T: AsRef<[u8]>>(p: &UdpPacket<T>) -> Result<UdpRepr> {
        p.check_len()?;
        Ok(UdpRepr { src_port: p.src_port(), dst_port: p.dst_port(), payload_len: p.len() as usize - UDP_HEADER_LEN })
    }

    /// Always 8.
    pub const fn header_len(&self) -> usize {
        UDP_HEADER_LEN
    }

    /// `8 + payload_len`.
    pub const fn buffer_len(&self) -> usize {
        UDP_HEADER_LEN + self.payload_len
    }

    /// Writes the header with checksum 0. Write the payload then call
    /// [`UdpPacket::fill_checksum`] (or leave 0 over IPv4 for "no checksum").
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut UdpPacket<T>) -> Result<()> {
        check_len("udp", UDP_HEADER_LEN, p.buffer.as_ref().len())?;
        let len = u16::try_from(self.buffer_len()).map_err(|_| WireError::malformed("udp", "length exceeds 65535"))?;
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len);
        p.set_checksum(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // DNS query 10.0.0.1:53000 -> 10.0.0.53:53, payload "abcd", checksum
    // computed independently.
    const DGRAM: [u8; 12] = [0xcf, 0x08, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd'];

    fn pseudo() -> u16 {
        csum::pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 53], 17, 12)
    }

    #[test]
    fn checksum_states() {
        let mut d = DGRAM;
        let mut p = UdpPacket::new_checked(&mut d[..]).unwrap();
        assert_eq!(p.verify_checksum(pseudo(), IpVersion::V4), UdpChecksum::Absent);
        assert_eq!(p.verify_checksum(pseudo(), IpVersion::V6), UdpChecksum::Invalid);
        let c = p.fill_checksum(pseudo());
        assert_eq!(p.verify_checksum(pseudo(), IpVersion::V4), UdpChecksum::Valid);
        assert_eq!(p.verify_checksum(pseudo(), IpVersion::V6), UdpChecksum::Valid);
        assert_eq!(p.verify_checksum(pseudo() ^ 1, IpVersion::V4), UdpChecksum::Invalid);
        // Independent computation: ~(pseudo + words).
        let words: u32 = [0xcf08u32, 0x0035, 0x000c, 0x6162, 0x6364].iter().sum::<u32>() + pseudo() as u32;
        let folded = (words & 0xffff) + (words >> 16);
        assert_eq!(c, !(((folded & 0xffff) + (folded >> 16)) as u16));
        assert_eq!(p.payload(), b"abcd");
    }

    #[test]
    fn zero_checksum_sent_as_ffff() {
        // Choose the last payload word so that the computed checksum is 0.
        let mut d = DGRAM;
        d[10] = 0;
        d[11] = 0;
        let s = csum::ones_add(pseudo(), csum::ones_sum(&d));
        // The payload word w must make ones_add(s, w) == 0xFFFF.
        let w = !s;
        d[10..12].copy_from_slice(&w.to_be_bytes());
        let mut p = UdpPacket::new_checked(&mut d[..]).unwrap();
        assert_eq!(p.fill_checksum(pseudo()), 0xFFFF);
        assert_eq!(p.checksum(), 0xFFFF);
        assert_eq!(p.verify_checksum(pseudo(), IpVersion::V6), UdpChecksum::Valid);
    }

    #[test]
    fn lengths_and_errors() {
        let mut d = DGRAM.to_vec();
        d.extend_from_slice(&[0; 6]); // padding after the datagram
        let p = UdpPacket::new_checked(&d[..]).unwrap();
        assert_eq!(p.payload(), b"abcd");
        let r = UdpRepr::parse(&p).unwrap();
        assert_eq!(r, UdpRepr { src_port: 53000, dst_port: 53, payload_len: 4 });
        let mut out = [0u8; 8];
        r.emit(&mut UdpPacket::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, DGRAM[..8]);
        assert_eq!(UdpPacket::new_checked(&d[..7]).unwrap_err(), WireError::truncated("udp", 8, 7));
        assert_eq!(UdpPacket::new_checked(&d[..11]).unwrap_err(), WireError::truncated("udp", 12, 11));
        d[5] = 7;
        assert_eq!(UdpPacket::new_checked(&d[..]).unwrap_err(), WireError::malformed("udp", "length field < 8"));
        d[5] = 0;
        assert!(matches!(UdpPacket::new_checked(&d[..]), Err(WireError::Unsupported { .. })));
        let big = UdpRepr { src_port: 1, dst_port: 2, payload_len: 65528 };
        assert!(big.emit(&mut UdpPacket::new_unchecked(&mut out[..])).is_err());
        assert!(UdpChecksum::Absent.is_acceptable() && !UdpChecksum::Invalid.is_acceptable());
    }
}
