//! Async passes share slab memory (issue 11): an async pass with no live slot gives its
//! slab's memory back between two polls and when it ends, and the next pass of any plan
//! takes it. So memory follows the polls that run at once, not the requests in flight.
//!
//! Every block goes through the shadow checker's registry (overlap with any live block is a
//! failure, and each block's pattern is verified before it is freed). The futures are
//! polled by a hand-written round-robin executor, so the interleaving is fixed.

#[path = "shadow_support/mod.rs"]
mod shadow_support;

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use memo_alloc::{MemoAlloc, Pass};
use shadow_support::CountingBackend;
use shadow_support::{alloc as talloc, checked::Checked, free as tfree, Alloc, Block};

#[global_allocator]
static GLOBAL: Checked = Checked;

static A: Alloc = MemoAlloc::new(CountingBackend::new());

/// One test at a time (see `common::serial_inline`), starting with no idle block: which
/// block a pass takes, and whether one given back is kept (at most 32 wait), must not
/// depend on the tests that ran before.
fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = common::serial_inline();
    memo_alloc::testing::release_idle_blocks();
    guard
}

/// Pending once, then ready: an await point.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

fn await_point() -> YieldOnce {
    YieldOnce(false)
}

/// A request: waits, computes on `bytes` of buffers (all freed), waits, computes again,
/// and returns.
async fn request(bytes: usize, label: u64) -> u64 {
    await_point().await;
    let sum = compute(bytes, label);
    await_point().await;
    sum.wrapping_add(compute(bytes / 2, label + 1))
}

/// Buffers of `bytes` in all (each written whole by the shadow checker), freed.
fn compute(bytes: usize, label: u64) -> u64 {
    let a = talloc(&A, bytes / 2, 64, false, label);
    let b = talloc(&A, bytes / 4, 64, false, label + 2);
    let s = tfree(&A, a);
    let c = talloc(&A, bytes / 2, 64, false, label + 3);
    s.wrapping_add(tfree(&A, b)).wrapping_add(tfree(&A, c))
}

/// Polls `futures` round-robin until all are done (a one-thread executor).
fn run_round_robin<F: Future<Output = u64>>(futures: Vec<F>) -> Vec<u64> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<u64>> = vec![None; futures.len()];
    let mut cx = Context::from_waker(Waker::noop());
    while out.iter().any(Option::is_none) {
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                    *o = Some(v);
                }
            }
        }
    }
    out.into_iter().map(Option::unwrap).collect()
}

const MIB: usize = 1 << 20;

#[test]
fn requests_in_flight_share_the_memory_of_the_polls_that_run() {
    let _s = setup();
    const KEY: &str = "lending/in-flight";
    let block = |label| Pass::new(KEY).wrap(request(2 * MIB, label));
    run_round_robin(vec![block(1)]); // profiled
    run_round_robin(vec![block(1)]); // replayed: the plan's block exists
    let before = memo_alloc::stats();
    let d = common::delta(KEY, || {
        run_round_robin((0..16).map(|i| block(100 * i)).collect());
    });
    let after = memo_alloc::stats();
    assert_eq!(d.1.passes_replayed - d.0.passes_replayed, 16);
    assert_eq!(common::hits(&d), 16 * 6, "{:?}", d.1);
    // Each request parks after its first and second polls (nothing live), and ends
    // after its third with nothing live.
    assert!(after.parks - before.parks >= 32, "{before:?} {after:?}");
    // 16 requests in flight, one computing at a time: the block of the warm-up's pass
    // serves them all (at most one more), not sixteen blocks.
    let block = d.1.height.next_multiple_of(2 * MIB as u64);
    assert!(d.1.height >= MIB as u64, "{:?}", d.1);
    assert!(
        after.slab_resident_bytes <= before.slab_resident_bytes + block,
        "resident {} -> {} for blocks of {block}: {after:?}",
        before.slab_resident_bytes,
        after.slab_resident_bytes
    );
}

#[test]
fn a_result_live_across_an_await_keeps_the_memory_of_its_pass() {
    let _s = setup();
    const KEY: &str = "lending/kept";
    // One block stays live across the await: the pass must not give its memory back
    // (the checker would see the next request's buffers overlap it).
    let request = |label: u64| {
        Pass::new(KEY).wrap(async move {
            let kept = talloc(&A, 64 * 1024, 64, false, label);
            await_point().await;
            let s = compute(MIB, label + 1);
            await_point().await;
            s.wrapping_add(tfree(&A, kept))
        })
    };
    run_round_robin(vec![request(1)]);
    let d = common::delta(KEY, || {
        run_round_robin((0..8).map(|i| request(10 * i)).collect());
    });
    assert_eq!(common::hits(&d), 8 * 4, "{:?}", d.1);
}

#[test]
fn memory_an_async_pass_gave_back_serves_another_plan() {
    let _s = setup();
    let (big, small) = ("lending/big", "lending/small");
    let one = |key: &'static str, bytes: usize| {
        run_round_robin(vec![Pass::new(key).wrap(request(bytes, 1))]);
    };
    one(big, 3 * MIB);
    one(small, MIB); // both profiled
    one(big, 3 * MIB); // the big plan's block carved, then idle
    let before = memo_alloc::stats();
    let d = common::delta(small, || one(small, MIB));
    let after = memo_alloc::stats();
    assert_eq!(common::hits(&d), 6, "{:?}", d.1);
    // The small pass took the idle block: no more slab memory than before.
    assert!(
        after.slab_resident_bytes <= before.slab_resident_bytes,
        "{before:?} {after:?}"
    );
    assert!(after.idle_blocks >= 1, "{after:?}");
}

#[test]
fn parked_passes_on_a_multithreaded_runtime_never_overlap() {
    let _s = setup();
    const KEY: &str = "lending/tokio";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let req = |i: u64| {
        Pass::new(KEY).wrap(async move {
            let mut sum = 0u64;
            let mut kept: Option<Block> = None;
            for j in 0..6u64 {
                // Some awaits with a block live (no park), some with none (park).
                if j % 3 == 1 {
                    kept = Some(talloc(&A, 256 + 64 * j as usize, 16, false, i + j));
                }
                sum = sum.wrapping_add(compute(64 * 1024, i * 10 + j));
                tokio::task::yield_now().await;
                if let Some(b) = kept.take() {
                    sum = sum.wrapping_add(tfree(&A, b));
                }
            }
            sum
        })
    };
    rt.block_on(req(0));
    let before = memo_alloc::stats();
    let d = common::delta(KEY, || {
        rt.block_on(async {
            let tasks: Vec<_> = (0..48).map(|i| tokio::spawn(req(i * 100))).collect();
            for t in tasks {
                t.await.unwrap();
            }
        })
    });
    let after = memo_alloc::stats();
    assert_eq!(d.1.passes_replayed - d.0.passes_replayed, 48);
    let misses: u64 = d.1.misses_by_reason.total() - d.0.misses_by_reason.total();
    assert_eq!((common::hits(&d), misses), (48 * 20, 0), "{:?}", d.1);
    assert!(after.parks > before.parks, "{after:?}");
}
