//! A fast hasher for addresses and small keys (bookkeeping only; not DoS-resistant).

use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing, in the style of FxHash.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(K);
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Hash of a scope name, identical wherever names are compared.
pub(crate) fn name_hash(parent: u32, name: &str) -> u64 {
    let mut h = FastHasher(parent as u64 ^ 0x9e37_79b9_7f4a_7c15);
    h.write(name.as_bytes());
    h.write_usize(name.len());
    h.finish()
}
