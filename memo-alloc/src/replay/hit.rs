//! The replay allocation path: matching a request to its slot, the safety check and
//! hand-out, and frees of slab pointers. No lock, no system call, no allocation.
//!
//! # Matching
//! A request is matched to a slot of its scope node's planned sequence, as a diff aligns
//! two sequences, so that an inserted, missing or resized allocation costs that
//! allocation, not the ones after it. A slot *matches* a request whose size lies in the
//! slot's seen range (`min_size..=size`, widened as profiles merge). With the node's
//! cursor at slot `next`:
//! 1. `next` matches: take it (the hit path; everything else is cold);
//! 2. the last request of the node jumped (rules 3 and 4 below: it took a slot past the
//!    cursor, which passed the slots between) and this one does not follow the jump, but
//!    matches one of the first two slots passed: the jump was wrong (the last request
//!    was inserted before a slot of its size, or two requests of common sizes matched a
//!    place ahead by chance): go back and take it. Left alone, a wrong jump cascades:
//!    every displaced request jumps again, and the cursor runs ahead of the program,
//!    whose requests then miss until they catch up with it. A skip (below) the jump
//!    learned or took is forgotten;
//! 3. `next + 1` matches: `next` is missing (or this request replaced it): take `next + 1`;
//! 4. an earlier unmatched request named a candidate `c` ahead and this one matches `c + 1`:
//!    the two agree that the slots before `c` are missing: jump and take `c + 1` (the
//!    earlier request is placed; unless the pass was lost, rule 7's run of misses ends,
//!    and when that run began at `next`, the plan learns the skip from `next` to the
//!    candidate its first miss named); or a skip a pass before learned from `next` names
//!    a slot this request matches: jump and take it;
//! 5. the pass is *shrinking* and the request fits `next`, at least an eighth of its
//!    smallest seen size (a smaller shape of the bucket): take `next`. With lanes, a slot
//!    whose request shrank to a lane's size is not in the pass's sequence: a request that
//!    does not fit `next` takes the first slot it fits within [`WINDOW`] when every slot
//!    before it, shrunk as much as the request is from that slot, would be a lane
//!    request. A pass starts shrinking when
//!    a request fitting at half size or more only (a *probe*, served by the backend) is
//!    followed, with no hit in between, by another that fits so (in any node; in the
//!    probe's node, the slot after the probe's): isolated insertions between hits never
//!    confirm each other;
//! 6. otherwise look for a matching slot in the next [`WINDOW`] slots, past the
//!    candidate the request before named, if any (in a run of equal sizes, candidates
//!    walk the run until one is confirmed): it becomes the candidate of rule 4; the
//!    request is served by the backend and the cursor stays;
//! 7. a pass that missed [`ANCHOR`] requests of a node in a row (no hit in between) has
//!    lost its place, as after a run of more than [`WINDOW`] missing slots (a process's
//!    first pass, planned, made one-time allocations later passes do not), or after a
//!    wrong jump that rule 2 could not take back (the cursor then runs ahead of the
//!    program): it looks for the nearest place, in the next [`LONG_WINDOW`] slots or the
//!    [`BEHIND`] slots before the cursor, where [`ANCHOR`] slots in a row match those
//!    requests. It jumps there (this request takes the last of them) when the run's
//!    search before found the same place (the same slot less request index, within
//!    [`AGREE`]: an insertion between the two anchors moves it by one): in a sequence
//!    that repeats block after block, an anchor holding one inserted request can match
//!    only a place blocks ahead, and a later anchor does not agree. A later anchor also
//!    agrees when it matches at the place before and that place is within [`WINDOW`] of
//!    its nearest: in a stretch that repeats with a short period, the nearest place can
//!    be a period short of the right one. A place found and not taken is checked by the
//!    search [`ANCHOR`] misses later (a few times in a run); a search that finds nothing,
//!    or a place after those, waits for a run twice as long before the next, so a pass
//!    that matches nothing at all pays a logarithmic number of searches. An anchor of one
//!    size (which matches anywhere in a run of it) waits for another size without a
//!    search. A place taken past the slot the cursor stood at when the run began is
//!    learned as a skip from that slot to the run's first request's, if that matches it.
//!
//! Skips (`skips.rs`) are what a pass found out about the plan for the passes after it: a
//! plan of a process's first forward holds one-time slots that every later pass passes
//! over, and each would pay rule 7's search again (7 requests of candle's BERT-mini,
//! 800 KB a pass to the backend) or rule 4's miss. They are hints, shared by the plan's
//! instances and taken only by a request that matches the slot they name. A skip belongs
//! to the first request that misses at its slot, the one a later pass brings there first
//! (learned for a later one, in a run of equal sizes it puts each request of the run a
//! slot on, and a buffer living the whole pass on a slot planned to live briefly).
//!
//! A taken slot is then checked (escaping, alignment, overlap); failing a check misses
//! with that reason, the slot used up. A request matching nothing moves nothing. Going
//! back (rule 2) walks the slots a wrong jump passed, up to the one the jump took: taken
//! again in the pass, its overlap check fails while the jump's request lives, and it is
//! a hit once that request was freed (the check, not the matching, keeps live
//! allocations apart).
//!
//! A request small enough for the plan's lanes takes a free cell of its size class
//! instead (see `lanes.rs`): it is matched to nothing and moves no cursor, and its hits
//! are not in the clock the rules above count hits by. Its node counts it, though: the
//! profile listed the lane requests that escaped it by node and count (see
//! `lane_count.rs`), and those go to the backend, as every escaping allocation does.

use std::alloc::Layout;

use crate::memory::lane_classes;
use crate::pass::context::Context;
use crate::replay::slab::compile::{CompiledPlan, Slot, PLANNED};
use crate::replay::slab::pool::{Instance, BLOCK_SHIFT, EMPTY};
use crate::replay::state::{
    At, Cursor, Lost, RunStart, Shrink, AGREE, ANCHOR, BACK, BEHIND, LONG_WINDOW, NO_SLOT,
    RECHECKS, RUN_GAP, SHRINK, SHRINK_CONFIRMED, WINDOW,
};
use crate::stats::MissReason;
use crate::support::sync::{AtomicU32, Ordering};

/// Whether `slot` matches a request of `size` bytes.
#[inline(always)]
fn matches(slot: &Slot, size: u64) -> bool {
    size <= slot.size && size >= slot.min_size()
}

/// Whether a request of `size` bytes fits `slot` as a shape up to `k` times smaller than
/// the smallest seen for it (rule 5).
fn fits_shrunk(slot: &Slot, size: u64, k: u64) -> bool {
    size <= slot.size && size.saturating_mul(k) >= slot.min_size()
}

/// The slot a request of `size` bytes takes from `cursor`, which advances past it; or why
/// none (the cursor then moves only to remember a candidate). `slots` is the plan's slot
/// table, of which the cursor's range is a part. The hit path (rule 1) is inlined in
/// [`alloc`]; this is the general case.
#[cold]
#[inline(never)]
fn take(
    plan: &CompiledPlan,
    cursor: &mut Cursor,
    size: u64,
    (shrink, lost): (&mut Shrink, &mut Lost),
    at: At,
) -> Result<u32, MissReason> {
    let (node, hits) = (at.node, at.hits);
    let slots = &plan.slots[..];
    let slot = |i: u32| slots.get(i as usize).filter(|_| i < cursor.end);
    let fits_by = |k: u64| move |s: &Slot| fits_shrunk(s, size, k);
    let fits = fits_by(SHRINK);
    let next = cursor.next;
    let hit = |c: &mut Cursor, i: u32| {
        c.next = i + 1;
        c.pending = NO_SLOT;
        Ok(i)
    };
    // A hit past the cursor leaves the slot the cursor stood at to the next request.
    let jump = |c: &mut Cursor, i: u32| {
        debug_assert!(i > next);
        c.next = i + 1;
        c.pending = BACK | next;
        Ok(i)
    };
    let (pending, back) = match cursor.pending {
        NO_SLOT => (NO_SLOT, NO_SLOT),
        p if p & BACK != 0 => (NO_SLOT, p & !BACK),
        p => (p, NO_SLOT),
    };
    if slot(next).is_some_and(|s| matches(s, size)) {
        return hit(cursor, next);
    }
    if let Some(i) = back_after_jump(slots, cursor, size, back) {
        // The jump was wrong: a skip it learned or took misleads the passes after.
        plan.skips.unlearn(back);
        return hit(cursor, i);
    }
    if slot(next + 1).is_some_and(|s| matches(s, size)) {
        return jump(cursor, next + 1);
    }
    if pending != NO_SLOT && slot(pending + 1).is_some_and(|s| matches(s, size)) {
        learn_from_candidate(plan, lost, node, next, pending);
        placed(lost);
        return jump(cursor, pending + 1);
    }
    if let Some(to) = plan.skips.from(next) {
        if slot(to).is_some_and(|s| matches(s, size)) {
            placed(lost);
            return jump(cursor, to);
        }
    }
    match *shrink {
        Shrink::On => {
            if slot(next).is_some_and(fits_by(SHRINK_CONFIRMED)) {
                return hit(cursor, next);
            }
            if let Some(f) = past_lane_slots(slots, cursor, size, at.lane_max) {
                return jump(cursor, f);
            }
        }
        Shrink::Probe {
            node: n,
            slot: p,
            hits: h,
        } if h == hits => {
            // In the probe's node, the probe stood for `next`: this request is the next.
            let target = if n == node && p == next {
                next + 1
            } else {
                next
            };
            if slot(target).is_some_and(fits) {
                *shrink = Shrink::On;
                return hit(cursor, target);
            }
        }
        _ => {}
    }
    if *shrink != Shrink::On && slot(next).is_some_and(fits) {
        *shrink = Shrink::Probe {
            node,
            slot: next,
            hits,
        };
    }
    if let Some(i) = anchored(slots, cursor, size, lost, at) {
        learn_from_place(plan, lost, i, at);
        return hit(cursor, i);
    }
    // After an unconfirmed candidate, this request's slot (if the two are in order) is
    // past it: in a run of equal sizes, candidates walk the run until one is confirmed.
    let from = match pending {
        NO_SLOT => next + 2,
        c => c.saturating_add(2).max(next + 2),
    };
    let ahead = (from..cursor.end.min(next.saturating_add(WINDOW)))
        .find(|&i| slot(i).is_some_and(|s| matches(s, size)));
    cursor.pending = ahead.unwrap_or(NO_SLOT);
    if lost.run == 1 {
        lost.start.candidate = cursor.pending; // this miss began the run
    }
    Err(match slot(next) {
        Some(s) if size > s.size => MissReason::TooLarge,
        _ => MissReason::Unplanned,
    })
}

