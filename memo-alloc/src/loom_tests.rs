//! Loom models of the lock-free protocols, run on this crate's real code.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p memo-alloc --lib --release loom_tests -- --test-threads=1
//! ```
//!
//! Under `cfg(loom)`, `sync.rs` gives the protocol objects loom's atomics and owner
//! cells, so these models drive the real `hit::claim` and `free::free` (slot hand-off),
//! `Slabs::take`/`park`/`release`/`try_retire` (the instance pool), and the real key state
//! machine with `Readers` and `Reclaimer` (publication, eviction, reclamation). Slab memory
//! is modelled by loom cells the threads write while they own a block: loom fails a model
//! when two accesses to a cell are not ordered by happens-before, which is exactly "a slot
//! handed out (or memory freed) while another thread may still use it". A plan's
//! `probe` cell is read by passes registered with it and written when it is freed.
//!
//! Which mutation of the source each model catches (each checked by hand):
//! weakening `free::free`'s store or `hit::claim`'s loads to `Relaxed` fails `hand_off`;
//! `claim` storing the slot in its first group's word only (not every group it covers)
//! fails `hand_off` and `pool`;
//! `free` clearing every non-empty word from its slot's first (not only the run holding
//! its slot) fails `free_stops_at_its_run`;
//! parking without the live-slot check, or with `slots_live`'s loads `Relaxed`, fails
//! `park_and_lend`;
//! a hand-out not checking its first group's block word fails `whole_block_hand_off`,
//! and a slot not storing itself in the blocks it covers whole fails
//! `hand_off_to_a_whole_block` (the hand-out inside the block is then not refused);
//! `free` reading its run's next word after clearing the run's first (so after the
//! slot is seen free) fails `free_then_reclaim`;
//! removing either `SeqCst` fence of `registry/reclaim.rs` fails `publication`;
//! `RunStack::push`'s CAS or `take_all`'s swap `Relaxed` fails
//! `run_stack_hands_every_run_over_once`;
//! a lane cell's free (`fetch_and`) or hand-out (`fetch_or`) `Relaxed` fails
//! `lane_cell_hand_off`; parking that gives the lane block back without seeing its cells
//! free fails `park_with_a_cell_elsewhere`; clearing a context's kept cells
//! (`FreedCells::flush`) with a load and a store instead of `fetch_and` fails
//! `kept_cell_beside_a_free_elsewhere`;
//! a replayed pass noting its divergence window after releasing its plan (so that a
//! successor allocated where the freed plan was is marked stale by the old plan's pass)
//! fails `failing_replay_racing_eviction_and_publication`;
//! a shape class published to its key's class table with a `Relaxed` store, or read
//! from it with a `Relaxed` load, fails `class_publication`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicBool;
use loom::thread;

use crate::format::trace::{
    PlanFile, PlanLanes, PlanSlot, TraceScope, FORMAT_VERSION, PLAN_FORMAT,
};
use crate::memory::run_stack::{Run, RunStack};
use crate::registry::reclaim::Reclaimer;
use crate::registry::{KeyEntry, KeyState, Signature};
use crate::replay::slab::cells::FreedCells;
use crate::replay::slab::compile::{CompiledPlan, Slot};
use crate::replay::slab::instance::Instance;
use crate::replay::slab::pool::{Lend, Slabs};
use crate::replay::{free, hit};

fn model(f: impl Fn() + Sync + Send + 'static) {
    // One model at a time: the models share the process's region and idle lists, so two
    // explored in parallel would see each other's state (loom requires determinism).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    let runs = runs.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("loom explored {runs} interleavings");
    assert!(runs > 1, "loom explored one interleaving only: see `spawn`");
}

