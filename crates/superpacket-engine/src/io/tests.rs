//! Tests of the real-I/O primitives. Most need root (namespaces, TAP); they
//! start with `require_privileges()`.

use super::netns::{cleanup_stale, create_named, delete_named, format_mac};
use super::tap::*;
use super::*;
use std::time::{Duration, Instant};
use superpacket::packet::Packet;
use superpacket::packet::virtio::{F_NEEDS_CSUM, GSO_NONE, GSO_TCPV4, VirtioNetHdr};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::tcp::TcpFlags;

fn ns_exists(name: &str) -> bool {
    std::path::Path::new(&format!("/run/netns/{name}")).exists()
}

fn tcp_frame(payload: usize) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Tcp, false, 0);
    spec.tcp_timestamps = false;
    Flow::new(spec).frame(payload, TcpFlags::PSH).unwrap()
}

fn recv_cfg() -> PacketSocketConfig {
    PacketSocketConfig { recv_timeout: Some(Duration::from_secs(2)), ..PacketSocketConfig::default() }
}

// ------------------------------------------------------------ unprivileged

#[test]
fn names_are_checked_before_any_command() {
    let long = TapDevice::open(&TapConfig::named("a-very-long-tap-name")).unwrap_err();
    assert!(matches!(long, IoError::InvalidName { .. }), "{long}");
    let bad = TapDevice::open(&TapConfig::named("tap;rm")).unwrap_err();
    assert!(matches!(bad, IoError::InvalidName { .. }), "{bad}");
    assert!(matches!(NetNs::create("-x").unwrap_err(), IoError::InvalidName { .. }));
    assert!(matches!(NetNs::create("a/b").unwrap_err(), IoError::InvalidName { .. }));
    let hdr = TapDevice::open(&TapConfig { vnet_hdr_len: 11, ..TapConfig::default() }).unwrap_err();
    assert!(matches!(hdr, IoError::Unsupported(_)), "{hdr}");
}

#[test]
fn errors_name_the_syscall_and_errno() {
    let e = IoError::Syscall {
        call: "ioctl(TUNSETIFF)",
        what: "sptap0".into(),
        source: std::io::Error::from_raw_os_error(libc::EPERM),
    };
    let text = e.to_string();
    assert!(text.contains("ioctl(TUNSETIFF)") && text.contains("sptap0") && text.contains("not permitted"), "{text}");
    assert_eq!(e.raw_os_error(), Some(libc::EPERM));
    assert!(!e.is_would_block());
    let again =
        IoError::Syscall { call: "recvmsg", what: "x".into(), source: std::io::Error::from_raw_os_error(libc::EAGAIN) };
    assert!(again.is_would_block());
}

#[test]
fn tap_config_flags() {
    let cfg = TapConfig { napi_frags: true, multi_queue: true, ..TapConfig::default() };
    assert_eq!(
        cfg.iff_flags::<Tap>(),
        IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_NAPI | IFF_NAPI_FRAGS | IFF_MULTI_QUEUE
    );
    assert_eq!(TapConfig::default().iff_flags::<Tap>(), 0x5002);
    assert_eq!(format_mac([0x02, 0x5e, 0, 0, 0xab, 0xcd]), "02:5e:00:00:ab:cd");
}

// ------------------------------------------------------------ namespaces

#[test]
fn netns_is_entered_and_deleted_on_drop() {
    if !require_privileges() {
        return;
    }
    let ns = NetNs::create("sptest").unwrap();
    let name = ns.name().to_string();
    assert!(name.starts_with(&format!("sptest-{}-", std::process::id())));
    assert!(ns_exists(&name));
    let tap = TapDevice::open_in(&ns, &TapConfig::named("sptestt0")).unwrap();
    // Visible inside the namespace, not on the host.
    assert!(ns.enter_scoped(|| super::sys::if_index("sptestt0")).unwrap().is_ok());
    assert!(super::sys::if_index("sptestt0").is_err());
    assert!(ns.link_exists("sptestt0").unwrap());
    drop(tap);
    drop(ns);
    assert!(!ns_exists(&name));
}

#[test]
fn netns_is_deleted_on_panic() {
    if !require_privileges() {
        return;
    }
    let name = std::sync::Mutex::new(String::new());
    let result = std::panic::catch_unwind(|| {
        let ns = NetNs::create("sptest").unwrap();
        *name.lock().unwrap() = ns.name().to_string();
        ns.enter_scoped(|| panic!("inside the namespace")).unwrap();
    });
    assert!(result.is_err());
    let name = name.into_inner().unwrap();
    assert!(!name.is_empty() && !ns_exists(&name), "{name} left behind");
}

#[test]
fn cleanup_stale_removes_only_namespaces_of_dead_processes() {
    if !require_privileges() {
        return;
    }
    // Created first: its own once-per-prefix cleanup runs before the stale one exists.
    let live = NetNs::create("spstale").unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!("spstale-{dead}-0");
    let odd = format!("spstale-{dead}");
    for name in [&stale, &odd] {
        create_named(name).unwrap();
    }
    let removed = cleanup_stale("spstale");
    let (stale_left, odd_left) = (ns_exists(&stale), ns_exists(&odd));
    for name in [&stale, &odd] {
        let _ = delete_named(name);
    }
    assert_eq!(removed, vec![stale.clone()]);
    assert!(!stale_left);
    assert!(odd_left, "names of another shape are never touched");
    assert!(ns_exists(live.name()), "a live process's namespace must stay");
}

