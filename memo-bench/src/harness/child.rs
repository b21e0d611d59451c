//! A child process: runs one cell (warm-up, then measured passes on every thread) under the
//! process's global allocator and prints its [`CellResult`] as one JSON line.
//!
//! The phases, each closed by a barrier between the request threads and the main thread:
//! warm-up passes -> the main thread waits for memo's plans -> one settling pass per
//! thread, all inside their passes at once -> the main thread resets the peak RSS and takes
//! the "before" snapshot -> measured passes -> end. The settling pass is the first one
//! replayed from a freshly published plan: it faults the thread's slab in, which later
//! passes never do again, so it is not measured (every allocator runs it, so all run as
//! many passes).

use std::collections::BTreeMap;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use memo_alloc::MissReason;

use super::{sys, CellResult, CellSpec, MemoCounters};
use crate::alloc::{self, Allocator};
use crate::engine::Compute;
use crate::pass_count;
use crate::runner::{Runner, Workload};
use crate::workloads::Spec;

/// Per-thread outcome.
struct ThreadResult {
    /// Wall time of each measured pass (ns).
    samples: Vec<u64>,
    /// The thread's CPU time in each measured pass (ns).
    cpu: Vec<u64>,
    checksum: u64,
}

/// What each request thread runs.
struct Passes {
    /// memo cells: the pass key.
    key: Option<&'static str>,
    /// Op scopes around the ops (memo cells whose workload has them).
    scopes: bool,
    compute: Compute,
    warmup: u64,
    measured: u64,
}

/// The barriers between the phases (see the module's doc).
struct Phases {
    warmed: Barrier,
    settle: Barrier,
    /// Request threads only: every settling pass is inside its pass.
    inside: Barrier,
    settled: Barrier,
    go: Barrier,
    end: Barrier,
}

impl Phases {
    fn new(threads: usize) -> Phases {
        let all = || Barrier::new(threads + 1);
        Phases {
            warmed: all(),
            settle: all(),
            inside: Barrier::new(threads),
            settled: all(),
            go: all(),
            end: all(),
        }
    }
}

/// The process's counters at one moment.
struct Snapshot {
    usage: sys::Usage,
    stats: memo_alloc::Stats,
    counts: pass_count::Counts,
}

impl Snapshot {
    fn take() -> Snapshot {
        Snapshot {
            usage: sys::usage(),
            stats: memo_alloc::stats(),
            counts: pass_count::snapshot(),
        }
    }
}

/// What the main thread saw around the measured passes.
struct Measured {
    threads: Vec<ThreadResult>,
    elapsed_s: f64,
    before: Snapshot,
    /// The peak RSS before the reset (warm-up, profiling, planning, settling).
    warmup_peak: u64,
    /// Whether the peak was reset before the measured passes.
    peak_was_reset: bool,
    /// memo cells: slab instances of the key's plan when the measured passes started.
    instances_at_start: u64,
}

/// Runs the cell; errors when the spec is invalid or names another allocator than the
/// process's.
pub fn run_cell(spec: &CellSpec) -> Result<CellResult, String> {
    let me = alloc::selected();
    if Allocator::parse(&spec.allocator) != Some(me) {
        return Err(format!(
            "cell wants allocator {:?} but this process runs on {:?} (set {}={})",
            spec.allocator,
            me.name(),
            alloc::ALLOCATOR_ENV,
            spec.allocator
        ));
    }
    pass_count::harness_thread();
    let wspec = Spec::parse(&spec.workload)?;
    let workload = Workload::build(&wspec)?;
    if !wspec.repeats_exactly() {
        crate::arena::disable(); // `static` serves only passes that repeat exactly
    }
    let passes = Passes {
        key: me.is_memo().then(|| wspec.key()),
        scopes: me.is_memo() && wspec.scopes(),
        compute: Compute::from_scale(spec.compute),
        warmup: spec.warmup,
        measured: spec.passes,
    };
    let m = measure(&workload, &passes, spec.threads.max(1));
    let after = Snapshot::take();
    let checksum = m.threads[0].checksum;
    let (allocations_per_pass, bytes_per_pass) = workload.allocation_profile();
    Ok(CellResult {
        spec: spec.clone(),
        samples_ns: m.threads.iter().flat_map(|r| r.samples.clone()).collect(),
        cpu_samples_ns: m.threads.iter().flat_map(|r| r.cpu.clone()).collect(),
        elapsed_s: m.elapsed_s,
        checksum: format!("{checksum:016x}"),
        checksum_consistent: m.threads.iter().all(|r| r.checksum == checksum),
        peak_rss_bytes: after.usage.max_rss_bytes.max(m.warmup_peak),
        measured_peak_rss_bytes: m.peak_was_reset.then_some(after.usage.max_rss_bytes),
        minflt: after.usage.minflt - m.before.usage.minflt,
        majflt: after.usage.majflt - m.before.usage.majflt,
        allocations_per_pass,
        bytes_per_pass,
        memo: me.is_memo().then(|| memo_counters(wspec.key(), &m, &after)),
        jemalloc_oversize_threshold: alloc::jemalloc_oversize_threshold(),
    })
}

