//! Header templates (offload-rules 1.3, 2.6): one masked compare of a TCP
//! segment's headers against its aggregate's first packet's, which settles
//! the flow identity and every rule that wants a field equal to the first
//! packet's. The fast paths (`Gro::plain_fast`, `Gro::tunnel_fast`) use it
//! to skip the parse, the flow key and the lookup of a segment that joins
//! the aggregate its flow went to last; the full path stays the reference.

use super::flow::Held;
use super::tunnel::TunnelIn;

/// Header bytes a template covers at most: a VXLAN frame with IPv6 outer and
/// inner headers and TCP timestamps (14 + 40 + 8 + 8 + 14 + 40 + 32 = 156)
/// fits.
pub const TEMPLATE_BYTES: usize = 160;

/// Words of a template.
const TEMPLATE_WORDS: usize = TEMPLATE_BYTES / 8;

/// Words of the short fixed-size compare: a plain frame's headers up to
/// IPv6 with TCP timestamps and one tag (14 + 4 + 40 + 32 = 90 bytes) fit.
const PLAIN_WORDS: usize = 12;

/// The header layout of a TCP aggregate, as far as its template depends on
/// it: the offsets of the IP and TCP headers and of the payload, the IP
/// version, and for a tunnel aggregate the offsets of the outer IP and UDP
/// headers and the outer IP version; each offset below [`TEMPLATE_BYTES`]
/// (packed in one word; [`Shape::NONE`] when not: no template, every packet
/// takes the full path).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shape(u64);

impl Shape {
    /// No template.
    pub const NONE: Shape = Shape(0);

    /// Marks a plain aggregate's layout (no outer level).
    const PLAIN: u64 = 1 << 62;

    /// The layout of a new tunnel aggregate `p` (its inner offsets written)
    /// whose outer headers are `t`.
    #[inline]
    pub(crate) fn tunnel(t: &TunnelIn, p: &Held) -> Shape {
        Self::pack([t.outer_l3 as usize, t.outer_l4 as usize, p.l3, p.l4, p.payload], t.outer_v6, p)
    }

    /// The layout of a new plain aggregate `p` (its offsets written).
    #[inline]
    pub(crate) fn plain(p: &Held) -> Shape {
        let s = Self::pack([0, 0, p.l3, p.l4, p.payload], false, p);
        if s == Shape::NONE { s } else { Shape(s.0 | Self::PLAIN) }
    }

    #[inline]
    fn pack(offsets: [usize; 5], outer_v6: bool, p: &Held) -> Shape {
        if !p.tcp || p.payload > TEMPLATE_BYTES {
            return Shape::NONE;
        }
        Shape(Self::word(offsets, outer_v6, p.v6))
    }

    /// The packed word of a layout: the template mark, the IP versions and
    /// the five offsets, one byte each (below 256 for the word to hold
    /// them).
    #[inline(always)]
    fn word(offsets: [usize; 5], outer_v6: bool, v6: bool) -> u64 {
        let packed = offsets.iter().fold(0u64, |acc, &o| acc << 8 | o as u64);
        1 << 63 | (outer_v6 as u64) << 41 | (v6 as u64) << 40 | packed
    }

    /// Whether this is the shape of a tunnel aggregate whose outer IP and
    /// UDP headers are at `outer_l3` and `outer_l4`, inner IP and TCP
    /// headers at `l3` and `l4` (each below 256), of IP versions `outer_v6`
    /// and `v6`, whatever its payload offset (so never for
    /// [`Shape::NONE`]). One masked compare of the packed word against a
    /// constant (for constant arguments), cheaper than comparing the
    /// aggregate's six layout fields (docs/benchmarks.md, "One VXLAN flow: the header copy").
    #[inline(always)]
    pub(crate) fn is_tunnel_layout(self, [outer_l3, outer_l4, l3, l4]: [usize; 4], outer_v6: bool, v6: bool) -> bool {
        // The payload offset is the word's low byte.
        let want = Self::word([outer_l3, outer_l4, l3, l4, 0], outer_v6, v6);
        self.0 & !0xFF == want && [outer_l3, outer_l4, l3, l4].iter().all(|&o| o < 256)
    }

