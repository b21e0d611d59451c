//! The pass as a whole: its key, its kind (profile, replay or backend), its slab, and
//! what its contexts hand back when they leave. Shared by its contexts and its handles
//! (reference-counted); how it starts is `start.rs`, how it ends `finish.rs`.
//!
//! Two counts keep it: `refs` (the memory: the owner until it ends the pass, every handle,
//! every entered context) and `active` (the resources, slab instance and recording: the
//! owner until it ends the pass, every entered helper context). The pass is finished, its
//! profile submitted or its instance given back, when `active` reaches zero; its memory is
//! freed when `refs` does. Once the owner ended the pass, helper contexts can no longer be
//! entered (they run on the backend); those already in finish their work first.

use std::ptr;

use crate::profiling::recorder::Recorder;
use crate::registry::KeyEntry;
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::instance::Instance;
use crate::replay::slab::pool::Slabs;
use crate::stats::{AbandonReason, PassCounters, MISS_REASONS};
use crate::support::sync::{plain, Ordering};

/// What a pass does with its allocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PassKind {
    /// Recorded, then served by the backend.
    Profile,
    /// Served from a slab (or missed, with a reason).
    Replay,
    /// Served by the backend and counted.
    Backend,
}

/// A helper context's recording, handed to the pass when the context leaves.
pub(crate) struct Fragment {
    pub(crate) helper: u32,
    /// Order among the pass's fragments (a helper entered twice left two, in this order).
    pub(crate) stamp: u64,
    pub(crate) recorder: Recorder,
    next: *mut Fragment,
}

/// The main context as the pass keeps it: opaque here. It is a `Context` (`context.rs`,
/// which points back to its pass); `enter.rs` checks it out and in, and `finish` frees it.
pub(crate) enum MainContext {}

/// A running pass, shared by its contexts and handles (boxed; freed by the last `refs`).
pub(crate) struct PassState {
    pub(crate) entry: Option<&'static KeyEntry>,
    pub(crate) kind: PassKind,
    /// The plan registered with (replay), or null.
    pub(crate) slabs: *mut Slabs,
    pub(crate) plan: *const CompiledPlan,
    /// The slab instance held (replay), or null: none could be had, or an unbound pass
    /// takes it when its main context is first entered (see `enter::supply`). Set
    /// once; read by threads entering helper contexts.
    inst: plain::AtomicPtr<Instance>,
    /// Whether passes are counted at all (not in mode `off` or a disabled child).
    pub(crate) counted: bool,
    /// Made by `pass()`: owned by the thread that made it (its exit ends the pass).
    pub(crate) bound: bool,
    /// Runs on the backend only until its key's first plan is published (the key is
    /// being profiled or planned): its large blocks are kept off the backend's arenas,
    /// as a profiled pass's are (see `own_blocks`).
    pub(crate) interim: bool,
    /// A pass of a key with shape classes whose class is not known yet: it runs on the
    /// backend until its main context's first requests decide (`classify.rs`).
    pub(crate) undecided: bool,
    refs: plain::AtomicU32,
    active: plain::AtomicU32,
    ended: plain::AtomicBool,
    /// The main context while no thread has it entered.
    main: plain::AtomicPtr<MainContext>,
    fragments: plain::AtomicPtr<Fragment>,
    stamps: plain::AtomicU64,
    /// Counters of helper contexts that left.
    allocations: plain::AtomicU64,
    slab_hits: plain::AtomicU64,
    slab_bytes: plain::AtomicU64,
    diverged_bytes: plain::AtomicU64,
    skipped: plain::AtomicU64,
    misses: [plain::AtomicU64; MISS_REASONS],
    /// The pass was cut short (0: no; else 1 + the reason's index).
    abandoned: plain::AtomicU8,
}

// SAFETY: the raw pointers are the pass's plan, slab and instance (shared by design, their
// hand-off protocols are atomic) and the main context and fragments (moved between threads
// only through the atomics here); everything else is atomic or immutable.
unsafe impl Send for PassState {}
// SAFETY: as above.
unsafe impl Sync for PassState {}

impl PassState {
    /// A pass of `entry` (counted unless `counted` is false), of kind `Backend` until its
    /// start chooses; the owner holds one reference and one activity.
    pub(crate) fn new(entry: Option<&'static KeyEntry>, counted: bool) -> PassState {
        PassState {
            entry,
            kind: PassKind::Backend,
            slabs: ptr::null_mut(),
            plan: ptr::null(),
            inst: plain::AtomicPtr::new(ptr::null_mut()),
            counted,
            bound: false,
            interim: false,
            undecided: false,
            refs: plain::AtomicU32::new(1),
            active: plain::AtomicU32::new(1),
            ended: plain::AtomicBool::new(false),
            main: plain::AtomicPtr::new(ptr::null_mut()),
            fragments: plain::AtomicPtr::new(ptr::null_mut()),
            stamps: plain::AtomicU64::new(0),
            allocations: plain::AtomicU64::new(0),
            slab_hits: plain::AtomicU64::new(0),
            slab_bytes: plain::AtomicU64::new(0),
            diverged_bytes: plain::AtomicU64::new(0),
            skipped: plain::AtomicU64::new(0),
            misses: [const { plain::AtomicU64::new(0) }; MISS_REASONS],
            abandoned: plain::AtomicU8::new(0),
        }
    }

    /// The slab instance the pass holds (replay), or null.
    pub(crate) fn inst(&self) -> *mut Instance {
        self.inst.load(Ordering::Acquire)
    }

    /// Records the instance the pass took (once).
    pub(crate) fn set_inst(&self, inst: *mut Instance) {
        debug_assert!(self.inst.load(Ordering::Relaxed).is_null());
        self.inst.store(inst, Ordering::Release);
    }

