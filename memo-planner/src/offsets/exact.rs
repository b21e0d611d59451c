//! `exact`: a branch-and-bound search in the style of MiniMalloc (Moffitt, ASPLOS '23),
//! minimising the height within a budget.
//!
//! # Method
//!
//! The core answers the *decision* problem "do all buffers fit under `capacity`?" by a
//! depth-first search over **canonical** solutions only: buffers are placed in
//! non-decreasing offset order (at equal offsets, in increasing static preorder), each at its
//! `min_offset`, the highest top among the placed buffers it conflicts with, rounded up to
//! its alignment. Every solution can be pushed down ("gravity") and reordered into such a
//! sequence without growing, so the search is complete. At each node:
//!
//! - **dynamic ordering**: the candidates are the unplaced buffers sorted by
//!   `(min_offset, preorder)`. Like MiniMalloc, each probe runs round robin over three
//!   static preorders (descending lifetime/area/max-breadth in the orders WAT, TWA, TAW)
//!   with a node limit that starts at `2n` and doubles every round; an attempt that
//!   finishes without a packing proves infeasibility whatever its preorder;
//! - **section pruning**: in every time slot, the unplaced buffers alive there all go above
//!   `max(floor, last offset)` (floor = highest placed top in the slot), so
//!   `max(floor, last) + remaining size > capacity` fails the node;
//! - **dominance**: no buffer is placed at or above `min(min_offset + size)` over the
//!   unplaced buffers: such a solution has a buffer that could drop below it, and the
//!   solution with the smallest sum of offsets never does that.
//!
//! Minimisation starts from a heuristic plan (by default the `best` portfolio) and probes
//! capacities: first the lower bound ([`offsets_lower_bound`]),
//! then a binary search between it and the best height found minus one. A feasible probe
//! lowers the upper end to the height it found, an infeasible one raises the lower end; a
//! probe that runs out of nodes counts as "not found" (the answer is then not proven
//! optimal, see [`ExactOutcome::optimal`]). The probe at the lower bound may use half of
//! the node budget, every other probe a sixteenth, since the hard capacities would
//! otherwise starve the rest.
//!
//! # Complexity and budget
//!
//! The search is exponential in the worst case; each node costs `O(n log n + T + k)` for
//! `n` buffers, `T` time slots and `k` conflicts of the placed buffer. It stops after
//! [`ExactOptions::node_limit`] nodes in total or [`ExactOptions::time_cap`], and is skipped
//! above [`ExactOptions::max_buffers`] buffers. The returned plan is always valid and never
//! higher than the starting plan.
//!
//! # Determinism
//!
//! Given the node limit, the search is deterministic. The time cap is a safety net: when it
//! fires, the result depends on the machine's speed (the default cap is not reached on
//! small instances).

use std::time::{Duration, Instant};

use crate::bounds::offsets_lower_bound;
use crate::offsets::best;
use crate::plan::OffsetPlan;
use crate::problem::{align_up, Problem};
use crate::timeline::Timeline;

/// Budgets of the exact search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactOptions {
    /// Search nodes (placements tried) over all capacity probes.
    pub node_limit: u64,
    /// Wall-time safety net over all probes; `None` for none.
    pub time_cap: Option<Duration>,
    /// Above this many buffers no search is made and the starting plan is returned.
    pub max_buffers: usize,
}

impl Default for ExactOptions {
    fn default() -> ExactOptions {
        ExactOptions {
            node_limit: 2_000_000,
            time_cap: Some(Duration::from_secs(2)),
            max_buffers: 2048,
        }
    }
}

/// The result of [`search`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactOutcome {
    /// The best plan found (never higher than the starting plan).
    pub plan: OffsetPlan,
    /// Its height.
    pub height: u64,
    /// Whether the height is proven optimal: it equals the lower bound, or every lower
    /// capacity was proven infeasible within the budget.
    pub optimal: bool,
    /// Search nodes used.
    pub nodes: u64,
}

/// Plans with the default [`ExactOptions`], starting from the `best` portfolio.
pub fn plan(problem: &Problem) -> OffsetPlan {
    plan_with(problem, &ExactOptions::default())
}

/// Plans with the given budgets, starting from the `best` portfolio.
pub fn plan_with(problem: &Problem, options: &ExactOptions) -> OffsetPlan {
    search(problem, None, options).plan
}

