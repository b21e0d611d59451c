//! `strip-packing`: the best-fit strip-packing heuristic of Sekiyama et al. 2018 (after
//! Burke, Kendall & Whitwell's best fit for the strip packing problem), with each buffer's
//! time position fixed.
//!
//! Buffers are rectangles: time (in [`Timeline`] slots) on one axis, addresses on the
//! other. A *skyline* records, for each slot, the top of the highest buffer placed there;
//! it is kept as maximal segments of consecutive slots with equal height (adjacent
//! segments always differ in height). Until every buffer is placed:
//!
//! 1. take the lowest segment (ties: the leftmost) `[a, b)` at height `h`;
//! 2. among the unplaced buffers whose span lies inside `[a, b)`, take the best fit: the
//!    longest lifetime (`upper - lower` in time units, i.e. the one that fills the segment
//!    best), ties the larger size, then the lower input index;
//! 3. if there is one, place it at `align_up(h, align)`: its slots rise to
//!    `offset + size` and the segment splits in up to three;
//! 4. if there is none, raise the segment to the lower of its neighbours' heights and
//!    merge it with the neighbours of that height (the space below is wasted).
//!
//! Every placed buffer sits at or above the skyline over its whole span, and the skyline
//! only grows, so conflicting buffers never overlap.
//!
//! # Complexity
//!
//! Each step places a buffer or merges away at least one segment; at most `2n + 1`
//! segments are ever created, so there are at most `3n + 1` steps. The skyline is a
//! `BTreeMap` by start slot plus a `BTreeSet` of `(height, start)`: `O(log n)` per step.
//!
//! Step 2 is a query "best-ranked unplaced buffer with start `>= a` and end `<= b`", a
//! two-sided range query answered by `ContainedIndex`, a range tree: a segment tree over
//! start slots whose every level lists the buffers grouped by node and, within a node,
//! sorted by end slot, with a min-rank tree per level. A query splits `[a, b)` into
//! `O(log T)` canonical nodes and in each binary-searches the ends `<= b` and takes a range
//! minimum: `O(log T log n)`; removing a placed buffer finds its position in each level
//! by binary search (entries are ordered by end slot, then rank) and updates the tree
//! above it, also `O(log T log n)`. Building it is `O(n log n)` (one sort, then a stable
//! counting sort per level). Total: `O(n log T log n)` time and `O(n log T)` memory (8
//! bytes per buffer and tree level: about 15 MB for 100,000 buffers, 60 MB for 350,000),
//! with no amortisation.
//!
//! # Relation to the original
//!
//! In Burke et al.'s best fit the rectangles are free to move along the strip: the lowest
//! gap takes the widest rectangle that fits its width, placed by a niche policy. Here a
//! buffer's time position is fixed, so "fits" means its lifetime lies inside the gap, and
//! "widest" is the longest lifetime; the rest (lowest-leftmost gap, raising an unusable
//! gap to its lower neighbour) is as in the original. Alignment only lifts a buffer above
//! the gap's floor; the padding is wasted.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::plan::OffsetPlan;
use crate::problem::{align_up, Problem};
use crate::timeline::Timeline;

/// Plans with best-fit strip packing.
pub fn plan(problem: &Problem) -> OffsetPlan {
    let buffers = problem.buffers();
    if buffers.is_empty() {
        return OffsetPlan::default();
    }
    let timeline = Timeline::new(problem);
    let spans: Vec<(usize, usize)> = (0..buffers.len()).map(|i| timeline.span(i)).collect();
    let mut by_rank: Vec<usize> = (0..buffers.len()).collect();
    by_rank.sort_by_key(|&i| (Reverse(buffers[i].lifetime()), Reverse(buffers[i].size), i));
    let mut index = ContainedIndex::new(timeline.slots(), &spans, &by_rank);
    let mut skyline = Skyline::new(timeline.slots());
    let mut offsets = vec![0u64; buffers.len()];
    let mut unplaced = buffers.len();
    while unplaced > 0 {
        let Some(seg) = skyline.lowest() else {
            break;
        };
        match index.best_within(seg.start, seg.end) {
            Some(i) => {
                index.remove(i);
                let b = &buffers[i];
                let offset = align_up(seg.height, b.align);
                offsets[i] = offset;
                let (s, e) = spans[i];
                skyline.raise_part(seg, s, e, offset + b.size);
                unplaced -= 1;
            }
            None => {
                if !skyline.raise_to_neighbour(seg) {
                    // One segment over all slots and nothing fits: impossible, since every
                    // span lies inside it. Stop rather than loop.
                    debug_assert!(false, "no buffer fits the whole timeline");
                    break;
                }
            }
        }
    }
    OffsetPlan { offsets }
}

