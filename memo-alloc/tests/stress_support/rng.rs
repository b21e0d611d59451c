//! A small seeded random source (SplitMix64): a run is determined by its seed.

/// SplitMix64.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A source for stream `stream` of `seed` (a thread, a round, a child).
    pub fn derive(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F));
        r.next();
        r
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// A block size from 1 B to 4 MiB, mostly small (as programs allocate).
    pub fn size(&mut self) -> usize {
        let n = match self.below(1000) {
            0..=699 => 1 + self.below(256),
            700..=949 => 257 + self.below(16 << 10),
            950..=994 => 1 + self.below(256 << 10),
            _ => 1 + self.below(4 << 20),
        };
        n as usize
    }

    /// An alignment: mostly the default, now and then up to 4 KiB.
    pub fn align(&mut self) -> usize {
        if self.chance(1, 10) {
            1 << self.below(13)
        } else {
            8
        }
    }
}

/// A stable hash of a key (its passes' programs derive from it, so that they repeat).
pub fn hash(key: &str) -> u64 {
    key.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01B3)
    })
}
