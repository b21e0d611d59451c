//! How much of each 2 MiB page the blocks made before the first pass cover (see
//! `alloc/jemalloc.rs`): a fixed table of per-page byte counts, lock-free and never
//! allocating, so that a page is advised for huge pages only once such blocks fill half of
//! it ([`cover`]); and keeping those pages huge ([`collapse_covered`]).
//!
//! Frees are not counted: a startup block is a model's weights, kept for the program's
//! life. A block freed at startup and its range reused counts twice, which at worst advises
//! a page a little early. When the table is full, pages not in it are never advised.
//!
//! A page is advised when its count crosses half, after its first blocks were written on
//! 4 KiB pages (a model's loader fills each matrix as it makes it), and the kernel backs
//! only later faults with a huge page, which a range already holding small pages never
//! gets. And when a profile's plan is published, the backend's purge (`release.rs`)
//! returns the free ranges inside such pages (a loader's scratch, freed among the weights)
//! page by page, which splits a huge page into small ones. So after each purge every page
//! counted seven eighths full is collapsed into a huge page (`MADV_COLLAPSE`, Linux 6.1 and
//! later; a page already huge costs a check): the weights are read through huge pages in
//! every replayed pass, for at most a quarter of a MiB of each such page that they leave
//! unused.

use crate::support::sync::{plain, Ordering};

/// Pages the table counts (16 KiB of statics; a model of 2 GiB in 256 KiB+ blocks).
const SLOTS: usize = 1024;
/// Slots a page may probe past its own before it counts as not in the table.
const PROBES: usize = 32;

/// The page (its number, plus one: 0 is a free slot) each slot counts.
static PAGES: [plain::AtomicUsize; SLOTS] = [const { plain::AtomicUsize::new(0) }; SLOTS];
/// The bytes counted for each slot's page.
static BYTES: [plain::AtomicUsize; SLOTS] = [const { plain::AtomicUsize::new(0) }; SLOTS];

/// Bytes of the pages counted: a transparent huge page.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// A page is advised once startup blocks cover this much of it.
pub(crate) const HALF: usize = HUGE_PAGE / 2;

/// A page is collapsed into a huge page after a purge once startup blocks cover this much
/// of it: the collapse fills the rest of the page, which a purge keeps returning otherwise
/// (at half, memo-bench's gpt2 at 2 threads held 8 MiB more; at seven eighths, 1 MiB).
pub(crate) const MOSTLY: usize = HUGE_PAGE / 8 * 7;

/// Adds `bytes` to the count of page `page` (its address divided by its size); true for
/// the one call that takes the count from below `half` to at least it.
pub(crate) fn cover(page: usize, bytes: usize, half: usize) -> bool {
    let key = page.wrapping_add(1);
    let home = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (usize::BITS - SLOTS.ilog2());
    for i in 0..PROBES {
        let slot = (home + i) % SLOTS;
        let owner = match PAGES[slot].compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => key,
            Err(current) => current,
        };
        if owner == key {
            let before = BYTES[slot].fetch_add(bytes, Ordering::Relaxed);
            return before < half && before + bytes >= half;
        }
    }
    false
}

/// Collapses every page counted at least [`MOSTLY`] full into a huge page (see the module
/// documentation). Runs off the allocation paths, after the backend's purge. A kernel that
/// cannot collapse (before Linux 6.1, THP off, no free huge page) refuses, and the page
/// stays as it is.
pub(crate) fn collapse_covered() {
    for (page, bytes) in PAGES.iter().zip(&BYTES) {
        let key = page.load(Ordering::Acquire);
        if key != 0 && bytes.load(Ordering::Relaxed) >= MOSTLY {
            collapse((key - 1) * HUGE_PAGE);
        }
    }
}

/// Asks the kernel to back the 2 MiB page at `start` with a huge page now.
fn collapse(start: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(loom), not(miri)))]
    // SAFETY: advice only. MADV_HUGEPAGE again, for the part of the page in a mapping the
    // backend made after the page was advised (jemalloc maps its memory in pieces, and a
    // huge page must lie in one mapping, of one advice); MADV_COLLAPSE copies the page's
    // resident small pages into a huge page and fills the rest with zeros, which is what a
    // fault there would read. Both change how the kernel backs the range, never its
    // contents or access, so they are harmless to whatever the backend keeps in the page
    // (where part of the range is not mapped, a call reports it and leaves that part as
    // it is).
    unsafe {
        let page = start as *mut libc::c_void;
        libc::madvise(page, HUGE_PAGE, libc::MADV_HUGEPAGE);
        libc::madvise(page, HUGE_PAGE, libc::MADV_COLLAPSE);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", not(loom), not(miri))))]
    let _ = start;
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_page_crosses_half_once_whatever_the_order_of_its_blocks() {
        // Pages far from any other test's addresses.
        let page = usize::MAX / 4;
        assert!(!cover(page, 300, 1000));
        assert!(!cover(page + 1, 900, 1000), "another page counts apart");
        assert!(cover(page, 700, 1000), "300 + 700 reaches half");
        assert!(!cover(page, 500, 1000), "crossed once");
        assert!(cover(page + 1, 100, 1000));
        assert!(cover(page + 2, 1000, 1000), "one block filling half");
    }
}
