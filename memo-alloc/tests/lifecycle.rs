//! Lifecycle and edge cases, with `MemoAlloc` as this binary's global allocator.
//!
//! What this proves:
//! - A thread that exits in the middle of a pass (its guard leaked) does not leave the key
//!   stuck in `profiling`, nor its slab instance taken: later passes on other threads are
//!   profiled, then replayed, from the same single instance.
//! - Allocations and passes inside thread-local destructors, on threads that ran passes
//!   (also one that exits mid-pass), work.
//! - A panic unwinding through a profiled pass and through a replayed pass leaves the
//!   allocator and the key usable.
//! - `fork()` while other threads run passes leaves the child able to allocate and run
//!   passes.
//! - Alignments up to 2 MiB (the slab bases' alignment) are honoured in and out of slabs; a multi-GiB allocation works
//!   (or returns null) in and out of passes; impossible requests return null through
//!   `GlobalAlloc` directly, in and out of passes, never abort.
//! - `alloc_zeroed` from a slab slot dirtied earlier returns zeroed memory; `realloc` of a
//!   slab pointer keeps the contents, in place and when it outgrows its slot.

mod common;

use std::alloc::{GlobalAlloc, Layout};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use memo_alloc::{MemoAlloc, MissReason, PlanState};

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

fn fill(v: &mut [u8], seed: u8) {
    for (i, b) in v.iter_mut().enumerate() {
        *b = seed.wrapping_add(i as u8).wrapping_mul(31);
    }
}

fn check(v: &[u8], seed: u8) {
    for (i, &b) in v.iter().enumerate() {
        assert_eq!(b, seed.wrapping_add(i as u8).wrapping_mul(31), "byte {i}");
    }
}

/// A small pass: two ops, a few buffers, all freed inside the pass.
fn work(key: &'static str, seed: u8) {
    let mut a = vec![0u8; 700];
    fill(&mut a, seed);
    {
        let _op = memo_alloc::op("inner");
        let mut b = vec![0u8; 300];
        fill(&mut b, seed ^ 1);
        check(&a, seed);
        check(&b, seed ^ 1);
    }
    let _ = key;
    check(&a, seed);
}

fn state(key: &str) -> &'static str {
    memo_alloc::report(key).map_or("none", |r| r.state.as_str())
}

#[test]
fn thread_exiting_mid_profile_does_not_leave_the_key_profiling() {
    common::inline_planner();
    const KEY: &str = "life-exit-profile";
    thread::spawn(|| {
        let g = memo_alloc::pass(KEY);
        work(KEY, 3);
        let kept = std::hint::black_box(vec![1u8; 64]); // live at the exit
        std::mem::forget(kept);
        std::mem::forget(g); // the thread exits with the pass open
    })
    .join()
    .unwrap();
    assert_eq!(state(KEY), "unplanned", "{:?}", memo_alloc::report(KEY));
    // Another thread profiles it, then replays it.
    thread::spawn(|| {
        for s in 0..4 {
            let _p = memo_alloc::pass(KEY);
            work(KEY, s);
        }
    })
    .join()
    .unwrap();
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.state, PlanState::Planned, "{r:?}");
    assert_eq!(
        r.passes_profiled, 2,
        "the abandoned one and a real one: {r:?}"
    );
    assert_eq!(r.passes_replayed, 3, "{r:?}");
    assert!(r.slab_hits >= 6, "{r:?}");
}

#[test]
fn thread_exiting_mid_replay_gives_its_instance_back() {
    common::inline_planner();
    const KEY: &str = "life-exit-replay";
    for s in 0..2 {
        let _p = memo_alloc::pass(KEY);
        work(KEY, s);
    }
    assert_eq!(memo_alloc::report(KEY).unwrap().slab_instances, 1);
    thread::spawn(|| {
        let g = memo_alloc::pass(KEY);
        work(KEY, 9);
        std::mem::forget(g);
    })
    .join()
    .unwrap();
    for s in 0..3 {
        let _p = memo_alloc::pass(KEY);
        work(KEY, s);
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_replayed, 5, "{r:?}");
    assert_eq!(
        r.slab_instances, 1,
        "the exited thread's instance was not given back: {r:?}"
    );
    assert_eq!(r.misses_by_reason.total(), 0, "{r:?}");
}

