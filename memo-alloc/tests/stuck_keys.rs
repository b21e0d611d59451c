//! Keys that must not stay without replay: a plan file that is not a valid plan is
//! rejected, and a key whose replays keep missing is profiled again within a bounded
//! number of passes, wherever its plan came from (see `registry::divergence`).

mod common;

use std::hint::black_box;

use common::{inline_planner, is_child, run_child, scratch};
use memo_alloc::trace::{PlanFile, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT};
use memo_alloc::{MemoAlloc, PlanRejection};

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

/// Slots of the overlapping plans.
const SLOTS: u32 = 32_000;
/// The size of their requests and slots.
const SIZE: usize = 1024;

/// A plan of `key` whose `SLOTS` slots all lie at offset 0, each with `lifetime(i)`.
fn overlapping_plan(key: &str, lifetime: impl Fn(u32) -> Option<[u64; 2]>) -> PlanFile {
    PlanFile {
        format: PLAN_FORMAT.into(),
        version: FORMAT_VERSION,
        key: key.into(),
        strategy: "test".into(),
        height: SIZE as u64,
        lower_bound: 0,
        naive: 0,
        scopes: vec![TraceScope {
            id: 0,
            parent: None,
            name: key.into(),
            occurrence: 0,
            enter: None,
            exit: None,
        }],
        slots: (0..SLOTS)
            .map(|i| PlanSlot {
                scope: 0,
                ordinal: i,
                size: SIZE as u64,
                min_size: None,
                align: 16,
                offset: Some(0),
                lifetime: lifetime(i),
            })
            .collect(),
        lanes: Default::default(),
    }
}

/// Writes `plan` into a fresh plan directory named `name`.
fn plan_dir(name: &str, plan: &PlanFile) -> String {
    let dir = scratch(name);
    let path = dir.join(format!("{}.1.plan.json", plan.key));
    std::fs::write(path, serde_json::to_vec(plan).unwrap()).unwrap();
    dir.to_str().unwrap().to_owned()
}

/// One pass of `key` holding `SLOTS` blocks of `SIZE` bytes at once.
fn holding_pass(key: &str) {
    let _p = memo_alloc::pass(key);
    let blocks: Vec<Vec<u8>> = (0..SLOTS).map(|_| black_box(vec![1u8; SIZE])).collect();
    black_box(&blocks);
}

