//! Lanes: requests of at most `Config::lanes` bytes replay from size-class cells of the
//! slab, not from planned slots (see the lanes of memo-alloc's `replay` module).
//!
//! Every block goes through the shadow checker's registry: a block overlapping any live
//! block fails, and each block's pattern is verified before it is freed, also on another
//! thread.

#[path = "shadow_support/mod.rs"]
mod shadow_support;

mod common;

use std::sync::{Mutex, MutexGuard, Once};

use memo_alloc::{Config, MemoAlloc, MissReason, PassReport, PlanState, Planner};
use shadow_support::{alloc as talloc, checked::Checked, free as tfree, Alloc, Block};

#[global_allocator]
static GLOBAL: Checked = Checked;

static A: Alloc = MemoAlloc::new(shadow_support::CountingBackend::new());

/// Lanes of up to 256 bytes, plans made inline; one test at a time (they read counters).
fn setup() -> MutexGuard<'static, ()> {
    static ONCE: Once = Once::new();
    static SERIAL: Mutex<()> = Mutex::new(());
    ONCE.call_once(|| {
        let c = Config::from_env()
            .with_planner(Planner::Inline)
            .with_lanes(256);
        assert!(memo_alloc::configure(c), "configured before the first pass");
    });
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn missed(d: &(PassReport, PassReport), reason: MissReason) -> u64 {
    d.1.misses_by_reason.get(reason) - d.0.misses_by_reason.get(reason)
}

fn all_missed(d: &(PassReport, PassReport)) -> u64 {
    MissReason::ALL.iter().map(|&m| missed(d, m)).sum()
}

/// A pass of a model's shape: many small buffers (1 to 256 bytes, alignments up to 64)
/// among larger ones, freed in an order of their own, some live at once; returns the
/// data's checksum and the small block that outlives the pass.
fn model_pass(label: u64) -> (u64, Block) {
    let mut sum = 0u64;
    let mut live: Vec<Block> = Vec::new();
    for i in 0..600u64 {
        let size = 1 + (i * 37 % 256) as usize;
        let align = 1 << (i % 7);
        live.push(talloc(&A, size, align, i % 5 == 0, label + i));
        if i % 50 == 0 {
            live.push(talloc(
                &A,
                4096 + 64 * i as usize,
                64,
                false,
                label + 10_000 + i,
            ));
        }
        if live.len() > 40 {
            let k = (i as usize * 7) % live.len();
            sum = sum.wrapping_add(tfree(&A, live.swap_remove(k)));
        }
    }
    let kept = talloc(&A, 48, 16, false, label + 99_999);
    for b in live {
        sum = sum.wrapping_add(tfree(&A, b));
    }
    (sum, kept)
}

#[test]
fn small_requests_replay_from_lane_cells() {
    let _s = setup();
    const KEY: &str = "lanes/model";
    let run = |label| {
        let _p = memo_alloc::pass(KEY);
        model_pass(label)
    };
    let (sum, kept) = run(0); // profiled
    let first = tfree(&A, kept);
    let report = memo_alloc::report(KEY).expect("planned");
    assert_eq!(report.state, PlanState::Planned, "{report:?}");
    // The 600 small requests and the kept one take no slot: 12 large ones do. The kept
    // one escaped.
    assert_eq!(report.planned, 12, "{report:?}");
    assert_eq!(
        (report.escaping, report.lane_requests),
        (1, 600),
        "{report:?}"
    );
    for run_no in 1..4 {
        let before = A.backend().counts();
        let d = common::delta(KEY, || {
            let (s, kept) = run(0);
            assert_eq!(s, sum, "run {run_no}: the data read back");
            // The kept block outlives the pass, freed on another thread.
            let b = std::thread::spawn(move || tfree(&A, kept)).join().unwrap();
            assert_eq!(b, first);
        });
        assert_eq!(
            (
                common::hits(&d),
                missed(&d, MissReason::Escaping),
                all_missed(&d)
            ),
            (612, 1, 1),
            "run {run_no}: every request from the slab but the escaping one: {:?}",
            d.1
        );
        // The backend served the escaping request alone.
        assert_eq!(A.backend().counts().since(&before).fresh(), 1);
    }
}