/// A jump placed the pass: unless it was lost (its run of misses searched already: there
/// a jump may be chance), the run's misses are behind the place, and an anchor holding
/// one would match nowhere (its distance in requests is not its distance in slots past
/// the jump): the run ends.
fn placed(lost: &mut Lost) {
    if lost.run < ANCHOR as u32 {
        lost.run = 0;
    }
}

/// Rule 4 confirmed candidate `pending` of `node`, whose cursor stands at `next`: when
/// the pass was not lost and its run of misses began at `next`, the skip goes from `next`
/// to the candidate the run's first miss named (the next pass's first request at `next`
/// takes it): `pending` itself when that miss named it, or one before it when a request
/// that later forwards make elsewhere stood between the two (candle's MobileNetV4: a
/// run of equal sizes whose first two requests missed at one slot). Learned for the
/// later miss, the skip took each request of the run a slot one place on.
fn learn_from_candidate(plan: &CompiledPlan, lost: &Lost, node: u32, next: u32, pending: u32) {
    let start = lost.start;
    let run = 1..ANCHOR as u32; // a run is going on, and has not searched yet
    let began_here = lost.node == node && start.slot == next && run.contains(&lost.run);
    let to = start.candidate;
    if began_here && to <= pending && to > next.saturating_add(1) {
        plan.skips.learn(next, to);
    }
}

/// Rule 7 took slot `taken` for the request `at`: when the run's first miss, in step with
/// it, stood for a slot past the one the cursor stood at then, and matches it, the plan
/// learns the skip.
fn learn_from_place(plan: &CompiledPlan, lost: &Lost, taken: u32, at: At) {
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
    let matched = |&to: &u32| {
        plan.slots
            .get(to as usize)
            .is_some_and(|s| matches(s, size))
    };
    if let Some(to) = to.filter(|&to| to > from.saturating_add(1)).filter(matched) {
        plan.skips.learn(from, to);
    }
}

/// Rule 2: after a jump from slot `back` ([`NO_SLOT`]: none), the first of the first two
/// slots passed that a request of `size` bytes matches.
fn back_after_jump(slots: &[Slot], cursor: &Cursor, size: u64, back: u32) -> Option<u32> {
    if back == NO_SLOT {
        return None;
    }
    // The slots passed are untaken; the jump took the one before `next`.
    debug_assert!(back < cursor.next);
    let passed = back..back.saturating_add(2).min(cursor.next.saturating_sub(1));
    passed
        .into_iter()
        .find(|&i| slots.get(i as usize).is_some_and(|s| matches(s, size)))
}

/// Rule 5 with lanes of at most `lane_max` bytes: in a shrinking pass, the first slot
/// after `next` within [`WINDOW`] that a request of `size` bytes fits, if every slot
/// before it, shrunk as much as the request is from it, would be a lane request (a slot
/// whose request shrank to a lane's size is not in the pass's sequence).
fn past_lane_slots(slots: &[Slot], cursor: &Cursor, size: u64, lane_max: u64) -> Option<u32> {
    if lane_max == 0 {
        return None;
    }
    let (next, end) = (
        cursor.next,
        cursor.end.min(cursor.next.saturating_add(WINDOW)),
    );
    let slot = |i: u32| slots.get(i as usize).filter(|_| i < end);
    let f = (next + 1..end)
        .find(|&i| slot(i).is_some_and(|s| fits_shrunk(s, size, SHRINK_CONFIRMED)))?;
    let fit_size = slot(f)?.size;
    // `min_size * (size / fit_size) <= lane_max`, in integers.
    let in_lanes = |i: u32| {
        slot(i)
            .is_some_and(|s| s.min_size().saturating_mul(size) <= lane_max.saturating_mul(fit_size))
    };
    (next..f).all(in_lanes).then_some(f)
}

/// Rule 7: notes an unmatched request of `node` in `lost` and, when the run of misses
/// reaches its next search, returns the slot of the nearest place, in the next
/// [`LONG_WINDOW`] slots or the [`BEHIND`] before the cursor, where this request and the
/// run's last misses match, each at its distance in requests from this one, once two
/// searches agree on it.
fn anchored(slots: &[Slot], cursor: &Cursor, size: u64, lost: &mut Lost, at: At) -> Option<u32> {
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
    let mut found = None;
    // An anchor of one size says nothing of where it is (a run of equal sizes matches
    // at every place of the run): it waits for a size that differs, without a search.
    if lost.run >= lost.search_at && lost.missed.iter().any(|&(s, _)| s != size) {
        let end = cursor.end.min(cursor.next.saturating_add(LONG_WINDOW));
        let from = cursor.start.max(cursor.next.saturating_sub(BEHIND));
        let slot = |i: u64| {
            let i = u32::try_from(i).ok()?;
            slots.get(i as usize).filter(|_| i >= from && i < end)
        };
        let anchor = |p: u32| {
            lost.missed.iter().all(|&(s, r)| {
                let back = at.request - r;
                (p as u64)
                    .checked_sub(back)
                    .and_then(slot)
                    .is_some_and(|slot| matches(slot, s))
            })
        };
        // Nearest first: at each distance, ahead of the cursor, then behind it.
        let next = cursor.next;
        let mut places = (0..(end - next).max(next - from)).flat_map(|d| {
            let ahead = Some(next + d).filter(|&p| p < end);
            let behind = (next - from > d).then(|| next - 1 - d);
            [ahead, behind].into_iter().flatten()
        });
        found = places.find(|&p| slot(p as u64).is_some_and(|s| matches(s, size)) && anchor(p));
        if let Some(p) = found {
            // In a sequence that repeats block after block, an anchor holding a request
            // the plan has elsewhere (an insertion) can match a place blocks ahead only:
            // the place is taken once the next anchor, of later requests, agrees.
            let place = i64::from(p) - at.request as i64;
            let before = lost.found.replace(place);
            // In a stretch that repeats with a short period, the nearest place of an
            // anchor can be a period short of the place the anchor before found (when
            // the cursor stands before both): this anchor matching there too, the two
            // agree. Only a place near the nearest one is taken so: a far one may come
            // from an insertion, as above.
            let at_before = before
                .filter(|&was| (place - was).abs() <= i64::from(WINDOW))
                .and_then(|was| u32::try_from(was + at.request as i64).ok())
                .filter(|&q| slot(q.into()).is_some_and(|s| matches(s, size)) && anchor(q));
            if at_before.is_some() {
                found = at_before; // the run ends here: `lost` starts afresh at its next miss
            } else if before.is_none_or(|was| (place - was).abs() > AGREE) {
                found = None;
                // A first place, or one the place before disagreed with: the next anchor
                // confirms it or not, soon (a few times in a run; doubling the wait
                // there missed a layer of candle's BERT).
                if lost.rechecks < RECHECKS {
                    lost.rechecks += 1;
                    lost.search_at = lost.run + ANCHOR as u32;
                }
            }
        }
        if found.is_none() && lost.search_at <= lost.run {
            lost.search_at = lost.search_at.saturating_mul(2);
        }
    }
    if found.is_some() {
        lost.run = 0;
    } else {
        lost.missed.rotate_left(1);
        lost.missed[ANCHOR - 2] = (size, at.request);
    }
    found
}

