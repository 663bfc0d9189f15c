//! Ethernet II frames (IEEE 802.3 clause 3.2.6 "Length/Type" used as a type)
//! and IEEE 802.1Q / 802.1ad VLAN tag stacks.
//!
//! Layout: `dst(6) src(6) type(2) payload`. A VLAN-tagged frame replaces the
//! type by a tag `TPID(2) TCI(2)` followed by the next type, which may itself
//! be another tag (QinQ and deeper stacks). The FCS is never part of the
//! buffers handled here (captures and TAP devices strip it).
//!
//! Invariants: after [`EthernetFrame::new_checked`] succeeds the buffer holds
//! at least [`ETHERNET_HEADER_LEN`] bytes, so every fixed-field accessor is in
//! bounds. Tag stacks are parsed into the fixed-capacity, `Copy`
//! [`VlanStack`]; more than [`MAX_VLAN_TAGS`] tags is a typed
//! [`WireError::Unsupported`], never a panic or an allocation.

use core::fmt;

use super::error::{Result, WireError, check_len};
use super::field::be16;
use super::put_u16;

/// Length of the untagged Ethernet II header: two addresses and the type.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;
/// Most VLAN tags a [`VlanStack`] holds; deeper stacks are `Unsupported`.
pub const MAX_VLAN_TAGS: usize = 8;

/// The MAC address in the six bytes of `b` from `at` (one bounds check and
/// one copy; indexing byte by byte checked each: the bridge reads two per
/// frame). Panics, as indexing did, if `b` is shorter: callers hold a frame
/// checked to have its header ([`EthernetFrame::new_checked`]).
#[inline]
fn mac_at(b: &[u8], at: usize) -> MacAddr {
    let mut m = [0u8; 6];
    m.copy_from_slice(&b[at..at + 6]);
    MacAddr(m)
}

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Copies an address out of the first 6 bytes of `bytes`, if there are 6.
    pub fn from_slice(bytes: &[u8]) -> Option<MacAddr> {
        Some(MacAddr(bytes.get(..6)?.try_into().ok()?))
    }

    /// The six octets.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// True when the I/G bit is set (multicast, including broadcast).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }

    /// True when the I/G bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// True when the U/L bit is set (locally administered).
    pub const fn is_local(&self) -> bool {
        self.0[0] & 2 != 0
    }

    /// The multicast MAC address an IPv6 multicast address maps to
    /// (RFC 2464 section 7: 33:33 + the last 32 bits).
    pub const fn from_ipv6_multicast(addr: [u8; 16]) -> MacAddr {
        MacAddr([0x33, 0x33, addr[12], addr[13], addr[14], addr[15]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

/// An EtherType (IEEE 802 numbers). A newtype so that every value round-trips;
/// the known ones are associated constants.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4 (0x0800).
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP (0x0806).
    pub const ARP: EtherType = EtherType(0x0806);
    /// IPv6 (0x86DD).
    pub const IPV6: EtherType = EtherType(0x86DD);
    /// IEEE 802.1Q customer VLAN tag (C-tag) TPID (0x8100).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IEEE 802.1ad service VLAN tag (S-tag, "QinQ") TPID (0x88A8).
    pub const QINQ: EtherType = EtherType(0x88A8);
    /// Pre-standard QinQ S-tag TPID still emitted by some switches (0x9100).
    pub const QINQ_LEGACY: EtherType = EtherType(0x9100);

    /// True for the TPIDs recognised as a VLAN tag: 0x8100, 0x88A8, 0x9100.
    #[inline]
    pub const fn is_vlan_tpid(self) -> bool {
        matches!(self.0, 0x8100 | 0x88A8 | 0x9100)
    }

    /// Values below 0x0600 are an 802.3 length, not a type (IEEE 802.3 3.2.6).
    pub const fn is_length(self) -> bool {
        self.0 < 0x0600
    }

    /// Short name of the well-known types.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0800 => "ipv4",
            0x0806 => "arp",
            0x86DD => "ipv6",
            0x8100 => "802.1q",
            0x88A8 => "802.1ad",
            0x9100 => "qinq-legacy",
            _ => return None,
        })
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}(0x{:04x})", self.0),
            None => write!(f, "0x{:04x}", self.0),
        }
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EtherType({self})")
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        EtherType(v)
    }
}

