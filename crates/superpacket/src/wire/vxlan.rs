//! VXLAN header (RFC 7348): the 8 bytes after the outer UDP header of a
//! VXLAN packet, followed by the inner Ethernet frame.
//!
//! ```text
//!  0                   1                   2                   3
//! |R|R|R|R|I|R|R|R|            Reserved                           |
//! |                VXLAN Network Identifier (VNI) |   Reserved    |
//! ```
//!
//! [`VxlanPacket::new_checked`] validates only the length (8 bytes);
//! [`VxlanRepr::parse`] applies Linux's receive rule (`vxlan_rcv`, no
//! extensions configured): the I flag set, every other flag bit and both
//! reserved fields zero, else [`WireError::Malformed`] (the packet is
//! dropped, not delivered to the VNI).

use super::error::{Result, WireError, check_len};
use super::field::be32;
use super::put_u32;

/// VXLAN header length.
pub const VXLAN_HEADER_LEN: usize = 8;
/// IANA UDP port of VXLAN.
pub const VXLAN_PORT: u16 = 4789;
/// The "VNI valid" flag (first byte).
pub const VXLAN_FLAG_I: u8 = 0x08;
/// Largest VNI (24 bits).
pub const VXLAN_VNI_MAX: u32 = (1 << 24) - 1;

/// Zero-copy view of a VXLAN header (and the inner frame after it).
#[derive(Debug, Clone)]
pub struct VxlanPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VxlanPacket<T> {
    view_constructors! {
        /// Wraps without checks; accessors panic on fewer than 8 bytes.
        fn new_unchecked;
        /// Wraps after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// At least the 8 header bytes are present.
    pub fn check_len(&self) -> Result<()> {
        check_len("vxlan", VXLAN_HEADER_LEN, self.buffer.as_ref().len())
    }

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// The 24 reserved bits after the flags.
    pub fn reserved1(&self) -> u32 {
        be32(self.buffer.as_ref(), 0) & 0x00ff_ffff
    }

    /// The VXLAN Network Identifier.
    pub fn vni(&self) -> u32 {
        be32(self.buffer.as_ref(), 4) >> 8
    }

    /// The reserved last byte.
    pub fn reserved2(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[VXLAN_HEADER_LEN.min(self.buffer.as_ref().len())..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VxlanPacket<T> {
    /// Writes flags (I set, nothing else), the VNI and zero reserved fields.
    pub fn set_vni(&mut self, vni: u32) {
        let b = self.buffer.as_mut();
        put_u32(b, 0, u32::from(VXLAN_FLAG_I) << 24);
        put_u32(b, 4, (vni & VXLAN_VNI_MAX) << 8);
    }
}

/// A VXLAN header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VxlanRepr {
    /// The VXLAN Network Identifier (24 bits).
    pub vni: u32,
}

impl VxlanRepr {
    /// Decodes a header as Linux's `vxlan_rcv` accepts it (see the module
    /// documentation).
    ///
    /// # Errors
    /// `Malformed` for a missing I flag, any other flag bit or reserved bit set.
    pub fn parse<T: AsRef<[u8]>>(view: &VxlanPacket<T>) -> Result<VxlanRepr> {
        if view.flags() & VXLAN_FLAG_I == 0 {
            return Err(WireError::malformed("vxlan", "I flag (VNI valid) not set"));
        }
        if view.flags() != VXLAN_FLAG_I || view.reserved1() != 0 || view.reserved2() != 0 {
            return Err(WireError::malformed("vxlan", "reserved flag or field bits set"));
        }
        Ok(VxlanRepr { vni: view.vni() })
    }

    /// Header length (8).
    pub const fn header_len(&self) -> usize {
        VXLAN_HEADER_LEN
    }

    /// Writes the header into the first 8 bytes of `buf`.
    ///
    /// # Errors
    /// `Truncated` if `buf` is shorter than 8 bytes; `Malformed` for a VNI
    /// over 24 bits.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        check_len("vxlan", VXLAN_HEADER_LEN, buf.len())?;
        if self.vni > VXLAN_VNI_MAX {
            return Err(WireError::malformed("vxlan", "VNI wider than 24 bits"));
        }
        VxlanPacket::new_unchecked(buf).set_vni(self.vni);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_linux_receive_rule() {
        let mut b = [0u8; 10];
        VxlanRepr { vni: 0x12_3456 }.emit(&mut b).unwrap();
        assert_eq!(&b[..8], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        let v = VxlanPacket::new_checked(&b[..]).unwrap();
        assert_eq!(VxlanRepr::parse(&v).unwrap(), VxlanRepr { vni: 0x12_3456 });
        assert_eq!(v.payload().len(), 2);
        for (at, value) in [(0, 0x00), (0, 0x0c), (1, 1), (3, 1), (7, 1)] {
            let mut bad = b;
            bad[at] = value;
            assert!(VxlanRepr::parse(&VxlanPacket::new_unchecked(&bad[..])).is_err(), "byte {at} = {value:#x}");
        }
        assert!(VxlanPacket::new_checked(&b[..7]).is_err());
        assert!(VxlanRepr { vni: 1 << 24 }.emit(&mut b).is_err());
        assert!(VxlanRepr { vni: 1 }.emit(&mut b[..7]).is_err());
    }
}
