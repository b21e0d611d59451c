//! One slab instance: the memory and the state one running pass replays from.
//!
//! Its mutable state is split by writer:
//! - `occupant[g]` (one atomic word per address group): the live slot covering group
//!   `g`, or `EMPTY`; and `spanning[b]` (one word per block of [`BLOCK_SHIFT`]-sized runs
//!   of groups): the live slot covering all of block `b` from an earlier block. The thread
//!   of the slot's context stores the slot in the words of the groups it covers, the
//!   blocks it covers whole in their block word instead (see `replay::hit::claim`), when it
//!   hands it out; the thread that frees the pointer (any thread) stores `EMPTY` in the
//!   same words. All are plain atomic stores, ordered by the program's own hand-off of the
//!   pointer; no read-modify-write.
//! - the lane cells' bitmap (`cells.rs`): set by a hand-out, cleared by a free.
//! - slot cursors and scope occurrences: written only by the pass's thread while it holds
//!   the instance.
//!
//! Memory: an instance holds two blocks of chunks (`memory::blocks`): its slots' block
//! while it is in use and while any slot of it is live, and its lane block while it is in
//! use and while any cell of it is live. Who holds it, and when it gives its blocks back,
//! is the pool's (`pool.rs`).

use std::ptr;

use crate::memory::blocks::{self, Block, Fit};
use crate::replay::slab::cells::LaneCells;
use crate::replay::slab::compile::{CompiledPlan, BLOCK_SHIFT};
use crate::replay::state::Cursor;
use crate::support::fallible::{try_box, try_boxed_slice};
use crate::support::sync::{AtomicBool, AtomicPtr, AtomicU32, Ordering, OwnerCell};

/// No slot is live at this group.
pub(crate) const EMPTY: u32 = u32::MAX;

pub(super) const FREE: u32 = 0;
pub(super) const IN_USE: u32 = 1;
pub(super) const DEAD: u32 = 2;

/// A block of chunks an instance holds (or not), and its base for the threads that free
/// into it.
struct Held {
    /// The block's base (null: none held). Written by the instance's owner while nothing
    /// in the block is live; read by any thread freeing into it (ordered by the pointer's
    /// own hand-off, see the module documentation).
    base: AtomicPtr<u8>,
    /// Owner-only (and `try_retire`'s, once it won `DEAD`): the block held.
    block: OwnerCell<Option<Block>>,
}

impl Held {
    fn new() -> Held {
        Held {
            base: AtomicPtr::new(ptr::null_mut()),
            block: OwnerCell::new(None),
        }
    }

    #[inline(always)]
    fn base(&self) -> *mut u8 {
        self.base.load(Ordering::Relaxed)
    }

    /// Takes a block of at least `bytes` (`fit` among the idle ones) for `owner` if none
    /// is held and `bytes > 0`; `false` when memory ran out.
    ///
    /// # Safety
    /// The caller owns the instance; `locked`: it holds `region::LOCK`.
    unsafe fn ensure(&self, bytes: u64, fit: Fit, owner: *mut (), locked: bool) -> bool {
        // SAFETY: owned by the caller.
        if bytes == 0 || unsafe { self.block.with_mut(|b| b.is_some()) } {
            return true;
        }
        let got = if locked {
            blocks::take_locked(bytes, fit, owner)
        } else {
            blocks::take(bytes, fit, owner)
        };
        let Some(block) = got else { return false };
        debug_assert!(block.bytes() as u64 >= bytes);
        // SAFETY: owned by the caller.
        unsafe { self.block.with_mut(|b| *b = Some(block)) };
        self.base.store(block.base, Ordering::Release);
        true
    }

    /// Takes the block out (to give it back): the holder no longer has one.
    ///
    /// # Safety
    /// As [`Held::let_go`].
    unsafe fn take(&self) -> Option<Block> {
        // SAFETY: owned by the caller.
        let block = unsafe { self.block.with_mut(Option::take) }?;
        self.base.store(ptr::null_mut(), Ordering::Relaxed);
        Some(block)
    }

    /// Gives the block back to the idle list (`reuse`) or to the OS; `true` if one was
    /// held.
    ///
    /// # Safety
    /// The caller owns the instance, and nothing in the block is live (so nothing will be
    /// freed into it).
    unsafe fn let_go(&self, reuse: bool) -> bool {
        // SAFETY: forwarded.
        let Some(block) = (unsafe { self.take() }) else {
            return false;
        };
        if reuse {
            blocks::give_back(block);
        } else {
            blocks::release(block);
        }
        true
    }
}

