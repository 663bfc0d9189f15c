//! TUN devices with `IFF_VNET_HDR`: the layer-3 sibling of [`super::tap`].
//!
//! [`TunDevice`] opens `/dev/net/tun` with `IFF_TUN | IFF_NO_PI |
//! IFF_VNET_HDR` (plus optional `IFF_MULTI_QUEUE`; [`TunConfig::nonblocking`]
//! for a nonblocking descriptor), in the current namespace or inside a
//! [`NetNs`] ([`TunDevice::open_in`]; the descriptor keeps working from any
//! thread). Every read and write is a virtio_net_hdr followed by a **raw IP
//! packet**, IPv4 or IPv6 from its first byte (the version nibble says
//! which; the kernel sets the skb's protocol from it): there is no link
//! header, so the header's `csum_start` and `hdr_len` count from the IP
//! header ([`superpacket::wire::Medium::Ip`], offload-rules 4.4).
//!
//! Everything but the kind is the queue TAP and TUN share
//! ([`super::tuntap::TunTapDevice`]): `TUNSETVNETHDRSZ`,
//! [`TunDevice::set_offload`] / [`TunDevice::negotiate_offload`]
//! (`TUNSETOFFLOAD` with the TAP's fall-back order: USO, UFO, TSO_ECN, TSO,
//! CSUM), [`TunDevice::read_packet`] / [`TunDevice::write_packet_vectored`],
//! [`TunDevice::set_nonblocking`], [`TunDevice::poll_readable`], and the
//! restoration of a persistent device's offloads when the last queue goes.
//! The `TUN_F_*` offloads mean for a TUN what they mean for a TAP: which
//! superpackets the kernel may hand over undivided (and, from the same
//! kernel generation on, accepts in written headers).
//!
//! The device layer's `tun` port driver (`crate::device::tun_port`) turns a
//! TUN into an Ethernet port of the device graph.
//!
//! [`NetNs`]: super::NetNs

pub use super::tuntap::{
    IFF_MULTI_QUEUE, IFF_NO_PI, IFF_TUN, IFF_VNET_HDR, TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_USO4,
    TUN_F_USO6, TunTapKind,
};
use super::tuntap::{Medium, TunTapConfig, TunTapDevice};

/// The TUN kind of [`TunTapDevice`]: `IFF_TUN`, raw IP packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tun;

impl TunTapKind for Tun {
    const NAME: &'static str = "tun";
    const IFF: u16 = IFF_TUN;
    const MEDIUM: Medium = Medium::Ip;
}

/// How to open a TUN ([`TunTapConfig`]; `napi_frags` is for TAPs only).
pub type TunConfig = TunTapConfig;

/// An open TUN queue with virtio_net_hdr framing.
pub type TunDevice = TunTapDevice<Tun>;
