//! The allocator's own large buffers (a profile's recording and trace, the planner's
//! problem, solutions and plan documents, compiled replay tables) come from whole chunks
//! of the slab region, and go back to the OS the moment they are freed. So do the large
//! blocks (at least [`PASS_MIN_BYTES`]) of a pass that runs before its key's plan exists:
//! the profiled pass, and interim passes (`PassState::interim`) of the key while it is
//! profiled and planned. Within such a pass, a freed block is kept in its context's
//! [`Spares`] for the next large request, so the pass's working set faults in once.
//!
//! From the backend such buffers stay resident after they are freed: glibc trims a thread
//! arena only past a threshold that rises with the largest block freed, and
//! `malloc_trim` does not shrink a thread arena's top, so planning a large profile leaves
//! the planner thread's arena mapped, and the request thread's arena keeps the trace its
//! profile built.
//!
//! A request of at least [`MIN_BYTES`] made while `thread::own_work` holds (bookkeeping,
//! or any allocation on the planner thread) is carved here. Carving takes the region lock
//! with `try_lock`: when the lock is busy (another thread carving a slab, or this thread
//! growing an instance pool under it) the request goes to the backend instead, so this
//! never waits. Freeing never locks: the run's pages are dropped at once and the next
//! carve returns its chunks to the region (`region::release_later`). The chunks carry
//! [`owner`] in the region's directory, which tells these blocks from slab memory on
//! every free and realloc.

use std::alloc::Layout;

use crate::memory::geometry::{chunks_for, CHUNK, PAGE};
use crate::memory::region;

/// Smallest request served here: smaller buffers are cheap for the backend to keep, and
/// each block takes at least one 2 MiB chunk of address space.
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// Smallest request of a profiled pass served here (glibc's first mmap threshold).
///
/// The profiled pass runs before its plan exists. From the backend, its large blocks stay
/// in the request thread's glibc arena after the pass: glibc raises its mmap and trim
/// thresholds to the largest block it unmapped (trim: twice that), keeps that much free
/// at an arena's top, and `malloc_trim` leaves a thread arena's top alone, so each
/// request thread would keep the profiled pass's large blocks beside the slab that
/// replaces it. Here they go back to the OS at their free.
pub(crate) const PASS_MIN_BYTES: usize = 128 << 10;

/// The directory's owner of every own block (its address is the mark; never read).
static OWNER: u8 = 0;

/// The owner recorded for the chunks of every own block.
#[inline(always)]
pub(crate) fn owner() -> *mut () {
    (&OWNER as *const u8).cast_mut().cast()
}

/// Whether a request of `layout` made during the allocator's own work (`thread::own_work`)
/// is one to serve here.
#[inline(always)]
pub(crate) fn wanted(layout: Layout) -> bool {
    layout.size() >= MIN_BYTES
}

/// Whether `p` is an own block (of the region, with [`owner`] in its chunk's entry).
#[inline(always)]
pub(crate) fn contains(p: *mut u8) -> bool {
    region::lookup(p) == Some(owner())
}

/// Whether a request of `layout` in a profiled or interim pass is one to serve here.
#[inline(always)]
pub(crate) fn wanted_in_pass(layout: Layout) -> bool {
    layout.size() >= PASS_MIN_BYTES
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
    debug_assert!(contains(ptr));
    // SAFETY: the block's chunks were carved for it and the caller gives them up.
    unsafe { region::release_later(ptr, chunks_for(size as u64)) };
}

/// Freed blocks a profiled context keeps for its next large requests.
const SPARES: usize = 32;

/// Resident bytes a kept block may have past a request it serves.
const SLACK: usize = 64 << 10;

/// A profiled context's large blocks: where its large requests are served from, and its
/// freed ones kept for its next large requests, so the pass's working set faults in once,
/// as it would from the backend, instead of at every request (which makes a pass of large
/// buffers several times slower). A request takes the kept block with the fewest chunks
/// that hold it (its chunks past the request go back to the region). A fresh block is
/// carved only after kept blocks, largest first, give their memory back until the
/// context's large blocks, live and kept, hold no more than the most it ever had live (or
/// than its live ones with the fresh one): so, like a heap that reuses freed memory, a
/// pass whose large buffers grow or shrink keeps about its largest live set resident, not
/// the sum of its distinct sizes. What is kept goes back to the OS when the context ends
/// (its `Drop`). Never shared: only its context's thread touches it.
pub(crate) struct Spares {
    /// `(base, chunks, bytes)`: a free own block and the size it was last freed with
    /// (the pages it most likely has resident).
    blocks: [(*mut u8, usize, usize); SPARES],
    len: usize,
    /// Bytes of the large blocks handed out here and not given back (a block freed on
    /// another thread, or after the pass, is never given back: it stays counted).
    live: usize,
    /// The most `live` has been.
    high: usize,
}

