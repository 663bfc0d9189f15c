//! The Linux kernel as the GSO oracle (this-machine.md section 5, "A second
//! oracle"): each superpacket is sent through AF_PACKET with
//! `PACKET_VNET_HDR` into a veth whose TX checksum, TSO, GSO and USO are off
//! (so the kernel segments and checksums in software), the peer captures the
//! segments, and superpacket's segments for a target without offloads must be
//! **byte-identical**.
//!
//! Root only (namespaces and veths are created and always deleted by
//! [`superpacket_lab::oracle::GsoOracle`]); fails with the reason if not
//! root, unless `SUPERPACKET_SKIP_PRIVILEGED=1` (then prints a skip note).

mod common;

use superpacket::offload::gso::{Segmenter, TargetCaps, VecSink};
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket::packet::{GsoType, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::TcpFlags;
use superpacket_lab::oracle::{Delivered, GsoOracle};

/// The kernel's frames as they were on the wire: a VLAN tag the receiver
/// moved into metadata is put back after the MAC addresses.
fn wire_bytes(d: &Delivered) -> Vec<u8> {
    match d.vlan {
        Some(v) => {
            let tpid = if v.tpid == 0 { 0x8100 } else { v.tpid };
            let mut f = d.frame[..12].to_vec();
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&v.tci.to_be_bytes());
            f.extend_from_slice(&d.frame[12..]);
            f
        }
        None => d.frame.clone(),
    }
}

struct Scenario {
    name: &'static str,
    spec: FlowSpec,
    payload: usize,
    gso: u16,
    flags: TcpFlags,
    ecn: bool,
    /// Insert an 8-byte IPv6 Destination Options header.
    ext: bool,
}

/// Inserts an 8-byte Destination Options header (PadN) after the IPv6 header
/// of an untagged superpacket, keeping its metadata valid.
fn with_ipv6_ext(pkt: &Packet) -> Packet {
    superpacket::traffic::insert_ipv6_dstopts(pkt, 14)
}

fn scenarios() -> Vec<Scenario> {
    let tcp4 = FlowSpec::new(Transport::Tcp, false, 1);
    let tcp6 = FlowSpec::new(Transport::Tcp, true, 2);
    let udp4 = FlowSpec::new(Transport::Udp, false, 3);
    let udp6 = FlowSpec::new(Transport::Udp, true, 4);
    let mut tcp4_nots = tcp4;
    tcp4_nots.tcp_timestamps = false;
    let mut tcp4_nodf = tcp4;
    tcp4_nodf.dont_frag = false;
    let tagged = tcp4.with_vlans(&[(0x8100, 100)]).unwrap();
    let qinq6 = udp6.with_vlans(&[(0x88A8, 10), (0x8100, 20)]).unwrap();
    let s = |name, spec, payload, gso, flags, ecn| Scenario { name, spec, payload, gso, flags, ecn, ext: false };
    let x = |name, spec, payload, gso, flags| Scenario { name, spec, payload, gso, flags, ecn: false, ext: true };
    vec![
        s("tcp4 20x1448 PSH", tcp4_nots, 20 * 1448, 1448, TcpFlags::PSH, false),
        s("tcp4 ts 10x1448+777", tcp4, 10 * 1448 + 777, 1448, TcpFlags::PSH, false),
        s("tcp4 CWR|PSH|FIN ecn", tcp4, 5 * 1448 + 1, 1448, TcpFlags::CWR | TcpFlags::PSH | TcpFlags::FIN, true),
        s("tcp4 CWR|ECE|URG", tcp4, 4 * 1000, 1000, TcpFlags::CWR | TcpFlags::ECE | TcpFlags::URG, false),
        s("tcp4 DF=0 small mss", tcp4_nodf, 3000, 536, TcpFlags::empty(), false),
        s("tcp4 64KB", tcp4, 44 * 1448, 1448, TcpFlags::PSH, false),
        s("tcp4 vlan 100", tagged, 6 * 1444, 1444, TcpFlags::PSH, false),
        s("uso6 qinq 10/20", qinq6, 3 * 1400 + 5, 1400, TcpFlags::empty(), false),
        s("tcp6 10x1428+100", tcp6, 10 * 1428 + 100, 1428, TcpFlags::PSH, false),
        s("tcp6 FIN odd", tcp6, 7 * 999 + 3, 999, TcpFlags::FIN, false),
        s("uso4 20x1400+7", udp4, 20 * 1400 + 7, 1400, TcpFlags::empty(), false),
        s("uso4 odd sizes", udp4, 5 * 333 + 1, 333, TcpFlags::empty(), false),
        s("uso6 20x1400+7", udp6, 20 * 1400 + 7, 1400, TcpFlags::empty(), false),
        x("tcp6 dstopts 5x1400+9", tcp6, 5 * 1400 + 9, 1400, TcpFlags::PSH),
        x("uso6 dstopts 4x1000+1", udp6, 4 * 1000 + 1, 1000, TcpFlags::empty()),
        // No GSO: NEEDS_CSUM only (checksum help).
        s("tcp4 csum only", tcp4, 1000, 1448, TcpFlags::PSH, false),
        s("udp6 csum only", udp6, 1001, 1400, TcpFlags::empty(), false),
    ]
}

