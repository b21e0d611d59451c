//! The lane requests of a profiled pass, counted instead of recorded (see `recorder.rs`).
//!
//! A request small enough for the plan's lanes needs no record: planning wants only, per
//! size class, the most such requests live at once and those live at the end, and, per
//! scope, which of them escaped the pass (escaping allocations are served by the backend,
//! so replay sends those requests there; see `replay::hit::lane_alloc`). A lane request
//! is named by its scope and its *lane ordinal*, its index among the scope's lane
//! requests, which replay counts the same way.
//!
//! The recorder's live table maps a live lane request's address to [`LANE_MARK`] plus its
//! entry here; an entry lives until the request's chain is freed. Only live requests have
//! entries (a pass of hundreds of thousands of lane requests holds a few thousand at
//! once).
//!
//! A chain grows in its cell while it fits; a realloc past the cell moves it, in replay, to
//! a cell of the larger class (or, past the lanes, to the backend: it leaves them), so the
//! count moves it too: the chain is live in one class at a time.

use std::collections::TryReserveError;

use crate::format::trace::LaneEscape;
use crate::memory::lane_classes::{self, CLASSES};
use crate::stats::AbandonReason;
use crate::support::fallible::try_grow;

/// Live-table values at or above this are lane entries (`LANE_MARK + entry`); record ids
/// stay below it.
pub(crate) const LANE_MARK: u32 = 1 << 31;

/// [`Entry::class`] of a chain that grew past the lanes (replay moved it to the backend).
const LEFT: u8 = u8::MAX;

/// A lane request the recorder has seen allocated and not yet freed.
#[derive(Clone, Copy, Debug)]
struct Entry {
    scope: u32,
    ordinal: u32,
    /// The request's class (what replay finds at its count).
    first: u8,
    /// The class of the chain's cell now ([`LEFT`]: it grew past the lanes).
    class: u8,
    /// Still live: its chain was not freed (an entry whose address was handed out again
    /// before its free was seen stays live: its lifetime is unknown, so it escapes).
    live: bool,
}

/// The recorder's count of a pass's lane requests.
#[derive(Debug)]
pub(crate) struct LaneCount {
    /// Requests of at most this many bytes (size and alignment) are counted (0: none).
    max: u64,
    requests: u64,
    reallocs: u64,
    live: [u32; CLASSES],
    most: [u32; CLASSES],
    /// Per scope of the recorder: its lane requests so far.
    ordinals: Vec<u32>,
    entries: Vec<Entry>,
    /// Entries freed, for reuse.
    vacant: Vec<u32>,
}

/// What a profile keeps of its counted lane requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CountedLanes {
    /// Lane requests, and the reallocs of their chains.
    pub(crate) requests: u64,
    pub(crate) reallocs: u64,
    /// Per class: the most live at once plus those live at the end, summed over the
    /// contexts adopted.
    pub(crate) cells: Vec<u32>,
    /// Per scope: its lane requests (empty when none were counted).
    pub(crate) per_scope: Vec<u32>,
    /// The requests that escaped the pass, by scope and lane ordinal, in that order.
    pub(crate) escapes: Vec<LaneEscape>,
}

impl LaneCount {
    /// A count of requests of at most `max` bytes (0: none) for a pass whose root scope
    /// is its only one so far.
    pub(crate) fn new(max: u64) -> Option<LaneCount> {
        let mut ordinals = Vec::new();
        ordinals.try_reserve(16).ok()?;
        ordinals.push(0);
        Some(LaneCount {
            max,
            requests: 0,
            reallocs: 0,
            live: [0; CLASSES],
            most: [0; CLASSES],
            ordinals,
            entries: Vec::new(),
            vacant: Vec::new(),
        })
    }

    /// The class of a request of `size` bytes aligned to `align`, if it is counted.
    pub(crate) fn class_of(&self, size: u64, align: u64) -> Option<usize> {
        lane_classes::class_of(size, align, self.max)
    }

    /// Adds the recorder's next scope.
    pub(crate) fn add_scope(&mut self) -> Result<(), AbandonReason> {
        try_grow(&mut self.ordinals).map_err(|_| AbandonReason::OutOfMemory)?;
        self.ordinals.push(0);
        Ok(())
    }

