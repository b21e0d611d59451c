//! The capacity schedule: minimising the height with decision probes.
//!
//! 1. A short probe at the lower bound on the calling thread (DNN traces usually pack
//!    there after a few backtracks), rotating MiniMalloc's three preorders, the most
//!    productive first.
//! 2. A race at the lower bound (see `race.rs`: two racers with different preorders, one
//!    per core, decided by node counts) with a quarter of the node budget of each racer;
//!    on a *tight* instance (see [`is_tight`]) seven eighths of a budget not scaled down
//!    with the instance's size up to 1,024 buffers (`ExactOptions::nodes_for_tight`), the
//!    racers on randomised orders (area with random weights, and plain random).
//! 3. The **descent**: from the best height found, probe `best - step`, each probe a
//!    race: a packing found makes it the new best and doubles the step; a proof of
//!    infeasibility raises the proven lower bound and halves the step; a probe that runs
//!    out of nodes quarters the step, and at the smallest step (one granule: the gcd of the
//!    sizes and alignments, of which every canonical height is a multiple) it ends the
//!    search. A probe gets 1/32 of the descent's budget, except the one at
//!    `best - granule`, which gets all that is left.
//!
//! Budgets are charged deterministically (a race's charge is its winner's node count, or
//! its limit), so the plan, height and optimality do not depend on the threads; only the
//! wall-time safety net can make them depend on the machine.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::bounds::offsets_lower_bound;
use crate::plan::OffsetPlan;
use crate::problem::Problem;

use super::decide::{Decider, Probe};
use super::order::Preorder;
use super::race::{self, Race};
use super::skyline;
use super::sweep::{granule, Sweep};
use super::{ExactOptions, ExactOutcome};

/// The rotation of the short first probe (MiniMalloc's three, the most productive first).
const QUICK: [Preorder; 3] = [*b"TWA", *b"TAW", *b"WAT"];

/// The race at the lower bound gets this share (1/4) of each racer's budget; the descent
/// gets the rest.
const LOWER_BOUND_SHARE: u64 = 4;

/// On a tight instance the descent gets this share (1/8) of each racer's budget, the race
/// at the lower bound the rest (there the descent gains little: on the tilings not packed
/// at the bound it ends 15-22% above it whatever its share).
const TIGHT_DESCENT_SHARE: u64 = 8;

/// An instance is *tight* when at least this share (9/10) of its sections hold the lower
/// bound to within a granule: no packing at the bound leaves a gap there, the level and
/// top rules apply everywhere, and packings at the bound come from short randomised
/// attempts (as on exact tilings, where every section does).
const TIGHT_SECTIONS: (usize, usize) = (9, 10);

/// Whether `sw` is tight at the lower bound `lb` (see [`TIGHT_SECTIONS`]).
pub(super) fn is_tight(sw: &Sweep, lb: u64) -> bool {
    let full = sw.breadth.iter().filter(|&&b| b + sw.granule > lb).count();
    full * TIGHT_SECTIONS.1 >= sw.sections() * TIGHT_SECTIONS.0
}

/// A skyline node costs about this many times less than a decider's (85 ns against
/// 0.5 µs on exact tilings of 200-500 buffers).
const SKYLINE_NODES_PER_NODE: u64 = 6;

/// At the lower bound of a tight instance, the skyline race (see `skyline.rs`) gets this
/// share (1/2) of the tight budget's time, in its own nodes; the deciders' race gets
/// what it leaves.
const SKYLINE_SHARE: u64 = 2;

/// The skyline race runs on instances of at least this many buffers. It cannot prove a
/// capacity infeasible, so on a small tight instance whose bound is not reachable it
/// would spend its whole share where the deciders, complete and fast at that size, need
/// a few nodes.
const SKYLINE_MIN_BUFFERS: usize = 100;

/// The skyline race at `capacity` within `SKYLINE_SHARE` of `budget` (decider nodes):
/// the packing found, if any, and the nodes it charged (skyline nodes). Nothing below
/// [`SKYLINE_MIN_BUFFERS`] buffers.
pub(super) fn skyline_probe(
    problem: &Problem,
    capacity: u64,
    budget: u64,
    clock: Instant,
    options: &ExactOptions,
) -> (Option<Vec<u64>>, u64) {
    if problem.len() < SKYLINE_MIN_BUFFERS {
        return (None, 0);
    }
    let limit = (budget / SKYLINE_SHARE).saturating_mul(SKYLINE_NODES_PER_NODE);
    skyline::race(
        problem,
        capacity,
        limit,
        options.parallel,
        clock,
        options.time_cap,
    )
}

/// The descent's first step is the gap between the start height and the lower bound
/// divided by this (then doubled on every success).
const FIRST_STEP_DIVISOR: u64 = 64;

/// A descent probe gets this share of the descent's budget (but the one at
/// `best - granule` gets all that is left).
const PROBE_SHARE: u64 = 32;

/// No search when more pairs of buffers conflict (about 8 bytes of memory per pair).
pub(crate) const MAX_CONFLICT_PAIRS: u64 = 8_000_000;