/// Zero-copy view of an Ethernet II frame. The `ethertype` accessor returns
/// the raw field at offset 12, which is a TPID when the frame is tagged; use
/// [`EthernetFrame::vlan_stack`] or [`EthernetRepr::parse`] to see through tags.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    view_constructors! {
        /// Wraps a buffer without checking anything; accessors panic if it is
        /// shorter than [`ETHERNET_HEADER_LEN`].
        fn new_unchecked;
        /// Wraps a buffer after [`check_len`](Self::check_len).
        fn new_checked;
    }

    /// Ensures the buffer holds the 14-byte header.
    pub fn check_len(&self) -> Result<()> {
        check_len("ethernet", ETHERNET_HEADER_LEN, self.buffer.as_ref().len())
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), 0)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), 6)
    }

    /// The raw type field at offset 12 (a TPID for a tagged frame).
    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), 12))
    }

    /// Everything after the first 14 bytes (for a tagged frame this starts
    /// with the first TCI).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[ETHERNET_HEADER_LEN..]
    }

    /// Parses the VLAN tag stack starting at offset 12. Returns the tags, the
    /// inner (final) EtherType and the offset of the L3 header in the frame.
    pub fn vlan_stack(&self) -> Result<(VlanStack, EtherType, usize)> {
        parse_tags(self.buffer.as_ref(), 12)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[0..6].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[6..12].copy_from_slice(&a.0);
    }

    /// Sets the type field at offset 12.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put_u16(self.buffer.as_mut(), 12, t.0);
    }

    /// Mutable bytes after the first 14.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[ETHERNET_HEADER_LEN..]
    }
}

/// One VLAN tag as a value: TPID and the decoded TCI (IEEE 802.1Q 9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100, 0x88A8 or 0x9100).
    pub tpid: EtherType,
    /// Priority code point, 3 bits.
    pub pcp: u8,
    /// Drop eligible indicator (formerly CFI).
    pub dei: bool,
    /// VLAN identifier, 12 bits.
    pub vid: u16,
}

impl VlanTag {
    /// Decodes a 16-bit TCI.
    #[inline]
    pub const fn from_tci(tpid: EtherType, tci: u16) -> VlanTag {
        VlanTag { tpid, pcp: (tci >> 13) as u8, dei: tci & 0x1000 != 0, vid: tci & 0x0fff }
    }

    /// Encodes the TCI (out-of-range `pcp` / `vid` bits are masked off).
    #[inline]
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }

    /// Reads a tag from a view.
    pub fn parse<T: AsRef<[u8]>>(view: &VlanTagView<T>) -> Result<VlanTag> {
        view.check_len()?;
        if !view.tpid().is_vlan_tpid() {
            return Err(WireError::malformed("vlan", "TPID is not 0x8100, 0x88a8 or 0x9100"));
        }
        Ok(VlanTag::from_tci(view.tpid(), view.tci()))
    }

    /// Writes the tag (TPID + TCI) into a view.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, view: &mut VlanTagView<T>) -> Result<()> {
        view.check_len()?;
        view.set_tpid(self.tpid);
        view.set_tci(self.tci());
        Ok(())
    }
}

/// Zero-copy view of one 4-byte VLAN tag: `TPID(2) TCI(2)`.
#[derive(Debug, Clone)]
pub struct VlanTagView<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTagView<T> {
    view_constructors! {
        /// Wraps without checks; accessors panic on a buffer shorter than 4.
        fn new_unchecked;
        /// Wraps after checking the length (4 bytes).
        fn new_checked;
    }

    /// Ensures 4 bytes are present.
    pub fn check_len(&self) -> Result<()> {
        check_len("vlan", VLAN_TAG_LEN, self.buffer.as_ref().len())
    }

    /// Tag protocol identifier.
    pub fn tpid(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), 0))
    }

    /// Raw tag control information.
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// Priority code point.
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN id.
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTagView<T> {
    /// Sets the TPID.
    pub fn set_tpid(&mut self, t: EtherType) {
        put_u16(self.buffer.as_mut(), 0, t.0);
    }

    /// Sets the TCI.
    pub fn set_tci(&mut self, tci: u16) {
        put_u16(self.buffer.as_mut(), 2, tci);
    }
}

/// A stack of up to [`MAX_VLAN_TAGS`] VLAN tags, outermost first.
///
/// `Copy`, `Eq` and `Hash` so that it can be part of a GRO flow key: unused
/// slots are always zero, so the derived comparisons only see the used tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanStack {
    tags: [VlanTag; MAX_VLAN_TAGS],
    len: u8,
}

