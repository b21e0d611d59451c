//! `greedy-by-breadth`: Pisarchyk & Lee §5.3, Greedy by Breadth for offset calculation.
//!
//! The operators are the time slots of the [`Timeline`] (between two consecutive lifetime
//! endpoints the set of live buffers does not change). They are visited in non-increasing
//! breadth (total size alive in the slot; ties: earlier slot first); slots where nothing is
//! alive are skipped. For each, the buffers alive in it that are not placed yet are placed
//! in non-increasing size (ties: input order), each with the best-fit gap rule of
//! Algorithm 3 against the placed buffers it conflicts with (the shared `Placer`).
//!
//! # Finding a slot's unplaced buffers without rescanning profiles
//!
//! A long-lived buffer is in the profile of every slot it spans, so listing profiles would
//! be quadratic. Instead each buffer is stored once at each of the `O(log T)` canonical
//! nodes of a segment tree over slots that tile its span (flat, CSR layout). The buffers
//! alive in slot `k` are exactly those stored on the leaf-to-root path of `k`, each at
//! one node of it. Visiting slot `k` drains the lists on that path: every buffer in them
//! is alive in `k`, so once `k` is done they are all placed and the lists are never read
//! again. Each list is read at most once, so all slots together read `O(n log T)` entries.
//!
//! Complexity: `O(n log n)` for the timeline, the breadths, the slot and size orders and
//! the tree, plus the placer's `O(Σ k log k)` (`k`: placed buffers a buffer conflicts
//! with), as for greedy by size.

use std::cmp::Reverse;

use crate::offsets::placer::Placer;
use crate::plan::OffsetPlan;
use crate::problem::Problem;
use crate::timeline::Timeline;

/// Plans with Greedy by Breadth.
pub fn plan(problem: &Problem) -> OffsetPlan {
    // Work never exceeds u64::MAX: always a plan.
    plan_within(problem, u64::MAX).unwrap_or_default()
}

/// As [`plan`], unless the best-fit queries visit more than `work_limit` occupied ranges
/// (the placer's work counter): then `None`, after about that much work (see
/// `greedy_by_size::plan_within`).
pub(crate) fn plan_within(problem: &Problem, work_limit: u64) -> Option<OffsetPlan> {
    let buffers = problem.buffers();
    let timeline = Timeline::new(problem);
    let breadths = timeline.breadths(problem);
    let mut slots: Vec<usize> = (0..breadths.len()).filter(|&k| breadths[k] > 0).collect();
    // Stable: equal breadths keep the earlier slot first.
    slots.sort_by_key(|&k| Reverse(breadths[k]));
    let mut pending = SlotBuckets::new(&timeline, buffers.len());
    let mut placer = Placer::new(problem);
    let mut batch = Vec::new();
    for k in slots {
        batch.clear();
        pending.drain_alive_in(k, |i| {
            if !placer.is_placed(i) {
                batch.push(i);
            }
        });
        batch.sort_unstable_by_key(|&i| (Reverse(buffers[i].size), i));
        for &i in &batch {
            placer.place_best_fit(i);
            if placer.work() > work_limit {
                return None;
            }
        }
    }
    Some(placer.into_plan())
}

/// Buffers stored at the canonical nodes of a segment tree over slots that tile their
/// spans; each node's list can be drained once.
struct SlotBuckets {
    /// Number of leaves (a power of two, at least the number of slots).
    leaves: usize,
    /// `items[start[v]..start[v + 1]]` are the buffers stored at node `v`.
    start: Vec<u32>,
    items: Vec<u32>,
    /// Whether node `v`'s list has been drained.
    drained: Vec<bool>,
}

