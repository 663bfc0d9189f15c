//! The rows of `superpacket bench instructions`: a fixed amount of work
//! each, on the inputs the other benchmarks use (the `bench peers`
//! workloads and engine set-ups, `bench defrag-coalesce`'s fragments, the
//! seed topologies), with a warm-up pass that is not counted.
//!
//! A row reports what it counted: the units its figure is per (packets,
//! segments, fragments, superpackets, bytes) and the payload bytes, so that
//! the count can be divided by either. A row whose engine did not do the
//! expected work (a graph that dropped, a reassembly that did not complete)
//! fails instead of reporting a figure for other work.

use serde::{Deserialize, Serialize};

use super::counter::Meter;
use crate::bench::defrag::fragment_set;
use crate::bench::gro::refill_bursts;
use crate::bench::peers::superpacket::{BurstOutputs, CountingSink, GroChecksum, GsoOutput, gro_engine, gso_caps};
use crate::bench::peers::workload::{GroWorkload, GsoWorkload};
use superpacket::csum::ones_sum;
use superpacket::offload::frag::{ManualClock, ReasmConfig, Reassembler, Scope, Verdict};
use superpacket::offload::gso::Segmenter;
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};
use superpacket_engine::device::seed::seed_router;
use superpacket_engine::device::{BuildOptions, DeviceId, Graph, MemoryDriver, MemoryMode, StackMode, Topology};

/// What a row's figure is per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    /// A received wire packet (GRO).
    Packet,
    /// A segment produced (GSO).
    Segment,
    /// A fragment received (reassembly).
    Fragment,
    /// A superpacket through the device graph.
    Superpacket,
    /// A byte summed (checksum).
    Byte,
}

/// What a GRO row's frames carry: the `bench peers` workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroProto {
    /// TCP/IPv4 segments.
    Tcp4,
    /// UDP/IPv4 datagrams.
    Udp4,
    /// TCP/IPv4 segments in VXLAN over IPv4 (outer UDP checksum 0), as the
    /// `bench peers` VXLAN GRO rows beside DPDK's.
    VxlanTcp4,
}

/// The work of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// GRO of the `bench peers` workload: TCP, UDP or TCP in VXLAN, 1 or
    /// 64 interleaved flows, bursts of 128, checksums verified or trusted.
    Gro {
        /// What the frames carry.
        proto: GroProto,
        /// Interleaved flows.
        flows: usize,
        /// Checksum treatment.
        csum: GroChecksum,
    },
    /// GSO of the `bench peers` 64 KB TCP/IPv4 superpackets (45 segments)
    /// for a target without offloads, plain or (with `true`) inside VXLAN
    /// over IPv4 (the `bench peers` VXLAN rows' superpackets).
    Gso(GsoOutput, bool),
    /// In-order reassembly of 60000-byte UDP/IPv4 datagrams (41 fragments).
    Defrag,
    /// TCP superpackets (62,000 bytes, 1448-byte segments) bridged from
    /// an access port to a learnt MAC on the trunk of
    /// `examples/bridge-vlan-filtering.toml` (VLAN tag pushed).
    Bridge,
    /// UDP superpackets (44 x 1400 bytes) routed with NAT through
    /// `examples/seed-vlan-nat.toml` (the `graph_instructions` `nat` path).
    Router,
    /// The Internet checksum of a buffer of this many bytes.
    Csum(usize),
}

/// One row: its name, what it does, what its figure is per, and the issue's
/// budget (most instructions per unit) where there is one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Stable, machine-readable name.
    pub name: &'static str,
    /// The work.
    pub work: Work,
    /// What the figure is per.
    pub per: Per,
    /// Budget: at most this many instructions per unit (issue 27).
    pub budget: Option<f64>,
}

const fn gro(name: &'static str, proto: GroProto, flows: usize, csum: GroChecksum, budget: Option<f64>) -> Row {
    Row { name, work: Work::Gro { proto, flows, csum }, per: Per::Packet, budget }
}

