//! Built-in kernel traffic: TCP and UDP senders and receivers that drive real
//! socket traffic between network namespaces and check that every byte
//! arrived intact (docs/kernel-oracle.md section 3: the kernel-only baselines they
//! reproduce).
//!
//! Sockets are created inside a namespace ([`NetNs::enter_scoped`]: a socket
//! keeps its namespace) and then used from ordinary threads.
//!
//! - **TCP**: [`TcpSender`] writes a deterministic pseudo-random stream
//!   ([`Pattern`]: a precomputed buffer of prime period, sent from rotating
//!   offsets, so generating costs nothing) in large writes for a duration or
//!   a byte count, then `shutdown(Write)`; [`TcpReceiver`] accepts one
//!   connection and reads until EOF. The receiver compares every byte
//!   with the pattern (reporting the offset of the first wrong one); both
//!   report the xxh3 hash of their bytes, computed after the timed part
//!   while the bytes are the pattern ([`StreamVerifier`]). [`tcp_transfer`] runs both and returns a
//!   [`TcpTransfer`] whose [`TcpTransfer::intact`] says whether sender and
//!   receiver agree on bytes and hash.
//! - **UDP**: [`UdpSender`] sends with `UDP_SEGMENT` (default 44 segments of
//!   1400 bytes = 61600 bytes per `sendmsg`); [`UdpReceiver`] reads with
//!   `UDP_GRO` on, splits each coalesced datagram at the `UDP_GRO` cmsg's
//!   `gso_size` and verifies every segment ([`UdpVerifier`]): each carries a
//!   sequence number and a payload derived from it. It counts corrupt,
//!   duplicate, lost segments and `recvmsg` calls: the average bytes per
//!   `recvmsg` shows whether GSO/GRO superpackets arrived whole.
//!   [`udp_transfer`] runs both.
//!
//! Everything has a timeout (connect, accept, read and write idle, first
//! datagram), so a broken data path gives a [`StreamError`] or a result that
//! is not intact, never a hang.
//!
//! ```text
//! Pattern::new(seed) / slice(offset, len) / mismatch(offset, data) / segment_payload(seq, len)
//! StreamVerifier::new(seed) / update(data) / bytes() / hash() / first_mismatch()
//! encode_segment(&Pattern, seq, len, out) / UdpVerifier::new(seed, segment_len) / feed(datagram, gro_size)
//! TcpReceiver::bind(_in)(…) / local_addr() / run()        TcpSender::connect(_in)(…) / run()
//! tcp_transfer(rx_ns, tx_ns, addr, &TcpConfig) -> TcpTransfer { sender, receiver }
//! UdpReceiver::bind(_in)(…) / local_addr() / run(&sender_done)    UdpSender::connect(_in)(…) / run()
//! udp_transfer(rx_ns, tx_ns, addr, &UdpConfig) -> UdpTransfer { sender, receiver }
//! ```

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use superpacket_engine::io::error::IoError;
use superpacket_engine::io::netns::NetNs;
use superpacket_engine::io::sys;
use xxhash_rust::xxh3::Xxh3Default;

/// Period of the stream pattern in bytes: the Mersenne prime 2^17 - 1, so
/// that no segment, write or superpacket size is a multiple of it.
pub const PATTERN_PERIOD: usize = 131_071;
/// Longest contiguous slice [`Pattern::slice`] returns (and the largest TCP
/// write).
pub const PATTERN_SPAN: usize = 256 * 1024;
/// Default UDP segment size (`UDP_SEGMENT` gso_size).
pub const DEFAULT_GSO_SIZE: u16 = 1400;
/// Default UDP segments per `sendmsg` (44 x 1400 = 61600 bytes).
pub const DEFAULT_GSO_SEGMENTS: u16 = 44;
/// Most segments per UDP GSO send (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_GSO_SEGMENTS: u16 = 128;
/// Bytes of the sequence number at the start of every UDP segment.
pub const SEQ_LEN: usize = 8;
/// Highest sequence number a receiver tracks (the seen-bitmap stays under
/// 128 MiB); a segment claiming a higher one counts as corrupt.
const MAX_TRACKED_SEQ: u64 = 1 << 30;
/// How often blocking loops look at their stop conditions.
const POLL_SLICE: Duration = Duration::from_millis(20);

/// Errors of the traffic generators.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A socket call failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// Nothing happened within the allowed time.
    #[error("timed out after {after:?} waiting for {what} ({bytes} bytes moved before)")]
    Timeout {
        /// What was awaited (connection, first datagram, data, send space).
        what: &'static str,
        /// The timeout.
        after: Duration,
        /// Payload bytes moved before the stall.
        bytes: u64,
    },
    /// The configuration cannot work (sizes out of range, family mismatch).
    #[error("invalid stream configuration: {0}")]
    Config(String),
    /// A worker thread of [`tcp_transfer`] or [`udp_transfer`] panicked.
    #[error("{0} thread panicked")]
    Thread(&'static str),
}

/// Result of this module.
pub type StreamResult<T> = std::result::Result<T, StreamError>;

/// When a sender stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Limit {
    /// Send for this long.
    Duration(Duration),
    /// Send this many payload bytes (UDP: rounded up to whole segments).
    Bytes(u64),
}

fn gbps(bytes: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 { bytes as f64 * 8.0 / s / 1e9 } else { 0.0 }
}

fn syscall_err(call: &'static str, what: impl Into<String>, source: std::io::Error) -> StreamError {
    StreamError::Io(IoError::Syscall { call, what: what.into(), source })
}

// ------------------------------------------------------------------ pattern

