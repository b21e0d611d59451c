//! `greedy-in-order`: not written yet; plans with Greedy by Size meanwhile.

use crate::plan::OffsetPlan;
use crate::problem::Problem;

/// Placeholder: Greedy by Size.
pub fn plan(problem: &Problem) -> OffsetPlan {
    crate::offsets::greedy_by_size::plan(problem)
}