/// The profile names each escaping lane request by its op and its count among the op's
/// lane requests: replay sends exactly that request to the backend, in whichever op it
/// is, unless a request of another class stands at its count (the pass went another
/// way: it takes a cell as usual, and so does the escaping one after it).
#[test]
fn an_escaping_lane_request_is_found_by_its_op_and_count() {
    let _s = setup();
    const KEY: &str = "lanes/escape-count";
    // In op "a": temporaries of 24 bytes (32-byte cells), then the kept 48 (64-byte
    // cells); before it at the pass's root, small temporaries of its class.
    let run = |extra_in_a: usize, label: u64| -> Block {
        let _p = memo_alloc::pass(KEY);
        for i in 0..5 {
            tfree(&A, talloc(&A, 48, 8, false, label + i));
        }
        let _op = memo_alloc::op("a");
        for i in 0..2 + extra_in_a {
            tfree(&A, talloc(&A, 24, 8, false, label + 10 + i as u64));
        }
        talloc(&A, 48, 8, false, label + 99)
    };
    let kept = run(0, 0); // profiled: op a's lane request #2 escapes
    tfree(&A, kept);
    let report = memo_alloc::report(KEY).expect("planned");
    assert_eq!(
        (report.escaping, report.lane_requests),
        (1, 7),
        "{report:?}"
    );
    let d = common::delta(KEY, || {
        tfree(&A, run(0, 100));
    });
    assert_eq!(
        (
            common::hits(&d),
            missed(&d, MissReason::Escaping),
            all_missed(&d)
        ),
        (7, 1, 1),
        "the kept request goes to the backend: {:?}",
        d.1
    );
    // One more temporary in op a: its #2 is a 24-byte request, not the kept one's class.
    let d = common::delta(KEY, || {
        tfree(&A, run(1, 200));
    });
    assert_eq!(
        (common::hits(&d), all_missed(&d)),
        (9, 0),
        "a request of another class at the escape's count takes a cell: {:?}",
        d.1
    );
    // In step again: the escape list holds (its cursor starts afresh each pass).
    let d = common::delta(KEY, || {
        tfree(&A, run(0, 300));
    });
    assert_eq!(
        (common::hits(&d), missed(&d, MissReason::Escaping)),
        (7, 1),
        "{:?}",
        d.1
    );
}

/// A replaced plan whose instance holds only a live cell (a small block that outlived a
/// replayed pass, unseen by the profile, kept by the program) keeps its lane block
/// resident until the cell is freed, not the slab: the slots' block goes back to the OS
/// when the plan is retired.
#[test]
fn a_retired_instance_held_by_a_cell_keeps_only_its_lane_block() {
    let _s = setup();
    const KEY: &str = "lanes/retired";
    const LARGE: usize = 1 << 20;
    // `extra` large requests after the first, which the plan does not know.
    let run = |extra: u64, keep: bool| -> Option<Block> {
        let _p = memo_alloc::pass(KEY);
        let big = talloc(&A, LARGE, 64, false, 1); // writes every page of its slot
        let more: Vec<Block> = (0..extra)
            .map(|i| talloc(&A, LARGE, 64, false, 3 + i))
            .collect();
        let small = talloc(&A, 40, 8, false, 2);
        for b in more {
            tfree(&A, b);
        }
        tfree(&A, big);
        if keep {
            return Some(small);
        }
        tfree(&A, small);
        None
    };
    assert!(run(0, false).is_none()); // profiled
    let kept = run(0, true).expect("kept"); // replayed: the small block in its cell
                                            // Passes that make two more large requests, as the plan's first one (no shape of
                                            // their own): most of their bytes miss, the key is profiled again and its plan
                                            // replaced.
    for _ in 0..12 {
        assert!(run(2, false).is_none());
    }
    let report = memo_alloc::report(KEY).expect("planned");
    assert!(report.passes_profiled >= 2, "re-profiled: {report:?}");
    let retired = memo_alloc::testing::retired_resident_bytes();
    assert!(
        retired <= 64 << 10,
        "a retired slab held by a cell keeps its lane block's pages only: {retired} bytes"
    );
    tfree(&A, kept);
}

/// A request the backend fails was never made, as far as the pass's profile knows: when
/// it is the escaping lane request, that request is still to come, and the program's
/// next request of its op takes its count (and goes to the backend).
#[test]
fn a_failed_escaping_request_gives_its_count_back() {
    let _s = setup();
    const KEY: &str = "lanes/failed-escape";
    let run = |fail: bool, label: u64| -> Block {
        let _p = memo_alloc::pass(KEY);
        for i in 0..3 {
            tfree(&A, talloc(&A, 24, 8, false, label + i));
        }
        if fail {
            A.backend().fail_next(1);
            let layout = std::alloc::Layout::from_size_align(48, 8).unwrap();
            // SAFETY: a non-zero size; the backend fails it, so nothing is to be freed.
            assert!(unsafe { std::alloc::GlobalAlloc::alloc(&A, layout) }.is_null());
        }
        talloc(&A, 48, 8, false, label + 99) // escapes
    };
    tfree(&A, run(false, 0)); // profiled: lane request #3 escapes
    let mut kept = None;
    let d = common::delta(KEY, || kept = Some(run(true, 100)));
    tfree(&A, kept.expect("kept"));
    assert_eq!(
        (
            common::hits(&d),
            missed(&d, MissReason::Escaping),
            all_missed(&d)
        ),
        (3, 1, 1),
        "the retried request is the escaping one: {:?}",
        d.1
    );
}

