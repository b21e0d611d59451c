//! Best-fit placement against already placed, time-conflicting buffers: the inner step
//! of Greedy by Size (Pisarchyk & Lee, Algorithm 3), Greedy by Breadth and their variants.
//!
//! Placed buffers are kept as address ranges in a segment tree over time slots
//! ([`GapIndex`]) whose lists hold *unions* of ranges, sorted by address: the best-fit rule
//! only looks at the free space between occupied ranges, so overlapping or touching ranges
//! can be merged. A query gathers `O(log T)` sorted lists and merges them, instead of
//! sorting every conflicting buffer; on DNN traces, where long-lived buffers sit next to
//! each other, the lists are far shorter than the number of conflicting buffers.

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
    finder: GapFinder,
    offsets: Vec<u64>,
}

impl<'p> Placer<'p> {
    pub(crate) fn new(problem: &'p Problem) -> Placer<'p> {
        let timeline = Timeline::new(problem);
        let finder = GapFinder::new(timeline.slots());
        Placer {
            problem,
            timeline,
            finder,
            offsets: vec![UNPLACED; problem.len()],
        }
    }

    pub(crate) fn is_placed(&self, i: usize) -> bool {
        self.offsets[i] != UNPLACED
    }

    /// The best-fit offset for buffer `i`, without placing it.
    pub(crate) fn best_fit(&mut self, i: usize) -> u64 {
        let b = &self.problem.buffers()[i];
        let (s, e) = self.timeline.span(i);
        self.finder.best_fit(s, e, b.size, b.align)
    }

    /// Places buffer `i` at `offset` (which must not overlap a conflicting placed buffer).
    pub(crate) fn place_at(&mut self, i: usize, offset: u64) {
        debug_assert!(!self.is_placed(i));
        self.offsets[i] = offset;
        let (s, e) = self.timeline.span(i);
        let size = self.problem.buffers()[i].size;
        self.finder.insert(s, e, (offset, offset + size));
    }

    /// Places buffer `i` at its best-fit offset and returns it.
    pub(crate) fn place_best_fit(&mut self, i: usize) -> u64 {
        let offset = self.best_fit(i);
        self.place_at(i, offset);
        offset
    }

    /// Work done by the best-fit queries so far (see [`GapFinder::work`]).
    pub(crate) fn work(&self) -> u64 {
        self.finder.work
    }

    pub(crate) fn into_plan(self) -> OffsetPlan {
        debug_assert!(self.offsets.iter().all(|&o| o != UNPLACED));
        OffsetPlan {
            offsets: self.offsets,
        }
    }
}

/// The best-fit query over placed address ranges indexed by time slot: a [`GapIndex`] plus
/// the scratch space of its queries.
pub(crate) struct GapFinder {
    index: GapIndex,
    scratch: Vec<(u64, u64)>,
    tmp: Vec<(u64, u64)>,
    runs: Vec<(usize, usize)>,
    next_runs: Vec<(usize, usize)>,
    /// Ranges visited by the queries so far (a machine-independent measure of work).
    pub(crate) work: u64,
}

impl GapFinder {
    /// An empty finder over `slots` time slots.
    pub(crate) fn new(slots: usize) -> GapFinder {
        GapFinder {
            index: GapIndex::new(slots),
            scratch: Vec::new(),
            tmp: Vec::new(),
            runs: Vec::new(),
            next_runs: Vec::new(),
            work: 0,
        }
    }

    /// Forgets every placed range.
    pub(crate) fn clear(&mut self) {
        self.index.clear();
    }

    /// Records the address range `r` of a buffer alive in slots `[s, e)`.
    pub(crate) fn insert(&mut self, s: usize, e: usize, r: (u64, u64)) {
        self.index.insert(s, e, r);
    }

