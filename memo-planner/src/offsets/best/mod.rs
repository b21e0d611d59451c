//! `best`: a portfolio of heuristics, an exact search on small instances and an
//! iterated-greedy improvement phase; the smallest plan wins.
//!
//! # Method
//!
//! 1. **Portfolio.** The other heuristic strategies (`greedy-by-breadth`, `greedy-in-order`,
//!    `strip-packing`, `greedy-by-size`, called through [`OffsetStrategy`]) run, and so does
//!    best-fit placement (the gap rule of Pisarchyk & Lee's Algorithm 3) under five static
//!    orderings, all descending: "contention" (the largest operator breadth over the
//!    buffer's lifetime, as in TelaMalloc) then size; area (size x lifetime); size (this is
//!    Greedy by Size, offset for offset); size then lifetime (XLA's spatial order); lifetime
//!    then size.
//! 2. **Exact search.** For at most [`BestOptions::exact_max_buffers`] buffers, the branch and
//!    bound of [`crate::offsets::exact`] starts from the best static plan with a node budget
//!    ([`BestOptions::exact_nodes`] plus `2n`). Its first probe is at the lower bound; on DNN
//!    traces it often packs there after a few backtracks (resnet50: about 1,500 nodes;
//!    `dnn_trace(5000, 9)`, where greedy by size is 0.34% above, 15,000).
//! 3. **Improvement (iterated greedy / squeaky wheel).** From the best static ordering, one
//!    to three of the buffers whose top is at the current peak move earlier in the order by
//!    a seeded-random distance, and the whole order is replanned. A move is kept when the
//!    height does not grow (so plateaus are crossed); the best plan seen is remembered; after
//!    64 rejected moves in a row the walk restarts from the best order.
//!
//! Every phase stops as soon as the height equals [`offsets_lower_bound`] (proven optimal);
//! the other strategies that have not started by then are skipped.
//!
//! **Large problems.** Every best-fit pass (ours and `greedy-by-size`, `greedy-by-breadth`)
//! has a work limit, [`BestOptions::pass_work`]. The first pass runs before anything else;
//! if it goes past the limit, a query costs about the number of buffers alive at its time
//! (an `O(n * live)` pass: 700 million ranges, 5 s, on candle's MobileNetV4-small, 350,000
//! buffers with 3,000 alive on average), and the plan is made by the near-linear
//! `greedy-in-order`, or `strip-packing` when that is not within
//! [`NEAR_LINEAR_GAP_PER_MILLE`] of the bound; see [`portfolio_report`]. Within the limit, the
//! limit changes nothing. Callers whose planning memory counts (the allocator) can also declare a
//! problem large up front by its [`conflicting_pairs`] ([`BestOptions::large_pairs`]) and
//! cap strip-packing's memory ([`BestOptions::strip_packing_memory`]; past the cap,
//! `greedy-in-order` backwards stands in for it).
//!
//! # Complexity
//!
//! One best-fit pass costs `O(n log T)` index updates plus, per buffer, a merge of the
//! `O(log T)` sorted lists of occupied address ranges that its query gathers (see
//! the shared placer's `GapIndex`: the lists hold unions of ranges, so on DNN traces they are
//! much shorter than the number of conflicting buffers). The improvement phase is bounded
//! by a *work budget* counted in ranges visited by the queries plus one per placement:
//! [`BestOptions::work_passes`] times the work of the first pass (fewer passes above
//! [`BestOptions::work_scale_buffers`] buffers, in proportion, so that a 100,000-buffer
//! pass of the allocator plans in about a second on one core), clamped to
//! [`BestOptions::min_work`]..[`BestOptions::max_work`]; it runs only when that budget
//! holds a whole pass. The exact step is bounded by its node budget. Each pass is bounded
//! by [`BestOptions::pass_work`] (above).
//!
//! # Determinism
//!
//! The result depends only on the problem and the options: budgets and limits count work
//! and nodes, not time; the random choices come from a seeded xorshift generator; the other
//! strategies may run on a second thread, but their plans are compared afterwards in a
//! fixed order, ties going to our own plan, and they are skipped only when our plan is
//! already at the lower bound (where they could not win). [`BestOptions::time_cap`] is only
//! a safety net, far above what the benchmarks need; if it fires, the result can depend on
//! the machine.

mod search;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bounds::offsets_lower_bound;
use crate::offsets::exact;
use crate::offsets::OffsetStrategy;
use crate::offsets::{greedy_by_breadth, greedy_by_size, greedy_in_order, strip_packing};
use crate::plan::OffsetPlan;
use crate::problem::Problem;
use search::{own_search, static_order, Engine, FirstPass};

/// Below this many buffers everything runs on the calling thread.
const PARALLEL_MIN_BUFFERS: usize = 4096;

