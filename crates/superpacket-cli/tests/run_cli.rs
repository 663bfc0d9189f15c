//! `superpacket run` and `superpacket stats` without privileges: pcap and
//! memory ports, GRO on ingress, the stats socket (text, JSON,
//! Prometheus), SIGTERM/SIGINT shutdown, and the errors of bad invocations.

mod common;

use common::wait_for_engine;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use superpacket::pcap::{CaptureFormat, CaptureReader, CaptureWriter, FrameAnnotation, LinkType};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{FrameHeaders, TcpFlags};

const BIN: &str = env!("CARGO_BIN_EXE_superpacket");

/// 4 interleaved TCP flows (IPv4 and IPv6) of `n` 1400-byte segments each (PSH on the last);
/// returns the TCP payload bytes written.
fn build_capture(path: &Path, n: usize) -> u64 {
    let mut flows: Vec<Flow> = (0..4).map(|i| Flow::new(FlowSpec::new(Transport::Tcp, i % 2 == 1, i))).collect();
    let mut w = CaptureWriter::create(path, CaptureFormat::PcapNanos, LinkType::ETHERNET).unwrap();
    let mut ts = 1_000_000_000u64;
    for i in 0..n {
        for f in flows.iter_mut() {
            let flags = if i + 1 == n { TcpFlags::PSH } else { TcpFlags::empty() };
            ts += 1000;
            w.write_frame(&f.frame(1400, flags).unwrap(), ts, &FrameAnnotation::NONE).unwrap();
        }
    }
    w.finish().unwrap();
    (4 * n * 1400) as u64
}

/// (frames, superpackets, TCP payload bytes) of a capture.
fn summarise(path: &Path) -> (u64, u64, u64) {
    let mut r = CaptureReader::open(path).unwrap();
    let (mut frames, mut supers, mut payload) = (0, 0, 0);
    while let Some(f) = r.next_frame().unwrap() {
        frames += 1;
        if f.annotation.gso.is_some() {
            supers += 1;
        }
        let h = FrameHeaders::parse(f.data).unwrap();
        payload += h.payload_len as u64;
    }
    (frames, supers, payload)
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// A bridge between a pcap port replaying `in.pcap` (with GRO) and a pcap
/// port capturing to `out.pcapng`.
const REPLAY_TOPOLOGY: &str = r#"
[[device]]
name = "in"
kind = "port"
driver = { kind = "pcap", path = "in-tx.pcapng", input = "in.pcap" }
gro = true
[[device]]
name = "out"
kind = "port"
driver = { kind = "pcap", path = "out.pcapng" }
features = { tso = false, tso6 = false }
[[device]]
name = "br0"
kind = "bridge"
ports = ["in", "out"]
"#;

/// `superpacket run --duration 1` on `topology`; its output.
fn run_for_a_second(topology: &Path, socket: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["run", "--duration", "1", "--status-interval", "0", "--stats-socket"])
        .arg(socket)
        .arg(topology)
        .output()
        .unwrap()
}