    /// Counts a lane request of class `class` in `scope`; the live-table value for it.
    pub(crate) fn alloc(&mut self, scope: u32, class: usize) -> Result<u32, AbandonReason> {
        debug_assert!(class < CLASSES);
        let ordinal = match self.ordinals.get_mut(scope as usize) {
            Some(n) => {
                *n += 1;
                *n - 1
            }
            None => u32::MAX, // an unknown scope: no node counts it in replay
        };
        let entry = Entry {
            scope,
            ordinal,
            first: class as u8,
            class: class as u8,
            live: true,
        };
        let index = match self.vacant.pop() {
            Some(i) => {
                self.entries[i as usize] = entry;
                i
            }
            None => {
                try_grow(&mut self.entries).map_err(|_| AbandonReason::OutOfMemory)?;
                self.entries.push(entry);
                self.entries.len() as u32 - 1
            }
        };
        self.requests += 1;
        self.live[class] += 1;
        self.most[class] = self.most[class].max(self.live[class]);
        Ok(LANE_MARK + index)
    }

    /// The chain of live-table value `mark` went on with a realloc to `size` bytes aligned
    /// to `align`: past its cell, it moves to the class of that size (or leaves the lanes).
    pub(crate) fn realloc(&mut self, mark: u32, size: u64, align: u64) {
        self.reallocs += 1;
        let Some(e) = self.entries.get_mut((mark - LANE_MARK) as usize) else {
            debug_assert!(false, "a lane mark without its entry");
            return;
        };
        if e.class == LEFT || size <= lane_classes::cell_size(e.class as usize) {
            return; // on the backend already, or in place
        }
        let k = e.class as usize;
        self.live[k] = self.live[k].saturating_sub(1);
        match lane_classes::class_of(size, align, self.max) {
            Some(k) => {
                e.class = k as u8;
                self.live[k] += 1;
                self.most[k] = self.most[k].max(self.live[k]);
            }
            None => e.class = LEFT,
        }
    }

    /// The chain of live-table value `mark` was freed.
    pub(crate) fn free(&mut self, mark: u32) -> Result<(), AbandonReason> {
        let index = mark - LANE_MARK;
        let Some(e) = self.entries.get_mut(index as usize) else {
            debug_assert!(false, "a lane mark without its entry");
            return Ok(());
        };
        debug_assert!(e.live, "a lane entry freed twice");
        e.live = false;
        if e.class != LEFT {
            let k = e.class as usize;
            self.live[k] = self.live[k].saturating_sub(1);
        }
        try_grow(&mut self.vacant).map_err(|_| AbandonReason::OutOfMemory)?;
        self.vacant.push(index);
        Ok(())
    }

    /// The counts at the pass's end: what still is live escaped.
    pub(crate) fn finish(&mut self) -> Result<CountedLanes, TryReserveError> {
        let classes = lane_classes::classes_below(self.max);
        let mut cells = Vec::new();
        cells.try_reserve_exact(classes)?;
        cells.extend((0..classes).map(|k| self.most[k].saturating_add(self.live[k])));
        let mut escapes = Vec::new();
        let live = self
            .entries
            .iter()
            .filter(|e| e.live && e.ordinal != u32::MAX);
        escapes.try_reserve_exact(live.clone().count())?;
        escapes.extend(live.map(|e| LaneEscape {
            scope: e.scope,
            ordinal: e.ordinal,
            cell: lane_classes::cell_size(e.first as usize),
        }));
        escapes.sort_unstable_by_key(|e| (e.scope, e.ordinal));
        let counted = self.max > 0;
        Ok(CountedLanes {
            requests: self.requests,
            reallocs: self.reallocs,
            cells,
            per_scope: if counted {
                std::mem::take(&mut self.ordinals)
            } else {
                Vec::new()
            },
            escapes,
        })
    }
}

impl CountedLanes {
    /// Adds the counts of a helper context's profile whose scope `s` became this
    /// profile's `scope_of[s]`; `root` (its scope 0's) may have lane requests already
    /// (a helper entered again goes on counting).
    pub(crate) fn adopt(
        &mut self,
        part: CountedLanes,
        scope_of: &[u32],
        root: u32,
    ) -> Result<(), TryReserveError> {
        self.requests += part.requests;
        self.reallocs += part.reallocs;
        add_cells(&mut self.cells, &part.cells)?;
        let Some(&top) = scope_of.iter().max() else {
            return Ok(());
        };
        if part.per_scope.is_empty() {
            return Ok(());
        }
        if self.per_scope.len() <= top as usize {
            self.per_scope
                .try_reserve(top as usize + 1 - self.per_scope.len())?;
            self.per_scope.resize(top as usize + 1, 0);
        }
        let before = self.per_scope.get(root as usize).copied().unwrap_or(0);
        self.escapes.try_reserve(part.escapes.len())?;
        for e in &part.escapes {
            let Some(&scope) = scope_of.get(e.scope as usize) else {
                continue;
            };
            let shift = if scope == root { before } else { 0 };
            self.escapes.push(LaneEscape {
                scope,
                ordinal: e.ordinal + shift,
                ..*e
            });
        }
        self.escapes.sort_unstable_by_key(|e| (e.scope, e.ordinal));
        for (s, &n) in scope_of.iter().zip(&part.per_scope) {
            self.per_scope[*s as usize] += n;
        }
        Ok(())
    }
}

