//! Internet checksum (RFC 1071), incremental update (RFC 1624) and the
//! TCP/UDP pseudo-headers.
//!
//! Conventions used throughout the crate:
//! - A *sum* is the folded 16-bit ones' complement sum of some bytes, **not
//!   complemented**, expressed as the value of a big-endian (network order)
//!   16-bit word. This is what a `CHECKSUM_PARTIAL` checksum field holds before
//!   completion (offload-rules 0.3).
//! - A *checksum* is the complement of a sum: the value stored in a header.
//!
//! The bulk summation ([`ones_sum`]) is dispatched once per process to the
//! fastest implementation the CPU supports (see [`Implementation`]); every
//! implementation is property-tested against the `portable` module.

mod portable;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

/// A bulk-summation implementation. All produce identical sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Implementation {
    /// Scalar, 64-bit accumulation; runs everywhere. The reference.
    Portable,
    /// x86_64 SSE2 (baseline on x86_64).
    Sse2,
    /// x86_64 AVX2, chosen at run time when the CPU has it.
    Avx2,
    /// x86_64 AVX2 plus AVX-VNNI (`vpdpwssd`), chosen at run time when the CPU
    /// has both (Intel Alder Lake / Sapphire Rapids and later, AMD Zen 5).
    AvxVnni,
    /// x86_64 AVX-512F + AVX-512BW: 64-byte vectors, masked head and tail
    /// loads (`vpmaddwd`), when the CPU has both.
    Avx512,
    /// [`Implementation::Avx512`] with AVX-512 VNNI (`vpdpwssd`, 512-bit),
    /// when the CPU also has it (Intel Ice Lake / Sapphire Rapids, AMD Zen 4).
    Avx512Vnni,
}

impl Implementation {
    /// Every implementation this CPU can run, the reference first.
    pub fn available() -> Vec<Implementation> {
        let mut v = vec![Implementation::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            v.push(Implementation::Sse2);
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Implementation::Avx2);
                if x86::has_avx_vnni() {
                    v.push(Implementation::AvxVnni);
                }
            }
            if x86::has_avx512() {
                v.push(Implementation::Avx512);
                if x86::has_avx512_vnni() {
                    v.push(Implementation::Avx512Vnni);
                }
            }
        }
        v
    }

    /// The implementation [`ones_sum`] uses on this CPU: the first available
    /// one in [`Implementation::PREFERENCE`].
    pub fn selected() -> Implementation {
        static SELECTED: OnceLock<Implementation> = OnceLock::new();
        *SELECTED.get_or_init(|| {
            let available = Self::available();
            Self::PREFERENCE.into_iter().find(|i| available.contains(i)).unwrap_or(Implementation::Portable)
        })
    }

    /// Selection order, fastest first, as measured with `superpacket bench
    /// csum` on an Intel Xeon (family 6 model 167, ~4.1 GHz; memcpy of 1500 B
    /// ~185 GB/s), medians of quiet runs, GB/s at 1500 B / 9000 B / 64 KiB:
    /// avx512vnni 130 / 190 / 162 (dispatched [`ones_sum`]: ~140 at 1500 B,
    /// ~44 cycles, ratio 0.66-0.81), avx512 105 / 146 / 141, avxvnni 107 / 147
    /// / 134, avx2 94 / 115 / 98. No AVX-512 frequency penalty showed at any
    /// size (64 B to 64 MiB, interleaved with the 256-bit kernels).
    pub const PREFERENCE: [Implementation; 6] = [
        Implementation::Avx512Vnni,
        Implementation::Avx512,
        Implementation::AvxVnni,
        Implementation::Avx2,
        Implementation::Sse2,
        Implementation::Portable,
    ];

    /// Human-readable name, as shown by `superpacket bench csum`.
    pub fn name(self) -> &'static str {
        match self {
            Implementation::Portable => "portable",
            Implementation::Sse2 => "sse2",
            Implementation::Avx2 => "avx2",
            Implementation::AvxVnni => "avxvnni",
            Implementation::Avx512 => "avx512",
            Implementation::Avx512Vnni => "avx512vnni",
        }
    }

    /// Folded sum of `data` computed by this implementation.
    ///
    /// # Panics
    /// If this implementation is not in [`Implementation::available`].
    pub fn ones_sum(self, data: &[u8]) -> u16 {
        let native = match self {
            Implementation::Portable => portable::accumulate(data),
            #[cfg(target_arch = "x86_64")]
            Implementation::Sse2 => x86::accumulate_sse2(data),
            #[cfg(target_arch = "x86_64")]
            Implementation::Avx2 => x86::accumulate_avx2_checked(data),
            #[cfg(target_arch = "x86_64")]
            Implementation::AvxVnni => x86::accumulate_avx_vnni_checked(data),
            #[cfg(target_arch = "x86_64")]
            Implementation::Avx512 => x86::accumulate_avx512_checked(data),
            #[cfg(target_arch = "x86_64")]
            Implementation::Avx512Vnni => x86::accumulate_avx512_vnni_checked(data),
            #[cfg(not(target_arch = "x86_64"))]
            _ => panic!("{} is not available on this architecture", self.name()),
        };
        fold_native(native)
    }
}

