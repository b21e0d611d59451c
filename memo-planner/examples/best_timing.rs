//! Times `best` on a generated DNN-shaped trace (the allocator's case):
//! `cargo run --release -p memo-planner --example best_timing -- [N] [SEED]`.
use std::time::Instant;

use memo_planner::{fixtures, offsets_lower_bound, validate_offsets, OffsetStrategy};

fn main() {
    let mut args = std::env::args().skip(1);
    let n = args.next().and_then(|x| x.parse().ok()).unwrap_or(100_000);
    let seed = args.next().and_then(|x| x.parse().ok()).unwrap_or(1);
    let p = fixtures::dnn_trace(n, seed);
    let t = Instant::now();
    let plan = OffsetStrategy::Best.plan(&p);
    let secs = t.elapsed().as_secs_f64();
    let h = validate_offsets(&p, &plan).expect("valid");
    let g = OffsetStrategy::GreedyBySize.plan(&p).height(&p);
    let lb = offsets_lower_bound(&p);
    println!(
        "dnn_trace({n}, {seed}): best {h} ({:.4}x lb, greedy-by-size {:.4}x) in {secs:.3} s",
        h as f64 / lb as f64,
        g as f64 / lb as f64
    );
}
