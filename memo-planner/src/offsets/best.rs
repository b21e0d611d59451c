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
//! [`NEAR_LINEAR_GAP_PER_MILLE`] of the bound; see [`portfolio_report`]. Within the limit, everything runs as it did before the limit
//! existed. Callers whose planning memory counts (the allocator) can also declare a
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

use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bounds::offsets_lower_bound;
use crate::offsets::exact;
use crate::offsets::placer::GapFinder;
use crate::offsets::OffsetStrategy;
use crate::offsets::{greedy_by_breadth, greedy_by_size, greedy_in_order, strip_packing};
use crate::plan::OffsetPlan;
use crate::problem::Problem;
use crate::rng::Rng;
use crate::timeline::Timeline;

/// Unsuccessful rounds of the improvement phase before it restarts from the best order.
const RESTART_AFTER: u32 = 64;

/// Improvement rounds per buffer at most (see `improve`).
const ROUNDS_PER_BUFFER: u64 = 64;

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
/// [`BestOptions::pass_work`]. Within it, everything runs as before the limit existed.
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

/// Static ordering `k` of the portfolio (0..[`STATIC_ORDERS`]), most productive first, so
/// that reaching the lower bound stops early: all descending, (0) contention then size,
/// (1) area, (2) size, (3) size then lifetime, (4) lifetime then size.
fn static_order(problem: &Problem, contention: &[u64], k: usize) -> Vec<usize> {
    let b = problem.buffers();
    let life = |i: usize| b[i].upper - b[i].lower;
    let key = |i: usize| -> (u128, u64) {
        match k {
            0 => (contention[i] as u128, b[i].size),
            1 => (b[i].size as u128 * life(i) as u128, 0),
            2 => (b[i].size as u128, 0),
            3 => (b[i].size as u128, life(i)),
            _ => (life(i) as u128, b[i].size),
        }
    };
    let mut o: Vec<usize> = (0..problem.len()).collect();
    o.sort_by_key(|&i| Reverse(key(i)));
    o
}

/// Number of static orderings (see [`static_order`]).
const STATIC_ORDERS: usize = 5;

/// The first static pass, run by [`portfolio_report`] before it decides the mode.
struct FirstPass {
    height: u64,
    /// The engine's work after it.
    work: u64,
    offsets: Vec<u64>,
    order: Vec<usize>,
}

/// The static orderings of the portfolio (the first one already run), plus the
/// improvement phase, on the fast engine.
fn own_search(
    problem: &Problem,
    mut engine: Engine,
    contention: &[u64],
    first: FirstPass,
    lb: u64,
    options: &BestOptions,
    start: Instant,
) -> (OffsetPlan, PortfolioReport) {
    let n = problem.len();
    let mut report = PortfolioReport {
        large: false,
        passes: 1,
        work: first.work,
    };
    let first_pass_work = first.work;
    let mut best_h = first.height;
    let mut best_order = first.order;
    let mut best_offsets = first.offsets;
    if best_h <= lb {
        return (
            OffsetPlan {
                offsets: best_offsets,
            },
            report,
        );
    }
    for k in 1..STATIC_ORDERS {
        let order = static_order(problem, contention, k);
        report.passes += 1;
        let h = engine.run(&order, options.pass_work);
        report.work = engine.work();
        // A pass past the limit: the others would cost as much.
        let Some(h) = h else { break };
        if h < best_h {
            best_h = h;
            best_offsets.clone_from(&engine.offsets);
            best_order = order;
        }
        if best_h <= lb {
            return (
                OffsetPlan {
                    offsets: best_offsets,
                },
                report,
            );
        }
    }
    // The exact search, from the best static plan: on DNN traces it often packs at the
    // lower bound after a few backtracks.
    let mut exact_best: Option<(u64, Vec<u64>)> = None;
    if n <= options.exact_max_buffers && options.exact_nodes > 0 {
        let exact_options = exact::ExactOptions {
            node_limit: options.exact_nodes.saturating_add(2 * n as u64),
            min_nodes: u64::MAX, // a fixed budget, not scaled
            time_cap: options.time_cap,
            max_buffers: options.exact_max_buffers,
            parallel: false,
        };
        let start_plan = OffsetPlan {
            offsets: best_offsets.clone(),
        };
        let out = exact::search(problem, &start_plan, &exact_options).plan;
        let h = out.height(problem);
        if h <= lb {
            return (out, report);
        }
        if h < best_h {
            exact_best = Some((h, out.offsets));
        }
    }
    let budget = first_pass_work
        .saturating_mul(improvement_passes(options, n))
        .clamp(options.min_work, options.max_work.max(options.min_work));
    // Improvement only when a whole pass fits in its budget.
    if first_pass_work <= budget {
        let stop = engine.work().saturating_add(budget);
        let before = engine.work();
        improve(
            &mut engine,
            lb,
            options,
            stop,
            start,
            &mut best_order,
            &mut best_h,
            &mut best_offsets,
        );
        report.work = engine.work();
        report.passes += (engine.work() - before).div_ceil(first_pass_work.max(1));
    }
    let plan = match exact_best {
        Some((h, offsets)) if h < best_h => OffsetPlan { offsets },
        _ => OffsetPlan {
            offsets: best_offsets,
        },
    };
    (plan, report)
}