static TEARDOWN_OK: AtomicUsize = AtomicUsize::new(0);

/// Allocates, frees and runs a pass in its destructor.
struct Noisy(u8);

impl Drop for Noisy {
    fn drop(&mut self) {
        let mut vs: Vec<Vec<u8>> = Vec::new();
        for i in 0..50 {
            let mut v = vec![0u8; 16 + 37 * i];
            fill(&mut v, self.0.wrapping_add(i as u8));
            vs.push(v);
        }
        for (i, v) in vs.iter().enumerate() {
            check(v, self.0.wrapping_add(i as u8));
        }
        drop(vs);
        {
            let _p = memo_alloc::pass("life-teardown-pass");
            work("life-teardown-pass", self.0);
        }
        let mut s = String::new();
        for i in 0..100 {
            s.push_str(&i.to_string());
        }
        assert!(s.len() > 100);
        TEARDOWN_OK.fetch_add(1, Ordering::SeqCst);
    }
}

thread_local! {
    static EARLY: RefCell<Option<Noisy>> = const { RefCell::new(None) };
    static LATE: RefCell<Option<Noisy>> = const { RefCell::new(None) };
}

#[test]
fn thread_local_destructors_allocate_and_run_passes() {
    common::inline_planner();
    // Both keys are planned before the threads start, so that each of their passes
    // replays: with the first profile left to the threads, every other pass could run
    // while it is planned (on the backend), and no pass would replay.
    for key in ["life-teardown", "life-teardown-pass"] {
        for s in 0..2 {
            let _p = memo_alloc::pass(key);
            work(key, s);
        }
    }
    let before = TEARDOWN_OK.load(Ordering::SeqCst);
    let reports =
        || ["life-teardown", "life-teardown-pass"].map(|k| memo_alloc::report(k).unwrap());
    let start = reports();
    let handles: Vec<_> = (0..6u8)
        .map(|t| {
            thread::spawn(move || {
                // Registered before the thread's first pass: destroyed after the
                // allocator's own per-thread state.
                EARLY.with(|e| *e.borrow_mut() = Some(Noisy(t)));
                for s in 0..3 {
                    let _p = memo_alloc::pass("life-teardown");
                    work("life-teardown", s);
                }
                let g = memo_alloc::pass("life-teardown");
                // Registered inside a pass: destroyed first, while that pass is still
                // open on odd threads (their guard is leaked).
                LATE.with(|e| *e.borrow_mut() = Some(Noisy(t + 100)));
                work("life-teardown", t);
                if t % 2 == 1 {
                    std::mem::forget(g);
                } else {
                    drop(g);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a thread failed during teardown");
    }
    assert_eq!(TEARDOWN_OK.load(Ordering::SeqCst) - before, 12);
    // Destructors run in reverse order of registration: LATE, the allocator's sentinel
    // (which ends a leaked pass), EARLY. On odd threads LATE's pass is an inner scope of
    // the leaked pass (a pass inside a pass); every other destructor's pass is a pass.
    // Every pass replayed: 4 a thread, and the 9 of the destructors.
    for ((r, s), passes) in reports().iter().zip(&start).zip([24, 9]) {
        let ran =
            |r: &memo_alloc::PassReport| r.passes_profiled + r.passes_replayed + r.passes_backend;
        assert_eq!(
            ran(r) - ran(s),
            passes,
            "after a leaked pass was ended at thread exit, later passes must be passes: {r:?}"
        );
        assert_eq!(r.passes_replayed - s.passes_replayed, passes, "{r:?}");
        assert_eq!(r.state, PlanState::Planned, "{r:?}");
    }
}

#[test]
fn panics_through_profiled_and_replayed_passes_leave_the_allocator_usable() {
    common::inline_planner();
    const KEY: &str = "life-panic";
    let r = std::panic::catch_unwind(|| {
        let _p = memo_alloc::pass(KEY);
        work(KEY, 1);
        let _live = vec![5u8; 1000];
        let _op = memo_alloc::op("boom");
        panic!("during profiling");
    });
    assert!(r.is_err());
    assert_eq!(
        state(KEY),
        "unplanned",
        "a profile cut short by a panic is not planned"
    );
    for s in 0..2 {
        let _p = memo_alloc::pass(KEY);
        work(KEY, s);
    }
    let before = memo_alloc::report(KEY).unwrap();
    assert_eq!(before.state, PlanState::Planned, "{before:?}");
    let r = std::panic::catch_unwind(|| {
        let _p = memo_alloc::pass(KEY);
        let mut a = vec![0u8; 700];
        fill(&mut a, 42);
        let _op = memo_alloc::op("inner");
        let b = vec![7u8; 300];
        if b.len() == 300 {
            panic!("during replay {}", b.len());
        }
    });
    assert!(r.is_err());
    // The next pass replays from the same, single instance: unwinding gave it back.
    {
        let _p = memo_alloc::pass(KEY);
        work(KEY, 5);
    }
    let mid = memo_alloc::report(KEY).unwrap();
    assert_eq!(mid.passes_replayed, before.passes_replayed + 2, "{mid:?}");
    assert_eq!(
        mid.slab_instances, 1,
        "unwinding did not give the instance back: {mid:?}"
    );
    assert!(mid.slab_hits >= before.slab_hits + 2 + 2, "{mid:?}");
    // Outside passes and in later passes everything still works. (The panic's own
    // allocations were misses; enough of them make the key re-profiled, which is fine.)
    let v: Vec<Vec<u8>> = (0..100).map(|i| vec![i as u8; 100 + i]).collect();
    for (i, x) in v.iter().enumerate() {
        assert!(x.iter().all(|&b| b == i as u8));
    }
    for s in 0..4 {
        let _p = memo_alloc::pass(KEY);
        work(KEY, s);
    }
    let after = memo_alloc::report(KEY).unwrap();
    assert_eq!(after.state, PlanState::Planned, "{after:?}");
    assert!(
        after.passes_replayed >= mid.passes_replayed + 2,
        "{after:?}"
    );
    assert!(after.slab_hits >= mid.slab_hits + 4, "{after:?}");
}

#[test]
fn fork_while_other_threads_run_passes() {
    common::inline_planner();
    let stop = Arc::new(AtomicBool::new(false));
    let passes = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            let (stop, passes) = (stop.clone(), passes.clone());
            thread::spawn(move || {
                let keys = ["life-fork-a", "life-fork-b"];
                let mut s = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    let key = keys[(t as usize + s as usize) % 2];
                    let _p = memo_alloc::pass(key);
                    work(key, s);
                    // Pass boundaries and reports take the allocator's locks.
                    let _ = memo_alloc::stats();
                    let _ = memo_alloc::report(key);
                    passes.fetch_add(1, Ordering::Relaxed);
                    s = s.wrapping_add(1);
                }
            })
        })
        .collect();
    while passes.load(Ordering::Relaxed) < 200 {
        thread::yield_now();
    }
    for round in 0..8 {
        // SAFETY: the child only runs code that is async-signal-safe with respect to this
        // allocator's locks (which it resets) and glibc's malloc (fork-safe), then _exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = std::panic::catch_unwind(|| {
                let mut v: Vec<Vec<u64>> = Vec::new();
                for i in 0..2000usize {
                    v.push((0..(i % 97) as u64 + 1).collect());
                }
                for (i, x) in v.iter().enumerate() {
                    assert_eq!(x.len(), i % 97 + 1);
                    assert_eq!(x.last().copied(), Some((i % 97) as u64));
                }
                let big = vec![3u8; 64 << 20];
                assert_eq!(big[big.len() - 1], 3);
                for s in 0..5 {
                    for key in ["life-fork-a", "life-fork-b", "life-fork-child"] {
                        let _p = memo_alloc::pass(key);
                        work(key, s);
                    }
                }
                let _ = memo_alloc::stats();
                let _ = memo_alloc::report("life-fork-a");
            })
            .is_ok();
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let status = wait_bounded(pid, 120);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child of round {round} failed: status {status:#x}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
}

/// `waitpid`, killing the child if it has not exited after `secs` seconds (a hang guard,
/// not a timing assertion: a hung child is a failure either way).
fn wait_bounded(pid: libc::pid_t, secs: u64) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return status;
        }
        assert!(r == 0, "waitpid failed");
        if std::time::Instant::now() > deadline {
            // SAFETY: killing our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hung (deadlocked?)");
        }
        thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn alignments_up_to_2_mib_in_and_out_of_slabs() {
    common::inline_planner();
    const KEY: &str = "life-align";
    let aligns = [
        1usize,
        2,
        8,
        16,
        32,
        64,
        128,
        256,
        512,
        1024,
        2048,
        4096,
        65536,
        1 << 21,
    ];
    let run = || {
        let _p = memo_alloc::pass(KEY);
        let mut ptrs = Vec::with_capacity(aligns.len());
        for (i, &align) in aligns.iter().enumerate() {
            let _op = memo_alloc::op("align");
            let layout = Layout::from_size_align(24 + 40 * i, align).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe { std::alloc::alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "align {align}");
            // SAFETY: `p` holds `layout.size()` bytes.
            unsafe { p.write_bytes(i as u8, layout.size()) };
            ptrs.push((p, layout, i as u8));
        }
        for (p, layout, b) in ptrs.drain(..) {
            // SAFETY: live allocation of `layout`.
            let s = unsafe { std::slice::from_raw_parts(p, layout.size()) };
            assert!(s.iter().all(|&x| x == b));
            // SAFETY: allocated above with `layout`.
            unsafe { std::alloc::dealloc(p, layout) };
        }
    };
    for _ in 0..4 {
        run();
    }
    for &align in &aligns {
        let layout = Layout::from_size_align(100, align).unwrap();
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        assert_eq!(p as usize % align, 0);
        // SAFETY: allocated above.
        unsafe { std::alloc::dealloc(p, layout) };
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_replayed, 3, "{r:?}");
    // One slot per aligned block, plus the Vec holding the pointers.
    assert_eq!(r.slab_hits, 3 * (aligns.len() as u64 + 1), "{r:?}");
    assert_eq!(r.misses_by_reason.get(MissReason::Alignment), 0);
}

