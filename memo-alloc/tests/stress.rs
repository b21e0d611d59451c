//! A randomized stress test in the spirit of mimalloc's test-stress: rounds of worker
//! threads run passes over random keys (static, run-time and bucket keys) with random
//! allocations, reallocs and frees of 1 B to 4 MiB in op scopes, hand blocks to other
//! threads (freed there), keep blocks past their pass, run passes with helper threads
//! (`current()` entered elsewhere) and async passes on a tokio runtime (`Pass::wrap`),
//! fork now and then (the child runs a few passes and exits), and make the backend fail
//! at random moments (`MemoAlloc::new(Flaky)`). Every block carries a pattern checked
//! when it is freed or moved. A run is determined by its seed, printed at the start and
//! on failure; a watchdog fails a run that makes no progress for 60 s.
//!
//! ```text
//! cargo test -p memo-alloc --test stress                      # a few seconds
//! MEMO_STRESS_SEED=7 MEMO_STRESS_SECS=60 MEMO_STRESS_THREADS=16 \
//!     cargo test -p memo-alloc --release --test stress -- --nocapture
//! cargo test -p memo-alloc --release --test stress -- --ignored --nocapture   # 30 minutes
//! ```
//!
//! It prints operations per second, the resident size after each tenth of the run, and
//! the allocator's counters.

mod common;
mod stress_support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use memo_alloc::MemoAlloc;
use stress_support::block::{CORRUPTIONS, FAILED_REQUESTS};
use stress_support::flaky::Flaky;
use stress_support::passes::{Shared, Worker};
use stress_support::rng::Rng;
use stress_support::settings::Settings;
use stress_support::{transfer, watchdog};

#[global_allocator]
static A: MemoAlloc<Flaky> = MemoAlloc::new(Flaky);

/// Longest round: threads are made afresh each round.
const ROUND: Duration = Duration::from_secs(2);

#[test]
fn stress_short() {
    run(Settings::from_env(3.0, 4));
}

#[test]
#[ignore = "30 minutes; run by hand (see the file's documentation)"]
fn stress_long() {
    run(Settings::from_env(1800.0, 8));
}

fn run(settings: Settings) {
    let line = settings.describe();
    eprintln!("stress: {line}");
    memo_alloc::configure(memo_alloc::Config::from_env().with_max_plans(32));
    watchdog::start(settings.stall_secs, line.clone());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a tokio runtime");
    let shared = Shared {
        runtime: &runtime,
        may_fork: true,
    };
    let start = Instant::now();
    let end = start + settings.length;
    let mut samples = Vec::new();
    let mut child_failures = 0;
    let mut round = 0u64;
    while Instant::now() < end || round == 0 {
        let deadline = (Instant::now() + ROUND).min(end.max(Instant::now()));
        child_failures += run_round(&settings, &shared, round, deadline);
        round += 1;
        sample_rss(&settings, start, &mut samples);
    }
    transfer::drain();
    watchdog::stop();
    report(&settings, start.elapsed(), &samples);
    assert_eq!(
        CORRUPTIONS.load(Ordering::Relaxed),
        0,
        "corrupted blocks: {line}"
    );
    assert_eq!(child_failures, 0, "forked children failed: {line}");
    check_flat(&samples, &line);
}

/// One round: the settings' threads, each with its own stream of the seed, until
/// `deadline`; returns how many forked children failed.
fn run_round(settings: &Settings, shared: &Shared<'_>, round: u64, deadline: Instant) -> u64 {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..settings.threads as u64)
            .map(|t| {
                let rng = Rng::derive(settings.seed, round << 8 | t);
                s.spawn(move || {
                    let mut w = Worker::new(rng, shared);
                    w.one();
                    w.run_until(deadline);
                    w.child_failures
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker"))
            .sum()
    })
}

/// Records (and prints) the resident size once per tenth of the run: `(seconds, bytes)`.
fn sample_rss(settings: &Settings, start: Instant, samples: &mut Vec<(f64, u64)>) {
    let tenth = settings.length.as_secs_f64() / 10.0;
    let t = start.elapsed().as_secs_f64();
    if samples.last().is_none_or(|&(last, _)| t - last >= tenth) {
        let rss = common::rss_bytes();
        samples.push((t, rss));
        eprintln!(
            "stress: {t:.0} s: {} ops, resident {} MiB, {} corruptions",
            watchdog::PROGRESS.load(Ordering::Relaxed),
            rss >> 20,
            CORRUPTIONS.load(Ordering::Relaxed)
        );
    }
}

fn report(settings: &Settings, took: Duration, samples: &[(f64, u64)]) {
    let ops = watchdog::PROGRESS.load(Ordering::Relaxed);
    let s = memo_alloc::stats();
    eprintln!(
        "stress: {} ops in {:.1} s ({:.0} ops/s), {} threads, {} corruptions, {} failed requests",
        ops,
        took.as_secs_f64(),
        ops as f64 / took.as_secs_f64(),
        settings.threads,
        CORRUPTIONS.load(Ordering::Relaxed),
        FAILED_REQUESTS.load(Ordering::Relaxed),
    );
    eprintln!(
        "stress: passes profiled {} replayed {} backend {}; slab hits {} misses {}; plans {} evictions {} abandoned {:?}",
        s.passes_profiled,
        s.passes_replayed,
        s.passes_backend,
        s.slab_hits,
        s.misses,
        s.plans,
        s.evictions,
        s.profiles_abandoned,
    );
    let curve: Vec<String> = samples
        .iter()
        .map(|(t, b)| format!("{t:.0}s:{}MiB", b >> 20))
        .collect();
    eprintln!("stress: resident {}", curve.join(" "));
}

/// Resident memory after warm-up (the first fifth of the run) stays within twice its
/// level plus 256 MiB (blocks of up to 4 MiB are live at random): checked on runs of a
/// minute or more.
fn check_flat(samples: &[(f64, u64)], line: &str) {
    let Some(&(end, _)) = samples.last() else {
        return;
    };
    if end < 60.0 {
        return;
    }
    let after: Vec<u64> = samples
        .iter()
        .filter(|(t, _)| *t >= end / 5.0)
        .map(|&(_, b)| b)
        .collect();
    let warm = after.first().copied().unwrap_or(0);
    let peak = after.iter().copied().max().unwrap_or(0);
    assert!(
        peak <= 2 * warm + (256 << 20),
        "resident memory grew from {warm} B after warm-up to {peak} B: {line}"
    );
}
