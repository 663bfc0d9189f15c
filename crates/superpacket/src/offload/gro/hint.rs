//! Where a flow's packets went last: a hint for the fast paths
//! (`Gro::plain_fast`, `Gro::tunnel_fast`), which check what they find there
//! against the packet ([`super::template::Template`]) before they use it.

use crate::wire::field::ne32;

/// Entries of [`SlotHints`]: one per value of a [`Hint`] byte, four times
/// the 64 flows a receive burst of `bench peers` carries, so that few of
/// them share an entry (1 KB).
const ENTRIES: usize = 256;

/// A flow's entry in a [`SlotHints`]: a few header bytes that tell flows
/// apart (a tunnel's outer UDP source port, which a tunnel endpoint derives
/// from the inner flow's hash; a plain packet's [`plain_hint`]), folded to a
/// byte. Computed once per packet, it indexes the entries without a bounds
/// check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint(u8);

impl Hint {
    /// The key's four bytes XORed: keys that differ in one byte only (a
    /// run of source ports, sequential or not) never share an entry, and
    /// random ones spread evenly. (A multiplicative hash spread a run of 64
    /// sequential tunnel source ports over 64 entries with collisions: the
    /// tunnel fast path missed more often, +160 instructions per packet at
    /// 64 flows.)
    #[inline(always)]
    pub(crate) fn of(key: u32) -> Hint {
        let half = key ^ key >> 16;
        Hint((half ^ half >> 8) as u8)
    }
}

/// The bytes a [`Hint`] is folded from ([`packet_hint`]), folded only
/// where a fast path is tried: a datagram to no tunnel port, which tries
/// none, then pays two loads, not the fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HintKey(u32);

impl HintKey {
    /// The hint of these bytes.
    #[inline(always)]
    pub(crate) fn hint(self) -> Hint {
        Hint::of(self.0)
    }
}

/// Which aggregate the last packets of a flow went to: for each [`Hint`],
/// the flow table slot of the last one's aggregate. A hint only: a fast
/// path checks the aggregate it finds there (held, in the packet's bucket,
/// the packet's template).
#[derive(Debug, Clone)]
pub(crate) struct SlotHints {
    slots: [u32; ENTRIES],
}

impl Default for SlotHints {
    fn default() -> Self {
        SlotHints { slots: [u32::MAX; ENTRIES] }
    }
}

impl SlotHints {
    /// The slot of the aggregate the last packet with hint `h` went to
    /// (`u32::MAX` if none yet: no slot has it).
    #[inline(always)]
    pub(crate) fn slot(&self, h: Hint) -> u32 {
        self.slots[h.0 as usize]
    }

    /// A packet with hint `h` went to the aggregate in `slot`.
    #[inline(always)]
    pub(crate) fn note(&mut self, h: Hint, slot: u32) {
        self.slots[h.0 as usize] = slot;
    }
}

/// The hint of a packet (its bytes, [`HintKey`]), read without parsing it,
/// and whether it is a UDP datagram (by the IP protocol, IPv6: next header). A TCP segment's (the
/// plain fast path's hint, [`super::Gro::plain_fast`]) is the 4 bytes where
/// its TCP header's ports are (after a 20-byte IPv4 header or a 40-byte IPv6
/// one, by the IP version nibble; behind a 14-byte Ethernet header and up to
/// two VLAN tags unless `raw_ip`), XORed with the 4 before them (the low
/// bytes of the destination address). Any function of the bytes would do (a
/// hint is checked); this one tells flows apart and is the same for every
/// segment of one. A datagram's, the same bytes, is its [`tunnel_hint`].
/// `None` for a frame too short to hold them.
///
/// Read once for both fast paths: a datagram that read a plain hint and
/// then a tunnel hint repeated the EtherType and protocol tests
/// (docs/benchmarks.md, "One VXLAN flow: the header copy").
#[inline(always)]
pub(crate) fn packet_hint(frame: &[u8], raw_ip: bool) -> Option<(HintKey, bool)> {
    // One fixed-size view (no bounds check per byte read): the ports of an
    // IPv6 frame behind two tags end at byte 66. A shorter frame has at
    // most a few payload bytes and goes the full way.
    let head: &[u8; 72] = frame.first_chunk()?;
    // The usual frame, untagged Ethernet with IPv4, at constant offsets:
    // the same bytes as below, without the version and offset selects
    // (its version nibble is not read: any function of the bytes would do).
    if !raw_ip && u16::from_ne_bytes([head[12], head[13]]) == u16::from_ne_bytes([0x08, 0x00]) {
        return Some((HintKey(ne32(head, 30) ^ ne32(head, 34)), head[14 + 9] == 17));
    }
    let l3 = if raw_ip {
        0
    } else {
        match u16::from_be_bytes([head[12], head[13]]) {
            0x0800 | 0x86DD => 14,
            _ => tagged_l3(head)?,
        }
    };
    let v6 = head[l3] >> 4 == 6;
    let (protocol, ports) = if v6 { (l3 + 6, l3 + 40) } else { (l3 + 9, l3 + 20) };
    Some((HintKey(ne32(head, ports - 4) ^ ne32(head, ports)), head[protocol] == 17))
}