/// Tries to serve `layout` from the pass's slab. On a miss, the cursor as it was before
/// the request is saved in the pass (for [`undo`]).
///
/// # Safety
/// `pass` must be the calling thread's running replayed pass.
#[inline]
pub(crate) unsafe fn alloc(pass: &mut Context, layout: Layout) -> Result<*mut u8, MissReason> {
    // A pass without a slab runs on the counted backend path instead (see `lifecycle`).
    debug_assert!(!pass.inst.is_null() && !pass.plan.is_null());
    // `UNKNOWN` (an op the plan does not know) is past every node: no cursor, unplanned.
    let node = pass.node;
    let size = layout.size() as u64;
    // SAFETY: the pass holds its plan and instance until it ends.
    let (plan, inst) = unsafe { (&*pass.plan, &*pass.inst) };
    if let Some(class) = lane_classes::class_of(size, layout.align() as u64, plan.lanes.max) {
        return lane_alloc(pass, plan, inst, class, size);
    }
    // The hit path: rule 1, the next slot matches (a pending candidate, if any, is
    // dropped: the sequence is back in step).
    // SAFETY: the cursors are written only by this thread, the instance's owner.
    let fast = unsafe {
        inst.cursors.with_mut(|cursors| {
            let c = cursors.get_mut(node as usize)?;
            let next = c.next;
            if next >= c.end {
                return None;
            }
            debug_assert!((c.end as usize) <= plan.slots.len());
            // SAFETY: `next < end <= slots.len()`: cursor ranges lie in the slot table.
            let slot = plan.slots.get_unchecked(next as usize);
            if !matches(slot, size) {
                return None;
            }
            c.next = next + 1;
            c.pending = NO_SLOT;
            Some((next, slot))
        })
    };
    let Some((index, slot)) = fast else {
        // SAFETY: forwarded.
        return unsafe { alloc_resync(pass, layout) };
    };
    debug_assert!(layout.size() as u64 <= slot.size);
    if slot.flags.load(Ordering::Relaxed) != PLANNED {
        return missed(pass, index, MissReason::Escaping); // escaped, or demoted
    }
    if layout.align() as u64 > slot.max_align() {
        return missed(pass, index, MissReason::Alignment);
    }
    if !claim(inst, index, slot) {
        return missed(pass, index, MissReason::Overlap);
    }
    debug_assert!(slot.offset + layout.size() as u64 <= plan.height);
    // SAFETY: `offset + size <= height`, and the instance spans `height` bytes from `base`.
    Ok(unsafe { pass.base.add(slot.offset as usize) })
}

/// A lane request: a free cell of its class (else see [`lane_borrow`]), unless the
/// profile saw the node's request of this count escape (see [`lane_escape`]).
#[inline]
fn lane_alloc(
    pass: &mut Context,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
) -> Result<*mut u8, MissReason> {
    if !plan.lists_lane_escapes() {
        return lane_cell(pass, plan, inst, class, size);
    }
    let node = pass.node;
    // SAFETY: the cursors are written only by this thread, the instance's owner.
    let listed = unsafe {
        inst.cursors.with_mut(|cursors| {
            let c = cursors.get_mut(node as usize)?;
            let ordinal = c.lanes;
            c.lanes = ordinal.wrapping_add(1);
            (ordinal == c.escape).then_some(ordinal)
        })
    };
    if let Some(ordinal) = listed {
        return lane_escape(pass, plan, inst, class, size, ordinal);
    }
    lane_cell(pass, plan, inst, class, size)
}

/// A lane request the profile saw escape (the node's `ordinal`-th): served by the
/// backend if its class is the profile's, else (the pass went another way) a cell as
/// usual. The node's cursor moves on to its next escaping request.
#[cold]
#[inline(never)]
fn lane_escape(
    pass: &mut Context,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
    ordinal: u32,
) -> Result<*mut u8, MissReason> {
    let node = pass.node;
    let (escapes, next) = plan.lane_escape(node, ordinal, class);
    // SAFETY: as in `lane_alloc`.
    unsafe {
        inst.cursors.with_mut(|cursors| {
            if let Some(c) = cursors.get_mut(node as usize) {
                c.escape = next;
            }
        })
    };
    if escapes {
        pass.undo = (node, LANE_COUNTED, ordinal);
        return Err(MissReason::Escaping);
    }
    lane_cell(pass, plan, inst, class, size)
}

/// A free cell of class `class` (else see [`lane_borrow`]).
#[inline(always)]
fn lane_cell(
    pass: &mut Context,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
) -> Result<*mut u8, MissReason> {
    let Some(offset) = inst.lanes.alloc(&plan.lanes, class) else {
        return lane_borrow(pass, plan, inst, class, size);
    };
    lane_hit(pass, plan, offset, size)
}

/// A lane request whose class is full: a free cell of the smallest class above it with
/// one, or an overlap miss when every cell of those is live too (the pass holds more
/// than its profiles did).
#[cold]
#[inline(never)]
fn lane_borrow(
    pass: &mut Context,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
) -> Result<*mut u8, MissReason> {
    let Some(offset) = inst.lanes.alloc_above(&plan.lanes, class) else {
        // Its node counted it if the plan lists escapes (see `lane_alloc`).
        let counted = if plan.lists_lane_escapes() {
            LANE_COUNTED
        } else {
            NO_SLOT
        };
        pass.undo = (pass.node, counted, NO_SLOT);
        return Err(MissReason::Overlap);
    };
    lane_hit(pass, plan, offset, size)
}

/// Hands out the lane cell at `offset`, taken for a request of `size` bytes.
#[inline(always)]
fn lane_hit(
    pass: &mut Context,
    plan: &CompiledPlan,
    offset: u64,
    size: u64,
) -> Result<*mut u8, MissReason> {
    debug_assert!(offset + size <= plan.lanes.bytes && size <= plan.lanes.cell_size_at(offset));
    pass.counters.lane_hits += 1;
    // SAFETY: the cell lies in the instance's lane block, which the pass holds.
    Ok(unsafe { pass.lane_base.add(offset as usize) })
}

/// A slot taken on the hit path failed its checks: used up, unless the backend fails the
/// request too (then it is given back; a dropped candidate stays dropped).
#[cold]
#[inline(never)]
fn missed(pass: &mut Context, index: u32, reason: MissReason) -> Result<*mut u8, MissReason> {
    pass.undo = (pass.node, index, NO_SLOT);
    Err(reason)
}

/// The checks of a taken slot (the request fits it: [`take`] ensures that) and the
/// hand-out, off the hit path.
fn check_and_claim(
    plan: &CompiledPlan,
    inst: &Instance,
    index: u32,
    slot: &Slot,
    layout: Layout,
) -> Result<(), MissReason> {
    debug_assert!(layout.size() as u64 <= slot.size);
    if slot.flags.load(Ordering::Relaxed) != PLANNED {
        Err(MissReason::Escaping) // it escaped the profile, or it was demoted
    } else if layout.align() as u64 > slot.max_align() {
        Err(MissReason::Alignment)
    } else if !claim(inst, index, slot) {
        Err(MissReason::Overlap)
    } else {
        debug_assert!(slot.offset + layout.size() as u64 <= plan.height);
        Ok(())
    }
}

/// [`alloc`] off the hit path: the general matching, then the checks.
///
/// # Safety
/// As [`alloc`].
#[cold]
#[inline(never)]
unsafe fn alloc_resync(pass: &mut Context, layout: Layout) -> Result<*mut u8, MissReason> {
    let node = pass.node;
    // SAFETY: the pass holds its plan and instance until it ends.
    let (plan, inst) = unsafe { (&*pass.plan, &*pass.inst) };
    // SAFETY: the cursors are written only by this thread, the instance's owner.
    let (taken, before) = unsafe {
        inst.cursors
            .with_mut(|cursors| match cursors.get_mut(node as usize) {
                Some(cursor) => {
                    let before = (cursor.next, cursor.pending);
                    let size = layout.size() as u64;
                    let c = &pass.counters;
                    let at = At {
                        node,
                        hits: c.slab_hits - c.lane_hits,
                        request: c.slab_hits - c.lane_hits + c.missed(),
                        lane_max: plan.lanes.max,
                    };
                    (
                        take(plan, cursor, size, (&mut pass.shrink, &mut pass.lost), at),
                        before,
                    )
                }
                None => (Err(MissReason::Unplanned), (NO_SLOT, NO_SLOT)),
            })
    };
    let checked = taken.and_then(|index| {
        // SAFETY: `take` returns slots of the cursor's range, inside the slot table.
        let slot = unsafe { plan.slots.get_unchecked(index as usize) };
        check_and_claim(plan, inst, index, slot, layout)
            // SAFETY: as in `alloc`.
            .map(|()| unsafe { pass.base.add(slot.offset as usize) })
    });
    match (&taken, &checked) {
        (_, Err(_)) => pass.undo = (node, before.0, before.1),
        // Re-synchronised past planned slots the program did not allocate this time.
        (Ok(index), Ok(_)) => pass.counters.skipped += index.saturating_sub(before.0) as u64,
        _ => {}
    }
    checked
}

/// Gives back what a failed request used up or moved: the backend could not serve it
/// either, so the program saw a failed allocation, which its profile never recorded.
///
/// # Safety
/// As [`alloc`], right after it returned a miss for the same pass.
pub(crate) unsafe fn undo(pass: &mut Context) {
    let (node, next, pending) = pass.undo;
    if next == NO_SLOT {
        return; // nothing moved
    }
    // SAFETY: the caller's contract; only this thread writes the cursors.
    unsafe {
        (*pass.inst).cursors.with_mut(|cursors| {
            let Some(c) = cursors.get_mut(node as usize) else {
                return;
            };
            if next == LANE_COUNTED {
                c.lanes = c.lanes.wrapping_sub(1);
                if pending != NO_SLOT {
                    c.escape = pending; // the escaping request is still to come
                }
            } else {
                c.next = next;
                c.pending = pending;
            }
        })
    };
}

/// The `undo` of a lane request that missed: its node counted it (and, when `pending` is
/// not `NO_SLOT`, it was the escaping request of that lane ordinal). Above every slot
/// index (`MAX_SLOTS`), apart from `NO_SLOT`.
const LANE_COUNTED: u32 = NO_SLOT - 1;

