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
//!   one offset never share a section); see [`Decider::level_filled`];
//! - **top rule**: the same disjoint choice on top of the buffer just placed: a section
//!   of its span whose unplaced total leaves less than a granule above its top needs a
//!   buffer exactly there, and the conflicting buffers whose `min_offset` is that top
//!   must hold disjoint spans covering all such sections (see [`Decider::top_covered`]).
//!
//! Each attempt uses one preorder of a rotation (see the `order` module). Fixed
//! preorders run round robin with a node limit that doubles every round (one fixed
//! preorder alone runs once with the whole limit); preorders with a random key restart on
//! the Luby sequence, each attempt with a new order. An attempt that ends without a
//! packing proves infeasibility, whatever its preorder. The search is iterative (an
//! explicit stack of frames) and undoes placements from a trail.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::max_add_tree::MaxAddTree;
use crate::problem::align_up;

use super::order::{is_random, key, luby, mix, Facts, Preorder, PREORDERS};
use super::sweep::Sweep;

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

/// A sub-problem: the sections `[lo, hi)` and the buffers unplaced when it was made.
struct Part {
    lo: u32,
    hi: u32,
    buffers: Vec<u32>,
}

/// The placement a node made for its current child, to undo.
struct Placed {
    buf: u32,
    mark: usize,
    hatless: bool,
}

enum Frame {
    Node {
        part: u32,
        list: Vec<Cand>,
        pos: usize,
        min_key: (u64, u32),
        /// Dominance bound: no placement at or above it.
        bound: u64,
        placed: Option<Placed>,
    },
    Split {
        first: u32,
        end: u32,
        next: u32,
    },
}

enum Undo {
    MinOff(u32, u64),
    Witness(u32, u32),
}

/// Outcome of a finished frame, passed to its parent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ret {
    Ok,
    Fail,
}

/// The search state; reused across probes of one problem.
pub(crate) struct Decider<'a> {
    sw: &'a Sweep,
    offsets: Vec<u64>,
    min_off: Vec<u64>,
    /// `min_off` of unplaced buffers, `u64::MAX` for placed ones (one load per member
    /// when a section looks for a new witness).
    eff: Vec<u64>,
    /// Per section, an unplaced member whose `min_offset` is at most `capacity - total`
    /// (so the section's floor plus its unplaced total fits), or `NONE` when the section
    /// has no unplaced member.
    witness: Vec<u32>,
    total: Vec<u64>,
    cuts: Vec<u32>,
    rem: MaxAddTree,
    trail: Vec<Undo>,
    stamp: Vec<u32>,
    epoch: u32,
    dirty: Vec<u32>,
    zero_cuts: Vec<u32>,
    parts: Vec<Part>,
    pool: Vec<Vec<Cand>>,
    solution: Vec<u64>,
    capacity: u64,
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
    /// Sections covered by a candidate at the current level (stamped with `cover_epoch`).
    cover: Vec<u32>,
    cover_epoch: u32,
    /// Scratch of the level rule: the sections that need a buffer at the level, the spans
    /// of the candidates there, and which section boundaries a disjoint choice reaches.
    need: Vec<u32>,
    level_spans: Vec<(u32, u32)>,
    reach: Vec<bool>,
    /// Scratch of the top rule: spans of the buffers that can go on top of the last one
    /// placed.
    top_spans: Vec<(u32, u32)>,
    /// Probes started, and attempts started in the current probe: with `seed`, they seed
    /// the random key `R`.
    probes: u64,
    attempts: u64,
    seed: u64,
}

