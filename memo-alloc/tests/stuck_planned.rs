//! Keys whose plans are published while other keys' publications evict them: two threads
//! run passes back to back over more keys than the plan cache holds; afterwards, run
//! alone, every key that holds a plan replays it (none is left "planned" and missing
//! every request).

mod common;

use std::hint::black_box;
use std::time::Duration;

use common::{is_child, run_child};
use memo_alloc::{MemoAlloc, PlanState};

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

const KEYS: usize = 64;

/// One pass of `key`: a 64-byte block and a `second`-byte one.
fn small_pass(key: &str, second: usize) {
    let _p = memo_alloc::pass(key);
    let a: Vec<u8> = black_box(Vec::with_capacity(64));
    let b: Vec<u8> = black_box(Vec::with_capacity(second));
    drop(black_box(a));
    drop(black_box(b));
}

/// Two threads run `passes` passes over [`KEYS`] keys (128 or 144 bytes by thread);
/// then each key runs alone, the planner idle between passes: a key that holds a plan
/// must be served by it. Returns the keys that are not, with their reports.
fn churn_then_check(passes: usize) -> Vec<String> {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("k{i}")).collect();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let keys = &keys;
            s.spawn(move || {
                let mut x = t * 7 + 1;
                for _ in 0..passes / 2 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    small_pass(&keys[(x % KEYS as u64) as usize], 128 + 16 * t as usize);
                }
            });
        }
    });
    let settle = || memo_alloc::wait_for_plans(Duration::from_secs(30));
    settle();
    let mut stuck = Vec::new();
    for k in &keys {
        // Enough passes for a diverged plan to be re-profiled and its successor replayed.
        for _ in 0..12 {
            small_pass(k, 128);
            settle();
        }
        let before = memo_alloc::report(k).unwrap();
        for _ in 0..4 {
            small_pass(k, 128);
            settle();
        }
        let r = memo_alloc::report(k).unwrap();
        let replayed = r.passes_replayed - before.passes_replayed;
        let hits = r.slab_hits - before.slab_hits;
        if r.state == PlanState::Planned && replayed > 0 && hits < 2 * replayed {
            stuck.push(format!("{k}: {r:?}"));
        }
    }
    stuck
}

fn child(passes: usize) {
    let stuck = churn_then_check(passes);
    assert!(stuck.is_empty(), "keys stuck:\n{}", stuck.join("\n"));
}

const ENV: [(&str, &str); 2] = [("MEMO_PLANNER", "background"), ("MEMO_MAX_PLANS", "2")];

#[test]
fn keys_replay_after_publications_race_evictions() {
    run_child("child_short", &ENV);
}

#[test]
#[ignore]
fn child_short() {
    if is_child() {
        child(40_000);
    }
}

/// The long form of the report: 10^6 passes (about 10 s optimised).
#[test]
#[ignore]
fn keys_replay_after_a_million_passes_racing_evictions() {
    run_child("child_long", &ENV);
}

#[test]
#[ignore]
fn child_long() {
    if is_child() {
        child(1_000_000);
    }
}
