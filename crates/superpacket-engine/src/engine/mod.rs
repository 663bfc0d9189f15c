//! The live data path: workers that move packets between real ports
//! through a device graph (`superpacket run`, `superpacket demo`).
//!
//! Each [`Worker`] owns a [`Graph`] built from the topology and runs an
//! epoll loop modelled on NAPI:
//!
//! 1. wait for port descriptors (level-triggered), the stop eventfd, or the
//!    next housekeeping tick;
//! 2. take up to `budget` packets from each ready port (64, like a NAPI
//!    weight); a port that used its whole budget is polled again at once,
//!    without waiting, so no port starves the others;
//! 3. ports with `gro = true` run them through GRO ([`superpacket::offload::gro`],
//!    with the medium of the port's driver: raw IP on a TUN port, whose
//!    driver frames the aggregates for the graph afterwards) and flush it at
//!    the end of the batch (the end of a NAPI poll);
//! 4. the graph carries every packet up and down the device stack,
//!    superpackets whole; segmentation happens only at the final port
//!    (offload-rules 3.1, 9.2);
//! 5. every driver flushes its batched sends; packets delivered to a device
//!    without an upper (the engine has no host stack) are dropped and
//!    counted as `no-host-stack`.
//!
//! Every `publish_interval` (100 ms) a worker publishes its counters
//! ([`stats::WorkerSnapshot`]) and retries ports whose device vanished
//! ([`crate::device::PortDriver::is_gone`]): such a port's carrier goes down
//! (a bond fails over), and it comes back by itself when the device does.
//!
//! **Workers and sharding.** With `workers = N > 1` every worker builds its
//! own graph from the same topology: TAPs and TUNs are opened multi-queue (one queue
//! per worker; the kernel picks a TX queue by flow hash, the RSS of a TAP)
//! and AF_PACKET sockets join a `PACKET_FANOUT_HASH` group, so each flow
//! stays on one worker. Most state is per worker; the state a flow's
//! packets may need on any worker is shared: the connection table of NAT
//! (a connection's two directions hash differently after translation;
//! [`crate::device::conntrack`], sharded locks) and the router's neighbour
//! table (an ARP or NDP reply may reach another worker than the one holding
//! packets for it; [`crate::device::neighbours`], per-worker copies
//! refreshed from a shared table). Topologies with pcap ports (one file)
//! need a single worker; [`Engine::start`] refuses them with several.
//! Bridges keep an FDB per worker: an FDB miss floods, which is correct if
//! slower.

pub mod control;
pub mod privileges;
pub mod stats;
pub mod worker;

pub use stats::{DeviceTotals, EngineSnapshot, WorkerSnapshot};
pub use worker::{EngineConfig, PortEvent, Worker};

use crate::device::{BuildOptions, Graph, StackMode, Topology, TopologyError};
use crate::io::event::EventFd;
use crate::io::{IoError, affinity};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The engine could not start or failed while running.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The topology is invalid or a port could not be opened.
    #[error("{0}")]
    Topology(#[from] TopologyError),
    /// A system call of the event loop failed.
    #[error("{0}")]
    Io(#[from] IoError),
    /// The options do not fit the topology.
    #[error("{0}")]
    Config(String),
    /// A worker thread failed or panicked.
    #[error("worker {worker}: {message}")]
    Worker {
        /// Worker index.
        worker: usize,
        /// What happened.
        message: String,
    },
}

/// How to start an engine.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Worker threads (0 or 1: one).
    pub workers: usize,
    /// Loop settings.
    pub config: EngineConfig,
    /// Overrides the topology's stack mode.
    pub mode: Option<StackMode>,
    /// Directory relative paths of the topology are resolved against.
    pub base_dir: Option<PathBuf>,
    /// Overrides every TAP and TUN port's offloads ([`BuildOptions::tap_offloads`]).
    pub tap_offloads: Option<u32>,
    /// Overrides every AF_PACKET port's batch ([`BuildOptions::packet_batch`]).
    pub packet_batch: Option<usize>,
    /// Pins worker `i` to the `i`-th CPU (wrapping) of those the thread
    /// calling [`OpenEngine::start`] may run on. Unpinned, the scheduler
    /// tends to pull a worker onto the CPU of the local sender whose
    /// softirq wakes it (a synchronous wake-up), where the two then share
    /// a CPU; pinned, the worker keeps its CPU and the scheduler moves the
    /// other threads instead. A pinned worker cannot leave a CPU that
    /// other busy threads hold (docs/benchmarks.md, "One stream, two
    /// workers: pinned workers").
    pub pin_workers: bool,
}

