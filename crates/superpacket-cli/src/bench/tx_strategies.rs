//! Seed result 4 (the transmit policy of a paravirtual NIC driver: a lone
//! non-GSO packet gets its checksum completed in software so that it fits
//! one direct descriptor), measured between two real processes over a
//! link of [`LinkKind`]: the measurement, the estimator and the figures
//! shared by `bench vhost-tx` ([`super::vhost_tx`]) and suite scenario 4.
//!
//! # Set-up
//!
//! The benchmark spawns a peer process ([`PeerProcess`]) that answers on
//! the far end of the link: UDP to port 7001, 7002 or 7003 is echoed
//! (addresses and ports swapped, the checksum handed back partial, as a
//! stack's reply: [`reflect`]), anything to port 9 is counted and dropped.
//! The client sends each request with the strategy of its echo port
//! ([`echo_port`]), so the three strategies share one link, one memory
//! region and the same two processes (candidates that each had their own
//! peer differed by up to 25% with the *same* strategy).
//!
//! Requests are UDP/IPv4 with a partial checksum (`CHECKSUM_PARTIAL`, as a
//! socket hands them to a driver), one at a time: no `xmit_more`. This
//! thread runs on one CPU and the peer on another ([`affinity`]: two
//! processes that busy-poll must not share a CPU); the caller's affinity is
//! restored at the end.
//!
//! # Estimator
//!
//! The three strategies run interleaved ([`super::measure_interleaved`]):
//! [`SAMPLES`] rounds of one short sample (2 ms; 10 ms for the streams) of
//! each. Every figure is the **fastest sample** of its candidate. Other
//! processes only ever add time, and on the shared 2-vCPU machine a sample
//! in which one of the two processes was preempted takes 5-10 times longer
//! (the partner spins on an empty ring): the samples are bimodal, and a
//! median measures how busy the machine was rather than the link.
//! `rr_clean_sample_share` says how many request/response samples were
//! within 25% of their candidate's fastest.
//!
//! # Figures
//!
//! - `rr_tps_<strategy>_<size>`: request/response transactions per second
//!   with `<size>`-byte UDP payloads ([`RR_SIZES`], 64 B to a full 1500-byte
//!   IP packet); both ends poll the ring for up to [`BUSY_POLL`] before
//!   sleeping on the eventfd (vhost-net's `busyloop_timeout`, `SO_BUSY_POLL`).
//!   `rr_tps_<strategy>` is the rate over the mix (one transaction of each
//!   size); `rr_swcsum_vs_indirect` and `rr_swcsum_vs_nocsum` are ratios of
//!   the mix rates, `_<size>` per size.
//! - `rr_notify_tps_<strategy>`: 64-byte transactions with no busy polling
//!   (each side sleeps on its eventfd: the cross-CPU wake-ups dominate).
//! - `stream_pps_<strategy>`: 64-byte packets sent one at a time to the
//!   discard port (each is "lone"); `stream_batch_pps_<strategy>`: the same
//!   in batches of [`STREAM_BATCH`] (`xmit_more` on all but the last);
//!   `stream_tso_gbps_<strategy>`: 64 KB TCP superpackets.
//! - `swcsum_direct_rr_direct_share`, `swcsum_direct_lone_direct_share`,
//!   `swcsum_direct_batch_indirect_share`, ...: the fraction of frames the
//!   client sent in each form, which shows what the policy did.
//! - `integrity_ok`: every reply matched its request, and the peer counted
//!   exactly the frames sent to it, none refused.
//!
//! The targets of the issue: `rr_swcsum_vs_indirect >= 1.2` and
//! `rr_swcsum_vs_nocsum >= 0.95`.
//!
//! No delay is added anywhere: the strategies differ only by the work
//! their forms need ([`superpacket_engine::io::virtio_user::VirtioUser::send_with`]).

