//! The allocator's own large buffers (a profile's recording and trace, the planner's
//! problem, solutions and plan documents, compiled replay tables) come from whole chunks
//! of the slab region, and go back to the OS the moment they are freed.
//!
//! From the backend, glibc kept them resident: planning candle's MobileNetV4 (350k
//! allocations) left the planner thread's arena at 30 MB mapped with 15 MB of it free, and
//! the request thread's arena kept the trace its profile built. glibc trims a thread
//! arena only past a threshold that rises with the largest block freed, and
//! `malloc_trim` does not shrink a thread arena's top.
//!
//! A request of at least [`MIN_BYTES`] made while [`tls::own_work`] holds (bookkeeping,
//! or any allocation on the planner thread) is carved here. Carving takes the region lock
//! with `try_lock`: when the lock is busy (another thread carving a slab, or this thread
//! growing an instance pool under it) the request goes to the backend instead, so this
//! never waits. Freeing never locks: the run's pages are dropped at once and the next
//! carve returns its chunks to the region (`region::release_later`). The chunks carry
//! [`owner`] in the region's directory, which tells these blocks from slab memory on
//! every free and realloc.

use std::alloc::Layout;

use crate::geometry::{chunks_for, CHUNK};
use crate::region;
use crate::tls;

/// Smallest request served here: smaller buffers are cheap for the backend to keep, and
/// each block takes at least one 2 MiB chunk of address space.
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// The directory's owner of every own block (its address is the mark; never read).
static OWNER: u8 = 0;

/// The owner recorded for the chunks of every own block.
#[inline(always)]
pub(crate) fn owner() -> *mut () {
    (&OWNER as *const u8).cast_mut().cast()
}

/// Whether a request of `layout` made now is one to serve here.
#[inline(always)]
pub(crate) fn wanted(layout: Layout) -> bool {
    layout.size() >= MIN_BYTES && tls::own_work()
}

/// A block of whole chunks for `layout`, zero-filled (fresh or returned chunks read as
/// zero); null when the region lock is busy, `layout` needs more than a chunk's
/// alignment, or the region has no room: the caller then asks the backend.
#[cold]
pub(crate) fn alloc(layout: Layout) -> *mut u8 {
    if layout.align() > CHUNK || cfg!(loom) {
        return std::ptr::null_mut();
    }
    let Some(_guard) = region::LOCK.try_lock() else {
        return std::ptr::null_mut();
    };
    region::carve(layout.size() as u64, owner()).unwrap_or(std::ptr::null_mut())
}

/// Frees an own block of `size` bytes (the size it was allocated with). Lock-free.
///
/// # Safety
/// `ptr` was returned by [`alloc`] for a layout of `size` bytes and is freed once; no one
/// uses it afterwards.
#[cold]
pub(crate) unsafe fn free(ptr: *mut u8, size: usize) {
    debug_assert!(region::lookup(ptr) == Some(owner()));
    // SAFETY: the block's chunks were carved for it and the caller gives them up.
    unsafe { region::release_later(ptr, chunks_for(size as u64)) };
}