#[test]
fn a_plan_file_whose_slots_overlap_while_live_is_rejected() {
    let plan = overlapping_plan("overlap", |i| Some([i as u64, (SLOTS + i) as u64]));
    let dir = plan_dir("overlapping", &plan);
    let stderr = run_child("child_overlapping_file", &[("MEMO_PLAN_DIR", &dir)]);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("memomalloc:"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning line: {stderr}");
    assert!(
        warnings[0].contains("rejected plan file") && warnings[0].contains("live together"),
        "{}",
        warnings[0]
    );
}

#[test]
#[ignore]
fn child_overlapping_file() {
    if !is_child() {
        return;
    }
    holding_pass("overlap");
    let s = memo_alloc::stats();
    assert_eq!(s.plan_files_loaded, 0);
    assert_eq!(s.plan_files_rejected_for(PlanRejection::Overlapping), 1);
    assert_eq!(s.plan_files_rejected_total(), 1);
    // Its key is profiled afresh, and its own plan replays.
    let r = memo_alloc::report("overlap").unwrap();
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    holding_pass("overlap");
    let r = memo_alloc::report("overlap").unwrap();
    assert_eq!(r.slab_hits, SLOTS as u64 + 1, "{r:?}");
}

#[test]
fn a_plan_file_whose_slots_share_addresses_one_after_another_loads() {
    let plan = overlapping_plan("in_turn", |i| Some([i as u64, i as u64 + 1]));
    let dir = plan_dir("in_turn", &plan);
    run_child("child_in_turn_file", &[("MEMO_PLAN_DIR", &dir)]);
}

#[test]
#[ignore]
fn child_in_turn_file() {
    if !is_child() {
        return;
    }
    {
        let _p = memo_alloc::pass("in_turn");
        for _ in 0..SLOTS {
            black_box(vec![1u8; SIZE]);
        }
    }
    let s = memo_alloc::stats();
    assert_eq!(s.plan_files_loaded, 1);
    assert_eq!(s.plan_files_rejected_total(), 0);
    let r = memo_alloc::report("in_turn").unwrap();
    assert_eq!((r.passes_profiled, r.slab_hits), (0, SLOTS as u64), "{r:?}");
}

/// The bound of `registry::divergence`: a key whose replayed passes miss more than half
/// of their requests is profiled again at the latest at its seventh replayed pass after
/// the plan was installed (two windows of three, then the next pass).
const REPROFILED_WITHIN: u64 = 7;

#[test]
fn a_loaded_plan_that_keeps_missing_is_reprofiled_within_the_bound() {
    // No lifetimes: nothing says the slots live together, so the file is loaded.
    let plan = overlapping_plan("stuck", |_| None);
    let dir = plan_dir("stuck", &plan);
    run_child("child_stuck_file", &[("MEMO_PLAN_DIR", &dir)]);
}

#[test]
#[ignore]
fn child_stuck_file() {
    if !is_child() {
        return;
    }
    let mut replayed_before_profile = None;
    for _ in 0..REPROFILED_WITHIN + 2 {
        holding_pass("stuck");
        let r = memo_alloc::report("stuck").unwrap();
        if r.passes_profiled > 0 && replayed_before_profile.is_none() {
            replayed_before_profile = Some(r.passes_replayed);
        }
    }
    assert_eq!(memo_alloc::stats().plan_files_loaded, 1);
    let replayed = replayed_before_profile.expect("the key was profiled again");
    assert!(
        replayed < REPROFILED_WITHIN,
        "profiled after {replayed} replays"
    );
    let r = memo_alloc::report("stuck").unwrap();
    let before = r.slab_hits;
    holding_pass("stuck");
    let r = memo_alloc::report("stuck").unwrap();
    assert_eq!(r.slab_hits - before, SLOTS as u64 + 1, "{r:?}");
}

/// One pass of `key` in shape `shape`: 64 blocks held at once, sizes far apart from one
/// shape to the next, so that a plan of one shape matches nothing of another.
fn shaped_pass(key: &str, shape: usize) {
    let _p = memo_alloc::pass(key);
    let base = 8192 << (2 * (shape % 2));
    let blocks: Vec<Vec<u8>> = (0..64)
        .map(|i| black_box(vec![1u8; base + 64 * i]))
        .collect();
    black_box(&blocks);
}

/// From the first pass of a new shape, the same bound counts at most one more window
/// (the one the change fell in): nine replayed passes, the profiled one, one replay.
const REPLAYS_AFTER_A_CHANGE: u64 = 11;

/// What the passes of a key and its shape classes (`<key>#<n>`) did, summed.
#[derive(Clone, Copy, Debug, Default)]
struct Summed {
    hits: u64,
    misses: u64,
    /// Misses for want of a slab: in a classified pass, its requests before its class is
    /// decided.
    no_slab: u64,
    profiled: u64,
}

/// [`Summed`] over `key` and its shape classes; with `max_classes` of 1, `key` alone.
fn summed(key: &str) -> Summed {
    let class = format!("{key}#");
    let keys = memo_alloc::keys();
    let mut sum = Summed::default();
    for k in keys.iter().filter(|k| *k == key || k.starts_with(&class)) {
        let r = memo_alloc::report(k).unwrap();
        sum.hits += r.slab_hits;
        sum.misses += r.misses_by_reason.total();
        sum.no_slab += r.misses_by_reason.no_slab;
        sum.profiled += r.passes_profiled;
    }
    sum
}

/// Runs the passes of [`shaped_pass`] under `key`, its shape changing 12 times, more than
/// the re-profiles of a key that still hits (8) are rate-limited to; calls `check` with
/// the shape and what the last pass of that shape did.
fn changing_shapes(key: &str, check: impl Fn(usize, Summed)) {
    for shape in 0..12 {
        let mut last = Summed::default();
        for _ in 0..REPLAYS_AFTER_A_CHANGE {
            let before = summed(key);
            shaped_pass(key, shape);
            let after = summed(key);
            last = Summed {
                hits: after.hits - before.hits,
                misses: after.misses - before.misses,
                no_slab: after.no_slab - before.no_slab,
                profiled: after.profiled - before.profiled,
            };
        }
        check(shape, last);
    }
}

#[test]
fn a_key_whose_shape_keeps_changing_is_reprofiled_every_time() {
    // Without shape classes: one plan for the key, re-profiled at every change.
    run_child("child_shape_changes", &[("MEMO_MAX_CLASSES", "1")]);
}

#[test]
#[ignore]
fn child_shape_changes() {
    if !is_child() {
        return;
    }
    let key = "shape_changes";
    changing_shapes(key, |shape, last| {
        assert_eq!(
            (last.hits, last.misses),
            (65, 0), // the blocks and the vector holding them
            "shape {shape}: the last pass replays the new shape: {last:?}"
        );
    });
    let r = memo_alloc::report(key).unwrap();
    assert_eq!(r.shape_classes, 0, "{r:?}");
    assert_eq!(r.passes_profiled, 12, "a profile per change: {r:?}");
}

#[test]
fn a_key_whose_shape_keeps_changing_replays_each_shape_from_its_class() {
    inline_planner();
    let key = "shape_classes";
    changing_shapes(key, |shape, last| {
        // Every block from its shape's slab. The vector holding them, alike in both
        // shapes, comes first: once the key is classed, its passes ask for it before
        // they know their class, on the backend.
        let lead = u64::from(shape > 0);
        assert_eq!(
            (last.hits, last.misses, last.no_slab),
            (65 - lead, lead, lead),
            "shape {shape}: the last pass replays its shape: {last:?}"
        );
    });
    let sum = summed(key);
    assert_eq!(sum.profiled, 2, "one profile per shape: {sum:?}");
    assert_eq!(memo_alloc::report(key).unwrap().shape_classes, 1);
}

/// A plan of `key` whose lanes take requests up to 256 bytes but have no cell: every
/// small request misses with "overlap" (its class and every class above are full).
fn cell_less_plan(key: &str) -> PlanFile {
    let mut plan = overlapping_plan(key, |_| None);
    plan.slots.clear();
    plan.height = 0;
    plan.lanes.max = 256;
    plan
}

/// The bound for a plan that serves nothing: one window of three replayed passes, then
/// the profiled pass.
const REPROFILED_WHEN_NOTHING_HITS: u64 = 4;

#[test]
fn a_plan_whose_every_request_misses_on_overlap_is_reprofiled_after_one_window() {
    let dir = plan_dir("cell_less", &cell_less_plan("cell_less"));
    run_child("child_cell_less", &[("MEMO_PLAN_DIR", &dir)]);
}

#[test]
#[ignore]
fn child_cell_less() {
    if !is_child() {
        return;
    }
    let small_pass = || {
        let _p = memo_alloc::pass("cell_less");
        let blocks: Vec<Box<[u8; 96]>> = (0..4).map(|_| black_box(Box::new([1u8; 96]))).collect();
        black_box(&blocks);
    };
    for _ in 0..REPROFILED_WHEN_NOTHING_HITS - 1 {
        small_pass();
    }
    let r = memo_alloc::report("cell_less").unwrap();
    assert_eq!(memo_alloc::stats().plan_files_loaded, 1);
    assert_eq!(r.slab_hits, 0, "{r:?}");
    assert_eq!(
        r.misses_by_reason.overlap,
        r.misses_by_reason.total(),
        "{r:?}"
    );
    assert_eq!(r.state, memo_alloc::PlanState::Replan, "{r:?}");
    small_pass();
    let r = memo_alloc::report("cell_less").unwrap();
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    small_pass();
    let r2 = memo_alloc::report("cell_less").unwrap();
    assert_eq!(r2.slab_hits - r.slab_hits, 5, "{r2:?}");
}
