//! The defects of issue 9, each reproduced by a test that failed before its fix: guards
//! dropped out of order, publication racing eviction, pinned slab instances, a failed
//! request in a replayed pass, cyclic keys beyond the plan cache, an endless profile, and
//! a panic inside a replayed pass.
//!
//! Each test runs in a child process (its own configuration and registry), with
//! `MemoAlloc` as the global allocator.

mod common;

use std::hint::black_box;

use common::{is_child, rss_bytes, run_child};
use memo_alloc::{Config, MemoAlloc, MissReason, PlanState};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

fn configure(mut c: Config) {
    c.planner = memo_alloc::Planner::Inline;
    assert!(memo_alloc::configure(c), "configured before the first pass");
}

/// A small pass body: a few buffers of fixed sizes, all freed inside the pass.
fn body(seed: u8) -> u64 {
    let a = black_box(vec![seed; 700]);
    let b = black_box(vec![seed ^ 1; 300]);
    let c = black_box(vec![seed ^ 2; 4096]);
    a[699] as u64 + b[299] as u64 + c[4095] as u64
}

// ---------------------------------------------------------------------------------------
// Defect 4: guards dropped out of order.
// ---------------------------------------------------------------------------------------

#[test]
fn guards_dropped_outer_first_end_every_pass() {
    run_child("child_guard_order", &[]);
}

#[test]
#[ignore = "child process"]
fn child_guard_order() {
    if !is_child() {
        return;
    }
    // Two tasks polled on one thread, each running requests: task 0 opens its pass,
    // task 1 opens its own (a scope of task 0's, by the contract), task 0 finishes first
    // and starts its next request while task 1's guard is alive, then task 1 finishes
    // and starts its next one: guards are dropped while later ones are open.
    const KEYS: [&str; 2] = ["order-0", "order-1"];
    for round in 0..1000u32 {
        let a = memo_alloc::pass(KEYS[0]);
        black_box(body(round as u8));
        let b = memo_alloc::pass(KEYS[1]);
        black_box(body(round as u8 ^ 1));
        drop(a);
        let c = memo_alloc::pass(KEYS[0]);
        black_box(body(round as u8 ^ 2));
        drop(b);
        let d = memo_alloc::pass(KEYS[1]);
        black_box(body(round as u8 ^ 3));
        drop(c);
        black_box(body(round as u8 ^ 4));
        drop(d);
    }
    // "order-1" only ever ran as a scope of an "order-0" pass.
    let inner = memo_alloc::report(KEYS[1]).expect("interned as a scope name");
    assert_eq!(
        (
            inner.passes_profiled,
            inner.passes_replayed,
            inner.passes_backend
        ),
        (0, 0, 0),
        "{inner:?}"
    );
    let r = memo_alloc::report(KEYS[0]).expect("the key ran");
    assert_eq!(r.state, PlanState::Planned, "{r:?}");
    assert!(r.slab_instances <= 1, "instances leaked: {r:?}");
    assert_eq!(r.passes_replayed, 2 * 1000 - 1, "{r:?}");
    // The thread is not left inside a pass, and both keys replay from one instance.
    for key in KEYS {
        for s in 0..4 {
            let _p = memo_alloc::pass(key);
            black_box(body(s));
        }
        let r = memo_alloc::report(key).expect("the key ran");
        assert_eq!(r.state, PlanState::Planned, "{r:?}");
        assert!(r.slab_instances <= 2, "instances leaked: {r:?}");
    }
    for s in 0..3 {
        let _p = memo_alloc::pass("order-after");
        black_box(body(s));
    }
    let r = memo_alloc::report("order-after").expect("a pass of its own");
    assert_eq!((r.passes_profiled, r.passes_replayed), (1, 2), "{r:?}");
}

// ---------------------------------------------------------------------------------------
// Defect 7: a failed request inside a replayed pass.
// ---------------------------------------------------------------------------------------

#[test]
fn a_failed_request_consumes_no_slot() {
    run_child("child_failed_request", &[]);
}

#[test]
#[ignore = "child process"]
fn child_failed_request() {
    if !is_child() {
        return;
    }
    const KEY: &str = "failed-request";
    let mut bufs: Vec<Vec<u8>> = Vec::with_capacity(32);
    for pass in 0..6 {
        let _p = memo_alloc::pass(KEY);
        for i in 0..25usize {
            if i == 3 && pass > 0 {
                let mut v: Vec<u8> = Vec::new();
                assert!(v.try_reserve(1 << 50).is_err(), "2^50 bytes cannot be had");
            }
            bufs.push(black_box(vec![i as u8; 64 + 8 * i]));
        }
        bufs.clear();
    }
    let r = memo_alloc::report(KEY).expect("the key ran");
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    assert_eq!(r.passes_replayed, 5, "{r:?}");
    assert_eq!(r.slab_hits, 5 * 25, "every planned allocation hit: {r:?}");
    assert_eq!(r.misses_by_reason.total(), 0, "{r:?}");
}

