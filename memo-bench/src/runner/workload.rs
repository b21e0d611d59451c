//! A workload built from its spec, once per cell and shared by the cell's threads.

use crate::engine::trace::TraceProgram;
use crate::engine::Divergence;
use crate::workloads::decode::{DecodeForm, DecodeSpec};
use crate::workloads::graph::{Graph, OpKind};
use crate::workloads::lengths::LENGTHS;
use crate::workloads::{Spec, Variant};

/// A built workload.
pub enum Workload {
    /// A built-in architecture's graph.
    Graph {
        /// The pass.
        graph: Graph,
        /// Every fourth pass diverges.
        divergent: bool,
        /// Kernels build their temporaries on helper threads.
        helpers: bool,
    },
    /// LLM decoding: the prefill's graph and each step's.
    Decode {
        /// The spec.
        spec: DecodeSpec,
        /// The prompt's prefill.
        prefill: Graph,
        /// Step `i` over `prompt + i` cached tokens.
        steps: Vec<Graph>,
    },
    /// The encoder's graph at each sequence length a pass may draw.
    Lengths(Vec<Graph>),
    /// A recorded trace.
    Trace(TraceProgram),
    /// A model of the candle engine.
    #[cfg(feature = "engine")]
    Candle(crate::candle::Engine),
}

impl Workload {
    /// Builds the workload of `spec`: the graph, the trace read from its file, or the
    /// candle model (an error in a build without the `engine` feature).
    pub fn build(spec: &Spec) -> Result<Workload, String> {
        match spec {
            Spec::Net {
                net,
                batch,
                size,
                variant,
            } => Ok(Workload::Graph {
                graph: net.graph(*batch, *size),
                divergent: *variant == Variant::Divergent,
                helpers: *variant == Variant::Helpers,
            }),
            Spec::Decode(d) => {
                let (prefill, steps) = d.graphs();
                Ok(Workload::Decode {
                    spec: *d,
                    prefill,
                    steps,
                })
            }
            Spec::Lengths(l) => Ok(Workload::Lengths(l.graphs())),
            Spec::Trace(p) => {
                let trace = memo_alloc::files::read_trace(p)?;
                Ok(Workload::Trace(TraceProgram::new(&trace)?))
            }
            #[cfg(feature = "engine")]
            Spec::Candle(c) => Ok(Workload::Candle(crate::candle::Engine::load(*c)?)),
            #[cfg(not(feature = "engine"))]
            Spec::Candle(c) => Err(crate::workloads::spec::needs_engine(c)),
        }
    }

    /// Allocations and bytes of one pass, as modelled (decoding a step per pass: the mean
    /// over a request's positions; lengths: the mean over the lengths); `(0, 0)` for the real engine, whose allocations are
    /// measured instead (memo cells count them, see [`crate::pass_count`]).
    pub fn allocation_profile(&self) -> (u64, u64) {
        match self {
            Workload::Graph { graph, .. } => graph.allocation_profile(),
            Workload::Decode {
                spec,
                prefill,
                steps,
            } => {
                let (mut n, mut b) = prefill.allocation_profile();
                for g in steps {
                    let (gn, gb) = g.allocation_profile();
                    (n, b) = (n + gn, b + gb);
                }
                match spec.form {
                    DecodeForm::Request => (n, b),
                    DecodeForm::Step => {
                        let passes = steps.len() as u64 + 1;
                        (n / passes, b / passes)
                    }
                }
            }
            Workload::Lengths(graphs) => {
                let (n, b) = graphs
                    .iter()
                    .map(Graph::allocation_profile)
                    .fold((0, 0), |a, g| (a.0 + g.0, a.1 + g.1));
                let k = LENGTHS.len() as u64;
                (n / k, b / k)
            }
            Workload::Trace(t) => (t.buffers as u64, t.bytes),
            #[cfg(feature = "engine")]
            Workload::Candle(_) => (0, 0),
        }
    }

    /// Ops of one pass and the model's peak of live bytes; `(0, 0)` where the workload
    /// has no graph (decoding: the ops of a whole request and the last step's peak;
    /// lengths: the ops of a pass and the longest length's peak).
    pub fn ops_and_peak(&self) -> (usize, u64) {
        match self {
            Workload::Graph { graph, .. } => (graph.ops.len(), graph.peak_bytes()),
            Workload::Decode { prefill, steps, .. } => {
                let ops = prefill.ops.len() + steps.iter().map(|g| g.ops.len()).sum::<usize>();
                let peak = steps.last().unwrap_or(prefill).peak_bytes();
                (ops, peak)
            }
            Workload::Lengths(graphs) => {
                let ops = graphs.first().map_or(0, |g| g.ops.len());
                (ops, graphs.iter().map(Graph::peak_bytes).max().unwrap_or(0))
            }
            _ => (0, 0),
        }
    }

    /// The divergence of pass number `pass` (none unless the workload is divergent).
    pub fn divergence(&self, pass: u64) -> Divergence {
        let Workload::Graph {
            graph,
            divergent: true,
            ..
        } = self
        else {
            return Divergence::default();
        };
        if pass % 4 != 3 {
            return Divergence::default();
        }
        let unary: Vec<usize> = (0..graph.ops.len())
            .filter(|&i| graph.ops[i].kind == OpKind::Unary && graph.ops[i].inputs.len() == 1)
            .collect();
        let k = (pass / 4) as usize;
        Divergence {
            skip: (!unary.is_empty()).then(|| unary[(k * 7919) % unary.len()]),
            grow: Some((k * 104_729 + 13) % graph.ops.len()),
        }
    }
}
