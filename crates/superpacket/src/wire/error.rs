//! The typed error every wire-format parser returns.
//!
//! Parsers never panic on bad input: they return one of these variants. The
//! `Display` text is meant for humans (it is printed verbatim in
//! `superpacket pcap check` problem reports), e.g.
//! `ipv4: truncated: header needs 20 bytes, 12 available`.

/// Why a packet (or a part of it) could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer ends before the structure it must hold does.
    Truncated {
        /// Protocol layer that was being parsed ("ethernet", "ipv4", "tcp", ...).
        layer: &'static str,
        /// Bytes the layer needs (from the start of that layer).
        needed: usize,
        /// Bytes actually available (from the start of that layer).
        available: usize,
    },
    /// A field holds a value the protocol forbids, or fields contradict each other.
    Malformed {
        /// Protocol layer that was being parsed.
        layer: &'static str,
        /// What is wrong, in a few words.
        reason: &'static str,
    },
    /// Valid on the wire but outside what this implementation handles
    /// (e.g. more VLAN tags than [`MAX_VLAN_TAGS`](super::MAX_VLAN_TAGS)).
    Unsupported {
        /// Protocol layer that was being parsed.
        layer: &'static str,
        /// What is not supported, in a few words.
        reason: &'static str,
    },
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Truncated { layer, needed, available } => {
                write!(f, "{layer}: truncated: needs {needed} bytes, {available} available")
            }
            WireError::Malformed { layer, reason } => write!(f, "{layer}: malformed: {reason}"),
            WireError::Unsupported { layer, reason } => write!(f, "{layer}: unsupported: {reason}"),
        }
    }
}

impl std::error::Error for WireError {}

impl WireError {
    /// The protocol layer the error is about.
    pub fn layer(&self) -> &'static str {
        match *self {
            WireError::Truncated { layer, .. }
            | WireError::Malformed { layer, .. }
            | WireError::Unsupported { layer, .. } => layer,
        }
    }

    /// Shorthand constructor for [`WireError::Truncated`].
    pub const fn truncated(layer: &'static str, needed: usize, available: usize) -> Self {
        WireError::Truncated { layer, needed, available }
    }

    /// Shorthand constructor for [`WireError::Malformed`].
    pub const fn malformed(layer: &'static str, reason: &'static str) -> Self {
        WireError::Malformed { layer, reason }
    }

    /// Shorthand constructor for [`WireError::Unsupported`].
    pub const fn unsupported(layer: &'static str, reason: &'static str) -> Self {
        WireError::Unsupported { layer, reason }
    }
}

/// Result type of every fallible function in [`wire`](super).
pub type Result<T> = core::result::Result<T, WireError>;

/// Returns `Truncated` unless `available >= needed`.
#[inline]
pub(crate) fn check_len(layer: &'static str, needed: usize, available: usize) -> Result<()> {
    if available < needed { Err(WireError::truncated(layer, needed, available)) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_readable() {
        assert_eq!(WireError::truncated("ipv4", 20, 12).to_string(), "ipv4: truncated: needs 20 bytes, 12 available");
        assert_eq!(WireError::malformed("tcp", "data offset < 5").to_string(), "tcp: malformed: data offset < 5");
        assert_eq!(
            WireError::unsupported("vlan", "more than 8 tags").to_string(),
            "vlan: unsupported: more than 8 tags"
        );
        assert_eq!(WireError::truncated("udp", 8, 0).layer(), "udp");
        assert!(check_len("x", 3, 2).is_err());
        assert!(check_len("x", 3, 3).is_ok());
    }
}
