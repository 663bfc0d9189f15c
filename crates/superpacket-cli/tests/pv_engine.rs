//! Paravirtual ports in `superpacket run`: two applications attached as pv
//! clients to a bridge exchange frames (superpackets included) through the
//! engine, every frame checksum-valid on the far side; a client killed in
//! the middle of a transfer leaves the engine running with its shared
//! memory released; a TAP bridged to a pv port carries kernel UDP both ways.

mod common;

use common::engine::port_bridged_to_tap;
use common::{privileged, quiet_ns, wait_for_engine};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use superpacket::packet::{ChecksumState, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{Medium, validate_frame};
use superpacket::wire::{FrameHeaders, MacAddr, TcpFlags};
use superpacket_engine::io::pv::{PvClient, PvClientConfig, PvError, TxStrategy, proto};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");
const MAC_A: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0b];

const TOPOLOGY: &str = r#"
[[device]]
name = "pva"
kind = "port"
driver = { kind = "pv", socket = "a.sock" }
[[device]]
name = "pvb"
kind = "port"
driver = { kind = "pv", socket = "b.sock", strategy = "swcsum-direct", ring = 256 }
[[device]]
name = "br0"
kind = "bridge"
ports = ["pva", "pvb"]
"#;

/// A running engine, stopped (SIGTERM) on drop.
struct Engine {
    child: Child,
    stats: std::path::PathBuf,
}