/// The deterministic pseudo-random byte stream: byte `i` of a stream is
/// `pattern[i % PATTERN_PERIOD]`. Stored as `PATTERN_PERIOD + PATTERN_SPAN`
/// bytes, so that a slice of up to [`PATTERN_SPAN`] bytes starting at any
/// offset is contiguous (no copy to send it).
#[derive(Clone)]
pub struct Pattern {
    data: Box<[u8]>,
    seed: u64,
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pattern").field("seed", &self.seed).finish_non_exhaustive()
    }
}

impl Pattern {
    /// The pattern of `seed` (splitmix64 output).
    pub fn new(seed: u64) -> Pattern {
        let mut data = vec![0u8; PATTERN_PERIOD + PATTERN_SPAN];
        let mut state = seed;
        for chunk in data[..PATTERN_PERIOD].chunks_mut(8) {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
        let (head, tail) = data.split_at_mut(PATTERN_PERIOD);
        for (i, b) in tail.iter_mut().enumerate() {
            *b = head[i % PATTERN_PERIOD];
        }
        Pattern { data: data.into_boxed_slice(), seed }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Stream bytes `offset..offset + len`, with `len` cut to [`PATTERN_SPAN`].
    pub fn slice(&self, offset: u64, len: usize) -> &[u8] {
        let start = (offset % PATTERN_PERIOD as u64) as usize;
        &self.data[start..start + len.min(PATTERN_SPAN)]
    }

    /// Compares `data` with stream bytes `offset..`: the index in `data` of
    /// the first byte that differs, or `None` when all agree.
    pub fn mismatch(&self, offset: u64, data: &[u8]) -> Option<usize> {
        let mut done = 0;
        for chunk in data.chunks(PATTERN_SPAN) {
            let want = self.slice(offset + done as u64, chunk.len());
            if chunk != want {
                let i = chunk.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
                return Some(done + i);
            }
            done += chunk.len();
        }
        None
    }

    /// An xxh3 hasher fed with stream bytes `0..len`.
    pub fn stream_hasher(&self, len: u64) -> Xxh3Default {
        let mut h = Xxh3Default::new();
        let mut done = 0u64;
        while done < len {
            let s = self.slice(done, (len - done).min(PATTERN_SPAN as u64) as usize);
            h.update(s);
            done += s.len() as u64;
        }
        h
    }

    /// xxh3-64 of stream bytes `0..len` (what a sender of `len` bytes wrote).
    pub fn stream_hash(&self, len: u64) -> u64 {
        self.stream_hasher(len).digest()
    }

    /// The payload (after the sequence number) of UDP segment `seq`, `len`
    /// bytes (cut to [`PATTERN_SPAN`]).
    pub fn segment_payload(&self, seq: u64, len: usize) -> &[u8] {
        self.slice(seq.wrapping_mul(0x9e37_79b9), len)
    }
}

// ------------------------------------------------------------ TCP verifier

/// What a TCP receiver computes over the stream: bytes, xxh3 hash, and the
/// offset of the first byte that differs from the [`Pattern`].
///
/// The bytes are compared with the pattern as they come (a `memcmp`), and
/// hashed only from the first difference on: while they match, the stream
/// *is* the pattern prefix, whose hash [`StreamVerifier::hash`] computes on
/// demand ([`Pattern::stream_hash`]), outside the timed transfer. The result
/// is the xxh3 of the bytes fed either way.
#[derive(Clone)]
pub struct StreamVerifier {
    pattern: Pattern,
    /// Hash of the real bytes, once they differed from the pattern.
    diverged: Option<Xxh3Default>,
    bytes: u64,
    first_mismatch: Option<u64>,
}

impl std::fmt::Debug for StreamVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamVerifier")
            .field("seed", &self.pattern.seed)
            .field("bytes", &self.bytes)
            .field("first_mismatch", &self.first_mismatch)
            .finish_non_exhaustive()
    }
}

impl StreamVerifier {
    /// A verifier for the stream of `seed`.
    pub fn new(seed: u64) -> StreamVerifier {
        StreamVerifier::with_pattern(Pattern::new(seed))
    }

    /// A verifier for the stream of `pattern`.
    pub fn with_pattern(pattern: Pattern) -> StreamVerifier {
        StreamVerifier { pattern, diverged: None, bytes: 0, first_mismatch: None }
    }

    /// Feeds the next bytes of the stream.
    pub fn update(&mut self, data: &[u8]) {
        match &mut self.diverged {
            Some(h) => h.update(data),
            None => {
                if let Some(i) = self.pattern.mismatch(self.bytes, data) {
                    self.first_mismatch = Some(self.bytes + i as u64);
                    // Catch up: the bytes so far were the pattern prefix.
                    let mut h = self.pattern.stream_hasher(self.bytes);
                    h.update(data);
                    self.diverged = Some(h);
                }
            }
        }
        self.bytes += data.len() as u64;
    }

    /// Bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// xxh3-64 of the bytes fed so far. Costs a pass over the pattern
    /// prefix (about 13 GB/s here) while no byte differed.
    pub fn hash(&self) -> u64 {
        match &self.diverged {
            Some(h) => h.digest(),
            None => self.pattern.stream_hash(self.bytes),
        }
    }

    /// Stream offset of the first byte that differed from the pattern.
    pub fn first_mismatch(&self) -> Option<u64> {
        self.first_mismatch
    }
}

// --------------------------------------------------------------------- TCP

