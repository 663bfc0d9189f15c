//! The kernel traffic of `bench live-peers` and what one workload measures:
//! the project's own generator ([`superpacket_lab::streams`]: every byte
//! checked at the receiver), the sender's TCP retransmits, the datapath's
//! CPU time and the whole machine's busy CPU time (`/proc/stat`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use superpacket_lab::peers_lab::PeersLab;
use superpacket_lab::streams::{self, Limit, TcpConfig, TcpTransfer, UdpConfig};

/// First TCP port (stream `i` uses `TCP_PORT + i`).
const TCP_PORT: u16 = 5301;
/// The UDP port.
const UDP_PORT: u16 = 5401;
/// TCP write size of the MTU workload: one MSS of a 1500-byte MTU with timestamps.
pub const MTU_WRITE: usize = 1448;
/// TCP write size of the 64 KB workloads.
pub const LARGE_WRITE: usize = 64 * 1024;
/// UDP segment size (`UDP_SEGMENT` gso_size; fits a 1500-byte MTU).
pub const UDP_SEGMENT_SIZE: u16 = 1400;
/// Segments per UDP send of the 64 KB workload (46 x 1400 = 64400 bytes).
pub const UDP_SEGMENTS: u16 = 46;
/// Parallel streams of the multi-stream TCP workload.
pub const STREAMS: u16 = 4;
/// Longest a TCP stream may make no progress before its transfer fails.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// One workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// One TCP stream, 64 KB writes.
    Tcp1,
    /// Four TCP streams, 64 KB writes.
    Tcp4,
    /// One TCP stream, MTU-sized (1448-byte) writes.
    TcpMtu,
    /// UDP, 64 KB sends with `UDP_SEGMENT` (46 x 1400), `UDP_GRO` at the receiver.
    UdpGso,
    /// UDP, one 1400-byte datagram per send, `UDP_GRO` at the receiver.
    UdpMtu,
}

impl Workload {
    /// Every workload, in measuring order.
    pub const ALL: [Workload; 5] =
        [Workload::Tcp1, Workload::Tcp4, Workload::TcpMtu, Workload::UdpGso, Workload::UdpMtu];

    /// Prefix of its figures' names.
    pub fn key(self) -> &'static str {
        match self {
            Workload::Tcp1 => "tcp1",
            Workload::Tcp4 => "tcp4",
            Workload::TcpMtu => "tcp1_mtu",
            Workload::UdpGso => "udp_gso",
            Workload::UdpMtu => "udp_mtu",
        }
    }

    /// For tables and progress.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Tcp1 => "TCP, 1 stream, 64 KB writes",
            Workload::Tcp4 => "TCP, 4 streams, 64 KB writes",
            Workload::TcpMtu => "TCP, 1 stream, 1448-byte writes",
            Workload::UdpGso => "UDP_SEGMENT 46 x 1400 B / UDP_GRO",
            Workload::UdpMtu => "UDP, 1400-byte datagrams / UDP_GRO",
        }
    }

    /// TCP (retransmits reported) or UDP (loss reported).
    pub fn is_tcp(self) -> bool {
        matches!(self, Workload::Tcp1 | Workload::Tcp4 | Workload::TcpMtu)
    }
}

/// What one workload through one datapath measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Receiver goodput, Gbit/s (TCP: sum over the streams).
    pub gbps: f64,
    /// Payload bytes the receiver got intact.
    pub bytes: u64,
    /// Length of the transfer, seconds (the longest stream's).
    pub secs: f64,
    /// TCP segments the sender retransmitted (0 for UDP).
    pub retransmits: u64,
    /// UDP segments sent that never arrived (0 for TCP).
    pub lost: u64,
    /// UDP segments sent.
    pub sent_segments: u64,
    /// CPU seconds of the datapath's process or engine (`None`: the kernel's own).
    pub datapath_cpu_s: Option<f64>,
    /// Busy CPU seconds of the whole machine (every CPU, `/proc/stat`).
    pub machine_cpu_s: f64,
    /// Packets the kernel dropped at the datapath's own receive rings
    /// (superpacket's AF_PACKET ports; `None`: the datapath has none we read).
    pub ring_drops: Option<u64>,
    /// UDP datagrams the receiver's namespace dropped with a full socket
    /// buffer (`RcvbufErrors`; 0 for TCP).
    pub rcvbuf_drops: u64,
    /// Every byte arrived as sent (TCP), no corrupt segment and some arrived (UDP).
    pub intact: bool,
}

