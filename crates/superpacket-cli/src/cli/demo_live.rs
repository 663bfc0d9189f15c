//! `superpacket demo` as root: the live data path with the real kernel on
//! both ends.
//!
//! The demo builds a throwaway lab (three network namespaces, deleted at
//! the end, also on Ctrl-C or failure):
//!
//! ```text
//!  ns A (10.71.0.2)                     ns T (trunk)                      ns B (10.72.0.2)
//!  kernel TCP/UDP   spd-a ==TAP==> [a]  spd-t1 <==veth==> spd-t2   [b] <==TAP== spd-b  kernel TCP/UDP
//!  UDP_SEGMENT         bridge br-a -- qinq-a.100.10      qinq-b.100.10 (10.71.0.1) router + NAT  UDP_GRO
//!                                     802.1Q on 802.1ad   802.1ad+802.1Q    masquerade out b (10.72.0.1)
//!                                     on bond trunk-a     on bond trunk-b
//! ```
//!
//! Traffic from A is bridged onto a QinQ trunk (802.1ad VLAN 100 carrying
//! 802.1Q VLAN 10, on an active-backup bond), crosses a veth between two
//! AF_PACKET engine ports, is untagged into the router's LAN interface and
//! NATed out of the TAP into B. TCP streams and UDP_SEGMENT datagrams of
//! the kernel run through it while the engine is configured four ways:
//!
//! - `passthrough`: superpackets cross every device whole (current Linux);
//! - `per-frame`: the TAPs accept no offloads, so the engine moves MTU frames;
//! - `legacy`: old kernels' stack, which segments in the middle (the bond's
//!   features_check with two tags, VLAN devices without USO);
//! - `relay`: no engine, a plain superpacket relay between the same TAPs
//!   ([`superpacket_lab::relay`]): the reference.
//!
//! Every stream is hashed at both ends ([`superpacket_lab::streams`]); the demo
//! fails (exit 1) if any byte arrived changed.

use super::progress;
use super::{CliError, EXIT_OK, EXIT_PROBLEMS};
use crate::bench::BenchReport;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use superpacket_engine::device::{StackMode, Topology};
use superpacket_engine::engine::{Engine, EngineOptions};
use superpacket_engine::io::event::{SignalFd, signal_name};
use superpacket_engine::io::tap::{TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_USO4, TUN_F_USO6};
use superpacket_engine::io::{NetNs, TapConfig, TapDevice};
use superpacket_lab::lab::{HOST_B_V4, Lab, TAP_A, TAP_B};
use superpacket_lab::relay::TapRelay;
use superpacket_lab::streams::{self, Limit, TcpConfig, TcpTransfer, UdpConfig, UdpTransfer};

const TCP_PORT: u16 = 5201;
const UDP_PORT: u16 = 5202;

/// The built-in topology (`examples/live-qinq-nat.toml`).
const TOPOLOGY: &str = include_str!("../../../../examples/live-qinq-nat.toml");

/// One configuration of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Config {
    Relay,
    Passthrough,
    PerFrame,
    MtuBatched,
    Legacy,
}

impl Config {
    const ALL: [Config; 5] = [Config::Relay, Config::Passthrough, Config::PerFrame, Config::MtuBatched, Config::Legacy];

    /// Name on the command line and in JSON keys.
    fn name(self) -> &'static str {
        match self {
            Config::Relay => "relay",
            Config::Passthrough => "passthrough",
            Config::PerFrame => "perframe",
            Config::MtuBatched => "mtubatched",
            Config::Legacy => "legacy",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Config::Relay => "plain superpacket relay between the TAPs (reference)",
            Config::Passthrough => "engine, superpackets passed through (current Linux)",
            Config::PerFrame => "engine, per-frame I/O: MTU frames, one per system call",
            Config::MtuBatched => "engine, MTU frames with batched AF_PACKET I/O (sendmmsg, RX ring)",
            Config::Legacy => "engine, legacy stack (segments in the middle)",
        }
    }

    /// The engine options of this configuration (`None`: the relay).
    fn engine_options(self) -> Option<EngineOptions> {
        match self {
            Config::Relay => None,
            Config::Passthrough => Some(EngineOptions::default()),
            // TAPs without offloads: the kernel hands the engine MTU frames.
            Config::PerFrame => {
                Some(EngineOptions { tap_offloads: Some(0), packet_batch: Some(1), ..EngineOptions::default() })
            }
            Config::MtuBatched => Some(EngineOptions { tap_offloads: Some(0), ..EngineOptions::default() }),
            Config::Legacy => Some(EngineOptions { mode: Some(StackMode::Legacy), ..EngineOptions::default() }),
        }
    }
}

/// Names of the demo's configurations (for `demo --config`).
pub const CONFIG_NAMES: [&str; 5] = ["relay", "passthrough", "perframe", "mtubatched", "legacy"];

/// What one configuration measured.
#[derive(Debug)]
struct Measured {
    config: Config,
    tcp: TcpTransfer,
    udp: UdpTransfer,
    /// CPU seconds of the engine (or relay) during both transfers.
    cpu_seconds: f64,
    /// Packets the engine dropped (all devices).
    drops: u64,
}

