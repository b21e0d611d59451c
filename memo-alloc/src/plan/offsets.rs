//! Offsets for one context's problem, within the allocator's budget.
//!
//! `best` as `memo plan` runs it spends its whole exact-search budget even when its
//! portfolio's plan is within a hair of the lower bound: on a pass of a few thousand
//! buffers, tens of seconds and a hundred MB or more to gain nothing (the search's
//! section and conflict tables grow with the pairs of buffers alive together). The
//! allocator plans on its planner thread while the key's passes run on the backend, and
//! what the planner allocates stays in the backend's arenas, so it stops earlier:
//!
//! 1. one sweep in allocation order (`greedy-in-order`, about 16 bytes per buffer): a
//!    plan within [`best::NEAR_LINEAR_GAP_PER_MILLE`] per mille of the lower bound is
//!    kept, as the portfolio (about 700 bytes per buffer, and tens to hundreds of
//!    milliseconds) could gain less than that;
//! 2. on a problem with few enough pairs of buffers alive together ([`LARGE_PAIRS`]) and a
//!    best-fit index within [`BEST_FIT_MEMORY`] (or the slab's lower bound), one
//!    best-fit pass by size (`greedy-by-size`, within a pass's work limit), kept on the
//!    same terms: where one sweep lands a few per cent above the bound, it mostly plans
//!    as the portfolio does, in a fraction of its time;
//! 3. `strip-packing` within [`STRIP_PACKING_MEMORY`], kept on the same terms: where
//!    both greedy passes stay a tenth or more above the bound (a network's wide
//!    activations of three sizes 1% apart, each alive across the next one's start:
//!    candle's EfficientNet-B0, 33,000 buffers, 1.12x and 1.24x), it often plans at the
//!    bound in half the portfolio's time and less than half its memory;
//! 4. otherwise the portfolio without its inner exact step (heuristics and iterated
//!    greedy), then the exact search only on instances of at most [`EXACT_MAX_BUFFERS`]
//!    buffers whose plan is more than [`GAP_PER_MILLE`] per mille above the lower bound,
//!    with a node budget of [`NODES`] and a wall-clock cap of [`TIME_CAP`]. A pass whose
//!    best-fit queries see thousands of live buffers each, or whose best-fit index would
//!    pass the memory of step 2, is planned by the portfolio's near-linear heuristics
//!    alone (`BestOptions::pass_work`, `BestOptions::best_fit_memory`). A portfolio after
//!    step 3 runs `strip-packing` again among its strategies: a fraction of its time.
//!
//! Other strategies run as named.

use std::time::Duration;

use memo_planner::offsets::best::{self, BestOptions};
use memo_planner::offsets::exact::{self, ExactOptions};
use memo_planner::offsets::{greedy_by_size, strip_packing};
use memo_planner::{offsets_lower_bound, validate_offsets, OffsetPlan, OffsetStrategy, Problem};

/// A plan this close to the lower bound (per mille of it) is not searched further.
pub(crate) const GAP_PER_MILLE: u64 = 5;

/// Largest instance the exact search runs on (its tables grow with the conflicting
/// pairs: at most about half a million here).
pub(crate) const EXACT_MAX_BUFFERS: usize = 1024;

/// Node budget of the exact search (the planner's own default is 32 million per racer;
/// tight instances of up to 1,024 buffers get all of it, about 0.1 s here).
pub(crate) const NODES: u64 = 200_000;

/// Most memory `strip-packing` may take (its range tree: about 200 bytes per buffer). The
/// planner's heap is part of the program's peak resident size, and what strip-packing
/// gains over `greedy-in-order` (forwards or backwards) on a pass of hundreds of
/// thousands of buffers is a few per cent of a slab, once per instance: far less than
/// its tree. Passes of up to about 100,000 buffers stay within it.
pub(crate) const STRIP_PACKING_MEMORY: u64 = 32 << 20;

/// A pass with more pairs of buffers alive together is planned by the near-linear
/// heuristics without a first best-fit pass (`BestOptions::large_pairs`): eight times the
/// pass work limit, above the highest pairs-to-work ratio measured (6.4, iopddl `Y_1`).
/// A pass of a billion such pairs saves the best-fit pass's tables (tens of MB).
pub(crate) const LARGE_PAIRS: u64 = 8 * best::PASS_WORK;