/// Spawns a model thread whose first operation is a store the spawning thread loads
/// right after. loom 0.7 explores no other interleaving when a new thread's first
/// operation is an atomic load that does not conflict with its spawner's next one
/// (tokio-rs/loom#392): the slot hand-off models, whose threads start by loading the
/// instance's base, each ran one interleaving only. The conflicting pair gives its
/// partial-order reduction a race to backtrack on. (Yielding after the spawn instead
/// would run the new thread's first operation first in every interleaving.)
/// [`model`] asserts that more than one interleaving was explored.
fn spawn<T: 'static>(f: impl FnOnce() -> T + 'static) -> thread::JoinHandle<T> {
    let started = Arc::new(AtomicBool::new(false));
    let seen = started.clone();
    let handle = thread::spawn(move || {
        started.store(true, Ordering::Relaxed);
        f()
    });
    seen.load(Ordering::Relaxed);
    handle
}

/// Slot 0: bytes 0..64 (group 0); slot 1: bytes 32..64 (group 1), covered by group 0.
fn plan() -> CompiledPlan {
    plan_of(&[(0, 64), (32, 32)])
}

/// A plan of one scope whose slots are at these `(offset, size)`.
fn plan_of(slots: &[(u64, u64)]) -> CompiledPlan {
    plan_with_lanes(slots, PlanLanes::default())
}

/// Lanes of one 16-byte cell.
fn one_cell() -> PlanLanes {
    PlanLanes {
        max: 16,
        cells: vec![1],
        requests: 0,
        ..PlanLanes::default()
    }
}

/// [`plan_of`], with `lanes` beside the slots.
fn plan_with_lanes(slots: &[(u64, u64)], lanes: PlanLanes) -> CompiledPlan {
    let slot = |ordinal, offset, size| PlanSlot {
        scope: 0,
        ordinal,
        size,
        min_size: None,
        align: 16,
        offset: Some(offset),
        lifetime: None,
    };
    let file = PlanFile {
        format: PLAN_FORMAT.into(),
        version: FORMAT_VERSION,
        key: "loom".into(),
        strategy: "test".into(),
        height: slots.iter().map(|s| s.0 + s.1).max().unwrap_or(0),
        lower_bound: 64,
        naive: slots.iter().map(|s| s.1).sum(),
        scopes: vec![TraceScope {
            id: 0,
            parent: None,
            name: "loom".into(),
            occurrence: 0,
            enter: None,
            exit: None,
        }],
        slots: (0..)
            .zip(slots)
            .map(|(i, &(offset, size))| slot(i, offset, size))
            .collect(),
        lanes,
    };
    CompiledPlan::compile(&file).expect("a valid plan")
}

/// A slab's memory in 32-byte units, each a loom cell.
struct Memory([UnsafeCell<u32>; 4]);

impl Memory {
    fn new() -> Memory {
        Memory(std::array::from_fn(|_| UnsafeCell::new(0)))
    }

    /// The owner of `slot` uses its memory.
    fn write(&self, slot: &Slot) {
        self.write_at(slot.offset, slot.size);
    }

    /// The owner of bytes `offset..offset + size` uses them.
    fn write_at(&self, offset: u64, size: u64) {
        let units = offset as usize / 32..(offset + size).div_ceil(32) as usize;
        for cell in &self.0[units] {
            // SAFETY: loom checks the access is ordered after every other one.
            cell.with_mut(|p| unsafe { *p += 1 });
        }
    }
}

/// Slab memory by address, one loom cell per address written: for models whose blocks
/// change instances and roles (a slots' block given back may become a lane block).
#[derive(Default)]
struct Addresses(std::sync::Mutex<Vec<(usize, Arc<UnsafeCell<u32>>)>>);

impl Addresses {
    /// The holder of the memory at `p` uses it.
    fn write(&self, p: *mut u8) {
        let cell = {
            // A std lock: loom sees no order through it.
            let mut cells = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match cells.iter().find(|(at, _)| *at == p as usize) {
                Some((_, cell)) => cell.clone(),
                None => {
                    let cell = Arc::new(UnsafeCell::new(0));
                    cells.push((p as usize, cell.clone()));
                    cell
                }
            }
        };
        // SAFETY: loom checks the access is ordered after every other one.
        cell.with_mut(|x| unsafe { *x += 1 });
    }
}

/// Raw pointers handed between model threads (the program's own pointer hand-off).
#[derive(Clone, Copy)]
struct Shared(*mut Instance, *mut u8);

