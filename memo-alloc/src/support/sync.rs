//! Where every atomic, owner-only cell and lock of the crate comes from. A leaf.
//!
//! The lock-free protocols (slot hand-off in `replay`, the instance pool in `replay::slab`,
//! the key state machine and reclamation in `registry`) live on heap objects built
//! from the switched types below: under `cfg(loom)` they are loom's, so the models in
//! `loom_tests.rs` run this crate's real code. Statics that must be `const`-initialised
//! and take part in no modelled protocol (counters, the region directory, the locks of
//! pass boundaries) use [`plain`] atomics, which are never switched.
//!
//! # The locks
//! [`SpinLock`] is the crate's only lock: it never allocates, is only ever taken at pass
//! boundaries (never inside `alloc`, `dealloc` or `realloc`), and a forked child can
//! reset it. Every lock is a `static` named by a [`LockId`]; `pass/fork.rs` takes them all
//! before a `fork`, in the order of [`LockId`], which is also the only order in which the
//! code nests them.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};

pub(crate) use std::sync::atomic::Ordering;

/// Atomics for `const` statics outside the modelled protocols.
pub(crate) mod plain {
    pub(crate) use std::sync::atomic::{
        AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
}

/// State only the owner of an object touches (a slab instance's cursors, say), with
/// loom's access checks under `cfg(loom)`.
pub(crate) struct OwnerCell<T> {
    #[cfg(not(loom))]
    value: std::cell::UnsafeCell<T>,
    #[cfg(loom)]
    value: loom::cell::UnsafeCell<T>,
}

impl<T> OwnerCell<T> {
    pub(crate) fn new(value: T) -> OwnerCell<T> {
        OwnerCell {
            #[cfg(not(loom))]
            value: std::cell::UnsafeCell::new(value),
            #[cfg(loom)]
            value: loom::cell::UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value.
    ///
    /// # Safety
    /// The caller owns the object: no other thread accesses the value until the caller
    /// hands the object over with a release operation.
    #[inline(always)]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(loom))]
        {
            // SAFETY: exclusive by the caller's contract.
            f(unsafe { &mut *self.value.get() })
        }
        #[cfg(loom)]
        {
            // SAFETY: exclusive by the caller's contract (which loom checks).
            self.value.with_mut(|p| f(unsafe { &mut *p }))
        }
    }
}

/// Waits a moment in a spin loop (and lets loom schedule another thread).
#[inline]
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// The locks of the crate, in the one order in which code may nest them and in which the
/// fork handler takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockId {
    /// `registry`: creating key entries.
    Registry = 0,
    /// `registry`: the summaries of the keys' last profiles.
    Summaries = 1,
    /// `reclaim`: the list of retired plans (taken by `reclaim`, which releases chunks).
    Retired = 2,
    /// `region`: carving and releasing chunks, growing instance pools.
    Region = 3,
    /// `recorder`: spare profiling buffers.
    Spare = 4,
    /// `planner`: the queue of profiles to plan.
    Planner = 5,
}

impl LockId {
    /// Every lock, in order.
    pub const ALL: [LockId; 6] = [
        LockId::Registry,
        LockId::Summaries,
        LockId::Retired,
        LockId::Region,
        LockId::Spare,
        LockId::Planner,
    ];
}

/// Called with the lock's id right after each acquisition (tests only; see
/// `crate::testing`). Null: no hook.
static LOCK_HOOK: plain::AtomicPtr<()> = plain::AtomicPtr::new(std::ptr::null_mut());

/// Installs (or, with `None`, removes) the lock hook.
pub(crate) fn set_lock_hook(hook: Option<fn(LockId)>) {
    let p = hook.map_or(std::ptr::null_mut(), |f| f as *mut ());
    LOCK_HOOK.store(p, Ordering::Release);
}

/// A spin lock for pass boundaries; see the module documentation.
pub(crate) struct SpinLock {
    held: plain::AtomicBool,
    id: LockId,
}

impl SpinLock {
    pub(crate) const fn new(id: LockId) -> SpinLock {
        SpinLock {
            held: plain::AtomicBool::new(false),
            id,
        }
    }

    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        self.acquire();
        order::acquired(self.id);
        self.call_hook();
        SpinGuard { lock: self }
    }

