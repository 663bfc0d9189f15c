//! Hostile traffic for the flood tests and `superpacket bench flood`
//! (issue 10): frames written with an AF_PACKET socket (qdisc bypassed)
//! into a port of the lab's namespace A, addressed to the engine's router,
//! bounded by a frame count and a duration.
//!
//! - [`FloodKind::RandomTuples`]: UDP from random sources in 10.71.0.0/16
//!   with random ports to host B: every frame a new flow (GRO table, NAT
//!   connection table).
//! - [`FloodKind::Fragments`]: first fragments only (MF set, offset 0) of
//!   UDP datagrams from host A to host B with random IDs: reassembly queues
//!   that never complete.
//! - [`FloodKind::SynFlood`]: TCP SYNs from host A to host B port 9 with
//!   random source ports: one new NAT connection each.

use super::lab::{HOST_A_V4, HOST_B_V4};
use crate::lab::{Lab, TAP_A, TAP_B};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use superpacket::csum;
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket::wire::tcp::TcpPacket;
use superpacket::wire::udp::UdpPacket;
use superpacket_engine::io::packet_socket::{PacketSocket, PacketSocketConfig};
use superpacket_engine::io::{IoError, NetNs};

/// A flood's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodKind {
    /// Random UDP 5-tuples.
    RandomTuples,
    /// Never-completed IPv4 fragments.
    Fragments,
    /// TCP SYNs with random source ports.
    SynFlood,
}

impl FloodKind {
    /// Every kind.
    pub const ALL: [FloodKind; 3] = [FloodKind::RandomTuples, FloodKind::Fragments, FloodKind::SynFlood];

    /// Short name (`random-tuples`, `fragments`, `syn`).
    pub fn name(self) -> &'static str {
        match self {
            FloodKind::RandomTuples => "random-tuples",
            FloodKind::Fragments => "fragments",
            FloodKind::SynFlood => "syn",
        }
    }
}

/// What a flood sent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FloodReport {
    /// Frames the kernel took.
    pub sent: u64,
    /// Frames refused by `sendmsg` (`ENOBUFS`: the device's queue was full).
    pub refused: u64,
    /// Seconds spent.
    pub seconds: f64,
}

/// xorshift64*: cheap, deterministic per seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// An Ethernet + IPv4 frame from `src` to `dst` carrying `l4` (protocol
/// `proto`), with identification `id` and flags/offset `frag`; a valid
/// header checksum. Padding is the caller's business.
#[allow(clippy::too_many_arguments)] // one per header field set
pub fn ipv4_frame(
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    id: u16,
    frag: u16,
    l4: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(34 + l4.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let total = (20 + l4.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = csum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    f
}

/// A UDP datagram (header + `payload`) without checksum (0, allowed in IPv4).
pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + payload.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// A TCP SYN with a valid checksum.
fn syn(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, seq: u32) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x02;
    t[14..16].copy_from_slice(&64240u16.to_be_bytes());
    TcpPacket::new_unchecked(&mut t[..]).fill_checksum(csum::pseudo_header_v4(src.octets(), dst.octets(), 6, 20));
    t
}

/// One flood frame of `kind` to the router at `router_mac`.
pub fn flood_frame(kind: FloodKind, rng: &mut Rng, router_mac: [u8; 6], src_mac: [u8; 6]) -> Vec<u8> {
    let r = rng.next_u64();
    let (p1, p2, id) = ((r >> 16) as u16 | 1024, (r >> 32) as u16 | 1024, (r >> 48) as u16);
    match kind {
        FloodKind::RandomTuples => {
            let src = Ipv4Addr::new(10, 71, (r >> 8) as u8, r as u8 | 1);
            let dport = if p2 == 5201 { 5202 } else { p2 };
            // With a checksum: GRO holds (and the bucket may evict) such flows.
            let mut u = udp(p1, dport, &[0x5a; 18]);
            let pseudo = csum::pseudo_header_v4(src.octets(), HOST_B_V4.octets(), 17, u.len() as u16);
            UdpPacket::new_unchecked(&mut u[..]).fill_checksum(pseudo);
            ipv4_frame(router_mac, src_mac, src, HOST_B_V4, 17, id, 0, &u)
        }
        FloodKind::Fragments => {
            // 976 bytes of IP payload (a multiple of 8), more fragments follow.
            let payload = udp(p1, 9, &[0xa5; 968]);
            ipv4_frame(router_mac, src_mac, HOST_A_V4, HOST_B_V4, 17, id, 0x2000, &payload)
        }
        FloodKind::SynFlood => ipv4_frame(
            router_mac,
            src_mac,
            HOST_A_V4,
            HOST_B_V4,
            6,
            id,
            0x4000,
            &syn(HOST_A_V4, HOST_B_V4, p1, 9, r as u32),
        ),
    }
}

/// The MAC address `ns` has learned for `ip` (its neighbour table, read
/// through netlink), if any.
pub fn neighbour_mac(ns: &NetNs, ip: Ipv4Addr) -> Option<[u8; 6]> {
    ns.neighbour_mac(ip.into()).ok().flatten()
}

/// An AF_PACKET socket on `dev` in `ns` that bypasses the qdisc (a frame the
/// device's queue cannot take is refused with `ENOBUFS`, never queued).
///
/// # Errors
/// Opening the socket.
pub fn raw_sender(ns: &NetNs, dev: &str) -> Result<PacketSocket, IoError> {
    let cfg = PacketSocketConfig { qdisc_bypass: true, ..PacketSocketConfig::default() };
    PacketSocket::open_in(ns, dev, &cfg)
}

/// The topology floods are measured on: the lab's two TAPs
/// ([`crate::lab`]) routed with NAT (masquerade out of B), a
/// connection table of `max_connections` and GRO on A's port.
pub fn nat_topology(lab: &Lab, max_connections: u64) -> String {
    format!(
        "[[device]]\nname = \"a\"\nkind = \"port\"\ngro = true\n\
         driver = {{ kind = \"tap\", name = \"{TAP_A}\", netns = \"{}\" }}\naddresses = [\"10.71.0.1/24\"]\n\
         [[device]]\nname = \"b\"\nkind = \"port\"\n\
         driver = {{ kind = \"tap\", name = \"{TAP_B}\", netns = \"{}\" }}\naddresses = [\"10.72.0.1/24\"]\n\
         [[nat]]\ntype = \"masquerade\"\nout = \"b\"\n\
         [conntrack]\nmax_connections = {max_connections}\n",
        lab.a.name(),
        lab.b.name()
    )
}

/// Frames sent between two looks at the clock (and pacing sleeps).
pub const PACING_BURST: u64 = 64;

/// What to send and for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FloodPlan {
    /// The kind of frames.
    pub kind: FloodKind,
    /// Stop after this many frames were offered.
    pub max_frames: u64,
    /// Stop after this long.
    pub max_time: Duration,
    /// Frames per second, paced in bursts of [`PACING_BURST`]; 0: as fast
    /// as the socket takes them.
    pub rate: u64,
    /// Seed of the random addresses, ports and IDs.
    pub seed: u64,
}