use super::peer_process::PeerProcess;
use super::{BenchReport, MeasureConfig, Measurement, batch, format_value, measure_interleaved};
use std::path::{Path, PathBuf};
use std::time::Duration;
use superpacket::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::l4_pseudo_header_sum;
use superpacket::wire::{FrameHeaders, L3Kind, TcpFlags};
use superpacket_engine::io::affinity;
use superpacket_engine::io::tx_policy::{TxForm, TxStrategy};

/// UDP port the peer echoes (RFC 862).
pub const ECHO_PORT: u16 = 7;
/// UDP ports 7001, 7002, 7003: echoed; the client sends to each with the
/// strategy of that index in [`TxStrategy::ALL`] (so one link compares all
/// three, and the port says which strategy a frame was sent with).
pub const ECHO_PORT_BASE: u16 = 7001;
/// Port the peer counts and drops (RFC 863).
pub const DISCARD_PORT: u16 = 9;
/// UDP payload sizes of the request/response test.
pub const RR_SIZES: [usize; 5] = [64, 256, 512, 1024, 1472];
/// How long each side polls the ring before sleeping.
pub const BUSY_POLL: Duration = Duration::from_micros(200);
/// Samples per candidate (rounds); the figures are the fastest sample.
pub const SAMPLES: usize = 101;
/// Packets per batch of the batched stream.
pub const STREAM_BATCH: usize = 32;
/// The targets: (name, ratio result, minimum).
pub const TARGETS: [(&str, &str, f64); 2] =
    [("swcsum_vs_indirect", "rr_swcsum_vs_indirect", 1.2), ("swcsum_vs_nocsum", "rr_swcsum_vs_nocsum", 0.95)];

/// Options of [`run_over`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxBenchOptions {
    /// Much shorter measurement (for tests and smoke runs).
    pub quick: bool,
}

/// Turns a received TCP/UDP frame into its reply in place, as a responder's
/// stack would build it: MAC and IP addresses and ports swapped, the L4
/// checksum field holding the pseudo-header sum (`CHECKSUM_PARTIAL`);
/// GSO metadata kept. `None` for other frames.
pub fn reflect(frame: &mut [u8], received: &OffloadMeta) -> Option<OffloadMeta> {
    let h = FrameHeaders::parse(frame).ok()?;
    if h.is_fragment || !matches!(h.l3, L3Kind::Ipv4 | L3Kind::Ipv6) {
        return None;
    }
    let offset = usize::from(h.l4.csum_offset()?);
    let swap = |f: &mut [u8], a: usize, b: usize, n: usize| {
        for i in 0..n {
            f.swap(a + i, b + i);
        }
    };
    swap(frame, 0, 6, 6);
    let l3 = h.l3_offset;
    match h.l3 {
        L3Kind::Ipv4 => swap(frame, l3 + 12, l3 + 16, 4),
        _ => swap(frame, l3 + 8, l3 + 24, 16),
    }
    let l4 = h.l4_offset;
    swap(frame, l4, l4 + 2, 2);
    let pseudo = l4_pseudo_header_sum(frame, &h)?;
    frame[l4 + offset..l4 + offset + 2].copy_from_slice(&pseudo.to_be_bytes());
    let mut meta =
        OffloadMeta { csum: ChecksumState::Partial { start: l4 as u16, offset: offset as u16 }, ..*received };
    meta.gso_type = meta.gso_type.without(GsoType::DODGY);
    Some(meta)
}

/// The echo port of requests sent with `s` ([`ECHO_PORT_BASE`] + the index
/// in [`TxStrategy::ALL`]).
pub fn echo_port(s: TxStrategy) -> u16 {
    ECHO_PORT_BASE + TxStrategy::ALL.iter().position(|x| *x == s).unwrap_or(0) as u16
}

