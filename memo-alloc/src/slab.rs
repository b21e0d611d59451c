//! Slab instances and the per-plan pool.
//!
//! One instance serves one running pass at a time: it is taken at pass start and put back
//! at pass end. Its mutable state is split by writer:
//! - `occupant[g]` (one atomic word per address group): the live slot starting at group
//!   `g`'s offset, or `EMPTY`. The pass's thread stores a slot when it hands it out; the
//!   thread that frees the pointer (any thread) stores `EMPTY`. Both are plain atomic
//!   stores, ordered by the program's own hand-off of the pointer; no read-modify-write.
//! - slot cursors and scope occurrences: written only by the pass's thread while it holds the
//!   instance.
//!
//! An instance whose slots are still live when its pass ends stays in the pool but is
//! skipped at pass start until every occupant is `EMPTY` again.

use std::cell::UnsafeCell;
use std::ptr;

use crate::compile::CompiledPlan;
use crate::region;
use crate::sync::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering, SpinLock};

/// No slot is live at this group.
pub(crate) const EMPTY: u32 = u32::MAX;

const FREE: u32 = 0;
const IN_USE: u32 = 1;
const DEAD: u32 = 2;

/// Most instances of one plan (concurrent passes of one key beyond this run on the backend).
pub(crate) const MAX_INSTANCES: usize = 256;

/// One slab and its replay state.
pub(crate) struct Instance {
    pub(crate) plan: *const CompiledPlan,
    pub(crate) base: *mut u8,
    bytes: u64,
    state: AtomicU32,
    may_have_live: AtomicBool,
    pub(crate) occupant: Box<[AtomicU32]>,
    /// Owner-only: per scope node, its next slot and the end of its slots (the node's
    /// ordinals, as slot indices).
    pub(crate) cursors: UnsafeCell<Box<[(u32, u32)]>>,
    /// Owner-only: entries so far of each `(parent, name)` group, at its base node.
    pub(crate) occurrences: UnsafeCell<Box<[u32]>>,
}

impl Instance {
    /// Whether any slot of the instance is live (a snapshot).
    pub(crate) fn any_live(&self) -> bool {
        self.occupant
            .iter()
            .any(|o| o.load(Ordering::Acquire) != EMPTY)
    }
}

/// A compiled plan and its pool of slab instances.
pub(crate) struct Slabs {
    pub(crate) plan: CompiledPlan,
    instances: [AtomicPtr<Instance>; MAX_INSTANCES],
    count: AtomicUsize,
    grow: SpinLock,
    /// Passes currently holding an instance.
    pub(crate) active: AtomicU32,
}

impl Slabs {
    pub(crate) fn new(plan: CompiledPlan) -> Slabs {
        Slabs {
            plan,
            instances: [const { AtomicPtr::new(ptr::null_mut()) }; MAX_INSTANCES],
            count: AtomicUsize::new(0),
            grow: SpinLock::new(),
            active: AtomicU32::new(0),
        }
    }