impl SlotBuckets {
    /// Stores buffers `0..n` of `timeline` at their canonical nodes, in `O(n log T)`.
    fn new(timeline: &Timeline, n: usize) -> SlotBuckets {
        let leaves = timeline.slots().max(1).next_power_of_two();
        let nodes = 2 * leaves;
        let mut count = vec![0u32; nodes + 1];
        for i in 0..n {
            let (s, e) = timeline.span(i);
            canonical_nodes(leaves, s, e, |v| count[v + 1] += 1);
        }
        for v in 0..nodes {
            count[v + 1] += count[v];
        }
        let start = count.clone();
        let mut fill = count;
        let mut items = vec![0u32; start[nodes] as usize];
        for i in 0..n {
            let (s, e) = timeline.span(i);
            canonical_nodes(leaves, s, e, |v| {
                items[fill[v] as usize] = i as u32;
                fill[v] += 1;
            });
        }
        SlotBuckets {
            leaves,
            start,
            items,
            drained: vec![false; nodes],
        }
    }

    /// Calls `f` for every buffer alive in slot `k` whose node list has not been drained
    /// yet, and drains those lists. Each buffer alive in `k` is stored on `k`'s
    /// leaf-to-root path exactly once, so `f` sees it at most once per call.
    fn drain_alive_in(&mut self, k: usize, mut f: impl FnMut(usize)) {
        let mut v = k + self.leaves;
        while v >= 1 {
            if !self.drained[v] {
                self.drained[v] = true;
                let (a, b) = (self.start[v] as usize, self.start[v + 1] as usize);
                self.items[a..b].iter().for_each(|&i| f(i as usize));
            }
            v /= 2;
        }
    }
}

/// Calls `f` with each canonical node of the slot range `[s, e)` in a segment tree with
/// `leaves` leaves (node 1 the root, node `leaves + k` the leaf of slot `k`).
fn canonical_nodes(leaves: usize, s: usize, e: usize, mut f: impl FnMut(usize)) {
    let (mut l, mut r) = (s + leaves, e + leaves);
    while l < r {
        if l & 1 == 1 {
            f(l);
            l += 1;
        }
        if r & 1 == 1 {
            r -= 1;
            f(r);
        }
        l /= 2;
        r /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::offsets_lower_bound;
    use crate::fixtures::*;
    use crate::offsets::greedy_by_size::plan_in_order;
    use crate::problem::Buffer;
    use crate::validate::validate_offsets;

    /// The quadratic reference: profiles listed slot by slot, same orders.
    fn reference(problem: &Problem) -> OffsetPlan {
        let buffers = problem.buffers();
        let timeline = Timeline::new(problem);
        let breadths = timeline.breadths(problem);
        let mut slots: Vec<usize> = (0..breadths.len()).collect();
        slots.sort_by_key(|&k| (Reverse(breadths[k]), k));
        let mut done = vec![false; buffers.len()];
        let mut order = Vec::new();
        for k in slots {
            let mut profile: Vec<usize> = (0..buffers.len())
                .filter(|&i| {
                    let (s, e) = timeline.span(i);
                    !done[i] && s <= k && k < e
                })
                .collect();
            profile.sort_by_key(|&i| (Reverse(buffers[i].size), i));
            for &i in &profile {
                done[i] = true;
            }
            order.extend(profile);
        }
        plan_in_order(problem, &order)
    }

    #[test]
    fn alignment_is_respected() {
        // Slot [0,2) (breadth 28) first: x (14) -> 0, y (14, input order) -> 14.
        // Slot [2,4) (breadth 24): z (8, align 16) conflicts with x [0,14) only: no gap,
        // top align_up(14, 16) = 16 (unaligned it would go to 14). w (2) conflicts with
        // x [0,14) and z [16,24): the padding gap [14,16) fits it exactly -> 14.
        // Height 28 (y's end).
        let p = Problem::new(vec![
            Buffer::new("x", 0, 4, 14),
            Buffer::new("y", 0, 2, 14),
            Buffer::new("z", 2, 4, 8).with_align(16),
            Buffer::new("w", 2, 4, 2),
        ])
        .unwrap();
        let got = plan(&p);
        assert_eq!(got.offsets, vec![0, 14, 16, 14]);
        assert_eq!(validate_offsets(&p, &got), Ok(28));
    }

    #[test]
    #[cfg_attr(miri, ignore = "thousands of buffers: hours under Miri")]
    fn long_lived_buffers_are_placed_once() {
        let p = dnn_trace(2000, 3);
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