/// Budgets and switches of [`plan_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BestOptions {
    /// Work budget of the improvement phase, as a multiple of the work of one best-fit pass
    /// (work = conflicting ranges visited by the placement queries, plus one per placement).
    pub work_passes: u64,
    /// Above this many buffers the improvement phase gets proportionally fewer passes
    /// (`work_passes * work_scale_buffers / n`, at least one).
    pub work_scale_buffers: usize,
    /// The improvement budget is at least this much work, so that small instances get a
    /// fair number of rounds.
    pub min_work: u64,
    /// The improvement budget is at most this much work, so that huge instances stay fast.
    pub max_work: u64,
    /// Seed of the random generator used by the improvement phase.
    pub seed: u64,
    /// Whether to also run the other heuristic strategies of [`OffsetStrategy`].
    pub run_other_strategies: bool,
    /// Run the other strategies on a second thread when there are many buffers (the result
    /// does not depend on it).
    pub parallel: bool,
    /// Run the exact search of [`crate::offsets::exact`] when there are at most this many
    /// buffers (0 disables it).
    pub exact_max_buffers: usize,
    /// Node budget of that exact search, on top of two nodes per buffer (one complete
    /// descent places every buffer once).
    pub exact_nodes: u64,
    /// Safety net: stop improving after this much wall time. Not meant to be reached; when
    /// it is, the result may depend on the machine's speed.
    pub time_cap: Option<Duration>,
    /// Budgets of the final exact search (the defaults are those of the `exact` strategy).
    pub exact: exact::ExactOptions,
    /// Work limit of one best-fit pass (occupied address ranges visited by its queries,
    /// about 7 ns each here): a problem whose first pass goes past it is planned by the
    /// near-linear heuristics alone (see [`portfolio_report`]).
    pub pass_work: u64,
    /// Largest memory (bytes) `strip-packing` may take on a large problem (see
    /// [`strip_packing::index_bytes`]); past it, the plan is the better of
    /// `greedy-in-order` run forwards and backwards. `None`: no limit. The allocator
    /// plans on its own heap, whose peak is part of the program's.
    pub strip_packing_memory: Option<u64>,
    /// A problem with more pairs of buffers alive together than this is large without a
    /// first best-fit pass (see [`conflicting_pairs`]): that pass's tables (about 130
    /// bytes per buffer) and its work up to [`BestOptions::pass_work`] would be spent for
    /// nothing. `None`: the first pass always runs. The work of a whole first pass is
    /// below the pair count (ranges of neighbouring buffers merge): candle's
    /// MobileNetV4-small has 1.14 billion pairs for 700 million ranges visited, the
    /// iopddl `Y_1` trace 180 million for 28 million.
    pub large_pairs: Option<u64>,
    /// A problem whose best-fit index could take more than this many bytes (see
    /// [`best_fit_index_bytes`]) is large without a first best-fit pass: on many
    /// short-lived buffers whose address ranges seldom merge, the index holds tens of
    /// entries per buffer, and the pass's time goes to keeping its lists sorted rather than
    /// to the queries [`BestOptions::pass_work`] counts. `None`: no limit.
    pub best_fit_memory: Option<u64>,
}

impl Default for BestOptions {
    fn default() -> BestOptions {
        BestOptions {
            work_passes: 40,
            work_scale_buffers: 8_192,
            min_work: 200_000,
            max_work: 8_000_000,
            seed: 0x5EED_0FBE,
            run_other_strategies: true,
            parallel: true,
            exact_max_buffers: 16_384,
            exact_nodes: 10_000,
            time_cap: Some(Duration::from_secs(30)),
            exact: exact::ExactOptions::default(),
            pass_work: PASS_WORK,
            strip_packing_memory: None,
            large_pairs: None,
            best_fit_memory: None,
        }
    }
}

/// Default [`BestOptions::pass_work`]: about 0.3 s of queries on this machine. The first
/// pass of `fixtures::dnn_trace(100_000, 1)` takes 1.4 million, the iopddl `Y_1` trace's
/// (62,185 buffers) 28 million, candle's MobileNetV4-small's (349,533) 700 million.
pub const PASS_WORK: u64 = 48_000_000;

/// Plans with the default [`BestOptions`].
pub fn plan(problem: &Problem) -> OffsetPlan {
    plan_with(problem, &BestOptions::default())
}

/// Plans with the given options: the portfolio, then the exact search of
/// [`crate::offsets::exact`] from the portfolio's plan with `options.exact`. With the default
/// options this is exactly what the `exact` strategy computes, so `best` is never worse
/// than any single strategy.
pub fn plan_with(problem: &Problem, options: &BestOptions) -> OffsetPlan {
    let start = portfolio(problem, options);
    exact::search(problem, &start, &options.exact).plan
}

