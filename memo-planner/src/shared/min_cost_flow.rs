//! `min-cost-flow`: Lee et al. 2019, TFLite's `MINCOSTFLOW`: object reuse as a
//! minimum-cost flow.
//!
//! **Model.** Buffers in order of first use (`lower`, ties in input order). A bipartite
//! graph has a left vertex `L(j)` ("an object whose last buffer is `j`") and a right
//! vertex `R(i)` ("the object buffer `i` goes into") per buffer, and edges
//! `source -> L(j)` (capacity 1, cost 0), `source -> R(i)` (cost `size_i`: a new object),
//! `L(j) -> R(i)` for `j` ending before `i` starts (`upper_j <= lower_i`, cost
//! `max(0, size_i - size_j)`: reuse, growing the object), and `R(i) -> sink`. A flow of
//! value `n` of minimum cost is computed; the saturated `L(j) -> R(i)` edges chain buffers
//! into objects, and each object's size is the largest in its chain. Objects are numbered
//! by their first buffer's input index, as TFLite numbers them. (The flow cost is TFLite's
//! approximation of the total; the reported total is the true sum of object sizes.)
//!
//! **Solver.** Successive shortest paths with Dijkstra on reduced costs (Johnson
//! potentials; all initial costs are non-negative), one augmentation per right vertex.
//!
//! **Exact vs approximated.**
//! - Problems of at most [`DENSE_LIMIT`] buffers: the full dense graph is solved in one
//!   piece, which is exactly TFLite's optimisation problem (same minimum cost; ties may
//!   pick another optimal flow than TFLite's SPFA).
//! - Larger problems: the full graph has `O(n^2)` edges, so it is solved in *chronological
//!   windows* of [`WINDOW`] consecutive buffers, each optimally for a *sparsified* graph:
//!   right vertices are the window's buffers; each one gets edges only from the
//!   [`NEIGHBOURS`] available predecessors nearest in size at or above its size and the
//!   [`NEIGHBOURS`] nearest below (available = ended before it starts and not yet used as
//!   a predecessor, whether from earlier windows or earlier in this one). Decisions of
//!   earlier windows are fixed. So the result is optimal for each window given the past,
//!   not globally; buffers that could chain across far-apart sizes or into a later
//!   window's choices may be paired less well than the dense optimum.
//! - On windowed problems a predecessor from an earlier window stands for its whole
//!   object: its cost uses the object's size so far (the chain's maximum) instead of the
//!   last buffer's size, and candidates are chosen by that size. TFLite's cost forgets
//!   that an object shrank back to a small tail buffer and, solved window by window,
//!   reuses large objects for small buffers and reopens large ones later (measured: 6.8x
//!   the lower bound on `dnn_trace(100_000, 1)` with the tail cost).
//!
//! Complexity: with `W` = [`WINDOW`] and `K` = [`NEIGHBOURS`], each window has `O(W K)`
//! edges and `W` augmentations of `O(W K log(W K))`, so `O(n W K log(W K) + n log n)`
//! overall, linear in `n` for fixed constants. The dense case is `O(n^3 log n)` with
//! `n <= 64`.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use crate::plan::SharedObjectsPlan;
use crate::problem::Problem;

/// Problems up to this many buffers are solved exactly on the dense graph.
pub const DENSE_LIMIT: usize = 64;
/// Number of consecutive buffers (by first use) optimised together on larger problems.
pub const WINDOW: usize = 32;
/// Candidate predecessors per buffer on each side of its size, on larger problems.
pub const NEIGHBOURS: usize = 4;

/// Plans `problem` with the min-cost-flow strategy.
pub fn plan(problem: &Problem) -> SharedObjectsPlan {
    let n = problem.len();
    if n <= DENSE_LIMIT {
        plan_windows(problem, n.max(1), n)
    } else {
        plan_windows(problem, WINDOW, NEIGHBOURS)
    }
}

