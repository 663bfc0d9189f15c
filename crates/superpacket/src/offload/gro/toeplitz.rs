//! Toeplitz RSS hash (Microsoft "Receive-Side Scaling" specification), used
//! by the LRO batch sort when a frame carries no hash of its own
//! (offload-rules 8.2: the sort key is the NIC's RSS hash).
//!
//! The hash of an input of `n` bytes with a key of at least `n + 4` bytes is
//! the XOR, over every set input bit `i` (most significant bit of byte 0
//! first), of the 32-bit window of the key starting at bit `i`. Inputs are
//! laid out as the specification says: source address, destination address,
//! then (for TCP/UDP) source port and destination port, all in network order.
//!
//! [`Toeplitz`] precomputes one 256-entry table per input byte position, so a
//! hash costs one lookup and one XOR per input byte (12 for IPv4 with ports,
//! 36 for IPv6 with ports).

use std::sync::OnceLock;

/// The standard 40-byte RSS key from the Microsoft specification (also the
/// default of many NIC drivers).
pub const MICROSOFT_RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// Longest input a 40-byte key can hash: 36 bytes (IPv6 addresses + ports).
pub const MAX_INPUT: usize = 36;

/// Bit-by-bit reference implementation (the definition); slow, for tests.
pub fn toeplitz_reference(key: &[u8], input: &[u8]) -> u32 {
    assert!(key.len() >= input.len() + 4, "key too short for the input");
    let mut result = 0u32;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, &byte) in input.iter().enumerate() {
        for bit in (0..8).rev() {
            if byte & (1 << bit) != 0 {
                result ^= window;
            }
            let next_key_bit = (key[i + 4] >> bit) & 1;
            window = (window << 1) | next_key_bit as u32;
        }
    }
    result
}

/// Table-driven Toeplitz hasher for one key.
pub struct Toeplitz {
    tables: Box<[[u32; 256]; MAX_INPUT]>,
}

impl Toeplitz {
    /// Precomputes the tables for `key` (40 bytes).
    pub fn new(key: &[u8; 40]) -> Toeplitz {
        let mut tables = Box::new([[0u32; 256]; MAX_INPUT]);
        for (pos, table) in tables.iter_mut().enumerate() {
            // The 32-bit windows starting at each of the 8 bits of byte `pos`.
            let mut windows = [0u32; 8];
            for (bit, w) in windows.iter_mut().enumerate() {
                let start = pos * 8 + bit;
                let mut v = 0u32;
                for k in 0..32 {
                    let b = start + k;
                    let key_bit = (key[b / 8] >> (7 - b % 8)) & 1;
                    v = (v << 1) | key_bit as u32;
                }
                *w = v;
            }
            for (value, slot) in table.iter_mut().enumerate() {
                let mut h = 0u32;
                for (bit, w) in windows.iter().enumerate() {
                    if value & (0x80 >> bit) != 0 {
                        h ^= w;
                    }
                }
                *slot = h;
            }
        }
        Toeplitz { tables }
    }

