//! Deriving raw-IP kernel-oracle cases from Ethernet ones (what a TUN with
//! `IFF_NO_PI` carries is an untagged Ethernet frame minus its 14-byte
//! header), and checking that a case table's derivation forgets nothing.

use superpacket::packet::OffloadMeta;
use superpacket::packet::virtio::{F_NEEDS_CSUM, VirtioNetHdr};
use superpacket::pcap::FrameAnnotation;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{FrameHeaders, Medium, TcpFlags};

/// Bytes of the Ethernet header a raw IP packet lacks.
pub const ETH_LEN: usize = 14;

/// The media every kernel-verified case runs on.
pub const MEDIA: [Medium; 2] = [Medium::Ethernet, Medium::Ip];

/// Why an Ethernet frame has no raw-IP counterpart: a VLAN tag, an
/// EtherType other than IPv4/IPv6, or bytes after the IP packet (Ethernet
/// padding). `None`: the frame minus 14 bytes is a raw IP packet.
pub fn ethernet_only(frame: &[u8]) -> Option<&'static str> {
    match frame.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]])) {
        Some(0x8100 | 0x88A8 | 0x9100) => return Some("VLAN-tagged"),
        Some(0x0800 | 0x86DD) => {}
        _ => return Some("not IP"),
    }
    match FrameHeaders::parse(frame) {
        Ok(h) if frame.len() > h.l3_end() => Some("Ethernet padding"),
        Ok(_) => None,
        Err(_) => Some("unparsable"),
    }
}

/// The raw IP packet inside an untagged Ethernet frame.
pub fn strip_ethernet(frame: &[u8]) -> Vec<u8> {
    frame[ETH_LEN..].to_vec()
}

/// An Ethernet frame's virtio_net_hdr as it reads for the same packet on
/// raw IP: `csum_start` (with `NEEDS_CSUM`) and `hdr_len` 14 less.
pub fn hdr_to_ip(h: &VirtioNetHdr) -> VirtioNetHdr {
    let mut h = *h;
    if h.flags & F_NEEDS_CSUM != 0 {
        h.csum_start -= ETH_LEN as u16;
    }
    h.hdr_len = h.hdr_len.saturating_sub(ETH_LEN as u16);
    h
}

/// Metadata moved by `by` bytes (`OffloadMeta::shifted`: a partial
/// checksum's start is the only offset in it): -14 from Ethernet to raw IP.
pub fn shift_meta(meta: &OffloadMeta, by: isize) -> OffloadMeta {
    meta.shifted(by).expect("checksum start stays inside the packet")
}

/// The virtio_net_hdr superpacket exports for a packet of `medium`
/// (`VirtioNetHdr::from_meta_as`; offsets count from the packet's first byte).
pub fn export_hdr(meta: &OffloadMeta, frame: &[u8], medium: Medium, allow_data_valid: bool) -> VirtioNetHdr {
    VirtioNetHdr::from_meta_as(meta, frame, medium, allow_data_valid).expect("representable")
}

/// Checks a case table's raw-IP derivation. `cases` are the Ethernet cases
/// as (name, why the case cannot exist on raw IP, from [`ethernet_only`] of
/// its frames). Every case must be either derived (no reason) or in
/// `skipped`, the skip list must hold exactly the cases that have a reason,
/// name only existing cases, and have `expected_skips` entries.
pub fn check_derivation(cases: &[(&str, Option<&'static str>)], skipped: &[(&str, &str)], expected_skips: usize) {
    let mut problems = Vec::new();
    for (name, why) in cases {
        let listed = skipped.iter().any(|(n, _)| n == name);
        match (why, listed) {
            (None, true) => problems.push(format!("{name}: in the raw-IP skip list but it exists as raw IP")),
            (Some(why), false) => problems.push(format!("{name}: {why}, so no raw-IP case, but not in the skip list")),
            _ => {}
        }
    }
    for (name, _) in skipped {
        if !cases.iter().any(|(n, _)| n == name) {
            problems.push(format!("skip list names {name:?}, which is no Ethernet case"));
        }
    }
    assert!(problems.is_empty(), "raw-IP derivation:\n{}", problems.join("\n"));
    assert_eq!(skipped.len(), expected_skips, "number of Ethernet cases skipped on raw IP");
}

/// After a run: prints what ran on each medium, then checks that every case
/// ran on Ethernet (`total`), that the run skipped exactly `expected_skips`
/// cases on raw IP, and that every Ethernet case was run as raw IP too or is
/// in the skip list `skip_list`.
pub fn check_coverage<T: std::fmt::Debug>(
    ran: &std::collections::HashMap<Medium, Vec<String>>,
    skipped_now: &[T],
    total: usize,
    skip_list: &[(&str, &str)],
    expected_skips: usize,
) {
    let runs = |m: Medium| ran.get(&m).map_or(&[][..], Vec::as_slice);
    let (ethernet, raw_ip) = (runs(Medium::Ethernet), runs(Medium::Ip));
    println!(
        "cases run: {} on Ethernet, {} on raw IP; skipped on raw IP: {} {skipped_now:?}",
        ethernet.len(),
        raw_ip.len(),
        skipped_now.len()
    );
    assert_eq!(skipped_now.len(), expected_skips, "cases skipped on raw IP: {skipped_now:?}");
    assert_eq!(ethernet.len(), total, "every case runs on Ethernet");
    let missing: Vec<&String> =
        ethernet.iter().filter(|n| !raw_ip.contains(n) && !skip_list.iter().any(|(s, _)| s == n)).collect();
    assert!(missing.is_empty(), "Ethernet cases neither run as raw IP nor skipped: {missing:?}");
}

/// A TCP flow of `n` full segments, PSH on the last, each without an
/// offload annotation: the frames of a capture.
pub fn tcp_segments(v6: bool, index: u32, n: usize) -> Vec<(Vec<u8>, FrameAnnotation)> {
    let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, v6, index));
    (0..n)
        .map(|i| {
            let flags = if i + 1 == n { TcpFlags::PSH } else { TcpFlags::empty() };
            (flow.frame(1448, flags).unwrap(), FrameAnnotation::NONE)
        })
        .collect()
}
