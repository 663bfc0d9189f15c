//! `superpacket bench peers`: superpacket next to tun-rs, DPDK and the
//! kernel on the same preloaded frames (issue 11).

pub mod dpdk;
