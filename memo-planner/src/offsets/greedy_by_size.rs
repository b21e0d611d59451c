//! `greedy-by-size`: Pisarchyk & Lee, Algorithm 3.
//!
//! Buffers in non-increasing size order (ties keep input order); each goes into the
//! smallest gap, among the already placed buffers it conflicts with, that fits it, or else
//! above the highest of them. With the lifetime index the cost is `O(n log n + Σ k log k)`
//! where `k` is the number of placed buffers a buffer conflicts with.

use crate::offsets::placer::Placer;
use crate::plan::OffsetPlan;
use crate::problem::Problem;

/// Plans with Greedy by Size.
pub fn plan(problem: &Problem) -> OffsetPlan {
    let buffers = problem.buffers();
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(buffers[i].size));
    plan_in_order(problem, &order)
}

/// As [`plan`], unless the best-fit queries visit more than `work_limit` occupied ranges
/// (the placer's work counter): then `None`, after about that much work. The portfolio of
/// `best` uses it so that a pass whose queries see thousands of live buffers each (an
/// `O(n * live)` pass) does not run to its end; so does memomalloc's planner thread.
///
/// ```
/// use memo_planner::offsets::greedy_by_size::plan_within;
/// use memo_planner::{Buffer, Problem};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 1, 3, 8)]).unwrap();
/// assert_eq!(plan_within(&p, u64::MAX).unwrap().height(&p), 16);
/// ```
pub fn plan_within(problem: &Problem, work_limit: u64) -> Option<OffsetPlan> {
    let buffers = problem.buffers();
    let mut order: Vec<usize> = (0..buffers.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(buffers[i].size));
    let mut placer = Placer::new(problem);
    for &i in &order {
        placer.place_best_fit(i);
        if placer.work() > work_limit {
            return None;
        }
    }
    Some(placer.into_plan())
}

/// Places the buffers best-fit in the given order (a permutation of `0..n`).
pub(crate) fn plan_in_order(problem: &Problem, order: &[usize]) -> OffsetPlan {
    let mut placer = Placer::new(problem);
    for &i in order {
        placer.place_best_fit(i);
    }
    placer.into_plan()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::problem::Buffer;
    use crate::validate::validate_offsets;

    #[test]
    fn matches_tflite_offsets() {
        let chain = tflite_chain();
        assert_eq!(plan(&chain).offsets, vec![0, 64, 0, 64, 0]);
        let complex = tflite_complex();
        let p = plan(&complex);
        assert_eq!(p.offsets, vec![0, 32, 80, 64, 88, 0, 64, 72, 0]);
        assert_eq!(validate_offsets(&complex, &p), Ok(96));
    }

    #[test]
    fn matches_tflite_offsets_with_alignment() {
        let aligned = Problem::new(
            tflite_chain()
                .into_buffers()
                .into_iter()
                .map(|b| b.with_align(128))
                .collect(),
        )
        .unwrap();
        let p = plan(&aligned);
        assert_eq!(p.offsets, vec![0, 128, 0, 128, 0]);
        assert_eq!(validate_offsets(&aligned, &p), Ok(160));
    }

    #[test]
    fn matches_xla_best_fit_heaps() {
        for (name, problem, offsets, heap) in xla_cases() {
            let p = plan(&problem);
            assert_eq!(validate_offsets(&problem, &p), Ok(heap), "{name}");
            assert_eq!(p.offsets, offsets, "{name}");
        }
    }

    #[test]
    fn reaches_the_minimalloc_example_optimum() {
        let p = minimalloc_example();
        assert_eq!(validate_offsets(&p, &plan(&p)), Ok(12));
    }

    #[test]
    fn ties_keep_input_order() {
        let p = Problem::new(vec![Buffer::new("x", 0, 2, 8), Buffer::new("y", 0, 2, 8)]).unwrap();
        assert_eq!(plan(&p).offsets, vec![0, 8]);
    }
}
