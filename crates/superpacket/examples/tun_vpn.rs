//! The data path of a TUN-based VPN (the tun-rs / wireguard-go use case),
//! with superpacket doing the offloads.
//!
//! ```text
//!  kernel ──TSO/USO superpacket──▶ TUN read ──to_meta──▶ GSO (1400) ──▶ Transport::send
//!                                                                             │ (the wire)
//!  kernel ◀──superpacket────────── TUN write ◀──from_meta_as── GRO ◀── Transport::recv
//! ```
//!
//! The TUN is opened with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR` and
//! `TUNSETOFFLOAD` (CSUM, TSO4/6, USO4/6, falling back to less), so the
//! kernel hands over whole TCP/UDP superpackets of up to 64 KiB with a
//! `virtio_net_hdr` in front and a raw IP packet behind it. Each is imported
//! ([`VirtioNetHdr::to_meta`], [`Medium::Ip`]), cut by GSO into packets of
//! at most 1400 bytes with software checksums (what goes into an encrypted
//! datagram), and handed to a [`Transport`]. Packets coming back from the
//! transport are coalesced by GRO into superpackets again and written to the
//! TUN with a `virtio_net_hdr` ([`VirtioNetHdr::from_meta_as`]), so the
//! kernel's TCP and UDP see a few large packets instead of many small ones.
//!
//! The transport here is a stand-in: [`Mirror`], an in-memory peer that
//! encrypts nothing and sends every packet for one of its two addresses back
//! as if it came from the other one (10.77.0.2 <-> 10.77.0.3, fd00:77::2 <->
//! fd00:77::3). A connection from 10.77.0.1 to 10.77.0.2:P thus arrives at
//! 10.77.0.1:P from 10.77.0.3, and its replies find their way back: the host
//! talks to itself through the whole tunnel. A real VPN puts its encryption
//! and UDP socket behind the same two methods.
//!
//! Run (as root; the device exists as long as the program runs):
//!
//! ```text
//! cargo run -p superpacket --example tun_vpn -- --self-test   # private namespace, checks, exit 0/1/2
//! cargo run -p superpacket --example tun_vpn -- --help        # interactive use
//! ```
//!
//! `--self-test` moves the process into a network namespace of its own
//! (`unshare(CLONE_NEWNET)`: it vanishes with the process, the host's
//! interfaces and routes are never touched), configures the TUN with ioctls,
//! runs kernel TCP (TSO) and UDP (`UDP_SEGMENT`, USO) over IPv4 and IPv6
//! through the tunnel and checks every byte that comes back.
//!
//! Buffers are reused: the superpacket read buffer goes into a [`Packet`]
//! and comes back with [`Packet::into_buffers`] after GSO; GSO writes each
//! segment into one scratch buffer; packets from the transport land in
//! MTU-sized buffers from a pool, which GRO moves (without copying) into its
//! aggregates and which return to the pool once the aggregate is written. In
//! the steady state the loop does not allocate per packet (GRO allocates a
//! small segment list per aggregate).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use superpacket::csum;
use superpacket::offload::gro::{Gro, GroConfig, UdpGroMode};
use superpacket::offload::gso::{SegmentSink, Segmenter, SgFrame, TargetCaps};
use superpacket::packet::virtio::{HdrByteOrder, HdrLayout, ImportOptions, VirtioNetHdr};
use superpacket::packet::{GsoType, OffloadMeta, Packet};
use superpacket::traffic::payload_byte;
use superpacket::wire::Medium;

/// Default device name.
const DEFAULT_IFNAME: &str = "sptun0";
/// The transport's MTU: the largest IP packet GSO produces. The TUN gets the
/// same MTU so that the kernel's segment size (TCP MSS) fits it.
const MTU: usize = 1400;
/// `sizeof(struct virtio_net_hdr)`, the TUN's default `TUNSETVNETHDRSZ`.
const VNET_HDR_LEN: usize = 10;
/// One TUN read: the header and an IP packet of up to 64 KiB.
const READ_BUF_LEN: usize = VNET_HDR_LEN + 65536;
/// One packet from the transport.
const RX_BUF_LEN: usize = 2048;
/// TUN reads per wake-up: the batch GRO coalesces the answers of.
const READ_BATCH: usize = 64;
/// Most idle receive buffers kept for reuse.
const RX_POOL_MAX: usize = 4096;
/// Chunks of one written superpacket passed to `writev` without a copy.
const MAX_IOV: usize = 64;

/// Local and mirror addresses: the host is .1, the mirror answers for .2 and .3.
const LOCAL4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const PEERS4: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 77, 0, 2), Ipv4Addr::new(10, 77, 0, 3)];
const LOCAL6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1);
const PEERS6: [Ipv6Addr; 2] =
    [Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2), Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 3)];

fn main() -> ExitCode {
    let mut self_test = false;
    let mut ifname = DEFAULT_IFNAME.to_string();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--self-test" => self_test = true,
            "-h" | "--help" => {
                print!("{}", usage());
                return ExitCode::SUCCESS;
            }
            a if a.starts_with('-') => {
                eprint!("unknown option {a}\n\n{}", usage());
                return ExitCode::from(2);
            }
            a => ifname = a.to_string(),
        }
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        if self_test {
            eprintln!(
                "tun_vpn --self-test: cannot run: it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create \
                 a network namespace and a TUN device. Try: sudo target/debug/examples/tun_vpn --self-test"
            );
        } else {
            eprint!("tun_vpn: not root, nothing to do.\n\n{}", usage());
        }
        return ExitCode::from(2);
    }
    if self_test { self_test::run(&ifname) } else { serve(&ifname) }
}

