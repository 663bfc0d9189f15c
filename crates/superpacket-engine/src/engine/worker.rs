//! One engine worker: a device graph, its ports, and the loop that moves
//! packets between them (see the module documentation of [`super`]).

use super::stats::{DeviceSnapshot, WorkerSnapshot};
use crate::device::graph::take_held_of;
use crate::device::{DeviceId, Graph, HeldFrame, TableUsage};
use crate::io::event::{Epoll, EventFd};
use crate::io::{IoError, cputime};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use superpacket::offload::gro::{Gro, GroConfig};
use superpacket::packet::Packet;

/// Epoll token of the stop eventfd (port tokens are their slot index).
const STOP_TOKEN: u64 = u64::MAX;

/// While some port has work left (a full budget, a descriptor-less port
/// producing, a busy-polling driver), the loop asks epoll which other
/// descriptors are ready at most this often instead of every round: a
/// zero-timeout `epoll_wait` is a system call (about 0.5 us on the 2-vCPU
/// project VM), and a busy-polling vhost-user port makes rounds of a few
/// frames each (about two in the 64-byte loop of `bench vhost-user`), so a
/// call per round was a large part of each frame's cost. A port that
/// becomes ready meanwhile waits at most this long more; an idle worker
/// still sleeps in `epoll_wait` as before.
pub const BUSY_EPOLL_INTERVAL: Duration = Duration::from_micros(50);

/// How a worker behaves.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Most packets taken from one port per round (NAPI's weight, 64 in
    /// Linux): a busy port cannot starve the others, and a GRO batch ends
    /// (and is flushed) at least this often.
    pub budget: usize,
    /// GRO settings for ports with `gro = true` (each port's runs with the
    /// medium of its driver, [`crate::device::PortDriver::medium`]).
    pub gro: GroConfig,
    /// How often counters are published for `superpacket stats` (and gone
    /// ports are retried).
    pub publish_interval: Duration,
    /// How often a port whose device vanished is reopened.
    pub reopen_interval: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            budget: 64,
            gro: GroConfig::forwarder(),
            publish_interval: Duration::from_millis(100),
            reopen_interval: Duration::from_millis(500),
        }
    }
}

/// Something that happened to a port, reported to the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortEvent {
    /// The device behind the port vanished; its carrier is down.
    Gone {
        /// Port name.
        port: String,
    },
    /// The device is back and the port reopened.
    Back {
        /// Port name.
        port: String,
    },
}

/// A port as the loop sees it.
struct PortSlot {
    id: DeviceId,
    name: String,
    /// The descriptor registered with epoll (`None`: polled every round).
    fd: Option<RawFd>,
    gro: Option<Gro>,
    /// Data may be left: the last poll used its whole budget, or epoll
    /// reported the descriptor.
    pending: bool,
    /// The device vanished; reopened at `next_reopen`.
    gone: bool,
    next_reopen: Instant,
}

/// One worker: owns a graph built from the topology and runs its loop on
/// the calling thread.
pub struct Worker {
    index: usize,
    graph: Graph,
    ports: Vec<PortSlot>,
    epoll: Epoll,
    cfg: EngineConfig,
    /// Keeps the stop eventfd registered above open for the worker's life.
    _stop: Arc<EventFd>,
    shared: Arc<Mutex<WorkerSnapshot>>,
    on_event: Box<dyn FnMut(PortEvent) + Send>,
    started: Instant,
    rounds: u64,
    packets: u64,
    ready: Vec<u64>,
    /// The burst [`poll_port`](Worker::poll_port) takes from a driver
    /// ([`crate::device::PortDriver::recv_burst`]): empty between bursts,
    /// its capacity (the budget) kept, so receiving allocates nothing.
    burst: Vec<Packet>,
    /// The held payloads of the burst's packets, in packet order
    /// ([`crate::device::PortDriver::recv_burst_held`]): empty between
    /// bursts, so none outlives the round.
    held: Vec<HeldFrame>,
}

impl Worker {
    /// A worker over `graph`; ports named in `gro_ports` run GRO on what
    /// they receive. `stop` ends [`Worker::run`]; snapshots go to `shared`;
    /// port events to `on_event`.
    ///
    /// # Errors
    /// Creating the epoll instance or registering a descriptor.
    pub fn new(
        index: usize,
        graph: Graph,
        gro_ports: &[String],
        cfg: EngineConfig,
        stop: Arc<EventFd>,
        shared: Arc<Mutex<WorkerSnapshot>>,
        on_event: Box<dyn FnMut(PortEvent) + Send>,
    ) -> Result<Worker, IoError> {
        let mut graph = graph;
        let budget = cfg.budget;
        let epoll = Epoll::new(64)?;
        epoll.add(stop.as_fd().as_raw_fd(), STOP_TOKEN)?;
        let mut ports = Vec::new();
        let ids: Vec<DeviceId> = (0..graph.devices().len()).map(DeviceId).filter(|id| graph.is_port(*id)).collect();
        // Tunnel devices are UDP tunnel sockets: every port's GRO coalesces
        // their datagrams on the inner flow, as Linux's does.
        let gro_cfg = graph.tunnel_ports().into_iter().fold(cfg.gro, |g, (port, kind)| g.with_tunnel(port, kind));
        for id in ids {
            let name = graph.device(id).name.clone();
            let fd = graph.port_driver_mut(id).and_then(|d| d.poll_fd());
            if let Some(fd) = fd {
                epoll.add(fd, ports.len() as u64)?;
            }
            // GRO sees what the driver reads: raw IP packets on a TUN port.
            let gro = gro_ports.contains(&name).then(|| Gro::new(gro_cfg.with_medium(graph.device(id).medium)));
            ports.push(PortSlot { id, name, fd, gro, pending: true, gone: false, next_reopen: Instant::now() });
        }
        Ok(Worker {
            index,
            graph,
            ports,
            epoll,
            cfg,
            _stop: stop,
            shared,
            on_event,
            started: Instant::now(),
            rounds: 0,
            packets: 0,
            ready: Vec::with_capacity(64),
            burst: Vec::with_capacity(budget),
            held: Vec::with_capacity(budget),
        })
    }

