//! Criterion benchmarks of the file formats: reading the largest problem files of `data/`
//! from memory (`parse_problem_csv_bytes`, and the same problems as JSON), and writing them.
//!
//! ```text
//! cargo bench -p memo-planner --bench formats
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use memo_planner::fixtures::DATA;
use memo_planner::format::problem_to_json;
use memo_planner::format::{parse_problem_csv_bytes, parse_problem_json_bytes, problem_to_csv};

/// The files timed: the iopddl `Y_1` trace (62,185 buffers) and `pangu_2.6B` (18,692).
const FILES: [&str; 2] = [
    "idealloc/iopddl/Y_1.csv",
    "idealloc/somas_tensors/pangu_2.6B.csv",
];

fn read(c: &mut Criterion) {
    for file in FILES {
        let bytes = std::fs::read(format!("{DATA}/{file}")).expect("the data file");
        let name = file.rsplit('/').next().unwrap_or(file);
        let (problem, _) = parse_problem_csv_bytes(&bytes, name).expect("a valid file");
        let json = problem_to_json(&problem, None);
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(problem.len() as u64))
            .sample_size(30)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        g.bench_function("read-csv", |b| {
            b.iter(|| parse_problem_csv_bytes(black_box(&bytes), name))
        });
        g.bench_function("write-csv", |b| {
            b.iter(|| problem_to_csv(black_box(&problem), None))
        });
        g.bench_function("read-json", |b| {
            b.iter(|| parse_problem_json_bytes(black_box(json.as_bytes()), name))
        });
        g.finish();
    }
}

criterion_group!(benches, read);
criterion_main!(benches);
