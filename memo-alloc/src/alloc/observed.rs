//! The slow side of the allocation path: profiled passes, a thread's first call (its path
//! settled once, `MEMO_PROFILE` read once per process), and observed threads (a
//! whole-program recording, or heap counters: see `observe`), whose requests take the path
//! their pass wants and are then logged and counted.

use std::alloc::{GlobalAlloc, Layout};

use super::global::MemoAlloc;
use super::profiled::record_dealloc;
use crate::memory::region;
use crate::memory::release::{self, BackendKind};
use crate::observe::{self, Made};
use crate::pass::context::Context;
use crate::support::thread::{self, AllocPath};

impl<B: GlobalAlloc> MemoAlloc<B> {
    /// A request on a slow path: profiled, observed, or the thread's first.
    ///
    /// # Safety
    /// `pass` is the thread state's context for `path`; the rest as `GlobalAlloc::alloc`.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn alloc_slow(
        &self,
        path: AllocPath,
        pass: *mut Context,
        layout: Layout,
        zeroed: bool,
    ) -> *mut u8 {
        match path {
            // SAFETY: `path == Profile` only while `pass` is this thread's profiled pass.
            AllocPath::Profile => unsafe { self.alloc_profiled(&mut *pass, layout, zeroed) },
            // SAFETY: forwarded.
            AllocPath::Observe => unsafe { self.alloc_observed(layout, zeroed) },
            // SAFETY: forwarded.
            AllocPath::Fresh => unsafe { self.alloc_settled(layout, zeroed) },
            // SAFETY: forwarded (the fast paths do not come here).
            _ => unsafe { self.backend_alloc(layout, zeroed) },
        }
    }

    /// Settles this thread's path (its first call, or observation began), then serves the
    /// request on it.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    #[cold]
    pub(super) unsafe fn alloc_settled(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        settle(self.kind);
        let (path, pass) = thread::path_and_context();
        let pass = pass.cast::<Context>();
        // SAFETY: each path only with its context, as in `alloc_impl`.
        unsafe {
            match path {
                AllocPath::Replay => self.alloc_replayed(&mut *pass, layout, zeroed),
                AllocPath::Counted => self.alloc_counted(&mut *pass, layout, zeroed),
                AllocPath::Profile => self.alloc_profiled(&mut *pass, layout, zeroed),
                AllocPath::Observe => self.alloc_observed(layout, zeroed),
                _ => self.backend_alloc(layout, zeroed),
            }
        }
    }

    /// An observed thread's request: served on the path its pass wants (a replayed pass
    /// by the backend while a recording runs, so that every free is seen), then observed.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    unsafe fn alloc_observed(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if !thread::observed_now() {
            // SAFETY: forwarded.
            return unsafe { self.alloc_settled(layout, zeroed) };
        }
        let (wanted, pass) = thread::wanted_and_context();
        let pass = pass.cast::<Context>();
        let mut made = if zeroed { Made::Zeroed } else { Made::Alloc };
        // SAFETY: each wanted path only with its context, as in `alloc_impl`.
        let ptr = unsafe {
            match wanted {
                AllocPath::Replay if observe::state::recording() => {
                    (*pass).counters.allocations += 1;
                    self.backend_alloc(layout, zeroed)
                }
                AllocPath::Replay => {
                    let p = self.alloc_replayed(&mut *pass, layout, zeroed);
                    if region::lookup(p).is_some() {
                        made = Made::Slab;
                    }
                    p
                }
                AllocPath::Counted => self.alloc_counted(&mut *pass, layout, zeroed),
                AllocPath::Profile => self.alloc_profiled(&mut *pass, layout, zeroed),
                _ => self.alloc_outside(layout, zeroed),
            }
        };
        if !ptr.is_null() {
            observe::on_alloc(ptr, layout.size(), layout.align(), made);
        }
        ptr
    }

    /// A free on a slow path (of a backend pointer).
    ///
    /// # Safety
    /// As `GlobalAlloc::dealloc`, for a pointer outside the slab region.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn dealloc_slow(&self, path: AllocPath, ptr: *mut u8, layout: Layout) {
        let path = settled_path(path, self.kind);
        if path == AllocPath::Observe {
            observe::on_free(ptr);
        }
        let profiled = path == AllocPath::Profile
            || (path == AllocPath::Observe && thread::wanted_and_context().0 == AllocPath::Profile);
        // SAFETY: forwarded.
        unsafe {
            if profiled {
                self.dealloc_profiled(ptr, layout)
            } else {
                self.backend.dealloc(ptr, layout)
            }
        }
    }

    /// A realloc on a slow path (of a backend pointer).
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`, for a pointer outside the slab region.
    #[cold]
    #[inline(never)]
    pub(super) unsafe fn realloc_slow(
        &self,
        path: AllocPath,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        let path = settled_path(path, self.kind);
        let wanted = thread::wanted_and_context().0;
        let observed = path == AllocPath::Observe;
        if observed {
            observe::on_realloc_start(ptr);
        }
        // SAFETY: forwarded.
        let new = unsafe {
            match (path, wanted) {
                (AllocPath::Profile, _) | (AllocPath::Observe, AllocPath::Profile) => {
                    self.realloc_profiled(ptr, layout, new_size)
                }
                (AllocPath::Backend | AllocPath::Observe, AllocPath::Backend)
                    if new_size >= thread::outside_slow() =>
                {
                    self.realloc_outside(ptr, layout, new_size)
                }
                _ => self.backend.realloc(ptr, layout, new_size),
            }
        };
        if observed {
            observe::on_realloc_end(ptr, new, new_size, layout.align());
        }
        new
    }
}

/// Reads `MEMO_PROFILE` (once per process), notes the allocator's backend and settles
/// this thread's path.
fn settle(kind: BackendKind) {
    release::note_backend(kind);
    thread::with_bookkeeping(observe::init);
    thread::settle();
}

/// The path a free or realloc takes: `path` as the thread read it, settled first when
/// the thread has none yet or its recording ended.
fn settled_path(path: AllocPath, kind: BackendKind) -> AllocPath {
    match path {
        AllocPath::Fresh => {
            settle(kind);
            thread::path()
        }
        AllocPath::Observe if !thread::observed_now() => {
            settle(kind);
            thread::path()
        }
        p => p,
    }
}

/// Frees own block `ptr` on an observed thread, or records it in a profiled pass: what
/// `dealloc_own` does besides freeing.
pub(super) fn own_freed(path: AllocPath, ptr: *mut u8) {
    if path == AllocPath::Observe {
        observe::on_free(ptr);
    }
    let wanted = thread::wanted_and_context().0;
    if path == AllocPath::Profile || (path == AllocPath::Observe && wanted == AllocPath::Profile) {
        record_dealloc(ptr);
    }
}