    /// Takes one more reference (a handle, an entered context).
    pub(crate) fn retain(&self) {
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the owner's is the only reference: no handle and no helper context exists
    /// (and, while the owner holds the pass exclusively, none can be made).
    pub(crate) fn alone(&self) -> bool {
        self.refs.load(Ordering::Acquire) == 1
    }

    /// Gives a reference back; `true` for the last one (the caller frees the pass).
    pub(crate) fn release(&self) -> bool {
        self.refs.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// A helper context becomes active, unless the pass ended (or is finishing).
    pub(crate) fn activate(&self) -> bool {
        let mut a = self.active.load(Ordering::Acquire);
        loop {
            if a == 0 || self.ended.load(Ordering::Acquire) {
                return false;
            }
            match self
                .active
                .compare_exchange_weak(a, a + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => a = now,
            }
        }
    }

    /// A holder of the pass's resources is done; `true` for the last (the caller finishes
    /// the pass: every context's counts and recordings are in by then).
    pub(crate) fn deactivate(&self) -> bool {
        self.active.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The owner ends the pass: no helper context may be entered from now on.
    pub(crate) fn mark_ended(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Takes the main context (null if a thread has it entered).
    pub(crate) fn check_out_main(&self) -> *mut MainContext {
        self.main.swap(ptr::null_mut(), Ordering::AcqRel)
    }

    /// Gives the main context back.
    pub(crate) fn check_in_main(&self, main: *mut MainContext) {
        debug_assert!(self.main.load(Ordering::Relaxed).is_null());
        self.main.store(main, Ordering::Release);
    }

    /// Adds the counts of a helper context that left.
    pub(crate) fn add_counters(&self, c: &PassCounters) {
        let r = Ordering::Relaxed;
        self.allocations.fetch_add(c.allocations, r);
        self.slab_hits.fetch_add(c.slab_hits, r);
        self.slab_bytes.fetch_add(c.slab_bytes, r);
        self.diverged_bytes.fetch_add(c.diverged_bytes, r);
        self.skipped.fetch_add(c.skipped, r);
        for (a, &m) in self.misses.iter().zip(&c.misses) {
            if m != 0 {
                a.fetch_add(m, r);
            }
        }
    }

    /// The counts of the helper contexts that left.
    pub(crate) fn helper_counters(&self) -> PassCounters {
        let r = Ordering::Relaxed;
        PassCounters {
            allocations: self.allocations.load(r),
            slab_hits: self.slab_hits.load(r),
            lane_hits: 0, // the matching's clock of a context, not reported
            slab_bytes: self.slab_bytes.load(r),
            diverged_bytes: self.diverged_bytes.load(r),
            skipped: self.skipped.load(r),
            misses: std::array::from_fn(|i| self.misses[i].load(r)),
        }
    }

    /// Notes that the pass was cut short (by its owner or one of its contexts); the
    /// first reason stays.
    pub(crate) fn note_abandoned(&self, reason: AbandonReason) {
        let _ = self.abandoned.compare_exchange(
            0,
            reason as u8 + 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// The index of the reason the pass was cut short, if it was.
    pub(crate) fn abandoned(&self) -> Option<usize> {
        (self.abandoned.load(Ordering::Relaxed) as usize).checked_sub(1)
    }

    /// Hands a helper context's recording to the pass (a lock-free push). Out of memory,
    /// the recording is dropped and the profile abandoned.
    pub(crate) fn push_fragment(&self, helper: u32, recorder: Recorder) {
        let stamp = self.stamps.fetch_add(1, Ordering::Relaxed);
        let Some(f) = crate::support::fallible::try_box(Fragment {
            helper,
            stamp,
            recorder,
            next: ptr::null_mut(),
        }) else {
            self.note_abandoned(AbandonReason::OutOfMemory);
            return;
        };
        let f = Box::into_raw(f);
        let mut head = self.fragments.load(Ordering::Acquire);
        loop {
            // SAFETY: `f` is ours until published by the CAS.
            unsafe { (*f).next = head };
            match self
                .fragments
                .compare_exchange_weak(head, f, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// The helpers' recordings, by helper then in the order they were left (when the pass
    /// is finished: no context is left to push). `None` when the list cannot be allocated:
    /// the recordings are dropped.
    pub(crate) fn take_fragments(&self) -> Option<Vec<Fragment>> {
        let mut p = self.fragments.swap(ptr::null_mut(), Ordering::AcqRel);
        let mut out = Vec::new();
        while !p.is_null() {
            // SAFETY: every node was made by `Box::into_raw` in `push_fragment` and is
            // reachable only from this list, now detached.
            let f = *unsafe { Box::from_raw(p) };
            p = f.next;
            if out.try_reserve(1).is_err() {
                drop(f);
                Self::drop_list(p);
                return None;
            }
            out.push(f);
        }
        out.sort_by_key(|f| (f.helper, f.stamp));
        Some(out)
    }

    /// Frees a detached list of fragments from `p` on.
    fn drop_list(mut p: *mut Fragment) {
        while !p.is_null() {
            // SAFETY: as in `take_fragments`: a detached node made by `Box::into_raw`.
            let f = unsafe { Box::from_raw(p) };
            p = f.next;
        }
    }
}

impl Drop for PassState {
    fn drop(&mut self) {
        // `finish` runs before the last reference goes (every path that frees a pass
        // finished it) and frees the main context.
        debug_assert!(self.main.get_mut().is_null(), "a pass freed unfinished");
        Self::drop_list(*self.fragments.get_mut());
    }
}
