//! `superpacket bench scaling`: packets per second of 1..N engine workers
//! in memory (no kernel in the way), each a thread with its own graph as
//! `superpacket run --workers N` builds them (`docs/benchmarks.md`,
//! "Scaling with workers").
//!
//! Topologies, 64-byte UDP frames (per-packet costs, not bytes):
//! - `bridge`: two in-memory ports in a bridge, traffic both ways (the
//!   reference: no state shared between workers);
//! - `nat`: the seed VLAN NAT router (`examples/seed-vlan-nat.toml`), every
//!   worker's router sharing the NAT connection table and the neighbour
//!   table ([`superpacket_engine::device::Graph::share_tables`]); each
//!   worker forwards the original direction of its own connections and the
//!   replies of the next worker's, as the kernel's flow hash spreads the
//!   two directions of one connection over different queues;
//! - `nat-steered`: the same router with a table of its own per worker, each
//!   worker seeing both directions of its own connections only: what
//!   steering every packet to the worker that owns its connection would
//!   cost *without* the hand-off between cores it needs (an upper bound for
//!   steering); `handoff` measures that hand-off: one packet at a time from
//!   one thread to another through a bounded channel.
//!
//! Every worker pushes the same batches in rounds; a barrier starts each
//! round on all workers at once, so their timed parts overlap. Timed: the
//! pushes through the graph only (cloning the batch and freeing what the
//! ports took are not). Figures per worker: packets per CPU-second of the
//! worker thread while pushing (what one core does; other processes'
//! load does not dilute it) and per wall-second; totals are their sums.

use super::{BenchReport, median};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Barrier};
use std::time::Instant;
use superpacket::packet::Packet;
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};
use superpacket_engine::device::port::MemoryDriver;
use superpacket_engine::device::seed::seed_router;
use superpacket_engine::device::{DeviceId, Graph, MemoryMode, StackMode};
use superpacket_engine::io::cputime::thread_cpu_seconds;

/// Options.
#[derive(Debug, Clone, Copy)]
pub struct ScalingOptions {
    /// Shorter run (noisier).
    pub quick: bool,
    /// Most workers measured (1..=this).
    pub max_workers: usize,
}

/// Connections (flows) per worker.
const FLOWS: usize = 64;
/// Packets per round and worker.
const BATCH: usize = 1024;
/// UDP payload: 64-byte frames on the LAN (14 + 4 + 20 + 8 + 18).
const PAYLOAD: usize = 18;
const HOST: Ipv4Addr = Ipv4Addr::new(192, 168, 10, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const PUBLIC: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 1);
const GW_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xfe]);
const HOST_MAC: MacAddr = MacAddr([2, 0xbb, 0, 0, 0, 2]);

/// The topologies measured, in report order.
pub const TOPOLOGIES: [&str; 3] = ["bridge", "nat", "nat-steered"];

/// One worker: its graph and the packets of one round, each with the
/// port it arrives on.
struct Worker {
    graph: Graph,
    batch: Vec<(DeviceId, Packet)>,
    ports: [DeviceId; 2],
}

/// What one worker measured.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    packets: u64,
    cpu_s: f64,
    wall_s: f64,
}

fn frame(spec: FlowSpec) -> Packet {
    Packet::from_frame(&Flow::new(spec).frame(PAYLOAD, TcpFlags::empty()).expect("fits"))
}

/// `BATCH` packets cycling through `templates`.
fn fill(templates: &[(DeviceId, Packet)]) -> Vec<(DeviceId, Packet)> {
    templates.iter().cycle().take(BATCH).cloned().collect()
}

fn bridge_workers(n: usize) -> Vec<Worker> {
    (0..n)
        .map(|_| {
            let mut g = Graph::new(StackMode::Passthrough);
            let a = g.add_port("a", Box::new(MemoryDriver::full())).expect("new graph");
            let b = g.add_port("b", Box::new(MemoryDriver::full())).expect("new graph");
            let br = g.add_bridge("br0", false).expect("new graph");
            g.enslave(br, a).expect("free port");
            g.enslave(br, b).expect("free port");
            for p in [a, b] {
                if let Some(d) = g.driver_mut::<MemoryDriver>(p) {
                    d.mode = MemoryMode::Count;
                }
            }
            let mut spec = FlowSpec::new(Transport::Udp, false, 0);
            (spec.src_mac, spec.dst_mac) = (MacAddr([2, 0xaa, 0, 0, 0, 1]), MacAddr([2, 0xaa, 0, 0, 0, 2]));
            let mut back = spec;
            (back.src_mac, back.dst_mac) = (spec.dst_mac, spec.src_mac);
            // Both MACs learned: unicast both ways, no flooding.
            let templates = [(a, frame(spec)), (b, frame(back))];
            for (p, f) in &templates {
                g.receive(*p, f.clone());
            }
            Worker { graph: g, batch: fill(&templates), ports: [a, b] }
        })
        .collect()
}

