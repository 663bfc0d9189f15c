//! The two output forms and the sink that receives them.
//!
//! - **Scatter-gather** ([`SgFrame`]): a header owned by the segmenter plus
//!   payload slices borrowed from the superpacket, for targets that take
//!   iovecs (TAP `writev`, AF_PACKET `sendmsg`). No payload copy; the sink
//!   must use the frame before returning (the header buffer is rewritten for
//!   the next segment).
//! - **Linear**: the whole frame written into a buffer the sink lends
//!   ([`SegmentSink::linear_buffer`]), the payload copied and checksummed
//!   in one pass, for targets that take one buffer per frame.
//!
//! A payload cursor walks a packet's payload (linear area, segments, then
//! the frag list) and hands out slices or copies segment by segment.

use crate::csum::{copy_and_sum, ones_add, ones_sum, ones_sum_at};
use crate::packet::{OffloadMeta, Packet};
use crate::wire::Medium;

/// Most payload slices in one [`SgFrame`]; a segment spread over more
/// buffers is emitted in linear form instead (never happens with the
/// packets GRO or a TAP produce: a segment spans a handful of buffers).
pub const MAX_SG_SLICES: usize = 64;

/// One output frame in scatter-gather form.
#[derive(Debug, Clone, Copy)]
pub struct SgFrame<'a> {
    /// The frame's headers (L2 to L4), fixed for this segment.
    pub header: &'a [u8],
    /// The payload, in order, borrowed from the superpacket.
    pub payload: &'a [&'a [u8]],
    /// Metadata of the frame (checksum state; never GSO).
    pub meta: OffloadMeta,
}

impl<'a> SgFrame<'a> {
    /// Frame length.
    pub fn len(&self) -> usize {
        self.header.len() + self.payload.iter().map(|s| s.len()).sum::<usize>()
    }

    /// True if the frame holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame as iovec-style chunks: the header, then the payload slices.
    pub fn chunks(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        std::iter::once(self.header).chain(self.payload.iter().copied())
    }

    /// Copies the frame into `out` (replacing its content).
    pub fn copy_to(&self, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.len());
        for c in self.chunks() {
            out.extend_from_slice(c);
        }
    }
}

/// Receives the segmenter's output for one target.
pub trait SegmentSink {
    /// The target takes `packet` as it is, with metadata `meta` (for a
    /// superpacket: DODGY validated away and `gso_segs` recomputed).
    /// `packet` is always the packet given to
    /// [`Segmenter::segment`](super::Segmenter::segment), unchanged, and
    /// this is the call's only output: a sink may just note `meta` and take
    /// that packet by value once `segment` returned (the device graph does,
    /// so a superpacket is never copied on its way to a port).
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta);
    /// One frame in scatter-gather form (only for targets with SG).
    fn sg_frame(&mut self, frame: &SgFrame<'_>);
    /// Lends a buffer of exactly `len` bytes for the next linear frame.
    fn linear_buffer(&mut self, len: usize) -> &mut [u8];
    /// The buffer last lent holds a complete frame of `len` bytes.
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta);
}

/// How an [`OutFrame`] was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutKind {
    /// The packet as it came (its frag-list packets' bytes appended).
    PassThrough,
    /// A scatter-gather frame, copied by the sink.
    Sg,
    /// A linear frame.
    Linear,
}

/// One frame collected by [`VecSink`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFrame {
    /// The frame's bytes.
    pub data: Vec<u8>,
    /// Its metadata.
    pub meta: OffloadMeta,
    /// How it was produced.
    pub kind: OutKind,
}

/// A sink that copies every frame into an owned vector: for tests, the CLI
/// and anything that is not a hot path.
#[derive(Debug, Default)]
pub struct VecSink {
    /// Frames in output order.
    pub frames: Vec<OutFrame>,
    buf: Vec<u8>,
}

impl VecSink {
    /// An empty sink.
    pub fn new() -> VecSink {
        VecSink::default()
    }
}

impl SegmentSink for VecSink {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        let mut data = Vec::new();
        packet.copy_all_to(&mut data);
        self.frames.push(OutFrame { data, meta: *meta, kind: OutKind::PassThrough });
    }

    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        let mut data = Vec::new();
        frame.copy_to(&mut data);
        self.frames.push(OutFrame { data, meta: frame.meta, kind: OutKind::Sg });
    }

    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.clear();
        self.buf.resize(len, 0);
        &mut self.buf
    }

    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        let mut data = std::mem::take(&mut self.buf);
        data.truncate(len);
        self.frames.push(OutFrame { data, meta: *meta, kind: OutKind::Linear });
    }
}

/// The `j`-th chunk of a packet: 0 = linear area, then its segments.
#[inline]
fn chunk_of(p: &Packet, j: usize) -> Option<&[u8]> {
    if j == 0 { Some(p.linear()) } else { p.segments().get(j - 1).map(|s| s.as_slice()) }
}

