//! The per-thread state of the allocation path: which path this thread's allocations take
//! ([`AllocPath`]), the pass context it is in, and the re-entrancy guard of the
//! allocator's own work (bookkeeping). `const`-initialised, without destructor, so reading
//! it is one thread-local access and works during thread teardown.
//!
//! The context is opaque here ([`Entered`]): `pass::context` owns its type, and the
//! allocation path casts the pointer back.

use std::cell::Cell;
use std::ptr;

/// What the allocation path does on this thread right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum AllocPath {
    /// No pass, or bookkeeping in progress: straight to the backend.
    Backend = 0,
    /// A profiled pass: record, then backend.
    Profile = 1,
    /// A replayed pass: slab first.
    Replay = 2,
    /// A pass running on the backend: count, then backend.
    Counted = 3,
}

/// A pass context as the thread state holds it: a `pass::context::Context`.
pub(crate) enum Entered {}

/// One thread's state (see the module documentation).
pub(crate) struct ThreadState {
    /// The allocation path's one branch.
    pub(crate) path: Cell<AllocPath>,
    /// `path` as it was before bookkeeping started (restored after).
    saved: Cell<AllocPath>,
    /// Re-entrancy depth of bookkeeping.
    busy: Cell<u32>,
    /// The allocator's own thread (the planner): all its work is the allocator's.
    own_thread: Cell<bool>,
    /// The current context of the running pass (boxed, owned by the pass); null outside
    /// passes.
    pub(crate) context: Cell<*mut Entered>,
}

impl ThreadState {
    const fn new() -> ThreadState {
        ThreadState {
            path: Cell::new(AllocPath::Backend),
            saved: Cell::new(AllocPath::Backend),
            busy: Cell::new(0),
            own_thread: Cell::new(false),
            context: Cell::new(ptr::null_mut()),
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

/// The path this thread's allocations take.
#[inline(always)]
pub(crate) fn path() -> AllocPath {
    with(|s| s.path.get(), AllocPath::Backend)
}

/// The path and the current context, in one thread-local access. The context is non-null
/// whenever the path is not [`AllocPath::Backend`].
#[inline(always)]
pub(crate) fn path_and_context() -> (AllocPath, *mut Entered) {
    with(
        |s| (s.path.get(), s.context.get()),
        (AllocPath::Backend, ptr::null_mut()),
    )
}

/// This thread's current context, or null.
pub(crate) fn context() -> *mut Entered {
    with(|s| s.context.get(), ptr::null_mut())
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
        s.saved.set(s.path.get());
        s.path.set(AllocPath::Backend);
    }
    s.busy.set(b + 1);
}

/// Ends what [`begin_bookkeeping`] began.
#[inline]
pub(crate) fn end_bookkeeping(s: &ThreadState) {
    let b = s.busy.get().saturating_sub(1);
    s.busy.set(b);
    if b == 0 {
        s.path.set(s.saved.get());
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

/// Sets the path that will be in force once bookkeeping ends (now, outside bookkeeping).
pub(crate) fn set_path(s: &ThreadState, path: AllocPath) {
    if s.busy.get() == 0 {
        s.path.set(path);
    } else {
        s.saved.set(path);
    }
}
