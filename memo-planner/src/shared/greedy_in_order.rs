//! `greedy-in-order`: Lee et al. 2019, TFLite's `GREEDY_IN_ORDER` (old name `GREEDY`).
//!
//! Buffers are taken in order of first use (`lower`, ties in input order). A pool holds
//! the free objects, ordered by `(size, id)`; an object returns to the pool once its last
//! buffer has ended (`upper <= lower` of the current buffer: lifetimes are half-open). For
//! each buffer the candidates are the smallest free object of size `>= size` and the
//! largest free object smaller than it; as in TFLite, the smaller one is taken only when it
//! wastes strictly less (`size - smaller < larger - size`), and is then grown to the
//! buffer's size. With no free object, a new one is created.
//!
//! Complexity: `O(n log n)` — one sort, and per buffer a few operations on a binary heap
//! of busy objects (keyed by the end of their last buffer) and on the ordered pool.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;

/// Plans `problem` with TFLite's greedy-in-order strategy.
pub fn plan(problem: &Problem) -> SharedObjectsPlan {
    let buffers = problem.buffers();
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&i| buffers[i].lower);
    let mut object_ids = vec![0usize; buffers.len()];
    let mut object_sizes: Vec<u64> = Vec::new();
    let mut pool: BTreeSet<(u64, usize)> = BTreeSet::new();
    // Objects in use, by the end of their last buffer (earliest first).
    let mut in_use: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    for &i in &order {
        let b = &buffers[i];
        while let Some(&Reverse((end, obj))) = in_use.peek() {
            if end > b.lower {
                break;
            }
            in_use.pop();
            pool.insert((object_sizes[obj], obj));
        }
        let larger = pool.range((b.size, 0)..).next().copied();
        let smaller = pool.range(..(b.size, 0)).next_back().copied();
        let pick = match (larger, smaller) {
            (Some(l), Some(s)) if b.size - s.0 < l.0 - b.size => Some(s),
            (Some(l), _) => Some(l),
            (None, s) => s,
        };
        let obj = match pick {
            Some(key) => {
                pool.remove(&key);
                let obj = key.1;
                object_sizes[obj] = object_sizes[obj].max(b.size);
                obj
            }
            None => {
                object_sizes.push(b.size);
                object_sizes.len() - 1
            }
        };
        object_ids[i] = obj;
        in_use.push(Reverse((b.upper, obj)));
    }
    SharedObjectsPlan {
        object_ids,
        object_sizes,
    }
}

#[cfg(test)]
mod tests {
    use super::super::objects::test_support::check;
    use super::*;
    use crate::fixtures::strategies;
    use crate::{Buffer, Problem};

    #[test]
    fn prefers_the_closer_size_and_grows() {
        // When c starts, objects of size 10 and 100 are free: 12 is closer to 10 (grown).
        let p = Problem::new(vec![
            Buffer::new("a", 0, 1, 10),
            Buffer::new("b", 0, 1, 100),
            Buffer::new("c", 1, 2, 12),
        ])
        .unwrap();
        let plan = plan(&p);
        assert_eq!(plan.object_ids, vec![0, 1, 0]);
        assert_eq!(check(&p, &plan), Ok(112));
    }

    proptest::proptest! {
        #[test]
        fn random_plans_validate(p in strategies::problem(40)) {
            let plan = plan(&p);
            proptest::prop_assert!(check(&p, &plan).is_ok(), "{:?}", check(&p, &plan));
        }
    }
}
