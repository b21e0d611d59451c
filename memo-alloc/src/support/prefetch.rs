//! A software prefetch: a hint that brings a table entry into the cache before it is read.

/// Asks the CPU to bring `items[index]` into the cache (nothing if there is none): a hint,
/// no access.
#[inline(always)]
pub(crate) fn prefetch<T>(items: &[T], index: u32) {
    #[cfg(target_arch = "x86_64")]
    if let Some(item) = items.get(index as usize) {
        // SAFETY: SSE is part of x86_64; a prefetch reads nothing the program sees.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (item as *const T).cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (items, index);
}
