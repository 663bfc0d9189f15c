//! Real I/O: network namespaces, TAP devices, AF_PACKET sockets, and the
//! Linux kernel used as a **GRO / GSO oracle** (this-machine.md sections 4-6,
//! offload-rules section 4).
//!
//! This is the only module of the crate that uses libc `unsafe`; every block
//! carries a `// SAFETY:` comment.
//!
//! # Stable API (for the GRO/GSO engines' kernel-oracle tests)
//!
//! ```text
//! // privileges (netns.rs)
//! io::privileges_available() -> Result<(), String>     // root/CAP_NET_ADMIN, /dev/net/tun, `ip`, `ethtool`
//! io::require_privileges() -> bool                     // test guard: true = go on; false = skipped
//!                                                      // (SUPERPACKET_SKIP_PRIVILEGED=1); else panics with the reason
//! // namespaces (netns.rs)
//! NetNs::create(prefix: &str) -> Result<NetNs>         // "<prefix>-<pid>-<n>", deleted on Drop
//! NetNs::name(&self) -> &str
//! NetNs::run(&self, args: &[&str]) -> Result<()>       // `ip netns exec NAME args...`, fails on non-zero exit
//! NetNs::exec(&self, args: &[&str]) -> Result<Output>  // same, returns the Output whatever the status
//! NetNs::ip(&self, args: &[&str]) -> Result<()>        // `ip -n NAME args...`
//! NetNs::enter_scoped(&self, f: impl FnOnce() -> R + Send) -> Result<R>   // f runs on a thread inside NAME
//! NetNs::link_up(&self, dev) / add_addr(&self, dev, "10.0.0.1/24") / set_mac(&self, dev, [u8; 6])
//! NetNs::set_mtu(&self, dev, u32) / set_offloads(&self, dev, &[("tx", "off"), ...])
//! NetNs::write_sysfs(&self, dev, attr, value) / read_sysfs(&self, dev, attr) -> Result<String>
//! NetNs::sysctl(&self, key, value) / disable_ipv6(&self)
//! io::netns::set_offloads(ns: &NetNs, dev, features) -> Result<()>
//! VethPair::create(ns_a: &NetNs, name_a, ns_b: &NetNs, name_b) -> Result<VethPair>   // deleted on Drop
//!
//! // TAP (tap.rs)
//! TapConfig { name, napi, napi_frags, multi_queue, vnet_hdr_len, nonblocking }   (Default: tap, 10-byte hdr)
//! TapDevice::open(&TapConfig) -> Result<TapDevice>                 // in the current namespace
//! TapDevice::open_in(ns: &NetNs, &TapConfig) -> Result<TapDevice>  // created inside ns, fd usable anywhere
//! TapDevice::name / features() -> Result<u32> / set_vnet_hdr_len(len) / layout()
//! TapDevice::set_offload(flags: u32) -> Result<()>                 // IoError::OffloadRejected on EINVAL
//! TapDevice::negotiate_offload(wanted: u32) -> Result<u32>         // falls back (drops USO, then ECN, ...)
//! TapDevice::read_packet(&mut self, buf: &mut [u8]) -> Result<(VirtioNetHdr, usize)>
//! TapDevice::write_packet(&mut self, &VirtioNetHdr, frame: &[u8]) -> Result<usize>
//! TapDevice::write_packet_vectored(&mut self, &VirtioNetHdr, frame: &[&[u8]]) -> Result<usize>
//! TapDevice::set_nonblocking(bool) / poll_readable(Duration) -> Result<bool>
//! tap::{TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN, TUN_F_USO4, TUN_F_USO6}
//!
//! // AF_PACKET (packet_socket.rs)
//! PacketSocketConfig { incoming_only, qdisc_bypass, recv_timeout, auxdata, rcvbuf }
//! PacketSocket::open(ifname, &PacketSocketConfig) -> Result<PacketSocket>
//! PacketSocket::open_in(ns: &NetNs, ifname, &PacketSocketConfig) -> Result<PacketSocket>
//! PacketSocket::recv(&mut self, buf) -> Result<(VirtioNetHdr, usize, PktType)>
//! PacketSocket::recv_info(&mut self, buf) -> Result<RecvInfo>   // + VLAN tag from PACKET_AUXDATA
//! PacketSocket::try_recv_info(&mut self, buf) -> Result<Option<RecvInfo>>   // MSG_DONTWAIT
//! PacketSocket::send(&mut self, &VirtioNetHdr, frame: &[&[u8]]) -> Result<usize>
//! PacketSocket::set_recv_timeout(Option<Duration>) / set_nonblocking(bool) / poll_readable(Duration) / drain()
//!
//! // kernel oracles (oracle.rs)
//! GroOracle::new() -> Result<GroOracle>            // netns + IFF_NAPI tap + gro_flush_timeout + AF_PACKET
//! GroOracle::with_config(GroOracleConfig) -> Result<GroOracle>
//! GroOracle::run(&mut self, frames: &[F: AsRef<[u8]>]) -> Result<Vec<(VirtioNetHdr, Vec<u8>)>>  // zero vnet hdrs
//! GroOracle::run_with_headers(&mut self, &[(VirtioNetHdr, F)]) -> Result<Vec<(VirtioNetHdr, Vec<u8>)>>
//! GroOracle::run_detailed(&mut self, &[(VirtioNetHdr, F)]) -> Result<Vec<Delivered>>   // + pkttype, VLAN tag
//! GroOracle::mac() -> [u8; 6] / netns() / tap_name() / stats() -> OracleStats
//! GsoOracle::new() -> Result<GsoOracle>            // netns pair + veth, sender `tx off tso off gso off`
//! GsoOracle::with_config(GsoOracleConfig) -> Result<GsoOracle>
//! GsoOracle::segment(&mut self, &VirtioNetHdr, frame: &[u8]) -> Result<Vec<Vec<u8>>>
//! GsoOracle::segment_detailed(&mut self, &VirtioNetHdr, frame: &[u8]) -> Result<Vec<Delivered>>
//! GsoOracle::sender() / receiver() -> (&NetNs, &str) / stats() -> OracleStats
//! ```
//!
//! Typical oracle test (the test needs root; see [`require_privileges`]):
//!
//! ```no_run
//! use superpacket::io::{require_privileges, GroOracle};
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
//! All errors are [`IoError`], naming the failing syscall/command and the
//! errno text. Everything created (namespaces, veths, taps) is deleted on
//! drop, including during a panic unwind; [`netns::cleanup_stale`] removes
//! namespaces left by killed processes of this crate.
//!
//! What the kernel did on this machine (6.18) in each oracle scenario is
//! recorded in the [`oracle`] module documentation.

pub mod cputime;
pub mod error;
pub mod event;
pub mod netns;
pub mod oracle;
pub mod packet_ring;
pub mod packet_socket;
pub mod pv;
pub mod streams;
mod sys;
pub mod tap;

#[cfg(test)]
mod tests;

pub use error::{IoError, Result};
pub use netns::{NetNs, VethPair, privileges_available, require_privileges};
pub use oracle::{Delivered, GroOracle, GroOracleConfig, GsoOracle, GsoOracleConfig, OracleStats};
pub use packet_socket::{PacketSocket, PacketSocketConfig, PktType, RecvInfo, VlanInfo};
pub use tap::{TapConfig, TapDevice};