// SAFETY: the instance and slab outlive the model's threads.
unsafe impl Send for Shared {}

/// A pass registers with the plan and takes an instance (`None`: unregistered again).
fn acquire(slabs: &Slabs) -> Option<*mut Instance> {
    slabs.register();
    let inst = slabs.take(Lend::Nothing);
    if inst.is_none() {
        // SAFETY: registered above, no instance taken.
        unsafe { slabs.release(std::ptr::null_mut(), false, Lend::Nothing) };
    }
    inst
}

/// Tries to hand out `slot` of `inst`; on success its memory is used.
fn try_claim(plan: &CompiledPlan, inst: *mut Instance, slot: u32, mem: &Memory) -> bool {
    // SAFETY: the instance lives as long as its pool.
    let inst = unsafe { &*inst };
    let ok = hit::claim(inst, slot, &plan.slots[slot as usize]);
    if ok {
        mem.write(&plan.slots[slot as usize]);
    }
    ok
}

/// Hands slot `slot` of `inst` (live, handed out by the caller) to another thread, which
/// uses its memory and frees it.
fn free_elsewhere(inst: *mut Instance, slot: u32, mem: &Arc<Memory>) -> thread::JoinHandle<()> {
    // SAFETY: the caller holds the instance (it has a block while the slot is live); the
    // plan outlives it.
    let (offset, size) = unsafe {
        let s = &(&*(*inst).plan).slots[slot as usize];
        (s.offset, s.size)
    };
    // SAFETY: as above.
    let shared = Shared(inst, unsafe { (*inst).base().add(offset as usize) });
    let m = mem.clone();
    spawn(move || {
        let Shared(inst, p) = shared;
        m.write_at(offset, size);
        // SAFETY: `p` is the slot's live pointer, freed once.
        unsafe { free::free(inst.cast(), p) };
    })
}

/// The owner hands out slot `live` of a fresh pool of `plan`; another thread uses and
/// frees it while the owner hands out slot `next`, which overlaps it: `next` is refused
/// until the free, and its use of the memory comes after the free's. Returns the pool
/// and its instance, with `next` live.
fn hand_off_between(plan: CompiledPlan, live: u32, next: u32) -> (&'static Slabs, *mut Instance) {
    let slabs: &'static Slabs = Box::leak(Slabs::new(plan, 1).unwrap());
    let mem = Arc::new(Memory::new());
    let inst = acquire(slabs).unwrap();
    assert!(try_claim(&slabs.plan, inst, live, &mem));
    let freer = free_elsewhere(inst, live, &mem);
    let got = try_claim(&slabs.plan, inst, next, &mem);
    freer.join().unwrap();
    if !got {
        assert!(
            try_claim(&slabs.plan, inst, next, &mem),
            "free after the join"
        );
    }
    (slabs, inst)
}

/// Lane cell hand-off: the owner takes the only 16-byte cell, another thread uses and
/// frees it while the owner asks for a cell of the class again: refused until the free,
/// and its use of the memory comes after the free's.
#[test]
fn lane_cell_hand_off() {
    model(|| {
        let plan = plan_with_lanes(&[], one_cell());
        let slabs: &'static Slabs = Box::leak(Slabs::new(plan, 1).unwrap());
        let mem = Arc::new(Memory::new());
        let inst = acquire(slabs).unwrap();
        // SAFETY: the instance lives as long as its pool, which is leaked.
        let i = unsafe { &*inst };
        let layout = &slabs.plan.lanes;
        let offset = i.lanes.alloc(layout, 0).expect("a free cell");
        mem.write_at(offset, 16);
        // SAFETY: the cell lies in the instance's lane block, held by this pass.
        let shared = Shared(inst, unsafe { i.lane_base().add(offset as usize) });
        let m = mem.clone();
        let freer = spawn(move || {
            let Shared(inst, p) = shared;
            m.write_at(offset, 16);
            // SAFETY: `p` is the cell's live pointer, freed once.
            unsafe { free::free(inst.cast(), p) };
        });
        let again = i.lanes.alloc(layout, 0);
        if let Some(o) = again {
            mem.write_at(o, 16);
        }
        freer.join().unwrap();
        if again.is_none() {
            let o = i.lanes.alloc(layout, 0).expect("free after the join");
            mem.write_at(o, 16);
        }
    });
}