    /// The offsets and versions packed in `pack`, and whether there is an
    /// outer level.
    fn unpack(self) -> ([usize; 5], bool, bool, bool) {
        let w = self.0;
        let at = |i: u32| ((w >> (32 - 8 * i)) & 0xFF) as usize;
        ([at(0), at(1), at(2), at(3), at(4)], w >> 41 & 1 != 0, w >> 40 & 1 != 0, w & Self::PLAIN == 0)
    }
}

/// A header template: a mask over a TCP aggregate's first packet's header
/// bytes (from the start of the frame to the end of the (inner) TCP header,
/// in 8-byte words) that leaves out only the fields that change from segment
/// to segment of one flow: the IP lengths, IPv4 IDs and header checksums (at
/// both levels of a tunnel), a tunnel's outer UDP length and checksum, the
/// TCP sequence number and checksum. A later packet whose masked header
/// bytes are equal to the aggregate's has the same flow identity at every
/// level (offload-rules 1.1 flow key, 2.6: every identity byte is covered),
/// the same header offsets, and the same values in every field the merge
/// rules want equal to the first packet's (1.3 (a) word 3 with FIN and PSH
/// clear, (b) TTL, TOS and DF or traffic class and hop limit, (c) ACK, (d)
/// options; an IPv4 header equal in its flags and offset bytes is no
/// fragment and has no reserved flag, since the first one had neither).
/// Those it still must pass (IDs, sequence, lengths, checksums) are checked
/// as for any packet. One per header layout ([`Shape`]), shared by the
/// aggregates that have it ([`Templates`]).
///
/// Aligned to 16 bytes, the mask first: its 16-byte halves are then operands
/// of the vector AND straight from memory (an SSE2 memory operand must be
/// aligned), instead of loads of their own, 8 fewer instructions per compare
/// of 128 bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
pub struct Template {
    mask: [u64; TEMPLATE_WORDS],
    /// Words in use (at least one).
    words: u8,
    /// The template covers at most 128 bytes and the CPU has AVX2
    /// (detected once, when the template is built): the tunnel compare is
    /// then four 32-byte lines ([`masked_equal_128_avx2`]), after one test.
    avx2_128: bool,
}

impl Template {
    /// The template of layout `shape` (not [`Shape::NONE`]).
    fn of(shape: Shape) -> Template {
        let ([l3, l4, il3, il4, payload], outer_v6, inner_v6, outer) = shape.unpack();
        let mut bytes = [0u8; TEMPLATE_BYTES];
        bytes[..payload].fill(0xFF);
        let mut skip = |from: usize, len: usize| bytes[from..from + len].fill(0);
        let levels = [(l3, outer_v6), (il3, inner_v6)];
        for &(at, v6) in &levels[usize::from(!outer)..] {
            if v6 {
                skip(at + 4, 2); // payload length
            } else {
                skip(at + 2, 4); // total length, ID
                skip(at + 10, 2); // header checksum
            }
        }
        if outer {
            skip(l4 + 4, 4); // UDP length, checksum
        }
        skip(il4 + 4, 4); // sequence number
        skip(il4 + 16, 2); // TCP checksum
        let mut mask = [0u64; TEMPLATE_WORDS];
        for (m, b) in mask.iter_mut().zip(bytes.as_chunks::<8>().0) {
            *m = u64::from_ne_bytes(*b);
        }
        let words = payload.div_ceil(8).max(1);
        Template { mask, words: words as u8, avx2_128: words <= 16 && has_avx2() }
    }

    /// The masked header bytes of `frame` are those of `held` (the
    /// aggregate's frame, whose headers are unchanged while it is held).
    #[inline(always)]
    pub(crate) fn matches(&self, held: &[u8], frame: &[u8]) -> bool {
        // A frame of 128 bytes or more (a segment with payload) on a CPU
        // with AVX2: the tunnel compare's four lines decide it (the mask
        // is zero past the template's words).
        if let Some(equal) = self.matches_avx2(held, frame) {
            return equal;
        }
        self.matches_words(held, frame)
    }

