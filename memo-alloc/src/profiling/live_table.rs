//! The recorder's table of live allocations: canonical address -> record index.
//!
//! Open addressing with linear probing and backward-shift deletion (no tombstones), sized
//! at most half full. Addresses are never 0, so 0 marks an empty slot. This is the
//! profiling path's hottest structure: one insert per allocation, one removal per free.

/// Live allocations by address.
pub(crate) struct LiveTable {
    keys: Vec<usize>,
    values: Vec<u32>,
    len: usize,
    shift: u32,
}

const INITIAL_BITS: u32 = 10;

impl LiveTable {
    /// An empty table; `None` when memory ran out.
    pub(crate) fn new() -> Option<LiveTable> {
        Some(LiveTable {
            keys: zeroed(1 << INITIAL_BITS)?,
            values: zeroed(1 << INITIAL_BITS)?,
            len: 0,
            shift: 64 - INITIAL_BITS,
        })
    }

    /// Bytes of the table's storage.
    pub(crate) fn bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<usize>() + self.values.capacity() * 4
    }

    #[inline]
    fn home(&self, key: usize) -> usize {
        ((key as u64 >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.keys.len() - 1
    }

    /// Maps `key` (non-zero) to `value`; returns the value it replaced. `Err` when the
    /// table had to grow and memory ran out (the table is unchanged).
    pub(crate) fn insert(&mut self, key: usize, value: u32) -> Result<Option<u32>, ()> {
        debug_assert!(key != 0);
        if 2 * (self.len + 1) > self.keys.len() {
            self.grow()?;
        }
        Ok(self.insert_present(key, value))
    }

    fn insert_present(&mut self, key: usize, value: u32) -> Option<u32> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.keys[i];
            if k == 0 {
                self.keys[i] = key;
                self.values[i] = value;
                self.len += 1;
                return None;
            }
            if k == key {
                return Some(std::mem::replace(&mut self.values[i], value));
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `key`; returns its value.
    pub(crate) fn remove(&mut self, key: usize) -> Option<u32> {
        if key == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.keys[i];
            if k == 0 {
                return None;
            }
            if k == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let value = self.values[i];
        // Backward shift: pull later entries of the probe run into the hole when their
        // home does not lie cyclically in (hole, position].
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = self.keys[j];
            if k == 0 {
                break;
            }
            let h = self.home(k);
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.keys[i] = k;
                self.values[i] = self.values[j];
                i = j;
            }
        }
        self.keys[i] = 0;
        self.len -= 1;
        Some(value)
    }

    /// Every `(key, value)` pair, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.keys
            .iter()
            .zip(&self.values)
            .filter(|(&k, _)| k != 0)
            .map(|(&k, &v)| (k, v))
    }

    fn grow(&mut self) -> Result<(), ()> {
        let cap = self.keys.len() * 2;
        let (keys, values) = (zeroed(cap).ok_or(())?, zeroed(cap).ok_or(())?);
        let old_keys = std::mem::replace(&mut self.keys, keys);
        let old_values = std::mem::replace(&mut self.values, values);
        self.shift -= 1;
        self.len = 0;
        for (k, v) in old_keys.into_iter().zip(old_values) {
            if k != 0 {
                self.insert_present(k, v);
            }
        }
        Ok(())
    }
}

/// `n` zeros, or `None` when memory ran out.
fn zeroed<T: Copy + Default>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize(n, T::default());
    Some(v)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::collections::HashMap;

    proptest::proptest! {
        #[test]
        fn behaves_like_a_hash_map(ops in proptest::collection::vec((0u8..3, 1usize..200), 0..3000)) {
            let mut t = LiveTable::new().unwrap();
            let mut m: HashMap<usize, u32> = HashMap::new();
            for (n, (op, k)) in ops.into_iter().enumerate() {
                let key = k * 16; // addresses are mostly 16-aligned: clustered homes
                match op {
                    0 | 1 => proptest::prop_assert_eq!(t.insert(key, n as u32), Ok(m.insert(key, n as u32))),
                    _ => proptest::prop_assert_eq!(t.remove(key), m.remove(&key)),
                }
            }
            let mut a: Vec<_> = t.iter().collect();
            let mut b: Vec<_> = m.into_iter().collect();
            a.sort_unstable();
            b.sort_unstable();
            proptest::prop_assert_eq!(a, b);
        }
    }
}