/// Runs `passes` on `threads` request threads and measures the measured passes.
fn measure(workload: &Workload, passes: &Passes, threads: usize) -> Measured {
    let phases = Phases::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| request_thread(workload, passes, &phases)))
            .collect();
        phases.warmed.wait();
        if passes.key.is_some() {
            // Profiles are planned on memo-alloc's planner thread: the measured passes
            // start once the warm-up's profiles are planned and published.
            memo_alloc::wait_for_plans(Duration::from_secs(300));
        }
        phases.settle.wait();
        phases.settled.wait();
        // The peak so far (warm-up, profiling, planning, settling) is kept before the
        // measured passes' own peak is counted from here.
        let warmup_peak = sys::usage().max_rss_bytes;
        let peak_was_reset = sys::reset_peak_rss();
        let before = Snapshot::take();
        let instances_at_start = passes
            .key
            .and_then(memo_alloc::report)
            .map_or(0, |r| r.slab_instances);
        phases.go.wait();
        let t0 = Instant::now();
        phases.end.wait();
        let elapsed_s = t0.elapsed().as_secs_f64();
        Measured {
            threads: handles
                .into_iter()
                .map(|h| h.join().expect("bench thread panicked"))
                .collect(),
            elapsed_s,
            before,
            warmup_peak,
            peak_was_reset,
            instances_at_start,
        }
    })
}

/// One request thread: warm-up, settling pass, measured passes (timed on the wall clock
/// and on the thread's CPU clock).
fn request_thread(workload: &Workload, passes: &Passes, phases: &Phases) -> ThreadResult {
    pass_count::harness_thread();
    let (key, scopes) = (passes.key, passes.scopes);
    let runner = Runner::new(workload, passes.compute);
    let mut checksum = 0xcbf2_9ce4_8422_2325u64;
    let mut samples = Vec::with_capacity(passes.measured as usize);
    let mut cpu = Vec::with_capacity(passes.measured as usize);
    for p in 0..passes.warmup {
        checksum = mix(checksum, p, runner.run(p, key, scopes));
    }
    phases.warmed.wait();
    phases.settle.wait();
    // Every thread's settling pass holds its instance at once: the measured passes, which
    // run concurrently, then find as many warm instances as threads (were the settling
    // passes one after the other, both could warm the same instance, and the first
    // concurrent measured pass would fault a new one in).
    let c = runner.run_started(passes.warmup, key, scopes, || {
        phases.inside.wait();
    });
    checksum = mix(checksum, passes.warmup, c);
    phases.settled.wait();
    phases.go.wait();
    let first = passes.warmup + 1;
    for p in first..first + passes.measured {
        let (t, cpu0) = (Instant::now(), sys::thread_cpu_ns());
        let c = runner.run(p, key, scopes);
        samples.push(t.elapsed().as_nanos() as u64);
        cpu.push(sys::thread_cpu_ns() - cpu0);
        checksum = mix(checksum, p, c);
    }
    phases.end.wait();
    drop(runner);
    ThreadResult {
        samples,
        cpu,
        checksum,
    }
}

/// memo's counters over the measured passes (`m.before` to `after`) and its plan of `key`.
fn memo_counters(key: &str, m: &Measured, after: &Snapshot) -> MemoCounters {
    let (s0, s1) = (&m.before.stats, &after.stats);
    let replay = s1.replay_allocations - s0.replay_allocations;
    let hits = s1.slab_hits - s0.slab_hits;
    let mut misses = BTreeMap::new();
    for r in MissReason::ALL {
        let n = s1.misses_for(r) - s0.misses_for(r);
        if n > 0 {
            misses.insert(r.name().to_string(), n);
        }
    }
    let rep = memo_alloc::report(key).unwrap_or_default();
    let during = after.counts.since(&m.before.counts);
    let share = |n: u64| if n == 0 { 0.0 } else { hits as f64 / n as f64 };
    MemoCounters {
        slab_share_pass_thread: share(replay),
        slab_share_all_threads: share(during.total()),
        replay_allocations: replay,
        slab_hits: hits,
        pass_thread_allocations: during.pass_thread,
        helper_allocations: during.helper,
        misses_by_reason: misses,
        measured_passes_profiled: s1.passes_profiled - s0.passes_profiled,
        passes_profiled: s1.passes_profiled,
        passes_replayed: s1.passes_replayed,
        passes_backend: s1.passes_backend,
        slab_resident_bytes: s1.slab_resident_bytes,
        instances_at_start: m.instances_at_start,
        profiled_allocations: rep.allocations,
        plan_height: rep.height,
        plan_lower_bound: rep.lower_bound,
        plan_millis: rep.plan_millis,
    }
}

fn mix(h: u64, pass: u64, c: u64) -> u64 {
    (h ^ pass.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c).wrapping_mul(0x100_0000_01b3)
}
