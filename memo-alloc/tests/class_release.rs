//! Over jemalloc, the plan of a key's new shape class leaves jemalloc's free pages alone:
//! the key's passes were on slabs already, and what the class's profiled pass freed is
//! what the key's next backend requests (a decoding step's escaping cache) reuse. Only a
//! key's first plan, which moves its passes from the backend to slabs, purges jemalloc's
//! arenas (`tests/backend_release.rs`). Measured on the process's resident size, in a
//! test binary of its own whose backend is jemalloc.

mod common;

use common::rss_bytes;
use memo_alloc::{Jemalloc, MemoAlloc};

#[global_allocator]
static A: MemoAlloc<Jemalloc> = MemoAlloc::jemalloc();

const KEY: &str = "class-release";
const MIB: u64 = 1 << 20;
/// Buffers of a pass, alive together.
const BUFFERS: usize = 512;

/// A pass of buffers of `size` bytes, each page written; returns a checksum.
fn pass(size: usize) -> u64 {
    let _p = memo_alloc::pass(KEY);
    let mut live: Vec<Vec<u8>> = Vec::with_capacity(BUFFERS);
    for i in 0..BUFFERS {
        live.push(vec![(i % 251) as u8 + 1; size]);
    }
    live.iter().map(|v| v[size - 1] as u64).sum()
}

fn wait() {
    assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
        60
    )));
}

#[test]
fn a_shape_class_plan_keeps_jemallocs_free_pages() {
    const SMALL: usize = 16 << 10;
    const LARGE: usize = 40 << 10; // 20 MiB a pass
    let small = pass(SMALL); // the key's first pass: profiled, then purged
    wait();
    assert_eq!(pass(SMALL), small); // replayed: fits the plan
                                    // The other shape on the small shape's plan: its buffers miss, to jemalloc, and the
                                    // key's passes are classified from the next.
    let large = pass(LARGE);
    let before = rss_bytes();
    assert_eq!(pass(LARGE), large); // founds its class: profiled on jemalloc's free pages
    wait();
    let after = rss_bytes();
    assert_eq!(
        memo_alloc::report(KEY).expect("report").shape_classes,
        1,
        "the large shape founded a class"
    );
    assert!(
        after + 8 * MIB >= before,
        "{} MiB of jemalloc's free pages returned at the class's plan",
        before.saturating_sub(after) / MIB
    );
    assert_eq!(pass(LARGE), large); // replayed from the class's slab
}
