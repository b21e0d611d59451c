//! Frees of slab pointers, from any thread, and what a realloc asks of one: its slot's
//! or cell's capacity, and the move of a lane chain to a larger cell. The other side of
//! the hand-out protocol of `hit.rs` (`claim`).

use std::alloc::Layout;

use crate::memory::lane_classes;
use crate::replay::replayer::Replayer;
use crate::replay::slab::compile::{CompiledPlan, BLOCK_SHIFT};
use crate::replay::slab::instance::{Instance, EMPTY};
use crate::support::sync::{AtomicU32, Ordering};

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
/// (A loop clearing from the first word on would read the word past the run after the
/// slot was seen free: the loom model `free_then_reclaim` fails so.)
///
/// # Safety
/// As [`slab_place`].
#[inline]
pub(crate) unsafe fn free(inst: *mut (), p: *mut u8) {
    // SAFETY: forwarded contract.
    unsafe { free_from(inst, p, || None) }
}

/// [`free`], from a thread whose replayed context, if it has one, `current` gives (asked
/// only for a lane cell): a cell of the instance that context hands out from is kept for
/// its next requests (`Replayer::freed`) instead of cleared.
///
/// # Safety
/// As [`free`]; the replay `current` returns is this thread's current context's, and no
/// other reference to it is live.
#[inline]
pub(crate) unsafe fn free_from<'r>(
    inst: *mut (),
    p: *mut u8,
    current: impl FnOnce() -> Option<&'r mut Replayer>,
) {
    // SAFETY: forwarded contract.
    let Some((inst, plan, place)) = (unsafe { slab_place(inst, p) }) else {
        return;
    };
    let offset = match place {
        Place::Slot(offset) => offset,
        Place::Cell(offset) => {
            match current() {
                Some(r) if std::ptr::eq(r.inst, inst) => {
                    r.freed.put(&inst.lanes, &plan.lanes, offset)
                }
                _ => inst.lanes.free(&plan.lanes, offset), // last: the instance may go after it
            }
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
/// as a full class borrows; one the context kept first), its bytes copied, the old cell
/// kept for the context. A profile counts the chain in that class from the realloc on
/// (see `lane_count.rs`). `None` when `p` is a slot or a cell of another instance, the
/// new size is past the lanes or no cell is free: the caller moves the chain to the
/// backend.
///
/// # Safety
/// As [`slab_place`] for `inst` and `p` (`layout` is `p`'s); `r` is the replay of this
/// thread's current context; `new_size` exceeds `p`'s [`capacity`].
pub(crate) unsafe fn lane_grow(
    r: &mut Replayer,
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
    if !std::ptr::eq(inst, r.inst) {
        return None;
    }
    let class = lane_classes::class_of(new_size as u64, layout.align() as u64, plan.lanes.max)?;
    let lanes = &plan.lanes;
    let to = (r.freed.take(lanes, class))
        .or_else(|| inst.lanes.alloc(lanes, class))
        .or_else(|| r.freed.take_above(lanes, class))
        .or_else(|| inst.lanes.alloc_above(lanes, class))?;
    debug_assert!(to + new_size as u64 <= plan.lanes.bytes && layout.size() < new_size);
    // SAFETY: the new cell lies in the instance's lane block, which the pass holds; it
    // was free, so it does not overlap `p`'s cell, whose first `layout.size()` bytes are
    // the program's.
    let new = unsafe {
        let new = r.lane_base.add(to as usize);
        std::ptr::copy_nonoverlapping(p, new, layout.size());
        new
    };
    r.freed.put(&inst.lanes, lanes, offset);
    Some(new)
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
