//! `greedy-by-size-improved`: Pisarchyk & Lee §4.4 ("Greedy by Size Improved") in the form
//! TFLite ships as its objects `GREEDY_BY_SIZE` (`GreedyBySizeDistPriorityAssignment`).
//!
//! **Stages** (paper): with `pm` the positional maximums (non-increasing, duplicates
//! merged), stage `2p` holds the buffers of size `== pm[p]` and stage `2p + 1` those of
//! size in `(pm[p+1], pm[p])`; stages are taken in order. TFLite instead groups by
//! *position* (the rightmost `p` with `pm[p] >= size`, i.e. sizes in `(pm[p+1], pm[p]]`),
//! merging each "`== pm[p]`" stage with the one after it. Both give TFLite's exact output
//! on its ChainRecords (96) and ComplexRecords (112, object ids `1,0,2,1,3,0,1,2,0`);
//! the paper's split is the default, TFLite's is kept (private) and tested against it.
//!
//! **Within a stage**, repeatedly the pair (buffer of the stage, suitable object) with the
//! smallest *gap* is assigned: the idle time between the buffer's lifetime and the nearest
//! lifetime already in the object (`lower - upper'` or `lower' - upper`; TFLite's distance
//! is this plus one, because its ends are inclusive, so the order is the same). Ties go
//! to the larger buffer, then the earlier buffer in input order, then the lower object id
//! (TFLite's object tie-break depends on its update order; totals are unaffected on the
//! reference cases). The object grows if the buffer is larger. When no unassigned buffer
//! of the stage fits any object, the largest of them (earliest on ties) opens a new object.
//!
//! **Data structures.** Every object's idle time is a list of *windows* `(a, b)` between
//! consecutive buffers (unbounded before the first and after the last). A buffer fits an
//! object iff some window of it contains its lifetime, and its gap is then
//! `min(lower - a, b - upper)`. Windows are indexed by two max-segment trees over time
//! (by `a` keeping the largest `b`, by `b` keeping the smallest `a`), so a buffer's best
//! window is two `O(log T)` descents. The unassigned buffers of the current stage are
//! indexed the same way (by `lower` keeping the smallest `upper`, by `upper` keeping the
//! largest `lower`), so a window's best buffer is two descents too. A heap holds candidate
//! pairs: at the start of a stage one per buffer (its best window), and one per window
//! created during the stage (its best buffer). A popped pair whose buffer was assigned
//! meanwhile is replaced by its window's new best, one whose window was split by the
//! window's buffer's new best. Pair gaps never change while both are alive, and every
//! live pair is dominated by an entry, so each valid pop is the exact global minimum.
//!
//! Complexity: `O(n log n)` in total (each assignment splits one window into at most two,
//! each stale heap entry is replaced at most once per assignment that caused it).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::objects::UNASSIGNED;
use crate::bounds::positional_maximums;
use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;
use crate::timeline::Timeline;

/// Plans `problem` with greedy by size improved (TFLite's size/distance priority).
pub fn plan(problem: &Problem) -> SharedObjectsPlan {
    plan_staged(problem, true)
}

/// The stage of a buffer of size `size` (see the module documentation).
fn stage_key(pm: &[u64], size: u64, paper_stages: bool) -> usize {
    let p = pm.partition_point(|&x| x >= size).saturating_sub(1);
    if !paper_stages {
        return p;
    }
    // Distinct values of pm, ranked: stage 2r for == value r, 2r+1 below it.
    let first = pm.partition_point(|&x| x > size);
    if first < pm.len() && pm[first] == size {
        2 * first
    } else {
        2 * p + 1
    }
}

/// Heap entry: gap, larger size first, buffer index, object, window.
type Entry = (u64, Reverse<u64>, usize, usize, usize);

