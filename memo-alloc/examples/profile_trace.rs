//! Replays a recorded trace's allocations, frees and reallocs inside one pass under
//! `MemoAlloc`, so the whole profile -> trace -> plan -> compile path of the allocator
//! runs on it, and prints the planner's time and the peak resident size:
//! `cargo run --release -p memo-alloc --example profile_trace -- TRACE.json [PASSES]`.
//!
//! The trace is turned into a compact event list and dropped before the pass; the peak
//! resident size (`VmHWM`) is reset just before the first pass, so the figure is what
//! the profile, its planning and the slab add to the program (the replayed buffers
//! themselves included, a few MB here).
use std::alloc::{alloc, dealloc, realloc, Layout};
use std::time::{Duration, Instant};

use memo_alloc::trace::{AllocKind, Trace};

#[path = "../../memo-planner/examples/common/mod.rs"]
mod common;
use common::status_kib;

#[global_allocator]
static A: memo_alloc::MemoAlloc = memo_alloc::MemoAlloc::system();

/// One step of the pass, by allocation index.
enum Step {
    Alloc(u32),
    Realloc { from: u32, to: u32 },
    Free(u32),
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: profile_trace TRACE.json [PASSES]");
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2);
    let (steps, layouts) = {
        let text = std::fs::read_to_string(&path).expect("readable trace");
        let trace: Trace = serde_json::from_str(&text).expect("a trace document");
        drop(text);
        trace.check().expect("a consistent trace");
        let n = trace.allocations.len();
        let mut continued = vec![false; n];
        let mut timed: Vec<(u64, Step)> = Vec::with_capacity(2 * n);
        for a in &trace.allocations {
            match (a.kind, a.realloc_parent) {
                (AllocKind::Realloc, Some(p)) => {
                    continued[p as usize] = true;
                    timed.push((a.alloc, Step::Realloc { from: p, to: a.id }));
                }
                _ => timed.push((a.alloc, Step::Alloc(a.id))),
            }
        }
        for a in &trace.allocations {
            if let (Some(f), false) = (a.free, continued[a.id as usize]) {
                timed.push((f, Step::Free(a.id)));
            }
        }
        timed.sort_by_key(|&(t, _)| t);
        let layouts: Vec<Layout> = trace
            .allocations
            .iter()
            .map(|a| Layout::from_size_align(a.size.max(1) as usize, a.align as usize).unwrap())
            .collect();
        (
            timed.into_iter().map(|(_, s)| s).collect::<Vec<_>>(),
            layouts,
        )
    };
    let mut ptrs: Vec<*mut u8> = vec![std::ptr::null_mut(); layouts.len()];
    // SAFETY: malloc_trim only releases free memory of glibc's heaps.
    unsafe {
        libc::malloc_trim(0);
    }
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss0 = status_kib("VmRSS:");
    for pass in 0..passes {
        let t = Instant::now();
        {
            let _p = memo_alloc::pass("trace");
            for s in &steps {
                // SAFETY: every layout has a non-zero size; each pointer is freed or
                // reallocated once, with its own layout, as the trace did.
                unsafe {
                    match *s {
                        Step::Alloc(i) => ptrs[i as usize] = alloc(layouts[i as usize]),
                        Step::Realloc { from, to } => {
                            ptrs[to as usize] = realloc(
                                ptrs[from as usize],
                                layouts[from as usize],
                                layouts[to as usize].size(),
                            );
                        }
                        Step::Free(i) => dealloc(ptrs[i as usize], layouts[i as usize]),
                    }
                }
            }
        }
        let pass_secs = t.elapsed().as_secs_f64();
        let waited = Instant::now();
        memo_alloc::wait_for_plans(Duration::from_secs(300));
        let r = memo_alloc::report("trace").expect("a report");
        println!(
            "pass {pass}: {:.2} ms, then {:.3} s waiting for the planner; state {}, plan {:.0} ms, \
             height {} lower bound {}, {} slab hits; RSS {:.1} MiB, peak {:.1} MiB (+{:.1} MiB over {:.1})",
            pass_secs * 1e3,
            waited.elapsed().as_secs_f64(),
            r.state,
            r.plan_millis,
            r.height,
            r.lower_bound,
            r.slab_hits,
            mib(status_kib("VmRSS:")),
            mib(status_kib("VmHWM:")),
            mib(status_kib("VmHWM:").saturating_sub(rss0)),
            mib(rss0),
        );
        println!("  misses by reason: {:?}", r.misses_by_reason);
        // Allocations that escaped the pass (never freed in the trace) are leaked.
    }
}