/// Allocates `bytes`, touches the first, a middle and the last page, frees; `false` if the
/// allocator returned null.
fn touch_huge(bytes: usize) -> bool {
    let layout = Layout::from_size_align(bytes, 4096).unwrap();
    // SAFETY: non-zero size.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        return false;
    }
    for off in [0, bytes / 2, bytes - 4096] {
        // SAFETY: inside the allocation.
        unsafe {
            p.add(off).write_bytes(0x5A, 4096);
            assert_eq!(*p.add(off + 4095), 0x5A);
        }
    }
    // SAFETY: allocated above.
    unsafe { std::alloc::dealloc(p, layout) };
    true
}

#[test]
fn several_gib_in_and_out_of_passes() {
    common::inline_planner();
    const KEY: &str = "life-huge";
    const BYTES: usize = 3 << 30;
    let outside = touch_huge(BYTES);
    let mut inside = Vec::new();
    for _ in 0..3 {
        let _p = memo_alloc::pass(KEY);
        inside.push(touch_huge(BYTES));
    }
    eprintln!("3 GiB: outside {outside}, in passes {inside:?}");
    let r = memo_alloc::report(KEY).unwrap();
    if inside[0] {
        // Profiled, planned into a 3 GiB slab, then served from it (or from the backend
        // if no slab could be reserved).
        assert!(r.height >= BYTES as u64, "{r:?}");
        assert_eq!(r.passes_replayed, 2, "{r:?}");
    }
}

