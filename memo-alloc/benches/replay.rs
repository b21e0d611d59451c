//! Replay and pass-through costs, against the bare backend (`System`).
//!
//! - `pair/<size>`: one alloc + free inside a replayed pass, at 64 B, 64 KiB and 4 MiB,
//!   timed over the pass body only (pass start and end excluded);
//! - `system/<size>`: the same pair on `System` directly;
//! - `outside-pass/64`: a pair through `MemoAlloc` with no pass running.
//!
//! Run: `cargo bench -p memo-alloc --bench replay`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use memo_alloc::MemoAlloc;

static A: MemoAlloc = MemoAlloc::system();

/// Pairs per pass: enough to amortise nothing (boundaries are not timed) but keep plans small.
const PAIRS: u64 = 1000;

fn pairs(layout: Layout) {
    for _ in 0..PAIRS {
        // SAFETY: non-zero size; the block is freed with its layout.
        unsafe {
            let p = A.alloc(layout);
            black_box(p);
            A.dealloc(p, layout);
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("replay");
    g.measurement_time(Duration::from_secs(3));
    for (name, size, key) in [
        ("64B", 64usize, "bench-64"),
        ("64KiB", 64 << 10, "bench-64k"),
        ("4MiB", 4 << 20, "bench-4m"),
    ] {
        let layout = Layout::from_size_align(size, 16).expect("layout");
        {
            let _p = memo_alloc::pass(key); // profiled
            pairs(layout);
        }
        assert!(
            memo_alloc::wait_for_plans(Duration::from_secs(10)),
            "planned"
        );
        g.bench_function(BenchmarkId::new("pair", name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    let _p = memo_alloc::pass(key);
                    let t = Instant::now();
                    pairs(layout);
                    total += t.elapsed();
                    done += PAIRS;
                }
                total.mul_f64(iters as f64 / done as f64) / iters as u32 * iters as u32
            })
        });
        g.bench_function(BenchmarkId::new("system", name), |b| {
            b.iter(|| {
                // SAFETY: as in `pairs`.
                unsafe {
                    let p = System.alloc(layout);
                    black_box(p);
                    System.dealloc(p, layout);
                }
            })
        });
        let r = memo_alloc::report(key).expect("report");
        // (A filtered run may not have replayed this key.)
        assert!(
            r.passes_replayed == 0 || r.slab_hits > 0,
            "replay never used the slab: {r:?}"
        );
    }
    let layout = Layout::from_size_align(64, 16).expect("layout");
    g.bench_function(BenchmarkId::new("outside-pass", "64B"), |b| {
        b.iter(|| {
            // SAFETY: as in `pairs`.
            unsafe {
                let p = A.alloc(layout);
                black_box(p);
                A.dealloc(p, layout);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