impl Spares {
    /// None kept.
    pub(crate) const fn new() -> Spares {
        Spares {
            blocks: [(std::ptr::null_mut(), 0, 0); SPARES],
            len: 0,
            live: 0,
            high: 0,
        }
    }

    /// A large block for `layout`: a kept one (zero-filled when `zeroed`), else a fresh
    /// one from the region (zero-filled), once kept blocks made room (see [`Spares`]);
    /// null when the region cannot serve it (see [`alloc`]).
    pub(crate) fn alloc(&mut self, layout: Layout, zeroed: bool) -> *mut u8 {
        let mut p = self.take(layout, zeroed);
        if p.is_null() {
            self.make_room(layout.size());
            p = alloc(layout);
        }
        if !p.is_null() {
            self.live += layout.size();
            self.high = self.high.max(self.live);
        }
        p
    }

    /// A kept block for `layout` (with the fewest chunks that hold it, and among those
    /// the one whose last size is closest above `layout`'s, else the largest), zero-filled
    /// when `zeroed`; null when none is kept or `layout` needs more than a chunk's
    /// alignment.
    fn take(&mut self, layout: Layout, zeroed: bool) -> *mut u8 {
        let (size, need) = (layout.size(), chunks_for(layout.size() as u64));
        if layout.align() > CHUNK {
            return std::ptr::null_mut();
        }
        let kept = &self.blocks[..self.len];
        let fit = kept
            .iter()
            .enumerate()
            .filter(|(_, &(_, chunks, _))| chunks >= need)
            .min_by_key(|(_, &(_, chunks, bytes))| (chunks, bytes < size, bytes.abs_diff(size)));
        let Some((i, _)) = fit else {
            return std::ptr::null_mut();
        };
        let (base, chunks, last) = self.remove(i);
        if chunks > need {
            // SAFETY: the block's chunks past the first `need` are ours (the block was
            // kept here) and no one uses them: the request fits in the first `need`.
            unsafe { region::release_later(base.add(need * CHUNK), chunks - need) };
        }
        let keep = size.next_multiple_of(PAGE);
        let touched = last.min(need * CHUNK).next_multiple_of(PAGE);
        if touched > keep + SLACK {
            // The pages past the request go back to the OS: a small request in a block
            // a larger one used would keep them resident for nothing.
            // SAFETY: whole pages of the block past its first `size` bytes, inside its
            // first `need` chunks, ours.
            unsafe { region::discard(base.add(keep), touched - keep) };
        }
        if zeroed {
            // SAFETY: the block's chunks hold at least `size` bytes and are ours (taken
            // off the list just now).
            unsafe { base.write_bytes(0, size) };
        }
        base
    }

    /// Before a fresh block of `size` bytes: gives kept blocks back to the OS, largest
    /// first, until the kept bytes, the live ones and `size` are no more than the most
    /// the context had live (or than its live bytes and `size`, if more).
    fn make_room(&mut self, size: usize) {
        let with_fresh = self.live + size;
        let room = self.high.max(with_fresh) - with_fresh;
        let mut kept: usize = self.blocks[..self.len].iter().map(|b| b.2).sum();
        while kept > room {
            let Some((i, _)) = self.blocks[..self.len]
                .iter()
                .enumerate()
                .max_by_key(|(_, b)| b.2)
            else {
                break;
            };
            let (base, chunks, bytes) = self.remove(i);
            kept -= bytes;
            // SAFETY: a free own block of `chunks` chunks, kept only here.
            unsafe { region::release_later(base, chunks) };
        }
    }

    /// Takes kept block `i` off the list (the last one takes its place).
    fn remove(&mut self, i: usize) -> (*mut u8, usize, usize) {
        debug_assert!(i < self.len);
        let block = self.blocks[i];
        self.len -= 1;
        self.blocks[i] = self.blocks[self.len];
        block
    }

    /// Takes back the freed own block `base` of `size` bytes, handed out by
    /// [`Spares::alloc`] or not: kept if there is room (`true`), else left to the caller
    /// to free (`false`).
    pub(crate) fn give(&mut self, base: *mut u8, size: usize) -> bool {
        debug_assert!(contains(base));
        self.live = self.live.saturating_sub(size);
        let Some(slot) = self.blocks.get_mut(self.len) else {
            return false;
        };
        *slot = (base, chunks_for(size as u64), size);
        self.len += 1;
        true
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        for &(base, chunks, _) in &self.blocks[..self.len] {
            // SAFETY: a free own block of `chunks` chunks, kept only here.
            unsafe { region::release_later(base, chunks) };
        }
        self.len = 0;
    }
}