/// Sends the plan's frames on `dev` in `ns` to `router_mac`.
///
/// # Errors
/// Opening the socket, or a send error other than `ENOBUFS`.
pub fn flood(ns: &NetNs, dev: &str, router_mac: [u8; 6], plan: &FloodPlan) -> Result<FloodReport, IoError> {
    let FloodPlan { kind, max_frames, max_time, rate, seed } = *plan;
    let mut sock = raw_sender(ns, dev)?;
    let mut rng = Rng::new(seed);
    let src_mac = [0x02, 0x66, 0x6c, 0x6f, 0x6f, 0x64];
    let hdr = VirtioNetHdr::default();
    let mut rep = FloodReport::default();
    let t0 = Instant::now();
    while rep.sent + rep.refused < max_frames {
        let offered = rep.sent + rep.refused;
        if offered % PACING_BURST == 0 {
            let elapsed = t0.elapsed();
            if elapsed >= max_time {
                break;
            }
            if rate > 0 {
                let due = Duration::from_secs_f64(offered as f64 / rate as f64);
                if due > elapsed {
                    std::thread::sleep((due - elapsed).min(max_time - elapsed));
                }
            }
        }
        let f = flood_frame(kind, &mut rng, router_mac, src_mac);
        match sock.send(&hdr, &[&f]) {
            Ok(_) => rep.sent += 1,
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => rep.refused += 1,
            Err(e) => return Err(e),
        }
    }
    rep.seconds = t0.elapsed().as_secs_f64();
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_frames_parse_as_intended() {
        let mut rng = Rng::new(7);
        for kind in FloodKind::ALL {
            let f = flood_frame(kind, &mut rng, [2; 6], [4; 6]);
            assert_eq!(csum::checksum(&f[14..34]), 0, "{kind:?}: IPv4 header checksum");
            let frag = u16::from_be_bytes([f[20], f[21]]);
            match kind {
                FloodKind::Fragments => assert_eq!(frag, 0x2000),
                _ => assert_eq!(frag & 0x3FFF, 0),
            }
            if kind == FloodKind::SynFlood {
                let src: [u8; 4] = f[26..30].try_into().unwrap();
                let dst: [u8; 4] = f[30..34].try_into().unwrap();
                let pseudo = csum::pseudo_header_v4(src, dst, 6, 20);
                assert_eq!(!csum::ones_add(pseudo, csum::ones_sum(&f[34..])), 0, "TCP checksum");
            }
        }
    }
}
