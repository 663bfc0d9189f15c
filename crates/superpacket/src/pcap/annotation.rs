//! Offload metadata carried in pcapng packet comments.
//!
//! See [`FrameAnnotation`] for the comment grammar.

use crate::packet::TunnelKind;
use std::fmt;
use std::str::FromStr;

/// Kind of generic segmentation offload a superpacket is marked for
/// (Linux `SKB_GSO_TCPV4`, `SKB_GSO_TCPV6`, `SKB_GSO_UDP_L4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GsoKind {
    /// TCP over IPv4 (TSO): token `tcpv4`.
    TcpV4,
    /// TCP over IPv6: token `tcpv6`.
    TcpV6,
    /// UDP segmentation (USO, `UDP_SEGMENT`): token `udp_l4`.
    UdpL4,
}

impl GsoKind {
    /// The `gso_type` token value for this kind.
    pub const fn token(self) -> &'static str {
        match self {
            GsoKind::TcpV4 => "tcpv4",
            GsoKind::TcpV6 => "tcpv6",
            GsoKind::UdpL4 => "udp_l4",
        }
    }

    /// Parses a `gso_type` token value (`none` is not a kind: it yields `None`,
    /// as does anything unrecognised).
    pub fn from_token(token: &str) -> Option<GsoKind> {
        Self::from_token_bytes(token.as_bytes())
    }

    fn from_token_bytes(token: &[u8]) -> Option<GsoKind> {
        match token {
            b"tcpv4" => Some(GsoKind::TcpV4),
            b"tcpv6" => Some(GsoKind::TcpV6),
            b"udp_l4" => Some(GsoKind::UdpL4),
            _ => None,
        }
    }
}

impl fmt::Display for GsoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.token())
    }
}

/// GSO metadata of a superpacket: how a segmentation offload would split it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GsoAnnotation {
    /// The GSO type.
    pub kind: GsoKind,
    /// Payload bytes per segment (Linux `gso_size`, the MSS for TCP).
    pub size: u16,
    /// Number of segments (Linux `gso_segs`); 0 when unknown.
    pub segs: u16,
}

/// Offload metadata of one captured frame, carried in a pcapng packet comment.
///
/// The convention is a comment of space-separated `key=value` tokens:
///
/// | token | meaning |
/// | --- | --- |
/// | `gso_type=tcpv4\|tcpv6\|udp_l4\|none` | GSO type; `none` (or no token) means no GSO |
/// | `gso_size=N` | segment payload size, 1..=65535, required with a GSO type |
/// | `gso_segs=N` | number of segments, 0..=65535 (0 = unknown), optional |
/// | `csum=partial` | the L4 checksum field holds the pseudo-header sum (`CHECKSUM_PARTIAL`) |
/// | `csum=none\|unnecessary\|complete` | accepted on read, meaning "not partial" |
/// | `tunnel=vxlan\|geneve` | the frame is a UDP tunnel packet: `gso_type`, `gso_size` and `csum=partial` describe its **inner** headers (offload-rules 3.7) |
/// | `tunnel_gso=udp_tunnel\|udp_tunnel_csum` | with `tunnel` and a GSO type: outer UDP checksum 0 / computed per segment; when absent, 0 in the outer UDP checksum field means `udp_tunnel`, as Linux's GRO decides |
///
/// Tokens are separated by any ASCII whitespace. Tokens with other keys and
/// words without `=` are ignored, so free-text comments are not errors. A known
/// key with a malformed value (`gso_size=abc`), a duplicated known key, a GSO
/// type without `gso_size`, or a non-zero `gso_size`/`gso_segs` without a GSO
/// type is an [`AnnotationError`].
///
/// Parsing works on borrowed bytes and does not allocate (only building an
/// error does).
///
/// The default value (no GSO, checksum not partial) is "no annotation" and is
/// written as no comment at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FrameAnnotation {
    /// GSO metadata, if the frame is a superpacket to be segmented.
    pub gso: Option<GsoAnnotation>,
    /// The TCP/UDP checksum field holds the pseudo-header sum
    /// (`CHECKSUM_PARTIAL`) rather than a complete checksum.
    pub csum_partial: bool,
    /// The frame is a UDP tunnel packet; the fields above describe its
    /// inner headers.
    pub tunnel: Option<TunnelAnnotation>,
}

