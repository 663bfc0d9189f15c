//! The Linux kernel as a GRO and GSO oracle (docs/kernel-oracle.md section 5).
//!
//! - [`GroOracle`]: a namespace with a TAP opened `IFF_TAP | IFF_NO_PI |
//!   IFF_VNET_HDR | IFF_NAPI`, `gro_flush_timeout` = 200 µs, and an AF_PACKET
//!   `PACKET_VNET_HDR` socket on it taking incoming packets. Frames written
//!   to the TAP run through `napi_gro_receive`; the socket reads back one
//!   entry per skb the stack received, in order.
//! - [`GsoOracle`]: two namespaces joined by a veth; the sending end has `tx
//!   off tso off gso off tx-udp-segmentation off`, so a superpacket sent with
//!   AF_PACKET + `PACKET_VNET_HDR` is segmented and checksummed in software;
//!   the peer's AF_PACKET socket captures the segments.
//!
//! Both also take **raw IP** packets (what a TUN with `IFF_NO_PI` carries;
//! [`GroOracleConfig::medium`] / [`GsoOracleConfig::medium`] =
//! [`Medium::Ip`]; default Ethernet):
//! - GRO: the TAP becomes a TUN `sptun0` opened `IFF_TUN | IFF_NO_PI |
//!   IFF_VNET_HDR | IFF_NAPI` (tun.c accepts `IFF_NAPI` for both kinds;
//!   only `IFF_NAPI_FRAGS` is TAP-only) with the same `gro_flush_timeout`.
//!   tun sets `skb->protocol` from the version nibble, the NAPI poll runs
//!   `napi_gro_receive`, and the AF_PACKET socket on the TUN (ARPHRD_NONE:
//!   no link header) reads each skb as a raw IP packet with its
//!   virtio_net_hdr (`csum_start` counted from the IP header). Like the
//!   TAP, the TUN gets no address and the namespace does not forward: GRO
//!   and the AF_PACKET tap come before the IP layer, which then drops the
//!   packets (no route, no ICMP since forwarding is off), exactly as it
//!   drops the TAP's frames; so no address, route or rp_filter setting is
//!   involved on either medium;
//! - GSO: one namespace with a TUN `spgsotun0` (`IFF_TUN | IFF_NO_PI |
//!   IFF_VNET_HDR`, no NAPI) whose reader accepts no offload
//!   (`TUNSETOFFLOAD 0`: no CSUM, TSO or USO feature on the device). The
//!   superpacket is sent with AF_PACKET (`SOCK_RAW`, `PACKET_VNET_HDR`) on
//!   the TUN, with `sll_protocol` IPv4 or IPv6 from the version nibble (the
//!   segmentation is looked up by `skb->protocol`); `validate_xmit_skb`
//!   segments and checksums it in software before `tun_net_xmit` queues the
//!   segments, which are read from the TUN descriptor (virtio_net_hdr + raw
//!   IP), i.e. what a TUN application gets. This path needs no veth, no
//!   routing (a superpacket written into a TUN and forwarded to a second
//!   one would have its TTL decremented) and no capture socket.
//!
//! The TUNs are [`superpacket_engine::io::tun::TunDevice`]s.
//!
//! Both are set up once (~100 ms) and reused. A scenario ends once the
//! delivered skbs account for every written frame (a GSO skb counts
//! `ceil(payload / gso_size)`), plus a 5 ms grace period for extras; while
//! frames are missing it waits until 1 s passed without a packet
//! (`grace`/`patience` in the configs). A scenario thus takes a few ms.
//! Everything is deleted on drop. Robustness:
//! - every GRO burst starts right after a timer tick (the coarse monotonic
//!   clock advancing), because GRO flushes held packets older than one jiffy
//!   at each NAPI completion (`gro_flush(.., flush_old)`) and a burst that
//!   crosses a tick is split in two. A burst whose writes crossed a tick, or
//!   where two consecutive writes spanned 3/4 of the flush timeout (the
//!   flush timer may have fired in between: preemption), is redone, up to 8
//!   times ([`OracleStats::timing_retries`]). Measured: unaligned, 1 in 200
//!   S1 runs split; aligned, 0 in 400, also with two CPU hogs on the 2
//!   vCPUs (then about 1 burst in 10 is redone);
//! - a scenario that delivered nothing is redone once
//!   ([`OracleStats::empty_retries`], with a note on stderr);
//! - IPv6 is disabled in the namespaces, so no RS/DAD/MLD frame shows up;
//!   the GSO capture also keeps only frames with the sent source MAC (raw
//!   IP: the sent source address).
//!
//! # What the kernel did (6.18.44, this machine, 2026-05)
//!
//! GRO oracle (frames built by [`superpacket::traffic::Flow`], TCP without
//! timestamps: 54-byte headers, MSS 1448, DF, full checksums; zero vnet
//! headers on write). Every merged skb came back as:
//! `flags = NEEDS_CSUM`, `csum_start` = L4 offset from the Ethernet header
//! (34 IPv4, 54 IPv6), `csum_offset` 16 (TCP) / 6 (UDP), the checksum field
//! holding the pseudo-header sum (CHECKSUM_PARTIAL), `hdr_len` = the linear
//! length = the first segment's whole frame (1502 TCPv4, 1522 TCPv6, 1442
//! UDP: a hint only), the TCP flags of the last segment, IPv4 header of the
//! first segment with the total length fixed.
//!
//! | Scenario | Delivered |
//! |---|---|
//! | S1: 20 in-order segments, PSH on the last | 1 skb, 29014 B, gso_type TCPV4 (1), gso_size 1448, tcp flags 0x18 |
//! | S2: 10 segments, PSH on #5 | 2 skbs, 5 + 5 segments (7294 B each) |
//! | S3: 2 flows interleaved, own IP ID +1 each | 2 skbs of 8 segments |
//! | S3b: 2 flows interleaved, shared IP ID counter | 16 skbs, no merging |
//! | S3c: 6 segments, fixed IP ID, DF | 1 skb |
//! | S4: 10 segments, #5 missing | 2 skbs: 4 + 5 segments |
//! | S5: 8 segments, #4 bad TCP checksum, #8 500 B | 3 skbs: **#4 first**, unchanged, flags 0; then 1-3; then 5-8 (3×1448+500) |
//! | S6: 10 segments tagged 802.1Q VID 100 | 10 skbs, no merging; tag stripped from the bytes (1502 B, ethertype 0x0800), reported by `PACKET_AUXDATA` (TCI 100, TPID 0x8100); flags 0 |
//! | TCP/IPv6, 20 segments | 1 skb, 29034 B, gso_type TCPV6 (4), gso_size 1448, csum_start 54 |
//! | dst MAC not the TAP's (no promisc) | merged the same; pkttype OtherHost |
//! | a single frame | unchanged, flags DATA_VALID (0x2), rest of the header 0 |
//! | DATA_VALID set on written frames | no change (merged as without it) |
//! | UDP/IPv4, 10 × 1400 B | 10 skbs (no UDP GRO: no UDP_GRO socket, no forwarding) |
//! | same with `rx-udp-gro-forwarding on` | 1 skb, 14042 B, gso_type UDP_L4 (5), gso_size 1400 (UDP payload), csum_start 34, csum_offset 6 |
//! | `gro_flush_timeout` 0 | no merging (10 skbs for 10 segments) |
//! | `napi_defer_hard_irqs` 2 instead of 0 | all scenarios above unchanged |
//!
//! GSO oracle (superpackets from [`superpacket::traffic::Flow::superpacket`]:
//! NEEDS_CSUM with the pseudo-header sum, gso_size set). Segments arrive
//! with a virtio_net_hdr of all zeros (flags 0: checksums complete, not
//! flagged DATA_VALID); all IP and L4 checksums verify.
//!
//! | Scenario | Delivered |
//! |---|---|
//! | TCPV4, 29014 B (20 × 1448), PSH | 20 × 1502 B; IP IDs first, first+1, ...; PSH on the last only |
//! | TCPV4, CWR\|PSH\|FIN, with or without the virtio ECN bit | CWR on the first segment only, PSH and FIN on the last only |
//! | TCPV6, 10 × 1428 + 100 | 10 × 1502 + 1 × 174 B |
//! | UDP_L4 (USO) IPv4, 20 × 1400 + 7 | 21 datagrams (20 × 1442 B + 49 B), each with its own UDP length and checksum; IP IDs incrementing |
//! | UDP_L4 IPv6, same | 21 datagrams (20 × 1462 B + 69 B) |
//! | NEEDS_CSUM, no GSO (1000 B payload) | 1 frame, checksum filled in |
//! | TCPV4 with csum_offset 6 | `sendmsg` fails with EINVAL (virtio_net_hdr_to_skb) |
//! | sender offloads left at the veth default | 1 skb of 29014 B with gso_type TCPV4, gso_size 1448, NEEDS_CSUM, hdr_len 54 |
//!
//! Raw IP (same kernel, 2026-05; `oracle::tests::*raw_ip*`,
//! `tests/gro_kernel_oracle.rs`, `tests/gso_kernel_oracle.rs`, each case
//! on both media):
//!
//! | Oracle | Delivered on the TUN |
//! |---|---|
//! | GRO, every scenario above without VLAN tag or padding (S1-S5, TCPv6, single frame, UDP with `rx-udp-gro-forwarding`, the 64 KB limit, flag/TTL/window changes, CWR, fixed ID) | the same skbs in the same order as on the TAP, each minus its 14-byte Ethernet header: S1 1 skb of 29000 B, gso_type TCPV4, gso_size 1448, NEEDS_CSUM, csum_start 20 (TCPv6: 40), csum_offset 16; `hdr_len` the linear length minus 14 (1488 TCPv4, 1508 TCPv6, 1428/1448 UDP); single frames DATA_VALID; pkttype Host |
//! | GSO, every superpacket above without VLAN tag | the veth's segments minus 14 bytes (e.g. TCPV4 20 × 1488 B), each read with an all-zero virtio_net_hdr (checksums complete) |
//! | GSO, TCPV4 with csum_offset 6 | `sendmsg` fails with EINVAL, as on the veth |
//!
//! Nothing differed between the media beyond the 14 bytes and the offsets.
//!
//! Other observations: `TUNGETFEATURES` = 0x7173; `TUNSETOFFLOAD` accepts
//! CSUM|TSO4|TSO6|TSO_ECN|USO4|USO6 and refuses unknown bits with EINVAL; a
//! TAP with TSO accepted hands a transmitted TCPv4 superpacket to its reader
//! whole (NEEDS_CSUM, gso_type 1), with offloads 0 as 1502-byte frames with
//! flags 0; a non-GSO frame received on a veth has flags 0.

