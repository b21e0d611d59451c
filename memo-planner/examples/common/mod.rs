//! What the planning examples share (memo-alloc's examples include this file too).
#![allow(dead_code)] // each example uses part of it

/// A field of /proc/self/status, in KiB (0 when it cannot be read).
pub fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// The example's first argument (`dnn:100000` when there is none) and the problem it
/// names (see [`problem_arg`]).
pub fn problem_from_args() -> (String, memo_planner::Problem) {
    let arg = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "dnn:100000".into());
    let problem = problem_arg(&arg);
    (arg, problem)
}

/// The problem an example's argument names: `dnn:N` (a generated DNN trace of N buffers)
/// or a problem file. Exits with the file's error when it cannot be read.
pub fn problem_arg(arg: &str) -> memo_planner::Problem {
    match arg.strip_prefix("dnn:") {
        Some(n) => memo_planner::fixtures::dnn_trace(n.parse().expect("a number after dnn:"), 1),
        None => match memo_planner::read_problem_file(arg) {
            Ok((p, _)) => p,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
    }
}
