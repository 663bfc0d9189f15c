//! Issue 8's last point on the AF_PACKET port: a lone small packet sent
//! with a virtio_net_hdr asking the kernel to finish the checksum
//! (`NEEDS_CSUM`, the offload) against a fully formed frame whose checksum
//! the sender completed in software (header flags 0), per `sendmsg` and in
//! `sendmmsg` batches of 32. The receiver is the kernel's UDP stack in
//! another namespace behind a veth (every datagram must arrive: a wrong
//! checksum would be dropped).
//!
//! # Measured
//!
//! `cargo test --release --test af_packet_tx_csum -- --ignored --nocapture`
//! (2 vCPU, kernel 6.18, other jobs running; 64-byte UDP payloads; medians
//! of 9 interleaved rounds of 20000 frames; four runs):
//!
//! | path | offload (`NEEDS_CSUM`) | software checksum, flags 0 | ratio |
//! |---|---|---|---|
//! | `sendmsg` per frame | 692-777 k frames/s | 592-711 k frames/s | 0.86-0.92x |
//! | `sendmmsg` × 32 | 838-877 k frames/s | 734-808 k frames/s | 0.84-0.95x |
//!
//! The software checksum loses on this path: the sender's CPU per frame
//! grows by 120-145 ns, far more than the user-space checksum of 64 bytes
//! (about 10 ns): the system call dominates, and the kernel does not compute
//! a partial checksum it hands to a veth, while a complete one costs the
//! receiving side its verification (the veth delivers in the sender's
//! softirq). Unlike a virtio ring (vhost-user), where the indirect form
//! is what the offload costs, the AF_PACKET port has nothing to save by
//! completing the checksum itself, so it keeps the offload for every packet.

mod common;

use common::{privileged, quiet_ns};
use std::time::{Duration, Instant};
use superpacket::packet::ChecksumState;
use superpacket::packet::virtio::{F_NEEDS_CSUM, VirtioNetHdr};
use superpacket::traffic::{Addrs, Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};
use superpacket_cli::bench::median;
use superpacket_engine::io::cputime::thread_cpu_seconds;
use superpacket_engine::io::packet_socket::FrameSource;
use superpacket_engine::io::{PacketSocket, PacketSocketConfig, VethPair};

/// Frames given as (header, parts) pairs.
struct Batch<'a>(&'a [(VirtioNetHdr, Vec<u8>)]);

impl<'a> FrameSource<'a> for Batch<'a> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn header(&self, i: usize) -> VirtioNetHdr {
        self.0[i].0
    }
    fn parts(&self, i: usize, part: &mut dyn FnMut(&'a [u8])) {
        let v: &'a [(VirtioNetHdr, Vec<u8>)] = self.0;
        part(&v[i].1);
    }
}

