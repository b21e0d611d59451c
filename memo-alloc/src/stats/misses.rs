//! [`Misses`]: the allocations of replayed passes served by the backend, counted by why.

use serde::{Deserialize, Serialize};

use crate::stats::reasons::{MissReason, MISS_REASONS};

/// Allocations of replayed passes served by the backend, a count per [`MissReason`] (a
/// field each, named as the reason; it serialises as an object of those fields).
///
/// ```
/// let s = memo_alloc::stats();
/// let m = s.misses_by_reason;
/// assert_eq!(m.total(), m.iter().map(|(_, n)| n).sum::<u64>());
/// assert_eq!(m.get(memo_alloc::MissReason::TooLarge), m.too_large);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Misses {
    /// [`MissReason::Unplanned`].
    pub unplanned: u64,
    /// [`MissReason::Escaping`].
    pub escaping: u64,
    /// [`MissReason::TooLarge`].
    pub too_large: u64,
    /// [`MissReason::Alignment`].
    pub alignment: u64,
    /// [`MissReason::Overlap`].
    pub overlap: u64,
    /// [`MissReason::ReallocGrow`].
    pub realloc_grow: u64,
    /// [`MissReason::NoSlab`].
    pub no_slab: u64,
}

impl Misses {
    /// The count of `reason`.
    pub fn get(&self, reason: MissReason) -> u64 {
        match reason {
            MissReason::Unplanned => self.unplanned,
            MissReason::Escaping => self.escaping,
            MissReason::TooLarge => self.too_large,
            MissReason::Alignment => self.alignment,
            MissReason::Overlap => self.overlap,
            MissReason::ReallocGrow => self.realloc_grow,
            MissReason::NoSlab => self.no_slab,
        }
    }

    /// Every reason with its count, in the order of [`MissReason::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (MissReason, u64)> + '_ {
        MissReason::ALL.into_iter().map(|r| (r, self.get(r)))
    }

    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, n)| n).sum()
    }

    /// From counts indexed like [`MissReason`] (`reason as usize`).
    pub(crate) fn from_counts(c: [u64; MISS_REASONS]) -> Misses {
        let at = |r: MissReason| c[r as usize];
        Misses {
            unplanned: at(MissReason::Unplanned),
            escaping: at(MissReason::Escaping),
            too_large: at(MissReason::TooLarge),
            alignment: at(MissReason::Alignment),
            overlap: at(MissReason::Overlap),
            realloc_grow: at(MissReason::ReallocGrow),
            no_slab: at(MissReason::NoSlab),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Each reason's count lands in the field of its name, and serialises so.
    #[test]
    fn each_reason_has_its_field() {
        let counts = std::array::from_fn(|i| 10 * i as u64 + 1);
        let m = Misses::from_counts(counts);
        for r in MissReason::ALL {
            assert_eq!(m.get(r), counts[r as usize], "{r}");
        }
        assert_eq!(m.total(), counts.iter().sum::<u64>());
        let json = serde_json::to_value(m).unwrap();
        for r in MissReason::ALL {
            assert_eq!(json[r.name()], counts[r as usize], "{r}");
        }
        assert_eq!(serde_json::from_value::<Misses>(json).unwrap(), m);
    }
}
