//! UDP L4 segmentation rules (offload-rules 3.3, `__udp_gso_segment`).
//!
//! - Every datagram carries `gso_size` payload bytes except possibly the
//!   last; UDP length = 8 + its payload (written by the shared header fixer
//!   in [`super`]).
//! - UDP checksum per datagram over the adjusted pseudo-header; computed in
//!   software it is **never 0: 0 is sent as 0xFFFF** ([`mangle_zero`]).
//! - IPv4 ID incremented per datagram (they are datagrams, not fragments).
//! - Limits: at most `UDP_MAX_SEGMENTS` datagrams ([`super::UDP_MAX_SEGMENTS`],
//!   64 on old kernels: [`super::TargetCaps::udp_max_segments`]), each
//!   datagram's IP length within the MTU; beyond either the superpacket is a
//!   [`super::GsoError`], never sent.

/// The UDP rule for a computed checksum: 0 means "no checksum" on the wire,
/// so a computed 0 is sent as 0xFFFF (RFC 768, `CSUM_MANGLED_0`).
#[inline]
pub fn mangle_zero(check: u16) -> u16 {
    if check == 0 { 0xFFFF } else { check }
}

#[cfg(test)]
mod tests {
    #[test]
    fn zero_becomes_ffff() {
        assert_eq!(super::mangle_zero(0), 0xFFFF);
        assert_eq!(super::mangle_zero(0x1234), 0x1234);
        assert_eq!(super::mangle_zero(0xFFFF), 0xFFFF);
    }
}
