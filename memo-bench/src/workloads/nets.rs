//! The architectures, as tables of layers interpreted by one builder function each family:
//! MobileNet v1 and v2, ResNet-50, Inception v3 (ImageNet classifiers, NCHW input
//! `[batch, 3, size, size]`), a BERT-base encoder (`size` = sequence length), one
//! GPT-2-small decoding step (`size` = tokens already in the KV cache) and GPT-2-small's
//! prefill of a prompt (the first pass of a decoding request, see [`super::decode`]).

use super::builder::Builder;
use super::graph::{Graph, TensorId};

/// MobileNet v1 depthwise-separable blocks: (output channels, stride).
const MOBILENET_V1: &[(usize, usize)] = &[
    (64, 1),
    (128, 2),
    (128, 1),
    (256, 2),
    (256, 1),
    (512, 2),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (512, 1),
    (1024, 2),
    (1024, 1),
];

/// MobileNet v2 inverted residual stages: (expansion t, channels c, repeats n, stride s).
const MOBILENET_V2: &[(usize, usize, usize, usize)] = &[
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// ResNet-50 bottleneck stages: (width, blocks, stride of the first block).
const RESNET50: &[(usize, usize, usize)] = &[(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)];

/// One layer of an Inception branch.
#[derive(Clone, Copy)]
enum L {
    /// BasicConv2d (conv, bn, relu): channels, kernel (h, w), stride.
    C(usize, usize, usize, usize),
    /// Average pool 3x3 stride 1.
    Avg,
    /// Max pool 3x3 stride 2.
    Max,
}

/// Inception v3 blocks after the stem: each a list of branches concatenated. Branch stems
/// shared by two heads in InceptionE are duplicated (same output shapes, a few more ops).
const INCEPTION_A: fn(usize) -> Vec<Vec<L>> = |pf| {
    vec![
        vec![L::C(64, 1, 1, 1)],
        vec![L::C(48, 1, 1, 1), L::C(64, 5, 5, 1)],
        vec![L::C(64, 1, 1, 1), L::C(96, 3, 3, 1), L::C(96, 3, 3, 1)],
        vec![L::Avg, L::C(pf, 1, 1, 1)],
    ]
};
const INCEPTION_B: fn(usize) -> Vec<Vec<L>> = |_| {
    vec![
        vec![L::C(384, 3, 3, 2)],
        vec![L::C(64, 1, 1, 1), L::C(96, 3, 3, 1), L::C(96, 3, 3, 2)],
        vec![L::Max],
    ]
};
const INCEPTION_C: fn(usize) -> Vec<Vec<L>> = |c7| {
    vec![
        vec![L::C(192, 1, 1, 1)],
        vec![L::C(c7, 1, 1, 1), L::C(c7, 1, 7, 1), L::C(192, 7, 1, 1)],
        vec![
            L::C(c7, 1, 1, 1),
            L::C(c7, 7, 1, 1),
            L::C(c7, 1, 7, 1),
            L::C(c7, 7, 1, 1),
            L::C(192, 1, 7, 1),
        ],
        vec![L::Avg, L::C(192, 1, 1, 1)],
    ]
};
const INCEPTION_D: fn(usize) -> Vec<Vec<L>> = |_| {
    vec![
        vec![L::C(192, 1, 1, 1), L::C(320, 3, 3, 2)],
        vec![
            L::C(192, 1, 1, 1),
            L::C(192, 1, 7, 1),
            L::C(192, 7, 1, 1),
            L::C(192, 3, 3, 2),
        ],
        vec![L::Max],
    ]
};
const INCEPTION_E: fn(usize) -> Vec<Vec<L>> = |_| {
    vec![
        vec![L::C(320, 1, 1, 1)],
        vec![L::C(384, 1, 1, 1), L::C(384, 1, 3, 1)],
        vec![L::C(384, 1, 1, 1), L::C(384, 3, 1, 1)],
        vec![L::C(448, 1, 1, 1), L::C(384, 3, 3, 1), L::C(384, 1, 3, 1)],
        vec![L::C(448, 1, 1, 1), L::C(384, 3, 3, 1), L::C(384, 3, 1, 1)],
        vec![L::Avg, L::C(192, 1, 1, 1)],
    ]
};

/// Inception v3 after the stem: (block, parameter).
#[allow(clippy::type_complexity)]
const INCEPTION_V3: &[(&str, fn(usize) -> Vec<Vec<L>>, usize)] = &[
    ("Mixed_5b", INCEPTION_A, 32),
    ("Mixed_5c", INCEPTION_A, 64),
    ("Mixed_5d", INCEPTION_A, 64),
    ("Mixed_6a", INCEPTION_B, 0),
    ("Mixed_6b", INCEPTION_C, 128),
    ("Mixed_6c", INCEPTION_C, 160),
    ("Mixed_6d", INCEPTION_C, 160),
    ("Mixed_6e", INCEPTION_C, 192),
    ("Mixed_7a", INCEPTION_D, 0),
    ("Mixed_7b", INCEPTION_E, 0),
    ("Mixed_7c", INCEPTION_E, 0),
];

/// Inception v3 stem.
const INCEPTION_STEM: &[L] = &[
    L::C(32, 3, 3, 2),
    L::C(32, 3, 3, 1),
    L::C(64, 3, 3, 1),
    L::Max,
    L::C(80, 1, 1, 1),
    L::C(192, 3, 3, 1),
    L::Max,
];

/// Transformer dimensions: (layers, hidden, heads, feed-forward).
const BERT_BASE: (usize, usize, usize, usize) = (12, 768, 12, 3072);
const GPT2_SMALL: (usize, usize, usize, usize) = (12, 768, 12, 3072);
const GPT2_VOCAB: usize = 50257;
const CLASSES: usize = 1000;

fn classifier(b: &mut Builder, x: TensorId) -> TensorId {
    b.scope("head");
    let p = b.global_pool("avgpool", x);
    b.linear("fc", p, CLASSES)
}

/// MobileNet v1 at `[batch, 3, size, size]`.
pub fn mobilenet_v1(batch: usize, size: usize) -> Graph {
    let mut b = Builder::new();
    let mut x = b.input(&[batch, 3, size, size]);
    b.scope("stem");
    x = b.conv_bn("conv", x, 32, (3, 3), 2, 1, true);
    for (i, &(c, s)) in MOBILENET_V1.iter().enumerate() {
        b.scope(format!("block{i}"));
        let cin = b.shape(x)[1];
        x = b.conv_bn("dw", x, cin, (3, 3), s, cin, true);
        x = b.conv_bn("pw", x, c, (1, 1), 1, 1, true);
    }
    let y = classifier(&mut b, x);
    b.finish(&[y])
}

/// MobileNet v2 at `[batch, 3, size, size]`.
pub fn mobilenet_v2(batch: usize, size: usize) -> Graph {
    let mut b = Builder::new();
    let mut x = b.input(&[batch, 3, size, size]);
    b.scope("stem");
    x = b.conv_bn("conv", x, 32, (3, 3), 2, 1, true);
    let mut i = 0;
    for &(t, c, n, s) in MOBILENET_V2 {
        for r in 0..n {
            b.scope(format!("features.{i}"));
            i += 1;
            let stride = if r == 0 { s } else { 1 };
            let cin = b.shape(x)[1];
            let hidden = cin * t;
            let mut y = x;
            if t != 1 {
                y = b.conv_bn("expand", y, hidden, (1, 1), 1, 1, true);
            }
            y = b.conv_bn("dw", y, hidden, (3, 3), stride, hidden, true);
            y = b.conv_bn("project", y, c, (1, 1), 1, 1, false);
            x = if stride == 1 && cin == c {
                b.add("residual", y, x)
            } else {
                y
            };
        }
    }
    b.scope("last");
    x = b.conv_bn("conv", x, 1280, (1, 1), 1, 1, true);
    let y = classifier(&mut b, x);
    b.finish(&[y])
}

/// ResNet-50 at `[batch, 3, size, size]`.
pub fn resnet50(batch: usize, size: usize) -> Graph {
    let mut b = Builder::new();
    let mut x = b.input(&[batch, 3, size, size]);
    b.scope("stem");
    x = b.conv_bn("conv1", x, 64, (7, 7), 2, 1, true);
    x = b.pool("maxpool", x, 3, 2, true);
    for (si, &(w, blocks, stride)) in RESNET50.iter().enumerate() {
        for bi in 0..blocks {
            b.scope(format!("layer{}.{bi}", si + 1));
            let s = if bi == 0 { stride } else { 1 };
            let mut y = b.conv_bn("conv1", x, w, (1, 1), 1, 1, true);
            y = b.conv_bn("conv2", y, w, (3, 3), s, 1, true);
            y = b.conv_bn("conv3", y, 4 * w, (1, 1), 1, 1, false);
            let shortcut = if bi == 0 {
                b.conv_bn("downsample", x, 4 * w, (1, 1), s, 1, false)
            } else {
                x
            };
            let sum = b.add("add", y, shortcut);
            x = b.act("relu", sum);
        }
    }
    let y = classifier(&mut b, x);
    b.finish(&[y])
}

fn inception_layer(b: &mut Builder, name: &str, x: TensorId, l: L) -> TensorId {
    match l {
        L::C(c, kh, kw, s) => b.conv_bn(name, x, c, (kh, kw), s, 1, true),
        L::Avg => b.pool(name, x, 3, 1, false),
        L::Max => b.pool(name, x, 3, 2, true),
    }
}

/// Inception v3 at `[batch, 3, size, size]`.
pub fn inception_v3(batch: usize, size: usize) -> Graph {
    let mut b = Builder::new();
    let mut x = b.input(&[batch, 3, size, size]);
    b.scope("stem");
    for (i, &l) in INCEPTION_STEM.iter().enumerate() {
        x = inception_layer(&mut b, &format!("l{i}"), x, l);
    }
    for &(block, branches, param) in INCEPTION_V3 {
        let mut outs = Vec::new();
        for (bi, branch) in branches(param).into_iter().enumerate() {
            b.scope(format!("{block}.branch{bi}"));
            let mut y = x;
            for (li, l) in branch.into_iter().enumerate() {
                y = inception_layer(&mut b, &format!("l{li}"), y, l);
            }
            outs.push(y);
        }
        b.scope(block);
        x = b.concat("cat", &outs, 1);
    }
    let y = classifier(&mut b, x);
    b.finish(&[y])
}

/// One transformer block's attention over queries `[batch, q_len, d]`, with keys and
/// values of earlier tokens when `kv` is given (`[batch, heads, past, dh]` each, the new
/// tokens' concatenated to them, as an eager engine's cache grows). Returns the block's
/// output and the keys and values it attended to (the cache after this block).
fn attention(
    b: &mut Builder,
    x: TensorId,
    kv: Option<(TensorId, TensorId)>,
    (batch, q_len, d, heads): (usize, usize, usize, usize),
) -> (TensorId, (TensorId, TensorId)) {
    let dh = d / heads;
    let q = b.linear("query", x, d);
    let k = b.linear("key", x, d);
    let v = b.linear("value", x, d);
    let qh = b.permute("q_heads", q, &[batch, heads, q_len, dh]);
    let kh = b.permute("k_heads", k, &[batch, heads, q_len, dh]);
    let vh = b.permute("v_heads", v, &[batch, heads, q_len, dh]);
    let (kh, vh) = match kv {
        Some((pk, pv)) => (
            b.concat("k_cache", &[pk, kh], 2),
            b.concat("v_cache", &[pv, vh], 2),
        ),
        None => (kh, vh),
    };
    let scores = b.bmm("scores", qh, kh, true);
    let scaled = b.act("scale", scores);
    let probs = b.softmax("softmax", scaled);
    let ctx = b.bmm("context", probs, vh, false);
    let merged = b.permute("merge_heads", ctx, &[batch, q_len, d]);
    (b.linear("out_proj", merged, d), (kh, vh))
}

/// BERT-base encoder over `[batch, seq]` token ids.
pub fn bert_base(batch: usize, seq: usize) -> Graph {
    let (layers, d, heads, ff) = BERT_BASE;
    let mut b = Builder::new();
    let ids = b.input(&[batch, seq]);
    b.scope("embeddings");
    let e = b.gather("word", ids, &[batch, seq, d]);
    let p = b.gather("position", ids, &[batch, seq, d]);
    let s = b.add("sum", e, p);
    let mut x = b.layer_norm("norm", s);
    for l in 0..layers {
        b.scope(format!("encoder.{l}.attention"));
        let (a, _) = attention(&mut b, x, None, (batch, seq, d, heads));
        let r = b.add("residual", a, x);
        let h = b.layer_norm("norm", r);
        b.scope(format!("encoder.{l}.ffn"));
        let u = b.linear("up", h, ff);
        let g = b.act("gelu", u);
        let o = b.linear("down", g, d);
        let r = b.add("residual", o, h);
        x = b.layer_norm("norm", r);
    }
    b.finish(&[x])
}

/// One GPT-2-small decoding step for `[batch, 1]` new tokens with `past` cached tokens:
/// the new KV cache (concatenated, as an eager engine does) and the logits escape.
pub fn gpt2_decode(batch: usize, past: usize) -> Graph {
    gpt2(batch, 1, Some(past))
}

/// GPT-2-small's prefill of a `[batch, prompt]` prompt: the KV cache of the prompt (every
/// layer's keys and values) and the last position's logits escape.
pub fn gpt2_prefill(batch: usize, prompt: usize) -> Graph {
    gpt2(batch, prompt, None)
}

/// GPT-2-small over `new` tokens, after `past` cached tokens (inputs after the token
/// ids: each layer's keys and values) or none. Outputs: the logits of the last position,
/// then each layer's keys and values.
fn gpt2(batch: usize, new: usize, past: Option<usize>) -> Graph {
    let (layers, d, heads, ff) = GPT2_SMALL;
    let dh = d / heads;
    let mut b = Builder::new();
    let ids = b.input(&[batch, new]);
    let caches: Vec<Option<(TensorId, TensorId)>> = (0..layers)
        .map(|_| {
            past.map(|past| {
                (
                    b.input(&[batch, heads, past, dh]),
                    b.input(&[batch, heads, past, dh]),
                )
            })
        })
        .collect();
    b.scope("wte");
    let e = b.gather("token", ids, &[batch, new, d]);
    let p = b.gather("position", ids, &[batch, new, d]);
    let mut x = b.add("sum", e, p);
    let mut outputs = Vec::new();
    for (l, &kv) in caches.iter().enumerate() {
        b.scope(format!("h.{l}.attn"));
        let h = b.layer_norm("ln_1", x);
        let (a, (k, v)) = attention(&mut b, h, kv, (batch, new, d, heads));
        outputs.extend([k, v]);
        x = b.add("residual", a, x);
        b.scope(format!("h.{l}.mlp"));
        let h = b.layer_norm("ln_2", x);
        let u = b.linear("c_fc", h, ff);
        let g = b.act("gelu", u);
        let o = b.linear("c_proj", g, d);
        x = b.add("residual", o, x);
    }
    b.scope("lm_head");
    if new > 1 {
        x = b.gather("last_token", x, &[batch, 1, d]);
    }
    let h = b.layer_norm("ln_f", x);
    let logits = b.linear("logits", h, GPT2_VOCAB);
    outputs.insert(0, logits);
    b.finish(&outputs)
}