/// The heuristics, their orderings, a small exact step and iterated greedy, without the
/// final exact search: the start plan of the `exact` strategy.
pub fn portfolio(problem: &Problem, options: &BestOptions) -> OffsetPlan {
    portfolio_report(problem, options).0
}

/// What [`portfolio_report`] did, apart from its plan. Deterministic, as the plan is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortfolioReport {
    /// The first best-fit pass went past [`BestOptions::pass_work`]: only the near-linear
    /// heuristics (`greedy-in-order`, `strip-packing`) made the plan.
    pub large: bool,
    /// Best-fit passes of the portfolio's own engine, complete or stopped at their limit.
    pub passes: u64,
    /// Work of those passes (occupied ranges visited by their queries, plus one per
    /// query).
    pub work: u64,
}

/// As [`portfolio`], with what it did.
///
/// The first best-fit pass (the contention order) runs with a work limit of
/// [`BestOptions::pass_work`]; within it, the limit changes nothing.
/// Past it, the problem is *large*: a best-fit query costs about the number of buffers
/// alive at its time (candle's MobileNetV4-small: 350,000 buffers, 3,000 alive on
/// average, 700 million ranges visited per pass, 5 s), so neither the other orders, the
/// improvement phase nor the best-fit strategies (`greedy-by-size`, `greedy-by-breadth`)
/// run; the plan is `greedy-in-order`'s (a sweep, `O(n log n)`) if it is within
/// [`NEAR_LINEAR_GAP_PER_MILLE`] of the bound, else the better of it and
/// `strip-packing`'s (`O(n log T log n)`).
pub fn portfolio_report(problem: &Problem, options: &BestOptions) -> (OffsetPlan, PortfolioReport) {
    let n = problem.len();
    if n == 0 {
        return (OffsetPlan::default(), PortfolioReport::default());
    }
    let start = Instant::now();
    let lb = offsets_lower_bound(problem);
    // A large problem's plan, after `passes` best-fit passes of `work`.
    let large = |passes, work| {
        let report = PortfolioReport {
            large: true,
            passes,
            work,
        };
        (
            near_linear(problem, lb, options.strip_packing_memory),
            report,
        )
    };
    if let Some(limit) = options.large_pairs {
        if conflicting_pairs(problem, limit) > limit {
            return large(0, 0);
        }
    }
    if let Some(limit) = options.best_fit_memory {
        if best_fit_index_bytes(problem, limit) > limit {
            return large(0, 0);
        }
    }
    let mut engine = Engine::new(problem);
    let contention = engine.contention();
    let first_order = static_order(problem, &contention, 0);
    let Some(first_h) = engine.run(&first_order, options.pass_work) else {
        let work = engine.work();
        drop(engine);
        drop(first_order);
        return large(1, work);
    };
    let first = FirstPass {
        height: first_h,
        work: engine.work(),
        offsets: engine.offsets.clone(),
        order: first_order,
    };
    // Set when our own search reaches the lower bound: the other strategies cannot beat it
    // (ties go to our plan), so the ones not started yet are skipped. The result does not
    // depend on when this happens.
    let done = AtomicBool::new(false);
    let others = || -> Vec<OffsetPlan> {
        let mut plans = Vec::new();
        if !options.run_other_strategies {
            return plans;
        }
        for s in [
            OffsetStrategy::GreedyByBreadth,
            OffsetStrategy::GreedyInOrder,
            OffsetStrategy::StripPacking,
            // Our engine's size-descending pass is the same algorithm; this guards against
            // the two drifting apart.
            OffsetStrategy::GreedyBySize,
        ] {
            if done.load(Ordering::Relaxed) {
                break;
            }
            // The best-fit strategies within the same work limit as our passes.
            let plan = match s {
                OffsetStrategy::GreedyByBreadth => {
                    greedy_by_breadth::plan_within(problem, options.pass_work)
                }
                OffsetStrategy::GreedyBySize => {
                    greedy_by_size::plan_within(problem, options.pass_work)
                }
                _ => Some(s.plan(problem)),
            };
            plans.extend(plan);
        }
        plans
    };
    let mine = || {
        let (plan, report) = own_search(problem, engine, &contention, first, lb, options, start);
        if plan.height(problem) <= lb {
            done.store(true, Ordering::Relaxed);
        }
        (plan, report)
    };
    let ((mine, report), other_plans) =
        if options.parallel && options.run_other_strategies && n >= PARALLEL_MIN_BUFFERS {
            std::thread::scope(|scope| {
                let handle = scope.spawn(others);
                let mine = mine();
                let other = handle.join().unwrap_or_default();
                (mine, other)
            })
        } else {
            let mine = mine();
            (mine, others())
        };
    (pick(problem, mine, other_plans), report)
}