/// Settings of a TCP transfer (shared by sender and receiver).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TcpConfig {
    /// When the sender stops (default 2 s).
    pub limit: Limit,
    /// Bytes per `write` (default 256 KiB, at most [`PATTERN_SPAN`]).
    pub write_size: usize,
    /// Receive buffer per `read` (default 1 MiB).
    pub read_size: usize,
    /// Connect timeout (default 3 s).
    pub connect_timeout: Duration,
    /// Longest wait for the connection to be accepted, for data to read, or
    /// for send space (default 3 s).
    pub idle_timeout: Duration,
    /// Pattern seed.
    pub seed: u64,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            limit: Limit::Duration(Duration::from_secs(2)),
            write_size: PATTERN_SPAN,
            read_size: 1 << 20,
            connect_timeout: Duration::from_secs(3),
            idle_timeout: Duration::from_secs(3),
            seed: 0x5350_4b54_0001,
        }
    }
}

impl TcpConfig {
    fn check(&self) -> StreamResult<()> {
        if self.write_size == 0 || self.write_size > PATTERN_SPAN {
            return Err(StreamError::Config(format!("write_size {} (1..={PATTERN_SPAN})", self.write_size)));
        }
        if self.read_size == 0 {
            return Err(StreamError::Config("read_size 0".into()));
        }
        if self.idle_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(StreamError::Config("zero timeout".into()));
        }
        Ok(())
    }
}

/// One side's view of a TCP stream.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TcpReport {
    /// Payload bytes written (sender) or read (receiver).
    pub bytes: u64,
    /// Sender: first write to `shutdown`; receiver: first byte to EOF.
    pub elapsed: Duration,
    /// xxh3-64 of the bytes.
    pub hash: u64,
    /// `bytes` over `elapsed`, in Gbit/s.
    pub gbps: f64,
    /// Receiver: stream offset of the first byte that differs from the
    /// pattern (`None`: all agreed; always `None` for the sender).
    pub first_mismatch: Option<u64>,
    /// `read` (receiver) or `write` (sender) calls that moved data.
    pub calls: u64,
}

/// Listens for one TCP connection and reads it to EOF.
#[derive(Debug)]
pub struct TcpReceiver {
    listener: TcpListener,
    cfg: TcpConfig,
}

impl TcpReceiver {
    /// Listens on `addr` in the current namespace (port 0: any).
    ///
    /// # Errors
    /// Bad configuration, or `bind`/`listen` failing.
    pub fn bind(addr: SocketAddr, cfg: &TcpConfig) -> StreamResult<TcpReceiver> {
        cfg.check()?;
        let listener = TcpListener::bind(addr).map_err(|e| syscall_err("bind(tcp)", addr.to_string(), e))?;
        Ok(TcpReceiver { listener, cfg: cfg.clone() })
    }

    /// Listens on `addr` inside `ns`.
    ///
    /// # Errors
    /// As [`TcpReceiver::bind`], plus `setns` failing.
    pub fn bind_in(ns: &NetNs, addr: SocketAddr, cfg: &TcpConfig) -> StreamResult<TcpReceiver> {
        ns.enter_scoped(|| TcpReceiver::bind(addr, cfg))?
    }

    /// The address listened on (with the port the kernel chose).
    ///
    /// # Errors
    /// `getsockname` failing.
    pub fn local_addr(&self) -> StreamResult<SocketAddr> {
        self.listener.local_addr().map_err(|e| syscall_err("getsockname", "tcp listener", e))
    }

    /// Accepts one connection (within `idle_timeout`), reads it until EOF,
    /// hashing and verifying, and closes it.
    ///
    /// # Errors
    /// [`StreamError::Timeout`] when no connection comes or the stream stalls
    /// for `idle_timeout`; socket errors (reset).
    pub fn run(self) -> StreamResult<TcpReport> {
        self.run_until(&AtomicBool::new(false))
    }

    /// [`TcpReceiver::run`], giving up waiting for the connection when
    /// `abort` is set.
    fn run_until(self, abort: &AtomicBool) -> StreamResult<TcpReport> {
        let cfg = &self.cfg;
        let start = Instant::now();
        loop {
            if sys::poll_readable(self.listener.as_fd(), POLL_SLICE, "tcp listener")? {
                break;
            }
            if abort.load(Ordering::Relaxed) || start.elapsed() >= cfg.idle_timeout {
                return Err(StreamError::Timeout { what: "a TCP connection", after: cfg.idle_timeout, bytes: 0 });
            }
        }
        let (mut stream, peer) = self.listener.accept().map_err(|e| syscall_err("accept", "tcp listener", e))?;
        stream.set_read_timeout(Some(cfg.idle_timeout)).map_err(|e| syscall_err("setsockopt(SO_RCVTIMEO)", "", e))?;
        let mut buf = vec![0u8; cfg.read_size];
        let mut verifier = StreamVerifier::new(cfg.seed);
        let mut first: Option<Instant> = None;
        let mut calls = 0u64;
        loop {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    first.get_or_insert_with(Instant::now);
                    calls += 1;
                    verifier.update(&buf[..n]);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(StreamError::Timeout {
                        what: "TCP data",
                        after: cfg.idle_timeout,
                        bytes: verifier.bytes(),
                    });
                }
                Err(e) => return Err(syscall_err("read(tcp)", peer.to_string(), e)),
            }
        }
        let elapsed = first.map(|t| t.elapsed()).unwrap_or_default();
        // Close first: the sender waits for it, and can hash meanwhile.
        drop(stream);
        Ok(TcpReport {
            bytes: verifier.bytes(),
            elapsed,
            hash: verifier.hash(),
            gbps: gbps(verifier.bytes(), elapsed),
            first_mismatch: verifier.first_mismatch(),
            calls,
        })
    }
}

/// A connected TCP stream that writes the pattern.
#[derive(Debug)]
pub struct TcpSender {
    stream: TcpStream,
    cfg: TcpConfig,
}

