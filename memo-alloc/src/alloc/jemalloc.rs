//! jemalloc as memo's backend ([`Jemalloc`]): tikv-jemallocator, with large blocks
//! page-aligned.
//!
//! jemalloc starts a large block (16 KiB and up, on 4 KiB pages) at a random cache line of
//! its first page unless asked for page alignment ("cache-oblivious" placement, at the
//! cost of a page per block). What memo's backend serves in a replayed program is mostly
//! large and long-lived (a model's weights, a decoder's KV cache that escapes every step
//! and is copied into a longer block the next one), and copying or streaming over blocks
//! that start at a random line costs more than the aliasing it avoids: memo-bench's
//! decoding cells ran 10-15% faster on jemalloc with page-aligned large blocks
//! (`cache_oblivious:false`), and no cell ran slower. So requests of at least
//! [`LARGE`] bytes with a smaller alignment are asked for page alignment. jemalloc's
//! large sizes are whole pages, so this costs no memory (it saves the unused page).
//!
//! Every call maps its layout the same way ([`backend_layout`]), so a block is freed with
//! the layout it was allocated with; a `realloc` across [`LARGE`] moves the block itself.

use std::alloc::{GlobalAlloc, Layout};

/// Requests of at least this many bytes are large in jemalloc (its smallest large size
/// class with 4 KiB pages); they are page-aligned.
pub const LARGE: usize = 16 << 10;
/// The alignment asked for large requests (jemalloc skips its random offset from a page on).
const PAGE: usize = 4 << 10;

/// jemalloc (tikv-jemallocator), memo's default backend (feature `jemalloc`), with large
/// blocks page-aligned (see the module documentation). For jemalloc as it comes, pass
/// `tikv_jemallocator::Jemalloc` to [`crate::MemoAlloc::new`].
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let layout = Layout::from_size_align(64 << 10, 8).unwrap();
/// // SAFETY: the block is freed once, with its layout.
/// unsafe {
///     let p = memo_alloc::Jemalloc.alloc(layout);
///     assert_eq!(p as usize % 4096, 0);
///     memo_alloc::Jemalloc.dealloc(p, layout);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Jemalloc;

/// The layout jemalloc is asked for in place of `layout`: page-aligned when large.
#[inline(always)]
fn backend_layout(layout: Layout) -> Layout {
    if layout.size() >= LARGE && layout.align() < PAGE {
        // A size valid at a smaller alignment can fail at a page's near `isize::MAX`:
        // such a request keeps its own alignment (and jemalloc refuses it anyway).
        Layout::from_size_align(layout.size(), PAGE).unwrap_or(layout)
    } else {
        layout
    }
}

// SAFETY: every call forwards to tikv-jemallocator with the layout `backend_layout` maps
// the caller's to, the same mapping for a block's allocation and its release, so jemalloc
// receives each block back with the layout it returned it for; the mapped layout has the
// caller's size and at least its alignment, so the block serves the caller's layout.
unsafe impl GlobalAlloc for Jemalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded; the mapped layout has the caller's nonzero size.
        unsafe { tikv_jemallocator::Jemalloc.alloc(backend_layout(layout)) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe { tikv_jemallocator::Jemalloc.alloc_zeroed(backend_layout(layout)) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated with `backend_layout(layout)` (by every path here).
        unsafe { tikv_jemallocator::Jemalloc.dealloc(ptr, backend_layout(layout)) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = backend_layout(layout);
        let Ok(wanted) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        let new = backend_layout(wanted);
        if new.align() == old.align() {
            // SAFETY: `ptr` was allocated with `old`; `new_size` is valid at its alignment.
            return unsafe { tikv_jemallocator::Jemalloc.realloc(ptr, old, new_size) };
        }
        // Across `LARGE`: the mapped alignments differ, so the block moves.
        // SAFETY: `new` has a nonzero size; both blocks are valid for the bytes copied (the
        // smaller of their sizes), and do not overlap (the new one is live beside the old).
        unsafe {
            let moved = tikv_jemallocator::Jemalloc.alloc(new);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                tikv_jemallocator::Jemalloc.dealloc(ptr, old);
            }
            moved
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_page_aligned_and_small_ones_keep_their_alignment() {
        let a = Jemalloc;
        for size in [LARGE, LARGE + 1, 100 << 10, 3 << 20] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // Several blocks: jemalloc's random offset would put most of them off a page.
            let blocks: Vec<*mut u8> = (0..8)
                // SAFETY: freed below with the same layout.
                .map(|_| unsafe { a.alloc(layout) })
                .collect();
            for &p in &blocks {
                assert!(!p.is_null());
                assert_eq!(p as usize % PAGE, 0, "{size} B at {p:?}");
                // SAFETY: allocated with `layout` above, freed once.
                unsafe { a.dealloc(p, layout) };
            }
        }
        assert_eq!(
            backend_layout(Layout::from_size_align(LARGE - 1, 8).unwrap()).align(),
            8
        );
        let big_aligned = Layout::from_size_align(LARGE, 1 << 16).unwrap();
        assert_eq!(backend_layout(big_aligned), big_aligned);
    }

    #[test]
    fn a_block_reallocated_across_the_large_bound_keeps_its_bytes() {
        let a = Jemalloc;
        let small = Layout::from_size_align(4000, 8).unwrap();
        // SAFETY: each block is written within its size and released once, through
        // `realloc` or `dealloc` with the layout it has at that point.
        unsafe {
            let p = a.alloc(small);
            for i in 0..4000 {
                *p.add(i) = (i % 251) as u8;
            }
            let grown = a.realloc(p, small, 40_000);
            assert_eq!(grown as usize % PAGE, 0);
            for i in 0..4000 {
                assert_eq!(*grown.add(i), (i % 251) as u8);
            }
            let large = Layout::from_size_align(40_000, 8).unwrap();
            let larger = a.realloc(grown, large, 80_000);
            assert_eq!(larger as usize % PAGE, 0);
            assert_eq!(*larger.add(3999), (3999 % 251) as u8);
            let shrunk = a.realloc(larger, Layout::from_size_align(80_000, 8).unwrap(), 100);
            assert_eq!(*shrunk.add(99), 99);
            a.dealloc(shrunk, Layout::from_size_align(100, 8).unwrap());
        }
    }
}