/// The `tunnel=` and `tunnel_gso=` tokens of a [`FrameAnnotation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TunnelAnnotation {
    /// `tunnel=vxlan|geneve`.
    pub kind: TunnelKind,
    /// `tunnel_gso=udp_tunnel_csum` (`Some(true)`) or `udp_tunnel`
    /// (`Some(false)`); `None` when not given (derived from the outer UDP
    /// checksum field).
    pub csum: Option<bool>,
}

/// A malformed offload annotation in a packet comment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnnotationError {
    /// A known token has a value that cannot be parsed.
    InvalidValue {
        /// The token key, e.g. `gso_size`.
        key: &'static str,
        /// The offending value (lossily decoded, at most 64 bytes).
        value: String,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A known token appears more than once.
    Duplicate {
        /// The repeated key.
        key: &'static str,
    },
    /// A GSO type is given without a `gso_size`.
    MissingGsoSize {
        /// The GSO type given.
        kind: GsoKind,
    },
    /// `gso_size` or `gso_segs` is non-zero but there is no GSO type.
    GsoFieldWithoutType {
        /// The key that needs a GSO type.
        key: &'static str,
    },
}

impl fmt::Display for AnnotationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnnotationError::InvalidValue { key, value, reason } => {
                write!(f, "invalid value {value:?} for annotation token `{key}`: {reason}")
            }
            AnnotationError::Duplicate { key } => write!(f, "annotation token `{key}` appears more than once"),
            AnnotationError::MissingGsoSize { kind } => write!(f, "`gso_type={kind}` requires a `gso_size` token"),
            AnnotationError::GsoFieldWithoutType { key } => {
                write!(f, "`{key}` is non-zero but `gso_type` is absent or `none`")
            }
        }
    }
}

impl std::error::Error for AnnotationError {}

impl FrameAnnotation {
    /// No offload metadata.
    pub const NONE: FrameAnnotation = FrameAnnotation { gso: None, csum_partial: false, tunnel: None };

    /// Whether there is nothing to annotate (no GSO, checksum not partial).
    pub fn is_empty(&self) -> bool {
        self.gso.is_none() && !self.csum_partial && self.tunnel.is_none()
    }

    /// Parses the annotation tokens of a packet comment. Unknown tokens and
    /// free text are ignored; see the type docs for the grammar.
    pub fn parse_comment(comment: &str) -> Result<FrameAnnotation, AnnotationError> {
        Self::parse_comment_bytes(comment.as_bytes())
    }

    /// Like [`parse_comment`](Self::parse_comment) on raw comment bytes (which
    /// need not be valid UTF-8: non-UTF-8 tokens are simply unknown).
    pub fn parse_comment_bytes(comment: &[u8]) -> Result<FrameAnnotation, AnnotationError> {
        let mut acc = Accumulator::default();
        acc.feed(comment)?;
        acc.finish()
    }

    /// Appends this annotation's tokens to `out` (nothing if [`is_empty`](Self::is_empty)).
    /// The text is exactly the [`Display`](fmt::Display) form.
    pub fn write_comment(&self, out: &mut String) {
        use fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = write!(out, "{self}");
    }
}

impl fmt::Display for FrameAnnotation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(g) = self.gso {
            write!(f, "gso_type={} gso_size={} gso_segs={}", g.kind, g.size, g.segs)?;
            sep = " ";
        }
        if let Some(t) = self.tunnel {
            write!(f, "{sep}tunnel={}", t.kind.name())?;
            if let (Some(csum), Some(_)) = (t.csum, self.gso) {
                write!(f, " tunnel_gso={}", if csum { "udp_tunnel_csum" } else { "udp_tunnel" })?;
            }
            sep = " ";
        }
        if self.csum_partial {
            write!(f, "{sep}csum=partial")?;
        }
        Ok(())
    }
}

impl FromStr for FrameAnnotation {
    type Err = AnnotationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_comment(s)
    }
}

/// Collects tokens from one or more comments of a frame.
#[derive(Default)]
pub(crate) struct Accumulator {
    /// `None`: no `gso_type` token; `Some(None)`: `gso_type=none`.
    kind: Option<Option<GsoKind>>,
    size: Option<u16>,
    segs: Option<u16>,
    csum_partial: Option<bool>,
    tunnel: Option<TunnelKind>,
    tunnel_csum: Option<bool>,
}

