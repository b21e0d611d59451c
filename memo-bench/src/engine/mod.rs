//! The interpreter: runs one pass of a [`Graph`] through the global allocator, the way an
//! eager Rust engine does (a fresh `Vec` per output, shape and stride vectors per tensor,
//! kernel temporaries, `Rc` shared tensors), touching every byte it allocates.

pub mod buf;
pub mod decode;
pub mod trace;

use std::hint::black_box;
use std::rc::Rc;

use buf::Buf;

use crate::workloads::graph::{Graph, Op, OpKind};

/// How much work a kernel does per byte.
///
/// `scale` < 1: a kernel visits one element in `round(1 / scale)` (at most one per 64-byte
/// line, so every line and page is still touched): allocation-bound. `scale` = 1: every
/// element once, a memory-bound kernel. `scale` > 1: `round(scale)` dependent
/// multiply-adds per element: compute-bound as it grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Compute {
    /// Elements between visited elements (1..=16).
    pub step: usize,
    /// Dependent multiply-adds per visited element.
    pub reps: u32,
}

impl Compute {
    /// From the command line's compute scale.
    pub fn from_scale(scale: f64) -> Compute {
        if scale >= 1.0 {
            Compute {
                step: 1,
                reps: scale.round() as u32,
            }
        } else {
            let step = if scale <= 0.0 {
                16
            } else {
                ((1.0 / scale).round() as usize).clamp(1, 16)
            };
            Compute { step, reps: 0 }
        }
    }
}

/// A tensor as an engine keeps it: data, shape and strides, each its own allocation.
pub struct Tensor {
    /// The data.
    pub data: Buf,
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Row-major strides.
    pub strides: Vec<usize>,
}

impl Tensor {
    fn new(data: Buf, shape: &[usize]) -> Tensor {
        let shape = shape.to_vec();
        let mut strides = vec![1; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        Tensor {
            data,
            shape,
            strides,
        }
    }
}

/// What a pass does differently from the profiled one (a divergent pass).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Divergence {
    /// Op whose kernel is skipped (its output is its first input).
    pub skip: Option<usize>,
    /// Op whose output is larger (by 1/8 plus one element).
    pub grow: Option<usize>,
}

/// Per-thread state of a graph workload: its inputs, made once outside passes.
pub struct GraphRunner<'g> {
    graph: &'g Graph,
    frees: Vec<Vec<usize>>,
    inputs: Vec<Rc<Tensor>>,
    compute: Compute,
    /// Kernels build their temporaries on helper threads (see [`Temps`]).
    helpers: bool,
}