/// The client's end of the benchmark's link (the virtio-user frontend:
/// [`super::vhost_tx::VirtioLink`]).
pub trait StrategyLink {
    /// Sends one frame with transmit policy `s`; the form it took.
    ///
    /// # Errors
    /// The link refused or failed.
    fn send_frame(&mut self, s: TxStrategy, frame: &[u8], meta: &OffloadMeta, more: bool) -> Result<TxForm, String>;
    /// Sends a superpacket with transmit policy `strategy`.
    ///
    /// # Errors
    /// The link refused or failed.
    fn send_packet(&mut self, strategy: TxStrategy, packet: &Packet, more: bool) -> Result<(), String>;
    /// Waits at most `timeout` for the next frame, copied to the start of
    /// `buf`; its length.
    ///
    /// # Errors
    /// The link failed.
    fn recv_wait(&mut self, buf: &mut Vec<u8>, timeout: Duration) -> Result<Option<usize>, String>;
}

/// The link a transmit-policy benchmark runs over.
pub struct LinkKind<L> {
    /// The report's name (`vhost-tx`).
    pub bench: &'static str,
    /// Spawns the peer process listening on the socket (busy polling, CPU).
    pub spawn_peer: fn(&Path, Duration, Option<usize>) -> Result<PeerProcess, String>,
    /// Attaches the client to the peer's socket (busy polling).
    pub connect: fn(&Path, Duration) -> Result<L, String>,
}

/// The benchmark's one link and what it checks.
struct Conn<L> {
    client: L,
    /// A request per strategy (its echo port names the strategy).
    reqs: [Vec<u8>; 3],
    meta: OffloadMeta,
    payload_at: usize,
    buf: Vec<u8>,
    /// Transactions completed (replies matched).
    transactions: u64,
    seq: u64,
    /// Frames sent to the discard port.
    discards: u64,
    /// Transactions whose reply did not match, send failures, timeouts.
    errors: u64,
    /// Frames sent per strategy and form ([`TxForm`] as index).
    forms: [[u64; TxForm::ALL.len()]; 3],
    stream: Vec<u8>,
    stream_meta: OffloadMeta,
    tso: Packet,
}

/// A UDP/IPv4 frame of `payload` bytes to `port` with a partial checksum.
fn udp_request(payload: usize, port: u16) -> (Vec<u8>, OffloadMeta) {
    let mut spec = FlowSpec::new(Transport::Udp, false, 1);
    spec.dst_port = port;
    let p = Flow::new(spec).superpacket(payload, 9000, TcpFlags::empty()).expect("a small UDP frame");
    (p.to_vec(), p.meta)
}

impl<L: StrategyLink> Conn<L> {
    fn new(client: L) -> Conn<L> {
        let (stream, stream_meta) = udp_request(64, DISCARD_PORT);
        let mut spec = FlowSpec::new(Transport::Tcp, false, 2);
        spec.dst_port = DISCARD_PORT;
        let tso = Flow::new(spec).superpacket(64_000, 1448, TcpFlags::PSH).expect("a TCP superpacket");
        let mut c = Conn {
            client,
            reqs: Default::default(),
            meta: OffloadMeta::default(),
            payload_at: 14 + 20 + 8,
            buf: Vec::with_capacity(70_000),
            transactions: 0,
            seq: 0,
            discards: 0,
            errors: 0,
            forms: [[0; TxForm::ALL.len()]; 3],
            stream,
            stream_meta,
            tso,
        };
        c.set_size(RR_SIZES[0]);
        c
    }

    fn set_size(&mut self, payload: usize) {
        for (k, s) in TxStrategy::ALL.into_iter().enumerate() {
            (self.reqs[k], self.meta) = udp_request(payload, echo_port(s));
        }
    }

    /// One request and its reply, both sent with strategy `k`.
    #[inline]
    fn transact(&mut self, k: usize) {
        if self.errors > 0 {
            return; // a broken link is reported, not retried
        }
        self.seq += 1;
        let at = self.payload_at;
        let req = &mut self.reqs[k];
        req[at..at + 8].copy_from_slice(&self.seq.to_be_bytes());
        match self.client.send_frame(TxStrategy::ALL[k], req, &self.meta, false) {
            Ok(form) => self.forms[k][form as usize] += 1,
            Err(_) => {
                self.errors += 1;
                return;
            }
        }
        match self.client.recv_wait(&mut self.buf, Duration::from_secs(2)) {
            Ok(Some(len)) if len == req.len() && self.buf[at..at + 8] == self.seq.to_be_bytes() => {
                self.transactions += 1;
            }
            _ => self.errors += 1,
        }
    }