    /// [`Template::matches`] word by word (no AVX2 line compare: the
    /// callers tried it).
    #[inline(always)]
    fn matches_words(&self, held: &[u8], frame: &[u8]) -> bool {
        let n = self.words as usize;
        // Fixed-size compares first: the mask is zero past the template's
        // words, so comparing more bytes (both packets have them) decides
        // the same, and a loop of known length is unrolled and vectorised
        // (a plain IPv4 TCP template with timestamps: 62 instructions per
        // packet in the loop of variable length).
        if n <= PLAIN_WORDS
            && let (Some(a), Some(b)) = (held.first_chunk(), frame.first_chunk())
        {
            return self.masked_diff::<{ PLAIN_WORDS * 8 }>(a, b) == 0;
        }
        if let (Some(a), Some(b)) = (held.first_chunk(), frame.first_chunk()) {
            return self.masked_diff::<TEMPLATE_BYTES>(a, b) == 0;
        }
        let (Some(a), Some(b)) = (held.get(..n * 8), frame.get(..n * 8)) else {
            return false;
        };
        let mut diff = 0u64;
        for ((x, y), m) in a.as_chunks::<8>().0.iter().zip(b.as_chunks::<8>().0).zip(&self.mask[..n]) {
            diff |= (u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y)) & m;
        }
        diff == 0
    }

    /// [`Template::matches`] for a tunnel template: its headers are longer
    /// than a plain one's, and those of a VXLAN frame with IPv4 at both
    /// levels (14 + 20 + 8 + 8 + 14 + 20 + 32 = 116 bytes with TCP
    /// timestamps) fit a fixed 128-byte compare, 4 words fewer than
    /// [`TEMPLATE_BYTES`]. Kept apart from `matches` so that the plain fast
    /// path's code is not changed by it.
    ///
    /// With AVX2 the 128 bytes are compared as four 32-byte lines
    /// ([`masked_equal_128_avx2`]): about 20 instructions instead of
    /// about 60 for eight 16-byte ones (docs/benchmarks.md, "One VXLAN flow:
    /// the AVX2 template compare").
    #[inline(always)]
    pub(crate) fn matches_tunnel(&self, held: &[u8], frame: &[u8]) -> bool {
        const WORDS: usize = 16;
        if let Some(equal) = self.matches_avx2(held, frame) {
            return equal;
        }
        if self.words as usize <= WORDS
            && let (Some(a), Some(b)) = (held.first_chunk(), frame.first_chunk())
        {
            return self.masked_diff::<{ WORDS * 8 }>(a, b) == 0;
        }
        self.matches_words(held, frame)
    }

    /// [`Template::matches`] by [`masked_equal_128_avx2`] where it can
    /// decide it (the template fits 128 bytes, both `held` and `frame` have
    /// as many, and the CPU has AVX2); `None` otherwise.
    #[inline(always)]
    fn matches_avx2(&self, held: &[u8], frame: &[u8]) -> Option<bool> {
        #[cfg(target_arch = "x86_64")]
        if self.avx2_128
            && let (Some(a), Some(b), Some(mask)) = (held.first_chunk(), frame.first_chunk(), self.mask.first_chunk())
        {
            // SAFETY: `avx2_128` is set only where the CPU has AVX2
            // (`has_avx2`).
            return Some(unsafe { masked_equal_128_avx2(mask, a, b) });
        }
        let _ = (held, frame);
        None
    }

    /// The OR of the masked differences of the first `B` bytes of `a` and `b`.
    #[inline(always)]
    fn masked_diff<const B: usize>(&self, a: &[u8; B], b: &[u8; B]) -> u64 {
        let mut diff = 0u64;
        for ((x, y), m) in a.as_chunks::<8>().0.iter().zip(b.as_chunks::<8>().0).zip(&self.mask) {
            diff |= (u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y)) & m;
        }
        diff
    }
}

