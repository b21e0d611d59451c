//! Tagged pointers: a 16-bit tag in bits 48..63 over a 48-bit address.
//!
//! On x86-64 (without LAM, which these machines lack) a pointer with tag bits set faults
//! when dereferenced, so tagged pointers never leave the allocator: the program always
//! receives [`TaggedPtr::canonical`] addresses, and the trace stores the tagged ones.

use serde::{Deserialize, Serialize};

/// A pointer with a 16-bit tag in its upper bits (**contract**).
///
/// ```
/// use memo_alloc::tag::TaggedPtr;
/// let p = TaggedPtr::new(0x7fff_1234_5678 as *mut u8, 0xBEEF);
/// assert_eq!(p.tag(), 0xBEEF);
/// assert_eq!(p.addr(), 0x7fff_1234_5678);
/// assert_eq!(p.canonical() as usize, 0x7fff_1234_5678);
/// // Kernel-half addresses sign-extend bit 47.
/// let k = TaggedPtr::new(0xffff_8000_0000_1000usize as *mut u8, 7);
/// assert_eq!(k.canonical() as usize, 0xffff_8000_0000_1000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaggedPtr(u64);

const ADDR_BITS: u32 = 48;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

impl TaggedPtr {
    /// Tags `ptr` (its upper 16 bits are replaced by `tag`).
    pub fn new(ptr: *mut u8, tag: u16) -> TaggedPtr {
        TaggedPtr((ptr as u64 & ADDR_MASK) | ((tag as u64) << ADDR_BITS))
    }

    /// The tag.
    pub fn tag(self) -> u16 {
        (self.0 >> ADDR_BITS) as u16
    }

    /// The 48-bit address, without tag.
    pub fn addr(self) -> u64 {
        self.0 & ADDR_MASK
    }

    /// The raw 64-bit value, tag included.
    pub fn raw(self) -> u64 {
        self.0
    }

    /// The tagged pointer of a raw value (as [`TaggedPtr::raw`] gives it).
    pub fn from_raw(raw: u64) -> TaggedPtr {
        TaggedPtr(raw)
    }

    /// The canonical pointer: the tag cleared and bit 47 sign-extended into bits 48..63,
    /// exactly as Listing 4 of the MemoMalloc thesis.
    pub fn canonical(self) -> *mut u8 {
        let p = self.0;
        let canonical = (p & ADDR_MASK) | !((p & (1 << 47)).wrapping_sub(1));
        canonical as usize as *mut u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing4_semantics() {
        for addr in [0u64, 1, 0x7fff_ffff_ffff, 0x0000_5555_dead_beef] {
            for tag in [0u16, 1, 0x8000, 0xffff] {
                let t = TaggedPtr::new(addr as usize as *mut u8, tag);
                assert_eq!(t.tag(), tag);
                assert_eq!(t.canonical() as u64, addr);
            }
        }
        let high = TaggedPtr::new(0x0000_8000_0000_0000u64 as usize as *mut u8, 3);
        assert_eq!(high.canonical() as u64, 0xffff_8000_0000_0000);
    }
}