/// A position in a packet's payload: the head's chunks from a start offset,
/// then each frag-list packet's chunks (from its own payload offset when
/// `frag_headers`, else from its first byte).
#[derive(Debug, Clone)]
pub(crate) struct PayloadCursor<'a> {
    pkt: &'a Packet,
    /// 0 = the head, k >= 1 = `frag_list[k - 1]`.
    part: usize,
    /// Chunk index inside the current part.
    chunk: usize,
    /// Offset inside the current chunk.
    pos: usize,
    /// The current chunk's bytes from `pos` (empty once it is used up):
    /// what [`PayloadCursor::take_contiguous`] cuts from without finding
    /// the chunk again, once per segment.
    rest: &'a [u8],
    frag_headers: bool,
    /// The head packet's medium (frag-list packets' headers are probed
    /// against the head's).
    medium: Medium,
}

impl<'a> PayloadCursor<'a> {
    /// A cursor at byte `skip` of the head packet, a packet of `medium`.
    pub(crate) fn new(pkt: &'a Packet, skip: usize, frag_headers: bool, medium: Medium) -> PayloadCursor<'a> {
        let mut c = PayloadCursor { pkt, part: 0, chunk: 0, pos: 0, rest: pkt.linear(), frag_headers, medium };
        c.skip(skip);
        c
    }

    fn current_part(&self) -> Option<&'a Packet> {
        if self.part == 0 { Some(self.pkt) } else { self.pkt.frag_list().get(self.part - 1) }
    }

    /// Skips `n` bytes of the current part.
    fn skip(&mut self, mut n: usize) {
        while n > 0 {
            match self.next_in_part(n) {
                Some(s) => n -= s.len(),
                None => return,
            }
        }
    }

    /// Up to `max` bytes from the current part, or `None` at its end.
    fn next_in_part(&mut self, max: usize) -> Option<&'a [u8]> {
        self.rest = &[];
        let p = self.current_part()?;
        loop {
            let c = chunk_of(p, self.chunk)?;
            if self.pos < c.len() {
                let n = (c.len() - self.pos).min(max);
                let s = &c[self.pos..self.pos + n];
                self.pos += n;
                self.rest = &c[self.pos..];
                return Some(s);
            }
            self.chunk += 1;
            self.pos = 0;
        }
    }

    /// The next slice of at most `max` (> 0) bytes, or `None` at the end of the payload.
    pub(crate) fn next_slice(&mut self, max: usize) -> Option<&'a [u8]> {
        loop {
            if let Some(s) = self.next_in_part(max) {
                return Some(s);
            }
            self.part += 1;
            self.chunk = 0;
            self.pos = 0;
            let p = self.current_part()?;
            if self.frag_headers {
                self.skip(super::fraglist::payload_offset(self.pkt, p, self.medium));
            }
        }
    }

    /// The next `len` bytes as one slice when the current chunk holds them
    /// all (the common case: a superpacket's payload in one buffer, so
    /// every segment's payload is a sub-slice of it); the cursor moves past
    /// them. `None` leaves the cursor unchanged: the bytes span chunks (or
    /// the current chunk is used up), and the general walk must gather them.
    #[inline]
    fn take_contiguous(&mut self, len: usize) -> Option<&'a [u8]> {
        let (s, rest) = self.rest.split_at_checked(len)?;
        self.rest = rest;
        self.pos += len;
        Some(s)
    }

    /// Collects the next `len` bytes as slices into `out`; returns the slice
    /// count and, with `sum`, their ones' complement sum (even parity at the
    /// first byte). `None` if more than `out.len()` slices are needed or the
    /// payload ends first; the cursor is then where it was (the caller can
    /// copy the same bytes instead).
    #[inline(always)]
    pub(crate) fn gather(&mut self, len: usize, out: &mut [&'a [u8]], sum: bool) -> Option<(usize, u16)> {
        // One slice, summed whole: no walk, no parity bookkeeping, no copy
        // of the cursor to restore; inlined into the per-segment loop.
        if !out.is_empty()
            && let Some(s) = self.take_contiguous(len)
        {
            out[0] = s;
            return Some((1, if sum { ones_sum(s) } else { 0 }));
        }
        self.gather_walk(len, out, sum)
    }

    /// [`PayloadCursor::gather`] across chunks and parts: the general walk.
    #[inline(never)]
    fn gather_walk(&mut self, len: usize, out: &mut [&'a [u8]], sum: bool) -> Option<(usize, u16)> {
        let saved = self.clone();
        let mut n = 0;
        let mut got = 0;
        let mut psum = 0u16;
        while got < len {
            let next = self.next_slice(len - got);
            let (Some(s), true) = (next, n < out.len()) else {
                *self = saved;
                return None;
            };
            if sum {
                psum = ones_add(psum, ones_sum_at(s, got));
            }
            out[n] = s;
            n += 1;
            got += s.len();
        }
        Some((n, psum))
    }

    /// Copies the next `dst.len()` bytes into `dst`, returning their sum
    /// (with `sum`; fused with the copy) at even parity.
    #[inline(always)]
    pub(crate) fn copy_into(&mut self, dst: &mut [u8], sum: bool) -> u16 {
        // One source slice: one fused copy and sum, no walk; inlined into
        // the per-segment loop like `gather`.
        if let Some(s) = self.take_contiguous(dst.len()) {
            if sum {
                return copy_and_sum(dst, s);
            }
            dst.copy_from_slice(s);
            return 0;
        }
        self.copy_walk(dst, sum)
    }

    /// [`PayloadCursor::copy_into`] across chunks and parts.
    #[inline(never)]
    fn copy_walk(&mut self, dst: &mut [u8], sum: bool) -> u16 {
        let mut got = 0;
        let mut psum = 0u16;
        while got < dst.len() {
            let Some(s) = self.next_slice(dst.len() - got) else { break };
            let d = &mut dst[got..got + s.len()];
            if sum {
                let part = copy_and_sum(d, s);
                psum = ones_add(psum, if got % 2 == 1 { part.swap_bytes() } else { part });
            } else {
                d.copy_from_slice(s);
            }
            got += s.len();
        }
        // A plan never asks for more than the superpacket holds; were it
        // to, the frame's rest is zeros, not bytes an earlier frame left
        // in the sink's buffer or the header template.
        dst[got..].fill(0);
        psum
    }
}

/// Copies a header block (`src`, as long as `dst`) without a call to
/// `memcpy` and, up to 128 bytes, without a loop: a block of `n` bytes with
/// `w <= n <= 2w` (`w` one of 16, 32, 64) is its first `w` bytes and its
/// last `w` bytes, two fixed-size moves that overlap in the middle. A
/// frame's header block is a few dozen bytes (66 for TCP/IPv4 with
/// timestamps, 116 for the same in VXLAN over IPv4), for which the library
/// call and its size dispatch, or a loop of 16-byte moves, cost more than the
/// copy (linear GSO output copies one per segment). Longer blocks take
/// 64-byte moves and one overlapping last move; shorter than 16 bytes, the
/// plain copy.
///
/// # Panics
/// If the lengths differ (a programming error).
#[inline(always)]
pub(crate) fn copy_header(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n, "copy_header needs equal lengths");
    match n {
        0..16 => dst.copy_from_slice(src),
        16..=32 => copy_ends::<16>(dst, src),
        33..=64 => copy_ends::<32>(dst, src),
        65..=128 => copy_ends::<64>(dst, src),
        _ => {
            for at in (0..n - 64).step_by(64) {
                copy_at::<64>(dst, src, at);
            }
            copy_at::<64>(dst, src, n - 64);
        }
    }
}

