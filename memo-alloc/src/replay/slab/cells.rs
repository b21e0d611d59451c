//! The lane cells of a plan and of an instance (see the lanes of `replay`): where each
//! size class's cells lie in an instance's lane block ([`LaneLayout`]), and which of them
//! are live ([`LaneCells`], one bit per cell):
//! - a hand-out sets a clear bit of its class (`fetch_or`, Acquire: the free that cleared
//!   it happens-before the cell's reuse), scanning the class's words from where the last
//!   hand-out found one;
//! - a free, on any thread, clears its cell's bit (`fetch_and`, Release), the last access
//!   to the instance it makes (as a slot's first group word, see `replay::free`);
//! - except that a free on the thread of a context handing out from the same instance
//!   keeps the cell for that context ([`FreedCells`]): its bit stays set, the context's
//!   next request of the class takes it back without touching the bitmap, and what the
//!   context still keeps is cleared when it stops handing out from the instance. A pass
//!   that frees as it goes then makes no locked read-modify-write per small request (each
//!   one waits for the thread's pending stores, which after a tensor's worth of writes is
//!   most of its cost), and reuses the cell it freed last, still in the cache.
//!
//! Cells are aligned to their size: classes are laid out largest first from the lane
//! block's base, which is chunk-aligned.

use crate::memory::lane_classes::{
    cell_size, classes_below, valid_max, CLASSES, MAX_CELLS, MIN_CELL_LOG2,
};
use crate::support::sync::{AtomicU32, AtomicU64, Ordering};

/// Bits per bitmap word.
const BITS: usize = 64;

/// One class's cells in the slab and in the instance's bitmap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Class {
    /// Lane-block offset of the first cell.
    offset: u64,
    cells: u32,
    /// Index of the class's first bitmap word.
    word: u32,
}

impl Class {
    fn words(&self) -> usize {
        (self.cells as usize).div_ceil(BITS)
    }
}

/// Where a plan's lane cells lie in an instance's lane block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LaneLayout {
    /// Requests of at most this many bytes (size and alignment) take lane cells; 0: none.
    pub(crate) max: u64,
    /// Bytes of the lane block the cells take (0 when no class has a cell): every cell
    /// lies in `0..bytes` from its base.
    pub(crate) bytes: u64,
    classes: [Class; CLASSES],
    /// Bitmap words of an instance.
    words: u32,
}

impl LaneLayout {
    /// `cells[k]` cells of class `k` for requests of at most `max` bytes, largest class
    /// first from offset 0. The caller checked `valid_max(max)`, at most [`MAX_CELLS`] a
    /// class and at most one count per class of `max`.
    pub(crate) fn new(max: u64, cells: &[u32]) -> LaneLayout {
        debug_assert!(valid_max(max) && cells.len() <= classes_below(max));
        debug_assert!(cells.iter().all(|&c| c <= MAX_CELLS));
        let mut layout = LaneLayout {
            max,
            ..LaneLayout::default()
        };
        let top = (0..cells.len()).rev().find(|&k| cells[k] > 0);
        let Some(top) = top else {
            return layout;
        };
        let (mut offset, mut word) = (0, 0u32);
        for k in (0..=top).rev() {
            let class = Class {
                offset,
                cells: cells[k],
                word,
            };
            offset += cells[k] as u64 * cell_size(k);
            word += class.words() as u32;
            layout.classes[k] = class;
        }
        layout.bytes = offset;
        layout.words = word;
        layout
    }

    /// Cells of each class, for classes up to `max` (what a plan document holds).
    pub(crate) fn cells(&self) -> Vec<u32> {
        (0..classes_below(self.max))
            .map(|k| self.classes[k].cells)
            .collect()
    }

    /// Bitmap words an instance keeps.
    pub(crate) fn words(&self) -> usize {
        self.words as usize
    }

    /// Whether lane-block offset `offset` is in a cell.
    #[inline(always)]
    pub(crate) fn holds(&self, offset: u64) -> bool {
        offset < self.bytes
    }

    /// The class of the cell at lane-block offset `offset` and the cell's index.
    #[inline]
    fn cell_at(&self, offset: u64) -> Option<(usize, usize)> {
        // Classes lie largest first, from 0: the class of an offset in a cell is the
        // smallest with cells whose first cell is at or below it.
        if !self.holds(offset) {
            return None;
        }
        let k = (0..CLASSES).find(|&k| {
            let c = &self.classes[k];
            c.cells > 0 && offset >= c.offset
        })?;
        let cell = (offset - self.classes[k].offset) >> (MIN_CELL_LOG2 as usize + k);
        debug_assert!(cell < self.classes[k].cells as u64);
        Some((k, cell as usize))
    }

