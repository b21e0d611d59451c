//! End to end, with `MemoAlloc` as this test binary's global allocator: a pass is
//! profiled, then replayed from a slab, and diverging passes stay correct.

mod common;

use memo_alloc::{MemoAlloc, MissReason, PlanState};

#[global_allocator]
static ALLOC: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

/// One "inference": a few ops allocating, filling and freeing buffers; returns a checksum
/// and an output that escapes the pass.
fn infer(key: &'static str, scale: usize) -> (u64, Vec<u32>) {
    let _pass = memo_alloc::pass(key);
    let mut sum = 0u64;
    let a: Vec<u32> = {
        let _op = memo_alloc::op("embed");
        (0..1000 * scale as u32).collect()
    };
    let b: Vec<u32> = {
        let _op = memo_alloc::op("matmul");
        let tmp: Vec<u32> = a.iter().map(|x| x * 3).collect();
        let shape: Vec<usize> = std::hint::black_box(vec![1, 2, 3]);
        sum += shape.iter().sum::<usize>() as u64;
        tmp.iter().map(|x| x + 1).collect()
    };
    drop(a);
    let out: Vec<u32> = {
        let _op = memo_alloc::op("relu");
        b.iter().map(|x| x / 2).collect()
    };
    sum += out.iter().map(|&x| x as u64).sum::<u64>();
    (sum, out)
}

#[test]
fn profile_then_replay_from_the_slab() {
    common::inline_planner();
    let (first, _) = infer("e2e", 1);
    let before = memo_alloc::stats();
    for _ in 0..5 {
        let (sum, out) = infer("e2e", 1);
        assert_eq!(sum, first);
        assert_eq!(out.len(), 1000);
    }
    let after = memo_alloc::stats();
    assert!(
        after.passes_replayed >= before.passes_replayed + 5,
        "{before:?} {after:?} {:?}",
        memo_alloc::report("e2e")
    );
    let r = memo_alloc::report("e2e").expect("report");
    assert_eq!(
        r.passes_profiled, 1,
        "escapes alone never trigger re-profiling"
    );
    assert_eq!(r.state, PlanState::Planned);
    assert!(r.passes_profiled >= 1);
    // Three vectors of 4,000 bytes take slots; the shape, of 24, a slot or (with lanes)
    // a lane cell.
    assert_eq!(r.planned + r.lane_requests, 4, "{r:?}");
    assert!(r.planned >= 3, "{r:?}");
    assert!(r.escaping >= 1, "the output escapes: {r:?}");
    assert!(r.height >= r.lower_bound && r.lower_bound > 0);
    assert!(r.slab_hits >= 5 * (r.planned + r.lane_requests), "{r:?}");
    assert!(r.misses_by_reason.get(MissReason::Escaping) >= 5);
}

#[test]
fn larger_inputs_miss_and_stay_correct() {
    common::inline_planner();
    let (first, _) = infer("e2e-grow", 1);
    let (big, out) = infer("e2e-grow", 3);
    assert_ne!(first, big);
    assert_eq!(out.len(), 3000);
    let expected: u64 = 6 + (0..3000u64).map(|x| (x * 3).div_ceil(2)).sum::<u64>();
    assert_eq!(big, expected);
    let r = memo_alloc::report("e2e-grow").unwrap();
    assert!(r.misses_by_reason.get(MissReason::TooLarge) > 0, "{r:?}");
}

#[test]
fn the_suite_runs_over_the_backend_it_names() {
    let want = std::env::var(common::BACKEND_ENV).unwrap_or_default();
    let want = if want.is_empty() { "system" } else { &want };
    assert_eq!(common::Backend::name(), want);
}
