//! memo-bench: the benchmark harness of memomalloc.
//!
//! The multithreaded allocator benchmark is being built. Until then this command compares
//! every planning strategy on the built-in DNN-shaped traces and on the public traces in
//! `../shared/data/idealloc/` when they are present.

use std::path::Path;
use std::time::Instant;

use memo_planner::{
    fixtures, offsets_lower_bound, read_problem_file, validate_offsets, OffsetStrategy, Problem,
};

fn report(name: &str, problem: &Problem) {
    let lb = offsets_lower_bound(problem);
    println!("\n{name}: {} buffers, lower bound {lb} B", problem.len());
    println!(
        "  {:<18} {:>16} {:>9} {:>10}",
        "strategy", "height (B)", "/ bound", "ms"
    );
    for s in OffsetStrategy::ALL {
        if s == OffsetStrategy::Exact && problem.len() > 5000 {
            continue;
        }
        let t = Instant::now();
        let plan = s.plan(problem);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match validate_offsets(problem, &plan) {
            Ok(h) => println!(
                "  {:<18} {:>16} {:>9.4} {:>10.1}",
                s.name(),
                h,
                h as f64 / lb.max(1) as f64,
                ms
            ),
            Err(e) => println!("  {:<18} INVALID PLAN: {e}", s.name()),
        }
    }
}

fn main() {
    println!("memo-bench: planner comparison (the allocator benchmark is being built)");
    for n in [1_000, 10_000] {
        report(&format!("dnn-trace-{n}"), &fixtures::dnn_trace(n, 1));
    }
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/idealloc");
    for rel in ["somas_tensors/resnet50.csv", "iopddl/G_1.csv"] {
        let path = data.join(rel);
        if let Ok((p, _)) = read_problem_file(&path) {
            report(rel, &p);
        }
    }
}
