//! The shadow rules (as `memo-alloc/tests/shadow.rs` checks them): every block handed out
//! is aligned for its layout and overlaps no other live block, and keeps the pattern
//! written into it until it is freed (a write through an overlap is found there).

use std::collections::BTreeMap;

/// The live blocks, by address: `start -> (len, id)`.
#[derive(Default)]
pub struct Live {
    blocks: BTreeMap<usize, (usize, u64)>,
    next_id: u64,
}

/// The byte of block `id` at `i`: a pattern no other block shares at the same place.
fn pattern(id: u64, i: usize) -> u8 {
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 ^ (i as u8).wrapping_mul(31)
}

impl Live {
    /// Registers block `[p, p + len)` of alignment `align` and fills it with its pattern;
    /// panics if it is misaligned or overlaps a live block. Returns its id.
    ///
    /// # Safety
    /// `p` is valid for writes of `len` bytes while the block is live.
    pub unsafe fn insert(&mut self, p: *mut u8, len: usize, align: usize) -> u64 {
        let start = p as usize;
        assert_eq!(start % align, 0, "block {start:#x} not aligned to {align}");
        let end = start + len.max(1);
        if let Some((&s, &(l, id))) = self.blocks.range(..end).next_back() {
            assert!(
                s + l.max(1) <= start,
                "block [{start:#x}, {end:#x}) overlaps live block {id} at [{s:#x}, {:#x})",
                s + l.max(1)
            );
        }
        let id = self.next_id;
        self.next_id += 1;
        // SAFETY: the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, len) };
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = pattern(id, i);
        }
        self.blocks.insert(start, (len, id));
        id
    }

    /// Checks the pattern of live block `p` and unregisters it; returns its length.
    ///
    /// # Safety
    /// `p` was registered with [`Live::insert`] and is still valid.
    pub unsafe fn remove(&mut self, p: *mut u8) -> usize {
        // SAFETY: forwarded.
        let len = unsafe { self.check(p, usize::MAX) };
        self.blocks.remove(&(p as usize));
        len
    }

    /// Checks the first `upto` bytes (at most the block's) of live block `p`'s pattern;
    /// returns the block's length.
    ///
    /// # Safety
    /// As [`Live::remove`].
    pub unsafe fn check(&self, p: *mut u8, upto: usize) -> usize {
        let &(len, id) = self
            .blocks
            .get(&(p as usize))
            .unwrap_or_else(|| panic!("{p:?} is not a live block"));
        // SAFETY: a live block of `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(p, len.min(upto)) };
        for (i, &b) in bytes.iter().enumerate() {
            assert_eq!(
                b,
                pattern(id, i),
                "block {id} at {p:?} changed at byte {i} of {len}"
            );
        }
        len
    }

    /// Moves live block `old` to `[new, new + len)` (a realloc; `new` may equal `old`): its
    /// first bytes up to the smaller length must be `old`'s, the new block is checked as
    /// [`Live::insert`] checks and gets a fresh pattern. Returns the new id.
    ///
    /// # Safety
    /// `old` is a registered block (its memory may be gone when `new != old`); `new` is
    /// valid for writes of `len` bytes while the block is live.
    pub unsafe fn moved(&mut self, old: *mut u8, new: *mut u8, len: usize, align: usize) -> u64 {
        let (old_len, old_id) = self
            .blocks
            .remove(&(old as usize))
            .unwrap_or_else(|| panic!("{old:?} is not a live block"));
        // SAFETY: `new` holds `len` bytes.
        let kept = unsafe { std::slice::from_raw_parts(new, len.min(old_len)) };
        for (i, &b) in kept.iter().enumerate() {
            assert_eq!(
                b,
                pattern(old_id, i),
                "realloc of block {old_id} from {old:?} to {new:?} lost byte {i}"
            );
        }
        // SAFETY: forwarded.
        unsafe { self.insert(new, len, align) }
    }

    /// The live blocks' addresses, in address order.
    pub fn addresses(&self) -> Vec<*mut u8> {
        self.blocks.keys().map(|&a| a as *mut u8).collect()
    }

    /// Number of live blocks.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether no block is live.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}
