//! The per-thread state on the allocation path: `const`-initialised, without destructor,
//! so reading it is one thread-local access and works during thread teardown.

use std::cell::Cell;
use std::ptr;

use crate::pass::Pass;

/// Deepest op-scope nesting tracked; deeper scopes are attributed to their ancestor at
/// this depth, identically in profiling and replay.
pub(crate) const MAX_DEPTH: usize = 64;

/// What the allocation path does on this thread right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Hot {
    /// No pass, or bookkeeping in progress: straight to the backend.
    Backend = 0,
    /// A profiled pass: record, then backend.
    Profile = 1,
    /// A replayed pass: slab first.
    Replay = 2,
}

pub(crate) struct ThreadState {
    /// The allocation path's one branch.
    pub(crate) hot: Cell<Hot>,
    /// `hot` as it was before bookkeeping started (restored after).
    pub(crate) saved: Cell<Hot>,
    /// Re-entrancy depth of bookkeeping.
    pub(crate) busy: Cell<u32>,
    /// The running pass, owned by its `PassGuard`.
    pub(crate) pass: Cell<*mut Pass>,
    /// Nesting of `pass()` calls: inner ones are scopes.
    pub(crate) pass_depth: Cell<u32>,
    /// The op-scope stack: scope node ids (the pass's root is not on it).
    pub(crate) stack: [Cell<u32>; MAX_DEPTH],
    /// Number of entries in `stack` (may exceed `MAX_DEPTH`: the excess is not stored).
    pub(crate) depth: Cell<u32>,
}

impl ThreadState {
    const fn new() -> ThreadState {
        ThreadState {
            hot: Cell::new(Hot::Backend),
            saved: Cell::new(Hot::Backend),
            busy: Cell::new(0),
            pass: Cell::new(ptr::null_mut()),
            pass_depth: Cell::new(0),
            stack: [const { Cell::new(0) }; MAX_DEPTH],
            depth: Cell::new(0),
        }
    }

    /// The innermost scope node, or `root` outside any op.
    #[inline]
    pub(crate) fn top(&self, root: u32) -> u32 {
        let d = self.depth.get() as usize;
        if d == 0 {
            root
        } else {
            self.stack[d.min(MAX_DEPTH) - 1].get()
        }
    }
}

thread_local! {
    static STATE: ThreadState = const { ThreadState::new() };
}

/// Runs `f` on this thread's state. The state has no destructor, so it is always there;
/// the fallback only keeps the code free of panics. It is evaluated before the call, so it
/// must be a plain value: never an expression with effects, such as an allocation.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&ThreadState) -> R, fallback: R) -> R {
    STATE.try_with(f).unwrap_or(fallback)
}

/// The allocation path's mode on this thread.
#[inline(always)]
pub(crate) fn hot() -> Hot {
    with(|s| s.hot.get(), Hot::Backend)
}

/// The mode and the running pass, in one thread-local access. The pass pointer is non-null
/// whenever the mode is not [`Hot::Backend`].
#[inline(always)]
pub(crate) fn hot_pass() -> (Hot, *mut Pass) {
    with(
        |s| (s.hot.get(), s.pass.get()),
        (Hot::Backend, std::ptr::null_mut()),
    )
}

/// Marks the start of bookkeeping: until the matching [`end_bookkeeping`], this thread's
/// allocations go straight to the backend.
#[inline]
pub(crate) fn begin_bookkeeping(s: &ThreadState) {
    let b = s.busy.get();
    if b == 0 {
        s.saved.set(s.hot.get());
        s.hot.set(Hot::Backend);
    }
    s.busy.set(b + 1);
}

#[inline]
pub(crate) fn end_bookkeeping(s: &ThreadState) {
    let b = s.busy.get().saturating_sub(1);
    s.busy.set(b);
    if b == 0 {
        s.hot.set(s.saved.get());
    }
}

/// Runs `f` with the re-entrancy guard set: its allocations go straight to the backend.
/// The guard is released also when `f` unwinds.
pub(crate) fn with_bookkeeping<R>(f: impl FnOnce() -> R) -> R {
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            with(end_bookkeeping, ());
        }
    }
    with(begin_bookkeeping, ());
    let _release = Release;
    f()
}

/// Sets the mode that will be in force once bookkeeping ends.
pub(crate) fn set_mode_after_bookkeeping(s: &ThreadState, hot: Hot) {
    if s.busy.get() == 0 {
        s.hot.set(hot);
    } else {
        s.saved.set(hot);
    }
}