    /// The size of the cell at `offset` (0 if none is there).
    pub(crate) fn cell_size_at(&self, offset: u64) -> u64 {
        self.cell_at(offset).map_or(0, |(k, _)| cell_size(k))
    }
}

/// Sets a clear bit of `word`, the class's word `w`; the lane-block offset of its cell, or `None`
/// when every cell of the word is live (bits past the class's cells count as live).
#[inline(always)]
fn take_in(word: &AtomicU64, w: usize, c: &Class, class: usize) -> Option<u64> {
    let mut seen = word.load(Ordering::Relaxed);
    loop {
        // The lowest clear bit (64: none).
        let bit = (!seen).trailing_zeros() as usize;
        let cell = w * BITS + bit;
        if bit == BITS || cell >= c.cells as usize {
            return None;
        }
        // Acquire: the free that cleared the bit (Release) happens-before the cell's reuse.
        // Only the bit's old value is read, so that x86 sets it with one `lock bts`
        // (reading the whole word back compiled to a compare-exchange loop).
        let mask = 1u64 << bit;
        if word.fetch_or(mask, Ordering::Acquire) & mask == 0 {
            return Some(c.offset + ((cell as u64) << (MIN_CELL_LOG2 as usize + class)));
        }
        seen = word.load(Ordering::Relaxed); // another context took it first
    }
}

/// An instance's lane bitmap: one bit per cell, set while the cell is live. The bits
/// past a class's last cell stay clear: a hand-out stops at its class's cell count.
pub(crate) struct LaneCells {
    words: Box<[AtomicU64]>,
    /// Per class, the word (within the class) where the last hand-out found a clear bit.
    hints: [AtomicU32; CLASSES],
}

impl LaneCells {
    /// The bitmap of a new instance, every cell free; `None` when memory ran out.
    pub(crate) fn new(layout: &LaneLayout) -> Option<LaneCells> {
        let words =
            crate::support::fallible::try_boxed_slice(layout.words(), |_| AtomicU64::new(0))?;
        Some(LaneCells {
            words,
            hints: std::array::from_fn(|_| AtomicU32::new(0)),
        })
    }

    /// Takes a free cell of class `class`; its lane-block offset, or `None` when every cell of
    /// the class is live. Any thread in the pass's contexts may call it.
    ///
    /// The word where the class's last hand-out found a clear bit is tried first (in a
    /// pass that frees as it goes, nearly always with success); then the class's other
    /// words, off the hit path.
    #[inline]
    pub(crate) fn alloc(&self, layout: &LaneLayout, class: usize) -> Option<u64> {
        let c = layout.classes.get(class)?;
        let words = self
            .words
            .get(c.word as usize..c.word as usize + c.words())?;
        let hint = self.hints[class].load(Ordering::Relaxed) as usize;
        // Hints are word indices of the class (none if it has no words).
        let word = words.get(hint)?;
        take_in(word, hint, c, class).or_else(|| self.scan(words, hint, c, class))
    }

    /// [`LaneCells::alloc`] past the hint: the class's words after `hint`, then those
    /// before it; the word where it finds a clear bit becomes the hint.
    #[cold]
    #[inline(never)]
    fn scan(&self, words: &[AtomicU64], hint: usize, c: &Class, class: usize) -> Option<u64> {
        // `alloc` read the hint's word: `hint < words.len()`.
        (hint + 1..words.len()).chain(0..hint).find_map(|w| {
            let offset = take_in(&words[w], w, c, class)?;
            self.hints[class].store(w as u32, Ordering::Relaxed);
            Some(offset)
        })
    }

