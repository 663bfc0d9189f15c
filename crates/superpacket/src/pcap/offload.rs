//! Conversion between capture annotations ([`FrameAnnotation`]) and the
//! packet model's offload metadata ([`OffloadMeta`]).

use super::annotation::{FrameAnnotation, GsoAnnotation, GsoKind};
use crate::packet::{ChecksumState, GsoProtocol, GsoType, OffloadMeta};
use crate::wire::FrameHeaders;

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
        FrameAnnotation { gso, csum_partial: matches!(meta.csum, ChecksumState::Partial { .. }) }
    }

    /// The offload metadata this annotation describes for a frame whose
    /// headers are `headers` (`None` when they do not parse). `csum=partial`
    /// becomes [`ChecksumState::Partial`] starting at the L4 header with the
    /// protocol's checksum offset (offload-rules 0.3); without parsed headers
    /// the start is 0, which validation reports.
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