impl<'g> GraphRunner<'g> {
    /// Prepares `graph` (allocating its inputs, deterministic values in [0, 1)).
    pub fn new(graph: &'g Graph, compute: Compute) -> GraphRunner<'g> {
        let inputs = (0..graph.inputs.len())
            .map(|i| input_tensor(graph, i, compute))
            .collect();
        GraphRunner {
            inputs,
            ..GraphRunner::without_inputs(graph, compute)
        }
    }

    /// Prepares `graph` without making its inputs: its passes take them from the caller
    /// ([`GraphRunner::run_with`]).
    pub fn without_inputs(graph: &'g Graph, compute: Compute) -> GraphRunner<'g> {
        GraphRunner {
            graph,
            frees: graph.frees_after(),
            inputs: Vec::new(),
            compute,
            helpers: false,
        }
    }

    /// The same runner, building kernel temporaries on helper threads when `helpers`.
    pub fn with_helpers(mut self, helpers: bool) -> GraphRunner<'g> {
        self.helpers = helpers;
        self
    }

    /// Runs one pass: every op in order (inside `memo_alloc::op(name)` when `scopes`),
    /// freeing each tensor after its last use. Returns the escaping outputs and a digest
    /// of every op's output and of what each kernel read (so the checksum covers the whole
    /// pass, not only its outputs).
    pub fn run_digest(&self, scopes: bool, div: Divergence) -> (Vec<Rc<Tensor>>, u64) {
        let (out, _, digest) = self.run_full(&self.inputs, scopes, div);
        (out, digest)
    }

    /// [`GraphRunner::run_digest`] over the given inputs (one per graph input, in order,
    /// of the graph's shapes).
    pub fn run_with(&self, inputs: &[Rc<Tensor>], scopes: bool) -> (Vec<Rc<Tensor>>, u64) {
        let (out, _, digest) = self.run_full(inputs, scopes, Divergence::default());
        (out, digest)
    }

    /// [`GraphRunner::run_digest`], also returning how many tensors other than inputs and
    /// outputs were still live when the last op finished (0 unless a free is missing).
    #[cfg(test)]
    pub fn run_counted(&self, scopes: bool, div: Divergence) -> (Vec<Rc<Tensor>>, usize) {
        let (out, left, _) = self.run_full(&self.inputs, scopes, div);
        (out, left)
    }

    fn run_full(
        &self,
        inputs: &[Rc<Tensor>],
        scopes: bool,
        div: Divergence,
    ) -> (Vec<Rc<Tensor>>, usize, u64) {
        let g = self.graph;
        debug_assert_eq!(inputs.len(), g.inputs.len());
        // Inside a memo pass, helper tasks join it through this handle.
        let temps = if self.helpers {
            Temps::Helpers(memo_alloc::current())
        } else {
            Temps::Here
        };
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        let mut live: Vec<Option<Rc<Tensor>>> = vec![None; g.shapes.len()];
        for (&t, x) in g.inputs.iter().zip(inputs) {
            live[t] = Some(Rc::clone(x));
        }
        for (i, op) in g.ops.iter().enumerate() {
            let _scope = scopes.then(|| memo_alloc::op(op.name));
            let out = if div.skip == Some(i) {
                Rc::clone(live[op.inputs[0]].as_ref().expect("input is live"))
            } else {
                let ins: Vec<&Tensor> = op
                    .inputs
                    .iter()
                    .map(|&t| &**live[t].as_ref().expect("input is live"))
                    .collect();
                let mut shape = g.shapes[op.output].clone();
                if div.grow == Some(i) {
                    let last = shape.len() - 1;
                    shape[last] += shape[last] / 8 + 1;
                }
                let (t, d) = kernel(op, &ins, &shape, self.compute, &temps);
                digest = (digest ^ d).wrapping_mul(0x100_0000_01b3);
                Rc::new(t)
            };
            live[op.output] = Some(out);
            for &t in &self.frees[i] {
                live[t] = None;
            }
        }
        let outputs: Vec<Rc<Tensor>> = g
            .outputs
            .iter()
            .map(|&t| live[t].take().expect("output is live"))
            .collect();
        for &t in &g.inputs {
            live[t] = None;
        }
        let leftover = live.iter().filter(|t| t.is_some()).count();
        (outputs, leftover, digest)
    }
}

/// Input number `i` of `graph`, with deterministic values in [0, 1) (allocated where the
/// caller runs: outside passes for inputs made in advance).
pub fn input_tensor(graph: &Graph, i: usize, compute: Compute) -> Rc<Tensor> {
    let t = graph.inputs[i];
    let n = graph.elems(t);
    let data = Buf::from_fn(n, compute.step, |i| ((i * 37 + t) % 101) as f32 / 101.0);
    Rc::new(Tensor::new(data, &graph.shapes[t]))
}

/// A checksum of a pass's outputs.
pub fn checksum(outputs: &[Rc<Tensor>]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for t in outputs {
        h = (h ^ t.data.len() as u64).wrapping_mul(0x100_0000_01b3);
        for (&d, &st) in t.shape.iter().zip(&t.strides) {
            h = (h ^ (d as u64) << 32 ^ st as u64).wrapping_mul(0x100_0000_01b3);
        }
        t.data.hash_into(&mut h);
    }
    h
}

/// Mean of a buffer's visited elements (reads all of it).
fn mean(b: &Buf, step: usize) -> f32 {
    if b.is_empty() {
        0.0
    } else {
        b.sum() / b.len().div_ceil(step) as f32
    }
}

/// Walks a buffer's initialised elements cyclically (no division per element): the
/// elements `0, step, 2 step, ...`, wrapping to 0 past the end.
struct Cursor<'a> {
    buf: &'a Buf,
    j: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a Buf) -> Cursor<'a> {
        Cursor { buf, j: 0 }
    }
    #[inline]
    fn next(&mut self) -> f32 {
        if self.buf.is_empty() {
            return 0.0;
        }
        let v = self.buf.at(self.j);
        self.j += self.buf.step();
        if self.j >= self.buf.len() {
            self.j = 0;
        }
        v
    }
}

/// Where a kernel builds its temporaries.
pub enum Temps {
    /// On the calling thread.
    Here,
    /// On rayon's global pool, [`HELPER_TASKS`] tasks per temporary (`rayon::join`; each
    /// builds its share as its own buffer); inside a memo pass each task enters it as
    /// helper context `temporary * HELPER_TASKS + task` (an index, never a thread id).
    Helpers(Option<memo_alloc::PassHandle>),
}

/// Helper tasks per kernel temporary (the two sides of a `rayon::join`).
pub const HELPER_TASKS: usize = 2;

/// The mean of a temporary of `len` elements filled from `src` (an im2col-like gather).
fn temp_mean(src: &Buf, len: usize, step: usize) -> f32 {
    let t = if step == 1 {
        let src = src.as_dense().expect("dense");
        Buf::dense(len, |start, out| gather(src, start, out, 0.5, 0.25))
    } else {
        let mut cur = Cursor::new(src);
        Buf::from_fn(len, step, |_| 0.5 * cur.next() + 0.25)
    };
    mean(&t, step)
}