/// Least memory the best-fit passes may take, two at a time as the portfolio runs them
/// (each holds an index of `best::best_fit_index_bytes`); a pass whose slab's lower bound
/// is larger may take as much as that bound. A pass of many short-lived buffers whose
/// address ranges seldom merge needs tens of index entries per buffer (about 500 bytes:
/// 65 MB and a second for a pass by size over 100,000 buffers, 400 MB and 9 s over
/// 684,000) to save what one sweep loses over the bound, a fraction of a slab, which
/// `strip-packing` mostly saves in less: planning on the backend's heap must not cost
/// the program many times the memory it plans.
pub(crate) const BEST_FIT_MEMORY: u64 = 32 << 20;

/// Wall-clock safety net of the whole plan's exact phase.
pub(crate) const TIME_CAP: Duration = Duration::from_secs(1);

/// Which step of [`plan`] made a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A strategy other than `best`, run as named.
    Named,
    /// One sweep in allocation order, within the gap.
    Sweep,
    /// One best-fit pass by size, within the gap.
    BySize,
    /// `strip-packing`, within the gap.
    StripPacking,
    /// `best`'s portfolio.
    Portfolio,
    /// The exact search after the portfolio.
    Exact,
}

/// Plans `problem` with `strategy`, within the allocator's budget when it is `best`.
pub(crate) fn plan(strategy: OffsetStrategy, problem: &Problem) -> OffsetPlan {
    plan_routed(strategy, problem).0
}

/// As [`plan`], with the step that made the plan.
pub(crate) fn plan_routed(strategy: OffsetStrategy, problem: &Problem) -> (OffsetPlan, Route) {
    if strategy != OffsetStrategy::Best {
        return (strategy.plan(problem), Route::Named);
    }
    let lb = offsets_lower_bound(problem);
    // One index's share of the memory of two passes at a time.
    let best_fit_memory = BEST_FIT_MEMORY.max(lb) / 2;
    let options = BestOptions {
        time_cap: Some(TIME_CAP),
        exact_max_buffers: 0,
        strip_packing_memory: Some(STRIP_PACKING_MEMORY),
        large_pairs: Some(LARGE_PAIRS),
        best_fit_memory: Some(best_fit_memory),
        ..BestOptions::default()
    };
    // Whether `plan` is within `per_mille` per mille of the lower bound.
    let within =
        |plan: &OffsetPlan, per_mille: u64| plan.height(problem) <= lb + lb / 1000 * per_mille;
    let near = |plan: &OffsetPlan| within(plan, best::NEAR_LINEAR_GAP_PER_MILLE);
    let sweep = OffsetStrategy::GreedyInOrder.plan(problem);
    if near(&sweep) {
        return (sweep, Route::Sweep);
    }
    drop(sweep);
    if best::conflicting_pairs(problem, LARGE_PAIRS) <= LARGE_PAIRS
        && best::best_fit_index_bytes(problem, best_fit_memory) <= best_fit_memory
    {
        // Checked as the portfolio checks other strategies' plans: a bug there must not
        // make overlapping slots.
        let by_size = greedy_by_size::plan_within(problem, best::PASS_WORK)
            .filter(|p| near(p) && validate_offsets(problem, p).is_ok());
        if let Some(plan) = by_size {
            return (plan, Route::BySize);
        }
    }
    if strip_packing::index_bytes(problem) <= STRIP_PACKING_MEMORY {
        let strip = OffsetStrategy::StripPacking.plan(problem);
        if near(&strip) && validate_offsets(problem, &strip).is_ok() {
            return (strip, Route::StripPacking);
        }
    }
    let start = best::portfolio(problem, &options);
    if problem.len() > EXACT_MAX_BUFFERS || within(&start, GAP_PER_MILLE) {
        return (start, Route::Portfolio);
    }
    let exact_options = ExactOptions {
        node_limit: NODES,
        min_nodes: NODES.min(20_000),
        time_cap: Some(TIME_CAP),
        ..ExactOptions::default()
    };
    (
        exact::search(problem, &start, &exact_options).plan,
        Route::Exact,
    )
}
