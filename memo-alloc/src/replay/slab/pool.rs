//! Slab instances and the per-plan pool.
//!
//! One instance serves one running pass at a time: it is taken at pass start and put back
//! at pass end. Its mutable state is split by writer:
//! - `occupant[g]` (one atomic word per address group): the live slot covering group
//!   `g`, or `EMPTY`; and `spanning[b]` (one word per block of [`BLOCK_SHIFT`]-sized runs
//!   of groups): the live slot covering all of block `b` from an earlier block. The thread
//!   of the slot's context stores the slot in the words of the groups it covers, the
//!   blocks it covers whole in their block word instead (see `replay::claim`), when it
//!   hands it out; the thread that frees the pointer (any thread) stores `EMPTY` in the
//!   same words. All are plain atomic stores, ordered by the program's own hand-off of the
//!   pointer; no read-modify-write.
//! - slot cursors and scope occurrences: written only by the pass's thread while it holds the
//!   instance.
//!
//! Memory: an instance holds two blocks of chunks (`blocks.rs`): its slots' block while it
//! is in use and while any slot of it is live, and its lane block (`lanes.rs`) while it is
//! in use and while any cell of it is live. A pass bound to a thread gives its instance
//! back with its blocks; an unbound (async) pass gives each block with nothing live in it
//! back to the shared idle list when it ends, and also between two polls ([`Slabs::park`],
//! [`Slabs::unpark`]), so idle memory serves whichever plan needs it next. An instance
//! without its blocks gets them when it is next taken.
//!
//! An instance put back with slots still live is *pinned*: the pages no live slot covers
//! are returned to the OS, the slots that outlived the pass are noted (a slot whose
//! blocks keep outliving passes is demoted to the backend, see
//! `CompiledPlan::note_outlived`), and the pool prefers drained instances. Once
//! [`PINNED_BEFORE_REUSE`] instances are pinned, a pass reuses a pinned one rather than
//! grow the pool: the overlap check keeps its live blocks safe, at the cost of misses on
//! the slots over them. So the pool stays near the peak number of concurrent passes, and
//! the memory pinned instances hold is what the program keeps plus the plan's tables.

use std::ptr;

use crate::memory::blocks::{self, Block, Fit};
use crate::memory::region;
use crate::replay::slab::cells::LaneCells;
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::state::Cursor;
use crate::support::fallible::{try_box, try_boxed_slice};
use crate::support::sync::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering, OwnerCell};

/// No slot is live at this group.
pub(crate) const EMPTY: u32 = u32::MAX;

/// Groups per block of [`Instance::spanning`], log 2. A slot over thousands of groups (a
/// large tensor placed over a region of small ones) takes its whole blocks with one word
/// each, not one word per group. Under loom, blocks of 2 groups, so that its models reach
/// whole blocks with a few slots.
#[cfg(not(loom))]
pub(crate) const BLOCK_SHIFT: u32 = 6;
#[cfg(loom)]
pub(crate) const BLOCK_SHIFT: u32 = 1;

const FREE: u32 = 0;
const IN_USE: u32 = 1;
const DEAD: u32 = 2;

/// Most instances of one plan (concurrent passes of one key beyond this run on the backend).
pub(crate) const MAX_INSTANCES: usize = 256;