    /// Takes a free cell of the smallest class above `class` that has one (every cell of
    /// `class` is live): a pass of a smaller shape moves requests down a class or two, so
    /// the classes above have cells to spare. Cells are aligned to their size, so a larger
    /// one serves the request as well; a free finds its class by its offset.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc_above(&self, layout: &LaneLayout, class: usize) -> Option<u64> {
        (class + 1..classes_below(layout.max)).find_map(|k| self.alloc(layout, k))
    }

    /// Frees the live cell at lane-block offset `offset`, from any thread.
    /// The clearing `fetch_and` is the last access to the instance: once no cell or slot
    /// is live, another thread may free it.
    #[inline]
    pub(crate) fn free(&self, layout: &LaneLayout, offset: u64) {
        let Some((k, cell)) = layout.cell_at(offset) else {
            debug_assert!(false, "a lane free between cells");
            return;
        };
        let Some(word) = self
            .words
            .get(layout.classes[k].word as usize + cell / BITS)
        else {
            return;
        };
        let bit = 1u64 << (cell % BITS);
        // Release: the program's accesses to the cell happen-before its reuse.
        let before = word.fetch_and(!bit, Ordering::Release);
        debug_assert!(before & bit != 0, "a lane cell freed twice");
    }

    /// Clears the bits `mask` of bitmap word `word` (cells a context kept, see
    /// [`FreedCells`]): the last access to the instance, as a free's.
    #[inline]
    fn clear(&self, word: u32, mask: u64) {
        if let Some(w) = self.words.get(word as usize) {
            // Release: the program's accesses to the cells happen-before their reuse.
            let before = w.fetch_and(!mask, Ordering::Release);
            debug_assert_eq!(before & mask, mask, "a kept cell that was not live");
        }
    }

    /// Whether cell `bit` of bitmap word `word` is set (a snapshot, for assertions).
    fn is_set(&self, word: u32, bit: u64) -> bool {
        self.words
            .get(word as usize)
            .is_some_and(|w| w.load(Ordering::Relaxed) & bit != 0)
    }

    /// Live cells (a snapshot).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn live(&self) -> u64 {
        self.words
            .iter()
            .map(|word| word.load(Ordering::Acquire).count_ones() as u64)
            .sum()
    }

    /// Whether any cell is live (a snapshot).
    pub(crate) fn any_live(&self) -> bool {
        self.words
            .iter()
            .any(|word| word.load(Ordering::Acquire) != 0)
    }
}

/// The cells of one instance that one context freed and keeps for its own next requests,
/// at most one bitmap word's worth per class: their bits stay set (live, to every other
/// context), so no one else hands them out or clears them, until [`FreedCells::flush`].
///
/// Owned by the context's replay; only the thread in the context uses it.
#[derive(Debug, Default)]
pub(crate) struct FreedCells {
    /// Per class, the bitmap word the kept cells are in.
    words: [u32; CLASSES],
    /// Per class, the kept cells of that word (0: none kept).
    masks: [u64; CLASSES],
}

