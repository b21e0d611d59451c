//! Times every strategy on a CSV problem or a generated DNN trace:
//! `cargo run --release -p memo-planner --example plan_timing -- [FILE.csv | dnn:N]`.
use std::time::Instant;

use memo_planner::{
    offsets_lower_bound, shared_objects_lower_bound, OffsetStrategy, SharedObjectStrategy,
};

mod problems;

fn main() {
    let (arg, problem) = problems::problem_from_args();
    let lb = offsets_lower_bound(&problem);
    println!("{arg}: {} buffers, offsets lower bound {lb}", problem.len());
    for s in OffsetStrategy::ALL {
        if s == OffsetStrategy::Exact && problem.len() > 2000 {
            continue;
        }
        let t = Instant::now();
        let plan = s.plan(&problem);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let h = plan.height(&problem);
        println!(
            "  offsets {:<20} {:>16} {:>8.4}x {:>10.1} ms",
            s.name(),
            h,
            h as f64 / lb as f64,
            ms
        );
    }
    let slb = shared_objects_lower_bound(&problem);
    for s in SharedObjectStrategy::ALL {
        let t = Instant::now();
        let plan = s.plan(&problem);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "  shared  {:<20} {:>16} {:>8.4}x {:>10.1} ms",
            s.name(),
            plan.total(),
            plan.total() as f64 / slb as f64,
            ms
        );
    }
}
