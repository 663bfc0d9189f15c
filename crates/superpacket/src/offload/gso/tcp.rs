//! TCP segmentation rules (offload-rules 3.2, `tcp_gso_segment`): what
//! changes in the TCP header of segment `i` of `n`. The sequence number
//! (`seq(0) + i * gso_size`) and the checksum are written by the shared
//! header fixer in [`super`]; the flag rules live here.
//!
//! - FIN and PSH only on the last segment (the last keeps the original).
//! - CWR only on the first segment, unless the superpacket is
//!   `SKB_GSO_TCP_ACCECN`: then CWR is copied to every segment.
//! - Every other flag (ACK, URG, ECE, RST, SYN, AE), ack, window, options and
//!   urgent pointer are copied unchanged.

use crate::wire::TcpFlags;

const FIN: u8 = TcpFlags::FIN.bits() as u8;
const PSH: u8 = TcpFlags::PSH.bits() as u8;
const CWR: u8 = TcpFlags::CWR.bits() as u8;

/// The low flag byte (TCP header byte 13: CWR ECE URG ACK PSH RST SYN FIN)
/// of segment `i` of `n`, from the superpacket's `flags`.
#[inline]
pub fn segment_flags(flags: u8, i: usize, n: usize, accecn: bool) -> u8 {
    let mut f = flags;
    if i + 1 < n {
        f &= !(FIN | PSH);
    }
    if i > 0 && !accecn {
        f &= !CWR;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_table() {
        // (flags, i, n, accecn, expected)
        let all = FIN | PSH | CWR | 0x10;
        let cases = [
            (all, 0, 3, false, CWR | 0x10),
            (all, 1, 3, false, 0x10),
            (all, 2, 3, false, FIN | PSH | 0x10),
            (all, 0, 3, true, CWR | 0x10),
            (all, 1, 3, true, CWR | 0x10),
            (all, 2, 3, true, all),
            (all, 0, 1, false, all),
            (0x10 | 0x40 | 0x20, 1, 3, false, 0x10 | 0x40 | 0x20),
        ];
        for (flags, i, n, accecn, want) in cases {
            assert_eq!(segment_flags(flags, i, n, accecn), want, "flags {flags:#x} seg {i}/{n} accecn {accecn}");
        }
    }
}
