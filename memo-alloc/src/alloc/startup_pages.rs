//! How much of each 2 MiB page the blocks made before the first pass cover (see
//! `jemalloc.rs`): a fixed table of per-page byte counts, lock-free and never allocating,
//! so that a page is advised for huge pages only once such blocks fill half of it.
//!
//! Frees are not counted: a startup block is a model's weights, kept for the program's
//! life. A block freed at startup and its range reused counts twice, which at worst advises
//! a page a little early. When the table is full, pages not in it are never advised.

use crate::support::sync::{plain, Ordering};

/// Pages the table counts (16 KiB of statics; a model of 2 GiB in 256 KiB+ blocks).
const SLOTS: usize = 1024;
/// Slots a page may probe past its own before it counts as not in the table.
const PROBES: usize = 32;

/// The page (its number, plus one: 0 is a free slot) each slot counts.
static PAGES: [plain::AtomicUsize; SLOTS] = [const { plain::AtomicUsize::new(0) }; SLOTS];
/// The bytes counted for each slot's page.
static BYTES: [plain::AtomicUsize; SLOTS] = [const { plain::AtomicUsize::new(0) }; SLOTS];

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
