//! `exact`: a complete branch-and-bound search in the style of MiniMalloc (Moffitt,
//! ASPLOS '23), minimising the height within a node budget, or deciding one capacity.
//!
//! # Method
//!
//! [`decide`] answers "do all buffers fit under `capacity`?" by a depth-first search over
//! canonical packings with section inference (the unallocated floor), dominance, symmetry
//! breaking for identical buffers, the level and top rules (sections with no room for a
//! gap need buffers at the current level, or on top of the buffer just placed, with
//! disjoint spans) and dynamic temporal decomposition into independent sub-problems, each
//! with its own preorder (see the `decide` module). [`search`] minimises the height from a valid start plan (the caller's:
//! the `exact` strategy passes the `best` portfolio's plan) by a schedule of such probes
//! (the `schedule` module): a probe at the lower bound, then a descent from the best
//! height found, in steps that grow while probes succeed. Each probe after the first is a
//! *race* of two deciders with different preorders (the `race` module), one per core
//! with [`ExactOptions::parallel`], decided by node counts so that the answer does not
//! depend on the threads; the descent's racers restart randomised preorders on the Luby
//! sequence.
//!
//! Where the capacity leaves no slack in (nearly) any section, as in an exact tiling, a
//! *skyline race* runs before the deciders (the `skyline` module): a bottom-left search
//! that fills the lowest point of the placed buffers' outline with a buffer starting
//! exactly there. It packs all 24 exact tilings of 200-500 buffers of the benchmarks at
//! their bound in at most 2.5 s.
//!
//! # Complexity and budget
//!
//! The search is exponential in the worst case. A node costs `O(k + s + m log m)` for the
//! `k` conflicting buffers of the buffer placed, the sections `s` whose floor may move and
//! the `m` unplaced buffers of its sub-problem (the candidate order). Budgets count nodes
//! (placements tried), so results are deterministic: [`ExactOptions::nodes_for`] gives
//! `node_limit` nodes to instances of up to [`NODE_SCALE_BUFFERS`] buffers and
//! proportionally fewer above (a node costs time proportional to the sub-problem), and
//! [`ExactOptions::nodes_for_tight`] to tight instances of up to [`TIGHT_SCALE_BUFFERS`].
//! The wall-time cap (30 s by default) is only a safety net; when it fires, the result
//! depends on the machine.
//! No search is made above [`ExactOptions::max_buffers`] buffers or 8 million conflicting
//! pairs. The returned plan is always valid and never higher than the start plan.

mod decide;
mod order;
mod race;
mod schedule;
mod skyline;
mod sweep;

use std::time::Duration;

use crate::bounds::offsets_lower_bound;
use crate::plan::OffsetPlan;
use crate::problem::Problem;

pub use schedule::search;

/// Budgets of the exact search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactOptions {
    /// Search nodes (placements tried) for an instance of up to [`NODE_SCALE_BUFFERS`]
    /// buffers; larger instances get proportionally fewer, never fewer than
    /// [`ExactOptions::min_nodes`]. Each of the two racers has this budget (a quarter of
    /// it for the race at the lower bound, the rest for the descent; on a tight instance
    /// seven eighths of [`ExactOptions::nodes_for_tight`] at the bound).
    pub node_limit: u64,
    /// The node budget never drops below this (nor above `node_limit`).
    pub min_nodes: u64,
    /// Wall-time safety net over the whole search; `None` for none.
    pub time_cap: Option<Duration>,
    /// Above this many buffers no search is made and the start plan is returned.
    pub max_buffers: usize,
    /// Run the two racers of each probe on two threads once the search turns out to be
    /// hard (the result does not depend on it).
    pub parallel: bool,
}

impl Default for ExactOptions {
    fn default() -> ExactOptions {
        ExactOptions {
            node_limit: 32_000_000,
            min_nodes: 20_000,
            time_cap: Some(Duration::from_secs(30)),
            max_buffers: 50_000,
            parallel: true,
        }
    }
}

/// Instance size up to which [`ExactOptions::node_limit`] applies unscaled.
pub const NODE_SCALE_BUFFERS: usize = 256;

/// Instance size from which [`ExactOptions::node_limit`] applies unscaled (below, the
/// budget falls with `n³`: an instance of 200 buffers gets about half of it, which keeps
/// the property tests, thousands of small instances, quick).
pub const NODE_RAMP_BUFFERS: usize = 250;

/// On a tight instance, the size up to which [`ExactOptions::node_limit`] applies unscaled
/// (see [`ExactOptions::nodes_for_tight`]).
pub const TIGHT_SCALE_BUFFERS: usize = 1024;