/// Every row, in the order they are printed.
pub const ROWS: [Row; 20] = [
    gro("gro_tcp4_1flow_trusted", GroProto::Tcp4, 1, GroChecksum::Trusted, Some(450.0)),
    gro("gro_tcp4_1flow_verify", GroProto::Tcp4, 1, GroChecksum::Verify, None),
    gro("gro_tcp4_64flows_trusted", GroProto::Tcp4, 64, GroChecksum::Trusted, Some(600.0)),
    gro("gro_tcp4_64flows_verify", GroProto::Tcp4, 64, GroChecksum::Verify, None),
    gro("gro_udp4_1flow_trusted", GroProto::Udp4, 1, GroChecksum::Trusted, None),
    gro("gro_udp4_1flow_verify", GroProto::Udp4, 1, GroChecksum::Verify, None),
    gro("gro_udp4_64flows_trusted", GroProto::Udp4, 64, GroChecksum::Trusted, None),
    gro("gro_udp4_64flows_verify", GroProto::Udp4, 64, GroChecksum::Verify, None),
    gro("gro_vxlan_tcp4_1flow_trusted", GroProto::VxlanTcp4, 1, GroChecksum::Trusted, None),
    gro("gro_vxlan_tcp4_64flows_trusted", GroProto::VxlanTcp4, 64, GroChecksum::Trusted, None),
    Row { name: "gso_tcp4_sg", work: Work::Gso(GsoOutput::ScatterGather, false), per: Per::Segment, budget: None },
    Row { name: "gso_tcp4_linear", work: Work::Gso(GsoOutput::Linear, false), per: Per::Segment, budget: None },
    Row { name: "gso_vxlan_sg", work: Work::Gso(GsoOutput::ScatterGather, true), per: Per::Segment, budget: None },
    Row { name: "gso_vxlan_linear", work: Work::Gso(GsoOutput::Linear, true), per: Per::Segment, budget: None },
    Row { name: "defrag_udp4", work: Work::Defrag, per: Per::Fragment, budget: None },
    Row { name: "graph_bridge", work: Work::Bridge, per: Per::Superpacket, budget: None },
    Row { name: "graph_router", work: Work::Router, per: Per::Superpacket, budget: None },
    Row { name: "csum_64", work: Work::Csum(64), per: Per::Byte, budget: None },
    Row { name: "csum_1500", work: Work::Csum(1500), per: Per::Byte, budget: None },
    Row { name: "csum_65536", work: Work::Csum(65536), per: Per::Byte, budget: None },
];

/// The row called `name`.
pub fn row(name: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.name == name)
}

/// What a row counted over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counted {
    /// Units of the row's [`Per`] in the counted work.
    pub units: u64,
    /// Payload bytes of the counted work (0 where not meaningful).
    pub bytes: u64,
}

/// How much work a row does: counted passes after the warm-up.
fn passes(quick: bool) -> usize {
    if quick { 1 } else { 4 }
}

/// Runs `row`, counting through `meter`.
///
/// # Errors
/// The engine did not do the row's work, as text.
pub fn run(row: &Row, quick: bool, meter: &mut dyn Meter) -> Result<Counted, String> {
    match row.work {
        Work::Gro { proto, flows, csum } => Ok(run_gro(proto, flows, csum, quick, meter)),
        Work::Gso(output, vxlan) => run_gso(output, vxlan, quick, meter),
        Work::Defrag => run_defrag(quick, meter),
        Work::Bridge => {
            let (g, entry, exit, templates) = bridge();
            run_graph(g, entry, exit, &templates, quick, meter)
        }
        Work::Router => {
            let (g, entry, exit, templates) = router();
            run_graph(g, entry, exit, &templates, quick, meter)
        }
        Work::Csum(size) => Ok(run_csum(size, quick, meter)),
    }
}

/// Frames of a GRO row: 1024 in bursts of 128, as `gro_instructions`.
const GRO_FRAMES: usize = 1024;
/// Frames per receive burst (a NAPI poll's worth; `bench peers`' default).
const GRO_BURST: usize = 128;

fn run_gro(proto: GroProto, flows: usize, csum: GroChecksum, quick: bool, meter: &mut dyn Meter) -> Counted {
    let work = match proto {
        GroProto::Tcp4 => GroWorkload::tcp4(flows, GRO_FRAMES, GRO_BURST),
        GroProto::Udp4 => GroWorkload::udp4(flows, GRO_FRAMES, GRO_BURST),
        GroProto::VxlanTcp4 => GroWorkload::vxlan_tcp4(flows, GRO_FRAMES, GRO_BURST),
    };
    let (mut engine, state) = gro_engine(&work, csum);
    let mut delivered = BurstOutputs::new(work.batch);
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(work.frames.len());
    let mut counted = Counted::default();
    for pass in 0..=passes(quick) {
        let mut bursts = refill_bursts(&work.frames, work.batch, state, &mut spare);
        let mut receive = || delivered.receive(&mut engine, &mut bursts);
        if pass == 0 {
            receive();
        } else {
            meter.measure(&mut receive);
            counted.units += work.frames.len() as u64;
            counted.bytes += work.ip_bytes();
        }
        delivered.recycle(&mut spare);
    }
    counted
}