/// Passes of work the improvement phase may spend on `n` buffers.
fn improvement_passes(options: &BestOptions, n: usize) -> u64 {
    let scale = options.work_scale_buffers.max(1) as u128;
    let passes = options.work_passes as u128;
    if n as u128 <= scale {
        options.work_passes
    } else {
        ((passes * scale / n as u128) as u64).max(1)
    }
}

/// Iterated greedy: move peak buffers earlier, replan, keep non-worsening moves.
#[allow(clippy::too_many_arguments)]
fn improve(
    engine: &mut Engine,
    lb: u64,
    options: &BestOptions,
    stop: u64,
    start: Instant,
    best_order: &mut Vec<usize>,
    best_h: &mut u64,
    best_offsets: &mut Vec<u64>,
) {
    let n = best_order.len();
    let mut rng = Rng::new(options.seed);
    let mut cur = best_order.clone();
    let mut cur_h = *best_h;
    let mut cur_offsets = best_offsets.clone();
    let mut since_best = 0u32;
    let mut cand = Vec::with_capacity(n);
    let mut peak: Vec<usize> = Vec::new();
    // Small problems have few orders worth trying: cap the rounds so that an unreachable
    // lower bound does not spend the whole work budget on them.
    let max_rounds = ROUNDS_PER_BUFFER
        .saturating_mul(n as u64)
        .max(RESTART_AFTER as u64);
    let mut rounds = 0u64;
    while engine.work() < stop && *best_h > lb && rounds < max_rounds {
        rounds += 1;
        if options.time_cap.is_some_and(|cap| start.elapsed() > cap) {
            break;
        }
        // The buffers at the peak of the current plan.
        peak.clear();
        for (i, &o) in cur_offsets.iter().enumerate() {
            if o + engine.sizes[i] == cur_h {
                peak.push(i);
            }
        }
        // Move one or a few of them earlier by a random distance.
        cand.clear();
        cand.extend_from_slice(&cur);
        if peak.is_empty() {
            break;
        }
        let moves = 1 + (rng.below(3) as usize).min(peak.len() - 1);
        for _ in 0..moves {
            let i = peak[rng.below(peak.len() as u64) as usize];
            let p = cand.iter().position(|&x| x == i).unwrap_or(0);
            if p == 0 {
                continue;
            }
            let dist = 1 + rng.below(p as u64) as usize;
            let q = p - dist;
            cand[q..=p].rotate_right(1);
        }
        let h = engine.run(&cand, options.pass_work).unwrap_or(u64::MAX);
        if h <= cur_h {
            if h < cur_h {
                since_best = 0;
            }
            std::mem::swap(&mut cur, &mut cand);
            cur_h = h;
            cur_offsets.clone_from(&engine.offsets);
            if h < *best_h {
                *best_h = h;
                best_offsets.clone_from(&engine.offsets);
                best_order.clone_from(&cur);
            }
        } else {
            since_best += 1;
            if since_best >= RESTART_AFTER {
                // Back to the best order; the random moves will lead elsewhere.
                since_best = 0;
                cur.clone_from(best_order);
                cur_h = *best_h;
                cur_offsets.clone_from(best_offsets);
            }
        }
    }
}

