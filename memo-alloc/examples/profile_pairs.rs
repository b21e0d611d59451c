//! Runs profiled passes of small alloc+free pairs for instruction counting:
//! `valgrind --tool=callgrind target/release/examples/profile_pairs 20`.
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

static A: memo_alloc::MemoAlloc = memo_alloc::MemoAlloc::system();

fn main() {
    let passes: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    memo_alloc::configure(
        memo_alloc::Config::default()
            .with_mode(memo_alloc::Mode::Profile)
            .with_strategy(memo_planner::OffsetStrategy::Naive),
    );
    let layout = Layout::from_size_align(64, 8).expect("layout");
    for _ in 0..passes {
        let _p = memo_alloc::pass("profile-pairs");
        for _ in 0..10_000 {
            // SAFETY: non-zero size; freed with its layout.
            unsafe {
                let p = A.alloc(layout);
                black_box(p);
                A.dealloc(p, layout);
            }
        }
    }
}