impl TcpSender {
    /// Connects to `addr` from the current namespace (within `connect_timeout`).
    ///
    /// # Errors
    /// Bad configuration, [`StreamError::Timeout`], or `connect` failing
    /// (refused, unreachable).
    pub fn connect(addr: SocketAddr, cfg: &TcpConfig) -> StreamResult<TcpSender> {
        cfg.check()?;
        let stream = TcpStream::connect_timeout(&addr, cfg.connect_timeout).map_err(|e| match e.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => {
                StreamError::Timeout { what: "TCP connect", after: cfg.connect_timeout, bytes: 0 }
            }
            _ => syscall_err("connect", addr.to_string(), e),
        })?;
        stream.set_write_timeout(Some(cfg.idle_timeout)).map_err(|e| syscall_err("setsockopt(SO_SNDTIMEO)", "", e))?;
        stream.set_read_timeout(Some(cfg.idle_timeout)).map_err(|e| syscall_err("setsockopt(SO_RCVTIMEO)", "", e))?;
        Ok(TcpSender { stream, cfg: cfg.clone() })
    }

    /// Connects to `addr` from inside `ns`; the stream works from any thread.
    ///
    /// # Errors
    /// As [`TcpSender::connect`], plus `setns` failing.
    pub fn connect_in(ns: &NetNs, addr: SocketAddr, cfg: &TcpConfig) -> StreamResult<TcpSender> {
        ns.enter_scoped(|| TcpSender::connect(addr, cfg))?
    }

    /// Writes the pattern until the limit, then `shutdown(Write)` and waits
    /// (up to `idle_timeout`) for the receiver to close.
    ///
    /// # Errors
    /// [`StreamError::Timeout`] when no send space comes for `idle_timeout`;
    /// socket errors (reset, broken pipe).
    pub fn run(mut self) -> StreamResult<TcpReport> {
        let cfg = &self.cfg;
        let pattern = Pattern::new(cfg.seed);
        let mut bytes = 0u64;
        let mut calls = 0u64;
        let start = Instant::now();
        loop {
            let want = match cfg.limit {
                Limit::Duration(d) => {
                    if start.elapsed() >= d {
                        break;
                    }
                    cfg.write_size
                }
                Limit::Bytes(total) => {
                    if bytes >= total {
                        break;
                    }
                    (total - bytes).min(cfg.write_size as u64) as usize
                }
            };
            let chunk = pattern.slice(bytes, want);
            match self.stream.write(chunk) {
                Ok(0) => return Err(syscall_err("write(tcp)", "stream", ErrorKind::WriteZero.into())),
                Ok(n) => {
                    bytes += n as u64;
                    calls += 1;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(StreamError::Timeout { what: "TCP send space", after: cfg.idle_timeout, bytes });
                }
                Err(e) => return Err(syscall_err("write(tcp)", "stream", e)),
            }
        }
        self.stream.shutdown(Shutdown::Write).map_err(|e| syscall_err("shutdown(tcp)", "stream", e))?;
        let elapsed = start.elapsed();
        // Best effort: wait for the receiver's close, so that the data are
        // delivered before the socket goes (its result decides integrity).
        let mut sink = [0u8; 64];
        while let Ok(n) = self.stream.read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        // What was written is the pattern prefix: hash it now, outside the timed part.
        let hash = pattern.stream_hash(bytes);
        Ok(TcpReport { bytes, elapsed, hash, gbps: gbps(bytes, elapsed), first_mismatch: None, calls })
    }
}

/// Both sides of a TCP transfer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TcpTransfer {
    /// What was written.
    pub sender: TcpReport,
    /// What arrived.
    pub receiver: TcpReport,
}

impl TcpTransfer {
    /// Every byte arrived unchanged: same count, same hash, no byte differing
    /// from the pattern.
    pub fn intact(&self) -> bool {
        self.sender.bytes == self.receiver.bytes
            && self.sender.hash == self.receiver.hash
            && self.receiver.first_mismatch.is_none()
    }

    /// Receiver throughput (first byte to EOF), Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.receiver.gbps
    }
}

/// The address a sender uses to reach a receiver bound to `bound` when
/// `asked` was the bind address (port 0 replaced, unspecified IP kept as the
/// loopback of its family).
fn target_addr(asked: SocketAddr, bound: SocketAddr) -> SocketAddr {
    let ip = match asked.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, bound.port())
}

fn in_ns<R: Send>(ns: Option<&NetNs>, f: impl FnOnce() -> StreamResult<R> + Send) -> StreamResult<R> {
    match ns {
        Some(ns) => ns.enter_scoped(f)?,
        None => f(),
    }
}

/// Runs a TCP transfer: a receiver listening on `addr` in `rx_ns`, a sender
/// connecting to it from `tx_ns` (`None`: the current namespace), each on
/// its own thread.
///
/// # Errors
/// The first error of either side (the receiver's wait is cut short when the
/// sender fails to connect).
pub fn tcp_transfer(
    rx_ns: Option<&NetNs>,
    tx_ns: Option<&NetNs>,
    addr: SocketAddr,
    cfg: &TcpConfig,
) -> StreamResult<TcpTransfer> {
    let receiver = in_ns(rx_ns, || TcpReceiver::bind(addr, cfg))?;
    let target = target_addr(addr, receiver.local_addr()?);
    let abort = AtomicBool::new(false);
    std::thread::scope(|s| {
        let rx = std::thread::Builder::new()
            .name("tcp-receiver".into())
            .spawn_scoped(s, || receiver.run_until(&abort))
            .map_err(|e| syscall_err("spawn", "tcp-receiver", e))?;
        let sent = in_ns(tx_ns, || TcpSender::connect(target, cfg)).and_then(TcpSender::run);
        if sent.is_err() {
            abort.store(true, Ordering::Relaxed);
        }
        let received = rx.join().map_err(|_| StreamError::Thread("tcp-receiver"))?;
        Ok(TcpTransfer { sender: sent?, receiver: received? })
    })
}

