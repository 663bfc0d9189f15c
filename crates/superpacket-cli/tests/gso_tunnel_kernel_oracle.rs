//! The Linux kernel as the tunnel GSO oracle (docs/kernel-oracle.md section 5,
//! "The third oracle", [`superpacket_lab::tunnel_oracle`]): an inner TSO/USO superpacket is
//! sent into a kernel VXLAN device; with the lower veth's UDP tunnel
//! segmentation on, its peer captures the VXLAN superpacket whole; with it
//! off, the kernel's segments. superpacket's segments of the captured
//! superpacket (metadata: the inner protocol's GSO bit plus UDP_TUNNEL or
//! UDP_TUNNEL_CSUM, the encapsulation offsets, the inner partial checksum)
//! for a target without offloads, linear and scatter-gather, must be
//! **byte-identical** to the kernel's. The two sends are two skbs, so the
//! captured superpacket's outer IPv4 ID is first set to the one the
//! kernel's first segment has (and its header checksum fixed); nothing else
//! is touched.
//!
//! Matrix: outer IPv4 and IPv6 × outer UDP checksum on and off × inner
//! TCPv4 (with and without timestamps, ECN/CWR, DF clear), TCPv6, UDPv4 and
//! UDPv6 (USO). Geneve is not built into this kernel: its cases are the
//! written rules' (offload-rules 3.7; `offload::gso::tunnel_tests`).
//!
//! Root only (namespaces, veth and VXLAN device are created and always
//! deleted); without root it prints a skip note, like the other oracles.

use superpacket::offload::gso::{Segmenter, TargetCaps, VecSink};
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket::packet::{ChecksumState, Encapsulation, GsoProtocol, GsoType, OffloadMeta, Packet, TunnelKind};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{FrameHeaders, TcpFlags};
use superpacket_lab::tunnel_oracle::TunnelGsoOracle;

struct Inner {
    name: &'static str,
    spec: FlowSpec,
    payload: usize,
    gso: u16,
    flags: TcpFlags,
    ecn: bool,
}

fn inners() -> Vec<Inner> {
    let tcp4 = FlowSpec::new(Transport::Tcp, false, 1);
    let tcp6 = FlowSpec::new(Transport::Tcp, true, 2);
    let udp4 = FlowSpec::new(Transport::Udp, false, 3);
    let udp6 = FlowSpec::new(Transport::Udp, true, 4);
    let mut tcp4_nots = tcp4;
    tcp4_nots.tcp_timestamps = false;
    let mut tcp4_nodf = tcp4_nots;
    tcp4_nodf.dont_frag = false;
    let i = |name, spec, payload, gso, flags, ecn| Inner { name, spec, payload, gso, flags, ecn };
    vec![
        i("tcp4 10x1300+77 PSH", tcp4, 10 * 1300 + 77, 1300, TcpFlags::PSH, false),
        i("tcp4 nots 20x1300", tcp4_nots, 20 * 1300, 1300, TcpFlags::PSH, false),
        i("tcp4 CWR|PSH|FIN ecn", tcp4, 5 * 1300 + 1, 1300, TcpFlags::CWR | TcpFlags::PSH | TcpFlags::FIN, true),
        i("tcp4 DF=0 mss 536", tcp4_nodf, 3000, 536, TcpFlags::empty(), false),
        i("tcp6 7x1280+3 FIN", tcp6, 7 * 1280 + 3, 1280, TcpFlags::FIN, false),
        i("uso4 6x1200+5", udp4, 6 * 1200 + 5, 1200, TcpFlags::empty(), false),
        i("uso6 5x1200+1", udp6, 5 * 1200 + 1, 1200, TcpFlags::empty(), false),
        i("uso4 odd 7x333+1", udp4, 7 * 333 + 1, 333, TcpFlags::empty(), false),
    ]
}

/// The metadata of a VXLAN superpacket the kernel built from `inner`.
fn tunnel_meta(frame: &[u8], inner: &Packet, udp_csum: bool) -> OffloadMeta {
    let outer = FrameHeaders::parse(frame).expect("outer headers");
    let inner_mac = outer.l4_offset + 16;
    let h = FrameHeaders::parse(&frame[inner_mac..]).expect("inner headers");
    let proto = inner.meta.gso_type.protocol().expect("inner GSO");
    let encap = Encapsulation {
        tunnel: TunnelKind::Vxlan,
        outer_transport: outer.l4_offset as u16,
        inner_mac: inner_mac as u16,
        inner_network: (inner_mac + h.l3_offset) as u16,
        inner_transport: (inner_mac + h.l4_offset) as u16,
    };
    let offset = if proto == GsoProtocol::UdpL4 { 6 } else { 16 };
    OffloadMeta {
        gso_type: inner.meta.gso_type | if udp_csum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL },
        gso_size: inner.meta.gso_size,
        gso_segs: inner.meta.gso_segs,
        csum: ChecksumState::Partial { start: encap.inner_transport, offset },
        encap: Some(encap),
        ..OffloadMeta::default()
    }
}

