//! `min-cost-flow`: not written yet; one object per buffer meanwhile.

use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;

/// Placeholder: naive.
pub fn plan(problem: &Problem) -> SharedObjectsPlan {
    crate::shared::naive::plan(problem)
}