impl VlanStack {
    /// The empty stack (untagged frame).
    pub const EMPTY: VlanStack =
        VlanStack { tags: [VlanTag { tpid: EtherType(0), pcp: 0, dei: false, vid: 0 }; 8], len: 0 };

    /// An empty stack.
    pub const fn new() -> VlanStack {
        Self::EMPTY
    }

    /// Builds a stack from tags, outermost first.
    pub fn from_tags(tags: &[VlanTag]) -> Result<VlanStack> {
        let mut s = VlanStack::new();
        for t in tags {
            s.push(*t)?;
        }
        Ok(s)
    }

    /// Appends an inner tag; `Unsupported` when the stack is full.
    pub fn push(&mut self, tag: VlanTag) -> Result<()> {
        let slot = self
            .tags
            .get_mut(self.len as usize)
            .ok_or(WireError::unsupported("vlan", "more than 8 stacked VLAN tags"))?;
        *slot = tag;
        self.len += 1;
        Ok(())
    }

    /// Removes and returns the innermost tag.
    pub fn pop(&mut self) -> Option<VlanTag> {
        let i = (self.len as usize).checked_sub(1)?;
        let t = self.tags[i];
        self.tags[i] = VlanTag::default();
        self.len -= 1;
        Some(t)
    }

    /// The tags, outermost first.
    #[inline]
    pub fn as_slice(&self) -> &[VlanTag] {
        &self.tags[..self.len as usize]
    }

    /// Number of tags.
    #[inline]
    pub const fn len(&self) -> usize {
        self.len as usize
    }

    /// True for an untagged frame.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Outermost tag.
    pub fn outer(&self) -> Option<&VlanTag> {
        self.as_slice().first()
    }

    /// Innermost tag.
    pub fn inner(&self) -> Option<&VlanTag> {
        self.as_slice().last()
    }

    /// Iterates outermost first.
    pub fn iter(&self) -> core::slice::Iter<'_, VlanTag> {
        self.as_slice().iter()
    }

    /// Bytes the tags occupy on the wire (4 per tag).
    pub const fn wire_len(&self) -> usize {
        self.len as usize * VLAN_TAG_LEN
    }

    /// Parses a tag stack. `tagged` starts at the type field that may hold the
    /// first TPID (offset 12 of an Ethernet frame). Returns the tags, the
    /// inner EtherType and the number of bytes consumed (`4 * tags + 2`).
    pub fn parse(tagged: &[u8]) -> Result<(VlanStack, EtherType, usize)> {
        parse_tags(tagged, 0)
    }

    /// Writes the tags followed by `inner` as type into `buf` (which starts at
    /// the type field); returns the bytes written (`4 * tags + 2`).
    pub fn emit(&self, inner: EtherType, buf: &mut [u8]) -> Result<usize> {
        let n = self.wire_len() + 2;
        check_len("vlan", n, buf.len())?;
        for (i, t) in self.iter().enumerate() {
            put_u16(buf, 4 * i, t.tpid.0);
            put_u16(buf, 4 * i + 2, t.tci());
        }
        put_u16(buf, self.wire_len(), inner.0);
        Ok(n)
    }
}

impl<'a> IntoIterator for &'a VlanStack {
    type Item = &'a VlanTag;
    type IntoIter = core::slice::Iter<'a, VlanTag>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Parses tags in `buf` from `start` (the offset of the first type field).
/// Returns the stack, the inner type and the offset just after it. Errors
/// carry offsets relative to `buf`.
#[inline]
pub fn parse_tags(buf: &[u8], start: usize) -> Result<(VlanStack, EtherType, usize)> {
    let mut stack = VlanStack::new();
    let mut off = start;
    loop {
        if off + 2 > buf.len() {
            return Err(WireError::truncated(if stack.is_empty() { "ethernet" } else { "vlan" }, off + 2, buf.len()));
        }
        let t = EtherType(be16(buf, off));
        if !t.is_vlan_tpid() {
            return Ok((stack, t, off + 2));
        }
        check_len("vlan", off + 4 + 2, buf.len())?;
        stack.push(VlanTag::from_tci(t, be16(buf, off + 2)))?;
        off += VLAN_TAG_LEN;
    }
}

/// What [`walk_tags`] found: the tag count, the inner EtherType and where
/// the L3 header starts, for code that needs no more of the tag stack (the
/// transmit feature check, bond hashing). Unlike [`parse_tags`] it keeps no
/// [`VlanStack`], so it has no tag limit and never fails: a buffer that ends
/// inside its tag stack is reported as found, and a match on the EtherType
/// then meets a TPID, never IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagWalk {
    /// VLAN TPIDs met, a tag cut short by the end of the buffer included.
    pub tags: usize,
    /// Offset of the type field after the tags (`start + 4 * tags`).
    pub type_offset: usize,
    /// The last type field read: the inner EtherType; the last tag's TPID
    /// when the buffer ends inside the tag stack; `EtherType(0)` when the
    /// buffer has no type field at all.
    pub ethertype: EtherType,
}

