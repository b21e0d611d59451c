//! jemalloc as memo's backend ([`Jemalloc`]): tikv-jemallocator, with its huge blocks on
//! advised huge pages.
//!
//! Blocks below [`HUGE`] are jemalloc's as it places them: a large block (16 KiB and up)
//! starts at a random cache line of its first page ("cache-oblivious" placement), so that
//! blocks copied into one another (a decoder's KV cache, copied into a longer block at
//! every step) do not start at the same offset within a page, where the copy's loads and
//! stores alias. Asking for those blocks page-aligned made memo-bench's decoding cells
//! slower (memo alone, 8-10 alternating pairs, CPU time per pass: gpt2 6-8% at 1 and 2
//! threads, a decoding step and a whole request 7-8% at 1 thread; the other workloads and
//! candle's decoder level), and jemalloc alone made so (`cache_oblivious:false`) ran
//! memo-bench's decoding step 9-13% slower.
//!
//! Blocks of at least [`HUGE`] bytes (a model's weights, above all) start on a 2 MiB
//! boundary and their whole 2 MiB pages are advised for transparent huge pages
//! (`MADV_HUGEPAGE`, on Linux): where the kernel's THP mode is `madvise` (the common
//! default), jemalloc's memory is otherwise backed by 4 KiB pages only, and a decoder
//! streaming tens of MB of weights per token spends its time in TLB misses (memo-bench's
//! llama2.c run a pass per token: mimalloc, which advises its own arenas, held 122 MiB in
//! huge pages and ran 20-25% faster than memo on jemalloc, which held none; with the
//! advice memo holds 70 MiB in huge pages, and mimalloc's lead is 7-12%).
//!
//! Blocks of [`STARTUP_HUGE`] bytes up to [`HUGE`] made before the process's first pass (a
//! model's weight matrices, loaded at startup: llama2.c's are 0.3-0.9 MiB) are counted
//! toward the 2 MiB pages they touch, and a page is advised once such blocks cover half of
//! it (`memory/startup_pages.rs`). jemalloc places such blocks side by side, so those pages
//! hold mostly weights, which every pass reads: memo-bench's llama2.c decoder run a pass
//! per token went from 0.70-0.87x mimalloc's speed to 0.81-1.08x. The half rule keeps
//! pages that hold one such block among free or small ones on 4 KiB pages: advising every
//! page such a block touches cost 1.4-5.2 MiB of resident memory on candle's models (the
//! advised pages' unused rest, filled by the kernel as one huge page), the half rule
//! 1.0-2.3 MiB (EfficientNet-B0 the most). A page is advised after its first blocks were
//! written on 4 KiB pages, and the purge at a key's first plan (`memory/release.rs`)
//! splits a huge page where it returns free ranges inside it, so after each purge the
//! pages such blocks cover seven eighths of are collapsed into huge pages
//! (`MADV_COLLAPSE`): without it the decoder's layers stayed on 4 KiB pages, and a pass
//! per token took 4% more CPU time at 1 thread (8 alternating pairs, [2%, 6%]), for 1.3
//! MiB. Collapsing every advised page cost memo-bench's gpt2 8 MiB at 2 threads, seven
//! eighths 1 MiB. Once a pass has run, such blocks are a program's working memory, freed
//! and made again, and are not advised: advising around them at any time made candle's
//! ResNet-18 hold 13% more memory. A program that uses [`Jemalloc`] without ever running a
//! pass has all its blocks of that size counted so.
//!
//! Every call maps its layout the same way ([`backend_layout`]), so a block is freed with
//! the layout it was allocated with; a `realloc` across [`HUGE`] moves the block itself.

use std::alloc::{GlobalAlloc, Layout};

use crate::memory::startup_pages;

/// Requests of at least this many bytes (and below [`HUGE`]) made before the process's
/// first pass count toward the huge pages they touch, which are advised for THP once such
/// requests cover half of them (see the module documentation).
pub const STARTUP_HUGE: usize = 256 << 10;
/// Requests of at least this many bytes (a transparent huge page) start on a multiple of
/// it, and their whole huge pages are advised for THP.
pub const HUGE: usize = startup_pages::HUGE_PAGE;

