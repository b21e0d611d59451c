//! Aggregation of the children's results into cells, and the outputs: the table, the JSON
//! document, SVG ratio plots and heap maps. Each cell is compared with memo's cell of its
//! group with bootstrap intervals and a verdict ([`compare`]).

pub mod compare;
pub mod heapmaps;
pub mod plot;
pub mod ratio_plot;
pub mod summary;
pub mod table;

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::alloc::Allocator;
use crate::harness::parent::{Group, Run};
use crate::harness::CellResult;
use crate::stats::{stats_of, Bootstrap, Interval};
use compare::{count_verdicts, vs_memo, Samples, VerdictCount, VsMemo};

/// Output format of the results on stdout (the values `memo`'s `--format` takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// An aligned table for people.
    Text,
    /// JSON for programs.
    Json,
}

/// One (workload, allocator, threads, compute) cell over all its repetitions.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Workload name.
    pub workload: String,
    /// Allocator name.
    pub allocator: String,
    /// Threads.
    pub threads: usize,
    /// Compute per byte.
    pub compute: f64,
    /// Measured passes (all threads, all repetitions).
    pub passes: u64,
    /// Repetitions that ran (child processes).
    pub reps: usize,
    /// Pass latency percentiles and maximum, microseconds.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Maximum.
    pub max_us: f64,
    /// Mean pass latency, microseconds.
    pub mean_us: f64,
    /// Median CPU time of the pass's thread per pass, microseconds (null without CPU
    /// times). Work handed to other threads is not in it.
    pub cpu_p50_us: Option<f64>,
    /// Mean CPU time of the pass's thread per pass, microseconds.
    pub cpu_mean_us: Option<f64>,
    /// Measured passes per second of wall time (all threads).
    pub passes_per_sec: f64,
    /// Peak RSS over the repetitions, bytes: the whole child process's (warm-up,
    /// profiling and planning included).
    pub peak_rss_bytes: u64,
    /// Peak RSS during the measured passes over the repetitions, bytes (null where the
    /// OS cannot reset the peak: not Linux).
    pub measured_peak_rss_bytes: Option<u64>,
    /// Minor page faults per measured pass.
    pub minflt_per_pass: f64,
    /// Major page faults in the measured phases.
    pub majflt: u64,
    /// Share of the pass threads' allocations in replayed passes served from slabs
    /// (memo-alloc's `slab_hits / replay_allocations`; memo cells), else null.
    pub slab_share_pass_thread: Option<f64>,
    /// Share of all allocations made during the passes on any thread (pass threads and
    /// helper threads) served from slabs (memo cells), else null.
    pub slab_share_all_threads: Option<f64>,
    /// Allocations per measured pass made on the pass's own thread (memo cells, counted
    /// by memo-bench).
    pub pass_thread_allocations_per_pass: Option<f64>,
    /// Allocations per measured pass made on other threads while passes ran (memo cells).
    pub helper_allocations_per_pass: Option<f64>,
    /// Misses by reason (memo cells), else null.
    pub misses_by_reason: Option<BTreeMap<String, u64>>,
    /// Slab height of the plan, bytes (memo cells).
    pub plan_height: Option<u64>,
    /// Passes profiled during the measured phases (memo cells: re-profiles).
    pub measured_passes_profiled: Option<u64>,
    /// Allocations of the profiled pass (memo cells).
    pub profiled_allocations: Option<u64>,
    /// Allocations per pass (model).
    pub allocations_per_pass: u64,
    /// Bytes allocated per pass (model).
    pub bytes_per_pass: u64,
    /// Checksum of the results.
    pub checksum: String,
    /// p50 of this cell over memo's p50 in the same group (>1: memo is faster).
    pub p50_vs_memo: Option<f64>,
    /// p99 over memo's p99.
    pub p99_vs_memo: Option<f64>,
    /// This cell against memo's: ratios of medians and means (wall and thread CPU time)
    /// with 95% bootstrap intervals and memo's verdicts (null for memo's own cell).
    pub vs_memo: Option<VsMemo>,
    /// `static` cells of workloads that repeat exactly: memo's median over static's, with
    /// its interval (1: memo at the limit of a planned allocator; below 1 outside the
    /// interval: static behind memo, a fault of the harness).
    pub memo_over_static_p50: Option<Interval>,
    /// jemalloc's `opt.oversize_threshold` read in the child.
    pub jemalloc_oversize_threshold: Option<u64>,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Every cell, grouped by (workload, threads, compute), allocators in schedule order.
    pub cells: Vec<Cell>,
    /// Whether every allocator computed the same checksums in every group.
    pub checksums_agree: bool,
    /// Groups whose checksums disagree (workload, threads).
    pub checksum_mismatches: Vec<String>,
    /// Whether jemalloc-tuned ran with oversize_threshold 1 MiB and jemalloc without.
    pub jemalloc_tuned_verified: Option<bool>,
    /// Logical CPUs of the machine.
    pub cpus: usize,
    /// 1-minute load average at the end of the run.
    pub load_average: Option<f64>,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
    /// Repetitions of every cell.
    pub reps: usize,
    /// Seed of the allocator orders and of the bootstrap.
    pub seed: u64,
    /// Resamples of each interval.
    pub bootstrap_resamples: usize,
    /// memo's verdicts counted per allocator and ratio.
    pub verdicts: Vec<VerdictCount>,
}

