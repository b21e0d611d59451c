//! The two lower bounds of Pisarchyk & Lee: max operator breadth (offset plans) and the
//! sum of positional maximums (shared-objects plans).

use crate::max_add_tree::MaxAddTree;
use crate::problem::Problem;
use crate::timeline::Timeline;

/// Max operator breadth: the largest total size of buffers alive at one time.
///
/// No offset plan is lower (alignment padding aside). `O(n log n)` time and 8 bytes a
/// buffer of memory: a sweep over the buffers in order of start, those ended by then
/// leaving in order of end (the allocator computes it on passes of 350,000 buffers).
///
/// ```
/// use memo_planner::{offsets_lower_bound, Buffer, Problem};
/// let p = Problem::new(vec![
///     Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 4), Buffer::new("c", 2, 4, 16),
/// ]).unwrap();
/// assert_eq!(offsets_lower_bound(&p), 20);
/// ```
pub fn offsets_lower_bound(problem: &Problem) -> u64 {
    let buffers = problem.buffers();
    let Ok(n) = u32::try_from(buffers.len()) else {
        // Beyond 4 billion buffers: the timeline's breadths.
        let timeline = Timeline::new(problem);
        return timeline.breadths(problem).into_iter().max().unwrap_or(0);
    };
    let mut starts: Vec<u32> = (0..n).collect();
    starts.sort_unstable_by_key(|&i| buffers[i as usize].lower);
    let mut ends: Vec<u32> = (0..n).collect();
    ends.sort_unstable_by_key(|&i| buffers[i as usize].upper);
    let mut ended = ends.iter().map(|&i| &buffers[i as usize]).peekable();
    let (mut live, mut widest) = (0u128, 0u128);
    for b in starts.iter().map(|&i| &buffers[i as usize]) {
        // Half-open lifetimes: a buffer ending at `b.lower` is not alive with `b` (and
        // every buffer ending by then started before it).
        while let Some(e) = ended.next_if(|e| e.upper <= b.lower) {
            live -= e.size as u128;
        }
        live += b.size as u128;
        widest = widest.max(live);
    }
    u64::try_from(widest).unwrap_or(u64::MAX)
}

/// The positional maximums: element `r` is the largest, over all times, of the `r`-th
/// largest size alive at that time. Non-increasing; its length is the largest number of
/// buffers alive at once.
///
/// Computed in `O(n log n)`: inserting buffers in non-increasing size order into a
/// range-add/max segment tree over time, the largest live count after all buffers of size
/// at least `s` are in says how many positional maximums are at least `s`.
pub fn positional_maximums(problem: &Problem) -> Vec<u64> {
    let timeline = Timeline::new(problem);
    let mut order: Vec<usize> = (0..problem.len()).collect();
    let buffers = problem.buffers();
    order.sort_by_key(|&i| std::cmp::Reverse(buffers[i].size));
    let mut tree = MaxAddTree::new(timeline.slots());
    let mut maxima = Vec::new();
    let mut k = 0;
    while k < order.len() {
        let size = buffers[order[k]].size;
        while k < order.len() && buffers[order[k]].size == size {
            let (s, e) = timeline.span(order[k]);
            tree.add(s, e, 1);
            k += 1;
        }
        let count = tree.max() as usize;
        maxima.resize(maxima.len().max(count), size);
    }
    maxima
}

/// Sum of positional maximums: no shared-objects plan has a smaller total.
///
/// ```
/// use memo_planner::{shared_objects_lower_bound, Buffer, Problem};
/// // TFLite's ChainRecords (inclusive op intervals converted to half-open).
/// let recs = [(16, 0, 2), (8, 1, 3), (64, 2, 4), (32, 3, 5), (8, 4, 6)];
/// let p = Problem::new(recs.iter().enumerate()
///     .map(|(i, &(s, l, u))| Buffer::new(i.to_string(), l, u, s)).collect()).unwrap();
/// assert_eq!(shared_objects_lower_bound(&p), 96);
/// ```
pub fn shared_objects_lower_bound(problem: &Problem) -> u64 {
    positional_maximums(problem).iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Buffer;

    /// TFLite records are `(size, first, last)` with inclusive ends.
    fn tflite(recs: &[(u64, u64, u64)]) -> Problem {
        Problem::new(
            recs.iter()
                .enumerate()
                .map(|(i, &(s, f, l))| Buffer::new(i.to_string(), f, l + 1, s))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn tflite_positional_maximums() {
        let chain = tflite(&[(16, 0, 1), (8, 1, 2), (64, 2, 3), (32, 3, 4), (8, 4, 5)]);
        assert_eq!(positional_maximums(&chain), vec![64, 32]);
        assert_eq!(offsets_lower_bound(&chain), 96);
        let complex = tflite(&[
            (32, 0, 1),
            (32, 1, 4),
            (8, 2, 5),
            (16, 3, 5),
            (8, 4, 5),
            (64, 5, 7),
            (8, 6, 8),
            (8, 7, 8),
            (16, 8, 9),
        ]);
        assert_eq!(positional_maximums(&complex), vec![64, 32, 8, 8]);
        assert_eq!(shared_objects_lower_bound(&complex), 112);
        assert_eq!(offsets_lower_bound(&complex), 96);
    }

    #[test]
    fn empty_problem_has_zero_bounds() {
        let p = Problem::default();
        assert_eq!(offsets_lower_bound(&p), 0);
        assert!(positional_maximums(&p).is_empty());
    }

    #[test]
    fn half_open_ends_do_not_add_up() {
        let p = Problem::new(vec![Buffer::new("a", 0, 5, 10), Buffer::new("b", 5, 9, 10)]).unwrap();
        assert_eq!(offsets_lower_bound(&p), 10);
        assert_eq!(positional_maximums(&p), vec![10]);
    }

    /// Brute force over every endpoint, for comparison.
    fn brute(p: &Problem) -> (u64, Vec<u64>) {
        let mut lb = 0;
        let mut pm: Vec<u64> = Vec::new();
        for t in p.buffers().iter().map(|b| b.lower) {
            let mut live: Vec<u64> = p
                .buffers()
                .iter()
                .filter(|b| b.lower <= t && t < b.upper)
                .map(|b| b.size)
                .collect();
            live.sort_unstable_by(|a, b| b.cmp(a));
            lb = lb.max(live.iter().sum());
            for (r, s) in live.into_iter().enumerate() {
                if r == pm.len() {
                    pm.push(s);
                } else {
                    pm[r] = pm[r].max(s);
                }
            }
        }
        (lb, pm)
    }

    proptest::proptest! {
        #[test]
        fn bounds_match_brute_force(recs in proptest::collection::vec((0u64..30, 1u64..10, 1u64..100), 0..40)) {
            let p = Problem::new(recs.iter().enumerate()
                .map(|(i, &(l, len, s))| Buffer::new(i.to_string(), l, l + len, s)).collect()).unwrap();
            let (lb, pm) = brute(&p);
            proptest::prop_assert_eq!(offsets_lower_bound(&p), lb);
            proptest::prop_assert_eq!(positional_maximums(&p), pm);
        }
    }
}
