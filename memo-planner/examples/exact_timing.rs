//! Runs the `exact` strategy on CSV problems and prints height, proven lower bound, time
//! and nodes: `cargo run --release -p memo-planner --example exact_timing -- FILE.csv...`
//! (`--nodes N` sets the node budget, `--serial` runs the two tracks on one thread;
//! `plane:N:SEED` instead of a file generates an exact tiling of N buffers; `--write DIR`
//! only writes each generated tiling to `DIR/plane-N-SEED.csv`).
use std::time::Instant;

use memo_planner::offsets::{best, exact};
use memo_planner::{fixtures, offsets_lower_bound, read_problem_file, validate_offsets};

fn main() {
    let mut options = exact::ExactOptions::default();
    let mut files = Vec::new();
    let mut write: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--nodes" => {
                options.node_limit = args.next().and_then(|x| x.parse().ok()).expect("--nodes N")
            }
            "--serial" => options.parallel = false,
            "--write" => write = args.next(),
            _ => files.push(a),
        }
    }
    for f in files {
        let p = match f.strip_prefix("plane:") {
            Some(spec) => {
                let mut it = spec
                    .split(':')
                    .map(|x| x.parse::<u64>().expect("plane:N:SEED"));
                let (n, seed) = (it.next().unwrap_or(300), it.next().unwrap_or(1));
                fixtures::exact_plane(n as usize, 1 << 20, seed)
            }
            None => read_problem_file(&f).unwrap_or_else(|e| panic!("{e}")).0,
        };
        if let Some(dir) = &write {
            let path = format!("{dir}/{}.csv", f.replace(':', "-"));
            std::fs::write(&path, memo_planner::format::problem_to_csv(&p, None))
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            continue;
        }
        let t = Instant::now();
        let start = best::portfolio(&p, &best::BestOptions::default());
        let t_start = t.elapsed().as_secs_f64();
        let out = exact::search(&p, &start, &options);
        let secs = t.elapsed().as_secs_f64();
        let h = validate_offsets(&p, &out.plan).expect("valid plan");
        let lb = offsets_lower_bound(&p);
        println!(
            "{f}: n={} lb={lb} start={} height={h} ({:.4}x) proven_lb={} optimal={} nodes={} time={secs:.3}s (portfolio {t_start:.3}s)",
            p.len(),
            start.height(&p),
            h as f64 / lb as f64,
            out.lower_bound,
            out.optimal,
            out.nodes,
        );
    }
}