use std::time::{Duration, Instant};
use superpacket::packet::virtio::{GSO_NONE, VirtioNetHdr};
pub use superpacket::wire::Medium;
use superpacket_engine::io::error::{IoError, Result};
use superpacket_engine::io::netns::NetNs;
use superpacket_engine::io::netns::VethPair;
use superpacket_engine::io::packet_socket::{PacketSocket, PacketSocketConfig, PktType, RecvInfo, VlanInfo};
use superpacket_engine::io::tap::{TapConfig, TapDevice};
use superpacket_engine::io::tun::{TunConfig, TunDevice};

#[cfg(test)]
mod tests;

/// Receive buffer: larger than any GRO aggregate (64 KiB without BIG TCP).
const RECV_BUF: usize = 256 * 1024;
/// Socket receive buffer, so that a burst of 64 KiB aggregates is not dropped.
const RCVBUF: usize = 32 * 1024 * 1024;
/// How many times a GRO burst is redone when its timing preconditions failed.
const GRO_TIMING_ATTEMPTS: u32 = 8;

/// One packet the kernel delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The virtio_net_hdr AF_PACKET reported (host order, decoded).
    pub hdr: VirtioNetHdr,
    /// The frame, as AF_PACKET shows it (a VLAN tag stripped into metadata is
    /// not in the bytes: see `vlan`).
    pub frame: Vec<u8>,
    /// Packet type (`Host` when the destination MAC is the device's).
    pub pkttype: PktType,
    /// The VLAN tag the kernel moved into skb metadata, if any.
    pub vlan: Option<VlanInfo>,
}