impl Accumulator {
    /// Feeds the tokens of one comment.
    pub(crate) fn feed(&mut self, comment: &[u8]) -> Result<(), AnnotationError> {
        for token in comment.split(|b| b.is_ascii_whitespace()) {
            let Some(eq) = token.iter().position(|&b| b == b'=') else {
                continue; // a bare word: free text
            };
            let (key, value) = (&token[..eq], &token[eq + 1..]);
            match key {
                b"gso_type" => {
                    let kind = match value {
                        b"none" => None,
                        _ => Some(
                            GsoKind::from_token_bytes(value)
                                .ok_or_else(|| invalid("gso_type", value, "expected tcpv4, tcpv6, udp_l4 or none"))?,
                        ),
                    };
                    set_once(&mut self.kind, kind, "gso_type")?;
                }
                b"gso_size" => set_once(&mut self.size, parse_u16("gso_size", value)?, "gso_size")?,
                b"gso_segs" => set_once(&mut self.segs, parse_u16("gso_segs", value)?, "gso_segs")?,
                b"csum" => {
                    let partial = match value {
                        b"partial" => true,
                        b"none" | b"unnecessary" | b"complete" => false,
                        _ => return Err(invalid("csum", value, "expected partial, none, unnecessary or complete")),
                    };
                    set_once(&mut self.csum_partial, partial, "csum")?;
                }
                b"tunnel" => {
                    let kind = match value {
                        b"vxlan" => TunnelKind::Vxlan,
                        b"geneve" => TunnelKind::Geneve,
                        _ => return Err(invalid("tunnel", value, "expected vxlan or geneve")),
                    };
                    set_once(&mut self.tunnel, kind, "tunnel")?;
                }
                b"tunnel_gso" => {
                    let csum = match value {
                        b"udp_tunnel" => false,
                        b"udp_tunnel_csum" => true,
                        _ => return Err(invalid("tunnel_gso", value, "expected udp_tunnel or udp_tunnel_csum")),
                    };
                    set_once(&mut self.tunnel_csum, csum, "tunnel_gso")?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks consistency and builds the annotation.
    pub(crate) fn finish(self) -> Result<FrameAnnotation, AnnotationError> {
        let gso = match self.kind.flatten() {
            None => {
                if self.size.is_some_and(|s| s != 0) {
                    return Err(AnnotationError::GsoFieldWithoutType { key: "gso_size" });
                }
                if self.segs.is_some_and(|s| s != 0) {
                    return Err(AnnotationError::GsoFieldWithoutType { key: "gso_segs" });
                }
                None
            }
            Some(kind) => {
                let size = self.size.ok_or(AnnotationError::MissingGsoSize { kind })?;
                if size == 0 {
                    return Err(invalid("gso_size", b"0", "must be non-zero with a GSO type"));
                }
                Some(GsoAnnotation { kind, size, segs: self.segs.unwrap_or(0) })
            }
        };
        if self.tunnel_csum.is_some() && (gso.is_none() || self.tunnel.is_none()) {
            return Err(AnnotationError::GsoFieldWithoutType { key: "tunnel_gso" });
        }
        let tunnel = self.tunnel.map(|kind| TunnelAnnotation { kind, csum: self.tunnel_csum });
        Ok(FrameAnnotation { gso, csum_partial: self.csum_partial.unwrap_or(false), tunnel })
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, key: &'static str) -> Result<(), AnnotationError> {
    if slot.is_some() {
        return Err(AnnotationError::Duplicate { key });
    }
    *slot = Some(value);
    Ok(())
}

fn invalid(key: &'static str, value: &[u8], reason: &'static str) -> AnnotationError {
    let shown = &value[..value.len().min(64)];
    AnnotationError::InvalidValue { key, value: String::from_utf8_lossy(shown).into_owned(), reason }
}

/// Parses a plain decimal `u16` (digits only: no sign, no spaces).
fn parse_u16(key: &'static str, value: &[u8]) -> Result<u16, AnnotationError> {
    if value.is_empty() {
        return Err(invalid(key, value, "missing value"));
    }
    let mut n: u32 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return Err(invalid(key, value, "not a decimal number"));
        }
        n = n * 10 + u32::from(b - b'0');
        if n > u32::from(u16::MAX) {
            return Err(invalid(key, value, "out of range 0..=65535"));
        }
    }
    // n <= u16::MAX was checked above.
    Ok(n as u16)
}