/// Minimises the height from `start` (or, when `None`, from the `best` portfolio, whose
/// own exact step has a small node budget), within the budgets.
pub fn search(
    problem: &Problem,
    start: Option<&OffsetPlan>,
    options: &ExactOptions,
) -> ExactOutcome {
    let clock = Instant::now();
    let start = match start {
        Some(p) if p.offsets.len() == problem.len() => p.clone(),
        _ => best::plan(problem),
    };
    let mut best_plan = start;
    let mut best_h = best_plan.height(problem);
    let lb = offsets_lower_bound(problem);
    let mut outcome = ExactOutcome {
        optimal: best_h <= lb,
        plan: OffsetPlan::default(),
        height: best_h,
        nodes: 0,
    };
    if best_h > lb && problem.len() <= options.max_buffers {
        let mut solver = Solver::new(problem);
        let mut lo = lb;
        let mut hi = best_h - 1;
        let mut proven = true;
        let mut first = true;
        while lo <= hi {
            let left = options.node_limit.saturating_sub(solver.nodes);
            if left == 0 || options.time_cap.is_some_and(|cap| clock.elapsed() >= cap) {
                proven = false;
                break;
            }
            let capacity = if first { lo } else { lo + (hi - lo) / 2 };
            // The probe at the lower bound may use half of the budget (on DNN traces it is
            // often feasible, and then the answer is optimal); every other probe a
            // sixteenth, so that a hard capacity does not starve the easier ones above it.
            let share = if first { 2 } else { 16 };
            first = false;
            let probe_limit = solver.nodes + (options.node_limit / share).max(1024).min(left);
            match solver.solve(capacity, probe_limit, clock, options.time_cap) {
                Probe::Found(offsets) => {
                    let plan = OffsetPlan { offsets };
                    let h = plan.height(problem);
                    if h < best_h {
                        best_plan = plan;
                        best_h = h;
                    }
                    hi = h.min(capacity).saturating_sub(1);
                    if h <= lo {
                        break;
                    }
                }
                Probe::Infeasible => lo = capacity + 1,
                Probe::Unknown => {
                    proven = false;
                    lo = capacity + 1;
                }
            }
        }
        outcome.nodes = solver.nodes;
        outcome.optimal = best_h <= lb || proven;
    }
    outcome.height = best_h;
    outcome.plan = best_plan;
    outcome
}

/// `best`'s entry point: improves `start` within the budget.
pub(crate) fn improve(problem: &Problem, start: &OffsetPlan, options: &ExactOptions) -> OffsetPlan {
    search(problem, Some(start), options).plan
}

const UNPLACED: u64 = u64::MAX;

/// The answer of one capacity probe.
enum Probe {
    Found(Vec<u64>),
    Infeasible,
    Unknown,
}

/// The search state of the decision problem; reused across probes.
struct Solver {
    n: usize,
    sizes: Vec<u64>,
    aligns: Vec<u64>,
    spans: Vec<(usize, usize)>,
    /// Conflicting buffers of each buffer.
    adj: Vec<Vec<u32>>,
    /// Static preorder rank of each buffer, in the current attempt.
    rank: Vec<u32>,
    /// The preorders tried in turn.
    preorders: Vec<Vec<u32>>,
    /// Total size alive per slot, at the start.
    breadth: Vec<u64>,
    // Per-probe state.
    offsets: Vec<u64>,
    min_off: Vec<u64>,
    floor: Vec<u64>,
    remaining: Vec<u64>,
    trail: Vec<Undo>,
    capacity: u64,
    limit: u64,
    /// Nodes used over all probes.
    nodes: u64,
    truncated: bool,
    clock: Instant,
    time_cap: Option<Duration>,
}

enum Undo {
    MinOff(u32, u64),
    Floor(u32, u64),
}

