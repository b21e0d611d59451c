//! The per-thread state of the allocation path: which path this thread's allocations take
//! ([`AllocPath`]), the pass context it is in, and the re-entrancy guard of the
//! allocator's own work (bookkeeping). `const`-initialised, without destructor, so reading
//! it is one thread-local access and works during thread teardown.
//!
//! The path a pass asks for (`set_path`) is the *wanted* path; the path in force is
//! [`AllocPath::Observe`] instead while the thread is observed (a whole-program recording
//! runs, or the thread counts its heap: see `observe`), so that the allocation path still
//! reads one thread-local and takes one branch when nothing is observed. A thread starts
//! [`AllocPath::Fresh`]: its first call settles the path, once.
//!
//! The context is opaque here ([`Entered`]): `pass::context` owns its type, and the
//! allocation path casts the pointer back.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What the allocation path does on this thread right now. The paths whose value is odd
/// take the slow side of `dealloc` and `realloc` (one bit test: [`AllocPath::is_slow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum AllocPath {
    /// No pass, or bookkeeping in progress: straight to the backend.
    Backend = 0,
    /// A profiled pass: record, then backend.
    Profile = 1,
    /// A replayed pass: slab first.
    Replay = 2,
    /// Observed (a whole-program recording, or heap counting): the wanted path, then the
    /// observer.
    Observe = 3,
    /// A pass running on the backend: count, then backend.
    Counted = 4,
    /// A thread's first call: settle the path, then take it.
    Fresh = 5,
}

impl AllocPath {
    /// Whether `dealloc` and `realloc` take their slow side: profiled, observed or fresh.
    #[inline(always)]
    pub(crate) fn is_slow(self) -> bool {
        self as u8 & 1 != 0
    }
}

/// Every thread is observed (a whole-program recording runs).
static OBSERVE_ALL: AtomicBool = AtomicBool::new(false);

/// Requests outside passes of at least this many bytes take the slow side of the backend
/// path (the allocator's own large buffers); 0 while every thread is to be observed, so
/// that a thread outside passes notices at its next request.
pub(crate) const OUTSIDE_SLOW_DEFAULT: usize = 1 << 20;
static OUTSIDE_SLOW: AtomicUsize = AtomicUsize::new(OUTSIDE_SLOW_DEFAULT);

/// The smallest request outside passes that takes the slow side (see `OUTSIDE_SLOW`).
#[inline(always)]
pub(crate) fn outside_slow() -> usize {
    OUTSIDE_SLOW.load(Ordering::Relaxed)
}

/// Observes every thread (`on`), or stops; threads notice at their next request outside
/// a pass, at their next pass boundary, or (stopping) at their next observed request.
pub(crate) fn observe_all(on: bool) {
    OBSERVE_ALL.store(on, Ordering::SeqCst);
    let slow = if on { 0 } else { OUTSIDE_SLOW_DEFAULT };
    OUTSIDE_SLOW.store(slow, Ordering::SeqCst);
}

/// Whether every thread is to be observed.
#[inline]
pub(crate) fn observing_all() -> bool {
    OBSERVE_ALL.load(Ordering::Relaxed)
}

/// A pass context as the thread state holds it: a `pass::context::Context`.
pub(crate) enum Entered {}

/// One thread's state (see the module documentation).
pub(crate) struct ThreadState {
    /// The allocation path's one branch.
    pub(crate) path: Cell<AllocPath>,
    /// `path` as it was before bookkeeping started (restored after).
    saved: Cell<AllocPath>,
    /// The path the running pass asks for (what `path` is when nothing is observed).
    wanted: Cell<AllocPath>,
    /// Heap counters open on this thread (see `observe`).
    counters: Cell<u32>,
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
            path: Cell::new(AllocPath::Fresh),
            saved: Cell::new(AllocPath::Fresh),
            wanted: Cell::new(AllocPath::Backend),
            counters: Cell::new(0),
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

/// The path the running pass asks for and the current context, in one thread-local
/// access (the observed path takes the wanted one after observing).
#[inline]
pub(crate) fn wanted_and_context() -> (AllocPath, *mut Entered) {
    with(
        |s| (s.wanted.get(), s.context.get()),
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

/// Marks this thread as the allocator's own (the planner thread, at its start): never
/// observed.
pub(crate) fn mark_own_thread() {
    with(
        |s| {
            s.own_thread.set(true);
            settle_in(s);
        },
        (),
    );
}

/// Whether this thread is observed now: every thread is, or it counts its heap; never the
/// allocator's own thread.
fn observed(s: &ThreadState) -> bool {
    !s.own_thread.get() && (s.counters.get() > 0 || observing_all())
}

/// The path in force for wanted path `wanted`.
fn effective(s: &ThreadState, wanted: AllocPath) -> AllocPath {
    if observed(s) {
        AllocPath::Observe
    } else {
        wanted
    }
}

/// Puts the path in force for the wanted path and the observation of this thread (now,
/// or once bookkeeping ends).
fn settle_in(s: &ThreadState) {
    let path = effective(s, s.wanted.get());
    if s.busy.get() == 0 {
        s.path.set(path);
    } else {
        s.saved.set(path);
    }
}

/// Settles this thread's path: a fresh thread's first call, a change of what is observed.
pub(crate) fn settle() {
    with(settle_in, ());
}

/// Whether this thread should be observed now (the observed path asks, to end itself when
/// observation stopped).
pub(crate) fn observed_now() -> bool {
    with(observed, false)
}

/// Opens (`+1`) or closes (`-1`) a heap counter on this thread, and settles its path.
pub(crate) fn count_heap(delta: i32) {
    with(
        |s| {
            s.counters
                .set(s.counters.get().saturating_add_signed(delta));
            settle_in(s);
        },
        (),
    );
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

/// Sets the path the running pass asks for, in force once bookkeeping ends (now, outside
/// bookkeeping), unless the thread is observed.
pub(crate) fn set_path(s: &ThreadState, path: AllocPath) {
    s.wanted.set(path);
    settle_in(s);
}