// --------------------------------------------------------------------- UDP

/// Writes UDP segment `seq` of `len` bytes (sequence number, then the
/// payload derived from it) into `out[..len]`; returns the bytes written
/// (0 when `len` < [`SEQ_LEN`] or `out` is too short).
pub fn encode_segment(pattern: &Pattern, seq: u64, len: usize, out: &mut [u8]) -> usize {
    if len < SEQ_LEN || out.len() < len || len - SEQ_LEN > PATTERN_SPAN {
        return 0;
    }
    out[..SEQ_LEN].copy_from_slice(&seq.to_le_bytes());
    out[SEQ_LEN..len].copy_from_slice(pattern.segment_payload(seq, len - SEQ_LEN));
    len
}

/// Counts and checks UDP segments as they arrive.
#[derive(Debug, Clone)]
pub struct UdpVerifier {
    pattern: Pattern,
    segment_len: usize,
    seen: Vec<u64>,
    next_expected: u64,
    /// Running totals.
    pub counts: UdpCounts,
}

/// What a [`UdpVerifier`] counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct UdpCounts {
    /// Datagram bytes received (corrupt ones included).
    pub bytes: u64,
    /// Bytes of good segments (the goodput).
    pub good_bytes: u64,
    /// Segments received (split at the GRO size), corrupt ones included.
    pub segments: u64,
    /// Distinct good segments.
    pub unique: u64,
    /// Good segments received again.
    pub duplicates: u64,
    /// Segments of the wrong length or content.
    pub corrupt: u64,
    /// Good segments with a lower sequence number than one seen before.
    pub out_of_order: u64,
    /// Highest good sequence number + 1 (0: none).
    pub highest: u64,
    /// Datagrams fed (one per `recvmsg`).
    pub datagrams: u64,
    /// Datagrams that carried a `UDP_GRO` cmsg (coalesced by the kernel).
    pub coalesced: u64,
    /// Largest datagram.
    pub max_datagram: u64,
}

impl UdpVerifier {
    /// A verifier for the segments of `seed`, each `segment_len` bytes.
    pub fn new(seed: u64, segment_len: usize) -> UdpVerifier {
        UdpVerifier {
            pattern: Pattern::new(seed),
            segment_len,
            seen: Vec::new(),
            next_expected: 0,
            counts: UdpCounts::default(),
        }
    }

    /// Feeds one received datagram; `gro_size` is the `UDP_GRO` cmsg value
    /// (`None`: the datagram is one segment).
    pub fn feed(&mut self, datagram: &[u8], gro_size: Option<u16>) {
        let c = &mut self.counts;
        c.datagrams += 1;
        c.bytes += datagram.len() as u64;
        c.max_datagram = c.max_datagram.max(datagram.len() as u64);
        let step = match gro_size {
            Some(g) if g > 0 => {
                c.coalesced += 1;
                g as usize
            }
            _ => datagram.len().max(1),
        };
        for seg in datagram.chunks(step) {
            self.check_segment(seg);
        }
    }

    /// Checks one segment: true when it is good.
    pub fn check_segment(&mut self, seg: &[u8]) -> bool {
        let c = &mut self.counts;
        c.segments += 1;
        if seg.len() != self.segment_len || seg.len() < SEQ_LEN {
            c.corrupt += 1;
            return false;
        }
        let mut sb = [0u8; SEQ_LEN];
        sb.copy_from_slice(&seg[..SEQ_LEN]);
        let seq = u64::from_le_bytes(sb);
        if seq >= MAX_TRACKED_SEQ || seg[SEQ_LEN..] != *self.pattern.segment_payload(seq, seg.len() - SEQ_LEN) {
            c.corrupt += 1;
            return false;
        }
        let (word, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
        if word >= self.seen.len() {
            self.seen.resize((word + 1).next_power_of_two(), 0);
        }
        if self.seen[word] & bit != 0 {
            c.duplicates += 1;
            return true;
        }
        self.seen[word] |= bit;
        c.unique += 1;
        c.good_bytes += seg.len() as u64;
        if seq < self.next_expected {
            c.out_of_order += 1;
        }
        self.next_expected = self.next_expected.max(seq + 1);
        c.highest = self.next_expected;
        true
    }

    /// Segments below the highest sequence number seen that never arrived.
    pub fn gaps(&self) -> u64 {
        self.counts.highest - self.counts.unique
    }
}

/// Settings of a UDP transfer (shared by sender and receiver).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UdpConfig {
    /// When the sender stops (default 2 s).
    pub limit: Limit,
    /// Segment size, `UDP_SEGMENT` (default 1400, at least [`SEQ_LEN`]).
    pub gso_size: u16,
    /// Segments per `sendmsg` (default 44; 1 sends without `UDP_SEGMENT`).
    pub segments: u16,
    /// Receiver turns `UDP_GRO` on (default true).
    pub gro: bool,
    /// Sender pacing in Gbit/s of payload (`None`: as fast as it can).
    pub rate_gbps: Option<f64>,
    /// Longest wait for the first datagram, for more data, or for send space
    /// (default 3 s).
    pub idle_timeout: Duration,
    /// How long the receiver goes on reading after the sender finished,
    /// once no more data come (default 200 ms).
    pub drain_gap: Duration,
    /// Socket buffer sizes (`SO_RCVBUFFORCE` / `SO_SNDBUFFORCE`, default 16 MiB).
    pub socket_buffer: usize,
    /// Pattern seed.
    pub seed: u64,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            limit: Limit::Duration(Duration::from_secs(2)),
            gso_size: DEFAULT_GSO_SIZE,
            segments: DEFAULT_GSO_SEGMENTS,
            gro: true,
            rate_gbps: None,
            idle_timeout: Duration::from_secs(3),
            drain_gap: Duration::from_millis(200),
            socket_buffer: 16 << 20,
            seed: 0x5350_5544_0001,
        }
    }
}

