//! The op-list model of one pass: tensors with shapes, ops that read tensors and produce
//! one output tensor plus kernel temporaries, as a Rust inference engine executes them.

/// Index of a tensor in [`Graph::tensors`].
pub type TensorId = usize;

/// What an op does; decides which ops a divergent pass may skip.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Convolution or matrix product (may have an im2col/workspace temporary).
    Conv,
    /// Matrix product (dense layer or attention).
    MatMul,
    /// An elementwise op of one input (activation, normalisation, scaling): skippable.
    Unary,
    /// Elementwise op of two inputs (residual add).
    Binary,
    /// Pooling or reduction.
    Pool,
    /// Concatenation, gather, narrow, permute (data movement).
    Copy,
}

/// One op of the pass.
#[derive(Clone, Debug)]
pub struct Op {
    /// Unique op-scope name (module path, like `layer3.2.conv1`).
    pub name: &'static str,
    /// Kind.
    pub kind: OpKind,
    /// Tensors read.
    pub inputs: Vec<TensorId>,
    /// The tensor produced.
    pub output: TensorId,
    /// Element counts (f32) of the kernel's temporaries: im2col, workspace, argmax indices,
    /// per-row statistics.
    pub temps: Vec<usize>,
    /// Small `Vec<usize>` the kernel builds (kernel dims, permutations, per-matrix offsets).
    pub index_vecs: usize,
}

/// The tensors and ops of one pass.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Shape of every tensor.
    pub shapes: Vec<Vec<usize>>,
    /// Tensors that exist before the pass (model input, KV cache): allocated outside it.
    pub inputs: Vec<TensorId>,
    /// Ops in execution order; each tensor that is not an input is produced by one op.
    pub ops: Vec<Op>,
    /// Tensors that escape the pass (its results).
    pub outputs: Vec<TensorId>,
}

impl Graph {
    /// Elements of tensor `t`.
    pub fn elems(&self, t: TensorId) -> usize {
        self.shapes[t].iter().product()
    }

    /// For every op, the tensors whose last use it is (freed right after it); never inputs
    /// or outputs. A tensor nothing reads is freed right after the op producing it.
    pub fn frees_after(&self) -> Vec<Vec<TensorId>> {
        let mut last = vec![usize::MAX; self.shapes.len()];
        for (i, op) in self.ops.iter().enumerate() {
            last[op.output] = i;
            for &t in &op.inputs {
                last[t] = i;
            }
        }
        let mut keep = vec![false; self.shapes.len()];
        for &t in self.inputs.iter().chain(&self.outputs) {
            keep[t] = true;
        }
        let mut frees = vec![Vec::new(); self.ops.len()];
        for (t, &l) in last.iter().enumerate() {
            if !keep[t] && l != usize::MAX {
                frees[l].push(t);
            }
        }
        frees
    }

    /// Allocations and bytes one pass makes (no divergence), counted from the model the
    /// interpreter follows: per op its output's data, shape and strides, the `Rc` holding
    /// it, the input list, the requested shape, its temporaries and index vectors; per
    /// pass the live-tensor table and the output list.
    pub fn allocation_profile(&self) -> (u64, u64) {
        let mut count = 2u64;
        let mut bytes = (self.shapes.len() * 8 + self.outputs.len() * 8) as u64;
        for op in &self.ops {
            let rank = self.shapes[op.output].len() as u64;
            count += 7 + op.temps.len() as u64 + op.index_vecs as u64;
            bytes += 4 * self.elems(op.output) as u64 + 24 * rank + 80;
            bytes += 24 * op.inputs.len() as u64;
            bytes += op.temps.iter().map(|&n| 4 * n as u64).sum::<u64>();
            bytes += op.index_vecs as u64 * 8 * rank;
        }
        (count, bytes)
    }

    /// Peak bytes of live tensor data during one pass (outputs kept, temporaries included).
    pub fn peak_bytes(&self) -> u64 {
        let frees = self.frees_after();
        let mut live: u64 = self.inputs.iter().map(|&t| 4 * self.elems(t) as u64).sum();
        let mut peak = live;
        for (op, f) in self.ops.iter().zip(&frees) {
            live += 4 * self.elems(op.output) as u64;
            let temps: u64 = op.temps.iter().map(|&n| 4 * n as u64).sum();
            peak = peak.max(live + temps);
            live -= f.iter().map(|&t| 4 * self.elems(t) as u64).sum::<u64>();
        }
        peak
    }
}