fn usage() -> String {
    format!(
        "usage: tun_vpn [--self-test] [IFNAME]

A VPN data path on a TUN device ({DEFAULT_IFNAME} by default): superpackets from the
kernel are cut by GSO into {MTU}-byte packets for a transport, and packets from the
transport are coalesced by GRO and written back. The transport is an in-memory
mirror: whatever is sent to {} comes back from {} (and the other
way round; IPv6: {} and {}). Needs root.

  --self-test   create a private network namespace, configure the TUN there, run
                kernel TCP and UDP (IPv4 and IPv6) through the tunnel and check
                every byte; exit 0 passed, 1 a check failed, 2 cannot run
  IFNAME        TUN device name

Interactive use in a throwaway namespace (as root):
  ip netns add vpn-demo
  cargo build -p superpacket --example tun_vpn
  ip netns exec vpn-demo target/debug/examples/tun_vpn        # keeps running
  # in a second shell:
  ip netns exec vpn-demo sh -c 'ip link set {DEFAULT_IFNAME} mtu {MTU} up &&
      ip addr add {LOCAL4}/24 dev {DEFAULT_IFNAME} && ip addr add {LOCAL6}/64 dev {DEFAULT_IFNAME}'
  ip netns exec vpn-demo ping -c 3 {}
  ip netns exec vpn-demo sh -c 'python3 -m http.server -b {LOCAL4} 8000 & sleep 1;
      curl -s http://{}:8000/ | head -3; kill $!'    # TCP to .2 arrives from .3
  ip netns delete vpn-demo                                     # after Ctrl-C
",
        PEERS4[0], PEERS4[1], PEERS6[0], PEERS6[1], PEERS4[0], PEERS4[0]
    )
}

