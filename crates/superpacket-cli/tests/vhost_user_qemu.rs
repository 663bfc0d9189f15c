//! A QEMU guest on a vhost-user port of `superpacket run`: QEMU 7.2 under
//! TCG with `-netdev vhost-user` and a virtio-net-pci device (checksum
//! offload both ways, host and guest TSO4/TSO6, mergeable receive
//! buffers), booting a Debian kernel and a busybox initramfs. The engine
//! bridges the port to a TAP whose far side is in a namespace of this test.
//! From inside the guest: the virtio feature bits the driver negotiated
//! (sysfs), kernel TCP (TSO superpackets) and UDP with `UDP_SEGMENT`
//! (tests/data/qemu_guest_net.c, compiled statically into the initramfs),
//! each checked in the namespace byte for byte (length and FNV-1a hash).
//!
//! Under TCG, QEMU 7.2 needs `vectors=0` on the device (with MSI-X it
//! crashes starting a vhost-user device), and the port's relay for QEMU's
//! early `SET_VRING_ENABLE` (docs/topology.md, "A QEMU guest").
//!
//! `scripts/qemu-guest.sh` (run by scripts/test.sh) installs QEMU, busybox
//! and gcc and fetches the kernel. Without them the test fails saying so,
//! unless `SUPERPACKET_SKIP_QEMU=1` (then it reports itself skipped).

mod common;

use common::engine::{Running, counter, port_bridged_to_tap};
use common::qemu::{GuestKernel, Initramfs, Qemu, VIRTIO_NET_MODULES, compile_static};
use common::{fnv1a, privileged, quiet_ns};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The guest kernel if QEMU and the kernel are there (see the module
/// documentation); otherwise panics saying how to get them, or reports the
/// test skipped with `SUPERPACKET_SKIP_QEMU=1`.
fn qemu_available(test: &str) -> Option<GuestKernel> {
    let qemu = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("qemu-system-x86_64").is_file()));
    let why = match (qemu, GuestKernel::find()) {
        (true, Ok(kernel)) => return Some(kernel),
        (false, _) => "qemu-system-x86_64 is not installed".to_string(),
        (true, Err(e)) => e,
    };
    if std::env::var("SUPERPACKET_SKIP_QEMU").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED {test}: {why} (SUPERPACKET_SKIP_QEMU=1)");
        return None;
    }
    panic!("{test}: {why}: run scripts/qemu-guest.sh (scripts/test.sh does), or set SUPERPACKET_SKIP_QEMU=1 to skip");
}

/// One `SPGUEST <mode> sent=N fnv=HEX` line of the console: (N, hash).
fn guest_result(console: &str, mode: &str) -> (usize, u64) {
    let prefix = format!("SPGUEST {mode} ");
    // Firmware escape sequences may precede a line's text on the console.
    let line = console
        .lines()
        .find_map(|l| l.find(&prefix).map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("no `{prefix}` line on the console:\n{console}"));
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("guest {mode}: {line}"))
            .to_string()
    };
    (field("sent=").parse().unwrap(), u64::from_str_radix(&field("fnv="), 16).unwrap())
}

/// The virtio feature bits the guest driver negotiated, from the
/// `SPGUEST features <bits>` line (sysfs prints bit 0 first).
fn guest_features(console: &str) -> u64 {
    let bits = console
        .lines()
        .find_map(|l| l.split_once("SPGUEST features ").map(|(_, bits)| bits))
        .unwrap_or_else(|| panic!("no features line on the console:\n{console}"))
        .trim();
    bits.chars().take(64).enumerate().filter(|(_, c)| *c == '1').fold(0, |acc, (i, _)| acc | (1u64 << i))
}

/// The guest's `/init`: load the virtio-net modules, print the features,
/// address eth0, run the helper for TCP and UDP GSO, power off.
fn init_script(tcp_bytes: usize) -> String {
    let insmod: String = VIRTIO_NET_MODULES
        .iter()
        .map(|m| format!("insmod /lib/modules/{}.ko\n", m.rsplit('/').next().unwrap()))
        .collect();
    format!(
        "#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
{insmod}echo \"SPGUEST features $(cat /sys/bus/virtio/devices/virtio0/features)\"
ip link set eth0 up
ip addr add {GUEST}/24 dev eth0
/bin/qemu_guest_net tcp {NS} {TCP_PORT} {tcp_bytes}
/bin/qemu_guest_net udp {NS} {UDP_PORT} {UDP_GSO} {UDP_PER_SEND} {UDP_SENDS}
echo SPGUEST done
poweroff -f
"
    )
}