/// Best-fit placement engine for repeated passes over one problem.
struct Engine {
    sizes: Vec<u64>,
    aligns: Vec<u64>,
    spans: Vec<(u32, u32)>,
    finder: GapFinder,
    /// Offsets of the last pass.
    offsets: Vec<u64>,
    breadths: Vec<u64>,
}

impl Engine {
    fn new(problem: &Problem) -> Engine {
        let timeline = Timeline::new(problem);
        let n = problem.len();
        let spans = (0..n)
            .map(|i| {
                let (s, e) = timeline.span(i);
                (s as u32, e as u32)
            })
            .collect();
        Engine {
            sizes: problem.buffers().iter().map(|b| b.size).collect(),
            aligns: problem.buffers().iter().map(|b| b.align).collect(),
            spans,
            finder: GapFinder::new(timeline.slots()),
            offsets: vec![0; n],
            breadths: timeline.breadths(problem),
        }
    }

    /// Work done so far (see [`GapFinder::work`]).
    fn work(&self) -> u64 {
        self.finder.work
    }

    /// The largest breadth over each buffer's lifetime: range maxima over a bottom-up
    /// segment tree of the breadths (`2T` words; a sparse table took `T log T`, 110 MB at
    /// 700,000 slots).
    fn contention(&self) -> Vec<u64> {
        let t = self.breadths.len();
        let mut tree = vec![0u64; 2 * t];
        tree[t..].copy_from_slice(&self.breadths);
        for v in (1..t).rev() {
            tree[v] = tree[2 * v].max(tree[2 * v + 1]);
        }
        self.spans
            .iter()
            .map(|&(s, e)| {
                let (mut l, mut r) = (s as usize + t, (e as usize).min(t) + t);
                let mut m = 0;
                while l < r {
                    if l & 1 == 1 {
                        m = m.max(tree[l]);
                        l += 1;
                    }
                    if r & 1 == 1 {
                        r -= 1;
                        m = m.max(tree[r]);
                    }
                    l /= 2;
                    r /= 2;
                }
                m
            })
            .collect()
    }