/// `paper_stages`: the paper's split (`== pm[p]` and `(pm[p+1], pm[p])` as separate
/// stages) instead of TFLite's positions; kept for comparison in tests.
fn plan_staged(problem: &Problem, paper_stages: bool) -> SharedObjectsPlan {
    let buffers = problem.buffers();
    let n = buffers.len();
    let timeline = Timeline::new(problem);
    let points = timeline.slots() + 1;
    let pm = positional_maximums(problem);
    let stage: Vec<usize> = buffers
        .iter()
        .map(|b| stage_key(&pm, b.size, paper_stages))
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&i| (stage[i], Reverse(buffers[i].size), i));

    let mut st = State {
        buffers: problem,
        timeline: &timeline,
        ids: vec![UNASSIGNED; n],
        sizes: Vec::new(),
        windows: Vec::new(),
        by_a: Leafed::new(points),
        by_b: Leafed::new(points),
        heap: BinaryHeap::new(),
        points,
        stage_pos: vec![(0, 0); n],
    };

    let mut k = 0;
    while k < n {
        let mut end = k;
        while end < n && stage[order[end]] == stage[order[k]] {
            end += 1;
        }
        st.run_stage(&order[k..end]);
        k = end;
    }
    SharedObjectsPlan {
        object_ids: st.ids,
        object_sizes: st.sizes,
    }
}

fn keep_min<T: Ord>(best: &mut Option<T>, x: T) {
    if best.as_ref().is_none_or(|b| x < *b) {
        *best = Some(x);
    }
}

/// An idle window `(a, b)` of an object, in endpoint indices; `a == -1` and `b == points`
/// stand for unbounded ends.
#[derive(Clone, Copy, Debug)]
struct Window {
    a: i64,
    b: usize,
    obj: usize,
    alive: bool,
}

struct State<'p> {
    buffers: &'p Problem,
    timeline: &'p Timeline,
    ids: Vec<usize>,
    sizes: Vec<u64>,
    windows: Vec<Window>,
    /// Windows with a bounded `a`, by `a`; value: largest `b`.
    by_a: Leafed,
    /// Windows with a bounded `b`, by `b`; value: `-a` (largest = smallest `a`).
    by_b: Leafed,
    heap: BinaryHeap<Reverse<Entry>>,
    points: usize,
    /// Position of each buffer in the current stage's two orders (valid for stage buffers).
    stage_pos: Vec<(usize, usize)>,
}

/// The stage's unassigned buffers, indexed for "best buffer in a window" queries.
struct StageIndex {
    /// Buffers sorted by (lower, larger size, index); value `-upper`.
    by_lower: Vec<usize>,
    lower_keys: Vec<usize>,
    tree_lower: MaxTree,
    /// Buffers sorted by (upper, size, reverse index); value `lower`.
    by_upper: Vec<usize>,
    upper_keys: Vec<usize>,
    tree_upper: MaxTree,
}

