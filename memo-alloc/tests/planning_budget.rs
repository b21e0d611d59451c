//! The allocator plans within a memory budget: `best` as the planner thread runs it must
//! not build the exact search's quadratic tables for a pass of thousands of buffers that
//! live together (a BERT-base pass: 2,483 buffers, 90 MB of tables for nothing, kept by
//! the backend's arena afterwards).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use memo_planner::{offsets_lower_bound, validate_offsets, Buffer, OffsetStrategy, Problem};

/// Counts the bytes live and their peak.
struct Peak;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to System; only counts.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Peak = Peak;

/// An encoder-like pass: a few long-lived buffers, and a long chain of activations each
/// alive for a few steps next to dozens of buffers alive for the whole pass (so that most
/// pairs of buffers overlap in time).
fn encoder_like(n: usize) -> Problem {
    let mut buffers = Vec::with_capacity(n);
    let long = n / 2;
    let end = 2 * n as u64;
    for i in 0..long {
        buffers.push(
            Buffer::new(
                format!("w{i}"),
                i as u64,
                end - i as u64,
                8 + 8 * (i as u64 % 5),
            )
            .with_align(16),
        );
    }
    for i in long..n {
        let t = 2 * i as u64 - long as u64;
        buffers
            .push(Buffer::new(format!("a{i}"), t, t + 6, 1024 * (1 + i as u64 % 3)).with_align(64));
    }
    Problem::new(buffers).expect("a valid problem")
}

#[test]
fn planning_a_large_pass_needs_memory_linear_in_it() {
    let p = encoder_like(2500);
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let plan = memo_alloc::testing::plan_offsets(OffsetStrategy::Best, &p);
    let peak = PEAK.load(Ordering::Relaxed) - before;
    let h = validate_offsets(&p, &plan).expect("a valid plan");
    let lb = offsets_lower_bound(&p);
    let greedy = OffsetStrategy::GreedyBySize.plan(&p).height(&p);
    eprintln!(
        "height {h} (lower bound {lb}, greedy-by-size {greedy}), peak {peak} bytes of planning"
    );
    assert!(h <= greedy, "height {h} vs greedy-by-size {greedy}");
    assert!(
        peak < 16 << 20,
        "planning 2,500 buffers took {peak} bytes at its peak"
    );
}
