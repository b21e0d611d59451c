//! Passes that follow the work (issue 11): helper threads entering a pass (scoped threads,
//! rayon tasks), async passes on tokio runtimes, run-time keys, buckets and prewarming.
//!
//! Every block is allocated through the allocator under test and tracked by the shadow
//! checker's registry (its pattern verified before it is freed, overlap with any live block
//! of the process a failure); everything else, the runtimes' own allocations and
//! memo-alloc's bookkeeping included, runs over the checking allocator.

#[path = "shadow_support/mod.rs"]
mod shadow_support;

mod common;

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::time::Duration;

use common::{delta, hits};
use memo_alloc::{Buckets, MemoAlloc, MissReason, Pass, PassReport};
use shadow_support::CountingBackend;
use shadow_support::{alloc as talloc, checked::Checked, free as tfree, Alloc, Block};

#[global_allocator]
static GLOBAL: Checked = Checked;

static A: Alloc = MemoAlloc::new(CountingBackend::new());

/// One test at a time (see `common::serial_inline`).
fn setup() -> std::sync::MutexGuard<'static, ()> {
    common::serial_inline()
}

fn misses(d: &(PassReport, PassReport)) -> u64 {
    d.1.misses_by_reason.total() - d.0.misses_by_reason.total()
}

/// A helper's work: `n` blocks of sizes depending on its id, half freed as it goes.
fn helper_work(id: usize, n: usize) -> usize {
    let mut live: Vec<Block> = Vec::with_capacity(n);
    for j in 0..n {
        live.push(talloc(
            &A,
            64 + 512 * id + 32 * j,
            16,
            false,
            (id * 100 + j) as u64,
        ));
        if j % 2 == 1 {
            tfree(&A, live.remove(0));
        }
    }
    for b in live {
        tfree(&A, b);
    }
    n
}

/// A pass with main-context work around helper contexts run on scoped threads, in the
/// order `order` gives (concurrently, or one after another). Returns the allocations made.
fn scoped_pass(key: &str, order: &[usize], concurrent: bool) -> usize {
    let _p = memo_alloc::pass(key);
    let mut made = 0;
    let a = talloc(&A, 4096, 64, false, 1);
    made += 1;
    let handle = memo_alloc::current().expect("in a pass");
    std::thread::scope(|s| {
        if concurrent {
            let joins: Vec<_> = order
                .iter()
                .map(|&id| {
                    let h = handle.clone();
                    s.spawn(move || h.in_scope(id, || helper_work(id, 8)))
                })
                .collect();
            made += joins.into_iter().map(|j| j.join().unwrap()).sum::<usize>();
        } else {
            for &id in order {
                let h = handle.clone();
                made += s
                    .spawn(move || h.in_scope(id, || helper_work(id, 8)))
                    .join()
                    .unwrap();
            }
        }
    });
    tfree(&A, a);
    let b = talloc(&A, 1000, 8, false, 2);
    tfree(&A, b);
    made + 1
}

#[test]
fn helper_threads_replay_from_slabs_however_they_are_scheduled() {
    let _s = setup();
    const KEY: &str = "carry/scoped";
    scoped_pass(KEY, &[0, 1, 2], true); // profiled
    for (order, concurrent) in [
        (&[0, 1, 2][..], true),
        (&[2, 1, 0][..], true),
        (&[1, 2, 0][..], false),
        (&[0, 1, 2][..], false),
        (&[2, 0, 1][..], true),
    ] {
        let mut made = 0;
        let d = delta(KEY, || made = scoped_pass(KEY, order, concurrent));
        assert_eq!(d.1.passes_replayed, d.0.passes_replayed + 1, "{:?}", d.1);
        assert_eq!(
            (hits(&d), misses(&d)),
            (made as u64, 0),
            "order {order:?}, concurrent {concurrent}: {:?}",
            d.1
        );
    }
}