impl State<'_> {
    fn size(&self, i: usize) -> u64 {
        self.buffers.buffers()[i].size
    }

    fn time(&self, point: usize) -> u64 {
        self.timeline.time(point)
    }

    /// Gap between buffer `i` and window `w` (which must contain it).
    fn gap(&self, i: usize, w: &Window) -> u64 {
        let (s, e) = self.timeline.span(i);
        let left = if w.a >= 0 {
            self.time(s) - self.time(w.a as usize)
        } else {
            u64::MAX
        };
        let right = if w.b < self.points {
            self.time(w.b) - self.time(e)
        } else {
            u64::MAX
        };
        left.min(right)
    }

    fn entry(&self, i: usize, wid: usize) -> Entry {
        let w = &self.windows[wid];
        (self.gap(i, w), Reverse(self.size(i)), i, w.obj, wid)
    }

    fn run_stage(&mut self, stage: &[usize]) {
        self.heap.clear();
        let mut idx = StageIndex::new(self, stage);
        for (k, &i) in idx.by_lower.iter().enumerate() {
            self.stage_pos[i].0 = k;
        }
        for (k, &i) in idx.by_upper.iter().enumerate() {
            self.stage_pos[i].1 = k;
        }
        for &i in stage {
            if let Some(e) = self.best_window(i) {
                self.heap.push(Reverse(e));
            }
        }
        // `stage` is sorted by (larger size, index): the fallback order for new objects.
        let mut next_new = 0;
        loop {
            let Some(Reverse((_, _, i, _, wid))) = self.heap.pop() else {
                while next_new < stage.len() && self.ids[stage[next_new]] != UNASSIGNED {
                    next_new += 1;
                }
                let Some(&i) = stage.get(next_new) else {
                    return;
                };
                let obj = self.sizes.len();
                self.sizes.push(self.size(i));
                self.ids[i] = obj;
                idx.remove(self.stage_pos[i]);
                let (s, e) = self.timeline.span(i);
                self.add_window(-1, s, obj, &idx);
                self.add_window(e as i64, self.points, obj, &idx);
                continue;
            };
            let t_ok = self.ids[i] == UNASSIGNED;
            let w_ok = self.windows[wid].alive;
            if t_ok && w_ok {
                let w = self.windows[wid];
                self.kill_window(wid);
                self.ids[i] = w.obj;
                self.sizes[w.obj] = self.sizes[w.obj].max(self.size(i));
                idx.remove(self.stage_pos[i]);
                let (s, e) = self.timeline.span(i);
                self.add_window(w.a, s, w.obj, &idx);
                self.add_window(e as i64, w.b, w.obj, &idx);
            } else if w_ok {
                if let Some(e) = self.best_buffer(wid, &idx) {
                    self.heap.push(Reverse(e));
                }
            } else if t_ok {
                if let Some(e) = self.best_window(i) {
                    self.heap.push(Reverse(e));
                }
            }
        }
    }

    fn add_window(&mut self, a: i64, b: usize, obj: usize, idx: &StageIndex) {
        if a >= b as i64 {
            return;
        }
        let wid = self.windows.len();
        self.windows.push(Window {
            a,
            b,
            obj,
            alive: true,
        });
        if a >= 0 {
            self.by_a.add(a as usize, wid, b as i64);
        }
        if b < self.points {
            self.by_b.add(b, wid, -a);
        }
        if let Some(e) = self.best_buffer(wid, idx) {
            self.heap.push(Reverse(e));
        }
    }

    fn kill_window(&mut self, wid: usize) {
        let w = self.windows[wid];
        self.windows[wid].alive = false;
        if w.a >= 0 {
            self.by_a.remove(w.a as usize, wid);
        }
        if w.b < self.points {
            self.by_b.remove(w.b, wid);
        }
    }

    /// The best live window for unassigned buffer `i`, as a heap entry.
    fn best_window(&self, i: usize) -> Option<Entry> {
        let (s, e) = self.timeline.span(i);
        let mut best: Option<Entry> = None;
        // Largest a <= s among windows with b >= e.
        if let Some(leaf) = self.by_a.tree.rightmost(s, e as i64) {
            for &wid in &self.by_a.leaves[leaf] {
                if self.windows[wid].b >= e {
                    keep_min(&mut best, self.entry(i, wid));
                }
            }
        }
        // Smallest b >= e among windows with a <= s.
        if let Some(leaf) = self.by_b.tree.leftmost(e, -(s as i64)) {
            for &wid in &self.by_b.leaves[leaf] {
                if self.windows[wid].a <= s as i64 {
                    keep_min(&mut best, self.entry(i, wid));
                }
            }
        }
        best
    }

    /// The best unassigned stage buffer inside live window `wid`, as a heap entry.
    fn best_buffer(&self, wid: usize, idx: &StageIndex) -> Option<Entry> {
        let w = self.windows[wid];
        let mut best: Option<Entry> = None;
        if w.a >= 0 {
            let start = idx.lower_keys.partition_point(|&x| x < w.a as usize);
            if let Some(k) = idx.tree_lower.leftmost(start, -(w.b as i64)) {
                keep_min(&mut best, self.entry(idx.by_lower[k], wid));
            }
        }
        if w.b < self.points {
            let count = idx.upper_keys.partition_point(|&x| x <= w.b);
            if count > 0 {
                if let Some(k) = idx.tree_upper.rightmost(count - 1, w.a) {
                    keep_min(&mut best, self.entry(idx.by_upper[k], wid));
                }
            }
        }
        best
    }
}

