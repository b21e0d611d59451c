//! Running a workload: [`Workload`] is a spec built once per cell, [`Runner`] is one
//! thread's state over it and runs its passes, each inside the bracket its allocator
//! needs (a `memo_alloc::pass` in memo cells, an arena pass in `static` cells).
//!
//! This folder sits above the workload descriptions (`crate::workloads`), the interpreter
//! (`crate::engine`) and the real engine (`crate::candle`), and joins them.

mod workload;

pub use workload::Workload;

use crate::engine::decode::DecodeRunner;
use crate::engine::trace::TraceProgram;
use crate::engine::{checksum, Compute, Divergence, GraphRunner};
use crate::pass_count;
use crate::workloads::lengths::length_index;

/// Per-thread runner of a workload.
pub enum Runner<'w> {
    /// Graph interpreter with this thread's inputs.
    Graph(GraphRunner<'w>, &'w Workload),
    /// Decoding requests, with this thread's KV cache.
    Decode(DecodeRunner<'w>),
    /// The encoder at each length, with this thread's inputs of each.
    Lengths(Vec<GraphRunner<'w>>),
    /// Trace program.
    Trace(&'w TraceProgram),
    /// The real engine with this thread's input.
    #[cfg(feature = "engine")]
    Candle(&'w crate::candle::Engine, crate::candle::models::Input),
}

impl<'w> Runner<'w> {
    /// Prepares a thread (allocates its inputs, outside any pass).
    pub fn new(w: &'w Workload, compute: Compute) -> Runner<'w> {
        match w {
            Workload::Graph { graph, helpers, .. } => {
                Runner::Graph(GraphRunner::new(graph, compute).with_helpers(*helpers), w)
            }
            Workload::Decode {
                spec,
                prefill,
                steps,
            } => Runner::Decode(DecodeRunner::new(spec.form, prefill, steps, compute)),
            Workload::Lengths(graphs) => Runner::Lengths(
                graphs
                    .iter()
                    .map(|g| GraphRunner::new(g, compute))
                    .collect(),
            ),
            Workload::Trace(t) => Runner::Trace(t),
            #[cfg(feature = "engine")]
            Workload::Candle(e) => Runner::Candle(e, e.input()),
        }
    }

    /// Runs pass number `pass`, inside `memo_alloc::pass(key)` when `key` is given (memo
    /// cells), with op scopes when `scopes`. The outputs escape the pass; the checksum is
    /// taken and they are dropped after it ends. A thread's passes are numbered from 0
    /// (decoding starts each request at a multiple of its positions).
    pub fn run(&self, pass: u64, key: Option<&'static str>, scopes: bool) -> u64 {
        self.run_started(pass, key, scopes, || {})
    }

    /// As [`Runner::run`], calling `started` inside the pass before its first allocation
    /// (memo-alloc has then taken the pass's slab instance).
    pub fn run_started(
        &self,
        pass: u64,
        key: Option<&'static str>,
        scopes: bool,
        started: impl FnOnce(),
    ) -> u64 {
        match self {
            Runner::Graph(r, w) => {
                let div = w.divergence(pass);
                let (out, digest) = in_pass(key, started, || r.run_digest(scopes, div));
                checksum(&out) ^ digest
            }
            Runner::Decode(d) => {
                let (out, digest) = in_pass(key, started, || d.run(pass, scopes));
                checksum(&out) ^ digest
            }
            Runner::Lengths(rs) => {
                let r = &rs[length_index(pass)];
                let div = Divergence::default();
                let (out, digest) = in_pass(key, started, || r.run_digest(scopes, div));
                checksum(&out) ^ digest
            }
            #[cfg(feature = "engine")]
            Runner::Candle(e, input) => {
                let out = in_pass(key, started, || e.forward(input, pass));
                crate::candle::digest(&out)
            }
            Runner::Trace(t) => {
                let (out, sum) = in_pass(key, started, || t.run(scopes));
                let mut c = sum;
                for b in &out {
                    c = c.wrapping_mul(31).wrapping_add(b.read());
                }
                c
            }
        }
    }
}

/// Runs `f` inside `memo_alloc::pass(key)` when `key` is given (memo cells), counted by
/// [`pass_count`] from just after the pass starts to just before it ends; in a `static`
/// cell, inside an arena pass ([`crate::arena`]). `started` runs first inside the pass.
fn in_pass<R>(key: Option<&'static str>, started: impl FnOnce(), f: impl FnOnce() -> R) -> R {
    let _arena =
        (crate::alloc::selected() == crate::alloc::Allocator::Static).then(crate::arena::pass);
    let _pass = key.map(memo_alloc::pass);
    started();
    let _mark = key.map(|_| pass_count::enter());
    f()
}

#[cfg(test)]
mod tests;
