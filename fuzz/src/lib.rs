//! Helpers shared by the fuzz targets: frame recipes (structured input that
//! reaches deep into the engines: valid flows with optional damage, or raw
//! bytes), checksum repair, and the crate's own frame validator (what
//! `superpacket pcap check` applies).

use arbitrary::Arbitrary;
use superpacket::offload::gro::capture_bytes;
use superpacket::offload::gso::{CsumCaps, GsoOutcome, OutFrame, OutKind, Segmenter, TargetCaps, VecSink};
use superpacket::packet::{ChecksumState, GsoType, OffloadMeta, Packet};
use superpacket::traffic::{Flow, FlowSpec, Transport};
use superpacket::validate::{self, Medium, Problem};
use superpacket::wire::{FrameHeaders, L4Kind, TcpFlags};

/// Largest payload a recipe asks for (keeps executions fast; GRO still
/// reaches its 64 KB limit with a few dozen frames).
pub const MAX_RECIPE_PAYLOAD: usize = 9000;

/// One input frame: built from a synthetic flow (then possibly damaged), or raw bytes.
#[derive(Debug, Clone, Arbitrary)]
pub enum FrameRecipe {
    /// A frame of one of a few flows: TCP/UDP, IPv4/IPv6, 0-2 VLAN tags.
    Flow {
        /// Flow selector: transport, family, tags, source port.
        flow: u8,
        /// Payload length (modulo [`MAX_RECIPE_PAYLOAD`] + 1).
        len: u16,
        /// TCP flag bits.
        flags: u8,
        /// Sequence-number skip (a gap) or TTL change.
        skew: u8,
        /// Byte edits `(position, xor)`, applied after the frame is built.
        edits: Vec<(u16, u8)>,
        /// Recompute the IPv4 header and L4 checksums after the edits.
        repair: bool,
        /// Append this many bytes of Ethernet padding.
        pad: u8,
    },
    /// Raw bytes.
    Raw(Vec<u8>),
}

/// The flows recipes draw from (state: sequence numbers, IPv4 IDs).
pub struct Flows(Vec<Flow>);

impl Default for Flows {
    fn default() -> Self {
        Self::new()
    }
}

impl Flows {
    /// Eight flows: {TCP, UDP} x {IPv4, IPv6} x {untagged, one or two tags}.
    pub fn new() -> Flows {
        let mut v = Vec::new();
        for i in 0..8u32 {
            let transport = if i & 1 == 0 { Transport::Tcp } else { Transport::Udp };
            let v6 = i & 2 != 0;
            let mut spec = FlowSpec::new(transport, v6, i);
            spec = match i >> 2 {
                0 => spec,
                _ if v6 => spec.with_vlans(&[(0x8100, 10)]).expect("one tag"),
                _ => spec.with_vlans(&[(0x88A8, 100), (0x8100, 200)]).expect("two tags"),
            };
            v.push(Flow::new(spec));
        }
        Flows(v)
    }

    /// Builds the frame of `recipe`.
    pub fn build(&mut self, recipe: &FrameRecipe) -> Vec<u8> {
        match recipe {
            FrameRecipe::Raw(b) => b.clone(),
            &FrameRecipe::Flow { flow, len, flags, skew, ref edits, repair, pad } => {
                let f = &mut self.0[usize::from(flow) % 8];
                if skew & 0x0F == 1 {
                    f.spec.ttl ^= 1;
                }
                if skew & 0xF0 == 0x10 {
                    // Lose a frame on the wire: a sequence gap.
                    let _ = f.frame(1, TcpFlags::empty());
                }
                let len = usize::from(len) % (MAX_RECIPE_PAYLOAD + 1);
                let mut frame = f.frame(len, TcpFlags::from_bits_truncate(u16::from(flags))).unwrap_or_default();
                if !frame.is_empty() {
                    for &(at, x) in edits {
                        let i = usize::from(at) % frame.len();
                        frame[i] ^= x;
                    }
                }
                if repair {
                    refresh(&mut frame);
                }
                frame.resize(frame.len() + usize::from(pad % 64), 0);
                frame
            }
        }
    }
}

/// Recomputes the IPv4 header checksum and the TCP/UDP checksum of a frame
/// (whatever parses of it; nothing if it does not parse).
pub fn refresh(frame: &mut [u8]) {
    validate::refresh_checksums(frame);
}

