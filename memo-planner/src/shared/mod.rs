//! Shared-object strategies: whole buffers share objects (GPU-texture style); the goal
//! is the lowest sum of object sizes.

use std::fmt;
use std::str::FromStr;

use crate::offsets::UnknownStrategy;
use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;

#[cfg(test)]
mod cases;
pub mod greedy_by_breadth;
pub mod greedy_by_size;
pub mod greedy_by_size_improved;
pub mod greedy_in_order;
pub mod min_cost_flow;
pub mod naive;
pub(crate) mod objects;

/// A shared-objects strategy, by its contract name.
///
/// ```
/// use memo_planner::{validate_shared, Buffer, Problem, SharedObjectStrategy};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 2, 4, 8)]).unwrap();
/// let plan = SharedObjectStrategy::GreedyBySize.plan(&p);
/// assert_eq!(validate_shared(&p, &plan), Ok(8));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedObjectStrategy {
    /// `naive`: one object per buffer.
    Naive,
    /// `greedy-by-size`: Pisarchyk & Lee, Algorithm 2.
    GreedyBySize,
    /// `greedy-by-size-improved`: positional-maximum stages, smallest idle gap first (§4.4).
    GreedyBySizeImproved,
    /// `greedy-by-breadth`: Pisarchyk & Lee, Algorithm 1.
    GreedyByBreadth,
    /// `greedy-in-order`: Lee et al. 2019, buffers in order of first use.
    GreedyInOrder,
    /// `min-cost-flow`: Lee et al. 2019, reuse as a min-cost flow.
    MinCostFlow,
}

impl SharedObjectStrategy {
    /// Every shared-objects strategy, in the order reports list them.
    pub const ALL: [SharedObjectStrategy; 6] = [
        SharedObjectStrategy::Naive,
        SharedObjectStrategy::GreedyBySize,
        SharedObjectStrategy::GreedyBySizeImproved,
        SharedObjectStrategy::GreedyByBreadth,
        SharedObjectStrategy::GreedyInOrder,
        SharedObjectStrategy::MinCostFlow,
    ];

    /// The contract name (`greedy-by-size-improved`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SharedObjectStrategy::Naive => "naive",
            SharedObjectStrategy::GreedyBySize => "greedy-by-size",
            SharedObjectStrategy::GreedyBySizeImproved => "greedy-by-size-improved",
            SharedObjectStrategy::GreedyByBreadth => "greedy-by-breadth",
            SharedObjectStrategy::GreedyInOrder => "greedy-in-order",
            SharedObjectStrategy::MinCostFlow => "min-cost-flow",
        }
    }

    /// Plans `problem` with this strategy.
    pub fn plan(self, problem: &Problem) -> SharedObjectsPlan {
        match self {
            SharedObjectStrategy::Naive => naive::plan(problem),
            SharedObjectStrategy::GreedyBySize => greedy_by_size::plan(problem),
            SharedObjectStrategy::GreedyBySizeImproved => greedy_by_size_improved::plan(problem),
            SharedObjectStrategy::GreedyByBreadth => greedy_by_breadth::plan(problem),
            SharedObjectStrategy::GreedyInOrder => greedy_in_order::plan(problem),
            SharedObjectStrategy::MinCostFlow => min_cost_flow::plan(problem),
        }
    }
}

impl fmt::Display for SharedObjectStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SharedObjectStrategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<SharedObjectStrategy, UnknownStrategy> {
        SharedObjectStrategy::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| UnknownStrategy {
                name: s.to_string(),
                known: SharedObjectStrategy::ALL.iter().map(|s| s.name()).collect(),
            })
    }
}
