//! DPDK 22.11 as a peer: runs the `dpdk_peer` program (built from
//! `peers/dpdk/dpdk_peer.c` by `build.rs` when libdpdk-dev is installed).
//!
//! [`run`] writes the frames to a temporary classic pcap, starts the program
//! on it and reads back its one JSON line. The program starts DPDK's EAL with
//! no hugepages and no PCI (`--no-huge --no-pci --no-shconf --no-telemetry
//! --iova-mode=va -l 0 -m <MB>`), copies the frames into mbufs, and then:
//!
//! - [`DpdkMode::Gro`]: cuts the frames, in order, into bursts of `batch` and
//!   passes each burst to `rte_gro_reassemble_burst` (lightweight mode,
//!   TCP/IPv4; every burst is flushed). **Timed**: parsing each frame for
//!   the packet type and header lengths rte_gro needs (`rte_net_get_ptype`:
//!   superpacket and tun-rs get the same raw frames and parse them
//!   themselves), the GRO calls over all bursts of the file, and refreshing
//!   the IPv4 header checksum of every merged packet (rte_gro leaves it
//!   stale; superpacket's output is a valid packet). **Not timed**: refilling
//!   fresh mbufs from the frames before each sample (GRO chains and edits
//!   the mbufs it merges), counting and freeing the output. rte_gro does not
//!   check checksums. (`dpdk_peer --ptype given` sets the packet type
//!   untimed instead, as a NIC with packet-type offload would.) It keeps at most
//!   [`GRO_MAX_BURST_ITEMS`] packets per call: with a larger `batch`, packets
//!   of flows beyond that pass through unmerged ([`DpdkRun::batch_exceeds_gro_max`]).
//! - [`DpdkMode::Gso`]: each frame is a TCP/IPv4 superpacket, cut by
//!   `rte_gso_segment` into segments of `mss` payload bytes (header mbuf +
//!   indirect payload mbuf each). **Timed**: `rte_gso_segment` plus the
//!   software IPv4 header and TCP checksums of every segment (rte_gso leaves
//!   checksums to the NIC; the other engines produce wire-ready segments, so
//!   DPDK must too). **Not timed**: freeing the segments. `batch` only groups
//!   the calls (one superpacket per call); it does not change the work.
//!
//! Equal work: every pass covers the whole file; the output packet and byte
//! counts are per pass and must be the same for every sample (the program
//! fails otherwise). One untimed warm-up pass runs first and its output is
//! verified: GRO conserves TCP payload bytes and every output's IPv4 length
//! matches it; GSO gives `ceil(payload / mss)` segments per superpacket with
//! valid IPv4 and TCP checksums, consecutive sequence numbers and payloads
//! that concatenate to the superpacket's.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use super::EngineRun;
use superpacket::pcap::{CaptureFormat, CaptureWriter, FrameAnnotation, LinkType, PcapError, WriterOptions};

/// Environment variable naming the `dpdk_peer` program at run time; it takes
/// precedence over the one `build.rs` built. (`cargo run` and `cargo test`
/// set it themselves, to the built program: they pass `build.rs`'s
/// `rustc-env` variables on at run time too. Run the binary directly to
/// override it.)
pub const PEER_ENV: &str = "SUPERPACKET_DPDK_PEER";

/// `RTE_GRO_MAX_BURST_ITEM_NUM` of DPDK 22.11: the most packets one
/// `rte_gro_reassemble_burst` call keeps in its tables.
pub const GRO_MAX_BURST_ITEMS: usize = 128;

/// Ethernet header length of the frames the program accepts (untagged).
const ETH_HLEN: u64 = 14;

/// Which DPDK offload to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DpdkMode {
    /// `rte_gro_reassemble_burst` over bursts of TCP/IPv4 frames.
    Gro,
    /// `rte_gso_segment` of TCP/IPv4 superpackets, plus software checksums.
    Gso,
}

impl DpdkMode {
    /// The program's `--mode` argument.
    pub fn as_str(self) -> &'static str {
        match self {
            DpdkMode::Gro => "gro",
            DpdkMode::Gso => "gso",
        }
    }
}

