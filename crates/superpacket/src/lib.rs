//! superpacket: packet offloads for userspace data paths.
//!
//! The modules follow the data flow:
//! wire formats ([`wire`]) -> packet model with `virtio_net_hdr`
//! ([`packet`]) -> checksums ([`csum`]) -> offloads ([`offload`]: GRO/LRO,
//! GSO/TSO/USO/fraglist, reassembly and fragmentation) -> capture files
//! ([`pcap`]); [`validate`] checks frames, [`traffic`] builds deterministic
//! test frames and superpackets.
//!
//! Every offload works on Ethernet frames and on raw IP packets (what a TUN
//! device with `IFF_NO_PI` hands over), chosen per instance with
//! [`wire::Medium`]. Behaviour follows current Linux; the rules are written
//! down in the repository's `docs/offload-rules.md`, which the code cites as
//! "offload-rules N.N" (its section N.N), and what this project's kernel does
//! as a test oracle in `docs/kernel-oracle.md`.

#![deny(missing_docs)]

pub mod csum;
pub mod offload;
pub mod packet;
pub mod pcap;
pub mod traffic;
pub mod validate;
pub mod wire;