#[test]
fn a_class_full_sends_its_requests_to_the_backend() {
    let _s = setup();
    const KEY: &str = "lanes/full";
    let run = |n: usize| {
        let _p = memo_alloc::pass(KEY);
        let blocks: Vec<Block> = (0..n).map(|i| talloc(&A, 24, 8, false, i as u64)).collect();
        blocks
            .into_iter()
            .map(|b| tfree(&A, b))
            .fold(0u64, u64::wrapping_add)
    };
    run(100); // profiled: 100 cells of 32 bytes
    let d = common::delta(KEY, || {
        run(130);
    });
    assert_eq!(
        (
            common::hits(&d),
            missed(&d, MissReason::Overlap),
            all_missed(&d)
        ),
        (100, 30, 30),
        "{:?}",
        d.1
    );
    // The cells came back: the next pass of the profiled shape hits every request.
    let d = common::delta(KEY, || {
        run(100);
    });
    assert_eq!((common::hits(&d), all_missed(&d)), (100, 0), "{:?}", d.1);
}

/// A pass of a smaller shape moves requests down a class: the class below overflows
/// while the one above has cells to spare, and its requests take those.
#[test]
fn a_full_class_borrows_the_cells_of_the_classes_above() {
    let _s = setup();
    const KEY: &str = "lanes/borrow";
    // All live at once: `small` blocks of 24 bytes (32-byte cells), `large` of 100 (128).
    let run = |small: usize, large: usize| {
        let _p = memo_alloc::pass(KEY);
        let blocks: Vec<Block> = (0..small + large)
            .map(|i| talloc(&A, if i < small { 24 } else { 100 }, 8, false, i as u64))
            .collect();
        blocks
            .into_iter()
            .map(|b| tfree(&A, b))
            .fold(0u64, u64::wrapping_add)
    };
    run(100, 50); // profiled: 100 cells of 32 bytes, 50 of 128
    let d = common::delta(KEY, || {
        run(150, 0);
    });
    assert_eq!((common::hits(&d), all_missed(&d)), (150, 0), "{:?}", d.1);
    // Past every cell of the classes above too: the excess misses.
    let d = common::delta(KEY, || {
        run(160, 0);
    });
    assert_eq!(
        (common::hits(&d), missed(&d, MissReason::Overlap)),
        (150, 10),
        "{:?}",
        d.1
    );
    // A larger class never takes the smaller one's cells.
    let d = common::delta(KEY, || {
        run(0, 60);
    });
    assert_eq!((common::hits(&d), all_missed(&d)), (50, 10), "{:?}", d.1);
}

#[test]
fn lane_cells_read_zero_when_asked_and_grow_through_the_backend() {
    let _s = setup();
    const KEY: &str = "lanes/zero-grow";
    let run = || {
        let _p = memo_alloc::pass(KEY);
        // Dirty a cell, free it, and ask for zeroed memory of the same class.
        let dirty = talloc(&A, 200, 8, false, 1);
        let mut sum = tfree(&A, dirty);
        // The shadow checker asserts zeros.
        let zero = talloc(&A, 200, 8, true, 2);
        // Grows within its 256-byte cell in place, then past it.
        let (b, d1) = shadow_support::realloc(&A, zero, 250);
        let (b, d2) = shadow_support::realloc(&A, b, 1000);
        sum = sum.wrapping_add(d1).wrapping_add(d2);
        sum.wrapping_add(tfree(&A, b))
    };
    let want = run();
    let d = common::delta(KEY, || assert_eq!(run(), want));
    assert_eq!(
        (
            common::hits(&d),
            missed(&d, MissReason::ReallocGrow),
            all_missed(&d)
        ),
        (2, 1, 1),
        "{:?}",
        d.1
    );
}