#[test]
fn replayed_capture_is_coalesced_bridged_and_segmented_at_the_port() {
    let dir = tempfile::tempdir().unwrap();
    let payload_in = build_capture(&dir.path().join("in.pcap"), 40);
    let topo = dir.path().join("replay.toml");
    // A port with TSO: the superpackets leave whole.
    write(&topo, &REPLAY_TOPOLOGY.replace("features = { tso = false, tso6 = false }\n", ""));
    let out = run_for_a_second(&topo, &dir.path().join("s.sock"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("br0"), "{report}");
    let (frames, supers, payload) = summarise(&dir.path().join("out.pcapng"));
    assert_eq!(payload, payload_in, "every payload byte crossed the bridge");
    assert!(supers >= 4 && frames < 40, "GRO merged the flows: {frames} frames, {supers} superpackets");
    assert!(!dir.path().join("s.sock").exists(), "the stats socket is removed on exit");

    // A port without TSO: the bridge carries superpackets, the port cuts them.
    write(&topo, REPLAY_TOPOLOGY);
    let out = run_for_a_second(&topo, &dir.path().join("s.sock"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (frames, supers, payload) = summarise(&dir.path().join("out.pcapng"));
    assert_eq!((frames, supers, payload), (160, 0, payload_in), "{}", String::from_utf8_lossy(&out.stdout));
    let check = Command::new(BIN).args(["pcap", "check"]).arg(dir.path().join("out.pcapng")).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stdout));
}

/// A router between a pcap port replaying `lan.pcap` and a pcap port
/// capturing to `wan.pcapng`, whose default gateway never answers ARP.
const SILENT_GATEWAY_TOPOLOGY: &str = r#"
[[device]]
name = "lan"
kind = "port"
driver = { kind = "pcap", path = "lan-tx.pcapng", input = "lan.pcap" }
mac = "02:00:00:00:01:01"
addresses = ["10.1.0.1/24"]
[[device]]
name = "wan"
kind = "port"
driver = { kind = "pcap", path = "wan.pcapng" }
addresses = ["10.2.0.1/24"]
[[route]]
to = "default"
via = "10.2.0.254"
dev = "wan"
"#;

#[test]
fn a_silent_gateway_is_asked_three_times_a_second_apart_then_its_packets_are_dropped_and_counted() {
    use std::net::Ipv4Addr;
    use superpacket::traffic::Addrs;
    use superpacket::wire::MacAddr;
    let dir = tempfile::tempdir().unwrap();
    let mut spec = FlowSpec::new(Transport::Udp, false, 0);
    spec.dst_mac = MacAddr([0x02, 0, 0, 0, 1, 1]);
    spec.addrs = Addrs::V4 { src: Ipv4Addr::new(10, 1, 0, 2), dst: Ipv4Addr::new(198, 51, 100, 7) };
    let mut flow = Flow::new(spec);
    let mut w =
        CaptureWriter::create(dir.path().join("lan.pcap"), CaptureFormat::PcapNanos, LinkType::ETHERNET).unwrap();
    for i in 0..5u64 {
        w.write_frame(&flow.frame(100, TcpFlags::empty()).unwrap(), 1_000_000_000 + i, &FrameAnnotation::NONE).unwrap();
    }
    w.finish().unwrap();
    let topo = dir.path().join("router.toml");
    write(&topo, SILENT_GATEWAY_TOPOLOGY);
    let out = Command::new(BIN)
        .args(["run", "--duration", "4.5", "--status-interval", "0", "--stats-socket"])
        .arg(dir.path().join("s.sock"))
        .arg(&topo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report = String::from_utf8_lossy(&out.stdout);

    // Three ARP requests for the gateway, about a second apart, and nothing else.
    let mut r = CaptureReader::open(dir.path().join("wan.pcapng")).unwrap();
    let mut requests = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        assert_eq!(&f.data[12..14], &[0x08, 0x06], "only ARP leaves: {report}");
        assert_eq!(&f.data[14 + 24..14 + 28], &[10, 2, 0, 254], "asks for the gateway");
        requests.push(f.timestamp_ns);
    }
    assert_eq!(requests.len(), 3, "three requests: {report}");
    for pair in requests.windows(2) {
        let gap_ms = (pair[1] - pair[0]) / 1_000_000;
        assert!((900..=1500).contains(&gap_ms), "requests {gap_ms} ms apart: {requests:?}");
    }
    // The five waiting packets are dropped with their reason, the neighbour counted as failed.
    assert!(report.contains("drops.neighbour-unresolved=5\n"), "{report}");
    let queue = report.lines().find(|l| l.starts_with("neighbour-queue")).unwrap();
    assert_eq!(
        queue.split_whitespace().collect::<Vec<_>>(),
        ["neighbour-queue", "0", "5", "64", "failed=1"],
        "{report}"
    );
}

fn stats(sock: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN).args(["stats", "--socket"]).arg(sock).args(extra).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill with a PID of a child this test started and still owns.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn stats_socket_and_prometheus_answer_while_running_and_sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let topo = dir.path().join("mem.toml");
    write(&topo, "[[device]]\nname = \"p0\"\nkind = \"port\"\n[[device]]\nname = \"p1\"\nkind = \"port\"\n");
    let sock = dir.path().join("mem.sock");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut child = Command::new(BIN)
        .args(["run", "--status-interval", "0", "--prometheus", &addr.to_string(), "--stats-socket"])
        .arg(&sock)
        .arg(&topo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_engine(&sock, &mut child);

    let (code, text) = stats(&sock, &[]);
    assert_eq!(code, Some(0));
    assert!(text.contains("p0") && text.contains("p1") && text.contains("rx_pkts"), "{text}");
    let (code, json) = stats(&sock, &["--json"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["workers"], 1);
    assert_eq!(v["devices"].as_array().unwrap().len(), 2);
    let (_, prom) = stats(&sock, &["--prometheus"]);
    assert!(prom.contains("superpacket_device_rx_packets{device=\"p0\",kind=\"port\"} 0"), "{prom}");

    let mut http = std::net::TcpStream::connect(addr).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    http.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert!(body.contains("superpacket_engine_workers 1"), "{body}");

    // A second engine on the same socket is refused while the first runs.
    let second =
        Command::new(BIN).args(["run", "--duration", "1", "--stats-socket"]).arg(&sock).arg(&topo).output().unwrap();
    assert_eq!(second.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another engine"));

    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stopping (SIGTERM)"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("p0"), "final counters printed");
    assert!(!sock.exists());
    let (code, _) = stats(&sock, &[]);
    assert_eq!(code, Some(2), "no engine: stats fails with exit 2");
}

#[test]
fn bad_invocations_exit_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("x.sock");
    let run = |args: &[&str], topo: Option<&str>| {
        let path = dir.path().join("t.toml");
        if let Some(t) = topo {
            write(&path, t);
        }
        let out = Command::new(BIN)
            .arg("run")
            .args(args)
            .arg("--stats-socket")
            .arg(&sock)
            .arg(if topo.is_some() { path } else { dir.path().join("missing.toml") })
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&[], None);
    assert_eq!(code, Some(2));
    assert!(err.contains("missing.toml"), "{err}");

    let (code, err) = run(&[], Some("[[device]]\nname = \"p\"\nkind = \"port\"\ncolour = 1\n"));
    assert_eq!(code, Some(2));
    assert!(err.contains("line 4"), "{err}");

    let (code, err) = run(&["--mode", "fast"], Some("[[device]]\nname = \"p\"\nkind = \"port\"\n"));
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown mode"), "{err}");

    let (code, err) = run(
        &[],
        Some(
            "[[device]]\nname = \"p\"\nkind = \"port\"\ndriver = { kind = \"tap\", name = \"sp0\", offloads = [\"tso9\"] }\n",
        ),
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("line 4") && err.contains("tso9"), "{err}");
}

#[test]
fn nat_and_routing_topologies_run_with_several_workers() {
    // They share NAT's connection table and the neighbour table
    // (docs/topology.md, "NAT and routing with several workers").
    let dir = tempfile::tempdir().unwrap();
    let routed = "[[device]]\nname = \"p\"\nkind = \"port\"\naddresses = [\"10.0.0.1/24\"]\n";
    let nat = format!("{routed}[[nat]]\ntype = \"masquerade\"\nout = \"p\"\n");
    for (name, topo) in [("routed", routed.to_string()), ("nat", nat)] {
        let path = dir.path().join(format!("{name}.toml"));
        write(&path, &topo);
        let out = Command::new(BIN)
            .args(["run", "--workers", "2", "--duration", "0.2", "--stats-socket"])
            .arg(dir.path().join(format!("{name}.sock")))
            .arg(&path)
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(stdout.contains("2 worker(s)"), "{name}: {stdout}");
    }
}
