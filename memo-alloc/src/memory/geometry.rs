//! Slab geometry: the chunk every slab is carved in, the alignment of slab bases, the
//! alignment a planned slot gets. A leaf: it knows nothing else of the crate.

/// log2 of the chunk size (2 MiB).
pub(crate) const CHUNK_SHIFT: u32 = 21;
/// The unit the slab region is carved in, and the alignment of every slab base.
pub(crate) const CHUNK: usize = 1 << CHUNK_SHIFT;
/// Alignment of every slab base (a chunk boundary).
pub(crate) const SLAB_ALIGN: u64 = CHUNK as u64;
/// The page size slab memory is returned to the OS in.
pub(crate) const PAGE: usize = 4096;

/// Allocations asking for a larger alignment than this (the alignment of every slab base,
/// 2 MiB) are never planned: replay serves them from the backend.
pub const MAX_PLANNED_ALIGN: u64 = SLAB_ALIGN;

/// The alignment a slot gets: the requested one, raised to 16 bytes (what `malloc`
/// guarantees) and to 64 bytes (a cache line) for buffers of 4 KiB or more.
///
/// ```
/// assert_eq!(memo_alloc::trace::plan_align(1, 8), 16);
/// assert_eq!(memo_alloc::trace::plan_align(8, 4096), 64);
/// assert_eq!(memo_alloc::trace::plan_align(4096, 8), 4096);
/// ```
pub fn plan_align(requested: u64, size: u64) -> u64 {
    let floor = if size >= 4096 { 64 } else { 16 };
    requested.max(floor).next_power_of_two()
}

/// Whole chunks needed for `bytes` (at least one).
pub(crate) fn chunks_for(bytes: u64) -> usize {
    (bytes.max(1) as usize).div_ceil(CHUNK)
}

/// The largest alignment an address at `offset` from a slab base is guaranteed to have.
pub(crate) fn offset_align(offset: u64) -> u64 {
    if offset == 0 {
        SLAB_ALIGN
    } else {
        (1u64 << offset.trailing_zeros()).min(SLAB_ALIGN)
    }
}
