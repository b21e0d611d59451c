//! A child process: runs one cell (warm-up, then measured passes on every thread) under the
//! process's global allocator and prints its [`CellResult`] as one JSON line.

use std::sync::Barrier;
use std::time::Instant;

use memo_alloc::MissReason;

use super::{sys, CellResult, CellSpec, MemoCounters};
use crate::alloc::{self, Allocator};
use crate::engine::Compute;
use crate::pass_count;
use crate::runner::{Runner, Workload};
use crate::workloads::Spec;

/// Per-thread outcome.
struct ThreadResult {
    samples: Vec<u64>,
    checksum: u64,
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
    let key = me.is_memo().then(|| wspec.key());
    let scopes = me.is_memo() && wspec.scopes();
    let compute = Compute::from_scale(spec.compute);
    let threads = spec.threads.max(1);
    // Warm-up done -> the main thread waits for memo's plans -> one settling pass per
    // thread, all inside their passes at once -> the main thread takes the "before"
    // snapshot -> go -> measured passes -> end. The settling pass is the first one replayed from a freshly published plan: it
    // faults the thread's slab in, which later passes never do again, so it is not
    // measured (every allocator runs it, so all run as many passes).
    let barrier = Barrier::new(threads + 1);
    let settle = Barrier::new(threads + 1);
    let inside = Barrier::new(threads);
    let settled = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);
    let end = Barrier::new(threads + 1);
    let (warmup, passes) = (spec.warmup, spec.passes);

    let mut before = (sys::usage(), memo_alloc::stats(), pass_count::snapshot());
    let mut warmup_peak = 0;
    let mut peak_was_reset = false;
    let mut instances_at_start = 0;
    let mut elapsed = 0.0;
    let results: Vec<ThreadResult> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (workload, barrier, go, end) = (&workload, &barrier, &go, &end);
                let (settle, inside, settled) = (&settle, &inside, &settled);
                s.spawn(move || {
                    pass_count::harness_thread();
                    let runner = Runner::new(workload, compute);
                    let mut checksum = 0xcbf2_9ce4_8422_2325u64;
                    let mut samples = Vec::with_capacity(passes as usize);
                    for p in 0..warmup {
                        let c = runner.run(p, key, scopes);
                        checksum = mix(checksum, p, c);
                    }
                    barrier.wait();
                    settle.wait();
                    // Every thread's settling pass holds its instance at once: the
                    // measured passes, which run concurrently, then find as many warm
                    // instances as threads (without it, one thread's settling pass may
                    // end before another's starts, both warm the same instance, and the
                    // first concurrent measured pass faults a new one in).
                    let c = runner.run_started(warmup, key, scopes, || {
                        inside.wait();
                    });
                    checksum = mix(checksum, warmup, c);
                    settled.wait();
                    go.wait();
                    let first = warmup + 1;
                    for p in first..first + passes {
                        let t = Instant::now();
                        let c = runner.run(p, key, scopes);
                        samples.push(t.elapsed().as_nanos() as u64);
                        checksum = mix(checksum, p, c);
                    }
                    end.wait();
                    drop(runner);
                    ThreadResult { samples, checksum }
                })
            })
            .collect();
        barrier.wait();
        if me.is_memo() {
            // Profiles are planned on memo-alloc's planner thread: the measured passes
            // start once the warm-up's profiles are planned and published.
            memo_alloc::wait_for_plans(std::time::Duration::from_secs(300));
        }
        settle.wait();
        settled.wait();
        // The peak so far (warm-up, profiling, planning, settling) is kept before the
        // measured passes' own peak is counted from here.
        warmup_peak = sys::usage().max_rss_bytes;
        peak_was_reset = sys::reset_peak_rss();
        before = (sys::usage(), memo_alloc::stats(), pass_count::snapshot());
        if let Some(key) = key {
            instances_at_start = memo_alloc::report(key).map_or(0, |r| r.slab_instances);
        }
        go.wait();
        let t0 = Instant::now();
        end.wait();
        elapsed = t0.elapsed().as_secs_f64();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .collect()
    });
    let after = (sys::usage(), memo_alloc::stats(), pass_count::snapshot());

    let checksum = results[0].checksum;
    let consistent = results.iter().all(|r| r.checksum == checksum);
    let (allocations_per_pass, bytes_per_pass) = workload.allocation_profile();
    let memo = me.is_memo().then(|| {
        let (s0, s1) = (&before.1, &after.1);
        let replay = s1.replay_allocations - s0.replay_allocations;
        let hits = s1.slab_hits - s0.slab_hits;
        let mut misses = std::collections::BTreeMap::new();
        for r in MissReason::ALL {
            let m = s1.misses_for(r) - s0.misses_for(r);
            if m > 0 {
                misses.insert(r.name().to_string(), m);
            }
        }
        let rep = memo_alloc::report(wspec.key()).unwrap_or_default();
        let during = after.2.since(&before.2);
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
            instances_at_start,
            profiled_allocations: rep.allocations,
            plan_height: rep.height,
            plan_lower_bound: rep.lower_bound,
            plan_millis: rep.plan_millis,
        }
    });
    Ok(CellResult {
        spec: spec.clone(),
        samples_ns: results
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect(),
        elapsed_s: elapsed,
        checksum: format!("{checksum:016x}"),
        checksum_consistent: consistent,
        peak_rss_bytes: after.0.max_rss_bytes.max(warmup_peak),
        measured_peak_rss_bytes: peak_was_reset.then_some(after.0.max_rss_bytes),
        minflt: after.0.minflt - before.0.minflt,
        majflt: after.0.majflt - before.0.majflt,
        allocations_per_pass,
        bytes_per_pass,
        memo,
        jemalloc_oversize_threshold: alloc::jemalloc_oversize_threshold(),
    })
}

fn mix(h: u64, pass: u64, c: u64) -> u64 {
    (h ^ pass.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c).wrapping_mul(0x100_0000_01b3)
}
