//! `fork()` while another thread is inside each of the allocator's critical sections.
//!
//! A thread is parked inside the critical section of one lock at a time (by the test hook
//! called after each lock acquisition), the main thread forks, and the child runs passes
//! of its own (a new key: profiled, planned, replayed, reported), which take every lock,
//! and exits. Without the fork handlers taking that lock the child finds it held by a
//! thread it does not have and spins forever: the parent kills it and the test fails.

mod common;

use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Duration;

use memo_alloc::testing::{self, LockId};
use memo_alloc::MemoAlloc;

#[global_allocator]
static A: MemoAlloc<common::Backend> = MemoAlloc::new(common::Backend);

/// The lock to park in (`u8::MAX`: none).
static TARGET: AtomicU8 = AtomicU8::new(u8::MAX);
/// The parked thread is inside the target lock's critical section.
static INSIDE: AtomicBool = AtomicBool::new(false);

thread_local! {
    static PARKER: Cell<bool> = const { Cell::new(false) };
}

fn hook(id: LockId) {
    if PARKER.with(|p| p.get()) && TARGET.load(Ordering::SeqCst) == id as u8 {
        TARGET.store(u8::MAX, Ordering::SeqCst); // park once
        INSIDE.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Passes of a new key: entry creation, a profile (spare buffers, the planner's queue, a
/// summary, publication, reclamation), replays (an instance carved), a report and the
/// stats: every lock.
fn exercise(key: &'static str) -> u64 {
    let mut sum = 0;
    for i in 0..3u8 {
        {
            let _p = memo_alloc::pass(key);
            let a = black_box(vec![i; 1000]);
            let b = black_box(vec![i; 100]);
            sum += a[999] as u64 + b[99] as u64;
        }
        // The planner thread (and its queue's lock) plans the profile.
        assert!(memo_alloc::wait_for_plans(Duration::from_secs(60)));
    }
    let r = memo_alloc::report(key).expect("the key ran");
    assert_eq!((r.passes_profiled, r.passes_replayed), (1, 2), "{r:?}");
    let _ = memo_alloc::stats();
    sum
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[test]
fn fork_while_a_thread_is_inside_each_lock() {
    // The default, background planner: its queue's lock is one of the locks.
    assert_eq!(
        memo_alloc::config::config().planner,
        memo_alloc::Planner::Background
    );
    exercise("fork-warm-up");
    testing::set_lock_hook(Some(hook));
    for lock in LockId::ALL {
        INSIDE.store(false, Ordering::SeqCst);
        TARGET.store(lock as u8, Ordering::SeqCst);
        let parker = std::thread::spawn(move || {
            PARKER.with(|p| p.set(true));
            exercise(leak(format!("fork-parker-{lock:?}")));
        });
        while !INSIDE.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // SAFETY: the child runs passes and exits with _exit; glibc's malloc and this
        // allocator's locks are fork-safe (that is what is tested).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = std::panic::catch_unwind(|| exercise(leak(format!("fork-child-{lock:?}"))));
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if ok.is_ok() { 0 } else { 1 }) };
        }
        let status = common::wait_bounded(pid, 30)
            .unwrap_or_else(|e| panic!("child forked inside {lock:?}: {e}"));
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child forked inside {lock:?} failed: status {status:#x}"
        );
        parker.join().unwrap();
    }
    testing::set_lock_hook(None);
}