impl UdpConfig {
    /// Payload bytes per `sendmsg`.
    pub fn send_size(&self) -> usize {
        self.gso_size as usize * self.segments as usize
    }

    fn check(&self) -> StreamResult<()> {
        let g = self.gso_size as usize;
        if g < SEQ_LEN || g - SEQ_LEN > PATTERN_SPAN {
            return Err(StreamError::Config(format!("gso_size {g} (at least {SEQ_LEN})")));
        }
        if self.segments == 0 || self.segments > MAX_GSO_SEGMENTS {
            return Err(StreamError::Config(format!("segments {} (1..={MAX_GSO_SEGMENTS})", self.segments)));
        }
        if self.send_size() > 65_507 {
            return Err(StreamError::Config(format!("{} bytes per send (at most 65507)", self.send_size())));
        }
        if self.idle_timeout.is_zero() {
            return Err(StreamError::Config("zero idle_timeout".into()));
        }
        if matches!(self.rate_gbps, Some(r) if r.is_nan() || r <= 0.0) {
            return Err(StreamError::Config("rate_gbps must be positive".into()));
        }
        Ok(())
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, val: libc::c_int) -> std::io::Result<()> {
    // SAFETY: the option value is a live c_int and its size is passed; the fd is borrowed from a
    // socket that outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&val as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// Sets a socket buffer size, forcing past `rmem_max`/`wmem_max` when allowed.
fn set_buffer(fd: RawFd, force: libc::c_int, plain: libc::c_int, size: usize) -> StreamResult<()> {
    let v = size.min(i32::MAX as usize / 2) as libc::c_int;
    if setsockopt_int(fd, libc::SOL_SOCKET, force, v).is_ok() {
        return Ok(());
    }
    setsockopt_int(fd, libc::SOL_SOCKET, plain, v).map_err(|e| syscall_err("setsockopt(SO_*BUF)", "udp", e))
}

fn set_timeout(fd: RawFd, opt: libc::c_int, t: Duration) -> StreamResult<()> {
    let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as libc::suseconds_t };
    // SAFETY: `tv` is a live timeval and its size is passed; the fd is a valid socket.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(syscall_err("setsockopt(SO_*TIMEO)", "udp", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// What a UDP sender did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UdpSendReport {
    /// Payload bytes the kernel accepted.
    pub bytes: u64,
    /// Segments accepted (sequence numbers `0..segments`).
    pub segments: u64,
    /// Successful `sendmsg` calls.
    pub sends: u64,
    /// Sends refused with a transient error (`ENOBUFS`, `ECONNREFUSED`):
    /// their segments count as sent (and then lost).
    pub send_errors: u64,
    /// First to last send.
    pub elapsed: Duration,
    /// `bytes` over `elapsed`, Gbit/s.
    pub gbps: f64,
}

/// A connected UDP socket that sends sequence-numbered segments with
/// `UDP_SEGMENT`.
#[derive(Debug)]
pub struct UdpSender {
    sock: UdpSocket,
    cfg: UdpConfig,
}

impl UdpSender {
    /// A socket of `addr`'s family in the current namespace, connected to
    /// `addr`, with `UDP_SEGMENT` = `gso_size` (when `segments` > 1).
    ///
    /// # Errors
    /// Bad configuration, or a socket call failing (`UDP_SEGMENT` unknown).
    pub fn connect(addr: SocketAddr, cfg: &UdpConfig) -> StreamResult<UdpSender> {
        cfg.check()?;
        let any: SocketAddr = match addr {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(any).map_err(|e| syscall_err("bind(udp)", any.to_string(), e))?;
        sock.connect(addr).map_err(|e| syscall_err("connect(udp)", addr.to_string(), e))?;
        let fd = sock.as_raw_fd();
        set_buffer(fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, cfg.socket_buffer)?;
        set_timeout(fd, libc::SO_SNDTIMEO, cfg.idle_timeout)?;
        if cfg.segments > 1 {
            setsockopt_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT, cfg.gso_size as libc::c_int)
                .map_err(|e| syscall_err("setsockopt(UDP_SEGMENT)", addr.to_string(), e))?;
        }
        Ok(UdpSender { sock, cfg: cfg.clone() })
    }

    /// [`UdpSender::connect`] inside `ns`; the socket works from any thread.
    ///
    /// # Errors
    /// As [`UdpSender::connect`], plus `setns` failing.
    pub fn connect_in(ns: &NetNs, addr: SocketAddr, cfg: &UdpConfig) -> StreamResult<UdpSender> {
        ns.enter_scoped(|| UdpSender::connect(addr, cfg))?
    }