impl Sample {
    /// CPU seconds per GB (10^9 bytes) of `cpu_s`.
    pub fn per_gb(&self, cpu_s: f64) -> f64 {
        cpu_s / (self.bytes as f64 / 1e9)
    }
}

/// Busy CPU seconds of the whole machine so far: every CPU's time not
/// idle and not waiting for I/O (the `cpu` line of `/proc/stat`).
///
/// # Errors
/// `/proc/stat` unreadable or without a `cpu` line.
pub fn machine_busy_seconds() -> Result<f64, String> {
    let text = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    let ticks = busy_ticks(&text).ok_or("/proc/stat: no cpu line")?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Ok(ticks as f64 / if hz > 0 { hz as f64 } else { 100.0 })
}

/// Busy clock ticks of the `cpu` line: user + nice + system + irq +
/// softirq + steal (idle and iowait left out; guest time is already in user).
pub fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    (v.len() >= 4).then(|| at(0) + at(1) + at(2) + at(5) + at(6) + at(7))
}

/// The datapath's own counters, read before and after a transfer.
pub struct DatapathCounters<'a> {
    /// Its CPU clock, seconds (`None`: the kernel's, not separable).
    pub cpu_seconds: &'a dyn Fn() -> Option<Result<f64, String>>,
    /// Packets the kernel dropped at its receive rings ([`Sample::ring_drops`]).
    pub ring_drops: &'a dyn Fn() -> Option<u64>,
}

/// Runs `workload` for `seconds` from the lab's sender to its receiver,
/// reading `datapath`'s counters around it.
///
/// # Errors
/// A transfer failing (a datapath that does not forward times out), or a
/// counter unreadable.
pub fn measure(
    lab: &PeersLab,
    workload: Workload,
    seconds: f64,
    datapath: &DatapathCounters<'_>,
) -> Result<Sample, String> {
    let limit = Limit::Duration(Duration::from_secs_f64(seconds));
    let to = IpAddr::V4(lab.addressing.receiver());
    let retrans0 = lab.sender_retransmits().map_err(|e| e.to_string())?;
    let rcvbuf0 = lab.receiver_rcvbuf_errors().map_err(|e| e.to_string())?;
    let ring0 = (datapath.ring_drops)();
    let cpu0 = (datapath.cpu_seconds)().transpose()?;
    let machine0 = machine_busy_seconds()?;
    let mut s = match workload {
        Workload::Tcp1 | Workload::Tcp4 | Workload::TcpMtu => {
            let write_size = if workload == Workload::TcpMtu { MTU_WRITE } else { LARGE_WRITE };
            // 10 s without progress before a stream counts as failed: a
            // datapath that drops much (OVS retransmits tens of thousands of
            // segments per second here) can back TCP off for seconds, and
            // that stall belongs in its Gbit/s, not in a failure.
            let cfg = TcpConfig { limit, write_size, idle_timeout: TCP_IDLE_TIMEOUT, ..TcpConfig::default() };
            let n = if workload == Workload::Tcp4 { STREAMS } else { 1 };
            tcp_streams(lab, to, n, &cfg)?
        }
        Workload::UdpGso | Workload::UdpMtu => {
            let segments = if workload == Workload::UdpGso { UDP_SEGMENTS } else { 1 };
            let cfg = UdpConfig { limit, gso_size: UDP_SEGMENT_SIZE, segments, ..UdpConfig::default() };
            let t = streams::udp_transfer(Some(&lab.receiver), Some(&lab.sender), SocketAddr::new(to, UDP_PORT), &cfg)
                .map_err(|e| format!("UDP: {e}"))?;
            Sample {
                gbps: t.gbps(),
                bytes: t.receiver.counts.good_bytes,
                secs: t.receiver.elapsed.as_secs_f64(),
                retransmits: 0,
                lost: t.lost(),
                sent_segments: t.sender.segments,
                datapath_cpu_s: None,
                machine_cpu_s: 0.0,
                ring_drops: None,
                rcvbuf_drops: 0,
                intact: t.no_corruption() && t.receiver.counts.unique > 0,
            }
        }
    };
    s.machine_cpu_s = machine_busy_seconds()? - machine0;
    s.datapath_cpu_s = match (cpu0, (datapath.cpu_seconds)().transpose()?) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    s.ring_drops = ring0.zip((datapath.ring_drops)()).map(|(a, b)| b.saturating_sub(a));
    if workload.is_tcp() {
        s.retransmits = lab.sender_retransmits().map_err(|e| e.to_string())?.saturating_sub(retrans0);
    } else {
        s.rcvbuf_drops = lab.receiver_rcvbuf_errors().map_err(|e| e.to_string())?.saturating_sub(rcvbuf0);
    }
    if s.bytes == 0 {
        return Err(format!("{}: nothing arrived", workload.describe()));
    }
    Ok(s)
}

