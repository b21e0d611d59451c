//! The allocator's own large buffers, and the large blocks of passes without a plan, as
//! chunks of the slab region (see `memory::own_blocks`).

use std::alloc::{GlobalAlloc, Layout};

use super::global::MemoAlloc;
use super::observed::own_freed;
use super::profiled::record_realloc;
use crate::memory::{geometry, own_blocks};
use crate::pass::context::Context;
use crate::support::thread::{self, AllocPath};

impl<B: GlobalAlloc> MemoAlloc<B> {
    /// Outside passes and in bookkeeping: the backend, or for the allocator's own large
    /// buffers, chunks of the region (see `own_blocks`). A request of at least
    /// `thread::outside_slow()` bytes takes the slow side: every request while every
    /// thread is to be observed, else the allocator's own large buffers.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[inline(always)]
    pub(super) unsafe fn alloc_outside(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if layout.size() >= thread::outside_slow() {
            // SAFETY: forwarded.
            return unsafe { self.alloc_outside_slow(layout, zeroed) };
        }
        // SAFETY: forwarded.
        unsafe { self.backend_alloc(layout, zeroed) }
    }

    /// The slow side of [`Self::alloc_outside`]: an own block for the allocator's own
    /// work; a thread outside passes that is to be observed settles its path first.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[cold]
    #[inline(never)]
    unsafe fn alloc_outside_slow(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        if thread::own_work() {
            if own_blocks::wanted(layout) {
                let p = own_blocks::alloc(layout); // zero-filled
                if !p.is_null() {
                    return p;
                }
            }
        } else if thread::path() == AllocPath::Backend && thread::observed_now() {
            // SAFETY: forwarded.
            return unsafe { self.alloc_settled(layout, zeroed) };
        }
        // SAFETY: forwarded.
        unsafe { self.backend_alloc(layout, zeroed) }
    }

    /// Frees own block `ptr` of `size` bytes: recorded in a profiled pass, and kept in
    /// the context's spares, while they have room, in a profiled or interim pass.
    ///
    /// # Safety
    /// As `own_blocks::free`.
    #[inline]
    pub(super) unsafe fn dealloc_own(&self, ptr: *mut u8, size: usize) {
        let (path, _) = thread::path_and_context();
        own_freed(path, ptr);
        let (wanted, pass) = thread::wanted_and_context();
        let pass = pass.cast::<Context>();
        let keeps = !thread::own_work() && keeps_blocks(wanted, pass);
        // SAFETY: `keeps` only while `pass` is this thread's running pass.
        if !(keeps && unsafe { (*pass).spares.give(ptr, size) }) {
            // SAFETY: the caller's.
            unsafe { own_blocks::free(ptr, size) };
        }
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`, for an own block `ptr` (see `own_blocks`).
    #[cold]
    pub(super) unsafe fn realloc_own(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        let path = thread::path();
        let (wanted, pass) = thread::wanted_and_context();
        let pass = pass.cast::<Context>();
        let observed = path == AllocPath::Observe;
        let profiled = path == AllocPath::Profile || (observed && wanted == AllocPath::Profile);
        let keeps = !thread::own_work() && keeps_blocks(wanted, pass);
        if observed {
            crate::observe::on_realloc_start(ptr);
        }
        let chunks = |size: usize| geometry::chunks_for(size as u64);
        let new = if chunks(new_size) == chunks(layout.size()) {
            ptr // the same chunks hold it: freed later with `new_size`, same count
        } else {
            // SAFETY: forwarded; `keeps` only while `pass` is this thread's running pass.
            unsafe { self.move_own(ptr, layout, new_size, keeps, observed, pass) }
        };
        if new.is_null() {
            if observed {
                crate::observe::on_realloc_end(ptr, new, new_size, layout.align());
            }
            return new;
        }
        if profiled {
            record_realloc(ptr, new, new_size, layout.align());
        }
        if observed {
            crate::observe::on_realloc_end(ptr, new, new_size, layout.align());
        }
        new
    }

    /// Moves own block `ptr` to a new block of `new_size` bytes: the context's (`keeps`),
    /// or the thread's path's (the backend's, when `observed`: the move is observed as
    /// one realloc, not as a new allocation); null when none could be had.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc` for an own block; `keeps` only while `pass` is this
    /// thread's running pass.
    unsafe fn move_own(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        keeps: bool,
        observed: bool,
        pass: *mut Context,
    ) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: non-zero size (GlobalAlloc::realloc's contract). In a profiled pass the
        // move is recorded by the caller, as a realloc, not as a new allocation.
        let new = unsafe {
            if keeps {
                self.pass_block(&mut *pass, new_layout, false)
            } else if observed {
                self.alloc_outside(new_layout, false)
            } else {
                self.alloc_impl(new_layout, false)
            }
        };
        if new.is_null() {
            return new;
        }
        // SAFETY: both blocks are valid for the copied length and distinct; `ptr` is a
        // live own block of `layout.size()` bytes, freed once.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            if !(keeps && (*pass).spares.give(ptr, layout.size())) {
                own_blocks::free(ptr, layout.size());
            }
        }
        new
    }

    /// A backend block growing to an own block's size while the allocator's own work
    /// runs moves to the region (see `own_blocks`); any other goes to the backend's
    /// realloc.
    ///
    /// # Safety
    /// As `GlobalAlloc::realloc`, for a backend pointer.
    #[cold]
    pub(super) unsafe fn realloc_outside(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        let path = thread::path();
        if path == AllocPath::Backend && !thread::own_work() && thread::observed_now() {
            // SAFETY: forwarded; the thread is to be observed from this request on.
            return unsafe { self.realloc_slow(AllocPath::Fresh, ptr, layout, new_size) };
        }
        if let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) {
            let new = if own_blocks::wanted(new_layout) && thread::own_work() {
                own_blocks::alloc(new_layout)
            } else {
                std::ptr::null_mut()
            };
            if !new.is_null() {
                // SAFETY: both blocks are valid for the copied length and distinct; `ptr`
                // is a live backend block of `layout`, freed once.
                unsafe {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.backend.dealloc(ptr, layout);
                }
                return new;
            }
        }
        // SAFETY: forwarded.
        unsafe { self.backend.realloc(ptr, layout, new_size) }
    }
}

/// Whether this thread's running pass `pass`, on path `path` (as
/// `thread::path_and_context` gives them), keeps its large blocks off the backend: a
/// profiled or interim pass (see `own_blocks`).
#[inline(always)]
fn keeps_blocks(path: AllocPath, pass: *mut Context) -> bool {
    match path {
        AllocPath::Profile => true,
        // SAFETY: `path == Counted` only while `pass` is this thread's running pass.
        AllocPath::Counted => unsafe { (*pass).pass().interim },
        _ => false,
    }
}
