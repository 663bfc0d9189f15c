//! vhost-user ports in `superpacket run`, with a real frontend: DPDK 22.11's
//! `dpdk-testpmd` as a virtio-user device (`--vdev
//! net_virtio_user0,path=SOCK`, the engine listening). Two testpmds bridged
//! through the engine (one `txonly`, one `rxonly`): every frame the sender
//! handed its queue reaches the engine, every frame the receiver counted
//! left the engine, and the counters agree. A testpmd and a kernel
//! namespace behind a TAP exchange UDP both ways. Kernel TCP crosses
//! testpmd's checksum engine between two namespaces, whole and correct. A
//! client-mode port connects to a listening testpmd, and again to the next.
//!
//! `dpdk-testpmd` comes with Debian's `dpdk` package (scripts/test.sh
//! installs it). Without it these tests fail with a message saying so,
//! unless `SUPERPACKET_SKIP_DPDK=1` (then they report themselves skipped).

mod common;

use common::engine::{Running, counter};
use common::{fnv1a, privileged, quiet_ns};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `dpdk-testpmd` can run (see the module documentation).
fn testpmd_available(test: &str) -> bool {
    let found =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("dpdk-testpmd").is_file()));
    if found {
        return true;
    }
    if std::env::var("SUPERPACKET_SKIP_DPDK").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED {test}: dpdk-testpmd is not installed (SUPERPACKET_SKIP_DPDK=1)");
        return false;
    }
    panic!(
        "{test}: dpdk-testpmd is not installed: `apt-get install dpdk` (scripts/test.sh does), or set SUPERPACKET_SKIP_DPDK=1 to skip"
    );
}

/// An interactive `dpdk-testpmd` with one virtio-user port on a vhost-user
/// socket; killed (by PID) on drop if it is still running.
struct Testpmd {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    out: PathBuf,
    /// The EAL's runtime directory of this testpmd's own file prefix
    /// (the tests run as root: under `/var/run/dpdk`).
    runtime_dir: PathBuf,
}

