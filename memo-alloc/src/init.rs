//! One-time setup at the first pass: fork handling and plans from `MEMO_PLAN_DIR`.

use std::sync::Once;

use crate::config::config;

/// Guards the fork-handler registration. `pthread_once`, not `std::sync::Once`: glibc's
/// survives a fork in the middle of the initialisation (the child runs it again), while a
/// `std` `Once` copied mid-run would make the child wait forever.
static mut FORK_HANDLERS: libc::pthread_once_t = libc::PTHREAD_ONCE_INIT;

static PLANS: Once = Once::new();

/// Runs the setup once (with the re-entrancy guard set by the caller).
///
/// The fork handlers are registered first, and plans loaded only after, so a `fork` while
/// another thread loads plans happens with the handlers in place: the child is marked
/// disabled and never waits on `PLANS`, which the copied thread can no longer finish.
pub(crate) fn once() {
    // SAFETY: `FORK_HANDLERS` is only ever passed to `pthread_once`, which synchronises
    // all access to it; `register_fork_handlers` is a plain `extern "C"` function.
    unsafe {
        libc::pthread_once(&raw mut FORK_HANDLERS, register_fork_handlers);
    }
    if crate::pass::DISABLED.load(std::sync::atomic::Ordering::Relaxed) {
        return; // a forked child: its passes run on the backend; no plans needed
    }
    PLANS.call_once(|| {
        let cfg = config();
        if let Some(dir) = &cfg.plan_dir {
            crate::files::load_plans(dir, cfg.max_plans);
        }
    });
}

extern "C" fn register_fork_handlers() {
    // SAFETY: registering plain `extern "C"` functions with no captured state.
    unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork_in_parent),
            Some(after_fork_in_child),
        );
    }
}

/// In a forked child only the forking thread survives: a lock another thread held at the
/// fork would stay held, and the data it guards could be half-updated (a retired plan
/// freed but still listed, a summary half-written). So the forking thread takes every
/// lock before the fork, when no other thread is inside a critical section, and releases
/// them on both sides afterwards. The child runs every later pass on the backend; slab
/// pointers it inherited are still recognised and freed correctly.
extern "C" fn before_fork() {
    crate::registry::before_fork();
    crate::region::before_fork();
}

extern "C" fn after_fork_in_parent() {
    crate::region::after_fork();
    crate::registry::after_fork();
}

extern "C" fn after_fork_in_child() {
    crate::pass::DISABLED.store(true, std::sync::atomic::Ordering::Relaxed);
    crate::region::after_fork();
    crate::registry::after_fork();
}
