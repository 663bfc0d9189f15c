//! A fixed amount of GRO work for counting instructions per packet, which
//! are steadier on a shared machine than times: 20 passes over 1024 TCP/IPv4
//! frames of 1448 payload bytes (20480 packets) in bursts of 128, one flow or
//! `FLOWS` interleaved ones, checksums trusted (as a NIC validated them) or,
//! with a second argument, verified in software.
//!
//! ```sh
//! cargo build --release -p superpacket --example gro_instructions
//! valgrind --tool=callgrind --toggle-collect='*gro_burst*' \
//!     target/release/examples/gro_instructions [FLOWS [verify]]
//! ```
//!
//! Instructions per packet = "Collected" / 20480 (docs/benchmarks.md,
//! "Instructions per packet").

use superpacket::offload::gro::{Gro, GroConfig};
use superpacket::packet::{ChecksumState, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;

/// Frames per pass.
const FRAMES: usize = 1024;
/// Passes over the frames.
const PASSES: usize = 20;
/// Frames per receive burst (a NAPI poll's worth).
const BURST: usize = 128;

/// The measured part: one receive burst, its flush and its delivery.
#[inline(never)]
fn gro_burst(gro: &mut Gro, pkts: &mut Vec<Packet>, out: &mut Vec<Packet>) {
    gro.receive_burst(pkts);
    gro.flush();
    gro.take_delivered_into(out);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let flows: u32 = match args.next().map(|a| a.parse()) {
        None => 1,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: gro_instructions [FLOWS (> 0) [verify]]");
            std::process::exit(2);
        }
    };
    let verify = args.next().is_some();
    let mut spec_flows: Vec<Flow> = (0..flows).map(|i| Flow::new(FlowSpec::new(Transport::Tcp, false, i))).collect();
    let frames: Vec<Vec<u8>> =
        (0..FRAMES).map(|i| spec_flows[i % flows as usize].frame(1448, TcpFlags::empty()).expect("fits")).collect();
    let mut gro = Gro::new(GroConfig::default());
    let mut out = Vec::new();
    for _ in 0..PASSES {
        for chunk in frames.chunks(BURST) {
            let mut pkts: Vec<Packet> = chunk
                .iter()
                .map(|f| {
                    let mut p = Packet::from_frame(f);
                    if !verify {
                        p.meta.csum = ChecksumState::Unnecessary { level: 0 };
                    }
                    p
                })
                .collect();
            gro_burst(&mut gro, &mut pkts, &mut out);
            out.clear();
        }
    }
    println!("{} packets, {flows} flow(s), checksums {}", FRAMES * PASSES, if verify { "verified" } else { "trusted" });
}