/// Whether the CPU has AVX2 (and the OS saves its registers), for
/// [`masked_equal_128_avx2`].
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `(a ^ b) & mask == 0` over 128 bytes, in four 32-byte lines: 18
/// instructions (the loads of `a` and of the mask are memory operands).
///
/// Inline assembly rather than AVX2 intrinsics: those need the caller
/// compiled for AVX2 too, or they are a call, and the caller is the burst
/// loop, built for the x86-64 baseline. The registers it uses are declared
/// clobbered (`xmmN` names the whole register, upper halves included). In
/// a build without AVX the block is followed by `vzeroupper`, so the SSE
/// code after it does not pay for dirty upper halves; it zeroes the upper
/// halves of every vector register, which only code compiled for AVX
/// could hold values in, so a build with AVX (`-C target-cpu=native`)
/// leaves it out and the compiler places its own.
///
/// # Safety
/// The CPU must have AVX2 ([`has_avx2`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn masked_equal_128_avx2(mask: &[u64; 16], a: &[u8; 128], b: &[u8; 128]) -> bool {
    let equal: u8;
    // SAFETY: the three references are 128 bytes each, all the block reads
    // (VEX memory operands need no alignment); it writes only the four
    // declared registers and the flags, and the caller vouches for AVX2.
    unsafe {
        std::arch::asm!(
            "vmovdqu ymm0, [{b}]",
            "vmovdqu ymm1, [{b} + 32]",
            "vmovdqu ymm2, [{b} + 64]",
            "vmovdqu ymm3, [{b} + 96]",
            "vpxor ymm0, ymm0, [{a}]",
            "vpxor ymm1, ymm1, [{a} + 32]",
            "vpxor ymm2, ymm2, [{a} + 64]",
            "vpxor ymm3, ymm3, [{a} + 96]",
            "vpand ymm0, ymm0, [{m}]",
            "vpand ymm1, ymm1, [{m} + 32]",
            "vpand ymm2, ymm2, [{m} + 64]",
            "vpand ymm3, ymm3, [{m} + 96]",
            "vpor ymm0, ymm0, ymm1",
            "vpor ymm2, ymm2, ymm3",
            "vpor ymm0, ymm0, ymm2",
            "vptest ymm0, ymm0",
            "setz {equal}",
            a = in(reg) a.as_ptr(),
            b = in(reg) b.as_ptr(),
            m = in(reg) mask.as_ptr(),
            equal = out(reg_byte) equal,
            out("xmm0") _,
            out("xmm1") _,
            out("xmm2") _,
            out("xmm3") _,
            options(pure, readonly, nostack),
        );
    }
    #[cfg(not(target_feature = "avx"))]
    // SAFETY: without AVX in the build no code around this holds a value in
    // a vector register's upper half, the only state `vzeroupper` changes;
    // the CPU has AVX (the caller's contract).
    unsafe {
        std::arch::asm!("vzeroupper", options(nomem, nostack, preserves_flags));
    }
    equal != 0
}

/// Templates kept at once (one per header layout in use; a receive queue
/// rarely sees more than one or two).
const TEMPLATES: usize = 4;

/// The header templates of the layouts seen last, built once per layout.
#[derive(Debug, Clone)]
pub(crate) struct Templates {
    entries: [(Shape, Template); TEMPLATES],
    next: usize,
}

impl Default for Templates {
    fn default() -> Self {
        let none = Template { mask: [0; TEMPLATE_WORDS], words: 1, avx2_128: false };
        Templates { entries: [(Shape::NONE, none); TEMPLATES], next: 0 }
    }
}

impl Templates {
    /// The template of `shape`, if it was built and is still kept
    /// ([`Shape::NONE`] has none).
    #[inline]
    pub(crate) fn get(&self, shape: Shape) -> Option<&Template> {
        if shape == Shape::NONE {
            return None;
        }
        self.entries.iter().find(|(s, _)| *s == shape).map(|(_, t)| t)
    }

    /// Builds the template of `shape` unless it is kept (replacing the
    /// oldest entry). The newest entry is looked at first, inline: one
    /// compare per new aggregate while one layout is in use.
    #[inline(always)]
    pub(crate) fn ensure(&mut self, shape: Shape) {
        let newest = (self.next + TEMPLATES - 1) % TEMPLATES;
        if shape != self.entries[newest].0 {
            self.ensure_slow(shape);
        }
    }

    #[cold]
    #[inline(never)]
    fn ensure_slow(&mut self, shape: Shape) {
        if shape == Shape::NONE || self.get(shape).is_some() {
            return;
        }
        self.entries[self.next] = (shape, Template::of(shape));
        self.next = (self.next + 1) % TEMPLATES;
    }
}

#[cfg(test)]
mod tests {
    use super::{Shape, Template};

