//! TUN ports: a layer-3 device as an Ethernet port of the device graph
//! (topology `driver = { kind = "tun", name = "sp0", netns = "lab" }`).
//!
//! A TUN ([`crate::io::tun`]) reads and writes raw IP packets after the
//! virtio_net_hdr; the graph's devices (bridge, VLAN, router with ARP and
//! neighbour discovery, NAT) work on Ethernet frames. [`TunDriver`] makes
//! the TUN an Ethernet port on a **point-to-point link** whose far end, the
//! "peer" (the kernel behind the TUN), has the fixed locally administered
//! MAC [`PEER_MAC`]:
//!
//! - **receive**: the queue ([`IoPortDriver`] over a [`TunDevice`]) imports
//!   each packet's virtio_net_hdr for raw IP ([`Medium::Ip`]); the port's
//!   GRO (`gro = true`) runs on the raw packets; then
//!   [`PortDriver::link_input`] puts an Ethernet header in front, into the
//!   packet's headroom (no allocation, no payload copy): destination the
//!   port device's MAC, source [`PEER_MAC`], EtherType from the IP version
//!   nibble. The checksum start of a partial checksum moves by 14 with it
//!   ([`Packet::push`]); GSO metadata holds no offsets.
//! - **transmit**: [`PortDriver::link_output`] strips the 14-byte header
//!   again ([`Packet::pull`]: the checksum start moves back) before the
//!   port's validate step, so a superpacket the TUN cannot take whole is
//!   segmented as raw IP (the segmenter's target has [`Medium::Ip`]), and
//!   written with a virtio_net_hdr built from its metadata. What the kernel
//!   accepted with `TUNSETOFFLOAD` (`offloads`, as for a TAP: `csum`,
//!   `tso4`, `tso6`, `tso-ecn`, `uso`) decides the port's features
//!   ([`super::port_io::tap_features`]).
//! - **ARP and neighbour discovery**: every ARP request and IPv6 neighbour
//!   solicitation the graph sends out of the port is answered by the driver
//!   itself, from [`PEER_MAC`] (on a point-to-point link every neighbour is
//!   the peer), and never written to the TUN; the graph receives the reply
//!   on the port as if it had come from the wire. Counted as the driver
//!   counters `arp_answered` and `nd_answered`.
//! - **other frames**: a frame that is neither IPv4, IPv6 nor an ARP
//!   request is dropped and counted on the port as `tun-not-ip` (an ARP
//!   packet other than a request: `tun-arp`); an IP frame whose version
//!   nibble disagrees with its EtherType as `tun-bad-ip`; a received packet
//!   that is not IPv4 or IPv6 as `tun-not-ip`.
//!
//! A TUN port carries no VLAN tags (it is `VLAN_CHALLENGED`: a VLAN device
//! on it is refused) and is meant as a router interface: put the addresses
//! on the port itself, since received frames are addressed to its MAC.

use super::features::{FeaturesCheck, NetdevFeatures};
use super::port::{DriverError, LinkOutput, PortDriver};
use super::port_io::{IoPortDriver, TapPortOptions};
use super::router::{Ndp, arp_reply, neighbour_advert, parse_ndp};
use crate::io::NetNs;
use crate::io::tun::TunDevice;
use std::any::Any;
use std::os::fd::RawFd;
use superpacket::offload::gso::SegmentSink;
use superpacket::packet::Packet;
use superpacket::wire::ethernet::ETHERNET_HEADER_LEN;
use superpacket::wire::{ArpOperation, ArpPacket, ArpRepr, EtherType, MacAddr, Medium};

/// The MAC address of the far end of every TUN port's point-to-point link:
/// the source of received frames and of the ARP and neighbour
/// advertisements the driver answers with (locally administered, unicast).
pub const PEER_MAC: MacAddr = MacAddr([0x02, 0x53, 0x50, 0x70, 0x65, 0x72]);

/// The framing of a point-to-point link to [`PEER_MAC`] for a driver of
/// raw IP packets (see the module documentation): what [`TunDriver`] does
/// in [`PortDriver::link_input`] and [`PortDriver::link_output`], apart
/// from the I/O.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PointToPoint {
    /// ARP requests answered.
    pub arp_answered: u64,
    /// Neighbour solicitations answered.
    pub nd_answered: u64,
}

