//! TAP devices with `IFF_VNET_HDR` (offload-rules 4.4, docs/kernel-oracle.md
//! section 1 and 4).
//!
//! [`TapDevice`] opens `/dev/net/tun` with `IFF_TAP | IFF_NO_PI |
//! IFF_VNET_HDR` (plus optional `IFF_NAPI`, `IFF_NAPI_FRAGS`,
//! `IFF_MULTI_QUEUE`), in the current namespace or inside a [`NetNs`]
//! ([`TapDevice::open_in`]; the descriptor keeps working from any thread):
//! every read and write is a virtio_net_hdr followed by an Ethernet frame.
//! It is the queue TAP and TUN devices share ([`super::tuntap`]: ioctls,
//! vectored I/O, offload negotiation and the restoration of a persistent
//! device's offloads on drop) of kind [`Tap`].
//!
//! [`NetNs`]: super::NetNs

pub use super::tuntap::{
    IFF_MULTI_QUEUE, IFF_NAPI, IFF_NAPI_FRAGS, IFF_NO_CARRIER, IFF_NO_PI, IFF_TAP, IFF_TUN, IFF_VNET_HDR,
    OFFLOAD_FEATURES, TUN_F_CSUM, TUN_F_TSO_ECN, TUN_F_TSO4, TUN_F_TSO6, TUN_F_UDP_TUNNEL, TUN_F_UDP_TUNNEL_GSO,
    TUN_F_UDP_TUNNEL_GSO_CSUM, TUN_F_UFO, TUN_F_USO4, TUN_F_USO6, TunTapKind, offloads_from_features,
};
use super::tuntap::{Medium, TunTapConfig, TunTapDevice};

/// The TAP kind of [`TunTapDevice`]: `IFF_TAP`, Ethernet frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tap;

impl TunTapKind for Tap {
    const NAME: &'static str = "tap";
    const IFF: u16 = IFF_TAP;
    const MEDIUM: Medium = Medium::Ethernet;
}

/// How to open a TAP ([`TunTapConfig`]).
pub type TapConfig = TunTapConfig;

/// An open TAP queue with virtio_net_hdr framing.
pub type TapDevice = TunTapDevice<Tap>;