#[test]
fn rayon_tasks_replay_from_slabs() {
    let _s = setup();
    const KEY: &str = "carry/rayon";
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let run = || {
        let _p = memo_alloc::pass(KEY);
        let handle = memo_alloc::current().unwrap();
        let done = Mutex::new(0usize);
        pool.scope(|s| {
            for i in 0..8 {
                let h = handle.clone();
                let done = &done;
                s.spawn(move |_| {
                    let n = h.in_scope(i, || helper_work(i % 3, 6));
                    *done.lock().unwrap() += n;
                });
            }
        });
        let n = *done.lock().unwrap();
        n
    };
    run();
    for _ in 0..4 {
        let mut made = 0;
        let d = delta(KEY, || made = run());
        assert_eq!((hits(&d), misses(&d)), (made as u64, 0), "{:?}", d.1);
    }
    let s = memo_alloc::stats();
    assert!(s.pass_allocations() >= s.slab_hits, "{s:?}");
}

#[test]
fn a_block_a_helper_keeps_past_the_pass_is_never_reused_under_it() {
    let _s = setup();
    const KEY: &str = "carry/kept";
    let gate = Barrier::new(2);
    let run = |keep: bool| -> Option<Block> {
        let kept = Mutex::new(None);
        std::thread::scope(|s| {
            let handle;
            {
                let _p = memo_alloc::pass(KEY);
                handle = memo_alloc::current().unwrap();
                let h = handle.clone();
                let (gate, kept) = (&gate, &kept);
                s.spawn(move || {
                    let _in = h.enter(0);
                    let b = talloc(&A, 2048, 16, false, 7);
                    let c = talloc(&A, 512, 16, false, 8);
                    gate.wait(); // the owner ends the pass while this helper is in it
                    gate.wait();
                    let d = talloc(&A, 256, 16, false, 9); // after the end: still in
                    tfree(&A, d);
                    tfree(&A, c);
                    if keep {
                        *kept.lock().unwrap() = Some(b); // outlives the pass
                    } else {
                        tfree(&A, b);
                    }
                });
                gate.wait();
            } // the owner's guard: the pass ends, the helper is still in it (parked)
              // Entering after the end does nothing. Measured while the helper waits, since
              // its leaving (the pass's last participant) folds the pass's counters.
            let d = delta(KEY, || drop(handle.enter(1)));
            assert_eq!(d.0, d.1);
            gate.wait();
        });
        kept.into_inner().unwrap()
    };
    run(false); // profiled
    run(false);
    let kept = run(true).expect("kept"); // its slot stays live after the pass
    for _ in 0..5 {
        run(false); // the tracker fails if any of these hands out memory under `kept`
    }
    kept.verify(kept.size, "kept past its pass");
    let r = memo_alloc::report(KEY).unwrap();
    assert!(r.instances_pinned >= 1, "its instance is pinned: {r:?}");
    tfree(&A, kept);
}

#[test]
fn one_thread_in_a_helper_context_at_a_time() {
    let _s = setup();
    const KEY: &str = "carry/same-id";
    let both = Barrier::new(2);
    let run = || {
        let _p = memo_alloc::pass(KEY);
        let handle = memo_alloc::current().unwrap();
        std::thread::scope(|s| {
            for t in 0..2 {
                let h = handle.clone();
                let both = &both;
                s.spawn(move || {
                    let _in = h.enter(5); // the same id on two threads at once
                    both.wait();
                    helper_work(t, 6);
                    both.wait();
                });
            }
        });
    };
    run();
    let d = delta(KEY, run);
    assert_eq!(
        d.1.misses_by_reason.get(MissReason::NoSlab) - d.0.misses_by_reason.get(MissReason::NoSlab),
        6,
        "the second thread ran on the backend: {:?}",
        d.1
    );
}

