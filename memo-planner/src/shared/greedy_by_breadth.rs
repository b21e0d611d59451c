//! `greedy-by-breadth`: Pisarchyk & Lee, Algorithm 1 ("Greedy by Breadth for Shared
//! Objects"), TFLite's `GREEDY_BY_BREADTH`.
//!
//! The operators are the timeline slots (the time ranges between consecutive lifetime
//! endpoints; for TFLite records, the tasks). Their *breadth* is the total size of the
//! buffers alive in them. Slots are taken in non-increasing breadth (ties: earlier slot
//! first); in each slot, its not yet assigned buffers in non-increasing size (ties: input
//! order). Each buffer goes into the suitable object (no assigned buffer overlapping it)
//! whose size is the smallest `>= size`; failing that, into the largest suitable smaller
//! object, grown to the buffer's size; failing that, into a new object. Among suitable
//! objects of equal size the lowest id wins, as in TFLite's scan.
//!
//! Complexity: `O(n log n + T log T)` for the breadths and for finding each slot's
//! unassigned buffers: buffers sit in the `O(log T)` canonical nodes of a segment tree
//! over slots, and a slot's query empties the node lists on its root-to-leaf path (every
//! unassigned buffer found there is assigned right away, stale entries are dropped once).
//! Objects are kept in an ordered set by `(size, id)`; a buffer walks it from its size
//! upwards (then downwards) past *busy* objects only, which are marked beforehand from
//! the assigned buffers overlapping it ([`super::objects::Objects::mark_busy`]). So each
//! buffer costs `O((log n + w) log n)` with `w` the largest number of buffers alive at once.

use std::collections::BTreeSet;

use super::objects::{Objects, UNASSIGNED};
use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;

/// Plans `problem` with Algorithm 1 (greedy by breadth).
pub fn plan(problem: &Problem) -> SharedObjectsPlan {
    let buffers = problem.buffers();
    let mut objects = Objects::new(problem);
    let slots = objects.timeline().slots();
    let breadths = objects.timeline().breadths(problem);
    let mut slot_order: Vec<usize> = (0..slots).collect();
    slot_order.sort_by_key(|&k| std::cmp::Reverse(breadths[k]));

    let mut stab = Stabbing::new(slots);
    for i in 0..buffers.len() {
        let (s, e) = objects.timeline().span(i);
        stab.insert(i as u32, s, e);
    }

    let mut by_size: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut profile: Vec<usize> = Vec::new();
    for &slot in &slot_order {
        profile.clear();
        stab.take_at(slot, |i| {
            if objects.ids[i] == UNASSIGNED {
                profile.push(i);
            }
        });
        profile.sort_by_key(|&i| (std::cmp::Reverse(buffers[i].size), i));
        for &i in &profile {
            let size = buffers[i].size;
            objects.mark_busy(i);
            let mut best = by_size
                .range((size, 0)..)
                .find(|&&(_, o)| !objects.is_busy(o))
                .copied();
            if best.is_none() {
                if let Some(&(s, hi)) = by_size
                    .range(..(size, 0))
                    .rev()
                    .find(|&&(_, o)| !objects.is_busy(o))
                {
                    // The lowest free id among the objects of that size.
                    best = by_size
                        .range((s, 0)..=(s, hi))
                        .find(|&&(_, o)| !objects.is_busy(o))
                        .copied();
                }
            }
            match best {
                Some((s, obj)) => {
                    if s < size {
                        by_size.remove(&(s, obj));
                        by_size.insert((size, obj));
                    }
                    objects.assign(i, size, obj);
                }
                None => {
                    let obj = objects.create(i, size);
                    by_size.insert((size, obj));
                }
            }
        }
    }
    objects.into_plan()
}

/// Buffers by the slots they are alive in: a segment tree whose nodes list the buffers
/// they canonically cover. [`Stabbing::take_at`] empties the lists on one root-to-leaf path.
struct Stabbing {
    slots: usize,
    lists: Vec<Vec<u32>>,
}

impl Stabbing {
    fn new(slots: usize) -> Stabbing {
        let slots = slots.max(1);
        Stabbing {
            slots,
            lists: vec![Vec::new(); 2 * slots.next_power_of_two()],
        }
    }

    fn insert(&mut self, id: u32, s: usize, e: usize) {
        // Iterative walk over the canonical nodes of [s, e).
        let mut stack = vec![(1usize, 0usize, self.slots)];
        while let Some((node, nl, nr)) = stack.pop() {
            if e <= nl || nr <= s {
                continue;
            }
            if s <= nl && nr <= e {
                self.lists[node].push(id);
                continue;
            }
            let mid = (nl + nr) / 2;
            stack.push((2 * node, nl, mid));
            stack.push((2 * node + 1, mid, nr));
        }
    }

    /// Calls `f` for every buffer stored on the path to slot `k` and forgets them there.
    fn take_at(&mut self, k: usize, mut f: impl FnMut(usize)) {
        let (mut node, mut nl, mut nr) = (1usize, 0usize, self.slots);
        loop {
            for id in std::mem::take(&mut self.lists[node]) {
                f(id as usize);
            }
            if nr - nl <= 1 {
                break;
            }
            let mid = (nl + nr) / 2;
            if k < mid {
                (node, nr) = (2 * node, mid);
            } else {
                (node, nl) = (2 * node + 1, mid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::objects::test_support::check;
    use super::*;
    use crate::fixtures::strategies;
    use crate::{Buffer, Problem};

    #[test]
    fn grows_the_largest_smaller_object() {
        // Slot 0 (breadth 18) makes objects of 10 and 8; c (12) fits both, none is >= 12,
        // so the 10 grows.
        let p = Problem::new(vec![
            Buffer::new("a", 0, 2, 10),
            Buffer::new("b", 0, 2, 8),
            Buffer::new("c", 2, 3, 12),
        ])
        .unwrap();
        let plan = plan(&p);
        assert_eq!(plan.object_ids, vec![0, 1, 0]);
        assert_eq!(check(&p, &plan), Ok(20));
    }

    proptest::proptest! {
        #[test]
        fn random_plans_validate(p in strategies::problem(40)) {
            let plan = plan(&p);
            proptest::prop_assert!(check(&p, &plan).is_ok(), "{:?}", check(&p, &plan));
        }
    }
}