    /// Makes the worker's clock count from `epoch`: the workers of one
    /// engine share it, as they share the NAT connection table, whose
    /// expiry times one worker writes and another compares.
    pub fn set_epoch(&mut self, epoch: Instant) {
        self.started = epoch;
    }

    /// The graph (for tests and the final report).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Runs until the stop eventfd is signalled; publishes a last snapshot.
    ///
    /// # Errors
    /// `epoll_wait` failing.
    pub fn run(&mut self) -> Result<(), IoError> {
        let mut next_publish = Instant::now();
        let mut next_epoll = next_publish;
        loop {
            let busy = self.ports.iter().any(|p| p.pending && !p.gone);
            // One clock read per busy round (the round's time and the
            // publish check): a read costs tens of nanoseconds and a
            // busy-polled round carries a handful of frames. Only a wait
            // that may have slept reads the clock again.
            let mut now = Instant::now();
            if !busy || now >= next_epoll {
                let timeout = if busy { Duration::ZERO } else { next_publish.saturating_duration_since(now) };
                self.ready.clear();
                let ready = &mut self.ready;
                self.epoll.wait(timeout, |t| ready.push(t))?;
                if self.ready.contains(&STOP_TOKEN) {
                    break;
                }
                for &t in &self.ready {
                    if let Some(p) = self.ports.get_mut(t as usize) {
                        p.pending = true;
                    }
                }
                if !timeout.is_zero() {
                    now = Instant::now();
                }
                next_epoll = now + BUSY_EPOLL_INTERVAL;
            }
            self.round(now);
            if now >= next_publish {
                self.housekeeping(now);
                self.publish();
                next_publish = now + self.cfg.publish_interval;
            }
        }
        for i in 0..self.ports.len() {
            self.flush_port(i);
        }
        self.publish();
        Ok(())
    }

    /// One round at time `now`: every port starts a transmit burst
    /// ([`crate::device::PortDriver::hold_tx`]), every pending port gets up
    /// to `budget` packets received, GRO'd and pushed through the graph;
    /// then every driver flushes its batched sends and unconsumed local deliveries are discarded.
    fn round(&mut self, now: Instant) {
        self.rounds += 1;
        let now_ns = now.saturating_duration_since(self.started).as_nanos() as u64;
        self.graph.set_time(now_ns);
        // What the round transmits to a port leaves in one burst at its flush.
        for slot in &self.ports {
            if let Some(d) = self.graph.port_driver_mut(slot.id) {
                d.hold_tx();
            }
        }
        for i in 0..self.ports.len() {
            if self.ports[i].pending && !self.ports[i].gone {
                let (n, busy_polling) = self.poll_port(i, now_ns);
                // Descriptor-less ports (memory, pcap replay) are polled again
                // only while they produce packets; epoll re-reports the others,
                // except a busy-polling driver, which keeps its peer's
                // notifications off and so must be polled again.
                self.ports[i].pending = n == self.cfg.budget || (self.ports[i].fd.is_none() && n > 0) || busy_polling;
            }
        }
        for i in 0..self.ports.len() {
            self.flush_port(i);
        }
        self.graph.discard_local();
    }

    fn flush_port(&mut self, i: usize) {
        self.graph.end_port_round(self.ports[i].id);
    }

