//! A fixed amount of GRO work for counting instructions per packet, which
//! are steadier on a shared machine than times: 20 passes over 1024 TCP/IPv4
//! frames of 1448 payload bytes (20480 packets) in bursts of 128, one flow or
//! `FLOWS` interleaved ones, checksums trusted (as a NIC validated them) or,
//! with `verify`, verified in software. With `vxlan` the same flows come
//! inside VXLAN over IPv4 (outer UDP checksum on, 1398 inner payload bytes so
//! that a frame fits a 1500-byte MTU) to a GRO with the VXLAN port configured:
//! tunnel GRO's cost; `vxlan-port` configures the port but sends the plain
//! frames: what configuring a tunnel costs plain traffic. `vxlan-peers` is
//! the VXLAN row of `superpacket bench peers`: outer UDP checksum 0,
//! 1448-byte inner segments, a 64 x 8 flow table, and "trusted" meaning the
//! inner checksum too (`CHECKSUM_UNNECESSARY` level 1). `peers` gives the
//! plain frames the flow table of `bench peers`' plain rows (64 x 8); `udp`
//! sends UDP/IPv4 datagrams of 1400 payload bytes instead of TCP segments,
//! to a GRO with UDP segment GRO on (`bench peers`' UDP rows, with `peers`).
//!
//! ```sh
//! cargo build --release -p superpacket --example gro_instructions
//! valgrind --tool=callgrind --toggle-collect='*gro_burst*' \
//!     target/release/examples/gro_instructions [FLOWS [verify] [peers] [udp|vxlan|vxlan-peers|vxlan-port]]
//! ```
//!
//! Instructions per packet = "Collected" / 20480 (docs/benchmarks.md,
//! "Instructions per packet").

use superpacket::offload::gro::{Gro, GroConfig, UdpGroMode};
use superpacket::packet::{ChecksumState, Packet, TunnelKind};
use superpacket::traffic::{Flow, FlowSpec, Transport, TunnelFlow};
use superpacket::wire::TcpFlags;

/// Frames per pass.
const FRAMES: usize = 1024;
/// Passes over the frames.
const PASSES: usize = 20;
/// Frames per receive burst (a NAPI poll's worth).
const BURST: usize = 128;

/// The measured part: one receive burst, its flush and its delivery, the
/// engine's output vector swapped with `out` (which the caller drained).
#[inline(never)]
fn gro_burst(gro: &mut Gro, pkts: &mut Vec<Packet>, out: &mut Vec<Packet>) {
    gro.receive_burst(pkts);
    gro.flush();
    gro.swap_delivered(out);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let flows: u32 = match args.next().map(|a| a.parse()) {
        None => 1,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => usage(),
    };
    let (mut verify, mut vxlan, mut port, mut peers, mut udp) = (false, false, false, false, false);
    for a in args {
        match a.as_str() {
            "verify" => verify = true,
            "peers" => peers = true,
            "udp" => udp = true,
            "vxlan" => (vxlan, port) = (true, true),
            "vxlan-peers" => (vxlan, port, peers) = (true, true, true),
            "vxlan-port" => port = true,
            _ => usage(),
        }
    }
    let transport = if udp { Transport::Udp } else { Transport::Tcp };
    let spec = |i| FlowSpec::new(transport, false, i);
    let frames: Vec<Vec<u8>> = if vxlan {
        let mut tunnels: Vec<TunnelFlow> = (0..flows)
            .map(|i| {
                let mut t = TunnelFlow::new(TunnelKind::Vxlan, false, spec(i), i);
                t.udp_csum = !peers;
                t
            })
            .collect();
        let payload = if peers { 1448 } else { 1398 };
        (0..FRAMES).map(|i| tunnels[i % flows as usize].frame(payload, TcpFlags::empty()).expect("fits")).collect()
    } else {
        let mut spec_flows: Vec<Flow> = (0..flows).map(|i| Flow::new(spec(i))).collect();
        let payload = if udp { 1400 } else { 1448 };
        (0..FRAMES).map(|i| spec_flows[i % flows as usize].frame(payload, TcpFlags::empty()).expect("fits")).collect()
    };
    // `bench peers` sizes its table for every flow of a burst (PEERS_GRO).
    let mut base = if peers { GroConfig { buckets: 64, ..GroConfig::LINUX } } else { GroConfig::LINUX };
    if udp {
        base.udp = UdpGroMode::Forward;
    }
    let cfg = if port { base.with_tunnel(4789, TunnelKind::Vxlan) } else { base };
    let trusted = ChecksumState::Unnecessary { level: u8::from(peers && vxlan) };
    let mut gro = Gro::new(cfg);
    let mut out = Vec::with_capacity(BURST);
    for _ in 0..PASSES {
        for chunk in frames.chunks(BURST) {
            let mut pkts: Vec<Packet> = chunk
                .iter()
                .map(|f| {
                    let mut p = Packet::from_frame(f);
                    if !verify {
                        p.meta.csum = trusted;
                    }
                    p
                })
                .collect();
            gro_burst(&mut gro, &mut pkts, &mut out);
            out.clear();
        }
    }
    let c = gro.counters();
    println!(
        "{} {} packets, {flows} flow(s){}, checksums {}: {} merged, {} superpackets",
        FRAMES * PASSES,
        if udp { "UDP" } else { "TCP" },
        if peers && vxlan {
            " in VXLAN (bench peers shape)"
        } else if peers {
            " (bench peers' table)"
        } else if vxlan {
            " in VXLAN"
        } else if port {
            ", VXLAN port configured"
        } else {
            ""
        },
        if verify { "verified" } else { "trusted" },
        c.merged,
        c.superpackets
    );
}

fn usage() -> ! {
    eprintln!("usage: gro_instructions [FLOWS (> 0) [verify] [peers] [udp|vxlan|vxlan-peers|vxlan-port]]");
    std::process::exit(2);
}