/// Statistics of an oracle's runs, to spot environmental noise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OracleStats {
    /// Scenarios run.
    pub runs: u64,
    /// Scenarios redone because the kernel delivered nothing.
    pub empty_retries: u64,
    /// GRO bursts redone because a write was late (crossed a jiffy or a flush timeout).
    pub timing_retries: u64,
    /// Captured packets ignored as unrelated (another source MAC).
    pub strays: u64,
}

/// Settings of a [`GroOracle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroOracleConfig {
    /// The TAP's MAC. Default `02:5e:00:00:00:02`, the destination MAC of
    /// [`superpacket::traffic::FlowSpec::new`], so frames arrive as `PACKET_HOST`.
    pub mac: [u8; 6],
    /// `/sys/class/net/TAP/gro_flush_timeout` in ns (default 200000). Must
    /// be non-zero for any merging (docs/kernel-oracle.md section 5).
    pub gro_flush_timeout_ns: u64,
    /// `/sys/class/net/TAP/napi_defer_hard_irqs` (default 0; TAP has no
    /// interrupts, and the value did not change any result here).
    pub napi_defer_hard_irqs: u32,
    /// Use `IFF_NAPI_FRAGS` as well (no merging at all: a diagnostic mode).
    pub napi_frags: bool,
    /// Once the delivered skbs account for every written frame, wait this
    /// long for anything else (default 5 ms).
    pub grace: Duration,
    /// While frames are unaccounted for, wait until no packet arrived for
    /// this long before giving up (default 1 s).
    pub patience: Duration,
    /// Start every burst right after a jiffy tick and redo a burst whose
    /// writes were not all within one jiffy and one flush timeout (default
    /// true). GRO flushes held packets older than a jiffy at every NAPI
    /// completion, so a burst crossing a tick boundary is split.
    pub align_to_tick: bool,
    /// The TAP's MTU (default: unchanged, 1500).
    pub mtu: Option<u32>,
    /// Put the TAP in promiscuous mode (default false: not needed, GRO and
    /// AF_PACKET see frames for other MACs as `OtherHost`).
    pub promisc: bool,
    /// `ethtool -K TAP rx-udp-gro-forwarding on` (default false). Kernel UDP
    /// GRO only merges for a local `UDP_GRO` socket or with this feature
    /// (offload-rules 2.2); without it UDP datagrams come back one by one.
    pub udp_gro_forwarding: bool,
    /// Further `ethtool -K` settings for the TAP (e.g. `("rx-gro-list", "on")`).
    pub tap_features: Vec<(String, String)>,
    /// What is written and read back: Ethernet frames through a TAP (default)
    /// or raw IP packets through an `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR |
    /// IFF_NAPI` device (`mac` and `promisc` then do not apply; the other
    /// settings are made on the TUN). See the module documentation.
    pub medium: Medium,
}

