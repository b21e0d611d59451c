//! A backend that fails when told to: a thread arms it before one request
//! ([`arm`]), and the `n`-th call the allocator makes to the backend on that thread for
//! the request returns null (the request itself, or the allocator's own bookkeeping).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, failing the armed call of each thread.
pub struct Flaky;

thread_local! {
    /// Backend calls of this thread left before one fails (0: none fails).
    static FAIL_IN: Cell<u32> = const { Cell::new(0) };
}

/// Makes the `n`-th next backend call of this thread fail (`None`: none).
pub fn arm(n: Option<u32>) {
    let _ = FAIL_IN.try_with(|c| c.set(n.unwrap_or(0)));
}

/// Whether this call fails (counting it down).
fn fails() -> bool {
    FAIL_IN
        .try_with(|c| match c.get() {
            0 => false,
            n => {
                c.set(n - 1);
                n == 1
            }
        })
        .unwrap_or(false)
}

// SAFETY: forwards to `System`, or returns null (a failure any caller must handle).
unsafe impl GlobalAlloc for Flaky {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if fails() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if fails() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if fails() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}