/// A lane cell kept for its context (`FreedCells`) beside a free on another thread: the
/// owner keeps cell `a` (its bit stays set) while another thread uses and frees cell `b`
/// of the same bitmap word; the owner's other hand-out never takes `a` and uses `b` only
/// after that thread's last use; the owner takes `a` back, keeps it again and flushes.
/// No update of the word is lost: nothing is live at the end.
#[test]
fn kept_cell_beside_a_free_elsewhere() {
    model(|| {
        let lanes = PlanLanes {
            max: 32,
            cells: vec![0, 2],
            requests: 0,
            ..PlanLanes::default()
        };
        let slabs: &'static Slabs = Box::leak(Slabs::new(plan_with_lanes(&[], lanes), 1).unwrap());
        let mem = Arc::new(Memory::new());
        let inst = acquire(slabs).unwrap();
        // SAFETY: the instance lives as long as its pool, which is leaked.
        let i = unsafe { &*inst };
        let layout = &slabs.plan.lanes;
        let a = i.lanes.alloc(layout, 1).expect("a free cell");
        let b = i.lanes.alloc(layout, 1).expect("a second cell");
        mem.write_at(a, 32);
        mem.write_at(b, 32);
        // SAFETY: the cell lies in the instance's lane block, held by this pass.
        let shared = Shared(inst, unsafe { i.lane_base().add(b as usize) });
        let m = mem.clone();
        let freer = spawn(move || {
            let Shared(inst, p) = shared;
            m.write_at(b, 32);
            // SAFETY: `p` is cell `b`'s live pointer, freed once.
            unsafe { free::free(inst.cast(), p) };
        });
        let mut kept = FreedCells::default();
        kept.put(&i.lanes, layout, a);
        let other = i.lanes.alloc(layout, 1);
        assert_ne!(other, Some(a), "a kept cell is its context's alone");
        if let Some(o) = other {
            mem.write_at(o, 32);
            i.lanes.free(layout, o);
        }
        assert_eq!(kept.take(layout, 1), Some(a));
        mem.write_at(a, 32);
        kept.put(&i.lanes, layout, a);
        kept.flush(&i.lanes);
        freer.join().unwrap();
        assert!(!i.lanes.any_live());
    });
}

/// Slot hand-off: the owner hands out slot 0, another thread uses and frees it while the
/// owner tries to hand out slot 1, which overlaps it.
#[test]
fn hand_off() {
    model(|| {
        hand_off_between(plan(), 0, 1);
    });
}

/// A free clears the run of words holding its slot and stops there: slot 0 (bytes 0..32)
/// is freed on another thread while the owner hands out slot 1 (32..64), the group right
/// after slot 0's run; slot 2 (0..64) must then still be refused.
#[test]
fn free_stops_at_its_run() {
    model(|| {
        let slabs: &'static Slabs =
            Box::leak(Slabs::new(plan_of(&[(0, 32), (32, 32), (0, 64)]), 1).unwrap());
        let mem = Arc::new(Memory::new());
        let inst = acquire(slabs).unwrap();
        assert!(hit::claim(
            // SAFETY: the instance lives as long as its pool.
            unsafe { &*inst },
            0,
            &slabs.plan.slots[0]
        ));
        // SAFETY: the caller holds the instance.
        let shared = Shared(inst, unsafe { (*inst).base() });
        let freer = spawn(move || {
            let Shared(inst, p) = shared;
            // SAFETY: `p` is slot 0's live pointer, freed once.
            unsafe { free::free(inst.cast(), p) };
        });
        assert!(
            try_claim(&slabs.plan, inst, 1, &mem),
            "disjoint from slot 0"
        );
        freer.join().unwrap();
        assert!(!try_claim(&slabs.plan, inst, 2, &mem), "slot 1 is live");
    });
}

