//! The harness: a parent process that plans and schedules cells, and child processes that
//! each run one cell under one global allocator and report it as JSON on stdout.

pub mod child;
pub mod parent;
pub mod sys;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::alloc::Allocator;

/// jemalloc's configuration for the thesis's tuned setting (oversize threshold 1 MiB: only
/// requests above 1 MiB go to the oversize arena, without thread cache).
pub const JEMALLOC_TUNED_CONF: &str = "oversize_threshold:1048576";

/// Environment a child of `allocator` needs besides [`crate::alloc::ALLOCATOR_ENV`]:
/// `_RJEM_MALLOC_CONF` (tikv-jemallocator's prefixed `MALLOC_CONF`) for `jemalloc-tuned`.
pub fn jemalloc_conf(allocator: Allocator) -> Option<(&'static str, &'static str)> {
    (allocator == Allocator::JemallocTuned).then_some(("_RJEM_MALLOC_CONF", JEMALLOC_TUNED_CONF))
}

/// Environment a child of `allocator` needs for memo's settings: `MEMO_LANES=0` for
/// `memo-slots`, none for the others (`memo` runs with memo's defaults, or the caller's
/// `MEMO_*` settings).
pub fn memo_env(allocator: Allocator) -> Option<(&'static str, &'static str)> {
    (allocator == Allocator::MemoSlots).then_some(("MEMO_LANES", "0"))
}

/// Environment a child running `workload` needs for its engine: candle's thread count (see
/// `candle::child_env`, feature `engine`) for a candle model, none for the others or without the
/// `engine` feature.
pub fn engine_env(workload: &str) -> Option<(&'static str, String)> {
    #[cfg(feature = "engine")]
    if let Ok(crate::workloads::Spec::Candle(_)) = crate::workloads::Spec::parse(workload) {
        return crate::candle::child_env();
    }
    let _ = workload;
    None
}

/// What one child runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CellSpec {
    /// Workload spec (see [`crate::workloads::Spec::parse`]).
    pub workload: String,
    /// Allocator name (must match the child's global allocator).
    pub allocator: String,
    /// Threads running passes concurrently.
    pub threads: usize,
    /// Warm-up passes per thread (not measured).
    pub warmup: u64,
    /// Measured passes per thread.
    pub passes: u64,
    /// Compute per byte (see [`crate::engine::Compute`]).
    pub compute: f64,
}

/// memomalloc's counters over the measured passes of a cell.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MemoCounters {
    /// Share of the allocations made on the passes' own threads, inside replayed passes,
    /// that were served from slabs (memo-alloc's `slab_hits / replay_allocations`).
    pub slab_share_pass_thread: f64,
    /// Share of every allocation made during the passes, on any thread (the pass threads
    /// and the helper threads an engine hands work to), that was served from slabs:
    /// `slab_hits / (pass_thread_allocations + helper_allocations)`.
    pub slab_share_all_threads: f64,
    /// Allocations made inside measured replayed passes (memo-alloc's count).
    pub replay_allocations: u64,
    /// Of which served from slabs.
    pub slab_hits: u64,
    /// Allocations made by the request threads inside their measured passes (memo-bench's
    /// count, see [`crate::pass_count`]).
    pub pass_thread_allocations: u64,
    /// Allocations made by other threads while a measured pass was running.
    pub helper_allocations: u64,
    /// Misses by reason (only reasons that occurred).
    pub misses_by_reason: BTreeMap<String, u64>,
    /// Passes profiled during the measured phase (re-profiles): their allocations count in
    /// `slab_share_all_threads` but not in `slab_share_pass_thread`.
    pub measured_passes_profiled: u64,
    /// Passes profiled, replayed and run on the backend over the whole cell.
    pub passes_profiled: u64,
    /// Passes replayed over the whole cell.
    pub passes_replayed: u64,
    /// Passes on the backend over the whole cell.
    pub passes_backend: u64,
    /// Slab memory that can be resident at the end (bytes).
    pub slab_resident_bytes: u64,
    /// Slab instances of the key's plan when the measured passes started: at least the
    /// number of threads, all faulted in by the settling passes, or the first concurrent
    /// measured pass faults a cold one in.
    pub instances_at_start: u64,
    /// Allocations of the profiled pass.
    pub profiled_allocations: u64,
    /// Slab height of the plan (bytes).
    pub plan_height: u64,
    /// Lower bound of the plan (peak live planned bytes).
    pub plan_lower_bound: u64,
    /// Planning time (ms).
    pub plan_millis: f64,
}

/// What one child reports.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CellResult {
    /// The cell.
    pub spec: CellSpec,
    /// Latency of every measured pass, in nanoseconds.
    pub samples_ns: Vec<u64>,
    /// CPU time of the pass's thread in every measured pass (`CLOCK_THREAD_CPUTIME_ID`),
    /// in nanoseconds, in the order of `samples_ns`. Work the pass hands to other threads
    /// (an engine's pool) is not in it.
    #[serde(default)]
    pub cpu_samples_ns: Vec<u64>,
    /// Wall time of the measured phase (all threads), seconds.
    pub elapsed_s: f64,
    /// Checksum of the pass results (hex), identical on every thread.
    pub checksum: String,
    /// Whether every thread computed the same results.
    pub checksum_consistent: bool,
    /// Peak resident set of the process (bytes, from `getrusage`): warm-up, profiling and
    /// planning included.
    pub peak_rss_bytes: u64,
    /// Peak resident set during the measured passes (bytes): the peak counted from their
    /// start (see `sys::reset_peak_rss`); `None` where the peak cannot be reset.
    #[serde(default)]
    pub measured_peak_rss_bytes: Option<u64>,
    /// Minor page faults during the measured phase.
    pub minflt: u64,
    /// Major page faults during the measured phase.
    pub majflt: u64,
    /// Allocations per pass (from the workload model).
    pub allocations_per_pass: u64,
    /// Bytes allocated per pass (from the workload model).
    pub bytes_per_pass: u64,
    /// memomalloc counters (memo cells only).
    pub memo: Option<MemoCounters>,
    /// jemalloc's `opt.oversize_threshold` as read inside the child (jemalloc cells only).
    pub jemalloc_oversize_threshold: Option<u64>,
}
