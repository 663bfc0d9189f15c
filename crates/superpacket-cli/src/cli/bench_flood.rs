//! `superpacket bench flood` (root only): the issue-10 flood target, live.
//!
//! In a lab of throwaway namespaces ([`superpacket_lab::lab`]), `superpacket
//! run` (this binary, a child process) routes between the TAPs of A and B
//! with NAT (masquerade out of B), GRO on A's port and a connection table
//! of `--max-connections`. For each flood ([`superpacket_lab::flood`]) a fresh
//! engine is started (so one flood's full tables do not bias the next), a
//! kernel TCP flow A -> B is connected, and after `WARMUP` the flood starts
//! from A and lasts until the flow ends. Reported: the flow's Gbps
//! unloaded and under each flood (the warm-up is included in the flooded
//! figure, a small bias toward 1), the ratio (target >= 0.5), and the peak
//! of every bounded table against its limit.
//!
//! The flood is paced (`--rate`, default 300k frames/s: it fills a
//! 4096-entry connection table in 14 ms and the 4 MiB reassembly budget in
//! well under a second), so that the figure measures the engine under a
//! flood rather than the sender thread taking one of a small machine's
//! cores from the TCP flow; `--rate 0` floods as fast as one thread can.

use super::{CliError, EXIT_OK};
use crate::bench::BenchReport;
use clap::Args;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use superpacket_engine::engine::control::{StatsFormat, query};
use superpacket_lab::flood::{self, FloodKind, FloodPlan};
use superpacket_lab::lab::{HOST_B_V4, Lab, TAP_A};
use superpacket_lab::streams::{self, Limit, TcpConfig};

/// Time between the flow's start and the flood's.
const WARMUP: Duration = Duration::from_millis(300);

/// Options of `superpacket bench flood`.
#[derive(Debug, Args)]
pub struct FloodBenchArgs {
    /// Print one JSON object `{"scenario", "results": [{"name","value","unit"}]}`.
    #[arg(long)]
    pub json: bool,
    /// Seconds of each TCP transfer (1 with --quick).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Shorter transfers.
    #[arg(long)]
    pub quick: bool,
    /// NAT connection table size of the engine.
    #[arg(long, default_value_t = 4096)]
    pub max_connections: u32,
    /// Flood frames per second (0: as fast as one sender thread can go,
    /// which on a small machine also takes a core from the TCP flow).
    #[arg(long, default_value_t = 300_000)]
    pub rate: u64,
}

struct Engine {
    child: Child,
    socket: std::path::PathBuf,
    dir: std::path::PathBuf,
}