impl StageIndex {
    fn new(st: &State<'_>, stage: &[usize]) -> StageIndex {
        let span = |i: usize| st.timeline.span(i);
        let mut by_lower = stage.to_vec();
        by_lower.sort_by_key(|&i| (span(i).0, Reverse(st.size(i)), i));
        let mut by_upper = stage.to_vec();
        by_upper.sort_by_key(|&i| (span(i).1, st.size(i), Reverse(i)));
        let mut tree_lower = MaxTree::new(by_lower.len());
        for (k, &i) in by_lower.iter().enumerate() {
            tree_lower.set(k, -(span(i).1 as i64));
        }
        let mut tree_upper = MaxTree::new(by_upper.len());
        for (k, &i) in by_upper.iter().enumerate() {
            tree_upper.set(k, span(i).0 as i64);
        }
        StageIndex {
            lower_keys: by_lower.iter().map(|&i| span(i).0).collect(),
            upper_keys: by_upper.iter().map(|&i| span(i).1).collect(),
            by_lower,
            tree_lower,
            by_upper,
            tree_upper,
        }
    }

    /// Removes the buffer at positions `(kl, ku)` of the two orders.
    fn remove(&mut self, (kl, ku): (usize, usize)) {
        self.tree_lower.set(kl, i64::MIN);
        self.tree_upper.set(ku, i64::MIN);
    }
}

/// A max-segment tree over leaves, each leaf holding a few ids whose values it maximises.
struct Leafed {
    tree: MaxTree,
    leaves: Vec<Vec<usize>>,
    vals: Vec<Vec<i64>>,
}

impl Leafed {
    fn new(n: usize) -> Leafed {
        Leafed {
            tree: MaxTree::new(n),
            leaves: vec![Vec::new(); n],
            vals: vec![Vec::new(); n],
        }
    }

    fn add(&mut self, leaf: usize, id: usize, val: i64) {
        self.leaves[leaf].push(id);
        self.vals[leaf].push(val);
        self.tree.set(leaf, self.tree.get(leaf).max(val));
    }

    fn remove(&mut self, leaf: usize, id: usize) {
        if let Some(k) = self.leaves[leaf].iter().position(|&x| x == id) {
            self.leaves[leaf].swap_remove(k);
            self.vals[leaf].swap_remove(k);
        }
        let m = self.vals[leaf].iter().copied().max().unwrap_or(i64::MIN);
        self.tree.set(leaf, m);
    }
}

/// A segment tree of `i64` maxima with "first leaf from here whose value reaches a
/// threshold" descents.
struct MaxTree {
    n: usize,
    size: usize,
    v: Vec<i64>,
}

impl MaxTree {
    fn new(n: usize) -> MaxTree {
        let size = n.max(1).next_power_of_two();
        MaxTree {
            n,
            size,
            v: vec![i64::MIN; 2 * size],
        }
    }

    fn get(&self, k: usize) -> i64 {
        self.v[self.size + k]
    }

    fn set(&mut self, k: usize, val: i64) {
        let mut x = self.size + k;
        self.v[x] = val;
        while x > 1 {
            x /= 2;
            self.v[x] = self.v[2 * x].max(self.v[2 * x + 1]);
        }
    }

    /// The largest leaf `k <= limit` with value `>= thr`.
    fn rightmost(&self, limit: usize, thr: i64) -> Option<usize> {
        if self.n == 0 {
            return None;
        }
        self.right_rec(1, 0, self.size, limit.min(self.n - 1), thr)
    }

    fn right_rec(
        &self,
        node: usize,
        nl: usize,
        nr: usize,
        limit: usize,
        thr: i64,
    ) -> Option<usize> {
        if nl > limit || self.v[node] < thr {
            return None;
        }
        if nr - nl == 1 {
            return Some(nl);
        }
        let mid = (nl + nr) / 2;
        self.right_rec(2 * node + 1, mid, nr, limit, thr)
            .or_else(|| self.right_rec(2 * node, nl, mid, limit, thr))
    }

