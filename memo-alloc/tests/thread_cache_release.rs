//! Over jemalloc, what a profiled pass freed into its thread's cache (jemalloc keeps up to
//! 20 freed blocks of each size from 16 to 32 KiB there for the thread's next requests) is
//! handed back to the arenas when the pass ends, so that the purge at the key's first plan
//! returns its pages: the thread's next passes run on slabs, and would never take those
//! blocks again. Measured on the process's resident size, in a test binary of its own
//! whose backend is jemalloc.

mod common;

use common::rss_bytes;
use memo_alloc::{Jemalloc, MemoAlloc};

#[global_allocator]
static A: MemoAlloc<Jemalloc> = MemoAlloc::jemalloc();

const KEY: &str = "thread-cache-release";
const KIB: usize = 1 << 10;
/// Sizes jemalloc's thread cache keeps by default (up to its `tcache_max`, 32 KiB).
const SIZES: [usize; 5] = [16 * KIB, 20 * KIB, 24 * KIB, 28 * KIB, 32 * KIB];
/// Blocks of each size a pass makes: as many as the cache keeps of one size.
const PER_SIZE: usize = 20;

/// A pass of `key` of blocks of every size in `SIZES`, each page written, alive together
/// and freed at its end; returns a checksum.
fn pass(key: &str) -> u64 {
    let _p = memo_alloc::pass(key);
    let mut live: Vec<Vec<u8>> = Vec::with_capacity(SIZES.len() * PER_SIZE);
    for (i, &size) in SIZES
        .iter()
        .cycle()
        .take(SIZES.len() * PER_SIZE)
        .enumerate()
    {
        live.push(vec![(i % 251) as u8 + 1; size]);
    }
    live.iter().map(|v| v[v.len() - 1] as u64).sum()
}

#[test]
fn a_profiled_pass_leaves_nothing_in_its_threads_cache() {
    // 2.3 MiB written by the pass.
    let held: usize = SIZES.iter().sum::<usize>() * PER_SIZE;
    // Another key first, of other sizes: the planner thread, the registry and the region
    // are set up.
    {
        let _p = memo_alloc::pass("warm-up");
        std::hint::black_box(vec![1u8; 64]);
    }
    assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
        60
    )));
    let before = rss_bytes();
    let sum = pass(KEY); // the key's first pass: profiled on jemalloc, then planned
    assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
        60
    )));
    let after = rss_bytes();
    assert_eq!(
        memo_alloc::report(KEY).expect("report").state,
        memo_alloc::PlanState::Planned
    );
    assert!(
        after < before + held as u64 / 3,
        "{} KiB more resident after the plan's purge (the pass wrote {} KiB)",
        after.saturating_sub(before) >> 10,
        held >> 10
    );
    assert_eq!(pass(KEY), sum); // replayed from the slab
}