/// Interactive mode: the TUN in the current namespace, until killed.
fn serve(ifname: &str) -> ExitCode {
    let (tun, offloads) = match sys::open_tun(ifname) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tun_vpn: cannot open TUN {ifname}: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{ifname}: IFF_TUN | IFF_NO_PI | IFF_VNET_HDR, offloads {}", sys::offload_names(offloads));
    println!("configure it from another shell of this namespace, e.g.:");
    println!(
        "  ip link set {ifname} mtu {MTU} up && ip addr add {LOCAL4}/24 dev {ifname} && ip addr add {LOCAL6}/64 dev {ifname}"
    );
    println!(
        "then talk to the mirror: ping {}, or TCP/UDP to {}:PORT (it comes back from {})",
        PEERS4[0], PEERS4[0], PEERS4[1]
    );
    println!("counters every 10 s while traffic flows; Ctrl-C ends (the device goes with the process)");
    let mut tunnel = Tunnel::new(tun, Mirror::default());
    let mut last = Stats::default();
    let mut next = Instant::now() + Duration::from_secs(10);
    loop {
        if let Err(e) = tunnel.pump(Duration::from_millis(500)) {
            eprintln!("tun_vpn: {e}");
            return ExitCode::from(1);
        }
        if Instant::now() >= next {
            next += Duration::from_secs(10);
            let now = tunnel.mirror_stats();
            if now != last {
                println!("{}", now.line());
                last = now;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The transport.

/// What a VPN sends its packets over: one IP packet (at most the MTU) at a
/// time, each way. A real one encrypts, authenticates and uses a UDP socket.
trait Transport {
    /// Sends one IP packet to the peer.
    fn send(&mut self, packet: &[u8]);
    /// Receives one IP packet from the peer into `buf`; `None` when nothing
    /// is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> Option<usize>;
}

/// The stand-in peer: packets to one of its two addresses come back from the
/// other one, addressed to their sender (addresses swapped, checksums
/// updated incrementally, ports untouched). Anything else (router
/// solicitations, multicast) is dropped, as a peer drops what it does not route.
#[derive(Debug, Default)]
struct Mirror {
    /// Packets on their way back.
    in_flight: VecDeque<Vec<u8>>,
    /// Buffers for reuse: no allocation per packet once warm.
    free: Vec<Vec<u8>>,
    /// Packets not addressed to the mirror.
    not_routed: u64,
}

impl Transport for Mirror {
    fn send(&mut self, packet: &[u8]) {
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(packet);
        if reflect(&mut buf) {
            self.in_flight.push_back(buf);
        } else {
            self.not_routed += 1;
            self.free.push(buf);
        }
    }

    fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        loop {
            let p = self.in_flight.pop_front()?;
            let n = p.len();
            let fits = n <= buf.len();
            if fits {
                buf[..n].copy_from_slice(&p);
            }
            self.free.push(p);
            if fits {
                return Some(n);
            }
        }
    }
}

/// Turns a packet for mirror address A from S into a packet from mirror
/// address B to S. False if the packet is not for the mirror.
fn reflect(p: &mut [u8]) -> bool {
    let other = |dst: &[u8], peers: [&[u8]; 2]| {
        if dst == peers[0] {
            Some(1)
        } else if dst == peers[1] {
            Some(0)
        } else {
            None
        }
    };
    match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let (o0, o1) = (PEERS4[0].octets(), PEERS4[1].octets());
            let Some(i) = other(&p[16..20], [&o0, &o1]) else { return false };
            if ihl < 20 || p.len() < ihl {
                return false;
            }
            let mut old = [0u8; 8];
            old.copy_from_slice(&p[12..20]);
            let mut new = [0u8; 8];
            new[..4].copy_from_slice(&PEERS4[i].octets());
            new[4..].copy_from_slice(&old[..4]);
            p[12..20].copy_from_slice(&new);
            fix_checksum(p, 10, &old, &new, false);
            // Only the first fragment carries the transport header.
            if u16::from_be_bytes([p[6], p[7]]) & 0x1fff == 0 {
                match p[9] {
                    6 => fix_checksum(p, ihl + 16, &old, &new, false),
                    17 => fix_checksum(p, ihl + 6, &old, &new, true),
                    _ => {} // ICMP: its checksum does not cover the addresses
                }
            }
            true
        }
        Some(6) if p.len() >= 40 => {
            let (o0, o1) = (PEERS6[0].octets(), PEERS6[1].octets());
            let Some(i) = other(&p[24..40], [&o0, &o1]) else { return false };
            let mut old = [0u8; 32];
            old.copy_from_slice(&p[8..40]);
            let mut new = [0u8; 32];
            new[..16].copy_from_slice(&PEERS6[i].octets());
            new[16..].copy_from_slice(&old[..16]);
            p[8..40].copy_from_slice(&new);
            // Next header directly after the fixed header (no extension headers here).
            match p[6] {
                6 => fix_checksum(p, 40 + 16, &old, &new, false),
                17 => fix_checksum(p, 40 + 6, &old, &new, false),
                58 => fix_checksum(p, 40 + 2, &old, &new, false),
                _ => {}
            }
            true
        }
        _ => false,
    }
}

/// RFC 1624 update of the checksum at `at` for addresses `old` -> `new`.
/// `udp4`: a zero checksum means "none" (IPv4 UDP) and stays zero.
fn fix_checksum(p: &mut [u8], at: usize, old: &[u8], new: &[u8], udp4: bool) {
    let Some(field) = p.get_mut(at..at + 2) else { return };
    let check = u16::from_be_bytes([field[0], field[1]]);
    if udp4 && check == 0 {
        return;
    }
    let mut check = csum::update_bytes(check, old, new);
    if check == 0 && udp4 {
        check = 0xffff;
    }
    field.copy_from_slice(&check.to_be_bytes());
}

// ---------------------------------------------------------------------------
// The data path.

/// Counters of a [`Tunnel`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Stats {
    /// Packets read from the TUN.
    tun_reads: u64,
    /// ... of which GSO superpackets (TSO/USO).
    superpackets_in: u64,
    /// ... of which UDP (USO).
    udp_superpackets_in: u64,
    /// Packets given to the transport.
    to_transport: u64,
    /// ... of which segments cut from superpackets.
    segments: u64,
    /// The largest packet given to the transport.
    largest_to_transport: usize,
    /// Packets received from the transport.
    from_transport: u64,
    /// Packets written to the TUN.
    tun_writes: u64,
    /// ... of which GRO superpackets.
    superpackets_out: u64,
    /// ... of which UDP.
    udp_superpackets_out: u64,
    /// Reads refused by `to_meta`, packets refused by GSO, failed writes.
    errors: u64,
    /// Packets the mirror does not route.
    not_routed: u64,
}

impl Stats {
    fn line(&self) -> String {
        format!(
            "TUN reads {} ({} superpackets, {} UDP) -> {} packets to the transport ({} GSO segments) | {} \
             packets from the transport -> TUN writes {} ({} GRO superpackets, {} UDP) | errors {}, not routed {}",
            self.tun_reads,
            self.superpackets_in,
            self.udp_superpackets_in,
            self.to_transport,
            self.segments,
            self.from_transport,
            self.tun_writes,
            self.superpackets_out,
            self.udp_superpackets_out,
            self.errors,
            self.not_routed
        )
    }
}

/// The tunnel's data path: TUN <-> offloads <-> transport.
struct Tunnel<T: Transport> {
    tun: File,
    transport: T,
    segmenter: Segmenter,
    caps: TargetCaps,
    gro: Gro,
    /// The buffer TUN reads go into (moved into a `Packet` and back).
    read_buf: Vec<u8>,
    /// Where `into_buffers` returns `read_buf`.
    spare: Vec<Vec<u8>>,
    /// One segment on its way to the transport, or a superpacket to write
    /// that has too many chunks for one `writev`.
    scratch: Vec<u8>,
    /// Idle receive buffers (RX_BUF_LEN bytes each).
    rx_pool: Vec<Vec<u8>>,
    stats: Stats,
    /// The first error, reported once.
    reported: bool,
}