    /// The smallest leaf `k >= start` with value `>= thr`.
    fn leftmost(&self, start: usize, thr: i64) -> Option<usize> {
        if start >= self.n {
            return None;
        }
        self.left_rec(1, 0, self.size, start, thr)
    }

    fn left_rec(&self, node: usize, nl: usize, nr: usize, start: usize, thr: i64) -> Option<usize> {
        if nr <= start || self.v[node] < thr {
            return None;
        }
        if nr - nl == 1 {
            return Some(nl);
        }
        let mid = (nl + nr) / 2;
        self.left_rec(2 * node, nl, mid, start, thr)
            .or_else(|| self.left_rec(2 * node + 1, mid, nr, start, thr))
    }
}

#[cfg(test)]
mod tests {
    use super::super::objects::test_support::check;
    use super::*;
    use crate::fixtures::{self, strategies};

    #[test]
    fn tflite_positions_give_the_same_on_tflite_cases() {
        let complex = fixtures::tflite_complex();
        assert_eq!(plan_staged(&complex, false), plan(&complex));
        let chain = fixtures::tflite_chain();
        assert_eq!(plan_staged(&chain, false), plan(&chain));
    }

    proptest::proptest! {
        #[test]
        fn random_plans_validate(p in strategies::problem(40)) {
            let plan = plan(&p);
            proptest::prop_assert!(check(&p, &plan).is_ok(), "{:?}", check(&p, &plan));
        }

        #[test]
        fn matches_a_quadratic_reference(p in strategies::problem(30), paper in proptest::bool::ANY) {
            let fast = plan_staged(&p, paper);
            proptest::prop_assert!(check(&p, &fast).is_ok());
            proptest::prop_assert_eq!(fast, reference(&p, paper));
        }
    }

    /// Straightforward quadratic version of the same rules, for comparison.
    fn reference(problem: &Problem, paper: bool) -> SharedObjectsPlan {
        let b = problem.buffers();
        let pm = positional_maximums(problem);
        let pos = |s: u64| stage_key(&pm, s, paper);
        let mut ids = vec![UNASSIGNED; b.len()];
        let mut sizes: Vec<u64> = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut stages: Vec<usize> = b.iter().map(|x| pos(x.size)).collect();
        stages.sort_unstable();
        stages.dedup();
        for st in stages {
            loop {
                let mut best: Option<(u64, Reverse<u64>, usize, usize)> = None;
                let mut any = None;
                for i in 0..b.len() {
                    if ids[i] != UNASSIGNED || pos(b[i].size) != st {
                        continue;
                    }
                    if any.is_none_or(|j: usize| (Reverse(b[i].size), i) < (Reverse(b[j].size), j))
                    {
                        any = Some(i);
                    }
                    for (o, m) in members.iter().enumerate() {
                        if m.iter().any(|&j| b[i].conflicts_with(&b[j])) {
                            continue;
                        }
                        let gap = m
                            .iter()
                            .map(|&j| {
                                if b[j].upper <= b[i].lower {
                                    b[i].lower - b[j].upper
                                } else {
                                    b[j].lower - b[i].upper
                                }
                            })
                            .min()
                            .unwrap_or(u64::MAX);
                        keep_min(&mut best, (gap, Reverse(b[i].size), i, o));
                    }
                }
                match (best, any) {
                    (Some((_, _, i, o)), _) => {
                        ids[i] = o;
                        sizes[o] = sizes[o].max(b[i].size);
                        members[o].push(i);
                    }
                    (None, Some(i)) => {
                        ids[i] = sizes.len();
                        sizes.push(b[i].size);
                        members.push(vec![i]);
                    }
                    (None, None) => break,
                }
            }
        }
        SharedObjectsPlan {
            object_ids: ids,
            object_sizes: sizes,
        }
    }
}