    /// `n` packets to the discard port with strategy `k` (`xmit_more` on
    /// all but the last).
    #[inline]
    fn stream(&mut self, k: usize, n: usize) {
        if self.errors > 0 {
            return;
        }
        for i in 0..n {
            match self.client.send_frame(TxStrategy::ALL[k], &self.stream, &self.stream_meta, i + 1 < n) {
                Ok(form) => self.forms[k][form as usize] += 1,
                Err(_) => {
                    self.errors += 1;
                    return;
                }
            }
        }
        self.discards += n as u64;
    }

    #[inline]
    fn stream_tso(&mut self, k: usize) {
        if self.errors > 0 {
            return;
        }
        if self.client.send_packet(TxStrategy::ALL[k], &self.tso, false).is_err() {
            self.errors += 1;
            return;
        }
        self.discards += 1;
    }
}

/// The fastest sample's time per iteration (see the module documentation:
/// other processes only ever add time).
fn best(m: &Measurement) -> f64 {
    m.secs_per_iter.iter().copied().fold(f64::INFINITY, f64::min)
}

/// Rate (per second) of a candidate, from its fastest sample.
fn rate(m: &Measurement, per_iter: f64) -> f64 {
    per_iter / best(m)
}

/// `a`'s best rate over `b`'s.
fn ratio(a: &Measurement, b: &Measurement) -> f64 {
    best(b) / best(a)
}

/// Share of samples within 25 % of their candidate's fastest: how much of
/// the run was not disturbed by other processes.
fn clean_share(ms: &[&Measurement]) -> f64 {
    let (mut clean, mut all) = (0usize, 0usize);
    for m in ms {
        let b = best(m);
        clean += m.secs_per_iter.iter().filter(|&&s| s <= 1.25 * b).count();
        all += m.secs_per_iter.len();
    }
    clean as f64 / all.max(1) as f64
}

/// Runs one candidate per strategy, interleaved, over the one link.
fn interleaved<L: StrategyLink>(
    cfg: &MeasureConfig,
    conn: &mut Conn<L>,
    f: fn(&mut Conn<L>, usize),
) -> Vec<Measurement> {
    let conn = std::cell::RefCell::new(conn);
    let conn = &conn;
    let mut cands: Vec<_> = (0..TxStrategy::ALL.len()).map(|k| batch(move || f(&mut conn.borrow_mut(), k))).collect();
    let m = measure_interleaved(cfg, &mut cands);
    drop(cands);
    m
}

/// Spawns the peer and attaches the client.
fn setup<L: StrategyLink>(
    kind: &LinkKind<L>,
    dir: &Path,
    busy_poll: Duration,
    tag: &str,
    cpu: Option<usize>,
) -> Result<(PeerProcess, Conn<L>), String> {
    let sock = dir.join(format!("{tag}.sock"));
    let peer = (kind.spawn_peer)(&sock, busy_poll, cpu)?;
    let client = (kind.connect)(&sock, busy_poll)?;
    Ok((peer, Conn::new(client)))
}

/// Detaches the client, collects the peer's report and checks it.
fn teardown<L>(bench: &str, peer: PeerProcess, conn: Conn<L>, ok: &mut bool) {
    if conn.errors > 0 {
        eprintln!("bench {bench}: {} transaction or send errors", conn.errors);
        *ok = false;
    }
    let (echoed, discarded) = (conn.transactions, conn.discards);
    drop(conn);
    match peer.finish() {
        Ok(r) => {
            if r.echoed != echoed || r.discarded != discarded || r.bad_frames > 0 || !r.rx_drops.is_empty() {
                eprintln!("bench {bench}: peer counted {r:?}, expected {echoed} echoes and {discarded} discards");
                *ok = false;
            }
        }
        Err(e) => {
            eprintln!("bench {bench}: {e}");
            *ok = false;
        }
    }
}

