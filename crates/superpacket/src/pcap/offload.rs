//! Conversion between capture annotations ([`FrameAnnotation`]) and the
//! packet model's offload metadata ([`OffloadMeta`]).

use super::annotation::{FrameAnnotation, GsoAnnotation, GsoKind, TunnelAnnotation};
use crate::packet::{ChecksumState, Encapsulation, GsoProtocol, GsoType, OffloadMeta, TunnelKind};
use crate::wire::{FrameHeaders, L4Kind};

impl GsoKind {
    /// The packet model's protocol for this token.
    pub fn protocol(self) -> GsoProtocol {
        match self {
            GsoKind::TcpV4 => GsoProtocol::TcpV4,
            GsoKind::TcpV6 => GsoProtocol::TcpV6,
            GsoKind::UdpL4 => GsoProtocol::UdpL4,
        }
    }
}

impl From<GsoProtocol> for GsoKind {
    fn from(p: GsoProtocol) -> GsoKind {
        match p {
            GsoProtocol::TcpV4 => GsoKind::TcpV4,
            GsoProtocol::TcpV6 => GsoKind::TcpV6,
            GsoProtocol::UdpL4 => GsoKind::UdpL4,
        }
    }
}

impl FrameAnnotation {
    /// The annotation that records `meta` in a capture: GSO protocol, size and
    /// segments (other GSO bits such as DODGY or FIXEDID are not recorded), and
    /// `csum=partial` for [`ChecksumState::Partial`].
    pub fn from_meta(meta: &OffloadMeta) -> FrameAnnotation {
        let gso = match meta.gso_type.protocol() {
            Some(p) if meta.is_gso() => {
                Some(GsoAnnotation { kind: p.into(), size: meta.gso_size, segs: meta.gso_segs })
            }
            _ => None,
        };
        let tunnel = meta.encap.map(|e| TunnelAnnotation {
            kind: e.tunnel,
            csum: meta.is_tunnel_gso().then(|| meta.gso_type.contains(GsoType::UDP_TUNNEL_CSUM)),
        });
        FrameAnnotation { gso, csum_partial: matches!(meta.csum, ChecksumState::Partial { .. }), tunnel }
    }

    /// The offload metadata this annotation describes for a frame whose
    /// headers are `headers` (`None` when they do not parse). `csum=partial`
    /// becomes [`ChecksumState::Partial`] starting at the L4 header with the
    /// protocol's checksum offset (offload-rules 0.3); without parsed headers
    /// the start is 0, which validation reports. A `tunnel=` token is not
    /// looked at: see [`FrameAnnotation::to_meta_in`].
    pub fn to_meta(&self, headers: Option<&FrameHeaders>) -> OffloadMeta {
        let mut meta = OffloadMeta::default();
        if let Some(g) = self.gso {
            meta.gso_type = g.kind.protocol().gso_type();
            meta.gso_size = g.size;
            meta.gso_segs = g.segs;
            if g.size == 0 {
                meta.gso_type = GsoType::NONE;
            }
        }
        if self.csum_partial {
            let (start, offset) = match headers {
                Some(h) => {
                    // Other protocols: where ICMP keeps its checksum.
                    let offset = h.l4.csum_offset().unwrap_or(2);
                    (u16::try_from(h.l4_offset).unwrap_or(u16::MAX), offset)
                }
                None => (0, 0),
            };
            meta.csum = ChecksumState::Partial { start, offset };
        }
        meta
    }
}

impl FrameAnnotation {
    /// [`FrameAnnotation::to_meta`] for the frame `frame` whose outer
    /// headers are `headers`, understanding `tunnel=` (offload-rules 3.7):
    /// the encapsulation offsets are read from the bytes (outer UDP header,
    /// the VXLAN or Geneve header, the inner Ethernet, IP and L4 headers),
    /// `csum=partial` starts at the inner L4 header, and a GSO type gains
    /// `UDP_TUNNEL_CSUM` or `UDP_TUNNEL` from `tunnel_gso=` (absent: a
    /// non-zero outer UDP checksum field means `UDP_TUNNEL_CSUM`, Linux's GRO
    /// rule). Headers that do not parse leave `encap` unset (the segmenter
    /// then drops a tunnel superpacket as `bad-tunnel-gso`, validation reports it).
    pub fn to_meta_in(&self, headers: Option<&FrameHeaders>, frame: &[u8]) -> OffloadMeta {
        let Some(t) = self.tunnel else { return self.to_meta(headers) };
        let mut meta = self.to_meta(None);
        let encap = headers.and_then(|h| encapsulation_of(frame, h, t.kind));
        if meta.is_gso() {
            let csum = t.csum.unwrap_or_else(|| {
                headers.is_some_and(|h| frame.get(h.l4_offset + 6..h.l4_offset + 8).is_some_and(|f| f != [0, 0]))
            });
            meta.gso_type |= if csum { GsoType::UDP_TUNNEL_CSUM } else { GsoType::UDP_TUNNEL };
        }
        if let Some((e, offset)) = encap {
            meta.encap = Some(e);
            if self.csum_partial {
                meta.csum = ChecksumState::Partial { start: e.inner_transport, offset };
            }
        }
        meta
    }
}

/// The encapsulation offsets of a VXLAN/Geneve frame whose outer headers
/// are `h`, and the inner L4 checksum offset; `None` if the bytes are not one.
fn encapsulation_of(frame: &[u8], h: &FrameHeaders, kind: TunnelKind) -> Option<(Encapsulation, u16)> {
    if h.l4 != L4Kind::Udp {
        return None;
    }
    let ot = h.l4_offset;
    let tl = match kind {
        TunnelKind::Vxlan => 8,
        TunnelKind::Geneve => 8 + usize::from(*frame.get(ot + 8)? & 0x3f) * 4,
    };
    let im = ot + 8 + tl;
    let inner = FrameHeaders::parse(frame.get(im..)?).ok()?;
    let e = Encapsulation {
        tunnel: kind,
        outer_transport: u16::try_from(ot).ok()?,
        inner_mac: u16::try_from(im).ok()?,
        inner_network: u16::try_from(im + inner.l3_offset).ok()?,
        inner_transport: u16::try_from(im + inner.l4_offset).ok()?,
    };
    Some((e, inner.l4.csum_offset().unwrap_or(2)))
}