/// Pinned instances a pool holds before passes reuse them instead of creating new ones.
pub(crate) const PINNED_BEFORE_REUSE: usize = 4;

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
    /// The block the plan's lane cells lie in (see `lanes.rs`): held while a pass uses the
    /// instance and while a cell of it is live. Apart from the slots' block, so that a
    /// small allocation outliving its pass (which no profile may have seen) holds a
    /// block of a few pages, not the slab.
    lane_block: Held,
    state: AtomicU32,
    /// Put back with live slots (some may still be live).
    pinned: AtomicBool,
    /// Put back by an unbound pass with cells live: its lane block is to be lent to the
    /// idle list once they are freed (see [`Slabs::lend_idle`]).
    lend_pending: AtomicBool,
    pub(crate) occupant: Box<[AtomicU32]>,
    /// Per block of `1 << BLOCK_SHIFT` groups: the live slot that covers the whole block
    /// and starts in an earlier one, or `EMPTY`. Such a slot holds these words instead of
    /// the block's `occupant` words.
    pub(crate) spanning: Box<[AtomicU32]>,
    /// One bit per lane cell, set while the cell is live (see `lanes.rs`).
    pub(crate) lanes: LaneCells,
    /// Owner-only: per scope node, where its allocations stand in its slots.
    pub(crate) cursors: OwnerCell<Box<[Cursor]>>,
    /// Owner-only: entries so far of each `(parent, name)` group, at its base node.
    pub(crate) occurrences: OwnerCell<Box<[u32]>>,
    /// Owner-only: slots live when the instance was taken (already noted as outliving).
    carried: OwnerCell<Vec<u32>>,
    /// Per node: a thread is in the helper context rooted there (one at a time: its
    /// cursor and occurrences are that thread's alone).
    entered: Box<[AtomicBool]>,
}

impl Instance {
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
    fn holds_blocks(&self, plan: &CompiledPlan) -> bool {
        (plan.height == 0 || !self.base().is_null())
            && (plan.lanes.bytes == 0 || !self.lane_base().is_null())
    }