impl Measured {
    fn cpu_per_gb(&self) -> f64 {
        let bytes = self.tcp.receiver.bytes + self.udp.receiver.counts.good_bytes;
        if bytes == 0 { f64::NAN } else { self.cpu_seconds / (bytes as f64 / 1e9) }
    }
}

/// Runs the live demo. `seconds` per transfer; `only`: the configurations
/// to measure by name (empty: all).
pub fn run(seconds: f64, json: bool, only: &[String]) -> Result<u8, CliError> {
    let configs: Vec<Config> =
        Config::ALL.into_iter().filter(|c| only.is_empty() || only.iter().any(|o| o == c.name())).collect();
    let started = Instant::now();
    // Ctrl-C must not skip the cleanup: signals wait in a descriptor instead.
    let signals = SignalFd::install().map_err(|e| CliError::context("signals", e))?;
    if !json {
        println!("superpacket demo: live data path (root): kernel TCP and UDP through the engine");
        println!("  A 10.71.0.2 -TAP-> bridge -> QinQ 802.1ad 100 / 802.1Q 10 on a bond -> veth trunk (AF_PACKET)");
        println!("  -> QinQ on a bond -> router + NAT -TAP-> B 10.72.0.2; {seconds} s per transfer\n");
    }
    let lab = Lab::create("sp-demo", false).map_err(|e| CliError::context("building the lab", e))?;
    let pb = progress::steps_bar(!json, "demo");
    pb.set_length(configs.len() as u64 * 2);
    let mut results = Vec::new();
    for config in configs {
        if let Some(sig) = signals.take() {
            pb.finish_and_clear();
            return Err(CliError(format!("interrupted by {}; the lab was removed", signal_name(sig))));
        }
        pb.set_message(config.name());
        let m = measure(&lab, config, seconds, &signals).map_err(|e| CliError::context(config.name(), e))?;
        pb.inc(2);
        results.push(m);
    }
    pb.finish_and_clear();
    drop(lab);

    let report = report(&results, started.elapsed());
    let ok = report.get("integrity_ok") == Some(1.0);
    if json {
        println!("{}", report.to_json());
    } else {
        print_table(&results);
        println!();
        print!("{}", report.to_table());
        println!(
            "\n{} ({:.1} s); the namespaces, TAPs and veths were removed",
            if ok { "every stream arrived intact" } else { "INTEGRITY FAILURE: a stream arrived changed" },
            started.elapsed().as_secs_f64()
        );
    }
    Ok(if ok { EXIT_OK } else { EXIT_PROBLEMS })
}

/// Runs the TCP and UDP transfers with the data path in `config`.
fn measure(lab: &Lab, config: Config, seconds: f64, signals: &SignalFd) -> Result<Measured, String> {
    let limit = Limit::Duration(Duration::from_secs_f64(seconds));
    let tcp_cfg = TcpConfig { limit, ..TcpConfig::default() };
    // Unpaced, as `iperf3 -b 0`: the goodput at B is the figure, losses are reported.
    let udp_cfg = UdpConfig { limit, ..UdpConfig::default() };
    let tcp_to = SocketAddr::from((HOST_B_V4, TCP_PORT));
    let udp_to = SocketAddr::from((HOST_B_V4, UDP_PORT));
    let transfers = || -> Result<(TcpTransfer, UdpTransfer), String> {
        let tcp =
            streams::tcp_transfer(Some(&lab.b), Some(&lab.a), tcp_to, &tcp_cfg).map_err(|e| format!("TCP: {e}"))?;
        if let Some(sig) = signals.take() {
            return Err(format!("interrupted by {}", signal_name(sig)));
        }
        let udp =
            streams::udp_transfer(Some(&lab.b), Some(&lab.a), udp_to, &udp_cfg).map_err(|e| format!("UDP: {e}"))?;
        Ok((tcp, udp))
    };
    match config.engine_options() {
        None => {
            // Without the router, A and B reach each other directly over the relayed link.
            let routes = RelayRoutes::add(lab)?;
            let open = |ns: &NetNs, name: &str| -> Result<TapDevice, String> {
                let cfg = TapConfig { nonblocking: true, ..TapConfig::named(name) };
                let mut tap = TapDevice::open_in(ns, &cfg).map_err(|e| e.to_string())?;
                tap.negotiate_offload(full_offloads()).map_err(|e| e.to_string())?;
                Ok(tap)
            };
            let relay = TapRelay::start(open(&lab.a, TAP_A)?, open(&lab.b, TAP_B)?).map_err(|e| e.to_string())?;
            let r = transfers();
            let stats = relay.stop().map_err(|e| e.to_string())?;
            drop(routes);
            let (tcp, udp) = r?;
            Ok(Measured { config, tcp, udp, cpu_seconds: stats.cpu_seconds, drops: stats.write_errors })
        }
        Some(opts) => {
            let topo = Topology::parse(&lab.localize(TOPOLOGY)).map_err(|e| format!("built-in topology: {e}"))?;
            let engine = Engine::start(&topo, &opts).map_err(|e| e.to_string())?;
            let cpu0 = engine.snapshot().cpu_seconds;
            let r = transfers();
            let fin = engine.stop().map_err(|e| e.to_string())?;
            let (tcp, udp) = r?;
            let drops = fin.devices.iter().map(|d| d.dropped()).sum();
            Ok(Measured { config, tcp, udp, cpu_seconds: fin.cpu_seconds - cpu0, drops })
        }
    }
}