    /// Places every buffer best-fit in `order`; returns the height, or `None` (offsets
    /// left incomplete) as soon as the pass's work exceeds `limit`.
    fn run(&mut self, order: &[usize], limit: u64) -> Option<u64> {
        self.finder.clear();
        let stop = self.finder.work.saturating_add(limit);
        let mut height = 0;
        for &i in order {
            let (s, e) = self.spans[i];
            let (s, e) = (s as usize, e as usize);
            let o = self.finder.best_fit(s, e, self.sizes[i], self.aligns[i]);
            let top = o + self.sizes[i];
            self.offsets[i] = o;
            self.finder.insert(s, e, (o, top));
            height = height.max(top);
            if self.finder.work > stop {
                return None;
            }
        }
        Some(height)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::offsets::greedy_by_size;
    use crate::problem::Buffer;
    use crate::validate::validate_offsets;

    /// Small budgets, so that debug-mode tests stay fast.
    fn light() -> BestOptions {
        BestOptions {
            min_work: 20_000,
            max_work: 200_000,
            exact_nodes: 5_000,
            time_cap: None,
            ..BestOptions::default()
        }
    }

    #[test]
    fn reaches_the_hand_checked_optima() {
        for (name, p, want) in [
            ("minimalloc example", minimalloc_example(), 12),
            ("minimalloc tricky", minimalloc_tricky(), 5),
            ("tflite complex", tflite_complex(), 96),
            ("tflite chain", tflite_chain(), 96),
        ] {
            assert_eq!(validate_offsets(&p, &plan(&p)), Ok(want), "{name}");
        }
        for (name, p, _, heap) in xla_cases() {
            let h = validate_offsets(&p, &plan(&p)).unwrap();
            assert!(h <= heap, "{name}: {h} > {heap}");
            assert!(h >= offsets_lower_bound(&p), "{name}");
        }
        assert_eq!(plan(&Problem::default()), OffsetPlan::default());
    }

    #[test]
    fn engine_matches_greedy_by_size() {
        // The engine's size-descending pass is Greedy by Size, offset for offset.
        for seed in 0..5 {
            let p = dnn_trace(700, seed);
            let mut order: Vec<usize> = (0..p.len()).collect();
            order.sort_by_key(|&i| Reverse(p.buffers()[i].size));
            let mut engine = Engine::new(&p);
            let h = engine.run(&order, u64::MAX).unwrap();
            let g = greedy_by_size::plan(&p);
            assert_eq!(engine.offsets, g.offsets, "seed {seed}");
            assert_eq!(h, g.height(&p));
        }
    }

    #[test]
    fn is_deterministic_and_improves_on_greedy() {
        // Long-lived and short-lived buffers mixed: greedy by size leaves room here.
        let p = dnn_trace(3000, 11);
        let a = plan(&p);
        assert_eq!(a, plan(&p));
        let h = validate_offsets(&p, &a).unwrap();
        assert!(h <= greedy_by_size::plan(&p).height(&p));
        assert!(h >= offsets_lower_bound(&p));
        // Threads do not change the result.
        let o = BestOptions {
            parallel: false,
            ..BestOptions::default()
        };
        assert_eq!(plan_with(&p, &o), a);
    }

    #[test]
    fn improvement_phase_lowers_a_bad_start() {
        // Greedy by size is 57% above the lower bound here, which is the optimum; without
        // the exact step and the other strategies, the improvement phase must find it.
        let v = [
            (2, 4, 2),
            (1, 4, 2),
            (2, 3, 3),
            (4, 5, 4),
            (3, 6, 3),
            (0, 1, 5),
        ];
        let p = Problem::new(
            v.iter()
                .enumerate()
                .map(|(i, &(l, u, s))| Buffer::new(i.to_string(), l, u, s))
                .collect(),
        )
        .unwrap();
        assert_eq!(greedy_by_size::plan(&p).height(&p), 11);
        let lb = offsets_lower_bound(&p);
        let o = BestOptions {
            exact_max_buffers: 0,
            run_other_strategies: false,
            ..light()
        };
        let h = validate_offsets(&p, &plan_with(&p, &o)).unwrap();
        assert_eq!((h, lb), (7, 7));
    }

    #[test]
    fn a_pass_past_its_work_limit_leaves_the_near_linear_heuristics() {
        let p = dnn_trace(2000, 3);
        // Within the default limit: every best-fit order runs.
        let (plan, report) = portfolio_report(&p, &light());
        assert!(!report.large);
        assert!(report.passes >= 1);
        assert!(validate_offsets(&p, &plan).is_ok());
        // A limit far below one pass: the first pass stops there, nothing else best-fit
        // runs, and the plan is the better of greedy-in-order and strip-packing.
        let o = BestOptions {
            pass_work: 1_000,
            ..light()
        };
        let (plan, report) = portfolio_report(&p, &o);
        assert!(report.large);
        assert_eq!(report.passes, 1);
        // One query more than the limit at most, and a query visits fewer ranges than
        // there are buffers.
        assert!(report.work <= 1_000 + p.len() as u64 + 1, "{report:?}");
        let h = validate_offsets(&p, &plan).unwrap();
        let in_order = greedy_in_order::plan(&p).height(&p);
        let strip = strip_packing::plan(&p).height(&p);
        let lb = offsets_lower_bound(&p);
        let backwards = greedy_in_order::plan_backwards(&p).height(&p);
        let within = in_order <= lb + lb / 1000 * NEAR_LINEAR_GAP_PER_MILLE;
        if within {
            assert_eq!(h, in_order);
        } else {
            assert_eq!(h, in_order.min(strip));
        }
        // With strip-packing's memory capped below its need, greedy-in-order backwards
        // stands in for it.
        let capped = BestOptions {
            strip_packing_memory: Some(strip_packing::index_bytes(&p) - 1),
            ..o.clone()
        };
        let h = validate_offsets(&p, &portfolio(&p, &capped)).unwrap();
        assert_eq!(
            h,
            if within {
                in_order
            } else {
                in_order.min(backwards)
            }
        );
        // The placer-based strategies stop at the same kind of limit.
        assert_eq!(greedy_by_size::plan_within(&p, 1_000), None);
        assert_eq!(greedy_by_breadth::plan_within(&p, 1_000), None);
        assert_eq!(
            greedy_by_size::plan_within(&p, u64::MAX),
            Some(greedy_by_size::plan(&p))
        );
    }

    #[test]
    fn many_conflicting_pairs_make_a_problem_large_without_a_pass() {
        let p = dnn_trace(2000, 3);
        let pairs = conflicting_pairs(&p, u64::MAX);
        let at = |limit| BestOptions {
            large_pairs: Some(limit),
            ..light()
        };
        // At the pair count: the first pass runs, as without the option.
        assert_eq!(
            portfolio_report(&p, &at(pairs)),
            portfolio_report(&p, &light())
        );
        // Below it: large, no pass, the near-linear plan.
        let (plan, report) = portfolio_report(&p, &at(pairs - 1));
        assert_eq!((report.large, report.passes, report.work), (true, 0, 0));
        let lb = offsets_lower_bound(&p);
        assert_eq!(plan, near_linear(&p, lb, None));
    }

    proptest::proptest! {
        #[test]
        fn conflicting_pairs_counts_the_pairs_alive_together(
            p in crate::fixtures::strategies::problem(30)
        ) {
            let b = p.buffers();
            let brute = (0..b.len())
                .flat_map(|i| (0..i).map(move |j| (i, j)))
                .filter(|&(i, j)| b[i].lower < b[j].upper && b[j].lower < b[i].upper)
                .count() as u64;
            proptest::prop_assert_eq!(conflicting_pairs(&p, u64::MAX), brute);
            // Stopped early: past the stop, never above the count.
            if brute > 0 {
                let c = conflicting_pairs(&p, brute - 1);
                proptest::prop_assert!(c > brute - 1 && c <= brute);
            }
        }
    }

    #[test]
    fn improvement_waits_for_a_budget_that_holds_a_pass() {
        // The bound (6) ignores the alignment padding: every plan is 7 high, so no static
        // order reaches the bound and improvement rounds go on while their budget lasts.
        let p = Problem::new(vec![
            Buffer::new("a", 0, 2, 3).with_align(4),
            Buffer::new("b", 0, 2, 3).with_align(4),
        ])
        .unwrap();
        let o = BestOptions {
            exact_max_buffers: 0,
            run_other_strategies: false,
            ..light()
        };
        let (_, report) = portfolio_report(&p, &o);
        assert!(report.passes > STATIC_ORDERS as u64, "{report:?}");
        // A pass costs more than the whole improvement budget: no improvement round.
        let o = BestOptions {
            min_work: 1,
            max_work: 1,
            ..o
        };
        let (_, report) = portfolio_report(&p, &o);
        assert_eq!(report.passes, STATIC_ORDERS as u64, "{report:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

        #[test]
        fn never_worse_than_any_heuristic(p in strategies::problem(30)) {
            let plan = plan_with(&p, &light());
            let h = validate_offsets(&p, &plan).unwrap();
            proptest::prop_assert!(h >= offsets_lower_bound(&p));
            for s in OffsetStrategy::ALL {
                if matches!(s, OffsetStrategy::Best | OffsetStrategy::Exact) {
                    continue;
                }
                let other = s.plan(&p).height(&p);
                proptest::prop_assert!(h <= other, "{} beats best: {} < {}", s, other, h);
            }
        }

        #[test]
        fn default_budget_plans_validate(p in strategies::problem(12)) {
            let h = validate_offsets(&p, &plan(&p)).unwrap();
            proptest::prop_assert!(h >= offsets_lower_bound(&p));
            proptest::prop_assert!(h <= greedy_by_size::plan(&p).height(&p));
        }
    }
}
