//! Builds a [`Graph`] layer by layer with shape inference, the way an eager engine runs a
//! model: convolutions with im2col, batch norm and activations as separate ops, attention
//! with its permutes and softmax.

use super::graph::{Graph, Op, OpKind, TensorId};

/// Graph builder with a module-path prefix for op names.
pub struct Builder {
    graph: Graph,
    prefix: String,
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

impl Builder {
    /// An empty graph.
    pub fn new() -> Builder {
        Builder {
            graph: Graph::default(),
            prefix: String::new(),
        }
    }

    /// The finished graph with `outputs` escaping the pass.
    pub fn finish(mut self, outputs: &[TensorId]) -> Graph {
        self.graph.outputs = outputs.to_vec();
        self.graph
    }

    /// Sets the module path prefixed to later op names.
    pub fn scope(&mut self, prefix: impl Into<String>) {
        self.prefix = prefix.into();
    }

    /// A tensor that exists before the pass.
    pub fn input(&mut self, shape: &[usize]) -> TensorId {
        let t = self.tensor(shape);
        self.graph.inputs.push(t);
        t
    }

    /// Shape of `t`.
    pub fn shape(&self, t: TensorId) -> &[usize] {
        &self.graph.shapes[t]
    }

    fn tensor(&mut self, shape: &[usize]) -> TensorId {
        self.graph.shapes.push(shape.to_vec());
        self.graph.shapes.len() - 1
    }

    /// Adds an op producing a tensor of `shape`; returns it.
    pub fn op(
        &mut self,
        name: &str,
        kind: OpKind,
        inputs: &[TensorId],
        shape: &[usize],
        temps: Vec<usize>,
        index_vecs: usize,
    ) -> TensorId {
        let output = self.tensor(shape);
        let name = if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        };
        // Unique names: a repeated name gets a numeric suffix.
        let count = self
            .graph
            .ops
            .iter()
            .filter(|o| o.name.split('#').next() == Some(name.as_str()))
            .count();
        let name = if count == 0 {
            name
        } else {
            format!("{name}#{count}")
        };
        self.graph.ops.push(Op {
            name: leak(name),
            kind,
            inputs: inputs.to_vec(),
            output,
            temps,
            index_vecs,
        });
        output
    }

    // ---- convolutional layers (NCHW) ----

    /// Convolution `kh x kw`, `stride`, same padding, `groups` (depthwise when equal to
    /// the input channels). Non-pointwise, non-depthwise convolutions materialise im2col.
    pub fn conv(
        &mut self,
        name: &str,
        x: TensorId,
        out_c: usize,
        (kh, kw): (usize, usize),
        stride: usize,
        groups: usize,
    ) -> TensorId {
        let [n, c, h, w] = self.nchw(x);
        let (ho, wo) = (h.div_ceil(stride), w.div_ceil(stride));
        let pointwise = kh == 1 && kw == 1 && stride == 1;
        let depthwise = groups > 1 && groups == c;
        // im2col per image of the batch, as a per-sample convolution loop does.
        let temps = if pointwise || depthwise {
            vec![]
        } else {
            vec![(c / groups) * kh * kw * ho * wo; n]
        };
        self.op(name, OpKind::Conv, &[x], &[n, out_c, ho, wo], temps, 3)
    }

    /// Batch normalisation (inference): elementwise.
    pub fn bn(&mut self, name: &str, x: TensorId) -> TensorId {
        let s = self.shape(x).to_vec();
        self.op(name, OpKind::Unary, &[x], &s, vec![], 1)
    }

    /// An activation (ReLU, ReLU6, GELU, scaling): elementwise.
    pub fn act(&mut self, name: &str, x: TensorId) -> TensorId {
        let s = self.shape(x).to_vec();
        self.op(name, OpKind::Unary, &[x], &s, vec![], 0)
    }

    /// Conv, batch norm, activation (`act` false: no activation).
    #[allow(clippy::too_many_arguments)]
    pub fn conv_bn(
        &mut self,
        name: &str,
        x: TensorId,
        out_c: usize,
        k: (usize, usize),
        stride: usize,
        groups: usize,
        act: bool,
    ) -> TensorId {
        let y = self.conv(&format!("{name}.conv"), x, out_c, k, stride, groups);
        let y = self.bn(&format!("{name}.bn"), y);
        if act {
            self.act(&format!("{name}.relu"), y)
        } else {
            y
        }
    }