/// Adds `more` to `cells`, class by class (a helper entered twice is counted twice: a
/// cell too many is memory, a cell too few a miss).
fn add_cells(cells: &mut Vec<u32>, more: &[u32]) -> Result<(), TryReserveError> {
    if cells.len() < more.len() {
        cells.try_reserve(more.len() - cells.len())?;
        cells.resize(more.len(), 0);
    }
    for (c, &m) in cells.iter_mut().zip(more) {
        *c = c.saturating_add(m);
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn escape(scope: u32, ordinal: u32, cell: u64) -> LaneEscape {
        LaneEscape {
            scope,
            ordinal,
            cell,
        }
    }

    /// Ordinals count each scope's lane requests; what is live at the end escapes, named
    /// by its request's class; a chain that outgrows its cell moves to the larger class;
    /// a freed entry is reused without disturbing the others.
    #[test]
    fn escapes_are_named_by_scope_and_count() {
        let mut c = LaneCount::new(64).unwrap();
        c.add_scope().unwrap(); // scope 1
        let a = c.alloc(0, 0).unwrap(); // scope 0, #0
        let b = c.alloc(1, 2).unwrap(); // scope 1, #0
        c.free(a).unwrap();
        let d = c.alloc(0, 1).unwrap(); // scope 0, #1: takes `a`'s entry
        assert_eq!(d, a, "a freed entry is reused");
        c.realloc(d, 30, 8); // in its 32-byte cell
        c.realloc(d, 60, 8); // moves to a 64-byte cell, beside `b`
        let e = c.alloc(0, 0).unwrap(); // scope 0, #2
        c.free(e).unwrap();
        c.alloc(7, 0).unwrap(); // a scope the recorder does not have: never listed
        let _ = b;
        let counted = c.finish().unwrap();
        assert_eq!(counted.escapes, [escape(0, 1, 32), escape(1, 0, 64)]);
        assert_eq!(counted.per_scope, [3, 1]);
        assert_eq!((counted.requests, counted.reallocs), (5, 2));
        // Per class, the most live at once plus those live at the end.
        assert_eq!(counted.cells, [1 + 1, 1, 2 + 2]);
    }

    /// A chain that outgrows the lanes leaves them: its cell is free, and it is no
    /// longer counted live, though it still escapes as the request it was.
    #[test]
    fn a_chain_past_the_lanes_leaves_them() {
        let mut c = LaneCount::new(64).unwrap();
        let a = c.alloc(0, 0).unwrap();
        c.realloc(a, 100, 8);
        let b = c.alloc(0, 0).unwrap();
        c.free(b).unwrap();
        let counted = c.finish().unwrap();
        assert_eq!(counted.cells, [1, 0, 0], "one 16-byte cell live at once");
        assert_eq!(counted.escapes, [escape(0, 0, 16)]);
    }

    /// A helper's counts join the pass's: its scopes renumbered, its root's ordinals
    /// after those of the helper's earlier recordings.
    #[test]
    fn a_helper_goes_on_counting() {
        let mut pass = CountedLanes {
            requests: 5,
            cells: vec![1],
            per_scope: vec![2, 0, 3], // scope 2: the helper's root, entered before
            escapes: vec![escape(0, 1, 16), escape(2, 2, 16)],
            ..CountedLanes::default()
        };
        let part = CountedLanes {
            requests: 4,
            reallocs: 1,
            cells: vec![1, 2],
            per_scope: vec![3, 1],
            escapes: vec![escape(0, 0, 16), escape(1, 0, 32)],
        };
        pass.adopt(part, &[2, 4], 2).unwrap();
        assert_eq!(pass.per_scope, [2, 0, 6, 0, 1]);
        assert_eq!(
            pass.escapes,
            [
                escape(0, 1, 16),
                escape(2, 2, 16),
                escape(2, 3, 16),
                escape(4, 0, 32)
            ]
        );
        assert_eq!(
            (pass.requests, pass.reallocs, pass.cells),
            (9, 1, vec![2, 2])
        );
    }
}
