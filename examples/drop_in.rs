//! A small multithreaded "inference service" with memomalloc dropped in as its global
//! allocator: each request is a pass, each layer an op scope. The first request profiles
//! the model; every later request, on any thread, is served from a slab.
//!
//! Run: `cargo run --release --example drop_in`.

use std::thread;

#[global_allocator]
static ALLOC: memo_alloc::MemoAlloc<memo_alloc::Jemalloc> = memo_alloc::MemoAlloc::jemalloc();

/// A toy model: a few dense layers with ReLU, allocating like a Rust engine does.
struct Model {
    layers: Vec<(usize, usize, Vec<f32>)>, // (inputs, outputs, weights)
}

impl Model {
    fn new(widths: &[usize]) -> Model {
        let layers = widths
            .windows(2)
            .map(|w| {
                let weights = (0..w[0] * w[1])
                    .map(|i| ((i % 7) as f32 - 3.0) * 0.01)
                    .collect();
                (w[0], w[1], weights)
            })
            .collect();
        Model { layers }
    }

    /// One request: a pass; the output escapes it.
    fn infer(&self, input: &[f32]) -> Vec<f32> {
        let _pass = memo_alloc::pass("toy-mlp");
        let mut x = input.to_vec();
        for (i, (n_in, n_out, w)) in self.layers.iter().enumerate() {
            let _op = memo_alloc::op(LAYER_NAMES[i % LAYER_NAMES.len()]);
            let shape: Vec<usize> = vec![1, *n_out]; // engines keep small shape vectors
            let mut y = vec![0.0f32; shape[1]];
            for (o, yo) in y.iter_mut().enumerate() {
                let row = &w[o * n_in..(o + 1) * n_in];
                *yo = row.iter().zip(&x).map(|(a, b)| a * b).sum::<f32>().max(0.0);
            }
            x = y;
        }
        x
    }
}

const LAYER_NAMES: [&str; 4] = ["dense0", "dense1", "dense2", "dense3"];

fn main() {
    let model = Model::new(&[256, 512, 512, 256, 10]);
    let input: Vec<f32> = (0..256).map(|i| i as f32 / 256.0).collect();
    let reference = model.infer(&input); // profiled
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..200 {
                    assert_eq!(model.infer(&input), reference);
                }
            });
        }
    });
    let stats = memo_alloc::stats();
    let report = memo_alloc::report("toy-mlp").expect("the key ran");
    println!(
        "passes: {} profiled, {} replayed",
        stats.passes_profiled, stats.passes_replayed
    );
    println!(
        "allocations in replayed passes: {} ({} from slabs, {:.1}%; {} misses)",
        stats.replay_allocations,
        stats.slab_hits,
        100.0 * stats.slab_share(),
        stats.misses
    );
    for reason in memo_alloc::MissReason::ALL {
        let n = stats.misses_for(reason);
        if n > 0 {
            println!("  missed, {}: {n}", reason.name());
        }
    }
    println!(
        "plan: {} allocations planned, {} escaping; slab {} bytes (lower bound {}, no reuse {}), {} slab instances",
        report.planned, report.escaping, report.height, report.lower_bound, report.naive, report.slab_instances
    );
}
