//! Criterion benchmarks of the planner: time to plan with every strategy of both families.
//!
//! Groups (benchmark ids are `group/family/strategy`, or `group/function` for the bounds
//! and validators):
//!
//! - `plan-1k`, `plan-100k`: every `OffsetStrategy` and `SharedObjectStrategy` on
//!   `fixtures::dnn_trace(1_000, 1)` and `dnn_trace(100_000, 1)`;
//! - `analysis-100k`: `offsets_lower_bound`, `shared_objects_lower_bound`,
//!   `validate_offsets` and `validate_shared` on the 100k trace (validating the
//!   greedy-by-size plans of both families);
//! - `best-100k`: `best` alone on `dnn_trace(100_000, seed)` for seeds 1, 2 and 3 (the
//!   allocator plans passes of this size, and should have a plan within about 2 s);
//! - `Y_1`: the iopddl `Y_1.csv` trace (62185 buffers, `data/idealloc/iopddl/`): naive and
//!   greedy-by-size of both families, the two lower bounds and the two validators. Only the reference
//!   strategies, because on this trace greedy-by-size takes seconds per plan and criterion
//!   needs at least 11 plans per benchmark (extend the lists in `iopddl_y1` to time more).
//!
//! Large inputs use 10 flat samples and short warm-up and measurement times. A benchmark
//! whose plan takes more than about 0.2 s still runs it 11 times (one warm-up, ten
//! samples). With the placeholders (five offset strategies are greedy-by-size, which takes
//! seconds on the 100k and Y_1 traces) the whole run takes about 4 to 7 minutes on 2 shared
//! cores; filter by id to run less.
//!
//! Run:
//!
//! ```text
//! cargo bench -p memo-planner --bench strategies                        # everything
//! cargo bench -p memo-planner --bench strategies -- 'greedy-by-size$'   # a regex on ids
//! cargo bench -p memo-planner --bench strategies -- --test              # each once, a smoke test
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode,
    Throughput,
};
use memo_planner::fixtures::{dnn_trace, DATA};
use memo_planner::{
    offsets_lower_bound, read_problem_file, shared_objects_lower_bound, validate_offsets,
    validate_shared, OffsetStrategy, Problem, SharedObjectStrategy,
};

/// The iopddl `Y_1` trace (minimalloc CSV: `id,lower,upper,size`, half-open lifetimes).
fn y_1() -> Problem {
    let path = format!("{DATA}/idealloc/iopddl/Y_1.csv");
    read_problem_file(&path).unwrap_or_else(|e| panic!("{e}")).0
}

/// A group for `problem`: throughput in buffers; few flat samples for large inputs.
fn group<'c>(c: &'c mut Criterion, name: &str, problem: &Problem) -> BenchmarkGroup<'c, WallTime> {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(problem.len() as u64));
    if problem.len() > 10_000 {
        g.sampling_mode(SamplingMode::Flat)
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
    } else {
        g.warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(1));
    }
    g
}

/// Every strategy of both families on `problem`.
fn plan_all(c: &mut Criterion, name: &str, problem: &Problem) {
    let mut g = group(c, name, problem);
    for s in OffsetStrategy::ALL {
        g.bench_with_input(BenchmarkId::new("offsets", s), problem, |b, p| {
            b.iter(|| s.plan(black_box(p)))
        });
    }
    for s in SharedObjectStrategy::ALL {
        g.bench_with_input(BenchmarkId::new("shared", s), problem, |b, p| {
            b.iter(|| s.plan(black_box(p)))
        });
    }
    g.finish();
}

fn dnn_1k(c: &mut Criterion) {
    plan_all(c, "plan-1k", &dnn_trace(1_000, 1));
}

fn dnn_100k(c: &mut Criterion) {
    let problem = dnn_trace(100_000, 1);
    plan_all(c, "plan-100k", &problem);

    let mut g = group(c, "analysis-100k", &problem);
    analysis(&mut g, &problem);
    g.finish();
}

/// The lower bounds, and the validators on the greedy-by-size plans of both families.
fn analysis(g: &mut BenchmarkGroup<'_, WallTime>, problem: &Problem) {
    let offsets = OffsetStrategy::GreedyBySize.plan(problem);
    let shared = SharedObjectStrategy::GreedyBySize.plan(problem);
    g.bench_function("offsets_lower_bound", |b| {
        b.iter(|| offsets_lower_bound(black_box(problem)))
    });
    g.bench_function("shared_objects_lower_bound", |b| {
        b.iter(|| shared_objects_lower_bound(black_box(problem)))
    });
    g.bench_function("validate_offsets", |b| {
        b.iter(|| validate_offsets(black_box(problem), black_box(&offsets)))
    });
    g.bench_function("validate_shared", |b| {
        b.iter(|| validate_shared(black_box(problem), black_box(&shared)))
    });
}

fn best_100k(c: &mut Criterion) {
    let problems: Vec<Problem> = (1..=3).map(|seed| dnn_trace(100_000, seed)).collect();
    let mut g = group(c, "best-100k", &problems[0]);
    for (seed, p) in (1..=3).zip(&problems) {
        g.bench_with_input(BenchmarkId::new("seed", seed), p, |b, p| {
            b.iter(|| OffsetStrategy::Best.plan(black_box(p)))
        });
    }
    g.finish();
}

fn iopddl_y1(c: &mut Criterion) {
    let problem = y_1();
    let mut g = group(c, "Y_1", &problem);
    for s in [OffsetStrategy::Naive, OffsetStrategy::GreedyBySize] {
        g.bench_with_input(BenchmarkId::new("offsets", s), &problem, |b, p| {
            b.iter(|| s.plan(black_box(p)))
        });
    }
    for s in [
        SharedObjectStrategy::Naive,
        SharedObjectStrategy::GreedyBySize,
    ] {
        g.bench_with_input(BenchmarkId::new("shared", s), &problem, |b, p| {
            b.iter(|| s.plan(black_box(p)))
        });
    }
    analysis(&mut g, &problem);
    g.finish();
}

criterion_group!(benches, dnn_1k, dnn_100k, best_100k, iopddl_y1);
criterion_main!(benches);
