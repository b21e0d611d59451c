//! Blocks that carry a pattern derived from their id, checked when they are freed or
//! moved: a block another block overlapped, or that lost bytes in a realloc, is counted
//! as a corruption (and described on stderr).

use std::alloc::Layout;
use std::sync::atomic::{AtomicU64, Ordering};

use super::flaky;

/// Corrupted blocks found so far.
pub static CORRUPTIONS: AtomicU64 = AtomicU64::new(0);
/// Requests the backend failed (the caller got null and went on).
pub static FAILED_REQUESTS: AtomicU64 = AtomicU64::new(0);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Bytes at each end of a large block that carry the pattern (every byte of a block up
/// to twice this size does); in between, one byte per page.
const ENDS: usize = 1024;
const STRIDE: usize = 4096;

/// A live block of the global allocator, with its pattern.
pub struct Block {
    ptr: *mut u8,
    layout: Layout,
    id: u64,
}

// SAFETY: a block is owned memory of the global allocator, freed from any thread.
unsafe impl Send for Block {}

/// The pattern byte of block `id` at `i`.
fn pattern(id: u64, i: usize) -> u8 {
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
        ^ (i as u8).wrapping_mul(31)
        ^ (i >> 8) as u8
}

/// The positions of a `len`-byte block that carry the pattern.
fn positions(len: usize) -> impl Iterator<Item = usize> {
    let whole = len <= 2 * ENDS;
    let head = 0..if whole { len } else { ENDS };
    let middle = (ENDS..len.saturating_sub(ENDS))
        .step_by(STRIDE)
        .filter(move |_| !whole);
    let tail = if whole { 0..0 } else { len - ENDS..len };
    head.chain(middle).chain(tail)
}

impl Block {
    /// A new block of `size` bytes aligned to `align`, its pattern written; `None` when
    /// the allocator returned null (counted: the backend was made to fail). When
    /// `fail_within` is set, the backend fails its `n`-th call made for this request.
    pub fn new(size: usize, align: usize, fail_within: Option<u32>) -> Option<Block> {
        let layout = Layout::from_size_align(size.max(1), align).expect("a layout");
        flaky::arm(fail_within);
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        flaky::arm(None);
        if ptr.is_null() {
            FAILED_REQUESTS.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let block = Block {
            ptr,
            layout,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        };
        if ptr as usize % align != 0 {
            block.corrupt("misaligned", 0);
        }
        block.fill();
        Some(block)
    }

    /// The block's size.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    fn fill(&self) {
        for i in positions(self.len()) {
            // SAFETY: `i` is inside the live block.
            unsafe { self.ptr.add(i).write(pattern(self.id, i)) };
        }
    }

    /// Checks the pattern at the positions below `upto`; a difference is a corruption.
    fn check(&self, upto: usize, what: &str) {
        for i in positions(self.len()).filter(|&i| i < upto) {
            // SAFETY: `i` is inside the live block.
            let b = unsafe { self.ptr.add(i).read() };
            if b != pattern(self.id, i) {
                self.corrupt(what, i);
                return;
            }
        }
    }

    fn corrupt(&self, what: &str, at: usize) {
        CORRUPTIONS.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "stress: block {} at {:p} ({} B, align {}): {what} at byte {at}",
            self.id,
            self.ptr,
            self.len(),
            self.layout.align()
        );
    }

    /// Reallocs the block to `size` bytes: its kept bytes must survive; the moved block
    /// gets a fresh pattern. A failed realloc (null) leaves it as it was.
    pub fn realloc(&mut self, size: usize, fail_within: Option<u32>) {
        let size = size.max(1);
        self.check(usize::MAX, "changed before realloc");
        flaky::arm(fail_within);
        // SAFETY: a live block of `layout`; a non-zero size.
        let new = unsafe { std::alloc::realloc(self.ptr, self.layout, size) };
        flaky::arm(None);
        if new.is_null() {
            FAILED_REQUESTS.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.ptr = new;
        let kept = size.min(self.len());
        self.check(kept, "lost by realloc");
        self.layout = Layout::from_size_align(size, self.layout.align()).expect("a layout");
        self.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.fill();
    }
}

impl Drop for Block {
    /// Checks the pattern and frees the block.
    fn drop(&mut self) {
        self.check(usize::MAX, "changed while live");
        // SAFETY: a live block of `layout`, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}
