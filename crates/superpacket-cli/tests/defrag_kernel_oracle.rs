//! The Linux kernel as the reassembly oracle: fragment sets are written into
//! a TAP inside a test-created namespace whose address a UDP socket listens
//! on; what the socket receives is what the kernel reassembled (or passed).
//! superpacket's reassembler, fed the same frames, must deliver exactly the
//! same datagrams, and refuse the same ones.
//!
//! Root only. The namespace and the TAP are created here and deleted on every
//! exit path (RAII); no host interface or route is touched. Without root the
//! test fails with the reason, unless `SUPERPACKET_SKIP_PRIVILEGED=1`.

use std::net::UdpSocket;
use std::time::Duration;

use superpacket::offload::frag::{
    FragmentRequest, Fragmenter, Ipv6IdGenerator, ManualClock, ReasmConfig, Reassembler, Scope, Verdict,
    build_fragment, flatten,
};
use superpacket::packet::Packet;
use superpacket::packet::virtio::VirtioNetHdr;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::{MacAddr, TcpFlags};
use superpacket_engine::io::{NetNs, TapConfig, TapDevice, require_privileges};

const PORT: u16 = 4789;

struct Oracle {
    ns: NetNs,
    tap: TapDevice,
    mac: [u8; 6],
    sock4: UdpSocket,
    sock6: UdpSocket,
}

