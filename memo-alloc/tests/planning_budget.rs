//! The allocator plans within a memory budget: `best` as the planner thread runs it must
//! not build the exact search's quadratic tables for a pass of thousands of buffers that
//! live together (tens of MB of tables for nothing, kept by the backend's arena
//! afterwards), nor the portfolio's best-fit tables (about 700 bytes per buffer) for a
//! pass that one sweep in allocation order plans at the bound, nor best-fit indexes of
//! tens of entries per buffer for a long pass of short-lived buffers.

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

/// The counters are the process's: every test of this binary runs alone, whole (a test
/// allocating beside another's measurement counted its bytes in the other's peak: 55 MB
/// in one CI run, when the by-size test planned during the encoder's measurement).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes at the peak of `f`, above what was live when it started. The caller holds
/// [`one_at_a_time`].
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - before)
}

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
    let _one = one_at_a_time();
    let p = encoder_like(2500);
    let (plan, peak) = peak_of(|| memo_alloc::testing::plan_offsets(OffsetStrategy::Best, &p));
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

/// A transformer-like pass of `layers` layers: each layer's output lives into the next
/// layer, and its temporaries nest inside it (as a stack), so allocation order is a good
/// order and one sweep plans the pass at its lower bound.
fn layered(layers: u64) -> Problem {
    let mut buffers = Vec::new();
    for i in 0..layers {
        let t = 10 * i;
        let mut push = |name: &str, lower: u64, upper: u64, size: u64, align: u64| {
            buffers.push(Buffer::new(format!("{name}{i}"), lower, upper, size).with_align(align));
        };
        push("out", t + 8, t + 19, 65536, 64);
        push("q", t, t + 7, 16384 * (1 + i % 3), 64);
        push("k", t + 1, t + 6, 16384, 64);
        push("scores", t + 2, t + 5, 4096 + 64 * (i % 7), 64);
        push("max", t + 3, t + 4, 64 + 16 * (i % 3), 16);
    }
    Problem::new(buffers).expect("a valid problem")
}

#[test]
fn a_pass_the_sweep_plans_at_the_bound_skips_the_portfolio() {
    let _one = one_at_a_time();
    let p = layered(400);
    let lb = offsets_lower_bound(&p);
    let sweep = OffsetStrategy::GreedyInOrder.plan(&p).height(&p);
    assert_eq!(sweep, lb, "the fixture: one sweep plans it at the bound");
    let (plan, peak) = peak_of(|| memo_alloc::testing::plan_offsets(OffsetStrategy::Best, &p));
    assert_eq!(validate_offsets(&p, &plan), Ok(lb));
    // The bound and the sweep take about 85 bytes per buffer; the portfolio about 860
    // (1.7 MB here).
    let per_buffer = peak / p.len();
    assert!(
        per_buffer <= 128,
        "planning {} buffers took {peak} bytes ({per_buffer} per buffer)",
        p.len()
    );
}

/// A pass whose allocation order fragments one sweep: each step's small buffer outlives
/// the larger one allocated just before it, so the next, larger buffer does not fit the
/// hole and goes on top; placing by size first plans it at the bound.
fn fragmenting(steps: u64) -> Problem {
    let mut buffers = Vec::new();
    for i in 0..steps {
        let t = 4 * i;
        let mut push = |name: &str, lower: u64, upper: u64, size: u64| {
            buffers.push(Buffer::new(format!("{name}{i}"), lower, upper, size).with_align(64));
        };
        push("x", t, t + 2, 4096 + 64 * (i % 5));
        push("s", t + 1, t + 9, 64);
        push("y", t + 2, t + 4, 8192 + 64 * (i % 3));
    }
    Problem::new(buffers).expect("a valid problem")
}

/// A pass one sweep plans far above the bound and one best-fit pass by size plans at it
/// is planned by that pass, not the portfolio (which spends many times as long, while the
/// key's passes run on the backend).
#[test]
fn a_pass_best_fit_by_size_plans_at_the_bound_skips_the_portfolio() {
    let _one = one_at_a_time();
    let p = fragmenting(800);
    let lb = offsets_lower_bound(&p);
    let sweep = OffsetStrategy::GreedyInOrder.plan(&p).height(&p);
    assert!(
        sweep > lb + lb / 10,
        "the fixture: one sweep fragments it ({sweep} vs {lb})"
    );
    let (plan, route) = memo_alloc::testing::plan_offsets_routed(OffsetStrategy::Best, &p);
    assert_eq!(validate_offsets(&p, &plan), Ok(lb));
    assert_eq!(route, "by-size");
    let (_, route) = memo_alloc::testing::plan_offsets_routed(OffsetStrategy::Best, &layered(40));
    assert_eq!(
        route, "sweep",
        "a pass the sweep plans at the bound needs nothing more"
    );
}

