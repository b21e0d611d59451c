//! The per-thread state on the allocation path: `const`-initialised, without destructor,
//! so reading it is one thread-local access and works during thread teardown.

use std::cell::Cell;
use std::ptr;

use crate::pass::context::Context;

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
    /// A pass running on the backend: count, then backend.
    Counted = 3,
}

pub(crate) struct ThreadState {
    /// The allocation path's one branch.
    pub(crate) hot: Cell<Hot>,
    /// `hot` as it was before bookkeeping started (restored after).
    saved: Cell<Hot>,
    /// Re-entrancy depth of bookkeeping.
    busy: Cell<u32>,
    /// The allocator's own thread (the planner): all its work is the allocator's.
    own_thread: Cell<bool>,
    /// The running pass, owned by `lifecycle` (boxed); null outside passes.
    pub(crate) pass: Cell<*mut Context>,
}

impl ThreadState {
    const fn new() -> ThreadState {
        ThreadState {
            hot: Cell::new(Hot::Backend),
            saved: Cell::new(Hot::Backend),
            busy: Cell::new(0),
            own_thread: Cell::new(false),
            pass: Cell::new(ptr::null_mut()),
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
pub(crate) fn hot_pass() -> (Hot, *mut Context) {
    with(
        |s| (s.hot.get(), s.pass.get()),
        (Hot::Backend, ptr::null_mut()),
    )
}

/// The running pass of this thread, or null.
pub(crate) fn pass() -> *mut Context {
    with(|s| s.pass.get(), ptr::null_mut())
}

/// Whether what this thread allocates now is the allocator's own work: bookkeeping, or
/// anything on the allocator's own thread (see `own_blocks`).
#[inline]
pub(crate) fn own_work() -> bool {
    with(|s| s.busy.get() > 0 || s.own_thread.get(), false)
}

/// Whether this is the allocator's own thread (the planner).
pub(crate) fn is_own_thread() -> bool {
    with(|s| s.own_thread.get(), false)
}

/// Marks this thread as the allocator's own (the planner thread, at its start).
pub(crate) fn mark_own_thread() {
    with(|s| s.own_thread.set(true), ());
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

/// Ends what [`begin_bookkeeping`] began.
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

/// Sets the mode that will be in force once bookkeeping ends (now, outside bookkeeping).
pub(crate) fn set_mode(s: &ThreadState, hot: Hot) {
    if s.busy.get() == 0 {
        s.hot.set(hot);
    } else {
        s.saved.set(hot);
    }
}