/// One slab and its replay state.
pub(crate) struct Instance {
    pub(crate) plan: *const CompiledPlan,
    /// The block the plan's slots lie in (at offset 0): held while a pass uses the
    /// instance and while a slot of it is live.
    slot_block: Held,
    /// The block the plan's lane cells lie in (see `cells.rs`): held while a pass uses the
    /// instance and while a cell of it is live. Apart from the slots' block, so that a
    /// small allocation outliving its pass (which no profile may have seen) holds a
    /// block of a few pages, not the slab.
    lane_block: Held,
    pub(super) state: AtomicU32,
    /// Put back with live slots (some may still be live).
    pub(super) pinned: AtomicBool,
    /// Put back by an unbound pass with cells live: its lane block is to be lent to the
    /// idle list once they are freed (see `Slabs::lend_idle`).
    pub(super) lend_pending: AtomicBool,
    pub(crate) occupant: Box<[AtomicU32]>,
    /// Per block of `1 << BLOCK_SHIFT` groups: the live slot that covers the whole block
    /// and starts in an earlier one, or `EMPTY`. Such a slot holds these words instead of
    /// the block's `occupant` words.
    pub(crate) spanning: Box<[AtomicU32]>,
    /// One bit per lane cell, set while the cell is live (see `cells.rs`).
    pub(crate) lanes: LaneCells,
    /// Owner-only: per scope node, where its allocations stand in its slots.
    pub(crate) cursors: OwnerCell<Box<[Cursor]>>,
    /// Owner-only: entries so far of each `(parent, name)` group, at its base node.
    pub(crate) occurrences: OwnerCell<Box<[u32]>>,
    /// Owner-only: slots live when the instance was taken (already noted as outliving).
    pub(super) carried: OwnerCell<Vec<u32>>,
    /// Per node: a thread is in the helper context rooted there (one at a time: its
    /// cursor and occurrences are that thread's alone).
    entered: Box<[AtomicBool]>,
}

impl Instance {
    /// A new instance of `plan`, taken (`IN_USE`) and without its blocks; `None` when
    /// memory ran out.
    pub(super) fn new(plan: &CompiledPlan) -> Option<Box<Instance>> {
        try_box(Instance {
            plan,
            slot_block: Held::new(),
            lane_block: Held::new(),
            state: AtomicU32::new(IN_USE),
            pinned: AtomicBool::new(false),
            lend_pending: AtomicBool::new(false),
            occupant: try_boxed_slice(plan.groups(), |_| AtomicU32::new(EMPTY))?,
            spanning: try_boxed_slice(blocks_of(plan.groups()), |_| AtomicU32::new(EMPTY))?,
            lanes: LaneCells::new(&plan.lanes)?,
            cursors: OwnerCell::new(try_boxed_slice(plan.nodes(), |i| {
                plan.initial_cursors()[i]
            })?),
            occurrences: OwnerCell::new(try_boxed_slice(plan.nodes(), |_| 0)?),
            carried: OwnerCell::new(Vec::new()),
            entered: try_boxed_slice(plan.nodes(), |_| AtomicBool::new(false))?,
        })
    }

    /// The base of the slots' block (null while the instance holds none: then no slot of
    /// it is live).
    #[inline(always)]
    pub(crate) fn base(&self) -> *mut u8 {
        self.slot_block.base()
    }

    /// The base of the lane block (null while the instance holds none: then no cell of it
    /// is live).
    #[inline(always)]
    pub(crate) fn lane_base(&self) -> *mut u8 {
        self.lane_block.base()
    }

    /// Whether the instance holds every block `plan` needs, as [`Instance::ensure_blocks`]
    /// would leave it (read by other threads as a hint only).
    pub(super) fn holds_blocks(&self, plan: &CompiledPlan) -> bool {
        (plan.height == 0 || !self.base().is_null())
            && (plan.lanes.bytes == 0 || !self.lane_base().is_null())
    }

    /// Takes the blocks the instance lacks: its slots' (an idle one as `fit` chooses) and
    /// its lanes' (each only if the plan has some); `false` when memory ran out (it keeps
    /// what it got).
    ///
    /// # Safety
    /// The caller owns the instance (won `IN_USE`, or holds it for its pass); `locked`:
    /// it holds `region::LOCK`.
    pub(super) unsafe fn ensure_blocks(&self, plan: &CompiledPlan, fit: Fit, locked: bool) -> bool {
        debug_assert!(fit != Fit::Exact, "a slots' block holds the plan's height");
        let owner = (self as *const Instance).cast_mut().cast();
        // SAFETY: forwarded.
        unsafe {
            self.slot_block.ensure(plan.height, fit, owner, locked)
                && self
                    .lane_block
                    .ensure(plan.lanes.bytes, Fit::Exact, owner, locked)
        }
    }

    /// Gives the slots' block back to the idle list (`reuse`) or the OS; `true` if one was
    /// held.
    ///
    /// # Safety
    /// The caller owns the instance, and no slot of it is live.
    pub(super) unsafe fn let_go_slots(&self, reuse: bool) -> bool {
        debug_assert!(!self.slots_live(), "a block let go under a live slot");
        // SAFETY: forwarded; no slot is live, so none will be freed.
        unsafe {
            self.carried.with_mut(Vec::clear);
            self.slot_block.let_go(reuse)
        }
    }

