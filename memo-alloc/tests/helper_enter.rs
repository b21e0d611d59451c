//! Entering a helper context costs no allocation once a thread has entered one: a pool
//! worker that joins the pass op after op reuses its context's memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use memo_alloc::MemoAlloc;

/// The system allocator, counting the calls each thread makes.
struct Counting;

thread_local! {
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to System; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = CALLS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` with `l`.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: MemoAlloc<Counting> = MemoAlloc::new(Counting);

fn calls() -> u64 {
    CALLS.with(Cell::get)
}

#[test]
fn a_thread_enters_helper_contexts_without_allocating() {
    let run = |entries: usize| -> u64 {
        let _pass = memo_alloc::pass("helper-enter");
        let handle = memo_alloc::current().expect("inside a pass");
        std::thread::scope(|s| {
            s.spawn(|| {
                handle.in_scope(0, || ()); // the thread's first entry
                let before = calls();
                for _ in 0..entries {
                    handle.in_scope(0, || ());
                }
                calls() - before
            })
            .join()
            .unwrap()
        })
    };
    run(1);
    assert!(memo_alloc::wait_for_plans(Duration::from_secs(30)));
    let replay = memo_alloc::report("helper-enter").unwrap().passes_replayed;
    let allocated = run(100);
    assert_eq!(
        memo_alloc::report("helper-enter").unwrap().passes_replayed,
        replay + 1,
        "the pass replayed"
    );
    assert_eq!(allocated, 0, "100 entries allocated {allocated} times");
}
