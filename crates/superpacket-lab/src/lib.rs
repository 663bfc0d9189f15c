//! Test support for superpacket, used by tests and benchmarks: the
//! Linux kernel as a GRO/GSO oracle ([`oracle`]), real TCP/UDP streams
//! through namespaces ([`streams`]), floods ([`flood`]), a relay between
//! ports ([`relay`]) and the two-namespace lab they share ([`lab`]); the
//! sender/middle/receiver lab of `bench live-peers` ([`peers_lab`]). Also
//! the lab plumbing a topology file declares in its `[lab]` table, which
//! `superpacket lab up|down|status` and `superpacket run --lab` make and
//! remove ([`plumbing`]).
//!
//! # Kernel oracles
//!
//! ```text
//! // kernel oracles (oracle.rs)
//! GroOracle::new() -> Result<GroOracle>            // netns + IFF_NAPI tap + gro_flush_timeout + AF_PACKET
//! GroOracle::with_config(GroOracleConfig) -> Result<GroOracle>
//! GroOracle::run(&mut self, frames: &[F: AsRef<[u8]>]) -> Result<Vec<(VirtioNetHdr, Vec<u8>)>>  // zero vnet hdrs
//! GroOracle::run_with_headers(&mut self, &[(VirtioNetHdr, F)]) -> Result<Vec<(VirtioNetHdr, Vec<u8>)>>
//! GroOracle::run_detailed(&mut self, &[(VirtioNetHdr, F)]) -> Result<Vec<Delivered>>   // + pkttype, VLAN tag
//! GroOracle::mac() -> [u8; 6] / netns() / tap_name() / medium() / stats() -> OracleStats
//! GroOracleConfig { medium: Medium::Ip, .. }       // raw IP through an IFF_TUN|IFF_NAPI device instead
//! GsoOracle::new() -> Result<GsoOracle>            // netns pair + veth, sender `tx off tso off gso off`
//! GsoOracle::with_config(GsoOracleConfig) -> Result<GsoOracle>
//! GsoOracle::segment(&mut self, &VirtioNetHdr, frame: &[u8]) -> Result<Vec<Vec<u8>>>
//! GsoOracle::segment_detailed(&mut self, &VirtioNetHdr, frame: &[u8]) -> Result<Vec<Delivered>>
//! GsoOracle::sender() / receiver() -> (&NetNs, &str) / medium() / stats() -> OracleStats
//! GsoOracleConfig { medium: Medium::Ip, .. }       // raw IP: AF_PACKET on a TUN with TUNSETOFFLOAD 0, read from the TUN
//! ```
//!
//! Typical oracle test (the test needs root; see
//! [`superpacket_engine::io::require_privileges`]):
//!
//! ```no_run
//! use superpacket_engine::io::require_privileges;
//! use superpacket_lab::GroOracle;
//! use superpacket::traffic::{Flow, FlowSpec, Transport};
//! use superpacket::wire::tcp::TcpFlags;
//!
//! if !require_privileges() {
//!     return;
//! }
//! let mut oracle = GroOracle::new().unwrap();
//! let mut spec = FlowSpec::new(Transport::Tcp, false, 0);
//! spec.dst_mac = superpacket::wire::ethernet::MacAddr(oracle.mac());
//! let mut flow = Flow::new(spec);
//! let frames: Vec<Vec<u8>> = (0..20)
//!     .map(|i| flow.frame(1448, if i == 19 { TcpFlags::PSH } else { TcpFlags::empty() }).unwrap())
//!     .collect();
//! let delivered = oracle.run(&frames).unwrap();
//! assert_eq!(delivered.len(), 1);
//! ```
//!
//! What the kernel did on this machine (6.18) in each oracle scenario is
//! recorded in the [`oracle`] module documentation.

pub mod flood;
pub mod lab;
pub mod oracle;
pub mod peers_lab;
pub mod plumbing;
pub mod relay;
pub mod streams;
pub mod tunnel_oracle;

pub use oracle::{Delivered, GroOracle, GroOracleConfig, GsoOracle, GsoOracleConfig, OracleStats};
