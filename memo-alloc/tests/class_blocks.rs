//! A key whose passes come in shape classes, run on one thread: its classes take turns on
//! one slab block (the one the key's last pass gave back), instead of each class holding
//! a block of its own between its passes. Measured on the slab pages resident, in a test
//! binary of its own so that no other test's blocks are among them.

use memo_alloc::MemoAlloc;

#[global_allocator]
static A: MemoAlloc = MemoAlloc::system();

const KEY: &str = "class-blocks";
const KIB: usize = 1 << 10;
const MIB: u64 = 1 << 20;
/// Buffers of a pass, alive together.
const BUFFERS: usize = 48;
/// The two shapes' buffer sizes: 1.5 MiB a pass (one 2 MiB chunk of slab), and 3 MiB (two).
const SMALL: usize = 32 * KIB;
const LARGE: usize = 64 * KIB;

/// A pass of [`BUFFERS`] buffers of `size` bytes, each page written; returns a checksum.
/// Its first request is a buffer, so that its first large request tells the shapes apart.
fn pass(size: usize) -> u64 {
    let _p = memo_alloc::pass(KEY);
    let first = vec![1u8; size];
    let mut live: Vec<Vec<u8>> = Vec::with_capacity(BUFFERS);
    live.push(first);
    for i in 1..BUFFERS {
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
fn a_keys_shape_classes_take_turns_on_one_slab_block() {
    let small = pass(SMALL); // profiled
    wait();
    assert_eq!(pass(SMALL), small); // replayed
    let large = pass(LARGE); // misses on the small shape's plan: classified from the next
    assert_eq!(pass(LARGE), large); // founds the large shape's class: profiled
    wait();
    assert_eq!(memo_alloc::report(KEY).expect("report").shape_classes, 1);
    // The small shape's first block waits idle until the large shape's passes have passed
    // it over eight times.
    for _ in 0..8 {
        assert_eq!(pass(SMALL), small);
        assert_eq!(pass(LARGE), large);
    }
    wait();
    let before = memo_alloc::stats();
    for _ in 0..4 {
        assert_eq!(pass(SMALL), small);
        assert_eq!(pass(LARGE), large);
    }
    let after = memo_alloc::stats();
    // Every request of the alternating passes was served from a slab, and none profiled.
    assert_eq!(after.passes_profiled, before.passes_profiled);
    let requests = after.replay_allocations - before.replay_allocations;
    assert_eq!(after.slab_hits - before.slab_hits, requests, "{after:?}");
    // The large shape's block (3 MiB of pages written), which the small shape's passes
    // use too: one class holding a block of its own would add its 1.5 MiB.
    assert!(
        after.slab_resident_bytes < 3 * MIB + MIB / 2,
        "{} KiB of slab resident",
        after.slab_resident_bytes >> 10
    );
}