/// Hands slot `index` of `inst` out if no live slot overlaps its addresses: the check and
/// the occupant stores of the owner's side of the hand-off protocol (see `slab`).
///
/// A live slot overlapping this one either starts inside it (then it holds the word of a
/// group this slot covers: its first group's word is never in a block it covers whole)
/// or covers this slot's first group, and holds that group's word or the block word of
/// its block. So a hand-out checks the words of the groups it covers and one block word.
/// It then stores its index in the words of the groups it covers, except that the blocks
/// it covers whole (after the one it starts in) take one block word each.
#[inline]
pub(crate) fn claim(inst: &Instance, index: u32, slot: &Slot) -> bool {
    let words = covered(&inst.occupant, slot);
    let block = block_of(&inst.spanning, slot.group as usize);
    // Acquire: a free on another thread happens-before we reuse its memory.
    if block.load(Ordering::Acquire) != EMPTY || !all_empty(words) {
        return false;
    }
    // Release pairs with nothing on the hand-out side; it keeps the occupant's stores
    // after the checks above in the eyes of a thread that later frees the pointer.
    let store = |o: &AtomicU32| o.store(index, Ordering::Release);
    let whole = whole_blocks(slot);
    if whole.is_empty() {
        words.iter().for_each(store); // nearly every slot
        return true;
    }
    let (group, head_end, tail) = (
        slot.group as usize,
        whole.start << BLOCK_SHIFT,
        whole.end << BLOCK_SHIFT,
    );
    words[..head_end - group].iter().for_each(store);
    // SAFETY: `whole_blocks` ends at or before the block of the slot's last group.
    unsafe { inst.spanning.get_unchecked(whole) }
        .iter()
        .for_each(store);
    words[tail - group..].iter().for_each(store);
    true
}

/// The blocks `slot` covers whole after the one it starts in (empty for nearly all).
#[inline(always)]
fn whole_blocks(slot: &Slot) -> std::ops::Range<usize> {
    ((slot.group as usize >> BLOCK_SHIFT) + 1)..(slot.group_end as usize >> BLOCK_SHIFT)
}

/// The block word of group `group`'s block.
#[inline(always)]
fn block_of(spanning: &[AtomicU32], group: usize) -> &AtomicU32 {
    debug_assert!(group >> BLOCK_SHIFT < spanning.len());
    // SAFETY: `group` is a group of the plan (`covered`'s assertion), and there is a
    // block word for each block of groups (`slab::blocks_of`).
    unsafe { spanning.get_unchecked(group >> BLOCK_SHIFT) }
}

/// Words a hand-out checks together: one branch per chunk. Most slots cover a word or
/// two, but the few over hundreds of groups hold most of the words: on candle's
/// MobileNetV4 plan, slots of more than 256 groups are 2% of the slots and 70% of the
/// words (up to 42,000 each).
const CHUNK: usize = 8;

/// Whether every word is [`EMPTY`] (each loaded with Acquire). `EMPTY` is all ones, so a
/// chunk is all empty exactly when the AND of its words is.
#[inline(always)]
fn all_empty(words: &[AtomicU32]) -> bool {
    const { assert!(EMPTY == u32::MAX) };
    let empty = |o: &AtomicU32| o.load(Ordering::Acquire) == EMPTY;
    if words.len() < CHUNK {
        return words.iter().all(empty); // most slots: the hit path as it was
    }
    let (chunks, rest) = words.split_at(words.len() / CHUNK * CHUNK);
    chunks.chunks_exact(CHUNK).all(|chunk| {
        chunk
            .iter()
            .fold(EMPTY, |a, o| a & o.load(Ordering::Acquire))
            == EMPTY
    }) && rest.iter().all(empty)
}

/// The occupant words of the groups `slot` covers.
#[inline(always)]
fn covered<'a>(occupant: &'a [AtomicU32], slot: &Slot) -> &'a [AtomicU32] {
    // An in-slab slot covers a non-empty run of the groups, which index the occupant
    // words (compile: `group < group_end <= groups`).
    debug_assert!(slot.group < slot.group_end && slot.group_end as usize <= occupant.len());
    // SAFETY: as just asserted.
    unsafe { occupant.get_unchecked(slot.group as usize..slot.group_end as usize) }
}

/// A live slab pointer's slot as a free sees it: the group the pointer starts, the slot's
/// index (read from that group's word), the instance's words and the plan.
struct Live {
    group: usize,
    index: u32,
    inst: &'static Instance,
    plan: &'static CompiledPlan,
}

/// Where a live slab pointer lies in its instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// A lane cell, at this offset of the lane block.
    Cell(u64),
    /// A slot, at this offset of the slots' block.
    Slot(u64),
}

/// The instance, plan and place of live slab pointer `p` (a slot's or a lane cell's).
///
/// `p` is a cell if it lies in the instance's lane block. Reading the lane block's base
/// needs no more order than the slots' base: the program's hand-off of `p` orders the
/// read after the hand-out, so it sees the base stored last before the hand-out or a
/// later one. For a live cell that is its block's (the block is held until the cell is
/// freed); for a slot, each of those is null or a block other than the slot's, which
/// the instance holds all along as its slots' block, so `p` is in none of them.
///
/// # Safety
/// `inst` must be the owner `crate::memory::region::lookup(p)` returned for a live pointer `p`
/// this allocator handed out.
#[inline(always)]
unsafe fn slab_place(
    inst: *mut (),
    p: *mut u8,
) -> Option<(&'static Instance, &'static CompiledPlan, Place)> {
    let inst = inst.cast::<Instance>();
    if inst.is_null() {
        return None;
    }
    // SAFETY: an instance with a live slot or cell is never freed (retirement waits for
    // all its occupants to be EMPTY and its cells free), and `p` is live; the plan
    // outlives its instances.
    let (inst, plan) = unsafe { (&*inst, &*(*inst).plan) };
    let cell = (p as usize).wrapping_sub(inst.lane_base() as usize) as u64;
    let place = if plan.lanes.holds(cell) {
        Place::Cell(cell)
    } else {
        Place::Slot((p as usize).wrapping_sub(inst.base() as usize) as u64)
    };
    Some((inst, plan, place))
}

/// The live slot at slab offset `offset` of `inst` (not a lane cell). Its index is read
/// from the word of the group the slot starts: the owner's stores there happen-before
/// any use of the pointer (the program handed it over), and Acquire keeps that even if
/// the hand-off was not ordered for this word.
#[inline(always)]
fn live_slot(inst: &'static Instance, plan: &'static CompiledPlan, offset: u64) -> Option<Live> {
    let group = plan.group_at(offset)? as usize;
    let index = inst.occupant.get(group)?.load(Ordering::Acquire);
    debug_assert_ne!(index, EMPTY, "a free or realloc of a slab pointer not live");
    Some(Live {
        group,
        index,
        inst,
        plan,
    })
}

/// Frees slab pointer `p` owned by `inst`, from any thread.
///
/// The words to clear are the runs that hold the slot's index, from `p`'s group: the
/// group words up to the first block the slot covers whole, then those blocks' words,
/// then the group words after them. A live slot's index is in exactly the words it
/// covers (the word after each run is another group's or block's, not covered by it; the
/// slot cannot be handed out again before its last word is cleared). So a free reads no
/// slot: on a plan larger than the cache, the slot table is where a free missed.
///
/// The first group's word is cleared last, and nothing of the instance is read after
/// it: a slot counts as live while that word holds it (`Instance::slots_live`), and once
/// none is live the plan may be retired and its instances freed by another thread.
/// (Clearing from the first word on, the loop read the word past the run after the slot
/// had been seen free: the loom model `free_then_reclaim`.)
///
/// # Safety
/// As [`slab_place`].
#[inline]
pub(crate) unsafe fn free(inst: *mut (), p: *mut u8) {
    // SAFETY: forwarded contract.
    let Some((inst, plan, place)) = (unsafe { slab_place(inst, p) }) else {
        return;
    };
    let offset = match place {
        Place::Slot(offset) => offset,
        Place::Cell(offset) => {
            inst.lanes.free(&plan.lanes, offset); // last: the instance may go after it
            return;
        }
    };
    let Some(live) = live_slot(inst, plan, offset) else {
        return;
    };
    let (occupant, index) = (&live.inst.occupant, live.index);
    let Some((first, rest)) = occupant.get(live.group..).and_then(<[_]>::split_first) else {
        return; // `live_slot` read the first word: not reached
    };
    let mut end = live.group + 1 + clear_run(rest, index);
    if end & ((1 << BLOCK_SHIFT) - 1) == 0 {
        // The group run may stop where the blocks it covers whole begin.
        let blocks = clear_run(
            live.inst
                .spanning
                .get(end >> BLOCK_SHIFT..)
                .unwrap_or_default(),
            index,
        );
        if blocks > 0 {
            end += blocks << BLOCK_SHIFT;
            end += clear_run(occupant.get(end..).unwrap_or_default(), index);
        }
    }
    debug_assert!(
        live.plan
            .slots
            .get(index as usize)
            .is_some_and(|s| { (s.group as usize, s.group_end as usize) == (live.group, end) }),
        "a free clears exactly the words its slot covers"
    );
    // Last: from here on the instance may be freed.
    first.store(EMPTY, Ordering::Release);
}

/// Clears the leading words of `words` that hold `index`; returns how many.
///
/// Acquire loads, as the free's first one: the owner's stores of this slot
/// happen-before. Release stores: the program's accesses to the slot happen-before the
/// reuse of any part of it (a hand-out checks every word it covers with Acquire).
#[inline(always)]
fn clear_run(words: &[AtomicU32], index: u32) -> usize {
    let mut cleared = 0;
    for o in words {
        if o.load(Ordering::Acquire) != index {
            break;
        }
        o.store(EMPTY, Ordering::Release);
        cleared += 1;
    }
    cleared
}