/// The mean over `temps` of each temporary's mean, built where `at` says. Helper tasks'
/// results are combined in a fixed order: the result does not depend on scheduling.
fn temps_mean(temps: &[usize], src: &Buf, step: usize, at: &Temps) -> f32 {
    let n = temps.len().max(1) as f32;
    let Temps::Helpers(handle) = at else {
        return temps.iter().map(|&len| temp_mean(src, len, step) / n).sum();
    };
    let task = |id: usize, part: usize| {
        let build = || temp_mean(src, part, step) * part as f32;
        match handle {
            Some(h) => h.in_scope(id, build),
            None => build(),
        }
    };
    let mut total = 0.0f32;
    for (i, &len) in temps.iter().enumerate() {
        // rayon::join's jobs live on the stack: the fork-join itself allocates nothing.
        let half = len / 2;
        let (a, b) = rayon::join(
            || task(i * HELPER_TASKS, len - half),
            || task(i * HELPER_TASKS + 1, half),
        );
        total += (a + b) / len.max(1) as f32 / n;
    }
    total
}

/// One op's kernel: builds its index vectors and temporaries, reads its inputs, writes its
/// output. Values stay in [0, 1]. Also returns a digest of what it read and wrote.
fn kernel(op: &Op, ins: &[&Tensor], shape: &[usize], c: Compute, at: &Temps) -> (Tensor, u64) {
    let n: usize = shape.iter().product();
    let step = c.step;
    // Index vectors (kernel dims, permutation, per-matrix offsets).
    let mut idx = 0usize;
    for k in 0..op.index_vecs {
        let v: Vec<usize> = shape.iter().map(|&d| d * (k + 1)).collect();
        idx = idx.wrapping_add(black_box(&v).iter().sum::<usize>());
    }
    let bias = (idx % 7) as f32 / 700.0;
    // Inputs larger than the output are reduced (read whole); the others are streamed.
    let mut reduced = 0.0f32;
    for t in ins {
        if t.data.len() > n {
            reduced += mean(&t.data, step);
        }
    }
    let reduced = reduced / ins.len().max(1) as f32;
    // Temporaries: filled from the first input (im2col-like gather), then read whole.
    let temp_mean = temps_mean(&op.temps, &ins[0].data, step, at);
    let w = 0.5 / ins.len().max(1) as f32;
    let base = 0.25 * (reduced + temp_mean) + bias;
    let reps = c.reps;
    let relu = op.kind == OpKind::Unary;
    let data = if step == 1 {
        let srcs: Vec<&[f32]> = ins
            .iter()
            .map(|t| t.data.as_dense().expect("dense"))
            .collect();
        Buf::dense(n, |start, out| {
            out.fill(base);
            let mut tmp = [0.0f32; buf::CHUNK];
            for src in &srcs {
                let tmp = &mut tmp[..out.len()];
                gather(src, start, tmp, w, 0.0);
                for (o, t) in out.iter_mut().zip(tmp.iter()) {
                    *o += *t;
                }
            }
            if relu {
                for o in out.iter_mut() {
                    *o = o.max(0.0);
                }
            }
            for _ in 0..reps {
                for o in out.iter_mut() {
                    *o = *o * 0.999 + 0.0005;
                }
            }
        })
    } else {
        let mut cursors: Vec<Cursor> = ins.iter().map(|t| Cursor::new(&t.data)).collect();
        Buf::from_fn(n, step, |_| {
            let mut v = base;
            for cur in cursors.iter_mut() {
                v += w * cur.next();
            }
            if relu {
                v = v.max(0.0);
            }
            v
        })
    };
    let last = n.saturating_sub(1) / step * step;
    let digest = (base.to_bits() as u64) << 32
        ^ if n > 0 {
            (data.at(0).to_bits() as u64) ^ (data.at(last).to_bits() as u64) << 16
        } else {
            0
        };
    (Tensor::new(data, shape), digest)
}

/// `out[k] = a * src[(start + k) mod len] + b`, in contiguous runs.
fn gather(src: &[f32], start: usize, out: &mut [f32], a: f32, b: f32) {
    if src.is_empty() {
        out.fill(b);
        return;
    }
    let mut j = start % src.len();
    let mut k = 0;
    while k < out.len() {
        let run = (src.len() - j).min(out.len() - k);
        for (o, s) in out[k..k + run].iter_mut().zip(&src[j..j + run]) {
            *o = a * *s + b;
        }
        k += run;
        j = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_scales() {
        assert_eq!(Compute::from_scale(0.0), Compute { step: 16, reps: 0 });
        assert_eq!(Compute::from_scale(0.25), Compute { step: 4, reps: 0 });
        assert_eq!(Compute::from_scale(1.0), Compute { step: 1, reps: 1 });
        assert_eq!(Compute::from_scale(8.0), Compute { step: 1, reps: 8 });
    }
}
