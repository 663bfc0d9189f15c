//! DPDK 22.11 as a peer: runs the `dpdk_peer` program, built from
//! `peers/dpdk/dpdk_peer.c` by `build.rs` when libdpdk-dev is installed at
//! build time, or else by `bench peers` itself at run time into a cache
//! directory ([`locate`]): the order in which the crate and `dpdk-dev` were
//! installed does not matter. Without libdpdk the peer is missing and
//! [`locate`] says why.
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
//! - [`DpdkMode::GroVxlan`], [`DpdkMode::GsoVxlan`]: the same over VXLAN
//!   (TCP/IPv4 inside VXLAN, UDP port 4789, over IPv4, outer UDP checksum
//!   0). GRO uses `RTE_GRO_IPV4_VXLAN_TCP_IPV4`, DPDK's only tunnel GRO;
//!   **timed** besides the GRO calls: reading each frame's outer and inner
//!   headers for the tunnel packet type and the lengths rte_gro needs
//!   (`outer_l2_len`, `outer_l3_len`, `l2_len` = UDP + VXLAN + inner
//!   Ethernet, `l3_len`, `l4_len`; `rte_net_get_ptype` does not recognise
//!   VXLAN) and refreshing both IPv4 header checksums of every merged packet.
//!   GSO uses `RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO` (`ol_flags` `TUNNEL_VXLAN |
//!   TCP_SEG | IPV4 | OUTER_IPV4`); **timed** besides `rte_gso_segment`: the
//!   outer IPv4 header checksum and the inner IPv4 header and TCP checksums
//!   of every segment. `mss` is the inner TCP payload per segment.
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
/// override it.) The value [`BUILD_NOW`] skips `build.rs`'s program and
/// uses the cached one, building it first if needed.
pub const PEER_ENV: &str = "SUPERPACKET_DPDK_PEER";

/// `SUPERPACKET_DPDK_PEER=build`: ignore `build.rs`'s program, build (or
/// reuse) the one in the cache directory.
pub const BUILD_NOW: &str = "build";

/// Environment variable naming the cache directory of the run-time build
/// (default `$XDG_CACHE_HOME/superpacket`, else `~/.cache/superpacket`).
pub const CACHE_ENV: &str = "SUPERPACKET_CACHE_DIR";

/// The peer's C source, for building it at run time.
const PEER_SOURCE: &str = include_str!("../../../peers/dpdk/dpdk_peer.c");

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
    /// `rte_gro_reassemble_burst` (`RTE_GRO_IPV4_VXLAN_TCP_IPV4`) over
    /// bursts of TCP/IPv4-in-VXLAN-over-IPv4 frames.
    GroVxlan,
    /// `rte_gso_segment` (`RTE_ETH_TX_OFFLOAD_VXLAN_TNL_TSO`) of
    /// TCP/IPv4-in-VXLAN-over-IPv4 superpackets, plus software checksums.
    GsoVxlan,
}

impl DpdkMode {
    /// The program's `--mode` argument.
    pub fn as_str(self) -> &'static str {
        match self {
            DpdkMode::Gro => "gro",
            DpdkMode::Gso => "gso",
            DpdkMode::GroVxlan => "gro-vxlan",
            DpdkMode::GsoVxlan => "gso-vxlan",
        }
    }
}

/// Why DPDK produced no figures.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The program is missing (libdpdk missing or the compile failed).
    #[error("DPDK peer missing: {0}")]
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
            round_secs: Vec::new(),
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

/// Where the `dpdk_peer` program came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerOrigin {
    /// Named by `$SUPERPACKET_DPDK_PEER`.
    Env,
    /// Built by `build.rs` with the crate.
    BuildRs,
    /// Built at run time into the cache directory, by this run (`built_now`)
    /// or an earlier one.
    Cache {
        /// This run compiled it.
        built_now: bool,
        /// libdpdk's version (`pkg-config --modversion`).
        libdpdk: String,
    },
}