/// The problems `pcap check` finds in an Ethernet frame with metadata `meta`.
pub fn problems(frame: &[u8], meta: &OffloadMeta) -> Vec<Problem> {
    let mut out = Vec::new();
    validate::validate_frame(frame, Medium::Ethernet, meta, false, &mut out);
    out
}

/// True if `pcap check` finds nothing wrong with the frame.
pub fn is_valid(frame: &[u8], meta: &OffloadMeta) -> bool {
    problems(frame, meta).is_empty()
}

/// Transport payload bytes of a frame that parses (0 otherwise).
pub fn payload_len(frame: &[u8]) -> usize {
    FrameHeaders::parse(frame).map_or(0, |h| h.payload_bytes(frame).len())
}

/// The payload of a frame if it passes `pcap check` with `meta`: what its
/// segments must carry, in order.
///
/// A UDP superpacket's payload is everything after its UDP header up to the
/// end of the IP packet, whatever its UDP length field says: Linux's UDP GSO
/// (`__udp_gso_segment`) never reads that field, it cuts the IP payload and
/// gives every segment its own length. (Found by the long `virtio` and `gso`
/// runs: a DODGY UDP_L4 superpacket with a short UDP length.)
pub fn valid_payload<'a>(frame: &'a [u8], meta: &OffloadMeta) -> Option<&'a [u8]> {
    if !is_valid(frame, meta) {
        return None;
    }
    let h = FrameHeaders::parse(frame).ok()?;
    Some(carried_payload(frame, &h, meta))
}

/// The payload bytes a parsed frame carries with `meta` (see [`valid_payload`]
/// for UDP superpackets).
pub fn carried_payload<'a>(frame: &'a [u8], h: &FrameHeaders, meta: &OffloadMeta) -> &'a [u8] {
    if meta.is_gso() && h.l4 == L4Kind::Udp && !h.is_fragment {
        return frame.get(h.payload_offset..h.l3_offset + h.l3_len).unwrap_or_default();
    }
    h.payload_bytes(frame)
}

/// Every byte of a packet (linear area, segments, frag list).
pub fn bytes_of(p: &Packet) -> Vec<u8> {
    let mut v = Vec::new();
    p.copy_all_to(&mut v);
    v
}

/// Arbitrary transmit target capabilities.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct CapsInput {
    /// GSO bits the target does itself (bit i: TCPV4, TCPV6, UDP_L4, TCP_ECN, FRAGLIST, ACCECN, FIXEDID).
    pub gso: u8,
    /// 0 none, 1 IP, 2 HW, 3 IPv4 only.
    pub csum: u8,
    /// Scatter-gather.
    pub sg: bool,
    /// Frag-list support.
    pub fraglist: bool,
    /// L3 MTU (68 + this).
    pub mtu: u16,
    /// `gso_max_segs` (0: the default).
    pub max_segs: u16,
    /// `gso_max_size` (0: the default).
    pub gso_max_size: u16,
    /// Use the legacy USO limit (64).
    pub legacy_uso: bool,
    /// VLAN tags offloaded through.
    pub max_offload_tags: u8,
}

impl CapsInput {
    /// The capabilities.
    pub fn caps(&self) -> TargetCaps {
        let bits = [
            GsoType::TCPV4,
            GsoType::TCPV6,
            GsoType::UDP_L4,
            GsoType::TCP_ECN,
            GsoType::FRAGLIST,
            GsoType::TCP_ACCECN,
            GsoType::TCP_FIXEDID,
        ];
        let mut gso = GsoType::NONE;
        for (i, b) in bits.iter().enumerate() {
            if self.gso & (1 << i) != 0 {
                gso |= *b;
            }
        }
        let csum = match self.csum % 4 {
            0 => CsumCaps::NONE,
            1 => CsumCaps::IP,
            2 => CsumCaps::HW,
            _ => CsumCaps { ipv4: true, ipv6: false, hw: false },
        };
        let mut c = TargetCaps::new(68 + usize::from(self.mtu) % 9100).with_gso(gso).with_csum(csum);
        c.sg = self.sg;
        c.fraglist = self.fraglist;
        if self.max_segs != 0 {
            c.max_segs = self.max_segs;
        }
        if self.gso_max_size != 0 {
            c.gso_max_size = usize::from(self.gso_max_size);
        }
        if self.legacy_uso {
            c = c.with_udp_max_segments(64);
        }
        c.with_max_offload_tags(self.max_offload_tags % 4)
    }
}

