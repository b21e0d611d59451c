//! The replay allocation path: slot lookup, the safety check and hand-out. No lock, no
//! system call, no allocation.

use std::alloc::Layout;

use crate::compile::{CompiledPlan, Slot, ESCAPING, PLANNED};
use crate::pass::{Pass, UNKNOWN};
use crate::slab::{Instance, EMPTY};
use crate::stats::MissReason;
use crate::sync::{AtomicU32, Ordering};

/// Tries to serve `layout` from the pass's slab; `Err` says why not.
///
/// # Safety
/// `pass` must be the calling thread's running replayed pass.
#[inline]
pub(crate) unsafe fn alloc(pass: &mut Pass, layout: Layout) -> Result<*mut u8, MissReason> {
    if pass.inst.is_null() {
        return Err(MissReason::NoSlab);
    }
    let node = pass.node;
    if node == UNKNOWN {
        return Err(MissReason::Unplanned);
    }
    // SAFETY: the pass holds its plan and instance until it ends; the cursors are written
    // only by this thread, the instance's owner.
    let (plan, inst) = unsafe { (&*pass.plan, &*pass.inst) };
    // SAFETY: as above.
    let cursors = unsafe { &mut *inst.cursors.get() };
    // The node's next ordinal, as a slot index; every allocation uses one up, served or not.
    let cursor = cursors
        .get_mut(node as usize)
        .ok_or(MissReason::Unplanned)?;
    let index = cursor.0;
    if index >= cursor.1 {
        return Err(MissReason::Unplanned);
    }
    cursor.0 = index + 1;
    let slot = plan
        .slots
        .get(index as usize)
        .ok_or(MissReason::Unplanned)?;
    if slot.flags != PLANNED {
        return Err(if slot.flags == ESCAPING {
            MissReason::Escaping
        } else {
            MissReason::Unplanned
        });
    }
    if layout.size() as u64 > slot.size {
        return Err(MissReason::TooLarge);
    }
    if layout.align() as u64 > slot.max_align {
        return Err(MissReason::Alignment);
    }
    if !is_free(plan, &inst.occupant, slot) {
        return Err(MissReason::Overlap);
    }
    // Release pairs with nothing on the hand-out side; it keeps the occupant's store after
    // the checks above in the eyes of a thread that later frees the pointer.
    inst.occupant[slot.group as usize].store(index, Ordering::Release);
    // SAFETY: `offset + size <= height`, and the instance spans `height` bytes from `base`.
    Ok(unsafe { pass.base.add(slot.offset as usize) })
}

/// Whether no live slot overlaps `slot`'s addresses: no group starting inside it is
/// occupied, and no occupant of a group starting below it reaches past its start.
#[inline]
fn is_free(plan: &CompiledPlan, occupant: &[AtomicU32], slot: &Slot) -> bool {
    let inside = occupant
        .get(slot.group as usize..slot.group_end as usize)
        .unwrap_or(&[]);
    // Acquire: a free on another thread happens-before we reuse its memory.
    if inside.iter().any(|o| o.load(Ordering::Acquire) != EMPTY) {
        return false;
    }
    plan.cover_of_slot(slot).iter().all(|&g| {
        let live = occupant
            .get(g as usize)
            .map_or(EMPTY, |o| o.load(Ordering::Acquire));
        live == EMPTY
            || plan
                .slots
                .get(live as usize)
                .is_none_or(|s| s.offset + s.size <= slot.offset)
    })
}

/// The occupant word of the group slab pointer `p` starts, and the instance's plan.
///
/// # Safety
/// `inst` must be `crate::region::lookup(p)` for a live pointer `p` this allocator handed out.
#[inline(always)]
unsafe fn group_of(
    inst: *mut Instance,
    p: *mut u8,
) -> Option<(&'static AtomicU32, &'static CompiledPlan)> {
    if inst.is_null() {
        return None;
    }
    // SAFETY: an instance with a live slot is never freed (retirement waits for all its
    // occupants to be EMPTY), and `p` is live; the plan outlives its instances.
    let (inst, plan) = unsafe { (&*inst, &*(*inst).plan) };
    let group = plan.group_at((p as usize - inst.base as usize) as u64)?;
    Some((inst.occupant.get(group as usize)?, plan))
}

/// Frees slab pointer `p` of instance `inst`, from any thread.
///
/// # Safety
/// As [`group_of`].
#[inline]
pub(crate) unsafe fn free(inst: *mut Instance, p: *mut u8) {
    // SAFETY: forwarded contract.
    if let Some((occ, _)) = unsafe { group_of(inst, p) } {
        // Release: the program's accesses to the slot happen-before its reuse.
        occ.store(EMPTY, Ordering::Release);
    }
}

/// The size of the slot behind live slab pointer `p` (how far it can grow in place).
///
/// # Safety
/// As [`group_of`].
#[inline]
pub(crate) unsafe fn capacity(inst: *mut Instance, p: *mut u8) -> u64 {
    // SAFETY: forwarded contract.
    let Some((occ, plan)) = (unsafe { group_of(inst, p) }) else {
        return 0;
    };
    let live = occ.load(Ordering::Acquire);
    plan.slots.get(live as usize).map_or(0, |s| s.size)
}