/// A small chain that outgrows its cell by `realloc` (a `Vec` pushed to) moves to a cell
/// of the larger class, its bytes with it, as the profile counted it: no request of the
/// pass goes to the backend. Past the lanes it moves to the backend.
#[test]
fn a_chain_that_outgrows_its_cell_moves_to_a_larger_one() {
    let _s = setup();
    const KEY: &str = "lanes/grow";
    let run = |label: u64, last: usize| {
        let _p = memo_alloc::pass(KEY);
        let mut sum = 0u64;
        for i in 0..20 {
            // 8 -> 16 -> ... -> 256 bytes, the way a vector doubles, all live together.
            let mut b = talloc(&A, 8, 8, false, label + i);
            let mut sizes = vec![16, 32, 64, 128, 256];
            sizes.push(last);
            for size in sizes {
                let (grown, d) = shadow_support::realloc(&A, b, size);
                b = grown;
                sum = sum.wrapping_add(d);
            }
            let other = talloc(&A, 40, 8, false, label + 100 + i);
            sum = sum.wrapping_add(tfree(&A, other));
            sum = sum.wrapping_add(tfree(&A, b));
        }
        sum
    };
    let want = run(0, 256); // profiled
    let d = common::delta(KEY, || assert_eq!(run(0, 256), want));
    assert_eq!(
        (common::hits(&d), all_missed(&d)),
        (40, 0),
        "every request and every growth from the lanes: {:?}",
        d.1
    );
    // Past the lanes (1 KiB), the chain moves to the backend at its last growth.
    let d = common::delta(KEY, || {
        run(0, 1024);
    });
    assert_eq!(
        (common::hits(&d), missed(&d, MissReason::ReallocGrow)),
        (40, 20),
        "{:?}",
        d.1
    );
}

/// Polls a future with no await point to its end.
fn poll<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("no await point"),
    }
}

/// An async pass whose small block outlives it lends its slots' block at once and keeps
/// its lane block (below); once the small block is freed, the next async pass end of any
/// plan lends the lane block to the idle list too, where it serves every plan, instead of
/// leaving it with its plan until that plan's next pass.
#[test]
fn an_idle_instance_lends_its_lane_block_once_its_cells_are_freed() {
    let _s = setup();
    const KEY: &str = "lanes/lend";
    let request = |label: u64, keep: bool| {
        memo_alloc::Pass::new(KEY).wrap(async move {
            let large = talloc(&A, 64 * 1024, 64, false, label);
            let small = talloc(&A, 40, 8, false, label + 1);
            tfree(&A, large);
            if keep {
                return Some(small);
            }
            tfree(&A, small);
            None
        })
    };
    let other = || {
        memo_alloc::Pass::new("lanes/lend-other").wrap(async move {
            tfree(&A, talloc(&A, 64 * 1024, 64, false, 7));
        })
    };
    assert!(poll(request(0, false)).is_none()); // profiled
    poll(other()); // profiled
    let kept = poll(request(10, true)).expect("kept"); // replayed: a cell live at its end
    let held = memo_alloc::report(KEY)
        .expect("planned")
        .slab_resident_bytes;
    // The 64 KiB slot's pages went with the slots' block; the cell's page stays.
    assert!(
        held > 0 && held < 64 * 1024,
        "the instance keeps its lane block, not its slots': {held} bytes"
    );
    tfree(&A, kept);
    poll(other()); // another plan's pass ends
    let report = memo_alloc::report(KEY).expect("planned");
    assert_eq!(
        report.slab_resident_bytes, 0,
        "the block went to the idle list: {report:?}"
    );
}

#[test]
fn an_async_pass_keeps_its_lane_block_while_a_cell_is_live() {
    let _s = setup();
    const KEY: &str = "lanes/async";
    // The small block is freed inside the profiled pass and outlives the replayed ones
    // in its cell (an escape the profile did not see: one it saw goes to the backend).
    let request = |label: u64, profiled: bool| {
        memo_alloc::Pass::new(KEY).wrap(async move {
            let large = talloc(&A, 64 * 1024, 64, false, label);
            let small = talloc(&A, 40, 8, false, label + 1);
            tfree(&A, large);
            if profiled {
                tfree(&A, small);
                return None;
            }
            Some(small)
        })
    };
    assert!(poll(request(0, true)).is_none());
    // Each replayed request ends with no slot live but its small block in a cell: the
    // instance must keep its lane block (the checker would find the cells overwritten or
    // zeroed) and may lend its slots' block, while the next requests reuse the instance.
    let kept: Vec<Block> = (0..3)
        .filter_map(|i| poll(request(10 * i, false)))
        .collect();
    let d = common::delta(KEY, || {
        let more: Vec<Block> = (3..6)
            .filter_map(|i| poll(request(10 * i, false)))
            .collect();
        for b in more {
            tfree(&A, b);
        }
    });
    assert!(common::hits(&d) >= 3, "the large buffers replay: {:?}", d.1);
    assert!(
        d.1.lane_requests == 1 && d.1.escaping == 0,
        "the small block takes a cell: {:?}",
        d.1
    );
    // Another plan's pass takes idle memory first: a block given back under the live
    // cells would be written over them here.
    let other = || {
        let _p = memo_alloc::pass("lanes/async-other");
        tfree(&A, talloc(&A, 1 << 20, 64, false, 5))
    };
    other();
    other();
    for b in kept {
        tfree(&A, b);
    }
}