    fn call_hook(&self) {
        let hook = LOCK_HOOK.load(Ordering::Acquire);
        if !hook.is_null() {
            // SAFETY: only `set_lock_hook` stores here, and only `fn(LockId)` pointers.
            let hook: fn(LockId) = unsafe { std::mem::transmute::<*mut (), fn(LockId)>(hook) };
            hook(self.id);
        }
    }

    /// Takes the lock if it is free, without waiting: `None` if anyone holds it, this
    /// thread included. Never waiting, it is exempt from the lock order.
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_>> {
        self.held
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        order::acquired_without_waiting(self.id);
        self.call_hook();
        Some(SpinGuard { lock: self })
    }

    fn acquire(&self) {
        loop {
            if self
                .held
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            while self.held.load(Ordering::Relaxed) {
                spin_wait();
            }
        }
    }

    /// Which lock this is.
    #[cfg(test)]
    pub(crate) fn id(&self) -> LockId {
        self.id
    }

    /// Takes the lock without a guard: for the fork handlers, which release it with
    /// [`SpinLock::force_unlock`] on both sides of the fork.
    pub(crate) fn lock_for_fork(&self) {
        self.acquire();
        order::acquired(self.id);
    }

    /// Releases the lock whoever holds it: only for the fork handlers (on the thread that
    /// took it with [`SpinLock::lock_for_fork`]).
    pub(crate) fn force_unlock(&self) {
        order::released(self.id);
        self.held.store(false, Ordering::Release);
    }
}

/// Releases its [`SpinLock`] when dropped.
pub(crate) struct SpinGuard<'a> {
    lock: &'a SpinLock,
}

impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        order::released(self.lock.id);
        self.lock.held.store(false, Ordering::Release);
    }
}

/// Debug builds check the lock order: a thread may take a lock only while holding none
/// of the same or a later [`LockId`] (which also rules out taking one lock twice).
mod order {
    use super::LockId;

    #[cfg(debug_assertions)]
    thread_local! {
        static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    #[inline]
    pub(super) fn acquired(id: LockId) {
        #[cfg(debug_assertions)]
        let _ = HELD.try_with(|h| {
            debug_assert_eq!(
                h.get() >> id as u32,
                0,
                "lock {id:?} taken while holding it or a later one (held: {:#b})",
                h.get()
            );
            h.set(h.get() | 1 << id as u32);
        });
        let _ = id;
    }

    /// A lock taken by `try_lock`: it cannot deadlock, so any order is fine.
    #[inline]
    pub(super) fn acquired_without_waiting(id: LockId) {
        #[cfg(debug_assertions)]
        let _ = HELD.try_with(|h| h.set(h.get() | 1 << id as u32));
        let _ = id;
    }

    #[inline]
    pub(super) fn released(id: LockId) {
        #[cfg(debug_assertions)]
        let _ = HELD.try_with(|h| h.set(h.get() & !(1 << id as u32)));
        let _ = id;
    }
}

/// A value behind a [`SpinLock`].
pub(crate) struct SpinCell<T> {
    lock: SpinLock,
    value: std::cell::UnsafeCell<T>,
}

// SAFETY: the value is only reached through `with`, which holds the lock.
unsafe impl<T: Send> Sync for SpinCell<T> {}

impl<T> SpinCell<T> {
    pub(crate) const fn new(id: LockId, value: T) -> SpinCell<T> {
        SpinCell {
            lock: SpinLock::new(id),
            value: std::cell::UnsafeCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _g = self.lock.lock();
        // SAFETY: the lock is held for the whole access.
        f(unsafe { &mut *self.value.get() })
    }

    /// The lock, for the fork handlers.
    pub(crate) fn lock(&self) -> &SpinLock {
        &self.lock
    }
}
