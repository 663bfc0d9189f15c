//! A paravirtual port: virtio-style split virtqueues in shared memory
//! between the engine and an application, carrying frames with a
//! `virtio_net_hdr_v1` (offload-rules section 4), with eventfd
//! notifications, `EVENT_IDX` suppression, indirect descriptors and
//! virtio-net feature negotiation. It is the fastest way for a local
//! application to exchange superpackets with the engine: one copy into
//! shared memory per frame, no system call per frame.
//!
//! # Pieces
//!
//! - [`shm`]: the sealed memfd both processes map, and the eventfds;
//! - [`ring`]: the split virtqueue (descriptor table, available and used
//!   rings, `vring_need_event`) and the region layout;
//! - [`proto`]: the attach handshake over a Unix `SOCK_SEQPACKET` socket
//!   (the memfd and four eventfds passed with `SCM_RIGHTS`, as vhost-user
//!   does) and the feature bits;
//! - [`tx`]: the transmitter (driver side of a queue): buffers, the direct
//!   and indirect forms, and **the transmit policy** ([`TxStrategy`]);
//! - [`rx`]: the receiver (device side of a queue), which validates every
//!   descriptor against the shared region;
//! - [`hdrinfo`]: the header information a receiver may require;
//! - [`link`]: one attached link ([`PvLink`]) and the handshake's two halves;
//! - [`client`]: the application's API ([`PvClient`]);
//! - [`poller`]: the epoll set an engine port exposes as its descriptor;
//!
//! The engine side is the `pv` port driver ([`crate::device::pv_port`]),
//! topology `driver = { kind = "pv", socket = "/path/to.sock" }`.
//!
//! # Two transmit queues
//!
//! virtio-net has the driver post empty receive buffers that the device
//! fills. Here both ends are superpacket and both transmit with the same
//! policy, so each direction is a *transmit* virtqueue driven by its sender
//! (like memif's two rings): queue 0 carries client-to-engine frames (the
//! client is its driver, the engine its device), queue 1 engine-to-client
//! frames (the roles swapped). Each sender's buffers live in its queue's
//! data area, in the one region the engine created.
//!
//! # Submission forms and the policy
//!
//! **Direct**: one descriptor holding the header and the frame.
//! **Indirect**: one ring descriptor pointing at a table: metadata (header,
//! and header information when required), L2, L3 and L4 headers, payload
//! buffers. A receiver that negotiated `GUEST_HDRLEN` ("needs header info
//! for checksum offload") gets every checksum-offloaded frame in the
//! indirect form, which costs both sides real work: the sender describes the
//! headers and writes the table, the receiver copies out and checks the
//! table and every descriptor, checks the header information against the
//! headers it gathered. The policy ([`TxStrategy::SwCsumDirect`], after a
//! paravirtual NIC driver change that raised small-packet transmit from
//! 631k to 829k packets/s) completes the checksum in software for a lone
//! non-GSO packet (no `xmit_more`) and sends it direct; superpackets and
//! batched packets keep the offload. The two other strategies stay
//! selectable for comparison (`superpacket bench pv-tx`).
//!
//! # Trust
//!
//! Neither end trusts the other: the receiver copies descriptors out before
//! checking them and bounds every buffer to the sender's data area
//! ([`rx`]); the transmitter checks used ids ([`ring::VqDriver::reclaim`]);
//! the region is sealed against resizing ([`shm`]). Bad frames are drops
//! with a reason; a corrupt ring ends the link (the engine closes it and
//! waits for the next client), never the process. When a client dies, the
//! engine sees its control socket hang up, unmaps the region and closes
//! every descriptor: the memory is released.

pub mod client;
pub mod hdrinfo;
pub mod link;
pub mod poller;
pub mod proto;
pub mod ring;
pub mod rx;
pub mod shm;
pub mod tx;

#[cfg(test)]
mod tests;

pub use client::PvClient;
pub use link::{
    Attach, NotifyStats, PendingAttach, PvClientConfig, PvError, PvLink, PvServerConfig, PvStats, Role, accept_one,
};
pub use proto::{SeqListener, SeqPacket};
pub use rx::{RxForm, RxFrame, RxStats};
pub use tx::{RxCaps, TxError, TxForm, TxStats, TxStrategy};