/// The `dpdk_peer` program found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkPeer {
    /// The program.
    pub path: PathBuf,
    /// Where it came from.
    pub origin: PeerOrigin,
}

impl DpdkPeer {
    /// A stable word for `--json`: `env`, `build.rs`, `cache` or `built now`.
    pub fn origin_key(&self) -> &'static str {
        match self.origin {
            PeerOrigin::Env => "env",
            PeerOrigin::BuildRs => "build.rs",
            PeerOrigin::Cache { built_now: false, .. } => "cache",
            PeerOrigin::Cache { built_now: true, .. } => "built now",
        }
    }

    /// For people: the path and where it came from.
    pub fn describe(&self) -> String {
        let from = match &self.origin {
            PeerOrigin::Env => format!("from ${PEER_ENV}"),
            PeerOrigin::BuildRs => "built with the crate".to_string(),
            PeerOrigin::Cache { built_now: true, libdpdk } => format!("built now against libdpdk {libdpdk}"),
            PeerOrigin::Cache { built_now: false, libdpdk } => format!("cached build against libdpdk {libdpdk}"),
        };
        format!("{} ({from})", self.path.display())
    }
}

/// How [`locate`] looks for the program: [`Lookup::from_env`] in the
/// product, explicit values in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// `$SUPERPACKET_DPDK_PEER` (not [`BUILD_NOW`]): use this program.
    pub env_path: Option<PathBuf>,
    /// The program `build.rs` built, if it built one and it is not skipped.
    pub build_rs: Option<PathBuf>,
    /// Where the run-time build goes (`None`: no usable directory).
    pub cache_dir: Option<PathBuf>,
    /// The `pkg-config` program (`$SUPERPACKET_PKG_CONFIG`, default `pkg-config`).
    pub pkg_config: String,
    /// The C compiler (`$CC`, default `cc`).
    pub cc: String,
}

impl Lookup {
    /// The settings of this process's environment.
    pub fn from_env() -> Lookup {
        let var = std::env::var_os(PEER_ENV).filter(|p| !p.is_empty());
        let build_now = var.as_deref() == Some(std::ffi::OsStr::new(BUILD_NOW));
        let env_path = var.filter(|_| !build_now).map(PathBuf::from);
        let build_rs = option_env!("SUPERPACKET_DPDK_PEER").filter(|_| !build_now).map(PathBuf::from);
        Lookup {
            env_path,
            build_rs,
            cache_dir: default_cache_dir(),
            pkg_config: super::dpdk_build::pkg_config_program(),
            cc: super::dpdk_build::cc_program(),
        }
    }
}

/// `$SUPERPACKET_CACHE_DIR`, else `$XDG_CACHE_HOME/superpacket`, else
/// `$HOME/.cache/superpacket`, else `superpacket-cache` in the temporary
/// directory.
fn default_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var(CACHE_ENV)
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("superpacket")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("superpacket")))
        .or_else(|| Some(std::env::temp_dir().join("superpacket-cache")))
}

