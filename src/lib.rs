//! superpacket: a userspace packet offload engine.
//!
//! The modules follow the data flow:
//! wire formats ([`wire`]) -> packet model ([`packet`]) -> offloads
//! ([`csum`], and GRO/GSO/defrag as they land) -> capture files ([`pcap`]) ->
//! command-line tools ([`cli`]).

pub mod bench;
pub mod cli;
pub mod csum;
pub mod device;
pub mod engine;
pub mod io;
pub mod offload;
pub mod packet;
pub mod pcap;
pub mod traffic;
pub mod validate;
pub mod wire;