impl Default for GroOracleConfig {
    fn default() -> Self {
        GroOracleConfig {
            mac: [0x02, 0x5e, 0, 0, 0, 2],
            gro_flush_timeout_ns: 200_000,
            napi_defer_hard_irqs: 0,
            napi_frags: false,
            grace: Duration::from_millis(5),
            patience: Duration::from_secs(1),
            align_to_tick: true,
            mtu: None,
            promisc: false,
            udp_gro_forwarding: false,
            tap_features: Vec::new(),
            medium: Medium::Ethernet,
        }
    }
}

/// Kernel GRO as an oracle: frames written to an `IFF_NAPI` TAP go through
/// `napi_gro_receive`; an AF_PACKET socket on the TAP reads back what the
/// stack received (one entry per skb, GRO aggregates whole).
#[derive(Debug)]
pub struct GroOracle {
    // Field order is drop order: descriptors first, the namespace last.
    sock: PacketSocket,
    dev: Device,
    ns: NetNs,
    cfg: GroOracleConfig,
    buf: Vec<u8>,
    stats: OracleStats,
}

impl GroOracle {
    /// An oracle with [`GroOracleConfig::default`].
    ///
    /// # Errors
    /// Namespace, TAP or socket setup failing (e.g. without root).
    pub fn new() -> Result<GroOracle> {
        GroOracle::with_config(GroOracleConfig::default())
    }

    /// An oracle with the given settings: a fresh namespace (IPv6 disabled, so
    /// nothing but the injected frames shows up), a TAP `sptap0` opened with
    /// `IFF_TAP|IFF_NO_PI|IFF_VNET_HDR|IFF_NAPI`, MAC set (for
    /// [`Medium::Ip`]: a TUN `sptun0` opened with
    /// `IFF_TUN|IFF_NO_PI|IFF_VNET_HDR|IFF_NAPI`), link up,
    /// `gro_flush_timeout` and `napi_defer_hard_irqs` written, and an
    /// AF_PACKET socket on it receiving incoming packets. No address, route
    /// or forwarding in either case: the stack drops the packets after the
    /// capture point (see the module documentation).
    ///
    /// # Errors
    /// Any setup step failing.
    pub fn with_config(cfg: GroOracleConfig) -> Result<GroOracle> {
        let ns = NetNs::create("spgro")?;
        ns.disable_ipv6()?;
        let dev = match cfg.medium {
            Medium::Ethernet => {
                let tap_cfg = TapConfig {
                    napi: true,
                    napi_frags: cfg.napi_frags,
                    nonblocking: true,
                    ..TapConfig::named("sptap0")
                };
                let tap = TapDevice::open_in(&ns, &tap_cfg)?;
                ns.set_mac(tap.name(), cfg.mac)?;
                if cfg.promisc {
                    ns.set_promisc(tap.name(), true)?;
                }
                Device::Tap(tap)
            }
            Medium::Ip => {
                let tun_cfg = TunConfig {
                    napi: true,
                    napi_frags: cfg.napi_frags,
                    nonblocking: true,
                    ..TunConfig::named("sptun0")
                };
                Device::Tun(TunDevice::open_in(&ns, &tun_cfg)?)
            }
        };
        let name = dev.name().to_string();
        if let Some(mtu) = cfg.mtu {
            ns.set_mtu(&name, mtu)?;
        }
        if cfg.udp_gro_forwarding {
            ns.set_offloads(&name, &[("rx-udp-gro-forwarding", "on")])?;
        }
        for (feature, value) in &cfg.tap_features {
            ns.set_offloads(&name, &[(feature, value)])?;
        }
        ns.write_sysfs(&name, "gro_flush_timeout", &cfg.gro_flush_timeout_ns.to_string())?;
        ns.write_sysfs(&name, "napi_defer_hard_irqs", &cfg.napi_defer_hard_irqs.to_string())?;
        ns.link_up(&name)?;
        let sock_cfg = PacketSocketConfig {
            incoming_only: true,
            auxdata: true,
            rcvbuf: Some(RCVBUF),
            ..PacketSocketConfig::default()
        };
        let sock = PacketSocket::open_in(&ns, &name, &sock_cfg)?;
        Ok(GroOracle { sock, dev, ns, cfg, buf: vec![0; RECV_BUF], stats: OracleStats::default() })
    }

    /// What this oracle takes and returns: Ethernet frames or raw IP packets.
    pub fn medium(&self) -> Medium {
        self.cfg.medium
    }

    /// The TAP's MAC (use it as the frames' destination MAC).
    pub fn mac(&self) -> [u8; 6] {
        self.cfg.mac
    }

    /// The namespace holding the TAP.
    pub fn netns(&self) -> &NetNs {
        &self.ns
    }

    /// The TAP device name (inside [`GroOracle::netns`]); the TUN's for
    /// [`Medium::Ip`].
    pub fn tap_name(&self) -> &str {
        self.dev.name()
    }

    /// Counters of retries and ignored packets.
    pub fn stats(&self) -> OracleStats {
        self.stats
    }