/// A pass of `stages` stages of a convolutional network's wide activations: in each,
/// five outputs of one size and two of sizes 1% and 2% larger (channel counts padded
/// differently), each alive across the next one's start, the last three together (the
/// stage's lower bound). Both greedy passes stack a smaller output above a larger one
/// and land about a third above the bound; strip-packing plans it at the bound. A
/// recording of candle's EfficientNet-B0 (33,000 buffers) holds such stages.
fn wide_stages(stages: u64) -> Problem {
    const LIVES: [(u64, u64, u64); 7] = [
        (0, 76, 4096),
        (43, 71, 4096),
        (56, 104, 4096),
        (88, 99, 4096),
        (94, 213, 4096),
        (116, 203, 4160),
        (133, 193, 4224),
    ];
    let mut buffers = Vec::new();
    for s in 0..stages {
        let t = 300 * s;
        for (i, &(lower, upper, size)) in LIVES.iter().enumerate() {
            let b = Buffer::new(format!("s{s}b{i}"), t + lower, t + upper, size);
            buffers.push(b.with_align(64));
        }
    }
    Problem::new(buffers).expect("a valid problem")
}

/// A pass both greedy passes plan far above the bound and strip-packing plans at it is
/// planned by strip-packing, not the portfolio (twice its time and memory on
/// EfficientNet-B0's recording, while the key's passes run on the backend).
#[test]
fn a_pass_strip_packing_plans_at_the_bound_skips_the_portfolio() {
    let _one = one_at_a_time();
    let p = wide_stages(100);
    let lb = offsets_lower_bound(&p);
    for greedy in [OffsetStrategy::GreedyInOrder, OffsetStrategy::GreedyBySize] {
        let h = greedy.plan(&p).height(&p);
        assert!(
            h > lb + lb / 10,
            "the fixture: {greedy:?} lands far above the bound ({h} vs {lb})"
        );
    }
    let (plan, route) = memo_alloc::testing::plan_offsets_routed(OffsetStrategy::Best, &p);
    assert_eq!(validate_offsets(&p, &plan), Ok(lb));
    assert_eq!(route, "strip-packing");
    let (_, route) =
        memo_alloc::testing::plan_offsets_routed(OffsetStrategy::Best, &fragmenting(100));
    assert_eq!(route, "by-size", "a pass by size at the bound comes first");
}

/// A long pass of short-lived buffers, as a model's operators make them one after another:
/// `n` buffers of 257 B to 4 KiB, each freed once 64 later ones were allocated, and a
/// 1 MiB buffer every 1,000 allocations that lives for 4,000. Their address ranges seldom
/// merge in a best-fit pass's index (each range is added to tens of its lists).
fn sliding_window(n: usize) -> Problem {
    let mut buffers: Vec<Buffer> = Vec::with_capacity(n + n / 1000 + 1);
    let mut window = std::collections::VecDeque::new();
    let mut large = std::collections::VecDeque::new();
    let mut t = 0u64;
    let start = |buffers: &mut Vec<Buffer>, size: u64, t: &mut u64| {
        buffers.push(Buffer::new(String::new(), *t, u64::MAX, size));
        *t += 1;
        buffers.len() - 1
    };
    for i in 0..n {
        let size = 257 + (i as u64 * 7919) % 3840;
        window.push_back(start(&mut buffers, size, &mut t));
        if window.len() > 64 {
            buffers[window.pop_front().unwrap()].upper = t;
            t += 1;
        }
        if i % 1000 == 0 {
            large.push_back(start(&mut buffers, 1 << 20, &mut t));
            if large.len() > 4 {
                buffers[large.pop_front().unwrap()].upper = t;
                t += 1;
            }
        }
    }
    for b in &mut buffers {
        b.upper = b.upper.min(t);
    }
    Problem::unnamed(buffers).expect("a valid problem")
}

/// Such a pass is planned without best-fit passes (a pass by size took 40 MB over 60,000
/// buffers here, the portfolio's two at once more), by strip-packing.
#[test]
fn a_long_pass_of_short_lived_buffers_is_planned_without_best_fit_indexes() {
    let _one = one_at_a_time();
    let p = sliding_window(60_000);
    let ((plan, route), peak) =
        peak_of(|| memo_alloc::testing::plan_offsets_routed(OffsetStrategy::Best, &p));
    let h = validate_offsets(&p, &plan).expect("a valid plan");
    let lb = offsets_lower_bound(&p);
    eprintln!("height {h} (lower bound {lb}), route {route}, peak {peak} bytes of planning");
    assert_eq!(route, "strip-packing");
    assert!(
        peak < 24 << 20,
        "planning {} buffers took {peak} bytes at its peak",
        p.len()
    );
    assert!(h <= lb + lb / 100, "height {h} vs the bound {lb}");
}