impl Solver {
    fn new(problem: &Problem) -> Solver {
        let n = problem.len();
        let b = problem.buffers();
        let timeline = Timeline::new(problem);
        let spans: Vec<(usize, usize)> = (0..n).map(|i| timeline.span(i)).collect();
        let mut adj = vec![Vec::new(); n];
        // Sweep by start: each buffer meets the earlier-starting buffers still alive.
        let mut by_start: Vec<usize> = (0..n).collect();
        by_start.sort_by_key(|&i| spans[i].0);
        let mut active: Vec<usize> = Vec::new();
        for &i in &by_start {
            active.retain(|&j| spans[j].1 > spans[i].0);
            for &j in &active {
                adj[i].push(j as u32);
                adj[j].push(i as u32);
            }
            active.push(i);
        }
        // Static preorders, after MiniMalloc's defaults WAT, TWA, TAW (W = lifetime,
        // A = area, T = largest breadth over the lifetime), all descending.
        let breadth = timeline.breadths(problem);
        let keys: Vec<(u128, u128, u128)> = (0..n)
            .map(|i| {
                let (s, e) = spans[i];
                let t = breadth[s..e].iter().copied().max().unwrap_or(0) as u128;
                let w = (b[i].upper - b[i].lower) as u128;
                (w, w * b[i].size as u128, t)
            })
            .collect();
        let preorders: Vec<Vec<u32>> = [
            |k: (u128, u128, u128)| (k.0, k.1, k.2),
            |k: (u128, u128, u128)| (k.2, k.0, k.1),
            |k: (u128, u128, u128)| (k.2, k.1, k.0),
        ]
        .iter()
        .map(|f| {
            let mut pre: Vec<usize> = (0..n).collect();
            pre.sort_by_key(|&i| std::cmp::Reverse(f(keys[i])));
            let mut rank = vec![0u32; n];
            for (r, &i) in pre.iter().enumerate() {
                rank[i] = r as u32;
            }
            rank
        })
        .collect();
        Solver {
            n,
            sizes: b.iter().map(|x| x.size).collect(),
            aligns: b.iter().map(|x| x.align).collect(),
            spans,
            adj,
            rank: preorders[0].clone(),
            preorders,
            breadth,
            offsets: Vec::new(),
            min_off: Vec::new(),
            floor: Vec::new(),
            remaining: Vec::new(),
            trail: Vec::new(),
            capacity: 0,
            limit: 0,
            nodes: 0,
            truncated: false,
            clock: Instant::now(),
            time_cap: None,
        }
    }

    /// Decides whether everything fits under `capacity`, stopping when `self.nodes` reaches
    /// `limit`.
    fn solve(
        &mut self,
        capacity: u64,
        limit: u64,
        clock: Instant,
        time_cap: Option<Duration>,
    ) -> Probe {
        // Round robin over the preorders with a node limit that doubles every round (as
        // MiniMalloc does): a good preorder often finds a packing quickly. An exhausted
        // attempt under any preorder is a proof of infeasibility.
        let mut attempt_limit = (2 * self.n as u64).max(64);
        loop {
            for k in 0..self.preorders.len() {
                let left = limit.saturating_sub(self.nodes);
                if left == 0 || time_cap.is_some_and(|cap| clock.elapsed() >= cap) {
                    return Probe::Unknown;
                }
                self.rank.clone_from(&self.preorders[k]);
                let sub = self.nodes + attempt_limit.min(left);
                match self.attempt(capacity, sub, clock, time_cap) {
                    Probe::Unknown => {}
                    answer => return answer,
                }
            }
            attempt_limit = attempt_limit.saturating_mul(2);
        }
    }

    /// One depth-first search under the current preorder.
    fn attempt(
        &mut self,
        capacity: u64,
        limit: u64,
        clock: Instant,
        time_cap: Option<Duration>,
    ) -> Probe {
        self.capacity = capacity;
        self.limit = limit;
        self.truncated = false;
        self.clock = clock;
        self.time_cap = time_cap;
        self.offsets = vec![UNPLACED; self.n];
        self.min_off = vec![0; self.n];
        self.floor = vec![0; self.breadth.len()];
        self.remaining.clone_from(&self.breadth);
        self.trail.clear();
        if self.dfs(self.n, 0, None) {
            Probe::Found(std::mem::take(&mut self.offsets))
        } else if self.truncated {
            Probe::Unknown
        } else {
            Probe::Infeasible
        }
    }

