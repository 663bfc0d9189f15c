//! DPDK 22.11 as a peer: runs the `dpdk_peer` program (built from
//! `peers/dpdk/dpdk_peer.c` when libdpdk-dev is installed).