/// Minimises the height of `problem` from `start`, a valid plan, within the budgets of
/// `options`. The returned plan is never higher than `start`.
pub fn search(problem: &Problem, start: &OffsetPlan, options: &ExactOptions) -> ExactOutcome {
    let clock = Instant::now();
    let n = problem.len();
    let start_h = start.height(problem);
    let g = granule(problem);
    let lb = offsets_lower_bound(problem).div_ceil(g) * g;
    let mut out = ExactOutcome {
        plan: start.clone(),
        height: start_h,
        lower_bound: lb.min(start_h),
        optimal: start_h <= lb,
        nodes: 0,
    };
    if out.optimal || n > options.max_buffers || start.offsets.len() != n {
        return out;
    }
    let Some(sw) = Sweep::new(problem, MAX_CONFLICT_PAIRS) else {
        return out;
    };
    let budget = options.nodes_for(n);
    let quick = (budget / 64).max(16 * n as u64).min(budget);
    let mut d = Decider::new(&sw);
    d.set_rotation(&QUICK);
    let mut lower = lb;
    match d.solve(lb, quick, clock, options.time_cap) {
        Probe::Found(offsets) => {
            out.nodes = d.nodes;
            return finish(problem, out, Some(offsets), lb);
        }
        Probe::Infeasible => lower = lb + g,
        Probe::Unknown => {}
    }
    out.nodes = d.nodes;
    let bar = AtomicU64::new(u64::MAX);
    let mut race = Race::new(&sw, &bar, options.parallel);
    let mut left = budget;
    if lower == lb {
        let share = if is_tight(&sw, lb) {
            race.set_rotations(&race::TIGHT_FIRST, &race::TIGHT_SECOND);
            left = options.nodes_for_tight(n);
            let (found, charge) = skyline_probe(problem, lb, left, clock, options);
            out.nodes += charge;
            if found.is_some() {
                return finish(problem, out, found, lb);
            }
            left -= (charge / SKYLINE_NODES_PER_NODE).min(left);
            left / TIGHT_DESCENT_SHARE * (TIGHT_DESCENT_SHARE - 1)
        } else {
            left / LOWER_BOUND_SHARE
        };
        let o = race.probe(lb, share, clock, options.time_cap);
        left -= o.charge.min(left);
        match o.probe {
            Probe::Found(offsets) => {
                out.nodes += race.nodes();
                return finish(problem, out, Some(offsets), lb);
            }
            Probe::Infeasible => lower = lb + g,
            Probe::Unknown => {}
        }
    }
    race.set_rotations(&race::DESCENT, &race::DESCENT_SECOND);
    let track = descend(&mut race, problem, start_h, lower, g, left, clock, options);
    out.nodes += race.nodes();
    let lower = track.lower;
    let out = finish(problem, out, None, lower);
    finish(problem, out, track.best, lower)
}

/// What the descent track found.
struct Track {
    best_h: u64,
    best: Option<Vec<u64>>,
    /// The proven lower bound.
    lower: u64,
}

impl Track {
    fn empty(start_h: u64, lower: u64) -> Track {
        Track {
            best_h: start_h,
            best: None,
            lower,
        }
    }
}

/// The descent: probes at `best - step` from the start height, each a race of the two
/// racers, within `budget` probe nodes per racer (charged deterministically).
#[allow(clippy::too_many_arguments)]
fn descend(
    race: &mut Race,
    problem: &Problem,
    start_h: u64,
    lower: u64,
    g: u64,
    budget: u64,
    clock: Instant,
    options: &ExactOptions,
) -> Track {
    let mut t = Track::empty(start_h, lower);
    // The first step: a small share of the gap (small instances) but at least a granule.
    let mut step = ((start_h.saturating_sub(lower) / FIRST_STEP_DIVISOR) / g).max(1) * g;
    let share = (budget / PROBE_SHARE).max(1);
    let mut left = budget;
    while t.best_h > t.lower && left > 0 {
        let last = t.best_h - g;
        let cap = t.best_h.saturating_sub(step).max(t.lower).min(last);
        let limit = if cap == last { left } else { share.min(left) };
        let o = race.probe(cap, limit, clock, options.time_cap);
        left -= o.charge.min(left);
        match o.probe {
            Probe::Found(offsets) => {
                let plan = OffsetPlan { offsets };
                t.best_h = plan.height(problem);
                t.best = Some(plan.offsets);
                step = step.saturating_mul(2);
            }
            Probe::Infeasible => {
                t.lower = cap + g;
                step = (step / 2).max(g);
            }
            Probe::Unknown => {
                if cap == last || options.time_cap.is_some_and(|c| clock.elapsed() >= c) {
                    break;
                }
                step = (step / 4).max(g);
            }
        }
    }
    t
}

fn finish(
    problem: &Problem,
    mut out: ExactOutcome,
    offsets: Option<Vec<u64>>,
    lower: u64,
) -> ExactOutcome {
    if let Some(offsets) = offsets {
        let plan = OffsetPlan { offsets };
        let h = plan.height(problem);
        if h < out.height {
            out.plan = plan;
            out.height = h;
        }
    }
    out.lower_bound = lower.min(out.height);
    out.optimal = out.height <= lower;
    out
}