fn run_gso(output: GsoOutput, vxlan: bool, quick: bool, meter: &mut dyn Meter) -> Result<Counted, String> {
    let count = if quick { 2 } else { 8 };
    let work = if vxlan { GsoWorkload::vxlan_tcp4_64k(count) } else { GsoWorkload::tcp4_64k(count) };
    let caps = gso_caps(&work, output);
    let mut segmenter = Segmenter::new();
    let mut sink = CountingSink::new();
    let mut counted = Counted::default();
    for pass in 0..=passes(quick) {
        let mut result = Ok(());
        sink.frames = 0;
        let mut segment = || {
            for p in &work.superpackets {
                if let Err(e) = segmenter.segment(p, &caps, &mut sink) {
                    result = Err(format!("GSO: {e}"));
                }
            }
        };
        if pass == 0 {
            segment();
        } else {
            meter.measure(&mut segment);
            if sink.frames != work.expected_segments() {
                return Err(format!("GSO produced {} segments, not {}", sink.frames, work.expected_segments()));
            }
            counted.units += sink.frames;
            counted.bytes += work.payload_bytes();
        }
        result?;
    }
    Ok(counted)
}

fn run_defrag(quick: bool, meter: &mut dyn Meter) -> Result<Counted, String> {
    let frags = fragment_set(false);
    let datagrams = if quick { 4 } else { 16 };
    let mut reasm = Reassembler::with_clock(ReasmConfig::default(), ManualClock::new(0));
    let mut counted = Counted::default();
    for pass in 0..=passes(quick) {
        let mut complete = 0usize;
        let mut reassemble = || {
            for _ in 0..datagrams {
                for f in &frags {
                    if let Ok(Verdict::Complete(p)) = reasm.push_frame(f, OffloadMeta::default(), Scope::default()) {
                        std::hint::black_box(p);
                        complete += 1;
                    }
                }
            }
        };
        if pass == 0 {
            reassemble();
        } else {
            meter.measure(&mut reassemble);
            counted.units += (datagrams * frags.len()) as u64;
            counted.bytes += (datagrams * crate::bench::defrag::PAYLOAD) as u64;
        }
        if complete != datagrams {
            return Err(format!("reassembly completed {complete} of {datagrams} datagrams"));
        }
    }
    Ok(counted)
}

/// Superpackets per measured burst through the graph (as `graph_instructions`).
const GRAPH_BATCH: usize = 32;

/// A graph row's set-up: the graph, the port packets enter, the port they
/// must all leave by, and one burst of superpackets.
type GraphSetup = (Graph, DeviceId, DeviceId, Vec<Packet>);

/// TCP superpackets of `spec`'s flow (source port varied over 8 values),
/// `payload` bytes cut at `mss`, with the payload detached from the header
/// as a TAP's scatter-gather read leaves it.
fn superpackets(spec: FlowSpec, payload: usize, mss: u16) -> Vec<Packet> {
    (0..GRAPH_BATCH)
        .map(|i| {
            let mut s = spec;
            s.src_port = spec.src_port.wrapping_add((i % 8) as u16);
            let hl = s.header_len();
            let mut p = Flow::new(s).superpacket(payload, mss, TcpFlags::empty()).expect("fits an IPv4 packet");
            p.detach_payload(hl).expect("one segment of headers");
            p
        })
        .collect()
}

