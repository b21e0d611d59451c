//! A backend out of memory never takes the process down: the caller gets null, a profile
//! whose bookkeeping cannot grow is abandoned (and counted), the process goes on, and the
//! key is profiled and replayed once memory is back.
//!
//! `MemoAlloc` over a backend that fails on command is this binary's global allocator, so
//! the allocator's own bookkeeping meets the same failing backend as the program.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{is_child, run_child};
use memo_alloc::{AbandonReason, MemoAlloc, PlanState};

/// `System`, failing every request of at least `FAIL_FROM` bytes while `FAILING` is set.
struct Failing;

static FAILING: AtomicBool = AtomicBool::new(false);
static FAIL_FROM: AtomicUsize = AtomicUsize::new(0);

fn fails(size: usize) -> bool {
    FAILING.load(Ordering::Relaxed) && size >= FAIL_FROM.load(Ordering::Relaxed)
}

// SAFETY: forwards to `System`, or returns null (allowed by the `GlobalAlloc` contract).
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if fails(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if fails(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if fails(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: MemoAlloc<Failing> = MemoAlloc::new(Failing);

fn fail_from(bytes: usize) {
    FAIL_FROM.store(bytes, Ordering::SeqCst);
    FAILING.store(true, Ordering::SeqCst);
}

fn recover() {
    FAILING.store(false, Ordering::SeqCst);
}

/// A small heap block (one allocation per block).
type Small = Box<[u8; 24]>;

/// Many small blocks, all freed; `v` has room for them.
#[allow(clippy::vec_box)] // the boxes are the point: one allocation each
fn small_blocks(v: &mut Vec<Small>, n: usize) -> u64 {
    for i in 0..n {
        v.push(Box::new([i as u8; 24]));
    }
    let sum = v.iter().map(|b| b[0] as u64).sum();
    v.clear();
    sum
}

#[test]
fn the_recorder_failing_to_grow_abandons_the_profile() {
    run_child("child_recorder_oom", &[]);
}

#[test]
#[ignore = "child process"]
fn child_recorder_oom() {
    if !is_child() {
        return;
    }
    const KEY: &str = "oom-recorder";
    let mut v = Vec::with_capacity(6_000);
    {
        let _p = memo_alloc::pass(KEY);
        // Small blocks still succeed; the recorder's buffers (tens of KiB and more) fail.
        fail_from(16 << 10);
        black_box(small_blocks(&mut v, 6_000));
        // The program's own large request fails, and it is told so.
        let mut big: Vec<u8> = Vec::new();
        assert!(big.try_reserve(1 << 20).is_err(), "the caller gets null");
        recover();
    }
    let s = memo_alloc::stats();
    assert_eq!(
        s.profiles_abandoned[AbandonReason::OutOfMemory as usize],
        1,
        "{s:?}"
    );
    // Memory is back: the key is profiled (after its backoff) and replayed.
    for _ in 0..8 {
        let _p = memo_alloc::pass(KEY);
        black_box(small_blocks(&mut v, 6_000));
    }
    let r = memo_alloc::report(KEY).expect("the key ran");
    assert_eq!(r.state, PlanState::Planned, "{r:?}");
    assert!(r.passes_replayed >= 1 && r.slab_hits >= 6_000, "{r:?}");
}

#[test]
fn passes_start_and_end_with_every_allocation_failing() {
    run_child("child_total_oom", &[]);
}

#[test]
#[ignore = "child process"]
fn child_total_oom() {
    if !is_child() {
        return;
    }
    // Set up first (the configuration and the first pass), then fail everything.
    {
        let _p = memo_alloc::pass("oom-setup");
    }
    let mut ok = 0;
    fail_from(0);
    for key in ["oom-total-a", "oom-total-b", "oom-setup"] {
        for _ in 0..3 {
            let _p = memo_alloc::pass(key);
            let layout = Layout::from_size_align(64, 8).unwrap();
            // SAFETY: non-zero size; freed below if non-null.
            let p = unsafe { A.alloc(layout) };
            if !p.is_null() {
                ok += 1;
                // SAFETY: allocated above with `layout`.
                unsafe { A.dealloc(p, layout) };
            }
        }
    }
    let _ = memo_alloc::stats();
    let _ = memo_alloc::report("oom-total-a");
    recover();
    assert_eq!(ok, 0, "every allocation failed, none aborted");
    // Memory is back: everything works.
    let mut v = Vec::with_capacity(100);
    for _ in 0..3 {
        let _p = memo_alloc::pass("oom-after");
        black_box(small_blocks(&mut v, 100));
    }
    let r = memo_alloc::report("oom-after").expect("the key ran");
    assert_eq!((r.passes_profiled, r.passes_replayed), (1, 2), "{r:?}");
}

/// Lanes of 256 bytes, plans made inline: the environment of the block-take children.
const LANES_INLINE: &[(&str, &str)] = &[("MEMO_LANES", "256"), ("MEMO_PLANNER", "inline")];

/// A pass's work for the block-take children: a 64 KiB slot and a 40-byte lane cell.
fn a_slot_and_a_cell() {
    let big = black_box(vec![1u8; 64 << 10]);
    let small = black_box(vec![2u8; 40]);
    drop((big, small));
}

#[test]
fn a_slab_instance_short_of_its_lane_block_gives_its_slots_block_back() {
    run_child("child_lane_block_oom", LANES_INLINE);
}

/// A new instance takes its slots' block, then its lane block: when the region has
/// memory for the first only, the pass runs on the backend and the first block goes back
/// to the idle list (the instance is never published), for the next pass to take.
#[test]
#[ignore = "child process"]
fn child_lane_block_oom() {
    if !is_child() {
        return;
    }
    let run = || {
        let _p = memo_alloc::pass("lane-block-oom");
        a_slot_and_a_cell();
    };
    run(); // profiled and planned
    assert_eq!(memo_alloc::stats().idle_blocks, 0);
    memo_alloc::testing::fail_block_takes_after(Some(1)); // the slots' block, not the lanes'
    run();
    memo_alloc::testing::fail_block_takes_after(None);
    let r = memo_alloc::report("lane-block-oom").expect("planned");
    assert_eq!(
        r.slab_hits, 0,
        "no instance: the pass ran on the backend: {r:?}"
    );
    assert_eq!(
        memo_alloc::stats().idle_blocks,
        1,
        "the slots' block taken went back to the idle list"
    );
    run();
    let r = memo_alloc::report("lane-block-oom").expect("planned");
    assert!(r.slab_hits >= 2, "the next pass replays: {r:?}");
    assert_eq!(memo_alloc::stats().idle_blocks, 0, "from the idle block");
}

#[test]
fn an_async_pass_short_of_its_lane_block_after_an_await_goes_on_on_the_backend() {
    run_child("child_unpark_oom", LANES_INLINE);
}

/// An async pass gives both its blocks back at an await (nothing live); when it comes
/// back and the region has memory for its slots' block only, the rest of the pass runs
/// on the backend (`no_slab` misses), nothing aborts, and the next pass replays whole.
#[test]
#[ignore = "child process"]
fn child_unpark_oom() {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    if !is_child() {
        return;
    }
    // Polls the request: its first part, an await, its second part; `between` runs at
    // the await.
    let request = |between: &dyn Fn()| {
        let mut yielded = false;
        let mut fut = pin!(
            memo_alloc::Pass::new("unpark-oom").wrap(std::future::poll_fn(|_| {
                a_slot_and_a_cell();
                if !yielded {
                    yielded = true;
                    return Poll::Pending;
                }
                Poll::Ready(())
            }))
        );
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        between();
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    };
    let no_slab = || memo_alloc::stats().misses_for(memo_alloc::MissReason::NoSlab);
    request(&|| {}); // profiled
    request(&|| {}); // replayed
    let (parks, missed) = (memo_alloc::stats().parks, no_slab());
    // The slots' block comes back, the lane block does not.
    request(&|| memo_alloc::testing::fail_block_takes_after(Some(1)));
    memo_alloc::testing::fail_block_takes_after(None);
    assert!(
        memo_alloc::stats().parks > parks,
        "the pass parked at its await"
    );
    assert_eq!(no_slab() - missed, 2, "its second part ran on the backend");
    let before = memo_alloc::report("unpark-oom").expect("planned");
    request(&|| {});
    let after = memo_alloc::report("unpark-oom").expect("planned");
    assert_eq!(after.slab_hits - before.slab_hits, 4, "{after:?}");
    assert_eq!(no_slab() - missed, 2, "and the next pass replays whole");
}
