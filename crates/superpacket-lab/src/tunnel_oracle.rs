//! The Linux kernel as the **tunnel GSO** oracle (docs/kernel-oracle.md
//! section 5, "The third oracle"): the kernel builds a VXLAN superpacket from an inner TSO/USO
//! superpacket, and segments it.
//!
//! Setup (two namespaces, deleted on drop): a veth `sptnl0` (sender) /
//! `sptnl1` (receiver) carrying the outer IPv4 or IPv6 addresses, a
//! permanent neighbour entry for the remote (no ARP/ND), and a kernel VXLAN
//! device `sptnlvx0` (VNI 42, port 4789, unicast remote, lower `sptnl0`,
//! outer UDP checksum on or off) made over rtnetlink
//! ([`superpacket_engine::io::netlink::Netlink::add_vxlan`]). The inner
//! superpacket is sent with AF_PACKET + `PACKET_VNET_HDR` **on the VXLAN
//! device**: its features include TSO/USO and HW_CSUM, so `vxlan_xmit`
//! gets it whole, encapsulates it (`udp_tunnel_xmit_skb`: gso_type gains
//! `SKB_GSO_UDP_TUNNEL[_CSUM]`, the outer UDP checksum field the
//! pseudo-header sum) and sends it on the veth. Each run sends it twice:
//! 1. with the veth's `tx-udp_tnl-segmentation` and
//!    `tx-udp_tnl-csum-segmentation` on (and `tx`, `tso`, `gso`): the veth
//!    passes the tunnel superpacket to its peer whole, where it is captured:
//!    the bytes are the input for our segmenter;
//! 2. with all of them off: `validate_xmit_skb` on the veth segments and
//!    checksums it in software (`__skb_udp_tunnel_segment` over
//!    `tcp_gso_segment`/`__udp_gso_segment`): the kernel's segments.
//!
//! The two sends are two skbs: only the outer IPv4 ID differs (the tunnel
//! takes a new one from `__ip_select_ident` per skb); everything else
//! (the entropy source port, a hash of the inner flow; the inner bytes) is
//! the same. Captured frames are kept only if they come from the sender's
//! MAC, are UDP to port 4789 and carry an inner frame from the sent inner
//! source MAC (the receiver answers with ICMP port unreachable, and the
//! VXLAN device sends its own IPv6 ND frames through the tunnel).
//!
//! Observed on 6.18.44 (this machine, 2026-05): run 1 delivers exactly one
//! frame (e.g. 3604 B for a 3500 B inner TCPv4 payload), outer DF clear,
//! outer UDP checksum 0 (`noudpcsum`) or the pseudo-header sum of the whole
//! (`udpcsum`); run 2 the segments with the outer IPv4 IDs consecutive.

use std::time::{Duration, Instant};
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket_engine::io::error::{IoError, Result};
use superpacket_engine::io::netlink::VxlanLink;
use superpacket_engine::io::netns::{NetNs, VethPair};
use superpacket_engine::io::packet_socket::{PacketSocket, PacketSocketConfig};

/// MAC of the sending veth end.
pub const SENDER_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0, 1];
/// MAC of the receiving veth end.
pub const RECEIVER_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0, 2];
/// MAC of the VXLAN device.
pub const VXLAN_MAC: [u8; 6] = [0x02, 0x7e, 0, 0, 0, 0x0a];
/// The VXLAN device's VNI.
pub const VNI: u32 = 42;

const OFFLOADS: [&str; 5] = ["tx", "tso", "gso", "tx-udp_tnl-segmentation", "tx-udp_tnl-csum-segmentation"];

/// What the kernel made of one inner superpacket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelRun {
    /// Run 1: the tunnel superpacket as the veth peer received it whole.
    pub superpacket: Vec<u8>,
    /// Run 2: the kernel's segments, in order.
    pub segments: Vec<Vec<u8>>,
}

/// Kernel VXLAN encapsulation and tunnel GSO as an oracle (module docs).
#[derive(Debug)]
pub struct TunnelGsoOracle {
    // Drop order: sockets, veth (with the VXLAN device on it), namespaces.
    tx: PacketSocket,
    rx: PacketSocket,
    veth: VethPair,
    ns_tx: NetNs,
    _ns_rx: NetNs,
    buf: Vec<u8>,
    /// Outer IPv6.
    pub outer_v6: bool,
    /// Outer UDP checksum (`UDP_TUNNEL_CSUM`).
    pub udp_csum: bool,
}

