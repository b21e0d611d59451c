//! A small seeded generator (splitmix64) for the schedule's shuffles and the bootstrap's
//! resamples: the same seed gives the same run order and the same intervals.

/// A splitmix64 stream.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A stream from `seed` and the `parts` that name its use (a repetition and a group,
    /// say): each combination gets its own stream.
    pub fn new(seed: u64, parts: &[u64]) -> Rng {
        let mut r = Rng(seed);
        for &p in parts {
            r.0 ^= p.wrapping_mul(0xd6e8_feb8_6659_fd93);
            r.0 = r.next_u64();
        }
        Rng(r.0)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number uniform in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for the
    /// sizes used here).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// `items` in an order drawn from `rng` (Fisher-Yates).
pub fn shuffle<T>(items: &mut [T], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i + 1);
        items.swap(i, j);
    }
}
