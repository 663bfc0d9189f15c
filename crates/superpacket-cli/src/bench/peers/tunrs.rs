//! tun-rs as a peer: its GRO table (`GROTable::apply_gro`, which runs
//! `handle_gro` and the coalesce accounting) and `gso_split`, a Rust port of
//! wireguard-go's TUN offload. It works on IP packets behind a
//! virtio_net_hdr, as a TUN with `IFF_VNET_HDR` delivers them, so it gets
//! each frame without its Ethernet header.
//!
//! What is timed is exactly the library call over the preloaded buffers;
//! restoring the buffers between samples (GRO coalesces in place) and
//! counting the output are not.
//!
//! tun-rs verifies the TCP checksum of every segment it coalesces (as
//! wireguard-go does), and copies each merged segment's payload onto the
//! head packet's buffer; `gso_split` copies each segment's payload into an
//! output buffer and computes its IPv4 header and TCP checksums.

use std::hint::black_box;
use std::time::Instant;

use tun_rs::{GROTable, VIRTIO_NET_HDR_GSO_TCPV4, VIRTIO_NET_HDR_LEN, VirtioNetHdr};

use super::EngineRun;
use super::workload::{ETH_HLEN, GSO_SEGMENTS, GroWorkload, GsoWorkload};
use superpacket::packet::ChecksumState;

/// Marks a buffer's virtio_net_hdr before GRO: tun-rs writes a header into
/// every buffer it returns and leaves merged-away buffers untouched, so a
/// buffer whose header is still this pattern was merged into another.
const UNTOUCHED_HDR: [u8; VIRTIO_NET_HDR_LEN] = [0xA5; VIRTIO_NET_HDR_LEN];

/// Room per GRO buffer: tun-rs coalesces only into a buffer whose capacity
/// holds the merged packet plus twice the offset.
const GRO_BUF_CAPACITY: usize = 2 * VIRTIO_NET_HDR_LEN + 65536;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
const NEEDS_CSUM: u8 = 1;

/// Times tun-rs GRO over the workload, `samples` times.
///
/// # Errors
/// tun-rs's own error, as text.
pub fn gro(work: &GroWorkload, samples: usize) -> Result<EngineRun, String> {
    let mut bufs: Vec<Vec<u8>> = work.frames.iter().map(|_| Vec::with_capacity(GRO_BUF_CAPACITY)).collect();
    let mut table = GROTable::new();
    let mut run = EngineRun::new(work.frames.len() as u64);
    for pass in EngineRun::passes(samples) {
        for (buf, frame) in bufs.iter_mut().zip(&work.frames) {
            buf.clear();
            buf.extend_from_slice(&UNTOUCHED_HDR);
            buf.extend_from_slice(&frame[ETH_HLEN..]);
        }
        let start = Instant::now();
        for burst in bufs.chunks_mut(work.batch.max(1)) {
            table.apply_gro(burst, VIRTIO_NET_HDR_LEN, work.udp).map_err(|e| format!("tun-rs GRO: {e}"))?;
        }
        let secs = start.elapsed().as_secs_f64();
        black_box(&bufs);
        let delivered = bufs.iter().filter(|b| b[..VIRTIO_NET_HDR_LEN] != UNTOUCHED_HDR);
        let (packets, bytes) =
            delivered.fold((0, 0), |(n, sum), b| (n + 1, sum + (b.len() - VIRTIO_NET_HDR_LEN) as u64));
        run.record_pass(pass, secs, packets, bytes);
    }
    Ok(run)
}

/// Times tun-rs `gso_split` over the workload's superpackets, `samples`
/// times; each segment lands in its own output buffer, checksums filled in.
///
/// # Errors
/// tun-rs's own error, as text.
pub fn gso(work: &GsoWorkload, samples: usize) -> Result<EngineRun, String> {
    let inputs: Vec<(Vec<u8>, VirtioNetHdr)> = work.superpackets.iter().map(|p| to_tun_input(p, work.mss)).collect();
    let mut scratch: Vec<Vec<u8>> = inputs.iter().map(|(ip, _)| ip.clone()).collect();
    let segment_room = inputs.first().map_or(0, |(_, h)| h.hdr_len as usize + work.mss);
    let mut out_bufs: Vec<Vec<u8>> = (0..GSO_SEGMENTS).map(|_| vec![0; segment_room]).collect();
    let mut sizes = vec![0usize; out_bufs.len()];
    let mut run = EngineRun::new(work.superpackets.len() as u64);
    for pass in EngineRun::passes(samples) {
        for (s, (ip, _)) in scratch.iter_mut().zip(&inputs) {
            s.copy_from_slice(ip);
        }
        let (mut packets, mut bytes) = (0u64, 0u64);
        let start = Instant::now();
        for (input, (_, hdr)) in scratch.iter_mut().zip(&inputs) {
            let n = tun_rs::gso_split(input, *hdr, &mut out_bufs, &mut sizes, 0, false)
                .map_err(|e| format!("tun-rs gso_split: {e}"))?;
            black_box(&out_bufs[..n]);
            packets += n as u64;
            bytes += sizes[..n].iter().sum::<usize>() as u64;
        }
        let secs = start.elapsed().as_secs_f64();
        run.record_pass(pass, secs, packets, bytes);
    }
    Ok(run)
}

/// The IP packet of a superpacket and the virtio_net_hdr a TUN with TSO
/// would deliver with it (offsets relative to the IP header).
fn to_tun_input(p: &superpacket::packet::Packet, mss: usize) -> (Vec<u8>, VirtioNetHdr) {
    let frame = p.to_vec();
    let csum_start = match p.meta.csum {
        ChecksumState::Partial { start, .. } => start as usize - ETH_HLEN,
        _ => 20,
    };
    let tcp_hlen = ((frame[ETH_HLEN + csum_start + 12] >> 4) as usize) * 4;
    let hdr = VirtioNetHdr {
        flags: NEEDS_CSUM,
        gso_type: VIRTIO_NET_HDR_GSO_TCPV4,
        hdr_len: (csum_start + tcp_hlen) as u16,
        gso_size: mss as u16,
        csum_start: csum_start as u16,
        csum_offset: 16,
    };
    (frame[ETH_HLEN..].to_vec(), hdr)
}