/// A private directory for the peers' sockets, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("sp-tx-bench-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the benchmark over the link `kind`, calling `on_step(description,
/// step, total_steps)` before each step and once more with `step ==
/// total_steps` when done.
pub fn run_over<L: StrategyLink>(
    kind: &LinkKind<L>,
    opts: &TxBenchOptions,
    on_step: &mut dyn FnMut(&str, usize, usize),
) -> BenchReport {
    let mut report = BenchReport::new(kind.bench);
    if let Err(e) = run_inner(kind, opts, on_step, &mut report) {
        eprintln!("bench {}: {e}", kind.bench);
        report.push("integrity_ok", 0.0, "bool");
    }
    report
}

fn run_inner<L: StrategyLink>(
    kind: &LinkKind<L>,
    opts: &TxBenchOptions,
    on_step: &mut dyn FnMut(&str, usize, usize),
    report: &mut BenchReport,
) -> Result<(), String> {
    // More, shorter samples than the default: the two processes share two
    // CPUs with whatever else runs, so samples hit by a preemption are
    // common and the medians need more of them.
    let cfg = if opts.quick {
        MeasureConfig::quick()
    } else {
        MeasureConfig { warmup: Duration::from_millis(20), sample_time: Duration::from_millis(2), samples: SAMPLES }
    };
    // Streams need longer samples: the ring (256 frames) decouples the
    // two sides, so a sample must hold many ring-fulls.
    let stream_cfg = if opts.quick {
        MeasureConfig::quick()
    } else {
        MeasureConfig { warmup: Duration::from_millis(20), sample_time: Duration::from_millis(10), samples: 31 }
    };
    let total = RR_SIZES.len() + 4;
    let dir = TempDir::new()?;
    let names: Vec<&str> = TxStrategy::ALL.iter().map(|s| s.name()).collect();
    let mut ok = true;
    // The client here, the peer on another CPU (see `affinity`); the
    // caller's affinity is restored at the end.
    let restore = affinity::Restore::current();
    let allowed = restore.cpus();
    let peer_cpu = if allowed.len() >= 2 && affinity::pin(allowed[0]).is_ok() { Some(allowed[1]) } else { None };
    report.push("cpus_pinned", if peer_cpu.is_some() { 1.0 } else { 0.0 }, "bool");

    // Request/response with busy polling, per size.
    let (peer, mut conn) = setup(kind, dir.path(), BUSY_POLL, "rr", peer_cpu)?;
    let mut per_size: Vec<Vec<Measurement>> = Vec::new();
    let mut phases = Vec::new();
    for (step, &size) in RR_SIZES.iter().enumerate() {
        on_step(&format!("rr {size} B"), step, total);
        conn.set_size(size);
        per_size.push(interleaved(&cfg, &mut conn, Conn::transact));
    }
    phases.push(conn.forms);
    // Streams.
    on_step("stream 64 B", RR_SIZES.len(), total);
    let stream_lone = interleaved(&stream_cfg, &mut conn, |c, k| c.stream(k, 1));
    phases.push(conn.forms);
    on_step("stream 64 B batched", RR_SIZES.len() + 1, total);
    let stream_batch = interleaved(&stream_cfg, &mut conn, |c, k| c.stream(k, STREAM_BATCH));
    phases.push(conn.forms);
    on_step("stream 64 KB TSO", RR_SIZES.len() + 2, total);
    let stream_tso = interleaved(&stream_cfg, &mut conn, Conn::stream_tso);
    // A last transaction: every frame before it was consumed.
    conn.transact(0);
    teardown(kind.bench, peer, conn, &mut ok);

    // Request/response without busy polling (eventfd wake-ups each way).
    on_step("rr 64 B, no busy polling", RR_SIZES.len() + 3, total);
    let (peer, mut conn) = setup(kind, dir.path(), Duration::ZERO, "notify", peer_cpu)?;
    let notify = interleaved(&cfg, &mut conn, Conn::transact);
    teardown(kind.bench, peer, conn, &mut ok);

    // Figures: fastest samples (see the module documentation). The mix is
    // one transaction of each size.
    let mix_secs: Vec<f64> = (0..names.len()).map(|k| per_size.iter().map(|m| best(&m[k])).sum()).collect();
    for (k, name) in names.iter().enumerate() {
        report.push(format!("rr_tps_{name}"), RR_SIZES.len() as f64 / mix_secs[k], "tps");
    }
    report.push("rr_swcsum_vs_indirect", mix_secs[1] / mix_secs[0], "x");
    report.push("rr_swcsum_vs_nocsum", mix_secs[2] / mix_secs[0], "x");
    for (m, size) in per_size.iter().zip(RR_SIZES) {
        for (k, name) in names.iter().enumerate() {
            report.push(format!("rr_tps_{name}_{size}"), rate(&m[k], 1.0), "tps");
        }
        report.push(format!("rr_swcsum_vs_indirect_{size}"), ratio(&m[0], &m[1]), "x");
        report.push(format!("rr_swcsum_vs_nocsum_{size}"), ratio(&m[0], &m[2]), "x");
    }
    let rr_all: Vec<&Measurement> = per_size.iter().flatten().collect();
    report.push("rr_clean_sample_share", clean_share(&rr_all), "fraction");
    for (k, name) in names.iter().enumerate() {
        report.push(format!("rr_notify_tps_{name}"), rate(&notify[k], 1.0), "tps");
    }
    report.push("rr_notify_swcsum_vs_indirect", ratio(&notify[0], &notify[1]), "x");
    report.push("rr_notify_swcsum_vs_nocsum", ratio(&notify[0], &notify[2]), "x");
    for (k, name) in names.iter().enumerate() {
        report.push(format!("stream_pps_{name}"), rate(&stream_lone[k], 1.0), "pps");
    }
    report.push("stream_swcsum_vs_indirect", ratio(&stream_lone[0], &stream_lone[1]), "x");
    report.push("stream_swcsum_vs_nocsum", ratio(&stream_lone[0], &stream_lone[2]), "x");
    for (k, name) in names.iter().enumerate() {
        report.push(format!("stream_batch_pps_{name}"), rate(&stream_batch[k], STREAM_BATCH as f64), "pps");
    }
    for (k, name) in names.iter().enumerate() {
        let bits = 8.0 * 64_054.0;
        report.push(format!("stream_tso_gbps_{name}"), rate(&stream_tso[k], bits) / 1e9, "Gbps");
    }
    // What each strategy did: the forms the client sent, per phase.
    const N: usize = TxForm::ALL.len();
    let share = |f: &[u64; N], forms: &[TxForm]| {
        let all: u64 = f.iter().sum();
        forms.iter().map(|x| f[*x as usize]).sum::<u64>() as f64 / all.max(1) as f64
    };
    let diff =
        |a: &[[u64; N]; 3], b: &[[u64; N]; 3], k: usize| -> [u64; N] { std::array::from_fn(|i| a[k][i] - b[k][i]) };
    let (rr, lone, batched) = (&phases[0], &phases[1], &phases[2]);
    let direct = [TxForm::Direct, TxForm::DirectOffload, TxForm::DirectSwCsum];
    let indirect = [TxForm::IndirectOffload];
    report.push("swcsum_direct_rr_direct_share", share(&rr[0], &direct), "fraction");
    report.push("offload_indirect_rr_indirect_share", share(&rr[1], &indirect), "fraction");
    report.push("direct_nocsum_rr_direct_share", share(&rr[2], &direct), "fraction");
    report.push("swcsum_direct_lone_direct_share", share(&diff(lone, rr, 0), &direct), "fraction");
    report.push("swcsum_direct_batch_indirect_share", share(&diff(batched, lone, 0), &indirect), "fraction");
    report.push("integrity_ok", if ok { 1.0 } else { 0.0 }, "bool");
    for (name, result, min) in TARGETS {
        let v = report.get(result).unwrap_or(f64::NAN);
        report.push(format!("target_{name}_pass"), if v >= min { 1.0 } else { 0.0 }, "bool");
    }
    on_step("done", total, total);
    Ok(())
}

