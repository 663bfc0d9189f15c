//! NAT and routing on several workers, live (issue 26 item 3):
//! `superpacket run --lab --workers 2` on the router examples
//! (`examples/live-qinq-nat.toml`, `live-router.toml`,
//! `live-router-nat.toml`, `live-tun-router.toml`), their labs made with
//! multi-queue TAPs/TUNs under namespace names of this test's own, and
//! kernel TCP connections from A to B whose data is echoed back: every
//! byte crosses the router (and NAT) in both directions, on connections
//! the kernel spreads over both workers by its flow hash (16 connections,
//! so that both get some: checked in the per-worker counters). Which
//! worker gets the reply direction of a connection is the kernel's choice:
//! a multi-queue TAP sends a flow it knows back into the queue that last
//! wrote it (its flow table, keyed by a symmetric hash), an AF_PACKET
//! fanout group hashes each packet on its own; so this test does not force
//! the two directions of a translated connection onto different workers.
//! The engine's unit tests (`device/tests_workers.rs`) do, deterministically.
//! The NAT router runs once more with `--pin-workers` (each worker on its
//! own CPU, as `bench live-peers` runs the engine).
//!
//! Needs root (fails with the reason otherwise, unless
//! `SUPERPACKET_SKIP_PRIVILEGED=1`, which skips). Only the namespaces and
//! links of the run's own lab are touched; `run --lab` removes them
//! however the run ends.

mod common;

use common::engine::Running;
use common::{fnv1a, privileged};

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use superpacket_engine::io::NetNs;

/// Connections per example: enough that both workers get some (each
/// direction of each is hashed by the kernel on its own).
const CONNECTIONS: u16 = 16;
/// Bytes each connection sends and gets back.
const BYTES: usize = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(10);

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)).unwrap()
}

/// The byte `i` of connection `conn`'s stream.
fn pattern(conn: u16, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8 ^ conn as u8).collect()
}

/// `CONNECTIONS` TCP connections from namespace `a` to an echo server on
/// `server` in `b` (ports from `base`), all at once: each sends
/// [`BYTES`] and must read them back unchanged. Returns the failures.
fn echo_from_a_to_b(a: &NetNs, b: &NetNs, server: IpAddr, base: u16) -> Vec<String> {
    let listeners: Vec<TcpListener> = (0..CONNECTIONS)
        .map(|i| b.enter_scoped(|| TcpListener::bind(SocketAddr::new(server, base + i))).unwrap().unwrap())
        .collect();
    std::thread::scope(|s| {
        for l in &listeners {
            s.spawn(move || -> std::io::Result<()> {
                let (mut c, _) = l.accept()?;
                c.set_read_timeout(Some(TIMEOUT))?;
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = c.read(&mut buf)?;
                    if n == 0 {
                        return c.shutdown(Shutdown::Write);
                    }
                    c.write_all(&buf[..n])?;
                }
            });
        }
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|i| {
                s.spawn(move || -> Result<(), String> {
                    let addr = SocketAddr::new(server, base + i);
                    let c = a
                        .enter_scoped(|| TcpStream::connect_timeout(&addr, TIMEOUT))
                        .map_err(|e| e.to_string())?
                        .map_err(|e| format!("connect {addr}: {e}"))?;
                    c.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
                    let sent = pattern(i, BYTES);
                    let mut w = c.try_clone().map_err(|e| e.to_string())?;
                    let back = std::thread::scope(|s| {
                        let writer = s.spawn(|| w.write_all(&sent).and_then(|()| w.shutdown(Shutdown::Write)));
                        let mut back = Vec::with_capacity(BYTES);
                        let read = (&c).read_to_end(&mut back);
                        (writer.join().unwrap(), read, back)
                    });
                    match back {
                        (Err(e), _, _) => Err(format!("{addr}: write: {e}")),
                        (_, Err(e), back) => Err(format!("{addr}: read after {} bytes: {e}", back.len())),
                        (Ok(()), Ok(_), back) if back.len() != BYTES || fnv1a(&back) != fnv1a(&sent) => {
                            Err(format!("{addr}: {} bytes back, digest differs: {}", back.len(), back != sent))
                        }
                        _ => Ok(()),
                    }
                })
            })
            .collect();
        clients.into_iter().filter_map(|h| h.join().unwrap().err()).collect()
    })
}

#[test]
fn nat_and_routing_on_two_workers_carry_connections_both_ways() {
    if !privileged("nat_and_routing_on_two_workers_carry_connections_both_ways") {
        return;
    }
    let tag = format!("spnw{}", std::process::id() % 100_000);
    // (example, B's host address, whether it NATs, whether the workers are
    // pinned to CPUs as `bench live-peers` runs them)
    let cases = [
        ("live-qinq-nat.toml", "10.72.0.2", true, false),
        ("live-router-nat.toml", "10.72.0.2", true, false),
        ("live-router.toml", "10.72.0.2", false, false),
        ("live-tun-router.toml", "10.74.0.2", false, false),
        ("live-router-nat.toml", "10.72.0.2", true, true),
    ];
    for (i, (name, host_b, nat, pinned)) in cases.into_iter().enumerate() {
        // Own namespace names; TAPs and TUNs multi-queue (one queue per worker).
        let topo = example(name)
            .replace("\"sp-lab-", &format!("\"{tag}-"))
            .replace("[[lab.link]]\nkind = \"tap\"\n", "[[lab.link]]\nkind = \"tap\"\nmulti_queue = true\n")
            .replace("[[lab.link]]\nkind = \"tun\"\n", "[[lab.link]]\nkind = \"tun\"\nmulti_queue = true\n");
        assert!(topo.contains("multi_queue = true"), "{name}: its lab has TAPs or TUNs");
        // `run --lab`: the lab is made for the run and removed when it ends.
        let args: &[&str] =
            if pinned { &["--lab", "--workers", "2", "--pin-workers"] } else { &["--lab", "--workers", "2"] };
        let run = Running::start_with(&topo, args);
        let (a, b) = (NetNs::attach(&format!("{tag}-a")).unwrap(), NetNs::attach(&format!("{tag}-b")).unwrap());
        let failures = echo_from_a_to_b(&a, &b, host_b.parse().unwrap(), 5601 + 20 * i as u16);
        assert!(failures.is_empty(), "{name}: {failures:?}\n{}", run.stats());
        // Workers publish their counters every 100 ms: wait for the last.
        std::thread::sleep(Duration::from_millis(300));
        let s = run.stats();
        assert_eq!(s["workers"], 2, "{name}");
        let per_worker: Vec<u64> =
            s["worker_packets"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        eprintln!("{name}: per worker {per_worker:?}");
        assert!(per_worker.iter().all(|&n| n >= 10), "{name}: both workers carried traffic: {per_worker:?}");
        let table = |t: &str| s["tables"].as_array().unwrap().iter().find(|x| x["name"] == t).cloned();
        if nat {
            let ct = table("conntrack").unwrap();
            assert!(ct["events"]["created"].as_u64().unwrap() >= u64::from(CONNECTIONS), "{name}: {ct}");
            assert_eq!(ct["events"]["table_full"], 0, "{name}: {ct}");
        }
        let (code, err) = run.stop();
        assert_eq!(code, Some(0), "{name}: {err}");
    }
}