/// A running engine: worker threads plus the handles to watch and stop them.
pub struct Engine {
    stop: Arc<EventFd>,
    threads: Vec<JoinHandle<Result<(), IoError>>>,
    shared: Vec<Arc<Mutex<WorkerSnapshot>>>,
    events: Receiver<PortEvent>,
}

impl Engine {
    /// Builds one graph per worker from `topology` (opening every port) and
    /// starts the workers: [`Engine::open`] then [`OpenEngine::start`].
    ///
    /// # Errors
    /// A topology error (naming its line), a port that cannot be opened,
    /// options that do not fit (several workers with pcap ports), or
    /// a thread that cannot be started.
    pub fn start(topology: &Topology, opts: &EngineOptions) -> Result<Engine, EngineError> {
        Engine::open(topology, opts)?.start()
    }

    /// Builds one graph per worker from `topology`, opening every port, but
    /// starts no thread yet: the caller can still act as the process's only
    /// thread (bind its control socket, drop privileges,
    /// [`privileges::drop_privileges`]) before [`OpenEngine::start`].
    ///
    /// # Errors
    /// As [`Engine::start`], but for the threads.
    pub fn open(topology: &Topology, opts: &EngineOptions) -> Result<OpenEngine, EngineError> {
        let workers = opts.workers.max(1);
        if workers > 1 && topology.has_pcap_ports() {
            return Err(EngineError::Config(format!(
                "pcap ports write one file; run this topology with one worker (asked for {workers})"
            )));
        }
        let gro_ports = topology.gro_ports();
        let fanout_group = (std::process::id() as u16).wrapping_mul(31);
        let mut graphs: Vec<Graph> = Vec::with_capacity(workers);
        for _ in 0..workers {
            let build = BuildOptions {
                mode: opts.mode,
                base_dir: opts.base_dir.clone(),
                workers,
                fanout_group,
                tap_offloads: opts.tap_offloads,
                packet_batch: opts.packet_batch,
                ..BuildOptions::default()
            };
            graphs.push(topology.build_with(&build)?);
        }
        // One NAT connection table and one neighbour table for all workers:
        // the kernel spreads packets over them by its own flow hash, so
        // both directions of a connection, and an ARP reply and the packets
        // waiting for it, may reach different workers.
        if let Some((first, rest)) = graphs.split_first_mut() {
            for g in rest {
                g.share_tables(first);
            }
        }
        // One clock for all workers: connection expiry times written by
        // one are compared with another's clock.
        let epoch = std::time::Instant::now();
        let stop = Arc::new(EventFd::new()?);
        let (tx, events) = mpsc::channel();
        let mut shared = Vec::with_capacity(workers);
        let mut built = Vec::with_capacity(workers);
        for (i, g) in graphs.into_iter().enumerate() {
            let slot = Arc::new(Mutex::new(WorkerSnapshot { worker: i, ..WorkerSnapshot::default() }));
            let tx = tx.clone();
            let mut w = Worker::new(
                i,
                g,
                &gro_ports,
                opts.config.clone(),
                stop.clone(),
                slot.clone(),
                Box::new(move |e| {
                    let _ = tx.send(e);
                }),
            )?;
            w.set_epoch(epoch);
            shared.push(slot);
            built.push(w);
        }
        Ok(OpenEngine { stop, built, shared, events, pin_workers: opts.pin_workers })
    }
}

/// An engine whose ports are open and whose workers have not started
/// ([`Engine::open`]). Dropping it closes the ports.
pub struct OpenEngine {
    stop: Arc<EventFd>,
    built: Vec<Worker>,
    shared: Vec<Arc<Mutex<WorkerSnapshot>>>,
    events: Receiver<PortEvent>,
    pin_workers: bool,
}

