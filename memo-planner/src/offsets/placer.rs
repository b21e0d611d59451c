//! Best-fit placement against already placed, time-conflicting buffers: the inner step
//! of Greedy by Size (Pisarchyk & Lee, Algorithm 3), Greedy by Breadth and their variants.
//! The conflicting buffers' address ranges come merged from [`Occupancy`]; the gaps between
//! merged runs are exactly the gaps Algorithm 3 finds scanning the buffers one by one.

use crate::offsets::occupancy::Occupancy;
use crate::plan::OffsetPlan;
use crate::problem::{align_up, Problem};
use crate::timeline::Timeline;

/// Marks a buffer that has no offset yet.
pub(crate) const UNPLACED: u64 = u64::MAX;

/// Places buffers one at a time, each into the smallest gap between the placed buffers it
/// conflicts with (or above the highest of them).
pub(crate) struct Placer<'p> {
    problem: &'p Problem,
    timeline: Timeline,
    occupancy: Occupancy,
    offsets: Vec<u64>,
    scratch: Vec<(u64, u64)>,
}

impl<'p> Placer<'p> {
    pub(crate) fn new(problem: &'p Problem) -> Placer<'p> {
        let timeline = Timeline::new(problem);
        let occupancy = Occupancy::new(timeline.slots());
        Placer {
            problem,
            timeline,
            occupancy,
            offsets: vec![UNPLACED; problem.len()],
            scratch: Vec::new(),
        }
    }

    pub(crate) fn is_placed(&self, i: usize) -> bool {
        self.offsets[i] != UNPLACED
    }

    /// The best-fit offset for buffer `i`, without placing it.
    pub(crate) fn best_fit(&mut self, i: usize) -> u64 {
        let b = &self.problem.buffers()[i];
        let (s, e) = self.timeline.span(i);
        self.scratch.clear();
        self.occupancy.collect(s, e, &mut self.scratch);
        // By start only: among equal starts only the first can open a gap, and the running
        // end is a max, so their order does not change `best_gap`'s answer.
        self.scratch.sort_unstable_by_key(|&(start, _)| start);
        best_gap(&self.scratch, b.size, b.align)
    }

    /// Places buffer `i` at `offset` (which must not overlap a conflicting placed buffer).
    pub(crate) fn place_at(&mut self, i: usize, offset: u64) {
        debug_assert!(!self.is_placed(i));
        self.offsets[i] = offset;
        let (s, e) = self.timeline.span(i);
        let size = self.problem.buffers()[i].size;
        self.occupancy.insert(s, e, offset, offset + size);
    }

    /// Places buffer `i` at its best-fit offset and returns it.
    pub(crate) fn place_best_fit(&mut self, i: usize) -> u64 {
        let offset = self.best_fit(i);
        self.place_at(i, offset);
        offset
    }

    pub(crate) fn into_plan(self) -> OffsetPlan {
        debug_assert!(self.offsets.iter().all(|&o| o != UNPLACED));
        OffsetPlan {
            offsets: self.offsets,
        }
    }
}

/// Smallest gap of at least `size` bytes (at an `align`-multiple start) between the
/// occupied ranges `taken` (sorted by start), or the first aligned address above all of
/// them. Among equal gaps the lowest wins.
pub(crate) fn best_gap(taken: &[(u64, u64)], size: u64, align: u64) -> u64 {
    let mut prev_end = 0u64;
    let mut best: Option<(u64, u64)> = None; // (gap, offset)
    for &(start, end) in taken {
        let candidate = align_up(prev_end, align);
        if start >= candidate {
            let gap = start - candidate;
            if gap >= size && best.is_none_or(|(g, _)| gap < g) {
                best = Some((gap, candidate));
            }
        }
        prev_end = prev_end.max(end);
    }
    best.map_or_else(|| align_up(prev_end, align), |(_, o)| o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_gap_prefers_the_tightest_then_the_lowest() {
        let taken = [(10, 20), (30, 40), (45, 50)];
        assert_eq!(best_gap(&taken, 5, 1), 40); // gaps 10, 10, 5 -> 5 at 40
        assert_eq!(best_gap(&taken, 8, 1), 0); // gaps 10 at 0 and 10 at 20 -> lowest
        assert_eq!(best_gap(&taken, 11, 1), 50);
        assert_eq!(best_gap(&taken, 4, 16), 0);
        assert_eq!(best_gap(&[(0, 10), (40, 50)], 4, 16), 16);
        assert_eq!(best_gap(&[], 4, 16), 0);
        // Nested ranges: the scan keeps the furthest end.
        assert_eq!(best_gap(&[(0, 100), (10, 20), (100, 110)], 5, 1), 110);
    }
}