fn histogram(samples: impl Iterator<Item = u64>) -> Histogram<u64> {
    let mut h =
        Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds");
    for s in samples {
        h.saturating_record(s.max(1));
    }
    h
}

/// Merges the runs of each (group, allocator) into a cell and computes the ratios and
/// their intervals.
pub fn aggregate(
    groups: &[Group],
    allocators: &[Allocator],
    runs: &[Run],
    boot: &Bootstrap,
) -> Report {
    let reps = runs.iter().map(|r| r.rep + 1).max().unwrap_or(0);
    let mut cells = Vec::new();
    let mut mismatches = Vec::new();
    let mut tuned_ok: Option<bool> = None;
    for (gi, g) in groups.iter().enumerate() {
        let first = cells.len();
        let mut samples = Vec::new();
        for &a in allocators {
            let of_cell: Vec<&Run> = runs
                .iter()
                .filter(|r| r.group == gi && r.result.spec.allocator == a.name())
                .collect();
            let rs: Vec<&CellResult> = of_cell.iter().map(|r| &r.result).collect();
            if rs.is_empty() {
                continue;
            }
            samples.push((a, Samples::of(&of_cell, reps)));
            let checksum = &rs[0].checksum;
            if rs
                .iter()
                .any(|r| &r.checksum != checksum || !r.checksum_consistent)
            {
                mismatches.push(format!(
                    "{} x{} {} (repetitions)",
                    g.workload,
                    g.threads,
                    a.name()
                ));
            }
            if let Some(ok) = tuning_as_configured(a, rs[0].jemalloc_oversize_threshold) {
                tuned_ok = Some(tuned_ok.unwrap_or(true) && ok);
            }
            cells.push(cell(g, a, &rs));
        }
        compare_group(g, &mut cells[first..], &mut mismatches);
        intervals(gi, &mut cells[first..], &samples, boot);
    }
    let verdicts = count_verdicts(
        cells
            .iter()
            .filter_map(|c| Some((c.allocator.as_str(), c.vs_memo.as_ref()?))),
    );
    Report {
        cells,
        checksums_agree: mismatches.is_empty(),
        checksum_mismatches: mismatches,
        jemalloc_tuned_verified: tuned_ok,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average: load_average(),
        wall_s: 0.0,
        reps,
        seed: boot.seed,
        bootstrap_resamples: boot.resamples,
        verdicts,
    }
}

/// Sets every cell's comparison with the group's memo cell (`samples` in the order of
/// `group`), and memo / static on the static cell where static applies.
fn intervals(gi: usize, group: &mut [Cell], samples: &[(Allocator, Samples)], boot: &Bootstrap) {
    let Some((_, memo)) = samples.iter().find(|(a, _)| *a == Allocator::Memo) else {
        return;
    };
    for (c, (a, s)) in group.iter_mut().zip(samples) {
        if *a == Allocator::Memo {
            continue;
        }
        c.vs_memo = vs_memo(s, memo, boot, [gi as u64, *a as u64]);
        let applies = crate::workloads::Spec::parse(&c.workload).is_ok_and(|w| w.repeats_exactly());
        if *a == Allocator::Static && applies {
            c.memo_over_static_p50 = c.vs_memo.map(|v| v.p50.interval().reciprocal());
        }
    }
}

/// Whether a jemalloc cell ran with the oversize threshold it should (1 MiB for
/// jemalloc-tuned, jemalloc's own default for jemalloc); `None` for other allocators.
fn tuning_as_configured(a: Allocator, threshold: Option<u64>) -> Option<bool> {
    match a {
        Allocator::JemallocTuned => Some(threshold == Some(1 << 20)),
        Allocator::Jemalloc => Some(threshold.is_some() && threshold != Some(1 << 20)),
        _ => None,
    }
}

/// Notes a group whose allocators computed different checksums, and sets every cell's
/// ratios to the group's memo cell.
fn compare_group(g: &Group, group: &mut [Cell], mismatches: &mut Vec<String>) {
    let Some(head) = group.first() else {
        return;
    };
    if let Some(c) = group.iter().find(|c| c.checksum != head.checksum) {
        mismatches.push(format!(
            "{} x{}: {} {} vs {} {}",
            g.workload, g.threads, head.allocator, head.checksum, c.allocator, c.checksum
        ));
    }
    if let Some(m) = group.iter().find(|c| c.allocator == "memo").cloned() {
        for c in group.iter_mut() {
            c.p50_vs_memo = Some(c.p50_us / m.p50_us.max(1e-9));
            c.p99_vs_memo = Some(c.p99_us / m.p99_us.max(1e-9));
        }
    }
}

