//! Real I/O: network namespaces, rtnetlink and ethtool-ioctl host configuration,
//! TAP and TUN devices, AF_PACKET sockets and a virtio-net frontend over vhost-user (offload-rules section 4). The kernel oracles
//! built on them are in the `superpacket-lab` crate.
//!
//! This is the only module of the crate that uses libc `unsafe`; every block
//! carries a `// SAFETY:` comment.
//!
//! # API at a glance
//!
//! ```text
//! // privileges (netns.rs)
//! io::privileges_available() -> Result<(), String>     // root/CAP_NET_ADMIN+CAP_SYS_ADMIN, /dev/net/tun (no tool needed)
//! io::require_privileges() -> bool                     // test guard: true = go on; false = skipped
//!                                                      // (SUPERPACKET_SKIP_PRIVILEGED=1); else panics with the reason
//! // namespaces (netns.rs)
//! NetNs::create(prefix: &str) -> Result<NetNs>         // "<prefix>-<pid>-<n>", deleted on Drop (as `ip netns add/del`, no process)
//! NetNs::attach(name) -> Result<NetNs>                 // an existing /run/netns/NAME, left alone on Drop
//! netns::create_named(name) / delete_named(name)       // the raw namespace file operations
//! NetNs::fd(&self) -> BorrowedFd                       // for Netlink::set_netns / add_veth
//! NetNs::netlink(&self) -> Result<Netlink>             // an rtnetlink socket bound to NAME
//! NetNs::name(&self) -> &str
//! NetNs::enter_scoped(&self, f: impl FnOnce() -> R + Send) -> Result<R>   // f runs on a thread inside NAME
//! NetNs::link_up(&self, dev) / link_down / add_addr(&self, dev, "10.0.0.1/24") / add_addr_nodad / set_mac(&self, dev, [u8; 6])
//! NetNs::set_mtu(&self, dev, u32) / set_promisc(&self, dev, bool)
//! NetNs::add_route(&self, "10.0.0.0/24" | "default", via: Option<&str>, dev: Option<&str>) / del_route(...)
//! NetNs::neighbour_mac(&self, IpAddr) -> Result<Option<[u8; 6]>> / add_neighbour(&self, dev, "10.0.0.2", mac) / replace_neighbour
//! NetNs::create_persistent_tap(&self, name) / create_persistent_tap_with(&self, &TapConfig)   // e.g. multi_queue
//! NetNs::link_exists(&self, dev) -> Result<bool> / link_state(&self, dev) -> Result<LinkState { kind, up, oper_up, mtu, master, .. }>
//! NetNs::add_veth(&self, name, peer, mtu: Option<u32>) / del_link(&self, dev)
//! NetNs::set_offloads(&self, dev, &[("tx", "off"), ...])   // ethtool -K names and aliases, via SIOCETHTOOL
//! NetNs::features(&self, dev) -> Result<ethtool::Features> / offloads(&self, dev) -> Result<String>  // `ethtool -k` text
//! NetNs::write_sysfs(&self, dev, attr, value) / read_sysfs(&self, dev, attr) -> Result<String>
//! NetNs::link_statistic(&self, dev, "rx_packets") -> Result<u64>
//! NetNs::sysctl(&self, key, value) / disable_ipv6(&self)
//! io::netns::set_offloads(ns: &NetNs, dev, features) -> Result<()>
//! VethPair::create(ns_a: &NetNs, name_a, ns_b: &NetNs, name_b) -> Result<VethPair>   // deleted on Drop
//!
//! // rtnetlink (netlink.rs): the opening thread's namespace
//! Netlink::open() -> Result<Netlink>; netlink::in_netns(name, f)   // f on a thread inside /run/netns/NAME
//! Netlink::link_index / link_exists / link_state / set_up / set_mtu / set_mac / set_promisc / set_netns(name, fd)
//! Netlink::add_veth(name, peer, Option<peer netns fd>) / add_veth_with(.., mtu: Option<u32>) / add_bridge / set_master(name, Option<master>) / del_link
//! Netlink::add_address(name, IpAddr, prefix) / add_address_with(.., nodad)
//! Netlink::add_route(dest, prefix, via, dev) / del_route / add_neighbour(dev, ip, mac) / replace_neighbour / neighbour_mac(ip)
//!
//! // offload features (ethtool.rs): SIOCETHTOOL in the calling thread's namespace
//! ethtool::Features::read(dev) / to_ethtool_text(); ethtool::set(dev, &[("tso", "off"), ...])
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
//! // TUN (tun.rs): the same queue (tuntap.rs) with IFF_TUN; raw IP packets after the header
//! TunConfig = TapConfig                                            // same fields (napi_frags: TAP only)
//! TunDevice::open / open_in / set_offload / negotiate_offload / read_packet / write_packet_vectored / ...
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
//! ```
//!
//! Each port driver's I/O is built with its cargo feature of this crate:
//! `tap` (tap.rs), `tun` (tun.rs), `af-packet` (packet_socket.rs,
//! packet_ring.rs) and `vhost-user` (virtio_user/: a virtio-net
//! frontend over vhost-user); tuntap.rs comes with `tap` or `tun`.
//!
//! All errors are [`IoError`], naming the failing syscall, netlink request or
//! command, what was asked, and the errno. Everything created (namespaces, veths, taps) is deleted on
//! drop, including during a panic unwind; [`netns::cleanup_stale`] removes
//! namespaces left by killed processes of this crate.

pub mod affinity;
pub mod cputime;
pub mod error;
pub mod ethtool;
pub mod event;
pub mod frame;
pub mod netlink;
pub mod netns;
#[cfg(feature = "af-packet")]
pub mod packet_ring;
#[cfg(feature = "af-packet")]
pub mod packet_socket;
pub mod sys;
#[cfg(feature = "tap")]
pub mod tap;
#[cfg(feature = "tun")]
pub mod tun;
#[cfg(any(feature = "tap", feature = "tun"))]
pub mod tuntap;
pub mod tx_policy;
#[cfg(feature = "vhost-user")]
pub mod virtio_user;

#[cfg(all(test, feature = "tap", feature = "af-packet"))]
mod tests;
#[cfg(test)]
mod tests_netlink;
#[cfg(all(test, feature = "tun"))]
mod tests_tun;

pub use error::{IoError, Result};
pub use frame::VlanInfo;
pub use netns::{NetNs, VethPair, privileges_available, require_privileges};
#[cfg(feature = "af-packet")]
pub use packet_socket::{PacketSocket, PacketSocketConfig, PktType, RecvInfo};
#[cfg(feature = "tap")]
pub use tap::{TapConfig, TapDevice};
#[cfg(feature = "tun")]
pub use tun::{TunConfig, TunDevice};