/// `examples/bridge-vlan-filtering.toml`, ports counting: a host on the
/// trunk (VLAN 10) has been learnt, and access1's host sends it TCP
/// superpackets, which leave by the trunk tagged.
fn bridge() -> GraphSetup {
    let opts = BuildOptions { memory_mode: MemoryMode::Count, ..BuildOptions::default() };
    let mut g = Topology::parse(include_str!("../../../../../examples/bridge-vlan-filtering.toml"))
        .and_then(|t| t.build_with(&opts))
        .expect("the bridge example is valid");
    let (access1, trunk) = (g.id("access1").expect("in the example"), g.id("trunk").expect("in the example"));
    let (host_a, host_b) = (MacAddr([0x02, 0xaa, 0, 0, 0, 1]), MacAddr([0x02, 0xaa, 0, 0, 0, 2]));
    let mut learn = FlowSpec::new(Transport::Udp, false, 0).with_vlans(&[(0x8100, 10)]).expect("one tag");
    (learn.src_mac, learn.dst_mac) = (host_b, host_a);
    g.receive(trunk, Packet::from_frame(&Flow::new(learn).frame(64, TcpFlags::empty()).expect("fits")));
    drain_ports(&mut g);
    let mut spec = FlowSpec::new(Transport::Tcp, false, 1);
    (spec.src_mac, spec.dst_mac) = (host_a, host_b);
    (g, access1, trunk, superpackets(spec, 62_000, 1448))
}

/// The seed VLAN NAT router, ports counting: UDP superpackets from a LAN
/// host, routed and NATed out of the WAN port.
fn router() -> GraphSetup {
    let (g, spec) = seed_router(StackMode::Passthrough, MemoryMode::Count);
    let (lan, wan) = (g.id("lan").expect("in the seed example"), g.id("wan").expect("in the seed example"));
    let mut spec = spec;
    spec.src_port = 20_000;
    (g, lan, wan, superpackets(spec, 44 * 1400, 1400))
}

/// Empties every in-memory port's transmit queue; returns how many packets
/// they held.
fn drain_ports(g: &mut Graph) -> usize {
    let mut held = 0;
    for id in (0..g.devices().len()).map(DeviceId) {
        if let Some(d) = g.driver_mut::<MemoryDriver>(id) {
            held += d.tx.len();
            d.tx.clear();
        }
    }
    held
}

fn run_graph(
    mut g: Graph,
    entry: DeviceId,
    exit: DeviceId,
    templates: &[Packet],
    quick: bool,
    meter: &mut dyn Meter,
) -> Result<Counted, String> {
    let rounds = if quick { 2 } else { 16 };
    let mut batch: Vec<Packet> = Vec::with_capacity(templates.len());
    let mut counted = Counted::default();
    for pass in 0..=passes(quick) {
        for _ in 0..rounds {
            batch.extend(templates.iter().cloned());
            let mut forward = || {
                for p in batch.drain(..) {
                    g.receive(entry, p);
                }
            };
            if pass == 0 {
                forward();
            } else {
                meter.measure(&mut forward);
                counted.units += templates.len() as u64;
                counted.bytes += templates.iter().map(|p| p.total_len() as u64).sum::<u64>();
            }
            let at_exit = g.driver_mut::<MemoryDriver>(exit).map_or(0, |d| d.tx.len());
            let everywhere = drain_ports(&mut g);
            if at_exit != templates.len() || everywhere != at_exit {
                return Err(format!(
                    "the graph sent {at_exit} of {} superpackets out of the exit port ({everywhere} out of all ports)",
                    templates.len()
                ));
            }
        }
    }
    Ok(counted)
}

fn run_csum(size: usize, quick: bool, meter: &mut dyn Meter) -> Counted {
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
    let iterations = if quick { 16 } else { 64 };
    let mut counted = Counted::default();
    for pass in 0..=passes(quick) {
        let mut sum = || {
            for _ in 0..iterations {
                std::hint::black_box(ones_sum(std::hint::black_box(&data)));
            }
        };
        if pass == 0 {
            sum();
        } else {
            meter.measure(&mut sum);
            counted.units += (iterations * size) as u64;
            counted.bytes += (iterations * size) as u64;
        }
    }
    counted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts how often it was asked to measure, and runs the work.
    struct CountingMeter(usize);

    impl Meter for CountingMeter {
        fn measure(&mut self, work: &mut dyn FnMut()) {
            self.0 += 1;
            work();
        }
    }

    #[test]
    fn every_row_does_its_work_and_measures_it() {
        for row in &ROWS {
            let mut meter = CountingMeter(0);
            let counted = run(row, true, &mut meter).unwrap_or_else(|e| panic!("{}: {e}", row.name));
            assert!(meter.0 > 0, "{}: nothing measured", row.name);
            assert!(counted.units > 0 && counted.bytes > 0, "{}: {counted:?}", row.name);
        }
    }

    #[test]
    fn row_names_are_unique_and_found() {
        for r in &ROWS {
            assert_eq!(row(r.name).map(|x| x.name), Some(r.name));
        }
        assert!(row("no_such_row").is_none());
    }
}