    /// Writes `frames` (each with an all-zero virtio_net_hdr) and returns
    /// what the kernel delivered after GRO, in delivery order.
    ///
    /// # Errors
    /// A write refused by the kernel, or socket errors.
    pub fn run<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> Result<Vec<(VirtioNetHdr, Vec<u8>)>> {
        let zero = VirtioNetHdr::default();
        let items: Vec<(VirtioNetHdr, &[u8])> = frames.iter().map(|f| (zero, f.as_ref())).collect();
        Ok(self.run_inner(&items)?.into_iter().map(|d| (d.hdr, d.frame)).collect())
    }

    /// As [`GroOracle::run`], each frame written with its own header.
    ///
    /// # Errors
    /// As [`GroOracle::run`].
    pub fn run_with_headers<F: AsRef<[u8]>>(
        &mut self,
        packets: &[(VirtioNetHdr, F)],
    ) -> Result<Vec<(VirtioNetHdr, Vec<u8>)>> {
        Ok(self.run_detailed(packets)?.into_iter().map(|d| (d.hdr, d.frame)).collect())
    }

    /// As [`GroOracle::run_with_headers`], with the packet type and stripped
    /// VLAN tag of every delivered skb.
    ///
    /// # Errors
    /// As [`GroOracle::run`].
    pub fn run_detailed<F: AsRef<[u8]>>(&mut self, packets: &[(VirtioNetHdr, F)]) -> Result<Vec<Delivered>> {
        let items: Vec<(VirtioNetHdr, &[u8])> = packets.iter().map(|(h, f)| (*h, f.as_ref())).collect();
        self.run_inner(&items)
    }

    fn run_inner(&mut self, items: &[(VirtioNetHdr, &[u8])]) -> Result<Vec<Delivered>> {
        self.stats.runs += 1;
        let mut empty_retry_done = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.sock.drain()?;
            self.drain_tap();
            let timing_ok = self.burst(items)?;
            let wait = Wait {
                expected: items.len(),
                grace: self.cfg.grace,
                patience: self.cfg.patience,
                medium: self.cfg.medium,
            };
            let delivered = collect(&mut self.sock, &mut self.buf, wait, None, &mut self.stats)?;
            if !timing_ok && attempt < GRO_TIMING_ATTEMPTS {
                self.stats.timing_retries += 1;
                continue;
            }
            if delivered.is_empty() && !items.is_empty() && !empty_retry_done {
                eprintln!(
                    "superpacket GroOracle: the kernel delivered nothing for {} frames; retrying once",
                    items.len()
                );
                self.stats.empty_retries += 1;
                empty_retry_done = true;
                continue;
            }
            return Ok(delivered);
        }
    }

    /// Writes the burst; returns whether its timing preconditions held (all
    /// writes within one jiffy and no gap reaching the flush timeout).
    fn burst(&mut self, items: &[(VirtioNetHdr, &[u8])]) -> Result<bool> {
        let start_tick = if self.cfg.align_to_tick { wait_for_tick() } else { coarse_now() };
        let max_gap = Duration::from_nanos(self.cfg.gro_flush_timeout_ns.max(1)) * 3 / 4;
        let mut ok = true;
        let mut prev_start: Option<Instant> = None;
        for (i, (hdr, frame)) in items.iter().enumerate() {
            let start = Instant::now();
            self.dev.write_packet(hdr, frame).map_err(|e| IoError::Oracle(format!("writing frame {i}: {e}")))?;
            // The flush timer was armed somewhere inside the previous write and this write's NAPI
            // poll ran somewhere inside this one: bound the gap from the previous write's start.
            if let Some(prev) = prev_start
                && Instant::now() - prev >= max_gap
            {
                ok = false;
            }
            prev_start = Some(start);
        }
        if coarse_now() != start_tick {
            ok = false;
        }
        Ok(ok || !self.cfg.align_to_tick)
    }

    /// Discards whatever the kernel transmitted on the TAP (nothing is
    /// expected: no addresses, IPv6 off).
    fn drain_tap(&mut self) {
        self.dev.drain(&mut self.buf);
    }
}

/// The device a [`GroOracle`] writes into.
#[derive(Debug)]
enum Device {
    Tap(TapDevice),
    Tun(TunDevice),
}

impl Device {
    fn name(&self) -> &str {
        match self {
            Device::Tap(t) => t.name(),
            Device::Tun(t) => t.name(),
        }
    }

    fn write_packet(&mut self, hdr: &VirtioNetHdr, packet: &[u8]) -> Result<usize> {
        match self {
            Device::Tap(t) => t.write_packet(hdr, packet),
            Device::Tun(t) => t.write_packet(hdr, packet),
        }
    }

    /// Reads and discards everything queued for the reader.
    fn drain(&mut self, buf: &mut [u8]) {
        match self {
            Device::Tap(t) => while t.read_packet(buf).is_ok() {},
            Device::Tun(t) => while t.read_packet(buf).is_ok() {},
        }
    }
}

