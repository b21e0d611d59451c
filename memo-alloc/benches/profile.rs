//! Profiling cost: a pass of 10,000 small allocations (alloc, touch, free, with a few
//! long-lived ones) recorded by `MemoAlloc` in profile mode, against the same pass on the
//! bare backend. Two variants: the pass body only (`record`), and the whole pass including
//! planning at its end with `greedy-by-size` (`record+plan`).
//!
//! Run: `cargo bench -p memo-alloc --bench profile`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use memo_alloc::{Config, MemoAlloc, Mode};
use memo_planner::OffsetStrategy;

static A: MemoAlloc = MemoAlloc::system();

const N: usize = 10_000;

fn body<G: GlobalAlloc>(a: &G, keep: &mut Vec<(*mut u8, Layout)>) {
    for i in 0..N {
        let layout = Layout::from_size_align(16 + (i % 16) * 8, 8).expect("layout");
        // SAFETY: non-zero size; every block is freed with its layout (now or below).
        unsafe {
            let p = a.alloc(layout);
            p.write(i as u8);
            if i % 100 == 0 {
                keep.push((p, layout));
            } else {
                a.dealloc(p, layout);
            }
        }
    }
    for (p, l) in keep.drain(..) {
        // SAFETY: allocated above with `l`.
        unsafe { a.dealloc(p, l) };
    }
}

fn bench(c: &mut Criterion) {
    memo_alloc::configure(
        Config::default()
            .with_mode(Mode::Profile)
            .with_strategy(OffsetStrategy::GreedyBySize),
    );
    let mut g = c.benchmark_group("profile-10k");
    g.measurement_time(Duration::from_secs(5)).sample_size(20);
    let mut keep = Vec::with_capacity(N / 100 + 1);
    g.bench_function("system", |b| b.iter(|| body(&System, black_box(&mut keep))));
    g.bench_function("record", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let _p = memo_alloc::pass("profile-bench");
                let t = Instant::now();
                body(&A, &mut keep);
                total += t.elapsed();
            }
            total
        })
    });
    g.bench_function("record+plan", |b| {
        b.iter(|| {
            let _p = memo_alloc::pass("profile-bench");
            body(&A, &mut keep);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
