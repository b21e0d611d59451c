//! Loom model checks of memo-alloc's lock-free protocols.
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p memo-alloc --test loom --release
//! ```
//!
//! The crate's `src` uses `std` atomics directly, so each protocol is re-implemented here in
//! miniature over loom's atomics, statement for statement and with the same memory
//! orderings as the `src` functions named on each model. Slab memory and owner-only state
//! are loom `UnsafeCell`s: loom fails a model when two accesses to one of them are not
//! ordered by happens-before, which is exactly "a slot handed out (or memory released)
//! while another thread may still use it". Each model also has a variant with one ordering
//! weakened or one fence removed, marked `#[should_panic]`: it proves the model can fail.
//!
//! What this proves, for every interleaving and every value the C11 memory model lets a
//! load see (within loom's bounds):
//! - (a) occupancy hand-off (`replay::alloc`/`is_free`, `replay::free`/`locate`): the
//!   owner never sees a slot freed on another thread as free before that thread's accesses
//!   to it are over, and never hands out a slot overlapping a live one.
//! - (b) the instance pool (`Slabs::take_existing`, `Slabs::release`, `Slabs::try_retire`,
//!   `Instance::any_live`): two passes never own one instance at once; an instance whose
//!   slot is still live is not reused or retired until that slot's free; a retired
//!   instance is never taken.
//! - (c) plan publication (`pass::choose`, `KeyEntry::publish`, `registry::reclaim`): a
//!   replaced plan is freed only after every pass that could have loaded its pointer has
//!   registered (`active`) and finished with it. This needs `SeqCst` fences around the
//!   `entering` counter: with acquire/release alone the reader's "increment `entering`,
//!   load the plan" and the reclaimer's "swap the plan, load `entering`" form a
//!   store-buffering pattern where both loads can see the old values (the variant without
//!   fences fails).
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize};
use loom::sync::Arc;
use loom::thread;
use std::sync::atomic::Ordering::{self, AcqRel, Acquire, Relaxed, Release, SeqCst};

const EMPTY: u32 = u32::MAX;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

// ---------------------------------------------------------------------------------------
// (a) Occupancy hand-off. Mirrors `replay::alloc` (the `is_free` check, then the
// occupant store), `replay::is_free`, `replay::locate` + `replay::free`.
//
// Plan: slot 0 = bytes 0..64 (group 0), slot 1 = bytes 32..64 (group 1); group 0 covers
// group 1 (`cover_of(1) == [0]`), and slot 0's range contains group 1
// (`group..group_end == 0..2`). Memory is two 32-byte halves.
// ---------------------------------------------------------------------------------------

struct Slot {
    offset: u64,
    size: u64,
    group: usize,
    group_end: usize,
}

const SLOTS: [Slot; 2] = [
    Slot {
        offset: 0,
        size: 64,
        group: 0,
        group_end: 2,
    },
    Slot {
        offset: 32,
        size: 32,
        group: 1,
        group_end: 2,
    },
];

fn cover_of(group: usize) -> &'static [usize] {
    if group == 1 {
        &[0]
    } else {
        &[]
    }
}

/// Which halves of the memory a slot spans.
fn halves(slot: usize) -> std::ops::Range<usize> {
    if slot == 0 {
        0..2
    } else {
        1..2
    }
}

struct Orders {
    /// `replay::free`'s store of EMPTY (src: Release).
    free_store: Ordering,
    /// `is_free`'s loads (src: Acquire).
    check_load: Ordering,
}

const SRC_ORDERS: Orders = Orders {
    free_store: Release,
    check_load: Acquire,
};

struct Inst {
    occupant: [AtomicU32; 2],
    mem: [UnsafeCell<u32>; 2],
}

impl Inst {
    fn new() -> Inst {
        Inst {
            occupant: [AtomicU32::new(EMPTY), AtomicU32::new(EMPTY)],
            mem: [UnsafeCell::new(0), UnsafeCell::new(0)],
        }
    }