    /// Max (with an argmax index temporary) or average pooling, `k x k`, `stride`.
    pub fn pool(
        &mut self,
        name: &str,
        x: TensorId,
        k: usize,
        stride: usize,
        max: bool,
    ) -> TensorId {
        let [n, c, h, w] = self.nchw(x);
        let (ho, wo) = (h.div_ceil(stride), w.div_ceil(stride));
        let out = n * c * ho * wo;
        let temps = if max { vec![2 * out] } else { vec![] };
        let _ = k;
        self.op(name, OpKind::Pool, &[x], &[n, c, ho, wo], temps, 2)
    }

    /// Global average pooling to `[n, c]`.
    pub fn global_pool(&mut self, name: &str, x: TensorId) -> TensorId {
        let [n, c, _, _] = self.nchw(x);
        self.op(name, OpKind::Pool, &[x], &[n, c], vec![], 1)
    }

    /// Elementwise sum of two tensors of one shape.
    pub fn add(&mut self, name: &str, a: TensorId, b: TensorId) -> TensorId {
        let s = self.shape(a).to_vec();
        self.op(name, OpKind::Binary, &[a, b], &s, vec![], 1)
    }

    /// Concatenation along channels (NCHW) or the given axis.
    pub fn concat(&mut self, name: &str, xs: &[TensorId], axis: usize) -> TensorId {
        let mut s = self.shape(xs[0]).to_vec();
        s[axis] = xs.iter().map(|&t| self.shape(t)[axis]).sum();
        self.op(name, OpKind::Copy, xs, &s, vec![], 2)
    }

    // ---- dense and attention layers ----

    /// Dense layer over the last axis.
    pub fn linear(&mut self, name: &str, x: TensorId, out: usize) -> TensorId {
        let mut s = self.shape(x).to_vec();
        *s.last_mut().expect("rank >= 1") = out;
        self.op(name, OpKind::MatMul, &[x], &s, vec![], 2)
    }

    /// Layer normalisation over the last axis (mean and variance rows as temporaries).
    pub fn layer_norm(&mut self, name: &str, x: TensorId) -> TensorId {
        let s = self.shape(x).to_vec();
        let rows = s[..s.len() - 1].iter().product::<usize>();
        self.op(name, OpKind::Unary, &[x], &s, vec![rows, rows], 1)
    }

    /// Softmax over the last axis (row maxima and sums as temporaries).
    pub fn softmax(&mut self, name: &str, x: TensorId) -> TensorId {
        let s = self.shape(x).to_vec();
        let rows = s[..s.len() - 1].iter().product::<usize>();
        self.op(name, OpKind::Unary, &[x], &s, vec![rows, rows], 1)
    }

    /// A contiguous copy with permuted/reshaped axes to `shape`.
    pub fn permute(&mut self, name: &str, x: TensorId, shape: &[usize]) -> TensorId {
        debug_assert_eq!(
            shape.iter().product::<usize>(),
            self.shape(x).iter().product::<usize>()
        );
        self.op(name, OpKind::Copy, &[x], shape, vec![], 2)
    }

    /// Batched matrix product `[.., m, k] x [.., k, n]` (or with `b` transposed when
    /// `transpose_b`): one small offsets vector per matrix of the batch.
    pub fn bmm(&mut self, name: &str, a: TensorId, b: TensorId, transpose_b: bool) -> TensorId {
        let sa = self.shape(a).to_vec();
        let sb = self.shape(b).to_vec();
        let r = sa.len();
        let n = if transpose_b { sb[r - 2] } else { sb[r - 1] };
        let mut s = sa.clone();
        s[r - 1] = n;
        let batch: usize = sa[..r - 2].iter().product();
        self.op(name, OpKind::MatMul, &[a, b], &s, vec![], batch)
    }

    /// An op of one input producing a fresh tensor of `shape` (gather, narrow).
    pub fn gather(&mut self, name: &str, x: TensorId, shape: &[usize]) -> TensorId {
        self.op(name, OpKind::Copy, &[x], shape, vec![], 1)
    }

    fn nchw(&self, x: TensorId) -> [usize; 4] {
        let s = self.shape(x);
        [s[0], s[1], s[2], s[3]]
    }
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}
