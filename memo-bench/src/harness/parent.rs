//! The parent process: runs no workload itself. It spawns one child per (workload,
//! threads, compute, allocator, repetition) and gathers the children's JSON.
//!
//! The order: repetition by repetition, every group in turn, and within a group every
//! allocator back to back in an order shuffled per (repetition, group) from the
//! schedule's seed. So the repetitions of a cell are spread over the whole run (slow drift
//! of the machine shows as spread between them, which the intervals carry), the cells a
//! ratio compares ran next to each other in each repetition (paired in the bootstrap, see
//! `stats::bootstrap`), and no allocator always runs first or last (a position effect,
//! such as the machine's state after the previous group, averages out instead of
//! favouring one allocator).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use indicatif::{ProgressBar, ProgressStyle};

use super::{engine_env, jemalloc_conf, memo_env, CellResult, CellSpec};
use crate::alloc::{Allocator, ALLOCATOR_ENV};
use crate::stats::{shuffle, Rng};

/// One (workload, threads, compute) point: every allocator runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Workload spec.
    pub workload: String,
    /// Threads.
    pub threads: usize,
    /// Compute per byte.
    pub compute: f64,
    /// Warm-up passes per thread.
    pub warmup: u64,
    /// Measured passes per thread.
    pub passes: u64,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The points.
    pub groups: Vec<Group>,
    /// Allocators (in report order; each repetition of a group runs them shuffled).
    pub allocators: Vec<Allocator>,
    /// Repetitions of every cell.
    pub reps: usize,
    /// Seed of the allocator orders (and of the report's bootstrap).
    pub seed: u64,
    /// Directory for memo traces (heap maps), if any: the first memo cell of each
    /// workload writes its profiled pass there.
    pub trace_dir: Option<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
}

/// One child's run.
pub struct Run {
    /// Index of the group.
    pub group: usize,
    /// Repetition (0-based).
    pub rep: usize,
    /// The result.
    pub result: CellResult,
}

/// Runs every cell of `schedule` in child processes of this executable.
pub fn run(schedule: &Schedule) -> Result<Vec<Run>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let total = schedule.groups.len() * schedule.reps * schedule.allocators.len();
    let bar = if schedule.progress {
        let b = ProgressBar::new(total as u64);
        b.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let mut traced = std::collections::HashSet::new();
    let mut runs = Vec::with_capacity(total);
    for rep in 0..schedule.reps {
        for (gi, g) in schedule.groups.iter().enumerate() {
            for a in allocator_order(schedule, rep, gi) {
                bar.set_message(format!(
                    "rep {} {} x{} {}",
                    rep + 1,
                    g.workload,
                    g.threads,
                    a.name()
                ));
                let spec = CellSpec {
                    workload: g.workload.clone(),
                    allocator: a.name().to_string(),
                    threads: g.threads,
                    warmup: g.warmup,
                    passes: g.passes,
                    compute: g.compute,
                };
                let trace = match &schedule.trace_dir {
                    Some(d) if a == Allocator::Memo && traced.insert(g.workload.clone()) => {
                        Some(d.as_path())
                    }
                    _ => None,
                };
                let result = spawn(&exe, a, &spec, trace)?;
                runs.push(Run {
                    group: gi,
                    rep,
                    result,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(runs)
}

/// The order in which repetition `rep` of group `group` runs the allocators: shuffled
/// from the schedule's seed, the same for the same seed.
pub fn allocator_order(schedule: &Schedule, rep: usize, group: usize) -> Vec<Allocator> {
    let mut order = schedule.allocators.clone();
    shuffle(
        &mut order,
        &mut Rng::new(schedule.seed, &[rep as u64, group as u64]),
    );
    order
}

/// Runs one cell in a child process and parses its report.
pub fn spawn(
    exe: &Path,
    allocator: Allocator,
    spec: &CellSpec,
    trace_dir: Option<&Path>,
) -> Result<CellResult, String> {
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.arg("child")
        .arg(&json)
        .env(ALLOCATOR_ENV, allocator.name())
        .env_remove("_RJEM_MALLOC_CONF")
        .env_remove("MEMO_TRACE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((k, v)) = jemalloc_conf(allocator) {
        cmd.env(k, v);
    }
    if let Some((k, v)) = memo_env(allocator) {
        cmd.env(k, v);
    }
    if let Some((k, v)) = engine_env(&spec.workload) {
        cmd.env(k, v);
    }
    if let Some(d) = trace_dir {
        cmd.env("MEMO_TRACE_DIR", d);
    }
    let output = cmd
        .output()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    let status = output.status;
    if !status.success() {
        return Err(format!(
            "cell {} x{} {} failed ({status}): {}",
            spec.workload,
            spec.threads,
            allocator.name(),
            err.trim()
        ));
    }
    let line = out.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| {
        format!(
            "cell {} x{} {}: unreadable report ({e}): {line:?} {}",
            spec.workload,
            spec.threads,
            allocator.name(),
            err.trim()
        )
    })
}
