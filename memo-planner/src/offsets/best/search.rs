//! Our own search: best fit under the portfolio's static orderings, then the iterated
//! greedy improvement phase, on one placement engine.

use std::cmp::Reverse;
use std::time::Instant;

use super::{BestOptions, PortfolioReport};
use crate::offsets::exact;
use crate::offsets::placer::GapFinder;
use crate::plan::OffsetPlan;
use crate::problem::Problem;
use crate::rng::Rng;
use crate::timeline::Timeline;

/// Unsuccessful rounds of the improvement phase before it restarts from the best order.
const RESTART_AFTER: u32 = 64;

/// Improvement rounds per buffer at most (see `improve`).
const ROUNDS_PER_BUFFER: u64 = 64;

/// Static ordering `k` of the portfolio (0..[`STATIC_ORDERS`]), most productive first, so
/// that reaching the lower bound stops early: all descending, (0) contention then size,
/// (1) area, (2) size, (3) size then lifetime, (4) lifetime then size.
pub(super) fn static_order(problem: &Problem, contention: &[u64], k: usize) -> Vec<usize> {
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
pub(super) const STATIC_ORDERS: usize = 5;

/// The first static pass, run by [`portfolio_report`] before it decides the mode.
pub(super) struct FirstPass {
    pub(super) height: u64,
    /// The engine's work after it.
    pub(super) work: u64,
    pub(super) offsets: Vec<u64>,
    pub(super) order: Vec<usize>,
}

/// The static orderings of the portfolio (the first one already run), plus the
/// improvement phase, on the fast engine.
pub(super) fn own_search(
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
pub(super) fn improvement_passes(options: &BestOptions, n: usize) -> u64 {
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
pub(super) fn improve(
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
pub(super) struct Engine {
    sizes: Vec<u64>,
    aligns: Vec<u64>,
    spans: Vec<(u32, u32)>,
    finder: GapFinder,
    /// Offsets of the last pass.
    pub(super) offsets: Vec<u64>,
    breadths: Vec<u64>,
}

impl Engine {
    pub(super) fn new(problem: &Problem) -> Engine {
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
    pub(super) fn work(&self) -> u64 {
        self.finder.work
    }

    /// The largest breadth over each buffer's lifetime: range maxima over a bottom-up
    /// segment tree of the breadths (`2T` words, where a sparse table would take `T log T`,
    /// 110 MB at 700,000 slots).
    pub(super) fn contention(&self) -> Vec<u64> {
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
    pub(super) fn run(&mut self, order: &[usize], limit: u64) -> Option<u64> {
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