const NS: &str = "10.98.0.1";
const GUEST: &str = "10.98.0.2";
const TCP_PORT: u16 = 5001;
const UDP_PORT: u16 = 5002;
const UDP_GSO: usize = 1400;
const UDP_PER_SEND: usize = 20 * UDP_GSO;
const UDP_SENDS: usize = 16;

/// Everything the guest needs in one initramfs.
fn initramfs(kernel: &GuestKernel, helper: &Path, tcp_bytes: usize) -> Vec<u8> {
    let mut fs = Initramfs::default();
    for d in ["bin", "dev", "proc", "sys", "lib", "lib/modules"] {
        fs.dir(d);
    }
    fs.copy("bin/busybox", 0o755, Path::new("/bin/busybox"));
    fs.copy("bin/qemu_guest_net", 0o755, helper);
    for m in VIRTIO_NET_MODULES {
        let name = m.rsplit('/').next().unwrap();
        fs.copy(&format!("lib/modules/{name}.ko"), 0o644, &kernel.modules.join(format!("{m}.ko")));
    }
    fs.file("init", 0o755, init_script(tcp_bytes).as_bytes());
    fs.finish()
}

/// The QEMU command line (docs/topology.md shows the same).
fn qemu_args(kernel: &Path, initrd: &Path, socket: &Path) -> Vec<String> {
    let device = "virtio-net-pci,netdev=n0,romfile=,vectors=0,mac=52:54:00:5e:00:02,csum=on,guest_csum=on,\
                  host_tso4=on,host_tso6=on,guest_tso4=on,guest_tso6=on,mrg_rxbuf=on";
    [
        "-accel",
        "tcg",
        "-m",
        "512",
        "-nographic",
        "-nodefaults",
        "-no-reboot",
        "-serial",
        "stdio",
        "-kernel",
        &kernel.display().to_string(),
        "-initrd",
        &initrd.display().to_string(),
        "-append",
        "console=ttyS0 quiet panic=-1",
        "-object",
        "memory-backend-memfd,id=mem,size=512M,share=on",
        "-numa",
        "node,memdev=mem",
        "-chardev",
        &format!("socket,id=c0,path={}", socket.display()),
        "-netdev",
        "vhost-user,id=n0,chardev=c0",
        "-device",
        device,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn a_qemu_guest_sends_kernel_tcp_and_udp_gso_through_a_vhost_user_port_to_a_tap() {
    const TEST: &str = "a_qemu_guest_sends_kernel_tcp_and_udp_gso_through_a_vhost_user_port_to_a_tap";
    if !privileged(TEST) {
        return;
    }
    let Some(kernel) = qemu_available(TEST) else { return };
    let dir = tempfile::tempdir().unwrap();
    let helper = dir.path().join("qemu_guest_net");
    compile_static(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/qemu_guest_net.c"), &helper);
    const TCP_BYTES: usize = 4 << 20;
    let initrd = dir.path().join("initrd.cpio");
    std::fs::write(&initrd, initramfs(&kernel, &helper, TCP_BYTES)).unwrap();

    let sock = dir.path().join("vm.sock");
    let ns = quiet_ns("spvq");
    let tap = format!("spvq{}", std::process::id() % 100_000);
    let driver = format!(r#"{{ kind = "vhost-user", socket = "{}" }}"#, sock.display());
    let topology = port_bridged_to_tap("vm", &driver, &tap, ns.name());
    let engine = Running::start(&topology);
    ns.add_addr(&tap, &format!("{NS}/24")).unwrap();

    // The namespace's receivers: the whole TCP stream; UDP datagrams until
    // the guest's count (sent on `want_udp`) arrived or 10 s after it.
    let tcp = ns.enter_scoped(|| std::net::TcpListener::bind((NS, TCP_PORT)).unwrap()).unwrap();
    let udp = ns.enter_scoped(|| std::net::UdpSocket::bind((NS, UDP_PORT)).unwrap()).unwrap();
    let tcp_rx = common::receive_one_tcp_stream(tcp, Duration::from_secs(60));
    let (want_udp, wanted) = mpsc::channel::<usize>();
    let udp_rx = std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let (mut got, mut datagrams, mut buf) = (Vec::new(), 0usize, vec![0u8; 65536]);
        let mut deadline: Option<(usize, Instant)> = None;
        let t0 = Instant::now();
        loop {
            if let Ok((n, _)) = udp.recv_from(&mut buf) {
                got.extend_from_slice(&buf[..n]);
                datagrams += 1;
            }
            if deadline.is_none()
                && let Ok(n) = wanted.try_recv()
            {
                deadline = Some((n, Instant::now() + Duration::from_secs(10)));
            }
            let done = match deadline {
                Some((n, until)) => got.len() >= n || Instant::now() > until,
                None => t0.elapsed() > Duration::from_secs(120),
            };
            if done {
                return (got, datagrams);
            }
        }
    });

    let mut qemu = Qemu::start(&qemu_args(&kernel.vmlinuz, &initrd, &sock), &dir.path().join("console.txt"));
    let console = qemu.wait_for("SPGUEST done", Duration::from_secs(90));
    let status = qemu.wait_exit(Duration::from_secs(10));
    let console = console.unwrap_or_else(|e| panic!("{e}\nengine: {:#}", engine.stats()));
    assert!(status.is_some_and(|s| s.success()), "QEMU did not power off cleanly ({status:?}):\n{console}");

    // What the guest driver negotiated.
    let features = guest_features(&console);
    for (bit, name) in [
        (0, "CSUM"),
        (1, "GUEST_CSUM"),
        (7, "GUEST_TSO4"),
        (8, "GUEST_TSO6"),
        (11, "HOST_TSO4"),
        (12, "HOST_TSO6"),
        (15, "MRG_RXBUF"),
        (32, "VERSION_1"),
    ] {
        assert_ne!(features & (1 << bit), 0, "the guest did not negotiate {name}: {features:#x}\n{console}");
    }

    // Kernel TCP: every byte, in order.
    let (tcp_sent, tcp_hash) = guest_result(&console, "tcp");
    let tcp_got = tcp_rx.join().unwrap();
    assert_eq!(tcp_sent, TCP_BYTES, "{console}");
    assert_eq!(tcp_got.len(), tcp_sent, "TCP bytes received in the namespace");
    assert_eq!(fnv1a(&tcp_got), tcp_hash, "the TCP stream differs from what the guest sent");

    // UDP_SEGMENT: every datagram, in order.
    let (udp_sent, udp_hash) = guest_result(&console, "udp");
    want_udp.send(udp_sent).unwrap();
    let (udp_got, datagrams) = udp_rx.join().unwrap();
    assert_eq!(udp_sent, UDP_PER_SEND * UDP_SENDS, "{console}");
    assert_eq!(udp_got.len(), udp_sent, "UDP bytes received in the namespace ({datagrams} datagrams)");
    assert_eq!(datagrams, UDP_SENDS * UDP_PER_SEND / UDP_GSO, "one datagram per gso_size");
    assert_eq!(fnv1a(&udp_got), udp_hash, "the UDP datagrams differ from what the guest sent");

    let s = engine.stats();
    eprintln!(
        "guest features {features:#x}; from the guest: {} frames, {} superpackets; to the guest: {} frames; TAP: {} superpackets out",
        counter(&s, "vm", "driver.rx_frames"),
        counter(&s, "vm", "driver.rx_superpackets"),
        counter(&s, "vm", "driver.tx_frames"),
        counter(&s, "tap", "tx_superpackets"),
    );
    assert_eq!(counter(&s, "vm", "driver.protocol_errors"), 0, "{s:#}");
    assert_eq!(counter(&s, "vm", "driver.queue_stopped"), 0, "{s:#}");
    assert!(counter(&s, "vm", "driver.rx_superpackets") > 0, "the guest's TCP came as TSO superpackets: {s:#}");
    assert!(counter(&s, "tap", "tx_superpackets") > 0, "the TAP took them whole: {s:#}");
    assert_eq!(counter(&s, "tap", "segments_produced"), 0, "nothing segmented before the TAP: {s:#}");
}
