//! One-time setup at the first pass, and `fork` safety.
//!
//! # Locks across `fork`
//! In a forked child only the forking thread survives: a lock another thread held at the
//! fork would stay held forever, and the data it guards could be half-updated. So the
//! prepare handler takes every lock of the crate, in the order of `sync::LockId` (the one
//! order code nests them in), waiting for any thread inside a critical section to leave
//! it; the parent and child handlers release them all afterwards. The child is then a
//! normal process: its passes profile, plan and replay, and slab pointers it inherited are
//! recognised and freed correctly (instances other threads held at the fork stay taken).
//!
//! A child forked while the first pass's setup (reading the configuration, loading plans)
//! was running on another thread cannot wait for that setup, which will never finish in
//! the child: such a child runs every pass on the backend. The setup and the handlers'
//! registration run under `pthread_once`, which glibc runs again in a child forked in the
//! middle of it, so no child waits on a copy of another thread's initialisation; the
//! configuration itself is read before the fork (the prepare handler waits for a thread
//! reading it), so the child finds it whole.
//!
//! One fork escapes the handlers: `fork` reads the list of handlers before it copies the
//! process, so a thread that registers them in between (the first pass, on another
//! thread) goes on into the setup, and the child can be a copy of it reading the
//! configuration, with none of the handlers run. That child would wait forever on the
//! configuration's `OnceLock`. The registration notes the process it ran in: a process
//! that finds the handlers registered by another one (its parent) before its own setup
//! finished is such a child, and runs every pass on the backend as well
//! ([`registered_here`]).

use crate::config::config;
use crate::support::sync::{plain, Ordering, SpinLock};

/// Guards the fork-handler registration. `pthread_once`, not `std::sync::Once`: glibc's
/// survives a fork in the middle of the initialisation (the child runs it again), while a
/// `std` `Once` copied mid-run would make the child wait forever.
static mut FORK_HANDLERS: libc::pthread_once_t = libc::PTHREAD_ONCE_INIT;

/// Guards the first pass's setup: `pthread_once` too, so that a child forked while another
/// thread ran the setup runs it again rather than waiting for a thread it does not have.
static mut SETUP: libc::pthread_once_t = libc::PTHREAD_ONCE_INIT;
/// The first pass's setup finished.
static READY: plain::AtomicBool = plain::AtomicBool::new(false);
/// This process is a child forked before the setup finished: passes run on the backend.
static DISABLED: plain::AtomicBool = plain::AtomicBool::new(false);
/// The process that registered the fork handlers (0: none yet).
static REGISTERED_BY: plain::AtomicU32 = plain::AtomicU32::new(0);

/// Whether a pass has started in this process (the first pass's setup ran).
pub(crate) fn started() -> bool {
    READY.load(Ordering::Relaxed)
}

/// Runs the setup once (with the re-entrancy guard set by the caller).
///
/// The fork handlers are registered first, and plans loaded only after, so a `fork` while
/// another thread loads plans happens with the handlers in place.
pub(crate) fn once() {
    if READY.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: `FORK_HANDLERS` is only ever passed to `pthread_once`, which synchronises
    // all access to it; `register_fork_handlers` is a plain `extern "C"` function.
    unsafe {
        libc::pthread_once(&raw mut FORK_HANDLERS, register_fork_handlers);
    }
    if disabled() || !registered_here() {
        DISABLED.store(true, Ordering::Relaxed);
        return;
    }
    // SAFETY: `SETUP` is only ever passed to `pthread_once`; `setup` is a plain
    // `extern "C"` function that does not unwind.
    unsafe {
        libc::pthread_once(&raw mut SETUP, setup);
    }
    READY.store(true, Ordering::Release);
}

/// The first pass's setup: the configuration, and the plans of `MEMO_PLAN_DIR`. A panic
/// (none is expected) is caught: it must not unwind out of `pthread_once`.
extern "C" fn setup() {
    let _ = std::panic::catch_unwind(|| {
        let cfg = config();
        if let Some(dir) = &cfg.plan_dir {
            crate::plan::load::load_plans(dir, cfg.max_plans);
        }
    });
}

/// Whether passes must run on the backend (see the module documentation).
pub(crate) fn disabled() -> bool {
    DISABLED.load(Ordering::Relaxed)
}

/// Whether this process registered the fork handlers (they are registered: called after
/// `FORK_HANDLERS`' `pthread_once`). A child forked after its parent registered them
/// but before the parent's setup finished did not: either the child handler ran and
/// disabled it already, or the fork missed the handlers (see the module documentation).
fn registered_here() -> bool {
    // SAFETY: `getpid` has no preconditions.
    REGISTERED_BY.load(Ordering::Relaxed) == unsafe { libc::getpid() } as u32
}

extern "C" fn register_fork_handlers() {
    // SAFETY: `getpid` has no preconditions.
    REGISTERED_BY.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
    // SAFETY: registering plain `extern "C"` functions with no captured state.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
        );
    }
}

/// Every lock of the crate, in `LockId` order.
fn locks() -> [&'static SpinLock; 6] {
    [
        crate::registry::INSERT.lock(),
        &crate::registry::SUMMARIES,
        crate::registry::reclaim::RECLAIMER.lock(),
        &crate::memory::region::LOCK,
        crate::profiling::recorder::SPARE.lock(),
        crate::plan::worker::lock(),
    ]
}

extern "C" fn before_fork() {
    // The configuration is a `std` `OnceLock`: copied into the child while another thread
    // reads it from the environment, it would make the child's first use wait forever.
    // Read here, the fork waits for that thread instead (its allocations go to the
    // backend, before any lock of the crate is taken).
    crate::support::thread::with_bookkeeping(|| {
        config();
    });
    for lock in locks() {
        lock.lock_for_fork();
    }
}

extern "C" fn after_fork_in_parent() {
    for lock in locks().into_iter().rev() {
        lock.force_unlock();
    }
}

extern "C" fn after_fork_in_child() {
    if !READY.load(Ordering::Acquire) {
        DISABLED.store(true, Ordering::Relaxed);
    }
    for lock in locks().into_iter().rev() {
        lock.force_unlock();
    }
    crate::plan::worker::after_fork_in_child();
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::support::sync::LockId;

    #[test]
    fn the_fork_handlers_take_every_lock_in_order() {
        let ids: Vec<LockId> = super::locks().iter().map(|l| l.id()).collect();
        assert_eq!(ids, LockId::ALL);
    }
}