    /// The hasher for [`MICROSOFT_RSS_KEY`], built once per process.
    pub fn standard() -> &'static Toeplitz {
        static STANDARD: OnceLock<Toeplitz> = OnceLock::new();
        STANDARD.get_or_init(|| Toeplitz::new(&MICROSOFT_RSS_KEY))
    }

    /// Hash of `input` (at most [`MAX_INPUT`] bytes; longer inputs are cut).
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        let mut h = 0u32;
        for (table, &b) in self.tables.iter().zip(input) {
            h ^= table[b as usize];
        }
        h
    }

    /// Hash of an IPv4 flow: addresses, then ports when given.
    #[inline]
    pub fn hash_v4(&self, src: [u8; 4], dst: [u8; 4], ports: Option<(u16, u16)>) -> u32 {
        let mut buf = [0u8; 12];
        buf[..4].copy_from_slice(&src);
        buf[4..8].copy_from_slice(&dst);
        match ports {
            Some((s, d)) => {
                buf[8..10].copy_from_slice(&s.to_be_bytes());
                buf[10..12].copy_from_slice(&d.to_be_bytes());
                self.hash(&buf)
            }
            None => self.hash(&buf[..8]),
        }
    }

    /// Hash of an IPv6 flow: addresses, then ports when given.
    #[inline]
    pub fn hash_v6(&self, src: [u8; 16], dst: [u8; 16], ports: Option<(u16, u16)>) -> u32 {
        let mut buf = [0u8; 36];
        buf[..16].copy_from_slice(&src);
        buf[16..32].copy_from_slice(&dst);
        match ports {
            Some((s, d)) => {
                buf[32..34].copy_from_slice(&s.to_be_bytes());
                buf[34..36].copy_from_slice(&d.to_be_bytes());
                self.hash(&buf)
            }
            None => self.hash(&buf[..32]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// Verification vectors of the Microsoft RSS specification ("Verifying the
    /// RSS Hash Calculation"): (source, source port, destination, destination
    /// port, IPv4-only hash, IPv4+TCP hash).
    const V4: [(&str, u16, &str, u16, u32, u32); 5] = [
        ("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323e8fc2, 0x51ccc178),
        ("199.92.111.2", 14230, "65.69.140.83", 4739, 0xd718262a, 0xc626b0ea),
        ("24.19.198.95", 12898, "12.22.207.184", 38024, 0xd2d0a5de, 0x5c2b394a),
        ("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xafc7327f),
        ("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5d1809c5, 0x10e828a2),
    ];

    const V6: [(&str, u16, &str, u16, u32, u32); 3] = [
        ("3ffe:2501:200:1fff::7", 2794, "3ffe:2501:200:3::1", 1766, 0x2cc18cd5, 0x40207d3d),
        ("3ffe:501:8::260:97ff:fe40:efab", 14230, "ff02::1", 4739, 0x0f0c461c, 0xdde51bbf),
        ("3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, "fe80::200:f8ff:fe21:67cf", 38024, 0x4b61e985, 0x02d1feef),
    ];

    #[test]
    fn microsoft_vectors_ipv4() {
        let t = Toeplitz::standard();
        for (src, sp, dst, dp, ip_only, with_tcp) in V4 {
            let s: Ipv4Addr = src.parse().unwrap();
            let d: Ipv4Addr = dst.parse().unwrap();
            assert_eq!(t.hash_v4(s.octets(), d.octets(), None), ip_only, "{src} -> {dst}");
            assert_eq!(t.hash_v4(s.octets(), d.octets(), Some((sp, dp))), with_tcp, "{src}:{sp} -> {dst}:{dp}");
            let mut input = s.octets().to_vec();
            input.extend_from_slice(&d.octets());
            input.extend_from_slice(&sp.to_be_bytes());
            input.extend_from_slice(&dp.to_be_bytes());
            assert_eq!(toeplitz_reference(&MICROSOFT_RSS_KEY, &input), with_tcp);
        }
    }

    #[test]
    fn microsoft_vectors_ipv6() {
        let t = Toeplitz::standard();
        for (src, sp, dst, dp, ip_only, with_tcp) in V6 {
            let s: Ipv6Addr = src.parse().unwrap();
            let d: Ipv6Addr = dst.parse().unwrap();
            assert_eq!(t.hash_v6(s.octets(), d.octets(), None), ip_only, "{src} -> {dst}");
            assert_eq!(t.hash_v6(s.octets(), d.octets(), Some((sp, dp))), with_tcp, "{src}.{sp} -> {dst}.{dp}");
        }
    }

    #[test]
    fn table_matches_reference_on_arbitrary_input() {
        let t = Toeplitz::standard();
        let mut x = 0x1234_5678_9abc_def0u64;
        for len in 0..=MAX_INPUT {
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            assert_eq!(t.hash(&input), toeplitz_reference(&MICROSOFT_RSS_KEY, &input), "len {len}");
        }
    }
}