/// The reply of the server to connection `port` (masqueraded to
/// `PUBLIC:port`), as the gateway sends it to the router in VLAN 20.
fn reply(g: &Graph, spec: &FlowSpec, port: u16) -> Packet {
    let mut r = FlowSpec::new(Transport::Udp, false, 0).with_vlans(&[(0x8100, 20)]).expect("one tag");
    r.addrs = Addrs::V4 { src: SERVER, dst: PUBLIC };
    (r.src_port, r.dst_port) = (spec.dst_port, port);
    (r.src_mac, r.dst_mac) = (GW_MAC, g.device(g.id("wan.20").expect("seed")).mac);
    frame(r)
}

fn nat_workers(n: usize, shared: bool) -> Vec<Worker> {
    let mut built: Vec<(Graph, FlowSpec)> = (0..n)
        .map(|_| {
            let (mut g, mut spec) = seed_router(StackMode::Passthrough, MemoryMode::Count);
            g.router_mut().add_neighbour(IpAddr::V4(HOST), HOST_MAC);
            spec.src_mac = HOST_MAC;
            (g, spec)
        })
        .collect();
    if shared && let Some(((first, _), rest)) = built.split_first_mut() {
        for (g, _) in rest {
            g.share_tables(first);
        }
    }
    // Worker w's connections use source ports 20000 + w * FLOWS + i, all
    // distinct, so masquerade keeps them: the replies' ports are known.
    let port = |w: usize, i: usize| (20000 + w * FLOWS + i) as u16;
    let originals: Vec<Vec<(DeviceId, Packet)>> = built
        .iter_mut()
        .enumerate()
        .map(|(w, (g, spec))| {
            let lan = g.id("lan").expect("seed");
            (0..FLOWS)
                .map(|i| {
                    let mut s = *spec;
                    s.src_port = port(w, i);
                    let f = frame(s);
                    // Creates the connection on this worker.
                    g.receive(lan, f.clone());
                    (lan, f)
                })
                .collect()
        })
        .collect();
    built
        .into_iter()
        .enumerate()
        .map(|(w, (g, spec))| {
            let wan = g.id("wan").expect("seed");
            // Shared: the replies of the next worker's connections.
            let owner = if shared { (w + 1) % n } else { w };
            let mut templates = Vec::with_capacity(2 * FLOWS);
            for (i, original) in originals[w].iter().enumerate() {
                templates.push(original.clone());
                templates.push((wan, reply(&g, &spec, port(owner, i))));
            }
            let ports = [g.id("lan").expect("seed"), wan];
            Worker { graph: g, batch: fill(&templates), ports }
        })
        .collect()
}

fn build(topology: &str, n: usize) -> Vec<Worker> {
    match topology {
        "bridge" => bridge_workers(n),
        "nat" => nat_workers(n, true),
        _ => nat_workers(n, false),
    }
}

/// Runs `rounds` rounds on every worker at once (one thread each).
fn measure(workers: Vec<Worker>, rounds: usize) -> (Vec<Measured>, Vec<Worker>) {
    let barrier = Arc::new(Barrier::new(workers.len()));
    let handles: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut m = Measured::default();
                for _ in 0..rounds {
                    let batch = w.batch.clone();
                    barrier.wait();
                    let (c0, t0) = (thread_cpu_seconds(), Instant::now());
                    for (port, p) in batch {
                        w.graph.receive(port, p);
                    }
                    m.wall_s += t0.elapsed().as_secs_f64();
                    m.cpu_s += thread_cpu_seconds() - c0;
                    m.packets += BATCH as u64;
                    for p in w.ports {
                        if let Some(d) = w.graph.driver_mut::<MemoryDriver>(p) {
                            d.tx.clear();
                        }
                    }
                }
                (m, w)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("bench worker")).unzip()
}

/// Whether every packet pushed left on a port (none dropped or held).
fn all_forwarded(workers: &[Worker], pushed: u64) -> bool {
    workers.iter().all(|w| {
        let tx: u64 = w.ports.iter().map(|p| w.graph.counters(*p).tx_packets).sum();
        let dropped: u64 =
            (0..w.graph.devices().len()).map(|i| w.graph.counters(DeviceId(i)).drops.values().sum::<u64>()).sum();
        tx >= pushed && dropped == 0
    })
}