/// An upper bound of the memory (bytes) [`plan`] takes on `problem` beyond the problem
/// itself, without building anything: the range tree's levels (ids and min tree, 8 bytes
/// per buffer and level, plus 4 per node) over at most `2n` slots, and 40 bytes per
/// buffer of per-buffer tables. 71 MB for candle's MobileNetV4-small (350,000 buffers),
/// 2.6 MB for 10,000.
///
/// ```
/// use memo_planner::fixtures::dnn_trace;
/// use memo_planner::offsets::strip_packing::index_bytes;
/// let p = dnn_trace(10_000, 1);
/// assert!(index_bytes(&p) > 10_000 * 8 * 15);
/// ```
pub fn index_bytes(problem: &Problem) -> u64 {
    let n = problem.len() as u64;
    let slots = (2 * n).max(1).next_power_of_two();
    let levels = u64::from(slots.trailing_zeros()) + 1;
    levels * 8 * n + 8 * slots + 40 * n
}

/// A maximal run of slots `[start, end)` with the same skyline height.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    start: usize,
    end: usize,
    height: u64,
}

/// The skyline: segments tiling `[0, slots)`, adjacent ones of different heights.
#[derive(Debug)]
struct Skyline {
    /// start -> (end, height).
    by_start: BTreeMap<usize, (usize, u64)>,
    /// `(height, start)` of every segment, for the lowest-leftmost one.
    by_height: BTreeSet<(u64, usize)>,
}

impl Skyline {
    /// One segment of height 0 over `slots` slots (at least one).
    fn new(slots: usize) -> Skyline {
        let mut sky = Skyline {
            by_start: BTreeMap::new(),
            by_height: BTreeSet::new(),
        };
        sky.insert(Segment {
            start: 0,
            end: slots.max(1),
            height: 0,
        });
        sky
    }

    /// The lowest segment, the leftmost among equals (there is always one).
    fn lowest(&self) -> Option<Segment> {
        let &(height, start) = self.by_height.first()?;
        let &(end, _) = self.by_start.get(&start)?;
        Some(Segment { start, end, height })
    }

    /// Raises slots `[s, e)` of segment `seg` (which contains them) to `top > seg.height`.
    fn raise_part(&mut self, seg: Segment, s: usize, e: usize, top: u64) {
        self.remove(seg);
        for (start, end, height) in [
            (seg.start, s, seg.height),
            (s, e, top),
            (e, seg.end, seg.height),
        ] {
            if start < end {
                self.insert(Segment { start, end, height });
            }
        }
        self.merge_around(s);
    }

    /// Raises `seg` to the lower of its neighbours' heights and merges it with them;
    /// `false` when it has no neighbour (it covers every slot).
    fn raise_to_neighbour(&mut self, seg: Segment) -> bool {
        let left = self.before(seg.start).map(|s| s.height);
        let right = self.by_start.get(&seg.end).map(|&(_, h)| h);
        let Some(height) = left.into_iter().chain(right).min() else {
            return false;
        };
        self.remove(seg);
        self.insert(Segment { height, ..seg });
        self.merge_around(seg.start);
        true
    }

    /// Merges the segment starting at `start` with neighbours of the same height.
    fn merge_around(&mut self, start: usize) {
        let Some(&(end, height)) = self.by_start.get(&start) else {
            return;
        };
        let mut merged = Segment { start, end, height };
        if let Some(left) = self.before(start).filter(|l| l.height == height) {
            self.remove(left);
            self.remove(merged);
            merged.start = left.start;
            self.insert(merged);
        }
        if let Some(&(right_end, right_height)) = self.by_start.get(&merged.end) {
            if right_height == height {
                self.remove(Segment {
                    start: merged.end,
                    end: right_end,
                    height,
                });
                self.remove(merged);
                merged.end = right_end;
                self.insert(merged);
            }
        }
    }

    /// The segment ending at `start`, if any.
    fn before(&self, start: usize) -> Option<Segment> {
        self.by_start
            .range(..start)
            .next_back()
            .map(|(&s, &(end, height))| Segment {
                start: s,
                end,
                height,
            })
    }

    fn insert(&mut self, seg: Segment) {
        self.by_start.insert(seg.start, (seg.end, seg.height));
        self.by_height.insert((seg.height, seg.start));
    }

    fn remove(&mut self, seg: Segment) {
        self.by_start.remove(&seg.start);
        self.by_height.remove(&(seg.height, seg.start));
    }
}

/// The buffers not placed yet, answering "which one of best rank has its span inside
/// `[a, b)`?" in `O(log T log n)` (a range tree over start slot, then end slot).
#[derive(Debug)]
struct ContainedIndex {
    /// Depth of the leaves: the tree over start slots has `2^depth` leaves.
    depth: u32,
    /// Per level `d` (root 0): the entries grouped by node, by end slot within a node.
    levels: Vec<Level>,
    /// Buffer of each rank (rank 0 is the best fit).
    by_rank: Vec<usize>,
    /// Start and end slot of each buffer.
    spans: Vec<(u32, u32)>,
    /// Rank of each buffer (the entries' order within a node: end slot, then rank).
    rank: Vec<u32>,
    /// Rank of each buffer, or [`GONE`] once it is placed.
    live: Vec<u32>,
}