/// The table of a transmit-policy report under `header`.
pub fn render_with(report: &BenchReport, header: &str) -> String {
    let g = |n: &str| report.get(n);
    let cell = |v: Option<f64>| v.map_or("-".to_string(), format_value);
    let names: Vec<&str> = TxStrategy::ALL.iter().map(|s| s.name()).collect();
    let mut out = String::from(header);
    out += &format!("{:<34}{:>16}{:>18}{:>16}\n", "figure", names[0], names[1], names[2]);
    let mut row = |label: String, key: &dyn Fn(&str) -> String| {
        out += &format!("{label:<34}");
        for (i, n) in names.iter().enumerate() {
            let w = if i == 1 { 18 } else { 16 };
            out += &format!("{:>w$}", cell(g(&key(n))));
        }
        out += "\n";
    };
    row("rr tps (64-1472 B mix)".into(), &|n| format!("rr_tps_{n}"));
    for size in RR_SIZES {
        row(format!("rr tps {size} B"), &|n| format!("rr_tps_{n}_{size}"));
    }
    row("rr tps 64 B, no busy poll".into(), &|n| format!("rr_notify_tps_{n}"));
    row("stream pps 64 B, lone".into(), &|n| format!("stream_pps_{n}"));
    row("stream pps 64 B, batches of 32".into(), &|n| format!("stream_batch_pps_{n}"));
    row("stream Gbps 64 KB TSO".into(), &|n| format!("stream_tso_gbps_{n}"));
    out += &format!(
        "forms sent: request/response: swcsum_direct {} direct, offload_indirect {} indirect, direct_nocsum {} direct; \
         swcsum_direct stream: lone {} direct, batched {} indirect\n",
        cell(g("swcsum_direct_rr_direct_share")),
        cell(g("offload_indirect_rr_indirect_share")),
        cell(g("direct_nocsum_rr_direct_share")),
        cell(g("swcsum_direct_lone_direct_share")),
        cell(g("swcsum_direct_batch_indirect_share")),
    );
    out += &format!(
        "figures are the fastest of {} samples; samples within 25% of the fastest (undisturbed): {}\n",
        SAMPLES,
        cell(g("rr_clean_sample_share")),
    );
    let per_size: Vec<String> = RR_SIZES.iter().map(|s| cell(g(&format!("rr_swcsum_vs_indirect_{s}")))).collect();
    out += &format!(
        "ratios: rr swcsum/indirect {} (per size {}), rr swcsum/nocsum {}\n        \
         no-busy-poll rr swcsum/indirect {}, lone stream swcsum/indirect {}\n",
        cell(g("rr_swcsum_vs_indirect")),
        per_size.join(" / "),
        cell(g("rr_swcsum_vs_nocsum")),
        cell(g("rr_notify_swcsum_vs_indirect")),
        cell(g("stream_swcsum_vs_indirect")),
    );
    out += &format!("integrity_ok: {}\n", cell(g("integrity_ok")));
    for (name, result, min) in TARGETS {
        let v = g(result);
        let pass = v.is_some_and(|v| v >= min);
        out += &format!(
            "target rr {name} >= {min}x: {} {}\n",
            v.map_or("-".into(), |v| format!("{v:.3}x")),
            if pass { "PASS" } else { "FAIL" }
        );
    }
    out
}