/// A plan may be freed the moment its last live slot is seen free: the free of that slot
/// on another thread must not touch the instance after the store that makes it free.
/// Slot 0 (bytes 0..32) is freed on another thread while the owner puts the instance
/// back, retires the plan and frees it; the word after slot 0's run (slot 1's group) is
/// where a free that reads one word past its run would read freed memory.
#[test]
fn free_then_reclaim() {
    model(|| {
        let slabs = Box::into_raw(Slabs::new(plan_of(&[(0, 32), (32, 32)]), 1).unwrap());
        // SAFETY: freed below only once retired, after its last use here.
        let s = unsafe { &*slabs };
        let inst = acquire(s).unwrap();
        // SAFETY: the instance lives as long as its pool.
        assert!(hit::claim(unsafe { &*inst }, 0, &s.plan.slots[0]));
        // SAFETY: the caller holds the instance.
        let shared = Shared(inst, unsafe { (*inst).base() });
        let freer = spawn(move || {
            let Shared(inst, p) = shared;
            // SAFETY: `p` is slot 0's live pointer, freed once.
            unsafe { free::free(inst.cast(), p) };
        });
        // SAFETY: acquired above; this pass is over.
        unsafe { s.release(inst, false, Lend::Nothing) };
        if s.try_retire() {
            // SAFETY: retired: no pass holds an instance and no slot is live.
            drop(unsafe { Box::from_raw(slabs) });
        }
        freer.join().unwrap();
    });
}

/// Slot 0 covers all four groups of the slab, the second block of two groups whole
/// (blocks of 2 groups under loom): it holds that block's word, not its groups'. Slot 1
/// is a group inside that block, slot 2 the group before it.
fn whole_block_plan() -> CompiledPlan {
    plan_of(&[(0, 128), (64, 32), (32, 32), (96, 32)])
}

/// A slot over a whole block is freed on another thread while the owner hands out a slot
/// inside that block: the hand-out sees the block word until the free, and its use of
/// the memory comes after the free's.
#[test]
fn whole_block_hand_off() {
    model(|| {
        let (slabs, inst) = hand_off_between(whole_block_plan(), 0, 1);
        // SAFETY: the instance lives as long as its pool.
        let claimed = hit::claim(unsafe { &*inst }, 0, &slabs.plan.slots[0]);
        assert!(!claimed, "slot 1 is live");
    });
}

/// A slot inside a block is freed on another thread while the owner hands out the slot
/// that covers that block whole: refused until the free, used after it.
#[test]
fn hand_off_to_a_whole_block() {
    model(|| {
        let (slabs, inst) = hand_off_between(whole_block_plan(), 1, 0);
        // SAFETY: the instance lives as long as its pool.
        let claimed = hit::claim(unsafe { &*inst }, 3, &slabs.plan.slots[3]);
        assert!(!claimed, "slot 0 is live");
    });
}

/// The pool: an instance put back with a live slot (pinned) is reused only with that
/// slot protected, and retired only once it is drained and no pass holds it.
#[test]
fn pool() {
    model(|| {
        let slabs: &'static Slabs = Box::leak(Slabs::new(plan(), 1).unwrap());
        let mem = Arc::new(Memory::new());
        let inst = acquire(slabs).unwrap();
        assert!(try_claim(&slabs.plan, inst, 0, &mem));
        let freer = free_elsewhere(inst, 0, &mem);
        let m = mem.clone();
        let reuser = spawn(move || {
            if let Some(i) = acquire(slabs) {
                try_claim(&slabs.plan, i, 1, &m);
                // SAFETY: acquired here; the pass is over. (Slot 1 may stay live: the
                // instance is pinned then.)
                unsafe { slabs.release(i, false, Lend::Nothing) };
            }
        });
        // SAFETY: acquired above; this pass is over.
        unsafe { slabs.release(inst, false, Lend::Nothing) };
        reuser.join().unwrap();
        freer.join().unwrap();
        // Free whatever the reuser left live, then retire: the memory may then be reused.
        let i = acquire(slabs).unwrap();
        // SAFETY: held; frees of live slots with their own pointers.
        unsafe {
            for g in 0..2u32 {
                let live = (*i).occupant[g as usize].load(crate::support::sync::Ordering::Acquire);
                // A live slot is in every group it covers: free it at its first.
                if live != crate::replay::slab::instance::EMPTY
                    && slabs.plan.slots[live as usize].group == g
                {
                    let off = slabs.plan.slots[live as usize].offset as usize;
                    free::free(i.cast(), (*i).base().add(off));
                }
            }
            slabs.release(i, false, Lend::Nothing);
        }
        assert!(slabs.try_retire(), "drained and idle");
        mem.write(&slabs.plan.slots[0]);
    });
}

