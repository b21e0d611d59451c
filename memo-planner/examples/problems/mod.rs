//! The problem a planning example works on, named by its first argument.

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
/// or a problem file (those of `memo-planner/data`, say). Exits with the file's error when
/// it cannot be read.
fn problem_arg(arg: &str) -> memo_planner::Problem {
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
