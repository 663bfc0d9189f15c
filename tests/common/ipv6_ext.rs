//! IPv6 extension-header test support, shared by the integration tests (as
//! `common::ipv6_ext`) and the GSO unit tests (`src/offload/gso/tests.rs`
//! includes this file with `#[path]`). `Packet` and `ChecksumState` are the
//! including module's imports, so the file builds in either crate.

use super::{ChecksumState, Packet};

/// Inserts an 8-byte Destination Options header (PadN) after the IPv6 header
/// at `l3` of a (superpacket) frame, keeping its metadata valid.
pub fn insert_ipv6_dstopts(pkt: &Packet, l3: usize) -> Packet {
    let f = pkt.to_vec();
    let mut out = f[..l3 + 40].to_vec();
    let nh = out[l3 + 6];
    out[l3 + 6] = 60;
    let pl = u16::from_be_bytes([out[l3 + 4], out[l3 + 5]]) + 8;
    out[l3 + 4..l3 + 6].copy_from_slice(&pl.to_be_bytes());
    out.extend_from_slice(&[nh, 0, 1, 4, 0, 0, 0, 0]);
    out.extend_from_slice(&f[l3 + 40..]);
    let mut p = Packet::from_frame(&out);
    p.meta = pkt.meta;
    if let ChecksumState::Partial { start, offset } = p.meta.csum {
        p.meta.csum = ChecksumState::Partial { start: start + 8, offset };
    }
    p
}