impl Engine {
    fn start(topology: &str) -> Result<Engine, CliError> {
        let dir = std::env::temp_dir().join(format!("superpacket-bench-flood-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
        let topo = dir.join("flood.toml");
        std::fs::write(&topo, topology).map_err(|e| CliError(format!("{}: {e}", topo.display())))?;
        let socket = dir.join("flood.sock");
        let exe = std::env::current_exe().map_err(|e| CliError(format!("current_exe: {e}")))?;
        let mut child = Command::new(exe)
            .args(["run", "--status-interval", "0", "--stats-socket"])
            .arg(&socket)
            .arg(&topo)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| CliError(format!("starting the engine: {e}")))?;
        let t0 = Instant::now();
        while !socket.exists() {
            if let Ok(Some(st)) = child.try_wait() {
                return Err(CliError(format!("the engine exited early ({st})")));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CliError("the engine did not start".into()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Engine { child, socket, dir })
    }

    fn stats(&self) -> Result<serde_json::Value, CliError> {
        let text = query(Path::new(&self.socket), StatsFormat::Json).map_err(|e| CliError(format!("stats: {e}")))?;
        serde_json::from_str(&text).map_err(|e| CliError(format!("stats: {e}")))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: kill with the PID of a child this process started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One TCP transfer A -> B of `secs`, with `kind` flooding from `WARMUP` on.
fn measure(lab: &Lab, secs: f64, kind: Option<FloodKind>, rate: u64) -> Result<(f64, u64), CliError> {
    let cfg = TcpConfig { limit: Limit::Duration(Duration::from_secs_f64(secs)), ..TcpConfig::default() };
    let addr = SocketAddr::new(HOST_B_V4.into(), 5201);
    std::thread::scope(|s| {
        let flow = s.spawn(|| streams::tcp_transfer(Some(&lab.b), Some(&lab.a), addr, &cfg));
        let mut sent = 0;
        if let Some(kind) = kind {
            std::thread::sleep(WARMUP);
            let mac = flood::neighbour_mac(&lab.a, "10.71.0.1".parse().expect("address"))
                .ok_or_else(|| CliError("A has not resolved the router".into()))?;
            let left = Duration::from_secs_f64(secs).saturating_sub(WARMUP);
            let rep = flood::flood(
                &lab.a,
                TAP_A,
                mac,
                &FloodPlan { kind, max_frames: 100_000_000, max_time: left, rate, seed: 42 },
            )
            .map_err(|e| CliError(format!("flood: {e}")))?;
            sent = rep.sent;
        }
        let t = flow.join().expect("flow thread").map_err(|e| CliError(format!("TCP flow: {e}")))?;
        if !t.intact() {
            return Err(CliError(format!("the TCP flow was not intact: {t:?}")));
        }
        Ok((t.gbps(), sent))
    })
}

/// Runs the benchmark.
pub fn run(args: &FloodBenchArgs) -> Result<u8, CliError> {
    if let Err(why) = superpacket_engine::io::netns::privileges_available() {
        return Err(CliError(format!("bench flood needs root: {why}")));
    }
    let secs = if args.quick { 1.0 } else { args.seconds.max(1.0) };
    let lab =
        Lab::create(&format!("sp-bflood-{}", std::process::id()), false).map_err(|e| CliError(format!("lab: {e}")))?;
    let topo = flood::nat_topology(&lab, u64::from(args.max_connections));
    let mut report = BenchReport::new("flood");
    let base = {
        let _engine = Engine::start(&topo)?;
        measure(&lab, secs, None, args.rate)?.0
    };
    report.push("tcp_unloaded_gbps", base, "Gbit/s");
    let pace = if args.rate == 0 { "unpaced".to_string() } else { format!("{} frames/s", args.rate) };
    report.push("flood_rate_fps", args.rate as f64, "frames/s");
    let mut human = format!(
        "TCP A -> B through the NAT engine, {secs} s per transfer, floods at {pace}\nunloaded: {base:.2} Gbit/s\n"
    );
    for kind in FloodKind::ALL {
        let engine = Engine::start(&topo)?;
        let (gbps, sent) = measure(&lab, secs, Some(kind), args.rate)?;
        std::thread::sleep(Duration::from_millis(200));
        let s = engine.stats()?;
        let name = kind.name().replace('-', "_");
        let ratio = if base > 0.0 { gbps / base } else { 0.0 };
        report.push(format!("tcp_{name}_gbps"), gbps, "Gbit/s");
        report.push(format!("ratio_{name}"), ratio, "x");
        report.push(format!("flood_{name}_frames"), sent as f64, "frames");
        human += &format!(
            "{:<14} {gbps:.2} Gbit/s, ratio {ratio:.2} (target >= 0.5){}; {sent} flood frames\n",
            kind.name(),
            if ratio >= 0.5 { "" } else { " BELOW TARGET" }
        );
        for t in s["tables"].as_array().into_iter().flatten() {
            let (tn, peak, limit) =
                (t["name"].as_str().unwrap_or("?"), t["peak"].as_u64().unwrap_or(0), t["limit"].as_u64().unwrap_or(0));
            let key = tn.replace([':', '-'], "_");
            report.push(format!("{name}_{key}_peak"), peak as f64, "");
            report.push(format!("{name}_{key}_limit"), limit as f64, "");
            human += &format!("    {tn:<16} peak {peak:>9} / limit {limit:>9}  {}\n", t["events"]);
        }
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{human}");
    }
    Ok(EXIT_OK)
}
