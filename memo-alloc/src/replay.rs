//! The replay allocation path: slot lookup, the safety check and hand-out, and frees of
//! slab pointers. No lock, no system call, no allocation.

use std::alloc::Layout;

use crate::compile::{CompiledPlan, Slot, PLANNED};
use crate::pass::Pass;
use crate::slab::{Instance, EMPTY};
use crate::stats::MissReason;
use crate::sync::{AtomicU32, Ordering};

/// Why a request was not served from the slab, and the slot it used up, if any (a slot
/// is used up by the request that reaches it, served or not, unless the backend then
/// fails the request too: see [`undo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Miss {
    pub(crate) reason: MissReason,
    /// The slot index the node's cursor stood at before the request; `NO_SLOT` if the
    /// request moved no cursor.
    slot: u32,
}

const NO_SLOT: u32 = u32::MAX;

impl Miss {
    fn new(reason: MissReason) -> Miss {
        Miss {
            reason,
            slot: NO_SLOT,
        }
    }

    fn at(reason: MissReason, slot: u32) -> Miss {
        Miss { reason, slot }
    }
}

/// Tries to serve `layout` from the pass's slab.
///
/// # Safety
/// `pass` must be the calling thread's running replayed pass.
#[inline]
pub(crate) unsafe fn alloc(pass: &mut Pass, layout: Layout) -> Result<*mut u8, Miss> {
    // A pass without a slab runs on the counted backend path instead (see `lifecycle`).
    debug_assert!(!pass.inst.is_null() && !pass.plan.is_null());
    // `UNKNOWN` (an op the plan does not know) is past every node: no cursor, unplanned.
    let node = pass.node;
    // SAFETY: the pass holds its plan and instance until it ends.
    let (plan, inst) = unsafe { (&*pass.plan, &*pass.inst) };
    // The node's next ordinal, as a slot index; every allocation uses one up, served or not.
    // SAFETY: the cursors are written only by this thread, the instance's owner.
    let index = unsafe {
        inst.cursors.with_mut(|cursors| {
            let cursor = cursors.get_mut(node as usize)?;
            let index = cursor.0;
            if index >= cursor.1 {
                return None;
            }
            cursor.0 = index + 1;
            Some(index)
        })
    }
    .ok_or(Miss::new(MissReason::Unplanned))?;
    // Cursor ranges partition the slot table (compile), so `index` is in it.
    debug_assert!((index as usize) < plan.slots.len());
    // SAFETY: as just asserted.
    let slot = unsafe { plan.slots.get_unchecked(index as usize) };
    let flags = slot.flags.load(Ordering::Relaxed);
    if flags != PLANNED {
        // No allocation had this key (0), it escaped the profile, or it was demoted.
        let reason = if flags == 0 {
            MissReason::Unplanned
        } else {
            MissReason::Escaping
        };
        return Err(Miss::at(reason, index));
    }
    if layout.size() as u64 > slot.size {
        return Err(Miss::at(MissReason::TooLarge, index));
    }
    if layout.align() as u64 > slot.max_align {
        return Err(Miss::at(MissReason::Alignment, index));
    }
    if !claim(plan, inst, index, slot) {
        return Err(Miss::at(MissReason::Overlap, index));
    }
    debug_assert!(slot.offset + layout.size() as u64 <= plan.height);
    // SAFETY: `offset + size <= height`, and the instance spans `height` bytes from `base`.
    Ok(unsafe { pass.base.add(slot.offset as usize) })
}

/// Gives back the slot a failed request used up: the backend could not serve it either,
/// so the program saw a failed allocation, which its profile never recorded.
///
/// # Safety
/// As [`alloc`], right after it returned `miss` for the same pass and node.
pub(crate) unsafe fn undo(pass: &mut Pass, miss: Miss) {
    if miss.slot == NO_SLOT || pass.inst.is_null() {
        return;
    }
    let node = pass.node as usize;
    // SAFETY: the caller's contract; only this thread writes the cursors.
    unsafe {
        (*pass.inst).cursors.with_mut(|cursors| {
            if let Some(c) = cursors.get_mut(node) {
                debug_assert_eq!(c.0, miss.slot + 1, "undo follows its miss");
                c.0 = miss.slot;
            }
        })
    };
}

/// Hands slot `index` of `inst` out if no live slot overlaps its addresses: the check and
/// the occupant store of the owner's side of the hand-off protocol (see `slab`).
#[inline]
pub(crate) fn claim(plan: &CompiledPlan, inst: &Instance, index: u32, slot: &Slot) -> bool {
    if !is_free(plan, &inst.occupant, slot) {
        return false;
    }
    // An in-slab slot's group indexes the occupant words (compile; one word per group).
    debug_assert!((slot.group as usize) < inst.occupant.len());
    // SAFETY: as just asserted.
    let occupant = unsafe { inst.occupant.get_unchecked(slot.group as usize) };
    // Release pairs with nothing on the hand-out side; it keeps the occupant's store after
    // the checks above in the eyes of a thread that later frees the pointer.
    occupant.store(index, Ordering::Release);
    true
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
/// `inst` must be the owner `crate::region::lookup(p)` returned for a live pointer `p`
/// this allocator handed out.
#[inline(always)]
unsafe fn group_of(
    inst: *mut (),
    p: *mut u8,
) -> Option<(&'static AtomicU32, &'static CompiledPlan)> {
    let inst = inst.cast::<Instance>();
    if inst.is_null() {
        return None;
    }
    // SAFETY: an instance with a live slot is never freed (retirement waits for all its
    // occupants to be EMPTY), and `p` is live; the plan outlives its instances.
    let (inst, plan) = unsafe { (&*inst, &*(*inst).plan) };
    let group = plan.group_at((p as usize - inst.base as usize) as u64)?;
    Some((inst.occupant.get(group as usize)?, plan))
}

/// Frees slab pointer `p` owned by `inst`, from any thread.
///
/// # Safety
/// As [`group_of`].
#[inline]
pub(crate) unsafe fn free(inst: *mut (), p: *mut u8) {
    // SAFETY: forwarded contract.
    if let Some((occ, _)) = unsafe { group_of(inst, p) } {
        debug_assert_ne!(
            occ.load(Ordering::Relaxed),
            EMPTY,
            "double free of a slab pointer"
        );
        // Release: the program's accesses to the slot happen-before its reuse.
        occ.store(EMPTY, Ordering::Release);
    }
}

/// The size of the slot behind live slab pointer `p` (how far it can grow in place).
///
/// # Safety
/// As [`group_of`].
#[inline]
pub(crate) unsafe fn capacity(inst: *mut (), p: *mut u8) -> u64 {
    // SAFETY: forwarded contract.
    let Some((occ, plan)) = (unsafe { group_of(inst, p) }) else {
        return 0;
    };
    let live = occ.load(Ordering::Acquire);
    plan.slots.get(live as usize).map_or(0, |s| s.size)
}