/// Sets the outer IPv4 ID of `frame` (untagged) and fixes the header checksum.
fn set_outer_id(frame: &mut [u8], id: [u8; 2]) {
    if frame[12..14] != [0x08, 0x00] {
        return;
    }
    frame[18..20].copy_from_slice(&id);
    frame[24..26].fill(0);
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let c = superpacket::csum::checksum(&frame[14..14 + ihl]);
    frame[24..26].copy_from_slice(&c.to_be_bytes());
}

fn first_difference(kernel: &[Vec<u8>], ours: &[Vec<u8>]) -> String {
    if kernel.len() != ours.len() {
        return format!("segment counts differ: kernel {}, ours {}", kernel.len(), ours.len());
    }
    let i = kernel.iter().zip(ours).position(|(k, o)| k != o).unwrap_or(0);
    let (k, o) = (&kernel[i], &ours[i]);
    let at = k.iter().zip(o).position(|(a, b)| a != b).unwrap_or(k.len().min(o.len()));
    let from = at.saturating_sub(4);
    format!(
        "segment {i} differs first at byte {at} (lengths {} / {}): kernel {:02x?} ours {:02x?}",
        k.len(),
        o.len(),
        &k[from..(from + 12).min(k.len())],
        &o[from..(from + 12).min(o.len())]
    )
}

#[test]
fn tunnel_segments_are_byte_identical_to_the_kernels() {
    if !superpacket_engine::io::require_privileges() {
        println!("SKIPPED: gso_tunnel_kernel_oracle needs root");
        return;
    }
    let mut seg = Segmenter::new();
    let mut failures = Vec::new();
    let mut matched = 0;
    let mut cases = 0;
    for outer_v6 in [false, true] {
        for udp_csum in [false, true] {
            let mut oracle = TunnelGsoOracle::new(outer_v6, udp_csum).expect("tunnel oracle setup");
            eprintln!("---- outer {} udp_csum {udp_csum}", if outer_v6 { "IPv6" } else { "IPv4" });
            for inner in inners() {
                let mut pkt = Flow::new(inner.spec).superpacket(inner.payload, inner.gso, inner.flags).unwrap();
                if inner.ecn {
                    pkt.meta.gso_type |= GsoType::TCP_ECN;
                }
                let frame = pkt.to_vec();
                let hdr = VirtioNetHdr::from_meta(&pkt.meta, &frame, false).unwrap();
                let name = format!("{} [outer v6 {outer_v6}, csum {udp_csum}]", inner.name);
                let segs = inner.payload.div_ceil(usize::from(inner.gso));
                let run = oracle.run(&hdr, &frame, segs).unwrap_or_else(|e| panic!("{name}: kernel: {e}"));
                assert_eq!(run.segments.len(), segs, "{name}: kernel segment count");
                // The kernel's outer UDP checksums: computed (never 0) or all 0.
                let udp_off = if outer_v6 { 54 } else { 34 };
                for k in &run.segments {
                    let check = u16::from_be_bytes([k[udp_off + 6], k[udp_off + 7]]);
                    assert_eq!(check != 0, udp_csum, "{name}: kernel outer UDP checksum {check:#x}");
                }
                let mut whole = run.superpacket.clone();
                set_outer_id(&mut whole, [run.segments[0][18], run.segments[0][19]]);
                let mut tunnel = Packet::from_frame(&whole);
                tunnel.meta = tunnel_meta(&whole, &pkt, udp_csum);
                for sg in [false, true] {
                    cases += 1;
                    let caps = if sg { TargetCaps::new(1500).with_sg() } else { TargetCaps::new(1500) };
                    let mut sink = VecSink::new();
                    seg.segment(&tunnel, &caps, &mut sink).unwrap_or_else(|e| panic!("{name}: {e}"));
                    let ours: Vec<Vec<u8>> = sink.frames.into_iter().map(|f| f.data).collect();
                    let same = ours == run.segments;
                    eprintln!(
                        "{:<24} {} kernel {} segments ({} B superpacket); ours {}{}",
                        inner.name,
                        if sg { "sg    " } else { "linear" },
                        run.segments.len(),
                        run.superpacket.len(),
                        ours.len(),
                        if same { "  identical" } else { "  DIFFERENT" }
                    );
                    if same {
                        matched += 1;
                    } else {
                        failures.push(format!("{name} sg {sg}: {}", first_difference(&run.segments, &ours)));
                    }
                }
            }
        }
    }
    eprintln!("tunnel oracle: {matched} of {cases} cases byte-identical");
    assert!(failures.is_empty(), "differences from the kernel:\n{}", failures.join("\n"));
}