// ---------------------------------------------------------------------------------------
// Defect 8: keys used round-robin beyond the plan cache.
// ---------------------------------------------------------------------------------------

#[test]
fn cyclic_keys_beyond_max_plans_keep_a_working_set() {
    run_child("child_cyclic_keys", &[]);
}

#[test]
#[ignore = "child process"]
fn child_cyclic_keys() {
    if !is_child() {
        return;
    }
    configure(Config::default().with_max_plans(4));
    const KEYS: [&str; 5] = ["cyc-0", "cyc-1", "cyc-2", "cyc-3", "cyc-4"];
    for i in 0..500usize {
        let _p = memo_alloc::pass(KEYS[i % KEYS.len()]);
        black_box(body(i as u8));
    }
    let s = memo_alloc::stats();
    assert!(
        s.passes_replayed >= 350,
        "a working set of 4 keys should replay: {s:?}"
    );
    assert!(s.passes_profiled <= 10, "{s:?}");
}

// ---------------------------------------------------------------------------------------
// Defect 9: a profiled pass that never ends.
// ---------------------------------------------------------------------------------------

#[test]
fn an_endless_profile_is_bounded() {
    run_child(
        "child_endless_profile",
        &[("MEMO_MAX_PROFILE_EVENTS", "100000")],
    );
}

#[test]
#[ignore = "child process"]
fn child_endless_profile() {
    if !is_child() {
        return;
    }
    let before = rss_bytes();
    let mut grown = 0;
    {
        let _p = memo_alloc::pass("endless");
        for i in 0..1_000_000u32 {
            black_box(vec![i as u8; 48]);
            if i % 100_000 == 0 {
                grown = grown.max(rss_bytes().saturating_sub(before));
            }
        }
        grown = grown.max(rss_bytes().saturating_sub(before));
    }
    assert!(
        grown < 24 << 20,
        "recording 10^6 pairs past a bound of 10^5 events grew {} MiB",
        grown >> 20
    );
}

// ---------------------------------------------------------------------------------------
// Defect 10: a panic inside a replayed pass.
// ---------------------------------------------------------------------------------------

#[test]
fn a_panicking_pass_is_not_divergence() {
    run_child("child_panic", &[("RUST_BACKTRACE", "1")]);
}