impl FreedCells {
    /// Whether no cell is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.masks.iter().all(|&m| m == 0)
    }

    /// Takes back a kept cell of class `class` (the lowest of its word); its lane-block
    /// offset. Its bit is still set: it is live again.
    #[inline(always)]
    pub(crate) fn take(&mut self, layout: &LaneLayout, class: usize) -> Option<u64> {
        let mask = self.masks.get_mut(class)?;
        if *mask == 0 {
            return None;
        }
        let bit = mask.trailing_zeros();
        *mask &= *mask - 1;
        let c = &layout.classes[class];
        let cell = (self.words[class] - c.word) as u64 * BITS as u64 + bit as u64;
        debug_assert!(cell < c.cells as u64);
        Some(c.offset + (cell << (MIN_CELL_LOG2 as usize + class)))
    }

    /// Takes back a kept cell of the smallest class above `class` that keeps one (a full
    /// class borrows, see [`LaneCells::alloc_above`]).
    #[cold]
    pub(crate) fn take_above(&mut self, layout: &LaneLayout, class: usize) -> Option<u64> {
        (class + 1..classes_below(layout.max)).find_map(|k| self.take(layout, k))
    }

    /// Keeps the live cell at lane-block offset `offset` of `cells` (this context's
    /// instance), freed by the program: when the class keeps cells of another word, those
    /// are cleared first.
    #[inline]
    pub(crate) fn put(&mut self, cells: &LaneCells, layout: &LaneLayout, offset: u64) {
        let Some((k, cell)) = layout.cell_at(offset) else {
            debug_assert!(false, "a lane free between cells");
            return;
        };
        let word = layout.classes[k].word + (cell / BITS) as u32;
        let bit = 1u64 << (cell % BITS);
        debug_assert!(cells.is_set(word, bit), "a lane cell freed twice");
        if self.words[k] != word {
            if self.masks[k] != 0 {
                cells.clear(self.words[k], self.masks[k]);
            }
            self.words[k] = word;
            self.masks[k] = 0;
        }
        debug_assert!(self.masks[k] & bit == 0, "a kept cell freed again");
        self.masks[k] |= bit;
    }

    /// Clears every kept cell in `cells`, which it was kept from: they are free to every
    /// context again. Once it is done, this context may no longer touch the instance.
    pub(crate) fn flush(&mut self, cells: &LaneCells) {
        for (word, mask) in self.words.iter().zip(self.masks.iter_mut()) {
            if *mask != 0 {
                cells.clear(*word, std::mem::take(mask));
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn cells_are_aligned_to_their_size_and_disjoint() {
        let l = LaneLayout::new(256, &[3, 70, 0, 2, 5]);
        let mut ranges = Vec::new();
        for (k, &n) in [3u32, 70, 0, 2, 5].iter().enumerate() {
            let c = &l.classes[k];
            assert_eq!(c.cells, n);
            if n > 0 {
                assert_eq!(c.offset % cell_size(k), 0, "class {k}");
                ranges.push((c.offset, c.offset + n as u64 * cell_size(k)));
            }
        }
        ranges.sort();
        assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0));
        assert_eq!((ranges[0].0, ranges.last().unwrap().1), (0, l.bytes));
        assert_eq!(l.cells(), vec![3, 70, 0, 2, 5]);
        assert_eq!(l.words(), 1 + 2 + 1 + 1);
    }

    /// Every cell's offset maps back to its class and index, with classes of no cells
    /// between others; offsets outside the area map to none.
    #[test]
    fn each_cell_offset_finds_its_class() {
        let counts = [5u32, 0, 130, 0, 0, 3, 0, 1];
        let l = LaneLayout::new(2048, &counts);
        for (k, &n) in counts.iter().enumerate() {
            for i in 0..n as usize {
                let offset = l.classes[k].offset + (i as u64) * cell_size(k);
                assert_eq!(l.cell_at(offset), Some((k, i)), "class {k} cell {i}");
                assert_eq!(l.cell_size_at(offset), cell_size(k));
            }
        }
        assert_eq!(l.cell_at(l.bytes), None);
        assert_eq!(l.cell_at(u64::MAX), None);
    }

    #[test]
    fn a_layout_without_cells_is_empty() {
        let l = LaneLayout::new(64, &[0, 0, 0]);
        assert_eq!((l.bytes, l.words()), (0, 0));
        assert!(!l.holds(0));
        let cells = LaneCells::new(&l).unwrap();
        assert_eq!(cells.alloc(&l, 0), None);
        assert!(!cells.any_live());
    }

    #[test]
    fn every_cell_is_handed_out_once_until_freed() {
        let l = LaneLayout::new(64, &[70, 1, 3]);
        let cells = LaneCells::new(&l).unwrap();
        let mut got: Vec<u64> = (0..70).map(|_| cells.alloc(&l, 0).unwrap()).collect();
        assert_eq!(cells.alloc(&l, 0), None, "70 cells, 70 live");
        assert_eq!(cells.live(), 70);
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 70);
        assert!(got.iter().all(|&o| l.holds(o) && l.cell_size_at(o) == 16));
        // The other classes are untouched.
        assert!(cells.alloc(&l, 1).is_some());
        assert_eq!(cells.alloc(&l, 1), None);
        cells.free(&l, got[65]);
        assert_eq!(cells.alloc(&l, 0), Some(got[65]));
        // The hint is at the class's second word, which is full: the scan wraps to the
        // first.
        cells.free(&l, got[3]);
        assert_eq!(cells.alloc(&l, 0), Some(got[3]));
        for &o in &got {
            cells.free(&l, o);
        }
        assert_eq!(cells.live(), 1);
        assert!(cells.any_live());
    }

    /// A kept cell stays live in the bitmap and comes back to its context first; another
    /// word's free clears what the class kept; a flush clears the rest.
    #[test]
    fn a_freed_cell_is_kept_for_its_context_until_flushed() {
        let l = LaneLayout::new(64, &[70, 2]);
        let cells = LaneCells::new(&l).unwrap();
        let mut kept = FreedCells::default();
        let got: Vec<u64> = (0..70).map(|_| cells.alloc(&l, 0).unwrap()).collect();
        kept.put(&cells, &l, got[5]);
        kept.put(&cells, &l, got[2]);
        assert_eq!(cells.live(), 70, "kept cells stay set");
        assert_eq!(cells.alloc(&l, 0), None, "and no other context takes them");
        assert_eq!(kept.take(&l, 0), Some(got[2]));
        assert_eq!(kept.take(&l, 1), None, "another class keeps nothing");
        // A cell of the class's second word: the first word's kept cell is cleared.
        kept.put(&cells, &l, got[66]);
        assert_eq!(cells.live(), 69);
        assert_eq!(cells.alloc(&l, 0), Some(got[5]));
        kept.put(&cells, &l, got[64]);
        assert!(!kept.is_empty());
        kept.flush(&cells);
        assert!(kept.is_empty());
        assert_eq!(cells.live(), 68);
        assert_eq!(kept.take(&l, 0), None);
        let b = cells.alloc(&l, 1).unwrap();
        kept.put(&cells, &l, b);
        assert_eq!(kept.take(&l, 1), Some(b));
    }
}