/// memo's counters summed over the repetitions of a cell.
#[derive(Default)]
struct MemoTotals {
    replay: u64,
    hits: u64,
    on_pass: u64,
    on_helpers: u64,
    misses: BTreeMap<String, u64>,
    plan_height: Option<u64>,
    profiled: Option<u64>,
    reprofiled: Option<u64>,
}

impl MemoTotals {
    fn of(rs: &[&CellResult]) -> MemoTotals {
        let mut t = MemoTotals::default();
        for m in rs.iter().filter_map(|r| r.memo.as_ref()) {
            t.replay += m.replay_allocations;
            t.hits += m.slab_hits;
            t.on_pass += m.pass_thread_allocations;
            t.on_helpers += m.helper_allocations;
            for (k, v) in &m.misses_by_reason {
                *t.misses.entry(k.clone()).or_default() += v;
            }
            t.plan_height = Some(m.plan_height);
            t.profiled = Some(m.profiled_allocations);
            t.reprofiled = Some(t.reprofiled.unwrap_or(0) + m.measured_passes_profiled);
        }
        t
    }
}

/// The cell of allocator `a` in group `g` from its repetitions `rs` (ratios not set).
fn cell(g: &Group, a: Allocator, rs: &[&CellResult]) -> Cell {
    let h = histogram(rs.iter().flat_map(|r| r.samples_ns.iter().copied()));
    let mut wall: Vec<u64> = rs
        .iter()
        .flat_map(|r| r.samples_ns.iter().copied())
        .collect();
    let mut cpu: Vec<u64> = rs
        .iter()
        .flat_map(|r| r.cpu_samples_ns.iter().copied())
        .collect();
    let cpu = stats_of(&mut cpu);
    let passes: u64 = rs.iter().map(|r| r.samples_ns.len() as u64).sum();
    let elapsed: f64 = rs.iter().map(|r| r.elapsed_s).sum();
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
    let per_pass = |n: u64| n as f64 / passes.max(1) as f64;
    let memo = MemoTotals::of(rs);
    let is_memo = a.is_memo();
    Cell {
        workload: g.workload.clone(),
        allocator: a.name().to_string(),
        threads: g.threads,
        compute: g.compute,
        passes,
        reps: rs.len(),
        p50_us: us(0.5),
        p90_us: us(0.9),
        p99_us: us(0.99),
        max_us: h.max() as f64 / 1e3,
        mean_us: stats_of(&mut wall).map_or(0.0, |s| s.mean / 1e3),
        cpu_p50_us: cpu.map(|s| s.p50 / 1e3),
        cpu_mean_us: cpu.map(|s| s.mean / 1e3),
        passes_per_sec: if elapsed > 0.0 {
            passes as f64 / elapsed
        } else {
            0.0
        },
        peak_rss_bytes: rs.iter().map(|r| r.peak_rss_bytes).max().unwrap_or(0),
        measured_peak_rss_bytes: rs.iter().map(|r| r.measured_peak_rss_bytes).max().flatten(),
        minflt_per_pass: per_pass(rs.iter().map(|r| r.minflt).sum()),
        majflt: rs.iter().map(|r| r.majflt).sum(),
        slab_share_pass_thread: is_memo.then(|| share(memo.hits, memo.replay)),
        slab_share_all_threads: is_memo.then(|| share(memo.hits, memo.on_pass + memo.on_helpers)),
        pass_thread_allocations_per_pass: is_memo.then(|| per_pass(memo.on_pass)),
        helper_allocations_per_pass: is_memo.then(|| per_pass(memo.on_helpers)),
        misses_by_reason: is_memo.then_some(memo.misses),
        plan_height: memo.plan_height,
        profiled_allocations: memo.profiled,
        measured_passes_profiled: memo.reprofiled,
        allocations_per_pass: rs[0].allocations_per_pass,
        bytes_per_pass: rs[0].bytes_per_pass,
        checksum: rs[0].checksum.clone(),
        p50_vs_memo: None,
        p99_vs_memo: None,
        vs_memo: None,
        memo_over_static_p50: None,
        jemalloc_oversize_threshold: rs[0].jemalloc_oversize_threshold,
    }
}

/// `hits / allocations`, 0 when there were no allocations.
fn share(hits: u64, allocations: u64) -> f64 {
    if allocations == 0 {
        0.0
    } else {
        hits as f64 / allocations as f64
    }
}

/// The 1-minute load average from `/proc/loadavg`.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests;