/// Segments `pkt` for `caps` and checks the segmenter's contract: an error
/// emits nothing; the outcome names the frames emitted; the counters follow;
/// every frame parses, and if the input passes `pcap check` (`input_valid`),
/// every output frame passes it too with its own metadata, fits the MTU when
/// cut in software, and the payload is conserved: the frames' payloads, in
/// order, are `valid_payload` (the input's payload; `None` when the input
/// does not pass `pcap check`). Returns the frames.
pub fn segment_checked(
    seg: &mut Segmenter,
    pkt: &Packet,
    caps: &TargetCaps,
    valid_payload: Option<&[u8]>,
) -> Vec<OutFrame> {
    let input_valid = valid_payload.is_some();
    let before = seg.counters.clone();
    let mut sink = VecSink::new();
    let r = seg.segment(pkt, caps, &mut sink);
    let c = &seg.counters;
    assert_eq!(c.packets_in, before.packets_in + 1);
    let frames = sink.frames;
    match r {
        Err(ref e) => {
            assert!(frames.is_empty(), "error {e:?} but {} frames emitted", frames.len());
            assert_eq!(c.dropped(), before.dropped() + 1);
            assert!(
                !input_valid || pkt.meta.is_gso() || pkt.meta.csum != ChecksumState::None,
                "valid plain packet dropped: {e}"
            );
        }
        Ok(GsoOutcome::PassedThrough) => {
            assert_eq!(frames.len(), 1);
            assert_eq!(frames[0].kind, OutKind::PassThrough);
            assert_eq!(c.passed_through, before.passed_through + 1);
        }
        Ok(GsoOutcome::Completed { .. }) => {
            assert_eq!(frames.len(), 1);
            assert_eq!(c.completed, before.completed + 1);
        }
        Ok(GsoOutcome::Segmented { segments, .. }) => {
            assert_eq!(frames.len(), segments);
            assert_eq!(c.segments_out, before.segments_out + segments as u64);
        }
    }
    assert_eq!(c.frames_out, before.frames_out + frames.len() as u64);
    // A partial checksum whose field is not the TCP/UDP checksum field
    // (another protocol, not IP, or a `csum_start`/`csum_offset` elsewhere in
    // the packet, which `virtio_net_hdr_to_skb` accepts for a non-GSO packet)
    // may point anywhere: completing it rewrites those bytes, as the metadata
    // asked (Linux's `skb_checksum_help` does the same), so such outputs are
    // not held to `pcap check` or payload conservation.
    let in_headers = FrameHeaders::parse(&bytes_of(pkt));
    let csum_anywhere = match (pkt.meta.csum, &in_headers) {
        (ChecksumState::Partial { start, offset }, Ok(h)) => {
            usize::from(start) != h.l4_offset || h.l4.csum_offset() != Some(offset)
        }
        (ChecksumState::Partial { .. }, Err(_)) => true,
        _ => false,
    };
    let valid_payload = valid_payload.filter(|_| !csum_anywhere);
    if let (Some(expected), Ok(_)) = (valid_payload, &r) {
        let mut payload = Vec::new();
        let mut flat = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            // A passed-through frag-list packet is one frame made of several
            // (the target sends them as they are): check it as a capture records it.
            let (data, meta) = if f.kind == OutKind::PassThrough {
                let meta = capture_bytes(pkt, caps.medium, &mut flat);
                (&flat[..], meta)
            } else {
                (&f.data[..], f.meta)
            };
            let p = problems(data, &meta);
            assert!(p.is_empty(), "frame {i} of {r:?} invalid: {p:?} (meta {meta:?}, caps {caps:?})");
            let h = FrameHeaders::parse(data).expect("valid frame parses");
            if f.kind != OutKind::PassThrough && matches!(r, Ok(GsoOutcome::Segmented { .. })) {
                assert!(h.l3_len <= caps.mtu, "frame {i}: L3 length {} > MTU {}", h.l3_len, caps.mtu);
                assert!(!f.meta.is_gso());
            }
            payload.extend_from_slice(carried_payload(data, &h, &meta));
        }
        assert!(
            payload == expected,
            "payload not conserved: {} bytes in, {} out ({r:?}, meta {:?}, caps {caps:?})\n in  {expected:02x?}\n out {payload:02x?}\n frames {frames:02x?}",
            expected.len(),
            payload.len(),
            pkt.meta
        );
    }
    frames
}