/// Settings of a [`GsoOracle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GsoOracleConfig {
    /// `ethtool -K` settings of the sending veth end (default `tx off tso off
    /// gso off`, plus `tx-udp-segmentation off`, so the kernel segments and
    /// checksums in software).
    pub sender_offloads: Vec<(String, String)>,
    /// MAC of the sending end (default `02:5e:00:00:00:01`).
    pub sender_mac: [u8; 6],
    /// MAC of the receiving end (default `02:5e:00:00:00:02`, the
    /// destination of [`superpacket::traffic::FlowSpec::new`]).
    pub receiver_mac: [u8; 6],
    /// MTU of both ends (default: unchanged, 1500).
    pub mtu: Option<u32>,
    /// Once the expected segments arrived, wait this long for anything else
    /// (default 5 ms).
    pub grace: Duration,
    /// While segments are missing, wait until no packet arrived for this
    /// long before giving up (default 1 s).
    pub patience: Duration,
    /// Ethernet frames over the veth (default) or raw IP packets: then the
    /// superpacket is sent with AF_PACKET on a TUN `spgsotun0` whose reader
    /// accepts no offload (`TUNSETOFFLOAD 0`), and the segments are read
    /// from the TUN descriptor. `sender_offloads` and the MACs do not apply.
    pub medium: Medium,
}

impl Default for GsoOracleConfig {
    fn default() -> Self {
        GsoOracleConfig {
            sender_offloads: [("tx", "off"), ("tso", "off"), ("gso", "off"), ("tx-udp-segmentation", "off")]
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            sender_mac: [0x02, 0x5e, 0, 0, 0, 1],
            receiver_mac: [0x02, 0x5e, 0, 0, 0, 2],
            mtu: None,
            grace: Duration::from_millis(5),
            patience: Duration::from_secs(1),
            medium: Medium::Ethernet,
        }
    }
}

/// Kernel software GSO as an oracle: a superpacket sent through AF_PACKET
/// (`PACKET_VNET_HDR`) on a veth end without offloads is segmented and
/// checksummed by the kernel; the peer end's AF_PACKET socket captures the
/// segments.
#[derive(Debug)]
pub struct GsoOracle {
    // Field order is drop order: sockets and descriptors, veth, then the namespaces.
    tx: PacketSocket,
    rx: Capture,
    veth: Option<VethPair>,
    ns_tx: NetNs,
    ns_rx: Option<NetNs>,
    cfg: GsoOracleConfig,
    buf: Vec<u8>,
    stats: OracleStats,
}

impl GsoOracle {
    /// An oracle with [`GsoOracleConfig::default`].
    ///
    /// # Errors
    /// Setup failing (e.g. without root, or without `ethtool`).
    pub fn new() -> Result<GsoOracle> {
        GsoOracle::with_config(GsoOracleConfig::default())
    }

    /// An oracle with the given settings: two namespaces (IPv6 disabled),
    /// a veth `spgso0` (sender) / `spgso1` (receiver), the sender's offloads
    /// switched per config, both ends up, and the two AF_PACKET sockets.
    /// For [`Medium::Ip`]: one namespace (IPv6 disabled) with a TUN
    /// `spgsotun0` (`IFF_TUN|IFF_NO_PI|IFF_VNET_HDR`, `TUNSETOFFLOAD 0`, no
    /// address), up, and an AF_PACKET socket on it to send with.
    ///
    /// # Errors
    /// Any setup step failing.
    pub fn with_config(cfg: GsoOracleConfig) -> Result<GsoOracle> {
        if cfg.medium == Medium::Ip {
            return GsoOracle::with_tun(cfg);
        }
        let ns_tx = NetNs::create("spgso")?;
        let ns_rx = NetNs::create("spgso")?;
        ns_tx.disable_ipv6()?;
        ns_rx.disable_ipv6()?;
        let veth = VethPair::create(&ns_tx, "spgso0", &ns_rx, "spgso1")?;
        ns_tx.set_mac("spgso0", cfg.sender_mac)?;
        ns_rx.set_mac("spgso1", cfg.receiver_mac)?;
        if let Some(mtu) = cfg.mtu {
            ns_tx.set_mtu("spgso0", mtu)?;
            ns_rx.set_mtu("spgso1", mtu)?;
        }
        for (feature, value) in &cfg.sender_offloads {
            ns_tx.set_offloads("spgso0", &[(feature, value)])?;
        }
        ns_tx.link_up("spgso0")?;
        ns_rx.link_up("spgso1")?;
        let tx_cfg = PacketSocketConfig { incoming_only: true, auxdata: false, ..PacketSocketConfig::default() };
        let tx = PacketSocket::open_in(&ns_tx, "spgso0", &tx_cfg)?;
        let rx_cfg = PacketSocketConfig {
            incoming_only: true,
            auxdata: true,
            rcvbuf: Some(RCVBUF),
            ..PacketSocketConfig::default()
        };
        let rx = PacketSocket::open_in(&ns_rx, "spgso1", &rx_cfg)?;
        Ok(GsoOracle {
            tx,
            rx: Capture::Socket(Box::new(rx)),
            veth: Some(veth),
            ns_tx,
            ns_rx: Some(ns_rx),
            cfg,
            buf: vec![0; RECV_BUF],
            stats: OracleStats::default(),
        })
    }

