//! One-time setup at the first pass: fork handling and plans from `MEMO_PLAN_DIR`.

use std::sync::Once;

use crate::config::config;

static ONCE: Once = Once::new();

/// Runs the setup once (with the re-entrancy guard set by the caller).
pub(crate) fn once() {
    ONCE.call_once(|| {
        // SAFETY: registering a plain `extern "C"` function with no captured state.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
        let cfg = config();
        if let Some(dir) = &cfg.plan_dir {
            crate::files::load_plans(dir, cfg.max_plans);
        }
    });
}

/// In a forked child only the forking thread survives: locks other threads held stay
/// held. The child releases them and runs every later pass on the backend; slab pointers
/// it inherited are still recognised and freed correctly.
extern "C" fn after_fork_in_child() {
    crate::pass::DISABLED.store(true, std::sync::atomic::Ordering::Relaxed);
    crate::region::after_fork_in_child();
    crate::registry::after_fork_in_child();
}
