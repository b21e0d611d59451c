//! What a context holds to replay its pass ([`Replayer`]: the slab instance it hands out
//! from, the plan, what its matching found out so far), and what replay reads of the
//! context ([`ReplayContext`]).

use crate::registry::Signature;
use crate::replay::slab::cells::FreedCells;
use crate::replay::slab::compile::CompiledPlan;
use crate::replay::slab::instance::Instance;
use crate::replay::state::{Lost, Shrink, NO_SLOT};
use crate::stats::PassCounters;

/// A pass context as replay sees it (`pass::context::Context`): its replay, the scope node
/// its requests are made in now, and its counters.
pub(crate) trait ReplayContext {
    /// The context's replay.
    fn replayer(&mut self) -> &mut Replayer;
    /// The innermost scope node of the context.
    fn node(&self) -> u32;
    /// The context's counters.
    fn counters(&mut self) -> &mut PassCounters;
}

/// One context's replay (see the module documentation). Fields the allocation path reads
/// come first.
pub(crate) struct Replayer {
    /// The slab instance the context hands out from, or null: none (its requests then go
    /// to the backend).
    pub(crate) inst: *mut Instance,
    pub(crate) plan: *const CompiledPlan,
    /// The base of the instance's slots' block (null: none).
    pub(crate) base: *mut u8,
    /// The base of the instance's lane block (null: none).
    pub(crate) lane_base: *mut u8,
    /// The node, and its cursor's `next` and `pending`, as they were before the last
    /// missed request (see `hit::undo`).
    pub(crate) undo: (u32, u32, u32),
    /// Whether this replay is of a smaller shape than its plan's (`matching.rs`, rule 5).
    pub(crate) shrink: Shrink,
    /// The requests missed in a row, for finding the place again (`matching.rs`, rule 7).
    pub(crate) lost: Lost,
    /// The first requests above the lane bound (see `registry::Signature::note_large`).
    pub(crate) signature: Signature,
    /// Lane cells of `inst` freed on the context's thread, kept for its next requests
    /// (see `cells.rs`): cleared when the context stops handing out from `inst`.
    pub(crate) freed: FreedCells,
}

impl Replayer {
    /// A replay of `plan` (null: not a replay) from `inst` (null: no instance).
    ///
    /// # Safety
    /// `inst` is null or an instance the pass holds, with its blocks, until it is finished.
    pub(crate) unsafe fn new(inst: *mut Instance, plan: *const CompiledPlan) -> Replayer {
        let mut r = Replayer {
            inst: std::ptr::null_mut(),
            plan,
            base: std::ptr::null_mut(),
            lane_base: std::ptr::null_mut(),
            undo: (u32::MAX, NO_SLOT, NO_SLOT),
            shrink: Shrink::Off,
            lost: Lost::default(),
            signature: Signature::default(),
            freed: FreedCells::default(),
        };
        if !inst.is_null() {
            // SAFETY: forwarded.
            unsafe { r.attach(inst) };
        }
        r
    }

    /// Whether the context hands out from an instance.
    pub(crate) fn has_slab(&self) -> bool {
        !self.inst.is_null()
    }

    /// Hands out from `inst` (and its blocks) from now on.
    ///
    /// # Safety
    /// The pass holds `inst` and its blocks until it is finished, or until [`detach`].
    ///
    /// [`detach`]: Replayer::detach
    pub(crate) unsafe fn attach(&mut self, inst: *mut Instance) {
        self.flush_freed();
        self.inst = inst;
        // SAFETY: held by the pass, with its blocks (the caller's contract).
        (self.base, self.lane_base) = unsafe { ((*inst).base(), (*inst).lane_base()) };
    }

    /// Hands out from no instance: its requests go to the backend.
    pub(crate) fn detach(&mut self) {
        self.flush_freed();
        self.inst = std::ptr::null_mut();
        self.base = std::ptr::null_mut();
        self.lane_base = std::ptr::null_mut();
    }

    /// Clears the lane cells the context kept (see [`Replayer::freed`]) in its instance's
    /// bitmap: from then on any context may take them, and this one no longer touches
    /// the instance for them. Called before the context detaches, before its pass parks
    /// or gives the instance back, and when the replay is dropped.
    pub(crate) fn flush_freed(&mut self) {
        if self.freed.is_empty() {
            return;
        }
        debug_assert!(!self.inst.is_null(), "cells kept without an instance");
        // SAFETY: a kept cell's bit is set, so the instance is not retired (retirement
        // waits for every cell to be free) and its bitmap is still there, whether or not
        // the pass still holds it.
        if let Some(inst) = unsafe { self.inst.as_ref() } {
            self.freed.flush(&inst.lanes);
        }
    }
}

impl Drop for Replayer {
    fn drop(&mut self) {
        self.flush_freed();
    }
}