    /// `replay::is_free`.
    fn is_free(&self, slot: &Slot, o: &Orders) -> bool {
        for occ in &self.occupant[slot.group..slot.group_end] {
            if occ.load(o.check_load) != EMPTY {
                return false;
            }
        }
        for &g in cover_of(slot.group) {
            let live = self.occupant[g].load(o.check_load);
            if live != EMPTY {
                let s = &SLOTS[live as usize];
                if s.offset + s.size > slot.offset {
                    return false;
                }
            }
        }
        true
    }

    /// `replay::alloc` after the slot lookup: check, then mark the slot live.
    fn hand_out(&self, index: usize, o: &Orders) -> bool {
        let slot = &SLOTS[index];
        if !self.is_free(slot, o) {
            return false;
        }
        self.occupant[slot.group].store(index as u32, Release);
        true
    }

    /// `replay::locate` + `replay::free`: any thread.
    fn free(&self, index: usize, o: &Orders) {
        let occ = &self.occupant[SLOTS[index].group];
        let live = occ.load(Acquire);
        assert_eq!(live, index as u32, "freeing a slot that is not live");
        occ.store(EMPTY, o.free_store);
    }

    /// The program writes the slot's memory.
    fn write(&self, slot: usize, v: u32) {
        for h in halves(slot) {
            self.mem[h].with_mut(|m| unsafe { *m = v });
        }
    }

    /// The program reads the slot's memory.
    fn read(&self, slot: usize) -> u32 {
        halves(slot)
            .map(|h| self.mem[h].with(|m| unsafe { *m }))
            .last()
            .unwrap()
    }
}

fn occupancy(o: &'static Orders) {
    model(move || {
        let inst = Arc::new(Inst::new());
        // The pass's thread hands slot 0 out and fills it ...
        assert!(inst.hand_out(0, o), "a fresh instance has every slot free");
        inst.write(0, 7);
        // ... then passes the pointer to another thread (the spawn is the program's own
        // synchronisation), which checks the contents and frees it.
        let other = {
            let inst = inst.clone();
            thread::spawn(move || {
                assert_eq!(inst.read(0), 7, "the slot changed under its owner");
                inst.free(0, o);
            })
        };
        // Slot 1 overlaps slot 0: it may only be handed out once slot 0's free happened
        // (else the pass's allocation misses and goes to the backend). The yield lets the
        // first execution run the free first: loom's DPOR keeps one last access per
        // atomic, so a load-then-store on the other thread (`locate`, then the store of
        // EMPTY) would hide this load from it; loom still explores every value the load
        // may return, and the other schedules.
        thread::yield_now();
        if inst.hand_out(1, o) {
            inst.write(1, 9);
            assert_eq!(inst.read(1), 9);
            inst.free(1, o);
        }
        other.join().unwrap();
        // Once both are done, everything is free again.
        assert!(inst.hand_out(0, o));
    });
}

#[test]
fn a_occupancy_hand_off() {
    occupancy(&SRC_ORDERS);
}

#[test]
#[should_panic]
fn a_occupancy_hand_off_fails_with_a_relaxed_free() {
    static WEAK: Orders = Orders {
        free_store: Relaxed,
        check_load: Acquire,
    };
    occupancy(&WEAK);
}

// ---------------------------------------------------------------------------------------
// (b) The instance pool. Mirrors `Slabs::take_existing`, `Slabs::release`,
// `Slabs::try_retire` and `Instance::any_live` (one instance, already created: creation
// happens under the pool's spin lock and publishes with a release store of `count`).
// ---------------------------------------------------------------------------------------

const FREE: u32 = 0;
const IN_USE: u32 = 1;
const DEAD: u32 = 2;

struct Pool {
    state: AtomicU32,
    may_have_live: AtomicBool,
    occupant: AtomicU32,
    active: AtomicU32,
    /// Owner-only arrays (`ordinals`, `occurrences`).
    owner_only: UnsafeCell<u32>,
    /// The slab's memory (one slot).
    mem: UnsafeCell<u32>,
}