/// Finds the `dpdk_peer` program: `lookup.env_path` if set; else the one
/// `build.rs` built if it still exists; else the one built earlier into the
/// cache directory for this source and this libdpdk, compiling it now if
/// there is none (`pkg-config --cflags --libs libdpdk` and `cc`, exactly as
/// `build.rs` does). Otherwise why there is none, in words (e.g. "libdpdk
/// not found by pkg-config: apt-get install dpdk-dev pkg-config").
pub fn locate(lookup: &Lookup) -> Result<DpdkPeer, String> {
    if let Some(p) = &lookup.env_path {
        // `cargo run` and `cargo test` name build.rs's program here.
        let origin = if lookup.build_rs.as_ref() == Some(p) { PeerOrigin::BuildRs } else { PeerOrigin::Env };
        return if p.is_file() {
            Ok(DpdkPeer { path: p.clone(), origin })
        } else {
            Err(format!("{PEER_ENV}={} is not a file", p.display()))
        };
    }
    if let Some(p) = lookup.build_rs.as_ref().filter(|p| p.is_file()) {
        return Ok(DpdkPeer { path: p.clone(), origin: PeerOrigin::BuildRs });
    }
    let flags = super::dpdk_build::dpdk_flags(&lookup.pkg_config)?;
    let dir = lookup.cache_dir.as_ref().ok_or("no cache directory to build it in")?;
    let hash = super::dpdk_build::fnv64(&[
        PEER_SOURCE.as_bytes(),
        flags.version.as_bytes(),
        flags.cflags.as_bytes(),
        flags.libs.as_bytes(),
        lookup.cc.as_bytes(),
    ]);
    let exe = dir.join(format!("dpdk_peer-{hash:016x}"));
    let libdpdk = flags.version.clone();
    if exe.is_file() {
        return Ok(DpdkPeer { path: exe, origin: PeerOrigin::Cache { built_now: false, libdpdk } });
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the cache directory {}: {e}", dir.display()))?;
    // Build under names of our own and rename: runs in parallel never see a
    // half-written program.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tag = format!("{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let source = TempFile(dir.join(format!("dpdk_peer-{hash:016x}.{tag}.c")));
    let partial = TempFile(dir.join(format!("dpdk_peer-{hash:016x}.{tag}.partial")));
    std::fs::write(&source.0, PEER_SOURCE).map_err(|e| format!("cannot write {}: {e}", source.0.display()))?;
    super::dpdk_build::compile(&lookup.cc, &flags, &source.0, &partial.0)?;
    std::fs::rename(&partial.0, &exe).map_err(|e| format!("cannot move the program to {}: {e}", exe.display()))?;
    Ok(DpdkPeer { path: exe, origin: PeerOrigin::Cache { built_now: true, libdpdk } })
}

/// The `dpdk_peer` program of this process ([`locate`] with
/// [`Lookup::from_env`], once: a later call returns the same answer).
pub fn dpdk_peer() -> Result<DpdkPeer, String> {
    static PEER: std::sync::OnceLock<Result<DpdkPeer, String>> = std::sync::OnceLock::new();
    PEER.get_or_init(|| locate(&Lookup::from_env())).clone()
}

/// The path of [`dpdk_peer`].
pub fn dpdk_peer_path() -> Result<PathBuf, String> {
    dpdk_peer().map(|p| p.path)
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
///
/// # Errors
/// The file cannot be created or written.
pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) -> Result<(), PcapError> {
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

    /// The lookup order: `$SUPERPACKET_DPDK_PEER`, then `build.rs`'s program
    /// if it still exists, then the run-time build, else why there is none.
    #[test]
    fn locate_says_why_the_peer_is_missing() {
        let nowhere = Lookup {
            env_path: None,
            build_rs: Some(PathBuf::from("/nonexistent/dpdk_peer")),
            cache_dir: Some(PathBuf::from("/nonexistent/cache")),
            pkg_config: "/nonexistent/pkg-config".to_string(),
            cc: "cc".to_string(),
        };
        let why = locate(&nowhere).unwrap_err();
        assert!(why.starts_with("libdpdk not found") && why.contains("apt-get install dpdk-dev"), "{why}");
        let named = Lookup { env_path: Some(PathBuf::from("/nonexistent/peer")), ..nowhere.clone() };
        assert!(locate(&named).unwrap_err().contains("SUPERPACKET_DPDK_PEER=/nonexistent/peer is not a file"));
        let exe = std::env::current_exe().expect("test binary");
        let built = Lookup { build_rs: Some(exe.clone()), ..nowhere };
        assert_eq!(locate(&built), Ok(DpdkPeer { path: exe, origin: PeerOrigin::BuildRs }));
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
