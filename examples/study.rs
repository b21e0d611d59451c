//! Records a trace of a small multi-op program, then shows how to study it.
//!
//! ```sh
//! cargo run --release --example study            # writes target/memo-study/*.trace.json
//! MEMO_TRACE_DIR=/tmp/t MEMO_BACKTRACE=1 cargo run --release --example study
//! ```
//!
//! The program is a toy transformer block run three times: `tokenize` grows a vector by
//! pushing (a realloc chain), `embed` makes the hidden state, then each of three `layer`s
//! runs `attention` (q, k, v, scores, softmax) and `mlp` (up, gelu, down) and adds the
//! residual; `logits` returns the output, which outlives the pass. The first pass is
//! profiled and its trace written; the later ones are served from the planned slab.

use std::path::PathBuf;

use memo_alloc::{configure, op, pass, Config};

#[global_allocator]
static ALLOC: memo_alloc::MemoAlloc = memo_alloc::MemoAlloc::system();

const SEQ: usize = 32;
const DIM: usize = 64;
const LAYERS: usize = 3;

/// `a (n×k) · b (k×m)`.
fn matmul(a: &[f32], b: &[f32], n: usize, k: usize, m: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n * m];
    for i in 0..n {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..m {
                out[i * m + j] += x * b[p * m + j];
            }
        }
    }
    out
}

fn weights(rows: usize, cols: usize, seed: u32) -> Vec<f32> {
    (0..rows * cols)
        .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 1e4)
        .collect()
}

struct Layer {
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
}

fn attention(h: &[f32], l: &Layer) -> Vec<f32> {
    let _op = op("attention");
    let q = matmul(h, &l.wq, SEQ, DIM, DIM);
    let k = matmul(h, &l.wk, SEQ, DIM, DIM);
    let v = matmul(h, &l.wv, SEQ, DIM, DIM);
    let mut kt = vec![0.0f32; DIM * SEQ];
    for i in 0..SEQ {
        for j in 0..DIM {
            kt[j * SEQ + i] = k[i * DIM + j];
        }
    }
    drop(k);
    let mut scores = matmul(&q, &kt, SEQ, DIM, SEQ);
    drop((q, kt));
    {
        let _op = op("softmax");
        for row in scores.chunks_mut(SEQ) {
            let max = row.iter().cloned().fold(f32::MIN, f32::max);
            let exp: Vec<f32> = row.iter().map(|x| (x - max).exp()).collect();
            let sum: f32 = exp.iter().sum();
            for (r, e) in row.iter_mut().zip(&exp) {
                *r = e / sum;
            }
        }
    }
    matmul(&scores, &v, SEQ, SEQ, DIM)
}

fn mlp(h: &[f32], l: &Layer) -> Vec<f32> {
    let _op = op("mlp");
    let up = matmul(h, &l.up, SEQ, DIM, 4 * DIM);
    let act: Vec<f32> = up
        .iter()
        .map(|x| 0.5 * x * (1.0 + (0.8 * x).tanh()))
        .collect();
    drop(up);
    matmul(&act, &l.down, SEQ, 4 * DIM, DIM)
}

fn infer(text: &str, layers: &[Layer], embedding: &[f32], head: &[f32]) -> Vec<f32> {
    let _pass = pass("study-model");
    let tokens = {
        let _op = op("tokenize");
        let mut t = Vec::new(); // grows by pushing: a realloc chain
        for (i, b) in text.bytes().cycle().take(SEQ).enumerate() {
            t.push((b as usize + i) % 256);
        }
        t
    };
    let mut h = {
        let _op = op("embed");
        let mut h = Vec::with_capacity(SEQ * DIM);
        for &t in &tokens {
            h.extend_from_slice(&embedding[t * DIM..(t + 1) * DIM]);
        }
        h
    };
    drop(tokens);
    for l in layers {
        let _op = op("layer");
        let a = attention(&h, l);
        let m = mlp(&a, l);
        let _add = op("residual");
        h = h
            .iter()
            .zip(&a)
            .zip(&m)
            .map(|((x, y), z)| x + y + z)
            .collect();
    }
    let _op = op("logits");
    matmul(&h[(SEQ - 1) * DIM..], head, 1, DIM, 256)
}

fn main() {
    let mut config = Config::from_env();
    let dir = config
        .trace_dir
        .get_or_insert_with(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/memo-study"))
        .clone();
    if !configure(config) {
        eprintln!("memomalloc was already configured; traces go where that said");
    }
    let layers: Vec<Layer> = (0..LAYERS as u32)
        .map(|i| Layer {
            wq: weights(DIM, DIM, 10 * i + 1),
            wk: weights(DIM, DIM, 10 * i + 2),
            wv: weights(DIM, DIM, 10 * i + 3),
            up: weights(DIM, 4 * DIM, 10 * i + 4),
            down: weights(4 * DIM, DIM, 10 * i + 5),
        })
        .collect();
    let embedding = weights(256, DIM, 7);
    let head = weights(DIM, 256, 9);
    let mut checksum = 0.0;
    for text in ["memomalloc", "plans a pass", "into one slab"] {
        let logits = infer(text, &layers, &embedding, &head);
        checksum += logits.iter().sum::<f32>();
    }
    let report = memo_alloc::report("study-model");
    let trace = dir.join("study-model.1.trace.json");
    println!("ran 3 passes (checksum {checksum:.3})");
    if let Some(r) = report {
        println!(
            "pass {}: {} allocations profiled, {} planned into a {} B slab (lower bound {} B); \
             {} passes replayed, {} allocations served from the slab",
            r.key,
            r.allocations,
            r.planned,
            r.height,
            r.lower_bound,
            r.passes_replayed,
            r.slab_hits
        );
    }
    println!("trace: {}\n", trace.display());
    println!("Study it with the memo CLI:");
    let t = trace.display();
    println!("  cargo run --release --bin memo -- stats {t}");
    println!("  cargo run --release --bin memo -- stats {t} --format json");
    println!(
        "  cargo run --release --bin memo -- export {t} --dhat study.dhat.json --perfetto study.perfetto.json --csv study.csv"
    );
    println!("  cargo run --release --bin memo -- heapmap {t} -o study-heapmap.svg");
    println!("  cargo run --release --bin memo -- compare {t}");
    println!("Open study.dhat.json in valgrind's dh_view.html and study.perfetto.json in ui.perfetto.dev.");
}