/// `n` TCP streams at once, each on its own port and threads.
fn tcp_streams(lab: &PeersLab, to: IpAddr, n: u16, cfg: &TcpConfig) -> Result<Sample, String> {
    let results: Vec<Result<TcpTransfer, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let addr = SocketAddr::new(to, TCP_PORT + i);
                let cfg = TcpConfig { seed: cfg.seed + u64::from(i), ..cfg.clone() };
                s.spawn(move || {
                    streams::tcp_transfer(Some(&lab.receiver), Some(&lab.sender), addr, &cfg)
                        .map_err(|e| format!("TCP stream {i}: {e}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a TCP stream thread panicked".into()))).collect()
    });
    let transfers = results.into_iter().collect::<Result<Vec<_>, String>>()?;
    Ok(Sample {
        gbps: transfers.iter().map(TcpTransfer::gbps).sum(),
        bytes: transfers.iter().map(|t| t.receiver.bytes).sum(),
        secs: transfers.iter().map(|t| t.receiver.elapsed.as_secs_f64()).fold(0.0, f64::max),
        retransmits: 0,
        lost: 0,
        sent_segments: 0,
        datapath_cpu_s: None,
        machine_cpu_s: 0.0,
        ring_drops: None,
        rcvbuf_drops: 0,
        intact: transfers.iter().all(TcpTransfer::intact),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_ticks_leave_out_idle_and_iowait() {
        let stat = "cpu  100 2 30 1000 50 4 5 6 7 0\ncpu0 50 1 15 500 25 2 2 3 0 0\n";
        assert_eq!(busy_ticks(stat), Some(100 + 2 + 30 + 4 + 5 + 6));
        assert_eq!(busy_ticks("cpu0 1 2 3 4\n"), None);
        assert_eq!(busy_ticks("cpu  1 x 3 4\n"), None);
        assert_eq!(busy_ticks("cpu  1 2 3\n"), None);
        assert!(machine_busy_seconds().unwrap() > 0.0);
    }

    #[test]
    fn workload_keys_are_distinct() {
        let keys: std::collections::HashSet<&str> = Workload::ALL.iter().map(|w| w.key()).collect();
        assert_eq!(keys.len(), Workload::ALL.len());
        assert!(usize::from(UDP_SEGMENTS) * usize::from(UDP_SEGMENT_SIZE) <= 65_507);
    }
}