#[test]
fn veth_pair_addresses_sysfs_and_frames() {
    if !require_privileges() {
        return;
    }
    let a = NetNs::create("sptest").unwrap();
    let b = NetNs::create("sptest").unwrap();
    b.disable_ipv6().unwrap();
    a.disable_ipv6().unwrap();
    let veth = VethPair::create(&a, "spva", &b, "spvb").unwrap();
    a.set_mac("spva", [0x02, 0x5e, 0, 0, 0, 1]).unwrap();
    b.set_mac("spvb", [0x02, 0x5e, 0, 0, 0, 2]).unwrap();
    a.add_addr("spva", "10.250.0.1/30").unwrap();
    a.link_up("spva").unwrap();
    b.link_up("spvb").unwrap();
    b.write_sysfs("spvb", "gro_flush_timeout", "20000").unwrap();
    assert_eq!(b.read_sysfs("spvb", "gro_flush_timeout").unwrap(), "20000");
    a.set_offloads("spva", &[("tso", "off")]).unwrap();
    assert!(a.offloads("spva").unwrap().contains("tcp-segmentation-offload: off"));

    let mut tx = PacketSocket::open_in(&a, "spva", &recv_cfg()).unwrap();
    let mut rx = PacketSocket::open_in(&b, "spvb", &recv_cfg()).unwrap();
    let frame = tcp_frame(200);
    let (head, tail) = frame.split_at(30);
    let mut buf = vec![0u8; 65536];
    // A veth delivers through the CPU's shared backlog queue, which the
    // tests running beside this one (floods through their own veths) can
    // fill for a moment, dropping the frame: send again, a few times.
    rx.set_recv_timeout(Some(Duration::from_millis(250))).unwrap();
    let mut received = None;
    for attempt in 1..=8 {
        assert_eq!(tx.send(&VirtioNetHdr::default(), &[head, tail]).unwrap(), frame.len());
        match rx.recv(&mut buf) {
            Ok(got) => {
                received = Some(got);
                break;
            }
            Err(e) if e.is_would_block() => eprintln!("attempt {attempt}: the frame did not arrive"),
            Err(e) => panic!("receive on spvb: {e}"),
        }
    }
    let (hdr, len, pkttype) = received.expect("the frame arrived in none of 8 sends");
    assert_eq!(&buf[..len], &frame[..]);
    assert_eq!(pkttype, PktType::Host);
    eprintln!("veth receive header: {hdr:?}");
    // The sender's socket only takes incoming packets: its own frame is not there.
    tx.set_recv_timeout(Some(Duration::from_millis(20))).unwrap();
    assert!(tx.recv(&mut buf).unwrap_err().is_would_block());
    assert_eq!(veth.namespaces(), (a.name(), b.name()));
}

// ------------------------------------------------------------ TAP

#[test]
fn tap_features_header_size_and_offload_negotiation() {
    if !require_privileges() {
        return;
    }
    let ns = NetNs::create("sptest").unwrap();
    let mut tap = TapDevice::open_in(&ns, &TapConfig { napi: true, ..TapConfig::named("sptap0") }).unwrap();
    let features = tap.features().unwrap();
    eprintln!("TUNGETFEATURES = {features:#x}");
    let want = (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | IFF_NAPI | IFF_NAPI_FRAGS | IFF_MULTI_QUEUE) as u32;
    assert_eq!(features & want, want);
    assert_eq!(tap.vnet_hdr_len().unwrap(), 10);
    tap.set_vnet_hdr_len(12).unwrap();
    assert_eq!(tap.vnet_hdr_len().unwrap(), 12);
    assert!(tap.set_vnet_hdr_len(11).is_err());

    let all = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_USO4 | TUN_F_USO6;
    tap.set_offload(all).unwrap();
    tap.set_offload(all | TUN_F_TSO_ECN).unwrap();
    let err = tap.set_offload(all | 0x200).unwrap_err();
    assert!(matches!(err, IoError::OffloadRejected { flags, .. } if flags == all | 0x200), "{err}");
    assert_eq!(tap.negotiate_offload(all | 0x200).unwrap(), all);
    assert_eq!(tap.negotiate_offload(0).unwrap(), 0);
}

#[test]
fn tap_multi_queue_attach_by_name() {
    if !require_privileges() {
        return;
    }
    let ns = NetNs::create("sptest").unwrap();
    let cfg = TapConfig { multi_queue: true, ..TapConfig::named("spmq0") };
    let q0 = TapDevice::open_in(&ns, &cfg).unwrap();
    let q1 = TapDevice::open_in(&ns, &cfg).unwrap();
    assert_eq!(q0.name(), q1.name());
}