#[test]
#[ignore = "measurement: cargo test --release --test af_packet_tx_csum -- --ignored --nocapture"]
fn af_packet_offload_vs_software_checksum_measurement() {
    if !privileged("af_packet_offload_vs_software_checksum_measurement") {
        return;
    }
    let ns_a = quiet_ns("sp-pvaf");
    let ns_b = quiet_ns("sp-pvaf");
    let _veth = VethPair::create(&ns_a, "pva0", &ns_b, "pvb0").unwrap();
    ns_a.link_up("pva0").unwrap();
    ns_b.link_up("pvb0").unwrap();
    ns_b.add_addr("pvb0", "10.78.0.2/24").unwrap();
    let mac_b = ns_b.read_sysfs("pvb0", "address").unwrap();
    let mac_b = superpacket_engine::device::topology::parse_mac(mac_b.trim()).unwrap();
    let rx = ns_b
        .enter_scoped(|| {
            let s = std::net::UdpSocket::bind("10.78.0.2:7777").unwrap();
            s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
            s
        })
        .unwrap();
    let mut tx = PacketSocket::open_in(&ns_a, "pva0", &PacketSocketConfig::default()).unwrap();
    let mut spec = FlowSpec::new(Transport::Udp, false, 1);
    spec.dst_mac = mac_b;
    spec.src_mac = MacAddr([0x02, 0x5e, 0, 0, 0, 0x21]);
    spec.addrs = Addrs::V4 { src: "10.78.0.1".parse().unwrap(), dst: "10.78.0.2".parse().unwrap() };
    spec.dst_port = 7777;
    // Offloaded frames come from port 6000, software-checksummed ones from 6001.
    spec.src_port = 6000;
    let pkt = Flow::new(spec).superpacket(64, 9000, TcpFlags::empty()).unwrap();
    let ChecksumState::Partial { start, offset } = pkt.meta.csum else { panic!("partial") };
    let partial = pkt.to_vec();
    spec.src_port = 6001;
    let sw_partial = Flow::new(spec).superpacket(64, 9000, TcpFlags::empty()).unwrap().to_vec();
    let offload_hdr =
        VirtioNetHdr { flags: F_NEEDS_CSUM, csum_start: start, csum_offset: offset, ..Default::default() };
    let mut scratch = sw_partial.clone();

    // The receiver drains in its own thread and counts.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let got = std::sync::Arc::new([std::sync::atomic::AtomicU64::new(0), std::sync::atomic::AtomicU64::new(0)]);
    let (stop2, got2) = (stop.clone(), got.clone());
    let receiver = std::thread::spawn(move || {
        let mut b = [0u8; 2048];
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((_, from)) = rx.recv_from(&mut b) {
                let i = usize::from(from.port() == 6001);
                got2[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });

    let n = 20_000u64;
    let mut sent = 0u64;
    // mode 0: offload, per sendmsg; 1: software checksum, per sendmsg;
    // 2: offload, sendmmsg x 32; 3: software checksum, sendmmsg x 32.
    let mut secs: [Vec<f64>; 4] = Default::default();
    let mut cpu: [Vec<f64>; 4] = Default::default();
    let offload_batch: Vec<(VirtioNetHdr, Vec<u8>)> = (0..32).map(|_| (offload_hdr, partial.clone())).collect();
    for round in 0..10 {
        for mode in 0..4 {
            let t0 = Instant::now();
            let c0 = thread_cpu_seconds();
            match mode {
                0 => {
                    for _ in 0..n {
                        tx.send(&offload_hdr, &[&partial]).unwrap();
                    }
                }
                1 => {
                    for _ in 0..n {
                        // The software checksum is part of the cost.
                        scratch.copy_from_slice(&sw_partial);
                        superpacket::csum::complete_partial(&mut scratch, start as usize, offset as usize, true)
                            .unwrap();
                        tx.send(&VirtioNetHdr::default(), &[&scratch]).unwrap();
                    }
                }
                _ => {
                    let mut batch: Vec<(VirtioNetHdr, Vec<u8>)> = offload_batch.clone();
                    for _ in 0..n / 32 {
                        if mode == 3 {
                            for (h, f) in batch.iter_mut() {
                                f.copy_from_slice(&sw_partial);
                                superpacket::csum::complete_partial(f, start as usize, offset as usize, true).unwrap();
                                *h = VirtioNetHdr::default();
                            }
                        }
                        let mut errors = 0;
                        tx.send_batch(&Batch(&batch), |_, r| errors += usize::from(r.is_err()));
                        assert_eq!(errors, 0);
                    }
                }
            }
            let per = if mode < 2 { n } else { n / 32 * 32 };
            sent += per;
            if round > 0 {
                secs[mode].push(t0.elapsed().as_secs_f64() / per as f64);
                cpu[mode].push((thread_cpu_seconds() - c0) / per as f64);
            }
        }
    }
    std::thread::sleep(Duration::from_millis(700));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    receiver.join().unwrap();
    let received = [0, 1].map(|i| got[i].load(std::sync::atomic::Ordering::Relaxed));
    let names = ["offload, sendmsg", "sw csum, sendmsg", "offload, sendmmsg x32", "sw csum, sendmmsg x32"];
    for m in 0..4 {
        println!(
            "{:<24} {:>10.0} frames/s  sender CPU {:>6.0} ns/frame",
            names[m],
            1.0 / median(&secs[m]),
            median(&cpu[m]) * 1e9
        );
    }
    println!("sw csum / offload, per sendmsg: {:.3}x frames/s", median(&secs[0]) / median(&secs[1]));
    println!("sw csum / offload, sendmmsg x32: {:.3}x frames/s", median(&secs[2]) / median(&secs[3]));
    println!("received {} offloaded and {} software-checksummed of {sent} datagrams", received[0], received[1]);
    // The receiving socket overflows at times; a bad checksum would drop every datagram of its kind.
    assert!(received.iter().all(|&n| n > sent / 20), "the kernel accepted both kinds: {received:?}");
}