    /// The AVX2 compare decides as the 16-byte one, for the VXLAN template
    /// (IPv4 at both levels, TCP timestamps; `matches_tunnel`) and a plain
    /// TCP/IPv4 one with timestamps (`matches`): a frame equal to the held
    /// one, and one byte changed at every position and bit of 128 bytes,
    /// where the mask covers it or not; and a frame shorter than 128 bytes
    /// (the 16-byte compare). (Without AVX2 both are the same compare, and
    /// the test says so.)
    #[test]
    fn the_avx2_compare_decides_as_the_plain_one() {
        // (shape, header bytes, bytes left out of the template: the IPv4
        // lengths, IDs and checksums, a tunnel's outer UDP length and
        // checksum, the TCP sequence and checksum)
        let tunnel = Shape(Shape::word([14, 34, 64, 84, 116], false, false));
        let plain = Shape(Shape::word([0, 0, 14, 34, 66], false, false) | Shape::PLAIN);
        for (shape, header, open) in [(tunnel, 116, 6 + 6 + 4 + 4 + 2), (plain, 66, 6 + 4 + 2)] {
            let t = Template::of(shape);
            let scalar = Template { avx2_128: false, ..t };
            if !t.avx2_128 {
                eprintln!("no AVX2 here: only the 16-byte compare is tested");
            }
            let compare = |t: &Template, a: &[u8], b: &[u8]| {
                if shape == tunnel { t.matches_tunnel(a, b) } else { t.matches(a, b) }
            };
            let held: Vec<u8> = (0..160u32).map(|i| (i * 37 + 11) as u8).collect();
            assert!(compare(&t, &held, &held) && compare(&scalar, &held, &held));
            let mut masked = 0;
            for at in 0..128 {
                for bit in 0..8 {
                    let mut frame = held.clone();
                    frame[at] ^= 1 << bit;
                    let (a, b) = (held[..128].try_into().unwrap(), frame[..128].try_into().unwrap());
                    let want = scalar.masked_diff::<128>(a, b) == 0;
                    assert_eq!(compare(&t, &held, &frame), want, "{shape:?} byte {at} bit {bit}");
                    assert_eq!(compare(&scalar, &held, &frame), want, "{shape:?} byte {at} bit {bit}");
                    if at < 100 {
                        assert_eq!(compare(&t, &held, &frame[..120]), want, "{shape:?} short, byte {at} bit {bit}");
                    }
                    masked += usize::from(!want);
                }
            }
            // Every other header byte refuses a change; none past the header.
            assert_eq!(masked, (header - open) * 8, "{shape:?}");
        }
    }

    /// A tunnel shape as `Shape::tunnel` packs it (offsets, then versions).
    fn tunnel_shape(offsets: [usize; 5], outer_v6: bool, v6: bool) -> Shape {
        Shape(Shape::word(offsets, outer_v6, v6))
    }

    #[test]
    fn a_tunnel_layout_is_told_by_every_offset_and_version_but_the_payload() {
        let vxlan = [14, 34, 64, 84];
        let is = |s: Shape| s.is_tunnel_layout(vxlan, false, false);
        for payload in [104, 116, 160] {
            assert!(is(tunnel_shape([14, 34, 64, 84, payload], false, false)), "payload {payload}");
        }
        for at in 0..4 {
            for other in [0, 1, 13, 18, 255] {
                let mut o = [14, 34, 64, 84, 116];
                if o[at] == other {
                    continue;
                }
                o[at] = other;
                assert!(!is(tunnel_shape(o, false, false)), "offset {at} = {other}");
            }
        }
        assert!(!is(tunnel_shape([14, 34, 64, 84, 116], true, false)), "outer IPv6");
        assert!(!is(tunnel_shape([14, 34, 64, 84, 116], false, true)), "inner IPv6");
        assert!(!is(Shape::NONE));
        assert!(!is(Shape(tunnel_shape([0, 0, 64, 84, 116], false, false).0 | Shape::PLAIN)), "plain");
        let plain_mark = Shape(tunnel_shape([14, 34, 64, 84, 116], false, false).0 | Shape::PLAIN);
        assert!(!is(plain_mark), "the plain mark");
    }
}
