//! Passes without a slab: a profiled pass's requests go to the backend (or, when large,
//! to the context's blocks) and are recorded; a pass running on the backend is counted.

use std::alloc::{GlobalAlloc, Layout};

use super::global::MemoAlloc;
use crate::memory::own_blocks;
use crate::pass::abandon_running;
use crate::pass::context::{self, Context};
use crate::stats::AbandonReason;
use crate::support::thread;

impl<B: GlobalAlloc> MemoAlloc<B> {
    /// Profiling: the backend serves, then the recorder notes it with the guard set.
    ///
    /// # Safety
    /// `pass` is this thread's profiled pass; the rest as `GlobalAlloc::alloc`.
    #[inline(never)]
    pub(super) unsafe fn alloc_profiled(
        &self,
        pass: &mut Context,
        layout: Layout,
        zeroed: bool,
    ) -> *mut u8 {
        // SAFETY: forwarded.
        let ptr = unsafe { self.pass_block(pass, layout, zeroed) };
        if ptr.is_null() {
            return ptr; // a failed request is not part of the pass
        }
        pass.counters.allocations += 1;
        let node = pass.node;
        thread::with_bookkeeping(|| {
            let recorded = match pass.recorder.as_mut() {
                _ if std::thread::panicking() => Err(AbandonReason::Panic),
                Some(rec) => {
                    crate::pass::classify::note_profiled(
                        &mut pass.signature,
                        layout.size() as u64,
                        layout.align() as u64,
                    );
                    rec.on_alloc(
                        ptr,
                        layout.size() as u64,
                        layout.align() as u64,
                        zeroed,
                        node,
                    )
                }
                None => Ok(()),
            };
            if let Err(reason) = recorded {
                abandon_running(pass, reason);
            }
        });
        ptr
    }

    /// A pass running on the backend: counted.
    ///
    /// # Safety
    /// `pass` is this thread's running pass; the rest as `GlobalAlloc::alloc`.
    #[inline]
    pub(super) unsafe fn alloc_counted(
        &self,
        pass: &mut Context,
        layout: Layout,
        zeroed: bool,
    ) -> *mut u8 {
        if pass.pass().undecided {
            // SAFETY: forwarded.
            return unsafe { self.alloc_undecided(pass, layout, zeroed) };
        }
        // SAFETY: forwarded.
        let ptr = unsafe {
            if pass.pass().interim {
                self.pass_block(pass, layout, zeroed)
            } else {
                self.backend_alloc(layout, zeroed)
            }
        };
        if !ptr.is_null() {
            pass.counters.allocations += 1;
        }
        ptr
    }

    /// A request of an undecided pass (see `pass::classify`): it goes toward the pass's
    /// signature, and is then served on the path the pass is on (the backend while it is
    /// undecided, else its class's profile or replay).
    ///
    /// # Safety
    /// As [`Self::alloc_counted`].
    #[cold]
    #[inline(never)]
    unsafe fn alloc_undecided(&self, pass: &mut Context, layout: Layout, zeroed: bool) -> *mut u8 {
        thread::with_bookkeeping(|| {
            crate::pass::classify::note_request(pass, layout.size() as u64, layout.align() as u64)
        });
        if pass.pass().undecided {
            // SAFETY: forwarded.
            let ptr = unsafe { self.backend_alloc(layout, zeroed) };
            if !ptr.is_null() {
                pass.counters.allocations += 1;
            }
            return ptr;
        }
        // SAFETY: forwarded; the thread's path now says how the pass serves it.
        unsafe {
            if zeroed {
                self.alloc_zeroed(layout)
            } else {
                self.alloc(layout)
            }
        }
    }

    /// A block for context `pass` of a profiled or interim pass (see
    /// `PassState::interim`), not yet recorded: a large one from the context's spares or
    /// the region's chunks (see `own_blocks::PASS_MIN_BYTES`), any other (or when the
    /// region cannot serve it) from the backend.
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc` (or `alloc_zeroed` when `zeroed`).
    #[inline(always)]
    pub(super) unsafe fn pass_block(
        &self,
        pass: &mut Context,
        layout: Layout,
        zeroed: bool,
    ) -> *mut u8 {
        if own_blocks::wanted_in_pass(layout) {
            let p = pass.spares.alloc(layout, zeroed);
            if !p.is_null() {
                return p;
            }
        }
        // SAFETY: forwarded.
        unsafe { self.backend_alloc(layout, zeroed) }
    }

    /// # Safety
    /// As `GlobalAlloc::dealloc`, for a backend pointer, on a thread in a profiled pass.
    #[cold]
    pub(super) unsafe fn dealloc_profiled(&self, ptr: *mut u8, layout: Layout) {
        record_dealloc(ptr);
        // SAFETY: forwarded from GlobalAlloc::dealloc.
        unsafe { self.backend.dealloc(ptr, layout) }
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`, for a backend pointer, on a thread in a profiled pass.
    #[cold]
    pub(super) unsafe fn realloc_profiled(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        // SAFETY: forwarded from GlobalAlloc::realloc.
        let new = unsafe { self.backend.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            record_realloc(ptr, new, new_size, layout.align());
        }
        new
    }
}

/// Has this thread's profiled pass (if one runs) record the free of `ptr`, with the guard
/// set.
#[cold]
pub(super) fn record_dealloc(ptr: *mut u8) {
    let p = context::current();
    // SAFETY: a non-null pass pointer is this thread's running pass.
    if let Some(pass) = unsafe { p.as_mut() } {
        thread::with_bookkeeping(|| {
            if let Some(Err(reason)) = pass.recorder.as_mut().map(|r| r.on_dealloc(ptr)) {
                abandon_running(pass, reason);
            }
        });
    }
}

/// Has this thread's profiled pass (if one runs) record the move of `old` to `new`
/// (`size` bytes, alignment `align`), with the guard set.
#[cold]
pub(super) fn record_realloc(old: *mut u8, new: *mut u8, size: usize, align: usize) {
    let p = context::current();
    // SAFETY: a non-null pass pointer is this thread's running pass.
    if let Some(pass) = unsafe { p.as_mut() } {
        thread::with_bookkeeping(|| {
            let recorded = pass
                .recorder
                .as_mut()
                .map(|r| r.on_realloc(old, new, size as u64, align as u64));
            if let Some(Err(reason)) = recorded {
                abandon_running(pass, reason);
            }
        });
    }
}