/// One level of the range tree: 8 bytes per buffer (the entry and its half of a min
/// tree; the leaves are read through `live`), half of what an end, a position and a
/// full min tree per entry would take.
#[derive(Debug)]
struct Level {
    /// `node_start[k]..node_start[k + 1]`: the positions of node `k`'s entries.
    node_start: Vec<u32>,
    /// Buffer of the entry at each position.
    ids: Vec<u32>,
    /// Bottom-up min tree over positions, inner nodes only (`1..n`): leaf `n + p` is the
    /// live rank of the buffer at `p`, read from [`ContainedIndex::live`].
    min: Vec<u32>,
}

/// Marks a removed entry in [`ContainedIndex::live`].
const GONE: u32 = u32::MAX;

impl ContainedIndex {
    /// Indexes every buffer; `by_rank` lists the buffers best first.
    fn new(slots: usize, spans: &[(usize, usize)], by_rank: &[usize]) -> ContainedIndex {
        let n = spans.len();
        let depth = slots.max(1).next_power_of_two().trailing_zeros();
        let mut rank = vec![0u32; n];
        for (r, &i) in by_rank.iter().enumerate() {
            rank[i] = r as u32;
        }
        let spans: Vec<(u32, u32)> = spans.iter().map(|&(s, e)| (s as u32, e as u32)).collect();
        // Every level lists entries by end within a node: sort once, then
        // stable-partition by node at each level.
        let mut by_end: Vec<u32> = (0..n as u32).collect();
        by_end.sort_unstable_by_key(|&i| (spans[i as usize].1, rank[i as usize]));
        let levels = (0..=depth)
            .map(|d| Level::new(&by_end, &spans, &rank, depth - d, 1usize << d))
            .collect();
        ContainedIndex {
            depth,
            levels,
            by_rank: by_rank.to_vec(),
            spans,
            live: rank.clone(),
            rank,
        }
    }

    /// The best-ranked unplaced buffer with span inside `[a, b)`, if any.
    fn best_within(&self, a: usize, b: usize) -> Option<usize> {
        let leaves = 1usize << self.depth;
        let mut best = GONE;
        let (mut l, mut r) = (a + leaves, b.min(leaves) + leaves);
        while l < r {
            if l & 1 == 1 {
                best = best.min(self.node_best(l, b as u32));
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.min(self.node_best(r, b as u32));
            }
            l /= 2;
            r /= 2;
        }
        (best != GONE).then(|| self.by_rank[best as usize])
    }

    /// The best rank among the entries of tree node `v` (heap numbering) ending by `b`.
    fn node_best(&self, v: usize, b: u32) -> u32 {
        let d = v.ilog2() as usize;
        let k = v - (1 << d);
        let level = &self.levels[d];
        let lo = level.node_start[k] as usize;
        let hi = level.node_start[k + 1] as usize;
        let cut = lo + level.ids[lo..hi].partition_point(|&i| self.spans[i as usize].1 <= b);
        level.range_min(lo, cut, &self.live)
    }

    /// Removes buffer `i` from every level.
    fn remove(&mut self, i: usize) {
        self.live[i] = GONE;
        let key = (self.spans[i].1, self.rank[i]);
        for (d, level) in self.levels.iter_mut().enumerate() {
            let k = (self.spans[i].0 >> (self.depth - d as u32)) as usize;
            let lo = level.node_start[k] as usize;
            let hi = level.node_start[k + 1] as usize;
            let (spans, rank) = (&self.spans, &self.rank);
            let p = lo
                + level.ids[lo..hi]
                    .partition_point(|&j| (spans[j as usize].1, rank[j as usize]) < key);
            debug_assert_eq!(level.ids[p] as usize, i);
            level.clear(p, &self.live);
        }
    }
}

impl Level {
    /// The level whose nodes group start slots by `start >> shift` (`nodes` of them);
    /// `by_end` lists the buffers by end slot (then rank).
    fn new(by_end: &[u32], spans: &[(u32, u32)], rank: &[u32], shift: u32, nodes: usize) -> Level {
        let n = by_end.len();
        let node_of = |i: u32| (spans[i as usize].0 >> shift) as usize;
        let mut node_start = vec![0u32; nodes + 1];
        for &i in by_end {
            node_start[node_of(i) + 1] += 1;
        }
        for k in 0..nodes {
            node_start[k + 1] += node_start[k];
        }
        let mut fill = node_start.clone();
        let mut ids = vec![0u32; n];
        for &i in by_end {
            let p = &mut fill[node_of(i)];
            ids[*p as usize] = i;
            *p += 1;
        }
        let mut level = Level {
            node_start,
            ids,
            min: vec![GONE; n],
        };
        for v in (1..n).rev() {
            level.min[v] = level.at(2 * v, rank).min(level.at(2 * v + 1, rank));
        }
        level
    }

