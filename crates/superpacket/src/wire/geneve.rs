//! Geneve header (RFC 8926): 8 bytes plus variable options after the outer
//! UDP header, followed by the inner frame (Ethernet for protocol type
//! 0x6558, Transparent Ethernet Bridging).
//!
//! ```text
//! |Ver|  Opt Len  |O|C|    Rsvd.  |          Protocol Type        |
//! |        Virtual Network Identifier (VNI)       |    Reserved   |
//! |                    Variable-Length Options                    |
//! ```
//!
//! [`GenevePacket::new_checked`] validates that the header and the options
//! its length field announces are present. [`GeneveRepr::parse`] applies
//! Linux's receive rule (`geneve_udp_encap_recv`): version 0 and protocol
//! type 0x6558, else [`WireError::Malformed`] / [`WireError::Unsupported`].
//! Options are carried through as bytes, not interpreted.

use super::error::{Result, WireError, check_len};
use super::field::{be16, be32};
use super::{put_u16, put_u32};

/// Fixed Geneve header length (without options).
pub const GENEVE_HEADER_LEN: usize = 8;
/// IANA UDP port of Geneve.
pub const GENEVE_PORT: u16 = 6081;
/// Protocol type of an Ethernet payload (Transparent Ethernet Bridging).
pub const GENEVE_PROTO_ETHERNET: u16 = 0x6558;
/// Longest option block (6-bit length in 4-byte units).
pub const GENEVE_MAX_OPTIONS_LEN: usize = 63 * 4;

/// Zero-copy view of a Geneve header (and what follows it).
#[derive(Debug, Clone)]
pub struct GenevePacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GenevePacket<T> {
    view_constructors! {
        /// Wraps without checks; accessors panic on fewer than 8 bytes.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// The fixed header and the announced options are present.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        check_len("geneve", GENEVE_HEADER_LEN, len)?;
        check_len("geneve", self.header_len(), len)
    }

    /// Version (2 bits; 0 today).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 6
    }

    /// Length of the options in bytes.
    pub fn options_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & 0x3f) * 4
    }

    /// Header length including options.
    pub fn header_len(&self) -> usize {
        GENEVE_HEADER_LEN + self.options_len()
    }

    /// The O (control packet) bit.
    pub fn oam(&self) -> bool {
        self.buffer.as_ref()[1] & 0x80 != 0
    }

    /// The C (critical options present) bit.
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[1] & 0x40 != 0
    }

    /// Protocol type of the payload (an EtherType).
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The Virtual Network Identifier.
    pub fn vni(&self) -> u32 {
        be32(self.buffer.as_ref(), 4) >> 8
    }

    /// The option bytes (clamped to the buffer).
    pub fn options(&self) -> &[u8] {
        super::sub(self.buffer.as_ref(), GENEVE_HEADER_LEN, self.header_len())
    }

    /// What follows the header and its options.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[self.header_len().min(b.len())..]
    }
}

/// A Geneve header as a value; options are kept by length, their bytes stay
/// in the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneveRepr {
    /// The Virtual Network Identifier (24 bits).
    pub vni: u32,
    /// Protocol type of the payload.
    pub protocol: u16,
    /// Option bytes (a multiple of 4, at most 252).
    pub options_len: usize,
    /// The O bit (control packet).
    pub oam: bool,
    /// The C bit (critical options present).
    pub critical: bool,
}

impl GeneveRepr {
    /// Decodes a header as Linux's Geneve receive path accepts it.
    ///
    /// # Errors
    /// `Malformed` for a version other than 0; `Unsupported` for a payload
    /// other than Ethernet.
    pub fn parse<T: AsRef<[u8]>>(view: &GenevePacket<T>) -> Result<GeneveRepr> {
        view.check_len()?;
        if view.version() != 0 {
            return Err(WireError::malformed("geneve", "version is not 0"));
        }
        if view.protocol() != GENEVE_PROTO_ETHERNET {
            return Err(WireError::unsupported("geneve", "payload is not Ethernet (protocol type 0x6558)"));
        }
        Ok(GeneveRepr {
            vni: view.vni(),
            protocol: view.protocol(),
            options_len: view.options_len(),
            oam: view.oam(),
            critical: view.critical(),
        })
    }

    /// Header length including options.
    pub const fn header_len(&self) -> usize {
        GENEVE_HEADER_LEN + self.options_len
    }

    /// Writes the fixed header into `buf` (the options, if any, are the
    /// caller's to write after it).
    ///
    /// # Errors
    /// `Truncated` if `buf` cannot hold the header and options; `Malformed`
    /// for a VNI over 24 bits or an options length not a multiple of 4 up to 252.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_len("geneve", self.header_len(), buf.len())?;
        if self.vni >= 1 << 24 {
            return Err(WireError::malformed("geneve", "VNI wider than 24 bits"));
        }
        if self.options_len & 3 != 0 || self.options_len > GENEVE_MAX_OPTIONS_LEN {
            return Err(WireError::malformed("geneve", "options length not a multiple of 4 up to 252"));
        }
        buf[0] = (self.options_len / 4) as u8;
        buf[1] = (u8::from(self.oam) << 7) | (u8::from(self.critical) << 6);
        put_u16(buf, 2, self.protocol);
        put_u32(buf, 4, self.vni << 8);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_options_and_receive_rule() {
        let repr =
            GeneveRepr { vni: 0xab_cdef, protocol: GENEVE_PROTO_ETHERNET, options_len: 8, oam: false, critical: true };
        let mut b = [0u8; 20];
        repr.emit(&mut b).unwrap();
        b[8..16].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let v = GenevePacket::new_checked(&b[..]).unwrap();
        assert_eq!(GeneveRepr::parse(&v).unwrap(), repr);
        assert_eq!(v.options(), &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(v.payload().len(), 4);
        assert!(GenevePacket::new_checked(&b[..15]).is_err(), "options cut short");
        let mut bad = b;
        bad[0] |= 0x40;
        assert!(GeneveRepr::parse(&GenevePacket::new_unchecked(&bad[..])).is_err(), "version 1");
        let mut ip = b;
        ip[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
        assert!(matches!(GeneveRepr::parse(&GenevePacket::new_unchecked(&ip[..])), Err(WireError::Unsupported { .. })));
        assert!(GeneveRepr { options_len: 6, ..repr }.emit(&mut b).is_err());
        assert!(GeneveRepr { vni: 1 << 24, ..repr }.emit(&mut b).is_err());
    }
}
