//! The skyline decider: a depth-first search over bottom-left packings, for capacities
//! that leave (almost) no slack.
//!
//! MiniMalloc's canonical search (the `decide` module) places some buffer at the lowest
//! offset any unplaced buffer could take. On an instance whose sections all hold the
//! capacity (an exact tiling), a packing has no gap anywhere, and a stronger rule
//! holds: the lowest point of the *skyline* (the top of what is placed, per time slot)
//! must be covered by a buffer that starts exactly at the left end of the lowest
//! segment. Searching on that corner leaves few candidates per node.
//!
//! A node takes the lowest segment `[a, b)` at height `h` (the leftmost among equals)
//! and branches over
//! 1. each unplaced buffer whose span starts at `a` and ends by `b`, at
//!    `align_up(h, align)`, longest span first (then larger, then lower index; of
//!    identical buffers only the first unplaced one), and then
//! 2. raising the segment to the lower of its neighbours' heights (the space below is
//!    wasted).
//!
//! A branch is cut when a slot's skyline plus the sizes of the unplaced buffers alive
//! there exceeds the capacity (the unallocated floor of MiniMalloc, per slot).
//!
//! The search is sound (every packing it returns fits) but not complete when gaps are
//! allowed (a packing may need a buffer that starts left of a gap's corner), so it only
//! ever answers "found" or "unknown". With no slack in any slot it is complete: every
//! gap-free packing is found in bottom-left order. Nodes are counted, so the answer does
//! not depend on the machine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::order::luby;
use crate::problem::{align_up, Problem};
use crate::timeline::Timeline;

/// A skyline race: two searches with different restart schedules (see [`RACERS`]), one
/// per thread when `parallel`, for a packing of `problem` under `capacity` within `limit`
/// nodes each. As in the deciders' race, the answer with the fewest nodes wins (ties: the
/// first racer), and a racer stops once its count passes the best published one, so the
/// result does not depend on the threads (only the wall-time cap, a safety net, can make
/// it depend on the machine). Returns the offsets found and the charge: the winner's
/// nodes, or `limit`.
pub(crate) fn race(
    problem: &Problem,
    capacity: u64,
    limit: u64,
    parallel: bool,
    clock: Instant,
    time_cap: Option<Duration>,
) -> (Option<Vec<u64>>, u64) {
    let bar = AtomicU64::new(u64::MAX);
    let run = |r: usize, limit: u64| {
        let mut s = Search::new(problem, capacity);
        let found = s.restarts(&RACERS[r], limit, &bar, clock, time_cap);
        if found {
            bar.fetch_min(s.used, Ordering::Relaxed);
        }
        (found.then(|| std::mem::take(&mut s.offsets)), s.used)
    };
    let (a, b) = if parallel {
        std::thread::scope(|scope| {
            let h = scope.spawn(|| run(1, limit));
            let a = run(0, limit);
            (a, h.join().unwrap_or((None, limit)))
        })
    } else {
        let a = run(0, limit);
        let second = if a.0.is_some() {
            a.1.saturating_sub(1)
        } else {
            limit
        };
        (a, run(1, second))
    };
    match (a, b) {
        ((Some(x), n), (Some(_), m)) if n <= m => (Some(x), n),
        (_, (Some(y), m)) => (Some(y), m),
        ((Some(x), n), _) => (Some(x), n),
        _ => (None, limit),
    }
}

/// A racer's restart schedule: restart `k` (from 1) gets `unit` times the `k`-th term of
/// the Luby sequence in nodes, its equally scored candidates tie-broken by a hash of
/// `seed` and `k` (the static order on the first racer's first restart). The search time
/// of one order is heavy-tailed: on 24 exact tilings of 200-500 buffers, most pack within
/// 10^5 nodes, a few need 10^8, and which ones depends on the unit.
struct Racer {
    unit: u64,
    seed: u64,
}

/// The two racers' schedules.
const RACERS: [Racer; 2] = [
    Racer { unit: 256, seed: 0 },
    Racer {
        unit: 1024,
        seed: 0x5bd1_e995,
    },
];

/// One unplaced candidate: its buffer and what it is identical to.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    buffer: u32,
    end: u32,
    /// The previous candidate of the same start slot with the same span, size and
    /// alignment (it must be placed first), if any.
    twin_of: Option<u32>,
}