/// The size of the slot behind live slab pointer `p` (how far it can grow in place).
///
/// # Safety
/// As [`slab_place`].
#[inline]
pub(crate) unsafe fn capacity(inst: *mut (), p: *mut u8) -> u64 {
    // SAFETY: forwarded contract.
    let Some((inst, plan, place)) = (unsafe { slab_place(inst, p) }) else {
        return 0;
    };
    let offset = match place {
        Place::Slot(offset) => offset,
        Place::Cell(offset) => return plan.lanes.cell_size_at(offset),
    };
    let live = live_slot(inst, plan, offset);
    live.and_then(|l| l.plan.slots.get(l.index as usize))
        .map_or(0, |s| s.size)
}

/// A realloc of lane cell `p` past its cell, in the replayed pass that holds the cell's
/// instance: the chain moves to a free cell of the new size's class (or of a class above,
/// as [`lane_borrow`]), its bytes copied, the old cell freed. A profile counts the chain
/// in that class from the realloc on (see `lane_count.rs`). `None` when `p` is a slot or a
/// cell of another instance, the new size is past the lanes or no cell is free: the
/// caller moves the chain to the backend.
///
/// # Safety
/// As [`slab_place`] for `inst` and `p` (`layout` is `p`'s); `pass` is this thread's
/// running replayed pass; `new_size` exceeds `p`'s [`capacity`].
pub(crate) unsafe fn lane_grow(
    pass: &mut Context,
    inst: *mut (),
    p: *mut u8,
    layout: Layout,
    new_size: usize,
) -> Option<*mut u8> {
    // SAFETY: forwarded contract.
    let (inst, plan, place) = unsafe { slab_place(inst, p) }?;
    let Place::Cell(offset) = place else {
        return None;
    };
    if !std::ptr::eq(inst, pass.inst) {
        return None;
    }
    let class = lane_classes::class_of(new_size as u64, layout.align() as u64, plan.lanes.max)?;
    let to = (inst.lanes.alloc(&plan.lanes, class))
        .or_else(|| inst.lanes.alloc_above(&plan.lanes, class))?;
    debug_assert!(to + new_size as u64 <= plan.lanes.bytes && layout.size() < new_size);
    // SAFETY: the new cell lies in the instance's lane block, which the pass holds; it
    // was free, so it does not overlap `p`'s cell, whose first `layout.size()` bytes are
    // the program's.
    let new = unsafe {
        let new = pass.lane_base.add(to as usize);
        std::ptr::copy_nonoverlapping(p, new, layout.size());
        new
    };
    inst.lanes.free(&plan.lanes, offset);
    Some(new)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::format::trace::{PlanFile, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT};
    use crate::replay::slab::pool::Slabs;
    use proptest::prelude::*;

    /// A plan of one node whose slots have these sizes (all planned, disjoint).
    fn plan(sizes: &[u64]) -> CompiledPlan {
        let mut offset = 0;
        let slots: Vec<(u64, u64)> = sizes
            .iter()
            .map(|&size| {
                let s = (offset, size);
                offset += size.next_multiple_of(16);
                s
            })
            .collect();
        plan_at(&slots)
    }

    /// A plan of one node whose slots are at these `(offset, size)`, in this order.
    fn plan_at(at: &[(u64, u64)]) -> CompiledPlan {
        let slots = (0..)
            .zip(at)
            .map(|(i, &(offset, size))| PlanSlot {
                scope: 0,
                ordinal: i,
                size,
                min_size: None,
                align: 16,
                offset: Some(offset),
            })
            .collect();
        let height = at.iter().map(|&(o, s)| o + s).max().unwrap_or(0);
        let file = PlanFile {
            format: PLAN_FORMAT.into(),
            version: FORMAT_VERSION,
            key: "t".into(),
            strategy: "test".into(),
            height: height.max(16),
            lower_bound: 0,
            naive: 0,
            scopes: vec![TraceScope {
                id: 0,
                parent: None,
                name: "t".into(),
                occurrence: 0,
                enter: None,
                exit: None,
            }],
            slots,
            lanes: Default::default(),
        };
        CompiledPlan::compile(&file).unwrap()
    }

    /// Runs `requests` through the matcher as the plan's first replayed pass (the skips
    /// earlier runs learned are forgotten); returns what each took.
    fn run(plan: &CompiledPlan, requests: &[u64]) -> Vec<Option<u32>> {
        run_with_lanes(plan, requests, 0)
    }

    /// [`run`] for a plan with lanes of at most `lane_max` bytes (the requests given are
    /// the others).
    fn run_with_lanes(plan: &CompiledPlan, requests: &[u64], lane_max: u64) -> Vec<Option<u32>> {
        plan.skips.forget();
        run_learned(plan, requests, lane_max)
    }

    /// [`run_with_lanes`] as a later pass: with the skips the plan's passes learned.
    fn run_learned(plan: &CompiledPlan, requests: &[u64], lane_max: u64) -> Vec<Option<u32>> {
        let mut c = plan.initial_cursors()[0];
        let mut shrink = Shrink::Off;
        let mut lost = Lost::default();
        let mut hits = 0u64;
        requests
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                // Hits so far stand in for the pass's: enough for the probe's rule.
                let at = At {
                    node: 0,
                    hits,
                    request: i as u64,
                    lane_max,
                };
                let t = take(plan, &mut c, size, (&mut shrink, &mut lost), at);
                hits += t.is_ok() as u64;
                t.ok()
            })
            .collect()
    }

    /// What `run` took, a slot taken again counted as a miss: a going back (see
    /// [`BACK`]) walks slots a wrong jump passed, and may reach the one the jump's
    /// confirming request took. In a pass that is a claim of a slot taken before, which
    /// fails if it is still live: counting it as a miss is the worst case.
    fn once(took: Vec<Option<u32>>) -> Vec<Option<u32>> {
        let mut seen = std::collections::HashSet::new();
        took.into_iter()
            .map(|t| t.filter(|&i| seen.insert(i)))
            .collect()
    }

    fn at0() -> At {
        At {
            node: 0,
            hits: 0,
            request: 0,
            lane_max: 0,
        }
    }

    #[test]
    fn each_rule() {
        let p = plan(&[100, 200, 300, 400, 500, 600]);
        // In step.
        assert_eq!(run(&p, &[100, 200, 300]), [Some(0), Some(1), Some(2)]);
        // An inserted request matching nothing moves nothing.
        assert_eq!(run(&p, &[100, 7, 200]), [Some(0), None, Some(1)]);
        // One missing: the next but one.
        assert_eq!(run(&p, &[100, 300, 400]), [Some(0), Some(2), Some(3)]);
        // Several missing: a candidate, confirmed by the request after it.
        assert_eq!(run(&p, &[500, 600]), [None, Some(5)]);
        // A candidate the next request does not confirm is dropped (it was an insertion).
        assert_eq!(run(&p, &[500, 100, 200]), [None, Some(0), Some(1)]);
        // Resized larger: a miss (too large), the rest in step.
        assert_eq!(
            run(&p, &[100, 250, 300, 400]),
            [Some(0), None, Some(2), Some(3)]
        );
        // A smaller shape: the first request probes, the second confirms, the rest follow.
        assert_eq!(
            run(&p, &[60, 120, 180, 240]),
            [None, Some(1), Some(2), Some(3)]
        );
        // An isolated smaller request (an insertion) never confirms its probe.
        assert_eq!(
            run(&p, &[60, 100, 200, 150]),
            [None, Some(0), Some(1), None]
        );
        // Far smaller than seen is never taken in place.
        assert_eq!(run(&p, &[40, 80, 100]), [None, None, Some(0)]);
        // Past the end: nothing.
        let all = run(&p, &[100, 200, 300, 400, 500, 600, 600]);
        assert_eq!(all.last(), Some(&None));
    }

    /// A request inserted before a slot of its size takes it; the displaced request then
    /// goes back to the slot its predecessor passed, and the rest follow in step. Before
    /// rule 2, each displaced request jumped again and the cursor ran ahead (from the
    /// fourth request on, every one missed).
    #[test]
    fn an_insertion_before_a_slot_of_its_size_costs_one_slot() {
        let p = plan(&[16, 4096, 256, 16, 4096, 1000, 4096, 16, 256, 1000]);
        let took = run(
            &p,
            &[16, 256, 4096, 256, 16, 4096, 1000, 4096, 16, 256, 1000],
        );
        let in_step = (0..10).map(Some);
        let expected: Vec<_> = [Some(0), Some(2), Some(1)]
            .into_iter()
            .chain(in_step.skip(2))
            .collect();
        assert_eq!(took, expected, "slot 2 taken again: its claim decides");
    }

    /// Two inserted requests matching a place ahead by chance make a wrong jump; the
    /// request after it does not follow and goes back. Before rule 2, every later request
    /// missed: the cursor stood ahead of them all.
    #[test]
    fn a_wrong_jump_goes_back() {
        let p = plan(&[100, 200, 300, 400, 500, 600, 700, 800, 900]);
        let took = run(&p, &[500, 600, 100, 200, 300, 400, 500, 600, 700]);
        let expected = [
            None,
            Some(5),
            Some(0),
            Some(1),
            Some(2),
            Some(3),
            Some(4),
            Some(5),
            Some(6),
        ];
        assert_eq!(took, expected);
    }

    /// A bucket's smaller shape with lanes: slots whose requests shrink to a lane's size
    /// are not in the pass's sequence, and a shrinking pass passes over them. Without
    /// lanes it waits at such a slot (its request is still to come).
    #[test]
    fn a_shrinking_pass_passes_over_slots_shrunk_into_lanes() {
        let p = plan(&[24576, 24576, 24576, 3072, 3072, 384, 384, 3072, 24576]);
        // Half the shape: 384 bytes shrink to 192, a lane request.
        let requests = [12288, 12288, 12288, 1536, 1536, 1536, 12288];
        let took = run_with_lanes(&p, &requests, 256);
        let all = [None, Some(1), Some(2), Some(3), Some(4), Some(7), Some(8)];
        assert_eq!(took, all);
        let took = run(&p, &requests);
        assert_eq!(took[..5], all[..5]);
        assert_eq!(
            took[5..],
            [None, None],
            "too large for slot 5, and waiting there"
        );
    }

    /// In a run of equal sizes, a candidate the next request does not confirm (its next
    /// slot is of another size) gives way to the next slot of the size ahead of it, so the
    /// run is found again; before, every request named the first candidate again.
    #[test]
    fn candidates_walk_a_run_of_equal_sizes() {
        let p = plan(&[1888, 1744, 3312, 368, 496, 368, 368, 368, 368, 2640]);
        let took = run(&p, &[368, 368, 368, 368, 368, 2640]);
        assert_eq!(took, [None, None, Some(6), Some(7), Some(8), Some(9)]);
    }

    /// A run of misses of one size does not search: such an anchor matches wherever the
    /// plan has a run of that size, and a search would only double the wait for the next.
    #[test]
    fn an_anchor_of_one_size_is_not_searched() {
        let p = plan(&(1..=400u64).map(mixed_size).collect::<Vec<_>>());
        let mut c = p.initial_cursors()[0];
        let (mut shrink, mut lost) = (Shrink::Off, Lost::default());
        for i in 0..1000u64 {
            let at = At {
                node: 0,
                hits: 0,
                request: i,
                lane_max: 0,
            };
            assert!(take(&p, &mut c, 8, (&mut shrink, &mut lost), at).is_err());
        }
        assert_eq!(lost.search_at, ANCHOR as u32, "no search");
    }

    /// The `i`-th size of a sequence that does not repeat itself (no period): one of 16
    /// multiples of 16, hashed from `i`.
    fn mixed_size(i: u64) -> u64 {
        let x = (i ^ (i >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        16 * (1 + ((x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb) >> 60))
    }

    /// A run of missing slots longer than the window (a first pass's one-time
    /// allocations, planned): the requests after it find their place again after
    /// `2 * ANCHOR - 1` misses (two anchors that agree), not never.
    #[test]
    fn a_long_missing_run_costs_a_few_requests() {
        // Not periodic: in a periodic sequence every place of the same phase is the same.
        let sizes: Vec<u64> = (1..=400u64).map(mixed_size).collect();
        let p = plan(&sizes);
        let requests: Vec<u64> = sizes[..40].iter().chain(&sizes[140..]).copied().collect();
        let took = run(&p, &requests);
        let missed: Vec<usize> = (0..took.len()).filter(|&i| took[i].is_none()).collect();
        assert!(missed.len() < 2 * ANCHOR, "missed {missed:?}");
        assert_eq!(took.last(), Some(&Some(399)), "in step at the end");
        // A pass that matches nothing searches at runs of 4, 8, 16, ...: a handful.
        // (Of two sizes: an anchor of one size is never searched for.)
        let strangers: Vec<u64> = (0..1000u64).map(|i| 8 + 16 * (i % 2)).collect();
        let mut c = p.initial_cursors()[0];
        let (mut shrink, mut lost) = (Shrink::Off, Lost::default());
        for (i, &size) in strangers.iter().enumerate() {
            let at = At {
                node: 0,
                hits: 0,
                request: i as u64,
                lane_max: 0,
            };
            assert!(take(&p, &mut c, size, (&mut shrink, &mut lost), at).is_err());
        }
        assert_eq!(
            lost.search_at,
            (ANCHOR as u32) << 8,
            "8 searches for 1,000 misses"
        );
    }

    /// A process's first forward, planned, in candle's BERT: a run of one-time slots of
    /// one size, longer than the window, before a stretch of the model that repeats with
    /// a short period. The run's nearest place for one anchor is then a period short of
    /// the place the anchor before found; doubling the wait after each such disagreement
    /// missed the rest of the model's first layer (49 requests of candle's 267; 14 now).
    #[test]
    fn a_missing_run_before_a_short_period_costs_a_few_requests() {
        let head: Vec<u64> = (1..=12u64).map(mixed_size).collect();
        let period = [262144u64, 131072, 131072, 8192, 765, 765];
        let tail: Vec<u64> = (20..=120u64).map(mixed_size).collect();
        let model: Vec<u64> = period
            .iter()
            .cycle()
            .take(4 * period.len())
            .chain(&tail)
            .copied()
            .collect();
        let one_time = [4096u64; 80];
        let sizes: Vec<u64> = head
            .iter()
            .chain(&one_time)
            .chain(&model)
            .copied()
            .collect();
        let p = plan(&sizes);
        // The first forward's head differed a little too: a request of its own there.
        let requests: Vec<u64> = head.iter().chain(&[24]).chain(&model).copied().collect();
        let took = run(&p, &requests);
        let missed: Vec<usize> = (0..took.len()).filter(|&i| took[i].is_none()).collect();
        // Three anchors' runs at most (the first holds the head's stray request and finds
        // nothing; the next finds the place; the third's nearest place is a period short,
        // and it matches at the place before too): before, 95 of the 138 requests missed
        // (16 when a place a period short was taken after a fourth anchor agreed).
        assert!(
            missed.len() <= 3 * ANCHOR,
            "missed {} requests: {missed:?}",
            missed.len()
        );
        assert_eq!(
            took.last(),
            Some(&Some(sizes.len() as u32 - 1)),
            "in step at the end"
        );
    }

    /// A first forward's slot sizes (two one-time slots in its head, 40 after it) and a
    /// later forward's requests (without them).
    fn first_forward_plan() -> (Vec<u64>, Vec<u64>) {
        let after: Vec<u64> = (20..=80u64).map(mixed_size).collect();
        let head = [100u64, 200, 901, 902, 300, 400, 500, 600];
        let sizes = head.iter().chain(&[4096; 40]).chain(&after).copied();
        let requests = [100u64, 200, 300, 400, 500, 600]
            .iter()
            .chain(&after)
            .copied();
        (sizes.collect(), requests.collect())
    }

    /// candle's BERT-mini, its first forward planned: a few one-time slots in the head
    /// (the second forward's request stands for the first of them: it misses and names
    /// a candidate, which the request after it confirms), then a run of one-time slots.
    /// The head's miss has its place once the candidate is confirmed: left in the run,
    /// it spoiled the first anchor of the missing run after it (its distance in
    /// requests is not its distance in slots past the jump), and the place was found
    /// one anchor later.
    #[test]
    fn a_miss_placed_by_a_jump_leaves_the_run() {
        let (sizes, requests) = first_forward_plan();
        let p = plan(&sizes);
        let took = run(&p, &requests);
        assert_eq!(
            took[..4],
            [Some(0), Some(1), None, Some(5)],
            "the head's jump"
        );
        let missed = took.iter().filter(|t| t.is_none()).count();
        // The head's miss and two anchors (the first finds the place, the second
        // confirms it): 8 misses; before, 11 (the first anchor held the head's miss and found
        // nothing, and the search after it waited twice as long).
        assert!(missed <= 1 + 2 * ANCHOR, "missed {missed}: {took:?}");
        assert_eq!(took.last(), Some(&Some(sizes.len() as u32 - 1)));
    }

    /// The plan of a first forward (one-time slots in its head, and a run of them after
    /// it), replayed by the passes after it: the first finds its place again past both
    /// (a candidate confirmed, two anchors that agree) and the plan learns the skips; the
    /// next takes them at once.
    #[test]
    fn the_skips_one_pass_found_cost_the_next_nothing() {
        let (sizes, requests) = first_forward_plan();
        let p = plan(&sizes);
        let first = run(&p, &requests);
        let missed = |took: &[Option<u32>]| took.iter().filter(|t| t.is_none()).count();
        assert!(
            missed(&first) > ANCHOR,
            "the first pass searches: {first:?}"
        );
        let second = run_learned(&p, &requests, 0);
        assert_eq!(missed(&second), 0, "{second:?}");
        let own: Vec<Option<u32>> = [0, 1, 4, 5, 6, 7]
            .into_iter()
            .chain(48..sizes.len() as u32)
            .map(Some)
            .collect();
        assert_eq!(second, own, "each request its own slot");
    }

    /// candle's MobileNetV4, its first forward planned: one-time slots in the head, and
    /// two small requests there that later forwards make further on, so the first two
    /// requests of a run of equal sizes miss at the same slot before a third confirms a
    /// candidate. The skip belongs to the first request to miss there: learned for the
    /// second (the one that named the candidate), the next pass's first took it, and every
    /// request of the run after it the slot one place on: a buffer that lives the whole
    /// pass took a slot planned to live a few allocations, and the slots planned after
    /// those at its place overlapped it for the rest of each pass (8.9 MB of misses a pass
    /// in the engine, until a re-profile). The next pass takes what the first took, and
    /// the slot the first request's miss named; the pass after it misses nothing.
    #[test]
    fn a_skip_belongs_to_the_first_request_missing_at_its_slot() {
        let (big, mid) = (1_605_632u64, 401_408u64);
        let one_time = [1024u64, 384, 1024, 384, 1024, 384, 1024, 384, 1520, 640];
        let moved = [8192u64, 765, 765];
        let head = [big, 602_112, 3456];
        let run_of_big = [big, big, big, big, mid, big, 36_864, mid, mid, mid];
        let sizes: Vec<u64> = head
            .iter()
            .chain(&one_time)
            .chain(&[big])
            .chain(&moved)
            .chain(&run_of_big)
            .copied()
            .collect();
        let requests: Vec<u64> = head
            .iter()
            .chain(&[big])
            .chain(&run_of_big)
            .copied()
            .collect();
        let p = plan(&sizes);
        let first = run(&p, &requests);
        let second = run_learned(&p, &requests, 0);
        for (i, took) in first.iter().enumerate() {
            if took.is_some() {
                assert_eq!(second[i], *took, "request {i}: {first:?}, then {second:?}");
            }
        }
        // The first request of the run took the first miss's candidate; the second, at
        // the slot after it, missed and named its own, which the third confirmed: a skip
        // for the pass after, which misses none.
        assert_eq!((second[3], second[4]), (Some(13), None), "{second:?}");
        let third = run_learned(&p, &requests, 0);
        assert!(third.iter().all(Option::is_some), "{third:?}");
    }

    /// A skip is a hint: a pass that stands where one was learned, with a request that
    /// matches the skip's slot but is an insertion, jumps, and the requests after it take
    /// the jump back (rule 2).
    #[test]
    fn a_wrong_skip_is_taken_back() {
        let p = plan(&[100, 200, 901, 902, 300, 400, 500, 600]);
        run(&p, &[100, 200, 300, 400]); // learns 2 -> 4
        let took = run_learned(&p, &[100, 200, 300, 901, 902, 300, 400, 500, 600], 0);
        assert_eq!(took[..5], [Some(0), Some(1), Some(4), Some(2), Some(3)]);
        assert_eq!(took.last(), Some(&Some(7)), "in step at the end: {took:?}");
    }

    /// The faulting pass of candle's MobileNetV4 at two request threads (one pass in
    /// thirty): the plan holds a first pass's one-time slots after its first few, the
    /// model's sequence repeats block after block, and a request that moves about from
    /// pass to pass (`x`, in the plan a few blocks on) came first in the lost run this
    /// time. The run's anchor then matched only the far place where the plan has `x`, and
    /// the rest of the pass took slots whole blocks ahead of its own. A far place one
    /// anchor finds is taken only once the next anchor agrees.
    #[test]
    fn an_insertion_in_the_anchor_does_not_jump_blocks_ahead() {
        let block: Vec<u64> = (1..=60u64).map(mixed_size).collect();
        let one_time: Vec<u64> = (100..130u64).map(mixed_size).collect();
        let (head, x) = ([4096u64, 2048, 512, 16, 32], 1520);
        let mut sizes: Vec<u64> = head.iter().chain(&one_time).copied().collect();
        let mut own = Vec::new(); // each block request's own slot
        for b in 0..10 {
            if b == 3 {
                sizes.push(x);
            }
            own.extend(sizes.len() as u32..(sizes.len() + block.len()) as u32);
            sizes.extend(&block);
        }
        let p = plan(&sizes);
        let mut requests = head.to_vec();
        requests.push(x);
        requests.extend(block.iter().cycle().take(own.len()));
        let took = run(&p, &requests);
        let right = took[head.len() + 1..]
            .iter()
            .zip(&own)
            .filter(|(t, own)| **t == Some(**own))
            .count();
        // Three searches' runs (a false place, the true one, the one agreeing with it),
        // and the requests that meanwhile took one-time slots of their size: before
        // agreement was required, none of the 600 took its own slot.
        assert!(
            right + 8 * ANCHOR >= own.len(),
            "{right} of {} block requests took their own slots",
            own.len()
        );
    }

    /// Why a request missed, for each kind of divergence.
    #[test]
    fn miss_reasons() {
        let p = plan(&[100, 200]);
        let mut shrink = Shrink::Off;
        let mut lost = Lost::default();
        let mut c = p.initial_cursors()[0];
        let size = 150;
        assert_eq!(
            take(&p, &mut c, size, (&mut shrink, &mut lost), at0()),
            Err(MissReason::TooLarge)
        );
        let mut c = p.initial_cursors()[0];
        assert_eq!(
            take(&p, &mut c, 5, (&mut shrink, &mut lost), at0()),
            Err(MissReason::Unplanned)
        );
        assert_eq!(c.next, 0, "nothing moved");
    }

    #[derive(Clone, Debug)]
    enum Edit {
        Insert(usize, u64),
        Delete(usize),
        Resize(usize, bool),
    }

    fn edits() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (any::<usize>(), 1u64..5000).prop_map(|(i, s)| Edit::Insert(i, s)),
            any::<usize>().prop_map(Edit::Delete),
            (any::<usize>(), any::<bool>()).prop_map(|(i, up)| Edit::Resize(i, up)),
        ]
    }

    /// Occupant words from values.
    fn words(values: &[u32]) -> Vec<AtomicU32> {
        values.iter().map(|&v| AtomicU32::new(v)).collect()
    }

    #[test]
    fn a_claim_sees_any_occupied_word() {
        for len in [1usize, 7, 8, 9, 24, 1000] {
            assert!(all_empty(&words(&vec![EMPTY; len])));
            for at in [0, len / 2, len - 1] {
                let mut v = vec![EMPTY; len];
                v[at] = 5;
                assert!(!all_empty(&words(&v)), "len {len}, word {at}");
            }
        }
    }

    /// Slot layouts for the hand-out property: small slots at 16-byte steps over 8 KiB (up
    /// to 512 groups), and large ones over hundreds of them (whole blocks of groups).
    fn layouts() -> impl Strategy<Value = Vec<(u64, u64)>> {
        let small = (0u64..512, 1u64..4).prop_map(|(at, len)| (at * 16, len * 16));
        let large = (0u64..512, 1u64..400).prop_map(|(at, len)| (at * 16, len * 64));
        prop::collection::vec(prop_oneof![3 => small, 1 => large], 1..160)
    }

    /// Hands out and frees slots of one instance as `ops` say, checking each hand-out
    /// against the byte ranges of the slots live (it succeeds exactly when none
    /// overlaps), and the live slots the instance reports after each step.
    fn hand_out_and_free(at: &[(u64, u64)], ops: &[(bool, usize)]) {
        let slabs = Slabs::new(plan_at(at), 1).unwrap();
        slabs.register();
        let inst = slabs.take().unwrap();
        // SAFETY: taken above; lives as long as `slabs`.
        let i = unsafe { &*inst };
        let overlap = |a: usize, b: usize| {
            let ((ao, asz), (bo, bsz)) = (at[a], at[b]);
            ao < bo + bsz && bo < ao + asz
        };
        let mut live: Vec<usize> = Vec::new();
        for &(hand_out, k) in ops {
            if hand_out || live.is_empty() {
                let s = k % at.len();
                let expected = !live.iter().any(|&l| overlap(l, s));
                assert_eq!(
                    claim(i, s as u32, &slabs.plan.slots[s]),
                    expected,
                    "slot {s} {:?} with live {live:?}",
                    at[s]
                );
                if expected {
                    live.push(s);
                }
            } else {
                let s = live.swap_remove(k % live.len());
                // SAFETY: slot `s` is live in `inst`, freed once.
                unsafe { free(inst.cast(), i.base().add(at[s].0 as usize)) };
            }
            let mut seen = i.live_slots();
            seen.sort_unstable();
            let mut want: Vec<u32> = live.iter().map(|&s| s as u32).collect();
            want.sort_unstable();
            assert_eq!(seen, want);
            assert_eq!(i.slots_live() || i.lanes_live(), !live.is_empty());
        }
        for s in live {
            // SAFETY: as above.
            unsafe { free(inst.cast(), i.base().add(at[s].0 as usize)) };
        }
        assert!(i
            .occupant
            .iter()
            .chain(i.spanning.iter())
            .all(|o| o.load(Ordering::Relaxed) == EMPTY));
        // SAFETY: taken above; the pass is over and nothing is live.
        unsafe { slabs.release(inst, false, false) };
        assert!(slabs.try_retire());
    }

    #[test]
    fn a_slot_over_whole_blocks_sees_and_is_seen_by_the_slots_inside() {
        // 300 groups of 16 bytes; slot 300 covers all of them (blocks 1-3 whole).
        let mut at: Vec<(u64, u64)> = (0..300).map(|g| (g * 16, 16)).collect();
        at.push((0, 300 * 16));
        at.push((70 * 16, 200 * 16)); // starts inside block 1, covers blocks 2-3 whole
        let big = 300;
        // A small slot inside a whole block refuses the big one, and the other way round.
        hand_out_and_free(
            &at,
            &[
                (true, 150),
                (true, big),
                (false, 0),
                (true, big),
                (true, 150),
            ],
        );
        // The second big one starts inside the first's whole block 1: refused, then not.
        hand_out_and_free(
            &at,
            &[
                (true, big),
                (true, big + 1),
                (false, 0),
                (true, big + 1),
                (true, 299),
            ],
        );
        // A slot starting at a block's first group, after a whole-block slot's tail.
        hand_out_and_free(
            &at,
            &[
                (true, big + 1),
                (true, 64),
                (true, 69),
                (true, 270),
                (true, 64 * 4),
            ],
        );
    }

    proptest! {
        #[test]
        fn a_hand_out_succeeds_exactly_when_no_live_slot_overlaps(
            at in layouts(),
            ops in prop::collection::vec((prop::bool::weighted(0.6), 0usize..1000), 1..200),
        ) {
            hand_out_and_free(&at, &ops);
        }
    }

    proptest! {
        // A fixed seed: an online alignment can be unlucky (of 100,000 random cases, 1
        // edited sequence exceeds 3k and 14 long-run cases their bound: `matcher_study`),
        // so the same 1,000 cases run every time; any regression of the matcher shows in
        // them.
        #![proptest_config(ProptestConfig {
            cases: 1000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x6d65_6d6f),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Runs of missing slots longer than the window, as a process's first pass leaves
        /// in its plan: each costs at most a few requests. (Sizes of a real pass's variety:
        /// 64 of them. Over a handful of sizes a long run is ambiguous: many places fit.)
        #[test]
        fn long_missing_runs_cost_a_bounded_number_of_matches(
            sizes in prop::collection::vec((1u64..=64).prop_map(|k| 16 * k), 200..1500),
            runs in prop::collection::vec((any::<usize>(), 17usize..200), 1..4),
        ) {
            let (hits, n, bound) = long_runs_case(&sizes, &runs);
            prop_assert!(hits + bound >= n, "{} of {} hit after {} runs", hits, n, runs.len());
        }

        /// A sequence of n requests with k random insertions, deletions and resizes: at
        /// least n - 3k requests take a slot of their own planned size (their own, or,
        /// inside a run of equal sizes, a neighbour: all the same to the matcher), a slot
        /// taken again counting as a miss (see [`once`]).
        #[test]
        fn each_divergence_costs_a_bounded_number_of_matches(
            // Sizes from a small alphabet: many repeats, as in real passes.
            sizes in prop::collection::vec(
                prop::sample::select(vec![16u64, 24, 64, 256, 1024, 4096, 65536]),
                1..300,
            ),
            edits in prop::collection::vec(edits(), 0..12),
        ) {
            let (right, n, k) = divergence_case(&sizes, &edits);
            prop_assert!(right + 3 * k >= n, "{} of {} matched after {} edits", right, n, k);
        }
    }

    /// [`long_missing_runs_cost_a_bounded_number_of_matches`]'s case: the requests that
    /// hit, the requests, and the bound on misses.
    fn long_runs_case(sizes: &[u64], runs: &[(usize, usize)]) -> (usize, usize, usize) {
        let p = plan(sizes);
        let mut keep = vec![true; sizes.len()];
        for &(at, len) in runs {
            let at = at % sizes.len();
            keep[at..(at + len).min(sizes.len())].fill(false);
        }
        let requests: Vec<u64> = (0..sizes.len())
            .filter(|&i| keep[i])
            .map(|i| sizes[i])
            .collect();
        let hits = once(run(&p, &requests)).iter().flatten().count();
        // Per run, two agreeing anchors' misses, and as many again for a false anchor.
        (hits, requests.len(), 4 * ANCHOR * runs.len())
    }

    /// [`each_divergence_costs_a_bounded_number_of_matches`]'s case: the requests that
    /// took a slot of their planned size, the slots, and the edits.
    fn divergence_case(sizes: &[u64], edits: &[Edit]) -> (usize, usize, usize) {
        let p = plan(sizes);
        // The requests: their size, and their planned size (none: inserted or grown).
        let mut requests: Vec<(u64, Option<u64>)> = sizes.iter().map(|&s| (s, Some(s))).collect();
        for e in edits {
            let n = requests.len();
            match *e {
                Edit::Insert(i, s) => requests.insert(i % (n + 1), (s, None)),
                Edit::Delete(i) if n > 0 => {
                    requests.remove(i % n);
                }
                Edit::Resize(i, up) if n > 0 => {
                    let r = &mut requests[i % n];
                    if up {
                        *r = (r.0 * 2 + 1, None); // cannot be served from its slot
                    } else {
                        r.0 = (r.0 / 3).max(1);
                    }
                }
                _ => {}
            }
        }
        let took = once(run(&p, &requests.iter().map(|r| r.0).collect::<Vec<_>>()));
        let right = requests
            .iter()
            .zip(&took)
            .filter(|(r, t)| {
                matches!((r.1, t), (Some(size), Some(i)) if p.slots[*i as usize].size == size)
            })
            .count();
        (right, sizes.len(), edits.len())
    }

    /// A study, run by hand: how often the two properties above fail over random cases
    /// (they run on a fixed seed):
    ///
    /// ```text
    /// MATCHER_CASES=20000 cargo test -p memo-alloc --release --lib matcher_study -- --ignored --nocapture
    /// ```
    #[test]
    #[ignore = "a study: run by hand (see the doc comment)"]
    fn matcher_study() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let cases: usize = std::env::var("MATCHER_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000);
        let mut runner = TestRunner::default();
        let long = (
            prop::collection::vec((1u64..=64).prop_map(|k| 16 * k), 200..1500),
            prop::collection::vec((any::<usize>(), 17usize..200), 1..4),
        );
        let over_long = (0..cases)
            .filter(|_| {
                let (sizes, runs) = long.new_tree(&mut runner).unwrap().current();
                let (hits, n, bound) = long_runs_case(&sizes, &runs);
                hits + bound < n
            })
            .count();
        let edited = (
            prop::collection::vec(
                prop::sample::select(vec![16u64, 24, 64, 256, 1024, 4096, 65536]),
                1..300,
            ),
            prop::collection::vec(edits(), 0..12),
        );
        let (mut over, mut worst) = (0, 0.0f64);
        for _ in 0..cases {
            let (sizes, edits) = edited.new_tree(&mut runner).unwrap().current();
            let (right, n, k) = divergence_case(&sizes, &edits);
            over += (right + 3 * k < n) as usize;
            worst = worst.max(n.saturating_sub(right) as f64 / k.max(1) as f64);
        }
        eprintln!(
            "matcher study: {cases} cases each; long missing runs over the bound: {over_long}; \
             edited sequences over 3 per edit: {over} (worst {worst:.1} per edit)"
        );
    }

    /// A real engine's pass (see `a_repeating_sequence_finds_its_own_block`): how many
    /// of its block requests took a slot of their own size, and how many there were.
    fn repeating(
        block: &[u64],
        one_time: &[u64],
        repeats: usize,
        planned_at: usize,
        moved_to: usize,
    ) -> (usize, usize) {
        let (head, x) = ([40_000u64, 20_000, 10_000], 1528);
        let mut sizes: Vec<u64> = head.iter().chain(one_time).copied().collect();
        let mut own = Vec::new();
        for b in 0..repeats {
            if b == planned_at % repeats {
                sizes.push(x);
            }
            own.extend(sizes.len() as u32..(sizes.len() + block.len()) as u32);
            sizes.extend(block);
        }
        let p = plan(&sizes);
        let mut requests: Vec<Option<u32>> = own.iter().map(|&o| Some(o)).collect();
        requests.insert(moved_to % (requests.len() + 1), None);
        let size_of = |r: &Option<u32>| r.map_or(x, |o| sizes[o as usize]);
        let all: Vec<u64> = head
            .iter()
            .copied()
            .chain(requests.iter().map(size_of))
            .collect();
        let took = once(run(&p, &all));
        let right = took[head.len()..]
            .iter()
            .zip(&requests)
            .filter(|(t, r)| matches!((t, r), (Some(t), Some(o)) if sizes[*t as usize] == sizes[*o as usize]))
            .count();
        (right, own.len())
    }

    /// A real engine's pass: a head, a first pass's one-time slots (planned, never made
    /// again), then a block of requests that repeats (a model's layers), with one request
    /// that moves from pass to pass (a thread pool's queue block). Every block request of
    /// a later pass but a bounded number takes a slot of its own size (its own, or the same
    /// request's of a neighbouring block), a slot taken again counting as a miss.
    ///
    /// Over 1,000 random passes (a fixed seed), as an online matcher can be unlucky:
    /// one-time slots can hold a stretch of a block's sizes, and a short block can make
    /// them look like one. About 1 pass in 1,000 loses more than the bound with one-time
    /// runs no longer than a block (2 without that limit); 9 in 1,000 did (12 without
    /// the limit) while two searches' places had to be equal to agree.
    #[test]
    fn a_repeating_sequence_finds_its_own_block() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let passes = (
            prop::sample::subsequence((1u64..=256).map(|k| 16 * k).collect::<Vec<_>>(), 16),
            prop::collection::vec(0usize..16, 20..120),
            prop::collection::vec(0usize..16, 17..60),
            4usize..12,
            any::<usize>(),
            any::<usize>(),
        );
        let mut runner = TestRunner::deterministic();
        let (mut over, mut worst) = (0, 0.0f64);
        for _ in 0..1000 {
            let (alphabet, block, one_time, repeats, planned_at, moved_to) =
                passes.new_tree(&mut runner).unwrap().current();
            let block: Vec<u64> = block.iter().map(|&i| alphabet[i]).collect();
            let one_time: Vec<u64> = one_time
                .iter()
                .take(block.len())
                .map(|&i| alphabet[i])
                .collect();
            let (right, own) = repeating(&block, &one_time, repeats, planned_at, moved_to);
            over += usize::from(right + 8 * ANCHOR < own);
            worst = worst.max((own - right) as f64 / own as f64);
        }
        assert!(
            over <= 3,
            "{over} of 1,000 passes lost more than {}",
            8 * ANCHOR
        );
        assert!(
            worst <= 0.5,
            "a pass lost {:.0}% of its block requests",
            100.0 * worst
        );
    }
}