#[test]
#[ignore = "child process"]
fn child_panic() {
    if !is_child() {
        return;
    }
    configure(Config::default().with_miss_window(1));
    const KEY: &str = "panicky";
    let run = |panic: bool| {
        let _p = memo_alloc::pass(KEY);
        black_box(body(1));
        if panic {
            panic!("an injected panic (expected in this test's output)");
        }
        black_box(body(2));
    };
    for _ in 0..3 {
        run(false);
    }
    assert!(std::panic::catch_unwind(|| run(true)).is_err());
    for _ in 0..3 {
        run(false);
    }
    let r = memo_alloc::report(KEY).expect("the key ran");
    assert_eq!(
        r.passes_profiled, 1,
        "the panic made the key re-profile: {r:?}"
    );
    assert_eq!(r.state, PlanState::Planned, "{r:?}");
    assert_eq!(
        r.misses_by_reason.total(),
        0,
        "the unwinding allocations counted as misses: {r:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Defect 6: one long-lived small allocation per pass.
// ---------------------------------------------------------------------------------------

#[test]
fn a_block_kept_past_each_pass_does_not_pin_the_pool() {
    run_child("child_pinned", &[]);
}

#[test]
#[ignore = "child process"]
fn child_pinned() {
    if !is_child() {
        return;
    }
    const KEY: &str = "pinned";
    const PASSES: usize = 320;
    const SMALL: usize = 64;
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(PASSES);
    let mut small: Vec<Vec<u8>> = Vec::with_capacity(SMALL);
    let mut late = None;
    for i in 0..PASSES {
        if i == PASSES - 40 {
            late = memo_alloc::report(KEY);
        }
        let _p = memo_alloc::pass(KEY);
        let big = black_box(vec![i as u8; 1 << 20]);
        for j in 0..SMALL {
            small.push(black_box(vec![j as u8; 64]));
        }
        black_box(body(i as u8));
        drop(big);
        // Pass i keeps its (i % 64)-th small block, one the profile saw freed in the pass.
        kept.push(small.swap_remove(1 + i % (SMALL - 1)));
        small.clear();
    }
    let r = memo_alloc::report(KEY).expect("the key ran");
    let late = late.expect("report");
    let no_slab =
        r.misses_by_reason.get(MissReason::NoSlab) - late.misses_by_reason.get(MissReason::NoSlab);
    assert_eq!(no_slab, 0, "the pool ran out: {r:?}");
    assert!(
        r.slab_hits - late.slab_hits >= 40 * 4,
        "late passes still replay: {r:?}"
    );
    assert!(r.slab_instances <= 16, "instances: {r:?}");
    let s = memo_alloc::stats();
    assert!(
        s.slab_resident_bytes < 16 << 20,
        "{} MiB of slabs resident for {} KiB kept: {s:?}",
        s.slab_resident_bytes >> 20,
        kept.len() * 64 / 1024
    );
}

// ---------------------------------------------------------------------------------------
// Defect 5: publication racing eviction.
// ---------------------------------------------------------------------------------------

#[test]
fn every_key_in_use_gets_replayed_after_churn() {
    run_child("child_publication_race", &[]);
}

#[test]
#[ignore = "child process"]
fn child_publication_race() {
    if !is_child() {
        return;
    }
    configure(
        Config::default()
            .with_max_plans(4)
            .with_strategy(memo_planner::OffsetStrategy::GreedyBySize),
    );
    static KEYS: [&str; 64] = {
        const NAMES: [&str; 64] = [
            "race-00", "race-01", "race-02", "race-03", "race-04", "race-05", "race-06", "race-07",
            "race-08", "race-09", "race-10", "race-11", "race-12", "race-13", "race-14", "race-15",
            "race-16", "race-17", "race-18", "race-19", "race-20", "race-21", "race-22", "race-23",
            "race-24", "race-25", "race-26", "race-27", "race-28", "race-29", "race-30", "race-31",
            "race-32", "race-33", "race-34", "race-35", "race-36", "race-37", "race-38", "race-39",
            "race-40", "race-41", "race-42", "race-43", "race-44", "race-45", "race-46", "race-47",
            "race-48", "race-49", "race-50", "race-51", "race-52", "race-53", "race-54", "race-55",
            "race-56", "race-57", "race-58", "race-59", "race-60", "race-61", "race-62", "race-63",
        ];
        NAMES
    };
    let passes: usize = std::env::var("RACE_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                for _ in 0..passes {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let _p = memo_alloc::pass(KEYS[(x % 64) as usize]);
                    black_box(vec![x as u8; 256]);
                }
            });
        }
    });
    // Every key, used on its own now, gets replayed again: within a bounded number of
    // passes (it must first be used more than the plans it evicts), it replays steadily.
    let mut stuck = Vec::new();
    for key in KEYS {
        let mut streak = 0;
        for _ in 0..300 {
            let before = memo_alloc::report(key).expect("used").passes_replayed;
            {
                let _p = memo_alloc::pass(key);
                black_box(vec![1u8; 256]);
            }
            let replayed = memo_alloc::report(key).expect("used").passes_replayed > before;
            streak = if replayed { streak + 1 } else { 0 };
            if streak == 10 {
                break;
            }
        }
        if streak < 10 {
            stuck.push(format!("{key}: {:?}", memo_alloc::report(key)));
        }
    }
    assert!(
        stuck.is_empty(),
        "keys never replayed again:\n{}",
        stuck.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Reclamation: plans replaced or evicted are freed once unused.
// ---------------------------------------------------------------------------------------

#[test]
fn replaced_and_evicted_plans_are_freed() {
    run_child("child_reclamation", &[]);
}

#[test]
#[ignore = "child process"]
fn child_reclamation() {
    if !is_child() {
        return;
    }
    configure(Config::default().with_max_plans(2).with_miss_window(1));
    const KEYS: [&str; 8] = [
        "recl-0", "recl-1", "recl-2", "recl-3", "recl-4", "recl-5", "recl-6", "recl-7",
    ];
    // Phases of two keys each: every phase's keys evict the previous, now idle, plans.
    for phase in KEYS.chunks(2) {
        for i in 0..20usize {
            let _p = memo_alloc::pass(phase[i % 2]);
            black_box(body(i as u8));
        }
    }
    // A key whose replays diverge is re-profiled: its old plan is replaced.
    for i in 0..6usize {
        let _p = memo_alloc::pass(KEYS[7]);
        black_box(vec![0u8; 100 + 4096 * i]);
    }
    let s = memo_alloc::stats();
    assert!(s.evictions >= 6, "{s:?}");
    let r = memo_alloc::report(KEYS[7]).unwrap();
    assert!(r.passes_profiled >= 2, "{r:?}");
    assert_eq!(s.retired_plans, 0, "retired plans were not freed: {s:?}");
    assert!(s.slabs <= 2, "instances of freed plans remain: {s:?}");
    assert_eq!(s.plans, 2, "{s:?}");
}

// ---------------------------------------------------------------------------------------
// Plans that converge (issue 10.2).
// ---------------------------------------------------------------------------------------

/// A first pass's one-time state (lazily built, as a process's first forward builds it):
/// 30 allocations of 300-329 bytes, freed before the pass goes on.
fn one_time_state() {
    let s: Vec<Vec<u8>> = (0..30).map(|i| vec![2; 300 + i]).collect();
    black_box(&s);
}

/// A pass of `n` buffers whose sizes depend on `shape` (as a bucket's shapes do).
fn shaped(n: usize, shape: usize) -> u64 {
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(4);
    let mut sum = 0;
    for i in 0..n {
        let size = 512 + 64 * (i % 5) + 32 * shape;
        kept.push(black_box(vec![i as u8; size]));
        if kept.len() == 4 {
            sum += kept.iter().map(|v| v[0] as u64).sum::<u64>();
            kept.clear();
        }
    }
    sum
}

#[test]
fn jittering_sizes_stop_missing_after_a_few_profiles() {
    run_child("child_jitter", &[]);
}

#[test]
#[ignore = "child process"]
fn child_jitter() {
    if !is_child() {
        return;
    }
    const KEY: &str = "jitter";
    let mut late = None;
    for pass in 0..80usize {
        if pass == 60 {
            late = memo_alloc::report(KEY);
        }
        let _p = memo_alloc::pass(KEY);
        black_box(shaped(40, pass % 2)); // sizes alternate between passes
    }
    let r = memo_alloc::report(KEY).unwrap();
    let late = late.unwrap();
    assert!(r.passes_profiled <= 4, "{r:?}");
    let missed: u64 = r.misses_by_reason.total() - late.misses_by_reason.total();
    assert_eq!(missed, 0, "converged: {r:?}");
    assert_eq!(r.slab_hits - late.slab_hits, 20 * r.allocations, "{r:?}");
}

#[test]
fn a_threads_one_off_allocations_do_not_reprofile() {
    run_child("child_one_off", &[]);
}

#[test]
#[ignore = "child process"]
fn child_one_off() {
    if !is_child() {
        return;
    }
    const KEY: &str = "one-off";
    let run = |extra: usize| {
        let _p = memo_alloc::pass(KEY);
        // A new thread's first pass initialises state of its own: extra allocations.
        let init: Vec<Vec<u8>> = (0..extra).map(|i| vec![1; 100 + i]).collect();
        black_box(shaped(40, 0));
        drop(init);
    };
    for _ in 0..10 {
        run(0);
    }
    std::thread::spawn(move || run(40)).join().unwrap();
    for _ in 0..10 {
        run(0);
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_profiled, 1, "{r:?}");
}

/// The planned slots of a first pass's one-time allocations, skipped by every pass after
/// it, re-profile the key after its first replayed pass, not after a divergence window.
#[test]
fn skipped_one_time_slots_re_profile_after_one_replayed_pass() {
    run_child("child_skipped_window", &[]);
}

#[test]
#[ignore = "child process"]
fn child_skipped_window() {
    if !is_child() {
        return;
    }
    const KEY: &str = "skipped-window";
    let mut first = true;
    let mut profiled = Vec::new();
    for _ in 0..6 {
        {
            let _p = memo_alloc::pass(KEY);
            if std::mem::take(&mut first) {
                one_time_state();
            }
            black_box(shaped(60, 0));
        }
        assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
            30
        )));
        profiled.push(memo_alloc::report(KEY).unwrap().passes_profiled);
    }
    // Pass 0 is profiled, pass 1 replays and skips the 30 slots (a third of the plan),
    // pass 2 is profiled again, passes 3-5 replay the clean plan.
    assert_eq!(profiled, [1, 1, 2, 2, 2, 2]);
}

