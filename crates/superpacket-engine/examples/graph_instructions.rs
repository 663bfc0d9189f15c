//! Instructions per superpacket through the device graph, for callgrind:
//!
//! ```sh
//! cargo build --release -p superpacket-engine --example graph_instructions
//! valgrind --tool=callgrind --toggle-collect='*graph_burst*' \
//!     target/release/examples/graph_instructions [qinq|team|nat] [legacy]
//! ```
//!
//! Ir per superpacket = callgrind's `Collected` / (`ROUNDS` x `BATCH`),
//! printed by the program as the divisor. `qinq`: TSO superpackets sent
//! through `bond0.100.200` of `examples/seed-qinq-tso.toml` (two VLAN
//! devices, a balance-xor bond, the port's validate step); `team`: the same
//! on `team0.100.200`; `nat`: UDP superpackets received on the LAN port of
//! `examples/seed-vlan-nat.toml` (VLAN, router with ingress checks and NAT,
//! VLAN, port). Ports count and drop what they take (no copy).

use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::seed::seed_router;
use superpacket_engine::device::{BuildOptions, DeviceId, Graph, MemoryMode, StackMode, Topology};

const ROUNDS: usize = 200;
const BATCH: usize = 32;

#[inline(never)]
fn graph_burst(g: &mut Graph, entry: DeviceId, receive: bool, batch: &mut Vec<Packet>) {
    for p in batch.drain(..) {
        if receive {
            g.receive(entry, p);
        } else {
            g.transmit(entry, p);
        }
    }
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "qinq".into());
    // `legacy` as the second argument: old kernels' segmentation at the
    // first device lacking the GSO type (offload-rules 6.3).
    let mode = match std::env::args().nth(2).as_deref() {
        Some("legacy") => StackMode::Legacy,
        _ => StackMode::Passthrough,
    };
    let (mut g, entry, receive, templates) = match which.as_str() {
        "qinq" | "team" => {
            let src = include_str!("../../../examples/seed-qinq-tso.toml");
            let opts = BuildOptions { mode: Some(mode), memory_mode: MemoryMode::Count, ..BuildOptions::default() };
            let g = Topology::parse(src).and_then(|t| t.build_with(&opts)).expect("the seed example is valid");
            let top = if which == "team" { "team0.100.200" } else { "bond0.100.200" };
            let entry = g.id(top).expect("in the seed example");
            let templates: Vec<Packet> = (0..BATCH)
                .map(|i| {
                    let mut f = Flow::new(FlowSpec::new(Transport::Tcp, false, (i % 8) as u32));
                    let hl = f.spec.header_len();
                    let mut p = f.superpacket(62_000, 1448, TcpFlags::empty()).expect("fits");
                    p.detach_payload(hl).expect("one segment");
                    p
                })
                .collect();
            (g, entry, false, templates)
        }
        "nat" => {
            let (g, spec) = seed_router(mode, MemoryMode::Count);
            let entry = g.id("lan").expect("in the seed example");
            let templates: Vec<Packet> = (0..BATCH)
                .map(|i| {
                    let mut s = spec;
                    s.src_port = 20_000 + (i % 16) as u16;
                    let hl = s.header_len();
                    let mut p = Flow::new(s).superpacket(44 * 1400, 1400, TcpFlags::empty()).expect("fits");
                    p.detach_payload(hl).expect("one segment");
                    p
                })
                .collect();
            (g, entry, true, templates)
        }
        other => {
            eprintln!("unknown path {other:?}: qinq, team or nat");
            std::process::exit(2);
        }
    };
    let mut batch = Vec::with_capacity(BATCH);
    for _ in 0..ROUNDS {
        batch.extend(templates.iter().cloned());
        graph_burst(&mut g, entry, receive, &mut batch);
    }
    let ports: u64 = g.devices().iter().map(|d| d.counters.tx_passthrough).sum();
    println!(
        "{which}: {} superpackets, {ports} taken whole by ports; Ir/superpacket = Collected / {}",
        ROUNDS * BATCH,
        ROUNDS * BATCH
    );
}
