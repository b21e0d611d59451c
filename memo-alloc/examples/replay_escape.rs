//! `replay_pairs` with an output: each pass ends with a small allocation that outlives it
//! (kept to the end), as a pass's output does, so that the plan lists an escaping lane
//! request and replay counts lane requests (see memo-alloc's `profiling/lane_count.rs`):
//! `valgrind --tool=callgrind target/release/examples/replay_escape 64 100 escape`
//! (without `escape`, the same binary without the output, for a difference in one code
//! layout: a separate binary lays `replay_pairs`'s loop out differently).
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

/// The layout of a pass's output.
const OUTPUT: Layout = match Layout::from_size_align(24, 8) {
    Ok(l) => l,
    Err(_) => panic!("layout"),
};

/// A pass's output, kept to the end of the program (a second call site of `alloc` or
/// `dealloc` would change how the pairs' loop compiles: `alloc_zeroed` serves).
#[inline(never)]
fn output() -> *mut u8 {
    // SAFETY: `OUTPUT` is not zero-sized.
    black_box(unsafe { A.alloc_zeroed(OUTPUT) })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(64);
    let passes: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let escape = args.next().is_some_and(|a| a == "escape");
    let layout = Layout::from_size_align(size, 16).expect("layout");
    let mut outputs = Vec::with_capacity(if escape { passes + 1 } else { 0 });
    for _ in 0..=passes {
        let _p = memo_alloc::pass("pairs");
        pairs(layout);
        if escape {
            outputs.push(output());
        }
    }
    let s = memo_alloc::stats();
    eprintln!(
        "slab hits {} misses {} ({:?}), outputs {}",
        s.slab_hits,
        s.misses,
        s.misses_by_reason,
        outputs.len()
    );
}