impl Pool {
    fn new() -> Pool {
        Pool {
            state: AtomicU32::new(FREE),
            may_have_live: AtomicBool::new(false),
            occupant: AtomicU32::new(EMPTY),
            active: AtomicU32::new(0),
            owner_only: UnsafeCell::new(0),
            mem: UnsafeCell::new(0),
        }
    }

    /// `Instance::any_live`.
    fn any_live(&self) -> bool {
        self.occupant.load(Acquire) != EMPTY
    }

    /// `Slabs::take_existing`.
    fn take(&self) -> bool {
        if self
            .state
            .compare_exchange(FREE, IN_USE, AcqRel, Relaxed)
            .is_err()
        {
            return false;
        }
        if self.may_have_live.load(Acquire) {
            if self.any_live() {
                self.state.store(FREE, Release);
                return false;
            }
            self.may_have_live.store(false, Relaxed);
        }
        self.owner_only.with_mut(|o| unsafe { *o = 0 });
        self.active.fetch_add(1, AcqRel);
        true
    }

    /// `Slabs::release`.
    fn release(&self) {
        if self.any_live() {
            self.may_have_live.store(true, Release);
        }
        self.state.store(FREE, Release);
        self.active.fetch_sub(1, AcqRel);
    }

    /// `Slabs::try_retire` (one instance); `region::release` writes the memory
    /// (`MADV_DONTNEED` zeroes it).
    fn try_retire(&self, check_live: bool) -> bool {
        if self.state.load(Acquire) == DEAD {
            return true;
        }
        if self
            .state
            .compare_exchange(FREE, DEAD, AcqRel, Relaxed)
            .is_err()
        {
            return false;
        }
        if check_live && self.any_live() {
            self.state.store(FREE, Release);
            return false;
        }
        self.mem.with_mut(|m| unsafe { *m = 0 });
        true
    }

    /// A pass: take the instance, use the owner-only state, hand out the slot (the
    /// occupancy check of (a), reduced to one slot), and either free it or send it to
    /// `mailbox` (1: here it is; 2: nothing was handed out); then release. Returns whether
    /// the pass got the instance.
    fn pass(&self, value: u32, mailbox: Option<&AtomicU32>) -> bool {
        if !self.take() {
            return false;
        }
        self.owner_only.with_mut(|o| unsafe { *o += 1 });
        if self.occupant.load(Acquire) == EMPTY {
            self.occupant.store(0, Release);
            self.mem.with_mut(|m| unsafe { *m = value });
            match mailbox {
                Some(mb) => mb.store(1, Release), // outlives the pass
                None => {
                    assert_eq!(self.mem.with(|m| unsafe { *m }), value);
                    self.occupant.store(EMPTY, Release);
                }
            }
        }
        // Otherwise the slot is live elsewhere: a miss, served by the backend.
        if let Some(mb) = mailbox {
            let _ = mb.compare_exchange(0, 2, Release, Relaxed);
        }
        self.release();
        true
    }
}

