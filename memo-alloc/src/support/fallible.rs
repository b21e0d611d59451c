//! Allocation that reports failure instead of aborting: the allocator's own bookkeeping
//! runs while the backend may be out of memory, and must then give up, not take the
//! process down. A leaf.

use std::alloc::Layout;

/// `Box::new(value)`, or `None` when the allocation fails.
pub(crate) fn try_box<T>(value: T) -> Option<Box<T>> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    // SAFETY: non-zero size.
    let p = unsafe { std::alloc::alloc(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh allocation of `T`'s layout, written once, then owned by the
    // box, which frees it with the same (global) allocator and layout.
    unsafe {
        p.write(value);
        Some(Box::from_raw(p))
    }
}

/// A boxed slice of `len` values made by `f`, or `None` when the allocation fails.
pub(crate) fn try_boxed_slice<T>(len: usize, f: impl FnMut(usize) -> T) -> Option<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    v.extend((0..len).map(f));
    Some(v.into_boxed_slice())
}

/// Makes room for one more element, or fails.
#[inline]
pub(crate) fn try_grow<T>(v: &mut Vec<T>) -> Result<(), ()> {
    if v.len() == v.capacity() {
        v.try_reserve(v.capacity().max(64)).map_err(|_| ())?;
    }
    Ok(())
}

/// Makes room for one more element of a queue, or fails.
#[inline]
pub(crate) fn try_grow_deque<T>(v: &mut std::collections::VecDeque<T>) -> Result<(), ()> {
    if v.len() == v.capacity() {
        v.try_reserve(v.capacity().max(8)).map_err(|_| ())?;
    }
    Ok(())
}