/// An async pass between two polls gives its block back (`Slabs::park`) only once the
/// slot another thread frees is seen free, and the next pass to take the block uses it
/// after that free: never under the freeing thread's last access.
#[test]
fn park_and_lend() {
    model(|| {
        let slabs: &'static Slabs = Box::leak(Slabs::new(plan(), 2).unwrap());
        let mem = Arc::new(Memory::new());
        let a = acquire(slabs).unwrap();
        assert!(try_claim(&slabs.plan, a, 0, &mem));
        let freer = free_elsewhere(a, 0, &mem);
        // SAFETY: `a` is held by this pass, which hands out nothing while parked.
        if unsafe { slabs.park(a) } {
            // Another pass takes the block (the only idle one of this size it gave back
            // last) and uses all of it.
            let b = acquire(slabs).unwrap();
            assert!(try_claim(&slabs.plan, b, 0, &mem));
            // SAFETY: held; its pass is over (slot 0 stays live: pinned).
            unsafe { slabs.release(b, false, Lend::Nothing) };
        }
        freer.join().unwrap();
    });
}

/// An async pass parks while another thread uses and frees its cell: the slots' block
/// goes to the idle list at once, the lane block only once the free is seen; a second
/// pass takes its blocks from the idle list (either may be either) and uses its slot and
/// its cell: never under the freeing thread's accesses.
#[test]
fn park_with_a_cell_elsewhere() {
    model(|| {
        let plan = plan_with_lanes(&[(0, 64)], one_cell());
        let slabs: &'static Slabs = Box::leak(Slabs::new(plan, 2).unwrap());
        let mem = Arc::new(Addresses::default());
        let a = acquire(slabs).unwrap();
        // SAFETY: the instance lives as long as its pool, which is leaked.
        let i = unsafe { &*a };
        let offset = i.lanes.alloc(&slabs.plan.lanes, 0).expect("a free cell");
        // SAFETY: the cell lies in the instance's lane block, held by this pass.
        let cell = unsafe { i.lane_base().add(offset as usize) };
        mem.write(cell);
        let shared = Shared(a, cell);
        let m = mem.clone();
        let freer = spawn(move || {
            let Shared(inst, p) = shared;
            m.write(p);
            // SAFETY: `p` is the cell's live pointer, freed once.
            unsafe { free::free(inst.cast(), p) };
        });
        // SAFETY: `a` is held by this pass, which hands out nothing while parked.
        if unsafe { slabs.park(a) } {
            let b = acquire(slabs).unwrap();
            // SAFETY: as above.
            let j = unsafe { &*b };
            mem.write(j.base()); // slot 0
            if let Some(o) = j.lanes.alloc(&slabs.plan.lanes, 0) {
                // SAFETY: the cell lies in `b`'s lane block, held by its pass.
                mem.write(unsafe { j.lane_base().add(o as usize) });
            }
        }
        freer.join().unwrap();
    });
}

/// A pass reading a key's plan (enter the readers, load the plan, register by taking an
/// instance, use it) against a re-profile replacing that plan and reclaiming the old one
/// at every pass boundary: the reader is never left with a freed plan. Without the
/// `SeqCst` fences of `reclaim.rs` this is a store-buffering race and the model fails.
#[test]
fn publication() {
    model(|| {
        let (entry, reclaimer) = planned_key();
        let a = entry.state().plan();
        let reader = spawn(move || read_and_use(entry));
        assert!(entry.mark_stale(a) && entry.begin_profile());
        // SAFETY: a fresh plan, given to the key (only the profiler publishes).
        unsafe { entry.publish(new_plan(), reclaimer).unwrap() };
        reclaimer.reclaim();
        reclaimer.reclaim();
        reader.join().unwrap();
    });
}