fn full_offloads() -> u32 {
    TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_USO4 | TUN_F_USO6
}

/// Direct routes between A and B for the relay configuration, removed on drop.
struct RelayRoutes<'a> {
    lab: &'a Lab,
}

impl<'a> RelayRoutes<'a> {
    fn add(lab: &'a Lab) -> Result<RelayRoutes<'a>, String> {
        lab.a.add_route("10.72.0.0/24", None, Some(TAP_A)).map_err(|e| e.to_string())?;
        let r = RelayRoutes { lab };
        lab.b.add_route("10.71.0.0/24", None, Some(TAP_B)).map_err(|e| e.to_string())?;
        Ok(r)
    }
}

impl Drop for RelayRoutes<'_> {
    fn drop(&mut self) {
        let _ = self.lab.a.del_route("10.72.0.0/24", None, Some(TAP_A));
        let _ = self.lab.b.del_route("10.71.0.0/24", None, Some(TAP_B));
    }
}

fn find(results: &[Measured], c: Config) -> Option<&Measured> {
    results.iter().find(|m| m.config == c)
}

/// The shared bench JSON shape: throughputs, CPU per GB, ratios, integrity.
fn report(results: &[Measured], elapsed: Duration) -> BenchReport {
    let mut r = BenchReport::new("demo");
    for m in results {
        let n = m.config.name();
        r.push(format!("tcp_{n}_gbps"), m.tcp.gbps(), "Gbit/s");
        r.push(format!("udp_{n}_gbps"), m.udp.gbps(), "Gbit/s");
        r.push(format!("{n}_cpu_s_per_gb"), m.cpu_per_gb(), "CPU s/GB");
        r.push(format!("udp_{n}_lost_segments"), m.udp.lost() as f64, "segments");
    }
    let ratio = |a: Config, b: Config, proto: &str| -> f64 {
        match (find(results, a), find(results, b)) {
            (Some(x), Some(y)) => {
                let (x, y) = if proto == "tcp" { (x.tcp.gbps(), y.tcp.gbps()) } else { (x.udp.gbps(), y.udp.gbps()) };
                x / y
            }
            _ => f64::NAN,
        }
    };
    r.push("tcp_passthrough_vs_relay", ratio(Config::Passthrough, Config::Relay, "tcp"), "x");
    r.push("tcp_passthrough_vs_perframe", ratio(Config::Passthrough, Config::PerFrame, "tcp"), "x");
    r.push("tcp_passthrough_vs_legacy", ratio(Config::Passthrough, Config::Legacy, "tcp"), "x");
    r.push("tcp_passthrough_vs_mtubatched", ratio(Config::Passthrough, Config::MtuBatched, "tcp"), "x");
    r.push("udp_passthrough_vs_perframe", ratio(Config::Passthrough, Config::PerFrame, "udp"), "x");
    r.push("udp_passthrough_vs_mtubatched", ratio(Config::Passthrough, Config::MtuBatched, "udp"), "x");
    r.push("udp_passthrough_vs_legacy", ratio(Config::Passthrough, Config::Legacy, "udp"), "x");
    let intact = results.iter().all(|m| m.tcp.intact() && m.udp.no_corruption() && m.udp.receiver.counts.unique > 0);
    r.push("integrity_ok", if intact { 1.0 } else { 0.0 }, "bool");
    r.push("elapsed_s", elapsed.as_secs_f64(), "s");
    r
}

fn print_table(results: &[Measured]) {
    println!(
        "{:<12} {:>10} {:>10} {:>12} {:>10} {:>8} {:>9}  what",
        "config", "TCP Gb/s", "UDP Gb/s", "CPU s/GB", "UDP lost", "drops", "intact"
    );
    for m in results {
        println!(
            "{:<12} {:>10.2} {:>10.2} {:>12.3} {:>10} {:>8} {:>9}  {}",
            m.config.name(),
            m.tcp.gbps(),
            m.udp.gbps(),
            m.cpu_per_gb(),
            m.udp.lost(),
            m.drops,
            if m.tcp.intact() && m.udp.no_corruption() { "yes" } else { "NO" },
            m.config.describe()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_match_the_configurations() {
        let names: Vec<&str> = Config::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, CONFIG_NAMES);
        // Only the relay runs without the engine; per-frame I/O is one frame per call.
        assert!(Config::Relay.engine_options().is_none());
        let pf = Config::PerFrame.engine_options().unwrap();
        assert_eq!((pf.tap_offloads, pf.packet_batch), (Some(0), Some(1)));
        let mb = Config::MtuBatched.engine_options().unwrap();
        assert_eq!((mb.tap_offloads, mb.packet_batch), (Some(0), None));
    }
}
