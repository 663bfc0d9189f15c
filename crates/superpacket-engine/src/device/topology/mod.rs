//! Topology files: a device graph described in TOML (format reference:
//! `docs/topology.md`; examples in `examples/`).
//!
//! A file lists devices (`[[device]]`: ports with their drivers, 802.1Q /
//! 802.1ad VLAN devices stacked to any depth, bonds, teams and bridges with
//! VLAN filtering), per-device feature overrides with `ethtool -k` names
//! (offload-rules 6.1), MTU, MAC and addresses, then routes, static
//! neighbours, NAT rules and connection-table limits, and the stack mode
//! (passthrough or legacy, offload-rules 9.2). Devices may appear in any
//! order: lowers are built before their uppers.
//!
//! Every error, syntactic or semantic (an unknown lower device, a duplicate
//! name, a VLAN id out of range, a feature name `ethtool` does not know),
//! is a [`TopologyError`] naming the line (and column) of the offending key
//! or value, computed from the byte spans the `toml` crate keeps
//! ([`toml::Spanned`], [`toml::de::Error::span`]).
//!
//! The module follows the path of a file:
//!
//! - [`schema`]: the TOML structures ([`TopologySpec`] and its parts) and
//!   the span helpers;
//! - `build`: the [`Graph`] built from a parsed file (devices, their
//!   settings, routes, neighbours, NAT, reassembly);
//! - [`drivers`]: the port driver registry ([`DriverRegistry`]), through
//!   which a port's `driver = { kind = ... }` becomes a [`PortDriver`]:
//!   the built-in kinds and any registered by another crate.
//!
//! [`PortDriver`]: super::port::PortDriver

mod build;
pub mod drivers;
pub mod schema;

use super::features::StackMode;
use super::graph::Graph;
use super::port::MemoryMode;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

pub use build::parse_mac;
#[cfg(test)]
pub(crate) use drivers::DRIVER_FEATURES;
pub use drivers::{DriverContext, DriverFactory, DriverRegistry, FactoryError};
pub use schema::{
    BridgePortSpec, ConntrackSpec, CustomDriverTable, DeviceSpec, DriverSpec, DriverTable, NatSpec, NeighbourSpec,
    PortRef, ReassemblySpec, RouteSpec, TopologySpec, line_col,
};

/// A topology file could not be read, parsed or built: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct TopologyError {
    /// 1-based line of the offending key or value (0: not tied to a line, e.g. an I/O error).
    pub line: usize,
    /// 1-based column (0 when `line` is 0).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl TopologyError {
    fn render(&self) -> String {
        if self.line == 0 { self.message.clone() } else { format!("line {}: {}", self.line, self.message) }
    }

    fn at(src: &str, span: &Range<usize>, message: impl Into<String>) -> TopologyError {
        let (line, column) = line_col(src, span.start);
        TopologyError { line, column, message: message.into() }
    }
}

/// How to build a graph from a topology.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Overrides the file's `mode`.
    pub mode: Option<StackMode>,
    /// What in-memory ports keep of segmented frames.
    pub memory_mode: MemoryMode,
    /// Directory relative pcap paths are resolved against.
    pub base_dir: Option<PathBuf>,
    /// Engine workers sharing each real port (0 or 1: one). With more, TAPs
    /// and TUNs are opened multi-queue (one queue per worker) and AF_PACKET sockets
    /// join the fanout group [`BuildOptions::fanout_group`].
    pub workers: usize,
    /// `PACKET_FANOUT` group id base for AF_PACKET ports (each port adds its index).
    pub fanout_group: u16,
    /// Overrides the `offloads` of every TAP and TUN port (`TUN_F_*`; e.g. 0
    /// for per-frame I/O).
    pub tap_offloads: Option<u32>,
    /// Overrides the `batch` of every AF_PACKET port (1: one frame per
    /// system call and no receive ring, i.e. per-frame I/O).
    pub packet_batch: Option<usize>,
    /// The driver kinds a port's `driver` may name (default: every built-in
    /// driver compiled in; [`DriverRegistry::register`] adds one from
    /// another crate).
    pub drivers: DriverRegistry,
}

/// A parsed topology file, ready to build a [`Graph`].
#[derive(Debug)]
pub struct Topology {
    src: String,
    /// The parsed content.
    pub spec: TopologySpec,
}

/// Parses and builds `src` with default options.
///
/// # Errors
/// A [`TopologyError`] naming the line.
pub fn load(src: &str) -> Result<Graph, TopologyError> {
    Topology::parse(src)?.build()
}

/// Reads, parses and builds the file at `path` (pcap paths relative to it).
///
/// # Errors
/// I/O errors (line 0) or a [`TopologyError`] naming the line.
pub fn load_file(path: &Path) -> Result<Graph, TopologyError> {
    let src = std::fs::read_to_string(path).map_err(|e| TopologyError {
        line: 0,
        column: 0,
        message: format!("{}: {e}", path.display()),
    })?;
    let opts = BuildOptions { base_dir: path.parent().map(Path::to_path_buf), ..BuildOptions::default() };
    Topology::parse(&src)?.build_with(&opts)
}

impl Topology {
    /// Parses `src`. The driver table of a kind no built-in driver has keeps
    /// every key, for the factory of that kind ([`DriverSpec::Custom`]).
    ///
    /// # Errors
    /// A syntax or type error, naming its line.
    pub fn parse(src: &str) -> Result<Topology, TopologyError> {
        let spec: TopologySpec = schema::parse_spec(src)?;
        Ok(Topology { src: src.to_string(), spec })
    }

    /// Builds the graph with default options.
    ///
    /// # Errors
    /// A semantic error, naming its line.
    pub fn build(&self) -> Result<Graph, TopologyError> {
        self.build_with(&BuildOptions::default())
    }

    fn err(&self, span: &Range<usize>, message: impl Into<String>) -> TopologyError {
        TopologyError::at(&self.src, span, message)
    }

    /// The stack mode the file asks for.
    ///
    /// # Errors
    /// An unknown mode.
    pub fn mode(&self) -> Result<StackMode, TopologyError> {
        match &self.spec.mode {
            None => Ok(StackMode::Passthrough),
            Some(m) => match m.get_ref().as_str() {
                "passthrough" => Ok(StackMode::Passthrough),
                "legacy" => Ok(StackMode::Legacy),
                other => Err(self.err(&m.span(), format!("unknown mode `{other}` (passthrough, legacy)"))),
            },
        }
    }

    /// True if a port has a pcap driver.
    pub fn has_pcap_ports(&self) -> bool {
        self.spec.devices.iter().any(|d| match d.driver.as_ref().map(Spanned::get_ref) {
            Some(DriverSpec::Name(n)) => n == "pcap",
            Some(DriverSpec::Table(t)) => t.kind.get_ref() == "pcap",
            Some(DriverSpec::Custom(_)) | None => false,
        })
    }

    /// True if some port lives in a named network namespace (`netns = ...`):
    /// reopening it needs `setns`, hence CAP_SYS_ADMIN.
    pub fn uses_named_netns(&self) -> bool {
        self.spec.devices.iter().any(|d| match d.driver.as_ref().map(Spanned::get_ref) {
            Some(DriverSpec::Table(t)) => t.netns.is_some(),
            _ => false,
        })
    }

    /// Names of the ports with `gro = true` (software GRO on ingress).
    pub fn gro_ports(&self) -> Vec<String> {
        self.spec
            .devices
            .iter()
            .filter(|d| d.gro.as_ref().is_some_and(|g| *g.get_ref()))
            .map(|d| d.name.get_ref().clone())
            .collect()
    }
}
