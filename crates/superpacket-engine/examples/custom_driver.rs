//! A port driver from your own crate, named in a topology file.
//!
//! `Recorder` is a [`PortDriver`] that keeps a line per frame it is given.
//! Registered under the kind `recorder`, a topology names it like a
//! built-in driver, with keys of its own:
//!
//! ```toml
//! driver = { kind = "recorder", tso = false }
//! ```
//!
//! The example builds a graph with two recorder ports under VLAN devices,
//! one offering TSO and one not, transmits the same TCP superpacket through
//! each VLAN device and prints what each port got: the superpacket whole, or
//! the segments the graph cut for the port without TSO. It then shows a bad
//! key reported at its line. Runs without root:
//!
//! ```text
//! cargo run -p superpacket-engine --example custom_driver
//! ```

use std::any::Any;
use superpacket::offload::gso::{SegmentSink, SgFrame};
use superpacket::packet::{OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::topology::{DriverContext, DriverRegistry, FactoryError};
use superpacket_engine::device::{BuildOptions, DriverError, NetdevFeatures, PortDriver, Topology};

const TOPOLOGY: &str = r#"
[[device]]
name = "fast"
kind = "port"
driver = { kind = "recorder" }

[[device]]
name = "slow"
kind = "port"
driver = { kind = "recorder", tso = false }

[[device]]
name = "fast.10"
kind = "vlan"
lower = "fast"
id = 10

[[device]]
name = "slow.20"
kind = "vlan"
lower = "slow"
id = 20
"#;

/// Records every frame the graph hands over, whole or segmented.
#[derive(Debug)]
struct Recorder {
    hw: NetdevFeatures,
    /// One line per frame, in order.
    log: Vec<String>,
    /// The buffer lent for linear segments.
    buf: Vec<u8>,
}

impl Recorder {
    fn note(&mut self, how: &str, len: usize, meta: &OffloadMeta) {
        let gso = if meta.is_gso() { format!(", gso_size {}", meta.gso_size) } else { String::new() };
        self.log.push(format!("{how}: {len} bytes{gso}"));
    }
}

impl PortDriver for Recorder {
    fn kind(&self) -> &'static str {
        "recorder"
    }
    fn hw_features(&self) -> NetdevFeatures {
        self.hw
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        self.note("the packet whole", pkt.total_len(), &pkt.meta);
        Ok(())
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self
    }
    fn recv(&mut self) -> Option<Packet> {
        None
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// What the segmenter produces for a port that cannot take a packet whole.
impl SegmentSink for Recorder {
    fn pass_through(&mut self, packet: &Packet, meta: &OffloadMeta) {
        self.note("the packet whole", packet.total_len(), meta);
    }
    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        self.note("a segment (scatter-gather)", frame.len(), &frame.meta);
    }
    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.buf.resize(len, 0);
        &mut self.buf
    }
    fn linear_frame(&mut self, len: usize, meta: &OffloadMeta) {
        self.note("a segment (linear)", len, meta);
    }
}

/// The factory of kind `recorder`: reads and checks its keys (`tso`, a
/// bool, default true) and opens the driver.
fn recorder(cx: &DriverContext<'_>, _: &BuildOptions) -> Result<Box<dyn PortDriver>, FactoryError> {
    cx.deny_unknown_keys(&["tso"])?;
    let tso = match cx.keys().get("tso") {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| cx.key_error("tso", "`tso` is true or false"))?,
    };
    let mut hw = NetdevFeatures::FULL_NIC;
    if !tso {
        hw = hw.without(NetdevFeatures::TSO | NetdevFeatures::TSO6);
    }
    Ok(Box::new(Recorder { hw, log: Vec::new(), buf: Vec::new() }))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut drivers = DriverRegistry::builtin();
    drivers.register("recorder", recorder);
    println!("driver kinds: {}", drivers.kinds().join(", "));
    let opts = BuildOptions { drivers, ..BuildOptions::default() };

    let mut graph = Topology::parse(TOPOLOGY)?.build_with(&opts)?;
    let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 0));
    for (vlan, port) in [("fast.10", "fast"), ("slow.20", "slow")] {
        let sp = flow.superpacket(4000, 1448, TcpFlags::ACK | TcpFlags::PSH)?;
        println!("\n{vlan}: a TCP superpacket of {} bytes (gso_size 1448)", sp.total_len());
        graph.transmit(graph.lookup(vlan)?, sp);
        let id = graph.lookup(port)?;
        let recorder = graph.driver_mut::<Recorder>(id).ok_or("not a recorder port")?;
        for line in &recorder.log {
            println!("  {port} got {line}");
        }
    }

    let bad = TOPOLOGY.replace("tso = false", "tso = \"no\"");
    let err = Topology::parse(&bad)?.build_with(&opts).map(|_| ()).unwrap_err();
    println!("\na bad key: {err}");
    Ok(())
}
