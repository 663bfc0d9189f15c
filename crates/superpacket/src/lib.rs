//! superpacket: packet offloads for userspace data paths.
//!
//! The modules follow the data flow:
//! wire formats ([`wire`]) -> packet model with `virtio_net_hdr`
//! ([`packet`]) -> checksums ([`csum`]) -> offloads ([`offload`]: GRO/LRO,
//! GSO/TSO/USO/fraglist, reassembly and fragmentation) -> capture files
//! ([`pcap`]); [`validate`] checks frames, [`traffic`] builds deterministic
//! test frames and superpackets.
//!
//! # Quick start for a TUN-based VPN
//!
//! A TUN opened with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR` and TSO/USO offloads
//! hands over raw IP packets ([`wire::Medium::Ip`]) of up to 64 KiB, each
//! behind a `virtio_net_hdr` ([`packet::virtio`]). GSO cuts such a
//! superpacket into packets for the transport's MTU; GRO coalesces the
//! packets the transport brings back into superpackets for one TUN write each:
//!
//! ```
//! use superpacket::offload::gro::{Gro, GroConfig};
//! use superpacket::offload::gso::{Segmenter, TargetCaps, VecSink};
//! use superpacket::packet::virtio::VirtioNetHdr;
//! use superpacket::traffic::{Flow, FlowSpec, Transport};
//! use superpacket::wire::{Medium, TcpFlags};
//!
//! // Packets from the transport: raw IP (generated frames minus their 14-byte Ethernet header).
//! let mut flow = Flow::new(FlowSpec::new(Transport::Tcp, false, 0));
//! let mut gro = Gro::new(GroConfig::default().with_medium(Medium::Ip));
//! for _ in 0..8 {
//!     gro.receive_frame(&flow.frame(1348, TcpFlags::empty()).unwrap()[14..]);
//! }
//! gro.flush(); // end of the receive batch
//! let sp = gro.drain_delivered().next().unwrap();
//! assert_eq!((sp.meta.gso_segs, sp.total_len()), (8, 20 + 32 + 8 * 1348));
//! // The header of its TUN write (then the packet's chunks, one writev).
//! let hdr = VirtioNetHdr::from_meta_as(&sp.meta, sp.linear(), Medium::Ip, false).unwrap();
//! assert_eq!(hdr.gso_size, 1348);
//!
//! // The other way: a superpacket read from the TUN, cut for a 1400-byte transport.
//! let caps = TargetCaps::new(1400).with_medium(Medium::Ip); // no offloads: checksums in software
//! let mut sink = VecSink::new();
//! Segmenter::new().segment(&sp, &caps, &mut sink).unwrap();
//! assert_eq!(sink.frames.len(), 8);
//! assert!(sink.frames.iter().all(|f| f.data.len() == 1400));
//! ```
//!
//! The whole program, with the TUN set up through `libc`, reused buffers and
//! a stand-in transport, is `examples/tun_vpn.rs`; as root,
//! `cargo run -p superpacket --example tun_vpn -- --self-test` runs kernel
//! TCP and UDP through it in a private network namespace.
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