/// jemalloc (tikv-jemallocator), memo's default backend (feature `jemalloc`), with blocks
/// of 2 MiB and more on advised huge pages (see the module documentation). For jemalloc as
/// it comes, pass `tikv_jemallocator::Jemalloc` to [`crate::MemoAlloc::new`].
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let layout = Layout::from_size_align(4 << 20, 8).unwrap();
/// // SAFETY: the block is freed once, with its layout.
/// unsafe {
///     let p = memo_alloc::Jemalloc.alloc(layout);
///     assert_eq!(p as usize % (2 << 20), 0); // on a huge page's boundary
///     memo_alloc::Jemalloc.dealloc(p, layout);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Jemalloc;

/// The layout jemalloc is asked for in place of `layout`: huge-page-aligned when huge,
/// else `layout` itself.
#[inline(always)]
fn backend_layout(layout: Layout) -> Layout {
    if layout.size() < HUGE || layout.align() >= HUGE {
        return layout;
    }
    // A size valid at a smaller alignment can fail at a larger one near `isize::MAX`:
    // such a request keeps its own alignment (and jemalloc refuses it anyway).
    Layout::from_size_align(layout.size(), HUGE).unwrap_or(layout)
}

/// Advises the whole huge pages of a block of `size` bytes at `p` (returned for a layout
/// of [`backend_layout`], so huge-page-aligned when `size >= HUGE`) for transparent huge
/// pages. Only the block's own pages are advised, so no other memory is backed by huge
/// pages because of it. Advice only: a kernel without THP refuses it, and the block is
/// used as it is.
#[inline]
fn advise_huge(p: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    if size >= HUGE && !p.is_null() && p as usize % HUGE == 0 {
        let len = size / HUGE * HUGE;
        // SAFETY: `[p, p + len)` lies inside the caller's live block (`len <= size`), whose
        // pages are mapped; the advice changes how the kernel backs them, not their
        // contents or access.
        unsafe { libc::madvise(p.cast(), len, libc::MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, size);
}

/// Counts a block of `size` bytes at `p` toward the 2 MiB pages it touches when it is of
/// [`STARTUP_HUGE`] bytes up to [`HUGE`] and no pass has started, and advises each page
/// that such blocks now cover half of for transparent huge pages (see the module
/// documentation). Advice only, as [`advise_huge`]'s.
#[inline]
fn advise_startup(p: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    if (STARTUP_HUGE..HUGE).contains(&size) && !p.is_null() && !crate::pass::fork::started() {
        let (start, end) = (p as usize, p as usize + size);
        let mut page = start & !(HUGE - 1);
        while page < end {
            let covered = end.min(page + HUGE) - start.max(page);
            if startup_pages::cover(page / HUGE, covered, startup_pages::HALF) {
                // SAFETY: advice only: it changes how the kernel backs the page's anonymous
                // memory, never its contents or access, so it is harmless to the memory
                // around the caller's block (jemalloc's other blocks, or none: the kernel
                // skips what is not mapped and the call then fails, which changes nothing).
                unsafe { libc::madvise(page as *mut libc::c_void, HUGE, libc::MADV_HUGEPAGE) };
            }
            page += HUGE;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, size);
}

/// The advice a block of `size` bytes at `p` gets: [`advise_huge`] and [`advise_startup`].
#[inline]
fn advise(p: *mut u8, size: usize) {
    advise_huge(p, size);
    advise_startup(p, size);
}

// SAFETY: every call forwards to tikv-jemallocator with the layout `backend_layout` maps
// the caller's to, the same mapping for a block's allocation and its release, so jemalloc
// receives each block back with the layout it returned it for; the mapped layout has the
// caller's size and at least its alignment, so the block serves the caller's layout.
unsafe impl GlobalAlloc for Jemalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded; the mapped layout has the caller's nonzero size.
        let p = unsafe { tikv_jemallocator::Jemalloc.alloc(backend_layout(layout)) };
        advise(p, layout.size());
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { tikv_jemallocator::Jemalloc.alloc_zeroed(backend_layout(layout)) };
        advise(p, layout.size());
        p
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
            let p = unsafe { tikv_jemallocator::Jemalloc.realloc(ptr, old, new_size) };
            advise(p, new_size);
            return p;
        }
        // Across `HUGE`: the mapped alignments differ, so the block moves.
        // SAFETY: `new` has a nonzero size; both blocks are valid for the bytes copied (the
        // smaller of their sizes), and do not overlap (the new one is live beside the old).
        unsafe {
            let moved = tikv_jemallocator::Jemalloc.alloc(new);
            advise(moved, new_size);
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
    fn blocks_below_a_huge_page_keep_jemallocs_placement() {
        let a = Jemalloc;
        for size in [16 << 10, 100 << 10, HUGE - 1] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            assert_eq!(backend_layout(layout), layout);
            // jemalloc starts a large block at a random cache line of its first page: of 16
            // blocks, page-aligned by chance each one time in 64, some are off a page.
            let blocks: Vec<*mut u8> = (0..16)
                // SAFETY: freed below with the same layout.
                .map(|_| unsafe { a.alloc(layout) })
                .collect();
            assert!(blocks.iter().all(|p| !p.is_null()));
            let off_a_page = blocks.iter().filter(|&&p| p as usize % 4096 != 0).count();
            assert!(off_a_page > 0, "{size} B: every block page-aligned");
            for &p in &blocks {
                // SAFETY: allocated with `layout` above, freed once.
                unsafe { a.dealloc(p, layout) };
            }
        }
        let aligned = Layout::from_size_align(64 << 10, 1 << 16).unwrap();
        // SAFETY: freed once with its layout.
        unsafe {
            let p = a.alloc(aligned);
            assert_eq!(p as usize % (1 << 16), 0);
            a.dealloc(p, aligned);
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn huge_blocks_start_on_a_huge_page_and_are_advised_for_huge_pages() {
        let a = Jemalloc;
        let layout = Layout::from_size_align(6 << 20, 8).unwrap();
        // SAFETY: written within its size, freed once with its layout.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            assert_eq!(p as usize % HUGE, 0, "{p:?}");
            p.write_bytes(1, layout.size());
            // A kernel built without THP refuses the advice (and has no such directory).
            if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
                let flags = crate::testing::vm_flags(p);
                assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
            }
            // Grown across the bound, the block moves to a huge page, its bytes kept.
            let small = Layout::from_size_align(1 << 20, 8).unwrap();
            let q = a.alloc(small);
            q.write_bytes(7, small.size());
            let grown = a.realloc(q, small, 3 << 20);
            assert_eq!(grown as usize % HUGE, 0, "{grown:?}");
            assert_eq!(*grown.add((1 << 20) - 1), 7);
            a.dealloc(grown, Layout::from_size_align(3 << 20, 8).unwrap());
            a.dealloc(p, layout);
        }
        assert_eq!(
            backend_layout(Layout::from_size_align(HUGE, 8).unwrap()).align(),
            HUGE
        );
    }

    #[test]
    fn a_reallocated_block_keeps_its_bytes() {
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
            for i in 0..4000 {
                assert_eq!(*grown.add(i), (i % 251) as u8);
            }
            let large = Layout::from_size_align(40_000, 8).unwrap();
            let larger = a.realloc(grown, large, 80_000);
            assert_eq!(*larger.add(3999), (3999 % 251) as u8);
            let shrunk = a.realloc(larger, Layout::from_size_align(80_000, 8).unwrap(), 100);
            assert_eq!(*shrunk.add(99), 99);
            a.dealloc(shrunk, Layout::from_size_align(100, 8).unwrap());
        }
    }
}