impl<T: Transport> Tunnel<T> {
    fn new(tun: File, transport: T) -> Tunnel<T> {
        Tunnel {
            tun,
            transport,
            segmenter: Segmenter::new(),
            // What the transport can take: IP packets of at most MTU bytes,
            // checksums complete (no offload on the far side of a VPN).
            caps: TargetCaps::new(MTU).with_medium(Medium::Ip),
            // Linux's GRO rules plus UDP segment GRO (`rx-udp-gro-forwarding`),
            // so UDP flows come back as USO superpackets too.
            gro: Gro::new(GroConfig { udp: UdpGroMode::Forward, ..GroConfig::default() }.with_medium(Medium::Ip)),
            read_buf: vec![0; READ_BUF_LEN],
            spare: Vec::with_capacity(4),
            scratch: Vec::with_capacity(READ_BUF_LEN),
            rx_pool: Vec::new(),
            stats: Stats::default(),
            reported: false,
        }
    }

    fn note_error(&mut self, what: std::fmt::Arguments<'_>) {
        self.stats.errors += 1;
        if !self.reported {
            self.reported = true;
            eprintln!("tun_vpn: {what} (further errors only counted)");
        }
    }

    /// Waits up to `timeout` for the TUN, then moves one batch each way.
    fn pump(&mut self, timeout: Duration) -> io::Result<()> {
        if sys::poll_readable(&self.tun, timeout)? {
            for _ in 0..READ_BATCH {
                match self.tun.read(&mut self.read_buf) {
                    Ok(n) => self.tun_to_transport(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        self.transport_to_tun();
        Ok(())
    }

    /// One TUN read of `n` bytes: import, GSO, send.
    fn tun_to_transport(&mut self, n: usize) {
        self.stats.tun_reads += 1;
        let meta =
            match VirtioNetHdr::parse(&self.read_buf[..n], HdrLayout::Basic, HdrByteOrder::Native).and_then(|h| {
                h.to_meta(
                    &self.read_buf[VNET_HDR_LEN..n],
                    &ImportOptions { medium: Medium::Ip, ..ImportOptions::default() },
                )
            }) {
                Ok(meta) => meta,
                Err(e) => return self.note_error(format_args!("TUN read refused: {e}")),
            };
        if meta.is_gso() {
            self.stats.superpackets_in += 1;
            self.stats.udp_superpackets_in += u64::from(meta.gso_type.contains(GsoType::UDP_L4));
        }
        // The read buffer becomes the packet (no copy; the header stays in
        // its headroom) and is taken back below.
        let Ok(mut pkt) = Packet::from_storage(std::mem::take(&mut self.read_buf), VNET_HDR_LEN, n) else {
            unreachable!("parse checked n >= VNET_HDR_LEN")
        };
        pkt.meta = meta;
        let before = self.segmenter.counters.segments_out;
        let mut sink = ToTransport { transport: &mut self.transport, scratch: &mut self.scratch, sent: 0, largest: 0 };
        let result = self.segmenter.segment(&pkt, &self.caps, &mut sink);
        self.stats.to_transport += sink.sent;
        self.stats.largest_to_transport = self.stats.largest_to_transport.max(sink.largest);
        self.stats.segments += self.segmenter.counters.segments_out - before;
        pkt.into_buffers(&mut self.spare);
        self.read_buf = self.spare.pop().unwrap_or_default();
        self.spare.clear();
        self.read_buf.resize(READ_BUF_LEN, 0);
        if let Err(e) = result {
            self.note_error(format_args!("GSO refused a packet: {e}"));
        }
    }

    /// Everything the transport has: GRO, then written to the TUN.
    fn transport_to_tun(&mut self) {
        loop {
            let mut buf = self.rx_pool.pop().unwrap_or_default();
            // Recycled buffers keep their capacity: this does not allocate.
            buf.resize(RX_BUF_LEN, 0);
            let Some(n) = self.transport.recv(&mut buf) else {
                self.rx_pool.push(buf);
                break;
            };
            self.stats.from_transport += 1;
            let Ok(pkt) = Packet::from_storage(buf, 0, n) else { unreachable!("n <= RX_BUF_LEN") };
            // The checksum state is `None`: GRO verifies each packet from the
            // wire before merging it (a bad one is delivered alone).
            self.gro.receive(pkt);
        }
        self.gro.flush();
        let Tunnel { tun, gro, scratch, rx_pool, stats, .. } = self;
        let mut failed = None;
        for pkt in gro.drain_delivered() {
            match write_superpacket(tun, &pkt, scratch) {
                Ok(()) => {
                    stats.tun_writes += 1;
                    let gso = pkt.meta.is_gso();
                    stats.superpackets_out += u64::from(gso);
                    stats.udp_superpackets_out += u64::from(gso && pkt.meta.gso_type.contains(GsoType::UDP_L4));
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
            // The aggregate's buffers (its own and every merged packet's) go
            // back to the pool.
            pkt.into_buffers(rx_pool);
        }
        rx_pool.truncate(RX_POOL_MAX);
        if let Some(e) = failed {
            self.note_error(format_args!("TUN write failed: {e}"));
        }
    }
}

impl Tunnel<Mirror> {
    fn mirror_stats(&self) -> Stats {
        Stats { not_routed: self.transport.not_routed, ..self.stats }
    }
}

/// Writes one packet (a GRO superpacket or an ordinary packet) to the TUN:
/// its virtio_net_hdr, then its chunks, in one `writev` without copying.
fn write_superpacket(tun: &mut File, pkt: &Packet, scratch: &mut Vec<u8>) -> io::Result<()> {
    let hdr = VirtioNetHdr::from_meta_as(&pkt.meta, pkt.linear(), Medium::Ip, false).map_err(io::Error::other)?;
    let mut h = [0u8; VNET_HDR_LEN];
    hdr.emit(&mut h, HdrLayout::Basic, HdrByteOrder::Native).map_err(io::Error::other)?;
    let mut parts: [&[u8]; MAX_IOV] = [&[]; MAX_IOV];
    parts[0] = &h;
    let n = match pkt.gather_chunks(&mut parts[1..]) {
        Some(n) => n + 1,
        None => {
            pkt.copy_all_to(scratch);
            parts[1] = scratch;
            2
        }
    };
    let mut iov = [IoSlice::new(&[]); MAX_IOV];
    for (v, p) in iov.iter_mut().zip(&parts[..n]) {
        *v = IoSlice::new(p);
    }
    let want: usize = parts[..n].iter().map(|p| p.len()).sum();
    // One writev is one packet for a TUN: all or nothing.
    let wrote = tun.write_vectored(&iov[..n])?;
    if wrote != want {
        return Err(io::Error::other(format!("short TUN write: {wrote} of {want} bytes")));
    }
    Ok(())
}

/// GSO output straight into the transport: each segment is written into the
/// one scratch buffer and sent from there.
struct ToTransport<'a, T: Transport> {
    transport: &'a mut T,
    scratch: &'a mut Vec<u8>,
    sent: u64,
    largest: usize,
}

impl<T: Transport> ToTransport<'_, T> {
    fn send(&mut self, len: usize) {
        self.transport.send(&self.scratch[..len]);
        self.sent += 1;
        self.largest = self.largest.max(len);
    }
}

impl<T: Transport> SegmentSink for ToTransport<'_, T> {
    fn pass_through(&mut self, packet: &Packet, _meta: &OffloadMeta) {
        // A packet that needs nothing (checksum complete, within the MTU).
        packet.copy_all_to(self.scratch);
        self.send(self.scratch.len());
    }

    fn sg_frame(&mut self, frame: &SgFrame<'_>) {
        // Not produced: the caps have no scatter-gather.
        frame.copy_to(self.scratch);
        self.send(self.scratch.len());
    }

    fn linear_buffer(&mut self, len: usize) -> &mut [u8] {
        self.scratch.clear();
        self.scratch.resize(len, 0);
        self.scratch
    }

    fn linear_frame(&mut self, len: usize, _meta: &OffloadMeta) {
        self.send(len);
    }
}

// ---------------------------------------------------------------------------
// The self-test.

mod self_test {
    use super::*;

    /// UDP: sends of this many bytes, cut by the kernel (UDP_SEGMENT) into
    /// datagrams of `UDP_SEG` bytes: 8 full and one of 600.
    const UDP_SEND: usize = 8 * UDP_SEG + 600;
    const UDP_SEG: usize = 1200;
    const UDP_ROUNDS: usize = 8;
    /// TCP: bytes echoed through the tunnel, each way.
    const TCP_BYTES: usize = 4 << 20;
    const IO_TIMEOUT: Duration = Duration::from_secs(10);

    pub(super) fn run(ifname: &str) -> ExitCode {
        let setup = match setup(ifname) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tun_vpn --self-test: cannot run: {e}");
                return ExitCode::from(2);
            }
        };
        let Setup { tun, offloads, ipv6 } = setup;
        let mut tunnel = Tunnel::new(tun, Mirror::default());

        // The kernel's traffic runs in a thread (born in the namespace); this
        // thread is the VPN.
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(traffic(ipv6));
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        let results = loop {
            if let Err(e) = tunnel.pump(Duration::from_millis(20)) {
                eprintln!("tun_vpn --self-test: TUN failed: {e}");
                return ExitCode::from(1);
            }
            match rx.try_recv() {
                Ok(results) => break results,
                Err(_) if Instant::now() < deadline => {}
                Err(_) => break vec![Err("the traffic did not finish within 90 s".to_string())],
            }
        };

        let mut ok = true;
        for r in &results {
            match r {
                Ok(line) => println!("ok    {line}"),
                Err(line) => {
                    ok = false;
                    println!("FAIL  {line}");
                }
            }
        }
        let s = tunnel.mirror_stats();
        println!("counters: {}", s.line());
        let mut check = |cond: bool, what: &str| {
            println!("{}  {what}", if cond { "ok  " } else { "FAIL" });
            ok &= cond;
        };
        if offloads & libc::TUN_F_TSO4 != 0 {
            check(s.superpackets_in > s.udp_superpackets_in, "the kernel handed over TCP superpackets (TSO)");
        } else {
            println!("note  this kernel's TUN took no TSO: TCP came as single packets");
        }
        if offloads & libc::TUN_F_USO4 != 0 {
            check(s.udp_superpackets_in > 0, "the kernel handed over UDP superpackets (USO)");
        } else {
            println!("note  this kernel's TUN took no USO: UDP came as single datagrams");
        }
        check(
            s.segments > s.superpackets_in && s.largest_to_transport <= MTU,
            &format!("GSO cut them into packets of at most {MTU} bytes (largest {})", s.largest_to_transport),
        );
        check(
            s.superpackets_out > s.udp_superpackets_out && s.udp_superpackets_out > 0,
            "GRO coalesced the returning TCP and UDP packets into superpackets the kernel accepted",
        );
        check(s.errors == 0, "no packet refused (import, GSO, TUN write)");
        if ok {
            println!("self-test passed");
            ExitCode::SUCCESS
        } else {
            println!("self-test FAILED");
            ExitCode::from(1)
        }
    }

    struct Setup {
        tun: File,
        offloads: u32,
        ipv6: bool,
    }

    /// A private namespace, lo up, the TUN with its addresses.
    fn setup(ifname: &str) -> io::Result<Setup> {
        sys::unshare_net().map_err(|e| io::Error::new(e.kind(), format!("unshare(CLONE_NEWNET): {e}")))?;
        println!("private network namespace (unshare CLONE_NEWNET; it goes away with this process)");
        sys::set_up("lo")?;
        let (tun, offloads) =
            sys::open_tun(ifname).map_err(|e| io::Error::new(e.kind(), format!("TUN {ifname}: {e}")))?;
        sys::set_mtu(ifname, MTU)?;
        sys::set_ipv4(ifname, LOCAL4, 24)?;
        sys::set_up(ifname)?;
        let ipv6 = std::path::Path::new("/proc/sys/net/ipv6").exists();
        if ipv6 {
            sys::add_ipv6(ifname, LOCAL6, 64)?;
        }
        println!(
            "{ifname}: IFF_TUN | IFF_NO_PI | IFF_VNET_HDR, TUNSETOFFLOAD {}, mtu {MTU}, {LOCAL4}/24{}",
            sys::offload_names(offloads),
            if ipv6 { format!(", {LOCAL6}/64") } else { String::new() }
        );
        println!(
            "mirror transport: to {} comes back from {} (and back); IPv6 {} <-> {}; GSO to {MTU} bytes, GRO back",
            PEERS4[0], PEERS4[1], PEERS6[0], PEERS6[1]
        );
        Ok(Setup { tun, offloads, ipv6 })
    }

    /// Kernel TCP and UDP through the tunnel, per family.
    fn traffic(ipv6: bool) -> Vec<Result<String, String>> {
        let mut out = Vec::new();
        let mut families = vec![("IPv4", IpAddr::V4(LOCAL4), IpAddr::V4(PEERS4[0]), IpAddr::V4(PEERS4[1]))];
        if ipv6 {
            families.push(("IPv6", IpAddr::V6(LOCAL6), IpAddr::V6(PEERS6[0]), IpAddr::V6(PEERS6[1])));
        }
        for (name, local, to, from) in families {
            out.push(
                tcp_echo(local, to, from).map_err(|e| format!("TCP/{name}: {e}")).map(|s| format!("TCP/{name}: {s}")),
            );
            out.push(
                udp_gso(local, to, from).map_err(|e| format!("UDP/{name}: {e}")).map(|s| format!("UDP/{name}: {s}")),
            );
        }
        out
    }

    /// A TCP connection to `to` comes in from `from`; the server echoes
    /// `TCP_BYTES` and the client checks them.
    fn tcp_echo(local: IpAddr, to: IpAddr, from: IpAddr) -> Result<String, String> {
        let listener = TcpListener::bind((local, 0)).map_err(|e| format!("listen: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let (stx, srx) = mpsc::channel();
        thread::spawn(move || {
            let r = (|| -> io::Result<(SocketAddr, usize)> {
                let (mut s, peer) = listener.accept()?;
                s.set_read_timeout(Some(IO_TIMEOUT))?;
                s.set_write_timeout(Some(IO_TIMEOUT))?;
                let mut buf = vec![0u8; 64 * 1024];
                let mut echoed = 0;
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    s.write_all(&buf[..n])?;
                    echoed += n;
                }
                Ok((peer, echoed))
            })();
            let _ = stx.send(r);
        });

        let mut c = TcpStream::connect_timeout(&SocketAddr::new(to, port), Duration::from_secs(5))
            .map_err(|e| format!("connect to {to}:{port}: {e}"))?;
        c.set_read_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
        c.set_write_timeout(Some(IO_TIMEOUT)).map_err(|e| e.to_string())?;
        let mut w = c.try_clone().map_err(|e| e.to_string())?;
        let writer = thread::spawn(move || -> io::Result<()> {
            let mut chunk = vec![0u8; 64 * 1024];
            let mut off = 0;
            while off < TCP_BYTES {
                let n = chunk.len().min(TCP_BYTES - off);
                chunk[..n].iter_mut().enumerate().for_each(|(i, b)| *b = payload_byte((off + i) as u64));
                w.write_all(&chunk[..n])?;
                off += n;
            }
            w.shutdown(std::net::Shutdown::Write)
        });
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0usize;
        loop {
            let n = c.read(&mut buf).map_err(|e| format!("read after {got} echoed bytes: {e}"))?;
            if n == 0 {
                break;
            }
            if let Some(i) = (0..n).find(|&i| buf[i] != payload_byte((got + i) as u64)) {
                return Err(format!("echoed byte {} differs", got + i));
            }
            got += n;
        }
        writer.join().map_err(|_| "writer panicked".to_string())?.map_err(|e| format!("write: {e}"))?;
        let (peer, echoed) = srx
            .recv_timeout(IO_TIMEOUT)
            .map_err(|_| "server did not finish".to_string())?
            .map_err(|e| format!("server: {e}"))?;
        if peer.ip() != from {
            return Err(format!("server saw the connection from {peer}, not from {from}"));
        }
        if got != TCP_BYTES || echoed != TCP_BYTES {
            return Err(format!("{got} bytes echoed back of {TCP_BYTES} (server echoed {echoed})"));
        }
        Ok(format!(
            "connect to {to}:{port} accepted from {peer}, {} MiB echoed back, every byte intact",
            TCP_BYTES >> 20
        ))
    }

    /// UDP_SEGMENT sends to `to` come back from `from` as the same datagrams.
    fn udp_gso(local: IpAddr, to: IpAddr, from: IpAddr) -> Result<String, String> {
        let rx = UdpSocket::bind((local, 0)).map_err(|e| format!("bind: {e}"))?;
        let port = rx.local_addr().map_err(|e| e.to_string())?.port();
        rx.set_read_timeout(Some(Duration::from_secs(3))).map_err(|e| e.to_string())?;
        let tx = UdpSocket::bind((local, 0)).map_err(|e| format!("bind: {e}"))?;
        let tx_port = tx.local_addr().map_err(|e| e.to_string())?.port();
        sys::set_udp_segment(&tx, UDP_SEG as u16).map_err(|e| format!("UDP_SEGMENT: {e}"))?;
        let byte = |round: usize, i: usize| payload_byte((round * UDP_SEND + i) as u64);
        let mut send = vec![0u8; UDP_SEND];
        for round in 0..UDP_ROUNDS {
            send.iter_mut().enumerate().for_each(|(i, b)| *b = byte(round, i));
            tx.send_to(&send, (to, port)).map_err(|e| format!("send: {e}"))?;
        }
        let per_send = UDP_SEND.div_ceil(UDP_SEG);
        let mut buf = vec![0u8; 65536];
        for round in 0..UDP_ROUNDS {
            for k in 0..per_send {
                let (n, src) = rx
                    .recv_from(&mut buf)
                    .map_err(|e| format!("datagram {} of {}: {e}", round * per_send + k, UDP_ROUNDS * per_send))?;
                let start = k * UDP_SEG;
                let want = UDP_SEG.min(UDP_SEND - start);
                if src != SocketAddr::new(from, tx_port) {
                    return Err(format!("datagram from {src}, expected {from}:{tx_port}"));
                }
                if n != want || (0..n).any(|i| buf[i] != byte(round, start + i)) {
                    return Err(format!("datagram {k} of send {round}: {n} bytes, expected {want} of the sent ones"));
                }
            }
        }
        Ok(format!(
            "{UDP_ROUNDS} sends of {UDP_SEND} bytes (UDP_SEGMENT {UDP_SEG}) to {to}:{port} came back from {from} \
             as {} datagrams, every byte intact",
            UDP_ROUNDS * per_send
        ))
    }
}

// ---------------------------------------------------------------------------
// The system calls (libc), each unsafe block with its reason.

mod sys {
    use super::*;

    /// `struct ifreq`: a name and a 24-byte union (flags, MTU, address,
    /// index), 40 bytes as the kernel's.
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: [u8; 24],
    }

    impl IfReq {
        fn new(name: &str) -> io::Result<IfReq> {
            let b = name.as_bytes();
            if b.is_empty() || b.len() >= libc::IFNAMSIZ || b.contains(&0) || b.contains(&b'/') {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {name:?}")));
            }
            let mut r = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
            r.name[..b.len()].copy_from_slice(b);
            Ok(r)
        }
    }

    fn ioctl(fd: &impl AsRawFd, request: libc::Ioctl, arg: *mut libc::c_void, what: &str) -> io::Result<()> {
        // SAFETY: every caller passes a pointer to a live, writable struct of
        // the size `request` reads and writes (`IfReq`, 40 bytes, or
        // `in6_ifreq`), borrowed for the duration of the call.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), request, arg) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
        }
        Ok(())
    }