impl Engine {
    fn start(dir: &Path, topology: &str) -> Engine {
        let topo = dir.join("pv.toml");
        std::fs::write(&topo, topology).unwrap();
        let stats = dir.join("stats.sock");
        let mut child = Command::new(BIN)
            .args(["run", "--status-interval", "0", "--stats-socket"])
            .arg(&stats)
            .arg(&topo)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_engine(&stats, &mut child);
        Engine { child, stats }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The driver counter `key` of device `dev`.
    fn counter(&self, dev: &str, key: &str) -> u64 {
        let out = Command::new(BIN).args(["stats", "--json", "--socket"]).arg(&self.stats).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "stats: {}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let d = v["devices"].as_array().unwrap().iter().find(|d| d["name"] == dev).expect("device").clone();
        d["counters"][key].as_u64().unwrap_or(0)
    }

    /// Waits until the counter is `want` (counters are published every 100 ms).
    fn wait_counter(&self, dev: &str, key: &str, want: u64) {
        self.wait_until(dev, key, want, |v| v == want);
    }

    /// Waits until the counter is at least `min`.
    fn wait_at_least(&self, dev: &str, key: &str, min: u64) {
        self.wait_until(dev, key, min, |v| v >= min);
    }

    fn wait_until(&self, dev: &str, key: &str, want: u64, ok: impl Fn(u64) -> bool) {
        let t0 = Instant::now();
        loop {
            let v = self.counter(dev, key);
            if ok(v) {
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "{dev} {key} = {v}, waiting for {want}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: SIGTERM to the engine this test started and owns.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// Lines of the engine's memory map and links of its descriptors that name
/// the pv memfd.
fn pv_memory(pid: u32) -> (usize, usize) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mapped = maps.lines().filter(|l| l.contains("memfd:superpacket-pv")).count();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().contains("memfd:superpacket-pv"))
        .count();
    (mapped, fds)
}

fn connect(dir: &Path, sock: &str, cfg: PvClientConfig) -> PvClient {
    let t0 = Instant::now();
    loop {
        match PvClient::connect(&dir.join(sock), &cfg) {
            Ok(mut c) => {
                c.busy_poll = Duration::from_micros(20);
                return c;
            }
            Err(e) if t0.elapsed() < Duration::from_secs(5) => {
                eprintln!("retrying attach: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("attach to {sock}: {e}"),
        }
    }
}

/// Frames from `src` to `dst` of every kind, with partial checksums.
fn traffic(src: [u8; 6], dst: [u8; 6], n: usize) -> Vec<Packet> {
    let mut flows = Vec::new();
    for (i, (t, v6)) in
        [(Transport::Udp, false), (Transport::Tcp, false), (Transport::Udp, true), (Transport::Tcp, true)]
            .into_iter()
            .enumerate()
    {
        let mut spec = FlowSpec::new(t, v6, 40 + i as u32);
        spec.src_mac = MacAddr(src);
        spec.dst_mac = MacAddr(dst);
        flows.push((Flow::new(spec), t));
    }
    (0..n)
        .map(|k| {
            let (f, t) = &mut flows[k % 4];
            if k % 10 == 7 {
                // Segments of a 1500-byte MTU (TCP carries 12 bytes of timestamps).
                let gso = match (*t, k % 4 >= 2) {
                    (Transport::Tcp, false) => 1448,
                    (Transport::Tcp, true) => 1428,
                    _ => 1400,
                };
                f.superpacket(30_000, gso, TcpFlags::empty()).unwrap()
            } else {
                f.superpacket([8usize, 64, 500, 1000, 1400][k % 5], 9000, TcpFlags::empty()).unwrap()
            }
        })
        .collect()
}

fn valid(frame: &[u8], meta: &OffloadMeta) {
    let mut problems = Vec::new();
    validate_frame(frame, Medium::Ethernet, meta, false, &mut problems);
    assert!(problems.is_empty(), "{meta:?}: {problems:?}");
}

/// `sent` with its checksum completed unless `got` is partial.
fn as_received(sent: &Packet, got: &OffloadMeta) -> Vec<u8> {
    let mut b = sent.to_vec();
    if let (ChecksumState::Partial { start, offset }, false) =
        (sent.meta.csum, matches!(got.csum, ChecksumState::Partial { .. }))
    {
        superpacket::csum::complete_partial(&mut b, start as usize, offset as usize, offset == 6).unwrap();
    }
    b
}

/// Sends `frames` from `from` in batches of `batch` and checks `to`
/// receives each one intact (superpackets whole).
fn exchange(engine: &Engine, from: &mut PvClient, to: &mut PvClient, frames: &[Packet], batch: usize) {
    let mut buf = Vec::new();
    for chunk in frames.chunks(batch) {
        for (j, p) in chunk.iter().enumerate() {
            from.send_packet(p, j + 1 < chunk.len()).unwrap();
        }
        for p in chunk {
            let Some(f) = to.recv_wait(&mut buf, Duration::from_secs(10)).unwrap() else {
                let out = Command::new(BIN).args(["stats", "--socket"]).arg(&engine.stats).output();
                panic!(
                    "frame {:?} {:?} lost: {:?}",
                    p.len(),
                    p.meta,
                    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                );
            };
            assert_eq!(&buf[..f.len], &as_received(p, &f.meta)[..]);
            assert_eq!(f.meta.is_gso(), p.meta.is_gso());
            valid(&buf[..f.len], &f.meta);
        }
    }
}

/// `examples/live-pv-bridge.toml` as shipped (its sockets moved into the
/// test's directory) carries frames of every kind both ways.
#[test]
fn the_pv_bridge_example_carries_traffic_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/live-pv-bridge.toml"))
            .unwrap();
    let topology = example.replace("/run/superpacket/", "");
    assert_ne!(topology, example, "the example's socket paths moved");
    let engine = Engine::start(dir.path(), &topology);
    let mut a = connect(dir.path(), "pv-a.sock", PvClientConfig::default());
    let mut b = connect(dir.path(), "pv-b.sock", PvClientConfig::default());
    engine.wait_counter("pvb", "driver.attached", 1);
    exchange(&engine, &mut a, &mut b, &traffic(MAC_A, MAC_B, 24), 8);
    exchange(&engine, &mut b, &mut a, &traffic(MAC_B, MAC_A, 24), 1);
}

#[test]
fn two_clients_exchange_superpackets_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(dir.path(), TOPOLOGY);
    let mut a = connect(dir.path(), "a.sock", PvClientConfig::default());
    let mut b = connect(dir.path(), "b.sock", PvClientConfig::default());
    assert_eq!(a.features(), proto::ALL_FEATURES);
    engine.wait_counter("pvb", "driver.attached", 1);
    // A second client on a busy port is refused.
    match PvClient::connect(&dir.path().join("b.sock"), &PvClientConfig::default()) {
        Err(PvError::Refused(r)) => assert!(r.contains("busy"), "{r}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    for s in TxStrategy::ALL {
        a.set_strategy(s);
        b.set_strategy(s);
        exchange(&engine, &mut a, &mut b, &traffic(MAC_A, MAC_B, 100), 1);
        exchange(&engine, &mut b, &mut a, &traffic(MAC_B, MAC_A, 100), 5);
    }
    // The engine used the policy towards the clients: lone packets direct
    // with a software checksum, batched ones and superpackets indirect.
    engine.wait_at_least("pvb", "driver.tx_direct_swcsum", 1);
    engine.wait_at_least("pva", "driver.tx_indirect_hdr_info", 1);
    engine.wait_at_least("pva", "driver.rx_csum_without_hdr_info", 1); // direct_nocsum was used
    assert_eq!(engine.counter("pvb", "driver.refused"), 1);

    // A client without TSO/USO: the engine segments superpackets for it.
    drop(b);
    engine.wait_counter("pvb", "driver.attached", 0);
    let want =
        proto::ALL_FEATURES & !(proto::F_GUEST_TSO4 | proto::F_GUEST_TSO6 | proto::F_GUEST_USO4 | proto::F_GUEST_USO6);
    let mut b = connect(dir.path(), "b.sock", PvClientConfig { features: want, ..Default::default() });
    assert_eq!(b.features() & (proto::F_GUEST_TSO4 | proto::F_GUEST_USO6), 0);
    let sps: Vec<Packet> = traffic(MAC_A, MAC_B, 40).into_iter().filter(|p| p.meta.is_gso()).collect();
    let mut buf = Vec::new();
    for p in &sps {
        a.send_packet(p, false).unwrap();
        let payload = FrameHeaders::parse(&p.to_vec()).unwrap().payload_len;
        let mut got = 0;
        while got < payload {
            let f = b.recv_wait(&mut buf, Duration::from_secs(10)).unwrap().expect("segment");
            assert!(!f.meta.is_gso());
            valid(&buf[..f.len], &f.meta);
            got += FrameHeaders::parse(&buf[..f.len]).unwrap().payload_len;
        }
        assert_eq!(got, payload);
    }
    engine.wait_counter("pvb", "driver.attaches", 2);
}

#[test]
fn a_killed_client_leaves_the_engine_running_and_its_memory_released() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::start(dir.path(), TOPOLOGY);
    assert_eq!(pv_memory(engine.pid()), (0, 0), "no client, no region");
    let mut b = connect(dir.path(), "b.sock", PvClientConfig::default());
    let mut flood = Command::new(BIN)
        .args(["pv-peer", "flood", "--socket"])
        .arg(dir.path().join("a.sock"))
        .args(["--src-mac", "02:5e:00:00:00:0a", "--dst-mac", "02:5e:00:00:00:0b"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(flood.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "attached");
    // Mid-transfer: B is receiving the flood through the engine.
    let mut buf = Vec::new();
    let mut got = 0;
    let t0 = Instant::now();
    while got < 2000 {
        if let Some(f) = b.recv_wait(&mut buf, Duration::from_secs(5)).unwrap() {
            valid(&buf[..f.len], &f.meta);
            got += 1;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "only {got} frames arrived");
    }
    assert_eq!(pv_memory(engine.pid()), (2, 2), "two clients, two regions");
    // (The counters are published every 100 ms: see the attach first.)
    engine.wait_counter("pva", "driver.attached", 1);
    // SAFETY: SIGKILL to the flood client this test started and owns.
    assert_eq!(unsafe { libc::kill(flood.id() as i32, libc::SIGKILL) }, 0);
    flood.wait().unwrap();
    engine.wait_counter("pva", "driver.attached", 0);
    assert_eq!(engine.counter("pva", "driver.detaches"), 1);
    assert!(engine.counter("pva", "driver.rx_frames") >= 2000);
    assert_eq!(pv_memory(engine.pid()), (1, 1), "the dead client's region is unmapped and closed");
    // B drains what is left; the engine still forwards for a new client.
    while b.recv_wait(&mut buf, Duration::from_millis(300)).unwrap().is_some() {}
    let mut a = connect(dir.path(), "a.sock", PvClientConfig::default());
    exchange(&engine, &mut a, &mut b, &traffic(MAC_A, MAC_B, 30), 3);
    engine.wait_counter("pva", "driver.attaches", 2);
    drop((a, b));
    engine.wait_counter("pvb", "driver.attached", 0);
    engine.wait_counter("pva", "driver.attached", 0);
    assert_eq!(pv_memory(engine.pid()), (0, 0));
}

#[test]
fn a_tap_bridged_to_a_pv_port_carries_kernel_udp_both_ways() {
    if !privileged("a_tap_bridged_to_a_pv_port_carries_kernel_udp_both_ways") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ns = quiet_ns("sppv");
    let tap = format!("sppv{}", std::process::id() % 100_000);
    let topology = port_bridged_to_tap("pvc", r#"{ kind = "pv", socket = "c.sock" }"#, &tap, ns.name());
    let _engine = Engine::start(dir.path(), &topology);
    ns.add_addr(&tap, "10.77.0.1/24").unwrap();
    let tap_mac = ns.read_sysfs(&tap, "address").unwrap();
    let tap_mac = superpacket_engine::device::topology::parse_mac(tap_mac.trim()).unwrap();
    // The client's address, known to the kernel without ARP.
    ns.replace_neighbour(&tap, "10.77.0.2", [0x02, 0x5e, 0, 0, 0, 0x0c]).unwrap();
    let mut c = connect(dir.path(), "c.sock", PvClientConfig::default());
    let sock = ns
        .enter_scoped(|| {
            let s = std::net::UdpSocket::bind("10.77.0.1:5555").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s
        })
        .unwrap();
    // Client -> kernel: lone (software checksum, direct) and batched
    // (offloaded, indirect) datagrams; the kernel's UDP stack takes them
    // (a bad checksum would be dropped).
    let mut spec = FlowSpec::new(Transport::Udp, false, 1);
    spec.src_mac = MacAddr([0x02, 0x5e, 0, 0, 0, 0x0c]);
    spec.dst_mac = tap_mac;
    spec.addrs =
        superpacket::traffic::Addrs::V4 { src: "10.77.0.2".parse().unwrap(), dst: "10.77.0.1".parse().unwrap() };
    spec.src_port = 6666;
    spec.dst_port = 5555;
    let mut flow = Flow::new(spec);
    let mut got = [0u8; 2000];
    for (i, batch) in [1usize, 1, 4, 1, 8].into_iter().enumerate() {
        for j in 0..batch {
            let p = flow.superpacket(100 + 10 * i + j, 9000, TcpFlags::empty()).unwrap();
            c.send_packet(&p, j + 1 < batch).unwrap();
        }
        for j in 0..batch {
            let (n, from) = sock.recv_from(&mut got).expect("the kernel accepted the datagram");
            assert_eq!((n, from.to_string().as_str()), (100 + 10 * i + j, "10.77.0.2:6666"));
        }
    }
    let st = c.stats().tx;
    assert!(st.direct_swcsum >= 3 && st.indirect_hdr_info >= 10, "{st:?}");
    // Kernel -> client through the engine: valid frames.
    for n in [10usize, 1000, 1472] {
        sock.send_to(&vec![7u8; n], "10.77.0.2:6666").unwrap();
        let mut buf = Vec::new();
        let t0 = Instant::now();
        loop {
            let f = c.recv_wait(&mut buf, Duration::from_secs(5)).unwrap().expect("a frame from the kernel");
            let h = FrameHeaders::parse(&buf[..f.len]).unwrap();
            if h.payload_len == n {
                valid(&buf[..f.len], &f.meta);
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(5));
        }
    }
}
