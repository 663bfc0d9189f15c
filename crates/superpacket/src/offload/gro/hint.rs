//! Where a flow's packets went last: a hint for the fast paths
//! (`Gro::plain_fast`, `Gro::tunnel_fast`), which check what they find there
//! against the packet ([`super::template::Template`]) before they use it.

/// Entries of [`SlotHints`].
const ENTRIES: usize = 64;

/// Which aggregate the last packets went to: for each key (a few header
/// bytes that tell flows apart: a tunnel's outer UDP source port, which a
/// tunnel endpoint derives from the inner flow's hash; a plain packet's
/// [`plain_key`]), hashed to one of 64 entries, the flow table slot of the
/// last one's aggregate. A hint only: a fast path checks the aggregate it
/// finds there (held, in the packet's bucket, the packet's template).
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
    /// Fibonacci hashing: the top bits of the key times 2^32 / phi, so that
    /// keys differing in any bit spread over the entries.
    #[inline]
    fn entry(key: u32) -> usize {
        (key.wrapping_mul(0x9E37_79B9) >> (32 - ENTRIES.trailing_zeros())) as usize
    }

    /// The slot of the aggregate the last packet with `key` went to
    /// (`u32::MAX` if none yet: no slot has it).
    #[inline]
    pub(crate) fn slot(&self, key: u32) -> u32 {
        self.slots[Self::entry(key)]
    }

    /// A packet with `key` went to the aggregate in `slot`.
    #[inline]
    pub(crate) fn note(&mut self, key: u32, slot: u32) {
        self.slots[Self::entry(key)] = slot;
    }
}

/// The hint key of a plain packet, read without parsing it: the 4 bytes
/// where a TCP header's ports are (after a 20-byte IPv4 header or a 40-byte
/// IPv6 one, by the IP version nibble; behind a 14-byte Ethernet header and
/// up to two VLAN tags unless `raw_ip`), XORed with the 4 before them (the
/// low bytes of the destination address). Any function of the bytes would
/// do (the key only picks a hint, which is checked); this one tells flows
/// apart and is the same for every segment of one. `None` for a frame too
/// short to hold them, and where the IP protocol (IPv6: next header) says
/// UDP: a datagram, to a tunnel port or not, does not try the plain fast
/// path (which takes only TCP).
#[inline(always)]
pub(crate) fn plain_key(frame: &[u8], raw_ip: bool) -> Option<u32> {
    let mut l3 = 0;
    if !raw_ip {
        l3 = 14;
        while l3 < 22 && matches!(frame.get(l3 - 2..l3)?, [0x81, 0x00] | [0x88, 0xA8] | [0x91, 0x00]) {
            l3 += 4;
        }
    }
    let v6 = frame.get(l3)? >> 4 == 6;
    let (protocol, ports) = if v6 { (l3 + 6, l3 + 40) } else { (l3 + 9, l3 + 20) };
    let b = frame.get(ports - 4..ports + 4)?;
    if frame[protocol] == 17 {
        return None;
    }
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) ^ u32::from_ne_bytes([b[4], b[5], b[6], b[7]]))
}

#[cfg(test)]
mod tests {
    use super::{SlotHints, plain_key};

    #[test]
    fn a_noted_slot_is_found_under_its_key_until_another_key_takes_its_entry() {
        let mut h = SlotHints::default();
        assert_eq!(h.slot(7), u32::MAX);
        h.note(7, 3);
        assert_eq!(h.slot(7), 3);
        // Some key among the next 64 shares the entry (64 entries).
        let other = (8..8 + 65).find(|&k| SlotHints::entry(k) == SlotHints::entry(7)).expect("pigeonhole");
        h.note(other, 5);
        assert_eq!(h.slot(7), 5);
    }

    #[test]
    fn the_plain_key_reads_the_ports_by_ip_version_and_medium() {
        let mut v4 = vec![0u8; 14 + 20 + 20];
        v4[14] = 0x45;
        v4[14 + 9] = 6;
        v4[30..34].copy_from_slice(&[1, 2, 3, 4]);
        v4[34..38].copy_from_slice(&[5, 6, 7, 8]);
        let k = plain_key(&v4, false).expect("long enough");
        assert_eq!(k, u32::from_ne_bytes([1 ^ 5, 2 ^ 6, 3 ^ 7, 4 ^ 8]));
        assert_eq!(plain_key(&v4[14..], true), Some(k));
        let mut v6 = vec![0u8; 14 + 40 + 20];
        v6[14] = 0x60;
        v6[54] = 9;
        assert_eq!(plain_key(&v6, false), Some(u32::from_ne_bytes([9, 0, 0, 0])));
        v6[14 + 6] = 17;
        assert_eq!(plain_key(&v6, false), None, "UDP");
        assert_eq!(plain_key(&v4[..37], false), None);
        let mut tagged = vec![0u8; 14 + 8 + 20 + 20];
        tagged[12..14].copy_from_slice(&[0x88, 0xA8]);
        tagged[16..18].copy_from_slice(&[0x81, 0x00]);
        tagged[22..].copy_from_slice(&v4[14..]);
        assert_eq!(plain_key(&tagged, false), Some(k), "behind two tags");
        assert_eq!(plain_key(&[], true), None);
    }
}
