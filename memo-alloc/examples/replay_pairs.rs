//! Runs replayed alloc+free pairs for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/replay_pairs 64 100`
//! (size in bytes, passes of 1000 pairs after one profiled pass).
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

static A: memo_alloc::MemoAlloc = memo_alloc::MemoAlloc::system();

fn pairs(layout: Layout) {
    for _ in 0..1000 {
        // SAFETY: non-zero size; freed with its layout.
        unsafe {
            let p = A.alloc(layout);
            black_box(p);
            A.dealloc(p, layout);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let layout = Layout::from_size_align(size, 16).expect("layout");
    for _ in 0..=passes {
        let _p = memo_alloc::pass("pairs");
        pairs(layout);
    }
    let s = memo_alloc::stats();
    eprintln!("slab hits {} misses {}", s.slab_hits, s.misses);
}