    /// The best-fit offset (rule of [`best_gap`]) for `size` bytes aligned to `align`, alive
    /// in slots `[s, e)`.
    pub(crate) fn best_fit(&mut self, s: usize, e: usize, size: u64, align: u64) -> u64 {
        self.scratch.clear();
        self.runs.clear();
        self.index.collect(s, e, &mut self.scratch, &mut self.runs);
        self.work += self.scratch.len() as u64 + 1;
        merge_runs(
            &mut self.scratch,
            &mut self.tmp,
            &mut self.runs,
            &mut self.next_runs,
        );
        best_gap(&self.scratch, size, align)
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

/// A segment tree over time slots holding the address ranges of placed buffers.
///
/// A range is added to the canonical nodes tiling its buffer's span (`cover`) and to every
/// node whose subtree holds one of those (`within`). Each list is the union of its ranges,
/// as sorted, disjoint, non-touching ranges. A query for a span takes `within` at the nodes
/// it covers fully and `cover` at the nodes it only crosses: their union is exactly the
/// space taken by placed buffers alive in the span, as `O(log T)` sorted runs (which may
/// overlap one another, harmless to the gap scan).
///
/// The lists live in one pool, and a node holds the index of its list (0: the empty
/// list, never written): 8 bytes per node instead of two list headers (48), since most
/// of the `2 * 2^ceil(log2 T)` nodes stay empty (2 million nodes, 100 MB of headers, for
/// 700,000 slots). A node keeps its list when the index is cleared, so later passes reuse
/// the allocations.
pub(crate) struct GapIndex {
    slots: usize,
    cover: Vec<u32>,
    within: Vec<u32>,
    lists: Vec<Vec<(u64, u64)>>,
}

impl GapIndex {
    pub(crate) fn new(slots: usize) -> GapIndex {
        let size = 2 * slots.max(1).next_power_of_two();
        GapIndex {
            slots: slots.max(1),
            cover: vec![0; size],
            within: vec![0; size],
            lists: vec![Vec::new()],
        }
    }

    pub(crate) fn clear(&mut self) {
        self.lists.iter_mut().for_each(Vec::clear);
    }

    pub(crate) fn insert(&mut self, s: usize, e: usize, r: (u64, u64)) {
        if s < e {
            let (lists, cover, within) = (&mut self.lists, &mut self.cover, &mut self.within);
            span_lists(1, 0, self.slots, s, e, &mut |node, covered| {
                let slot = if covered {
                    &mut cover[node]
                } else {
                    &mut within[node]
                };
                GapIndex::add(lists, slot, r);
            });
        }
    }

    /// Adds `r` to the list whose index `slot` holds, giving it a list first if it has
    /// none.
    fn add(lists: &mut Vec<Vec<(u64, u64)>>, slot: &mut u32, r: (u64, u64)) {
        if *slot == 0 {
            *slot = lists.len() as u32;
            lists.push(Vec::new());
        }
        insert_union(&mut lists[*slot as usize], r);
    }

    /// Appends the ranges of the placed buffers alive in `[s, e)` to `out`, and the bounds
    /// of the sorted runs among them to `runs`.
    pub(crate) fn collect(
        &self,
        s: usize,
        e: usize,
        out: &mut Vec<(u64, u64)>,
        runs: &mut Vec<(usize, usize)>,
    ) {
        if s < e {
            self.query(1, 0, self.slots, s, e, out, runs);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        node: usize,
        nl: usize,
        nr: usize,
        s: usize,
        e: usize,
        out: &mut Vec<(u64, u64)>,
        runs: &mut Vec<(usize, usize)>,
    ) {
        if e <= nl || nr <= s {
            return;
        }
        let cover = &self.lists[self.cover[node] as usize];
        if !cover.is_empty() {
            runs.push((out.len(), out.len() + cover.len()));
            out.extend_from_slice(cover);
        }
        if s <= nl && nr <= e {
            let within = &self.lists[self.within[node] as usize];
            if within.is_empty() {
                return;
            }
            runs.push((out.len(), out.len() + within.len()));
            out.extend_from_slice(within);
            return;
        }
        let mid = (nl + nr) / 2;
        self.query(2 * node, nl, mid, s, e, out, runs);
        self.query(2 * node + 1, mid, nr, s, e, out, runs);
    }
}

/// Calls `f(node, covered)` for each list a range alive in slots `[s, e)` joins under
/// `node`, which spans `[nl, nr)`: `covered` for the canonical nodes tiling the span (their
/// `cover` lists), not for the nodes above them (their `within` lists).
fn span_lists(
    node: usize,
    nl: usize,
    nr: usize,
    s: usize,
    e: usize,
    f: &mut impl FnMut(usize, bool),
) {
    if e <= nl || nr <= s {
        return;
    }
    if s <= nl && nr <= e {
        f(node, true);
        return;
    }
    f(node, false);
    let mid = (nl + nr) / 2;
    span_lists(2 * node, nl, mid, s, e, f);
    span_lists(2 * node + 1, mid, nr, s, e, f);
}

/// An upper bound of the memory (bytes) of the [`GapIndex`] of one best-fit pass over
/// `problem`, counted without building it: 16 bytes for every list a buffer's range is
/// added to (before ranges merge) and 8 bytes per tree node. Counting stops once the bound
/// passes `stop`.
///
/// Each range goes into `O(log T)` lists, so a pass of many short-lived buffers whose ranges
/// seldom touch holds tens of entries per buffer: a sliding window of 64 buffers of
/// 257 B to 4 KiB over 684,000 allocations bounds at about 440 MB (the index measured
/// 396 MB, and a pass 9 s).
pub(crate) fn index_bytes(problem: &Problem, stop: u64) -> u64 {
    let timeline = Timeline::new(problem);
    let slots = timeline.slots().max(1);
    let mut bytes = 8 * 2 * slots.next_power_of_two() as u64;
    for i in 0..problem.len() {
        if bytes > stop {
            break;
        }
        let (s, e) = timeline.span(i);
        if s < e {
            span_lists(1, 0, slots, s, e, &mut |_, _| bytes += 16);
        }
    }
    bytes
}

/// Merges two sorted slices, appending to `out` (ties: `a`'s first).
pub(crate) fn merge_into<T: PartialOrd + Copy>(a: &[T], b: &[T], out: &mut Vec<T>) {
    let (mut x, mut y) = (0, 0);
    while x < a.len() && y < b.len() {
        if a[x] <= b[y] {
            out.push(a[x]);
            x += 1;
        } else {
            out.push(b[y]);
            y += 1;
        }
    }
    out.extend_from_slice(&a[x..]);
    out.extend_from_slice(&b[y..]);
}

/// Sorts `data`, made of the sorted runs `runs` (contiguous, in order), by merging runs
/// pairwise: `O(k log r)` for `k` items in `r` runs.
pub(crate) fn merge_runs(
    data: &mut Vec<(u64, u64)>,
    tmp: &mut Vec<(u64, u64)>,
    runs: &mut Vec<(usize, usize)>,
    next: &mut Vec<(usize, usize)>,
) {
    while runs.len() > 1 {
        tmp.clear();
        next.clear();
        for pair in runs.chunks(2) {
            let start = tmp.len();
            match *pair {
                [(a, b), (c, d)] => merge_into(&data[a..b], &data[c..d], tmp),
                [(a, b)] => tmp.extend_from_slice(&data[a..b]),
                _ => {}
            }
            next.push((start, tmp.len()));
        }
        std::mem::swap(data, tmp);
        std::mem::swap(runs, next);
    }
}

/// Adds `r` to a sorted list of disjoint, non-touching ranges, merging it with the ranges it
/// overlaps or touches.
fn insert_union(list: &mut Vec<(u64, u64)>, r: (u64, u64)) {
    let lo = list.partition_point(|x| x.1 < r.0);
    let hi = list.partition_point(|x| x.0 <= r.1);
    if lo == hi {
        list.insert(lo, r);
    } else {
        let merged = (list[lo].0.min(r.0), list[hi - 1].1.max(r.1));
        list[lo] = merged;
        list.drain(lo + 1..hi);
    }
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

    /// Entries and list headers of a built index, as [`index_bytes`] counts them.
    fn built_bytes(index: &GapIndex) -> u64 {
        let entries: usize = index.lists.iter().map(Vec::len).sum();
        16 * entries as u64 + 4 * (index.cover.len() + index.within.len()) as u64
    }

    proptest::proptest! {
        /// The bound is at least what a best-fit pass's index holds, and exact where no
        /// two ranges of a list merge.
        #[test]
        fn index_bytes_bounds_the_built_index(
            spans in proptest::collection::vec((0u64..60, 1u64..25, 1u64..9), 1..80),
        ) {
            use crate::problem::Buffer;
            let buffers: Vec<Buffer> = spans
                .iter()
                .map(|&(lower, len, size)| Buffer::new(String::new(), lower, lower + len, size))
                .collect();
            let problem = Problem::unnamed(buffers).unwrap();
            let bound = index_bytes(&problem, u64::MAX);
            let mut placer = Placer::new(&problem);
            for i in 0..problem.len() {
                placer.place_best_fit(i);
            }
            proptest::prop_assert!(built_bytes(&placer.finder.index) <= bound);
            // Disjoint address ranges never merge: every add is an entry.
            let mut apart = Placer::new(&problem);
            for i in 0..problem.len() {
                apart.place_at(i, 100 * i as u64);
            }
            proptest::prop_assert_eq!(built_bytes(&apart.finder.index), bound);
        }
    }

    proptest::proptest! {
        /// The index answers like a scan of every placed range alive in the span.
        #[test]
        fn gap_finder_matches_a_plain_scan(
            placed in proptest::collection::vec((0usize..40, 1usize..15, 0u64..200, 1u64..40), 0..60),
            queries in proptest::collection::vec((0usize..40, 1usize..15, 1u64..50, 0u32..3), 1..20),
        ) {
            let slots = 50;
            let mut finder = GapFinder::new(slots);
            let mut all = Vec::new();
            for &(s, len, o, size) in &placed {
                let e = (s + len).min(slots);
                finder.insert(s, e, (o, o + size));
                all.push((s, e, (o, o + size)));
            }
            // Every query answers as the brute force over `placed_now`.
            let check = |finder: &mut GapFinder, placed_now: &[(usize, usize, (u64, u64))]| {
                for &(qs, qlen, size, a) in &queries {
                    let qe = (qs + qlen).min(slots);
                    let mut taken: Vec<(u64, u64)> = placed_now
                        .iter()
                        .filter(|&&(s, e, _)| s < qe && qs < e)
                        .map(|&(_, _, r)| r)
                        .collect();
                    taken.sort_unstable();
                    let align = 1 << (2 * a);
                    proptest::prop_assert_eq!(
                        finder.best_fit(qs, qe, size, align),
                        best_gap(&taken, size, align)
                    );
                }
                Ok(())
            };
            check(&mut finder, &all)?;
            // Cleared, the index keeps its lists and answers for what is placed anew.
            finder.clear();
            let half = &all[..all.len() / 2];
            for &(s, e, r) in half {
                finder.insert(s, e, r);
            }
            check(&mut finder, half)?;
        }
    }
}