/// A pass takes a free instance that holds its memory before one that gave it back: when
/// a re-profile begins, the plan's idle instances give their memory back while another
/// thread's pass holds its own; were that thread's next pass to take the first free
/// instance, one without memory, it would fault a second copy of the slab in beside its
/// own.
#[test]
fn a_pass_takes_a_warm_instance_before_a_shed_one() {
    run_child("child_warm_instance_first", &[]);
}

#[test]
#[ignore = "child process"]
fn child_warm_instance_first() {
    use std::sync::{Arc, Barrier};
    if !is_child() {
        return;
    }
    const KEY: &str = "warm-first";
    // A pass's work: 256 KiB of a slab's pages, then (when `one_time`, a first pass's
    // state) 30 allocations later passes do not make, then small slots.
    let work = |one_time: bool| {
        let big = black_box(vec![1u8; 256 << 10]);
        if one_time {
            one_time_state();
        }
        black_box((big, shaped(60, 0)));
    };
    let pass = |one_time: bool| {
        let _p = memo_alloc::pass(KEY);
        work(one_time);
    };
    pass(true); // profiled with one-time allocations: replays skip half the slots
    let step = Arc::new(Barrier::new(2));
    let other = {
        let step = step.clone();
        std::thread::spawn(move || {
            step.wait(); // [1] the main thread holds the first instance
            let held = memo_alloc::pass(KEY); // the second instance
            work(false);
            step.wait(); // [2]
            step.wait(); // [3] the main thread's re-profile began: the first instance shed
            drop(held);
            let _p = memo_alloc::pass(KEY);
            work(false);
            let resident = memo_alloc::stats().slab_resident_bytes;
            step.wait(); // [4]
            resident
        })
    };
    let first = memo_alloc::pass(KEY);
    work(false);
    step.wait(); // [1]
    step.wait(); // [2]
    drop(first); // the plan's first replayed pass skipped slots: the key is re-profiled
    let profile = memo_alloc::pass(KEY);
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.state, PlanState::Profiling, "{r:?}");
    step.wait(); // [3]
    step.wait(); // [4]
    drop(profile);
    let resident = other.join().unwrap();
    let one = r.height + r.lane_bytes;
    assert!(
        resident < one + one / 2,
        "{resident} bytes resident in slabs, an instance has {one}"
    );
}

