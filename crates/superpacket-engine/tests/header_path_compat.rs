//! The device layer's header reads moved onto the `wire` views and
//! `wire::ethernet::walk_tags` (issue 22 item 3). The bond's transmit hashes
//! must not change (a flow would move to another slave, and the values follow
//! Linux's `bond_xmit_hash`), and the per-packet feature summary must not
//! either. Each is compared here with the byte-indexing code it replaced,
//! kept as the reference, on generated frames of every shape, each cut at
//! every length, with header fields corrupted, and on random bytes.

use superpacket::packet::Packet;
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::wire::TcpFlags;
use superpacket_engine::device::bond::{HashPolicy, hash, hash_layer2, hash_layer34};
use superpacket_engine::device::features::{L3Proto, PacketInfo};

/// The bond's tag walk before the change.
fn old_ethertype(frame: &[u8]) -> (usize, u16) {
    let mut off = 12;
    let mut et = 0;
    while off + 2 <= frame.len() {
        et = u16::from_be_bytes([frame[off], frame[off + 1]]);
        if !matches!(et, 0x8100 | 0x88A8 | 0x9100) {
            break;
        }
        off += 4;
    }
    (off, et)
}

fn old_hash_layer2(frame: &[u8]) -> u32 {
    if frame.len() < 14 {
        return 0;
    }
    let (_, et) = old_ethertype(frame);
    let h = u32::from_be_bytes([frame[2], frame[3], frame[4], frame[5]])
        ^ u32::from_be_bytes([frame[8], frame[9], frame[10], frame[11]])
        ^ u32::from(et);
    h ^ (h >> 16) ^ (h >> 8)
}

fn old_hash_layer34(frame: &[u8]) -> u32 {
    let (off, et) = old_ethertype(frame);
    let l3 = off + 2;
    let (mut h, l4, proto) = match et {
        0x0800 if frame.len() >= l3 + 20 => {
            let ihl = usize::from(frame[l3] & 0x0F) * 4;
            let frag = u16::from_be_bytes([frame[l3 + 6], frame[l3 + 7]]) & 0x3FFF != 0;
            let a = u32::from_be_bytes([frame[l3 + 12], frame[l3 + 13], frame[l3 + 14], frame[l3 + 15]]);
            let b = u32::from_be_bytes([frame[l3 + 16], frame[l3 + 17], frame[l3 + 18], frame[l3 + 19]]);
            (a ^ b, (!frag).then_some(l3 + ihl), frame[l3 + 9])
        }
        0x86DD if frame.len() >= l3 + 40 => {
            let mut h = 0u32;
            for i in 0..8 {
                let o = l3 + 8 + 4 * i;
                h ^= u32::from_be_bytes([frame[o], frame[o + 1], frame[o + 2], frame[o + 3]]);
            }
            (h, Some(l3 + 40), frame[l3 + 6])
        }
        _ => return old_hash_layer2(frame),
    };
    if let Some(l4) = l4
        && matches!(proto, 6 | 17)
        && frame.len() >= l4 + 4
    {
        h ^= u32::from_be_bytes([frame[l4], frame[l4 + 1], frame[l4 + 2], frame[l4 + 3]]);
    }
    h ^= h >> 16;
    h ^= h >> 8;
    h >> 1
}

/// `PacketInfo::of_len`'s header reads before the change: (tags, L3, DF,
/// IPv6 extension headers).
fn old_packet_info(b: &[u8]) -> (u8, L3Proto, bool, bool) {
    let mut off = 12;
    let mut tags = 0u8;
    let mut et = 0u16;
    while off + 2 <= b.len() {
        et = u16::from_be_bytes([b[off], b[off + 1]]);
        if matches!(et, 0x8100 | 0x88A8 | 0x9100) {
            tags = tags.saturating_add(1);
            off += 4;
        } else {
            break;
        }
    }
    let l3_at = off + 2;
    let (l3, dont_frag, ipv6_ext) = match et {
        0x0800 => (L3Proto::Ipv4, b.get(l3_at + 6).is_some_and(|x| x & 0x40 != 0), false),
        0x86DD => (L3Proto::Ipv6, true, b.get(l3_at + 6).is_some_and(|nh| !matches!(nh, 6 | 17))),
        _ => (L3Proto::Other, false, false),
    };
    (tags, l3, dont_frag, ipv6_ext)
}

