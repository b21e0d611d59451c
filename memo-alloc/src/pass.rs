//! The data of a running pass: what its allocations need on the hot path, its counters,
//! its op-scope stack and its recorder. How a pass starts and ends is `lifecycle.rs`; the
//! public guards are `api.rs`.

use crate::compile::{CompiledPlan, Shrink, NO_SLOT};
use crate::recorder::Recorder;
use crate::registry::KeyEntry;
use crate::slab::{Instance, Slabs};
use crate::stats::{AbandonReason, PassCounters};

/// Scope node of allocations under an op the plan does not know.
pub(crate) const UNKNOWN: u32 = u32::MAX;

/// Deepest op-scope nesting tracked; deeper scopes are attributed to their ancestor at
/// this depth, identically in profiling and replay.
pub(crate) const MAX_DEPTH: usize = 64;

/// What a pass does with its allocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Recorded, then served by the backend.
    Profile,
    /// Served from a slab (or missed, with a reason).
    Replay,
    /// Served by the backend and counted.
    Backend,
}

/// A running pass, owned by the thread that started it (boxed; the thread state points
/// to it while it runs). Fields the allocation path reads come first.
pub(crate) struct Pass {
    /// The slab instance this pass holds (replay), or null.
    pub(crate) inst: *mut Instance,
    pub(crate) plan: *const CompiledPlan,
    pub(crate) base: *mut u8,
    /// The innermost scope node (the top of the op stack, 0 outside ops), kept here so
    /// the allocation path reads it without touching the stack.
    pub(crate) node: u32,
    pub(crate) counters: PassCounters,
    /// The node, and its cursor's `next` and `pending`, as they were before the last
    /// missed request (see `replay::undo`).
    pub(crate) undo: (u32, u32, u32),
    /// Whether this replay is of a smaller shape than its plan's (see `replay`).
    pub(crate) shrink: Shrink,
    /// Identity: unique in the process, so a guard can tell its pass from a later one.
    pub(crate) serial: u64,
    pub(crate) mode: Mode,
    pub(crate) entry: Option<&'static KeyEntry>,
    /// The plan registered with (replay), or null.
    pub(crate) slabs: *mut Slabs,
    pub(crate) recorder: Option<Recorder>,
    /// Replay: the key had a plan but this pass got no slab.
    pub(crate) no_slab: bool,
    /// The pass was cut short: its profile is not planned, its replay counts nowhere.
    pub(crate) abandoned: Option<AbandonReason>,
    /// The op-scope stack: scope node ids (the pass's root is not on it).
    stack: [u32; MAX_DEPTH],
    /// Entries in `stack` (may exceed `MAX_DEPTH`: the excess is not stored).
    depth: u32,
}

impl Pass {
    pub(crate) fn new(serial: u64, entry: Option<&'static KeyEntry>) -> Pass {
        Pass {
            inst: std::ptr::null_mut(),
            plan: std::ptr::null(),
            base: std::ptr::null_mut(),
            node: 0,
            counters: PassCounters::default(),
            undo: (UNKNOWN, NO_SLOT, NO_SLOT),
            shrink: Shrink::Off,
            serial,
            mode: Mode::Backend,
            entry,
            slabs: std::ptr::null_mut(),
            recorder: None,
            no_slab: false,
            abandoned: None,
            stack: [0; MAX_DEPTH],
            depth: 0,
        }
    }

    /// The op-stack depth.
    pub(crate) fn depth(&self) -> u32 {
        self.depth
    }

    /// The innermost scope node, or the root (0) outside any op.
    pub(crate) fn top(&self) -> u32 {
        match self.depth as usize {
            0 => 0,
            d => self.stack[d.min(MAX_DEPTH) - 1],
        }
    }

    /// The node entered at stack position `depth`, if stored.
    pub(crate) fn node_at(&self, depth: u32) -> u32 {
        self.stack.get(depth as usize).copied().unwrap_or(UNKNOWN)
    }

    /// Pushes scope `node` (not stored past [`MAX_DEPTH`]).
    pub(crate) fn push_scope(&mut self, node: u32) {
        if let Some(s) = self.stack.get_mut(self.depth as usize) {
            *s = node;
            self.node = node;
        }
        self.depth += 1;
    }

    /// Pops scopes down to `depth` (an op guard's entry depth: scopes it left open go too).
    pub(crate) fn pop_to(&mut self, depth: u32) {
        self.depth = self.depth.min(depth);
        self.node = self.top();
    }
}
