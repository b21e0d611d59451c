//! Serving a request of a replayed pass: the hit path first (the node's next slot
//! matches, its checks and the hand-out), then the lane path (a small request takes a cell
//! of its size class), then what lies off them: the general matching (`matching.rs`) with
//! the same checks, and undoing a request the backend failed too. No lock, no system
//! call, no allocation.

use std::alloc::Layout;

use crate::memory::lane_classes;
use crate::replay::matching::take;
use crate::replay::replayer::{ReplayContext, Replayer};
use crate::replay::slab::compile::{whole_blocks, CompiledPlan, Slot, BLOCK_SHIFT, PLANNED};
use crate::replay::slab::instance::{Instance, EMPTY};
use crate::replay::state::{At, NO_SLOT};
use crate::stats::MissReason;
use crate::support::sync::{AtomicU32, Ordering};

/// Tries to serve `layout` from the slab instance of context `c`. On a miss, the cursor
/// as it was before the request is saved in its replay (for [`undo`]).
///
/// # Safety
/// `c` is the calling thread's current context, replaying with a slab instance.
#[inline]
pub(crate) unsafe fn alloc<C: ReplayContext>(
    c: &mut C,
    layout: Layout,
) -> Result<*mut u8, MissReason> {
    let r = c.replayer();
    // A context without a slab runs on the counted backend path instead.
    debug_assert!(!r.inst.is_null() && !r.plan.is_null());
    // SAFETY: the pass holds its plan and instance until it ends.
    let (plan, inst) = unsafe { (&*r.plan, &*r.inst) };
    // `UNKNOWN` (an op the plan does not know) is past every node: no cursor, unplanned.
    let node = c.node();
    let size = layout.size() as u64;
    if let Some(class) = lane_classes::class_of(size, layout.align() as u64, plan.lanes.max) {
        return lane_alloc(c, plan, inst, class, size);
    }
    c.replayer()
        .signature
        .note_large(size, layout.align() as u64);
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
            if !slot.matches(size) {
                return None;
            }
            c.next = next + 1;
            c.pending = NO_SLOT;
            Some((next, slot))
        })
    };
    let Some((index, slot)) = fast else {
        // SAFETY: forwarded.
        return unsafe { resync(c, layout) };
    };
    debug_assert!(layout.size() as u64 <= slot.size);
    if slot.flags.load(Ordering::Relaxed) != PLANNED {
        return missed(c, index, MissReason::Escaping); // escaped, or demoted
    }
    if layout.align() as u64 > slot.max_align() {
        return missed(c, index, MissReason::Alignment);
    }
    if !claim(inst, index, slot) {
        return missed(c, index, MissReason::Overlap);
    }
    debug_assert!(slot.offset + layout.size() as u64 <= plan.height);
    // SAFETY: `offset + size <= height`, and the instance spans `height` bytes from `base`.
    Ok(unsafe { c.replayer().base.add(slot.offset as usize) })
}

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
    if !slot.spans_blocks {
        debug_assert!(whole_blocks(slot.group, slot.group_end).is_empty());
        words.iter().for_each(store); // nearly every slot
        return true;
    }
    let whole = whole_blocks(slot.group, slot.group_end);
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

/// The block word of group `group`'s block.
#[inline(always)]
fn block_of(spanning: &[AtomicU32], group: usize) -> &AtomicU32 {
    debug_assert!(group >> BLOCK_SHIFT < spanning.len());
    // SAFETY: `group` is a group of the plan (`covered`'s assertion), and there is a
    // block word for each block of groups (`instance::blocks_of`).
    unsafe { spanning.get_unchecked(group >> BLOCK_SHIFT) }
}

/// Words a hand-out checks together: one branch per chunk. Most slots cover a word or
/// two, but the few over hundreds of groups hold most of the words: in a plan of large
/// tensors placed over a region of small ones, a few per cent of the slots can cover tens
/// of thousands of groups each.
const CHUNK: usize = 8;

