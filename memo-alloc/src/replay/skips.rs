//! Skips a plan's replayed passes learned: where a pass that lost its place in a run of
//! planned slots it did not allocate (a process's first pass, planned, with one-time
//! state that later passes do not build) found it again. The next pass that stands at
//! the run's first slot with a request that does not match it jumps to the place at
//! once, instead of paying the misses that finding it again costs (two anchors of rule 7
//! in `matching.rs`: a few requests a pass, served by the backend).
//!
//! A skip is a hint, shared by the plan's instances: written on the cold path, read only
//! after the faster rules failed, and taken only by a request that matches the slot it
//! names (a wrong one is taken back as any jump is, by rule 2). Nothing depends on its
//! being there or current: a race loses a skip, never a slot.

use crate::support::sync::plain::AtomicU64;
use crate::support::sync::Ordering;

/// Skips a plan remembers (a full table overwrites by the skip's first slot).
const SKIPS: usize = 16;

/// The skips of one compiled plan: `(from, to)` slot pairs, packed `(from + 1) << 32 | to`
/// (0: empty; no pair packs to 0, and slot indices are below `u32::MAX`).
#[derive(Debug)]
pub(crate) struct Skips {
    entries: [AtomicU64; SKIPS],
}

impl Default for Skips {
    fn default() -> Skips {
        Skips {
            entries: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The high half of the entries of skips from slot `from`.
fn key(from: u32) -> u64 {
    debug_assert!(from < u32::MAX);
    (u64::from(from) + 1) << 32
}

/// Whether entry value `v` holds the skip from slot `from` (learned or forgotten).
fn holds(v: u64, from: u32) -> bool {
    v >> 32 << 32 == key(from)
}

impl Skips {
    /// The entries a skip from slot `from` may be in, in probing order, with their values.
    fn probe(&self, from: u32) -> impl Iterator<Item = (&AtomicU64, u64)> {
        let first = from as usize % SKIPS;
        (0..SKIPS).map(move |d| {
            let e = &self.entries[(first + d) % SKIPS];
            (e, e.load(Ordering::Relaxed))
        })
    }

    /// The entry holding the skip from slot `from` (learned or forgotten), and its value.
    fn entry_of(&self, from: u32) -> Option<(&AtomicU64, u64)> {
        self.probe(from)
            .take_while(|&(_, v)| v != 0)
            .find(|&(_, v)| holds(v, from))
    }

    /// Remembers that a pass standing at slot `from` continued at slot `to` (past it).
    pub(crate) fn learn(&self, from: u32, to: u32) {
        debug_assert!(to > from);
        // The entry of `from` if there is one, else the first empty one, else the one
        // `from` hashes to.
        let at = self
            .probe(from)
            .find(|&(_, v)| v == 0 || holds(v, from))
            .map_or(&self.entries[from as usize % SKIPS], |(e, _)| e);
        at.store(key(from) | u64::from(to), Ordering::Relaxed);
    }

    /// Forgets the skip from slot `from`, if any (a jump it made was taken back). Its
    /// entry stays, as `from -> from`, which is no skip: lookups probe past it.
    pub(crate) fn unlearn(&self, from: u32) {
        if let Some((e, _)) = self.entry_of(from) {
            e.store(key(from) | u64::from(from), Ordering::Relaxed);
        }
    }

    /// Forgets every skip.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn forget(&self) {
        for e in &self.entries {
            e.store(0, Ordering::Relaxed);
        }
    }

    /// Where a pass standing at slot `from` continued last, if a pass learned it.
    pub(crate) fn from(&self, from: u32) -> Option<u32> {
        let (_, v) = self.entry_of(from)?;
        Some(v as u32).filter(|&to| to > from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_skips_are_found_by_their_first_slot() {
        let s = Skips::default();
        assert_eq!(s.from(29), None);
        s.learn(29, 109);
        s.learn(0, 40);
        assert_eq!(s.from(29), Some(109));
        assert_eq!(s.from(0), Some(40));
        s.learn(29, 110);
        assert_eq!(s.from(29), Some(110), "relearned, not added");
        // Colliding first slots probe on; a full table overwrites.
        for k in 1..40u32 {
            s.learn(k * SKIPS as u32, k * SKIPS as u32 + 1);
        }
        assert_eq!(s.from(39 * SKIPS as u32), Some(39 * SKIPS as u32 + 1));
        assert!(s.entries.iter().all(|e| e.load(Ordering::Relaxed) != 0));
    }

    #[test]
    fn an_unlearned_skip_is_no_skip_and_others_are_still_found() {
        let s = Skips::default();
        s.learn(3, 10);
        s.learn(3 + SKIPS as u32, 30); // probes past 3's entry
        s.unlearn(3);
        assert_eq!(s.from(3), None);
        assert_eq!(s.from(3 + SKIPS as u32), Some(30));
        s.learn(3, 12);
        assert_eq!(s.from(3), Some(12), "learned again in its old entry");
        // Slot 0's forgotten skip is no empty entry either.
        s.learn(0, 5);
        s.learn(SKIPS as u32, 40);
        s.unlearn(0);
        assert_eq!((s.from(0), s.from(SKIPS as u32)), (None, Some(40)));
    }
}
