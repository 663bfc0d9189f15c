//! The fragment queue's ordered runs and the overlap/duplicate decision,
//! exactly as offload-rules 5.1 (`inet_frag_queue_insert`).
//!
//! A *run* is a sequence of fragments that arrived in order, each starting
//! where the previous one ended. Runs only grow at the tail of the highest
//! run; a fragment placed in a hole starts a run of its own even when it
//! touches its neighbours. That detail decides between DUPLICATE and OVERLAP:
//! a fragment lying entirely inside one run is a duplicate (only it is
//! dropped), any other intersection with received data is an overlap (the
//! whole datagram is discarded, RFC 5722 for both families).

/// Runs charged as part of the queue descriptor.
pub(crate) const INLINE_RUNS: usize = 16;

/// One run: bytes `start..end` of the datagram's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub start: u32,
    pub end: u32,
}

/// Where a fragment went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// First fragment of the queue, a new run after a gap, or a new run
    /// in a hole (index of the run in the ordered list).
    NewRun,
    /// Appended to the highest run (the in-order case).
    Appended,
    /// Entirely inside one existing run: drop this fragment only.
    Duplicate,
    /// Partially covers received data: discard the whole datagram.
    Overlap,
}

/// The ordered, disjoint runs of a queue (sorted by start).
#[derive(Debug, Clone, Default)]
pub(crate) struct Runs {
    runs: Vec<Run>,
}

impl Runs {
    /// Highest byte received + 1 (0 when empty): the end of the last run.
    #[cfg(test)]
    pub fn last_end(&self) -> u32 {
        self.runs.last().map_or(0, |r| r.end)
    }

    /// Bytes of memory the run list holds beyond [`INLINE_RUNS`] runs (those
    /// are part of the queue's fixed charge, so that a queue's charge does not
    /// depend on which recycled list it got).
    pub fn extra_bytes(&self) -> usize {
        self.runs.capacity().saturating_sub(INLINE_RUNS) * std::mem::size_of::<Run>()
    }

    /// Forgets every run; keeps a small allocation for reuse.
    pub fn clear(&mut self) {
        if self.runs.capacity() > INLINE_RUNS {
            self.runs = Vec::new();
        } else {
            self.runs.clear();
        }
    }

    /// Places `start..end` (non-empty) following offload-rules 5.1.
    #[inline]
    pub fn insert(&mut self, start: u32, end: u32) -> Placement {
        debug_assert!(start < end);
        let Some(last) = self.runs.last_mut() else {
            self.runs.push(Run { start, end });
            return Placement::NewRun;
        };
        if end > last.end {
            // The common case: the fragment goes to the end.
            return if start < last.end {
                Placement::Overlap
            } else if start == last.end {
                last.end = end;
                Placement::Appended
            } else {
                self.runs.push(Run { start, end });
                Placement::NewRun
            };
        }
        // Binary search: the first run whose end is beyond `start`.
        let i = self.runs.partition_point(|r| r.end <= start);
        match self.runs.get(i) {
            Some(r) if r.start < end => {
                if start >= r.start && end <= r.end {
                    Placement::Duplicate
                } else {
                    Placement::Overlap
                }
            }
            _ => {
                self.runs.insert(i, Run { start, end });
                Placement::NewRun
            }
        }
    }

    /// The runs, ordered.
    #[cfg(test)]
    pub fn as_slice(&self) -> &[Run] {
        &self.runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        // (already inserted, new fragment, expected placement)
        type Case = (&'static [(u32, u32)], (u32, u32), Placement);
        let cases: &[Case] = &[
            (&[], (0, 8), Placement::NewRun),
            (&[(0, 8)], (8, 16), Placement::Appended),
            (&[(0, 8)], (16, 24), Placement::NewRun),
            (&[(0, 8)], (4, 16), Placement::Overlap),
            (&[(0, 8)], (0, 8), Placement::Duplicate),
            (&[(0, 16)], (8, 16), Placement::Duplicate),
            (&[(0, 8), (8, 16)], (0, 16), Placement::Duplicate), // 8..16 appended: one run 0..16
            (&[(16, 24)], (0, 8), Placement::NewRun),
            (&[(16, 24)], (8, 16), Placement::NewRun), // touches, but holes never merge runs
            (&[(16, 24), (8, 16)], (8, 24), Placement::Overlap), // spans two runs
            (&[(16, 24), (8, 16)], (12, 20), Placement::Overlap),
            (&[(16, 24)], (0, 17), Placement::Overlap),
            (&[(0, 8), (24, 32)], (8, 24), Placement::NewRun),
            (&[(0, 8), (24, 32)], (7, 24), Placement::Overlap),
            (&[(0, 8), (24, 32)], (8, 25), Placement::Overlap),
            (&[(0, 8), (24, 32)], (24, 32), Placement::Duplicate),
            (&[(0, 8), (24, 32)], (30, 40), Placement::Overlap), // tail case, starts inside last run
        ];
        for (before, (s, e), want) in cases {
            let mut r = Runs::default();
            for &(a, b) in *before {
                assert_ne!(r.insert(a, b), Placement::Overlap, "setup {before:?}");
            }
            assert_eq!(r.insert(*s, *e), *want, "{before:?} + {s}..{e}");
        }
    }

    #[test]
    fn runs_stay_sorted_and_disjoint() {
        let mut r = Runs::default();
        for (s, e) in [(40, 48), (0, 8), (16, 24), (8, 16), (48, 56), (24, 40)] {
            assert_ne!(r.insert(s, e), Placement::Overlap);
        }
        let v = r.as_slice();
        assert!(v.windows(2).all(|w| w[0].end <= w[1].start));
        assert_eq!(r.last_end(), 56);
        assert_eq!(v.iter().map(|x| x.end - x.start).sum::<u32>(), 56);
    }
}
