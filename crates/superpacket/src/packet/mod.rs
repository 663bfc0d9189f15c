//! The packet model: a buffer with headroom, shared payload segments and a
//! frag list ([`Packet`]), its offload metadata ([`OffloadMeta`]), and the
//! conversion to and from `virtio_net_hdr` ([`virtio`]).

mod buffer;
mod meta;
pub mod pool;
pub mod prefetch;
pub mod virtio;

pub use buffer::{DEFAULT_HEADROOM, MAX_LINEAR_END, MAX_SEGMENTS, Packet, PacketError, Segment};
pub use meta::{ChecksumState, Encapsulation, GsoProtocol, GsoType, OffloadMeta, TunnelKind};