/// Frames of every shape the device layer meets: TCP/UDP over IPv4/IPv6,
/// 0-3 VLAN tags of every TPID, many flows, fragments, IHL and protocol
/// values that lie, other EtherTypes.
fn corpus() -> Vec<Vec<u8>> {
    let stacks: [&[(u16, u16)]; 6] = [
        &[],
        &[(0x8100, 10)],
        &[(0x88A8, 100), (0x8100, 20)],
        &[(0x9100, 7)],
        &[(0x88A8, 1), (0x8100, 2), (0x8100, 3)],
        &[(0x9100, 4), (0x88A8, 5)],
    ];
    let mut out = Vec::new();
    for (i, tags) in stacks.iter().enumerate() {
        for t in [Transport::Tcp, Transport::Udp] {
            for v6 in [false, true] {
                for index in [0u32, 1, 77, 4095 + i as u32] {
                    let mut spec = FlowSpec::new(t, v6, index).with_vlans(tags).unwrap();
                    spec.tcp_timestamps = index % 2 == 0;
                    out.push(Flow::new(spec).frame(5 + index as usize % 40, TcpFlags::PSH).unwrap());
                }
            }
        }
    }
    let mut variants = Vec::new();
    for f in &out {
        let l3 = superpacket::wire::ethernet::walk_tags(f, 12).l3_offset();
        let v4 = f[l3 - 2..l3] == [0x08, 0x00];
        let mut edit = |at: usize, v: u8| {
            let mut g = f.clone();
            g[l3 + at] = v;
            variants.push(g);
        };
        if v4 {
            for ihl in [0x40, 0x43, 0x46, 0x4f] {
                edit(0, ihl);
            }
            edit(6, 0x20); // MF
            edit(7, 0x01); // an offset
            edit(6, 0x00); // DF clear
            for proto in [1, 50, 132] {
                edit(9, proto);
            }
        } else {
            for nh in [0, 43, 44, 58, 59] {
                edit(6, nh);
            }
        }
    }
    out.extend(variants);
    // Other EtherTypes, and a type field that is not the IP version found.
    let base = out[0].clone();
    for et in [[0x08, 0x06], [0x88, 0xcc], [0x86, 0xdd], [0x00, 0x2e]] {
        let mut g = base.clone();
        g[12..14].copy_from_slice(&et);
        out.push(g);
    }
    // Random bytes, some with a VLAN TPID or an IP EtherType forced at 12.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..3000 {
        let len = (next() % 120) as usize;
        let mut g: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let forced: [[u8; 2]; 5] = [[0x81, 0x00], [0x88, 0xa8], [0x91, 0x00], [0x08, 0x00], [0x86, 0xdd]];
        if len >= 14 && i % 2 == 0 {
            g[12..14].copy_from_slice(&forced[i % 5]);
            if len >= 18 && i % 4 == 0 {
                g[16..18].copy_from_slice(&forced[(i / 4) % 5]);
            }
        }
        out.push(g);
    }
    out
}

#[test]
fn bond_hashes_are_unchanged() {
    let mut frames = 0;
    for f in corpus() {
        for cut in 0..=f.len() {
            let b = &f[..cut];
            assert_eq!(hash_layer2(b), old_hash_layer2(b), "layer2, {cut} of {:02x?}", f);
            assert_eq!(hash_layer34(b), old_hash_layer34(b), "layer3+4, {cut} of {:02x?}", f);
            assert_eq!(hash(HashPolicy::Layer2, b), old_hash_layer2(b));
            assert_eq!(hash(HashPolicy::Layer34, b), old_hash_layer34(b));
            frames += 1;
        }
    }
    assert!(frames > 100_000, "{frames} frames compared");
}

#[test]
fn packet_info_is_unchanged() {
    let mut compared = 0;
    for f in corpus() {
        for cut in 0..=f.len() {
            let b = &f[..cut];
            let info = PacketInfo::of_len(&Packet::from_frame(b), cut);
            let (tags, l3, df, ext) = old_packet_info(b);
            assert_eq!((info.vlan_tags, info.l3), (tags, l3), "{cut} of {f:02x?}");
            // The one difference, on purpose: DF and the next header are read
            // through the IP views, so only from a whole fixed IP header.
            let ip = b.len().saturating_sub(superpacket::wire::ethernet::walk_tags(b, 12).l3_offset());
            let whole = match l3 {
                L3Proto::Ipv4 => ip >= 20,
                L3Proto::Ipv6 => ip >= 40,
                L3Proto::Other => true,
            };
            if whole {
                assert_eq!((info.dont_frag, info.ipv6_ext), (df, ext), "{cut} of {f:02x?}");
                compared += 1;
            } else {
                assert_eq!((info.dont_frag, info.ipv6_ext), (l3 == L3Proto::Ipv6, false), "{cut} of {f:02x?}");
            }
        }
    }
    assert!(compared > 50_000, "{compared} frames compared");
}