/// A request: blocks allocated and freed across awaits.
async fn request(n: usize) -> u64 {
    let mut live: Vec<Block> = Vec::with_capacity(4);
    let mut sum = 0u64;
    for j in 0..n {
        live.push(talloc(&A, 128 + 64 * (j % 5), 16, false, j as u64));
        tokio::task::yield_now().await; // other requests run on this worker meanwhile
        if live.len() == 3 {
            sum = sum.wrapping_add(tfree(&A, live.remove(0)));
        }
    }
    for b in live {
        sum = sum.wrapping_add(tfree(&A, b));
    }
    sum
}

#[test]
fn async_requests_on_a_multithreaded_runtime() {
    let _s = setup();
    const KEY: &str = "carry/async";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(Pass::new(KEY).wrap(request(12))); // profiled
    let d = delta(KEY, || {
        rt.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|_| tokio::spawn(Pass::new(KEY).wrap(request(12))))
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    });
    assert_eq!(d.1.passes_replayed - d.0.passes_replayed, 64, "{:?}", d.1);
    assert_eq!((hits(&d), misses(&d)), (64 * 12, 0), "{:?}", d.1);
    // Interleaved on one worker thread: each request in its own pass.
    let one = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let d = delta(KEY, || {
        one.block_on(async {
            let a = tokio::spawn(Pass::new(KEY).wrap(request(12)));
            let b = tokio::spawn(Pass::new(KEY).wrap(request(12)));
            a.await.unwrap();
            b.await.unwrap();
        })
    });
    assert_eq!((hits(&d), misses(&d)), (24, 0), "{:?}", d.1);
}

#[test]
fn a_cancelled_request_abandons_its_pass() {
    let _s = setup();
    const KEY: &str = "carry/cancelled";
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(Pass::new(KEY).wrap(request(6)));
    rt.block_on(Pass::new(KEY).wrap(request(6)));
    let d = delta(KEY, || {
        rt.block_on(async {
            let slow = Pass::new(KEY).wrap(async {
                request(3).await;
                tokio::time::sleep(Duration::from_secs(60)).await;
            });
            let _ = tokio::time::timeout(Duration::from_millis(20), slow).await;
        })
    });
    assert_eq!(
        d.1.replays_abandoned - d.0.replays_abandoned,
        1,
        "{:?}",
        d.1
    );
    assert_eq!(d.1.passes_profiled, d.0.passes_profiled, "no re-profile");
}

#[test]
fn run_time_keys_buckets_and_prewarming() {
    let _s = setup();
    let buckets = Buckets::powers_of_two();
    // A transformer-like pass whose buffers scale with the sequence length.
    const LAYERS: usize = 12;
    let work = |seq: usize| {
        for layer in 0..LAYERS {
            let _op = memo_alloc::op(["attn", "mlp"][layer % 2]);
            let h = talloc(&A, 64 * seq, 64, false, layer as u64);
            let s = talloc(&A, 4 * seq * seq / 8 + 16, 64, false, layer as u64 + 10);
            tfree(&A, s);
            tfree(&A, h);
        }
    };
    let infer = |seq: usize| {
        let key = buckets.key("carry/bert/seq", seq as u64);
        let _p = memo_alloc::pass(&key);
        work(seq);
        key
    };
    // Start-up: the bucket of lengths up to 256, at its largest shape.
    let key = buckets.key("carry/bert/seq", 256);
    assert!(memo_alloc::prewarm(&key, || work(256)));
    let before = memo_alloc::report(&key).unwrap();
    for seq in [256, 200, 160, 180, 256, 140] {
        assert_eq!(infer(seq), key, "{seq} is in the bucket");
    }
    let r = memo_alloc::report(&key).unwrap();
    assert_eq!(
        r.passes_profiled, before.passes_profiled,
        "no request profiled: {r:?}"
    );
    let d = (before, r);
    // Each smaller shape's first fitting request probes (it is served by the backend).
    let made = 6 * 2 * LAYERS as u64;
    assert!(
        hits(&d) * 10 >= 9 * made,
        "smaller shapes replay from the bucket's plan: {} of {made}: {:?}",
        hits(&d),
        d.1
    );
    black_box(d);
}