impl<'a> Decider<'a> {
    pub fn new(sw: &'a Sweep) -> Decider<'a> {
        let s = sw.sections();
        Decider {
            sw,
            offsets: vec![UNPLACED; sw.n],
            min_off: vec![0; sw.n],
            eff: vec![0; sw.n],
            witness: vec![NONE; s],
            total: sw.breadth.clone(),
            cuts: sw.cuts.clone(),
            rem: MaxAddTree::new(s),
            trail: Vec::new(),
            stamp: vec![0; s],
            epoch: 0,
            dirty: Vec::new(),
            zero_cuts: Vec::new(),
            parts: Vec::new(),
            pool: Vec::new(),
            solution: vec![0; sw.n],
            capacity: 0,
            preorder: PREORDERS[0],
            rotation: PREORDERS.to_vec(),
            nodes: 0,
            limit: 0,
            clock: Instant::now(),
            time_cap: None,
            bar: None,
            probe_start: 0,
            cover: vec![0; s],
            cover_epoch: 0,
            need: Vec::new(),
            level_spans: Vec::new(),
            reach: Vec::new(),
            top_spans: Vec::new(),
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
        self.capacity = capacity;
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
        self.capacity = capacity;
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
        let base = (2 * self.sw.n as u64).max(64);
        // Fixed preorders double their attempts every round. Randomised ones restart on the
        // Luby sequence (short attempts, now and then a longer one, each with a new order);
        // next to fixed ones, a randomised preorder's turn in a round is worth as many
        // nodes as a fixed one's, spent on as many Luby attempts as fit.
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

    fn reset(&mut self) {
        let sw = self.sw;
        self.offsets.iter_mut().for_each(|x| *x = UNPLACED);
        self.min_off.iter_mut().for_each(|x| *x = 0);
        self.eff.iter_mut().for_each(|x| *x = 0);
        for (k, w) in self.witness.iter_mut().enumerate() {
            *w = sw.members(k).first().copied().unwrap_or(NONE);
        }
        self.total.clone_from(&sw.breadth);
        self.cuts.clone_from(&sw.cuts);
        self.rem.reset(&sw.breadth);
        self.trail.clear();
        self.parts.clear();
    }

    /// One depth-first search under the current preorder.
    fn attempt(&mut self) -> Probe {
        self.attempts += 1;
        self.reset();
        let sw = self.sw;
        if sw.breadth.iter().any(|&t| t > self.capacity)
            || sw.sizes.iter().any(|&s| s > self.capacity)
        {
            return Probe::Infeasible;
        }
        // The root: the problem split at its static cuts.
        let all: Vec<u32> = (0..sw.n as u32).collect();
        let (first, end) = self.split(0, sw.sections() as u32, &all);
        let mut stack = vec![Frame::Split {
            first,
            end,
            next: first,
        }];
        let mut ret: Option<Ret> = None;
        while let Some(top) = stack.last_mut() {
            match top {
                Frame::Split { first, end, next } => {
                    match ret.take() {
                        Some(Ret::Fail) => {
                            let f = *first;
                            stack.pop();
                            self.drop_parts(f);
                            ret = Some(Ret::Fail);
                            continue;
                        }
                        Some(Ret::Ok) => *next += 1,
                        None => {}
                    }
                    if *next == *end {
                        let f = *first;
                        stack.pop();
                        self.drop_parts(f);
                        ret = Some(Ret::Ok);
                        continue;
                    }
                    let part = *next;
                    let list = self.root_list(part);
                    stack.push(Frame::Node {
                        part,
                        bound: self.bound(&list),
                        list,
                        pos: 0,
                        min_key: (0, 0),
                        placed: None,
                    });
                }
                Frame::Node {
                    part,
                    list,
                    pos,
                    min_key,
                    bound,
                    placed,
                } => {
                    if let Some(r) = ret.take() {
                        let p = placed.take().expect("a child answers its placement");
                        if r == Ret::Ok {
                            self.solution[p.buf as usize] = self.offsets[p.buf as usize];
                        }
                        self.unplace(p.buf as usize, p.mark);
                        if r == Ret::Ok || p.hatless {
                            let l = std::mem::take(list);
                            stack.pop();
                            self.pool.push(l);
                            ret = Some(r);
                            continue;
                        }
                    }
                    if list.is_empty() {
                        // A leaf: every buffer of the sub-problem is placed.
                        stack.pop();
                        ret = Some(Ret::Ok);
                        continue;
                    }
                    // The next candidate that the rules allow.
                    let mut chosen = None;
                    while *pos < list.len() {
                        let c = list[*pos];
                        *pos += 1;
                        if (c.0, c.1) < *min_key {
                            continue;
                        }
                        if c.0 >= *bound {
                            break; // the list is sorted by offset
                        }
                        let twin = sw.twin_before[c.2 as usize];
                        if twin != NONE && self.offsets[twin as usize] == UNPLACED {
                            continue;
                        }
                        chosen = Some(c);
                        break;
                    }
                    let Some((o, rank, i)) = chosen else {
                        let l = std::mem::take(list);
                        stack.pop();
                        self.pool.push(l);
                        ret = Some(Ret::Fail);
                        continue;
                    };
                    if self.nodes >= self.limit {
                        return Probe::Unknown;
                    }
                    self.nodes += 1;
                    if self.nodes % 1024 == 0 && self.timed_out() {
                        return Probe::Unknown;
                    }
                    let part_id = *part;
                    let mark = self.trail.len();
                    let (fits, hatless) = self.place(i as usize, o, part_id);
                    if !fits
                        || (self.zero_cuts.is_empty() && !self.level_filled(part_id, o, list, *pos))
                    {
                        self.unplace(i as usize, mark);
                        continue;
                    }
                    *placed = Some(Placed {
                        buf: i,
                        mark,
                        hatless,
                    });
                    if self.zero_cuts.is_empty() {
                        let child = self.child_list(list);
                        let bound = self.bound(&child);
                        stack.push(Frame::Node {
                            part: part_id,
                            list: child,
                            pos: 0,
                            min_key: (o, rank),
                            bound,
                            placed: None,
                        });
                    } else {
                        let p = &self.parts[part_id as usize];
                        let (lo, hi) = (p.lo, p.hi);
                        let buffers = std::mem::take(&mut self.parts[part_id as usize].buffers);
                        self.zero_cuts.clear();
                        let (first, end) = self.split(lo, hi, &buffers);
                        self.parts[part_id as usize].buffers = buffers;
                        stack.push(Frame::Split {
                            first,
                            end,
                            next: first,
                        });
                    }
                }
            }
        }
        match ret {
            Some(Ret::Ok) => Probe::Found(self.solution.clone()),
            _ => Probe::Infeasible,
        }
    }

    /// Splits the sections `[lo, hi)` at every cut that no unplaced buffer crosses (cut
    /// `k` separates sections `k` and `k + 1`) into sub-problems of the unplaced buffers of
    /// `buffers`; returns their range in `self.parts`.
    fn split(&mut self, lo: u32, hi: u32, buffers: &[u32]) -> (u32, u32) {
        let sw = self.sw;
        let first = self.parts.len() as u32;
        let mut bounds = vec![lo];
        for k in lo..hi.saturating_sub(1) {
            if self.cuts[k as usize] == 0 {
                bounds.push(k + 1);
            }
        }
        bounds.push(hi);
        bounds.dedup();
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); bounds.len() - 1];
        for &j in buffers {
            if self.offsets[j as usize] != UNPLACED {
                continue;
            }
            let s = sw.span[j as usize].0;
            let g = bounds.partition_point(|&b| b <= s) - 1;
            groups[g].push(j);
        }
        for (g, list) in groups.into_iter().enumerate() {
            if list.is_empty() {
                continue;
            }
            self.parts.push(Part {
                lo: bounds[g],
                hi: bounds[g + 1],
                buffers: list,
            });
        }
        (first, self.parts.len() as u32)
    }

    fn drop_parts(&mut self, first: u32) {
        self.parts.truncate(first as usize);
    }

    /// The candidates of a sub-problem's root, ranked by the current preorder with the
    /// live section totals.
    fn root_list(&mut self, part: u32) -> Vec<Cand> {
        let sw = self.sw;
        let p = &self.parts[part as usize];
        let attempt_seed = mix(self.seed ^ (self.probes << 32) ^ self.attempts);
        let key_of = |i: usize| -> [u128; 3] {
            let (s, e) = sw.span[i];
            let t = self.total[s as usize..e as usize]
                .iter()
                .copied()
                .max()
                .unwrap_or(0);
            let facts = Facts {
                width: sw.widths[i],
                size: sw.sizes[i],
                total: t,
                first: sw.span[i].0,
                noise: mix(i as u64 ^ attempt_seed),
            };
            key(&self.preorder, &facts)
        };
        let mut keyed: Vec<([u128; 3], u32)> =
            p.buffers.iter().map(|&i| (key_of(i as usize), i)).collect();
        keyed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut list = self.pool.pop().unwrap_or_default();
        list.clear();
        list.extend(
            keyed
                .iter()
                .enumerate()
                .map(|(r, &(_, i))| (self.min_off[i as usize], r as u32, i)),
        );
        list.sort_unstable();
        list
    }

    /// The candidates of a child: the parent's unplaced ones with their new offsets.
    fn child_list(&mut self, parent: &[Cand]) -> Vec<Cand> {
        let mut list = self.pool.pop().unwrap_or_default();
        list.clear();
        for &(_, r, i) in parent {
            if self.offsets[i as usize] == UNPLACED {
                list.push((self.min_off[i as usize], r, i));
            }
        }
        list.sort_unstable();
        list
    }

    fn bound(&self, list: &[Cand]) -> u64 {
        list.iter()
            .map(|&(o, _, i)| o.saturating_add(self.sw.sizes[i as usize]))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Places `i` at `o`; returns whether the node survives the checks, and whether `i`
    /// conflicts with no unplaced buffer. Fills `zero_cuts` with the cuts it emptied.
    /// The caller undoes the placement with [`Decider::unplace`] either way.
    ///
    /// The unallocated floor of a section (the lowest `min_offset` of its unplaced
    /// buffers) plus its unplaced total must fit: the section keeps a *witness*, an
    /// unplaced member low enough, and is only rescanned when its witness is placed or
    /// moves too high. Deeper in the search totals only fall, so a witness stays good
    /// until then.
    fn place(&mut self, i: usize, o: u64, part: u32) -> (bool, bool) {
        let sw = self.sw;
        let cap = self.capacity;
        let size = sw.sizes[i];
        self.offsets[i] = o;
        self.eff[i] = u64::MAX;
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.stamp.iter_mut().for_each(|x| *x = 0);
            self.epoch = 1;
        }
        self.dirty.clear();
        let mut fits = o + size <= cap;
        let top = o + size;
        let (s, e) = sw.span[i];
        self.rem.add(s as usize, e as usize, -(size as i128));
        for k in s..e {
            self.total[k as usize] -= size;
            if self.witness[k as usize] == i as u32 {
                self.stamp[k as usize] = self.epoch;
                self.dirty.push(k);
            }
        }
        for k in s..e.saturating_sub(1) {
            self.cuts[k as usize] -= 1;
            if self.cuts[k as usize] == 0 {
                self.zero_cuts.push(k);
            }
        }
        let mut hatless = true;
        self.top_spans.clear();
        for &j in sw.conflicts(i) {
            let j = j as usize;
            if self.offsets[j] != UNPLACED {
                continue;
            }
            hatless = false;
            let need = align_up(top, sw.aligns[j]);
            let old = self.min_off[j];
            if need <= old {
                if old == top {
                    self.top_spans.push(sw.span[j]);
                }
                continue;
            }
            if need == top {
                self.top_spans.push(sw.span[j]);
            }
            if need + sw.sizes[j] > cap {
                fits = false;
            }
            self.trail.push(Undo::MinOff(j as u32, old));
            self.min_off[j] = need;
            self.eff[j] = need;
            let (js, je) = sw.span[j];
            for k in js..je {
                let k = k as usize;
                if self.witness[k] == j as u32
                    && need > cap - self.total[k]
                    && self.stamp[k] != self.epoch
                {
                    self.stamp[k] = self.epoch;
                    self.dirty.push(k as u32);
                }
            }
        }
        if !fits {
            return (false, hatless);
        }
        for d in 0..self.dirty.len() {
            let k = self.dirty[d] as usize;
            let old = self.witness[k];
            let w = if self.total[k] == 0 {
                NONE
            } else {
                let slack = cap - self.total[k];
                match sw
                    .members(k)
                    .iter()
                    .find(|&&j| self.eff[j as usize] <= slack)
                {
                    Some(&j) => j,
                    None => {
                        fits = false;
                        break;
                    }
                }
            };
            if w != old {
                self.trail.push(Undo::Witness(k as u32, old));
                self.witness[k] = w;
            }
        }
        if fits {
            // Every unplaced buffer of the sub-problem goes at or above `o`.
            let p = &self.parts[part as usize];
            if o.saturating_add(self.rem.max_in(p.lo as usize, p.hi as usize)) > cap {
                fits = false;
            }
        }
        (fits && self.top_covered(s, e, top), hatless)
    }

    /// The *top rule*, after placing a buffer over the sections `[s, e)` with its top at
    /// `top`: every unplaced buffer alive there goes at or above `top`, so a section whose
    /// unplaced total leaves less than a granule above `top` needs a buffer exactly at
    /// `top`. Those buffers (the conflicting ones whose `min_offset` is `top`, gathered in
    /// `top_spans` by [`Decider::place`]) must hold pairwise disjoint spans covering every
    /// such section. The level rule's disjoint choice, on top of the buffer just placed
    /// (a single section is the unallocated floor's case).
    fn top_covered(&mut self, s: u32, e: u32, top: u64) -> bool {
        let threshold = self.capacity as i128 - top as i128 - self.sw.granule as i128;
        let threshold = threshold.max(0);
        let need = &mut self.need;
        need.clear();
        self.rem
            .all_above(s as usize, e as usize, threshold, &mut |k| {
                need.push(k as u32);
                true
            });
        self.need.len() < 2 || disjoint_cover(&self.need, &mut self.top_spans, &mut self.reach)
    }

    /// The *level rule*, for the child that placed a buffer at `o` (its candidates after
    /// `list[from..]` are the ones ranked after it). Every later placement in this
    /// sub-problem goes at `o` (only a buffer whose `min_offset` is `o` and that is ranked
    /// after the one placed: a buffer below `o` can only rise above it) or at `o +
    /// granule` or higher. So a section whose unplaced total does not fit above `o +
    /// granule` *needs* a buffer at `o`. Buffers at one offset never share a section, so
    /// the candidates at `o` must hold a set of disjoint spans covering every section in
    /// need; without one, the child fails (first each section alone, then the disjoint
    /// choice, by [`disjoint_cover`]). On tight instances (slack under a granule, as in
    /// exact tilings) this finds the dead end at once instead of after every other
    /// section at this level was filled.
    fn level_filled(&mut self, part: u32, o: u64, list: &[Cand], from: usize) -> bool {
        let sw = self.sw;
        let p = &self.parts[part as usize];
        let (lo, hi) = (p.lo as usize, p.hi as usize);
        let threshold = (self.capacity as i128 - o as i128 - sw.granule as i128).max(0);
        if self.rem.max_in(lo, hi) as i128 <= threshold {
            return true;
        }
        self.cover_epoch = self.cover_epoch.wrapping_add(1);
        if self.cover_epoch == 0 {
            self.cover.iter_mut().for_each(|x| *x = 0);
            self.cover_epoch = 1;
        }
        let epoch = self.cover_epoch;
        self.level_spans.clear();
        for &(m, _, c) in &list[from..] {
            if m != o {
                break; // sorted by offset
            }
            let c = c as usize;
            if self.offsets[c] != UNPLACED || self.min_off[c] != o {
                continue;
            }
            let (s, e) = sw.span[c];
            self.level_spans.push((s, e));
            for k in s..e {
                self.cover[k as usize] = epoch;
            }
        }
        let (cover, need) = (&self.cover, &mut self.need);
        need.clear();
        let each_covered = self.rem.all_above(lo, hi, threshold, &mut |k| {
            need.push(k as u32);
            cover[k] == epoch
        });
        each_covered
            && (self.need.len() < 2
                || disjoint_cover(&self.need, &mut self.level_spans, &mut self.reach))
    }

    fn unplace(&mut self, i: usize, mark: usize) {
        let sw = self.sw;
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Undo::MinOff(j, v)) => {
                    self.min_off[j as usize] = v;
                    self.eff[j as usize] = v;
                }
                Some(Undo::Witness(k, w)) => self.witness[k as usize] = w,
                None => break,
            }
        }
        let size = sw.sizes[i];
        let (s, e) = sw.span[i];
        self.rem.add(s as usize, e as usize, size as i128);
        for k in s..e {
            self.total[k as usize] += size;
        }
        for k in s..e.saturating_sub(1) {
            self.cuts[k as usize] += 1;
        }
        self.zero_cuts.clear();
        self.offsets[i] = UNPLACED;
        self.eff[i] = self.min_off[i];
    }
}