/// Folds a native-endian accumulation (a sum of little/big-endian-as-host 16-bit
/// words, any value congruent modulo 0xFFFF) into a network-order folded sum.
#[inline]
fn fold_native(acc: u64) -> u16 {
    let folded = fold64(acc);
    // The accumulation summed host-order words; RFC 1071 section 2(B) says the
    // byte-swapped sum is the sum of the byte-swapped words.
    u16::from_be(folded)
}

/// Folds a 64-bit ones' complement accumulator to 16 bits (end-around carry).
#[inline]
pub fn fold64(mut acc: u64) -> u16 {
    acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    acc = (acc & 0xFFFF_FFFF) + (acc >> 32);
    let mut a = acc as u32;
    a = (a & 0xFFFF) + (a >> 16);
    a = (a & 0xFFFF) + (a >> 16);
    a as u16
}

/// Folded ones' complement sum of `data` (network order, not complemented),
/// with the fastest implementation available. An odd trailing byte is padded
/// with a zero byte, as RFC 1071 specifies.
///
/// Inputs shorter than [`SMALL_LEN`] are summed inline by the portable loop;
/// longer ones by the kernel of [`Implementation::selected`], called through a
/// cached function pointer (one load and one indirect call, no feature checks).
#[inline]
pub fn ones_sum(data: &[u8]) -> u16 {
    if data.len() < SMALL_LEN {
        return fold_native(portable::accumulate(data));
    }
    #[cfg(target_arch = "x86_64")]
    let native = x86::accumulate_selected(data);
    #[cfg(not(target_arch = "x86_64"))]
    let native = portable::accumulate(data);
    fold_native(native)
}

/// Below this length [`ones_sum`] inlines the portable loop instead of calling
/// the selected kernel (headers, tiny packets).
pub const SMALL_LEN: usize = 64;

/// Folds a 32-bit sum of 16-bit values (fewer than 65537 of them, so the
/// sum cannot wrap) to 16 bits with end-around carry: the same value as
/// [`ones_add`] applied to them one by one (0 only for an all-zero input),
/// with one fold instead of one per addition.
#[inline]
pub fn fold32(acc: u32) -> u16 {
    let a = (acc & 0xFFFF) + (acc >> 16);
    ((a & 0xFFFF) + (a >> 16)) as u16
}

/// Ones' complement addition of two folded sums.
#[inline]
pub fn ones_add(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xFFFF) + (s >> 16)) as u16
}

/// Ones' complement subtraction: `a - b`.
#[inline]
pub fn ones_sub(a: u16, b: u16) -> u16 {
    ones_add(a, !b)
}

/// Sum of `data` as if it started at byte offset `offset` of a larger buffer:
/// a chunk starting at an odd offset contributes its bytes swapped. Lets callers
/// sum scattered payload segments and combine with [`ones_add`].
#[inline]
pub fn ones_sum_at(data: &[u8], offset: usize) -> u16 {
    let s = ones_sum(data);
    if !offset.is_multiple_of(2) { s.swap_bytes() } else { s }
}

/// The Internet checksum of `data`: the complement of its sum.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// Sum of the IPv4 TCP/UDP pseudo-header (RFC 793 / RFC 768): source, destination,
/// zero, protocol, L4 length.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, l4_len: u16) -> u16 {
    let mut acc: u64 = 0;
    acc += u16::from_be_bytes([src[0], src[1]]) as u64;
    acc += u16::from_be_bytes([src[2], src[3]]) as u64;
    acc += u16::from_be_bytes([dst[0], dst[1]]) as u64;
    acc += u16::from_be_bytes([dst[2], dst[3]]) as u64;
    acc += protocol as u64;
    acc += l4_len as u64;
    fold64(acc)
}

/// Sum of the IPv6 upper-layer pseudo-header (RFC 8200 section 8.1): source,
/// destination, 32-bit upper-layer length, next header.
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, l4_len: u32) -> u16 {
    let mut acc: u64 = 0;
    for pair in src.chunks_exact(2).chain(dst.chunks_exact(2)) {
        acc += u16::from_be_bytes([pair[0], pair[1]]) as u64;
    }
    acc += (l4_len >> 16) as u64 + (l4_len & 0xFFFF) as u64;
    acc += next_header as u64;
    fold64(acc)
}