    /// Gives the lane block back to the idle list (`reuse`) or the OS; `true` if one was
    /// held.
    ///
    /// # Safety
    /// The caller owns the instance, and no cell of it is live.
    pub(super) unsafe fn let_go_lanes(&self, reuse: bool) -> bool {
        debug_assert!(!self.lanes_live(), "a lane block let go under a live cell");
        set_lend_pending(self, false);
        // SAFETY: forwarded; no cell is live, so none will be freed.
        unsafe { self.lane_block.let_go(reuse) }
    }

    /// Gives every block the instance holds back to the idle list, with `region::LOCK`
    /// held by the caller.
    ///
    /// # Safety
    /// The caller owns the instance and nothing of it is live.
    pub(super) unsafe fn give_back_locked(&self) {
        for held in [&self.slot_block, &self.lane_block] {
            // SAFETY: owned by the caller, with nothing live.
            if let Some(block) = unsafe { held.take() } {
                blocks::give_back_locked(block);
            }
        }
    }

    /// Gives back each block with nothing live in it (to the idle list when `reuse`,
    /// else the OS); `true` when nothing of the instance is live (it holds no block).
    ///
    /// # Safety
    /// The caller owns the instance (won `IN_USE` or `DEAD` from `FREE`): only it could
    /// hand out a slot or cell, so one seen free stays free.
    pub(super) unsafe fn let_go_drained(&self, reuse: bool) -> bool {
        let slots = self.slots_live();
        let cells = self.lanes_live();
        // SAFETY: owned by the caller; each block only when nothing is live in it.
        unsafe {
            if !slots {
                self.let_go_slots(reuse);
            }
            if !cells {
                self.let_go_lanes(reuse);
            }
        }
        !slots && !cells
    }

    /// Claims helper context node `node` for the calling thread; `false` if another
    /// thread is in it (or no such node).
    pub(crate) fn claim_node(&self, node: u32) -> bool {
        self.entered.get(node as usize).is_some_and(|e| {
            e.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Gives back a node claimed by [`Instance::claim_node`].
    pub(crate) fn release_node(&self, node: u32) {
        if let Some(e) = self.entered.get(node as usize) {
            e.store(false, Ordering::Release);
        }
    }

    /// Whether any slot of the instance is live (a snapshot). A live slot holds the word
    /// of its first group (never in a block it covers whole), and a free clears that word
    /// last, so the `occupant` words alone tell.
    pub(crate) fn slots_live(&self) -> bool {
        self.occupant
            .iter()
            .any(|o| o.load(Ordering::Acquire) != EMPTY)
    }

    /// Whether any lane cell of the instance is live (a snapshot).
    pub(crate) fn lanes_live(&self) -> bool {
        self.lanes.any_live()
    }

    /// The live slots (a snapshot: a slot seen live may be freed meanwhile; a slot seen
    /// empty stays empty until this instance's owner hands it out); `None` when the
    /// backend could not hold the list (the allocator's paths never abort on that).
    pub(crate) fn live_slots(&self) -> Option<Vec<u32>> {
        // SAFETY: an instance's plan outlives it.
        let plan = unsafe { &*self.plan };
        // A live slot holds the word of its first group: count it there.
        let live = self
            .occupant
            .iter()
            .enumerate()
            .map(|(g, o)| (g, o.load(Ordering::Acquire)))
            .filter(|&(g, s)| {
                s != EMPTY
                    && plan
                        .slots
                        .get(s as usize)
                        .is_some_and(|s| s.group == g as u32)
            })
            .map(|(_, s)| s);
        let mut out = Vec::new();
        for s in live {
            out.try_reserve(1).ok()?;
            out.push(s);
        }
        Some(out)
    }

    /// Resets the owner-only state for a new pass.
    ///
    /// # Safety
    /// The caller owns the instance (won `IN_USE`).
    pub(super) unsafe fn reset(&self, plan: &CompiledPlan, carried: Vec<u32>) {
        // SAFETY: owned by the caller.
        unsafe {
            self.cursors
                .with_mut(|c| c.copy_from_slice(plan.initial_cursors()));
            self.occurrences.with_mut(|o| o.fill(0));
            self.carried.with_mut(|c| *c = carried);
        }
    }
}

/// Instances put back with cells live and waiting to lend their blocks (over all plans):
/// while there are none, a pass end does not look for them. A hint (the flags decide), so
/// a plain atomic under loom too.
static LEND_PENDING: crate::support::sync::plain::AtomicUsize =
    crate::support::sync::plain::AtomicUsize::new(0);

/// Whether some instance waits to lend its block (see `Slabs::lend_idle`).
pub(crate) fn lends_pending() -> bool {
    LEND_PENDING.load(Ordering::Relaxed) > 0
}

/// Sets `i`'s `lend_pending`, keeping [`LEND_PENDING`] its count.
pub(super) fn set_lend_pending(i: &Instance, pending: bool) {
    if i.lend_pending.swap(pending, Ordering::Relaxed) != pending {
        if pending {
            LEND_PENDING.fetch_add(1, Ordering::Relaxed);
        } else {
            LEND_PENDING.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The blocks of [`Instance::spanning`] over `groups` groups.
fn blocks_of(groups: usize) -> usize {
    groups.div_ceil(1 << BLOCK_SHIFT)
}