/// The hint of a UDP datagram (a tunnel packet, for `Gro::tunnel_fast`),
/// [`packet_hint`]'s: there the outer UDP ports and the low bytes of the
/// outer destination address, so a tunnel flow's hint is the same for every
/// segment and flows whose outer source ports differ in one byte (a tunnel
/// endpoint derives the port from the inner flow's hash) never share an
/// entry. `None` where the IP protocol is not UDP.
#[inline(always)]
pub(crate) fn tunnel_hint(frame: &[u8], raw_ip: bool) -> Option<Hint> {
    packet_hint(frame, raw_ip).and_then(|(k, udp)| udp.then(|| k.hint()))
}

/// Where the IP header of a frame with one or two VLAN tags starts (`None`
/// for anything else). Out of line: untagged frames, the common case, only
/// compare their EtherType.
#[cold]
#[inline(never)]
fn tagged_l3(head: &[u8; 72]) -> Option<usize> {
    let is_tpid = |at: usize| matches!(u16::from_be_bytes([head[at], head[at + 1]]), 0x8100 | 0x88A8 | 0x9100);
    match (is_tpid(12), is_tpid(16)) {
        (true, false) => Some(18),
        (true, true) => Some(22),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Hint, SlotHints, packet_hint, tunnel_hint};

    /// The hint of a TCP segment (or anything but a datagram).
    fn plain_hint(frame: &[u8], raw_ip: bool) -> Option<Hint> {
        packet_hint(frame, raw_ip).and_then(|(k, udp)| (!udp).then(|| k.hint()))
    }

    #[test]
    fn a_noted_slot_is_found_under_its_hint_until_another_key_takes_its_entry() {
        let mut h = SlotHints::default();
        assert_eq!(h.slot(Hint::of(7)), u32::MAX);
        h.note(Hint::of(7), 3);
        assert_eq!(h.slot(Hint::of(7)), 3);
        // Keys that differ in one byte have entries of their own.
        assert!((1..=255u32).all(|b| Hint::of(7 ^ b << 8) != Hint::of(7)));
        h.note(Hint::of(7 ^ 0x0101), 5);
        assert_eq!(h.slot(Hint::of(7)), 5);
    }

    #[test]
    fn the_tunnel_hint_reads_the_same_bytes_of_udp_only() {
        let mut v4 = vec![0u8; 100];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[14] = 0x45;
        v4[14 + 9] = 17;
        v4[30..34].copy_from_slice(&[1, 2, 3, 4]);
        v4[34..38].copy_from_slice(&[0x4E, 0x20, 0x12, 0xB5]);
        let k = Hint::of(u32::from_ne_bytes([1 ^ 0x4E, 2 ^ 0x20, 3 ^ 0x12, 4 ^ 0xB5]));
        assert_eq!(tunnel_hint(&v4, false), Some(k));
        assert_eq!(plain_hint(&v4, false), None, "UDP has no plain hint");
        assert_eq!(tunnel_hint(&v4[14..], true), Some(k), "raw IP");
        v4[14 + 9] = 6;
        assert_eq!(tunnel_hint(&v4, false), None, "TCP has no tunnel hint");
        assert!(plain_hint(&v4, false).is_some());
    }

    #[test]
    fn the_plain_hint_reads_the_ports_by_ip_version_tags_and_medium() {
        let mut v4 = vec![0u8; 100];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[14] = 0x45;
        v4[14 + 9] = 6;
        v4[30..34].copy_from_slice(&[1, 2, 3, 4]);
        v4[34..38].copy_from_slice(&[5, 6, 7, 8]);
        let k = plain_hint(&v4, false).expect("long enough");
        assert_eq!(k, Hint::of(u32::from_ne_bytes([1 ^ 5, 2 ^ 6, 3 ^ 7, 4 ^ 8])));
        assert_eq!(plain_hint(&v4[14..], true), Some(k));
        assert_eq!(plain_hint(&v4[..71], false), None);
        let mut udp4 = v4.clone();
        udp4[14 + 9] = 17;
        assert_eq!(plain_hint(&udp4, false), None, "UDP over IPv4");
        assert_eq!(plain_hint(&udp4[14..], true), None, "UDP over IPv4, raw IP");
        let mut tagged = vec![0u8; 108];
        tagged[12..14].copy_from_slice(&[0x88, 0xA8]);
        tagged[16..18].copy_from_slice(&[0x81, 0x00]);
        tagged[22..].copy_from_slice(&v4[14..]);
        assert_eq!(plain_hint(&tagged, false), Some(k), "behind two tags");
        let mut v6 = vec![0u8; 14 + 40 + 20];
        v6[12..14].copy_from_slice(&[0x86, 0xDD]);
        v6[14] = 0x60;
        v6[54] = 9;
        assert_eq!(plain_hint(&v6, false), Some(Hint::of(u32::from_ne_bytes([9, 0, 0, 0]))));
        v6[14 + 6] = 17;
        assert_eq!(plain_hint(&v6, false), None, "UDP");
        assert_eq!(plain_hint(&[], true), None);
        v4[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(plain_hint(&v4, false), None, "not IP");
    }
}