/// RFC 1624 equation 3: the new checksum after a 16-bit field changes from
/// `old` to `new`, without touching the rest of the data: `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn update_u16(check: u16, old: u16, new: u16) -> u16 {
    !ones_add(ones_add(!check, !old), new)
}

/// RFC 1624 for a field of even length (an address, a port pair): the new
/// checksum after `old` bytes are replaced by `new` bytes at an even offset.
///
/// # Panics
/// If the slices differ in length or have odd length (a programming error).
pub fn update_bytes(check: u16, old: &[u8], new: &[u8]) -> u16 {
    assert!(old.len() == new.len() && old.len().is_multiple_of(2), "update_bytes needs equal, even-length fields");
    let mut c = check;
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        c = update_u16(c, u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([n[0], n[1]]));
    }
    c
}

/// The same RFC 1624 update for a *partial* checksum field, which holds a sum
/// (not complemented): used when NAT rewrites addresses of a CHECKSUM_PARTIAL
/// superpacket whose field carries the pseudo-header sum.
#[inline]
pub fn update_partial_bytes(partial_sum: u16, old: &[u8], new: &[u8]) -> u16 {
    !update_bytes(!partial_sum, old, new)
}

/// Completes a CHECKSUM_PARTIAL frame in software (offload-rules 0.3,
/// `skb_checksum_help`): sums `frame[start..]` (the field at `start + offset`
/// already holds the pseudo-header sum), stores the complement there and
/// returns it. `zero_as_ffff` applies the UDP rule: a computed 0 is sent as 0xFFFF.
///
/// Returns `None` (and leaves the frame untouched) if the field does not fit
/// inside the frame.
///
/// ```
/// use superpacket::csum::complete_partial;
/// use superpacket::packet::ChecksumState;
/// use superpacket::traffic::{Flow, FlowSpec, Transport};
/// use superpacket::wire::TcpFlags;
///
/// let flow = Flow::new(FlowSpec::new(Transport::Udp, false, 0));
/// // CHECKSUM_PARTIAL, as a TAP or TUN hands it over: the field holds the pseudo-header sum.
/// let partial = flow.clone().superpacket(100, 1448, TcpFlags::empty()).unwrap();
/// let ChecksumState::Partial { start, offset } = partial.meta.csum else { unreachable!() };
/// let mut frame = partial.to_vec();
/// let check = complete_partial(&mut frame, start.into(), offset.into(), true).unwrap();
/// assert_eq!(frame, flow.clone().frame(100, TcpFlags::empty()).unwrap()); // as if sent complete
/// assert_eq!(frame[40..42], check.to_be_bytes()); // the UDP checksum field (14 + 20 + 6)
/// ```
pub fn complete_partial(frame: &mut [u8], start: usize, offset: usize, zero_as_ffff: bool) -> Option<u16> {
    let field = start.checked_add(offset)?;
    if field.checked_add(2)? > frame.len() {
        return None;
    }
    let mut check = !ones_sum(&frame[start..]);
    if check == 0 && zero_as_ffff {
        check = 0xFFFF;
    }
    frame[field..field + 2].copy_from_slice(&check.to_be_bytes());
    Some(check)
}

/// Copies `src` into `dst` and returns the folded sum of the copied bytes
/// (network order, not complemented, as [`ones_sum`]), in one pass over the
/// data: the fused copy-and-checksum of software segmentation without
/// scatter-gather (offload-rules 3.2: "computed in software during the copy").
/// AVX-512 (F+BW) or AVX2 when the CPU has it, the portable code otherwise; as for
/// [`ones_sum_at`], swap the result's bytes if `src` sits at an odd offset of
/// the summed data.
///
/// Inputs shorter than [`SMALL_LEN`] are copied and summed inline by the
/// portable loop; longer ones by the kernel chosen once per process, called
/// through a cached function pointer (as [`ones_sum`]): no feature check or
/// selection per call.
///
/// # Panics
/// If `dst` and `src` differ in length (a programming error).
#[inline]
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum needs equal lengths");
    #[cfg(target_arch = "x86_64")]
    if src.len() >= SMALL_LEN {
        // SAFETY: the lengths are equal (asserted above).
        return fold_native(unsafe { x86::copy_accumulate_selected(dst, src) });
    }
    copy_and_sum_portable(dst, src)
}

/// The portable (scalar) [`copy_and_sum`]: the reference the SIMD version is
/// tested against, and what runs on CPUs without AVX2.
///
/// # Panics
/// If `dst` and `src` differ in length.
#[inline(never)]
pub fn copy_and_sum_portable(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum needs equal lengths");
    fold_native(portable::copy_accumulate(dst, src))
}

#[cfg(test)]
mod copy_tests;
#[cfg(test)]
mod tests;