impl ExactOptions {
    /// The node budget for an instance of `n` buffers: `node_limit` from
    /// [`NODE_RAMP_BUFFERS`] to [`NODE_SCALE_BUFFERS`] buffers; below, a share that grows
    /// with `n³` (small instances have small search spaces, and the property tests plan
    /// thousands of them); above, proportionally less (a node costs more). Never below
    /// `min_nodes` (nor above `node_limit`).
    pub fn nodes_for(&self, n: usize) -> u64 {
        self.scaled(n, NODE_SCALE_BUFFERS)
    }

    /// The node budget for an instance of `n` buffers tight at the capacity (at least 9
    /// in 10 sections hold it to within a granule, as in an exact tiling): as
    /// [`ExactOptions::nodes_for`], but unscaled up to [`TIGHT_SCALE_BUFFERS`] buffers.
    /// There the packings at the bound come from short randomised attempts whose odds
    /// fall with the size (on the hardest exact tilings of 500 buffers, one packing in
    /// tens of millions of nodes), while a node costs about the same from 200 to 500
    /// buffers (0.5 µs on exact tilings), so the whole budget takes about as long.
    pub fn nodes_for_tight(&self, n: usize) -> u64 {
        self.scaled(n, TIGHT_SCALE_BUFFERS)
    }

    fn scaled(&self, n: usize, scale: usize) -> u64 {
        let n = n.max(1) as u128;
        let limit = self.node_limit as u128;
        let (ramp, scale) = (NODE_RAMP_BUFFERS as u128, scale as u128);
        let scaled = if n < ramp {
            limit * n * n * n / (ramp * ramp * ramp)
        } else if n <= scale {
            limit
        } else {
            limit * scale / n
        };
        (scaled as u64).max(self.min_nodes.min(self.node_limit))
    }
}

/// The result of [`search`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactOutcome {
    /// The best plan found (never higher than the start plan).
    pub plan: OffsetPlan,
    /// Its height.
    pub height: u64,
    /// The best lower bound known: the max load, raised by every capacity proven
    /// infeasible.
    pub lower_bound: u64,
    /// Whether the height is proven optimal (`height == lower_bound`).
    pub optimal: bool,
    /// Search nodes used (over both threads).
    pub nodes: u64,
}

/// The answer of [`decide`] at one capacity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A plan whose height is at most the capacity.
    Feasible(OffsetPlan),
    /// Proven: no plan fits under the capacity.
    Infeasible,
    /// The budget ran out before an answer.
    Unknown,
}

/// Minimises the height from `start` (a valid plan) with the default budgets.
pub fn plan(problem: &Problem, start: &OffsetPlan) -> OffsetPlan {
    search(problem, start, &ExactOptions::default()).plan
}

/// Decides whether `problem` fits under `capacity` (MiniMalloc's decision mode) by one
/// race of the two racers (on two threads with [`ExactOptions::parallel`]; the answer
/// does not depend on it), each within the node budget of `options`; when the instance
/// is tight at `capacity`, both on randomised area orders (as the search does at the
/// lower bound).
pub fn decide(problem: &Problem, capacity: u64, options: &ExactOptions) -> Decision {
    if problem.is_empty() {
        return Decision::Feasible(OffsetPlan::default());
    }
    if offsets_lower_bound(problem) > capacity {
        return Decision::Infeasible;
    }
    if problem.len() > options.max_buffers {
        return Decision::Unknown;
    }
    let Some(sw) = sweep::Sweep::new(problem, schedule::MAX_CONFLICT_PAIRS) else {
        return Decision::Unknown;
    };
    let bar = std::sync::atomic::AtomicU64::new(u64::MAX);
    let mut race = race::Race::new(&sw, &bar, options.parallel);
    let mut limit = options.nodes_for(problem.len());
    let clock = std::time::Instant::now();
    if schedule::is_tight(&sw, capacity) {
        race.set_rotations(&race::TIGHT_FIRST, &race::TIGHT_SECOND);
        limit = options.nodes_for_tight(problem.len());
        if let (Some(offsets), _) =
            schedule::skyline_probe(problem, capacity, limit, clock, options)
        {
            return Decision::Feasible(OffsetPlan { offsets });
        }
    }
    match race.probe(capacity, limit, clock, options.time_cap).probe {
        decide::Probe::Found(offsets) => Decision::Feasible(OffsetPlan { offsets }),
        decide::Probe::Infeasible => Decision::Infeasible,
        decide::Probe::Unknown => Decision::Unknown,
    }
}

#[cfg(test)]
mod tests;
