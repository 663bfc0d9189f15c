//! The transmit policy of a paravirtual NIC driver (seed result 4): when
//! a packet with a partial checksum goes out checksum-offloaded through an
//! indirect descriptor table, and when its checksum is completed in
//! software so that it fits one direct descriptor. The virtio-user
//! frontend ([`crate::io::virtio_user`]) applies it and says what the forms
//! are on its rings.

/// How the transmitter chooses between the forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxStrategy {
    /// The policy: GSO or batched packets keep the offload (indirect: the
    /// `virtio_net_hdr` in a descriptor of its own behind an indirect
    /// table); a lone non-GSO packet gets its checksum completed in
    /// software and goes in one direct descriptor.
    #[default]
    SwCsumDirect,
    /// Always offload, indirect.
    OffloadIndirect,
    /// Always offload, in one direct descriptor (header and frame in one
    /// buffer; no software checksum).
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
    /// Direct with the checksum offloaded (`NEEDS_CSUM`).
    DirectOffload,
    /// Direct, checksum completed in software by the transmitter.
    DirectSwCsum,
    /// Indirect with the checksum offloaded (`NEEDS_CSUM`): the
    /// `virtio_net_hdr` in a descriptor of its own behind the table.
    IndirectOffload,
}

impl TxForm {
    /// Every form, in the order of their discriminants (`form as usize`
    /// indexes per-form counters).
    pub const ALL: [TxForm; 4] = [TxForm::Direct, TxForm::DirectOffload, TxForm::DirectSwCsum, TxForm::IndirectOffload];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_index_their_counters_and_strategies_parse_their_names() {
        for (i, f) in TxForm::ALL.into_iter().enumerate() {
            assert_eq!(f as usize, i, "{f:?}");
        }
        for s in TxStrategy::ALL {
            assert_eq!(TxStrategy::parse(s.name()), Some(s));
            assert_eq!(TxStrategy::parse(&s.name().replace('_', "-")), Some(s));
        }
        assert_eq!(TxStrategy::parse("pv"), None);
    }
}
