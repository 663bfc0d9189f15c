//! `superpacket bench seed-vlan-nat`: a NAT router between two VLANs on two
//! in-memory ports that both support USO and fraglist GSO, forwarding UDP
//! L4 and fraglist superpackets, passthrough against `legacy`
//! (offload-rules 6.3, 6.4, 9.2).
//!
//! Passthrough: the VLAN devices claim GSO_UDP_L4 and GSO_FRAGLIST, NAT
//! rewrites each superpacket once, and the egress port takes it whole.
//! Legacy: the egress VLAN device lacks both types (old `GSO_SOFTWARE`), so
//! every superpacket is cut in software there and the segments descend one
//! by one. Figures: payload Gbps and engine CPU seconds per GB. The graph
//! is built from `examples/seed-vlan-nat.toml`.

use super::BenchReport;
use super::seed_qinq_tso::{Engine, run_interleaved};
use std::time::Duration;
use superpacket::packet::Packet;
use superpacket::traffic::Flow;
use superpacket::wire::TcpFlags;
use superpacket_engine::device::seed::seed_router;
use superpacket_engine::device::superpackets::fraglist_aggregate;
use superpacket_engine::device::{MemoryMode, StackMode};

/// Options.
#[derive(Debug, Clone, Copy, Default)]
pub struct VlanNatOptions {
    /// Shorter run (noisier).
    pub quick: bool,
}

/// Payload per datagram.
const DGRAM: usize = 1400;
/// Datagrams per superpacket.
const SEGS: usize = 44;

fn build(mode: StackMode, fraglist: bool) -> Engine {
    let (g, spec) = seed_router(mode, MemoryMode::Count);
    let lan = g.id("lan").expect("built");
    let ports = vec![lan, g.id("wan").expect("built")];
    let mut templates: Vec<Packet> = Vec::new();
    for i in 0..16u32 {
        let mut s = spec;
        s.src_port = 20000 + i as u16;
        let mut f = Flow::new(s);
        let p = if fraglist {
            let frames: Vec<Vec<u8>> = (0..SEGS).map(|_| f.frame(DGRAM, TcpFlags::empty()).expect("fits")).collect();
            fraglist_aggregate(&frames).expect("valid frames")
        } else {
            let hl = s.header_len();
            let mut p = f.superpacket(DGRAM * SEGS, DGRAM as u16, TcpFlags::empty()).expect("fits");
            p.detach_payload(hl).expect("one segment");
            p
        };
        templates.push(p);
    }
    let bytes = (templates.len() * DGRAM * SEGS) as u64;
    Engine::new(g, lan, true, ports, templates, bytes)
}

/// Runs the scenario.
pub fn run(opts: &VlanNatOptions) -> BenchReport {
    let time = if opts.quick { Duration::from_millis(100) } else { Duration::from_millis(800) };
    let mut report = BenchReport::new("seed-vlan-nat");
    let mut sum = [0.0f64; 4];
    for (fraglist, label) in [(false, "udp_l4"), (true, "fraglist")] {
        let mut pass = build(StackMode::Passthrough, fraglist);
        let mut legacy = build(StackMode::Legacy, fraglist);
        run_interleaved(&mut [&mut pass, &mut legacy], time, 5);
        let wan = pass.graph.id("wan").expect("built");
        let ok = pass.graph.counters(wan).tx_packets > 0 && pass.graph.counters(wan).segments_produced == 0;
        report.push(format!("{label}_passthrough_gbps"), pass.gbps(), "Gbps");
        report.push(format!("{label}_legacy_gbps"), legacy.gbps(), "Gbps");
        report.push(format!("{label}_passthrough_cpu_s_per_gb"), pass.cpu_s_per_gb(), "s/GB");
        report.push(format!("{label}_legacy_cpu_s_per_gb"), legacy.cpu_s_per_gb(), "s/GB");
        report.push(format!("{label}_forwarded_whole"), f64::from(u8::from(ok)), "bool");
        sum[0] += pass.gbps() / 2.0;
        sum[1] += legacy.gbps() / 2.0;
        sum[2] += pass.cpu_s_per_gb() / 2.0;
        sum[3] += legacy.cpu_s_per_gb() / 2.0;
    }
    report.push("vlan_nat_passthrough_gbps", sum[0], "Gbps");
    report.push("vlan_nat_legacy_gbps", sum[1], "Gbps");
    report.push("vlan_nat_passthrough_cpu_s_per_gb", sum[2], "s/GB");
    report.push("vlan_nat_legacy_cpu_s_per_gb", sum[3], "s/GB");
    report.push("vlan_nat_throughput_ratio", sum[0] / sum[1], "x");
    report.push("vlan_nat_target_met", f64::from(u8::from(sum[0] >= 20.0 * sum[1])), "bool");
    report
}

#[cfg(test)]
mod tests {
    #[test]
    fn quick_run_forwards_superpackets_whole() {
        let r = super::run(&super::VlanNatOptions { quick: true });
        assert_eq!(r.get("udp_l4_forwarded_whole"), Some(1.0));
        assert_eq!(r.get("fraglist_forwarded_whole"), Some(1.0));
        assert!(r.get("vlan_nat_throughput_ratio").is_some_and(f64::is_finite));
    }
}
