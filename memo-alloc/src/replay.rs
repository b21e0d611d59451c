//! The replay allocation path: slot lookup, the safety check and hand-out. No lock, no
//! system call, no allocation.

use std::alloc::Layout;

use crate::compile::{CompiledPlan, Slot, ESCAPING, PLANNED};
use crate::pass::{Pass, UNKNOWN};
use crate::region;
use crate::slab::EMPTY;
use crate::stats::MissReason;
use crate::sync::Ordering;

/// Tries to serve `layout` from the pass's slab; `Err` says why not.
///
/// # Safety
/// `pass` must be the calling thread's running replayed pass.
#[inline]
pub(crate) unsafe fn alloc(
    pass: &mut Pass,
    node: u32,
    layout: Layout,
) -> Result<*mut u8, MissReason> {
    if pass.inst.is_null() {
        return Err(MissReason::NoSlab);
    }
    if node == UNKNOWN {
        return Err(MissReason::Unplanned);
    }
    // SAFETY: the pass holds its plan and instance until it ends; `ordinals` is written
    // only by this thread, the instance's owner.
    let (plan, inst) = unsafe { (&*pass.plan, &*pass.inst) };
    // SAFETY: as above.
    let ordinals = unsafe { &mut *inst.ordinals.get() };
    let ordinal = match ordinals.get_mut(node as usize) {
        Some(o) => {
            let v = *o;
            *o = v + 1;
            v
        }
        None => return Err(MissReason::Unplanned),
    };
    let index = plan
        .slot_index(node, ordinal)
        .ok_or(MissReason::Unplanned)?;
    let slot = &plan.slots[index as usize];
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
    // Release: a free of this slot on another thread that observes... nothing; the pointer
    // reaches other threads only through the program's own synchronisation.
    inst.occupant[slot.group as usize].store(index, Ordering::Release);
    // SAFETY: `offset + size <= height`, and the instance spans `height` bytes from `base`.
    Ok(unsafe { pass.base.add(slot.offset as usize) })
}

/// Whether no live slot overlaps `slot`'s addresses: no group starting inside it is
/// occupied, and no occupant of a group starting below it reaches past its start.
#[inline]
fn is_free(plan: &CompiledPlan, occupant: &[crate::sync::AtomicU32], slot: &Slot) -> bool {
    // Acquire: a free on another thread happens-before we reuse its memory.
    for o in &occupant[slot.group as usize..slot.group_end as usize] {
        if o.load(Ordering::Acquire) != EMPTY {
            return false;
        }
    }
    for &g in plan.cover_of(slot.group) {
        let live = occupant[g as usize].load(Ordering::Acquire);
        if live != EMPTY {
            let s = &plan.slots[live as usize];
            if s.offset + s.size > slot.offset {
                return false;
            }
        }
    }
    true
}

/// The live slot of slab pointer `p`: its instance's occupant word and slot index.
///
/// # Safety
/// `p` must satisfy `region::contains` and be a pointer this allocator handed out and that
/// is not yet freed.
#[inline]
unsafe fn locate(p: *mut u8) -> Option<(&'static crate::sync::AtomicU32, &'static Slot)> {
    let inst = region::instance_of(p);
    if inst.is_null() {
        return None;
    }
    // SAFETY: an instance with a live slot is never freed (retirement waits for all its
    // occupants to be EMPTY), and `p` is live.
    let inst = unsafe { &*inst };
    // SAFETY: as above, the plan outlives its instances.
    let plan = unsafe { &*inst.plan };
    let group = plan.group_at((p as usize - inst.base as usize) as u64)?;
    let occ = &inst.occupant[group as usize];
    let live = occ.load(Ordering::Acquire);
    let slot = plan.slots.get(live as usize)?;
    Some((occ, slot))
}

/// Frees slab pointer `p`, from any thread.
///
/// # Safety
/// As [`locate`].
#[inline]
pub(crate) unsafe fn free(p: *mut u8) {
    // SAFETY: forwarded contract.
    if let Some((occ, _)) = unsafe { locate(p) } {
        // Release: the program's accesses to the slot happen-before its reuse.
        occ.store(EMPTY, Ordering::Release);
    }
}

/// The size of the slot behind live slab pointer `p` (how far it can grow in place).
///
/// # Safety
/// As [`locate`].
#[inline]
pub(crate) unsafe fn capacity(p: *mut u8) -> u64 {
    // SAFETY: forwarded contract.
    unsafe { locate(p) }.map_or(0, |(_, s)| s.size)
}