/// Why DPDK produced no figures.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The program was not built (libdpdk missing or the compile failed).
    #[error("DPDK peer not built: {0}")]
    NotBuilt(String),
    /// The EAL did not start; the reason is the program's own (rte_strerror,
    /// the EAL arguments tried and the EAL's log).
    #[error("DPDK EAL failed: {0}")]
    EalFailed(String),
    /// The program failed or printed something unexpected.
    #[error("dpdk_peer failed ({status}): {stderr}")]
    ProgramFailed {
        /// Exit status (or how the output was wrong).
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The input could not be written as a temporary pcap.
    #[error("writing the frames for dpdk_peer: {0}")]
    Pcap(#[from] PcapError),
    /// The program could not be started, or the temporary file handled.
    #[error("running dpdk_peer: {0}")]
    Io(#[from] std::io::Error),
    /// Bad arguments (no frames, batch or samples 0).
    #[error("invalid dpdk_peer arguments: {0}")]
    Invalid(String),
}

/// What DPDK did: per pass over all frames (one sample = one pass).
#[derive(Debug, Clone, PartialEq)]
pub struct DpdkRun {
    /// DPDK's version string (`rte_version()`), e.g. `DPDK 22.11.11`.
    pub version: String,
    /// Frames (GRO) or superpackets (GSO) per pass.
    pub packets_in: u64,
    /// Packets produced per pass.
    pub packets_out: u64,
    /// Ethernet frame bytes in per pass.
    pub bytes_in: u64,
    /// Ethernet frame bytes out per pass.
    pub bytes_out: u64,
    /// Frame bytes out without the Ethernet headers (IP bytes).
    pub ip_bytes_out: u64,
    /// Seconds of each timed pass.
    pub samples_secs: Vec<f64>,
    /// The EAL arguments the program used.
    pub eal_args: String,
    /// GRO: `batch` was above [`GRO_MAX_BURST_ITEMS`].
    pub batch_exceeds_gro_max: bool,
}

impl From<DpdkRun> for EngineRun {
    fn from(r: DpdkRun) -> EngineRun {
        EngineRun {
            packets_in: r.packets_in,
            packets_out: r.packets_out,
            ip_bytes_out: r.ip_bytes_out,
            // The program fails if two passes differ.
            stable: true,
            samples_secs: r.samples_secs,
        }
    }
}

/// The program's success line.
#[derive(Deserialize)]
struct Report {
    version: String,
    mode: String,
    batch: u64,
    packets_in: u64,
    packets_out: u64,
    bytes_in: u64,
    bytes_out: u64,
    samples_ns: Vec<u64>,
    #[serde(default)]
    eal_args: String,
    #[serde(default)]
    batch_exceeds_gro_max: bool,
}

/// The program's EAL failure line.
#[derive(Deserialize)]
struct ErrorReport {
    error: String,
}

/// The `dpdk_peer` program: `$SUPERPACKET_DPDK_PEER` if set, else the one
/// `build.rs` built; otherwise why there is none.
pub fn dpdk_peer_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(PEER_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() { Ok(p) } else { Err(format!("{PEER_ENV}={} is not a file", p.display())) };
    }
    match option_env!("SUPERPACKET_DPDK_PEER") {
        Some(p) if Path::new(p).is_file() => Ok(PathBuf::from(p)),
        Some(p) => Err(format!("{p} (built by build.rs) no longer exists: rebuild")),
        None => Err(option_env!("SUPERPACKET_DPDK_PEER_MISSING").unwrap_or("build.rs did not run").to_string()),
    }
}

/// A temporary file removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(ext: &str) -> TempFile {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        TempFile(std::env::temp_dir().join(format!("superpacket-dpdk-{}-{n}.{ext}", std::process::id())))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes `frames` as a classic pcap (Ethernet) at `path`.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), PcapError> {
    let mut w = CaptureWriter::create_with_options(
        path,
        CaptureFormat::PcapNanos,
        LinkType::ETHERNET,
        WriterOptions::default(),
    )?;
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(f, i as u64, &FrameAnnotation::default())?;
    }
    let mut inner = w.finish()?;
    inner.flush()?;
    Ok(())
}

/// Runs DPDK's GRO or GSO over `frames` (Ethernet, TCP/IPv4, untagged),
/// `samples` timed passes, `batch` frames per burst; `mss` is GSO's segment
/// payload (default: what fits a 1500-byte MTU, 1448 with TCP timestamps).
/// See the module documentation for what is timed.
pub fn run(
    mode: DpdkMode,
    frames: &[Vec<u8>],
    batch: usize,
    samples: usize,
    mss: Option<usize>,
) -> Result<DpdkRun, PeerError> {
    if frames.is_empty() || batch == 0 || samples == 0 {
        return Err(PeerError::Invalid(format!(
            "{} frames, batch {batch}, samples {samples}: each must be at least 1",
            frames.len()
        )));
    }
    if batch > usize::from(u16::MAX) {
        return Err(PeerError::Invalid(format!("batch {batch} is above 65535")));
    }
    let exe = dpdk_peer_path().map_err(PeerError::NotBuilt)?;
    let pcap = TempFile::new("pcap");
    write_pcap(&pcap.0, frames)?;
    let mut cmd = Command::new(&exe);
    let (batch_arg, samples_arg) = (batch.to_string(), samples.to_string());
    cmd.args(["--mode", mode.as_str(), "--pcap"]).arg(&pcap.0).args(["--batch", &batch_arg, "--samples", &samples_arg]);
    if let Some(m) = mss {
        cmd.args(["--mss", &m.to_string()]);
    }
    let out = cmd.output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let line = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    if out.status.code() == Some(3) {
        let reason = serde_json::from_str::<ErrorReport>(line).map(|e| e.error).unwrap_or_else(|_| stderr.clone());
        return Err(PeerError::EalFailed(reason));
    }
    if !out.status.success() {
        return Err(PeerError::ProgramFailed { status: out.status.to_string(), stderr });
    }
    let r: Report = serde_json::from_str(line).map_err(|e| PeerError::ProgramFailed {
        status: format!("unreadable output ({e}): {stdout}"),
        stderr: stderr.clone(),
    })?;
    let consistent = r.mode == mode.as_str()
        && r.batch == batch as u64
        && r.packets_in == frames.len() as u64
        && r.samples_ns.len() == samples
        && r.bytes_in == frames.iter().map(|f| f.len() as u64).sum::<u64>();
    if !consistent {
        return Err(PeerError::ProgramFailed { status: format!("output does not match the request: {line}"), stderr });
    }
    Ok(DpdkRun {
        version: r.version,
        packets_in: r.packets_in,
        packets_out: r.packets_out,
        bytes_in: r.bytes_in,
        bytes_out: r.bytes_out,
        ip_bytes_out: r.bytes_out - ETH_HLEN * r.packets_out,
        samples_secs: r.samples_ns.iter().map(|&ns| ns as f64 / 1e9).collect(),
        eal_args: r.eal_args,
        batch_exceeds_gro_max: r.batch_exceeds_gro_max,
    })
}