impl PointToPoint {
    /// Prepends the Ethernet header to raw IP packet `pkt` (into its
    /// headroom): destination `own`, source [`PEER_MAC`], EtherType from the
    /// IP version; a partial checksum's start moves with the data.
    ///
    /// # Errors
    /// `tun-not-ip` if the packet is not IPv4 or IPv6.
    pub fn link_input(&self, mut pkt: Packet, own: MacAddr) -> Result<Packet, &'static str> {
        let EtherType(ethertype) = Medium::ip_ethertype(pkt.linear()).map_err(|_| "tun-not-ip")?;
        let h = pkt.push(ETHERNET_HEADER_LEN).map_err(|_| "tun-frame")?;
        h[..6].copy_from_slice(&own.0);
        h[6..12].copy_from_slice(&PEER_MAC.0);
        h[12..14].copy_from_slice(&ethertype.to_be_bytes());
        Ok(pkt)
    }

    /// What becomes of Ethernet frame `frame` sent to the peer: an IP frame
    /// loses its header (the checksum start moves back), an ARP request or
    /// a neighbour solicitation is answered, anything else is dropped.
    pub fn link_output(&mut self, mut frame: Packet) -> LinkOutput {
        let b = frame.linear();
        let Some(et) = b.get(12..14).map(|e| u16::from_be_bytes([e[0], e[1]])) else {
            return LinkOutput::Drop("runt");
        };
        let version = b.get(ETHERNET_HEADER_LEN).map(|v| v >> 4);
        match (EtherType(et), version) {
            (EtherType::ARP, _) => return self.answer_arp(b),
            (EtherType::IPV6, Some(6)) => {
                if let Some(answer) = self.answer_solicitation(b) {
                    return answer;
                }
            }
            (EtherType::IPV4, Some(4)) => {}
            (EtherType::IPV4 | EtherType::IPV6, _) => return LinkOutput::Drop("tun-bad-ip"),
            _ => return LinkOutput::Drop("tun-not-ip"),
        }
        match frame.pull(ETHERNET_HEADER_LEN) {
            Ok(()) => LinkOutput::Send(frame),
            Err(_) => LinkOutput::Drop("tun-bad-ip"),
        }
    }

    /// The reply to ARP frame `b`: a request is answered from [`PEER_MAC`].
    fn answer_arp(&mut self, b: &[u8]) -> LinkOutput {
        let req = b.get(ETHERNET_HEADER_LEN..).and_then(|a| ArpRepr::parse(&ArpPacket::new_unchecked(a)).ok());
        match req {
            Some(r) if r.operation == ArpOperation::Request => match arp_reply(&r, PEER_MAC) {
                Ok(reply) => {
                    self.arp_answered += 1;
                    LinkOutput::Reply(reply)
                }
                Err(reason) => LinkOutput::Drop(reason),
            },
            _ => LinkOutput::Drop("tun-arp"),
        }
    }

    /// The neighbour advertisement from [`PEER_MAC`] answering IPv6 frame
    /// `b` if it is a neighbour solicitation; `None` for any other frame.
    fn answer_solicitation(&mut self, b: &[u8]) -> Option<LinkOutput> {
        // IPv6 without extension headers, ICMPv6 type 135.
        if b.get(20) != Some(&58) || b.get(54) != Some(&135) {
            return None;
        }
        let Ok(Ndp::Solicit { src, target, source_lladdr }) = parse_ndp(b) else { return None };
        Some(match neighbour_advert(target, src, source_lladdr, PEER_MAC, false) {
            Ok(reply) => {
                self.nd_answered += 1;
                LinkOutput::Reply(reply)
            }
            Err(reason) => LinkOutput::Drop(reason),
        })
    }

    /// `arp_answered` and `nd_answered`.
    pub fn counters(&self, report: &mut dyn FnMut(&'static str, u64)) {
        report("arp_answered", self.arp_answered);
        report("nd_answered", self.nd_answered);
    }
}

