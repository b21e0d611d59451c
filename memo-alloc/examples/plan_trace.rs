//! Plans a recorded trace the way the allocator's planner thread does (the same
//! `PlanFile::from_trace` with `best`, so the allocator's budget of `offsets.rs`), and
//! prints the wall time and the resident memory it took:
//! `cargo run --release -p memo-alloc --example plan_trace -- TRACE.json [--csv OUT.csv]`.
//!
//! The peak resident size (`VmHWM`) is reset after the trace is loaded, so the figure is
//! what planning itself adds on top of the trace. `--csv` also writes the planner problem
//! (the main context's buffers) for `memo-planner`'s examples.
use std::time::Instant;

use memo_alloc::trace::{PlanFile, Trace};
use memo_planner::{format::problem_to_csv, OffsetStrategy};

#[path = "../../memo-planner/examples/common/mod.rs"]
mod common;
use common::status_kib;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: plan_trace TRACE.json [--csv OUT.csv]");
    let csv = match (args.next().as_deref(), args.next()) {
        (Some("--csv"), Some(out)) => Some(out),
        _ => None,
    };
    let trace: Trace = {
        let text = std::fs::read_to_string(&path).expect("readable trace");
        serde_json::from_str(&text).expect("a trace document")
    };
    trace.check().expect("a consistent trace");
    if let Some(out) = csv {
        let (problem, _) = trace.to_problem();
        std::fs::write(&out, problem_to_csv(&problem, None)).expect("writable CSV");
        println!("wrote {out}: {} buffers", problem.len());
    }
    // SAFETY: malloc_trim only releases free memory of glibc's heaps.
    unsafe {
        libc::malloc_trim(0);
    }
    // "5" resets the peak resident size to the current one (Linux 4.0+).
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss0 = status_kib("VmRSS:");
    let t = Instant::now();
    let plan = PlanFile::from_trace(&trace, OffsetStrategy::Best);
    let secs = t.elapsed().as_secs_f64();
    let hwm = status_kib("VmHWM:");
    println!(
        "{path}: {} allocations, {} slots; best height {} lower bound {} ({:.6}x) in {secs:.3} s; \
         RSS {:.1} MiB after loading, peak {:.1} MiB while planning (+{:.1} MiB)",
        trace.allocations.len(),
        plan.slots.len(),
        plan.height,
        plan.lower_bound,
        plan.height as f64 / plan.lower_bound.max(1) as f64,
        rss0 as f64 / 1024.0,
        hwm as f64 / 1024.0,
        hwm.saturating_sub(rss0) as f64 / 1024.0,
    );
}