    fn with_tun(cfg: GsoOracleConfig) -> Result<GsoOracle> {
        let ns = NetNs::create("spgso")?;
        ns.disable_ipv6()?;
        let tun = TunDevice::open_in(&ns, &TunConfig { nonblocking: true, ..TunConfig::named("spgsotun0") })?;
        tun.set_offload(0)?;
        if let Some(mtu) = cfg.mtu {
            ns.set_mtu(tun.name(), mtu)?;
        }
        ns.link_up(tun.name())?;
        let tx_cfg = PacketSocketConfig { incoming_only: true, auxdata: false, ..PacketSocketConfig::default() };
        let tx = PacketSocket::open_in(&ns, tun.name(), &tx_cfg)?;
        Ok(GsoOracle {
            tx,
            rx: Capture::Tun(tun),
            veth: None,
            ns_tx: ns,
            ns_rx: None,
            cfg,
            buf: vec![0; RECV_BUF],
            stats: OracleStats::default(),
        })
    }

    /// What this oracle takes and returns: Ethernet frames or raw IP packets.
    pub fn medium(&self) -> Medium {
        self.cfg.medium
    }

    /// The sender's namespace and device (the TUN for [`Medium::Ip`]).
    pub fn sender(&self) -> (&NetNs, &str) {
        match &self.veth {
            Some(veth) => (&self.ns_tx, veth.name_a()),
            None => (&self.ns_tx, self.tx.ifname()),
        }
    }

    /// The receiver's namespace and device (the TUN for [`Medium::Ip`]: the
    /// segments are read from its descriptor).
    pub fn receiver(&self) -> (&NetNs, &str) {
        match (&self.veth, &self.ns_rx) {
            (Some(veth), Some(ns)) => (ns, veth.name_b()),
            _ => (&self.ns_tx, self.tx.ifname()),
        }
    }

    /// Counters of retries and ignored packets.
    pub fn stats(&self) -> OracleStats {
        self.stats
    }

    /// Sends `frame` with `hdr` (e.g. gso_type TCPV4, gso_size, NEEDS_CSUM
    /// with the pseudo-header sum in the checksum field) and returns the
    /// frames that arrived at the peer, in order. For [`Medium::Ip`],
    /// `frame` is a raw IP packet (offsets in `hdr` count from its first
    /// byte) and so are the segments.
    ///
    /// # Errors
    /// The kernel refusing the send (`EINVAL` for a bad header), socket errors.
    pub fn segment(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<Vec<Vec<u8>>> {
        Ok(self.segment_detailed(hdr, frame)?.into_iter().map(|d| d.frame).collect())
    }

    /// As [`GsoOracle::segment`], with each segment's virtio_net_hdr, packet
    /// type and VLAN metadata. (Raw IP: the header is the one the TUN read
    /// returned; `pkttype` is [`PktType::Outgoing`], the kernel transmitted
    /// the segments on the TUN; `vlan` is `None`.)
    ///
    /// # Errors
    /// As [`GsoOracle::segment`].
    pub fn segment_detailed(&mut self, hdr: &VirtioNetHdr, frame: &[u8]) -> Result<Vec<Delivered>> {
        self.stats.runs += 1;
        let medium = self.cfg.medium;
        let filter = source_filter(medium, frame);
        let protocol = match medium {
            Medium::Ethernet => None,
            // skb->protocol must name the IP version: the segmentation is looked up by it.
            Medium::Ip => Some(Medium::ip_ethertype(frame).map_err(|e| IoError::Oracle(format!("{e}")))?.0),
        };
        let mut retried = false;
        loop {
            self.rx.drain(&mut self.buf)?;
            self.tx.drain()?;
            let sent = match protocol {
                None => self.tx.send(hdr, &[frame]),
                Some(p) => self.tx.send_as(hdr, &[frame], p),
            };
            sent.map_err(|e| IoError::Oracle(format!("sending the superpacket: {e}")))?;
            let wait = Wait {
                expected: skb_segments(hdr, frame, medium),
                grace: self.cfg.grace,
                patience: self.cfg.patience,
                medium,
            };
            let delivered = collect(&mut self.rx, &mut self.buf, wait, filter.as_ref(), &mut self.stats)?;
            if delivered.is_empty() && !retried {
                eprintln!("superpacket GsoOracle: nothing arrived for a {}-byte frame; retrying once", frame.len());
                self.stats.empty_retries += 1;
                retried = true;
                continue;
            }
            return Ok(delivered);
        }
    }
}

/// Where a [`GsoOracle`] captures the segments: the veth peer's AF_PACKET
/// socket, or the TUN's descriptor.
#[derive(Debug)]
enum Capture {
    Socket(Box<PacketSocket>),
    Tun(TunDevice),
}

impl Capture {
    fn drain(&mut self, buf: &mut [u8]) -> Result<()> {
        match self {
            Capture::Socket(s) => s.drain().map(|_| ()),
            Capture::Tun(t) => {
                while tun_read(t, buf)?.is_some() {}
                Ok(())
            }
        }
    }
}

/// A packet source for [`collect`].
trait Source {
    fn poll_readable(&self, timeout: Duration) -> Result<bool>;
    /// The next queued packet (its bytes at the start of `buf`), if any.
    fn try_next(&mut self, buf: &mut [u8]) -> Result<Option<RecvInfo>>;
}

impl Source for PacketSocket {
    fn poll_readable(&self, timeout: Duration) -> Result<bool> {
        PacketSocket::poll_readable(self, timeout)
    }

