//! The decision search: do all buffers fit under a capacity?
//!
//! A depth-first search over *canonical* packings, after MiniMalloc (Moffitt, ASPLOS '23):
//! buffers are placed in non-decreasing offset order, each at its `min_offset` (the highest
//! top of the placed buffers it conflicts with, aligned). Every packing can be pushed down
//! and reordered into such a sequence without growing, so the search is complete. At each
//! node the candidates are the unplaced buffers of the current sub-problem sorted by
//! `(min_offset, rank)`, where `rank` is the sub-problem's own preorder. The rules:
//!
//! - **canonical order**: a child never places a buffer with a smaller `(offset, rank)`
//!   than its parent placed;
//! - **dominance**: no buffer goes at or above `min(min_offset + size)` over the unplaced
//!   buffers (some buffer could then drop below it);
//! - **identical buffers**: of buffers with the same lifetime, size and alignment, only the
//!   first unplaced one is a candidate (they are interchangeable);
//! - **section inference with the unallocated floor**: in each section, every unplaced
//!   buffer goes at or above `floor = min(min_offset)` over the unplaced buffers alive
//!   there, and at or above the last offset placed, so `max(floor, last) + unplaced size >
//!   capacity` fails the node. Incrementally: each section keeps a witness, an unplaced
//!   member whose `min_offset` is low enough, and is rescanned only when its witness is
//!   placed or moves above the section's slack; `last + unplaced size` is a range maximum
//!   over the sub-problem's sections;
//! - **hatless pruning**: when the buffer just placed conflicts with no unplaced buffer and
//!   its subtree fails, its siblings fail too;
//! - **dynamic temporal decomposition**: each cut between sections counts the unplaced
//!   buffers crossing it. When a placement leaves a cut with none, the two sides are
//!   independent: each becomes a sub-problem with its own preorder (recomputed from the
//!   live section totals), solved once; the first failing side fails the placement, and a
//!   solved side is never searched again. The root is split the same way (static cuts).
//!
//! - **level rule**: after a placement at `o`, a section whose unplaced total leaves less
//!   than a granule above `o` needs an unplaced member that can still go exactly at `o`
//!   (its `min_offset` is `o` and it is ranked after the buffer placed), and those
//!   candidates must hold pairwise disjoint spans covering all such sections (buffers at
//!   one offset never share a section); see `rules.rs`;
//! - **top rule**: the same disjoint choice on top of the buffer just placed: a section
//!   of its span whose unplaced total leaves less than a granule above its top needs a
//!   buffer exactly there, and the conflicting buffers whose `min_offset` is that top
//!   must hold disjoint spans covering all such sections (see `rules.rs`).
//!
//! Each attempt uses one preorder of a rotation (see the `order` module). Fixed
//! preorders run round robin with a node limit that doubles every round (one fixed
//! preorder alone runs once with the whole limit); preorders with a random key restart on
//! the Luby sequence, each attempt with a new order. An attempt that ends without a
//! packing proves infeasibility, whatever its preorder. The search is iterative (an
//! explicit stack of frames) and undoes placements from a trail.
//!
//! The pieces: `packing.rs` is the state a placement changes (offsets, minimum offsets,
//! section totals and their witnesses, cut counts, the trail); `rules.rs` the level and top
//! rules; `parts.rs` the sub-problems of the decomposition and the candidate lists;
//! `search.rs` one attempt's depth-first search; this file the probe (the rotation of
//! preorders and the restarts).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::order::{is_random, luby, mix, Preorder, PREORDERS};
use super::sweep::Sweep;

mod packing;
mod parts;
mod rules;
mod search;

use packing::Packing;
use parts::Parts;
use rules::Rules;

const UNPLACED: u64 = u64::MAX;
const NONE: u32 = u32::MAX;

/// The answer of one decision probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// A packing under the capacity: an offset per buffer.
    Found(Vec<u64>),
    /// Proven: nothing fits under the capacity.
    Infeasible,
    /// The node limit or the time cap ran out first.
    Unknown,
}

/// One candidate of a node: `(min_offset, rank, buffer)`.
type Cand = (u64, u32, u32);

/// The search state; reused across probes of one problem.
pub(crate) struct Decider<'a> {
    sw: &'a Sweep,
    /// The packing in progress (see `packing.rs`).
    packing: Packing<'a>,
    /// The sub-problems on the search's path (see `parts.rs`).
    parts: Parts,
    /// Scratch space of the level and top rules (see `rules.rs`).
    rules: Rules,
    /// Offsets of the buffers of solved sub-problems.
    solution: Vec<u64>,
    preorder: Preorder,
    rotation: Vec<Preorder>,
    /// Nodes (placements tried) over all probes.
    pub nodes: u64,
    limit: u64,
    clock: Instant,
    time_cap: Option<Duration>,
    /// While racing (see `race.rs`): the fewest probe nodes at which a racer found a
    /// packing; this decider stops once its own probe has used more (it can no longer win).
    bar: Option<&'a AtomicU64>,
    /// [`Decider::nodes`] when the current probe started.
    probe_start: u64,
    /// Probes started, and attempts started in the current probe: with `seed`, they seed
    /// the random key `R`.
    probes: u64,
    attempts: u64,
    seed: u64,
}