#[test]
fn segments_are_byte_identical_to_the_kernels() {
    if !superpacket_engine::io::require_privileges() {
        println!("SKIPPED: gso_kernel_oracle needs root");
        return;
    }
    let mut oracle = GsoOracle::new().expect("GSO oracle setup (namespaces, veth, AF_PACKET)");
    let caps = TargetCaps::new(1500);
    let mut seg = Segmenter::new();
    let mut failures = Vec::new();
    for sc in scenarios() {
        let mut pkt: Packet = Flow::new(sc.spec).superpacket(sc.payload, sc.gso, sc.flags).unwrap();
        if sc.ecn {
            pkt.meta.gso_type |= GsoType::TCP_ECN;
        }
        if sc.ext {
            pkt = with_ipv6_ext(&pkt);
        }
        let frame = pkt.to_vec();
        let hdr = VirtioNetHdr::from_meta(&pkt.meta, &frame, false).unwrap();
        let kernel: Vec<Vec<u8>> =
            oracle.segment_detailed(&hdr, &frame).expect("kernel segmentation").iter().map(wire_bytes).collect();
        let mut sink = VecSink::new();
        seg.segment(&pkt, &caps, &mut sink).unwrap_or_else(|e| panic!("{}: {e}", sc.name));
        let ours: Vec<Vec<u8>> = sink.frames.into_iter().map(|f| f.data).collect();
        for f in &ours {
            let mut problems = Vec::new();
            validate_frame(f, Medium::Ethernet, &Default::default(), false, &mut problems);
            assert!(problems.is_empty(), "{}: our segment fails validation: {problems:?}", sc.name);
        }
        let sizes: Vec<usize> = kernel.iter().map(Vec::len).collect();
        eprintln!("{:<24} kernel {} segments {:?}; ours {}", sc.name, kernel.len(), summarize(&sizes), ours.len());
        if kernel != ours {
            let first_diff = kernel.iter().zip(&ours).position(|(k, o)| k != o);
            let detail = match first_diff {
                Some(i) => {
                    let at = kernel[i].iter().zip(&ours[i]).position(|(a, b)| a != b);
                    format!(
                        "segment {i} differs first at byte {at:?} (lengths {} / {})",
                        kernel[i].len(),
                        ours[i].len()
                    )
                }
                None => format!("segment counts differ: kernel {}, ours {}", kernel.len(), ours.len()),
            };
            failures.push(format!("{}: {detail}", sc.name));
        }
    }
    eprintln!("oracle stats: {:?}", oracle.stats());
    assert!(failures.is_empty(), "differences from the kernel:\n{}", failures.join("\n"));
}

/// "20 x 1502" style summary of a list of sizes.
fn summarize(sizes: &[usize]) -> Vec<String> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &s in sizes {
        match out.last_mut() {
            Some((size, n)) if *size == s => *n += 1,
            _ => out.push((s, 1)),
        }
    }
    out.into_iter().map(|(s, n)| if n == 1 { format!("{s}") } else { format!("{n}x{s}") }).collect()
}