    /// Places the `left` unplaced buffers; `last` is the offset of the last placement and
    /// `prev` the rank of the buffer placed there.
    fn dfs(&mut self, left: usize, last: u64, prev: Option<u32>) -> bool {
        if left == 0 {
            return true;
        }
        // Section pruning.
        for (f, &r) in self.floor.iter().zip(&self.remaining) {
            if r > 0 && (*f).max(last).saturating_add(r) > self.capacity {
                return false;
            }
        }
        // Candidates and the dominance bound.
        let mut dominance = u64::MAX;
        let mut cands: Vec<(u64, u32, u32)> = Vec::new();
        for i in 0..self.n {
            if self.offsets[i] != UNPLACED {
                continue;
            }
            let o = self.min_off[i];
            let top = o.saturating_add(self.sizes[i]);
            if top > self.capacity {
                return false;
            }
            dominance = dominance.min(top);
            if o > last || (o == last && prev.is_none_or(|p| self.rank[i] > p)) {
                cands.push((o, self.rank[i], i as u32));
            }
        }
        cands.sort_unstable();
        for (o, rank, i) in cands {
            if o >= dominance {
                break;
            }
            if self.nodes >= self.limit {
                self.truncated = true;
                return false;
            }
            self.nodes += 1;
            if self.nodes % 1024 == 0
                && self.time_cap.is_some_and(|cap| self.clock.elapsed() >= cap)
            {
                self.limit = self.nodes;
            }
            let mark = self.trail.len();
            self.place(i as usize, o);
            if self.dfs(left - 1, o, Some(rank)) {
                return true;
            }
            self.unplace(i as usize, mark);
            if self.truncated {
                return false;
            }
        }
        false
    }

    fn place(&mut self, i: usize, o: u64) {
        self.offsets[i] = o;
        let top = o + self.sizes[i];
        for k in 0..self.adj[i].len() {
            let j = self.adj[i][k] as usize;
            if self.offsets[j] == UNPLACED {
                let need = align_up(top, self.aligns[j]);
                if need > self.min_off[j] {
                    self.trail.push(Undo::MinOff(j as u32, self.min_off[j]));
                    self.min_off[j] = need;
                }
            }
        }
        let (s, e) = self.spans[i];
        for t in s..e {
            self.remaining[t] -= self.sizes[i];
            if top > self.floor[t] {
                self.trail.push(Undo::Floor(t as u32, self.floor[t]));
                self.floor[t] = top;
            }
        }
    }