/// Bytes [`copy_header_block`] moves in one fixed-size copy.
pub(crate) const HEADER_BLOCK: usize = 128;

/// Writes the header block `template[..hl]` to the start of `frame`, a
/// whole linear frame whose bytes after `hl` (the payload) the caller
/// writes next. When the frame and the template hold at least
/// [`HEADER_BLOCK`] bytes and the block is not longer, the template's
/// first [`HEADER_BLOCK`] bytes go over as one fixed-size copy, with no
/// dispatch on `hl` (once per segment of linear GSO output): the bytes
/// past `hl` it writes lie in the payload area and are overwritten by the
/// payload. Otherwise [`copy_header`].
///
/// # Panics
/// If `frame` or `template` is shorter than `hl` (a programming error).
#[inline(always)]
pub(crate) fn copy_header_block(frame: &mut [u8], template: &[u8], hl: usize) {
    if hl <= HEADER_BLOCK && frame.len() >= HEADER_BLOCK && template.len() >= HEADER_BLOCK {
        copy_at::<HEADER_BLOCK>(frame, template, 0);
    } else {
        copy_header(&mut frame[..hl], &template[..hl]);
    }
}

/// Copies the first and the last `W` bytes of `src` (as long as `dst`, at
/// least `W` and at most `2 * W` bytes: then that is all of it).
#[inline(always)]
fn copy_ends<const W: usize>(dst: &mut [u8], src: &[u8]) {
    copy_at::<W>(dst, src, 0);
    copy_at::<W>(dst, src, src.len() - W);
}

/// Copies the `W` bytes at `at` of `src` into `dst` as one fixed-size move.
#[inline(always)]
fn copy_at<const W: usize>(dst: &mut [u8], src: &[u8], at: usize) {
    let s: &[u8; W] = src[at..at + W].try_into().expect("W bytes at `at`");
    <&mut [u8; W]>::try_from(&mut dst[at..at + W]).expect("W bytes at `at`").copy_from_slice(s);
}
