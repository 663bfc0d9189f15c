//! One datapath of `superpacket bench live-peers`, one workload, a chosen
//! number of engine workers and port options, with the counters that say
//! where packets went: the measuring tool behind the ring, worker, GRO and
//! qdisc-bypass figures of docs/benchmarks.md ("Workers, rings and
//! AF_XDP"). It builds the bench's own lab and topology and measures with
//! the bench's own [`workload::measure`]; root only.
//!
//! ```sh
//! cargo build --release -p superpacket-cli --example live_peers_probe
//! ./target/release/examples/live_peers_probe DATAPATH WORKERS WORKLOAD SECONDS [REPEATS]
//! ```
//!
//! `DATAPATH`: `bridge`, `router`, `nat` (superpacket), `kbridge`,
//! `krouter` (the kernel); `WORKLOAD`: `tcp1`, `tcp4`, `tcp1_mtu`,
//! `udp_gso`, `udp_mtu`. Environment: `RING=N` RX ring frames of the
//! engine's ports (default: the bench's), `GRO=1` GRO on the engine's
//! ports, `BYPASS=1` `qdisc_bypass` on them, `NICE=N` the engine's worker
//! threads reniced to N once started, `PIN=0|1` the workers unpinned or pinned
//! (default: the bench's), `PUBLISH_MS=N` the workers' publish
//! interval (default the bench's 10 ms), `VERBOSE=1` the engine's
//! counters, the receiver's UDP counters and the middle's links after each
//! transfer.

use std::process::ExitCode;
use std::time::Duration;

use superpacket_cli::bench::live_peers::workload::{self, Workload};
use superpacket_cli::bench::live_peers::{Datapath, PIN_WORKERS, RX_RING_FRAMES, topology};
use superpacket_engine::device::Topology;
use superpacket_engine::engine::{Engine, EngineConfig, EngineOptions};
use superpacket_lab::peers_lab::PeersLab;

const USAGE: &str = "usage: live_peers_probe bridge|router|nat|kbridge|krouter WORKERS \
                     tcp1|tcp4|tcp1_mtu|udp_gso|udp_mtu SECONDS [REPEATS]";

