//! Offset strategies: every buffer gets an address in one arena; the goal is the lowest
//! arena height.

use std::fmt;
use std::str::FromStr;

use crate::plan::OffsetPlan;
use crate::problem::Problem;

pub mod best;
#[cfg(test)]
mod cases;
pub mod exact;
pub mod greedy_by_breadth;
pub mod greedy_by_size;
pub mod greedy_in_order;
pub mod naive;
pub(crate) mod placer;
pub mod strip_packing;

/// An offset-planning strategy, by its contract name.
///
/// ```
/// use memo_planner::{validate_offsets, Buffer, OffsetStrategy, Problem};
/// let p = Problem::new(vec![Buffer::new("a", 0, 2, 8), Buffer::new("b", 2, 4, 8)]).unwrap();
/// let s: OffsetStrategy = "greedy-by-size".parse().unwrap();
/// let plan = s.plan(&p);
/// assert_eq!(validate_offsets(&p, &plan), Ok(8));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OffsetStrategy {
    /// `naive`: every buffer its own range, end to end.
    Naive,
    /// `greedy-by-size`: Pisarchyk & Lee, Algorithm 3 (size descending, best-fit gap).
    GreedyBySize,
    /// `greedy-by-breadth`: Pisarchyk & Lee §5.3 (operators by breadth, then size).
    GreedyByBreadth,
    /// `greedy-in-order`: the online best fit of Lee et al. 2019 in order of first use.
    GreedyInOrder,
    /// `strip-packing`: the best-fit strip-packing heuristic of Sekiyama et al. 2018.
    StripPacking,
    /// `exact`: branch and bound (MiniMalloc's rules plus decomposition) within a node
    /// budget, from the `best` portfolio's plan, keeping the best plan found.
    Exact,
    /// `best`: the portfolio of all heuristics plus improvement steps; the smallest wins.
    Best,
}

impl OffsetStrategy {
    /// Every offset strategy, in the order reports list them.
    pub const ALL: [OffsetStrategy; 7] = [
        OffsetStrategy::Naive,
        OffsetStrategy::GreedyBySize,
        OffsetStrategy::GreedyByBreadth,
        OffsetStrategy::GreedyInOrder,
        OffsetStrategy::StripPacking,
        OffsetStrategy::Exact,
        OffsetStrategy::Best,
    ];

    /// The contract name (`greedy-by-size`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OffsetStrategy::Naive => "naive",
            OffsetStrategy::GreedyBySize => "greedy-by-size",
            OffsetStrategy::GreedyByBreadth => "greedy-by-breadth",
            OffsetStrategy::GreedyInOrder => "greedy-in-order",
            OffsetStrategy::StripPacking => "strip-packing",
            OffsetStrategy::Exact => "exact",
            OffsetStrategy::Best => "best",
        }
    }

    /// Plans `problem` with this strategy (default budgets for `exact` and `best`).
    pub fn plan(self, problem: &Problem) -> OffsetPlan {
        match self {
            OffsetStrategy::Naive => naive::plan(problem),
            OffsetStrategy::GreedyBySize => greedy_by_size::plan(problem),
            OffsetStrategy::GreedyByBreadth => greedy_by_breadth::plan(problem),
            OffsetStrategy::GreedyInOrder => greedy_in_order::plan(problem),
            OffsetStrategy::StripPacking => strip_packing::plan(problem),
            OffsetStrategy::Exact => exact::plan(
                problem,
                &best::portfolio(problem, &best::BestOptions::default()),
            ),
            OffsetStrategy::Best => best::plan(problem),
        }
    }
}

impl fmt::Display for OffsetStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown strategy name; its message lists the known ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownStrategy {
    /// The name that was asked for.
    pub name: String,
    /// The names that exist in that family.
    pub known: Vec<&'static str>,
}

impl fmt::Display for UnknownStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown strategy {:?}; expected one of: {}",
            self.name,
            self.known.join(", ")
        )
    }
}

impl std::error::Error for UnknownStrategy {}

impl FromStr for OffsetStrategy {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<OffsetStrategy, UnknownStrategy> {
        OffsetStrategy::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| UnknownStrategy {
                name: s.to_string(),
                known: OffsetStrategy::ALL.iter().map(|s| s.name()).collect(),
            })
    }
}
