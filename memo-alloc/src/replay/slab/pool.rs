//! A compiled plan's pool of slab instances ([`Slabs`]).
//!
//! One instance serves one running pass at a time: it is taken at pass start and put back
//! at pass end. A pass bound to a thread gives its instance back with its blocks; an
//! unbound (async) pass gives each block with nothing live in it back to the shared idle
//! list when it ends, and also between two polls ([`Slabs::park`], [`Slabs::unpark`]), so
//! idle memory serves whichever plan needs it next. An instance without its blocks gets
//! them when it is next taken.
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

use crate::memory::blocks::{self, Fit};
use crate::memory::region;
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::instance::{set_lend_pending, Instance, DEAD, FREE, IN_USE};
use crate::support::fallible::{try_box, try_boxed_slice};
use crate::support::sync::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// Most instances of one plan (concurrent passes of one key beyond this run on the backend).
pub(crate) const MAX_INSTANCES: usize = 256;

/// Pinned instances a pool holds before passes reuse them instead of creating new ones.
pub(crate) const PINNED_BEFORE_REUSE: usize = 4;

/// What a pass gives back to the idle list when it ends (see `memory::blocks`), of the
/// blocks of its instance with nothing live in them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lend {
    /// Nothing: the instance keeps its blocks for its plan's next pass (a pass bound to a
    /// thread).
    Nothing,
    /// The slots' block: a bound pass of a key whose passes come in shape classes, whose
    /// next pass, of whichever class, takes it again ([`Fit::Recent`]).
    Slots,
    /// Both blocks (an unbound pass; a lane block with cells live is lent once they are
    /// freed: `lend_pending`).
    All,
}

impl Lend {
    /// What a pass gives back: an unbound one both blocks, a bound one of a key with shape
    /// classes (or of one of its classes) its slots' block, any other bound one nothing.
    pub(crate) fn for_pass(bound: bool, shape_classes: bool) -> Lend {
        match (bound, shape_classes) {
            (false, _) => Lend::All,
            (true, true) => Lend::Slots,
            (true, false) => Lend::Nothing,
        }
    }

    /// The idle block an instance of such a pass takes for its slots: the one given back
    /// last where the key's classes take turns on one, else the smallest that holds it.
    fn fit(self) -> Fit {
        match self {
            Lend::Slots => Fit::Recent,
            Lend::Nothing | Lend::All => Fit::Smallest,
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
    /// An instance without its slots' block takes an idle one as fits a pass that gives
    /// back `lend` when it ends ([`Lend::fit`]).
    /// `None` when every instance is in use and the pool is full, or memory ran out. Runs
    /// at a pass or poll boundary with the re-entrancy guard set.
    pub(crate) fn take(&self, lend: Lend) -> Option<*mut Instance> {
        let fit = lend.fit();
        if let Some(i) = self.take_existing(false, false, fit) {
            return Some(i);
        }
        let _g = region::LOCK.lock();
        if let Some(i) = self.take_existing(false, true, fit) {
            return Some(i);
        }
        let n = self.count.load(Ordering::Acquire);
        if n < self.instances.len() && self.pinned() < PINNED_BEFORE_REUSE {
            if let Some(i) = self.create(n, fit) {
                return Some(i);
            }
        }
        self.take_existing(true, true, fit)
    }

    /// Creates instance number `n` (with the region lock held).
    fn create(&self, n: usize, fit: Fit) -> Option<*mut Instance> {
        debug_assert!(n < self.instances.len() && n == self.count.load(Ordering::Relaxed));
        let plan = &self.plan;
        let inst = Instance::new(plan)?;
        let inst = Box::into_raw(inst);
        // SAFETY: not yet published: only this thread sees `inst`; the lock is held.
        if !unsafe { (*inst).ensure_blocks(plan, fit, true) } {
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
    fn take_existing(&self, allow_pinned: bool, locked: bool, fit: Fit) -> Option<*mut Instance> {
        let warm = |i: &Instance| i.holds_blocks(&self.plan);
        self.take_existing_if(allow_pinned, locked, fit, warm)
            .or_else(|| self.take_existing_if(allow_pinned, locked, fit, |_| true))
    }

    /// [`Slabs::take_existing`] among the instances `wanted` says (a hint: read before
    /// the instance is won).
    fn take_existing_if(
        &self,
        allow_pinned: bool,
        locked: bool,
        fit: Fit,
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
                let Some(live) = i.live_slots() else {
                    // No memory for the list: the instance waits for a later pass.
                    i.state.store(FREE, Ordering::Release);
                    continue;
                };
                carried = live;
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
            if !unsafe { i.ensure_blocks(&self.plan, fit, locked) } {
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
    /// live slot covers are returned. The blocks `lend` names go back to the idle list
    /// when nothing is live in them (a lane block with cells live does once they are
    /// freed: `lend_pending`); the instance keeps the others for its plan's next pass.
    ///
    /// # Safety
    /// The calling pass registered with this pool and `inst` is null or the instance it
    /// took from it; the pass is over: no slot of it will be handed out until it is taken
    /// again.
    pub(crate) unsafe fn release(
        &self,
        inst: *mut Instance,
        cut_short: bool,
        lend: Lend,
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
        let Some(live) = i.live_slots() else {
            // No memory for the list: the instance stays pinned (whatever is live in it
            // stays its holder's) and the next pass to take it lists its slots again.
            i.pinned.store(true, Ordering::Release);
            i.state.store(FREE, Ordering::Release);
            self.active.fetch_sub(1, Ordering::AcqRel);
            return out;
        };
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
        } else if lend != Lend::Nothing {
            // SAFETY: still owned by the caller; no slot is live.
            unsafe { i.let_go_slots(true) };
        }
        if lend == Lend::All && !i.lanes_live() {
            // SAFETY: still owned by the caller; no cell is live.
            unsafe { i.let_go_lanes(true) };
        } else if lend == Lend::All {
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
        unsafe { (*inst).ensure_blocks(&self.plan, Fit::Smallest, false) }
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
