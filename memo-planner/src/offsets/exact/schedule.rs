//! The capacity schedule: minimising the height with decision probes.
//!
//! Two tracks, each with the whole node budget, so that a hard capacity cannot starve the
//! other:
//!
//! - the **lower-bound track** probes the lower bound itself (on most instances the
//!   optimum, and then the answer is proven);
//! - the **descent track** starts from the start plan's height and probes `best - step`:
//!   a packing found makes it the new best and doubles the step; a proof of infeasibility
//!   raises the proven lower bound and halves the step; a probe that runs out of nodes
//!   quarters the step, and at the smallest step (one granule: the gcd of the sizes and
//!   alignments, of which every canonical height is a multiple) it ends the track. A probe
//!   gets a sixteenth of the budget, except the one at `best - granule`, which gets all
//!   that is left.
//!
//! A short sequential probe at the lower bound comes first (DNN traces usually pack there
//! after a few backtracks); only when it fails do the tracks start, on two threads when
//! [`ExactOptions::parallel`] is set, one after the other otherwise. The plan, height and
//! optimality do not depend on that choice: one track stops the other only once its own
//! answer makes the other's irrelevant (a packing at the lower bound, or a descent that
//! proved its best optimal).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::bounds::offsets_lower_bound;
use crate::plan::OffsetPlan;
use crate::problem::Problem;

use super::decide::{Decider, Probe};
use super::sweep::Sweep;
use super::{ExactOptions, ExactOutcome};

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
    match d.solve(lb, quick, clock, options.time_cap) {
        Probe::Found(offsets) => {
            out.nodes = d.nodes;
            return finish(problem, out, Some(offsets), lb);
        }
        Probe::Infeasible => {
            out.nodes = d.nodes;
            let track = descend(
                &sw,
                problem,
                start_h,
                lb + g,
                g,
                budget,
                clock,
                options,
                None,
            );
            return finish_tracks(problem, out, None, track, lb + g);
        }
        Probe::Unknown => out.nodes = d.nodes,
    }
    let stop_lb = AtomicBool::new(false);
    let stop_descent = AtomicBool::new(false);
    let lb_track = || {
        let mut d = Decider::new(&sw);
        d.cancel_on(&stop_lb);
        let r = d.solve(lb, budget, clock, options.time_cap);
        if matches!(r, Probe::Found(_)) {
            stop_descent.store(true, Ordering::Relaxed);
        }
        (r, d.nodes)
    };
    let descent_track = || {
        let t = descend(
            &sw,
            problem,
            start_h,
            lb,
            g,
            budget,
            clock,
            options,
            Some(&stop_descent),
        );
        if t.best_h <= t.lower {
            stop_lb.store(true, Ordering::Relaxed);
        }
        t
    };
    let ((lb_probe, lb_nodes), track) = if options.parallel {
        std::thread::scope(|scope| {
            let h = scope.spawn(lb_track);
            let t = descent_track();
            (h.join().unwrap_or((Probe::Unknown, 0)), t)
        })
    } else {
        let a = lb_track();
        let t = if matches!(a.0, Probe::Found(_)) {
            Track::empty(start_h, lb)
        } else {
            descent_track()
        };
        (a, t)
    };
    out.nodes += lb_nodes;
    let proven = match lb_probe {
        Probe::Found(offsets) => {
            out.nodes += track.nodes;
            return finish(problem, out, Some(offsets), lb);
        }
        Probe::Infeasible => lb + g,
        Probe::Unknown => lb,
    };
    finish_tracks(problem, out, None, track, proven)
}

/// The granule of heights: every offset of a canonical packing, and so every height the
/// search can find, is a multiple of it. It divides every size, and every alignment that
/// does not already divide it (an offset rounded up to such an alignment stays a
/// multiple of the granule).
fn granule(problem: &Problem) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let b = problem.buffers();
    let mut g = b.iter().fold(0, |g, x| gcd(g, x.size));
    loop {
        let next = b
            .iter()
            .filter(|x| g % x.align != 0)
            .fold(g, |g, x| gcd(g, x.align));
        if next == g {
            return g.max(1);
        }
        g = next;
    }
}

/// What the descent track found.
struct Track {
    best_h: u64,
    best: Option<Vec<u64>>,
    /// The proven lower bound.
    lower: u64,
    nodes: u64,
}

impl Track {
    fn empty(start_h: u64, lower: u64) -> Track {
        Track {
            best_h: start_h,
            best: None,
            lower,
            nodes: 0,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn descend(
    sw: &Sweep,
    problem: &Problem,
    start_h: u64,
    lower: u64,
    g: u64,
    budget: u64,
    clock: Instant,
    options: &ExactOptions,
    cancel: Option<&AtomicBool>,
) -> Track {
    let mut d = Decider::new(sw);
    if let Some(c) = cancel {
        d.cancel_on(c);
    }
    let mut t = Track::empty(start_h, lower);
    let mut step = g;
    let share = (budget / 16).max(1);
    while t.best_h > t.lower {
        let left = budget.saturating_sub(d.nodes);
        if left == 0 {
            break;
        }
        let last = t.best_h - g;
        let cap = t.best_h.saturating_sub(step).max(t.lower).min(last);
        let limit = if cap == last { left } else { share.min(left) };
        match d.solve(cap, d.nodes + limit, clock, options.time_cap) {
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
                if cap == last || cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                    break;
                }
                if options.time_cap.is_some_and(|c| clock.elapsed() >= c) {
                    break;
                }
                step = (step / 4).max(g);
            }
        }
    }
    t.nodes = d.nodes;
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

fn finish_tracks(
    problem: &Problem,
    mut out: ExactOutcome,
    offsets: Option<Vec<u64>>,
    track: Track,
    proven: u64,
) -> ExactOutcome {
    out.nodes += track.nodes;
    let lower = proven.max(track.lower);
    let out = finish(problem, out, offsets, lower);
    finish(problem, out, track.best, lower)
}