impl Testpmd {
    /// Starts testpmd `name` on `sock` with extra vdev arguments `vdev`
    /// (`,mac=...`) and testpmd arguments `args`; waits for its prompt.
    fn start(dir: &Path, name: &str, sock: &Path, vdev: &str, args: &[&str]) -> Testpmd {
        let out = dir.join(format!("{name}.out"));
        let file = std::fs::File::create(&out).unwrap();
        let prefix = format!("sp{name}{}", std::process::id());
        // stdbuf: testpmd's printf output reaches the file line by line,
        // in order with the prompts its command line writes directly.
        let mut child = Command::new("stdbuf")
            .args([
                "-oL",
                "-eL",
                "dpdk-testpmd",
                "-l",
                "0,1",
                "--no-huge",
                "-m",
                "512",
                "--no-pci",
                "--single-file-segments",
            ])
            .args(["--file-prefix", &prefix, "--vdev"])
            .arg(format!("net_virtio_user0,path={}{vdev}", sock.display()))
            .args(["--", "-i", "--total-num-mbufs=8192"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("start dpdk-testpmd");
        let stdin = child.stdin.take();
        let runtime_dir = Path::new("/var/run/dpdk").join(&prefix);
        let mut t = Testpmd { child: Some(child), stdin, out, runtime_dir };
        t.wait_for("testpmd> ", 1, Duration::from_secs(30));
        t
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits until `needle` appears `n` times in the output.
    fn wait_for(&mut self, needle: &str, n: usize, timeout: Duration) {
        let t0 = Instant::now();
        loop {
            let out = self.output();
            if out.matches(needle).count() >= n {
                return;
            }
            if let Some(Ok(Some(st))) = self.child.as_mut().map(Child::try_wait) {
                panic!("dpdk-testpmd exited ({st}) before `{needle}`:\n{out}");
            }
            assert!(t0.elapsed() < timeout, "dpdk-testpmd: no `{needle}` after {timeout:?}:\n{out}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs one command and waits for the next prompt.
    fn cmd(&mut self, c: &str) {
        let prompts = self.output().matches("testpmd> ").count();
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{c}").unwrap();
        stdin.flush().unwrap();
        self.wait_for("testpmd> ", prompts + 1, Duration::from_secs(30));
    }

    /// `show port stats 0`: (RX-packets, TX-packets).
    fn port_stats(&mut self) -> (u64, u64) {
        let before = self.output().len();
        self.cmd("show port stats 0");
        let out = self.output();
        let tail = &out[before..];
        let field = |key: &str| -> u64 {
            let at = tail.find(key).unwrap_or_else(|| panic!("no {key} in:\n{tail}"));
            tail[at + key.len()..].split_whitespace().next().unwrap().parse().unwrap()
        };
        (field("RX-packets:"), field("TX-packets:"))
    }

    /// `show port xstats 0`: the values of `names` (per-queue counters of
    /// the virtio PMD: `rx_q0_good_packets`, `tx_q1_good_packets`, ...).
    fn xstats<const N: usize>(&mut self, names: [&str; N]) -> [u64; N] {
        let before = self.output().len();
        self.cmd("show port xstats 0");
        let out = self.output();
        let tail = &out[before..];
        names.map(|name| {
            let key = format!("{name}:");
            let at = tail.find(&key).unwrap_or_else(|| panic!("no {key} in:\n{tail}"));
            tail[at + key.len()..].split_whitespace().next().unwrap().parse().unwrap()
        })
    }

    /// `quit`, then waits for the process (killed after 20 s).
    fn quit(mut self) -> String {
        if let Some(mut s) = self.stdin.take() {
            let _ = writeln!(s, "quit");
        }
        if let Some(mut c) = self.child.take() {
            let t0 = Instant::now();
            while c.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        self.output()
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // Child::kill sends SIGKILL to this child's PID only.
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// Waits until `f()` holds (10 s), re-reading the engine's counters.
fn wait_stats(engine: &Running, what: &str, f: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        let s = engine.stats();
        if f(&s) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{what}: {s:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn topology_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Two vhost-user ports `va` (on `a`) and `vb` (on `b`) bridged.
fn bridge_topology(a: &Path, b: &Path) -> String {
    format!(
        r#"
[[device]]
name = "va"
kind = "port"
driver = {{ kind = "vhost-user", socket = "{}" }}
[[device]]
name = "vb"
kind = "port"
driver = {{ kind = "vhost-user", socket = "{}" }}
[[device]]
name = "br0"
kind = "bridge"
ports = ["va", "vb"]
"#,
        a.display(),
        b.display()
    )
}

/// Quits both testpmds of a [`bridge_topology`], checks that the engine
/// saw each leave once without a protocol error, and stops it cleanly.
fn quit_both_and_stop(engine: Running, tx: Testpmd, rx: Testpmd) {
    let (tx_out, rx_out) = (tx.quit(), rx.quit());
    assert!(tx_out.contains("Bye"), "{tx_out}");
    assert!(rx_out.contains("Bye"), "{rx_out}");
    // The frontends left; the engine saw them go and still runs.
    let s = wait_stats(&engine, "both frontends detached", |s| {
        counter(s, "va", "driver.detaches") == 1 && counter(s, "vb", "driver.detaches") == 1
    });
    assert_eq!(counter(&s, "va", "driver.protocol_errors") + counter(&s, "vb", "driver.protocol_errors"), 0, "{s:#}");
    let (code, err) = engine.stop();
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn two_testpmds_exchange_frames_through_a_vhost_user_bridge() {
    if !testpmd_available("two_testpmds_exchange_frames_through_a_vhost_user_bridge") {
        return;
    }
    let dir = topology_dir();
    let (a, b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let topology = bridge_topology(&a, &b);
    let engine = Running::start(&topology);
    let mut rx = Testpmd::start(dir.path(), "rx", &b, ",mac=02:5e:00:00:00:0b", &["--forward-mode=rxonly"]);
    let mut tx = Testpmd::start(
        dir.path(),
        "tx",
        &a,
        ",mac=02:5e:00:00:00:0a",
        &["--forward-mode=txonly", "--eth-peer=0,02:5e:00:00:00:0b"],
    );
    let s = wait_stats(&engine, "both frontends connected", |s| {
        counter(s, "va", "driver.connected") == 1 && counter(s, "vb", "driver.connected") == 1
    });
    // What the guests acked: VERSION_1, MRG_RXBUF, EVENT_IDX at least.
    let acked = counter(&s, "vb", "driver.features");
    assert_ne!(acked & (1 << 32), 0, "VERSION_1 not acked: {acked:#x}");
    assert_ne!(acked & (1 << 15), 0, "MRG_RXBUF not acked: {acked:#x}");
    // testpmd --no-huge shares a memfd made without MFD_ALLOW_SEALING: its
    // table fits its file, is accepted, and counted as unsealed.
    assert_eq!(counter(&s, "vb", "driver.mem_refused"), 0, "{s:#}");
    assert!(counter(&s, "vb", "driver.mem_regions_unsealed") > 0, "{s:#}");
    rx.cmd("start");
    tx.cmd("start");
    std::thread::sleep(Duration::from_secs(3));
    tx.cmd("stop");
    let (_, sent) = tx.port_stats();
    // The engine drains the sender's queue and its own backlog while the
    // receiver still polls.
    let s = wait_stats(&engine, "the engine took every frame the sender queued", |s| {
        counter(s, "va", "driver.rx_frames") == sent && counter(s, "vb", "driver.backlog") == 0
    });
    std::thread::sleep(Duration::from_millis(500));
    rx.cmd("stop");
    let (received, _) = rx.port_stats();
    let s2 = engine.stats();
    assert_eq!(counter(&s2, "vb", "driver.tx_frames"), received, "engine and receiver disagree: {s2:#}");
    assert!(sent > 10_000 && received > 1_000, "sent {sent}, received {received}");
    // Every frame the engine took from va was forwarded to vb and either
    // placed in the receiver's queue or dropped as ring-full.
    let forwarded = counter(&s, "vb", "tx_packets");
    assert_eq!(counter(&s, "va", "rx_packets"), sent);
    assert_eq!(forwarded, sent, "{s:#}");
    let full = counter(&s2, "vb", "drops.vhost-rx-ring-full");
    assert_eq!(received + full, forwarded, "{s2:#}");
    assert_eq!(counter(&s2, "va", "driver.queue_stopped") + counter(&s2, "vb", "driver.queue_stopped"), 0);
    quit_both_and_stop(engine, tx, rx);
}

/// Two engine workers serve one queue pair each of both ports (`MQ`):
/// testpmds with `queues=2` and two Rx/Tx queues send on both pairs and
/// receive on both, each pair served by its own worker.
#[test]
fn two_queue_pairs_carry_frames_through_a_two_worker_engine() {
    if !testpmd_available("two_queue_pairs_carry_frames_through_a_two_worker_engine") {
        return;
    }
    let dir = topology_dir();
    let (a, b) = (dir.path().join("mqa.sock"), dir.path().join("mqb.sock"));
    let topology = bridge_topology(&a, &b);
    let engine = Running::start_with(&topology, &["--workers", "2"]);
    let queues = ["--rxq=2", "--txq=2", "--disable-rss"];
    let mut rx = Testpmd::start(
        dir.path(),
        "mqrx",
        &b,
        ",mac=02:5e:00:00:01:0b,queues=2",
        &[&["--forward-mode=rxonly"][..], &queues].concat(),
    );
    let mut tx = Testpmd::start(
        dir.path(),
        "mqtx",
        &a,
        ",mac=02:5e:00:00:01:0a,queues=2",
        &[&["--forward-mode=txonly", "--eth-peer=0,02:5e:00:00:01:0b"][..], &queues].concat(),
    );
    // Each testpmd enabled both pairs (virtio-user turns its own control
    // queue's VQ_PAIRS_SET into SET_VRING_ENABLE of each pair).
    let s = wait_stats(&engine, "both frontends connected with two pairs in service", |s| {
        ["va", "vb"]
            .iter()
            .all(|p| counter(s, p, "driver.connected") == 1 && counter(s, p, "driver.pairs_enabled") == 2)
    });
    assert_eq!(counter(&s, "va", "driver.queue_pairs"), 2, "{s:#}");
    let acked = counter(&s, "va", "driver.features");
    assert_ne!(acked & (1 << 22), 0, "MQ not acked: {acked:#x}");
    rx.cmd("start");
    tx.cmd("start");
    std::thread::sleep(Duration::from_secs(3));
    tx.cmd("stop");
    let [sent0, sent1] = tx.xstats(["tx_q0_good_packets", "tx_q1_good_packets"]);
    assert!(sent0 > 1_000 && sent1 > 1_000, "testpmd sent {sent0} on queue 0, {sent1} on queue 1");
    let s = wait_stats(&engine, "the engine took every frame the sender queued", |s| {
        counter(s, "va", "driver.rx_frames") == sent0 + sent1 && counter(s, "vb", "driver.backlog") == 0
    });
    std::thread::sleep(Duration::from_millis(500));
    rx.cmd("stop");
    let [got0, got1] = rx.xstats(["rx_q0_good_packets", "rx_q1_good_packets"]);
    let s2 = engine.stats();
    // Both workers took frames from the sender's pairs and placed frames in
    // the receiver's: each pair carried traffic both ways.
    assert_eq!(counter(&s, "va", "driver.pairs_rx_used"), 2, "{s:#}");
    assert_eq!(counter(&s2, "vb", "driver.pairs_tx_used"), 2, "{s2:#}");
    eprintln!("testpmd sent {sent0} + {sent1} on queues 0 + 1, received {got0} + {got1}");
    assert!(got0 > 100 && got1 > 100, "testpmd received {got0} on queue 0, {got1} on queue 1");
    assert_eq!(counter(&s2, "vb", "driver.tx_frames"), got0 + got1, "{s2:#}");
    let full = counter(&s2, "vb", "drops.vhost-rx-ring-full");
    assert_eq!(got0 + got1 + full, counter(&s2, "vb", "tx_packets"), "{s2:#}");
    assert_eq!(counter(&s2, "vb", "drops.vhost-queue-disabled"), 0, "{s2:#}");
    assert_eq!(counter(&s2, "va", "driver.queue_stopped") + counter(&s2, "vb", "driver.queue_stopped"), 0);
    quit_both_and_stop(engine, tx, rx);
}

#[test]
fn a_testpmd_and_a_kernel_namespace_exchange_udp_through_a_tap() {
    if !privileged("a_testpmd_and_a_kernel_namespace_exchange_udp_through_a_tap")
        || !testpmd_available("a_testpmd_and_a_kernel_namespace_exchange_udp_through_a_tap")
    {
        return;
    }
    let dir = topology_dir();
    let sock = dir.path().join("v.sock");
    let ns = quiet_ns("spvu");
    let tap = format!("spvu{}", std::process::id() % 100_000);
    let topology = common::vhost_user_and_taps_topology(&sock, &[("tap", &tap, ns.name())]);
    let engine = Running::start(&topology);
    // testpmd's txonly frames go 198.18.0.1:9 -> 198.18.0.2:9.
    ns.add_addr(&tap, "198.18.0.2/24").unwrap();
    let tap_mac = ns.read_sysfs(&tap, "address").unwrap();
    let tap_mac = tap_mac.trim().to_string();
    const PMD_MAC: &str = "02:5e:00:00:00:0d";
    const PMD_MAC_BYTES: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x0d];
    ns.replace_neighbour(&tap, "198.18.0.1", PMD_MAC_BYTES).unwrap();
    let udp = ns
        .enter_scoped(|| {
            let s = std::net::UdpSocket::bind("198.18.0.2:9").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s
        })
        .unwrap();
    let mut pmd = Testpmd::start(
        dir.path(),
        "pmd",
        &sock,
        &format!(",mac={PMD_MAC}"),
        &["--forward-mode=rxonly", &format!("--eth-peer=0,{tap_mac}")],
    );
    wait_stats(&engine, "testpmd connected", |s| counter(s, "vp", "driver.connected") == 1);
    // Kernel -> testpmd.
    pmd.cmd("start");
    const N: u64 = 300;
    for i in 0..N {
        udp.send_to(&vec![i as u8; 1000], "198.18.0.1:9").unwrap();
    }
    let s =
        wait_stats(&engine, "the kernel's datagrams reached the guest", |s| counter(s, "vp", "driver.tx_frames") >= N);
    pmd.cmd("stop");
    let (received, _) = pmd.port_stats();
    assert!(received >= N, "testpmd received {received} of {N}: {s:#}");
    assert_eq!(received, counter(&engine.stats(), "vp", "driver.tx_frames"));
    // testpmd -> kernel: its UDP datagrams pass the kernel's checks.
    pmd.cmd("set fwd txonly");
    pmd.cmd("start");
    let mut buf = [0u8; 2048];
    let mut got = 0u64;
    let t0 = Instant::now();
    while got < 1000 && t0.elapsed() < Duration::from_secs(10) {
        let (n, from) = udp.recv_from(&mut buf).expect("a datagram from testpmd");
        assert_eq!(from.to_string(), "198.18.0.1:9");
        // 64-byte frames: 14 Ethernet + 20 IP + 8 UDP + 22 payload.
        assert_eq!(n, 22);
        got += 1;
    }
    pmd.cmd("stop");
    assert!(got >= 1000, "the kernel took {got} datagrams from testpmd");
    let s = wait_stats(&engine, "the engine counted testpmd's frames", |s| counter(s, "vp", "driver.rx_frames") >= got);
    assert!(counter(&s, "vp", "driver.rx_frames") >= got, "{s:#}");
    assert_eq!(counter(&s, "vp", "driver.queue_stopped"), 0);
    let out = pmd.quit();
    assert!(out.contains("Bye"), "{out}");
}

/// Namespaces A and B, each behind a TAP of the engine, bridged with a
/// vhost-user port whose frontend is testpmd's checksum forwarding engine
/// (`csum set tcp hw`, `tso set 1448`) sending everything to B: A reaches
/// B through testpmd (A's neighbour entry for B is testpmd's MAC), B
/// answers A directly.
struct CsumLab {
    engine: Running,
    pmd: Testpmd,
    na: superpacket_engine::io::NetNs,
    nb: superpacket_engine::io::NetNs,
    /// B's address (10.`subnet`.0.2).
    b_addr: String,
    _dir: tempfile::TempDir,
}

impl CsumLab {
    /// `tag` names the namespaces and TAPs, `subnet` the /24, `pmd_mac_last`
    /// testpmd's MAC; `extra` are more testpmd arguments.
    fn start(tag: &str, subnet: u8, pmd_mac_last: u8, extra: &[&str]) -> CsumLab {
        let dir = topology_dir();
        let sock = dir.path().join("v.sock");
        let (na, nb) = (quiet_ns(&format!("{tag}a")), quiet_ns(&format!("{tag}b")));
        let id = std::process::id() % 10_000;
        let (ta, tb) = (format!("{tag}a{id}"), format!("{tag}b{id}"));
        let topology = common::vhost_user_and_taps_topology(&sock, &[("ta", &ta, na.name()), ("tb", &tb, nb.name())]);
        let engine = Running::start(&topology);
        na.add_addr(&ta, &format!("10.{subnet}.0.1/24")).unwrap();
        let b_addr = format!("10.{subnet}.0.2");
        nb.add_addr(&tb, &format!("{b_addr}/24")).unwrap();
        let pmd_mac = [0x02, 0x5e, 0, 0, 0, pmd_mac_last];
        na.replace_neighbour(&ta, &b_addr, pmd_mac).unwrap();
        let tb_mac = nb.read_sysfs(&tb, "address").unwrap().trim().to_string();
        let mut args = vec!["--forward-mode=csum".to_string(), format!("--eth-peer=0,{tb_mac}")];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mac = superpacket_engine::io::netns::format_mac(pmd_mac);
        let mut pmd = Testpmd::start(dir.path(), tag, &sock, &format!(",mac={mac}"), &args);
        for c in ["port stop 0", "csum set tcp hw 0", "tso set 1448 0", "port start 0", "start"] {
            pmd.cmd(c);
        }
        wait_stats(&engine, "testpmd connected", |s| counter(s, "vp", "driver.connected") == 1);
        CsumLab { engine, pmd, na, nb, b_addr, _dir: dir }
    }

    /// Sends `data` over kernel TCP from A to B; returns what B received.
    fn transfer(&self, data: &[u8]) -> Vec<u8> {
        let to: std::net::SocketAddr = format!("{}:5001", self.b_addr).parse().unwrap();
        let listener = self.nb.enter_scoped(|| std::net::TcpListener::bind(to).unwrap()).unwrap();
        let server = common::receive_one_tcp_stream(listener, Duration::from_secs(10));
        let mut client = self
            .na
            .enter_scoped(|| std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5)))
            .unwrap()
            .expect("connect through testpmd");
        client.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
        client.write_all(data).unwrap();
        drop(client);
        server.join().unwrap()
    }
}

/// Kernel TCP from namespace A to namespace B through testpmd's checksum
/// forwarding engine (`csum set tcp hw`, `tso set 1448`): A's TAP hands the
/// engine superpackets; testpmd did not ack `GUEST_TSO4`, so the engine
/// segments (and checksums) before it, as a port without TSO; testpmd sends
/// every segment back with a partial checksum (`NEEDS_CSUM`), which B's
/// kernel completes. 4 MiB arrive whole and in order (an FNV-1a digest and the length compared).
#[test]
fn kernel_tcp_crosses_testpmds_checksum_engine_whole_and_correct() {
    const TEST: &str = "kernel_tcp_crosses_testpmds_checksum_engine_whole_and_correct";
    if !privileged(TEST) || !testpmd_available(TEST) {
        return;
    }
    let lab = CsumLab::start("spvt", 98, 0x0e, &[]);
    let data: Vec<u8> = (0..4u32 << 20).map(|i| (i.wrapping_mul(7) % 251) as u8).collect();
    let got = lab.transfer(&data);
    let CsumLab { engine, mut pmd, .. } = lab;
    assert_eq!(got.len(), data.len());
    assert_eq!((fnv1a(&got), got.len()), (fnv1a(&data), data.len()), "the bytes B received differ from A's");
    let s =
        wait_stats(&engine, "the engine counted the transfer", |s| counter(s, "vp", "driver.rx_csum_partial") > 1000);
    let acked = counter(&s, "vp", "driver.features");
    assert_eq!(acked & (1 << 7), 0, "testpmd without LRO does not ack GUEST_TSO4: {acked:#x}");
    assert!(counter(&s, "ta", "rx_superpackets") > 0, "A's kernel sent superpackets: {s:#}");
    assert!(counter(&s, "vp", "segments_produced") > 0, "the engine segmented before testpmd: {s:#}");
    assert_eq!(counter(&s, "vp", "driver.tx_superpackets"), 0, "{s:#}");
    assert!(counter(&s, "vp", "driver.rx_csum_partial") > 1000, "testpmd offloaded its checksums: {s:#}");
    pmd.cmd("stop");
    let out = pmd.quit();
    assert!(out.contains("Bye"), "{out}");
}

/// Superpackets both ways through testpmd's checksum forwarding engine
/// with LRO and TSO (`--rx-offloads=0x2018`: TCP checksum, LRO, scatter;
/// `csum set tcp hw`, `tso set 1448`). A's kernel hands its TAP TCP
/// superpackets; testpmd acked `GUEST_TSO4`, so the engine places them
/// whole in testpmd's receive queue, spread over merged 2 KiB buffers
/// (`num_buffers`); testpmd's csum engine sends each back as one TSO
/// superpacket (`HOST_TSO4`: `gso_type` TCPV4, `gso_size` 1448), which the
/// engine hands B's TAP whole, and B's kernel takes it. 16 MiB arrive whole
/// and in order.
#[test]
fn kernel_tcp_superpackets_cross_testpmd_whole_both_ways() {
    const TEST: &str = "kernel_tcp_superpackets_cross_testpmd_whole_both_ways";
    if !privileged(TEST) || !testpmd_available(TEST) {
        return;
    }
    let lab = CsumLab::start("spvl", 97, 0x0f, &["--rx-offloads=0x2018"]);
    let data: Vec<u8> = (0..16u32 << 20).map(|i| (i.wrapping_mul(13) % 251) as u8).collect();
    let got = lab.transfer(&data);
    let CsumLab { engine, mut pmd, .. } = lab;
    assert_eq!(got.len(), data.len(), "{:#}\n{}", engine.stats(), pmd.output());
    // The counters reach the stats socket a moment later.
    let s = wait_stats(&engine, "the engine counted the transfer", |s| {
        let n = data.len() as u64;
        counter(s, "vp", "driver.tx_bytes") > n && counter(s, "vp", "driver.rx_bytes") > n
    });
    assert_eq!((fnv1a(&got), got.len()), (fnv1a(&data), data.len()), "the bytes B received differ from A's");
    eprintln!(
        "to testpmd: {} frames, {} superpackets, {} buffers; from testpmd: {} frames, {} superpackets; B's TAP: {} superpackets",
        counter(&s, "vp", "driver.tx_frames"),
        counter(&s, "vp", "driver.tx_superpackets"),
        counter(&s, "vp", "driver.tx_buffers"),
        counter(&s, "vp", "driver.rx_frames"),
        counter(&s, "vp", "driver.rx_superpackets"),
        counter(&s, "tb", "tx_superpackets"),
    );
    let acked = counter(&s, "vp", "driver.features");
    assert_ne!(acked & (1 << 7), 0, "testpmd with LRO acks GUEST_TSO4: {acked:#x}");
    assert_ne!(acked & (1 << 11), 0, "testpmd with TSO acks HOST_TSO4: {acked:#x}");
    assert!(counter(&s, "ta", "rx_superpackets") > 0, "A's kernel sent superpackets: {s:#}");
    // Kernel -> testpmd whole: superpackets over several merged buffers.
    let (placed, sp, bufs) = (
        counter(&s, "vp", "driver.tx_frames"),
        counter(&s, "vp", "driver.tx_superpackets"),
        counter(&s, "vp", "driver.tx_buffers"),
    );
    assert!(sp > 0 && bufs > placed, "superpackets whole to testpmd: {s:#}");
    assert_eq!(counter(&s, "vp", "segments_produced"), 0, "nothing segmented before testpmd: {s:#}");
    // testpmd -> kernel whole: TSO superpackets in, whole out of B's TAP.
    assert!(counter(&s, "vp", "driver.rx_superpackets") > 0, "testpmd sent TSO superpackets: {s:#}");
    assert!(counter(&s, "tb", "tx_superpackets") > 0, "B's TAP took superpackets whole: {s:#}");
    assert_eq!(counter(&s, "tb", "segments_produced"), 0, "{s:#}");
    assert_eq!(counter(&s, "vp", "driver.queue_stopped"), 0, "{s:#}");
    pmd.cmd("stop");
    let out = pmd.quit();
    assert!(out.contains("Bye"), "{out}");
}

/// A frontend that dies mid-transfer: testpmd (checksum engine, LRO and
/// TSO, between namespaces A and B) killed while A streams TCP at B, its
/// receive queue likely holding fewer buffers than the next superpacket
/// needs. The engine sees it go, drops what waited for it and stops on
/// SIGTERM. (It once spun copying the same superpacket into the same few
/// buffers, deaf to SIGTERM.)
#[test]
fn a_frontend_killed_mid_superpacket_stream_leaves_the_engine_responsive() {
    const TEST: &str = "a_frontend_killed_mid_superpacket_stream_leaves_the_engine_responsive";
    if !privileged(TEST) || !testpmd_available(TEST) {
        return;
    }
    let lab = CsumLab::start("spvk", 96, 0x10, &["--rx-offloads=0x2018"]);
    let CsumLab { engine, pmd, na, nb, b_addr, _dir } = lab;
    let to: std::net::SocketAddr = format!("{b_addr}:5001").parse().unwrap();
    let listener = nb.enter_scoped(|| std::net::TcpListener::bind(to).unwrap()).unwrap();
    let server = std::thread::spawn(move || {
        use std::io::Read;
        let (mut c, _) = listener.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
    });
    let mut client = na
        .enter_scoped(|| std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5)))
        .unwrap()
        .expect("connect through testpmd");
    client.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let writer = std::thread::spawn(move || {
        let buf = vec![0x5a; 1 << 20];
        while client.write_all(&buf).is_ok() {}
    });
    wait_stats(&engine, "superpackets reached testpmd", |s| counter(s, "vp", "driver.tx_superpackets") > 50);
    // SIGKILL to testpmd's PID (Drop of a Testpmd whose child runs).
    drop(pmd);
    wait_stats(&engine, "the engine saw testpmd go", |s| counter(s, "vp", "driver.detaches") == 1);
    writer.join().unwrap();
    server.join().unwrap();
    let s = engine.stats();
    assert_eq!(counter(&s, "vp", "driver.connected"), 0, "{s:#}");
    // SIGTERM stops it within 10 s (a spinning worker would not).
    let pid = engine.pid().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(engine.stop());
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok((code, err)) => assert_eq!(code, Some(0), "{err}"),
        Err(_) => {
            // SAFETY: kill with the PID of the engine this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the engine ignored SIGTERM after its frontend died");
        }
    }
}

/// `mode = "client"`: the engine connects to a testpmd listening on the
/// socket (`server=1`), and connects again when a new testpmd listens after
/// the first one quit; every frame either sent reached the engine.
#[test]
fn a_client_mode_port_connects_and_reconnects_to_a_listening_testpmd() {
    const TEST: &str = "a_client_mode_port_connects_and_reconnects_to_a_listening_testpmd";
    if !testpmd_available(TEST) {
        return;
    }
    let dir = topology_dir();
    let sock = dir.path().join("c.sock");
    let topology = format!(
        r#"
[[device]]
name = "vc"
kind = "port"
driver = {{ kind = "vhost-user", socket = "{}", mode = "client" }}
"#,
        sock.display()
    );
    let engine = Running::start(&topology);
    let mut total = 0;
    for round in 1..=2u64 {
        let mut pmd =
            Testpmd::start(dir.path(), &format!("srv{round}"), &sock, ",server=1", &["--forward-mode=txonly"]);
        wait_stats(&engine, "the engine connected", |s| counter(s, "vc", "driver.attaches") == round);
        pmd.cmd("start");
        std::thread::sleep(Duration::from_secs(1));
        pmd.cmd("stop");
        let (_, sent) = pmd.port_stats();
        assert!(sent > 1000, "round {round}: testpmd sent {sent}");
        total += sent;
        wait_stats(&engine, "every frame reached the engine", |s| counter(s, "vc", "driver.rx_frames") == total);
        let out = pmd.quit();
        assert!(out.contains("Bye"), "{out}");
        wait_stats(&engine, "the engine saw testpmd go", |s| counter(s, "vc", "driver.detaches") == round);
    }
    let s = engine.stats();
    assert_eq!(counter(&s, "vc", "driver.protocol_errors"), 0, "{s:#}");
}