    fn try_next(&mut self, buf: &mut [u8]) -> Result<Option<RecvInfo>> {
        self.try_recv_info(buf)
    }
}

impl Source for Capture {
    fn poll_readable(&self, timeout: Duration) -> Result<bool> {
        match self {
            Capture::Socket(s) => s.poll_readable(timeout),
            Capture::Tun(t) => t.poll_readable(timeout),
        }
    }

    fn try_next(&mut self, buf: &mut [u8]) -> Result<Option<RecvInfo>> {
        match self {
            Capture::Socket(s) => s.try_next(buf),
            Capture::Tun(t) => {
                Ok(tun_read(t, buf)?.map(|(hdr, len)| RecvInfo { hdr, len, pkttype: PktType::Outgoing, vlan: None }))
            }
        }
    }
}

/// One packet from a nonblocking TUN; `None` when nothing is queued.
fn tun_read(tun: &mut TunDevice, buf: &mut [u8]) -> Result<Option<(VirtioNetHdr, usize)>> {
    match tun.read_packet(buf) {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.is_would_block() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Bytes every captured packet of a flow shares with the sent one: the
/// source MAC of an Ethernet frame, the source address of a raw IP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SourceFilter {
    at: usize,
    bytes: Vec<u8>,
}

impl SourceFilter {
    fn matches(&self, frame: &[u8]) -> bool {
        frame.get(self.at..self.at + self.bytes.len()) == Some(&self.bytes[..])
    }
}

fn source_filter(medium: Medium, frame: &[u8]) -> Option<SourceFilter> {
    let range = match (medium, frame.first().map(|b| b >> 4)) {
        (Medium::Ethernet, _) => 6..12,
        (Medium::Ip, Some(4)) => 12..16,
        (Medium::Ip, Some(6)) => 8..24,
        (Medium::Ip, _) => return None,
    };
    Some(SourceFilter { at: range.start, bytes: frame.get(range)?.to_vec() })
}

/// How long [`collect`] waits.
#[derive(Debug, Clone, Copy)]
struct Wait {
    /// Wire segments expected in total.
    expected: usize,
    /// Extra wait once they are all there.
    grace: Duration,
    /// Quiet period that ends the wait while some are missing.
    patience: Duration,
    /// How the packets start (to find their payload).
    medium: Medium,
}

/// How many wire segments a delivered skb stands for: `ceil(payload /
/// gso_size)` for a GSO skb, else 1.
fn skb_segments(hdr: &VirtioNetHdr, frame: &[u8], medium: Medium) -> usize {
    if hdr.gso_type == GSO_NONE || hdr.gso_size == 0 {
        return 1;
    }
    match medium.parse(frame) {
        Ok(h) => h.payload_len.div_ceil(hdr.gso_size as usize).max(1),
        Err(_) => 1,
    }
}

/// Receives until the delivered skbs account for `wait.expected` segments
/// and then `wait.grace` passed quietly, or, while some are missing, until
/// nothing arrived for `wait.patience`. Keeps only packets that match
/// `filter` when given.
fn collect<S: Source>(
    src: &mut S,
    buf: &mut [u8],
    wait: Wait,
    filter: Option<&SourceFilter>,
    stats: &mut OracleStats,
) -> Result<Vec<Delivered>> {
    let mut out = Vec::new();
    let mut segments = 0;
    loop {
        let timeout = if segments >= wait.expected { wait.grace } else { wait.patience };
        if !src.poll_readable(timeout)? {
            return Ok(out);
        }
        while let Some(RecvInfo { hdr, len, pkttype, vlan }) = src.try_next(buf)? {
            let frame = &buf[..len];
            if filter.is_some_and(|f| !f.matches(frame)) {
                stats.strays += 1;
                continue;
            }
            segments += skb_segments(&hdr, frame, wait.medium);
            out.push(Delivered { hdr, frame: frame.to_vec(), pkttype, vlan });
        }
    }
}

/// `CLOCK_MONOTONIC_COARSE`: advances once per timer tick (jiffy).
fn coarse_now() -> (libc::time_t, libc::c_long) {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec, ts.tv_nsec)
}

/// Spins until the coarse clock ticks (at most 20 ms), so that a burst
/// starts at the beginning of a jiffy. Returns the new tick.
fn wait_for_tick() -> (libc::time_t, libc::c_long) {
    let start = coarse_now();
    let deadline = Instant::now() + Duration::from_millis(20);
    loop {
        let now = coarse_now();
        if now != start || Instant::now() > deadline {
            return now;
        }
        std::hint::spin_loop();
    }
}
