//! A workload built from its spec, once per cell and shared by the cell's threads.

use crate::engine::trace::TraceProgram;
use crate::engine::Divergence;
use crate::workloads::graph::{Graph, OpKind};
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

    /// Allocations and bytes of one pass, as modelled; `(0, 0)` for the real engine, whose
    /// allocations are measured instead (memo cells count them, see
    /// [`crate::pass_count`]).
    pub fn allocation_profile(&self) -> (u64, u64) {
        match self {
            Workload::Graph { graph, .. } => graph.allocation_profile(),
            Workload::Trace(t) => (t.buffers as u64, t.bytes),
            #[cfg(feature = "engine")]
            Workload::Candle(_) => (0, 0),
        }
    }

    /// Ops of one pass and the model's peak of live bytes; `(0, 0)` where the workload
    /// has no graph.
    pub fn ops_and_peak(&self) -> (usize, u64) {
        match self {
            Workload::Graph { graph, .. } => (graph.ops.len(), graph.peak_bytes()),
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
