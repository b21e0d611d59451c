//! Seeds the fuzz corpora with the project's real files (run from the workspace root):
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seed_corpora
//! ```
//!
//! - `problem_csv`: the problem files of `memo-planner/data` (those under 256 KiB, so
//!   the fuzzer's inputs stay small);
//! - `problem_json`: the same problems written as JSON problem files, with their greedy
//!   plan's offsets;
//! - `trace_file` and `plan_file`: the traces and plans written by profiled passes of a
//!   few workloads (ops, nested scopes, tiny lane requests, large blocks, reallocs, an
//!   output that escapes its pass) run here under `MemoAlloc` with a trace directory;
//! - `replay`: the plan files too (an arbitrary input: any bytes make a program).
//!
//! Files already in a corpus stay; a seed is named by its origin.

use std::path::{Path, PathBuf};

use memo_alloc::{Config, MemoAlloc, Planner};
use memo_planner::format::json::problem_to_json;
use memo_planner::OffsetStrategy;

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

/// Largest problem file taken as a seed.
const MAX_SEED: u64 = 256 << 10;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("corpus");
    let traces = std::env::temp_dir().join(format!("memo-fuzz-seeds-{}", std::process::id()));
    memo_alloc::configure(
        Config::default()
            .with_trace_dir(&traces)
            .with_planner(Planner::Inline),
    );
    let problems = seed_problems(&root.join("../memo-planner/data"), &corpus);
    run_workloads();
    let passes = seed_passes(&traces, &corpus);
    std::fs::remove_dir_all(&traces).ok();
    println!("seeded {problems} problem files and {passes} traces and plans");
}

/// Copies the small CSV problems of `data` to `problem_csv` and writes them as JSON to
/// `problem_json`; returns how many.
fn seed_problems(data: &Path, corpus: &Path) -> usize {
    let mut files = Vec::new();
    collect_csv(data, &mut files);
    files.sort();
    let mut seeded = 0;
    for file in files {
        let bytes = std::fs::read(&file).expect("a readable data file");
        let name = seed_name(data, &file);
        let Ok((problem, _)) = memo_planner::format::csv::parse_problem_csv_bytes(&bytes, &name)
        else {
            continue;
        };
        write(&corpus.join("problem_csv"), &name, &bytes);
        let plan = OffsetStrategy::GreedyBySize.plan(&problem);
        let json = problem_to_json(&problem, Some(&plan));
        let json_name = format!("{}.json", name.trim_end_matches(".csv"));
        write(&corpus.join("problem_json"), &json_name, json.as_bytes());
        seeded += 1;
    }
    seeded
}

fn collect_csv(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("the data directory")
        .flatten()
    {
        let path = entry.path();
        let small = entry.metadata().is_ok_and(|m| m.len() <= MAX_SEED);
        if path.is_dir() {
            collect_csv(&path, out);
        } else if small && path.extension().is_some_and(|e| e == "csv") {
            out.push(path);
        }
    }
}

fn seed_name(base: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(base).unwrap_or(file);
    rel.to_string_lossy().replace('/', "-")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("a writable corpus directory");
    std::fs::write(dir.join(name), bytes).expect("a writable corpus directory");
}

/// Profiles a few workloads (each key's first pass writes its trace and plan).
fn run_workloads() {
    let mut kept = Vec::new();
    for pass in 0..2u64 {
        {
            let _p = memo_alloc::pass("seed/ops");
            let a = vec![1u8; 4096];
            let b = {
                let _op = memo_alloc::op("conv");
                let mut v: Vec<u32> = Vec::with_capacity(8);
                v.extend(0..100);
                v
            };
            let c = {
                let _op = memo_alloc::op("relu");
                let _inner = memo_alloc::op("conv");
                vec![0u64; 1000 + pass as usize]
            };
            std::hint::black_box((&a, &b, &c));
        }
        {
            let _p = memo_alloc::pass("seed/lanes");
            let small: Vec<Box<[u8]>> = (1..200).map(|n| vec![0u8; n].into()).collect();
            std::hint::black_box(&small);
        }
        {
            let _p = memo_alloc::pass("seed/large");
            let big = vec![0u8; 3 << 20];
            kept.push(vec![pass; 64]);
            std::hint::black_box(&big);
        }
    }
    memo_alloc::wait_for_plans(std::time::Duration::from_secs(60));
    std::hint::black_box(kept);
}

/// Copies the traces and plans of `dir` to `trace_file`, `plan_file` and `replay`;
/// returns how many files.
fn seed_passes(dir: &Path, corpus: &Path) -> usize {
    let mut seeded = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(entry.path()).expect("a readable trace");
        let targets: &[&str] = if name.ends_with(".trace.json") {
            &["trace_file"]
        } else if name.ends_with(".plan.json") {
            &["plan_file", "replay"]
        } else {
            &[]
        };
        for target in targets {
            write(&corpus.join(target), &name, &bytes);
            seeded += 1;
        }
    }
    seeded
}