/// The number of pairs of buffers alive together, counted up to just past `stop` (a
/// sweep over the sorted lifetime ends: `O(n log n)` time, `16n` bytes).
///
/// ```
/// use memo_planner::offsets::best::conflicting_pairs;
/// use memo_planner::{Buffer, Problem};
/// let p = Problem::new(vec![
///     Buffer::new("a", 0, 4, 8),
///     Buffer::new("b", 1, 3, 8),
///     Buffer::new("c", 2, 5, 8),
///     Buffer::new("d", 4, 6, 8),
/// ])
/// .unwrap();
/// assert_eq!(conflicting_pairs(&p, u64::MAX), 4); // ab ac bc cd
/// assert!(conflicting_pairs(&p, 1) > 1);
/// ```
pub fn conflicting_pairs(problem: &Problem, stop: u64) -> u64 {
    let mut lowers: Vec<u64> = problem.buffers().iter().map(|b| b.lower).collect();
    let mut uppers: Vec<u64> = problem.buffers().iter().map(|b| b.upper).collect();
    lowers.sort_unstable();
    uppers.sort_unstable();
    // The k-th buffer to start meets every earlier starter not yet ended (a lifetime
    // ending where another begins does not meet it).
    let (mut ended, mut pairs) = (0usize, 0u64);
    for (k, &lower) in lowers.iter().enumerate() {
        while ended < uppers.len() && uppers[ended] <= lower {
            ended += 1;
        }
        pairs += (k - ended) as u64;
        if pairs > stop {
            break;
        }
    }
    pairs
}

/// An upper bound of the memory (bytes) of a best-fit pass's index over `problem` (the
/// sorted lists of placed address ranges, 16 bytes for each list a range is added to,
/// and 8 bytes per node of the tree over time slots), counted in `O(n log T)` without
/// building it, up to just past `stop`. Every best-fit pass holds one index; the portfolio
/// runs two passes at once on large problems.
///
/// ```
/// use memo_planner::offsets::best::best_fit_index_bytes;
/// use memo_planner::{Buffer, Problem};
/// // Two buffers alive in turn: two time slots, a tree of 4 nodes, and each range added
/// // to the root's list and to its own leaf's.
/// let p = Problem::new(vec![Buffer::new("a", 0, 1, 8), Buffer::new("b", 1, 2, 8)]).unwrap();
/// assert_eq!(best_fit_index_bytes(&p, u64::MAX), 4 * 8 + 2 * 2 * 16);
/// ```
pub fn best_fit_index_bytes(problem: &Problem, stop: u64) -> u64 {
    crate::offsets::placer::index_bytes(problem, stop)
}

/// The plan of a large problem (see [`portfolio_report`]): `greedy-in-order` if it is
/// within [`NEAR_LINEAR_GAP_PER_MILLE`] per mille of the lower bound `lb`, else the better
/// of it and `strip-packing` (`greedy-in-order` on a tie), or of it and `greedy-in-order`
/// backwards when strip-packing would take more than `strip_memory` bytes.
fn near_linear(problem: &Problem, lb: u64, strip_memory: Option<u64>) -> OffsetPlan {
    let in_order = greedy_in_order::plan(problem);
    if in_order.height(problem) <= lb + lb / 1000 * NEAR_LINEAR_GAP_PER_MILLE {
        return in_order;
    }
    let other = if strip_memory.is_some_and(|m| strip_packing::index_bytes(problem) > m) {
        greedy_in_order::plan_backwards(problem)
    } else {
        strip_packing::plan(problem)
    };
    pick(problem, in_order, vec![other])
}

/// A large problem's `greedy-in-order` plan this close to the lower bound (per mille of
/// it) is kept without running `strip-packing`, whose range tree takes 16 bytes per
/// buffer and tree level (125 MB and 1 s for 350,000 buffers). `greedy-in-order` is
/// fragile: 1.0001x the bound on one recording of candle's MobileNetV4-small, 1.094x on
/// another (strip-packing: 1.00002x on both).
pub const NEAR_LINEAR_GAP_PER_MILLE: u64 = 1;

/// The lowest of `mine` and `others` (valid ones only); ties go to `mine`, then to the
/// earlier of `others`.
fn pick(problem: &Problem, mine: OffsetPlan, others: Vec<OffsetPlan>) -> OffsetPlan {
    let n = problem.len();
    let mut best = mine;
    let mut best_h = best.height(problem);
    for p in others {
        if p.offsets.len() != n {
            continue;
        }
        let h = p.height(problem);
        if h < best_h && is_valid(problem, &p) {
            best = p;
            best_h = h;
        }
    }
    best
}

/// A cheap check of the plans of other strategies, so that a bug elsewhere cannot make
/// `best` return an invalid plan.
fn is_valid(problem: &Problem, plan: &OffsetPlan) -> bool {
    crate::validate::validate_offsets(problem, plan).is_ok()
}