    /// Takes the blocks the instance lacks: its slots' and its lanes' (each only if the
    /// plan has some); `false` when memory ran out (it keeps what it got).
    ///
    /// # Safety
    /// The caller owns the instance (won `IN_USE`, or holds it for its pass); `locked`:
    /// it holds `region::LOCK`.
    unsafe fn ensure_blocks(&self, plan: &CompiledPlan, locked: bool) -> bool {
        let owner = (self as *const Instance).cast_mut().cast();
        // SAFETY: forwarded.
        unsafe {
            self.slot_block
                .ensure(plan.height, Fit::Smallest, owner, locked)
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
    unsafe fn let_go_slots(&self, reuse: bool) -> bool {
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
    unsafe fn let_go_lanes(&self, reuse: bool) -> bool {
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
    unsafe fn give_back_locked(&self) {
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
    unsafe fn let_go_drained(&self, reuse: bool) -> bool {
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
    /// empty stays empty until this instance's owner hands it out).
    pub(crate) fn live_slots(&self) -> Vec<u32> {
        // SAFETY: an instance's plan outlives it.
        let plan = unsafe { &*self.plan };
        // A live slot holds the word of its first group: count it there.
        self.occupant
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
            .map(|(_, s)| s)
            .collect()
    }

    /// Resets the owner-only state for a new pass.
    ///
    /// # Safety
    /// The caller owns the instance (won `IN_USE`).
    unsafe fn reset(&self, plan: &CompiledPlan, carried: Vec<u32>) {
        // SAFETY: owned by the caller.
        unsafe {
            self.cursors
                .with_mut(|c| c.copy_from_slice(plan.initial_cursors()));
            self.occurrences.with_mut(|o| o.fill(0));
            self.carried.with_mut(|c| *c = carried);
        }
    }
}

/// What putting an instance back found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Released {
    /// Slots still live: the instance is pinned.
    pub(crate) live: u64,
    /// Slots demoted because their blocks kept outliving passes.
    pub(crate) demoted: u64,
    /// Bytes of pages no live slot covers, returned to the OS.
    pub(crate) pages_returned: u64,
}

/// A compiled plan and its pool of slab instances.
pub(crate) struct Slabs {
    pub(crate) plan: CompiledPlan,
    instances: Box<[AtomicPtr<Instance>]>,
    count: AtomicUsize,
    /// Passes currently holding an instance.
    pub(crate) active: AtomicU32,
    /// Read by loom models after registering with the plan, written when it is freed: a
    /// use after free is a causality violation.
    #[cfg(loom)]
    pub(crate) probe: loom::cell::UnsafeCell<u32>,
}

impl Slabs {
    /// A pool of at most `capacity` instances; `None` when memory runs out.
    pub(crate) fn new(plan: CompiledPlan, capacity: usize) -> Option<Box<Slabs>> {
        let instances = try_boxed_slice(capacity, |_| AtomicPtr::new(ptr::null_mut()))?;
        try_box(Slabs {
            plan,
            instances,
            count: AtomicUsize::new(0),
            active: AtomicU32::new(0),
            #[cfg(loom)]
            probe: loom::cell::UnsafeCell::new(0),
        })
    }

    /// Number of instances created (the peak number of concurrent passes, plus pinned ones).
    pub(crate) fn instances(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    fn published(&self) -> impl Iterator<Item = &Instance> {
        let n = self.count.load(Ordering::Acquire);
        self.instances[..n].iter().map(|slot| {
            // SAFETY: published instances live as long as their `Slabs`.
            unsafe { &*slot.load(Ordering::Acquire) }
        })
    }

    /// Instances put back with live slots.
    pub(crate) fn pinned(&self) -> usize {
        self.published()
            .filter(|i| i.pinned.load(Ordering::Relaxed))
            .count()
    }

    /// Registers a pass with the plan: it is not freed until the pass [`Slabs::release`]s
    /// it. The caller reached the plan through its key's readers and still holds them.
    pub(crate) fn register(&self) {
        self.active.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes a free instance, with memory, for a registered pass: a drained one, else a new
    /// one, else (when [`PINNED_BEFORE_REUSE`] are pinned or the pool is full) a pinned one.
    /// `None` when every instance is in use and the pool is full, or memory ran out. Runs
    /// at a pass or poll boundary with the re-entrancy guard set.
    pub(crate) fn take(&self) -> Option<*mut Instance> {
        if let Some(i) = self.take_existing(false, false) {
            return Some(i);
        }
        let _g = region::LOCK.lock();
        if let Some(i) = self.take_existing(false, true) {
            return Some(i);
        }
        let n = self.count.load(Ordering::Acquire);
        if n < self.instances.len() && self.pinned() < PINNED_BEFORE_REUSE {
            if let Some(i) = self.create(n) {
                return Some(i);
            }
        }
        self.take_existing(true, true)
    }

    /// Creates instance number `n` (with the region lock held).
    fn create(&self, n: usize) -> Option<*mut Instance> {
        debug_assert!(n < self.instances.len() && n == self.count.load(Ordering::Relaxed));
        let plan = &self.plan;
        let inst = try_box(Instance {
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
        })?;
        let inst = Box::into_raw(inst);
        // SAFETY: not yet published: only this thread sees `inst`; the lock is held.
        if !unsafe { (*inst).ensure_blocks(plan, true) } {
            // Memory ran out for its second block: the first (the directory points its
            // chunks to `inst`) goes back before the instance is freed.
            // SAFETY: never published, nothing of it live; the lock is held.
            unsafe { (*inst).give_back_locked() };
            // SAFETY: `inst` was just created by Box::into_raw and never shared.
            drop(unsafe { Box::from_raw(inst) });
            return None;
        }
        self.instances[n].store(inst, Ordering::Release);
        self.count.store(n + 1, Ordering::Release);
        Some(inst)
    }

    /// Takes a free instance: drained ones only, or pinned ones too (`allow_pinned`); one
    /// that holds its blocks first, so a pass faults no memory in while another instance
    /// keeps its pages idle (after a re-profile began, the instances then idle gave their
    /// memory back, `shed_idle`, and the instance a pass on another thread held is the
    /// warm one). `locked`: the caller holds `region::LOCK`.
    fn take_existing(&self, allow_pinned: bool, locked: bool) -> Option<*mut Instance> {
        let warm = |i: &Instance| i.holds_blocks(&self.plan);
        self.take_existing_if(allow_pinned, locked, warm)
            .or_else(|| self.take_existing_if(allow_pinned, locked, |_| true))
    }

    /// [`Slabs::take_existing`] among the instances `wanted` says (a hint: read before
    /// the instance is won).
    fn take_existing_if(
        &self,
        allow_pinned: bool,
        locked: bool,
        wanted: impl Fn(&Instance) -> bool,
    ) -> Option<*mut Instance> {
        let n = self.count.load(Ordering::Acquire);
        for slot in &self.instances[..n] {
            let inst = slot.load(Ordering::Acquire);
            // SAFETY: published instances live as long as their `Slabs`.
            let i = unsafe { &*inst };
            if !wanted(i)
                || i.state
                    .compare_exchange(FREE, IN_USE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            let mut carried = Vec::new();
            if i.pinned.load(Ordering::Acquire) {
                carried = i.live_slots();
                if carried.is_empty() {
                    i.pinned.store(false, Ordering::Relaxed);
                } else if !allow_pinned {
                    i.state.store(FREE, Ordering::Release);
                    continue;
                }
            }
            debug_assert!(allow_pinned || carried.is_empty(), "drained unless allowed");
            // SAFETY: IN_USE was won by this thread: it is the only writer of the
            // owner-only state until it releases the instance. (A pinned instance kept
            // its slots' block.)
            if !unsafe { i.ensure_blocks(&self.plan, locked) } {
                i.state.store(FREE, Ordering::Release);
                return None; // out of memory: creating one would fail too
            }
            // SAFETY: as above.
            unsafe { i.reset(&self.plan, carried) };
            return Some(inst);
        }
        None
    }

    /// Ends a registered pass: puts its instance (if it took one) back. With live slots it
    /// is pinned: slots newly live are noted as outliving the pass (unless `cut_short`: a
    /// pass that unwound leaves blocks live that it would have freed), and the pages no
    /// live slot covers are returned. When `lend` (an unbound pass), each of its blocks
    /// with nothing live goes back to the idle list (a lane block with cells live does
    /// once they are freed: `lend_pending`); else it keeps them for the next pass.
    ///
    /// # Safety
    /// The calling pass registered with this pool and `inst` is null or the instance it
    /// took from it; the pass is over: no slot of it will be handed out until it is taken
    /// again.
    pub(crate) unsafe fn release(
        &self,
        inst: *mut Instance,
        cut_short: bool,
        lend: bool,
    ) -> Released {
        // SAFETY: taken from this pool and still published.
        let Some(i) = (unsafe { inst.as_ref() }) else {
            self.active.fetch_sub(1, Ordering::AcqRel);
            return Released::default();
        };
        debug_assert_eq!(
            i.state.load(Ordering::Relaxed),
            IN_USE,
            "released by its pass"
        );
        let mut out = Released::default();
        set_lend_pending(i, false);
        let now = self.plan.note_pass_end();
        let live = i.live_slots();
        if !live.is_empty() {
            out.live = live.len() as u64;
            // SAFETY: still owned by the caller.
            let carried = unsafe { i.carried.with_mut(std::mem::take) };
            if !cut_short {
                for &s in live.iter().filter(|s| !carried.contains(s)) {
                    out.demoted += self.plan.note_outlived(s, now) as u64;
                }
            }
            out.pages_returned = self.return_uncovered_pages(i, &live);
            i.pinned.store(true, Ordering::Release);
        } else if lend {
            // SAFETY: still owned by the caller; no slot is live.
            unsafe { i.let_go_slots(true) };
        }
        if lend && !i.lanes_live() {
            // SAFETY: still owned by the caller; no cell is live.
            unsafe { i.let_go_lanes(true) };
        } else if lend {
            // A small block outlives the pass in its cell: the lane block is lent once
            // its cells are freed, by a later pass end of any plan.
            set_lend_pending(i, true);
        }
        i.state.store(FREE, Ordering::Release);
        self.active.fetch_sub(1, Ordering::AcqRel);
        out
    }

    /// Lends the lane blocks of the idle instances that an unbound pass put back with
    /// cells live (`lend_pending`) and whose cells have since been freed: such an instance
    /// kept its lane block, which would otherwise stay with this plan until its next pass
    /// instead of serving any plan's. Runs at a pass boundary, with the re-entrancy guard
    /// set.
    pub(crate) fn lend_idle(&self) {
        self.each_idle(
            |i| i.lend_pending.load(Ordering::Relaxed),
            |i| {
                if !i.lanes_live() {
                    // SAFETY: owned (`each_idle`), and no cell is live.
                    unsafe { i.let_go_lanes(true) };
                }
            },
        );
    }

    /// Runs `f` on each free instance that `wanted` selects, owning it meanwhile: `IN_USE`
    /// won from `FREE`, so only this thread could hand out a slot or cell of it, and every
    /// one seen free stays free. (`wanted` is asked again once owned: another thread may
    /// have served the instance in between.)
    fn each_idle(&self, wanted: impl Fn(&Instance) -> bool, f: impl Fn(&Instance)) {
        for i in self.published() {
            if !wanted(i)
                || i.state
                    .compare_exchange(FREE, IN_USE, Ordering::AcqRel, Ordering::Relaxed)
                    .is_err()
            {
                continue; // a pass holds it, or it is retired
            }
            if wanted(i) {
                f(i);
            }
            i.state.store(FREE, Ordering::Release);
        }
    }

    /// Between two polls of an unbound pass that holds `inst`: if no slot of it is live,
    /// gives its slots' block back to the idle list, and its lane block too if no cell is
    /// live. `true` when it gave one back (the pass then holds the instance without that
    /// memory until [`Slabs::unpark`]).
    ///
    /// # Safety
    /// The calling pass holds `inst` (acquired from this pool) and nobody hands out its
    /// slots or cells until `unpark`.
    pub(crate) unsafe fn park(&self, inst: *mut Instance) -> bool {
        // SAFETY: held by the caller.
        let i = unsafe { &*inst };
        if i.slots_live() {
            return false;
        }
        // SAFETY: held by the caller; every slot or cell seen free stays free (only the
        // caller hands them out).
        unsafe { i.let_go_slots(true) | (!i.lanes_live() && i.let_go_lanes(true)) }
    }

    /// Gives a held instance its blocks again (after [`Slabs::park`]); `false` when memory
    /// ran out. Its cursors and occurrences are as the pass left them.
    ///
    /// # Safety
    /// The calling pass holds `inst` (acquired from this pool).
    pub(crate) unsafe fn unpark(&self, inst: *mut Instance) -> bool {
        // SAFETY: held by the caller.
        unsafe { (*inst).ensure_blocks(&self.plan, false) }
    }

    /// Returns the pages of `i`'s slots' block that none of the `live` slots covers.
    fn return_uncovered_pages(&self, i: &Instance, live: &[u32]) -> u64 {
        let mut ranges: Vec<(u64, u64)> = live
            .iter()
            .filter_map(|&s| self.plan.slots.get(s as usize))
            .map(|s| (s.offset, s.offset + s.size))
            .collect();
        ranges.sort_unstable();
        let mut returned = 0;
        let mut from = 0u64;
        for (start, end) in ranges
            .into_iter()
            .chain([(self.plan.height, self.plan.height)])
        {
            if start > from {
                // SAFETY: `[from, start)` lies inside the instance's slots' block (offsets
                // are within the height; a slot is live, so the block is held) and no live
                // slot covers it.
                returned += region::return_pages(unsafe { i.base().add(from as usize) }, unsafe {
                    i.base().add(start as usize)
                });
            }
            from = from.max(end);
        }
        returned
    }

    /// Bytes of this plan's slabs (slots' and lane blocks) resident in memory, measured
    /// with `mincore` (pages that were touched and not returned). Runs at pass boundaries
    /// or in `stats()`, never on the allocation path. A snapshot: a block changing hands
    /// meanwhile may count twice or not at all.
    pub(crate) fn resident_bytes(&self) -> u64 {
        let (slots, lanes) = (self.plan.height as usize, self.plan.lanes.bytes as usize);
        self.published()
            .map(|i| {
                blocks::resident_bytes(i.base(), slots)
                    + blocks::resident_bytes(i.lane_base(), lanes)
            })
            .sum()
    }

    /// Returns the memory of every free instance to the OS, but for the blocks with
    /// something live: its key begins a re-profile, whose pass takes its working set from
    /// the region beside this plan's slabs (see `own_blocks`), and this plan is replaced
    /// when the new one is published. An instance taken meanwhile (a pass of the key on
    /// another thread) gets its blocks again, as after [`Slabs::park`]. Runs at a pass
    /// boundary.
    pub(crate) fn shed_idle(&self) {
        self.each_idle(
            |_| true,
            |i| {
                // SAFETY: owned (`each_idle`); each block is let go only with nothing
                // live in it.
                unsafe { i.let_go_drained(false) };
            },
        );
    }

    /// Marks every idle instance dead and returns its memory, but for the blocks with
    /// something live; `true` when all are dead with nothing live (the `Slabs` may then
    /// be freed). An instance with something live is left free, to be retired again.
    pub(crate) fn try_retire(&self) -> bool {
        let mut all = true;
        for i in self.published() {
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
            // SAFETY: `DEAD` was won by this thread: no pass holds the instance and none
            // will; each block is let go only with nothing live in it. (A cell that
            // outlived its pass unseen by the profile holds the lane block only; a pinned
            // instance returned its slots' free pages when it was put back.)
            if !unsafe { i.let_go_drained(false) } {
                i.state.store(FREE, Ordering::Release);
                all = false;
            }
        }
        all
    }
}

impl Drop for Slabs {
    fn drop(&mut self) {
        #[cfg(loom)]
        self.probe.with_mut(|p| {
            // SAFETY: loom checks this write is ordered after every read of the probe.
            unsafe { *p = u32::MAX }
        });
        let n = self.count.load(Ordering::Acquire);
        for slot in &self.instances[..n] {
            let inst = slot.load(Ordering::Acquire);
            if !inst.is_null() {
                // SAFETY: `drop` runs only after `try_retire` returned true, so no pass
                // holds the instance, none of its slots is live, and its chunks were
                // released (the directory no longer points to it).
                let inst = unsafe { Box::from_raw(inst) };
                #[cfg(loom)]
                freed_for_loom(inst);
                #[cfg(not(loom))]
                drop(inst);
            }
        }
    }
}

/// Instances put back with cells live and waiting to lend their blocks (over all plans):
/// while there are none, a pass end does not look for them. A hint (the flags decide), so
/// a plain atomic under loom too.
static LEND_PENDING: crate::support::sync::plain::AtomicUsize =
    crate::support::sync::plain::AtomicUsize::new(0);

/// Whether some instance waits to lend its block (see [`Slabs::lend_idle`]).
pub(crate) fn lends_pending() -> bool {
    LEND_PENDING.load(Ordering::Relaxed) > 0
}

/// Sets `i`'s `lend_pending`, keeping [`LEND_PENDING`] its count.
fn set_lend_pending(i: &Instance, pending: bool) {
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

/// Under loom, freeing an instance is an unsynchronised write of its words, which loom
/// orders after every access (a free still reading them fails the model). The instance
/// itself is leaked, so a late access is reported by loom rather than undefined.
#[cfg(loom)]
fn freed_for_loom(mut inst: Box<Instance>) {
    for o in inst.occupant.iter_mut().chain(inst.spanning.iter_mut()) {
        o.with_mut(|_| ());
    }
    Box::leak(inst);
}