fn setup() -> Oracle {
    let ns = NetNs::create("spdefrag").expect("netns");
    let tap = TapDevice::open_in(&ns, &TapConfig::named("spdf0")).expect("tap");
    let mac = [0x02, 0x5e, 0, 0, 0, 2];
    ns.set_mac("spdf0", mac).unwrap();
    ns.sysctl("net.ipv6.conf.all.accept_dad", "0").ok();
    ns.sysctl("net.ipv6.conf.default.accept_dad", "0").ok();
    ns.link_up("spdf0").unwrap();
    ns.add_addr("spdf0", "10.94.0.2/24").unwrap();
    ns.add_addr_nodad("spdf0", "fd00:5e::2/64").unwrap();
    // The sender is a static neighbour, so nothing waits on ARP/ND (no reply is sent anyway).
    ns.add_neighbour("spdf0", "10.94.0.1", [0x02, 0x5e, 0, 0, 0, 0x01]).ok();
    let (sock4, sock6) = ns
        .enter_scoped(|| {
            let s4 = UdpSocket::bind(("10.94.0.2", PORT)).expect("bind v4");
            let s6 = UdpSocket::bind(("fd00:5e::2", PORT)).expect("bind v6");
            (s4, s6)
        })
        .unwrap();
    for s in [&sock4, &sock6] {
        s.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    Oracle { ns, tap, mac, sock4, sock6 }
}

impl Oracle {
    /// Writes the frames, then returns the payloads the socket received.
    fn run(&mut self, v6: bool, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        for f in frames {
            self.tap.write_packet(&VirtioNetHdr::default(), f).expect("tap write");
        }
        let sock = if v6 { &self.sock6 } else { &self.sock4 };
        let mut got = Vec::new();
        let mut buf = vec![0u8; 70000];
        while let Ok(n) = sock.recv(&mut buf) {
            got.push(buf[..n].to_vec());
        }
        got
    }
}

/// What superpacket delivers to the same socket: UDP payloads of complete
/// datagrams and unfragmented packets to the port.
fn ours(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut r = Reassembler::with_clock(ReasmConfig::default(), ManualClock::new(0));
    let mut out = Vec::new();
    let mut buf = Vec::new();
    for f in frames {
        let bytes = match r.push(Packet::from_frame(f), Scope::default()) {
            Ok(Verdict::Complete(d)) => {
                flatten(&d.packet, &mut buf);
                buf.clone()
            }
            Ok(Verdict::Pass(p)) => p.to_vec(),
            _ => continue,
        };
        let h = superpacket::wire::FrameHeaders::parse(&bytes).expect("delivered frames parse");
        out.push(h.payload_bytes(&bytes).to_vec());
    }
    out
}

fn datagram(v6: bool, index: u32, payload: usize, mac: [u8; 6]) -> Vec<u8> {
    let mut spec = FlowSpec::new(Transport::Udp, v6, index);
    spec.dont_frag = false;
    spec.dst_mac = MacAddr(mac);
    spec.dst_port = PORT;
    Flow::new(spec).frame(payload, TcpFlags::empty()).unwrap()
}

fn ident_of(v6: bool, frag: &[u8]) -> u32 {
    if v6 {
        u32::from_be_bytes(frag[14 + 44..14 + 48].try_into().unwrap())
    } else {
        u32::from(u16::from_be_bytes([frag[18], frag[19]]))
    }
}

/// The scenarios: (name, frames). Each uses its own flow (ports, IDs).
fn scenarios(v6: bool, mac: [u8; 6], fragmenter: &mut Fragmenter) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let mut idx = 100;
    let mut next = |payload: usize| {
        idx += 1;
        datagram(v6, idx, payload, mac)
    };
    let mut frag = |d: &[u8], mtu: usize| {
        let mut out = Vec::new();
        fragmenter.fragment(Packet::from_frame(d), &FragmentRequest::local(mtu), &mut out).unwrap();
        out.iter().map(Packet::to_vec).collect::<Vec<_>>()
    };
    let mut v = Vec::new();
    let d = next(12000);
    v.push(("in order", frag(&d, 1500)));
    let d = next(12001);
    let mut f = frag(&d, 1500);
    f.reverse();
    v.push(("reversed", f));
    let d = next(12002);
    let mut f = frag(&d, 1500);
    let dup = f[3].clone();
    f.insert(1, dup);
    v.push(("exact duplicate", f));
    let d = next(12003);
    let mut f = frag(&d, 1500);
    f.pop();
    v.push(("missing last", f));
    // Hand-made fragments (identification shared by all of them).
    let d = next(3000);
    let id = ident_of(v6, &frag(&d, 1500)[0]) ^ 0x55;
    let b = |o: usize, l: usize, m: bool| build_fragment(&d, o, l, m, id).unwrap();
    let total = d.len() - if v6 { 54 } else { 34 };
    v.push(("straddling overlap", vec![b(0, 1000, true), b(992, 1000, true), b(1992, total - 1992, false)]));
    let d = next(3001);
    let id = id.wrapping_add(1);
    let total = d.len() - if v6 { 54 } else { 34 };
    let b = |o: usize, l: usize, m: bool| build_fragment(&d, o, l, m, id).unwrap();
    v.push(("contained in a run", vec![b(0, 1600, true), b(800, 400, true), b(1600, total - 1600, false)]));
    v.push(("teardrop", vec![b(0, 1600, true), b(1592, total - 1592, false)]));
    let d = next(3002);
    let id = id.wrapping_add(1);
    let total = d.len() - if v6 { 54 } else { 34 };
    let b = |o: usize, l: usize, m: bool| build_fragment(&d, o, l, m, id).unwrap();
    let mut tiny: Vec<Vec<u8>> = (0..total / 64).map(|i| b(i * 64, 64, true)).collect();
    tiny.push(b(total / 64 * 64, total - total / 64 * 64, false));
    tiny.reverse();
    v.push(("tiny fragments reversed", tiny));
    v.push(("zero-length fragment", vec![b(0, 1600, true), b(1600, 0, true), b(1600, total - 1600, false)]));
    v.push(("length not a multiple of 8", vec![b(0, 1601, true), b(1600, total - 1600, false)]));
    v.push(("two last fragments", vec![b(1600, total - 1600, false), b(1600, total - 1608, false), b(0, 1600, true)]));
    let d = next(500);
    let id = id.wrapping_add(1);
    v.push(("atomic or single", vec![build_fragment(&d, 0, 508, false, id).unwrap()]));
    let d = next(100);
    let id = id.wrapping_add(1);
    let b = |o: usize, l: usize, m: bool| build_fragment(&d, o, l, m, id).unwrap();
    let mut over: Vec<Vec<u8>> = (0..44).map(|i| b(i * 1480, 1480, true)).collect();
    over.push(b(65120, 1000, false)); // ends at 66120 > 65535
    v.push(("oversize", over));
    v
}

#[test]
fn kernel_and_superpacket_reassemble_the_same_datagrams() {
    if !require_privileges() {
        println!("SKIPPED: defrag kernel oracle needs root");
        return;
    }
    let mut o = setup();
    let mut fragmenter = Fragmenter::with_ids(Ipv6IdGenerator::with_seed(0xdefa));
    let mut report = Vec::new();
    for v6 in [false, true] {
        for (name, frames) in scenarios(v6, o.mac, &mut fragmenter) {
            let kernel = o.run(v6, &frames);
            let mine = ours(&frames);
            report.push(format!(
                "{} {name}: kernel {} / superpacket {}",
                if v6 { "v6" } else { "v4" },
                kernel.len(),
                mine.len()
            ));
            assert_eq!(
                kernel.iter().map(Vec::len).collect::<Vec<_>>(),
                mine.iter().map(Vec::len).collect::<Vec<_>>(),
                "v6={v6} {name}"
            );
            assert_eq!(kernel, mine, "v6={v6} {name}: payload bytes");
        }
    }
    drop(o.ns);
    println!("{}", report.join("\n"));
}