/// What a frame of the search undoes when it backtracks.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Buffer placed over slots `[a, end)`, which were at height `h`.
    Placed {
        buffer: u32,
        a: u32,
        end: u32,
        h: u64,
    },
    /// Slots `[a, b)` raised from height `h`.
    Raised { a: u32, b: u32, h: u64 },
}

/// A frame: the segment it works on and the next branch to try.
#[derive(Clone, Copy, Debug)]
struct Frame {
    a: u32,
    b: u32,
    h: u64,
    /// Next candidate position in `pool`; at `end`, the raise branch.
    next: u32,
    /// End of this frame's candidates in `pool`.
    end: u32,
    /// The step taken by this frame (undone before its next branch), if any.
    taken: Option<Step>,
}

struct Search<'p> {
    problem: &'p Problem,
    capacity: u64,
    /// Nodes of the current restart, and its limit.
    nodes: u64,
    node_limit: u64,
    /// Nodes over all restarts.
    used: u64,
    /// Per start slot: the buffers starting there, best first.
    by_start: Vec<Vec<Candidate>>,
    /// The skyline: top of the placed buffers (or raised gap) per slot.
    sky: Vec<u64>,
    /// Total size of the unplaced buffers alive in each slot.
    unplaced: Vec<u64>,
    /// Total size of all buffers alive in each slot.
    breadth: Vec<u64>,
    placed: Vec<bool>,
    offsets: Vec<u64>,
    left: usize,
    /// The candidates of every frame on the stack, in branch order.
    pool: Vec<Candidate>,
    /// Tie-break of equally scored candidates: the static order when 0, else a hash.
    seed: u64,
}