/// A fresh plan of one instance.
fn new_plan() -> *mut Slabs {
    Box::into_raw(Slabs::new(plan(), 1).unwrap())
}

/// A key (leaked, as the registry's are) that holds a published plan, and its reclaimer.
fn planned_key() -> (&'static KeyEntry, &'static Reclaimer) {
    let entry: &'static KeyEntry = Box::leak(KeyEntry::new("k", 1).unwrap());
    let reclaimer: &'static Reclaimer = Box::leak(Box::new(Reclaimer::new()));
    assert!(entry.begin_profile());
    // SAFETY: a fresh plan, given to the key.
    unsafe { entry.publish(new_plan(), reclaimer).unwrap() };
    (entry, reclaimer)
}

/// What a pass does with a key's plan: see [`publication`].
fn read_and_use(entry: &'static KeyEntry) {
    let (guard, s) = entry.read();
    if s.is_null() {
        return;
    }
    // SAFETY: the read guard keeps the plan from being freed until we register.
    let slabs = unsafe { &*s };
    let inst = acquire(slabs);
    drop(guard);
    if let Some(i) = inst {
        // SAFETY: loom checks this read is ordered before the plan's free.
        slabs.probe.with(|p| unsafe { assert_ne!(*p, u32::MAX) });
        // SAFETY: acquired above; the pass is over.
        unsafe { slabs.release(i, false, Lend::Nothing) };
    }
}

/// The key's state machine under a re-profile, an eviction and a reader at once: no
/// transition is lost (a publication racing an eviction), every plan taken out of the
/// key is freed once unused, and the reader never uses a freed plan.
#[test]
fn publication_and_eviction() {
    model(|| {
        let (entry, reclaimer) = planned_key();
        let a = entry.state().plan();
        let replanner = spawn(move || {
            entry.mark_stale(a);
            if entry.begin_profile() {
                // SAFETY: a fresh plan, given to the key (only the profiler publishes).
                unsafe { entry.publish(new_plan(), reclaimer).unwrap() };
            }
        });
        let evictor = spawn(move || {
            entry.evict(reclaimer);
        });
        let reader = spawn(move || read_and_use(entry));
        reclaimer.reclaim();
        replanner.join().unwrap();
        evictor.join().unwrap();
        reader.join().unwrap();
        reclaimer.reclaim();
        // Every plan taken out of the key was freed; a key that holds a plan names it.
        assert_eq!(reclaimer.pending().0, 0);
        match entry.state() {
            KeyState::Unplanned | KeyState::Profiling(_) => {}
            KeyState::Planned(p) | KeyState::Stale(p) => assert!(!p.is_null()),
        }
    });
}