/// Thread 1's pass hands its slot to thread 2, which frees it later; thread 3 runs a pass
/// (or retires the pool) meanwhile.
fn pool(third_retires: bool, check_live: bool) {
    model(move || {
        let p = Arc::new(Pool::new());
        let mailbox = Arc::new(AtomicU32::new(0));
        let t1 = {
            let (p, mailbox) = (p.clone(), mailbox.clone());
            thread::spawn(move || {
                if !p.pass(7, Some(&mailbox)) {
                    mailbox.store(2, Release); // no instance: nothing to free
                }
            })
        };
        let t2 = {
            let (p, mailbox) = (p.clone(), mailbox.clone());
            // Frees the handed-out slot if it has received it (no spinning).
            thread::spawn(move || {
                if mailbox.load(Acquire) != 1 {
                    return false;
                }
                assert_eq!(p.mem.with(|m| unsafe { *m }), 7);
                assert_eq!(p.occupant.load(Acquire), 0);
                p.occupant.store(EMPTY, Release); // replay::free
                true
            })
        };
        // See (a): lets the first execution run the other threads first.
        thread::yield_now();
        if third_retires {
            // `registry::reclaim`: only once no pass is active.
            if p.active.load(Acquire) == 0 && p.try_retire(check_live) {
                assert_eq!(p.state.load(Relaxed), DEAD);
                assert!(!p.take(), "a dead instance is never taken");
            }
        } else {
            p.pass(9, None);
        }
        t1.join().unwrap();
        if !t2.join().unwrap() && mailbox.load(Acquire) == 1 {
            // Freed late, after everything else.
            assert_eq!(p.mem.with(|m| unsafe { *m }), 7);
            p.occupant.store(EMPTY, Release);
        }
    });
}

#[test]
fn b_pool_take_release_with_a_slot_freed_elsewhere() {
    pool(false, true);
}

#[test]
fn b_pool_retirement_waits_for_live_slots() {
    pool(true, true);
}

#[test]
#[should_panic]
fn b_pool_retirement_fails_without_the_live_check() {
    pool(true, false);
}

// ---------------------------------------------------------------------------------------
// (c) Plan publication. Mirrors `pass::choose` (enter, SeqCst fence, load,
// `Slabs::acquire` counting in `active`, leave) and `Slabs::release` for a pass;
// `KeyEntry::publish` (swap, SeqCst fence) and `registry::reclaim` (SeqCst fence, the
// `quiescent` latch, then `active`) for the re-planning thread. `report::report` and
// `registry::totals` read a plan the same way as `choose` (without `active`).
// Plans are slots in an array: 1 is the published one, 2 the replacement.
// ---------------------------------------------------------------------------------------

struct Plan {
    active: AtomicU32,
    freed: UnsafeCell<bool>,
}

struct Entry {
    slabs: AtomicUsize,
    entering: AtomicU32,
    plans: [Plan; 3],
}

fn publication(fenced: bool) {
    model(move || {
        let e = Arc::new(Entry {
            slabs: AtomicUsize::new(1),
            entering: AtomicU32::new(0),
            plans: std::array::from_fn(|_| Plan {
                active: AtomicU32::new(0),
                freed: UnsafeCell::new(false),
            }),
        });
        let pass = {
            let e = e.clone();
            thread::spawn(move || {
                // pass::choose
                e.entering.fetch_add(1, AcqRel);
                if fenced {
                    fence(SeqCst);
                }
                let idx = e.slabs.load(Acquire);
                let plan = &e.plans[idx];
                plan.active.fetch_add(1, AcqRel); // Slabs::acquire
                e.entering.fetch_sub(1, AcqRel);
                // The pass uses its plan and instance ...
                plan.freed
                    .with(|f| assert!(!unsafe { *f }, "use after free"));
                // ... and ends: Slabs::release.
                plan.active.fetch_sub(1, AcqRel);
            })
        };
        // KeyEntry::publish
        let old = e.slabs.swap(2, AcqRel);
        if fenced {
            fence(SeqCst);
        }
        // registry::reclaim, twice (it runs at every pass boundary).
        let mut quiescent = false;
        for _ in 0..2 {
            if fenced {
                fence(SeqCst);
            }
            if !quiescent {
                quiescent = e.entering.load(Acquire) == 0;
            }
            if quiescent && e.plans[old].active.load(Acquire) == 0 {
                e.plans[old].freed.with_mut(|f| unsafe { *f = true });
                break;
            }
        }
        pass.join().unwrap();
    });
}

#[test]
fn c_plan_publication_with_fences() {
    publication(true);
}

#[test]
#[should_panic]
fn c_plan_publication_without_fences_is_a_use_after_free() {
    publication(false);
}