fn plan_windows(problem: &Problem, window: usize, neighbours: usize) -> SharedObjectsPlan {
    let buffers = problem.buffers();
    let n = buffers.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| buffers[i].lower);

    let mut pred = vec![usize::MAX; n];
    // Size of the object (chain) each decided buffer ends, as far as it is known.
    let mut chain_size: Vec<u64> = buffers.iter().map(|b| b.size).collect();
    let exact = window >= n;
    // Ended, not yet used as a predecessor, by (chain size, index).
    let mut available: BTreeSet<(u64, usize)> = BTreeSet::new();
    // Started, not yet ended, by upper.
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut solver = Solver::default();
    for chunk in order.chunks(window) {
        let mut candidates: Vec<Vec<usize>> = Vec::with_capacity(chunk.len());
        for &i in chunk {
            let b = &buffers[i];
            while let Some(&Reverse((end, j))) = running.peek() {
                if end > b.lower {
                    break;
                }
                running.pop();
                available.insert((chain_size[j], j));
            }
            let mut c: Vec<usize> = available
                .range((b.size, 0)..)
                .take(neighbours)
                .map(|&(_, j)| j)
                .collect();
            c.extend(
                available
                    .range(..(b.size, 0))
                    .rev()
                    .take(neighbours)
                    .map(|&(_, j)| j),
            );
            candidates.push(c);
            running.push(Reverse((b.upper, i)));
        }
        let sizes: &[u64] = if exact { &[] } else { &chain_size };
        let matched = solver.solve(problem, chunk, &candidates, sizes);
        for (&i, m) in chunk.iter().zip(matched) {
            if let Some(j) = m {
                pred[i] = j;
                available.remove(&(chain_size[j], j));
            }
        }
        // Chain sizes of the window's buffers, in chronological order; re-key the ones
        // that already ended and wait in `available`.
        for &i in chunk {
            let size = match pred[i] {
                usize::MAX => buffers[i].size,
                j => chain_size[j].max(buffers[i].size),
            };
            if size != chain_size[i] && available.remove(&(chain_size[i], i)) {
                available.insert((size, i));
            }
            chain_size[i] = size;
        }
    }

    // Chains: heads numbered by input index, members follow their predecessor.
    let mut object_ids = vec![usize::MAX; n];
    let mut next = vec![usize::MAX; n];
    for i in 0..n {
        if pred[i] != usize::MAX {
            next[pred[i]] = i;
        }
    }
    let mut object_sizes = Vec::new();
    for (head, &p) in pred.iter().enumerate() {
        if p != usize::MAX {
            continue;
        }
        let obj = object_sizes.len();
        let mut size = 0;
        let mut i = head;
        while i != usize::MAX {
            object_ids[i] = obj;
            size = size.max(buffers[i].size);
            i = next[i];
        }
        object_sizes.push(size);
    }
    SharedObjectsPlan {
        object_ids,
        object_sizes,
    }
}

#[derive(Clone, Copy, Debug)]
struct Edge {
    to: usize,
    cap: i32,
    cost: i128,
}

/// Successive-shortest-path solver for one window's bipartite graph; buffers are reused.
#[derive(Default)]
struct Solver {
    edges: Vec<Edge>,
    adj: Vec<Vec<usize>>,
    potential: Vec<i128>,
    dist: Vec<i128>,
    prev: Vec<usize>,
    heap: BinaryHeap<Reverse<(i128, usize)>>,
}

const SOURCE: usize = 0;
const SINK: usize = 1;

impl Solver {
    fn add_edge(&mut self, from: usize, to: usize, cost: i128) {
        self.adj[from].push(self.edges.len());
        self.edges.push(Edge { to, cap: 1, cost });
        self.adj[to].push(self.edges.len());
        self.edges.push(Edge {
            to: from,
            cap: 0,
            cost: -cost,
        });
    }

