//! Rule 7 of the matching (see `matching.rs`): a pass that lost its place in a node's
//! sequence finds it again by where its last misses match.

use crate::replay::slab::compile::{CompiledPlan, Slot};
use crate::replay::state::{
    At, Cursor, Lost, RunStart, AGREE, ANCHOR, BEHIND, LONG_WINDOW, NO_SLOT, RECHECKS, RUN_GAP,
    WINDOW,
};

/// Rule 7: notes an unmatched request of `node` in `lost` and, when the run of misses
/// reaches its next search, returns the slot of the nearest place, in the next
/// [`LONG_WINDOW`] slots or the [`BEHIND`] before the cursor, where this request and the
/// run's last misses match, each at its distance in requests from this one, once two
/// searches agree on it.
pub(super) fn anchored(
    slots: &[Slot],
    cursor: &Cursor,
    size: u64,
    lost: &mut Lost,
    at: At,
) -> Option<u32> {
    note_miss(cursor, size, lost, at);
    // An anchor of one size says nothing of where it is (a run of equal sizes matches
    // at every place of the run): it waits for a size that differs, without a search.
    let searched = lost.run >= lost.search_at && lost.missed.iter().any(|&(s, _)| s != size);
    let found = searched
        .then(|| search(slots, cursor, size, lost, at))
        .flatten();
    if found.is_some() {
        lost.run = 0;
    } else {
        lost.missed.rotate_left(1);
        lost.missed[ANCHOR - 2] = (size, at.request);
    }
    found
}

/// Counts the miss in the run of `lost`, which starts afresh at a miss of another node,
/// or after more than [`RUN_GAP`] hits.
fn note_miss(cursor: &Cursor, size: u64, lost: &mut Lost, at: At) {
    if lost.run == 0 || lost.node != at.node || at.hits > lost.hits + RUN_GAP {
        *lost = Lost {
            node: at.node,
            search_at: ANCHOR as u32,
            start: RunStart {
                slot: cursor.next,
                request: at.request,
                size,
                candidate: NO_SLOT,
            },
            ..Lost::default()
        };
    }
    lost.run += 1;
    lost.hits = at.hits;
}

/// The slots a search looks at, `from..end` of the node's, and the anchor it matches:
/// the run's last misses (size, request index) and this request's index.
struct Window<'a> {
    slots: &'a [Slot],
    from: u32,
    end: u32,
    missed: [(u64, u64); ANCHOR - 1],
    request: u64,
}

impl Window<'_> {
    /// Slot `i`, if the search looks at it.
    fn slot(&self, i: u64) -> Option<&Slot> {
        let i = u32::try_from(i).ok()?;
        self.slots
            .get(i as usize)
            .filter(|_| i >= self.from && i < self.end)
    }

    /// Whether this request (of `size` bytes) would take place `p`: it matches slot `p`,
    /// and each of the run's last misses the slot at its distance in requests before.
    fn fits(&self, p: u32, size: u64) -> bool {
        let matches = |i: u64, size: u64| self.slot(i).is_some_and(|s| s.matches(size));
        matches(p.into(), size)
            && self.missed.iter().all(|&(s, r)| {
                let back = self.request - r;
                u64::from(p)
                    .checked_sub(back)
                    .is_some_and(|i| matches(i, s))
            })
    }
}

/// A search of rule 7: the nearest place this request and the run's last misses match,
/// taken if the search before agrees (see [`agreed`]); otherwise the next search is
/// scheduled.
fn search(slots: &[Slot], cursor: &Cursor, size: u64, lost: &mut Lost, at: At) -> Option<u32> {
    let next = cursor.next;
    let window = Window {
        slots,
        from: cursor.start.max(next.saturating_sub(BEHIND)),
        end: cursor.end.min(next.saturating_add(LONG_WINDOW)),
        missed: lost.missed,
        request: at.request,
    };
    let (from, end) = (window.from, window.end);
    // Nearest first: at each distance, ahead of the cursor, then behind it.
    let mut places = (0..(end - next).max(next - from)).flat_map(|d| {
        let ahead = Some(next + d).filter(|&p| p < end);
        let behind = (next - from > d).then(|| next - 1 - d);
        [ahead, behind].into_iter().flatten()
    });
    let found = places
        .find(|&p| window.fits(p, size))
        .and_then(|p| agreed(&window, p, size, lost));
    if found.is_none() && lost.search_at <= lost.run {
        lost.search_at = lost.search_at.saturating_mul(2);
    }
    found
}

/// The place to take when this search found `p`, if the search before agrees.
///
/// In a sequence that repeats block after block, an anchor holding a request the plan has
/// elsewhere (an insertion) can match a place blocks ahead only: the place is taken once
/// the next anchor, of later requests, agrees (within [`AGREE`]). In a stretch that
/// repeats with a short period, the nearest place of an anchor can be a period short of
/// the place the anchor before found (when the cursor stands before both): this anchor
/// matching there too, the two agree. Only a place near the nearest one is taken so: a far
/// one may come from an insertion, as above.
fn agreed(window: &Window<'_>, p: u32, size: u64, lost: &mut Lost) -> Option<u32> {
    let place = i64::from(p) - window.request as i64;
    let before = lost.found.replace(place);
    let at_before = before
        .filter(|&was| (place - was).abs() <= i64::from(WINDOW))
        .and_then(|was| u32::try_from(was + window.request as i64).ok())
        .filter(|&q| window.fits(q, size));
    if at_before.is_some() {
        return at_before; // the run ends here: `lost` starts afresh at its next miss
    }
    if before.is_none_or(|was| (place - was).abs() > AGREE) {
        // A first place, or one the place before disagreed with: the next anchor confirms
        // it or not, soon (a few times in a run: doubling the wait at once lets a stretch
        // of short period pass by unmatched).
        if lost.rechecks < RECHECKS {
            lost.rechecks += 1;
            lost.search_at = lost.run + ANCHOR as u32;
        }
        return None;
    }
    Some(p)
}

/// Rule 7 took slot `taken` for the request `at`: when the run's first miss, in step with
/// it, stood for a slot past the one the cursor stood at then, and matches it, the plan
/// learns the skip.
pub(super) fn learn_from_place(plan: &CompiledPlan, lost: &Lost, taken: u32, at: At) {
    let RunStart {
        slot: from,
        request: first,
        size,
        ..
    } = lost.start;
    // Request indices grow within a context, which the run belongs to.
    debug_assert!(first <= at.request);
    let back = at.request.checked_sub(first);
    let to = back.and_then(|back| taken.checked_sub(u32::try_from(back).ok()?));
    let matched = |&to: &u32| plan.slots.get(to as usize).is_some_and(|s| s.matches(size));
    if let Some(to) = to.filter(|&to| to > from.saturating_add(1)).filter(matched) {
        plan.skips.learn(from, to);
    }
}