    fn ifreq_ioctl(fd: &impl AsRawFd, request: libc::Ioctl, r: &mut IfReq, what: &str) -> io::Result<()> {
        ioctl(fd, request, (r as *mut IfReq).cast(), what)
    }

    /// Opens a TUN queue with virtio_net_hdr framing and as many offloads as
    /// the kernel accepts; returns it (nonblocking) and the accepted `TUN_F_*`.
    pub(super) fn open_tun(name: &str) -> io::Result<(File, u32)> {
        let tun = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        let mut r = IfReq::new(name)?;
        let flags = (libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR) as libc::c_short;
        r.data[..2].copy_from_slice(&flags.to_ne_bytes());
        ifreq_ioctl(&tun, libc::TUNSETIFF, &mut r, "TUNSETIFF")?;
        // USO needs CSUM and both families; TSO needs CSUM. Older kernels
        // refuse USO (before 6.2): try less.
        use libc::{TUN_F_CSUM as C, TUN_F_TSO4, TUN_F_TSO6, TUN_F_USO4, TUN_F_USO6};
        for offloads in [C | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6, C | TUN_F_TSO4 | TUN_F_TSO6, C, 0] {
            // SAFETY: TUNSETOFFLOAD takes its argument by value (an unsigned
            // long of TUN_F_* bits): no memory is passed.
            let rc = unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETOFFLOAD, libc::c_ulong::from(offloads)) };
            if rc == 0 {
                return Ok((tun, offloads));
            }
        }
        Err(io::Error::last_os_error())
    }

    pub(super) fn offload_names(f: u32) -> String {
        let names = [
            (libc::TUN_F_CSUM, "csum"),
            (libc::TUN_F_TSO4, "tso4"),
            (libc::TUN_F_TSO6, "tso6"),
            (libc::TUN_F_USO4, "uso4"),
            (libc::TUN_F_USO6, "uso6"),
        ];
        let v: Vec<_> = names.iter().filter(|(b, _)| f & b != 0).map(|(_, n)| *n).collect();
        if v.is_empty() { "none".into() } else { v.join(" ") }
    }

    /// Moves this thread (and every thread it spawns later) into a new,
    /// empty network namespace.
    pub(super) fn unshare_net() -> io::Result<()> {
        // SAFETY: unshare takes flags only and changes which namespace this
        // thread belongs to; no memory is involved. It runs before any other
        // thread exists, so every later thread starts in the new namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// A socket to address interface ioctls to.
    fn ctl_socket() -> io::Result<UdpSocket> {
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
    }

    pub(super) fn set_up(name: &str) -> io::Result<()> {
        let s = ctl_socket()?;
        let mut r = IfReq::new(name)?;
        ifreq_ioctl(&s, libc::SIOCGIFFLAGS, &mut r, "SIOCGIFFLAGS")?;
        let flags = libc::c_short::from_ne_bytes([r.data[0], r.data[1]]) | libc::IFF_UP as libc::c_short;
        r.data[..2].copy_from_slice(&flags.to_ne_bytes());
        ifreq_ioctl(&s, libc::SIOCSIFFLAGS, &mut r, "SIOCSIFFLAGS")
    }

    pub(super) fn set_mtu(name: &str, mtu: usize) -> io::Result<()> {
        let s = ctl_socket()?;
        let mut r = IfReq::new(name)?;
        r.data[..4].copy_from_slice(&(mtu as libc::c_int).to_ne_bytes());
        ifreq_ioctl(&s, libc::SIOCSIFMTU, &mut r, "SIOCSIFMTU")
    }

    /// Address and netmask (the kernel adds the prefix route).
    pub(super) fn set_ipv4(name: &str, addr: Ipv4Addr, prefix: u8) -> io::Result<()> {
        let s = ctl_socket()?;
        let sockaddr_in = |a: Ipv4Addr| {
            let mut d = [0u8; 24];
            d[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            d[4..8].copy_from_slice(&a.octets());
            d
        };
        let mut r = IfReq::new(name)?;
        r.data = sockaddr_in(addr);
        ifreq_ioctl(&s, libc::SIOCSIFADDR, &mut r, "SIOCSIFADDR")?;
        r.data = sockaddr_in(Ipv4Addr::from(u32::MAX << (32 - prefix)));
        ifreq_ioctl(&s, libc::SIOCSIFNETMASK, &mut r, "SIOCSIFNETMASK")
    }

    pub(super) fn add_ipv6(name: &str, addr: Ipv6Addr, prefix: u32) -> io::Result<()> {
        let s = ctl_socket()?;
        let mut r = IfReq::new(name)?;
        ifreq_ioctl(&s, libc::SIOCGIFINDEX, &mut r, "SIOCGIFINDEX")?;
        let index = libc::c_int::from_ne_bytes([r.data[0], r.data[1], r.data[2], r.data[3]]);
        let mut req = libc::in6_ifreq {
            ifr6_addr: libc::in6_addr { s6_addr: addr.octets() },
            ifr6_prefixlen: prefix,
            ifr6_ifindex: index,
        };
        let s6 = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0))?;
        ioctl(&s6, libc::SIOCSIFADDR, (&mut req as *mut libc::in6_ifreq).cast(), "SIOCSIFADDR (IPv6)")
    }

    /// `UDP_SEGMENT`: every send becomes one USO superpacket of datagrams
    /// of `size` payload bytes.
    pub(super) fn set_udp_segment(s: &UdpSocket, size: u16) -> io::Result<()> {
        let v = libc::c_int::from(size);
        // SAFETY: the option value points to a live c_int and its exact size is passed.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                (&v as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until `fd` is readable or `timeout` passes; false on timeout.
    pub(super) fn poll_readable(fd: &impl AsRawFd, timeout: Duration) -> io::Result<bool> {
        let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `p` is one live pollfd for the duration of the call and nfds is 1.
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        Ok(r > 0)
    }
}