    fn unplace(&mut self, i: usize, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Undo::MinOff(j, v)) => self.min_off[j as usize] = v,
                Some(Undo::Floor(t, v)) => self.floor[t as usize] = v,
                None => break,
            }
        }
        let (s, e) = self.spans[i];
        for t in s..e {
            self.remaining[t] += self.sizes[i];
        }
        self.offsets[i] = UNPLACED;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::*;
    use crate::problem::Buffer;
    use crate::validate::validate_offsets;

    fn small() -> ExactOptions {
        ExactOptions {
            node_limit: 200_000,
            time_cap: None,
            max_buffers: 64,
        }
    }

    /// Starts from a plan that is deliberately bad, so that the search has to work.
    fn from_naive(p: &Problem, o: &ExactOptions) -> ExactOutcome {
        search(p, Some(&crate::offsets::naive::plan(p)), o)
    }

    #[test]
    fn solves_the_hand_checked_cases() {
        for (name, p, want) in [
            ("minimalloc example", minimalloc_example(), 12),
            ("minimalloc tricky", minimalloc_tricky(), 5),
            ("tflite complex", tflite_complex(), 96),
            ("tflite chain", tflite_chain(), 96),
        ] {
            for out in [from_naive(&p, &small()), search(&p, None, &small())] {
                assert_eq!(validate_offsets(&p, &out.plan), Ok(want), "{name}");
                assert_eq!(out.height, want, "{name}");
                assert!(out.optimal, "{name}");
            }
            assert_eq!(validate_offsets(&p, &plan(&p)), Ok(want), "{name}");
        }
    }

    #[test]
    fn tricky_is_infeasible_at_its_lower_bound() {
        let p = minimalloc_tricky();
        assert_eq!(offsets_lower_bound(&p), 4);
        let mut solver = Solver::new(&p);
        assert!(matches!(
            solver.solve(4, u64::MAX, Instant::now(), None),
            Probe::Infeasible
        ));
        assert!(matches!(
            solver.solve(5, u64::MAX, Instant::now(), None),
            Probe::Found(_)
        ));
    }

    #[test]
    fn minimalloc_solver_tests() {
        // (buffers as (lower, upper, size, align), capacity, feasible)
        type Case = (&'static [(u64, u64, u64, u64)], u64, bool);
        let cases: [Case; 6] = [
            (&[(0, 2, 3, 1)], 2, false),
            (&[(0, 2, 2, 1), (0, 2, 2, 1)], 3, false),
            (
                &[
                    (1, 2, 1, 1),
                    (0, 2, 1, 1),
                    (2, 3, 2, 1),
                    (1, 3, 1, 1),
                    (0, 1, 2, 1),
                ],
                3,
                true,
            ),
            (
                &[(0, 2, 2, 1), (1, 3, 2, 1), (3, 5, 2, 1), (4, 6, 2, 1)],
                4,
                true,
            ),
            (&[(0, 2, 1, 2), (0, 2, 1, 2)], 4, true),
            (&[(0, 2, 1, 2), (0, 2, 1, 2)], 2, false),
        ];
        for (k, (bufs, cap, feasible)) in cases.iter().enumerate() {
            let p = Problem::new(
                bufs.iter()
                    .enumerate()
                    .map(|(i, &(l, u, s, a))| Buffer::new(i.to_string(), l, u, s).with_align(a))
                    .collect(),
            )
            .unwrap();
            let mut solver = Solver::new(&p);
            match solver.solve(*cap, u64::MAX, Instant::now(), None) {
                Probe::Found(offsets) => {
                    assert!(feasible, "case {k}");
                    let h = validate_offsets(&p, &OffsetPlan { offsets }).unwrap();
                    assert!(h <= *cap, "case {k}");
                }
                Probe::Infeasible => assert!(!feasible, "case {k}"),
                Probe::Unknown => panic!("case {k}: no answer"),
            }
        }
    }

    #[test]
    fn respects_the_node_budget_and_stays_valid() {
        let p = dnn_trace(200, 3);
        let o = ExactOptions {
            node_limit: 50,
            time_cap: None,
            max_buffers: 1000,
        };
        let start = crate::offsets::naive::plan(&p);
        let out = search(&p, Some(&start), &o);
        assert!(out.nodes <= 50);
        let h = validate_offsets(&p, &out.plan).unwrap();
        assert!(h <= start.height(&p));
        // Above max_buffers: the start plan comes back untouched.
        let o = ExactOptions {
            max_buffers: 10,
            ..o
        };
        assert_eq!(search(&p, Some(&start), &o).plan, start);
        assert_eq!(plan(&Problem::default()).offsets, Vec::<u64>::new());
    }

    /// The optimum by brute force: every order, each buffer at the top of the placed
    /// buffers it conflicts with (aligned). Every packing can be pushed down into one of
    /// these, so the minimum over all orders is optimal.
    fn brute_force(p: &Problem) -> u64 {
        fn rec(
            p: &Problem,
            offsets: &mut Vec<u64>,
            used: &mut Vec<bool>,
            height: u64,
            best: &mut u64,
        ) {
            if height >= *best {
                return;
            }
            let b = p.buffers();
            if used.iter().all(|&u| u) {
                *best = height;
                return;
            }
            for i in 0..b.len() {
                if used[i] {
                    continue;
                }
                let top = (0..b.len())
                    .filter(|&j| used[j] && b[j].conflicts_with(&b[i]))
                    .map(|j| offsets[j] + b[j].size)
                    .max()
                    .unwrap_or(0);
                let o = align_up(top, b[i].align);
                used[i] = true;
                offsets[i] = o;
                rec(p, offsets, used, height.max(o + b[i].size), best);
                used[i] = false;
            }
        }
        let mut best = u64::MAX;
        rec(
            p,
            &mut vec![0; p.len()],
            &mut vec![false; p.len()],
            0,
            &mut best,
        );
        if p.is_empty() {
            0
        } else {
            best
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

        #[test]
        fn matches_brute_force_on_small_problems(p in strategies::problem(9)) {
            let out = from_naive(&p, &small());
            let h = validate_offsets(&p, &out.plan).unwrap();
            proptest::prop_assert_eq!(h, out.height);
            // At most 8 buffers: the budget is never exhausted.
            proptest::prop_assert!(out.optimal);
            proptest::prop_assert_eq!(h, brute_force(&p));
        }

        #[test]
        fn plans_validate_within_a_small_budget(p in strategies::problem(30)) {
            let o = ExactOptions { node_limit: 2_000, time_cap: None, max_buffers: 64 };
            let start = crate::offsets::greedy_by_size::plan(&p);
            let out = search(&p, Some(&start), &o);
            let h = validate_offsets(&p, &out.plan).unwrap();
            proptest::prop_assert!(h >= offsets_lower_bound(&p));
            proptest::prop_assert!(h <= crate::offsets::greedy_by_size::plan(&p).height(&p));
        }
    }
}