/// Whether every word is [`EMPTY`] (each loaded with Acquire). `EMPTY` is all ones, so a
/// chunk is all empty exactly when the AND of its words is.
#[inline(always)]
pub(super) fn all_empty(words: &[AtomicU32]) -> bool {
    const { assert!(EMPTY == u32::MAX) };
    let empty = |o: &AtomicU32| o.load(Ordering::Acquire) == EMPTY;
    if words.len() < CHUNK {
        return words.iter().all(empty); // most slots: a load or two
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

/// A slot taken on the hit path failed its checks: used up, unless the backend fails the
/// request too (then it is given back; a dropped candidate stays dropped).
#[cold]
#[inline(never)]
fn missed<C: ReplayContext>(
    c: &mut C,
    index: u32,
    reason: MissReason,
) -> Result<*mut u8, MissReason> {
    let node = c.node();
    c.replayer().undo = (node, index, NO_SLOT);
    Err(reason)
}

/// A lane request: a free cell of its class (else see [`lane_borrow`]), unless the
/// profile saw the node's request of this count escape (see [`lane_escape`]).
#[inline]
fn lane_alloc<C: ReplayContext>(
    c: &mut C,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
) -> Result<*mut u8, MissReason> {
    if !plan.lists_lane_escapes() {
        return lane_cell(c, plan, inst, class, size);
    }
    let node = c.node();
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
        return lane_escape(c, plan, inst, class, size, ordinal);
    }
    lane_cell(c, plan, inst, class, size)
}

/// A free cell of class `class`: one the context kept (see `Replayer::freed`), else one
/// of the bitmap, else see [`lane_borrow`].
#[inline(always)]
fn lane_cell<C: ReplayContext>(
    c: &mut C,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
) -> Result<*mut u8, MissReason> {
    // A cell this context freed itself first: no bitmap access, and likely still cached.
    if let Some(offset) = c.replayer().freed.take(&plan.lanes, class) {
        return lane_hit(c, plan, offset, size);
    }
    let Some(offset) = inst.lanes.alloc(&plan.lanes, class) else {
        return lane_borrow(c, plan, inst, class, size);
    };
    lane_hit(c, plan, offset, size)
}

/// Hands out the lane cell at `offset`, taken for a request of `size` bytes.
#[inline(always)]
fn lane_hit<C: ReplayContext>(
    c: &mut C,
    plan: &CompiledPlan,
    offset: u64,
    size: u64,
) -> Result<*mut u8, MissReason> {
    debug_assert!(offset + size <= plan.lanes.bytes && size <= plan.lanes.cell_size_at(offset));
    c.counters().lane_hits += 1;
    // SAFETY: the cell lies in the instance's lane block, which the pass holds.
    Ok(unsafe { c.replayer().lane_base.add(offset as usize) })
}

/// A lane request the profile saw escape (the node's `ordinal`-th): served by the
/// backend if its class is the profile's, else (the pass went another way) a cell as
/// usual. The node's cursor moves on to its next escaping request.
#[cold]
#[inline(never)]
fn lane_escape<C: ReplayContext>(
    c: &mut C,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
    ordinal: u32,
) -> Result<*mut u8, MissReason> {
    let node = c.node();
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
        c.replayer().undo = (node, LANE_COUNTED, ordinal);
        return Err(MissReason::Escaping);
    }
    lane_cell(c, plan, inst, class, size)
}

/// A lane request whose class is full: a free cell of the smallest class above it with
/// one (kept by the context, else of the bitmap), or an overlap miss when every cell of
/// those is live too (the pass holds more than its profiles did).
#[cold]
#[inline(never)]
fn lane_borrow<C: ReplayContext>(
    c: &mut C,
    plan: &CompiledPlan,
    inst: &Instance,
    class: usize,
    size: u64,
) -> Result<*mut u8, MissReason> {
    let kept = c.replayer().freed.take_above(&plan.lanes, class);
    let Some(offset) = kept.or_else(|| inst.lanes.alloc_above(&plan.lanes, class)) else {
        // Its node counted it if the plan lists escapes (see `lane_alloc`).
        let counted = if plan.lists_lane_escapes() {
            LANE_COUNTED
        } else {
            NO_SLOT
        };
        let node = c.node();
        c.replayer().undo = (node, counted, NO_SLOT);
        return Err(MissReason::Overlap);
    };
    lane_hit(c, plan, offset, size)
}

/// [`alloc`] off the hit path: the general matching (`matching.rs`), then the checks.
///
/// # Safety
/// As [`alloc`].
#[cold]
#[inline(never)]
unsafe fn resync<C: ReplayContext>(c: &mut C, layout: Layout) -> Result<*mut u8, MissReason> {
    let node = c.node();
    let counters = c.counters();
    let hits = counters.slab_hits - counters.lane_hits;
    let request = hits + counters.missed();
    let r = c.replayer();
    // SAFETY: the pass holds its plan and instance until it ends.
    let (plan, inst) = unsafe { (&*r.plan, &*r.inst) };
    // SAFETY: the cursors are written only by this thread, the instance's owner.
    let (taken, before) = unsafe {
        inst.cursors
            .with_mut(|cursors| match cursors.get_mut(node as usize) {
                Some(cursor) => {
                    let before = (cursor.next, cursor.pending);
                    let size = layout.size() as u64;
                    let at = At {
                        node,
                        hits,
                        request,
                        lane_max: plan.lanes.max,
                    };
                    (
                        take(plan, cursor, size, (&mut r.shrink, &mut r.lost), at),
                        before,
                    )
                }
                None => (Err(MissReason::Unplanned), (NO_SLOT, NO_SLOT)),
            })
    };
    let base = r.base;
    let checked = taken.and_then(|index| {
        // SAFETY: `take` returns slots of the cursor's range, inside the slot table.
        let slot = unsafe { plan.slots.get_unchecked(index as usize) };
        check_and_claim(plan, inst, index, slot, layout)
            // SAFETY: as in `alloc`.
            .map(|()| unsafe { base.add(slot.offset as usize) })
    });
    match (&taken, &checked) {
        (_, Err(_)) => r.undo = (node, before.0, before.1),
        // Re-synchronised past planned slots the program did not allocate this time.
        (Ok(index), Ok(_)) => c.counters().skipped += index.saturating_sub(before.0) as u64,
        _ => {}
    }
    checked
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

/// Gives back what a failed request used up or moved: the backend could not serve it
/// either, so the program saw a failed allocation, which its profile never recorded.
///
/// # Safety
/// As [`alloc`], right after it returned a miss for the same context.
pub(crate) unsafe fn undo(r: &mut Replayer) {
    let (node, next, pending) = r.undo;
    if next == NO_SLOT {
        return; // nothing moved
    }
    // SAFETY: the caller's contract; only this thread writes the cursors.
    unsafe {
        (*r.inst).cursors.with_mut(|cursors| {
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