/// The output of a command run in namespace `ns` (empty if it fails: these are diagnostics).
fn in_ns(ns: &str, args: &[&str]) -> String {
    std::process::Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn parse(args: &[String]) -> Option<(Datapath, usize, Workload, f64, usize)> {
    let dp = match args.get(1)?.as_str() {
        "bridge" => Datapath::SpBridge,
        "router" => Datapath::SpRouter,
        "nat" => Datapath::SpNat,
        "kbridge" => Datapath::KernelBridge,
        "krouter" => Datapath::KernelRouter,
        _ => return None,
    };
    let workers = args.get(2)?.parse().ok().filter(|w| (1..=256).contains(w))?;
    let w = Workload::ALL.into_iter().find(|w| w.key() == args.get(3).map_or("", String::as_str))?;
    let secs = args.get(4)?.parse().ok().filter(|s| (0.2..=600.0).contains(s))?;
    let reps = args.get(5).map_or(Some(1), |r| r.parse().ok())?;
    Some((dp, workers, w, secs, reps))
}

/// The bench's topology of `dp` with the port options of the environment.
fn probe_topology(dp: Datapath, ns: &str) -> Option<String> {
    let mut text = topology(dp, ns)?;
    if let Ok(r) = std::env::var("RING") {
        text = text.replace(&format!("ring = {RX_RING_FRAMES}"), &format!("ring = {r}"));
    }
    if std::env::var_os("GRO").is_some() {
        text = text.replace("kind = \"port\"\n", "kind = \"port\"\ngro = true\n");
    }
    if std::env::var_os("BYPASS").is_some() {
        text = text.replace("netns = ", "qdisc_bypass = true, netns = ");
    }
    Some(text)
}

fn run(dp: Datapath, workers: usize, w: Workload, secs: f64, reps: usize) -> Result<(), String> {
    let lab = PeersLab::create("sp-probe", dp.addressing()).map_err(|e| e.to_string())?;
    let engine = match probe_topology(dp, lab.middle.name()) {
        Some(text) => {
            let topo = Topology::parse(&text).map_err(|e| format!("topology: {e}"))?;
            let pin_workers = std::env::var("PIN").map_or(PIN_WORKERS, |v| v != "0");
            let publish_ms = std::env::var("PUBLISH_MS").ok().and_then(|m| m.parse().ok()).unwrap_or(10);
            let config = EngineConfig { publish_interval: Duration::from_millis(publish_ms), ..Default::default() };
            Some(
                Engine::start(&topo, &EngineOptions { workers, config, pin_workers, ..Default::default() })
                    .map_err(|e| e.to_string())?,
            )
        }
        None if dp == Datapath::KernelBridge => {
            lab.kernel_bridge().map_err(|e| e.to_string())?;
            None
        }
        None => {
            lab.kernel_router().map_err(|e| e.to_string())?;
            None
        }
    };
    if let Some(nice) = std::env::var("NICE").ok().and_then(|n| n.parse::<i32>().ok()) {
        renice_workers(nice);
    }
    let verbose = std::env::var_os("VERBOSE").is_some();
    let cpu = || engine.as_ref().map(|e| Ok(e.snapshot().cpu_seconds));
    let ring = || engine.as_ref().map(|e| e.snapshot().devices.iter().map(|d| d.get("driver.rx_kernel_drops")).sum());
    let counters = workload::DatapathCounters { cpu_seconds: &cpu, ring_drops: &ring };
    let mut result = Ok(());
    for _ in 0..reps {
        let s = match workload::measure(&lab, w, secs, &counters) {
            Ok(s) => s,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        let lost = if s.sent_segments > 0 { s.lost as f64 * 100.0 / s.sent_segments as f64 } else { 0.0 };
        println!(
            "{} {} workers={workers} gbps={:.2} lost%={lost:.1} lost={} sent={} engine_cpu_s_per_gb={:.3} machine_cpu_s_per_gb={:.3} \
             retrans={} ring_drops={} rcvbuf_drops={}",
            dp.key(),
            w.key(),
            s.gbps,
            s.lost,
            s.sent_segments,
            s.datapath_cpu_s.map_or(0.0, |c| s.per_gb(c)),
            s.per_gb(s.machine_cpu_s),
            s.retransmits,
            s.ring_drops.map_or("-".to_string(), |n| n.to_string()),
            s.rcvbuf_drops
        );
        if verbose {
            println!("receiver /proc/net/snmp Udp:");
            for l in in_ns(lab.receiver.name(), &["cat", "/proc/net/snmp"]).lines().filter(|l| l.starts_with("Udp:")) {
                println!("  {l}");
            }
            if let Some(e) = &engine {
                std::thread::sleep(Duration::from_millis(30));
                let sn = e.snapshot();
                println!("worker packets {:?}, CPU {:.3} s, rounds {}", sn.worker_packets, sn.cpu_seconds, sn.rounds);
                for d in &sn.devices {
                    let c: Vec<String> =
                        d.counters.iter().filter(|(_, v)| **v != 0).map(|(k, v)| format!("{k}={v}")).collect();
                    println!("  {} {}: {}", d.kind, d.name, c.join(" "));
                }
            }
            print!("{}", in_ns(lab.middle.name(), &["ip", "-s", "link"]));
        }
    }
    if let Some(e) = engine {
        e.stop().map_err(|e| e.to_string())?;
    }
    result
}

/// Gives the engine's worker threads (named `sp-worker-N`) the nice value `nice`.
fn renice_workers(nice: i32) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<libc::id_t>().ok()) else { continue };
        if comm.starts_with("sp-worker") {
            // SAFETY: setpriority takes plain integers; a thread id is a valid PRIO_PROCESS target.
            let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) };
            eprintln!("worker thread {tid}: nice {nice} ({})", if rc == 0 { "set" } else { "refused" });
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some((dp, workers, w, secs, reps)) = parse(&args) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match run(dp, workers, w, secs, reps) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("live_peers_probe: {e}");
            ExitCode::FAILURE
        }
    }
}