#[cfg(test)]
mod tests {
    //! These tests run the real DPDK program and fail if it is missing:
    //! `scripts/test.sh` installs `dpdk-dev` and `pkg-config`, so `build.rs`
    //! builds it.

    use super::*;
    use crate::bench::gro::{MSS, bursts};
    use superpacket::traffic::{Flow, FlowSpec, Transport};
    use superpacket::wire::TcpFlags;

    fn peer() {
        if let Err(e) = dpdk_peer_path() {
            panic!("the DPDK peer is missing ({e}); scripts/test.sh installs dpdk-dev and pkg-config");
        }
    }

    /// 64 flows x 2 segments per burst of 128: 64 merged packets per burst,
    /// each with both segments' payload.
    #[test]
    fn gro_64_flows_merges_pairs() {
        peer();
        let p = bursts(64, 2, 512, 128);
        let r = run(DpdkMode::Gro, &p.frames, p.batch, 2, None).expect("dpdk gro");
        assert_eq!(r.packets_in, 512);
        assert_eq!(r.packets_out, 4 * 64, "64 outputs per burst of 128");
        let hdr = FlowSpec::new(Transport::Tcp, false, 0).header_len() as u64;
        let bytes_in: u64 = p.frames.iter().map(|f| f.len() as u64).sum();
        assert_eq!(r.bytes_in, bytes_in);
        assert_eq!(r.bytes_out, 4 * 64 * (hdr + 2 * MSS as u64), "one header per merged pair");
        assert_eq!(r.bytes_out, bytes_in - 256 * hdr);
        assert_eq!(r.ip_bytes_out, r.bytes_out - 14 * r.packets_out);
        assert_eq!(r.samples_secs.len(), 2);
        assert!(r.samples_secs.iter().all(|&s| s > 0.0));
        assert!(r.version.starts_with("DPDK 22.11"), "{}", r.version);
        assert!(!r.batch_exceeds_gro_max);
    }

    /// A 64 KB superpacket at MSS 1448: ceil(payload / 1448) segments whose
    /// checksums the program verified (it fails otherwise); checked again here.
    #[test]
    fn gso_64k_superpacket() {
        peer();
        let payload = 45 * 1448 - 100;
        let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 3))
            .superpacket(payload, 1448, TcpFlags::PSH)
            .expect("superpacket")
            .to_vec();
        let r = run(DpdkMode::Gso, &[sp.clone(), sp], 2, 3, Some(1448)).expect("dpdk gso");
        let segs = payload.div_ceil(1448) as u64;
        assert_eq!(r.packets_in, 2);
        assert_eq!(r.packets_out, 2 * segs);
        let hdr = FlowSpec::new(Transport::Tcp, false, 3).header_len() as u64;
        assert_eq!(r.bytes_out, 2 * (segs * hdr + payload as u64));
        assert_eq!(r.samples_secs.len(), 3);
    }

    /// The default MSS fits a 1500-byte MTU; frames that are not TCP/IPv4 fail clearly.
    #[test]
    fn gso_default_mss_and_bad_input() {
        peer();
        let sp = Flow::new(FlowSpec::new(Transport::Tcp, false, 1)).superpacket(3000, 1448, TcpFlags::PSH).unwrap();
        let r = run(DpdkMode::Gso, &[sp.to_vec()], 1, 1, None).expect("dpdk gso");
        assert_eq!(r.packets_out, 3);
        let udp = Flow::new(FlowSpec::new(Transport::Udp, false, 1)).frame(100, TcpFlags::empty()).unwrap();
        match run(DpdkMode::Gro, &[udp], 1, 1, None) {
            Err(PeerError::ProgramFailed { stderr, .. }) => assert!(stderr.contains("expected TCP"), "{stderr}"),
            other => panic!("expected a program failure, got {other:?}"),
        }
    }
}
