//! One-time setup at the first pass: fork handling and plans from `MEMO_PLAN_DIR`.

use std::sync::Once;

use crate::config::config;

static ONCE: Once = Once::new();

/// Runs the setup once (with the re-entrancy guard set by the caller).
pub(crate) fn once() {
    ONCE.call_once(|| {
        // SAFETY: registering a plain `extern "C"` function with no captured state.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork_in_parent),
                Some(after_fork_in_child),
            );
        }
        let cfg = config();
        if let Some(dir) = &cfg.plan_dir {
            crate::files::load_plans(dir, cfg.max_plans);
        }
    });
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
