//! The transmit policy of a paravirtual NIC driver (seed result 4): when
//! a packet with a partial checksum goes out checksum-offloaded through an
//! indirect descriptor table, and when its checksum is completed in
//! software so that it fits one direct descriptor. The virtio-user
//! frontend ([`crate::io::virtio_user`]) applies it and says what the forms
//! are on its rings.

/// How the transmitter chooses between the forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxStrategy {
    /// The policy: GSO or batched packets keep the offload (indirect, with
    /// the header information the receiver needs); a lone non-GSO packet
    /// gets its checksum completed in software and goes direct.
    #[default]
    SwCsumDirect,
    /// Always offload with header information, indirect.
    OffloadIndirect,
    /// Offload without header information, direct when the frame fits (the
    /// receiver's requirement is ignored: unsafe, for comparison).
    DirectNoCsum,
}

impl TxStrategy {
    /// All three, the policy first.
    pub const ALL: [TxStrategy; 3] = [TxStrategy::SwCsumDirect, TxStrategy::OffloadIndirect, TxStrategy::DirectNoCsum];

    /// Stable name (`swcsum_direct`, `offload_indirect`, `direct_nocsum`).
    pub fn name(self) -> &'static str {
        match self {
            TxStrategy::SwCsumDirect => "swcsum_direct",
            TxStrategy::OffloadIndirect => "offload_indirect",
            TxStrategy::DirectNoCsum => "direct_nocsum",
        }
    }

    /// Parses a name (`-` or `_` separated).
    pub fn parse(s: &str) -> Option<TxStrategy> {
        let s = s.replace('-', "_");
        TxStrategy::ALL.into_iter().find(|t| t.name() == s)
    }
}

/// The form a frame was sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxForm {
    /// Direct, nothing to offload (checksum complete or none).
    Direct,
    /// Direct with the checksum offloaded (`NEEDS_CSUM`), no header information.
    DirectOffload,
    /// Direct, checksum completed in software by the transmitter.
    DirectSwCsum,
    /// Indirect without header information (virtio-user: the
    /// `virtio_net_hdr` in a descriptor of its own, no checksum offload).
    Indirect,
    /// Indirect (too large for a slot), checksum completed in software.
    IndirectSwCsum,
    /// Indirect with header information (virtio-user: the checksum
    /// offloaded, the `virtio_net_hdr` in a descriptor of its own).
    IndirectHdrInfo,
}
