//! Where a queue keeps its data (offload-rules 5.1, "Coalescing").
//!
//! - `Coalesced` (local delivery): one datagram buffer. Each fragment's
//!   payload is copied into place as it is accepted and the fragment's packet
//!   (its receive buffer) is released at once, so buffers go back to the
//!   port's ring while the datagram is incomplete. The buffer starts with
//!   [`RESERVE`] bytes where the first fragment's L2 and IP headers are
//!   written, right in front of the payload, so the result is one contiguous
//!   frame with headroom. It is sized once when the length is known (the
//!   last fragment, or the UDP length of the first fragment as a hint) and
//!   grows geometrically otherwise, never beyond `RESERVE + 65535`; in-order
//!   arrival appends without zero-filling.
//! - `Held` (forwarding): the fragments' packets, ordered by offset,
//!   chained on the result's frag list; nothing is copied, and the geometry
//!   (largest fragment) is kept for re-fragmentation.

use super::MAX_DATAGRAM;
use crate::packet::Packet;

/// Bytes in front of the payload for the first fragment's headers (L2 with
/// up to 8 VLAN tags + IPv4 with options fits; larger IPv6 header chains go
/// to a side buffer).
pub const RESERVE: usize = 256;
/// Smallest buffer allocated without a length hint.
const MIN_ALLOC: usize = 2048;

/// A coalescing datagram buffer.
#[derive(Debug, Default)]
pub(crate) struct Coalesced {
    /// `[RESERVE bytes: headers at hdr_at..RESERVE][payload ...]`; its length
    /// is `RESERVE + highest byte written`.
    buf: Vec<u8>,
    /// Headers longer than [`RESERVE`] (rare: long IPv6 header chains).
    big_header: Vec<u8>,
    /// Length of the stored headers (0 until the first fragment arrives).
    hdr_len: usize,
}

impl Coalesced {
    /// Memory held (charged to the queue).
    pub fn charge(&self) -> usize {
        self.buf.capacity() + self.big_header.capacity()
    }

    /// Copies `data` to payload offset `offset`. `target` is the capacity to
    /// allocate if the buffer must grow (payload bytes; 0 = unknown).
    #[inline]
    pub fn place(&mut self, data: &[u8], offset: usize, target: usize) {
        let at = RESERVE + offset;
        let need = at + data.len();
        if need > self.buf.capacity() {
            let geometric = (self.buf.capacity() * 2).max(RESERVE + MIN_ALLOC);
            let want = if target > 0 { RESERVE + target } else { geometric };
            let want = want.max(need).min(RESERVE + MAX_DATAGRAM).max(need);
            self.buf.reserve_exact(want - self.buf.len());
        }
        if self.buf.len() < RESERVE {
            self.buf.resize(RESERVE, 0);
        }
        let len = self.buf.len();
        if at >= len {
            self.buf.resize(at, 0);
            self.buf.extend_from_slice(data);
        } else {
            let inside = (len - at).min(data.len());
            self.buf[at..at + inside].copy_from_slice(&data[..inside]);
            self.buf.extend_from_slice(&data[inside..]);
        }
    }

    /// Stores the first fragment's headers (L2 through the last IP header before the data).
    pub fn set_header(&mut self, hdr: &[u8]) {
        if self.buf.len() < RESERVE {
            self.buf.reserve(RESERVE + MIN_ALLOC);
            self.buf.resize(RESERVE, 0);
        }
        self.hdr_len = hdr.len();
        if hdr.len() <= RESERVE {
            self.buf[RESERVE - hdr.len()..RESERVE].copy_from_slice(hdr);
        } else {
            self.big_header.clear();
            self.big_header.extend_from_slice(hdr);
        }
    }

    /// The stored headers followed by up to `n` payload bytes (for an ICMP quote).
    pub fn header_and_payload(&self, n: usize) -> Vec<u8> {
        let mut v = self.header().to_vec();
        let end = self.buf.len().min(RESERVE + n);
        v.extend_from_slice(&self.buf[RESERVE.min(end)..end]);
        v
    }

    fn header(&self) -> &[u8] {
        if self.hdr_len > RESERVE { &self.big_header } else { &self.buf[RESERVE - self.hdr_len..RESERVE] }
    }

    /// The finished frame: a buffer with the headers at `start` followed by
    /// `payload_len` payload bytes (which must all have been placed).
    pub fn into_frame(self, payload_len: usize) -> (Vec<u8>, usize) {
        let Coalesced { mut buf, big_header, hdr_len } = self;
        debug_assert_eq!(buf.len(), RESERVE + payload_len);
        if hdr_len <= RESERVE {
            return (buf, RESERVE - hdr_len);
        }
        let headroom = crate::packet::DEFAULT_HEADROOM;
        let mut v = Vec::with_capacity(headroom + hdr_len + payload_len);
        v.resize(headroom, 0);
        v.extend_from_slice(&big_header);
        v.extend_from_slice(&buf[RESERVE..]);
        buf.clear();
        (v, headroom)
    }
}

/// One held fragment.
#[derive(Debug)]
pub(crate) struct HeldFrag {
    /// Payload offset in the datagram.
    pub offset: u32,
    /// Payload bytes used (after rounding down).
    pub len: u32,
    /// Offset of the payload in the packet's linear area.
    pub data_start: usize,
    /// The fragment.
    pub packet: Packet,
}

/// Fragments held whole, ordered by offset.
#[derive(Debug, Default)]
pub(crate) struct Held {
    pub frags: Vec<HeldFrag>,
    truesize: usize,
}

impl Held {
    /// Memory held: every fragment's truesize and the list.
    pub fn charge(&self) -> usize {
        self.truesize + self.frags.capacity() * std::mem::size_of::<HeldFrag>()
    }

    /// Adds a fragment (never overlapping one already held).
    pub fn insert(&mut self, f: HeldFrag) {
        self.truesize += f.packet.truesize();
        let i = self.frags.partition_point(|h| h.offset < f.offset);
        self.frags.insert(i, f);
    }

    /// The fragment at offset 0, if held.
    pub fn first(&self) -> Option<&HeldFrag> {
        self.frags.first().filter(|f| f.offset == 0)
    }
}
