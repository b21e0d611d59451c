//! Atomics and the one lock of the crate (for pass boundaries only).

pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// A minimal spin lock for pass boundaries: it never allocates, and a forked child can
/// reset it. It is never taken inside `alloc`, `dealloc` or `realloc`.
pub(crate) struct SpinLock {
    held: AtomicBool,
}

impl SpinLock {
    pub(crate) const fn new() -> SpinLock {
        SpinLock {
            held: AtomicBool::new(false),
        }
    }

    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        loop {
            if self
                .held
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return SpinGuard { lock: self };
            }
            while self.held.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
        }
    }

    /// Takes the lock without a guard: for the fork handlers, which release it with
    /// [`SpinLock::force_unlock`] on both sides of the fork.
    pub(crate) fn lock_for_fork(&self) {
        std::mem::forget(self.lock());
    }

    /// Releases the lock whoever holds it: only for the fork handlers.
    pub(crate) fn force_unlock(&self) {
        self.held.store(false, Ordering::Release);
    }
}

pub(crate) struct SpinGuard<'a> {
    lock: &'a SpinLock,
}

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}
