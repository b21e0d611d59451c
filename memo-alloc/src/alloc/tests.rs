//! The allocator's own blocks, and the backend calls a pass makes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use super::global::MemoAlloc;
use crate::api::guards::pass;
use crate::config::Mode;
use crate::memory::{geometry, own_blocks, region};
use crate::support::thread;

struct Counting(AtomicU64);

// SAFETY: forwards to `System`.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.0.fetch_add(1, Ordering::SeqCst);
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

static COUNTING: MemoAlloc<Counting> = MemoAlloc::new(Counting(AtomicU64::new(0)));

/// Serialises the tests that carve own blocks.
static CARVING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `attempt` until it returns an own block (carving gives up when the region lock
/// is busy: another test carving a slab), freeing with `undo` what it got instead.
fn own_block(mut attempt: impl FnMut() -> *mut u8, mut undo: impl FnMut(*mut u8)) -> *mut u8 {
    for _ in 0..1000 {
        let p = attempt();
        if own_blocks::contains(p) {
            return p;
        }
        undo(p);
        std::thread::yield_now();
    }
    panic!("no own block in 1000 attempts");
}

/// The allocator's own large buffers come from region chunks, not the backend, and
/// their chunks go back to the region when freed.
#[test]
fn own_work_takes_large_blocks_from_the_region_and_gives_them_back() {
    let _serial = CARVING.lock().unwrap_or_else(|e| e.into_inner());
    static OWN: MemoAlloc<Counting> = MemoAlloc::new(Counting(AtomicU64::new(0)));
    let big = Layout::from_size_align(own_blocks::MIN_BYTES + 1, 64).unwrap();
    let small = Layout::from_size_align(own_blocks::MIN_BYTES - 1, 64).unwrap();
    let is_own = own_blocks::contains;
    // SAFETY (every block below): non-zero sizes; each block is freed once, with the
    // layout it has then.
    thread::with_bookkeeping(|| unsafe {
        let p = own_block(|| OWN.alloc_zeroed(big), |p| OWN.dealloc(p, big));
        assert_eq!((*p, *p.add(big.size() - 1)), (0, 0), "zero-filled");
        p.write_bytes(7, big.size());
        // Within its chunks, a realloc stays in place; past them it moves (to another
        // own block, or to the backend if the lock is busy), keeping the contents.
        let q = OWN.realloc(p, big, 2 * own_blocks::MIN_BYTES);
        assert_eq!(q, p);
        let grown = Layout::from_size_align(geometry::CHUNK + 1, 64).unwrap();
        let r = OWN.realloc(q, big, grown.size());
        assert!(r != q && *r.add(big.size() - 1) == 7);
        OWN.dealloc(r, grown);
        // A backend block growing past the threshold moves to the region.
        let t = own_block(
            || {
                let s = OWN.alloc(small);
                assert!(!is_own(s));
                s.write_bytes(9, small.size());
                let t = OWN.realloc(s, small, big.size());
                assert_eq!(*t.add(small.size() - 1), 9);
                t
            },
            |t| OWN.dealloc(t, big),
        );
        OWN.dealloc(t, big);
    });
    // Outside the allocator's own work, large blocks are the backend's.
    let before = OWN.backend().0.load(Ordering::SeqCst);
    // SAFETY: non-zero size; freed with its layout.
    unsafe {
        let u = OWN.alloc(big);
        assert!(!is_own(u));
        OWN.dealloc(u, big);
    }
    assert_eq!(OWN.backend().0.load(Ordering::SeqCst), before + 1);
}

/// Freed own blocks are returned to the region without its lock, then reclaimed by
/// the next carve: carving and freeing a block over and over does not use up the
/// region (it would after 32k chunks).
#[test]
fn freed_own_blocks_are_reclaimed() {
    let _serial = CARVING.lock().unwrap_or_else(|e| e.into_inner());
    let big = Layout::from_size_align(own_blocks::MIN_BYTES, 8).unwrap();
    let chunks = region::reserved() / geometry::CHUNK;
    thread::with_bookkeeping(|| {
        for _ in 0..chunks.max(1 << 15) + 10 {
            let p = own_blocks::alloc(big);
            if p.is_null() {
                continue; // the region lock was busy (a slab carved by another test)
            }
            // SAFETY: just allocated with `big`, freed once.
            unsafe { own_blocks::free(p, big.size()) };
        }
        let p = own_blocks::alloc(big);
        assert!(
            !p.is_null(),
            "the region ran out: freed blocks were not reclaimed"
        );
        // SAFETY: as above.
        unsafe { own_blocks::free(p, big.size()) };
    });
}

/// An allocation in a pass calls the backend once when profiled and not at all when
/// replayed: the path to the slab makes no backend block on the side (the thread state's
/// fallback value is a plain value, never an allocation).
#[test]
fn an_allocation_in_a_pass_calls_the_backend_at_most_once() {
    let layout = Layout::from_size_align(64, 8).unwrap();
    let calls = || COUNTING.backend().0.load(Ordering::SeqCst);
    let run = || {
        let _p = pass("lib-tests/backend-calls");
        // SAFETY: non-zero size; freed with the same layout.
        unsafe {
            let p = COUNTING.alloc(layout);
            assert!(!p.is_null());
            COUNTING.dealloc(p, layout);
        }
    };
    let n0 = calls();
    run();
    assert!(crate::plan::worker::wait_for_plans(
        std::time::Duration::from_secs(30)
    ));
    let n1 = calls();
    assert_eq!(
        n1 - n0,
        1,
        "profiled: the backend serves the allocation once"
    );
    run();
    if crate::config::config().mode == Mode::Replay {
        assert_eq!(calls() - n1, 0, "replayed from the slab: no backend call");
    }
}

/// The fast backends' constructors are `const` (usable in a `static`), and a request
/// outside a pass goes to the backend and comes back to it.
#[cfg(all(feature = "jemalloc", feature = "mimalloc"))]
#[test]
fn the_fast_backends_serve_what_is_not_planned() {
    static JEMALLOC: MemoAlloc<crate::Jemalloc> = MemoAlloc::jemalloc();
    static MIMALLOC: MemoAlloc<mimalloc::MiMalloc> = MemoAlloc::mimalloc();
    let layout = Layout::from_size_align(3000, 64).unwrap();
    // SAFETY: each block is written within its layout and freed once by its allocator.
    unsafe {
        let p = JEMALLOC.alloc(layout);
        assert!(!p.is_null() && p as usize % 64 == 0);
        p.write_bytes(7, 3000);
        assert!(
            tikv_jemallocator::usable_size(p) >= 3000,
            "jemalloc's block"
        );
        JEMALLOC.dealloc(p, layout);
        let q = MIMALLOC.alloc_zeroed(layout);
        assert!(!q.is_null() && q as usize % 64 == 0);
        assert_eq!(*q.add(2999), 0);
        MIMALLOC.dealloc(q, layout);
    }
}
