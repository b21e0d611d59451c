//! Times each member of `best`'s portfolio on its own, with the peak resident size it
//! adds (Linux): `cargo run --release -p memo-planner --example portfolio_timing --
//! [FILE.csv | dnn:N]`. "own search" is the portfolio without the other strategies and
//! without its exact step (the allocator's budget: `memo-alloc/src/offsets.rs`).
use std::time::{Duration, Instant};

use memo_planner::offsets::best::{self, BestOptions};
use memo_planner::{offsets_lower_bound, OffsetPlan, Problem};
use memo_planner::{validate_offsets, OffsetStrategy};

mod common;
mod problems;
use common::status_kib;

fn measure(name: &str, problem: &Problem, lb: u64, f: impl FnOnce() -> OffsetPlan) {
    // "5" resets the peak resident size to the current one (Linux 4.0+).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss = status_kib("VmRSS:");
    let t = Instant::now();
    let plan = f();
    let secs = t.elapsed().as_secs_f64();
    let peak = status_kib("VmHWM:").saturating_sub(rss);
    let h = validate_offsets(problem, &plan).expect("a valid plan");
    println!(
        "  {name:<28} {h:>14} {:>10.6}x {secs:>8.3} s {:>8.1} MiB",
        h as f64 / lb.max(1) as f64,
        peak as f64 / 1024.0
    );
}

fn main() {
    let (arg, problem) = problems::problem_from_args();
    let lb = offsets_lower_bound(&problem);
    println!(
        "{arg}: {} buffers, lower bound {lb}; RSS {:.1} MiB",
        problem.len(),
        status_kib("VmRSS:") as f64 / 1024.0
    );
    let only = std::env::args().nth(2);
    let wanted = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    for s in [
        OffsetStrategy::GreedyBySize,
        OffsetStrategy::GreedyByBreadth,
        OffsetStrategy::GreedyInOrder,
        OffsetStrategy::StripPacking,
    ] {
        if wanted(s.name()) {
            measure(s.name(), &problem, lb, || s.plan(&problem));
        }
    }
    let alloc_budget = BestOptions {
        time_cap: Some(Duration::from_secs(1)),
        exact_max_buffers: 0,
        ..BestOptions::default()
    };
    if wanted("own") {
        let own = BestOptions {
            run_other_strategies: false,
            ..alloc_budget.clone()
        };
        measure("own search", &problem, lb, || {
            best::portfolio(&problem, &own)
        });
    }
    if wanted("portfolio") {
        measure("portfolio (allocator)", &problem, lb, || {
            let (plan, report) = best::portfolio_report(&problem, &alloc_budget);
            println!("  {report:?}");
            plan
        });
    }
}
