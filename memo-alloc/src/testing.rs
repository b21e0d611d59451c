//! Hooks for this crate's own tests (not part of the contract; hidden from the docs).

pub use crate::sync::LockId;

/// Installs `hook`, called with the lock's id right after any lock of the allocator is
/// taken (at pass boundaries), by the thread that took it: a test can park a thread inside
/// a critical section (for example to fork while it is there). `None` removes it.
pub fn set_lock_hook(hook: Option<fn(LockId)>) {
    crate::sync::set_lock_hook(hook);
}
