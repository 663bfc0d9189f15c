//! superpacket: packet offloads for userspace data paths.
//!
//! The modules follow the data flow:
//! wire formats ([`wire`]) -> packet model with `virtio_net_hdr`
//! ([`packet`]) -> checksums ([`csum`]) -> offloads ([`offload`]: GRO/LRO,
//! GSO/TSO/USO/fraglist, reassembly and fragmentation) -> capture files
//! ([`pcap`]); [`validate`] checks frames, [`traffic`] builds deterministic
//! test frames and superpackets.

#![deny(missing_docs)]

pub mod csum;
pub mod offload;
pub mod packet;
pub mod pcap;
pub mod traffic;
pub mod validate;
pub mod wire;