#[test]
fn impossible_requests_return_null_in_and_out_of_passes() {
    common::inline_planner();
    const KEY: &str = "life-oom";
    let layouts = [
        Layout::from_size_align(isize::MAX as usize - 4095, 4096).unwrap(),
        Layout::from_size_align(isize::MAX as usize, 1).unwrap(),
        Layout::from_size_align(1 << 62, 16).unwrap(),
        Layout::from_size_align(isize::MAX as usize / 2 + 1, 64).unwrap(),
    ];
    let try_all = || {
        for l in layouts {
            // SAFETY: non-zero sizes; nothing is dereferenced.
            unsafe {
                assert!(A.alloc(l).is_null(), "{l:?}");
                assert!(A.alloc_zeroed(l).is_null(), "{l:?}");
            }
        }
        // realloc to an impossible size fails and keeps the block.
        let small = Layout::from_size_align(64, 16).unwrap();
        // SAFETY: valid layouts; the block is freed once.
        unsafe {
            let p = A.alloc(small);
            assert!(!p.is_null());
            p.write_bytes(0x77, 64);
            let q = A.realloc(p, small, isize::MAX as usize - 4096);
            assert!(q.is_null());
            assert!(std::slice::from_raw_parts(p, 64).iter().all(|&b| b == 0x77));
            A.dealloc(p, small);
        }
    };
    try_all();
    for _ in 0..4 {
        let _p = memo_alloc::pass(KEY);
        try_all();
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_profiled + r.passes_replayed, 4, "{r:?}");
}