/// The divergence window belongs to one plan. While a re-profile is planned, the key's
/// passes still replay the old plan and still skip its one-time slots; those passes must
/// not count against the new plan, which replays cleanly (they once closed its first
/// window as diverged and re-profiled the key a third time).
#[test]
fn passes_of_the_old_plan_do_not_re_profile_the_new_one() {
    run_child("child_old_plan_window", &[("MEMO_PLANNER", "background")]);
}

#[test]
#[ignore = "child process"]
fn child_old_plan_window() {
    if !is_child() {
        return;
    }
    const KEY: &str = "old-plan-window";
    let wait = || {
        assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
            30
        )))
    };
    let pass = |one_time: bool| {
        let _p = memo_alloc::pass(KEY);
        if one_time {
            one_time_state();
        }
        black_box(shaped(60, 0));
    };
    pass(true); // profiled with one-time allocations
    wait();
    pass(false); // skips the one-time slots: the key is re-profiled
    memo_alloc::testing::pause_planner(true);
    pass(false); // profiled again; its plan waits in the queue
    assert_eq!(memo_alloc::report(KEY).unwrap().passes_profiled, 2);
    for _ in 0..4 {
        pass(false); // replays the old plan, skipping its one-time slots
    }
    memo_alloc::testing::pause_planner(false);
    wait();
    for _ in 0..9 {
        pass(false); // the new plan: nothing skipped, nothing missed
    }
    wait();
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(
        (r.state, r.passes_profiled),
        (PlanState::Planned, 2),
        "{r:?}"
    );
}

#[test]
fn a_first_passs_one_time_allocations_drop_out_of_the_plan() {
    run_child("child_one_time", &[]);
}

#[test]
#[ignore = "child process"]
fn child_one_time() {
    if !is_child() {
        return;
    }
    const KEY: &str = "one-time";
    let mut state: Option<Vec<Vec<u8>>> = None;
    let mut late = None;
    for pass in 0..40usize {
        if pass == 30 {
            late = memo_alloc::report(KEY);
        }
        let _p = memo_alloc::pass(KEY);
        // The first pass builds lazily initialised state, which it frees again (a cache
        // filled and trimmed, say): allocations the later passes do not make.
        if state.is_none() {
            one_time_state();
            state = Some(Vec::new());
        }
        black_box(shaped(60, 0));
    }
    let r = memo_alloc::report(KEY).unwrap();
    let late = late.unwrap();
    assert!(r.passes_profiled <= 3, "{r:?}");
    let missed: u64 = r.misses_by_reason.total() - late.misses_by_reason.total();
    assert_eq!(missed, 0, "{r:?}");
    assert_eq!(r.slab_hits - late.slab_hits, 10 * r.allocations, "{r:?}");
}