    /// Sends until the limit. Each `sendmsg` carries `segments` segments
    /// gathered from iovecs (sequence number + pattern slice: no copy).
    ///
    /// # Errors
    /// [`StreamError::Timeout`] when the socket gives no send space for
    /// `idle_timeout`; other socket errors.
    pub fn run(self) -> StreamResult<UdpSendReport> {
        let cfg = &self.cfg;
        let pattern = Pattern::new(cfg.seed);
        let g = cfg.gso_size as usize;
        let total_segments = match cfg.limit {
            Limit::Bytes(b) => Some(b.div_ceil(g as u64)),
            Limit::Duration(_) => None,
        };
        let mut seqs = [[0u8; SEQ_LEN]; MAX_GSO_SEGMENTS as usize];
        let mut seq = 0u64;
        let (mut sends, mut send_errors) = (0u64, 0u64);
        let start = Instant::now();
        let mut last = start;
        loop {
            let n = match (cfg.limit, total_segments) {
                (Limit::Duration(d), _) if start.elapsed() >= d => break,
                (_, Some(t)) if seq >= t => break,
                (_, Some(t)) => (t - seq).min(cfg.segments as u64) as usize,
                _ => cfg.segments as usize,
            };
            if let Some(rate) = cfg.rate_gbps {
                let due = Duration::from_secs_f64(seq as f64 * g as f64 * 8.0 / (rate * 1e9));
                let now = start.elapsed();
                if due > now + Duration::from_micros(200) {
                    std::thread::sleep(due - now);
                }
            }
            let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 2 * MAX_GSO_SEGMENTS as usize];
            for (i, s) in seqs.iter_mut().enumerate().take(n) {
                *s = (seq + i as u64).to_le_bytes();
            }
            for (i, (pair, s)) in iov.chunks_exact_mut(2).zip(&seqs).enumerate().take(n) {
                pair[0] = sys::iovec_ro(s);
                pair[1] = sys::iovec_ro(pattern.segment_payload(seq + i as u64, g - SEQ_LEN));
            }
            let want = n * g;
            // SAFETY: an all-zero msghdr is valid (null name and control, no iovecs); the fields
            // set below point to `iov`, which outlives the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = 2 * n;
            // SAFETY: `msg` points to 2n iovecs of live, readable slices (sequence numbers in
            // `seqs`, pattern slices); the kernel only reads them.
            let rc = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, 0) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) | Some(libc::ECONNREFUSED) => {
                        // The segments are gone: count them as sent, so the receiver reports them lost.
                        send_errors += 1;
                        seq += n as u64;
                        std::thread::yield_now();
                        continue;
                    }
                    Some(libc::EAGAIN) => {
                        return Err(StreamError::Timeout {
                            what: "UDP send space",
                            after: cfg.idle_timeout,
                            bytes: seq * g as u64,
                        });
                    }
                    _ => return Err(syscall_err("sendmsg(udp)", "UDP_SEGMENT send", e)),
                }
            }
            if rc as usize != want {
                return Err(StreamError::Io(IoError::ShortWrite {
                    call: "sendmsg(udp)",
                    written: rc as usize,
                    expected: want,
                }));
            }
            seq += n as u64;
            sends += 1;
            last = Instant::now();
        }
        let elapsed = last - start;
        let bytes = seq * g as u64;
        Ok(UdpSendReport { bytes, segments: seq, sends, send_errors, elapsed, gbps: gbps(bytes, elapsed) })
    }
}

/// What a UDP receiver got.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UdpRecvReport {
    /// Segment counts ([`UdpVerifier`]).
    pub counts: UdpCounts,
    /// Segments below the highest one seen that never arrived (losses at
    /// the tail are only known to [`UdpTransfer::lost`]).
    pub gaps: u64,
    /// `recvmsg` calls that returned a datagram.
    pub recv_calls: u64,
    /// Datagram bytes per `recvmsg` (61600 when every GSO send arrived whole).
    pub avg_bytes_per_recv: f64,
    /// First to last datagram.
    pub elapsed: Duration,
    /// Good segment bytes over `elapsed`, Gbit/s.
    pub gbps: f64,
}

/// A UDP socket that receives, with `UDP_GRO`, and verifies segments.
#[derive(Debug)]
pub struct UdpReceiver {
    sock: UdpSocket,
    cfg: UdpConfig,
}

impl UdpReceiver {
    /// Binds `addr` in the current namespace (port 0: any), with `UDP_GRO`
    /// when configured.
    ///
    /// # Errors
    /// Bad configuration or a socket call failing.
    pub fn bind(addr: SocketAddr, cfg: &UdpConfig) -> StreamResult<UdpReceiver> {
        cfg.check()?;
        let sock = UdpSocket::bind(addr).map_err(|e| syscall_err("bind(udp)", addr.to_string(), e))?;
        let fd = sock.as_raw_fd();
        set_buffer(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, cfg.socket_buffer)?;
        set_timeout(fd, libc::SO_RCVTIMEO, POLL_SLICE)?;
        if cfg.gro {
            setsockopt_int(fd, libc::SOL_UDP, libc::UDP_GRO, 1)
                .map_err(|e| syscall_err("setsockopt(UDP_GRO)", addr.to_string(), e))?;
        }
        Ok(UdpReceiver { sock, cfg: cfg.clone() })
    }

    /// [`UdpReceiver::bind`] inside `ns`.
    ///
    /// # Errors
    /// As [`UdpReceiver::bind`], plus `setns` failing.
    pub fn bind_in(ns: &NetNs, addr: SocketAddr, cfg: &UdpConfig) -> StreamResult<UdpReceiver> {
        ns.enter_scoped(|| UdpReceiver::bind(addr, cfg))?
    }

    /// The bound address.
    ///
    /// # Errors
    /// `getsockname` failing.
    pub fn local_addr(&self) -> StreamResult<SocketAddr> {
        self.sock.local_addr().map_err(|e| syscall_err("getsockname", "udp receiver", e))
    }