/// A TUN queue: the I/O under a [`TunDriver`].
pub type TunQueue = IoPortDriver<TunDevice>;

/// The `tun` port driver (see the module documentation): a queue of raw IP
/// packets `Q` (a [`TunQueue`]; in tests, any driver of raw IP packets) with
/// [`PointToPoint`] framing.
#[derive(Debug)]
pub struct TunDriver<Q: PortDriver = TunQueue> {
    io: Q,
    link: PointToPoint,
}

impl TunDriver<TunQueue> {
    /// Creates (or attaches to) TUN `name` inside `netns` (`None`: the
    /// current namespace), nonblocking, negotiates `opts.offloads` (falling
    /// back as a TAP does) and brings the link up; the driver can reopen it
    /// ([`PortDriver::reopen`]). The TUN exists while the driver lives
    /// (unless it existed before).
    ///
    /// # Errors
    /// Opening, `TUNSETOFFLOAD` or `ip link set up` failing (needs
    /// CAP_NET_ADMIN); the message names the step.
    pub fn open_with(name: &str, netns: Option<&NetNs>, opts: &TapPortOptions) -> Result<TunDriver, DriverError> {
        TunQueue::open_with(name, netns, opts).map(TunDriver::new)
    }

    /// The `TUN_F_*` offloads the kernel accepted.
    pub fn offloads(&self) -> u32 {
        self.io.offloads()
    }
}

impl<Q: PortDriver> TunDriver<Q> {
    /// A TUN port over `io`, a driver that reads and writes raw IP packets.
    pub fn new(io: Q) -> TunDriver<Q> {
        TunDriver { io, link: PointToPoint::default() }
    }

    /// The queue driver (its counters; for a [`TunQueue`], the offloads
    /// accepted).
    pub fn io(&self) -> &Q {
        &self.io
    }

    /// The queue driver, writable.
    pub fn io_mut(&mut self) -> &mut Q {
        &mut self.io
    }

    /// The link's answer counters.
    pub fn link(&self) -> &PointToPoint {
        &self.link
    }
}

impl<Q: PortDriver + 'static> PortDriver for TunDriver<Q> {
    fn kind(&self) -> &'static str {
        "tun"
    }
    /// The queue's features (from the offloads accepted), without VLANs.
    fn hw_features(&self) -> NetdevFeatures {
        self.io.hw_features() | NetdevFeatures::VLAN_CHALLENGED
    }
    fn features_check(&self) -> FeaturesCheck {
        FeaturesCheck::Any
    }
    fn xmit(&mut self, pkt: Packet) -> Result<(), DriverError> {
        self.io.xmit(pkt)
    }
    fn xmit_len(&mut self, pkt: Packet, len: usize) -> Result<(), DriverError> {
        self.io.xmit_len(pkt, len)
    }
    fn sink(&mut self) -> &mut dyn SegmentSink {
        self.io.sink()
    }
    fn recv(&mut self) -> Option<Packet> {
        self.io.recv()
    }
    fn take_drops(&mut self, report: &mut dyn FnMut(&'static str, u64)) {
        self.io.take_drops(report);
    }
    fn poll_fd(&self) -> Option<RawFd> {
        self.io.poll_fd()
    }
    fn flush(&mut self) {
        self.io.flush();
    }
    /// The queue's counters ([`IoPortDriver`]'s for a [`TunQueue`]) plus
    /// `arp_answered` and `nd_answered`.
    fn driver_counters(&self, report: &mut dyn FnMut(&'static str, u64)) {
        self.io.driver_counters(report);
        self.link.counters(report);
    }
    fn is_gone(&self) -> bool {
        self.io.is_gone()
    }
    fn reopen(&mut self) -> Result<(), DriverError> {
        self.io.reopen()
    }
    fn medium(&self) -> Medium {
        Medium::Ip
    }
    fn link_input(&mut self, pkt: Packet, own: MacAddr) -> Result<Packet, &'static str> {
        self.link.link_input(pkt, own)
    }
    fn link_output(&mut self, frame: Packet) -> LinkOutput {
        self.link.link_output(frame)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests;