/// A replayed pass whose every request missed ends (its window fails: see
/// `registry::divergence`) while its plan is evicted, freed, and the key profiled and
/// published again on other threads: the pass notes its window before it lets its plan
/// go (as `pass::finish` does), so it marks stale only the plan it replayed, never a
/// successor that reused the freed plan's address; the failing plan is never left as
/// the key's plan to replay; every plan taken out is freed once unused; and the pass
/// never uses a freed plan. (Letting the plan go first fails the model: the new plan,
/// allocated where the old one was, is marked stale by the old plan's pass.)
#[test]
fn failing_replay_racing_eviction_and_publication() {
    model(|| {
        let (entry, reclaimer) = planned_key();
        // Plans are told apart by their slot count, not their address (which a plan
        // allocated after another was freed may reuse).
        let slots = |p: *mut Slabs| {
            // SAFETY: called only on plans the caller knows to be alive.
            unsafe { (*p).plan.slots.len() }
        };
        let pass = spawn(move || {
            let (guard, s) = entry.read();
            if s.is_null() {
                return None;
            }
            // SAFETY: the read guard keeps the plan from being freed until we register.
            let slabs = unsafe { &*s };
            slabs.register();
            drop(guard);
            // SAFETY: loom checks this read is ordered before the plan's free.
            slabs.probe.with(|p| unsafe { assert_ne!(*p, u32::MAX) });
            let read = slots(s);
            // The pass missed all its requests: a window of one pass fails at once.
            let mut missed = crate::stats::PassCounters {
                allocations: 2,
                ..Default::default()
            };
            missed.misses[crate::stats::MissReason::Overlap as usize] = 2;
            let stale = entry.note_replayed(s, &missed, 1, 0.05);
            // SAFETY: registered above, took no instance; the pass is over.
            unsafe { slabs.release(std::ptr::null_mut(), false, Lend::Nothing) };
            Some((read, stale))
        });
        let replanner = spawn(move || {
            if entry.begin_profile() {
                let b = Box::into_raw(Slabs::new(plan_of(&[(0, 64)]), 1).unwrap());
                // SAFETY: a fresh plan, given to the key (only the profiler publishes).
                unsafe { entry.publish(b, reclaimer).unwrap() };
            }
        });
        entry.evict(reclaimer);
        reclaimer.reclaim();
        let read = pass.join().unwrap();
        replanner.join().unwrap();
        reclaimer.reclaim();
        assert_eq!(reclaimer.pending().0, 0, "every plan taken out was freed");
        match entry.state() {
            // The first plan (two slots) was evicted: only the new one may be held.
            KeyState::Planned(p) => assert_eq!(slots(p), 1, "the evicted plan is back"),
            KeyState::Stale(p) => assert_eq!(
                read,
                Some((slots(p), true)),
                "a plan marked stale by a pass that did not replay it"
            ),
            KeyState::Unplanned | KeyState::Profiling(_) => {}
        }
    });
}

/// Own blocks freed on two threads while a carve takes the stack of runs given back
/// (`run_stack.rs`): every run is taken exactly once, with the chunk count it was pushed
/// with, and its node is read only after it was written.
#[test]
fn run_stack_hands_every_run_over_once() {
    model(|| {
        let stack = Arc::new(RunStack::new());
        let nodes: Vec<usize> = (0..2)
            .map(|_| Box::into_raw(Box::new(std::mem::MaybeUninit::<Run>::uninit())) as usize)
            .collect();
        let pushers: Vec<_> = nodes
            .iter()
            .enumerate()
            .map(|(i, &node)| {
                let stack = stack.clone();
                // SAFETY: each node is a fresh box, given to the stack once.
                spawn(move || unsafe { stack.push(node as *mut Run, i + 1) })
            })
            .collect();
        let mut taken: Vec<(usize, usize)> =
            stack.take_all().map(|(r, c)| (r as usize, c)).collect();
        for p in pushers {
            p.join().unwrap();
        }
        taken.extend(stack.take_all().map(|(r, c)| (r as usize, c)));
        taken.sort_unstable();
        let mut expected = vec![(nodes[0], 1), (nodes[1], 2)];
        expected.sort_unstable();
        assert_eq!(taken, expected);
        for node in nodes {
            // SAFETY: the boxes made above, each freed once; the stack is done with them.
            drop(unsafe { Box::from_raw(node as *mut std::mem::MaybeUninit<Run>) });
        }
    });
}

/// A shape class published to its key's class table (under the registry's insertion lock,
/// which no reader takes) is seen whole by a pass classifying itself at the same time:
/// the class the reader finds has the signature and first size it was made with, never
/// the zeroes of an entry not yet written.
#[test]
fn class_publication() {
    model(|| {
        let own: &'static KeyEntry = Box::leak(KeyEntry::new("shapes", 1).unwrap());
        let mut s = Signature::default();
        s.note(4096, 8, 256);
        let reader = spawn(move || {
            own.each_class()
                .next()
                .map(|c| (c.classes.signature(), c.classes.first()))
        });
        let class: &'static KeyEntry = Box::leak(KeyEntry::new("shapes#1", 2).unwrap());
        class.classes.mark_class(&s, 0);
        assert!(own.add_class(class, 8));
        if let Some(seen) = reader.join().unwrap() {
            assert_eq!(seen, (s.word(0), 4096));
        }
    });
}