    /// Receives until `sender_done` is set and nothing came for
    /// `drain_gap` after the first datagram, or nothing came for
    /// `idle_timeout`.
    ///
    /// # Errors
    /// [`StreamError::Timeout`] when no datagram at all comes within
    /// `idle_timeout`; socket errors.
    pub fn run(self, sender_done: &AtomicBool) -> StreamResult<UdpRecvReport> {
        let cfg = &self.cfg;
        let mut verifier = UdpVerifier::new(cfg.seed, cfg.gso_size as usize);
        let mut buf = vec![0u8; 65_536 + 4096];
        let mut cbuf = [0u64; 8];
        let start = Instant::now();
        let mut first: Option<Instant> = None;
        let mut last = start;
        let mut done_at: Option<Instant> = None;
        loop {
            match self.recv_one(&mut buf, &mut cbuf)? {
                Some((len, gro)) => {
                    let now = Instant::now();
                    first.get_or_insert(now);
                    last = now;
                    verifier.feed(&buf[..len], gro);
                    continue;
                }
                None => {
                    let now = Instant::now();
                    if done_at.is_none() && sender_done.load(Ordering::Acquire) {
                        done_at = Some(now);
                    }
                    let quiet = now - last;
                    // Before the first datagram the drain gap does not
                    // apply: on a loaded machine the first ones (held for
                    // neighbour resolution) may come after the sender is done.
                    let drained =
                        first.is_some() && done_at.is_some_and(|d| now - d >= cfg.drain_gap && quiet >= cfg.drain_gap);
                    if drained || quiet >= cfg.idle_timeout {
                        break;
                    }
                }
            }
        }
        if first.is_none() {
            return Err(StreamError::Timeout { what: "a UDP datagram", after: start.elapsed(), bytes: 0 });
        }
        let elapsed = first.map(|f| last - f).unwrap_or_default();
        let c = verifier.counts.clone();
        Ok(UdpRecvReport {
            gaps: verifier.gaps(),
            recv_calls: c.datagrams,
            avg_bytes_per_recv: if c.datagrams > 0 { c.bytes as f64 / c.datagrams as f64 } else { 0.0 },
            elapsed,
            gbps: gbps(c.good_bytes, elapsed),
            counts: c,
        })
    }

    /// One `recvmsg`: the datagram length and the `UDP_GRO` size, or `None`
    /// on timeout.
    fn recv_one(&self, buf: &mut [u8], cbuf: &mut [u64; 8]) -> StreamResult<Option<(usize, Option<u16>)>> {
        let mut iov = sys::iovec_rw(buf);
        // SAFETY: an all-zero msghdr is valid; the fields set below point to `iov` and `cbuf`,
        // which outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(cbuf);
        // SAFETY: `msg` describes one writable buffer (`buf`) and a writable, 8-byte aligned
        // control buffer of the stated sizes.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                // ICMP errors queued on the socket (e.g. from an earlier run): not data.
                Some(libc::ECONNREFUSED) => Ok(None),
                _ => Err(syscall_err("recvmsg(udp)", "UDP_GRO receive", e)),
            };
        }
        let mut gro = None;
        // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR stay within msg_controllen
        // of `cbuf`, and CMSG_DATA is read only for cmsgs whose length covers the value.
        unsafe {
            let mut cm = libc::CMSG_FIRSTHDR(&msg);
            while !cm.is_null() {
                let c = &*cm;
                if c.cmsg_level == libc::SOL_UDP && c.cmsg_type == libc::UDP_GRO {
                    let data_len = c.cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let p = libc::CMSG_DATA(cm);
                    if data_len >= 4 {
                        gro = Some(std::ptr::read_unaligned(p.cast::<i32>()) as u16);
                    } else if data_len >= 2 {
                        gro = Some(std::ptr::read_unaligned(p.cast::<u16>()));
                    }
                }
                cm = libc::CMSG_NXTHDR(&msg, cm);
            }
        }
        Ok(Some((n as usize, gro)))
    }
}

/// Both sides of a UDP transfer.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UdpTransfer {
    /// What was sent.
    pub sender: UdpSendReport,
    /// What arrived.
    pub receiver: UdpRecvReport,
}

impl UdpTransfer {
    /// Segments sent that never arrived.
    pub fn lost(&self) -> u64 {
        self.sender.segments.saturating_sub(self.receiver.counts.unique)
    }

    /// No corrupt segment (loss allowed: UDP may drop under load).
    pub fn no_corruption(&self) -> bool {
        self.receiver.counts.corrupt == 0 && self.receiver.counts.highest <= self.sender.segments
    }

    /// No corrupt segment and none lost.
    pub fn intact(&self) -> bool {
        self.no_corruption() && self.lost() == 0
    }

    /// Received goodput, Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.receiver.gbps
    }
}

/// Runs a UDP transfer: a receiver bound to `addr` in `rx_ns`, a sender
/// connected to it from `tx_ns` (`None`: the current namespace); the
/// receiver stops `drain_gap` after the sender finished.
///
/// # Errors
/// The first error of either side.
pub fn udp_transfer(
    rx_ns: Option<&NetNs>,
    tx_ns: Option<&NetNs>,
    addr: SocketAddr,
    cfg: &UdpConfig,
) -> StreamResult<UdpTransfer> {
    let receiver = in_ns(rx_ns, || UdpReceiver::bind(addr, cfg))?;
    let target = target_addr(addr, receiver.local_addr()?);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let rx = std::thread::Builder::new()
            .name("udp-receiver".into())
            .spawn_scoped(s, || receiver.run(&done))
            .map_err(|e| syscall_err("spawn", "udp-receiver", e))?;
        let sent = in_ns(tx_ns, || UdpSender::connect(target, cfg)).and_then(UdpSender::run);
        done.store(true, Ordering::Release);
        let received = rx.join().map_err(|_| StreamError::Thread("udp-receiver"))?;
        Ok(UdpTransfer { sender: sent?, receiver: received? })
    })
}