/// TAP write -> AF_PACKET receive (incoming) and AF_PACKET send -> TAP read,
/// with both header sizes, vectored writes, nonblocking reads and poll.
#[test]
fn tap_and_packet_socket_round_trip() {
    if !require_privileges() {
        return;
    }
    let ns = NetNs::create("sptest").unwrap();
    ns.disable_ipv6().unwrap();
    let mut tap = TapDevice::open_in(&ns, &TapConfig { nonblocking: true, ..TapConfig::named("sptap0") }).unwrap();
    ns.set_mac("sptap0", [0x02, 0x5e, 0, 0, 0, 2]).unwrap();
    ns.link_up("sptap0").unwrap();
    let mut sock = PacketSocket::open_in(&ns, "sptap0", &recv_cfg()).unwrap();
    let mut buf = vec![0u8; 65536];

    // Empty nonblocking TAP: would block; poll times out.
    let t = Instant::now();
    assert!(!tap.poll_readable(Duration::from_millis(20)).unwrap());
    assert!(t.elapsed() >= Duration::from_millis(15));
    assert!(tap.read_packet(&mut buf).unwrap_err().is_would_block());

    for hdr_len in [10, 12] {
        tap.set_vnet_hdr_len(hdr_len).unwrap();
        let frame = tcp_frame(300);
        let parts: Vec<&[u8]> = frame.chunks(50).collect();
        assert_eq!(tap.write_packet_vectored(&VirtioNetHdr::default(), &parts).unwrap(), frame.len());
        let info = sock.recv_info(&mut buf).unwrap();
        assert_eq!(&buf[..info.len], &frame[..]);
        assert_eq!((info.pkttype, info.vlan), (PktType::Host, None));

        let out = tcp_frame(100);
        sock.send(&VirtioNetHdr::default(), &[&out]).unwrap();
        assert!(tap.poll_readable(Duration::from_secs(2)).unwrap());
        let (hdr, len) = tap.read_packet(&mut buf).unwrap();
        assert_eq!(&buf[..len], &out[..]);
        assert_eq!(hdr.gso_type, GSO_NONE);
    }

    // A too-small read buffer is reported, not silently cut.
    sock.send(&VirtioNetHdr::default(), &[&tcp_frame(1000)]).unwrap();
    assert!(tap.poll_readable(Duration::from_secs(2)).unwrap());
    assert!(matches!(tap.read_packet(&mut buf[..100]).unwrap_err(), IoError::Truncated { capacity: 100, .. }));
    // The receive timeout shows as "would block".
    sock.set_recv_timeout(Some(Duration::from_millis(10))).unwrap();
    assert!(sock.recv(&mut buf).unwrap_err().is_would_block());
    assert_eq!(sock.drain().unwrap(), 0);
}

/// What the TAP reader gets for a TCPv4 superpacket transmitted on the TAP:
/// with TSO accepted the superpacket whole (NEEDS_CSUM); with offloads 0,
/// MTU frames with complete checksums (docs/kernel-oracle.md section 4).
#[test]
fn tap_receives_superpackets_only_when_offload_accepted() {
    if !require_privileges() {
        return;
    }
    let ns = NetNs::create("sptest").unwrap();
    ns.disable_ipv6().unwrap();
    let mut tap = TapDevice::open_in(&ns, &TapConfig { nonblocking: true, ..TapConfig::named("sptap0") }).unwrap();
    ns.link_up("sptap0").unwrap();
    let mut sock = PacketSocket::open_in(&ns, "sptap0", &recv_cfg()).unwrap();
    let mut buf = vec![0u8; 70000];
    let mut spec = FlowSpec::new(Transport::Tcp, false, 0);
    spec.tcp_timestamps = false;
    let mut flow = Flow::new(spec);
    for offload in [TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6, 0] {
        tap.set_offload(offload).unwrap();
        let p: Packet = flow.superpacket(10 * 1448, 1448, TcpFlags::PSH).unwrap();
        let frame = p.to_vec();
        let hdr = VirtioNetHdr::from_meta(&p.meta, &frame, false).unwrap();
        sock.send(&hdr, &[&frame]).unwrap();
        let mut got = Vec::new();
        while tap.poll_readable(Duration::from_millis(30)).unwrap() {
            let (h, len) = tap.read_packet(&mut buf).unwrap();
            got.push((h, len));
        }
        eprintln!("offload {offload:#x}: {:?}", got.iter().map(|(h, l)| (*l, h.flags, h.gso_type)).collect::<Vec<_>>());
        if offload != 0 {
            assert_eq!(got.len(), 1);
            assert_eq!((got[0].0.gso_type, got[0].0.gso_size, got[0].0.flags), (GSO_TCPV4, 1448, F_NEEDS_CSUM));
            assert_eq!(got[0].1, frame.len());
        } else {
            assert_eq!(got.len(), 10);
            assert!(got.iter().all(|(h, l)| *l == 1502 && h.flags == 0 && h.gso_type == GSO_NONE));
        }
    }
}

#[test]
fn privileges_are_available_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(privileges_available(), Ok(()));
    }
}