impl<'p> Search<'p> {
    fn new(problem: &'p Problem, capacity: u64) -> Search<'p> {
        let buffers = problem.buffers();
        let timeline = Timeline::new(problem);
        let slots = timeline.slots();
        let mut by_start: Vec<Vec<(u32, u32)>> = vec![Vec::new(); slots.max(1)];
        for i in 0..buffers.len() {
            let (s, e) = timeline.span(i);
            by_start[s].push((i as u32, e as u32));
        }
        let by_start = by_start
            .into_iter()
            .map(|mut list| {
                list.sort_by_key(|&(i, e)| {
                    let b = &buffers[i as usize];
                    (std::cmp::Reverse(e), std::cmp::Reverse(b.size), b.align, i)
                });
                let mut out: Vec<Candidate> = Vec::with_capacity(list.len());
                for (k, &(i, e)) in list.iter().enumerate() {
                    let b = &buffers[i as usize];
                    let twin_of = k
                        .checked_sub(1)
                        .map(|p| list[p])
                        .filter(|&(j, f)| {
                            let o = &buffers[j as usize];
                            f == e && o.size == b.size && o.align == b.align
                        })
                        .map(|(j, _)| j);
                    out.push(Candidate {
                        buffer: i,
                        end: e,
                        twin_of,
                    });
                }
                out
            })
            .collect();
        let breadth = timeline.breadths(problem);
        Search {
            problem,
            capacity,
            nodes: 0,
            node_limit: 0,
            used: 0,
            by_start,
            sky: vec![0; slots],
            unplaced: breadth.clone(),
            breadth,
            placed: vec![false; buffers.len()],
            offsets: vec![0; buffers.len()],
            left: buffers.len(),
            pool: Vec::new(),
            seed: 0,
        }
    }

    /// Restarts on `racer`'s schedule until a packing is found (`true`), `limit` nodes
    /// are used, the count passes `bar` (another racer found a packing with fewer
    /// nodes), or the wall-time cap passes.
    fn restarts(
        &mut self,
        racer: &Racer,
        limit: u64,
        bar: &AtomicU64,
        clock: Instant,
        time_cap: Option<Duration>,
    ) -> bool {
        if !self.feasible_start() {
            return false;
        }
        for k in 1u64.. {
            let cap = limit.min(bar.load(Ordering::Relaxed));
            if self.used >= cap || time_cap.is_some_and(|c| clock.elapsed() >= c) {
                return false;
            }
            self.reset();
            self.seed = if racer.seed == 0 && k == 1 {
                0
            } else {
                (racer.seed ^ k).wrapping_mul(0x2545_f491_4f6c_dd1d) | 1
            };
            self.nodes = 0;
            self.node_limit = luby(k).saturating_mul(racer.unit).min(cap - self.used);
            let found = self.run();
            self.used += self.nodes;
            if found {
                return true;
            }
        }
        false
    }

    /// Back to the empty packing.
    fn reset(&mut self) {
        self.sky.fill(0);
        self.unplaced.copy_from_slice(&self.breadth);
        self.placed.fill(false);
        self.left = self.placed.len();
        self.pool.clear();
    }

    /// Whether the empty packing passes the floor check (the capacity holds the load).
    fn feasible_start(&self) -> bool {
        self.unplaced.iter().all(|&u| u <= self.capacity)
    }

    /// The lowest segment of the skyline (the leftmost among equals).
    fn lowest(&self) -> Option<(u32, u32, u64)> {
        let (a, &h) = self.sky.iter().enumerate().min_by_key(|&(t, &h)| (h, t))?;
        let b = self.sky[a..]
            .iter()
            .position(|&x| x != h)
            .map_or(self.sky.len(), |k| a + k);
        Some((a as u32, b as u32, h))
    }

    /// A frame on the lowest segment, its candidates pushed on `pool` best first:
    /// those whose top meets a neighbour's height or whose span fills the segment
    /// (each counts), then by the static order.
    fn frame(&mut self) -> Option<Frame> {
        let (a, b, h) = self.lowest()?;
        let start = self.pool.len();
        let left = (a as usize).checked_sub(1).map(|t| self.sky[t]);
        let right = self.sky.get(b as usize).copied();
        let buffers = self.problem.buffers();
        for &c in &self.by_start[a as usize] {
            if self.placed[c.buffer as usize] || c.end > b {
                continue;
            }
            self.pool.push(c);
        }
        let score = |c: &Candidate| {
            let bf = &buffers[c.buffer as usize];
            let top = align_up(h, bf.align) + bf.size;
            let mut s = 0u8;
            if Some(top) == left {
                s += 1;
            }
            if c.end == b {
                s += 1;
                if Some(top) == right {
                    s += 1;
                }
            }
            let salt = if self.seed == 0 {
                0
            } else {
                (u64::from(c.buffer) ^ self.seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40
            };
            (std::cmp::Reverse(s), salt)
        };
        self.pool[start..].sort_by_key(score);
        Some(Frame {
            a,
            b,
            h,
            next: start as u32,
            end: self.pool.len() as u32,
            taken: None,
        })
    }

    /// Runs the search; `true` when every buffer is placed.
    fn run(&mut self) -> bool {
        if self.left == 0 {
            return true;
        }
        let Some(first) = self.frame() else {
            return false;
        };
        let mut stack = vec![first];
        while let Some(top) = stack.last_mut() {
            let mut f = *top;
            if let Some(step) = f.taken.take() {
                self.undo(step);
            }
            let step = self.next_branch(&mut f);
            *stack.last_mut().expect("the frame just read") = f;
            match step {
                Some(step) => {
                    stack.last_mut().expect("the frame just read").taken = Some(step);
                    if self.left == 0 {
                        return true;
                    }
                    match self.frame() {
                        Some(child) => stack.push(child),
                        None => return self.left == 0,
                    }
                }
                None => {
                    stack.pop();
                    if let Some(parent) = stack.last() {
                        self.pool.truncate(parent.end as usize);
                    }
                }
            }
            if self.nodes >= self.node_limit {
                return false;
            }
        }
        false
    }

    /// Takes frame `f`'s next feasible branch (advancing `f.next`), or `None` when none
    /// is left.
    fn next_branch(&mut self, f: &mut Frame) -> Option<Step> {
        let list_len = f.end;
        while f.next < list_len {
            let c = self.pool[f.next as usize];
            f.next += 1;
            if c.twin_of.is_some_and(|t| !self.placed[t as usize]) {
                continue;
            }
            self.nodes += 1;
            if let Some(step) = self.place(c, f) {
                return Some(step);
            }
        }
        if f.next == list_len {
            f.next += 1;
            self.nodes += 1;
            return self.raise(f);
        }
        None
    }

    /// Places candidate `c` on segment `f` if the floor allows.
    fn place(&mut self, c: Candidate, f: &Frame) -> Option<Step> {
        let b = &self.problem.buffers()[c.buffer as usize];
        let offset = align_up(f.h, b.align);
        let top = offset.checked_add(b.size)?;
        if top > self.capacity {
            return None;
        }
        let (a, end) = (f.a as usize, c.end as usize);
        let pad = offset - f.h;
        if pad > 0 && (a..end).any(|t| f.h + pad + self.unplaced[t] > self.capacity) {
            return None;
        }
        for t in a..end {
            self.sky[t] = top;
            self.unplaced[t] -= b.size;
        }
        self.placed[c.buffer as usize] = true;
        self.offsets[c.buffer as usize] = offset;
        self.left -= 1;
        Some(Step::Placed {
            buffer: c.buffer,
            a: f.a,
            end: c.end,
            h: f.h,
        })
    }

    /// Raises segment `f` to the lower of its neighbours if the floor allows.
    fn raise(&mut self, f: &Frame) -> Option<Step> {
        let (a, b) = (f.a as usize, f.b as usize);
        let left = a.checked_sub(1).map(|t| self.sky[t]);
        let right = self.sky.get(b).copied();
        let to = left.into_iter().chain(right).min()?;
        if (a..b).any(|t| to + self.unplaced[t] > self.capacity) {
            return None;
        }
        self.sky[a..b].fill(to);
        Some(Step::Raised {
            a: f.a,
            b: f.b,
            h: f.h,
        })
    }

    fn undo(&mut self, step: Step) {
        match step {
            Step::Placed { buffer, a, end, h } => {
                let size = self.problem.buffers()[buffer as usize].size;
                for t in a as usize..end as usize {
                    self.sky[t] = h;
                    self.unplaced[t] += size;
                }
                self.placed[buffer as usize] = false;
                self.left += 1;
            }
            Step::Raised { a, b, h } => self.sky[a as usize..b as usize].fill(h),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::offsets_lower_bound;
    use crate::fixtures::{exact_plane, strategies::problem};
    use crate::plan::OffsetPlan;
    use crate::validate::validate_offsets;
    use proptest::prelude::*;

    fn race_at(p: &Problem, capacity: u64, limit: u64, parallel: bool) -> (Option<Vec<u64>>, u64) {
        race(p, capacity, limit, parallel, Instant::now(), None)
    }

    /// Exact tilings (no slack in any slot) pack at their bound, the same on one thread
    /// as on two. The existing deciders need 10^5-10^7 nodes on these.
    #[test]
    fn exact_tilings_pack_at_their_bound() {
        for (n, seed) in [(60, 1), (120, 2), (200, 4), (200, 6)] {
            let p = exact_plane(n, 1 << 20, seed);
            let lb = offsets_lower_bound(&p);
            let (found, nodes) = race_at(&p, lb, 2_000_000, false);
            let offsets = found.unwrap_or_else(|| panic!("plane:{n}:{seed} in {nodes} nodes"));
            let plan = OffsetPlan { offsets };
            assert_eq!(validate_offsets(&p, &plan), Ok(lb));
            assert_eq!(
                race_at(&p, lb, 2_000_000, true),
                (Some(plan.offsets), nodes)
            );
        }
    }

    /// Below the bound nothing is found, and the whole limit is charged.
    #[test]
    fn below_the_bound_nothing_is_found() {
        let p = exact_plane(40, 1 << 10, 3);
        let lb = offsets_lower_bound(&p);
        assert_eq!(race_at(&p, lb - 1, 10_000, true), (None, 10_000));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 200 }))]

        /// Whatever the problem and capacity, a packing found is valid and fits, and
        /// the answer does not depend on the threads.
        #[test]
        fn what_it_finds_fits(p in problem(12), slack in 0u64..64) {
            let capacity = offsets_lower_bound(&p) + slack;
            let (found, nodes) = race_at(&p, capacity, 20_000, false);
            if let Some(offsets) = &found {
                let plan = OffsetPlan { offsets: offsets.clone() };
                let h = validate_offsets(&p, &plan).expect("valid");
                prop_assert!(h <= capacity);
            }
            prop_assert_eq!(race_at(&p, capacity, 20_000, true), (found, nodes));
        }
    }
}