/// Nanoseconds to hand one packet from one thread to another through a
/// bounded channel (what steering adds to a packet that reached the wrong
/// worker), the receiver reading its headers; median of `rounds`.
fn handoff_ns(rounds: usize) -> f64 {
    let template = frame(FlowSpec::new(Transport::Udp, false, 0));
    let per_round: Vec<f64> = (0..rounds)
        .map(|_| {
            let batch: Vec<Packet> = (0..BATCH).map(|_| template.clone()).collect();
            let (tx, rx) = std::sync::mpsc::sync_channel::<Packet>(256);
            let consumer = std::thread::spawn(move || {
                let t0 = Instant::now();
                let mut sum = 0u64;
                for p in rx.iter() {
                    sum += p.linear()[..42].iter().map(|&b| u64::from(b)).sum::<u64>();
                }
                (t0.elapsed().as_secs_f64(), sum)
            });
            for p in batch {
                if tx.send(p).is_err() {
                    break;
                }
            }
            drop(tx);
            let (secs, sum) = consumer.join().expect("hand-off consumer");
            std::hint::black_box(sum);
            secs * 1e9 / BATCH as f64
        })
        .collect();
    median(&per_round)
}

/// Runs the scenario.
pub fn run_with_progress(opts: &ScalingOptions, progress: &mut dyn FnMut(&str, usize, usize)) -> BenchReport {
    let rounds = if opts.quick { 20 } else { 400 };
    let max = opts.max_workers.max(1);
    let mut report = BenchReport::new("scaling");
    let total_steps = TOPOLOGIES.len() * max + 1;
    let mut step = 0;
    let mut ok = true;
    for topology in TOPOLOGIES {
        for n in 1..=max {
            progress(&format!("{topology}, {n} worker(s)"), step, total_steps);
            step += 1;
            let (m, workers) = measure(build(topology, n), rounds);
            ok &= all_forwarded(&workers, (rounds * BATCH) as u64);
            let cpu_rates: Vec<f64> = m.iter().map(|m| m.packets as f64 / m.cpu_s.max(1e-9) / 1e6).collect();
            let wall_rates: Vec<f64> = m.iter().map(|m| m.packets as f64 / m.wall_s.max(1e-9) / 1e6).collect();
            let total: f64 = cpu_rates.iter().sum();
            report.push(format!("{topology}_{n}w_mpps"), total, "Mpps");
            report.push(format!("{topology}_{n}w_mpps_per_worker"), total / n as f64, "Mpps");
            report.push(format!("{topology}_{n}w_wall_mpps"), wall_rates.iter().sum::<f64>(), "Mpps");
        }
    }
    progress("hand-off", step, total_steps);
    report.push("handoff_ns_per_packet", handoff_ns(if opts.quick { 5 } else { 50 }), "ns");
    report.push("forwarded_all", f64::from(u8::from(ok)), "bool");
    report
}

/// The report as a table per topology, with an ASCII curve of the total.
pub fn render_human(r: &BenchReport) -> String {
    let mut out = String::from(
        "scaling (in memory, 64-byte frames; Mpps per CPU-second of each worker while pushing, summed; \
         wall: per wall-second)\n",
    );
    let peak = r.results.iter().filter(|x| x.name.ends_with("w_mpps")).map(|x| x.value).fold(0.0, f64::max);
    out += &format!(
        "{:<12} {:>7} {:>10} {:>12} {:>10}  curve (total)\n",
        "topology", "workers", "total", "per worker", "wall"
    );
    for topology in TOPOLOGIES {
        for n in 1.. {
            let Some(total) = r.get(&format!("{topology}_{n}w_mpps")) else { break };
            let each = r.get(&format!("{topology}_{n}w_mpps_per_worker")).unwrap_or(0.0);
            let wall = r.get(&format!("{topology}_{n}w_wall_mpps")).unwrap_or(0.0);
            let bar = "#".repeat(((total / peak.max(1e-9)) * 40.0).round() as usize);
            out += &format!("{topology:<12} {n:>7} {total:>10.2} {each:>12.2} {wall:>10.2}  {bar}\n");
        }
    }
    if let Some(h) = r.get("handoff_ns_per_packet") {
        out += &format!("hand-off between two threads: {h:.0} ns per packet\n");
    }
    if r.get("forwarded_all") != Some(1.0) {
        out += "WARNING: some packets were dropped or held: the figures do not measure forwarding\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_workers_forward_every_packet_of_every_topology() {
        for topology in TOPOLOGIES {
            let (m, workers) = measure(build(topology, 2), 2);
            assert!(all_forwarded(&workers, 2 * BATCH as u64), "{topology}");
            assert!(m.iter().all(|m| m.packets == 2 * BATCH as u64 && m.cpu_s > 0.0), "{topology}");
        }
        // Shared NAT: each worker forwarded replies of the other's
        // connections (64 per worker), created once in the one table.
        let (_, workers) = measure(build("nat", 2), 1);
        let nat = &workers[0].graph.router().expect("seed").nat;
        assert_eq!(nat.len(), 2 * FLOWS);
        let lan = workers[1].graph.id("lan").expect("seed");
        assert_eq!(workers[1].graph.counters(lan).tx_packets, (BATCH / 2) as u64);
    }
}
