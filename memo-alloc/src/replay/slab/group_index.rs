//! Offset -> address group lookup for frees: a radix directory over the sorted group
//! offsets.
//!
//! A free knows its pointer's offset in the slab and needs the index of the address group
//! starting there. The groups are the plan's distinct slot offsets, sorted, so the index
//! is the offset's rank. The directory cuts the slab into buckets of `1 << shift` bytes
//! (as small as a directory of at most four entries per group allows) and keeps, per
//! bucket, the rank of its first group; a lookup reads the bucket's two entries and
//! searches the few offsets between.
//!
//! Why not a hash table: frees of a pass come in address neighbourhoods (the program's
//! working set), and so do the directory entries they read here, while a hash scatters
//! them. The tables are also small: at most four 4-byte entries per group, plus the
//! offsets, of which a pass reads the part over its dense small slots; a hash table of
//! 16-byte entries at most half full takes several times that, read all over.

use crate::format::trace::MAX_SLAB_HEIGHT;

/// The groups of one plan, by offset.
#[derive(Debug, Default)]
pub(crate) struct GroupIndex {
    /// Per bucket, the rank of its first group; one more entry closes the last bucket.
    first: Vec<u32>,
    /// Each group's offset within its bucket, by rank (bucket offsets are below
    /// `1 << shift <= 1 << 32`).
    within: Vec<u32>,
    /// Bucket size, log 2; at most 32.
    shift: u32,
}

impl GroupIndex {
    /// Indexes `offsets`: sorted, distinct, each below [`MAX_SLAB_HEIGHT`] (a compiled
    /// plan's are: `PlanFile::check`).
    pub(crate) fn new(offsets: &[u64]) -> GroupIndex {
        debug_assert!(offsets.windows(2).all(|w| w[0] < w[1]));
        let Some(&last) = offsets.last() else {
            return GroupIndex::default();
        };
        debug_assert!(last < MAX_SLAB_HEIGHT);
        let shift = bucket_shift(last, offsets.len());
        // At most `BUCKETS_PER_GROUP` per group, or `MAX_SLAB_HEIGHT >> 32` with the cap.
        let buckets = (last >> shift) as usize + 1;
        let mut first = vec![0u32; buckets + 1];
        for &o in offsets {
            first[(o >> shift) as usize + 1] += 1;
        }
        for b in 1..first.len() {
            first[b] += first[b - 1];
        }
        let mask = low_mask(shift);
        let within = offsets.iter().map(|&o| (o & mask) as u32).collect();
        GroupIndex {
            first,
            within,
            shift,
        }
    }

    /// The rank of the group starting exactly at `offset`, if one does.
    #[inline]
    pub(crate) fn group_at(&self, offset: u64) -> Option<u32> {
        let b = usize::try_from(offset >> self.shift).ok()?;
        let &[lo, hi, ..] = self.first.get(b..)? else {
            return None; // past the last group
        };
        let (lo, hi) = (lo as usize, hi as usize);
        let key = (offset & low_mask(self.shift)) as u32;
        let bucket = self.within.get(lo..hi)?;
        // Buckets hold a few groups; a linear scan beats a binary search there.
        let at = if bucket.len() <= 8 {
            bucket.iter().position(|&w| w == key)?
        } else {
            bucket.binary_search(&key).ok()?
        };
        Some((lo + at) as u32)
    }

    /// Number of groups.
    pub(crate) fn len(&self) -> usize {
        self.within.len()
    }

    /// Most groups in one bucket.
    #[cfg(test)]
    pub(crate) fn largest_bucket(&self) -> u32 {
        self.first
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    /// Bytes of the directory and offsets.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        (self.first.len() + self.within.len()) * std::mem::size_of::<u32>()
    }
}

/// The bucket size, log 2, for `groups` groups up to offset `last`: the smallest with at
/// most [`BUCKETS_PER_GROUP`] buckets per group, and at most `1 << 32` bytes so that
/// offsets within a bucket fit a `u32`. The smallest, because small slots pack densely:
/// sized by the average gap of a plan of many small slots below a few large ones, a
/// bucket would hold tens of groups.
fn bucket_shift(last: u64, groups: usize) -> u32 {
    let most = (groups as u64).saturating_mul(BUCKETS_PER_GROUP);
    (0..32).find(|&s| last >> s < most).unwrap_or(32)
}

/// Most directory entries per group (4 bytes each).
const BUCKETS_PER_GROUP: u64 = 4;

/// The low `shift` bits.
#[inline(always)]
fn low_mask(shift: u32) -> u64 {
    (1u64 << shift) - 1
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every offset is found at its rank, and offsets between, before or past them are
    /// not.
    fn check(offsets: &[u64]) {
        let index = GroupIndex::new(offsets);
        for (rank, &o) in offsets.iter().enumerate() {
            assert_eq!(index.group_at(o), Some(rank as u32), "offset {o}");
            for probe in [o.wrapping_add(1), o.wrapping_sub(1), o ^ (1 << 40)] {
                if offsets.binary_search(&probe).is_err() {
                    assert_eq!(index.group_at(probe), None, "probe {probe}");
                }
            }
        }
        assert_eq!(index.group_at(u64::MAX), None);
    }

    #[test]
    fn small_and_edge_cases() {
        check(&[]);
        check(&[0]);
        check(&[0, 64, 128, 160]);
        check(&[5 << 32, (5 << 32) + 16, 7 << 32]);
        check(&[0, MAX_SLAB_HEIGHT - 2, MAX_SLAB_HEIGHT - 1]);
        // Clustered: a thousand groups in one bucket's worth of bytes, one far away.
        let mut clustered: Vec<u64> = (0..1000).map(|i| i * 16).collect();
        clustered.push(1 << 30);
        check(&clustered);
    }

    #[test]
    fn the_directory_is_linear_in_the_groups_and_dense_buckets_are_small() {
        // A few groups over a large slab: a few buckets.
        let sparse = GroupIndex::new(&[0, 1 << 30, 30 << 30]);
        assert!(sparse.bytes() <= 4 * (3 + 3 * BUCKETS_PER_GROUP as usize + 1));
        // Dense small slots below one large one far away, as in an engine's plan: the
        // buckets over the dense part hold a few groups, not the average gap's worth.
        let mut dense: Vec<u64> = (0..40_000).map(|i| i * 16).collect();
        dense.push(6 << 20);
        let index = GroupIndex::new(&dense);
        assert!(index.bytes() <= 4 * (BUCKETS_PER_GROUP as usize + 1) * dense.len() + 8);
        assert!(index.largest_bucket() <= 4, "{}", index.largest_bucket());
    }

    proptest! {
        #[test]
        fn finds_exactly_the_group_offsets(
            mut offsets in prop::collection::vec(
                prop_oneof![0u64..4096, 0u64..(1 << 24), 0..MAX_SLAB_HEIGHT], 0..300),
        ) {
            offsets.sort_unstable();
            offsets.dedup();
            check(&offsets);
        }
    }
}
