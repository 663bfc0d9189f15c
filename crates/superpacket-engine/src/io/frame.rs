//! What every endpoint with virtio_net_hdr framing shares, whatever moves
//! the bytes (a TAP or TUN queue, an AF_PACKET socket): the frames of a
//! batched send ([`FrameSource`]) and a VLAN tag the kernel kept out of the
//! bytes ([`VlanInfo`]).

use superpacket::packet::virtio::VirtioNetHdr;

/// A VLAN tag the kernel stripped into skb metadata (from `PACKET_AUXDATA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanInfo {
    /// Tag control information (PCP, DEI, VID).
    pub tci: u16,
    /// TPID (0x8100 or 0x88A8); 0 if the kernel did not report it.
    pub tpid: u16,
}

/// Frames for a batched send (`PacketSocket::send_batch`), borrowed for `'a`: frame `i` is
/// [`FrameSource::header`] followed by the slices [`FrameSource::parts`]
/// gives, in order.
pub trait FrameSource<'a> {
    /// Number of frames.
    fn len(&self) -> usize;
    /// True if there is no frame.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The virtio_net_hdr of frame `i`.
    fn header(&self, i: usize) -> VirtioNetHdr;
    /// Calls `part` with each slice of frame `i`, in order.
    fn parts(&self, i: usize, part: &mut dyn FnMut(&'a [u8]));
}

/// Frames given as (header, parts) pairs: `&[(hdr, &[&[u8]])]`.
impl<'a> FrameSource<'a> for [(VirtioNetHdr, &'a [&'a [u8]])] {
    fn len(&self) -> usize {
        <[_]>::len(self)
    }
    fn header(&self, i: usize) -> VirtioNetHdr {
        self[i].0
    }
    fn parts(&self, i: usize, part: &mut dyn FnMut(&'a [u8])) {
        for p in self[i].1 {
            part(p);
        }
    }
}