#[test]
fn alloc_zeroed_from_a_dirtied_slot_is_zeroed() {
    common::inline_planner();
    const KEY: &str = "life-zeroed";
    let layout = Layout::from_size_align(5000, 64).unwrap();
    let run = || {
        let _p = memo_alloc::pass(KEY);
        // SAFETY: valid layouts; each block freed once.
        unsafe {
            let dirty = A.alloc(layout);
            assert!(!dirty.is_null());
            dirty.write_bytes(0xEE, layout.size());
            A.dealloc(dirty, layout);
            // Planned at the same offset as `dirty` (their lifetimes do not overlap).
            let z = A.alloc_zeroed(layout);
            assert!(!z.is_null());
            let zs = std::slice::from_raw_parts(z, layout.size());
            assert!(
                zs.iter().all(|&b| b == 0),
                "alloc_zeroed returned dirty memory"
            );
            z.write_bytes(0xDD, layout.size());
            A.dealloc(z, layout);
        }
        let v = vec![0u64; 700];
        assert!(v.iter().all(|&x| x == 0));
        let mut w = v;
        w.iter_mut().for_each(|x| *x = u64::MAX);
        drop(w);
    };
    for _ in 0..5 {
        run();
    }
    let r = memo_alloc::report(KEY).unwrap();
    assert_eq!(r.passes_replayed, 4, "{r:?}");
    assert_eq!(r.slab_hits, 4 * 3, "served from the slab: {r:?}");
}

#[test]
fn realloc_of_a_slab_pointer_keeps_contents() {
    common::inline_planner();
    const KEY: &str = "life-realloc";
    let run = |grow_past: bool| {
        let _p = memo_alloc::pass(KEY);
        // 400 bytes: above the lanes, a slot and its realloc chain.
        let mut v: Vec<u32> = Vec::with_capacity(100);
        for i in 0..300u32 {
            v.push(i.wrapping_mul(2654435761)); // reallocs as it grows
        }
        if grow_past {
            // Beyond anything profiled: the slot is outgrown and the data moves.
            for i in 300..5000u32 {
                v.push(i.wrapping_mul(2654435761));
            }
        }
        v.shrink_to_fit();
        for (i, &x) in v.iter().enumerate() {
            assert_eq!(x, (i as u32).wrapping_mul(2654435761), "index {i}");
        }
    };
    run(false); // profiled: a realloc chain
    run(false);
    run(true);
    run(false);
    let r = memo_alloc::report(KEY).unwrap();
    assert!(r.reallocs >= 3, "{r:?}");
    assert_eq!(r.passes_replayed, 3, "{r:?}");
    assert!(r.slab_hits >= 3, "{r:?}");
    assert!(
        r.misses_by_reason.get(MissReason::ReallocGrow) >= 1,
        "{r:?}"
    );
}