    /// Tree node `v`'s minimum: an inner node's, or a leaf's live rank.
    fn at(&self, v: usize, live: &[u32]) -> u32 {
        let n = self.ids.len();
        if v >= n {
            live[self.ids[v - n] as usize]
        } else {
            self.min[v]
        }
    }

    /// Minimum over positions `[lo, hi)`.
    fn range_min(&self, lo: usize, hi: usize, live: &[u32]) -> u32 {
        let n = self.ids.len();
        let (mut l, mut r) = (lo + n, hi + n);
        let mut best = GONE;
        while l < r {
            if l & 1 == 1 {
                best = best.min(self.at(l, live));
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.min(self.at(r, live));
            }
            l /= 2;
            r /= 2;
        }
        best
    }

    /// Updates the tree above position `p`, whose buffer is gone from `live`; stops
    /// climbing where the minimum does not change.
    fn clear(&mut self, p: usize, live: &[u32]) {
        let mut v = p + self.ids.len();
        while v > 1 {
            v /= 2;
            let m = self.at(2 * v, live).min(self.at(2 * v + 1, live));
            if self.min[v] == m {
                break;
            }
            self.min[v] = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::offsets_lower_bound;
    use crate::fixtures::*;
    use crate::problem::Buffer;
    use crate::validate::validate_offsets;

    /// The same algorithm, quadratic: per-slot heights and linear scans.
    fn reference(problem: &Problem) -> OffsetPlan {
        let buffers = problem.buffers();
        let timeline = Timeline::new(problem);
        let slots = timeline.slots().max(1);
        let mut height = vec![0u64; slots];
        let mut offsets = vec![0u64; buffers.len()];
        let mut placed = vec![false; buffers.len()];
        let mut left = buffers.len();
        while left > 0 {
            // Lowest run of equal heights, leftmost.
            let low = *height.iter().min().unwrap();
            let a = height.iter().position(|&h| h == low).unwrap();
            let b = (a..slots).find(|&k| height[k] != low).unwrap_or(slots);
            let best = (0..buffers.len())
                .filter(|&i| {
                    let (s, e) = timeline.span(i);
                    !placed[i] && a <= s && e <= b
                })
                .min_by_key(|&i| (Reverse(buffers[i].lifetime()), Reverse(buffers[i].size), i));
            match best {
                Some(i) => {
                    let o = align_up(low, buffers[i].align);
                    offsets[i] = o;
                    placed[i] = true;
                    left -= 1;
                    let (s, e) = timeline.span(i);
                    height[s..e]
                        .iter_mut()
                        .for_each(|h| *h = o + buffers[i].size);
                }
                None => {
                    let left_h = a.checked_sub(1).map(|k| height[k]);
                    let right_h = height.get(b).copied();
                    let to = left_h.into_iter().chain(right_h).min().unwrap();
                    height[a..b].iter_mut().for_each(|h| *h = to);
                }
            }
        }
        OffsetPlan { offsets }
    }

    #[test]
    fn alignment_rounds_the_segment_height_up() {
        // a [0,4) 5 -> 0; sky @5. b [0,2) 8 align 8 -> align_up(5, 8) = 8; sky [0,2)@16,
        // [2,4)@5. c [2,4) 3 align 4 -> align_up(5, 4) = 8. Height 16.
        let p = Problem::new(vec![
            Buffer::new("a", 0, 4, 5),
            Buffer::new("b", 0, 2, 8).with_align(8),
            Buffer::new("c", 2, 4, 3).with_align(4),
        ])
        .unwrap();
        let got = plan(&p);
        assert_eq!(got.offsets, vec![0, 8, 8]);
        assert_eq!(validate_offsets(&p, &got), Ok(16));
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
    fn matches_the_reference_on_a_dnn_trace() {
        let p = dnn_trace(1500, 5);
        let got = plan(&p);
        assert!(validate_offsets(&p, &got).is_ok());
        assert_eq!(got, reference(&p));
    }

    proptest::proptest! {
        #[test]
        fn valid_above_the_bound_and_equal_to_the_reference(
            p in crate::fixtures::strategies::problem(40)
        ) {
            let got = plan(&p);
            let height = validate_offsets(&p, &got);
            proptest::prop_assert!(height.is_ok(), "{:?}", height);
            proptest::prop_assert!(height.unwrap_or(0) >= offsets_lower_bound(&p));
            proptest::prop_assert_eq!(got, reference(&p));
        }
    }
}