impl TunnelGsoOracle {
    /// Sets up the namespaces, veth and VXLAN device (module docs).
    ///
    /// # Errors
    /// Any setup step failing (e.g. without root).
    pub fn new(outer_v6: bool, udp_csum: bool) -> Result<TunnelGsoOracle> {
        let ns_tx = NetNs::create("sptnl")?;
        let ns_rx = NetNs::create("sptnl")?;
        if !outer_v6 {
            ns_rx.disable_ipv6()?;
        }
        let veth = VethPair::create(&ns_tx, "sptnl0", &ns_rx, "sptnl1")?;
        ns_tx.set_mac("sptnl0", SENDER_MAC)?;
        ns_rx.set_mac("sptnl1", RECEIVER_MAC)?;
        let (local, remote, prefix) =
            if outer_v6 { ("fd00:7e::1", "fd00:7e::2", 64) } else { ("10.126.0.1", "10.126.0.2", 24) };
        ns_tx.add_addr_nodad("sptnl0", &format!("{local}/{prefix}"))?;
        ns_rx.add_addr_nodad("sptnl1", &format!("{remote}/{prefix}"))?;
        ns_tx.link_up("sptnl0")?;
        ns_rx.link_up("sptnl1")?;
        ns_tx.add_neighbour("sptnl0", remote, RECEIVER_MAC)?;
        let parse = |s: &str| s.parse().map_err(|e| IoError::Oracle(format!("{s}: {e}")));
        let cfg =
            VxlanLink { vni: VNI, remote: parse(remote)?, local: parse(local)?, port: 4789, dev: "sptnl0", udp_csum };
        ns_tx.netlink()?.add_vxlan("sptnlvx0", &cfg)?;
        ns_tx.set_mac("sptnlvx0", VXLAN_MAC)?;
        ns_tx.link_up("sptnlvx0")?;
        let tx_cfg = PacketSocketConfig { incoming_only: true, auxdata: false, ..PacketSocketConfig::default() };
        let tx = PacketSocket::open_in(&ns_tx, "sptnlvx0", &tx_cfg)?;
        let rx_cfg = PacketSocketConfig {
            incoming_only: true,
            auxdata: false,
            rcvbuf: Some(32 << 20),
            ..PacketSocketConfig::default()
        };
        let rx = PacketSocket::open_in(&ns_rx, "sptnl1", &rx_cfg)?;
        Ok(TunnelGsoOracle { tx, rx, veth, ns_tx, _ns_rx: ns_rx, buf: vec![0; 256 * 1024], outer_v6, udp_csum })
    }

    /// The sender's namespace and veth end.
    pub fn sender(&self) -> (&NetNs, &str) {
        (&self.ns_tx, self.veth.name_a())
    }

    /// Sends the inner Ethernet `frame` with `hdr` (an inner TSO/USO
    /// superpacket) into the VXLAN device twice: veth tunnel offloads on
    /// (the superpacket whole) and off (the kernel's segments); `expected`
    /// is how many segments to wait for.
    ///
    /// # Errors
    /// Setting the offloads, sending or receiving failing; run 1 not giving
    /// exactly one frame.
    pub fn run(&mut self, hdr: &VirtioNetHdr, frame: &[u8], expected: usize) -> Result<TunnelRun> {
        let inner_src: [u8; 6] = frame
            .get(6..12)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| IoError::Oracle("inner frame shorter than an Ethernet header".into()))?;
        let mut runs = Vec::new();
        for (on, want) in [("on", 1), ("off", expected)] {
            let pairs: Vec<(&str, &str)> = OFFLOADS.iter().map(|f| (*f, on)).collect();
            self.ns_tx.set_offloads(self.veth.name_a(), &pairs)?;
            self.rx.drain()?;
            self.tx.drain()?;
            self.tx.send(hdr, &[frame]).map_err(|e| IoError::Oracle(format!("sending the inner superpacket: {e}")))?;
            runs.push(self.collect(want, inner_src)?);
        }
        let segments = runs.pop().unwrap_or_default();
        let mut whole = runs.pop().unwrap_or_default();
        if whole.len() != 1 {
            return Err(IoError::Oracle(format!(
                "with tunnel offloads on, {} frames arrived instead of one superpacket",
                whole.len()
            )));
        }
        Ok(TunnelRun { superpacket: whole.remove(0), segments })
    }

    /// Receives tunnel frames of the inner source `inner_src` until `want`
    /// arrived and 20 ms passed quietly, or nothing came for 1 s.
    fn collect(&mut self, want: usize, inner_src: [u8; 6]) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        let start = Instant::now();
        loop {
            let timeout = if out.len() >= want { Duration::from_millis(20) } else { Duration::from_secs(1) };
            if !self.rx.poll_readable(timeout)? || start.elapsed() > Duration::from_secs(10) {
                return Ok(out);
            }
            while let Some(info) = self.rx.try_recv_info(&mut self.buf)? {
                let f = &self.buf[..info.len];
                if is_tunnel_frame(f, inner_src) {
                    out.push(f.to_vec());
                }
            }
        }
    }
}

/// A VXLAN frame (untagged IPv4/IPv6, UDP to 4789) from [`SENDER_MAC`]
/// whose inner frame comes from `inner_src`.
fn is_tunnel_frame(f: &[u8], inner_src: [u8; 6]) -> bool {
    if f.get(6..12) != Some(&SENDER_MAC[..]) {
        return false;
    }
    let udp = match f.get(12..14) {
        Some([0x08, 0x00]) if f.get(23) == Some(&17) => 14 + usize::from(f.get(14).map_or(0, |b| b & 0x0f)) * 4,
        Some([0x86, 0xdd]) if f.get(20) == Some(&17) => 54,
        _ => return false,
    };
    f.get(udp + 2..udp + 4) == Some(&4789u16.to_be_bytes()[..])
        && f.get(udp + 16 + 6..udp + 16 + 12) == Some(&inner_src[..])
}