/// Whether some of `spans` (section ranges `[s, e)`), pairwise disjoint, cover every
/// section of `need` (ascending, each inside some span). A sweep over section boundaries:
/// boundary `p` is reached when the sections in need below it are covered by disjoint
/// spans ending at or before it. `O(sections spanned + spans log spans)`.
fn disjoint_cover(need: &[u32], spans: &mut [(u32, u32)], reach: &mut Vec<bool>) -> bool {
    let a = spans.iter().map(|x| x.0).min().unwrap_or(0);
    let b = spans.iter().map(|x| x.1).max().unwrap_or(0);
    if need.first().is_none_or(|&k| k < a) || need.last().is_none_or(|&k| k >= b) {
        return need.is_empty();
    }
    spans.sort_unstable_by_key(|x| x.1);
    reach.clear();
    reach.resize((b - a + 1) as usize, false);
    reach[0] = true;
    let (mut next_need, mut next_span) = (0, 0);
    for p in a..b {
        let i = (p - a) as usize;
        let needed = need.get(next_need) == Some(&p);
        if needed {
            next_need += 1;
        }
        let mut r = reach[i] && !needed;
        while next_span < spans.len() && spans[next_span].1 == p + 1 {
            r |= reach[(spans[next_span].0 - a) as usize];
            next_span += 1;
        }
        reach[i + 1] = r;
    }
    reach[(b - a) as usize]
}

#[cfg(test)]
mod tests {
    use super::disjoint_cover;

    #[test]
    fn disjoint_cover_needs_spans_that_do_not_overlap() {
        let mut reach = Vec::new();
        let mut check = |need: &[u32], spans: &[(u32, u32)]| {
            disjoint_cover(need, &mut spans.to_vec(), &mut reach)
        };
        // Each section is covered, but only by overlapping spans.
        assert!(!check(&[1, 2, 3], &[(1, 3), (2, 4)]));
        assert!(check(&[1, 2, 3], &[(1, 3), (2, 4), (3, 4)]));
        assert!(check(&[1, 3], &[(0, 2), (1, 4), (3, 5)]));
        // A section not in need may stay uncovered between the chosen spans.
        assert!(check(&[0, 4], &[(0, 2), (1, 5), (4, 6)]));
        assert!(!check(&[0, 5], &[(0, 5), (3, 6)]));
        assert!(check(&[0, 4], &[(0, 5), (3, 6)]));
        assert!(check(&[], &[]));
        assert!(!check(&[7], &[(0, 2)]));
    }
}