impl TagWalk {
    /// Offset of the L3 header, just after the inner type field. The buffer
    /// may end before it: read it with `get`.
    #[inline]
    pub const fn l3_offset(&self) -> usize {
        self.type_offset + 2
    }
}

/// Walks the VLAN tags of `buf` from `start` (the offset of the first type
/// field: 12 in an Ethernet frame) to the first type field that is not a
/// VLAN TPID ([`EtherType::is_vlan_tpid`]). The cheap, infallible sibling of
/// [`parse_tags`]: one bounds-checked 16-bit read per tag, nothing copied.
#[inline]
pub fn walk_tags(buf: &[u8], start: usize) -> TagWalk {
    let mut walk = TagWalk { tags: 0, type_offset: start, ethertype: EtherType(0) };
    // `get(off..)` first: no `off + 2` that could overflow for a wild `start`.
    while let Some(&[hi, lo]) = buf.get(walk.type_offset..).and_then(|rest| rest.first_chunk::<2>()) {
        walk.ethertype = EtherType(u16::from_be_bytes([hi, lo]));
        if !walk.ethertype.is_vlan_tpid() {
            break;
        }
        walk.tags += 1;
        walk.type_offset += VLAN_TAG_LEN;
    }
    walk
}

/// Decoded Ethernet header including its VLAN tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst_addr: MacAddr,
    /// Source address.
    pub src_addr: MacAddr,
    /// VLAN tags, outermost first (empty for an untagged frame).
    pub vlans: VlanStack,
    /// The inner EtherType (after all tags).
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Parses addresses and the tag stack.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        let (vlans, ethertype, _) = frame.vlan_stack()?;
        Ok(EthernetRepr { dst_addr: frame.dst_addr(), src_addr: frame.src_addr(), vlans, ethertype })
    }

    /// Header length: 14 plus 4 per tag.
    pub const fn header_len(&self) -> usize {
        ETHERNET_HEADER_LEN + self.vlans.wire_len()
    }

    /// Frame length for a payload of `payload_len` bytes (no FCS).
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Writes the header (addresses, tags, type) at the start of the frame.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) -> Result<()> {
        check_len("ethernet", self.header_len(), frame.buffer.as_ref().len())?;
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        self.vlans.emit(self.ethertype, &mut frame.buffer.as_mut()[12..])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNTAGGED: [u8; 16] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06, 0xaa, 0xbb];

    /// `walk_tags` against `parse_tags` where that succeeds, and against
    /// the byte loop the engine used before it (the bond's and the feature
    /// check's) on every tag depth and every truncation.
    #[test]
    fn walk_tags_agrees_with_parse_tags_and_the_byte_loop() {
        fn byte_loop(b: &[u8]) -> (usize, usize, u16) {
            let (mut off, mut tags, mut et) = (12, 0, 0);
            while off + 2 <= b.len() {
                et = u16::from_be_bytes([b[off], b[off + 1]]);
                if !matches!(et, 0x8100 | 0x88A8 | 0x9100) {
                    break;
                }
                tags += 1;
                off += 4;
            }
            (tags, off, et)
        }
        for depth in 0..=MAX_VLAN_TAGS + 2 {
            let mut f = UNTAGGED[..12].to_vec();
            for i in 0..depth {
                let tpid: u16 = [0x88A8, 0x8100, 0x9100][i % 3];
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&(i as u16 + 1).to_be_bytes());
            }
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0]);
            for cut in 0..=f.len() {
                let b = &f[..cut];
                let w = walk_tags(b, 12);
                assert_eq!((w.tags, w.type_offset, w.ethertype.0), byte_loop(b), "depth {depth} cut {cut}");
                if let Ok((stack, t, after)) = parse_tags(b, 12) {
                    assert_eq!((w.tags, w.ethertype, w.l3_offset()), (stack.len(), t, after), "{depth} {cut}");
                }
            }
        }
        // A start beyond the buffer (or anywhere) never panics.
        assert_eq!(walk_tags(&UNTAGGED, usize::MAX).tags, 0);
    }

    #[test]
    fn untagged() {
        let f = EthernetFrame::new_checked(&UNTAGGED[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr().to_string(), "02:00:00:00:00:01");
        assert!(f.src_addr().is_local() && f.src_addr().is_unicast());
        assert_eq!(f.ethertype(), EtherType::ARP);
        assert_eq!(f.payload(), &[0xaa, 0xbb]);
        let r = EthernetRepr::parse(&f).unwrap();
        assert!(r.vlans.is_empty());
        assert_eq!(r.header_len(), 14);
        let mut out = [0u8; 16];
        r.emit(&mut EthernetFrame::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(&out[..14], &UNTAGGED[..14]);
    }

    #[test]
    fn qinq_three_tpids() {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0xa8, 0xa0, 0x64]); // S-tag pcp 5 vid 100
        f.extend_from_slice(&[0x81, 0x00, 0x10, 0xc8]); // C-tag dei vid 200
        f.extend_from_slice(&[0x91, 0x00, 0x0f, 0xff]); // legacy tag vid 4095
        f.extend_from_slice(&[0x86, 0xdd, 1, 2, 3]);
        let frame = EthernetFrame::new_checked(&f[..]).unwrap();
        let (s, t, off) = frame.vlan_stack().unwrap();
        assert_eq!(t, EtherType::IPV6);
        assert_eq!(off, 12 + 12 + 2);
        assert_eq!(s.len(), 3);
        assert_eq!(s.as_slice()[0], VlanTag { tpid: EtherType::QINQ, pcp: 5, dei: false, vid: 100 });
        assert_eq!(s.as_slice()[1], VlanTag { tpid: EtherType::VLAN, pcp: 0, dei: true, vid: 200 });
        assert_eq!(s.inner().unwrap().vid, 4095);
        let r = EthernetRepr::parse(&frame).unwrap();
        let mut out = vec![0u8; r.buffer_len(3)];
        r.emit(&mut EthernetFrame::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(&out[..off], &f[..off]);
    }

    #[test]
    fn vlan_errors() {
        // Tag without room for the following type.
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        assert_eq!(EthernetFrame::new_checked(&f[..]).unwrap().vlan_stack(), Err(WireError::truncated("vlan", 18, 16)));
        // Nine tags: unsupported.
        let mut f = vec![0u8; 12];
        for i in 0..9 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, i]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let e = EthernetFrame::new_checked(&f[..]).unwrap().vlan_stack().unwrap_err();
        assert!(matches!(e, WireError::Unsupported { layer: "vlan", .. }), "{e}");
        // Exactly eight is fine.
        let mut f = vec![0u8; 12];
        for i in 0..8 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, i]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let (s, _, _) = EthernetFrame::new_checked(&f[..]).unwrap().vlan_stack().unwrap();
        assert_eq!(s.len(), MAX_VLAN_TAGS);
        assert_eq!(EthernetFrame::new_checked(&[0u8; 13][..]).unwrap_err(), WireError::truncated("ethernet", 14, 13));
    }

    #[test]
    fn stack_equality_ignores_popped_slots() {
        let a = VlanTag { tpid: EtherType::VLAN, pcp: 1, dei: false, vid: 10 };
        let b = VlanTag { tpid: EtherType::VLAN, pcp: 2, dei: true, vid: 20 };
        let mut s = VlanStack::from_tags(&[a, b]).unwrap();
        assert_eq!(s.pop(), Some(b));
        assert_eq!(s, VlanStack::from_tags(&[a]).unwrap());
        let v = VlanTagView::new_checked([0x81u8, 0x00, 0xf0, 0x01]).unwrap();
        assert_eq!((v.pcp(), v.dei(), v.vid()), (7, true, 1));
        assert_eq!(VlanTag::parse(&v).unwrap().tci(), 0xf001);
        assert!(VlanTag::parse(&VlanTagView::new_checked([8u8, 0, 0, 0]).unwrap()).is_err());
        assert_eq!(EtherType::QINQ.to_string(), "802.1ad(0x88a8)");
        assert_eq!(
            MacAddr::from_ipv6_multicast([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 1]).to_string(),
            "33:33:ff:00:00:01"
        );
    }
}