impl OpenEngine {
    /// Starts one thread per worker (each pinned to its CPU with
    /// [`EngineOptions::pin_workers`]).
    ///
    /// # Errors
    /// A thread that cannot be started or pinned (the ones started are stopped).
    pub fn start(self) -> Result<Engine, EngineError> {
        let OpenEngine { stop, built, shared, events, pin_workers } = self;
        let workers = built.len();
        let cpus = if pin_workers { affinity::cpus(&affinity::current()?) } else { Vec::new() };
        let mut threads = Vec::with_capacity(workers);
        for mut w in built {
            let idx = threads.len();
            let h = std::thread::Builder::new()
                .name(format!("sp-worker-{idx}"))
                .spawn(move || w.run())
                .map_err(|e| EngineError::Worker { worker: idx, message: format!("cannot start thread: {e}") })
                .and_then(|h| {
                    let Some(&cpu) = cpus.get(idx % cpus.len().max(1)) else { return Ok(h) };
                    match affinity::pin_thread(&h, cpu) {
                        Ok(()) => Ok(h),
                        Err(e) => {
                            // Not in `threads`: stopped here, the others below.
                            stop.notify();
                            let _ = h.join();
                            Err(EngineError::Worker { worker: idx, message: e.to_string() })
                        }
                    }
                });
            match h {
                Ok(h) => threads.push(h),
                Err(e) => {
                    let _ = (Engine { stop, threads, shared, events }).stop();
                    return Err(e);
                }
            }
        }
        Ok(Engine { stop, threads, shared, events })
    }
}

impl Engine {
    /// The counters now (each worker publishes every `publish_interval`).
    pub fn snapshot(&self) -> EngineSnapshot {
        merge_published(&self.shared)
    }

    /// Port events (gone, back) that happened since the last call.
    pub fn take_events(&self) -> Vec<PortEvent> {
        self.events.try_iter().collect()
    }

    /// True while every worker thread is running.
    pub fn is_running(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Stops the workers, waits for them (their ports close: created TAPs
    /// vanish, offloads are restored) and returns the final counters.
    ///
    /// # Errors
    /// A worker's loop failed or panicked.
    pub fn stop(self) -> Result<EngineSnapshot, EngineError> {
        self.stop.notify();
        let mut first_err = None;
        for (i, t) in self.threads.into_iter().enumerate() {
            let r = match t.join() {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => EngineError::Worker { worker: i, message: e.to_string() },
                Err(_) => EngineError::Worker { worker: i, message: "panicked".into() },
            };
            first_err.get_or_insert(r);
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(merge_published(&self.shared)),
        }
    }
}

/// The workers' latest published snapshots, summed.
fn merge_published(shared: &[Arc<Mutex<WorkerSnapshot>>]) -> EngineSnapshot {
    let snaps: Vec<WorkerSnapshot> = shared.iter().map(|s| s.lock().map(|g| g.clone()).unwrap_or_default()).collect();
    EngineSnapshot::merge(&snaps)
}

#[cfg(test)]
mod tests {
    use super::{Engine, EngineOptions};
    use crate::device::Topology;
    use crate::io::affinity;

    /// The CPUs each of the `workers` threads named `sp-worker-N` of this
    /// process may run on, by N (waiting up to 5 s for every worker to have
    /// named itself: a thread sets its own name once it runs).
    fn worker_cpus(workers: usize) -> Vec<(usize, Vec<usize>)> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let found = named_worker_cpus();
            if found.len() >= workers || std::time::Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn named_worker_cpus() -> Vec<(usize, Vec<usize>)> {
        let mut found = Vec::new();
        for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let Some(n) = comm.trim().strip_prefix("sp-worker-").and_then(|n| n.parse().ok()) else { continue };
            let tid = t.file_name().to_str().unwrap().parse().unwrap();
            found.push((n, affinity::cpus(&affinity::of_thread(tid).unwrap())));
        }
        found.sort();
        found
    }

    #[test]
    fn pinned_workers_each_keep_one_cpu_in_turn() {
        // The only test of this binary that starts workers: the threads named sp-worker-N are these.
        let topo =
            Topology::parse("[[device]]\nname = \"a\"\nkind = \"port\"\n\n[[device]]\nname = \"b\"\nkind = \"port\"\n")
                .unwrap();
        let allowed = affinity::cpus(&affinity::current().unwrap());
        let workers = allowed.len() + 1;
        let engine =
            Engine::start(&topo, &EngineOptions { workers, pin_workers: true, ..EngineOptions::default() }).unwrap();
        let pinned = worker_cpus(workers);
        engine.stop().unwrap();
        let expected: Vec<(usize, Vec<usize>)> = (0..workers).map(|i| (i, vec![allowed[i % allowed.len()]])).collect();
        assert_eq!(pinned, expected, "worker i on the i-th allowed CPU, wrapping");

        let engine = Engine::start(&topo, &EngineOptions { workers: 2, ..EngineOptions::default() }).unwrap();
        let free = worker_cpus(2);
        engine.stop().unwrap();
        assert_eq!(free, vec![(0, allowed.clone()), (1, allowed)], "unpinned workers keep every CPU");
    }
}
