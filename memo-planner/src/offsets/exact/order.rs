//! Preorders: the keys that rank a sub-problem's buffers, and the restart lengths.
//!
//! A preorder is three keys, compared in order, all descending, ties by index: W lifetime,
//! A area, T the largest live (unplaced) section total over the buffer's sections (after
//! MiniMalloc's WAT, TAW and TWA), Z size, L first section, R a random number, and `a`
//! area times a random factor in [1, 2). The random keys change at every attempt, so a
//! rotation with one restarts on the Luby sequence (see [`luby`]); the search time of a
//! fixed preorder is heavy-tailed, and short randomised attempts cut the tail.

/// A preorder: three key letters (see the module doc).
pub(crate) type Preorder = [u8; 3];

/// The default rotation of preorders (MiniMalloc's).
pub(crate) const PREORDERS: [Preorder; 3] = [*b"WAT", *b"TAW", *b"TWA"];

/// What the keys are computed from, for one buffer.
pub(crate) struct Facts {
    /// Lifetime (`upper - lower`).
    pub width: u64,
    pub size: u64,
    /// The largest unplaced section total over the buffer's sections.
    pub total: u64,
    /// The buffer's first section.
    pub first: u32,
    /// A random number for this buffer and attempt.
    pub noise: u64,
}

/// The key of a buffer under `preorder` (larger keys rank first).
pub(crate) fn key(preorder: &Preorder, f: &Facts) -> [u128; 3] {
    let area = f.width as u128 * f.size as u128;
    let mut k = [0u128; 3];
    for (slot, &c) in k.iter_mut().zip(preorder) {
        *slot = match c {
            b'W' => f.width as u128,
            b'A' => area,
            b'Z' => f.size as u128,
            b'L' => f.first as u128,
            b'R' => f.noise as u128,
            b'a' => area * ((1u128 << 32) + (f.noise >> 32) as u128),
            _ => f.total as u128,
        };
    }
    k
}

/// Whether `preorder` has a random key (a new order at every attempt).
pub(crate) fn is_random(preorder: &Preorder) -> bool {
    preorder.iter().any(|&c| c == b'R' || c == b'a')
}

/// A 64-bit mixer (splitmix64's finaliser): the random keys.
pub(crate) fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, 1, 2, ... (`k` from 1): restart lengths
/// within a log factor of the best fixed length for any heavy-tailed search (Luby,
/// Sinclair and Zuckerman, 1993).
pub(crate) fn luby(k: u64) -> u64 {
    let mut k = k.max(1);
    loop {
        // The smallest j with k <= 2^j - 1.
        let j = 64 - k.leading_zeros() as u64;
        if k == (1u64 << j) - 1 {
            return 1 << (j - 1);
        }
        k -= (1u64 << (j - 1)) - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luby_sequence() {
        let got: Vec<u64> = (1..=15).map(luby).collect();
        assert_eq!(got, [1, 1, 2, 1, 1, 2, 4, 1, 1, 2, 1, 1, 2, 4, 8]);
    }

    #[test]
    fn keys_rank_as_their_letters_say() {
        let f = |width, size, total, noise| Facts {
            width,
            size,
            total,
            first: 0,
            noise,
        };
        let (long, tall) = (f(10, 2, 5, 1), f(2, 8, 9, 2));
        assert!(key(b"WAT", &long) > key(b"WAT", &tall));
        assert!(key(b"TWA", &long) < key(b"TWA", &tall));
        assert!(key(b"ZWT", &long) < key(b"ZWT", &tall));
        assert!(is_random(b"TWR") && is_random(b"aRR") && !is_random(b"TAW"));
        // The random factor never more than doubles an area.
        let k = key(b"aRR", &f(3, 4, 0, u64::MAX))[0];
        assert!((12u128 << 32..24u128 << 32).contains(&k));
    }
}
