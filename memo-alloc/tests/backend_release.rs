//! Over jemalloc, a profiled pass's freed memory goes back to the OS once its plan is
//! published: jemalloc would keep it resident as dirty pages (for about 10 s by default),
//! beside the slab that replays the pass. Measured on the process's resident size, in a
//! test binary of its own whose backend is jemalloc (`MemoAlloc::jemalloc()`).

use memo_alloc::{Jemalloc, MemoAlloc};

#[global_allocator]
static A: MemoAlloc<Jemalloc> = MemoAlloc::jemalloc();

const KEY: &str = "backend-release";
const MIB: u64 = 1 << 20;
/// Buffers of the pass: below the size a profiled pass takes from the slab region, so
/// jemalloc serves them while the pass is profiled.
const BUFFER: usize = 48 << 10;
/// 48 MiB of buffers, alive together.
const BUFFERS: usize = 1024;

/// The process's resident size (`/proc/self/statm`, in pages).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm's resident field");
    pages * 4096
}

/// Allocates every buffer, writes each page, frees them all; returns a checksum.
fn pass() -> u64 {
    let _p = memo_alloc::pass(KEY);
    let mut live: Vec<Vec<u8>> = Vec::with_capacity(BUFFERS);
    for i in 0..BUFFERS {
        live.push(vec![(i % 251) as u8 + 1; BUFFER]);
    }
    live.iter().map(|v| v[BUFFER - 1] as u64).sum()
}

#[test]
fn a_profiled_pass_leaves_no_dirty_pages_in_jemalloc_once_planned() {
    let start = resident_bytes();
    let expected = pass(); // the key's first pass: profiled, on jemalloc
    assert!(memo_alloc::wait_for_plans(std::time::Duration::from_secs(
        60
    )));
    let planned = resident_bytes();
    // The profile's 48 MiB of buffers, freed when it ended, are no longer resident.
    assert!(
        planned < start + 16 * MIB,
        "{} MiB more resident after the profile was planned",
        planned.saturating_sub(start) / MIB
    );
    assert_eq!(pass(), expected); // replayed on the slab
    let replayed = resident_bytes();
    let r = memo_alloc::report(KEY).expect("report");
    assert_eq!(r.passes_profiled, 1, "{r:?}");
    assert!(
        r.slab_hits >= BUFFERS as u64,
        "the replay ran on the slab: {r:?}"
    );
    assert!(r.slab_resident_bytes >= 48 * MIB, "{r:?}");
    // One copy of the pass is resident: the slab's.
    let besides_slab = replayed.saturating_sub(start + r.slab_resident_bytes);
    assert!(
        besides_slab < 16 * MIB,
        "{} MiB resident besides the slab's {} MiB after the replay",
        besides_slab / MIB,
        r.slab_resident_bytes / MIB
    );
}