    /// Receives up to `budget` packets from port `i`, through GRO if the
    /// port has it, into the graph. Returns the packets taken from the
    /// driver and whether it busy-polls ([`crate::device::PortDriver::wants_poll`]).
    fn poll_port(&mut self, i: usize, now_ns: u64) -> (usize, bool) {
        let budget = self.cfg.budget;
        let slot = &mut self.ports[i];
        let id = slot.id;
        let mut n = 0;
        while n < budget {
            let Some(driver) = self.graph.port_driver_mut(id) else { break };
            let got = driver.recv_burst_held(&mut self.burst, &mut self.held, budget - n);
            if got == 0 {
                break;
            }
            n += got;
            let Some(gro) = &mut slot.gro else {
                self.graph.receive_burst(id, &mut self.burst, &mut self.held, now_ns);
                continue;
            };
            // GRO reads payloads and keeps packets across bursts: each
            // packet is moved into it whole.
            let mut held = self.held.drain(..);
            for (i, mut pkt) in self.burst.drain(..).enumerate() {
                pkt.meta.arrival_ns.get_or_insert(now_ns);
                match take_held_of(&mut held, i).map_or(Ok(()), |h| h.materialise(&mut pkt)) {
                    Ok(()) => gro.receive(pkt),
                    Err(reason) => self.graph.count_drops(id, reason, 1),
                }
            }
            debug_assert!(held.as_slice().is_empty(), "a held frame without its packet in the burst");
        }
        if let Some(gro) = &mut slot.gro {
            gro.flush();
            for pkt in gro.drain_delivered() {
                self.graph.receive(id, pkt);
            }
        }
        // The driver's own drops are collected once per round, in `flush_port`.
        self.packets += n as u64;
        // One look-up of the driver for both questions: rounds of a
        // busy-polled port carry a frame or two.
        let (gone, busy_polling) =
            self.graph.port_driver_mut(id).map_or((false, false), |d| (d.is_gone(), d.wants_poll()));
        if gone && !slot.gone {
            self.mark_gone(i);
        }
        (n, busy_polling)
    }

    fn mark_gone(&mut self, i: usize) {
        let slot = &mut self.ports[i];
        slot.gone = true;
        slot.pending = false;
        slot.next_reopen = Instant::now() + self.cfg.reopen_interval;
        if let Some(fd) = slot.fd.take() {
            self.epoll.remove(fd);
        }
        let (id, name) = (slot.id, slot.name.clone());
        self.graph.set_carrier(id, false);
        (self.on_event)(PortEvent::Gone { port: name });
    }

    /// The graph's timers (the router's neighbour solicitations and
    /// reassembly lifetimes; what they send leaves at once); gone ports:
    /// checks the drivers (a port can vanish while idle) and tries to reopen
    /// those whose time has come.
    fn housekeeping(&mut self, now: Instant) {
        self.graph.housekeeping(now.saturating_duration_since(self.started).as_nanos() as u64);
        for i in 0..self.ports.len() {
            self.flush_port(i);
        }
        for i in 0..self.ports.len() {
            let id = self.ports[i].id;
            if self.ports[i].fd.is_none() && !self.ports[i].gone {
                // Descriptor-less ports are looked at every tick as well.
                self.ports[i].pending = true;
            }
            if !self.ports[i].gone {
                if self.graph.port_driver_mut(id).is_some_and(|d| d.is_gone()) {
                    self.mark_gone(i);
                }
                continue;
            }
            if now < self.ports[i].next_reopen {
                continue;
            }
            self.ports[i].next_reopen = now + self.cfg.reopen_interval;
            let Some(driver) = self.graph.port_driver_mut(id) else { continue };
            if driver.reopen().is_err() {
                continue;
            }
            let fd = driver.poll_fd();
            if let Some(fd) = fd
                && self.epoll.add(fd, i as u64).is_err()
            {
                continue;
            }
            let slot = &mut self.ports[i];
            slot.fd = fd;
            slot.gone = false;
            slot.pending = true;
            let name = slot.name.clone();
            self.graph.set_carrier(id, true);
            (self.on_event)(PortEvent::Back { port: name });
        }
    }

    /// The worker's counters now.
    pub fn snapshot(&mut self) -> WorkerSnapshot {
        let mut devices = Vec::with_capacity(self.graph.devices().len());
        let mut tables = Vec::new();
        self.graph.table_usage(&mut tables);
        for i in 0..self.graph.devices().len() {
            let id = DeviceId(i);
            let mut driver = Vec::new();
            if let Some(d) = self.graph.port_driver_mut(id) {
                d.driver_counters(&mut |k, v| driver.push((k.to_string(), v)));
            }
            let d = self.graph.device(id);
            let gro = self.ports.iter().find(|p| p.id == id).and_then(|p| p.gro.as_ref()).map(|g| *g.counters());
            if let Some(g) = self.ports.iter().find(|p| p.id == id).and_then(|p| p.gro.as_ref()) {
                tables.push(
                    TableUsage::new(&format!("gro:{}", d.name), g.held(), g.peak_held(), g.capacity())
                        .event("evicted", g.counters().flushed.table_full),
                );
            }
            devices.push(DeviceSnapshot {
                name: d.name.clone(),
                kind: d.kind.to_string(),
                carrier: d.carrier,
                counters: d.counters.clone(),
                driver,
                gro,
            });
        }
        WorkerSnapshot {
            worker: self.index,
            uptime_s: self.started.elapsed().as_secs_f64(),
            rounds: self.rounds,
            packets_polled: self.packets,
            cpu_seconds: cputime::thread_cpu_seconds(),
            devices,
            tables,
        }
    }

    fn publish(&mut self) {
        let snap = self.snapshot();
        if let Ok(mut s) = self.shared.lock() {
            *s = snap;
        }
    }
}