impl<'a> Decider<'a> {
    pub fn new(sw: &'a Sweep) -> Decider<'a> {
        Decider {
            sw,
            packing: Packing::new(sw),
            parts: Parts::new(),
            rules: Rules::new(sw.sections()),
            solution: vec![0; sw.n],
            preorder: PREORDERS[0],
            rotation: PREORDERS.to_vec(),
            nodes: 0,
            limit: 0,
            clock: Instant::now(),
            time_cap: None,
            bar: None,
            probe_start: 0,
            probes: 0,
            attempts: 0,
            seed: 0,
        }
    }

    /// Seeds the random key `R` (racers with the same rotation get different orders).
    pub fn set_seed(&mut self, seed: u64) {
        self.seed = seed;
    }

    /// The preorders [`Decider::solve`] rotates through (at least one).
    pub fn set_rotation(&mut self, rotation: &[Preorder]) {
        if !rotation.is_empty() {
            self.rotation = rotation.to_vec();
        }
    }

    /// One attempt under `preorder` alone, stopping after `limit` more nodes.
    #[cfg(test)]
    pub fn solve_once(&mut self, capacity: u64, preorder: Preorder, limit: u64) -> Probe {
        self.packing.capacity = capacity;
        self.clock = Instant::now();
        self.time_cap = None;
        self.probe_start = self.nodes;
        self.preorder = preorder;
        self.limit = self.nodes.saturating_add(limit);
        self.attempt()
    }

    /// Makes every later probe stop (as [`Probe::Unknown`]) once it has used more nodes
    /// than `bar` says (a racer found a packing with fewer).
    pub fn race_against(&mut self, bar: &'a AtomicU64) {
        self.bar = Some(bar);
    }

    /// Nodes used by the current (or last) probe.
    pub fn probe_nodes(&self) -> u64 {
        self.nodes - self.probe_start
    }

    /// Decides whether everything fits under `capacity`, stopping when [`Decider::nodes`]
    /// reaches `limit` or `time_cap` has passed since `clock`.
    pub fn solve(
        &mut self,
        capacity: u64,
        limit: u64,
        clock: Instant,
        time_cap: Option<Duration>,
    ) -> Probe {
        self.packing.capacity = capacity;
        self.clock = clock;
        self.time_cap = time_cap;
        self.probe_start = self.nodes;
        // Random orders depend only on the seed, the probe and the attempt within it, never
        // on where an earlier probe was stopped.
        self.probes += 1;
        self.attempts = 0;
        if self.sw.n == 0 {
            return Probe::Found(Vec::new());
        }
        self.rotate(limit)
    }

    /// The attempts of one probe. Fixed preorders double their attempts every round.
    /// Randomised ones restart on the Luby sequence (short attempts, now and then a longer
    /// one, each with a new order); next to fixed ones, a randomised preorder's turn in a
    /// round is worth as many nodes as a fixed one's, spent on as many Luby attempts as
    /// fit.
    fn rotate(&mut self, limit: u64) -> Probe {
        let base = (2 * self.sw.n as u64).max(64);
        let mixed = self.rotation.iter().any(|p| !is_random(p));
        let mut luby_k = 0u64;
        let mut round = 0u64;
        loop {
            round += 1;
            let doubling = base.saturating_mul(1u64 << (round - 1).min(62));
            for k in 0..self.rotation.len() {
                let preorder = self.rotation[k];
                self.preorder = preorder;
                let random = is_random(&preorder);
                let turn_end = self.nodes.saturating_add(doubling);
                loop {
                    let left = limit.saturating_sub(self.nodes);
                    if left == 0 || self.timed_out() {
                        return Probe::Unknown;
                    }
                    let share = if random {
                        luby_k += 1;
                        base.saturating_mul(luby(luby_k))
                    } else if self.rotation.len() == 1 {
                        left // one fixed preorder alone gains nothing from restarts
                    } else {
                        doubling
                    };
                    self.limit = self.nodes + share.min(left);
                    match self.attempt() {
                        Probe::Unknown => {}
                        answer => return answer,
                    }
                    if !(random && mixed && self.nodes < turn_end) {
                        break;
                    }
                }
            }
        }
    }

    fn timed_out(&self) -> bool {
        self.bar
            .is_some_and(|b| self.probe_nodes() > b.load(Ordering::Relaxed))
            || self.time_cap.is_some_and(|cap| self.clock.elapsed() >= cap)
    }

    /// The candidates of a sub-problem's root, ranked by the current preorder with the
    /// live section totals and this attempt's random keys.
    fn root_list(&mut self, part: u32) -> Vec<Cand> {
        let attempt_seed = mix(self.seed ^ (self.probes << 32) ^ self.attempts);
        let noise = |i: usize| mix(i as u64 ^ attempt_seed);
        self.parts
            .root_list(self.sw, &self.packing, part, &self.preorder, noise)
    }
}
