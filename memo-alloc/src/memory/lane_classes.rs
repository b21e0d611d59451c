//! The size classes of lane cells: a request of at most a plan's lane bound (size and
//! alignment) takes a cell of the smallest class that holds it, class `k` having cells of
//! `16 << k` bytes, up to 4 KiB. A leaf: profiles count by class, plans size their lanes
//! by class, replay hands out cells by class.

/// Smallest cell, log2: 16 bytes.
pub(crate) const MIN_CELL_LOG2: u32 = 4;
/// Largest cell, log2: 4 KiB (a page).
pub(crate) const MAX_CELL_LOG2: u32 = 12;
/// Size classes a layout may have.
pub(crate) const CLASSES: usize = (MAX_CELL_LOG2 - MIN_CELL_LOG2 + 1) as usize;
/// Most cells of one class.
pub(crate) const MAX_CELLS: u32 = 1 << 24;

/// The size class of a request of `size` bytes aligned to `align`, if lanes of at most
/// `max` bytes hold it (`max` 0: no lanes). Class `k` has cells of `16 << k` bytes.
///
/// ```text
/// class_of(1, 1, 64) == Some(0)    class_of(17, 8, 64) == Some(1)
/// class_of(8, 64, 64) == Some(2)   class_of(65, 1, 64) == None
/// ```
#[inline(always)]
pub(crate) fn class_of(size: u64, align: u64, max: u64) -> Option<usize> {
    let need = size.max(align);
    if need > max || need == 0 {
        return None;
    }
    let log2 = (u64::BITS - (need - 1).leading_zeros()).max(MIN_CELL_LOG2);
    Some((log2 - MIN_CELL_LOG2) as usize)
}

/// The cell size of class `class`.
pub(crate) fn cell_size(class: usize) -> u64 {
    1 << (MIN_CELL_LOG2 as usize + class)
}

/// Whether `max` is a lane bound a plan may have: 0 (none), or a power of two from the
/// smallest cell to the largest.
pub(crate) fn valid_max(max: u64) -> bool {
    max == 0 || (max.is_power_of_two() && (cell_size(0)..=cell_size(CLASSES - 1)).contains(&max))
}

/// The number of classes of lanes of at most `max` bytes.
pub(crate) fn classes_below(max: u64) -> usize {
    class_of(max, 1, max).map_or(0, |c| c + 1)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two_from_sixteen_bytes() {
        assert_eq!(class_of(1, 1, 64), Some(0));
        assert_eq!(class_of(16, 8, 64), Some(0));
        assert_eq!(class_of(17, 8, 64), Some(1));
        assert_eq!(class_of(8, 64, 64), Some(2));
        assert_eq!(class_of(64, 1, 64), Some(2));
        assert_eq!(class_of(65, 1, 64), None);
        assert_eq!(class_of(1, 1, 0), None);
        assert_eq!(classes_below(0), 0);
        assert_eq!(classes_below(64), 3);
        assert_eq!(classes_below(4096), CLASSES);
        assert!(valid_max(0) && valid_max(16) && valid_max(4096));
        assert!(!valid_max(8) && !valid_max(48) && !valid_max(8192));
    }
}