    /// For each buffer of `right`, its predecessor among its `candidates`, or `None` for a
    /// new object, minimising the flow cost.
    fn solve(
        &mut self,
        problem: &Problem,
        right: &[usize],
        candidates: &[Vec<usize>],
        chain_size: &[u64],
    ) -> Vec<Option<usize>> {
        let buffers = problem.buffers();
        // Vertices: source, sink, right vertices 2.., then left vertices.
        let mut left: Vec<usize> = candidates.iter().flatten().copied().collect();
        left.sort_unstable();
        left.dedup();
        let nv = 2 + right.len() + left.len();
        self.edges.clear();
        self.adj.iter_mut().for_each(Vec::clear);
        self.adj.resize(nv, Vec::new());
        let left_vertex = |j: usize| 2 + right.len() + left.binary_search(&j).unwrap_or(0);
        for (k, &i) in right.iter().enumerate() {
            self.add_edge(SOURCE, 2 + k, buffers[i].size as i128);
            self.add_edge(2 + k, SINK, 0);
        }
        for k in 0..left.len() {
            self.add_edge(SOURCE, 2 + right.len() + k, 0);
        }
        for (k, (&i, c)) in right.iter().zip(candidates).enumerate() {
            for &j in c {
                let pred_size = chain_size.get(j).copied().unwrap_or(buffers[j].size);
                let cost = buffers[i].size.saturating_sub(pred_size) as i128;
                self.add_edge(left_vertex(j), 2 + k, cost);
            }
        }
        self.potential.clear();
        self.potential.resize(nv, 0);
        for _ in 0..right.len() {
            if !self.augment(nv) {
                break;
            }
        }
        right
            .iter()
            .enumerate()
            .map(|(k, _)| {
                self.adj[2 + k].iter().find_map(|&e| {
                    let edge = self.edges[e];
                    // A saturated forward edge into R(k) has its reverse edge (odd index,
                    // out of R(k)) at capacity 1, pointing at the left vertex.
                    (e % 2 == 1 && edge.cap == 1 && edge.to >= 2 + right.len())
                        .then(|| left[edge.to - 2 - right.len()])
                })
            })
            .collect()
    }

    /// One shortest augmenting path from source to sink; false if none.
    fn augment(&mut self, nv: usize) -> bool {
        const INF: i128 = i128::MAX / 4;
        self.dist.clear();
        self.dist.resize(nv, INF);
        self.prev.clear();
        self.prev.resize(nv, usize::MAX);
        self.heap.clear();
        self.dist[SOURCE] = 0;
        self.heap.push(Reverse((0, SOURCE)));
        while let Some(Reverse((d, v))) = self.heap.pop() {
            if d > self.dist[v] {
                continue;
            }
            if v == SINK {
                break;
            }
            for &e in &self.adj[v] {
                let edge = self.edges[e];
                if edge.cap <= 0 {
                    continue;
                }
                let nd = d + edge.cost + self.potential[v] - self.potential[edge.to];
                if nd < self.dist[edge.to] {
                    self.dist[edge.to] = nd;
                    self.prev[edge.to] = e;
                    self.heap.push(Reverse((nd, edge.to)));
                }
            }
        }
        let ds = self.dist[SINK];
        if ds >= INF {
            return false;
        }
        for v in 0..nv {
            self.potential[v] += self.dist[v].min(ds);
        }
        let mut v = SINK;
        while v != SOURCE {
            let e = self.prev[v];
            self.edges[e].cap -= 1;
            self.edges[e ^ 1].cap += 1;
            v = self.edges[e ^ 1].to;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::objects::test_support::check;
    use super::*;
    use crate::fixtures::strategies;

    /// Flow cost of a plan's chains (TFLite's objective), for comparing solvers.
    fn flow_cost(p: &Problem, plan: &SharedObjectsPlan) -> u64 {
        let b = p.buffers();
        let mut last: Vec<Option<usize>> = vec![None; plan.num_objects()];
        let mut order: Vec<usize> = (0..b.len()).collect();
        order.sort_by_key(|&i| b[i].lower);
        let mut cost = 0;
        for i in order {
            let o = plan.object_ids[i];
            cost += match last[o] {
                Some(j) => b[i].size.saturating_sub(b[j].size),
                None => b[i].size,
            };
            last[o] = Some(i);
        }
        cost
    }

    proptest::proptest! {
        #[test]
        fn random_plans_validate(p in strategies::problem(40)) {
            let plan = plan(&p);
            proptest::prop_assert!(check(&p, &plan).is_ok(), "{:?}", check(&p, &plan));
        }

        #[test]
        fn windows_validate_and_never_beat_the_dense_optimum(p in strategies::problem(40)) {
            let dense = plan_windows(&p, p.len().max(1), p.len());
            let sparse = plan_windows(&p, 5, 2);
            proptest::prop_assert!(check(&p, &sparse).is_ok(), "{:?}", check(&p, &sparse));
            proptest::prop_assert!(flow_cost(&p, &dense) <= flow_cost(&p, &sparse));
        }
    }
}