    /// Number of instances created (the peak number of concurrent passes).
    pub(crate) fn instances(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Takes a free, drained instance, creating one if none is; `None` when the pool is
    /// full or no address space is left. Runs at pass start with the re-entrancy guard set.
    pub(crate) fn acquire(&self) -> Option<*mut Instance> {
        if let Some(i) = self.take_existing() {
            return Some(i);
        }
        let _g = self.grow.lock();
        if let Some(i) = self.take_existing() {
            return Some(i);
        }
        let n = self.count.load(Ordering::Acquire);
        if n >= MAX_INSTANCES {
            return None;
        }
        let inst = Box::into_raw(Box::new(Instance {
            plan: &self.plan,
            base: ptr::null_mut(),
            bytes: self.plan.height,
            state: AtomicU32::new(IN_USE),
            may_have_live: AtomicBool::new(false),
            occupant: (0..self.plan.groups())
                .map(|_| AtomicU32::new(EMPTY))
                .collect(),
            cursors: UnsafeCell::new(self.plan.slot_ranges().into()),
            occurrences: UnsafeCell::new(vec![0; self.plan.nodes()].into_boxed_slice()),
        }));
        let Some(base) = region::carve(self.plan.height, inst) else {
            // SAFETY: `inst` was just created by Box::into_raw and never shared.
            drop(unsafe { Box::from_raw(inst) });
            return None;
        };
        // SAFETY: not yet published; only this thread sees `inst`.
        unsafe { (*inst).base = base };
        self.instances[n].store(inst, Ordering::Release);
        self.count.store(n + 1, Ordering::Release);
        self.active.fetch_add(1, Ordering::AcqRel);
        Some(inst)
    }

    fn take_existing(&self) -> Option<*mut Instance> {
        let n = self.count.load(Ordering::Acquire);
        for slot in &self.instances[..n] {
            let inst = slot.load(Ordering::Acquire);
            // SAFETY: published instances live as long as their `Slabs`.
            let i = unsafe { &*inst };
            if i.state
                .compare_exchange(FREE, IN_USE, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            if i.may_have_live.load(Ordering::Acquire) {
                if i.any_live() {
                    i.state.store(FREE, Ordering::Release);
                    continue;
                }
                i.may_have_live.store(false, Ordering::Relaxed);
            }
            // SAFETY: IN_USE was won by this thread: it is the only writer of the
            // owner-only arrays until it releases the instance.
            unsafe {
                (*i.cursors.get()).copy_from_slice(self.plan.slot_ranges());
                (*i.occurrences.get()).fill(0);
            }
            self.active.fetch_add(1, Ordering::AcqRel);
            return Some(inst);
        }
        None
    }

    /// Puts an instance back at pass end.
    pub(crate) fn release(&self, inst: *mut Instance) {
        // SAFETY: `inst` was acquired from this pool and is still published.
        let i = unsafe { &*inst };
        if i.any_live() {
            i.may_have_live.store(true, Ordering::Release);
        }
        i.state.store(FREE, Ordering::Release);
        self.active.fetch_sub(1, Ordering::AcqRel);
    }

    /// Bytes of this plan's slabs resident in memory, measured with `mincore` (pages that
    /// were touched and not returned). Runs at pass boundaries or in `stats()`, never on the
    /// allocation path.
    pub(crate) fn resident_bytes(&self) -> u64 {
        let n = self.count.load(Ordering::Acquire);
        let page = 4096usize;
        let mut total = 0u64;
        let mut vec: Vec<u8> = Vec::new();
        for slot in &self.instances[..n] {
            // SAFETY: published instances live as long as their `Slabs`.
            let i = unsafe { &*slot.load(Ordering::Acquire) };
            let len = (self.plan.height as usize).div_ceil(page).max(1) * page;
            vec.clear();
            vec.resize(len / page, 0);
            // SAFETY: `base..base + len` lies inside the instance's chunks (heights are
            // rounded up to whole chunks when carved); mincore only reads page residency.
            let rc = unsafe { libc::mincore(i.base.cast(), len, vec.as_mut_ptr()) };
            if rc == 0 {
                total += vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page as u64;
            }
        }
        total
    }

    /// Marks every idle, drained instance dead and returns its memory; `true` when all are
    /// dead (the `Slabs` may then be freed).
    pub(crate) fn try_retire(&self) -> bool {
        let n = self.count.load(Ordering::Acquire);
        let mut all = true;
        for slot in &self.instances[..n] {
            // SAFETY: published instances live as long as their `Slabs`.
            let i = unsafe { &*slot.load(Ordering::Acquire) };
            if i.state.load(Ordering::Acquire) == DEAD {
                continue;
            }
            if i.state
                .compare_exchange(FREE, DEAD, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                all = false;
                continue;
            }
            if i.any_live() {
                i.state.store(FREE, Ordering::Release);
                all = false;
                continue;
            }
            region::release(i.base, i.bytes);
        }
        all
    }
}

impl Drop for Slabs {
    fn drop(&mut self) {
        let n = *self.count.get_mut();
        for slot in &mut self.instances[..n] {
            let inst = *slot.get_mut();
            if !inst.is_null() {
                // SAFETY: `drop` runs only after `try_retire` returned true, so no pass
                // holds the instance, none of its slots is live, and its chunks were
                // released (the directory no longer points to it).
                drop(unsafe { Box::from_raw(inst) });
            }
        }
    }
}
